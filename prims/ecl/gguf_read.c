/* gguf_read.c - GGUF files read from Lisp (lisp/gguf.lisp): open and map,
 * the header facts, metadata as Lisp values, the tensor directory, tensor
 * copies.  A bad file is not signalled here: %GGUF-OPEN answers the status
 * and lisp/gguf.lisp signals rontolisp's own condition with the path. */
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/numfmt.h"
#include "prims/ecl/arrays.h"
#include "prims/quants.h"
#include "prims/ecl/glue.h"

/* ECL_UNWIND_PROTECT's own frame variable draws this warning; nothing of
 * ours lives across its setjmp. */
#pragma GCC diagnostic ignored "-Wclobbered"

/* The rl_gguf_file behind a handle, pinned (see glue.h): every primitive
 * that takes one calls rl_unpin(h) before it returns, and does its
 * signalling checks before this or inside RL_WHILE_PINNED.  Signals when
 * the file was closed. */
static rl_gguf_file *rl_gguf_pin(const char *fn, cl_object h) {
    return rl_pin_handle(fn, h, RL_H_GGUF_FILE, RL_C_FILE_CLOSED, "GGUF file");
}

static void rl_gguf_free(void *f) { rl_gguf_close(f); }

/* (%gguf-open path-octets) -> handle, or (values nil status-keyword
 * message offset).  The handle is also the base of the file's quantized
 * matrices: kernels pin it around every read of the mapping. */
static cl_object rl_prim_gguf_open(cl_object path) {
    char msg[RL_GGUF_MSG_SIZE] = "", pbuf[4096];
    uint64_t off = 0;
    rl_gguf_file *f = NULL;
    rl_gguf_status st;
    cl_object h;
    st = rl_gguf_open(rl_path_arg("%GGUF-OPEN", path, pbuf, sizeof pbuf), &f, msg, sizeof msg, &off);
    if (st != RL_GGUF_OK)
        return rl_status_values(rl_gguf_status_name(st), msg, off);
    h = rl_make_mapped_handle(RL_H_GGUF_FILE, f, rl_gguf_bytes(f), rl_gguf_file_size(f),
                              rl_gguf_free);
    ecl_return1(ecl_process_env(), h);
}

/* (%gguf-close handle base): close the file now.  Later use of the handle
 * or of a matrix on BASE signals; kernels running on it in other threads
 * finish first, the last one unmapping. */
static cl_object rl_prim_gguf_close(cl_object h, cl_object base) {
    if (rl_handle_p(h, RL_H_GGUF_FILE))
        rl_release(h);
    if (base != h && rl_handle_p(base, RL_H_GGUF_FILE))
        rl_release(base);
    ecl_return1(ecl_process_env(), ECL_NIL);
}

/* (%gguf-facts handle) -> (version alignment file-size data-offset kv-count
 * tensor-count header-end). */
static cl_object rl_prim_gguf_facts(cl_object h) {
    const cl_env_ptr env = ecl_process_env();
    rl_gguf_file *f = rl_gguf_pin("%GGUF-FACTS", h);
    cl_object out = ECL_NIL;
    RL_WHILE_PINNED(env) {
        out = cl_list(7, ecl_make_fixnum(rl_gguf_version(f)), ecl_make_fixnum(rl_gguf_alignment(f)),
                      ecl_make_uint64_t(rl_gguf_file_size(f)), ecl_make_uint64_t(rl_gguf_data_offset(f)),
                      ecl_make_uint64_t(rl_gguf_kv_count(f)), ecl_make_uint64_t(rl_gguf_tensor_count(f)),
                      ecl_make_uint64_t(rl_gguf_header_end(f)));
    } RL_UNPIN_AFTER(h);
    ecl_return1(env, out);
}

static cl_object rl_gguf_value_to_lisp(const rl_gguf_file *f, const rl_gguf_val *v);

