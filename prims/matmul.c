/* matmul.c - a weight matrix times a sequence of activation rows (see
 * matmul.h for the arithmetic).
 *
 * Workload: the encoder's products, a few hundred tokens against weights of
 * a few MB.  A product per token would stream the weights once per token;
 * here each weight tile is read from memory once and reused from L1 by every
 * token, using matvec.c's row kernels unchanged, so a row of the result is
 * the same computation as one vector's, not a re-implementation of it.
 * One vector is the one-token case (rl_matvec_q8_ex, rl_matvec_run; the
 * f32 baseline's vector has its own driver at the end).  This file is
 * built with -ffp-contract=off: the Q8x2 residual's f32 product and
 * difference must stay two roundings.
 */
#include "prims/matmul.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/matmul_f32.h"
#include "prims/matmul_narrow.h"
#include "prims/matmul_q8.h"
#include "prims/matvec.h"
#include "prims/pool.h"

/* Weight bytes per tile: about half of a 32 KB L1 data cache, leaving the
 * rest for the activation block streaming past it. */
#define RL_MM_TILE_BYTES 16384
/* Rows per tile at least, for float weights on the token-tiled kernels
 * (matmul_f32.c): two groups of four share each block of activations the
 * tile fetches from L2, where 16 KB of f32 rows of 1,024 columns were 4
 * rows and read all the activations again for every four (256 x 1024 F32
 * 4-5% faster at 46-92 tokens, 2304 x 768 3-12%).  Tiles of 32 KB for all
 * widths were slower from 512 columns down. */
#define RL_MM_FLOAT_MIN_ROWS 8
/* Rows per SIMD group (matvec.h's); tiles and thread chunks are multiples. */
#define RL_MM_GROUP RL_MATVEC_ROWS
/* Tokens from which the VNNI path runs the token-tiled kernel: it arranges
 * the weight rows once per call, which fewer tokens do not repay; below,
 * each token takes the VNNI matvec kernel (the same bits, doc/products.md §3). */
#ifndef RL_MM_VNNI_MIN_TOKENS
#define RL_MM_VNNI_MIN_TOKENS 4
#endif

const char *rl_wtype_name(rl_wtype t) {
    switch (t) {
    case RL_WT_F32: return "f32";
    case RL_WT_F16: return "f16";
    case RL_WT_BF16: return "bf16";
    case RL_WT_Q8_0: return "q8_0";
    }
    return "unknown";
}

const char *rl_act_name(rl_act a) {
    switch (a) {
    case RL_ACT_Q8: return "q8";
    case RL_ACT_Q8X2: return "q8x2";
    }
    return "unknown";
}

void rl_q8x2_residual(const float *x, size_t n, const rl_block_q8_0 *xq, int8_t *r) {
    for (size_t b = 0; b < n / RL_QK8_0; b++) {
        const float d = rl_gguf_f16_to_f32(xq[b].d);
        int8_t *rb = r + RL_QK8_0 * b;
        if (d == 0.0f) {
            memset(rb, 0, RL_QK8_0);
            continue;
        }
        const float inv = 128.0f / d;
        for (int j = 0; j < RL_QK8_0; j++) {
            const float p = d * (float)xq[b].qs[j];
            const float e = x[RL_QK8_0 * b + j] - p;
            /* roundf rounds half away from zero; |e| is about d / 2, so the
             * quotient is near 64 and the clamp only guards the corner of a
             * scale that rounded down to f16. */
            float v = roundf(e * inv);
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            rb[j] = (int8_t)v;
        }
    }
}

/* rl_q8x2_residual sixteen values at a time: the same two f32 roundings
 * (d * q, then x - p; no fma), the same quotient, and roundf's rounding
 * (half away from zero) from the truncation t and the exact remainder v -
 * t: t + sign(v) where |v - t| >= 0.5. */
