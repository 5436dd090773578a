/* test_llama_interop.c - rontolisp against llama.cpp's own library.
 *
 * dlopens libggml-base.so of llama.cpp v0.5.0 (ggml 0.25.1), the release that
 * made tests/golden/: tests/fetch-llama-lib.sh puts it in build/cache/llama/
 * (RL_LLAMA_LIB overrides the path).  Without it every part says SKIP and
 * nothing is counted.  Then, every byte compared:
 *
 * - Q8_0: rl_q8_quantize_f32_ref and _avx2 against quantize_row_q8_0_ref and
 *   ggml_quantize_chunk on millions of random blocks (mixed magnitudes, +-0
 *   blocks, exact and one-ulp-off .5 ties, f32-subnormal scales whose inverse
 *   is infinite, subnormal inputs, scales next to the f16 limit); inputs we
 *   refuse (non-finite, scale overflow) are not generated.  Q8_0
 *   dequantization, and f16 / bf16 to and from f32, against ggml's rows
 *   (where a NaN's payload differs, that is counted and printed, not failed).
 * - GGUF: files our writer makes (every value type, strings, arrays, empty
 *   ones included; F32/F16/BF16/Q8_0 tensors; alignment 32 with and without
 *   the key, 64, no tensors), every golden file and the files
 *   `rontolisp convert` / `rontolisp quantize` write are read by
 *   gguf_init_from_file, tensor data included, with the same version, keys,
 *   value types and values, tensor names, types, offsets, sizes and bytes,
 *   data offset and alignment as our reader sees.  q8_align64.q8_0.gguf is
 *   refused by both; a nested array (which we read) is refused by llama.cpp.
 * - tests/bad/: both readers' verdicts are printed where they differ (a
 *   report, not assertions: the corpus is ours, stricter by design).
 *
 * Every call into llama.cpp's GGUF reader runs in a child process: its
 * GGML_ASSERTs abort, and a crash must show up as a failure (or a report),
 * not end the test.  The declarations below are written from ggml.h and
 * gguf.h of that release; no ggml code is used.  Run from the repository
 * root.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <signal.h> /* strsignal */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/q8.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"

#define DEFAULT_LIB "build/cache/llama/libggml-base.so"

/* ------------------------------------------------ llama.cpp's interface */

struct ll_gguf;     /* struct gguf_context */
struct ll_ggml;     /* struct ggml_context */
struct ll_tensor;   /* struct ggml_tensor */
struct ll_params {  /* struct gguf_init_params, passed by value */
    bool no_alloc;
    struct ll_ggml **ctx;
};
enum { LL_GGML_TYPE_Q8_0 = 8 };
enum { LL_LOG_INFO = 2 }; /* enum ggml_log_level: DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5 */

static struct {
    void (*log_set)(void (*cb)(int level, const char *text, void *user), void *user);
    struct ll_gguf *(*init_from_file)(const char *fname, struct ll_params params);
    void (*gguf_free)(struct ll_gguf *);
    uint32_t (*get_version)(const struct ll_gguf *);
    size_t (*get_alignment)(const struct ll_gguf *);
    size_t (*get_data_offset)(const struct ll_gguf *);
    int64_t (*get_n_kv)(const struct ll_gguf *);
    const char *(*get_key)(const struct ll_gguf *, int64_t);
    int (*get_kv_type)(const struct ll_gguf *, int64_t);
    int (*get_arr_type)(const struct ll_gguf *, int64_t);
    size_t (*get_arr_n)(const struct ll_gguf *, int64_t);
    const void *(*get_arr_data)(const struct ll_gguf *, int64_t);
    const char *(*get_arr_str)(const struct ll_gguf *, int64_t, size_t);
    const void *(*get_val_data)(const struct ll_gguf *, int64_t);
    const char *(*get_val_str)(const struct ll_gguf *, int64_t);
    int64_t (*get_n_tensors)(const struct ll_gguf *);
    const char *(*get_tensor_name)(const struct ll_gguf *, int64_t);
    int (*get_tensor_type)(const struct ll_gguf *, int64_t);
    size_t (*get_tensor_offset)(const struct ll_gguf *, int64_t);
    size_t (*get_tensor_size)(const struct ll_gguf *, int64_t);
    struct ll_tensor *(*get_tensor)(struct ll_ggml *, const char *);
    void *(*get_data)(const struct ll_tensor *);
    size_t (*nbytes)(const struct ll_tensor *);
    void (*ggml_free)(struct ll_ggml *);
    void (*quantize_row_q8_0_ref)(const float *, void *, int64_t);
    size_t (*quantize_chunk)(int type, const float *src, void *dst, int64_t start,
                             int64_t nrows, int64_t n_per_row, const float *imatrix);
    void (*quantize_init)(int type);
    void (*quantize_free)(void);
    void (*dequantize_row_q8_0)(const void *, float *, int64_t);
    void (*fp16_to_fp32_row)(const uint16_t *, float *, int64_t);
    void (*fp32_to_fp16_row)(const float *, uint16_t *, int64_t);
    void (*bf16_to_fp32_row)(const uint16_t *, float *, int64_t);
    void (*fp32_to_bf16_row)(const float *, uint16_t *, int64_t);
} ll;

/* What llama.cpp logged since ll_log_clear(), its lines joined by " | ". */
static char ll_log[600];
static size_t ll_log_len;
static int ll_log_eol; /* the last line ended: the next text starts a new one */

static void ll_log_clear(void) {
    ll_log[ll_log_len = 0] = 0;
    ll_log_eol = 0;
}

static void ll_log_cb(int level, const char *text, void *user) {
    (void)user;
    if (level == LL_LOG_INFO)
        return;
    for (; *text && ll_log_len + 4 < sizeof ll_log; text++) {
        if (*text == '\n') {
            ll_log_eol = 1;
            continue;
        }
        if (ll_log_eol && ll_log_len) {
            memcpy(ll_log + ll_log_len, " | ", 3);
            ll_log_len += 3;
        }
        ll_log_eol = 0;
        ll_log[ll_log_len++] = *text;
    }
    ll_log[ll_log_len] = 0;
}

/* Loads the library and every symbol; 1 on success, else a SKIP (no
 * library; a failure under CI=true) or a failure (a library without the
 * symbols) and 0. */
static int ll_load(void) {
    const char *path = getenv("RL_LLAMA_LIB");
    if (!path || !*path)
        path = DEFAULT_LIB;
    /* ggml_abort would otherwise run gdb on us for a backtrace. */
    setenv("GGML_NO_BACKTRACE", "1", 1);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        CHECK_SKIP_REFERENCE("llama.cpp library not loaded (%s): every llama.cpp comparison is skipped "
                   "(tests/fetch-llama-lib.sh fetches it)", dlerror());
        return 0;
    }
    const char *missing = NULL;
