/* matmul_f32.h - f32 and F16 weights times a sequence, four rows times four
 * tokens in AVX-512 registers: matmul.c's token-tiled kernels for float
 * weights (its table's f32_tile and f16_tile).  Plain C, no ECL. */
#ifndef RL_PRIMS_MATMUL_F32_H
#define RL_PRIMS_MATMUL_F32_H

#include <stddef.h>
#include <stdint.h>

/* Rows [r0, r1) of the f32 matrix m (cols per row) times the n rows of x
 * (cols each), into y[t * ystride + yoff + r] (yd as the f32 result
 * widened): doc/products.md §3's 16-lane order, the row kernels' bits.
 * AVX-512F only. */
void rl_mm_f32_tile_avx512(const float *m, size_t cols, const float *x, size_t n, size_t r0,
                           size_t r1, double *yd, float *yf, size_t ystride, size_t yoff);

/* The same with F16 weights, widened exactly by F16C: four rows at a time
 * into f32 once when more than four tokens read them and the rows are
 * narrow, else in registers as they are read. */
void rl_mm_f16_tile_avx512(const uint16_t *m, size_t cols, const float *x, size_t n, size_t r0,
                          size_t r1, double *yd, float *yf, size_t ystride, size_t yoff);

#endif
