/* attention.c - multi-head attention for the encoder (see attention.h for
 * the arithmetic every path reproduces).
 *
 * Quadratic in n: on the reference and AVX2 paths the dot products run on
 * matvec.c's f32 kernels and the weighted sum on an AVX2 loop that rounds
 * as the scalar one does, threads splitting the (head, query) pairs; the
 * AVX-512 paths take tiles of eight queries, threads splitting the (head,
 * tile) pairs: scores for 16 keys at a time against transposed keys, four
 * queries at a time (each column of a block of keys loaded once for the
 * four), their exponentials four vectors of eight in flight, and the
 * weighted sums of the tile's eight queries in registers, up to 32 columns
 * a pass (each probability broadcast once for the pass); the keys and
 * scores on a cache line.  The softmax has a form per path around
 * vmath.h's exponential.  Built with -ffp-contract=off so that no product
 * and sum fuse behind the spec's back.
 */
#include "prims/attention.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prims/matvec.h"
#include "prims/nn_common.h"
#include "prims/pool.h"
#include "prims/vmath.h"

/* o[c] = sum_t p[t] * v[t * stride + c] for c < m, t from j0 to j1 - 1 in
 * order, each step o = o + p * v with two roundings, o from +0. */
typedef void (*rl_wsum_fn)(float *o, const float *p, const float *v, size_t stride,
                           size_t j0, size_t j1, size_t m);

static void rl_wsum_ref(float *o, const float *p, const float *v, size_t stride, size_t j0,
                        size_t j1, size_t m) {
    memset(o, 0, m * sizeof *o);
    for (size_t t = j0; t < j1; t++)
        for (size_t c = 0; c < m; c++)
            o[c] = o[c] + p[t] * v[t * stride + c];
}

/* Element-wise, so any lane rounds as the scalar loop does.  Each output
 * is one dependent chain of adds (the order over keys is fixed), so 64
 * outputs -- a whole head of the usual size -- run as eight chains side by
 * side, and each key costs one pass over its values. */
__attribute__((target(RL_TARGET_AVX2))) static void rl_wsum_avx2(float *o, const float *p,
                                                        const float *v, size_t stride,
                                                        size_t j0, size_t j1, size_t m) {
    size_t c = 0;
    for (; c + 64 <= m; c += 64) {
        __m256 a[8];
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_setzero_ps();
        for (size_t t = j0; t < j1; t++) {
            const __m256 pv = _mm256_set1_ps(p[t]);
            const float *vt = v + t * stride + c;
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++)
                a[k] = _mm256_add_ps(a[k], _mm256_mul_ps(pv, _mm256_loadu_ps(vt + 8 * k)));
        }
        for (int k = 0; k < 8; k++)
            _mm256_storeu_ps(o + c + 8 * k, a[k]);
    }
    for (; c + 8 <= m; c += 8) {
        __m256 a = _mm256_setzero_ps();
        for (size_t t = j0; t < j1; t++)
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(p[t]),
                                               _mm256_loadu_ps(v + t * stride + c)));
        _mm256_storeu_ps(o + c, a);
    }
    if (c < m)
        rl_wsum_ref(o + c, p, v + c, stride, j0, j1, m - c);
}

/* Softmax of the scores a[j0..j1) in place (nn.h): scaled, the max, e =
 * rl_expf (vmath.h), the double sum over eight lanes (lane l takes t - j0
 * = l mod 8, in increasing t) and the fixed tree (l + 4, + 2, + 1), one
 * f32 reciprocal, p = e * inv.  A path's form answers the same bits. */
typedef void (*rl_softmax_fn)(float *a, size_t j0, size_t j1, float scale);

static double rl_softmax_tree(const double s[8]) {
    double b[4], c[2];
    for (int l = 0; l < 4; l++)
        b[l] = s[l] + s[l + 4];
    for (int l = 0; l < 2; l++)
        c[l] = b[l] + b[l + 2];
    return c[0] + c[1];
}

static void rl_softmax_ref(float *a, size_t j0, size_t j1, float scale) {
    float m = -INFINITY;
    for (size_t t = j0; t < j1; t++) {
        a[t] = a[t] * scale;
        if (a[t] > m)
            m = a[t];
    }
    double s[8] = {0};
    for (size_t t = j0; t < j1; t++) {
        a[t] = rl_expf(a[t] - m);
        s[(t - j0) % 8] += (double)a[t];
    }
    const float inv = (float)(1.0 / rl_softmax_tree(s));
    for (size_t t = j0; t < j1; t++)
        a[t] = a[t] * inv;
}

