/* matmul_narrow.c - f32 weights of at most 16 columns times a sequence (see
 * matmul_narrow.h).
 *
 * doc/products.md §3 gives lane l the columns j = l mod 16 from +0.0, one fmaf each,
 * then the tree acc_i += acc_(i+8), + 4, + 2, + 1.  With 16 columns or
 * fewer lane l holds fmaf(w_l, x_l, +0.0) and the lanes past the columns
 * stay +0.0.  Adding a +0.0 lane changes a value only when it is -0 (an
 * fmaf whose tiny negative product rounds to zero, or a sum of two -0),
 * and a -0 met on the way changes no later sum unless the result is zero;
 * with fewer than 16 columns the spec's zero result is then +0, since a
 * +0.0 lane joins it.  So only the additions of two used lanes are made (k
 * - 1 for k columns), and with k < 16 the result gets the + 0.0 last; a
 * NaN output is stored as RL_PRODUCT_NAN (doc/products.md §3).  A vector
 * holds one lane of sixteen rows (the columns gathered once per row
 * group), so a token costs a broadcast and an FMA per column and those
 * additions, where the row-wise kernel reduces each output across a
 * vector apart. */
#include "prims/matmul_narrow.h"

#include <immintrin.h>

#include "prims/kernel.h"

/* Sixteen rows (their K columns in w) times each token, K known where the
 * switch below inlines it, so the lanes stay in registers. */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_mm_narrow_rows(const __m512 *w, const size_t K, const float *x, size_t n, __mmask16 rm,
                  double *yd, float *yf, size_t ystride, size_t at0) {
    const __m512 zero = _mm512_setzero_ps();
    for (size_t t = 0; t < n; t++) {
        const float *xt = x + t * K;
        __m512 acc[16];
        _Pragma("GCC unroll 16") for (size_t l = 0; l < K; l++)
            acc[l] = _mm512_fmadd_ps(w[l], _mm512_set1_ps(xt[l]), zero);
        /* the tree over the used lanes: lane i of a step is used when i <
         * the used count, which each step cuts to the step */
        size_t used = K;
        _Pragma("GCC unroll 4") for (size_t s = 8; s >= 1; s /= 2) {
            _Pragma("GCC unroll 8") for (size_t i = 0; i < s; i++)
                if (i + s < used)
                    acc[i] = _mm512_add_ps(acc[i], acc[i + s]);
            used = used < s ? used : s;
        }
        const __m512 sum = K < 16 ? _mm512_add_ps(acc[0], zero) : acc[0];
        const __m512 res = _mm512_mask_mov_ps(sum, _mm512_cmp_ps_mask(sum, sum, _CMP_UNORD_Q),
                                              _mm512_set1_ps(RL_PRODUCT_NAN));
        const size_t at = t * ystride + at0;
        if (yf)
            _mm512_mask_storeu_ps(yf + at, rm, res);
        if (yd) {
            _mm512_mask_storeu_pd(yd + at, (__mmask8)rm,
                                  _mm512_cvtps_pd(_mm512_castps512_ps256(res)));
            if (rm >> 8)
                _mm512_mask_storeu_pd(yd + at + 8, (__mmask8)(rm >> 8),
                                      _mm512_cvtps_pd(_mm256_castpd_ps(
                                          _mm512_extractf64x4_pd(_mm512_castps_pd(res), 1))));
        }
    }
}

__attribute__((target(RL_TARGET_AVX512))) void
rl_mm_f32_narrow_avx512(const float *m, size_t cols, const float *x, size_t n, size_t r0,
                        size_t r1, double *yd, float *yf, size_t ystride, size_t yoff) {
    const __m512i rowix = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)cols));
    for (size_t r = r0; r < r1; r += 16) {
        const size_t nr = r1 - r < 16 ? r1 - r : 16;
        const __mmask16 rm = (__mmask16)((1u << nr) - 1u);
        /* lane l of the sixteen rows: column l */
        __m512 w[16];
        for (size_t l = 0; l < cols && l < RL_MM_NARROW_COLS; l++)
            w[l] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), rm, rowix, m + r * cols + l, 4);
        const size_t at = yoff + r;
        switch (cols) {
#define RL_NARROW_CASE(k)                                                                      \
    case k: rl_mm_narrow_rows(w, k, x, n, rm, yd, yf, ystride, at); break;
            RL_NARROW_CASE(1) RL_NARROW_CASE(2) RL_NARROW_CASE(3) RL_NARROW_CASE(4)
            RL_NARROW_CASE(5) RL_NARROW_CASE(6) RL_NARROW_CASE(7) RL_NARROW_CASE(8)
            RL_NARROW_CASE(9) RL_NARROW_CASE(10) RL_NARROW_CASE(11) RL_NARROW_CASE(12)
            RL_NARROW_CASE(13) RL_NARROW_CASE(14) RL_NARROW_CASE(15) RL_NARROW_CASE(16)
#undef RL_NARROW_CASE
        default: break; /* not called with 0 or more than RL_MM_NARROW_COLS columns */
        }
    }
}
