// fuzz_gguf.c - libFuzzer target for the GGUF reader and writer.
//
// Build and run from the repository root (clang 14 or later):
//
//   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -o build/fuzz_gguf tests/fuzz/fuzz_gguf.c gguf/gguf.c gguf/write.c gguf/types.c gguf/numfmt.c
//   build/fuzz_gguf -max_total_time=600 tests/fuzz/corpus tests/golden tests/bad
//
// (Only the GGUF sources: other files in gguf/ need more libraries.)
//
/* (`make fuzz` does this with FUZZ_SECONDS.)  The first directory is the
 * working corpus libFuzzer grows; the golden files and the bad-file corpus
 * are read-only seeds.
 *
 * Each input goes through rl_gguf_parse.  A refusal must come with a
 * one-line message that starts "at byte N:" with N inside the input.  An
 * accepted file is walked completely -- every key, every value and array
 * element to the deepest nesting, every tensor's bytes -- and every accessor
 * must agree with the others (lookups find what iteration found, spans and
 * tensors lie inside the input, sizes match the type table).  Then it is
 * re-encoded with the writer, which must accept anything the reader
 * accepted; the result must read back with the same content, and encoding
 * it again must give the same bytes (the writer's layout is canonical).
 * Any broken promise is a trap, which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

#define MUST(c)                                                              \
    do {                                                                     \
        if (!(c))                                                            \
            __builtin_trap();                                                \
    } while (0)

static volatile uint64_t sink; /* keeps the reads below from being dropped */

static void walk_value(const rl_gguf_file *f, const rl_gguf_val *v, uint64_t size,
                       unsigned depth) {
    uint64_t u, s, e, len;
    int64_t i;
    double d;
    int b;
    const char *p;
    MUST(depth <= RL_GGUF_MAX_ARRAY_DEPTH);
    MUST(rl_gguf_val_span(f, v, &s, &e) == RL_GGUF_OK && s <= e && e <= size);
    switch (v->type) {
    case RL_GGUF_TYPE_U8: case RL_GGUF_TYPE_U16: case RL_GGUF_TYPE_U32: case RL_GGUF_TYPE_U64:
        MUST(rl_gguf_val_u64(f, v, &u) == RL_GGUF_OK);
        MUST(rl_gguf_val_i64(f, v, &i) == RL_GGUF_E_TYPE);
        sink += u;
        break;
    case RL_GGUF_TYPE_I8: case RL_GGUF_TYPE_I16: case RL_GGUF_TYPE_I32: case RL_GGUF_TYPE_I64:
        MUST(rl_gguf_val_i64(f, v, &i) == RL_GGUF_OK);
        MUST(rl_gguf_val_u64(f, v, &u) == RL_GGUF_E_TYPE);
        sink += (uint64_t)i;
        break;
    case RL_GGUF_TYPE_F32: case RL_GGUF_TYPE_F64:
        MUST(rl_gguf_val_f64(f, v, &d) == RL_GGUF_OK);
        sink += d == d;
        break;
    case RL_GGUF_TYPE_BOOL:
        MUST(rl_gguf_val_bool(f, v, &b) == RL_GGUF_OK && (b == 0 || b == 1));
        MUST(rl_gguf_val_u64(f, v, &u) == RL_GGUF_OK && u == (uint64_t)b);
        break;
    case RL_GGUF_TYPE_STRING:
        MUST(rl_gguf_val_str(f, v, &p, &len) == RL_GGUF_OK);
        MUST((uint64_t)((const uint8_t *)p - rl_gguf_bytes(f)) + len <= size);
        if (len)
            sink += (uint8_t)p[0] + (uint8_t)p[len - 1];
        break;
    case RL_GGUF_TYPE_ARRAY: {
        rl_gguf_val el;
        const void *raw;
        MUST(v->elem_type < RL_GGUF_TYPE_COUNT);
        rl_gguf_status st = rl_gguf_array_data(f, v, &raw);
        MUST(rl_gguf_type_size(v->elem_type) ? st == RL_GGUF_OK : st == RL_GGUF_E_TYPE);
        for (uint64_t j = 0; j < v->count; j++) {
            MUST(rl_gguf_array_get(f, v, j, &el) == RL_GGUF_OK);
            MUST(el.type == v->elem_type);
            walk_value(f, &el, size, depth + 1);
        }
        MUST(rl_gguf_array_get(f, v, v->count, &el) == RL_GGUF_E_ARG);
        break;
    }
    default:
        MUST(0);
    }
}

