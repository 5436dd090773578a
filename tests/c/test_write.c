/* test_write.c - the GGUF writer (gguf/write.c), checked through the
 * reader.
 *
 * - Canonical files read and written back come out byte for byte identical,
 *   through the raw copy and through the typed calls.
 * - A file with every value type (nested and empty arrays, empty strings)
 *   reads back equal; the layout rules hold.
 * - The writer refuses nonsense with its own status; a refused or failing
 *   write leaves neither the target nor a temporary file.
 * - A streamed file (tensors deferred, their bytes given in odd pieces) is
 *   the file written in one go; a stream given too many or too few bytes,
 *   or freed open, fails and leaves nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf/fileio.h"
#include "gguf/gguf.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"

#define GOLDEN "tests/golden/"

/* Entries of DIR other than . and .. */
static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static char tmpdir[256];

/* Every tensor of F into W, in file order. */
static rl_gguf_status copy_tensors(const rl_gguf_file *f, rl_gguf_writer *w) {
    rl_gguf_status st = RL_GGUF_OK;
    for (uint64_t i = 0; st == RL_GGUF_OK && i < rl_gguf_tensor_count(f); i++) {
        uint64_t nlen;
        const char *n = rl_gguf_tensor_name(f, i, &nlen);
        int64_t ne[4];
        for (uint32_t d = 0; d < 4; d++)
            ne[d] = rl_gguf_tensor_ne(f, i, d);
        st = rl_gguf_w_tensor(w, n, nlen, rl_gguf_tensor_n_dims(f, i), ne,
                              rl_gguf_tensor_type(f, i), rl_gguf_tensor_data(f, i),
                              rl_gguf_tensor_nbytes(f, i));
    }
    return st;
}

static rl_gguf_status copy_file(const rl_gguf_file *f, rl_gguf_writer *w) {
    rl_gguf_status st = RL_GGUF_OK;
    if (rl_gguf_find_key(f, "general.alignment", 17) < 0)
        st = rl_gguf_writer_set_implicit_alignment(w, 1);
    for (uint64_t i = 0; st == RL_GGUF_OK && i < rl_gguf_kv_count(f); i++)
        st = rl_gguf_w_copy_kv(w, f, i);
    return st == RL_GGUF_OK ? copy_tensors(f, w) : st;
}

/* Re-encode a value through the typed calls (not a raw copy). */
static rl_gguf_status retype(rl_gguf_writer *w, const rl_gguf_file *f, const rl_gguf_val *v) {
    uint64_t u;
    int64_t i;
    double d;
    const char *s;
    uint64_t len;
    switch (v->type) {
    case RL_GGUF_TYPE_U8: case RL_GGUF_TYPE_U16: case RL_GGUF_TYPE_U32: case RL_GGUF_TYPE_U64:
    case RL_GGUF_TYPE_BOOL:
        rl_gguf_val_u64(f, v, &u);
        return rl_gguf_w_uint(w, v->type, u);
    case RL_GGUF_TYPE_I8: case RL_GGUF_TYPE_I16: case RL_GGUF_TYPE_I32: case RL_GGUF_TYPE_I64:
        rl_gguf_val_i64(f, v, &i);
        return rl_gguf_w_int(w, v->type, i);
    case RL_GGUF_TYPE_F32: case RL_GGUF_TYPE_F64:
        rl_gguf_val_f64(f, v, &d);
        return rl_gguf_w_float(w, v->type, d);
    case RL_GGUF_TYPE_STRING:
        rl_gguf_val_str(f, v, &s, &len);
        return rl_gguf_w_str(w, s, len);
    case RL_GGUF_TYPE_ARRAY: {
        rl_gguf_status st = rl_gguf_w_array_begin(w, v->elem_type);
        for (uint64_t k = 0; st == RL_GGUF_OK && k < v->count; k++) {
            rl_gguf_val e;
            rl_gguf_array_get(f, v, k, &e);
            st = retype(w, f, &e);
        }
        return st == RL_GGUF_OK ? rl_gguf_w_array_end(w) : st;
    }
    }
    return RL_GGUF_E_TYPE;
}

