/* check.h - the smallest test harness that can count: every C unit test in
 * tests/c/ includes it, calls CHECK/CHECK_EQ_U, and ends main with
 * `return check_report("name");`, which prints the line `make check` sums
 * ("C test NAME: N passed, M failed") and returns the exit status.
 * Assertions count and report; they never abort, so one bug shows all its
 * symptoms. */
#ifndef RL_TEST_CHECK_H
#define RL_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>

static long check_passed_, check_failed_;

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

/* Skips are reported, never counted as passes. */
#define CHECK_SKIP(...)                                                      \
    do {                                                                     \
        fprintf(stderr, "SKIP: ");                                           \
        fprintf(stderr, __VA_ARGS__);                                        \
        fputc('\n', stderr);                                                 \
    } while (0)

static inline int check_report(const char *name) {
    printf("C test %s: %ld passed, %ld failed\n", name, check_passed_,
           check_failed_);
    return check_failed_ ? 1 : 0;
}

#endif
