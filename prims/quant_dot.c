/* quant_dot.c - the row products of the legacy, K and IQ4 types: one
 * weight row times one quantized activation row (Q8_0; Q8_1 for Q4_1 and
 * Q5_1; Q8_K for the 256-value types), in ggml's order of sums
 * (doc/products.md §4, §5), so that every path answers ggml's AVX2
 * vec_dot's bits.  The quantizers of the Q8_1 and Q8_K activations they
 * read are quant_act.c's.
 *
 * The order of the 32-value types (in words: §4): eight f32 lanes start at
 * +0; for block b, lane k takes the exact int32 sum of w_j * x_j over the
 * block's values j = 4k .. 4k+3 (w_j the weight's integer level as ggml's
 * SIMD code holds it: signed for Q4_0, Q5_0 and IQ4_NL, the unsigned
 * nibble for Q4_1 and Q5_1), converted to f32 (exact), and
 * lane_k = fma(dw_b * dx_b, that, lane_k) (the scale product exact in
 * f32).  The lanes are reduced as ggml's hsum_float_8.  Q4_1 and Q5_1 then
 * add the f32 running sum of mw_b * sx_b over the blocks; IQ4_NL runs two
 * sets of lanes, one for even blocks and one for odd, over pairs of blocks,
 * adds them lane by lane before the reduction and takes a last odd block
 * apart.  The 256-value types (§5) keep the eight lanes per super-block,
 * each lane the scaled sum over its eight runs of 32, and fold the mins
 * (Q2_K, Q4_K, Q5_K) or the offset 32 (Q6_K) in through the activations'
 * sums of 16.
 *
 * Activation quants must lie in [-127, 127] (every quantizer gives that):
 * the SIMD paths move the weight's sign onto them.  Weight bytes may be
 * anything.  Compiled with -ffp-contract=off: every fma is written out.
 */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "prims/q8.h"
#include "prims/quant_internal.h"
#include "prims/quants.h"

/* ---- the reference ------------------------------------------------- */

/* ggml's hsum_float_8: the high half plus the low, then pairs 0+2 and 1+3,
 * then those two. */
