/* qmatrix.h - the quantized matrix (RONTOLISP::QUANTIZED-MATRIX, a defstruct
 * in lisp/qmatrix.lisp) seen from C, for the files that take one as an
 * operand (the GGUF writer, matvec). */
#ifndef RL_PRIMS_ECL_QMATRIX_H
#define RL_PRIMS_ECL_QMATRIX_H

#include "prims/ecl/glue.h"
#include "prims/q8.h"

typedef struct {
    const rl_block_q8_0 *blocks; /* set by rl_qm_pin (Q8_0 only) */
    const uint8_t *data;         /* set by rl_qm_pin and rl_qm_pin_any: block 0, any type */
    uint64_t nbytes;             /* the bytes of every block, set with data */
    uint32_t ggml_type;          /* RL_GGUF_GGML_*, set by rl_qm_shape_of */
    cl_index rows, cols, rank;
    cl_object pinned; /* the mapped file's handle rl_qm_pin pinned, or ECL_NIL */
} rl_qm_view;

/* Find the struct's class and check that its slots are in the order this
 * file reads them; prints what differs and exits on a mismatch (a build
 * that would read the wrong slot must not start). */
void rl_qm_init(void);

int rl_qm_p(cl_object x);

/* The matrix's shape, rank and ggml type, read from its slots (no pin, no
 * blocks).  M must satisfy rl_qm_p. */
void rl_qm_shape_of(cl_object m, rl_qm_view *v);

/* The shape and the blocks, the mapping they live in pinned (glue.h):
 * call rl_qm_unpin after the last read, and signal nothing in between.
 * Signals gguf:file-closed-error when the GGUF file was closed, and an
 * error when the slots claim bytes beyond their memory (slots changed
 * behind the read-only accessors); nothing is pinned then. */
void rl_qm_pin(cl_object m, rl_qm_view *v);
void rl_qm_unpin(rl_qm_view *v);

/* rl_qm_pin for a matrix of any of its types (Q8_0 or one of prims/quants.h):
 * sets data and nbytes, and blocks only for Q8_0.  rl_qm_pin itself refuses
 * (before pinning) a matrix of another type than Q8_0 with an error saying
 * the operation takes Q8_0 only: the products and the kernels read blocks. */
void rl_qm_pin_any(cl_object m, rl_qm_view *v);

extern const rl_prim_table rl_qmatrix_prims;

#endif
