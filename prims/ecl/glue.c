/* glue.c - the shared machinery of prims/ecl/ (see glue.h): symbols made
 * once, type errors and rontolisp's conditions, argument accessors, simple
 * arrays, foreign handles, UTF-8 strings, and the one primitive every
 * handle kind shares, %RELEASE. */
#include "prims/ecl/glue.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "prims/tokenizer.h"
#include "prims/utf8.h"

/* ---- symbols made once --------------------------------------------- */

static cl_object rl_types[RL_T_COUNT];
static cl_object rl_conditions[RL_C_COUNT];
static cl_object rl_handle_tags[RL_H_COUNT];

/* Every defined primitive and its symbol, for rl_fn_symbol.  A fixed
 * array: the tables are static, so the count is known at build time and a
 * growing one would only hide a forgotten bound. */
#define RL_MAX_PRIMS 256
static struct {
    const char *name;
    cl_object sym;
    int narg; /* -1: a CL function named in errors, not ours */
} rl_fns[RL_MAX_PRIMS];
static size_t rl_nfns;

static void rl_remember(const char *name, cl_object sym, int narg) {
    if (rl_nfns == RL_MAX_PRIMS) {
        fprintf(stderr, "rontolisp: more than %d primitives; raise RL_MAX_PRIMS\n", RL_MAX_PRIMS);
        abort();
    }
    rl_fns[rl_nfns].name = name;
    rl_fns[rl_nfns].sym = sym;
    rl_fns[rl_nfns].narg = narg;
    ecl_register_root(&rl_fns[rl_nfns].sym);
    rl_nfns++;
}

void rl_glue_init(void) {
    static const char *const types[RL_T_COUNT] = {
        "ARRAY", "VECTOR", "LIST", "STRING", "INTEGER", "FIXNUM", "FLOAT", "SINGLE-FLOAT",
        "DOUBLE-FLOAT", NULL, NULL};
    static const struct { const char *name, *pkg; } conds[RL_C_COUNT] = {
        {"RONTOLISP-ERROR", "RONTOLISP"}, {"INDEX-ERROR", "RONTOLISP"},
        {"SHAPE-ERROR", "RONTOLISP"}, {"FILE-CLOSED-ERROR", "GGUF"}};
    static const char *const tags[RL_H_COUNT] = {"GGUF-FILE", "GGUF-WRITER", "SAFETENSORS",
                                                          "TOKENIZER"};
    for (int t = 0; t < RL_T_COUNT; t++)
        if (types[t])
            rl_types[t] = ecl_make_symbol(types[t], "CL");
    rl_types[RL_T_FOREIGN_DATA] = ecl_make_symbol("FOREIGN-DATA", "SI");
    rl_types[RL_T_QM_OR_ARRAY] =
        cl_list(3, ecl_make_symbol("OR", "CL"), rl_types[RL_T_ARRAY],
                ecl_make_symbol("QUANTIZED-MATRIX", "RONTOLISP"));
    for (int c = 0; c < RL_C_COUNT; c++)
        rl_conditions[c] = ecl_make_symbol(conds[c].name, conds[c].pkg);
    for (int h = 0; h < RL_H_COUNT; h++)
        rl_handle_tags[h] = ecl_make_keyword(tags[h]);
    for (int t = 0; t < RL_T_COUNT; t++)
        ecl_register_root(&rl_types[t]);
    for (int c = 0; c < RL_C_COUNT; c++)
        ecl_register_root(&rl_conditions[c]);
    for (int h = 0; h < RL_H_COUNT; h++)
        ecl_register_root(&rl_handle_tags[h]);
    rl_remember("AREF", ecl_make_symbol("AREF", "CL"), -1);
    rl_remember("ROW-MAJOR-AREF", ecl_make_symbol("ROW-MAJOR-AREF", "CL"), -1);
}

void rl_glue_define(const rl_prim_table *table) {
    for (size_t i = 0; i < table->count; i++) {
        const rl_prim_def *d = &table->defs[i];
        cl_object sym = ecl_make_symbol(d->name, table->package);
        ecl_def_c_function(sym, d->fn, d->narg);
        rl_remember(d->name, sym, d->narg);
    }
}

