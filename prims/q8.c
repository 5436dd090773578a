/* q8.c - Q8_0 quantize / dequantize (see q8.h for the format and contract).
 *
 * Workload: the file tools quantize whole models (hundreds of millions of
 * values, so the AVX2 kernel matters), matvec quantizes one activation
 * vector per call (a few thousand values, so per-call overhead matters), and
 * Lisp reads single elements.  The reference kernel is the spec written in C;
 * the AVX2 kernel must give identical bytes and is tested against it.
 */
#include "prims/q8.h"

#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf/numfmt.h"

/* f32 d at or above this rounds to an infinite binary16 (65520 is the tie
 * between 65504 and 65536, and ties go to the even 65536 = inf). */
#define RL_Q8_D_OVERFLOW 65520.0f

/* Values converted per chunk by the f64/f16/bf16 entry points: small enough
 * for the stack, large enough to amortise the call. */
#define RL_Q8_CHUNK (8 * RL_QK8_0)

int rl_q8_message(rl_status st, size_t where, size_t row_len, char *msg,
                  size_t msglen) {
    size_t bpr = row_len / RL_QK8_0; /* blocks per row */
    switch (st) {
    case RL_NONFINITE:
        if (row_len)
            return snprintf(msg, msglen,
                            "value at row %zu, column %zu (flat index %zu) is NaN or infinite",
                            where / row_len, where % row_len, where);
        return snprintf(msg, msglen, "value at index %zu is NaN or infinite", where);
    case RL_OVERFLOW:
        if (bpr)
            return snprintf(msg, msglen,
                            "row %zu, block %zu (columns %zu..%zu): absolute maximum >= 8321040, "
                            "its Q8_0 scale overflows binary16",
                            where / bpr, where % bpr, where % bpr * RL_QK8_0,
                            where % bpr * RL_QK8_0 + RL_QK8_0 - 1);
        return snprintf(msg, msglen,
                        "block %zu (values %zu..%zu): absolute maximum >= 8321040, "
                        "its Q8_0 scale overflows binary16",
                        where, where * RL_QK8_0, where * RL_QK8_0 + RL_QK8_0 - 1);
    case RL_BADLEN:
        return snprintf(msg, msglen, "length is not a multiple of %d", RL_QK8_0);
    case RL_BADARG:
        return snprintf(msg, msglen, "bad argument");
    case RL_NOMEM:
        return snprintf(msg, msglen, "out of memory");
    case RL_UNSUPPORTED:
        return snprintf(msg, msglen, "this CPU cannot run the requested path");
    default:
        return snprintf(msg, msglen, "%s", rl_status_name(st));
    }
}

/* ---- reference ------------------------------------------------------ */

/* A quantizer's answer once every block is done: RL_OVERFLOW naming the
 * first overflowing block, else RL_OK. */
static rl_status rl_q8_overflow(size_t first_ovf, size_t *where) {
    if (first_ovf == SIZE_MAX)
        return RL_OK;
    if (where)
        *where = first_ovf;
    return RL_OVERFLOW;
}

/* The quants of one block from its f32 id.  x*id is finite except when d is
 * an f32 subnormal (id = +inf); llama.cpp's conversion of the resulting
 * inf/NaN truncates 0x80000000 to the byte 0, and plain C would be undefined
 * there, so the rule is spelled out. */
static void rl_q8_quants_ref(const float *x, float id, int8_t *q) {
    for (int j = 0; j < RL_QK8_0; j++) {
        const float v = x[j] * id;
        q[j] = isfinite(v) ? (int8_t)(int32_t)roundf(v) : 0;
    }
}

/* One block; answers 1 if its f16 scale overflows. */
static int rl_q8_block_ref(const float *x, rl_block_q8_0 *y) {
    float amax = 0.0f;
    for (int j = 0; j < RL_QK8_0; j++) {
        const float a = fabsf(x[j]);
        if (a > amax)
            amax = a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = rl_gguf_f32_to_f16(d);
    rl_q8_quants_ref(x, id, y->qs);
    return d >= RL_Q8_D_OVERFLOW;
}

/* The arguments every f32 quantizer checks first: RL_OK, or why not. */
static inline rl_status rl_q8_quantize_args(const float *x, size_t n, const rl_block_q8_0 *y) {
    if (n % RL_QK8_0)
        return RL_BADLEN;
    if (n && (!x || !y))
        return RL_BADARG;
    return RL_OK;
}

rl_status rl_q8_quantize_f32_ref(const float *x, size_t n, rl_block_q8_0 *y,
                                 size_t *where) {
    const rl_status args = rl_q8_quantize_args(x, n, y);
    if (args != RL_OK)
        return args;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            if (where)
                *where = i;
            return RL_NONFINITE;
        }
    }
    size_t nb = n / RL_QK8_0, first_ovf = SIZE_MAX;
    for (size_t b = 0; b < nb; b++)
        if (rl_q8_block_ref(x + b * RL_QK8_0, y + b) && first_ovf == SIZE_MAX)
            first_ovf = b;
    return rl_q8_overflow(first_ovf, where);
}

