/* bench_attention.c - a standalone speed report for attention's parts on the
 * AVX-512 path (not a test: it checks nothing).  Built by `make tools`:
 *     build/tools/bench_attention [rounds]
 * For the encoders' head shapes (4 heads of 16, 8 of 16, 8 of 32) at a few
 * token counts it times, one thread, each part of prims/attention_avx512.c's tiled
 * worker run over every (head, tile) of a call as the worker runs them:
 * the keys' transpose, the scores (with their maxima), the exponentials
 * (with their sums; the copy each call makes of its input taken off), the
 * scaling by the sums' reciprocals and the weighted sum of the values;
 * then the whole call (rl_attention_ex: the parts, the scratch and the
 * pool's dispatch) and its floor, 2 n^2 d multiply-adds (the scores' and
 * the weighted sum's) over the core's f32 FMA peak measured in the same
 * run; then a few query rows against 70 keys (rl_attention_rows_ex, the
 * decision head's marker rows).  Each figure is the thread CPU time of one
 * call, the fastest of `rounds` rounds (default 15) of 50 calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "prims/attention.h"
#include "prims/attention_avx512.h"
#include "prims/bench.h"
#include "prims/rng.h"

#include "tools/timing.h"

#define CALLS 50

/* Microseconds of one call of STMT: the fastest of rounds rounds of CALLS,
 * in the thread's CPU time (tools/timing.h). */
#define TIME_US(rounds, out, stmt) RL_CPU_TIME_US(rounds, CALLS, out, stmt)

/* One shape's data and the parts' buffers, laid out as the worker's. */
typedef struct {
    size_t n, heads, hd, row, np, tiles;
    float scale;
    float *q, *k, *v, *kt, *s, *w, *out;
    float *mx;
    double *sum;
} shape;

/* n zeros on a cache line, as the worker's scratch */
static float *lines(size_t n) {
    const size_t bytes = ((n ? n : 1) * sizeof(float) + 63) / 64 * 64;
    float *x = aligned_alloc(64, bytes);
    memset(x, 0, bytes);
    return x;
}

static float *floats(uint64_t *g, size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    rl_rng_fill_normal_f32(x, n, 1.0, g);
    return x;
}

/* Tile tl's queries: the first (*i0), each one's keys [j0[k], j1[k]) (the
 * global attention's), and their count, answered. */
static size_t tile(const shape *z, size_t tl, size_t *i0, size_t *j0, size_t *j1) {
    *i0 = tl * RL_ATTN_QT;
    const size_t nq = z->n - *i0 < RL_ATTN_QT ? z->n - *i0 : RL_ATTN_QT;
    for (size_t k = 0; k < nq; k++)
        rl_attn_range(z->n, 0, *i0 + k, &j0[k], &j1[k]);
    return nq;
}

/* Scores of every (head, tile) into s, (head, tile, query) rows of np. */
static void part_scores(shape *z) {
    for (size_t h = 0; h < z->heads; h++)
        for (size_t tl = 0; tl < z->tiles; tl++) {
            size_t i0, j0[RL_ATTN_QT], j1[RL_ATTN_QT];
            const size_t nq = tile(z, tl, &i0, j0, j1);
            float *a = z->s + (h * z->tiles + tl) * RL_ATTN_QT * z->np;
            float *m = z->mx + (h * z->tiles + tl) * RL_ATTN_QT;
            const float *kt = z->kt + h * z->hd * 16;
            rl_attn_scores_tile(kt, z->row, z->q + i0 * z->row + h * z->hd, z->row, z->hd, j0, j1,
                                nq, z->scale, a, z->np, m);
        }
}

/* Every tile's rows of scores copied into w (the exponentials work in
 * place, and the scores must stay), then, with exp, their exponentials
 * there. */
static void part_copy_exp(shape *z, int exp) {
    for (size_t h = 0; h < z->heads; h++)
        for (size_t tl = 0; tl < z->tiles; tl++) {
            size_t i0, j0[RL_ATTN_QT], j1[RL_ATTN_QT];
            const size_t nq = tile(z, tl, &i0, j0, j1), r = (h * z->tiles + tl) * RL_ATTN_QT;
            for (size_t k = 0; k < nq; k++)
                memcpy(z->w + (r + k) * z->np, z->s + (r + k) * z->np, z->n * sizeof *z->w);
            if (exp)
                rl_softmax_exp_tile(z->w + r * z->np, z->np, j0, j1, z->mx + r, nq, z->sum + r);
        }
}

/* The scaling of every row (by 1: the values stay as they are). */
static void part_scale(shape *z) {
    for (size_t h = 0; h < z->heads; h++)
        for (size_t i = 0; i < z->n; i++) {
            const size_t tl = i / RL_ATTN_QT, r = (h * z->tiles + tl) * RL_ATTN_QT + i % RL_ATTN_QT;
            rl_softmax_scale_avx512(z->s + r * z->np, 0, z->n, 1.0);
        }
}