__attribute__((target(RL_TARGET_AVX2))) static void rl_softmax_avx2(float *a, size_t j0, size_t j1,
                                                               float scale) {
    const size_t n = j1 - j0;
    float *x = a + j0;
    const __m256 sc = _mm256_set1_ps(scale);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (size_t t = 0; t < n; t += 8) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - t < 8 ? n - t : 8)), iota);
        const __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + t, mk), sc);
        _mm256_maskstore_ps(x + t, mk, v);
        /* max(v, m) keeps m for a NaN v, as the scalar comparison does */
        mv = _mm256_blendv_ps(mv, _mm256_max_ps(v, mv), _mm256_castsi256_ps(mk));
    }
    float mm[8], m = -INFINITY;
    _mm256_storeu_ps(mm, mv);
    for (int l = 0; l < 8; l++)
        m = mm[l] > m ? mm[l] : m;
    const __m256 m8 = _mm256_set1_ps(m);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (size_t t = 0; t < n; t += 8) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - t < 8 ? n - t : 8)), iota);
        const __m256 v = _mm256_sub_ps(_mm256_maskload_ps(x + t, mk), m8);
        const __m128 e0 = rl_expf4_avx2(_mm256_castps256_ps128(v));
        const __m128 e1 = rl_expf4_avx2(_mm256_extractf128_ps(v, 1));
        const __m256 e = _mm256_and_ps(_mm256_set_m128(e1, e0), _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(x + t, mk, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double s[8];
    _mm256_storeu_pd(s, s0);
    _mm256_storeu_pd(s + 4, s1);
    const __m256 inv = _mm256_set1_ps((float)(1.0 / rl_softmax_tree(s)));
    for (size_t t = 0; t < n; t += 8) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - t < 8 ? n - t : 8)), iota);
        _mm256_maskstore_ps(x + t, mk, _mm256_mul_ps(_mm256_maskload_ps(x + t, mk), inv));
    }
}

/* Queries per AVX-512 tile: their weighted sums share each value row.
 * Their scores and exponentials go RL_ATTN_SQ queries at a time. */
#define RL_ATTN_QT 8
#define RL_ATTN_SQ 4

/* Every query of a tile, k < nq (nq a constant where it is inlined). */
#define RL_ATTN_EACH _Pragma("GCC unroll 8") for (size_t k = 0; k < nq; k++)

/* The softmax of a tile's rows, the first half: row k < nq (nq a constant
 * where it is inlined) is the scores a[k * np + j0[k] .. j1[k]), already
 * scaled, whose maximum is m[k] (rl_attn_scores_n finds both as it writes
 * them); their exponentials in place, sum[k] their sum (rl_softmax_tree's:
 * lane l of sv[k] takes the keys l mod 8 from j0[k], in order).  Each step
 * takes g groups of eight from every row (g a constant, so that nq * g
 * exponentials of eight are in flight: each is a long chain of dependent
 * fmas); lanes past a row's end are not read or written and add +0 to
 * its sum (whose lanes are +0, positive or NaN, and stay as they are).
 * The second half,
 * rl_softmax_scale_avx512, scales the rows after all of them took their
 * exponentials, so no row's wait on another's division (the same
 * operations on each row, so the same bits). */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_softmax_exp_n(float *a, size_t np, const size_t *j0, const size_t *j1, const float *m,
                 size_t nq, size_t g, double *sum) {
    float *x[RL_ATTN_SQ];
    size_t len[RL_ATTN_SQ], n = 0;
    __m256 m8[RL_ATTN_SQ];
    __m512d sv[RL_ATTN_SQ];
    RL_ATTN_EACH {
        x[k] = a + k * np + j0[k], len[k] = j1[k] - j0[k];
        n = len[k] > n ? len[k] : n;
        m8[k] = _mm256_set1_ps(m[k]);
        sv[k] = _mm512_setzero_pd();
    }
    for (size_t t = 0; t < n; t += 8 * g) {
        __m256 xv[RL_ATTN_SQ * 4], e[RL_ATTN_SQ * 4];
        __mmask8 mk[RL_ATTN_SQ * 4];
        RL_ATTN_EACH _Pragma("GCC unroll 4") for (size_t b = 0; b < g; b++) {
            const size_t i = k * g + b, u = t + 8 * b;
            mk[i] = u >= len[k] ? 0 : len[k] - u >= 8 ? 0xff : (__mmask8)((1u << (len[k] - u)) - 1u);
            xv[i] = _mm256_sub_ps(mk[i] == 0xff ? _mm256_loadu_ps(x[k] + u)
                                  : mk[i]         ? _mm256_maskz_loadu_ps(mk[i], x[k] + u)
                                                  : _mm256_setzero_ps(),
                                  m8[k]);
        }
        rl_expf8n_avx512(e, xv, (int)(nq * g));
        RL_ATTN_EACH _Pragma("GCC unroll 4") for (size_t b = 0; b < g; b++) {
            const size_t i = k * g + b;
            const __m256 ei = _mm256_maskz_mov_ps(mk[i], e[i]);
            if (mk[i] == 0xff)
                _mm256_storeu_ps(x[k] + t + 8 * b, ei);
            else if (mk[i])
                _mm256_mask_storeu_ps(x[k] + t + 8 * b, mk[i], ei);
            sv[k] = _mm512_add_pd(sv[k], _mm512_cvtps_pd(ei));
        }
    }
    /* rl_softmax_tree in registers: lanes l + (l + 4), then + 2, + 1 */
    RL_ATTN_EACH {
        const __m256d b = _mm256_add_pd(_mm512_castpd512_pd256(sv[k]),
                                        _mm512_extractf64x4_pd(sv[k], 1));
        const __m128d c = _mm_add_pd(_mm256_castpd256_pd128(b), _mm256_extractf128_pd(b, 1));
        sum[k] = _mm_cvtsd_f64(_mm_add_sd(c, _mm_unpackhi_pd(c, c)));
    }
}

