/* test_nn.c - the encoder's LayerNorm, NEOX RoPE, attention and GeGLU,
 * the decision head's LayerNorm with bias and bias plus activation
 * (prims/nn.h): every path and thread count against the scalar reference,
 * bit for bit, over random sizes; each against a naive double-precision
 * reference; the sliding-window mask; error cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prims/cpu.h"
#include "prims/nn.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"

static float *rnd_floats(size_t n, float scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = rnd_gauss() * scale;
    return x;
}

/* Runs `call` on every supported path with 1..4 threads into y and counts
 * runs whose bits differ from ref (n floats), showing each one's first
 * difference. */
#define ALL_PATHS(ref, y, n, bad, call)                                        \
    for (int p_ = RL_PATH_REF; p_ <= RL_PATH_AVX512VNNI; p_++) {              \
        if (!rl_path_supported((rl_path)p_))                                  \
            continue;                                                         \
        for (int th = 1; th <= 4; th++) {                                     \
            rl_path path = (rl_path)p_;                                       \
            memset((y), 0xff, (n) * sizeof *(y));                             \
            call;                                                             \
            (bad) += check_floats_differ((y), (ref), (n), "%s, path %d, %d threads", \
                                         #call, p_, th);                       \
        }                                                                     \
    }

/* ---- LayerNorm ------------------------------------------------------ */

static void test_layer_norm(void) {
    long bad_path = 0;
    for (int rep = 0; rep < 30; rep++) {
        size_t n = (size_t)rnd_int(1, 300), d = (size_t)rnd_int(1, 400);
        float eps = rep % 2 ? 1e-5f : 1e-12f;
        float *x = rnd_floats(n * d, ldexpf(1.0f, rnd_int(-4, 6)));
        for (size_t i = 0; i < n * d; i++)
            x[i] += 3.0f; /* a mean to subtract */
        float *w = rnd_floats(d, 1.0f);
        float *ref = malloc(n * d * sizeof *ref), *y = malloc(n * d * sizeof *y);
        CHECK(rl_layer_norm_ex(x, n, d, w, eps, ref, RL_PATH_REF, 1) == RL_OK);
        ALL_PATHS(ref, y, n * d, bad_path, rl_layer_norm_ex(x, n, d, w, eps, y, path, th));
        for (size_t t = 0; t < n; t++) {
            double mean = 0, var = 0;
            for (size_t i = 0; i < d; i++)
                mean += x[t * d + i];
            mean /= (double)d;
            for (size_t i = 0; i < d; i++)
                var += (x[t * d + i] - mean) * (x[t * d + i] - mean);
            var /= (double)d;
            for (size_t i = 0; i < d; i++) {
                double e = (x[t * d + i] - mean) / sqrt(var + eps) * w[i];
                CHECK_EACH(fabs(ref[t * d + i] - e) <= 1e-5 * (fabs(w[i]) + 1e-3) + 1e-6 * fabs(e),
                           "layer-norm %zux%zu row %zu [%zu]: %a, double %a", n, d, t, i,
                           (double)ref[t * d + i], e);
            }
        }
        /* in place */
        memcpy(y, x, n * d * sizeof *y);
        rl_layer_norm_ex(y, n, d, w, eps, y, rl_path_best(), 3);
        bad_path += check_floats_differ(y, ref, n * d, "layer-norm in place, best path");
        free(x), free(w), free(ref), free(y);
    }
    CHECK_MSG(!bad_path, "layer-norm: %ld runs differ from ref", bad_path);
}

/* A row too large to square in f32 answers NaN on every path and thread
 * count (its variance overflows; the scale 1/sqrt(inf) made it zeros),
 * while the other rows keep their values. */
/* The widths of the s1 presets and either side of the widest whose
 * transposed blocks the AVX-512 rows keep between their two passes, at a
 * question's 70 rows (two groups of 32 and a tail of 6): every path's bits
 * are the scalar reference's. */
static void test_layer_norm_kept_widths(void) {
    static const size_t widths[] = {64, 128, 255, 256, 257, 512};
    long bad = 0;
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
        const size_t n = 70, d = widths[wi];
        float *x = rnd_floats(n * d, 4.0f), *w = rnd_floats(d, 1.0f);
        float *ref = malloc(n * d * sizeof *ref), *y = malloc(n * d * sizeof *y);
        CHECK(rl_layer_norm_ex(x, n, d, w, 1e-5f, ref, RL_PATH_REF, 1) == RL_OK);
        ALL_PATHS(ref, y, n * d, bad, rl_layer_norm_ex(x, n, d, w, 1e-5f, y, path, th));
        free(x), free(w), free(ref), free(y);
    }
    CHECK_MSG(!bad, "layer-norm at the preset widths: %ld runs differ from ref", bad);
}

static void test_layer_norm_overflow(void) {
    const size_t n = 11, d = 40; /* 8 rows in the interleaved run, 3 alone */
    for (size_t big = 0; big < n; big++) {
        float *x = rnd_floats(n * d, 1.0f), *w = rnd_floats(d, 1.0f);
        float *ref = malloc(n * d * sizeof *ref), *y = malloc(n * d * sizeof *y);
        CHECK(rl_layer_norm_ex(x, n, d, w, 1e-5f, ref, RL_PATH_REF, 1) == RL_OK);
        x[big * d + 3] = 3e36f; /* its square, 9e72, is beyond f32 */
        for (int p = RL_PATH_REF; p <= RL_PATH_AVX512VNNI; p++) {
            if (!rl_path_supported((rl_path)p))
                continue;
            for (int th = 1; th <= 3; th++) {
                CHECK(rl_layer_norm_ex(x, n, d, w, 1e-5f, y, (rl_path)p, th) == RL_OK);
                for (size_t t = 0; t < n; t++)
                    for (size_t i = 0; i < d; i++)
                        CHECK_EACH(t == big ? isnan(y[t * d + i])
                                            : memcmp(&y[t * d + i], &ref[t * d + i], sizeof *y) == 0,
                                   "layer-norm overflow, path %d, %d threads, big row %zu: row %zu "
                                   "[%zu] %a, ref %a", p, th, big, t, i, (double)y[t * d + i],
                                   (double)ref[t * d + i]);
            }
        }
        free(x), free(w), free(ref), free(y);
    }
}

/* The first NaN or infinity wherever it is, in and past the 64-value
 * blocks; huge finite values and subnormals are finite. */
