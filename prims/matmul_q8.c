/* matmul_q8.c - the token-tiled Q8_0 kernel of the AVX-512 VNNI path (see
 * matmul_q8.h): a vector slot per weight row, sixteen rows a vector.
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
 * exact integer.  Q8x2 (§2) takes one int16 a column instead,
 * a = 128 * qx + r (|a| <= 16511), and vpdpwssd on the weights widened to
 * int16: Σ qw * a is 128 * s_q + s_r, the lane sum itself, in one pass
 * and with no offset.  A vector slot is a weight row, slot i for row i of a set
 * of sixteen, so that one vector of scale products dw * dx and two
 * conversions to double serve sixteen sums of one token:
 *   - weights (rl_mmq16_wblk, arranged per call, per set of 16 rows and
 *     block): dword h of the 16 rows, + 128, a vector for each h, loaded
 *     once per block and used by every token of a tile; and the rows'
 *     scales in double.  Q8x2's (rl_mmq16_wblk2): two vectors of int16
 *     pairs for each h, its bytes 0 and 2, then 1 and 3;
 *   - activations: the quants where they are (the Q8_0 blocks), dword h
 *     of a token broadcast to every slot by the product's own memory
 *     operand; Q8x2's int16 pairs in the same order as its weights', made
 *     once per call (rl_mmq16_xrow); per token and block (rl_mmq16_xblk,
 *     gathered once per call) -128 * the block's sum of quants and each
 *     lane's (:q8), and the scale (with Q8x2's 2^-7, exact).
 * A tile is a set of 16 rows and four tokens; its sums are in 4 vectors,
 * one a token, each vector of weights meeting the four tokens in turn.
 *
 * Two ways, the same bits:
 *   - lanes (rl_mmq16_lanes): doc/products.md §1 as written, a double accumulator per
 *     lane, two tokens at a time;
 *   - whole blocks (rl_mmq16_whole), when every sum is exact.  A term of
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
    int32_t w[8][16];
    double dw[16];
} rl_mmq16_wblk;

/* Q8x2's: dword k of the 16 rows is a pair of int16 weights, columns
 * 4(k/2) + k%2 and that + 2 (rl_mmq16_widen), meeting the same pair of a
 * token's int16 activations (rl_mmq16_xrow) */
typedef struct {
    int32_t w[16][16];
    double dw[16];
} rl_mmq16_wblk2;

typedef struct {
    double dx; /* the token block's scale (Q8x2's times 2^-7, exact) */
    int32_t call;  /* -128 x the block's sum of quants (:q8; Q8x2 0) */
    int32_t c[4];  /* the same per lane */
} rl_mmq16_xblk;

/* exponent tables: no nonzero scale at a block; a set's lowest exponent
 * when it has no nonzero scale, and when one is not finite */
enum { RL_MMQ16_NONE = -128, RL_MMQ16_EMPTY = 1000, RL_MMQ16_NONFINITE = -1000, RL_MMQ16_ZERO = 999 };

/* tiles computed each way since the start, :q8's then Q8x2's
 * (rl_mm_q8_tiles4, rl_mm_q8x2_tiles4) */
static size_t rl_mmq16_count_[4];

void rl_mm_q8_tiles4(size_t *whole, size_t *lanes) {
    *whole = __atomic_load_n(&rl_mmq16_count_[0], __ATOMIC_RELAXED);
    *lanes = __atomic_load_n(&rl_mmq16_count_[1], __ATOMIC_RELAXED);
}

void rl_mm_q8x2_tiles4(size_t *whole, size_t *lanes) {
    *whole = __atomic_load_n(&rl_mmq16_count_[2], __ATOMIC_RELAXED);
    *lanes = __atomic_load_n(&rl_mmq16_count_[3], __ATOMIC_RELAXED);
}

size_t rl_mm_q8_split4_bytes(size_t n, size_t nb, int x2) {
    const size_t nq = (n + 3) / 4;
    return n * nb * sizeof(rl_mmq16_xblk) + nq * nb * sizeof(uint64_t) +
           nq * (sizeof(uint64_t) + sizeof(int32_t)) + 64 + (x2 ? n * nb * 64 + 64 : 0);
}

/* -128 times the four lane sums of a block's quants */
__attribute__((target(RL_TARGET_AVX2))) static void
rl_mmq16_lane_sums(const int8_t *qs, int32_t c[4]) {
    /* pairs, quads, then the lanes' halves */
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)qs);
    const __m256i q4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v),
                                         _mm256_set1_epi16(-128));
    const __m256i l8 = _mm256_hadd_epi32(q4, q4); /* l0 l1 l0 l1 | l2 l3 l2 l3 */
    _mm_storeu_si128((__m128i *)(void *)c,
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
                         l8, _mm256_setr_epi32(0, 1, 4, 5, 0, 1, 4, 5))));
}

