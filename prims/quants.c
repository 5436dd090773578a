/* quants.c - the checked entry points over llama.cpp's legacy, K-quant
 * and IQ4 types (see quants.h).  The arithmetic is in quant_legacy.c,
 * quant_k.c and quant_iq4.c, their rows in prims/type_traits.c; this file only
 * checks arguments, picks the kernel from the row, and looks at the scales
 * the kernel wrote.
 */
#include "prims/quants.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/nn.h"

const rl_type_traits *rl_quant_traits_of(uint32_t ggml_type) {
    const rl_type_traits *t = rl_type_traits_of(ggml_type);
    return t && t->family == RL_FAMILY_QUANT ? t : NULL;
}

size_t rl_quant_bytes(uint32_t ggml_type, size_t n) {
    return rl_quant_traits_of(ggml_type) ? rl_type_bytes(ggml_type, n) : 0;
}

/* 1 if one of the block's binary16 scales is infinite (the only way a
 * finite input gives a non-finite scale). */
static int rl_quant_block_overflows(const rl_type_traits *t, const unsigned char *blk) {
    for (int k = 0; k < 2; k++) {
        if (t->f16_at[k] < 0)
            continue;
        uint16_t h;
        memcpy(&h, blk + t->f16_at[k], sizeof h);
        if ((h & 0x7c00u) == 0x7c00u)
            return 1;
    }
    return 0;
}

rl_status rl_quantize(uint32_t ggml_type, const float *x, size_t n, void *y,
                            size_t *where) {
    const rl_type_traits *t = rl_quant_traits_of(ggml_type);
    if (!t)
        return RL_UNSUPPORTED;
    size_t block = rl_type_block(ggml_type), bytes = rl_type_bytes(ggml_type, block);
    if (n % block)
        return RL_BADLEN;
    if (n && (!x || !y))
        return RL_BADARG;
    size_t bad = rl_first_non_finite_f32(x, n);
    if (bad < n) {
        if (where)
            *where = bad;
        return RL_NONFINITE;
    }
    size_t nb = n / block;
    for (size_t i = 0; i < n; i++) {
        if (fabsf(x[i]) > t->limit) {
            if (where)
                *where = i / block;
            return RL_OVERFLOW;
        }
    }
    t->from_float(x, y, nb);
    const unsigned char *b = y;
    for (size_t i = 0; i < nb; i++) {
        if (rl_quant_block_overflows(t, b + i * bytes)) {
            if (where)
                *where = i;
            return RL_OVERFLOW;
        }
    }
    return RL_OK;
}

rl_status rl_dequantize(uint32_t ggml_type, const void *x, size_t n, float *y) {
    const rl_type_traits *t = rl_quant_traits_of(ggml_type);
    if (!t)
        return RL_UNSUPPORTED;
    size_t block = rl_type_block(ggml_type);
    if (n % block)
        return RL_BADLEN;
    if (n && (!x || !y))
        return RL_BADARG;
    t->to_float(x, y, n / block);
    return RL_OK;
}
