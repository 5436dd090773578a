/* type_traits.h - the tensor types rontolisp computes with: one row per type, by
 * ggml id, with its functions (ggml's type_traits shape).
 *
 * A type's facts are in one place each: its name, id, values per block and
 * bytes per block in gguf/types.c (what reading a file needs, for every id
 * ggml has), its block struct in gguf/blocks.h, and here, the row that
 * says what rontolisp does with it: the family, the conversions to and
 * from f32, the checks a quantizer makes, and the row products its weights
 * take.  Adding a type is a row here plus its functions (doc/kernels.md,
 * "Adding a type").  Lisp builds its format lists from this table
 * (%TYPE-TABLE, prims/ecl/gguf_read.c).
 *
 * Plain C, no ECL.
 */
#ifndef RL_PRIMS_TYPE_TRAITS_H
#define RL_PRIMS_TYPE_TRAITS_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "prims/matvec.h"

typedef enum rl_type_family {
    RL_FAMILY_NONE = 0, /* an id without a row */
    RL_FAMILY_FLOAT,    /* F32, F16, BF16: one value per block */
    RL_FAMILY_Q8_0,     /* Q8_0: its own fast kernels and products (prims/q8.h) */
    RL_FAMILY_QUANT     /* the legacy, K and IQ4 types (prims/quants.h) */
} rl_type_family;

/* "float", "q8_0", "quant" (Lisp keywords); "none". */
const char *rl_type_family_name(rl_type_family f);

/* A row product (ggml's vec_dot): nb blocks of a weight row at W times nb
 * blocks of the activation row at X, quantized to the type's vec_dot_type;
 * the f32 result.  The order of sums of each type is doc/products.md §4's,
 * the same bits on every path. */
typedef float (*rl_vec_dot_kernel)(const void *w, const void *x, size_t nb);

/* The row product of one weight row W and two activation rows (X, and
 * XSTRIDE bytes on) into s[0] and s[1], each the bits vec_dot gives it:
 * the weight's blocks unpacked once for both, a sequence's products'
 * shortcut. */
typedef void (*rl_vec_dot2_kernel)(const void *w, const void *x, size_t xstride, size_t nb,
                                   float s[2]);

typedef struct rl_type_traits {
    rl_type_family family;
    /* NB blocks at X to NB * block floats at Y: halves widened exactly,
     * blocks dequantized as ggml does (any bytes accepted). */
    void (*to_float)(const void *x, float *y, size_t nb);
    /* NB blocks of floats at X into Y, the reference conversion (f32 to a
     * half rounds to nearest even; the quantizers are ggml's _ref ones),
     * without checks: rl_quantize, rl_q8_quantize_* and rl_convert_run
     * make them. */
    void (*from_float)(const float *x, void *y, size_t nb);
    /* Byte offsets in a block of its binary16 scales (d, and dmin or m);
     * -1 where there is none.  rl_quantize refuses a block where one is
     * infinite. */
    int f16_at[2];
    /* The largest magnitude a dequantized value can have (every scale at
     * binary16's 65504, every level at its extreme); 0 for no limit.
     * rl_quantize refuses a larger input: its block's scale could not be
     * stored, and far beyond it ggml's f32 sums overflow and give garbage
     * with finite scales. */
    float limit;
    /* The row kernels of the f32 and Q8_0 products by path
     * (prims/matvec.h), or NULL; the other quantized types' weights run
     * vec_dot instead (prims/matmul.h, rl_matmul_quant_ex). */
    const rl_matvec_f32_kernel *rows_f32;
    const rl_matvec_q8_kernel *rows_q8;
    /* The row product by path (prims/kernel.h's table shape), or NULL; and
     * the ggml id of the activation blocks it takes (Q8_0, Q8_1, Q8_K), 0
     * where vec_dot is NULL. */
    const rl_vec_dot_kernel *vec_dot;
    uint32_t vec_dot_type;
    /* The two-row form of vec_dot by path, or NULL; a NULL table or entry
     * (the scalar path's) runs vec_dot once per row. */
    const rl_vec_dot2_kernel *vec_dot2;
} rl_type_traits;

/* The row of ggml type ID, or NULL when rontolisp does not compute with
 * it (its name and geometry are still gguf/types.c's). */
const rl_type_traits *rl_type_traits_of(uint32_t id);

/* 1 for a type of quantized blocks with a row (Q8_0, legacy, K, IQ4). */
int rl_type_quantized(uint32_t id);

/* Values per block of a type with a row (1 for F32, F16, BF16); 0 for an
 * id without one. */
size_t rl_type_block(uint32_t id);

/* Bytes of N values of a type with a row (N a multiple of its block); 0
 * for an id without one. */
size_t rl_type_bytes(uint32_t id, size_t n);

#endif
