/* bench.c - clock and read-bandwidth probe (see bench.h).
 *
 * The probe reads like the matvec kernels do (32-byte loads, one contiguous
 * range per thread split by the same pool formula, four streams at once),
 * so "weight GB/s / probe GB/s" compares like with like.
 */
#include "prims/bench.h"

#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prims/cpu.h"
#include "prims/kernel.h"
#include "prims/pool.h"

#define RL_BENCH_LINE 256 /* bytes per inner step */

uint64_t rl_bench_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

size_t rl_bench_llc_bytes(void) {
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        unsigned long v = 0;
        char unit = 0;
        if (fscanf(f, "%lu%c", &v, &unit) >= 1) {
            size_t b = v;
            if (unit == 'K')
                b = v << 10;
            else if (unit == 'M')
                b = v << 20;
            if (b > best)
                best = b;
        }
        fclose(f);
    }
    return best;
}

size_t rl_bench_default_bytes(void) {
    size_t llc = rl_bench_llc_bytes(), want = (size_t)256 << 20;
    if (llc && llc <= SIZE_MAX / 8 && llc * 8 > want)
        want = llc * 8;
    return want;
}

typedef struct {
    unsigned char *buf;
    size_t lines;
    int avx2;
    uint64_t sink[RL_MAX_THREADS];
} rl_bench_job;

/* Four sub-ranges of the chunk read in lockstep, as the kernels read four
 * rows at a time (one stream alone reaches less on some machines). */
__attribute__((target(RL_TARGET_AVX2))) static uint64_t
rl_bench_sum_avx2(const unsigned char *p, size_t lines) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t q = lines / 4;
    const unsigned char *p0 = p, *p1 = p + q * RL_BENCH_LINE, *p2 = p + 2 * q * RL_BENCH_LINE,
                        *p3 = p + 3 * q * RL_BENCH_LINE;
    for (size_t i = 0; i < q; i++) {
        size_t o = i * RL_BENCH_LINE;
        for (int k = 0; k < RL_BENCH_LINE / 32; k += 2) {
            a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(const void *)(p0 + o) + k));
            a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(const void *)(p1 + o) + k));
            a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(const void *)(p2 + o) + k));
            a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(const void *)(p3 + o) + k));
            a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(const void *)(p0 + o) + k + 1));
            a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(const void *)(p1 + o) + k + 1));
            a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(const void *)(p2 + o) + k + 1));
            a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(const void *)(p3 + o) + k + 1));
        }
    }
    for (size_t i = 4 * q; i < lines; i++) /* the remainder, one stream */
        for (int k = 0; k < RL_BENCH_LINE / 32; k++)
            a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(const void *)(p + i * RL_BENCH_LINE) + k));
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (uint64_t)_mm_cvtsi128_si64(t) + (uint64_t)_mm_extract_epi64(t, 1);
}

static uint64_t rl_bench_sum_ref(const unsigned char *p, size_t lines) {
    uint64_t a[4] = {0, 0, 0, 0};
    const uint64_t *v = (const uint64_t *)(const void *)p;
    for (size_t i = 0; i < lines * (RL_BENCH_LINE / 8); i += 4) {
        a[0] += v[i];
        a[1] += v[i + 1];
        a[2] += v[i + 2];
        a[3] += v[i + 3];
    }
    return a[0] + a[1] + a[2] + a[3];
}

static void rl_bench_read_chunk(void *ctx, int ith, int nth) {
    rl_bench_job *j = ctx;
    size_t l0, l1;
    rl_pool_chunk(j->lines, ith, nth, 1, &l0, &l1);
    const unsigned char *p = j->buf + l0 * RL_BENCH_LINE;
    j->sink[ith] += j->avx2 ? rl_bench_sum_avx2(p, l1 - l0) : rl_bench_sum_ref(p, l1 - l0);
}

static void rl_bench_fill_chunk(void *ctx, int ith, int nth) {
    rl_bench_job *j = ctx;
    size_t l0, l1;
    rl_pool_chunk(j->lines, ith, nth, 1, &l0, &l1);
    memset(j->buf + l0 * RL_BENCH_LINE, 0x5a ^ ith, (l1 - l0) * RL_BENCH_LINE);
}