static cl_object rl_gguf_array_to_lisp(const rl_gguf_file *f, const rl_gguf_val *v) {
    static const struct { uint32_t type; cl_elttype aet; } numeric[] = {
        {RL_GGUF_TYPE_U8, ecl_aet_b8},   {RL_GGUF_TYPE_I8, ecl_aet_i8},
        {RL_GGUF_TYPE_U16, ecl_aet_b16}, {RL_GGUF_TYPE_I16, ecl_aet_i16},
        {RL_GGUF_TYPE_U32, ecl_aet_b32}, {RL_GGUF_TYPE_I32, ecl_aet_i32},
        {RL_GGUF_TYPE_U64, ecl_aet_b64}, {RL_GGUF_TYPE_I64, ecl_aet_i64},
        {RL_GGUF_TYPE_F32, ecl_aet_sf},  {RL_GGUF_TYPE_F64, ecl_aet_df},
    };
    size_t k;
    cl_object out;
    for (k = 0; k < sizeof numeric / sizeof numeric[0]; k++)
        if (numeric[k].type == v->elem_type) {
            const void *p = NULL;
            out = ecl_alloc_simple_vector((cl_index)v->count, numeric[k].aet);
            if (rl_gguf_array_data(f, v, &p) == RL_GGUF_OK && v->count)
                memcpy(out->vector.self.b8, p, (size_t)(v->count * rl_gguf_type_size(v->elem_type)));
            return out;
        }
    out = ecl_alloc_simple_vector((cl_index)v->count, ecl_aet_object);
    for (uint64_t j = 0; j < v->count; j++) {
        rl_gguf_val e;
        if (rl_gguf_array_get(f, v, j, &e) != RL_GGUF_OK)
            break; /* cannot happen for a parsed file */
        out->vector.self.t[j] = rl_gguf_value_to_lisp(f, &e);
    }
    return out;
}

static cl_object rl_gguf_value_to_lisp(const rl_gguf_file *f, const rl_gguf_val *v) {
    uint64_t u;
    int64_t i;
    double d;
    int b;
    const char *p;
    switch (v->type) {
    case RL_GGUF_TYPE_U8: case RL_GGUF_TYPE_U16: case RL_GGUF_TYPE_U32: case RL_GGUF_TYPE_U64:
        rl_gguf_val_u64(f, v, &u);
        return ecl_make_uint64_t(u);
    case RL_GGUF_TYPE_I8: case RL_GGUF_TYPE_I16: case RL_GGUF_TYPE_I32: case RL_GGUF_TYPE_I64:
        rl_gguf_val_i64(f, v, &i);
        return ecl_make_int64_t(i);
    case RL_GGUF_TYPE_F32:
        rl_gguf_val_f64(f, v, &d);
        {
            float x;
            RL_FP_HOLD();
            x = (float)d; /* exact: it was an f32 */
            RL_FP_RELEASE();
            return ecl_make_single_float(x);
        }
    case RL_GGUF_TYPE_F64:
        rl_gguf_val_f64(f, v, &d);
        return ecl_make_double_float(d);
    case RL_GGUF_TYPE_BOOL:
        rl_gguf_val_bool(f, v, &b);
        return b ? ECL_T : ECL_NIL;
    case RL_GGUF_TYPE_STRING:
        rl_gguf_val_str(f, v, &p, &u);
        return rl_string_from_utf8(p, u);
    case RL_GGUF_TYPE_ARRAY:
        return rl_gguf_array_to_lisp(f, v);
    default:
        return ECL_NIL; /* unknown types never get past the reader */
    }
}

/* The GGUF value type names of inspect, as keywords: :U8 ... :ARRAY. */
static cl_object rl_gguf_type_keyword(uint32_t t) {
    const char *name = rl_gguf_type_name(t);
    return name ? rl_keyword(name) : ECL_NIL;
}

/* The type of a value: a keyword, or for an array the list (:ARRAY elem)
 * where elem is the element type's keyword.  An array of arrays says the
 * type of its elements, which each inner array states for itself (empty
 * ones included): (:ARRAY inner) when they all agree, (:ARRAY :ARRAY)
 * when there are none, else (:ARRAY inner-0 inner-1 ...), one type per
 * element, so that every one is printed and written back as the file has
 * it. */
static cl_object rl_gguf_type_descr(const rl_gguf_file *f, const rl_gguf_val *v) {
    /* PREV: the type of the element after the one at hand, and in the end
     * the first element's. */
    cl_object array = ecl_make_keyword("ARRAY"), types = ECL_NIL, prev = ECL_NIL;
    int same = 1;
    if (v->type != RL_GGUF_TYPE_ARRAY)
        return rl_gguf_type_keyword(v->type);
    if (v->elem_type != RL_GGUF_TYPE_ARRAY)
        return cl_list(2, array, rl_gguf_type_keyword(v->elem_type));
    if (v->count == 0)
        return cl_list(2, array, array);
    for (uint64_t j = v->count; j-- > 0;) {
        rl_gguf_val e;
        cl_object t;
        if (rl_gguf_array_get(f, v, j, &e) != RL_GGUF_OK)
            return cl_list(2, array, array); /* cannot happen for a parsed file */
        t = rl_gguf_type_descr(f, &e);
        if (types != ECL_NIL && !ecl_equal(t, prev))
            same = 0;
        prev = t;
        types = ecl_cons(t, types);
    }
    return same ? cl_list(2, array, prev) : ecl_cons(array, types);
}

