/* write.c - the GGUF v3 writer (see gguf.h for the calls and the layout).
 *
 * Metadata is encoded as it arrives into one growing buffer (array counts
 * are patched when the array ends); tensors are kept as descriptions with a
 * pointer to the caller's bytes.  Writing streams header, metadata, tensor
 * infos and data once through the atomic writer of fileio.c (a temporary
 * file renamed over the target only after everything reached the disk).
 * Expected workload: a handful of keys (some arrays of tens of thousands of
 * strings) and up to a few thousand tensors, yet a hostile or generated file
 * may have 100k of either: duplicate keys and names are found through hash
 * tables, so every addition costs O(1) and nothing grows with the square.
 */
#include "gguf/gguf.h"
#include "gguf/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct wtensor {
    char name[RL_GGUF_MAX_NAME_LENGTH + 1];
    uint32_t name_len;
    uint32_t n_dims, type;
    int64_t ne[RL_GGUF_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
    int deferred; /* bytes given later, through the stream */
} wtensor;

typedef struct frame {
    uint64_t count_pos; /* where in meta the u64 count goes */
    uint64_t count;
    uint32_t elem_type;
} frame;

/* An open-addressing table of entry indices plus one (0 marks a free slot),
 * hashed by the entry's bytes; CAP is zero or a power of two, at most half
 * full. */
typedef struct wset {
    uint64_t *slot;
    uint64_t cap;
} wset;

struct rl_gguf_writer {
    uint8_t *meta;
    uint64_t meta_len, meta_cap;
    uint64_t *keys; /* meta positions of each key's length field */
    uint64_t n_kv, keys_cap;
    wtensor *t;
    uint64_t n_t, t_cap;
    uint64_t infos_len; /* bytes of tensor infos so far */
    uint32_t alignment;
    int alignment_key; /* the caller gave general.alignment */
    int implicit;
    int expecting_value;
    int cur_is_alignment;
    uint64_t cur_tag_pos;
    frame stack[RL_GGUF_MAX_ARRAY_DEPTH];
    unsigned depth;
    rl_gguf_status err;
    uint64_t err_off;
    char errmsg[RL_GGUF_MSG_SIZE];
    wset key_set, name_set; /* the keys and the tensor names given so far */
    struct whook { void (*fn)(void *); void *arg; } *hooks; /* rl_gguf_writer_on_free */
    uint64_t n_hooks, hooks_cap;
    uint64_t n_deferred;
    struct sink *stream; /* the open stream, NULL when none */
    rl_gguf_atomic *stream_file;
    uint64_t stream_t;    /* the tensor the stream is at */
    uint64_t stream_done; /* bytes of it given so far */
};

/* ---- duplicate detection ---------------------------------------------- */

typedef void (*wset_get)(const rl_gguf_writer *w, uint64_t i, const uint8_t **p, uint64_t *len);

static void key_at(const rl_gguf_writer *w, uint64_t i, const uint8_t **p, uint64_t *len) {
    memcpy(len, w->meta + w->keys[i], 8);
    *p = w->meta + w->keys[i] + 8;
}

static void name_at(const rl_gguf_writer *w, uint64_t i, const uint8_t **p, uint64_t *len) {
    *p = (const uint8_t *)w->t[i].name;
    *len = w->t[i].name_len;
}

