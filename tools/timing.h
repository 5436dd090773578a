/* timing.h - the timing loop the C speed reports share (not a test).
 * Plain C, header only: each report is one program of tools/. */
#ifndef RL_TOOLS_TIMING_H
#define RL_TOOLS_TIMING_H

#include <stdint.h>
#include <stdlib.h>

#include "prims/bench.h"

static int rl_tools_cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The fastest of reps timings (microseconds per call) of STMT, each timing
 * INNER calls of it in a row (a call of a microsecond or two is timed
 * several at a time): on a machine shared with other work, time lost to
 * preemption only ever adds, so the minimum is the least disturbed figure
 * (the median wanders with the load). */
#define RL_TIME_US(reps, inner, out, stmt)                                  \
    do {                                                                    \
        double t_[64];                                                      \
        int n_ = (reps) > 64 ? 64 : (reps);                                 \
        for (int r_ = 0; r_ < n_; r_++) {                                   \
            uint64_t t0_ = rl_bench_ns();                                   \
            for (int i_ = 0; i_ < (inner); i_++)                            \
                stmt;                                                       \
            t_[r_] = (double)(rl_bench_ns() - t0_) * 1e-3 / (inner);        \
        }                                                                   \
        qsort(t_, (size_t)n_, sizeof *t_, rl_tools_cmp_d);                  \
        (out) = t_[0];                                                      \
    } while (0)

#endif
