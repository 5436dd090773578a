/* timing.h - the timing loop the C speed reports of tools/ share (not a
 * test).  Plain C, header only: each report is one program of tools/. */
#ifndef RL_TOOLS_TIMING_H
#define RL_TOOLS_TIMING_H

#include <stdint.h>
#include <time.h>

#include "prims/bench.h"

/* The monotonic wall clock, nanoseconds. */
static inline double rl_tools_wall_ns(void) {
    return (double)rl_bench_ns();
}

/* The calling thread's CPU time, nanoseconds: fairer than the wall clock
 * on a machine shared with other work (a descheduled thread's time does
 * not count). */
static inline double rl_tools_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The fastest of REPS timings by CLOCK (microseconds per call) of STMT,
 * each timing INNER calls of it in a row (a call of a microsecond or two
 * is timed several at a time): time lost to preemption only ever adds, so
 * the minimum is the least disturbed figure (the median wanders with the
 * load). */
#define RL_TIME_US_BY(clock, reps, inner, out, stmt)                        \
    do {                                                                    \
        double best_ = 0;                                                   \
        for (int r_ = 0; r_ < (reps); r_++) {                               \
            const double t0_ = clock();                                     \
            for (int i_ = 0; i_ < (inner); i_++) {                          \
                stmt;                                                       \
            }                                                               \
            const double t_ = (clock() - t0_) * 1e-3 / (inner);             \
            if (r_ == 0 || t_ < best_)                                      \
                best_ = t_;                                                 \
        }                                                                   \
        (out) = best_;                                                      \
    } while (0)

/* By the wall clock, and by the thread's CPU time. */
#define RL_TIME_US(reps, inner, out, stmt) RL_TIME_US_BY(rl_tools_wall_ns, reps, inner, out, stmt)
#define RL_CPU_TIME_US(reps, inner, out, stmt)                              \
    RL_TIME_US_BY(rl_tools_cpu_ns, reps, inner, out, stmt)

#endif