__attribute__((target(RL_TARGET_AVX512))) static void
rl_q8x2_residual_avx512(const float *x, size_t n, const rl_block_q8_0 *xq, int8_t *r) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 lim = _mm512_set1_ps(127.0f), nlim = _mm512_set1_ps(-127.0f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    for (size_t b = 0; b < n / RL_QK8_0; b++) {
        const float d = rl_gguf_f16_to_f32(xq[b].d);
        int8_t *rb = r + RL_QK8_0 * b;
        if (d == 0.0f) {
            memset(rb, 0, RL_QK8_0);
            continue;
        }
        const __m512 dv = _mm512_set1_ps(d), inv = _mm512_set1_ps(128.0f / d);
        for (int h = 0; h < 2; h++) {
            const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(xq[b].qs + 16 * h))));
            const __m512 e = _mm512_sub_ps(_mm512_loadu_ps(x + RL_QK8_0 * b + 16 * h),
                                           _mm512_mul_ps(dv, q));
            const __m512 v = _mm512_mul_ps(e, inv);
            const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m512 f = _mm512_abs_ps(_mm512_sub_ps(v, t));
            const __m512 sg = _mm512_castsi512_ps(
                _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), sign),
                                _mm512_castps_si512(one)));
            __m512 w = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(f, half, _CMP_GE_OQ), t, sg);
            w = _mm512_min_ps(_mm512_max_ps(w, nlim), lim);
            _mm_storeu_si128((__m128i *)(void *)(rb + 16 * h),
                             _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(w)));
        }
    }
}

static size_t rl_mm_elt_bytes(rl_wtype wt) {
    return wt == RL_WT_F32 ? 4 : 2;
}

/* Bytes of one weight row, or 0 when it overflows size_t. */
static size_t rl_mm_row_bytes(rl_wtype wt, size_t cols) {
    if (wt == RL_WT_Q8_0)
        return rl_q8_bytes(cols);
    return cols > SIZE_MAX / 4 ? 0 : cols * rl_mm_elt_bytes(wt);
}

/* ---- Q8_0 AVX-512: four rows times four tokens ------------------------ */

/* Tokens per tile: 2 accumulators each, plus the weights' registers. */
#define RL_MM_T 4

/* Rows [r0, r1) for all n tokens (yd / yf n x rows).  The per-row, per-lane
 * arithmetic is matvec.c's AVX-512 body exactly (the same integer dots,
 * the same lane layout, the same scale product and FMA order); what
 * changes is that a block's weight work (abs, sign mask, scales) is done
 * once and used by four tokens, whose accumulators stay in registers. */
