/* test_cpu.c - the CPU knobs (prims/cpu.c): thread count limits, the SIMD
 * switch, and feature flags that imply each other; the kernel contract
 * (prims/kernel.h): each path's target attribute names only features the
 * CPU has where the path is supported, the path and thread check, the
 * statuses' names, the kernel tables' entries. */
#include <stdio.h>
#include <string.h>

#include "prims/cpu.h"
#include "prims/kernel.h"
#include "prims/matvec.h"
#include "tests/c/check.h"

/* The CPU's own word (GCC's cpuid probe, apart from cpu.c's) on one
 * feature of a target string; -1 for a name this test does not know. */
static int cpu_has(const char *f) {
    __builtin_cpu_init();
#define RL_F(name) if (!strcmp(f, name)) return __builtin_cpu_supports(name) != 0;
    RL_F("avx2") RL_F("fma") RL_F("f16c") RL_F("avx512f") RL_F("avx512bw") RL_F("avx512vl")
    RL_F("avx512dq") RL_F("avx512vnni")
#undef RL_F
    return -1;
}

/* 1 when every feature of the comma-separated TARGET is known and, if the
 * path is supported, present. */
static int target_holds(const char *target, int supported) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", target);
    for (char *save = NULL, *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        int h = cpu_has(f);
        if (h < 0 || (supported && !h)) {
            fprintf(stderr, "target feature %s: %s\n", f, h < 0 ? "unknown" : "missing");
            return 0;
        }
    }
    return 1;
}

static void test_kernel_contract(void) {
    CHECK(target_holds(RL_TARGET_AVX2, rl_path_supported(RL_PATH_AVX2)));
    CHECK(target_holds(RL_TARGET_AVX512, rl_path_supported(RL_PATH_AVX512)));
    CHECK(target_holds(RL_TARGET_VNNI, rl_path_supported(RL_PATH_AVX512VNNI)));
    CHECK(rl_check_run(RL_PATH_REF, 1) == RL_OK);
    CHECK(rl_check_run(RL_PATH_REF, 0) == RL_BADARG);
    CHECK(rl_check_run((rl_path)RL_PATH_COUNT, 1) == RL_BADARG);
    CHECK(rl_check_run((rl_path)-1, 1) == RL_BADARG);
    CHECK(rl_check_run(RL_PATH_REF, RL_MAX_THREADS + 1) == RL_OK);
    for (int p = 0; p < RL_PATH_COUNT; p++) {
        const rl_status want = rl_path_supported((rl_path)p) ? RL_OK : RL_UNSUPPORTED;
        CHECK(rl_check_run((rl_path)p, 2) == want);
        CHECK(rl_matvec_q8_table[p] && rl_matvec_q8x2_table[p] && rl_matvec_f32_table[p]);
    }
    CHECK(!strcmp(rl_status_name(RL_OK), "ok") &&
          !strcmp(rl_status_name(RL_BADLEN), "bad-length") &&
          !strcmp(rl_status_name(RL_UNSUPPORTED), "unsupported") &&
          !strcmp(rl_status_name((rl_status)99), "unknown status"));
}

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
    CHECK_CASE(test_cpu());
    CHECK_CASE(test_kernel_contract());
    return check_report("cpu");
}