/* FNV-1a: names differ mostly in their digits, which it mixes well enough. */
static uint64_t whash(const uint8_t *p, uint64_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The index of the entry of S equal to the N bytes at P, or UINT64_MAX. */
static uint64_t wset_find(const rl_gguf_writer *w, const wset *s, wset_get get, const uint8_t *p,
                          uint64_t n) {
    if (!s->cap)
        return UINT64_MAX;
    for (uint64_t h = whash(p, n) & (s->cap - 1);; h = (h + 1) & (s->cap - 1)) {
        const uint8_t *q;
        uint64_t qn;
        if (!s->slot[h])
            return UINT64_MAX;
        get(w, s->slot[h] - 1, &q, &qn);
        if (qn == n && memcmp(q, p, n) == 0)
            return s->slot[h] - 1;
    }
}

static void wset_put(const rl_gguf_writer *w, uint64_t *slot, uint64_t cap, wset_get get,
                     uint64_t i) {
    const uint8_t *p;
    uint64_t n, h;
    get(w, i, &p, &n);
    for (h = whash(p, n) & (cap - 1); slot[h]; h = (h + 1) & (cap - 1))
        ;
    slot[h] = i + 1;
}

/* Record entry I, the COUNT-th of S (the caller checked it is new); 0 when
 * memory ran out. */
static int wset_add(const rl_gguf_writer *w, wset *s, wset_get get, uint64_t i, uint64_t count) {
    if (count > s->cap / 2) {
        uint64_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *slot = calloc(cap, sizeof *slot);
        if (!slot)
            return 0;
        for (uint64_t j = 0; j < s->cap; j++)
            if (s->slot[j])
                wset_put(w, slot, cap, get, s->slot[j] - 1);
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    wset_put(w, s->slot, s->cap, get, i);
    return 1;
}

struct sink;
static rl_gguf_status stream_status(rl_gguf_writer *w, char *msg, size_t msgsz,
                                    uint64_t *err_off);

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static uint64_t out_pos(const rl_gguf_writer *w) {
    return RL_GGUF_HEADER_SIZE + w->meta_len + w->infos_len;
}

/* Record the first error; later calls return it. */
static rl_gguf_status wfail(rl_gguf_writer *w, rl_gguf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static rl_gguf_status wfail(rl_gguf_writer *w, rl_gguf_status st, const char *fmt, ...) {
    if (w->err != RL_GGUF_OK)
        return w->err;
    w->err = st;
    w->err_off = out_pos(w);
    int n = snprintf(w->errmsg, sizeof w->errmsg, "at byte %" PRIu64 ": ", w->err_off);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->errmsg + n, sizeof w->errmsg - (size_t)n, fmt, ap);
    va_end(ap);
    return st;
}

static const char *wquote(char *out, size_t outsz, const char *s, uint64_t len) {
    size_t o = 0;
    out[o++] = '\'';
    for (uint64_t i = 0; i < len && i < 48 && o + 8 < outsz; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, outsz - o, "\\x%02x", c);
    }
    if (len > 48)
        o += (size_t)snprintf(out + o, outsz - o, "...");
    out[o++] = '\'';
    out[o] = 0;
    return out;
}

#define WTRY(x)                                                              \
    do {                                                                     \
        rl_gguf_status st_ = (x);                                            \
        if (st_ != RL_GGUF_OK)                                               \
            return st_;                                                      \
    } while (0)

static rl_gguf_status meta_room(rl_gguf_writer *w, uint64_t n) {
    if (n > UINT64_MAX / 2 - w->meta_len)
        return wfail(w, RL_GGUF_E_NOMEM, "metadata too large");
    if (w->meta_len + n <= w->meta_cap)
        return RL_GGUF_OK;
    uint64_t cap = w->meta_cap ? w->meta_cap : 4096;
    while (cap < w->meta_len + n)
        cap *= 2;
    if (cap > SIZE_MAX)
        return wfail(w, RL_GGUF_E_NOMEM, "metadata too large");
    uint8_t *m = realloc(w->meta, (size_t)cap);
    if (!m)
        return wfail(w, RL_GGUF_E_NOMEM, "out of memory for %" PRIu64 " bytes of metadata", cap);
    w->meta = m;
    w->meta_cap = cap;
    return RL_GGUF_OK;
}

static rl_gguf_status meta_put(rl_gguf_writer *w, const void *p, uint64_t n) {
    WTRY(meta_room(w, n));
    if (n)
        memcpy(w->meta + w->meta_len, p, n);
    w->meta_len += n;
    return RL_GGUF_OK;
}

static rl_gguf_status meta_u32(rl_gguf_writer *w, uint32_t v) {
    uint8_t b[4];
    put32(b, v);
    return meta_put(w, b, 4);
}

static rl_gguf_status meta_u64(rl_gguf_writer *w, uint64_t v) {
    uint8_t b[8];
    put64(b, v);
    return meta_put(w, b, 8);
}

rl_gguf_writer *rl_gguf_writer_new(void) {
    rl_gguf_writer *w = calloc(1, sizeof *w);
    if (w)
        w->alignment = RL_GGUF_DEFAULT_ALIGNMENT;
    return w;
}

rl_gguf_status rl_gguf_writer_on_free(rl_gguf_writer *w, void (*fn)(void *), void *arg) {
    if (!w || !fn)
        return RL_GGUF_E_ARG;
    if (w->n_hooks == w->hooks_cap) {
        uint64_t cap = w->hooks_cap ? 2 * w->hooks_cap : 16;
        struct whook *h = realloc(w->hooks, cap * sizeof *h);
        if (!h)
            return RL_GGUF_E_NOMEM;
        w->hooks = h;
        w->hooks_cap = cap;
    }
    w->hooks[w->n_hooks].fn = fn;
    w->hooks[w->n_hooks++].arg = arg;
    return RL_GGUF_OK;
}

void rl_gguf_writer_free(rl_gguf_writer *w) {
    if (!w)
        return;
    rl_gguf_writer_stream_abort(w);
    for (uint64_t i = 0; i < w->n_hooks; i++)
        w->hooks[i].fn(w->hooks[i].arg);
    free(w->hooks);
    free(w->meta);
    free(w->keys);
    free(w->t);
    free(w->key_set.slot);
    free(w->name_set.slot);
    free(w);
}

static int pow2(uint64_t a) { return a != 0 && (a & (a - 1)) == 0; }

rl_gguf_status rl_gguf_writer_set_alignment(rl_gguf_writer *w, uint32_t a) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    if (!pow2(a))
        return wfail(w, RL_GGUF_E_ALIGNMENT, "alignment %" PRIu32 ": expected a power of two", a);
    if (w->alignment_key && a != w->alignment)
        return wfail(w, RL_GGUF_E_ALIGNMENT,
                     "alignment %" PRIu32 ": expected %" PRIu32 ", the general.alignment"
                     " already given", a, w->alignment);
    if (w->implicit && a != RL_GGUF_DEFAULT_ALIGNMENT)
        return wfail(w, RL_GGUF_E_STATE,
                     "alignment %" PRIu32 " with implicit alignment: expected 32", a);
    w->alignment = a;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_writer_set_implicit_alignment(rl_gguf_writer *w, int on) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    if (on && !w->alignment_key && w->alignment != RL_GGUF_DEFAULT_ALIGNMENT)
        return wfail(w, RL_GGUF_E_STATE,
                     "implicit alignment with alignment %" PRIu32 ": expected 32", w->alignment);
    w->implicit = on != 0;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_w_key(rl_gguf_writer *w, const char *key, uint64_t len) {
    char q[128];
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    if (w->depth || w->expecting_value)
        return wfail(w, RL_GGUF_E_STATE, "a key while the previous value is unfinished");
    if (!key && len)
        return wfail(w, RL_GGUF_E_ARG, "NULL key");
    if (len == 0)
        return wfail(w, RL_GGUF_E_KEY_EMPTY, "empty key: expected 1 to %u bytes",
                     RL_GGUF_MAX_KEY_LENGTH);
    if (len > RL_GGUF_MAX_KEY_LENGTH)
        return wfail(w, RL_GGUF_E_KEY_LENGTH, "key length %" PRIu64 ": expected at most %u",
                     len, RL_GGUF_MAX_KEY_LENGTH);
    if (memchr(key, 0, len))
        return wfail(w, RL_GGUF_E_NAME_NUL, "key %s contains a NUL byte: expected none",
                     wquote(q, sizeof q, key, len));
    uint64_t dup = wset_find(w, &w->key_set, key_at, (const uint8_t *)key, len);
    if (dup != UINT64_MAX)
        return wfail(w, RL_GGUF_E_KEY_DUPLICATE,
                     "key %s given twice (first at byte %" PRIu64 "): expected unique keys",
                     wquote(q, sizeof q, key, len), RL_GGUF_HEADER_SIZE + w->keys[dup]);
    if (w->n_kv == w->keys_cap) {
        uint64_t cap = w->keys_cap ? 2 * w->keys_cap : 32;
        uint64_t *k = realloc(w->keys, cap * sizeof *k);
        if (!k)
            return wfail(w, RL_GGUF_E_NOMEM, "out of memory for keys");
        w->keys = k;
        w->keys_cap = cap;
    }
    uint64_t at = w->meta_len;
    WTRY(meta_u64(w, len));
    WTRY(meta_put(w, key, len));
    w->keys[w->n_kv++] = at;
    if (!wset_add(w, &w->key_set, key_at, w->n_kv - 1, w->n_kv))
        return wfail(w, RL_GGUF_E_NOMEM, "out of memory for keys");
    w->expecting_value = 1;
    w->cur_is_alignment = len == 17 && memcmp(key, "general.alignment", 17) == 0;
    return RL_GGUF_OK;
}

/* Before a value's payload: the key's type tag at the top level, or the
 * element-type check and count inside an array. */
static rl_gguf_status begin_value(rl_gguf_writer *w, uint32_t type) {
    if (w->depth == 0) {
        if (!w->expecting_value)
            return wfail(w, RL_GGUF_E_STATE, "a %s value without a key",
                         rl_gguf_type_name(type));
        if (w->cur_is_alignment && type != RL_GGUF_TYPE_U32)
            return wfail(w, RL_GGUF_E_ALIGNMENT_TYPE,
                         "general.alignment of type %s: expected u32", rl_gguf_type_name(type));
        w->cur_tag_pos = w->meta_len;
        return meta_u32(w, type);
    }
    frame *fr = &w->stack[w->depth - 1];
    if (fr->elem_type != type)
        return wfail(w, RL_GGUF_E_TYPE, "a %s element in an array of %s",
                     rl_gguf_type_name(type), rl_gguf_type_name(fr->elem_type));
    if (fr->count >= RL_GGUF_MAX_ARRAY_LENGTH)
        return wfail(w, RL_GGUF_E_ARRAY_LENGTH, "array longer than %llu elements",
                     (unsigned long long)RL_GGUF_MAX_ARRAY_LENGTH);
    fr->count++;
    return RL_GGUF_OK;
}

/* After a value that completes a key: check general.alignment. */
static rl_gguf_status end_top_value(rl_gguf_writer *w) {
    w->expecting_value = 0;
    if (!w->cur_is_alignment)
        return RL_GGUF_OK;
    uint32_t type, a;
    memcpy(&type, w->meta + w->cur_tag_pos, 4);
    if (type != RL_GGUF_TYPE_U32)
        return wfail(w, RL_GGUF_E_ALIGNMENT_TYPE, "general.alignment of type %s: expected u32",
                     rl_gguf_type_name(type));
    memcpy(&a, w->meta + w->cur_tag_pos + 4, 4);
    if (!pow2(a))
        return wfail(w, RL_GGUF_E_ALIGNMENT, "general.alignment %" PRIu32
                     ": expected a power of two", a);
    w->alignment = a;
    w->alignment_key = 1;
    return RL_GGUF_OK;
}

static rl_gguf_status scalar(rl_gguf_writer *w, uint32_t type, const void *le, uint32_t n) {
    WTRY(begin_value(w, type));
    WTRY(meta_put(w, le, n));
    return w->depth == 0 ? end_top_value(w) : RL_GGUF_OK;
}

rl_gguf_status rl_gguf_w_uint(rl_gguf_writer *w, uint32_t type, uint64_t v) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    uint64_t max;
    switch (type) {
    case RL_GGUF_TYPE_U8: max = UINT8_MAX; break;
    case RL_GGUF_TYPE_U16: max = UINT16_MAX; break;
    case RL_GGUF_TYPE_U32: max = UINT32_MAX; break;
    case RL_GGUF_TYPE_U64: max = UINT64_MAX; break;
    case RL_GGUF_TYPE_BOOL: max = 1; break;
    default:
        return wfail(w, RL_GGUF_E_TYPE, "w_uint with type %s: expected u8 u16 u32 u64 or bool",
                     rl_gguf_type_name(type) ? rl_gguf_type_name(type) : "(unknown)");
    }
    if (v > max)
        return wfail(w, type == RL_GGUF_TYPE_BOOL ? RL_GGUF_E_BOOL : RL_GGUF_E_ARG,
                     "value %" PRIu64 " does not fit %s", v, rl_gguf_type_name(type));
    uint8_t b[8];
    put64(b, v); /* little-endian: the low bytes come first */
    return scalar(w, type, b, rl_gguf_type_size(type));
}

