/* test_matvec.c - the Q8_0 matrix-vector product (doc/products.md §1) and the f32
 * baseline: every path and thread count against the scalar reference, bit
 * for bit; the reference against independent formulations; error cases.
 * The pool and the CPU knobs are tested in test_pool.c and test_cpu.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/matmul.h"
#include "prims/matvec.h"
#include "prims/pool.h"
#include "prims/q8.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"


static int same(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* Random weights: any quant byte (-128 too), scales tiny to huge, f16
 * subnormals, zero blocks. */
static void gen_weights(rl_block_q8_0 *w, size_t nblocks) {
    for (size_t i = 0; i < nblocks; i++) {
        int kind = rnd_int(0, 9);
        float d;
        switch (kind) {
        case 0: d = 0.0f; break;
        case 1: d = rl_gguf_f16_to_f32((uint16_t)rnd_int(1, 0x3ff)); break; /* subnormal */
        case 2: d = 65504.0f; break;
        case 3: d = ldexpf((float)rnd_unit(), rnd_int(-14, 15)); break;
        default: d = ldexpf(1.0f + (float)rnd_unit(), rnd_int(-12, -4)); break;
        }
        w[i].d = rl_gguf_f32_to_f16((rnd() & 1) ? d : -d);
        int zero = rnd_int(0, 15) == 0;
        for (int j = 0; j < 32; j++)
            w[i].qs[j] = zero ? 0 : (rnd_int(0, 20) == 0 ? -128 : (int8_t)rnd());
    }
}

static void gen_x(float *x, size_t n) {
    for (size_t b = 0; b < n / 32; b++) {
        int kind = rnd_int(0, 7);
        float scale = ldexpf(1.0f, rnd_int(-30, 20));
        for (int j = 0; j < 32; j++) {
            float *v = &x[32 * b + j];
            switch (kind) {
            case 0: *v = 0.0f; break;
            case 1: *v = rnd_gauss() * 1e-38f; break; /* subnormal d */
            case 2: *v = (float)(rnd_unit() * 2 - 1) * 8.3e6f; break;
            default: *v = rnd_gauss() * scale; break;
            }
        }
    }
}

/* ---- the Q8_0 product: all paths and thread counts agree ------------- */

static void test_q8_paths(void) {
    static const size_t rows_set[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 31, 64, 67, 130};
    static const size_t cols_set[] = {32, 64, 96, 224, 1024, 4096};
    long combos = 0, bad_paths = 0, bad_f64 = 0, skipped512 = 0;
    for (size_t ri = 0; ri < sizeof rows_set / sizeof *rows_set; ri++) {
        for (size_t ci = 0; ci < sizeof cols_set / sizeof *cols_set; ci++) {
            size_t rows = rows_set[ri], cols = cols_set[ci], nb = cols / 32;
            rl_block_q8_0 *w = malloc(rows * nb * sizeof *w);
            float *x = malloc(cols * sizeof *x);
            double *xd = malloc(cols * sizeof *xd);
            double *yref = malloc(rows * sizeof *yref), *y = malloc(rows * sizeof *y);
            float *yfr = malloc(rows * sizeof *yfr), *yf = malloc(rows * sizeof *yf);
            gen_weights(w, rows * nb);
            gen_x(x, cols);
            for (size_t j = 0; j < cols; j++)
                xd[j] = (double)x[j] + ldexp((double)x[j], -40); /* rounds back to x */
            char msg[200];
            rl_status st = rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, yref, yfr,
                                           RL_PATH_REF, 1, 0, msg, sizeof msg);
            if (st != RL_OK) {
                CHECK_MSG(0, "ref failed: %s", msg);
                continue;
            }
            for (int path = RL_PATH_REF; path <= RL_PATH_AVX512VNNI; path++) {
                if (!rl_path_supported((rl_path)path)) {
                    skipped512 += path >= RL_PATH_AVX512;
                    continue;
                }
                for (int th = 1; th <= 4; th++) {
                    memset(y, 0xff, rows * sizeof *y);
                    memset(yf, 0xff, rows * sizeof *yf);
                    st = rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, y, yf, (rl_path)path,
                                         th, 0, msg, sizeof msg);
                    if (st != RL_OK || !same(y, yref, rows * sizeof *y) ||
                        !same(yf, yfr, rows * sizeof *yf)) {
                        if (bad_paths < 5)
                            fprintf(stderr, "  %zux%zu %s threads %d differs\n", rows, cols,
                                    rl_path_name((rl_path)path), th);
                        bad_paths++;
                    }
                }
                /* double x: cast to f32 first, so the same answer */
                memset(y, 0xff, rows * sizeof *y);
                st = rl_matvec_q8_ex(w, rows, cols, RL_SRC_F64, xd, y, NULL, (rl_path)path, 3,
                                     0, msg, sizeof msg);
                bad_f64 += st != RL_OK || !same(y, yref, rows * sizeof *y);
            }
            /* the f32 result is the double rounded once */
            for (size_t r = 0; r < rows; r++)
                CHECK_EACH(rl_gguf_f32_bits(yfr[r]) == rl_gguf_f32_bits((float)yref[r]),
                           "q8 matvec %zux%zu row %zu: f32 %a, not the rounded double %a", rows,
                           cols, r, (double)yfr[r], yref[r]);
            combos++;
            free(w);
            free(x);
            free(xd);
            free(yref);
            free(y);
            free(yfr);
            free(yf);
        }
    }
    CHECK_MSG(!bad_paths, "q8 matvec: %ld path/thread runs differ from ref (%ld shapes)",
              bad_paths, combos);
    CHECK_MSG(!bad_f64, "q8 matvec with double x: %ld runs differ", bad_f64);
    if (skipped512)
        CHECK_SKIP("AVX-512 kernels not run: this CPU lacks AVX-512 (BW/VL%s)",
                   rl_cpu_has_avx512() ? "" : ", VNNI");
}

