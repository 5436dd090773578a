// fuzz_safetensors.c - libFuzzer target for the safetensors reader.
//
// Build and run from the repository root (clang 14 or later):
//
//   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz/fuzz_safetensors.c \
//         gguf/safetensors.c -ljansson -o build/fuzz_safetensors
//   build/fuzz_safetensors -max_total_time=300 build/fuzz-st-corpus
//
/* Each input goes through rl_st_parse.  A refusal must come with a message
 * "at byte N:" and N inside the input; an accepted file is walked: every
 * tensor's bytes lie inside the input, their size is the dtype's size times
 * the shape's element count, and no two non-empty tensors overlap. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/safetensors.h"

#define MUST(c)                                                              \
    do {                                                                     \
        if (!(c))                                                            \
            __builtin_trap();                                                \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char msg[RL_ST_MSG_SIZE];
    uint64_t off = 0;
    rl_st_file *f = NULL;
    rl_st_status st = rl_st_parse(size ? data : (const uint8_t *)"", size, &f, msg, sizeof msg, &off);
    if (st != RL_ST_OK) {
        MUST(f == NULL);
        MUST(!strncmp(msg, "at byte ", 8) && memchr(msg, 0, sizeof msg));
        MUST(off <= size);
        return 0;
    }
    for (uint64_t i = 0; i < rl_st_tensor_count(f); i++) {
        const rl_st_tensor *t = rl_st_tensor_at(f, i);
        uint64_t count = 1;
        volatile uint8_t sink = 0;
        for (uint32_t d = 0; d < t->n_dims; d++)
            count *= (uint64_t)t->shape[d];
        MUST(count * rl_st_dtype_size(t->dtype) == t->nbytes);
        MUST(t->begin <= size && t->nbytes <= size - t->begin);
        for (uint64_t k = 0; k < t->nbytes; k++)
            sink ^= ((const uint8_t *)rl_st_tensor_data(f, i))[k];
        for (uint64_t j = 0; j < i; j++) {
            const rl_st_tensor *u = rl_st_tensor_at(f, j);
            if (t->nbytes && u->nbytes)
                MUST(t->begin + t->nbytes <= u->begin || u->begin + u->nbytes <= t->begin);
        }
        (void)sink;
    }
    for (uint64_t i = 0; i < rl_st_metadata_count(f); i++)
        MUST(rl_st_metadata_key(f, i) && rl_st_metadata_value(f, i));
    rl_st_close(f);
    return 0;
}