rl_gguf_status rl_gguf_w_int(rl_gguf_writer *w, uint32_t type, int64_t v) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    int64_t lo, hi;
    switch (type) {
    case RL_GGUF_TYPE_I8: lo = INT8_MIN; hi = INT8_MAX; break;
    case RL_GGUF_TYPE_I16: lo = INT16_MIN; hi = INT16_MAX; break;
    case RL_GGUF_TYPE_I32: lo = INT32_MIN; hi = INT32_MAX; break;
    case RL_GGUF_TYPE_I64: lo = INT64_MIN; hi = INT64_MAX; break;
    default:
        return wfail(w, RL_GGUF_E_TYPE, "w_int with type %s: expected i8 i16 i32 or i64",
                     rl_gguf_type_name(type) ? rl_gguf_type_name(type) : "(unknown)");
    }
    if (v < lo || v > hi)
        return wfail(w, RL_GGUF_E_ARG, "value %" PRId64 " does not fit %s", v,
                     rl_gguf_type_name(type));
    uint8_t b[8];
    put64(b, (uint64_t)v); /* two's complement, low bytes first */
    return scalar(w, type, b, rl_gguf_type_size(type));
}

rl_gguf_status rl_gguf_w_float(rl_gguf_writer *w, uint32_t type, double v) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    uint8_t b[8];
    if (type == RL_GGUF_TYPE_F32) {
        float x = (float)v;
        memcpy(b, &x, 4);
        return scalar(w, type, b, 4);
    }
    if (type == RL_GGUF_TYPE_F64) {
        memcpy(b, &v, 8);
        return scalar(w, type, b, 8);
    }
    return wfail(w, RL_GGUF_E_TYPE, "w_float with type %s: expected f32 or f64",
                 rl_gguf_type_name(type) ? rl_gguf_type_name(type) : "(unknown)");
}

