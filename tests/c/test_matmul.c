/* test_matmul.c - a weight matrix times a sequence (doc/products.md §3) and the Q8x2
 * activations (doc/products.md §2): every path and thread count against the scalar
 * reference, bit for bit; Q8_0 rows against matvec of each token; Q8x2
 * against a transcription of the spec; float weights against a double
 * reference; the legacy, K and IQ4 types against their scalar row product
 * on activations quantized here; error cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/matmul.h"
#include "prims/matmul_outlier.h"
#include "prims/matmul_q8.h"
#include "prims/matvec.h"
#include "prims/q8.h"
#include "prims/quants.h"
#include "prims/type_traits.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"

static const size_t rows_set[] = {1, 3, 4, 7, 16, 33, 130};
static const size_t cols_set[] = {32, 96, 256, 800};
static const size_t n_set[] = {1, 2, 3, 4, 5, 17};

/* Activations: mostly normal-ish at varied scales, some zero blocks, some
 * blocks with one large value (residuals then matter most). */
static void act_rows(float *x, size_t len) {
    for (size_t b = 0; b < len / 32; b++) {
        int kind = rnd_int(0, 5);
        float s = ldexpf(1.0f, rnd_int(-8, 6));
        for (int j = 0; j < 32; j++)
            x[32 * b + j] = kind == 0 ? 0.0f : rnd_gauss() * s;
        if (kind == 1)
            x[32 * b + rnd_int(0, 31)] = 40.0f * s;
    }
    for (size_t i = len / 32 * 32; i < len; i++)
        x[i] = rnd_gauss();
}

/* Q8_0 weights straight from random bytes and scales (any quant, -128 too). */
static void q8_weights(rl_block_q8_0 *w, size_t nblocks) {
    for (size_t i = 0; i < nblocks; i++) {
        float d = ldexpf(1.0f + (float)rnd_unit(), rnd_int(-12, -2));
        w[i].d = rl_gguf_f32_to_f16((rnd() & 1) ? d : -d);
        for (int j = 0; j < 32; j++)
            w[i].qs[j] = (int8_t)rnd();
    }
}

/* Runs of every supported path with 1..4 threads whose n x rows result
 * differs in any bit from ref; y is scratch of that size. */
static long runs_differing(rl_wtype wt, const void *w, size_t rows, size_t cols,
                           const float *x, size_t n, const float *ref, float *y, rl_act act) {
    long bad = 0;
    for (int p = RL_PATH_REF; p <= RL_PATH_AVX512VNNI; p++) {
        if (!rl_path_supported((rl_path)p))
            continue;
        for (int th = 1; th <= 4; th++) {
            memset(y, 0xff, n * rows * sizeof *y);
            rl_matmul_ex(wt, w, rows, cols, x, n, y, act, (rl_path)p, th, 0, NULL, 0, NULL);
            bad += check_floats_differ(y, ref, n * rows,
                                       "matmul type %d %zux%zu, %zu tokens (token-major), "
                                       "path %d, %d threads", (int)wt, rows, cols, n, p, th);
        }
    }
    return bad;
}

/* ---- Q8_0: every path and thread count, and matvec per token ----------- */

static void test_q8_matmul(void) {
    long bad_path = 0, combos = 0;
    for (size_t ri = 0; ri < sizeof rows_set / sizeof *rows_set; ri++)
        for (size_t ci = 0; ci < sizeof cols_set / sizeof *cols_set; ci++)
            for (size_t ni = 0; ni < sizeof n_set / sizeof *n_set; ni++) {
                size_t rows = rows_set[ri], cols = cols_set[ci], n = n_set[ni];
                if (cols % 32)
                    continue;
                rl_block_q8_0 *w = malloc(rows * cols / 32 * sizeof *w);
                float *x = malloc(n * cols * sizeof *x);
                float *ref = malloc(n * rows * sizeof *ref), *y = malloc(n * rows * sizeof *y);
                float *mv = malloc(rows * sizeof *mv);
                double *mvd = malloc(rows * sizeof *mvd);
                q8_weights(w, rows * cols / 32);
                act_rows(x, n * cols);
                for (int a = RL_ACT_Q8; a <= RL_ACT_Q8X2; a++) {
                    rl_act act = (rl_act)a;
                    combos++;
                    CHECK(rl_matmul_ex(RL_WT_Q8_0, w, rows, cols, x, n, ref, act, RL_PATH_REF, 1,
                                       0, NULL, 0, NULL) == RL_OK);
                    bad_path += runs_differing(RL_WT_Q8_0, w, rows, cols, x, n, ref, y, act);
                    for (int p = RL_PATH_REF; p <= RL_PATH_AVX512VNNI; p++) {
                        if (!rl_path_supported((rl_path)p))
                            continue;
                        /* row t == matvec of token t with the same activations,
                         * in f32 and (widened) in double */
                        for (size_t t = 0; t < n; t++) {
                            rl_matvec_q8_act_ex(w, rows, cols, RL_SRC_F32, x + t * cols, mvd, mv,
                                                act, (rl_path)p, 2, 0, NULL, 0, NULL);
                            for (size_t r = 0; r < rows; r++)
                                CHECK_EACH(mv[r] == ref[t * rows + r] && (float)mvd[r] == mv[r],
                                           "q8 matmul %zux%zu, %zu tokens, path %d: token %zu "
                                           "row %zu: matmul %a, matvec %a (double %a)",
                                           rows, cols, n, p, t, r, ref[t * rows + r], mv[r],
                                           mvd[r]);
                        }
                    }
                }
                free(w), free(x), free(ref), free(y), free(mv), free(mvd);
            }
    CHECK_MSG(!bad_path, "q8 matmul: %ld path/thread runs differ from ref (%ld shapes)",
              bad_path, combos);
    CHECK(combos > 100);
}

/* :q8 matmul rows equal the established matvec entry (not the new one). */
static void test_q8_matches_matvec(void) {
    size_t rows = 37, cols = 224, n = 9;
    rl_block_q8_0 *w = malloc(rows * cols / 32 * sizeof *w);
    float *x = malloc(n * cols * sizeof *x), *y = malloc(n * rows * sizeof *y), mv[37];
    q8_weights(w, rows * cols / 32);
    act_rows(x, n * cols);
    CHECK(rl_matmul(RL_WT_Q8_0, w, rows, cols, x, n, y, RL_ACT_Q8, NULL, 0, NULL) == RL_OK);
    for (size_t t = 0; t < n; t++) {
        rl_matvec_q8(w, rows, cols, x + t * cols, mv, NULL, 0);
        for (size_t r = 0; r < rows; r++)
            CHECK_EACH(mv[r] == y[t * rows + r], "matmul :q8 token %zu row %zu: %a, matvec %a", t,
                       r, y[t * rows + r], mv[r]);
    }
    free(w), free(x), free(y);
}

/* ---- :q8 with whole-block sums (matmul_q8.c) ---------------------------
 *
 * The VNNI kernel sums whole blocks into one double when its exponent test
 * says every sum is exact, and lane by lane (doc/products.md §1 as written) when not.
 * Weights and activations at the limits (weight quants -128 or random,
 * activation quants all +-127, scales with all mantissa bits set), the
 * weights' block exponents spread just inside and just outside the test's
 * bound, the activations' of one exponent.  The kernel's doubles
 * (called directly: the public product rounds to f32, where the two ways
 * would almost never show) equal doc/products.md §1 written out here, bit for bit;
 * the kernel took the way expected; a whole-block sum written out here
 * equals doc/products.md §1 where the test allows it and, far outside the bound,
 * differs from it somewhere, so the data can tell the two ways apart (just
 * outside, the bound is not tight and the sums are still exact).  The
 * public product agrees on every path and thread count. */

/* Row wr (nb blocks) times the quantized token xq, doc/products.md §1 (lanes) or by
 * whole blocks. */