#define RL_MM_AVX512_TILE(DOT)                                                              \
    const __m512i idx = _mm512_setr_epi32(0, 8, 16, 24, 2, 10, 18, 26,                      \
                                          4, 12, 20, 28, 6, 14, 22, 30);                    \
    const __m512i idx1 = _mm512_add_epi32(idx, _mm512_set1_epi32(1));                       \
    for (size_t r = r0; r < r1; r += 4) {                                                   \
        const size_t nr = r1 - r < 4 ? r1 - r : 4;                                          \
        const rl_block_q8_0 *w0 = w + r * nb, *w1 = w + (r + (nr > 1)) * nb;               \
        const rl_block_q8_0 *w2 = w + (r + (nr > 2 ? 2 : nr - 1)) * nb;                     \
        const rl_block_q8_0 *w3 = w + (r + nr - 1) * nb;                                    \
        for (size_t t0 = 0; t0 < n; t0 += RL_MM_T) {                                        \
            const size_t nt = n - t0 < RL_MM_T ? n - t0 : RL_MM_T;                          \
            const rl_block_q8_0 *xk[RL_MM_T];                                               \
            const double *dk[RL_MM_T];                                                      \
            const int8_t *rk[RL_MM_T];                                                      \
            __m512d acc[RL_MM_T][2];                                                        \
            for (size_t k = 0; k < RL_MM_T; k++) {                                          \
                const size_t t = t0 + (k < nt ? k : nt - 1);                                \
                xk[k] = xq + t * nb, dk[k] = dx + t * nb, rk[k] = xr ? xr + t * nb * 32 : NULL; \
                acc[k][0] = acc[k][1] = _mm512_setzero_pd();                                \
            }                                                                               \
            for (size_t b = 0; b < nb; b++) {                                               \
                const __m512i wab = _mm512_inserti64x4(                                     \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)w0[b].qs)), \
                    _mm256_loadu_si256((const __m256i *)(const void *)w1[b].qs), 1);        \
                const __m512i wcd = _mm512_inserti64x4(                                     \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)w2[b].qs)), \
                    _mm256_loadu_si256((const __m256i *)(const void *)w3[b].qs), 1);        \
                const __mmask64 mab = _mm512_movepi8_mask(wab), mcd = _mm512_movepi8_mask(wcd); \
                const __m512i aab = _mm512_abs_epi8(wab), acd = _mm512_abs_epi8(wcd);       \
                const __m128i dw = _mm_setr_epi16((short)w0[b].d, (short)w1[b].d,           \
                                                  (short)w2[b].d, (short)w3[b].d, 0, 0, 0, 0); \
                const __m512d dw8 = _mm512_broadcast_f64x4(_mm256_cvtps_pd(_mm_cvtph_ps(dw))); \
                _Pragma("GCC unroll 4")                                                     \
                for (size_t k = 0; k < RL_MM_T; k++) {                                      \
                    const __m512i qx = _mm512_broadcast_i64x4(                              \
                        _mm256_loadu_si256((const __m256i *)(const void *)xk[k][b].qs));    \
                    const __m512i z = _mm512_setzero_si512();                               \
                    __m512i eab = DOT(aab, _mm512_mask_sub_epi8(qx, mab, z, qx));           \
                    __m512i ecd = DOT(acd, _mm512_mask_sub_epi8(qx, mcd, z, qx));           \
                    if (xr) {                                                               \
                        const __m512i rx = _mm512_broadcast_i64x4(                          \
                            _mm256_loadu_si256((const __m256i *)(const void *)(rk[k] + 32 * b))); \
                        eab = _mm512_add_epi32(_mm512_slli_epi32(eab, 7),                   \
                                               DOT(aab, _mm512_mask_sub_epi8(rx, mab, z, rx))); \
                        ecd = _mm512_add_epi32(_mm512_slli_epi32(ecd, 7),                   \
                                               DOT(acd, _mm512_mask_sub_epi8(rx, mcd, z, rx))); \
                    }                                                                       \
                    /* lane sums: the even and the odd element of each pair gathered   \
                     * into the lane layout, then added (exact, in either order) */     \
                    const __m512i tt = _mm512_add_epi32(_mm512_permutex2var_epi32(eab, idx, ecd), \
                                                        _mm512_permutex2var_epi32(eab, idx1, ecd)); \
                    const __m512d sc = _mm512_mul_pd(dw8, _mm512_set1_pd(dk[k][b]));        \
                    acc[k][0] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(tt)), \
                                                sc, acc[k][0]);                             \
                    acc[k][1] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(tt, 1)), \
                                                sc, acc[k][1]);                             \
                }                                                                           \
            }                                                                               \
            for (size_t k = 0; k < nt; k++) {                                               \
                double out[4];                                                              \
                __m256d a0 = _mm512_castpd512_pd256(acc[k][0]);                             \
                __m256d a1 = _mm512_extractf64x4_pd(acc[k][0], 1);                          \
                __m256d a2 = _mm512_castpd512_pd256(acc[k][1]);                             \
                __m256d a3 = _mm512_extractf64x4_pd(acc[k][1], 1);                          \
                _mm256_storeu_pd(out, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3))); \
                for (size_t i = 0; i < nr; i++) {                                           \
                    if (yd)                                                                 \
                        yd[(t0 + k) * rows + r + i] = out[i];                               \
                    if (yf)                                                                 \
                        yf[(t0 + k) * rows + r + i] = (float)out[i];                        \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }

#define RL_MM_DOT_BW(a, s) _mm512_madd_epi16(_mm512_maddubs_epi16((a), (s)), _mm512_set1_epi16(1))

typedef void (*rl_mm_q8_tile_fn)(const rl_block_q8_0 *w, size_t nb, size_t rows,
                                 const rl_block_q8_0 *xq, const int8_t *xr, const double *dx,
                                 size_t n, size_t r0, size_t r1, double *yd, float *yf);

__attribute__((target(RL_TARGET_AVX512))) static void
rl_mm_q8_tile_avx512(const rl_block_q8_0 *w, size_t nb, size_t rows, const rl_block_q8_0 *xq,
                     const int8_t *xr, const double *dx, size_t n, size_t r0, size_t r1,
                     double *yd, float *yf) {
    RL_MM_AVX512_TILE(RL_MM_DOT_BW)
}


/* F16 weights widened eight at a time by F16C, a quarter of the integer
 * conversion's time on the F16 file's products.  The instruction is exact
 * like numfmt's conversion except that it quiets a signalling NaN, which
 * no output shows: a NaN output is RL_PRODUCT_NAN (doc/products.md §3). */
__attribute__((target(RL_TARGET_AVX2))) static void rl_mm_widen_f16c(const uint16_t *src,
                                                                  float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    rl_gguf_f16_to_f32_row(src + i, dst + i, n - i);
}

/* The product's kernels per path (kernel.h), beside matvec.c's row kernels
 * (rl_matvec_*_table), which run wherever an entry here is NULL.  Every
 * kernel gives the row kernels' bits. */