/* (for either kind of product: Q8x2's blocks are the larger) */
size_t rl_mm_q8_arranged4_bytes(size_t rows, size_t nb) {
    const size_t ns = (rows + 15) / 16;
    return ns * nb * sizeof(rl_mmq16_wblk2) + 2 * ns * sizeof(int32_t) + ns * nb + 64;
}

static void *rl_mmq16_align(const void *p) {
    return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* Q8x2's int16 activations in a split of n tokens (after the bounds): 16
 * dwords a token and block (rl_mmq16_xrow) */
static int32_t *rl_mmq16_xrows(const rl_mmq16_xblk *xs, size_t n, size_t nb) {
    const size_t nq = (n + 3) / 4;
    const uint64_t *xmax = (const uint64_t *)(const void *)(xs + n * nb) + nq * nb;
    return rl_mmq16_align((const int32_t *)(const void *)(xmax + nq) + nq);
}

/* The 32 bytes at q as int16, the even bytes of each dword in *e, the odd
 * ones in *o: dword h of *e is bytes 4h and 4h + 2, of *o 4h + 1 and 4h + 3. */
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline void
rl_mmq16_widen(__m256i q, __m256i *e, __m256i *o) {
    *e = _mm256_srai_epi16(_mm256_slli_epi16(q, 8), 8);
    *o = _mm256_srai_epi16(q, 8);
}

/* doc/products.md §2's activation of a token's block as one int16 a
 * column, a = 128 * qx + r (|a| <= 128 * 128 + 127, so Σ qw * a is
 * 128 * s_q + s_r exactly), in the order of rl_mmq16_wblk2's dwords: dword
 * 2h the pair (4h, 4h + 2), dword 2h + 1 the pair (4h + 1, 4h + 3). */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_mmq16_xrow(const int8_t *qs, const int8_t *r, int32_t out[16]) {
    __m256i qe, qo, re, ro;
    rl_mmq16_widen(_mm256_loadu_si256((const __m256i *)(const void *)qs), &qe, &qo);
    rl_mmq16_widen(_mm256_loadu_si256((const __m256i *)(const void *)r), &re, &ro);
    const __m256i ae = _mm256_add_epi16(_mm256_slli_epi16(qe, 7), re);
    const __m256i ao = _mm256_add_epi16(_mm256_slli_epi16(qo, 7), ro);
    const __m512i idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    _mm512_store_si512(out, _mm512_permutex2var_epi32(_mm512_castsi256_si512(ae), idx,
                                                      _mm512_castsi256_si512(ao)));
}

/* The exponent of an f16 scale's last mantissa bit (-24 .. 5), or
 * RL_MMQ16_ZERO for a zero scale, RL_MMQ16_NONFINITE for infinity and NaN. */
static inline int rl_mmq16_exp(uint16_t h) {
    const int e = (h >> 10) & 31;
    if (!(h & 0x7fff))
        return RL_MMQ16_ZERO;
    return e == 31 ? RL_MMQ16_NONFINITE : (e ? e : 1) - 25;
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

__attribute__((target(RL_TARGET_VNNI))) void
rl_mm_q8_split4(const rl_block_q8_0 *xq, const int8_t *xr, size_t n, size_t nb, void *out) {
    rl_mmq16_xblk *xs = rl_mmq16_align(out);
    const size_t nq = (n + 3) / 4;
    /* per quad and block the magnitude bound, per quad its largest and the
     * lowest exponent (rl_mmq16_exact) */
    uint64_t *xmag = (uint64_t *)(void *)(xs + n * nb);
    uint64_t *xmax = xmag + nq * nb;
    int32_t *xlo = (int32_t *)(void *)(xmax + nq);
    int32_t *a16 = xr ? rl_mmq16_xrows(xs, n, nb) : NULL;
    for (size_t t = 0; t < n; t++)
        for (size_t b = 0; b < nb; b++) {
            rl_mmq16_xblk *o = xs + t * nb + b;
            const rl_block_q8_0 *blk = xq + t * nb + b;
            if (xr) { /* Q8x2: signed int16 activations, no offset sums */
                rl_mmq16_xrow(blk->qs, xr + (t * nb + b) * 32, a16 + (t * nb + b) * 16);
                memset(o->c, 0, sizeof o->c);
                o->call = 0;
            } else {
                rl_mmq16_lane_sums(blk->qs, o->c);
                o->call = o->c[0] + o->c[1] + o->c[2] + o->c[3];
            }
            o->dx = (double)rl_gguf_f16_to_f32(blk->d) * (xr ? 0x1p-7 : 1.0);
        }
    for (size_t q = 0; q < nq; q++) {
        xlo[q] = RL_MMQ16_EMPTY;
        for (size_t k = 0; k < 4 && 4 * q + k < n; k++)
            for (size_t b = 0; b < nb; b++) {
                const int e = rl_mmq16_exp(xq[(4 * q + k) * nb + b].d);
                if (e != RL_MMQ16_ZERO && e < xlo[q])
                    xlo[q] = e; /* RL_MMQ16_NONFINITE (below any) for infinity, NaN */
            }
        /* the bound: the largest sum of |quants| times 2^(exponent - lowest);
         * a quad with a scale not finite never takes whole blocks (the
         * product's callers quantize only finite activations) */
        xmax[q] = 0;
        if (xlo[q] == RL_MMQ16_NONFINITE) {
            memset(xmag + q * nb, 0, nb * sizeof *xmag);
            xmax[q] = UINT64_MAX;
            continue;
        }
        for (size_t b = 0; b < nb; b++) {
            uint64_t m = 0;
            for (size_t k = 0; k < 4 && 4 * q + k < n; k++) {
                const rl_block_q8_0 *blk = xq + (4 * q + k) * nb + b;
                const int e = rl_mmq16_exp(blk->d);
                if (e == RL_MMQ16_ZERO)
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


/* Rows [r0, r1) into sets of 16 (a short set repeats its last row), each
 * set's blocks in order (rl_mmq16_wblk, with x2 rl_mmq16_wblk2); after them
 * the sets' exponent tables.  Returns the set count. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline size_t
rl_mmq16_arrange_as(const rl_block_q8_0 *w, size_t nb, size_t r0, size_t r1, void *out,
                    int x2) {
    const size_t bsize = x2 ? sizeof(rl_mmq16_wblk2) : sizeof(rl_mmq16_wblk);
    /* dword h of row i to slot 4h + i: rows 0, 1 in w01, rows 2, 3 in w23 */
    const __m512i lo = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(4));
    const __m512i c80 = _mm512_set1_epi8((char)(x2 ? 0 : 0x80));
    const size_t ns = (r1 - r0 + 15) / 16;
    int32_t *wlo = (int32_t *)(void *)((char *)out + ns * nb * bsize);
    int8_t *whi = (int8_t *)(wlo + 2 * ns);
    for (size_t set = 0; set < ns; set++) {
        const rl_block_q8_0 *wr[4][4];
        for (size_t g = 0; g < 4; g++) {
            const size_t r = r0 + 16 * set + 4 * g;
            if (r < r1)
                rl_mm_q8_group(w, nb, r, r1, wr[g]);
            else
                for (size_t i = 0; i < 4; i++)
                    wr[g][i] = w + (r1 - 1) * nb;
        }
        /* exponents as rl_mmq16_exp finds them, four rows at once, from the
         * scales widened to f32 (exact): a normal f16 of exponent e is an
         * f32 of exponent e + 112, a subnormal one at least 2^-24 */
        __m128i elo = _mm_set1_epi32(RL_MMQ16_EMPTY), etop = _mm_set1_epi32(RL_MMQ16_NONE);
        __mmask8 bad = 0;
        for (size_t b = 0; b < nb; b++) {
            char *ob = (char *)out + (set * nb + b) * bsize;
            int32_t(*ow)[16] = x2 ? ((rl_mmq16_wblk2 *)(void *)ob)->w : ((rl_mmq16_wblk *)(void *)ob)->w;
            double *odw = x2 ? ((rl_mmq16_wblk2 *)(void *)ob)->dw : ((rl_mmq16_wblk *)(void *)ob)->dw;
            __m512i v[2][4]; /* dwords 0..3, 4..7 of group g: lane h, rows in order */
            __m128i eb = _mm_set1_epi32(RL_MMQ16_NONE);
            for (int g = 0; g < 4; g++) {
                __m512i w01, w23;
                const __m128 d4 = rl_mm_q8_block4(wr[g], b, &w01, &w23);
                v[0][g] = _mm512_xor_si512(_mm512_permutex2var_epi32(w01, lo, w23), c80);
                v[1][g] = _mm512_xor_si512(_mm512_permutex2var_epi32(w01, hi, w23), c80);
                _mm256_store_pd(odw + 4 * g, _mm256_cvtps_pd(d4));
                const __m128i fe = _mm_and_si128(_mm_srli_epi32(_mm_castps_si128(d4), 23),
                                                 _mm_set1_epi32(0xff));
                const __mmask8 nz = _mm_cmpneq_epi32_mask(fe, _mm_setzero_si128()) & 0xf;
                bad |= _mm_cmpeq_epi32_mask(fe, _mm_set1_epi32(0xff)) & 0xf;
                const __m128i e = _mm_max_epi32(_mm_sub_epi32(fe, _mm_set1_epi32(137)),
                                                _mm_set1_epi32(-24));
                elo = _mm_mask_min_epi32(elo, nz, elo, e);
                eb = _mm_max_epi32(eb, _mm_mask_mov_epi32(_mm_set1_epi32(RL_MMQ16_NONE), nz, e));
            }
            /* lane h of the four groups' vectors, side by side: vector h */
            for (int k = 0; k < 2; k++) {
                const __m512i t0 = _mm512_shuffle_i32x4(v[k][0], v[k][1], _MM_SHUFFLE(1, 0, 1, 0));
                const __m512i t1 = _mm512_shuffle_i32x4(v[k][2], v[k][3], _MM_SHUFFLE(1, 0, 1, 0));
                const __m512i t2 = _mm512_shuffle_i32x4(v[k][0], v[k][1], _MM_SHUFFLE(3, 2, 3, 2));
                const __m512i t3 = _mm512_shuffle_i32x4(v[k][2], v[k][3], _MM_SHUFFLE(3, 2, 3, 2));
                const __m512i h4[4] = {_mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(3, 1, 3, 1)),
                                       _mm512_shuffle_i32x4(t2, t3, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(t2, t3, _MM_SHUFFLE(3, 1, 3, 1))};
                for (int i = 0; i < 4; i++) {
                    if (!x2) {
                        _mm512_store_si512(ow[4 * k + i], h4[i]);
                        continue;
                    }
                    /* dword h of the rows as int16, its bytes 0 and 2 in
                     * dword 2h, 1 and 3 in 2h + 1 (rl_mmq16_widen) */
                    const int h = 4 * k + i;
                    _mm512_store_si512(ow[2 * h], _mm512_srai_epi16(_mm512_slli_epi16(h4[i], 8), 8));
                    _mm512_store_si512(ow[2 * h + 1], _mm512_srai_epi16(h4[i], 8));
                }
            }
            etop = _mm_max_epi32(etop, eb);
            eb = _mm_max_epi32(eb, _mm_shuffle_epi32(eb, 0x4e));
            eb = _mm_max_epi32(eb, _mm_shuffle_epi32(eb, 0xb1));
            whi[set * nb + b] = (int8_t)_mm_cvtsi128_si32(eb);
        }
        elo = _mm_min_epi32(elo, _mm_shuffle_epi32(elo, 0x4e));
        elo = _mm_min_epi32(elo, _mm_shuffle_epi32(elo, 0xb1));
        etop = _mm_max_epi32(etop, _mm_shuffle_epi32(etop, 0x4e));
        etop = _mm_max_epi32(etop, _mm_shuffle_epi32(etop, 0xb1));
        wlo[2 * set] = bad ? RL_MMQ16_NONFINITE : _mm_cvtsi128_si32(elo);
        wlo[2 * set + 1] = _mm_cvtsi128_si32(etop);
    }
    return ns;
}

__attribute__((target(RL_TARGET_VNNI))) static size_t
rl_mmq16_arrange(const rl_block_q8_0 *w, size_t nb, size_t r0, size_t r1, void *out, int x2) {
    return x2 ? rl_mmq16_arrange_as(w, nb, r0, r1, out, 1)
              : rl_mmq16_arrange_as(w, nb, r0, r1, out, 0);
}

/* dword h of a token's 32 quants, in every slot */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline __m512i
rl_mmq16_x(const int8_t *q, int h) {
    int32_t v;
    memcpy(&v, q + 4 * h, sizeof v);
    return _mm512_set1_epi32(v);
}

/* acc + the products of w's unsigned bytes with dword h of a token's
 * quants in every slot (_mm512_dpbusd_epi32 with rl_mmq16_x): the dword
 * read by the instruction's own broadcast, which the compiler does not
 * fold by itself (one instruction where it would issue two). */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline __m512i
rl_mmq16_dp(__m512i acc, __m512i w, const int8_t *q, int h) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)(const void *)(q + 4 * h)));
    return acc;
}

