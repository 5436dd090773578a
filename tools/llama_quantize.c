/* llama_quantize.c - llama.cpp's own `llama-quantize', over the libraries
 * tests/fetch-llama-lib.sh fetches: the reference `rontolisp quantize' and
 * the golden files of tests/golden/quants/ are held to.
 *
 *   llama_quantize [--allow-requantize] [--leave-output-tensor] [--pure]
 *                  [--output-tensor-type T] [--token-embedding-type T]
 *                  [--override-kv KEY=TYPE:VALUE]... [--dry-run]
 *                  IN [OUT] FTYPE [NTHREADS]
 *
 * llama-quantize is a thin command line around libllama's
 * llama_model_quantize, which holds all of its logic (the per-tensor type
 * rules, the fallbacks, the writer).  This program is the same command line
 * written again in C from tools/quantize/quantize.cpp of llama.cpp v0.5.0
 * (the source of npm node-llama-cpp@3.22.1, llama/gitRelease.bundle): the
 * same table of type names and ftype numbers (case-insensitive; a number
 * selects the first name with that ftype, "COPY" only copies), the same
 * parse of the thread count and of --override-kv, the same messages and
 * exit statuses (usage: the help on stdout, exit 1; a refused argument or a
 * failed quantization: one message on stderr, exit 1; 0 on success).
 * Without OUT the output is IN's folder/ggml-model-FTYPE.gguf, as there.
 * libllama's log goes to stderr unchanged.  The other options of
 * llama-quantize (--imatrix, --tensor-type, --keep-split, --prune-layers,
 * --max-buffer-size) are refused with the usage.
 *
 * The libraries are dlopened from the folder RL_LLAMA_LIB names (or, when
 * it names a file, that file's folder), else build/cache/llama; when they
 * cannot be loaded it says why on stderr and exits 3, so callers can skip.
 * The structures are tools/llama_api.h's, whose layout is checked against
 * llama.cpp's defaults before anything is used.  No llama.cpp code is used.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "tools/llama_api.h"

#define PROG "llama_quantize" /* llama-quantize's __func__ in its messages */
#define GGML_TYPE_Q4_K 12      /* enum ggml_type */

/* struct llama_model_kv_override (include/llama.h), field for field. */
enum { KV_INT, KV_FLOAT, KV_BOOL, KV_STR }; /* enum llama_model_kv_override_type */
struct ll_kv_override {
    int tag;
    char key[128];
    union {
        int64_t val_i64;
        double val_f64;
        bool val_bool;
        char val_str[128];
    };
};

/* QUANT_OPTIONS of tools/quantize/quantize.cpp, in its order (the order
 * decides which name a number selects). */
static const struct { const char *name; int ftype; const char *desc; } QUANT_OPTIONS[] = {
    {"Q1_0", 40, " 1.125 bpw quantization"},
    {"Q2_0", 41, " 2.25 bpw quantization (group 64)"},
    {"Q4_0", 2, " 4.34G, +0.4685 ppl @ Llama-3-8B"},
    {"Q4_1", 3, " 4.78G, +0.4511 ppl @ Llama-3-8B"},
    {"MXFP4_MOE", 38, " MXFP4 MoE"},
    {"Q5_0", 8, " 5.21G, +0.1316 ppl @ Llama-3-8B"},
    {"Q5_1", 9, " 5.65G, +0.1062 ppl @ Llama-3-8B"},
    {"IQ2_XXS", 19, " 2.06 bpw quantization"},
    {"IQ2_XS", 20, " 2.31 bpw quantization"},
    {"IQ2_S", 28, " 2.5  bpw quantization"},
    {"IQ2_M", 29, " 2.7  bpw quantization"},
    {"IQ1_S", 24, " 1.56 bpw quantization"},
    {"IQ1_M", 31, " 1.75 bpw quantization"},
    {"TQ1_0", 36, " 1.69 bpw ternarization"},
    {"TQ2_0", 37, " 2.06 bpw ternarization"},
    {"Q2_K", 10, " 2.96G, +3.5199 ppl @ Llama-3-8B"},
    {"Q2_K_S", 21, " 2.96G, +3.1836 ppl @ Llama-3-8B"},
    {"IQ3_XXS", 23, " 3.06 bpw quantization"},
    {"IQ3_S", 26, " 3.44 bpw quantization"},
    {"IQ3_M", 27, " 3.66 bpw quantization mix"},
    {"Q3_K", 12, "alias for Q3_K_M"},
    {"IQ3_XS", 22, " 3.3 bpw quantization"},
    {"Q3_K_S", 11, " 3.41G, +1.6321 ppl @ Llama-3-8B"},
    {"Q3_K_M", 12, " 3.74G, +0.6569 ppl @ Llama-3-8B"},
    {"Q3_K_L", 13, " 4.03G, +0.5562 ppl @ Llama-3-8B"},
    {"IQ4_NL", 25, " 4.50 bpw non-linear quantization"},
    {"IQ4_XS", 30, " 4.25 bpw non-linear quantization"},
    {"Q4_K", 15, "alias for Q4_K_M"},
    {"Q4_K_S", 14, " 4.37G, +0.2689 ppl @ Llama-3-8B"},
    {"Q4_K_M", 15, " 4.58G, +0.1754 ppl @ Llama-3-8B"},
    {"Q5_K", 17, "alias for Q5_K_M"},
    {"Q5_K_S", 16, " 5.21G, +0.1049 ppl @ Llama-3-8B"},
    {"Q5_K_M", 17, " 5.33G, +0.0569 ppl @ Llama-3-8B"},
    {"Q6_K", 18, " 6.14G, +0.0217 ppl @ Llama-3-8B"},
    {"Q8_0", 7, " 7.96G, +0.0026 ppl @ Llama-3-8B"},
    {"F16", 1, "14.00G, +0.0020 ppl @ Mistral-7B"},
    {"BF16", 32, "14.00G, -0.0050 ppl @ Mistral-7B"},
    {"F32", 0, "26.00G              @ 7B"},
    /* after F32, so that 0 selects F32 */
    {"COPY", 0, "only copy tensors, no quantizing"},
};
#define N_OPTIONS (sizeof QUANT_OPTIONS / sizeof QUANT_OPTIONS[0])

