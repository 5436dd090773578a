/* matmul_q8.c - the token-tiled Q8_0 kernel of the AVX-512 VNNI path for
 * Q8x2 activations (see matmul_q8.h for the layout it wants; :q8 has its
 * own kernel, matmul_q8pair.c).
 *
 * SPEC §4 fixes the integer part as exact int32 lane sums, so any exact way
 * of forming them is allowed; this one makes vpdpbusd produce the lane sums
 * directly, with no reduction step:
 *   - a lane (8 bytes, one qword of a block) is split into its low and high
 *     dword; wA holds the low dwords of four rows' blocks (four rows x four
 *     lanes, one int32 slot each), wB the high dwords, and the activation
 *     block is stored once per call in the same split (xA, xB, each 16
 *     bytes broadcast to the four rows), so dpbusd(dpbusd(c, wA, xA), wB,
 *     xB) adds all 8 products of each (row, lane) into its slot;
 *   - vpdpbusd multiplies unsigned by signed bytes, so the weights go in
 *     as w + 128 (w ^ 0x80, 0..255, done once per weight block and tile)
 *     and each slot starts at -128 * (the sum of the activation lane's
 *     quants), stored with the split block: every step is an exact
 *     integer, whatever the weight bytes (-128 included).
 * The 16 lane sums of four rows become 16 doubles and meet the scales
 * dw[r] * dx[t] (exact) in one FMA each, blocks in increasing order: SPEC
 * §4 step 3, so a row is bit for bit matvec's.  Q8x2 (SPEC §4.1) adds the
 * residual quants the same way and forms 128 * s_q + s_r before the
 * conversion; its 2^-7 is already folded into dx (matvec.h).
 *
 * Tiles: a few tokens (their split blocks sit in L1) against every 4-row
 * group of the caller's row tile (which also sits in L1), so each loaded
 * weight block serves RL_MMQ_T tokens and each activation block four rows.
 */
#include "prims/matmul_q8.h"

#include <immintrin.h>
#include <string.h>

#include "gguf/numfmt.h"

size_t rl_mm_q8_split_tokens(size_t n) {
    return (n + RL_MM_Q8_TOKENS - 1) / RL_MM_Q8_TOKENS * RL_MM_Q8_TOKENS;
}

/* One block: the lane halves by a dword permutation, the lane sums of the
 * quants by two widening multiply-adds with ones and a pairwise add. */
__attribute__((target("avx2"))) static inline void rl_mmq_split_block(const int8_t *qs,
                                                                    int8_t *pa, int32_t *pc) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)qs);
    _mm256_storeu_si256((__m256i *)(void *)pa,
                        _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)));
    const __m256i q4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v),
                                         _mm256_set1_epi16(1));
    /* [l0 l1 l0 l1 | l2 l3 l2 l3], then l0..l3 in the low quarter */
    const __m256i l = _mm256_hadd_epi32(q4, q4);
    const __m256i c = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(l, 7));
    _mm_storeu_si128((__m128i *)(void *)pc,
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
                         c, _mm256_setr_epi32(0, 1, 4, 5, 0, 1, 4, 5))));
}

__attribute__((target("avx2"))) void rl_mm_q8_split(const rl_block_q8_0 *xq, const int8_t *xr,
                                                    size_t n, size_t nb, int x2, int8_t *xa,
                                                    int8_t *ra, int32_t *cx, double *dxs) {
    const size_t np = rl_mm_q8_split_tokens(n);
    const double f = x2 ? 0x1p-7 : 1.0; /* folds exactly */
    for (size_t t = 0; t < np; t++)
        for (size_t b = 0; b < nb; b++) {
            /* tile of T tokens, then block, then the token within the tile */
            const size_t at = (t / RL_MM_Q8_TOKENS * nb + b) * RL_MM_Q8_TOKENS + t % RL_MM_Q8_TOKENS;
            int8_t *pa = xa + 32 * at, *pr = ra ? ra + 32 * at : NULL;
            int32_t *pc = cx + (ra ? 8 : 4) * at;
            if (t >= n) { /* padding: quants 0, scale 0 */
                memset(pa, 0, 32);
                if (pr)
                    memset(pr, 0, 32);
                memset(pc, 0, (ra ? 8 : 4) * sizeof *pc);
                dxs[at] = 0.0;
                continue;
            }
            dxs[at] = (double)rl_gguf_f16_to_f32(xq[t * nb + b].d) * f;
            rl_mmq_split_block(xq[t * nb + b].qs, pa, pc);
            if (pr)
                rl_mmq_split_block(xr + 32 * (t * nb + b), pr, pc + 4);
        }
}