/* The knob-driven entry points: SIMD on/off and 1..4 threads agree. */
static void test_q8_knobs(void) {
    size_t rows = 301, cols = 2048, nb = cols / 32;
    rl_block_q8_0 *w = malloc(rows * nb * sizeof *w);
    float *x = malloc(cols * sizeof *x), *y0 = malloc(rows * 4), *y = malloc(rows * 4);
    double *xd = malloc(cols * 8), *yd0 = malloc(rows * 8), *yd = malloc(rows * 8);
    gen_weights(w, rows * nb);
    gen_x(x, cols);
    for (size_t j = 0; j < cols; j++)
        xd[j] = x[j];
    char msg[200];
    rl_set_simd(0);
    rl_set_threads(1);
    CHECK(rl_matvec_q8(w, rows, cols, x, y0, msg, sizeof msg) == RL_OK);
    CHECK(rl_matvec_q8_f64(w, rows, cols, xd, yd0, msg, sizeof msg) == RL_OK);
    int bad = 0;
    for (int simd = 0; simd <= 1; simd++) {
        rl_set_simd(simd);
        for (int th = 0; th <= 4; th++) { /* 0 = the cores */
            rl_set_threads(th);
            bad += rl_matvec_q8(w, rows, cols, x, y, msg, sizeof msg) != RL_OK ||
                   !same(y, y0, rows * 4);
            bad += rl_matvec_q8_f64(w, rows, cols, xd, yd, msg, sizeof msg) != RL_OK ||
                   !same(yd, yd0, rows * 8);
        }
    }
    rl_set_simd(1);
    rl_set_threads(0);
    CHECK_MSG(!bad, "knob entry points: %d runs differ", bad);
    free(w);
    free(x);
    free(y0);
    free(y);
    free(xd);
    free(yd0);
    free(yd);
}

/* ---- the reference against independent formulations ---------------- */

/* Written differently on purpose: int64 lane sums, the scale as an f32
 * product (dw*dx has at most 22 significant bits, so f32 holds it exactly),
 * and x quantized by the tested reference quantizer. */
