/* nn.c - LayerNorm and NEOX RoPE for the encoder, LayerNorm with bias for
 * the decision head, and the scan for a non-finite value (see nn.h for the
 * arithmetic every path reproduces; the GELU steps are nn_gelu.c's,
 * attention is attention.c's).
 *
 * Workload: a sequence of up to a few thousand tokens of a few hundred
 * values.  These steps are linear in the data; threads split the token
 * rows.  Built with -ffp-contract=off so that no product and sum fuse
 * behind the spec's back.
 */
#include "prims/nn.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prims/nn_common.h"
#include "prims/pool.h"


/* ---- LayerNorm ------------------------------------------------------ */

/* The row's scale 1 / sqrt(var + eps), or NaN when var + eps is infinite:
 * a variance beyond single-float range would scale the row to zeros that
 * pass for a result. */
static float rl_ln_scale(float var, float eps) {
    const float v = var + eps;
    return isinf(v) ? NAN : 1.0f / sqrtf(v);
}

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
    const float s = rl_ln_scale((float)(sum2 / (double)j->d), j->eps);
    for (size_t i = 0; i < j->d; i++)
        y[i] = (y[i] * s) * j->w[i];
    if (j->b)
        for (size_t i = 0; i < j->d; i++)
            y[i] = y[i] + j->b[i];
    rl_nn_scan_row(j, y, j->d);
}

/* Rows [t0, t1) eight at a time: each row's sums are still one chain in
 * increasing j (the same operations as rl_ln_row), but eight chains
 * interleave, so the adds' latency overlaps instead of adding up. */
#define RL_LN_ROWS 8
static void rl_ln_run(void *ctx, int ith, int nth) {
    const rl_rows_job *j = ctx;
    const size_t d = j->d;
    size_t t0, t1;
    rl_pool_chunk(j->n, ith, nth, 1, &t0, &t1);
    size_t t = t0;
    for (; t + RL_LN_ROWS <= t1; t += RL_LN_ROWS) {
        const float *x = j->x + t * d;
        float *y = j->out + t * d;
        double sum[RL_LN_ROWS] = {0}, sum2[RL_LN_ROWS] = {0};
        float mean[RL_LN_ROWS], s[RL_LN_ROWS];
        for (size_t i = 0; i < d; i++) {
            _Pragma("GCC unroll 8")
            for (int k = 0; k < RL_LN_ROWS; k++)
                sum[k] += x[k * d + i];
        }
        for (int k = 0; k < RL_LN_ROWS; k++)
            mean[k] = (float)(sum[k] / (double)d);
        for (size_t i = 0; i < d; i++) {
            _Pragma("GCC unroll 8")
            for (int k = 0; k < RL_LN_ROWS; k++) {
                const float c = x[k * d + i] - mean[k];
                y[k * d + i] = c; /* x may be y: x[k * d + i] is not read again */
                sum2[k] += (double)(c * c);
            }
        }
        for (int k = 0; k < RL_LN_ROWS; k++)
            s[k] = rl_ln_scale((float)(sum2[k] / (double)d), j->eps);
        for (int k = 0; k < RL_LN_ROWS; k++)
            for (size_t i = 0; i < d; i++)
                y[k * d + i] = (y[k * d + i] * s[k]) * j->w[i];
        if (j->b)
            for (int k = 0; k < RL_LN_ROWS; k++)
                for (size_t i = 0; i < d; i++)
                    y[k * d + i] = y[k * d + i] + j->b[i];
        rl_nn_scan_row(j, y, RL_LN_ROWS * d);
    }
    for (; t < t1; t++)
        rl_ln_row(j, t);
}

/* Columns [i, i + 8) of the eight rows x[0..7] as eight registers,
 * register c holding column i + c of rows 0..7 in its lanes. */
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline void
rl_ln_columns8(const float *const x[8], size_t i, __m256 c[8]) {
    __m256 r[8], u[8], v[8];
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps(x[k] + i);
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 8; k += 2) {
        u[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        u[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 8; k += 4) {
        v[k] = _mm256_shuffle_ps(u[k], u[k + 2], 0x44);
        v[k + 1] = _mm256_shuffle_ps(u[k], u[k + 2], 0xee);
        v[k + 2] = _mm256_shuffle_ps(u[k + 1], u[k + 3], 0x44);
        v[k + 3] = _mm256_shuffle_ps(u[k + 1], u[k + 3], 0xee);
    }
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 4; k++) {
        c[k] = _mm256_permute2f128_ps(v[k], v[k + 4], 0x20);
        c[k + 4] = _mm256_permute2f128_ps(v[k], v[k + 4], 0x31);
    }
}

