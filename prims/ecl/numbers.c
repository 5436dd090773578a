/* numbers.c - the knobs (SIMD, threads) and single numbers: f16/bf16 bits,
 * the bits of a single-float, C's double -> float cast. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
#include "prims/ecl/glue.h"
#include "prims/numtext.h"

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

/* (%threads-knob n) -> the thread knob as it was set, 0 when it never was
 * (the machine's cores); sets it to N (0 to RL_MAX_THREADS) unless N is
 * NIL. */
static cl_object rl_prim_threads_knob(cl_object n) {
    int old = rl_threads_knob();
    if (n != ECL_NIL)
        rl_set_threads((int)rl_arg_fixnum("%THREADS-KNOB", 1, n, 0, RL_MAX_THREADS));
    ecl_return1(ecl_process_env(), ecl_make_fixnum(old));
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

/* (%numbers-text vector separator json) -> a base-string: the numbers of
 * VECTOR (a simple vector of fixnums, of (signed-byte 64 or 32) or of
 * single-floats) as text, SEPARATOR (a string of base characters) between
 * them, in one call rather than a FORMAT per number (numtext.h); NIL for a
 * vector of any other kind, which the caller writes itself.  A float is
 * written as FLOAT-TEXT writes it (JSON-FLOAT-STRING with JSON true: NaN
 * and the infinities quoted); a subnormal is left to that function. */
static cl_object rl_prim_numbers_text(cl_object v, cl_object sep, cl_object json) {
    cl_index n = 0, seplen;
    cl_elttype aet;
    char *buf, *grown;
    size_t cap, len = 0;
    cl_object out;
    /* the separator is checked first: whatever V is, a bad one is an error */
    if (!ECL_STRINGP(sep) || !ecl_fits_in_base_string(sep))
        rl_type_error("%NUMBERS-TEXT", 2, sep, RL_T_STRING);
    if (ECL_IMMEDIATE(v) || v->d.t != t_vector)
        ecl_return1(ecl_process_env(), ECL_NIL);
    aet = (cl_elttype)v->vector.elttype;
    if ((aet != ecl_aet_fix && aet != ecl_aet_i64 && aet != ecl_aet_i32 && aet != ecl_aet_sf) ||
        !rl_simple_data(v, aet, &n))
        ecl_return1(ecl_process_env(), ECL_NIL);
    sep = si_coerce_to_base_string(sep);
    seplen = ecl_length(sep);
    cap = (size_t)n * (RL_NUMTEXT_MAX + seplen) + 1;
    buf = malloc(cap);
    if (!buf)
        rl_signal(RL_C_ERROR, "%%NUMBERS-TEXT: out of memory for %lu numbers", (unsigned long)n);
    for (cl_index i = 0; i < n; i++) {
        if (i) {
            memcpy(buf + len, sep->base_string.self, seplen);
            len += seplen;
        }
        if (aet == ecl_aet_fix) {
            len += rl_int_text(v->vector.self.fix[i], buf + len);
        } else if (aet == ecl_aet_i64) {
            len += rl_int_text(v->vector.self.i64[i], buf + len);
        } else if (aet == ecl_aet_i32) {
            len += rl_int_text(v->vector.self.i32[i], buf + len);
        } else {
            float x = v->vector.self.sf[i];
            size_t k;
            {
                RL_FP_HOLD();
                k = rl_float_text(x, buf + len);
                RL_FP_RELEASE();
            }
            if (k == 0) {
                /* NaN, an infinity or a subnormal: the Lisp printer's text */
                cl_object s = cl_funcall(2, ecl_make_symbol(Null(json) ? "FLOAT-TEXT" : "JSON-FLOAT-STRING",
                                                            "TEXT"),
                                         ecl_make_single_float(x));
                s = si_coerce_to_base_string(s);
                k = ecl_length(s);
                if (len + k + (n - i) * (RL_NUMTEXT_MAX + seplen) + 1 > cap) {
                    cap = len + k + (n - i) * (RL_NUMTEXT_MAX + seplen) + 1;
                    grown = realloc(buf, cap);
                    if (!grown) {
                        free(buf);
                        rl_signal(RL_C_ERROR, "%%NUMBERS-TEXT: out of memory for %lu numbers",
                                  (unsigned long)n);
                    }
                    buf = grown;
                }
                memcpy(buf + len, s->base_string.self, k);
            }
            len += k;
        }
    }
    out = ecl_alloc_simple_base_string(len);
    memcpy(out->base_string.self, buf, len);
    free(buf);
    ecl_return1(ecl_process_env(), out);
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
    RL_PRIM("%BITS-SINGLE", rl_prim_bits_single, 1),
    RL_PRIM("%DOUBLE-TO-SINGLE", rl_prim_double_to_single, 1),
};
RL_PRIM_TABLE(rl_number_prims, "RONTOLISP", rl_defs);

/* Numbers as text, which TEXT's writers print with. */
static const rl_prim_def rl_text_defs[] = {
    RL_PRIM("%NUMBERS-TEXT", rl_prim_numbers_text, 3),
};
RL_PRIM_TABLE(rl_number_text_prims, "TEXT", rl_text_defs);

/* What only the command line uses: the --threads option's parser and a
 * float's bits (the jobs compare and print floats bit for bit). */
static const rl_prim_def rl_option_defs[] = {
    RL_PRIM("%THREADS-KNOB", rl_prim_threads_knob, 1),
    RL_PRIM("%SINGLE-BITS", rl_prim_single_bits, 1),
};
RL_PRIM_TABLE(rl_number_option_prims, "COMMAND-LINE", rl_option_defs);
