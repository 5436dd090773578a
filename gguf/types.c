/* types.c - the tables behind gguf.h: status names, GGUF value types, and
 * ggml's tensor types with their block geometry, plus row conversions to and
 * from f32.
 *
 * The ggml table follows enum ggml_type and the block structs of
 * ggml-common.h (QK_K = 256 for the K and I quants).  Ids 40..42 (NVFP4,
 * Q1_0, Q2_0) are the newest upstream additions; a reader that knows them
 * costs nothing for files that do not use them.
 */
#include "gguf/gguf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gguf/numfmt.h"

static const char *const status_names[RL_GGUF_STATUS_COUNT] = {
    [RL_GGUF_OK] = "ok",
    [RL_GGUF_E_IO] = "io-error",
    [RL_GGUF_E_NOMEM] = "out-of-memory",
    [RL_GGUF_E_ARG] = "bad-argument",
    [RL_GGUF_E_TYPE] = "wrong-type",
    [RL_GGUF_E_STATE] = "writer-state",
    [RL_GGUF_E_TRUNCATED] = "truncated",
    [RL_GGUF_E_MAGIC] = "bad-magic",
    [RL_GGUF_E_VERSION] = "unsupported-version",
    [RL_GGUF_E_KV_COUNT] = "bad-kv-count",
    [RL_GGUF_E_TENSOR_COUNT] = "bad-tensor-count",
    [RL_GGUF_E_KEY_LENGTH] = "bad-key-length",
    [RL_GGUF_E_KEY_EMPTY] = "empty-key",
    [RL_GGUF_E_KEY_DUPLICATE] = "duplicate-key",
    [RL_GGUF_E_VALUE_TYPE] = "bad-value-type",
    [RL_GGUF_E_STRING_LENGTH] = "bad-string-length",
    [RL_GGUF_E_ARRAY_LENGTH] = "bad-array-length",
    [RL_GGUF_E_ARRAY_DEPTH] = "array-too-deep",
    [RL_GGUF_E_BOOL] = "bad-bool",
    [RL_GGUF_E_ALIGNMENT_TYPE] = "bad-alignment-type",
    [RL_GGUF_E_ALIGNMENT] = "bad-alignment",
    [RL_GGUF_E_TENSOR_NAME_EMPTY] = "empty-tensor-name",
    [RL_GGUF_E_TENSOR_NAME_LENGTH] = "tensor-name-too-long",
    [RL_GGUF_E_TENSOR_NAME_DUPLICATE] = "duplicate-tensor-name",
    [RL_GGUF_E_N_DIMS] = "bad-n-dims",
    [RL_GGUF_E_DIM_NEGATIVE] = "negative-dimension",
    [RL_GGUF_E_DIM_OVERFLOW] = "dimension-overflow",
    [RL_GGUF_E_GGML_TYPE] = "unknown-ggml-type",
    [RL_GGUF_E_GGML_TYPE_REMOVED] = "removed-ggml-type",
    [RL_GGUF_E_BLOCK_SIZE] = "partial-block",
    [RL_GGUF_E_SIZE_OVERFLOW] = "size-overflow",
    [RL_GGUF_E_TENSOR_ALIGNMENT] = "misaligned-tensor",
    [RL_GGUF_E_TENSOR_BOUNDS] = "tensor-past-eof",
    [RL_GGUF_E_TENSOR_OVERLAP] = "overlapping-tensors",
    [RL_GGUF_E_NAME_NUL] = "nul-in-name",
};

const char *rl_gguf_status_name(rl_gguf_status st) {
    if ((unsigned)st >= RL_GGUF_STATUS_COUNT || !status_names[st])
        return "unknown-status";
    return status_names[st];
}