/* Column i of the eight rows x[0..7], one lane a row. */
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline __m256
rl_ln_column(const float *const x[8], size_t i) {
    return _mm256_setr_ps(x[0][i], x[1][i], x[2][i], x[3][i], x[4][i], x[5][i], x[6][i], x[7][i]);
}

/* Columns whose transposed blocks the sums' first pass keeps for the
 * second (four groups' worth: 32 KB of stack), rather than transposing
 * them again: the transposes are most of LayerNorm's work at these
 * widths. */
#define RL_LN_KEEP 256

/* Rows [t, t + nr) (nr <= 8 g) as g groups of eight with each group's
 * sums in the lanes of one register: lane k adds row k's values in
 * increasing j, the chain of rl_ln_row, eight columns at a time
 * transposed in registers (a group of fewer rows repeats the last row in
 * the lanes past them, and keeps only its own), the transposed blocks kept
 * for the second pass when d is at most RL_LN_KEEP.  The g groups' chains
 * are taken in turn, so that their adds' latencies overlap.  Then each
 * row's centring, scale, weight and bias sixteen values at a time (the f32
 * steps of rl_ln_row, the centred value computed again rather than
 * kept). */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_ln_rows_avx512(const rl_rows_job *j, size_t t, size_t nr, int g) {
    const size_t d = j->d, full = d / 8 * 8;
    const int keep = d <= RL_LN_KEEP;
    const __m512d dd = _mm512_set1_pd((double)d);
    const float *x[4][RL_LN_ROWS];
    __m512d sum[4], sum2[4];
    __m256 mean[4], c[8], kept[4][RL_LN_KEEP];
    _Pragma("GCC unroll 4")
    for (int h = 0; h < g; h++) {
        for (size_t k = 0; k < RL_LN_ROWS; k++) {
            const size_t r = (size_t)h * RL_LN_ROWS + k;
            x[h][k] = j->x + (t + (r < nr ? r : nr - 1)) * d;
        }
        sum[h] = _mm512_setzero_pd();
        sum2[h] = _mm512_setzero_pd();
    }
    for (size_t i = 0; i < full; i += 8) {
        _Pragma("GCC unroll 4")
        for (int h = 0; h < g; h++) {
            rl_ln_columns8(x[h], i, c);
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++) {
                sum[h] = _mm512_add_pd(sum[h], _mm512_cvtps_pd(c[k]));
                if (keep)
                    kept[h][i + (size_t)k] = c[k];
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int h = 0; h < g; h++) {
        for (size_t i = full; i < d; i++)
            sum[h] = _mm512_add_pd(sum[h], _mm512_cvtps_pd(rl_ln_column(x[h], i)));
        mean[h] = _mm512_cvtpd_ps(_mm512_div_pd(sum[h], dd));
    }
    for (size_t i = 0; i < full; i += 8) {
        _Pragma("GCC unroll 4")
        for (int h = 0; h < g; h++) {
            if (keep)
                _Pragma("GCC unroll 8")
                for (int k = 0; k < 8; k++)
                    c[k] = kept[h][i + (size_t)k];
            else
                rl_ln_columns8(x[h], i, c);
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++) {
                const __m256 e = _mm256_sub_ps(c[k], mean[h]);
                sum2[h] = _mm512_add_pd(sum2[h], _mm512_cvtps_pd(_mm256_mul_ps(e, e)));
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int h = 0; h < g; h++) {
        for (size_t i = full; i < d; i++) {
            const __m256 e = _mm256_sub_ps(rl_ln_column(x[h], i), mean[h]);
            sum2[h] = _mm512_add_pd(sum2[h], _mm512_cvtps_pd(_mm256_mul_ps(e, e)));
        }
    }
    __mmask16 bad = 0;
    for (int h = 0; h < g; h++) {
        float var[RL_LN_ROWS], mk[RL_LN_ROWS];
        _mm256_storeu_ps(var, _mm512_cvtpd_ps(_mm512_div_pd(sum2[h], dd)));
        _mm256_storeu_ps(mk, mean[h]);
        for (size_t k = 0; k < RL_LN_ROWS && (size_t)h * RL_LN_ROWS + k < nr; k++) {
            const __m512 m = _mm512_set1_ps(mk[k]), sc = _mm512_set1_ps(rl_ln_scale(var[k], j->eps));
            const float *xk = x[h][k];
            float *yk = j->out + (t + (size_t)h * RL_LN_ROWS + k) * d;
            for (size_t i = 0; i < d; i += 16) {
                const __mmask16 mm = d - i >= 16 ? 0xffff : (__mmask16)((1u << (d - i)) - 1u);
                const __m512 e = _mm512_sub_ps(_mm512_maskz_loadu_ps(mm, xk + i), m);
                __m512 r = _mm512_mul_ps(_mm512_mul_ps(e, sc), _mm512_maskz_loadu_ps(mm, j->w + i));
                if (j->b)
                    r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mm, j->b + i));
                _mm512_mask_storeu_ps(yk + i, mm, r);
                bad |= RL_NN_NONFINITE_512(mm, r);
            }
        }
    }
    if (bad)
        rl_nn_flag(j);
}

