/* test_types.c - the tables behind gguf.h (gguf/types.c): status names,
 * ggml's tensor types with their block geometry against ggml's own table,
 * tensor sizes through the shared check, GGUF value type names. */
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tests/c/check.h"

static void test_tables(void) {
    /* Status names: all distinct, none unknown. */
    for (int a = 0; a < RL_GGUF_STATUS_COUNT; a++) {
        const char *na = rl_gguf_status_name((rl_gguf_status)a);
        CHECK_EACH(strcmp(na, "unknown-status"), "status %d has no name", a);
        for (int b = 0; b < a; b++)
            CHECK_EACH(strcmp(na, rl_gguf_status_name((rl_gguf_status)b)),
                       "statuses %d and %d are both %s", b, a, na);
    }
    CHECK(!strcmp(rl_gguf_status_name(RL_GGUF_STATUS_COUNT), "unknown-status"));

    /* ggml's type table (block size, bytes per block), every id. */
    static const struct {
        uint32_t id, blk, bytes;
        const char *name;
    } table[] = {
        {0, 1, 4, "F32"}, {1, 1, 2, "F16"}, {2, 32, 18, "Q4_0"}, {3, 32, 20, "Q4_1"},
        {4, 0, 0, "Q4_2"}, {5, 0, 0, "Q4_3"}, {6, 32, 22, "Q5_0"}, {7, 32, 24, "Q5_1"},
        {8, 32, 34, "Q8_0"}, {9, 32, 36, "Q8_1"}, {10, 256, 84, "Q2_K"}, {11, 256, 110, "Q3_K"},
        {12, 256, 144, "Q4_K"}, {13, 256, 176, "Q5_K"}, {14, 256, 210, "Q6_K"},
        {15, 256, 292, "Q8_K"}, {16, 256, 66, "IQ2_XXS"}, {17, 256, 74, "IQ2_XS"},
        {18, 256, 98, "IQ3_XXS"}, {19, 256, 50, "IQ1_S"}, {20, 32, 18, "IQ4_NL"},
        {21, 256, 110, "IQ3_S"}, {22, 256, 82, "IQ2_S"}, {23, 256, 136, "IQ4_XS"},
        {24, 1, 1, "I8"}, {25, 1, 2, "I16"}, {26, 1, 4, "I32"}, {27, 1, 8, "I64"},
        {28, 1, 8, "F64"}, {29, 256, 56, "IQ1_M"}, {30, 1, 2, "BF16"}, {31, 0, 0, "Q4_0_4_4"},
        {32, 0, 0, "Q4_0_4_8"}, {33, 0, 0, "Q4_0_8_8"}, {34, 256, 54, "TQ1_0"},
        {35, 256, 66, "TQ2_0"}, {36, 0, 0, "IQ4_NL_4_4"}, {37, 0, 0, "IQ4_NL_4_8"},
        {38, 0, 0, "IQ4_NL_8_8"}, {39, 32, 17, "MXFP4"}, {40, 64, 36, "NVFP4"},
        {41, 128, 18, "Q1_0"}, {42, 64, 18, "Q2_0"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        uint32_t id = table[i].id;
        const char *name = rl_gguf_ggml_type_name(id);
        CHECK_EACH(rl_gguf_ggml_block_size(id) == table[i].blk &&
                       rl_gguf_ggml_block_bytes(id) == table[i].bytes && name &&
                       strcmp(name, table[i].name) == 0 &&
                       rl_gguf_ggml_type_known(id) == (table[i].blk != 0) &&
                       rl_gguf_ggml_type_removed(id) == (table[i].blk == 0),
                   "type %u: %s, block %u of %u bytes, known %d, removed %d; want %s, %u, %u",
                   (unsigned)id, name ? name : "(null)", (unsigned)rl_gguf_ggml_block_size(id),
                   (unsigned)rl_gguf_ggml_block_bytes(id), (int)rl_gguf_ggml_type_known(id),
                   (int)rl_gguf_ggml_type_removed(id), table[i].name, (unsigned)table[i].blk,
                   (unsigned)table[i].bytes);
    }
    CHECK(rl_gguf_ggml_type_name(43) == NULL && !rl_gguf_ggml_type_known(43) &&
          !rl_gguf_ggml_type_removed(43) && rl_gguf_ggml_block_size(1000) == 0);
    CHECK_EQ_U(sizeof table / sizeof table[0], RL_GGUF_GGML_TYPE_COUNT);

    /* Tensor sizes through the shared check. */
    uint64_t by;
    int64_t q4k[2] = {4096, 11008}, odd[1] = {100}, zero[2] = {0, 7}, neg[1] = {-1};
    CHECK(rl_gguf_tensor_bytes(RL_GGUF_GGML_Q4_K, 2, q4k, &by, NULL, 0) == RL_GGUF_OK &&
          by == 4096ull / 256 * 144 * 11008);
    CHECK(rl_gguf_tensor_bytes(RL_GGUF_GGML_Q8_0, 1, odd, &by, NULL, 0) == RL_GGUF_E_BLOCK_SIZE &&
          rl_gguf_tensor_bytes(RL_GGUF_GGML_F32, 1, neg, &by, NULL, 0) == RL_GGUF_E_DIM_NEGATIVE &&
          rl_gguf_tensor_bytes(RL_GGUF_GGML_Q8_0, 2, zero, &by, NULL, 0) == RL_GGUF_OK && by == 0);
    {
        /* The reader places a bad dimension by the index the check names. */
        int64_t dims[3] = {32, 4, -2}, big[2] = {1ll << 40, 1ll << 30};
        uint32_t bad_dim = 99;
        char why[200];
        CHECK(rl_gguf_tensor_check(RL_GGUF_GGML_F32, 3, dims, &by, &bad_dim, why, sizeof why) ==
                  RL_GGUF_E_DIM_NEGATIVE &&
              bad_dim == 2 && strstr(why, "ne[2] = -2") != NULL);
        CHECK(rl_gguf_tensor_check(RL_GGUF_GGML_F32, 2, big, &by, &bad_dim, why, sizeof why) ==
                  RL_GGUF_E_DIM_OVERFLOW &&
              bad_dim == 1);
    }

    /* Value type names are the JSON names. */
    static const char *const vt[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                     "bool", "string", "array", "u64", "i64", "f64"};
    for (uint32_t t = 0; t < RL_GGUF_TYPE_COUNT; t++)
        CHECK_EACH(strcmp(rl_gguf_type_name(t), vt[t]) == 0, "value type %u: %s, want %s",
                   (unsigned)t, rl_gguf_type_name(t), vt[t]);
    CHECK(rl_gguf_type_name(13) == NULL);
}

int main(void) {
    CHECK_CASE(test_tables());
    return check_report("types");
}
