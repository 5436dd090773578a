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
 * quant_legacy.c, quant_k.c and quant_iq4.c; the table and the checked entry
 * points in quants.c.
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

#define RL_QK_LEGACY 32 /* values per legacy block */
#define RL_QK_K 256     /* values per K-quant super-block */
#define RL_K_SCALE_BYTES 12 /* Q3_K..Q5_K packed 6-bit scales */

/* Legacy blocks: 32 values, binary16 scale d (and offset m for _1). */
typedef struct rl_block_q4_0 {
    uint16_t d;
    uint8_t qs[RL_QK_LEGACY / 2]; /* value j in the low nibble of qs[j], j+16 in the high */
} rl_block_q4_0;
typedef struct rl_block_q4_1 {
    uint16_t d, m;
    uint8_t qs[RL_QK_LEGACY / 2];
} rl_block_q4_1;
typedef struct rl_block_q5_0 {
    uint16_t d;
    uint8_t qh[4]; /* bit j: the fifth bit of value j, little-endian u32 */
    uint8_t qs[RL_QK_LEGACY / 2];
} rl_block_q5_0;
typedef struct rl_block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[RL_QK_LEGACY / 2];
} rl_block_q5_1;

/* K-quant super-blocks: 256 values in sub-blocks of 16 or 32. */
typedef struct rl_block_q2_K {
    uint8_t scales[RL_QK_K / 16]; /* low nibble scale, high nibble min, 4 bits each */
    uint8_t qs[RL_QK_K / 4];      /* 2-bit quants */
    uint16_t d, dmin;
} rl_block_q2_K;
typedef struct rl_block_q3_K {
    uint8_t hmask[RL_QK_K / 8]; /* third bit of each quant */
    uint8_t qs[RL_QK_K / 4];    /* low two bits */
    uint8_t scales[RL_K_SCALE_BYTES]; /* 16 6-bit scales */
    uint16_t d;
} rl_block_q3_K;
typedef struct rl_block_q4_K {
    uint16_t d, dmin;
    uint8_t scales[RL_K_SCALE_BYTES]; /* 8 6-bit scales and 8 6-bit mins */
    uint8_t qs[RL_QK_K / 2];
} rl_block_q4_K;
typedef struct rl_block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[RL_K_SCALE_BYTES];
    uint8_t qh[RL_QK_K / 8];
    uint8_t qs[RL_QK_K / 2];
} rl_block_q5_K;
typedef struct rl_block_q6_K {
    uint8_t ql[RL_QK_K / 2]; /* low four bits */
    uint8_t qh[RL_QK_K / 4]; /* high two bits */
    int8_t scales[RL_QK_K / 16];
    uint16_t d;
} rl_block_q6_K;

/* IQ4 blocks: 4-bit indices into a fixed table of 16 non-linear levels. */
typedef struct rl_block_iq4_nl {
    uint16_t d;
    uint8_t qs[16]; /* value j in the low nibble of qs[j], j+16 in the high */
} rl_block_iq4_nl;
typedef struct rl_block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;             /* top two bits of the 8 sub-block scales */
    uint8_t scales_l[RL_QK_K / 64]; /* their low nibbles, two per byte */
    uint8_t qs[RL_QK_K / 2];       /* 16 bytes per 32-value sub-block, as IQ4_NL */
} rl_block_iq4_xs;

/* The sizes gguf/types.c's table gives (tests/c/test_quants.c checks that
 * they agree); no padding anywhere. */
_Static_assert(sizeof(rl_block_q4_0) == 2 + 16, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(rl_block_q4_1) == 4 + 16, "Q4_1 block is 20 bytes");
_Static_assert(sizeof(rl_block_q5_0) == 2 + 4 + 16, "Q5_0 block is 22 bytes");
_Static_assert(sizeof(rl_block_q5_1) == 4 + 4 + 16, "Q5_1 block is 24 bytes");
_Static_assert(sizeof(rl_block_q2_K) == 16 + 64 + 4, "Q2_K block is 84 bytes");
_Static_assert(sizeof(rl_block_q3_K) == 32 + 64 + 12 + 2, "Q3_K block is 110 bytes");
_Static_assert(sizeof(rl_block_q4_K) == 4 + 12 + 128, "Q4_K block is 144 bytes");
_Static_assert(sizeof(rl_block_q5_K) == 4 + 12 + 32 + 128, "Q5_K block is 176 bytes");
_Static_assert(sizeof(rl_block_q6_K) == 128 + 64 + 16 + 2, "Q6_K block is 210 bytes");
_Static_assert(sizeof(rl_block_iq4_nl) == 2 + 16, "IQ4_NL block is 18 bytes");
_Static_assert(sizeof(rl_block_iq4_xs) == 2 + 2 + 4 + 128, "IQ4_XS block is 136 bytes");

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

/* One entry per type this file supports, filled once (quants.c). */
typedef struct rl_quant_traits {
    uint32_t ggml_type;  /* RL_GGUF_GGML_* */
    const char *name;    /* "Q4_K", as gguf/types.c spells it */
    uint32_t block;      /* values per block */
    uint32_t bytes;      /* bytes per block */
    void (*quantize)(const float *x, void *y, size_t nb);
    void (*dequantize)(const void *x, float *y, size_t nb);
    /* Byte offsets in the block of its binary16 scales (d, and dmin or m);
     * -1 where there is none.  rl_quantize refuses a block where one is
     * infinite. */
    int f16_at[2];
    /* The largest magnitude a dequantized value can have (every scale at
     * binary16's 65504, every level at its extreme).  rl_quantize refuses a
     * larger input: its block's scale could not be stored, and far beyond
     * it ggml's f32 sums overflow and give garbage with finite scales. */
    float limit;
} rl_quant_traits;

/* The entry for a ggml type id, or NULL when it is not one of these
 * (Q8_0 included: see prims/q8.h). */
const rl_quant_traits *rl_quant_traits_of(uint32_t ggml_type);

/* The statuses are kernel.h's.  Quantize n values (n a multiple of the
 * type's block) at x into the type's blocks at y (rl_quant_bytes(type, n)
 * bytes).  Refuses, in this order: a type not in the table (RL_UNSUPPORTED),
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
 * not in the table. */
size_t rl_quant_bytes(uint32_t ggml_type, size_t n);

#endif
