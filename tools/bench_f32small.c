/* bench_f32small.c - a standalone speed report for the float products of
 * the small encoders (not a test: it checks nothing).  Built by `make tools`:
 *     build/tools/bench_f32small [reps [inner]]
 * For each product of s1-pico, s1-nano and s1-micro (attn_qkv, attn_output,
 * ffn_up, ffn_down; the head's up and down) at 46, 70 and 92 tokens, one
 * thread, the best path: the whole product with F32 and with F16 weights,
 * and each time over the f32 floor (multiply-adds over the core's f32 FMA
 * peak, measured first); then ModernBERT-base's attn_qkv at 16, 128 and
 * 512 tokens.  Weights and activations start on a cache line, as the
 * model's do: a vector load across two lines costs these products about a
 * quarter of their time.  Times are the fastest of reps timings of inner
 * calls each, by the thread's CPU time (tools/timing.h), in microseconds. */
#include <stdio.h>
#include <stdlib.h>

#include "gguf/numfmt.h"
#include "prims/bench.h"
#include "prims/cpu.h"
#include "prims/matmul.h"
#include "prims/rng.h"
#include "tools/timing.h"

/* n floats on a cache line, normal with sigma 1 */
static float *rnd_floats(uint64_t *g, size_t n) {
    float *x = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!x) {
        fprintf(stderr, "bench_f32small: out of memory\n");
        exit(1);
    }
    rl_rng_fill_normal_f32(x, n, 1.0, g);
    return x;
}

/* One product's F32 and F16 times at n tokens, over the floor when peak > 0. */
static void time_product(const char *model, const char *name, size_t rows, size_t cols,
                         const size_t *tokens, size_t ntok, int reps, int inner, double peak,
                         uint64_t *g) {
    float *wf = rnd_floats(g, rows * cols), *x = rnd_floats(g, 512 * cols);
    float *y = rnd_floats(g, 512 * rows);
    uint16_t *wh = aligned_alloc(64, (rows * cols * sizeof(uint16_t) + 63) / 64 * 64);
    if (!wh) {
        fprintf(stderr, "bench_f32small: out of memory\n");
        exit(1);
    }
    rl_gguf_f32_to_f16_row(wf, wh, rows * cols);
    const rl_path path = rl_path_best();
    printf("%-8s %-11s %4zu x %4zu", model, name, rows, cols);
    for (size_t i = 0; i < ntok; i++) {
        const size_t n = tokens[i];
        double tf, th;
        RL_CPU_TIME_US(reps, inner, tf, rl_matmul_ex(RL_WT_F32, wf, rows, cols, x, n, y,
                                                     RL_ACT_Q8, path, 1, 0, NULL, 0, NULL));
        RL_CPU_TIME_US(reps, inner, th, rl_matmul_ex(RL_WT_F16, wh, rows, cols, x, n, y,
                                                     RL_ACT_Q8, path, 1, 0, NULL, 0, NULL));
        const double floor = (double)rows * (double)cols * (double)n / (peak * 1e3);
        printf("  %3zu: %7.1f %7.1f (%4.2fx %4.2fx)", n, tf, th, tf / floor, th / floor);
    }
    printf("\n");
    free(wf), free(wh), free(x), free(y);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    int inner = argc > 2 ? atoi(argv[2]) : 20;
    if (reps < 1 || inner < 1)
        return 2;
    const rl_path path = rl_path_best();
    double peak = 0;
    if (rl_bench_peak(path, 0, 5, &peak) != RL_OK || peak <= 0) {
        fprintf(stderr, "bench_f32small: cannot measure the f32 peak\n");
        return 1;
    }
    printf("path %s, 1 thread, f32 FMA peak %.0f G/s; per token count: F32 and F16 us "
           "(each over the floor)\n",
           rl_path_name(path), peak);
    static const struct { const char *model; size_t d, ff, head_ff; } sizes[] = {
        {"s1-pico", 64, 128, 0}, {"s1-nano", 128, 256, 0}, {"s1-micro", 256, 512, 1024}};
    static const size_t tokens[] = {46, 70, 92};
    uint64_t g = 12345;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const size_t d = sizes[s].d, ff = sizes[s].ff, hf = sizes[s].head_ff;
        const struct { const char *name; size_t rows, cols; } prods[] = {
            {"attn_qkv", 3 * d, d}, {"attn_output", d, d}, {"ffn_up", 2 * ff, d},
            {"ffn_down", d, ff},    {"head up", hf, d},    {"head down", d, hf}};
        for (size_t p = 0; p < sizeof prods / sizeof *prods; p++)
            if (prods[p].rows && prods[p].cols)
                time_product(sizes[s].model, prods[p].name, prods[p].rows, prods[p].cols,
                             tokens, 3, reps, inner, peak, &g);
    }
    static const size_t big_tokens[] = {16, 128, 512};
    time_product("base", "attn_qkv", 2304, 768, big_tokens, 3, reps < 5 ? reps : 5, 1, peak, &g);
    return 0;
}
