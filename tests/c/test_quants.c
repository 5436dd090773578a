/* test_quants.c - the legacy, K-quant and IQ4 kernels (prims/quants.h).
 *
 * Without any library: the type table agrees with gguf/types.c; the checked
 * entry points refuse what they promise to (bad type, length, NULL data,
 * NaN and infinity with the first index, a binary16 scale that overflows);
 * dequantize(quantize(x)) stays within each type's error bound; Q4_0 and
 * Q5_0 blocks survive a second round trip unchanged (their scale is the
 * largest value over a power of two, so it comes back exactly).
 *
 * Against llama.cpp v0.5.0's libggml-base.so (tests/fetch-llama-lib.sh puts
 * it in build/cache/llama/; RL_LLAMA_LIB overrides the path; without it
 * these parts say SKIP, and fail under CI=true): for every type, rows of
 * many kinds of data are quantized by rl_quantize and by
 * ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, NULL) -- the
 * path llama-quantize takes without an importance matrix -- and every byte
 * is compared; ggml's bytes, and random blocks, are dequantized by ours and
 * by ggml's to_float and every float is compared bit for bit.
 *
 * Against the tracked goldens of tests/golden/quants/ (llama-quantize's own
 * output for every ftype, from heavy-tailed inputs; a missing file fails,
 * never skips): every tensor llama-quantize did not leave F32 is quantized
 * again from the F32 input by rl_quantize (Q8_0 by prims/q8.h, F16 by
 * round to nearest even) to the golden's type, and every byte must be
 * llama-quantize's -- our quantizers on that data, apart from which type
 * each tensor gets; with the library, the golden bytes dequantized by ours
 * and by ggml's to_float must agree bit for bit.
 *
 * The row products of every type here (doc/products.md §4, §5): every
 * path of each type gives the reference's bits on random rows of 1 to 64
 * blocks, and is near the exact product of the dequantized rows; with
 * llama.cpp's CPU library built for Haswell (beside libggml-base.so;
 * skipped without it or without AVX2), those rows and every golden row of
 * these types give ggml's ggml_vec_dot_* bits, and rl_quantize_q8_1_ref
 * and rl_quantize_q8_K_ref give ggml's bytes.  Run from the repository
 * root.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/q8.h"
#include "prims/quants.h"
#include "prims/type_traits.h"
#include "tests/c/check.h"
#include "tests/c/support/json.h"
#include "tests/c/testutil.h"

#define DEFAULT_LIB "build/cache/llama/libggml-base.so"

/* A type's row with its name and geometry (gguf/types.c's), for the
 * checks below. */
typedef struct qtype {
    const rl_type_traits *t;
    const char *name;
    uint32_t block, bytes;
} qtype;

static qtype qtype_of(uint32_t id) {
    qtype q = {rl_quant_traits_of(id), rl_gguf_ggml_type_name(id), rl_gguf_ggml_block_size(id),
               rl_gguf_ggml_block_bytes(id)};
    return q;
}

static const uint32_t types[] = {
    RL_GGUF_GGML_Q4_0, RL_GGUF_GGML_Q4_1, RL_GGUF_GGML_Q5_0, RL_GGUF_GGML_Q5_1,
    RL_GGUF_GGML_Q2_K, RL_GGUF_GGML_Q3_K, RL_GGUF_GGML_Q4_K, RL_GGUF_GGML_Q5_K,
    RL_GGUF_GGML_Q6_K, RL_GGUF_GGML_IQ4_NL, RL_GGUF_GGML_IQ4_XS,
};
#define N_TYPES (sizeof types / sizeof types[0])

/* ------------------------------------------------------------ the data */

#define ROW 1024 /* values per row: 4 super-blocks, 32 legacy blocks */

enum {
    K_GAUSS, K_HEAVY, K_OUTLIER_COLS, K_ZERO_BLOCKS, K_TINY, K_HUGE, K_SUBNORMAL,
    K_SAME, K_PLUSMINUS, K_POSITIVE, K_GRID, K_SPARSE, K_MIXED, K_COUNT
};
static const char *const kind_name[K_COUNT] = {
    "gaussian", "heavy-tailed", "outlier columns", "all-zero blocks", "tiny",
    "huge", "subnormal", "one value", "+-one value", "all positive", "grid (ties)",
    "sparse", "mixed per block"};

static float from_bits(uint32_t u) { return rl_gguf_f32_from_bits(u); }

/* 32 values of kind k (every kind but K_MIXED) at scale 2^e. */
static void gen32(float *x, int k, int e, int col0) {
    float c;
    switch (k) {
    case K_GAUSS:
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf(rnd_gauss(), e);
        break;
    case K_HEAVY: /* gaussian over uniform: a Cauchy-like tail */
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf(rnd_gauss() / (float)(rnd_unit() + 0.02), e);
        break;
    case K_OUTLIER_COLS: /* columns 7, 100, 513 are 50x the rest, as in LLM weights */
        for (int j = 0; j < 32; j++) {
            int col = col0 + j;
            x[j] = ldexpf(rnd_gauss(), e) * (col == 7 || col == 100 || col == 513 ? 50.f : 1.f);
        }
        break;
    case K_ZERO_BLOCKS:
        for (int j = 0; j < 32; j++)
            x[j] = (rnd() & 1) ? -0.0f : 0.0f;
        break;
    case K_TINY: /* near and below the K-quants' 1e-15 cut, and tiny normals */
        e = rnd_int(-60, -40) - (rnd() & 1 ? 60 : 0);
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf(rnd_gauss(), e);
        break;
    case K_HUGE: /* scales near what binary16 holds */
        e = rnd_int(8, 13);
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf(rnd_gauss(), e);
        break;
    case K_SUBNORMAL:
        for (int j = 0; j < 32; j++)
            x[j] = (rnd() & 3) ? from_bits((uint32_t)rnd() & 0x807fffffu)
                               : ldexpf(rnd_gauss(), -130);
        break;
    case K_SAME:
        c = ldexpf(rnd_gauss(), e);
        for (int j = 0; j < 32; j++)
            x[j] = c;
        break;
    case K_PLUSMINUS:
        c = ldexpf(rnd_gauss(), e);
        for (int j = 0; j < 32; j++)
            x[j] = (rnd() & 1) ? c : -c;
        break;
    case K_POSITIVE:
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf(fabsf(rnd_gauss()) + 0.5f, e);
        break;
    case K_GRID: /* small integers and halves: exact ties for the roundings */
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf((float)rnd_int(-16, 16) * 0.5f, e);
        break;
    default: /* K_SPARSE */
        for (int j = 0; j < 32; j++)
            x[j] = (rnd() % 16) ? 0.0f : ldexpf(rnd_gauss(), e);
        break;
    }
}

