/* quant_k_fits.c - the K-quants' scale searches: ggml's make_qkx2_quants,
 * make_qx_quants and make_q3_quants for one sub-block, in ggml's f32 order,
 * and the same searches eight sub-blocks at a time on AVX2, lane for lane the
 * same bits; rl_k_fits_table picks one by path (doc/kernels.md).  The
 * quantizers that use them are in quant_k.c.  Compiled with
 * -ffp-contract=off, as quant_k.c (see its header).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "prims/kernel.h"
#include "prims/quant_internal.h"
#include "prims/quants.h"

/* Scale and min for an asymmetric sub-block of n values with levels
 * 0..nmax (ggml's make_qkx2_quants): start from (max-min)/nmax, then try
 * nstep+1 inverse scales (rmin + rdelta*is + nmax)/(max-min) and keep the
 * least-squares fit with the smallest weighted error (absolute error when
 * use_mad).  L gets the levels; *the_min the min as a positive offset. */
float rl_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                       float *the_min, float rmin, float rdelta, int nstep, bool use_mad) {
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

/* The level of x at inverse scale iscale among -nmax..nmax-1. */
static inline int rl_sym_level(int nmax, float iscale, float x) {
    return rl_imax(-nmax, rl_imin(nmax - 1, rl_nearest_int(iscale * x)));
}

/* The x^2-weighted sums of a symmetric fit at inverse scale iscale:
 * *sumlx = sum w x l and *suml2 = sum w l l, in ggml's order; when L is not
 * NULL, L[i] gets level + bias. */
static void rl_sym_sums(int n, int nmax, float iscale, const float *x, int8_t *L, int bias,
                        float *sumlx, float *suml2) {
    float sx = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        int l = rl_sym_level(nmax, iscale, x[i]);
        if (L)
            L[i] = (int8_t)(l + bias);
        float w = x[i] * x[i];
        sx += w * x[i] * l;
        s2 += w * l * l;
    }
    *sumlx = sx;
    *suml2 = s2;
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
    float sumlx, suml2;
    rl_sym_sums(n, nmax, iscale, x, L, nmax, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        rl_sym_sums(n, nmax, iscale, x, NULL, 0, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(rl_sym_level(nmax, iscale, x[i]) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's symmetric fit (ggml's make_q3_quants with do_rmse): levels
 * -nmax..nmax-1 at -nmax/max, then up to five passes that move one level at
 * a time where that improves the x^2-weighted fit.  L gets level + nmax. */
float rl_fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    float max = rl_signed_absmax(n, x);
    if (fabsf(max) < RL_K_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx, suml2;
    rl_sym_sums(n, nmax, iscale, x, L, 0, &sumlx, &suml2);
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

const rl_k_fits rl_k_fits_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = {rl_k45_fits_ref, rl_q6_fits_ref},
    [RL_PATH_AVX2] = {rl_k45_fits_x8, rl_q6_fits_x8},
    [RL_PATH_AVX512] = {rl_k45_fits_x8, rl_q6_fits_x8},
    [RL_PATH_AVX512VNNI] = {rl_k45_fits_x8, rl_q6_fits_x8},
};
