/* matmul.h - a weight matrix times a sequence of activation rows (doc/products.md §3),
 * the encoder's matrix products.  Plain C, no ECL.
 *
 * y (n x rows) = x (n x cols) times W^T, W rows x cols, one output row per
 * token, so that a whole sequence goes through each weight matrix once:
 *   - Q8_0 W: row t of y is bit for bit the matvec of x's row t (matvec.h)
 *     with the same activations: RL_ACT_Q8 (doc/products.md §1) or RL_ACT_Q8X2
 *     (doc/products.md §2: per block, the Q8_0 quants of x plus residual quants r_j of
 *     x_j - d * qx_j at 128 / d).
 *   - F32, F16 and BF16 W (widened exactly to f32): each output is the
 *     16-lane f32 dot product of matvec.h's f32 baseline (fmaf per lane in
 *     increasing column order, then the fixed pairwise tree).
 * Every path (rl_path) and thread count gives the same bits.
 *
 * Memory: all activation rows are quantized (or, for float weights, used as
 * they are) first; then each thread takes a range of weight rows (split by
 * rl_pool_chunk in multiples of 4) and walks it in tiles small enough for
 * L1, running every token against a tile before moving on, so weights come
 * from memory once per call instead of once per token.  Float16/bfloat16
 * tiles are widened once per tile into per-thread scratch.
 *
 * Every entry validates and allocates before any worker starts and never
 * longjmps; msg (may be NULL) gets one line on failure.
 */
#ifndef RL_PRIMS_MATMUL_H
#define RL_PRIMS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "prims/cpu.h"
#include "prims/kernel.h"
#include "prims/q8.h"

/* Weight element types (the GGUF tensor types the encoder uses). */
typedef enum {
    RL_WT_F32 = 0,
    RL_WT_F16,
    RL_WT_BF16,
    RL_WT_Q8_0
} rl_wtype;

/* How activations meet Q8_0 weights (ignored for float weights). */
typedef enum {
    RL_ACT_Q8 = 0, /* doc/products.md §1: one Q8_0 pass */
    RL_ACT_Q8X2    /* doc/products.md §2: Q8_0 plus a residual pass, ~15 bits */
} rl_act;

/* With min_work, at least this many row-block-tokens (32 values of a
 * weight row times one token) per thread: for one token 4096 (~140 KB of
 * Q8_0 weights, tens of microseconds), the point where waking a worker
 * pays for a product that streams its weights from memory; for a
 * sequence, whose products run from cache at several times the speed,
 * about 2M multiply-adds (some 25 us on one AVX-512 core), below which a
 * split's wake-up and the wait for a preempted worker's chunk cost more
 * than the second thread saves.  Results do not depend on the thread
 * count, so this changes only the speed. */
#define RL_MM_MIN_WORK 4096
#define RL_MM_MIN_WORK_SEQ 65536

/* "f32", "f16", "bf16", "q8_0"; "q8", "q8x2". */
const char *rl_wtype_name(rl_wtype t);
const char *rl_act_name(rl_act a);

/* Where quantizing the activations failed: the activation row, and within
 * it the quantizer's where (q8.h: the column of the first non-finite
 * value, or the block whose scale overflows). */
typedef struct {
    size_t row, where;
} rl_mm_fault;

/* y = x W^T with the paths and threads of the knobs (cpu.h).  Errors:
 * RL_BADARG (NULL data, unknown type, sizes whose bytes overflow);
 * RL_BADLEN (Q8_0 with cols % 32 != 0); RL_NONFINITE /
 * RL_OVERFLOW (an activation row §2 refuses; msg names token and
 * column or block); RL_NOMEM.  n == 0 or rows == 0 is a no-op. */
rl_status rl_matmul(rl_wtype wt, const void *w, size_t rows, size_t cols,
                    const float *x, size_t n, float *y, rl_act act,
                    char *msg, size_t msglen, rl_mm_fault *fault);

/* The same on an explicit path and thread count (tests, benchmarks): path
 * must be rl_path_supported (else RL_UNSUPPORTED), threads >= 1 (else
 * RL_BADARG); with min_work != 0 small products use fewer threads.
 * fault (may be NULL) is set on RL_NONFINITE and RL_OVERFLOW. */
