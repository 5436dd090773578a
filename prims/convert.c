/* convert.c - tensor values from one element type to another on the thread
 * pool (see convert.h).  Each thread takes a contiguous slice of whole units
 * (Q8_0 blocks, rows when an outlier mask needs them, else single values),
 * checks its source values, converts them and reports its first failure;
 * the failures are then ranked as one thread would have found them. */
#include "prims/convert.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/pool.h"
#include "prims/q8_outlier.h"
#include "prims/quants.h"
#include "prims/type_traits.h"

/* MADV_POPULATE_READ (Linux 5.14), for headers that predate it. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

void rl_pages_advise(const void *p, size_t n, int advice) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p, b = a + n;
    if (advice == MADV_DONTNEED) { /* only pages wholly inside */
        a = (a + page - 1) & ~(page - 1);
        b &= ~(page - 1);
    } else { /* every page the range touches */
        a &= ~(page - 1);
        b = (b + page - 1) & ~(page - 1);
    }
    if (b > a)
        madvise((void *)a, b - a, advice);
}

/* Values converted at a time through the f32 scratch on the stack. */
#define RL_CONVERT_PIECE 1024

static int float_type(uint32_t t) {
    const rl_type_traits *tt = rl_type_traits_of(t);
    return tt && tt->family == RL_FAMILY_FLOAT;
}


static int half_type(uint32_t t) { return t == RL_GGUF_GGML_F16 || t == RL_GGUF_GGML_BF16; }

/* True when value I of X (type T) is a NaN or an infinity: all exponent
 * bits set. */
static inline unsigned nonfinite_at(uint32_t t, const uint8_t *x, size_t i) {
    if (t == RL_GGUF_GGML_F32) {
        uint32_t v;
        memcpy(&v, x + 4 * i, 4);
        return (v & 0x7f800000u) == 0x7f800000u;
    }
    uint16_t v, mask = t == RL_GGUF_GGML_F16 ? 0x7c00 : 0x7f80;
    memcpy(&v, x + 2 * i, 2);
    return (v & mask) == mask;
}

/* The index of the first NaN or infinity among values I0..I1-1 of X (type
 * T), or I1.  The loop over a piece has no exit, so it vectorizes. */
static size_t first_nonfinite(uint32_t t, const void *x, size_t i0, size_t i1) {
    for (size_t a = i0; a < i1; a += RL_CONVERT_PIECE) {
        size_t b = i1 - a < RL_CONVERT_PIECE ? i1 : a + RL_CONVERT_PIECE;
        unsigned bad = 0;
        for (size_t i = a; i < b; i++)
            bad |= nonfinite_at(t, x, i);
        if (bad)
            for (size_t i = a; i < b; i++)
                if (nonfinite_at(t, x, i))
                    return i;
    }
    return i1;
}

/* Values I0..I1-1 of a non-Q8_0 conversion; answers OVERFLOW with *where
 * when a half destination becomes infinite. */
static rl_status convert_plain(const rl_convert *c, size_t i0, size_t i1, size_t *where) {
    size_t sb = rl_type_bytes(c->src, 1), db = rl_type_bytes(c->dst, 1);
    float buf[RL_CONVERT_PIECE];
    for (size_t a = i0; a < i1; a += RL_CONVERT_PIECE) {
        size_t k = i1 - a < RL_CONVERT_PIECE ? i1 - a : RL_CONVERT_PIECE;
        uint8_t *out = (uint8_t *)c->y + db * a;
        rl_gguf_row_to_f32(c->src, (const uint8_t *)c->x + sb * a, buf, k);
        rl_gguf_row_from_f32(c->dst, buf, out, k);
        if (half_type(c->dst)) {
            uint16_t mask = c->dst == RL_GGUF_GGML_F16 ? 0x7c00 : 0x7f80;
            for (size_t i = 0; i < k; i++) {
                uint16_t v;
                memcpy(&v, out + 2 * i, 2);
                if ((v & mask) == mask) {
                    *where = a + i;
                    return RL_OVERFLOW;
                }
            }
        }
    }
    return RL_OK;
}

/* Values I..I+K-1 of X (type T, I and K whole blocks of it) as f32 in
 * OUT: halves widened exactly, quantized blocks dequantized as ggml does. */
static void to_f32(uint32_t t, const uint8_t *x, size_t i, size_t k, float *out) {
    if (t == RL_GGUF_GGML_Q8_0) /* its fast dequantizer: the same floats, exactly */
        rl_q8_dequantize((const rl_block_q8_0 *)(x + rl_q8_bytes(i)), k / RL_QK8_0, out);
    else
        rl_type_traits_of(t)->to_float(x + rl_type_bytes(t, i), out, k / rl_type_block(t));
}

