/* matmul_q8.c - the token-tiled Q8_0 kernel of the AVX-512 VNNI path (see
 * matmul_q8.h): a vector slot per (row, token) pair.
 */
#include "prims/matmul_q8.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/kernel.h"
#include "prims/pool.h"


/* doc/products.md §1 fixes the integer part as exact int32 lane sums, formed here with
 * vpdpbusd, which multiplies unsigned by signed bytes: the weights go in as
 * w + 128 (w ^ 0x80, 0..255, -128 included) and each sum starts at -128
 * times the sum of the activation quants it meets, so every step is an
 * exact integer.  A vector slot is a (row, token) pair, slot 4k + i for
 * row i and token k of a 4 x 4 tile, so that one scale product dw * dx and
 * one conversion to double serve a whole vector of lane sums; there is a
 * vector per lane:
 *   - weights (rl_mmq4_wblk, arranged per call, per 4-row group and block):
 *     dword h (half h of lane h / 2) of rows 0..3, + 128, broadcast to
 *     the four tokens when loaded; and the rows' scales;
 *   - activations (rl_mmq4_xblk, split once per call, per 4-token quad and
 *     block): the quants as they are, dwords 0..3 and 4..7 of token k in
 *     16-byte lane k of two vectors, so one in-lane shuffle puts dword h of
 *     token k in slots 4k..4k+3; -128 * the block's sum of quants (and, in
 *     rl_mmq4_cblk, each lane's) in those slots; and the scales of tokens
 *     0, 1 (dx[0]) and 2, 3 (dx[1]) four times each (with Q8x2's 2^-7,
 *     exact); Q8x2's residual quants and their lanes' and blocks' sums beside
 *     (rl_mmq4_rblk).
 * A double half of a slot vector is then tokens 0, 1 (or 2, 3) of the four
 * rows, and the 16 pairs' scales are formed once per block.
 *
 * Two ways, the same bits:
 *   - lanes (rl_mmq4_lanes): doc/products.md §1 as written, a double accumulator per
 *     lane, the scales of 16 pairs formed once per block for all four lanes;
 *   - whole blocks (rl_mmq4_whole), when every sum is exact.  A term of
 *     row r, token t, block b is s * dw * dx with |s| <= 128 * A (A: the
 *     sum of the token block's |quants|, at most 32 * 127; the four lane
 *     sums together are bounded the same way) and dw * dx the product of
 *     two 11-bit f16 mantissas at the exponent Ew + Ex of their last bits,
 *     so below 2^29 * A * 2^(Ew + Ex).  With lo_w, lo_x the lowest
 *     exponents of the tile's nonzero weight and activation scales, every
 *     term is a multiple of 2^(lo_w + lo_x); if
 *         sum_b 2^(Ew_b - lo_w) * X_b <= 2^24,
 *     Ew_b the largest weight exponent of block b in the tile's rows and
 *     X_b the largest A * 2^(Ex - lo_x) of its tokens, the terms' absolute
 *     sum is below 2^53 units, so every partial sum, lanes apart or
 *     together, in any order, is exact: acc_l is the exact lane sum,
 *     (acc_0 + acc_1) + (acc_2 + acc_3) the exact total, and one
 *     accumulator over whole-block sums gives that very double.  A zero
 *     scale adds exact zeros (never -0 to +0) and does not count; an
 *     infinite or NaN scale rules this way out (an activation's never
 *     is: the product quantizes finite values only).  Q8x2 the same way:
 *     a lane's sum is 128 * s_q + s_r (the 2^-7 rides on dx, exactly), so
 *     with A = 128 * A_q + A_r (the quants' and the residuals' sums of
 *     |quants|) every term is below 2^29 * A units of 2^(lo_w + lo_x - 7)
 *     and the same test holds.  The bounds are gathered once per call,
 *     with the split and the arrangement, and the test costs a comparison per tile where
 *     the largest X_b and Ew_b alone satisfy it. */
typedef struct {
    /* the tokens' quants: dwords 0..3 of token k in q[0][4k..4k+3], dwords
     * 4..7 in q[1][4k..]; rl_mmq4_x spreads them */
    int32_t q[2][16];
    int32_t call[16];
    double dx[2][8];
} rl_mmq4_xblk;

/* the lanes' corrections, apart: only the lane-by-lane kernel reads them */
typedef struct {
    int32_t c[4][16];
} rl_mmq4_cblk;

/* Q8x2 (doc/products.md §2): the residual quants as q above, and their lanes'
 * corrections as c; the scales dx then carry the 2^-7 (exactly) */
typedef struct {
    int32_t q[2][16];
    int32_t c[4][16];
    int32_t call[16];
} rl_mmq4_rblk;

typedef struct {
    int32_t w[8][4];
    double dw[4];
} rl_mmq4_wblk;

