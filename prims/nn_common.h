/* nn_common.h - what the encoder's non-matrix kernels (nn.c, nn_gelu.c,
 * attention.c) share: the thread count for an amount of work, overlap and
 * size arithmetic, the row-wise steps' job and run (the path and thread check is kernel.h's rl_check_run).
 * Internal to prims/; plain C.
 */
#ifndef RL_PRIMS_NN_COMMON_H
#define RL_PRIMS_NN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "prims/cpu.h"
#include "prims/kernel.h"
#include "prims/pool.h"
#include "prims/nn.h"
#include "prims/q8.h"

/* Values per thread below which the row-wise steps stay on one thread
 * (LayerNorm: about 30 us of work). */
#define RL_NN_MIN_VALUES 32768

/* Threads for `items` independent items of `cost` values each, with at
 * least min_values values a thread.  Results never depend on the thread
 * count, so this changes only the speed. */
static inline int rl_nn_threads(int threads, size_t items, size_t cost, size_t min_values) {
    return rl_pool_threads(threads, items, rl_pool_mul_sat(items, cost), min_values);
}

/* 1 if [a, a+na) and [b, b+nb) (in floats) share memory. */
static inline int rl_nn_overlap(const float *a, size_t na, const float *b, size_t nb) {
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + na * sizeof(float);
    uintptr_t b0 = (uintptr_t)b, b1 = b0 + nb * sizeof(float);
    return a0 < b1 && b0 < a1;
}

/* n * m elements, 0 when the byte count of floats overflows. */
static inline size_t rl_nn_elems(size_t n, size_t m) {
    if (m && n > SIZE_MAX / sizeof(float) / m)
        return 0;
    return n * m;
}
/* The row-wise steps of nn.c and nn_gelu.c: one job shape, a function per
 * token row. */
typedef struct {
    const float *x, *w, *b; /* b: a bias per column, or NULL */
    float *out;
    size_t n, d; /* rows, and the values per output row */
    float eps;
    rl_gelu kind;
    rl_nn_act act;
    int *nonfinite; /* NULL, or set to 1 when a row written holds a NaN or an infinity */
    void (*row)(const void *job, size_t t);
} rl_rows_job;

/* Note for the caller that asked (j->nonfinite) that an output row holds
 * a NaN or an infinity: rows on several threads may each store 1. */
static inline void rl_nn_flag(const rl_rows_job *j) {
    if (j->nonfinite)
        __atomic_store_n(j->nonfinite, 1, __ATOMIC_RELAXED);
}

/* rl_nn_flag when one of the d values just written at y is not finite
 * (a scan while they are in cache, for the paths that do not test their
 * values as they store them). */
static inline void rl_nn_scan_row(const rl_rows_job *j, const float *y, size_t d) {
    if (j->nonfinite && rl_first_non_finite_f32(y, d) < d)
        rl_nn_flag(j);
}

/* The lanes of r under m that hold a NaN or an infinity (no float
 * operation: a classification).  AVX-512 rows OR these as they store. */
#define RL_NN_NONFINITE_512(m, r) _mm512_mask_fpclass_ps_mask((m), (r), 0x99)

/* The row-wise steps' runs: n rows in chunks over nth threads. */
static inline void rl_nn_run(int nth, size_t n, rl_pool_fn fn, void *job) {
    rl_pool_run_split(rl_pool_split_chunks(nth, n), nth, fn, job);
}

static inline void rl_rows_run(void *ctx, int ith, int nth) {
    const rl_rows_job *j = ctx;
    size_t t0, t1;
    rl_pool_chunk(j->n, ith, nth, 1, &t0, &t1);
    for (size_t t = t0; t < t1; t++)
        j->row(j, t);
}

/* Run the checked job (its operands already checked) with FN over its n
 * rows of WIDTH values read each, on the threads the amount of work
 * earns; its nonfinite flag, if asked for, cleared first. */
static inline rl_status rl_rows_go(rl_rows_job *job, rl_pool_fn fn, size_t width, int threads) {
    if (job->nonfinite)
        *job->nonfinite = 0;
    if (job->n)
        rl_nn_run(rl_nn_threads(threads, job->n, width, RL_NN_MIN_VALUES), job->n, fn, job);
    return RL_OK;
}

#endif
