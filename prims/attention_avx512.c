/* attention_avx512.c - attention's AVX-512 path (attention.h's
 * arithmetic; the driver in attention.c): tiles of eight queries, threads
 * splitting the (head, tile) pairs.  Scores for 16 keys at a time against
 * transposed keys, four queries at a time (each column of a block of keys
 * loaded once for the four); their exponentials four vectors of eight in
 * flight; the weighted sums of the tile's eight queries in registers, up
 * to 32 columns a pass (each probability broadcast once for the pass); the
 * keys and scores on a cache line.  Built with -ffp-contract=off so that no
 * product and sum fuse behind the spec's back.
 */
#include "prims/attention_avx512.h"

#include <immintrin.h>
#include <stdint.h>

#include "prims/kernel.h"
#include "prims/nn_common.h"
#include "prims/pool.h"
#include "prims/vmath.h"

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
__attribute__((target(RL_TARGET_AVX512))) void
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

__attribute__((target(RL_TARGET_AVX512))) void
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
__attribute__((target(RL_TARGET_AVX512))) void
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

__attribute__((target(RL_TARGET_AVX512))) int
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
__attribute__((target(RL_TARGET_AVX512))) void
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
__attribute__((target(RL_TARGET_AVX512))) void
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