static void first_non_finite_cases(void) {
    const float nonfinite[3] = {NAN, INFINITY, -INFINITY};
    float x[300];
    for (size_t i = 0; i < 300; i++)
        x[i] = i % 3 ? 3.4e38f : (i % 5 ? -1e-45f : 0.5f);
    CHECK_EQ_U(rl_first_non_finite_f32(x, 300), 300);
    CHECK_EQ_U(rl_first_non_finite_f32(NULL, 0), 0);
    for (size_t n = 1; n <= 300; n += 7)
        for (size_t at = 0; at < n; at += 3) {
            for (int k = 0; k < 3; k++) {
                const float keep = x[at];
                x[at] = nonfinite[k];
                if (at + 1 < n)
                    x[n - 1] = NAN; /* a later one is not the first */
                CHECK_EACH(rl_first_non_finite_f32(x, n) == at,
                           "first-non-finite, simd %d, %zu values, %a at %zu: answered %zu",
                           rl_simd(), n, (double)nonfinite[k], at, rl_first_non_finite_f32(x, n));
                CHECK_EACH(rl_first_non_finite_f32(x, at) == at, /* before it: none */
                           "first-non-finite, simd %d, the %zu values before %a: answered %zu",
                           rl_simd(), at, (double)nonfinite[k], rl_first_non_finite_f32(x, at));
                x[at] = keep;
                if (at + 1 < n)
                    x[n - 1] = (n - 1) % 3 ? 3.4e38f : ((n - 1) % 5 ? -1e-45f : 0.5f);
            }
        }

}

static void test_first_non_finite(void) {
    for (int simd = 0; simd <= 1; simd++) {
        rl_set_simd(simd);
        first_non_finite_cases();
    }
    rl_set_simd(1);
}

/* ---- RoPE ----------------------------------------------------------- */

static void test_rope(void) {
    long bad_path = 0;
    for (int rep = 0; rep < 30; rep++) {
        size_t n = (size_t)rnd_int(1, 200), heads = (size_t)rnd_int(1, 6);
        size_t hd = 2 * (size_t)rnd_int(1, 40), row = heads * hd;
        float base = rep % 2 ? 10000.0f : 160000.0f;
        float *x = rnd_floats(n * row, 1.0f);
        float *ref = malloc(n * row * sizeof *ref), *y = malloc(n * row * sizeof *y);
        CHECK(rl_rope_neox_ex(x, n, heads, hd, base, ref, RL_PATH_REF, 1) == RL_OK);
        ALL_PATHS(ref, y, n * row, bad_path, rl_rope_neox_ex(x, n, heads, hd, base, y, path, th));
        memcpy(y, x, n * row * sizeof *y);
        rl_rope_neox(y, n, heads, hd, base, y);
        bad_path += check_floats_differ(y, ref, n * row, "rope in place, best path");
        /* position 0 turns nothing: cos 0 = 1, sin 0 = 0 exactly */
        CHECK_MSG(!check_floats_differ(ref, x, row, "rope at position 0 against its input"),
                  "rope at position 0 turns nothing");
        const size_t half = hd / 2;
        for (size_t t = 0; t < n; t++)
            for (size_t h = 0; h < heads; h++)
                for (size_t i = 0; i < half; i++) {
                    double th = (double)t * pow(base, -2.0 * (double)i / (double)hd);
                    const float *xs = x + t * row + h * hd;
                    const float *ys = ref + t * row + h * hd;
                    double e0 = xs[i] * cos(th) - xs[i + half] * sin(th);
                    double e1 = xs[i] * sin(th) + xs[i + half] * cos(th);
                    /* f32 angles drift by about i ulps of t */
                    double tol = 1e-5 + 4e-7 * (double)t * (double)(i + 1) *
                                            (fabs(xs[i]) + fabs(xs[i + half]));
                    CHECK_EACH(fabs(ys[i] - e0) <= tol && fabs(ys[i + half] - e1) <= tol,
                               "rope position %zu head %zu pair %zu: (%a, %a), double (%a, %a)",
                               t, h, i, (double)ys[i], (double)ys[i + half], e0, e1);
                }
        free(x), free(ref), free(y);
    }
    CHECK_MSG(!bad_path, "rope: %ld runs differ from ref", bad_path);
}

/* RoPE's angles, kept in tables per (base, head_dim) for the first 1024
 * positions and computed per call past them or past the tables kept
 * (nn.c): every position, first call or later, on every path and thread
 * count, has the bits of nn.h's recipe written out here (the angle
 * multiplied up in f32, cosf and sinf, products and sums without fma). */
static void test_rope_angle_tables(void) {
    long bad = 0;
    const size_t n = 1100, heads = 2;
    static const size_t hds[] = {2, 6, 16, 20, 34};
    for (int b = 0; b < 12; b++) {
        const size_t hd = hds[b % 5], row = heads * hd, half = hd / 2;
        const float base = 1000.0f + 7919.0f * (float)b;
        float *x = rnd_floats(n * row, 1.0f), *want = malloc(n * row * sizeof *want),
              *y = malloc(n * row * sizeof *y);
        const float scale = powf(base, -2.0f / (float)hd);
        for (size_t t = 0; t < n; t++) {
            float theta = (float)t;
            for (size_t i = 0; i < half; i++) {
                const float c = cosf(theta), s = sinf(theta);
                theta *= scale;
                for (size_t h = 0; h < heads; h++) {
                    const float *xs = x + t * row + h * hd;
                    volatile float p0 = xs[i] * c, p1 = xs[i + half] * s;
                    volatile float p2 = xs[i] * s, p3 = xs[i + half] * c;
                    want[t * row + h * hd + i] = p0 - p1;
                    want[t * row + h * hd + i + half] = p2 + p3;
                }
            }
        }
        for (int call = 0; call < 2; call++)
            ALL_PATHS(want, y, n * row, bad,
                      rl_rope_neox_ex(x, n, heads, hd, base, y, path, th));
        free(x), free(want), free(y);
    }
    CHECK_MSG(!bad, "rope angle tables: %ld runs differ from the recipe", bad);
}

/* rl_rope_neox2: q and k turned in one pass have the bits of a call
 * each, on every path and thread count, into other arrays and in place;
 * a missing k or overlapping pairs are refused. */