typedef void (*rl_mm_f32_tile_fn)(const float *m, size_t cols, const float *x, size_t n,
                                  size_t r0, size_t r1, double *yd, float *yf, size_t ystride,
                                  size_t yoff);
typedef struct {
    /* Q8_0 weights */
    void (*residual)(const float *x, size_t n, const rl_block_q8_0 *xq, int8_t *r); /* Q8x2 */
    rl_mm_q8_tile_fn q8_tile; /* token-tiled, all tokens of a row tile; NULL: none */
    /* the whole product with its own split and threads (matmul_q8.c); NULL: none */
    int (*q8_pairs)(const rl_block_q8_0 *w, size_t rows, size_t nb, const rl_block_q8_0 *xq,
                    const int8_t *xr, size_t n, double *yd, float *yf, int nth);
    size_t q8_min_tokens; /* tokens from which q8_tile or q8_pairs runs */
    /* float weights */
    void (*widen_f16)(const uint16_t *src, float *dst, size_t n); /* exact */
    rl_mm_f32_tile_fn f32_tile;   /* token-tiled f32; NULL: the row kernel per token */
    rl_mm_f32_tile_fn f32_narrow; /* f32_tile for 1..RL_MM_NARROW_COLS columns; NULL: none */
    /* F16 read in place; NULL: widen first */
    void (*f16_tile)(const uint16_t *m, size_t cols, const float *x, size_t n, size_t r0,
                    size_t r1, double *yd, float *yf, size_t ystride, size_t yoff);
} rl_mm_kernels;

static const rl_mm_kernels rl_mm_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = {.residual = rl_q8x2_residual, .widen_f16 = rl_gguf_f16_to_f32_row},
    [RL_PATH_AVX2] = {.residual = rl_q8x2_residual, .widen_f16 = rl_mm_widen_f16c},
    [RL_PATH_AVX512] = {.residual = rl_q8x2_residual_avx512,
                        .q8_tile = rl_mm_q8_tile_avx512,
                        .q8_min_tokens = 2,
                        .widen_f16 = rl_mm_widen_f16c,
                        .f32_tile = rl_mm_f32_tile_avx512,
                        .f32_narrow = rl_mm_f32_narrow_avx512,
                        .f16_tile = rl_mm_f16_tile_avx512},
    [RL_PATH_AVX512VNNI] = {.residual = rl_q8x2_residual_avx512,
                            .q8_pairs = rl_mm_q8_pairs,
                            .q8_min_tokens = RL_MM_VNNI_MIN_TOKENS,
                            .widen_f16 = rl_mm_widen_f16c,
                            .f32_tile = rl_mm_f32_tile_avx512,
                            .f32_narrow = rl_mm_f32_narrow_avx512,
                            .f16_tile = rl_mm_f16_tile_avx512},
};

typedef struct {
    rl_wtype wt;
    const void *w;
    size_t rows, cols, nb, n, tile;
    const rl_mm_kernels *k; /* the path's entry of rl_mm_table */
    /* Q8_0 weights: the quantized activations, residuals (Q8x2) and scales */
    rl_matvec_q8_kernel kq;
    rl_matvec_q8x2_kernel kq2;
    rl_mm_q8_tile_fn tile_fn; /* the path's token-tiled kernel when it runs, else NULL */
    const rl_block_q8_0 *xq;
    const int8_t *xr;
    const double *dx;
    /* float weights: the activations and tile scratch (tile*cols per chunk) */
    rl_matvec_f32_kernel kf;
    const float *xf;
    float *wide;
    double *yd;
    float *yf;
} rl_mm_job;