/* (%gguf-metadata handle) -> a list of (key type value), in file order. */
static cl_object rl_prim_gguf_metadata(cl_object h) {
    const cl_env_ptr env = ecl_process_env();
    rl_gguf_file *f = rl_gguf_pin("%GGUF-METADATA", h);
    uint64_t i;
    cl_object out = ECL_NIL;
    RL_WHILE_PINNED(env) {
        for (i = rl_gguf_kv_count(f); i-- > 0;) {
            uint64_t klen = 0;
            const char *key = rl_gguf_kv_key(f, i, &klen);
            rl_gguf_val v;
            rl_gguf_kv_value(f, i, &v);
            out = ecl_cons(cl_list(3, rl_string_from_utf8(key, klen), rl_gguf_type_descr(f, &v),
                                   rl_gguf_value_to_lisp(f, &v)),
                           out);
        }
    } RL_UNPIN_AFTER(h);
    ecl_return1(env, out);
}

/* (%gguf-tensors handle) -> a list of (name n-dims ne-list type-id offset
 * nbytes absolute-offset), in file order. */
static cl_object rl_prim_gguf_tensors(cl_object h) {
    const cl_env_ptr env = ecl_process_env();
    rl_gguf_file *f = rl_gguf_pin("%GGUF-TENSORS", h);
    uint64_t i;
    cl_object out = ECL_NIL;
    RL_WHILE_PINNED(env) {
        for (i = rl_gguf_tensor_count(f); i-- > 0;) {
            uint64_t len = 0;
            const char *name = rl_gguf_tensor_name(f, i, &len);
            uint32_t nd = rl_gguf_tensor_n_dims(f, i), d;
            cl_object ne = ECL_NIL;
            for (d = nd; d-- > 0;)
                ne = ecl_cons(ecl_make_int64_t(rl_gguf_tensor_ne(f, i, d)), ne);
            out = ecl_cons(cl_list(7, rl_string_from_utf8(name, len), ecl_make_fixnum(nd), ne,
                                   ecl_make_fixnum(rl_gguf_tensor_type(f, i)),
                                   ecl_make_uint64_t(rl_gguf_tensor_offset(f, i)),
                                   ecl_make_uint64_t(rl_gguf_tensor_nbytes(f, i)),
                                   ecl_make_uint64_t((uint64_t)((const uint8_t *)rl_gguf_tensor_data(f, i) -
                                                                rl_gguf_bytes(f)))),
                           out);
        }
    } RL_UNPIN_AFTER(h);
    ecl_return1(env, out);
}

/* INDEX, argument 2 of FN, as a tensor index of F; signals after letting
 * go of the caller's pin on H when it is not one. */
static uint64_t rl_tensor_index_arg(const char *fn, cl_object h, rl_gguf_file *f, cl_object index) {
    if (!ECL_FIXNUMP(index) || ecl_fixnum(index) < 0 ||
        (uint64_t)ecl_fixnum(index) >= rl_gguf_tensor_count(f)) {
        rl_unpin(h);
        rl_arg_fixnum(fn, 2, index, 0, (cl_fixnum)rl_gguf_tensor_count(f) - 1);
        rl_type_error(fn, 2, index, RL_T_FIXNUM); /* an empty file */
    }
    return (uint64_t)ecl_fixnum(index);
}

/* (%gguf-copy-tensor handle index dest): the tensor's bytes into DEST, a
 * simple array (single-float for F32, (unsigned-byte 16) for F16/BF16) of
 * exactly that many bytes. */
static cl_object rl_prim_gguf_copy_tensor(cl_object h, cl_object index, cl_object dest) {
    rl_gguf_file *f = rl_gguf_pin("%GGUF-COPY-TENSOR", h);
    uint64_t i, nbytes;
    int f32_p;
    void *y;
    /* the checks that signal, each after letting the pin go */
    i = rl_tensor_index_arg("%GGUF-COPY-TENSOR", h, f, index);
    f32_p = rl_gguf_tensor_type(f, i) == RL_GGUF_GGML_F32;
    nbytes = rl_gguf_tensor_nbytes(f, i);
    y = rl_tensor_array_dest(dest, f32_p, nbytes);
    if (!y) {
        rl_unpin(h);
        rl_type_error("%GGUF-COPY-TENSOR", 3, dest, RL_T_ARRAY);
    }
    if (nbytes)
        memcpy(y, rl_gguf_tensor_data(f, i), (size_t)nbytes);
    rl_unpin(h);
    ecl_return1(ecl_process_env(), dest);
}