static void test_round_trips(void) {
    static const char *const canon[] = {
        "q8_main.q8_0.gguf", "q8_f16src.q8_0.gguf", "q8_bf16src.q8_0.gguf",
        "q8_main.f32.gguf",  "q8_f16src.f16.gguf",  "q8_bf16src.bf16.gguf",
        "q8_align64.f32.gguf", "q8_nan.f32.gguf", "q8_overflow.f32.gguf",
        "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-bert-bge.gguf",
        "vocab/ggml-vocab-gpt-2.gguf",
    };
    char out[400], msg[RL_GGUF_MSG_SIZE];
    snprintf(out, sizeof out, "%s/round-trip.gguf", tmpdir);
    for (size_t c = 0; c < sizeof canon / sizeof canon[0]; c++) {
        char path[256];
        snprintf(path, sizeof path, GOLDEN "%s", canon[c]);
        uint64_t size, osz, off;
        uint8_t *orig = slurp(path, &size);
        if (!orig) {
            CHECK_SKIP("%s missing", path);
            continue;
        }
        rl_gguf_file *f = NULL;
        rl_gguf_writer *w = rl_gguf_writer_new();
        rl_gguf_status st = rl_gguf_open(path, &f, msg, sizeof msg, &off);
        if (st == RL_GGUF_OK)
            st = copy_file(f, w);
        if (st == RL_GGUF_OK)
            st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
        uint8_t *back = st == RL_GGUF_OK ? slurp(out, &osz) : NULL;
        CHECK_MSG(back && osz == size && !memcmp(back, orig, size),
                  "%s: written back differs (%s, %s; %" PRIu64 " vs %" PRIu64 " bytes)", canon[c],
                  rl_gguf_status_name(st), st ? msg : "", back ? osz : 0, size);
        free(back);
        rl_gguf_writer_free(w);
        rl_gguf_close(f);
        free(orig);
        unlink(out);
    }

    /* Through the typed calls, into memory: still identical. */
    const char *path = GOLDEN "q8_main.q8_0.gguf";
    uint64_t size, osz, off;
    uint8_t *orig = slurp(path, &size), *back = NULL;
    if (!orig) {
        CHECK_SKIP("%s missing", path);
        return;
    }
    rl_gguf_file *f = NULL;
    rl_gguf_writer *w = rl_gguf_writer_new();
    rl_gguf_status st = rl_gguf_parse(orig, size, &f, msg, sizeof msg, &off);
    if (st == RL_GGUF_OK)
        st = rl_gguf_writer_set_implicit_alignment(w, 1);
    for (uint64_t i = 0; st == RL_GGUF_OK && i < rl_gguf_kv_count(f); i++) {
        uint64_t klen;
        const char *k = rl_gguf_kv_key(f, i, &klen);
        rl_gguf_val v;
        rl_gguf_kv_value(f, i, &v);
        st = rl_gguf_w_key(w, k, klen);
        if (st == RL_GGUF_OK)
            st = retype(w, f, &v);
    }
    if (st == RL_GGUF_OK)
        st = copy_tensors(f, w);
    if (st == RL_GGUF_OK)
        st = rl_gguf_writer_to_memory(w, &back, &osz, msg, sizeof msg, &off);
    CHECK_MSG(st == RL_GGUF_OK && osz == size && !memcmp(back, orig, size),
              "typed re-encoding of q8_main.q8_0.gguf differs (%s)", rl_gguf_status_name(st));
    free(back);
    rl_gguf_writer_free(w);
    rl_gguf_close(f);
    free(orig);
}