/* Rows [t0, t1) four groups of eight at a time (rl_ln_rows_avx512), the
 * rest two groups at a time, then at most eight in one. */
__attribute__((target(RL_TARGET_AVX512))) static void rl_ln_run_avx512(void *ctx, int ith,
                                                                      int nth) {
    const rl_rows_job *j = ctx;
    size_t t0, t1;
    rl_pool_chunk(j->n, ith, nth, 1, &t0, &t1);
    size_t t = t0;
    for (; t + 4 * RL_LN_ROWS <= t1; t += 4 * RL_LN_ROWS)
        rl_ln_rows_avx512(j, t, 4 * RL_LN_ROWS, 4);
    for (; t + RL_LN_ROWS < t1; t += 2 * RL_LN_ROWS)
        rl_ln_rows_avx512(j, t, t1 - t < 2 * RL_LN_ROWS ? t1 - t : 2 * RL_LN_ROWS, 2);
    if (t < t1)
        rl_ln_rows_avx512(j, t, t1 - t, 1);
}

/* LayerNorm's runs per path (kernel.h): below AVX-512, the scalar one. */
static const rl_pool_fn rl_ln_runs[RL_PATH_COUNT] = {
    [RL_PATH_REF] = rl_ln_run,
    [RL_PATH_AVX2] = rl_ln_run,
    [RL_PATH_AVX512] = rl_ln_run_avx512,
    [RL_PATH_AVX512VNNI] = rl_ln_run_avx512,
};

/* rl_layer_norm_bias_ex, and with nonfinite (not NULL) *nonfinite set to
 * whether out holds a NaN or an infinity. */
static rl_status rl_ln_go(const float *x, size_t n, size_t d, const float *w, const float *b,
                          float eps, float *out, rl_path path, int threads, int *nonfinite) {
    rl_status st = rl_check_run(path, threads);
    if (st != RL_OK)
        return st;
    size_t nd = rl_nn_elems(n, d);
    if (d == 0 || (n && !nd) || (n && (!x || !w || !out)) ||
        (out != x && rl_nn_overlap(out, nd, x, nd)) || (n && rl_nn_overlap(out, nd, w, d)) ||
        (n && b && rl_nn_overlap(out, nd, b, d)))
        return RL_BADARG;
    rl_rows_job job = {.x = x, .w = w, .b = b, .out = out, .n = n, .d = d, .eps = eps,
                       .nonfinite = nonfinite, .row = rl_ln_row};
    return rl_rows_go(&job, rl_ln_runs[path], d, threads);
}

rl_status rl_layer_norm_bias_ex(const float *x, size_t n, size_t d, const float *w,
                                const float *b, float eps, float *out, rl_path path,
                                int threads) {
    return rl_ln_go(x, n, d, w, b, eps, out, path, threads, NULL);
}

