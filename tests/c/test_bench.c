/* test_bench.c - what `rontolisp bench' measures with (prims/bench.h):
 * the monotonic clock moves forward, and every path's f32 and int8 peak
 * loops run and answer a positive rate; the peak's refusals. */
#include <stdlib.h>

#include "prims/bench.h"
#include "prims/cpu.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"

static void test_clock(void) {
    uint64_t a = rl_bench_ns(), b = rl_bench_ns();
    CHECK(a > 0 && b >= a);
}

static void test_peak(void) {
    for (int p = RL_PATH_REF; p <= RL_PATH_AVX512VNNI; p++)
        for (int int8 = 0; int8 < 2; int8++) {
            double g = -1;
            rl_status st = rl_bench_peak((rl_path)p, int8, 1, &g);
            if (rl_path_supported((rl_path)p))
                CHECK_MSG(st == RL_OK && g > 0, "path %d int8 %d: status %d, %g G/s", p, int8,
                          (int)st, g);
            else
                CHECK_MSG(st == RL_UNSUPPORTED, "path %d: status %d", p, (int)st);
        }
    double g = 0;
    CHECK(rl_bench_peak(RL_PATH_REF, 0, 0, &g) == RL_BADARG);
    CHECK(rl_bench_peak(RL_PATH_REF, 0, 1, NULL) == RL_BADARG);
    CHECK(rl_bench_peak((rl_path)(RL_PATH_AVX512VNNI + 1), 0, 1, &g) == RL_BADARG);
}

int main(void) {
    CHECK_CASE(test_clock());
    CHECK_CASE(test_peak());
    return check_report("bench");
}
