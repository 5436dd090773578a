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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/numfmt.h"
#include "prims/cpu.h"
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
    /* dims is a proper list of one or two fixnums (made by our Lisp code) */
    v->rank = ECL_CONS_CDR(ECL_STRUCT_SLOT(m, RL_QM_DIMS)) == ECL_NIL ? 1 : 2;
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
    rl_qm_class = cl_find_class(1, rl_sym("QUANTIZED-MATRIX", "RONTOLISP"));
    ecl_register_root(&rl_qm_class);
    rl_defun("%QM-AREF-1", (cl_objectfn_fixed)rl_prim_qm_aref_1, 2);
    rl_defun("%QM-AREF-2", (cl_objectfn_fixed)rl_prim_qm_aref_2, 3);
    rl_defun("%QM-ROW-MAJOR-AREF", (cl_objectfn_fixed)rl_prim_qm_row_major_aref, 2);
    rl_defun("%Q8-QUANTIZE", (cl_objectfn_fixed)rl_prim_q8_quantize, 2);
    rl_defun("%Q8-DEQUANTIZE-INTO", (cl_objectfn_fixed)rl_prim_q8_dequantize_into, 2);
    rl_defun("%Q8-ROW-INTO", (cl_objectfn_fixed)rl_prim_q8_row_into, 3);
    rl_defun("%Q8-COPY-BYTES", (cl_objectfn_fixed)rl_prim_q8_copy_bytes, 4);
    rl_defun("%TO-HALF-INTO", (cl_objectfn_fixed)rl_prim_to_half_into, 3);
    rl_defun("%HALF-TO-SINGLE-INTO", (cl_objectfn_fixed)rl_prim_half_to_single_into, 3);
    rl_defun("%F16-BITS", (cl_objectfn_fixed)rl_prim_f16_bits, 1);
    rl_defun("%F16-VALUE", (cl_objectfn_fixed)rl_prim_f16_value, 1);
    rl_defun("%BF16-BITS", (cl_objectfn_fixed)rl_prim_bf16_bits, 1);
    rl_defun("%BF16-VALUE", (cl_objectfn_fixed)rl_prim_bf16_value, 1);
}
