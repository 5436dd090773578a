/* matvec.h - the row kernels every product runs: rows of Q8_0 weights
 * (doc/products.md §1, §2) or f32 weights (the baseline) times one vector,
 * per path, in the tables matmul.c's driver indexes.
 *
 * Q8_0: y = W x for W rows x cols in Q8_0 (rows * cols/32 blocks, row after
 * row), fixed so that every path and thread count answers the same bits:
 *   1. x (f32, or double cast to f32) is quantized to Q8_0 exactly as q8.h:
 *      dx_b (f16) and qx_b[0..31];
 *   2. for row r, block b, lane l = 0..3:
 *      s = sum_{j=8l}^{8l+7} qw[r,b,j] * qx[b,j]          (exact int32)
 *   3. acc_l += s * ((double)dw[r,b] * (double)dx_b), blocks in increasing
 *      order, acc_l from +0.0 (the product is exact, so FMA changes nothing);
 *   4. y[r] = (acc_0 + acc_1) + (acc_2 + acc_3) in double; an f32 result is
 *      that double rounded once.
 * Weight quants may be any byte, -128 included (the SIMD kernels put the
 * absolute value on the weight side, where 128 fits unsigned).  Weight
 * scales that are inf/NaN (only a corrupt file has them) give inf/NaN in
 * every path, but NaN payload bits may then differ between paths.
 *
 * f32 baseline: y[r] = sum_j m[r,j] * x[j] over a fixed order: 16 partial
 * sums, p_k over j = k (mod 16) in increasing j with a fused multiply-add
 * each (p_k = fmaf(m, x, p_k), from +0), then a_k = p_k + p_{k+8} (k < 8),
 * b_k = a_k + a_{k+4} (k < 4), c_k = b_k + b_{k+2} (k < 2), y = c_0 + c_1,
 * all in f32.  Bit-identical across paths for finite data and a single
 * NaN; where two NaNs meet, which one an addition keeps is the compiler's
 * choice (the products of matmul.h store every NaN as RL_PRODUCT_NAN).
 *
 * Threads: a driver splits rows in multiples of RL_MATVEC_ROWS; a row's
 * arithmetic never depends on the split.  The products themselves, of one
 * vector and of a sequence, are matmul.h's (a vector is a sequence of one
 * token, the same bits); this file calls nothing of theirs.  Plain C, no
 * ECL.
 */
#ifndef RL_PRIMS_MATVEC_H
#define RL_PRIMS_MATVEC_H

#include <stddef.h>

#include "prims/cpu.h"
#include "prims/kernel.h"
#include "prims/q8.h"

/* Rows per SIMD group: a kernel runs four rows at once, and a driver's
 * thread chunks are multiples of it. */
#define RL_MATVEC_ROWS 4

/* ---- kernels: rows [r0, r1) with x already quantized ------------------ */

/* xq: the nb blocks of quantized x; dx[b] = (double)f16->f32(xq[b].d).
 * w points at row 0 (nb blocks per row).  Writes yd[r] / yf[r] for r in
 * [r0, r1) when non-NULL.  The SIMD kernels must only run where
 * rl_path_supported says so. */
typedef void (*rl_matvec_q8_kernel)(const rl_block_q8_0 *w, size_t nb,
                                    const rl_block_q8_0 *xq, const double *dx,
                                    size_t r0, size_t r1, double *yd, float *yf);
void rl_matvec_q8_rows_ref(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                           const double *dx, size_t r0, size_t r1, double *yd, float *yf);
void rl_matvec_q8_rows_avx2(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                            const double *dx, size_t r0, size_t r1, double *yd, float *yf);
void rl_matvec_q8_rows_avx512(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                              const double *dx, size_t r0, size_t r1, double *yd, float *yf);
void rl_matvec_q8_rows_avx512vnni(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                                  const double *dx, size_t r0, size_t r1, double *yd,
                                  float *yf);

/* Q8x2 rows [r0, r1) (doc/products.md §2): xr holds nb*32 residual quants r_j of
 * x, and dx[b] = f16->f32(xq[b].d) * 2^-7 (the spec's final 2^-7 folded
 * into the exact scale product).  xr == NULL in the _ref form gives :q8. */
typedef void (*rl_matvec_q8x2_kernel)(const rl_block_q8_0 *w, size_t nb,
                                      const rl_block_q8_0 *xq, const int8_t *xr,
                                      const double *dx, size_t r0, size_t r1, double *yd,
                                      float *yf);
void rl_matvec_q8x2_rows_ref(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                             const int8_t *xr, const double *dx, size_t r0, size_t r1,
                             double *yd, float *yf);
void rl_matvec_q8x2_rows_avx2(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                              const int8_t *xr, const double *dx, size_t r0, size_t r1,
                              double *yd, float *yf);
void rl_matvec_q8x2_rows_avx512(const rl_block_q8_0 *w, size_t nb, const rl_block_q8_0 *xq,
                                const int8_t *xr, const double *dx, size_t r0, size_t r1,
                                double *yd, float *yf);
void rl_matvec_q8x2_rows_avx512vnni(const rl_block_q8_0 *w, size_t nb,
                                    const rl_block_q8_0 *xq, const int8_t *xr,
                                    const double *dx, size_t r0, size_t r1, double *yd,
                                    float *yf);

/* f32 baseline rows [r0, r1): row r of m (cols values) times x, written to
 * yf[r] and/or (widened) yd[r] when non-NULL. */
typedef void (*rl_matvec_f32_kernel)(const float *m, size_t cols, const float *x,
                                     size_t r0, size_t r1, double *yd, float *yf);
void rl_matvec_f32_rows_ref(const float *m, size_t cols, const float *x,
                            size_t r0, size_t r1, double *yd, float *yf);
void rl_matvec_f32_rows_avx2(const float *m, size_t cols, const float *x,
                             size_t r0, size_t r1, double *yd, float *yf);

/* The row kernels of each path, indexed by rl_path (kernel.h: every entry
 * set, a path without a kernel of its own naming a lower path's). */
extern const rl_matvec_q8_kernel rl_matvec_q8_table[RL_PATH_COUNT];
extern const rl_matvec_q8x2_kernel rl_matvec_q8x2_table[RL_PATH_COUNT];
extern const rl_matvec_f32_kernel rl_matvec_f32_table[RL_PATH_COUNT];

#endif
