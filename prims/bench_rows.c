/* bench_rows.c - one product in a tensor's own type, ours and ggml's, for
 * `rontolisp bench FILE' (see bench_rows.h).  ggml's side is what its CPU
 * backend runs for one activation row: from_float of the vec_dot_type,
 * then vec_dot row by row (nrc 1). */
#include "prims/bench_rows.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "prims/bench.h"
#include "prims/matmul.h"
#include "prims/q8.h"
#include "prims/quants.h"
#include "prims/type_traits.h"

int rl_bench_rows_type(uint32_t type) {
    const rl_type_traits *tr = rl_type_traits_of(type);
    return type == RL_GGUF_GGML_F32 || type == RL_GGUF_GGML_Q8_0 || (tr && tr->vec_dot);
}

size_t rl_bench_rows_act_bytes(uint32_t type, size_t cols) {
    const rl_type_traits *tr = rl_type_traits_of(type);
    if (!tr || !tr->vec_dot)
        return 0;
    return cols / rl_gguf_ggml_block_size(tr->vec_dot_type) *
           rl_gguf_ggml_block_bytes(tr->vec_dot_type);
}

/* The activation row of xtype for the n floats at x: Q8_0 on path (every
 * path gives the reference's bytes, prims/q8.h), Q8_1 and Q8_K by their
 * one quantizer. */
static rl_status rl_bench_rows_act(uint32_t xtype, const float *x, size_t n, void *xq,
                                   rl_path path) {
    if (xtype == RL_GGUF_GGML_Q8_1)
        rl_quantize_q8_1_ref(x, xq, n / 32);
    else if (xtype == RL_GGUF_GGML_Q8_K)
        rl_quantize_q8_K_ref(x, xq, n / 256);
    else
        return rl_q8_quantize_path(RL_SRC_F32, x, n, xq, NULL, path);
    return RL_OK;
}

rl_status rl_bench_rows_once(uint32_t type, const void *w, size_t rows, size_t cols,
                             const float *x, void *xq, float *y, rl_path path, char *msg,
                             size_t msglen) {
    const rl_type_traits *tr = rl_type_traits_of(type);
    const rl_status run = rl_check_run(path, 1);
    if (!rl_bench_rows_type(type)) {
        snprintf(msg, msglen, "type %s has no row product", rl_gguf_ggml_type_name(type));
        return RL_UNSUPPORTED;
    }
    if (run != RL_OK)
        return run;
    if (type == RL_GGUF_GGML_F32)
        return rl_matvec_f32_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, path, 1, 0);
    if (type == RL_GGUF_GGML_Q8_0)
        return rl_matvec_q8_ex(w, rows, cols, RL_SRC_F32, x, NULL, y, path, 1, 0, msg, msglen);
    const size_t block = rl_gguf_ggml_block_size(type);
    if (cols % block || cols % rl_gguf_ggml_block_size(tr->vec_dot_type)) {
        snprintf(msg, msglen, "%s rows of %zu values are not whole blocks of %zu",
                 rl_gguf_ggml_type_name(type), cols, (size_t)block);
        return RL_BADLEN;
    }
    const rl_status st = rl_bench_rows_act(tr->vec_dot_type, x, cols, xq, path);
    if (st != RL_OK)
        return st;
    const size_t nb = cols / block, row_bytes = nb * rl_gguf_ggml_block_bytes(type);
    const rl_vec_dot_kernel dot = tr->vec_dot[path];
    for (size_t r = 0; r < rows; r++)
        y[r] = dot((const unsigned char *)w + r * row_bytes, xq, nb);
    return RL_OK;
}

/* One timed product: ours on path, or ggml's. */
typedef struct {
    uint32_t type;
    const void *w;
    size_t rows, cols;
    const float *x;
    void *xq;
    float *y;
    rl_path path;
    int ggml;
} rl_bench_rows_job;

