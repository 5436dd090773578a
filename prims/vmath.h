/* vmath.h - expf and erff the same bits on every path: a scalar form and
 * SIMD forms of one double-precision computation each.  Plain C, no ECL.
 *
 * libm's expf and a SIMD exponential round differently now and then, so a
 * kernel whose scalar reference and SIMD path must agree bit for bit (the
 * attention's softmax, GELU; nn.h) uses these instead.  rl_expf, for f32 x:
 *   x NaN -> x; x > 89 -> +inf; x < -104 -> +0 (expf's own overflow and
 *   underflow thresholds lie inside these bounds);
 *   otherwise, in double: k = nearbyint(x * (16/ln 2)), r = fma(-k, ln 2/16,
 *   x) (|r| <= 0.0217), p = the degree-6 Taylor polynomial of e^r by Horner
 *   with fma from the top coefficient 1/6! down to 1, s = 2^((k mod 16)/16)
 *   (a table of 16 doubles) times 2^floor(k/16) (an exponent added to the
 *   entry's bits, exact), and the result is (float)(p * s): one f32 rounding
 *   of a value within about 1e-14 relative of e^x, so it is expf correctly
 *   rounded but for the rare value within that distance of a rounding
 *   boundary (then one ulp off).  The table halves the polynomial of a
 *   plain 2^k reduction (degree 12 for |r| <= 0.35): the chain of
 *   dependent fmas is what an exponential waits on.  Both forms answer the
 *   same bits on every f32 input of [-104, 89] (all compared once).  The
 *   AVX-512 form takes n vectors at once (rl_expf8n_avx512), the same
 *   operations per lane, so that n chains are in flight.
 * rl_erff, for f32 x: NaN -> x; |x| >= 4 -> +-1 (erf's distance from 1
 *   there is below a quarter of an f32 ulp); otherwise, in double, with a
 *   = |x| and i = floor(2a) (0..7): for i = 0, a * P0(a * a), P0 the
 *   Taylor series of erf(a)/a in a^2 to the 11th power; for i >= 1,
 *   Pi(a - (0.25 + 0.5 i)), a degree-11 Chebyshev fit of erf on [i/2,
 *   (i+1)/2] (fit error below 4e-15); both by Horner with fma from the top
 *   coefficient (rl_vm_erf_c); then the sign of x, one f32 rounding.  Its
 *   AVX-512 forms pick a lane's coefficients by a permutation of a table
 *   row, its AVX2 form by two permutations of the row's halves and a blend;
 *   both have several groups of lanes in flight.
 * Every operation is a correctly rounded IEEE double operation, so the
 * forms of each function answer identical bits.  Include it in files built with
 * -ffp-contract=off (the scalar form must not fuse what it does not say).
 */
#ifndef RL_PRIMS_VMATH_H
#define RL_PRIMS_VMATH_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "prims/kernel.h"

#define RL_VM_EXP_HI 89.0f
#define RL_VM_EXP_LO -104.0f

/* 16 / ln 2 and ln 2 / 16, the nearest doubles. */
#define RL_VM_16_LN2 23.083120654223414
#define RL_VM_LN2_16 0.04332169878499658
/* 1/6!, where Horner starts, then 1/i! for i = 5 down to 2, then 1, 1. */
#define RL_VM_EXP_TOP 1.3888888888888889e-03
#define RL_VM_EXP_POLY(STEP)                                                  \
    STEP(8.3333333333333333e-03) STEP(4.1666666666666667e-02)                  \
    STEP(1.6666666666666667e-01) STEP(5.0e-01) STEP(1.0) STEP(1.0)

/* 2^(j/16) for j = 0 .. 15, the nearest doubles. */
static const double rl_vm_exp2_16[16] = {
    1.0, 1.0442737824274138, 1.0905077326652577, 1.1387886347566916,
    1.189207115002721, 1.241857812073484, 1.2968395546510096, 1.3542555469368927,
    1.4142135623730951, 1.4768261459394993, 1.5422108254079407, 1.6104903319492543,
    1.681792830507429, 1.7562521603732995, 1.8340080864093424, 1.9152065613971474,
};