/* A row of kind k at scales 2^elo..2^ehi. */
static void gen_row(float *x, int k, int elo, int ehi) {
    int e = rnd_int(elo, ehi);
    for (int b = 0; b < ROW / 32; b++) {
        int kb = k;
        if (k == K_MIXED) {
            kb = rnd_int(0, K_MIXED - 1);
            e = rnd_int(elo, ehi);
        }
        gen32(x + 32 * b, kb, e, 32 * b);
    }
}

/* ------------------------------------------------ table and entry points */

static void test_table(void) {
    for (size_t t = 0; t < N_TYPES; t++)
        CHECK_MSG(rl_quant_traits_of(types[t]) != NULL &&
                      rl_quant_traits_of(types[t]) == rl_type_traits_of(types[t]),
                  "%s: no row of prims/type_traits.h", rl_gguf_ggml_type_name(types[t]));
    CHECK(rl_quant_traits_of(RL_GGUF_GGML_Q8_0) == NULL); /* prims/q8.h's */
    CHECK(rl_quant_traits_of(RL_GGUF_GGML_F32) == NULL);
    CHECK(rl_quant_traits_of(9999) == NULL);
    CHECK(rl_quant_bytes(RL_GGUF_GGML_Q4_K, 512) == 288);
    CHECK(rl_quant_bytes(RL_GGUF_GGML_IQ2_XXS, 256) == 0);
}

static void test_refusals(void) {
    static float x[ROW];
    static unsigned char y[ROW * 2];
    size_t where = 12345;
    float f[32];
    CHECK(rl_quantize(RL_GGUF_GGML_Q8_0, x, 32, y, &where) == RL_UNSUPPORTED);
    CHECK(rl_dequantize(RL_GGUF_GGML_IQ2_XXS, y, 256, f) == RL_UNSUPPORTED);
    CHECK(rl_quantize(RL_GGUF_GGML_Q4_K, x, 128, y, &where) == RL_BADLEN);
    CHECK(rl_quantize(RL_GGUF_GGML_Q4_0, x, 33, y, &where) == RL_BADLEN);
    CHECK(rl_dequantize(RL_GGUF_GGML_Q6_K, y, 255, f) == RL_BADLEN);
    CHECK(rl_quantize(RL_GGUF_GGML_Q4_0, NULL, 32, y, &where) == RL_BADARG);
    CHECK(rl_quantize(RL_GGUF_GGML_Q4_0, x, 32, NULL, &where) == RL_BADARG);
    CHECK(rl_dequantize(RL_GGUF_GGML_Q4_0, NULL, 32, f) == RL_BADARG);
    CHECK(rl_quantize(RL_GGUF_GGML_Q4_0, NULL, 0, NULL, &where) == RL_OK);
    CHECK(strcmp(rl_status_name(RL_OVERFLOW), "scale-overflow") == 0);
    CHECK(strcmp(rl_status_name(RL_NONFINITE), "non-finite") == 0);
    for (size_t t = 0; t < N_TYPES; t++) {
        const qtype q_ = qtype_of(types[t]), *q = &q_;
        /* the first non-finite value is named, wherever it is */
        for (int j = 0; j < ROW; j++)
            x[j] = (float)(j % 7) - 3.f;
        x[700] = NAN;
        x[900] = INFINITY;
        memset(y, 0xa5, sizeof y);
        where = 0;
        CHECK_MSG(rl_quantize(types[t], x, ROW, y, &where) == RL_NONFINITE &&
                      where == 700,
                  "%s: NaN at 700 not reported (where %zu)", q->name, where);
        CHECK_MSG(y[0] == 0xa5, "%s: wrote before refusing a NaN", q->name);
        x[700] = 0;
        CHECK(rl_quantize(types[t], x, ROW, y, &where) == RL_NONFINITE && where == 900);
        x[900] = -INFINITY;
        CHECK(rl_quantize(types[t], x, ROW, y, &where) == RL_NONFINITE && where == 900);
        x[900] = 0;
        CHECK_MSG(rl_quantize(types[t], x, ROW, y, &where) == RL_OK, "%s: ordinary row",
                  q->name);
        /* beyond the limit (3e38, and the next float above it), in the
         * third block and again in the fourth: the third is named */
        float big[2] = {3e38f, nextafterf(q->t->limit, INFINITY)};
        for (int b = 0; b < 2; b++) {
            x[2 * q->block + 5] = big[b];
            x[3 * q->block + 1] = -big[b];
            where = 0;
            CHECK_MSG(rl_quantize(types[t], x, ROW, y, &where) == RL_OVERFLOW &&
                          where == 2,
                      "%s: %g not refused at block 2 (where %zu)", q->name, big[b], where);
            x[3 * q->block + 1] = 0;
        }
        /* at the limit: accepted, or its scale rounds up to infinity and
         * that is refused at the same block */
        for (int sign = -1; sign <= 1; sign += 2) {
            x[2 * q->block + 5] = (float)sign * q->t->limit;
            rl_status st = rl_quantize(types[t], x, ROW, y, &where);
            CHECK_MSG(st == RL_OK || (st == RL_OVERFLOW && where == 2),
                      "%s: %g gives %s at block %zu", q->name, x[2 * q->block + 5],
                      rl_status_name(st), where);
        }
    }
}

/* ------------------------------------------------------- properties */

/* The largest |x - dequantized| a block may show.  Legacy: the quant is
 * round((x - m)/d) (truncation of +0.5) capped at the top level, so the
 * error is at most half a step, and one step at the capped top; the f16
 * rounding of d (relative 2^-11, times at most 31 levels) and of m add a
 * little, bounded here by a further 2% of a step plus |m| * 2^-11.
 * K-quants: the scales are searched, so no closed bound; each value is
 * within the (sub-)block's range of the largest |x| of its super-block
 * over the type's number of levels, times a margin of 1.5 for scale
 * quantization (6 or 8 bits) and the min being clamped at 0. */
