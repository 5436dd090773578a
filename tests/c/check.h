/* check.h - the smallest test harness that can count: every C unit test in
 * tests/c/ includes it, runs each test function as one case,
 * CHECK_CASE(test_foo()), whose checks are CHECK, CHECK_EQ_U, CHECK_EACH...,
 * and ends main with `return check_report("name");`, which prints the line
 * `make check` sums ("C test NAME: N passed, M failed, K skipped", in cases)
 * and, on a line of its own, how many values the checks compared; it
 * returns the exit status.  Assertions count and report; they never abort,
 * so one bug shows all its symptoms. */
#ifndef RL_TEST_CHECK_H
#define RL_TEST_CHECK_H

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The checks (each compared value counts one) and the skips so far. */
static long check_passed_, check_failed_, check_skips_;

#define CHECK(cond) CHECK_MSG(cond, "%s", #cond)
#define CHECK_MSG(cond, ...)                                                 \
    do {                                                                     \
        if (cond) {                                                          \
            check_passed_++;                                                 \
        } else {                                                             \
            check_failed_++;                                                 \
            fprintf(stderr, "%s:%d: FAILED: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)
#define CHECK_EQ_U(a, b)                                                     \
    do {                                                                     \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                    \
        CHECK_MSG(a_ == b_, "%s == %s (0x%" PRIx64 " vs 0x%" PRIx64 ")", #a, \
                  #b, a_, b_);                                               \
    } while (0)

/* Growth, not seconds: a test of an algorithm's cost times it at two sizes
 * and checks the ratio of the times, which holds on a loaded machine and
 * under the sanitizers where a limit in seconds fails.  CHECK_GROWTH calls
 * SECONDS(CTX, N), the processor seconds (check_cpu_seconds) of the work
 * at size N, at N_SMALL and N_BIG, and checks the ratio of the two is below
 * BOUND (between N_BIG / N_SMALL, linear growth, and its square, which a
 * quadratic cost shows).  A ratio over BOUND is measured again, twice at
 * most, keeping the least time at each size: a pause is not the algorithm.
 * The small time is floored at 10 ms so that the clock's grain cannot make
 * the ratio. */
static inline double check_cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static inline double check_growth_ratio(double (*seconds)(void *ctx, long n), void *ctx,
                                        long n_small, long n_big, double bound,
                                        double *t_small, double *t_big) {
    double ratio = 0;
    for (int run = 0; run < 3 && (run == 0 || ratio >= bound); run++) {
        double a = seconds(ctx, n_small), b = seconds(ctx, n_big);
        *t_small = run == 0 || a < *t_small ? a : *t_small;
        *t_big = run == 0 || b < *t_big ? b : *t_big;
        ratio = *t_big / (*t_small > 0.01 ? *t_small : 0.01);
    }
    return ratio;
}
#define CHECK_GROWTH(what, seconds, ctx, n_small, n_big, bound)              \
    do {                                                                     \
        double ts_, tb_;                                                     \
        double r_ = check_growth_ratio(seconds, ctx, n_small, n_big, bound,  \
                                       &ts_, &tb_);                          \
        CHECK_MSG(r_ < (bound),                                              \
                  "%s: %.3f s of CPU at %ld, %.3f s at %ld: ratio %.1f, "    \
                  "not below %g",                                            \
                  what, ts_, (long)(n_small), tb_, (long)(n_big), r_,        \
                  (double)(bound));                                          \
    } while (0)

/* One comparison of many (an element of a table, a row, a block): counted
 * as CHECK counts, each on its own, and reported as CHECK_MSG reports it
 * (the message names which element differed and both values), but a call
 * site shows only its first CHECK_EACH_SHOWN failures and then one line
 * saying the rest are counted, not shown: a broken table says where it
 * broke without a flood. */
#define CHECK_EACH_SHOWN 5
#define CHECK_EACH(cond, ...)                                                \
    do {                                                                     \
        static long shown_;                                                  \
        if (cond) {                                                          \
            check_passed_++;                                                 \
        } else {                                                             \
            check_failed_++;                                                 \
            if (shown_ < CHECK_EACH_SHOWN) {                                 \
                fprintf(stderr, "%s:%d: FAILED: ", __FILE__, __LINE__);      \
                fprintf(stderr, __VA_ARGS__);                                \
                fputc('\n', stderr);                                         \
            } else if (shown_ == CHECK_EACH_SHOWN) {                         \
                fprintf(stderr, "%s:%d: further failures here are counted, " \
                        "not shown\n", __FILE__, __LINE__);                  \
            }                                                                \
            shown_++;                                                        \
        }                                                                    \
    } while (0)

/* Two arrays of N elements (of the size of *A) equal byte for byte; when not,
 * the failure names WHAT, the first element that differs and both its
 * values' bytes (in memory order, in hex). */
static inline size_t check_first_difference(const void *a, const void *b, size_t n,
                                            size_t size) {
    size_t i = 0;
    while (i < n && memcmp((const char *)a + i * size, (const char *)b + i * size, size) == 0)
        i++;
    return i;
}
static inline const char *check_hex(const void *p, size_t size, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t j = 0; j < size && k + 3 < cap; j++)
        k += (size_t)snprintf(buf + k, cap - k, "%02x", ((const unsigned char *)p)[j]);
    buf[k] = 0;
    return buf;
}
#define CHECK_SAME_ELEMENTS(a, b, n, what)                                   \
    do {                                                                     \
        size_t n_ = (n), sz_ = sizeof *(a);                                  \
        size_t i_ = check_first_difference(a, b, n_, sz_);                   \
        char ha_[70], hb_[70];                                               \
        CHECK_MSG(i_ == n_, "%s: element %zu of %zu differs: %s vs %s",      \
                  what, i_, n_,                                              \
                  i_ < n_ ? check_hex((a) + i_, sz_, ha_, sizeof ha_) : "",  \
                  i_ < n_ ? check_hex((b) + i_, sz_, hb_, sizeof hb_) : ""); \
    } while (0)

/* For whole runs counted into one CHECK (every path and thread count of a
 * kernel against its reference): 0 when the N floats Y equal REF bit for
 * bit; otherwise 1, after a line on stderr saying which run (FMT and its
 * arguments), how many values differ and the first of them with both
 * values. */
__attribute__((format(printf, 4, 5))) static inline int
check_floats_differ(const float *y, const float *ref, size_t n, const char *fmt, ...) {
    if (memcmp(y, ref, n * sizeof *y) == 0)
        return 0;
    size_t first = n, count = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(y + i, ref + i, sizeof *y) != 0) {
            first = first < n ? first : i;
            count++;
        }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %zu of %zu values differ, first [%zu]: %a, ref %a\n", count, n, first,
            (double)y[first], (double)ref[first]);
    return 1;
}

/* Skips are reported, never counted as passes: a case that skipped and
 * checked nothing counts as skipped. */
#define CHECK_SKIP(...)                                                      \
    do {                                                                     \
        check_skips_++;                                                      \
        fprintf(stderr, "SKIP: ");                                           \
        fprintf(stderr, __VA_ARGS__);                                        \
        fputc('\n', stderr);                                                 \
    } while (0)

/* 1 when the environment says this is a CI run (CI=true), where every
 * comparison with a reference must run. */
static inline int check_ci(void) {
    const char *ci = getenv("CI");
    return ci && strcmp(ci, "true") == 0;
}

/* A comparison with a reference (llama.cpp's libraries) that cannot run
 * because the reference is missing: a skip, except under CI=true, where it
 * is a failure saying what was missing. */
#define CHECK_SKIP_REFERENCE(...)                                            \
    do {                                                                     \
        if (check_ci()) {                                                    \
            check_failed_++;                                                 \
            fprintf(stderr, "%s:%d: FAILED (CI=true, a reference is missing): ", \
                    __FILE__, __LINE__);                                     \
        } else {                                                             \
            check_skips_++;                                                  \
            fprintf(stderr, "SKIP: ");                                       \
        }                                                                    \
        fprintf(stderr, __VA_ARGS__);                                        \
        fputc('\n', stderr);                                                 \
    } while (0)

/* Child processes.  Every child of a test gets a deadline, the
 * environment's RL_TEST_CHILD_SECONDS or 600 s: CHECK_FORK gives it an
 * alarm that ends it there (so a parent reading its pipe sees the end),
 * and CHECK_WAIT waits at most that long (and a little more) before it
 * kills the child's process group.  A child that overran counts as a
 * failure with a message naming it. */
static inline unsigned check_child_seconds(void) {
    const char *s = getenv("RL_TEST_CHILD_SECONDS");
    long n = s ? strtol(s, NULL, 10) : 0;
    return n > 0 && n < 86400 ? (unsigned)n : 600;
}

/* fork(2) for a test: the child leads its own process group and has the
 * deadline's alarm set (kept across exec). */
static inline pid_t check_fork(void) {
    pid_t pid;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGALRM, SIG_DFL);
        alarm(check_child_seconds());
    }
    return pid;
}

