/* test_convert.c - rl_convert_run (prims/convert.h) to and from the
 * legacy, K-quant and IQ4 types: the bytes are rl_quantize's (the
 * reference, checked against ggml in test_quants.c) whatever the thread
 * count; a quantized source is dequantized first (rl_dequantize or
 * rl_q8_dequantize), as llama-quantize --allow-requantize does; failures
 * are ranked as one thread finds them (a NaN anywhere before an earlier
 * overflow, the lowest overflow block otherwise); lengths that are not
 * whole blocks of both types are refused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/numfmt.h"
#include "prims/convert.h"
#include "prims/q8.h"
#include "prims/quants.h"
#include "tests/c/check.h"

static const uint32_t types[] = {
    RL_GGUF_GGML_Q4_0, RL_GGUF_GGML_Q4_1, RL_GGUF_GGML_Q5_0, RL_GGUF_GGML_Q5_1,
    RL_GGUF_GGML_Q2_K, RL_GGUF_GGML_Q3_K, RL_GGUF_GGML_Q4_K, RL_GGUF_GGML_Q5_K,
    RL_GGUF_GGML_Q6_K, RL_GGUF_GGML_IQ4_NL, RL_GGUF_GGML_IQ4_XS,
};
#define N_TYPES (sizeof types / sizeof types[0])

#define ROW 768  /* three super-blocks, 24 legacy blocks */
#define ROWS 13  /* more pieces of 1024 values than threads, and a short one */
#define N (ROW * ROWS)

static uint64_t rng = 88172645463325252ull;
static float gauss(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    double u = ((rng >> 11) + 0.5) / 9007199254740992.0;
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    double v = ((rng >> 11) + 0.5) / 9007199254740992.0;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static float x[N];

static rl_status run(uint32_t src, const void *xs, uint32_t dst, void *y, int nth,
                        size_t *where) {
    rl_convert c = {0};
    c.src = src;
    c.dst = dst;
    c.x = xs;
    c.y = y;
    c.n = N;
    c.row_len = ROW;
    return rl_convert_run(&c, nth, where);
}

/* F32 to every type, on 1, 2 and 5 threads: rl_quantize's bytes. */
static void test_to_types(void) {
    for (size_t t = 0; t < N_TYPES; t++) {
        size_t bytes = rl_quant_bytes(types[t], N);
        unsigned char *ref = malloc(bytes), *got = malloc(bytes);
        CHECK(rl_quantize(types[t], x, N, ref, NULL) == RL_OK);
        for (int nth = 1; nth <= 5; nth += (nth == 2 ? 3 : 1)) {
            memset(got, 0xa5, bytes);
            size_t w = 0;
            CHECK_MSG(run(RL_GGUF_GGML_F32, x, types[t], got, nth, &w) == RL_OK,
                      "%s, %d threads", rl_gguf_ggml_type_name(types[t]), nth);
            CHECK_MSG(memcmp(ref, got, bytes) == 0, "%s, %d threads: bytes differ",
                      rl_gguf_ggml_type_name(types[t]), nth);
        }
        free(ref);
        free(got);
    }
}

/* Quantized sources: dequantized, then converted. */
static void test_from_types(void) {
    static float deq[N];
    /* Q4_K to Q6_K, Q4_0 to Q8_0, Q8_0 to Q4_K, IQ4_XS to F16 */
    const uint32_t pairs[][2] = {
        {RL_GGUF_GGML_Q4_K, RL_GGUF_GGML_Q6_K}, {RL_GGUF_GGML_Q4_0, RL_GGUF_GGML_Q8_0},
        {RL_GGUF_GGML_Q8_0, RL_GGUF_GGML_Q4_K}, {RL_GGUF_GGML_IQ4_XS, RL_GGUF_GGML_F16},
        {RL_GGUF_GGML_Q5_1, RL_GGUF_GGML_IQ4_NL}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        uint32_t s = pairs[p][0], d = pairs[p][1];
        size_t sb = rl_type_bytes(s, N), db = rl_type_bytes(d, N);
        unsigned char *src = malloc(sb), *ref = malloc(db), *got = malloc(db);
        if (s == RL_GGUF_GGML_Q8_0) {
            CHECK(rl_q8_quantize_f32(x, N, (rl_block_q8_0 *)src, NULL) == RL_OK);
            rl_q8_dequantize((const rl_block_q8_0 *)src, N / 32, deq);
        } else {
            CHECK(rl_quantize(s, x, N, src, NULL) == RL_OK);
            CHECK(rl_dequantize(s, src, N, deq) == RL_OK);
        }
        if (d == RL_GGUF_GGML_Q8_0)
            CHECK(rl_q8_quantize_f32(deq, N, (rl_block_q8_0 *)ref, NULL) == RL_OK);
        else if (d == RL_GGUF_GGML_F16)
            rl_gguf_row_from_f32(d, deq, ref, N);
        else
            CHECK(rl_quantize(d, deq, N, ref, NULL) == RL_OK);
        for (int nth = 1; nth <= 3; nth += 2) {
            size_t w = 0;
            memset(got, 0x5a, db);
            CHECK_MSG(run(s, src, d, got, nth, &w) == RL_OK, "pair %zu, %d threads", p, nth);
            CHECK_MSG(memcmp(ref, got, db) == 0, "pair %zu, %d threads: bytes differ", p, nth);
        }
        /* the same type: only checked, nothing written */
        CHECK(run(s, src, s, NULL, 2, NULL) == RL_OK);
        free(src);
        free(ref);
        free(got);
    }
}

/* A NaN wins over an earlier overflow; overflows rank by block. */
static void test_failures(void) {
    static float y[N];
    size_t bytes = rl_quant_bytes(RL_GGUF_GGML_Q4_K, N), w;
    unsigned char *out = malloc(bytes);
    memcpy(y, x, sizeof y);
    y[300] = 3e38f;             /* block 1 overflows */
    y[N - 5] = NAN;             /* the last thread's NaN */
    for (int nth = 1; nth <= 3; nth++) {
        w = 0;
        CHECK(run(RL_GGUF_GGML_F32, y, RL_GGUF_GGML_Q4_K, out, nth, &w) == RL_NONFINITE);
        CHECK_EQ_U(w, N - 5);
    }
    y[N - 5] = 0;
    y[N - 700] = 3e38f;         /* a later overflow in another thread's slice */
    for (int nth = 1; nth <= 3; nth++) {
        w = 0;
        CHECK(run(RL_GGUF_GGML_F32, y, RL_GGUF_GGML_Q4_K, out, nth, &w) == RL_OVERFLOW);
        CHECK_EQ_U(w, 300 / 256);
    }
    /* rows that are not whole blocks of the destination */
    rl_convert c = {0};
    c.src = RL_GGUF_GGML_F32;
    c.dst = RL_GGUF_GGML_Q4_K;
    c.x = x;
    c.y = out;
    c.n = 384 * 2;
    c.row_len = 384;
    CHECK(rl_convert_run(&c, 2, NULL) == RL_BADLEN);
    c.dst = 9999;
    c.row_len = ROW;
    CHECK(rl_convert_run(&c, 2, NULL) == RL_BADARG);
    free(out);
}

int main(void) {
    for (size_t i = 0; i < N; i++)
        x[i] = gauss() * (i % 97 == 0 ? 20.0f : 0.05f);
    CHECK_CASE(test_to_types());
    CHECK_CASE(test_from_types());
    CHECK_CASE(test_failures());
    return check_report("convert");
}