static float rl_dot_hsum8(const float a[8]) {
    float r[4];
    for (int i = 0; i < 4; i++)
        r[i] = a[i + 4] + a[i];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* One block into the eight lanes: v the 32 weight levels in value order. */
static void rl_dot_block(float acc[8], float d, const int8_t v[32], const int8_t *xq) {
    for (int k = 0; k < 8; k++) {
        int32_t s = 0;
        for (int j = 4 * k; j < 4 * k + 4; j++)
            s += (int32_t)v[j] * (int32_t)xq[j];
        acc[k] = fmaf(d, (float)s, acc[k]);
    }
}

/* The 32 levels of a legacy block: value j < 16 in the low nibble of
 * qs[j], value j + 16 in the high; bit j of qh (little-endian) adds 16;
 * then OFF is subtracted. */
static void rl_dot_levels(const uint8_t *qs, const uint8_t *qh, int off, int8_t v[32]) {
    uint32_t h = 0;
    if (qh)
        memcpy(&h, qh, 4);
    for (int j = 0; j < 16; j++) {
        v[j] = (int8_t)((qs[j] & 15) + (qh ? (int)((h >> j) & 1) << 4 : 0) - off);
        v[j + 16] = (int8_t)((qs[j] >> 4) + (qh ? (int)((h >> (j + 16)) & 1) << 4 : 0) - off);
    }
}

/* A legacy block's layout: its bytes, the byte offsets of its offset m
 * and fifth bits qh (-1 where there are none; a type with m takes Q8_1
 * activations) and of its nibbles, and the level offset subtracted (8 for
 * Q4_0, 16 for Q5_0, 0 for the _1 types, whose levels are unsigned). */
typedef struct rl_legacy_shape {
    size_t wbytes;
    int m_at, qh_at, qs_at, off;
} rl_legacy_shape;

#define RL_SHAPE(q, M, QH, OFF)                                                             \
    ((rl_legacy_shape){sizeof(rl_block_##q), M, QH, (int)offsetof(rl_block_##q, qs), OFF})
#define RL_SHAPE_Q4_0 RL_SHAPE(q4_0, -1, -1, 8)
#define RL_SHAPE_Q4_1 RL_SHAPE(q4_1, (int)offsetof(rl_block_q4_1, m), -1, 0)
#define RL_SHAPE_Q5_0 RL_SHAPE(q5_0, -1, (int)offsetof(rl_block_q5_0, qh), 16)
#define RL_SHAPE_Q5_1 RL_SHAPE(q5_1, (int)offsetof(rl_block_q5_1, m), \
                               (int)offsetof(rl_block_q5_1, qh), 0)

static uint16_t rl_dot_u16(const unsigned char *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Block b of a legacy product: *wb the weight block, *d the product of
 * the two scales (exact in f32), *summs plus the _1 types' mw_b * sx_b
 * (exact); answers the activation quants.  H widens a binary16 (exactly,
 * on every path: the SIMD ones pass F16C's instruction). */
__attribute__((always_inline)) static inline const int8_t *
rl_dot_legacy_block(rl_legacy_shape sh, const void *w, const void *x, size_t b,
                    const unsigned char **wb, float *d, float *summs, float (*H)(uint16_t)) {
    *wb = (const unsigned char *)w + b * sh.wbytes;
    if (sh.m_at >= 0) {
        const rl_block_q8_1 *xb = (const rl_block_q8_1 *)x + b;
        *summs += H(rl_dot_u16(*wb + sh.m_at)) * H(xb->s);
        *d = H(rl_dot_u16(*wb)) * H(xb->d);
        return xb->qs;
    }
    const rl_block_q8_0 *xb = (const rl_block_q8_0 *)x + b;
    *d = H(rl_dot_u16(*wb)) * H(xb->d);
    return xb->qs;
}

static float rl_dot_legacy_ref(rl_legacy_shape sh, const void *w, const void *x, size_t nb) {
    float acc[8] = {0}, summs = 0.0f;
    int8_t v[32];
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *wb;
        float d;
        const int8_t *xq = rl_dot_legacy_block(sh, w, x, b, &wb, &d, &summs, rl_h2f);
        rl_dot_levels(wb + sh.qs_at, sh.qh_at >= 0 ? wb + sh.qh_at : NULL, sh.off, v);
        rl_dot_block(acc, d, v, xq);
    }
    return sh.m_at >= 0 ? rl_dot_hsum8(acc) + summs : rl_dot_hsum8(acc);
}

static void rl_dot_iq4_levels(const uint8_t *qs, int8_t v[32]) {
    for (int j = 0; j < 16; j++) {
        v[j] = rl_iq4_levels[qs[j] & 15];
        v[j + 16] = rl_iq4_levels[qs[j] >> 4];
    }
}

/* The odd last block of IQ4_NL: sumf + d * (its whole int sum), one fma. */
static float rl_dot_iq4_tail(float sumf, const rl_block_iq4_nl *w, const rl_block_q8_0 *x) {
    int8_t v[32];
    int32_t s = 0;
    rl_dot_iq4_levels(w->qs, v);
    for (int j = 0; j < 32; j++)
        s += (int32_t)v[j] * (int32_t)x->qs[j];
    return fmaf(rl_h2f(x->d) * rl_h2f(w->d), (float)s, sumf);
}

float rl_vec_dot_iq4_nl_ref(const void *w, const void *x, size_t nb) {
    const rl_block_iq4_nl *wb = w;
    const rl_block_q8_0 *xb = x;
    float acc1[8] = {0}, acc2[8] = {0}, sum[8];
    int8_t v[32];
    size_t b = 0;
    for (; b + 1 < nb; b += 2) {
        rl_dot_iq4_levels(wb[b].qs, v);
        rl_dot_block(acc1, rl_h2f(xb[b].d) * rl_h2f(wb[b].d), v, xb[b].qs);
        rl_dot_iq4_levels(wb[b + 1].qs, v);
        rl_dot_block(acc2, rl_h2f(xb[b + 1].d) * rl_h2f(wb[b + 1].d), v, xb[b + 1].qs);
    }
    for (int k = 0; k < 8; k++)
        sum[k] = acc1[k] + acc2[k];
    float sumf = rl_dot_hsum8(sum);
    return b < nb ? rl_dot_iq4_tail(sumf, wb + b, xb + b) : sumf;
}

/* ---- Q4_K and Q6_K against Q8_K ------------------------------------ */

/* Q4_K's 256 levels (0..15) in value order: in each 64, the low nibbles of
 * 32 bytes, then their high nibbles; Q5_K's (0..31) add bit 2c (then
 * 2c + 1) of qh[l] as 16 to value l of the 64 numbered c. */
static void rl_dot_k45_levels(const uint8_t *qs, const uint8_t *qh, int8_t v[256]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int h = qh ? qh[l] >> 2 * c : 0;
            v[64 * c + l] = (int8_t)((qs[32 * c + l] & 15) | (h & 1) << 4);
            v[64 * c + 32 + l] = (int8_t)((qs[32 * c + l] >> 4) | (h & 2) << 3);
        }
}

/* IQ4_XS's eight run scales (6 bits less 32) and its 256 levels, each run
 * of 32 as an IQ4_NL block. */
static void rl_dot_iq4xs_block(const rl_block_iq4_xs *w, int16_t ls[8], int8_t *v) {
    for (int g = 0; g < 8; g++) {
        ls[g] = (int16_t)((((w->scales_l[g / 2] >> 4 * (g % 2)) & 15) |
                           ((w->scales_h >> 2 * g) & 3) << 4) - 32);
        if (v)
            rl_dot_iq4_levels(w->qs + 16 * g, v + 32 * g);
    }
}

/* Q2_K's levels (0..3) and Q3_K's (-4..3) in value order: per 128, four
 * runs of 32 from bit pairs 0, 1, 2, 3 of 32 bytes; Q3_K subtracts 4 where
 * bit 4h + r of hmask[l] is clear (run r of the 128 numbered h). */
static void rl_dot_k23_levels(const uint8_t *qs, const uint8_t *hmask, int8_t v[256]) {
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < 4; r++)
            for (int l = 0; l < 32; l++)
                v[128 * h + 32 * r + l] =
                    (int8_t)(((qs[32 * h + l] >> 2 * r) & 3) -
                             (hmask && !((hmask[l] >> (4 * h + r)) & 1) ? 4 : 0));
}

/* Q6_K's 256 levels (0..63, the offset 32 not subtracted) in value order:
 * in each 128, four runs of 32 from ql's low nibbles (bytes 0..31, then
 * 32..63), then its high nibbles, with qh's bit pairs 0, 1, 2, 3 above. */
static void rl_dot_q6k_levels(const uint8_t *ql, const uint8_t *qh, int8_t v[256]) {
    for (int h = 0; h < 2; h++, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            v[128 * h + l] = (int8_t)((ql[l] & 15) | (qh[l] & 3) << 4);
            v[128 * h + 32 + l] = (int8_t)((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
            v[128 * h + 64 + l] = (int8_t)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
            v[128 * h + 96 + l] = (int8_t)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
        }
}

/* Lane k of a super-block: the sum over its 32-value runs g of
 * scale(g, k) * (the int sum of w_j * q_j over the run's values 4k..4k+3),
 * scale(g, k) that of the 16-value sub-block (Q6_K, sub = 2 per run) or of
 * the run (Q4_K, sub = 1). */
static void rl_dot_k_lanes(const int8_t v[256], const int8_t *q, const int16_t *scale, int sub,
                           int32_t lane[8]) {
    for (int k = 0; k < 8; k++) {
        lane[k] = 0;
        for (int g = 0; g < 8; g++) {
            int32_t s = 0;
            for (int t = 0; t < 4; t++)
                s += (int32_t)v[32 * g + 4 * k + t] * (int32_t)q[32 * g + 4 * k + t];
            lane[k] += scale[sub == 1 ? g : 2 * g + (k >= 4)] * s;
        }
    }
}

/* Super-block b of Q4_K or Q5_K: d, dmin (as ggml: one rounding each),
 * the scales and mins packed as rl_k4_scales_mins gives them, the levels;
 * H as rl_dot_legacy_block's. */
__attribute__((always_inline)) static inline void
rl_dot_k45_block(const void *w, const rl_block_q8_K *xb, size_t b, int q5, float *d,
                 float *dmin, uint32_t u[4], const uint8_t **qs, const uint8_t **qh,
                 float (*H)(uint16_t)) {
    uint16_t dw, mw;
    const uint8_t *scales;
    if (q5) {
        const rl_block_q5_K *wb = (const rl_block_q5_K *)w + b;
        dw = wb->d, mw = wb->dmin, scales = wb->scales, *qs = wb->qs, *qh = wb->qh;
    } else {
        const rl_block_q4_K *wb = (const rl_block_q4_K *)w + b;
        dw = wb->d, mw = wb->dmin, scales = wb->scales, *qs = wb->qs, *qh = NULL;
    }
    *d = xb[b].d * H(dw);
    *dmin = -xb[b].d * H(mw);
    rl_k4_scales_mins(scales, u);
}

/* The mins' products of Q4_K's four lanes (or, summed, Q5_K's): pairs of
 * mins times the sums of the 32-value runs. */
static int32_t rl_dot_k45_min(const int16_t m[8], const int16_t *bsums, int i) {
    return m[2 * i] * (bsums[4 * i] + bsums[4 * i + 1]) +
           m[2 * i + 1] * (bsums[4 * i + 2] + bsums[4 * i + 3]);
}

/* Q4_K keeps four f32 lanes of mins, Q5_K one f32 sum of each block's
 * whole int32 mins product (doc/products.md §5). */
static float rl_dot_k45_ref(const void *w, const void *x, size_t nb, int q5) {
    const rl_block_q8_K *xb = x;
    float acc[8] = {0}, accm[4] = {0}, summs = 0.0f;
    int8_t v[256];
    for (size_t b = 0; b < nb; b++) {
        float d, dmin;
        uint32_t u[4];
        int16_t sc[8], m[8];
        const uint8_t *qs, *qh;
        rl_dot_k45_block(w, xb, b, q5, &d, &dmin, u, &qs, &qh, rl_h2f);
        for (int j = 0; j < 8; j++) {
            sc[j] = (int16_t)((u[j / 4] >> 8 * (j % 4)) & 0xff);
            m[j] = (int16_t)((u[2 + j / 4] >> 8 * (j % 4)) & 0xff);
        }
        int32_t mins = 0;
        for (int i = 0; i < 4; i++) {
            const int32_t p = rl_dot_k45_min(m, xb[b].bsums, i);
            mins += p;
            accm[i] = fmaf(dmin, (float)p, accm[i]);
        }
        summs = fmaf(dmin, (float)mins, summs);
        int32_t lane[8];
        rl_dot_k45_levels(qs, qh, v);
        rl_dot_k_lanes(v, xb[b].qs, sc, 1, lane);
        for (int k = 0; k < 8; k++)
            acc[k] = fmaf(d, (float)lane[k], acc[k]);
    }
    return rl_dot_hsum8(acc) + (q5 ? summs : (accm[0] + accm[2]) + (accm[1] + accm[3]));
}

float rl_vec_dot_iq4_xs_ref(const void *w, const void *x, size_t nb) {
    const rl_block_iq4_xs *wb = w;
    const rl_block_q8_K *xb = x;
    float acc[8] = {0};
    int8_t v[256];
    for (size_t b = 0; b < nb; b++) {
        int16_t ls[8];
        int32_t lane[8];
        rl_dot_iq4xs_block(wb + b, ls, v);
        rl_dot_k_lanes(v, xb[b].qs, ls, 1, lane);
        for (int k = 0; k < 8; k++)
            acc[k] = fmaf(rl_h2f(wb[b].d) * xb[b].d, (float)lane[k], acc[k]);
    }
    return rl_dot_hsum8(acc);
}

float rl_vec_dot_q2_K_ref(const void *w, const void *x, size_t nb) {
    const rl_block_q2_K *wb = w;
    const rl_block_q8_K *xb = x;
    float acc[8] = {0};
    int8_t v[256];
    for (size_t b = 0; b < nb; b++) {
        const float d = xb[b].d * rl_h2f(wb[b].d), dmin = -xb[b].d * rl_h2f(wb[b].dmin);
        int16_t sc[16];
        int32_t lane[8];
        for (int j = 0; j < 16; j++)
            sc[j] = wb[b].scales[j] & 15;
        rl_dot_k23_levels(wb[b].qs, NULL, v);
        rl_dot_k_lanes(v, xb[b].qs, sc, 2, lane);
        for (int k = 0; k < 8; k++) { /* the mins first, then the levels */
            const int32_t mk = (wb[b].scales[2 * k] >> 4) * xb[b].bsums[2 * k] +
                               (wb[b].scales[2 * k + 1] >> 4) * xb[b].bsums[2 * k + 1];
            acc[k] = fmaf(d, (float)lane[k], fmaf(dmin, (float)mk, acc[k]));
        }
    }
    return rl_dot_hsum8(acc);
}

float rl_vec_dot_q3_K_ref(const void *w, const void *x, size_t nb) {
    const rl_block_q3_K *wb = w;
    const rl_block_q8_K *xb = x;
    float acc[8] = {0};
    int8_t v[256], sc8[16];
    for (size_t b = 0; b < nb; b++) {
        const float d = xb[b].d * rl_h2f(wb[b].d);
        int16_t sc[16];
        int32_t lane[8];
        rl_q3k_scales(wb[b].scales, sc8);
        for (int j = 0; j < 16; j++)
            sc[j] = sc8[j];
        rl_dot_k23_levels(wb[b].qs, wb[b].hmask, v);
        rl_dot_k_lanes(v, xb[b].qs, sc, 2, lane);
        for (int k = 0; k < 8; k++)
            acc[k] = fmaf(d, (float)lane[k], acc[k]);
    }
    return rl_dot_hsum8(acc);
}

float rl_vec_dot_q6_K_ref(const void *w, const void *x, size_t nb) {
    const rl_block_q6_K *wb = w;
    const rl_block_q8_K *xb = x;
    float acc[8] = {0};
    int8_t v[256];
    for (size_t b = 0; b < nb; b++) {
        const float d = xb[b].d * rl_h2f(wb[b].d);
        int16_t sc[16];
        for (int j = 0; j < 16; j++)
            sc[j] = wb[b].scales[j];
        int32_t lane[8];
        rl_dot_q6k_levels(wb[b].ql, wb[b].qh, v);
        rl_dot_k_lanes(v, xb[b].qs, sc, 2, lane);
        for (int k = 0; k < 8; k++) {
            /* the offset 32 of the levels, from the sums of 16 quants */
            lane[k] -= 32 * (xb[b].bsums[2 * k] * sc[2 * k] +
                             xb[b].bsums[2 * k + 1] * sc[2 * k + 1]);
            acc[k] = fmaf(d, (float)lane[k], acc[k]);
        }
    }
    return rl_dot_hsum8(acc);
}


/* ---- AVX2 ---------------------------------------------------------- */

/* A binary16 widened by F16C: the same value as rl_h2f (NaN payloads
 * apart, which only a corrupt scale has). */
__attribute__((target(RL_TARGET_AVX2))) static inline float rl_dot_h2f_avx2(uint16_t h) {
    return _cvtsh_ss(h);
}

__attribute__((target(RL_TARGET_AVX2))) static inline float rl_dot_hsum8_avx2(__m256 a) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

/* The 32 nibbles of qs in value order, each in [0, 15]. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i rl_dot_nibbles(const uint8_t *qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)qs);
    return _mm256_and_si256(_mm256_set1_epi8(15),
                            _mm256_set_m128i(_mm_srli_epi16(t, 4), t));
}

/* Byte j = 0xff where bit j of the little-endian u32 at qh is set. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i rl_dot_bits(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

/* VAL in the bytes of V that have every bit of BIT set, else 0. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i
rl_dot_where_avx2(__m256i v, __m256i bit, __m256i val) {
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), val);
}

/* The eight lane sums of unsigned levels u times signed quants q, as f32.
 * Exact: a pair is at most 2 * 127 * 127 in magnitude (IQ4_NL's moved
 * signs; 2 * 31 * 128 for Q5_1), within int16. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256 rl_dot_us8(__m256i u, __m256i q) {
    return _mm256_cvtepi32_ps(
        _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(u, q)));
}

/* Signed levels v: |v| times q with v's sign. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256 rl_dot_s8(__m256i v, __m256i q) {
    return rl_dot_us8(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
}

#define RL_LOADQ(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

/* The legacy product of doc/products.md §4; inlined into each type's
 * function with its shape a constant. */
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline float
rl_dot_legacy_avx2(rl_legacy_shape sh, const void *w, const void *x, size_t nb) {
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *wb;
        float db;
        const int8_t *xq =
            rl_dot_legacy_block(sh, w, x, b, &wb, &db, &summs, rl_dot_h2f_avx2);
        const __m256 d = _mm256_set1_ps(db);
        __m256i v = rl_dot_nibbles(wb + sh.qs_at);
        if (sh.qh_at >= 0) /* Q5_0: the nibble with 0xf0 where the bit is clear (level - 16) */
            v = _mm256_or_si256(v, sh.off ? _mm256_andnot_si256(rl_dot_bits(wb + sh.qh_at),
                                                                _mm256_set1_epi8((char)0xf0))
                                          : _mm256_and_si256(rl_dot_bits(wb + sh.qh_at),
                                                             _mm256_set1_epi8(0x10)));
        else if (sh.off)
            v = _mm256_sub_epi8(v, _mm256_set1_epi8((char)sh.off));
        const __m256i q = RL_LOADQ(xq);
        acc = _mm256_fmadd_ps(d, sh.off ? rl_dot_s8(v, q) : rl_dot_us8(v, q), acc);
    }
    return sh.m_at >= 0 ? rl_dot_hsum8_avx2(acc) + summs : rl_dot_hsum8_avx2(acc);
}

/* IQ4_NL's levels of one block: a table lookup of the nibbles. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i
rl_dot_iq4_avx2(const uint8_t *qs, __m128i levels) {
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)qs), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_shuffle_epi8(levels, _mm_and_si128(_mm_srli_epi16(t, 4), m)),
                            _mm_shuffle_epi8(levels, _mm_and_si128(t, m)));
}

__attribute__((target(RL_TARGET_AVX2))) float rl_vec_dot_iq4_nl_avx2(const void *w,
                                                                    const void *x, size_t nb) {
    const rl_block_iq4_nl *wb = w;
    const rl_block_q8_0 *xb = x;
    const __m128i levels = _mm_loadu_si128((const __m128i *)(const void *)rl_iq4_levels);
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 1 < nb; b += 2) {
        const __m256 q1 = rl_dot_s8(rl_dot_iq4_avx2(wb[b].qs, levels), RL_LOADQ(xb[b].qs));
        const __m256 q2 =
            rl_dot_s8(rl_dot_iq4_avx2(wb[b + 1].qs, levels), RL_LOADQ(xb[b + 1].qs));
        const float d1 = rl_dot_h2f_avx2(xb[b].d) * rl_dot_h2f_avx2(wb[b].d);
        const float d2 = rl_dot_h2f_avx2(xb[b + 1].d) * rl_dot_h2f_avx2(wb[b + 1].d);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d1), q1, acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(d2), q2, acc2);
    }
    const float sumf = rl_dot_hsum8_avx2(_mm256_add_ps(acc1, acc2));
    return b < nb ? rl_dot_iq4_tail(sumf, wb + b, xb + b) : sumf;
}


__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline float
rl_dot_k45_avx2(const void *w, const void *x, size_t nb, int q5) {
    const rl_block_q8_K *xb = x;
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    float summs = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        float d, dmin;
        uint32_t u[4];
        const uint8_t *qs, *qh;
        rl_dot_k45_block(w, xb, b, q5, &d, &dmin, u, &qs, &qh, rl_dot_h2f_avx2);
        /* int16 scales 0..7 in the low half, mins 0..7 in the high */
        const __m256i ms =
            _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
        const __m256i scl = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
        /* mins times the sums of the 32-value runs, as pairs */
        const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)xb[b].bsums);
        const __m128i bs1 = _mm_loadu_si128((const __m128i *)(const void *)(xb[b].bsums + 8));
        const __m128i prod =
            _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), _mm_hadd_epi16(bs0, bs1));
        if (q5) {
            const __m128i p2 = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
            const int32_t mins = _mm_cvtsi128_si32(_mm_add_epi32(p2, _mm_srli_epi64(p2, 32)));
            summs = fmaf(dmin, (float)mins, summs);
        } else {
            accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), accm);
        }
        const __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)(const void *)qh)
                              : _mm256_setzero_si256();
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(bits, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            if (q5) { /* 16 where bit 2c (2c + 1) of the qh byte is set */
                const __m256i b0 = _mm256_set1_epi8((char)(1 << 2 * c));
                const __m256i b1 = _mm256_set1_epi8((char)(2 << 2 * c));
                const __m256i sixteen = _mm256_set1_epi8(16);
                lo = _mm256_or_si256(lo, rl_dot_where_avx2(hb, b0, sixteen));
                hi = _mm256_or_si256(hi, rl_dot_where_avx2(hb, b1, sixteen));
            }
            const __m256i pl = _mm256_maddubs_epi16(lo, RL_LOADQ(xb[b].qs + 64 * c));
            const __m256i ph = _mm256_maddubs_epi16(hi, RL_LOADQ(xb[b].qs + 64 * c + 32));
            /* scale 2c (2c + 1) in every int16 lane: its two bytes picked */
            const short i0 = (short)(0x0100 * (4 * c + 1) + 4 * c), i1 = (short)(i0 + 0x0202);
            const __m256i s0 = _mm256_shuffle_epi8(scl, _mm256_set1_epi16(i0));
            const __m256i s1 = _mm256_shuffle_epi8(scl, _mm256_set1_epi16(i1));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(s0, pl));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(s1, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    if (q5)
        return rl_dot_hsum8_avx2(acc) + summs;
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    return rl_dot_hsum8_avx2(acc) + _mm_cvtss_f32(accm);
}