/* A file with every value type, written then read back. */
static void test_all_types(void) {
    char out[400], msg[RL_GGUF_MSG_SIZE];
    uint64_t off;
    snprintf(out, sizeof out, "%s/all-types.gguf", tmpdir);
    rl_gguf_writer *w = rl_gguf_writer_new();
    msg[0] = 0;
#define W(call)                                                                    \
    do {                                                                           \
        rl_gguf_status w_ = (call);                                                \
        CHECK_MSG(w_ == RL_GGUF_OK, "%s: %s %s", #call, rl_gguf_status_name(w_), msg); \
    } while (0)
    W(rl_gguf_writer_set_alignment(w, 64));
    W(rl_gguf_w_key(w, "u8", 2));      W(rl_gguf_w_uint(w, RL_GGUF_TYPE_U8, 255));
    W(rl_gguf_w_key(w, "i8", 2));      W(rl_gguf_w_int(w, RL_GGUF_TYPE_I8, -128));
    W(rl_gguf_w_key(w, "u16", 3));     W(rl_gguf_w_uint(w, RL_GGUF_TYPE_U16, 65535));
    W(rl_gguf_w_key(w, "i16", 3));     W(rl_gguf_w_int(w, RL_GGUF_TYPE_I16, -32768));
    W(rl_gguf_w_key(w, "u32", 3));     W(rl_gguf_w_uint(w, RL_GGUF_TYPE_U32, 4294967295u));
    W(rl_gguf_w_key(w, "i32", 3));     W(rl_gguf_w_int(w, RL_GGUF_TYPE_I32, INT32_MIN));
    W(rl_gguf_w_key(w, "u64", 3));     W(rl_gguf_w_uint(w, RL_GGUF_TYPE_U64, UINT64_MAX));
    W(rl_gguf_w_key(w, "i64", 3));     W(rl_gguf_w_int(w, RL_GGUF_TYPE_I64, INT64_MIN));
    W(rl_gguf_w_key(w, "f32", 3));     W(rl_gguf_w_float(w, RL_GGUF_TYPE_F32, (double)0.1f));
    W(rl_gguf_w_key(w, "f64", 3));     W(rl_gguf_w_float(w, RL_GGUF_TYPE_F64, -0.0));
    W(rl_gguf_w_key(w, "inf", 3));     W(rl_gguf_w_float(w, RL_GGUF_TYPE_F64, INFINITY));
    W(rl_gguf_w_key(w, "true", 4));    W(rl_gguf_w_uint(w, RL_GGUF_TYPE_BOOL, 1));
    W(rl_gguf_w_key(w, "empty", 5));   W(rl_gguf_w_str(w, "", 0));
    W(rl_gguf_w_key(w, "nul\n", 4));   W(rl_gguf_w_str(w, "a\0b", 3));
    W(rl_gguf_w_key(w, "no-elems", 8)); W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_F64));
    W(rl_gguf_w_array_end(w));
    W(rl_gguf_w_key(w, "strs", 4));    W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_STRING));
    W(rl_gguf_w_str(w, "", 0));        W(rl_gguf_w_str(w, "xy", 2));
    W(rl_gguf_w_array_end(w));
    W(rl_gguf_w_key(w, "bools", 5));   W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_BOOL));
    W(rl_gguf_w_array_raw(w, "\1\0\1", 3));
    W(rl_gguf_w_array_end(w));
    int16_t i16s[3] = {-1, 0, 32767};
    W(rl_gguf_w_key(w, "i16s", 4));    W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_I16));
    W(rl_gguf_w_array_raw(w, i16s, 3)); W(rl_gguf_w_int(w, RL_GGUF_TYPE_I16, -7));
    W(rl_gguf_w_array_end(w));
    /* [[1, 2], [], [[...8 levels]]] is too mixed for GGUF (one element type
     * per array); nest instead: [[1,2],[]] of i32, and strings two deep. */
    W(rl_gguf_w_key(w, "nested", 6));  W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_ARRAY));
    W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_I32));
    W(rl_gguf_w_int(w, RL_GGUF_TYPE_I32, 1)); W(rl_gguf_w_int(w, RL_GGUF_TYPE_I32, 2));
    W(rl_gguf_w_array_end(w));
    W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_I32)); W(rl_gguf_w_array_end(w));
    W(rl_gguf_w_array_end(w));
    W(rl_gguf_w_key(w, "nested-str", 10)); W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_ARRAY));
    W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_STRING));
    W(rl_gguf_w_str(w, "p", 1)); W(rl_gguf_w_str(w, "", 0));
    W(rl_gguf_w_array_end(w));
    W(rl_gguf_w_array_end(w));
    W(rl_gguf_w_key(w, "deep", 4));
    for (int l = 1; l < RL_GGUF_MAX_ARRAY_DEPTH; l++)
        W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_ARRAY));
    W(rl_gguf_w_array_begin(w, RL_GGUF_TYPE_U8));
    W(rl_gguf_w_uint(w, RL_GGUF_TYPE_U8, 42));
    for (int l = 0; l < RL_GGUF_MAX_ARRAY_DEPTH; l++)
        W(rl_gguf_w_array_end(w));

    float f32[64], f32b[64];
    uint16_t f16[64], bf16[64];
    for (int i = 0; i < 64; i++)
        f32[i] = (float)i * 0.25f - 3.0f;
    rl_gguf_row_from_f32(RL_GGUF_GGML_F16, f32, f16, 64);
    rl_gguf_row_from_f32(RL_GGUF_GGML_BF16, f32, bf16, 64);
    rl_gguf_block_q8_0 q8[2];
    memset(q8, 0, sizeof q8);
    q8[0].d = 0x3c00; /* 1.0 */
    q8[0].qs[0] = -5;
    uint8_t q4k[2 * 144];
    memset(q4k, 0x5a, sizeof q4k);
    int64_t ne_f32[2] = {16, 4}, ne_1d[1] = {64}, ne_q8[2] = {32, 2}, ne_q4k[2] = {256, 2},
            ne_zero[2] = {0, 4}, ne_kept[3] = {64, 1, 1};
    W(rl_gguf_w_tensor(w, "t.f32", 5, 2, ne_f32, RL_GGUF_GGML_F32, f32, sizeof f32));
    W(rl_gguf_w_tensor(w, "t.f16", 5, 1, ne_1d, RL_GGUF_GGML_F16, f16, sizeof f16));
    W(rl_gguf_w_tensor(w, "t.bf16", 6, 1, ne_1d, RL_GGUF_GGML_BF16, bf16, sizeof bf16));
    W(rl_gguf_w_tensor(w, "t.q8_0", 6, 2, ne_q8, RL_GGUF_GGML_Q8_0, q8, sizeof q8));
    W(rl_gguf_w_tensor(w, "t.empty", 7, 2, ne_zero, RL_GGUF_GGML_F32, NULL, 0));
    W(rl_gguf_w_tensor(w, "t.q4_k", 6, 2, ne_q4k, RL_GGUF_GGML_Q4_K, q4k, sizeof q4k));
    W(rl_gguf_w_tensor(w, "t.kept", 6, 3, ne_kept, RL_GGUF_GGML_F32, f32, sizeof f32));
    W(rl_gguf_writer_write(w, out, msg, sizeof msg, &off));
    rl_gguf_writer_free(w);

    rl_gguf_file *f = NULL;
    rl_gguf_status st = rl_gguf_open(out, &f, msg, sizeof msg, &off);
    CHECK_MSG(st == RL_GGUF_OK, "all-types file: %s", msg);
    if (st != RL_GGUF_OK)
        return;
    rl_gguf_val v, e, e2;
    uint64_t u;
    int64_t i;
    double d;
    int b;
    const char *s;
    uint64_t sl;
