/* register.c - the one file in prims/ that speaks ECL: it wraps the plain C
 * kernels (cpu.c, q8.c, matvec.c, the gguf/ library) as Lisp functions in
 * the RONTOLISP package, converting and checking arguments on the way in
 * and signalling rontolisp's own conditions on the way out.
 *
 * Rule for every primitive: validate everything first, allocate after, and
 * never signal while anything malloc'd is live or worker threads run
 * (ECL's errors longjmp). */
#include <ecl/ecl.h>
#include <ctype.h>
#include <fenv.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/numfmt.h"
#include "gguf/safetensors.h"
#include "prims/bench.h"
#include "prims/cpu.h"
#include "prims/matvec.h"
#include "prims/q8.h"
#include "prims/register.h"

/* ECL runs with the overflow, invalid and divide-by-zero traps enabled, so
 * Lisp signals floating-point conditions.  The kernels rely on IEEE
 * non-stop arithmetic (1/d is +inf for a subnormal d, by design), so every
 * primitive that does float arithmetic holds the traps around it. */
#define RL_FP_HOLD()      \
    fenv_t rl_fenv_;      \
    feholdexcept(&rl_fenv_)
#define RL_FP_RELEASE() fesetenv(&rl_fenv_)

/* ECL stops at ecl_return3. */
#define rl_return4(env, a, b, c, d)                                 \
    do {                                                            \
        cl_env_ptr e_ = (env);                                      \
        cl_object a_ = (a), b_ = (b), c_ = (c), d_ = (d);           \
        e_->values[1] = b_;                                         \
        e_->values[2] = c_;                                         \
        e_->values[3] = d_;                                         \
        e_->nvalues = 4;                                            \
        return a_;                                                  \
    } while (0)

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

/* The keyword named by NAME upper-cased (C status names are lower case;
 * ecl_make_keyword would keep the case and make :|truncated|). */
