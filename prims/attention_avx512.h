/* attention_avx512.h - what attention.c's driver shares with its AVX-512
 * path (attention_avx512.c): the job its pool workers run, a query's range
 * of keys, the size of a tile of queries, and the AVX-512 steps -- the
 * driver runs the worker and the keys' transpose; tools/bench_attention
 * times each step alone.  Internal to attention; plain C, no ECL.
 */
#ifndef RL_PRIMS_ATTENTION_AVX512_H
#define RL_PRIMS_ATTENTION_AVX512_H

#include <stddef.h>

#include "prims/matvec.h"

/* o[c] = sum_t p[t] * v[t * stride + c] for c < m, t from j0 to j1 - 1 in
 * order, each step o = o + p * v with two roundings, o from +0. */
typedef void (*rl_wsum_fn)(float *o, const float *p, const float *v, size_t stride,
                           size_t j0, size_t j1, size_t m);

/* Softmax of the scores a[j0..j1) in place (nn.h): scaled, the max, e =
 * rl_expf (vmath.h), the double sum over eight lanes (lane l takes t - j0
 * = l mod 8, in increasing t) and the fixed tree (l + 4, + 2, + 1), one
 * f32 reciprocal, p = e * inv.  A path's form answers the same bits. */
typedef void (*rl_softmax_fn)(float *a, size_t j0, size_t j1, float scale);

/* Queries per AVX-512 tile: their weighted sums share each value row.
 * Their scores and exponentials go RL_ATTN_SQ queries at a time. */
#define RL_ATTN_QT 8
#define RL_ATTN_SQ 4

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

/* Query i's keys: [j0, j1). */
static inline void rl_attn_range(size_t n, size_t window, size_t i, size_t *j0, size_t *j1) {
    *j0 = 0, *j1 = n;
    if (window) {
        const size_t half = window / 2;
        *j0 = i > half ? i - half : 0;
        *j1 = n - i > half ? i + half + 1 : n;
    }
}

/* Note for the caller that asked (j->nonfinite) that an output holds a
 * NaN or an infinity: chunks on several threads may each store 1. */
static inline void rl_attn_flag(const rl_attn_job *j) {
    if (j->nonfinite)
        __atomic_store_n(j->nonfinite, 1, __ATOMIC_RELAXED);
}

/* The AVX-512 path (attention_avx512.c).  A pool worker over (head, tile
 * of RL_ATTN_QT queries) items, its job an rl_attn_job whose keys kh are
 * rl_attn_transpose_avx512's. */
void rl_attn_run_avx512(void *ctx, int ith, int nth);

/* kt[(t / 16) * 16 * row + c * 16 + t mod 16] = k[t * row + c] for t < n,
 * and 0 for n <= t < np (np a multiple of 16 past n). */
void rl_attn_transpose_avx512(const float *k, size_t n, size_t row, float *kt, size_t np);

/* A tile's steps, as the worker runs them (their comments in
 * attention_avx512.c): the scaled scores of nq queries against blocks of
 * transposed keys with each row's maximum, the exponentials and sums of
 * the softmax, its scaling, and the weighted sums (answering 1 when an
 * output is a NaN or an infinity). */
void rl_attn_scores_tile(const float *kt, size_t row, const float *q, size_t qstride, size_t hd,
                         const size_t *j0, const size_t *j1, size_t nq, float scale, float *a,
                         size_t np, float *m);
void rl_softmax_exp_tile(float *a, size_t np, const size_t *j0, const size_t *j1, const float *m,
                         size_t nq, double *sum);
void rl_softmax_scale_avx512(float *a, size_t j0, size_t j1, double sum);
int rl_attn_wsum_tile(float *o, size_t ostride, const float *p, size_t np, const float *v,
                      size_t stride, const size_t *j0, const size_t *j1, size_t nq, size_t m);

#endif