#define VAL(key) (rl_gguf_kv_value(f, (uint64_t)rl_gguf_find_key(f, key, strlen(key)), &v) == RL_GGUF_OK)
    CHECK((VAL("u8") && v.type == RL_GGUF_TYPE_U8 && !rl_gguf_val_u64(f, &v, &u) && u == 255));
    CHECK((VAL("i8") && v.type == RL_GGUF_TYPE_I8 && !rl_gguf_val_i64(f, &v, &i) && i == -128));
    CHECK((VAL("u16") && v.type == RL_GGUF_TYPE_U16 && !rl_gguf_val_u64(f, &v, &u) && u == 65535));
    CHECK((VAL("i16") && v.type == RL_GGUF_TYPE_I16 && !rl_gguf_val_i64(f, &v, &i) && i == -32768));
    CHECK((VAL("u32") && v.type == RL_GGUF_TYPE_U32 && !rl_gguf_val_u64(f, &v, &u) && u == 4294967295u));
    CHECK((VAL("i32") && v.type == RL_GGUF_TYPE_I32 && !rl_gguf_val_i64(f, &v, &i) && i == INT32_MIN));
    CHECK((VAL("u64") && v.type == RL_GGUF_TYPE_U64 && !rl_gguf_val_u64(f, &v, &u) && u == UINT64_MAX));
    CHECK((VAL("i64") && v.type == RL_GGUF_TYPE_I64 && !rl_gguf_val_i64(f, &v, &i) && i == INT64_MIN));
    CHECK((VAL("f32") && v.type == RL_GGUF_TYPE_F32 && !rl_gguf_val_f64(f, &v, &d) && d == (double)0.1f));
    CHECK((VAL("f64") && v.type == RL_GGUF_TYPE_F64 && !rl_gguf_val_f64(f, &v, &d) && d == 0 && signbit(d)));
    CHECK((VAL("inf") && !rl_gguf_val_f64(f, &v, &d) && d == INFINITY));
    CHECK((VAL("true") && v.type == RL_GGUF_TYPE_BOOL && !rl_gguf_val_bool(f, &v, &b) && b == 1));
    CHECK((VAL("empty") && !rl_gguf_val_str(f, &v, &s, &sl) && sl == 0));
    CHECK((VAL("nul\n") && !rl_gguf_val_str(f, &v, &s, &sl) && sl == 3 && !memcmp(s, "a\0b", 3)));
    CHECK((VAL("no-elems") && v.type == RL_GGUF_TYPE_ARRAY && v.elem_type == RL_GGUF_TYPE_F64 && v.count == 0));
    CHECK((VAL("strs") && v.count == 2 && !rl_gguf_array_get(f, &v, 0, &e) &&
               !rl_gguf_val_str(f, &e, &s, &sl) && sl == 0 && !rl_gguf_array_get(f, &v, 1, &e) &&
               !rl_gguf_val_str(f, &e, &s, &sl) && sl == 2 && !memcmp(s, "xy", 2)));
    const void *raw;
    CHECK((VAL("bools") && v.count == 3 && !rl_gguf_array_data(f, &v, &raw) && !memcmp(raw, "\1\0\1", 3)));
    CHECK((VAL("i16s") && v.count == 4 && !rl_gguf_array_get(f, &v, 3, &e) &&
               !rl_gguf_val_i64(f, &e, &i) && i == -7 && !rl_gguf_array_get(f, &v, 2, &e) &&
               !rl_gguf_val_i64(f, &e, &i) && i == 32767));
    CHECK((VAL("nested") && v.elem_type == RL_GGUF_TYPE_ARRAY && v.count == 2 &&
               !rl_gguf_array_get(f, &v, 0, &e) && e.elem_type == RL_GGUF_TYPE_I32 && e.count == 2 &&
               !rl_gguf_array_get(f, &e, 1, &e2) && !rl_gguf_val_i64(f, &e2, &i) && i == 2 &&
               !rl_gguf_array_get(f, &v, 1, &e) && e.count == 0));
    CHECK((VAL("nested-str") && !rl_gguf_array_get(f, &v, 0, &e) && e.count == 2 &&
               !rl_gguf_array_get(f, &e, 0, &e2) && !rl_gguf_val_str(f, &e2, &s, &sl) && sl == 1 &&
               *s == 'p'));
    if (VAL("deep")) {
        e = v;
        int levels = 1;
        while (e.elem_type == RL_GGUF_TYPE_ARRAY && !rl_gguf_array_get(f, &e, 0, &e2)) {
            e = e2;
            levels++;
        }
        CHECK((levels == RL_GGUF_MAX_ARRAY_DEPTH && !rl_gguf_array_get(f, &e, 0, &e2) &&
                   !rl_gguf_val_u64(f, &e2, &u) && u == 42));
    } else {
        CHECK_MSG(0, "no key deep");
    }
    /* general.alignment was appended last, as a u32. */
    uint64_t last = rl_gguf_kv_count(f) - 1, kl;
    const char *k = rl_gguf_kv_key(f, last, &kl);
    CHECK((k && kl == 17 && !memcmp(k, "general.alignment", 17) &&
               rl_gguf_kv_type(f, last) == RL_GGUF_TYPE_U32 && rl_gguf_alignment(f) == 64));

    /* Tensors: shapes, n_dims as given, bytes, layout. */
    int64_t ti = rl_gguf_find_tensor(f, "t.kept", 6);
    CHECK((ti >= 0 && rl_gguf_tensor_n_dims(f, ti) == 3));
    ti = rl_gguf_find_tensor(f, "t.empty", 7);
    CHECK((ti >= 0 && rl_gguf_tensor_nbytes(f, ti) == 0 && rl_gguf_tensor_ne(f, ti, 0) == 0 &&
              rl_gguf_tensor_nelements(f, ti) == 0));
    ti = rl_gguf_find_tensor(f, "t.q4_k", 6);
    CHECK((ti >= 0 && rl_gguf_tensor_nbytes(f, ti) == 288 &&
              !memcmp(rl_gguf_tensor_data(f, ti), q4k, 288)));
    ti = rl_gguf_find_tensor(f, "t.f16", 5);
    CHECK((ti >= 0 && rl_gguf_row_to_f32(RL_GGUF_GGML_F16, rl_gguf_tensor_data(f, ti), f32b, 64) == 0 &&
              !memcmp(f32, f32b, sizeof f32))); /* these values are exact in f16 */
    ti = rl_gguf_find_tensor(f, "t.bf16", 6);
    CHECK((ti >= 0 && rl_gguf_row_to_f32(RL_GGUF_GGML_BF16, rl_gguf_tensor_data(f, ti), f32b, 64) == 0 &&
              !memcmp(f32, f32b, sizeof f32)));
    ti = rl_gguf_find_tensor(f, "t.q8_0", 6);
    CHECK((ti >= 0 && rl_gguf_row_to_f32(RL_GGUF_GGML_Q8_0, rl_gguf_tensor_data(f, ti), f32b, 64) == 0 &&
              f32b[0] == -5.0f && f32b[1] == 0.0f));
    uint64_t end = rl_gguf_data_offset(f);
    for (uint64_t t = 0; t < rl_gguf_tensor_count(f); t++) {
        CHECK_EACH(rl_gguf_tensor_offset(f, t) % 64 == 0 &&
                       rl_gguf_data_offset(f) + rl_gguf_tensor_offset(f, t) == end, /* packed */
                   "tensor %" PRIu64 " at data offset %" PRIu64 ", expected %" PRIu64 " (aligned to 64)",
                   t, rl_gguf_tensor_offset(f, t), end - rl_gguf_data_offset(f));
        end += (rl_gguf_tensor_nbytes(f, t) + 63) / 64 * 64;
    }
    CHECK_EQ_U(rl_gguf_data_offset(f) % 64, 0);
    CHECK_EQ_U(end, rl_gguf_file_size(f));
    /* The padding is zeros. */
    const uint8_t *base = rl_gguf_bytes(f);
    for (uint64_t p = rl_gguf_header_end(f); p < rl_gguf_data_offset(f); p++)
        CHECK_EACH(base[p] == 0, "padding byte %" PRIu64 ": %02x", p, base[p]);
    rl_gguf_close(f);
    unlink(out);

    /* A file without tensors ends right after its metadata. */
    w = rl_gguf_writer_new();
    uint8_t *mem = NULL;
    uint64_t msz = 0;
    W(rl_gguf_w_key(w, "k", 1));
    W(rl_gguf_w_str(w, "v", 1));
    W(rl_gguf_writer_to_memory(w, &mem, &msz, msg, sizeof msg, &off));
    /* header 24, k=v 8+1+4+8+1 = 22, general.alignment 8+17+4+4 = 33 */
    CHECK_EQ_U(msz, 24 + 22 + 33);
    rl_gguf_writer_free(w);
    free(mem);
