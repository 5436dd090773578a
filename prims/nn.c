/* nn.c - LayerNorm, NEOX RoPE, attention and GeGLU for the encoder (see
 * nn.h for the arithmetic every path reproduces).
 *
 * Workload: a sequence of up to a few thousand tokens of a few hundred
 * values.  LayerNorm, RoPE and GeGLU are linear in the data and dominated
 * by libm calls, so one scalar body serves every path and threads split the
 * token rows.  Attention is quadratic in n: its dot products run on
 * matvec.c's f32 kernels (a path's SIMD kernel or the reference), its
 * weighted sum on an AVX2 loop that rounds as the scalar one does, and
 * threads split the (head, query) pairs.  Built with -ffp-contract=off so
 * that no product and sum fuse behind the spec's back.
 */
#include "prims/nn.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prims/matvec.h"
#include "prims/pool.h"

/* llama.cpp's GELU constants (ggml-cpu/vec.h). */
#define RL_GELU_COEF_A 0.044715f
#define RL_SQRT_2_OVER_PI 0.79788456080286535587989211986876f
#define RL_SQRT_2_INV 0.70710678118654752440084436210484f

/* Values per thread below which the row-wise steps stay on one thread. */
#define RL_NN_MIN_VALUES 32768

/* Threads for `items` independent items of `cost` values each. */
static int rl_nn_threads(int threads, size_t items, size_t cost) {
    size_t nth = threads > RL_MAX_THREADS ? RL_MAX_THREADS : (size_t)threads;
    if (nth > items)
        nth = items;
    size_t total = cost && items > SIZE_MAX / cost ? SIZE_MAX : items * cost;
    if (nth > total / RL_NN_MIN_VALUES)
        nth = total / RL_NN_MIN_VALUES;
    return nth < 1 ? 1 : (int)nth;
}

/* The checks every entry shares: a path this CPU runs, a thread count. */
static rl_q8_status rl_nn_check_run(rl_path path, int threads) {
    if ((unsigned)path > RL_PATH_AVX512VNNI || threads < 1)
        return RL_Q8_BADARG;
    return rl_path_supported(path) ? RL_Q8_OK : RL_Q8_UNSUPPORTED;
}

/* 1 if [a, a+na) and [b, b+nb) (in floats) share memory. */
static int rl_nn_overlap(const float *a, size_t na, const float *b, size_t nb) {
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + na * sizeof(float);
    uintptr_t b0 = (uintptr_t)b, b1 = b0 + nb * sizeof(float);
    return a0 < b1 && b0 < a1;
}

/* n * m elements, 0 when the byte count of floats overflows. */
static size_t rl_nn_elems(size_t n, size_t m) {
    if (m && n > SIZE_MAX / sizeof(float) / m)
        return 0;
    return n * m;
}

/* The row-wise steps: one job shape, a function per token row. */
typedef struct {
    const float *x, *w;
    float *out;
    size_t n, d; /* rows, and the values per output row */
    float eps;
    rl_gelu kind;
    void (*row)(const void *job, size_t t);
} rl_rows_job;

static void rl_rows_run(void *ctx, int ith, int nth) {
    const rl_rows_job *j = ctx;
    size_t t0, t1;
    rl_pool_chunk(j->n, ith, nth, 1, &t0, &t1);
    for (size_t t = t0; t < t1; t++)
        j->row(j, t);
}

/* ---- LayerNorm ------------------------------------------------------ */

static void rl_ln_row(const void *job, size_t t) {
    const rl_rows_job *j = job;
    const float *x = j->x + t * j->d;
    float *y = j->out + t * j->d;
    double sum = 0.0;
    for (size_t i = 0; i < j->d; i++)
        sum += x[i];
    const float mean = (float)(sum / (double)j->d);
    double sum2 = 0.0;
    for (size_t i = 0; i < j->d; i++) {
        const float c = x[i] - mean;
        y[i] = c; /* x may be y: x[i] is not read again */
        sum2 += (double)(c * c);
    }
    const float var = (float)(sum2 / (double)j->d);
    const float s = 1.0f / sqrtf(var + j->eps);
    for (size_t i = 0; i < j->d; i++)
        y[i] = (y[i] * s) * j->w[i];
}

