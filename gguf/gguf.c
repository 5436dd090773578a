/* gguf.c - the GGUF reader (see gguf.h for the layout and the decisions).
 *
 * One pass over the bytes checks every field before it is used and builds
 * small index tables: one record per key, one per tensor, one slot per
 * element of every array of strings or arrays (so element access is O(1)),
 * and name-sorted permutations for duplicate detection and O(log n) lookup.
 * Sorting (a merge sort: n log n whatever the input) rather than hashing
 * keeps hostile files with many colliding names from turning the checks
 * quadratic.  Every table is bounded by a multiple of the file size.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The smallest encodings, used to refuse counts that cannot fit. */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)               /* key len, key, type, u8 */
#define MIN_TENSOR_INFO_BYTES (8 + 1 + 4 + 8 + 4 + 8) /* 1 dim, 1-byte name */
#define ARRAY_HEAD_BYTES (4 + 8)                    /* element type + count */

_Static_assert(RL_GGUF_MAX_KV_COUNT <= UINT32_MAX &&
                   RL_GGUF_MAX_TENSOR_COUNT <= UINT32_MAX,
               "sorted permutations hold 32-bit indices");

typedef struct kv_rec {
    uint64_t key_off; /* absolute offset of the key bytes */
    uint64_t key_len;
    rl_gguf_val val;
} kv_rec;

typedef struct tensor_rec {
    uint64_t name_off, name_len;
    uint64_t offset_field; /* where the tensor's offset is written */
    int64_t ne[RL_GGUF_MAX_DIMS];
    uint64_t offset, nbytes, nelem;
    uint32_t n_dims, type;
} tensor_rec;

struct rl_gguf_file {
    const uint8_t *base;
    uint64_t size;
    void *map; /* our mmap, or NULL for a caller's buffer */
    size_t map_len;
    int fd;    /* the file mapped, kept open for rl_gguf_fd; -1 for a buffer */
    int refs;
    uint32_t version, alignment;
    uint64_t header_end, data_offset;
    uint64_t n_kv, n_tensors;
    kv_rec *kv;
    tensor_rec *t;
    uint32_t *kv_sorted, *t_sorted;
    /* Arrays of strings: one slot per element, the offset of its length
     * field.  Arrays of arrays: two slots per element, the offset of its
     * element-type field and the element's own first slot. */
    uint64_t *tab;
    uint64_t tab_len, tab_cap;
};

/* ------------------------------------------------------------- utilities */

static uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t ld64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* NAME as a quoted, escaped, shortened string for messages. */
static const char *quote(char *out, size_t outsz, const uint8_t *s, uint64_t len) {
    size_t o = 0;
    const uint64_t show = 48;
    out[o++] = '\'';
    for (uint64_t i = 0; i < len && i < show && o + 8 < outsz; i++) {
        uint8_t c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, outsz - o, "\\x%02x", c);
    }
    if (len > show && o + 4 < outsz) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o++] = '\'';
    out[o] = 0;
    return out;
}

typedef struct rd {
    rl_gguf_file *f;
    const uint8_t *p;
    uint64_t size, pos;
    char *msg;
    size_t msgsz;
    uint64_t *err_off;
} rd;