#undef W
#undef VAL
}

/* The writer refuses nonsense, and a refused or failed write leaves no
 * file behind. */
static void test_writer_failures(void) {
    char out[400], msg[RL_GGUF_MSG_SIZE];
    uint64_t off;
    float data[8] = {0};
    int64_t ne[1] = {8};

    /* Refusals, each with its own status. */
    struct {
        rl_gguf_status want;
        int which;
    } cases[] = {
        {RL_GGUF_E_KEY_DUPLICATE, 0}, {RL_GGUF_E_KEY_EMPTY, 1},     {RL_GGUF_E_STATE, 2},
        {RL_GGUF_E_TYPE, 3},          {RL_GGUF_E_ARG, 4},           {RL_GGUF_E_BOOL, 5},
        {RL_GGUF_E_ALIGNMENT_TYPE, 6}, {RL_GGUF_E_ALIGNMENT, 7},    {RL_GGUF_E_TENSOR_NAME_LENGTH, 8},
        {RL_GGUF_E_TENSOR_NAME_DUPLICATE, 9}, {RL_GGUF_E_BLOCK_SIZE, 10}, {RL_GGUF_E_ARG, 11},
        {RL_GGUF_E_GGML_TYPE_REMOVED, 12}, {RL_GGUF_E_N_DIMS, 13}, {RL_GGUF_E_STATE, 14},
        {RL_GGUF_E_ARRAY_DEPTH, 15},  {RL_GGUF_E_STATE, 16},
        {RL_GGUF_E_NAME_NUL, 17},     {RL_GGUF_E_NAME_NUL, 18},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rl_gguf_writer *w = rl_gguf_writer_new();
        rl_gguf_w_key(w, "a", 1);
        rl_gguf_w_uint(w, RL_GGUF_TYPE_U8, 1);
        rl_gguf_w_tensor(w, "t", 1, 1, ne, RL_GGUF_GGML_F32, data, sizeof data);
        int64_t ne48[1] = {48};
        switch (cases[c].which) {
        case 0: rl_gguf_w_key(w, "a", 1); break;
        case 1: rl_gguf_w_key(w, "", 0); break;
        case 2: rl_gguf_w_uint(w, RL_GGUF_TYPE_U8, 1); break; /* value without key */
        case 3: rl_gguf_w_key(w, "b", 1); rl_gguf_w_array_begin(w, RL_GGUF_TYPE_U8);
                rl_gguf_w_int(w, RL_GGUF_TYPE_I8, 1); break;
        case 4: rl_gguf_w_key(w, "b", 1); rl_gguf_w_uint(w, RL_GGUF_TYPE_U8, 256); break;
        case 5: rl_gguf_w_key(w, "b", 1); rl_gguf_w_uint(w, RL_GGUF_TYPE_BOOL, 2); break;
        case 6: rl_gguf_w_key(w, "general.alignment", 17); rl_gguf_w_uint(w, RL_GGUF_TYPE_U64, 32); break;
        case 7: rl_gguf_w_key(w, "general.alignment", 17); rl_gguf_w_uint(w, RL_GGUF_TYPE_U32, 24); break;
        case 8: rl_gguf_w_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123",
                                 64, 1, ne, RL_GGUF_GGML_F32, data, sizeof data); break;
        case 9: rl_gguf_w_tensor(w, "t", 1, 1, ne, RL_GGUF_GGML_F32, data, sizeof data); break;
        case 10: rl_gguf_w_tensor(w, "q", 1, 1, ne48, RL_GGUF_GGML_Q8_0, data, 51); break;
        case 11: rl_gguf_w_tensor(w, "u", 1, 1, ne, RL_GGUF_GGML_F32, data, 31); break;
        case 12: rl_gguf_w_tensor(w, "r", 1, 1, ne, 5, data, sizeof data); break;
        case 13: rl_gguf_w_tensor(w, "n", 1, 0, ne, RL_GGUF_GGML_F32, data, sizeof data); break;
        case 14: rl_gguf_w_key(w, "b", 1); break; /* unfinished at write time */
        case 15: rl_gguf_w_key(w, "b", 1);
                 for (int l = 0; l <= RL_GGUF_MAX_ARRAY_DEPTH; l++)
                     rl_gguf_w_array_begin(w, RL_GGUF_TYPE_ARRAY);
                 break;
        case 16: rl_gguf_w_array_end(w); break;
        /* C readers would see "a" (a duplicate) and "t" (a duplicate). */
        case 17: rl_gguf_w_key(w, "a\0b", 3); break;
        case 18: rl_gguf_w_tensor(w, "t\0b", 3, 1, ne, RL_GGUF_GGML_F32, data, sizeof data); break;
        }
        snprintf(out, sizeof out, "%s/refused.gguf", tmpdir);
        rl_gguf_status st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
        char at[64];
        snprintf(at, sizeof at, "at byte %" PRIu64 ":", off);
        CHECK_MSG(st == cases[c].want && access(out, F_OK) != 0 && dir_entries(tmpdir) == 0 &&
                      strstr(msg, at),
                  "writer case %d: got %s (%s), expected %s %s, nothing left behind",
                  cases[c].which, rl_gguf_status_name(st), msg,
                  rl_gguf_status_name(cases[c].want), at);
        /* Sticky: later calls keep failing with the first status. */
        rl_gguf_status later = rl_gguf_w_key(w, "zzz", 3);
        CHECK_MSG(later == cases[c].want, "writer case %d: a later call answered %s",
                  cases[c].which, rl_gguf_status_name(later));
        rl_gguf_writer_free(w);
    }

    rl_gguf_writer *w = rl_gguf_writer_new();
    rl_gguf_w_key(w, "a", 1);
    rl_gguf_w_str(w, "x", 1);
    static uint8_t big[1 << 20];
    int64_t nebig[1] = {sizeof big};
    rl_gguf_w_tensor(w, "big", 3, 1, nebig, RL_GGUF_GGML_I8, big, sizeof big);

    /* A directory that does not exist. */
    snprintf(out, sizeof out, "%s/no-such-dir/x.gguf", tmpdir);
    rl_gguf_status st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
    CHECK(st == RL_GGUF_E_IO && access(out, F_OK) != 0 && dir_entries(tmpdir) == 0);

    /* The target is a directory: refused before anything is written. */
    snprintf(out, sizeof out, "%s/a-dir", tmpdir);
    mkdir(out, 0755);
    st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
    CHECK_MSG(st == RL_GGUF_E_IO && dir_entries(tmpdir) == 1 && dir_entries(out) == 0,
              "rename over a directory: %s: %s", rl_gguf_status_name(st), msg);
    rmdir(out);

    /* The disk fills up (a file size limit): the write fails part way, the
     * old file at the target is untouched, no temporary file remains. */
    snprintf(out, sizeof out, "%s/kept.gguf", tmpdir);
    FILE *old = fopen(out, "wb");
    fputs("old contents", old);
    fclose(old);
    struct rlimit saved, lim;
    getrlimit(RLIMIT_FSIZE, &saved);
    lim = saved;
    lim.rlim_cur = 100000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
        setrlimit(RLIMIT_FSIZE, &saved);
        uint64_t sz;
        uint8_t *kept = slurp(out, &sz);
        CHECK_MSG(st == RL_GGUF_E_IO && kept && sz == 12 && !memcmp(kept, "old contents", 12) &&
                      dir_entries(tmpdir) == 1 && off > 0 && off <= 100000,
                  "full disk: %s: %s", rl_gguf_status_name(st), msg);
        free(kept);
    } else {
        CHECK_SKIP("cannot lower RLIMIT_FSIZE: %s", strerror(errno));
    }
    signal(SIGXFSZ, prev);

    /* A directory without write permission (meaningless for root). */
    if (geteuid() != 0) {
        char ro[400];
        snprintf(ro, sizeof ro, "%s/ro", tmpdir);
        mkdir(ro, 0555);
        snprintf(out, sizeof out, "%s/ro/x.gguf", tmpdir);
        st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
        CHECK(st == RL_GGUF_E_IO && dir_entries(ro) == 0);
        rmdir(ro);
    } else {
        CHECK_SKIP("running as root: the read-only directory case cannot fail");
    }

    /* And after all that the same writer still writes a good file over the
     * old one. */
    snprintf(out, sizeof out, "%s/kept.gguf", tmpdir);
    st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
    rl_gguf_file *f = NULL;
    CHECK(st == RL_GGUF_OK && rl_gguf_open(out, &f, msg, sizeof msg, &off) == RL_GGUF_OK &&
          rl_gguf_tensor_nbytes(f, 0) == sizeof big && dir_entries(tmpdir) == 1);
    rl_gguf_close(f);
    unlink(out);
    rl_gguf_writer_free(w);
}