/* ---- AVX2 ----------------------------------------------------------- */

/* Hide a value from the optimiser so that x*id followed by an add is never
 * contracted into one FMA (GCC contracts vector arithmetic by default in GNU
 * C mode, and the fused result would round differently from the spec). */
#define RL_OPAQUE(v) __asm__("" : "+x"(v))

/* q for 8 values, as int32: roundf(x*id).  roundf(v) == trunc(v + copysign(h,
 * v)) with h = 0.5 - 2^-25, the largest float below one half: a tie (frac =
 * 0.5) sums to within 2^-25 of the next integer and rounds up to it, any
 * fraction below 0.5 stays at least one ulp short of it.  |v| <= 127.0001
 * here, so every step is exact where it needs to be. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i
rl_q8_round8_avx2(__m256 x, __m256 vid) {
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    const __m256 h = _mm256_set1_ps(0x1.fffffep-2f);
    __m256 v = _mm256_mul_ps(x, vid);
    RL_OPAQUE(v);
    __m256 r = _mm256_add_ps(v, _mm256_or_ps(_mm256_and_ps(v, sign), h));
    return _mm256_cvttps_epi32(r);
}

/* The SIMD quantizers' steps between a block's |x| bits at their largest
 * (abits, from one integer max: their order is the float order for finite
 * values, and every NaN or inf bit pattern is >= 0x7f800000) and its
 * quants: -1 when the block holds a NaN or an infinity (the flat index of
 * the first in *where: earlier blocks were all finite, so it is the first
 * of the run); else the scale stored (vcvtps2ph rounds to nearest even as
 * rl_gguf_f32_to_f16 does; d is finite and not negative), the first
 * overflowing block noted in *first_ovf, and 1 with *id = 1/d (0 for
 * d = 0) for the caller to make the quants, or 0 when they are made here
 * (d an f32 subnormal: rare). */
__attribute__((target(RL_TARGET_AVX2))) static inline int
rl_q8_block_head(const float *xb, uint32_t abits, size_t b, rl_block_q8_0 *yb,
                 size_t *first_ovf, size_t *where, float *id) {
    if (abits >= 0x7f800000u) {
        for (int j = 0; j < RL_QK8_0; j++) {
            if (!isfinite(xb[j])) {
                if (where)
                    *where = b * RL_QK8_0 + (size_t)j;
                return -1;
            }
        }
    }
    const float d = rl_gguf_f32_from_bits(abits) / 127.0f;
    if (d >= RL_Q8_D_OVERFLOW && *first_ovf == SIZE_MAX)
        *first_ovf = b;
    yb->d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *id = d != 0.0f ? 1.0f / d : 0.0f;
    if (__builtin_expect(isinf(*id), 0)) {
        rl_q8_quants_ref(xb, *id, yb->qs);
        return 0;
    }
    return 1;
}

__attribute__((target(RL_TARGET_AVX2))) rl_status
rl_q8_quantize_f32_avx2(const float *x, size_t n, rl_block_q8_0 *y, size_t *where) {
    const rl_status args = rl_q8_quantize_args(x, n, y);
    if (args != RL_OK)
        return args;
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t nb = n / RL_QK8_0, first_ovf = SIZE_MAX;

    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * RL_QK8_0;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        /* |x| as integers: their order is the float order for finite values,
         * and every NaN or inf bit pattern is >= 0x7f800000, so one integer
         * max gives amax and the non-finite test together. */
        __m256i a0 = _mm256_and_si256(_mm256_castps_si256(v0), absmask);
        __m256i a1 = _mm256_and_si256(_mm256_castps_si256(v1), absmask);
        __m256i a2 = _mm256_and_si256(_mm256_castps_si256(v2), absmask);
        __m256i a3 = _mm256_and_si256(_mm256_castps_si256(v3), absmask);
        __m256i m8 = _mm256_max_epi32(_mm256_max_epi32(a0, a1), _mm256_max_epi32(a2, a3));
        __m128i m4 = _mm_max_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
        m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0x4e));
        m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0xb1));
        const uint32_t abits = (uint32_t)_mm_cvtsi128_si32(m4);
        float id;
        const int head = rl_q8_block_head(xb, abits, b, &y[b], &first_ovf, where, &id);
        if (head < 0)
            return RL_NONFINITE;
        if (!head)
            continue;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i i0 = rl_q8_round8_avx2(v0, vid), i1 = rl_q8_round8_avx2(v1, vid);
        __m256i i2 = rl_q8_round8_avx2(v2, vid), i3 = rl_q8_round8_avx2(v3, vid);
        /* |q| <= 127, so the saturating packs are plain narrowing; they
         * interleave 128-bit halves, which the permute undoes. */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        p = _mm256_permutevar8x32_epi32(p, order);
        _mm256_storeu_si256((__m256i *)(void *)y[b].qs, p);
    }
    return rl_q8_overflow(first_ovf, where);
}

