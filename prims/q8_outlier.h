/* q8_outlier.h - outlier-aware Q8_0 scales (doc/outliers.md).
 *
 * A massive input channel (an outlier column of a weight matrix) sets the
 * scale of the other 31 values of every block it sits in.  For such blocks
 * the quantizer searches the scales that put an outlier weight exactly on a
 * grid point and keeps the one with the least weighted squared error:
 *
 *   candidates  the standard block of §2, then for every outlier weight w_o
 *               of the block and k = 1..127: d_k = f32->f16(|w_o| / k)
 *               (division in f32) when 127 * d_k >= amax (no clipping)
 *   quants      q_j = clamp(round_half_away(x_j * (1/d_k)), -128, 127),
 *               reciprocal and product in f32
 *   error       sum_j weight_j * (x_j - d_k * q_j)^2 in double, weight
 *               RL_Q8_OUTLIER_WEIGHT on outlier columns and 1 elsewhere
 *   ties        the standard block, then the larger k, then the earlier
 *               column
 *
 * A d_k of 0 (|w_o| / k below binary16's range) or inf (above it) is no
 * candidate: neither is a usable Q8_0 scale, and 0 could only tie an
 * all-zero block, which the standard block wins anyway.  Blocks without an
 * outlier column are §2's bytes, and every block is ordinary Q8_0 that
 * llama.cpp reads.  It runs once per file, so only the plain reference
 * exists.  Plain C, no ECL; safe to call from any thread.
 */
#ifndef RL_PRIMS_Q8_OUTLIER_H
#define RL_PRIMS_Q8_OUTLIER_H

#include <stddef.h>
#include <stdint.h>

#include "prims/q8.h"

/* The weight of an outlier column's squared error (others weigh 1). */
#define RL_Q8_OUTLIER_WEIGHT 1e4

/* One block of 32 finite f32 values; outlier[j] != 0 marks column j of the
 * block as an outlier.  Answers 1 when the block's scale overflows binary16
 * (the standard block's overflow: every candidate is then at least as
 * large), else 0. */
int rl_q8_outlier_block_ref(const float *x, const uint8_t *outlier, rl_block_q8_0 *y);

/* Quantize a row-major rows x cols matrix of type src at x into
 * rows * cols / 32 blocks at y; outlier is a mask of cols bytes (nonzero =
 * outlier column; NULL = none, which gives §2's bytes).  The error contract
 * is rl_q8_quantize_path's: RL_BADLEN when cols % 32, RL_BADARG for
 * NULL data, an unknown src or a size that overflows size_t;
 * RL_NONFINITE with *where the flat index of the first non-finite value;
 * else RL_OVERFLOW with *where the flat index of the first overflowing
 * block.  where may be NULL. */
rl_status rl_q8_quantize_outliers_ref(rl_q8_src src, const void *x, size_t rows,
                                      size_t cols, const uint8_t *outlier,
                                      rl_block_q8_0 *y, size_t *where);

#endif
