/* quant_k.c - Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: ggml's reference quantizers
 * (the path llama-quantize takes without an importance matrix) and its
 * dequantizers, bit for bit (doc/formats.md §4).
 *
 * A super-block of 256 values is cut into sub-blocks of 16 or 32; each
 * sub-block gets a scale (and for Q2_K/Q4_K/Q5_K a min) from a small search
 * that minimises a weighted error, the sub-block scales are themselves
 * quantized against one binary16 super-scale, and the values are then
 * re-quantized against the scales as stored.  Every f32 operation below is
 * in ggml's order, and the Makefile compiles this file with
 * -ffp-contract=off: a different order, or an fma, changes the search's
 * choices and so the bytes.  Scratch lives on the stack, per block.
 */
#include "prims/quants.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/kernel.h"

/* Below this every value of a sub-block counts as zero. */
#define RL_K_GROUP_EPS 1e-15f

static inline int rl_imin(int a, int b) { return a < b ? a : b; }
static inline int rl_imax(int a, int b) { return a > b ? a : b; }

/* ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23
 * and reading the mantissa.  Exact for |v| < 2^22; beyond that it answers
 * whatever the bits say, and so do we. */
static inline int rl_nearest_int(float v) {
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline float rl_h2f(uint16_t h) { return rl_gguf_f16_to_f32(h); }
static inline uint16_t rl_f2h(float f) { return rl_gguf_f32_to_f16(f); }

/* Scale and min for an asymmetric sub-block of n values with levels
 * 0..nmax (ggml's make_qkx2_quants): start from (max-min)/nmax, then try
 * nstep+1 inverse scales (rmin + rdelta*is + nmax)/(max-min) and keep the
 * least-squares fit with the smallest weighted error (absolute error when
 * use_mad).  L gets the levels; *the_min the min as a positive offset. */
static float rl_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                              float *the_min, float rmin, float rdelta, int nstep,
                              bool use_mad) {
    uint8_t Laux[32];
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = rl_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)rl_imax(0, rl_imin(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = rl_imax(0, rl_imin(nmax, rl_nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0))
            continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * Laux[i] + this_min - x[i];
            diff = use_mad ? fabsf(diff) : diff * diff;
            cur_error += w[i] * diff;
        }
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* The value of largest magnitude among x[0..n), the first of equals (0 for
 * none above 0): the signed maximum the symmetric fits scale by. */
static float rl_signed_absmax(int n, const float *x) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    return max;
}

/* Scale for a symmetric sub-block of n values with levels -nmax..nmax-1,
 * weights x^2 (ggml's make_qx_quants with rmse_type 1 and no importance):
 * the least-squares scale at -nmax/max, then nineteen nearby inverse scales
 * -(nmax + 0.1*is)/max, keeping the best.  L gets level + nmax. */