/* Values I0..I1-1 of a conversion through f32 (a quantized source, or a
 * destination of prims/quants.h's types), a piece at a time: the piece is
 * widened or dequantized, checked for NaN and infinity (which are reported
 * first, wherever they are), then converted, until a conversion
 * overflows (*where its flat block index, or its value's index for a half
 * destination); after one, the rest is only checked. */
static rl_status convert_via_f32(const rl_convert *c, size_t i0, size_t i1, size_t *where) {
    float buf[RL_CONVERT_PIECE];
    rl_status st = RL_OK;
    size_t over = 0, dblock = rl_type_block(c->dst);
    for (size_t a = i0; a < i1; a += RL_CONVERT_PIECE) {
        size_t k = i1 - a < RL_CONVERT_PIECE ? i1 - a : RL_CONVERT_PIECE, w = 0;
        to_f32(c->src, c->x, a, k, buf);
        unsigned bad = 0;
        for (size_t i = 0; i < k; i++)
            bad |= !isfinite(buf[i]);
        if (bad)
            for (size_t i = 0; i < k; i++)
                if (!isfinite(buf[i])) {
                    *where = a + i;
                    return RL_NONFINITE;
                }
        if (st != RL_OK || c->src == c->dst) /* a copy is only checked */
            continue;
        uint8_t *out = (uint8_t *)c->y + rl_type_bytes(c->dst, a);
        if (c->dst == RL_GGUF_GGML_Q8_0) {
            st = rl_q8_quantize_path(RL_SRC_F32, buf, k, (rl_block_q8_0 *)out, &w, rl_path_best());
            over = a / dblock + w;
        } else if (rl_type_quantized(c->dst)) {
            st = rl_quantize(c->dst, buf, k, out, &w);
            over = a / dblock + w;
        } else {
            rl_gguf_row_from_f32(c->dst, buf, out, k);
            if (half_type(c->dst)) {
                uint16_t mask = c->dst == RL_GGUF_GGML_F16 ? 0x7c00 : 0x7f80;
                for (size_t i = 0; i < k && st == RL_OK; i++) {
                    uint16_t v;
                    memcpy(&v, out + 2 * i, 2);
                    if ((v & mask) == mask) {
                        st = RL_OVERFLOW;
                        over = a + i;
                    }
                }
            }
        }
    }
    if (st != RL_OK)
        *where = over;
    return st;
}

static rl_q8_src q8_src(uint32_t t) {
    return t == RL_GGUF_GGML_F16 ? RL_SRC_F16 : t == RL_GGUF_GGML_BF16 ? RL_SRC_BF16 : RL_SRC_F32;
}

typedef struct job {
    const rl_convert *c;
    size_t unit; /* values per unit of work */
    int io_error[RL_MAX_THREADS];
    rl_status st[RL_MAX_THREADS];
    size_t where[RL_MAX_THREADS];
} job;

static void convert_slice(void *ctx, int ith, int nth) {
    job *j = ctx;
    const rl_convert *c = j->c;
    size_t u0, u1, w = 0;
    rl_pool_chunk(c->n / j->unit, ith, nth, 1, &u0, &u1);
    size_t i0 = u0 * j->unit, i1 = u1 * j->unit;
    rl_status st = RL_OK;
    const uint8_t *xs = (const uint8_t *)c->x + rl_type_bytes(c->src, i0);
    size_t xn = rl_type_bytes(c->src, i1) - rl_type_bytes(c->src, i0);
    if (i0 < i1 && c->populate)
        rl_pages_advise(xs, xn, MADV_POPULATE_READ);
    if (i0 < i1 && c->from_fd) {
        uint8_t *dst = (uint8_t *)(uintptr_t)xs;
        uint64_t at = c->fd_offset + (uint64_t)(xs - (const uint8_t *)c->x);
        for (size_t got = 0; got < xn;) {
            ssize_t k = pread(c->fd, dst + got, xn - got, (off_t)(at + got));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                j->io_error[ith] = k < 0 ? errno : EIO;
                j->st[ith] = RL_BADARG;
                return;
            }
            got += (size_t)k;
        }
    }
    if (i0 < i1) {
        if (!float_type(c->src) || (rl_type_quantized(c->dst) && c->dst != RL_GGUF_GGML_Q8_0)) {
            st = convert_via_f32(c, i0, i1, &w);
        } else if (c->dst == RL_GGUF_GGML_Q8_0) {
            const uint8_t *x = (const uint8_t *)c->x + rl_type_bytes(c->src, i0);
            rl_block_q8_0 *y = (rl_block_q8_0 *)((uint8_t *)c->y + rl_q8_bytes(i0));
            st = c->outliers ? rl_q8_quantize_outliers_ref(q8_src(c->src), x,
                                                           (i1 - i0) / c->row_len, c->row_len,
                                                           c->outliers, y, &w)
                             : rl_q8_quantize_path(q8_src(c->src), x, i1 - i0, y, &w,
                                                   rl_path_best());
            w += st == RL_NONFINITE ? i0 : i0 / RL_QK8_0;
        } else {
            w = first_nonfinite(c->src, c->x, i0, i1);
            if (w < i1)
                st = RL_NONFINITE;
            else if (c->src != c->dst)
                st = convert_plain(c, i0, i1, &w);
        }
    }
    if (i0 < i1 && c->release)
        rl_pages_advise(xs, xn, MADV_DONTNEED);
    j->st[ith] = st;
    j->where[ith] = w;
}