/* rl_softmax_exp_n for a tile's nq rows, RL_ATTN_SQ at a time, their
 * number a constant in each: four exponentials of eight in flight (one,
 * two or four groups a row). */
__attribute__((target(RL_TARGET_AVX512))) static void
rl_softmax_exp_tile(float *a, size_t np, const size_t *j0, const size_t *j1, const float *m,
                    size_t nq, double *sum) {
    for (size_t k0 = 0; k0 < nq; k0 += RL_ATTN_SQ) {
        float *ak = a + k0 * np;
        switch (nq - k0 < RL_ATTN_SQ ? nq - k0 : RL_ATTN_SQ) {
        case 1:
            rl_softmax_exp_n(ak, np, j0 + k0, j1 + k0, m + k0, 1, 4, sum + k0);
            break;
        case 2:
            rl_softmax_exp_n(ak, np, j0 + k0, j1 + k0, m + k0, 2, 2, sum + k0);
            break;
        case 3:
            rl_softmax_exp_n(ak, np, j0 + k0, j1 + k0, m + k0, 3, 1, sum + k0);
            break;
        default:
            rl_softmax_exp_n(ak, np, j0 + k0, j1 + k0, m + k0, 4, 1, sum + k0);
            break;
        }
    }
}

__attribute__((target(RL_TARGET_AVX512))) static void
rl_softmax_scale_avx512(float *a, size_t j0, size_t j1, double sum) {
    const size_t n = j1 - j0;
    float *x = a + j0;
    const __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
    /* eight at a time, as the exponentials were stored (a load that one
     * store holds is forwarded from it) */
    size_t t = 0;
    for (; t + 8 <= n; t += 8)
        _mm256_storeu_ps(x + t, _mm256_mul_ps(_mm256_loadu_ps(x + t), inv));
    if (t < n) {
        const __mmask8 mk = (__mmask8)((1u << (n - t)) - 1u);
        _mm256_mask_storeu_ps(x + t, mk, _mm256_mul_ps(_mm256_maskz_loadu_ps(mk, x + t), inv));
    }
}

/* Query i's keys: [j0, j1). */
static void rl_attn_range(size_t n, size_t window, size_t i, size_t *j0, size_t *j1) {
    *j0 = 0, *j1 = n;
    if (window) {
        const size_t half = window / 2;
        *j0 = i > half ? i - half : 0;
        *j1 = n - i > half ? i + half + 1 : n;
    }
}

/* Values per thread below which attention stays on one thread. */
#define RL_ATTN_MIN_VALUES 524288

typedef struct {
    const float *q, *kh, *v;
    float *out;
    size_t nq; /* queries: n, or fewer for rl_attention_rows (global only) */
    size_t n, heads, hd, window;
    size_t np; /* AVX-512: n rounded up to 16, the stride of the transposed keys */
    float scale;
    rl_matvec_f32_kernel dot;
    rl_wsum_fn wsum;
    rl_softmax_fn softmax;
    float *scores; /* per chunk: n floats (AVX-512: RL_ATTN_QT * np) */
    int *nonfinite; /* NULL, or set to 1 when an output holds a NaN or an infinity */
} rl_attn_job;

/* Note for the caller that asked (j->nonfinite) that an output holds a
 * NaN or an infinity: chunks on several threads may each store 1. */
static void rl_attn_flag(const rl_attn_job *j) {
    if (j->nonfinite)
        __atomic_store_n(j->nonfinite, 1, __ATOMIC_RELAXED);
}

static void rl_attn_run(void *ctx, int ith, int nth) {
    const rl_attn_job *j = ctx;
    const size_t row = j->heads * j->hd;
    float *a = j->scores + (size_t)ith * j->n;
    size_t p0, p1;
    /* Items are (head, query) pairs, query fastest: one head's keys stay
     * hot in cache across consecutive queries. */
    rl_pool_chunk(j->heads * j->nq, ith, nth, 1, &p0, &p1);
    for (size_t it = p0; it < p1; it++) {
        const size_t h = it / j->nq, i = it % j->nq;
        size_t j0, j1;
        rl_attn_range(j->n, j->window, i, &j0, &j1);
        const float *qi = j->q + i * row + h * j->hd;
        const float *kh = j->kh + h * j->n * j->hd;
        j->dot(kh, j->hd, qi, j0, j1, NULL, a);
        j->softmax(a, j0, j1, j->scale);
        float *o = j->out + i * row + h * j->hd;
        j->wsum(o, a, j->v + h * j->hd, row, j0, j1, j->hd);
        /* scanned while in cache (these paths do not test as they store) */
        if (j->nonfinite && rl_first_non_finite_f32(o, j->hd) < j->hd)
            rl_attn_flag(j);
    }
}