/* exponent tables: no nonzero scale at a block; a group's lowest exponent
 * when it has no nonzero scale, and when one is not finite */
enum { RL_MMQ4_NONE = -128, RL_MMQ4_EMPTY = 1000, RL_MMQ4_NONFINITE = -1000, RL_MMQ4_ZERO = 999 };

/* groups (of four rows) arranged at once: the whole-block kernel's */
#define RL_MMQ4_GROUPS 4

/* tiles computed each way since the start, :q8's then Q8x2's
 * (rl_mm_q8_tiles4, rl_mm_q8x2_tiles4) */
static size_t rl_mmq4_count_[4];

void rl_mm_q8_tiles4(size_t *whole, size_t *lanes) {
    *whole = __atomic_load_n(&rl_mmq4_count_[0], __ATOMIC_RELAXED);
    *lanes = __atomic_load_n(&rl_mmq4_count_[1], __ATOMIC_RELAXED);
}

void rl_mm_q8x2_tiles4(size_t *whole, size_t *lanes) {
    *whole = __atomic_load_n(&rl_mmq4_count_[2], __ATOMIC_RELAXED);
    *lanes = __atomic_load_n(&rl_mmq4_count_[3], __ATOMIC_RELAXED);
}

size_t rl_mm_q8_split4_bytes(size_t n, size_t nb, int x2) {
    const size_t nq = (n + 3) / 4;
    return nq * nb * (sizeof(rl_mmq4_xblk) + sizeof(rl_mmq4_cblk) + sizeof(uint64_t) +
                      (x2 ? sizeof(rl_mmq4_rblk) : 0)) +
           nq * (sizeof(uint64_t) + sizeof(int32_t)) + 64;
}

/* -128 times the four lane sums of a block's quants */
__attribute__((target(RL_TARGET_AVX2))) static void
rl_mmq4_lane_sums(const int8_t *qs, int32_t c[4]) {
    /* pairs, quads, then the lanes' halves */
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)qs);
    const __m256i q4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v),
                                         _mm256_set1_epi16(-128));
    const __m256i l8 = _mm256_hadd_epi32(q4, q4); /* l0 l1 l0 l1 | l2 l3 l2 l3 */
    _mm_storeu_si128((__m128i *)(void *)c,
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
                         l8, _mm256_setr_epi32(0, 1, 4, 5, 0, 1, 4, 5))));
}

size_t rl_mm_q8_arranged4_bytes(size_t rows, size_t nb) {
    const size_t ng = (rows + 4 * RL_MMQ4_GROUPS - 1) / (4 * RL_MMQ4_GROUPS) * RL_MMQ4_GROUPS;
    return ng * nb * sizeof(rl_mmq4_wblk) + ng * sizeof(int32_t) + ng * nb + 64;
}

