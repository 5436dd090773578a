/* test_vmath.c - rl_expf and rl_erff (prims/vmath.h): against double
 * precision exp and erf over a sweep of f32 inputs (within one ulp, and
 * within half an ulp but for a handful), against libm's expf and erff (at
 * most one ulp apart), the special values, and the SIMD forms (erf's one
 * group of eight lanes and its groups in flight together, AVX2's groups of
 * four) bit for bit against the scalar ones. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prims/cpu.h"
#include "prims/vmath.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Distance in ulps between two finite non-negative floats. */
static long ulps(float a, float b) {
    long d = (long)bits_of(a) - (long)bits_of(b);
    return d < 0 ? -d : d;
}

__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma"))) static void
exp_avx512(const float *x, float *y, size_t n) {
    for (size_t i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, rl_expf8_avx512(_mm256_loadu_ps(x + i)));
}

/* rl_expf8n_avx512 with W vectors at once (W a constant, as where it is
 * used), over n / (8 W) * 8 W inputs; the rest by the one-vector form. */
#define EXP_AVX512_N(W)                                                                    \
    __attribute__((target(RL_TARGET_AVX512))) static void                                  \
        exp_avx512_##W(const float *x, float *y, size_t n) {                               \
        size_t i = 0;                                                                      \
        for (; i + 8 * (W) <= n; i += 8 * (W)) {                                           \
            __m256 xv[W], yv[W];                                                           \
            for (int b = 0; b < (W); b++)                                                  \
                xv[b] = _mm256_loadu_ps(x + i + 8 * b);                                    \
            rl_expf8n_avx512(yv, xv, (W));                                                 \
            for (int b = 0; b < (W); b++)                                                  \
                _mm256_storeu_ps(y + i + 8 * b, yv[b]);                                    \
        }                                                                                  \
        exp_avx512(x + i, y + i, n - i);                                                   \
    }
EXP_AVX512_N(2)
EXP_AVX512_N(3)
EXP_AVX512_N(4)
EXP_AVX512_N(8)
#undef EXP_AVX512_N

__attribute__((target("avx2,fma"))) static void exp_avx2(const float *x, float *y, size_t n) {
    for (size_t i = 0; i + 4 <= n; i += 4)
        _mm_storeu_ps(y + i, rl_expf4_avx2(_mm_loadu_ps(x + i)));
}

/* The inputs: every 61st f32 bit pattern of [-110, 95] (both signs), plus
 * the edges; n rounded down to a multiple of 8. */
static float *inputs(size_t *n) {
    size_t cap = 2400000, k = 0;
    float *x = malloc(cap * sizeof *x);
    const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 89.0f, nextafterf(89.0f, 100.0f),
                          -104.0f, nextafterf(-104.0f, -200.0f), 88.72283f, 88.72284f,
                          -87.33654f, -103.27893f, -103.972084f, 1e-8f, -1e-8f, 0.5f * logf(2.0f)};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
        x[k++] = edge[i];
    for (uint32_t u = 0; u < 0x42be0000u && k + 2 <= cap; u += 61) { /* |x| < 95 */
        float f;
        memcpy(&f, &u, sizeof f);
        x[k++] = f;
        if (f < 110.0f)
            x[k++] = -f;
    }
    *n = k / 8 * 8;
    return x;
}

__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma"))) static void
erf_avx512(const float *x, float *y, size_t n) {
    for (size_t i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, rl_erff8_avx512(_mm256_loadu_ps(x + i)));
}

/* A grouped form, REGS registers at a time (n a multiple of eight; a
 * last call with fewer takes copies of the last register): AVX-512's
 * (RL_VM_ERF_GROUPS) and AVX2's (RL_VM_ERF_AVX2_REGS). */
#define ERF_GROUPS(NAME, TARGET, REGS, FN)                                                   \
    __attribute__((target(TARGET))) static void NAME(const float *x, float *y, size_t n) {   \
        for (size_t i = 0; i < n; i += 8 * (REGS)) {                                         \
            __m256 a[REGS], b[REGS];                                                         \
            for (size_t g = 0; g < (REGS); g++)                                              \
                a[g] = _mm256_loadu_ps(x + (i + 8 * g < n ? i + 8 * g : n - 8));             \
            FN(a, b);                                                                        \
            for (size_t g = 0; g < (REGS) && i + 8 * g < n; g++)                             \
                _mm256_storeu_ps(y + i + 8 * g, b[g]);                                       \
        }                                                                                    \
    }