/* ---- attention, AVX-512 ---------------------------------------------- */

/* Lane l of a block of sixteen keys (kb) for each query of a tile (query
 * k's columns at q + k * qstride): the fmaf chain over columns c = l, l +
 * 16, ... below hd in increasing c, from +0 (+0 when l >= hd).  A column of
 * the block is loaded once for all the queries. */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_attn_lane(const float *kb, const float *q, size_t qstride, size_t hd, size_t nq, size_t l,
             __m512 *acc) {
    RL_ATTN_EACH acc[k] = _mm512_setzero_ps();
    for (size_t c = l; c < hd; c += 16) {
        const __m512 kv = _mm512_loadu_ps(kb + c * 16);
        RL_ATTN_EACH acc[k] = _mm512_fmadd_ps(_mm512_set1_ps(q[k * qstride + c]), kv, acc[k]);
    }
}

/* The tree over the sixteen lanes, as its sums come: lanes l and l + 8
 * (l < 8), those sums l and l + 4 (l < 4), then l and l + 2, then the two
 * (matvec.h's order), each sum made as soon as its two halves are, so a
 * query holds a few partial sums at a time, not sixteen lanes.  The empty
 * asm pins each sum where it is made: with the head size a constant (the
 * lanes' loops unrolled) the compiler would otherwise take every lane
 * first and spill them (slower by half). */
#define RL_ATTN_TREE_STEP(NAME, SUB, D)                                                    \
    __attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void NAME(     \
        const float *kb, const float *q, size_t qstride, size_t hd, size_t nq, size_t l,   \
        __m512 *acc) {                                                                     \
        __m512 y[RL_ATTN_SQ];                                                              \
        SUB(kb, q, qstride, hd, nq, l, acc);                                               \
        SUB(kb, q, qstride, hd, nq, l + (D), y);                                           \
        RL_ATTN_EACH {                                                                     \
            acc[k] = _mm512_add_ps(acc[k], y[k]);                                          \
            __asm__("" : "+v"(acc[k]));                                                    \
        }                                                                                  \
    }
RL_ATTN_TREE_STEP(rl_attn_tree8, rl_attn_lane, 8)
RL_ATTN_TREE_STEP(rl_attn_tree4, rl_attn_tree8, 4)
RL_ATTN_TREE_STEP(rl_attn_tree2, rl_attn_tree4, 2)
RL_ATTN_TREE_STEP(rl_attn_tree1, rl_attn_tree2, 1)
#undef RL_ATTN_TREE_STEP

/* Scores of nq <= RL_ATTN_SQ queries of a tile (query k's columns at
 * q + k * qstride, its keys [j0[k], j1[k])), times scale: query k's at a +
 * k * np, written for whole blocks of sixteen keys over the union of the
 * queries' ranges (the scores a query gets outside its own range are
 * never read).  kt is the head's keys transposed in blocks of sixteen
 * (column c of key t at kt[(t / 16) * 16 * row + c * 16 + t mod 16]: a
 * block's columns one register apart, one pointer reaching them all), so
 * lane l of the matvec.h order (columns c = l mod 16) is one register over
 * 16 keys: the fmaf chain of each lane in increasing c, then the tree,
 * then the product by scale (the softmax's first step, nn.h).  m[k] is
 * the largest scaled score of query k's range as the scalar softmax's
 * loop finds it (a NaN never taken; no lane's maximum is a NaN, so their
 * order does not matter). */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_attn_scores_n(const float *kt, size_t row, const float *q, size_t qstride, size_t hd,
                 const size_t *j0, const size_t *j1, size_t nq, float scale, float *a, size_t np,
                 float *m) {
    size_t lo = j0[0], hi = j1[0];
    for (size_t k = 1; k < nq; k++)
        lo = j0[k] < lo ? j0[k] : lo, hi = j1[k] > hi ? j1[k] : hi;
    const __m512 sc = _mm512_set1_ps(scale);
    __m512 mv[RL_ATTN_SQ];
    RL_ATTN_EACH mv[k] = _mm512_set1_ps(-INFINITY);
    for (size_t t = lo / 16 * 16; t < hi; t += 16) {
        __m512 sum[RL_ATTN_SQ];
        rl_attn_tree1(kt + t * row, q, qstride, hd, nq, 0, sum);
        RL_ATTN_EACH {
            const __m512 v = _mm512_mul_ps(sum[k], sc);
            _mm512_storeu_ps(a + k * np + t, v);
            /* the lanes of [j0[k], j1[k]), none in a block outside it */
            if (t + 16 <= j0[k] || j1[k] <= t)
                continue;
            const __mmask16 lm = t < j0[k] ? (__mmask16)(0xffffu << (j0[k] - t)) : 0xffff;
            const __mmask16 hm = j1[k] - t >= 16 ? 0xffff : (__mmask16)((1u << (j1[k] - t)) - 1u);
            mv[k] = _mm512_mask_max_ps(mv[k], lm & hm, v, mv[k]);
        }
    }
    RL_ATTN_EACH m[k] = _mm512_reduce_max_ps(mv[k]);
}