static rl_gguf_status fail(rd *r, rl_gguf_status st, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static rl_gguf_status fail(rd *r, rl_gguf_status st, uint64_t off, const char *fmt, ...) {
    if (r->msg && r->msgsz) {
        int n = snprintf(r->msg, r->msgsz, "at byte %" PRIu64 ": ", off);
        if (n >= 0 && (size_t)n < r->msgsz) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->msg + n, r->msgsz - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    if (r->err_off)
        *r->err_off = off;
    return st;
}

static uint64_t avail(const rd *r) { return r->size - r->pos; }

/* N more bytes of WHAT must be there. */
static rl_gguf_status need(rd *r, uint64_t n, const char *what) {
    if (n <= avail(r))
        return RL_GGUF_OK;
    return fail(r, RL_GGUF_E_TRUNCATED, r->pos,
                "expected %" PRIu64 " bytes of %s, found %" PRIu64
                " before the end of the file (%" PRIu64 " bytes)",
                n, what, avail(r), r->size);
}

#define TRY(x)                                                               \
    do {                                                                     \
        rl_gguf_status st_ = (x);                                            \
        if (st_ != RL_GGUF_OK)                                               \
            return st_;                                                      \
    } while (0)

/* Stable bottom-up merge sort of indices, n log n for every input. */
typedef int (*idx_cmp)(const rl_gguf_file *f, uint32_t a, uint32_t b);

static void msort(uint32_t *a, uint32_t *tmp, uint64_t n, idx_cmp cmp, const rl_gguf_file *f) {
    for (uint64_t w = 1; w < n; w *= 2) {
        for (uint64_t lo = 0; lo < n; lo += 2 * w) {
            uint64_t mid = lo + w < n ? lo + w : n;
            uint64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = cmp(f, a[j], a[i]) < 0 ? a[j++] : a[i++];
            while (i < mid)
                tmp[k++] = a[i++];
            while (j < hi)
                tmp[k++] = a[j++];
        }
        memcpy(a, tmp, n * sizeof *a);
    }
}

static int bytes_cmp(const uint8_t *a, uint64_t al, const uint8_t *b, uint64_t bl) {
    uint64_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

static int kv_cmp(const rl_gguf_file *f, uint32_t a, uint32_t b) {
    return bytes_cmp(f->base + f->kv[a].key_off, f->kv[a].key_len,
                     f->base + f->kv[b].key_off, f->kv[b].key_len);
}

static int name_cmp(const rl_gguf_file *f, uint32_t a, uint32_t b) {
    return bytes_cmp(f->base + f->t[a].name_off, f->t[a].name_len,
                     f->base + f->t[b].name_off, f->t[b].name_len);
}

static int off_cmp(const rl_gguf_file *f, uint32_t a, uint32_t b) {
    if (f->t[a].offset != f->t[b].offset)
        return f->t[a].offset < f->t[b].offset ? -1 : 1;
    return 0;
}

/* A permutation of 0..n-1 sorted by CMP, or NULL when out of memory. */
static uint32_t *sorted_perm(uint64_t n, idx_cmp cmp, const rl_gguf_file *f) {
    uint32_t *a = malloc((n ? n : 1) * sizeof *a);
    uint32_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!a || !tmp) {
        free(a);
        free(tmp);
        return NULL;
    }
    for (uint64_t i = 0; i < n; i++)
        a[i] = (uint32_t)i;
    msort(a, tmp, n, cmp, f);
    free(tmp);
    return a;
}

/* ---------------------------------------------------------- metadata parse */

static rl_gguf_status tab_reserve(rd *r, uint64_t n, uint64_t *first) {
    rl_gguf_file *f = r->f;
    /* n is bounded by the bytes left (every slot stands for >= 6 bytes of
     * file), so tab_len + n cannot overflow. */
    if (f->tab_len + n > f->tab_cap) {
        uint64_t cap = f->tab_cap ? f->tab_cap : 64;
        while (cap < f->tab_len + n)
            cap *= 2;
        uint64_t *t = realloc(f->tab, cap * sizeof *t);
        if (!t)
            return fail(r, RL_GGUF_E_NOMEM, r->pos, "out of memory indexing an array of %" PRIu64
                        " elements", n);
        f->tab = t;
        f->tab_cap = cap;
    }
    *first = f->tab_len;
    f->tab_len += n;
    return RL_GGUF_OK;
}

static rl_gguf_status parse_value(rd *r, uint32_t type, unsigned depth, rl_gguf_val *out);

/* An array body (element type, count, elements) at r->pos.  DEPTH is this
 * array's nesting level, 1 for an array that is a key's value. */
static rl_gguf_status parse_array(rd *r, unsigned depth, rl_gguf_val *out) {
    uint64_t at = r->pos;
    TRY(need(r, 4, "array element type"));
    uint32_t et = ld32(r->p + r->pos);
    if (et >= RL_GGUF_TYPE_COUNT)
        return fail(r, RL_GGUF_E_VALUE_TYPE, at,
                    "array element type %" PRIu32 ": expected a GGUF value type 0..12", et);
    if (et == RL_GGUF_TYPE_ARRAY && depth + 1 > RL_GGUF_MAX_ARRAY_DEPTH)
        return fail(r, RL_GGUF_E_ARRAY_DEPTH, at,
                    "arrays nested %u deep: expected at most %d levels", depth + 1,
                    RL_GGUF_MAX_ARRAY_DEPTH);
    r->pos += 4;
    uint64_t at_n = r->pos;
    TRY(need(r, 8, "array length"));
    uint64_t n = ld64(r->p + r->pos);
    r->pos += 8;
    if (n > RL_GGUF_MAX_ARRAY_LENGTH)
        return fail(r, RL_GGUF_E_ARRAY_LENGTH, at_n,
                    "array length %" PRIu64 ": expected at most %llu", n,
                    (unsigned long long)RL_GGUF_MAX_ARRAY_LENGTH);
    uint64_t min = et == RL_GGUF_TYPE_STRING  ? 8
                   : et == RL_GGUF_TYPE_ARRAY ? ARRAY_HEAD_BYTES
                                              : rl_gguf_type_size(et);
    if (n > avail(r) / min)
        return fail(r, RL_GGUF_E_ARRAY_LENGTH, at_n,
                    "array of %" PRIu64 " %s needs at least %" PRIu64
                    " bytes, found %" PRIu64 " before the end of the file",
                    n, rl_gguf_type_name(et), n * min, avail(r));
    out->type = RL_GGUF_TYPE_ARRAY;
    out->elem_type = et;
    out->count = n;
    out->offset = r->pos;
    out->index = 0;
    if (et == RL_GGUF_TYPE_BOOL) {
        for (uint64_t j = 0; j < n; j++)
            if (r->p[r->pos + j] > 1)
                return fail(r, RL_GGUF_E_BOOL, r->pos + j,
                            "bool array element %" PRIu64 " is %u: expected 0 or 1", j,
                            r->p[r->pos + j]);
        r->pos += n;
    } else if (et == RL_GGUF_TYPE_STRING) {
        TRY(tab_reserve(r, n, &out->index));
        for (uint64_t j = 0; j < n; j++) {
            rl_gguf_val e;
            r->f->tab[out->index + j] = r->pos;
            TRY(parse_value(r, RL_GGUF_TYPE_STRING, depth, &e));
        }
    } else if (et == RL_GGUF_TYPE_ARRAY) {
        TRY(tab_reserve(r, 2 * n, &out->index));
        for (uint64_t j = 0; j < n; j++) {
            rl_gguf_val e;
            r->f->tab[out->index + 2 * j] = r->pos;
            TRY(parse_array(r, depth + 1, &e));
            r->f->tab[out->index + 2 * j + 1] = e.index;
        }
    } else {
        r->pos += n * min; /* checked above: n * min <= avail */
    }
    return RL_GGUF_OK;
}

static rl_gguf_status parse_value(rd *r, uint32_t type, unsigned depth, rl_gguf_val *out) {
    out->type = type;
    out->elem_type = 0;
    out->count = 1;
    out->index = 0;
    out->offset = r->pos;
    switch (type) {
    case RL_GGUF_TYPE_STRING: {
        uint64_t at = r->pos;
        TRY(need(r, 8, "string length"));
        uint64_t len = ld64(r->p + r->pos);
        r->pos += 8;
        if (len > RL_GGUF_MAX_STRING_LENGTH)
            return fail(r, RL_GGUF_E_STRING_LENGTH, at,
                        "string length %" PRIu64 ": expected at most %llu", len,
                        (unsigned long long)RL_GGUF_MAX_STRING_LENGTH);
        if (len > avail(r))
            return fail(r, RL_GGUF_E_STRING_LENGTH, at,
                        "string length %" PRIu64 " runs past the end of the file: expected"
                        " at most the %" PRIu64 " bytes that remain", len, avail(r));
        out->offset = r->pos;
        out->count = len;
        r->pos += len;
        return RL_GGUF_OK;
    }
    case RL_GGUF_TYPE_ARRAY:
        return parse_array(r, depth + 1, out);
    case RL_GGUF_TYPE_BOOL:
        TRY(need(r, 1, "bool value"));
        if (r->p[r->pos] > 1)
            return fail(r, RL_GGUF_E_BOOL, r->pos, "bool value %u: expected 0 or 1",
                        r->p[r->pos]);
        r->pos += 1;
        return RL_GGUF_OK;
    default: {
        uint32_t sz = rl_gguf_type_size(type);
        char what[32];
        snprintf(what, sizeof what, "%s value", rl_gguf_type_name(type));
        TRY(need(r, sz, what));
        r->pos += sz;
        return RL_GGUF_OK;
    }
    }
}

static rl_gguf_status parse_kvs(rd *r) {
    rl_gguf_file *f = r->f;
    char q[128];
    for (uint64_t i = 0; i < f->n_kv; i++) {
        kv_rec *kv = &f->kv[i];
        uint64_t at = r->pos;
        TRY(need(r, 8, "key length"));
        uint64_t len = ld64(r->p + r->pos);
        r->pos += 8;
        if (len == 0)
            return fail(r, RL_GGUF_E_KEY_EMPTY, at,
                        "key %" PRIu64 " has length 0: expected a non-empty key", i);
        if (len > RL_GGUF_MAX_KEY_LENGTH)
            return fail(r, RL_GGUF_E_KEY_LENGTH, at,
                        "key %" PRIu64 " length %" PRIu64 ": expected at most %u", i, len,
                        RL_GGUF_MAX_KEY_LENGTH);
        if (len > avail(r))
            return fail(r, RL_GGUF_E_KEY_LENGTH, at,
                        "key %" PRIu64 " length %" PRIu64 " runs past the end of the file:"
                        " expected at most the %" PRIu64 " bytes that remain", i, len,
                        avail(r));
        kv->key_off = r->pos;
        kv->key_len = len;
        /* A C reader would stop at the NUL: a truncated or duplicate key. */
        if (memchr(r->p + r->pos, 0, len))
            return fail(r, RL_GGUF_E_NAME_NUL, at,
                        "key %s contains a NUL byte: expected a key without NUL",
                        quote(q, sizeof q, r->p + kv->key_off, len));
        r->pos += len;
        uint64_t at_t = r->pos;
        TRY(need(r, 4, "value type"));
        uint32_t type = ld32(r->p + r->pos);
        r->pos += 4;
        if (type >= RL_GGUF_TYPE_COUNT)
            return fail(r, RL_GGUF_E_VALUE_TYPE, at_t,
                        "key %s has value type %" PRIu32 ": expected a GGUF value type"
                        " 0..12", quote(q, sizeof q, r->p + kv->key_off, len), type);
        TRY(parse_value(r, type, 0, &kv->val));
    }
    f->kv_sorted = sorted_perm(f->n_kv, kv_cmp, f);
    if (!f->kv_sorted)
        return fail(r, RL_GGUF_E_NOMEM, 16, "out of memory sorting %" PRIu64 " keys", f->n_kv);
    for (uint64_t k = 1; k < f->n_kv; k++) {
        uint32_t a = f->kv_sorted[k - 1], b = f->kv_sorted[k];
        if (kv_cmp(f, a, b) == 0) {
            /* The stable sort keeps file order among equals: b is later. */
            return fail(r, RL_GGUF_E_KEY_DUPLICATE, f->kv[b].key_off - 8,
                        "key %s appears again (first at byte %" PRIu64
                        "): expected unique keys",
                        quote(q, sizeof q, r->p + f->kv[b].key_off, f->kv[b].key_len),
                        f->kv[a].key_off - 8);
        }
    }
    f->alignment = RL_GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = rl_gguf_find_key(f, "general.alignment", 17);
    if (ai >= 0) {
        const kv_rec *kv = &f->kv[ai];
        if (kv->val.type != RL_GGUF_TYPE_U32)
            return fail(r, RL_GGUF_E_ALIGNMENT_TYPE, kv->key_off + kv->key_len,
                        "general.alignment has type %s: expected u32",
                        rl_gguf_type_name(kv->val.type));
        uint32_t a = ld32(r->p + kv->val.offset);
        if (a == 0 || (a & (a - 1)) != 0)
            return fail(r, RL_GGUF_E_ALIGNMENT, kv->val.offset,
                        "general.alignment is %" PRIu32 ": expected a power of two", a);
        f->alignment = a;
    }
    return RL_GGUF_OK;
}

/* ----------------------------------------------------------- tensor parse */

static rl_gguf_status parse_tensor(rd *r, uint64_t i, tensor_rec *t) {
    char q[128];
    uint64_t at = r->pos;
    TRY(need(r, 8, "tensor name length"));
    uint64_t len = ld64(r->p + r->pos);
    if (len == 0)
        return fail(r, RL_GGUF_E_TENSOR_NAME_EMPTY, at,
                    "tensor %" PRIu64 " has an empty name: expected 1 to %d bytes", i,
                    RL_GGUF_MAX_NAME_LENGTH);
    if (len > RL_GGUF_MAX_NAME_LENGTH)
        return fail(r, RL_GGUF_E_TENSOR_NAME_LENGTH, at,
                    "tensor %" PRIu64 " name length %" PRIu64 ": expected at most %d"
                    " (ggml's limit)", i, len, RL_GGUF_MAX_NAME_LENGTH);
    r->pos += 8;
    TRY(need(r, len, "tensor name"));
    t->name_off = r->pos;
    t->name_len = len;
    if (memchr(r->p + r->pos, 0, len))
        return fail(r, RL_GGUF_E_NAME_NUL, at,
                    "tensor name %s contains a NUL byte: expected a name without NUL",
                    quote(q, sizeof q, r->p + t->name_off, len));
    r->pos += len;
    const char *nm = quote(q, sizeof q, r->p + t->name_off, len);

    uint64_t at_nd = r->pos;
    TRY(need(r, 4, "tensor n_dims"));
    t->n_dims = ld32(r->p + r->pos);
    if (t->n_dims == 0 || t->n_dims > RL_GGUF_MAX_DIMS)
        return fail(r, RL_GGUF_E_N_DIMS, at_nd,
                    "tensor %s has n_dims %" PRIu32 ": expected 1 to 4", nm, t->n_dims);
    r->pos += 4;
    uint64_t at_ne = r->pos;
    TRY(need(r, 8ull * t->n_dims, "tensor dimensions"));
    for (uint32_t d = 0; d < RL_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < t->n_dims ? (int64_t)ld64(r->p + r->pos) : 1;
        if (d < t->n_dims)
            r->pos += 8;
    }
    uint64_t at_ty = r->pos;
    TRY(need(r, 4, "tensor type"));
    t->type = ld32(r->p + r->pos);
    r->pos += 4;

    /* The writer's checks (rl_gguf_tensor_check), each failure placed at
     * the field it is about. */
    char why[200];
    uint32_t bad_dim = 0;
    rl_gguf_status st = rl_gguf_tensor_check(t->type, t->n_dims, t->ne, &t->nbytes, &bad_dim,
                                             why, sizeof why);
    if (st != RL_GGUF_OK) {
        uint64_t at = st == RL_GGUF_E_DIM_NEGATIVE || st == RL_GGUF_E_DIM_OVERFLOW
                          ? at_ne + 8ull * bad_dim
                      : st == RL_GGUF_E_BLOCK_SIZE ? at_ne
                                                   : at_ty;
        return fail(r, st, at, "tensor %s: %s", nm, why);
    }
    t->nelem = 1; /* cannot overflow: the check above bounds it */
    for (uint32_t d = 0; d < t->n_dims; d++)
        t->nelem *= (uint64_t)t->ne[d];

    t->offset_field = r->pos;
    TRY(need(r, 8, "tensor offset"));
    t->offset = ld64(r->p + r->pos);
    r->pos += 8;
    if (t->offset % r->f->alignment) {
        uint64_t down = t->offset - t->offset % r->f->alignment;
        uint64_t up = down + r->f->alignment;
        return fail(r, RL_GGUF_E_TENSOR_ALIGNMENT, t->offset_field,
                    "tensor %s has offset %" PRIu64 ": expected a multiple of the"
                    " alignment %" PRIu32 " (such as %" PRIu64 ")", nm, t->offset,
                    r->f->alignment, up > down ? up : down);
    }
    return RL_GGUF_OK;
}

static rl_gguf_status parse_tensors(rd *r) {
    rl_gguf_file *f = r->f;
    char q[128], q2[128];
    for (uint64_t i = 0; i < f->n_tensors; i++)
        TRY(parse_tensor(r, i, &f->t[i]));
    f->header_end = r->pos;
    /* Pad to the alignment; header_end <= size < 2^64 - 2^32, no overflow. */
    uint64_t a = f->alignment;
    f->data_offset = f->header_end + (a - f->header_end % a) % a;

    f->t_sorted = sorted_perm(f->n_tensors, name_cmp, f);
    if (!f->t_sorted)
        return fail(r, RL_GGUF_E_NOMEM, 8, "out of memory sorting %" PRIu64 " tensors",
                    f->n_tensors);
    for (uint64_t k = 1; k < f->n_tensors; k++) {
        const tensor_rec *ta = &f->t[f->t_sorted[k - 1]], *tb = &f->t[f->t_sorted[k]];
        if (name_cmp(f, f->t_sorted[k - 1], f->t_sorted[k]) == 0)
            return fail(r, RL_GGUF_E_TENSOR_NAME_DUPLICATE, tb->name_off - 8,
                        "tensor name %s appears again (first at byte %" PRIu64
                        "): expected unique names",
                        quote(q, sizeof q, r->p + tb->name_off, tb->name_len),
                        ta->name_off - 8);
    }

    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const tensor_rec *t = &f->t[i];
        uint64_t start = f->data_offset + t->offset;
        if (start < t->offset || start > r->size || t->nbytes > r->size - start)
            return fail(r, RL_GGUF_E_TENSOR_BOUNDS, t->offset_field,
                        "tensor %s data at offset %" PRIu64 " (+%" PRIu64 " bytes) from"
                        " the data section at byte %" PRIu64 ": expected it to end"
                        " within the file (%" PRIu64 " bytes)",
                        quote(q, sizeof q, r->p + t->name_off, t->name_len), t->offset,
                        t->nbytes, f->data_offset, r->size);
    }

    /* Overlaps: sorted by offset, each non-empty tensor must start at or
     * after the furthest end seen so far. */
    uint32_t *by_off = sorted_perm(f->n_tensors, off_cmp, f);
    if (!by_off)
        return fail(r, RL_GGUF_E_NOMEM, 8, "out of memory sorting %" PRIu64 " tensors",
                    f->n_tensors);
    uint64_t end = 0;
    int64_t who = -1;
    for (uint64_t k = 0; k < f->n_tensors; k++) {
        const tensor_rec *t = &f->t[by_off[k]];
        if (t->nbytes == 0)
            continue;
        if (who >= 0 && t->offset < end) {
            const tensor_rec *o = &f->t[who];
            rl_gguf_status st = fail(
                r, RL_GGUF_E_TENSOR_OVERLAP, t->offset_field,
                "tensor %s data [%" PRIu64 ", %" PRIu64 ") overlaps tensor %s [%" PRIu64
                ", %" PRIu64 "): expected disjoint tensors",
                quote(q, sizeof q, r->p + t->name_off, t->name_len), t->offset,
                t->offset + t->nbytes, quote(q2, sizeof q2, r->p + o->name_off, o->name_len),
                o->offset, o->offset + o->nbytes);
            free(by_off);
            return st;
        }
        if (t->offset + t->nbytes > end) {
            end = t->offset + t->nbytes;
            who = by_off[k];
        }
    }
    free(by_off);
    return RL_GGUF_OK;
}

/* ------------------------------------------------------------ file parse */

static rl_gguf_status parse_header(rd *r) {
    rl_gguf_file *f = r->f;
    TRY(need(r, 4, "magic"));
    const uint8_t *m = r->p;
    if (memcmp(m, "GGUF", 4) != 0) {
        if (memcmp(m, "FUGG", 4) == 0)
            return fail(r, RL_GGUF_E_MAGIC, 0,
                        "magic 'FUGG': expected 'GGUF'; byte-swapped (big-endian?)");
        char q[64];
        return fail(r, RL_GGUF_E_MAGIC, 0,
                    "magic %s (%02x %02x %02x %02x): expected 'GGUF' (47 47 55 46)",
                    quote(q, sizeof q, m, 4), m[0], m[1], m[2], m[3]);
    }
    r->pos = 4;
    TRY(need(r, 4, "version"));
    uint32_t v = ld32(r->p + 4);
    if (v != 2 && v != 3) {
        if (v != 0 && (v & 0xffffu) == 0)
            return fail(r, RL_GGUF_E_VERSION, 4,
                        "version %" PRIu32 " (0x%08" PRIx32 "): expected 2 or 3; looks"
                        " byte-swapped (big-endian?)", v, v);
        if (v == 1)
            return fail(r, RL_GGUF_E_VERSION, 4,
                        "version 1 (32-bit counts) is not supported: expected 2 or 3");
        return fail(r, RL_GGUF_E_VERSION, 4, "version %" PRIu32 ": expected 2 or 3", v);
    }
    f->version = v;
    r->pos = 8;
    TRY(need(r, 16, "tensor and key counts"));
    f->n_tensors = ld64(r->p + 8);
    f->n_kv = ld64(r->p + 16);
    r->pos = RL_GGUF_HEADER_SIZE;
    if (f->n_tensors > RL_GGUF_MAX_TENSOR_COUNT)
        return fail(r, RL_GGUF_E_TENSOR_COUNT, 8,
                    "tensor count %" PRIu64 ": expected at most %u", f->n_tensors,
                    RL_GGUF_MAX_TENSOR_COUNT);
    if (f->n_kv > RL_GGUF_MAX_KV_COUNT)
        return fail(r, RL_GGUF_E_KV_COUNT, 16, "key count %" PRIu64 ": expected at most %u",
                    f->n_kv, RL_GGUF_MAX_KV_COUNT);
    /* Both counts are below 2^20: these products cannot overflow. */
    if (f->n_kv * MIN_KV_BYTES > avail(r))
        return fail(r, RL_GGUF_E_KV_COUNT, 16,
                    "key count %" PRIu64 " needs at least %" PRIu64 " bytes, found %" PRIu64
                    " after the header", f->n_kv, f->n_kv * MIN_KV_BYTES, avail(r));
    if (f->n_kv * MIN_KV_BYTES + f->n_tensors * MIN_TENSOR_INFO_BYTES > avail(r))
        return fail(r, RL_GGUF_E_TENSOR_COUNT, 8,
                    "tensor count %" PRIu64 " needs at least %" PRIu64 " bytes, found %" PRIu64
                    " after the header and keys", f->n_tensors,
                    f->n_tensors * MIN_TENSOR_INFO_BYTES, avail(r) - f->n_kv * MIN_KV_BYTES);
    return RL_GGUF_OK;
}

static rl_gguf_status parse_all(rd *r) {
    rl_gguf_file *f = r->f;
    TRY(parse_header(r));
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    if (!f->kv)
        return fail(r, RL_GGUF_E_NOMEM, 16, "out of memory for %" PRIu64 " keys", f->n_kv);
    TRY(parse_kvs(r));
    if (f->n_tensors * MIN_TENSOR_INFO_BYTES > avail(r))
        return fail(r, RL_GGUF_E_TENSOR_COUNT, 8,
                    "tensor count %" PRIu64 " needs at least %" PRIu64
                    " bytes, found %" PRIu64 " after the metadata (at byte %" PRIu64 ")",
                    f->n_tensors, f->n_tensors * MIN_TENSOR_INFO_BYTES, avail(r), r->pos);
    f->t = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->t);
    if (!f->t)
        return fail(r, RL_GGUF_E_NOMEM, 8, "out of memory for %" PRIu64 " tensors",
                    f->n_tensors);
    return parse_tensors(r);
}