/* 2^(j/16) * 2^e as a double, exactly (e in [-151, 129]: no overflow). */
static inline double rl_vm_exp_scale(int64_t k) {
    const int64_t e = (k - (k & 15)) / 16;
    uint64_t bits;
    memcpy(&bits, &rl_vm_exp2_16[k & 15], sizeof bits);
    bits += (uint64_t)e << 52;
    double s;
    memcpy(&s, &bits, sizeof s);
    return s;
}

static inline float rl_expf(float x) {
    if (x != x)
        return x;
    if (x > RL_VM_EXP_HI)
        return INFINITY;
    if (x < RL_VM_EXP_LO)
        return 0.0f;
    const double xd = (double)x;
    const double k = nearbyint(xd * RL_VM_16_LN2);
    const double r = fma(-k, RL_VM_LN2_16, xd);
    double p = RL_VM_EXP_TOP;
#define RL_VM_STEP(c) p = fma(p, r, (c));
    RL_VM_EXP_POLY(RL_VM_STEP)
#undef RL_VM_STEP
    return (float)(p * rl_vm_exp_scale((int64_t)k));
}

/* n vectors of eight lanes of rl_expf at once: y[b] for x[b], b < n (n a
 * constant where it is inlined, 1 to 8).  Each step runs for every vector
 * before the next, so that n independent chains of dependent operations
 * are in flight (an exponential is some fifteen of them in a row); the
 * same operations per lane.  A lane above 89, below -104 or NaN is rare:
 * one test finds whether any is, and only then are the ends answered. */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_expf8n_avx512(__m256 *y, const __m256 *x, int n) {
    __m512d xd[8], k[8], r[8], p[8];
    __m512i ki[8];
#define RL_VM_EACH _Pragma("GCC unroll 8") for (int b = 0; b < n; b++)
    RL_VM_EACH xd[b] = _mm512_cvtps_pd(x[b]);
    RL_VM_EACH k[b] = _mm512_roundscale_pd(_mm512_mul_pd(xd[b], _mm512_set1_pd(RL_VM_16_LN2)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    RL_VM_EACH r[b] = _mm512_fnmadd_pd(k[b], _mm512_set1_pd(RL_VM_LN2_16), xd[b]);
    RL_VM_EACH p[b] = _mm512_set1_pd(RL_VM_EXP_TOP);
#define RL_VM_STEP(c) RL_VM_EACH p[b] = _mm512_fmadd_pd(p[b], r[b], _mm512_set1_pd(c));
    RL_VM_EXP_POLY(RL_VM_STEP)
#undef RL_VM_STEP
    /* k is an integer in [-2401, 2055] where it is used: its double's low
     * bits after adding 2^52 + 2^51 are k; the table entry k mod 16 with
     * floor(k / 16) added to its exponent */
    RL_VM_EACH ki[b] = _mm512_sub_epi64(
        _mm512_castpd_si512(_mm512_add_pd(k[b], _mm512_set1_pd(6755399441055744.0))),
        _mm512_castpd_si512(_mm512_set1_pd(6755399441055744.0)));
    RL_VM_EACH {
        const __m512d t = _mm512_permutex2var_pd(_mm512_loadu_pd(rl_vm_exp2_16), ki[b],
                                                 _mm512_loadu_pd(rl_vm_exp2_16 + 8));
        const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(
            _mm512_castpd_si512(t), _mm512_slli_epi64(_mm512_srai_epi64(ki[b], 4), 52)));
        y[b] = _mm512_cvtpd_ps(_mm512_mul_pd(p[b], s));
    }
    __mmask8 odd = 0;
    RL_VM_EACH odd |= (__mmask8)~_mm256_mask_cmp_ps_mask(
        _mm256_cmp_ps_mask(x[b], _mm256_set1_ps(RL_VM_EXP_LO), _CMP_GE_OQ), x[b],
        _mm256_set1_ps(RL_VM_EXP_HI), _CMP_LE_OQ);
    if (__builtin_expect(odd != 0, 0))
        RL_VM_EACH {
            const __mmask8 hi = _mm256_cmp_ps_mask(x[b], _mm256_set1_ps(RL_VM_EXP_HI), _CMP_GT_OQ);
            const __mmask8 lo = _mm256_cmp_ps_mask(x[b], _mm256_set1_ps(RL_VM_EXP_LO), _CMP_LT_OQ);
            const __mmask8 nan = _mm256_cmp_ps_mask(x[b], x[b], _CMP_UNORD_Q);
            y[b] = _mm256_mask_mov_ps(y[b], hi, _mm256_set1_ps(INFINITY));
            y[b] = _mm256_mask_mov_ps(y[b], lo, _mm256_setzero_ps());
            y[b] = _mm256_mask_mov_ps(y[b], nan, x[b]);
        }
#undef RL_VM_EACH
}

/* Eight lanes of rl_expf. */
__attribute__((target(RL_TARGET_AVX512))) static inline __m256
rl_expf8_avx512(__m256 x) {
    __m256 y;
    rl_expf8n_avx512(&y, &x, 1);
    return y;
}

/* Four lanes of rl_expf. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m128 rl_expf4_avx2(__m128 x) {
    const __m256d xd = _mm256_cvtps_pd(x);
    const __m256d k = _mm256_round_pd(_mm256_mul_pd(xd, _mm256_set1_pd(RL_VM_16_LN2)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(RL_VM_LN2_16), xd);
    __m256d p = _mm256_set1_pd(RL_VM_EXP_TOP);
#define RL_VM_STEP(c) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c));
    RL_VM_EXP_POLY(RL_VM_STEP)
#undef RL_VM_STEP
    /* x outside [-104, 89] is answered below: clamped, k's table index
     * and exponent stay in range */
    const __m256d kc = _mm256_min_pd(_mm256_max_pd(k, _mm256_set1_pd(-2401.0)),
                                     _mm256_set1_pd(2055.0));
    const __m256d fl = _mm256_floor_pd(_mm256_mul_pd(kc, _mm256_set1_pd(0.0625))); /* exact */
    const __m256d jd = _mm256_fnmadd_pd(fl, _mm256_set1_pd(16.0), kc);             /* 0 .. 15 */
    const __m256d magic = _mm256_set1_pd(6755399441055744.0);
    const __m256i e = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(fl, magic)),
                                       _mm256_castpd_si256(magic));
    const __m256i j = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(jd, magic)),
                                       _mm256_castpd_si256(magic));
    const __m256d t = _mm256_i64gather_pd(rl_vm_exp2_16, j, 8);
    const __m256d s = _mm256_castsi256_pd(
        _mm256_add_epi64(_mm256_castpd_si256(t), _mm256_slli_epi64(e, 52)));
    __m128 y = _mm256_cvtpd_ps(_mm256_mul_pd(p, s));
    const __m128 hi = _mm_cmp_ps(x, _mm_set1_ps(RL_VM_EXP_HI), _CMP_GT_OQ);
    const __m128 lo = _mm_cmp_ps(x, _mm_set1_ps(RL_VM_EXP_LO), _CMP_LT_OQ);
    const __m128 nan = _mm_cmp_ps(x, x, _CMP_UNORD_Q);
    y = _mm_blendv_ps(y, _mm_set1_ps(INFINITY), hi);
    y = _mm_blendv_ps(y, _mm_setzero_ps(), lo);
    return _mm_blendv_ps(y, x, nan);
}