rl_status rl_matmul_ex(rl_wtype wt, const void *w, size_t rows, size_t cols,
                       const float *x, size_t n, float *y, rl_act act,
                       rl_path path, int threads, int min_work,
                       char *msg, size_t msglen, rl_mm_fault *fault);

/* A Q8_0 matrix times one vector with the given activations: x of type
 * xsrc (any rl_q8_src, widened to f32 first as the quantizer does),
 * written to yd and/or yf (either may be NULL, not both): the one-token
 * case of rl_matmul_ex, through the same driver, and what rl_matvec_q8_ex
 * and rl_matvec_run run; messages start "matvec:".  Errors as
 * rl_matmul_ex (fault->row is then 0). */
rl_status rl_matvec_q8_act_ex(const rl_block_q8_0 *w, size_t rows, size_t cols,
                              rl_q8_src xsrc, const void *x, double *yd, float *yf,
                              rl_act act, rl_path path, int threads, int min_work,
                              char *msg, size_t msglen, rl_mm_fault *fault);

/* Quantize n activation rows of cols f32 values (cols % 32 == 0) at x to
 * Q8_0 (q8.h) into xq, row after row; on a row that cannot be (a NaN or
 * infinity, a block whose scale overflows binary16) the status, msg
 * "OP: cannot quantize activation row T: ..." ("OP: cannot quantize x:
 * ..." when op is "matvec") and *fault (may be NULL).  The one check of
 * the activations every quantized weight's product makes. */
rl_status rl_mm_quantize_rows(const char *op, const float *x, size_t n, size_t cols,
                              rl_block_q8_0 *xq, rl_path path, char *msg, size_t msglen,
                              rl_mm_fault *fault);

/* ---- weights of the legacy, K and IQ4 types (matmul_quant.c) ---------- */

/* y = x W^T for W of ggml type `type`, one of prims/quants.h's (Q4_0 ..
 * Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS: a type whose type_traits row has a
 * vec_dot), rows rows of cols / block blocks at w, as ggml computes it:
 *   1. each activation row is checked and quantized to Q8_0 as for Q8_0
 *      weights (rl_mm_quantize_rows: the same errors), then, when the
 *      type's vec_dot_type is Q8_1 or Q8_K, quantized again from the f32
 *      row into that type (quants.h), once per product;
 *   2. y[t, r] = vec_dot(row r of W, activation row t), the type's row
 *      product (doc/products.md §4, §5), an f32; a double y is that f32
 *      widened.
 * With RL_ACT_Q8X2 and Q8_0 activations (Q4_0, Q5_0, IQ4_NL), each block's
 * residual quants r_j of doc/products.md §2 make a second Q8_0 row with the
 * block's own scale, and y = vec_dot(W, xq) + 2^-7 * vec_dot(W, xr) in f32;
 * for Q8_1 and Q8_K activations RL_ACT_Q8X2 changes nothing (as for float
 * weights).  A row's arithmetic never depends on the path or the split, so
 * every path and thread count gives the same bits.  Threads take ranges of
 * weight rows (multiples of 4), each walked in L1-sized tiles against
 * every token.  Errors as rl_matmul_ex, and RL_BADARG for a type without a
 * row product, RL_BADLEN for cols not a multiple of its block. */
rl_status rl_matmul_quant_ex(uint32_t type, const void *w, size_t rows, size_t cols,
                             const float *x, size_t n, float *y, rl_act act, rl_path path,
                             int threads, int min_work, char *msg, size_t msglen,
                             rl_mm_fault *fault);

/* The same with the path and threads of the knobs (cpu.h). */
rl_status rl_matmul_quant(uint32_t type, const void *w, size_t rows, size_t cols,
                          const float *x, size_t n, float *y, rl_act act, char *msg,
                          size_t msglen, rl_mm_fault *fault);

/* One vector x of type xsrc (widened to f32 first, as the quantizer
 * does) into yd and/or yf: the one-token case, messages starting
 * "matvec:". */