static double naive_row(const rl_block_q8_0 *wr, const rl_block_q8_0 *xq, size_t nb) {
    double acc[4] = {0, 0, 0, 0};
    for (size_t b = 0; b < nb; b++) {
        float scale = rl_gguf_f16_to_f32(wr[b].d) * rl_gguf_f16_to_f32(xq[b].d);
        for (int l = 0; l < 4; l++) {
            int64_t s = 0;
            for (int j = 0; j < 8; j++)
                s += (int64_t)wr[b].qs[8 * l + j] * xq[b].qs[8 * l + j];
            acc[l] = acc[l] + (double)s * (double)scale;
        }
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static void test_q8_naive(void) {
    for (int t = 0; t < 300; t++) {
        size_t rows = (size_t)rnd_int(1, 9), nb = (size_t)rnd_int(1, 12), cols = nb * 32;
        rl_block_q8_0 w[9 * 12], xq[12];
        float x[12 * 32];
        double y[9];
        gen_weights(w, rows * nb);
        gen_x(x, cols);
        if (rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, y, NULL, rl_path_best(), 2, 0, NULL,
                            0) != RL_OK ||
            rl_q8_quantize_f32_ref(x, cols, xq, NULL) != RL_OK) {
            CHECK_MSG(0, "q8 matvec case %d (%zux%zu): refused", t, rows, cols);
            continue;
        }
        for (size_t r = 0; r < rows; r++) {
            double want = naive_row(w + r * nb, xq, nb);
            CHECK_EACH(rl_gguf_f32_bits((float)y[r]) == rl_gguf_f32_bits((float)want) &&
                           y[r] == want,
                       "q8 matvec case %d (%zux%zu) row %zu: %a, independent formulation %a", t,
                       rows, cols, r, y[r], want);
        }
    }

    /* Power-of-two scales and few blocks: every double step is exact, so y
     * equals the exact dot product of the dequantized values. */
    for (int t = 0; t < 200; t++) {
        size_t rows = (size_t)rnd_int(1, 6), nb = (size_t)rnd_int(1, 6), cols = nb * 32;
        rl_block_q8_0 w[36];
        float x[6 * 32], deqw[6 * 32], deqx[6 * 32];
        rl_block_q8_0 xq[6];
        for (size_t i = 0; i < rows * nb; i++) {
            w[i].d = rl_gguf_f32_to_f16(ldexpf(1.0f, rnd_int(-8, 8)));
            for (int j = 0; j < 32; j++)
                w[i].qs[j] = (int8_t)rnd();
        }
        for (size_t b = 0; b < nb; b++) { /* amax = 127 * 2^e: d = 2^e exactly */
            int e = rnd_int(-8, 8);
            for (int j = 0; j < 32; j++)
                x[32 * b + j] = ldexpf((float)rnd_int(-127, 127), e);
            x[32 * b + (size_t)rnd_int(0, 31)] = ldexpf(127.0f, e);
        }
        double y[6];
        rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, y, NULL, rl_path_best(), 1, 0, NULL, 0);
        rl_q8_quantize_f32_ref(x, cols, xq, NULL);
        rl_q8_dequantize_ref(xq, nb, deqx);
        for (size_t j = 0; j < cols; j++)
            CHECK_EACH(deqx[j] == x[j], "exact case %d: x[%zu] %a dequantized to %a", t, j,
                       (double)x[j], (double)deqx[j]); /* x was representable */
        for (size_t r = 0; r < rows; r++) {
            rl_q8_dequantize_ref(w + r * nb, nb, deqw);
            long double s = 0;
            for (size_t j = 0; j < cols; j++)
                s += (long double)deqw[j] * deqx[j];
            CHECK_EACH((long double)y[r] == s, "exact case %d (%zux%zu) row %zu: %a, exact %La", t,
                       rows, cols, r, y[r], s);
        }
    }

    /* Against the unquantized product: a quantization error away. */
    for (int t = 0; t < 50; t++) {
        size_t rows = 8, cols = 1024, nb = cols / 32;
        float *m = malloc(rows * cols * 4), *x = malloc(cols * 4);
        rl_block_q8_0 *w = malloc(rows * nb * sizeof *w);
        for (size_t i = 0; i < rows * cols; i++)
            m[i] = rnd_gauss();
        for (size_t j = 0; j < cols; j++)
            x[j] = rnd_gauss();
        rl_q8_quantize_f32(m, rows * cols, w, NULL);
        double y[8];
        rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, y, NULL, rl_path_best(), 1, 0, NULL, 0);
        for (size_t r = 0; r < rows; r++) {
            double exact = 0, norm = 0;
            for (size_t j = 0; j < cols; j++) {
                exact += (double)m[r * cols + j] * x[j];
                norm += fabs((double)m[r * cols + j] * x[j]);
            }
            /* errors of ~d/sqrt(12) per factor add up like a random walk:
             * about 0.02 * norm / sqrt(cols) for gaussian data; 5 sigma */
            CHECK_EACH(fabs(y[r] - exact) <= 0.1 * norm / sqrt((double)cols),
                       "gaussian case %d row %zu: %g, unquantized %g (norm %g)", t, r, y[r],
                       exact, norm);
        }
        free(m);
        free(x);
        free(w);
    }
}

