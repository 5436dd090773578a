/* numfmt.c - f32 <-> binary16 in integer arithmetic (see numfmt.h).
 *
 * Written for exactness first: the quantizer rounds one scale per 32 values,
 * so this is nowhere near a hot path; the row versions exist for the file
 * tools' F16 conversions.
 */
#include "numfmt.h"

uint16_t rl_gguf_f32_to_f16(float f) {
    uint32_t x = rl_gguf_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: ggml's one quiet NaN, the sign kept */
        return (uint16_t)(sign | 0x7e00u);
    if (ax == 0x7f800000u)
        return (uint16_t)(sign | 0x7c00u);

    int e = (int)(ax >> 23) - 127;          /* unbiased exponent */
    uint32_t mant = ax & 0x7fffffu;
    if (e > 15)
        return (uint16_t)(sign | 0x7c00u);  /* beyond 65504 * 2: inf */
    if (e >= -14) {
        /* Normal in f16: keep 10 mantissa bits, round the 13 dropped ones.
         * A carry out of the mantissa bumps the exponent, and out of the
         * largest exponent gives exactly 0x7c00 (inf), as it should. */
        uint32_t h = ((uint32_t)(e + 15) << 10) | (mant >> 13);
        uint32_t rem = mant & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    if (e < -25)
        return sign;                        /* below half the least subnormal */
    /* Subnormal in f16: value = m * 2^-24 with m = mant24 * 2^(e+1). */
    uint32_t mant24 = mant | 0x800000u;
    int shift = -(e + 1);                   /* 14 .. 24 */
    uint32_t h = mant24 >> shift;
    uint32_t rem = mant24 & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u)))
        h++;                                /* may carry into the least normal */
    return (uint16_t)(sign | h);
}

/* The row converters apply one element conversion along a row; a double
 * is first rounded to f32 (doc/formats.md §1), then converted. */
static uint16_t rl_f64_to_f16(double v) { return rl_gguf_f32_to_f16((float)v); }
static uint16_t rl_f64_to_bf16(double v) { return rl_gguf_f32_to_bf16((float)v); }

#define RL_ROW_CONVERTER(name, tin, tout, conv)          \
    void name(const tin *x, tout *y, size_t n) {         \
        for (size_t i = 0; i < n; i++)                   \
            y[i] = conv(x[i]);                           \
    }

RL_ROW_CONVERTER(rl_gguf_f32_to_f16_row, float, uint16_t, rl_gguf_f32_to_f16)
RL_ROW_CONVERTER(rl_gguf_f16_to_f32_row, uint16_t, float, rl_gguf_f16_to_f32)
RL_ROW_CONVERTER(rl_gguf_f32_to_bf16_row, float, uint16_t, rl_gguf_f32_to_bf16)
RL_ROW_CONVERTER(rl_gguf_bf16_to_f32_row, uint16_t, float, rl_gguf_bf16_to_f32)
RL_ROW_CONVERTER(rl_gguf_f64_to_f16_row, double, uint16_t, rl_f64_to_f16)
RL_ROW_CONVERTER(rl_gguf_f64_to_bf16_row, double, uint16_t, rl_f64_to_bf16)

const char *rl_gguf_num_kind_name(uint32_t kind) {
    static const char *const names[RL_GGUF_NUM_KIND_COUNT] = {"f32", "f64", "f16", "bf16"};
    return kind < RL_GGUF_NUM_KIND_COUNT ? names[kind] : NULL;
}

size_t rl_gguf_first_non_finite(const void *x, size_t n, rl_gguf_num_kind kind) {
    size_t i;
    /* Non-finite: every exponent bit set, in each format's layout. */
    for (i = 0; i < n; i++) {
        int bad;
        switch (kind) {
        case RL_GGUF_NUM_F32:
            bad = (rl_gguf_f32_bits(((const float *)x)[i]) & 0x7f800000u) == 0x7f800000u;
            break;
        case RL_GGUF_NUM_F64:
            bad = (rl_gguf_f32_bits((float)((const double *)x)[i]) & 0x7f800000u) == 0x7f800000u;
            break;
        case RL_GGUF_NUM_F16:
            bad = (((const uint16_t *)x)[i] & 0x7c00u) == 0x7c00u;
            break;
        default:
            bad = (((const uint16_t *)x)[i] & 0x7f80u) == 0x7f80u;
            break;
        }
        if (bad)
            break;
    }
    return i;
}
