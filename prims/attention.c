/* attention.c - multi-head attention for the encoder (see attention.h for
 * the arithmetic every path reproduces).
 *
 * Quadratic in n: the driver (checks, scratch, threads) and the reference
 * and AVX2 paths, whose dot products run on matvec.c's f32 kernels and
 * weighted sum on an AVX2 loop that rounds as the scalar one does, threads
 * splitting the (head, query) pairs; the AVX-512 paths' tiles of queries
 * are attention_avx512.c's.  The softmax has a form per path around
 * vmath.h's exponential.  Built with -ffp-contract=off so that no product
 * and sum fuse behind the spec's back.
 */
#include "prims/attention.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prims/attention_avx512.h"
#include "prims/matvec.h"
#include "prims/nn_common.h"
#include "prims/pool.h"
#include "prims/vmath.h"

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
__attribute__((target(RL_TARGET_AVX2))) static void rl_wsum_avx2(float *o, const float *p,
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


static double rl_softmax_tree(const double s[8]) {
    double b[4], c[2];
    for (int l = 0; l < 4; l++)
        b[l] = s[l] + s[l + 4];
    for (int l = 0; l < 2; l++)
        c[l] = b[l] + b[l + 2];
    return c[0] + c[1];
}

static void rl_softmax_ref(float *a, size_t j0, size_t j1, float scale) {
    float m = -INFINITY;
    for (size_t t = j0; t < j1; t++) {
        a[t] = a[t] * scale;
        if (a[t] > m)
            m = a[t];
    }
    double s[8] = {0};
    for (size_t t = j0; t < j1; t++) {
        a[t] = rl_expf(a[t] - m);
        s[(t - j0) % 8] += (double)a[t];
    }
    const float inv = (float)(1.0 / rl_softmax_tree(s));
    for (size_t t = j0; t < j1; t++)
        a[t] = a[t] * inv;
}

__attribute__((target(RL_TARGET_AVX2))) static void rl_softmax_avx2(float *a, size_t j0, size_t j1,
                                                               float scale) {
    const size_t n = j1 - j0;
    float *x = a + j0;
    const __m256 sc = _mm256_set1_ps(scale);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (size_t t = 0; t < n; t += 8) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - t < 8 ? n - t : 8)), iota);
        const __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + t, mk), sc);
        _mm256_maskstore_ps(x + t, mk, v);
        /* max(v, m) keeps m for a NaN v, as the scalar comparison does */
        mv = _mm256_blendv_ps(mv, _mm256_max_ps(v, mv), _mm256_castsi256_ps(mk));
    }
    float mm[8], m = -INFINITY;
    _mm256_storeu_ps(mm, mv);
    for (int l = 0; l < 8; l++)
        m = mm[l] > m ? mm[l] : m;
    const __m256 m8 = _mm256_set1_ps(m);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (size_t t = 0; t < n; t += 8) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - t < 8 ? n - t : 8)), iota);
        const __m256 v = _mm256_sub_ps(_mm256_maskload_ps(x + t, mk), m8);
        const __m128 e0 = rl_expf4_avx2(_mm256_castps256_ps128(v));
        const __m128 e1 = rl_expf4_avx2(_mm256_extractf128_ps(v, 1));
        const __m256 e = _mm256_and_ps(_mm256_set_m128(e1, e0), _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(x + t, mk, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double s[8];
    _mm256_storeu_pd(s, s0);
    _mm256_storeu_pd(s + 4, s1);
    const __m256 inv = _mm256_set1_ps((float)(1.0 / rl_softmax_tree(s)));
    for (size_t t = 0; t < n; t += 8) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - t < 8 ? n - t : 8)), iota);
        _mm256_maskstore_ps(x + t, mk, _mm256_mul_ps(_mm256_maskload_ps(x + t, mk), inv));
    }
}

/* Values per thread below which attention stays on one thread. */
#define RL_ATTN_MIN_VALUES 524288

