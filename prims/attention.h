/* attention.h - the encoder's multi-head attention (doc/encoder.md), one of the
 * non-matrix steps nn.h lists: scores, softmax, weighted sum, with the
 * full mask of the global layers and the symmetric sliding window of the
 * others.  Plain C, no ECL; validation and status codes as in nn.h.
 */
#ifndef RL_PRIMS_ATTENTION_H
#define RL_PRIMS_ATTENTION_H

#include <stddef.h>

#include "prims/cpu.h"
#include "prims/q8.h"

/* Multi-head attention without a causal mask.  q, k, v and out are n x
 * (n_heads * head_dim); head h of a row is its columns [h*head_dim,
 * (h+1)*head_dim).  For query i and head h, keys j with |i - j| <= window / 2
 * (every j when window == 0, the global layers):
 *   a_j = dot(q_i, k_j) * (1.0f / sqrtf(head_dim)): the dot is matvec.h's
 *         16-lane fma order, then one f32 product with the scale;
 *   m   = max_j a_j;   e_j = rl_expf(a_j - m)  (vmath.h);
 *   sum: eight double lanes, lane l = sum of (double)e_j over the keys j
 *        with j - j_first = l mod 8, j increasing, from +0; then s_l +
 *        s_(l+4) for l < 4, + 2, + 1;   inv = (float)(1.0 / sum);
 *   p_j = e_j * inv;
 *   out_i[c] = sum_j p_j * v_j[c]: from +0.0f, j increasing, each step
 *         o = o + p_j * v_j[c] with two f32 roundings (no fma).
 * out must not overlap q, k or v.  Scratch: a head-major copy of k. */
rl_status rl_attention(const float *q, const float *k, const float *v, size_t n,
                       size_t n_heads, size_t head_dim, size_t window, float *out);
rl_status rl_attention_ex(const float *q, const float *k, const float *v, size_t n,
                          size_t n_heads, size_t head_dim, size_t window, float *out,
                          rl_path path, int threads);

/* Global attention (window 0) of nq queries, each against all n keys and
 * values: q and out are nq x (n_heads * head_dim), k and v n x (n_heads *
 * head_dim).  Row i of out has the bits rl_attention gives row i when the
 * queries are the n rows (a query's result depends on its own row and the
 * keys only), so a caller that reads a few rows computes only those: the
 * decision head's last block, whose marker rows alone go on.  nq may be
 * 0; n must be at least 1 when nq is not.  Same status and scratch as
 * rl_attention. */
rl_status rl_attention_rows(const float *q, size_t nq, const float *k, const float *v,
                            size_t n, size_t n_heads, size_t head_dim, float *out);
rl_status rl_attention_rows_ex(const float *q, size_t nq, const float *k, const float *v,
                               size_t n, size_t n_heads, size_t head_dim, float *out,
                               rl_path path, int threads);

/* The checked forms: the same bits, and *nonfinite set to 1 when out
 * holds a NaN or an infinity, else 0 -- each output tested as it is
 * stored (AVX-512) or its row scanned just after (the other paths), so
 * the encoder's finite-value check of attention's output costs no pass of
 * its own. */
rl_status rl_attention_nf(const float *q, const float *k, const float *v, size_t n,
                          size_t n_heads, size_t head_dim, size_t window, float *out,
                          int *nonfinite);
rl_status rl_attention_nf_ex(const float *q, const float *k, const float *v, size_t n,
                             size_t n_heads, size_t head_dim, size_t window, float *out,
                             int *nonfinite, rl_path path, int threads);
rl_status rl_attention_rows_nf(const float *q, size_t nq, const float *k, const float *v,
                               size_t n, size_t n_heads, size_t head_dim, float *out,
                               int *nonfinite);
rl_status rl_attention_rows_nf_ex(const float *q, size_t nq, const float *k, const float *v,
                                  size_t n, size_t n_heads, size_t head_dim, float *out,
                                  int *nonfinite, rl_path path, int threads);

#endif