rl_gguf_status rl_gguf_w_str(rl_gguf_writer *w, const char *s, uint64_t len) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    if (!s && len)
        return wfail(w, RL_GGUF_E_ARG, "NULL string");
    if (len > RL_GGUF_MAX_STRING_LENGTH)
        return wfail(w, RL_GGUF_E_STRING_LENGTH, "string length %" PRIu64
                     ": expected at most %llu", len,
                     (unsigned long long)RL_GGUF_MAX_STRING_LENGTH);
    WTRY(begin_value(w, RL_GGUF_TYPE_STRING));
    WTRY(meta_u64(w, len));
    WTRY(meta_put(w, s, len));
    return w->depth == 0 ? end_top_value(w) : RL_GGUF_OK;
}

rl_gguf_status rl_gguf_w_array_begin(rl_gguf_writer *w, uint32_t elem_type) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    if (elem_type >= RL_GGUF_TYPE_COUNT)
        return wfail(w, RL_GGUF_E_VALUE_TYPE, "array element type %" PRIu32
                     ": expected a GGUF value type 0..12", elem_type);
    if (w->depth >= RL_GGUF_MAX_ARRAY_DEPTH)
        return wfail(w, RL_GGUF_E_ARRAY_DEPTH, "arrays nested %u deep: expected at most %d",
                     w->depth + 1, RL_GGUF_MAX_ARRAY_DEPTH);
    WTRY(begin_value(w, RL_GGUF_TYPE_ARRAY));
    WTRY(meta_u32(w, elem_type));
    uint64_t at = w->meta_len;
    WTRY(meta_u64(w, 0));
    w->stack[w->depth++] = (frame){.count_pos = at, .count = 0, .elem_type = elem_type};
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_w_array_end(rl_gguf_writer *w) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    if (w->depth == 0)
        return wfail(w, RL_GGUF_E_STATE, "array end without an open array");
    frame *fr = &w->stack[--w->depth];
    put64(w->meta + fr->count_pos, fr->count);
    return w->depth == 0 ? end_top_value(w) : RL_GGUF_OK;
}

