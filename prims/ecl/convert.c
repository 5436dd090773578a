/* convert.c - the Lisp face of prims/convert.h's stream: a tensor of a
 * mapped GGUF file streamed, converted, into a GGUF writer's open stream
 * (what `rontolisp quantize' does per tensor).  The pieces, the threads,
 * the reads and the truncation check are plain C (rl_stream_run); this
 * file checks the arguments, pins the source while the stream runs, and
 * turns the outcome into values. */
#include <stdlib.h>

#include "gguf/gguf.h"
#include "prims/convert.h"
#include "prims/ecl/glue.h"

/* (%stream-tensor w base offset src-type count row-len dst-type mask release
 * path) -> T, or (values nil status where) for a failed check (status
 * :non-finite or :scale-overflow, WHERE as prims/convert.h says), or
 * (values nil status message offset) when the output failed, or (values nil
 * :read-error message offset) when reading the input did.  BASE is a
 * mapped GGUF file, OFFSET the tensor's byte offset in it, COUNT its values
 * in rows of ROW-LEN; MASK NIL or an (unsigned-byte 8) vector of ROW-LEN
 * outlier flags (Q8_0 only).  With PREAD true and BASE a file opened from
 * a path, the values are read with pread through the descriptor of the
 * file mapped (rl_gguf_fd), much faster than first touches of the mapping,
 * and a file truncated meanwhile is a short read, answered as :read-error;
 * otherwise the mapping is read, and RELEASE true then drops its pages once
 * used (a truncation under the mapping would fault there: no other way
 * reads what a buffer holds). */
static cl_object rl_prim_stream_tensor(cl_object w, cl_object base, cl_object offset,
                                       cl_object src, cl_object count, cl_object row_len,
                                       cl_object dst, cl_object mask, cl_object release,
                                       cl_object use_pread) {
    static const char fn[] = "%STREAM-TENSOR";
    const cl_env_ptr env = ecl_process_env();
    rl_stream s = {0};
    rl_stream_result r;
    rl_stream_outcome out;
    cl_index masklen = 0;
    s.w = rl_handle(fn, w, RL_H_GGUF_WRITER, RL_C_ERROR, "GGUF writer");
    s.offset = (uint64_t)rl_arg_fixnum(fn, 3, offset, 0, MOST_POSITIVE_FIXNUM);
    s.src = (uint32_t)rl_arg_fixnum(fn, 4, src, 0, 0xffff);
    s.n = (size_t)rl_arg_fixnum(fn, 5, count, 0, MOST_POSITIVE_FIXNUM);
    s.row_len = (size_t)rl_arg_fixnum(fn, 6, row_len, 1, MOST_POSITIVE_FIXNUM);
    s.dst = (uint32_t)rl_arg_fixnum(fn, 7, dst, 0, 0xffff);
    if (mask != ECL_NIL) {
        s.outliers = rl_octets(fn, 8, mask, &masklen);
        if (masklen != s.row_len)
            rl_signal(RL_C_ERROR, "%s: expected an outlier mask of %lu bytes, found %lu", fn,
                      (unsigned long)s.row_len, (unsigned long)masklen);
    }
    if (!rl_mapped_p(base))
        rl_type_error(fn, 2, base, RL_T_FOREIGN_DATA);
    int want_fd = use_pread != ECL_NIL && rl_handle_p(base, RL_H_GGUF_FILE);
    void *owner = rl_pin(base, &s.bytes, &s.size);
    if (!owner)
        rl_signal(RL_C_FILE_CLOSED, "%s: the source GGUF file was closed", fn);
    s.fd = want_fd ? rl_gguf_fd(owner) : -1; /* the file's own: not ours to close */
    s.release = release != ECL_NIL;
    RL_RUN_KERNEL(env, {
        out = rl_stream_run(&s, &r);
        /* let go before an interrupt that came meanwhile is handled */
        rl_unpin(base);
    });
    RL_KEEP_LIVE(w); /* S.W is the writer behind W */
    switch (out) {
    case RL_STREAM_OK:
        ecl_return1(env, ECL_T);
    case RL_STREAM_CHECK:
        ecl_return3(env, ECL_NIL, rl_keyword(rl_status_name(r.status)),
                    ecl_make_unsigned_integer(r.where));
    case RL_STREAM_READ:
        return rl_status_values("read-error", r.msg, r.offset);
    case RL_STREAM_WRITE:
        return rl_status_values(rl_gguf_status_name(r.gguf_status), r.msg, r.offset);
    default:
        rl_signal(RL_C_ERROR, "%s: %s", fn, r.msg[0] ? r.msg : rl_status_name(r.status));
    }
    ecl_return1(env, ECL_NIL); /* not reached */
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%STREAM-TENSOR", rl_prim_stream_tensor, 10),
};
RL_PRIM_TABLE(rl_convert_prims, "GGUF", rl_defs);