static void *rl_mmq4_align(const void *p) {
    return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* The exponent of an f16 scale's last mantissa bit (-24 .. 5), or
 * RL_MMQ4_ZERO for a zero scale, RL_MMQ4_NONFINITE for infinity and NaN. */
static inline int rl_mmq4_exp(uint16_t h) {
    const int e = (h >> 10) & 31;
    if (!(h & 0x7fff))
        return RL_MMQ4_ZERO;
    return e == 31 ? RL_MMQ4_NONFINITE : (e ? e : 1) - 25;
}

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
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline __m128
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

/* Where block 0 of arranged group g is: block b is RL_MMQ4_GROUPS further
 * on per block, so a set's groups are read as one stream. */
static inline size_t set_base(size_t g, size_t nb) {
    return g / RL_MMQ4_GROUPS * nb * RL_MMQ4_GROUPS + g % RL_MMQ4_GROUPS;
}

__attribute__((target(RL_TARGET_AVX2))) void
rl_mm_q8_split4(const rl_block_q8_0 *xq, const int8_t *xr, size_t n, size_t nb, void *out) {
    rl_mmq4_xblk *xs = rl_mmq4_align(out);
    const size_t nq = (n + 3) / 4;
    rl_mmq4_cblk *cs = (rl_mmq4_cblk *)(void *)(xs + nq * nb);
    rl_mmq4_rblk *rs = (rl_mmq4_rblk *)(void *)(cs + nq * nb); /* with xr */
    /* per quad and block the magnitude bound, per quad its largest and the
     * lowest exponent (rl_mmq4_exact) */
    uint64_t *xmag = (uint64_t *)(void *)(xr ? (void *)(rs + nq * nb) : (void *)(cs + nq * nb));
    uint64_t *xmax = xmag + nq * nb;
    int32_t *xlo = (int32_t *)(void *)(xmax + nq);
    if (n % 4) { /* padding tokens: quants 0, scale 0 */
        memset(xs + (nq - 1) * nb, 0, nb * sizeof *xs);
        memset(cs + (nq - 1) * nb, 0, nb * sizeof *cs);
        if (xr)
            memset(rs + (nq - 1) * nb, 0, nb * sizeof *rs);
    }
    for (size_t q = 0; q < nq; q++) {
        xlo[q] = RL_MMQ4_EMPTY;
        for (size_t k = 0; k < 4 && 4 * q + k < n; k++) {
            const size_t t = 4 * q + k;
            for (size_t b = 0; b < nb; b++) {
                rl_mmq4_xblk *o = xs + q * nb + b;
                const rl_block_q8_0 *blk = xq + t * nb + b;
                int32_t c[4];
                memcpy(&o->q[0][4 * k], blk->qs, 16);
                memcpy(&o->q[1][4 * k], blk->qs + 16, 16);
                rl_mmq4_lane_sums(blk->qs, c);
                if (xr) {
                    const int8_t *r = xr + (t * nb + b) * 32;
                    rl_mmq4_rblk *ro = rs + q * nb + b;
                    int32_t cr[4];
                    memcpy(&ro->q[0][4 * k], r, 16);
                    memcpy(&ro->q[1][4 * k], r + 16, 16);
                    rl_mmq4_lane_sums(r, cr);
                    for (int l = 0; l < 4; l++)
                        _mm_storeu_si128((__m128i *)(void *)&ro->c[l][4 * k],
                                         _mm_set1_epi32(cr[l]));
                    _mm_storeu_si128((__m128i *)(void *)&ro->call[4 * k],
                                     _mm_set1_epi32(cr[0] + cr[1] + cr[2] + cr[3]));
                }
                for (int l = 0; l < 4; l++)
                    _mm_storeu_si128((__m128i *)(void *)&cs[q * nb + b].c[l][4 * k],
                                     _mm_set1_epi32(c[l]));
                _mm_storeu_si128((__m128i *)(void *)&o->call[4 * k],
                                 _mm_set1_epi32(c[0] + c[1] + c[2] + c[3]));
                _mm256_storeu_pd(&o->dx[k / 2][4 * (k % 2)],
                                 _mm256_set1_pd((double)rl_gguf_f16_to_f32(blk->d) *
                                                (xr ? 0x1p-7 : 1.0)));
                const int e = rl_mmq4_exp(blk->d);
                if (e != RL_MMQ4_ZERO && e < xlo[q])
                    xlo[q] = e; /* RL_MMQ4_NONFINITE (below any) for infinity, NaN */
            }
        }
        /* the bound: the largest sum of |quants| times 2^(exponent - lowest);
         * a quad with a scale not finite never takes whole blocks (the
         * product's callers quantize only finite activations) */
        xmax[q] = 0;
        if (xlo[q] == RL_MMQ4_NONFINITE) {
            memset(xmag + q * nb, 0, nb * sizeof *xmag);
            xmax[q] = UINT64_MAX;
            continue;
        }
        for (size_t b = 0; b < nb; b++) {
            uint64_t m = 0;
            for (size_t k = 0; k < 4 && 4 * q + k < n; k++) {
                const rl_block_q8_0 *blk = xq + (4 * q + k) * nb + b;
                const int e = rl_mmq4_exp(blk->d);
                if (e == RL_MMQ4_ZERO)
                    continue;
                const __m256i a = _mm256_sad_epu8(
                    _mm256_abs_epi8(_mm256_loadu_si256((const __m256i *)(const void *)blk->qs)),
                    _mm256_setzero_si256());
                uint64_t sum = (uint64_t)(_mm256_extract_epi64(a, 0) +
                                          _mm256_extract_epi64(a, 1) +
                                          _mm256_extract_epi64(a, 2) +
                                          _mm256_extract_epi64(a, 3));
                if (xr) { /* Q8x2: 128 * A + the residuals' sum of |quants| */
                    const __m256i ar = _mm256_sad_epu8(
                        _mm256_abs_epi8(_mm256_loadu_si256(
                            (const __m256i *)(const void *)(xr + ((4 * q + k) * nb + b) * 32))),
                        _mm256_setzero_si256());
                    sum = 128 * sum + (uint64_t)(_mm256_extract_epi64(ar, 0) +
                                                 _mm256_extract_epi64(ar, 1) +
                                                 _mm256_extract_epi64(ar, 2) +
                                                 _mm256_extract_epi64(ar, 3));
                }
                if ((sum << (e - xlo[q])) > m)
                    m = sum << (e - xlo[q]);
            }
            xmag[q * nb + b] = m;
            if (m > xmax[q])
                xmax[q] = m;
        }
    }
}

/* Rows [r0, r1) into groups of four (a short last group repeats its last
 * row), padded to a multiple of RL_MMQ4_GROUPS groups by repeating the
 * last; each group's spread after the groups.  Returns the group count. */
__attribute__((target(RL_TARGET_VNNI))) static size_t
rl_mmq4_arrange(const rl_block_q8_0 *w, size_t nb, size_t r0, size_t r1, rl_mmq4_wblk *out) {
    /* dword h of row i to slot 4h + i: rows 0, 1 in w01, rows 2, 3 in w23 */
    const __m512i lo = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(4));
    const __m512i c80 = _mm512_set1_epi8((char)0x80);
    const size_t ng = (r1 - r0 + 4 * RL_MMQ4_GROUPS - 1) / (4 * RL_MMQ4_GROUPS) * RL_MMQ4_GROUPS;
    /* exponent tables per set of RL_MMQ4_GROUPS groups */
    int32_t *wlo = (int32_t *)(void *)(out + ng * nb);
    int8_t *whi = (int8_t *)(wlo + ng);
    memset(whi, RL_MMQ4_NONE, ng / RL_MMQ4_GROUPS * nb);
    for (size_t k = 0; k < ng / RL_MMQ4_GROUPS; k++) /* lowest, highest */
        wlo[2 * k] = RL_MMQ4_EMPTY, wlo[2 * k + 1] = RL_MMQ4_NONE;
    size_t g = 0;
    for (size_t r = r0; r < r1; r += 4, g++) {
        const rl_block_q8_0 *wr[4];
        rl_mm_q8_group(w, nb, r, r1, wr);
        /* block b of group g: the set's blocks in order, the set's groups
         * side by side within a block */
        rl_mmq4_wblk *o = out + set_base(g, nb);
        const size_t set = g / RL_MMQ4_GROUPS;
        /* exponents as rl_mmq4_exp finds them, four rows at once, from the
         * scales widened to f32 (exact): a normal f16 of exponent e is an
         * f32 of exponent e + 112, a subnormal one at least 2^-24 */
        __m128i elo = _mm_set1_epi32(RL_MMQ4_EMPTY), etop = _mm_set1_epi32(RL_MMQ4_NONE);
        __mmask8 bad = 0;
        for (size_t b = 0; b < nb; b++) {
            __m512i w01, w23;
            const __m128 d4 = rl_mm_q8_block4(wr, b, &w01, &w23);
            rl_mmq4_wblk *ob = o + b * RL_MMQ4_GROUPS;
            _mm512_storeu_si512(&ob->w[0][0],
                                _mm512_xor_si512(_mm512_permutex2var_epi32(w01, lo, w23), c80));
            _mm512_storeu_si512(&ob->w[4][0],
                                _mm512_xor_si512(_mm512_permutex2var_epi32(w01, hi, w23), c80));
            _mm256_storeu_pd(ob->dw, _mm256_cvtps_pd(d4));
            const __m128i fe = _mm_and_si128(_mm_srli_epi32(_mm_castps_si128(d4), 23),
                                             _mm_set1_epi32(0xff));
            const __mmask8 nz = _mm_cmpneq_epi32_mask(fe, _mm_setzero_si128()) & 0xf;
            bad |= _mm_cmpeq_epi32_mask(fe, _mm_set1_epi32(0xff)) & 0xf;
            const __m128i e = _mm_max_epi32(_mm_sub_epi32(fe, _mm_set1_epi32(137)),
                                            _mm_set1_epi32(-24));
            elo = _mm_mask_min_epi32(elo, nz, elo, e);
            __m128i eh = _mm_mask_mov_epi32(_mm_set1_epi32(RL_MMQ4_NONE), nz, e);
            etop = _mm_max_epi32(etop, eh);
            eh = _mm_max_epi32(eh, _mm_shuffle_epi32(eh, 0x4e));
            eh = _mm_max_epi32(eh, _mm_shuffle_epi32(eh, 0xb1));
            const int top = _mm_cvtsi128_si32(eh);
            int8_t *bhi = &whi[set * nb + b];
            *bhi = (int8_t)(top > *bhi ? top : *bhi);
        }
        elo = _mm_min_epi32(elo, _mm_shuffle_epi32(elo, 0x4e));
        elo = _mm_min_epi32(elo, _mm_shuffle_epi32(elo, 0xb1));
        etop = _mm_max_epi32(etop, _mm_shuffle_epi32(etop, 0x4e));
        etop = _mm_max_epi32(etop, _mm_shuffle_epi32(etop, 0xb1));
        int32_t *slo = &wlo[2 * set];
        const int32_t l = _mm_cvtsi128_si32(elo), t = _mm_cvtsi128_si32(etop);
        if (bad || slo[0] == RL_MMQ4_NONFINITE)
            slo[0] = RL_MMQ4_NONFINITE;
        else if (l < slo[0])
            slo[0] = l;
        if (t > slo[1])
            slo[1] = t;
    }
    for (; g < ng; g++) /* padding groups repeat the last */
        for (size_t b = 0; b < nb; b++)
            out[set_base(g, nb) + b * RL_MMQ4_GROUPS] =
                out[set_base(g - 1, nb) + b * RL_MMQ4_GROUPS];
    return ng;
}

