/* test_gguf.c - the GGUF reader, writer and type table (gguf/gguf.h).
 *
 * - Every golden file reads, and agrees field by field with its gguf-py JSON
 *   dump (counts, offsets, every key and value, every tensor's shape, type,
 *   offset, size and the SHA-256 of its bytes); q8_align64.q8_0.gguf, which
 *   llama-quantize laid out wrongly, is refused as llama.cpp refuses it.
 * - Canonical files read and written back come out byte for byte identical.
 * - A file with every value type (nested and empty arrays, empty strings)
 *   reads back equal; the layout rules hold.
 * - A failing write leaves neither the target nor a temporary file.
 * - Every file in tests/bad/ is refused with the status and byte offset its
 *   MANIFEST names, from a path and from memory; every truncation of a
 *   golden file is refused; random damage never breaks the invariants.
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
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/numfmt.h"
#include "tests/c/check.h"
#include "tests/c/support/json.h"
#include "tests/c/support/sha256.h"
#include "tests/c/testutil.h"

#define GOLDEN "tests/golden/"
#define BAD "tests/bad/"

/* ------------------------------------------------------------- utilities */


static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

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

/* ------------------------------------------------------------ JSON */

static uint64_t ju64(const json_t *j) {
    uint64_t v;
    return rl_test_json_u64(j, &v) ? v : ~0ull;
}

static int64_t ji64(const json_t *j) {
    return json_is_integer(j) ? (int64_t)json_integer_value(j) : INT64_MIN;
}