static int rl_bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double rl_bench_read_gbps(size_t bytes, int threads, int reps, double *median_gbps) {
    if (bytes == 0)
        bytes = rl_bench_default_bytes();
    bytes = bytes / 4096 * 4096;
    if (bytes == 0 || threads < 1 || reps < 1 || reps > 1000)
        return -1.0;
    if (threads > RL_MAX_THREADS)
        threads = RL_MAX_THREADS;
    rl_bench_job *job = calloc(1, sizeof *job);
    double *gbps = malloc((size_t)reps * sizeof *gbps);
    void *buf = aligned_alloc(4096, bytes);
    if (!job || !gbps || !buf) {
        free(job);
        free(gbps);
        free(buf);
        return -1.0;
    }
    job->buf = buf;
    job->lines = bytes / RL_BENCH_LINE;
    job->avx2 = rl_cpu_has_avx2();
    rl_pool_run(threads, rl_bench_fill_chunk, job); /* first touch, per thread */
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = rl_bench_ns();
        rl_pool_run(threads, rl_bench_read_chunk, job);
        uint64_t t1 = rl_bench_ns();
        gbps[r] = (double)bytes / (double)(t1 - t0 ? t1 - t0 : 1);
    }
    /* The sums must look used, or the loads could be dropped. */
    uint64_t all = 0;
    for (int i = 0; i < threads; i++)
        all += job->sink[i];
    __asm__ volatile("" : : "r"(all));
    qsort(gbps, (size_t)reps, sizeof *gbps, rl_bench_cmp);
    double best = gbps[reps - 1];
    if (median_gbps)
        *median_gbps = reps % 2 ? gbps[reps / 2] : 0.5 * (gbps[reps / 2 - 1] + gbps[reps / 2]);
    free(buf);
    free(gbps);
    free(job);
    return best;
}

rl_status rl_bench_repeat(rl_bench_call call, void *ctx, size_t min_calls, uint64_t min_ns,
                          uint64_t max_ns, size_t cap, double *times, size_t *done, char *msg,
                          size_t msglen) {
    rl_status st = call(ctx, msg, msglen); /* warm-up */
    const uint64_t start = rl_bench_ns();
    *done = 0;
    while (st == RL_OK && *done < cap) {
        const uint64_t t0 = rl_bench_ns();
        st = call(ctx, msg, msglen);
        const uint64_t t1 = rl_bench_ns();
        times[(*done)++] = (double)(t1 - t0);
        if (*done >= min_calls && t1 - start >= min_ns)
            break;
        if (max_ns && *done >= 3 && t1 - start >= max_ns)
            break;
    }
    return st;
}

typedef struct {
    const rl_matvec_operands *o;
    rl_path path;
    int threads;
} rl_bench_matvec_job;

static rl_status rl_bench_matvec_call(void *ctx, char *msg, size_t msglen) {
    const rl_bench_matvec_job *j = ctx;
    return rl_matvec_run(j->o, j->path, j->threads, 0, msg, msglen, NULL);
}

rl_status rl_bench_matvec(const rl_matvec_operands *o, rl_path path, int threads,
                          size_t iters, uint64_t budget_ns, double *times, size_t *done,
                          char *msg, size_t msglen) {
    rl_bench_matvec_job j = {o, path, threads};
    return rl_bench_repeat(rl_bench_matvec_call, &j, iters, 0, budget_ns, iters, times, done, msg,
                           msglen);
}

rl_status rl_bench_quantize(const float *x, size_t n, rl_block_q8_0 *y, rl_path path,
                            size_t reps, double *times) {
    rl_status st = rl_q8_quantize_path(RL_SRC_F32, x, n, y, NULL, path);
    for (size_t i = 0; st == RL_OK && i < reps; i++) {
        uint64_t t0 = rl_bench_ns();
        st = rl_q8_quantize_path(RL_SRC_F32, x, n, y, NULL, path);
        times[i] = (double)(rl_bench_ns() - t0);
    }
    return st;
}

/* ---- one core's multiply-add peak ------------------------------------ */

/* Independent chains, so that neither an instruction's latency nor a
 * single port limits the rate.  Each chain starts from its own value, so
 * that the compiler cannot merge them; a = a * 0.5 + 1 converges to 2 (no
 * overflow, no subnormals).  The int8 products' operands pass through an
 * empty asm each iteration, so that the products cannot be hoisted out of
 * the loop.  Each loop answers a value the caller keeps. */
