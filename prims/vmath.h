/* vmath.h - expf the same bits on every path: a scalar form and AVX2 /
 * AVX-512 forms of one double-precision computation.  Plain C, no ECL.
 *
 * libm's expf and a SIMD exponential round differently now and then, so a
 * kernel whose scalar reference and SIMD path must agree bit for bit (the
 * attention's softmax, nn.h) uses this instead.  For f32 x:
 *   x NaN -> x; x > 89 -> +inf; x < -104 -> +0 (expf's own overflow and
 *   underflow thresholds lie inside these bounds);
 *   otherwise, in double: k = nearbyint(x * (1/ln 2)), r = fma(-k, ln 2, x)
 *   (|r| <= 0.35), p = the degree-12 Taylor polynomial of e^r by Horner
 *   with fma from the top coefficient 1/12! down to 1, and the result is
 *   (float)(p * 2^k): one f32 rounding of a value within about 1e-15
 *   relative of e^x, so it is expf correctly rounded but for the rare
 *   value within that distance of a rounding boundary (then one ulp off).
 * Every operation is a correctly rounded IEEE double operation, so the
 * three forms answer identical bits.  Include it in files built with
 * -ffp-contract=off (the scalar form must not fuse what it does not say).
 */
#ifndef RL_PRIMS_VMATH_H
#define RL_PRIMS_VMATH_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define RL_VM_INV_LN2 1.4426950408889634074
#define RL_VM_LN2 0.69314718055994530942
#define RL_VM_EXP_HI 89.0f
#define RL_VM_EXP_LO -104.0f

/* 1/12!, where Horner starts, then 1/i! for i = 11 down to 2, then 1, 1. */
#define RL_VM_EXP_TOP 2.0876756987868098979e-09
#define RL_VM_EXP_POLY(STEP)                                                  \
    STEP(2.5052108385441718775e-08) STEP(2.7557319223985890653e-07)            \
    STEP(2.7557319223985890653e-06) STEP(2.4801587301587301587e-05)            \
    STEP(1.9841269841269841270e-04) STEP(1.3888888888888888889e-03)            \
    STEP(8.3333333333333333333e-03) STEP(4.1666666666666666667e-02)            \
    STEP(1.6666666666666666667e-01) STEP(5.0000000000000000000e-01)            \
    STEP(1.0) STEP(1.0)

static inline float rl_expf(float x) {
    if (x != x)
        return x;
    if (x > RL_VM_EXP_HI)
        return INFINITY;
    if (x < RL_VM_EXP_LO)
        return 0.0f;
    const double xd = (double)x;
    const double k = nearbyint(xd * RL_VM_INV_LN2);
    const double r = fma(-k, RL_VM_LN2, xd);
    double p = RL_VM_EXP_TOP;
#define RL_VM_STEP(c) p = fma(p, r, (c));
    RL_VM_EXP_POLY(RL_VM_STEP)
#undef RL_VM_STEP
    const uint64_t bits = (uint64_t)((int64_t)k + 1023) << 52;
    double s;
    memcpy(&s, &bits, sizeof s);
    return (float)(p * s);
}

/* Eight lanes of rl_expf. */
__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma"))) static inline __m256
rl_expf8_avx512(__m256 x) {
    const __m512d xd = _mm512_cvtps_pd(x);
    const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(xd, _mm512_set1_pd(RL_VM_INV_LN2)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(RL_VM_LN2), xd);
    __m512d p = _mm512_set1_pd(RL_VM_EXP_TOP);
#define RL_VM_STEP(c) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
    RL_VM_EXP_POLY(RL_VM_STEP)
#undef RL_VM_STEP
    /* k is an integer in [-151, 129] where it is used: its double's low
     * bits after adding 2^52 + 2^51 are k, shifted into the exponent */
    const __m512i ki = _mm512_sub_epi64(
        _mm512_castpd_si512(_mm512_add_pd(k, _mm512_set1_pd(6755399441055744.0))),
        _mm512_castpd_si512(_mm512_set1_pd(6755399441055744.0)));
    const __m512d s = _mm512_castsi512_pd(
        _mm512_slli_epi64(_mm512_add_epi64(ki, _mm512_set1_epi64(1023)), 52));
    __m256 y = _mm512_cvtpd_ps(_mm512_mul_pd(p, s));
    const __mmask8 hi = _mm256_cmp_ps_mask(x, _mm256_set1_ps(RL_VM_EXP_HI), _CMP_GT_OQ);
    const __mmask8 lo = _mm256_cmp_ps_mask(x, _mm256_set1_ps(RL_VM_EXP_LO), _CMP_LT_OQ);
    const __mmask8 nan = _mm256_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    y = _mm256_mask_mov_ps(y, hi, _mm256_set1_ps(INFINITY));
    y = _mm256_mask_mov_ps(y, lo, _mm256_setzero_ps());
    return _mm256_mask_mov_ps(y, nan, x);
}

/* Four lanes of rl_expf. */
__attribute__((target("avx2,fma"))) static inline __m128 rl_expf4_avx2(__m128 x) {
    const __m256d xd = _mm256_cvtps_pd(x);
    const __m256d k = _mm256_round_pd(_mm256_mul_pd(xd, _mm256_set1_pd(RL_VM_INV_LN2)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(RL_VM_LN2), xd);
    __m256d p = _mm256_set1_pd(RL_VM_EXP_TOP);
#define RL_VM_STEP(c) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c));
    RL_VM_EXP_POLY(RL_VM_STEP)
#undef RL_VM_STEP
    const __m256i ki = _mm256_sub_epi64(
        _mm256_castpd_si256(_mm256_add_pd(k, _mm256_set1_pd(6755399441055744.0))),
        _mm256_castpd_si256(_mm256_set1_pd(6755399441055744.0)));
    const __m256d s = _mm256_castsi256_pd(
        _mm256_slli_epi64(_mm256_add_epi64(ki, _mm256_set1_epi64x(1023)), 52));
    __m128 y = _mm256_cvtpd_ps(_mm256_mul_pd(p, s));
    const __m128 hi = _mm_cmp_ps(x, _mm_set1_ps(RL_VM_EXP_HI), _CMP_GT_OQ);
    const __m128 lo = _mm_cmp_ps(x, _mm_set1_ps(RL_VM_EXP_LO), _CMP_LT_OQ);
    const __m128 nan = _mm_cmp_ps(x, x, _CMP_UNORD_Q);
    y = _mm_blendv_ps(y, _mm_set1_ps(INFINITY), hi);
    y = _mm_blendv_ps(y, _mm_setzero_ps(), lo);
    return _mm_blendv_ps(y, x, nan);
}

#endif
