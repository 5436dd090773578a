/* blocks.h - every block struct of the ggml tensor types rontolisp reads
 * and writes (ggml keeps them in ggml-common.h): Q8_0, the legacy types
 * (Q4_0, Q4_1, Q5_0, Q5_1), the K-quants (Q2_K .. Q6_K) and IQ4 (IQ4_NL,
 * IQ4_XS), and Q8_1 and Q8_K, the activations of row products.  The one definition: gguf/types.c takes each type's bytes per
 * block from these sizes, and the kernels in prims/ read and write these
 * structs.  The layouts in words are in doc/formats.md (§2 Q8_0, §3 legacy,
 * §4 K-quants, §4a IQ4).
 *
 * Plain C, no ECL.  Every block is an even number of bytes, 2-aligned, with
 * no padding: block data may sit at any even address of a file mapping.
 */
#ifndef RL_GGUF_BLOCKS_H
#define RL_GGUF_BLOCKS_H

#include <stdint.h>

#define RL_GGUF_QK8_0 32        /* values per Q8_0 block */
#define RL_GGUF_QK_LEGACY 32    /* values per legacy block (and IQ4_NL's) */
#define RL_GGUF_QK_K 256        /* values per K-quant super-block (and IQ4_XS's) */
#define RL_GGUF_K_SCALE_BYTES 12 /* Q3_K..Q5_K packed 6-bit scales */

/* Q8_0 (ggml's block_q8_0): the scale as binary16, little-endian, then 32
 * signed quants. */
typedef struct rl_gguf_block_q8_0 {
    uint16_t d;
    int8_t qs[RL_GGUF_QK8_0];
} rl_gguf_block_q8_0;

/* Q8_1 (ggml's block_q8_1): the activations of the Q4_1 and Q5_1 row
 * products.  The scale d and s = d * (the sum of the 32 quants), both as
 * binary16, then the quants. */
typedef struct rl_gguf_block_q8_1 {
    uint16_t d, s;
    int8_t qs[RL_GGUF_QK8_0];
} rl_gguf_block_q8_1;

/* Legacy blocks: 32 values, binary16 scale d (and offset m for _1). */
typedef struct rl_gguf_block_q4_0 {
    uint16_t d;
    uint8_t qs[RL_GGUF_QK_LEGACY / 2]; /* value j in the low nibble of qs[j], j+16 in the high */
} rl_gguf_block_q4_0;
typedef struct rl_gguf_block_q4_1 {
    uint16_t d, m;
    uint8_t qs[RL_GGUF_QK_LEGACY / 2];
} rl_gguf_block_q4_1;
typedef struct rl_gguf_block_q5_0 {
    uint16_t d;
    uint8_t qh[4]; /* bit j: the fifth bit of value j, little-endian u32 */
    uint8_t qs[RL_GGUF_QK_LEGACY / 2];
} rl_gguf_block_q5_0;
typedef struct rl_gguf_block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[RL_GGUF_QK_LEGACY / 2];
} rl_gguf_block_q5_1;

/* K-quant super-blocks: 256 values in sub-blocks of 16 or 32. */
typedef struct rl_gguf_block_q2_K {
    uint8_t scales[RL_GGUF_QK_K / 16]; /* low nibble scale, high nibble min, 4 bits each */
    uint8_t qs[RL_GGUF_QK_K / 4];      /* 2-bit quants */
    uint16_t d, dmin;
} rl_gguf_block_q2_K;
typedef struct rl_gguf_block_q3_K {
    uint8_t hmask[RL_GGUF_QK_K / 8]; /* third bit of each quant */
    uint8_t qs[RL_GGUF_QK_K / 4];    /* low two bits */
    uint8_t scales[RL_GGUF_K_SCALE_BYTES]; /* 16 6-bit scales */
    uint16_t d;
} rl_gguf_block_q3_K;
typedef struct rl_gguf_block_q4_K {
    uint16_t d, dmin;
    uint8_t scales[RL_GGUF_K_SCALE_BYTES]; /* 8 6-bit scales and 8 6-bit mins */
    uint8_t qs[RL_GGUF_QK_K / 2];
} rl_gguf_block_q4_K;
typedef struct rl_gguf_block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[RL_GGUF_K_SCALE_BYTES];
    uint8_t qh[RL_GGUF_QK_K / 8];
    uint8_t qs[RL_GGUF_QK_K / 2];
} rl_gguf_block_q5_K;
typedef struct rl_gguf_block_q6_K {
    uint8_t ql[RL_GGUF_QK_K / 2]; /* low four bits */
    uint8_t qh[RL_GGUF_QK_K / 4]; /* high two bits */
    int8_t scales[RL_GGUF_QK_K / 16];
    uint16_t d;
} rl_gguf_block_q6_K;