#define SYM(field, name)                                                     \
    do {                                                                     \
        if (!(*(void **)&ll.field = dlsym(h, name)) && !missing)             \
            missing = name;                                                  \
    } while (0)
    SYM(log_set, "ggml_log_set");
    SYM(init_from_file, "gguf_init_from_file");
    SYM(gguf_free, "gguf_free");
    SYM(get_version, "gguf_get_version");
    SYM(get_alignment, "gguf_get_alignment");
    SYM(get_data_offset, "gguf_get_data_offset");
    SYM(get_n_kv, "gguf_get_n_kv");
    SYM(get_key, "gguf_get_key");
    SYM(get_kv_type, "gguf_get_kv_type");
    SYM(get_arr_type, "gguf_get_arr_type");
    SYM(get_arr_n, "gguf_get_arr_n");
    SYM(get_arr_data, "gguf_get_arr_data");
    SYM(get_arr_str, "gguf_get_arr_str");
    SYM(get_val_data, "gguf_get_val_data");
    SYM(get_val_str, "gguf_get_val_str");
    SYM(get_n_tensors, "gguf_get_n_tensors");
    SYM(get_tensor_name, "gguf_get_tensor_name");
    SYM(get_tensor_type, "gguf_get_tensor_type");
    SYM(get_tensor_offset, "gguf_get_tensor_offset");
    SYM(get_tensor_size, "gguf_get_tensor_size");
    SYM(get_tensor, "ggml_get_tensor");
    SYM(get_data, "ggml_get_data");
    SYM(nbytes, "ggml_nbytes");
    SYM(ggml_free, "ggml_free");
    SYM(quantize_row_q8_0_ref, "quantize_row_q8_0_ref");
    SYM(quantize_chunk, "ggml_quantize_chunk");
    SYM(quantize_init, "ggml_quantize_init");
    SYM(quantize_free, "ggml_quantize_free");
    SYM(dequantize_row_q8_0, "dequantize_row_q8_0");
    SYM(fp16_to_fp32_row, "ggml_fp16_to_fp32_row");
    SYM(fp32_to_fp16_row, "ggml_fp32_to_fp16_row");
    SYM(bf16_to_fp32_row, "ggml_bf16_to_fp32_row");
    SYM(fp32_to_bf16_row, "ggml_fp32_to_bf16_row");
#undef SYM
    CHECK_MSG(!missing, "%s has no symbol %s: not llama.cpp v0.5.0's libggml-base", path, missing);
    if (missing)
        return 0;
    ll.log_set(ll_log_cb, NULL);
    fprintf(stderr, "llama.cpp library: %s\n", path);
    return 1;
}

/* --------------------------------------------------- child processes */

static char tmpdir[256];

static size_t read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* Runs fn(arg, out) in a child, which sends OUTSZ bytes of *out back.
 * Answers 1 when they arrived; else 0 and *why says how the child ended. */