static const struct {
    const char *name;
    uint32_t size;
} value_types[RL_GGUF_TYPE_COUNT] = {
    [RL_GGUF_TYPE_U8] = {"u8", 1},      [RL_GGUF_TYPE_I8] = {"i8", 1},
    [RL_GGUF_TYPE_U16] = {"u16", 2},    [RL_GGUF_TYPE_I16] = {"i16", 2},
    [RL_GGUF_TYPE_U32] = {"u32", 4},    [RL_GGUF_TYPE_I32] = {"i32", 4},
    [RL_GGUF_TYPE_F32] = {"f32", 4},    [RL_GGUF_TYPE_BOOL] = {"bool", 1},
    [RL_GGUF_TYPE_STRING] = {"string", 0}, [RL_GGUF_TYPE_ARRAY] = {"array", 0},
    [RL_GGUF_TYPE_U64] = {"u64", 8},    [RL_GGUF_TYPE_I64] = {"i64", 8},
    [RL_GGUF_TYPE_F64] = {"f64", 8},
};

const char *rl_gguf_type_name(uint32_t type) {
    return type < RL_GGUF_TYPE_COUNT ? value_types[type].name : NULL;
}

uint32_t rl_gguf_type_size(uint32_t type) {
    return type < RL_GGUF_TYPE_COUNT ? value_types[type].size : 0;
}

/* ggml's types: what reading a file needs of every id (prims/type_traits.c adds
 * the functions of the types rontolisp computes with).  A removed id keeps
 * its old name and has block 0.  The types rontolisp reads and writes take
 * their bytes from their block structs (gguf/blocks.h); the others are
 * counted from ggml-common.h's. */
static const struct {
    const char *name;
    uint32_t block;   /* elements per block */
    uint32_t bytes;   /* bytes per block */
} ggml_types[RL_GGUF_GGML_TYPE_COUNT] = {
    [0] = {"F32", 1, 4},
    [1] = {"F16", 1, 2},
    [2] = {"Q4_0", RL_GGUF_QK_LEGACY, sizeof(rl_gguf_block_q4_0)},
    [3] = {"Q4_1", RL_GGUF_QK_LEGACY, sizeof(rl_gguf_block_q4_1)},
    [4] = {"Q4_2", 0, 0},                /* removed */
    [5] = {"Q4_3", 0, 0},                /* removed */
    [6] = {"Q5_0", RL_GGUF_QK_LEGACY, sizeof(rl_gguf_block_q5_0)},
    [7] = {"Q5_1", RL_GGUF_QK_LEGACY, sizeof(rl_gguf_block_q5_1)},
    [8] = {"Q8_0", RL_GGUF_QK8_0, sizeof(rl_gguf_block_q8_0)},
    [9] = {"Q8_1", 32, 2 + 2 + 32},      /* d, s, 32 int8 */
    [10] = {"Q2_K", RL_GGUF_QK_K, sizeof(rl_gguf_block_q2_K)},
    [11] = {"Q3_K", RL_GGUF_QK_K, sizeof(rl_gguf_block_q3_K)},
    [12] = {"Q4_K", RL_GGUF_QK_K, sizeof(rl_gguf_block_q4_K)},
    [13] = {"Q5_K", RL_GGUF_QK_K, sizeof(rl_gguf_block_q5_K)},
    [14] = {"Q6_K", RL_GGUF_QK_K, sizeof(rl_gguf_block_q6_K)},
    [15] = {"Q8_K", 256, 4 + 256 + 32},  /* f32 d, quants, i16 block sums */
    [16] = {"IQ2_XXS", 256, 2 + 64},
    [17] = {"IQ2_XS", 256, 2 + 64 + 8},
    [18] = {"IQ3_XXS", 256, 2 + 96},
    [19] = {"IQ1_S", 256, 2 + 32 + 16},
    [20] = {"IQ4_NL", RL_GGUF_QK_LEGACY, sizeof(rl_gguf_block_iq4_nl)},
    [21] = {"IQ3_S", 256, 2 + 64 + 8 + 32 + 4},
    [22] = {"IQ2_S", 256, 2 + 64 + 8 + 8},
    [23] = {"IQ4_XS", RL_GGUF_QK_K, sizeof(rl_gguf_block_iq4_xs)},
    [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 32 + 16 + 8},
    [30] = {"BF16", 1, 2},
    [31] = {"Q4_0_4_4", 0, 0},           /* removed from GGUF files */
    [32] = {"Q4_0_4_8", 0, 0},
    [33] = {"Q4_0_8_8", 0, 0},
    [34] = {"TQ1_0", 256, 48 + 4 + 2},
    [35] = {"TQ2_0", 256, 64 + 2},
    [36] = {"IQ4_NL_4_4", 0, 0},         /* removed */
    [37] = {"IQ4_NL_4_8", 0, 0},
    [38] = {"IQ4_NL_8_8", 0, 0},
    [39] = {"MXFP4", 32, 1 + 16},        /* e8m0 scale, 32 nibbles */
    [40] = {"NVFP4", 64, 4 + 32},        /* 4 ue4m3 scales, 64 nibbles */
    [41] = {"Q1_0", 128, 2 + 16},
    [42] = {"Q2_0", 64, 2 + 16},
};