static double block_bound(uint32_t type, float lo, float hi) {
    double amax = fmax(fabs(lo), fabs(hi));
    switch (type) {
    case RL_GGUF_GGML_Q4_0: return amax / 8 * 1.02 + 1e-45;
    case RL_GGUF_GGML_Q5_0: return amax / 16 * 1.02 + 1e-45;
    case RL_GGUF_GGML_Q4_1: return (hi - lo) / 15 * 1.02 + fabs(lo) / 2048 + 1e-45;
    case RL_GGUF_GGML_Q5_1: return (hi - lo) / 31 * 1.02 + fabs(lo) / 2048 + 1e-45;
    case RL_GGUF_GGML_Q2_K: return amax * 2 / 3 * 1.5;
    case RL_GGUF_GGML_Q3_K: return amax / 4 * 1.5;
    case RL_GGUF_GGML_Q4_K: return amax * 2 / 15 * 1.5;
    case RL_GGUF_GGML_Q5_K: return amax * 2 / 31 * 1.5;
    /* IQ4: the widest gap between levels is 24 of 127 (-127 to -104) */
    case RL_GGUF_GGML_IQ4_NL: return amax * 12 / 127 * 1.5;
    case RL_GGUF_GGML_IQ4_XS: return amax * 12 / 127 * 1.5;
    default: return amax / 32 * 1.5; /* Q6_K */
    }
}

/* Round trip error within the bound, on rows whose scales are ordinary
 * normals (f16 subnormal or zero scales lose everything by design); the
 * RMS error of gaussian rows is reported. */
static void test_round_trip(void) {
    enum { NROWS = 400 };
    float *x = malloc(sizeof(float) * ROW), *z = malloc(sizeof(float) * ROW);
    unsigned char *q = malloc(ROW * 2), *q2 = malloc(ROW * 2);
    for (size_t t = 0; t < N_TYPES; t++) {
        const qtype tr_ = qtype_of(types[t]), *tr = &tr_;
        long bad = 0, blocks = 0, skipped = 0, unstable = 0, stable_tried = 0;
        double se = 0, sx = 0;
        for (int r = 0; r < NROWS; r++) {
            int k = r % 3 == 0 ? K_GAUSS : r % 3 == 1 ? K_HEAVY : K_OUTLIER_COLS;
            gen_row(x, k, 0, 8); /* scales mostly binary16 normals */
            if (rl_quantize(types[t], x, ROW, q, NULL) != RL_OK ||
                rl_dequantize(types[t], q, ROW, z) != RL_OK) {
                bad++;
                continue;
            }
            for (size_t b = 0; b < ROW / tr->block; b++) {
                const float *xb = x + b * tr->block, *zb = z + b * tr->block;
                float lo = xb[0], hi = xb[0];
                for (size_t j = 1; j < tr->block; j++) {
                    lo = fminf(lo, xb[j]);
                    hi = fmaxf(hi, xb[j]);
                }
                /* a binary16 subnormal scale keeps a bit or two: no bound */
                int subnormal = 0;
                for (int k = 0; k < 2; k++) {
                    uint16_t h;
                    if (tr->t->f16_at[k] < 0)
                        continue;
                    memcpy(&h, q + b * tr->bytes + tr->t->f16_at[k], 2);
                    subnormal |= (h & 0x7c00) == 0 && (h & 0x3ff) != 0;
                }
                if (subnormal) {
                    skipped++;
                    continue;
                }
                double bound = block_bound(types[t], lo, hi);
                blocks++;
                for (size_t j = 0; j < tr->block; j++) {
                    double err = fabs((double)xb[j] - zb[j]);
                    if (k == K_GAUSS) {
                        se += err * err;
                        sx += (double)xb[j] * xb[j];
                    }
                    if (!(err <= bound)) {
                        if (bad < 3)
                            fprintf(stderr, "%s row %d block %zu value %zu: %g -> %g, bound %g\n",
                                    tr->name, r, b, j, xb[j], zb[j], bound);
                        bad++;
                    }
                }
            }
            /* Q4_0/Q5_0: quantize(dequantize(q)) == q */
            if (types[t] == RL_GGUF_GGML_Q4_0 || types[t] == RL_GGUF_GGML_Q5_0) {
                rl_quantize(types[t], z, ROW, q2, NULL);
                for (size_t b = 0; b < ROW / tr->block; b++) {
                    stable_tried++;
                    if (memcmp(q + b * tr->bytes, q2 + b * tr->bytes, tr->bytes))
                        unstable++;
                }
            }
        }
        CHECK_MSG(bad == 0, "%s: %ld values outside the round-trip bound", tr->name, bad);
        CHECK_MSG(unstable == 0, "%s: %ld of %ld blocks changed on a second round trip",
                  tr->name, unstable, stable_tried);
        CHECK_MSG(blocks > 4 * skipped, "%s: only %ld blocks with normal scales", tr->name,
                  blocks);
        fprintf(stderr,
                "%s: %ld blocks within bound (%ld with a subnormal binary16 scale not bounded), "
                "gaussian relative RMS error %.4f%s\n",
                tr->name, blocks, skipped, sqrt(se / sx),
                stable_tried ? ", second round trip identical" : "");
    }
    free(x);
    free(z);
    free(q);
    free(q2);
}

/* --------------------------------------------------- against llama.cpp */

struct ll_type_traits { /* struct ggml_type_traits of ggml.h, that release */
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    void (*to_float)(const void *x, float *y, int64_t k);
    void (*from_float_ref)(const float *x, void *y, int64_t k);
};

static struct {
    size_t (*quantize_chunk)(int type, const float *src, void *dst, int64_t start,
                             int64_t nrows, int64_t n_per_row, const float *imatrix);
    const struct ll_type_traits *(*type_traits)(int type);
} ll;

static int ll_load(void) {
    const char *path = getenv("RL_LLAMA_LIB");
    if (!path || !*path)
        path = DEFAULT_LIB;
    setenv("GGML_NO_BACKTRACE", "1", 1);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        CHECK_SKIP_REFERENCE("llama.cpp library not loaded (%s): the comparisons with ggml's "
                             "quantizers are skipped (tests/fetch-llama-lib.sh fetches it)",
                             dlerror());
        return 0;
    }
    *(void **)&ll.quantize_chunk = dlsym(h, "ggml_quantize_chunk");
    *(void **)&ll.type_traits = dlsym(h, "ggml_get_type_traits");
    CHECK_MSG(ll.quantize_chunk && ll.type_traits,
              "%s lacks ggml_quantize_chunk or ggml_get_type_traits", path);
    if (!ll.quantize_chunk || !ll.type_traits)
        return 0;
    fprintf(stderr, "llama.cpp library: %s\n", path);
    return 1;
}

#define NROWS_PER_KIND 160