/* Dword h of the quad's four tokens (z0: their dwords 0..3, z1: 4..7, a
 * 16-byte lane each), token k in slots 4k..4k+3: one in-lane shuffle (the
 * switch folds away where h is known, as in the unrolled kernels). */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline __m512i
rl_mmq4_x(__m512i z0, __m512i z1, int h) {
    const __m512i z = h < 4 ? z0 : z1;
    switch (h % 4) {
    case 0: return _mm512_shuffle_epi32(z, _MM_PERM_AAAA);
    case 1: return _mm512_shuffle_epi32(z, _MM_PERM_BBBB);
    case 2: return _mm512_shuffle_epi32(z, _MM_PERM_CCCC);
    default: return _mm512_shuffle_epi32(z, _MM_PERM_DDDD);
    }
}

/* Store a 4 x 4 tile's doubles (half h: tokens 2h, 2h + 1 of rows rg..)
 * for the ng rows and nt tokens that exist. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline void
rl_mmq4_store(__m512d v, int h, size_t rows, size_t rg, size_t ng, size_t t0, size_t nt,
              double *yd, float *yf) {
    const __mmask8 rm = (__mmask8)((1u << ng) - 1u);
    _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++) {
        const size_t k = 2 * (size_t)h + (size_t)q;
        if (k >= nt)
            break;
        const __m256d v4 = q ? _mm512_extractf64x4_pd(v, 1) : _mm512_castpd512_pd256(v);
        const size_t at = (t0 + k) * rows + rg;
        if (yd)
            _mm256_mask_storeu_pd(yd + at, rm, v4);
        if (yf)
            _mm_mask_storeu_ps(yf + at, rm, _mm256_cvtpd_ps(v4));
    }
}

/* Lanes apart: groups ga, gb (arranged) against one quad (xs, nb blocks);
 * rows r (group ga) and r + 4 (group gb), nr of them existing. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline void
rl_mmq4_lanes(const rl_mmq4_wblk *ga, const rl_mmq4_wblk *gb, const rl_mmq4_xblk *xs,
              const rl_mmq4_cblk *cs, const rl_mmq4_rblk *rs, int x2, size_t nb, size_t rows,
              size_t r, size_t nr, size_t t0, size_t nt, double *yd, float *yf) {
    __m512d acc[2][4][2];
    _Pragma("GCC unroll 2") for (int g = 0; g < 2; g++)
        _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++)
            acc[g][l][0] = acc[g][l][1] = _mm512_setzero_pd();
    for (size_t b = 0; b < nb; b++) {
        const rl_mmq4_xblk *xb = xs + b;
        const rl_mmq4_wblk *wg[2] = {ga + b * RL_MMQ4_GROUPS, gb + b * RL_MMQ4_GROUPS};
        const __m512d dx0 = _mm512_load_pd(xb->dx[0]), dx1 = _mm512_load_pd(xb->dx[1]);
        __m512d sc[2][2];
        _Pragma("GCC unroll 2") for (int g = 0; g < 2; g++) {
            const __m512d dw = _mm512_broadcast_f64x4(_mm256_loadu_pd(wg[g]->dw));
            sc[g][0] = _mm512_mul_pd(dw, dx0);
            sc[g][1] = _mm512_mul_pd(dw, dx1);
        }
        const __m512i z0 = _mm512_load_si512(xb->q[0]), z1 = _mm512_load_si512(xb->q[1]);
        __m512i r0 = z0, r1 = z1;
        if (x2)
            r0 = _mm512_load_si512(rs[b].q[0]), r1 = _mm512_load_si512(rs[b].q[1]);
        _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) {
            const __m512i xa = rl_mmq4_x(z0, z1, 2 * l);
            const __m512i xh = rl_mmq4_x(z0, z1, 2 * l + 1);
            const __m512i c = _mm512_load_si512(cs[b].c[l]);
            __m512i ra = xa, rh = xh, cr = c;
            if (x2) {
                ra = rl_mmq4_x(r0, r1, 2 * l), rh = rl_mmq4_x(r0, r1, 2 * l + 1);
                cr = _mm512_load_si512(rs[b].c[l]);
            }
            _Pragma("GCC unroll 2") for (int g = 0; g < 2; g++) {
                const __m512i wa = _mm512_broadcast_i32x4(
                    _mm_loadu_si128((const __m128i *)(const void *)wg[g]->w[2 * l]));
                const __m512i wh = _mm512_broadcast_i32x4(
                    _mm_loadu_si128((const __m128i *)(const void *)wg[g]->w[2 * l + 1]));
                __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, wa, xa), wh, xh);
                if (x2) /* doc/products.md §2: 128 * s_q + s_r */
                    s = _mm512_add_epi32(
                        _mm512_slli_epi32(s, 7),
                        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(cr, wa, ra), wh, rh));
                acc[g][l][0] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(s)),
                                               sc[g][0], acc[g][l][0]);
                acc[g][l][1] = _mm512_fmadd_pd(
                    _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(s, 1)), sc[g][1], acc[g][l][1]);
            }
        }
    }
    /* y = (l0 + l1) + (l2 + l3) */
    _Pragma("GCC unroll 2") for (int g = 0; g < 2; g++) {
        const size_t rg = r + 4 * (size_t)g;
        if (rg >= r + nr)
            break;
        const size_t ng = r + nr - rg < 4 ? r + nr - rg : 4;
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
            rl_mmq4_store(_mm512_add_pd(_mm512_add_pd(acc[g][0][h], acc[g][1][h]),
                                        _mm512_add_pd(acc[g][2][h], acc[g][3][h])),
                          h, rows, rg, ng, t0, nt, yd, yf);
    }
}