static void test_rope_pair(void) {
    long bad = 0;
    for (int rep = 0; rep < 12; rep++) {
        size_t n = (size_t)rnd_int(1, 200), heads = (size_t)rnd_int(1, 6);
        size_t hd = 2 * (size_t)rnd_int(1, 40), row = heads * hd, nd = n * row;
        float base = rep % 2 ? 10000.0f : 160000.0f;
        float *q = rnd_floats(nd, 1.0f), *k = rnd_floats(nd, 1.0f);
        float *ref = malloc(2 * nd * sizeof *ref), *y = malloc(2 * nd * sizeof *y);
        CHECK(rl_rope_neox_ex(q, n, heads, hd, base, ref, RL_PATH_REF, 1) == RL_OK);
        CHECK(rl_rope_neox_ex(k, n, heads, hd, base, ref + nd, RL_PATH_REF, 1) == RL_OK);
        ALL_PATHS(ref, y, 2 * nd, bad,
                  rl_rope_neox2_ex(q, k, n, heads, hd, base, y, y + nd, path, th));
        memcpy(y, q, nd * sizeof *y);
        memcpy(y + nd, k, nd * sizeof *y);
        CHECK(rl_rope_neox2(y, y + nd, n, heads, hd, base, y, y + nd) == RL_OK);
        bad += check_floats_differ(y, ref, 2 * nd, "rope pair in place, best path");
        free(q), free(k), free(ref), free(y);
    }
    CHECK_MSG(!bad, "rope pair: %ld runs differ from two rope calls", bad);
    float x[64] = {0}, y[64];
    CHECK(rl_rope_neox2(x, NULL, 2, 2, 8, 10000.0f, x, y) == RL_BADARG);
    CHECK(rl_rope_neox2(x, x + 32, 2, 2, 8, 10000.0f, y, y) == RL_BADARG); /* one out twice */
    CHECK(rl_rope_neox2(x, x + 32, 2, 2, 8, 10000.0f, x + 32, y) == RL_BADARG); /* q into k */
}

/* The pair turned straight out of rows of 3d values (q, k, v side by
 * side, as the fused QKV product writes them): the bits of copying q and
 * k out and turning the copies, on every path and thread count (past the
 * angle table's positions too); bad strides and overlaps refused. */
static void test_rope_pair_strided(void) {
    long bad = 0;
    for (int rep = 0; rep < 12; rep++) {
        size_t n = rep == 0 ? 1100 : (size_t)rnd_int(1, 200), heads = (size_t)rnd_int(1, 6);
        size_t hd = 2 * (size_t)rnd_int(1, 40), d = heads * hd, nd = n * d;
        float base = rep % 2 ? 10000.0f : 160000.0f;
        float *qkv = rnd_floats(3 * nd, 1.0f), *q = malloc(nd * sizeof *q);
        float *k = malloc(nd * sizeof *k);
        float *ref = malloc(2 * nd * sizeof *ref), *y = malloc(2 * nd * sizeof *y);
        for (size_t t = 0; t < n; t++) {
            memcpy(q + t * d, qkv + t * 3 * d, d * sizeof *q);
            memcpy(k + t * d, qkv + t * 3 * d + d, d * sizeof *k);
        }
        CHECK(rl_rope_neox2_ex(q, k, n, heads, hd, base, ref, ref + nd, RL_PATH_REF, 1) ==
              RL_OK);
        ALL_PATHS(ref, y, 2 * nd, bad,
                  CHECK(rl_rope_neox2_strided_ex(qkv, qkv + d, 3 * d, n, heads, hd, base, y,
                                                 y + nd, path, th) == RL_OK));
        free(qkv), free(q), free(k), free(ref), free(y);
    }
    CHECK_MSG(!bad, "rope pair strided: %ld runs differ from turning copies", bad);
    float x[96] = {0}, y[64];
    const rl_path p = rl_path_best();
    CHECK(rl_rope_neox2_strided_ex(x, x + 16, 8, 2, 2, 8, 1e4f, y, y + 32, p, 1) == RL_BADARG);
    CHECK(rl_rope_neox2_strided_ex(x, x + 16, 0, 2, 2, 8, 1e4f, y, y + 32, p, 1) == RL_BADARG);
    CHECK(rl_rope_neox2_strided_ex(x, x + 16, 48, 2, 2, 8, 1e4f, x, y + 32, p, 1) ==
          RL_BADARG); /* turned in place across rows of another width */
    CHECK(rl_rope_neox2_strided_ex(x, x + 16, 48, 2, 2, 8, 1e4f, x + 32, y, p, 1) ==
          RL_BADARG); /* q's output over k's input */
    CHECK(rl_rope_neox2_strided_ex(x, x + 16, 48, 2, 2, 8, 1e4f, y, y + 32, p, 1) == RL_OK);
}

/* ---- attention ------------------------------------------------------ */

/* Double reference for query i, head h, window w (0 = all). */
static void attn_double(const float *q, const float *k, const float *v, size_t n, size_t heads,
                        size_t hd, size_t window, size_t i, size_t h, double *o) {
    const size_t row = heads * hd;
    double *a = malloc(n * sizeof *a), m = -INFINITY, sum = 0;
    for (size_t j = 0; j < n; j++) {
        size_t dist = i > j ? i - j : j - i;
        if (window && dist > window / 2) {
            a[j] = -INFINITY;
            continue;
        }
        double s = 0;
        for (size_t c = 0; c < hd; c++)
            s += (double)q[i * row + h * hd + c] * k[j * row + h * hd + c];
        a[j] = s / sqrt((double)hd);
        if (a[j] > m)
            m = a[j];
    }
    for (size_t j = 0; j < n; j++)
        sum += a[j] = exp(a[j] - m);
    for (size_t c = 0; c < hd; c++) {
        o[c] = 0;
        for (size_t j = 0; j < n; j++)
            o[c] += a[j] / sum * v[j * row + h * hd + c];
    }
    free(a);
}

