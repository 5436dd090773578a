/* gguf_write.c - the GGUF writer seen from Lisp (gguf:write and the
 * converters): a writer handle takes keys, values and tensors, then writes
 * the file.  Errors are sticky in the C writer and reported by
 * %GGUF-W-WRITE as a status, which lisp/gguf.lisp turns into a condition. */
#include "gguf/gguf.h"
#include "prims/ecl/glue.h"
#include "prims/ecl/qmatrix.h"

static rl_gguf_writer *rl_writer(const char *fn, cl_object w) {
    return rl_handle(fn, w, RL_H_GGUF_WRITER, RL_C_ERROR, "GGUF writer");
}

/* (%gguf-writer-new alignment implicit-p) */
static cl_object rl_prim_gguf_writer_new(cl_object alignment, cl_object implicit) {
    uint32_t a = (uint32_t)rl_arg_fixnum("%GGUF-WRITER-NEW", 1, alignment, 1, 0x80000000L);
    rl_gguf_writer *w = rl_gguf_writer_new();
    cl_object o;
    if (!w)
        rl_signal(RL_C_ERROR, "gguf: out of memory making a writer");
    o = rl_make_handle(RL_H_GGUF_WRITER, w);
    rl_gguf_writer_set_alignment(w, a); /* errors are sticky: reported at write */
    if (implicit != ECL_NIL)
        rl_gguf_writer_set_implicit_alignment(w, 1);
    ecl_return1(ecl_process_env(), o);
}

/* NE, a list of 1 to 4 fixnums (ggml dims), into DIMS; answers the count. */
static uint32_t rl_tensor_dims(const char *fn, cl_object ne, int64_t dims[RL_GGUF_MAX_DIMS]) {
    uint32_t nd = 0;
    for (cl_object l = ne; l != ECL_NIL; l = ECL_CONS_CDR(l)) {
        if (!ECL_CONSP(l) || nd >= RL_GGUF_MAX_DIMS || !ECL_FIXNUMP(ECL_CONS_CAR(l)))
            rl_type_error(fn, 3, ne, RL_T_LIST);
        dims[nd++] = ecl_fixnum(ECL_CONS_CAR(l));
    }
    return nd;
}

/* (%gguf-w-key w octets) */
static cl_object rl_prim_gguf_w_key(cl_object w, cl_object key) {
    cl_index n = 0;
    const uint8_t *p = rl_octets("%GGUF-W-KEY", 2, key, &n);
    rl_gguf_w_key(rl_writer("%GGUF-W-KEY", w), (const char *)p, n);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-scalar w type-id value): integers, floats, booleans (T/NIL). */
static cl_object rl_prim_gguf_w_scalar(cl_object w, cl_object type, cl_object v) {
    rl_gguf_writer *wr = rl_writer("%GGUF-W-SCALAR", w);
    uint32_t t = (uint32_t)rl_arg_fixnum("%GGUF-W-SCALAR", 2, type, 0, RL_GGUF_TYPE_COUNT - 1);
    switch (t) {
    case RL_GGUF_TYPE_BOOL:
        rl_gguf_w_uint(wr, t, v != ECL_NIL);
        break;
    case RL_GGUF_TYPE_U8: case RL_GGUF_TYPE_U16: case RL_GGUF_TYPE_U32: case RL_GGUF_TYPE_U64:
        if (!ECL_FIXNUMP(v) && !ECL_BIGNUMP(v))
            rl_type_error("%GGUF-W-SCALAR", 3, v, RL_T_INTEGER);
        rl_gguf_w_uint(wr, t, ecl_to_uint64_t(v));
        break;
    case RL_GGUF_TYPE_I8: case RL_GGUF_TYPE_I16: case RL_GGUF_TYPE_I32: case RL_GGUF_TYPE_I64:
        if (!ECL_FIXNUMP(v) && !ECL_BIGNUMP(v))
            rl_type_error("%GGUF-W-SCALAR", 3, v, RL_T_INTEGER);
        rl_gguf_w_int(wr, t, ecl_to_int64_t(v));
        break;
    case RL_GGUF_TYPE_F32: case RL_GGUF_TYPE_F64: {
        double d;
        if (ecl_t_of(v) == t_singlefloat)
            d = ecl_single_float(v);
        else if (ecl_t_of(v) == t_doublefloat)
            d = ecl_double_float(v);
        else
            rl_type_error("%GGUF-W-SCALAR", 3, v, RL_T_FLOAT);
        {
            RL_FP_HOLD();
            rl_gguf_w_float(wr, t, d);
            RL_FP_RELEASE();
        }
        break;
    }
    default:
        rl_type_error("%GGUF-W-SCALAR", 2, type, RL_T_INTEGER);
    }
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-string w octets) */
static cl_object rl_prim_gguf_w_string(cl_object w, cl_object s) {
    cl_index n = 0;
    const uint8_t *p = rl_octets("%GGUF-W-STRING", 2, s, &n);
    rl_gguf_w_str(rl_writer("%GGUF-W-STRING", w), (const char *)p, n);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-array-begin w elem-type) and (%gguf-w-array-end w) */