cl_object rl_fn_symbol(const char *fn) {
    for (size_t i = 0; i < rl_nfns; i++)
        if (strcmp(rl_fns[i].name, fn) == 0)
            return rl_fns[i].sym;
    fprintf(stderr, "rontolisp: error report names %s, which no primitive table defines\n", fn);
    abort();
}

void rl_type_error(const char *fn, int pos, cl_object x, rl_type_id type) {
    FEwrong_type_nth_arg(rl_fn_symbol(fn), pos, x, rl_types[type]);
    abort(); /* not reached */
}

void rl_signal(rl_condition_id cls, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cl_error(3, rl_conditions[cls], ecl_make_keyword("MESSAGE"),
             ecl_make_simple_base_string(buf, -1));
    abort(); /* not reached: cl_error does not return */
}

/* ---- arguments ------------------------------------------------------ */

float rl_arg_sf(const char *fn, int pos, cl_object x) {
    if (ecl_t_of(x) != t_singlefloat)
        rl_type_error(fn, pos, x, RL_T_SINGLE_FLOAT);
    return ecl_single_float(x);
}

double rl_arg_df(const char *fn, int pos, cl_object x) {
    if (ecl_t_of(x) != t_doublefloat)
        rl_type_error(fn, pos, x, RL_T_DOUBLE_FLOAT);
    return ecl_double_float(x);
}

cl_fixnum rl_arg_fixnum(const char *fn, int pos, cl_object x, cl_fixnum lo, cl_fixnum hi) {
    if (!ECL_FIXNUMP(x) || ecl_fixnum(x) < lo || ecl_fixnum(x) > hi)
        FEwrong_type_nth_arg(rl_fn_symbol(fn), pos, x,
                             cl_list(3, rl_types[RL_T_INTEGER], ecl_make_fixnum(lo),
                                     ecl_make_fixnum(hi)));
    return ecl_fixnum(x);
}

int rl_fixnum_vector_p(cl_object x) {
    _Static_assert(sizeof(cl_fixnum) == sizeof(int64_t), "a fixnum is 64 bits");
    return !ECL_IMMEDIATE(x) && x->d.t == t_vector && x->vector.displaced == ECL_NIL &&
           (x->vector.elttype == ecl_aet_fix || x->vector.elttype == ecl_aet_i64);
}

void *rl_simple_data(cl_object x, cl_elttype aet, cl_index *n) {
    if (ECL_IMMEDIATE(x))
        return NULL;
    if (x->d.t == t_vector) {
        if ((cl_elttype)x->vector.elttype != aet || x->vector.displaced != ECL_NIL ||
            ECL_ARRAY_HAS_FILL_POINTER_P(x) || ECL_ADJUSTABLE_ARRAY_P(x))
            return NULL;
        *n = x->vector.dim;
        return x->vector.self.b8;
    }
    if (x->d.t == t_array) {
        if ((cl_elttype)x->array.elttype != aet || x->array.displaced != ECL_NIL ||
            ECL_ADJUSTABLE_ARRAY_P(x))
            return NULL;
        *n = x->array.dim;
        return x->array.self.b8;
    }
    return NULL;
}

const uint8_t *rl_octets(const char *fn, int pos, cl_object v, cl_index *n) {
    const uint8_t *p = rl_simple_data(v, ecl_aet_b8, n);
    if (!p)
        rl_type_error(fn, pos, v, RL_T_VECTOR);
    return p;
}

float *rl_sf_matrix(const char *fn, int pos, cl_object a, size_t *rows, size_t *cols) {
    cl_index n = 0;
    if (ECL_IMMEDIATE(a) || a->d.t != t_array || a->array.rank != 2 ||
        (cl_elttype)a->array.elttype != ecl_aet_sf)
        rl_type_error(fn, pos, a, RL_T_ARRAY);
    float *p = rl_simple_data(a, ecl_aet_sf, &n);
    if (!p && (a->array.dim != 0 || a->array.displaced != ECL_NIL || ECL_ADJUSTABLE_ARRAY_P(a)))
        rl_type_error(fn, pos, a, RL_T_ARRAY);
    *rows = a->array.dims[0];
    *cols = a->array.dims[1];
    return p;
}

