/* safetensors.c - the safetensors reader (see safetensors.h for the format
 * and the checks).  The header is parsed by libjansson into a tree that
 * lives only during rl_st_parse; what survives is a table of tensors with
 * their names copied, and pointers into the mapping for the data.
 * Workload: a handful to a few thousand tensors per file. */
#include "gguf/safetensors.h"
#include "gguf/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct rl_st_file {
    const uint8_t *bytes;
    uint64_t size;
    void *map;             /* our mmap, or NULL for a caller's buffer */
    uint64_t n_tensors;
    rl_st_tensor *tensors;
    uint64_t n_meta;
    char **meta;           /* 2 * n_meta strings: key, value, ... */
};

static const char *const status_names[RL_ST_STATUS_COUNT] = {
    "ok", "io-error", "out-of-memory", "bad-argument", "truncated", "header-length", "json",
    "header", "dtype", "shape", "offsets", "size", "overlap", "metadata"};

const char *rl_st_status_name(rl_st_status st) {
    return (unsigned)st < RL_ST_STATUS_COUNT ? status_names[st] : "unknown-status";
}

const char *rl_st_dtype_name(uint32_t d) {
    return d == RL_ST_F32 ? "F32" : d == RL_ST_F16 ? "F16" : d == RL_ST_BF16 ? "BF16" : NULL;
}

uint32_t rl_st_dtype_size(uint32_t d) {
    return d == RL_ST_F32 ? 4 : (d == RL_ST_F16 || d == RL_ST_BF16) ? 2 : 0;
}