/* erf's coefficients by interval i (columns), highest power first (rows):
 * column 0 in a^2 (times a afterwards), the others in a - (0.25 + 0.5 i). */
static const double rl_vm_erf_c[12][8] = {
    {-1.2290555301717928e-09, 0.00060993779027813293, -0.00031362872546460645, -8.6968469626310897e-06, 6.4866540600151882e-05, -1.5339902089340584e-05, -2.9656286800547038e-06, 7.6428803055617562e-07},
    {1.4807192815879218e-08, 0.00016660193996439915, 0.00078355964625568012, -0.00042997654554744911, -1.5645810128255831e-05, 5.4776278623830163e-05, -1.9717813120931633e-06, -2.6192729501426734e-06},
    {-1.6365844691234924e-07, -0.0039672763912415648, 0.00087691315619116352, 0.00089440874322049737, -0.00036936112481274159, -7.1258544286914666e-05, 2.5920938322589291e-05, 6.1096653842528613e-06},
    {1.6462114365889248e-06, 0.0023031436700607501, -0.0056969769044849126, 0.00072915540175426418, 0.00099978586652015662, -8.8995602629698338e-05, -8.1672737868854396e-05, -1.1127126373843726e-05},
    {-1.492565035840625e-05, 0.01843520334097901, 0.0036260059926181156, -0.0060587588023725486, -0.00067045660154811649, 0.00064604210482970361, 0.00016999118520779564, 1.6275277203802863e-05},
    {0.00012055332981789664, -0.026872553292873545, 0.021301250219697629, 0.008963074095448189, -0.0029043665132631922, -0.0016573279279731899, -0.00026352769055946329, -1.9272756804312935e-05},
    {-0.00085483270234508533, -0.053242728701778298, -0.047181036747009741, 0.0066243615755308518, 0.010657679174968014, 0.0027558083972551804, 0.00031379722884593725, 1.8370975373089447e-05},
    {0.0052239776254421879, 0.15068696998239123, -0.0061594038970761772, -0.048102210256654246, -0.019083383498838029, -0.0032581136518982476, -0.00028656934966896628, -1.3841239362501154e-05},
    {-0.026866170645131252, 0.026788794547305209, 0.16753579506866303, 0.090157284713433011, 0.021724553691921413, 0.0027603887051567042, 0.00019580971193023053, 7.9696160603770518e-06},
    {0.11283791670955126, -0.4821983018998296, -0.29565140306089954, -0.092356242875489825, -0.016070217800279861, -0.0016122624295494868, -9.486433243279061e-05, -3.3053707198740702e-06},
    {-0.37612638903183754, 0.64293106919520948, 0.23652112244728921, 0.052774995930150871, 0.0071423190220180266, 0.00058627724709371415, 2.9189025383597291e-05, 8.8143219123354957e-07},
    {1.1283791670955126, 0.71115563365351808, 0.92290012825645973, 0.98667167121918042, 0.99853728341331949, 0.99989937807788043, 0.99999569722053627, 0.99999988627274339},
};