rl_q8_status rl_layer_norm_ex(const float *x, size_t n, size_t d, const float *w, float eps,
                              float *out, rl_path path, int threads) {
    rl_q8_status st = rl_nn_check_run(path, threads);
    if (st != RL_Q8_OK)
        return st;
    size_t nd = rl_nn_elems(n, d);
    if (d == 0 || (n && !nd) || (n && (!x || !w || !out)) ||
        (out != x && rl_nn_overlap(out, nd, x, nd)) || (n && rl_nn_overlap(out, nd, w, d)))
        return RL_Q8_BADARG;
    rl_rows_job job = {.x = x, .w = w, .out = out, .n = n, .d = d, .eps = eps, .row = rl_ln_row};
    if (n)
        rl_pool_run(rl_nn_threads(threads, n, d), rl_rows_run, &job);
    return RL_Q8_OK;
}

rl_q8_status rl_layer_norm(const float *x, size_t n, size_t d, const float *w, float eps,
                           float *out) {
    return rl_layer_norm_ex(x, n, d, w, eps, out, rl_path_best(), rl_threads());
}

/* ---- NEOX RoPE ------------------------------------------------------ */

typedef struct {
    const float *x;
    float *out;
    size_t n, heads, hd;
    float theta_scale;
    float *cache; /* per thread: hd floats (cos, sin per pair) */
} rl_rope_job;

