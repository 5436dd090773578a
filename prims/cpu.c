/* cpu.c - CPU feature probe and the two global knobs (see cpu.h).
 *
 * Features are read once with cpuid and checked against what the OS saves on
 * a context switch (xgetbv): a CPU that has AVX2 is no use if the kernel does
 * not preserve the ymm registers.  The knobs are plain atomics: the command
 * line and Lisp set them, the kernels read them once per call.
 */
#include "prims/cpu.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static struct {
    int avx2, avx512, vnni, cores;
} rl_cpu_;
static pthread_once_t rl_cpu_once_ = PTHREAD_ONCE_INIT;

static int rl_simd_knob_ = 1;    /* atomic: 1 = best path, 0 = scalar */
static int rl_threads_knob_ = 0; /* atomic: 0 = one per core */

/* XCR0: which register states the OS saves.  Read with the raw opcode
 * sequence so no target attribute is needed (xgetbv is always present once
 * OSXSAVE says so). */
static uint64_t rl_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void rl_cpu_probe(void) {
    unsigned a, b, c, d;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    rl_cpu_.cores = n >= 1 ? (n > 1024 ? 1024 : (int)n) : 1;

    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1,
        f16c = (c >> 29) & 1;
    if (!osxsave || !avx)
        return;
    uint64_t xcr0 = rl_xgetbv0();
    int os_ymm = (xcr0 & 0x6) == 0x6;      /* SSE + AVX state */
    int os_zmm = (xcr0 & 0xe6) == 0xe6;    /* + opmask, ZMM_Hi256, Hi16_ZMM */
    if (!os_ymm)
        return;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return;
    int avx2 = (b >> 5) & 1;
    int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1,
        avx512vl = (b >> 31) & 1, avx512vnni = (c >> 11) & 1;
    rl_cpu_.avx2 = avx2 && fma && f16c;
    /* The AVX-512 kernels also use the AVX2/F16C instructions. */
    rl_cpu_.avx512 = rl_cpu_.avx2 && os_zmm && avx512f && avx512bw && avx512vl && avx512dq;
    rl_cpu_.vnni = rl_cpu_.avx512 && avx512vnni;
}

static void rl_cpu_init(void) { pthread_once(&rl_cpu_once_, rl_cpu_probe); }

int rl_cpu_has_avx2(void) {
    rl_cpu_init();
    return rl_cpu_.avx2;
}

int rl_cpu_has_avx512(void) {
    rl_cpu_init();
    return rl_cpu_.avx512;
}

int rl_cpu_has_avx512vnni(void) {
    rl_cpu_init();
    return rl_cpu_.vnni;
}

int rl_cpu_cores(void) {
    rl_cpu_init();
    return rl_cpu_.cores;
}

void rl_set_simd(int on) { __atomic_store_n(&rl_simd_knob_, on ? 1 : 0, __ATOMIC_RELAXED); }

int rl_simd(void) { return __atomic_load_n(&rl_simd_knob_, __ATOMIC_RELAXED); }

void rl_set_threads(int n) {
    if (n < 0)
        n = 0;
    if (n > RL_MAX_THREADS)
        n = RL_MAX_THREADS;
    __atomic_store_n(&rl_threads_knob_, n, __ATOMIC_RELAXED);
}

int rl_threads(void) {
    int n = __atomic_load_n(&rl_threads_knob_, __ATOMIC_RELAXED);
    return n >= 1 ? n : rl_cpu_cores();
}

int rl_threads_knob(void) { return __atomic_load_n(&rl_threads_knob_, __ATOMIC_RELAXED); }

int rl_path_supported(rl_path p) {
    switch (p) {
    case RL_PATH_REF: return 1;
    case RL_PATH_AVX2: return rl_cpu_has_avx2();
    case RL_PATH_AVX512: return rl_cpu_has_avx512();
    case RL_PATH_AVX512VNNI: return rl_cpu_has_avx512vnni();
    }
    return 0;
}

rl_path rl_path_best(void) {
    if (!rl_simd())
        return RL_PATH_REF;
    if (rl_cpu_has_avx512vnni())
        return RL_PATH_AVX512VNNI;
    if (rl_cpu_has_avx512())
        return RL_PATH_AVX512;
    if (rl_cpu_has_avx2())
        return RL_PATH_AVX2;
    return RL_PATH_REF;
}

const char *rl_path_name(rl_path p) {
    switch (p) {
    case RL_PATH_REF: return "scalar";
    case RL_PATH_AVX2: return "avx2";
    case RL_PATH_AVX512: return "avx512";
    case RL_PATH_AVX512VNNI: return "avx512vnni";
    }
    return "unknown";
}

const char *rl_simd_path(void) { return rl_path_name(rl_path_best()); }
