/* bench_q8small.c - a standalone speed report for the Q8_0 products of the
 * small encoders (not a test: it checks nothing).  Built by `make tools`:
 *     build/tools/bench_q8small [tokens] [reps]
 * For each product of s1-pico, s1-nano and s1-micro (attn_qkv, attn_output,
 * ffn_up, ffn_down; the head's up and down), one thread: the whole :q8 and
 * :q8x2 products, their parts (quantizing the activations, the token-tiled
 * kernel alone), and the int8 floor (multiply-adds over the core's int8
 * peak).  Times are the fastest of the repetitions, in microseconds. */
#include <stdio.h>
#include <stdlib.h>

#include "prims/bench.h"
#include "prims/cpu.h"
#include "prims/matmul.h"
#include "prims/matmul_q8.h"
#include "prims/q8.h"
#include "prims/rng.h"
#include "tools/timing.h"

/* The fastest of reps timings (microseconds) of STMT (tools/timing.h). */
#define TIME_US(reps, out, stmt) RL_TIME_US(reps, 1, out, stmt)

int main(int argc, char **argv) {
    const size_t n = argc > 1 ? (size_t)atoi(argv[1]) : 70;
    int reps = argc > 2 ? atoi(argv[2]) : 200;
    if (n < 1 || reps < 1)
        return 2;
    const rl_path path = rl_path_best();
    double peak = 0;
    rl_bench_peak(path, 1, 5, &peak);
    printf("path %s, %zu tokens, 1 thread, int8 peak %.0f G/s\n", rl_path_name(path), n, peak);
    printf("%-7s %-11s %6s %8s %8s %8s %8s %8s %8s\n", "model", "product", "floor", ":q8",
           "x floor", ":q8x2", "quantize", "kernel", "kern x2");
    static const struct { const char *model; size_t d, ff, head_ff; } sizes[] = {
        {"s1-pico", 64, 128, 0}, {"s1-nano", 128, 256, 0}, {"s1-micro", 256, 512, 1024}};
    uint64_t g = 12345;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const size_t d = sizes[s].d, ff = sizes[s].ff;
        const struct { const char *name; size_t rows, cols; } prods[] = {
            {"attn_qkv", 3 * d, d}, {"attn_output", d, d}, {"ffn_up", 2 * ff, d},
            {"ffn_down", d, ff}, {"head_up", sizes[s].head_ff, d}, {"head_down", d, sizes[s].head_ff}};
        for (size_t p = 0; p < sizeof prods / sizeof *prods; p++) {
            const size_t rows = prods[p].rows, cols = prods[p].cols, nb = cols / 32;
            if (!rows || !cols)
                continue;
            float *wf = malloc(rows * cols * sizeof *wf), *x = malloc(n * cols * sizeof *x);
            float *y = malloc(n * rows * sizeof *y);
            rl_block_q8_0 *wq = malloc(rows * nb * sizeof *wq), *xq = malloc(n * nb * sizeof *xq);
            int8_t *xr = malloc(n * cols);
            rl_rng_fill_normal_f32(wf, rows * cols, 1.0, &g);
            rl_rng_fill_normal_f32(x, n * cols, 1.0, &g);
            rl_q8_quantize_f32(wf, rows * cols, wq, NULL);
            rl_mm_quantize_rows("matmul", x, n, cols, xq, path, NULL, 0, NULL);
            rl_q8x2_residual(x, n * cols, xq, xr);
            double tq, tx, tquant, tk = 0, tk2 = 0;
            TIME_US(reps, tq, rl_matmul_ex(RL_WT_Q8_0, wq, rows, cols, x, n, y, RL_ACT_Q8, path,
                                           1, 0, NULL, 0, NULL));
            TIME_US(reps, tx, rl_matmul_ex(RL_WT_Q8_0, wq, rows, cols, x, n, y, RL_ACT_Q8X2,
                                           path, 1, 0, NULL, 0, NULL));
            TIME_US(reps, tquant,
                    rl_mm_quantize_rows("matmul", x, n, cols, xq, path, NULL, 0, NULL));
            if (path == RL_PATH_AVX512VNNI) {
                TIME_US(reps, tk, rl_mm_q8_pairs(wq, rows, nb, xq, NULL, n, NULL, y, 1));
                TIME_US(reps, tk2, rl_mm_q8_pairs(wq, rows, nb, xq, xr, n, NULL, y, 1));
            }
            const double floor = (double)rows * (double)cols * (double)n / (peak * 1e3);
            printf("%-7s %-11s %6.1f %8.1f %8.2f %8.1f %8.1f %8.1f %8.1f\n", sizes[s].model,
                   prods[p].name, floor, tq, tq / floor, tx, tquant, tk, tk2);
            free(wf), free(x), free(y), free(wq), free(xq), free(xr);
        }
    }
    return 0;
}