/* The same for Q8x2: acc + the products of w's int16 pairs with dword k of
 * a token's int16 activations (rl_mmq16_xrow) in every slot. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline __m512i
rl_mmq16_dpw(__m512i acc, __m512i w, const int32_t *a, int k) {
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(a[k]));
    return acc;
}

/* The 16 rows' dw * dx (rows 0..7 in *lo, 8..15 in *hi), exact. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline void
rl_mmq16_scales(const double *dw, double dx, __m512d *lo, __m512d *hi) {
    const __m512d d = _mm512_set1_pd(dx);
    *lo = _mm512_mul_pd(_mm512_load_pd(dw), d);
    *hi = _mm512_mul_pd(_mm512_load_pd(dw + 8), d);
}

/* Store the 16 rows' doubles (lo: rows 0..7, hi: 8..15) of one token at
 * y + at, the nr rows that exist. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline void
rl_mmq16_store(__m512d lo, __m512d hi, size_t nr, size_t at, double *yd, float *yf) {
    const unsigned m = (1u << nr) - 1u;
    if (yd) {
        _mm512_mask_storeu_pd(yd + at, (__mmask8)m, lo);
        _mm512_mask_storeu_pd(yd + at + 8, (__mmask8)(m >> 8), hi);
    }
    if (yf) {
        _mm256_mask_storeu_ps(yf + at, (__mmask8)m, _mm512_cvtpd_ps(lo));
        _mm256_mask_storeu_ps(yf + at + 8, (__mmask8)(m >> 8), _mm512_cvtpd_ps(hi));
    }
}

/* The T tokens' rows of a tile from t0 (nt of them exist: a short tile
 * repeats its last token) in the call's activations: quants xk, block
 * sums sk and, with x2, the int16 columns ak. */