static float rl_fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = rl_signed_absmax(n, x);
    if (fabsf(max) < RL_K_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = rl_imax(-nmax, rl_imin(nmax - 1, rl_nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = rl_imax(-nmax, rl_imin(nmax - 1, rl_nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = rl_imax(-nmax, rl_imin(nmax - 1, rl_nearest_int(iscale * x[i])));
                L[i] = (int8_t)(l + nmax);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's symmetric fit (ggml's make_q3_quants with do_rmse): levels
 * -nmax..nmax-1 at -nmax/max, then up to five passes that move one level at
 * a time where that improves the x^2-weighted fit.  L gets level + nmax. */
static float rl_fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    float max = rl_signed_absmax(n, x);
    if (fabsf(max) < RL_K_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = rl_imax(-nmax, rl_imin(nmax - 1, rl_nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0))
                continue;
            float sl2 = suml2 - w * L[i] * L[i];
            int new_l = rl_imax(-nmax, rl_imin(nmax - 1, rl_nearest_int(x[i] * sl2 / slx)));
            if (new_l == L[i])
                continue;
            slx += w * x[i] * new_l;
            sl2 += w * new_l * new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                n_changed++;
            }
        }
        if (!n_changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Q4_K/Q5_K's 12 scale bytes: sub-blocks 0..3 keep scale and min in the
 * low six bits of bytes j and j+4; 4..7 split theirs into a low nibble pair
 * in byte j+4 and the top two bits in bits 6..7 of bytes j-4 and j. */
static inline void rl_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

static inline void rl_k4_pack_scales(uint8_t *s, const float *scales, const float *mins,
                                     float max_scale, float max_min) {
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < RL_QK_K / 32; j++) {
        /* the int is cut to a byte before the cap, as in ggml */
        uint8_t ls = (uint8_t)rl_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)rl_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
}

/* ---- the fits eight sub-blocks at a time -------------------------------
 *
 * The same arithmetic as rl_fit_scale_min and rl_fit_scale_sym, each lane
 * of an AVX2 vector holding one sub-block: every lane does exactly the
 * scalar code's operations in the scalar code's order (the sums still run
 * over i one value after another), so the bits are the same; branches
 * become per-lane selections.  rl_k_fits_table picks them by path (the
 * AVX2 and AVX-512 paths run them, the reference path the scalar fits);
 * tests/c/test_quants.c checks both against ggml.  The AVX2 path's target enables FMA too, but this file
 * is compiled with -ffp-contract=off: no multiply and add is fused. */

typedef float rl_v8f __attribute__((vector_size(32)));
typedef int32_t rl_v8i __attribute__((vector_size(32)));

#define RL_LANES_TARGET __attribute__((target(RL_TARGET_AVX2)))

RL_LANES_TARGET static inline rl_v8f rl_v8_sel(rl_v8i m, rl_v8f a, rl_v8f b) {
    return (rl_v8f)(((rl_v8i)a & m) | ((rl_v8i)b & ~m));
}
RL_LANES_TARGET static inline rl_v8i rl_v8_seli(rl_v8i m, rl_v8i a, rl_v8i b) {
    return (a & m) | (b & ~m);
}
RL_LANES_TARGET static inline rl_v8i rl_v8_nearest(rl_v8f v) {
    rl_v8f t = v + 12582912.f;
    return ((rl_v8i)t & 0x007fffff) - 0x00400000;
}
RL_LANES_TARGET static inline rl_v8i rl_v8_clamp(rl_v8i l, int lo, int hi) {
    rl_v8i vlo = {lo, lo, lo, lo, lo, lo, lo, lo}, vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
    l = rl_v8_seli(l < vhi, l, vhi);
    return rl_v8_seli(l > vlo, l, vlo);
}

/* rl_fit_scale_min (use_mad false) for the 8 sub-blocks of 32 whose value i
 * is X[i] (lane j: sub-block j), weights W[i]; levels to L[i], mins and
 * scales to MINS and SCALES. */
RL_LANES_TARGET static void rl_fit_scale_min_x8(const rl_v8f *X, const rl_v8f *W, rl_v8i *L,
                                                float *mins, float *scales, int nmax,
                                                float rmin, float rdelta, int nstep) {
    const int n = 32;
    rl_v8i Laux[32];
    rl_v8f min = X[0], max = X[0], sum_w = W[0], sum_x = W[0] * X[0];
    for (int i = 1; i < n; i++) {
        min = rl_v8_sel(X[i] < min, X[i], min);
        max = rl_v8_sel(X[i] > max, X[i], max);
        sum_w += W[i];
        sum_x += W[i] * X[i];
    }
    const rl_v8f zero = {0};
    min = rl_v8_sel(min > zero, zero, min);
    rl_v8i flat = max == min;
    rl_v8f min0 = min;
    rl_v8f iscale = (float)nmax / (max - min);
    rl_v8f scale = 1 / iscale;
    rl_v8f best_error = zero;
    for (int i = 0; i < n; i++) {
        L[i] = rl_v8_clamp(rl_v8_nearest(iscale * (X[i] - min)), 0, nmax);
        rl_v8f diff = scale * __builtin_convertvector(L[i], rl_v8f) + min - X[i];
        best_error += W[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        /* min moves with each better fit, and the range with it */
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        rl_v8f sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < n; i++) {
            rl_v8i l = rl_v8_clamp(rl_v8_nearest(iscale * (X[i] - min)), 0, nmax);
            Laux[i] = l;
            rl_v8f lf = __builtin_convertvector(l, rl_v8f);
            sum_l += W[i] * lf;
            sum_l2 += W[i] * lf * lf;
            sum_xl += W[i] * lf * X[i];
        }
        rl_v8f D = sum_w * sum_l2 - sum_l * sum_l;
        rl_v8i ok = D > zero;
        if (!(ok[0] | ok[1] | ok[2] | ok[3] | ok[4] | ok[5] | ok[6] | ok[7]))
            continue;
        rl_v8f this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        rl_v8f this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        rl_v8i pos = this_min > zero;
        this_scale = rl_v8_sel(pos, sum_xl / sum_l2, this_scale);
        this_min = rl_v8_sel(pos, zero, this_min);
        rl_v8f cur_error = zero;
        for (int i = 0; i < n; i++) {
            rl_v8f diff = this_scale * __builtin_convertvector(Laux[i], rl_v8f) + this_min - X[i];
            cur_error += W[i] * (diff * diff);
        }
        rl_v8i better = ok & (cur_error < best_error);
        for (int i = 0; i < n; i++)
            L[i] = rl_v8_seli(better, Laux[i], L[i]);
        best_error = rl_v8_sel(better, cur_error, best_error);
        scale = rl_v8_sel(better, this_scale, scale);
        min = rl_v8_sel(better, this_min, min);
    }
    for (int i = 0; i < n; i++)
        L[i] = rl_v8_seli(flat, (rl_v8i){0}, L[i]);
    scale = rl_v8_sel(flat, zero, scale);
    min = rl_v8_sel(flat, min0, min);
    for (int j = 0; j < 8; j++) {
        mins[j] = -min[j];
        scales[j] = scale[j];
    }
}

/* rl_k45_block's fits, the sub-blocks in lanes. */
RL_LANES_TARGET static void rl_k45_fits_x8(const float *x, uint8_t *L, float *mins,
                                           float *scales, int nmax, float rmin, int nstep) {
    rl_v8f X[32], W[32];
    rl_v8i LL[32];
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xj[l] * xj[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) {
            X[l][j] = xj[l];
            W[l][j] = av_x + fabsf(xj[l]);
        }
    }
    rl_fit_scale_min_x8(X, W, LL, mins, scales, nmax, rmin, 0.1f, nstep);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)LL[l][j];
}

/* rl_fit_scale_sym (n 16, levels -nmax..nmax-1) for 8 sub-blocks of 16:
 * value i of lane j is X[i][j]; levels + nmax to L[i], scales to SCALES. */
RL_LANES_TARGET static void rl_fit_scale_sym_x8(const rl_v8f *X, rl_v8i *L, float *scales,
                                                int nmax) {
    const int n = 16;
    const rl_v8f zero = {0};
    rl_v8f max = zero, amax = zero;
    for (int i = 0; i < n; i++) {
        rl_v8f ax = (rl_v8f)((rl_v8i)X[i] & 0x7fffffff);
        rl_v8i gt = ax > amax;
        amax = rl_v8_sel(gt, ax, amax);
        max = rl_v8_sel(gt, X[i], max);
    }
    rl_v8i tiny = (rl_v8f)((rl_v8i)max & 0x7fffffff) < RL_K_GROUP_EPS;
    rl_v8f iscale = -(float)nmax / max;
    rl_v8f sumlx = zero, suml2 = zero;
    for (int i = 0; i < n; i++) {
        rl_v8i l = rl_v8_clamp(rl_v8_nearest(iscale * X[i]), -nmax, nmax - 1);
        L[i] = l + nmax;
        rl_v8f lf = __builtin_convertvector(l, rl_v8f);
        rl_v8f w = X[i] * X[i];
        sumlx += w * X[i] * lf;
        suml2 += w * lf * lf;
    }
    rl_v8f scale = rl_v8_sel(suml2 != zero, sumlx / suml2, zero);
    rl_v8f best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        rl_v8i Ls[16];
        sumlx = suml2 = zero;
        for (int i = 0; i < n; i++) {
            rl_v8i l = rl_v8_clamp(rl_v8_nearest(iscale * X[i]), -nmax, nmax - 1);
            Ls[i] = l;
            rl_v8f lf = __builtin_convertvector(l, rl_v8f);
            rl_v8f w = X[i] * X[i];
            sumlx += w * X[i] * lf;
            suml2 += w * lf * lf;
        }
        rl_v8i better = (suml2 > zero) & (sumlx * sumlx > best * suml2);
        for (int i = 0; i < n; i++)
            L[i] = rl_v8_seli(better, Ls[i] + nmax, L[i]);
        scale = rl_v8_sel(better, sumlx / suml2, scale);
        best = rl_v8_sel(better, scale * sumlx, best);
    }
    for (int i = 0; i < n; i++)
        L[i] = rl_v8_seli(tiny, (rl_v8i){0}, L[i]);
    scale = rl_v8_sel(tiny, zero, scale);
    for (int j = 0; j < 8; j++)
        scales[j] = scale[j];
}

