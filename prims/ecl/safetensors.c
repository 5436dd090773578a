/* safetensors.c - safetensors files and JSON text seen from Lisp
 * (lisp/safetensors.lisp, lisp/convert.lisp). */
#include <jansson.h>
#include <stdio.h>
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

/* JSON values as Lisp objects: object -> EQUAL hash table, array -> simple
 * vector, string -> string, integer -> integer, real -> double-float, true
 * -> T, false -> NIL, null -> :NULL.  When ORDER is a hash table (not NIL),
 * each object's table maps there to the list of its keys in file order
 * (jansson iterates an object in insertion order; the EQUAL table itself
 * keeps none).  jansson bounds the nesting depth (2048), so this recursion
 * is bounded too. */
static cl_object rl_json_to_lisp(json_t *j, cl_object order) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        cl_object table = cl_make_hash_table(4, ecl_make_keyword("TEST"), ecl_make_symbol("EQUAL", "CL"),
                                             ecl_make_keyword("SIZE"),
                                             ecl_make_fixnum((cl_fixnum)json_object_size(j) + 1));
        const char *k;
        json_t *v;
        cl_object keys = ECL_NIL;
        json_object_foreach(j, k, v) {
            cl_object key = rl_string_from_utf8(k, strlen(k));
            ecl_sethash(key, table, rl_json_to_lisp(v, order));
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
            ecl_aset1(vec, i, rl_json_to_lisp(json_array_get(j, i), order));
        return vec;
    }
    case JSON_STRING:
        return rl_string_from_utf8(json_string_value(j), json_string_length(j));
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
    {
        /* strtod raises the overflow flag on a number beyond the double
         * range (1e999): with ECL's trap on, that was a bare
         * FLOATING-POINT-OVERFLOW out of jansson's lexer; held, jansson
         * refuses the number itself, with its position. */
        RL_FP_HOLD();
        root = json_loadb((const char *)p, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
        RL_FP_RELEASE();
    }
    if (!root) {
        /* jansson's words for a number it cannot hold ("real number
         * overflow near '1e999'"), said as what was expected */
        static const struct {
            const char *jansson, *ours;
        } numbers[] = {
            {"real number overflow", "expected a number of magnitude below 1.8e308 (a double), found"},
            {"too big negative integer", "expected an integer within 64 bits, found"},
            {"too big integer", "expected an integer within 64 bits, found"},
        };
        char msg[300], what[JSON_ERROR_TEXT_LENGTH + 100];
        snprintf(what, sizeof what, "%s", err.text);
        for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
            size_t k = strlen(numbers[i].jansson);
            if (!strncmp(err.text, numbers[i].jansson, k)) {
                const char *rest = err.text + k;
                if (!strncmp(rest, " near ", 6))
                    rest += 6;
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
    v = rl_json_to_lisp(root, ecl_t_of(order) == t_hashtable ? order : ECL_NIL);
    json_decref(root);
    ecl_return1(ecl_process_env(), v);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%ST-OPEN", rl_prim_st_open, 1),
    RL_PRIM("%ST-TENSORS", rl_prim_st_tensors, 1),
    RL_PRIM("%ST-METADATA", rl_prim_st_metadata, 1),
    RL_PRIM("%ST-COPY-TENSOR", rl_prim_st_copy_tensor, 3),
    RL_PRIM("%JSON-PARSE", rl_prim_json_parse, 2),
};
RL_PRIM_TABLE(rl_safetensors_prims, "RONTOLISP", rl_defs);