static void walk(const rl_gguf_file *f, uint64_t size) {
    MUST(rl_gguf_version(f) == 2 || rl_gguf_version(f) == 3);
    uint32_t a = rl_gguf_alignment(f);
    MUST(a && !(a & (a - 1)));
    MUST(rl_gguf_header_end(f) <= size && rl_gguf_data_offset(f) >= rl_gguf_header_end(f) &&
         rl_gguf_data_offset(f) % a == 0 && rl_gguf_file_size(f) == size);
    for (uint64_t i = 0; i < rl_gguf_kv_count(f); i++) {
        uint64_t kl;
        const char *k = rl_gguf_kv_key(f, i, &kl);
        MUST(k && kl > 0 && (uint64_t)((const uint8_t *)k - rl_gguf_bytes(f)) + kl <= size);
        MUST(rl_gguf_find_key(f, k, kl) == (int64_t)i);
        rl_gguf_val v;
        MUST(rl_gguf_kv_value(f, i, &v) == RL_GGUF_OK && (int)v.type == rl_gguf_kv_type(f, i));
        walk_value(f, &v, size, 0);
    }
    MUST(rl_gguf_kv_key(f, rl_gguf_kv_count(f), NULL) == NULL);
    for (uint64_t i = 0; i < rl_gguf_tensor_count(f); i++) {
        uint64_t nl, bytes;
        const char *n = rl_gguf_tensor_name(f, i, &nl);
        MUST(n && nl >= 1 && nl <= RL_GGUF_MAX_NAME_LENGTH);
        MUST(rl_gguf_find_tensor(f, n, nl) == (int64_t)i);
        uint32_t nd = rl_gguf_tensor_n_dims(f, i), type = rl_gguf_tensor_type(f, i);
        int64_t ne[4];
        for (uint32_t d = 0; d < 4; d++)
            ne[d] = rl_gguf_tensor_ne(f, i, d);
        MUST(nd >= 1 && nd <= 4 && rl_gguf_ggml_type_known(type));
        MUST(rl_gguf_tensor_bytes(type, nd, ne, &bytes, NULL, 0) == RL_GGUF_OK);
        MUST(bytes == rl_gguf_tensor_nbytes(f, i));
        MUST(rl_gguf_tensor_offset(f, i) % a == 0);
        const uint8_t *p = rl_gguf_tensor_data(f, i);
        uint64_t start = (uint64_t)(p - rl_gguf_bytes(f));
        MUST(start >= rl_gguf_data_offset(f) && start <= size && bytes <= size - start);
        if (bytes) {
            sink += p[0] + p[bytes - 1];
            /* The first row, through the converters, when it is one. */
            uint64_t row = (uint64_t)ne[0];
            if (row <= 4096 && (type == RL_GGUF_GGML_F32 || type == RL_GGUF_GGML_F16 ||
                                type == RL_GGUF_GGML_BF16 || type == RL_GGUF_GGML_Q8_0)) {
                static float buf[4096];
                MUST(rl_gguf_row_to_f32(type, p, buf, row) == RL_GGUF_OK);
                sink += buf[0] == buf[0];
            }
        }
    }
    MUST(rl_gguf_tensor_name(f, rl_gguf_tensor_count(f), NULL) == NULL);
}