/* Q6_K's 16 fits, eight sub-blocks of 16 at a time. */
RL_LANES_TARGET static void rl_q6_fits_x8(const float *x, int8_t *L, float *scales) {
    for (int h = 0; h < 2; h++) {
        rl_v8f X[16];
        rl_v8i LL[16];
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 16; l++)
                X[l][j] = x[128 * h + 16 * j + l];
        rl_fit_scale_sym_x8(X, LL, scales + 8 * h, 32);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 16; l++)
                L[128 * h + 16 * j + l] = (int8_t)LL[l][j];
    }
}

/* The scalar fits with the signatures of the lanes' ones. */
static void rl_k45_fits_ref(const float *x, uint8_t *L, float *mins, float *scales, int nmax,
                            float rmin, int nstep) {
    float w[32];
    for (int j = 0; j < RL_QK_K / 32; j++) {
        const float *xj = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xj[l] * xj[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xj[l]);
        scales[j] = rl_fit_scale_min(32, nmax, xj, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep,
                                     false);
    }
}

static void rl_q6_fits_ref(const float *x, int8_t *L, float *scales) {
    for (int ib = 0; ib < RL_QK_K / 16; ib++)
        scales[ib] = rl_fit_scale_sym(16, 32, x + 16 * ib, L + 16 * ib);
}