/* rl_dot_k45_avx2 for two activation rows X0 and X1 against one weight
 * row: each row's arithmetic exactly as there (so each result has its
 * bits), the weight's levels and scales unpacked once for both. */
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline void
rl_dot2_k45_avx2(const void *w, const void *x0, const void *x1, size_t nb, int q5,
                 float s[2]) {
    const rl_block_q8_K *xs[2] = {x0, x1};
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 accm[2] = {_mm_setzero_ps(), _mm_setzero_ps()};
    float summs[2] = {0.0f, 0.0f};
    for (size_t b = 0; b < nb; b++) {
        float d[2], dmin[2];
        uint32_t u[4];
        const uint8_t *qs, *qh;
        rl_dot_k45_block(w, xs[1], b, q5, &d[1], &dmin[1], u, &qs, &qh, rl_dot_h2f_avx2);
        rl_dot_k45_block(w, xs[0], b, q5, &d[0], &dmin[0], u, &qs, &qh, rl_dot_h2f_avx2);
        const __m256i ms =
            _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
        const __m256i scl = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
        for (int k = 0; k < 2; k++) {
            const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)xs[k][b].bsums);
            const __m128i bs1 =
                _mm_loadu_si128((const __m128i *)(const void *)(xs[k][b].bsums + 8));
            const __m128i prod =
                _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), _mm_hadd_epi16(bs0, bs1));
            if (q5) {
                const __m128i p2 = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
                const int32_t mins = _mm_cvtsi128_si32(_mm_add_epi32(p2, _mm_srli_epi64(p2, 32)));
                summs[k] = fmaf(dmin[k], (float)mins, summs[k]);
            } else {
                accm[k] = _mm_fmadd_ps(_mm_set1_ps(dmin[k]), _mm_cvtepi32_ps(prod), accm[k]);
            }
        }
        const __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)(const void *)qh)
                              : _mm256_setzero_si256();
        __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int c = 0; c < 4; c++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(bits, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            if (q5) {
                const __m256i b0 = _mm256_set1_epi8((char)(1 << 2 * c));
                const __m256i b1 = _mm256_set1_epi8((char)(2 << 2 * c));
                const __m256i sixteen = _mm256_set1_epi8(16);
                lo = _mm256_or_si256(lo, rl_dot_where_avx2(hb, b0, sixteen));
                hi = _mm256_or_si256(hi, rl_dot_where_avx2(hb, b1, sixteen));
            }
            const short i0 = (short)(0x0100 * (4 * c + 1) + 4 * c), i1 = (short)(i0 + 0x0202);
            const __m256i s0 = _mm256_shuffle_epi8(scl, _mm256_set1_epi16(i0));
            const __m256i s1 = _mm256_shuffle_epi8(scl, _mm256_set1_epi16(i1));
            for (int k = 0; k < 2; k++) {
                const __m256i pl = _mm256_maddubs_epi16(lo, RL_LOADQ(xs[k][b].qs + 64 * c));
                const __m256i ph = _mm256_maddubs_epi16(hi, RL_LOADQ(xs[k][b].qs + 64 * c + 32));
                sumi[k] = _mm256_add_epi32(sumi[k], _mm256_madd_epi16(s0, pl));
                sumi[k] = _mm256_add_epi32(sumi[k], _mm256_madd_epi16(s1, ph));
            }
        }
        for (int k = 0; k < 2; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d[k]), _mm256_cvtepi32_ps(sumi[k]), acc[k]);
    }
    for (int k = 0; k < 2; k++) {
        if (q5) {
            s[k] = rl_dot_hsum8_avx2(acc[k]) + summs[k];
            continue;
        }
        __m128 m = _mm_add_ps(accm[k], _mm_movehl_ps(accm[k], accm[k]));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[k] = rl_dot_hsum8_avx2(acc[k]) + _mm_cvtss_f32(m);
    }
}

