/* matmul_outlier.c - the product of an outlier matrix (see matmul_outlier.h).
 *
 * Three parts share one scratch allocation: the activations without the
 * outlier columns, those columns, and the f32 part; the two products are
 * rl_matmul's, so the bits are those of the same steps done one by one. */
#include "prims/matmul_outlier.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rl_status rl_matmul_outliers(const void *q, size_t rows, size_t cols, const size_t *idx,
                             size_t k, const float *wout, const float *x, size_t n, float *y,
                             rl_act act, char *msg, size_t msglen, rl_mm_fault *fault) {
    if (msg && msglen)
        msg[0] = 0;
    const size_t per = cols + k + 2 * rows; /* floats of scratch a token */
    int bad = k > cols || (k && (!idx || !wout)) || (n && !x) || (n && rows && !y) ||
              rows > SIZE_MAX / 4 || per < cols || (n && n > SIZE_MAX / sizeof(float) / per);
    for (size_t c = 0; !bad && c < k; c++)
        bad = idx[c] >= cols || (c && idx[c] <= idx[c - 1]);
    if (bad) {
        if (msg && msglen)
            snprintf(msg, msglen, "matmul: bad argument (the outlier columns must increase "
                     "below the columns)");
        return RL_BADARG;
    }
    /* the outlier columns first, row by row: NaN and infinity */
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < k; c++)
            if (!isfinite(x[t * cols + idx[c]])) {
                if (fault)
                    fault->row = t, fault->where = idx[c];
                if (msg && msglen)
                    snprintf(msg, msglen, "matmul: a NaN or infinity in outlier column %zu of "
                             "row %zu", idx[c], t);
                return RL_NONFINITE;
            }
    if (!n || !rows)
        return RL_OK;
    float *xin = malloc(n * (cols + k + 2 * rows) * sizeof *xin);
    if (!xin) {
        if (msg && msglen)
            snprintf(msg, msglen, "matmul: out of memory for the activations");
        return RL_NOMEM;
    }
    float *xo = xin + n * cols, *f = xo + n * k, *g = f + n * rows;
    memcpy(xin, x, n * cols * sizeof *xin);
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < k; c++) {
            xo[t * k + c] = xin[t * cols + idx[c]];
            xin[t * cols + idx[c]] = 0.0f;
        }
    rl_status st = rl_matmul(RL_WT_Q8_0, q, rows, cols, xin, n, f, act, msg, msglen, fault);
    if (st == RL_OK && k)
        st = rl_matmul(RL_WT_F32, wout, rows, k, xo, n, g, act, msg, msglen, fault);
    if (st == RL_OK) /* the int8 part first */
        for (size_t i = 0; i < n * rows; i++)
            y[i] = k ? f[i] + g[i] : f[i];
    free(xin);
    return st;
}