/* The K-quant scale fits by path (doc/kernels.md §4): the fits of a Q4_K
 * or Q5_K super-block's 8 sub-blocks, and of a Q6_K super-block's 16. */
typedef struct rl_k_fits {
    void (*k45)(const float *x, uint8_t *L, float *mins, float *scales, int nmax, float rmin,
                int nstep);
    void (*q6)(const float *x, int8_t *L, float *scales);
} rl_k_fits;

static const rl_k_fits rl_k_fits_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = {rl_k45_fits_ref, rl_q6_fits_ref},
    [RL_PATH_AVX2] = {rl_k45_fits_x8, rl_q6_fits_x8},
    [RL_PATH_AVX512] = {rl_k45_fits_x8, rl_q6_fits_x8},
    [RL_PATH_AVX512VNNI] = {rl_k45_fits_x8, rl_q6_fits_x8},
};

/* Q4_K/Q5_K: 8 sub-blocks of 32, weights av + |x| with av the RMS, the
 * fit, the 6-bit scales and mins, then the levels again against the stored
 * scales.  L: 256 levels 0..nmax. */
static void rl_k45_block(const float *x, uint16_t *d, uint16_t *dmin, uint8_t *s, uint8_t *L,
                         int nmax, float rmin, int nstep) {
    float mins[RL_QK_K / 32], scales[RL_QK_K / 32];
    float max_scale = 0, max_min = 0;
    rl_k_fits_table[rl_path_best()].k45(x, L, mins, scales, nmax, rmin, nstep);
    for (int j = 0; j < RL_QK_K / 32; j++) {
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    rl_k4_pack_scales(s, scales, mins, max_scale, max_min);
    *d = rl_f2h(max_scale / 63.f);
    *dmin = rl_f2h(max_min / 63.f);
    for (int j = 0; j < RL_QK_K / 32; j++) {
        uint8_t sc, m;
        rl_k4_scale_min(j, s, &sc, &m);
        const float dj = rl_h2f(*d) * sc;
        if (!dj)
            continue;
        const float dm = rl_h2f(*dmin) * m;
        for (int ii = 0; ii < 32; ii++) {
            int l = rl_nearest_int((x[32 * j + ii] + dm) / dj);
            L[32 * j + ii] = (uint8_t)rl_imax(0, rl_imin(nmax, l));
        }
    }
}

/* 2-bit levels of 128 values into 32 bytes: value l + 32k in bits 2k..2k+1
 * of byte l (Q2_K's and Q3_K's low bits). */
static inline void rl_pack2(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < RL_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 |
                                      L[j + l + 96] << 6);
}