const char *rl_gguf_ggml_type_name(uint32_t id) {
    return id < RL_GGUF_GGML_TYPE_COUNT ? ggml_types[id].name : NULL;
}

int rl_gguf_ggml_type_known(uint32_t id) {
    return id < RL_GGUF_GGML_TYPE_COUNT && ggml_types[id].block != 0;
}

int rl_gguf_ggml_type_removed(uint32_t id) {
    return id < RL_GGUF_GGML_TYPE_COUNT && ggml_types[id].block == 0;
}

uint32_t rl_gguf_ggml_block_size(uint32_t id) {
    return id < RL_GGUF_GGML_TYPE_COUNT ? ggml_types[id].block : 0;
}

uint32_t rl_gguf_ggml_block_bytes(uint32_t id) {
    return id < RL_GGUF_GGML_TYPE_COUNT ? ggml_types[id].bytes : 0;
}

static rl_gguf_status say(rl_gguf_status st, char *msg, size_t msgsz, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static rl_gguf_status say(rl_gguf_status st, char *msg, size_t msgsz, const char *fmt, ...) {
    if (msg && msgsz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msgsz, fmt, ap);
        va_end(ap);
    }
    return st;
}

rl_gguf_status rl_gguf_tensor_check(uint32_t id, uint32_t n_dims, const int64_t *ne,
                                    uint64_t *bytes, uint32_t *bad_dim, char *msg,
                                    size_t msgsz) {
    if (!ne || !bytes)
        return say(RL_GGUF_E_ARG, msg, msgsz, "NULL argument");
    if (n_dims == 0 || n_dims > RL_GGUF_MAX_DIMS)
        return say(RL_GGUF_E_N_DIMS, msg, msgsz,
                   "n_dims %" PRIu32 ": expected 1 to 4", n_dims);
    /* Element count, one dimension at a time: never multiply past
     * INT64_MAX, never divide by zero. */
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t e = (uint64_t)ne[d];
        if (bad_dim)
            *bad_dim = d;
        if (ne[d] < 0)
            return say(RL_GGUF_E_DIM_NEGATIVE, msg, msgsz,
                       "ne[%" PRIu32 "] = %" PRId64 ": expected >= 0", d, ne[d]);
        if (e != 0 && n > (uint64_t)INT64_MAX / e)
            return say(RL_GGUF_E_DIM_OVERFLOW, msg, msgsz,
                       "ne[%" PRIu32 "] = %" PRId64 " makes the element count overflow:"
                       " expected a product <= INT64_MAX", d, ne[d]);
        n *= e;
    }
    if (!rl_gguf_ggml_type_known(id)) {
        if (rl_gguf_ggml_type_removed(id))
            return say(RL_GGUF_E_GGML_TYPE_REMOVED, msg, msgsz,
                       "ggml type %" PRIu32 " (%s) was removed from ggml: expected a"
                       " current type", id, ggml_types[id].name);
        return say(RL_GGUF_E_GGML_TYPE, msg, msgsz,
                   "unknown ggml type id %" PRIu32 ": expected one of ggml's types"
                   " (below %d)", id, RL_GGUF_GGML_TYPE_COUNT);
    }
    uint64_t blk = ggml_types[id].block, bb = ggml_types[id].bytes;
    if ((uint64_t)ne[0] % blk != 0)
        return say(RL_GGUF_E_BLOCK_SIZE, msg, msgsz,
                   "row length ne[0] = %" PRId64 ": expected a multiple of the %s block"
                   " size %" PRIu64, ne[0], ggml_types[id].name, blk);
    /* ne[0] is a multiple of the block, so blocks = n / blk exactly. */
    uint64_t blocks = n / blk;
    if (blocks != 0 && bb > (uint64_t)INT64_MAX / blocks)
        return say(RL_GGUF_E_SIZE_OVERFLOW, msg, msgsz,
                   "%" PRIu64 " blocks of %" PRIu64 " bytes: expected a byte"
                   " size <= INT64_MAX", blocks, bb);
    *bytes = blocks * bb;
    return RL_GGUF_OK;
}