static rl_st_status fail(rl_st_status st, char *msg, size_t msgsz, uint64_t *err_off,
                         uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static rl_st_status fail(rl_st_status st, char *msg, size_t msgsz, uint64_t *err_off,
                         uint64_t off, const char *fmt, ...) {
    if (msg && msgsz) {
        int n = snprintf(msg, msgsz, "at byte %" PRIu64 ": ", off);
        if (n >= 0 && (size_t)n < msgsz) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(msg + n, msgsz - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    if (err_off)
        *err_off = off;
    return st;
}

/* A name for messages: at most 60 bytes, control and non-ASCII escaped. */
static void quote_name(const char *s, char *out, size_t outsz) {
    size_t k = 0;
    out[k++] = '"';
    for (size_t i = 0; s[i] && k + 8 < outsz; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= 60) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        if (c < 32 || c >= 127 || c == '"' || c == '\\')
            k += (size_t)snprintf(out + k, outsz - k, "\\x%02x", c);
        else
            out[k++] = (char)c;
    }
    out[k++] = '"';
    out[k] = 0;
}

void rl_st_close(rl_st_file *f) {
    if (!f)
        return;
    if (f->tensors)
        for (uint64_t i = 0; i < f->n_tensors; i++)
            free((char *)f->tensors[i].name);
    free(f->tensors);
    if (f->meta)
        for (uint64_t i = 0; i < 2 * f->n_meta; i++)
            free(f->meta[i]);
    free(f->meta);
    if (f->map)
        munmap(f->map, f->size);
    free(f);
}

static int cmp_begin(const void *a, const void *b) {
    const rl_st_tensor *x = *(rl_st_tensor *const *)a, *y = *(rl_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* A JSON integer in [0, INT64_MAX], or -1. */
static int64_t json_nonneg(const json_t *v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    return (int64_t)json_integer_value(v);
}

/* Check one header entry and fill T.  DATA0 is the absolute offset of the
 * data section. */
static rl_st_status parse_entry(const char *key, json_t *e, uint64_t data0, uint64_t size,
                                rl_st_tensor *t, char *msg, size_t msgsz, uint64_t *err_off) {
    char q[256];
    json_t *dt, *shape, *offs;
    const char *ds;
    uint64_t count = 1, nbytes, b, en;
    quote_name(key, q, sizeof q);
    if (!json_is_object(e))
        return fail(RL_ST_E_HEADER, msg, msgsz, err_off, 8,
                    "tensor %s: expected an object {dtype, shape, data_offsets}, found JSON of another kind", q);
    dt = json_object_get(e, "dtype");
    shape = json_object_get(e, "shape");
    offs = json_object_get(e, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs))
        return fail(RL_ST_E_HEADER, msg, msgsz, err_off, 8,
                    "tensor %s: expected a string dtype, an array shape and an array data_offsets", q);
    ds = json_string_value(dt);
    if (!strcmp(ds, "F32"))
        t->dtype = RL_ST_F32;
    else if (!strcmp(ds, "F16"))
        t->dtype = RL_ST_F16;
    else if (!strcmp(ds, "BF16"))
        t->dtype = RL_ST_BF16;
    else {
        char dq[64];
        quote_name(ds, dq, sizeof dq);
        return fail(RL_ST_E_DTYPE, msg, msgsz, err_off, 8,
                    "tensor %s: expected dtype F32, F16 or BF16, found %s", q, dq);
    }
    if (json_array_size(shape) > RL_ST_MAX_DIMS)
        return fail(RL_ST_E_SHAPE, msg, msgsz, err_off, 8,
                    "tensor %s: expected at most %d dimensions, found %zu", q, RL_ST_MAX_DIMS,
                    json_array_size(shape));
    t->n_dims = (uint32_t)json_array_size(shape);
    for (uint32_t d = 0; d < t->n_dims; d++) {
        int64_t n = json_nonneg(json_array_get(shape, d));
        if (n < 0)
            return fail(RL_ST_E_SHAPE, msg, msgsz, err_off, 8,
                        "tensor %s: dimension %u: expected a non-negative integer", q, d);
        t->shape[d] = n;
        if (n != 0 && count > (uint64_t)INT64_MAX / (uint64_t)n) /* overflow */
            return fail(RL_ST_E_SHAPE, msg, msgsz, err_off, 8,
                        "tensor %s: the element count overflows 63 bits", q);
        count *= (uint64_t)n;
    }
    if (count > (uint64_t)INT64_MAX / rl_st_dtype_size(t->dtype)) /* overflow */
        return fail(RL_ST_E_SHAPE, msg, msgsz, err_off, 8, "tensor %s: the byte size overflows", q);
    nbytes = count * rl_st_dtype_size(t->dtype);
    if (json_array_size(offs) != 2 || json_nonneg(json_array_get(offs, 0)) < 0 ||
        json_nonneg(json_array_get(offs, 1)) < 0)
        return fail(RL_ST_E_OFFSETS, msg, msgsz, err_off, 8,
                    "tensor %s: expected data_offsets [begin, end] of non-negative integers", q);
    b = (uint64_t)json_integer_value(json_array_get(offs, 0));
    en = (uint64_t)json_integer_value(json_array_get(offs, 1));
    if (b > en)
        return fail(RL_ST_E_OFFSETS, msg, msgsz, err_off, 8,
                    "tensor %s: expected begin <= end, found [%" PRIu64 ", %" PRIu64 "]", q, b, en);
    if (en > size - data0)
        return fail(RL_ST_E_OFFSETS, msg, msgsz, err_off, 8,
                    "tensor %s: data [%" PRIu64 ", %" PRIu64 ") past the end of the data (%" PRIu64
                    " bytes)", q, b, en, size - data0);
    if (en - b != nbytes)
        return fail(RL_ST_E_SIZE, msg, msgsz, err_off, 8,
                    "tensor %s: expected %" PRIu64 " bytes for its dtype and shape, found %" PRIu64,
                    q, nbytes, en - b);
    t->begin = data0 + b;
    t->nbytes = nbytes;
    t->name = strdup(key);
    return t->name ? RL_ST_OK : RL_ST_E_NOMEM;
}

rl_st_status rl_st_parse(const void *buf, uint64_t size, rl_st_file **out, char *msg,
                         size_t msgsz, uint64_t *err_off) {
    const uint8_t *p = buf;
    uint64_t n = 0, data0, i = 0;
    json_error_t jerr;
    json_t *root = NULL;
    const char *key;
    json_t *val;
    rl_st_file *f = NULL;
    rl_st_tensor **order = NULL;
    rl_st_status st = RL_ST_OK;
    if (!out || (!buf && size))
        return fail(RL_ST_E_ARG, msg, msgsz, err_off, 0, "no buffer");
    *out = NULL;
    if (size < 8)
        return fail(RL_ST_E_TRUNCATED, msg, msgsz, err_off, 0,
                    "expected an 8-byte header length, found a file of %" PRIu64 " bytes", size);
    for (int k = 7; k >= 0; k--)
        n = (n << 8) | p[k];
    if (n > RL_ST_MAX_HEADER || n > size - 8)
        return fail(RL_ST_E_HEADER_LENGTH, msg, msgsz, err_off, 0,
                    "expected a header length of at most %" PRIu64 " bytes (and the file's %" PRIu64
                    " after the length), found %" PRIu64,
                    (uint64_t)RL_ST_MAX_HEADER, size - 8, n);
    data0 = 8 + n;
    root = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return fail(RL_ST_E_JSON, msg, msgsz, err_off, 8 + (uint64_t)(jerr.position > 0 ? jerr.position : 0),
                    "the header is not valid JSON: %s", jerr.text);
    if (!json_is_object(root)) {
        st = fail(RL_ST_E_HEADER, msg, msgsz, err_off, 8, "expected the header to be a JSON object");
        goto done;
    }
    f = calloc(1, sizeof *f);
    if (!f || json_object_size(root) > RL_ST_MAX_TENSORS + 1) {
        st = f ? fail(RL_ST_E_HEADER, msg, msgsz, err_off, 8, "more than %u tensors", RL_ST_MAX_TENSORS)
               : RL_ST_E_NOMEM;
        goto done;
    }
    f->bytes = p;
    f->size = size;
    f->tensors = calloc(json_object_size(root) + 1, sizeof *f->tensors);
    if (!f->tensors) {
        st = RL_ST_E_NOMEM;
        goto done;
    }
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(val)) {
                st = fail(RL_ST_E_METADATA, msg, msgsz, err_off, 8, "expected __metadata__ to be an object");
                goto done;
            }
            f->meta = calloc(2 * json_object_size(val) + 1, sizeof *f->meta);
            if (!f->meta) {
                st = RL_ST_E_NOMEM;
                goto done;
            }
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    st = fail(RL_ST_E_METADATA, msg, msgsz, err_off, 8,
                              "expected every __metadata__ value to be a string");
                    goto done;
                }
                f->meta[2 * f->n_meta] = strdup(mk);
                f->meta[2 * f->n_meta + 1] = strdup(json_string_value(mv));
                f->n_meta++;
                if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1]) {
                    st = RL_ST_E_NOMEM;
                    goto done;
                }
            }
            continue;
        }
        st = parse_entry(key, val, data0, size, &f->tensors[f->n_tensors], msg, msgsz, err_off);
        if (st != RL_ST_OK)
            goto done;
        f->n_tensors++;
    }
    /* No two tensors may share a byte: sort by begin, compare neighbours
     * (empty tensors share nothing). */
    order = malloc((f->n_tensors + 1) * sizeof *order);
    if (!order) {
        st = RL_ST_E_NOMEM;
        goto done;
    }
    for (i = 0; i < f->n_tensors; i++)
        order[i] = &f->tensors[i];
    qsort(order, f->n_tensors, sizeof *order, cmp_begin);
    {
        const rl_st_tensor *prev = NULL;
        for (i = 0; i < f->n_tensors; i++) {
            const rl_st_tensor *t = order[i];
            if (!t->nbytes)
                continue;
            if (prev && prev->begin + prev->nbytes > t->begin) {
                char a[256], b[256];
                quote_name(prev->name, a, sizeof a);
                quote_name(t->name, b, sizeof b);
                st = fail(RL_ST_E_OVERLAP, msg, msgsz, err_off, t->begin,
                          "tensors %s and %s share bytes", a, b);
                goto done;
            }
            prev = t;
        }
    }