__attribute__((always_inline)) static inline void
rl_mmq16_tokens(size_t T, size_t t0, size_t nt, size_t nb, int x2, const rl_block_q8_0 *xq,
                const int32_t *a16, const rl_mmq16_xblk *xs, const rl_block_q8_0 **xk,
                const int32_t **ak, const rl_mmq16_xblk **sk) {
    for (size_t k = 0; k < T; k++) {
        const size_t t = t0 + (k < nt ? k : nt - 1);
        xk[k] = xq + t * nb, sk[k] = xs + t * nb, ak[k] = x2 ? a16 + t * nb * 16 : NULL;
    }
}

/* Lanes apart: a set (ws, nb blocks) against the nt tokens (1 or 2) from
 * t0 (xq, xs, with x2 a16: the call's), each vector of weights loaded once
 * for both; rows r.., nr of them existing. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline void
rl_mmq16_lanes(const void *ws, const rl_block_q8_0 *xq, const int32_t *a16,
               const rl_mmq16_xblk *xs, int x2, size_t nb, size_t rows, size_t r, size_t nr,
               size_t t0, size_t nt, double *yd, float *yf) {
    enum { T = 2 };
    const rl_block_q8_0 *xk[T];
    const int32_t *ak[T];
    const rl_mmq16_xblk *sk[T];
    __m512d acc[T][4][2];
    rl_mmq16_tokens(T, t0, nt, nb, x2, xq, a16, xs, xk, ak, sk); /* one token: the same twice */
    _Pragma("GCC unroll 2") for (size_t k = 0; k < T; k++)
        _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++)
            acc[k][l][0] = acc[k][l][1] = _mm512_setzero_pd();
    for (size_t b = 0; b < nb; b++) {
        const rl_mmq16_wblk *wb = (const rl_mmq16_wblk *)ws + b;
        const rl_mmq16_wblk2 *wb2 = (const rl_mmq16_wblk2 *)ws + b;
        const double *dw = x2 ? wb2->dw : wb->dw;
        __m512i s[T][4];
        _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) {
            if (x2) { /* doc/products.md §2: Σ qw * (128 * qx + r) */
                _Pragma("GCC unroll 2") for (size_t k = 0; k < T; k++)
                    s[k][l] = _mm512_setzero_si512();
                _Pragma("GCC unroll 4") for (int h = 4 * l; h < 4 * l + 4; h++) {
                    const __m512i w = _mm512_load_si512(wb2->w[h]);
                    _Pragma("GCC unroll 2") for (size_t k = 0; k < T; k++)
                        s[k][l] = rl_mmq16_dpw(s[k][l], w, ak[k] + 16 * b, h);
                }
            } else {
                _Pragma("GCC unroll 2") for (size_t k = 0; k < T; k++)
                    s[k][l] = _mm512_set1_epi32(sk[k][b].c[l]);
                _Pragma("GCC unroll 2") for (int h = 2 * l; h < 2 * l + 2; h++) {
                    const __m512i w = _mm512_load_si512(wb->w[h]);
                    _Pragma("GCC unroll 2") for (size_t k = 0; k < T; k++)
                        s[k][l] = rl_mmq16_dp(s[k][l], w, xk[k][b].qs, h);
                }
            }
        }
        _Pragma("GCC unroll 2") for (size_t k = 0; k < T; k++) {
            __m512d sc0, sc1;
            rl_mmq16_scales(dw, sk[k][b].dx, &sc0, &sc1);
            _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) {
                acc[k][l][0] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(s[k][l])),
                                               sc0, acc[k][l][0]);
                acc[k][l][1] = _mm512_fmadd_pd(
                    _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(s[k][l], 1)), sc1, acc[k][l][1]);
            }
        }
    }
    /* y = (l0 + l1) + (l2 + l3) */
    _Pragma("GCC unroll 2") for (size_t k = 0; k < T; k++)
        if (k < nt)
            rl_mmq16_store(_mm512_add_pd(_mm512_add_pd(acc[k][0][0], acc[k][1][0]),
                                         _mm512_add_pd(acc[k][2][0], acc[k][3][0])),
                           _mm512_add_pd(_mm512_add_pd(acc[k][0][1], acc[k][1][1]),
                                         _mm512_add_pd(acc[k][2][1], acc[k][3][1])),
                           nr, (t0 + k) * rows + r, yd, yf);
}