/* First difference of a run of blocks, printed once per type. */
static long count_diff_blocks(const char *name, const unsigned char *a, const unsigned char *b,
                              size_t nb, size_t bytes, const float *x, size_t block,
                              int *shown) {
    long n = 0;
    for (size_t i = 0; i < nb; i++) {
        if (!memcmp(a + i * bytes, b + i * bytes, bytes))
            continue;
        if (!*shown) {
            *shown = 1;
            fprintf(stderr, "%s: block %zu differs (first input %a); bytes ours/ggml:\n", name,
                    i, x[i * block]);
            for (size_t j = 0; j < bytes; j++)
                fprintf(stderr, "%02x%s", a[i * bytes + j], j + 1 < bytes ? "" : "\n");
            for (size_t j = 0; j < bytes; j++)
                fprintf(stderr, "%02x%s", b[i * bytes + j], j + 1 < bytes ? "" : "\n");
        }
        n++;
    }
    return n;
}

static long count_diff_floats(const float *a, const float *b, size_t n) {
    long d = 0;
    for (size_t i = 0; i < n; i++)
        d += rl_gguf_f32_bits(a[i]) != rl_gguf_f32_bits(b[i]);
    return d;
}

static void test_against_ggml(void) {
    const size_t nrows = (size_t)K_COUNT * NROWS_PER_KIND;
    float *x = malloc(sizeof(float) * ROW * nrows);
    float *za = malloc(sizeof(float) * ROW * nrows), *zb = malloc(sizeof(float) * ROW * nrows);
    unsigned char *qa = malloc(ROW * 2 * nrows), *qb = malloc(ROW * 2 * nrows);
    int kind_of[K_COUNT * NROWS_PER_KIND];
    for (size_t r = 0; r < nrows; r++) {
        kind_of[r] = (int)(r % K_COUNT);
        gen_row(x + r * ROW, kind_of[r], -20, 10);
    }
    for (size_t t = 0; t < N_TYPES; t++) {
        const qtype tr_ = qtype_of(types[t]), *tr = &tr_;
        const size_t nb = ROW * nrows / tr->block, nbytes = nb * tr->bytes;
        size_t where = 0;
        memset(qa, 0, nbytes);
        memset(qb, 0x5a, nbytes);
        /* the kernel itself: rl_quantize writes nothing for a row beyond
         * the type's limit, and ggml's bytes are wanted for every row */
        rl_status st = rl_quantize(types[t], x, ROW * nrows, qa, &where);
        CHECK_MSG(st == RL_OK || st == RL_OVERFLOW, "%s: %s", tr->name,
                  rl_status_name(st));
        tr->t->from_float(x, qa, nb);
        size_t got = ll.quantize_chunk((int)types[t], x, qb, 0, (int64_t)nrows, ROW, NULL);
        CHECK_MSG(got == nbytes, "%s: ggml_quantize_chunk wrote %zu bytes, expected %zu",
                  tr->name, got, nbytes);
        int shown = 0;
        long per_kind[K_COUNT] = {0}, diff = 0;
        size_t bpr = ROW / tr->block;
        for (size_t r = 0; r < nrows; r++) {
            long d = count_diff_blocks(tr->name, qa + r * bpr * tr->bytes,
                                       qb + r * bpr * tr->bytes, bpr, tr->bytes,
                                       x + r * ROW, tr->block, &shown);
            per_kind[kind_of[r]] += d;
            diff += d;
        }
        CHECK_MSG(diff == 0, "%s: %ld of %zu blocks differ from ggml_quantize_chunk", tr->name,
                  diff, nb);
        for (int k = 0; k < K_COUNT; k++)
            if (per_kind[k])
                fprintf(stderr, "  %s, %s rows: %ld blocks differ\n", tr->name, kind_name[k],
                        per_kind[k]);

        /* dequantize ggml's bytes with both */
        const struct ll_type_traits *lt = ll.type_traits((int)types[t]);
        CHECK(lt && lt->to_float && (uint64_t)lt->blck_size == tr->block &&
              lt->type_size == tr->bytes);
        if (!lt || !lt->to_float)
            continue;
        rl_dequantize(types[t], qb, ROW * nrows, za);
        lt->to_float(qb, zb, (int64_t)(ROW * nrows));
        long fd = count_diff_floats(za, zb, ROW * nrows);
        CHECK_MSG(fd == 0, "%s: %ld of %zu dequantized floats differ from ggml's to_float",
                  tr->name, fd, ROW * nrows);

        /* and random blocks: any bytes, with scales kept finite (a NaN's
         * payload after widening is not what this compares) */
        for (size_t i = 0; i < nbytes; i++)
            qa[i] = (unsigned char)rnd();
        for (size_t b = 0; b < nb; b++)
            for (int k = 0; k < 2; k++)
                if (tr->t->f16_at[k] >= 0) {
                    unsigned char *hb = qa + b * tr->bytes + tr->t->f16_at[k] + 1;
                    if ((*hb & 0x7c) == 0x7c)
                        *hb &= 0xbf;
                }
        rl_dequantize(types[t], qa, ROW * nrows, za);
        lt->to_float(qa, zb, (int64_t)(ROW * nrows));
        long rd = count_diff_floats(za, zb, ROW * nrows);
        CHECK_MSG(rd == 0, "%s: %ld of %zu floats of random blocks differ from ggml's to_float",
                  tr->name, rd, ROW * nrows);
        fprintf(stderr,
                "%s: %zu rows x %d (%zu blocks, %d kinds) quantized: %zu blocks identical%s; "
                "dequantized %zu + %zu floats: %zu + %zu bit-identical\n",
                tr->name, nrows, ROW, nb, K_COUNT, nb - (size_t)diff,
                st == RL_OVERFLOW ? " (some scales overflow binary16)" : "",
                (size_t)ROW * nrows, (size_t)ROW * nrows, ROW * nrows - (size_t)fd,
                ROW * nrows - (size_t)rd);
    }
    free(x);
    free(za);
    free(zb);
    free(qa);
    free(qb);
}

/* ------------------------------------------- tests/golden/quants/ */

#define QGOLDEN "tests/golden/quants/"

static const char *const golden_inputs[] = {"quant_main", "quant_odd"};
static const char *const golden_ftypes[] = {
    "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_s", "q3_k_m", "q3_k_l",
    "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs"};

/* A tensor of a gguf-py dump: its type id, element count and absolute
 * offset in a file of LEN bytes whose dump is DUMP; 0 when the entry lacks
 * one of them or lies past the end. */
