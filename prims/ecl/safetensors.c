/* safetensors.c - safetensors files and JSON text seen from Lisp
 * (lisp/safetensors.lisp, lisp/convert.lisp). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/safetensors.h"
#include "prims/ecl/arrays.h"
#include "prims/ecl/glue.h"

/* The safetensors reader is gguf/safetensors.c, JSON is libjansson's.
 * Like the GGUF glue, a bad file is not signalled here: the
 * primitives answer (values nil status-keyword message offset) and
 * lisp/safetensors.lisp signals rontolisp's own conditions with the path. */

/* ECL_UNWIND_PROTECT's own frame variable draws this warning; nothing of
 * ours lives across its setjmp. */
#pragma GCC diagnostic ignored "-Wclobbered"

/* The file behind a handle, pinned (glue.h: another thread may close it
 * meanwhile); the caller lets the pin go with RL_UNPIN_AFTER. */
static rl_st_file *rl_st_pin(const char *fn, cl_object h) {
    return rl_pin_handle(fn, h, RL_H_SAFETENSORS, RL_C_ERROR, "safetensors file");
}

static void rl_st_free(void *f) { rl_st_close(f); }

/* (%st-open path-octets) -> handle, or (values nil status message offset). */
static cl_object rl_prim_st_open(cl_object path) {
    char msg[RL_ST_MSG_SIZE] = "", cpath[4096];
    uint64_t off = 0;
    rl_st_file *f = NULL;
    rl_st_status st;
    cl_object h;
    const char *cp = rl_path_arg("%ST-OPEN", path, cpath, sizeof cpath);
    {
        RL_FP_HOLD(); /* the header's JSON: see rl_prim_json_parse */
        st = rl_st_open(cp, &f, msg, sizeof msg, &off);
        RL_FP_RELEASE();
    }
    if (st != RL_ST_OK)
        return rl_status_values(rl_st_status_name(st), msg, off);
    h = rl_make_mapped_handle(RL_H_SAFETENSORS, f, NULL, rl_st_file_size(f), rl_st_free);
    ecl_return1(ecl_process_env(), h);
}

/* (%st-tensors handle) -> list of (name dtype-name shape-list nbytes offset). */
static cl_object rl_prim_st_tensors(cl_object h) {
    const cl_env_ptr env = ecl_process_env();
    rl_st_file *f = rl_st_pin("%ST-TENSORS", h);
    cl_object out = ECL_NIL;
    RL_WHILE_PINNED(env) {
        for (uint64_t i = rl_st_tensor_count(f); i-- > 0;) {
            const rl_st_tensor *t = rl_st_tensor_at(f, i);
            cl_object shape = ECL_NIL;
            for (uint32_t d = t->n_dims; d-- > 0;)
                shape = ecl_cons(ecl_make_int64_t(t->shape[d]), shape);
            out = ecl_cons(cl_list(5, rl_string_from_utf8(t->name, strlen(t->name)),
                                   ecl_make_simple_base_string(rl_st_dtype_name(t->dtype), -1),
                                   shape, ecl_make_uint64_t(t->nbytes), ecl_make_uint64_t(t->begin)),
                           out);
        }
    } RL_UNPIN_AFTER(h);
    ecl_return1(env, out);
}

/* (%st-metadata handle) -> list of (key . value) strings. */
static cl_object rl_prim_st_metadata(cl_object h) {
    const cl_env_ptr env = ecl_process_env();
    rl_st_file *f = rl_st_pin("%ST-METADATA", h);
    cl_object out = ECL_NIL;
    RL_WHILE_PINNED(env) {
        for (uint64_t i = rl_st_metadata_count(f); i-- > 0;) {
            const char *k = rl_st_metadata_key(f, i), *v = rl_st_metadata_value(f, i);
            out = ecl_cons(ecl_cons(rl_string_from_utf8(k, strlen(k)), rl_string_from_utf8(v, strlen(v))),
                           out);
        }
    } RL_UNPIN_AFTER(h);
    ecl_return1(env, out);
}

/* (%st-copy-tensor handle index dest): copy tensor INDEX's bytes into DEST,
 * a simple single-float (F32) or (unsigned-byte 16) (F16, BF16) array of
 * the tensor's byte size.  Answers DEST. */
static cl_object rl_prim_st_copy_tensor(cl_object h, cl_object index, cl_object dest) {
    const cl_env_ptr env = ecl_process_env();
    rl_st_file *f = rl_st_pin("%ST-COPY-TENSOR", h);
    RL_WHILE_PINNED(env) { /* the argument checks signal with the pin held */
        cl_index i = (cl_index)rl_arg_fixnum("%ST-COPY-TENSOR", 2, index, 0,
                                             (cl_fixnum)rl_st_tensor_count(f) - 1);
        const rl_st_tensor *t = rl_st_tensor_at(f, i);
        rl_copy_to_tensor_array("%ST-COPY-TENSOR", dest, t->dtype == RL_ST_F32, rl_st_tensor_data(f, i),
                                t->nbytes);
    } RL_UNPIN_AFTER(h);
    ecl_return1(env, dest);
}

