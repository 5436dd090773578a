/* matvec.c - matrix-vector products: Q8_0 weights and the f32 baseline
 * (see matvec.h for the arithmetic every path must reproduce).
 *
 * Workload: one vector against a large weight matrix, memory bound when the
 * matrix is bigger than the last-level cache, so the SIMD kernels aim to
 * stream weights at memory speed: four rows at a time share the x block and
 * give four independent dependency chains, and the per-block double work is
 * done for the four rows at once, one lane per vector.
 */
#include "prims/matvec.h"

#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/numfmt.h"

static void rl_mv_store(double v, size_t r, double *yd, float *yf) {
    if (yd)
        yd[r] = v;
    if (yf)
        yf[r] = (float)v;
}

/* ---- Q8_0 reference ------------------------------------------------- */

/* Q8x2 (doc/products.md §2): dx[b] here is f16->f32(dx_b) * 2^-7, so s_l * (dw *
 * dx[b]) is the spec's (s_l * (dw * dx_b)) * 2^-7: both products are exact
 * in double (s_l < 2^25, dw * dx_b < 2^22 significant bits), so the scale
 * folds in without a rounding and the :q8 accumulation code serves both. */
void rl_matvec_q8x2_rows_ref(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                             const int8_t *xr, const double *dx, size_t r0, size_t r1,
                             double *yd, float *yf) {
    /* xr == NULL is :q8, s_l the plain quant dot (rl_matvec_q8_rows_ref). */
    for (size_t r = r0; r < r1; r++) {
        const rl_block_q8_0 *wr = w + r * nb;
        double acc[4] = {0.0, 0.0, 0.0, 0.0};
        for (size_t b = 0; b < nb; b++) {
            const double scale = (double)rl_gguf_f16_to_f32(wr[b].d) * dx[b];
            const int8_t *rb = xr ? xr + 32 * b : NULL;
            for (int l = 0; l < 4; l++) {
                int32_t sq = 0, sr = 0;
                for (int j = 8 * l; j < 8 * l + 8; j++) {
                    sq += (int32_t)wr[b].qs[j] * (int32_t)xq[b].qs[j];
                    sr += rb ? (int32_t)wr[b].qs[j] * (int32_t)rb[j] : 0;
                }
                acc[l] += (double)(rb ? 128 * sq + sr : sq) * scale;
            }
        }
        rl_mv_store((acc[0] + acc[1]) + (acc[2] + acc[3]), r, yd, yf);
    }
}

void rl_matvec_q8_rows_ref(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                           const double *dx, size_t r0, size_t r1, double *yd, float *yf) {
    rl_matvec_q8x2_rows_ref(w, nb, xq, NULL, dx, r0, r1, yd, yf);
}

/* ---- Q8_0 AVX2 ------------------------------------------------------ */