/* (%gguf-dequantize-tensor handle index dest): the values of a tensor of a
 * type prims/quants.h dequantizes (Q4_0 .. Q6_K, IQ4_NL, IQ4_XS), as
 * ggml's dequantize_row_* gives them (doc/formats.md §3-§4a), into DEST, a
 * simple single-float array with exactly the tensor's element count: the
 * whole tensor in one call, straight from the mapping (gguf:tensor answers
 * a quantized matrix instead; the tests hold its elements to this).  An
 * infinite scale in the file gives infinities and NaNs, as in ggml: the
 * floating-point traps are held while the kernel runs. */
static cl_object rl_prim_gguf_dequantize_tensor(cl_object h, cl_object index, cl_object dest) {
    static const char fn[] = "%GGUF-DEQUANTIZE-TENSOR";
    rl_gguf_file *f = rl_gguf_pin(fn, h);
    uint64_t i = rl_tensor_index_arg(fn, h, f, index);
    uint32_t type = rl_gguf_tensor_type(f, i);
    if (!rl_quant_traits_of(type)) {
        rl_unpin(h);
        rl_signal(RL_C_ERROR, "%s: tensor %llu: expected a type it dequantizes, found %s", fn,
                  (unsigned long long)i, rl_gguf_ggml_type_name(type));
    }
    /* the reader checked nbytes = element count / block * block bytes */
    uint64_t n = rl_gguf_tensor_nbytes(f, i) / rl_gguf_ggml_block_bytes(type) *
                 rl_gguf_ggml_block_size(type);
    cl_index m = 0;
    float *y = rl_simple_data(dest, ecl_aet_sf, &m);
    if (!y || (uint64_t)m != n) {
        rl_unpin(h);
        rl_type_error(fn, 3, dest, RL_T_ARRAY);
    }
    {
        RL_FP_HOLD();
        rl_type_traits_of(type)->to_float(rl_gguf_tensor_data(f, i), y,
                                          (size_t)(n / rl_gguf_ggml_block_size(type)));
        RL_FP_RELEASE();
    }
    rl_unpin(h);
    ecl_return1(ecl_process_env(), dest);
}

/* A view's pin outlives every primitive call: the vector reads the mapping
 * directly, so the pin goes only when the vector is garbage, and a
 * gguf:close before that leaves the bytes mapped instead of pulling them
 * from under a live vector. */
static cl_object rl_finalize_octet_view(cl_narg narg, ...) {
    cl_env_ptr env = ecl_process_env();
    cl_object token = ECL_CONS_CAR(env->function->cclosure.env);
    (void)narg;
    rl_unpin_token(token->foreign.data);
    ecl_return0(env);
}

/* (%gguf-tensor-octets handle index) -> an (unsigned-byte 8) vector over
 * the tensor's bytes in the mapping: no copy, whatever the ggml type. */
static cl_object rl_prim_gguf_tensor_octets(cl_object h, cl_object index) {
    const cl_env_ptr env = ecl_process_env();
    rl_gguf_file *f = rl_gguf_pin("%GGUF-TENSOR-OCTETS", h);
    uint64_t i, nbytes;
    cl_object v = ECL_NIL, token, finalizer;
    volatile int handed = 0;
    i = rl_tensor_index_arg("%GGUF-TENSOR-OCTETS", h, f, index);
    nbytes = rl_gguf_tensor_nbytes(f, i);
    ECL_UNWIND_PROTECT_BEGIN(env) {
        v = ecl_alloc_object(t_vector);
        v->vector.elttype = ecl_aet_b8;
        v->vector.displaced = ECL_NIL;
        v->vector.dim = v->vector.fillp = (cl_index)nbytes;
        v->vector.flags = 0;
        /* the reader checked that the bytes lie inside the mapping */
        v->vector.self.b8 = (uint8_t *)rl_gguf_tensor_data(f, i);
        token = ecl_make_foreign_data(ECL_NIL, 0, NULL);
        finalizer = ecl_make_cclosure_va(rl_finalize_octet_view, ecl_list1(token), ECL_NIL, 1);
        /* everything allocated: the call's pin becomes the view's, released
         * by its finalizer (a leak rather than a second release should
         * registering it fail) */
        token->foreign.data = rl_pinned_token(h);
        handed = 1;
        si_set_finalizer(v, finalizer);
    } ECL_UNWIND_PROTECT_EXIT {
        if (!handed)
            rl_unpin(h);
    } ECL_UNWIND_PROTECT_END;
    ecl_return1(env, v);
}