static struct ll_api ll;
static const char *(*type_name)(int type);   /* ggml_type_name */
static const char *(*llama_version)(void);
static int64_t (*time_us)(void);             /* llama_time_us */
static void (*backend_free)(void);           /* llama_backend_free */

static _Noreturn void usage(const char *exe)
{
    printf("usage: %s [--help] [--allow-requantize] [--leave-output-tensor] [--pure]\n", exe);
    printf("       [--output-tensor-type] [--token-embedding-type] [--override-kv] [--dry-run]\n");
    printf("       model-f32.gguf [model-quant.gguf] type [nthreads]\n\n");
    printf("  --allow-requantize\n"
           "                                      allow requantizing tensors that have already been quantized\n"
           "                                      WARNING: this can severely reduce quality compared to quantizing\n"
           "                                               from 16bit or 32bit!\n");
    printf("  --leave-output-tensor\n"
           "                                      leave output.weight un(re)quantized\n"
           "                                      increases model size but may also increase quality, especially when requantizing\n");
    printf("  --pure\n"
           "                                      disable k-quant mixtures and quantize all tensors to the same type\n");
    printf("  --output-tensor-type ggml_type\n"
           "                                      use this ggml_type for the output.weight tensor\n");
    printf("  --token-embedding-type ggml_type\n"
           "                                      use this ggml_type for the token embeddings tensor\n");
    printf("  --override-kv KEY=TYPE:VALUE\n"
           "                                      override model metadata by key in the quantized model. may be specified multiple times.\n"
           "                                      WARNING: this is an advanced option, use with care.\n");
    printf("  --dry-run\n"
           "                                      calculate and show the final quantization size without performing quantization\n\n");
    printf("-----------------------------------------------------------------------------\n");
    printf(" allowed quantization types\n");
    printf("-----------------------------------------------------------------------------\n\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (strcmp(QUANT_OPTIONS[i].name, "COPY"))
            printf("  %2d  or  ", QUANT_OPTIONS[i].ftype);
        else
            printf("          ");
        printf("%-7s : %s\n", QUANT_OPTIONS[i].name, QUANT_OPTIONS[i].desc);
    }
    exit(1);
}

/* std::stoi: leading blanks, a sign, at least one digit, the rest ignored;
 * false where it throws (no digits, out of int range). */
static bool stoi(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return false;
    *out = (int)v;
    return true;
}

/* try_parse_ftype: a name of the table (any case), else a number that is
 * the ftype of a name; sets *FTYPE and *NAME (the table's spelling). */
static bool parse_ftype(const char *s, int *ftype, const char **name)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (!strcasecmp(QUANT_OPTIONS[i].name, s)) {
            *ftype = QUANT_OPTIONS[i].ftype;
            *name = QUANT_OPTIONS[i].name;
            return true;
        }
    int n;
    if (stoi(s, &n))
        for (size_t i = 0; i < N_OPTIONS; i++)
            if (QUANT_OPTIONS[i].ftype == n) {
                *ftype = n;
                *name = QUANT_OPTIONS[i].name;
                return true;
            }
    return false;
}