/* o_k[c] = sum_t p_k[t] * v[t * stride + c] (rl_wsum_ref's rounding) for
 * the nq <= RL_ATTN_QT queries k of a tile, query k over keys [j0[k],
 * j1[k]); p_k at p + k * np; columns c < m, nc registers of sixteen at a
 * time (nc 1 or 2, a constant, as nq is, where it is inlined; a column
 * past m masked off).  Keys all of the tile's queries take share one
 * pass; at the edges of a window each query adds only its own keys.
 * Answers whether a value it stored is a NaN or an infinity (each tested
 * as it is stored). */
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline int
rl_attn_wsum_n(float *o, size_t ostride, const float *p, size_t np, const float *v,
               size_t stride, const size_t *j0, const size_t *j1, size_t nq, size_t c,
               size_t m, int nc) {
    size_t lo = j0[0], hi = j1[0], in0 = j0[0], in1 = j1[0];
    for (size_t k = 1; k < nq; k++) {
        lo = j0[k] < lo ? j0[k] : lo, hi = j1[k] > hi ? j1[k] : hi;
        in0 = j0[k] > in0 ? j0[k] : in0, in1 = j1[k] < in1 ? j1[k] : in1;
    }
    if (in0 > in1)
        in0 = in1 = hi; /* no key common to all: every key takes the edge loop */
    __mmask16 cm[2];
    for (int h = 0; h < nc; h++)
        cm[h] = m - c - 16 * h >= 16 ? 0xffff : (__mmask16)((1u << (m - c - 16 * h)) - 1u);
    __m512 acc[2][RL_ATTN_QT];
    _Pragma("GCC unroll 2") for (int h = 0; h < nc; h++) RL_ATTN_EACH acc[h][k] = _mm512_setzero_ps();
    /* one key: every query whose range holds it (all of them, between the
     * edges).  A query's probability is broadcast once for its nc
     * registers: the empty asm keeps it in a register, where the compiler
     * would fold a broadcast load into each product, and the loads (nq
     * broadcasts and nc rows a key) are what holds this loop. */
#define RL_ATTN_KEY(t, ALL)                                                                \
    {                                                                                      \
        __m512 vt[2];                                                                      \
        _Pragma("GCC unroll 2") for (int h = 0; h < nc; h++)                               \
            vt[h] = _mm512_maskz_loadu_ps(cm[h], v + (t) * stride + c + 16 * h);           \
        RL_ATTN_EACH if ((ALL) || ((t) >= j0[k] && (t) < j1[k])) {                         \
            __m512 pk = _mm512_set1_ps(p[k * np + (t)]);                                   \
            if (nc > 1)                                                                    \
                __asm__("" : "+v"(pk));                                                    \
            _Pragma("GCC unroll 2") for (int h = 0; h < nc; h++)                           \
                acc[h][k] = _mm512_add_ps(acc[h][k], _mm512_mul_ps(pk, vt[h]));            \
        }                                                                                  \
    }
    for (size_t t = lo; t < in0; t++)
        RL_ATTN_KEY(t, 0)
    for (size_t t = in0; t < in1; t++)
        RL_ATTN_KEY(t, 1)
    for (size_t t = in1 > lo ? in1 : lo; t < hi; t++)
        RL_ATTN_KEY(t, 0)
#undef RL_ATTN_KEY
    __mmask16 bad = 0;
    _Pragma("GCC unroll 2") for (int h = 0; h < nc; h++) RL_ATTN_EACH {
        _mm512_mask_storeu_ps(o + k * ostride + c + 16 * h, cm[h], acc[h][k]);
        bad |= RL_NN_NONFINITE_512(cm[h], acc[h][k]);
    }
    return bad != 0;
}

/* A tile's scores (rl_attn_scores_n, RL_ATTN_SQ queries at a time) and
 * weighted sums (rl_attn_wsum_n, all its queries, thirty-two columns a
 * pass, then sixteen), the number of queries a constant in each, and for
 * the scores the encoders' head sizes, 16 and 32, too (no loop over a
 * lane's one or two columns). */