rl_status rl_layer_norm_bias_nf(const float *x, size_t n, size_t d, const float *w,
                                const float *b, float eps, float *out, int *nonfinite) {
    return rl_ln_go(x, n, d, w, b, eps, out, rl_path_best(), rl_threads(), nonfinite);
}

rl_status rl_layer_norm_ex(const float *x, size_t n, size_t d, const float *w, float eps,
                           float *out, rl_path path, int threads) {
    return rl_layer_norm_bias_ex(x, n, d, w, NULL, eps, out, path, threads);
}

rl_status rl_layer_norm(const float *x, size_t n, size_t d, const float *w, float eps,
                        float *out) {
    return rl_layer_norm_ex(x, n, d, w, eps, out, rl_path_best(), rl_threads());
}

rl_status rl_layer_norm_bias(const float *x, size_t n, size_t d, const float *w,
                             const float *b, float eps, float *out) {
    return rl_layer_norm_bias_ex(x, n, d, w, b, eps, out, rl_path_best(), rl_threads());
}

/* ---- The residual sum ----------------------------------------------- */

/* out := a + b over n values, whether a sum is not finite (its exponent
 * bits all set), per path: sixteen sums at a time with their class tested
 * as they are stored, eight with the exponent test, one by one. */
static int rl_add_ref(const float *a, const float *b, size_t n, float *out) {
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = a[i] + b[i];
        uint32_t u;
        memcpy(&u, out + i, sizeof u);
        any |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return any != 0;
}

__attribute__((target(RL_TARGET_AVX2))) static int rl_add_avx2(const float *a, const float *b,
                                                                size_t n, float *out) {
    const __m256i e = _mm256_set1_epi32(0x7f800000);
    __m256i any = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 s = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(out + i, s);
        any = _mm256_or_si256(any,
                              _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(s), e), e));
    }
    const int tail = rl_add_ref(a + i, b + i, n - i, out + i);
    return tail || !_mm256_testz_si256(any, any);
}

__attribute__((target(RL_TARGET_AVX512))) static int rl_add_avx512(const float *a,
                                                                    const float *b, size_t n,
                                                                    float *out) {
    __mmask16 bad = 0;
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 s = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i),
                                       _mm512_maskz_loadu_ps(m, b + i));
        _mm512_mask_storeu_ps(out + i, m, s);
        bad |= RL_NN_NONFINITE_512(m, s);
    }
    return bad != 0;
}

static int (*const rl_add_paths[RL_PATH_COUNT])(const float *a, const float *b, size_t n,
                                                 float *out) = {
    [RL_PATH_REF] = rl_add_ref,
    [RL_PATH_AVX2] = rl_add_avx2,
    [RL_PATH_AVX512] = rl_add_avx512,
    [RL_PATH_AVX512VNNI] = rl_add_avx512,
};

rl_status rl_add_nf_ex(const float *a, const float *b, size_t n, float *out, int *nonfinite,
                       rl_path path) {
    rl_status st = rl_check_run(path, 1);
    if (st != RL_OK)
        return st;
    /* out is a, b or apart from both: the sums read each value before
     * they overwrite it */
    if (n && (!a || !b || !out || (out != a && rl_nn_overlap(out, n, a, n)) ||
              (out != b && rl_nn_overlap(out, n, b, n))))
        return RL_BADARG;
    const int bad = n ? rl_add_paths[path](a, b, n, out) : 0;
    if (nonfinite)
        *nonfinite = bad;
    return RL_OK;
}

rl_status rl_add_nf(const float *a, const float *b, size_t n, float *out, int *nonfinite) {
    return rl_add_nf_ex(a, b, n, out, nonfinite, rl_path_best());
}

/* ---- NEOX RoPE ------------------------------------------------------ */

typedef struct {
    const float *x[2];
    float *out[2]; /* out[1] NULL: one array to turn */
    size_t n, heads, hd;
    size_t xstride; /* floats from one input row to the next (heads * hd, or more) */
    float theta_scale;
    const float *table; /* the angles of positions below RL_ROPE_TABLE_POS, or NULL */
    void (*turn)(const float *x, float *y, size_t heads, size_t hd, const float *cs);
    float *cache;       /* per chunk: hd floats (cos, sin per pair) */
} rl_rope_job;

