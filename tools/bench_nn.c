/* bench_nn.c - a standalone speed report for the steps between the
 * encoder's products (prims/nn.c, nn_gelu.c) at the shapes of a question (not a test:
 * it checks nothing).  Built by `make tools`:
 *     build/tools/bench_nn [reps [path]]
 * LayerNorm, GeGLU (erf), bias plus GELU, NEOX RoPE and the non-finite scan
 * at 70 tokens and the widths of the s1 presets, one thread, on the best
 * path (or the path named: scalar, avx2, avx512, avx512vnni) and on the
 * scalar reference: the fastest of reps calls, in us and in
 * ns per value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prims/bench.h"
#include "prims/cpu.h"
#include "prims/nn.h"
#include "prims/rng.h"
#include "tools/timing.h"

#define TIME_US RL_TIME_US

static float *rnd_floats(uint64_t *g, size_t n) {
    float *x = malloc(n * sizeof *x);
    rl_rng_fill_normal_f32(x, n, 1.0, g);
    return x;
}

static void row(const char *what, size_t values, double best, double ref) {
    printf("  %-22s %7.2f us %6.3f ns/value   ref %7.2f us\n", what, best,
           best * 1e3 / (double)values, ref);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    if (reps < 1)
        reps = 1;
    const int inner = 50;
    uint64_t g = 12345;
    rl_path best = rl_path_best();
    const rl_path ref = RL_PATH_REF;
    if (argc > 2) {
        int p = RL_PATH_REF;
        while (p <= RL_PATH_AVX512VNNI && strcmp(argv[2], rl_path_name((rl_path)p)))
            p++;
        if (p > RL_PATH_AVX512VNNI || !rl_path_supported((rl_path)p)) {
            fprintf(stderr, "bench_nn: expected a path this CPU runs (scalar, avx2, avx512, "
                            "avx512vnni), found %s\n", argv[2]);
            return 2;
        }
        best = (rl_path)p;
    }
    printf("cpu: %d cores, path %s\n", rl_cpu_cores(), rl_path_name(best));
    static const struct {
        const char *name;
        size_t d, f, heads;
    } presets[] = {{"s1-pico", 64, 128, 4}, {"s1-nano", 128, 256, 8}, {"s1-micro", 256, 512, 8}};
    const size_t n = 70;
    for (size_t p = 0; p < sizeof presets / sizeof *presets; p++) {
        const size_t d = presets[p].d, f = presets[p].f, heads = presets[p].heads;
        float *x = rnd_floats(&g, n * 2 * f), *o = malloc(n * 2 * f * sizeof *o);
        float *w = rnd_floats(&g, 2 * f), *b = rnd_floats(&g, 2 * f);
        double tb, tr;
        printf("\n%s: %zu tokens, d %zu, GeGLU %zu of %zu\n", presets[p].name, n, d, f, 2 * f);
        TIME_US(reps, inner, tb, rl_layer_norm_ex(x, n, d, w, 1e-5f, o, best, 1));
        TIME_US(reps, inner, tr, rl_layer_norm_ex(x, n, d, w, 1e-5f, o, ref, 1));
        row("layer-norm", n * d, tb, tr);
        TIME_US(reps, inner, tb, rl_layer_norm_bias_ex(x, n, d, w, b, 1e-5f, o, best, 1));
        TIME_US(reps, inner, tr, rl_layer_norm_bias_ex(x, n, d, w, b, 1e-5f, o, ref, 1));
        row("layer-norm, bias", n * d, tb, tr);
        TIME_US(reps, inner, tb, rl_geglu_ex(x, n, f, RL_GELU_ERF, o, best, 1));
        TIME_US(reps, inner, tr, rl_geglu_ex(x, n, f, RL_GELU_ERF, o, ref, 1));
        row("geglu (erf)", n * f, tb, tr);
        TIME_US(reps, inner, tb, rl_bias_act_ex(x, n, f, b, RL_NN_GELU, o, best, 1));
        TIME_US(reps, inner, tr, rl_bias_act_ex(x, n, f, b, RL_NN_GELU, o, ref, 1));
        row("bias + gelu", n * f, tb, tr);
        TIME_US(reps, inner, tb, rl_rope_neox_ex(x, n, heads, d / heads, 160000.0f, o, best, 1));
        TIME_US(reps, inner, tr, rl_rope_neox_ex(x, n, heads, d / heads, 160000.0f, o, ref, 1));
        row("rope", n * d, tb, tr);
        volatile size_t sink = 0;
        TIME_US(reps, inner, tb, sink += rl_first_non_finite_f32(x, n * d));
        row("non-finite scan", n * d, tb, tb);
        (void)sink;
        free(x), free(o), free(w), free(b);
    }
    return 0;
}