static cl_object rl_keyword(const char *name) {
    char up[64];
    size_t k;
    for (k = 0; name[k] && k + 1 < sizeof up; k++)
        up[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 32 : name[k]);
    up[k] = 0;
    return ecl_make_keyword(up);
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
    rl_set_threads((int)rl_arg_fixnum("%SET-THREADS", 1, n, 1, RL_MAX_THREADS));
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

/* The bits of a single-float and back: NaN payloads and signed zeros kept. */
static cl_object rl_prim_single_bits(cl_object x) {
    ecl_return1(ecl_process_env(),
                ecl_make_unsigned_integer(rl_gguf_f32_bits(rl_arg_sf("%SINGLE-BITS", 1, x))));
}

static cl_object rl_prim_bits_single(cl_object b) {
    cl_object v = ECL_FIXNUMP(b) ? b : ecl_make_fixnum(-1);
    uint32_t u = (uint32_t)rl_arg_fixnum("%BITS-SINGLE", 1, v, 0, 0xffffffffL);
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

/* ---- signalling ----------------------------------------------------- */

/* Signal the condition class PKG::CLS with a formatted :MESSAGE.  Never
 * returns; call it only when nothing malloc'd is live. */
static void rl_signal(const char *cls, const char *pkg, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
static void rl_signal(const char *cls, const char *pkg, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cl_error(3, rl_sym(cls, pkg), ecl_make_keyword("MESSAGE"),
             ecl_make_simple_base_string(buf, -1));
    abort(); /* not reached: cl_error does not return */
}

/* ---- packed float arrays -------------------------------------------- */

/* A simple (not displaced, no fill pointer, not adjustable) vector or array
 * with element type aet; answers its data and total size, or NULL. */
static void *rl_simple_data(cl_object x, cl_elttype aet, cl_index *n) {
    if (ECL_IMMEDIATE(x))
        return NULL;
    if (x->d.t == t_vector) {
        if ((cl_elttype)x->vector.elttype != aet || x->vector.displaced != ECL_NIL ||
            ECL_ARRAY_HAS_FILL_POINTER_P(x) || ECL_ADJUSTABLE_ARRAY_P(x))
            return NULL;
        *n = x->vector.dim;
        return x->vector.self.b8;
    }
    if (x->d.t == t_array) {
        if ((cl_elttype)x->array.elttype != aet || x->array.displaced != ECL_NIL ||
            ECL_ADJUSTABLE_ARRAY_P(x))
            return NULL;
        *n = x->array.dim;
        return x->array.self.b8;
    }
    return NULL;
}

/* (%to-half-into src bf16-p dest): SRC a simple single- or double-float
 * array, DEST a simple (unsigned-byte 16) array of the same total size;
 * fills DEST with binary16 (bf16-p NIL) or bfloat16 bits.  A double goes
 * through C's cast to float first (SPEC 1). */
static cl_object rl_prim_to_half_into(cl_object src, cl_object bf16, cl_object dest) {
    cl_index n = 0, m = 0, i;
    const float *xs = rl_simple_data(src, ecl_aet_sf, &n);
    const double *xd = xs ? NULL : rl_simple_data(src, ecl_aet_df, &n);
    uint16_t *y = rl_simple_data(dest, ecl_aet_b16, &m);
    if (!xs && !xd)
        FEwrong_type_nth_arg(rl_sym("%TO-HALF-INTO", "RONTOLISP"), 1, src,
                             ecl_make_symbol("ARRAY", "CL"));
    if (!y || m != n)
        FEwrong_type_nth_arg(rl_sym("%TO-HALF-INTO", "RONTOLISP"), 3, dest,
                             ecl_make_symbol("ARRAY", "CL"));
    {
        RL_FP_HOLD();
        for (i = 0; i < n; i++) {
            float f = xs ? xs[i] : (float)xd[i];
            y[i] = bf16 != ECL_NIL ? rl_gguf_f32_to_bf16(f) : rl_gguf_f32_to_f16(f);
        }
        RL_FP_RELEASE();
    }
    ecl_return1(ecl_process_env(), dest);
}

/* (%half-to-single-into src bf16-p dest): the exact widening. */
static cl_object rl_prim_half_to_single_into(cl_object src, cl_object bf16, cl_object dest) {
    cl_index n = 0, m = 0;
    const uint16_t *x = rl_simple_data(src, ecl_aet_b16, &n);
    float *y = rl_simple_data(dest, ecl_aet_sf, &m);
    if (!x)
        FEwrong_type_nth_arg(rl_sym("%HALF-TO-SINGLE-INTO", "RONTOLISP"), 1, src,
                             ecl_make_symbol("ARRAY", "CL"));
    if (!y || m != n)
        FEwrong_type_nth_arg(rl_sym("%HALF-TO-SINGLE-INTO", "RONTOLISP"), 3, dest,
                             ecl_make_symbol("ARRAY", "CL"));
    if (bf16 != ECL_NIL)
        rl_gguf_bf16_to_f32_row(x, y, n);
    else
        rl_gguf_f16_to_f32_row(x, y, n);
    ecl_return1(ecl_process_env(), dest);
}

/* (%first-non-finite data kind) -> the row-major index of the first NaN or
 * infinity in DATA, or NIL.  KIND says how to read it: 0 single-floats,
 * 1 double-floats (non-finite once cast to single, as every kernel casts
 * them), 2 binary16 bits, 3 bfloat16 bits, both in (unsigned-byte 16). */
static cl_object rl_prim_first_non_finite(cl_object data, cl_object kind) {
    static const cl_elttype aet[] = {ecl_aet_sf, ecl_aet_df, ecl_aet_b16, ecl_aet_b16};
    cl_index k = (cl_index)rl_arg_fixnum("%FIRST-NON-FINITE", 2, kind, 0, 3), n = 0, i;
    const void *p = rl_simple_data(data, aet[k], &n);
    if (!p)
        FEwrong_type_nth_arg(rl_sym("%FIRST-NON-FINITE", "RONTOLISP"), 1, data,
                             ecl_make_symbol("ARRAY", "CL"));
    {
        RL_FP_HOLD(); /* a double beyond single range becomes inf, not a trap */
        /* Non-finite: every exponent bit set, in each format's layout. */
        for (i = 0; i < n; i++) {
            int bad;
            if (k == 0)
                bad = (rl_gguf_f32_bits(((const float *)p)[i]) & 0x7f800000u) == 0x7f800000u;
            else if (k == 1)
                bad = (rl_gguf_f32_bits((float)((const double *)p)[i]) & 0x7f800000u) == 0x7f800000u;
            else if (k == 2)
                bad = (((const uint16_t *)p)[i] & 0x7c00u) == 0x7c00u;
            else
                bad = (((const uint16_t *)p)[i] & 0x7f80u) == 0x7f80u;
            if (bad)
                break;
        }
        RL_FP_RELEASE();
    }
    ecl_return1(ecl_process_env(), i < n ? ecl_make_fixnum(i) : ECL_NIL);
}

/* The data and byte size of a simple single-float or (unsigned-byte 16)
 * array -- how F32, F16 and BF16 tensors live in Lisp -- or NULL. */
static void *rl_tensor_array_data(cl_object a, uint64_t *nbytes) {
    cl_index n = 0;
    void *p = rl_simple_data(a, ecl_aet_sf, &n);
    if (p) {
        *nbytes = (uint64_t)n * 4;
        return p;
    }
    p = rl_simple_data(a, ecl_aet_b16, &n);
    *nbytes = (uint64_t)n * 2;
    return p;
}

/* Copy NBYTES of a file's tensor at SRC into DEST (argument 3 of FN): a
 * simple single-float array for F32 data (F32-P), an (unsigned-byte 16) one
 * for F16/BF16, of exactly that many bytes. */
static void rl_copy_to_tensor_array(const char *fn, cl_object dest, int f32_p, const void *src,
                                    uint64_t nbytes) {
    cl_index n = 0;
    void *y = rl_simple_data(dest, f32_p ? ecl_aet_sf : ecl_aet_b16, &n);
    if (!y || (uint64_t)n * (f32_p ? 4 : 2) != nbytes)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 3, dest, ecl_make_symbol("ARRAY", "CL"));
    if (nbytes)
        memcpy(y, src, (size_t)nbytes);
}

/* ---- the quantized matrix ------------------------------------------- */

/* Slots of RONTOLISP::QUANTIZED-MATRIX, in lisp/qmatrix.lisp's order. */
enum { RL_QM_BASE, RL_QM_OFFSET, RL_QM_OWNER, RL_QM_DIMS, RL_QM_ROWS, RL_QM_COLS, RL_QM_FORMAT };

static cl_object rl_qm_class = ECL_NIL;

typedef struct {
    const rl_block_q8_0 *blocks;
    cl_index rows, cols, rank;
} rl_qm_view;

static int rl_qm_p(cl_object x) {
    return ECL_INSTANCEP(x) && ECL_CLASS_OF(x) == rl_qm_class;
}

/* The matrix's memory: its own octet vector, or a region of a mapped GGUF
 * file (a foreign pointer that gguf:close sets to NULL). */
static void rl_qm_view_of(cl_object m, rl_qm_view *v) {
    cl_object base = ECL_STRUCT_SLOT(m, RL_QM_BASE);
    const uint8_t *p = NULL;
    if (!ECL_IMMEDIATE(base) && base->d.t == t_vector && base->vector.elttype == ecl_aet_b8)
        p = base->vector.self.b8;
    else if (!ECL_IMMEDIATE(base) && base->d.t == t_foreign)
        p = (const uint8_t *)base->foreign.data;
    if (!p)
        rl_signal("FILE-CLOSED-ERROR", "GGUF",
                  "this quantized matrix lives in a GGUF file that gguf:close has released");
    v->blocks = (const rl_block_q8_0 *)(p + ecl_fixnum(ECL_STRUCT_SLOT(m, RL_QM_OFFSET)));
    v->rows = ecl_fixnum(ECL_STRUCT_SLOT(m, RL_QM_ROWS));
    v->cols = ecl_fixnum(ECL_STRUCT_SLOT(m, RL_QM_COLS));
    /* dims: a proper list of 1 to 4 fixnums, made by our Lisp code */
    v->rank = 0;
    for (cl_object l = ECL_STRUCT_SLOT(m, RL_QM_DIMS); l != ECL_NIL; l = ECL_CONS_CDR(l))
        v->rank++;
}

static void rl_qm_check(const char *fn, cl_object m, rl_qm_view *v) {
    if (!rl_qm_p(m))
        FEwrong_type_nth_arg(ecl_make_symbol(fn, "CL"), 1, m,
                             cl_list(3, ecl_make_symbol("OR", "CL"), ecl_make_symbol("ARRAY", "CL"),
                                     rl_sym("QUANTIZED-MATRIX", "RONTOLISP")));
    rl_qm_view_of(m, v);
}

static cl_index rl_qm_index(const char *fn, cl_object m, int axis, cl_object i, cl_index limit) {
    if (!ECL_FIXNUMP(i) || ecl_fixnum(i) < 0 || (cl_index)ecl_fixnum(i) >= limit) {
        cl_object s = cl_prin1_to_string(i);
        rl_signal("INDEX-ERROR", "RONTOLISP",
                  "%s: index %.40s on axis %d of %s is out of range (expected 0 to %lu)", fn,
                  ecl_base_string_pointer_safe(si_coerce_to_base_string(s)), axis,
                  ecl_fixnum(ECL_STRUCT_SLOT(m, RL_QM_ROWS)) == 1 &&
                          ecl_length(ECL_STRUCT_SLOT(m, RL_QM_DIMS)) == 1
                      ? "a rank-1 quantized matrix"
                      : "a quantized matrix",
                  (unsigned long)limit - 1);
    }
    return (cl_index)ecl_fixnum(i);
}

static void rl_qm_rank_check(const char *fn, const rl_qm_view *v, cl_index nidx) {
    if (v->rank != nidx)
        rl_signal("INDEX-ERROR", "RONTOLISP",
                  "%s: a rank-%lu quantized matrix takes %lu subscript%s, given %lu", fn,
                  (unsigned long)v->rank, (unsigned long)v->rank, v->rank == 1 ? "" : "s",
                  (unsigned long)nidx);
}

/* q * d of flat element i, inlined here: it is the whole cost of an AREF. */
static inline double rl_qm_elt(const rl_block_q8_0 *x, cl_index i) {
    const rl_block_q8_0 *b = x + i / RL_QK8_0;
    return (double)b->qs[i % RL_QK8_0] * (double)rl_gguf_f16_to_f32(b->d);
}

/* Entry points for compiled code (the compiler macros of lisp/qmatrix.lisp
 * emit c-inline calls to these, answering an unboxed double). */
double rl_qm_aref_1(cl_object m, cl_object i);
double rl_qm_aref_2(cl_object m, cl_object i, cl_object j);
double rl_qm_row_major_aref(cl_object m, cl_object i);

double rl_qm_aref_1(cl_object m, cl_object i) {
    rl_qm_view v;
    rl_qm_check("AREF", m, &v);
    rl_qm_rank_check("AREF", &v, 1);
    return rl_qm_elt(v.blocks, rl_qm_index("AREF", m, 0, i, v.cols));
}

double rl_qm_aref_2(cl_object m, cl_object i, cl_object j) {
    rl_qm_view v;
    rl_qm_check("AREF", m, &v);
    rl_qm_rank_check("AREF", &v, 2);
    cl_index r = rl_qm_index("AREF", m, 0, i, v.rows);
    cl_index c = rl_qm_index("AREF", m, 1, j, v.cols);
    return rl_qm_elt(v.blocks, r * v.cols + c);
}

double rl_qm_row_major_aref(cl_object m, cl_object i) {
    rl_qm_view v;
    rl_qm_check("ROW-MAJOR-AREF", m, &v);
    return rl_qm_elt(v.blocks, rl_qm_index("ROW-MAJOR-AREF", m, 0, i, v.rows * v.cols));
}

static cl_object rl_prim_qm_aref_1(cl_object m, cl_object i) {
    double d = rl_qm_aref_1(m, i);
    ecl_return1(ecl_process_env(), ecl_make_double_float(d));
}

static cl_object rl_prim_qm_aref_2(cl_object m, cl_object i, cl_object j) {
    double d = rl_qm_aref_2(m, i, j);
    ecl_return1(ecl_process_env(), ecl_make_double_float(d));
}

static cl_object rl_prim_qm_row_major_aref(cl_object m, cl_object i) {
    double d = rl_qm_row_major_aref(m, i);
    ecl_return1(ecl_process_env(), ecl_make_double_float(d));
}

/* (%q8-quantize src kind) -> octets | (values nil status where).  SRC is a
 * simple array of single-floats (kind 0), double-floats (1), or the
 * (unsigned-byte 16) bits of binary16 (2) or bfloat16 (3) values; its total
 * size a multiple of 32 (the Lisp side checks rank and shape). */
static cl_object rl_prim_q8_quantize(cl_object src, cl_object kind) {
    static const cl_elttype aet[] = {ecl_aet_sf, ecl_aet_df, ecl_aet_b16, ecl_aet_b16};
    cl_index k = (cl_index)rl_arg_fixnum("%Q8-QUANTIZE", 2, kind, 0, 3);
    cl_index n = 0;
    const void *x = rl_simple_data(src, aet[k], &n);
    const cl_env_ptr env = ecl_process_env();
    size_t where = 0;
    rl_q8_status st;
    cl_object out;

    if (!x)
        FEwrong_type_nth_arg(rl_sym("%Q8-QUANTIZE", "RONTOLISP"), 1, src,
                             ecl_make_symbol("ARRAY", "CL"));
    if (n % RL_QK8_0)
        rl_signal("SHAPE-ERROR", "RONTOLISP",
                  "quantize: expected a total size that is a multiple of 32, found %lu",
                  (unsigned long)n);
    out = ecl_alloc_simple_vector(rl_q8_bytes(n), ecl_aet_b8);
    {
        RL_FP_HOLD();
        switch (k) {
        case 0: st = rl_q8_quantize_f32((const float *)x, n, (rl_block_q8_0 *)out->vector.self.b8, &where); break;
        case 1: st = rl_q8_quantize_f64((const double *)x, n, (rl_block_q8_0 *)out->vector.self.b8, &where); break;
        case 2: st = rl_q8_quantize_f16((const uint16_t *)x, n, (rl_block_q8_0 *)out->vector.self.b8, &where); break;
        default: st = rl_q8_quantize_bf16((const uint16_t *)x, n, (rl_block_q8_0 *)out->vector.self.b8, &where); break;
        }
        RL_FP_RELEASE();
    }
    if (st == RL_Q8_OK)
        ecl_return1(env, out);
    ecl_return3(env, ECL_NIL,
                ecl_make_keyword(st == RL_Q8_NONFINITE ? "NON-FINITE"
                                 : st == RL_Q8_OVERFLOW ? "SCALE-OVERFLOW"
                                                        : "INTERNAL"),
                ecl_make_unsigned_integer(where));
}

/* (%q8-dequantize-into m dest): DEST a simple single-float array of the
 * matrix's total size. */
static cl_object rl_prim_q8_dequantize_into(cl_object m, cl_object dest) {
    rl_qm_view v;
    cl_index n = 0;
    float *y = rl_simple_data(dest, ecl_aet_sf, &n);
    rl_qm_check("%Q8-DEQUANTIZE-INTO", m, &v);
    if (!y || n != v.rows * v.cols)
        FEwrong_type_nth_arg(rl_sym("%Q8-DEQUANTIZE-INTO", "RONTOLISP"), 2, dest,
                             ecl_make_symbol("ARRAY", "CL"));
    {
        RL_FP_HOLD();
        rl_q8_dequantize(v.blocks, n / RL_QK8_0, y);
        RL_FP_RELEASE();
    }
    ecl_return1(ecl_process_env(), dest);
}

/* (%q8-row-into m i dest): row I dequantized into DEST (single-float
 * vector of length cols). */
static cl_object rl_prim_q8_row_into(cl_object m, cl_object i, cl_object dest) {
    rl_qm_view v;
    cl_index n = 0, r;
    float *y = rl_simple_data(dest, ecl_aet_sf, &n);
    rl_qm_check("%Q8-ROW-INTO", m, &v);
    r = rl_qm_index("LINALG:ROW", m, 0, i, v.rows);
    if (!y || n != v.cols)
        FEwrong_type_nth_arg(rl_sym("%Q8-ROW-INTO", "RONTOLISP"), 3, dest,
                             ecl_make_symbol("ARRAY", "CL"));
    {
        RL_FP_HOLD();
        rl_q8_dequantize(v.blocks + r * (v.cols / RL_QK8_0), v.cols / RL_QK8_0, y);
        RL_FP_RELEASE();
    }
    ecl_return1(ecl_process_env(), dest);
}

/* (%q8-copy-bytes m start count octets): COUNT bytes of the matrix's Q8_0
 * data from byte START into the octet vector OCTETS (from its index 0). */
static cl_object rl_prim_q8_copy_bytes(cl_object m, cl_object start, cl_object count,
                                       cl_object octets) {
    rl_qm_view v;
    cl_index n = 0, total;
    uint8_t *y = rl_simple_data(octets, ecl_aet_b8, &n);
    rl_qm_check("%Q8-COPY-BYTES", m, &v);
    total = rl_q8_bytes(v.rows * v.cols);
    cl_index s = (cl_index)rl_arg_fixnum("%Q8-COPY-BYTES", 2, start, 0, (cl_fixnum)total);
    cl_index c = (cl_index)rl_arg_fixnum("%Q8-COPY-BYTES", 3, count, 0, (cl_fixnum)(total - s));
    if (!y || n < c)
        FEwrong_type_nth_arg(rl_sym("%Q8-COPY-BYTES", "RONTOLISP"), 4, octets,
                             ecl_make_symbol("VECTOR", "CL"));
    memcpy(y, (const uint8_t *)v.blocks + s, c);
    ecl_return1(ecl_process_env(), octets);
}


/* ---- foreign handles ------------------------------------------------- */

/* A C object owned by Lisp (a mapped GGUF or safetensors file, a GGUF
 * writer) is a foreign-data object tagged with a keyword naming its kind.
 * Its pointer becomes NULL when released -- explicitly (gguf:close) or by
 * the finalizer, the safety net -- so a later use signals, never reads
 * freed memory. */
static cl_object rl_gguf_kw = ECL_NIL;   /* :GGUF-FILE */
static cl_object rl_writer_kw = ECL_NIL; /* :GGUF-WRITER */
static cl_object rl_st_kw = ECL_NIL;     /* :SAFETENSORS */

static int rl_handle_p(cl_object h, cl_object tag) {
    return !ECL_IMMEDIATE(h) && h->d.t == t_foreign && h->foreign.tag == tag;
}

/* Free what H points to (any kind); idempotent. */
static void rl_release(cl_object h) {
    void *p;
    if (ECL_IMMEDIATE(h) || h->d.t != t_foreign || !(p = h->foreign.data))
        return;
    h->foreign.data = NULL;
    if (h->foreign.tag == rl_gguf_kw)
        rl_gguf_close(p);
    else if (h->foreign.tag == rl_writer_kw)
        rl_gguf_writer_free(p);
    else if (h->foreign.tag == rl_st_kw)
        rl_st_close(p);
}

static cl_object rl_finalize_handle(cl_object h) {
    rl_release(h);
    ecl_return0(ecl_process_env());
}

/* A new handle of kind TAG for P, released by the collector if nobody
 * releases it first. */
static cl_object rl_make_handle(cl_object tag, void *p) {
    cl_object h = ecl_make_foreign_data(tag, 0, p);
    si_set_finalizer(h, ecl_make_cfun((cl_objectfn_fixed)rl_finalize_handle, ECL_NIL, NULL, 1));
    return h;
}

/* The live pointer of handle H of kind TAG; a wrong argument is a type
 * error, a released one signals CLS (in PKG) saying what was closed. */
static void *rl_handle(const char *fn, cl_object h, cl_object tag, const char *cls,
                       const char *pkg, const char *what) {
    if (!rl_handle_p(h, tag))
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 1, h, ecl_make_symbol("FOREIGN-DATA", "SI"));
    if (!h->foreign.data)
        rl_signal(cls, pkg, "%s: the %s was closed", fn, what);
    return h->foreign.data;
}

/* (%release handle): free a handle's C object now (gguf:close and friends). */
static cl_object rl_prim_release(cl_object h) {
    rl_release(h);
    ecl_return1(ecl_process_env(), ECL_NIL);
}

/* A path given as UTF-8 octets, NUL-terminated into BUF. */
static const char *rl_path_arg(const char *fn, cl_object octets, char *buf, size_t bufsz) {
    cl_index n = 0;
    const uint8_t *p = rl_simple_data(octets, ecl_aet_b8, &n);
    if (!p)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 1, octets, ecl_make_symbol("VECTOR", "CL"));
    if (n >= bufsz || memchr(p, 0, n))
        rl_signal("RONTOLISP-ERROR", "RONTOLISP",
                  "%s: the path is too long (4096 bytes or more) or contains a NUL byte", fn);
    memcpy(buf, p, n);
    buf[n] = 0;
    return buf;
}

