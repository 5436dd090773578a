/* matmul_f32.c - f32 and F16 weights times a sequence, four rows times
 * four tokens, the tokens in blocks that stay in the L1 cache (see
 * matmul_f32.h).  Built with -ffp-contract=off, as matmul.c: every
 * rounding is the one doc/products.md §3 names.
 */
#include "prims/matmul_f32.h"

#include <immintrin.h>
#include <stdint.h>

#include "prims/kernel.h"

/* Tokens per tile: four accumulator columns beside four weight rows. */
#define RL_MM_T 4


/* Rows [r0, r1) of the f32 matrix m (cols per row) times the n rows of x,
 * into y[t * ystride + yoff + r].  One zmm holds the 16 lanes of matvec.h's
 * f32 order (lane l: columns j = l mod 16, increasing, one fmaf each; a
 * short last chunk masked so the lanes past the end keep their sums), then
 * the same tree: p_k + p_{k+8}, + 4, + 2, + 1.  Sixteen accumulators: each
 * loaded weight chunk serves four tokens, each token chunk four rows. */
/* The sixteen accumulators a<row><token>, named: as an array they end up
 * in memory. */
#define RL_MM_ACC16(X) X(0, 0) X(0, 1) X(0, 2) X(0, 3) X(1, 0) X(1, 1) X(1, 2) X(1, 3) \
    X(2, 0) X(2, 1) X(2, 2) X(2, 3) X(3, 0) X(3, 1) X(3, 2) X(3, 3)

/* Pairs the trees' steps of two registers: r = (a's half h | b's half h)
 * added to the other halves, for the 256-bit (+8), 128-bit (+4) and
 * in-lane (+2, +1) steps of matvec.h's order. */
#define RL_MM_T8(a, b) _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee))
#define RL_MM_T4(a, b) _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd))
#define RL_MM_T2(a, b) _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xee))
#define RL_MM_T1(a, b) _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd))

/* Weights as f32 (f16 = 0) or F16 read in place (f16 = 1), each chunk
 * widened in registers by F16C (exact), so the products and their order
 * are the f32 tile's, with no widening pass through memory (at one token
 * that pass was half the product's time).  F16C quiets a signalling NaN,
 * which changes no result: a NaN output is stored as RL_PRODUCT_NAN
 * (doc/products.md §3; one compare per sixteen outputs). */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline __m512
rl_mm_wload(const void *p, size_t j, int f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)p + j)))
               : _mm512_loadu_ps((const float *)p + j);
}
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline __m512
rl_mm_wload_tail(const void *p, size_t j, __mmask16 k, int f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, (const uint16_t *)p + j))
               : _mm512_maskz_loadu_ps(k, (const float *)p + j);
}

/* Tokens per block: a block's activations (about 16 KB) stay in the L1
 * cache while every row of the tile meets them, where a pass over all
 * tokens per four rows fetched them again from L2 for each four. */
static size_t rl_mm_token_block(size_t cols) {
    const size_t tb = 16384 / 4 / (cols ? cols : 1) / RL_MM_T * RL_MM_T;
    return tb < RL_MM_T ? RL_MM_T : tb;
}

/* Weight rows fetched ahead into the cache: a tile's weights are read
 * from memory by its first four tokens only, and a row's four streams of a
 * few lines each are too short for the hardware's prefetcher to catch up,
 * so the rows RL_MM_AHEAD on are asked for while these run.  Only the time
 * changes: every product and sum is the same. */
#ifndef RL_MM_AHEAD
#define RL_MM_AHEAD 8
#endif

/* A hint for the line at byte OFF past P, which may lie past the matrix's
 * last row: the address is never read, and a prefetch does not fault. */
__attribute__((always_inline)) static inline void rl_mm_fetch(const char *p, size_t off) {
    _mm_prefetch((const char *)((uintptr_t)p + off), _MM_HINT_T0);
}

