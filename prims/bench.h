/* bench.h - what `rontolisp bench` needs from C: a monotonic clock and the
 * machine's streaming read bandwidth, the yardstick for "GB/s of weights
 * streamed".  Plain C, no ECL. */
#ifndef RL_PRIMS_BENCH_H
#define RL_PRIMS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "prims/matmul.h"
#include "prims/q8.h"

/* Monotonic time (CLOCK_MONOTONIC) in nanoseconds. */
uint64_t rl_bench_ns(void);

/* Last-level cache size in bytes as the OS reports it (sysfs), 0 if
 * unknown. */
size_t rl_bench_llc_bytes(void);

/* A buffer size for the probe: 8 x the LLC, at least 256 MiB. */
size_t rl_bench_default_bytes(void);

/* Streaming read bandwidth in GB/s (1e9 bytes per second): allocates
 * `bytes` (rounded down to 4 KiB; 0 = rl_bench_default_bytes()), writes it
 * once so every page is backed, then `reps` times (>= 1) sums it with
 * 256-bit loads (plain 64-bit loads without AVX2), split over `threads`
 * (>= 1) chunks on the pool as the matvec kernels split rows.  Answers the
 * best rep; *median_gbps (may be NULL) gets the median.  Frees the buffer.
 * Returns a negative value if the arguments are bad or allocation fails.
 * Takes about reps * bytes / bandwidth + the first write: ~0.1 s a rep for
 * 256 MiB on a typical server. */
double rl_bench_read_gbps(size_t bytes, int threads, int reps, double *median_gbps);

/* The one timing loop of the bench: call(ctx) once untimed (it warms the
 * caches and the pool), then timed calls, times[0..*done) each one's
 * nanoseconds, until at least min_calls calls and min_ns nanoseconds are
 * timed, or cap calls are, or (max_ns not 0) max_ns have passed with 3
 * calls timed.  Stops at the first failure and answers its status (msg
 * its reason, where call wrote one). */
typedef rl_status (*rl_bench_call)(void *ctx, char *msg, size_t msglen);
rl_status rl_bench_repeat(rl_bench_call call, void *ctx, size_t min_calls, uint64_t min_ns,
                          uint64_t max_ns, size_t cap, double *times, size_t *done, char *msg,
                          size_t msglen);

/* Time the product o on path split into exactly threads chunks: one
 * untimed call warms the caches and the pool, then up to iters timed calls,
 * stopping early once budget_ns nanoseconds (0: no limit) have passed and 3
 * calls are timed (rl_bench_repeat).  times[0..*done) get each call's nanoseconds; y keeps
 * the last result.  Answers the first failure's status (msg its reason). */
rl_status rl_bench_matvec(const rl_matvec_operands *o, rl_path path, int threads,
                          size_t iters, uint64_t budget_ns, double *times, size_t *done,
                          char *msg, size_t msglen);

/* Time quantizing the n floats at x (n a multiple of 32) into y on path:
 * one untimed run, then reps timed ones, their nanoseconds in times. */
rl_status rl_bench_quantize(const float *x, size_t n, rl_block_q8_0 *y, rl_path path,
                            size_t reps, double *times);

/* One core's multiply-add peak on path, in G multiply-adds per second:
 * independent chains of f32 FMAs (int8 0) or of int8 products summed to
 * int32 as the Q8_0 kernels sum them (int8 1: u8 x i8 pairs, VNNI's
 * dpbusd on that path), the best of reps (>= 1) runs of about 2.4 M
 * instructions.  The yardstick of `bench --questions --breakdown''s floor:
 * a question's multiply-adds over it.  RL_BADARG for reps < 1 or a NULL
 * result, RL_UNSUPPORTED for a path this CPU cannot run. */
rl_status rl_bench_peak(rl_path path, int int8, int reps, double *best_gmacs);

#endif
