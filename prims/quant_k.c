/* quant_k.c - Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: ggml's reference quantizers
 * (the path llama-quantize takes without an importance matrix) and its
 * dequantizers, bit for bit (doc/formats.md §4).
 *
 * A super-block of 256 values is cut into sub-blocks of 16 or 32; each
 * sub-block gets a scale (and for Q2_K/Q4_K/Q5_K a min) from a small search
 * that minimises a weighted error, the sub-block scales are themselves
 * quantized against one binary16 super-scale, and the values are then
 * re-quantized against the scales as stored.  Every f32 operation below is
 * in ggml's order, and the Makefile compiles this file with
 * -ffp-contract=off: a different order, or an fma, changes the search's
 * choices and so the bytes.  Scratch lives on the stack, per block.  The
 * scale searches are in quant_k_fits.c.
 */
#include "prims/quants.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/kernel.h"
#include "prims/quant_internal.h"

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

static inline void rl_k4_pack_scales(uint8_t *s, const float *scales, const float *mins,
                                     float max_scale, float max_min) {
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < RL_QK_K / 32; j++) {
        /* the int is cut to a byte before the cap, as in ggml */
        uint8_t ls = (uint8_t)rl_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)rl_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
}
/* Q4_K/Q5_K: 8 sub-blocks of 32, weights av + |x| with av the RMS, the
 * fit, the 6-bit scales and mins, then the levels again against the stored
 * scales.  L: 256 levels 0..nmax. */
static void rl_k45_block(const float *x, uint16_t *d, uint16_t *dmin, uint8_t *s, uint8_t *L,
                         int nmax, float rmin, int nstep) {
    float mins[RL_QK_K / 32], scales[RL_QK_K / 32];
    float max_scale = 0, max_min = 0;
    rl_k_fits_table[rl_path_best()].k45(x, L, mins, scales, nmax, rmin, nstep);
    for (int j = 0; j < RL_QK_K / 32; j++) {
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    rl_k4_pack_scales(s, scales, mins, max_scale, max_min);
    *d = rl_f2h(max_scale / 63.f);
    *dmin = rl_f2h(max_min / 63.f);
    for (int j = 0; j < RL_QK_K / 32; j++) {
        uint8_t sc, m;
        rl_k4_scale_min(j, s, &sc, &m);
        const float dj = rl_h2f(*d) * sc;
        if (!dj)
            continue;
        const float dm = rl_h2f(*dmin) * m;
        for (int ii = 0; ii < 32; ii++) {
            int l = rl_nearest_int((x[32 * j + ii] + dm) / dj);
            L[32 * j + ii] = (uint8_t)rl_imax(0, rl_imin(nmax, l));
        }
    }
}

/* 2-bit levels of 128 values into 32 bytes: value l + 32k in bits 2k..2k+1
 * of byte l (Q2_K's and Q3_K's low bits). */
static inline void rl_pack2(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < RL_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 |
                                      L[j + l + 96] << 6);
}

void rl_quantize_q2_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q2_K *y = vy;
    const float q4scale = 15.f;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        uint8_t L[RL_QK_K];
        float mins[RL_QK_K / 16], scales[RL_QK_K / 16], w[16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < RL_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * j + l]);
            scales[j] = rl_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f,
                                         0.1f, 15, true);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < RL_QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)rl_nearest_int(iscale * scales[j]);
            y[i].d = rl_f2h(max_scale / q4scale);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = rl_f2h(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            /* an f32-subnormal max_min makes iscale infinite and the level
             * -2^22; ggml shifts it as two's complement, and so do we */
            for (int j = 0; j < RL_QK_K / 16; j++)
                y[i].scales[j] |= (uint8_t)((uint32_t)rl_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = rl_f2h(max_min / q4scale);
        } else {
            y[i].dmin = rl_f2h(0.f);
        }
        for (int j = 0; j < RL_QK_K / 16; j++) {
            const float d = rl_h2f(y[i].d) * (y[i].scales[j] & 0xf);
            if (!d)
                continue;
            const float dm = rl_h2f(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                int l = rl_nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)rl_imax(0, rl_imin(3, l));
            }
        }
        rl_pack2(L, y[i].qs);
    }
}

void rl_quantize_q3_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q3_K *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        int8_t L[RL_QK_K];
        float scales[RL_QK_K / 16];
        float max_scale = 0, amax = 0;
        for (int j = 0; j < RL_QK_K / 16; j++) {
            scales[j] = rl_fit_scale_q3(16, 4, x + 16 * j, L + 16 * j);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        /* 16 6-bit scales, biased by 32: low nibbles in bytes 0..7 (two per
         * byte, j and j+8), the top two bits in bytes 8..11. */
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < RL_QK_K / 16; j++) {
                int8_t l = (int8_t)rl_nearest_int(iscale * scales[j]);
                l = (int8_t)(rl_imax(-32, rl_imin(31, l)) + 32);
                if (j < 8)
                    y[i].scales[j] = (uint8_t)(l & 0xf);
                else
                    y[i].scales[j - 8] |= (uint8_t)((l & 0xf) << 4);
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = rl_f2h(1 / iscale);
        } else {
            y[i].d = rl_f2h(0.f);
        }
        for (int j = 0; j < RL_QK_K / 16; j++) {
            int8_t sc = (int8_t)(j < 8 ? y[i].scales[j] & 0xf : y[i].scales[j - 8] >> 4);
            sc = (int8_t)((sc | ((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32);
            float d = rl_h2f(y[i].d) * sc;
            if (!d)
                continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = rl_imax(-4, rl_imin(3, rl_nearest_int(x[16 * j + ii] / d)));
                L[16 * j + ii] = (int8_t)(l + 4);
            }
        }
        /* the third bit of value j goes to bit j/32 of hmask[j%32] */
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        uint8_t Lu[RL_QK_K];
        for (int j = 0; j < RL_QK_K; j++) {
            Lu[j] = (uint8_t)L[j];
            if (Lu[j] > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                Lu[j] -= 4;
            }
        }
        rl_pack2(Lu, y[i].qs);
    }
}

