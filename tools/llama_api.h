/* llama_api.h - the few structures of llama.cpp's C interface that our
 * programs pass by value when they dlopen libllama (tools/llama_embed.c,
 * tools/llama_tokenize.c, tools/bench_quantize.c, tools/llama_quantize.c,
 * tests/c/test_llama_model.c),
 * written from include/llama.h of llama.cpp v0.5.0 (the npm package @node-llama-cpp/linux-x64@3.22.1, the release
 * that made tests/golden/).  They must match that release field for field:
 * a struct passed or returned by value with another layout corrupts the
 * call silently, so users check the defaults llama.cpp answers before
 * trusting them.  Also the table of the functions they call, with one
 * resolver for it.  No llama.cpp code is used.
 */
#ifndef RL_LLAMA_API_H
#define RL_LLAMA_API_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ll_model;
struct ll_context;

/* struct llama_model_params, field for field. */
struct ll_model_params {
    void *devices;
    const void *tensor_buft_overrides;
    int32_t n_gpu_layers;
    int split_mode, load_mode, lazy_mode;
    int32_t main_gpu;
    const float *tensor_split;
    bool (*progress_callback)(float progress, void *user_data);
    void *progress_callback_user_data;
    const void *kv_overrides;
    bool vocab_only, check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp;
};

/* struct llama_context_params, field for field. */
struct ll_context_params {
    uint32_t n_ctx, n_batch, n_ubatch, n_seq_max, n_rs_seq, n_outputs_max,
        n_outputs_max_per_seq;
    int32_t n_threads, n_threads_batch;
    int ctx_type, rope_scaling_type, pooling_type, attention_type, flash_attn_type;
    float rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor, yarn_beta_fast,
        yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    float defrag_thold;
    void *cb_eval, *cb_eval_user_data;
    int type_k, type_v;
    void *abort_callback, *abort_callback_data;
    bool embeddings, offload_kqv, no_perf, op_offload, swa_full, kv_unified;
    void *samplers;
    size_t n_samplers;
    struct ll_context *ctx_other;
};

/* struct llama_batch. */
struct ll_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
};

/* struct llama_model_quantize_params, field for field. */
struct ll_quantize_params {
    int32_t nthread;
    int ftype;                /* enum llama_ftype */
    int output_tensor_type;   /* enum ggml_type; LL_GGML_TYPE_COUNT = unset */
    int token_embedding_type;
    bool allow_requantize, quantize_output_tensor, only_copy, pure, keep_split, dry_run;
    const void *imatrix, *kv_overrides, *tt_overrides;
    const int32_t *prune_layers;
    size_t max_buf_size;
};

#define LL_FTYPE_MOSTLY_Q8_0 7 /* enum llama_ftype */
#define LL_GGML_TYPE_COUNT 43  /* enum ggml_type */

#define LL_POOLING_NONE 0        /* enum llama_pooling_type */
#define LL_FLASH_ATTN_DISABLED 0 /* enum llama_flash_attn_type */

typedef void (*ll_log_fn)(int level, const char *text, void *user); /* ggml_log_callback */

/* The functions our programs call, from libllama and libggml. */
struct ll_api {
    void (*load_all_from_path)(const char *dir); /* ggml_backend_load_all_from_path */
    void (*ggml_log_set)(ll_log_fn, void *user);
    void (*log_set)(ll_log_fn, void *user);      /* llama_log_set */
    void (*backend_init)(void);
    struct ll_model_params (*model_default_params)(void);
    struct ll_context_params (*context_default_params)(void);
    struct ll_model *(*model_load)(const char *path, struct ll_model_params params);
    void (*model_free)(struct ll_model *);
    int32_t (*n_embd)(const struct ll_model *);
    struct ll_context *(*init_from_model)(struct ll_model *, struct ll_context_params params);
    void (*free)(struct ll_context *);
    struct ll_batch (*batch_get_one)(int32_t *tokens, int32_t n_tokens);
    int32_t (*encode)(struct ll_context *, struct ll_batch batch);
    float *(*get_embeddings_ith)(struct ll_context *, int32_t i);
    float *(*get_embeddings_seq)(struct ll_context *, int32_t seq_id);
    float *(*get_embeddings)(struct ll_context *);
    struct ll_quantize_params (*model_quantize_default_params)(void);
    uint32_t (*model_quantize)(const char *in, const char *out,
                               const struct ll_quantize_params *params);
};