/* ---- strings --------------------------------------------------------- */

/* A Lisp string from UTF-8 bytes: a base string when they are ASCII, else an
 * extended one, each invalid sequence read as U+FFFD. */
static cl_object rl_string_from_utf8(const char *p, uint64_t n) {
    const unsigned char *s = (const unsigned char *)p;
    uint64_t i;
    int ascii = 1;
    cl_object out = ECL_NIL;
    for (i = 0; i < n; i++)
        if (s[i] >= 0x80) {
            ascii = 0;
            break;
        }
    if (ascii) {
        out = ecl_alloc_simple_base_string(n);
        memcpy(out->base_string.self, s, n);
        return out;
    }
    /* Two passes: count the characters, then decode into the string. */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t k = 0;
        for (i = 0; i < n;) {
            uint32_t c = s[i], need, min = 0;
            if (c < 0x80) need = 0;
            else if ((c & 0xe0) == 0xc0) need = 1, c &= 0x1f, min = 0x80;
            else if ((c & 0xf0) == 0xe0) need = 2, c &= 0x0f, min = 0x800;
            else if ((c & 0xf8) == 0xf0) need = 3, c &= 0x07, min = 0x10000;
            else need = 99;
            if (need == 99 || (need > 0 && i + need >= n)) {
                c = 0xfffd; /* a stray byte, or a sequence cut by the end */
                i += 1;
            } else {
                uint32_t j;
                for (j = 1; j <= need; j++) {
                    if ((s[i + j] & 0xc0) != 0x80)
                        break;
                    c = (c << 6) | (s[i + j] & 0x3f);
                }
                if (j <= need || c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
                    c = 0xfffd; /* bad continuation, overlong, or not a scalar value */
                    i += 1;
                } else {
                    i += need + 1;
                }
            }
            if (pass == 1)
                ecl_char_set(out, k, c);
            k++;
        }
        if (pass == 0)
            out = ecl_alloc_simple_extended_string(k);
    }
    return out;
}

/* (%utf8-octets string) -> its UTF-8 encoding as an (unsigned-byte 8)
 * vector (characters above U+10FFFF or surrogates become U+FFFD), except
 * that U+DC80..U+DCFF become the single byte 80..FF: the host decodes a
 * command-line byte that is not UTF-8 so (runtime/main.c). */
