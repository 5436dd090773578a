/* test_bench_rows.c - the products `rontolisp bench FILE' times
 * (prims/bench_rows.h): the timed product of every type is the scalar
 * reference's, bit for bit, so that the bench cannot time a wrong one;
 * ggml's product of the same bytes (when llama.cpp's library is there) is
 * near it; types without a product and rows that are not whole blocks are
 * refused by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "prims/bench_rows.h"
#include "prims/matmul.h"
#include "prims/q8.h"
#include "prims/quants.h"
#include "prims/type_traits.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"

#define DEFAULT_LIB_DIR "build/cache/llama"

/* Every quantized type the bench times in its own type. */
static const uint32_t types[] = {
    RL_GGUF_GGML_Q8_0, RL_GGUF_GGML_Q4_0,   RL_GGUF_GGML_Q4_1,  RL_GGUF_GGML_Q5_0,
    RL_GGUF_GGML_Q5_1, RL_GGUF_GGML_IQ4_NL, RL_GGUF_GGML_Q2_K,  RL_GGUF_GGML_Q3_K,
    RL_GGUF_GGML_Q4_K, RL_GGUF_GGML_Q5_K,   RL_GGUF_GGML_Q6_K,  RL_GGUF_GGML_IQ4_XS};
#define N_TYPES (sizeof types / sizeof *types)

enum { ROWS = 7, COLS = 512 };

/* ROWS x COLS random weights of type into w (bytes enough for Q8_0). */
static void random_weights(uint32_t type, void *w, float *wf) {
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++)
        wf[i] = rnd_gauss();
    if (type == RL_GGUF_GGML_Q8_0)
        CHECK(rl_q8_quantize_f32_ref(wf, (size_t)ROWS * COLS, w, NULL) == RL_OK);
    else
        CHECK(rl_quantize(type, wf, (size_t)ROWS * COLS, w, NULL) == RL_OK);
}

/* Row r's product on the scalar path, its activations quantized by the
 * reference quantizer of the type's vec_dot_type. */
static float reference_row(uint32_t type, const void *w, const float *x, size_t r) {
    static unsigned char xq[COLS * 2];
    const rl_type_traits *tr = rl_type_traits_of(type);
    const size_t nb = COLS / rl_gguf_ggml_block_size(type);
    const unsigned char *row = (const unsigned char *)w + r * nb * rl_gguf_ggml_block_bytes(type);
    if (type == RL_GGUF_GGML_Q8_0) {
        float y[ROWS];
        CHECK(rl_matvec_q8_ex(w, ROWS, COLS, RL_SRC_F32, x, NULL, y, RL_PATH_REF, 1, 0, NULL, 0) ==
              RL_OK);
        return y[r];
    }
    if (tr->vec_dot_type == RL_GGUF_GGML_Q8_1)
        rl_quantize_q8_1_ref(x, xq, COLS / 32);
    else if (tr->vec_dot_type == RL_GGUF_GGML_Q8_K)
        rl_quantize_q8_K_ref(x, xq, COLS / 256);
    else
        CHECK(rl_q8_quantize_f32_ref(x, COLS, (rl_block_q8_0 *)(void *)xq, NULL) == RL_OK);
    return tr->vec_dot[RL_PATH_REF](row, xq, nb);
}

/* On every path this CPU runs, the timed product's result (the last call's)
 * is the scalar reference's bits for every row; ggml's, where it loads, is
 * within 1e-3 of the largest |row product| (its activations are its own
 * quantizer's). */