/* Positions whose angles a table keeps, and tables kept: the angles of a
 * position depend on theta_scale and head_dim alone, and an encoder asks
 * for the same one or two pairs layer after layer, question after
 * question, where computing them (two libm calls a pair) cost more than
 * turning the rows.  A table of RL_ROPE_TABLE_POS positions of head_dim
 * floats each is made on the first call that wants it and kept for the
 * process; a pair past RL_ROPE_TABLES computes its angles per call. */
#define RL_ROPE_TABLE_POS 1024
#define RL_ROPE_TABLES 8

/* Position t's cosines then sines, as the rows of a table hold them. */
static void rl_rope_angles(size_t t, size_t half, float theta_scale, float *cs) {
    /* llama.cpp's rope cache: the angle is multiplied up pair by pair in
     * f32, not computed as p * theta_scale^i. */
    float theta = (float)t;
    for (size_t i = 0; i < half; i++) {
        cs[i] = cosf(theta);
        cs[half + i] = sinf(theta);
        theta *= theta_scale;
    }
}

static struct {
    float theta_scale;
    size_t hd;
    const float *table;
} rl_rope_tables[RL_ROPE_TABLES];
static int rl_rope_ntables;
static pthread_mutex_t rl_rope_lock = PTHREAD_MUTEX_INITIALIZER;

/* The table of (theta_scale, hd), made if there is room; NULL if not. */
static const float *rl_rope_table(float theta_scale, size_t hd) {
    const float *t = NULL;
    pthread_mutex_lock(&rl_rope_lock);
    for (int i = 0; i < rl_rope_ntables && !t; i++)
        if (rl_rope_tables[i].hd == hd &&
            memcmp(&rl_rope_tables[i].theta_scale, &theta_scale, sizeof theta_scale) == 0)
            t = rl_rope_tables[i].table;
    if (!t && rl_rope_ntables < RL_ROPE_TABLES && hd <= SIZE_MAX / sizeof(float) / RL_ROPE_TABLE_POS) {
        float *m = malloc(RL_ROPE_TABLE_POS * hd * sizeof *m);
        if (m) {
            for (size_t p = 0; p < RL_ROPE_TABLE_POS; p++)
                rl_rope_angles(p, hd / 2, theta_scale, m + p * hd);
            rl_rope_tables[rl_rope_ntables].theta_scale = theta_scale;
            rl_rope_tables[rl_rope_ntables].hd = hd;
            rl_rope_tables[rl_rope_ntables++].table = t = m;
        }
    }
    pthread_mutex_unlock(&rl_rope_lock);
    return t;
}

/* Turn the heads of one row by a position's angles (cs: half cosines then
 * half sines), y may be x: per pair, the f32 products and sums nn.h
 * names, with no fma, so a path's form answers the scalar bits. */
typedef void (*rl_rope_turn_fn)(const float *x, float *y, size_t heads, size_t hd,
                                const float *cs);

static void rl_rope_turn_ref(const float *x, float *y, size_t heads, size_t hd,
                             const float *cs) {
    const size_t half = hd / 2;
    const float *sn = cs + half;
    for (size_t h = 0; h < heads; h++, x += hd, y += hd)
        for (size_t i = 0; i < half; i++) {
            const float x0 = x[i], x1 = x[i + half];
            y[i] = x0 * cs[i] - x1 * sn[i];
            y[i + half] = x0 * sn[i] + x1 * cs[i];
        }
}