void rl_quantize_q2_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q2_K *y = vy;
    const float q4scale = 15.f;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        uint8_t L[RL_QK_K];
        float mins[RL_QK_K / 16], scales[RL_QK_K / 16], w[16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < RL_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * j + l]);
            scales[j] = rl_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f,
                                         0.1f, 15, true);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < RL_QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)rl_nearest_int(iscale * scales[j]);
            y[i].d = rl_f2h(max_scale / q4scale);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = rl_f2h(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            /* an f32-subnormal max_min makes iscale infinite and the level
             * -2^22; ggml shifts it as two's complement, and so do we */
            for (int j = 0; j < RL_QK_K / 16; j++)
                y[i].scales[j] |= (uint8_t)((uint32_t)rl_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = rl_f2h(max_min / q4scale);
        } else {
            y[i].dmin = rl_f2h(0.f);
        }
        for (int j = 0; j < RL_QK_K / 16; j++) {
            const float d = rl_h2f(y[i].d) * (y[i].scales[j] & 0xf);
            if (!d)
                continue;
            const float dm = rl_h2f(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                int l = rl_nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)rl_imax(0, rl_imin(3, l));
            }
        }
        rl_pack2(L, y[i].qs);
    }
}

void rl_quantize_q3_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q3_K *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        int8_t L[RL_QK_K];
        float scales[RL_QK_K / 16];
        float max_scale = 0, amax = 0;
        for (int j = 0; j < RL_QK_K / 16; j++) {
            scales[j] = rl_fit_scale_q3(16, 4, x + 16 * j, L + 16 * j);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        /* 16 6-bit scales, biased by 32: low nibbles in bytes 0..7 (two per
         * byte, j and j+8), the top two bits in bytes 8..11. */
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < RL_QK_K / 16; j++) {
                int8_t l = (int8_t)rl_nearest_int(iscale * scales[j]);
                l = (int8_t)(rl_imax(-32, rl_imin(31, l)) + 32);
                if (j < 8)
                    y[i].scales[j] = (uint8_t)(l & 0xf);
                else
                    y[i].scales[j - 8] |= (uint8_t)((l & 0xf) << 4);
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = rl_f2h(1 / iscale);
        } else {
            y[i].d = rl_f2h(0.f);
        }
        for (int j = 0; j < RL_QK_K / 16; j++) {
            int8_t sc = (int8_t)(j < 8 ? y[i].scales[j] & 0xf : y[i].scales[j - 8] >> 4);
            sc = (int8_t)((sc | ((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32);
            float d = rl_h2f(y[i].d) * sc;
            if (!d)
                continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = rl_imax(-4, rl_imin(3, rl_nearest_int(x[16 * j + ii] / d)));
                L[16 * j + ii] = (int8_t)(l + 4);
            }
        }
        /* the third bit of value j goes to bit j/32 of hmask[j%32] */
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        uint8_t Lu[RL_QK_K];
        for (int j = 0; j < RL_QK_K; j++) {
            Lu[j] = (uint8_t)L[j];
            if (Lu[j] > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                Lu[j] -= 4;
            }
        }
        rl_pack2(Lu, y[i].qs);
    }
}