/* Whole blocks (the sums exact, see above): RL_MMQ4_GROUPS groups from g0
 * (arranged, nb blocks apart) against one quad; rows r.., nr existing.
 * With x2 (rs: the quad's residuals) a block's sum is doc/products.md §2's
 * over its four lanes, 128 * s_q + s_r: the quants' and the residuals'
 * chains, one each per group, meet the same weight registers, so both
 * passes are one sweep over the weights. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline void
rl_mmq4_whole(const rl_mmq4_wblk *g0, const rl_mmq4_xblk *xs, const rl_mmq4_rblk *rs, int x2,
              size_t nb, size_t rows, size_t r, size_t nr, size_t t0, size_t nt, double *yd,
              float *yf) {
    enum { G = RL_MMQ4_GROUPS };
    __m512d acc[G][2];
    _Pragma("GCC unroll 4") for (int g = 0; g < G; g++)
        acc[g][0] = acc[g][1] = _mm512_setzero_pd();
    for (size_t b = 0; b < nb; b++) {
        const rl_mmq4_xblk *xb = xs + b;
        const rl_mmq4_wblk *wb = g0 + b * RL_MMQ4_GROUPS; /* the set's groups, side by side */
        /* two chains per group: :q8's even and odd dwords, each half as
         * long; Q8x2's quants and residuals */
        __m512i sa[G][2];
        const __m512i call = _mm512_load_si512(xb->call);
        const __m512i c1 = x2 ? _mm512_load_si512(rs[b].call) : _mm512_setzero_si512();
        _Pragma("GCC unroll 4") for (int g = 0; g < G; g++) {
            sa[g][0] = call;
            sa[g][1] = c1;
        }
        const __m512i z0 = _mm512_load_si512(xb->q[0]), z1 = _mm512_load_si512(xb->q[1]);
        __m512i r0 = z0, r1 = z1;
        if (x2)
            r0 = _mm512_load_si512(rs[b].q[0]), r1 = _mm512_load_si512(rs[b].q[1]);
        _Pragma("GCC unroll 8") for (int h = 0; h < 8; h++) {
            const __m512i x = rl_mmq4_x(z0, z1, h);
            const __m512i xr = x2 ? rl_mmq4_x(r0, r1, h) : x;
            _Pragma("GCC unroll 4") for (int g = 0; g < G; g++) {
                const __m512i w = _mm512_broadcast_i32x4(
                    _mm_loadu_si128((const __m128i *)(const void *)wb[g].w[h]));
                if (x2) {
                    sa[g][0] = _mm512_dpbusd_epi32(sa[g][0], w, x);
                    sa[g][1] = _mm512_dpbusd_epi32(sa[g][1], w, xr);
                } else {
                    sa[g][h % 2] = _mm512_dpbusd_epi32(sa[g][h % 2], w, x);
                }
            }
        }
        const __m512d dx0 = _mm512_load_pd(xb->dx[0]), dx1 = _mm512_load_pd(xb->dx[1]);
        _Pragma("GCC unroll 4") for (int g = 0; g < G; g++) {
            const __m512i s = x2 ? _mm512_add_epi32(_mm512_slli_epi32(sa[g][0], 7), sa[g][1])
                                 : _mm512_add_epi32(sa[g][0], sa[g][1]);
            const __m512d dw = _mm512_broadcast_f64x4(_mm256_loadu_pd(wb[g].dw));
            acc[g][0] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(s)),
                                        _mm512_mul_pd(dw, dx0), acc[g][0]);
            acc[g][1] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(s, 1)),
                                        _mm512_mul_pd(dw, dx1), acc[g][1]);
        }
    }
    _Pragma("GCC unroll 4") for (int g = 0; g < G; g++) {
        const size_t rg = r + 4 * (size_t)g;
        if (rg >= r + nr)
            break;
        const size_t ng = r + nr - rg < 4 ? r + nr - rg : 4;
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
            rl_mmq4_store(acc[g][h], h, rows, rg, ng, t0, nt, yd, yf);
    }
}