__attribute__((target(RL_TARGET_AVX512))) static void
rl_attn_scores_tile(const float *kt, size_t row, const float *q, size_t qstride, size_t hd,
                    const size_t *j0, const size_t *j1, size_t nq, float scale, float *a,
                    size_t np, float *m) {
    for (size_t k0 = 0; k0 < nq; k0 += RL_ATTN_SQ) {
        const float *qk = q + k0 * qstride;
        float *ak = a + k0 * np;
        const size_t sq = nq - k0 < RL_ATTN_SQ ? nq - k0 : RL_ATTN_SQ;
        switch ((hd == 16 ? 0 : hd == 32 ? 1 : 2) * RL_ATTN_SQ + sq - 1) {
#define RL_ATTN_NQ(s, n, d)                                                                \
    case s * RL_ATTN_SQ + n - 1:                                                           \
        rl_attn_scores_n(kt, row, qk, qstride, d, j0 + k0, j1 + k0, n, scale, ak, np, m + k0); \
        break;
#define RL_ATTN_HD(s, d) RL_ATTN_NQ(s, 1, d) RL_ATTN_NQ(s, 2, d) RL_ATTN_NQ(s, 3, d) RL_ATTN_NQ(s, 4, d)
            RL_ATTN_HD(0, 16) RL_ATTN_HD(1, 32) RL_ATTN_HD(2, hd)
#undef RL_ATTN_HD
#undef RL_ATTN_NQ
        default:
            break;
        }
    }
}

__attribute__((target(RL_TARGET_AVX512))) static int
rl_attn_wsum_tile(float *o, size_t ostride, const float *p, size_t np, const float *v,
                  size_t stride, const size_t *j0, const size_t *j1, size_t nq, size_t m) {
    int bad = 0;
    for (size_t c = 0; c < m;) {
        const int nc = m - c > 16 ? 2 : 1;
        switch (nq * 2 + (size_t)nc - 1) {
#define RL_ATTN_NQ(n, w)                                                                   \
    case n * 2 + w - 1:                                                                    \
        bad |= rl_attn_wsum_n(o, ostride, p, np, v, stride, j0, j1, n, c, m, w);           \
        break;
            RL_ATTN_NQ(1, 1) RL_ATTN_NQ(1, 2) RL_ATTN_NQ(2, 1) RL_ATTN_NQ(2, 2)
            RL_ATTN_NQ(3, 1) RL_ATTN_NQ(3, 2) RL_ATTN_NQ(4, 1) RL_ATTN_NQ(4, 2)
            RL_ATTN_NQ(5, 1) RL_ATTN_NQ(5, 2) RL_ATTN_NQ(6, 1) RL_ATTN_NQ(6, 2)
            RL_ATTN_NQ(7, 1) RL_ATTN_NQ(7, 2) RL_ATTN_NQ(8, 1) RL_ATTN_NQ(8, 2)
#undef RL_ATTN_NQ
        default:
            break;
        }
        c += 16 * (size_t)nc;
    }
    return bad;
}

#undef RL_ATTN_EACH

/* Items are (head, tile of RL_ATTN_QT queries), tile fastest. */
__attribute__((target(RL_TARGET_AVX512))) static void
rl_attn_run_avx512(void *ctx, int ith, int nth) {
    const rl_attn_job *j = ctx;
    const size_t row = j->heads * j->hd, tiles = (j->nq + RL_ATTN_QT - 1) / RL_ATTN_QT;
    float *a = j->scores + (size_t)ith * RL_ATTN_QT * j->np;
    size_t p0, p1;
    rl_pool_chunk(j->heads * tiles, ith, nth, 1, &p0, &p1);
    int bad = 0;
    for (size_t it = p0; it < p1; it++) {
        const size_t h = it / tiles, i0 = it % tiles * RL_ATTN_QT;
        const size_t nq = j->nq - i0 < RL_ATTN_QT ? j->nq - i0 : RL_ATTN_QT;
        const float *kt = j->kh + h * j->hd * 16;
        size_t j0[RL_ATTN_QT] = {0}, j1[RL_ATTN_QT] = {0};
        double sum[RL_ATTN_QT];
        float mx[RL_ATTN_QT];
        for (size_t k = 0; k < nq; k++)
            rl_attn_range(j->n, j->window, i0 + k, &j0[k], &j1[k]);
        rl_attn_scores_tile(kt, row, j->q + i0 * row + h * j->hd, row, j->hd, j0, j1, nq,
                            j->scale, a, j->np, mx);
        rl_softmax_exp_tile(a, j->np, j0, j1, mx, nq, sum);
        for (size_t k = 0; k < nq; k++)
            rl_softmax_scale_avx512(a + k * j->np, j0[k], j1[k], sum[k]);
        bad |= rl_attn_wsum_tile(j->out + i0 * row + h * j->hd, row, a, j->np,
                                 j->v + h * j->hd, row, j0, j1, nq, j->hd);
    }
    if (bad)
        rl_attn_flag(j);
}

/* kt[(t / 16) * 16 * row + c * 16 + t mod 16] = k[t * row + c] for t < n,
 * and 0 for n <= t < np (np a multiple of 16 past n): each block of sixteen
 * keys is its row columns one after another, sixteen keys to a column;
 * sixteen keys by sixteen columns at a time,
 * transposed in registers (copies: the bits as they were). */