__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_mm_tile_avx512(const void *m, int f16, size_t cols, const float *x, size_t n, size_t r0,
                  size_t r1, double *yd, float *yf, size_t ystride, size_t yoff) {
    const size_t es = f16 ? 2 : 4; /* weight bytes */
    const __m512 qnan = _mm512_set1_ps(RL_PRODUCT_NAN);
    const size_t full = cols / 16 * 16;
    const __mmask16 tail = (__mmask16)((1u << (cols - full)) - 1u);
    const size_t tb = rl_mm_token_block(cols);
    for (size_t b0 = 0; b0 < n; b0 += tb) {
        const size_t b1 = n - b0 < tb ? n : b0 + tb;
        for (size_t r = r0; r < r1; r += 4) {
            const size_t nr = r1 - r < 4 ? r1 - r : 4;
            const char *w0 = (const char *)m + r * cols * es;
            const char *w1 = (const char *)m + (r + (nr > 1)) * cols * es;
            const char *w2 = (const char *)m + (r + (nr > 2 ? 2 : nr - 1)) * cols * es;
            const char *w3 = (const char *)m + (r + nr - 1) * cols * es;
            for (size_t t0 = b0; t0 < b1; t0 += RL_MM_T) {
                const size_t nt = b1 - t0 < RL_MM_T ? b1 - t0 : RL_MM_T;
                /* the first four tokens fetch the rows RL_MM_AHEAD on */
                const size_t ahead = t0 == 0 ? RL_MM_AHEAD * cols * es : 0;
                const float *x0 = x + t0 * cols, *x1 = x + (t0 + (nt > 1)) * cols;
                const float *x2 = x + (t0 + (nt > 2 ? 2 : nt - 1)) * cols;
                const float *x3 = x + (t0 + nt - 1) * cols;
#define RL_MM_DECL(i, k) __m512 a##i##k = _mm512_setzero_ps();
                RL_MM_ACC16(RL_MM_DECL)
#undef RL_MM_DECL
#define RL_MM_STEP(WLOAD, LOAD, FMA)                                                        \
    {                                                                                       \
        const __m512 v0 = WLOAD(w0), v1 = WLOAD(w1), v2 = WLOAD(w2), v3 = WLOAD(w3);         \
        const __m512 u0 = LOAD(x0), u1 = LOAD(x1), u2 = LOAD(x2), u3 = LOAD(x3);             \
        RL_MM_ACC16(FMA)                                                                    \
    }
#define RL_MM_LOAD(p) _mm512_loadu_ps((p) + j)
#define RL_MM_WLOAD(p) rl_mm_wload((p), j, f16)
#define RL_MM_FMA(i, k) a##i##k = _mm512_fmadd_ps(v##i, u##k, a##i##k);
/* one token (a sequence's last, or a single one): its four chains only,
 * the other accumulators stay zero and their results are not stored */
#define RL_MM_STEP1(WLOAD, LOAD, FMA)                                                       \
    {                                                                                       \
        const __m512 v0 = WLOAD(w0), v1 = WLOAD(w1), v2 = WLOAD(w2), v3 = WLOAD(w3);         \
        const __m512 u0 = LOAD(x0);                                                         \
        FMA(0, 0) FMA(1, 0) FMA(2, 0) FMA(3, 0)                                             \
    }
#define RL_MM_FETCH                                                                         \
    {                                                                                       \
        rl_mm_fetch(w0, ahead + j * es);                                                    \
        rl_mm_fetch(w1, ahead + j * es);                                                    \
        rl_mm_fetch(w2, ahead + j * es);                                                    \
        rl_mm_fetch(w3, ahead + j * es);                                                    \
    }
                /* the loops with and without the hints apart: a test in the
                 * loop made every group of tokens pay for the first's hints */
                if (nt == 1 && ahead) {
                    for (size_t j = 0; j < full; j += 16) {
                        RL_MM_FETCH
                        RL_MM_STEP1(RL_MM_WLOAD, RL_MM_LOAD, RL_MM_FMA)
                    }
                } else if (nt == 1) {
                    for (size_t j = 0; j < full; j += 16)
                        RL_MM_STEP1(RL_MM_WLOAD, RL_MM_LOAD, RL_MM_FMA)
                } else if (ahead) {
                    for (size_t j = 0; j < full; j += 16) {
                        RL_MM_FETCH
                        RL_MM_STEP(RL_MM_WLOAD, RL_MM_LOAD, RL_MM_FMA)
                    }
                } else {
                    for (size_t j = 0; j < full; j += 16)
                        RL_MM_STEP(RL_MM_WLOAD, RL_MM_LOAD, RL_MM_FMA)
                }
#undef RL_MM_FETCH
#undef RL_MM_LOAD
#undef RL_MM_WLOAD
#undef RL_MM_FMA
                if (tail) {
                    /* masked: the lanes past the end keep their sums */
#define RL_MM_LOAD(p) _mm512_maskz_loadu_ps(tail, (p) + full)
#define RL_MM_WLOAD(p) rl_mm_wload_tail((p), full, tail, f16)
#define RL_MM_FMA(i, k) a##i##k = _mm512_mask3_fmadd_ps(v##i, u##k, a##i##k, tail);
                    if (nt == 1)
                        RL_MM_STEP1(RL_MM_WLOAD, RL_MM_LOAD, RL_MM_FMA)
                    else
                        RL_MM_STEP(RL_MM_WLOAD, RL_MM_LOAD, RL_MM_FMA)
#undef RL_MM_LOAD
#undef RL_MM_WLOAD
#undef RL_MM_FMA
                }
#undef RL_MM_STEP
#undef RL_MM_STEP1
                /* the sixteen trees at once: quarter k of the result holds token
                 * k's four rows */
                const __m512 b0 = RL_MM_T8(a00, a01), b1 = RL_MM_T8(a02, a03);
                const __m512 b2 = RL_MM_T8(a10, a11), b3 = RL_MM_T8(a12, a13);
                const __m512 b4 = RL_MM_T8(a20, a21), b5 = RL_MM_T8(a22, a23);
                const __m512 b6 = RL_MM_T8(a30, a31), b7 = RL_MM_T8(a32, a33);
                const __m512 c0 = RL_MM_T4(b0, b1), c1 = RL_MM_T4(b2, b3);
                const __m512 c2 = RL_MM_T4(b4, b5), c3 = RL_MM_T4(b6, b7);
                const __m512 e0 = RL_MM_T2(c0, c1), e1 = RL_MM_T2(c2, c3);
                float out[16];
                /* a NaN output as RL_PRODUCT_NAN (doc/products.md §3) */
                const __m512 sum = RL_MM_T1(e0, e1);
                const __m512 res =
                    _mm512_mask_mov_ps(sum, _mm512_cmp_ps_mask(sum, sum, _CMP_UNORD_Q), qnan);
                if (!yd && nr == 4) {
                    /* each token's four rows, one 128-bit store apiece */
                    float *y0 = yf + t0 * ystride + yoff + r;
                    _mm_storeu_ps(y0, _mm512_castps512_ps128(res));
                    if (nt > 1)
                        _mm_storeu_ps(y0 + ystride, _mm512_extractf32x4_ps(res, 1));
                    if (nt > 2)
                        _mm_storeu_ps(y0 + 2 * ystride, _mm512_extractf32x4_ps(res, 2));
                    if (nt > 3)
                        _mm_storeu_ps(y0 + 3 * ystride, _mm512_extractf32x4_ps(res, 3));
                    continue;
                }
                _mm512_storeu_ps(out, res);
                for (size_t k = 0; k < nt; k++)
                    for (size_t i = 0; i < nr; i++) {
                        const size_t at = (t0 + k) * ystride + yoff + r + i;
                        if (yd)
                            yd[at] = out[4 * k + i];
                        if (yf)
                            yf[at] = out[4 * k + i];
                    }
            }
        }
    }
}
#undef RL_MM_ACC16

