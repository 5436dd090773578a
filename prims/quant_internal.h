/* quant_internal.h - what the legacy, K-quant and IQ4 kernels share
 * (quant_legacy.c, quant_k.c, quant_k_fits.c, quant_iq4.c): ggml's integer
 * rounding and binary16 conversions, and the K-quant scale fits
 * (quant_k_fits.c).  Not part of quants.h's interface.
 */
#ifndef RL_PRIMS_QUANT_INTERNAL_H
#define RL_PRIMS_QUANT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"

/* Below this every value of a K-quant sub-block counts as zero. */
#define RL_K_GROUP_EPS 1e-15f

static inline int rl_imin(int a, int b) { return a < b ? a : b; }
static inline int rl_imax(int a, int b) { return a > b ? a : b; }

/* ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23
 * and reading the mantissa.  Exact for |v| < 2^22; beyond that it answers
 * whatever the bits say, and so do we. */
static inline int rl_nearest_int(float v) {
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* IQ4_NL's and IQ4_XS's 16 levels (ggml's kvalues_iq4nl), ascending
 * (quant_iq4.c). */
extern const int8_t rl_iq4_levels[16];

/* Q3_K's 16 scales from its 12 bytes, 6 bits each before the offset 32 is
 * taken off: the low nibbles of bytes 0..7, then their high nibbles, each
 * with two high bits from bytes 8..11 (bit pair j / 4 of byte 8 + j % 4).
 * Four at a time, byte j of the little-endian words o[0..3] scale j. */
static inline void rl_q3k_scale_words(const uint8_t *q, uint32_t o[4]) {
    uint32_t a[3];
    memcpy(a, q, 12);
    for (int i = 0; i < 4; i++)
        o[i] = ((a[i % 2] >> 4 * (i / 2)) & 0x0f0f0f0fu) | ((a[2] >> 2 * i) & 0x03030303u) << 4;
}

/* Q3_K's 16 signed scales: rl_q3k_scale_words's less 32. */
static inline void rl_q3k_scales(const uint8_t *q, int8_t sc[16]) {
    uint32_t o[4];
    rl_q3k_scale_words(q, o);
    for (int j = 0; j < 16; j++)
        sc[j] = (int8_t)((int)((o[j / 4] >> 8 * (j % 4)) & 0xff) - 32);
}

/* Q4_K's and Q5_K's 8 scales and 8 mins (rl_k4_scale_min's), four bytes
 * at a time: byte j of the little-endian words u[0..1] the scale of
 * sub-block j, byte j of u[2..3] its min. */
static inline void rl_k4_scales_mins(const uint8_t *q, uint32_t u[4]) {
    memcpy(u, q, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4;
    const uint32_t mins_lo = u[1] & 0x3f3f3f3fu;
    u[1] = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4;
    u[2] = mins_lo;
    u[0] &= 0x3f3f3f3fu;
}

static inline float rl_h2f(uint16_t h) { return rl_gguf_f16_to_f32(h); }
static inline uint16_t rl_f2h(float f) { return rl_gguf_f32_to_f16(f); }

/* Asymmetric fit of n values to levels 0..nmax (ggml's make_qkx2_quants);
 * Q3_K's symmetric fit (make_q3_quants).  See quant_k_fits.c. */
float rl_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                       float *the_min, float rmin, float rdelta, int nstep, bool use_mad);
float rl_fit_scale_q3(int n, int nmax, const float *x, int8_t *L);

/* The K-quant scale fits by path (doc/kernels.md §4): the fits of a Q4_K
 * or Q5_K super-block's 8 sub-blocks, and of a Q6_K super-block's 16. */
typedef struct rl_k_fits {
    void (*k45)(const float *x, uint8_t *L, float *mins, float *scales, int nmax, float rmin,
                int nstep);
    void (*q6)(const float *x, int8_t *L, float *scales);
} rl_k_fits;

extern const rl_k_fits rl_k_fits_table[RL_PATH_COUNT];

#endif
