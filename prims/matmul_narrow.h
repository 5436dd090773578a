/* matmul_narrow.h - f32 weights of at most 16 columns times a sequence, for
 * matmul.c: the f32 outlier columns MODEL:LOAD :quantize keeps out of the
 * int8 product (lisp/model-quantize.lisp) are such a matrix.  Plain C, no
 * ECL. */
#ifndef RL_PRIMS_MATMUL_NARROW_H
#define RL_PRIMS_MATMUL_NARROW_H

#include <stddef.h>

/* The widest matrix rl_mm_f32_narrow_avx512 takes. */
#define RL_MM_NARROW_COLS 16

/* Rows [r0, r1) of the f32 matrix m (1 to RL_MM_NARROW_COLS cols a row)
 * times the n rows of x (cols each), into y[t * ystride + yoff + r] (yd as
 * the f32 result widened): the 16-lane order of
 * doc/products.md §3, so the same bits as
 * matmul.c's other f32 kernels, with sixteen rows in a vector.  AVX-512F
 * only. */
void rl_mm_f32_narrow_avx512(const float *m, size_t cols, const float *x, size_t n, size_t r0,
                             size_t r1, double *yd, float *yf, size_t ystride, size_t yoff);

#endif