void rl_signal_shape(cl_object expected, cl_object found, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cl_error(7, rl_conditions[RL_C_SHAPE], ecl_make_keyword("EXPECTED"), expected,
             ecl_make_keyword("FOUND"), found, ecl_make_keyword("MESSAGE"),
             ecl_make_simple_base_string(buf, -1));
    abort(); /* not reached: cl_error does not return */
}

cl_object rl_dims2(size_t r, size_t c) {
    return cl_list(2, ecl_make_unsigned_integer(r), ecl_make_unsigned_integer(c));
}

void rl_same_dims(const char *fn, const char *what, size_t r, size_t c, size_t er,
                  size_t ec) {
    if (r != er || c != ec)
        rl_signal_shape(rl_dims2(er, ec), rl_dims2(r, c),
                        "%s: expected %s of dimensions (%zu %zu), found (%zu %zu)", fn, what, er,
                        ec, r, c);
}

void rl_out_not_input(const char *fn, cl_object out, cl_object in, const char *what) {
    if (out == in)
        rl_signal(RL_C_ERROR, "%s: expected out to be an array other than %s, found %s itself",
                  fn, what, what);
}

const char *rl_path_arg(const char *fn, cl_object octets, char *buf, size_t bufsz) {
    cl_index n = 0;
    const uint8_t *p = rl_octets(fn, 1, octets, &n);
    if (n >= bufsz || memchr(p, 0, n))
        rl_signal(RL_C_ERROR,
                  "%s: the path is too long (4096 bytes or more) or contains a NUL byte", fn);
    memcpy(buf, p, n);
    buf[n] = 0;
    return buf;
}

cl_object rl_keyword(const char *name) {
    char up[64];
    size_t k;
    for (k = 0; name[k] && k + 1 < sizeof up; k++)
        up[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 32 : name[k]);
    up[k] = 0;
    return ecl_make_keyword(up);
}

cl_object rl_status_values(const char *status, const char *msg, uint64_t off) {
    rl_return4(ecl_process_env(), ECL_NIL, rl_keyword(status), ecl_make_simple_base_string(msg, -1),
               ecl_make_uint64_t(off));
}

/* ---- strings -------------------------------------------------------- */

cl_object rl_string_from_utf8(const char *p, uint64_t n) {
    const uint8_t *s = (const uint8_t *)p;
    cl_object out;
    size_t i, k = 0;
    if (rl_utf8_ascii_p(s, n)) {
        out = ecl_alloc_simple_base_string(n);
        memcpy(out->base_string.self, s, n);
        return out;
    }
    /* Two passes: count the characters, then decode into the string. */
    for (i = 0; i < n; k++)
        rl_utf8_next(s, n, &i);
    out = ecl_alloc_simple_extended_string(k);
    for (i = 0, k = 0; i < n; k++)
        ecl_char_set(out, k, rl_utf8_next(s, n, &i));
    return out;
}

size_t rl_string_utf8_length(cl_object str) {
    size_t len = 0;
    for (cl_index i = 0, n = ecl_length(str); i < n; i++)
        len += rl_utf8_length((uint32_t)ecl_char(str, i));
    return len;
}

void rl_string_to_utf8(cl_object str, uint8_t *out) {
    for (cl_index i = 0, n = ecl_length(str); i < n; i++)
        out += rl_utf8_encode((uint32_t)ecl_char(str, i), out);
}

