/* bench_tokenizer.c - a speed report for the byte-level BPE tokenizer (not
 * a test: it checks nothing).  Built by `make tools`:
 *     build/tools/bench_tokenizer VOCAB.gguf TEXT-FILE [seconds] [--nfc] [--lines]
 *                                 [--threads N]
 * Encodes the whole file (or, with --lines, each line as its own text) over
 * and over for about that many seconds (default 2) on one thread, the first
 * round with a cold cache, and prints MB/s and tokens/s of the cold round
 * and of the warm ones (per second of this thread's CPU time).  With
 * --threads N, N threads then encode at once with the one tokenizer (its
 * shared cache) for as long, and the total MB/s per second of wall time is
 * printed too. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prims/tokenizer.h"
#include "tests/c/tok_gguf.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: fair on a busy machine */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One round: answers the token count, or -1 after printing the error. */
static long round_once(const rl_tok *t, const char *text, size_t len, int lines) {
    long total = 0;
    char msg[256];
    size_t i = 0;
    while (i < len || (i == 0 && len == 0)) {
        size_t e = len;
        if (lines) {
            const char *nl = memchr(text + i, '\n', len - i);
            e = nl ? (size_t)(nl - text) : len;
        }
        int32_t *ids;
        size_t n;
        if (rl_tok_encode(t, text + i, e - i, 0, 1, &ids, &n, msg, sizeof msg) != RL_TOK_OK) {
            fprintf(stderr, "bench_tokenizer: %s\n", msg);
            return -1;
        }
        free(ids);
        total += (long)n;
        i = e + 1;
        if (len == 0)
            break;
    }
    return total;
}

typedef struct {
    const rl_tok *t;
    const char *text;
    size_t len;
    int lines, rounds;
    double secs;
} job;

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *run_job(void *arg) {
    job *j = arg;
    double t0 = wall();
    do {
        round_once(j->t, j->text, j->len, j->lines);
        j->rounds++;
    } while (wall() - t0 < j->secs);
    return NULL;
}

int main(int argc, char **argv) {
    double secs = 2;
    int nfc = 0, lines = 0, threads = 0;
    const char *pos[3] = {0};
    int np = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--nfc") == 0)
            nfc = 1;
        else if (strcmp(argv[a], "--lines") == 0)
            lines = 1;
        else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc)
            threads = atoi(argv[++a]);
        else if (np < 3)
            pos[np++] = argv[a];
    }
    if (np < 2) {
        fprintf(stderr, "usage: bench_tokenizer VOCAB.gguf TEXT-FILE [seconds] [--nfc] [--lines]\n");
        return 1;
    }
    if (np == 3)
        secs = atof(pos[2]);
    FILE *f = fopen(pos[1], "rb");
    if (!f) {
        fprintf(stderr, "bench_tokenizer: cannot open %s\n", pos[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long flen = ftell(f);
    rewind(f);
    char *text = malloc((size_t)flen + 1);
    size_t len = fread(text, 1, (size_t)flen, f);
    fclose(f);
    tok_gguf g;
    if (tok_gguf_load(&g, pos[0]))
        return 1;
    g.spec.nfc = nfc;
    rl_tok *t;
    char msg[256];
    if (rl_tok_new(&g.spec, &t, msg, sizeof msg) != RL_TOK_OK) {
        fprintf(stderr, "bench_tokenizer: %s\n", msg);
        return 1;
    }
    double t0 = now();
    long ntok = round_once(t, text, len, lines);
    double cold = now() - t0;
    if (ntok < 0)
        return 1;
    int rounds = 0;
    t0 = now();
    double el;
    do {
        round_once(t, text, len, lines);
        rounds++;
    } while ((el = now() - t0) < secs);
    double warm = el / rounds;
    printf("%zu bytes, %ld tokens%s%s\n", len, ntok, nfc ? ", NFC" : "", lines ? ", by line" : "");
    printf("cold cache: %.1f MB/s, %.2f M tokens/s\n", (double)len / cold / 1e6,
           (double)ntok / cold / 1e6);
    printf("warm cache: %.1f MB/s, %.2f M tokens/s (%d rounds)\n", (double)len / warm / 1e6,
           (double)ntok / warm / 1e6, rounds);
    if (threads > 0) {
        job jobs[64];
        pthread_t th[64];
        if (threads > 64)
            threads = 64;
        double w0 = wall();
        for (int i = 0; i < threads; i++) {
            jobs[i] = (job){t, text, len, lines, 0, secs};
            pthread_create(&th[i], NULL, run_job, &jobs[i]);
        }
        long total = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(th[i], NULL);
            total += jobs[i].rounds;
        }
        double w = wall() - w0;
        printf("%d threads: %.1f MB/s in all (wall time), %ld rounds\n", threads,
               (double)len * (double)total / w / 1e6, total);
    }
    rl_tok_free(t);
    tok_gguf_free(&g);
    free(text);
    return 0;
}
