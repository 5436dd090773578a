/* qmatrix.c - the quantized matrix: element reads for AREF and
 * ROW-MAJOR-AREF (the compiler macros of lisp/qmatrix.lisp call the
 * rl_qm_aref entry points directly), quantize, dequantize, a row, raw
 * bytes.  A matrix holds Q8_0 blocks or the blocks of one of the types of
 * prims/quants.h (its FORMAT slot names which); reading an element decodes
 * the one block holding it, with the type's own dequantizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prims/ecl/qmatrix.h"
#include "prims/q8_outlier.h"
#include "prims/quants.h"

/* Slots of RONTOLISP::QUANTIZED-MATRIX, in lisp/qmatrix.lisp's order;
 * rl_qm_init checks it against the defstruct. */
enum { RL_QM_BASE, RL_QM_OFFSET, RL_QM_OWNER, RL_QM_DIMS, RL_QM_ROWS, RL_QM_COLS, RL_QM_FORMAT,
       RL_QM_NSLOTS };
static const char *const rl_qm_slot_names[RL_QM_NSLOTS] = {"BASE", "OFFSET", "OWNER", "DIMS",
                                                           "ROWS", "COLS", "FORMAT"};

static cl_object rl_qm_class = ECL_NIL;

/* The FORMAT slot's symbols (RONTOLISP::Q8-0, RONTOLISP::Q4-K, ...: the
 * ggml name with '-' for '_') and their ggml types: Q8_0 and every type of
 * prims/quants.h. */
#define RL_QM_MAX_FORMATS 24
static cl_object rl_qm_format_syms[RL_QM_MAX_FORMATS];
static uint32_t rl_qm_format_types[RL_QM_MAX_FORMATS];
static int rl_qm_nformats = 0;

static void rl_qm_add_format(const char *ggml_name, uint32_t type) {
    char name[32];
    size_t i;
    for (i = 0; ggml_name[i] && i + 1 < sizeof name; i++)
        name[i] = ggml_name[i] == '_' ? '-' : ggml_name[i];
    name[i] = 0;
    rl_qm_format_syms[rl_qm_nformats] = ecl_make_symbol(name, "RONTOLISP");
    ecl_register_root(&rl_qm_format_syms[rl_qm_nformats]);
    rl_qm_format_types[rl_qm_nformats++] = type;
}

/* Values per block and bytes per block of a matrix's ggml type; 0 when it
 * is none of the matrix's types. */
static uint32_t rl_qm_block(uint32_t type, uint32_t *bytes) {
    if (rl_type_quantized(type))
        return *bytes = rl_gguf_ggml_block_bytes(type), rl_gguf_ggml_block_size(type);
    return *bytes = 0, 0;
}

/* The lower-case name of M's format, for messages ("q4-k"). */
static const char *rl_qm_format_name(cl_object m, char *buf, size_t size) {
    cl_object f = ECL_STRUCT_SLOT(m, RL_QM_FORMAT);
    size_t i = 0;
    if (ECL_SYMBOLP(f)) {
        cl_object s = si_coerce_to_base_string(cl_symbol_name(f));
        const char *p = (const char *)s->base_string.self;
        for (; i + 1 < size && i < s->base_string.fillp; i++)
            buf[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] - 'A' + 'a' : p[i]);
    }
    buf[i] = 0;
    return buf;
}

