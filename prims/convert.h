/* convert.h - a run of tensor values from one ggml element type to another,
 * on the thread pool, with the checks llama-quantize makes: what `rontolisp
 * quantize' does to each piece of each tensor it streams.
 *
 * Types: SRC F32, F16, BF16, Q8_0 or a type of prims/quants.h's table
 * (legacy, K-quant, IQ4); DST any of those.  SRC == DST is a copy, for
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

#endif