/* Whether the sums of a set of RL_MMQ4_GROUPS groups (whi, wlo: its
 * exponent tables) with a quad (xmag, xmax: its bounds) are exact, as
 * above: at once when the largest of each allows it, else block by block. */
static int rl_mmq4_exact(const int8_t *whi, const int32_t *wlo, const uint64_t *xmag,
                         uint64_t xmax, size_t nb) {
    const uint64_t limit = (uint64_t)1 << 24;
    if (wlo[0] == RL_MMQ4_NONFINITE || xmax == UINT64_MAX)
        return 0;
    if (wlo[1] == RL_MMQ4_NONE || xmax == 0)
        return 1; /* every term is zero */
    const int32_t spread = wlo[1] - wlo[0]; /* 0 .. 29 */
    if (spread <= 24 && xmax <= (limit >> spread) / nb)
        return 1;
    uint64_t sum = 0;
    for (size_t b = 0; b < nb; b++) {
        if (whi[b] == RL_MMQ4_NONE || !xmag[b])
            continue; /* no term of the block is nonzero */
        const int e = whi[b] - wlo[0];
        if (e > 24 || xmag[b] > limit >> e || (sum += xmag[b] << e) > limit)
            return 0;
    }
    return 1;
}

__attribute__((target(RL_TARGET_VNNI))) void
rl_mm_q8_tile4_vnni(const rl_block_q8_0 *w, size_t nb, size_t rows, const void *xsplit, int x2,
                    size_t n, size_t r0, size_t r1, double *yd, float *yf, void *scratch) {
    rl_mmq4_wblk *wk = rl_mmq4_align(scratch);
    const rl_mmq4_xblk *xs = rl_mmq4_align(xsplit);
    const size_t nq = (n + 3) / 4;
    const rl_mmq4_cblk *cs = (const rl_mmq4_cblk *)(const void *)(xs + nq * nb);
    const rl_mmq4_rblk *rs = (const rl_mmq4_rblk *)(const void *)(cs + nq * nb);
    const uint64_t *xmag =
        (const uint64_t *)(x2 ? (const void *)(rs + nq * nb) : (const void *)(cs + nq * nb));
    const uint64_t *xmax = xmag + nq * nb;
    const size_t ng = rl_mmq4_arrange(w, nb, r0, r1, wk);
    const int32_t *wlo = (const int32_t *)(const void *)(wk + ng * nb);
    const int8_t *whi = (const int8_t *)(wlo + ng);
    size_t counts[2] = {0, 0};
    for (size_t t0 = 0; t0 < n; t0 += 4) {
        const size_t nt = n - t0 < 4 ? n - t0 : 4;
        const rl_mmq4_xblk *xq = xs + t0 / 4 * nb;
        for (size_t g = 0; g < ng; g += RL_MMQ4_GROUPS) {
            const size_t r = r0 + 4 * g;
            if (r >= r1)
                break;
            const size_t nr = r1 - r < 4 * RL_MMQ4_GROUPS ? r1 - r : 4 * RL_MMQ4_GROUPS;
            const size_t set = g / RL_MMQ4_GROUPS;
            if (rl_mmq4_exact(whi + set * nb, wlo + 2 * set, xmag + t0 / 4 * nb, xmax[t0 / 4],
                              nb)) {
                if (x2)
                    rl_mmq4_whole(wk + set_base(g, nb), xq, rs + t0 / 4 * nb, 1, nb, rows, r,
                                  nr, t0, nt, yd, yf);
                else
                    rl_mmq4_whole(wk + set_base(g, nb), xq, NULL, 0, nb, rows, r, nr, t0, nt,
                                  yd, yf);
                counts[0]++;
                continue;
            }
            counts[1]++;
            for (size_t k = 0; k < RL_MMQ4_GROUPS; k += 2) {
                const size_t rk = r + 4 * k;
                if (rk >= r1)
                    break;
                const rl_mmq4_wblk *ga = wk + set_base(g + k, nb);
                const rl_mmq4_wblk *gb = wk + set_base(g + k + 1, nb);
                const size_t nk = r1 - rk < 8 ? r1 - rk : 8;
                if (x2)
                    rl_mmq4_lanes(ga, gb, xq, cs + t0 / 4 * nb, rs + t0 / 4 * nb, 1, nb, rows,
                                  rk, nk, t0, nt, yd, yf);
                else
                    rl_mmq4_lanes(ga, gb, xq, cs + t0 / 4 * nb, NULL, 0, nb, rows, rk, nk, t0,
                                  nt, yd, yf);
            }
        }
    }
    __atomic_fetch_add(&rl_mmq4_count_[2 * x2], counts[0], __ATOMIC_RELAXED);
    __atomic_fetch_add(&rl_mmq4_count_[2 * x2 + 1], counts[1], __ATOMIC_RELAXED);
}