void rl_qm_init(void) {
    cl_object slots;
    int i = 0;
    rl_qm_class = cl_find_class(1, ecl_make_symbol("QUANTIZED-MATRIX", "RONTOLISP"));
    ecl_register_root(&rl_qm_class);
    for (uint32_t t = 0; t < RL_GGUF_GGML_TYPE_COUNT && rl_qm_nformats < RL_QM_MAX_FORMATS; t++)
        if (rl_type_quantized(t))
            rl_qm_add_format(rl_gguf_ggml_type_name(t), t);
    slots = cl_funcall(2, ecl_make_symbol("CLASS-SLOTS", "CLOS"), rl_qm_class);
    for (cl_object l = slots; l != ECL_NIL; l = ECL_CONS_CDR(l), i++) {
        cl_object name = cl_funcall(2, ecl_make_symbol("SLOT-DEFINITION-NAME", "CLOS"),
                                    ECL_CONS_CAR(l));
        cl_object s = si_coerce_to_base_string(cl_symbol_name(name));
        const char *got = (const char *)s->base_string.self;
        if (i >= RL_QM_NSLOTS || strcmp(got, rl_qm_slot_names[i]) != 0) {
            fprintf(stderr,
                    "rontolisp: quantized-matrix slot %d is %s in lisp/qmatrix.lisp but the C "
                    "glue expects %s\n",
                    i, got, i < RL_QM_NSLOTS ? rl_qm_slot_names[i] : "no slot");
            exit(70);
        }
    }
    if (i != RL_QM_NSLOTS) {
        fprintf(stderr, "rontolisp: quantized-matrix has %d slots in lisp/qmatrix.lisp, the C "
                "glue expects %d\n", i, RL_QM_NSLOTS);
        exit(70);
    }
}

int rl_qm_p(cl_object x) {
    return ECL_INSTANCEP(x) && ECL_CLASS_OF(x) == rl_qm_class;
}

void rl_qm_shape_of(cl_object m, rl_qm_view *v) {
    cl_object f = ECL_STRUCT_SLOT(m, RL_QM_FORMAT);
    v->blocks = NULL;
    v->data = NULL;
    v->nbytes = 0;
    v->pinned = ECL_NIL;
    v->ggml_type = UINT32_MAX;
    for (int k = 0; k < rl_qm_nformats; k++)
        if (rl_qm_format_syms[k] == f)
            v->ggml_type = rl_qm_format_types[k];
    v->rows = ecl_fixnum(ECL_STRUCT_SLOT(m, RL_QM_ROWS));
    v->cols = ecl_fixnum(ECL_STRUCT_SLOT(m, RL_QM_COLS));
    /* dims: a proper list of 1 to 4 fixnums, made by our Lisp code */
    v->rank = 0;
    for (cl_object l = ECL_STRUCT_SLOT(m, RL_QM_DIMS); l != ECL_NIL; l = ECL_CONS_CDR(l))
        v->rank++;
}

/* The matrix's memory: its own octet vector, or a region of a mapped GGUF
 * file (its handle, pinned here). */
void rl_qm_pin_any(cl_object m, rl_qm_view *v) {
    cl_object base = ECL_STRUCT_SLOT(m, RL_QM_BASE), off = ECL_STRUCT_SLOT(m, RL_QM_OFFSET);
    const uint8_t *p = NULL;
    uint64_t size = 0, need;
    uint32_t block, bytes;
    rl_qm_shape_of(m, v);
    block = rl_qm_block(v->ggml_type, &bytes);
    if (!ECL_FIXNUMP(off) || ecl_fixnum(off) < 0 || !ECL_FIXNUMP(ECL_STRUCT_SLOT(m, RL_QM_ROWS)) ||
        !ECL_FIXNUMP(ECL_STRUCT_SLOT(m, RL_QM_COLS)) || !block || v->cols % block ||
        v->rows > (cl_index)1 << 40 || v->cols > (cl_index)1 << 40)
        rl_signal(RL_C_ERROR, "a quantized matrix whose slots are not ones quantize or gguf:tensor "
                  "made (format, offset, rows or columns)");
    v->nbytes = (uint64_t)(v->rows * v->cols / block) * bytes;
    need = (uint64_t)ecl_fixnum(off) + v->nbytes;
    if (!ECL_IMMEDIATE(base) && base->d.t == t_vector && base->vector.elttype == ecl_aet_b8) {
        p = base->vector.self.b8;
        size = base->vector.dim;
    } else if (rl_mapped_p(base)) {
        if (!rl_pin(base, &p, &size))
            rl_signal(RL_C_FILE_CLOSED,
                      "this quantized matrix lives in a GGUF file that gguf:close has released");
        v->pinned = base;
    }
    if (!p || need > size) {
        rl_qm_unpin(v);
        rl_signal(RL_C_ERROR, "a quantized matrix of %lu x %lu at byte %ld needs %llu bytes, its "
                  "memory has %llu", (unsigned long)v->rows, (unsigned long)v->cols,
                  (long)ecl_fixnum(off), (unsigned long long)need, (unsigned long long)size);
    }
    v->data = p + ecl_fixnum(off);
    if (v->ggml_type == RL_GGUF_GGML_Q8_0)
        v->blocks = (const rl_block_q8_0 *)v->data;
}