/* Q8_K (ggml's block_q8_K): the activations of the K-quant row products,
 * never in a file.  The scale as an f32, 256 quants, and the sums of each
 * 16 of them.  4-aligned, unlike every block above. */
typedef struct rl_gguf_block_q8_K {
    float d;
    int8_t qs[RL_GGUF_QK_K];
    int16_t bsums[RL_GGUF_QK_K / 16];
} rl_gguf_block_q8_K;

/* IQ4 blocks: 4-bit indices into a fixed table of 16 non-linear levels. */
typedef struct rl_gguf_block_iq4_nl {
    uint16_t d;
    uint8_t qs[RL_GGUF_QK_LEGACY / 2]; /* value j in the low nibble of qs[j], j+16 in the high */
} rl_gguf_block_iq4_nl;
typedef struct rl_gguf_block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;                  /* top two bits of the 8 sub-block scales */
    uint8_t scales_l[RL_GGUF_QK_K / 64]; /* their low nibbles, two per byte */
    uint8_t qs[RL_GGUF_QK_K / 2];       /* 16 bytes per 32-value sub-block, as IQ4_NL */
} rl_gguf_block_iq4_xs;

/* ggml's sizes; no padding anywhere. */
_Static_assert(sizeof(rl_gguf_block_q8_0) == 2 + 32, "Q8_0 block is 34 bytes");
_Static_assert(_Alignof(rl_gguf_block_q8_0) == 2, "Q8_0 block is 2-aligned");
_Static_assert(sizeof(rl_gguf_block_q8_1) == 4 + 32, "Q8_1 block is 36 bytes");
_Static_assert(sizeof(rl_gguf_block_q4_0) == 2 + 16, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(rl_gguf_block_q4_1) == 4 + 16, "Q4_1 block is 20 bytes");
_Static_assert(sizeof(rl_gguf_block_q5_0) == 2 + 4 + 16, "Q5_0 block is 22 bytes");
_Static_assert(sizeof(rl_gguf_block_q5_1) == 4 + 4 + 16, "Q5_1 block is 24 bytes");
_Static_assert(sizeof(rl_gguf_block_q2_K) == 16 + 64 + 4, "Q2_K block is 84 bytes");
_Static_assert(sizeof(rl_gguf_block_q3_K) == 32 + 64 + 12 + 2, "Q3_K block is 110 bytes");
_Static_assert(sizeof(rl_gguf_block_q4_K) == 4 + 12 + 128, "Q4_K block is 144 bytes");
_Static_assert(sizeof(rl_gguf_block_q5_K) == 4 + 12 + 32 + 128, "Q5_K block is 176 bytes");
_Static_assert(sizeof(rl_gguf_block_q6_K) == 128 + 64 + 16 + 2, "Q6_K block is 210 bytes");
_Static_assert(sizeof(rl_gguf_block_q8_K) == 4 + 256 + 32, "Q8_K block is 292 bytes");
_Static_assert(sizeof(rl_gguf_block_iq4_nl) == 2 + 16, "IQ4_NL block is 18 bytes");
_Static_assert(sizeof(rl_gguf_block_iq4_xs) == 2 + 2 + 4 + 128, "IQ4_XS block is 136 bytes");

#endif