/* The lane sums of four rows (wA, wB split as above, each byte + 128)
 * with one token's split block at p (16 + 16 bytes) and its four lanes'
 * -128 * sum at c. */
__attribute__((target(RL_MM_Q8_TARGET), always_inline)) static inline __m512i
rl_mmq_dot(__m512i wa, __m512i wb, const int8_t *p, const int32_t *c) {
    const __m512i xa = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)p));
    const __m512i xb =
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
    const __m512i c4 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)c));
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c4, wa, xa), wb, xb);
}

/* One weight block of a 4-row group, arranged once per call (rl_mmq_arrange):
 * the lane halves (+128) and the four rows' scales, as the inner loop
 * wants them. */
typedef struct {
    __m512i wa, wb;
    __m512d dlo, dhi;
} rl_mmq_wblk;

/* Rows [r0, r1) of W into arranged blocks: group g (rows r0 + 4g..) block b
 * at out[g * nb + b]; a short last group repeats its last row. */
__attribute__((target(RL_MM_Q8_TARGET))) static void
rl_mmq_arrange(const rl_block_q8_0 *w, size_t nb, size_t r0, size_t r1, rl_mmq_wblk *out) {
    /* even dwords of (rows 0,1 | rows 2,3) are the lanes' low halves */
    const __m512i ia = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                         28, 30);
    const __m512i ib = _mm512_add_epi32(ia, _mm512_set1_epi32(1));
    const __m512i c80 = _mm512_set1_epi8((char)0x80);
    const __m512i lo4 = _mm512_setr_epi64(0, 0, 0, 0, 1, 1, 1, 1);
    const __m512i hi4 = _mm512_setr_epi64(2, 2, 2, 2, 3, 3, 3, 3);
    for (size_t r = r0; r < r1; r += 4) {
        const rl_block_q8_0 *wr[4];
        rl_mm_q8_group(w, nb, r, r1, wr);
        rl_mmq_wblk *o = out + (r - r0) / 4 * nb;
        for (size_t b = 0; b < nb; b++) {
            __m512i w01, w23;
            const __m128 d = rl_mm_q8_block4(wr, b, &w01, &w23);
            o[b].wa = _mm512_xor_si512(_mm512_permutex2var_epi32(w01, ia, w23), c80);
            o[b].wb = _mm512_xor_si512(_mm512_permutex2var_epi32(w01, ib, w23), c80);
            const __m512d d4 = _mm512_castpd256_pd512(_mm256_cvtps_pd(d));
            o[b].dlo = _mm512_permutexvar_pd(lo4, d4);
            o[b].dhi = _mm512_permutexvar_pd(hi4, d4);
        }
    }
}

/* One tile of RL_MM_Q8_TOKENS tokens (split blocks xa / ra, corrections cx
 * and scales dxs at the tile's start) against the arranged rows [r0, r1);
 * results for tokens t0 + k < t0 + nt. */
