/* cpu.h - what the CPU can do, and the two global knobs (SIMD on/off,
 * thread count) that the command line (--simd, --no-simd, --threads N) and
 * Lisp set.  Plain C, no ECL. */
#ifndef RL_PRIMS_CPU_H
#define RL_PRIMS_CPU_H

/* CPU features, probed once (cpuid + xgetbv for OS support). */
int rl_cpu_has_avx2(void);       /* AVX2 + FMA + F16C */
int rl_cpu_has_avx512(void);     /* AVX-512 F/BW/VL/DQ (and AVX2) */
int rl_cpu_has_avx512vnni(void); /* AVX-512 VNNI */
int rl_cpu_cores(void);          /* online logical CPUs, at least 1 */

/* SIMD knob: 1 = use the best path the CPU has (the default), 0 = scalar
 * reference paths only. */
void rl_set_simd(int on);
int rl_simd(void);

/* Thread knob: n >= 1; 0 means "the machine's cores" (the default).
 * Negative counts are taken as 0, counts above RL_MAX_THREADS as that. */
#define RL_MAX_THREADS 256
void rl_set_threads(int n);
int rl_threads(void); /* the effective count, >= 1 */
int rl_threads_knob(void); /* the knob as set: 0 when it was never set */

/* The name of the path the kernels will take now: "avx512vnni", "avx512",
 * "avx2" or "scalar". */
const char *rl_simd_path(void);

/* Kernel paths, in increasing order of what they need.  Every path answers
 * the same bits; they differ only in speed.  kernel.h names the target
 * attribute of each (RL_TARGET_*) and how a kernel picks by path. */
typedef enum {
    RL_PATH_REF = 0,     /* plain C, any x86-64 */
    RL_PATH_AVX2,        /* AVX2 + FMA + F16C */
    RL_PATH_AVX512,      /* AVX-512 F/BW/VL/DQ, and AVX2's */
    RL_PATH_AVX512VNNI   /* AVX-512 F/BW/VL/DQ + VNNI, and AVX2's */
} rl_path;

int rl_path_supported(rl_path p);    /* 1 if this CPU can run p (ignores the knob) */
rl_path rl_path_best(void);          /* what the kernels use now: CPU and SIMD knob */
const char *rl_path_name(rl_path p); /* "scalar", "avx2", "avx512", "avx512vnni" */

#endif