static const char *jstr(const json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* --------------------------------------------- comparing with the JSON */

/* One value of the file against one JSON value; 1 if equal. */
static int value_matches(const rl_gguf_file *f, const rl_gguf_val *v, const json_t *j) {
    uint64_t u, ju;
    int64_t i;
    double d;
    int b;
    const char *s;
    uint64_t len;
    if (!j)
        return 0;
    switch (v->type) {
    case RL_GGUF_TYPE_U8: case RL_GGUF_TYPE_U16: case RL_GGUF_TYPE_U32: case RL_GGUF_TYPE_U64:
        return rl_gguf_val_u64(f, v, &u) == RL_GGUF_OK && rl_test_json_u64(j, &ju) && u == ju;
    case RL_GGUF_TYPE_I8: case RL_GGUF_TYPE_I16: case RL_GGUF_TYPE_I32: case RL_GGUF_TYPE_I64:
        return rl_gguf_val_i64(f, v, &i) == RL_GGUF_OK && json_is_integer(j) &&
               i == (int64_t)json_integer_value(j);
    case RL_GGUF_TYPE_F32: case RL_GGUF_TYPE_F64:
        if (rl_gguf_val_f64(f, v, &d) != RL_GGUF_OK)
            return 0;
        if (json_is_string(j))
            return (isnan(d) && !strcmp(json_string_value(j), "nan")) ||
                   (d == INFINITY && !strcmp(json_string_value(j), "inf")) ||
                   (d == -INFINITY && !strcmp(json_string_value(j), "-inf"));
        return json_is_number(j) && d == json_number_value(j);
    case RL_GGUF_TYPE_BOOL:
        return rl_gguf_val_bool(f, v, &b) == RL_GGUF_OK && json_is_boolean(j) &&
               b == json_is_true(j);
    case RL_GGUF_TYPE_STRING:
        return rl_gguf_val_str(f, v, &s, &len) == RL_GGUF_OK && json_is_string(j) &&
               len == json_string_length(j) && memcmp(s, json_string_value(j), len) == 0;
    default:
        return 0;
    }
}

static int array_matches(const rl_gguf_file *f, const rl_gguf_val *v, const json_t *kv) {
    if (v->elem_type != ju64(json_object_get(kv, "array_type_id")) ||
        v->count != ju64(json_object_get(kv, "length")))
        return 0;
    const json_t *all = json_object_get(kv, "values"), *head = json_object_get(kv, "head"),
                 *tail = json_object_get(kv, "tail");
    rl_gguf_val e;
    if (all) {
        if (json_array_size(all) != v->count)
            return 0;
        for (uint64_t k = 0; k < v->count; k++)
            if (rl_gguf_array_get(f, v, k, &e) != RL_GGUF_OK ||
                !value_matches(f, &e, json_array_get(all, k)))
                return 0;
        return 1;
    }
    size_t nhead = json_array_size(head), ntail = json_array_size(tail);
    if (!json_is_array(head) || !json_is_array(tail) || nhead > v->count || ntail > v->count)
        return 0;
    for (uint64_t k = 0; k < nhead; k++)
        if (rl_gguf_array_get(f, v, k, &e) != RL_GGUF_OK ||
            !value_matches(f, &e, json_array_get(head, k)))
            return 0;
    for (uint64_t k = 0; k < ntail; k++)
        if (rl_gguf_array_get(f, v, v->count - ntail + k, &e) != RL_GGUF_OK ||
            !value_matches(f, &e, json_array_get(tail, k)))
            return 0;
    return 1;
}

/* The golden file NAME against NAME.json: header, metadata, tensors. */
static void check_golden(const char *name) {
    char path[512], jpath[512];
    snprintf(path, sizeof path, GOLDEN "%s", name);
    snprintf(jpath, sizeof jpath, GOLDEN "%s.json", name);
    uint64_t fsz;
    uint8_t *bytes = slurp(path, &fsz);
    if (!bytes || !exists(jpath)) {
        CHECK_SKIP("%s or its JSON dump is missing", path);
        free(bytes);
        return;
    }
    json_t *doc = rl_test_json_load(jpath);
    CHECK_MSG(doc, "%s: JSON dump unreadable", jpath);

    rl_gguf_file *f = NULL;
    char msg[RL_GGUF_MSG_SIZE] = "";
    uint64_t off = 0;
    rl_gguf_status st = rl_gguf_open(path, &f, msg, sizeof msg, &off);
    CHECK_MSG(st == RL_GGUF_OK, "%s: %s: %s", name, rl_gguf_status_name(st), msg);
    if (st != RL_GGUF_OK || !doc) {
        rl_gguf_close(f);
        json_decref(doc);
        free(bytes);
        return;
    }
    char hex[65];
    rl_test_sha256_hex(bytes, fsz, hex);
    CHECK_MSG(rl_gguf_file_size(f) == ju64(json_object_get(doc, "file_size")) &&
                  rl_gguf_version(f) == ju64(json_object_get(doc, "version")) &&
                  rl_gguf_tensor_count(f) == ju64(json_object_get(doc, "tensor_count")) &&
                  rl_gguf_kv_count(f) == ju64(json_object_get(doc, "kv_count")) &&
                  rl_gguf_alignment(f) == ju64(json_object_get(doc, "alignment")) &&
                  rl_gguf_data_offset(f) == ju64(json_object_get(doc, "data_offset")) &&
                  !strcmp(jstr(doc, "sha256"), hex),
              "%s: header facts differ from the JSON dump", name);

    const json_t *kvs = json_object_get(doc, "kv");
    long bad_kv = json_is_array(kvs) && json_array_size(kvs) == rl_gguf_kv_count(f) ? 0 : 1;
    for (uint64_t i = 0; !bad_kv && i < json_array_size(kvs); i++) {
        const json_t *kv = json_array_get(kvs, i);
        const json_t *key = json_object_get(kv, "key");
        uint64_t klen;
        const char *k = rl_gguf_kv_key(f, i, &klen);
        rl_gguf_val v;
        rl_gguf_kv_value(f, i, &v);
        int ok = json_is_string(key) && k && klen == json_string_length(key) &&
                 !memcmp(k, json_string_value(key), klen) &&
                 (uint64_t)rl_gguf_kv_type(f, i) == ju64(json_object_get(kv, "type_id")) &&
                 rl_gguf_find_key(f, k, klen) == (int64_t)i;
        if (ok)
            ok = v.type == RL_GGUF_TYPE_ARRAY ? array_matches(f, &v, kv)
                                              : value_matches(f, &v, json_object_get(kv, "value"));
        if (!ok) {
            bad_kv++;
            fprintf(stderr, "%s: key %" PRIu64 " (%s) differs from the JSON dump\n", name, i,
                    json_is_string(key) ? json_string_value(key) : "?");
        }
    }
    CHECK_MSG(bad_kv == 0, "%s: %ld keys differ from the JSON dump", name, bad_kv);

    const json_t *ts = json_object_get(doc, "tensors");
    long bad_t = json_is_array(ts) && json_array_size(ts) == rl_gguf_tensor_count(f) ? 0 : 1;
    for (uint64_t i = 0; !bad_t && i < json_array_size(ts); i++) {
        const json_t *t = json_array_get(ts, i);
        const json_t *nm = json_object_get(t, "name"), *ne = json_object_get(t, "ne");
        uint64_t nlen;
        const char *n = rl_gguf_tensor_name(f, i, &nlen);
        int ok = json_is_string(nm) && n && nlen == json_string_length(nm) &&
                 !memcmp(n, json_string_value(nm), nlen) &&
                 rl_gguf_find_tensor(f, n, nlen) == (int64_t)i &&
                 rl_gguf_tensor_n_dims(f, i) == ju64(json_object_get(t, "n_dims")) &&
                 json_is_array(ne) && json_array_size(ne) == rl_gguf_tensor_n_dims(f, i) &&
                 rl_gguf_tensor_type(f, i) == ju64(json_object_get(t, "type_id")) &&
                 !strcmp(rl_gguf_ggml_type_name(rl_gguf_tensor_type(f, i)), jstr(t, "type_name")) &&
                 rl_gguf_tensor_offset(f, i) == ju64(json_object_get(t, "offset")) &&
                 rl_gguf_tensor_nbytes(f, i) == ju64(json_object_get(t, "nbytes"));
        for (size_t d = 0; ok && d < json_array_size(ne); d++)
            ok = rl_gguf_tensor_ne(f, i, (uint32_t)d) == ji64(json_array_get(ne, d));
        if (ok) {
            rl_test_sha256_hex(rl_gguf_tensor_data(f, i), rl_gguf_tensor_nbytes(f, i), hex);
            ok = !strcmp(jstr(t, "sha256"), hex);
        }
        if (!ok) {
            bad_t++;
            fprintf(stderr, "%s: tensor %" PRIu64 " differs from the JSON dump\n", name, i);
        }
    }
    CHECK_MSG(bad_t == 0, "%s: %ld tensors differ from the JSON dump", name, bad_t);
    rl_gguf_close(f);
    json_decref(doc);
    free(bytes);
}

static const char *const golden_ok[] = {
    "q8_main.f32.gguf",     "q8_main.q8_0.gguf",     "q8_f16src.f16.gguf",
    "q8_f16src.q8_0.gguf",  "q8_bf16src.bf16.gguf",  "q8_bf16src.q8_0.gguf",
    "q8_overflow.f32.gguf", "q8_nan.f32.gguf",       "q8_align64.f32.gguf",
    "vocab/ggml-vocab-bert-bge.gguf", "vocab/ggml-vocab-deepseek-coder.gguf",
    "vocab/ggml-vocab-falcon.gguf",   "vocab/ggml-vocab-gpt-2.gguf",
    "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-starcoder.gguf",
};
#define N_GOLDEN (sizeof golden_ok / sizeof golden_ok[0])

/* Facts from the golden README, checked by hand as well. */
static void test_golden_facts(void) {
    rl_gguf_file *f;
    char msg[RL_GGUF_MSG_SIZE];
    uint64_t off;
    if (!exists(GOLDEN "q8_main.q8_0.gguf")) {
        CHECK_SKIP("q8_main.q8_0.gguf missing");
        return;
    }
    if (rl_gguf_open(GOLDEN "q8_main.q8_0.gguf", &f, msg, sizeof msg, &off) != RL_GGUF_OK) {
        CHECK_MSG(0, "q8_main.q8_0.gguf: %s", msg);
        return;
    }
    CHECK_EQ_U(rl_gguf_data_offset(f), 1888);
    CHECK(rl_gguf_kv_count(f) == 24 && rl_gguf_tensor_count(f) == 17);
    /* The last two keys are the two llama-quantize appends. */
    rl_gguf_val v;
    uint64_t u, klen;
    const char *k = rl_gguf_kv_key(f, 22, &klen);
    CHECK(k && klen == 28 && !memcmp(k, "general.quantization_version", 28) &&
          rl_gguf_kv_value(f, 22, &v) == RL_GGUF_OK && rl_gguf_val_u64(f, &v, &u) == RL_GGUF_OK &&
          u == 2);
    int64_t fi = rl_gguf_find_key(f, "general.file_type", 17);
    CHECK(fi == 23 && rl_gguf_kv_value(f, 23, &v) == RL_GGUF_OK &&
          rl_gguf_val_u64(f, &v, &u) == RL_GGUF_OK && u == 7);
    int64_t te = rl_gguf_find_tensor(f, "token_embd.weight", 17);
    CHECK(te >= 0 && rl_gguf_tensor_type(f, te) == RL_GGUF_GGML_Q8_0 &&
          rl_gguf_tensor_ne(f, te, 0) == 256 && rl_gguf_tensor_ne(f, te, 1) == 16 &&
          rl_gguf_tensor_ne(f, te, 2) == 1 && rl_gguf_tensor_nbytes(f, te) == 4352 &&
          rl_gguf_tensor_offset(f, te) == 800);
    /* A 1 x 64 input comes out 1-D [64] (n_dims as ggml_n_dims). */
    int64_t one = rl_gguf_find_tensor(f, "blk.0.one_row.weight", 20);
    CHECK(one >= 0 && rl_gguf_tensor_n_dims(f, one) == 1 && rl_gguf_tensor_ne(f, one, 0) == 64);
    /* Every tensor starts on the alignment; the file ends after the last
     * padded tensor. */
    uint64_t end = 0;
    long bad = 0;
    for (uint64_t i = 0; i < rl_gguf_tensor_count(f); i++) {
        bad += rl_gguf_tensor_offset(f, i) % 32 != 0;
        bad += ((uintptr_t)rl_gguf_tensor_data(f, i) - (uintptr_t)rl_gguf_bytes(f)) % 32 != 0;
        uint64_t e = rl_gguf_tensor_offset(f, i) + (rl_gguf_tensor_nbytes(f, i) + 31) / 32 * 32;
        if (e > end)
            end = e;
    }
    CHECK(bad == 0 && rl_gguf_data_offset(f) + end == rl_gguf_file_size(f));
    /* Q8_0 dequantization of the first block of token_embd, by hand. */
    const uint8_t *blk = rl_gguf_tensor_data(f, te);
    float row[32];
    uint16_t d16 = (uint16_t)(blk[0] | blk[1] << 8);
    long badq = rl_gguf_row_to_f32(RL_GGUF_GGML_Q8_0, blk, row, 32) != RL_GGUF_OK;
    for (int j = 0; j < 32; j++)
        badq += row[j] != (float)(int8_t)blk[2 + j] * rl_gguf_f16_to_f32(d16);
    CHECK(badq == 0);
    /* Strings: the UTF-8 test string, byte for byte. */
    int64_t si = rl_gguf_find_key(f, "test.string", 11);
    const char *s;
    uint64_t sl;
    CHECK(si >= 0 && rl_gguf_kv_value(f, si, &v) == RL_GGUF_OK &&
          rl_gguf_val_str(f, &v, &s, &sl) == RL_GGUF_OK && sl == strlen("h\xc3\xa9llo, GGUF \xe2\x9c\x93") &&
          !memcmp(s, "h\xc3\xa9llo, GGUF \xe2\x9c\x93", sl));
    rl_gguf_close(f);

    /* The broken llama-quantize output is refused as llama.cpp refuses it:
     * tensor blk.0.c_2x96.weight, offset 480, alignment 64. */
    if (!exists(GOLDEN "q8_align64.q8_0.gguf")) {
        CHECK_SKIP("q8_align64.q8_0.gguf missing");
        return;
    }
    f = NULL;
    rl_gguf_status st = rl_gguf_open(GOLDEN "q8_align64.q8_0.gguf", &f, msg, sizeof msg, &off);
    CHECK_MSG(st == RL_GGUF_E_TENSOR_ALIGNMENT && !f && strstr(msg, "'blk.0.c_2x96.weight'") &&
                  strstr(msg, "offset 480") && strstr(msg, "alignment 64"),
              "q8_align64.q8_0.gguf: %s: %s", rl_gguf_status_name(st), msg);
    char at[64];
    snprintf(at, sizeof at, "at byte %" PRIu64 ":", off);
    CHECK(strstr(msg, at) == msg);
}

/* --------------------------------------------------------------- writing */

static char tmpdir[256];

static rl_gguf_status copy_file(const rl_gguf_file *f, rl_gguf_writer *w) {
    rl_gguf_status st = RL_GGUF_OK;
    if (rl_gguf_find_key(f, "general.alignment", 17) < 0)
        st = rl_gguf_writer_set_implicit_alignment(w, 1);
    for (uint64_t i = 0; st == RL_GGUF_OK && i < rl_gguf_kv_count(f); i++)
        st = rl_gguf_w_copy_kv(w, f, i);
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
    if (st == RL_GGUF_OK) {
        rl_gguf_writer *w2 = rl_gguf_writer_new();
        rl_gguf_status st2 = copy_file(f, w2); /* only for the tensors below */
        (void)st2;
        rl_gguf_writer_free(w2);
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
    }
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
    long bad = 0;
#define W(call) bad += (call) != RL_GGUF_OK
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
    CHECK_MSG(bad == 0, "%ld writer calls failed: %s", bad, msg);
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
    long wrong = 0;
    wrong += !(VAL("u8") && v.type == RL_GGUF_TYPE_U8 && !rl_gguf_val_u64(f, &v, &u) && u == 255);
    wrong += !(VAL("i8") && v.type == RL_GGUF_TYPE_I8 && !rl_gguf_val_i64(f, &v, &i) && i == -128);
    wrong += !(VAL("u16") && v.type == RL_GGUF_TYPE_U16 && !rl_gguf_val_u64(f, &v, &u) && u == 65535);
    wrong += !(VAL("i16") && v.type == RL_GGUF_TYPE_I16 && !rl_gguf_val_i64(f, &v, &i) && i == -32768);
    wrong += !(VAL("u32") && v.type == RL_GGUF_TYPE_U32 && !rl_gguf_val_u64(f, &v, &u) && u == 4294967295u);
    wrong += !(VAL("i32") && v.type == RL_GGUF_TYPE_I32 && !rl_gguf_val_i64(f, &v, &i) && i == INT32_MIN);
    wrong += !(VAL("u64") && v.type == RL_GGUF_TYPE_U64 && !rl_gguf_val_u64(f, &v, &u) && u == UINT64_MAX);
    wrong += !(VAL("i64") && v.type == RL_GGUF_TYPE_I64 && !rl_gguf_val_i64(f, &v, &i) && i == INT64_MIN);
    wrong += !(VAL("f32") && v.type == RL_GGUF_TYPE_F32 && !rl_gguf_val_f64(f, &v, &d) && d == (double)0.1f);
    wrong += !(VAL("f64") && v.type == RL_GGUF_TYPE_F64 && !rl_gguf_val_f64(f, &v, &d) && d == 0 && signbit(d));
    wrong += !(VAL("inf") && !rl_gguf_val_f64(f, &v, &d) && d == INFINITY);
    wrong += !(VAL("true") && v.type == RL_GGUF_TYPE_BOOL && !rl_gguf_val_bool(f, &v, &b) && b == 1);
    wrong += !(VAL("empty") && !rl_gguf_val_str(f, &v, &s, &sl) && sl == 0);
    wrong += !(VAL("nul\n") && !rl_gguf_val_str(f, &v, &s, &sl) && sl == 3 && !memcmp(s, "a\0b", 3));
    wrong += !(VAL("no-elems") && v.type == RL_GGUF_TYPE_ARRAY && v.elem_type == RL_GGUF_TYPE_F64 && v.count == 0);
    wrong += !(VAL("strs") && v.count == 2 && !rl_gguf_array_get(f, &v, 0, &e) &&
               !rl_gguf_val_str(f, &e, &s, &sl) && sl == 0 && !rl_gguf_array_get(f, &v, 1, &e) &&
               !rl_gguf_val_str(f, &e, &s, &sl) && sl == 2 && !memcmp(s, "xy", 2));
    const void *raw;
    wrong += !(VAL("bools") && v.count == 3 && !rl_gguf_array_data(f, &v, &raw) && !memcmp(raw, "\1\0\1", 3));
    wrong += !(VAL("i16s") && v.count == 4 && !rl_gguf_array_get(f, &v, 3, &e) &&
               !rl_gguf_val_i64(f, &e, &i) && i == -7 && !rl_gguf_array_get(f, &v, 2, &e) &&
               !rl_gguf_val_i64(f, &e, &i) && i == 32767);
    wrong += !(VAL("nested") && v.elem_type == RL_GGUF_TYPE_ARRAY && v.count == 2 &&
               !rl_gguf_array_get(f, &v, 0, &e) && e.elem_type == RL_GGUF_TYPE_I32 && e.count == 2 &&
               !rl_gguf_array_get(f, &e, 1, &e2) && !rl_gguf_val_i64(f, &e2, &i) && i == 2 &&
               !rl_gguf_array_get(f, &v, 1, &e) && e.count == 0);
    wrong += !(VAL("nested-str") && !rl_gguf_array_get(f, &v, 0, &e) && e.count == 2 &&
               !rl_gguf_array_get(f, &e, 0, &e2) && !rl_gguf_val_str(f, &e2, &s, &sl) && sl == 1 &&
               *s == 'p');
    if (VAL("deep")) {
        e = v;
        int levels = 1;
        while (e.elem_type == RL_GGUF_TYPE_ARRAY && !rl_gguf_array_get(f, &e, 0, &e2)) {
            e = e2;
            levels++;
        }
        wrong += !(levels == RL_GGUF_MAX_ARRAY_DEPTH && !rl_gguf_array_get(f, &e, 0, &e2) &&
                   !rl_gguf_val_u64(f, &e2, &u) && u == 42);
    } else {
        wrong++;
    }
    /* general.alignment was appended last, as a u32. */
    uint64_t last = rl_gguf_kv_count(f) - 1, kl;
    const char *k = rl_gguf_kv_key(f, last, &kl);
    wrong += !(k && kl == 17 && !memcmp(k, "general.alignment", 17) &&
               rl_gguf_kv_type(f, last) == RL_GGUF_TYPE_U32 && rl_gguf_alignment(f) == 64);
    CHECK_MSG(wrong == 0, "%ld values read back wrong", wrong);

    /* Tensors: shapes, n_dims as given, bytes, layout. */
    long tbad = 0;
    int64_t ti = rl_gguf_find_tensor(f, "t.kept", 6);
    tbad += !(ti >= 0 && rl_gguf_tensor_n_dims(f, ti) == 3);
    ti = rl_gguf_find_tensor(f, "t.empty", 7);
    tbad += !(ti >= 0 && rl_gguf_tensor_nbytes(f, ti) == 0 && rl_gguf_tensor_ne(f, ti, 0) == 0 &&
              rl_gguf_tensor_nelements(f, ti) == 0);
    ti = rl_gguf_find_tensor(f, "t.q4_k", 6);
    tbad += !(ti >= 0 && rl_gguf_tensor_nbytes(f, ti) == 288 &&
              !memcmp(rl_gguf_tensor_data(f, ti), q4k, 288));
    ti = rl_gguf_find_tensor(f, "t.f16", 5);
    tbad += !(ti >= 0 && rl_gguf_row_to_f32(RL_GGUF_GGML_F16, rl_gguf_tensor_data(f, ti), f32b, 64) == 0 &&
              !memcmp(f32, f32b, sizeof f32)); /* these values are exact in f16 */
    ti = rl_gguf_find_tensor(f, "t.bf16", 6);
    tbad += !(ti >= 0 && rl_gguf_row_to_f32(RL_GGUF_GGML_BF16, rl_gguf_tensor_data(f, ti), f32b, 64) == 0 &&
              !memcmp(f32, f32b, sizeof f32));
    ti = rl_gguf_find_tensor(f, "t.q8_0", 6);
    tbad += !(ti >= 0 && rl_gguf_row_to_f32(RL_GGUF_GGML_Q8_0, rl_gguf_tensor_data(f, ti), f32b, 64) == 0 &&
              f32b[0] == -5.0f && f32b[1] == 0.0f);
    uint64_t end = rl_gguf_data_offset(f);
    for (uint64_t t = 0; t < rl_gguf_tensor_count(f); t++) {
        tbad += rl_gguf_tensor_offset(f, t) % 64 != 0;
        tbad += rl_gguf_data_offset(f) + rl_gguf_tensor_offset(f, t) != end; /* packed, in order */
        end += (rl_gguf_tensor_nbytes(f, t) + 63) / 64 * 64;
    }
    tbad += rl_gguf_data_offset(f) % 64 != 0 || end != rl_gguf_file_size(f);
    /* The padding is zeros. */
    const uint8_t *base = rl_gguf_bytes(f);
    for (uint64_t p = rl_gguf_header_end(f); p < rl_gguf_data_offset(f); p++)
        tbad += base[p] != 0;
    CHECK_MSG(tbad == 0, "%ld tensor or layout facts wrong", tbad);
    rl_gguf_close(f);
    unlink(out);

    /* A file without tensors ends right after its metadata. */
    w = rl_gguf_writer_new();
    uint8_t *mem = NULL;
    uint64_t msz = 0;
    bad = 0;
    W(rl_gguf_w_key(w, "k", 1));
    W(rl_gguf_w_str(w, "v", 1));
    W(rl_gguf_writer_to_memory(w, &mem, &msz, msg, sizeof msg, &off));
    /* header 24, k=v 8+1+4+8+1 = 22, general.alignment 8+17+4+4 = 33 */
    CHECK(bad == 0 && msz == 24 + 22 + 33);
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
    };
    long bad = 0;
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
        }
        snprintf(out, sizeof out, "%s/refused.gguf", tmpdir);
        rl_gguf_status st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
        char at[64];
        snprintf(at, sizeof at, "at byte %" PRIu64 ":", off);
        if (st != cases[c].want || exists(out) || dir_entries(tmpdir) != 0 || !strstr(msg, at)) {
            bad++;
            fprintf(stderr, "writer case %d: got %s (%s), expected %s\n", cases[c].which,
                    rl_gguf_status_name(st), msg, rl_gguf_status_name(cases[c].want));
        }
        /* Sticky: later calls keep failing with the first status. */
        if (rl_gguf_w_key(w, "zzz", 3) != cases[c].want)
            bad++;
        rl_gguf_writer_free(w);
    }
    CHECK_MSG(bad == 0, "%ld writer refusals wrong", bad);

    rl_gguf_writer *w = rl_gguf_writer_new();
    rl_gguf_w_key(w, "a", 1);
    rl_gguf_w_str(w, "x", 1);
    static uint8_t big[1 << 20];
    int64_t nebig[1] = {sizeof big};
    rl_gguf_w_tensor(w, "big", 3, 1, nebig, RL_GGUF_GGML_I8, big, sizeof big);

    /* A directory that does not exist. */
    snprintf(out, sizeof out, "%s/no-such-dir/x.gguf", tmpdir);
    rl_gguf_status st = rl_gguf_writer_write(w, out, msg, sizeof msg, &off);
    CHECK(st == RL_GGUF_E_IO && !exists(out) && dir_entries(tmpdir) == 0);

    /* The target is a directory: the rename fails after the whole file was
     * written; the temporary file must go. */
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

