/* test_numfmt.c - gguf/numfmt.[ch] against IEEE 754 and ggml's bf16 rule.
 *
 * Exhaustive where the domain is small (all 65,536 binary16 and bfloat16
 * patterns), hand-picked edge cases where it is not (f32 -> f16 / bf16
 * rounding at every boundary), and, when the CPU has F16C, the hardware
 * converter as an independent reference over millions of random f32.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/rng.h"
#include "tests/c/check.h"

static float fb(uint32_t u) { return rl_gguf_f32_from_bits(u); }

static int f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }
static int bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu); }

/* The value of a binary16 pattern computed in double, independently of
 * numfmt.c: sign * significand * 2^exponent. */
static double f16_value_ref(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp(m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void test_f16_exhaustive(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = rl_gguf_f16_to_f32((uint16_t)h);
        uint16_t back = rl_gguf_f32_to_f16(f);
        if (f16_is_nan((uint16_t)h)) {
            CHECK_EACH(isnan(f) && f16_is_nan(back), "f16 NaN %04x: f32 %08x, back %04x", h,
                       rl_gguf_f32_bits(f), back);
            CHECK_EACH(!((back ^ h) & 0x8000u), "f16 NaN %04x loses its sign: back %04x", h,
                       back);
            continue;
        }
        CHECK_EACH(back == h, "f16->f32->f16 %04x: %04x (f32 %08x)", h, back,
                   rl_gguf_f32_bits(f));
        double ref = f16_value_ref((uint16_t)h);
        CHECK_EACH((double)f == ref && !signbit(f) == !signbit(ref), "f16->f32 %04x: %a, want %a",
                   h, (double)f, ref);
    }
}

static void test_f16_edges(void) {
    static const struct {
        uint32_t f32;
        uint16_t f16;
        const char *what;
    } cases[] = {
        {0x3f800000, 0x3c00, "1"},
        {0x3f801000, 0x3c00, "1 + 2^-11: tie, to even (down)"},
        {0x3f803000, 0x3c02, "1 + 3*2^-11: tie, to even (up)"},
        {0x3f801001, 0x3c01, "just above the tie"},
        {0x45001000, 0x6800, "2049: tie between 2048 and 2050, to even"},
        {0x45003000, 0x6802, "2051: tie, to even 2052"},
        {0x477fe000, 0x7bff, "65504, the largest finite"},
        {0x477fefff, 0x7bff, "65519.99: below the midpoint"},
        {0x477ff000, 0x7c00, "65520: tie between 65504 and 65536, to even: inf"},
        {0xc77ff000, 0xfc00, "-65520: -inf"},
        {0x47800000, 0x7c00, "65536: inf"},
        {0x7f7fffff, 0x7c00, "FLT_MAX: inf"},
        {0x38800000, 0x0400, "2^-14, the least normal"},
        {0x387fc000, 0x03ff, "the largest subnormal"},
        {0x387fe000, 0x0400, "tie between the largest subnormal and the least normal"},
        {0x33800000, 0x0001, "2^-24, the least subnormal"},
        {0x33000000, 0x0000, "2^-25: tie between 0 and 2^-24, to even: 0"},
        {0x33000001, 0x0001, "just above 2^-25: 2^-24"},
        {0x33c00000, 0x0002, "3*2^-25: tie between 1 and 2 ulps, to even: 2"},
        {0xb3000000, 0x8000, "-2^-25: -0"},
        {0x32ffffff, 0x0000, "below 2^-25: 0"},
        {0x00000001, 0x0000, "an f32 subnormal: 0"},
        {0x80000001, 0x8000, "a negative f32 subnormal: -0"},
        {0x00000000, 0x0000, "+0"},
        {0x80000000, 0x8000, "-0"},
        {0x7f800000, 0x7c00, "+inf"},
        {0xff800000, 0xfc00, "-inf"},
        {0x3dcccccd, 0x2e66, "0.1f"},
        {0xc0490fdb, 0xc248, "-pi"},
    };
    long bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = rl_gguf_f32_to_f16(fb(cases[i].f32));
        if (got != cases[i].f16) {
            bad++;
            fprintf(stderr, "f32->f16 %08x (%s): got %04x, expected %04x\n", cases[i].f32,
                    cases[i].what, got, cases[i].f16);
        }
    }
    CHECK_MSG(bad == 0, "%ld f32->f16 edge cases wrong", bad);

    /* NaN: ggml's quiet NaN 0x7e00, keeping the sign, whatever the payload. */
    CHECK_EQ_U(rl_gguf_f32_to_f16(fb(0x7fc00000)), 0x7e00);
    CHECK_EQ_U(rl_gguf_f32_to_f16(fb(0x7f800001)), 0x7e00); /* signalling: quiet, not inf */
    CHECK_EQ_U(rl_gguf_f32_to_f16(fb(0x7fbfe000)), 0x7e00); /* payload dropped */
    CHECK_EQ_U(rl_gguf_f32_to_f16(fb(0xffc00000)), 0xfe00);
}

