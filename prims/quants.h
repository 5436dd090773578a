/* quants.h - llama.cpp's legacy (Q4_0, Q4_1, Q5_0, Q5_1), K-quant (Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K) and IQ4 (IQ4_NL, IQ4_XS) formats: quantize and
 * dequantize, bit for bit.
 *
 * Q8_0 lives apart (prims/q8.h): it has fast kernels and callers of its
 * own.  These types are what llama-quantize writes without an importance
 * matrix; the quantizers give the bytes ggml's quantize_row_*_ref gives (the
 * path ggml_quantize_chunk takes for them when imatrix is NULL) and the
 * dequantizers the floats ggml's dequantize_row_* gives (IQ4: the
 * no-weights path of quantize_iq4_nl / quantize_iq4_xs, which is not
 * quantize_row_iq4_nl_ref).  The layouts and
 * the arithmetic, in our words, are in doc/formats.md (§3 legacy quants,
 * §4 K-quants, §4a IQ4, §5 refusals).  The families' code is in
 * quant_legacy.c, quant_k.c and quant_iq4.c; their rows in prims/type_traits.c,
 * the checked entry points in quants.c.
 *
 * Plain C, no ECL, no allocation; safe to call from any thread.  Block data
 * may sit at any even address (every block here is an even number of bytes
 * and 2-aligned).
 */
#ifndef RL_PRIMS_QUANTS_H
#define RL_PRIMS_QUANTS_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "prims/kernel.h"
#include "prims/type_traits.h"

/* The blocks are gguf/blocks.h's (the one definition); these are the
 * kernels' names for them. */
#define RL_QK_LEGACY RL_GGUF_QK_LEGACY
#define RL_QK_K RL_GGUF_QK_K
#define RL_K_SCALE_BYTES RL_GGUF_K_SCALE_BYTES
typedef rl_gguf_block_q4_0 rl_block_q4_0;
typedef rl_gguf_block_q4_1 rl_block_q4_1;
typedef rl_gguf_block_q5_0 rl_block_q5_0;
typedef rl_gguf_block_q5_1 rl_block_q5_1;
typedef rl_gguf_block_q2_K rl_block_q2_K;
typedef rl_gguf_block_q3_K rl_block_q3_K;
typedef rl_gguf_block_q4_K rl_block_q4_K;
typedef rl_gguf_block_q5_K rl_block_q5_K;
typedef rl_gguf_block_q6_K rl_block_q6_K;
typedef rl_gguf_block_iq4_nl rl_block_iq4_nl;
typedef rl_gguf_block_iq4_xs rl_block_iq4_xs;
typedef rl_gguf_block_q8_1 rl_block_q8_1;
typedef rl_gguf_block_q8_K rl_block_q8_K;

/* The per-block reference kernels.  x: nb * block values; y: nb blocks.
 * No checks: the callers (rl_quantize, rl_dequantize) make them. */
void rl_quantize_q4_0_ref(const float *x, void *y, size_t nb);
void rl_quantize_q4_1_ref(const float *x, void *y, size_t nb);
void rl_quantize_q5_0_ref(const float *x, void *y, size_t nb);
void rl_quantize_q5_1_ref(const float *x, void *y, size_t nb);
void rl_dequantize_q4_0(const void *x, float *y, size_t nb);
void rl_dequantize_q4_1(const void *x, float *y, size_t nb);
void rl_dequantize_q5_0(const void *x, float *y, size_t nb);
void rl_dequantize_q5_1(const void *x, float *y, size_t nb);

void rl_quantize_q2_K_ref(const float *x, void *y, size_t nb);
void rl_quantize_q3_K_ref(const float *x, void *y, size_t nb);
void rl_quantize_q4_K_ref(const float *x, void *y, size_t nb);
void rl_quantize_q5_K_ref(const float *x, void *y, size_t nb);
void rl_quantize_q6_K_ref(const float *x, void *y, size_t nb);
void rl_dequantize_q2_K(const void *x, float *y, size_t nb);
void rl_dequantize_q3_K(const void *x, float *y, size_t nb);
void rl_dequantize_q4_K(const void *x, float *y, size_t nb);
void rl_dequantize_q5_K(const void *x, float *y, size_t nb);
void rl_dequantize_q6_K(const void *x, float *y, size_t nb);

