/* convert.h - a run of tensor values from one ggml element type to another,
 * on the thread pool, with the checks llama-quantize makes: what `rontolisp
 * quantize' does to each piece of each tensor it streams.
 *
 * Types: SRC any type with a row in prims/type_traits.h (F32, F16, BF16,
 * Q8_0, the legacy, K-quant and IQ4 types of prims/quants.h); DST any of
 * those.  SRC == DST is a copy, for
 * which only the check runs (the caller writes the source bytes
 * themselves).  Values go through f32 (halves widened exactly, quantized
 * blocks dequantized as ggml does, f32 to binary16 or bfloat16 rounded to
 * nearest even, Q8_0 as doc/formats.md §2 or, with an outlier mask, §10,
 * the other types by rl_quantize), so the bytes are the ones the
 * single-threaded conversions give, whatever the thread count: each thread
 * takes whole blocks, and every block is quantized on its own.
 *
 * Checks, in this priority: a NaN or infinity among the source values
 * (RL_NONFINITE, *where = the flat index of the first); then a value
 * that overflows its destination (RL_OVERFLOW: *where = the flat index
 * of the first overflowing value for F16 and BF16, of the first block whose
 * scale overflows binary16, or whose values exceed the type's limit
 * (prims/quants.h), for a quantized type).  With POPULATE and RELEASE the
 * threads also map and drop their own slice's pages of a file mapping, so
 * that work is spread too.  With FD they read their slices with pread
 * instead: the first touch of freshly mapped pages costs far more than the
 * kernel's copy (about 3 times, measured on a 512 MiB file), and the copy is
 * spread over the threads too.  Plain C, no ECL.
 */
#ifndef RL_PRIMS_CONVERT_H
#define RL_PRIMS_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "prims/q8.h"
#include "prims/type_traits.h"

typedef struct rl_convert {
    uint32_t src, dst;       /* ggml type ids */
    const void *x;           /* N values of type SRC (any even address) */
    void *y;                 /* their conversion (unused when SRC == DST) */
    size_t n;                /* values, a multiple of ROW_LEN */
    size_t row_len;          /* values per row (>= 1; a multiple of both types' blocks) */
    const uint8_t *outliers; /* Q8_0: ROW_LEN bytes, nonzero = outlier column; or NULL */
    int populate;            /* X is mapped from a file: each thread maps the pages of
                              * its slice in one call (MADV_POPULATE_READ) first */
    int release;             /* ... and drops them when done (MADV_DONTNEED: X must be
                              * a read-only mapping, whose pages are read again if
                              * anything needs them later) */
    int from_fd;             /* X is a writable buffer that each thread first fills
                              * with its slice, read (pread) from FD at FD_OFFSET +
                              * the slice's byte offset */
    int fd;
    uint64_t fd_offset;
    int *io_error;           /* with FD: set to the errno of a failed read (EIO
                              * for a short one), the run answering RL_BADARG */
} rl_convert;

/* madvise ADVICE on the pages of [P, P + N): for MADV_DONTNEED only the
 * pages wholly inside it, for the others every page it touches.  Errors are
 * ignored (advice only; an old kernel refuses MADV_POPULATE_READ). */
void rl_pages_advise(const void *p, size_t n, int advice);

/* Run the conversion on NTH threads.  RL_BADARG for unsupported types or
 * NULL data, RL_BADLEN for a length that is not whole rows or blocks; else
 * RL_OK or a failed check (above).  WHERE may be NULL. */
rl_status rl_convert_run(const rl_convert *c, int nth, size_t *where);

/* ---- a tensor streamed, converted, into a GGUF writer ------------------ */

/* What `rontolisp quantize' does per tensor: values [0, N) of a tensor of
 * a file that stays open (its bytes BYTES, SIZE long: a mapping), taken in
 * pieces of whole rows, converted on the thread pool as rl_convert_run
 * does, and appended to W's open stream (gguf.h, rl_gguf_writer_stream_*).
 * Peak memory is one piece of input and one of output, not the tensor.
 *
 * With FD >= 0 (the descriptor of the file the mapping is of, rl_gguf_fd:
 * the file that was read, not one opened again by its path) the threads
 * read their slices with pread, and a file truncated meanwhile is a short
 * read; otherwise each thread maps its slice's pages in one call, and
 * RELEASE drops them once used.  The next piece is read ahead. */
typedef struct rl_stream {
    rl_gguf_writer *w;        /* a writer whose stream is open, at this tensor */
    const uint8_t *bytes;     /* the source file's bytes */
    uint64_t size;
    int fd;                   /* its descriptor, or -1 */
    uint64_t offset;          /* the tensor's byte offset in the file */
    uint32_t src, dst;        /* ggml type ids */
    size_t n, row_len;        /* values, in rows of ROW_LEN */
    const uint8_t *outliers;  /* Q8_0: ROW_LEN outlier flags, or NULL */
    int release;
    size_t piece_bytes;       /* source bytes per piece (whole rows, at least one); 0: 4 MiB */
    int threads;              /* < 1: rl_threads() */
} rl_stream;

/* The outcome of rl_stream_run. */
typedef enum {
    RL_STREAM_OK = 0,     /* every value checked, converted and written */
    RL_STREAM_CHECK,      /* a failed check: STATUS and WHERE as rl_convert_run's,
                           * over the whole tensor (a NaN anywhere first) */
    RL_STREAM_WRITE,      /* the writer failed: GGUF_STATUS, MSG, OFFSET */
    RL_STREAM_READ,       /* reading the source failed: IO_ERROR (errno), MSG
                           * (naming a truncation), OFFSET the tensor's */
    RL_STREAM_ARG         /* bad arguments or no memory: STATUS, MSG */
} rl_stream_outcome;

typedef struct rl_stream_result {
    rl_stream_outcome outcome;
    rl_status status;
    size_t where;
    rl_gguf_status gguf_status;
    int io_error;
    uint64_t offset;
    char msg[RL_GGUF_MSG_SIZE];
} rl_stream_result;

/* Run S.  After any outcome but RL_STREAM_OK the caller aborts the
 * writer's stream (nothing is committed).  Plain C: signals nothing. */
rl_stream_outcome rl_stream_run(const rl_stream *s, rl_stream_result *r);

#endif