/* parse_ggml_type: a ggml type name, any case; LL_GGML_TYPE_COUNT if none. */
static int parse_ggml_type(const char *arg)
{
    for (int i = 0; i < LL_GGML_TYPE_COUNT; i++) {
        const char *name = type_name(i);
        if (name && !strcasecmp(name, arg))
            return i;
    }
    fprintf(stderr, "\nparse_ggml_type: invalid ggml_type '%s'\n\n", arg);
    return LL_GGML_TYPE_COUNT;
}

/* common's string_parse_kv_override: KEY=int:N, float:X, bool:true|false,
 * str:S (at most 127 bytes). */
static bool parse_kv_override(const char *data, struct ll_kv_override *kvo)
{
    const char *sep = strchr(data, '=');
    memset(kvo, 0, sizeof *kvo);
    if (!sep || sep - data >= 128) {
        fprintf(stderr, "string_parse_kv_override: malformed KV override '%s'\n", data);
        return false;
    }
    memcpy(kvo->key, data, (size_t)(sep - data));
    sep++;
    if (!strncmp(sep, "int:", 4)) {
        kvo->tag = KV_INT;
        kvo->val_i64 = atol(sep + 4);
    } else if (!strncmp(sep, "float:", 6)) {
        kvo->tag = KV_FLOAT;
        kvo->val_f64 = atof(sep + 6);
    } else if (!strncmp(sep, "bool:", 5)) {
        kvo->tag = KV_BOOL;
        if (!strcmp(sep + 5, "true"))
            kvo->val_bool = true;
        else if (!strcmp(sep + 5, "false"))
            kvo->val_bool = false;
        else {
            fprintf(stderr, "string_parse_kv_override: invalid boolean value for KV override '%s'\n",
                    data);
            return false;
        }
    } else if (!strncmp(sep, "str:", 4)) {
        kvo->tag = KV_STR;
        if (strlen(sep + 4) > 127) {
            fprintf(stderr, "string_parse_kv_override: malformed KV override '%s', value cannot "
                            "exceed 127 chars\n", data);
            return false;
        }
        strcpy(kvo->val_str, sep + 4);
    } else {
        fprintf(stderr, "string_parse_kv_override: invalid type for KV override '%s'\n", data);
        return false;
    }
    return true;
}

/* std::filesystem::equivalent, errors answering false. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Open the libraries of DIR with the few symbols beyond tools/llama_api.h's
 * and check the layout; answer 0, or -1 with the reason on stderr. */
static int open_llama(const char *dir)
{
    char msg[4200];
    void *llama;
    if (ll_api_open(&ll, dir, &llama, msg, sizeof msg) != 0) {
        fprintf(stderr, PROG ": %s\n", msg);
        return -1;
    }
    *(void **)&type_name = dlsym(llama, "ggml_type_name");
    *(void **)&llama_version = dlsym(llama, "llama_version");
    *(void **)&time_us = dlsym(llama, "llama_time_us");
    *(void **)&backend_free = dlsym(llama, "llama_backend_free");
    if (!type_name || !llama_version || !time_us || !backend_free) {
        fprintf(stderr, PROG ": llama.cpp in %s lacks ggml_type_name, llama_version, "
                        "llama_time_us or llama_backend_free\n", dir);
        return -1;
    }
    struct ll_quantize_params p = ll.model_quantize_default_params();
    if (p.nthread != 0 || p.ftype != LL_FTYPE_MOSTLY_Q8_0 ||
        p.output_tensor_type != LL_GGML_TYPE_COUNT || p.token_embedding_type != LL_GGML_TYPE_COUNT ||
        p.allow_requantize || !p.quantize_output_tensor || p.only_copy || p.pure || p.keep_split ||
        p.dry_run || p.imatrix || p.kv_overrides || p.tt_overrides || p.prune_layers ||
        p.max_buf_size == 0 || strcmp(type_name(GGML_TYPE_Q4_K), "q4_K") != 0) {
        fprintf(stderr, PROG ": llama.cpp in %s is not the release tools/llama_api.h "
                        "describes\n", dir);
        return -1;
    }
    return 0;
}

/* llama_print_build_info, which lives in DIR's libllama-common (a C++
 * name); the version alone without it. */
static void print_build_info(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/libllama-common.so", dir);
    void *common = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    void (*build_info)(const char *, FILE *) = NULL;
    if (common)
        *(void **)&build_info = dlsym(common, "_Z22llama_print_build_infoPKcP8_IO_FILE");
    if (build_info)
        build_info(llama_version(), stderr);
    else
        fprintf(stderr, "version: %s\n", llama_version());
}