void rl_quantize_iq4_nl_ref(const float *x, void *y, size_t nb);
void rl_quantize_iq4_xs_ref(const float *x, void *y, size_t nb);
void rl_dequantize_iq4_nl(const void *x, float *y, size_t nb);
void rl_dequantize_iq4_xs(const void *x, float *y, size_t nb);

/* The row products (prims/type_traits.h's vec_dot; quant_dot.c,
 * doc/products.md §4, §5) of every type here (legacy, K and IQ4): nb weight
 * blocks times nb activation blocks, Q8_1 ones for Q4_1 and Q5_1, Q8_K ones
 * for the K types and IQ4_XS, Q8_0 ones for the others, whose quants lie in
 * [-127, 127].  Every path of a type answers the same bits, ggml's AVX2
 * vec_dot's. */
float rl_vec_dot_q4_0_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q4_1_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_0_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_1_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_iq4_nl_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q4_0_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q4_1_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_0_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_1_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_iq4_nl_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q2_K_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q3_K_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q4_K_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_K_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q6_K_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_iq4_xs_ref(const void *w, const void *x, size_t nb);
float rl_vec_dot_q2_K_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q3_K_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q4_K_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_K_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q6_K_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_iq4_xs_avx2(const void *w, const void *x, size_t nb);
float rl_vec_dot_q4_0_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_q4_1_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_0_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_1_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_iq4_nl_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_q2_K_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_q3_K_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_q4_K_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_q5_K_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_q6_K_vnni(const void *w, const void *x, size_t nb);
float rl_vec_dot_iq4_xs_vnni(const void *w, const void *x, size_t nb);
extern const rl_vec_dot_kernel rl_vec_dot_q4_0_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_q4_1_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_q5_0_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_q5_1_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_iq4_nl_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_q2_K_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_q3_K_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_q4_K_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_q5_K_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_q6_K_table[RL_PATH_COUNT];
extern const rl_vec_dot_kernel rl_vec_dot_iq4_xs_table[RL_PATH_COUNT];
/* Q4_K's, Q5_K's and Q6_K's two-row products (type_traits.h's vec_dot2):
 * the SIMD paths' entries; the scalar path's is NULL. */
extern const rl_vec_dot2_kernel rl_vec_dot2_q4_K_table[RL_PATH_COUNT];
extern const rl_vec_dot2_kernel rl_vec_dot2_q5_K_table[RL_PATH_COUNT];
extern const rl_vec_dot2_kernel rl_vec_dot2_q6_K_table[RL_PATH_COUNT];

/* NB blocks of 32 floats at X into Q8_1 blocks at Y, as ggml's
 * quantize_row_q8_1_ref (the activations of the Q4_1 and Q5_1 products);
 * no checks. */
void rl_quantize_q8_1_ref(const float *x, void *y, size_t nb);
/* NB blocks of 256 floats at X into Q8_K blocks at Y, as ggml's
 * quantize_row_q8_K_ref (the activations of the K-quant products); no
 * checks. */
void rl_quantize_q8_K_ref(const float *x, void *y, size_t nb);

/* The row (prims/type_traits.h) of a type of this file, or NULL when the id is
 * not one of these (Q8_0 included: see prims/q8.h). */
const rl_type_traits *rl_quant_traits_of(uint32_t ggml_type);

/* The statuses are kernel.h's.  Quantize n values (n a multiple of the
 * type's block) at x into the type's blocks at y (rl_quant_bytes(type, n)
 * bytes).  Refuses, in this order: a type not of this file (RL_UNSUPPORTED),
 * a bad n (RL_BADLEN), NULL data (RL_BADARG), nothing written; a NaN or
 * infinity (RL_NONFINITE, *where = flat index of the first; nothing
 * written); a value beyond the type's limit, or else a block whose binary16
 * scale rounds to infinity (RL_OVERFLOW, *where = flat index of the first
 * such block; y's contents unspecified).  where may be NULL. */
rl_status rl_quantize(uint32_t ggml_type, const float *x, size_t n, void *y, size_t *where);

/* Dequantize n values from the blocks at x into y.  Any bytes are accepted
 * (infinite or NaN scales give what ggml gives).  RL_UNSUPPORTED,
 * RL_BADLEN, RL_BADARG as above. */
rl_status rl_dequantize(uint32_t ggml_type, const void *x, size_t n, float *y);

/* Bytes of n values of the type (n a multiple of its block); 0 for a type
 * not of this file. */
size_t rl_quant_bytes(uint32_t ggml_type, size_t n);

#endif