/* Whole blocks (the sums exact, see above): a set (ws, nb blocks) against
 * the nt tokens from t0 (xq, xs, a16: the call's); rows r.., nr existing.
 * With x2 a block's sum is doc/products.md §2's over its four lanes,
 * Σ qw * (128 * qx + r), sixteen int16 pair products a slot. */
__attribute__((target(RL_TARGET_VNNI), always_inline)) static inline void
rl_mmq16_whole(const void *ws, const rl_block_q8_0 *xq, const int32_t *a16,
               const rl_mmq16_xblk *xs, int x2, size_t nb, size_t rows, size_t r, size_t nr,
               size_t t0, size_t nt, double *yd, float *yf) {
    enum { T = 4 };
    const rl_block_q8_0 *xk[T];
    const int32_t *ak[T];
    const rl_mmq16_xblk *sk[T];
    __m512d acc[T][2];
    rl_mmq16_tokens(T, t0, nt, nb, x2, xq, a16, xs, xk, ak, sk);
    _Pragma("GCC unroll 4") for (size_t k = 0; k < T; k++)
        acc[k][0] = acc[k][1] = _mm512_setzero_pd();
    for (size_t b = 0; b < nb; b++) {
        const rl_mmq16_wblk *wb = (const rl_mmq16_wblk *)ws + b;
        const rl_mmq16_wblk2 *wb2 = (const rl_mmq16_wblk2 *)ws + b;
        const double *dw = x2 ? wb2->dw : wb->dw;
        /* two chains a token, the even and the odd dwords, the tokens' chains
         * side by side (each vector of weights meets the four tokens in turn):
         * eight chains in step, not four tokens one after the other */
        __m512i a[T], c[T];
        _Pragma("GCC unroll 4") for (size_t k = 0; k < T; k++) {
            a[k] = x2 ? _mm512_setzero_si512() : _mm512_set1_epi32(sk[k][b].call);
            c[k] = _mm512_setzero_si512();
        }
        if (x2) {
            _Pragma("GCC unroll 8") for (int h = 0; h < 8; h++) {
                const __m512i we = _mm512_load_si512(wb2->w[2 * h]);
                const __m512i wo = _mm512_load_si512(wb2->w[2 * h + 1]);
                _Pragma("GCC unroll 4") for (size_t k = 0; k < T; k++) {
                    a[k] = rl_mmq16_dpw(a[k], we, ak[k] + 16 * b, 2 * h);
                    c[k] = rl_mmq16_dpw(c[k], wo, ak[k] + 16 * b, 2 * h + 1);
                }
            }
        } else {
            __m512i wv[8];
            _Pragma("GCC unroll 8") for (int h = 0; h < 8; h++)
                wv[h] = _mm512_load_si512(wb->w[h]);
            _Pragma("GCC unroll 4") for (size_t k = 0; k < T; k++)
                _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) {
                    a[k] = rl_mmq16_dp(a[k], wv[2 * h], xk[k][b].qs, 2 * h);
                    c[k] = rl_mmq16_dp(c[k], wv[2 * h + 1], xk[k][b].qs, 2 * h + 1);
                }
        }
        _Pragma("GCC unroll 4") for (size_t k = 0; k < T; k++) {
            const __m512i s = _mm512_add_epi32(a[k], c[k]);
            __m512d sc0, sc1;
            rl_mmq16_scales(dw, sk[k][b].dx, &sc0, &sc1);
            acc[k][0] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(s)), sc0,
                                        acc[k][0]);
            acc[k][1] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(s, 1)),
                                        sc1, acc[k][1]);
        }
    }
    _Pragma("GCC unroll 4") for (size_t k = 0; k < T; k++)
        if (k < nt)
            rl_mmq16_store(acc[k][0], acc[k][1], nr, (t0 + k) * rows + r, yd, yf);
}

