/* quant_iq4.c - IQ4_NL and IQ4_XS: 4-bit indices into a fixed non-linear
 * table of 16 levels, quantized as llama-quantize does without an
 * importance matrix (ggml_quantize_chunk -> quantize_iq4_nl / _xs with no
 * weights, seven tries each side), and dequantized as ggml's
 * dequantize_row_iq4_*, bit for bit (doc/formats.md §4a).
 *
 * Compiled with -ffp-contract=off (see the Makefile): the search compares
 * f32 sums, and an fma would change its choices.
 */
#include "prims/quants.h"

#include <math.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/quant_internal.h"

/* The 16 levels (ggml's kvalues_iq4nl), ascending. */
const int8_t rl_iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

/* The tries each side of the first scale: 7 is what ggml_quantize_chunk
 * passes for both types (quantize_row_iq4_nl_ref's -1 is not that path). */
#define RL_IQ4_NTRY 7
#define RL_IQ4_GROUP_EPS 1e-15f

/* Index of the level nearest v (ties to the upper one), by bisection as
 * ggml's best_index_int8 does it; a NaN answers 15, as there. */
static int rl_iq4_index(float v) {
    const int8_t *val = rl_iq4_levels;
    if (v <= val[0])
        return 0;
    if (v >= val[15])
        return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (v < val[mav])
            mu = mav;
        else
            ml = mav;
    }
    return v - val[mu - 1] < val[mu] - v ? mu - 1 : mu;
}

/* One 32-value sub-block: the x^2-weighted least-squares scale over the
 * first guess max/127 and the fifteen -(itry - 127)/max around it (the
 * best by sumqx^2/sumq2).  0 for a block below the cut.  L gets the
 * indices of the first guess (IQ4_XS recomputes them). */
static float rl_iq4_fit(const float *xb, uint8_t *L) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < RL_IQ4_GROUP_EPS)
        return 0;
    float d = -max / rl_iq4_levels[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        int l = rl_iq4_index(id * xb[j]);
        L[j] = (uint8_t)l;
        float q = rl_iq4_levels[l], w = xb[j] * xb[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -RL_IQ4_NTRY; itry <= RL_IQ4_NTRY; itry++) {
        id = (itry + rl_iq4_levels[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            float q = rl_iq4_levels[rl_iq4_index(id * xb[j])], w = xb[j] * xb[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* 32 indices into 16 bytes: j in the low nibble, j+16 in the high. */
static inline void rl_iq4_pack(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(L[j] | L[16 + j] << 4);
}

void rl_quantize_iq4_nl_ref(const float *x, void *vy, size_t nb) {
    rl_block_iq4_nl *y = vy;
    for (size_t i = 0; i < nb; i++, x += 32) {
        uint8_t L[32];
        float d = rl_iq4_fit(x, L);
        y[i].d = rl_gguf_f32_to_f16(d);
        /* indices again against the f32 scale (0 for a zero block: all
         * values at index 8, the level 1 nearest 0) */
        float id = d ? 1 / d : 0;
        for (int j = 0; j < 32; j++)
            L[j] = (uint8_t)rl_iq4_index(id * x[j]);
        rl_iq4_pack(L, y[i].qs);
    }
}

void rl_quantize_iq4_xs_ref(const float *x, void *vy, size_t nb) {
    rl_block_iq4_xs *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        uint8_t L[RL_QK_K];
        float scales[RL_QK_K / 32];
        float max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < RL_QK_K / 32; ib++) {
            scales[ib] = rl_iq4_fit(x + 32 * ib, L + 32 * ib);
            float abs_d = fabsf(scales[ib]);
            if (abs_d > amax_scale) {
                amax_scale = abs_d;
                max_scale = scales[ib];
            }
        }
        /* 8 6-bit sub-block scales, biased by 32: low nibbles two per
         * byte in scales_l, top two bits at bit 2*ib of scales_h */
        uint16_t sh = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        float d = -max_scale / 32;
        y[i].d = rl_gguf_f32_to_f16(d);
        float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < RL_QK_K / 32; ib++) {
            int l = rl_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            float dl = d * l;
            float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++)
                L[32 * ib + j] = (uint8_t)rl_iq4_index(idl * x[32 * ib + j]);
            l += 32;
            y[i].scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4 * (ib % 2));
            sh |= (uint16_t)((l >> 4) << 2 * ib);
        }
        y[i].scales_h = sh;
        for (int ib = 0; ib < RL_QK_K / 32; ib++)
            rl_iq4_pack(L + 32 * ib, y[i].qs + 16 * ib);
    }
}

void rl_dequantize_iq4_nl(const void *vx, float *y, size_t nb) {
    const rl_block_iq4_nl *x = vx;
    for (size_t i = 0; i < nb; i++, y += 32) {
        const float d = rl_gguf_f16_to_f32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * rl_iq4_levels[x[i].qs[j] & 0xf];
            y[j + 16] = d * rl_iq4_levels[x[i].qs[j] >> 4];
        }
    }
}

void rl_dequantize_iq4_xs(const void *vx, float *y, size_t nb) {
    const rl_block_iq4_xs *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_gguf_f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < RL_QK_K / 32; ib++, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                           ((x[i].scales_h >> 2 * ib) & 3) << 4;
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * rl_iq4_levels[qs[j] & 0xf];
                y[j + 16] = dl * rl_iq4_levels[qs[j] >> 4];
            }
        }
    }
}