/* The 8 int32 partial dot products of one weight block with qx; lane l of
 * the spec is the sum of elements 2l and 2l+1.  maddubs wants unsigned x
 * signed: |w| is unsigned (128 for -128 fits), qx takes w's sign (|qx| <=
 * 127, so negating it is safe); pair sums are at most 2*128*127 = 32512,
 * below int16 saturation, so every step is exact. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i
rl_mv_dot_avx2(const int8_t *wq, __m256i qx) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)wq);
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(qx, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* Q8x2 (doc/products.md §2): 128 * dot(w, qx) + dot(w, r) per int32 element.  Each
 * part is exact as above; the total is at most 129 * 2 * 2 * 128 * 127 in
 * magnitude for a pair, and a lane (two elements) stays far below 2^31. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i
rl_mv_dot2_avx2(const int8_t *wq, __m256i qx, __m256i rx) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)wq);
    const __m256i a = _mm256_abs_epi8(w), one = _mm256_set1_epi16(1);
    const __m256i e = _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(qx, w)), one);
    const __m256i f = _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(rx, w)), one);
    return _mm256_add_epi32(_mm256_slli_epi32(e, 7), f);
}

/* Four rows (pointers may repeat for a short tail group); out[k] = y of
 * row k.  acc_l holds lane l of the four rows, so one FMA per lane per block
 * adds s_l * scale for all four rows, in block order as the spec says, and
 * the four accumulators are independent chains.  (Tried and not faster on
 * Zen 3: one accumulator per row with a per-row broadcast scale and an
 * exponent-trick int->double conversion; eight rows per group.) */
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline void
rl_mv_q8_rows4_avx2_body(const rl_block_q8_0 *w0, const rl_block_q8_0 *w1,
                         const rl_block_q8_0 *w2, const rl_block_q8_0 *w3, size_t nb,
                         const rl_block_q8_0 *xq, const int8_t *xr, const double *dx,
                         double out[4]) {
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    __m256d acc2 = _mm256_setzero_pd(), acc3 = _mm256_setzero_pd();
    /* w0 + 4 rows, as an integer: the next group may lie past the matrix. */
    const uintptr_t pf = (uintptr_t)w0 + 4 * nb * sizeof *w0;
    for (size_t b = 0; b < nb; b++) {
        const __m256i qx = _mm256_loadu_si256((const __m256i *)(const void *)xq[b].qs);
        /* Prefetch the same place in the next group of four rows, one group
         * ahead in memory: measured 15-30% faster streaming on Zen 3 than
         * the hardware prefetcher alone, and than prefetching 512 bytes
         * ahead within each row.  Past the last row it touches nothing
         * useful, and a prefetch never faults. */
        _mm_prefetch((const char *)(pf + b * sizeof *w0), _MM_HINT_T1);
        _mm_prefetch((const char *)(pf + (nb + b) * sizeof *w0), _MM_HINT_T1);
        _mm_prefetch((const char *)(pf + (2 * nb + b) * sizeof *w0), _MM_HINT_T1);
        _mm_prefetch((const char *)(pf + (3 * nb + b) * sizeof *w0), _MM_HINT_T1);
        __m256i e0, e1, e2, e3;
        if (xr) { /* a constant in each caller: the branch folds away */
            const __m256i rx = _mm256_loadu_si256((const __m256i *)(const void *)(xr + 32 * b));
            e0 = rl_mv_dot2_avx2(w0[b].qs, qx, rx), e1 = rl_mv_dot2_avx2(w1[b].qs, qx, rx);
            e2 = rl_mv_dot2_avx2(w2[b].qs, qx, rx), e3 = rl_mv_dot2_avx2(w3[b].qs, qx, rx);
        } else {
            e0 = rl_mv_dot_avx2(w0[b].qs, qx), e1 = rl_mv_dot_avx2(w1[b].qs, qx);
            e2 = rl_mv_dot_avx2(w2[b].qs, qx), e3 = rl_mv_dot_avx2(w3[b].qs, qx);
        }
        /* Pair sums and a 4x4 transpose: h01 = [A0 A1 B0 B1 | A2 A3 B2 B3]
         * (row, lane), h23 likewise for C, D; t0 = [A0 B0 C0 D0 | A2 B2 C2
         * D2], t1 = [A1 B1 C1 D1 | A3 B3 C3 D3]. */
        __m256i h01 = _mm256_hadd_epi32(e0, e1), h23 = _mm256_hadd_epi32(e2, e3);
        __m256i lo = _mm256_unpacklo_epi32(h01, h23), hi = _mm256_unpackhi_epi32(h01, h23);
        __m256i t0 = _mm256_unpacklo_epi32(lo, hi), t1 = _mm256_unpackhi_epi32(lo, hi);
        /* dw of the four rows (gathered on the integer side), widened
         * exactly; dw * dx is exact in double. */
        uint64_t d4 = (uint64_t)w0[b].d | (uint64_t)w1[b].d << 16 |
                      (uint64_t)w2[b].d << 32 | (uint64_t)w3[b].d << 48;
        __m256d sc = _mm256_mul_pd(_mm256_cvtps_pd(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)d4))),
                                   _mm256_broadcast_sd(dx + b));
        acc0 = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(t0)), sc, acc0);
        acc1 = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(t1)), sc, acc1);
        acc2 = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(t0, 1)), sc, acc2);
        acc3 = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(t1, 1)), sc, acc3);
    }
    _mm256_storeu_pd(out, _mm256_add_pd(_mm256_add_pd(acc0, acc1), _mm256_add_pd(acc2, acc3)));
}

