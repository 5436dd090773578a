/* bench_ggml_q8.c - our Q8_0 matrix-vector product against ggml's on the
 * same blocks, one thread, in cache (a speed report, not a test: it checks
 * nothing but that both answer about the same).  Built by `make tools`:
 *     build/tools/bench_ggml_q8 [LIBDIR] [ROWSxCOLS] [REPS]
 * LIBDIR holds llama.cpp's ggml libraries (libggml-base.so and the
 * libggml-cpu-*.so variants; default build/cache/llama, where the
 * reference tests fetch them); the variant is the one whose
 * ggml_backend_score rates this CPU highest, as ggml's own loader picks.
 * ggml's side is what its CPU backend runs for a Q8_0 matrix times one f32
 * vector: the vector quantized by its from_float, then vec_dot row by row.
 * Ours is rl_matvec_q8_ex on the best path, 1 thread.  Times are thread
 * CPU microseconds, the fastest of REPS (default 300) calls each, the two
 * interleaved call by call, so that another process's load slows both
 * alike; the ratio is ggml's time over ours (above 1: ours is faster).
 * The matrix is 1024 x 1024 unless given (COLS a multiple of 32). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "prims/bench_rows.h"
#include "prims/cpu.h"
#include "prims/matmul.h"
#include "prims/q8.h"
#include "prims/rng.h"

static double cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "build/cache/llama";
    size_t rows = 1024, cols = 1024;
    if (argc > 2 && (sscanf(argv[2], "%zux%zu", &rows, &cols) != 2 || !rows || !cols ||
                     cols % 32)) {
        fprintf(stderr, "bench_ggml_q8: expected ROWSxCOLS with COLS a multiple of 32, found %s\n",
                argv[2]);
        return 2;
    }
    const int reps = argc > 3 && atoi(argv[3]) > 0 ? atoi(argv[3]) : 300;
    char best_name[512], msg[256];
    if (!rl_ggml_open(dir, best_name, sizeof best_name)) {
        printf("bench_ggml_q8: no ggml libraries in %s (%s)\n", dir, best_name);
        return 0;
    }

    uint64_t g = 7;
    const size_t nb = cols / 32;
    float *w = malloc(rows * cols * sizeof *w), *x = malloc(cols * sizeof *x);
    float *yg = malloc(rows * sizeof *yg), *yo = malloc(rows * sizeof *yo);
    rl_block_q8_0 *wq = malloc(rows * nb * sizeof *wq);
    void *xq = malloc(rl_ggml_act_bytes(RL_GGUF_GGML_Q8_0, cols) + 64);
    if (!w || !x || !yg || !yo || !wq || !xq) {
        fprintf(stderr, "bench_ggml_q8: out of memory\n");
        return 2;
    }
    rl_rng_fill_normal_f32(w, rows * cols, 1.0, &g);
    rl_rng_fill_normal_f32(x, cols, 1.0, &g);
    (void)rl_q8_quantize_f32_ref(w, rows * cols, wq, NULL); /* the same blocks for both */
    const rl_path path_best = rl_path_best();
    double tg = 1e300, to = 1e300;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_us();
        if (rl_ggml_rows_once(RL_GGUF_GGML_Q8_0, wq, rows, cols, x, xq, yg, msg, sizeof msg) !=
            RL_OK) {
            fprintf(stderr, "bench_ggml_q8: ggml's product failed: %s\n", msg);
            return 2;
        }
        const double dg = cpu_us() - t0;
        t0 = cpu_us();
        if (rl_matvec_q8_ex(wq, rows, cols, RL_SRC_F32, x, NULL, yo, path_best, 1, 0, NULL, 0) !=
            RL_OK) {
            fprintf(stderr, "bench_ggml_q8: our product failed\n");
            return 2;
        }
        const double dour = cpu_us() - t0;
        tg = dg < tg ? dg : tg;
        to = dour < to ? dour : to;
    }
    double dy = 0, my = 0;
    for (size_t i = 0; i < rows; i++) {
        const double d = yg[i] > yo[i] ? yg[i] - yo[i] : yo[i] - yg[i];
        const double m = yg[i] < 0 ? -yg[i] : yg[i];
        dy = d > dy ? d : dy;
        my = m > my ? m : my;
    }
    const double mb = (double)(rows * nb * sizeof *wq) / 1e6;
    printf("Q8_0 %zux%zu (%.2f MB) times one f32 vector, 1 thread, fastest of %d (thread CPU time)\n",
           rows, cols, mb, reps);
    char gname[600], oname[64];
    snprintf(gname, sizeof gname, "ggml (libggml-cpu-%s)", best_name);
    snprintf(oname, sizeof oname, "ours (%s)", rl_path_name(path_best));
    printf("  %-28s %9.2f us  %6.1f GB/s\n", gname, tg, mb * 1e3 / tg);
    printf("  %-28s %9.2f us  %6.1f GB/s\n", oname, to, mb * 1e3 / to);
    printf("  ours at %.2fx ggml's speed; max |y ours - y ggml| %.3g (max |y| %.3g)\n", tg / to, dy, my);
    return 0;
}
