/* matmul_q8.h - the token-tiled Q8_0 kernel of the AVX-512 VNNI path
 * (matmul_q8.c), for matmul.c: doc/products.md §3, row t of the product bit for bit
 * the matvec of token t, with the arithmetic of doc/products.md §1 or §2.  Plain C, no
 * ECL. */
#ifndef RL_PRIMS_MATMUL_Q8_H
#define RL_PRIMS_MATMUL_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "prims/q8.h"

/* The pieces: the activations of n tokens (quantized, xq; with xr their
 * Q8x2 residual quants, else NULL; any scales, though the product's
 * callers never pass non-finite ones) summed per token and block into
 * rl_mm_q8_split4_bytes(n, nb, xr != NULL) bytes at out, and the product of
 * rows [r0, r1) with them (the same xq, xr), scratch holding
 * rl_mm_q8_arranged4_bytes(r1 - r0, nb) bytes.  Only with AVX-512 VNNI. */
size_t rl_mm_q8_split4_bytes(size_t n, size_t nb, int x2);
size_t rl_mm_q8_arranged4_bytes(size_t rows, size_t nb);
void rl_mm_q8_split4(const rl_block_q8_0 *xq, const int8_t *xr, size_t n, size_t nb, void *out);
void rl_mm_q8_tile4_vnni(const rl_block_q8_0 *w, size_t nb, size_t rows, const rl_block_q8_0 *xq,
                         const int8_t *xr, const void *xsplit, size_t n, size_t r0, size_t r1,
                         double *yd, float *yf, void *scratch);

/* The product of all rows of W (nb blocks a row) with n tokens quantized
 * (xq; xr their Q8x2 residual quants, else NULL for :q8), into yd / yf
 * (n x rows, either may be NULL), on nth threads of the pool (pool.h):
 * chunks of rows, or with enough tokens a run of tokens per thread; splits
 * and arranges as it goes.  Returns 0
 * when out of memory (nothing written), else 1.  Only with AVX-512 VNNI and
 * n >= 1. */
int rl_mm_q8_pairs(const rl_block_q8_0 *w, size_t rows, size_t nb, const rl_block_q8_0 *xq,
                   const int8_t *xr, size_t n, double *yd, float *yf, int nth);

/* How many 16-row x 4-token tiles of :q8 rl_mm_q8_tile4_vnni has computed
 * with whole-block sums and how many lane by lane, since the program
 * started (for tests and the benchmark: both ways give the same bits). */
void rl_mm_q8_tiles4(size_t *whole, size_t *lanes);
/* The same for :q8x2's tiles. */
void rl_mm_q8x2_tiles4(size_t *whole, size_t *lanes);

#endif
