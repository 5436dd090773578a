/* kernel.h - the contract every kernel in prims/ keeps (doc/kernels.md).
 *
 * One status type for every kernel entry; one attribute string per kernel
 * path, the features cpu.c checks for that path and nothing more; one check
 * of an explicit path and thread count; and the shape of a kernel table: an
 * array indexed by rl_path whose every entry is filled, a path without its
 * own function naming the next lower path's one.  A driver validates, picks
 * its functions from the table with the path, and runs them on the pool.
 * Plain C, no ECL.
 */
#ifndef RL_PRIMS_KERNEL_H
#define RL_PRIMS_KERNEL_H

#include "prims/cpu.h"

/* What a kernel entry answers.  Each failure has a name (rl_status_name),
 * the keyword the Lisp side signals with. */
typedef enum {
    RL_OK = 0,
    RL_NONFINITE,   /* a NaN or infinity in the input; where = its flat index */
    RL_OVERFLOW,    /* a Q8_0 block's f16 scale would be inf; where = flat block index */
    RL_BADLEN,      /* a length that is not a multiple of the block size */
    RL_BADARG,      /* NULL data, a size whose bytes overflow size_t, bad path/threads */
    RL_NOMEM,       /* scratch allocation failed */
    RL_UNSUPPORTED  /* an explicit path this CPU cannot run, a type the operation lacks */
} rl_status;

/* The status's name, spelled as the Lisp keyword it becomes: "ok",
 * "non-finite", "scale-overflow", "bad-length", "bad-argument",
 * "out-of-memory", "unsupported" (the words gguf/ and safetensors use for
 * the same failures); "unknown status" for anything else. */
const char *rl_status_name(rl_status st);

/* The number of paths: a kernel table has this many entries. */
#define RL_PATH_COUNT (RL_PATH_AVX512VNNI + 1)

/* __attribute__((target(...))) of a path's functions: exactly the features
 * rl_path_supported checks for it (cpu.c), so a function compiled for a
 * path runs wherever that path is supported. */
#define RL_TARGET_AVX2 "avx2,fma,f16c"
#define RL_TARGET_AVX512 RL_TARGET_AVX2 ",avx512f,avx512bw,avx512vl,avx512dq"
#define RL_TARGET_VNNI RL_TARGET_AVX512 ",avx512vnni"

/* The check every entry with an explicit path makes: RL_BADARG for a path
 * that is not one of rl_path's or fewer than one thread, RL_UNSUPPORTED for
 * a path this CPU cannot run, else RL_OK.  Counts above RL_MAX_THREADS are
 * valid: the pool runs at most that many (pool.h). */
static inline rl_status rl_check_run(rl_path path, int threads) {
    if ((unsigned)path >= RL_PATH_COUNT || threads < 1)
        return RL_BADARG;
    return rl_path_supported(path) ? RL_OK : RL_UNSUPPORTED;
}

/* The one NaN a float product stores (doc/products.md §3), whatever NaNs
 * its sums met: x86's default NaN, the one an invalid operation (0 x inf,
 * inf - inf) makes, bits 0xffc00000. */
#define RL_PRODUCT_NAN (-__builtin_nanf(""))

#endif