/* Whether the sums of a set of 16 rows (whi, wlo: its
 * exponent tables) with a quad (xmag, xmax: its bounds) are exact, as
 * above: at once when the largest of each allows it, else block by block. */
static int rl_mmq16_exact(const int8_t *whi, const int32_t *wlo, const uint64_t *xmag,
                         uint64_t xmax, size_t nb) {
    const uint64_t limit = (uint64_t)1 << 24;
    if (wlo[0] == RL_MMQ16_NONFINITE || xmax == UINT64_MAX)
        return 0;
    if (wlo[1] == RL_MMQ16_NONE || xmax == 0)
        return 1; /* every term is zero */
    const int32_t spread = wlo[1] - wlo[0]; /* 0 .. 29 */
    if (spread <= 24 && xmax <= (limit >> spread) / nb)
        return 1;
    uint64_t sum = 0;
    for (size_t b = 0; b < nb; b++) {
        if (whi[b] == RL_MMQ16_NONE || !xmag[b])
            continue; /* no term of the block is nonzero */
        const int e = whi[b] - wlo[0];
        if (e > 24 || xmag[b] > limit >> e || (sum += xmag[b] << e) > limit)
            return 0;
    }
    return 1;
}

__attribute__((target(RL_TARGET_VNNI))) void
rl_mm_q8_tile4_vnni(const rl_block_q8_0 *w, size_t nb, size_t rows, const rl_block_q8_0 *xq,
                    const int8_t *xr, const void *xsplit, size_t n, size_t r0, size_t r1,
                    double *yd, float *yf, void *scratch) {
    char *wk = rl_mmq16_align(scratch);
    const rl_mmq16_xblk *xs = rl_mmq16_align(xsplit);
    const size_t nq = (n + 3) / 4;
    const uint64_t *xmag = (const uint64_t *)(const void *)(xs + n * nb);
    const uint64_t *xmax = xmag + nq * nb;
    const int x2 = xr != NULL;
    const int32_t *a16 = x2 ? rl_mmq16_xrows(xs, n, nb) : NULL;
    const size_t bsize = x2 ? sizeof(rl_mmq16_wblk2) : sizeof(rl_mmq16_wblk);
    const size_t ns = rl_mmq16_arrange(w, nb, r0, r1, wk, x2);
    const int32_t *wlo = (const int32_t *)(const void *)(wk + ns * nb * bsize);
    const int8_t *whi = (const int8_t *)(wlo + 2 * ns);
    size_t counts[2] = {0, 0};
    for (size_t t0 = 0; t0 < n; t0 += 4) {
        const size_t nt = n - t0 < 4 ? n - t0 : 4;
        for (size_t set = 0; set < ns; set++) {
            const size_t r = r0 + 16 * set;
            const size_t nr = r1 - r < 16 ? r1 - r : 16;
            const void *ws = wk + set * nb * bsize;
            if (rl_mmq16_exact(whi + set * nb, wlo + 2 * set, xmag + t0 / 4 * nb, xmax[t0 / 4],
                              nb)) {
                if (x2)
                    rl_mmq16_whole(ws, xq, a16, xs, 1, nb, rows, r, nr, t0, nt, yd, yf);
                else
                    rl_mmq16_whole(ws, xq, NULL, xs, 0, nb, rows, r, nr, t0, nt, yd, yf);
                counts[0]++;
                continue;
            }
            counts[1]++;
            for (size_t t = t0; t < t0 + nt; t += 2) {
                const size_t n2 = t0 + nt - t < 2 ? 1 : 2;
                if (x2)
                    rl_mmq16_lanes(ws, xq, a16, xs, 1, nb, rows, r, nr, t, n2, yd, yf);
                else
                    rl_mmq16_lanes(ws, xq, NULL, xs, 0, nb, rows, r, nr, t, n2, yd, yf);
            }
        }
    }
    __atomic_fetch_add(&rl_mmq16_count_[2 * x2], counts[0], __ATOMIC_RELAXED);
    __atomic_fetch_add(&rl_mmq16_count_[2 * x2 + 1], counts[1], __ATOMIC_RELAXED);
}