static rl_status rl_bench_rows_call(void *ctx, char *msg, size_t msglen) {
    const rl_bench_rows_job *j = ctx;
    if (j->ggml)
        return rl_ggml_rows_once(j->type, j->w, j->rows, j->cols, j->x, j->xq, j->y, msg, msglen);
    return rl_bench_rows_once(j->type, j->w, j->rows, j->cols, j->x, j->xq, j->y, j->path, msg,
                              msglen);
}

/* j's product timed by rl_bench_repeat, with act bytes of activation row
 * (and 64 more: ggml's SIMD loads may read past a row's end). */
static rl_status rl_bench_rows_timed(rl_bench_rows_job *j, size_t act, size_t min_calls,
                                     uint64_t min_ns, uint64_t max_ns, size_t cap, double *times,
                                     size_t *done, char *msg, size_t msglen) {
    *done = 0;
    j->xq = malloc(act + 64);
    if (!j->xq)
        return RL_NOMEM;
    const rl_status st = rl_bench_repeat(rl_bench_rows_call, j, min_calls, min_ns, max_ns, cap,
                                         times, done, msg, msglen);
    free(j->xq);
    return st;
}

rl_status rl_bench_rows(uint32_t type, const void *w, size_t rows, size_t cols, const float *x,
                        float *y, rl_path path, size_t min_calls, uint64_t min_ns,
                        uint64_t max_ns, size_t cap, double *times, size_t *done, char *msg,
                        size_t msglen) {
    rl_bench_rows_job j = {type, w, rows, cols, x, NULL, y, path, 0};
    return rl_bench_rows_timed(&j, rl_bench_rows_act_bytes(type, cols), min_calls, min_ns, max_ns,
                               cap, times, done, msg, msglen);
}

/* ---- ggml ------------------------------------------------------------- */

/* ggml's CPU type traits (ggml-cpu.h), the fields read here. */
typedef void (*rl_gg_vec_dot)(int n, float *s, size_t bs, const void *x, size_t bx,
                              const void *y, size_t by, int nrc);
typedef void (*rl_gg_from_float)(const float *x, void *y, int64_t k);
typedef struct {
    rl_gg_from_float from_float;
    rl_gg_vec_dot vec_dot;
    int vec_dot_type;
    int64_t nrows;
} rl_gg_traits;

static const rl_gg_traits *(*rl_gg_traits_of)(int type);

/* ggml's CPU variants, the best first when scores tie. */
static const char *const rl_gg_variants[] = {
    "zen4",    "sapphirerapids", "icelake",   "cooperlake", "cascadelake",
    "skylakex", "cannonlake",    "alderlake", "haswell",    "sandybridge",
    "ivybridge", "piledriver",   "sse42",     "x64"};