static int golden_tensor(const json_t *dump, const char *name, size_t len, uint32_t *type,
                         size_t *n, size_t *at, size_t *nbytes) {
    const json_t *t = rl_test_json_tensor(dump, name), *ne = json_object_get(t, "ne");
    uint64_t base, off, ty, nb, v;
    if (!t || !json_is_array(ne) || !rl_test_json_u64(json_object_get(dump, "data_offset"), &base) ||
        !rl_test_json_u64(json_object_get(t, "offset"), &off) ||
        !rl_test_json_u64(json_object_get(t, "type_id"), &ty) ||
        !rl_test_json_u64(json_object_get(t, "nbytes"), &nb))
        return 0;
    size_t count = 1, d;
    json_t *e;
    json_array_foreach(ne, d, e) {
        if (!rl_test_json_u64(e, &v))
            return 0;
        count *= (size_t)v;
    }
    *type = (uint32_t)ty;
    *n = count;
    *at = (size_t)(base + off);
    *nbytes = (size_t)nb;
    return *at <= len && *nbytes <= len - *at;
}

/* Our bytes for N f32 values X as TYPE into Y (*bytes of them); 0 when
 * TYPE is none of ours or our quantizer refuses X. */
static int our_bytes(uint32_t type, const float *x, size_t n, void *y, size_t *bytes,
                     rl_path path) {
    size_t where;
    if (type == RL_GGUF_GGML_F16) {
        rl_gguf_f32_to_f16_row(x, y, n);
        *bytes = 2 * n;
        return 1;
    }
    if (type == RL_GGUF_GGML_Q8_0) {
        *bytes = rl_q8_bytes(n);
        return rl_q8_quantize_path(RL_SRC_F32, x, n, y, &where, path) == RL_OK;
    }
    *bytes = rl_quant_bytes(type, n);
    return *bytes && rl_quantize(type, x, n, y, &where) == RL_OK;
}

/* Our dequantization of the N values of TYPE at X into Y. */
static void our_floats(uint32_t type, const void *x, size_t n, float *y) {
    if (type == RL_GGUF_GGML_F16)
        rl_gguf_f16_to_f32_row(x, y, n);
    else if (type == RL_GGUF_GGML_Q8_0)
        rl_q8_dequantize_ref(x, n / 32, y);
    else
        rl_dequantize(type, x, n, y);
}

static const char *golden_type_name(uint32_t type) {
    return rl_quant_traits_of(type) || type == RL_GGUF_GGML_Q8_0 || type == RL_GGUF_GGML_F16
               ? rl_gguf_ggml_type_name(type)
               : "?";
}

/* One output of llama-quantize against its F32 input; adds to SEEN[type]
 * the tensors compared. */
static void test_golden_output(const char *input, const char *ftype, int have_ll, long *seen) {
    char path[256];
    snprintf(path, sizeof path, QGOLDEN "%s.f32.gguf", input);
    uint64_t lin = 0, lout = 0;
    unsigned char *din = slurp(path, &lin);
    snprintf(path, sizeof path, QGOLDEN "%s.f32.gguf.json", input);
    json_t *jin = rl_test_json_load(path);
    snprintf(path, sizeof path, QGOLDEN "%s.%s.gguf", input, ftype);
    unsigned char *dout = slurp(path, &lout);
    snprintf(path, sizeof path, QGOLDEN "%s.%s.gguf.json", input, ftype);
    json_t *jout = rl_test_json_load(path);
    CHECK_MSG(din && jin && dout && jout,
              "the tracked golden %s.%s (or its input) is missing: git checkout restores it",
              input, ftype);
    int tensors = 0, bad = 0, deq_bad = 0;
    size_t ti;
    json_t *t;
    if (!(din && jin && dout && jout))
        goto done;
    json_array_foreach(json_object_get(jout, "tensors"), ti, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        uint32_t ty_o, ty_i;
        size_t n_o, n_i, at_o, at_i, nb_o, nb_i;
        if (!name || !golden_tensor(jout, name, (size_t)lout, &ty_o, &n_o, &at_o, &nb_o) ||
            !golden_tensor(jin, name, (size_t)lin, &ty_i, &n_i, &at_i, &nb_i) ||
            ty_i != RL_GGUF_GGML_F32 || n_i != n_o || nb_i != 4 * n_i) {
            fprintf(stderr, "  %s.%s: tensor %s unreadable, or not an F32 tensor of %s\n", input,
                    ftype, name ? name : "?", input);
            bad++;
            continue;
        }
        if (ty_o == RL_GGUF_GGML_F32)
            continue; /* copied, not quantized */
        float *x = malloc(4 * n_i), *za = malloc(4 * n_i), *zb = malloc(4 * n_i);
        unsigned char *y = malloc(nb_o + 64), *g = malloc(nb_o + 64);
        memcpy(x, din + at_i, 4 * n_i); /* aligned copies */
        memcpy(g, dout + at_o, nb_o);
        for (int p = RL_PATH_REF; p <= (ty_o == RL_GGUF_GGML_Q8_0 ? RL_PATH_AVX2 : RL_PATH_REF);
             p++) {
            size_t bytes = 0;
            if (!rl_path_supported((rl_path)p))
                continue;
            if (!our_bytes(ty_o, x, n_i, y, &bytes, (rl_path)p) || bytes != nb_o) {
                fprintf(stderr, "  %s.%s: %s as %s: refused, or %zu bytes for llama-quantize's "
                        "%zu\n", input, ftype, name, golden_type_name(ty_o), bytes, nb_o);
                bad++;
            } else if (memcmp(y, g, nb_o)) {
                size_t i = 0;
                while (y[i] == g[i])
                    i++;
                fprintf(stderr, "  %s.%s: %s as %s (%s): first differing byte %zu of %zu "
                        "(ours %02x, llama-quantize's %02x)\n", input, ftype, name,
                        golden_type_name(ty_o), rl_path_name((rl_path)p), i, nb_o, y[i], g[i]);
                bad++;
            }
        }
        if (have_ll) {
            const struct ll_type_traits *lt = ll.type_traits((int)ty_o);
            our_floats(ty_o, g, n_o, za);
            if (lt && lt->to_float) {
                lt->to_float(g, zb, (int64_t)n_o);
                long d = count_diff_floats(za, zb, n_o);
                if (d) {
                    fprintf(stderr, "  %s.%s: %s (%s): %ld of %zu dequantized floats differ from "
                            "ggml's to_float\n", input, ftype, name, golden_type_name(ty_o), d,
                            n_o);
                    deq_bad++;
                }
            } else {
                deq_bad++;
            }
        }
        seen[ty_o]++;
        tensors++;
        free(x);
        free(za);
        free(zb);
        free(y);
        free(g);
    }
    CHECK_MSG(tensors > 0 && !bad, "%s.%s: %d quantized tensors, %d differ from llama-quantize's",
              input, ftype, tensors, bad);
    CHECK_MSG(!deq_bad, "%s.%s: %d tensors dequantize otherwise than ggml's to_float", input,
              ftype, deq_bad);
done:
    free(din);
    free(dout);
    json_decref(jin);
    json_decref(jout);
}