static void rl_rope_run(void *ctx, int ith, int nth) {
    const rl_rope_job *j = ctx;
    const size_t half = j->hd / 2, row = j->heads * j->hd;
    float *cs = j->cache + (size_t)ith * j->hd, *sn = cs + half;
    size_t t0, t1;
    rl_pool_chunk(j->n, ith, nth, 1, &t0, &t1);
    for (size_t t = t0; t < t1; t++) {
        /* llama.cpp's rope cache: the angle is multiplied up pair by pair
         * in f32, not computed as p * theta_scale^i. */
        float theta = (float)t;
        for (size_t i = 0; i < half; i++) {
            cs[i] = cosf(theta);
            sn[i] = sinf(theta);
            theta *= j->theta_scale;
        }
        for (size_t h = 0; h < j->heads; h++) {
            const float *x = j->x + t * row + h * j->hd;
            float *y = j->out + t * row + h * j->hd;
            for (size_t i = 0; i < half; i++) {
                const float x0 = x[i], x1 = x[i + half];
                y[i] = x0 * cs[i] - x1 * sn[i];
                y[i + half] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

rl_q8_status rl_rope_neox_ex(const float *x, size_t n, size_t n_heads, size_t head_dim,
                             float freq_base, float *out, rl_path path, int threads) {
    rl_q8_status st = rl_nn_check_run(path, threads);
    if (st != RL_Q8_OK)
        return st;
    size_t row = rl_nn_elems(n_heads, head_dim), nd = row ? rl_nn_elems(n, row) : 0;
    if (!row || head_dim % 2 || (n && !nd) || (n && (!x || !out)) ||
        (out != x && rl_nn_overlap(out, nd, x, nd)))
        return RL_Q8_BADARG;
    if (n == 0)
        return RL_Q8_OK;
    int nth = rl_nn_threads(threads, n, row);
    float *cache = malloc((size_t)nth * head_dim * sizeof(float));
    if (!cache)
        return RL_Q8_NOMEM;
    rl_rope_job job = {.x = x, .out = out, .n = n, .heads = n_heads, .hd = head_dim,
                       .theta_scale = powf(freq_base, -2.0f / (float)head_dim),
                       .cache = cache};
    rl_pool_run(nth, rl_rope_run, &job);
    free(cache);
    return RL_Q8_OK;
}

rl_q8_status rl_rope_neox(const float *x, size_t n, size_t n_heads, size_t head_dim,
                          float freq_base, float *out) {
    return rl_rope_neox_ex(x, n, n_heads, head_dim, freq_base, out, rl_path_best(),
                           rl_threads());
}

/* ---- attention ------------------------------------------------------ */

/* o[c] = sum_t p[t] * v[t * stride + c] for c < m, t from j0 to j1 - 1 in
 * order, each step o = o + p * v with two roundings, o from +0. */
typedef void (*rl_wsum_fn)(float *o, const float *p, const float *v, size_t stride,
                           size_t j0, size_t j1, size_t m);

static void rl_wsum_ref(float *o, const float *p, const float *v, size_t stride, size_t j0,
                        size_t j1, size_t m) {
    memset(o, 0, m * sizeof *o);
    for (size_t t = j0; t < j1; t++)
        for (size_t c = 0; c < m; c++)
            o[c] = o[c] + p[t] * v[t * stride + c];
}

/* Element-wise, so any lane rounds as the scalar loop does.  Each output
 * is one dependent chain of adds (the order over keys is fixed), so 64
 * outputs -- a whole head of the usual size -- run as eight chains side by
 * side, and each key costs one pass over its values. */
__attribute__((target("avx2"))) static void rl_wsum_avx2(float *o, const float *p,
                                                        const float *v, size_t stride,
                                                        size_t j0, size_t j1, size_t m) {
    size_t c = 0;
    for (; c + 64 <= m; c += 64) {
        __m256 a[8];
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_setzero_ps();
        for (size_t t = j0; t < j1; t++) {
            const __m256 pv = _mm256_set1_ps(p[t]);
            const float *vt = v + t * stride + c;
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++)
                a[k] = _mm256_add_ps(a[k], _mm256_mul_ps(pv, _mm256_loadu_ps(vt + 8 * k)));
        }
        for (int k = 0; k < 8; k++)
            _mm256_storeu_ps(o + c + 8 * k, a[k]);
    }
    for (; c + 8 <= m; c += 8) {
        __m256 a = _mm256_setzero_ps();
        for (size_t t = j0; t < j1; t++)
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(p[t]),
                                               _mm256_loadu_ps(v + t * stride + c)));
        _mm256_storeu_ps(o + c, a);
    }
    if (c < m)
        rl_wsum_ref(o + c, p, v + c, stride, j0, j1, m - c);
}

typedef struct {
    const float *q, *kh, *v;
    float *out;
    size_t n, heads, hd, window;
    float scale;
    rl_matvec_f32_kernel dot;
    rl_wsum_fn wsum;
    float *scores; /* per thread: n floats */
} rl_attn_job;

static void rl_attn_run(void *ctx, int ith, int nth) {
    const rl_attn_job *j = ctx;
    const size_t row = j->heads * j->hd;
    float *a = j->scores + (size_t)ith * j->n;
    size_t p0, p1;
    /* Items are (head, query) pairs, query fastest: one head's keys stay
     * hot in cache across consecutive queries. */
    rl_pool_chunk(j->heads * j->n, ith, nth, 1, &p0, &p1);
    for (size_t it = p0; it < p1; it++) {
        const size_t h = it / j->n, i = it % j->n;
        size_t j0 = 0, j1 = j->n;
        if (j->window) {
            const size_t half = j->window / 2;
            j0 = i > half ? i - half : 0;
            j1 = j->n - i > half ? i + half + 1 : j->n;
        }
        const float *qi = j->q + i * row + h * j->hd;
        const float *kh = j->kh + h * j->n * j->hd;
        j->dot(kh, j->hd, qi, j0, j1, NULL, a);
        float m = -INFINITY;
        for (size_t t = j0; t < j1; t++) {
            a[t] = a[t] * j->scale;
            if (a[t] > m)
                m = a[t];
        }
        double sum = 0.0;
        for (size_t t = j0; t < j1; t++) {
            a[t] = expf(a[t] - m);
            sum += (double)a[t];
        }
        const float inv = (float)(1.0 / sum);
        for (size_t t = j0; t < j1; t++)
            a[t] = a[t] * inv;
        j->wsum(j->out + i * row + h * j->hd, a, j->v + h * j->hd, row, j0, j1, j->hd);
    }
}

rl_q8_status rl_attention_ex(const float *q, const float *k, const float *v, size_t n,
                             size_t n_heads, size_t head_dim, size_t window, float *out,
                             rl_path path, int threads) {
    rl_q8_status st = rl_nn_check_run(path, threads);
    if (st != RL_Q8_OK)
        return st;
    size_t row = rl_nn_elems(n_heads, head_dim), nd = row ? rl_nn_elems(n, row) : 0;
    if (!row || (n && !nd) || (n && (!q || !k || !v || !out)) ||
        rl_nn_overlap(out, nd, q, nd) || rl_nn_overlap(out, nd, k, nd) ||
        rl_nn_overlap(out, nd, v, nd))
        return RL_Q8_BADARG;
    if (n == 0)
        return RL_Q8_OK;
    /* The reference dot product is scalar fmaf, so (head, query) pairs are
     * worth a thread each well before the row-wise steps are. */
    int nth = rl_nn_threads(threads, n_heads * n, n * head_dim);
    if (rl_nn_elems((size_t)nth, n) == 0 || nd > SIZE_MAX / sizeof(float) - (size_t)nth * n)
        return RL_Q8_BADARG;
    float *scratch = malloc((nd + (size_t)nth * n) * sizeof(float));
    if (!scratch)
        return RL_Q8_NOMEM;
    /* Head-major keys: the dot kernels want rows of head_dim contiguous. */
    float *kh = scratch;
    for (size_t t = 0; t < n; t++)
        for (size_t h = 0; h < n_heads; h++)
            memcpy(kh + (h * n + t) * head_dim, k + t * row + h * head_dim,
                   head_dim * sizeof(float));
    rl_attn_job job = {.q = q, .kh = kh, .v = v, .out = out, .n = n, .heads = n_heads,
                       .hd = head_dim, .window = window,
                       .scale = 1.0f / sqrtf((float)head_dim),
                       .dot = rl_matvec_f32_kernel_for(path),
                       .wsum = path == RL_PATH_REF ? rl_wsum_ref : rl_wsum_avx2,
                       .scores = scratch + nd};
    rl_pool_run(nth, rl_attn_run, &job);
    free(scratch);
    return RL_Q8_OK;
}

rl_q8_status rl_attention(const float *q, const float *k, const float *v, size_t n,
                          size_t n_heads, size_t head_dim, size_t window, float *out) {
    return rl_attention_ex(q, k, v, n, n_heads, head_dim, window, out, rl_path_best(),
                           rl_threads());
}

/* ---- GeGLU ---------------------------------------------------------- */

float rl_gelu_f32(float a, rl_gelu kind) {
    if (kind == RL_GELU_TANH)
        return (0.5f * a) *
               (1.0f + tanhf((RL_SQRT_2_OVER_PI * a) * (1.0f + (RL_GELU_COEF_A * a) * a)));
    return (0.5f * a) * (1.0f + erff(a * RL_SQRT_2_INV));
}

static void rl_geglu_row(const void *job, size_t t) {
    const rl_rows_job *j = job;
    const float *x = j->x + t * 2 * j->d;
    float *y = j->out + t * j->d;
    for (size_t c = 0; c < j->d; c++)
        y[c] = rl_gelu_f32(x[c], j->kind) * x[j->d + c];
}

rl_q8_status rl_geglu_ex(const float *x, size_t n, size_t f, rl_gelu kind, float *out,
                         rl_path path, int threads) {
    rl_q8_status st = rl_nn_check_run(path, threads);
    if (st != RL_Q8_OK)
        return st;
    size_t f2 = rl_nn_elems(f, 2), nx = f2 ? rl_nn_elems(n, f2) : 0;
    if (!f2 || (unsigned)kind > RL_GELU_TANH || (n && !nx) || (n && (!x || !out)) ||
        rl_nn_overlap(out, n * f, x, nx))
        return RL_Q8_BADARG;
    rl_rows_job job = {.x = x, .out = out, .n = n, .d = f, .kind = kind, .row = rl_geglu_row};
    if (n)
        rl_pool_run(rl_nn_threads(threads, n, f2), rl_rows_run, &job);
    return RL_Q8_OK;
}

rl_q8_status rl_geglu(const float *x, size_t n, size_t f, rl_gelu kind, float *out) {
    return rl_geglu_ex(x, n, f, kind, out, rl_path_best(), rl_threads());
}