/* Run g's pair products P (int16 pairs) into sumi: lanes 0..3 times the
 * scale of sub-block 2g, lanes 4..7 times that of 2g + 1, SC8 the 16
 * scales as signed bytes. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i
rl_dot_run2_avx2(__m256i sumi, __m256i p, __m128i sc8, int g) {
    const long long lo = 0x0101010101010101LL * (2 * g), hi = 0x0101010101010101LL * (2 * g + 1);
    const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_set_epi64x(hi, lo)));
    return _mm256_add_epi32(sumi, _mm256_madd_epi16(s, p));
}

__attribute__((target(RL_TARGET_AVX2))) float rl_vec_dot_q6_K_avx2(const void *w, const void *x,
                                                                  size_t nb) {
    const rl_block_q6_K *wb = w;
    const rl_block_q8_K *xb = x;
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const float d = xb[b].d * rl_dot_h2f_avx2(wb[b].d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)wb[b].scales);
        const __m256i off = _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)xb[b].bsums),
                              _mm256_cvtepi8_epi16(sc8)), 5);
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = wb[b].ql + 64 * h;
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)(const void *)ql);
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(const void *)(ql + 32));
            const __m256i bh = RL_LOADQ(wb[b].qh + 32 * h);
            __m256i v[4];
            /* bit pair r of qh, moved to bits 4..5 */