/* Chunk ith's weight rows, tile by tile; within a tile, every token. */
static void rl_mm_job_run(void *ctx, int ith, int nth) {
    const rl_mm_job *j = ctx;
    size_t r0, r1;
    rl_pool_chunk(j->rows, ith, nth, RL_MM_GROUP, &r0, &r1);
    for (size_t rt = r0; rt < r1; rt += j->tile) {
        const size_t re = r1 - rt < j->tile ? r1 : rt + j->tile;
        if (j->wt == RL_WT_Q8_0) {
            const rl_block_q8_0 *w = j->w;
            if (j->tile_fn) {
                j->tile_fn(w, j->nb, j->rows, j->xq, j->xr, j->dx, j->n, rt, re, j->yd, j->yf);
                continue;
            }
            for (size_t t = 0; t < j->n; t++) {
                double *yd = j->yd ? j->yd + t * j->rows : NULL;
                float *yf = j->yf ? j->yf + t * j->rows : NULL;
                if (j->xr)
                    j->kq2(w, j->nb, j->xq + t * j->nb, j->xr + t * j->cols, j->dx + t * j->nb,
                           rt, re, yd, yf);
                else
                    j->kq(w, j->nb, j->xq + t * j->nb, j->dx + t * j->nb, rt, re, yd, yf);
            }
            continue;
        }
        /* Float weights: f32 rows are used in place; half-width rows are
         * widened (exactly) once per tile, then shared by all tokens. */
        const float *m;
        size_t a, z, off;
        if (j->wt == RL_WT_F32) {
            m = j->w, a = rt, z = re, off = 0;
        } else {
            float *wide = j->wide + (size_t)ith * j->tile * j->cols;
            const uint16_t *src = (const uint16_t *)j->w + rt * j->cols;
            if (j->wt == RL_WT_F16 && j->k->f16_tile) {
                j->k->f16_tile(j->w, j->cols, j->xf, j->n, rt, re, j->yd, j->yf, j->rows, 0);
                continue;
            }
            if (j->wt == RL_WT_F16)
                j->k->widen_f16(src, wide, (re - rt) * j->cols);
            else
                rl_gguf_bf16_to_f32_row(src, wide, (re - rt) * j->cols);
            m = wide, a = 0, z = re - rt, off = rt;
        }
        if (j->k->f32_narrow && j->cols >= 1 && j->cols <= RL_MM_NARROW_COLS) {
            j->k->f32_narrow(m, j->cols, j->xf, j->n, a, z, j->yd, j->yf, j->rows, off);
            continue;
        }
        if (j->k->f32_tile) {
            j->k->f32_tile(m, j->cols, j->xf, j->n, a, z, j->yd, j->yf, j->rows, off);
            continue;
        }
        for (size_t t = 0; t < j->n; t++) {
            double *yd = j->yd ? j->yd + t * j->rows + off : NULL;
            float *yf = j->yf ? j->yf + t * j->rows + off : NULL;
            j->kf(m, j->cols, j->xf + t * j->cols, a, z, yd, yf);
            /* a NaN output as RL_PRODUCT_NAN, as the tiles store it
             * (doc/products.md §3) */
            for (size_t r = a; r < z; r++) {
                if (yd && yd[r] != yd[r])
                    yd[r] = (double)RL_PRODUCT_NAN;
                if (yf && yf[r] != yf[r])
                    yf[r] = RL_PRODUCT_NAN;
            }
        }
    }
}

static void rl_mm_msg(char *msg, size_t msglen, const char *op, const char *why) {
    if (msg && msglen)
        snprintf(msg, msglen, "%s: %s", op, why);
}

rl_status rl_mm_quantize_rows(const char *op, const float *x, size_t n, size_t cols,
                              rl_block_q8_0 *xq, rl_path path, char *msg, size_t msglen,
                              rl_mm_fault *fault) {
    for (size_t t = 0; t < n; t++) {
        size_t where = 0;
        const rl_status st = rl_q8_quantize_path(RL_SRC_F32, x + t * cols, cols,
                                                 xq + t * (cols / RL_QK8_0), &where, path);
        if (st == RL_OK)
            continue;
        if (msg && msglen) {
            char why[200];
            rl_q8_message(st, where, 0, why, sizeof why);
            if (!strcmp(op, "matvec")) /* one vector: x */
                snprintf(msg, msglen, "%s: cannot quantize x: %s", op, why);
            else
                snprintf(msg, msglen, "%s: cannot quantize activation row %zu: %s", op, t, why);
        }
        if (fault)
            fault->row = t, fault->where = where;
        return st;
    }
    return RL_OK;
}

/* The one driver of the products, a sequence's (op "matmul") and one
 * vector's (op "matvec", n == 1; the name starts its messages): n rows of x
 * (type xsrc) against W, into yd and/or yf. */