static void test_attention(void) {
    long bad_path = 0, bad_mask = 0;
    for (int rep = 0; rep < 24; rep++) {
        size_t n = (size_t)rnd_int(1, 90), heads = (size_t)rnd_int(1, 4);
        size_t hd = (size_t)rnd_int(1, 70);
        if (rep < 2) /* large enough that 2..4 threads split it (attention.c) */
            n = 150 + (size_t)rep, heads = 4, hd = 64;
        size_t row = heads * hd;
        size_t window = rep % 3 == 0 ? 0 : (size_t)rnd_int(1, 40);
        float *q = rnd_floats(n * row, 1.0f), *k = rnd_floats(n * row, 1.0f);
        float *v = rnd_floats(n * row, 1.0f);
        float *ref = malloc(n * row * sizeof *ref), *y = malloc(n * row * sizeof *y);
        CHECK(rl_attention_ex(q, k, v, n, heads, hd, window, ref, RL_PATH_REF, 1) == RL_OK);
        ALL_PATHS(ref, y, n * row, bad_path,
                  rl_attention_ex(q, k, v, n, heads, hd, window, y, path, th));
        double *o = malloc(hd * sizeof *o);
        for (size_t i = 0; i < n; i++)
            for (size_t h = 0; h < heads; h++) {
                attn_double(q, k, v, n, heads, hd, window, i, h, o);
                for (size_t c = 0; c < hd; c++)
                    CHECK_EACH(fabs(ref[i * row + h * hd + c] - o[c]) <= 2e-5 * (1 + fabs(o[c])),
                               "attention n %zu window %zu: query %zu head %zu [%zu]: %a, "
                               "double %a", n, (size_t)window, i, h, c,
                               (double)ref[i * row + h * hd + c], o[c]);
            }
        /* The mask: keys and values outside |i - j| <= window / 2 change
         * nothing for query i. */
        if (window && n > window) {
            size_t i = (size_t)rnd_int(0, (int)n - 1);
            for (size_t j = 0; j < n; j++) {
                size_t dist = i > j ? i - j : j - i;
                if (dist > window / 2)
                    for (size_t c = 0; c < row; c++)
                        k[j * row + c] = 50.0f, v[j * row + c] = -7.0f;
            }
            rl_attention(q, k, v, n, heads, hd, window, y);
            bad_mask += memcmp(y + i * row, ref + i * row, row * sizeof *y) != 0;
        }
        free(q), free(k), free(v), free(ref), free(y), free(o);
    }
    CHECK_MSG(!bad_path, "attention: %ld runs differ from ref", bad_path);
    CHECK_MSG(!bad_mask, "attention: %ld queries saw tokens outside their window", bad_mask);
}

/* The queries of one AVX-512 tile (eight consecutive rows) take their
 * exponentials side by side and are scaled afterwards: each row is
 * scaled by its own sum.  Query rows scaled very differently (so their
 * sums differ by orders of magnitude), with and without a window whose
 * edges give the tile's rows different key ranges, at lengths around
 * the tile and the 16-key blocks: every path and thread count has the
 * reference's bits. */
static void test_attention_tile_own_sums(void) {
    static const size_t ns[] = {3, 4, 5, 9, 17, 40, 64};
    static const float gain[] = {1.0f, 12.0f, 0.05f, 30.0f, 3.0f};
    long bad = 0;
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
        for (size_t window = 0; window <= 6; window += 6) {
            const size_t n = ns[ni], heads = 2, hd = 16, row = heads * hd;
            float *q = rnd_floats(n * row, 1.0f), *k = rnd_floats(n * row, 1.0f);
            float *v = rnd_floats(n * row, 1.0f);
            for (size_t i = 0; i < n; i++)
                for (size_t c = 0; c < row; c++)
                    q[i * row + c] *= gain[i % 5];
            float *ref = malloc(n * row * sizeof *ref), *y = malloc(n * row * sizeof *y);
            CHECK(rl_attention_ex(q, k, v, n, heads, hd, window, ref, RL_PATH_REF, 1) == RL_OK);
            ALL_PATHS(ref, y, n * row, bad,
                      rl_attention_ex(q, k, v, n, heads, hd, window, y, path, th));
            free(q), free(k), free(v), free(ref), free(y);
        }
    CHECK_MSG(!bad, "attention, a tile's rows of different sums: %ld runs differ from ref", bad);
}

/* rl_attention_rows: a few queries (any rows, repeated, in any order)
 * against every key have the bits of those rows of the whole global
 * attention, on every path and thread count; fewer keys than the window
 * or a window at all is refused, as are an out that overlaps. */
static void test_attention_rows(void) {
    long bad = 0;
    for (int rep = 0; rep < 16; rep++) {
        size_t n = (size_t)rnd_int(1, 120), heads = (size_t)rnd_int(1, 4);
        size_t hd = (size_t)rnd_int(1, 70), nq = (size_t)rnd_int(1, 9);
        if (rep < 2) /* enough work that the pool splits it */
            n = 300, heads = 4, hd = 64, nq = 7;
        size_t row = heads * hd;
        float *q = rnd_floats(n * row, 1.0f), *k = rnd_floats(n * row, 1.0f);
        float *v = rnd_floats(n * row, 1.0f);
        float *full = malloc(n * row * sizeof *full), *qs = malloc(nq * row * sizeof *qs);
        float *want = malloc(nq * row * sizeof *want), *y = malloc(nq * row * sizeof *y);
        CHECK(rl_attention_ex(q, k, v, n, heads, hd, 0, full, RL_PATH_REF, 1) == RL_OK);
        for (size_t r = 0; r < nq; r++) {
            size_t i = (size_t)rnd_int(0, (int)n - 1);
            memcpy(qs + r * row, q + i * row, row * sizeof *qs);
            memcpy(want + r * row, full + i * row, row * sizeof *want);
        }
        ALL_PATHS(want, y, nq * row, bad,
                  rl_attention_rows_ex(qs, nq, k, v, n, heads, hd, y, path, th));
        free(q), free(k), free(v), free(full), free(qs), free(want), free(y);
    }
    CHECK_MSG(!bad, "attention rows: %ld runs differ from the whole attention's rows", bad);
    float x[32] = {0}, y[32];
    CHECK(rl_attention_rows(x, 1, x, x, 0, 2, 8, y) == RL_BADARG);  /* no keys */
    CHECK(rl_attention_rows(x, 1, x, x, 2, 2, 8, x) == RL_BADARG);  /* out is q */
    CHECK(rl_attention_rows(x, 0, x, x, 2, 2, 8, y) == RL_OK);      /* no queries */
}

/* Scores that are NaN or infinite (a NaN or an infinity in a query or a
 * key; a +inf score makes its row's maximum +inf and every e NaN), with
 * and without a window, at lengths around the AVX-512 kernels' 16-key
 * blocks: every path and thread count has the reference's bits, the
 * maximum the scores kernel finds included. */
