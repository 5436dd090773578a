/* test_llama_model.c - llama.cpp's model loader on the files `rontolisp
 * convert --encoder-only` writes.
 *
 * llama.cpp's GGUF reader accepting a file (test_llama_interop.c) says
 * nothing about its model loader, which checks every key it needs and the
 * shape of every tensor it knows, and refuses any tensor it does not.  This
 * test dlopens libllama of llama.cpp v0.5.0 (the npm package
 * @node-llama-cpp/linux-x64@3.22.1, the release that made tests/golden/,
 * which tests/fetch-llama-lib.sh puts in build/cache/llama/; RL_LLAMA_LIB, a folder or
 * a file in it, overrides it), loads its CPU backends with
 * ggml_backend_load_all_from_path, and for every --encoder-only file of
 * --random s1-pico|s1-nano|s1-micro x --type f32|f16|bf16|q8_0 requires
 * llama_model_load_from_file to accept it (and for two with --massive
 * channels), llama_init_from_model to make a
 * context, and llama_encode of a few tokens to build and run the graph and
 * answer finite embeddings; the same for Hugging Face ModernBERT
 * directories (no head, the masked-LM head in bf16 shards, the classifier
 * head) converted without --encoder-only; and that the loader refuses the full file with
 * the decision head, as README says it does.  Without the library or the executable every
 * part says SKIP and nothing is counted.
 *
 * Each file is loaded in a child process: llama.cpp aborts on some
 * failures, and a crash must show up as a failure, not end the test.  The
 * declarations below are written from that release's include/llama.h and
 * ggml-backend.h; no llama.cpp code is used.  Run from the repository root.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/c/check.h"
#include "tests/c/testutil.h"
#include "tools/llama_api.h"


/* ------------------------------------------------ llama.cpp's interface */

enum { LL_LOG_WARN = 3, LL_LOG_ERROR = 4 }; /* enum ggml_log_level */

static struct ll_api ll;

/* llama.cpp's warnings and errors since the child started, one line each,
 * printed only when the file is refused. */
static char ll_log[2000];

static void ll_log_cb(int level, const char *text, void *user) {
    (void)user;
    if (level != LL_LOG_WARN && level != LL_LOG_ERROR)
        return;
    size_t len = strlen(ll_log);
    snprintf(ll_log + len, sizeof ll_log - len, "%s", text);
}

/* Loads libllama (which finds libggml through its run path) and every
 * symbol; 1 on success, else a SKIP (no library; a failure under CI=true)
 * or a failure (a library without the symbols) and 0. */
static int ll_load(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/libllama.v0.5.0.so", dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        CHECK_SKIP_REFERENCE("llama.cpp's libllama not loaded (%s): its model loader is not tried "
                   "(tests/fetch-llama-lib.sh fetches it)", dlerror());
        return 0;
    }
    snprintf(path, sizeof path, "%s/libggml.v0.5.0.so", dir);
    void *g = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g) {
        CHECK_MSG(0, "libllama loaded but not libggml: %s", dlerror());
        return 0;
    }
    const char *missing = ll_api_resolve(&ll, h, g);
    CHECK_MSG(!missing, "%s has no symbol %s: not llama.cpp v0.5.0's libllama", dir, missing);
    if (missing)
        return 0;
    fprintf(stderr, "llama.cpp libraries: %s\n", dir);
    return 1;
}

/* ---------------------------------------------------------- one file */

/* What the child found, as its exit status. */
enum { LOADED = 0, NO_MODEL = 10, NO_CONTEXT, ENCODE_FAILED, NO_EMBEDDINGS, NOT_FINITE };

static const char *verdict_name(int v) {
    switch (v) {
    case NO_MODEL: return "llama_model_load_from_file refused it";
    case NO_CONTEXT: return "llama_init_from_model failed";
    case ENCODE_FAILED: return "llama_encode failed";
    case NO_EMBEDDINGS: return "llama_get_embeddings_seq answered NULL";
    case NOT_FINITE: return "the embeddings hold a NaN or infinity";
    default: return "the child ended another way";
    }
}

/* In the child: load, make a context, encode [CLS] a few tokens [SEP]
 * (ids below every preset's vocabulary) and read the pooled embedding, or
 * every token's when the file names no pooling. */