static inline float rl_erff(float x) {
    if (x != x)
        return x;
    const double a = fabs((double)x);
    if (a >= 4.0)
        return signbit(x) ? -1.0f : 1.0f;
    const int i = (int)(a * 2.0);
    const double v = i == 0 ? a * a : a - (0.25 + 0.5 * i);
    double p = rl_vm_erf_c[0][i];
    for (int j = 1; j < 12; j++)
        p = fma(p, v, rl_vm_erf_c[j][i]);
    if (i == 0)
        p = a * p;
    return (float)(signbit(x) ? -p : p);
}

/* Eight lanes of rl_erff: the interval's coefficients by a permutation of
 * each row of the table. */
__attribute__((target(RL_TARGET_AVX512))) static inline __m256
rl_erff8_avx512(__m256 x) {
    const __m512d a = _mm512_abs_pd(_mm512_cvtps_pd(x));
    const __m512d lim = _mm512_set1_pd(4.0);
    const __mmask8 big = _mm512_cmp_pd_mask(a, lim, _CMP_GE_OQ);
    /* i = floor(2a), at most 7 (lanes past 4 are answered below) */
    const __m512i i = _mm512_cvtepi32_epi64(_mm512_cvttpd_epi32(
        _mm512_min_pd(_mm512_mul_pd(a, _mm512_set1_pd(2.0)), _mm512_set1_pd(7.0))));
    const __mmask8 z = _mm512_cmpeq_epi64_mask(i, _mm512_setzero_si512());
    const __m512d c = _mm512_fmadd_pd(_mm512_cvtepi64_pd(i), _mm512_set1_pd(0.5),
                                      _mm512_set1_pd(0.25)); /* exact */
    const __m512d v = _mm512_mask_mul_pd(_mm512_sub_pd(a, c), z, a, a);
    __m512d p = _mm512_permutexvar_pd(i, _mm512_loadu_pd(rl_vm_erf_c[0]));
    for (int j = 1; j < 12; j++)
        p = _mm512_fmadd_pd(p, v, _mm512_permutexvar_pd(i, _mm512_loadu_pd(rl_vm_erf_c[j])));
    p = _mm512_mask_mul_pd(p, z, a, p);
    p = _mm512_mask_mov_pd(p, big, _mm512_set1_pd(1.0));
    __m256 y = _mm512_cvtpd_ps(p);
    /* the sign of x (a NaN x answered as itself) */
    y = _mm256_or_ps(y, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));
    return _mm256_mask_mov_ps(y, _mm256_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/* Groups of eight lanes of rl_erff, RL_VM_ERF_GROUPS of them: the steps of
 * rl_erff8_avx512 taken for every group in turn (each coefficient row read
 * once for all), so that the groups' chains of dependent fmas overlap
 * rather than wait one on another.  Each lane's operations, and so its
 * bits, are rl_erff8_avx512's. */
#define RL_VM_ERF_GROUPS 8
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_erff8xg_avx512(const __m256 x[RL_VM_ERF_GROUPS], __m256 y[RL_VM_ERF_GROUPS]) {
    __m512d a[RL_VM_ERF_GROUPS], v[RL_VM_ERF_GROUPS], p[RL_VM_ERF_GROUPS];
    __m512i i[RL_VM_ERF_GROUPS];
    __mmask8 big[RL_VM_ERF_GROUPS], z[RL_VM_ERF_GROUPS];
    _Pragma("GCC unroll 16")
    for (int g = 0; g < RL_VM_ERF_GROUPS; g++) {
        a[g] = _mm512_abs_pd(_mm512_cvtps_pd(x[g]));
        big[g] = _mm512_cmp_pd_mask(a[g], _mm512_set1_pd(4.0), _CMP_GE_OQ);
        i[g] = _mm512_cvtepi32_epi64(_mm512_cvttpd_epi32(
            _mm512_min_pd(_mm512_mul_pd(a[g], _mm512_set1_pd(2.0)), _mm512_set1_pd(7.0))));
        z[g] = _mm512_cmpeq_epi64_mask(i[g], _mm512_setzero_si512());
        const __m512d c = _mm512_fmadd_pd(_mm512_cvtepi64_pd(i[g]), _mm512_set1_pd(0.5),
                                          _mm512_set1_pd(0.25));
        v[g] = _mm512_mask_mul_pd(_mm512_sub_pd(a[g], c), z[g], a[g], a[g]);
    }
    const __m512d c0 = _mm512_loadu_pd(rl_vm_erf_c[0]);
    _Pragma("GCC unroll 16")
    for (int g = 0; g < RL_VM_ERF_GROUPS; g++)
        p[g] = _mm512_permutexvar_pd(i[g], c0);
    _Pragma("GCC unroll 16")
    for (int j = 1; j < 12; j++) {
        const __m512d cj = _mm512_loadu_pd(rl_vm_erf_c[j]);
        _Pragma("GCC unroll 16")
        for (int g = 0; g < RL_VM_ERF_GROUPS; g++)
            p[g] = _mm512_fmadd_pd(p[g], v[g], _mm512_permutexvar_pd(i[g], cj));
    }
    _Pragma("GCC unroll 16")
    for (int g = 0; g < RL_VM_ERF_GROUPS; g++) {
        __m512d q = _mm512_mask_mul_pd(p[g], z[g], a[g], p[g]);
        q = _mm512_mask_mov_pd(q, big[g], _mm512_set1_pd(1.0));
        __m256 r = _mm512_cvtpd_ps(q);
        r = _mm256_or_ps(r, _mm256_and_ps(x[g], _mm256_set1_ps(-0.0f)));
        y[g] = _mm256_mask_mov_ps(r, _mm256_cmp_ps_mask(x[g], x[g], _CMP_UNORD_Q), x[g]);
    }
}

/* Registers of eight lanes of rl_erff on AVX2, RL_VM_ERF_AVX2_REGS of them,
 * each taken as two groups of four lanes in doubles: the steps of
 * rl_erff8_avx512 per group, every group in turn (each coefficient row read
 * once for all) so that the groups' chains of fmas overlap.  A lane's
 * coefficient is its interval's entry of the row: the row's two halves
 * permuted by the lane's index (its low two bits pick within a half), then
 * the half picked by the index's bit 2.  Each lane's operations, and so
 * its bits, are rl_erff's. */
/* two registers (four groups): one or three measured slower, gathers of
 * the coefficients half as fast */
#define RL_VM_ERF_AVX2_REGS 2
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline void
rl_erff8xg_avx2(const __m256 x[RL_VM_ERF_AVX2_REGS], __m256 y[RL_VM_ERF_AVX2_REGS]) {
    enum { G = 2 * RL_VM_ERF_AVX2_REGS };
    __m256d a[G], v[G], p[G], z[G], hi[G];
    __m256i ix[G];
    _Pragma("GCC unroll 16")
    for (int g = 0; g < G; g++) {
        const __m128 xg = g % 2 ? _mm256_extractf128_ps(x[g / 2], 1)
                                : _mm256_castps256_ps128(x[g / 2]);
        a[g] = _mm256_andnot_pd(_mm256_set1_pd(-0.0), _mm256_cvtps_pd(xg));
        /* i = floor(2a), at most 7 (NaN and lanes past 4 answered below) */
        const __m128i i32 = _mm256_cvttpd_epi32(
            _mm256_min_pd(_mm256_mul_pd(a[g], _mm256_set1_pd(2.0)), _mm256_set1_pd(7.0)));
        const __m256i i = _mm256_cvtepu32_epi64(i32);
        z[g] = _mm256_castsi256_pd(_mm256_cmpeq_epi64(i, _mm256_setzero_si256()));
        hi[g] = _mm256_castsi256_pd(_mm256_slli_epi64(i, 61));
        /* the dwords 2i and 2i + 1 of each lane: its double in a half */
        const __m256i i2 = _mm256_add_epi64(i, i);
        ix[g] = _mm256_or_si256(
            i2, _mm256_slli_epi64(_mm256_add_epi64(i2, _mm256_set1_epi64x(1)), 32));
        const __m256d c = _mm256_fmadd_pd(_mm256_cvtepi32_pd(i32), _mm256_set1_pd(0.5),
                                          _mm256_set1_pd(0.25)); /* exact */
        v[g] = _mm256_blendv_pd(_mm256_sub_pd(a[g], c), _mm256_mul_pd(a[g], a[g]), z[g]);
    }
    /* row j's entry for group g's lanes */
#define RL_VM_ERF_HALF(j, h, g)                                                                \
    _mm256_castps_pd(                                                                          \
        _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_loadu_pd(rl_vm_erf_c[j] + (h))), ix[g]))
