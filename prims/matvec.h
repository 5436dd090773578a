/* matvec.h - matrix times vector: Q8_0 weights (doc/products.md §1) and the f32 baseline.
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
 * all in f32.  Bit-identical across paths for finite data.
 *
 * Threads: rows are split in multiples of 4; a row's arithmetic never
 * depends on the split.  Small products run on one thread.  The Q8_0
 * entries run matmul.c's driver (a vector is a sequence of one token, the
 * same bits); this file has the row kernels every path runs and the f32
 * baseline's driver.  Plain C, no ECL.  Every entry point validates and allocates before any
 * worker starts and never longjmps.
 */
#ifndef RL_PRIMS_MATVEC_H
#define RL_PRIMS_MATVEC_H

#include <stddef.h>

#include "prims/cpu.h"
#include "prims/kernel.h"
#include "prims/matmul.h"
#include "prims/q8.h"

/* ---- what the Lisp glue calls: paths and threads from the knobs ------ */

/* y[rows] = W x with f32 x and f32 y.  cols % 32 != 0 -> RL_BADLEN;
 * non-finite x -> RL_NONFINITE (msg names the index); x whose block
 * absmax overflows the f16 scale -> RL_OVERFLOW (msg names the block);
 * RL_NOMEM.  msg (may be NULL) gets one line on failure. */
rl_status rl_matvec_q8(const rl_block_q8_0 *w, size_t rows, size_t cols,
                       const float *x, float *y, char *msg, size_t msglen);

/* The same with double x (each element cast to f32 first) and double y. */
rl_status rl_matvec_q8_f64(const rl_block_q8_0 *w, size_t rows, size_t cols,
                           const double *x, double *y, char *msg, size_t msglen);

/* f32 baseline, m row-major rows x cols (any cols).  Errors only for NULL
 * pointers (RL_BADARG) or scratch (RL_NOMEM, the f64 form). */
rl_status rl_matvec_f32(const float *m, size_t rows, size_t cols,
                        const float *x, float *y);
/* double x cast to f32, the f32 sum widened into double y. */
rl_status rl_matvec_f32_f64(const float *m, size_t rows, size_t cols,
                            const double *x, double *y);

/* ---- explicit path and thread count (tests, benchmarks) --------------- */

/* xsrc is RL_SRC_F32 or RL_SRC_F64 (RL_SRC_F16 / RL_SRC_BF16 work too).
 * yd and yf may each be NULL but not both; both are written when given.
 * path must be rl_path_supported (else RL_UNSUPPORTED); threads >= 1
 * (else RL_BADARG), clamped to RL_MAX_THREADS.  With min_work != 0 the
 * thread count is cut for small products (as the knob entries do);
 * benchmarks pass 0 to get exactly `threads` threads.  rl_matvec_q8_act_ex
 * (matmul.h) with RL_ACT_Q8. */
rl_status rl_matvec_q8_ex(const rl_block_q8_0 *w, size_t rows, size_t cols,
                          rl_q8_src xsrc, const void *x, double *yd, float *yf,
                          rl_path path, int threads, int min_work,
                          char *msg, size_t msglen);

rl_status rl_matvec_f32_ex(const float *m, size_t rows, size_t cols,
                           rl_q8_src xsrc, const void *x, double *yd, float *yf,
                           rl_path path, int threads, int min_work);

/* One product's operands, as the Lisp primitives resolve them: Q8_0
 * weights w with activations act (RL_ACT_Q8 or RL_ACT_Q8X2), or (w NULL)
 * the f32 baseline's row-major mf; x has cols and y rows floats, double
 * when dbl, else single. */
typedef struct {
    const rl_block_q8_0 *w;
    const float *mf;
    size_t rows, cols;
    const void *x;
    void *y;
    int dbl;
    rl_act act;
} rl_matvec_operands;

/* The product of o on path with threads chunks (min_work as in
 * rl_matvec_q8_ex); msg gets the reason of a failure (empty for f32), and
 * *where (may be NULL) where quantizing x failed: the flat index of a
 * non-finite value (RL_NONFINITE) or the overflowing block
 * (RL_OVERFLOW). */
rl_status rl_matvec_run(const rl_matvec_operands *o, rl_path path, int threads, int min_work,
                        char *msg, size_t msglen, size_t *where);

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