static cl_object rl_prim_utf8_octets(cl_object str) {
    cl_index n, i, k = 0, len = 0;
    cl_object out;
    if (!ECL_STRINGP(str))
        FEwrong_type_nth_arg(rl_sym("%UTF8-OCTETS", "RONTOLISP"), 1, str, ecl_make_symbol("STRING", "CL"));
    n = ecl_length(str);
    for (i = 0; i < n; i++) {
        ecl_character c = ecl_char(str, i);
        len += c < 0x80 || (c >= 0xdc80 && c <= 0xdcff) ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    out = ecl_alloc_simple_vector(len, ecl_aet_b8);
    for (i = 0; i < n; i++) {
        uint32_t c = (uint32_t)ecl_char(str, i);
        uint8_t *y = out->vector.self.b8;
        if (c >= 0xdc80 && c <= 0xdcff) {
            y[k++] = (uint8_t)(c - 0xdc00);
            continue;
        }
        if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            c = 0xfffd;
        if (c < 0x80) {
            y[k++] = (uint8_t)c;
        } else if (c < 0x800) {
            y[k++] = (uint8_t)(0xc0 | (c >> 6));
            y[k++] = (uint8_t)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            y[k++] = (uint8_t)(0xe0 | (c >> 12));
            y[k++] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
            y[k++] = (uint8_t)(0x80 | (c & 0x3f));
        } else {
            y[k++] = (uint8_t)(0xf0 | (c >> 18));
            y[k++] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
            y[k++] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
            y[k++] = (uint8_t)(0x80 | (c & 0x3f));
        }
    }
    ecl_return1(ecl_process_env(), out);
}

/* (%utf8-string octets) -> the string those UTF-8 bytes spell (invalid
 * sequences read as U+FFFD). */
static cl_object rl_prim_utf8_string(cl_object octets) {
    cl_index n = 0;
    const uint8_t *p = rl_simple_data(octets, ecl_aet_b8, &n);
    if (!p)
        FEwrong_type_nth_arg(rl_sym("%UTF8-STRING", "RONTOLISP"), 1, octets, ecl_make_symbol("VECTOR", "CL"));
    ecl_return1(ecl_process_env(), rl_string_from_utf8((const char *)p, n));
}

/* ---- GGUF files ------------------------------------------------------ */

/* The rl_gguf_file behind a handle. */
static rl_gguf_file *rl_gguf_handle(const char *fn, cl_object h) {
    return rl_handle(fn, h, rl_gguf_kw, "FILE-CLOSED-ERROR", "GGUF", "GGUF file");
}

static cl_object rl_status_values(rl_gguf_status st, const char *msg, uint64_t off) {
    rl_return4(ecl_process_env(), ECL_NIL, rl_keyword(rl_gguf_status_name(st)),
               ecl_make_simple_base_string(msg, -1), ecl_make_uint64_t(off));
}

/* (%gguf-open path-octets) -> (values handle data-pointer) or
 * (values nil status-keyword message offset).  DATA-POINTER is a foreign
 * pointer to the whole mapping, the base of the file's quantized matrices. */
static cl_object rl_prim_gguf_open(cl_object path) {
    char msg[RL_GGUF_MSG_SIZE] = "", pbuf[4096];
    uint64_t off = 0;
    rl_gguf_file *f = NULL;
    rl_gguf_status st;
    cl_object h, base;
    st = rl_gguf_open(rl_path_arg("%GGUF-OPEN", path, pbuf, sizeof pbuf), &f, msg, sizeof msg, &off);
    if (st != RL_GGUF_OK)
        return rl_status_values(st, msg, off);
    h = rl_make_handle(rl_gguf_kw, f);
    base = ecl_make_foreign_data(ECL_NIL, (cl_index)rl_gguf_file_size(f), (void *)rl_gguf_bytes(f));
    ecl_return2(ecl_process_env(), h, base);
}

/* (%gguf-close handle base): release the mapping now; later use of the
 * handle or of a matrix on BASE signals instead of reading freed memory. */
static cl_object rl_prim_gguf_close(cl_object h, cl_object base) {
    if (rl_handle_p(h, rl_gguf_kw))
        rl_release(h);
    if (!ECL_IMMEDIATE(base) && base->d.t == t_foreign)
        base->foreign.data = NULL;
    ecl_return1(ecl_process_env(), ECL_NIL);
}

/* (%gguf-facts handle) -> (version alignment file-size data-offset kv-count
 * tensor-count header-end). */
static cl_object rl_prim_gguf_facts(cl_object h) {
    rl_gguf_file *f = rl_gguf_handle("%GGUF-FACTS", h);
    ecl_return1(ecl_process_env(),
                cl_list(7, ecl_make_fixnum(rl_gguf_version(f)), ecl_make_fixnum(rl_gguf_alignment(f)),
                        ecl_make_uint64_t(rl_gguf_file_size(f)), ecl_make_uint64_t(rl_gguf_data_offset(f)),
                        ecl_make_uint64_t(rl_gguf_kv_count(f)), ecl_make_uint64_t(rl_gguf_tensor_count(f)),
                        ecl_make_uint64_t(rl_gguf_header_end(f))));
}

static cl_object rl_gguf_value_to_lisp(const rl_gguf_file *f, const rl_gguf_val *v);

static cl_object rl_gguf_array_to_lisp(const rl_gguf_file *f, const rl_gguf_val *v) {
    static const struct { uint32_t type; cl_elttype aet; } numeric[] = {
        {RL_GGUF_TYPE_U8, ecl_aet_b8},   {RL_GGUF_TYPE_I8, ecl_aet_i8},
        {RL_GGUF_TYPE_U16, ecl_aet_b16}, {RL_GGUF_TYPE_I16, ecl_aet_i16},
        {RL_GGUF_TYPE_U32, ecl_aet_b32}, {RL_GGUF_TYPE_I32, ecl_aet_i32},
        {RL_GGUF_TYPE_U64, ecl_aet_b64}, {RL_GGUF_TYPE_I64, ecl_aet_i64},
        {RL_GGUF_TYPE_F32, ecl_aet_sf},  {RL_GGUF_TYPE_F64, ecl_aet_df},
    };
    size_t k;
    cl_object out;
    for (k = 0; k < sizeof numeric / sizeof numeric[0]; k++)
        if (numeric[k].type == v->elem_type) {
            const void *p = NULL;
            out = ecl_alloc_simple_vector((cl_index)v->count, numeric[k].aet);
            if (rl_gguf_array_data(f, v, &p) == RL_GGUF_OK && v->count)
                memcpy(out->vector.self.b8, p, (size_t)(v->count * rl_gguf_type_size(v->elem_type)));
            return out;
        }
    out = ecl_alloc_simple_vector((cl_index)v->count, ecl_aet_object);
    for (uint64_t j = 0; j < v->count; j++) {
        rl_gguf_val e;
        if (rl_gguf_array_get(f, v, j, &e) != RL_GGUF_OK)
            break; /* cannot happen for a parsed file */
        out->vector.self.t[j] = rl_gguf_value_to_lisp(f, &e);
    }
    return out;
}

static cl_object rl_gguf_value_to_lisp(const rl_gguf_file *f, const rl_gguf_val *v) {
    uint64_t u;
    int64_t i;
    double d;
    int b;
    const char *p;
    switch (v->type) {
    case RL_GGUF_TYPE_U8: case RL_GGUF_TYPE_U16: case RL_GGUF_TYPE_U32: case RL_GGUF_TYPE_U64:
        rl_gguf_val_u64(f, v, &u);
        return ecl_make_uint64_t(u);
    case RL_GGUF_TYPE_I8: case RL_GGUF_TYPE_I16: case RL_GGUF_TYPE_I32: case RL_GGUF_TYPE_I64:
        rl_gguf_val_i64(f, v, &i);
        return ecl_make_int64_t(i);
    case RL_GGUF_TYPE_F32:
        rl_gguf_val_f64(f, v, &d);
        {
            float x;
            RL_FP_HOLD();
            x = (float)d; /* exact: it was an f32 */
            RL_FP_RELEASE();
            return ecl_make_single_float(x);
        }
    case RL_GGUF_TYPE_F64:
        rl_gguf_val_f64(f, v, &d);
        return ecl_make_double_float(d);
    case RL_GGUF_TYPE_BOOL:
        rl_gguf_val_bool(f, v, &b);
        return b ? ECL_T : ECL_NIL;
    case RL_GGUF_TYPE_STRING:
        rl_gguf_val_str(f, v, &p, &u);
        return rl_string_from_utf8(p, u);
    case RL_GGUF_TYPE_ARRAY:
        return rl_gguf_array_to_lisp(f, v);
    default:
        return ECL_NIL; /* unknown types never get past the reader */
    }
}

/* The GGUF value type names of inspect, as keywords: :U8 ... :ARRAY. */
static cl_object rl_gguf_type_keyword(uint32_t t) {
    const char *name = rl_gguf_type_name(t);
    return name ? rl_keyword(name) : ECL_NIL;
}

/* The type of a value: a keyword, or for an array the list (:ARRAY elem)
 * where elem is a keyword or, for arrays of arrays, the type of the first
 * element ((:ARRAY NIL) when there is none). */
static cl_object rl_gguf_type_descr(const rl_gguf_file *f, const rl_gguf_val *v) {
    if (v->type != RL_GGUF_TYPE_ARRAY)
        return rl_gguf_type_keyword(v->type);
    if (v->elem_type == RL_GGUF_TYPE_ARRAY) {
        rl_gguf_val e;
        if (v->count && rl_gguf_array_get(f, v, 0, &e) == RL_GGUF_OK)
            return cl_list(2, ecl_make_keyword("ARRAY"), rl_gguf_type_descr(f, &e));
        return cl_list(2, ecl_make_keyword("ARRAY"), cl_list(2, ecl_make_keyword("ARRAY"), ECL_NIL));
    }
    return cl_list(2, ecl_make_keyword("ARRAY"), rl_gguf_type_keyword(v->elem_type));
}

/* (%gguf-metadata handle) -> a list of (key type value), in file order. */
static cl_object rl_prim_gguf_metadata(cl_object h) {
    rl_gguf_file *f = rl_gguf_handle("%GGUF-METADATA", h);
    uint64_t n = rl_gguf_kv_count(f), i;
    cl_object out = ECL_NIL;
    for (i = n; i-- > 0;) {
        uint64_t klen = 0;
        const char *key = rl_gguf_kv_key(f, i, &klen);
        rl_gguf_val v;
        rl_gguf_kv_value(f, i, &v);
        out = ecl_cons(cl_list(3, rl_string_from_utf8(key, klen), rl_gguf_type_descr(f, &v),
                               rl_gguf_value_to_lisp(f, &v)),
                       out);
    }
    ecl_return1(ecl_process_env(), out);
}

/* (%gguf-tensors handle) -> a list of (name n-dims ne-list type-id offset
 * nbytes absolute-offset), in file order. */
static cl_object rl_prim_gguf_tensors(cl_object h) {
    rl_gguf_file *f = rl_gguf_handle("%GGUF-TENSORS", h);
    uint64_t n = rl_gguf_tensor_count(f), i;
    cl_object out = ECL_NIL;
    for (i = n; i-- > 0;) {
        uint64_t len = 0;
        const char *name = rl_gguf_tensor_name(f, i, &len);
        uint32_t nd = rl_gguf_tensor_n_dims(f, i), d;
        cl_object ne = ECL_NIL;
        for (d = nd; d-- > 0;)
            ne = ecl_cons(ecl_make_int64_t(rl_gguf_tensor_ne(f, i, d)), ne);
        out = ecl_cons(cl_list(7, rl_string_from_utf8(name, len), ecl_make_fixnum(nd), ne,
                               ecl_make_fixnum(rl_gguf_tensor_type(f, i)),
                               ecl_make_uint64_t(rl_gguf_tensor_offset(f, i)),
                               ecl_make_uint64_t(rl_gguf_tensor_nbytes(f, i)),
                               ecl_make_uint64_t((uint64_t)((const uint8_t *)rl_gguf_tensor_data(f, i) -
                                                            rl_gguf_bytes(f)))),
                       out);
    }
    ecl_return1(ecl_process_env(), out);
}

/* (%gguf-copy-tensor handle index dest): the tensor's bytes into DEST, a
 * simple array (single-float for F32, (unsigned-byte 16) for F16/BF16) of
 * exactly that many bytes. */
static cl_object rl_prim_gguf_copy_tensor(cl_object h, cl_object index, cl_object dest) {
    rl_gguf_file *f = rl_gguf_handle("%GGUF-COPY-TENSOR", h);
    uint64_t i = (uint64_t)rl_arg_fixnum("%GGUF-COPY-TENSOR", 2, index, 0,
                                         (cl_fixnum)rl_gguf_tensor_count(f) - 1);
    rl_copy_to_tensor_array("%GGUF-COPY-TENSOR", dest, rl_gguf_tensor_type(f, i) == RL_GGUF_GGML_F32,
                            rl_gguf_tensor_data(f, i), rl_gguf_tensor_nbytes(f, i));
    ecl_return1(ecl_process_env(), dest);
}

/* (%ggml-type id) -> (values name block-size block-bytes known-p) or NIL. */
static cl_object rl_prim_ggml_type(cl_object id) {
    uint32_t t = (uint32_t)rl_arg_fixnum("%GGML-TYPE", 1, id, 0, 0xffffffffL);
    const char *name = rl_gguf_ggml_type_name(t);
    if (!name)
        ecl_return1(ecl_process_env(), ECL_NIL);
    rl_return4(ecl_process_env(), ecl_make_simple_base_string(name, -1),
               ecl_make_fixnum(rl_gguf_ggml_block_size(t)), ecl_make_fixnum(rl_gguf_ggml_block_bytes(t)),
               rl_gguf_ggml_type_known(t) ? ECL_T : ECL_NIL);
}

/* ---- the GGUF writer ------------------------------------------------- */

static rl_gguf_writer *rl_writer(cl_object w) {
    return rl_handle("%GGUF-WRITER", w, rl_writer_kw, "RONTOLISP-ERROR", "RONTOLISP", "GGUF writer");
}

/* (%gguf-writer-new alignment implicit-p) */
static cl_object rl_prim_gguf_writer_new(cl_object alignment, cl_object implicit) {
    uint32_t a = (uint32_t)rl_arg_fixnum("%GGUF-WRITER-NEW", 1, alignment, 1, 0x80000000L);
    rl_gguf_writer *w = rl_gguf_writer_new();
    cl_object o;
    if (!w)
        rl_signal("RONTOLISP-ERROR", "RONTOLISP", "gguf: out of memory making a writer");
    o = rl_make_handle(rl_writer_kw, w);
    rl_gguf_writer_set_alignment(w, a); /* errors are sticky: reported at write */
    if (implicit != ECL_NIL)
        rl_gguf_writer_set_implicit_alignment(w, 1);
    ecl_return1(ecl_process_env(), o);
}

/* NE, a list of 1 to 4 fixnums (ggml dims), into DIMS; answers the count. */
static uint32_t rl_tensor_dims(const char *fn, cl_object ne, int64_t dims[RL_GGUF_MAX_DIMS]) {
    uint32_t nd = 0;
    for (cl_object l = ne; l != ECL_NIL; l = ECL_CONS_CDR(l)) {
        if (!ECL_CONSP(l) || nd >= RL_GGUF_MAX_DIMS || !ECL_FIXNUMP(ECL_CONS_CAR(l)))
            FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 3, ne, ecl_make_symbol("LIST", "CL"));
        dims[nd++] = ecl_fixnum(ECL_CONS_CAR(l));
    }
    return nd;
}