/* ---- f32 baseline ------------------------------------------------------ */

static void test_f32(void) {
    static const size_t rows_set[] = {1, 3, 4, 5, 9, 33, 100};
    static const size_t cols_set[] = {1, 7, 15, 16, 17, 31, 33, 100, 1000, 4096};
    long bad = 0;
    for (size_t ri = 0; ri < sizeof rows_set / sizeof *rows_set; ri++) {
        for (size_t ci = 0; ci < sizeof cols_set / sizeof *cols_set; ci++) {
            size_t rows = rows_set[ri], cols = cols_set[ci];
            float *m = malloc(rows * cols * 4), *x = malloc(cols * 4);
            float *yr = malloc(rows * 4), *y = malloc(rows * 4);
            double *xd = malloc(cols * 8), *yd = malloc(rows * 8);
            for (size_t i = 0; i < rows * cols; i++)
                m[i] = rnd_gauss() * ldexpf(1.0f, rnd_int(-20, 20));
            for (size_t j = 0; j < cols; j++) {
                x[j] = (rnd() & 7) ? rnd_gauss() : ((rnd() & 1) ? -0.0f : 1e-30f);
                xd[j] = x[j];
            }
            if (rows > 2 && cols > 2) /* a row of exact cancellations and -0 */
                for (size_t j = 0; j < cols; j++)
                    m[2 * cols + j] = (j % 2) ? -0.0f : -1e-30f;
            rl_matvec_f32_ex(m, rows, cols, RL_SRC_F32, x, NULL, yr, RL_PATH_REF, 1, 0);
            for (int path = RL_PATH_REF; path <= RL_PATH_AVX2; path++) {
                if (!rl_path_supported((rl_path)path))
                    continue;
                for (int th = 1; th <= 3; th++) {
                    memset(y, 0xff, rows * 4);
                    rl_matvec_f32_ex(m, rows, cols, RL_SRC_F32, x, NULL, y, (rl_path)path, th, 0);
                    bad += check_floats_differ(y, yr, rows, "f32 baseline %zux%zu, %s, %d threads",
                                               rows, cols, rl_path_name((rl_path)path), th);
                }
                rl_matvec_f32_ex(m, rows, cols, RL_SRC_F64, xd, yd, NULL, (rl_path)path, 2, 0);
                for (size_t r = 0; r < rows; r++)
                    CHECK_EACH(yd[r] == (double)yr[r],
                               "f32 baseline %zux%zu, %s, double x: row %zu %a, ref %a", rows,
                               cols, rl_path_name((rl_path)path), r, yd[r], (double)yr[r]);
            }
            /* independent: 16 fmaf chains, then the documented tree */
            for (size_t r = 0; r < rows; r++) {
                float p[16] = {0};
                for (size_t j = 0; j < cols; j++)
                    p[j % 16] = fmaf(m[r * cols + j], x[j], p[j % 16]);
                float a[8];
                for (int k = 0; k < 8; k++)
                    a[k] = p[k] + p[k + 8];
                float want = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
                CHECK_EACH(rl_gguf_f32_bits(want) == rl_gguf_f32_bits(yr[r]),
                           "f32 baseline %zux%zu row %zu: %a, the written-out order %a", rows,
                           cols, r, (double)yr[r], (double)want);
            }
            free(m);
            free(x);
            free(yr);
            free(y);
            free(xd);
            free(yd);
        }
    }
    CHECK_MSG(!bad, "f32 baseline: %ld path/thread runs differ from ref", bad);
    /* Partial sums that are -0 (a negative product too small for f32
     * rounds to -0): lanes past the last column must keep them, not turn
     * them into +0, or the sign of an all-zero result flips. */
    if (rl_cpu_has_avx2()) {
        int bad_zero = 0;
        for (size_t cols = 1; cols <= 40; cols++) {
            float mz[5 * 40], xz[40], y0[5], y1[5];
            for (size_t i = 0; i < 5 * cols; i++)
                mz[i] = -0x1p-149f;
            for (size_t j = 0; j < cols; j++)
                xz[j] = 0.25f;
            rl_matvec_f32_ex(mz, 5, cols, RL_SRC_F32, xz, NULL, y0, RL_PATH_REF, 1, 0);
            rl_matvec_f32_ex(mz, 5, cols, RL_SRC_F32, xz, NULL, y1, RL_PATH_AVX2, 1, 0);
            bad_zero += !same(y0, y1, sizeof y0) || (cols >= 16 && !signbit(y0[0]));
        }
        CHECK_MSG(!bad_zero, "f32 baseline: -0 partial sums differ in %d shapes", bad_zero);
    }
    float m[64], x[16], y[4];
    for (int i = 0; i < 64; i++)
        m[i] = 1.0f;
    for (int i = 0; i < 16; i++)
        x[i] = 0.5f;
    CHECK(rl_matvec_f32(m, 4, 16, x, y) == RL_OK && y[0] == 8.0f && y[3] == 8.0f);
    CHECK(rl_matvec_f32(NULL, 4, 16, x, y) == RL_BADARG);
}