static void rl_attn_run(void *ctx, int ith, int nth) {
    const rl_attn_job *j = ctx;
    const size_t row = j->heads * j->hd;
    float *a = j->scores + (size_t)ith * j->n;
    size_t p0, p1;
    /* Items are (head, query) pairs, query fastest: one head's keys stay
     * hot in cache across consecutive queries. */
    rl_pool_chunk(j->heads * j->nq, ith, nth, 1, &p0, &p1);
    for (size_t it = p0; it < p1; it++) {
        const size_t h = it / j->nq, i = it % j->nq;
        size_t j0, j1;
        rl_attn_range(j->n, j->window, i, &j0, &j1);
        const float *qi = j->q + i * row + h * j->hd;
        const float *kh = j->kh + h * j->n * j->hd;
        j->dot(kh, j->hd, qi, j0, j1, NULL, a);
        j->softmax(a, j0, j1, j->scale);
        float *o = j->out + i * row + h * j->hd;
        j->wsum(o, a, j->v + h * j->hd, row, j0, j1, j->hd);
        /* scanned while in cache (these paths do not test as they store) */
        if (j->nonfinite && rl_first_non_finite_f32(o, j->hd) < j->hd)
            rl_attn_flag(j);
    }
}

/* Attention's kernels per path (kernel.h).  The AVX-512 paths run the
 * query-tiled worker on transposed keys (tiled = 1), the others one query
 * at a time with the weighted sum and softmax of their path (AVX2's on the
 * AVX-512 paths too) and matvec.c's f32 rows for the scores. */
typedef struct {
    void (*run)(void *ctx, int ith, int nth);
    int tiled;
    rl_wsum_fn wsum;
    rl_softmax_fn softmax;
} rl_attn_kernels;

static const rl_attn_kernels rl_attn_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = {rl_attn_run, 0, rl_wsum_ref, rl_softmax_ref},
    [RL_PATH_AVX2] = {rl_attn_run, 0, rl_wsum_avx2, rl_softmax_avx2},
    [RL_PATH_AVX512] = {rl_attn_run_avx512, 1, rl_wsum_avx2, rl_softmax_avx2},
    [RL_PATH_AVX512VNNI] = {rl_attn_run_avx512, 1, rl_wsum_avx2, rl_softmax_avx2},
};

/* Queries [0, nq) of q against the n keys and values (nq == n, or any nq
 * with window 0): rl_attention_ex and rl_attention_rows_ex. */
static rl_status rl_attention_run(const float *q, size_t nq, const float *k, const float *v,
                                  size_t n, size_t n_heads, size_t head_dim, size_t window,
                                  float *out, int *nonfinite, rl_path path, int threads) {
    if (nonfinite)
        *nonfinite = 0;
    rl_status st = rl_check_run(path, threads);
    if (st != RL_OK)
        return st;
    size_t row = rl_nn_elems(n_heads, head_dim), nd = row ? rl_nn_elems(n, row) : 0,
           qd = row ? rl_nn_elems(nq, row) : 0;
    if (!row || (n && !nd) || (nq && !qd) || (nq && !n) || (nq != n && window) ||
        (nq && (!q || !k || !v || !out)) || rl_nn_overlap(out, qd, q, qd) ||
        rl_nn_overlap(out, qd, k, nd) || rl_nn_overlap(out, qd, v, nd))
        return RL_BADARG;
    if (nq == 0)
        return RL_OK;
    const rl_attn_kernels *ker = &rl_attn_table[path];
    const int wide = ker->tiled;
    /* whole blocks of sixteen keys */
    const size_t np = (n + 15) / 16 * 16;
    /* Values are (query, key, column) triples, a score's and a weighted
     * sum's multiply-add each; a thread wants some 25 us of them.  With a
     * smaller share (s1-nano's 8 heads of 16 at 32 tokens took 2 threads)
     * the split's wake-up and waits cost more than it saves. */
    int nth = rl_nn_threads(threads, n_heads * nq, n * head_dim, RL_ATTN_MIN_VALUES);
    /* chunks of (head, query) items or (head, query tile) items; scores per chunk */
    const int chunks = rl_pool_split_chunks(
        nth, n_heads * (wide ? (nq + RL_ATTN_QT - 1) / RL_ATTN_QT : nq));
    /* keys (AVX-512: transposed and padded to np), then per-chunk scores */
    const size_t kn = wide ? rl_nn_elems(np, row) : nd;
    const size_t sn = wide ? rl_nn_elems((size_t)chunks * RL_ATTN_QT, np)
                           : rl_nn_elems((size_t)chunks, n);
    if (!kn || !sn || kn > SIZE_MAX / sizeof(float) - 16 || sn > SIZE_MAX / sizeof(float) - 16 - kn)
        return RL_BADARG;
    /* From a cache line on: every block of transposed keys is whole
     * lines (np * row floats, a multiple of sixteen, before the scores),
     * so no 64-byte load of a key column straddles two (each would cost
     * two loads: a sixth of the scores' time at 8 heads of 32); malloc
     * and a rounded pointer, so the heap sees the same requests as
     * before */
    void *block = malloc((kn + sn + 16) * sizeof(float));
    if (!block)
        return RL_NOMEM;
    float *scratch = (float *)(((uintptr_t)block + 63) & ~(uintptr_t)63);
    float *kh = scratch;
    if (wide) {
        /* head h, column c, key t at kh[(t / 16) * 16 * row + (h *
         * head_dim + c) * 16 + t mod 16]; zero past n: k (n x row)
         * transposed block by block */
        rl_attn_transpose_avx512(k, n, row, kh, np);
    } else {
        /* Head-major keys: the dot kernels want rows of head_dim contiguous. */
        for (size_t t = 0; t < n; t++)
            for (size_t h = 0; h < n_heads; h++)
                memcpy(kh + (h * n + t) * head_dim, k + t * row + h * head_dim,
                       head_dim * sizeof(float));
    }
    rl_attn_job job = {.q = q, .kh = kh, .v = v, .out = out, .nq = nq, .n = n, .heads = n_heads,
                       .hd = head_dim, .window = window, .np = np,
                       .scale = 1.0f / sqrtf((float)head_dim),
                       .dot = rl_matvec_f32_table[path], .wsum = ker->wsum,
                       .softmax = ker->softmax, .scores = scratch + kn,
                       .nonfinite = nonfinite};
    rl_pool_run_split(chunks, nth, ker->run, &job);
    free(block);
    return RL_OK;
}

