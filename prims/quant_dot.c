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
 * The AVX2 and AVX-512 VNNI functions are quant_dot_simd.h, compiled once
 * for each path below; the AVX-512 path without VNNI runs AVX2's.
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


/* ---- the SIMD paths: one copy of quant_dot_simd.h each ------------- */

#define RL_DOT_CAT2(f, sfx) f##_##sfx
#define RL_DOT_CAT(f, sfx) RL_DOT_CAT2(f, sfx)

#define RL_DOT_TARGET RL_TARGET_AVX2
#define RL_DOT_FN(f) RL_DOT_CAT(f, avx2)
#define RL_DOT_VNNI 0
#include "prims/quant_dot_simd.h"

#define RL_DOT_TARGET RL_TARGET_VNNI
#define RL_DOT_FN(f) RL_DOT_CAT(f, vnni)
#define RL_DOT_VNNI 1
#include "prims/quant_dot_simd.h"

/* ---- the reference entries and the tables -------------------------- */

float rl_vec_dot_q4_0_ref(const void *w, const void *x, size_t nb) {
    return rl_dot_legacy_ref(RL_SHAPE_Q4_0, w, x, nb);
}
float rl_vec_dot_q4_1_ref(const void *w, const void *x, size_t nb) {
    return rl_dot_legacy_ref(RL_SHAPE_Q4_1, w, x, nb);
}
float rl_vec_dot_q5_0_ref(const void *w, const void *x, size_t nb) {
    return rl_dot_legacy_ref(RL_SHAPE_Q5_0, w, x, nb);
}
float rl_vec_dot_q5_1_ref(const void *w, const void *x, size_t nb) {
    return rl_dot_legacy_ref(RL_SHAPE_Q5_1, w, x, nb);
}
float rl_vec_dot_q4_K_ref(const void *w, const void *x, size_t nb) {
    return rl_dot_k45_ref(w, x, nb, 0);
}
float rl_vec_dot_q5_K_ref(const void *w, const void *x, size_t nb) {
    return rl_dot_k45_ref(w, x, nb, 1);
}

/* The AVX-512 path without VNNI runs the AVX2 functions. */
#define RL_DOT_TABLE(q)                                                                     \
    const rl_vec_dot_kernel rl_vec_dot_##q##_table[RL_PATH_COUNT] = {                       \
        [RL_PATH_REF] = rl_vec_dot_##q##_ref,                                               \
        [RL_PATH_AVX2] = rl_vec_dot_##q##_avx2,                                             \
        [RL_PATH_AVX512] = rl_vec_dot_##q##_avx2,                                           \
        [RL_PATH_AVX512VNNI] = rl_vec_dot_##q##_vnni,                                       \
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

#define RL_DOT2_TABLE(q)                                                                    \
    const rl_vec_dot2_kernel rl_vec_dot2_##q##_table[RL_PATH_COUNT] = {                     \
        [RL_PATH_AVX2] = rl_vec_dot2_##q##_avx2,                                            \
        [RL_PATH_AVX512] = rl_vec_dot2_##q##_avx2,                                          \
        [RL_PATH_AVX512VNNI] = rl_vec_dot2_##q##_vnni,                                      \
    };
RL_DOT2_TABLE(q4_K)
RL_DOT2_TABLE(q5_K)
RL_DOT2_TABLE(q6_K)