/* ------------------------------------------------------- the bad corpus */

static void test_bad_corpus(void) {
    FILE *m = fopen(BAD "MANIFEST", "r");
    if (!m) {
        CHECK_SKIP(BAD "MANIFEST missing: the bad-file corpus was not checked");
        return;
    }
    char line[512], listed[128][64];
    int n = 0;
    long mem_mismatch = 0;
    while (fgets(line, sizeof line, m)) {
        char name[64], status[64];
        uint64_t want_off;
        if (line[0] == '#' || sscanf(line, "%63s %63s %" SCNu64, name, status, &want_off) != 3)
            continue;
        if (n < 128)
            snprintf(listed[n++], sizeof listed[0], "%s", name);
        char path[256], msg[RL_GGUF_MSG_SIZE] = "", at[64];
        snprintf(path, sizeof path, BAD "%s", name);
        rl_gguf_file *f = (rl_gguf_file *)1;
        uint64_t off = ~0ull;
        rl_gguf_status st = rl_gguf_open(path, &f, msg, sizeof msg, &off);
        snprintf(at, sizeof at, "at byte %" PRIu64 ":", want_off);
        CHECK_MSG(!strcmp(rl_gguf_status_name(st), status) && off == want_off && f == NULL &&
                      strstr(msg, at) == msg && !strchr(msg, '\n'),
                  "%s: got %s at %" PRIu64 " (%s), expected %s at %" PRIu64, name,
                  rl_gguf_status_name(st), off, msg, status, want_off);
        /* The same from memory. */
        uint64_t size;
        uint8_t *bytes = slurp(path, &size);
        char msg2[RL_GGUF_MSG_SIZE] = "";
        uint64_t off2 = ~0ull;
        rl_gguf_file *f2 = NULL;
        rl_gguf_status st2 = rl_gguf_parse(bytes, size, &f2, msg2, sizeof msg2, &off2);
        mem_mismatch += st2 != st || off2 != off || strcmp(msg, msg2) || f2;
        free(bytes);
    }
    fclose(m);
    CHECK_MSG(mem_mismatch == 0, "%ld corpus files parse differently from memory", mem_mismatch);
    CHECK_MSG(n >= 40, "MANIFEST lists only %d files", n);

    /* Every file in the directory is in the MANIFEST. */
    DIR *d = opendir(BAD);
    long unlisted = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf"))
            continue;
        int found = 0;
        for (int i = 0; i < n && !found; i++)
            found = !strcmp(listed[i], e->d_name);
        if (!found) {
            unlisted++;
            fprintf(stderr, "tests/bad/%s is not in the MANIFEST\n", e->d_name);
        }
    }
    if (d)
        closedir(d);
    CHECK_MSG(unlisted == 0, "%ld files in tests/bad/ are not in the MANIFEST", unlisted);
}

