/* numfmt.h - the number formats GGUF files use, bit-exact with ggml.
 *
 * f32 <-> IEEE binary16 (round to nearest, ties to even; overflow to +-inf;
 * every NaN becomes ggml's quiet NaN 0x7e00 with its sign) and f32 <->
 * bfloat16 (ggml's rule: round to nearest even on the top 16 bits, NaN made
 * quiet).  Widening is exact, NaN payloads included (ggml's widening quiets
 * a signalling binary16 NaN; nothing in a model file depends on that).
 * Plain C, no ECL: the file tools and the Lisp primitives share it.
 */
#ifndef RL_GGUF_NUMFMT_H
#define RL_GGUF_NUMFMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t rl_gguf_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float rl_gguf_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round an f32 to binary16, ties to even.  Never traps, never depends on the
 * FPU rounding mode: all integer arithmetic. */
uint16_t rl_gguf_f32_to_f16(float f);

/* Widen binary16 to f32 exactly (subnormals, infinities and NaN payloads
 * included).  Integer arithmetic only, so it never raises a floating-point
 * exception (the Lisp side runs with traps enabled); inline because reading
 * one element of a quantized matrix calls it. */
static inline float rl_gguf_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) /* inf or NaN, payload kept */
        return rl_gguf_f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e != 0)
        return rl_gguf_f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0)
        return rl_gguf_f32_from_bits(sign);
    /* Subnormal: shift the leading 1 up to bit 10, adjusting the exponent. */
    int shift = __builtin_clz(m) - 21; /* m < 2^10: clz >= 22 */
    m = (m << shift) & 0x3ffu;
    return rl_gguf_f32_from_bits(sign | ((uint32_t)(113 - shift) << 23) | (m << 13));
}

/* ggml's f32 -> bf16: NaN made quiet (bit 6 of the result set), everything
 * else rounded to nearest even on the top 16 bits (overflow gives inf). */
static inline uint16_t rl_gguf_f32_to_bf16(float f) {
    uint32_t u = rl_gguf_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

static inline float rl_gguf_bf16_to_f32(uint16_t h) {
    return rl_gguf_f32_from_bits((uint32_t)h << 16);
}

/* Row conversions; n values each. */
void rl_gguf_f32_to_f16_row(const float *x, uint16_t *y, size_t n);
void rl_gguf_f16_to_f32_row(const uint16_t *x, float *y, size_t n);
void rl_gguf_f32_to_bf16_row(const float *x, uint16_t *y, size_t n);
void rl_gguf_bf16_to_f32_row(const uint16_t *x, float *y, size_t n);

/* Doubles narrow through C's cast to float first, as every kernel casts
 * them (so a double beyond the f32 range becomes inf: hold FP traps). */
void rl_gguf_f64_to_f16_row(const double *x, uint16_t *y, size_t n);
void rl_gguf_f64_to_bf16_row(const double *x, uint16_t *y, size_t n);

/* How a run of numbers is stored: the array "kind" codes the Lisp side
 * passes (%q8-quantize, %first-non-finite). */
typedef enum {
    RL_GGUF_NUM_F32 = 0,
    RL_GGUF_NUM_F64 = 1, /* judged once cast to f32, as every kernel casts it */
    RL_GGUF_NUM_F16 = 2, /* binary16 bits */
    RL_GGUF_NUM_BF16 = 3, /* bfloat16 bits */
    RL_GGUF_NUM_KIND_COUNT
} rl_gguf_num_kind;

/* "f32", "f64", "f16", "bf16" (the Lisp side's keywords), NULL past the
 * last kind. */
const char *rl_gguf_num_kind_name(uint32_t kind);

/* The index of the first NaN or infinity among the n values at x of KIND,
 * or n when all are finite.  Integer tests on the bits, except the f64 to
 * f32 cast (hold FP traps around it). */
size_t rl_gguf_first_non_finite(const void *x, size_t n, rl_gguf_num_kind kind);

#endif