/* ggml's f32 -> bf16, written here the textbook way (not numfmt's add
 * trick): keep the top half, round on the bottom half, ties to even; NaN:
 * top half with the quiet bit (bit 6 of the result) set. */
static uint16_t bf16_ref(uint32_t u) {
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    uint32_t hi = u >> 16, lo = u & 0xffffu;
    if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u)))
        hi++;
    return (uint16_t)hi;
}

static uint64_t rng_state = 0x9e3779b9u;
static uint32_t rnd(void) { return (uint32_t)(rl_rng_next(&rng_state) >> 32); }

static void test_bf16(void) {
    static const struct {
        uint32_t f32;
        uint16_t bf16;
        const char *what;
    } cases[] = {
        {0x3f800000, 0x3f80, "1"},
        {0x3f808000, 0x3f80, "tie above 1, to even (down)"},
        {0x3f818000, 0x3f82, "tie, to even (up)"},
        {0x3f808001, 0x3f81, "just above the tie"},
        {0x3f807fff, 0x3f80, "just below the tie"},
        {0x7f7fffff, 0x7f80, "FLT_MAX rounds up to inf"},
        {0x7f7f8000, 0x7f80, "tie below FLT_MAX, odd: to inf"},
        {0x7f7f7fff, 0x7f7f, "the largest value that stays finite"},
        {0xff7fffff, 0xff80, "-FLT_MAX: -inf"},
        {0x7f800000, 0x7f80, "+inf"},
        {0xff800000, 0xff80, "-inf"},
        {0x7f800001, 0x7fc0, "signalling NaN, tiny payload: made quiet, not inf"},
        {0xff800001, 0xffc0, "negative signalling NaN: quiet, sign kept"},
        {0x7fc00000, 0x7fc0, "quiet NaN"},
        {0x7fa00000, 0x7fe0, "NaN payload kept, quiet bit set"},
        {0x00000001, 0x0000, "the least f32 subnormal: 0"},
        {0x00008000, 0x0000, "subnormal tie, to even: 0"},
        {0x00018000, 0x0002, "subnormal tie, to even: 2"},
        {0x00008001, 0x0001, "subnormal above the tie"},
        {0x00010000, 0x0001, "a bf16 subnormal is kept (no flush to zero)"},
        {0x007fffff, 0x0080, "the largest subnormal rounds up to the least normal"},
        {0x80010000, 0x8001, "negative subnormal kept"},
        {0x00000000, 0x0000, "+0"},
        {0x80000000, 0x8000, "-0"},
        {0x3dcccccd, 0x3dcd, "0.1f"},
    };
    long bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = rl_gguf_f32_to_bf16(fb(cases[i].f32));
        if (got != cases[i].bf16) {
            bad++;
            fprintf(stderr, "f32->bf16 %08x (%s): got %04x, expected %04x\n", cases[i].f32,
                    cases[i].what, got, cases[i].bf16);
        }
    }
    CHECK_MSG(bad == 0, "%ld f32->bf16 edge cases wrong", bad);

    /* The rule itself, against the textbook version, on random patterns. */
    for (long i = 0; i < 4000000; i++) {
        uint32_t u = rnd();
        CHECK_EACH(rl_gguf_f32_to_bf16(fb(u)) == bf16_ref(u), "f32->bf16 %08x: %04x, reference %04x",
                   u, rl_gguf_f32_to_bf16(fb(u)), bf16_ref(u));
    }

    /* Widening: exact (the pattern shifted) and the identity back. */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = rl_gguf_bf16_to_f32((uint16_t)h);
        CHECK_EACH(rl_gguf_f32_bits(f) == h << 16, "bf16->f32 %04x: %08x", h, rl_gguf_f32_bits(f));
        uint16_t back = rl_gguf_f32_to_bf16(f);
        if (bf16_is_nan((uint16_t)h))
            CHECK_EACH(bf16_is_nan(back) && !((back ^ h) & 0x8000u),
                       "bf16 NaN %04x: back %04x, not NaN with its sign", h, back);
        else
            CHECK_EACH(back == h, "bf16->f32->bf16 %04x: %04x", h, back);
    }
}

static void test_rows(void) {
    float x[257], y[257];
    uint16_t h[257], g[257];
    for (int i = 0; i < 257; i++)
        x[i] = fb(rnd());
    rl_gguf_f32_to_f16_row(x, h, 257);
    for (int i = 0; i < 257; i++)
        CHECK_EACH(h[i] == rl_gguf_f32_to_f16(x[i]), "f32->f16 row [%d] %08x: %04x, scalar %04x",
                   i, rl_gguf_f32_bits(x[i]), h[i], rl_gguf_f32_to_f16(x[i]));
    rl_gguf_f16_to_f32_row(h, y, 257);
    for (int i = 0; i < 257; i++)
        CHECK_EACH(rl_gguf_f32_bits(y[i]) == rl_gguf_f32_bits(rl_gguf_f16_to_f32(h[i])),
                   "f16->f32 row [%d] %04x: %08x, scalar %08x", i, h[i], rl_gguf_f32_bits(y[i]),
                   rl_gguf_f32_bits(rl_gguf_f16_to_f32(h[i])));
    rl_gguf_f32_to_bf16_row(x, g, 257);
    for (int i = 0; i < 257; i++)
        CHECK_EACH(g[i] == rl_gguf_f32_to_bf16(x[i]),
                   "f32->bf16 row [%d] %08x: %04x, scalar %04x", i, rl_gguf_f32_bits(x[i]), g[i],
                   rl_gguf_f32_to_bf16(x[i]));
    rl_gguf_bf16_to_f32_row(g, y, 257);
    for (int i = 0; i < 257; i++)
        CHECK_EACH(rl_gguf_f32_bits(y[i]) == (uint32_t)g[i] << 16,
                   "bf16->f32 row [%d] %04x: %08x", i, g[i], rl_gguf_f32_bits(y[i]));
}