/* Lone surrogate escapes.  Our JSON writer (lisp/text/json.lisp) writes
 * each byte that was not UTF-8 as the lone low surrogate escape \udcHH
 * (HH 80..ff, Python's surrogateescape), and Lisp strings hold that byte
 * as the character U+DCHH (prims/utf8.h); jansson refuses every lone
 * surrogate.  So before jansson reads the text, each lone \udcHH escape of
 * a string is rewritten, in a copy and in place (same length: jansson's
 * positions stay true), as \uBBHH, BB the first 256-character block of the
 * private use area (U+E000..U+F8FF) that no string of the text uses, and
 * the strings made from jansson's are mapped back: U+BB80..U+BBFF ->
 * U+DC80..U+DCFF.  Any other lone surrogate (a high one without its low, a
 * low one outside dc80..dcff) stands for no character and no byte: jansson
 * refuses it.  A text that uses every block keeps its escapes, and is
 * refused. */

/* The value of the 4 hex digits at P[I..I+4), or -1. */
static long json_hex4(const uint8_t *p, size_t n, size_t i) {
    long v = 0;
    if (i + 4 > n)
        return -1;
    for (size_t k = i; k < i + 4; k++) {
        int c = p[k], d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Calls FN(P, I, ARG) for the position I of each lone \udc80..\udcff
 * escape in the strings of the N bytes at P, and marks in USED[0..24] each
 * private-use block (U+E000 + 256 k) that a string's character or escape
 * uses; answers how many lone escapes there are. */
static size_t json_lone_escapes(const uint8_t *p, size_t n, unsigned char used[25],
                                void (*fn)(uint8_t *, size_t, unsigned), uint8_t *out,
                                unsigned block) {
    size_t count = 0;
    int in_string = 0, after_high = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = p[i];
        if (!in_string) {
            in_string = c == '"';
            continue;
        }
        if (c == '"') {
            in_string = after_high = 0;
            continue;
        }
        if (c == '\\' && i + 1 < n) {
            long v = p[i + 1] == 'u' ? json_hex4(p, n, i + 2) : -1;
            if (v < 0) { /* \" \\ \n ...: the escaped character skipped */
                i++;
                after_high = 0;
                continue;
            }
            if (v >= 0xdc80 && v <= 0xdcff && !after_high) {
                count++;
                if (fn)
                    fn(out, i, block);
            } else if (v >= 0xe000 && v <= 0xf8ff) {
                used[(v >> 8) - 0xe0] = 1;
            }
            after_high = v >= 0xd800 && v <= 0xdbff;
            i += 5;
            continue;
        }
        after_high = 0;
        /* a raw private-use character: lead byte EE or EF (U+E000..U+FFFF) */
        if ((c == 0xee || c == 0xef) && i + 1 < n) {
            unsigned high = ((c & 0x0f) << 4) | ((p[i + 1] & 0x3f) >> 2);
            if (high >= 0xe0 && high <= 0xf8)
                used[high - 0xe0] = 1;
        }
    }
    return count;
}

/* The escape \udcHH at OUT[I..I+6) rewritten as \uBBHH. */
static void json_rewrite_lone(uint8_t *out, size_t i, unsigned block) {
    static const char hex[] = "0123456789abcdef";
    out[i + 2] = (uint8_t)hex[block >> 4];
    out[i + 3] = (uint8_t)hex[block & 15];
}

/* The Lisp string of jansson's UTF-8 string P (N bytes), each character of
 * the private-use BLOCK (0: none) mapped back to U+DC80..U+DCFF. */
static cl_object json_lisp_string(const char *p, size_t n, unsigned block) {
    cl_object s = rl_string_from_utf8(p, n);
    if (block && ecl_t_of(s) == t_string)
        for (cl_index i = 0; i < s->string.fillp; i++) {
            ecl_character ch = s->string.self[i];
            if ((unsigned)(ch >> 8) == block)
                s->string.self[i] = 0xdc00 | (ch & 0xff);
        }
    return s;
}

/* JSON values as Lisp objects: object -> EQUAL hash table, array -> simple
 * vector, string -> string, integer -> integer, real -> double-float, true
 * -> T, false -> NIL, null -> :NULL.  When ORDER is a hash table (not NIL),
 * each object's table maps there to the list of its keys in file order
 * (jansson iterates an object in insertion order; the EQUAL table itself
 * keeps none).  jansson bounds the nesting depth (2048), so this recursion
 * is bounded too. */
static cl_object rl_json_to_lisp(json_t *j, cl_object order, unsigned block) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        cl_object table = cl_make_hash_table(4, ecl_make_keyword("TEST"), ecl_make_symbol("EQUAL", "CL"),
                                             ecl_make_keyword("SIZE"),
                                             ecl_make_fixnum((cl_fixnum)json_object_size(j) + 1));
        const char *k;
        json_t *v;
        cl_object keys = ECL_NIL;
        json_object_foreach(j, k, v) {
            cl_object key = json_lisp_string(k, strlen(k), block);
            ecl_sethash(key, table, rl_json_to_lisp(v, order, block));
            keys = ecl_cons(key, keys);
        }
        if (order != ECL_NIL)
            ecl_sethash(table, order, cl_nreverse(keys));
        return table;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        cl_object vec = si_make_vector(ECL_T, ecl_make_fixnum((cl_fixnum)n), ECL_NIL, ECL_NIL, ECL_NIL,
                                       ECL_NIL);
        for (size_t i = 0; i < n; i++)
            ecl_aset1(vec, i, rl_json_to_lisp(json_array_get(j, i), order, block));
        return vec;
    }
    case JSON_STRING:
        return json_lisp_string(json_string_value(j), json_string_length(j), block);
    case JSON_INTEGER:
        return ecl_make_int64_t((int64_t)json_integer_value(j));
    case JSON_REAL:
        return ecl_make_double_float(json_real_value(j));
    case JSON_TRUE:
        return ECL_T;
    case JSON_FALSE:
        return ECL_NIL;
    default:
        return ecl_make_keyword("NULL");
    }
}