/* N keys and N tensor names added to a new writer (N at most 300k); the
 * processor seconds it took, and in *ST (CTX) the first status that was not
 * OK. */
static double add_many_names(void *ctx, long n_names) {
    rl_gguf_status *st = ctx;
    static float data[32];
    int64_t ne[1] = {32};
    char name[32];
    rl_gguf_writer *w = rl_gguf_writer_new();
    *st = RL_GGUF_OK;
    double t0 = check_cpu_seconds();
    for (long i = 0; i < n_names && *st == RL_GGUF_OK; i++) {
        int n = snprintf(name, sizeof name, "k.%ld", i);
        *st = rl_gguf_w_key(w, name, (uint64_t)n);
        if (*st == RL_GGUF_OK)
            *st = rl_gguf_w_uint(w, RL_GGUF_TYPE_U32, (uint64_t)i);
    }
    for (long i = 0; i < n_names && *st == RL_GGUF_OK; i++) {
        int n = snprintf(name, sizeof name, "blk.%ld.weight", i);
        *st = rl_gguf_w_tensor(w, name, (uint64_t)n, 1, ne, RL_GGUF_GGML_F32, data, sizeof data);
    }
    double sec = check_cpu_seconds() - t0;
    rl_gguf_writer_free(w);
    return sec;
}

