/* llama_embed.c - llama.cpp's own encoder on a GGUF file, for the agreement
 * test and the benchmark's ratios: the reference rontolisp's MODEL:ENCODE is
 * held to.
 *
 *   llama_embed LIBDIR MODEL.gguf [THREADS [REPEAT]] < SEQUENCES
 *
 * dlopens LIBDIR/libllama.v0.5.0.so and LIBDIR/libggml.v0.5.0.so (llama.cpp
 * v0.5.0, the libraries tests/fetch-llama-lib.sh fetches), loads the CPU
 * backends of LIBDIR with ggml_backend_load_all_from_path, and encodes each
 * line of SEQUENCES (token ids separated by commas or blanks) with pooling
 * none and flash attention off (the plain soft_max graph).  For each
 * sequence it prints one JSON object on one line:
 *   {"tokens": N, "n_embd": D, "us": MICROSECONDS, "embeddings": [[D floats] x N]}
 * where "us" is the median wall time of REPEAT (default 1) llama_encode
 * calls and the floats are printed with 9 significant digits (f32 round
 * trip).  Exit 0 on success; 2 for bad usage; 3 when a library cannot be
 * loaded (so callers can skip); 1 when llama.cpp refuses the model or the
 * input.
 *
 * The structures passed by value are tools/llama_api.h's; the defaults
 * llama.cpp answers are checked against the ones its source sets before
 * anything is used.  The functions are declared here from include/llama.h
 * and ggml/include/ggml-backend.h of that release.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/llama_api.h"

/* ------------------------------------------------ llama.cpp's interface */

static struct ll_api ll;

/* Resolve every symbol; answer 0, or -1 with the reason in MSG. */
static int load_llama(const char *dir, char *msg, size_t cap)
{
    void *llama;
    return ll_api_open(&ll, dir, &llama, msg, cap);
}

/* The defaults llama.cpp's source sets (src/llama-context.cpp,
 * src/llama-model.cpp): a mismatch means tools/llama_api.h does not
 * describe this library. */
static int layout_matches(const struct ll_model_params *m, const struct ll_context_params *c)
{
    return m->n_gpu_layers == -1 && m->vocab_only == false && m->use_extra_bufts == true &&
           m->load_mtp == false && c->n_ctx == 512 && c->n_batch == 2048 &&
           c->n_ubatch == 512 && c->n_seq_max == 1 && c->n_outputs_max_per_seq == 1 &&
           c->pooling_type == -1 && c->flash_attn_type == -1 && c->yarn_ext_factor == -1.0f &&
           c->defrag_thold == -1.0f && c->type_k == 1 && c->type_v == 1 &&
           c->embeddings == false && c->offload_kqv == true && c->swa_full == true &&
           c->kv_unified == false && c->n_samplers == 0 && c->ctx_other == NULL;
}

/* ------------------------------------------------------------ the input */

struct seq { int32_t *ids; int n; };