/* (%json-parse octets order) -> value, or (values nil :json message offset).
 * OCTETS is UTF-8 text holding one JSON value; ORDER NIL, or a hash table
 * (EQ) that receives each object's keys in file order (rl_json_to_lisp). */
static cl_object rl_prim_json_parse(cl_object octets, cl_object order) {
    cl_index n = 0;
    const uint8_t *p = rl_octets("%JSON-PARSE", 1, octets, &n);
    json_error_t err;
    json_t *root;
    cl_object v;
    unsigned char used[25] = {0};
    unsigned block = 0;
    uint8_t *copy = NULL;
    if (json_lone_escapes(p, n, used, NULL, NULL, 0)) {
        for (unsigned k = 0; k < 25 && !block; k++)
            if (!used[k])
                block = 0xe0 + k;
        copy = block ? malloc(n) : NULL;
        if (!copy) {
            block = 0; /* jansson refuses the escapes as they are */
        } else {
            memcpy(copy, p, n);
            json_lone_escapes(p, n, used, json_rewrite_lone, copy, block);
            p = copy;
        }
    }
    {
        /* strtod raises the overflow flag on a number beyond the double
         * range (1e999): with ECL's trap on, that was a bare
         * FLOATING-POINT-OVERFLOW out of jansson's lexer; held, jansson
         * refuses the number itself, with its position. */
        RL_FP_HOLD();
        root = json_loadb((const char *)p, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
        RL_FP_RELEASE();
    }
    free(copy); /* jansson keeps copies of its strings */
    if (!root) {
        /* jansson's words for a number it cannot hold ("real number
         * overflow near '1e999'"), said as what was expected */
        static const struct {
            const char *jansson, *ours;
        } numbers[] = {
            {"real number overflow", "expected a number of magnitude below 1.8e308 (a double), found"},
            {"too big negative integer", "expected an integer within 64 bits, found"},
            {"too big integer", "expected an integer within 64 bits, found"},
            {"invalid Unicode", "expected a character (beyond U+FFFF, a surrogate pair) or a "
                                "byte escape \\udc80 to \\udcff, found the lone surrogate"},
        };
        char msg[300], what[JSON_ERROR_TEXT_LENGTH + 100];
        snprintf(what, sizeof what, "%s", err.text);
        for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
            size_t k = strlen(numbers[i].jansson);
            if (!strncmp(err.text, numbers[i].jansson, k)) {
                const char *rest = err.text + k;
                if (!strncmp(rest, " near ", 6))
                    rest += 6;
                else if (*rest == ' ')
                    rest++;
                snprintf(what, sizeof what, "%s %s", numbers[i].ours, *rest ? rest : "one beyond it");
                break;
            }
        }
        snprintf(msg, sizeof msg, "at byte %d (line %d, column %d): %s", err.position, err.line,
                 err.column, what);
        rl_return4(ecl_process_env(), ECL_NIL, ecl_make_keyword("JSON"),
                   ecl_make_simple_base_string(msg, -1), ecl_make_fixnum(err.position));
    }
    /* Conversion allocates Lisp objects only; nothing signals while ROOT is
     * live except out-of-memory, which ECL treats as fatal anyway. */
    v = rl_json_to_lisp(root, ecl_t_of(order) == t_hashtable ? order : ECL_NIL, block);
    json_decref(root);
    ecl_return1(ecl_process_env(), v);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%ST-OPEN", rl_prim_st_open, 1),
    RL_PRIM("%ST-TENSORS", rl_prim_st_tensors, 1),
    RL_PRIM("%ST-METADATA", rl_prim_st_metadata, 1),
    RL_PRIM("%ST-COPY-TENSOR", rl_prim_st_copy_tensor, 3),
};
RL_PRIM_TABLE(rl_safetensors_prims, "COMMAND-LINE", rl_defs);

/* The JSON reader TEXT's PARSE-JSON stands on. */
static const rl_prim_def rl_json_defs[] = {
    RL_PRIM("%JSON-PARSE", rl_prim_json_parse, 2),
};
RL_PRIM_TABLE(rl_json_prims, "TEXT", rl_json_defs);