/* Re-encode F with the writer; the buffer (malloc'd) in *out. */
static void encode(const rl_gguf_file *f, uint8_t **out, uint64_t *size) {
    rl_gguf_writer *w = rl_gguf_writer_new();
    MUST(w);
    if (rl_gguf_find_key(f, "general.alignment", 17) < 0)
        MUST(rl_gguf_writer_set_implicit_alignment(w, 1) == RL_GGUF_OK);
    for (uint64_t i = 0; i < rl_gguf_kv_count(f); i++)
        MUST(rl_gguf_w_copy_kv(w, f, i) == RL_GGUF_OK);
    for (uint64_t i = 0; i < rl_gguf_tensor_count(f); i++) {
        uint64_t nl;
        const char *n = rl_gguf_tensor_name(f, i, &nl);
        int64_t ne[4];
        for (uint32_t d = 0; d < 4; d++)
            ne[d] = rl_gguf_tensor_ne(f, i, d);
        MUST(rl_gguf_w_tensor(w, n, nl, rl_gguf_tensor_n_dims(f, i), ne, rl_gguf_tensor_type(f, i),
                              rl_gguf_tensor_data(f, i), rl_gguf_tensor_nbytes(f, i)) == RL_GGUF_OK);
    }
    MUST(rl_gguf_writer_to_memory(w, out, size, NULL, 0, NULL) == RL_GGUF_OK);
    rl_gguf_writer_free(w);
}

static void same_content(const rl_gguf_file *a, const rl_gguf_file *b) {
    MUST(rl_gguf_kv_count(a) == rl_gguf_kv_count(b));
    MUST(rl_gguf_tensor_count(a) == rl_gguf_tensor_count(b));
    MUST(rl_gguf_alignment(a) == rl_gguf_alignment(b));
    for (uint64_t i = 0; i < rl_gguf_kv_count(a); i++) {
        rl_gguf_val va, vb;
        uint64_t la, lb, sa, ea, sb, eb;
        const char *ka = rl_gguf_kv_key(a, i, &la), *kb = rl_gguf_kv_key(b, i, &lb);
        MUST(la == lb && !memcmp(ka, kb, la));
        rl_gguf_kv_value(a, i, &va);
        rl_gguf_kv_value(b, i, &vb);
        MUST(rl_gguf_val_span(a, &va, &sa, &ea) == RL_GGUF_OK);
        MUST(rl_gguf_val_span(b, &vb, &sb, &eb) == RL_GGUF_OK);
        MUST(va.type == vb.type && ea - sa == eb - sb &&
             !memcmp(rl_gguf_bytes(a) + sa, rl_gguf_bytes(b) + sb, ea - sa));
    }
    for (uint64_t i = 0; i < rl_gguf_tensor_count(a); i++) {
        uint64_t la, lb;
        const char *na = rl_gguf_tensor_name(a, i, &la), *nb = rl_gguf_tensor_name(b, i, &lb);
        MUST(la == lb && !memcmp(na, nb, la));
        MUST(rl_gguf_tensor_type(a, i) == rl_gguf_tensor_type(b, i));
        MUST(rl_gguf_tensor_n_dims(a, i) == rl_gguf_tensor_n_dims(b, i));
        for (uint32_t d = 0; d < 4; d++)
            MUST(rl_gguf_tensor_ne(a, i, d) == rl_gguf_tensor_ne(b, i, d));
        uint64_t n = rl_gguf_tensor_nbytes(a, i);
        MUST(n == rl_gguf_tensor_nbytes(b, i));
        MUST(!n || !memcmp(rl_gguf_tensor_data(a, i), rl_gguf_tensor_data(b, i), n));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rl_gguf_file *f = NULL;
    char msg[RL_GGUF_MSG_SIZE];
    uint64_t off = ~0ull;
    msg[0] = 0;
    rl_gguf_status st = rl_gguf_parse(data, size, &f, msg, sizeof msg, &off);
    if (st != RL_GGUF_OK) {
        MUST(f == NULL && st < RL_GGUF_STATUS_COUNT);
        MUST(off <= size && !strncmp(msg, "at byte ", 8) && !strchr(msg, '\n'));
        MUST(strlen(msg) < sizeof msg - 1); /* RL_GGUF_MSG_SIZE is enough */
        return 0;
    }
    walk(f, size);

    uint8_t *enc = NULL, *enc2 = NULL;
    uint64_t esz, esz2;
    encode(f, &enc, &esz);
    rl_gguf_file *g = NULL;
    MUST(rl_gguf_parse(enc, esz, &g, msg, sizeof msg, &off) == RL_GGUF_OK);
    same_content(f, g);
    encode(g, &enc2, &esz2);
    MUST(esz == esz2 && !memcmp(enc, enc2, esz));
    rl_gguf_close(g);
    free(enc);
    free(enc2);
    rl_gguf_close(f);
    return 0;
}