static void file_free(rl_gguf_file *f) {
    if (!f)
        return;
    free(f->kv);
    free(f->t);
    free(f->kv_sorted);
    free(f->t_sorted);
    free(f->tab);
    if (f->map)
        munmap(f->map, f->map_len);
    if (f->fd >= 0)
        close(f->fd);
    free(f);
}

static const uint8_t empty_file[1];

static rl_gguf_status parse_into(rl_gguf_file *f, rl_gguf_file **out, char *msg, size_t msgsz,
                                 uint64_t *err_off) {
    rd r = {.f = f, .p = f->base, .size = f->size, .pos = 0,
            .msg = msg, .msgsz = msgsz, .err_off = err_off};
    rl_gguf_status st = parse_all(&r);
    if (st != RL_GGUF_OK) {
        file_free(f);
        return st;
    }
    f->refs = 1;
    *out = f;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_parse(const void *buf, uint64_t size, rl_gguf_file **out, char *msg,
                             size_t msgsz, uint64_t *err_off) {
    rd r = {.msg = msg, .msgsz = msgsz, .err_off = err_off};
    if (!out)
        return fail(&r, RL_GGUF_E_ARG, 0, "NULL result pointer");
    *out = NULL;
    if (!buf && size)
        return fail(&r, RL_GGUF_E_ARG, 0, "NULL buffer of %" PRIu64 " bytes", size);
    rl_gguf_file *f = calloc(1, sizeof *f);
    if (!f)
        return fail(&r, RL_GGUF_E_NOMEM, 0, "out of memory");
    f->base = size ? buf : empty_file;
    f->size = size;
    f->fd = -1;
    return parse_into(f, out, msg, msgsz, err_off);
}

rl_gguf_status rl_gguf_open(const char *path, rl_gguf_file **out, char *msg, size_t msgsz,
                            uint64_t *err_off) {
    rd r = {.msg = msg, .msgsz = msgsz, .err_off = err_off};
    if (!out)
        return fail(&r, RL_GGUF_E_ARG, 0, "NULL result pointer");
    *out = NULL;
    if (!path)
        return fail(&r, RL_GGUF_E_ARG, 0, "NULL path");
    char why[RL_GGUF_MSG_SIZE];
    int fd = rl_gguf_open_regular(path, "a GGUF file", why, sizeof why);
    if (fd < 0)
        return fail(&r, RL_GGUF_E_IO, 0, "%s", why);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(&r, RL_GGUF_E_IO, 0, "cannot stat the file: %s", strerror(e));
    }
    rl_gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return fail(&r, RL_GGUF_E_NOMEM, 0, "out of memory");
    }
    f->size = (uint64_t)st.st_size;
    f->base = empty_file;
    f->fd = -1;
    if (st.st_size > 0) {
        if ((uint64_t)st.st_size > SIZE_MAX) {
            close(fd);
            free(f);
            return fail(&r, RL_GGUF_E_IO, 0, "file too large to map");
        }
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(f);
            return fail(&r, RL_GGUF_E_IO, 0, "cannot map the file: %s", strerror(e));
        }
        f->map = m;
        f->map_len = (size_t)st.st_size;
        f->base = m;
    }
    /* Kept open: the mapping stays valid without it, but a read through it
     * (rl_gguf_fd) of a file truncated meanwhile is a short read, where the
     * mapping's pages past the new end fault (SIGBUS). */
    f->fd = fd;
    return parse_into(f, out, msg, msgsz, err_off);
}