rl_status rl_convert_run(const rl_convert *c, int nth, size_t *where) {
    job j;
    size_t w = 0;
    if (!where)
        where = &w;
    if (!c || (!c->x && c->n) || c->row_len == 0)
        return RL_BADARG;
    if (!(float_type(c->src) || rl_type_quantized(c->src)) || (c->src != c->dst && !c->y && c->n))
        return RL_BADARG;
    if (!float_type(c->dst) && !rl_type_quantized(c->dst))
        return RL_BADARG;
    if (c->n % c->row_len || c->row_len % rl_type_block(c->dst) ||
        c->row_len % rl_type_block(c->src) || (c->outliers && c->dst != RL_GGUF_GGML_Q8_0))
        return RL_BADLEN;
    if (nth < 1)
        nth = 1;
    if (nth > RL_MAX_THREADS)
        nth = RL_MAX_THREADS;
    memset(&j, 0, sizeof j);
    j.c = c;
    /* whole blocks of both types (every block size divides the larger one) */
    j.unit = c->outliers ? c->row_len
             : rl_type_block(c->src) > rl_type_block(c->dst) ? rl_type_block(c->src)
                                                                  : rl_type_block(c->dst);
    rl_pool_run(nth, convert_slice, &j);
    /* The first failure one thread would have met: a non-finite value
     * anywhere first, then the lowest overflow. */
    rl_status best = RL_OK;
    for (int pass = 0; pass < 2 && best == RL_OK; pass++)
        for (int i = 0; i < nth; i++)
            if (j.st[i] == (pass ? RL_OVERFLOW : RL_NONFINITE) &&
                (best == RL_OK || j.where[i] < *where)) {
                best = j.st[i];
                *where = j.where[i];
            }
    for (int i = 0; i < nth && best == RL_OK; i++) {
        best = j.st[i];
        if (j.io_error[i] && c->io_error)
            *c->io_error = j.io_error[i];
    }
    return best;
}

/* ---- the stream ---------------------------------------------------------- */

/* Source bytes per piece by default: a few MiB, so every thread has work and
 * the buffers stay small. */
#define RL_STREAM_PIECE (4u << 20)

/* Convert and write values [0, c.n) of the tensor, a piece of ROWS rows at
 * a time, into S->w; the first failure in R. */
static rl_stream_outcome stream_pieces(const rl_stream *s, rl_convert c, uint8_t *inbuf,
                                       uint8_t *buf, size_t rows, int nth, rl_stream_result *r) {
    const uint8_t *x = c.x;
    uint64_t x_off = c.fd_offset;
    size_t sb = rl_type_bytes(c.src, c.row_len), n = c.n, where = 0;
    rl_status st = RL_OK;
    for (size_t row = 0; row * c.row_len < n; row += rows) {
        size_t i0 = row * c.row_len;
        size_t k = n - i0 < rows * c.row_len ? n - i0 : rows * c.row_len;
        const uint8_t *piece = x + row * sb;
        if (c.from_fd) { /* read into INBUF by the threads; the next piece read ahead */
            if (i0 + k < n)
                posix_fadvise(c.fd, (off_t)(x_off + (row + rows) * sb), (off_t)(sb * rows),
                              POSIX_FADV_WILLNEED);
            piece = inbuf;
            c.fd_offset = x_off + row * sb;
        } else if (i0 + k < n) {
            rl_pages_advise(piece + k / c.row_len * sb, sb * rows, MADV_WILLNEED);
        }
        c.x = piece;
        c.n = k;
        c.y = buf;
        if (st == RL_OVERFLOW) {
            /* An overflow is reported only when no value after it is NaN
             * or infinite (a NaN anywhere is reported first): the rest is
             * only checked. */
            size_t late_where = 0;
            c.dst = c.src;
            rl_status late = rl_convert_run(&c, nth, &late_where);
            if (late == RL_NONFINITE)
                where = i0 + late_where;
            if (late != RL_OK) {
                st = late;
                break;
            }
        } else {
            st = rl_convert_run(&c, nth, &where);
            if (st == RL_NONFINITE)
                where += i0;
            else if (st == RL_OVERFLOW)
                where += i0 / rl_type_block(c.dst);
            if (st != RL_OK && st != RL_OVERFLOW)
                break;
            if (st == RL_OK) {
                r->gguf_status = rl_gguf_writer_stream_put(s->w, c.src == c.dst ? piece : buf,
                                                           rl_type_bytes(c.dst, k), r->msg,
                                                           sizeof r->msg, &r->offset);
                if (r->gguf_status != RL_GGUF_OK)
                    return r->outcome = RL_STREAM_WRITE;
            }
        }
    }
    if (st == RL_OK)
        return r->outcome = RL_STREAM_OK;
    r->status = st;
    r->where = where;
    /* a failed read shows as RL_BADARG with *c.io_error set: the caller's */
    return r->outcome = st == RL_NONFINITE || st == RL_OVERFLOW ? RL_STREAM_CHECK : RL_STREAM_ARG;
}

