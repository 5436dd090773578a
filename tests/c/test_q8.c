/* test_q8.c - Q8_0 quantization against llama.cpp's golden bytes, the
 * corner tables, the error rules, and the AVX2 kernel against the reference
 * on millions of random blocks.  Run from the repository root (it reads
 * tests/golden/). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/q8.h"
#include "tests/c/check.h"
#include "tests/c/support/json.h"
#include "tests/c/testutil.h"

#define GOLDEN "tests/golden/"

/* ---- tiny helpers --------------------------------------------------- */

static int hexval(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The N bytes spelled by the hex string S (exactly 2N digits) into out;
 * 0 when S is anything else. */
static int hex_bytes(const char *s, unsigned char *out, size_t n) {
    if (!s || strlen(s) != 2 * n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        out[i] = (unsigned char)(hi * 16 + lo);
    }
    return 1;
}

static int same_bytes(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* ---- the golden corner tables --------------------------------------- */

/* Each row of an *.expected.json table: 32 input bit patterns and the 34
 * block bytes llama-quantize wrote.  Quantize every row with each path and
 * through the double entry point (every f32 is exact as a double). */
static void test_corner_table(const char *file, int want_rows) {
    json_t *doc = rl_test_json_load(file);
    CHECK_MSG(doc != NULL, "cannot read %s", file);
    if (!doc)
        return;
    int rows = 0, bad_parse = 0;
    size_t r;
    json_t *row;
    json_array_foreach(json_object_get(doc, "rows"), r, row) {
        const json_t *xh = json_object_get(row, "x_f32_hex");
        float x[32];
        double xd[32];
        if (json_array_size(xh) != 32)
            bad_parse++;
        for (int j = 0; j < 32; j++) {
            unsigned char be[4] = {0};
            if (!hex_bytes(json_string_value(json_array_get(xh, (size_t)j)), be, 4))
                bad_parse++;
            x[j] = rl_gguf_f32_from_bits((uint32_t)be[0] << 24 | (uint32_t)be[1] << 16 |
                                         (uint32_t)be[2] << 8 | be[3]);
            xd[j] = x[j];
        }
        unsigned char want[34];
        if (!hex_bytes(json_string_value(json_object_get(row, "block_hex")), want, sizeof want)) {
            bad_parse++;
            break;
        }
        rl_block_q8_0 y;
        size_t w;
        unsigned wd = (unsigned)(want[0] | want[1] << 8);
        CHECK_EACH(rl_q8_quantize_f32_ref(x, 32, &y, &w) == RL_OK && same_bytes(&y, want, 34),
                   "%s row %d (ref): d %04x, llama-quantize's %04x", file, rows, y.d, wd);
        if (rl_cpu_has_avx2())
            CHECK_EACH(rl_q8_quantize_f32_avx2(x, 32, &y, &w) == RL_OK &&
                           same_bytes(&y, want, 34),
                       "%s row %d (avx2): d %04x, llama-quantize's %04x", file, rows, y.d, wd);
        if (rl_path_supported(RL_PATH_AVX512))
            CHECK_EACH(rl_q8_quantize_f32_avx512(x, 32, &y, &w) == RL_OK &&
                           same_bytes(&y, want, 34),
                       "%s row %d (avx512): d %04x, llama-quantize's %04x", file, rows, y.d, wd);
        CHECK_EACH(rl_q8_quantize_path(RL_SRC_F64, xd, 32, &y, &w, RL_PATH_REF) == RL_OK &&
                       same_bytes(&y, want, 34),
                   "%s row %d (double entry point): d %04x, llama-quantize's %04x", file, rows,
                   y.d, wd);
        /* Dequantized: q * f16->f32(d), as the bytes say. */
        float deq[32];
        rl_block_q8_0 wb;
        memcpy(&wb, want, sizeof wb);
        rl_q8_dequantize_ref(&wb, 1, deq);
        float dd = rl_gguf_f16_to_f32((uint16_t)(want[0] | want[1] << 8));
        for (int j = 0; j < 32; j++)
            CHECK_EACH(deq[j] == (float)(int8_t)want[2 + j] * dd &&
                           rl_q8_get(&wb, (size_t)j) == (double)deq[j],
                       "%s row %d [%d]: dequantized %a, rl_q8_get %a, want %a", file, rows, j,
                       (double)deq[j], rl_q8_get(&wb, (size_t)j),
                       (double)((float)(int8_t)want[2 + j] * dd));
        rows++;
    }
    json_decref(doc);
    CHECK_MSG(rows == want_rows && !bad_parse, "%s: parsed %d rows (want %d), %d parse errors",
              file, rows, want_rows, bad_parse);
}

/* ---- whole golden files --------------------------------------------- */

/* A tensor of a gguf-py dump: its offset, ggml type name and element
 * count; 0 when the entry lacks one of them. */
static int tensor_facts(const json_t *t, long *offset, const char **type, long *nel) {
    const json_t *ne = json_object_get(t, "ne");
    *type = json_string_value(json_object_get(t, "type_name"));
    if (!t || !json_is_array(ne) || !*type || !json_is_integer(json_object_get(t, "offset")))
        return 0;
    long n = 1;
    size_t d;
    json_t *v;
    json_array_foreach(ne, d, v) n *= (long)json_integer_value(v);
    *nel = n;
    *offset = (long)json_integer_value(json_object_get(t, "offset"));
    return *offset >= 0;
}

static long data_offset(const json_t *dump) {
    const json_t *v = json_object_get(dump, "data_offset");
    return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

/* Every tensor llama-quantize wrote as Q8_0 in OUT: quantize the same tensor
 * of IN (F32, F16 or BF16) with both paths and compare the bytes. */
static void test_golden_file(const char *in, const char *out) {
    char path[256];
    snprintf(path, sizeof path, GOLDEN "%s.gguf.json", in);
    json_t *jin = rl_test_json_load(path);
    snprintf(path, sizeof path, GOLDEN "%s.gguf.json", out);
    json_t *jout = rl_test_json_load(path);
    snprintf(path, sizeof path, GOLDEN "%s.gguf", in);
    size_t lin = 0, lout = 0;
    unsigned char *din = (unsigned char *)slurp(path, &lin);
    snprintf(path, sizeof path, GOLDEN "%s.gguf", out);
    unsigned char *dout = (unsigned char *)slurp(path, &lout);
    CHECK_MSG(jin && jout && din && dout, "cannot read golden pair %s / %s", in, out);
    if (!(jin && jout && din && dout))
        goto done;
    long base_in = data_offset(jin);
    long base_out = data_offset(jout);
    int tensors = 0, bad = 0;
    size_t ti;
    json_t *t;
    json_array_foreach(json_object_get(jout, "tensors"), ti, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        long off_o, off_i, ne_o, ne_i;
        const char *ty_o, *ty_i;
        if (!name || !tensor_facts(t, &off_o, &ty_o, &ne_o) || strcmp(ty_o, "Q8_0"))
            continue;
        if (!tensor_facts(rl_test_json_tensor(jin, name), &off_i, &ty_i, &ne_i) || ne_i != ne_o) {
            fprintf(stderr, "  %s: %s has no source tensor of %ld elements in %s\n", out, name,
                    ne_o, in);
            bad++;
            continue;
        }
        rl_q8_src src = !strcmp(ty_i, "F32") ? RL_SRC_F32 : !strcmp(ty_i, "F16") ? RL_SRC_F16
                        : RL_SRC_BF16;
        size_t esz = src == RL_SRC_F32 ? 4 : 2, n = (size_t)ne_i;
        if ((size_t)(base_in + off_i) + n * esz > lin ||
            (size_t)(base_out + off_o) + rl_q8_bytes(n) > lout) {
            fprintf(stderr, "  %s: %s lies past the end of its file\n", out, name);
            bad++;
            continue;
        }
        void *x = malloc(n * esz);
        rl_block_q8_0 *y = malloc(rl_q8_bytes(n));
        memcpy(x, din + base_in + off_i, n * esz); /* aligned copy */
        for (int path = RL_PATH_REF; path <= RL_PATH_AVX2; path++) {
            if (!rl_path_supported((rl_path)path))
                continue;
            size_t w;
            if (rl_q8_quantize_path(src, x, n, y, &w, (rl_path)path) != RL_OK ||
                !same_bytes(y, dout + base_out + off_o, rl_q8_bytes(n))) {
                /* the first block that differs, with both scales */
                size_t blk = 0;
                const rl_block_q8_0 *g = (const rl_block_q8_0 *)(dout + base_out + off_o);
                while (blk + 1 < n / 32 && same_bytes(y + blk, g + blk, sizeof *y))
                    blk++;
                fprintf(stderr, "  %s: %s differs (%s path), first at block %zu: d %04x, "
                        "llama-quantize's %04x\n", out, name, rl_path_name((rl_path)path), blk,
                        y[blk].d, g[blk].d);
                bad++;
            }
        }
        free(x);
        free(y);
        tensors++;
    }
    CHECK_MSG(tensors > 0 && !bad, "%s -> %s: %d Q8_0 tensors, %d mismatches", in, out,
              tensors, bad);
done:
    json_decref(jin);
    json_decref(jout);
    free(din);
    free(dout);
}

/* The two inputs llama-quantize refuses: a NaN at flat index 39 ("found nan
 * value at block 39", where block means element) and a d that rounds to an
 * infinite f16 in block 1. */
static void test_golden_errors(void) {
    const char *files[2] = {GOLDEN "q8_nan.f32.gguf", GOLDEN "q8_overflow.f32.gguf"};
    const char *jsons[2] = {GOLDEN "q8_nan.f32.gguf.json", GOLDEN "q8_overflow.f32.gguf.json"};
    const rl_status want[2] = {RL_NONFINITE, RL_OVERFLOW};
    const size_t where_want[2] = {39, 1};
    for (int f = 0; f < 2; f++) {
        size_t len;
        unsigned char *d = (unsigned char *)slurp(files[f], &len);
        json_t *js = rl_test_json_load(jsons[f]);
        long base = data_offset(js);
        CHECK_MSG(d && js && base >= 0 && (size_t)base + 64 * sizeof(float) <= len,
                  "cannot read %s", files[f]);
        if (d && js && base >= 0 && (size_t)base + 64 * sizeof(float) <= len) {
            float x[64];
            memcpy(x, d + base, sizeof x);
            int bad = 0;
            for (int path = RL_PATH_REF; path <= RL_PATH_AVX2; path++) {
                if (!rl_path_supported((rl_path)path))
                    continue;
                rl_block_q8_0 y[2];
                size_t w = 12345;
                rl_status st = rl_q8_quantize_path(RL_SRC_F32, x, 64, y, &w, (rl_path)path);
                if (st != want[f] || w != where_want[f]) {
                    fprintf(stderr, "  %s (%s): status %s where %zu\n", files[f],
                            rl_path_name((rl_path)path), rl_status_name(st), w);
                    bad++;
                }
            }
            CHECK_MSG(!bad, "%s: expected %s at %zu", files[f], rl_status_name(want[f]),
                      where_want[f]);
        }
        free(d);
        json_decref(js);
    }
}

/* ---- error rules ---------------------------------------------------- */

static rl_status q_path(const float *x, size_t n, size_t *w, rl_path p) {
    static rl_block_q8_0 y[64];
    return rl_q8_quantize_path(RL_SRC_F32, x, n, y, w, p);
}

static void test_errors(void) {
    float x[32 * 16];
    int bad = 0;
    for (int path = RL_PATH_REF; path <= RL_PATH_AVX2; path++) {
        if (!rl_path_supported((rl_path)path))
            continue;
        rl_path p = (rl_path)path;
        size_t w;
        for (int i = 0; i < 32 * 16; i++)
            x[i] = rnd_gauss();
        bad += q_path(x, 32 * 16, &w, p) != RL_OK;
        /* NaN, +inf, -inf anywhere, the first reported. */
        const float nf[3] = {NAN, INFINITY, -INFINITY};
        for (int k = 0; k < 3; k++) {
            float save = x[77], save2 = x[300];
            x[300] = nf[(k + 1) % 3];
            x[77] = nf[k];
            bad += q_path(x, 32 * 16, &w, p) != RL_NONFINITE || w != 77;
            x[77] = save;
            bad += q_path(x, 32 * 16, &w, p) != RL_NONFINITE || w != 300;
            x[300] = save2;
        }
        /* Overflow: d = 65520 is the first overflowing scale; just below is
         * fine and rounds to 0x7bff. */
        x[5 * 32 + 3] = 127.0f * 65520.0f;
        bad += q_path(x, 32 * 16, &w, p) != RL_OVERFLOW || w != 5;
        x[9 * 32] = -3e38f;
        bad += q_path(x, 32 * 16, &w, p) != RL_OVERFLOW || w != 5;
        /* A NaN after an overflowing block still wins. */
        x[15 * 32 + 31] = NAN;
        bad += q_path(x, 32 * 16, &w, p) != RL_NONFINITE || w != 15 * 32 + 31;
        for (int i = 0; i < 32 * 16; i++)
            x[i] = rnd_gauss();
        x[3] = nextafterf(127.0f * 65520.0f, 0.0f);
        rl_block_q8_0 y[16];
        bad += rl_q8_quantize_path(RL_SRC_F32, x, 32 * 16, y, &w, p) != RL_OK ||
               y[0].d != 0x7bff;
        bad += q_path(x, 33, &w, p) != RL_BADLEN;
        bad += q_path(x, 0, &w, p) != RL_OK;
        bad += rl_q8_quantize_path(RL_SRC_F32, NULL, 32, y, &w, p) != RL_BADARG;
    }
    CHECK_MSG(!bad, "error rules: %d wrong answers", bad);
    {
        size_t w;
        rl_status st = rl_cpu_has_avx512() ? RL_OK : RL_UNSUPPORTED;
        for (int i = 0; i < 32; i++)
            x[i] = 1.0f;
        CHECK(q_path(x, 32, &w, RL_PATH_AVX512) == st);
    }
    char msg[256];
    rl_q8_message(RL_NONFINITE, 70, 64, msg, sizeof msg);
    CHECK_MSG(strstr(msg, "row 1, column 6") != NULL, "message: %s", msg);
    rl_q8_message(RL_OVERFLOW, 5, 64, msg, sizeof msg);
    CHECK_MSG(strstr(msg, "row 2, block 1") != NULL, "message: %s", msg);
    rl_q8_message(RL_OVERFLOW, 5, 0, msg, sizeof msg);
    CHECK_MSG(strstr(msg, "block 5 (values 160..191)") != NULL, "message: %s", msg);
    int named = 1;
    for (int s = RL_OK; s <= RL_UNSUPPORTED; s++)
        named &= strcmp(rl_status_name((rl_status)s), "unknown status") != 0;
    CHECK(named);
    CHECK(!strcmp(rl_status_name(RL_NONFINITE), "non-finite"));
    CHECK(!strcmp(rl_status_name(RL_OVERFLOW), "scale-overflow"));
}

/* ---- random blocks: AVX2 against the reference ----------------------- */

static void gen_block(float *x) {
    int kind = rnd_int(0, 9);
    float scale = ldexpf(1.0f, rnd_int(-40, 20));
    switch (kind) {
    case 0: /* gaussian, any magnitude */
        for (int j = 0; j < 32; j++)
            x[j] = rnd_gauss() * scale;
        break;
    case 1: /* zeros of both signs */
        for (int j = 0; j < 32; j++)
            x[j] = (rnd() & 1) ? -0.0f : 0.0f;
        break;
    case 2: /* f32-subnormal d: amax below 127 * 2^-126, some with 1/d finite */
        for (int j = 0; j < 32; j++)
            x[j] = rnd_gauss() * ldexpf(1.0f, rnd_int(-149, -120));
        break;
    case 3: { /* exact ties: d = 2^e, x = (k + 1/2) d */
        int e = rnd_int(-60, 15);
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf((float)rnd_int(-127, 126) + 0.5f, e);
        x[rnd_int(0, 31)] = ldexpf((rnd() & 1) ? -127.0f : 127.0f, e);
        break;
    }
    case 4: { /* huge: d in [65504, 65520), just below the overflow */
        float amax = 127.0f * (65504.0f + 15.99f * (float)rnd_unit());
        for (int j = 0; j < 32; j++)
            x[j] = (float)(rnd_unit() * 2 - 1) * amax;
        x[rnd_int(0, 31)] = (rnd() & 1) ? -amax : amax;
        break;
    }
    case 5: /* amax taken by a negative value */
        for (int j = 0; j < 32; j++)
            x[j] = rnd_gauss() * scale;
        x[rnd_int(0, 31)] = -8.0f * scale;
        break;
    case 6: /* random finite bit patterns with a bounded exponent */
        for (int j = 0; j < 32; j++) {
            uint32_t u = (uint32_t)rnd() & 0x807fffffu;
            u |= (uint32_t)rnd_int(0, 148) << 23;
            x[j] = rl_gguf_f32_from_bits(u);
        }
        break;
    case 7: /* near-ties: multiples of d/2 nudged by an ulp */
        for (int j = 0; j < 32; j++) {
            float v = ((float)rnd_int(-254, 254) * 0.5f) * scale;
            x[j] = (rnd() & 1) ? nextafterf(v, INFINITY) : nextafterf(v, -INFINITY);
        }
        break;
    case 8: /* one value, the rest tiny */
        for (int j = 0; j < 32; j++)
            x[j] = rnd_gauss() * scale * 1e-6f;
        x[rnd_int(0, 31)] = scale;
        break;
    default: /* overflow now and then (the run must then report it) */
        for (int j = 0; j < 32; j++)
            x[j] = rnd_gauss() * scale;
        if (rnd_int(0, 199) == 0)
            x[rnd_int(0, 31)] = 127.0f * 65520.0f * (1.0f + (float)rnd_unit());
        break;
    }
}

static void test_random_blocks(long nblocks) {
    if (!rl_cpu_has_avx2()) {
        CHECK_SKIP("no AVX2 on this CPU: AVX2 quantizer not compared");
        return;
    }
    enum { CH = 1024 };
    float *x = malloc(CH * 32 * sizeof *x);
    rl_block_q8_0 *a = malloc(CH * sizeof *a), *b = malloc(CH * sizeof *b);
    long mism = 0, mism512 = 0, chunks = 0, ovf_runs = 0;
    const int avx512 = rl_path_supported(RL_PATH_AVX512);
    for (long done = 0; done < nblocks; done += CH, chunks++) {
        for (int i = 0; i < CH; i++)
            gen_block(x + 32 * i);
        size_t wa = 0, wb = 0, wc = 0;
        rl_status sa = rl_q8_quantize_f32_ref(x, CH * 32, a, &wa);
        if (avx512) { /* the AVX-512 quantizer the same way */
            rl_status sc = rl_q8_quantize_f32_avx512(x, CH * 32, b, &wc);
            mism512 += sa != sc || wa != wc || !same_bytes(a, b, CH * sizeof *a);
        }
        rl_status sb = rl_q8_quantize_f32_avx2(x, CH * 32, b, &wb);
        ovf_runs += sa == RL_OVERFLOW;
        if (sa != sb || wa != wb || !same_bytes(a, b, CH * sizeof *a)) {
            if (mism < 5) {
                for (int i = 0; i < CH; i++)
                    if (!same_bytes(a + i, b + i, sizeof *a)) {
                        fprintf(stderr, "  block differs: first x %a d %04x/%04x\n",
                                (double)x[32 * i], a[i].d, b[i].d);
                        break;
                    }
            }
            mism++;
        }
    }
    CHECK_MSG(mism == 0, "avx2 vs ref: %ld of %ld chunks of %d random blocks differ", mism,
              chunks, CH);
    CHECK_MSG(mism512 == 0, "avx512 vs ref: %ld of %ld chunks of %d random blocks differ",
              mism512, chunks, CH);
    CHECK_MSG(ovf_runs > 0, "the random runs never exercised the overflow report");
    free(x);
    free(a);
    free(b);
}

/* ---- other sources ----------------------------------------------------- */

static void compare_src(rl_q8_src src, const void *x, const float *widened, size_t n,
                        const char *what) {
    rl_block_q8_0 *want = malloc(rl_q8_bytes(n) + 34), *got = malloc(rl_q8_bytes(n) + 34);
    size_t ww = 0;
    rl_status sw = rl_q8_quantize_f32_ref(widened, n, want, &ww);
    int bad = 0;
    for (int path = RL_PATH_REF; path < RL_PATH_COUNT; path++) {
        if (!rl_path_supported((rl_path)path))
            continue;
        size_t wg = 0;
        rl_status sg = rl_q8_quantize_path(src, x, n, got, &wg, (rl_path)path);
        if (sg != sw || (sg != RL_OK && wg != ww) ||
            (sg == RL_OK && !same_bytes(want, got, rl_q8_bytes(n)))) {
            fprintf(stderr, "  %s (%s): %s@%zu vs %s@%zu\n", what, rl_path_name((rl_path)path),
                    rl_status_name(sg), wg, rl_status_name(sw), ww);
            bad++;
        }
    }
    CHECK_MSG(!bad, "%s: entry point differs from widening + reference", what);
    free(want);
    free(got);
}

static void test_sources(void) {
    /* double: values that round when cast, over many chunks. */
    size_t n = 32 * 100;
    double *xd = malloc(n * sizeof *xd);
    float *xf = malloc(n * sizeof *xf);
    for (size_t i = 0; i < n; i++) {
        xd[i] = (rnd_unit() * 2 - 1) * ldexp(1.0, rnd_int(-30, 20)) * (1 + 0x1p-30);
        xf[i] = (float)xd[i];
    }
    compare_src(RL_SRC_F64, xd, xf, n, "f64 source");
    /* a double overflowing f32 is non-finite once cast */
    xd[1000] = 1e300;
    xf[1000] = (float)xd[1000];
    compare_src(RL_SRC_F64, xd, xf, n, "f64 source with 1e300");
    /* overflow in an early chunk, NaN in a late one: the NaN wins */
    xd[1000] = 0.5;
    xf[1000] = 0.5f;
    xd[40] = 9e6;
    xf[40] = 9e6f;
    compare_src(RL_SRC_F64, xd, xf, n, "f64 source with overflow");
    xd[3000] = NAN;
    xf[3000] = NAN;
    compare_src(RL_SRC_F64, xd, xf, n, "f64 source with overflow then NaN");
    free(xd);
    free(xf);

    /* f16 and bf16: every finite bit pattern, in order (so blocks mix
     * magnitudes and include subnormals and zeros). */
    uint16_t *h = malloc(65536 * sizeof *h);
    float *hw = malloc(65536 * sizeof *hw);
    size_t m = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        float v = rl_gguf_f16_to_f32((uint16_t)u);
        if (isfinite(v)) {
            h[m] = (uint16_t)u;
            hw[m++] = v;
        }
    }
    m = m / 32 * 32;
    compare_src(RL_SRC_F16, h, hw, m, "f16 source, all finite patterns");
    /* shuffled, so blocks mix signs and scales */
    for (size_t i = m - 1; i > 0; i--) {
        size_t k = rnd() % (i + 1);
        uint16_t t = h[i];
        h[i] = h[k];
        h[k] = t;
        float tf = hw[i];
        hw[i] = hw[k];
        hw[k] = tf;
    }
    compare_src(RL_SRC_F16, h, hw, m, "f16 source, shuffled");
    h[777] = 0x7e00; /* NaN */
    hw[777] = NAN;
    compare_src(RL_SRC_F16, h, hw, m, "f16 source with NaN");

    m = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        float v = rl_gguf_bf16_to_f32((uint16_t)u);
        /* below the overflow range, so most blocks quantize */
        if (isfinite(v) && fabsf(v) < 1e6f) {
            h[m] = (uint16_t)u;
            hw[m++] = v;
        }
    }
    m = m / 32 * 32;
    compare_src(RL_SRC_BF16, h, hw, m, "bf16 source, finite patterns below 1e6");
    h[64] = 0x4f80; /* 2^32: overflow */
    hw[64] = rl_gguf_bf16_to_f32(0x4f80);
    compare_src(RL_SRC_BF16, h, hw, m, "bf16 source with overflow");
    h[5000] = 0xff80; /* -inf */
    hw[5000] = -INFINITY;
    compare_src(RL_SRC_BF16, h, hw, m, "bf16 source with -inf");
    free(h);
    free(hw);

    /* the knob-driven entry points follow rl_simd() */
    float x[64];
    rl_block_q8_0 y0[2], y1[2];
    for (int i = 0; i < 64; i++)
        x[i] = rnd_gauss();
    size_t w;
    rl_set_simd(0);
    rl_status s0 = rl_q8_quantize_f32(x, 64, y0, &w);
    rl_set_simd(1);
    rl_status s1 = rl_q8_quantize_f32(x, 64, y1, &w);
    CHECK(s0 == RL_OK && s1 == RL_OK && same_bytes(y0, y1, sizeof y0));
}

/* ---- dequantize -------------------------------------------------------- */

static void test_dequantize(void) {
    enum { NB = 4096 };
    rl_block_q8_0 *b = malloc(NB * sizeof *b);
    float *ya = malloc(NB * 32 * sizeof *ya), *yb = malloc(NB * 32 * sizeof *yb);
    for (int i = 0; i < NB; i++) {
        b[i].d = (uint16_t)rnd(); /* every pattern, inf and NaN included */
        for (int j = 0; j < 32; j++)
            b[i].qs[j] = (int8_t)rnd();
    }
    b[0].qs[0] = -128;
    rl_q8_dequantize_ref(b, NB, ya);
    for (int i = 0; i < NB; i++) {
        float d = rl_gguf_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) {
            float want = (float)b[i].qs[j] * d;
            CHECK_EACH(rl_gguf_f32_bits(want) == rl_gguf_f32_bits(ya[32 * i + j]),
                       "dequantize_ref block %d element %d: %a, want %a", i, j,
                       (double)ya[32 * i + j], (double)want);
            double g = rl_q8_get(b, (size_t)(32 * i + j));
            CHECK_EACH(!isfinite(want) || g == (double)want,
                       "rl_q8_get block %d element %d: %a, want %a", i, j, g, (double)want);
        }
    }
    if (rl_cpu_has_avx2()) {
        rl_q8_dequantize_avx2(b, NB, yb);
        CHECK_SAME_ELEMENTS(ya, yb, NB * 32, "dequantize_avx2 against dequantize_ref");
    } else {
        CHECK_SKIP("no AVX2: dequantize_avx2 not compared");
    }
    /* The dispatcher, and an odd (2-aligned, not 4-aligned) block address. */
    unsigned char *raw = malloc(NB * 34 + 2);
    memcpy(raw + 2, b, NB * 34);
    rl_q8_dequantize((const rl_block_q8_0 *)(const void *)(raw + 2), NB, yb);
    CHECK_SAME_ELEMENTS(ya, yb, NB * 32, "rl_q8_dequantize of odd-aligned blocks");
    free(raw);
    free(b);
    free(ya);
    free(yb);
}

int main(void) {
    CHECK_CASE(test_corner_table(GOLDEN "q8_main.edge_blocks.expected.json", 19));
    CHECK_CASE(test_corner_table(GOLDEN "q8_main.tiny_d.expected.json", 3));
    CHECK_CASE(test_golden_file("q8_main.f32", "q8_main.q8_0"));
    CHECK_CASE(test_golden_file("q8_f16src.f16", "q8_f16src.q8_0"));
    CHECK_CASE(test_golden_file("q8_bf16src.bf16", "q8_bf16src.q8_0"));
    CHECK_CASE(test_golden_file("q8_align64.f32", "q8_align64.q8_0"));
    CHECK_CASE(test_golden_errors());
    CHECK_CASE(test_errors());
    CHECK_CASE(test_random_blocks(3L << 20));
    CHECK_CASE(test_sources());
    CHECK_CASE(test_dequantize());
    return check_report("q8");
}