/* ---- the product: chunks of rows or of tokens over the pool ------------- */

/* Rows per arranged tile: four sets of 16 rows (about 60 KB for 768
 * columns), each set's blocks read from L2 while a quad's quants and sums
 * stay in L1. */
#define RL_MMQ16_TILE 64

/* From this many tokens per thread each thread takes a run of tokens, not
 * of rows: it splits its own tokens and reads them from its own cache,
 * where a split shared by all would be fetched from the core that wrote it
 * (the split is some 48 bytes a token and block), at the price of arranging every
 * weight row in each thread (some 0.1 us a row of 768 columns). */
#define RL_MMQ16_TOKENS_PER_THREAD 32

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
} rl_mmq16_job;

static void rl_mmq16_run(void *ctx, int ith, int nth) {
    const rl_mmq16_job *j = ctx;
    char *wk = j->arranged + (size_t)ith * j->arranged_bytes;
    if (!j->by_tokens) {
        size_t r0, r1;
        rl_pool_chunk(j->rows, ith, nth, 4, &r0, &r1);
        for (size_t r = r0; r < r1; r += RL_MMQ16_TILE)
            rl_mm_q8_tile4_vnni(j->w, j->nb, j->rows, j->xq, j->xr, j->split, j->n, r,
                                r1 - r < RL_MMQ16_TILE ? r1 : r + RL_MMQ16_TILE, j->yd, j->yf, wk);
        return;
    }
    size_t t0, t1;
    rl_pool_chunk(j->n, ith, nth, 4, &t0, &t1);
    if (t0 >= t1)
        return;
    char *xs = j->split + (size_t)ith * j->split_bytes;
    const rl_block_q8_0 *xq = j->xq + t0 * j->nb;
    const int8_t *xr = j->xr ? j->xr + t0 * j->nb * 32 : NULL;
    rl_mm_q8_split4(xq, xr, t1 - t0, j->nb, xs);
    double *yd = j->yd ? j->yd + t0 * j->rows : NULL;
    float *yf = j->yf ? j->yf + t0 * j->rows : NULL;
    for (size_t r = 0; r < j->rows; r += RL_MMQ16_TILE)
        rl_mm_q8_tile4_vnni(j->w, j->nb, j->rows, xq, xr, xs, t1 - t0, r,
                            j->rows - r < RL_MMQ16_TILE ? j->rows : r + RL_MMQ16_TILE, yd, yf, wk);
}