void rl_qm_pin(cl_object m, rl_qm_view *v) {
    char name[32];
    rl_qm_shape_of(m, v);
    if (v->ggml_type != RL_GGUF_GGML_Q8_0)
        rl_signal(RL_C_ERROR, "expected a q8-0 quantized matrix (the products and kernels read "
                  "Q8_0 blocks), found a %s one; rontolisp:dequantize it first",
                  rl_qm_format_name(m, name, sizeof name));
    rl_qm_pin_any(m, v);
}

void rl_qm_unpin(rl_qm_view *v) {
    if (v->pinned != ECL_NIL)
        rl_unpin(v->pinned);
    v->pinned = ECL_NIL;
}

static void rl_qm_check(const char *fn, cl_object m, rl_qm_view *v) {
    if (!rl_qm_p(m))
        rl_type_error(fn, 1, m, RL_T_QM_OR_ARRAY);
    rl_qm_shape_of(m, v);
}

static cl_index rl_qm_index(const char *fn, cl_object m, int axis, cl_object i, cl_index limit) {
    if (!ECL_FIXNUMP(i) || ecl_fixnum(i) < 0 || (cl_index)ecl_fixnum(i) >= limit) {
        cl_object s = cl_prin1_to_string(i);
        rl_signal(RL_C_INDEX,
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
        rl_signal(RL_C_INDEX, "%s: a rank-%lu quantized matrix takes %lu subscript%s, given %lu",
                  fn, (unsigned long)v->rank, (unsigned long)v->rank, v->rank == 1 ? "" : "s",
                  (unsigned long)nidx);
}

/* Entry points for compiled code (the compiler macros of lisp/qmatrix.lisp
 * emit c-inline calls to these, answering an unboxed double). */
double rl_qm_aref_1(cl_object m, cl_object i);
double rl_qm_aref_2(cl_object m, cl_object i, cl_object j);
double rl_qm_row_major_aref(cl_object m, cl_object i);

/* Element K of M (already checked), read under a pin: Q8_0's q*d in
 * double, another type's value as its dequantizer gives it for the one
 * block holding K (the same float rl_dequantize gives for the tensor). */
static double rl_qm_get(cl_object m, cl_index k) {
    rl_qm_view v;
    double d;
    rl_qm_pin_any(m, &v);
    if (v.blocks) {
        d = rl_q8_get(v.blocks, k);
    } else {
        const rl_type_traits *t = rl_type_traits_of(v.ggml_type);
        size_t block = rl_type_block(v.ggml_type);
        float y[RL_QK_K];
        RL_FP_HOLD();
        t->to_float(v.data + rl_type_bytes(v.ggml_type, (size_t)k / block * block), y, 1);
        RL_FP_RELEASE();
        d = y[k % block];
    }
    rl_qm_unpin(&v);
    return d;
}

/* N values of M from flat element START (both multiples of its block) into
 * Y, pinned here. */
static void rl_qm_decode(cl_object m, cl_index start, cl_index n, float *y) {
    rl_qm_view v;
    const cl_env_ptr env = ecl_process_env();
    rl_qm_pin_any(m, &v);
    RL_RUN_KERNEL(env, if (v.blocks) rl_q8_dequantize(v.blocks + start / RL_QK8_0, n / RL_QK8_0, y);
                  else rl_dequantize(v.ggml_type, v.data + rl_quant_bytes(v.ggml_type, start), n, y);
                  rl_qm_unpin(&v));
}

double rl_qm_aref_1(cl_object m, cl_object i) {
    rl_qm_view v;
    rl_qm_check("AREF", m, &v);
    rl_qm_rank_check("AREF", &v, 1);
    return rl_qm_get(m, rl_qm_index("AREF", m, 0, i, v.cols));
}

double rl_qm_aref_2(cl_object m, cl_object i, cl_object j) {
    rl_qm_view v;
    rl_qm_check("AREF", m, &v);
    rl_qm_rank_check("AREF", &v, 2);
    cl_index r = rl_qm_index("AREF", m, 0, i, v.rows);
    cl_index c = rl_qm_index("AREF", m, 1, j, v.cols);
    return rl_qm_get(m, r * v.cols + c);
}

double rl_qm_row_major_aref(cl_object m, cl_object i) {
    rl_qm_view v;
    rl_qm_check("ROW-MAJOR-AREF", m, &v);
    return rl_qm_get(m, rl_qm_index("ROW-MAJOR-AREF", m, 0, i, v.rows * v.cols));
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

/* What %q8-quantize and %q8-quantize-outliers share: SRC is a simple
 * array of single-floats (kind 0), double-floats (1), or the
 * (unsigned-byte 16) bits of binary16 (2) or bfloat16 (3) values; MASK is
 * NIL (the plain quantizer) or the outlier-column mask.  Answers the octets,
 * or (values nil status where). */
static cl_object rl_q8_quantize_prim(const char *fn, cl_object src, cl_object kind,
                                     cl_object mask) {
    static const cl_elttype aet[] = {ecl_aet_sf, ecl_aet_df, ecl_aet_b16, ecl_aet_b16};
    static const rl_q8_src srcs[] = {RL_SRC_F32, RL_SRC_F64, RL_SRC_F16, RL_SRC_BF16};
    cl_index k = (cl_index)rl_arg_fixnum(fn, 2, kind, 0, 3);
    cl_index n = 0, cols = 0;
    const void *x = rl_simple_data(src, aet[k], &n);
    const uint8_t *m = mask == ECL_NIL ? NULL : rl_octets(fn, 3, mask, &cols);
    const cl_env_ptr env = ecl_process_env();
    size_t where = 0;
    rl_status st;
    cl_object out;

    if (!x)
        rl_type_error(fn, 1, src, RL_T_ARRAY);
    if (n % RL_QK8_0)
        rl_signal(RL_C_SHAPE, "quantize: expected a total size that is a multiple of 32, found %lu",
                  (unsigned long)n);
    if (m && (cols == 0 || cols % RL_QK8_0 || n % cols))
        rl_signal(RL_C_SHAPE,
                  "quantize: expected a row length that is a multiple of 32 and divides the "
                  "total size %lu, found %lu", (unsigned long)n, (unsigned long)cols);
    out = ecl_alloc_simple_vector(rl_q8_bytes(n), ecl_aet_b8);
    {
        rl_block_q8_0 *y = (rl_block_q8_0 *)out->vector.self.b8;
        RL_RUN_KERNEL(env, st = m ? rl_q8_quantize_outliers_ref(srcs[k], x, n / cols, cols, m, y,
                                                                &where)
                                  : rl_q8_quantize_path(srcs[k], x, n, y, &where,
                                                        rl_path_best()));
    }
    if (st == RL_OK)
        ecl_return1(env, out);
    ecl_return3(env, ECL_NIL, rl_keyword(rl_status_name(st)), ecl_make_unsigned_integer(where));
}

/* (%q8-quantize src kind) -> octets | (values nil status where), SRC's
 * total size a multiple of 32 (the Lisp side checks rank and shape). */
static cl_object rl_prim_q8_quantize(cl_object src, cl_object kind) {
    return rl_q8_quantize_prim("%Q8-QUANTIZE", src, kind, ECL_NIL);
}

/* (%q8-quantize-outliers src kind mask) -> as %q8-quantize, with the
 * outlier-aware scales of doc/outliers.md: MASK a simple (unsigned-byte 8) vector, one
 * byte per column (nonzero = outlier column), whose length, a multiple of
 * 32, divides SRC's total size into rows. */
static cl_object rl_prim_q8_quantize_outliers(cl_object src, cl_object kind, cl_object mask) {
    if (mask == ECL_NIL)
        rl_type_error("%Q8-QUANTIZE-OUTLIERS", 3, mask, RL_T_VECTOR);
    return rl_q8_quantize_prim("%Q8-QUANTIZE-OUTLIERS", src, kind, mask);
}

/* (%q8-dequantize-into m dest): DEST a simple single-float array of the
 * matrix's total size. */
static cl_object rl_prim_q8_dequantize_into(cl_object m, cl_object dest) {
    rl_qm_view v;
    cl_index n = 0;
    float *y = rl_simple_data(dest, ecl_aet_sf, &n);
    rl_qm_check("%Q8-DEQUANTIZE-INTO", m, &v);
    if (!y || n != v.rows * v.cols)
        rl_type_error("%Q8-DEQUANTIZE-INTO", 2, dest, RL_T_ARRAY);
    rl_qm_decode(m, 0, n, y);
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
        rl_type_error("%Q8-ROW-INTO", 3, dest, RL_T_ARRAY);
    rl_qm_decode(m, r * v.cols, v.cols, y);
    ecl_return1(ecl_process_env(), dest);
}

/* (%q8-copy-bytes m start count octets): COUNT bytes of the matrix's
 * blocks (Q8_0 or its own type's) from byte START into the octet vector
 * OCTETS (from its index 0). */
static cl_object rl_prim_q8_copy_bytes(cl_object m, cl_object start, cl_object count,
                                       cl_object octets) {
    rl_qm_view v;
    cl_index n = 0, total;
    uint8_t *y = rl_simple_data(octets, ecl_aet_b8, &n);
    uint32_t bytes, block;
    rl_qm_check("%Q8-COPY-BYTES", m, &v);
    block = rl_qm_block(v.ggml_type, &bytes);
    total = block ? v.rows * v.cols / block * bytes : 0;
    cl_index s = (cl_index)rl_arg_fixnum("%Q8-COPY-BYTES", 2, start, 0, (cl_fixnum)total);
    cl_index c = (cl_index)rl_arg_fixnum("%Q8-COPY-BYTES", 3, count, 0, (cl_fixnum)(total - s));
    if (!y || n < c)
        rl_type_error("%Q8-COPY-BYTES", 4, octets, RL_T_VECTOR);
    rl_qm_pin_any(m, &v);
    memcpy(y, v.data + s, c);
    rl_qm_unpin(&v);
    ecl_return1(ecl_process_env(), octets);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%QM-AREF-1", rl_prim_qm_aref_1, 2),
    RL_PRIM("%QM-AREF-2", rl_prim_qm_aref_2, 3),
    RL_PRIM("%QM-ROW-MAJOR-AREF", rl_prim_qm_row_major_aref, 2),
    RL_PRIM("%Q8-QUANTIZE", rl_prim_q8_quantize, 2),
    RL_PRIM("%Q8-QUANTIZE-OUTLIERS", rl_prim_q8_quantize_outliers, 3),
    RL_PRIM("%Q8-DEQUANTIZE-INTO", rl_prim_q8_dequantize_into, 2),
    RL_PRIM("%Q8-COPY-BYTES", rl_prim_q8_copy_bytes, 4),
};
RL_PRIM_TABLE(rl_qmatrix_prims, "RONTOLISP", rl_defs);

/* A quantized matrix's row decoded into floats, for LINALG:ROW (vec.lisp). */
static const rl_prim_def rl_row_defs[] = {
    RL_PRIM("%Q8-ROW-INTO", rl_prim_q8_row_into, 3),
};
RL_PRIM_TABLE(rl_qmatrix_row_prims, "VEC", rl_row_defs);