__attribute__((target(RL_TARGET_AVX512))) void
rl_mm_f32_tile_avx512(const float *m, size_t cols, const float *x, size_t n, size_t r0,
                      size_t r1, double *yd, float *yf, size_t ystride, size_t yoff) {
    rl_mm_tile_avx512(m, 0, cols, x, n, r0, r1, yd, yf, ystride, yoff);
}

/* Columns up to which the F16 tile widens each four rows once into a
 * buffer on the stack when more than one group of tokens reads them.  On
 * s1-pico's and s1-nano's shapes (64 and 128 columns) that takes 12 to 20%
 * off the product; from 256 columns widening in registers chunk by chunk,
 * once per group of tokens, measured as fast or faster. */
#define RL_MM_WIDE_COLS 128

/* With more than RL_MM_T tokens and at most RL_MM_WIDE_COLS columns each
 * four rows are widened by F16C once (the same exact values the in-place
 * loads give, a signalling NaN quieted alike) and run as f32 rows. */
__attribute__((target(RL_TARGET_AVX512))) void
rl_mm_f16_tile_avx512(const uint16_t *m, size_t cols, const float *x, size_t n, size_t r0,
                      size_t r1, double *yd, float *yf, size_t ystride, size_t yoff) {
    if (n <= RL_MM_T || cols > RL_MM_WIDE_COLS) {
        rl_mm_tile_avx512(m, 1, cols, x, n, r0, r1, yd, yf, ystride, yoff);
        return;
    }
    float wide[4 * RL_MM_WIDE_COLS] __attribute__((aligned(64)));
    for (size_t r = r0; r < r1; r += 4) {
        const size_t nr = r1 - r < 4 ? r1 - r : 4, len = nr * cols;
        const uint16_t *src = m + r * cols;
        size_t i = 0;
        for (; i + 16 <= len; i += 16)
            _mm512_store_ps(wide + i, rl_mm_wload(src, i, 1));
        if (i < len) {
            const __mmask16 k = (__mmask16)((1u << (len - i)) - 1u);
            _mm512_mask_storeu_ps(wide + i, k, rl_mm_wload_tail(src, i, k, 1));
        }
        rl_mm_tile_avx512(wide, 0, cols, x, n, 0, nr, yd, yf, ystride, yoff + r);
    }
}
