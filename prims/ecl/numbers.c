/* numbers.c - the knobs (SIMD, threads) and single numbers: f16/bf16 bits,
 * the bits of a single-float, C's double -> float cast. */
#include <unistd.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/ecl/glue.h"

static cl_object rl_prim_simd(void) {
    ecl_return1(ecl_process_env(), rl_simd() ? ECL_T : ECL_NIL);
}

static cl_object rl_prim_set_simd(cl_object on) {
    rl_set_simd(rl_arg_fixnum("%SET-SIMD", 1, on, 0, 1) != 0);
    ecl_return1(ecl_process_env(), on);
}

static cl_object rl_prim_threads(void) {
    ecl_return1(ecl_process_env(), ecl_make_fixnum(rl_threads()));
}

static cl_object rl_prim_set_threads(cl_object n) {
    rl_set_threads((int)rl_arg_fixnum("%SET-THREADS", 1, n, 1, RL_MAX_THREADS));
    ecl_return1(ecl_process_env(), n);
}

/* (%max-threads) -> the most threads the kernels take (RL_MAX_THREADS). */
static cl_object rl_prim_max_threads(void) {
    ecl_return1(ecl_process_env(), ecl_make_fixnum(RL_MAX_THREADS));
}

static cl_object rl_prim_simd_path(void) {
    ecl_return1(ecl_process_env(), ecl_make_simple_base_string(rl_simd_path(), -1));
}

static cl_object rl_prim_isatty(cl_object fd) {
    ecl_return1(ecl_process_env(), ecl_make_fixnum(isatty((int)rl_arg_fixnum("%ISATTY", 1, fd, 0, 1 << 20))));
}

static cl_object rl_prim_f16_bits(cl_object x) {
    ecl_return1(ecl_process_env(), ecl_make_fixnum(rl_gguf_f32_to_f16(rl_arg_sf("%F16-BITS", 1, x))));
}

static cl_object rl_prim_f16_value(cl_object h) {
    ecl_return1(ecl_process_env(),
                ecl_make_single_float(rl_gguf_f16_to_f32((uint16_t)rl_arg_fixnum("%F16-VALUE", 1, h, 0, 65535))));
}

static cl_object rl_prim_bf16_bits(cl_object x) {
    ecl_return1(ecl_process_env(), ecl_make_fixnum(rl_gguf_f32_to_bf16(rl_arg_sf("%BF16-BITS", 1, x))));
}

static cl_object rl_prim_bf16_value(cl_object h) {
    ecl_return1(ecl_process_env(),
                ecl_make_single_float(rl_gguf_bf16_to_f32((uint16_t)rl_arg_fixnum("%BF16-VALUE", 1, h, 0, 65535))));
}

/* The bits of a single-float and back: NaN payloads and signed zeros kept. */
static cl_object rl_prim_single_bits(cl_object x) {
    ecl_return1(ecl_process_env(),
                ecl_make_unsigned_integer(rl_gguf_f32_bits(rl_arg_sf("%SINGLE-BITS", 1, x))));
}

static cl_object rl_prim_bits_single(cl_object b) {
    uint32_t u = (uint32_t)rl_arg_fixnum("%BITS-SINGLE", 1, b, 0, 0xffffffffL);
    ecl_return1(ecl_process_env(), ecl_make_single_float(rl_gguf_f32_from_bits(u)));
}

/* C's double -> float cast (round to nearest even, overflow to inf), which
 * COERCE would refuse with a floating-point-overflow. */
static cl_object rl_prim_double_to_single(cl_object x) {
    double d = rl_arg_df("%DOUBLE-TO-SINGLE", 1, x);
    float f;
    RL_FP_HOLD();
    f = (float)d;
    RL_FP_RELEASE();
    ecl_return1(ecl_process_env(), ecl_make_single_float(f));
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%SIMD", rl_prim_simd, 0),
    RL_PRIM("%SET-SIMD", rl_prim_set_simd, 1),
    RL_PRIM("%THREADS", rl_prim_threads, 0),
    RL_PRIM("%SET-THREADS", rl_prim_set_threads, 1),
    RL_PRIM("%MAX-THREADS", rl_prim_max_threads, 0),
    RL_PRIM("%SIMD-PATH", rl_prim_simd_path, 0),
    RL_PRIM("%ISATTY", rl_prim_isatty, 1),
    RL_PRIM("%F16-BITS", rl_prim_f16_bits, 1),
    RL_PRIM("%F16-VALUE", rl_prim_f16_value, 1),
    RL_PRIM("%BF16-BITS", rl_prim_bf16_bits, 1),
    RL_PRIM("%BF16-VALUE", rl_prim_bf16_value, 1),
    RL_PRIM("%SINGLE-BITS", rl_prim_single_bits, 1),
    RL_PRIM("%BITS-SINGLE", rl_prim_bits_single, 1),
    RL_PRIM("%DOUBLE-TO-SINGLE", rl_prim_double_to_single, 1),
};
RL_PRIM_TABLE(rl_number_prims, "RONTOLISP", rl_defs);