int main(int argc, char **argv)
{
    if (argc < 3)
        usage(argv[0]);
    char dir[2048];
    if (ll_lib_dir(dir, sizeof dir) != 0) {
        fprintf(stderr, PROG ": RL_LLAMA_LIB is longer than %zu bytes\n", sizeof dir - 1);
        return 3;
    }
    /* The library first: the type names come from it. */
    if (open_llama(dir) != 0)
        return 3;

    struct ll_quantize_params params = ll.model_quantize_default_params();
    struct ll_kv_override *kvs = calloc((size_t)argc + 1, sizeof *kvs);
    int nkv = 0, arg = 1;
    if (!kvs) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    for (; arg < argc && !strncmp(argv[arg], "--", 2); arg++) {
        const char *a = argv[arg];
        if (!strcmp(a, "--leave-output-tensor"))
            params.quantize_output_tensor = false;
        else if (!strcmp(a, "--output-tensor-type") || !strcmp(a, "--token-embedding-type")) {
            if (arg == argc - 1)
                usage(argv[0]);
            int t = parse_ggml_type(argv[++arg]);
            if (t == LL_GGML_TYPE_COUNT)
                usage(argv[0]);
            if (a[2] == 'o')
                params.output_tensor_type = t;
            else
                params.token_embedding_type = t;
        } else if (!strcmp(a, "--override-kv")) {
            if (arg == argc - 1 || !parse_kv_override(argv[++arg], &kvs[nkv++]))
                usage(argv[0]);
        } else if (!strcmp(a, "--dry-run"))
            params.dry_run = true;
        else if (!strcmp(a, "--allow-requantize"))
            params.allow_requantize = true;
        else if (!strcmp(a, "--pure"))
            params.pure = true;
        else
            usage(argv[0]);
    }
    if (argc - arg < 2) {
        printf("%s: bad arguments\n", argv[0]);
        usage(argv[0]);
    }
    if (nkv > 0) /* the list ends with an empty key */
        params.kv_overrides = kvs;

    ll.backend_init();

    const char *in = argv[arg++], *ftype_name = NULL;
    char *out = NULL;
    if (parse_ftype(argv[arg], &params.ftype, &ftype_name)) {
        /* IN FTYPE: the output is IN's folder/ggml-model-FTYPE.gguf */
        if (!params.dry_run) {
            const char *slash = strrchr(in, '/');
            int len = slash ? (int)(slash - in + 1) : 0;
            size_t cap = (size_t)len + strlen(ftype_name) + 32;
            out = malloc(cap);
            if (!out) {
                fprintf(stderr, PROG ": out of memory\n");
                return 1;
            }
            snprintf(out, cap, "%.*sggml-model-%s.gguf", len, in, ftype_name);
        }
        arg++;
    } else {
        out = argv[arg++];
        if (argc <= arg) {
            fprintf(stderr, PROG ": missing ftype\n");
            return 1;
        }
        if (!parse_ftype(argv[arg], &params.ftype, &ftype_name)) {
            fprintf(stderr, PROG ": invalid ftype '%s'\n", argv[arg]);
            return 1;
        }
        arg++;
    }
    if (!strcmp(ftype_name, "COPY"))
        params.only_copy = true;
    if (argc > arg && !stoi(argv[arg], &params.nthread)) {
        fprintf(stderr, PROG ": invalid nthread '%s' (stoi)\n", argv[arg]);
        return 1;
    }
    if (!params.dry_run && same_file(in, out)) {
        fprintf(stderr, PROG ": error: input and output files are the same: '%s'\n", in);
        return 1;
    }

    print_build_info(dir);
    if (params.dry_run)
        fprintf(stderr, PROG ": calculating quantization size for '%s' as %s", in, ftype_name);
    else
        fprintf(stderr, PROG ": quantizing '%s' to '%s' as %s", in, out, ftype_name);
    if (params.nthread > 0)
        fprintf(stderr, " using %d threads", params.nthread);
    fprintf(stderr, "\n");

    int64_t t0 = time_us();
    if (ll.model_quantize(in, out ? out : "", &params) != 0) {
        fprintf(stderr, PROG ": failed to quantize model from '%s'\n", in);
        return 1;
    }
    int64_t t1 = time_us();
    printf("\n");
    printf(PROG ": quantize time = %8.2f ms\n", (t1 - t0) / 1000.0);
    printf(PROG ":    total time = %8.2f ms\n", (time_us() - t0) / 1000.0);
    backend_free();
    free(kvs);
    return 0;
}