cl_object rl_utf8_file_stream(cl_object s) {
    cl_object fmt;
    for (int depth = 0; depth < 8 && ECL_ANSI_STREAM_P(s); depth++) {
        switch ((enum ecl_smmode)s->stream.mode) {
        case ecl_smm_synonym:
            s = ecl_symbol_value(s->stream.object0);
            continue;
        case ecl_smm_two_way:
            s = s->stream.object1;
            continue;
        case ecl_smm_output: case ecl_smm_output_file: case ecl_smm_io: case ecl_smm_io_file:
            fmt = cl_stream_external_format(s);
            if (ECL_CONSP(fmt))
                fmt = ECL_CONS_CAR(fmt);
            return fmt == ecl_make_keyword("UTF-8") ? s : ECL_NIL;
        default:
            return ECL_NIL;
        }
    }
    return ECL_NIL;
}

void rl_write_utf8(cl_object stream, const char *p, size_t n) {
    cl_object file = rl_utf8_file_stream(stream);
    if (Null(file)) {
        cl_write_string(2, rl_string_from_utf8(p, n), stream);
        return;
    }
    /* the stream's own byte writer (one fwrite, or its buffer), then its
     * column as writing the characters would have left it */
    file->stream.ops->write_byte8(file, (unsigned char *)p, n);
    size_t k = n;
    while (k > 0 && p[k - 1] != '\n')
        k--;
    /* P[K..N): what follows the last newline (all of P when K is 0) */
    size_t chars = rl_utf8_chars((const uint8_t *)p + k, n - k);
    file->stream.column = k ? chars : file->stream.column + chars;
}

/* ---- foreign handles ------------------------------------------------ */

int rl_handle_p(cl_object h, rl_handle_kind kind) {
    return !ECL_IMMEDIATE(h) && h->d.t == t_foreign && h->foreign.tag == rl_handle_tags[kind];
}

/* ---- pinned mappings (see glue.h) --------------------------------------
 * USERS counts the open state (1 until closed) plus the pins; the owner is
 * freed by whoever brings it to 0, once, since a pin never raises it from
 * 0.  The struct itself lives until the handle's finalizer, which runs only
 * when no thread can reach the handle. */

typedef struct rl_map {
    _Atomic uint64_t users;
    atomic_int closed;
    void *owner;
    const uint8_t *bytes;
    uint64_t size;
    void (*free_owner)(void *);
} rl_map;

/* The handle kinds made by rl_make_mapped_handle: the files whose bytes
 * Lisp threads read while another may close them. */
static int rl_mapped_kind_p(cl_object tag) {
    return tag == rl_handle_tags[RL_H_GGUF_FILE] || tag == rl_handle_tags[RL_H_SAFETENSORS];
}

static rl_map *rl_map_of(cl_object h) {
    if (ECL_IMMEDIATE(h) || h->d.t != t_foreign || !rl_mapped_kind_p(h->foreign.tag))
        return NULL;
    return (rl_map *)(void *)h->foreign.data;
}

int rl_mapped_p(cl_object h) { return rl_map_of(h) != NULL; }

static rl_map *rl_map_pin(cl_object h) {
    rl_map *m = rl_map_of(h);
    uint64_t n;
    if (!m)
        return NULL;
    n = atomic_load(&m->users);
    do {
        if (n == 0)
            return NULL;
    } while (!atomic_compare_exchange_weak(&m->users, &n, n + 1));
    if (atomic_load(&m->closed)) { /* closed after we read USERS: let go */
        rl_unpin_token(m);
        return NULL;
    }
    return m;
}

void rl_unpin_token(void *token) {
    rl_map *m = token;
    if (m && atomic_fetch_sub(&m->users, 1) == 1)
        m->free_owner(m->owner);
}

void *rl_pinned_token(cl_object h) { return rl_map_of(h); }

void *rl_pin(cl_object h, const uint8_t **bytes, uint64_t *size) {
    rl_map *m = rl_map_pin(h);
    if (!m)
        return NULL;
    if (bytes)
        *bytes = m->bytes;
    if (size)
        *size = m->size;
    return m->owner;
}

void rl_unpin(cl_object h) { rl_unpin_token(rl_map_of(h)); }

