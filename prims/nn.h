/* nn.h - the encoder's non-matrix steps (doc/encoder.md): LayerNorm without bias,
 * NEOX rotary embedding, attention, GeGLU; and the decision head's
 * (doc/decision.md): LayerNorm with bias, a bias and an activation per row.
 * Plain C, no ECL.
 *
 * What each computes follows llama.cpp's CPU ops (ggml-cpu/ops.cpp,
 * vec.h) for a ModernBERT graph; the order of every sum is fixed here so
 * that the scalar reference, the SIMD path and any thread count answer the
 * same bits.  All arrays are row-major f32, one row per token; n tokens at
 * positions 0..n-1.  The softmax's exponential and GELU's erf are
 * vmath.h's rl_expf and rl_erff (the same bits in scalar and SIMD form);
 * the other transcendentals (tanhf, cosf, sinf, powf) come from libm on
 * every path.
 *
 * Every entry validates before any worker starts, never longjmps, and
 * answers RL_OK, RL_BADARG (NULL data, zero or odd sizes where the
 * function says, sizes that overflow, out aliasing an input it may not),
 * RL_UNSUPPORTED (a path this CPU cannot run) or RL_NOMEM.
 */
#ifndef RL_PRIMS_NN_H
#define RL_PRIMS_NN_H

#include <stddef.h>

#include "prims/cpu.h"
#include "prims/q8.h"

/* rl_attention and rl_attention_ex (one of the steps; declared there) */
#include "prims/attention.h"

typedef enum {
    RL_GELU_ERF = 0, /* exact: 0.5 x (1 + erf(x / sqrt 2)), the model's definition */
    RL_GELU_TANH     /* llama.cpp's tanh approximation */
} rl_gelu;

/* LayerNorm without bias, per row of d values (d >= 1):
 *   sum  = sum_j x_j in double, j increasing;    mean = (float)(sum / d)
 *   y_j  = x_j - mean (f32);  var = (float)(sum_j (double)(y_j * y_j) / d),
 *          the f32 square summed in double, j increasing
 *   s    = 1.0f / sqrtf(var + eps);   out_j = (y_j * s) * w_j   (f32)
 * except that s is NaN when var + eps is infinite (a row of values too
 * large to square in f32 answers NaN, not zeros).  out may be x. */
rl_status rl_layer_norm(const float *x, size_t n, size_t d, const float *w, float eps,
                        float *out);
rl_status rl_layer_norm_ex(const float *x, size_t n, size_t d, const float *w, float eps,
                           float *out, rl_path path, int threads);

/* LayerNorm with bias: rl_layer_norm's steps, then out_j = ((y_j * s) * w_j)
 * + b_j (f32).  b NULL is rl_layer_norm itself. */
rl_status rl_layer_norm_bias(const float *x, size_t n, size_t d, const float *w,
                             const float *b, float eps, float *out);
rl_status rl_layer_norm_bias_ex(const float *x, size_t n, size_t d, const float *w,
                                const float *b, float eps, float *out, rl_path path,
                                int threads);

/* The row steps' checked forms (rl_layer_norm_bias_nf, rl_bias_act_nf,
 * rl_geglu_nf): the step on the best path and the knob's threads, the same
 * bits, and *nonfinite set to 1 when out holds a NaN or an infinity, else
 * 0: each row is tested as it is stored (AVX-512) or scanned just after
 * (the other paths), so the encoder's finite-value check of a step's
 * output costs no pass of its own.  b NULL: no bias. */
rl_status rl_layer_norm_bias_nf(const float *x, size_t n, size_t d, const float *w,
                                const float *b, float eps, float *out, int *nonfinite);

typedef enum {
    RL_NN_NONE = 0, /* identity */
    RL_NN_RELU,     /* v < 0 ? 0 : v (a NaN stays NaN) */
    RL_NN_GELU      /* exact: rl_gelu_f32(v, RL_GELU_ERF) */
} rl_nn_act;

/* A bias and an activation per row: out[t][j] = act(x[t][j] + b[j]), the
 * sum in f32 (no bias when b is NULL: act(x[t][j])).  x and out are n x d
 * (d >= 1); out may be x.  Scalar on every path (the same f32 steps), rows
 * split across threads. */
rl_status rl_bias_act(const float *x, size_t n, size_t d, const float *b, rl_nn_act act,
                      float *out);