/* 300k keys and 300k tensor names: duplicates are still found (the first,
 * the last, one in the middle) and the additions take about linear time:
 * ten times the names take less than 75 times as long as 30k (measured: 15
 * to 50, the caches' and the allocator's share growing).  A linear scan per
 * addition, as the writer once had, makes 4.5e10 name comparisons here
 * (minutes), 100 times those of 30k; hashed, it is a fraction of a
 * second. */
static void test_many_names_linear(void) {
    enum { N = 300000 };
    static float data[32];
    int64_t ne[1] = {32};
    char name[32];
    rl_gguf_writer *w;
    rl_gguf_status st = RL_GGUF_OK;
    CHECK_GROWTH("adding keys and tensor names", add_many_names, &st, N / 10, N, 75);
    CHECK_EQ_U(st, RL_GGUF_OK);

    static const char *const dup_keys[] = {"k.0", "k.150000", "k.299999"};
    static const char *const dup_names[] = {"blk.0.weight", "blk.150000.weight",
                                            "blk.299999.weight"};
    for (int d = 0; d < 3; d++) {
        w = rl_gguf_writer_new();
        st = RL_GGUF_OK;
        for (int i = 0; i < N && st == RL_GGUF_OK; i++) {
            int n = snprintf(name, sizeof name, "k.%d", i);
            st = rl_gguf_w_key(w, name, (uint64_t)n);
            if (st == RL_GGUF_OK)
                st = rl_gguf_w_uint(w, RL_GGUF_TYPE_U32, (uint64_t)i);
        }
        CHECK_EQ_U(st, RL_GGUF_OK);
        CHECK_EQ_U(rl_gguf_w_key(w, dup_keys[d], strlen(dup_keys[d])), RL_GGUF_E_KEY_DUPLICATE);
        rl_gguf_writer_free(w);
        w = rl_gguf_writer_new();
        st = RL_GGUF_OK;
        for (int i = 0; i < N && st == RL_GGUF_OK; i++) {
            int n = snprintf(name, sizeof name, "blk.%d.weight", i);
            st = rl_gguf_w_tensor(w, name, (uint64_t)n, 1, ne, RL_GGUF_GGML_F32, data, sizeof data);
        }
        CHECK_EQ_U(st, RL_GGUF_OK);
        /* a prefix of a name is not a duplicate (errors are sticky: first) */
        CHECK_EQ_U(rl_gguf_w_tensor(w, "blk.1.weigh", 11, 1, ne, RL_GGUF_GGML_F32, data,
                                    sizeof data),
                   RL_GGUF_OK);
        CHECK_EQ_U(rl_gguf_w_tensor(w, dup_names[d], strlen(dup_names[d]), 1, ne, RL_GGUF_GGML_F32,
                                    data, sizeof data),
                   RL_GGUF_E_TENSOR_NAME_DUPLICATE);
        rl_gguf_writer_free(w);
    }
}

/* F's keys, and its tensors: the odd ones deferred when DEFER. */
static rl_gguf_writer *stream_writer(const rl_gguf_file *f, int defer) {
    rl_gguf_writer *w = rl_gguf_writer_new();
    for (uint64_t i = 0; i < rl_gguf_kv_count(f); i++)
        rl_gguf_w_copy_kv(w, f, i);
    for (uint64_t i = 0; i < rl_gguf_tensor_count(f); i++) {
        uint64_t nlen;
        const char *n = rl_gguf_tensor_name(f, i, &nlen);
        int64_t ne[4];
        for (uint32_t d = 0; d < 4; d++)
            ne[d] = rl_gguf_tensor_ne(f, i, d);
        if (defer && i % 2)
            rl_gguf_w_tensor_deferred(w, n, nlen, rl_gguf_tensor_n_dims(f, i), ne,
                                      rl_gguf_tensor_type(f, i));
        else
            rl_gguf_w_tensor(w, n, nlen, rl_gguf_tensor_n_dims(f, i), ne,
                             rl_gguf_tensor_type(f, i), rl_gguf_tensor_data(f, i),
                             rl_gguf_tensor_nbytes(f, i));
    }
    return w;
}

