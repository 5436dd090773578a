/* bench_rows.h - what `rontolisp bench FILE' times per tensor type: one
 * matrix-vector product in the weights' own type (the activation row
 * quantized to the type's vec_dot_type, then every row's product), one
 * thread, ours and llama.cpp's (ggml's CPU type traits, dlopened) on the
 * same bytes.  Plain C, no ECL. */
#ifndef RL_PRIMS_BENCH_ROWS_H
#define RL_PRIMS_BENCH_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "prims/kernel.h"

/* The types rl_bench_rows times: F32 (the baseline, rl_matvec_f32_ex),
 * Q8_0 (rl_matvec_q8_ex) and every type whose row has a vec_dot
 * (prims/type_traits.h). */
int rl_bench_rows_type(uint32_t type);

/* The product y = W x, one thread on path: W the rows x cols values of
 * type at w (cols a multiple of the type's block), x quantized to the
 * type's vec_dot_type into xq (rl_bench_rows_act_bytes bytes; unused for
 * F32 and Q8_0, whose kernels quantize themselves), then every row's
 * vec_dot.  RL_UNSUPPORTED (msg says why) for a type without a product or
 * a path this CPU lacks, RL_BADLEN for cols not a multiple of the block. */
rl_status rl_bench_rows_once(uint32_t type, const void *w, size_t rows, size_t cols,
                             const float *x, void *xq, float *y, rl_path path, char *msg,
                             size_t msglen);

/* Bytes of the activation row rl_bench_rows_once quantizes (0 for F32 and
 * Q8_0). */
size_t rl_bench_rows_act_bytes(uint32_t type, size_t cols);

/* rl_bench_rows_once timed by rl_bench_repeat (prims/bench.h): at least
 * min_calls calls and min_ns nanoseconds, at most cap calls or max_ns
 * (0: no limit) with 3 timed; y keeps the last result. */
rl_status rl_bench_rows(uint32_t type, const void *w, size_t rows, size_t cols, const float *x,
                        float *y, rl_path path, size_t min_calls, uint64_t min_ns,
                        uint64_t max_ns, size_t cap, double *times, size_t *done, char *msg,
                        size_t msglen);

/* Load llama.cpp's ggml from the directory dir: libggml-base.so and the
 * libggml-cpu-*.so variant whose ggml_backend_score rates this CPU highest
 * (as ggml's own loader picks), then ggml_cpu_init.  Answers 1 with the
 * variant's name in msg, or 0 with the reason in msg; once loaded, later
 * calls answer 1 at once whatever dir.  Not for two threads at once. */
int rl_ggml_open(const char *dir, char *msg, size_t msglen);

/* ggml's product y = W x once, as its CPU backend runs it for one row of
 * activations: x quantized into xq (rl_ggml_act_bytes bytes) by the
 * from_float of ggml's vec_dot_type for type, then ggml's vec_dot on each
 * row (ggml_get_type_traits_cpu).  RL_UNSUPPORTED when ggml is not loaded
 * or has no product for type, RL_BADLEN for cols not whole blocks; msg
 * says which. */
rl_status rl_ggml_rows_once(uint32_t type, const void *w, size_t rows, size_t cols,
                            const float *x, void *xq, float *y, char *msg, size_t msglen);

/* Bytes of ggml's activation row for type (0 when ggml is not loaded or
 * has no product for it). */
size_t rl_ggml_act_bytes(uint32_t type, size_t cols);

/* rl_ggml_rows_once timed as rl_bench_rows times ours; RL_NOMEM when the
 * activation row cannot be allocated. */
rl_status rl_bench_ggml_rows(uint32_t type, const void *w, size_t rows, size_t cols,
                             const float *x, float *y, size_t min_calls, uint64_t min_ns,
                             uint64_t max_ns, size_t cap, double *times, size_t *done,
                             char *msg, size_t msglen);

#endif