rl_gguf_status rl_gguf_w_array_raw(rl_gguf_writer *w, const void *p, uint64_t n) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    if (w->depth == 0)
        return wfail(w, RL_GGUF_E_STATE, "raw array elements without an open array");
    frame *fr = &w->stack[w->depth - 1];
    uint32_t sz = rl_gguf_type_size(fr->elem_type);
    if (sz == 0)
        return wfail(w, RL_GGUF_E_TYPE, "raw elements for an array of %s: expected fixed-size"
                     " elements", rl_gguf_type_name(fr->elem_type));
    if (!p && n)
        return wfail(w, RL_GGUF_E_ARG, "NULL elements");
    if (n > RL_GGUF_MAX_ARRAY_LENGTH - fr->count)
        return wfail(w, RL_GGUF_E_ARRAY_LENGTH, "array longer than %llu elements",
                     (unsigned long long)RL_GGUF_MAX_ARRAY_LENGTH);
    if (fr->elem_type == RL_GGUF_TYPE_BOOL)
        for (uint64_t j = 0; j < n; j++)
            if (((const uint8_t *)p)[j] > 1)
                return wfail(w, RL_GGUF_E_BOOL, "bool element %" PRIu64 " is %u: expected 0 or 1",
                             j, ((const uint8_t *)p)[j]);
    WTRY(meta_put(w, p, n * sz));
    fr->count += n;
    return RL_GGUF_OK;
}

/* Levels of array nesting inside V (0 for a non-array). */
static unsigned val_depth(const rl_gguf_file *f, const rl_gguf_val *v) {
    if (v->type != RL_GGUF_TYPE_ARRAY)
        return 0;
    unsigned d = 0;
    if (v->elem_type == RL_GGUF_TYPE_ARRAY)
        for (uint64_t j = 0; j < v->count; j++) {
            rl_gguf_val e;
            if (rl_gguf_array_get(f, v, j, &e) == RL_GGUF_OK) {
                unsigned de = val_depth(f, &e);
                if (de > d)
                    d = de;
            }
        }
    return d + 1;
}

rl_gguf_status rl_gguf_w_copy(rl_gguf_writer *w, const rl_gguf_file *f, const rl_gguf_val *v) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    uint64_t s, e;
    if (!f || !v || rl_gguf_val_span(f, v, &s, &e) != RL_GGUF_OK || e < s ||
        e > rl_gguf_file_size(f))
        return wfail(w, RL_GGUF_E_ARG, "copy of a value that is not from that file");
    if (v->type == RL_GGUF_TYPE_ARRAY && w->depth + val_depth(f, v) > RL_GGUF_MAX_ARRAY_DEPTH)
        return wfail(w, RL_GGUF_E_ARRAY_DEPTH, "copied arrays would nest deeper than %d",
                     RL_GGUF_MAX_ARRAY_DEPTH);
    WTRY(begin_value(w, v->type));
    WTRY(meta_put(w, rl_gguf_bytes(f) + s, e - s));
    return w->depth == 0 ? end_top_value(w) : RL_GGUF_OK;
}

rl_gguf_status rl_gguf_w_copy_kv(rl_gguf_writer *w, const rl_gguf_file *f, uint64_t i) {
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    uint64_t len;
    const char *key = rl_gguf_kv_key(f, i, &len);
    rl_gguf_val v;
    if (!key || rl_gguf_kv_value(f, i, &v) != RL_GGUF_OK)
        return wfail(w, RL_GGUF_E_ARG, "copy of key %" PRIu64 ": no such key", i);
    WTRY(rl_gguf_w_key(w, key, len));
    return rl_gguf_w_copy(w, f, &v);
}