/* The deferred tensors' bytes in pieces of PIECE bytes; the status of the
 * last put. */
static rl_gguf_status stream_tensors(const rl_gguf_file *f, rl_gguf_writer *w, uint64_t piece) {
    char msg[RL_GGUF_MSG_SIZE];
    rl_gguf_status st = RL_GGUF_OK;
    for (uint64_t i = 1; st == RL_GGUF_OK && i < rl_gguf_tensor_count(f); i += 2) {
        const uint8_t *p = rl_gguf_tensor_data(f, i);
        uint64_t n = rl_gguf_tensor_nbytes(f, i);
        for (uint64_t k = 0; st == RL_GGUF_OK && k < n; k += piece)
            st = rl_gguf_writer_stream_put(w, p + k, n - k < piece ? n - k : piece, msg,
                                           sizeof msg, NULL);
    }
    return st;
}

static void test_streaming(void) {
    char msg[RL_GGUF_MSG_SIZE], out[512];
    uint64_t off;
    rl_gguf_file *f = NULL;
    snprintf(out, sizeof out, "%s/stream.gguf", tmpdir);
    if (rl_gguf_open(GOLDEN "q8_main.q8_0.gguf", &f, msg, sizeof msg, &off) != RL_GGUF_OK) {
        CHECK_MSG(0, "%s", msg);
        return;
    }
    /* The reference: every tensor given, written to memory. */
    rl_gguf_writer *w = stream_writer(f, 0);
    uint8_t *ref = NULL;
    uint64_t ref_size = 0;
    CHECK(rl_gguf_writer_to_memory(w, &ref, &ref_size, msg, sizeof msg, &off) == RL_GGUF_OK);
    rl_gguf_writer_free(w);
    static const uint64_t pieces[] = {1, 7, 34, 1 << 20};
    for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
        w = stream_writer(f, 1);
        CHECK(rl_gguf_writer_write(w, out, msg, sizeof msg, &off) == RL_GGUF_E_STATE);
        rl_gguf_writer_free(w);
        w = stream_writer(f, 1);
        CHECK(rl_gguf_writer_stream_begin(w, out, msg, sizeof msg, &off) == RL_GGUF_OK);
        CHECK(rl_gguf_w_tensor_deferred(w, "late", 4, 1, (int64_t[]){32}, RL_GGUF_GGML_F32) ==
              RL_GGUF_E_STATE);
        CHECK(stream_tensors(f, w, pieces[k]) == RL_GGUF_OK);
        CHECK(rl_gguf_writer_stream_end(w, msg, sizeof msg, &off) == RL_GGUF_OK);
        rl_gguf_writer_free(w);
        uint8_t *got = NULL;
        uint64_t got_size = 0;
        CHECK(rl_gguf_read_file(out, "GGUF file", &got, &got_size, msg, sizeof msg) == 0);
        CHECK_MSG(got && got_size == ref_size && memcmp(got, ref, ref_size) == 0,
                  "streamed in pieces of %" PRIu64 ": not the file written in one go", pieces[k]);
        free(got);
        unlink(out);
    }
    /* Too many bytes, too few, and a stream freed open: nothing left. */
    w = stream_writer(f, 1);
    rl_gguf_writer_stream_begin(w, out, msg, sizeof msg, &off);
    CHECK(stream_tensors(f, w, 1 << 20) == RL_GGUF_OK);
    CHECK(rl_gguf_writer_stream_put(w, "x", 1, msg, sizeof msg, &off) == RL_GGUF_E_ARG);
    rl_gguf_writer_stream_abort(w);
    CHECK(access(out, F_OK) != 0 && dir_entries(tmpdir) == 0);
    rl_gguf_writer_free(w);
    w = stream_writer(f, 1);
    rl_gguf_writer_stream_begin(w, out, msg, sizeof msg, &off);
    CHECK(rl_gguf_writer_stream_put(w, rl_gguf_tensor_data(f, 1), rl_gguf_tensor_nbytes(f, 1) + 1,
                                    msg, sizeof msg, &off) == RL_GGUF_E_ARG);
    CHECK(rl_gguf_writer_stream_put(w, rl_gguf_tensor_data(f, 1), 3, msg, sizeof msg, &off) ==
          RL_GGUF_OK);
    CHECK(rl_gguf_writer_stream_end(w, msg, sizeof msg, &off) == RL_GGUF_E_STATE);
    CHECK(strstr(msg, "has 3 of its") != NULL);
    CHECK(access(out, F_OK) != 0 && dir_entries(tmpdir) == 0);
    rl_gguf_writer_free(w);
    w = stream_writer(f, 1);
    rl_gguf_writer_stream_begin(w, out, msg, sizeof msg, &off);
    CHECK(dir_entries(tmpdir) == 1);
    rl_gguf_writer_free(w);
    CHECK(access(out, F_OK) != 0 && dir_entries(tmpdir) == 0);
    free(ref);
    rl_gguf_close(f);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/rl-test-write.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    rl_gguf_writer_free(NULL);
    CHECK_CASE(test_round_trips());
    CHECK_CASE(test_all_types());
    CHECK_CASE(test_writer_failures());
    CHECK_CASE(test_many_names_linear());
    CHECK_CASE(test_streaming());
    rmdir(tmpdir);
    return check_report("write");
}