rl_stream_outcome rl_stream_run(const rl_stream *s, rl_stream_result *r) {
    rl_convert c = {0};
    memset(r, 0, sizeof *r);
    if (!s || !s->w || (!s->bytes && s->size)) {
        snprintf(r->msg, sizeof r->msg, "expected a writer and the source's bytes, found none");
        r->status = RL_BADARG;
        return r->outcome = RL_STREAM_ARG;
    }
    c.src = s->src;
    c.dst = s->dst;
    c.n = s->n;
    c.row_len = s->row_len;
    c.outliers = s->outliers;
    size_t sbytes = rl_type_bytes(c.src, c.n), rbytes = rl_type_bytes(c.src, c.row_len);
    size_t dbytes_row = rl_type_bytes(c.dst, c.row_len);
    if (!sbytes || !dbytes_row || c.row_len == 0 || c.n % c.row_len ||
        c.row_len % rl_type_block(c.src) || c.row_len % rl_type_block(c.dst) ||
        c.n > SIZE_MAX / 4) {
        snprintf(r->msg, sizeof r->msg, "expected values of F32, F16, BF16 or a quantized type "
                 "in whole rows to one of those, found types %u to %u, %zu values in rows of %zu",
                 (unsigned)c.src, (unsigned)c.dst, c.n, c.row_len);
        r->status = RL_BADLEN;
        return r->outcome = RL_STREAM_ARG;
    }
    if (s->offset > s->size || sbytes > s->size - s->offset) {
        snprintf(r->msg, sizeof r->msg, "bytes %llu to %llu are outside the file's %llu",
                 (unsigned long long)s->offset, (unsigned long long)(s->offset + sbytes),
                 (unsigned long long)s->size);
        r->status = RL_BADARG;
        return r->outcome = RL_STREAM_ARG;
    }
    size_t piece = s->piece_bytes ? s->piece_bytes : RL_STREAM_PIECE;
    size_t rows = rbytes >= piece ? 1 : piece / rbytes;
    int nth = s->threads >= 1 ? s->threads : rl_threads();
    uint8_t *buf = c.src != c.dst ? malloc(dbytes_row * rows) : NULL;
    uint8_t *inbuf = s->fd >= 0 ? malloc(rbytes * rows) : NULL;
    if ((c.src != c.dst && !buf) || (s->fd >= 0 && !inbuf)) {
        free(buf);
        free(inbuf);
        snprintf(r->msg, sizeof r->msg, "out of memory for a piece of %zu rows", rows);
        r->status = RL_NOMEM;
        return r->outcome = RL_STREAM_ARG;
    }
    int ioerr = 0;
    c.x = s->bytes + s->offset;
    c.fd = s->fd;
    c.from_fd = s->fd >= 0;
    c.fd_offset = s->offset;
    c.populate = s->fd < 0;
    c.release = s->fd < 0 && s->release;
    c.io_error = &ioerr;
    rl_stream_outcome out = stream_pieces(s, c, inbuf, buf, rows, nth, r);
    free(buf);
    free(inbuf);
    if (ioerr) {
        /* the file's size now, to tell a truncation */
        struct stat now;
        r->io_error = ioerr;
        r->offset = s->offset;
        if (fstat(s->fd, &now) == 0 && (uint64_t)now.st_size < s->size)
            snprintf(r->msg, sizeof r->msg, "at byte %llu: cannot read the tensor's values: the "
                     "file was truncated while being read (%llu bytes when opened, %llu now)",
                     (unsigned long long)s->offset, (unsigned long long)s->size,
                     (unsigned long long)now.st_size);
        else
            snprintf(r->msg, sizeof r->msg, "at byte %llu: cannot read the tensor's values: %s",
                     (unsigned long long)s->offset, strerror(ioerr));
        return r->outcome = RL_STREAM_READ;
    }
    return out;
}