ERF_GROUPS(erf_avx512_groups, RL_TARGET_AVX512, RL_VM_ERF_GROUPS, rl_erff8xg_avx512)
ERF_GROUPS(erf_avx2_groups, RL_TARGET_AVX2, RL_VM_ERF_AVX2_REGS, rl_erff8xg_avx2)
#undef ERF_GROUPS

/* rl_erff on a sweep of |x| < 5 and the edges (each interval's ends and
 * the floats either side, both signs), against erf and libm's erff; its
 * SIMD forms against it bit for bit. */
static void test_erff(void) {
    size_t cap = 2200000, n = 0;
    float *x = malloc(cap * sizeof *x);
    const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 4.0f, -4.0f,
                          nextafterf(4.0f, 0.0f), 0.5f, 1.0f, 3.5f, 1e-30f, -1e-40f, 0x1p-149f};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
        x[n++] = edge[i];
    for (int k = 0; k <= 8; k++) /* the intervals' ends: i = floor(2|x|) changes */
        for (int s = 0; s < 2; s++) {
            const float e = s ? -0.5f * (float)k : 0.5f * (float)k;
            x[n++] = e, x[n++] = nextafterf(e, 0.0f), x[n++] = nextafterf(e, 2.0f * e);
        }
    for (uint32_t u = 0; u < 0x40a00000u && n + 2 <= cap; u += 977) { /* |x| < 5 */
        float f;
        memcpy(&f, &u, sizeof f);
        x[n++] = f;
        x[n++] = -f;
    }
    n = n / 8 * 8;
    float *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    long off_half = 0;
    for (size_t i = 0; i < n; i++) {
        y[i] = rl_erff(x[i]);
        if (isnan(x[i])) {
            CHECK_EACH(isnan(y[i]), "rl_erff(%a): %a, not NaN", (double)x[i], (double)y[i]);
            continue;
        }
        const float r = (float)erf((double)x[i]);
        CHECK_EACH(signbit(y[i]) == signbit(x[i]), "rl_erff(%a): %a, the wrong sign",
                   (double)x[i], (double)y[i]);
        CHECK_EACH(ulps(fabsf(y[i]), fabsf(r)) <= 1, "rl_erff(%a): %a, more than an ulp from erf %a",
                   (double)x[i], (double)y[i], (double)r);
        off_half += y[i] != r;
        CHECK_EACH(ulps(fabsf(y[i]), fabsf(erff(x[i]))) <= 1,
                   "rl_erff(%a): %a, more than an ulp from libm erff %a", (double)x[i],
                   (double)y[i], (double)erff(x[i]));
    }
    CHECK_MSG(off_half < 20, "rl_erff: %ld of %zu values not correctly rounded", off_half, n);
    CHECK(rl_erff(INFINITY) == 1.0f && rl_erff(-INFINITY) == -1.0f && rl_erff(4.5f) == 1.0f);
    CHECK(signbit(rl_erff(-0.0f)) && rl_erff(-0.0f) == 0.0f);
    CHECK(rl_erff(0x1p-149f) > 0.0f); /* the smallest subnormal's erf does not vanish */
    if (!rl_path_supported(RL_PATH_AVX2)) {
        CHECK_SKIP("vmath: this CPU has no %s", rl_path_name(RL_PATH_AVX2));
    } else {
        erf_avx2_groups(x, z, n);
        for (size_t i = 0; i < n; i++)
            CHECK_EACH(isnan(y[i]) ? isnan(z[i]) : bits_of(y[i]) == bits_of(z[i]),
                       "vmath erf avx2, %d registers (%a): %a, scalar form %a",
                       RL_VM_ERF_AVX2_REGS, (double)x[i], (double)z[i], (double)y[i]);
    }
    if (!rl_path_supported(RL_PATH_AVX512)) {
        CHECK_SKIP("vmath: this CPU has no %s", rl_path_name(RL_PATH_AVX512));
    } else {
        memset(z, 0, n * sizeof *z);
        erf_avx512(x, z, n);
        for (size_t i = 0; i < n; i++)
            CHECK_EACH(isnan(y[i]) ? isnan(z[i]) : bits_of(y[i]) == bits_of(z[i]),
                       "vmath erf avx512 (%a): %a, scalar form %a", (double)x[i], (double)z[i],
                       (double)y[i]);
        memset(z, 0, n * sizeof *z);
        erf_avx512_groups(x, z, n);
        for (size_t i = 0; i < n; i++)
            CHECK_EACH(isnan(y[i]) ? isnan(z[i]) : bits_of(y[i]) == bits_of(z[i]),
                       "vmath erf avx512, %d groups (%a): %a, scalar form %a", RL_VM_ERF_GROUPS,
                       (double)x[i], (double)z[i], (double)y[i]);
    }
    free(x), free(y), free(z);
}