#define RL_Q6_HI(r) _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2 * (r)), m3), 4)
            v[0] = _mm256_or_si256(_mm256_and_si256(b1, m15), RL_Q6_HI(0));
            v[1] = _mm256_or_si256(_mm256_and_si256(b2, m15), RL_Q6_HI(1));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m15), RL_Q6_HI(2));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m15), RL_Q6_HI(3));
#undef RL_Q6_HI
            for (int r = 0; r < 4; r++) {
                const int g = 4 * h + r; /* the 32-value run: sub-blocks 2g, 2g + 1 */
                sumi = rl_dot_run2_avx2(
                    sumi, _mm256_maddubs_epi16(v[r], RL_LOADQ(xb[b].qs + 32 * g)), sc8, g);
            }
        }
        sumi = _mm256_sub_epi32(sumi, off);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return rl_dot_hsum8_avx2(acc);
}

/* rl_vec_dot_q6_K_avx2 for two activation rows (X, and XSTRIDE bytes on):
 * each row's arithmetic exactly as there, the weight's levels built once
 * for both. */
__attribute__((target(RL_TARGET_AVX2))) static void
rl_vec_dot2_q6_K_avx2(const void *w, const void *x, size_t xstride, size_t nb, float s[2]) {
    const rl_block_q6_K *wb = w;
    const rl_block_q8_K *xs[2] = {x, (const void *)((const uint8_t *)x + xstride)};
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < nb; b++) {
        const float dw = rl_dot_h2f_avx2(wb[b].d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)wb[b].scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = wb[b].ql + 64 * h;
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)(const void *)ql);
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(const void *)(ql + 32));
            const __m256i bh = RL_LOADQ(wb[b].qh + 32 * h);
            __m256i v[4];