static void test_goldens(int have_ll) {
    long seen[64] = {0};
    for (size_t i = 0; i < sizeof golden_inputs / sizeof *golden_inputs; i++)
        for (size_t f = 0; f < sizeof golden_ftypes / sizeof *golden_ftypes; f++)
            test_golden_output(golden_inputs[i], golden_ftypes[f], have_ll, seen);
    /* every type of ours, Q8_0 and F16 among the goldens: the comparison
     * above cannot pass by finding nothing */
    for (size_t t = 0; t < N_TYPES; t++)
        CHECK_MSG(seen[types[t]] > 0, "no %s tensor in tests/golden/quants/",
                  golden_type_name(types[t]));
    CHECK_MSG(seen[RL_GGUF_GGML_Q8_0] > 0 && seen[RL_GGUF_GGML_F16] > 0,
              "no Q8_0 or F16 fallback tensor in tests/golden/quants/");
    fprintf(stderr, "goldens: llama-quantize's bytes equal ours for");
    for (size_t t = 0; t < 64; t++)
        if (seen[t])
            fprintf(stderr, " %s x%ld", golden_type_name((uint32_t)t), seen[t]);
    fprintf(stderr, "%s\n", have_ll ? "; dequantized bit for bit as ggml's to_float" : "");
}

/* ------------------------------------------------------- row products */

/* The types with row products, their ggml vec_dot's name and the
 * activation type. */
static const struct {
    uint32_t type, xtype;
    const char *ggml;
} dot_types[] = {
    {RL_GGUF_GGML_Q4_0, RL_GGUF_GGML_Q8_0, "ggml_vec_dot_q4_0_q8_0"},
    {RL_GGUF_GGML_Q4_1, RL_GGUF_GGML_Q8_1, "ggml_vec_dot_q4_1_q8_1"},
    {RL_GGUF_GGML_Q5_0, RL_GGUF_GGML_Q8_0, "ggml_vec_dot_q5_0_q8_0"},
    {RL_GGUF_GGML_Q5_1, RL_GGUF_GGML_Q8_1, "ggml_vec_dot_q5_1_q8_1"},
    {RL_GGUF_GGML_IQ4_NL, RL_GGUF_GGML_Q8_0, "ggml_vec_dot_iq4_nl_q8_0"},
    {RL_GGUF_GGML_Q2_K, RL_GGUF_GGML_Q8_K, "ggml_vec_dot_q2_K_q8_K"},
    {RL_GGUF_GGML_Q3_K, RL_GGUF_GGML_Q8_K, "ggml_vec_dot_q3_K_q8_K"},
    {RL_GGUF_GGML_Q4_K, RL_GGUF_GGML_Q8_K, "ggml_vec_dot_q4_K_q8_K"},
    {RL_GGUF_GGML_Q5_K, RL_GGUF_GGML_Q8_K, "ggml_vec_dot_q5_K_q8_K"},
    {RL_GGUF_GGML_Q6_K, RL_GGUF_GGML_Q8_K, "ggml_vec_dot_q6_K_q8_K"},
    {RL_GGUF_GGML_IQ4_XS, RL_GGUF_GGML_Q8_K, "ggml_vec_dot_iq4_xs_q8_K"},
};
#define N_DOT (sizeof dot_types / sizeof dot_types[0])

typedef void (*ll_vec_dot)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y,
                           size_t by, int nrc);

/* ggml's AVX2 vec_dots (the CPU backend built for Haswell, beside the
 * base library), and its quantize_row_q8_1_ref and _q8_K_ref; 0 when not
 * loadable. */
static struct {
    ll_vec_dot dot[N_DOT];
    void (*q8_1_ref)(const float *x, void *y, int64_t k);
    void (*q8_K_ref)(const float *x, void *y, int64_t k);
} lc;

static int lc_load(void) {
    const char *base = getenv("RL_LLAMA_LIB");
    char path[1024];
    if (!base || !*base)
        base = DEFAULT_LIB;
    const char *slash = strrchr(base, '/');
    snprintf(path, sizeof path, "%.*slibggml-cpu-haswell.so", slash ? (int)(slash - base + 1) : 0,
             base);
    if (!rl_path_supported(RL_PATH_AVX2)) {
        CHECK_SKIP("ggml's AVX2 vec_dot: this CPU has no AVX2");
        return 0;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        CHECK_SKIP_REFERENCE("ggml's CPU library not loaded (%s): the row products are not "
                             "compared with ggml's vec_dot (tests/fetch-llama-lib.sh fetches it)",
                             dlerror());
        return 0;
    }
    void (*init)(void);
    *(void **)&init = dlsym(h, "ggml_cpu_init");
    if (init)
        init();
    int ok = 1;
    for (size_t t = 0; t < N_DOT; t++) {
        *(void **)&lc.dot[t] = dlsym(h, dot_types[t].ggml);
        CHECK_MSG(lc.dot[t], "%s lacks %s", path, dot_types[t].ggml);
        ok &= lc.dot[t] != NULL;
    }
    *(void **)&lc.q8_1_ref = dlsym(h, "quantize_row_q8_1_ref");
    *(void **)&lc.q8_K_ref = dlsym(h, "quantize_row_q8_K_ref");
    CHECK_MSG(lc.q8_1_ref && lc.q8_K_ref,
              "%s (or the base library) lacks quantize_row_q8_1_ref or _q8_K_ref", path);
    return ok && lc.q8_1_ref && lc.q8_K_ref;
}

/* The activation blocks of XTYPE for the N floats at X. */
static void dot_activations(uint32_t xtype, const float *x, size_t n, void *y) {
    if (xtype == RL_GGUF_GGML_Q8_1)
        rl_quantize_q8_1_ref(x, y, n / 32);
    else if (xtype == RL_GGUF_GGML_Q8_K)
        rl_quantize_q8_K_ref(x, y, n / 256);
    else
        (void)rl_q8_quantize_f32_ref(x, n, y, NULL);
}