/* ---- errors ------------------------------------------------------------ */

static void test_errors(void) {
    size_t rows = 5, cols = 256, nb = cols / 32;
    rl_block_q8_0 w[5 * 8];
    float x[256], y[5];
    double xd[256], yd[5];
    char msg[256];
    gen_weights(w, rows * nb);
    for (size_t j = 0; j < cols; j++)
        xd[j] = x[j] = rnd_gauss();
    int bad = 0;
    for (int path = RL_PATH_REF; path <= RL_PATH_AVX2; path++) {
        if (!rl_path_supported((rl_path)path))
            continue;
        rl_path p = (rl_path)path;
        x[100] = NAN;
        bad += rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, p, 2, 0, msg, sizeof msg) !=
                   RL_NONFINITE || !strstr(msg, "index 100");
        x[100] = -INFINITY;
        bad += rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, p, 1, 0, msg, sizeof msg) !=
               RL_NONFINITE;
        x[100] = 1.0f;
        x[70] = 9e6f; /* block 2 overflows */
        bad += rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, p, 1, 0, msg, sizeof msg) !=
                   RL_OVERFLOW || !strstr(msg, "block 2");
        x[70] = 1.0f;
        xd[5] = 1e300; /* a finite double that is inf as f32 */
        bad += rl_matvec_q8_ex(w, rows, cols, RL_SRC_F64, xd, yd, NULL, p, 1, 0, msg, sizeof msg) !=
                   RL_NONFINITE || !strstr(msg, "index 5");
        xd[5] = 0.25;
    }
    CHECK_MSG(!bad, "matvec x errors: %d wrong", bad);
    CHECK(rl_matvec_q8(w, rows, 250, x, y, msg, sizeof msg) == RL_BADLEN &&
          strstr(msg, "multiple of 32"));
    CHECK(rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, RL_PATH_AVX2, 0, 0, msg,
                          sizeof msg) == RL_BADARG);
    CHECK(rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, NULL, RL_PATH_REF, 1, 0, msg,
                          sizeof msg) == RL_BADARG);
    CHECK(rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, RL_PATH_AVX512VNNI, 1, 0, msg,
                          sizeof msg) ==
          (rl_cpu_has_avx512vnni() ? RL_OK : RL_UNSUPPORTED));
    CHECK(rl_matvec_q8(w, 0, cols, x, y, msg, sizeof msg) == RL_OK);
    CHECK(rl_matvec_q8_ex(w, (size_t)-1 / 8, cols, RL_SRC_F32, x, NULL, y, RL_PATH_REF, 1, 0,
                          msg, sizeof msg) == RL_BADARG); /* byte count overflows */
}

int main(void) {
    CHECK_CASE(test_q8_paths());
    CHECK_CASE(test_q8_knobs());
    CHECK_CASE(test_q8_naive());
    CHECK_CASE(test_f32());
    CHECK_CASE(test_errors());
    rl_pool_shutdown();
    return check_report("matvec");
}