/* The row-group functions of one SIMD body: `name` for :q8 (no residuals),
 * `name##x2` for :q8x2; both share the group signature below. */
#define RL_MV_ROWS4_PAIR(name, body, target_)                                              \
    __attribute__((target(target_))) static void                                          \
    name(const rl_block_q8_0 *w0, const rl_block_q8_0 *w1, const rl_block_q8_0 *w2,       \
         const rl_block_q8_0 *w3, size_t nb, const rl_block_q8_0 *xq, const int8_t *xr,   \
         const double *dx, double out[4]) {                                               \
        (void)xr;                                                                         \
        body(w0, w1, w2, w3, nb, xq, NULL, dx, out);                                      \
    }                                                                                     \
    __attribute__((target(target_))) static void                                          \
    name##x2(const rl_block_q8_0 *w0, const rl_block_q8_0 *w1, const rl_block_q8_0 *w2,   \
             const rl_block_q8_0 *w3, size_t nb, const rl_block_q8_0 *xq, const int8_t *xr, \
             const double *dx, double out[4]) {                                           \
        body(w0, w1, w2, w3, nb, xq, xr, dx, out);                                        \
    }

RL_MV_ROWS4_PAIR(rl_mv_q8_rows4_avx2, rl_mv_q8_rows4_avx2_body, RL_TARGET_AVX2)

/* Rows in groups of four; a short last group repeats its last row and
 * drops the extra results (a row's value does not depend on its company). */
#define RL_MV_Q8_GROUPS(rows4)                                                    \
    for (size_t r = r0; r < r1; r += RL_MATVEC_ROWS) {                               \
        size_t n = r1 - r < RL_MATVEC_ROWS ? r1 - r : RL_MATVEC_ROWS;                    \
        const rl_block_q8_0 *p[RL_MATVEC_ROWS];                                       \
        for (size_t k = 0; k < RL_MATVEC_ROWS; k++)                                   \
            p[k] = w + (r + (k < n ? k : n - 1)) * nb;                            \
        double out[RL_MATVEC_ROWS];                                                   \
        rows4(p[0], p[1], p[2], p[3], nb, xq, xr, dx, out);                       \
        for (size_t k = 0; k < n; k++)                                            \
            rl_mv_store(out[k], r + k, yd, yf);                                   \
    }

void rl_matvec_q8_rows_avx2(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                            const double *dx, size_t r0, size_t r1, double *yd, float *yf) {
    const int8_t *xr = NULL;
    RL_MV_Q8_GROUPS(rl_mv_q8_rows4_avx2)
}

void rl_matvec_q8x2_rows_avx2(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                              const int8_t *xr, const double *dx, size_t r0, size_t r1,
                              double *yd, float *yf) {
    RL_MV_Q8_GROUPS(rl_mv_q8_rows4_avx2x2)
}

/* ---- Q8_0 AVX-512 (with and without VNNI) ---------------------------- */

/* Two rows per zmm (A|B, C|D), qx broadcast to both halves.  AVX-512 has no
 * vpsignb, so qx is negated under the mask of w's sign bits.  Without VNNI:
 * maddubs + madd as in AVX2; with VNNI one vpdpbusd sums four u8*s8
 * products into each int32 (exact: at most 4*128*127).  Either way element
 * pairs (2l, 2l+1) of each row hold lane l; adding the odd element into the
 * even one and one two-source permute give [A0 B0 C0 D0 A1 .. D1 | A2 ..
 * D2 A3 .. D3], so two FMAs of 8 doubles cover all four lanes of four rows,
 * in block order. */