/* Parse one line of ids into S; answer 0, 1 for a blank line, -1 for junk. */
static int parse_line(char *line, struct seq *s)
{
    int cap = 16;
    s->ids = malloc(cap * sizeof *s->ids);
    s->n = 0;
    if (!s->ids) return -1;
    for (char *p = line; *p;) {
        if (strchr(", \t\r\n", *p)) { p++; continue; }
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX) return -1;
        if (s->n == cap) {
            int32_t *grown = realloc(s->ids, 2 * cap * sizeof *s->ids);
            if (!grown) return -1;
            s->ids = grown;
            cap *= 2;
        }
        s->ids[s->n++] = (int32_t)v;
        p = end;
    }
    return s->n == 0 ? 1 : 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: llama_embed LIBDIR MODEL.gguf [THREADS [REPEAT]] < SEQUENCES\n");
        return 2;
    }
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    int repeat = argc > 4 ? atoi(argv[4]) : 1;
    if (threads < 1 || repeat < 1) {
        fprintf(stderr, "llama_embed: expected THREADS and REPEAT of 1 or more\n");
        return 2;
    }
    char msg[4200];
    if (load_llama(argv[1], msg, sizeof msg) != 0) {
        fprintf(stderr, "llama_embed: %s\n", msg);
        return 3;
    }

    struct seq *seqs = NULL;
    int nseq = 0, longest = 0;
    char *line = NULL;
    size_t linecap = 0;
    while (getline(&line, &linecap, stdin) > 0) {
        struct seq s;
        int r = parse_line(line, &s);
        if (r < 0) {
            fprintf(stderr, "llama_embed: expected token ids separated by commas, found %s", line);
            return 2;
        }
        if (r > 0) { free(s.ids); continue; }
        struct seq *grown = realloc(seqs, (nseq + 1) * sizeof *seqs);
        if (!grown) { fprintf(stderr, "llama_embed: out of memory\n"); return 1; }
        seqs = grown;
        seqs[nseq++] = s;
        if (s.n > longest) longest = s.n;
    }
    free(line);

    ll.ggml_log_set(ll_quiet, NULL);
    ll.log_set(ll_quiet, NULL);
    ll.load_all_from_path(argv[1]);
    ll.backend_init();
    struct ll_model_params mp = ll.model_default_params();
    struct ll_context_params cp = ll.context_default_params();
    if (!layout_matches(&mp, &cp)) {
        fprintf(stderr, "llama_embed: llama.cpp's default parameters are not those of the "
                        "release these declarations describe\n");
        return 3;
    }
    struct ll_model *model = ll.model_load(argv[2], mp);
    if (!model) {
        fprintf(stderr, "llama_embed: %s: llama.cpp refused the model\n", argv[2]);
        return 1;
    }
    uint32_t n = longest < 64 ? 64 : (uint32_t)longest;
    cp.n_ctx = cp.n_batch = cp.n_ubatch = n;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.embeddings = true;
    cp.pooling_type = LL_POOLING_NONE;
    cp.flash_attn_type = LL_FLASH_ATTN_DISABLED;
    struct ll_context *ctx = ll.init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_embed: %s: llama.cpp could not make a context\n", argv[2]);
        return 1;
    }
    int d = ll.n_embd(model);
    double *times = malloc(repeat * sizeof *times);
    if (!times) { fprintf(stderr, "llama_embed: out of memory\n"); return 1; }
    int status = 0;
    for (int s = 0; s < nseq && status == 0; s++) {
        for (int r = 0; r < repeat; r++) {
            double t0 = now_us();
            int32_t rc = ll.encode(ctx, ll.batch_get_one(seqs[s].ids, seqs[s].n));
            times[r] = now_us() - t0;
            if (rc != 0) {
                fprintf(stderr, "llama_embed: llama_encode failed (%d) on sequence %d\n", rc, s + 1);
                status = 1;
                break;
            }
        }
        if (status) break;
        qsort(times, repeat, sizeof *times, cmp_double);
        printf("{\"tokens\": %d, \"n_embd\": %d, \"us\": %.1f, \"embeddings\": [", seqs[s].n, d,
               times[repeat / 2]);
        for (int i = 0; i < seqs[s].n; i++) {
            const float *e = ll.get_embeddings_ith(ctx, i);
            if (!e) {
                fprintf(stderr, "llama_embed: no embedding for token %d of sequence %d\n", i, s + 1);
                status = 1;
                break;
            }
            printf(i ? ", [" : "[");
            for (int j = 0; j < d; j++) printf(j ? ", %.9g" : "%.9g", (double)e[j]);
            printf("]");
        }
        printf("]}\n");
        fflush(stdout);
    }
    free(times);
    for (int s = 0; s < nseq; s++) free(seqs[s].ids);
    free(seqs);
    ll.free(ctx);
    ll.model_free(model);
    return status;
}
