/* pool.h - a persistent pthread pool for the data-parallel kernels.
 *
 * One job at a time: rl_pool_run(nth, fn, ctx) calls fn(ctx, ith, nth) for
 * every ith in 0..nth-1, ith 0 on the calling thread, the others on pool
 * workers, and returns when all are done.  Work is split by rl_pool_chunk,
 * one formula, so a job's result never depends on which thread ran which
 * chunk, nor on how many threads there were if fn's chunks are independent.
 *
 * Workers are plain pthreads created lazily (grown when a job wants more),
 * with every signal blocked; they never touch Lisp and need no ECL
 * registration.  fn must not longjmp or signal Lisp errors.  The pool never
 * fails: if a worker cannot be created, or another job is running (another
 * Lisp thread, or fn itself calling rl_pool_run), the caller runs the
 * chunks itself, in order.  Callers embedded in ECL should wrap the call in
 * ecl_disable_interrupts_env / ecl_enable_interrupts_env.
 */
#ifndef RL_PRIMS_POOL_H
#define RL_PRIMS_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "prims/cpu.h"

typedef void (*rl_pool_fn)(void *ctx, int ith, int nth);

/* Run fn over nth chunks (nth < 1 is taken as 1, above RL_MAX_THREADS as
 * RL_MAX_THREADS), on nth threads. */
void rl_pool_run(int nth, rl_pool_fn fn, void *ctx);

/* Run fn over nchunks chunks (fn(ctx, i, nchunks), i in 0..nchunks-1;
 * nchunks < 1 is taken as 1, above RL_POOL_MAX_CHUNKS as that) on at most
 * nthreads threads (clamped to 1..RL_MAX_THREADS), which claim chunks one
 * at a time.  More chunks than threads bound what a preempted worker holds
 * up: the others finish every chunk it has not claimed.  With nthreads <=
 * 1 fn runs once, as chunk 0 of 1. */
#define RL_POOL_MAX_CHUNKS 4096
void rl_pool_run_split(int nchunks, int nthreads, rl_pool_fn fn, void *ctx);

/* The threads a job wants: at most threads (and RL_MAX_THREADS), at most
 * units (the pieces it can be cut into), and with min_work > 0 at most
 * work / min_work, so each thread gets that much; at least 1.  Results
 * never depend on the thread count, so this changes only the speed. */
static inline int rl_pool_threads(int threads, size_t units, size_t work, size_t min_work) {
    size_t nth = threads < 1 ? 1 : threads > RL_MAX_THREADS ? RL_MAX_THREADS : (size_t)threads;
    if (nth > units)
        nth = units;
    if (min_work && nth > work / min_work)
        nth = work / min_work;
    return nth < 1 ? 1 : (int)nth;
}

/* a * b, or SIZE_MAX where it overflows (work sizes for rl_pool_threads) */
static inline size_t rl_pool_mul_sat(size_t a, size_t b) {
    return a && b > SIZE_MAX / a ? SIZE_MAX : a * b;
}

/* The chunks for a job on nthreads threads that can be cut into at most
 * units independent pieces: 4 per thread, at most units, at least 1; 1
 * when nthreads <= 1. */
int rl_pool_split_chunks(int nthreads, size_t units);

/* The range [*i0, *i1) of n items that chunk ith of nth gets:
 * dr = ceil(n / nth) rounded up to a multiple of mult (mult >= 1),
 * i0 = min(dr * ith, n), i1 = min(i0 + dr, n).  Empty ranges are possible. */
static inline void rl_pool_chunk(size_t n, int ith, int nth, size_t mult,
                                 size_t *i0, size_t *i1) {
    size_t nt = nth >= 1 ? (size_t)nth : 1, m = mult >= 1 ? mult : 1;
    size_t dr = (n + nt - 1) / nt;
    dr = (dr + m - 1) / m * m;
    size_t a = dr * (size_t)ith;
    if (a > n || (ith && a / (size_t)ith != dr)) /* also guards the product */
        a = n;
    size_t b = n - a < dr ? n : a + dr;
    *i0 = a;
    *i1 = b;
}

/* Workers currently alive (for tests and reports). */
int rl_pool_workers(void);

/* Stop and join every worker (e.g. before exit, or to check for leaks).
 * The next rl_pool_run creates them again.  Must not race with a job. */
void rl_pool_shutdown(void);

#endif