__attribute__((target(RL_TARGET_AVX2))) static void
rl_rope_turn_avx2(const float *x, float *y, size_t heads, size_t hd, const float *cs) {
    const size_t half = hd / 2, full = half / 8 * 8;
    const float *sn = cs + half;
    for (size_t h = 0; h < heads; h++, x += hd, y += hd) {
        for (size_t i = 0; i < full; i += 8) {
            const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + half);
            const __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
            _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
            _mm256_storeu_ps(y + i + half,
                             _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
        }
        for (size_t i = full; i < half; i++) {
            const float x0 = x[i], x1 = x[i + half];
            y[i] = x0 * cs[i] - x1 * sn[i];
            y[i + half] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* RoPE's turn per path (kernel.h): AVX2's on the AVX-512 paths too (a
 * head's half is 8 to 64 values). */
static const rl_rope_turn_fn rl_rope_turn_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = rl_rope_turn_ref,
    [RL_PATH_AVX2] = rl_rope_turn_avx2,
    [RL_PATH_AVX512] = rl_rope_turn_avx2,
    [RL_PATH_AVX512VNNI] = rl_rope_turn_avx2,
};

static void rl_rope_run(void *ctx, int ith, int nth) {
    const rl_rope_job *j = ctx;
    const size_t half = j->hd / 2, row = j->heads * j->hd;
    float *own = j->cache + (size_t)ith * j->hd;
    size_t t0, t1;
    rl_pool_chunk(j->n, ith, nth, 1, &t0, &t1);
    for (size_t t = t0; t < t1; t++) {
        const float *cs = own;
        if (j->table && t < RL_ROPE_TABLE_POS)
            cs = j->table + t * j->hd;
        else
            rl_rope_angles(t, half, j->theta_scale, own);
        /* one position's angles turn both arrays (q and k): the same
         * table either way, computed once */
        for (int a = 0; a < 2 && j->out[a]; a++)
            j->turn(j->x[a] + t * j->xstride, j->out[a] + t * row, j->heads, j->hd, cs);
    }
}

/* x2 and out2 NULL: x alone (rl_rope_neox_ex); else both pairs.  The
 * input rows lie xstride floats apart (0: packed, heads * head_dim); an
 * output may be its input only when they are packed. */
static rl_status rl_rope_run_arrays(const float *x, const float *x2, size_t xstride, size_t n,
                                    size_t n_heads, size_t head_dim, float freq_base,
                                    float *out, float *out2, rl_path path, int threads) {
    rl_status st = rl_check_run(path, threads);
    if (st != RL_OK)
        return st;
    size_t row = rl_nn_elems(n_heads, head_dim), nd = row ? rl_nn_elems(n, row) : 0;
    if (!xstride)
        xstride = row;
    /* the floats an input spans */
    size_t nx = nd;
    if (xstride != row) {
        if (xstride < row || (n > 1 && n - 1 > (SIZE_MAX / sizeof(float) - row) / xstride))
            return RL_BADARG;
        nx = n ? (n - 1) * xstride + row : 0;
    }
    if (!row || head_dim % 2 || (n && !nd) || (n && (!x || !out)) ||
        (out != x && rl_nn_overlap(out, nd, x, nx)) || (out == x && xstride != row) ||
        (!x2 != !out2) ||
        (n && x2 && ((out2 != x2 && rl_nn_overlap(out2, nd, x2, nx)) ||
                     (out2 == x2 && xstride != row) || rl_nn_overlap(out2, nd, x, nx) ||
                     rl_nn_overlap(out, nd, x2, nx) || rl_nn_overlap(out, nd, out2, nd))))
        return RL_BADARG;
    if (n == 0)
        return RL_OK;
    int nth = rl_nn_threads(threads, n, x2 ? 2 * row : row, RL_NN_MIN_VALUES),
        chunks = rl_pool_split_chunks(nth, n);
    /* the angles of positions past the table: on the stack when small (a
     * question's call needs none, and a malloc cost more than its turn) */
    float small[1024], *cache = small;
    if ((size_t)chunks * head_dim > sizeof small / sizeof *small &&
        !(cache = malloc((size_t)chunks * head_dim * sizeof(float))))
        return RL_NOMEM;
    const float theta_scale = powf(freq_base, -2.0f / (float)head_dim);
    rl_rope_job job = {.x = {x, x2}, .out = {out, out2}, .n = n, .heads = n_heads,
                       .hd = head_dim, .xstride = xstride, .theta_scale = theta_scale,
                       .table = rl_rope_table(theta_scale, head_dim),
                       .turn = rl_rope_turn_table[path], .cache = cache};
    rl_pool_run_split(chunks, nth, rl_rope_run, &job);
    if (cache != small)
        free(cache);
    return RL_OK;
}

rl_status rl_rope_neox_ex(const float *x, size_t n, size_t n_heads, size_t head_dim,
                          float freq_base, float *out, rl_path path, int threads) {
    return rl_rope_run_arrays(x, NULL, 0, n, n_heads, head_dim, freq_base, out, NULL, path,
                              threads);
}

rl_status rl_rope_neox(const float *x, size_t n, size_t n_heads, size_t head_dim,
                       float freq_base, float *out) {
    return rl_rope_neox_ex(x, n, n_heads, head_dim, freq_base, out, rl_path_best(),
                           rl_threads());
}

rl_status rl_rope_neox2_ex(const float *q, const float *k, size_t n, size_t n_heads,
                           size_t head_dim, float freq_base, float *q_out, float *k_out,
                           rl_path path, int threads) {
    if (!k || !k_out)
        return RL_BADARG;
    return rl_rope_run_arrays(q, k, 0, n, n_heads, head_dim, freq_base, q_out, k_out, path,
                              threads);
}

rl_status rl_rope_neox2_strided_ex(const float *q, const float *k, size_t stride, size_t n,
                                   size_t n_heads, size_t head_dim, float freq_base,
                                   float *q_out, float *k_out, rl_path path, int threads) {
    if (!k || !k_out || !stride)
        return RL_BADARG;
    return rl_rope_run_arrays(q, k, stride, n, n_heads, head_dim, freq_base, q_out, k_out,
                              path, threads);
}

rl_status rl_rope_neox2(const float *q, const float *k, size_t n, size_t n_heads,
                        size_t head_dim, float freq_base, float *q_out, float *k_out) {
    return rl_rope_neox2_ex(q, k, n, n_heads, head_dim, freq_base, q_out, k_out,
                            rl_path_best(), rl_threads());
}

/* Non-finite: every exponent bit set.  A group of values is one OR of
 * integer comparisons (no float operation, so no trap, and no branch per
 * value): 32 at a time on the AVX2 paths, 16 (SSE2) with the SIMD knob
 * off; only the group that has one is searched value by value. */
#define RL_EXP_BITS 0x7f800000u

__attribute__((target(RL_TARGET_AVX2))) static size_t
rl_finite_prefix_avx2(const float *x, size_t n) {
    const __m256i m = _mm256_set1_epi32((int)RL_EXP_BITS);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i *p = (const __m256i *)(const void *)(x + i);
        const __m256i a = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_loadu_si256(p), m), m);
        const __m256i b = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_loadu_si256(p + 1), m), m);
        const __m256i c = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_loadu_si256(p + 2), m), m);
        const __m256i d = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_loadu_si256(p + 3), m), m);
        if (!_mm256_testz_si256(_mm256_or_si256(a, b), _mm256_or_si256(a, b)) ||
            !_mm256_testz_si256(_mm256_or_si256(c, d), _mm256_or_si256(c, d)))
            break;
    }
    return i;
}