void *rl_pin_handle(const char *fn, cl_object h, rl_handle_kind kind, rl_condition_id cls,
                    const char *what) {
    void *owner;
    rl_handle(fn, h, kind, cls, what); /* type and state */
    owner = rl_pin(h, NULL, NULL);
    if (!owner) /* closed by another thread since */
        rl_signal(cls, "%s: the %s was closed", fn, what);
    return owner;
}

/* Mark closed and drop the open state's count; idempotent. */
static void rl_map_close(rl_map *m) {
    int was = 0;
    if (atomic_compare_exchange_strong(&m->closed, &was, 1))
        rl_unpin_token(m);
}

cl_object rl_make_mapped_handle(rl_handle_kind kind, void *owner, const uint8_t *bytes,
                                uint64_t size, void (*free_owner)(void *)) {
    rl_map *m = malloc(sizeof *m);
    cl_object h;
    if (!m) {
        free_owner(owner);
        rl_signal(RL_C_ERROR, "out of memory for a mapped file's handle");
    }
    atomic_init(&m->users, 1);
    atomic_init(&m->closed, 0);
    m->owner = owner;
    m->bytes = bytes;
    m->size = size;
    m->free_owner = free_owner;
    h = rl_make_handle(kind, m);
    return h;
}

void rl_release(cl_object h) {
    void *p;
    if (ECL_IMMEDIATE(h) || h->d.t != t_foreign || !(p = h->foreign.data))
        return;
    if (rl_mapped_kind_p(h->foreign.tag)) {
        rl_map_close(p); /* the struct stays: concurrent pins read it */
        return;
    }
    h->foreign.data = NULL;
    if (h->foreign.tag == rl_handle_tags[RL_H_GGUF_WRITER])
        rl_gguf_writer_free(p);
    else if (h->foreign.tag == rl_handle_tags[RL_H_TOKENIZER])
        rl_tok_free(p);
}

static cl_object rl_finalize_handle(cl_object h) {
    rl_map *m = rl_map_of(h);
    rl_release(h);
    /* Unreachable, so no pin is being taken; one still held (a writer that
     * outlived the file it borrowed from) keeps the struct, a few bytes. */
    if (m && atomic_load(&m->users) == 0) {
        h->foreign.data = NULL;
        free(m);
    }
    ecl_return0(ecl_process_env());
}

cl_object rl_make_handle(rl_handle_kind kind, void *p) {
    cl_object h = ecl_make_foreign_data(rl_handle_tags[kind], 0, p);
    si_set_finalizer(h, ecl_make_cfun((cl_objectfn_fixed)rl_finalize_handle, ECL_NIL, NULL, 1));
    return h;
}

void *rl_handle(const char *fn, cl_object h, rl_handle_kind kind, rl_condition_id cls,
                const char *what) {
    if (!rl_handle_p(h, kind))
        rl_type_error(fn, 1, h, RL_T_FOREIGN_DATA);
    if (!h->foreign.data || (rl_map_of(h) && atomic_load(&rl_map_of(h)->closed)))
        rl_signal(cls, "%s: the %s was closed", fn, what);
    return h->foreign.data;
}

/* (%release handle): free a handle's C object now (gguf:close and friends). */
static cl_object rl_prim_release(cl_object h) {
    rl_release(h);
    ecl_return1(ecl_process_env(), ECL_NIL);
}

/* (%primitives) -> a list of (symbol . argument-count), every primitive
 * the tables define: the tests call each one wrongly. */
static cl_object rl_prim_primitives(void) {
    cl_object out = ECL_NIL;
    for (size_t i = rl_nfns; i-- > 0;)
        if (rl_fns[i].narg >= 0)
            out = ecl_cons(ecl_cons(rl_fns[i].sym, ecl_make_fixnum(rl_fns[i].narg)), out);
    ecl_return1(ecl_process_env(), out);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%PRIMITIVES", rl_prim_primitives, 0),
    RL_PRIM("%RELEASE", rl_prim_release, 1),
};
RL_PRIM_TABLE(rl_glue_prims, "RONTOLISP", rl_defs);
