/* bench_prims.c - a standalone speed report for the C kernels (not a test:
 * it checks nothing).  Built by `make tools`; runs from anywhere:
 *     build/tools/bench_prims [reps]
 * Reports quantize throughput, matvec times per path and thread count, the
 * read-bandwidth probe and the share of it the kernels reach. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prims/bench.h"
#include "prims/cpu.h"
#include "prims/matmul.h"
#include "prims/matvec.h"
#include "prims/q8.h"

static uint64_t rng_state = 12345;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}
static float rnd_f(void) { return (float)((double)(rnd() >> 11) * 0x1p-53 * 2 - 1); }

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Median microseconds of reps calls. */
static double time_q8(const rl_block_q8_0 *w, size_t rows, size_t cols, const float *x,
                      float *y, rl_path path, int threads, int reps) {
    double t[64];
    if (reps > 64)
        reps = 64;
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = rl_bench_ns();
        rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, path, threads, 0, NULL, 0);
        t[r] = (double)(rl_bench_ns() - t0) * 1e-3;
    }
    return median(t, reps);
}

static double time_f32(const float *m, size_t rows, size_t cols, const float *x, float *y,
                       rl_path path, int threads, int reps) {
    double t[64];
    if (reps > 64)
        reps = 64;
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = rl_bench_ns();
        rl_matvec_f32_ex(m, rows, cols, RL_SRC_F32, x, NULL, y, path, threads, 0);
        t[r] = (double)(rl_bench_ns() - t0) * 1e-3;
    }
    return median(t, reps);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    if (reps < 1)
        reps = 1;
    printf("cpu: %d cores, best path %s, LLC %zu MiB\n", rl_cpu_cores(), rl_simd_path(),
           rl_bench_llc_bytes() >> 20);

    /* bandwidth probe */
    double bw[3] = {0, 0, 0};
    for (int th = 1; th <= 2; th++) {
        double med;
        bw[th] = rl_bench_read_gbps(0, th, 7, &med);
        printf("read bandwidth, %d thread(s), %zu MiB: best %.2f GB/s, median %.2f GB/s\n", th,
               rl_bench_default_bytes() >> 20, bw[th], med);
    }

    /* quantize throughput */
    size_t nq = (size_t)16 << 20;
    float *xq = malloc(nq * sizeof *xq);
    rl_block_q8_0 *bq = malloc(rl_q8_bytes(nq));
    for (size_t i = 0; i < nq; i++)
        xq[i] = rnd_f() * 3.0f;
    for (int path = RL_PATH_REF; path <= RL_PATH_AVX2; path++) {
        if (!rl_path_supported((rl_path)path))
            continue;
        double best = 1e30;
        for (int r = 0; r < 3; r++) {
            uint64_t t0 = rl_bench_ns();
            rl_q8_quantize_path(RL_SRC_F32, xq, nq, bq, NULL, (rl_path)path);
            double s = (double)(rl_bench_ns() - t0) * 1e-9;
            if (s < best)
                best = s;
        }
        printf("quantize f32 -> Q8_0, %s: %.0f Mvalues/s\n", rl_path_name((rl_path)path),
               (double)nq / best * 1e-6);
    }
    free(xq);
    free(bq);

    /* matvec */
    static const size_t shapes[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        size_t rows = shapes[s][0], cols = shapes[s][1], nb = cols / 32;
        rl_block_q8_0 *w = malloc(rows * nb * sizeof *w);
        float *m = malloc(rows * cols * sizeof *m);
        float *x = malloc(cols * sizeof *x), *y = malloc(rows * sizeof *y);
        for (size_t i = 0; i < rows * cols; i++)
            m[i] = rnd_f();
        for (size_t j = 0; j < cols; j++)
            x[j] = rnd_f();
        rl_q8_quantize_f32(m, rows * cols, w, NULL);
        double wbytes = (double)(rows * nb * sizeof *w), fbytes = (double)(rows * cols * 4);
        printf("\n%zu x %zu: Q8_0 weights %.1f MB, f32 %.1f MB\n", rows, cols, wbytes * 1e-6,
               fbytes * 1e-6);
        double tref = time_q8(w, rows, cols, x, y, RL_PATH_REF, 1, reps < 5 ? reps : 5);
        printf("  q8_0 scalar  1 thread : %9.1f us  %6.2f GB/s\n", tref, wbytes / tref * 1e-3);
        for (int path = RL_PATH_AVX2; path <= RL_PATH_AVX512VNNI; path++) {
            if (!rl_path_supported((rl_path)path))
                continue;
            for (int th = 1; th <= rl_cpu_cores() && th <= 4; th++) {
                double t = time_q8(w, rows, cols, x, y, (rl_path)path, th, reps);
                double gbs = wbytes / t * 1e-3;
                printf("  q8_0 %-7s %d thread : %9.1f us  %6.2f GB/s  %5.1fx scalar/thread"
                       "  %5.1f%% of probe\n",
                       rl_path_name((rl_path)path), th, t, gbs, tref / t / th,
                       th <= 2 ? 100.0 * gbs / bw[th] : 0.0);
            }
        }
        double tf = time_f32(m, rows, cols, x, y, RL_PATH_REF, 1, reps < 3 ? reps : 3);
        printf("  f32  scalar  1 thread : %9.1f us  %6.2f GB/s\n", tf, fbytes / tf * 1e-3);
        if (rl_path_supported(RL_PATH_AVX2))
            for (int th = 1; th <= rl_cpu_cores() && th <= 4; th++) {
                double t = time_f32(m, rows, cols, x, y, RL_PATH_AVX2, th, reps);
                double gbs = fbytes / t * 1e-3;
                printf("  f32  avx2    %d thread : %9.1f us  %6.2f GB/s  %5.1f%% of probe\n", th,
                       t, gbs, th <= 2 ? 100.0 * gbs / bw[th] : 0.0);
            }
        free(w);
        free(m);
        free(x);
        free(y);
    }
    return 0;
}
