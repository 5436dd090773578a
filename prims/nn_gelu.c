/* nn_gelu.c - the steps around the GELU: GeGLU for the encoder and a
 * bias plus an activation (none, ReLU, the erf GELU) for the decision head,
 * each on the scalar, AVX2 and AVX-512 paths with vmath.h's erf (see nn.h
 * for the arithmetic every path reproduces).  Built with -ffp-contract=off
 * so that no product and sum fuse behind the spec's back.
 */
#include "prims/nn.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "prims/nn_common.h"
#include "prims/pool.h"
#include "prims/vmath.h"

/* llama.cpp's GELU constants (ggml-cpu/vec.h). */
#define RL_GELU_COEF_A 0.044715f
#define RL_SQRT_2_OVER_PI 0.79788456080286535587989211986876f
#define RL_SQRT_2_INV 0.70710678118654752440084436210484f

/* ---- Bias and activation ------------------------------------------- */

static void rl_bias_act_row(const void *job, size_t t) {
    const rl_rows_job *j = job;
    const float *x = j->x + t * j->d;
    float *y = j->out + t * j->d;
    for (size_t c = 0; c < j->d; c++) {
        const float v = j->b ? x[c] + j->b[c] : x[c];
        switch (j->act) {
        case RL_NN_RELU:
            y[c] = v < 0.0f ? 0.0f : v;
            break;
        case RL_NN_GELU:
            y[c] = rl_gelu_f32(v, RL_GELU_ERF);
            break;
        default:
            y[c] = v;
        }
    }
    rl_nn_scan_row(j, y, j->d);
}

/* RL_NN_GELU_VALUES values of rl_gelu_f32's erf form, two registers: the
 * same f32 steps around vmath.h's erf (its AVX-512 form, its groups of
 * eight lanes in flight together). */
#define RL_NN_GELU_VALUES (8 * RL_VM_ERF_GROUPS)
__attribute__((target(RL_TARGET_AVX512), always_inline)) static inline void
rl_gelu_avx512(__m512 a[RL_NN_GELU_VALUES / 16]) {
    __m256 u[RL_VM_ERF_GROUPS], e[RL_VM_ERF_GROUPS];
    _Pragma("GCC unroll 16")
    for (int h = 0; h < RL_NN_GELU_VALUES / 16; h++) {
        const __m512 s = _mm512_mul_ps(a[h], _mm512_set1_ps(RL_SQRT_2_INV));
        u[2 * h] = _mm512_castps512_ps256(s);
        u[2 * h + 1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1));
    }
    rl_erff8xg_avx512(u, e);
    _Pragma("GCC unroll 16")
    for (int h = 0; h < RL_NN_GELU_VALUES / 16; h++) {
        const __m512 eh = _mm512_insertf32x8(_mm512_castps256_ps512(e[2 * h]), e[2 * h + 1], 1);
        a[h] = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), a[h]),
                             _mm512_add_ps(_mm512_set1_ps(1.0f), eh));
    }
}

/* RL_NN_GELU_AVX2_VALUES values of rl_gelu_f32's erf form, the same f32
 * steps around vmath.h's AVX2 erf. */
#define RL_NN_GELU_AVX2_VALUES (8 * RL_VM_ERF_AVX2_REGS)
__attribute__((target(RL_TARGET_AVX2), always_inline)) static inline void
rl_gelu_avx2(__m256 a[RL_VM_ERF_AVX2_REGS]) {
    __m256 u[RL_VM_ERF_AVX2_REGS], e[RL_VM_ERF_AVX2_REGS];
    _Pragma("GCC unroll 16")
    for (int h = 0; h < RL_VM_ERF_AVX2_REGS; h++)
        u[h] = _mm256_mul_ps(a[h], _mm256_set1_ps(RL_SQRT_2_INV));
    rl_erff8xg_avx2(u, e);
    _Pragma("GCC unroll 16")
    for (int h = 0; h < RL_VM_ERF_AVX2_REGS; h++)
        a[h] = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), a[h]),
                             _mm256_add_ps(_mm256_set1_ps(1.0f), e[h]));
}

