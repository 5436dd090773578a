/* matmul_outlier.h - the product of a weight MODEL:LOAD :quantize made (an
 * outlier matrix, lisp/model-quantize.lisp): the Q8_0 matrix of the weights
 * without their outlier columns times the activations without those
 * columns, plus the f32 outlier columns times the activations' own, added
 * in single-float.  Plain C, no ECL. */
#ifndef RL_PRIMS_MATMUL_OUTLIER_H
#define RL_PRIMS_MATMUL_OUTLIER_H

#include <stddef.h>

#include "prims/matmul.h"

/* y (n x rows) := (Q8_0 q, rows x cols) x' + wout x_o, row by row: x' is
 * x (n x cols) with the k columns idx (increasing, below cols) set to 0,
 * x_o (n x k) those columns, wout (rows x k) f32; the first product is
 * rl_matmul's with activations act, the second rl_matmul's for f32
 * weights, each output the first plus the second in single-float.  A NaN
 * or infinity in an outlier column is RL_NONFINITE with fault->row the
 * token and fault->where the column, found before the other values (row by
 * row, then column by column); others as rl_matmul answers for x'.  y is
 * written only on success. */
rl_status rl_matmul_outliers(const void *q, size_t rows, size_t cols, const size_t *idx,
                             size_t k, const float *wout, const float *x, size_t n, float *y,
                             rl_act act, char *msg, size_t msglen, rl_mm_fault *fault);

#endif