rl_status rl_matvec_quant_ex(uint32_t type, const void *w, size_t rows, size_t cols,
                             rl_q8_src xsrc, const void *x, double *yd, float *yf, rl_act act,
                             rl_path path, int threads, int min_work, char *msg, size_t msglen,
                             rl_mm_fault *fault);

/* ---- one vector: paths and threads from the knobs -------------------- */

/* y[rows] = W x with f32 x and f32 y.  cols % 32 != 0 -> RL_BADLEN;
 * non-finite x -> RL_NONFINITE (msg names the index); x whose block
 * absmax overflows the f16 scale -> RL_OVERFLOW (msg names the block);
 * RL_NOMEM.  msg (may be NULL) gets one line on failure. */
rl_status rl_matvec_q8(const rl_block_q8_0 *w, size_t rows, size_t cols,
                       const float *x, float *y, char *msg, size_t msglen);

/* The same with double x (each element cast to f32 first) and double y. */
rl_status rl_matvec_q8_f64(const rl_block_q8_0 *w, size_t rows, size_t cols,
                           const double *x, double *y, char *msg, size_t msglen);

/* f32 baseline, m row-major rows x cols (any cols).  Errors only for NULL
 * pointers (RL_BADARG) or scratch (RL_NOMEM, the f64 form). */
rl_status rl_matvec_f32(const float *m, size_t rows, size_t cols,
                        const float *x, float *y);

/* ---- one vector on an explicit path and thread count (tests, benchmarks) */

/* xsrc is RL_SRC_F32 or RL_SRC_F64 (RL_SRC_F16 / RL_SRC_BF16 work too).
 * yd and yf may each be NULL but not both; both are written when given.
 * path must be rl_path_supported (else RL_UNSUPPORTED); threads >= 1
 * (else RL_BADARG), clamped to RL_MAX_THREADS.  With min_work != 0 the
 * thread count is cut for small products (as the knob entries do);
 * benchmarks pass 0 to get exactly `threads` threads.  rl_matvec_q8_act_ex
 * with RL_ACT_Q8. */
rl_status rl_matvec_q8_ex(const rl_block_q8_0 *w, size_t rows, size_t cols,
                          rl_q8_src xsrc, const void *x, double *yd, float *yf,
                          rl_path path, int threads, int min_work,
                          char *msg, size_t msglen);

rl_status rl_matvec_f32_ex(const float *m, size_t rows, size_t cols,
                           rl_q8_src xsrc, const void *x, double *yd, float *yf,
                           rl_path path, int threads, int min_work);

/* One product's operands, as the Lisp primitives resolve them: Q8_0
 * weights w with activations act (RL_ACT_Q8 or RL_ACT_Q8X2), or weights wq
 * of ggml type `type` (rl_matmul_quant_ex's), or (w and wq NULL) the f32
 * baseline's row-major mf; x has cols and y rows floats, double when dbl,
 * else single. */
typedef struct {
    const rl_block_q8_0 *w;
    const void *wq;
    uint32_t type;
    const float *mf;
    size_t rows, cols;
    const void *x;
    void *y;
    int dbl;
    rl_act act;
} rl_matvec_operands;

/* The product of o on path with threads chunks (min_work as in
 * rl_matvec_q8_ex); msg gets the reason of a failure (empty for f32), and
 * *where (may be NULL) where quantizing x failed: the flat index of a
 * non-finite value (RL_NONFINITE) or the overflowing block
 * (RL_OVERFLOW). */
rl_status rl_matvec_run(const rl_matvec_operands *o, rl_path path, int threads, int min_work,
                        char *msg, size_t msglen, size_t *where);

/* Residual quants of doc/products.md §2 for n values x (n % 32 == 0) already
 * quantized to xq: r_j = clamp(round_half_away((x_j - d * qx_j) * (128 /
 * d)), -127, 127) per block, d = f16->f32 of the block's scale, all in f32
 * without contraction; r_j = 0 where d = 0. */
void rl_q8x2_residual(const float *x, size_t n, const rl_block_q8_0 *xq, int8_t *r);

#endif