/* ---- the product: chunks of rows or of tokens over the pool ------------- */

/* Rows per arranged tile: four sets of RL_MMQ4_GROUPS groups (about 60 KB
 * for 768 columns), each set's blocks read from L2 while a quad's split
 * activations stay in L1. */
#define RL_MMQ4_TILE 64

/* From this many tokens per thread each thread takes a run of tokens, not
 * of rows: it splits its own tokens and reads them from its own cache,
 * where a split shared by all would be fetched from the core that wrote it
 * (the whole split is some 2 KB a token), at the price of arranging every
 * weight row in each thread (some 0.1 us a row of 768 columns). */
#define RL_MMQ4_TOKENS_PER_THREAD 32

typedef struct {
    const rl_block_q8_0 *w, *xq;
    const int8_t *xr; /* Q8x2's residual quants, else NULL */
    size_t rows, nb, n;
    double *yd;
    float *yf;
    int by_tokens;      /* chunks of tokens, else of rows */
    char *split;        /* by rows: the one split; by tokens: one per chunk */
    size_t split_bytes; /* per chunk */
    char *arranged;     /* one per chunk */
    size_t arranged_bytes;
} rl_mmq4_job;

static void rl_mmq4_run(void *ctx, int ith, int nth) {
    const rl_mmq4_job *j = ctx;
    char *wk = j->arranged + (size_t)ith * j->arranged_bytes;
    if (!j->by_tokens) {
        size_t r0, r1;
        rl_pool_chunk(j->rows, ith, nth, 4, &r0, &r1);
        for (size_t r = r0; r < r1; r += RL_MMQ4_TILE)
            rl_mm_q8_tile4_vnni(j->w, j->nb, j->rows, j->split, j->xr != NULL, j->n, r,
                                r1 - r < RL_MMQ4_TILE ? r1 : r + RL_MMQ4_TILE, j->yd, j->yf, wk);
        return;
    }
    size_t t0, t1;
    rl_pool_chunk(j->n, ith, nth, 4, &t0, &t1);
    if (t0 >= t1)
        return;
    char *xs = j->split + (size_t)ith * j->split_bytes;
    rl_mm_q8_split4(j->xq + t0 * j->nb, j->xr ? j->xr + t0 * j->nb * 32 : NULL, t1 - t0, j->nb,
                    xs);
    double *yd = j->yd ? j->yd + t0 * j->rows : NULL;
    float *yf = j->yf ? j->yf + t0 * j->rows : NULL;
    for (size_t r = 0; r < j->rows; r += RL_MMQ4_TILE)
        rl_mm_q8_tile4_vnni(j->w, j->nb, j->rows, xs, j->xr != NULL, t1 - t0, r,
                            j->rows - r < RL_MMQ4_TILE ? j->rows : r + RL_MMQ4_TILE, yd, yf, wk);
}

