/* q8.h - llama.cpp's Q8_0 format: quantize, dequantize, read one element.
 *
 * A run of n values (n a multiple of 32) becomes n/32 blocks of 34 bytes:
 *
 *     offset 0   d      binary16 scale, little-endian
 *     offset 2   qs[32] signed 8-bit quants
 *
 * Per block of f32 x (doc/formats.md §2; ggml's quantize_row_q8_0_ref, bit for bit):
 *     amax = max |x[j]| (f32, from 0)      d = amax / 127 (f32)
 *     id = d != 0 ? 1/d : 0 (f32)          q[j] = roundf(x[j] * id)
 *     stored d = f32->f16(d)
 * q comes from the f32 d, not the rounded f16 one.  When d is an f32
 * subnormal, 1/d is +inf and x*id is not finite: q is 0 (what llama.cpp's
 * cvttss2si-then-truncate writes).  A block whose f16 d would be inf
 * (d >= 65520, absmax >= 8321040) is refused, as llama-quantize refuses it.
 *
 * The functions are rank-agnostic: they see a flat run of values and report
 * flat indices; callers map those to rows (rl_q8_message does it for them).
 * Block data may sit at any even address (34-byte blocks from a 32-aligned
 * mmapped tensor): nothing here assumes more than 2-byte alignment.
 * Plain C, no ECL; safe to call from any thread.
 */
#ifndef RL_PRIMS_Q8_H
#define RL_PRIMS_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/kernel.h"

/* The block and its geometry are gguf's (gguf/blocks.h), the one definition
 * for the file reader and the kernels; these are the kernels' names for
 * them. */
#define RL_QK8_0 RL_GGUF_QK8_0
#define RL_Q8_BLOCK_BYTES RL_GGUF_Q8_0_BYTES
typedef rl_gguf_block_q8_0 rl_block_q8_0;

/* Write a one-line explanation of a failed quantization into msg (always
 * NUL-terminated when msglen > 0).  row_len > 0 names row and column/block
 * within the row (flat index / row_len); row_len == 0 names flat indices.
 * Returns the number of characters snprintf wanted. */
int rl_q8_message(rl_status st, size_t where, size_t row_len, char *msg,
                  size_t msglen);

/* Bytes of n values in Q8_0 (n a multiple of 32). */
static inline size_t rl_q8_bytes(size_t n) { return n / RL_QK8_0 * RL_Q8_BLOCK_BYTES; }

/* Source element types for the quantizers. */
typedef enum {
    RL_SRC_F32 = 0,
    RL_SRC_F64,   /* each value converted with the C cast to float first */
    RL_SRC_F16,   /* IEEE binary16, widened exactly */
    RL_SRC_BF16   /* bfloat16, widened exactly */
} rl_q8_src;

/* Quantize n values (n % 32 == 0) of type src at x into n/32 blocks at y.
 * Errors, in this priority: RL_BADLEN / RL_BADARG (nothing written);
 * RL_NONFINITE with *where = index of the FIRST non-finite value, even if
 * an earlier block overflows; else RL_OVERFLOW with *where = index of the
 * first overflowing block.  On any error y's contents are unspecified.
 * where may be NULL.  path must be one rl_path_supported() accepts, else
 * RL_UNSUPPORTED; RL_PATH_AVX512* use the AVX-512 quantizer. */
rl_status rl_q8_quantize_path(rl_q8_src src, const void *x, size_t n,
                              rl_block_q8_0 *y, size_t *where, rl_path path);

/* The same for f32 x with the path from rl_path_best() (the SIMD knob and
 * the CPU). */
rl_status rl_q8_quantize_f32(const float *x, size_t n, rl_block_q8_0 *y, size_t *where);

/* Values i0..i0+n-1 of a run of type src as the quantizers see them (f64
 * by the C cast, halves widened exactly) into out.  src must be valid. */
void rl_q8_widen_ref(rl_q8_src src, const void *x, size_t i0, size_t n, float *out);

/* The three f32 kernels themselves (same contract as rl_q8_quantize_path).
 * _avx2 must only be called when rl_cpu_has_avx2(), _avx512 when
 * rl_path_supported(RL_PATH_AVX512). */
rl_status rl_q8_quantize_f32_ref(const float *x, size_t n, rl_block_q8_0 *y, size_t *where);
rl_status rl_q8_quantize_f32_avx2(const float *x, size_t n, rl_block_q8_0 *y, size_t *where);
rl_status rl_q8_quantize_f32_avx512(const float *x, size_t n, rl_block_q8_0 *y, size_t *where);

/* Dequantize nblocks blocks into 32*nblocks floats: y = q * f16->f32(d),
 * exact.  Never fails (an inf/NaN d read from a file gives inf/NaN). */
void rl_q8_dequantize(const rl_block_q8_0 *x, size_t nblocks, float *y);
void rl_q8_dequantize_ref(const rl_block_q8_0 *x, size_t nblocks, float *y);
void rl_q8_dequantize_avx2(const rl_block_q8_0 *x, size_t nblocks, float *y);

/* Element i (flat) of a run of blocks, as double: q * f16->f32(d), exact.
 * Inline: it is the whole cost of an AREF on a quantized matrix. */
static inline double rl_q8_get(const rl_block_q8_0 *x, size_t i) {
    const rl_block_q8_0 *b = x + i / RL_QK8_0;
    return (double)b->qs[i % RL_QK8_0] * (double)rl_gguf_f16_to_f32(b->d);
}

#endif