/* ---- AVX-512 ----------------------------------------------------------- */

/* q for 16 values, as int32: rl_q8_round8_avx2's rounding. */
__attribute__((target(RL_TARGET_AVX512))) static inline __m512i
rl_q8_round16_avx512(__m512 x, __m512 vid) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512i h = _mm512_castps_si512(_mm512_set1_ps(0x1.fffffep-2f));
    __m512 v = _mm512_mul_ps(x, vid);
    __asm__("" : "+v"(v)); /* no contraction with the add (RL_OPAQUE) */
    const __m512 r = _mm512_add_ps(
        v, _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), sign), h)));
    return _mm512_cvttps_epi32(r);
}

/* The AVX2 quantizer's steps, a block in two registers. */
__attribute__((target(RL_TARGET_AVX512))) rl_status
rl_q8_quantize_f32_avx512(const float *x, size_t n, rl_block_q8_0 *y, size_t *where) {
    const rl_status args = rl_q8_quantize_args(x, n, y);
    if (args != RL_OK)
        return args;
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
    size_t nb = n / RL_QK8_0, first_ovf = SIZE_MAX;
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * RL_QK8_0;
        const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        /* |x| as integers: one max gives amax and the non-finite test */
        const uint32_t abits = (uint32_t)_mm512_reduce_max_epi32(
            _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(v0), absmask),
                             _mm512_and_si512(_mm512_castps_si512(v1), absmask)));
        float id;
        const int head = rl_q8_block_head(xb, abits, b, &y[b], &first_ovf, where, &id);
        if (head < 0)
            return RL_NONFINITE;
        if (!head)
            continue;
        const __m512 vid = _mm512_set1_ps(id);
        /* |q| <= 127: the narrowing keeps every value */
        _mm_storeu_si128((__m128i *)(void *)y[b].qs,
                         _mm512_cvtepi32_epi8(rl_q8_round16_avx512(v0, vid)));
        _mm_storeu_si128((__m128i *)(void *)(y[b].qs + 16),
                         _mm512_cvtepi32_epi8(rl_q8_round16_avx512(v1, vid)));
    }
    return rl_q8_overflow(first_ovf, where);
}

/* ---- other sources: widen a chunk, quantize it ---------------------- */

static void rl_widen_ref(rl_q8_src src, const void *x, size_t i0, size_t n, float *out) {
    switch (src) {
    case RL_SRC_F32:
        memcpy(out, (const float *)x + i0, n * sizeof *out);
        break;
    case RL_SRC_F64:
        for (size_t i = 0; i < n; i++)
            out[i] = (float)((const double *)x)[i0 + i];
        break;
    case RL_SRC_F16:
        for (size_t i = 0; i < n; i++)
            out[i] = rl_gguf_f16_to_f32(((const uint16_t *)x)[i0 + i]);
        break;
    case RL_SRC_BF16:
        for (size_t i = 0; i < n; i++)
            out[i] = rl_gguf_bf16_to_f32(((const uint16_t *)x)[i0 + i]);
        break;
    }
}

void rl_q8_widen_ref(rl_q8_src src, const void *x, size_t i0, size_t n, float *out) {
    rl_widen_ref(src, x, i0, n, out);
}

/* n is a multiple of 32 here.  vcvtpd2ps rounds as the C cast does (to
 * nearest even, the MXCSR default both use); vcvtph2ps widens exactly. */
__attribute__((target(RL_TARGET_AVX2))) static void
rl_widen_avx2(rl_q8_src src, const void *x, size_t i0, size_t n, float *out) {
    size_t i;
    switch (src) {
    case RL_SRC_F64: {
        const double *s = (const double *)x + i0;
        for (i = 0; i < n; i += 8) {
            __m128 lo = _mm256_cvtpd_ps(_mm256_loadu_pd(s + i));
            __m128 hi = _mm256_cvtpd_ps(_mm256_loadu_pd(s + i + 4));
            _mm256_storeu_ps(out + i, _mm256_set_m128(hi, lo));
        }
        break;
    }
    case RL_SRC_F16: {
        const uint16_t *s = (const uint16_t *)x + i0;
        for (i = 0; i < n; i += 8)
            _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i))));
        break;
    }
    case RL_SRC_BF16: {
        const uint16_t *s = (const uint16_t *)x + i0;
        for (i = 0; i < n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
            _mm256_storeu_si256((__m256i *)(void *)(out + i), _mm256_slli_epi32(w, 16));
        }
        break;
    }
    default:
        rl_widen_ref(src, x, i0, n, out);
        break;
    }
}