static cl_object rl_prim_gguf_w_array_begin(cl_object w, cl_object type) {
    rl_gguf_w_array_begin(rl_writer("%GGUF-W-ARRAY-BEGIN", w), (uint32_t)rl_arg_fixnum("%GGUF-W-ARRAY-BEGIN", 2, type, 0,
                                                               RL_GGUF_TYPE_COUNT - 1));
    ecl_return1(ecl_process_env(), w);
}

static cl_object rl_prim_gguf_w_array_end(cl_object w) {
    rl_gguf_w_array_end(rl_writer("%GGUF-W-ARRAY-END", w));
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-array-raw w vector): every element of a specialized numeric
 * vector whose element type is the open array's. */
static cl_object rl_prim_gguf_w_array_raw(cl_object w, cl_object v) {
    if (ECL_IMMEDIATE(v) || v->d.t != t_vector || v->vector.displaced != ECL_NIL ||
        v->vector.elttype == ecl_aet_object || ECL_ARRAY_HAS_FILL_POINTER_P(v))
        rl_type_error("%GGUF-W-ARRAY-RAW", 2, v, RL_T_VECTOR);
    rl_gguf_w_array_raw(rl_writer("%GGUF-W-ARRAY-RAW", w), v->vector.self.b8, v->vector.dim);
    ecl_return1(ecl_process_env(), w);
}

/* The writer reads a tensor's bytes only when it writes: a pin on the
 * mapping they live in (PINNED, or ECL_NIL for Lisp memory) lasts until the
 * writer is freed, so a gguf:close meanwhile cannot unmap them. */
static void rl_writer_keep_pin(rl_gguf_writer *wr, cl_object pinned) {
    void *token;
    if (pinned == ECL_NIL)
        return;
    token = rl_pinned_token(pinned);
    if (rl_gguf_writer_on_free(wr, rl_unpin_token, token) != RL_GGUF_OK) {
        rl_unpin_token(token);
        rl_signal(RL_C_ERROR, "gguf:write: out of memory");
    }
}

/* (%gguf-w-tensor w name-octets ne-list type-id data): DATA a simple array
 * (single-float, (unsigned-byte 16) or (unsigned-byte 8)) or a quantized
 * matrix, whose bytes must stay alive until the file is written. */
static cl_object rl_prim_gguf_w_tensor(cl_object w, cl_object name, cl_object ne,
                                       cl_object type, cl_object data) {
    rl_gguf_writer *wr = rl_writer("%GGUF-W-TENSOR", w);
    cl_index nlen = 0, n = 0;
    const uint8_t *np = rl_octets("%GGUF-W-TENSOR", 2, name, &nlen);
    int64_t dims[RL_GGUF_MAX_DIMS];
    uint32_t nd = 0;
    const void *p;
    uint64_t nbytes;
    uint32_t tid;
    nd = rl_tensor_dims("%GGUF-W-TENSOR", ne, dims);
    tid = (uint32_t)rl_arg_fixnum("%GGUF-W-TENSOR", 4, type, 0, 0xffff);
    if (rl_qm_p(data)) {
        rl_qm_view v;
        rl_qm_pin_any(data, &v); /* any type: its blocks are written as they are */
        rl_writer_keep_pin(wr, v.pinned);
        p = v.data;
        nbytes = v.nbytes;
    } else if ((p = rl_simple_data(data, ecl_aet_sf, &n))) {
        nbytes = (uint64_t)n * 4;
    } else if ((p = rl_simple_data(data, ecl_aet_b16, &n))) {
        nbytes = (uint64_t)n * 2;
    } else if ((p = rl_simple_data(data, ecl_aet_b8, &n))) {
        nbytes = n;
    } else {
        rl_type_error("%GGUF-W-TENSOR", 5, data, RL_T_ARRAY);
    }
    rl_gguf_w_tensor(wr, (const char *)np, nlen, nd, dims, tid, p, nbytes);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-tensor-raw w name-octets ne-list type-id base offset nbytes):
 * a tensor whose bytes are NBYTES at OFFSET in BASE, the foreign pointer to
 * a mapped file (the file must stay open until the writer writes). */