#define RL_Q6_HI(r) _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2 * (r)), m3), 4)
            v[0] = _mm256_or_si256(_mm256_and_si256(b1, m15), RL_Q6_HI(0));
            v[1] = _mm256_or_si256(_mm256_and_si256(b2, m15), RL_Q6_HI(1));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m15), RL_Q6_HI(2));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m15), RL_Q6_HI(3));
#undef RL_Q6_HI
            for (int r = 0; r < 4; r++) {
                const int g = 4 * h + r;
                for (int k = 0; k < 2; k++)
                    sumi[k] = rl_dot_run2_avx2(
                        sumi[k], _mm256_maddubs_epi16(v[r], RL_LOADQ(xs[k][b].qs + 32 * g)), sc8,
                        g);
            }
        }
        for (int k = 0; k < 2; k++) {
            const __m256i off = _mm256_slli_epi32(
                _mm256_madd_epi16(
                    _mm256_loadu_si256((const __m256i *)(const void *)xs[k][b].bsums), sc16),
                5);
            const float d = xs[k][b].d * dw;
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi[k], off)),
                                     acc[k]);
        }
    }
    s[0] = rl_dot_hsum8_avx2(acc[0]);
    s[1] = rl_dot_hsum8_avx2(acc[1]);
}

const rl_vec_dot2_kernel rl_vec_dot2_q6_K_table[RL_PATH_COUNT] = {
    [RL_PATH_AVX2] = rl_vec_dot2_q6_K_avx2,
    [RL_PATH_AVX512] = rl_vec_dot2_q6_K_avx2,
    [RL_PATH_AVX512VNNI] = rl_vec_dot2_q6_K_avx2,
};