/* The quantizer's kernels per path (kernel.h): the AVX-512 paths quantize
 * with their own function, and otherwise run AVX2's. */
typedef struct {
    rl_status (*quantize)(const float *x, size_t n, rl_block_q8_0 *y, size_t *where);
    void (*widen)(rl_q8_src src, const void *x, size_t i0, size_t n, float *out);
    void (*dequantize)(const rl_block_q8_0 *x, size_t nblocks, float *y);
} rl_q8_path_kernels;

static const rl_q8_path_kernels rl_q8_kernels[RL_PATH_COUNT] = {
    [RL_PATH_REF] = {rl_q8_quantize_f32_ref, rl_widen_ref, rl_q8_dequantize_ref},
    [RL_PATH_AVX2] = {rl_q8_quantize_f32_avx2, rl_widen_avx2, rl_q8_dequantize_avx2},
    [RL_PATH_AVX512] = {rl_q8_quantize_f32_avx512, rl_widen_avx2, rl_q8_dequantize_avx2},
    [RL_PATH_AVX512VNNI] = {rl_q8_quantize_f32_avx512, rl_widen_avx2, rl_q8_dequantize_avx2},
};

rl_status rl_q8_quantize_path(rl_q8_src src, const void *x, size_t n,
                              rl_block_q8_0 *y, size_t *where, rl_path path) {
    if (n % RL_QK8_0)
        return RL_BADLEN;
    const rl_status run = rl_check_run(path, 1);
    if ((unsigned)src > RL_SRC_BF16 || run == RL_BADARG || (n && (!x || !y)))
        return RL_BADARG;
    if (run != RL_OK)
        return run;
    const rl_q8_path_kernels *k = &rl_q8_kernels[path];
    if (src == RL_SRC_F32)
        return k->quantize((const float *)x, n, y, where);

    /* Chunk by chunk.  A non-finite value ends the scan at once (it is the
     * first one: earlier chunks were clean); an overflow is remembered and
     * the scan goes on, since a later non-finite value takes precedence. */
    float buf[RL_Q8_CHUNK];
    size_t first_ovf = SIZE_MAX;
    for (size_t i0 = 0; i0 < n; i0 += RL_Q8_CHUNK) {
        size_t m = n - i0 < RL_Q8_CHUNK ? n - i0 : RL_Q8_CHUNK, w = 0;
        k->widen(src, x, i0, m, buf);
        rl_block_q8_0 *yb = y + i0 / RL_QK8_0;
        rl_status st = k->quantize(buf, m, yb, &w);
        if (st == RL_NONFINITE) {
            if (where)
                *where = i0 + w;
            return st;
        }
        if (st == RL_OVERFLOW && first_ovf == SIZE_MAX)
            first_ovf = i0 / RL_QK8_0 + w;
    }
    return rl_q8_overflow(first_ovf, where);
}

rl_status rl_q8_quantize_f32(const float *x, size_t n, rl_block_q8_0 *y, size_t *where) {
    return rl_q8_quantize_path(RL_SRC_F32, x, n, y, where, rl_path_best());
}

/* ---- dequantize ----------------------------------------------------- */

/* The reference is gguf's one scalar dequantizer; q * d is exact in f32,
 * so the SIMD product cannot differ from it. */
void rl_q8_dequantize_ref(const rl_block_q8_0 *x, size_t nblocks, float *y) {
    rl_gguf_q8_0_to_f32(x, nblocks, y);
}

__attribute__((target(RL_TARGET_AVX2))) void
rl_q8_dequantize_avx2(const rl_block_q8_0 *x, size_t nblocks, float *y) {
    for (size_t b = 0; b < nblocks; b++) {
        const __m256 d = _mm256_set1_ps(rl_gguf_f16_to_f32(x[b].d));
        __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)x[b].qs);
        __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        float *yb = y + b * RL_QK8_0;
        _mm256_storeu_ps(yb, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
        _mm256_storeu_ps(yb + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
        _mm256_storeu_ps(yb + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
        _mm256_storeu_ps(yb + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
    }
}

void rl_q8_dequantize(const rl_block_q8_0 *x, size_t nblocks, float *y) {
    rl_q8_kernels[rl_path_best()].dequantize(x, nblocks, y);
}