__attribute__((target("f16c"))) static uint16_t hw_f32_to_f16(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

__attribute__((target("f16c"))) static float hw_f16_to_f32(uint16_t h) {
    return _cvtsh_ss(h);
}

static void test_f16c(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("f16c")) {
        CHECK_SKIP("numfmt: no F16C on this CPU, hardware comparison skipped");
        return;
    }
    /* Random patterns, then patterns concentrated where f16 rounds: the f32
     * exponents that land near or inside binary16's range. */
    /* NaN is ggml's one quiet NaN 0x7e00 with the sign, where F16C keeps
     * the payload's top bits; every other input must match F16C exactly. */
    for (long i = 0; i < 4000000; i++) {
        uint32_t u = rnd();
        uint16_t want = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u)
                                                        : hw_f32_to_f16(fb(u));
        uint16_t got = rl_gguf_f32_to_f16(fb(u));
        CHECK_EACH(got == want, "f32->f16 %08x: %04x, F16C %04x", u, got, want);
    }
    for (long i = 0; i < 4000000; i++) {
        uint32_t e = 100 + rnd() % 48; /* 2^-27 .. 2^20 */
        uint32_t u = (rnd() & 0x807fffffu) | (e << 23);
        uint16_t got = rl_gguf_f32_to_f16(fb(u)), want = hw_f32_to_f16(fb(u));
        CHECK_EACH(got == want, "f32->f16 %08x: %04x, F16C %04x", u, got, want);
    }

    for (uint32_t h = 0; h < 65536; h++) {
        float a = rl_gguf_f16_to_f32((uint16_t)h), b = hw_f16_to_f32((uint16_t)h);
        CHECK_EACH(f16_is_nan((uint16_t)h) ? isnan(a) && isnan(b)
                                           : rl_gguf_f32_bits(a) == rl_gguf_f32_bits(b),
                   "f16->f32 %04x: %08x, F16C %08x", h, rl_gguf_f32_bits(a),
                   rl_gguf_f32_bits(b));
    }
}

/* The non-finite scan in each storage kind, and the double rows. */
static void test_non_finite(void) {
    float f[5] = {1.0f, -0.0f, 65504.0f, 0, 2.0f};
    double d[3] = {1.0, 1e300, 0.0}; /* 1e300 is inf once cast to f32 */
    uint16_t h[4] = {0x3c00, 0x7bff, 0x7c00, 0};
    uint16_t b[3] = {0x3f80, 0xff80, 0};
    uint16_t y[3];
    f[3] = rl_gguf_f32_from_bits(0x7fc00001u);
    CHECK_EQ_U(rl_gguf_first_non_finite(f, 5, RL_GGUF_NUM_F32), 3);
    CHECK_EQ_U(rl_gguf_first_non_finite(f, 3, RL_GGUF_NUM_F32), 3); /* none: n */
    CHECK_EQ_U(rl_gguf_first_non_finite(d, 3, RL_GGUF_NUM_F64), 1);
    CHECK_EQ_U(rl_gguf_first_non_finite(h, 4, RL_GGUF_NUM_F16), 2);
    CHECK_EQ_U(rl_gguf_first_non_finite(h, 2, RL_GGUF_NUM_F16), 2);
    CHECK_EQ_U(rl_gguf_first_non_finite(b, 3, RL_GGUF_NUM_BF16), 1);
    CHECK_EQ_U(rl_gguf_first_non_finite(b, 0, RL_GGUF_NUM_BF16), 0);
    rl_gguf_f64_to_f16_row(d, y, 3);
    CHECK_EQ_U(y[0], 0x3c00);
    CHECK_EQ_U(y[1], 0x7c00);
    CHECK_EQ_U(y[2], 0);
    rl_gguf_f64_to_bf16_row(d, y, 3);
    CHECK_EQ_U(y[0], 0x3f80);
    CHECK_EQ_U(y[1], 0x7f80);
}

int main(void) {
    CHECK_CASE(test_non_finite());
    CHECK_CASE(test_f16_exhaustive());
    CHECK_CASE(test_f16_edges());
    CHECK_CASE(test_bf16());
    CHECK_CASE(test_rows());
    CHECK_CASE(test_f16c());
    return check_report("numfmt");
}