int rl_mm_q8_pairs(const rl_block_q8_0 *w, size_t rows, size_t nb, const rl_block_q8_0 *xq,
                   const int8_t *xr, size_t n, double *yd, float *yf, int nth) {
    rl_mmq16_job j = {.w = w, .xq = xq, .xr = xr, .rows = rows, .nb = nb, .n = n, .yd = yd,
                     .yf = yf};
    nth = nth < 1 ? 1 : nth;
    j.by_tokens = nth > 1 && n >= (size_t)nth * RL_MMQ16_TOKENS_PER_THREAD;
    const size_t chunks = j.by_tokens ? (size_t)nth
                                      : (size_t)rl_pool_split_chunks(nth, (rows + 3) / 4);
    /* a chunk of tokens holds at most this many (rl_pool_chunk's share) */
    const size_t most = j.by_tokens ? ((n + chunks - 1) / chunks + 3) / 4 * 4 : n;
    j.split_bytes = (rl_mm_q8_split4_bytes(most, nb, xr != NULL) + 63) / 64 * 64;
    j.arranged_bytes = (rl_mm_q8_arranged4_bytes(RL_MMQ16_TILE, nb) + 63) / 64 * 64;
    const size_t splits = j.by_tokens ? chunks : 1;
    if (j.split_bytes > SIZE_MAX / 2 / splits || j.arranged_bytes > SIZE_MAX / 2 / chunks)
        return 0;
    char *mem = malloc(splits * j.split_bytes + chunks * j.arranged_bytes);
    if (!mem)
        return 0;
    j.split = mem, j.arranged = mem + splits * j.split_bytes;
    if (!j.by_tokens)
        rl_mm_q8_split4(xq, xr, n, nb, j.split);
    rl_pool_run_split((int)chunks, nth, rl_mmq16_run, &j);
    free(mem);
    return 1;
}
