/* quant_legacy.c - Q4_0, Q4_1, Q5_0, Q5_1: ggml's reference quantizers and
 * its dequantizers, bit for bit (doc/formats.md §3).
 *
 * Workload: whole models quantized once, rows read back by Lisp; plain
 * scalar code, one pass per 32-value block.  The Makefile compiles this
 * file with -ffp-contract=off: a product and a sum fused into an fma would
 * round differently from ggml's separate f32 operations.
 */
#include "prims/quants.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "gguf/numfmt.h"

/* ggml converts (x*id + 8.5f) to an 8-bit integer with a C cast, which on
 * x86-64 is a truncating conversion to int32 (0x80000000 for NaN, infinities
 * and anything out of range) whose low byte is kept.  Plain C would be
 * undefined there (x*id is infinite or NaN when the f32 scale is subnormal
 * and its inverse overflows), so the rule is spelled out. */
static inline uint8_t rl_low_byte_of_cvtt(float v) {
    int32_t i = (v > -2147483648.5f && v < 2147483648.0f) ? (int32_t)v : INT32_MIN;
    return (uint8_t)(uint32_t)i;
}

/* The signed-max scale of Q4_0 and Q5_0: the value of largest magnitude
 * (the first one when several tie) divided by -8 or -16. */
static inline float rl_signed_max(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < RL_QK_LEGACY; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static inline void rl_min_max(const float *x, float *min, float *max) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < RL_QK_LEGACY; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *min = lo;
    *max = hi;
}

void rl_quantize_q4_0_ref(const float *x, void *vy, size_t nb) {
    rl_block_q4_0 *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_LEGACY) {
        const float d = rl_signed_max(x) / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = rl_gguf_f32_to_f16(d);
        for (int j = 0; j < RL_QK_LEGACY / 2; j++) {
            /* the byte is read as int8 and capped at 15 */
            int8_t lo = (int8_t)rl_low_byte_of_cvtt(x[j] * id + 8.5f);
            int8_t hi = (int8_t)rl_low_byte_of_cvtt(x[j + 16] * id + 8.5f);
            uint8_t q0 = (uint8_t)(lo < 15 ? lo : 15), q1 = (uint8_t)(hi < 15 ? hi : 15);
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void rl_quantize_q4_1_ref(const float *x, void *vy, size_t nb) {
    rl_block_q4_1 *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_LEGACY) {
        float min, max;
        rl_min_max(x, &min, &max);
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = rl_gguf_f32_to_f16(d);
        y[i].m = rl_gguf_f32_to_f16(min);
        for (int j = 0; j < RL_QK_LEGACY / 2; j++) {
            int8_t lo = (int8_t)rl_low_byte_of_cvtt((x[j] - min) * id + 0.5f);
            int8_t hi = (int8_t)rl_low_byte_of_cvtt((x[j + 16] - min) * id + 0.5f);
            uint8_t q0 = (uint8_t)(lo < 15 ? lo : 15), q1 = (uint8_t)(hi < 15 ? hi : 15);
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

/* Q5_0/Q5_1: the low nibbles as Q4's, the fifth bits gathered in qh. */
static inline void rl_pack5(const uint8_t q[RL_QK_LEGACY], uint8_t qs[16], uint8_t qh4[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < RL_QK_LEGACY / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
        qh |= (uint32_t)(q[j] >> 4 & 1) << j;
        qh |= (uint32_t)(q[j + 16] >> 4 & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++)
        qh4[k] = (uint8_t)(qh >> 8 * k);
}

void rl_quantize_q5_0_ref(const float *x, void *vy, size_t nb) {
    rl_block_q5_0 *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_LEGACY) {
        const float d = rl_signed_max(x) / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = rl_gguf_f32_to_f16(d);
        uint8_t q[RL_QK_LEGACY];
        for (int j = 0; j < RL_QK_LEGACY; j++) {
            int8_t v = (int8_t)rl_low_byte_of_cvtt(x[j] * id + 16.5f);
            q[j] = (uint8_t)(v < 31 ? v : 31);
        }
        rl_pack5(q, y[i].qs, y[i].qh);
    }
}

void rl_quantize_q5_1_ref(const float *x, void *vy, size_t nb) {
    rl_block_q5_1 *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_LEGACY) {
        float min, max;
        rl_min_max(x, &min, &max);
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = rl_gguf_f32_to_f16(d);
        y[i].m = rl_gguf_f32_to_f16(min);
        uint8_t q[RL_QK_LEGACY];
        for (int j = 0; j < RL_QK_LEGACY; j++) /* no cap here, as in ggml */
            q[j] = rl_low_byte_of_cvtt((x[j] - min) * id + 0.5f);
        rl_pack5(q, y[i].qs, y[i].qh);
    }
}

/* ---- dequantizers: q*d (+ m), one f32 product (and sum) each ---------- */

static inline uint32_t rl_qh_of(const uint8_t qh4[4]) {
    return (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 |
           (uint32_t)qh4[3] << 24;
}

void rl_dequantize_q4_0(const void *vx, float *y, size_t nb) {
    const rl_block_q4_0 *x = vx;
    for (size_t i = 0; i < nb; i++, y += RL_QK_LEGACY) {
        const float d = rl_gguf_f16_to_f32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            y[j + 16] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void rl_dequantize_q4_1(const void *vx, float *y, size_t nb) {
    const rl_block_q4_1 *x = vx;
    for (size_t i = 0; i < nb; i++, y += RL_QK_LEGACY) {
        const float d = rl_gguf_f16_to_f32(x[i].d), m = rl_gguf_f16_to_f32(x[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
            y[j + 16] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void rl_dequantize_q5_0(const void *vx, float *y, size_t nb) {
    const rl_block_q5_0 *x = vx;
    for (size_t i = 0; i < nb; i++, y += RL_QK_LEGACY) {
        const float d = rl_gguf_f16_to_f32(x[i].d);
        const uint32_t qh = rl_qh_of(x[i].qh);
        for (int j = 0; j < 16; j++) {
            int q0 = (x[i].qs[j] & 0x0f) | (int)(qh >> j & 1) << 4;
            int q1 = (x[i].qs[j] >> 4) | (int)(qh >> (j + 16) & 1) << 4;
            y[j] = (float)(q0 - 16) * d;
            y[j + 16] = (float)(q1 - 16) * d;
        }
    }
}

void rl_dequantize_q5_1(const void *vx, float *y, size_t nb) {
    const rl_block_q5_1 *x = vx;
    for (size_t i = 0; i < nb; i++, y += RL_QK_LEGACY) {
        const float d = rl_gguf_f16_to_f32(x[i].d), m = rl_gguf_f16_to_f32(x[i].m);
        const uint32_t qh = rl_qh_of(x[i].qh);
        for (int j = 0; j < 16; j++) {
            int q0 = (x[i].qs[j] & 0x0f) | (int)(qh >> j & 1) << 4;
            int q1 = (x[i].qs[j] >> 4) | (int)(qh >> (j + 16) & 1) << 4;
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        }
    }
}
