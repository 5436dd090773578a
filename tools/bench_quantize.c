/* bench_quantize.c - `rontolisp quantize' against llama.cpp's own quantizer
 * on one file, side by side: wall time, peak resident memory and the bytes
 * written (the benchmark of `make bench', never a test).
 *
 *     bench_quantize LIBDIR RONTOLISP WORKDIR
 *
 * Makes WORKDIR/bench-quantize.f32.gguf once (512 MiB: 8 F32 tensors of
 * 4096 x 4096, deterministic values, a llama file), then, for each of the
 * file types Q8_0, Q4_K_M and Q6_K, quantizes it
 * three times, each run a fresh process measured from fork to exit (wall clock,
 * and ru_maxrss from wait4): llama_model_quantize from LIBDIR's
 * libllama.v0.5.0.so (dlopened; the defaults llama-quantize uses: every
 * hardware thread), the same followed by an fsync of its output (our
 * writer flushes to disk before its rename: the same durable result), then
 * RONTOLISP quantize (its default threads); then, when /dev/shm exists,
 * llama.cpp's and ours again with the output on tmpfs, where the disk
 * costs nothing (the conversion's own speed).  The
 * input is read once before either, so both find it in the page cache.
 * Prints a table per type with the ratios, and whether the outputs hold the same
 * tensors and metadata (general.alignment aside: our writer writes it when
 * the input has it; this input has none), then one line per type: our wall
 * time, llama.cpp's, the ratio and both peak resident sizes.
 * Exits 1 when the outputs differ, 2 when a run fails.  Both runs share a
 * machine: compare the ratios of one run, not numbers across runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tools/llama_api.h"

#define N_TENSORS 8
#define DIM 4096

static struct ll_api ll;

/* The input file: values from a xorshift generator, each row scaled
 * differently so the Q8_0 scales vary. */
static int make_input(const char *path) {
    rl_gguf_writer *w = rl_gguf_writer_new();
    char msg[RL_GGUF_MSG_SIZE];
    if (!w)
        return 1;
    rl_gguf_writer_set_implicit_alignment(w, 1);
    static const struct { const char *k; uint64_t v; } u32s[] = {
        {"llama.context_length", 128}, {"llama.embedding_length", DIM},
        {"llama.block_count", N_TENSORS}, {"general.file_type", 0}};
    rl_gguf_w_key(w, "general.architecture", 20);
    rl_gguf_w_str(w, "llama", 5);
    rl_gguf_w_key(w, "general.name", 12);
    rl_gguf_w_str(w, "bench-quantize", 14);
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++) {
        rl_gguf_w_key(w, u32s[i].k, strlen(u32s[i].k));
        rl_gguf_w_uint(w, RL_GGUF_TYPE_U32, u32s[i].v);
    }
    rl_gguf_w_key(w, "llama.attention.layer_norm_rms_epsilon", 38);
    rl_gguf_w_float(w, RL_GGUF_TYPE_F32, 1e-5);
    int64_t ne[2] = {DIM, DIM};
    for (int t = 0; t < N_TENSORS; t++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", t);
        rl_gguf_w_tensor_deferred(w, name, strlen(name), 2, ne, RL_GGUF_GGML_F32);
    }
    if (rl_gguf_writer_stream_begin(w, path, msg, sizeof msg, NULL) != RL_GGUF_OK) {
        fprintf(stderr, "bench_quantize: %s: %s\n", path, msg);
        return 1;
    }
    static float row[DIM];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int t = 0; t < N_TENSORS; t++)
        for (int r = 0; r < DIM; r++) {
            float scale = 0.01f + (float)((r * 7 + t) % 97) * 0.05f;
            for (int c = 0; c < DIM; c++) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                row[c] = scale * ((float)(s >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
            }
            if (rl_gguf_writer_stream_put(w, row, sizeof row, msg, sizeof msg, NULL) != RL_GGUF_OK) {
                fprintf(stderr, "bench_quantize: %s: %s\n", path, msg);
                return 1;
            }
        }
    if (rl_gguf_writer_stream_end(w, msg, sizeof msg, NULL) != RL_GGUF_OK) {
        fprintf(stderr, "bench_quantize: %s: %s\n", path, msg);
        return 1;
    }
    rl_gguf_writer_free(w);
    return 0;
}

