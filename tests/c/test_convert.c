/* test_convert.c - rl_convert_run (prims/convert.h) to and from the
 * legacy, K-quant and IQ4 types: the bytes are rl_quantize's (the
 * reference, checked against ggml in test_quants.c) whatever the thread
 * count; a quantized source is dequantized first (rl_dequantize or
 * rl_q8_dequantize), as llama-quantize --allow-requantize does; failures
 * are ranked as one thread finds them (a NaN anywhere before an earlier
 * overflow, the lowest overflow block otherwise); lengths that are not
 * whole blocks of both types are refused.  rl_stream_run (the stream
 * `quantize' runs per tensor) over a file written and opened here: its
 * pieces and threads give rl_quantize's bytes, through the file's
 * descriptor or its mapping; a failure in a late piece, or the file cut
 * short while it is read, is reported and nothing is committed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- the stream ---------------------------------------------------------- */

static char tmpdir[256];

/* A GGUF file at PATH holding the F32 tensor "t" of N values (ROWS rows of
 * ROW) from XS. */
static int write_source(const char *path, const float *xs) {
    rl_gguf_writer *w = rl_gguf_writer_new();
    int64_t ne[2] = {ROW, ROWS};
    int ok = w && rl_gguf_w_tensor(w, "t", 1, 2, ne, RL_GGUF_GGML_F32, xs, sizeof(float) * N) ==
                      RL_GGUF_OK &&
             rl_gguf_writer_write(w, path, NULL, 0, NULL) == RL_GGUF_OK;
    rl_gguf_writer_free(w);
    return ok;
}

/* Stream tensor "t" of F into OUT as DST, in pieces of PIECE_BYTES, on NTH
 * threads, through the descriptor when USE_FD; commits the output on
 * success, aborts it otherwise.  The outcome, with R filled. */
static rl_stream_outcome stream_to(const rl_gguf_file *f, const char *out, uint32_t dst,
                                   size_t piece_bytes, int nth, int use_fd, rl_stream_result *r) {
    rl_gguf_writer *w = rl_gguf_writer_new();
    int64_t ne[2] = {ROW, ROWS};
    int64_t i = rl_gguf_find_tensor(f, "t", 1);
    rl_stream s = {0};
    rl_stream_outcome o = RL_STREAM_ARG;
    if (!w || i < 0 ||
        rl_gguf_w_tensor_deferred(w, "t", 1, 2, ne, dst) != RL_GGUF_OK ||
        rl_gguf_writer_stream_begin(w, out, NULL, 0, NULL) != RL_GGUF_OK) {
        rl_gguf_writer_free(w);
        memset(r, 0, sizeof *r);
        return o;
    }
    s.w = w;
    s.bytes = rl_gguf_bytes(f);
    s.size = rl_gguf_file_size(f);
    s.fd = use_fd ? rl_gguf_fd(f) : -1;
    s.offset = rl_gguf_data_offset(f) + rl_gguf_tensor_offset(f, (uint64_t)i);
    s.src = RL_GGUF_GGML_F32;
    s.dst = dst;
    s.n = N;
    s.row_len = ROW;
    s.piece_bytes = piece_bytes;
    s.threads = nth;
    o = rl_stream_run(&s, r);
    if (o == RL_STREAM_OK && rl_gguf_writer_stream_end(w, NULL, 0, NULL) != RL_GGUF_OK)
        o = RL_STREAM_WRITE;
    else if (o != RL_STREAM_OK)
        rl_gguf_writer_stream_abort(w);
    rl_gguf_writer_free(w);
    return o;
}

/* The bytes of tensor "t" of the file at PATH equal WANT (BYTES long). */
static int tensor_is(const char *path, const void *want, size_t bytes) {
    rl_gguf_file *g = NULL;
    if (rl_gguf_open(path, &g, NULL, 0, NULL) != RL_GGUF_OK)
        return 0;
    int64_t i = rl_gguf_find_tensor(g, "t", 1);
    int ok = i >= 0 && rl_gguf_tensor_nbytes(g, (uint64_t)i) == bytes &&
             memcmp(rl_gguf_tensor_data(g, (uint64_t)i), want, bytes) == 0;
    rl_gguf_close(g);
    return ok;
}

/* The file tmpdir/NAME holding XS (write_source), opened; its path in SRC
 * and the output's in OUT (300 bytes each).  NULL, checked, on failure. */
static rl_gguf_file *open_source(const char *name, const float *xs, char *src, char *out) {
    rl_gguf_file *f = NULL;
    snprintf(src, 300, "%s/%s", tmpdir, name);
    snprintf(out, 300, "%s/out.gguf", tmpdir);
    CHECK(write_source(src, xs));
    CHECK(rl_gguf_open(src, &f, NULL, 0, NULL) == RL_GGUF_OK);
    return f;
}

/* Many pieces (of 1, 2 and 5 rows, and one piece for the whole tensor),
 * 1 and 3 threads, the descriptor and the mapping: rl_quantize's bytes. */