static int load_and_encode(const char *path, const char *dir) {
    ll.log_set(ll_log_cb, NULL);
    ll.backend_init();
    ll.load_all_from_path(dir);
    struct ll_model *m = ll.model_load(path, ll.model_default_params());
    if (!m)
        return NO_MODEL;
    struct ll_context_params cp = ll.context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = cp.n_ubatch = 64;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.embeddings = true;
    struct ll_context *c = ll.init_from_model(m, cp);
    if (!c)
        return NO_CONTEXT;
    int32_t tokens[] = {2, 300, 301, 77, 500, 3};
    if (ll.encode(c, ll.batch_get_one(tokens, 6)) != 0)
        return ENCODE_FAILED;
    int32_t n = ll.n_embd(m);
    const float *e = ll.get_embeddings_seq(c, 0);
    if (!e) {
        e = ll.get_embeddings(c);
        n *= 6;
    }
    if (!e)
        return NO_EMBEDDINGS;
    for (int32_t i = 0; i < n; i++)
        if (!isfinite(e[i]))
            return NOT_FINITE;
    ll.free(c);
    ll.model_free(m);
    return LOADED;
}

/* Runs load_and_encode in a child; its verdict, or -1 with *why set when
 * it crashed or ended otherwise.  What llama.cpp logged goes to LOGPATH. */