/* The llama.cpp run, in a process of its own. */
static int run_llama(const char *dir, const char *in, const char *out, int ftype,
                     int sync_out) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml.v0.5.0.so", dir);
    void *ggml = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libllama.v0.5.0.so", dir);
    void *llama = ggml ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    const char *missing = llama ? ll_api_resolve(&ll, llama, ggml) : dlerror();
    if (missing) {
        fprintf(stderr, "bench_quantize: cannot use llama.cpp in %s: %s\n", dir, missing);
        return 2;
    }
    ll.ggml_log_set(ll_quiet, NULL);
    ll.log_set(ll_quiet, NULL);
    ll.backend_init();
    struct ll_quantize_params p = ll.model_quantize_default_params();
    /* The layout check: llama.cpp's own defaults, field by field. */
    if (p.nthread != 0 || p.ftype != LL_FTYPE_MOSTLY_Q8_0 ||
        p.output_tensor_type != LL_GGML_TYPE_COUNT || p.token_embedding_type != LL_GGML_TYPE_COUNT ||
        p.allow_requantize || !p.quantize_output_tensor || p.only_copy || p.pure || p.keep_split ||
        p.dry_run || p.imatrix || p.kv_overrides || p.tt_overrides || p.prune_layers ||
        p.max_buf_size == 0) {
        fprintf(stderr, "bench_quantize: llama_model_quantize_params differs from "
                        "tools/llama_api.h\n");
        return 2;
    }
    p.ftype = ftype;
    if (ll.model_quantize(in, out, &p) != 0)
        return 2;
    if (sync_out) { /* what our writer does before its rename */
        int fd = open(out, O_RDONLY);
        if (fd < 0 || fsync(fd) != 0)
            return 2;
        close(fd);
    }
    return 0;
}

typedef struct run { double wall; long rss_kib; int status; } run;