static double q8_row_spec(const rl_block_q8_0 *wr, const rl_block_q8_0 *xq, size_t nb,
                          int whole) {
    double acc[4] = {0, 0, 0, 0};
    for (size_t b = 0; b < nb; b++) {
        double sc = (double)rl_gguf_f16_to_f32(wr[b].d) * (double)rl_gguf_f16_to_f32(xq[b].d);
        int32_t s[4] = {0, 0, 0, 0};
        for (int j = 0; j < 32; j++)
            s[whole ? 0 : j / 8] += wr[b].qs[j] * xq[b].qs[j];
        for (int l = 0; l < (whole ? 1 : 4); l++)
            acc[l] = fma((double)s[l], sc, acc[l]);
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* One case: per block b, wexp[b] the f16 exponent field of the weight
 * scales above 1 (WZERO: zero scales, WSUB: subnormal ones); xexp[b] the
 * activation scale's exponent above 0x1.ffcp-4 (all mantissa bits set) and
 * xcount[b] how many of the block's values are +-127 times it (0: all 32,
 * XZERO: none, a zero block); inf_block a block whose weight scales are
 * infinite in row 2 (the first set of 16 rows), or -1; cancel: block 0's
 * weight lanes 0 and 1 cancel and its activations are all +127, so lane
 * sums lose the other blocks' low bits where a block sum keeps them; want
 * 1 whole-block tiles only, 0 lane tiles only, 2 both. */
enum { WZERO = -1, WSUB = -2, XZERO = -1 };
typedef struct {
    const char *name;
    int wexp[16], xexp[16], xcount[16];
    int inf_block, cancel, want;
    /* x2: the product with :q8x2 (doc/products.md §2); small: a block's
     * other values 0.49 times its scale (quants 0, residuals 63) */
    int x2, small;
} whole_spec;

static void whole_case(const whole_spec *c) {
    enum { ROWS = 20, NB = 16, COLS = 32 * NB, N = 7 };
    rl_block_q8_0 *w = malloc(ROWS * NB * sizeof *w), *xq = malloc(N * NB * sizeof *xq);
    float *x = malloc(N * COLS * sizeof *x), *ref = malloc(N * ROWS * sizeof *ref);
    float *y = malloc(N * ROWS * sizeof *y);
    double *yd = malloc(N * ROWS * sizeof *yd);
    int8_t *xr = c->x2 ? malloc(N * COLS) : NULL;
    void *xs = malloc(rl_mm_q8_split4_bytes(N, NB, c->x2));
    void *wk = malloc(rl_mm_q8_arranged4_bytes(ROWS, NB));
    for (size_t r = 0; r < ROWS; r++)
        for (size_t b = 0; b < NB; b++) {
            rl_block_q8_0 *blk = &w[r * NB + b];
            uint16_t h = c->wexp[b] == WZERO ? 0
                         : c->wexp[b] == WSUB
                             ? (uint16_t)rnd_int(1, 0x3ff)
                             : (uint16_t)((1 + c->wexp[b]) << 10 |
                                          (r % 3 ? 0x3ff : rnd_int(0, 0x3ff)));
            if (rnd() & 1)
                h |= 0x8000;
            if ((int)b == c->inf_block && r == 2)
                h = 0x7c00;
            memcpy(&blk->d, &h, sizeof h);
            for (int j = 0; j < 32; j++)
                blk->qs[j] = (int8_t)(r % 2 ? -128 : (int)(rnd() & 0xff) - 128);
            for (int j = 0; j < 32 && b == 0 && c->cancel; j++)
                blk->qs[j] = (int8_t)(j < 8 ? 127 : j < 16 ? -127 : 0);
        }
    /* quants +-127, one sign a block (the largest sums) */
    for (size_t i = 0; i < N * COLS; i += 32) {
        const size_t b = i % COLS / 32;
        const int count = c->xcount[b] == XZERO ? 0 : c->xcount[b] ? c->xcount[b] : 32;
        const float v = ((rnd() & 1) || (b == 0 && c->cancel) ? 127 : -127) *
                        ldexpf(0x1.ffcp-4f, c->xexp[b]);
        for (int j = 0; j < 32; j++)
            x[i + j] = j < count ? v : count && c->small ? v * (0.49f / 127) : 0.0f;
    }
    for (size_t b = 0; b < N * NB; b++)
        rl_q8_quantize_f32_ref(x + 32 * b, 32, &xq[b], NULL);
    if (xr)
        rl_q8x2_residual(x, N * COLS, xq, xr);

    void (*tiles)(size_t *, size_t *) = c->x2 ? rl_mm_q8x2_tiles4 : rl_mm_q8_tiles4;
    const rl_act act = c->x2 ? RL_ACT_Q8X2 : RL_ACT_Q8;
    size_t w0, l0, w1, l1;
    tiles(&w0, &l0);
    rl_mm_q8_split4(xq, xr, N, NB, xs);
    rl_mm_q8_tile4_vnni(w, NB, ROWS, xq, xr, xs, N, 0, ROWS, yd, NULL, wk);
    tiles(&w1, &l1);
    CHECK_MSG((w1 > w0) == (c->want != 0) && (l1 > l0) == (c->want != 1),
              "whole sums, %s: %zu whole and %zu lane tiles, expected %s", c->name, w1 - w0,
              l1 - l0, c->want == 1 ? "whole only" : c->want ? "both" : "lane only");
    long bad = 0, differ = 0;
    for (size_t t = 0; t < N; t++) {
        double ydx2[ROWS];
        if (c->x2) /* doc/products.md §2 by the scalar reference, in double */
            CHECK(rl_matvec_q8_act_ex(w, ROWS, COLS, RL_SRC_F32, x + t * COLS, ydx2, NULL,
                                      RL_ACT_Q8X2, RL_PATH_REF, 1, 0, NULL, 0,
                                      NULL) == RL_OK);
        for (size_t r = 0; r < ROWS && c->x2; r++)
            CHECK_EACH(memcmp(&ydx2[r], &yd[t * ROWS + r], sizeof *yd) == 0,
                       "whole sums, %s: token %zu row %zu: %a, doc/products.md §2 %a", c->name,
                       t, r, yd[t * ROWS + r], ydx2[r]);
        for (size_t r = 0; r < ROWS && !c->x2; r++) {
            double spec = q8_row_spec(w + r * NB, xq + t * NB, NB, 0);
            double whole = q8_row_spec(w + r * NB, xq + t * NB, NB, 1);
            CHECK_EACH(memcmp(&spec, &yd[t * ROWS + r], sizeof spec) == 0,
                       "whole sums, %s: token %zu row %zu: %a, doc/products.md §1 %a", c->name,
                       t, r, yd[t * ROWS + r], spec);
            differ += memcmp(&spec, &whole, sizeof spec) != 0;
        }
    }
    if (c->want == 1)
        CHECK_MSG(!differ, "whole sums, %s: %ld whole-block sums differ", c->name, differ);
    else if (c->cancel)
        CHECK_MSG(differ > 0, "whole sums, %s: the data tells the two ways apart", c->name);

    CHECK(rl_matmul_ex(RL_WT_Q8_0, w, ROWS, COLS, x, N, ref, act, RL_PATH_REF, 1, 0,
                       NULL, 0, NULL) == RL_OK);
    bad = runs_differing(RL_WT_Q8_0, w, ROWS, COLS, x, N, ref, y, act);
    CHECK_MSG(!bad, "whole sums, %s: %ld path/thread runs differ from ref", c->name, bad);
    free(w), free(xq), free(x), free(ref), free(y), free(yd), free(xs), free(wk), free(xr);
}

static void test_q8_whole_sums(void) {
    if (!rl_path_supported(RL_PATH_AVX512VNNI)) {
        CHECK_SKIP("whole-block sums: this CPU has no AVX-512 VNNI");
        return;
    }
    /* The bound: sum_b 2^(weight exponent - lowest) * A * 2^(activation
     * exponent - lowest) <= 2^24, A a block's sum of |quants| (at most
     * 4064 = 32 * 127). */
    static const whole_spec cases[] = {
        /* weight exponents 0 or 4 apart: 16 * 4064 * 2^4, at once */
        {"weights 2^4 apart", {0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4}, {0}, {0}, -1, 0, 1, 0, 0},
        /* one weight block 2^12 up: 4064 * (2^12 + 15), under 1% to spare */
        {"a weight block 2^12 up", {12}, {0}, {0}, -1, 0, 1, 0, 0},
        /* two: 4064 * (2^13 + 14) */
        {"two weight blocks 2^12 up", {12, 12}, {0}, {0}, -1, 0, 0, 0, 0},
        /* lanes cancelling under a block 2^29 up: sums are rounded */
        {"a weight block 2^29 up", {29, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {0}, {0},
         -1, 1, 0, 0, 0},
        {"an infinite weight scale", {0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4}, {0}, {0},
         5, 0, 2, 0, 0},
        /* zero and subnormal weight scales: skipped, and at exponent -24 */
        {"zero and subnormal weight scales", {WZERO, WSUB, 0, 0, WSUB, 0, WZERO, 0}, {0}, {0},
         -1, 0, 1, 0, 0},
        /* the same from the activations' side */
        {"an activation block 2^12 up", {0}, {0, 0, 0, 12}, {0}, -1, 0, 1, 0, 0},
        {"an activation block 2^13 up", {0}, {0, 0, 0, 13}, {0}, -1, 0, 0, 0, 0},
        /* a block of two values (A = 254) 2^16 up: 254 * 2^16 + 15 * 4064 */
        {"two values 2^16 up", {0}, {0, 0, 0, 0, 0, 16}, {0, 0, 0, 0, 0, 2}, -1, 0, 1, 0, 0},
        /* three (A = 381): 381 * 2^16 */
        {"three values 2^16 up", {0}, {0, 0, 0, 0, 0, 16}, {0, 0, 0, 0, 0, 3}, -1, 0, 0, 0, 0},
        /* zero activation blocks: skipped (the others 2^12 up stay inside) */
        {"zero activation blocks", {0}, {0, 12}, {XZERO, 0, XZERO, XZERO}, -1, 0, 1, 0, 0},
        /* :q8x2, A = 128 * (the quants' sum) + the residuals': with quants
         * +-127 (residuals 0) 128 * 4064 * (2^4 + 15) stays inside */
        {"q8x2, weights of one exponent", {0}, {0}, {0}, -1, 0, 1, 1, 0},
        {"q8x2, an activation block 2^4 up", {0}, {0, 0, 0, 4}, {0}, -1, 0, 1, 1, 0},
        {"q8x2, an activation block 2^5 up", {0}, {0, 0, 0, 5}, {0}, -1, 0, 0, 1, 0},
        {"q8x2, an infinite weight scale", {0}, {0}, {0}, 5, 0, 2, 1, 0},
        /* the residuals count: blocks 0 and 5 of one +-127 and 31 residuals
         * of 63 (A = 128 * 127 + 1953), block 5 2^10 up: 18209 * (2^10 + 1)
         * is outside, though 128 * 127 * (2^10 + 1) alone is inside */
        {"q8x2, residuals count", {0}, {0, 0, 0, 0, 0, 10},
         {1, XZERO, XZERO, XZERO, XZERO, 1, XZERO, XZERO, XZERO, XZERO, XZERO, XZERO, XZERO,
          XZERO, XZERO, XZERO}, -1, 0, 0, 1, 1},
        {"q8x2, residuals count, 2^9 up", {0}, {0, 0, 0, 0, 0, 9},
         {1, XZERO, XZERO, XZERO, XZERO, 1, XZERO, XZERO, XZERO, XZERO, XZERO, XZERO, XZERO,
          XZERO, XZERO, XZERO}, -1, 0, 1, 1, 1},
    };
    for (int rep = 0; rep < 3; rep++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            whole_case(&cases[i]);
}

/* :q8 and :q8x2 with enough tokens that each thread takes a run of them
 * (rl_mm_q8_pairs): every path and thread count equals the reference, for
 * weights and activations of spread scales (lane by lane) and of normal
 * values (whole blocks). */
static void test_q8_token_runs(void) {
    size_t rows = 37, cols = 256;
    for (size_t n = 63; n <= 135; n += 9) {
        rl_block_q8_0 *w = malloc(rows * cols / 32 * sizeof *w);
        float *x = malloc(n * cols * sizeof *x), *ref = malloc(n * rows * sizeof *ref);
        float *y = malloc(n * rows * sizeof *y);
        if (n % 2) {
            q8_weights(w, rows * cols / 32);
            act_rows(x, n * cols);
        } else {
            float *wf = malloc(rows * cols * sizeof *wf);
            for (size_t i = 0; i < rows * cols; i++)
                wf[i] = rnd_gauss();
            for (size_t i = 0; i < n * cols; i++)
                x[i] = rnd_gauss();
            CHECK(rl_q8_quantize_f32(wf, rows * cols, w, NULL) == RL_OK);
            free(wf);
        }
        CHECK(rl_matmul_ex(RL_WT_Q8_0, w, rows, cols, x, n, ref, RL_ACT_Q8, RL_PATH_REF, 1, 0,
                           NULL, 0, NULL) == RL_OK);
        size_t w0, l0, w1, l1;
        rl_mm_q8_tiles4(&w0, &l0);
        long bad = runs_differing(RL_WT_Q8_0, w, rows, cols, x, n, ref, y, RL_ACT_Q8);
        rl_mm_q8_tiles4(&w1, &l1);
        CHECK_MSG(!bad, "q8 runs of tokens, %zu tokens: %ld path/thread runs differ", n, bad);
        if (rl_path_supported(RL_PATH_AVX512VNNI))
            CHECK_MSG(n % 2 ? l1 > l0 : w1 > w0 && l1 == l0,
                      "q8 runs of tokens, %zu tokens: %zu whole and %zu lane tiles", n, w1 - w0,
                      l1 - l0);
        /* Q8x2 the same way (its residuals split per run) */
        CHECK(rl_matmul_ex(RL_WT_Q8_0, w, rows, cols, x, n, ref, RL_ACT_Q8X2, RL_PATH_REF, 1,
                           0, NULL, 0, NULL) == RL_OK);
        rl_mm_q8x2_tiles4(&w0, &l0);
        bad = runs_differing(RL_WT_Q8_0, w, rows, cols, x, n, ref, y, RL_ACT_Q8X2);
        rl_mm_q8x2_tiles4(&w1, &l1);
        CHECK_MSG(!bad, "q8x2 runs of tokens, %zu tokens: %ld path/thread runs differ", n, bad);
        if (rl_path_supported(RL_PATH_AVX512VNNI))
            CHECK_MSG(n % 2 ? l1 > l0 : w1 > w0 && l1 == l0,
                      "q8x2 runs of tokens, %zu tokens: %zu whole and %zu lane tiles", n,
                      w1 - w0, l1 - l0);
        free(w), free(x), free(ref), free(y);
    }
}

/* The token-tiled kernel (rl_mm_q8_pairs) at the limits of its integer
 * sums, called with the quants directly: activation quants and Q8x2
 * residuals all +-127 (in half the blocks of one sign, so that
 * |128 qx + r| = 16383, Q8x2's int16 activation at its largest), weight
 * quants -128, +-127 or random; 37 rows (two sets of 16 and a short one, a
 * short group of four), token counts 1..9 and 63..97 (short last tiles);
 * 3 blocks a row (whole-block sums) and 32 (Q8x2 then lane by lane).  The
 * doubles equal the scalar rows (doc/products.md §1, §2) bit for bit on 1,
 * 2 and 3 threads. */
static void test_q8_tiles_extreme_sums(void) {
    if (!rl_path_supported(RL_PATH_AVX512VNNI)) {
        CHECK_SKIP("token-tiled kernel at its limits: this CPU has no AVX-512 VNNI");
        return;
    }
    enum { ROWS = 37, MAXN = 97 };
    static const size_t nbs[] = {3, 32};
    size_t w0, l0, w1, l1, v0, m0, v1, m1;
    rl_mm_q8x2_tiles4(&w0, &l0);
    rl_mm_q8_tiles4(&v0, &m0);
    long bad = 0, runs = 0;
    for (size_t bi = 0; bi < sizeof nbs / sizeof *nbs; bi++) {
        const size_t nb = nbs[bi];
        rl_block_q8_0 *w = malloc(ROWS * nb * sizeof *w), *xq = malloc(MAXN * nb * sizeof *xq);
        int8_t *xr = malloc(MAXN * nb * 32);
        double *yd = malloc(MAXN * ROWS * sizeof *yd), *ref = malloc(ROWS * sizeof *ref);
        double dx[32], dx2[32];
        for (size_t i = 0; i < ROWS * nb; i++) {
            w[i].d = rl_gguf_f32_to_f16(ldexpf((rnd() & 1) ? 1.0f : -1.0f, rnd_int(-9, -7)));
            const int kind = rnd_int(0, 2);
            for (int j = 0; j < 32; j++)
                w[i].qs[j] = (int8_t)(kind == 0 ? -128 : kind == 1 ? ((rnd() & 1) ? 127 : -127)
                                                                   : (int)(rnd() & 0xff) - 128);
        }
        for (size_t i = 0; i < MAXN * nb; i++) {
            xq[i].d = rl_gguf_f32_to_f16(ldexpf(1.0f, rnd_int(-3, -2)));
            const int same = i % 2 == 0;
            for (int j = 0; j < 32; j++) {
                xq[i].qs[j] = (int8_t)((rnd() & 1) ? 127 : -127);
                xr[i * 32 + j] = (int8_t)(same ? xq[i].qs[j] : (rnd() & 1) ? 127 : -127);
            }
        }
        for (size_t n = 1; n <= MAXN; n = n == 9 ? 63 : n + 1)
            for (int x2 = 0; x2 < 2; x2++)
                for (int nth = 1; nth <= 3; nth++) {
                    memset(yd, 0xff, n * ROWS * sizeof *yd);
                    CHECK(rl_mm_q8_pairs(w, ROWS, nb, xq, x2 ? xr : NULL, n, yd, NULL, nth));
                    runs++;
                    for (size_t t = 0; t < n; t++) {
                        const rl_block_q8_0 *xt = xq + t * nb;
                        for (size_t b = 0; b < nb; b++)
                            dx[b] = (double)rl_gguf_f16_to_f32(xt[b].d),
                            dx2[b] = dx[b] * 0x1p-7;
                        if (x2)
                            rl_matvec_q8x2_rows_ref(w, nb, xt, xr + t * nb * 32, dx2, 0, ROWS,
                                                    ref, NULL);
                        else
                            rl_matvec_q8_rows_ref(w, nb, xt, dx, 0, ROWS, ref, NULL);
                        for (size_t r = 0; r < ROWS; r++) {
                            const int same = !memcmp(&ref[r], &yd[t * ROWS + r], sizeof *ref);
                            bad += !same;
                            CHECK_EACH(same,
                                       "tiles at the limits, %s, %zu blocks, %zu tokens, %d "
                                       "threads: token %zu row %zu: %a, the scalar rows %a",
                                       x2 ? "q8x2" : "q8", nb, n, nth, t, r, yd[t * ROWS + r],
                                       ref[r]);
                        }
                    }
                }
        free(w), free(xq), free(xr), free(yd), free(ref);
    }
    rl_mm_q8x2_tiles4(&w1, &l1);
    rl_mm_q8_tiles4(&v1, &m1);
    CHECK_MSG(!bad, "tiles at the limits: %ld values differ (%ld runs)", bad, runs);
    CHECK_MSG(w1 > w0 && l1 > l0 && v1 > v0,
              "tiles at the limits: q8x2 %zu whole and %zu lane tiles, q8 %zu whole", w1 - w0,
              l1 - l0, v1 - v0);
}

/* ---- an outlier matrix's product (matmul_outlier.c) --------------------
 * Bit for bit the composition it replaces: the Q8_0 product of the
 * activations with the outlier columns zeroed plus the f32 product of those
 * columns; errors name the value and leave y alone. */
static void test_outlier_product(void) {
    enum { ROWS = 23, COLS = 96, N = 6, K = 3 };
    static const size_t idx[K] = {3, 40, 77};
    rl_block_q8_0 *w = malloc(ROWS * COLS / 32 * sizeof *w);
    float wo[ROWS * K], x[N * COLS], xz[N * COLS], xo[N * K], y[N * ROWS], a[N * ROWS],
        b[N * ROWS];
    q8_weights(w, ROWS * COLS / 32);
    for (size_t i = 0; i < ROWS * K; i++)
        wo[i] = rnd_gauss();
    act_rows(x, N * COLS);
    for (int act = RL_ACT_Q8; act <= RL_ACT_Q8X2; act++) {
        memcpy(xz, x, sizeof x);
        for (size_t t = 0; t < N; t++)
            for (size_t c = 0; c < K; c++)
                xo[t * K + c] = x[t * COLS + idx[c]], xz[t * COLS + idx[c]] = 0.0f;
        CHECK(rl_matmul(RL_WT_Q8_0, w, ROWS, COLS, xz, N, a, (rl_act)act, NULL, 0, NULL) ==
              RL_OK);
        CHECK(rl_matmul(RL_WT_F32, wo, ROWS, K, xo, N, b, (rl_act)act, NULL, 0, NULL) ==
              RL_OK);
        for (size_t i = 0; i < N * ROWS; i++)
            a[i] = a[i] + b[i];
        CHECK(rl_matmul_outliers(w, ROWS, COLS, idx, K, wo, x, N, y, (rl_act)act, NULL, 0,
                                 NULL) == RL_OK);
        char what[80];
        snprintf(what, sizeof what, "outlier product against its composition (%s)",
                 rl_act_name((rl_act)act));
        CHECK_SAME_ELEMENTS(y, a, sizeof y / sizeof *y, what);
    }
    /* a NaN in an outlier column before an infinity elsewhere; y untouched */
    rl_mm_fault f = {0, 0};
    x[4 * COLS + 50] = INFINITY, x[4 * COLS + 77] = NAN;
    for (size_t i = 0; i < N * ROWS; i++)
        y[i] = 7.0f;
    CHECK(rl_matmul_outliers(w, ROWS, COLS, idx, K, wo, x, N, y, RL_ACT_Q8, NULL, 0, &f) ==
          RL_NONFINITE);
    CHECK(f.row == 4 && f.where == 77);
    x[4 * COLS + 77] = 1.0f;
    CHECK(rl_matmul_outliers(w, ROWS, COLS, idx, K, wo, x, N, y, RL_ACT_Q8, NULL, 0, &f) ==
          RL_NONFINITE);
    CHECK(f.row == 4 && f.where == 50);
    for (size_t i = 0; i < N * ROWS; i++)
        CHECK_EACH(y[i] == 7.0f, "outlier product: y[%zu] written on failure (%a)", i, y[i]);
    static const size_t unsorted[K] = {40, 3, 77}, outside[K] = {3, 40, 96};
    CHECK(rl_matmul_outliers(w, ROWS, COLS, unsorted, K, wo, x, N, y, RL_ACT_Q8, NULL, 0,
                             NULL) == RL_BADARG);
    CHECK(rl_matmul_outliers(w, ROWS, COLS, outside, K, wo, x, N, y, RL_ACT_Q8, NULL, 0,
                             NULL) == RL_BADARG);
    free(w);
}

/* ---- Q8x2 against the spec, written out here independently ------------ */

static double q8x2_spec_row(const rl_block_q8_0 *wr, const float *x, size_t cols) {
    double acc[4] = {0, 0, 0, 0};
    for (size_t b = 0; b < cols / 32; b++) {
        rl_block_q8_0 xb;
        rl_q8_quantize_f32_ref(x + 32 * b, 32, &xb, NULL);
        volatile float d = rl_gguf_f16_to_f32(xb.d); /* volatile: no contraction below */
        int r[32];
        for (int j = 0; j < 32; j++) {
            volatile float prod = d * (float)xb.qs[j];
            float e = x[32 * b + j] - prod;
            float v = d == 0.0f ? 0.0f : roundf(e * (128.0f / d));
            r[j] = v > 127 ? 127 : v < -127 ? -127 : (int)v;
        }
        double sc = (double)rl_gguf_f16_to_f32(wr[b].d) * (double)d;
        for (int l = 0; l < 4; l++) {
            int32_t s = 0;
            for (int j = 8 * l; j < 8 * l + 8; j++)
                s += 128 * wr[b].qs[j] * xb.qs[j] + wr[b].qs[j] * r[j];
            acc[l] += ((double)s * sc) * 0x1p-7;
        }
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static void test_q8x2_spec(void) {
    long total = 0;
    double err_q8 = 0, err_x2 = 0;
    for (int rep = 0; rep < 20; rep++) {
        size_t rows = (size_t)rnd_int(1, 40), cols = 32 * (size_t)rnd_int(1, 20);
        rl_block_q8_0 *w = malloc(rows * cols / 32 * sizeof *w);
        float *x = malloc(cols * sizeof *x);
        double *y2 = malloc(rows * sizeof *y2), *y1 = malloc(rows * sizeof *y1);
        q8_weights(w, rows * cols / 32);
        for (size_t j = 0; j < cols; j++)
            x[j] = rnd_gauss();
        rl_matvec_q8_act_ex(w, rows, cols, RL_SRC_F32, x, y2, NULL, RL_ACT_Q8X2, RL_PATH_REF, 1,
                            0, NULL, 0, NULL);
        rl_matvec_q8_act_ex(w, rows, cols, RL_SRC_F32, x, y1, NULL, RL_ACT_Q8, RL_PATH_REF, 1, 0,
                            NULL, 0, NULL);
        for (size_t r = 0; r < rows; r++) {
            const rl_block_q8_0 *wr = w + r * cols / 32;
            total++;
            CHECK_EACH(q8x2_spec_row(wr, x, cols) == y2[r], "q8x2 %zux%zu row %zu: %a, the spec's %a",
                       rows, cols, r, y2[r], q8x2_spec_row(wr, x, cols));
            /* the exact product of the dequantized row and x */
            double exact = 0;
            for (size_t j = 0; j < cols; j++)
                exact += rl_q8_get(wr, j) * (double)x[j];
            err_q8 += fabs(y1[r] - exact);
            err_x2 += fabs(y2[r] - exact);
        }
        free(w), free(x), free(y2), free(y1);
    }
    CHECK(total > 0);
    /* about 7 more bits: the residual pass must shrink the error a lot */
    CHECK_MSG(err_x2 * 30 < err_q8, "q8x2 error %g vs q8 %g", err_x2, err_q8);
}

/* The residual quants themselves: zero scale, clamping range. */
static void test_q8x2_residual(void) {
    float x[64];
    rl_block_q8_0 xq[2];
    int8_t r[64];
    for (int j = 0; j < 32; j++)
        x[j] = 1e-30f * (float)(j + 1); /* f16 scale 0: every residual 0 */
    for (int j = 32; j < 64; j++)
        x[j] = rnd_gauss();
    rl_q8_quantize_f32_ref(x, 64, xq, NULL);
    rl_q8x2_residual(x, 64, xq, r);
    int zero = 1, in_range = 1, some = 0;
    for (int j = 0; j < 32; j++)
        zero &= r[j] == 0;
    for (int j = 32; j < 64; j++) {
        in_range &= r[j] != -128;
        some |= r[j] != 0;
    }
    CHECK(xq[0].d == 0);
    CHECK_MSG(zero, "q8x2 residuals are 0 where the scale is 0");
    CHECK(in_range && some);
}

/* ---- float weights ------------------------------------------------------ */

static void test_float_matmul(void) {
    long bad_path = 0, combos = 0;
    for (int wt = RL_WT_F32; wt <= RL_WT_BF16; wt++)
        for (int rep = 0; rep < 18; rep++) {
            /* a third of them narrow (matmul_narrow.c: up to 16 columns) */
            size_t rows = (size_t)rnd_int(1, 70);
            size_t cols = (size_t)(rep % 3 ? rnd_int(1, 300) : rnd_int(1, 17));
            size_t n = (size_t)rnd_int(1, 12);
            float *wf = malloc(rows * cols * sizeof *wf);
            uint16_t *wh = malloc(rows * cols * sizeof *wh);
            float *x = malloc(n * cols * sizeof *x);
            float *ref = malloc(n * rows * sizeof *ref), *y = malloc(n * rows * sizeof *y);
            float *mv = malloc(rows * sizeof *mv);
            for (size_t i = 0; i < rows * cols; i++) {
                /* some signed zeros: a -0 product is +0 in every lane */
                float v = rnd_int(0, 9) ? rnd_gauss() * 0.1f : (rnd() & 1) ? -0.0f : 0.0f;
                wh[i] = wt == RL_WT_F16 ? rl_gguf_f32_to_f16(v) : rl_gguf_f32_to_bf16(v);
                /* wf: the exact f32 value of the weight the kernel sees */
                wf[i] = wt == RL_WT_F32 ? v
                        : wt == RL_WT_F16 ? rl_gguf_f16_to_f32(wh[i])
                                          : rl_gguf_bf16_to_f32(wh[i]);
            }
            act_rows(x, n * cols);
            const void *w = wt == RL_WT_F32 ? (const void *)wf : (const void *)wh;
            combos++;
            CHECK(rl_matmul_ex((rl_wtype)wt, w, rows, cols, x, n, ref, RL_ACT_Q8, RL_PATH_REF, 1,
                               0, NULL, 0, NULL) == RL_OK);
            /* activations do not matter for float weights */
            bad_path += runs_differing((rl_wtype)wt, w, rows, cols, x, n, ref, y, RL_ACT_Q8X2);
            for (size_t t = 0; t < n; t++) {
                rl_matvec_f32_ex(wf, rows, cols, RL_SRC_F32, x + t * cols, NULL, mv, RL_PATH_REF,
                                 1, 0);
                for (size_t r = 0; r < rows; r++) {
                    CHECK_EACH(memcmp(mv + r, ref + t * rows + r, sizeof *mv) == 0,
                               "float matmul type %d %zux%zu: token %zu row %zu: %a, f32 "
                               "baseline matvec %a", wt, rows, cols, t, r, ref[t * rows + r],
                               mv[r]);
                    double e = 0, mag = 0;
                    for (size_t j = 0; j < cols; j++) {
                        e += (double)wf[r * cols + j] * x[t * cols + j];
                        mag += fabs((double)wf[r * cols + j] * x[t * cols + j]);
                    }
                    /* f32 rounding of a sum of cols / 16 + 4 terms per lane */
                    CHECK_EACH(fabs(ref[t * rows + r] - e) <=
                                   (double)(cols / 16 + 6) * 0x1p-24 * mag + 1e-30,
                               "float matmul type %d %zux%zu: token %zu row %zu: %a, beyond "
                               "rounding of the double sum %a", wt, rows, cols, t, r,
                               ref[t * rows + r], e);
                }
            }
            free(wf), free(wh), free(x), free(ref), free(y), free(mv);
        }
    /* products that round to -0 (tiny and of opposite signs), alone or
     * beside others: the sign of a zero result too; no column: +0 */
    for (size_t cols = 0; cols <= 17; cols++) {
        enum { R = 19, N = 5 };
        float wf[R * 17], x[N * 17], ref[N * R], y[N * R];
        for (size_t i = 0; i < R * cols; i++)
            wf[i] = i % 3 ? -1e-30f : 0.0f;
        for (size_t i = 0; i < N * cols; i++)
            x[i] = i % 4 ? 1e-30f : -0.0f;
        CHECK(rl_matmul_ex(RL_WT_F32, wf, R, cols, x, N, ref, RL_ACT_Q8, RL_PATH_REF, 1, 0,
                           NULL, 0, NULL) == RL_OK);
        bad_path += runs_differing(RL_WT_F32, wf, R, cols, x, N, ref, y, RL_ACT_Q8);
    }
    CHECK_MSG(!bad_path, "float matmul: %ld path/thread runs differ from ref (%ld)", bad_path,
              combos);
}

/* The encoders' narrow products (d = 64 to 512 columns, a few hundred
 * rows, 16 to 131 tokens: whole tiles of four rows and four tokens, and a
 * last tile of fewer tokens) and the decision head's (s1-micro's blocks:
 * 768, 1024 and 256 rows of 256 or 1024 columns, its 4 marker rows), with
 * f32 and F16 weights: every path and thread count has the reference's
 * bits, the rows fetched ahead of the kernel (past the last row too)
 * included. */
static void test_float_matmul_encoder_shapes(void) {
    static const size_t shapes[][2] = {{192, 64}, {64, 64},    {256, 64},   {64, 128},
                                       {384, 128}, {132, 512}, {512, 256},  {768, 256},
                                       {1024, 256}, {256, 1024}, {6, 1024}};
    static const size_t ns[] = {4, 16, 70, 131};
    long bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            for (int wt = RL_WT_F32; wt <= RL_WT_F16; wt++) {
                const size_t rows = shapes[s][0], cols = shapes[s][1], n = ns[k];
                float *wf = malloc(rows * cols * sizeof *wf);
                uint16_t *wh = malloc(rows * cols * sizeof *wh);
                float *x = malloc(n * cols * sizeof *x);
                float *ref = malloc(n * rows * sizeof *ref), *y = malloc(n * rows * sizeof *y);
                for (size_t i = 0; i < rows * cols; i++) {
                    wf[i] = rnd_gauss() * 0.1f;
                    wh[i] = rl_gguf_f32_to_f16(wf[i]);
                }
                act_rows(x, n * cols);
                const void *w = wt == RL_WT_F32 ? (const void *)wf : (const void *)wh;
                CHECK(rl_matmul_ex((rl_wtype)wt, w, rows, cols, x, n, ref, RL_ACT_Q8,
                                   RL_PATH_REF, 1, 0, NULL, 0, NULL) == RL_OK);
                bad += runs_differing((rl_wtype)wt, w, rows, cols, x, n, ref, y, RL_ACT_Q8);
                free(wf), free(wh), free(x), free(ref), free(y);
            }
    CHECK_MSG(!bad, "float matmul, encoder shapes: %ld path/thread runs differ from ref", bad);
}

/* The float tiles are handed 16 KB of weight rows at a time, at least 8
 * rows (matmul.c): 64 rows of at most 64 f32 columns, 32 of 128, 16 of
 * 256, 8 of 512 and more (twice as many F16 or BF16 rows up to 8 of
 * 1,024 columns).  Rows one short of a tile,
 * one over, two tiles and a partial one of rows not a multiple of four,
 * columns on each side of those widths, one token, a few and more than a
 * token block: every path and thread count has the reference's bits. */
static void test_float_matmul_tile_sizes(void) {
    static const size_t colss[] = {120, 128, 136, 248, 256, 264, 504, 512, 520,
                                   1008, 1024, 1040, 2048};
    static const size_t ns[] = {1, 5, 33};
    long bad = 0;
    for (size_t c = 0; c < sizeof colss / sizeof *colss; c++)
        for (int wt = RL_WT_F32; wt <= RL_WT_BF16; wt++) {
            const size_t cols = colss[c];
            size_t tile = 16384 / (cols * (wt == RL_WT_F32 ? 4 : 2)) / 4 * 4;
            tile = tile < 8 ? 8 : tile > 64 ? 64 : tile;
            const size_t rowss[] = {tile - 1, tile + 1, 2 * tile + 3};
            for (size_t ri = 0; ri < sizeof rowss / sizeof *rowss; ri++)
                for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
                    const size_t rows = rowss[ri], n = ns[k];
                    float *wf = malloc(rows * cols * sizeof *wf);
                    uint16_t *wh = malloc(rows * cols * sizeof *wh);
                    float *x = malloc(n * cols * sizeof *x);
                    float *ref = malloc(n * rows * sizeof *ref);
                    float *y = malloc(n * rows * sizeof *y);
                    for (size_t i = 0; i < rows * cols; i++) {
                        wf[i] = rnd_gauss() * 0.1f;
                        wh[i] = wt == RL_WT_F16 ? rl_gguf_f32_to_f16(wf[i])
                                                : rl_gguf_f32_to_bf16(wf[i]);
                    }
                    act_rows(x, n * cols);
                    const void *w = wt == RL_WT_F32 ? (const void *)wf : (const void *)wh;
                    CHECK(rl_matmul_ex((rl_wtype)wt, w, rows, cols, x, n, ref, RL_ACT_Q8,
                                       RL_PATH_REF, 1, 0, NULL, 0, NULL) == RL_OK);
                    bad += runs_differing((rl_wtype)wt, w, rows, cols, x, n, ref, y,
                                          RL_ACT_Q8);
                    free(wf), free(wh), free(x), free(ref), free(y);
                }
        }
    CHECK_MSG(!bad, "float matmul, tile sizes: %ld path/thread runs differ from ref", bad);
}

/* ---- F16 weights holding NaNs ----------------------------------------- */

/* The AVX-512 tile reads F16 rows in place, widening in registers with
 * F16C (which quiets a signalling NaN), or widens each four rows once when
 * more than four tokens read them and the rows are narrow, except tiles
 * holding a NaN.  Every path and thread count must answer the reference's
 * bits, NaN payloads included, with clean and NaN tiles side by side and a
 * NaN in the masked tail of a row: one group of tokens, several, several
 * blocks of tokens, and rows too wide to widen apart. */
static void test_f16_nan_weights(void) {
    static const size_t shapes[][2] = {{83, 3}, {83, 9}, {83, 131}, {600, 9}};
    long bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const size_t rows = 200, cols = shapes[s][0], n = shapes[s][1];
        uint16_t *w = malloc(rows * cols * sizeof *w);
        float *x = malloc(n * cols * sizeof *x), *ref = malloc(n * rows * sizeof *ref);
        float *y = malloc(n * rows * sizeof *y);
        for (size_t i = 0; i < rows * cols; i++)
            w[i] = rl_gguf_f32_to_f16((float)rnd_gauss());
        for (size_t i = 0; i < n * cols; i++)
            x[i] = (float)rnd_gauss();
        w[3 * cols + 5] = 0x7c01;    /* signalling NaN, low payload */
        w[7 * cols + 80] = 0xfd55;   /* negative signalling NaN, in the masked tail */
        w[150 * cols + 17] = 0x7e03; /* quiet NaN with a payload */
        w[151 * cols + 2] = 0x7c00;  /* infinity: not a NaN, stays on the in-place path */
        CHECK(rl_matmul_ex(RL_WT_F16, w, rows, cols, x, n, ref, RL_ACT_Q8, RL_PATH_REF, 1, 0,
                           NULL, 0, NULL) == RL_OK);
        CHECK(isnan(ref[3]) && isnan(ref[7]) && isnan(ref[150]) && !isnan(ref[0]));
        bad += runs_differing(RL_WT_F16, w, rows, cols, x, n, ref, y, RL_ACT_Q8);
        free(w), free(x), free(ref), free(y);
    }
    CHECK_MSG(!bad, "f16 weights with NaNs: %ld path/thread runs differ from the reference", bad);
}

/* ---- two NaNs in one output ------------------------------------------- */

/* Where two weights of a row are NaNs with different payloads, which one
 * an addition keeps is the compiler's choice (paths used to differ), so a
 * NaN output is always RL_PRODUCT_NAN (doc/products.md §3): pairs of NaNs
 * in one lane and in lanes that meet at each step of the tree, quiet and
 * signalling, F32 and F16, a row wider than a block of the tile, one token
 * and several, on every path and thread count. */
static void test_nan_payload_order(void) {
    static const size_t pairs[][2] = {{0, 16}, {0, 8}, {12, 4}, {2, 3}, {1, 0},
                                      {9, 15}, {5, 70}, {33, 1}};
    static const size_t shapes[][2] = {{96, 1}, {96, 7}, {600, 5}};
    const size_t npairs = sizeof pairs / sizeof *pairs;
    long bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const size_t cols = shapes[s][0], n = shapes[s][1], rows = 2 * npairs + 3;
        float *wf = malloc(rows * cols * sizeof *wf), *x = malloc(n * cols * sizeof *x);
        uint16_t *wh = malloc(rows * cols * sizeof *wh);
        float *ref = malloc(n * rows * sizeof *ref), *y = malloc(n * rows * sizeof *y);
        for (size_t i = 0; i < rows * cols; i++) {
            wf[i] = (float)rnd_gauss();
            wh[i] = rl_gguf_f32_to_f16(wf[i]);
        }
        for (size_t i = 0; i < n * cols; i++)
            x[i] = (float)rnd_gauss();
        for (size_t k = 0; k < npairs; k++)
            for (int sig = 0; sig < 2; sig++) {
                /* quiet NaNs (sig 0) or signalling ones (sig 1), payloads
                 * that differ in every pair */
                const size_t r = 2 * k + (size_t)sig;
                const uint32_t q = sig ? 0x7f800000u : 0x7fc00000u;
                const uint32_t a = q | (uint32_t)(0x101 + k), b = q | (uint32_t)(0x2000 + 7 * k);
                memcpy(&wf[r * cols + pairs[k][0]], &a, 4);
                memcpy(&wf[r * cols + pairs[k][1]], &b, 4);
                wh[r * cols + pairs[k][0]] = (uint16_t)((sig ? 0x7c00 : 0x7e00) | (1 + k));
                wh[r * cols + pairs[k][1]] = (uint16_t)((sig ? 0x7c00 : 0x7e00) | (0x40 + 3 * k));
            }
        for (int wt = RL_WT_F32; wt <= RL_WT_F16; wt += RL_WT_F16 - RL_WT_F32) {
            const void *w = wt == RL_WT_F32 ? (const void *)wf : (const void *)wh;
            CHECK(rl_matmul_ex((rl_wtype)wt, w, rows, cols, x, n, ref, RL_ACT_Q8, RL_PATH_REF, 1,
                               0, NULL, 0, NULL) == RL_OK);
            CHECK(isnan(ref[0]) && isnan(ref[2 * npairs - 1]) && !isnan(ref[rows - 1]));
            for (size_t i = 0; i < n * rows; i++) {
                uint32_t bits;
                memcpy(&bits, &ref[i], 4);
                if (isnan(ref[i]))
                    CHECK_MSG(bits == 0xffc00000u, "a NaN output %08x, expected ffc00000",
                              (unsigned)bits);
            }
            bad += runs_differing((rl_wtype)wt, w, rows, cols, x, n, ref, y, RL_ACT_Q8);
        }
        free(wf), free(wh), free(x), free(ref), free(y);
    }
    CHECK_MSG(!bad, "two NaNs in an output: %ld path/thread runs differ from the reference", bad);
}

/* ---- errors --------------------------------------------------------------- */

static void test_errors(void) {
    rl_block_q8_0 w[4];
    float x[64] = {0}, y[4];
    char msg[200];
    q8_weights(w, 4);
    CHECK(rl_matmul(RL_WT_Q8_0, w, 2, 48, x, 1, y, RL_ACT_Q8, msg, sizeof msg, NULL) == RL_BADLEN);
    CHECK(strstr(msg, "48") != NULL);
    x[33] = NAN;
    CHECK(rl_matmul(RL_WT_Q8_0, w, 2, 32, x, 2, y, RL_ACT_Q8X2, msg, sizeof msg, NULL) ==
          RL_NONFINITE);
    CHECK_MSG(strstr(msg, "row 1") != NULL, "message names the activation row: %s", msg);
    rl_mm_fault fault = {0, 0};
    CHECK(rl_matmul(RL_WT_Q8_0, w, 2, 32, x, 2, y, RL_ACT_Q8, NULL, 0, &fault) ==
          RL_NONFINITE);
    CHECK(fault.row == 1 && fault.where == 1);
    x[33] = 0;
    CHECK(rl_matmul(RL_WT_Q8_0, NULL, 2, 32, x, 1, y, RL_ACT_Q8, msg, sizeof msg, NULL) ==
          RL_BADARG);
    CHECK(rl_matmul(RL_WT_Q8_0, w, 2, 32, x, 1, NULL, RL_ACT_Q8, msg, sizeof msg, NULL) ==
          RL_BADARG);
    CHECK(rl_matmul((rl_wtype)9, w, 2, 32, x, 1, y, RL_ACT_Q8, msg, sizeof msg, NULL) == RL_BADARG);
    CHECK(rl_matmul(RL_WT_F32, x, 2, 32, x, 1, y, (rl_act)5, msg, sizeof msg, NULL) == RL_BADARG);
    CHECK(rl_matmul_ex(RL_WT_F32, x, 2, 32, x, 1, y, RL_ACT_Q8, RL_PATH_REF, 0, 0, msg,
                       sizeof msg, NULL) == RL_BADARG);
    CHECK(rl_matmul(RL_WT_F32, x, SIZE_MAX / 2, 32, x, 1, y, RL_ACT_Q8, msg, sizeof msg, NULL) ==
          RL_BADARG);
    if (!rl_path_supported(RL_PATH_AVX512VNNI))
        CHECK(rl_matmul_ex(RL_WT_Q8_0, w, 2, 32, x, 1, y, RL_ACT_Q8, RL_PATH_AVX512VNNI, 1, 0,
                           msg, sizeof msg, NULL) == RL_UNSUPPORTED);
    /* nothing to do is not an error */
    CHECK(rl_matmul(RL_WT_Q8_0, w, 2, 32, x, 0, y, RL_ACT_Q8, msg, sizeof msg, NULL) == RL_OK);
    CHECK(strcmp(rl_wtype_name(RL_WT_BF16), "bf16") == 0);
    CHECK(strcmp(rl_act_name(RL_ACT_Q8X2), "q8x2") == 0);
}


/* ---- the legacy, K and IQ4 types: their row products ------------------ */

static const uint32_t quant_types[] = {
    RL_GGUF_GGML_Q4_0, RL_GGUF_GGML_Q4_1, RL_GGUF_GGML_Q5_0, RL_GGUF_GGML_Q5_1,
    RL_GGUF_GGML_Q2_K, RL_GGUF_GGML_Q3_K, RL_GGUF_GGML_Q4_K, RL_GGUF_GGML_Q5_K,
    RL_GGUF_GGML_Q6_K, RL_GGUF_GGML_IQ4_NL, RL_GGUF_GGML_IQ4_XS};

/* Row t of x in the activation blocks of the type's vec_dot_type, as the
 * spec says (matmul.h): Q8_0 by q8.h's quantizer, Q8_1 and Q8_K by
 * quants.h's. */
static void quant_act_row(uint32_t xt, const float *x, size_t cols, void *out) {
    if (xt == RL_GGUF_GGML_Q8_0)
        CHECK(rl_q8_quantize_f32_ref(x, cols, out, NULL) == RL_OK);
    else if (xt == RL_GGUF_GGML_Q8_1)
        rl_quantize_q8_1_ref(x, out, cols / 32);
    else
        rl_quantize_q8_K_ref(x, out, cols / 256);
}

/* The reference: per token and row, the scalar row product; with Q8x2 and
 * Q8_0 activations plus 2^-7 times the product with the residual blocks
 * (rl_q8x2_residual under each block's own scale), one f32 addition. */
static void quant_reference(uint32_t type, const void *w, size_t rows, size_t cols,
                            const float *x, size_t n, rl_act act, float *y) {
    const rl_type_traits *tt = rl_type_traits_of(type);
    const uint32_t xt = tt->vec_dot_type;
    const size_t nb = cols / rl_gguf_ggml_block_size(type);
    const size_t row_bytes = rl_type_bytes(type, cols);
    const size_t xbytes = cols / rl_gguf_ggml_block_size(xt) * rl_gguf_ggml_block_bytes(xt);
    uint8_t *xq = malloc(xbytes + 8), *xr = malloc(xbytes + 8);
    int8_t *r = malloc(cols);
    for (size_t t = 0; t < n; t++) {
        quant_act_row(xt, x + t * cols, cols, xq);
        const int two = act == RL_ACT_Q8X2 && xt == RL_GGUF_GGML_Q8_0;
        if (two) {
            rl_block_q8_0 *q = (rl_block_q8_0 *)(void *)xq, *rb = (rl_block_q8_0 *)(void *)xr;
            rl_q8x2_residual(x + t * cols, cols, q, r);
            for (size_t b = 0; b < cols / 32; b++) {
                rb[b].d = q[b].d;
                memcpy(rb[b].qs, r + 32 * b, 32);
            }
        }
        for (size_t i = 0; i < rows; i++) {
            const uint8_t *wr = (const uint8_t *)w + i * row_bytes;
            float s = tt->vec_dot[RL_PATH_REF](wr, xq, nb);
            if (two) {
                const float e = tt->vec_dot[RL_PATH_REF](wr, xr, nb);
                s += 0x1p-7f * e;
            }
            y[t * rows + i] = s;
        }
    }
    free(xq);
    free(xr);
    free(r);
}

static void test_quant_matmul(void) {
    static const size_t qrows[] = {1, 5, 33, 130};
    static const size_t qcols[] = {256, 768};
    static const size_t qn[] = {1, 3, 17};
    long bad = 0, runs = 0;
    for (size_t ti = 0; ti < sizeof quant_types / sizeof *quant_types; ti++) {
        const uint32_t type = quant_types[ti];
        const rl_type_traits *tt = rl_type_traits_of(type);
        for (size_t ri = 0; ri < sizeof qrows / sizeof *qrows; ri++)
            for (size_t ci = 0; ci < sizeof qcols / sizeof *qcols; ci++)
                for (size_t ni = 0; ni < sizeof qn / sizeof *qn; ni++)
                    for (int a = RL_ACT_Q8; a <= RL_ACT_Q8X2; a++) {
                        const size_t rows = qrows[ri], cols = qcols[ci], n = qn[ni];
                        float *wf = malloc(rows * cols * sizeof *wf);
                        uint8_t *w = malloc(rl_type_bytes(type, rows * cols));
                        float *x = malloc(n * cols * sizeof *x);
                        float *ref = malloc(n * rows * sizeof *ref), *y = malloc(n * rows * sizeof *y);
                        double *yd = malloc(rows * sizeof *yd);
                        for (size_t i = 0; i < rows * cols; i++)
                            wf[i] = rnd_gauss() * 0.05f;
                        tt->from_float(wf, w, rows * cols / rl_gguf_ggml_block_size(type));
                        act_rows(x, n * cols);
                        quant_reference(type, w, rows, cols, x, n, (rl_act)a, ref);
                        for (int p = RL_PATH_REF; p <= RL_PATH_AVX512VNNI; p++) {
                            if (!rl_path_supported((rl_path)p))
                                continue;
                            for (int th = 1; th <= 4; th++) {
                                memset(y, 0xff, n * rows * sizeof *y);
                                CHECK(rl_matmul_quant_ex(type, w, rows, cols, x, n, y, (rl_act)a,
                                                         (rl_path)p, th, 0, NULL, 0,
                                                         NULL) == RL_OK);
                                runs++;
                                bad += check_floats_differ(y, ref, n * rows,
                                                           "%s %zux%zu, %zu tokens, act %d, "
                                                           "path %d, %d threads",
                                                           rl_gguf_ggml_type_name(type), rows, cols,
                                                           n, a, p, th);
                            }
                        }
                        /* one vector of doubles: token 0, its f32 answer widened */
                        double *xd = malloc(cols * sizeof *xd);
                        for (size_t j = 0; j < cols; j++)
                            xd[j] = x[j];
                        CHECK(rl_matvec_quant_ex(type, w, rows, cols, RL_SRC_F64, xd, yd, NULL,
                                                 (rl_act)a, RL_PATH_REF, 2, 0, NULL, 0,
                                                 NULL) == RL_OK);
                        for (size_t i = 0; i < rows; i++)
                            CHECK_MSG(yd[i] == (double)ref[i], "%s matvec f64 row %zu",
                                      rl_gguf_ggml_type_name(type), i);
                        free(xd);
                        free(wf), free(w), free(x), free(ref), free(y), free(yd);
                    }
    }
    CHECK_MSG(bad == 0, "%ld of %ld quantized matmuls differ from the scalar row products", bad,
              runs);
}

static void test_quant_errors(void) {
    uint8_t w[2 * 144] = {0};
    float x[2 * 512] = {0}, y[4];
    char msg[200];
    rl_mm_fault fault = {0, 0};
    x[512 + 40] = NAN;
    CHECK(rl_matmul_quant(RL_GGUF_GGML_Q4_K, w, 2, 256, x, 2, y, RL_ACT_Q8, msg, sizeof msg,
                          &fault) == RL_OK); /* row 1 starts at 256: only 256 columns */
    CHECK(rl_matmul_quant(RL_GGUF_GGML_Q4_K, w, 1, 512, x, 2, y, RL_ACT_Q8, msg, sizeof msg,
                          &fault) == RL_NONFINITE);
    CHECK_MSG(strstr(msg, "row 1") != NULL, "message names the activation row: %s", msg);
    CHECK(fault.row == 1 && fault.where == 40);
    CHECK(rl_matmul_quant(RL_GGUF_GGML_Q4_K, w, 1, 288, x, 1, y, RL_ACT_Q8, msg, sizeof msg,
                          NULL) == RL_BADLEN);
    CHECK_MSG(strstr(msg, "288") && strstr(msg, "Q4_K"), "%s", msg);
    CHECK(rl_matmul_quant(RL_GGUF_GGML_F16, w, 1, 256, x, 1, y, RL_ACT_Q8, msg, sizeof msg,
                          NULL) == RL_BADARG);
    CHECK(rl_matmul_quant(RL_GGUF_GGML_Q8_0, w, 1, 256, x, 1, y, RL_ACT_Q8, msg, sizeof msg,
                          NULL) == RL_BADARG);
    CHECK(rl_matmul_quant(RL_GGUF_GGML_Q4_0, NULL, 1, 256, x, 1, y, RL_ACT_Q8, msg, sizeof msg,
                          NULL) == RL_BADARG);
    CHECK(rl_matmul_quant_ex(RL_GGUF_GGML_Q4_0, w, 1, 256, x, 1, y, RL_ACT_Q8, RL_PATH_REF, 0,
                             0, msg, sizeof msg, NULL) == RL_BADARG);
    CHECK(rl_matmul_quant(RL_GGUF_GGML_Q4_0, w, 1, 256, x, 0, y, RL_ACT_Q8, msg, sizeof msg,
                          NULL) == RL_OK);
}

int main(void) {
    CHECK_CASE(test_q8_matmul());
    CHECK_CASE(test_q8_matches_matvec());
    CHECK_CASE(test_q8_whole_sums());
    CHECK_CASE(test_q8_token_runs());
    CHECK_CASE(test_q8_tiles_extreme_sums());
    CHECK_CASE(test_outlier_product());
    CHECK_CASE(test_q8x2_spec());
    CHECK_CASE(test_q8x2_residual());
    CHECK_CASE(test_float_matmul());
    CHECK_CASE(test_float_matmul_encoder_shapes());
    CHECK_CASE(test_float_matmul_tile_sizes());
    CHECK_CASE(test_f16_nan_weights());
    CHECK_CASE(test_nan_payload_order());
    CHECK_CASE(test_errors());
    CHECK_CASE(test_quant_matmul());
    CHECK_CASE(test_quant_errors());
    return check_report("matmul");
}