rl_gguf_file *rl_gguf_retain(rl_gguf_file *f) {
    if (f)
        __atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
    return f;
}

void rl_gguf_close(rl_gguf_file *f) {
    if (f && __atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) == 0)
        file_free(f);
}

/* ------------------------------------------------------------- accessors */

uint32_t rl_gguf_version(const rl_gguf_file *f) { return f->version; }
uint32_t rl_gguf_alignment(const rl_gguf_file *f) { return f->alignment; }
uint64_t rl_gguf_file_size(const rl_gguf_file *f) { return f->size; }
int rl_gguf_fd(const rl_gguf_file *f) { return f->fd; }
uint64_t rl_gguf_header_end(const rl_gguf_file *f) { return f->header_end; }
uint64_t rl_gguf_data_offset(const rl_gguf_file *f) { return f->data_offset; }
const uint8_t *rl_gguf_bytes(const rl_gguf_file *f) { return f->base; }
uint64_t rl_gguf_kv_count(const rl_gguf_file *f) { return f->n_kv; }
uint64_t rl_gguf_tensor_count(const rl_gguf_file *f) { return f->n_tensors; }

const char *rl_gguf_kv_key(const rl_gguf_file *f, uint64_t i, uint64_t *len) {
    if (!f || i >= f->n_kv)
        return NULL;
    if (len)
        *len = f->kv[i].key_len;
    return (const char *)f->base + f->kv[i].key_off;
}

