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

/* Q4_K/Q5_K's 12 scale bytes: sub-blocks 0..3 keep scale and min in the
 * low six bits of bytes j and j+4; 4..7 split theirs into a low nibble pair
 * in byte j+4 and the top two bits in bits 6..7 of bytes j-4 and j. */
static inline void rl_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

/* Q3_K's 16 signed scales from its 12 bytes: the low nibbles of bytes
 * 0..7, then their high nibbles, each with two high bits from bytes 8..11,
 * less 32. */
static inline void rl_q3k_scales(const uint8_t *q, int8_t sc[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? q[j] & 0xf : q[j - 8] >> 4;
        int hi = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (int8_t)((lo | hi << 4) - 32);
    }
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