/* Every prefix of a golden file is refused (the file has tensors, so even a
 * cut inside the last padding leaves a tensor past the end); a sample of the
 * prefixes of a vocab file, which has none, too, except the whole file. */
static void test_truncations(void) {
    uint64_t size;
    uint8_t *p = slurp(GOLDEN "q8_f16src.q8_0.gguf", &size);
    if (!p) {
        CHECK_SKIP("q8_f16src.q8_0.gguf missing");
        return;
    }
    long accepted = 0, bad_msg = 0;
    uint64_t last_tensor_end = 0;
    rl_gguf_file *whole = NULL;
    if (rl_gguf_parse(p, size, &whole, NULL, 0, NULL) == RL_GGUF_OK)
        for (uint64_t i = 0; i < rl_gguf_tensor_count(whole); i++) {
            uint64_t e = rl_gguf_data_offset(whole) + rl_gguf_tensor_offset(whole, i) +
                         rl_gguf_tensor_nbytes(whole, i);
            if (e > last_tensor_end)
                last_tensor_end = e;
        }
    rl_gguf_close(whole);
    for (uint64_t n = 0; n < size; n++) {
        rl_gguf_file *f = NULL;
        char msg[RL_GGUF_MSG_SIZE] = "";
        uint64_t off = ~0ull;
        rl_gguf_status st = rl_gguf_parse(p, n, &f, msg, sizeof msg, &off);
        /* Cutting only padding after the last tensor is still a valid file. */
        if (st == RL_GGUF_OK && n < last_tensor_end)
            accepted++;
        if (st != RL_GGUF_OK && (off > n || strncmp(msg, "at byte ", 8)))
            bad_msg++;
        rl_gguf_close(f);
    }
    CHECK_MSG(accepted == 0 && bad_msg == 0,
              "%ld truncations accepted, %ld with a bad offset or message", accepted, bad_msg);
    free(p);

    p = slurp(GOLDEN "vocab/ggml-vocab-bert-bge.gguf", &size);
    if (!p) {
        CHECK_SKIP("vocab/ggml-vocab-bert-bge.gguf missing");
        return;
    }
    accepted = 0;
    for (uint64_t n = 0; n < size; n += n < 4096 ? 1 : 1 + rnd() % 4000) {
        rl_gguf_file *f = NULL;
        if (rl_gguf_parse(p, n, &f, NULL, 0, NULL) == RL_GGUF_OK)
            accepted++;
        rl_gguf_close(f);
    }
    rl_gguf_file *f = NULL;
    CHECK(accepted == 0 && rl_gguf_parse(p, size, &f, NULL, 0, NULL) == RL_GGUF_OK);
    rl_gguf_close(f);
    free(p);
}