static int in_child(void (*fn)(const void *arg, void *out), const void *arg, void *out,
                    size_t outsz, char *why, size_t whysz) {
    int fds[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0) {
        snprintf(why, whysz, "pipe: %s", strerror(errno));
        return 0;
    }
    pid_t pid = check_fork();
    if (pid < 0) {
        snprintf(why, whysz, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        close(fds[0]);
        fn(arg, out);
        ssize_t w = write(fds[1], out, outsz);
        fflush(stdout);
        fflush(stderr);
        _exit(w == (ssize_t)outsz ? 0 : 3);
    }
    close(fds[1]);
    size_t got = read_full(fds[0], out, outsz);
    close(fds[0]);
    int status = check_wait(pid, "a child running llama.cpp");
    if (got == outsz && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 1;
    if (WIFSIGNALED(status))
        snprintf(why, whysz, "crashed with signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(why, whysz, "exited with status %d before answering", WEXITSTATUS(status));
    return 0;
}

/* Checks made in a child are added to ours; a child that dies before
 * reporting counts as one failure. */
struct isolated_arg {
    void (*fn)(const void *);
    const void *arg;
};

static void isolated_body(const void *arg, void *out) {
    const struct isolated_arg *a = arg;
    check_passed_ = check_failed_ = 0;
    a->fn(a->arg);
    long *counts = out;
    counts[0] = check_passed_;
    counts[1] = check_failed_;
}

static void isolated(const char *what, void (*fn)(const void *), const void *arg) {
    struct isolated_arg a = {fn, arg};
    long counts[2];
    char why[200];
    if (in_child(isolated_body, &a, counts, sizeof counts, why, sizeof why)) {
        check_passed_ += counts[0];
        check_failed_ += counts[1];
    } else {
        CHECK_MSG(0, "%s: the child reading it with llama.cpp %s", what, why);
    }
}

/* llama.cpp's verdict on one file, read with its tensor data (no_alloc
 * false, as llama-gguf reads) or only the metadata (no_alloc true with a
 * ggml context, as llama.cpp's model loader reads).  The child's stderr goes
 * to a file, so that an abort's GGML_ASSERT line can be reported. */
struct probe_arg {
    const char *path, *errpath;
    bool no_alloc;
};
struct probe_out {
    int accepted;
    char log[sizeof ll_log];
};

static void probe_body(const void *arg, void *out) {
    const struct probe_arg *a = arg;
    struct probe_out *o = out;
    struct ll_ggml *g = NULL;
    int fd = open(a->errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
    ll_log_clear();
    struct ll_gguf *ctx = ll.init_from_file(a->path, (struct ll_params){a->no_alloc, &g});
    o->accepted = ctx != NULL;
    snprintf(o->log, sizeof o->log, "%s", ll_log);
    if (ctx)
        ll.gguf_free(ctx);
    if (g)
        ll.ggml_free(g);
}

/* 1 accepted, 0 refused, -1 crashed; o->log holds what llama.cpp logged or
 * how it died (with its assertion, the source path cut to the file name). */
static int probe(const char *path, bool no_alloc, struct probe_out *o) {
    char errpath[400];
    snprintf(errpath, sizeof errpath, "%s/probe.err", tmpdir);
    struct probe_arg a = {path, errpath, no_alloc};
    memset(o, 0, sizeof *o);
    int ok = in_child(probe_body, &a, o, sizeof *o, o->log, sizeof o->log);
    char *err = slurp(errpath, NULL), *as = err ? strstr(err, ": GGML_ASSERT") : NULL;
    unlink(errpath);
    if (!ok && as) {
        char *from = as, *nl = strchr(as, '\n');
        while (from > err && from[-1] != '/' && from[-1] != '\n')
            from--;
        if (nl)
            *nl = 0;
        size_t len = strlen(o->log);
        snprintf(o->log + len, sizeof o->log - len, ": %s", from);
    }
    free(err);
    return ok ? o->accepted : -1;
}

/* ------------------------------------------------------------- Q8_0 */

static float from_bits(uint32_t u) { return rl_gguf_f32_from_bits(u); }

#define CHUNK_BLOCKS (1 << 16)
#define ROW_BLOCKS 64 /* rows of 2048 values for ggml_quantize_chunk */
#define N_CHUNKS 48   /* 3,145,728 blocks */

enum { K_GAUSS, K_ZERO, K_TIE, K_NEAR_TIE, K_TINY, K_BITS, K_ONE, K_TOP, K_INT, K_SUBN, K_COUNT };
static const char *const kind_name[K_COUNT] = {
    "gaussian", "+-0", "exact tie", "near tie", "subnormal d", "random bits",
    "one nonzero", "near f16 limit", "integers", "subnormal inputs"};

/* One block of 32 finite values of kind K whose scale f16 can hold. */
static void gen_block(float *x, int k) {
    int e;
    switch (k) {
    case K_GAUSS: /* mixed magnitudes, block to block */
        e = rnd_int(-40, 20);
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf(rnd_gauss(), e);
        break;
    case K_ZERO:
        for (int j = 0; j < 32; j++)
            x[j] = (rnd() & 1) ? -0.0f : 0.0f;
        break;
    case K_TIE:      /* d = 2^e exactly, so x*id = m + 0.5 exactly */
    case K_NEAR_TIE: /* the same, some values one ulp away */
        e = rnd_int(-24, 12);
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf((float)rnd_int(-127, 126) + 0.5f, e);
        x[rnd() % 32] = ldexpf((rnd() & 1) ? 127.0f : -127.0f, e);
        if (k == K_NEAR_TIE)
            for (int j = 0; j < 32; j++)
                if (rnd() & 1)
                    x[j] = nextafterf(x[j], (rnd() & 1) ? INFINITY : -INFINITY);
        break;
    case K_TINY: /* d an f32 subnormal; below 2^-128 1/d is +inf */
        e = rnd_int(-150, -118);
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf(rnd_gauss(), e);
        break;
    case K_BITS: /* any finite pattern below 2^23 */
        for (int j = 0; j < 32; j++) {
            uint32_t u = (uint32_t)rnd();
            uint32_t ex = ((u >> 23) & 0xffu) % 0x96u;
            x[j] = from_bits((u & 0x807fffffu) | ex << 23);
        }
        break;
    case K_ONE:
        for (int j = 0; j < 32; j++)
            x[j] = (rnd() & 1) ? -0.0f : 0.0f;
        x[rnd() % 32] = ldexpf(rnd_gauss(), rnd_int(-149, 22));
        break;
    case K_TOP: { /* amax just below 127 * 65520 = 8321040 */
        float top = 8321040.0f - 0.5f * (float)rnd_int(1, 4000);
        for (int j = 0; j < 32; j++)
            x[j] = top * (float)(rnd_unit() * 2 - 1);
        x[rnd() % 32] = (rnd() & 1) ? top : -top;
        break;
    }
    case K_INT:
        e = (rnd() & 1) ? 0 : rnd_int(-8, 8);
        for (int j = 0; j < 32; j++)
            x[j] = ldexpf((float)rnd_int(-127, 127), e);
        break;
    default: /* K_SUBN: f32 subnormals beside ordinary values */
        for (int j = 0; j < 32; j++)
            x[j] = (rnd() & 3) ? from_bits((uint32_t)rnd() & 0x807fffffu) : rnd_gauss();
        break;
    }
    /* A scale f16 cannot hold is refused by us (and by llama-quantize). */
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    while (amax / 127.0f >= 65520.0f) {
        for (int j = 0; j < 32; j++)
            x[j] *= 0.5f;
        amax *= 0.5f;
    }
}

/* Differences between two runs of blocks: their count, the first printed
 * once with its input. */
static long diff_blocks(const char *what, const float *x, const rl_block_q8_0 *a,
                        const rl_block_q8_0 *b, size_t nb, long *shown) {
    long n = 0;
    for (size_t i = 0; i < nb; i++) {
        if (memcmp(&a[i], &b[i], sizeof a[i]) == 0)
            continue;
        if (n++ == 0 && (*shown)++ < 3) {
            fprintf(stderr, "%s: block differs; input bits:", what);
            for (int j = 0; j < 32; j++)
                fprintf(stderr, " %08x", rl_gguf_f32_bits(x[i * 32 + j]));
            fprintf(stderr, "\n  ours   d=%04x q=", a[i].d);
            for (int j = 0; j < 32; j++)
                fprintf(stderr, " %d", a[i].qs[j]);
            fprintf(stderr, "\n  llama  d=%04x q=", b[i].d);
            for (int j = 0; j < 32; j++)
                fprintf(stderr, " %d", b[i].qs[j]);
            fputc('\n', stderr);
        }
    }
    return n;
}

static void test_q8_quantize(void) {
    const size_t nb = CHUNK_BLOCKS, n = nb * 32;
    float *x = malloc(n * sizeof *x);
    rl_block_q8_0 *ours = malloc(nb * sizeof *ours), *ours2 = malloc(nb * sizeof *ours2),
                  *ref = malloc(nb * sizeof *ref), *chunk = malloc(nb * sizeof *chunk);
    CHECK(x && ours && ours2 && ref && chunk);
    if (!(x && ours && ours2 && ref && chunk))
        goto out;
    int avx2 = rl_cpu_has_avx2();
    if (!avx2)
        CHECK_SKIP("no AVX2 here: rl_q8_quantize_f32_avx2 not compared");
    ll.quantize_init(LL_GGML_TYPE_Q8_0);
    long d_ref = 0, d_avx2 = 0, d_chunk = 0, shown = 0, bad_status = 0, bad_size = 0;
    long kinds[K_COUNT] = {0}, inf_id = 0, ties = 0;
    rng_state = 0x5eed0001u;
    for (int c = 0; c < N_CHUNKS; c++) {
        for (size_t i = 0; i < nb; i++) {
            int k = (int)(rnd() % K_COUNT);
            kinds[k]++;
            gen_block(x + i * 32, k);
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(x[i * 32 + j]));
            float d = amax / 127.0f;
            inf_id += d != 0 && isinf(1.0f / d);
            ties += k == K_TIE;
        }
        bad_status += rl_q8_quantize_f32_ref(x, n, ours, NULL) != RL_OK;
        ll.quantize_row_q8_0_ref(x, ref, (int64_t)n);
        d_ref += diff_blocks("rl_q8_quantize_f32_ref vs quantize_row_q8_0_ref", x, ours, ref,
                             nb, &shown);
        if (avx2) {
            bad_status += rl_q8_quantize_f32_avx2(x, n, ours2, NULL) != RL_OK;
            d_avx2 += diff_blocks("rl_q8_quantize_f32_avx2 vs quantize_row_q8_0_ref", x, ours2,
                                  ref, nb, &shown);
        }
        /* As llama-quantize calls it: rows of 2048, in two calls with start. */
        const int64_t per_row = ROW_BLOCKS * 32, rows = (int64_t)nb / ROW_BLOCKS;
        const int64_t split = 1 + (int64_t)(rnd() % (uint64_t)(rows - 1));
        memset(chunk, 0xa5, nb * sizeof *chunk);
        size_t s1 = ll.quantize_chunk(LL_GGML_TYPE_Q8_0, x, chunk, 0, split, per_row, NULL);
        size_t s2 = ll.quantize_chunk(LL_GGML_TYPE_Q8_0, x, chunk, split * per_row, rows - split,
                                      per_row, NULL);
        bad_size += s1 != (size_t)split * ROW_BLOCKS * 34 ||
                    s2 != (size_t)(rows - split) * ROW_BLOCKS * 34;
        d_chunk += diff_blocks("rl_q8_quantize_f32_ref vs ggml_quantize_chunk", x, ours, chunk,
                               nb, &shown);
    }
    ll.quantize_free();
    long total = (long)nb * N_CHUNKS;
    CHECK_MSG(bad_status == 0, "%ld chunks refused by our quantizer", bad_status);
    CHECK_MSG(bad_size == 0, "ggml_quantize_chunk answered a wrong size %ld times", bad_size);
    CHECK_MSG(d_ref == 0, "ref: %ld of %ld blocks differ from quantize_row_q8_0_ref", d_ref, total);
    if (avx2)
        CHECK_MSG(d_avx2 == 0, "avx2: %ld of %ld blocks differ from quantize_row_q8_0_ref",
                  d_avx2, total);
    CHECK_MSG(d_chunk == 0, "ref: %ld of %ld blocks differ from ggml_quantize_chunk", d_chunk,
              total);
    /* The corners were reached. */
    CHECK_MSG(inf_id > 1000 && ties > 1000, "corners: %ld blocks with 1/d = inf, %ld tie blocks",
              inf_id, ties);
    fprintf(stderr, "Q8_0: %ld random blocks (%ld with 1/d = inf, %ld exact-tie blocks; kinds:",
            total, inf_id, ties);
    for (int k = 0; k < K_COUNT; k++)
        fprintf(stderr, "%s %s %ld", k ? "," : "", kind_name[k], kinds[k]);
    fprintf(stderr, ") equal to llama.cpp's bytes: ref %s, avx2 %s\n", d_ref ? "NO" : "yes",
            !avx2 ? "skipped" : d_avx2 ? "NO" : "yes");
out:
    free(x);
    free(ours);
    free(ours2);
    free(ref);
    free(chunk);
}

/* Dequantization of arbitrary blocks (any d bits: subnormal, inf, NaN). */
static void test_q8_dequantize(void) {
    const size_t nb = 1 << 16;
    rl_block_q8_0 *b = malloc(nb * sizeof *b);
    float *y1 = malloc(nb * 32 * sizeof *y1), *y2 = malloc(nb * 32 * sizeof *y2),
          *y3 = malloc(nb * 32 * sizeof *y3);
    CHECK(b && y1 && y2 && y3);
    if (b && y1 && y2 && y3) {
        rng_state = 0x5eed0002u;
        for (size_t i = 0; i < nb; i++) {
            b[i].d = (uint16_t)(i < 65536 ? i : rnd()); /* every d once */
            for (int j = 0; j < 32; j++)
                b[i].qs[j] = (int8_t)rnd();
        }
        ll.dequantize_row_q8_0(b, y1, (int64_t)nb * 32);
        rl_q8_dequantize_ref(b, nb, y2);
        long d_ref = 0, d_avx2 = 0;
        for (size_t i = 0; i < nb * 32; i++)
            d_ref += rl_gguf_f32_bits(y1[i]) != rl_gguf_f32_bits(y2[i]);
        CHECK_MSG(d_ref == 0, "rl_q8_dequantize_ref: %ld of %zu values differ from "
                  "dequantize_row_q8_0", d_ref, nb * 32);
        if (rl_cpu_has_avx2()) {
            rl_q8_dequantize_avx2(b, nb, y3);
            for (size_t i = 0; i < nb * 32; i++)
                d_avx2 += rl_gguf_f32_bits(y1[i]) != rl_gguf_f32_bits(y3[i]);
            CHECK_MSG(d_avx2 == 0, "rl_q8_dequantize_avx2: %ld of %zu values differ from "
                      "dequantize_row_q8_0", d_avx2, nb * 32);
        }
    }
    free(b);
    free(y1);
    free(y2);
    free(y3);
}

/* Compares one converted value with ggml's.  Exact, except that a NaN
 * need only be a NaN of the same sign: ggml-base's scalar code returns one
 * canonical NaN (narrowing) or quiets a signalling one (widening), where
 * numfmt.h keeps the payload, as F16C does; those are counted apart. */
struct conv_diff {
    const char *what;
    long exact, nan_payload;
    uint32_t first_in, first_ours, first_ggml, nan_in, nan_ours, nan_ggml;
};

static void conv_cmp(struct conv_diff *c, uint32_t in, int in_nan, uint32_t ours, uint32_t ggml,
                     int ours_nan, int ggml_nan, uint32_t sign) {
    if (ours == ggml)
        return;
    if (in_nan && ours_nan && ggml_nan && (ours & sign) == (ggml & sign)) {
        if (c->nan_payload++ == 0) {
            c->nan_in = in;
            c->nan_ours = ours;
            c->nan_ggml = ggml;
        }
    } else if (c->exact++ == 0) {
        c->first_in = in;
        c->first_ours = ours;
        c->first_ggml = ggml;
    }
}

static void conv_report(const struct conv_diff *c, long n) {
    CHECK_MSG(c->exact == 0, "%s: %ld of %ld differ from ggml's row function, first 0x%x: "
              "ours 0x%x, ggml 0x%x", c->what, c->exact, n, c->first_in, c->first_ours,
              c->first_ggml);
    if (c->nan_payload)
        fprintf(stderr, "NOTE %s: %ld NaNs keep another payload than ggml-base's (e.g. 0x%x: "
                "ours 0x%x, ggml 0x%x); every other value is bit-exact\n", c->what,
                c->nan_payload, c->nan_in, c->nan_ours, c->nan_ggml);
}

static int f16_nan(uint32_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }
static int bf16_nan(uint32_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu); }
static int f32_nan(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

/* f16 and bf16: every 16-bit pattern widened; narrowing on every f32 high
 * part with the low bits that decide rounding (0, 1, the tie and both its
 * neighbours, all ones, a random one). */
static void test_half_formats(void) {
    enum { NLOW = 7 };
    uint16_t *h = malloc(65536 * sizeof *h), *r = malloc((size_t)65536 * NLOW * sizeof *r);
    float *w = malloc(65536 * sizeof *w), *x = malloc((size_t)65536 * NLOW * sizeof *x);
    CHECK(h && w && x && r);
    if (!(h && w && x && r))
        goto out;
    struct conv_diff w16 = {.what = "f16 -> f32"}, wb16 = {.what = "bf16 -> f32"},
                     n16 = {.what = "f32 -> f16"}, nb16 = {.what = "f32 -> bf16"};
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    ll.fp16_to_fp32_row(h, w, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t o = rl_gguf_f32_bits(rl_gguf_f16_to_f32((uint16_t)i)), g = rl_gguf_f32_bits(w[i]);
        conv_cmp(&w16, i, f16_nan(i), o, g, f32_nan(o), f32_nan(g), 0x80000000u);
    }
    ll.bf16_to_fp32_row(h, w, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t o = rl_gguf_f32_bits(rl_gguf_bf16_to_f32((uint16_t)i)), g = rl_gguf_f32_bits(w[i]);
        conv_cmp(&wb16, i, bf16_nan(i), o, g, f32_nan(o), f32_nan(g), 0x80000000u);
    }
    conv_report(&w16, 65536);
    conv_report(&wb16, 65536);

    /* f32 -> f16: rounding is decided by the low 13 bits; -> bf16 by 16. */
    long cnt16 = 0, cntb16 = 0;
    rng_state = 0x5eed0003u;
    for (int pass = 0; pass < 9; pass++) { /* 8 passes of f16 (2^19 prefixes), 1 of bf16 */
        int bf = pass == 8;
        unsigned shift = bf ? 16 : 13;
        uint32_t lowmask = (1u << shift) - 1, half = 1u << (shift - 1);
        const uint32_t lows[NLOW - 1] = {0, 1, half - 1, half, half + 1, lowmask};
        size_t m = 0;
        for (uint32_t p = 0; p < 65536; p++) {
            uint32_t prefix = bf ? p : ((uint32_t)pass << 16 | p);
            for (int l = 0; l < NLOW; l++) {
                uint32_t low = l < NLOW - 1 ? lows[l] : (uint32_t)rnd() & lowmask;
                x[m++] = from_bits(prefix << shift | low);
            }
        }
        if (bf)
            ll.fp32_to_bf16_row(x, r, (int64_t)m);
        else
            ll.fp32_to_fp16_row(x, r, (int64_t)m);
        for (size_t i = 0; i < m; i++) {
            uint32_t in = rl_gguf_f32_bits(x[i]);
            if (bf)
                conv_cmp(&nb16, in, f32_nan(in), rl_gguf_f32_to_bf16(x[i]), r[i],
                         bf16_nan(rl_gguf_f32_to_bf16(x[i])), bf16_nan(r[i]), 0x8000u);
            else
                conv_cmp(&n16, in, f32_nan(in), rl_gguf_f32_to_f16(x[i]), r[i],
                         f16_nan(rl_gguf_f32_to_f16(x[i])), f16_nan(r[i]), 0x8000u);
        }
        *(bf ? &cntb16 : &cnt16) += (long)m;
    }
    conv_report(&n16, cnt16);
    conv_report(&nb16, cntb16);
    fprintf(stderr, "f16/bf16: all 65536 patterns widened, %ld f32 values narrowed to f16 and "
            "%ld to bf16, against ggml's row functions\n", cnt16, cntb16);
out:
    free(h);
    free(w);
    free(x);
    free(r);
}

/* ------------------------------------------------------------- GGUF */

/* Reads PATH with both readers (llama.cpp with its tensor data) and compares
 * everything both expose.  Runs in a child. */
static void compare_file(const void *arg) {
    const char *path = arg;
    char msg[RL_GGUF_MSG_SIZE] = "";
    rl_gguf_file *f = NULL;
    rl_gguf_status st = rl_gguf_open(path, &f, msg, sizeof msg, NULL);
    CHECK_MSG(st == RL_GGUF_OK, "%s: our reader refuses it: %s", path, msg);
    if (st != RL_GGUF_OK)
        return;
    struct ll_ggml *gctx = NULL;
    ll_log_clear();
    struct ll_gguf *g = ll.init_from_file(path, (struct ll_params){false, &gctx});
    CHECK_MSG(g && gctx, "%s: llama.cpp refuses it: %s", path, ll_log);
    if (!g || !gctx) {
        rl_gguf_close(f);
        return;
    }
    const uint8_t *bytes = rl_gguf_bytes(f);
    long bad = 0;
#define SAME(cond, ...)                                                      \
    do {                                                                     \
        if (!(cond) && bad++ < 5) {                                          \
            fprintf(stderr, "%s: ", path);                                   \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)
    uint64_t nt = rl_gguf_tensor_count(f), nkv = rl_gguf_kv_count(f);
    /* ggml pads the data offset only when there are tensors; we always do. */
    uint64_t want_off = nt ? rl_gguf_data_offset(f) : rl_gguf_header_end(f);
    SAME(ll.get_version(g) == rl_gguf_version(f), "version");
    SAME(ll.get_alignment(g) == rl_gguf_alignment(f), "alignment %zu vs ours %u",
         ll.get_alignment(g), rl_gguf_alignment(f));
    SAME(ll.get_data_offset(g) == want_off, "data offset %zu vs ours %" PRIu64,
         ll.get_data_offset(g), want_off);
    SAME(ll.get_n_kv(g) == (int64_t)nkv, "%" PRId64 " keys vs ours %" PRIu64, ll.get_n_kv(g), nkv);
    for (uint64_t i = 0; i < nkv && (int64_t)i < ll.get_n_kv(g); i++) {
        uint64_t klen;
        const char *k = rl_gguf_kv_key(f, i, &klen);
        const char *lk = ll.get_key(g, (int64_t)i);
        SAME(memcmp(lk, k, klen) == 0 && lk[klen] == 0, "key %" PRIu64 " '%s'", i, lk);
        int t = rl_gguf_kv_type(f, i);
        SAME(ll.get_kv_type(g, (int64_t)i) == t, "key %s: type %d vs ours %d", lk,
             ll.get_kv_type(g, (int64_t)i), t);
        rl_gguf_val v;
        if (rl_gguf_kv_value(f, i, &v) != RL_GGUF_OK || ll.get_kv_type(g, (int64_t)i) != t) {
            bad++;
            continue;
        }
        if (t == RL_GGUF_TYPE_STRING) {
            const char *s = ll.get_val_str(g, (int64_t)i);
            SAME(memcmp(s, bytes + v.offset, v.count) == 0 && s[v.count] == 0, "key %s: string",
                 lk);
        } else if (t != RL_GGUF_TYPE_ARRAY) {
            SAME(memcmp(ll.get_val_data(g, (int64_t)i), bytes + v.offset,
                        rl_gguf_type_size((uint32_t)t)) == 0,
                 "key %s: value", lk);
        } else {
            SAME(ll.get_arr_type(g, (int64_t)i) == (int)v.elem_type &&
                     ll.get_arr_n(g, (int64_t)i) == v.count,
                 "key %s: array type %d [%zu] vs ours %u [%" PRIu64 "]", lk,
                 ll.get_arr_type(g, (int64_t)i), ll.get_arr_n(g, (int64_t)i), v.elem_type,
                 v.count);
            if (ll.get_arr_n(g, (int64_t)i) != v.count)
                continue;
            if (v.elem_type == RL_GGUF_TYPE_STRING) {
                for (uint64_t j = 0; j < v.count; j++) {
                    rl_gguf_val e;
                    const char *s = ll.get_arr_str(g, (int64_t)i, j);
                    SAME(rl_gguf_array_get(f, &v, j, &e) == RL_GGUF_OK &&
                             memcmp(s, bytes + e.offset, e.count) == 0 && s[e.count] == 0,
                         "key %s: string %" PRIu64, lk, j);
                }
            } else if (v.elem_type != RL_GGUF_TYPE_ARRAY) {
                const void *p = NULL;
                SAME(rl_gguf_array_data(f, &v, &p) == RL_GGUF_OK &&
                         (v.count == 0 ||
                          memcmp(ll.get_arr_data(g, (int64_t)i), p,
                                 v.count * rl_gguf_type_size(v.elem_type)) == 0),
                     "key %s: array elements", lk);
            } else {
                SAME(0, "key %s: llama.cpp read a nested array", lk);
            }
        }
    }
    SAME(ll.get_n_tensors(g) == (int64_t)nt, "%" PRId64 " tensors vs ours %" PRIu64,
         ll.get_n_tensors(g), nt);
    for (uint64_t i = 0; i < nt && (int64_t)i < ll.get_n_tensors(g); i++) {
        uint64_t nlen, nbytes = rl_gguf_tensor_nbytes(f, i);
        const char *name = rl_gguf_tensor_name(f, i, &nlen);
        const char *ln = ll.get_tensor_name(g, (int64_t)i);
        SAME(memcmp(ln, name, nlen) == 0 && ln[nlen] == 0, "tensor %" PRIu64 " '%s'", i, ln);
        SAME(ll.get_tensor_type(g, (int64_t)i) == (int)rl_gguf_tensor_type(f, i), "%s: type", ln);
        SAME(ll.get_tensor_offset(g, (int64_t)i) == rl_gguf_tensor_offset(f, i),
             "%s: offset %zu vs ours %" PRIu64, ln, ll.get_tensor_offset(g, (int64_t)i),
             rl_gguf_tensor_offset(f, i));
        SAME(ll.get_tensor_size(g, (int64_t)i) == nbytes, "%s: %zu bytes vs ours %" PRIu64, ln,
             ll.get_tensor_size(g, (int64_t)i), nbytes);
        struct ll_tensor *t = ll.get_tensor(gctx, ln);
        SAME(t && ll.nbytes(t) == nbytes &&
                 (nbytes == 0 || memcmp(ll.get_data(t), rl_gguf_tensor_data(f, i), nbytes) == 0),
             "%s: the data llama.cpp loaded differ", ln);
    }
#undef SAME
    CHECK_MSG(bad == 0, "%s: %ld differences between llama.cpp's reading and ours", path, bad);
    ll.gguf_free(g);
    ll.ggml_free(gctx);
    rl_gguf_close(f);
}

/* Every GGUF file under tests/golden/ (vocab/ and quants/ too): each one we
 * read, llama.cpp reads alike; each one we refuse (only
 * q8_align64.q8_0.gguf), it refuses. */
static void test_golden(void) {
    glob_t gl;
    int r1 = glob("tests/golden/*.gguf", 0, NULL, &gl);
    int r2 = glob("tests/golden/vocab/*.gguf", r1 == 0 ? GLOB_APPEND : 0, NULL, &gl);
    int r3 = glob("tests/golden/quants/*.gguf", r1 == 0 || r2 == 0 ? GLOB_APPEND : 0, NULL, &gl);
    CHECK_MSG(r1 == 0 && r2 == 0 && r3 == 0 && gl.gl_pathc >= 47, "golden files not found");
    if (r1 != 0 && r2 != 0)
        return;
    int ours_read = 0, align64_refused = 0;
    long failed_before = check_failed_;
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        const char *p = gl.gl_pathv[i];
        rl_gguf_file *f = NULL;
        char msg[RL_GGUF_MSG_SIZE] = "";
        if (rl_gguf_open(p, &f, msg, sizeof msg, NULL) == RL_GGUF_OK) {
            rl_gguf_close(f);
            ours_read++;
            isolated(p, compare_file, p);
            continue;
        }
        struct probe_out o;
        int v = probe(p, false, &o);
        CHECK_MSG(v == 0, "%s: we refuse it (%s) but llama.cpp %s", p, msg,
                  v > 0 ? "reads it" : o.log);
        if (strstr(p, "/q8_align64.q8_0.gguf") && v == 0) {
            align64_refused = 1;
            fprintf(stderr, "%s: refused by both; llama.cpp: %s\n", p, o.log);
        }
    }
    CHECK_MSG(align64_refused, "q8_align64.q8_0.gguf is not refused by both readers");
    fprintf(stderr, "golden: %zu files; llama.cpp reads the %d we read %s\n", gl.gl_pathc,
            ours_read, check_failed_ == failed_before ? "with the same fields and bytes, and "
            "refuses the one we refuse" : "with DIFFERENCES (above)");
    globfree(&gl);
}

/* Our writer: every value type, strings and arrays (empty ones too), the
 * four tensor types with sizes that need padding.  ALIGN 0: no
 * general.alignment key (32); otherwise the key with that value. */
static int write_ours(const char *path, uint32_t align, int tensors) {
    rl_gguf_writer *w = rl_gguf_writer_new();
    if (!w)
        return 0;
    if (align)
        rl_gguf_writer_set_alignment(w, align);
    else
        rl_gguf_writer_set_implicit_alignment(w, 1);
#define K(s) rl_gguf_w_key(w, s, strlen(s))
    K("general.architecture"); rl_gguf_w_str(w, "llama", 5);
    K("t.u8");   rl_gguf_w_uint(w, RL_GGUF_TYPE_U8, 255);
    K("t.i8");   rl_gguf_w_int(w, RL_GGUF_TYPE_I8, -128);
    K("t.u16");  rl_gguf_w_uint(w, RL_GGUF_TYPE_U16, 65535);
    K("t.i16");  rl_gguf_w_int(w, RL_GGUF_TYPE_I16, -32768);
    K("t.u32");  rl_gguf_w_uint(w, RL_GGUF_TYPE_U32, 4294967295u);
    K("t.i32");  rl_gguf_w_int(w, RL_GGUF_TYPE_I32, INT32_MIN);
    K("t.f32");  rl_gguf_w_float(w, RL_GGUF_TYPE_F32, (double)0.1f);
    K("t.f32.nan"); rl_gguf_w_float(w, RL_GGUF_TYPE_F32, NAN);
    K("t.bool.1"); rl_gguf_w_uint(w, RL_GGUF_TYPE_BOOL, 1);
    K("t.bool.0"); rl_gguf_w_uint(w, RL_GGUF_TYPE_BOOL, 0);
    K("t.u64");  rl_gguf_w_uint(w, RL_GGUF_TYPE_U64, UINT64_MAX);
    K("t.i64");  rl_gguf_w_int(w, RL_GGUF_TYPE_I64, INT64_MIN);
    K("t.f64");  rl_gguf_w_float(w, RL_GGUF_TYPE_F64, -0.0);
    K("t.f64.inf"); rl_gguf_w_float(w, RL_GGUF_TYPE_F64, -INFINITY);
    K("t.str");  rl_gguf_w_str(w, "h\xc3\xa9llo \xe2\x9c\x93", 11);
    K("t.str.empty"); rl_gguf_w_str(w, "", 0);
    K("t.str.nul"); rl_gguf_w_str(w, "a\0b", 3);
    static const struct { const char *key; uint32_t type; uint64_t n; } arrs[] = {
        {"a.u8", RL_GGUF_TYPE_U8, 3},   {"a.i8", RL_GGUF_TYPE_I8, 3},
        {"a.u16", RL_GGUF_TYPE_U16, 3}, {"a.i16", RL_GGUF_TYPE_I16, 3},
        {"a.u32", RL_GGUF_TYPE_U32, 5}, {"a.i32", RL_GGUF_TYPE_I32, 5},
        {"a.f32", RL_GGUF_TYPE_F32, 7}, {"a.u64", RL_GGUF_TYPE_U64, 2},
        {"a.i64", RL_GGUF_TYPE_I64, 2}, {"a.f64", RL_GGUF_TYPE_F64, 2},
        {"a.empty.u32", RL_GGUF_TYPE_U32, 0}, {"a.empty.f64", RL_GGUF_TYPE_F64, 0}};
    uint8_t raw[64];
    for (size_t a = 0; a < sizeof arrs / sizeof arrs[0]; a++) {
        K(arrs[a].key);
        rl_gguf_w_array_begin(w, arrs[a].type);
        for (size_t b = 0; b < sizeof raw; b++)
            raw[b] = (uint8_t)rnd();
        if (arrs[a].type == RL_GGUF_TYPE_F32) /* finite, and one NaN */
            for (uint64_t j = 0; j < arrs[a].n; j++) {
                float v = j == 3 ? NAN : rnd_gauss();
                memcpy(raw + 4 * j, &v, 4);
            }
        if (arrs[a].type == RL_GGUF_TYPE_F64)
            for (uint64_t j = 0; j < arrs[a].n; j++) {
                double v = rnd_gauss() * 1e300;
                memcpy(raw + 8 * j, &v, 8);
            }
        if (arrs[a].n)
            rl_gguf_w_array_raw(w, raw, arrs[a].n);
        rl_gguf_w_array_end(w);
    }
    K("a.bool"); rl_gguf_w_array_begin(w, RL_GGUF_TYPE_BOOL);
    rl_gguf_w_array_raw(w, "\1\0\1\1", 4);
    rl_gguf_w_array_end(w);
    K("a.str"); rl_gguf_w_array_begin(w, RL_GGUF_TYPE_STRING);
    rl_gguf_w_str(w, "", 0);
    rl_gguf_w_str(w, "xy", 2);
    rl_gguf_w_str(w, "\xc3\xbc", 2);
    rl_gguf_w_array_end(w);
    K("a.empty.str"); rl_gguf_w_array_begin(w, RL_GGUF_TYPE_STRING);
    rl_gguf_w_array_end(w);
#undef K

    static float f32[64 * 5];
    static uint16_t f16[33], bf16[64 * 3];
    static rl_block_q8_0 q8[2 * 5], q8b[4];
    for (int i = 0; i < 64 * 5; i++)
        f32[i] = rnd_gauss();
    rl_gguf_row_from_f32(RL_GGUF_GGML_F16, f32, f16, 33);
    rl_gguf_row_from_f32(RL_GGUF_GGML_BF16, f32, bf16, 64 * 3);
    rl_q8_quantize_f32(f32, 64 * 5, q8, NULL);
    rl_q8_quantize_f32(f32, 32 * 4, q8b, NULL);
    int64_t ne_f32[2] = {16, 4}, ne_f16[1] = {33}, ne_bf16[2] = {64, 3}, ne_q8[2] = {64, 5},
            ne_3d[3] = {8, 2, 3}, ne_4d[4] = {32, 1, 2, 2};
    if (tensors) {
        rl_gguf_w_tensor(w, "t.f32", 5, 2, ne_f32, RL_GGUF_GGML_F32, f32, 16 * 4 * 4);
        rl_gguf_w_tensor(w, "t.f16", 5, 1, ne_f16, RL_GGUF_GGML_F16, f16, sizeof f16);
        rl_gguf_w_tensor(w, "t.bf16", 6, 2, ne_bf16, RL_GGUF_GGML_BF16, bf16, sizeof bf16);
        rl_gguf_w_tensor(w, "t.q8_0", 6, 2, ne_q8, RL_GGUF_GGML_Q8_0, q8, sizeof q8);
        rl_gguf_w_tensor(w, "t.f32.3d", 8, 3, ne_3d, RL_GGUF_GGML_F32, f32, 8 * 2 * 3 * 4);
        rl_gguf_w_tensor(w, "t.q8_0.4d", 9, 4, ne_4d, RL_GGUF_GGML_Q8_0, q8b, sizeof q8b);
    }
    char msg[RL_GGUF_MSG_SIZE] = "";
    rl_gguf_status st = rl_gguf_writer_write(w, path, msg, sizeof msg, NULL);
    CHECK_MSG(st == RL_GGUF_OK, "writing %s: %s", path, msg);
    rl_gguf_writer_free(w);
    return st == RL_GGUF_OK;
}

static void test_our_writer(void) {
    static const struct { const char *name; uint32_t align; int tensors; } files[] = {
        {"ours-align32-nokey.gguf", 0, 1},
        {"ours-align32.gguf", 32, 1},
        {"ours-align64.gguf", 64, 1},
        {"ours-align64-notensors.gguf", 64, 0}};
    char path[400];
    long failed_before = check_failed_;
    rng_state = 0x5eed0004u;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, files[i].name);
        if (write_ours(path, files[i].align, files[i].tensors))
            isolated(path, compare_file, path);
        unlink(path);
    }

    /* A nested array: ours reads it, llama.cpp does not (gguf.h DECISIONS). */
    snprintf(path, sizeof path, "%s/ours-nested.gguf", tmpdir);
    rl_gguf_writer *w = rl_gguf_writer_new();
    rl_gguf_w_key(w, "nested", 6);
    rl_gguf_w_array_begin(w, RL_GGUF_TYPE_ARRAY);
    rl_gguf_w_array_begin(w, RL_GGUF_TYPE_I32);
    rl_gguf_w_int(w, RL_GGUF_TYPE_I32, 1);
    rl_gguf_w_array_end(w);
    rl_gguf_w_array_end(w);
    char msg[RL_GGUF_MSG_SIZE] = "";
    rl_gguf_file *f = NULL;
    CHECK(rl_gguf_writer_write(w, path, msg, sizeof msg, NULL) == RL_GGUF_OK &&
          rl_gguf_open(path, &f, msg, sizeof msg, NULL) == RL_GGUF_OK);
    rl_gguf_close(f);
    rl_gguf_writer_free(w);
    struct probe_out o;
    int v = probe(path, false, &o);
    CHECK_MSG(v == 0, "a nested array: llama.cpp %s", v > 0 ? "reads it" : o.log);
    unlink(path);
    fprintf(stderr, "our writer: 4 files (alignment 32 without and with the key, 64, 64 without "
            "tensors) %s; a nested array refused by llama.cpp: %s\n",
            check_failed_ == failed_before ? "read alike by llama.cpp" : "DIFFER (above)",
            v == 0 ? "yes" : "NO");
}

/* Files the rontolisp executable writes (skipped without it). */
static void test_executable(void) {
    const char *exe = getenv("RONTOLISP_EXE");
    if (!exe || !*exe)
        exe = "build/rontolisp";
    if (access(exe, X_OK) != 0) {
        CHECK_SKIP("%s not built: its convert and quantize outputs not compared", exe);
        return;
    }
    /* A calibration file by hand: massive channels 3, 500 and 777 of
     * blk.0.gauss_64x1024.weight, so quantize --calibration changes blocks. */
    char cal[400];
    snprintf(cal, sizeof cal, "%s/q8_main.cal.gguf", tmpdir);
    {
        static float mags[1024];
        for (int j = 0; j < 1024; j++)
            mags[j] = j == 3 || j == 500 || j == 777 ? 40.0f : 1.0f + 0.001f * (float)j;
        const char *name = "blk.0.gauss_64x1024.weight";
        int64_t ne[1] = {1024};
        rl_gguf_writer *w = rl_gguf_writer_new();
        char msg[RL_GGUF_MSG_SIZE] = "";
        CHECK(w && rl_gguf_w_tensor(w, name, strlen(name), 1, ne, RL_GGUF_GGML_F32, mags,
                                    sizeof mags) == RL_GGUF_OK &&
              rl_gguf_writer_write(w, cal, msg, sizeof msg, NULL) == RL_GGUF_OK);
        rl_gguf_writer_free(w);
    }
    /* Each ARGS has one %s for the output; the calibration file's path
     * follows as a second argument for the run that takes it. */
    static const struct { const char *out, *args; } runs[] = {
        {"pico-f16.gguf", "convert --random s1-pico %s --type f16"},
        {"pico-q8_0.gguf", "convert --random s1-pico %s --type q8_0"},
        {"q8_main.q8_0.gguf", "quantize tests/golden/q8_main.f32.gguf %s q8_0"},
        {"q8_main.cal.q8_0.gguf", "quantize tests/golden/q8_main.f32.gguf %s q8_0 --calibration %s"}};
    long failed_before = check_failed_;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char out[400], log[400], args[600], cmd[1400];
        snprintf(out, sizeof out, "%s/%s", tmpdir, runs[i].out);
        snprintf(log, sizeof log, "%s/run.log", tmpdir);
        snprintf(args, sizeof args, runs[i].args, out, cal);
        snprintf(cmd, sizeof cmd, "%s %s >%s 2>&1", exe, args, log);
        int rc = check_system(cmd);
        CHECK_MSG(rc == 0, "rontolisp %s: status %d; its output:", args, rc);
        if (rc != 0) {
            char *text = slurp(log, NULL);
            fprintf(stderr, "%s\n", text ? text : "(none)");
            free(text);
        } else {
            isolated(out, compare_file, out);
        }
        unlink(out);
        unlink(log);
    }
    unlink(cal);
    fprintf(stderr, "%s: convert --random s1-pico (f16, q8_0) and quantize q8_main (plain and "
            "--calibration): %s\n", exe,
            check_failed_ == failed_before ? "read alike by llama.cpp" : "FAILED (above)");
}