/* The mask of the values of [c, c + 8) below d, for maskload/maskstore. */
__attribute__((target(RL_TARGET_AVX2))) static inline __m256i rl_nn_mask8(size_t d, size_t c) {
    const int k = c >= d ? 0 : d - c >= 8 ? 8 : (int)(d - c);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The mask of the values of [c + 16 h, c + 16 h + 16) below d. */
static inline __mmask16 rl_nn_mask16(size_t d, size_t c) {
    return c >= d ? 0 : d - c >= 16 ? 0xffff : (__mmask16)((1u << (d - c)) - 1u);
}

/* A bias and an activation: the bias added in f32, then the identity, ReLU
 * (v < 0 ? 0 : v: a NaN and -0 kept) or the GELU of rl_gelu_avx512
 * (RL_NN_GELU_VALUES at a time), the scalar row's steps. */
__attribute__((target(RL_TARGET_AVX512))) static void rl_bias_act_row_avx512(const void *job,
                                                                            size_t t) {
    const rl_rows_job *j = job;
    const float *x = j->x + t * j->d;
    float *y = j->out + t * j->d;
    __mmask16 bad = 0;
    for (size_t c = 0; c < j->d; c += RL_NN_GELU_VALUES) {
        __m512 a[RL_NN_GELU_VALUES / 16];
        __mmask16 m[RL_NN_GELU_VALUES / 16];
        _Pragma("GCC unroll 16")
        for (int h = 0; h < RL_NN_GELU_VALUES / 16; h++) {
            const size_t ch = c + 16 * (size_t)h;
            m[h] = rl_nn_mask16(j->d, ch);
            a[h] = _mm512_maskz_loadu_ps(m[h], x + ch);
            if (j->b)
                a[h] = _mm512_add_ps(a[h], _mm512_maskz_loadu_ps(m[h], j->b + ch));
        }
        if (j->act == RL_NN_GELU)
            rl_gelu_avx512(a);
        else if (j->act == RL_NN_RELU)
            _Pragma("GCC unroll 16")
            for (int h = 0; h < RL_NN_GELU_VALUES / 16; h++)
                a[h] = _mm512_mask_mov_ps(
                    a[h], _mm512_cmp_ps_mask(a[h], _mm512_setzero_ps(), _CMP_LT_OQ),
                    _mm512_setzero_ps());
        _Pragma("GCC unroll 16")
        for (int h = 0; h < RL_NN_GELU_VALUES / 16; h++) {
            _mm512_mask_storeu_ps(y + c + 16 * (size_t)h, m[h], a[h]);
            bad |= RL_NN_NONFINITE_512(m[h], a[h]);
        }
    }
    if (bad)
        rl_nn_flag(j);
}

/* rl_bias_act_row_avx512's steps eight values a register, the GELU of
 * rl_gelu_avx2 (RL_NN_GELU_AVX2_VALUES at a time). */
__attribute__((target(RL_TARGET_AVX2))) static void rl_bias_act_row_avx2(const void *job,
                                                                        size_t t) {
    const rl_rows_job *j = job;
    const float *x = j->x + t * j->d;
    float *y = j->out + t * j->d;
    for (size_t c = 0; c < j->d; c += RL_NN_GELU_AVX2_VALUES) {
        __m256 a[RL_VM_ERF_AVX2_REGS];
        __m256i m[RL_VM_ERF_AVX2_REGS];
        _Pragma("GCC unroll 16")
        for (int h = 0; h < RL_VM_ERF_AVX2_REGS; h++) {
            const size_t ch = c + 8 * (size_t)h;
            m[h] = rl_nn_mask8(j->d, ch);
            a[h] = _mm256_maskload_ps(x + ch, m[h]);
            if (j->b)
                a[h] = _mm256_add_ps(a[h], _mm256_maskload_ps(j->b + ch, m[h]));
        }
        if (j->act == RL_NN_GELU)
            rl_gelu_avx2(a);
        else if (j->act == RL_NN_RELU)
            _Pragma("GCC unroll 16")
            for (int h = 0; h < RL_VM_ERF_AVX2_REGS; h++)
                a[h] = _mm256_blendv_ps(a[h], _mm256_setzero_ps(),
                                        _mm256_cmp_ps(a[h], _mm256_setzero_ps(), _CMP_LT_OQ));
        _Pragma("GCC unroll 16")
        for (int h = 0; h < RL_VM_ERF_AVX2_REGS; h++)
            _mm256_maskstore_ps(y + c + 8 * (size_t)h, m[h], a[h]);
    }
    rl_nn_scan_row(j, y, j->d);
}

/* The bias-and-activation rows per path (kernel.h). */
static void (*const rl_bias_act_rows[RL_PATH_COUNT])(const void *job, size_t t) = {
    [RL_PATH_REF] = rl_bias_act_row,
    [RL_PATH_AVX2] = rl_bias_act_row_avx2,
    [RL_PATH_AVX512] = rl_bias_act_row_avx512,
    [RL_PATH_AVX512VNNI] = rl_bias_act_row_avx512,
};

/* rl_bias_act_ex, and with nonfinite (not NULL) *nonfinite set to whether
 * out holds a NaN or an infinity. */
static rl_status rl_bias_act_go(const float *x, size_t n, size_t d, const float *b,
                                rl_nn_act act, float *out, rl_path path, int threads,
                                int *nonfinite) {
    rl_status st = rl_check_run(path, threads);
    if (st != RL_OK)
        return st;
    size_t nd = rl_nn_elems(n, d);
    if (d == 0 || (unsigned)act > RL_NN_GELU || (n && !nd) || (n && (!x || !out)) ||
        (out != x && rl_nn_overlap(out, nd, x, nd)) || (n && b && rl_nn_overlap(out, nd, b, d)))
        return RL_BADARG;
    rl_rows_job job = {.x = x, .b = b, .out = out, .n = n, .d = d, .act = act,
                       .nonfinite = nonfinite, .row = rl_bias_act_rows[path]};
    return rl_rows_go(&job, rl_rows_run, d, threads);
}

rl_status rl_bias_act_ex(const float *x, size_t n, size_t d, const float *b, rl_nn_act act,
                         float *out, rl_path path, int threads) {
    return rl_bias_act_go(x, n, d, b, act, out, path, threads, NULL);
}

rl_status rl_bias_act_nf(const float *x, size_t n, size_t d, const float *b, rl_nn_act act,
                         float *out, int *nonfinite) {
    return rl_bias_act_go(x, n, d, b, act, out, rl_path_best(), rl_threads(), nonfinite);
}

rl_status rl_bias_act(const float *x, size_t n, size_t d, const float *b, rl_nn_act act,
                      float *out) {
    return rl_bias_act_ex(x, n, d, b, act, out, rl_path_best(), rl_threads());
}

/* ---- GeGLU ---------------------------------------------------------- */

float rl_gelu_f32(float a, rl_gelu kind) {
    if (kind == RL_GELU_TANH)
        return (0.5f * a) *
               (1.0f + tanhf((RL_SQRT_2_OVER_PI * a) * (1.0f + (RL_GELU_COEF_A * a) * a)));
    return (0.5f * a) * (1.0f + rl_erff(a * RL_SQRT_2_INV));
}

static void rl_geglu_row(const void *job, size_t t) {
    const rl_rows_job *j = job;
    const float *x = j->x + t * 2 * j->d;
    float *y = j->out + t * j->d;
    for (size_t c = 0; c < j->d; c++)
        y[c] = rl_gelu_f32(x[c], j->kind) * x[j->d + c];
    rl_nn_scan_row(j, y, j->d);
}

/* The erf form RL_NN_GELU_VALUES values at a time (rl_gelu_avx512); tanh
 * rows take rl_geglu_row. */
__attribute__((target(RL_TARGET_AVX512))) static void
rl_geglu_row_avx512(const void *job, size_t t) {
    const rl_rows_job *j = job;
    const float *x = j->x + t * 2 * j->d;
    float *y = j->out + t * j->d;
    __mmask16 bad = 0;
    for (size_t c = 0; c < j->d; c += RL_NN_GELU_VALUES) {
        __m512 a[RL_NN_GELU_VALUES / 16];
        __mmask16 m[RL_NN_GELU_VALUES / 16];
        _Pragma("GCC unroll 16")
        for (int h = 0; h < RL_NN_GELU_VALUES / 16; h++) {
            m[h] = rl_nn_mask16(j->d, c + 16 * (size_t)h);
            a[h] = _mm512_maskz_loadu_ps(m[h], x + c + 16 * (size_t)h);
        }
        rl_gelu_avx512(a);
        _Pragma("GCC unroll 16")
        for (int h = 0; h < RL_NN_GELU_VALUES / 16; h++) {
            const size_t ch = c + 16 * (size_t)h;
            const __m512 r = _mm512_mul_ps(a[h], _mm512_maskz_loadu_ps(m[h], x + j->d + ch));
            _mm512_mask_storeu_ps(y + ch, m[h], r);
            bad |= RL_NN_NONFINITE_512(m[h], r);
        }
    }
    if (bad)
        rl_nn_flag(j);
}

/* The erf form RL_NN_GELU_AVX2_VALUES values at a time (rl_gelu_avx2). */
__attribute__((target(RL_TARGET_AVX2))) static void rl_geglu_row_avx2(const void *job,
                                                                     size_t t) {
    const rl_rows_job *j = job;
    const float *x = j->x + t * 2 * j->d;
    float *y = j->out + t * j->d;
    for (size_t c = 0; c < j->d; c += RL_NN_GELU_AVX2_VALUES) {
        __m256 a[RL_VM_ERF_AVX2_REGS];
        __m256i m[RL_VM_ERF_AVX2_REGS];
        _Pragma("GCC unroll 16")
        for (int h = 0; h < RL_VM_ERF_AVX2_REGS; h++) {
            m[h] = rl_nn_mask8(j->d, c + 8 * (size_t)h);
            a[h] = _mm256_maskload_ps(x + c + 8 * (size_t)h, m[h]);
        }
        rl_gelu_avx2(a);
        _Pragma("GCC unroll 16")
        for (int h = 0; h < RL_VM_ERF_AVX2_REGS; h++) {
            const size_t ch = c + 8 * (size_t)h;
            _mm256_maskstore_ps(y + ch, m[h],
                                _mm256_mul_ps(a[h], _mm256_maskload_ps(x + j->d + ch, m[h])));
        }
    }
    rl_nn_scan_row(j, y, j->d);
}

/* GeGLU's erf form per path (kernel.h). */
static void (*const rl_geglu_erf_rows[RL_PATH_COUNT])(const void *job, size_t t) = {
    [RL_PATH_REF] = rl_geglu_row,
    [RL_PATH_AVX2] = rl_geglu_row_avx2,
    [RL_PATH_AVX512] = rl_geglu_row_avx512,
    [RL_PATH_AVX512VNNI] = rl_geglu_row_avx512,
};

/* rl_geglu_ex, and with nonfinite (not NULL) *nonfinite set to whether out
 * holds a NaN or an infinity. */
static rl_status rl_geglu_go(const float *x, size_t n, size_t f, rl_gelu kind, float *out,
                             rl_path path, int threads, int *nonfinite) {
    rl_status st = rl_check_run(path, threads);
    if (st != RL_OK)
        return st;
    size_t f2 = rl_nn_elems(f, 2), nx = f2 ? rl_nn_elems(n, f2) : 0;
    if (!f2 || (unsigned)kind > RL_GELU_TANH || (n && !nx) || (n && (!x || !out)) ||
        rl_nn_overlap(out, n * f, x, nx))
        return RL_BADARG;
    rl_rows_job job = {.x = x, .out = out, .n = n, .d = f, .kind = kind, .nonfinite = nonfinite,
                       .row = kind == RL_GELU_ERF ? rl_geglu_erf_rows[path] : rl_geglu_row};
    return rl_rows_go(&job, rl_rows_run, f2, threads);
}

rl_status rl_geglu_ex(const float *x, size_t n, size_t f, rl_gelu kind, float *out,
                      rl_path path, int threads) {
    return rl_geglu_go(x, n, f, kind, out, path, threads, NULL);
}

rl_status rl_geglu_nf(const float *x, size_t n, size_t f, rl_gelu kind, float *out,
                      int *nonfinite) {
    return rl_geglu_go(x, n, f, kind, out, rl_path_best(), rl_threads(), nonfinite);
}

rl_status rl_geglu(const float *x, size_t n, size_t f, rl_gelu kind, float *out) {
    return rl_geglu_ex(x, n, f, kind, out, rl_path_best(), rl_threads());
}