static const uint8_t *rl_octets(const char *fn, int pos, cl_object v, cl_index *n) {
    const uint8_t *p = rl_simple_data(v, ecl_aet_b8, n);
    if (!p)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), pos, v,
                             ecl_make_symbol("VECTOR", "CL"));
    return p;
}

/* (%gguf-w-key w octets) */
static cl_object rl_prim_gguf_w_key(cl_object w, cl_object key) {
    cl_index n = 0;
    const uint8_t *p = rl_octets("%GGUF-W-KEY", 2, key, &n);
    rl_gguf_w_key(rl_writer(w), (const char *)p, n);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-scalar w type-id value): integers, floats, booleans (T/NIL). */
static cl_object rl_prim_gguf_w_scalar(cl_object w, cl_object type, cl_object v) {
    rl_gguf_writer *wr = rl_writer(w);
    uint32_t t = (uint32_t)rl_arg_fixnum("%GGUF-W-SCALAR", 2, type, 0, RL_GGUF_TYPE_COUNT - 1);
    switch (t) {
    case RL_GGUF_TYPE_BOOL:
        rl_gguf_w_uint(wr, t, v != ECL_NIL);
        break;
    case RL_GGUF_TYPE_U8: case RL_GGUF_TYPE_U16: case RL_GGUF_TYPE_U32: case RL_GGUF_TYPE_U64:
        if (!ECL_FIXNUMP(v) && !ECL_BIGNUMP(v))
            FEwrong_type_nth_arg(rl_sym("%GGUF-W-SCALAR", "RONTOLISP"), 3, v, ecl_make_symbol("INTEGER", "CL"));
        rl_gguf_w_uint(wr, t, ecl_to_uint64_t(v));
        break;
    case RL_GGUF_TYPE_I8: case RL_GGUF_TYPE_I16: case RL_GGUF_TYPE_I32: case RL_GGUF_TYPE_I64:
        if (!ECL_FIXNUMP(v) && !ECL_BIGNUMP(v))
            FEwrong_type_nth_arg(rl_sym("%GGUF-W-SCALAR", "RONTOLISP"), 3, v, ecl_make_symbol("INTEGER", "CL"));
        rl_gguf_w_int(wr, t, ecl_to_int64_t(v));
        break;
    case RL_GGUF_TYPE_F32: case RL_GGUF_TYPE_F64: {
        double d;
        if (ecl_t_of(v) == t_singlefloat)
            d = ecl_single_float(v);
        else if (ecl_t_of(v) == t_doublefloat)
            d = ecl_double_float(v);
        else
            FEwrong_type_nth_arg(rl_sym("%GGUF-W-SCALAR", "RONTOLISP"), 3, v, ecl_make_symbol("FLOAT", "CL"));
        {
            RL_FP_HOLD();
            rl_gguf_w_float(wr, t, d);
            RL_FP_RELEASE();
        }
        break;
    }
    default:
        FEwrong_type_nth_arg(rl_sym("%GGUF-W-SCALAR", "RONTOLISP"), 2, type, ecl_make_symbol("INTEGER", "CL"));
    }
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-string w octets) */
static cl_object rl_prim_gguf_w_string(cl_object w, cl_object s) {
    cl_index n = 0;
    const uint8_t *p = rl_octets("%GGUF-W-STRING", 2, s, &n);
    rl_gguf_w_str(rl_writer(w), (const char *)p, n);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-array-begin w elem-type) and (%gguf-w-array-end w) */
static cl_object rl_prim_gguf_w_array_begin(cl_object w, cl_object type) {
    rl_gguf_w_array_begin(rl_writer(w), (uint32_t)rl_arg_fixnum("%GGUF-W-ARRAY-BEGIN", 2, type, 0,
                                                               RL_GGUF_TYPE_COUNT - 1));
    ecl_return1(ecl_process_env(), w);
}

static cl_object rl_prim_gguf_w_array_end(cl_object w) {
    rl_gguf_w_array_end(rl_writer(w));
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-array-raw w vector): every element of a specialized numeric
 * vector whose element type is the open array's. */
static cl_object rl_prim_gguf_w_array_raw(cl_object w, cl_object v) {
    if (ECL_IMMEDIATE(v) || v->d.t != t_vector || v->vector.displaced != ECL_NIL ||
        v->vector.elttype == ecl_aet_object || ECL_ARRAY_HAS_FILL_POINTER_P(v))
        FEwrong_type_nth_arg(rl_sym("%GGUF-W-ARRAY-RAW", "RONTOLISP"), 2, v,
                             ecl_make_symbol("VECTOR", "CL"));
    rl_gguf_w_array_raw(rl_writer(w), v->vector.self.b8, v->vector.dim);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-tensor w name-octets ne-list type-id data): DATA a simple array
 * (single-float, (unsigned-byte 16) or (unsigned-byte 8)) or a quantized
 * matrix, whose bytes must stay alive until the file is written. */
static cl_object rl_prim_gguf_w_tensor(cl_object w, cl_object name, cl_object ne,
                                       cl_object type, cl_object data) {
    rl_gguf_writer *wr = rl_writer(w);
    cl_index nlen = 0, n = 0;
    const uint8_t *np = rl_octets("%GGUF-W-TENSOR", 2, name, &nlen);
    int64_t dims[RL_GGUF_MAX_DIMS];
    uint32_t nd = 0;
    const void *p;
    uint64_t nbytes;
    nd = rl_tensor_dims("%GGUF-W-TENSOR", ne, dims);
    if (rl_qm_p(data)) {
        rl_qm_view v;
        rl_qm_view_of(data, &v);
        p = v.blocks;
        nbytes = rl_q8_bytes(v.rows * v.cols);
    } else if ((p = rl_simple_data(data, ecl_aet_sf, &n))) {
        nbytes = (uint64_t)n * 4;
    } else if ((p = rl_simple_data(data, ecl_aet_b16, &n))) {
        nbytes = (uint64_t)n * 2;
    } else if ((p = rl_simple_data(data, ecl_aet_b8, &n))) {
        nbytes = n;
    } else {
        FEwrong_type_nth_arg(rl_sym("%GGUF-W-TENSOR", "RONTOLISP"), 5, data, ecl_make_symbol("ARRAY", "CL"));
    }
    rl_gguf_w_tensor(wr, (const char *)np, nlen, nd, dims,
                     (uint32_t)rl_arg_fixnum("%GGUF-W-TENSOR", 4, type, 0, 0xffff), p, nbytes);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-tensor-raw w name-octets ne-list type-id base offset nbytes):
 * a tensor whose bytes are NBYTES at OFFSET in BASE, the foreign pointer to
 * a mapped file (the file must stay open until the writer writes). */
static cl_object rl_prim_gguf_w_tensor_raw(cl_object w, cl_object name, cl_object ne,
                                           cl_object type, cl_object base, cl_object offset,
                                           cl_object nbytes) {
    rl_gguf_writer *wr = rl_writer(w);
    cl_index nlen = 0;
    const uint8_t *np = rl_octets("%GGUF-W-TENSOR-RAW", 2, name, &nlen);
    int64_t dims[RL_GGUF_MAX_DIMS];
    uint32_t nd;
    uint64_t off, nb;
    nd = rl_tensor_dims("%GGUF-W-TENSOR-RAW", ne, dims);
    if (ECL_IMMEDIATE(base) || base->d.t != t_foreign)
        FEwrong_type_nth_arg(rl_sym("%GGUF-W-TENSOR-RAW", "RONTOLISP"), 5, base,
                             ecl_make_symbol("FOREIGN-DATA", "SI"));
    if (!base->foreign.data)
        rl_signal("FILE-CLOSED-ERROR", "GGUF", "gguf:write: the source GGUF file was closed");
    off = (uint64_t)rl_arg_fixnum("%GGUF-W-TENSOR-RAW", 6, offset, 0, (cl_fixnum)base->foreign.size);
    nb = (uint64_t)rl_arg_fixnum("%GGUF-W-TENSOR-RAW", 7, nbytes, 0, (cl_fixnum)(base->foreign.size - off));
    rl_gguf_w_tensor(wr, (const char *)np, nlen, nd, dims,
                     (uint32_t)rl_arg_fixnum("%GGUF-W-TENSOR-RAW", 4, type, 0, 0xffff),
                     (const uint8_t *)base->foreign.data + off, nb);
    ecl_return1(ecl_process_env(), w);
}