done:
    free(order);
    json_decref(root);
    if (st != RL_ST_OK) {
        if (f)
            f->map = NULL;
        rl_st_close(f);
        return st;
    }
    *out = f;
    return RL_ST_OK;
}

rl_st_status rl_st_open(const char *path, rl_st_file **out, char *msg, size_t msgsz,
                        uint64_t *err_off) {
    int fd;
    struct stat sb;
    void *map = NULL;
    rl_st_status st;
    if (!out || !path)
        return fail(RL_ST_E_ARG, msg, msgsz, err_off, 0, "no path");
    *out = NULL;
    char why[256];
    fd = rl_gguf_open_regular(path, "a safetensors file", why, sizeof why);
    if (fd < 0)
        return fail(RL_ST_E_IO, msg, msgsz, err_off, 0, "%s", why);
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return fail(RL_ST_E_IO, msg, msgsz, err_off, 0, "cannot stat: %s", strerror(e));
    }
    if (sb.st_size > 0) {
        map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return fail(RL_ST_E_IO, msg, msgsz, err_off, 0, "cannot map: %s", strerror(e));
        }
    }
    close(fd);
    st = rl_st_parse(map ? map : "", (uint64_t)sb.st_size, out, msg, msgsz, err_off);
    if (st != RL_ST_OK) {
        if (map)
            munmap(map, (size_t)sb.st_size);
        return st;
    }
    (*out)->map = map;
    return RL_ST_OK;
}

uint64_t rl_st_tensor_count(const rl_st_file *f) { return f ? f->n_tensors : 0; }
uint64_t rl_st_file_size(const rl_st_file *f) { return f ? f->size : 0; }

const rl_st_tensor *rl_st_tensor_at(const rl_st_file *f, uint64_t i) {
    return f && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const void *rl_st_tensor_data(const rl_st_file *f, uint64_t i) {
    return f && i < f->n_tensors ? f->bytes + f->tensors[i].begin : NULL;
}

uint64_t rl_st_metadata_count(const rl_st_file *f) { return f ? f->n_meta : 0; }

const char *rl_st_metadata_key(const rl_st_file *f, uint64_t i) {
    return f && i < f->n_meta ? f->meta[2 * i] : NULL;
}

const char *rl_st_metadata_value(const rl_st_file *f, uint64_t i) {
    return f && i < f->n_meta ? f->meta[2 * i + 1] : NULL;
}
