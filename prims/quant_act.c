/* quant_act.c - the activation rows the row products of quant_dot.c read
 * besides Q8_0: Q8_1 (Q4_1 and Q5_1's, a block's quants with their sum)
 * and Q8_K (the 256-value types', with the sums of each 16), quantized as
 * ggml's quantize_row_q8_1_ref and quantize_row_q8_K_ref do (declared in
 * quants.h; doc/products.md §4, §5).  Compiled with -ffp-contract=off, as
 * the other quantizers are. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "prims/q8.h"
#include "prims/quant_internal.h"
#include "prims/quants.h"

void rl_quantize_q8_1_ref(const float *x, void *y, size_t nb) {
    rl_block_q8_1 *yb = y;
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127, id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        yb[b].d = rl_f2h(d);
        for (int j = 0; j < 32; j++) {
            yb[b].qs[j] = (int8_t)roundf(xb[j] * id);
            sum += yb[b].qs[j];
        }
        yb[b].s = rl_f2h((float)sum * d);
    }
}

void rl_quantize_q8_K_ref(const float *x, void *y, size_t nb) {
    rl_block_q8_K *yb = y;
    for (size_t b = 0; b < nb; b++, x += 256) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[j]) > amax)
                amax = fabsf(x[j]), max = x[j];
        if (amax == 0.0f) {
            memset(&yb[b], 0, sizeof yb[b]); /* ggml leaves bsums as they were */
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < 256; j++)
            yb[b].qs[j] = (int8_t)rl_imin(127, rl_nearest_int(iscale * x[j]));
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++)
                sum += yb[b].qs[16 * j + i];
            yb[b].bsums[j] = (int16_t)sum;
        }
        yb[b].d = 1 / iscale;
    }
}
