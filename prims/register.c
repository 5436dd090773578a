/* register.c - the one file in prims/ that speaks ECL: it wraps the plain C
 * kernels (cpu.c, q8.c, matvec.c, the gguf/ library) as Lisp functions in
 * the RONTOLISP package, converting and checking arguments on the way in
 * and signalling rontolisp's own conditions on the way out.
 *
 * Rule for every primitive: validate everything first, allocate after, and
 * never signal while anything malloc'd is live or worker threads run
 * (ECL's errors longjmp). */
#include <ecl/ecl.h>
#include <fenv.h>
#include <unistd.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/register.h"

/* ECL runs with the overflow, invalid and divide-by-zero traps enabled, so
 * Lisp signals floating-point conditions.  The kernels rely on IEEE
 * non-stop arithmetic (1/d is +inf for a subnormal d, by design), so every
 * primitive that does float arithmetic holds the traps around it. */
#define RL_FP_HOLD()      \
    fenv_t rl_fenv_;      \
    feholdexcept(&rl_fenv_)
#define RL_FP_RELEASE() fesetenv(&rl_fenv_)

static cl_object rl_sym(const char *name, const char *pkg) {
    return ecl_make_symbol(name, pkg);
}

/* Checked argument accessors for the % primitives: the Lisp wrappers pass
 * the right types, but a direct call must not crash. */
static float rl_arg_sf(const char *fn, int pos, cl_object x) {
    if (ecl_t_of(x) != t_singlefloat)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), pos, x, ecl_make_symbol("SINGLE-FLOAT", "CL"));
    return ecl_single_float(x);
}

static double rl_arg_df(const char *fn, int pos, cl_object x) {
    if (ecl_t_of(x) != t_doublefloat)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), pos, x, ecl_make_symbol("DOUBLE-FLOAT", "CL"));
    return ecl_double_float(x);
}

static cl_fixnum rl_arg_fixnum(const char *fn, int pos, cl_object x, cl_fixnum lo, cl_fixnum hi) {
    if (!ECL_FIXNUMP(x) || ecl_fixnum(x) < lo || ecl_fixnum(x) > hi)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), pos, x,
                             cl_list(3, ecl_make_symbol("INTEGER", "CL"), ecl_make_fixnum(lo),
                                     ecl_make_fixnum(hi)));
    return ecl_fixnum(x);
}

static void rl_defun(const char *name, cl_objectfn_fixed fn, int narg) {
    ecl_def_c_function(rl_sym(name, "RONTOLISP"), fn, narg);
}

/* ---- knobs ---------------------------------------------------------- */

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
    rl_set_threads((int)rl_arg_fixnum("%SET-THREADS", 1, n, 0, 1024));
    ecl_return1(ecl_process_env(), n);
}

static cl_object rl_prim_simd_path(void) {
    ecl_return1(ecl_process_env(), ecl_make_simple_base_string(rl_simd_path(), -1));
}

static cl_object rl_prim_isatty(cl_object fd) {
    ecl_return1(ecl_process_env(), ecl_make_fixnum(isatty((int)rl_arg_fixnum("%ISATTY", 1, fd, 0, 1 << 20))));
}

/* ---- number formats ------------------------------------------------ */

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

void rl_register_primitives(void) {
    rl_defun("%SIMD", (cl_objectfn_fixed)rl_prim_simd, 0);
    rl_defun("%SET-SIMD", (cl_objectfn_fixed)rl_prim_set_simd, 1);
    rl_defun("%THREADS", (cl_objectfn_fixed)rl_prim_threads, 0);
    rl_defun("%SET-THREADS", (cl_objectfn_fixed)rl_prim_set_threads, 1);
    rl_defun("%SIMD-PATH", (cl_objectfn_fixed)rl_prim_simd_path, 0);
    rl_defun("%ISATTY", (cl_objectfn_fixed)rl_prim_isatty, 1);
    rl_defun("%DOUBLE-TO-SINGLE", (cl_objectfn_fixed)rl_prim_double_to_single, 1);
    rl_defun("%F16-BITS", (cl_objectfn_fixed)rl_prim_f16_bits, 1);
    rl_defun("%F16-VALUE", (cl_objectfn_fixed)rl_prim_f16_value, 1);
    rl_defun("%BF16-BITS", (cl_objectfn_fixed)rl_prim_bf16_bits, 1);
    rl_defun("%BF16-VALUE", (cl_objectfn_fixed)rl_prim_bf16_value, 1);
}