__attribute__((target(RL_TARGET_AVX512))) static void
rl_attn_transpose_avx512(const float *k, size_t n, size_t row, float *kt, size_t np) {
    for (size_t t0 = 0; t0 < np; t0 += 16) {
        const size_t nt = t0 >= n ? 0 : n - t0 < 16 ? n - t0 : 16;
        for (size_t c0 = 0; c0 < row; c0 += 16) {
            const __mmask16 cm = row - c0 >= 16 ? 0xffff : (__mmask16)((1u << (row - c0)) - 1u);
            __m512 r[16], u[16];
            for (size_t i = 0; i < 16; i++)
                r[i] = i < nt ? _mm512_maskz_loadu_ps(cm, k + (t0 + i) * row + c0)
                              : _mm512_setzero_ps();
            /* 2x2 blocks of single values, then of pairs, then of 128-bit
             * lanes, then of 256-bit halves */
            for (int i = 0; i < 16; i += 2) {
                u[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                u[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 16; i += 4) {
                r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[i]), _mm512_castps_pd(u[i + 2])));
                r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[i]), _mm512_castps_pd(u[i + 2])));
                r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[i + 1]), _mm512_castps_pd(u[i + 3])));
                r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[i + 1]), _mm512_castps_pd(u[i + 3])));
            }
            for (int i = 0; i < 16; i += 8)
                for (int j = 0; j < 4; j++) {
                    u[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
                    u[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
                }
            for (int j = 0; j < 8; j++) {
                r[j] = _mm512_shuffle_f32x4(u[j], u[j + 8], 0x88);
                r[j + 8] = _mm512_shuffle_f32x4(u[j], u[j + 8], 0xdd);
            }
            for (size_t c = 0; c < 16 && c0 + c < row; c++)
                _mm512_storeu_ps(kt + t0 * row + (c0 + c) * 16, r[c]);
        }
    }
}

/* Attention's kernels per path (kernel.h).  The AVX-512 paths run the
 * query-tiled worker on transposed keys (tiled = 1), the others one query
 * at a time with the weighted sum and softmax of their path (AVX2's on the
 * AVX-512 paths too) and matvec.c's f32 rows for the scores. */
typedef struct {
    void (*run)(void *ctx, int ith, int nth);
    int tiled;
    rl_wsum_fn wsum;
    rl_softmax_fn softmax;
} rl_attn_kernels;

static const rl_attn_kernels rl_attn_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = {rl_attn_run, 0, rl_wsum_ref, rl_softmax_ref},
    [RL_PATH_AVX2] = {rl_attn_run, 0, rl_wsum_avx2, rl_softmax_avx2},
    [RL_PATH_AVX512] = {rl_attn_run_avx512, 1, rl_wsum_avx2, rl_softmax_avx2},
    [RL_PATH_AVX512VNNI] = {rl_attn_run_avx512, 1, rl_wsum_avx2, rl_softmax_avx2},
};

/* Queries [0, nq) of q against the n keys and values (nq == n, or any nq
 * with window 0): rl_attention_ex and rl_attention_rows_ex. */