rl_status rl_attention_nf_ex(const float *q, const float *k, const float *v, size_t n,
                             size_t n_heads, size_t head_dim, size_t window, float *out,
                             int *nonfinite, rl_path path, int threads) {
    return rl_attention_run(q, n, k, v, n, n_heads, head_dim, window, out, nonfinite, path,
                            threads);
}

rl_status rl_attention_ex(const float *q, const float *k, const float *v, size_t n,
                          size_t n_heads, size_t head_dim, size_t window, float *out,
                          rl_path path, int threads) {
    return rl_attention_nf_ex(q, k, v, n, n_heads, head_dim, window, out, NULL, path, threads);
}

rl_status rl_attention_nf(const float *q, const float *k, const float *v, size_t n,
                          size_t n_heads, size_t head_dim, size_t window, float *out,
                          int *nonfinite) {
    return rl_attention_nf_ex(q, k, v, n, n_heads, head_dim, window, out, nonfinite,
                              rl_path_best(), rl_threads());
}

rl_status rl_attention(const float *q, const float *k, const float *v, size_t n,
                       size_t n_heads, size_t head_dim, size_t window, float *out) {
    return rl_attention_nf(q, k, v, n, n_heads, head_dim, window, out, NULL);
}

rl_status rl_attention_rows_nf_ex(const float *q, size_t nq, const float *k, const float *v,
                                  size_t n, size_t n_heads, size_t head_dim, float *out,
                                  int *nonfinite, rl_path path, int threads) {
    return rl_attention_run(q, nq, k, v, n, n_heads, head_dim, 0, out, nonfinite, path, threads);
}

rl_status rl_attention_rows_ex(const float *q, size_t nq, const float *k, const float *v,
                               size_t n, size_t n_heads, size_t head_dim, float *out,
                               rl_path path, int threads) {
    return rl_attention_rows_nf_ex(q, nq, k, v, n, n_heads, head_dim, out, NULL, path, threads);
}

rl_status rl_attention_rows_nf(const float *q, size_t nq, const float *k, const float *v,
                               size_t n, size_t n_heads, size_t head_dim, float *out,
                               int *nonfinite) {
    return rl_attention_rows_nf_ex(q, nq, k, v, n, n_heads, head_dim, out, nonfinite,
                                   rl_path_best(), rl_threads());
}

rl_status rl_attention_rows(const float *q, size_t nq, const float *k, const float *v,
                            size_t n, size_t n_heads, size_t head_dim, float *out) {
    return rl_attention_rows_nf(q, nq, k, v, n, n_heads, head_dim, out, NULL);
}