__attribute__((target(RL_MM_Q8_TARGET), always_inline)) static inline void
rl_mmq_tile(const rl_mmq_wblk *wk, size_t nb, size_t rows, const int8_t *xa, const int8_t *ra,
            const int32_t *cx, const double *dxs, size_t t0, size_t nt, size_t r0, size_t r1,
            double *yd, float *yf, int x2) {
    enum { T = RL_MM_Q8_TOKENS };
    const __m512i gather = _mm512_setr_epi64(0, 4, 8, 12, 0, 0, 0, 0);
    for (size_t r = r0; r < r1; r += 4) {
        const size_t nr = r1 - r < 4 ? r1 - r : 4;
        const rl_mmq_wblk *g = wk + (r - r0) / 4 * nb;
        __m512d acc[T][2];
        for (size_t k = 0; k < T; k++)
            acc[k][0] = acc[k][1] = _mm512_setzero_pd();
        for (size_t b = 0; b < nb; b++) {
            const __m512i wa = g[b].wa, wb = g[b].wb;
            const __m512d dlo = g[b].dlo, dhi = g[b].dhi;
            const int8_t *pa = xa + 32 * T * b, *pr = x2 ? ra + 32 * T * b : NULL;
            const int32_t *pc = cx + (x2 ? 8 : 4) * T * b;
            const double *pd = dxs + T * b;
            _Pragma("GCC unroll 16")
            for (size_t k = 0; k < T; k++) {
                __m512i s = rl_mmq_dot(wa, wb, pa + 32 * k, pc + (x2 ? 8 : 4) * k);
                if (x2)
                    s = _mm512_add_epi32(_mm512_slli_epi32(s, 7),
                                         rl_mmq_dot(wa, wb, pr + 32 * k, pc + 8 * k + 4));
                const __m512d dk = _mm512_set1_pd(pd[k]);
                acc[k][0] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(s)),
                                            _mm512_mul_pd(dlo, dk), acc[k][0]);
                acc[k][1] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(s, 1)),
                                            _mm512_mul_pd(dhi, dk), acc[k][1]);
            }
        }
        /* y = (l0 + l1) + (l2 + l3) per row (additions commute bit for bit):
         * pairs, then the pairs' pairs, then rows 0..3 gathered */
        const __mmask8 rm = (__mmask8)((1u << nr) - 1u);
        for (size_t k = 0; k < nt; k++) {
            __m512d lo = _mm512_add_pd(acc[k][0], _mm512_permute_pd(acc[k][0], 0x55));
            __m512d hi = _mm512_add_pd(acc[k][1], _mm512_permute_pd(acc[k][1], 0x55));
            lo = _mm512_add_pd(lo, _mm512_permutex_pd(lo, _MM_SHUFFLE(1, 0, 3, 2)));
            hi = _mm512_add_pd(hi, _mm512_permutex_pd(hi, _MM_SHUFFLE(1, 0, 3, 2)));
            const __m512d v = _mm512_permutex2var_pd(lo, gather, hi);
            const size_t at = (t0 + k) * rows + r;
            if (yd)
                _mm512_mask_storeu_pd(yd + at, rm, v);
            if (yf)
                _mm256_mask_storeu_ps(yf + at, rm, _mm512_cvtpd_ps(v));
        }
    }
}

size_t rl_mm_q8_arranged_bytes(size_t rows, size_t nb) {
    return ((rows + 3) / 4 * nb) * sizeof(rl_mmq_wblk) + 64;
}

__attribute__((target(RL_MM_Q8_TARGET))) void
rl_mm_q8_tile_vnni(const rl_block_q8_0 *w, size_t nb, size_t rows, const int8_t *xa,
                   const int8_t *ra, const int32_t *cx, const double *dxs, size_t n, size_t r0,
                   size_t r1, double *yd, float *yf, void *scratch) {
    rl_mmq_wblk *wk = (rl_mmq_wblk *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    rl_mmq_arrange(w, nb, r0, r1, wk);
    for (size_t t0 = 0; t0 < n; t0 += RL_MM_Q8_TOKENS) {
        const size_t nt = n - t0 < RL_MM_Q8_TOKENS ? n - t0 : RL_MM_Q8_TOKENS;
        const size_t at = t0 * nb; /* the tile's first split block */
        if (ra)
            rl_mmq_tile(wk, nb, rows, xa + 32 * at, ra + 32 * at, cx + 8 * at, dxs + at, t0, nt,
                        r0, r1, yd, yf, 1);
        else
            rl_mmq_tile(wk, nb, rows, xa + 32 * at, NULL, cx + 4 * at, dxs + at, t0, nt, r0, r1,
                        yd, yf, 0);
    }
}