static cl_object rl_prim_gguf_w_tensor_raw(cl_object w, cl_object name, cl_object ne,
                                           cl_object type, cl_object base, cl_object offset,
                                           cl_object nbytes) {
    rl_gguf_writer *wr = rl_writer("%GGUF-W-TENSOR-RAW", w);
    cl_index nlen = 0;
    const uint8_t *np = rl_octets("%GGUF-W-TENSOR-RAW", 2, name, &nlen);
    int64_t dims[RL_GGUF_MAX_DIMS];
    uint32_t nd;
    uint64_t off, nb, size = 0;
    uint32_t tid;
    const uint8_t *bytes = NULL;
    nd = rl_tensor_dims("%GGUF-W-TENSOR-RAW", ne, dims);
    tid = (uint32_t)rl_arg_fixnum("%GGUF-W-TENSOR-RAW", 4, type, 0, 0xffff);
    if (!rl_mapped_p(base))
        rl_type_error("%GGUF-W-TENSOR-RAW", 5, base, RL_T_FOREIGN_DATA);
    if (!ECL_FIXNUMP(offset) || !ECL_FIXNUMP(nbytes))
        rl_type_error("%GGUF-W-TENSOR-RAW", ECL_FIXNUMP(offset) ? 7 : 6,
                      ECL_FIXNUMP(offset) ? nbytes : offset, RL_T_FIXNUM);
    if (!rl_pin(base, &bytes, &size))
        rl_signal(RL_C_FILE_CLOSED, "gguf:write: the source GGUF file was closed");
    off = (uint64_t)ecl_fixnum(offset);
    nb = (uint64_t)ecl_fixnum(nbytes);
    if (ecl_fixnum(offset) < 0 || ecl_fixnum(nbytes) < 0 || off > size || nb > size - off) {
        rl_unpin(base);
        rl_signal(RL_C_ERROR, "%%GGUF-W-TENSOR-RAW: bytes %lld to %lld are outside the file's %llu",
                  (long long)ecl_fixnum(offset), (long long)ecl_fixnum(offset) + ecl_fixnum(nbytes),
                  (unsigned long long)size);
    }
    rl_writer_keep_pin(wr, base);
    rl_gguf_w_tensor(wr, (const char *)np, nlen, nd, dims, tid, bytes + off, nb);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-write w path) -> T or (values nil status message offset). */
static cl_object rl_prim_gguf_w_write(cl_object w, cl_object path) {
    char msg[RL_GGUF_MSG_SIZE] = "";
    uint64_t off = 0;
    rl_gguf_status st;
    char pbuf[4096];
    st = rl_gguf_writer_write(rl_writer("%GGUF-W-WRITE", w), rl_path_arg("%GGUF-W-WRITE", path, pbuf, sizeof pbuf),
                              msg, sizeof msg, &off);
    RL_KEEP_LIVE(w);
    if (st != RL_GGUF_OK)
        return rl_status_values(rl_gguf_status_name(st), msg, off);
    ecl_return1(ecl_process_env(), ECL_T);
}

/* (%gguf-w-tensor-deferred w name-octets ne-list type-id): a tensor whose
 * bytes come later through the stream (%gguf-w-stream-begin). */