#define RL_MV_AVX512_BODY(DOT)                                                          \
    __m512d acc01 = _mm512_setzero_pd(), acc23 = _mm512_setzero_pd();                   \
    const __m512i idx = _mm512_setr_epi32(0, 8, 16, 24, 2, 10, 18, 26,                  \
                                          4, 12, 20, 28, 6, 14, 22, 30);                \
    const uintptr_t pf = (uintptr_t)w0 + 4 * nb * sizeof *w0; /* as in AVX2 */         \
    for (size_t b = 0; b < nb; b++) {                                                   \
        _mm_prefetch((const char *)(pf + b * sizeof *w0), _MM_HINT_T1);                  \
        _mm_prefetch((const char *)(pf + (nb + b) * sizeof *w0), _MM_HINT_T1);           \
        _mm_prefetch((const char *)(pf + (2 * nb + b) * sizeof *w0), _MM_HINT_T1);       \
        _mm_prefetch((const char *)(pf + (3 * nb + b) * sizeof *w0), _MM_HINT_T1);       \
        const __m512i qx = _mm512_broadcast_i64x4(                                      \
            _mm256_loadu_si256((const __m256i *)(const void *)xq[b].qs));               \
        __m512i wab = _mm512_inserti64x4(                                               \
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)w0[b].qs)), \
            _mm256_loadu_si256((const __m256i *)(const void *)w1[b].qs), 1);            \
        __m512i wcd = _mm512_inserti64x4(                                               \
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)w2[b].qs)), \
            _mm256_loadu_si256((const __m256i *)(const void *)w3[b].qs), 1);            \
        __m512i sab = _mm512_mask_sub_epi8(qx, _mm512_movepi8_mask(wab), _mm512_setzero_si512(), qx); \
        __m512i scd = _mm512_mask_sub_epi8(qx, _mm512_movepi8_mask(wcd), _mm512_setzero_si512(), qx); \
        const __m512i aab = _mm512_abs_epi8(wab), acd = _mm512_abs_epi8(wcd);           \
        __m512i eab = DOT(aab, sab);                                                    \
        __m512i ecd = DOT(acd, scd);                                                    \
        if (xr) { /* Q8x2: 128 * dot(w, qx) + dot(w, r), exact as in AVX2 */            \
            const __m512i rx = _mm512_broadcast_i64x4(                                  \
                _mm256_loadu_si256((const __m256i *)(const void *)(xr + 32 * b)));      \
            __m512i rab = _mm512_mask_sub_epi8(rx, _mm512_movepi8_mask(wab), _mm512_setzero_si512(), rx); \
            __m512i rcd = _mm512_mask_sub_epi8(rx, _mm512_movepi8_mask(wcd), _mm512_setzero_si512(), rx); \
            eab = _mm512_add_epi32(_mm512_slli_epi32(eab, 7), DOT(aab, rab));           \
            ecd = _mm512_add_epi32(_mm512_slli_epi32(ecd, 7), DOT(acd, rcd));           \
        }                                                                               \
        eab = _mm512_add_epi32(eab, _mm512_srli_epi64(eab, 32));                        \
        ecd = _mm512_add_epi32(ecd, _mm512_srli_epi64(ecd, 32));                        \
        __m512i t = _mm512_permutex2var_epi32(eab, idx, ecd);                           \
        __m128i dw = _mm_setr_epi16((short)w0[b].d, (short)w1[b].d, (short)w2[b].d,     \
                                    (short)w3[b].d, 0, 0, 0, 0);                        \
        __m256d sc4 = _mm256_mul_pd(_mm256_cvtps_pd(_mm_cvtph_ps(dw)), _mm256_set1_pd(dx[b])); \
        __m512d sc = _mm512_broadcast_f64x4(sc4);                                       \
        acc01 = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(t)), sc, acc01); \
        acc23 = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(t, 1)), sc, acc23); \
    }                                                                                   \
    __m256d a0 = _mm512_castpd512_pd256(acc01), a1 = _mm512_extractf64x4_pd(acc01, 1);  \
    __m256d a2 = _mm512_castpd512_pd256(acc23), a3 = _mm512_extractf64x4_pd(acc23, 1);  \
    _mm256_storeu_pd(out, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));

#define RL_MV_DOT_BW(a, s) _mm512_madd_epi16(_mm512_maddubs_epi16((a), (s)), _mm512_set1_epi16(1))
#define RL_MV_DOT_VNNI(a, s) _mm512_dpbusd_epi32(_mm512_setzero_si512(), (a), (s))