int rl_mm_q8_pairs(const rl_block_q8_0 *w, size_t rows, size_t nb, const rl_block_q8_0 *xq,
                   const int8_t *xr, size_t n, double *yd, float *yf, int nth) {
    rl_mmq4_job j = {.w = w, .xq = xq, .xr = xr, .rows = rows, .nb = nb, .n = n, .yd = yd,
                     .yf = yf};
    nth = nth < 1 ? 1 : nth;
    j.by_tokens = nth > 1 && n >= (size_t)nth * RL_MMQ4_TOKENS_PER_THREAD;
    const size_t chunks = j.by_tokens ? (size_t)nth
                                      : (size_t)rl_pool_split_chunks(nth, (rows + 3) / 4);
    /* a chunk of tokens holds at most this many (rl_pool_chunk's share) */
    const size_t most = j.by_tokens ? ((n + chunks - 1) / chunks + 3) / 4 * 4 : n;
    j.split_bytes = (rl_mm_q8_split4_bytes(most, nb, xr != NULL) + 63) / 64 * 64;
    j.arranged_bytes = (rl_mm_q8_arranged4_bytes(RL_MMQ4_TILE, nb) + 63) / 64 * 64;
    const size_t splits = j.by_tokens ? chunks : 1;
    if (j.split_bytes > SIZE_MAX / 2 / splits || j.arranged_bytes > SIZE_MAX / 2 / chunks)
        return 0;
    char *mem = malloc(splits * j.split_bytes + chunks * j.arranged_bytes);
    if (!mem)
        return 0;
    j.split = mem, j.arranged = mem + splits * j.split_bytes;
    if (!j.by_tokens)
        rl_mm_q8_split4(xq, xr, n, nb, j.split);
    rl_pool_run_split((int)chunks, nth, rl_mmq4_run, &j);
    free(mem);
    return 1;
}