#define RL_VM_ERF_PICK(j, g)                                                                   \
    _mm256_blendv_pd(RL_VM_ERF_HALF(j, 0, g), RL_VM_ERF_HALF(j, 4, g), hi[g])
    _Pragma("GCC unroll 16")
    for (int g = 0; g < G; g++)
        p[g] = RL_VM_ERF_PICK(0, g);
    _Pragma("GCC unroll 16")
    for (int j = 1; j < 12; j++)
        _Pragma("GCC unroll 16")
        for (int g = 0; g < G; g++)
            p[g] = _mm256_fmadd_pd(p[g], v[g], RL_VM_ERF_PICK(j, g));
#undef RL_VM_ERF_PICK
#undef RL_VM_ERF_HALF
    __m128 r[G];
    _Pragma("GCC unroll 16")
    for (int g = 0; g < G; g++) {
        __m256d q = _mm256_blendv_pd(p[g], _mm256_mul_pd(a[g], p[g]), z[g]);
        q = _mm256_blendv_pd(q, _mm256_set1_pd(1.0),
                             _mm256_cmp_pd(a[g], _mm256_set1_pd(4.0), _CMP_GE_OQ));
        r[g] = _mm256_cvtpd_ps(q);
    }
    _Pragma("GCC unroll 16")
    for (int h = 0; h < RL_VM_ERF_AVX2_REGS; h++) {
        __m256 s = _mm256_set_m128(r[2 * h + 1], r[2 * h]);
        /* the sign of x (a NaN x answered as itself) */
        s = _mm256_or_ps(s, _mm256_and_ps(x[h], _mm256_set1_ps(-0.0f)));
        y[h] = _mm256_blendv_ps(s, x[h], _mm256_cmp_ps(x[h], x[h], _CMP_UNORD_Q));
    }
}

#endif
