/* test_gguf.c - the GGUF reader (gguf/gguf.c).
 *
 * - Every golden file reads, and agrees field by field with its gguf-py JSON
 *   dump (counts, offsets, every key and value, every tensor's shape, type,
 *   offset, size and the SHA-256 of its bytes); q8_align64.q8_0.gguf, which
 *   llama-quantize laid out wrongly, is refused as llama.cpp refuses it.
 * - Every file in tests/bad/ is refused with the status and byte offset its
 *   MANIFEST names, from a path and from memory; every truncation of a
 *   golden file is refused; random damage never breaks the invariants.
 * - Out-of-range arguments, reference counting, version 2, tensors out of
 *   file order.
 *
 * The writer's tests are in test_write.c, the type tables' in test_types.c.
 */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/numfmt.h"
#include "tests/c/check.h"
#include "tests/c/support/json.h"
#include "tests/c/support/sha256.h"
#include "tests/c/testutil.h"

#define GOLDEN "tests/golden/"
#define BAD "tests/bad/"

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
    if (!bytes || access(jpath, F_OK) != 0) {
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
    if (access(GOLDEN "q8_main.q8_0.gguf", F_OK) != 0) {
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
    for (uint64_t i = 0; i < rl_gguf_tensor_count(f); i++) {
        uint64_t at = (uint64_t)((uintptr_t)rl_gguf_tensor_data(f, i) - (uintptr_t)rl_gguf_bytes(f));
        CHECK_EACH(rl_gguf_tensor_offset(f, i) % 32 == 0 && at % 32 == 0,
                   "tensor %" PRIu64 ": data offset %" PRIu64 ", at byte %" PRIu64
                   " of the file: not aligned to 32", i, rl_gguf_tensor_offset(f, i), at);
        uint64_t e = rl_gguf_tensor_offset(f, i) + (rl_gguf_tensor_nbytes(f, i) + 31) / 32 * 32;
        if (e > end)
            end = e;
    }
    CHECK_EQ_U(rl_gguf_data_offset(f) + end, rl_gguf_file_size(f));
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
    if (access(GOLDEN "q8_align64.q8_0.gguf", F_OK) != 0) {
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

/* A key or tensor name holding a NUL byte is refused by the reader, at
 * the name's length field. */
static void test_reader_refuses_nul_in_names(void) {
    char msg[RL_GGUF_MSG_SIZE];
    uint64_t off = 0, size = 0;
    uint8_t *mem = NULL;
    float data[8] = {0};
    int64_t ne[1] = {8};
    rl_gguf_writer *w = rl_gguf_writer_new();
    rl_gguf_w_key(w, "kQk", 3);
    rl_gguf_w_uint(w, RL_GGUF_TYPE_U8, 1);
    rl_gguf_w_tensor(w, "tQt", 3, 1, ne, RL_GGUF_GGML_F32, data, sizeof data);
    CHECK(rl_gguf_writer_to_memory(w, &mem, &size, msg, sizeof msg, &off) == RL_GGUF_OK);
    rl_gguf_writer_free(w);
    for (int which = 0; mem && which < 2; which++) {
        const char *name = which ? "tQt" : "kQk";
        uint8_t *copy = malloc(size);
        memcpy(copy, mem, size);
        uint8_t *at = copy;
        while (memcmp(at, name, 3) != 0)
            at++;
        rl_gguf_file *f = NULL;
        at[1] = 0;
        rl_gguf_status st = rl_gguf_parse(copy, size, &f, msg, sizeof msg, &off);
        CHECK_MSG(st == RL_GGUF_E_NAME_NUL && f == NULL && off == (uint64_t)(at - 8 - copy) &&
                      strstr(msg, "NUL"),
                  "NUL in %s: %s (%s) at %" PRIu64, name, rl_gguf_status_name(st), msg, off);
        free(copy);
    }
    free(mem);
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
    /* NULL and out-of-range arguments. */
    rl_gguf_close(NULL);
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
    CHECK_CASE(test_contracts());
    for (size_t i = 0; i < N_GOLDEN; i++)
        CHECK_CASE(check_golden(golden_ok[i]));
    CHECK_CASE(test_golden_facts());
    CHECK_CASE(test_reader_refuses_nul_in_names());
    CHECK_CASE(test_bad_corpus());
    CHECK_CASE(test_truncations());
    CHECK_CASE(test_damage());
    return check_report("gguf");
}