/* Waits for the child PID of CHECK_FORK and answers its wait status.  When
 * it did not end in time (its alarm ended it, or the wait's own deadline
 * passed) its process group is killed, the overrun is a failure naming
 * WHAT, and the status is that of a child killed by SIGKILL. */
static inline int check_wait(pid_t pid, const char *what) {
    unsigned seconds = check_child_seconds();
    struct timespec start, now, pause = {0, 1000000};
    int status = 0;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        int overran;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            check_failed_++;
            fprintf(stderr, "FAILED: waiting for %s: %s\n", what, strerror(errno));
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        overran = r == pid ? WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM
                           : now.tv_sec - start.tv_sec > (time_t)seconds + 5;
        if (r == pid && !overran)
            return status;
        if (overran) {
            kill(-pid, SIGKILL);
            if (r == 0) {
                kill(pid, SIGKILL);
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                    ;
            }
            check_failed_++;
            fprintf(stderr, "FAILED: %s did not end within %u s (RL_TEST_CHILD_SECONDS): killed\n",
                    what, seconds);
            return (int)SIGKILL; /* the status of a child killed by SIGKILL */
        }
        nanosleep(&pause, NULL);
        if (pause.tv_nsec < 20000000)
            pause.tv_nsec *= 2;
    }
}

/* system(3) with the deadline: runs CMD with /bin/sh and answers its wait
 * status (0 when it exited 0), or -1 when it could not start. */