/* Activation value j of the blocks of XTYPE at X, dequantized. */
static float dot_activation(uint32_t xtype, const void *x, size_t j) {
    if (xtype == RL_GGUF_GGML_Q8_1) {
        const rl_block_q8_1 *b = (const rl_block_q8_1 *)x + j / 32;
        return rl_gguf_f16_to_f32(b->d) * (float)b->qs[j % 32];
    }
    if (xtype == RL_GGUF_GGML_Q8_K) {
        const rl_block_q8_K *b = (const rl_block_q8_K *)x + j / 256;
        return b->d * (float)b->qs[j % 256];
    }
    const rl_block_q8_0 *b = (const rl_block_q8_0 *)x + j / 32;
    return rl_gguf_f16_to_f32(b->d) * (float)b->qs[j % 32];
}

/* The exact product of the N dequantized values of the rows, and the sum
 * of the magnitudes of its terms (Q8_1 dequantized as d * q). */
static double dot_exact(size_t t, const void *w, const void *x, size_t n, double *mag) {
    float *wf = malloc(4 * n);
    double s = 0, m = 0;
    rl_dequantize(dot_types[t].type, w, n, wf);
    for (size_t j = 0; j < n; j++) {
        const double p = (double)wf[j] * dot_activation(dot_types[t].xtype, x, j);
        s += p;
        m += fabs(p);
    }
    free(wf);
    *mag = m;
    return s;
}

/* Random weight blocks (any quant bytes, finite scales of every sign) and
 * activations in [-127, 127]: every path of every type gives the
 * reference's bits, and ggml's AVX2 vec_dot's; the products are near the
 * exact product of the dequantized rows. */
static void test_vec_dot_paths(int have_lc) {
    enum { MAXN = 64 * 32 + 256 };
    static const size_t counts[] = {1, 2, 3, 7, 9, 17, 33, 64};
    static unsigned char w[MAXN], x[MAXN * 2];
    static float xf[MAXN];
    long compared = 0, vs_ggml = 0;
    for (size_t t = 0; t < N_DOT; t++) {
        const rl_type_traits *tr = rl_type_traits_of(dot_types[t].type);
        const char *name = rl_gguf_ggml_type_name(dot_types[t].type);
        CHECK_MSG(tr && tr->vec_dot && tr->vec_dot_type == dot_types[t].xtype,
                  "%s: no row product on %s in its row", name,
                  rl_gguf_ggml_type_name(dot_types[t].xtype));
        if (!tr || !tr->vec_dot)
            continue;
        for (int p = RL_PATH_REF; p < RL_PATH_COUNT; p++)
            CHECK_MSG(tr->vec_dot[p], "%s: no product for path %d", name, p);
        const size_t wbytes = rl_gguf_ggml_block_bytes(dot_types[t].type);
        const size_t block = rl_gguf_ggml_block_size(dot_types[t].type);
        for (int rep = 0; rep < 40; rep++) {
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                const size_t nb = counts[c], n = nb * block;
                if (n > MAXN)
                    continue;
                for (size_t i = 0; i < nb * wbytes; i++)
                    w[i] = (unsigned char)rnd();
                /* scales: finite, either sign; mostly 2^-14 .. 2^3, one in
                 * eight zero, subnormal or up to 2^15 */
                for (size_t b = 0; b < nb; b++)
                    for (int k = 0; k < 2 && tr->f16_at[k] >= 0; k++) {
                        const int e = rnd() % 8 ? rnd_int(1, 17) : rnd_int(0, 30);
                        uint16_t d = (uint16_t)((rnd() & 0x8000) | (uint16_t)e << 10 |
                                                (rnd() % 4 ? rnd() & 0x3ff : 0));
                        memcpy(w + b * wbytes + tr->f16_at[k], &d, 2);
                    }
                for (size_t i = 0; i < n; i++)
                    xf[i] = ldexpf(rnd_gauss(), rnd_int(-6, 4));
                if (rep == 0)
                    xf[5] = -xf[5] * 1e3f; /* one large value: quants at +-127 */
                if (rep == 1) /* an all-zero first block (Q8_K: d = 0) */
                    memset(xf, 0, sizeof *xf * block);
                dot_activations(dot_types[t].xtype, xf, n, x);
                const float ref = tr->vec_dot[RL_PATH_REF](w, x, nb);
                for (int p = RL_PATH_AVX2; p < RL_PATH_COUNT; p++) {
                    if (!rl_path_supported((rl_path)p))
                        continue;
                    const float got = tr->vec_dot[p](w, x, nb);
                    CHECK_MSG(rl_gguf_f32_bits(got) == rl_gguf_f32_bits(ref),
                              "%s, %zu blocks, path %s: %a, the reference %a", name, nb,
                              rl_path_name((rl_path)p), got, ref);
                    compared++;
                }
                if (have_lc) {
                    float g = NAN;
                    lc.dot[t]((int)n, &g, 0, w, 0, x, 0, 1);
                    CHECK_MSG(rl_gguf_f32_bits(g) == rl_gguf_f32_bits(ref),
                              "%s, %zu blocks: %a, ggml's %s %a", name, nb, ref,
                              dot_types[t].ggml, g);
                    vs_ggml++;
                }
                double mag, exact = dot_exact(t, w, x, n, &mag);
                CHECK_MSG(fabs((double)ref - exact) <= 0x1p-9 * mag + 0x1p-60,
                          "%s, %zu blocks: %a, the exact product %a (terms %g)", name, nb, ref,
                          exact, mag);
            }
        }
    }
    fprintf(stderr, "row products: %ld SIMD results equal the reference, %ld equal ggml's\n",
            compared, vs_ggml);
}

/* Q8_1 and Q8_K activations: rl_quantize_q8_1_ref's and
 * rl_quantize_q8_K_ref's bytes are ggml's. */
static void test_q8_activations(void) {
    enum { NB = 512 };
    static float x[NB * 32];
    static rl_block_q8_1 a[NB], b[NB];
    static rl_block_q8_K ak[NB / 8], bk[NB / 8];
    for (size_t i = 0; i < NB; i++) {
        int k = (int)(i % (K_COUNT - 1));
        gen32(x + 32 * i, k, rnd_int(-20, 6), (int)(32 * i % ROW));
    }
    rl_quantize_q8_1_ref(x, a, NB);
    memset(b, 0x5a, sizeof b);
    lc.q8_1_ref(x, b, 32 * NB);
    rl_quantize_q8_K_ref(x, ak, NB / 8);
    memset(bk, 0, sizeof bk); /* ggml leaves an all-zero block's sums alone */
    lc.q8_K_ref(x, bk, 32 * NB);
    long d = 0, dk = 0;
    for (size_t i = 0; i < NB; i++)
        d += memcmp(a + i, b + i, sizeof *a) != 0;
    for (size_t i = 0; i < NB / 8; i++)
        dk += memcmp(ak + i, bk + i, sizeof *ak) != 0;
    CHECK_MSG(d == 0, "rl_quantize_q8_1_ref: %ld of %d blocks differ from ggml's", d, NB);
    CHECK_MSG(dk == 0, "rl_quantize_q8_K_ref: %ld of %d blocks differ from ggml's", dk, NB / 8);
}