rl_gguf_status rl_gguf_tensor_bytes(uint32_t id, uint32_t n_dims, const int64_t *ne,
                                    uint64_t *bytes, char *msg, size_t msgsz) {
    return rl_gguf_tensor_check(id, n_dims, ne, bytes, NULL, msg, msgsz);
}

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

void rl_gguf_q8_0_to_f32(const void *x, uint64_t nblocks, float *y) {
    const uint8_t *s = x;
    for (uint64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = s + b * sizeof(rl_gguf_block_q8_0);
        float d = rl_gguf_f16_to_f32(ld16(blk));
        for (int j = 0; j < RL_GGUF_QK8_0; j++)
            y[b * RL_GGUF_QK8_0 + j] = (float)(int8_t)blk[2 + j] * d;
    }
}

rl_gguf_status rl_gguf_row_to_f32(uint32_t id, const void *src, float *dst, uint64_t n) {
    const uint8_t *s = src;
    if (!src || !dst)
        return n == 0 ? RL_GGUF_OK : RL_GGUF_E_ARG;
    switch (id) {
    case RL_GGUF_GGML_F32:
        memcpy(dst, s, n * 4);
        return RL_GGUF_OK;
    case RL_GGUF_GGML_F16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = rl_gguf_f16_to_f32(ld16(s + 2 * i));
        return RL_GGUF_OK;
    case RL_GGUF_GGML_BF16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = rl_gguf_bf16_to_f32(ld16(s + 2 * i));
        return RL_GGUF_OK;
    case RL_GGUF_GGML_Q8_0:
        if (n % RL_GGUF_QK8_0)
            return RL_GGUF_E_BLOCK_SIZE;
        rl_gguf_q8_0_to_f32(s, n / RL_GGUF_QK8_0, dst);
        return RL_GGUF_OK;
    default:
        return RL_GGUF_E_TYPE;
    }
}

rl_gguf_status rl_gguf_row_from_f32(uint32_t id, const float *src, void *dst, uint64_t n) {
    uint8_t *d = dst;
    if (!src || !dst)
        return n == 0 ? RL_GGUF_OK : RL_GGUF_E_ARG;
    switch (id) {
    case RL_GGUF_GGML_F32:
        memcpy(d, src, n * 4);
        return RL_GGUF_OK;
    case RL_GGUF_GGML_F16:
    case RL_GGUF_GGML_BF16:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h = id == RL_GGUF_GGML_F16 ? rl_gguf_f32_to_f16(src[i])
                                                 : rl_gguf_f32_to_bf16(src[i]);
            d[2 * i] = (uint8_t)h;
            d[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return RL_GGUF_OK;
    default:
        return RL_GGUF_E_TYPE;
    }
}