static rl_status rl_mm_core(const char *op, rl_wtype wt, const void *w, size_t rows,
                            size_t cols, rl_q8_src xsrc, const void *x, size_t n, double *yd,
                            float *yf, rl_act act, rl_path path, int threads, int min_work,
                            char *msg, size_t msglen, rl_mm_fault *fault) {
    if (msg && msglen)
        msg[0] = 0;
    const rl_status run = rl_check_run(path, threads);
    if ((unsigned)wt > RL_WT_Q8_0 || (unsigned)act > RL_ACT_Q8X2 ||
        (unsigned)xsrc > RL_SRC_BF16 || run == RL_BADARG || (!yd && !yf)) {
        rl_mm_msg(msg, msglen, op, "bad argument");
        return RL_BADARG;
    }
    if (wt == RL_WT_Q8_0 && cols % RL_QK8_0) {
        if (msg && msglen)
            snprintf(msg, msglen, "%s: %zu columns is not a multiple of %d", op, cols, RL_QK8_0);
        return RL_BADLEN;
    }
    const size_t row_bytes = rl_mm_row_bytes(wt, cols);
    if ((cols && !row_bytes) || (row_bytes && rows > SIZE_MAX / row_bytes) ||
        (cols && n > SIZE_MAX / sizeof(double) / cols) || (rows && n > SIZE_MAX / sizeof(double) / rows) ||
        (rows && cols && !w) || (n && cols && !x)) { /* sizes overflow, or NULL data */
        rl_mm_msg(msg, msglen, op, "bad argument");
        return RL_BADARG;
    }
    if (run != RL_OK) {
        if (msg && msglen)
            snprintf(msg, msglen, "%s: this CPU cannot run the %s path", op, rl_path_name(path));
        return RL_UNSUPPORTED;
    }
    if (rows == 0 || n == 0)
        return RL_OK;

    rl_mm_job job = {.wt = wt, .w = w, .rows = rows, .cols = cols, .nb = cols / RL_QK8_0,
                     .n = n, .yd = yd, .yf = yf};
    const rl_mm_kernels *k = &rl_mm_table[path];
    size_t tile = row_bytes ? RL_MM_TILE_BYTES / row_bytes : 64;
    tile = tile / RL_MM_GROUP * RL_MM_GROUP;
    const size_t least = wt != RL_WT_Q8_0 && k->f32_tile ? RL_MM_FLOAT_MIN_ROWS : RL_MM_GROUP;
    job.tile = tile < least ? least : tile > 64 ? 64 : tile;

    /* work: rows * blocks * tokens */
    const size_t groups = (rows + RL_MM_GROUP - 1) / RL_MM_GROUP;
    const size_t work = rl_pool_mul_sat(rl_pool_mul_sat(rows, (cols + RL_QK8_0 - 1) / RL_QK8_0), n);
    const size_t nth = (size_t)rl_pool_threads(
        threads, groups, work, min_work ? (n > 1 ? RL_MM_MIN_WORK_SEQ : RL_MM_MIN_WORK) : 0);
    /* chunks of rows claimed by nth threads (pool.h); scratch per chunk */
    const size_t chunks = (size_t)rl_pool_split_chunks((int)nth, groups);
    job.k = k;
    /* Q8_0 with enough tokens: the path's token-tiled kernel, if it has one */
    const int q8_tiled = wt == RL_WT_Q8_0 && n >= k->q8_min_tokens;
    const int pairs = q8_tiled && k->q8_pairs;

    /* Everything the workers read, in one allocation made before they start:
     * f32 copies of other activations, then per weight type the quantized
     * activations (blocks, residuals, scales) or the tile scratch. */
    const size_t nx = n * cols;
    size_t xf_bytes = xsrc != RL_SRC_F32 ? nx * sizeof(float) : 0;
    size_t xq_bytes = 0, xr_bytes = 0, dx_bytes = 0, wide_bytes = 0;
    if (wt == RL_WT_Q8_0) {
        xq_bytes = (n * job.nb * sizeof(rl_block_q8_0) + 7) / 8 * 8;
        xr_bytes = act == RL_ACT_Q8X2 ? (nx + 7) / 8 * 8 : 0;
        dx_bytes = pairs ? 0 : n * job.nb * sizeof(double); /* rl_mm_q8_pairs: no scales */
    } else if (wt != RL_WT_F32) {
        if (job.tile * cols > SIZE_MAX / sizeof(float) / chunks) {
            rl_mm_msg(msg, msglen, op, "bad argument");
            return RL_BADARG;
        }
        wide_bytes = chunks * job.tile * cols * sizeof(float);
    }
    const size_t total = xf_bytes + xq_bytes + xr_bytes + dx_bytes + wide_bytes;
    if (total < xf_bytes) { /* size_t overflow */
        rl_mm_msg(msg, msglen, op, "bad argument");
        return RL_BADARG;
    }
    char *scratch = malloc(total + 8);
    if (!scratch) {
        rl_mm_msg(msg, msglen, op, "out of memory for the activations");
        return RL_NOMEM;
    }
    /* 8-aligned pieces first (scales), then 4-aligned, then bytes. */
    double *dx = (double *)(void *)scratch;
    float *xf = (float *)(void *)(scratch + dx_bytes);
    float *wide = (float *)(void *)(scratch + dx_bytes + xf_bytes);
    rl_block_q8_0 *xq = (rl_block_q8_0 *)(void *)(scratch + dx_bytes + xf_bytes + wide_bytes);
    int8_t *xr = (int8_t *)(scratch + dx_bytes + xf_bytes + wide_bytes + xq_bytes);

    const float *x32 = x;
    if (xsrc != RL_SRC_F32) { /* f64 by the C cast, halves exactly, as the quantizer does */
        rl_q8_widen_ref(xsrc, x, 0, nx, xf);
        x32 = xf;
    }
    if (wt == RL_WT_Q8_0) {
        const rl_status st = rl_mm_quantize_rows(op, x32, n, cols, xq, path, msg, msglen, fault);
        if (st != RL_OK) {
            free(scratch);
            return st;
        }
        if (act == RL_ACT_Q8X2) {
            k->residual(x32, nx, xq, xr);
            job.xr = xr;
        }
        if (pairs) {
            /* the whole product, with its own split and threads */
            const int ok = k->q8_pairs(w, rows, job.nb, xq, act == RL_ACT_Q8X2 ? xr : NULL, n,
                                       yd, yf, (int)nth);
            free(scratch);
            if (!ok)
                rl_mm_msg(msg, msglen, op, "out of memory for the activations");
            return ok ? RL_OK : RL_NOMEM;
        }
        /* 2^-7 of Q8x2 folds into the scale exactly (matvec.h) */
        const double fold = act == RL_ACT_Q8X2 ? 0x1p-7 : 1.0;
        for (size_t i = 0; i < n * job.nb; i++)
            dx[i] = (double)rl_gguf_f16_to_f32(xq[i].d) * fold;
        job.xq = xq, job.dx = dx;
        job.kq = rl_matvec_q8_table[path];
        job.kq2 = rl_matvec_q8x2_table[path];
        job.tile_fn = q8_tiled ? k->q8_tile : NULL;
    } else {
        job.xf = x32, job.wide = wide;
        job.kf = rl_matvec_f32_table[path];
    }
    rl_pool_run_split((int)chunks, (int)nth, rl_mm_job_run, &job);
    free(scratch);
    return RL_OK;
}