__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_mv_q8_rows4_avx512_body(const rl_block_q8_0 *w0, const rl_block_q8_0 *w1,
                           const rl_block_q8_0 *w2, const rl_block_q8_0 *w3, size_t nb,
                           const rl_block_q8_0 *xq, const int8_t *xr, const double *dx,
                           double out[4]) {
    RL_MV_AVX512_BODY(RL_MV_DOT_BW)
}

__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline void
rl_mv_q8_rows4_avx512vnni_body(const rl_block_q8_0 *w0, const rl_block_q8_0 *w1,
                               const rl_block_q8_0 *w2, const rl_block_q8_0 *w3, size_t nb,
                               const rl_block_q8_0 *xq, const int8_t *xr, const double *dx,
                               double out[4]) {
    RL_MV_AVX512_BODY(RL_MV_DOT_VNNI)
}

RL_MV_ROWS4_PAIR(rl_mv_q8_rows4_avx512, rl_mv_q8_rows4_avx512_body, RL_TARGET_AVX512)
RL_MV_ROWS4_PAIR(rl_mv_q8_rows4_avx512vnni, rl_mv_q8_rows4_avx512vnni_body, RL_TARGET_VNNI)

void rl_matvec_q8_rows_avx512(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                              const double *dx, size_t r0, size_t r1, double *yd, float *yf) {
    const int8_t *xr = NULL;
    RL_MV_Q8_GROUPS(rl_mv_q8_rows4_avx512)
}

void rl_matvec_q8_rows_avx512vnni(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                                  const double *dx, size_t r0, size_t r1, double *yd,
                                  float *yf) {
    const int8_t *xr = NULL;
    RL_MV_Q8_GROUPS(rl_mv_q8_rows4_avx512vnni)
}

void rl_matvec_q8x2_rows_avx512(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                                const int8_t *xr, const double *dx, size_t r0, size_t r1,
                                double *yd, float *yf) {
    RL_MV_Q8_GROUPS(rl_mv_q8_rows4_avx512x2)
}

void rl_matvec_q8x2_rows_avx512vnni(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                                    const int8_t *xr, const double *dx, size_t r0, size_t r1,
                                    double *yd, float *yf) {
    RL_MV_Q8_GROUPS(rl_mv_q8_rows4_avx512vnnix2)
}

/* ---- f32 baseline --------------------------------------------------- */

/* The fixed reduction of the 16 partial sums (matvec.h). */
static float rl_mv_f32_tree(const float p[16]) {
    float a[8], b[4], c[2];
    for (int k = 0; k < 8; k++)
        a[k] = p[k] + p[k + 8];
    for (int k = 0; k < 4; k++)
        b[k] = a[k] + a[k + 4];
    for (int k = 0; k < 2; k++)
        c[k] = b[k] + b[k + 2];
    return c[0] + c[1];
}

void rl_matvec_f32_rows_ref(const float *m, size_t cols, const float *x,
                            size_t r0, size_t r1, double *yd, float *yf) {
    for (size_t r = r0; r < r1; r++) {
        const float *mr = m + r * cols;
        float p[16] = {0};
        for (size_t j = 0; j < cols; j++)
            p[j % 16] = fmaf(mr[j], x[j], p[j % 16]);
        rl_mv_store(rl_mv_f32_tree(p), r, yd, yf);
    }
}