int rl_ggml_open(const char *dir, char *msg, size_t msglen) {
    static char variant[32];
    char path[4096];
    if (rl_gg_traits_of) {
        snprintf(msg, msglen, "%s", variant);
        return 1;
    }
    snprintf(path, sizeof path, "%s/libggml-base.so", dir);
    if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL)) {
        snprintf(msg, msglen, "%s", dlerror());
        return 0;
    }
    void *best = NULL;
    int best_score = 0;
    for (size_t i = 0; i < sizeof rl_gg_variants / sizeof *rl_gg_variants; i++) {
        snprintf(path, sizeof path, "%s/libggml-cpu-%s.so", dir, rl_gg_variants[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        int (*score)(void) = NULL;
        if (h)
            *(void **)&score = dlsym(h, "ggml_backend_score");
        const int s = score ? score() : 0;
        if (s > best_score) {
            if (best)
                dlclose(best);
            best = h, best_score = s;
            snprintf(variant, sizeof variant, "%s", rl_gg_variants[i]);
        } else if (h) {
            dlclose(h);
        }
    }
    if (!best) {
        snprintf(msg, msglen, "no libggml-cpu-*.so in %s runs on this CPU", dir);
        return 0;
    }
    void (*init)(void) = NULL;
    const rl_gg_traits *(*traits)(int) = NULL;
    *(void **)&init = dlsym(best, "ggml_cpu_init");
    *(void **)&traits = dlsym(best, "ggml_get_type_traits_cpu");
    if (!init || !traits) {
        snprintf(msg, msglen, "libggml-cpu-%s.so lacks ggml_cpu_init or ggml_get_type_traits_cpu",
                 variant);
        dlclose(best);
        return 0;
    }
    init();
    rl_gg_traits_of = traits;
    snprintf(msg, msglen, "%s", variant);
    return 1;
}

/* ggml's traits of type and of its vec_dot_type (*t, *xt), or
 * RL_UNSUPPORTED (msg why): ggml not loaded, no product for type, or cols
 * not whole blocks of both (RL_BADLEN). */
static rl_status rl_ggml_product(uint32_t type, size_t cols, const rl_gg_traits **t,
                                 const rl_gg_traits **xt, char *msg, size_t msglen) {
    *t = rl_gg_traits_of ? rl_gg_traits_of((int)type) : NULL;
    *xt = *t && (*t)->vec_dot ? rl_gg_traits_of((*t)->vec_dot_type) : NULL;
    const size_t block = rl_gguf_ggml_block_size(type);
    const size_t xblock = *xt ? rl_gguf_ggml_block_size((uint32_t)(*t)->vec_dot_type) : 0;
    if (!*xt || !(*xt)->from_float || !block || !xblock) {
        if (rl_gg_traits_of)
            snprintf(msg, msglen, "ggml has no product for %s", rl_gguf_ggml_type_name(type));
        else
            snprintf(msg, msglen, "ggml is not loaded");
        return RL_UNSUPPORTED;
    }
    if (cols % block || cols % xblock || cols > (size_t)INT32_MAX) {
        snprintf(msg, msglen, "%s rows of %zu values are not whole blocks of %zu",
                 rl_gguf_ggml_type_name(type), cols, block);
        return RL_BADLEN;
    }
    return RL_OK;
}

size_t rl_ggml_act_bytes(uint32_t type, size_t cols) {
    const rl_gg_traits *t = rl_gg_traits_of ? rl_gg_traits_of((int)type) : NULL;
    if (!t || !t->vec_dot)
        return 0;
    const uint32_t xtype = (uint32_t)t->vec_dot_type;
    const size_t xblock = rl_gguf_ggml_block_size(xtype);
    return xblock ? cols / xblock * rl_gguf_ggml_block_bytes(xtype) : 0;
}

rl_status rl_ggml_rows_once(uint32_t type, const void *w, size_t rows, size_t cols,
                            const float *x, void *xq, float *y, char *msg, size_t msglen) {
    const rl_gg_traits *t, *xt;
    const rl_status st = rl_ggml_product(type, cols, &t, &xt, msg, msglen);
    if (st != RL_OK)
        return st;
    const size_t row_bytes = cols / rl_gguf_ggml_block_size(type) * rl_gguf_ggml_block_bytes(type);
    xt->from_float(x, xq, (int64_t)cols);
    for (size_t r = 0; r < rows; r++)
        t->vec_dot((int)cols, y + r, 0, (const unsigned char *)w + r * row_bytes, 0, xq, 0, 1);
    return RL_OK;
}

rl_status rl_bench_ggml_rows(uint32_t type, const void *w, size_t rows, size_t cols,
                             const float *x, float *y, size_t min_calls, uint64_t min_ns,
                             uint64_t max_ns, size_t cap, double *times, size_t *done,
                             char *msg, size_t msglen) {
    const rl_gg_traits *t, *xt;
    rl_bench_rows_job j = {type, w, rows, cols, x, NULL, y, RL_PATH_REF, 1};
    const rl_status st = rl_ggml_product(type, cols, &t, &xt, msg, msglen);
    *done = 0;
    if (st != RL_OK)
        return st;
    return rl_bench_rows_timed(&j, rl_ggml_act_bytes(type, cols), min_calls, min_ns, max_ns, cap,
                               times, done, msg, msglen);
}
