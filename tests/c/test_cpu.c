/* test_cpu.c - the CPU knobs (prims/cpu.c): thread count limits, the SIMD
 * switch, and feature flags that imply each other. */
#include <stdio.h>
#include <string.h>

#include "prims/cpu.h"
#include "tests/c/check.h"

static void test_cpu(void) {
    CHECK(rl_cpu_cores() >= 1);
    rl_set_threads(3);
    CHECK(rl_threads() == 3);
    rl_set_threads(-5);
    CHECK(rl_threads() == rl_cpu_cores());
    rl_set_threads(100000);
    CHECK(rl_threads() == RL_MAX_THREADS);
    rl_set_threads(0);
    rl_set_simd(0);
    CHECK(!strcmp(rl_simd_path(), "scalar") && rl_path_best() == RL_PATH_REF);
    rl_set_simd(1);
    CHECK(!rl_cpu_has_avx512vnni() || rl_cpu_has_avx512());
    CHECK(!rl_cpu_has_avx512() || rl_cpu_has_avx2());
    fprintf(stderr, "cpu: %d cores, best path %s\n", rl_cpu_cores(), rl_simd_path());
}

int main(void) {
    test_cpu();
    return check_report("cpu");
}