void rl_quantize_q4_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q4_K *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        uint8_t L[RL_QK_K];
        rl_k45_block(x, &y[i].d, &y[i].dmin, y[i].scales, L, 15, -1.f, 20);
        /* 64 values per 32 bytes: l in the low nibble, l+32 in the high */
        uint8_t *q = y[i].qs;
        for (int j = 0; j < RL_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

void rl_quantize_q5_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q5_K *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        uint8_t L[RL_QK_K];
        rl_k45_block(x, &y[i].d, &y[i].dmin, y[i].scales, L, 31, -0.5f, 15);
        /* low nibbles as Q4_K; the fifth bit of value n+j (n a multiple of
         * 64, j < 64) goes to bit 2*(n/64) + j/32 of qh[j%32] */
        memset(y[i].qh, 0, sizeof y[i].qh);
        uint8_t *ql = y[i].qs;
        for (int n = 0, b = 0; n < RL_QK_K; n += 64, b += 2, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y[i].qh[j] |= (uint8_t)(1u << b);
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y[i].qh[j] |= (uint8_t)(2u << b);
                }
                ql[j] = (uint8_t)(l1 | l2 << 4);
            }
        }
    }
}

void rl_quantize_q6_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q6_K *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        int8_t L[RL_QK_K];
        float scales[RL_QK_K / 16];
        float max_scale = 0, max_abs_scale = 0;
        rl_k_fits_table[rl_path_best()].q6(x, L, scales);
        for (int ib = 0; ib < RL_QK_K / 16; ib++) {
            float abs_scale = fabsf(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < RL_K_GROUP_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            y[i].d = rl_f2h(0.f);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = rl_f2h(1 / iscale);
        for (int ib = 0; ib < RL_QK_K / 16; ib++)
            y[i].scales[ib] = (int8_t)rl_imin(127, rl_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < RL_QK_K / 16; j++) {
            float d = rl_h2f(y[i].d) * y[i].scales[j];
            if (!d)
                continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = rl_imax(-32, rl_imin(31, rl_nearest_int(x[16 * j + ii] / d)));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        /* per 128 values: low nibbles of l and l+64 in ql[l], of l+32 and
         * l+96 in ql[l+32]; their top two bits in qh[l], 2 bits each */
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < RL_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = (uint8_t)L[j + l], q2 = (uint8_t)L[j + l + 32],
                              q3 = (uint8_t)L[j + l + 64], q4 = (uint8_t)L[j + l + 96];
                ql[l] = (uint8_t)((q1 & 0xf) | (q3 & 0xf) << 4);
                ql[l + 32] = (uint8_t)((q2 & 0xf) | (q4 & 0xf) << 4);
                qh[l] = (uint8_t)(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
            }
        }
    }
}

/* ---- dequantizers ------------------------------------------------------ */

void rl_dequantize_q2_K(const void *vx, float *y, size_t nb) {
    const rl_block_q2_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_h2f(x[i].d), min = rl_h2f(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int n = 0; n < RL_QK_K; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    uint8_t sc = x[i].scales[is++];
                    float dl = d * (sc & 0xf), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void rl_dequantize_q3_K(const void *vx, float *y, size_t nb) {
    const rl_block_q3_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d_all = rl_h2f(x[i].d);
        int8_t scales[16];
        rl_q3k_scales(x[i].scales, scales);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < RL_QK_K; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int half = 0; half < 2; half++) {
                    float dl = d_all * (scales[is++]);
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

void rl_dequantize_q4_K(const void *vx, float *y, size_t nb) {
    const rl_block_q4_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_h2f(x[i].d), min = rl_h2f(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int j = 0, is = 0; j < RL_QK_K; j += 64, q += 32, is += 2) {
            uint8_t sc, m;
            rl_k4_scale_min(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            rl_k4_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (q[l] & 0xf) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void rl_dequantize_q5_K(const void *vx, float *y, size_t nb) {
    const rl_block_q5_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_h2f(x[i].d), min = rl_h2f(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < RL_QK_K; j += 64, ql += 32, is += 2) {
            uint8_t sc, m;
            rl_k4_scale_min(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            rl_k4_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * ((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

void rl_dequantize_q6_K(const void *vx, float *y, size_t nb) {
    const rl_block_q6_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_h2f(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < RL_QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                const int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}