/* Every tensor of the types with products in tests/golden/quants/
 * (llama-quantize's bytes; legacy rows of 3, 8, 9 and 17 blocks, K rows
 * of one), each row times the next row of its F32 input quantized as
 * activations: ggml's vec_dot's bits. */
static void test_vec_dot_goldens(int have_lc) {
    static const char *const *const ftypes = golden_ftypes;
    long rows_seen[N_DOT] = {0};
    for (size_t i = 0; i < sizeof golden_inputs / sizeof *golden_inputs; i++)
        for (size_t f = 0; f < sizeof golden_ftypes / sizeof *golden_ftypes; f++) {
            char path[256];
            uint64_t lin = 0, lout = 0;
            snprintf(path, sizeof path, QGOLDEN "%s.f32.gguf", golden_inputs[i]);
            unsigned char *din = slurp(path, &lin);
            snprintf(path, sizeof path, QGOLDEN "%s.f32.gguf.json", golden_inputs[i]);
            json_t *jin = rl_test_json_load(path);
            snprintf(path, sizeof path, QGOLDEN "%s.%s.gguf", golden_inputs[i], ftypes[f]);
            unsigned char *dout = slurp(path, &lout);
            snprintf(path, sizeof path, QGOLDEN "%s.%s.gguf.json", golden_inputs[i], ftypes[f]);
            json_t *jout = rl_test_json_load(path);
            CHECK_MSG(din && jin && dout && jout, "the tracked golden %s.%s is missing",
                      golden_inputs[i], ftypes[f]);
            size_t ti;
            json_t *t;
            if (din && jin && dout && jout)
                json_array_foreach(json_object_get(jout, "tensors"), ti, t) {
                    const char *name = json_string_value(json_object_get(t, "name"));
                    const json_t *ne = json_object_get(t, "ne");
                    uint32_t ty, ty_i;
                    size_t n, n_i, at, at_i, nbytes, nb_i, k = N_DOT;
                    if (!name || !golden_tensor(jout, name, (size_t)lout, &ty, &n, &at, &nbytes) ||
                        !golden_tensor(jin, name, (size_t)lin, &ty_i, &n_i, &at_i, &nb_i) ||
                        json_array_size(ne) != 2)
                        continue;
                    for (size_t d = 0; d < N_DOT; d++)
                        if (dot_types[d].type == ty)
                            k = d;
                    if (k == N_DOT)
                        continue;
                    const size_t cols = (size_t)json_integer_value(json_array_get(ne, 0));
                    const size_t rows = n / cols, nb = cols / rl_gguf_ggml_block_size(ty);
                    const size_t wbytes = rl_gguf_ggml_block_bytes(ty);
                    const rl_type_traits *tr = rl_type_traits_of(ty);
                    float *xf = malloc(4 * cols);
                    unsigned char *x = malloc(2 * cols), *w = malloc(wbytes * nb);
                    for (size_t r = 0; r < rows; r++) {
                        memcpy(xf, din + at_i + 4 * cols * ((r + 1) % rows), 4 * cols);
                        memcpy(w, dout + at + wbytes * nb * r, wbytes * nb);
                        dot_activations(dot_types[k].xtype, xf, cols, x);
                        const float ref = tr->vec_dot[RL_PATH_REF](w, x, nb);
                        if (rl_path_supported(RL_PATH_AVX2)) {
                            const float a = tr->vec_dot[RL_PATH_AVX2](w, x, nb);
                            CHECK_MSG(rl_gguf_f32_bits(a) == rl_gguf_f32_bits(ref),
                                      "%s.%s %s row %zu: AVX2 %a, the reference %a",
                                      golden_inputs[i], ftypes[f], name, r, a, ref);
                        }
                        if (have_lc) {
                            float g = NAN;
                            lc.dot[k]((int)cols, &g, 0, w, 0, x, 0, 1);
                            CHECK_MSG(rl_gguf_f32_bits(g) == rl_gguf_f32_bits(ref),
                                      "%s.%s %s row %zu: %a, ggml's %a", golden_inputs[i],
                                      ftypes[f], name, r, ref, g);
                        }
                        rows_seen[k]++;
                    }
                    free(xf);
                    free(x);
                    free(w);
                }
            free(din);
            free(dout);
            json_decref(jin);
            json_decref(jout);
        }
    for (size_t k = 0; k < N_DOT; k++)
        CHECK_MSG(rows_seen[k] > 0, "no %s rows in tests/golden/quants/",
                  rl_gguf_ggml_type_name(dot_types[k].type));
    fprintf(stderr, "golden rows:");
    for (size_t k = 0; k < N_DOT; k++)
        fprintf(stderr, " %s x%ld", rl_gguf_ggml_type_name(dot_types[k].type), rows_seen[k]);
    fprintf(stderr, "%s\n", have_lc ? "; every product ggml's vec_dot's bits" : "");
}

int main(void) {
    CHECK_CASE(test_table());
    CHECK_CASE(test_refusals());
    CHECK_CASE(test_round_trip());
    int have_ll = ll_load();
    /* Both paths: the K-quant fits run eight sub-blocks per AVX2 vector
     * when SIMD is on (and the CPU has it), the scalar code when off. */
    for (int simd = 1; simd >= 0; simd--) {
        rl_set_simd(simd);
        printf("SIMD %s (path %s):\n", simd ? "on" : "off", rl_simd_path());
        if (have_ll)
            CHECK_CASE(test_against_ggml());
        else
            CHECK_SKIP("legacy and K-quants against ggml_quantize_chunk / to_float");
        CHECK_CASE(test_goldens(have_ll));
    }
    rl_set_simd(1);
    int have_lc = lc_load();
    if (have_lc)
        CHECK_CASE(test_q8_activations());
    CHECK_CASE(test_vec_dot_paths(have_lc));
    CHECK_CASE(test_vec_dot_goldens(have_lc));
    return check_report("quants");
}