/* tests/bad/ through both readers: the differences, printed; ours refuses
 * every file (the corpus is hostile by construction), which llama.cpp need
 * not. */
static void test_bad_corpus(void) {
    glob_t gl;
    if (glob("tests/bad/*.gguf", 0, NULL, &gl) != 0) {
        CHECK_MSG(0, "tests/bad/*.gguf not found");
        return;
    }
    int differ = 0, crashes = 0, both = 0;
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        const char *p = gl.gl_pathv[i];
        rl_gguf_file *f = NULL;
        char msg[RL_GGUF_MSG_SIZE] = "";
        rl_gguf_status st = rl_gguf_open(p, &f, msg, sizeof msg, NULL);
        rl_gguf_close(f);
        struct probe_out meta, data;
        int vm = probe(p, true, &meta), vd = probe(p, false, &data);
        int ours = st == RL_GGUF_OK;
        CHECK_EACH(!ours, "%s: our reader read a file of the hostile corpus", p);
        crashes += vm < 0 || vd < 0;
        if (vm == ours && vd == ours) {
            both++;
            continue;
        }
        differ++;
        char ours_v[RL_GGUF_MSG_SIZE + 40], meta_v[sizeof meta.log + 20], data_v[sizeof data.log + 20];
        snprintf(ours_v, sizeof ours_v, ours ? "reads it" : "refuses (%s: %s)",
                 rl_gguf_status_name(st), msg);
        snprintf(meta_v, sizeof meta_v, vm > 0 ? "reads it" : vm == 0 ? "refuses (%s)" : "%s",
                 meta.log);
        snprintf(data_v, sizeof data_v, vd > 0 ? "reads it" : vd == 0 ? "refuses (%s)" : "%s",
                 data.log);
        fprintf(stderr, "bad corpus %s: ours %s; llama.cpp, metadata only: %s; with data: %s\n",
                strrchr(p, '/') + 1, ours_v, meta_v, data_v);
    }
    fprintf(stderr, "bad corpus: %zu files, %d with the same verdict from both readers, %d "
            "different, %d crash llama.cpp\n", gl.gl_pathc, both, differ, crashes);
    globfree(&gl);
}

int main(void) {
    if (!ll_load()) {
        CHECK_SKIP("Q8_0 against quantize_row_q8_0_ref / ggml_quantize_chunk");
        CHECK_SKIP("GGUF files against gguf_init_from_file");
        return check_report("llama_interop");
    }
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/rl-test-llama.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK_CASE(test_q8_quantize());
    CHECK_CASE(test_q8_dequantize());
    CHECK_CASE(test_half_formats());
    CHECK_CASE(test_golden());
    CHECK_CASE(test_our_writer());
    CHECK_CASE(test_executable());
    CHECK_CASE(test_bad_corpus());
    rmdir(tmpdir);
    return check_report("llama_interop");
}
