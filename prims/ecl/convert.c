/* convert.c - streaming a tensor of a mapped GGUF file, converted, into a
 * GGUF writer's open stream (what `rontolisp quantize' does per tensor).
 * The tensor is taken in pieces of whole rows: the next piece is read ahead
 * (madvise WILLNEED), the piece is converted on the thread pool
 * (prims/convert.h: each thread maps its slice's pages in one call, which
 * is cheaper than a fault per page, and releases them when done:
 * MADV_DONTNEED, the mapping is read-only, so they are simply read again if
 * anything looks at them later), and appended to the output.  Peak memory is one
 * piece of output, not the tensor, and the input's mapping does not pile up
 * in the resident set. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/fileio.h"
#include "gguf/gguf.h"
#include "prims/convert.h"
#include "prims/cpu.h"
#include "prims/ecl/glue.h"

/* Source bytes per piece: a few MiB, so both threads have work and the
 * output buffer stays small. */
#define RL_STREAM_PIECE (4u << 20)

/* Convert and write values [0, n) of the tensor at X; the first failure
 * in *WHERE.  Runs with interrupts off and the pin held: signals nothing. */
static rl_status stream_pieces(rl_gguf_writer *wr, rl_convert c, uint8_t *inbuf,
                               uint8_t *buf, size_t rows_per_piece, size_t *where,
                               rl_gguf_status *wst, char *msg, size_t msgsz, uint64_t *off) {
    const uint8_t *x = c.x;
    uint64_t x_off = c.fd_offset;
    size_t sb = rl_type_bytes(c.src, c.row_len), n = c.n;
    rl_status st = RL_OK, late;
    size_t late_where;
    for (size_t r = 0; r * c.row_len < n; r += rows_per_piece) {
        size_t i0 = r * c.row_len;
        size_t k = n - i0 < rows_per_piece * c.row_len ? n - i0 : rows_per_piece * c.row_len;
        const uint8_t *piece = x + r * sb;
        if (c.from_fd) { /* read into INBUF by the threads; the next piece read ahead */
            if (i0 + k < n)
                posix_fadvise(c.fd, (off_t)(x_off + (r + rows_per_piece) * sb),
                              (off_t)(sb * rows_per_piece), POSIX_FADV_WILLNEED);
            piece = inbuf;
            c.fd_offset = x_off + r * sb;
        } else if (i0 + k < n) {
            rl_pages_advise(piece + k / c.row_len * sb, sb * rows_per_piece, MADV_WILLNEED);
        }
        c.x = piece;
        c.n = k;
        c.y = buf;
        if (st == RL_OVERFLOW) {
            /* An overflow is reported only when no value after it is
             * NaN or infinite (a NaN anywhere is reported first). */
            c.dst = c.src;
            late = rl_convert_run(&c, rl_threads(), &late_where);
            if (late == RL_NONFINITE)
                *where = i0 + late_where;
            if (late != RL_OK)
                return late;
        } else {
            st = rl_convert_run(&c, rl_threads(), where);
            if (st == RL_NONFINITE)
                *where += i0;
            else if (st == RL_OVERFLOW)
                *where += i0 / rl_type_block(c.dst);
            if (st == RL_NONFINITE || (st != RL_OK && st != RL_OVERFLOW))
                return st;
            if (st == RL_OK) {
                *wst = rl_gguf_writer_stream_put(wr, c.src == c.dst ? piece : buf,
                                                 rl_type_bytes(c.dst, k), msg, msgsz, off);
                if (*wst != RL_GGUF_OK)
                    return RL_OK;
            }
        }
    }
    return st;
}

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
    rl_gguf_writer *wr = rl_handle(fn, w, RL_H_GGUF_WRITER, RL_C_ERROR, "GGUF writer");
    rl_convert c = {0};
    cl_index masklen = 0;
    uint64_t off = (uint64_t)rl_arg_fixnum(fn, 3, offset, 0, MOST_POSITIVE_FIXNUM);
    c.src = (uint32_t)rl_arg_fixnum(fn, 4, src, 0, 0xffff);
    c.n = (size_t)rl_arg_fixnum(fn, 5, count, 0, MOST_POSITIVE_FIXNUM);
    c.row_len = (size_t)rl_arg_fixnum(fn, 6, row_len, 1, MOST_POSITIVE_FIXNUM);
    c.dst = (uint32_t)rl_arg_fixnum(fn, 7, dst, 0, 0xffff);
    if (mask != ECL_NIL) {
        c.outliers = rl_octets(fn, 8, mask, &masklen);
        if (masklen != c.row_len)
            rl_signal(RL_C_ERROR, "%s: expected an outlier mask of %lu bytes, found %lu", fn,
                      (unsigned long)c.row_len, (unsigned long)masklen);
    }
    if (!rl_mapped_p(base))
        rl_type_error(fn, 2, base, RL_T_FOREIGN_DATA);
    size_t sbytes = rl_type_bytes(c.src, c.n), rbytes = rl_type_bytes(c.src, c.row_len);
    size_t dbytes_row = rl_type_bytes(c.dst, c.row_len);
    if (!sbytes || !dbytes_row || c.n % c.row_len || c.row_len % rl_type_block(c.src) ||
        c.row_len % rl_type_block(c.dst) || c.n > SIZE_MAX / 4)
        rl_signal(RL_C_ERROR, "%s: expected values of F32, F16, BF16 or a quantized type in "
                  "whole rows to one of those, found types %u to %u, %lu values in rows of %lu", fn,
                  (unsigned)c.src, (unsigned)c.dst, (unsigned long)c.n,
                  (unsigned long)c.row_len);
    size_t rows_per_piece = rbytes >= RL_STREAM_PIECE ? 1 : RL_STREAM_PIECE / rbytes;
    int want_fd = use_pread != ECL_NIL && rl_handle_p(base, RL_H_GGUF_FILE);
    uint8_t *buf = NULL, *inbuf = NULL;
    if (c.src != c.dst)
        buf = malloc(dbytes_row * rows_per_piece);
    if (want_fd)
        inbuf = malloc(rbytes * rows_per_piece);
    if ((c.src != c.dst && !buf) || (want_fd && !inbuf)) {
        free(buf);
        free(inbuf);
        rl_signal(RL_C_ERROR, "%s: out of memory for a piece of %lu rows", fn,
                  (unsigned long)rows_per_piece);
    }
    const uint8_t *bytes;
    uint64_t size;
    void *owner = rl_pin(base, &bytes, &size);
    if (!owner) {
        free(buf);
        free(inbuf);
        rl_signal(RL_C_FILE_CLOSED, "%s: the source GGUF file was closed", fn);
    }
    if (off > size || sbytes > size - off) {
        rl_unpin(base);
        free(buf);
        free(inbuf);
        rl_signal(RL_C_ERROR, "%s: bytes %llu to %llu are outside the file's %llu", fn,
                  (unsigned long long)off, (unsigned long long)(off + sbytes),
                  (unsigned long long)size);
    }
    c.x = bytes + off;
    c.fd = want_fd ? rl_gguf_fd(owner) : -1; /* the file's own: not ours to close */
    c.from_fd = c.fd >= 0;
    c.fd_offset = off;
    c.populate = c.fd < 0;
    c.release = c.fd < 0 && release != ECL_NIL;
    int ioerr = 0;
    struct stat now = {.st_size = -1};
    c.io_error = &ioerr;
    char msg[RL_GGUF_MSG_SIZE] = "";
    uint64_t woff = 0;
    size_t where = 0;
    rl_gguf_status wst = RL_GGUF_OK;
    rl_status st;
    RL_RUN_KERNEL(env, {
        st = stream_pieces(wr, c, inbuf, buf, rows_per_piece, &where, &wst, msg,
                           sizeof msg, &woff);
        /* a failed read: the file's size now, to tell a truncation */
        if (ioerr && c.fd >= 0 && fstat(c.fd, &now) != 0)
            now.st_size = -1;
        /* all let go before an interrupt that came meanwhile is handled */
        rl_unpin(base);
        free(buf);
        free(inbuf);
    });
    if (ioerr) {
        if (now.st_size >= 0 && (uint64_t)now.st_size < size)
            snprintf(msg, sizeof msg, "at byte %llu: cannot read the tensor's values: the file "
                     "was truncated while being read (%llu bytes when opened, %llu now)",
                     (unsigned long long)off, (unsigned long long)size,
                     (unsigned long long)now.st_size);
        else
            snprintf(msg, sizeof msg, "at byte %llu: cannot read the tensor's values: %s",
                     (unsigned long long)off, strerror(ioerr));
        return rl_status_values("read-error", msg, off);
    }
    if (wst != RL_GGUF_OK)
        return rl_status_values(rl_gguf_status_name(wst), msg, woff);
    if (st != RL_OK)
        ecl_return3(env, ECL_NIL, rl_keyword(rl_status_name(st)),
                    ecl_make_unsigned_integer(where));
    ecl_return1(env, ECL_T);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%STREAM-TENSOR", rl_prim_stream_tensor, 10),
};
RL_PRIM_TABLE(rl_convert_prims, "RONTOLISP", rl_defs);