/* rl_expf on every input of inputs(), against exp and libm's expf, and
 * its SIMD forms against it bit for bit. */
static void test_expf(void) {
    size_t n;
    float *x = inputs(&n), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    long off_half = 0;
    for (size_t i = 0; i < n; i++) {
        y[i] = rl_expf(x[i]);
        if (isnan(x[i])) {
            CHECK_EACH(isnan(y[i]), "rl_expf(%a): %a, not NaN", (double)x[i], (double)y[i]);
            continue;
        }
        const double e = exp((double)x[i]);
        const float r = (float)e; /* the correctly rounded value, but for ties */
        if (isinf(r) || r == 0.0f || fabs(e) < 0x1p-126) {
            CHECK_EACH(y[i] == r || ulps(y[i], r) <= 1, "rl_expf(%a): %a, want %a", (double)x[i],
                       (double)y[i], (double)r);
            continue;
        }
        CHECK_EACH(ulps(y[i], r) <= 1, "rl_expf(%a): %a, more than an ulp from exp %a",
                   (double)x[i], (double)y[i], (double)r);
        off_half += y[i] != r;
        CHECK_EACH(ulps(y[i], expf(x[i])) <= 1, "rl_expf(%a): %a, more than an ulp from libm expf %a",
                   (double)x[i], (double)y[i], (double)expf(x[i]));
    }
    CHECK_MSG(off_half < 20, "rl_expf: %ld of %zu values not correctly rounded", off_half, n);
    CHECK(rl_expf(0.0f) == 1.0f && rl_expf(-0.0f) == 1.0f);
    CHECK(rl_expf(INFINITY) == INFINITY && rl_expf(-INFINITY) == 0.0f);
    CHECK(rl_expf(100.0f) == INFINITY && rl_expf(-200.0f) == 0.0f);
    CHECK(rl_expf(-103.0f) > 0.0f && rl_expf(-103.0f) < 0x1p-126f); /* a subnormal */
    CHECK(n > 1000000);

    /* the SIMD forms: identical bits (NaN: still NaN); AVX-512's with 1, 2,
     * 3, 4 and 8 vectors at once (the inputs' ends and NaN among ordinary
     * lanes of the same batch) */
    static const struct {
        rl_path path;
        int width;
        void (*fn)(const float *, float *, size_t);
    } forms[] = {{RL_PATH_AVX2, 1, exp_avx2},       {RL_PATH_AVX512, 1, exp_avx512},
                 {RL_PATH_AVX512, 2, exp_avx512_2}, {RL_PATH_AVX512, 3, exp_avx512_3},
                 {RL_PATH_AVX512, 4, exp_avx512_4}, {RL_PATH_AVX512, 8, exp_avx512_8}};
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        if (!rl_path_supported(forms[f].path)) {
            CHECK_SKIP("vmath: this CPU has no %s", rl_path_name(forms[f].path));
            continue;
        }
        memset(z, 0, n * sizeof *z);
        forms[f].fn(x, z, n);
        for (size_t i = 0; i < n; i++)
            CHECK_EACH(isnan(y[i]) ? isnan(z[i]) : bits_of(y[i]) == bits_of(z[i]),
                       "vmath %s exp, %d vectors at once (%a): %a, scalar form %a",
                       rl_path_name(forms[f].path), forms[f].width, (double)x[i],
                       (double)z[i], (double)y[i]);
    }
    free(x), free(y), free(z);
}

int main(void) {
    CHECK_CASE(test_erff());
    CHECK_CASE(test_expf());
    return check_report("vmath");
}
