/* q8_outlier.c - outlier-aware Q8_0 scales (see q8_outlier.h for the rule).
 *
 * Workload: the file tools run it once per weight matrix of a model, so it
 * is plain C with no fast path; a block costs at most 32 * 127 candidate
 * evaluations of 32 values, and only blocks that hold an outlier column
 * pay anything beyond the standard quantizer.
 */
#include "prims/q8_outlier.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/numfmt.h"

/* The weighted squared error of a block quantized as (d, q), in double so
 * that the comparison between candidates does not round away. */
static double rl_q8_block_error(const float *x, const uint8_t *outlier, float d,
                                const int8_t *q) {
    double err = 0.0;
    for (int j = 0; j < RL_QK8_0; j++) {
        const double diff = (double)x[j] - (double)d * (double)q[j];
        err += (outlier[j] ? RL_Q8_OUTLIER_WEIGHT : 1.0) * diff * diff;
    }
    return err;
}

/* Quants of a candidate scale d > 0 with |x| <= 127 * d: x * (1/d) is then
 * finite, and the clamp only catches a product that rounds up to 128. */
static void rl_q8_candidate_quants(const float *x, float d, int8_t *q) {
    const float id = 1.0f / d;
    for (int j = 0; j < RL_QK8_0; j++) {
        float r = roundf(x[j] * id);
        r = r > 127.0f ? 127.0f : r < -128.0f ? -128.0f : r;
        q[j] = (int8_t)r;
    }
}

int rl_q8_outlier_block_ref(const float *x, const uint8_t *outlier, rl_block_q8_0 *y) {
    /* The standard block comes first, so it wins every tie. */
    if (rl_q8_quantize_f32_ref(x, RL_QK8_0, y, NULL) == RL_OVERFLOW)
        return 1;
    float amax = 0.0f;
    int any = 0;
    for (int j = 0; j < RL_QK8_0; j++) {
        any |= outlier[j] != 0;
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    }
    if (!any)
        return 0;
    double best = rl_q8_block_error(x, outlier, rl_gguf_f16_to_f32(y->d), y->qs);
    int8_t q[RL_QK8_0];
    /* Larger k first, then earlier column, and only a strictly smaller
     * error replaces the best: that is the tie order. */
    for (int k = 127; k >= 1; k--) {
        for (int j = 0; j < RL_QK8_0; j++) {
            if (!outlier[j])
                continue;
            const uint16_t h = rl_gguf_f32_to_f16(fabsf(x[j]) / (float)k);
            const float d = rl_gguf_f16_to_f32(h);
            /* 127 * d is exact in f32: 7 bits times binary16's 11. */
            if (!(d > 0.0f) || isinf(d) || 127.0f * d < amax)
                continue;
            rl_q8_candidate_quants(x, d, q);
            const double err = rl_q8_block_error(x, outlier, d, q);
            if (err < best) {
                best = err;
                y->d = h;
                memcpy(y->qs, q, sizeof q);
            }
        }
    }
    return 0;
}

rl_status rl_q8_quantize_outliers_ref(rl_q8_src src, const void *x, size_t rows,
                                      size_t cols, const uint8_t *outlier,
                                      rl_block_q8_0 *y, size_t *where) {
    if (cols % RL_QK8_0)
        return RL_BADLEN;
    if ((unsigned)src > RL_SRC_BF16 || (cols && rows > SIZE_MAX / cols))
        return RL_BADARG; /* rows * cols overflows size_t */
    if (rows && cols && (!x || !y))
        return RL_BADARG;
    if (!rows || !cols)
        return RL_OK;
    static const uint8_t none[RL_QK8_0];
    float *row = malloc(cols * sizeof *row);
    if (!row)
        return RL_NOMEM;
    const size_t bpr = cols / RL_QK8_0;
    size_t first_ovf = SIZE_MAX;
    for (size_t r = 0; r < rows; r++) {
        rl_q8_widen_ref(src, x, r * cols, cols, row);
        /* A non-finite value anywhere outranks an overflow seen earlier. */
        for (size_t c = 0; c < cols; c++) {
            if (!isfinite(row[c])) {
                free(row);
                if (where)
                    *where = r * cols + c;
                return RL_NONFINITE;
            }
        }
        for (size_t b = 0; b < bpr; b++) {
            const uint8_t *m = outlier ? outlier + b * RL_QK8_0 : none;
            if (rl_q8_outlier_block_ref(row + b * RL_QK8_0, m, y + r * bpr + b) &&
                first_ovf == SIZE_MAX)
                first_ovf = r * bpr + b;
        }
    }
    free(row);
    if (first_ovf != SIZE_MAX) {
        if (where)
            *where = first_ovf;
        return RL_OVERFLOW;
    }
    return RL_OK;
}