/* (%ggml-type id) -> (values name block-size block-bytes known-p) or NIL. */
static cl_object rl_prim_ggml_type(cl_object id) {
    uint32_t t = (uint32_t)rl_arg_fixnum("%GGML-TYPE", 1, id, 0, 0xffffffffL);
    const char *name = rl_gguf_ggml_type_name(t);
    if (!name)
        ecl_return1(ecl_process_env(), ECL_NIL);
    rl_return4(ecl_process_env(), ecl_make_simple_base_string(name, -1),
               ecl_make_fixnum(rl_gguf_ggml_block_size(t)), ecl_make_fixnum(rl_gguf_ggml_block_bytes(t)),
               rl_gguf_ggml_type_known(t) ? ECL_T : ECL_NIL);
}

/* (%type-table) -> a list, by id, of (id name block-size block-bytes family)
 * for every ggml id with a name (gguf/types.c), FAMILY the keyword of its
 * row in prims/type_traits.c (:FLOAT :Q8_0 :QUANT) or NIL when rontolisp
 * does not compute with it.  What lisp/quant/formats.lisp builds its type
 * table from. */
static cl_object rl_prim_type_table(void) {
    cl_object out = ECL_NIL;
    for (uint32_t t = RL_GGUF_GGML_TYPE_COUNT; t-- > 0;) {
        const char *name = rl_gguf_ggml_type_name(t);
        const rl_type_traits *tr = rl_type_traits_of(t);
        if (!name)
            continue;
        out = ecl_cons(cl_list(5, ecl_make_fixnum(t), ecl_make_simple_base_string(name, -1),
                               ecl_make_fixnum(rl_gguf_ggml_block_size(t)),
                               ecl_make_fixnum(rl_gguf_ggml_block_bytes(t)),
                               tr ? rl_keyword(rl_type_family_name(tr->family)) : ECL_NIL),
                       out);
    }
    ecl_return1(ecl_process_env(), out);
}

/* The names of the ids 0 .. count-1 of a C table, as keywords. */
static cl_object rl_name_keywords(const char *(*name)(uint32_t), uint32_t count) {
    cl_object out = ECL_NIL;
    for (uint32_t i = count; i-- > 0;) {
        const char *n = name(i);
        out = ecl_cons(n ? rl_keyword(n) : ECL_NIL, out);
    }
    return out;
}

/* (%format-tables) -> (values ggml-type-count value-types number-kinds):
 * the C tables lisp/formats.lisp builds its own from, so that no id is
 * typed twice.  VALUE-TYPES lists the GGUF metadata value type keywords by
 * id (:U8 ... :F64); NUMBER-KINDS the array kind keywords by code (:F32
 * :F64 :F16 :BF16, rl_gguf_num_kind).  ggml types are read one at a time
 * with %GGML-TYPE, or all at once with %TYPE-TABLE. */
static cl_object rl_prim_format_tables(void) {
    ecl_return3(ecl_process_env(), ecl_make_fixnum(RL_GGUF_GGML_TYPE_COUNT),
                rl_name_keywords(rl_gguf_type_name, RL_GGUF_TYPE_COUNT),
                rl_name_keywords(rl_gguf_num_kind_name, RL_GGUF_NUM_KIND_COUNT));
}

/* The format tables serve every Lisp file (lisp/formats.lisp builds its
 * own from them); the file primitives only lisp/gguf.lisp, in its
 * package. */
static const rl_prim_def rl_format_defs[] = {
    RL_PRIM("%FORMAT-TABLES", rl_prim_format_tables, 0),
    RL_PRIM("%GGML-TYPE", rl_prim_ggml_type, 1),
    RL_PRIM("%TYPE-TABLE", rl_prim_type_table, 0),
};
RL_PRIM_TABLE(rl_format_prims, "RONTOLISP", rl_format_defs);

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%GGUF-OPEN", rl_prim_gguf_open, 1),
    RL_PRIM("%GGUF-CLOSE", rl_prim_gguf_close, 2),
    RL_PRIM("%GGUF-FACTS", rl_prim_gguf_facts, 1),
    RL_PRIM("%GGUF-METADATA", rl_prim_gguf_metadata, 1),
    RL_PRIM("%GGUF-TENSORS", rl_prim_gguf_tensors, 1),
    RL_PRIM("%GGUF-COPY-TENSOR", rl_prim_gguf_copy_tensor, 3),
    RL_PRIM("%GGUF-TENSOR-OCTETS", rl_prim_gguf_tensor_octets, 2),
    RL_PRIM("%GGUF-DEQUANTIZE-TENSOR", rl_prim_gguf_dequantize_tensor, 3),
};
RL_PRIM_TABLE(rl_gguf_read_prims, "GGUF", rl_defs);
