/* type_traits.c - the rows of prims/type_traits.h: what rontolisp does with each
 * tensor type it computes with.  The geometry is gguf/types.c's. */
#include "prims/type_traits.h"

#include <stddef.h>

#include "prims/q8.h"
#include "prims/quants.h"

/* F32, F16 and BF16 through gguf's row conversions (the one widener and
 * the one rounding, gguf/numfmt.h); a block is one value. */
#define RL_FLOAT_ROWS(NAME, ID)                                                    \
    static void NAME##_to_float(const void *x, float *y, size_t nb) {              \
        rl_gguf_row_to_f32(ID, x, y, nb);                                          \
    }                                                                              \
    static void NAME##_from_float(const float *x, void *y, size_t nb) {            \
        rl_gguf_row_from_f32(ID, x, y, nb);                                        \
    }
RL_FLOAT_ROWS(f32, RL_GGUF_GGML_F32)
RL_FLOAT_ROWS(f16, RL_GGUF_GGML_F16)
RL_FLOAT_ROWS(bf16, RL_GGUF_GGML_BF16)

static void q8_0_to_float(const void *x, float *y, size_t nb) {
    rl_q8_dequantize_ref(x, nb, y);
}

static void q8_0_from_float(const float *x, void *y, size_t nb) {
    (void)rl_q8_quantize_f32_ref(x, nb * RL_QK8_0, y, NULL);
}

#define RL_F16_AT(T, f) ((int)offsetof(T, f))
#define RL_F16_MAX 65504.0f

/* One quantized type of prims/quants.h: its kernels, its binary16 scales
 * D and M (or -1), its limit, and its row products, which take
 * activations of ggml type XT. */
#define RL_QUANT_ROW2(ID, q, D, M, LIMIT, XT, DOT2)                                   \
    [RL_GGUF_GGML_##ID] = {RL_FAMILY_QUANT, rl_dequantize_##q, rl_quantize_##q##_ref, \
                           {D, M}, LIMIT, NULL, NULL, rl_vec_dot_##q##_table,          \
                           RL_GGUF_GGML_##XT, DOT2}
#define RL_QUANT_ROW(ID, q, D, M, LIMIT, XT) RL_QUANT_ROW2(ID, q, D, M, LIMIT, XT, NULL)
#define RL_AT(q, f) RL_F16_AT(rl_block_##q, f)

/* limit: levels times scales at their largest.  Q4_0 8 (level -8); Q4_1 15
 * levels + the offset 16; Q5_0 16; Q5_1 31 + 1; Q2_K 15 * 3; Q3_K 32 * 4;
 * Q4_K 63 * 15; Q5_K 63 * 31; Q6_K 128 * 32; IQ4_NL 127 (the largest
 * level); IQ4_XS 32 * 127 (each times 65504).  Q8_0's limit is its own
 * check's (prims/q8.h). */
static const rl_type_traits rl_types[RL_GGUF_GGML_TYPE_COUNT] = {
    [RL_GGUF_GGML_F32] = {RL_FAMILY_FLOAT, f32_to_float, f32_from_float, {-1, -1}, 0,
                          rl_matvec_f32_table, NULL, NULL, 0},
    [RL_GGUF_GGML_F16] = {RL_FAMILY_FLOAT, f16_to_float, f16_from_float, {-1, -1}, 0, NULL, NULL,
                          NULL, 0},
    [RL_GGUF_GGML_BF16] = {RL_FAMILY_FLOAT, bf16_to_float, bf16_from_float, {-1, -1}, 0, NULL,
                           NULL, NULL, 0},
    [RL_GGUF_GGML_Q8_0] = {RL_FAMILY_Q8_0, q8_0_to_float, q8_0_from_float,
                           {RL_AT(q8_0, d), -1}, 0, NULL, rl_matvec_q8_table, NULL, 0},
    RL_QUANT_ROW(Q4_0, q4_0, RL_AT(q4_0, d), -1, 8 * RL_F16_MAX, Q8_0),
    RL_QUANT_ROW(Q4_1, q4_1, RL_AT(q4_1, d), RL_AT(q4_1, m), 16 * RL_F16_MAX, Q8_1),
    RL_QUANT_ROW(Q5_0, q5_0, RL_AT(q5_0, d), -1, 16 * RL_F16_MAX, Q8_0),
    RL_QUANT_ROW(Q5_1, q5_1, RL_AT(q5_1, d), RL_AT(q5_1, m), 32 * RL_F16_MAX, Q8_1),
    RL_QUANT_ROW(Q2_K, q2_K, RL_AT(q2_K, d), RL_AT(q2_K, dmin), 45 * RL_F16_MAX, Q8_K),
    RL_QUANT_ROW(Q3_K, q3_K, RL_AT(q3_K, d), -1, 128 * RL_F16_MAX, Q8_K),
    RL_QUANT_ROW2(Q4_K, q4_K, RL_AT(q4_K, d), RL_AT(q4_K, dmin), 945 * RL_F16_MAX, Q8_K,
                  rl_vec_dot2_q4_K_table),
    RL_QUANT_ROW2(Q5_K, q5_K, RL_AT(q5_K, d), RL_AT(q5_K, dmin), 1953 * RL_F16_MAX, Q8_K,
                  rl_vec_dot2_q5_K_table),
    RL_QUANT_ROW2(Q6_K, q6_K, RL_AT(q6_K, d), -1, 4096 * RL_F16_MAX, Q8_K,
                  rl_vec_dot2_q6_K_table),
    RL_QUANT_ROW(IQ4_NL, iq4_nl, RL_AT(iq4_nl, d), -1, 127 * RL_F16_MAX, Q8_0),
    RL_QUANT_ROW(IQ4_XS, iq4_xs, RL_AT(iq4_xs, d), -1, 4064 * RL_F16_MAX, Q8_K),
};

const rl_type_traits *rl_type_traits_of(uint32_t id) {
    return id < RL_GGUF_GGML_TYPE_COUNT && rl_types[id].family != RL_FAMILY_NONE ? &rl_types[id]
                                                                                 : NULL;
}

const char *rl_type_family_name(rl_type_family f) {
    switch (f) {
    case RL_FAMILY_FLOAT: return "float";
    case RL_FAMILY_Q8_0: return "q8_0";
    case RL_FAMILY_QUANT: return "quant";
    default: return "none";
    }
}

int rl_type_quantized(uint32_t id) {
    const rl_type_traits *t = rl_type_traits_of(id);
    return t && t->family != RL_FAMILY_FLOAT;
}

size_t rl_type_block(uint32_t id) {
    return rl_type_traits_of(id) ? rl_gguf_ggml_block_size(id) : 0;
}

size_t rl_type_bytes(uint32_t id, size_t n) {
    return rl_type_traits_of(id) ? n / rl_gguf_ggml_block_size(id) * rl_gguf_ggml_block_bytes(id)
                                 : 0;
}