static rl_gguf_status add_tensor(rl_gguf_writer *w, const char *name, uint64_t name_len,
                                uint32_t n_dims, const int64_t *ne, uint32_t type,
                                const void *data, uint64_t nbytes, int deferred) {
    char q[128], why[RL_GGUF_MSG_SIZE];
    if (!w)
        return RL_GGUF_E_ARG;
    WTRY(w->err);
    if (w->stream)
        return wfail(w, RL_GGUF_E_STATE, "tensor %s added while the file is being streamed",
                     wquote(q, sizeof q, name, name && name_len < 64 ? name_len : 0));
    if (!name && name_len)
        return wfail(w, RL_GGUF_E_ARG, "NULL tensor name");
    if (name_len == 0)
        return wfail(w, RL_GGUF_E_TENSOR_NAME_EMPTY, "empty tensor name: expected 1 to %d bytes",
                     RL_GGUF_MAX_NAME_LENGTH);
    if (name_len > RL_GGUF_MAX_NAME_LENGTH)
        return wfail(w, RL_GGUF_E_TENSOR_NAME_LENGTH, "tensor name %s has %" PRIu64
                     " bytes: expected at most %d", wquote(q, sizeof q, name, name_len),
                     name_len, RL_GGUF_MAX_NAME_LENGTH);
    if (memchr(name, 0, name_len))
        return wfail(w, RL_GGUF_E_NAME_NUL, "tensor name %s contains a NUL byte: expected none",
                     wquote(q, sizeof q, name, name_len));
    if (wset_find(w, &w->name_set, name_at, (const uint8_t *)name, name_len) != UINT64_MAX)
        return wfail(w, RL_GGUF_E_TENSOR_NAME_DUPLICATE,
                     "tensor name %s given twice: expected unique names",
                     wquote(q, sizeof q, name, name_len));
    if (!ne)
        return wfail(w, RL_GGUF_E_ARG, "NULL dimensions");
    uint64_t want;
    rl_gguf_status st = rl_gguf_tensor_bytes(type, n_dims, ne, &want, why, sizeof why);
    if (st != RL_GGUF_OK)
        return wfail(w, st, "tensor %s: %s", wquote(q, sizeof q, name, name_len), why);
    if (deferred)
        nbytes = want;
    if (nbytes != want)
        return wfail(w, RL_GGUF_E_ARG, "tensor %s has %" PRIu64 " bytes of data: expected %"
                     PRIu64 " for its type and shape", wquote(q, sizeof q, name, name_len),
                     nbytes, want);
    if (!data && nbytes && !deferred)
        return wfail(w, RL_GGUF_E_ARG, "tensor %s: NULL data", wquote(q, sizeof q, name, name_len));
    if (w->n_t == w->t_cap) {
        uint64_t cap = w->t_cap ? 2 * w->t_cap : 16;
        wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t)
            return wfail(w, RL_GGUF_E_NOMEM, "out of memory for tensors");
        w->t = t;
        w->t_cap = cap;
    }
    wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, name_len);
    t->name_len = (uint32_t)name_len;
    t->n_dims = n_dims;
    t->type = type;
    for (uint32_t d = 0; d < RL_GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->data = deferred ? NULL : data;
    t->nbytes = nbytes;
    t->deferred = deferred;
    w->n_deferred += deferred != 0;
    w->infos_len += 8 + name_len + 4 + 8ull * n_dims + 4 + 8;
    if (!wset_add(w, &w->name_set, name_at, w->n_t - 1, w->n_t))
        return wfail(w, RL_GGUF_E_NOMEM, "out of memory for tensors");
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_w_tensor(rl_gguf_writer *w, const char *name, uint64_t name_len,
                                uint32_t n_dims, const int64_t *ne, uint32_t type,
                                const void *data, uint64_t nbytes) {
    return add_tensor(w, name, name_len, n_dims, ne, type, data, nbytes, 0);
}

rl_gguf_status rl_gguf_w_tensor_deferred(rl_gguf_writer *w, const char *name, uint64_t name_len,
                                         uint32_t n_dims, const int64_t *ne, uint32_t type) {
    return add_tensor(w, name, name_len, n_dims, ne, type, NULL, 0, 1);
}

rl_gguf_status rl_gguf_writer_error(const rl_gguf_writer *w, char *msg, size_t msgsz,
                                    uint64_t *err_off) {
    if (!w)
        return RL_GGUF_E_ARG;
    if (w->err != RL_GGUF_OK) {
        if (msg && msgsz)
            snprintf(msg, msgsz, "%s", w->errmsg);
        if (err_off)
            *err_off = w->err_off;
    }
    return w->err;
}

/* ---------------------------------------------------------------- output */

struct sink {
    rl_gguf_atomic *file; /* NULL: memory */
    uint8_t *mem;
    uint64_t mem_cap;
    uint64_t pos; /* bytes emitted so far */
    int err;      /* errno of the first failure */
    size_t buf_len;
    uint8_t buf[1 << 16];
};
typedef struct sink sink;

static void sink_flush(sink *s) {
    if (s->file && s->buf_len && !s->err)
        s->err = rl_gguf_atomic_write(s->file, s->buf, s->buf_len);
    s->buf_len = 0;
}

static void sink_put(sink *s, const void *p, uint64_t n) {
    if (s->err || n == 0)
        return;
    if (!s->file) {
        if (s->pos + n > s->mem_cap) {
            uint64_t cap = s->mem_cap ? s->mem_cap : 4096;
            while (cap < s->pos + n)
                cap *= 2;
            uint8_t *m = cap <= SIZE_MAX ? realloc(s->mem, (size_t)cap) : NULL;
            if (!m) {
                s->err = ENOMEM;
                return;
            }
            s->mem = m;
            s->mem_cap = cap;
        }
        memcpy(s->mem + s->pos, p, n);
    } else if (n > sizeof s->buf / 2) {
        sink_flush(s);
        if (!s->err)
            s->err = rl_gguf_atomic_write(s->file, p, n);
    } else {
        if (s->buf_len + n > sizeof s->buf)
            sink_flush(s);
        memcpy(s->buf + s->buf_len, p, n);
        s->buf_len += n;
    }
    if (!s->err)
        s->pos += n;
}

static void sink_zeros(sink *s, uint64_t n) {
    static const uint8_t zeros[4096];
    while (n && !s->err) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        sink_put(s, zeros, k);
        n -= k;
    }
}

static void sink_u32(sink *s, uint32_t v) {
    uint8_t b[4];
    put32(b, v);
    sink_put(s, b, 4);
}

static void sink_u64(sink *s, uint64_t v) {
    uint8_t b[8];
    put64(b, v);
    sink_put(s, b, 8);
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (a - x % a) % a; }

/* Everything that can be refused before a byte is written.  STREAMING: the
 * deferred tensors' bytes will come through the stream. */
static rl_gguf_status ready(rl_gguf_writer *w, int streaming, char *msg, size_t msgsz,
                            uint64_t *err_off) {
    if (w->err == RL_GGUF_OK && (w->depth || w->expecting_value))
        wfail(w, RL_GGUF_E_STATE, "the last metadata value is unfinished");
    if (w->err == RL_GGUF_OK && w->stream)
        wfail(w, RL_GGUF_E_STATE, "the file is already being streamed");
    if (w->err == RL_GGUF_OK && w->n_deferred && !streaming)
        wfail(w, RL_GGUF_E_STATE, "%" PRIu64 " tensor(s) without data: expected them to be "
              "streamed (rl_gguf_writer_stream_begin)", w->n_deferred);
    if (w->err == RL_GGUF_OK) {
        /* Offsets must stay representable: sum of padded sizes. */
        uint64_t off = 0;
        for (uint64_t i = 0; i < w->n_t; i++) {
            uint64_t sz = w->t[i].nbytes + pad_to(w->t[i].nbytes, w->alignment);
            if (sz > (uint64_t)INT64_MAX - off) {
                wfail(w, RL_GGUF_E_SIZE_OVERFLOW, "tensor data add up past INT64_MAX bytes");
                break;
            }
            off += sz;
        }
    }
    return rl_gguf_writer_error(w, msg, msgsz, err_off);
}

