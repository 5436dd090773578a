/* vec.h - the operands of a matrix-vector product as the Lisp primitives
 * take them (%MATVEC here, %BENCH-MATVEC in bench.c), and a failed
 * kernel's values. */
#ifndef RL_PRIMS_ECL_VEC_H
#define RL_PRIMS_ECL_VEC_H

#include "prims/ecl/glue.h"
#include "prims/matmul.h"

/* Check and resolve (m x out) for the primitive FN.  M a quantized matrix
 * of rank 2 or a simple rank-2 single-float array; X and OUT simple vectors
 * of one float type (single: f32 result; double: the double result), of
 * lengths cols and rows.  The Lisp side checks and explains; this checks
 * again so a direct call cannot crash.  Signals; allocates nothing.  A
 * matrix in a mapped file comes back pinned (glue.h): *PINNED is its
 * handle, or ECL_NIL; pass it to rl_mv_operands_release after the product
 * and signal nothing in between. */
void rl_mv_operands_of(const char *fn, cl_object m, cl_object x, cl_object out,
                       rl_matvec_operands *o, cl_object *pinned);

void rl_mv_operands_release(cl_object pinned);

/* A failed kernel's values, (values nil status-keyword message), for the
 * primitives that run the products (here, model.c, bench.c). */
cl_object rl_return_status(cl_env_ptr env, rl_status st, const char *msg);

#endif