/* (%gguf-w-write w path) -> T or (values nil status message offset). */
static cl_object rl_prim_gguf_w_write(cl_object w, cl_object path) {
    char msg[RL_GGUF_MSG_SIZE] = "";
    uint64_t off = 0;
    rl_gguf_status st;
    char pbuf[4096];
    st = rl_gguf_writer_write(rl_writer(w), rl_path_arg("%GGUF-W-WRITE", path, pbuf, sizeof pbuf),
                              msg, sizeof msg, &off);
    if (st != RL_GGUF_OK)
        return rl_status_values(st, msg, off);
    ecl_return1(ecl_process_env(), ECL_T);
}

/* ---- safetensors and JSON (lisp/convert.lisp) ------------------------ */

/* The safetensors reader (gguf/safetensors.c) and libjansson seen from
 * Lisp.  Like the GGUF glue, a bad file is not signalled here: the
 * primitives answer (values nil status-keyword message offset) and
 * lisp/safetensors.lisp signals rontolisp's own conditions with the path. */

static rl_st_file *rl_st_handle(const char *fn, cl_object h) {
    return rl_handle(fn, h, rl_st_kw, "RONTOLISP-ERROR", "RONTOLISP", "safetensors file");
}

/* (%st-open path-octets) -> handle, or (values nil status message offset). */
static cl_object rl_prim_st_open(cl_object path) {
    char msg[RL_ST_MSG_SIZE] = "", cpath[4096];
    uint64_t off = 0;
    rl_st_file *f = NULL;
    rl_st_status st;
    cl_object h;
    st = rl_st_open(rl_path_arg("%ST-OPEN", path, cpath, sizeof cpath), &f, msg, sizeof msg, &off);
    if (st != RL_ST_OK)
        rl_return4(ecl_process_env(), ECL_NIL, rl_keyword(rl_st_status_name(st)),
                   ecl_make_simple_base_string(msg, -1), ecl_make_uint64_t(off));
    h = rl_make_handle(rl_st_kw, f);
    ecl_return1(ecl_process_env(), h);
}

/* (%st-tensors handle) -> list of (name dtype-name shape-list nbytes offset). */
static cl_object rl_prim_st_tensors(cl_object h) {
    rl_st_file *f = rl_st_handle("%ST-TENSORS", h);
    cl_object out = ECL_NIL;
    for (uint64_t i = rl_st_tensor_count(f); i-- > 0;) {
        const rl_st_tensor *t = rl_st_tensor_at(f, i);
        cl_object shape = ECL_NIL;
        for (uint32_t d = t->n_dims; d-- > 0;)
            shape = ecl_cons(ecl_make_int64_t(t->shape[d]), shape);
        out = ecl_cons(cl_list(5, rl_string_from_utf8(t->name, strlen(t->name)),
                               ecl_make_simple_base_string(rl_st_dtype_name(t->dtype), -1),
                               shape, ecl_make_uint64_t(t->nbytes), ecl_make_uint64_t(t->begin)),
                       out);
    }
    ecl_return1(ecl_process_env(), out);
}

/* (%st-metadata handle) -> list of (key . value) strings. */
static cl_object rl_prim_st_metadata(cl_object h) {
    rl_st_file *f = rl_st_handle("%ST-METADATA", h);
    cl_object out = ECL_NIL;
    for (uint64_t i = rl_st_metadata_count(f); i-- > 0;) {
        const char *k = rl_st_metadata_key(f, i), *v = rl_st_metadata_value(f, i);
        out = ecl_cons(ecl_cons(rl_string_from_utf8(k, strlen(k)), rl_string_from_utf8(v, strlen(v))),
                       out);
    }
    ecl_return1(ecl_process_env(), out);
}

/* (%st-copy-tensor handle index dest): copy tensor INDEX's bytes into DEST,
 * a simple single-float (F32) or (unsigned-byte 16) (F16, BF16) array of
 * the tensor's byte size.  Answers DEST. */
static cl_object rl_prim_st_copy_tensor(cl_object h, cl_object index, cl_object dest) {
    rl_st_file *f = rl_st_handle("%ST-COPY-TENSOR", h);
    cl_index i = (cl_index)rl_arg_fixnum("%ST-COPY-TENSOR", 2, index, 0,
                                         (cl_fixnum)rl_st_tensor_count(f) - 1);
    const rl_st_tensor *t = rl_st_tensor_at(f, i);
    rl_copy_to_tensor_array("%ST-COPY-TENSOR", dest, t->dtype == RL_ST_F32, rl_st_tensor_data(f, i),
                            t->nbytes);
    ecl_return1(ecl_process_env(), dest);
}

/* (%octets-of array): a fresh (unsigned-byte 8) vector holding the raw
 * (little-endian) bytes of a simple single-float or (unsigned-byte 16)
 * array: what a safetensors file stores. */
static cl_object rl_prim_octets_of(cl_object a) {
    uint64_t size = 0;
    const void *p = rl_tensor_array_data(a, &size);
    cl_object v;
    if (!p)
        FEwrong_type_nth_arg(rl_sym("%OCTETS-OF", "RONTOLISP"), 1, a, ecl_make_symbol("ARRAY", "CL"));
    v = ecl_alloc_simple_vector((cl_index)size, ecl_aet_b8);
    if (size)
        memcpy(v->vector.self.b8, p, (size_t)size);
    ecl_return1(ecl_process_env(), v);
}

/* JSON values as Lisp objects: object -> EQUAL hash table, array -> simple
 * vector, string -> string, integer -> integer, real -> double-float, true
 * -> T, false -> NIL, null -> :NULL.  jansson bounds the nesting depth
 * (2048), so this recursion is bounded too. */
static cl_object rl_json_to_lisp(json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        cl_object table = cl_make_hash_table(4, ecl_make_keyword("TEST"), ecl_make_symbol("EQUAL", "CL"),
                                             ecl_make_keyword("SIZE"),
                                             ecl_make_fixnum((cl_fixnum)json_object_size(j) + 1));
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            ecl_sethash(rl_string_from_utf8(k, strlen(k)), table, rl_json_to_lisp(v));
        }
        return table;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        cl_object vec = si_make_vector(ECL_T, ecl_make_fixnum((cl_fixnum)n), ECL_NIL, ECL_NIL, ECL_NIL,
                                       ECL_NIL);
        for (size_t i = 0; i < n; i++)
            ecl_aset1(vec, i, rl_json_to_lisp(json_array_get(j, i)));
        return vec;
    }
    case JSON_STRING:
        return rl_string_from_utf8(json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        return ecl_make_int64_t((int64_t)json_integer_value(j));
    case JSON_REAL:
        return ecl_make_double_float(json_real_value(j));
    case JSON_TRUE:
        return ECL_T;
    case JSON_FALSE:
        return ECL_NIL;
    default:
        return ecl_make_keyword("NULL");
    }
}

/* (%json-parse octets) -> value, or (values nil :json message offset).
 * OCTETS is UTF-8 text holding one JSON value. */
static cl_object rl_prim_json_parse(cl_object octets) {
    cl_index n = 0;
    const uint8_t *p = rl_octets("%JSON-PARSE", 1, octets, &n);
    json_error_t err;
    json_t *root = json_loadb((const char *)p, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
    cl_object v;
    if (!root) {
        char msg[300];
        snprintf(msg, sizeof msg, "at byte %d (line %d, column %d): %s", err.position, err.line,
                 err.column, err.text);
        rl_return4(ecl_process_env(), ECL_NIL, ecl_make_keyword("JSON"),
                   ecl_make_simple_base_string(msg, -1), ecl_make_fixnum(err.position));
    }
    /* Conversion allocates Lisp objects only; nothing signals while ROOT is
     * live except out-of-memory, which ECL treats as fatal anyway. */
    v = rl_json_to_lisp(root);
    json_decref(root);
    ecl_return1(ecl_process_env(), v);
}

static void rl_register_convert_primitives(void) {
    rl_st_kw = ecl_make_keyword("SAFETENSORS");
    rl_defun("%ST-OPEN", (cl_objectfn_fixed)rl_prim_st_open, 1);
    rl_defun("%ST-TENSORS", (cl_objectfn_fixed)rl_prim_st_tensors, 1);
    rl_defun("%ST-METADATA", (cl_objectfn_fixed)rl_prim_st_metadata, 1);
    rl_defun("%ST-COPY-TENSOR", (cl_objectfn_fixed)rl_prim_st_copy_tensor, 3);
    rl_defun("%OCTETS-OF", (cl_objectfn_fixed)rl_prim_octets_of, 1);
    rl_defun("%JSON-PARSE", (cl_objectfn_fixed)rl_prim_json_parse, 1);
}
/* ---- end of safetensors and JSON ------------------------------------- */

/* ---- matvec and benchmarks (lisp/vec.lisp, lisp/bench.lisp) ---------- */

/* The operands of a product, as %MATVEC and %BENCH-MATVEC take them. */
typedef struct {
    const rl_block_q8_0 *w; /* Q8_0 weights, or NULL for the f32 baseline */
    const float *mf;        /* f32 weights (row-major), or NULL */
    cl_index rows, cols;
    const void *x;          /* cols floats */
    void *y;                /* rows floats */
    int dbl;                /* x and y are double-float */
} rl_mv_operands;

/* Check and resolve (m x out) for the primitive FN.  M a quantized matrix
 * of rank 2 or a simple rank-2 single-float array; X and OUT simple vectors
 * of one float type (single: f32 result; double: the double result), of
 * lengths cols and rows.  The Lisp side checks and explains; this checks
 * again so a direct call cannot crash.  Signals; allocates nothing. */
static void rl_mv_operands_of(const char *fn, cl_object m, cl_object x, cl_object out,
                              rl_mv_operands *o) {
    cl_index n = 0, nout = 0;
    o->w = NULL;
    o->mf = NULL;
    o->x = rl_simple_data(x, ecl_aet_sf, &n);
    o->dbl = o->x == NULL;
    if (o->dbl)
        o->x = rl_simple_data(x, ecl_aet_df, &n);
    o->y = rl_simple_data(out, o->dbl ? ecl_aet_df : ecl_aet_sf, &nout);
    if (!o->x || ECL_IMMEDIATE(x) || x->d.t != t_vector)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 2, x, ecl_make_symbol("VECTOR", "CL"));
    if (!o->y || out->d.t != t_vector)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 3, out, ecl_make_symbol("VECTOR", "CL"));
    if (rl_qm_p(m)) {
        rl_qm_view v;
        rl_qm_view_of(m, &v);
        if (v.rank != 2)
            FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 1, m, ecl_make_symbol("ARRAY", "CL"));
        o->w = v.blocks;
        o->rows = v.rows;
        o->cols = v.cols;
    } else {
        cl_index total = 0;
        o->mf = rl_simple_data(m, ecl_aet_sf, &total);
        if (!o->mf || m->d.t != t_array || m->array.rank != 2)
            FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 1, m, ecl_make_symbol("ARRAY", "CL"));
        o->rows = m->array.dims[0];
        o->cols = m->array.dims[1];
    }
    if (n != o->cols || nout != o->rows)
        FEwrong_type_nth_arg(rl_sym(fn, "RONTOLISP"), 2, x, ecl_make_symbol("VECTOR", "CL"));
}