int rl_gguf_kv_type(const rl_gguf_file *f, uint64_t i) {
    return f && i < f->n_kv ? (int)f->kv[i].val.type : -1;
}

rl_gguf_status rl_gguf_kv_value(const rl_gguf_file *f, uint64_t i, rl_gguf_val *out) {
    if (!f || !out || i >= f->n_kv)
        return RL_GGUF_E_ARG;
    *out = f->kv[i].val;
    return RL_GGUF_OK;
}

int64_t rl_gguf_find_key(const rl_gguf_file *f, const char *key, uint64_t len) {
    if (!f || (!key && len))
        return -1;
    uint64_t lo = 0, hi = f->n_kv;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const kv_rec *kv = &f->kv[f->kv_sorted[mid]];
        int c = bytes_cmp(f->base + kv->key_off, kv->key_len, (const uint8_t *)key, len);
        if (c == 0)
            return f->kv_sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* A value descriptor must come from this file: check it cheaply so that a
 * stray one fails instead of reading outside the mapping. */
static int val_ok(const rl_gguf_file *f, const rl_gguf_val *v) {
    return f && v && v->offset <= f->size;
}

static rl_gguf_status scalar_at(const rl_gguf_file *f, const rl_gguf_val *v, uint32_t sz) {
    if (!val_ok(f, v) || v->offset > f->size - sz)
        return RL_GGUF_E_ARG;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_val_u64(const rl_gguf_file *f, const rl_gguf_val *v, uint64_t *out) {
    if (!out || !v)
        return RL_GGUF_E_ARG;
    uint32_t sz;
    switch (v->type) {
    case RL_GGUF_TYPE_U8: case RL_GGUF_TYPE_BOOL: sz = 1; break;
    case RL_GGUF_TYPE_U16: sz = 2; break;
    case RL_GGUF_TYPE_U32: sz = 4; break;
    case RL_GGUF_TYPE_U64: sz = 8; break;
    default: return RL_GGUF_E_TYPE;
    }
    TRY(scalar_at(f, v, sz));
    uint64_t x = 0;
    memcpy(&x, f->base + v->offset, sz); /* little-endian host */
    *out = x;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_val_i64(const rl_gguf_file *f, const rl_gguf_val *v, int64_t *out) {
    if (!out || !v)
        return RL_GGUF_E_ARG;
    uint32_t sz;
    switch (v->type) {
    case RL_GGUF_TYPE_I8: sz = 1; break;
    case RL_GGUF_TYPE_I16: sz = 2; break;
    case RL_GGUF_TYPE_I32: sz = 4; break;
    case RL_GGUF_TYPE_I64: sz = 8; break;
    default: return RL_GGUF_E_TYPE;
    }
    TRY(scalar_at(f, v, sz));
    const uint8_t *p = f->base + v->offset;
    switch (sz) {
    case 1: *out = (int8_t)p[0]; break;
    case 2: { int16_t x; memcpy(&x, p, 2); *out = x; break; }
    case 4: { int32_t x; memcpy(&x, p, 4); *out = x; break; }
    default: { int64_t x; memcpy(&x, p, 8); *out = x; break; }
    }
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_val_f64(const rl_gguf_file *f, const rl_gguf_val *v, double *out) {
    if (!out || !v)
        return RL_GGUF_E_ARG;
    if (v->type == RL_GGUF_TYPE_F32) {
        TRY(scalar_at(f, v, 4));
        float x;
        memcpy(&x, f->base + v->offset, 4);
        *out = x;
        return RL_GGUF_OK;
    }
    if (v->type == RL_GGUF_TYPE_F64) {
        TRY(scalar_at(f, v, 8));
        memcpy(out, f->base + v->offset, 8);
        return RL_GGUF_OK;
    }
    return RL_GGUF_E_TYPE;
}

rl_gguf_status rl_gguf_val_bool(const rl_gguf_file *f, const rl_gguf_val *v, int *out) {
    if (!out || !v)
        return RL_GGUF_E_ARG;
    if (v->type != RL_GGUF_TYPE_BOOL)
        return RL_GGUF_E_TYPE;
    TRY(scalar_at(f, v, 1));
    *out = f->base[v->offset] != 0;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_val_str(const rl_gguf_file *f, const rl_gguf_val *v, const char **ptr,
                               uint64_t *len) {
    if (!ptr || !len || !v)
        return RL_GGUF_E_ARG;
    if (v->type != RL_GGUF_TYPE_STRING)
        return RL_GGUF_E_TYPE;
    if (!val_ok(f, v) || v->count > f->size - v->offset)
        return RL_GGUF_E_ARG;
    *ptr = (const char *)f->base + v->offset;
    *len = v->count;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_array_get(const rl_gguf_file *f, const rl_gguf_val *v, uint64_t j,
                                 rl_gguf_val *out) {
    if (!out || !v)
        return RL_GGUF_E_ARG;
    if (v->type != RL_GGUF_TYPE_ARRAY)
        return RL_GGUF_E_TYPE;
    if (!val_ok(f, v) || j >= v->count)
        return RL_GGUF_E_ARG;
    uint32_t et = v->elem_type;
    if (et == RL_GGUF_TYPE_STRING) {
        if (v->index > f->tab_len || j >= f->tab_len - v->index)
            return RL_GGUF_E_ARG;
        uint64_t p = f->tab[v->index + j];
        *out = (rl_gguf_val){.type = et, .offset = p + 8, .count = ld64(f->base + p)};
        return RL_GGUF_OK;
    }
    if (et == RL_GGUF_TYPE_ARRAY) {
        if (v->index > f->tab_len || j >= (f->tab_len - v->index) / 2)
            return RL_GGUF_E_ARG;
        uint64_t p = f->tab[v->index + 2 * j];
        *out = (rl_gguf_val){.type = et,
                             .elem_type = ld32(f->base + p),
                             .offset = p + ARRAY_HEAD_BYTES,
                             .count = ld64(f->base + p + 4),
                             .index = f->tab[v->index + 2 * j + 1]};
        return RL_GGUF_OK;
    }
    uint32_t sz = rl_gguf_type_size(et);
    if (sz == 0 || v->count > (f->size - v->offset) / sz)
        return RL_GGUF_E_ARG;
    *out = (rl_gguf_val){.type = et, .offset = v->offset + j * sz, .count = 1};
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_array_data(const rl_gguf_file *f, const rl_gguf_val *v,
                                  const void **ptr) {
    if (!ptr || !v)
        return RL_GGUF_E_ARG;
    if (v->type != RL_GGUF_TYPE_ARRAY || rl_gguf_type_size(v->elem_type) == 0)
        return RL_GGUF_E_TYPE;
    if (!val_ok(f, v) || v->count > (f->size - v->offset) / rl_gguf_type_size(v->elem_type))
        return RL_GGUF_E_ARG;
    *ptr = f->base + v->offset;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_val_span(const rl_gguf_file *f, const rl_gguf_val *v, uint64_t *start,
                                uint64_t *end) {
    if (!val_ok(f, v) || !start || !end)
        return RL_GGUF_E_ARG;
    switch (v->type) {
    case RL_GGUF_TYPE_STRING:
        if (v->offset < 8)
            return RL_GGUF_E_ARG;
        *start = v->offset - 8;
        *end = v->offset + v->count;
        return RL_GGUF_OK;
    case RL_GGUF_TYPE_ARRAY: {
        if (v->offset < ARRAY_HEAD_BYTES)
            return RL_GGUF_E_ARG;
        *start = v->offset - ARRAY_HEAD_BYTES;
        uint32_t sz = rl_gguf_type_size(v->elem_type);
        if (v->count == 0) {
            *end = v->offset;
        } else if (sz) {
            *end = v->offset + v->count * sz;
        } else {
            rl_gguf_val last;
            uint64_t s;
            TRY(rl_gguf_array_get(f, v, v->count - 1, &last));
            TRY(rl_gguf_val_span(f, &last, &s, end));
        }
        return RL_GGUF_OK;
    }
    default:
        if (v->type >= RL_GGUF_TYPE_COUNT)
            return RL_GGUF_E_ARG;
        *start = v->offset;
        *end = v->offset + rl_gguf_type_size(v->type);
        return RL_GGUF_OK;
    }
}

static const tensor_rec *tensor_at(const rl_gguf_file *f, uint64_t i) {
    return f && i < f->n_tensors ? &f->t[i] : NULL;
}

const char *rl_gguf_tensor_name(const rl_gguf_file *f, uint64_t i, uint64_t *len) {
    const tensor_rec *t = tensor_at(f, i);
    if (!t)
        return NULL;
    if (len)
        *len = t->name_len;
    return (const char *)f->base + t->name_off;
}

uint32_t rl_gguf_tensor_n_dims(const rl_gguf_file *f, uint64_t i) {
    const tensor_rec *t = tensor_at(f, i);
    return t ? t->n_dims : 0;
}

int64_t rl_gguf_tensor_ne(const rl_gguf_file *f, uint64_t i, uint32_t d) {
    const tensor_rec *t = tensor_at(f, i);
    return t && d < RL_GGUF_MAX_DIMS ? t->ne[d] : -1;
}

uint32_t rl_gguf_tensor_type(const rl_gguf_file *f, uint64_t i) {
    const tensor_rec *t = tensor_at(f, i);
    return t ? t->type : 0;
}

uint64_t rl_gguf_tensor_offset(const rl_gguf_file *f, uint64_t i) {
    const tensor_rec *t = tensor_at(f, i);
    return t ? t->offset : 0;
}

uint64_t rl_gguf_tensor_nbytes(const rl_gguf_file *f, uint64_t i) {
    const tensor_rec *t = tensor_at(f, i);
    return t ? t->nbytes : 0;
}

uint64_t rl_gguf_tensor_nelements(const rl_gguf_file *f, uint64_t i) {
    const tensor_rec *t = tensor_at(f, i);
    return t ? t->nelem : 0;
}

const void *rl_gguf_tensor_data(const rl_gguf_file *f, uint64_t i) {
    const tensor_rec *t = tensor_at(f, i);
    return t ? f->base + f->data_offset + t->offset : NULL;
}

int64_t rl_gguf_find_tensor(const rl_gguf_file *f, const char *name, uint64_t len) {
    if (!f || (!name && len))
        return -1;
    uint64_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const tensor_rec *t = &f->t[f->t_sorted[mid]];
        int c = bytes_cmp(f->base + t->name_off, t->name_len, (const uint8_t *)name, len);
        if (c == 0)
            return f->t_sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}