/* Header, metadata, tensor infos and, when there are tensors, the padding
 * that starts the data section. */
static void emit_head(rl_gguf_writer *w, sink *s) {
    int add_align = !w->alignment_key && !w->implicit;
    uint64_t a = w->alignment;
    sink_put(s, RL_GGUF_MAGIC, 4);
    sink_u32(s, RL_GGUF_VERSION);
    sink_u64(s, w->n_t);
    sink_u64(s, w->n_kv + (uint64_t)add_align);
    sink_put(s, w->meta, w->meta_len);
    if (add_align) {
        sink_u64(s, 17);
        sink_put(s, "general.alignment", 17);
        sink_u32(s, RL_GGUF_TYPE_U32);
        sink_u32(s, (uint32_t)a);
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        sink_u64(s, t->name_len);
        sink_put(s, t->name, t->name_len);
        sink_u32(s, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            sink_u64(s, (uint64_t)t->ne[d]);
        sink_u32(s, t->type);
        sink_u64(s, off);
        off += t->nbytes + pad_to(t->nbytes, a);
    }
    if (w->n_t) /* else no data section, no padding: as llama.cpp's vocab files */
        sink_zeros(s, pad_to(s->pos, a));
}

static void emit(rl_gguf_writer *w, sink *s) {
    emit_head(w, s);
    for (uint64_t i = 0; i < w->n_t; i++) {
        sink_put(s, w->t[i].data, w->t[i].nbytes);
        sink_zeros(s, pad_to(w->t[i].nbytes, w->alignment));
    }
    sink_flush(s);
}

static rl_gguf_status io_fail(char *msg, size_t msgsz, uint64_t *err_off, uint64_t off,
                              const char *what, int e) {
    if (msg && msgsz)
        snprintf(msg, msgsz, "at byte %" PRIu64 ": %s: %s", off, what, strerror(e));
    if (err_off)
        *err_off = off;
    return e == ENOMEM ? RL_GGUF_E_NOMEM : RL_GGUF_E_IO;
}

rl_gguf_status rl_gguf_writer_to_memory(rl_gguf_writer *w, uint8_t **out, uint64_t *size,
                                        char *msg, size_t msgsz, uint64_t *err_off) {
    if (!w || !out || !size)
        return RL_GGUF_E_ARG;
    *out = NULL;
    *size = 0;
    WTRY(ready(w, 0, msg, msgsz, err_off));
    sink *s = calloc(1, sizeof *s);
    if (!s)
        return io_fail(msg, msgsz, err_off, 0, "out of memory", ENOMEM);
    emit(w, s);
    if (s->err) {
        rl_gguf_status st = io_fail(msg, msgsz, err_off, s->pos, "cannot build the file", s->err);
        free(s->mem);
        free(s);
        return st;
    }
    *out = s->mem ? s->mem : malloc(1);
    *size = s->pos;
    free(s);
    return *out ? RL_GGUF_OK : io_fail(msg, msgsz, err_off, 0, "out of memory", ENOMEM);
}

rl_gguf_status rl_gguf_writer_write(rl_gguf_writer *w, const char *path, char *msg,
                                    size_t msgsz, uint64_t *err_off) {
    if (!w || !path || !*path)
        return RL_GGUF_E_ARG;
    WTRY(ready(w, 0, msg, msgsz, err_off));

    rl_gguf_atomic file;
    char why[RL_GGUF_MSG_SIZE];
    int e = rl_gguf_atomic_begin(&file, path, why, sizeof why);
    if (e) {
        if (msg && msgsz)
            snprintf(msg, msgsz, "at byte 0: %s", why);
        if (err_off)
            *err_off = 0;
        return e == ENOMEM ? RL_GGUF_E_NOMEM : RL_GGUF_E_IO;
    }
    sink *s = calloc(1, sizeof *s);
    if (!s) {
        rl_gguf_atomic_abort(&file);
        return io_fail(msg, msgsz, err_off, 0, "out of memory", ENOMEM);
    }
    s->file = &file;
    emit(w, s);
    uint64_t pos = s->pos;
    free(s);
    e = rl_gguf_atomic_commit(&file, msg, msgsz);
    if (e && err_off)
        *err_off = pos;
    return e ? (e == ENOMEM ? RL_GGUF_E_NOMEM : RL_GGUF_E_IO) : RL_GGUF_OK;
}

/* ---------------------------------------------------------------- streaming */

/* Writes the tensors from the stream's position on that have their bytes
 * already (not deferred), each followed by its padding. */
static void stream_skip_given(rl_gguf_writer *w) {
    while (w->stream_t < w->n_t && (!w->t[w->stream_t].deferred || !w->t[w->stream_t].nbytes)) {
        const wtensor *t = &w->t[w->stream_t++];
        sink_put(w->stream, t->data, t->nbytes);
        sink_zeros(w->stream, pad_to(t->nbytes, w->alignment));
    }
}

rl_gguf_status rl_gguf_writer_stream_begin(rl_gguf_writer *w, const char *path, char *msg,
                                           size_t msgsz, uint64_t *err_off) {
    if (!w || !path || !*path)
        return RL_GGUF_E_ARG;
    WTRY(ready(w, 1, msg, msgsz, err_off));
    rl_gguf_atomic *file = calloc(1, sizeof *file);
    sink *s = calloc(1, sizeof *s);
    if (!file || !s) {
        free(file);
        free(s);
        return io_fail(msg, msgsz, err_off, 0, "out of memory", ENOMEM);
    }
    char why[RL_GGUF_MSG_SIZE];
    int e = rl_gguf_atomic_begin(file, path, why, sizeof why);
    if (e) {
        free(file);
        free(s);
        if (msg && msgsz)
            snprintf(msg, msgsz, "at byte 0: %s", why);
        if (err_off)
            *err_off = 0;
        return e == ENOMEM ? RL_GGUF_E_NOMEM : RL_GGUF_E_IO;
    }
    s->file = file;
    w->stream = s;
    w->stream_file = file;
    w->stream_t = 0;
    w->stream_done = 0;
    emit_head(w, s);
    stream_skip_given(w);
    return stream_status(w, msg, msgsz, err_off);
}

/* The stream's sticky I/O failure, if any, as a status with MSG. */
static rl_gguf_status stream_status(rl_gguf_writer *w, char *msg, size_t msgsz,
                                    uint64_t *err_off) {
    if (w->stream && w->stream->err)
        return io_fail(msg, msgsz, err_off, w->stream->pos, "cannot write", w->stream->err);
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_writer_stream_put(rl_gguf_writer *w, const void *p, uint64_t n,
                                         char *msg, size_t msgsz, uint64_t *err_off) {
    char q[128];
    if (!w || (!p && n))
        return RL_GGUF_E_ARG;
    if (!w->stream) {
        if (msg && msgsz)
            snprintf(msg, msgsz, "no stream is open: expected rl_gguf_writer_stream_begin first");
        return RL_GGUF_E_STATE;
    }
    if (w->stream_t >= w->n_t) {
        if (msg && msgsz)
            snprintf(msg, msgsz, "at byte %" PRIu64 ": %" PRIu64 " bytes given after the last "
                     "tensor: expected none", w->stream->pos, n);
        return RL_GGUF_E_ARG;
    }
    wtensor *t = &w->t[w->stream_t];
    if (n > t->nbytes - w->stream_done) {
        if (msg && msgsz)
            snprintf(msg, msgsz, "at byte %" PRIu64 ": tensor %s: %" PRIu64 " bytes given with %"
                     PRIu64 " of its %" PRIu64 " left: expected at most that", w->stream->pos,
                     wquote(q, sizeof q, t->name, t->name_len), n, t->nbytes - w->stream_done,
                     t->nbytes);
        return RL_GGUF_E_ARG;
    }
    sink_put(w->stream, p, n);
    w->stream_done += n;
    if (w->stream_done == t->nbytes) {
        sink_zeros(w->stream, pad_to(t->nbytes, w->alignment));
        w->stream_t++;
        w->stream_done = 0;
        stream_skip_given(w);
    }
    return stream_status(w, msg, msgsz, err_off);
}

rl_gguf_status rl_gguf_writer_stream_end(rl_gguf_writer *w, char *msg, size_t msgsz,
                                         uint64_t *err_off) {
    char q[128];
    if (!w)
        return RL_GGUF_E_ARG;
    if (!w->stream) {
        if (msg && msgsz)
            snprintf(msg, msgsz, "no stream is open: expected rl_gguf_writer_stream_begin first");
        return RL_GGUF_E_STATE;
    }
    if (w->stream_t < w->n_t) {
        const wtensor *t = &w->t[w->stream_t];
        if (msg && msgsz)
            snprintf(msg, msgsz, "at byte %" PRIu64 ": tensor %s has %" PRIu64 " of its %" PRIu64
                     " bytes: expected all of them before the end", w->stream->pos,
                     wquote(q, sizeof q, t->name, t->name_len), w->stream_done, t->nbytes);
        if (err_off)
            *err_off = w->stream->pos;
        rl_gguf_writer_stream_abort(w);
        return RL_GGUF_E_STATE;
    }
    sink_flush(w->stream);
    rl_gguf_status st = stream_status(w, msg, msgsz, err_off);
    if (st != RL_GGUF_OK) {
        rl_gguf_writer_stream_abort(w);
        return st;
    }
    uint64_t pos = w->stream->pos;
    int e = rl_gguf_atomic_commit(w->stream_file, msg, msgsz);
    if (e && err_off)
        *err_off = pos;
    free(w->stream_file);
    free(w->stream);
    w->stream_file = NULL;
    w->stream = NULL;
    return e ? (e == ENOMEM ? RL_GGUF_E_NOMEM : RL_GGUF_E_IO) : RL_GGUF_OK;
}

void rl_gguf_writer_stream_abort(rl_gguf_writer *w) {
    if (!w || !w->stream)
        return;
    rl_gguf_atomic_abort(w->stream_file);
    free(w->stream_file);
    free(w->stream);
    w->stream_file = NULL;
    w->stream = NULL;
}