__attribute__((target(RL_TARGET_AVX2))) float rl_vec_dot_iq4_xs_avx2(const void *w,
                                                                    const void *x, size_t nb) {
    const rl_block_iq4_xs *wb = w;
    const rl_block_q8_K *xb = x;
    const __m128i levels = _mm_loadu_si128((const __m128i *)(const void *)rl_iq4_levels);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        int16_t ls[8];
        rl_dot_iq4xs_block(wb + b, ls, NULL);
        __m256i sumi = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            const __m256i v = rl_dot_iq4_avx2(wb[b].qs + 16 * g, levels);
            const __m256i q = RL_LOADQ(xb[b].qs + 32 * g);
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16(ls[g])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(rl_dot_h2f_avx2(wb[b].d) * xb[b].d),
                              _mm256_cvtepi32_ps(sumi), acc);
    }
    return rl_dot_hsum8_avx2(acc);
}

/* Q2_K and Q3_K: the two low bits of each level, run r of the 128 at BITS;
 * Q3_K less 4 where bit 4h + r of HM is clear. */
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline float
rl_dot_k23_avx2(const void *w, const void *x, size_t nb, int q3) {
    const rl_block_q8_K *xb = x;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const rl_block_q2_K *w2 = (const rl_block_q2_K *)w + b;
        const rl_block_q3_K *w3 = (const rl_block_q3_K *)w + b;
        const float d = xb[b].d * rl_dot_h2f_avx2(q3 ? w3->d : w2->d);
        __m128i sc8;
        if (q3) {
            uint32_t o[4];
            rl_q3k_scale_words(w3->scales, o);
            sc8 = _mm_sub_epi8(_mm_set_epi32((int)o[3], (int)o[2], (int)o[1], (int)o[0]),
                               _mm_set1_epi8(32));
        } else {
            const __m128i sm = _mm_loadu_si128((const __m128i *)(const void *)w2->scales);
            const __m128i m15 = _mm_set1_epi8(15);
            sc8 = _mm_and_si128(sm, m15);
            const float dmin = -xb[b].d * rl_dot_h2f_avx2(w2->dmin);
            const __m256i prod = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m15)),
                _mm256_loadu_si256((const __m256i *)(const void *)xb[b].bsums));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);
        }
        const uint8_t *qs = q3 ? w3->qs : w2->qs;
        const __m256i hm = q3 ? _mm256_loadu_si256((const __m256i *)(const void *)w3->hmask)
                              : _mm256_setzero_si256();
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * h));
            for (int r = 0; r < 4; r++) {
                const int g = 4 * h + r;
                __m256i lv = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * r)), m3);
                const __m256i q = RL_LOADQ(xb[b].qs + 32 * g);
                __m256i p;
                if (q3) {
                    const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + r)));
                    const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit),
                                                            _mm256_setzero_si256());
                    lv = _mm256_sub_epi8(lv, _mm256_and_si256(clear, _mm256_set1_epi8(4)));
                    p = _mm256_maddubs_epi16(_mm256_sign_epi8(lv, lv), _mm256_sign_epi8(q, lv));
                } else {
                    p = _mm256_maddubs_epi16(lv, q);
                }
                sumi = rl_dot_run2_avx2(sumi, p, sc8, g);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return rl_dot_hsum8_avx2(acc);
}