static void test_rows_equal_reference(int have_ggml) {
    static unsigned char w[ROWS * COLS * 2];
    static float wf[ROWS * COLS], x[COLS], y[ROWS], yg[ROWS];
    static double times[8];
    char msg[256];
    long compared = 0, vs_ggml = 0;
    for (size_t t = 0; t < N_TYPES; t++) {
        const uint32_t type = types[t];
        const char *name = rl_gguf_ggml_type_name(type);
        CHECK_MSG(rl_bench_rows_type(type), "%s: no product to time", name);
        random_weights(type, w, wf);
        for (size_t i = 0; i < COLS; i++)
            x[i] = ldexpf(rnd_gauss(), rnd_int(-4, 4));
        for (int p = RL_PATH_REF; p < RL_PATH_COUNT; p++) {
            if (!rl_path_supported((rl_path)p))
                continue;
            size_t done = 0;
            memset(y, 0xff, sizeof y);
            msg[0] = 0;
            rl_status st = rl_bench_rows(type, w, ROWS, COLS, x, y, (rl_path)p, 2, 0, 0, 8, times,
                                         &done, msg, sizeof msg);
            CHECK_MSG(st == RL_OK && done == 2, "%s path %s: status %d, %zu calls: %s", name,
                      rl_path_name((rl_path)p), (int)st, done, msg);
            for (size_t r = 0; r < ROWS; r++) {
                const float ref = reference_row(type, w, x, r);
                CHECK_MSG(rl_gguf_f32_bits(y[r]) == rl_gguf_f32_bits(ref),
                          "%s path %s row %zu: %a, the scalar reference %a", name,
                          rl_path_name((rl_path)p), r, y[r], ref);
                compared++;
            }
        }
        if (have_ggml) {
            size_t done = 0;
            float big = 0;
            rl_status st = rl_bench_ggml_rows(type, w, ROWS, COLS, x, yg, 1, 0, 0, 8, times, &done,
                                              msg, sizeof msg);
            CHECK_MSG(st == RL_OK && done == 1, "%s: ggml's status %d: %s", name, (int)st, msg);
            for (size_t r = 0; r < ROWS; r++)
                big = fmaxf(big, fabsf(y[r]));
            for (size_t r = 0; r < ROWS; r++)
                CHECK_MSG(fabsf(yg[r] - y[r]) <= 1e-3f * big, "%s row %zu: ggml %a, ours %a", name,
                          r, yg[r], y[r]);
            vs_ggml++;
        }
    }
    fprintf(stderr, "bench rows: %ld rows equal the scalar reference; %ld types near ggml's\n",
            compared, vs_ggml);
}

/* A type without a product (F16) and rows that are not whole blocks are
 * refused, the message naming them. */
static void test_refusals(void) {
    static unsigned char w[4096];
    static float x[512], y[4];
    static double times[4];
    char msg[256] = "";
    size_t done = 9;
    rl_status st = rl_bench_rows(RL_GGUF_GGML_F16, w, 2, 64, x, y, RL_PATH_REF, 1, 0, 0, 4, times,
                                 &done, msg, sizeof msg);
    CHECK_MSG(st == RL_UNSUPPORTED && done == 0 && strstr(msg, "F16"), "F16: status %d, %s",
              (int)st, msg);
    CHECK(!rl_bench_rows_type(RL_GGUF_GGML_F16));
    st = rl_bench_rows(RL_GGUF_GGML_Q4_K, w, 2, 32, x, y, RL_PATH_REF, 1, 0, 0, 4, times, &done,
                       msg, sizeof msg);
    CHECK_MSG(st == RL_BADLEN && strstr(msg, "Q4_K rows of 32 values"), "Q4_K x 32: %d, %s",
              (int)st, msg);
}

int main(void) {
    const char *lib = getenv("RL_LLAMA_LIB");
    char dir[1024], msg[512];
    if (lib && *lib) {
        const char *slash = strrchr(lib, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - lib) : 1, slash ? lib : ".");
    } else {
        snprintf(dir, sizeof dir, "%s", DEFAULT_LIB_DIR);
    }
    CHECK_CASE(test_refusals());
    int have_ggml = rl_ggml_open(dir, msg, sizeof msg);
    if (!have_ggml)
        CHECK_SKIP_REFERENCE("ggml's products not compared: %s", msg);
    else
        fprintf(stderr, "ggml: libggml-cpu-%s.so\n", msg);
    CHECK_CASE(test_rows_equal_reference(have_ggml));
    return check_report("bench_rows");
}