/* Random damage to a golden file: whatever is accepted must be sound. */
static void test_damage(void) {
    uint64_t size;
    uint8_t *orig = slurp(GOLDEN "q8_main.q8_0.gguf", &size);
    if (!orig) {
        CHECK_SKIP("q8_main.q8_0.gguf missing");
        return;
    }
    uint8_t *p = malloc(size);
    long unsound = 0, refused = 0;
    for (int round = 0; round < 3000; round++) {
        memcpy(p, orig, size);
        int hits = 1 + rnd() % 4;
        for (int h = 0; h < hits; h++) {
            uint64_t at = rnd() % 1888; /* the header, keys and tensor infos */
            p[at] = rnd() % 3 ? (uint8_t)rnd() : (uint8_t)(p[at] ^ (1u << (rnd() % 8)));
        }
        rl_gguf_file *f = NULL;
        if (rl_gguf_parse(p, size, &f, NULL, 0, NULL) != RL_GGUF_OK) {
            refused++;
            continue;
        }
        for (uint64_t i = 0; i < rl_gguf_tensor_count(f); i++) {
            uint64_t start = (uint64_t)((const uint8_t *)rl_gguf_tensor_data(f, i) - p);
            unsound += start > size || rl_gguf_tensor_nbytes(f, i) > size - start;
            unsound += rl_gguf_tensor_offset(f, i) % rl_gguf_alignment(f) != 0;
        }
        for (uint64_t i = 0; i < rl_gguf_kv_count(f); i++) {
            uint64_t kl, s, e;
            rl_gguf_val v;
            unsound += !rl_gguf_kv_key(f, i, &kl) || rl_gguf_kv_value(f, i, &v) ||
                       rl_gguf_val_span(f, &v, &s, &e) || e > size;
        }
        rl_gguf_close(f);
    }
    CHECK_MSG(unsound == 0, "%ld unsound results from damaged files (%ld refused)", unsound,
              refused);
    free(p);
    free(orig);
}