void rl_quantize_q4_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q4_K *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        uint8_t L[RL_QK_K];
        rl_k45_block(x, &y[i].d, &y[i].dmin, y[i].scales, L, 15, -1.f, 20);
        /* 64 values per 32 bytes: l in the low nibble, l+32 in the high */
        uint8_t *q = y[i].qs;
        for (int j = 0; j < RL_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

void rl_quantize_q5_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q5_K *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        uint8_t L[RL_QK_K];
        rl_k45_block(x, &y[i].d, &y[i].dmin, y[i].scales, L, 31, -0.5f, 15);
        /* low nibbles as Q4_K; the fifth bit of value n+j (n a multiple of
         * 64, j < 64) goes to bit 2*(n/64) + j/32 of qh[j%32] */
        memset(y[i].qh, 0, sizeof y[i].qh);
        uint8_t *ql = y[i].qs;
        for (int n = 0, b = 0; n < RL_QK_K; n += 64, b += 2, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y[i].qh[j] |= (uint8_t)(1u << b);
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y[i].qh[j] |= (uint8_t)(2u << b);
                }
                ql[j] = (uint8_t)(l1 | l2 << 4);
            }
        }
    }
}

void rl_quantize_q6_K_ref(const float *x, void *vy, size_t nb) {
    rl_block_q6_K *y = vy;
    for (size_t i = 0; i < nb; i++, x += RL_QK_K) {
        int8_t L[RL_QK_K];
        float scales[RL_QK_K / 16];
        float max_scale = 0, max_abs_scale = 0;
        rl_k_fits_table[rl_path_best()].q6(x, L, scales);
        for (int ib = 0; ib < RL_QK_K / 16; ib++) {
            float abs_scale = fabsf(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < RL_K_GROUP_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            y[i].d = rl_f2h(0.f);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = rl_f2h(1 / iscale);
        for (int ib = 0; ib < RL_QK_K / 16; ib++)
            y[i].scales[ib] = (int8_t)rl_imin(127, rl_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < RL_QK_K / 16; j++) {
            float d = rl_h2f(y[i].d) * y[i].scales[j];
            if (!d)
                continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = rl_imax(-32, rl_imin(31, rl_nearest_int(x[16 * j + ii] / d)));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        /* per 128 values: low nibbles of l and l+64 in ql[l], of l+32 and
         * l+96 in ql[l+32]; their top two bits in qh[l], 2 bits each */
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < RL_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = (uint8_t)L[j + l], q2 = (uint8_t)L[j + l + 32],
                              q3 = (uint8_t)L[j + l + 64], q4 = (uint8_t)L[j + l + 96];
                ql[l] = (uint8_t)((q1 & 0xf) | (q3 & 0xf) << 4);
                ql[l + 32] = (uint8_t)((q2 & 0xf) | (q4 & 0xf) << 4);
                qh[l] = (uint8_t)(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
            }
        }
    }
}

/* ---- dequantizers ------------------------------------------------------ */

void rl_dequantize_q2_K(const void *vx, float *y, size_t nb) {
    const rl_block_q2_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_h2f(x[i].d), min = rl_h2f(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int n = 0; n < RL_QK_K; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    uint8_t sc = x[i].scales[is++];
                    float dl = d * (sc & 0xf), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void rl_dequantize_q3_K(const void *vx, float *y, size_t nb) {
    const rl_block_q3_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d_all = rl_h2f(x[i].d);
        int8_t scales[16];
        for (int j = 0; j < 16; j++) {
            int lo = j < 8 ? x[i].scales[j] & 0xf : x[i].scales[j - 8] >> 4;
            int hi = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            scales[j] = (int8_t)((lo | hi << 4) - 32);
        }
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < RL_QK_K; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int half = 0; half < 2; half++) {
                    float dl = d_all * (scales[is++]);
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

void rl_dequantize_q4_K(const void *vx, float *y, size_t nb) {
    const rl_block_q4_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_h2f(x[i].d), min = rl_h2f(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int j = 0, is = 0; j < RL_QK_K; j += 64, q += 32, is += 2) {
            uint8_t sc, m;
            rl_k4_scale_min(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            rl_k4_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (q[l] & 0xf) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void rl_dequantize_q5_K(const void *vx, float *y, size_t nb) {
    const rl_block_q5_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_h2f(x[i].d), min = rl_h2f(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < RL_QK_K; j += 64, ql += 32, is += 2) {
            uint8_t sc, m;
            rl_k4_scale_min(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            rl_k4_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * ((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

void rl_dequantize_q6_K(const void *vx, float *y, size_t nb) {
    const rl_block_q6_K *x = vx;
    for (size_t i = 0; i < nb; i++) {
        const float d = rl_h2f(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < RL_QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                const int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}
