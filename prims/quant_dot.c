/* quant_dot.c - the row products of the legacy and IQ4_NL types: one weight
 * row times one quantized activation row (Q8_0, or Q8_1 for Q4_1 and Q5_1),
 * in ggml's order of sums (doc/products.md §4), so that every path answers
 * ggml's AVX2 vec_dot's bits.
 *
 * The order, per type (the arithmetic in words is doc/products.md §4):
 * eight f32 lanes start at +0; for block b, lane k takes the exact int32 sum
 * of w_j * x_j over the block's values j = 4k .. 4k+3 (w_j the weight's
 * integer level as ggml's SIMD code holds it: signed for Q4_0, Q5_0 and
 * IQ4_NL, the unsigned nibble for Q4_1 and Q5_1), converted to f32 (exact),
 * and lane_k = fma(dw_b * dx_b, that, lane_k) (the scale product exact in
 * f32).  The lanes are reduced as ggml's hsum_float_8.  Q4_1 and Q5_1 then
 * add the f32 running sum of mw_b * sx_b over the blocks; IQ4_NL runs two
 * sets of lanes, one for even blocks and one for odd, over pairs of blocks,
 * adds them lane by lane before the reduction and takes a last odd block
 * apart.
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
 * (exact); answers the activation quants. */
static inline const int8_t *rl_dot_legacy_block(rl_legacy_shape sh, const void *w,
                                                const void *x, size_t b,
                                                const unsigned char **wb, float *d,
                                                float *summs) {
    *wb = (const unsigned char *)w + b * sh.wbytes;
    if (sh.m_at >= 0) {
        const rl_block_q8_1 *xb = (const rl_block_q8_1 *)x + b;
        *summs += rl_h2f(rl_dot_u16(*wb + sh.m_at)) * rl_h2f(xb->s);
        *d = rl_h2f(rl_dot_u16(*wb)) * rl_h2f(xb->d);
        return xb->qs;
    }
    const rl_block_q8_0 *xb = (const rl_block_q8_0 *)x + b;
    *d = rl_h2f(rl_dot_u16(*wb)) * rl_h2f(xb->d);
    return xb->qs;
}

static float rl_dot_legacy_ref(rl_legacy_shape sh, const void *w, const void *x, size_t nb) {
    float acc[8] = {0}, summs = 0.0f;
    int8_t v[32];
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *wb;
        float d;
        const int8_t *xq = rl_dot_legacy_block(sh, w, x, b, &wb, &d, &summs);
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

/* ---- AVX2 ---------------------------------------------------------- */

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
        const int8_t *xq = rl_dot_legacy_block(sh, w, x, b, &wb, &db, &summs);
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
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(rl_h2f(xb[b].d) * rl_h2f(wb[b].d)), q1, acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(rl_h2f(xb[b + 1].d) * rl_h2f(wb[b + 1].d)), q2,
                               acc2);
    }
    const float sumf = rl_dot_hsum8_avx2(_mm256_add_ps(acc1, acc2));
    return b < nb ? rl_dot_iq4_tail(sumf, wb + b, xb + b) : sumf;
}

/* ---- Q8_1 activations ---------------------------------------------- */

void rl_quantize_q8_1_ref(const float *x, void *y, size_t nb) {
    rl_block_q8_1 *yb = y;
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127, id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        yb[b].d = rl_f2h(d);
        for (int j = 0; j < 32; j++) {
            yb[b].qs[j] = (int8_t)roundf(xb[j] * id);
            sum += yb[b].qs[j];
        }
        yb[b].s = rl_f2h((float)sum * d);
    }
}

/* ---- the entries and their tables ---------------------------------- */

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
