/* bench_time.h - the timing of the C speed reports in tools/ (not tests). */
#ifndef RL_TOOLS_BENCH_TIME_H
#define RL_TOOLS_BENCH_TIME_H

#include <stdint.h>

#include "prims/bench.h"

/* The fastest of reps timings (microseconds) of STMT into out: on a machine
 * shared with other work, time lost to preemption only ever adds, so the
 * minimum is the least disturbed figure (the median wanders with the
 * load). */
#define TIME_US(reps, out, stmt)                                            \
    do {                                                                    \
        double best_ = 0;                                                   \
        for (int r_ = 0; r_ < (reps); r_++) {                               \
            uint64_t t0_ = rl_bench_ns();                                   \
            stmt;                                                           \
            double t_ = (double)(rl_bench_ns() - t0_) * 1e-3;               \
            if (r_ == 0 || t_ < best_)                                      \
                best_ = t_;                                                 \
        }                                                                   \
        (out) = best_;                                                      \
    } while (0)

#endif