#define RL_PEAK_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define RL_PEAK_CHAINS6(X) X(0) X(1) X(2) X(3) X(4) X(5)

static double rl_peak_f32_ref(size_t iters) {
    float a[12];
    for (int c = 0; c < 12; c++)
        a[c] = (float)c;
    for (size_t i = 0; i < iters; i++)
        for (int c = 0; c < 12; c++)
            a[c] = fmaf(a[c], 0.5f, 1.0f);
    double s = 0;
    for (int c = 0; c < 12; c++)
        s += a[c];
    return s;
}

__attribute__((target(RL_TARGET_AVX2))) static double rl_peak_f32_avx2(size_t iters) {
    const __m256 h = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
#define RL_PEAK_DECL(c) __m256 a##c = _mm256_set1_ps((float)(c));
    RL_PEAK_CHAINS(RL_PEAK_DECL)
#undef RL_PEAK_DECL
    for (size_t i = 0; i < iters; i++) {
#define RL_PEAK_STEP(c) a##c = _mm256_fmadd_ps(a##c, h, one);
        RL_PEAK_CHAINS(RL_PEAK_STEP)
#undef RL_PEAK_STEP
    }
    __m256 s = _mm256_setzero_ps();
#define RL_PEAK_SUM(c) s = _mm256_add_ps(s, a##c);
    RL_PEAK_CHAINS(RL_PEAK_SUM)
#undef RL_PEAK_SUM
    return _mm256_cvtss_f32(s);
}

__attribute__((target(RL_TARGET_AVX512))) static double rl_peak_f32_avx512(size_t iters) {
    const __m512 h = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
#define RL_PEAK_DECL(c) __m512 a##c = _mm512_set1_ps((float)(c));
    RL_PEAK_CHAINS(RL_PEAK_DECL)
#undef RL_PEAK_DECL
    for (size_t i = 0; i < iters; i++) {
#define RL_PEAK_STEP(c) a##c = _mm512_fmadd_ps(a##c, h, one);
        RL_PEAK_CHAINS(RL_PEAK_STEP)
#undef RL_PEAK_STEP
    }
    __m512 s = _mm512_setzero_ps();
#define RL_PEAK_SUM(c) s = _mm512_add_ps(s, a##c);
    RL_PEAK_CHAINS(RL_PEAK_SUM)
#undef RL_PEAK_SUM
    return _mm512_reduce_add_ps(s);
}

static double rl_peak_int8_ref(size_t iters) {
    int32_t a[12] = {0};
    int8_t u[12];
    for (int c = 0; c < 12; c++)
        u[c] = (int8_t)(c + 1);
    for (size_t i = 0; i < iters; i++) {
        __asm__ volatile("" : : "r"(u) : "memory");
        for (int c = 0; c < 12; c++)
            a[c] += (int32_t)u[c] * -2;
    }
    double s = 0;
    for (int c = 0; c < 12; c++)
        s += a[c];
    return s;
}

/* u8 x i8 pairs summed to i16 (maddubs), pairs of those to i32 (madd by
 * ones), added: the Q8_0 kernels' three instructions per 32 products.  Six
 * chains: sixteen registers hold their sums and operands. */
__attribute__((target(RL_TARGET_AVX2))) static double rl_peak_int8_avx2(size_t iters) {
    const __m256i w = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
#define RL_PEAK_DECL(c) __m256i a##c = _mm256_setzero_si256(), u##c = _mm256_set1_epi8((char)(c + 1));
    RL_PEAK_CHAINS6(RL_PEAK_DECL)
#undef RL_PEAK_DECL
    for (size_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(u0), "+x"(u1), "+x"(u2), "+x"(u3), "+x"(u4), "+x"(u5));
#define RL_PEAK_STEP(c) a##c = _mm256_add_epi32(a##c, _mm256_madd_epi16(_mm256_maddubs_epi16(u##c, w), ones));
        RL_PEAK_CHAINS6(RL_PEAK_STEP)
#undef RL_PEAK_STEP
    }
    __m256i s = _mm256_setzero_si256();
#define RL_PEAK_SUM(c) s = _mm256_add_epi32(s, a##c);
    RL_PEAK_CHAINS6(RL_PEAK_SUM)
#undef RL_PEAK_SUM
    return (double)_mm256_extract_epi32(s, 0);
}