static rl_status rl_attention_run(const float *q, size_t nq, const float *k, const float *v,
                                  size_t n, size_t n_heads, size_t head_dim, size_t window,
                                  float *out, int *nonfinite, rl_path path, int threads) {
    if (nonfinite)
        *nonfinite = 0;
    rl_status st = rl_check_run(path, threads);
    if (st != RL_OK)
        return st;
    size_t row = rl_nn_elems(n_heads, head_dim), nd = row ? rl_nn_elems(n, row) : 0,
           qd = row ? rl_nn_elems(nq, row) : 0;
    if (!row || (n && !nd) || (nq && !qd) || (nq && !n) || (nq != n && window) ||
        (nq && (!q || !k || !v || !out)) || rl_nn_overlap(out, qd, q, qd) ||
        rl_nn_overlap(out, qd, k, nd) || rl_nn_overlap(out, qd, v, nd))
        return RL_BADARG;
    if (nq == 0)
        return RL_OK;
    const rl_attn_kernels *ker = &rl_attn_table[path];
    const int wide = ker->tiled;
    /* whole blocks of sixteen keys */
    const size_t np = (n + 15) / 16 * 16;
    /* Values are (query, key, column) triples, a score's and a weighted
     * sum's multiply-add each; a thread wants some 25 us of them.  With a
     * smaller share (s1-nano's 8 heads of 16 at 32 tokens took 2 threads)
     * the split's wake-up and waits cost more than it saves. */
    int nth = rl_nn_threads(threads, n_heads * nq, n * head_dim, RL_ATTN_MIN_VALUES);
    /* chunks of (head, query) items or (head, query tile) items; scores per chunk */
    const int chunks = rl_pool_split_chunks(
        nth, n_heads * (wide ? (nq + RL_ATTN_QT - 1) / RL_ATTN_QT : nq));
    /* keys (AVX-512: transposed and padded to np), then per-chunk scores */
    const size_t kn = wide ? rl_nn_elems(np, row) : nd;
    const size_t sn = wide ? rl_nn_elems((size_t)chunks * RL_ATTN_QT, np)
                           : rl_nn_elems((size_t)chunks, n);
    if (!kn || !sn || kn > SIZE_MAX / sizeof(float) - 16 || sn > SIZE_MAX / sizeof(float) - 16 - kn)
        return RL_BADARG;
    /* From a cache line on: every block of transposed keys is whole
     * lines (np * row floats, a multiple of sixteen, before the scores),
     * so no 64-byte load of a key column straddles two (each would cost
     * two loads: a sixth of the scores' time at 8 heads of 32); malloc
     * and a rounded pointer, so the heap sees the same requests as
     * before */
    void *block = malloc((kn + sn + 16) * sizeof(float));
    if (!block)
        return RL_NOMEM;
    float *scratch = (float *)(((uintptr_t)block + 63) & ~(uintptr_t)63);
    float *kh = scratch;
    if (wide) {
        /* head h, column c, key t at kh[(t / 16) * 16 * row + (h *
         * head_dim + c) * 16 + t mod 16]; zero past n: k (n x row)
         * transposed block by block */
        rl_attn_transpose_avx512(k, n, row, kh, np);
    } else {
        /* Head-major keys: the dot kernels want rows of head_dim contiguous. */
        for (size_t t = 0; t < n; t++)
            for (size_t h = 0; h < n_heads; h++)
                memcpy(kh + (h * n + t) * head_dim, k + t * row + h * head_dim,
                       head_dim * sizeof(float));
    }
    rl_attn_job job = {.q = q, .kh = kh, .v = v, .out = out, .nq = nq, .n = n, .heads = n_heads,
                       .hd = head_dim, .window = window, .np = np,
                       .scale = 1.0f / sqrtf((float)head_dim),
                       .dot = rl_matvec_f32_table[path], .wsum = ker->wsum,
                       .softmax = ker->softmax, .scores = scratch + kn,
                       .nonfinite = nonfinite};
    rl_pool_run_split(chunks, nth, ker->run, &job);
    free(block);
    return RL_OK;
}

rl_status rl_attention_nf_ex(const float *q, const float *k, const float *v, size_t n,
                             size_t n_heads, size_t head_dim, size_t window, float *out,
                             int *nonfinite, rl_path path, int threads) {
    return rl_attention_run(q, n, k, v, n, n_heads, head_dim, window, out, nonfinite, path,
                            threads);
}

rl_status rl_attention_ex(const float *q, const float *k, const float *v, size_t n,
                          size_t n_heads, size_t head_dim, size_t window, float *out,
                          rl_path path, int threads) {
    return rl_attention_nf_ex(q, k, v, n, n_heads, head_dim, window, out, NULL, path, threads);
}

rl_status rl_attention_nf(const float *q, const float *k, const float *v, size_t n,
                          size_t n_heads, size_t head_dim, size_t window, float *out,
                          int *nonfinite) {
    return rl_attention_nf_ex(q, k, v, n, n_heads, head_dim, window, out, nonfinite,
                              rl_path_best(), rl_threads());
}

rl_status rl_attention(const float *q, const float *k, const float *v, size_t n,
                       size_t n_heads, size_t head_dim, size_t window, float *out) {
    return rl_attention_nf(q, k, v, n, n_heads, head_dim, window, out, NULL);
}

rl_status rl_attention_rows_nf_ex(const float *q, size_t nq, const float *k, const float *v,
                                  size_t n, size_t n_heads, size_t head_dim, float *out,
                                  int *nonfinite, rl_path path, int threads) {
    return rl_attention_run(q, nq, k, v, n, n_heads, head_dim, 0, out, nonfinite, path, threads);
}

rl_status rl_attention_rows_ex(const float *q, size_t nq, const float *k, const float *v,
                               size_t n, size_t n_heads, size_t head_dim, float *out,
                               rl_path path, int threads) {
    return rl_attention_rows_nf_ex(q, nq, k, v, n, n_heads, head_dim, out, NULL, path, threads);
}

rl_status rl_attention_rows_nf(const float *q, size_t nq, const float *k, const float *v,
                               size_t n, size_t n_heads, size_t head_dim, float *out,
                               int *nonfinite) {
    return rl_attention_rows_nf_ex(q, nq, k, v, n, n_heads, head_dim, out, nonfinite,
                                   rl_path_best(), rl_threads());
}

rl_status rl_attention_rows(const float *q, size_t nq, const float *k, const float *v,
                            size_t n, size_t n_heads, size_t head_dim, float *out) {
    return rl_attention_rows_nf(q, nq, k, v, n, n_heads, head_dim, out, NULL);
}