static void test_stream_pieces(void) {
    char src[300], out[300];
    rl_gguf_file *f = open_source("source.gguf", x, src, out);
    if (!f)
        return;
    const uint32_t dsts[] = {RL_GGUF_GGML_Q4_K, RL_GGUF_GGML_Q8_0, RL_GGUF_GGML_F16};
    const size_t pieces[] = {ROW * 4, ROW * 4 * 2, ROW * 4 * 5, 0};
    for (size_t d = 0; d < sizeof dsts / sizeof dsts[0]; d++) {
        size_t bytes = rl_type_bytes(dsts[d], N);
        unsigned char *ref = malloc(bytes);
        if (dsts[d] == RL_GGUF_GGML_Q8_0)
            CHECK(rl_q8_quantize_f32(x, N, (rl_block_q8_0 *)ref, NULL) == RL_OK);
        else if (dsts[d] == RL_GGUF_GGML_F16)
            rl_gguf_row_from_f32(dsts[d], x, ref, N);
        else
            CHECK(rl_quantize(dsts[d], x, N, ref, NULL) == RL_OK);
        for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++)
            for (int nth = 1; nth <= 3; nth += 2)
                for (int fd = 0; fd < 2; fd++) {
                    rl_stream_result r;
                    unlink(out);
                    CHECK_MSG(stream_to(f, out, dsts[d], pieces[p], nth, fd, &r) ==
                                      RL_STREAM_OK &&
                                  tensor_is(out, ref, bytes),
                              "%s, pieces of %zu bytes, %d threads, %s: outcome %d, %s",
                              rl_gguf_ggml_type_name(dsts[d]), pieces[p], nth,
                              fd ? "pread" : "mapping", (int)r.outcome, r.msg);
                }
        free(ref);
    }
    rl_gguf_close(f);
    unlink(src);
    unlink(out);
}

/* A NaN in the tenth piece, after an overflow in the second: the NaN is
 * reported, by its flat index; alone, the overflow is, by its block; and
 * the output file is never made. */
static void test_stream_failure_midway(void) {
    static float y[N];
    char src[300], out[300];
    memcpy(y, x, sizeof y);
    y[ROW + 300] = 3e38f;        /* row 1: the second piece of one row */
    y[9 * ROW + 17] = NAN;       /* row 9: the tenth */
    for (int pass = 0; pass < 2; pass++) {
        rl_gguf_file *f = open_source("bad.gguf", y, src, out);
        if (!f)
            return;
        for (int nth = 1; nth <= 3; nth += 2)
            for (int fd = 0; fd < 2; fd++) {
                rl_stream_result r;
                unlink(out);
                CHECK(stream_to(f, out, RL_GGUF_GGML_Q4_K, ROW * 4, nth, fd, &r) ==
                      RL_STREAM_CHECK);
                if (pass == 0)
                    CHECK(r.status == RL_NONFINITE && r.where == 9 * ROW + 17);
                else
                    CHECK(r.status == RL_OVERFLOW && r.where == (ROW + 300) / 256);
                CHECK(access(out, F_OK) != 0);
            }
        rl_gguf_close(f);
        y[9 * ROW + 17] = 0;
    }
    unlink(src);
}

/* The source cut short after it was opened: the reads through its
 * descriptor come up short in a late piece, the stream says the file was
 * truncated (the sizes then and now), and nothing is committed. */
static void test_stream_truncated(void) {
    char src[300], out[300];
    rl_gguf_file *f = open_source("cut.gguf", x, src, out);
    if (!f)
        return;
    uint64_t cut = rl_gguf_data_offset(f) + sizeof(float) * ROW * 7;
    CHECK(truncate(src, (off_t)cut) == 0);
    for (int nth = 1; nth <= 3; nth += 2) {
        rl_stream_result r;
        unlink(out);
        CHECK_MSG(stream_to(f, out, RL_GGUF_GGML_Q4_K, ROW * 4 * 2, nth, 1, &r) ==
                          RL_STREAM_READ &&
                      strstr(r.msg, "truncated while being read") != NULL,
                  "%d threads: outcome %d, %s", nth, (int)r.outcome, r.msg);
        CHECK(access(out, F_OK) != 0);
    }
    rl_gguf_close(f);
    unlink(src);
}

int main(void) {
    for (size_t i = 0; i < N; i++)
        x[i] = gauss() * (i % 97 == 0 ? 20.0f : 0.05f);
    CHECK_CASE(test_to_types());
    CHECK_CASE(test_from_types());
    CHECK_CASE(test_failures());
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/rl-test-convert.XXXXXX", t && *t ? t : "/tmp");
    if (mkdtemp(tmpdir)) {
        CHECK_CASE(test_stream_pieces());
        CHECK_CASE(test_stream_failure_midway());
        CHECK_CASE(test_stream_truncated());
        rmdir(tmpdir);
    } else {
        CHECK_MSG(0, "cannot make a temporary directory in %s", t && *t ? t : "/tmp");
    }
    return check_report("convert");
}