static void test_attention_non_finite(void) {
    long bad = 0;
    static const size_t ns[] = {1, 15, 16, 17, 33, 70};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        for (int kind = 0; kind < 4; kind++) {
            const size_t n = ns[c], heads = 2, hd = 16, row = heads * hd, window = kind % 2 ? 9 : 0;
            float *q = rnd_floats(n * row, 1.0f), *k = rnd_floats(n * row, 1.0f),
                  *v = rnd_floats(n * row, 1.0f);
            float *ref = malloc(n * row * sizeof *ref), *y = malloc(n * row * sizeof *y);
            const size_t at = (n / 2) * row + 3;
            if (kind < 2)
                k[at] = NAN;
            else
                q[at] = kind == 2 ? INFINITY : -INFINITY;
            CHECK(rl_attention_ex(q, k, v, n, heads, hd, window, ref, RL_PATH_REF, 1) == RL_OK);
            ALL_PATHS(ref, y, n * row, bad,
                      rl_attention_ex(q, k, v, n, heads, hd, window, y, path, th));
            free(q), free(k), free(v), free(ref), free(y);
        }
    CHECK_MSG(!bad, "attention, non-finite scores: %ld runs differ from ref", bad);
}

/* 1 when rl_attention_nf_ex fails or its flag is not expect, else 0. */
static int attention_nf_wrong(const float *q, const float *k, const float *v, size_t n,
                              size_t heads, size_t hd, size_t window, float *y, rl_path path,
                              int th, int expect) {
    int nf = -1;
    return rl_attention_nf_ex(q, k, v, n, heads, hd, window, y, &nf, path, th) != RL_OK ||
           nf != expect;
}

/* rl_attention_nf_ex and rl_attention_rows_nf_ex on every path and thread
 * count: the unchecked form's bits, and the flag set exactly when the
 * output holds a NaN or an infinity -- none planted, a NaN key (every
 * row NaN), an infinite value (the rows that weigh it, a window keeping
 * it from the others), and a -inf key whose score is -inf beside finite
 * ones (its weight 0: every output finite, but for a lone token) -- at
 * head sizes 16, 32 and 24 (the tiled kernel's column registers, whole
 * and masked) and token counts around its tiles and blocks. */
static void test_attention_checked_flags_non_finite(void) {
    long bad = 0, wrong = 0;
    static const size_t ns[] = {1, 7, 9, 16, 17, 33, 70};
    static const size_t hds[] = {16, 32, 24};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
            for (int kind = 0; kind < 8; kind++) {
                const size_t n = ns[c], heads = 2, hd = hds[hi], row = heads * hd;
                const size_t window = kind % 2 ? 5 : 0;
                float *q = rnd_floats(n * row, 1.0f), *k = rnd_floats(n * row, 1.0f),
                      *v = rnd_floats(n * row, 1.0f);
                float *ref = malloc(n * row * sizeof *ref), *y = malloc(n * row * sizeof *y);
                const size_t t = n - 1, col = row - 1;
                switch (kind / 2) {
                case 1: /* a NaN key */
                    k[t * row + col] = NAN;
                    break;
                case 2: /* an infinite value in the last row */
                    v[t * row + col] = INFINITY;
                    break;
                case 3: /* a -inf key in a column where every query is positive */
                    for (size_t i = 0; i < n; i++)
                        q[i * row + col] = 1.0f + (float)i / 64;
                    k[t * row + col] = -INFINITY;
                    break;
                default:
                    break;
                }
                CHECK(rl_attention_ex(q, k, v, n, heads, hd, window, ref, RL_PATH_REF, 1) == RL_OK);
                int expect = 0;
                for (size_t i = 0; i < n * row; i++)
                    expect |= !isfinite(ref[i]);
                /* a lone -inf key: the row's maximum is -inf, its e NaN */
                CHECK_EACH(expect == (kind / 2 == 1 || kind / 2 == 2 || (kind / 2 == 3 && n == 1)),
                           "attention nf: n %zu hd %zu kind %d: the reference's output %s",
                           n, hd, kind, expect ? "holds a non-finite value" : "is finite");
                ALL_PATHS(ref, y, n * row, bad,
                          wrong += attention_nf_wrong(q, k, v, n, heads, hd, window, y, path,
                                                      th, expect));
                int nf;
                /* the global rows: the first and the last query */
                if (!window) {
                    const size_t qi[2] = {0, n - 1};
                    float qs[2 * 64], yr[2 * 64];
                    for (int r = 0; r < 2; r++)
                        memcpy(qs + r * row, q + qi[r] * row, row * sizeof *qs);
                    int er = 0;
                    for (int r = 0; r < 2; r++)
                        for (size_t j = 0; j < row; j++)
                            er |= !isfinite(ref[qi[r] * row + j]);
                    for (int p_ = RL_PATH_REF; p_ <= RL_PATH_AVX512VNNI; p_++) {
                        if (!rl_path_supported((rl_path)p_))
                            continue;
                        nf = -1;
                        CHECK(rl_attention_rows_nf_ex(qs, 2, k, v, n, heads, hd, yr, &nf,
                                                      (rl_path)p_, 1) == RL_OK);
                        wrong += nf != er;
                    }
                }
                free(q), free(k), free(v), free(ref), free(y);
            }
    CHECK_MSG(!bad, "attention nf: %ld runs differ from the unchecked form", bad);
    CHECK_MSG(!wrong, "attention nf: %ld runs flagged wrongly", wrong);
}

/* The encoders' head sizes (16 and 32) and sizes around them (8: lanes
 * past the columns; 24 and 48: lanes whose chains differ in length), at
 * token counts around the AVX-512 kernels' tiles of eight queries (scored
 * four at a time), groups of eight exponentials and blocks of sixteen keys
 * (1 token included),
 * with and without a window; with queries of the usual size, forty times
 * it (scores more than 104 below their row's largest), and with a key of
 * -inf in a column where every query is positive (its score -inf, its
 * exponential 0 beside finite ones); and a few rows against every key
 * (one to nine queries: every size of a last tile).  Every path and
 * thread count has the reference's bits. */