/* ------------------------------------------------- small contracts */

static void test_contracts(void) {
    /* Status names: all distinct, none unknown. */
    long bad = 0;
    for (int a = 0; a < RL_GGUF_STATUS_COUNT; a++) {
        bad += !strcmp(rl_gguf_status_name((rl_gguf_status)a), "unknown-status");
        for (int b = 0; b < a; b++)
            bad += !strcmp(rl_gguf_status_name((rl_gguf_status)a),
                           rl_gguf_status_name((rl_gguf_status)b));
    }
    CHECK(bad == 0 && !strcmp(rl_gguf_status_name(RL_GGUF_STATUS_COUNT), "unknown-status"));

    /* ggml's type table (block size, bytes per block), every id. */
    static const struct {
        uint32_t id, blk, bytes;
        const char *name;
    } table[] = {
        {0, 1, 4, "F32"}, {1, 1, 2, "F16"}, {2, 32, 18, "Q4_0"}, {3, 32, 20, "Q4_1"},
        {4, 0, 0, "Q4_2"}, {5, 0, 0, "Q4_3"}, {6, 32, 22, "Q5_0"}, {7, 32, 24, "Q5_1"},
        {8, 32, 34, "Q8_0"}, {9, 32, 36, "Q8_1"}, {10, 256, 84, "Q2_K"}, {11, 256, 110, "Q3_K"},
        {12, 256, 144, "Q4_K"}, {13, 256, 176, "Q5_K"}, {14, 256, 210, "Q6_K"},
        {15, 256, 292, "Q8_K"}, {16, 256, 66, "IQ2_XXS"}, {17, 256, 74, "IQ2_XS"},
        {18, 256, 98, "IQ3_XXS"}, {19, 256, 50, "IQ1_S"}, {20, 32, 18, "IQ4_NL"},
        {21, 256, 110, "IQ3_S"}, {22, 256, 82, "IQ2_S"}, {23, 256, 136, "IQ4_XS"},
        {24, 1, 1, "I8"}, {25, 1, 2, "I16"}, {26, 1, 4, "I32"}, {27, 1, 8, "I64"},
        {28, 1, 8, "F64"}, {29, 256, 56, "IQ1_M"}, {30, 1, 2, "BF16"}, {31, 0, 0, "Q4_0_4_4"},
        {32, 0, 0, "Q4_0_4_8"}, {33, 0, 0, "Q4_0_8_8"}, {34, 256, 54, "TQ1_0"},
        {35, 256, 66, "TQ2_0"}, {36, 0, 0, "IQ4_NL_4_4"}, {37, 0, 0, "IQ4_NL_4_8"},
        {38, 0, 0, "IQ4_NL_8_8"}, {39, 32, 17, "MXFP4"}, {40, 64, 36, "NVFP4"},
        {41, 128, 18, "Q1_0"}, {42, 64, 18, "Q2_0"},
    };
    bad = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        uint32_t id = table[i].id;
        bad += rl_gguf_ggml_block_size(id) != table[i].blk;
        bad += rl_gguf_ggml_block_bytes(id) != table[i].bytes;
        bad += strcmp(rl_gguf_ggml_type_name(id), table[i].name) != 0;
        bad += rl_gguf_ggml_type_known(id) != (table[i].blk != 0);
        bad += rl_gguf_ggml_type_removed(id) != (table[i].blk == 0);
    }
    bad += rl_gguf_ggml_type_name(43) != NULL || rl_gguf_ggml_type_known(43) ||
           rl_gguf_ggml_type_removed(43) || rl_gguf_ggml_block_size(1000) != 0;
    CHECK_MSG(bad == 0 && sizeof table / sizeof table[0] == RL_GGUF_GGML_TYPE_COUNT,
              "%ld type table entries wrong", bad);

    /* Tensor sizes through the shared check. */
    uint64_t by;
    int64_t q4k[2] = {4096, 11008}, odd[1] = {100}, zero[2] = {0, 7}, neg[1] = {-1};
    CHECK(rl_gguf_tensor_bytes(RL_GGUF_GGML_Q4_K, 2, q4k, &by, NULL, 0) == RL_GGUF_OK &&
          by == 4096ull / 256 * 144 * 11008);
    CHECK(rl_gguf_tensor_bytes(RL_GGUF_GGML_Q8_0, 1, odd, &by, NULL, 0) == RL_GGUF_E_BLOCK_SIZE &&
          rl_gguf_tensor_bytes(RL_GGUF_GGML_F32, 1, neg, &by, NULL, 0) == RL_GGUF_E_DIM_NEGATIVE &&
          rl_gguf_tensor_bytes(RL_GGUF_GGML_Q8_0, 2, zero, &by, NULL, 0) == RL_GGUF_OK && by == 0);

    /* Value type names are the JSON names. */
    static const char *const vt[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                     "bool", "string", "array", "u64", "i64", "f64"};
    bad = 0;
    for (uint32_t t = 0; t < RL_GGUF_TYPE_COUNT; t++)
        bad += strcmp(rl_gguf_type_name(t), vt[t]) != 0;
    CHECK(bad == 0 && rl_gguf_type_name(13) == NULL);

    /* NULL and out-of-range arguments. */
    rl_gguf_close(NULL);
    rl_gguf_writer_free(NULL);
    CHECK(rl_gguf_retain(NULL) == NULL);
    uint64_t size;
    uint8_t *p = slurp(GOLDEN "q8_f16src.q8_0.gguf", &size);
    if (!p) {
        CHECK_SKIP("q8_f16src.q8_0.gguf missing");
        return;
    }
    rl_gguf_file *f = NULL;
    rl_gguf_val v, e;
    uint64_t u, l;
    int64_t i64;
    const char *s;
    CHECK(rl_gguf_parse(p, size, &f, NULL, 0, NULL) == RL_GGUF_OK);
    if (!f) {
        free(p);
        return;
    }
    uint64_t nk = rl_gguf_kv_count(f), nt = rl_gguf_tensor_count(f);
    CHECK(rl_gguf_kv_key(f, nk, &l) == NULL && rl_gguf_kv_type(f, nk) == -1 &&
          rl_gguf_kv_value(f, nk, &v) == RL_GGUF_E_ARG && rl_gguf_tensor_name(f, nt, &l) == NULL &&
          rl_gguf_tensor_ne(f, 0, 4) == -1 && rl_gguf_tensor_data(f, nt) == NULL &&
          rl_gguf_find_key(f, "general", 7) == -1 && rl_gguf_find_tensor(f, "", 0) == -1 &&
          rl_gguf_tensor_ne(f, 0, 3) == 1);
    rl_gguf_kv_value(f, (uint64_t)rl_gguf_find_key(f, "general.name", 12), &v);
    CHECK(rl_gguf_val_u64(f, &v, &u) == RL_GGUF_E_TYPE && rl_gguf_val_i64(f, &v, &i64) == RL_GGUF_E_TYPE &&
          rl_gguf_array_get(f, &v, 0, &e) == RL_GGUF_E_TYPE && rl_gguf_val_str(f, &v, &s, &l) == RL_GGUF_OK);
    /* Reference counting: the bytes stay while a reference is held. */
    rl_gguf_retain(f);
    rl_gguf_close(f);
    CHECK(rl_gguf_tensor_count(f) == nt);
    rl_gguf_close(f);

    /* Version 2 reads the same. */
    p[4] = 2;
    f = NULL;
    CHECK(rl_gguf_parse(p, size, &f, NULL, 0, NULL) == RL_GGUF_OK && rl_gguf_version(f) == 2 &&
          rl_gguf_tensor_count(f) == nt);
    rl_gguf_close(f);
    free(p);

    /* Tensors out of file order, with a gap, and a zero-size one: fine. */
    uint8_t buf[512];
    size_t n = 0;