/* ARGV run in a child process (this program again, or RONTOLISP). */
static run measure(char *const argv[]) {
    run r = {0, 0, -1};
    struct timespec t0, t1;
    struct rusage ru;
    int st;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", 1);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid)
        return r;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r.wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    r.rss_kib = ru.ru_maxrss;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

/* 0 when the outputs A (llama.cpp's) and B (ours) hold the same tensors
 * -- names, types, dims, offsets and bytes -- and the same metadata but
 * for general.alignment, which ours writes only when the input has it (doc/gguf.md) and
 * llama.cpp's leaves out; else 1, with the first difference on stderr. */
static int compare(const char *a, const char *b) {
    rl_gguf_file *fa = NULL, *fb = NULL;
    char msg[RL_GGUF_MSG_SIZE];
    int differ = 1;
    if (rl_gguf_open(a, &fa, msg, sizeof msg, NULL) != RL_GGUF_OK ||
        rl_gguf_open(b, &fb, msg, sizeof msg, NULL) != RL_GGUF_OK) {
        fprintf(stderr, "bench_quantize: %s\n", msg);
        goto done;
    }
    uint64_t nkv = 0;
    for (uint64_t i = 0; i < rl_gguf_kv_count(fb); i++) {
        uint64_t len;
        const char *key = rl_gguf_kv_key(fb, i, &len);
        if (len == 17 && memcmp(key, "general.alignment", 17) == 0)
            continue;
        rl_gguf_val va, vb;
        uint64_t sa, ea, sb, eb;
        if (nkv >= rl_gguf_kv_count(fa) || rl_gguf_kv_value(fa, nkv, &va) != RL_GGUF_OK ||
            rl_gguf_kv_value(fb, i, &vb) != RL_GGUF_OK ||
            rl_gguf_val_span(fa, &va, &sa, &ea) != RL_GGUF_OK ||
            rl_gguf_val_span(fb, &vb, &sb, &eb) != RL_GGUF_OK || ea - sa != eb - sb ||
            memcmp(rl_gguf_bytes(fa) + sa, rl_gguf_bytes(fb) + sb, ea - sa) != 0) {
            fprintf(stderr, "bench_quantize: key %.*s differs\n", (int)len, key);
            goto done;
        }
        nkv++;
    }
    if (nkv != rl_gguf_kv_count(fa) || rl_gguf_tensor_count(fa) != rl_gguf_tensor_count(fb)) {
        fprintf(stderr, "bench_quantize: key or tensor counts differ\n");
        goto done;
    }
    for (uint64_t i = 0; i < rl_gguf_tensor_count(fa); i++) {
        uint64_t la, lb;
        const char *na = rl_gguf_tensor_name(fa, i, &la), *nb = rl_gguf_tensor_name(fb, i, &lb);
        int same = la == lb && memcmp(na, nb, la) == 0 &&
                   rl_gguf_tensor_type(fa, i) == rl_gguf_tensor_type(fb, i) &&
                   rl_gguf_tensor_n_dims(fa, i) == rl_gguf_tensor_n_dims(fb, i) &&
                   rl_gguf_tensor_offset(fa, i) == rl_gguf_tensor_offset(fb, i) &&
                   rl_gguf_tensor_nbytes(fa, i) == rl_gguf_tensor_nbytes(fb, i);
        for (uint32_t d = 0; same && d < rl_gguf_tensor_n_dims(fa, i); d++)
            same = rl_gguf_tensor_ne(fa, i, d) == rl_gguf_tensor_ne(fb, i, d);
        if (!same || memcmp(rl_gguf_tensor_data(fa, i), rl_gguf_tensor_data(fb, i),
                            rl_gguf_tensor_nbytes(fa, i)) != 0) {
            fprintf(stderr, "bench_quantize: tensor %.*s differs\n", (int)la, na);
            goto done;
        }
    }
    differ = 0;
done:
    rl_gguf_close(fa);
    rl_gguf_close(fb);
    return differ;
}

/* Read PATH once, so that neither run pays for the disk. */
static void warm(const char *path) {
    static char buf[1 << 20];
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    while (fread(buf, 1, sizeof buf, f) == sizeof buf)
        ;
    fclose(f);
}

/* The file types measured: our name, llama.cpp's ftype number. */
static const struct { const char *name; int ftype; } bench_types[] = {
    {"q8_0", LL_FTYPE_MOSTLY_Q8_0}, {"q4_k_m", 15}, {"q6_k", 18}};
#define N_BENCH_TYPES (sizeof bench_types / sizeof bench_types[0])

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--make-input") == 0)
        return make_input(argv[2]);
    if (argc == 6 && (strcmp(argv[1], "--llama") == 0 || strcmp(argv[1], "--llama-fsync") == 0))
        return run_llama(argv[2], argv[3], argv[4], atoi(argv[5]), argv[1][7] != 0);
    if (argc != 4) {
        fprintf(stderr, "usage: bench_quantize LIBDIR RONTOLISP WORKDIR\n");
        return 2;
    }
    const char *dir = argv[1], *exe = argv[2], *work = argv[3];
    char self[4096], in[4096], out_llama[4096], out_ours[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("bench_quantize: /proc/self/exe");
        return 2;
    }
    self[n] = 0;
    snprintf(in, sizeof in, "%s/bench-quantize.f32.gguf", work);
    struct stat st;
    if (stat(in, &st) != 0) {
        char *mk[] = {self, "--make-input", in, NULL};
        if (measure(mk).status != 0) {
            fprintf(stderr, "bench_quantize: cannot make %s\n", in);
            return 2;
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int any_differ = 0;
    run sum_o[N_BENCH_TYPES], sum_l[N_BENCH_TYPES];
    for (size_t t = 0; t < N_BENCH_TYPES; t++) {
        const char *type = bench_types[t].name;
        char ftype[16];
        snprintf(ftype, sizeof ftype, "%d", bench_types[t].ftype);
        snprintf(out_llama, sizeof out_llama, "%s/bench-quantize.llama.%s.gguf", work, type);
        snprintf(out_ours, sizeof out_ours, "%s/bench-quantize.rontolisp.%s.gguf", work, type);
        warm(in);
        unlink(out_llama);
        unlink(out_ours);
        char *llama_argv[] = {self, "--llama", (char *)dir, in, out_llama, ftype, NULL};
        char *llama_sync_argv[] = {self, "--llama-fsync", (char *)dir, in, out_llama, ftype, NULL};
        char *ours_argv[] = {(char *)exe, "quantize", in, out_ours, (char *)type, NULL};
        run l = measure(llama_argv);
        unlink(out_llama);
        run ls = measure(llama_sync_argv), o = measure(ours_argv);
        if (l.status != 0 || ls.status != 0 || o.status != 0) {
            fprintf(stderr, "bench_quantize: %s: a run failed: llama.cpp status %d and %d, "
                            "rontolisp status %d\n", type, l.status, ls.status, o.status);
            return 2;
        }
        int differ = compare(out_llama, out_ours);
        any_differ |= differ;
        /* The same two on tmpfs, where writing and flushing cost no disk
         * time: the conversion's own speed. */
        run lt = {0, 0, -1}, ot = {0, 0, -1};
        char shm_llama[4096], shm_ours[4096];
        snprintf(shm_llama, sizeof shm_llama, "/dev/shm/bench-quantize.llama.%ld.gguf",
                 (long)getpid());
        snprintf(shm_ours, sizeof shm_ours, "/dev/shm/bench-quantize.rontolisp.%ld.gguf",
                 (long)getpid());
        if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
            char *lt_argv[] = {self, "--llama", (char *)dir, in, shm_llama, ftype, NULL};
            char *ot_argv[] = {(char *)exe, "quantize", in, shm_ours, (char *)type, NULL};
            lt = measure(lt_argv);
            unlink(shm_llama);
            ot = measure(ot_argv);
            unlink(shm_ours);
        }
        printf("quantize %s to %s (512 MiB F32, %d tensors of %d x %d), %ld CPUs\n", in, type,
               N_TENSORS, DIM, DIM, cpus);
        printf("  %-30s %10s %14s\n", "", "wall s", "peak RSS MiB");
        printf("  %-30s %10.3f %14.1f\n", "llama_model_quantize (v0.5.0)", l.wall,
               l.rss_kib / 1024.0);
        printf("  %-30s %10.3f %14.1f\n", "the same, then fsync", ls.wall, ls.rss_kib / 1024.0);
        printf("  %-30s %10.3f %14.1f\n", "rontolisp quantize (fsyncs)", o.wall,
               o.rss_kib / 1024.0);
        printf("  %-30s %10.2f %14.2f\n", "ratio rontolisp / llama", o.wall / l.wall,
               (double)o.rss_kib / (double)l.rss_kib);
        printf("  %-30s %10.2f %14.2f\n", "ratio rontolisp / llama+fsync", o.wall / ls.wall,
               (double)o.rss_kib / (double)ls.rss_kib);
        if (lt.status == 0 && ot.status == 0) {
            printf("  %-30s %10.3f %14.1f\n", "llama, output on tmpfs", lt.wall,
                   lt.rss_kib / 1024.0);
            printf("  %-30s %10.3f %14.1f\n", "rontolisp, output on tmpfs", ot.wall,
                   ot.rss_kib / 1024.0);
            printf("  %-30s %10.2f %14.2f\n", "ratio on tmpfs", ot.wall / lt.wall,
                   (double)ot.rss_kib / (double)lt.rss_kib);
        }
        printf("  tensors and metadata: %s\n\n", differ ? "DIFFERENT" : "the same bytes");
        fflush(stdout);
        sum_o[t] = o;
        sum_l[t] = l;
        unlink(out_llama);
        unlink(out_ours);
    }
    printf("%-8s %12s %12s %8s %14s %14s\n", "type", "ours s", "llama s", "ratio",
           "ours RSS MiB", "llama RSS MiB");
    for (size_t t = 0; t < N_BENCH_TYPES; t++)
        printf("%-8s %12.3f %12.3f %8.2f %14.1f %14.1f\n", bench_types[t].name, sum_o[t].wall,
               sum_l[t].wall, sum_o[t].wall / sum_l[t].wall, sum_o[t].rss_kib / 1024.0,
               sum_l[t].rss_kib / 1024.0);
    return any_differ ? 1 : 0;
}
