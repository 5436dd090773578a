/* quants.c - the table of llama.cpp's legacy, K-quant and IQ4 types and the
 * checked entry points over it (see quants.h).  The arithmetic is in
 * quant_legacy.c, quant_k.c and quant_iq4.c; this file only checks
 * arguments, picks the kernel from the table, and looks at the scales the
 * kernel wrote.
 */
#include "prims/quants.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/nn.h"

#define RL_F16_AT(T, f) ((int)offsetof(T, f))
#define RL_F16_MAX 65504.0f

/* limit: levels times scales at their largest.  Q4_0 8 (level -8); Q4_1 15
 * levels + the offset 16; Q5_0 16; Q5_1 31 + 1; Q2_K 15 * 3; Q3_K 32 * 4;
 * Q4_K 63 * 15; Q5_K 63 * 31; Q6_K 128 * 32; IQ4_NL 127 (the largest
 * level); IQ4_XS 32 * 127 (each times 65504). */

static const rl_quant_traits rl_quant_table[] = {
    {RL_GGUF_GGML_Q4_0, "Q4_0", RL_QK_LEGACY, sizeof(rl_block_q4_0), rl_quantize_q4_0_ref,
     rl_dequantize_q4_0, {RL_F16_AT(rl_block_q4_0, d), -1}, 8 * RL_F16_MAX},
    {RL_GGUF_GGML_Q4_1, "Q4_1", RL_QK_LEGACY, sizeof(rl_block_q4_1), rl_quantize_q4_1_ref,
     rl_dequantize_q4_1, {RL_F16_AT(rl_block_q4_1, d), RL_F16_AT(rl_block_q4_1, m)}, 16 * RL_F16_MAX},
    {RL_GGUF_GGML_Q5_0, "Q5_0", RL_QK_LEGACY, sizeof(rl_block_q5_0), rl_quantize_q5_0_ref,
     rl_dequantize_q5_0, {RL_F16_AT(rl_block_q5_0, d), -1}, 16 * RL_F16_MAX},
    {RL_GGUF_GGML_Q5_1, "Q5_1", RL_QK_LEGACY, sizeof(rl_block_q5_1), rl_quantize_q5_1_ref,
     rl_dequantize_q5_1, {RL_F16_AT(rl_block_q5_1, d), RL_F16_AT(rl_block_q5_1, m)}, 32 * RL_F16_MAX},
    {RL_GGUF_GGML_Q2_K, "Q2_K", RL_QK_K, sizeof(rl_block_q2_K), rl_quantize_q2_K_ref,
     rl_dequantize_q2_K, {RL_F16_AT(rl_block_q2_K, d), RL_F16_AT(rl_block_q2_K, dmin)}, 45 * RL_F16_MAX},
    {RL_GGUF_GGML_Q3_K, "Q3_K", RL_QK_K, sizeof(rl_block_q3_K), rl_quantize_q3_K_ref,
     rl_dequantize_q3_K, {RL_F16_AT(rl_block_q3_K, d), -1}, 128 * RL_F16_MAX},
    {RL_GGUF_GGML_Q4_K, "Q4_K", RL_QK_K, sizeof(rl_block_q4_K), rl_quantize_q4_K_ref,
     rl_dequantize_q4_K, {RL_F16_AT(rl_block_q4_K, d), RL_F16_AT(rl_block_q4_K, dmin)}, 945 * RL_F16_MAX},
    {RL_GGUF_GGML_Q5_K, "Q5_K", RL_QK_K, sizeof(rl_block_q5_K), rl_quantize_q5_K_ref,
     rl_dequantize_q5_K, {RL_F16_AT(rl_block_q5_K, d), RL_F16_AT(rl_block_q5_K, dmin)}, 1953 * RL_F16_MAX},
    {RL_GGUF_GGML_Q6_K, "Q6_K", RL_QK_K, sizeof(rl_block_q6_K), rl_quantize_q6_K_ref,
     rl_dequantize_q6_K, {RL_F16_AT(rl_block_q6_K, d), -1}, 4096 * RL_F16_MAX},
    {RL_GGUF_GGML_IQ4_NL, "IQ4_NL", 32, sizeof(rl_block_iq4_nl), rl_quantize_iq4_nl_ref,
     rl_dequantize_iq4_nl, {RL_F16_AT(rl_block_iq4_nl, d), -1}, 127 * RL_F16_MAX},
    {RL_GGUF_GGML_IQ4_XS, "IQ4_XS", RL_QK_K, sizeof(rl_block_iq4_xs), rl_quantize_iq4_xs_ref,
     rl_dequantize_iq4_xs, {RL_F16_AT(rl_block_iq4_xs, d), -1}, 4064 * RL_F16_MAX},
};

const rl_quant_traits *rl_quant_traits_of(uint32_t ggml_type) {
    for (size_t i = 0; i < sizeof rl_quant_table / sizeof rl_quant_table[0]; i++)
        if (rl_quant_table[i].ggml_type == ggml_type)
            return &rl_quant_table[i];
    return NULL;
}

size_t rl_quant_bytes(uint32_t ggml_type, size_t n) {
    const rl_quant_traits *t = rl_quant_traits_of(ggml_type);
    return t ? n / t->block * t->bytes : 0;
}

/* 1 if one of the block's binary16 scales is infinite (the only way a
 * finite input gives a non-finite scale). */
static int rl_quant_block_overflows(const rl_quant_traits *t, const unsigned char *blk) {
    for (int k = 0; k < 2; k++) {
        if (t->f16_at[k] < 0)
            continue;
        uint16_t h;
        memcpy(&h, blk + t->f16_at[k], sizeof h);
        if ((h & 0x7c00u) == 0x7c00u)
            return 1;
    }
    return 0;
}

rl_status rl_quantize(uint32_t ggml_type, const float *x, size_t n, void *y,
                            size_t *where) {
    const rl_quant_traits *t = rl_quant_traits_of(ggml_type);
    if (!t)
        return RL_UNSUPPORTED;
    if (n % t->block)
        return RL_BADLEN;
    if (n && (!x || !y))
        return RL_BADARG;
    size_t bad = rl_first_non_finite_f32(x, n);
    if (bad < n) {
        if (where)
            *where = bad;
        return RL_NONFINITE;
    }
    size_t nb = n / t->block;
    for (size_t i = 0; i < n; i++) {
        if (fabsf(x[i]) > t->limit) {
            if (where)
                *where = i / t->block;
            return RL_OVERFLOW;
        }
    }
    t->quantize(x, y, nb);
    const unsigned char *b = y;
    for (size_t i = 0; i < nb; i++) {
        if (rl_quant_block_overflows(t, b + i * t->bytes)) {
            if (where)
                *where = i;
            return RL_OVERFLOW;
        }
    }
    return RL_OK;
}

rl_status rl_dequantize(uint32_t ggml_type, const void *x, size_t n, float *y) {
    const rl_quant_traits *t = rl_quant_traits_of(ggml_type);
    if (!t)
        return RL_UNSUPPORTED;
    if (n % t->block)
        return RL_BADLEN;
    if (n && (!x || !y))
        return RL_BADARG;
    t->dequantize(x, y, n / t->block);
    return RL_OK;
}