/* Same tree as rl_mv_f32_tree on acc lo (p0..7) and hi (p8..15). */
__attribute__((target(RL_TARGET_AVX2))) static inline float
rl_mv_f32_hsum_avx2(__m256 lo, __m256 hi) {
    __m256 a = _mm256_add_ps(lo, hi);
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

__attribute__((target(RL_TARGET_AVX2))) void
rl_matvec_f32_rows_avx2(const float *m, size_t cols, const float *x,
                        size_t r0, size_t r1, double *yd, float *yf) {
    const size_t full = cols / 16 * 16;
    const size_t rem = cols - full;
    /* Lanes past the end stay untouched (a blend, not a zero product: an
     * FMA with 0*0 would turn a -0 partial sum into +0). */
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mk0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), iota);
    const __m256i mk1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem - 8), iota);
    for (size_t r = r0; r < r1; r += RL_MATVEC_ROWS) {
        size_t n = r1 - r < RL_MATVEC_ROWS ? r1 - r : RL_MATVEC_ROWS;
        const float *p[RL_MATVEC_ROWS];
        for (size_t k = 0; k < RL_MATVEC_ROWS; k++)
            p[k] = m + (r + (k < n ? k : n - 1)) * cols;
        __m256 a0 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps();
        __m256 a1 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), b2 = _mm256_setzero_ps();
        __m256 a3 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
        for (size_t j = 0; j < full; j += 16) {
            const __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + 8);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(p[0] + j), x0, a0);
            b0 = _mm256_fmadd_ps(_mm256_loadu_ps(p[0] + j + 8), x1, b0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(p[1] + j), x0, a1);
            b1 = _mm256_fmadd_ps(_mm256_loadu_ps(p[1] + j + 8), x1, b1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(p[2] + j), x0, a2);
            b2 = _mm256_fmadd_ps(_mm256_loadu_ps(p[2] + j + 8), x1, b2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(p[3] + j), x0, a3);
            b3 = _mm256_fmadd_ps(_mm256_loadu_ps(p[3] + j + 8), x1, b3);
        }
        if (rem) {
            const __m256 f0 = _mm256_castsi256_ps(mk0), f1 = _mm256_castsi256_ps(mk1);
            const __m256 x0 = _mm256_maskload_ps(x + full, mk0);
            const __m256 x1 = _mm256_maskload_ps(x + full + 8, mk1);
#define RL_MV_TAIL(a, b, q)                                                                  \
    a = _mm256_blendv_ps(a, _mm256_fmadd_ps(_mm256_maskload_ps((q) + full, mk0), x0, a), f0); \
    b = _mm256_blendv_ps(b, _mm256_fmadd_ps(_mm256_maskload_ps((q) + full + 8, mk1), x1, b), f1);
            RL_MV_TAIL(a0, b0, p[0])
            RL_MV_TAIL(a1, b1, p[1])
            RL_MV_TAIL(a2, b2, p[2])
            RL_MV_TAIL(a3, b3, p[3])
#undef RL_MV_TAIL
        }
        float out[RL_MATVEC_ROWS] = {rl_mv_f32_hsum_avx2(a0, b0), rl_mv_f32_hsum_avx2(a1, b1),
                                 rl_mv_f32_hsum_avx2(a2, b2), rl_mv_f32_hsum_avx2(a3, b3)};
        for (size_t k = 0; k < n; k++)
            rl_mv_store(out[k], r + k, yd, yf);
    }
}

/* ---- the tables a driver indexes by path -------------------------- */

const rl_matvec_q8_kernel rl_matvec_q8_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = rl_matvec_q8_rows_ref,
    [RL_PATH_AVX2] = rl_matvec_q8_rows_avx2,
    [RL_PATH_AVX512] = rl_matvec_q8_rows_avx512,
    [RL_PATH_AVX512VNNI] = rl_matvec_q8_rows_avx512vnni,
};

const rl_matvec_q8x2_kernel rl_matvec_q8x2_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = rl_matvec_q8x2_rows_ref,
    [RL_PATH_AVX2] = rl_matvec_q8x2_rows_avx2,
    [RL_PATH_AVX512] = rl_matvec_q8x2_rows_avx512,
    [RL_PATH_AVX512VNNI] = rl_matvec_q8x2_rows_avx512vnni,
};

/* One f32 SIMD kernel (AVX2) serves every SIMD path. */
const rl_matvec_f32_kernel rl_matvec_f32_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = rl_matvec_f32_rows_ref,
    [RL_PATH_AVX2] = rl_matvec_f32_rows_avx2,
    [RL_PATH_AVX512] = rl_matvec_f32_rows_avx2,
    [RL_PATH_AVX512VNNI] = rl_matvec_f32_rows_avx2,
};