static int try_file(const char *path, const char *dir, const char *logpath, char *why,
                    size_t whysz) {
    pid_t pid = check_fork();
    if (pid < 0) {
        snprintf(why, whysz, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int v = load_and_encode(path, dir);
        FILE *f = fopen(logpath, "w");
        if (f) {
            fputs(ll_log, f);
            fclose(f);
        }
        _exit(v);
    }
    int status = check_wait(pid, "llama.cpp loading a converted file");
    if (WIFSIGNALED(status)) {
        snprintf(why, whysz, "crashed with signal %d", WTERMSIG(status));
        return -1;
    }
    return WEXITSTATUS(status);
}

/* Runs `EXE convert ARGS OUT` into TMPDIR and requires llama.cpp (in DIR)
 * to load and encode the result; answers 1 when it did. */
static int convert_and_load(const char *exe, const char *args, const char *tmpdir,
                            const char *dir) {
    char out[400], log[400], cmd[1400], why[200] = "";
    int ok = 0;
    snprintf(out, sizeof out, "%s/converted.gguf", tmpdir);
    snprintf(log, sizeof log, "%s/run.log", tmpdir);
    snprintf(cmd, sizeof cmd, "%s convert %s %s >%s 2>&1", exe, args, out, log);
    int rc = check_system(cmd);
    CHECK_MSG(rc == 0, "rontolisp convert %s: status %d", args, rc);
    if (rc == 0) {
        int v = try_file(out, dir, log, why, sizeof why);
        CHECK_MSG(v == LOADED, "%s: %s", args, v < 0 ? why : verdict_name(v));
        if (v != LOADED) {
            char *text = slurp(log, NULL);
            fprintf(stderr, "  llama.cpp said: %s\n", text && *text ? text : "(nothing)");
            free(text);
        }
        ok = v == LOADED;
    }
    unlink(out);
    unlink(log);
    return ok;
}

/* Hugging Face directories the executable writes (a script calling
 * write-random-hf): no head; the masked-LM head, three bf16 shards, names
 * without "model."; the classifier head in f16.  EXE converts them in
 * TMPDIR and llama.cpp's library in DIR loads them. */
static void test_hf_directories(const char *exe, const char *tmpdir, const char *dir) {
    static const struct { const char *dir, *args, *type; } hf[] = {
        {"hf-model", ":dtype :f32", "q8_0"},
        {"hf-mlm", ":dtype :bf16 :shards 3 :prefix \"\" :head :masked-lm", "f16"},
        {"hf-cls", ":dtype :f16 :head :classifier", "bf16"}};
    char script[400];
    snprintf(script, sizeof script, "%s/write-hf.lisp", tmpdir);
    FILE *sf = fopen(script, "w");
    CHECK(sf != NULL);
    for (size_t i = 0; sf && i < 3; i++)
        fprintf(sf, "(rontolisp:write-random-hf \"%s/%s\" \"s1-pico\" %s)\n", tmpdir, hf[i].dir,
                hf[i].args);
    if (sf)
        fclose(sf);
    char cmd0[1000];
    snprintf(cmd0, sizeof cmd0, "%s script %s", exe, script);
    CHECK_MSG(check_system(cmd0) == 0, "%s: writing the Hugging Face directories failed", cmd0);
    for (size_t i = 0; i < 3; i++) {
        char out[400], log[400], cmd[1400], why[200] = "";
        snprintf(out, sizeof out, "%s/%s.gguf", tmpdir, hf[i].dir);
        snprintf(log, sizeof log, "%s/run.log", tmpdir);
        snprintf(cmd, sizeof cmd, "%s convert %s/%s %s --type %s >%s 2>&1", exe, tmpdir, hf[i].dir,
                 out, hf[i].type, log);
        int rc = check_system(cmd);
        CHECK_MSG(rc == 0, "rontolisp convert of %s: status %d", hf[i].dir, rc);
        if (rc == 0) {
            int v = try_file(out, dir, log, why, sizeof why);
            CHECK_MSG(v == LOADED, "%s (%s): %s", hf[i].dir, hf[i].args,
                      v < 0 ? why : verdict_name(v));
            if (v != LOADED) {
                char *text = slurp(log, NULL);
                fprintf(stderr, "  llama.cpp said: %s\n", text && *text ? text : "(nothing)");
                free(text);
            }
        }
        unlink(out);
        unlink(log);
        snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'", tmpdir, hf[i].dir);
        CHECK(check_system(cmd) == 0);
    }
    unlink(script);
}

/* The full decision file: the head's blocks are not ModernBERT blocks,
 * and the loader refuses tensors it does not know (README says so). */
static void test_decision_file(const char *exe, const char *tmpdir, const char *dir) {
    char out[400], log[400], cmd[1400], why[200] = "";
    snprintf(out, sizeof out, "%s/full.gguf", tmpdir);
    snprintf(log, sizeof log, "%s/run.log", tmpdir);
    snprintf(cmd, sizeof cmd, "%s convert --random s1-pico %s >%s 2>&1", exe, out, log);
    CHECK(check_system(cmd) == 0);
    int v = try_file(out, dir, log, why, sizeof why);
    CHECK_MSG(v == NO_MODEL, "the file with the decision head: expected the loader to refuse it, "
              "found %s", v == LOADED ? "it loaded" : v < 0 ? why : verdict_name(v));
    unlink(out);
    unlink(log);
}

int main(void) {
    const char *exe = getenv("RONTOLISP_EXE");
    char dir[512];
    if (ll_lib_dir(dir, sizeof dir) != 0) {
        printf("C test llama_model: RL_LLAMA_LIB is longer than %zu bytes\n", sizeof dir - 1);
        return 1;
    }
    if (!exe || !*exe)
        exe = "build/rontolisp";
    if (!ll_load(dir))
        return check_report("llama_model");
    if (access(exe, X_OK) != 0) {
        CHECK_SKIP("%s not built: no --encoder-only file to load", exe);
        return check_report("llama_model");
    }
    /* ggml_abort would otherwise run gdb on the child for a backtrace. */
    setenv("GGML_NO_BACKTRACE", "1", 1);
    const char *t = getenv("TMPDIR");
    char tmpdir[256];
    snprintf(tmpdir, sizeof tmpdir, "%s/rl-test-llama-model.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    static const char *presets[] = {"s1-pico", "s1-nano", "s1-micro"};
    static const char *types[] = {"f32", "f16", "bf16", "q8_0"};
    int loaded = 0;
    for (size_t p = 0; p < 3; p++) {
        for (size_t k = 0; k < 4; k++) {
            char args[200];
            snprintf(args, sizeof args, "--random %s --type %s --encoder-only", presets[p],
                     types[k]);
            CHECK_CASE(loaded += convert_and_load(exe, args, tmpdir, dir));
        }
    }
    fprintf(stderr, "llama.cpp loaded and encoded %d of 12 --encoder-only files\n", loaded);
    /* massive residual channels (20x in the embedding and norm weights)
     * change values, not the file's shape: still a model llama.cpp runs */
    CHECK_CASE(convert_and_load(exe, "--random s1-nano --massive 4 --type f16 --encoder-only",
                                tmpdir, dir));
    CHECK_CASE(convert_and_load(exe, "--random s1-pico --massive 2 --massive-ratio 50 "
                                "--type q8_0 --encoder-only", tmpdir, dir));

    CHECK_CASE(test_hf_directories(exe, tmpdir, dir));
    CHECK_CASE(test_decision_file(exe, tmpdir, dir));
    rmdir(tmpdir);
    return check_report("llama_model");
}
