/* tok_gguf.h - the smallest reader of a GGUF file's tokenizer.ggml.tokens,
 * merges and token_type into an rl_tok_spec, for the tokenizer's C test and
 * tools/bench_tokenizer.c (the product's reader, with every key and check,
 * is the Lisp side's).  Header-only: each program includes it once. */
#ifndef RL_TEST_TOK_GGUF_H
#define RL_TEST_TOK_GGUF_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "prims/tokenizer.h"

typedef struct {
    rl_gguf_file *f;
    rl_tok_spec spec;
    const char **tok, **mer;
    size_t *tlen, *mlen;
    int32_t *types;
} tok_gguf;

/* The strings of array KEY into (*s, *l); answers the count, or -1. */
static long tok_gguf_strings(rl_gguf_file *f, const char *key, const char ***s, size_t **l) {
    int64_t k = rl_gguf_find_key(f, key, strlen(key));
    rl_gguf_val v, e;
    if (k < 0 || rl_gguf_kv_value(f, (uint64_t)k, &v) != RL_GGUF_OK ||
        v.type != RL_GGUF_TYPE_ARRAY)
        return -1;
    *s = malloc((v.count + 1) * sizeof **s);
    *l = malloc((v.count + 1) * sizeof **l);
    for (uint64_t j = 0; j < v.count; j++) {
        uint64_t len;
        if (rl_gguf_array_get(f, &v, j, &e) != RL_GGUF_OK ||
            rl_gguf_val_str(f, &e, &(*s)[j], &len) != RL_GGUF_OK)
            return -1;
        (*l)[j] = (size_t)len;
    }
    return (long)v.count;
}

/* Fill g from PATH (bos, eos, unk ids none; no NFC); answers 0 or -1. */
static int tok_gguf_load(tok_gguf *g, const char *path) {
    char msg[RL_GGUF_MSG_SIZE];
    memset(g, 0, sizeof *g);
    if (rl_gguf_open(path, &g->f, msg, sizeof msg, NULL) != RL_GGUF_OK) {
        fprintf(stderr, "%s: %s\n", path, msg);
        return -1;
    }
    long nt = tok_gguf_strings(g->f, "tokenizer.ggml.tokens", &g->tok, &g->tlen);
    long nm = tok_gguf_strings(g->f, "tokenizer.ggml.merges", &g->mer, &g->mlen);
    if (nt < 0 || nm < 0) {
        fprintf(stderr, "%s: no tokenizer.ggml.tokens or merges\n", path);
        return -1;
    }
    int64_t k = rl_gguf_find_key(g->f, "tokenizer.ggml.token_type", 25);
    rl_gguf_val v;
    const void *p;
    if (k >= 0 && rl_gguf_kv_value(g->f, (uint64_t)k, &v) == RL_GGUF_OK &&
        v.elem_type == RL_GGUF_TYPE_I32 && v.count == (uint64_t)nt &&
        rl_gguf_array_data(g->f, &v, &p) == RL_GGUF_OK) {
        g->types = malloc((size_t)nt * sizeof *g->types);
        memcpy(g->types, p, (size_t)nt * sizeof *g->types);
    }
    g->spec.n_tokens = (size_t)nt;
    g->spec.tokens = g->tok;
    g->spec.token_lens = g->tlen;
    g->spec.token_types = g->types;
    g->spec.n_merges = (size_t)nm;
    g->spec.merges = g->mer;
    g->spec.merge_lens = g->mlen;
    g->spec.unk_id = g->spec.bos_id = g->spec.eos_id = -1;
    return 0;
}

static void tok_gguf_free(tok_gguf *g) {
    free(g->tok);
    free(g->mer);
    free(g->tlen);
    free(g->mlen);
    free(g->types);
    if (g->f)
        rl_gguf_close(g->f);
}

#endif