static void test_attention_head_shapes(void) {
    static const size_t hds[] = {16, 32, 8, 24, 48};
    static const size_t ns[] = {1, 2, 3, 5, 8, 9, 15, 16, 17, 31, 33, 70, 71};
    long bad = 0, bad_rows = 0;
    for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
        for (size_t ni = 0; ni < 3 * sizeof ns / sizeof *ns; ni++) {
            const size_t hd = hds[hi], n = ns[ni / 3], heads = hd == 16 ? 4 : hd == 32 ? 8 : 2;
            const size_t row = heads * hd, nq = 1 + ni / 3 % 9;
            float *q = rnd_floats(n * row, ni % 3 == 1 ? 40.0f : 1.0f), *k = rnd_floats(n * row, 1.0f);
            if (ni % 3 == 2) { /* key n / 2, column 1 of every head */
                for (size_t i = 0; i < n * heads; i++)
                    q[i * hd + 1 % hd] = fabsf(q[i * hd + 1 % hd]) + 0.5f;
                for (size_t h = 0; h < heads; h++)
                    k[n / 2 * row + h * hd + 1 % hd] = -INFINITY;
            }
            float *v = rnd_floats(n * row, 1.0f);
            float *ref = malloc(n * row * sizeof *ref), *y = malloc(n * row * sizeof *y);
            for (size_t window = 0; window <= 9; window += 9) {
                CHECK(rl_attention_ex(q, k, v, n, heads, hd, window, ref, RL_PATH_REF, 1) == RL_OK);
                ALL_PATHS(ref, y, n * row, bad,
                          rl_attention_ex(q, k, v, n, heads, hd, window, y, path, th));
            }
            /* rows r * 7 mod n of the global attention */
            float *qs = malloc(nq * row * sizeof *qs), *want = malloc(nq * row * sizeof *want);
            CHECK(rl_attention_ex(q, k, v, n, heads, hd, 0, ref, RL_PATH_REF, 1) == RL_OK);
            for (size_t r = 0; r < nq; r++) {
                memcpy(qs + r * row, q + r * 7 % n * row, row * sizeof *qs);
                memcpy(want + r * row, ref + r * 7 % n * row, row * sizeof *want);
            }
            ALL_PATHS(want, y, nq * row, bad_rows,
                      rl_attention_rows_ex(qs, nq, k, v, n, heads, hd, y, path, th));
            free(q), free(k), free(v), free(ref), free(y), free(qs), free(want);
        }
    CHECK_MSG(!bad, "attention, the heads' shapes: %ld runs differ from ref", bad);
    CHECK_MSG(!bad_rows, "attention rows, the heads' shapes: %ld runs differ from the rows", bad_rows);
}

/* Window 1 and 0 tokens either side: each query sees only itself, so the
 * output is its own value row exactly (softmax of one score is 1). */
static void test_attention_self_window(void) {
    size_t n = 9, heads = 2, hd = 8, row = heads * hd;
    float *q = rnd_floats(n * row, 1), *k = rnd_floats(n * row, 1), *v = rnd_floats(n * row, 1);
    float *y = malloc(n * row * sizeof *y);
    CHECK(rl_attention(q, k, v, n, heads, hd, 1, y) == RL_OK);
    CHECK_SAME_ELEMENTS(y, v, n * row, "window 1: attention against its own value rows");
    free(q), free(k), free(v), free(y);
}

/* ---- GeGLU ---------------------------------------------------------- */