#define PUT(x) do { memcpy(buf + n, &(x), sizeof(x)); n += sizeof(x); } while (0)
    uint32_t ver = 3, nd = 1, ty = 0, one = 1;
    uint64_t ntens = 3, nkv = 1, klen = 17, nl = 1, off0 = 0, off128 = 128, off64 = 64;
    int64_t d8 = 8, d0 = 0;
    memcpy(buf, "GGUF", 4);
    n = 4;
    PUT(ver); PUT(ntens); PUT(nkv);
    PUT(klen); memcpy(buf + n, "general.alignment", 17); n += 17;
    uint32_t tu32 = RL_GGUF_TYPE_U32, a16 = 16;
    PUT(tu32); PUT(a16);
    PUT(nl); buf[n++] = 'b'; PUT(nd); PUT(d8); PUT(ty); PUT(off128);
    PUT(nl); buf[n++] = 'a'; PUT(nd); PUT(d8); PUT(ty); PUT(off0);
    PUT(nl); buf[n++] = 'z'; PUT(nd); PUT(d0); PUT(ty); PUT(off64);
    (void)one;
    while (n % 16)
        buf[n++] = 0;
    size_t data = n;
    memset(buf + n, 0, 160);
    buf[data + 128] = 0x7f;
    n += 160;
    f = NULL;
    char msg[RL_GGUF_MSG_SIZE] = "";
    rl_gguf_status st = rl_gguf_parse(buf, n, &f, msg, sizeof msg, NULL);
    CHECK_MSG(st == RL_GGUF_OK && rl_gguf_alignment(f) == 16 && rl_gguf_data_offset(f) == data &&
                  ((const uint8_t *)rl_gguf_tensor_data(f, 0))[0] == 0x7f &&
                  rl_gguf_find_tensor(f, "z", 1) == 2 && rl_gguf_tensor_nbytes(f, 2) == 0,
              "gap/order/zero-size file: %s", msg);
    rl_gguf_close(f);
#undef PUT
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/rl-test-gguf.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_contracts();
    for (size_t i = 0; i < N_GOLDEN; i++)
        check_golden(golden_ok[i]);
    test_golden_facts();
    test_round_trips();
    test_all_types();
    test_writer_failures();
    test_bad_corpus();
    test_truncations();
    test_damage();
    rmdir(tmpdir);
    return check_report("gguf");
}