static size_t rl_finite_prefix_sse2(const float *x, size_t n) {
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i m = _mm_set1_epi32((int)RL_EXP_BITS);
    for (; i + 16 <= n; i += 16) {
        const __m128i *p = (const __m128i *)(const void *)(x + i);
        const __m128i a = _mm_cmpeq_epi32(_mm_and_si128(_mm_loadu_si128(p), m), m);
        const __m128i b = _mm_cmpeq_epi32(_mm_and_si128(_mm_loadu_si128(p + 1), m), m);
        const __m128i c = _mm_cmpeq_epi32(_mm_and_si128(_mm_loadu_si128(p + 2), m), m);
        const __m128i d = _mm_cmpeq_epi32(_mm_and_si128(_mm_loadu_si128(p + 3), m), m);
        if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d))))
            break;
    }
#else
    (void)x, (void)n;
#endif
    return i;
}

/* The scan per path (kernel.h): the AVX-512 paths run AVX2's. */
static size_t (*const rl_finite_prefix[RL_PATH_COUNT])(const float *x, size_t n) = {
    [RL_PATH_REF] = rl_finite_prefix_sse2,
    [RL_PATH_AVX2] = rl_finite_prefix_avx2,
    [RL_PATH_AVX512] = rl_finite_prefix_avx2,
    [RL_PATH_AVX512VNNI] = rl_finite_prefix_avx2,
};

size_t rl_first_non_finite_f32(const float *x, size_t n) {
    size_t i = rl_finite_prefix[rl_path_best()](x, n);
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, sizeof b);
        if ((b & RL_EXP_BITS) == RL_EXP_BITS)
            return i;
    }
    return n;
}