static void test_geglu(void) {
    long bad_path = 0;
    double max_tanh_gap = 0;
    for (int rep = 0; rep < 30; rep++) {
        size_t n = (size_t)rnd_int(1, 100), f = (size_t)rnd_int(1, 300);
        rl_gelu kind = rep % 2 ? RL_GELU_TANH : RL_GELU_ERF;
        float *x = rnd_floats(n * 2 * f, 3.0f);
        float *ref = malloc(n * f * sizeof *ref), *y = malloc(n * f * sizeof *y);
        CHECK(rl_geglu_ex(x, n, f, kind, ref, RL_PATH_REF, 1) == RL_OK);
        ALL_PATHS(ref, y, n * f, bad_path, rl_geglu_ex(x, n, f, kind, y, path, th));
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < f; c++) {
                double a = x[t * 2 * f + c], g = x[t * 2 * f + f + c];
                double ge = 0.5 * a * (1 + erf(a / sqrt(2.0)));
                double gt = 0.5 * a * (1 + tanh(sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
                double e = (kind == RL_GELU_TANH ? gt : ge) * g;
                CHECK_EACH(fabs(ref[t * f + c] - e) <= 1e-6 * (1 + fabs(e)),
                           "geglu %d row %zu [%zu]: %a, double %a", (int)kind, t, c,
                           (double)ref[t * f + c], e);
                if (fabs(ge - gt) > max_tanh_gap)
                    max_tanh_gap = fabs(ge - gt);
            }
        free(x), free(ref), free(y);
    }
    CHECK_MSG(!bad_path, "geglu: %ld runs differ from ref", bad_path);
    /* the two GELUs are different functions, close together */
    CHECK(max_tanh_gap > 1e-5 && max_tanh_gap < 1e-2);
    CHECK(rl_gelu_f32(0.0f, RL_GELU_ERF) == 0.0f && rl_gelu_f32(0.0f, RL_GELU_TANH) == 0.0f);
}

/* ---- the checked forms ---------------------------------------------- */

/* rl_layer_norm_bias_nf, rl_bias_act_nf and rl_geglu_nf on the scalar
 * and the best path: the unchecked forms' bits, and the flag set exactly
 * when the output holds a NaN or an infinity (one planted in the input
 * at a random row and column, in the last row to reach the tail of a
 * path's rows, or none). */
static void test_checked_steps_flag_non_finite(void) {
    static const float planted[] = {NAN, INFINITY, -INFINITY};
    long wrong = 0;
    for (int simd = 0; simd <= 1; simd++) {
        rl_set_simd(simd);
        for (int rep = 0; rep < 60; rep++) {
            const size_t n = (size_t)rnd_int(1, 40), d = (size_t)rnd_int(1, 200);
            const int plant = rep % 4; /* 0: none */
            const size_t t = rep % 3 ? (size_t)rnd_int(0, (int)n - 1) : n - 1;
            const size_t c = (size_t)rnd_int(0, (int)d - 1);
            float *x = rnd_floats(n * 2 * d, 2.0f), *w = rnd_floats(d, 1.0f);
            float *b = rnd_floats(d, 1.0f);
            float *ref = malloc(n * d * sizeof *ref), *y = malloc(n * d * sizeof *y);
            if (plant)
                x[t * d + c] = planted[plant - 1];
            int nf = -1;
            /* LayerNorm: a non-finite value makes its row NaN */
            CHECK(rl_layer_norm_bias_ex(x, n, d, w, rep % 2 ? b : NULL, 1e-5f, ref,
                                        rl_path_best(), 1) == RL_OK);
            CHECK(rl_layer_norm_bias_nf(x, n, d, w, rep % 2 ? b : NULL, 1e-5f, y, &nf) == RL_OK);
            wrong += check_floats_differ(y, ref, n * d, "layer-norm nf, simd %d", simd);
            CHECK_EACH(nf == (plant != 0), "layer-norm nf, simd %d, %zu x %zu, plant %d at "
                       "(%zu %zu): flag %d", simd, n, d, plant, t, c, nf);
            /* bias and activation */
            const rl_nn_act act = (rl_nn_act)(rep % 3);
            CHECK(rl_bias_act_ex(x, n, d, b, act, ref, rl_path_best(), 1) == RL_OK);
            nf = -1;
            CHECK(rl_bias_act_nf(x, n, d, b, act, y, &nf) == RL_OK);
            wrong += check_floats_differ(y, ref, n * d, "bias-act nf, simd %d", simd);
            int expect = 0;
            for (size_t i = 0; i < n * d; i++)
                expect |= !isfinite(ref[i]);
            CHECK_EACH(nf == expect && expect == (plant != 0 && !(act == RL_NN_RELU &&
                                                                  plant == 3)),
                       "bias-act nf, simd %d, act %d, plant %d: flag %d, expected %d", simd,
                       (int)act, plant, nf, expect);
            /* GeGLU over n x 2f with f = d: the planted value is an input
             * of output (t, c mod f) */
            const rl_gelu kind = rep % 2 ? RL_GELU_TANH : RL_GELU_ERF;
            if (d >= 2) {
                const size_t f = d / 2;
                CHECK(rl_geglu_ex(x, n, f, kind, ref, rl_path_best(), 1) == RL_OK);
                nf = -1;
                CHECK(rl_geglu_nf(x, n, f, kind, y, &nf) == RL_OK);
                wrong += check_floats_differ(y, ref, n * f, "geglu nf, simd %d", simd);
                expect = 0;
                for (size_t i = 0; i < n * f; i++)
                    expect |= !isfinite(ref[i]);
                CHECK_EACH(nf == expect, "geglu nf, simd %d, kind %d, plant %d: flag %d, "
                           "expected %d", simd, (int)kind, plant, nf, expect);
            }
            free(x), free(w), free(b), free(ref), free(y);
        }
    }
    rl_set_simd(1);
    CHECK_MSG(!wrong, "checked forms: %ld runs differ from the unchecked", wrong);
    /* finite inputs whose LayerNorm is not: the variance overflows */
    float big[4] = {3e38f, -3e38f, 3e38f, -3e38f}, w1[4] = {1, 1, 1, 1}, out[4];
    int nf = 0;
    CHECK(rl_layer_norm_bias_nf(big, 1, 4, w1, NULL, 1e-5f, out, &nf) == RL_OK);
    CHECK_MSG(nf == 1, "layer-norm nf of a row past f32 range: flag %d", nf);
}

/* rl_add_nf_ex on every path: the f32 sums, in place into either operand
 * too, and the flag set exactly when a sum is not finite (a planted NaN
 * or infinity, or two finite values whose sum overflows), at any place
 * including a path's tail. */
static void test_add_flag_non_finite(void) {
    long wrong = 0;
    for (int p = RL_PATH_REF; p <= RL_PATH_AVX512VNNI; p++) {
        if (!rl_path_supported((rl_path)p))
            continue;
        for (int rep = 0; rep < 200; rep++) {
            const size_t n = (size_t)rnd_int(0, 100);
            float *a = rnd_floats(n, 1.0f), *b = rnd_floats(n, 1.0f);
            float *y = malloc((n ? n : 1) * sizeof *y), *c = malloc((n ? n : 1) * sizeof *c);
            const int plant = n ? rep % 4 : 0; /* 0 none, NaN, infinity, overflow */
            if (plant) {
                const size_t at = rep % 3 ? (size_t)rnd_int(0, (int)n - 1) : n - 1;
                a[at] = plant == 1 ? NAN : plant == 2 ? -INFINITY : 3e38f;
                if (plant == 3)
                    b[at] = 3e38f;
            }
            int nf = -1;
            CHECK(rl_add_nf_ex(a, b, n, y, &nf, (rl_path)p) == RL_OK);
            for (size_t i = 0; i < n; i++)
                c[i] = a[i] + b[i];
            wrong += check_floats_differ(y, c, n, "add, path %d, %zu values", p, n);
            CHECK_EACH(nf == (plant != 0), "add, path %d, %zu values, plant %d: flag %d", p, n,
                       plant, nf);
            CHECK(rl_add_nf_ex(a, b, n, b, &nf, (rl_path)p) == RL_OK); /* into b */
            wrong += check_floats_differ(b, c, n, "add into b, path %d", p);
            free(a), free(b), free(y), free(c);
        }
    }
    CHECK_MSG(!wrong, "add: %ld runs differ from the f32 sums", wrong);
    float x[8] = {0};
    CHECK(rl_add_nf(x, x + 4, 4, x + 2, NULL) == RL_BADARG); /* out over a, not a */
    CHECK(rl_add_nf(x, x, 4, x, NULL) == RL_OK);
}

/* ---- errors --------------------------------------------------------- */

static void test_errors(void) {
    float x[64] = {0}, w[8] = {0}, y[64];
    CHECK(rl_layer_norm(x, 2, 0, w, 1e-5f, y) == RL_BADARG);
    CHECK(rl_layer_norm(NULL, 2, 8, w, 1e-5f, y) == RL_BADARG);
    CHECK(rl_layer_norm(x, 2, 8, w, 1e-5f, x + 3) == RL_BADARG); /* partial overlap */
    CHECK(rl_layer_norm(x, 0, 8, w, 1e-5f, y) == RL_OK);
    CHECK(rl_rope_neox(x, 2, 2, 7, 1e4f, y) == RL_BADARG); /* odd head_dim */
    CHECK(rl_rope_neox(x, 2, 0, 8, 1e4f, y) == RL_BADARG);
    CHECK(rl_attention(x, x, x, 2, 2, 8, 0, x) == RL_BADARG); /* out is q */
    CHECK(rl_attention(x, x, x, 2, 2, 8, 0, NULL) == RL_BADARG);
    CHECK(rl_attention(x, x, x, 2, 2, 8, 0, y) == RL_OK);
    CHECK(rl_geglu(x, 2, 8, (rl_gelu)7, y) == RL_BADARG);
    CHECK(rl_geglu(x, 2, 8, RL_GELU_ERF, x + 16) == RL_BADARG);
    CHECK(rl_geglu_ex(x, 2, 8, RL_GELU_ERF, y, RL_PATH_REF, 0) == RL_BADARG);
    if (!rl_path_supported(RL_PATH_AVX512VNNI))
        CHECK(rl_geglu_ex(x, 2, 8, RL_GELU_ERF, y, RL_PATH_AVX512VNNI, 1) ==
              RL_UNSUPPORTED);
}

/* ---- LayerNorm with bias, bias plus activation (the decision head) -- */

/* Every path and thread count answers the scalar reference's bits; the
 * bias is added to rl_layer_norm's f32 result (one rounding), and a NULL
 * bias is rl_layer_norm bit for bit. */
static void test_layer_norm_bias(void) {
    long bad_path = 0;
    for (int rep = 0; rep < 30; rep++) {
        size_t n = (size_t)rnd_int(1, 200), d = (size_t)rnd_int(1, 300);
        float *x = rnd_floats(n * d, ldexpf(1.0f, rnd_int(-4, 6)));
        float *w = rnd_floats(d, 1.0f), *b = rnd_floats(d, 1.0f);
        float *ref = malloc(n * d * sizeof *ref), *y = malloc(n * d * sizeof *y);
        CHECK(rl_layer_norm_bias_ex(x, n, d, w, b, 1e-5f, ref, RL_PATH_REF, 1) == RL_OK);
        ALL_PATHS(ref, y, n * d, bad_path,
                  rl_layer_norm_bias_ex(x, n, d, w, b, 1e-5f, y, path, th));
        CHECK(rl_layer_norm_ex(x, n, d, w, 1e-5f, y, RL_PATH_REF, 1) == RL_OK);
        for (size_t i = 0; i < n * d; i++) {
            const float e = y[i] + b[i % d];
            CHECK_EACH(memcmp(&e, &ref[i], sizeof e) == 0,
                       "layer-norm-bias [%zu]: %a, layer-norm + bias %a", i, (double)ref[i],
                       (double)e);
        }
        ALL_PATHS(y, ref, n * d, bad_path, /* no bias: rl_layer_norm's bits */
                  rl_layer_norm_bias_ex(x, n, d, w, NULL, 1e-5f, ref, path, th));
        memcpy(y, x, n * d * sizeof *y); /* in place */
        CHECK(rl_layer_norm_bias_ex(y, n, d, w, b, 1e-5f, y, rl_path_best(), 3) == RL_OK);
        CHECK(rl_layer_norm_bias_ex(x, n, d, w, b, 1e-5f, ref, RL_PATH_REF, 1) == RL_OK);
        bad_path += check_floats_differ(y, ref, n * d, "layer-norm-bias in place, best path");
        free(x), free(w), free(b), free(ref), free(y);
    }
    CHECK_MSG(!bad_path, "layer-norm-bias: %ld runs differ from ref", bad_path);
}

static void test_bias_act(void) {
    long bad_path = 0;
    for (int rep = 0; rep < 30; rep++) {
        size_t n = (size_t)rnd_int(1, 200), d = (size_t)rnd_int(1, 300);
        rl_nn_act act = (rl_nn_act)(rep % 3);
        float *x = rnd_floats(n * d, 3.0f), *b = rep % 4 == 3 ? NULL : rnd_floats(d, 1.0f);
        float *ref = malloc(n * d * sizeof *ref), *y = malloc(n * d * sizeof *y);
        if (n * d > 2)
            x[1] = NAN, x[2] = -0.0f;
        CHECK(rl_bias_act_ex(x, n, d, b, act, ref, RL_PATH_REF, 1) == RL_OK);
        ALL_PATHS(ref, y, n * d, bad_path, rl_bias_act_ex(x, n, d, b, act, y, path, th));
        for (size_t i = 0; i < n * d; i++) {
            const float v = b ? x[i] + b[i % d] : x[i];
            double e = act == RL_NN_NONE ? v
                       : act == RL_NN_RELU ? (v < 0 ? 0.0 : v)
                                            : 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
            /* a NaN is never hidden */
            CHECK_EACH(isnan(v) ? isnan(ref[i]) : fabs(ref[i] - e) <= 2e-6 * fabs(e) + 1e-7,
                       "bias-act %d [%zu] of %a: %a, double %a", (int)act, i, (double)v,
                       (double)ref[i], e);
        }
        memcpy(y, x, n * d * sizeof *y); /* in place */
        CHECK(rl_bias_act_ex(y, n, d, b, act, y, rl_path_best(), 2) == RL_OK);
        bad_path += check_floats_differ(y, ref, n * d, "bias-act in place, best path");
        free(x), free(b), free(ref), free(y);
    }
    CHECK_MSG(!bad_path, "bias-act: %ld runs differ from ref", bad_path);
    float z[4] = {0};
    CHECK(rl_bias_act_ex(z, 1, 4, NULL, (rl_nn_act)7, z, RL_PATH_REF, 1) == RL_BADARG);
    CHECK(rl_bias_act_ex(z, 1, 0, NULL, RL_NN_NONE, z, RL_PATH_REF, 1) == RL_BADARG);
    CHECK(rl_bias_act_ex(z, 1, 4, z, RL_NN_NONE, z, RL_PATH_REF, 1) == RL_BADARG);
    CHECK(rl_layer_norm_bias_ex(z, 1, 4, z + 0, z, 1e-5f, z, RL_PATH_REF, 1) == RL_BADARG);
}

int main(void) {
    CHECK_CASE(test_layer_norm());
    CHECK_CASE(test_layer_norm_kept_widths());
    CHECK_CASE(test_layer_norm_overflow());
    CHECK_CASE(test_layer_norm_bias());
    CHECK_CASE(test_bias_act());
    CHECK_CASE(test_first_non_finite());
    CHECK_CASE(test_rope());
    CHECK_CASE(test_attention());
    CHECK_CASE(test_attention_self_window());
    CHECK_CASE(test_attention_non_finite());
    CHECK_CASE(test_attention_checked_flags_non_finite());
    CHECK_CASE(test_attention_rows());
    CHECK_CASE(test_attention_tile_own_sums());
    CHECK_CASE(test_attention_head_shapes());
    CHECK_CASE(test_rope_pair());
    CHECK_CASE(test_rope_pair_strided());
    CHECK_CASE(test_rope_angle_tables());
    CHECK_CASE(test_geglu());
    CHECK_CASE(test_checked_steps_flag_non_finite());
    CHECK_CASE(test_add_flag_non_finite());
    CHECK_CASE(test_errors());
    return check_report("nn");
}