static cl_object rl_mv_status_keyword(rl_q8_status st) {
    return ecl_make_keyword(st == RL_Q8_NONFINITE     ? "NON-FINITE"
                            : st == RL_Q8_OVERFLOW    ? "SCALE-OVERFLOW"
                            : st == RL_Q8_NOMEM       ? "NO-MEMORY"
                            : st == RL_Q8_UNSUPPORTED ? "UNSUPPORTED"
                                                      : "INTERNAL");
}

/* One product with an explicit path and thread count (min_work as the
 * caller says).  No signalling: the caller holds traps and interrupts. */
static rl_q8_status rl_mv_run(const rl_mv_operands *o, rl_path path, int threads, int min_work,
                              char *msg, size_t msglen) {
    rl_q8_src src = o->dbl ? RL_SRC_F64 : RL_SRC_F32;
    double *yd = o->dbl ? o->y : NULL;
    float *yf = o->dbl ? NULL : o->y;
    if (o->w)
        return rl_matvec_q8_ex(o->w, o->rows, o->cols, src, o->x, yd, yf, path, threads,
                               min_work, msg, msglen);
    if (msg && msglen)
        msg[0] = 0;
    return rl_matvec_f32_ex(o->mf, o->rows, o->cols, src, o->x, yd, yf, path, threads, min_work);
}

/* (%matvec m x out) -> OUT, or (values nil status-keyword message), with
 * the path and thread count of the knobs (--simd, --threads N).  Operands
 * as rl_mv_operands_of says. */
static cl_object rl_prim_matvec(cl_object m, cl_object x, cl_object out) {
    char msg[256] = "";
    rl_mv_operands o;
    rl_q8_status st;
    const cl_env_ptr env = ecl_process_env();
    rl_mv_operands_of("%MATVEC", m, x, out, &o);
    {
        RL_FP_HOLD();
        ecl_disable_interrupts_env(env);
        st = rl_mv_run(&o, rl_path_best(), rl_threads(), 1, msg, sizeof msg);
        ecl_enable_interrupts_env(env);
        RL_FP_RELEASE();
    }
    if (st == RL_Q8_OK)
        ecl_return1(env, out);
    ecl_return3(env, ECL_NIL, rl_mv_status_keyword(st), ecl_make_simple_base_string(msg, -1));
}

static rl_path rl_arg_path(const char *fn, int pos, cl_object p) {
    return (rl_path)rl_arg_fixnum(fn, pos, p, RL_PATH_REF, RL_PATH_AVX512VNNI);
}

/* (%bench-matvec m x out path threads iters budget-ns)
 *   -> (values times count), or (values nil status-keyword message)
 * Times the product of %MATVEC's operands on kernel PATH (0 scalar, 1 avx2,
 * 2 avx512, 3 avx512vnni; the f32 baseline's SIMD kernel is AVX2 for every
 * SIMD path) split into exactly THREADS chunks: unlike the knob entries,
 * small products are not cut to fewer threads.  One untimed call warms the
 * caches and the pool, then up to ITERS timed calls, stopping early once
 * BUDGET-NS nanoseconds (0: no limit) have passed and 3 calls are timed.
 * TIMES is a fresh double-float vector of length ITERS whose first COUNT
 * entries are each call's nanoseconds.  OUT keeps the last result: tests
 * compare paths and thread counts through it.  Nothing is malloc'd here
 * (the kernels' own scratch lives only inside a call, interrupts off). */
static cl_object rl_prim_bench_matvec(cl_object m, cl_object x, cl_object out, cl_object path,
                                      cl_object threads, cl_object iters, cl_object budget) {
    char msg[256] = "";
    rl_mv_operands o;
    rl_q8_status st;
    const cl_env_ptr env = ecl_process_env();
    rl_path p = rl_arg_path("%BENCH-MATVEC", 4, path);
    int nth = (int)rl_arg_fixnum("%BENCH-MATVEC", 5, threads, 1, RL_MAX_THREADS);
    cl_index n = (cl_index)rl_arg_fixnum("%BENCH-MATVEC", 6, iters, 1, 1000000);
    uint64_t limit;
    cl_object times;
    cl_index done = 0;
    if (!ECL_FIXNUMP(budget) || ecl_fixnum(budget) < 0)
        FEwrong_type_nth_arg(rl_sym("%BENCH-MATVEC", "RONTOLISP"), 7, budget,
                             ecl_make_symbol("FIXNUM", "CL"));
    limit = (uint64_t)ecl_fixnum(budget);
    rl_mv_operands_of("%BENCH-MATVEC", m, x, out, &o);
    times = ecl_alloc_simple_vector(n, ecl_aet_df);
    {
        RL_FP_HOLD();
        ecl_disable_interrupts_env(env);
        st = rl_mv_run(&o, p, nth, 0, msg, sizeof msg); /* warm-up */
        ecl_enable_interrupts_env(env);
        uint64_t start = rl_bench_ns();
        while (st == RL_Q8_OK && done < n) {
            ecl_disable_interrupts_env(env);
            uint64_t t0 = rl_bench_ns();
            st = rl_mv_run(&o, p, nth, 0, msg, sizeof msg);
            uint64_t t1 = rl_bench_ns();
            ecl_enable_interrupts_env(env);
            times->vector.self.df[done++] = (double)(t1 - t0);
            if (limit && done >= 3 && t1 - start >= limit)
                break;
        }
        RL_FP_RELEASE();
    }
    if (st != RL_Q8_OK)
        ecl_return3(env, ECL_NIL, rl_mv_status_keyword(st), ecl_make_simple_base_string(msg, -1));
    ecl_return2(env, times, ecl_make_fixnum(done));
}

/* (%bench-quantize x path reps) -> times | (values nil status-keyword)
 * Times quantizing X (a simple single-float array whose total size is a
 * multiple of 32) to Q8_0 on PATH (0 scalar; every SIMD path uses the AVX2
 * quantizer): one untimed run, then REPS timed ones; TIMES a fresh
 * double-float vector of their nanoseconds. */
static cl_object rl_prim_bench_quantize(cl_object x, cl_object path, cl_object reps) {
    cl_index n = 0;
    const float *xs = rl_simple_data(x, ecl_aet_sf, &n);
    rl_path p = rl_arg_path("%BENCH-QUANTIZE", 2, path);
    cl_index r = (cl_index)rl_arg_fixnum("%BENCH-QUANTIZE", 3, reps, 1, 100000);
    const cl_env_ptr env = ecl_process_env();
    cl_object y, times;
    rl_q8_status st;
    if (!xs || n % RL_QK8_0)
        FEwrong_type_nth_arg(rl_sym("%BENCH-QUANTIZE", "RONTOLISP"), 1, x,
                             ecl_make_symbol("ARRAY", "CL"));
    y = ecl_alloc_simple_vector(rl_q8_bytes(n) ? rl_q8_bytes(n) : 1, ecl_aet_b8);
    times = ecl_alloc_simple_vector(r, ecl_aet_df);
    {
        RL_FP_HOLD();
        rl_block_q8_0 *yb = (rl_block_q8_0 *)(void *)y->vector.self.b8;
        st = rl_q8_quantize_path(RL_SRC_F32, xs, n, yb, NULL, p);
        for (cl_index i = 0; st == RL_Q8_OK && i < r; i++) {
            uint64_t t0 = rl_bench_ns();
            st = rl_q8_quantize_path(RL_SRC_F32, xs, n, yb, NULL, p);
            times->vector.self.df[i] = (double)(rl_bench_ns() - t0);
        }
        RL_FP_RELEASE();
    }
    if (st != RL_Q8_OK)
        ecl_return2(env, ECL_NIL, rl_mv_status_keyword(st));
    ecl_return1(env, times);
}

/* (%bench-read-gbps bytes threads reps) -> (values best-gbps median-gbps),
 * or NIL when the probe cannot run (allocation failed).  BYTES 0 means
 * rl_bench_default_bytes (8 x the last-level cache, at least 256 MiB). */
