/* matmul_q8.h - the token-tiled Q8_0 kernels of the AVX-512 VNNI path, for
 * matmul.c (SPEC §4.2: row t of the product is bit for bit the matvec of
 * token t, SPEC §4 and §4.1 arithmetic): Q8x2's (matmul_q8.c) and :q8's
 * (matmul_q8pair.c).  Plain C, no ECL.
 *
 * The activations are quantized once per call (q8.h) and then split into
 * the layout a kernel wants.  Q8x2's: per block 32 bytes, the low dword of
 * each 8-byte lane (bytes 8l..8l+3, l = 0..3) then the high dwords, and
 * per block and lane -128 times the lane's sum of quants (int32).  :q8's:
 * per 4-token quad and block (matmul_q8pair.c says how).
 */
#ifndef RL_PRIMS_MATMUL_Q8_H
#define RL_PRIMS_MATMUL_Q8_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "prims/q8.h"

/* Tokens per tile: the split arrays hold a multiple of this many tokens. */
#define RL_MM_Q8_TOKENS 8

/* The instruction sets both kernels are compiled for. */
#define RL_MM_Q8_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"

/* The rows of a group of four from row r of W (nb blocks a row, rows up to
 * r1): a short group repeats its last row. */
static inline void rl_mm_q8_group(const rl_block_q8_0 *w, size_t nb, size_t r, size_t r1,
                                  const rl_block_q8_0 *wr[4]) {
    const size_t nr = r1 - r < 4 ? r1 - r : 4;
    for (size_t i = 0; i < 4; i++)
        wr[i] = w + (r + (i < nr ? i : nr - 1)) * nb;
}

/* Block b of a group's rows: the quants of rows 0, 1 in *w01, of 2, 3 in
 * *w23; the four scales as f32 (exact). */
__attribute__((target(RL_MM_Q8_TARGET), always_inline)) static inline __m128
rl_mm_q8_block4(const rl_block_q8_0 *const wr[4], size_t b, __m512i *w01, __m512i *w23) {
    *w01 = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)wr[0][b].qs)),
        _mm256_loadu_si256((const __m256i *)(const void *)wr[1][b].qs), 1);
    *w23 = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)wr[2][b].qs)),
        _mm256_loadu_si256((const __m256i *)(const void *)wr[3][b].qs), 1);
    return _mm_cvtph_ps(_mm_setr_epi16((short)wr[0][b].d, (short)wr[1][b].d, (short)wr[2][b].d,
                                       (short)wr[3][b].d, 0, 0, 0, 0));
}

/* n rounded up to a multiple of RL_MM_Q8_TOKENS: the tokens the split
 * arrays hold (xa and ra 32 bytes, dxs one double per token and block). */
size_t rl_mm_q8_split_tokens(size_t n);

/* Split the quantized activations of n tokens (xq, nb blocks a token; xr
 * their Q8x2 residual quants, else NULL) into xa (and ra when xr), tiles
 * of RL_MM_Q8_TOKENS tokens, within a tile block-major: block b of token
 * t0 + k has index i = t0 * nb + b * RL_MM_Q8_TOKENS + k, its bytes at xa
 * + 32 i, its lane corrections at cx + 4 i (with xr: cx + 8 i, the
 * residuals' four after the quants' four), its scale at dxs[i] as a
 * double, times 2^-7 when x2 (matvec.h's folding).  Padding tokens get
 * quants 0 and scale 0. */
void rl_mm_q8_split(const rl_block_q8_0 *xq, const int8_t *xr, size_t n, size_t nb, int x2,
                    int8_t *xa, int8_t *ra, int32_t *cx, double *dxs);

/* Scratch bytes rl_mm_q8_tile_vnni needs for a tile of rows weight rows
 * of nb blocks (the rows arranged for the kernel, once per call). */
size_t rl_mm_q8_arranged_bytes(size_t rows, size_t nb);

/* Rows [r0, r1) of W (nb blocks a row, rows in all) times n tokens split
 * as above (ra NULL for :q8); yd / yf (n x rows, either may be NULL) get
 * the results; scratch holds rl_mm_q8_arranged_bytes(r1 - r0, nb) bytes.
 * Only where the CPU has AVX-512 VNNI
 * (rl_path_supported(RL_PATH_AVX512VNNI)). */
void rl_mm_q8_tile_vnni(const rl_block_q8_0 *w, size_t nb, size_t rows, const int8_t *xa,
                        const int8_t *ra, const int32_t *cx, const double *dxs, size_t n,
                        size_t r0, size_t r1, double *yd, float *yf, void *scratch);

/* The :q8 kernel (matmul_q8pair.c: a slot per (row, token) pair, whole
 * blocks summed where exact): the activations of n tokens (any scales,
 * though the product's callers never pass non-finite ones) split per
 * 4-token quad into rl_mm_q8_split4_bytes(n, nb) bytes at out, and the
 * product of rows [r0, r1) with them, scratch holding
 * rl_mm_q8_arranged4_bytes(r1 - r0, nb) bytes.  Only with AVX-512 VNNI. */
size_t rl_mm_q8_split4_bytes(size_t n, size_t nb);
size_t rl_mm_q8_arranged4_bytes(size_t rows, size_t nb);
void rl_mm_q8_split4(const rl_block_q8_0 *xq, size_t n, size_t nb, void *out);
void rl_mm_q8_tile4_vnni(const rl_block_q8_0 *w, size_t nb, size_t rows, const void *xsplit,
                         size_t n, size_t r0, size_t r1, double *yd, float *yf, void *scratch);

/* The :q8 product of all rows of W (nb blocks a row) with n tokens
 * quantized (xq), into yd / yf (n x rows, either may be NULL), on nth
 * threads of the pool (pool.h): chunks of rows, or with enough tokens a
 * run of tokens per thread; splits and arranges as it goes.  Returns 0
 * when out of memory (nothing written), else 1.  Only with AVX-512 VNNI and
 * n >= 1. */
int rl_mm_q8_pairs(const rl_block_q8_0 *w, size_t rows, size_t nb, const rl_block_q8_0 *xq,
                   size_t n, double *yd, float *yf, int nth);

/* How many 16-row x 4-token tiles rl_mm_q8_tile4_vnni has computed with
 * whole-block sums and how many lane by lane, since the program started
 * (for tests and the benchmark: both ways give the same bits). */
void rl_mm_q8_tiles4(size_t *whole, size_t *lanes);

#endif