/* ---- the entries and their tables ---------------------------------- */

#define RL_DOT_K45(q, Q5)                                                                  \
    float rl_vec_dot_##q##_ref(const void *w, const void *x, size_t nb) {                  \
        return rl_dot_k45_ref(w, x, nb, Q5);                                               \
    }                                                                                      \
    __attribute__((target(RL_TARGET_AVX2))) float rl_vec_dot_##q##_avx2(                   \
        const void *w, const void *x, size_t nb) {                                         \
        return rl_dot_k45_avx2(w, x, nb, Q5);                                              \
    }                                                                                      \
    __attribute__((target(RL_TARGET_AVX2))) static void rl_vec_dot2_##q##_avx2(            \
        const void *w, const void *x, size_t xstride, size_t nb, float s[2]) {             \
        rl_dot2_k45_avx2(w, x, (const uint8_t *)x + xstride, nb, Q5, s);                   \
    }                                                                                      \
    const rl_vec_dot2_kernel rl_vec_dot2_##q##_table[RL_PATH_COUNT] = {                    \
        [RL_PATH_AVX2] = rl_vec_dot2_##q##_avx2,                                           \
        [RL_PATH_AVX512] = rl_vec_dot2_##q##_avx2,                                         \
        [RL_PATH_AVX512VNNI] = rl_vec_dot2_##q##_avx2,                                     \
    };
#define RL_DOT_K23(q, Q3)                                                                  \
    __attribute__((target(RL_TARGET_AVX2))) float rl_vec_dot_##q##_avx2(                   \
        const void *w, const void *x, size_t nb) {                                         \
        return rl_dot_k23_avx2(w, x, nb, Q3);                                              \
    }
RL_DOT_K23(q2_K, 0)
RL_DOT_K23(q3_K, 1)

RL_DOT_K45(q4_K, 0)
RL_DOT_K45(q5_K, 1)

#define RL_DOT_LEGACY(q, SHAPE)                                                            \
    float rl_vec_dot_##q##_ref(const void *w, const void *x, size_t nb) {                  \
        return rl_dot_legacy_ref(SHAPE, w, x, nb);                                         \
    }                                                                                      \
    __attribute__((target(RL_TARGET_AVX2))) float rl_vec_dot_##q##_avx2(                   \
        const void *w, const void *x, size_t nb) {                                         \
        return rl_dot_legacy_avx2(SHAPE, w, x, nb);                                        \
    }
RL_DOT_LEGACY(q4_0, RL_SHAPE_Q4_0)
RL_DOT_LEGACY(q4_1, RL_SHAPE_Q4_1)
RL_DOT_LEGACY(q5_0, RL_SHAPE_Q5_0)
RL_DOT_LEGACY(q5_1, RL_SHAPE_Q5_1)


/* One AVX2 function serves every SIMD path. */
#define RL_DOT_TABLE(q)                                                                     \
    const rl_vec_dot_kernel rl_vec_dot_##q##_table[RL_PATH_COUNT] = {                       \
        [RL_PATH_REF] = rl_vec_dot_##q##_ref,                                               \
        [RL_PATH_AVX2] = rl_vec_dot_##q##_avx2,                                             \
        [RL_PATH_AVX512] = rl_vec_dot_##q##_avx2,                                           \
        [RL_PATH_AVX512VNNI] = rl_vec_dot_##q##_avx2,                                       \
    };
RL_DOT_TABLE(q4_0)
RL_DOT_TABLE(q4_1)
RL_DOT_TABLE(q5_0)
RL_DOT_TABLE(q5_1)
RL_DOT_TABLE(iq4_nl)
RL_DOT_TABLE(q2_K)
RL_DOT_TABLE(q3_K)
RL_DOT_TABLE(q4_K)
RL_DOT_TABLE(q5_K)
RL_DOT_TABLE(q6_K)
RL_DOT_TABLE(iq4_xs)