rl_status rl_matmul_ex(rl_wtype wt, const void *w, size_t rows, size_t cols,
                       const float *x, size_t n, float *y, rl_act act,
                       rl_path path, int threads, int min_work,
                       char *msg, size_t msglen, rl_mm_fault *fault) {
    if (!y && rows && n) {
        rl_mm_msg(msg, msglen, "matmul", "bad argument");
        return RL_BADARG;
    }
    float dummy;
    return rl_mm_core("matmul", wt, w, rows, cols, RL_SRC_F32, x, n, NULL, y ? y : &dummy, act,
                      path, threads, min_work, msg, msglen, fault);
}

rl_status rl_matmul(rl_wtype wt, const void *w, size_t rows, size_t cols,
                    const float *x, size_t n, float *y, rl_act act,
                    char *msg, size_t msglen, rl_mm_fault *fault) {
    return rl_matmul_ex(wt, w, rows, cols, x, n, y, act, rl_path_best(), rl_threads(), 1,
                        msg, msglen, fault);
}

rl_status rl_matvec_q8_act_ex(const rl_block_q8_0 *w, size_t rows, size_t cols,
                              rl_q8_src xsrc, const void *x, double *yd, float *yf,
                              rl_act act, rl_path path, int threads, int min_work,
                              char *msg, size_t msglen, rl_mm_fault *fault) {
    return rl_mm_core("matvec", RL_WT_Q8_0, w, rows, cols, xsrc, x, 1, yd, yf, act, path,
                      threads, min_work, msg, msglen, fault);
}

/* ---- one vector ----------------------------------------------------- */

/* The f32 baseline's driver (matvec.h's rows); a Q8_0 vector runs
 * rl_mm_core as the one-token case of a sequence. */
typedef struct {
    rl_matvec_f32_kernel kf;
    const float *m;
    size_t rows, cols;
    const float *xf;
    double *yd;
    float *yf;
} rl_mv_job;

static void rl_mv_job_run(void *ctx, int ith, int nth) {
    const rl_mv_job *j = ctx;
    size_t r0, r1;
    rl_pool_chunk(j->rows, ith, nth, RL_MM_GROUP, &r0, &r1);
    if (r0 >= r1)
        return;
    j->kf(j->m, j->cols, j->xf, r0, r1, j->yd, j->yf);
}