/* The folder of llama.cpp's libraries into DIR (SIZE bytes): the one
 * RL_LLAMA_LIB names, or the folder of the file it names, else
 * build/cache/llama (where tests/fetch-llama-lib.sh puts them).  Answers -1,
 * DIR untouched, when RL_LLAMA_LIB does not fit. */
static inline int ll_lib_dir(char *dir, size_t size) {
    const char *lib = getenv("RL_LLAMA_LIB");
    struct stat st;
    if (!lib || !*lib) {
        snprintf(dir, size, "%s", "build/cache/llama");
        return 0;
    }
    if (strlen(lib) >= size)
        return -1;
    snprintf(dir, size, "%s", lib);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dir, size, ".");
    }
    return 0;
}

/* Fill API from the dlopen handles of libllama and libggml (whose
 * dependencies, libggml-base among them, dlsym searches too).  Answers NULL,
 * or the name of the first symbol the libraries lack. */
static inline const char *ll_api_resolve(struct ll_api *api, void *llama, void *ggml)
{
    const char *missing = NULL;
#define LL_SYM(lib, field, name)                                        \
    do {                                                                \
        if (!(*(void **)&api->field = dlsym(lib, name)) && !missing)    \
            missing = name;                                             \
    } while (0)
    LL_SYM(ggml, load_all_from_path, "ggml_backend_load_all_from_path");
    LL_SYM(ggml, ggml_log_set, "ggml_log_set");
    LL_SYM(llama, log_set, "llama_log_set");
    LL_SYM(llama, backend_init, "llama_backend_init");
    LL_SYM(llama, model_default_params, "llama_model_default_params");
    LL_SYM(llama, context_default_params, "llama_context_default_params");
    LL_SYM(llama, model_load, "llama_model_load_from_file");
    LL_SYM(llama, model_free, "llama_model_free");
    LL_SYM(llama, n_embd, "llama_model_n_embd");
    LL_SYM(llama, init_from_model, "llama_init_from_model");
    LL_SYM(llama, free, "llama_free");
    LL_SYM(llama, batch_get_one, "llama_batch_get_one");
    LL_SYM(llama, encode, "llama_encode");
    LL_SYM(llama, get_embeddings_ith, "llama_get_embeddings_ith");
    LL_SYM(llama, get_embeddings_seq, "llama_get_embeddings_seq");
    LL_SYM(llama, get_embeddings, "llama_get_embeddings");
    LL_SYM(llama, model_quantize_default_params, "llama_model_quantize_default_params");
    LL_SYM(llama, model_quantize, "llama_model_quantize");
#undef LL_SYM
    return missing;
}

/* A ggml_log_callback that drops every message. */
static inline void ll_quiet(int level, const char *text, void *user)
{
    (void)level; (void)text; (void)user;
}

/* dlopen DIR/libggml.v0.5.0.so and DIR/libllama.v0.5.0.so (the libraries
 * tests/fetch-llama-lib.sh fetches) and fill API; *LLAMA gets libllama's
 * handle (for a program's further symbols).  Answers 0, or -1 with the
 * reason in MSG. */
static inline int ll_api_open(struct ll_api *api, const char *dir, void **llama, char *msg,
                              size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml.v0.5.0.so", dir);
    void *ggml = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libllama.v0.5.0.so", dir);
    *llama = ggml ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!*llama) {
        snprintf(msg, cap, "cannot load llama.cpp from %s: %s", dir, dlerror());
        return -1;
    }
    const char *missing = ll_api_resolve(api, *llama, ggml);
    if (missing) {
        snprintf(msg, cap, "llama.cpp in %s lacks %s", dir, missing);
        return -1;
    }
    return 0;
}

#endif