static inline int check_system(const char *cmd) {
    pid_t pid = check_fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return check_wait(pid, cmd);
}

/* Test cases.  CHECK_CASE(CALL) runs CALL (a test function and its
 * arguments) as one case: it fails when any of its checks failed, is
 * skipped when it only skipped, and fails when it neither checked nor
 * skipped anything (no case passes vacuously).  Checks made outside any
 * case (in main) count as one more case.  check_report prints the cases,
 * which `make check` sums, and the compared values on a line of their own. */
static struct {
    long passed, failed, skipped;         /* cases */
    long in_passed, in_failed, in_skips;  /* checks made inside cases */
} check_cases_;

static inline void check_case_close_(const char *name, long passed, long failed, long skips) {
    if (failed) {
        check_cases_.failed++;
        fprintf(stderr, "FAILED case %s: %ld of %ld checks failed\n", name, failed,
                passed + failed);
    } else if (passed) {
        check_cases_.passed++;
    } else if (skips) {
        check_cases_.skipped++;
    } else {
        check_cases_.failed++;
        fprintf(stderr, "FAILED case %s: it checked nothing and skipped nothing\n", name);
    }
}

#define CHECK_CASE(call)                                                     \
    do {                                                                     \
        long p_ = check_passed_, f_ = check_failed_, s_ = check_skips_;      \
        call;                                                                \
        p_ = check_passed_ - p_, f_ = check_failed_ - f_;                    \
        s_ = check_skips_ - s_;                                              \
        check_cases_.in_passed += p_, check_cases_.in_failed += f_;          \
        check_cases_.in_skips += s_;                                         \
        check_case_close_(#call, p_, f_, s_);                                \
    } while (0)

/* N with a comma between each three digits, in BUF. */
static inline const char *check_grouped(long n, char *buf, size_t cap) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%ld", n < 0 ? -n : n), k = 0;
    if (n < 0 && (size_t)k + 1 < cap)
        buf[k++] = '-';
    for (int i = 0; i < len && (size_t)k + 2 < cap; i++) {
        buf[k++] = digits[i];
        if ((len - i - 1) % 3 == 0 && i < len - 1)
            buf[k++] = ',';
    }
    buf[k] = 0;
    return buf;
}

static inline int check_report(const char *name) {
    long p = check_passed_ - check_cases_.in_passed, f = check_failed_ - check_cases_.in_failed;
    long s = check_skips_ - check_cases_.in_skips;
    char compared[32], differed[32];
    if (p || f || s)
        check_case_close_("(checks outside any case)", p, f, s);
    printf("  %s values compared, %s differed\n",
           check_grouped(check_passed_ + check_failed_, compared, sizeof compared),
           check_grouped(check_failed_, differed, sizeof differed));
    printf("C test %s: %ld passed, %ld failed, %ld skipped\n", name, check_cases_.passed,
           check_cases_.failed, check_cases_.skipped);
    return check_cases_.failed ? 1 : 0;
}

#endif