static cl_object rl_prim_bench_read_gbps(cl_object bytes, cl_object threads, cl_object reps) {
    cl_index b = (cl_index)rl_arg_fixnum("%BENCH-READ-GBPS", 1, bytes, 0, MOST_POSITIVE_FIXNUM);
    int nth = (int)rl_arg_fixnum("%BENCH-READ-GBPS", 2, threads, 1, RL_MAX_THREADS);
    int r = (int)rl_arg_fixnum("%BENCH-READ-GBPS", 3, reps, 1, 1000);
    const cl_env_ptr env = ecl_process_env();
    double best, median = 0;
    ecl_disable_interrupts_env(env); /* the probe mallocs its buffer */
    best = rl_bench_read_gbps(b, nth, r, &median);
    ecl_enable_interrupts_env(env);
    if (best < 0)
        ecl_return1(env, ECL_NIL);
    ecl_return2(env, ecl_make_double_float(best), ecl_make_double_float(median));
}

/* (%bench-fill-random array seed) -> ARRAY: fills a simple single-float
 * array (any rank) with values uniform in [-1, 1), a fixed function of
 * SEED (splitmix64), fast enough for matrices of hundreds of MB. */
static cl_object rl_prim_bench_fill_random(cl_object a, cl_object seed) {
    cl_index n = 0;
    float *y = rl_simple_data(a, ecl_aet_sf, &n);
    uint64_t s = (uint64_t)rl_arg_fixnum("%BENCH-FILL-RANDOM", 2, seed, 0, MOST_POSITIVE_FIXNUM);
    if (!y)
        FEwrong_type_nth_arg(rl_sym("%BENCH-FILL-RANDOM", "RONTOLISP"), 1, a,
                             ecl_make_symbol("ARRAY", "CL"));
    for (cl_index i = 0; i < n; i++) {
        uint64_t z = (s += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        z ^= z >> 31;
        /* 24 random bits: k / 2^23 - 1 is exact in f32, in [-1, 1) */
        y[i] = (float)(int32_t)(z >> 40) * 0x1p-23f - 1.0f;
    }
    ecl_return1(ecl_process_env(), a);
}

/* (%cpu-info) -> plist (:cores N :llc-bytes N :probe-bytes N :best NAME
 * :paths ((ID . NAME) ...)): what the CPU offers, whatever the SIMD knob
 * says; :best is the fastest supported path. */
static cl_object rl_prim_cpu_info(void) {
    cl_object paths = ECL_NIL;
    rl_path best = RL_PATH_REF;
    for (int p = RL_PATH_AVX512VNNI; p >= RL_PATH_REF; p--)
        if (rl_path_supported((rl_path)p)) {
            paths = ecl_cons(ecl_cons(ecl_make_fixnum(p),
                                      ecl_make_simple_base_string(rl_path_name((rl_path)p), -1)),
                             paths);
            if (p > (int)best)
                best = (rl_path)p;
        }
    ecl_return1(ecl_process_env(),
                cl_list(10, ecl_make_keyword("CORES"), ecl_make_fixnum(rl_cpu_cores()),
                        ecl_make_keyword("LLC-BYTES"),
                        ecl_make_unsigned_integer(rl_bench_llc_bytes()),
                        ecl_make_keyword("PROBE-BYTES"),
                        ecl_make_unsigned_integer(rl_bench_default_bytes()),
                        ecl_make_keyword("BEST"),
                        ecl_make_simple_base_string(rl_path_name(best), -1),
                        ecl_make_keyword("PATHS"), paths));
}

/* (%bench-now-ns) -> monotonic nanoseconds, for timing in Lisp. */
static cl_object rl_prim_bench_now_ns(void) {
    ecl_return1(ecl_process_env(), ecl_make_unsigned_integer(rl_bench_ns()));
}

static void rl_register_vec_primitives(void) {
    rl_defun("%MATVEC", (cl_objectfn_fixed)rl_prim_matvec, 3);
    rl_defun("%BENCH-MATVEC", (cl_objectfn_fixed)rl_prim_bench_matvec, 7);
    rl_defun("%BENCH-QUANTIZE", (cl_objectfn_fixed)rl_prim_bench_quantize, 3);
    rl_defun("%BENCH-READ-GBPS", (cl_objectfn_fixed)rl_prim_bench_read_gbps, 3);
    rl_defun("%BENCH-FILL-RANDOM", (cl_objectfn_fixed)rl_prim_bench_fill_random, 2);
    rl_defun("%CPU-INFO", (cl_objectfn_fixed)rl_prim_cpu_info, 0);
    rl_defun("%BENCH-NOW-NS", (cl_objectfn_fixed)rl_prim_bench_now_ns, 0);
}
/* ---- end of matvec and benchmarks ------------------------------------ */

void rl_register_primitives(void) {
    rl_defun("%SIMD", (cl_objectfn_fixed)rl_prim_simd, 0);
    rl_defun("%SET-SIMD", (cl_objectfn_fixed)rl_prim_set_simd, 1);
    rl_defun("%THREADS", (cl_objectfn_fixed)rl_prim_threads, 0);
    rl_defun("%SET-THREADS", (cl_objectfn_fixed)rl_prim_set_threads, 1);
    rl_defun("%SIMD-PATH", (cl_objectfn_fixed)rl_prim_simd_path, 0);
    rl_defun("%ISATTY", (cl_objectfn_fixed)rl_prim_isatty, 1);
    rl_defun("%SINGLE-BITS", (cl_objectfn_fixed)rl_prim_single_bits, 1);
    rl_defun("%BITS-SINGLE", (cl_objectfn_fixed)rl_prim_bits_single, 1);
    rl_defun("%DOUBLE-TO-SINGLE", (cl_objectfn_fixed)rl_prim_double_to_single, 1);
    rl_register_vec_primitives();
    rl_register_convert_primitives();
    rl_register_file_primitives();
    rl_qm_class = cl_find_class(1, rl_sym("QUANTIZED-MATRIX", "RONTOLISP"));
    ecl_register_root(&rl_qm_class);
    rl_defun("%QM-AREF-1", (cl_objectfn_fixed)rl_prim_qm_aref_1, 2);
    rl_defun("%QM-AREF-2", (cl_objectfn_fixed)rl_prim_qm_aref_2, 3);
    rl_defun("%QM-ROW-MAJOR-AREF", (cl_objectfn_fixed)rl_prim_qm_row_major_aref, 2);
    rl_defun("%Q8-QUANTIZE", (cl_objectfn_fixed)rl_prim_q8_quantize, 2);
    rl_defun("%Q8-DEQUANTIZE-INTO", (cl_objectfn_fixed)rl_prim_q8_dequantize_into, 2);
    rl_defun("%Q8-ROW-INTO", (cl_objectfn_fixed)rl_prim_q8_row_into, 3);
    rl_defun("%Q8-COPY-BYTES", (cl_objectfn_fixed)rl_prim_q8_copy_bytes, 4);
    rl_gguf_kw = ecl_make_keyword("GGUF-FILE");
    rl_writer_kw = ecl_make_keyword("GGUF-WRITER");
    rl_defun("%UTF8-OCTETS", (cl_objectfn_fixed)rl_prim_utf8_octets, 1);
    rl_defun("%UTF8-STRING", (cl_objectfn_fixed)rl_prim_utf8_string, 1);
    rl_defun("%GGUF-OPEN", (cl_objectfn_fixed)rl_prim_gguf_open, 1);
    rl_defun("%GGUF-CLOSE", (cl_objectfn_fixed)rl_prim_gguf_close, 2);
    rl_defun("%GGUF-FACTS", (cl_objectfn_fixed)rl_prim_gguf_facts, 1);
    rl_defun("%GGUF-METADATA", (cl_objectfn_fixed)rl_prim_gguf_metadata, 1);
    rl_defun("%GGUF-TENSORS", (cl_objectfn_fixed)rl_prim_gguf_tensors, 1);
    rl_defun("%GGUF-COPY-TENSOR", (cl_objectfn_fixed)rl_prim_gguf_copy_tensor, 3);
    rl_defun("%GGML-TYPE", (cl_objectfn_fixed)rl_prim_ggml_type, 1);
    rl_defun("%GGUF-WRITER-NEW", (cl_objectfn_fixed)rl_prim_gguf_writer_new, 2);
    rl_defun("%RELEASE", (cl_objectfn_fixed)rl_prim_release, 1);
    rl_defun("%GGUF-W-KEY", (cl_objectfn_fixed)rl_prim_gguf_w_key, 2);
    rl_defun("%GGUF-W-SCALAR", (cl_objectfn_fixed)rl_prim_gguf_w_scalar, 3);
    rl_defun("%GGUF-W-STRING", (cl_objectfn_fixed)rl_prim_gguf_w_string, 2);
    rl_defun("%GGUF-W-ARRAY-BEGIN", (cl_objectfn_fixed)rl_prim_gguf_w_array_begin, 2);
    rl_defun("%GGUF-W-ARRAY-END", (cl_objectfn_fixed)rl_prim_gguf_w_array_end, 1);
    rl_defun("%GGUF-W-ARRAY-RAW", (cl_objectfn_fixed)rl_prim_gguf_w_array_raw, 2);
    rl_defun("%GGUF-W-TENSOR", (cl_objectfn_fixed)rl_prim_gguf_w_tensor, 5);
    rl_defun("%GGUF-W-TENSOR-RAW", (cl_objectfn_fixed)rl_prim_gguf_w_tensor_raw, 7);
    rl_defun("%GGUF-W-WRITE", (cl_objectfn_fixed)rl_prim_gguf_w_write, 2);
    rl_defun("%FIRST-NON-FINITE", (cl_objectfn_fixed)rl_prim_first_non_finite, 2);
    rl_defun("%TO-HALF-INTO", (cl_objectfn_fixed)rl_prim_to_half_into, 3);
    rl_defun("%HALF-TO-SINGLE-INTO", (cl_objectfn_fixed)rl_prim_half_to_single_into, 3);
    rl_defun("%F16-BITS", (cl_objectfn_fixed)rl_prim_f16_bits, 1);
    rl_defun("%F16-VALUE", (cl_objectfn_fixed)rl_prim_f16_value, 1);
    rl_defun("%BF16-BITS", (cl_objectfn_fixed)rl_prim_bf16_bits, 1);
    rl_defun("%BF16-VALUE", (cl_objectfn_fixed)rl_prim_bf16_value, 1);
}