/* Threads for a product of `work` units (row-blocks): at most one per group
 * of rows, and with min_work at most one per RL_MM_MIN_WORK units. */
static int rl_mv_threads(int threads, size_t rows, size_t work, int min_work) {
    return rl_pool_threads(threads, (rows + RL_MM_GROUP - 1) / RL_MM_GROUP, work,
                           min_work ? RL_MM_MIN_WORK : 0);
}

rl_status rl_matvec_q8_ex(const rl_block_q8_0 *w, size_t rows, size_t cols,
                          rl_q8_src xsrc, const void *x, double *yd, float *yf,
                          rl_path path, int threads, int min_work,
                          char *msg, size_t msglen) {
    return rl_matvec_q8_act_ex(w, rows, cols, xsrc, x, yd, yf, RL_ACT_Q8, path, threads,
                               min_work, msg, msglen, NULL);
}

rl_status rl_matvec_f32_ex(const float *m, size_t rows, size_t cols,
                           rl_q8_src xsrc, const void *x, double *yd, float *yf,
                           rl_path path, int threads, int min_work) {
    const rl_status run = rl_check_run(path, threads);
    if ((rows && cols && !m) || (cols && !x) || (!yd && !yf) || (unsigned)xsrc > RL_SRC_BF16 ||
        run == RL_BADARG || (cols && rows > SIZE_MAX / sizeof(float) / cols))
        return RL_BADARG;
    if (run != RL_OK)
        return run;
    if (rows == 0)
        return RL_OK;
    float *xbuf = NULL;
    const float *xf = x;
    if (xsrc != RL_SRC_F32 && cols) {
        xbuf = malloc(cols * sizeof *xbuf);
        if (!xbuf)
            return RL_NOMEM;
        rl_q8_widen_ref(xsrc, x, 0, cols, xbuf);
        xf = xbuf;
    }
    rl_mv_job job = {.kf = rl_matvec_f32_table[path],
                     .m = m, .rows = rows, .cols = cols, .xf = xf, .yd = yd, .yf = yf};
    if (threads > RL_MAX_THREADS)
        threads = RL_MAX_THREADS;
    /* Work in the Q8_0 unit: 32 f32 values per row-block. */
    size_t work = rows * ((cols + RL_QK8_0 - 1) / RL_QK8_0);
    rl_pool_run(rl_mv_threads(threads, rows, work, min_work), rl_mv_job_run, &job);
    free(xbuf);
    return RL_OK;
}

rl_status rl_matvec_q8(const rl_block_q8_0 *w, size_t rows, size_t cols,
                       const float *x, float *y, char *msg, size_t msglen) {
    return rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, rl_path_best(),
                           rl_threads(), 1, msg, msglen);
}

rl_status rl_matvec_q8_f64(const rl_block_q8_0 *w, size_t rows, size_t cols,
                           const double *x, double *y, char *msg, size_t msglen) {
    return rl_matvec_q8_ex(w, rows, cols, RL_SRC_F64, x, y, NULL, rl_path_best(),
                           rl_threads(), 1, msg, msglen);
}

rl_status rl_matvec_f32(const float *m, size_t rows, size_t cols,
                        const float *x, float *y) {
    return rl_matvec_f32_ex(m, rows, cols, RL_SRC_F32, x, NULL, y, rl_path_best(),
                            rl_threads(), 1);
}

rl_status rl_matvec_run(const rl_matvec_operands *o, rl_path path, int threads, int min_work,
                        char *msg, size_t msglen, size_t *where) {
    rl_q8_src src = o->dbl ? RL_SRC_F64 : RL_SRC_F32;
    double *yd = o->dbl ? o->y : NULL;
    float *yf = o->dbl ? NULL : o->y;
    if (o->w || o->wq) {
        rl_mm_fault fault = {0, 0};
        rl_status st =
            o->w ? rl_matvec_q8_act_ex(o->w, o->rows, o->cols, src, o->x, yd, yf, o->act, path,
                                       threads, min_work, msg, msglen, &fault)
                 : rl_matvec_quant_ex(o->type, o->wq, o->rows, o->cols, src, o->x, yd, yf,
                                      o->act, path, threads, min_work, msg, msglen, &fault);
        if (where)
            *where = fault.where;
        return st;
    }
    if (msg && msglen)
        msg[0] = 0;
    return rl_matvec_f32_ex(o->mf, o->rows, o->cols, src, o->x, yd, yf, path, threads, min_work);
}