static cl_object rl_prim_gguf_w_tensor_deferred(cl_object w, cl_object name, cl_object ne,
                                                cl_object type) {
    rl_gguf_writer *wr = rl_writer("%GGUF-W-TENSOR-DEFERRED", w);
    cl_index nlen = 0;
    const uint8_t *np = rl_octets("%GGUF-W-TENSOR-DEFERRED", 2, name, &nlen);
    int64_t dims[RL_GGUF_MAX_DIMS];
    uint32_t nd = rl_tensor_dims("%GGUF-W-TENSOR-DEFERRED", ne, dims);
    uint32_t tid = (uint32_t)rl_arg_fixnum("%GGUF-W-TENSOR-DEFERRED", 4, type, 0, 0xffff);
    rl_gguf_w_tensor_deferred(wr, (const char *)np, nlen, nd, dims, tid);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-stream-begin w path) -> T or (values nil status message offset). */
static cl_object rl_prim_gguf_w_stream_begin(cl_object w, cl_object path) {
    char msg[RL_GGUF_MSG_SIZE] = "", pbuf[4096];
    uint64_t off = 0;
    rl_gguf_writer *wr = rl_writer("%GGUF-W-STREAM-BEGIN", w);
    rl_gguf_status st = rl_gguf_writer_stream_begin(
        wr, rl_path_arg("%GGUF-W-STREAM-BEGIN", path, pbuf, sizeof pbuf), msg, sizeof msg, &off);
    RL_KEEP_LIVE(w);
    if (st != RL_GGUF_OK)
        return rl_status_values(rl_gguf_status_name(st), msg, off);
    ecl_return1(ecl_process_env(), ECL_T);
}

/* (%gguf-w-stream-end w) -> T or (values nil status message offset). */
static cl_object rl_prim_gguf_w_stream_end(cl_object w) {
    char msg[RL_GGUF_MSG_SIZE] = "";
    uint64_t off = 0;
    rl_gguf_writer *wr = rl_writer("%GGUF-W-STREAM-END", w);
    rl_gguf_status st = rl_gguf_writer_stream_end(wr, msg, sizeof msg, &off);
    RL_KEEP_LIVE(w);
    if (st != RL_GGUF_OK)
        return rl_status_values(rl_gguf_status_name(st), msg, off);
    ecl_return1(ecl_process_env(), ECL_T);
}

/* (%gguf-w-stream-abort w): removes the temporary file of an open stream. */
static cl_object rl_prim_gguf_w_stream_abort(cl_object w) {
    rl_gguf_writer_stream_abort(
        rl_writer("%GGUF-W-STREAM-ABORT", w));
    RL_KEEP_LIVE(w);
    ecl_return1(ecl_process_env(), ECL_NIL);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%GGUF-WRITER-NEW", rl_prim_gguf_writer_new, 2),
    RL_PRIM("%GGUF-W-KEY", rl_prim_gguf_w_key, 2),
    RL_PRIM("%GGUF-W-SCALAR", rl_prim_gguf_w_scalar, 3),
    RL_PRIM("%GGUF-W-STRING", rl_prim_gguf_w_string, 2),
    RL_PRIM("%GGUF-W-ARRAY-BEGIN", rl_prim_gguf_w_array_begin, 2),
    RL_PRIM("%GGUF-W-ARRAY-END", rl_prim_gguf_w_array_end, 1),
    RL_PRIM("%GGUF-W-ARRAY-RAW", rl_prim_gguf_w_array_raw, 2),
    RL_PRIM("%GGUF-W-TENSOR", rl_prim_gguf_w_tensor, 5),
    RL_PRIM("%GGUF-W-TENSOR-RAW", rl_prim_gguf_w_tensor_raw, 7),
    RL_PRIM("%GGUF-W-WRITE", rl_prim_gguf_w_write, 2),
    RL_PRIM("%GGUF-W-TENSOR-DEFERRED", rl_prim_gguf_w_tensor_deferred, 4),
    RL_PRIM("%GGUF-W-STREAM-BEGIN", rl_prim_gguf_w_stream_begin, 2),
    RL_PRIM("%GGUF-W-STREAM-END", rl_prim_gguf_w_stream_end, 1),
    RL_PRIM("%GGUF-W-STREAM-ABORT", rl_prim_gguf_w_stream_abort, 1),
};
RL_PRIM_TABLE(rl_gguf_write_prims, "GGUF", rl_defs);