rl_status rl_bias_act_ex(const float *x, size_t n, size_t d, const float *b, rl_nn_act act,
                         float *out, rl_path path, int threads);
rl_status rl_bias_act_nf(const float *x, size_t n, size_t d, const float *b, rl_nn_act act,
                         float *out, int *nonfinite);

/* The residual sum: out[i] = a[i] + b[i] (f32) for i below n, out a, b or
 * apart from both; *nonfinite (when not NULL) set to 1 when a sum is a
 * NaN or an infinity, else 0, each tested as it is stored.  One thread. */
rl_status rl_add_nf(const float *a, const float *b, size_t n, float *out, int *nonfinite);
rl_status rl_add_nf_ex(const float *a, const float *b, size_t n, float *out, int *nonfinite,
                       rl_path path);

/* NEOX RoPE on each head of each row (rows of n_heads * head_dim values,
 * head_dim even): with half = head_dim / 2, theta_scale = powf(freq_base,
 * -2.0f / head_dim), and for position p the angles theta_0 = (float)p,
 * theta_{i+1} = theta_i * theta_scale (f32, as llama.cpp's rope cache),
 * c_i = cosf(theta_i), s_i = sinf(theta_i):
 *   out[i]        = x[i] * c_i - x[i + half] * s_i
 *   out[i + half] = x[i] * s_i + x[i + half] * c_i      (f32, no fma)
 * out may be x. */
rl_status rl_rope_neox(const float *x, size_t n, size_t n_heads, size_t head_dim,
                       float freq_base, float *out);
rl_status rl_rope_neox_ex(const float *x, size_t n, size_t n_heads, size_t head_dim,
                          float freq_base, float *out, rl_path path, int threads);

/* rl_rope_neox of q into q_out and of k into k_out (each may be its
 * input; neither overlaps the other pair), both of n x (n_heads *
 * head_dim): the same bits as two calls, the angles' cosines and sines
 * computed once per position for both (an encoder layer's queries and
 * keys).  k or k_out NULL is RL_BADARG. */
rl_status rl_rope_neox2(const float *q, const float *k, size_t n, size_t n_heads,
                        size_t head_dim, float freq_base, float *q_out, float *k_out);
rl_status rl_rope_neox2_ex(const float *q, const float *k, size_t n, size_t n_heads,
                           size_t head_dim, float freq_base, float *q_out, float *k_out,
                           rl_path path, int threads);

/* rl_rope_neox2_ex with the rows of q and of k stride floats apart (at
 * least n_heads * head_dim; the outputs packed and not the inputs): an
 * encoder layer's queries and keys turned straight out of the fused QKV
 * product's n x 3d rows, stride 3d, into their own arrays, the same bits
 * as copying them out first. */
rl_status rl_rope_neox2_strided_ex(const float *q, const float *k, size_t stride, size_t n,
                                   size_t n_heads, size_t head_dim, float freq_base,
                                   float *q_out, float *k_out, rl_path path, int threads);

/* GeGLU: x is n x 2f, out n x f; with a = x[t][c], g = x[t][f + c]:
 *   erf:  out = ((0.5f * a) * (1.0f + rl_erff(a * SQRT_2_INV))) * g
 *   tanh: out = ((0.5f * a) * (1.0f + tanhf((SQRT_2_OVER_PI * a) *
 *               (1.0f + (GELU_COEF_A * a) * a)))) * g
 * (llama.cpp's constants; f32, left to right, no fma).  out must not
 * overlap x. */
rl_status rl_geglu(const float *x, size_t n, size_t f, rl_gelu kind, float *out);
rl_status rl_geglu_ex(const float *x, size_t n, size_t f, rl_gelu kind, float *out,
                      rl_path path, int threads);
rl_status rl_geglu_nf(const float *x, size_t n, size_t f, rl_gelu kind, float *out,
                      int *nonfinite);

/* One GELU value, as rl_geglu applies it (tests, references). */
float rl_gelu_f32(float a, rl_gelu kind);

/* The index of the first NaN or infinity among the n values of x, or n
 * when all are finite (x may be NULL when n is 0).  The encoder checks
 * the steps' outputs with it, so it reads 16 or 32 values at a time
 * with no branch per value. */
size_t rl_first_non_finite_f32(const float *x, size_t n);

#endif