__attribute__((target(RL_TARGET_AVX512))) static double rl_peak_int8_avx512(size_t iters) {
    const __m512i w = _mm512_set1_epi8(-2), ones = _mm512_set1_epi16(1);
#define RL_PEAK_DECL(c) __m512i a##c = _mm512_setzero_si512(), u##c = _mm512_set1_epi8((char)(c + 1));
    RL_PEAK_CHAINS(RL_PEAK_DECL)
#undef RL_PEAK_DECL
    for (size_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(u0), "+v"(u1), "+v"(u2), "+v"(u3), "+v"(u4), "+v"(u5),
                         "+v"(u6), "+v"(u7), "+v"(u8), "+v"(u9), "+v"(u10), "+v"(u11));
#define RL_PEAK_STEP(c) a##c = _mm512_add_epi32(a##c, _mm512_madd_epi16(_mm512_maddubs_epi16(u##c, w), ones));
        RL_PEAK_CHAINS(RL_PEAK_STEP)
#undef RL_PEAK_STEP
    }
    __m512i s = _mm512_setzero_si512();
#define RL_PEAK_SUM(c) s = _mm512_add_epi32(s, a##c);
    RL_PEAK_CHAINS(RL_PEAK_SUM)
#undef RL_PEAK_SUM
    return (double)_mm512_reduce_add_epi32(s);
}

__attribute__((target(RL_TARGET_VNNI))) static double rl_peak_int8_vnni(size_t iters) {
    const __m512i u = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-2);
#define RL_PEAK_DECL(c) __m512i a##c = _mm512_set1_epi32(c);
    RL_PEAK_CHAINS(RL_PEAK_DECL)
#undef RL_PEAK_DECL
    for (size_t i = 0; i < iters; i++) {
#define RL_PEAK_STEP(c) a##c = _mm512_dpbusd_epi32(a##c, u, w);
        RL_PEAK_CHAINS(RL_PEAK_STEP)
#undef RL_PEAK_STEP
    }
    __m512i s = _mm512_setzero_si512();
#define RL_PEAK_SUM(c) s = _mm512_add_epi32(s, a##c);
    RL_PEAK_CHAINS(RL_PEAK_SUM)
#undef RL_PEAK_SUM
    return (double)_mm512_reduce_add_epi32(s);
}
#undef RL_PEAK_CHAINS
#undef RL_PEAK_CHAINS6

/* Each path's peak loops and the multiply-adds one iteration of each does
 * (kernel.h's table rule: every entry filled). */
typedef struct {
    double (*f32)(size_t iters);
    double (*int8)(size_t iters);
    unsigned f32_macs, int8_macs;
} rl_peak_kernels;

static const rl_peak_kernels rl_peak_table[RL_PATH_COUNT] = {
    [RL_PATH_REF] = {rl_peak_f32_ref, rl_peak_int8_ref, 12, 12},
    [RL_PATH_AVX2] = {rl_peak_f32_avx2, rl_peak_int8_avx2, 12 * 8, 6 * 32},
    [RL_PATH_AVX512] = {rl_peak_f32_avx512, rl_peak_int8_avx512, 12 * 16, 12 * 64},
    [RL_PATH_AVX512VNNI] = {rl_peak_f32_avx512, rl_peak_int8_vnni, 12 * 16, 12 * 64},
};

rl_status rl_bench_peak(rl_path path, int int8, int reps, double *best_gmacs) {
    rl_status st = rl_check_run(path, 1);
    if (st != RL_OK)
        return st;
    if (reps < 1 || !best_gmacs)
        return RL_BADARG;
    const rl_peak_kernels *k = &rl_peak_table[path];
    double (*run)(size_t) = int8 ? k->int8 : k->f32;
    const double per_iter = (double)(int8 ? k->int8_macs : k->f32_macs);
    const size_t iters = 200000; /* some 1 to 5 ms a rep with SIMD */
    double best = 0, sink = run(iters / 10); /* warm the core's clock */
    for (int r = 0; r < reps; r++) {
        const uint64_t t0 = rl_bench_ns();
        sink += run(iters);
        const uint64_t dt = rl_bench_ns() - t0;
        const double g = per_iter * (double)iters / (double)(dt ? dt : 1);
        if (g > best)
            best = g;
    }
    __asm__ volatile("" : : "x"(sink));
    *best_gmacs = best;
    return RL_OK;
}
