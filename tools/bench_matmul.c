/* bench_matmul.c - a standalone speed report for the encoder's kernels (not
 * a test: it checks nothing).  Built by `make tools`:
 *     build/tools/bench_matmul [reps]
 * Times are the fastest of the repetitions.  For encoder-sized weights it
 * times a matrix times a sequence of tokens
 * (prims/matmul.c) per weight type, activations and thread count, against
 * the same tokens as separate matrix-vector products (the throughput ratio
 * issue 12 targets at 128 tokens), then attention and the row-wise steps
 * (prims/nn.c) at a few sequence lengths. */
#include <stdio.h>
#include <stdlib.h>

#include "gguf/numfmt.h"
#include "prims/bench.h"
#include "prims/cpu.h"
#include "prims/matmul.h"
#include "prims/matmul_q8.h"
#include "prims/matvec.h"
#include "prims/nn.h"
#include "prims/rng.h"
#include "tools/timing.h"

/* The fastest of reps timings (microseconds) of STMT (tools/timing.h). */
#define TIME_US(reps, out, stmt) RL_TIME_US(reps, 1, out, stmt)

static float *rnd_floats(uint64_t *g, size_t n) {
    float *x = malloc(n * sizeof *x);
    rl_rng_fill_normal_f32(x, n, 1.0, g);
    return x;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    if (reps < 1)
        reps = 1;
    uint64_t g = 12345;
    const rl_path path = rl_path_best();
    const int maxth = rl_cpu_cores() < 2 ? 1 : 2;
    printf("cpu: %d cores, path %s\n", rl_cpu_cores(), rl_path_name(path));

    /* ModernBERT-base's products: attn_qkv, attn_output, ffn_up, ffn_down */
    static const size_t shapes[][2] = {{2304, 768}, {768, 768}, {2304, 768}, {768, 1152}};
    static const size_t tokens[] = {16, 128, 512};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        if (s == 2)
            continue; /* ffn_up has attn_qkv's shape */
        size_t rows = shapes[s][0], cols = shapes[s][1], nb = cols / 32;
        float *wf = rnd_floats(&g, rows * cols);
        uint16_t *wh = malloc(rows * cols * sizeof *wh);
        rl_gguf_f32_to_f16_row(wf, wh, rows * cols);
        rl_block_q8_0 *wq = malloc(rows * nb * sizeof *wq);
        rl_q8_quantize_f32(wf, rows * cols, wq, NULL);
        float *x = rnd_floats(&g, 512 * cols), *y = malloc(512 * rows * sizeof *y);
        printf("\n%zu x %zu\n", rows, cols);
        for (size_t ti = 0; ti < sizeof tokens / sizeof *tokens; ti++) {
            size_t n = tokens[ti];
            for (int th = 1; th <= maxth; th++) {
                double tq, tx, tf, th16, tmv;
                TIME_US(reps, tq, rl_matmul_ex(RL_WT_Q8_0, wq, rows, cols, x, n, y, RL_ACT_Q8,
                                               path, th, 0, NULL, 0, NULL));
                TIME_US(reps, tx, rl_matmul_ex(RL_WT_Q8_0, wq, rows, cols, x, n, y, RL_ACT_Q8X2,
                                               path, th, 0, NULL, 0, NULL));
                TIME_US(reps, tf, rl_matmul_ex(RL_WT_F32, wf, rows, cols, x, n, y, RL_ACT_Q8,
                                               path, th, 0, NULL, 0, NULL));
                TIME_US(reps, th16, rl_matmul_ex(RL_WT_F16, wh, rows, cols, x, n, y, RL_ACT_Q8,
                                                 path, th, 0, NULL, 0, NULL));
                TIME_US(reps, tmv, for (size_t t = 0; t < n; t++) rl_matvec_q8_ex(
                                       wq, rows, cols, RL_SRC_F32, x + t * cols, NULL,
                                       y + t * rows, path, th, 0, NULL, 0));
                printf("  %3zu tokens %d thr: q8 %8.0f us (%5.2fx %zu matvecs %8.0f us)  "
                       "q8x2 %8.0f  f32 %8.0f  f16 %8.0f us\n",
                       n, th, tq, tmv / tq, n, tmv, tx, tf, th16);
            }
        }
        free(wf), free(wh), free(wq), free(x), free(y);
    }
    if (path == RL_PATH_AVX512VNNI) {
        /* the :q8 kernel's two ways (matmul_q8.c), same bits */
        size_t whole, lanes;
        rl_mm_q8_tiles4(&whole, &lanes);
        printf("\nq8 tiles summed by whole blocks (exact): %zu of %zu\n", whole, whole + lanes);
    }

    /* attention and the row-wise steps at d = 768, 12 heads */
    printf("\nencoder steps, d 768, 12 heads of 64\n");
    for (size_t ti = 0; ti < sizeof tokens / sizeof *tokens; ti++) {
        size_t n = tokens[ti], d = 768;
        float *q = rnd_floats(&g, n * d), *k = rnd_floats(&g, n * d), *v = rnd_floats(&g, n * d);
        float *o = malloc(n * 2 * d * sizeof *o), *w = rnd_floats(&g, d);
        for (int th = 1; th <= maxth; th++) {
            double ta, tw, tl, tr, tg;
            TIME_US(reps, ta, rl_attention_ex(q, k, v, n, 12, 64, 0, o, path, th));
            TIME_US(reps, tw, rl_attention_ex(q, k, v, n, 12, 64, 128, o, path, th));
            TIME_US(reps, tl, rl_layer_norm_ex(q, n, d, w, 1e-5f, o, path, th));
            TIME_US(reps, tr, rl_rope_neox_ex(q, n, 12, 64, 160000.0f, o, path, th));
            TIME_US(reps, tg, rl_geglu_ex(q, n, d / 2, RL_GELU_ERF, o, path, th));
            printf("  %3zu tokens %d thr: attention %8.0f us, window 128 %8.0f, layer-norm "
                   "%6.0f, rope %6.0f, geglu %6.0f us\n", n, th, ta, tw, tl, tr, tg);
        }
        free(q), free(k), free(v), free(o), free(w);
    }
    return 0;
}