static void part_values(shape *z) {
    for (size_t h = 0; h < z->heads; h++)
        for (size_t tl = 0; tl < z->tiles; tl++) {
            size_t i0, j0[RL_ATTN_QT], j1[RL_ATTN_QT];
            const size_t nq = tile(z, tl, &i0, j0, j1);
            rl_attn_wsum_tile(z->out + i0 * z->row + h * z->hd, z->row,
                              z->s + (h * z->tiles + tl) * RL_ATTN_QT * z->np, z->np,
                              z->v + h * z->hd, z->row, j0, j1, nq, z->hd);
        }
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    if (rounds < 1)
        rounds = 1;
    if (!rl_path_supported(RL_PATH_AVX512)) {
        printf("bench_attention: this CPU has no AVX-512 path; nothing to time\n");
        return 0;
    }
    double peak = 0;
    if (rl_bench_peak(RL_PATH_AVX512, 0, 5, &peak) != RL_OK || peak <= 0)
        peak = 1;
    printf("attention on the AVX-512 path, 1 thread: thread CPU us per call, the fastest of "
           "%d rounds of %d calls; floor: 2 n^2 d multiply-adds at %.1f G/s\n",
           rounds, CALLS, peak);
    printf("%-18s %5s %9s %9s %9s %9s %9s %9s %9s %7s\n", "heads x size", "n", "transpose",
           "scores", "exp+sum", "scale", "values", "parts", "call", "floor");
    static const size_t shapes[][2] = {{4, 16}, {8, 16}, {8, 32}};
    static const size_t ns[] = {1, 17, 70, 128};
    uint64_t g = 12345;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
            shape z = {.n = ns[ni], .heads = shapes[si][0], .hd = shapes[si][1]};
            z.row = z.heads * z.hd, z.np = (z.n + 15) / 16 * 16;
            z.tiles = (z.n + RL_ATTN_QT - 1) / RL_ATTN_QT;
            z.scale = 1.0f / sqrtf((float)z.hd);
            z.q = floats(&g, z.n * z.row), z.k = floats(&g, z.n * z.row);
            z.v = floats(&g, z.n * z.row);
            z.kt = lines(z.np * z.row);
            z.s = lines(z.heads * z.tiles * RL_ATTN_QT * z.np);
            z.w = lines(z.heads * z.tiles * RL_ATTN_QT * z.np);
            z.mx = calloc(z.heads * z.tiles * RL_ATTN_QT, sizeof *z.mx);
            z.sum = calloc(z.heads * z.tiles * RL_ATTN_QT, sizeof *z.sum);
            z.out = calloc(z.n * z.row, sizeof *z.out);
            double t_tr, t_sc, t_cp, t_ex, t_sl, t_va, t_call;
            TIME_US(rounds, t_tr, rl_attn_transpose_avx512(z.k, z.n, z.row, z.kt, z.np));
            TIME_US(rounds, t_sc, part_scores(&z));
            TIME_US(rounds, t_cp, part_copy_exp(&z, 0));
            TIME_US(rounds, t_ex, part_copy_exp(&z, 1));
            t_ex -= t_cp;
            TIME_US(rounds, t_sl, part_scale(&z));
            TIME_US(rounds, t_va, part_values(&z));
            TIME_US(rounds, t_call,
                    rl_attention_ex(z.q, z.k, z.v, z.n, z.heads, z.hd, 0, z.out, RL_PATH_AVX512, 1));
            const double floor_us = 2.0 * (double)(z.n * z.n * z.row) / (peak * 1e3);
            char label[32];
            snprintf(label, sizeof label, "%zu x %zu", z.heads, z.hd);
            printf("%-18s %5zu %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7.2f\n", label, z.n,
                   t_tr, t_sc, t_ex, t_sl, t_va, t_tr + t_sc + t_ex + t_sl + t_va, t_call,
                   floor_us);
            free(z.q), free(z.k), free(z.v), free(z.kt), free(z.s), free(z.w), free(z.mx), free(z.sum),
                free(z.out);
        }
    /* the decision head's last block: a few marker rows against every key */
    printf("\nmarker rows against 70 keys (rl_attention_rows_ex), us per call:\n%-18s", "heads x size");
    static const size_t nqs[] = {1, 2, 3, 4, 5, 8};
    for (size_t r = 0; r < sizeof nqs / sizeof *nqs; r++)
        printf(" %6zu rows", nqs[r]);
    printf("\n");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const size_t heads = shapes[si][0], hd = shapes[si][1], n = 70, row = heads * hd;
        float *q = floats(&g, 8 * row), *k = floats(&g, n * row), *v = floats(&g, n * row);
        float *out = calloc(8 * row, sizeof *out);
        char label[32];
        snprintf(label, sizeof label, "%zu x %zu", heads, hd);
        printf("%-18s", label);
        for (size_t r = 0; r < sizeof nqs / sizeof *nqs; r++) {
            double t;
            TIME_US(rounds, t,
                    rl_attention_rows_ex(q, nqs[r], k, v, n, heads, hd, out, RL_PATH_AVX512, 1));
            printf(" %11.2f", t);
        }
        printf("\n");
        free(q), free(k), free(v), free(out);
    }
    return 0;
}
