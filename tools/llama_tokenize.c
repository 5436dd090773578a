/* llama_tokenize.c - llama.cpp's own tokenizer on a GGUF file, a reference
 * of the tokenizer tests (llama_tokenize of its vocabulary).
 *
 *   llama_tokenize LIBDIR MODEL.gguf [--no-special] [--no-parse-special] [--time] < TEXTS
 *
 * dlopens LIBDIR/libllama.v0.5.0.so and LIBDIR/libggml.v0.5.0.so (the
 * libraries tests/fetch-llama-lib.sh fetches), loads MODEL's vocabulary
 * only, and tokenizes each line of TEXTS, a text's UTF-8 bytes in
 * hexadecimal (so a text may hold newlines and any byte; an empty line is
 * the empty text), with llama_tokenize(vocab, text, add_special,
 * parse_special): add_special true unless --no-special, parse_special true
 * unless --no-parse-special.  For each text it prints one line, the token
 * ids separated by spaces; with --time it prints instead, at the end, one
 * line with the texts' bytes, their tokens and the seconds spent inside
 * llama_tokenize (the speed reference of `rontolisp bench --tokenizer').
 * Exit 0 on success; 2 for bad usage or input; 3
 * when a library cannot be loaded (so callers can skip); 1 when llama.cpp
 * refuses the model or a text.
 *
 * The structures passed by value are tools/llama_api.h's; the defaults
 * llama.cpp answers are checked before anything is used.  The two
 * functions of the vocabulary are declared here from include/llama.h.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/llama_api.h"

struct ll_vocab;

static struct ll_api ll;
static const struct ll_vocab *(*model_get_vocab)(const struct ll_model *);
static int32_t (*tokenize)(const struct ll_vocab *, const char *text, int32_t len,
                           int32_t *tokens, int32_t n_max, bool add_special, bool parse_special);

/* Resolve every symbol; answer 0, or -1 with the reason in MSG. */
static int load_llama(const char *dir, char *msg, size_t cap)
{
    void *llama;
    if (ll_api_open(&ll, dir, &llama, msg, cap) != 0)
        return -1;
    const char *missing = NULL;
    if (!(*(void **)&model_get_vocab = dlsym(llama, "llama_model_get_vocab")))
        missing = "llama_model_get_vocab";
    else if (!(*(void **)&tokenize = dlsym(llama, "llama_tokenize")))
        missing = "llama_tokenize";
    if (missing) {
        snprintf(msg, cap, "llama.cpp in %s lacks %s", dir, missing);
        return -1;
    }
    return 0;
}

static int hex_digit(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode the hexadecimal LINE (N characters, newline removed) in place;
 * answer the number of bytes, or -1 when it is not hexadecimal. */
static long unhex(char *line, size_t n)
{
    if (n % 2) return -1;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_digit((unsigned char)line[i]), lo = hex_digit((unsigned char)line[i + 1]);
        if (hi < 0 || lo < 0) return -1;
        line[i / 2] = (char)(hi * 16 + lo);
    }
    return (long)(n / 2);
}

int main(int argc, char **argv)
{
    bool add_special = true, parse_special = true, timed = false;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-special")) add_special = false;
        else if (!strcmp(argv[i], "--no-parse-special")) parse_special = false;
        else if (!strcmp(argv[i], "--time")) timed = true;
        else if (npos < 2) pos[npos++] = argv[i];
        else npos = 3;
    }
    if (npos != 2) {
        fprintf(stderr, "usage: llama_tokenize LIBDIR MODEL.gguf [--no-special] "
                        "[--no-parse-special] [--time] < TEXTS\n");
        return 2;
    }
    char msg[4200];
    if (load_llama(pos[0], msg, sizeof msg) != 0) {
        fprintf(stderr, "llama_tokenize: %s\n", msg);
        return 3;
    }
    ll.ggml_log_set(ll_quiet, NULL);
    ll.log_set(ll_quiet, NULL);
    ll.load_all_from_path(pos[0]);
    ll.backend_init();
    struct ll_model_params mp = ll.model_default_params();
    if (!(mp.n_gpu_layers == -1 && mp.vocab_only == false && mp.use_extra_bufts == true &&
          mp.load_mtp == false)) {
        fprintf(stderr, "llama_tokenize: llama.cpp's default parameters are not those of the "
                        "release these declarations describe\n");
        return 3;
    }
    mp.vocab_only = true;
    struct ll_model *model = ll.model_load(pos[1], mp);
    if (!model) {
        fprintf(stderr, "llama_tokenize: %s: llama.cpp refused the model\n", pos[1]);
        return 1;
    }
    const struct ll_vocab *vocab = model_get_vocab(model);

    int status = 0;
    char *line = NULL;
    size_t linecap = 0;
    ssize_t got;
    int32_t *ids = NULL;
    long lineno = 0;
    double seconds = 0;
    long long bytes = 0, tokens = 0;
    while (status == 0 && (got = getline(&line, &linecap, stdin)) > 0) {
        lineno++;
        size_t n = (size_t)got;
        if (line[n - 1] == '\n') n--;
        long len = unhex(line, n);
        if (len < 0 || len > INT32_MAX / 2) {
            fprintf(stderr, "llama_tokenize: line %ld: expected a text in hexadecimal\n", lineno);
            status = 2;
            break;
        }
        int32_t cap = (int32_t)len + 8;
        int32_t *grown = realloc(ids, (size_t)cap * sizeof *ids);
        if (!grown) { fprintf(stderr, "llama_tokenize: out of memory\n"); status = 1; break; }
        ids = grown;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int32_t k = tokenize(vocab, line, (int32_t)len, ids, cap, add_special, parse_special);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        seconds += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (k < 0) {
            fprintf(stderr, "llama_tokenize: line %ld: llama_tokenize failed (%d)\n", lineno, k);
            status = 1;
            break;
        }
        bytes += len;
        tokens += k;
        if (timed)
            continue;
        for (int32_t i = 0; i < k; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    if (timed && status == 0)
        printf("%lld bytes, %lld tokens, %.4f s: %.2f MB/s, %.0f tokens/s\n", bytes, tokens,
               seconds, seconds > 0 ? (double)bytes / seconds / 1e6 : 0.0,
               seconds > 0 ? (double)tokens / seconds : 0.0);
    fflush(stdout);
    free(ids);
    free(line);
    ll.model_free(model);
    return status;
}
