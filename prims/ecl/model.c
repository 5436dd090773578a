/* model.c - the encoder's and decision head's kernels from Lisp
 * (lisp/encoder.lisp, lisp/decision.lisp): a weight matrix times a token
 * sequence (prims/matmul.c), and LayerNorm (with or without bias), NEOX
 * RoPE, attention, GeGLU and bias plus activation (prims/nn.c), with the
 * knobs' path and thread count.  The Lisp side checks the Lisp types and
 * keywords; this file checks the dimensions and that no result is an
 * input, once, with the full message (doc/kernels.md §7), then runs the
 * kernel with the float traps held and interrupts off while the pool's
 * workers run. */
#include <math.h>
#include <string.h>

#include "prims/ecl/qmatrix.h"
#include "prims/ecl/vec.h"
#include "prims/matmul.h"
#include "prims/matmul_outlier.h"
#include "prims/nn.h"

/* A simple single-float vector, argument POS of FN, of length LEN. */
static float *rl_sf_vector(const char *fn, int pos, cl_object v, size_t len) {
    cl_index n = 0;
    float *p = rl_simple_data(v, ecl_aet_sf, &n);
    if (!p || v->d.t != t_vector || n != len)
        rl_type_error(fn, pos, v, RL_T_VECTOR);
    return p;
}

/* Signal SHAPE-ERROR unless the activations XS (n x xc) of FN have the
 * cols columns of the rows x cols weight matrix. */
static void rl_xs_cols(const char *fn, size_t n, size_t xc, size_t rows, size_t cols) {
    if (xc != cols)
        rl_signal_shape(rl_dims2(n, cols), rl_dims2(n, xc),
                        "%s: expected xs with %zu columns (the columns of the %zu x %zu weight "
                        "matrix), found %zu", fn, cols, rows, cols, xc);
}

/* Arguments POS and POS + 1, the heads and the head dimension (each at
 * least 1), into *h and *hd; rows of d values must hold h heads of hd. */
static void rl_heads_args(const char *fn, int pos, cl_object heads, cl_object head_dim,
                          size_t d, size_t *h, size_t *hd) {
    *h = (size_t)rl_arg_fixnum(fn, pos, heads, 1, MOST_POSITIVE_FIXNUM);
    *hd = (size_t)rl_arg_fixnum(fn, pos + 1, head_dim, 1, MOST_POSITIVE_FIXNUM);
    if (d / *h != *hd || d % *h)
        rl_signal(RL_C_SHAPE, "%s: expected rows of %zu x %zu values, found %zu", fn, *h, *hd,
                  d);
}

/* Argument POS, WHAT, as rl_sf_matrix reads it, of dimensions (er ec). */
static float *rl_sf_matrix_of(const char *fn, int pos, cl_object x, const char *what, size_t er,
                              size_t ec) {
    size_t r, c;
    float *p = rl_sf_matrix(fn, pos, x, &r, &c);
    rl_same_dims(fn, what, r, c, er, ec);
    return p;
}

/* Run CALL (an nn.h kernel); answer OUT, or the status and WHY. */
#define RL_NN_RETURN(env, out, call, why)                                                \
    do {                                                                                 \
        rl_status st_;                                                                   \
        RL_RUN_KERNEL(env, st_ = (call));                                                \
        if (st_ == RL_OK)                                                                \
            ecl_return1(env, out);                                                       \
        return rl_return_status(env, st_, why);                                          \
    } while (0)

/* Run CALL, a row step's checked form (nn.h's *_nf, given &NONFINITE);
 * answer OUT and whether it holds a NaN or an infinity (T or NIL), or the
 * status and WHY. */
#define RL_NN_RETURN_CHECKED(env, out, call, nonfinite, why)                            \
    do {                                                                                 \
        rl_status st_;                                                                   \
        RL_RUN_KERNEL(env, st_ = (call));                                                \
        if (st_ == RL_OK)                                                                \
            ecl_return2(env, out, (nonfinite) ? ECL_T : ECL_NIL);                        \
        return rl_return_status(env, st_, why);                                          \
    } while (0)

/* A product's values: OUT, or (values nil status message row where). */
static cl_object rl_matmul_values(cl_env_ptr env, rl_status st, cl_object out,
                                  const char *msg, const rl_mm_fault *fault) {
    if (st == RL_OK)
        ecl_return1(env, out);
    env->values[3] = ecl_make_unsigned_integer(fault->row);
    env->values[4] = ecl_make_unsigned_integer(fault->where);
    env->values[1] = rl_keyword(rl_status_name(st));
    env->values[2] = ecl_make_simple_base_string((char *)msg, -1);
    env->nvalues = 5;
    return ECL_NIL;
}

/* %MATMUL's work on the weight rows FIRST to FIRST + COUNT - 1 of W (ALL:
 * every row, FIRST and COUNT ignored), OUT n x COUNT. */
static cl_object matmul_rows(const char *fn, cl_object w, cl_object first, cl_object count,
                             int all, cl_object xs, cl_object out, cl_object bf16_p,
                             cl_object q8x2_p) {
    const cl_env_ptr env = ecl_process_env();
    rl_wtype wt;
    const void *wp;
    size_t rows, cols, n, xc, orows, ocols, r0 = 0, elt = sizeof(float);
    cl_index total = 0;
    rl_qm_view v = {0};
    int quant = 0;
    if (rl_qm_p(w)) {
        rl_qm_shape_of(w, &v);
        if (v.rank != 2)
            rl_type_error(fn, 1, w, RL_T_QM_OR_ARRAY);
        /* The blocks come with the pin, after the last check that signals;
         * a type other than Q8_0 runs its row products (rl_matmul_quant). */
        wt = RL_WT_Q8_0, wp = NULL, rows = v.rows, cols = v.cols;
        quant = v.ggml_type != RL_GGUF_GGML_Q8_0;
    } else if (!ECL_IMMEDIATE(w) && w->d.t == t_array && w->array.rank == 2 &&
               (cl_elttype)w->array.elttype == ecl_aet_b16) {
        wp = rl_simple_data(w, ecl_aet_b16, &total);
        if (!wp && w->array.dim)
            rl_type_error(fn, 1, w, RL_T_QM_OR_ARRAY);
        wt = bf16_p == ECL_NIL ? RL_WT_F16 : RL_WT_BF16;
        rows = w->array.dims[0], cols = w->array.dims[1], elt = sizeof(uint16_t);
    } else {
        wp = rl_sf_matrix(fn, 1, w, &rows, &cols);
        wt = RL_WT_F32;
    }
    if (!all) {
        const size_t c = (size_t)rl_arg_fixnum(fn, 3, count, 0, (cl_fixnum)rows);
        r0 = (size_t)rl_arg_fixnum(fn, 2, first, 0, (cl_fixnum)(rows - c));
        rows = c;
    }
    const int a = all ? 0 : 2; /* the arguments after W move by two */
    const float *x = rl_sf_matrix(fn, 2 + a, xs, &n, &xc);
    float *y = rl_sf_matrix(fn, 3 + a, out, &orows, &ocols);
    rl_xs_cols(fn, n, xc, rows, cols);
    rl_same_dims(fn, "out", orows, ocols, n, rows);
    if (n && rows) {
        rl_out_not_input(fn, out, xs, "xs");
        rl_out_not_input(fn, out, w, "the weight matrix");
    }
    char msg[256] = "";
    rl_mm_fault fault = {0, 0};
    rl_status st;
    if (wt == RL_WT_Q8_0) {
        rl_qm_pin_any(w, &v);
        /* a row of any type is a whole number of blocks, rows one after another */
        wp = quant ? (const void *)(v.data + (v.rows ? r0 * (size_t)(v.nbytes / v.rows) : 0))
                   : (const void *)(v.blocks + r0 * (cols / RL_QK8_0));
    } else {
        wp = (const char *)wp + r0 * cols * elt;
    }
    const rl_act act = q8x2_p == ECL_NIL ? RL_ACT_Q8 : RL_ACT_Q8X2;
    RL_RUN_KERNEL(env, st = quant ? rl_matmul_quant(v.ggml_type, wp, rows, cols, x, n, y, act,
                                                    msg, sizeof msg, &fault)
                                  : rl_matmul(wt, wp, rows, cols, x, n, y, act, msg,
                                              sizeof msg, &fault);
                  if (wt == RL_WT_Q8_0) rl_qm_unpin(&v));
    return rl_matmul_values(env, st, out, msg, &fault);
}

/* (%matmul w xs out bf16-p q8x2-p) -> OUT, or (values nil status message
 * row where) when an activation row cannot be quantized (ROW the token,
 * WHERE the column or block as q8.h says).  W: a quantized matrix of rank
 * 2, a simple rank-2 single-float array, or the bits of a float16 (BF16-P
 * nil) or bfloat16 (BF16-P true) array as a simple rank-2 (unsigned-byte
 * 16) array; XS n x cols and OUT n x rows simple single-float arrays. */
static cl_object rl_prim_matmul(cl_object w, cl_object xs, cl_object out, cl_object bf16_p,
                                cl_object q8x2_p) {
    return matmul_rows("%MATMUL", w, ECL_NIL, ECL_NIL, 1, xs, out, bf16_p, q8x2_p);
}

/* (%matmul-rows w first count xs out bf16-p q8x2-p) -> as %MATMUL, the
 * product of the COUNT weight rows from FIRST (fixnums within W's rows):
 * OUT n x COUNT.  Each output is the one %MATMUL of all of W gives at
 * that row and column: the kernels compute an output from its weight row
 * and token row alone. */
static cl_object rl_prim_matmul_rows(cl_object w, cl_object first, cl_object count, cl_object xs,
                                     cl_object out, cl_object bf16_p, cl_object q8x2_p) {
    return matmul_rows("%MATMUL-ROWS", w, first, count, 0, xs, out, bf16_p, q8x2_p);
}

/* (%outlier-matmul q columns weights xs out q8x2-p) -> OUT, or (values nil
 * status message row where) as %MATMUL's: the product of an outlier matrix
 * (prims/matmul_outlier.h): Q a quantized matrix (rows x cols), COLUMNS a
 * (simple-array fixnum (*)) of k increasing column indices below cols,
 * WEIGHTS the rows x k single-float outlier columns; XS n x cols, OUT
 * n x rows, not XS. */
static cl_object rl_prim_outlier_matmul(cl_object q, cl_object columns, cl_object weights,
                                        cl_object xs, cl_object out, cl_object q8x2_p) {
    static const char fn[] = "%OUTLIER-MATMUL";
    const cl_env_ptr env = ecl_process_env();
    rl_qm_view v = {0};
    if (!rl_qm_p(q))
        rl_type_error(fn, 1, q, RL_T_QM_OR_ARRAY);
    rl_qm_shape_of(q, &v);
    if (v.rank != 2)
        rl_type_error(fn, 1, q, RL_T_QM_OR_ARRAY);
    cl_index k = 0;
    /* (simple-array fixnum (*)) is a vector of ECL's cl_fixnum or, where
     * fixnum upgrades to it, of ext:integer64: 64 bits either way */
    const int64_t *ix = NULL;
    const cl_elttype aet =
        ECL_IMMEDIATE(columns) || columns->d.t != t_vector
            ? ecl_aet_object
            : (cl_elttype)columns->vector.elttype;
    if ((aet != ecl_aet_fix && aet != ecl_aet_i64) || sizeof(cl_fixnum) != sizeof(int64_t) ||
        sizeof(size_t) != sizeof(int64_t) ||
        (!(ix = rl_simple_data(columns, aet, &k)) && columns->vector.dim))
        rl_signal(RL_C_ERROR, "%s: expected the outlier columns as a (simple-array fixnum (*))",
                  fn);
    size_t wr, wk, n, xc, orows, ocols;
    const float *w = rl_sf_matrix(fn, 3, weights, &wr, &wk);
    const float *x = rl_sf_matrix(fn, 4, xs, &n, &xc);
    float *y = rl_sf_matrix(fn, 5, out, &orows, &ocols);
    rl_same_dims(fn, "weights", wr, wk, v.rows, (size_t)k);
    rl_xs_cols(fn, n, xc, v.rows, v.cols);
    rl_same_dims(fn, "out", orows, ocols, n, v.rows);
    if (n && v.rows) {
        rl_out_not_input(fn, out, xs, "xs");
        rl_out_not_input(fn, out, weights, "weights");
    }
    for (cl_index c = 0; c < k; c++)
        if (ix[c] < 0 || (size_t)ix[c] >= v.cols || (c && ix[c] <= ix[c - 1]))
            rl_signal(RL_C_ERROR, "%s: expected increasing outlier columns below %zu, found %ld "
                      "at position %lu", fn, v.cols, (long)ix[c], (unsigned long)c);
    /* non-negative 64-bit values, read as size_t (64 bits wide here: see
     * the check above); nothing is allocated that a signal could leak */
    const size_t *idx = (const size_t *)(const void *)ix;
    char msg[256] = "";
    rl_mm_fault fault = {0, 0};
    rl_status st;
    rl_qm_pin(q, &v);
    RL_RUN_KERNEL(env, st = rl_matmul_outliers(v.blocks, v.rows, v.cols, idx, (size_t)k, w, x,
                                               n, y, q8x2_p == ECL_NIL ? RL_ACT_Q8 : RL_ACT_Q8X2,
                                               msg, sizeof msg, &fault);
                  rl_qm_unpin(&v));
    return rl_matmul_values(env, st, out, msg, &fault);
}

/* (%layer-norm xs weight eps out) -> (values OUT non-finite-p) or (values
 * nil status message): XS and OUT n x d (OUT may be XS), WEIGHT of length
 * d, EPS a single-float; NON-FINITE-P true when OUT holds a NaN or an
 * infinity (tested as it is written: the encoder's check of the step). */
static cl_object rl_prim_layer_norm(cl_object xs, cl_object weight, cl_object eps,
                                    cl_object out) {
    static const char fn[] = "%LAYER-NORM";
    const cl_env_ptr env = ecl_process_env();
    size_t n, d;
    const float *x = rl_sf_matrix(fn, 1, xs, &n, &d);
    const float *w = rl_sf_vector(fn, 2, weight, d);
    const float e = rl_arg_sf(fn, 3, eps);
    float *y = rl_sf_matrix_of(fn, 4, out, "out", n, d);
    int nf = 0;
    RL_NN_RETURN_CHECKED(env, out, rl_layer_norm_bias_nf(x, n, d, w, NULL, e, y, &nf), nf,
                         "layer-norm: the kernel refused its operands");
}

/* (%layer-norm-bias xs weight bias eps out) -> as %LAYER-NORM, plus BIAS
 * (length d) after the weight. */
static cl_object rl_prim_layer_norm_bias(cl_object xs, cl_object weight, cl_object bias,
                                         cl_object eps, cl_object out) {
    static const char fn[] = "%LAYER-NORM-BIAS";
    const cl_env_ptr env = ecl_process_env();
    size_t n, d;
    const float *x = rl_sf_matrix(fn, 1, xs, &n, &d);
    const float *w = rl_sf_vector(fn, 2, weight, d);
    const float *b = rl_sf_vector(fn, 3, bias, d);
    const float e = rl_arg_sf(fn, 4, eps);
    float *y = rl_sf_matrix_of(fn, 5, out, "out", n, d);
    int nf = 0;
    RL_NN_RETURN_CHECKED(env, out, rl_layer_norm_bias_nf(x, n, d, w, b, e, y, &nf), nf,
                         "layer-norm: the kernel refused its operands");
}

/* (%bias-act xs bias act out) -> (values OUT non-finite-p) or (values nil
 * status message): row t of OUT (m x d) := ACT(row t of XS + BIAS) for t
 * below m; XS has at least m rows of d values (the first m are read), BIAS
 * a d-vector or NIL, ACT :none, :relu or :gelu (exact).  OUT may be XS;
 * NON-FINITE-P as %LAYER-NORM's. */
static cl_object rl_prim_bias_act(cl_object xs, cl_object bias, cl_object act, cl_object out) {
    static const char fn[] = "%BIAS-ACT";
    const cl_env_ptr env = ecl_process_env();
    size_t n, d, m, od;
    const float *x = rl_sf_matrix(fn, 1, xs, &n, &d);
    const float *b = bias == ECL_NIL ? NULL : rl_sf_vector(fn, 2, bias, d);
    /* Interned once: rl_keyword conses the name on every call, and this
     * runs a few times per layer of every question.  Keywords live in
     * their package, so the statics need no GC root; two threads that
     * fill them at once store the same symbols. */
    static cl_object none, relu, gelu;
    if (!none || !relu || !gelu) {
        none = rl_keyword("NONE");
        relu = rl_keyword("RELU");
        gelu = rl_keyword("GELU");
    }
    rl_nn_act a;
    if (act == none)
        a = RL_NN_NONE;
    else if (act == relu)
        a = RL_NN_RELU;
    else if (act == gelu)
        a = RL_NN_GELU;
    else
        rl_signal(RL_C_ERROR, "%s: expected the activation :none, :relu or :gelu, found another "
                  "object", fn);
    float *y = rl_sf_matrix(fn, 4, out, &m, &od);
    if (od != d || m > n)
        rl_signal(RL_C_SHAPE, "%s: expected out of at most %zu rows of %zu values, found (%zu %zu)",
                  fn, n, d, m, od);
    int nf = 0;
    RL_NN_RETURN_CHECKED(env, out, rl_bias_act_nf(x, m, d, b, a, y, &nf), nf,
                         "bias-act: the kernel refused its operands");
}

/* (%rope-neox xs n-heads head-dim theta out) -> OUT or (values nil status
 * message): XS and OUT n x (n-heads * head-dim) (OUT may be XS), THETA the
 * frequency base as a single-float. */
static cl_object rl_prim_rope_neox(cl_object xs, cl_object heads, cl_object head_dim,
                                   cl_object theta, cl_object out) {
    static const char fn[] = "%ROPE-NEOX";
    const cl_env_ptr env = ecl_process_env();
    size_t n, d, h, hd;
    const float *x = rl_sf_matrix(fn, 1, xs, &n, &d);
    rl_heads_args(fn, 2, heads, head_dim, d, &h, &hd);
    const float base = rl_arg_sf(fn, 4, theta);
    float *y = rl_sf_matrix_of(fn, 5, out, "out", n, d);
    RL_NN_RETURN(env, out, rl_rope_neox(x, n, h, hd, base, y), "rope-neox: the kernel refused its operands");
}

/* Signal unless OUT, an attention's result, is none of Q, K and V. */
static void rl_out_not_qkv(const char *fn, cl_object out, cl_object q, cl_object k,
                           cl_object v) {
    rl_out_not_input(fn, out, q, "q");
    rl_out_not_input(fn, out, k, "k");
    rl_out_not_input(fn, out, v, "v");
}

/* (%attention q k v n-heads head-dim window out) -> (values OUT
 * non-finite-p) or (values nil status message): Q, K, V and OUT n x
 * (n-heads * head-dim), OUT none of the others; WINDOW 0 for global
 * attention; non-finite-p whether OUT holds a NaN or an infinity. */
static cl_object rl_prim_attention(cl_object q, cl_object k, cl_object v, cl_object heads,
                                   cl_object head_dim, cl_object window, cl_object out) {
    static const char fn[] = "%ATTENTION";
    const cl_env_ptr env = ecl_process_env();
    size_t n, d, h, hd;
    const float *qp = rl_sf_matrix(fn, 1, q, &n, &d);
    const float *kp = rl_sf_matrix_of(fn, 2, k, "k", n, d);
    const float *vp = rl_sf_matrix_of(fn, 3, v, "v", n, d);
    rl_heads_args(fn, 4, heads, head_dim, d, &h, &hd);
    const size_t win = (size_t)rl_arg_fixnum(fn, 6, window, 0, MOST_POSITIVE_FIXNUM);
    float *y = rl_sf_matrix_of(fn, 7, out, "out", n, d);
    if (n && d)
        rl_out_not_qkv(fn, out, q, k, v);
    int nf = 0;
    RL_NN_RETURN_CHECKED(env, out, rl_attention_nf(qp, kp, vp, n, h, hd, win, y, &nf), nf,
                         "attention: the kernel refused its operands");
}

/* (%attention-rows q k v n-heads head-dim out) -> (values OUT non-finite-p)
 * or (values nil status message): global attention of the nq rows of Q
 * (nq x d) against the n rows of K and V (n x d, n at least 1), into OUT
 * (nq x d, none of the inputs); row i has the bits %ATTENTION gives it
 * among all n queries. */
static cl_object rl_prim_attention_rows(cl_object q, cl_object k, cl_object v, cl_object heads,
                                        cl_object head_dim, cl_object out) {
    static const char fn[] = "%ATTENTION-ROWS";
    const cl_env_ptr env = ecl_process_env();
    size_t nq, d, n, kd, h, hd;
    const float *qp = rl_sf_matrix(fn, 1, q, &nq, &d);
    const float *kp = rl_sf_matrix(fn, 2, k, &n, &kd);
    rl_same_dims(fn, "k", n, kd, n, d);
    if (n == 0)
        rl_signal(RL_C_SHAPE, "%s: expected at least one key, found none", fn);
    const float *vp = rl_sf_matrix_of(fn, 3, v, "v", n, d);
    rl_heads_args(fn, 4, heads, head_dim, d, &h, &hd);
    float *y = rl_sf_matrix_of(fn, 6, out, "out", nq, d);
    if (nq && d)
        rl_out_not_qkv(fn, out, q, k, v);
    int nf = 0;
    RL_NN_RETURN_CHECKED(env, out, rl_attention_rows_nf(qp, nq, kp, vp, n, h, hd, y, &nf), nf,
                         "attention: the kernel refused its operands");
}

/* (%set-matrix-rows matrices rows) -> MATRICES: each single-float matrix
 * of the simple vector MATRICES made ROWS x its columns in place, over the
 * storage it was made with, so that one scratch serves questions of any
 * length up to the rows it was made for without consing (lisp/model/
 * model-scratch.lisp).  The storage is the garbage collector's object the
 * matrix's data lies in: more rows than it holds signals SHAPE-ERROR and
 * changes nothing.  Only a matrix that grows asks the collector for its
 * storage (a lookup that costs more than the rest of this call): fewer
 * rows than it has now lie within it. */
static cl_object rl_prim_set_matrix_rows(cl_object ms, cl_object rows) {
    static const char fn[] = "%SET-MATRIX-ROWS";
    if (ECL_IMMEDIATE(ms) || ms->d.t != t_vector || ms->vector.elttype != ecl_aet_object)
        rl_type_error(fn, 1, ms, RL_T_VECTOR);
    const size_t r = (size_t)rl_arg_fixnum(fn, 2, rows, 0, MOST_POSITIVE_FIXNUM);
    const cl_index count = ms->vector.fillp;
    for (cl_index i = 0; i < count; i++) { /* check every matrix, then change them */
        cl_object m = ms->vector.self.t[i];
        size_t mr, mc;
        (void)rl_sf_matrix(fn, 1, m, &mr, &mc);
        if (r <= mr)
            continue;
        const char *data = (const char *)m->array.self.sf;
        const char *base = data ? GC_base((void *)data) : NULL;
        if (!base)
            rl_type_error(fn, 1, m, RL_T_ARRAY);
        const size_t avail = GC_size((void *)base) - (size_t)(data - base);
        if (mc && r > avail / (mc * sizeof(float)))
            rl_signal_shape(rl_dims2(avail / (mc * sizeof(float)), mc), rl_dims2(r, mc),
                            "%s: expected at most %zu rows (the matrix's storage), found %zu",
                            fn, avail / (mc * sizeof(float)), r);
    }
    for (cl_index i = 0; i < count; i++) {
        cl_object m = ms->vector.self.t[i];
        const size_t mc = m->array.dims[1];
        m->array.dims[0] = r;
        m->array.dim = r * mc;
    }
    ecl_return1(ecl_process_env(), ms);
}

/* (%geglu xs tanh-p out) -> (values OUT non-finite-p) or (values nil status
 * message): XS n x 2f, OUT n x f and not XS; TANH-P selects the tanh GELU
 * over erf; NON-FINITE-P as %LAYER-NORM's. */
static cl_object rl_prim_geglu(cl_object xs, cl_object tanh_p, cl_object out) {
    static const char fn[] = "%GEGLU";
    const cl_env_ptr env = ecl_process_env();
    size_t n, d, on, od;
    const float *x = rl_sf_matrix(fn, 1, xs, &n, &d);
    float *y = rl_sf_matrix(fn, 3, out, &on, &od);
    if (d % 2)
        rl_signal(RL_C_SHAPE, "%s: expected an even number of columns, found %zu", fn, d);
    rl_same_dims(fn, "out", on, od, n, d / 2);
    if (n && d)
        rl_out_not_input(fn, out, xs, "xs");
    int nf = 0;
    RL_NN_RETURN_CHECKED(
        env, out, rl_geglu_nf(x, n, d / 2, tanh_p == ECL_NIL ? RL_GELU_ERF : RL_GELU_TANH, y, &nf),
        nf, "geglu: the kernel refused its operands");
}

/* (%qkv-rope qkv q k v n-heads head-dim theta) -> Q or (values nil status
 * message): the three column blocks of QKV (n x 3d, the attention's fused
 * product) copied into Q, K and V (n x d each, four distinct arrays), then
 * NEOX RoPE of Q and of K in place, as %ROPE-NEOX of the copies answers;
 * THETA NIL copies only (the decision head, which has no positions).
 * One call for what every layer does between its QKV product and its
 * attention. */
static cl_object rl_prim_qkv_rope(cl_object qkv, cl_object q, cl_object k, cl_object v,
                                  cl_object heads, cl_object head_dim, cl_object theta) {
    static const char fn[] = "%QKV-ROPE";
    const cl_env_ptr env = ecl_process_env();
    size_t n, d3;
    const float *src = rl_sf_matrix(fn, 1, qkv, &n, &d3);
    const size_t d = d3 / 3;
    if (d3 % 3)
        rl_signal(RL_C_SHAPE, "%s: expected qkv with a multiple of 3 columns, found %zu", fn, d3);
    float *qp = rl_sf_matrix_of(fn, 2, q, "q", n, d);
    float *kp = rl_sf_matrix_of(fn, 3, k, "k", n, d);
    float *vp = rl_sf_matrix_of(fn, 4, v, "v", n, d);
    size_t h, hd;
    rl_heads_args(fn, 5, heads, head_dim, d, &h, &hd);
    const float base = theta == ECL_NIL ? 0.0f : rl_arg_sf(fn, 7, theta);
    if (n && d && (q == qkv || k == qkv || v == qkv || q == k || q == v || k == v))
        rl_signal(RL_C_ERROR, "%s: expected qkv, q, k and v to be four arrays, found one twice",
                  fn);
    if (!n || !d)
        ecl_return1(env, q);
    for (size_t t = 0; t < n; t++)
        memcpy(vp + t * d, src + t * d3 + 2 * d, d * sizeof *vp);
    if (theta == ECL_NIL) {
        for (size_t t = 0; t < n; t++) {
            memcpy(qp + t * d, src + t * d3, d * sizeof *qp);
            memcpy(kp + t * d, src + t * d3 + d, d * sizeof *kp);
        }
        ecl_return1(env, q);
    }
    /* q and k turned as they are read out of QKV's rows: no copy first */
    rl_status st;
    RL_RUN_KERNEL(env, st = rl_rope_neox2_strided_ex(src, src + d, d3, n, h, hd, base, qp, kp,
                                                     rl_path_best(), rl_threads()));
    if (st == RL_OK)
        ecl_return1(env, q);
    return rl_return_status(env, st, "rope-neox: the kernel refused its operands");
}

/* (%add-into out a b) -> (values OUT non-finite-p): OUT := A + B element by
 * element in single-float, the three of the same dimensions (OUT may be A
 * or B); NON-FINITE-P true when OUT holds a NaN or an infinity (the sums
 * tested as they are stored).  The float traps are held, as for every
 * kernel: a sum past single-float range is an infinity the caller is
 * told of, not a trap. */
static cl_object rl_prim_add_into(cl_object out, cl_object a, cl_object b) {
    static const char fn[] = "%ADD-INTO";
    const cl_env_ptr env = ecl_process_env();
    size_t n, d;
    float *y = rl_sf_matrix(fn, 1, out, &n, &d);
    const float *ap = rl_sf_matrix_of(fn, 2, a, "a", n, d);
    const float *bp = rl_sf_matrix_of(fn, 3, b, "b", n, d);
    int bad = 0;
    rl_status st;
    RL_RUN_KERNEL(env, st = rl_add_nf(ap, bp, n * d, y, &bad));
    if (st != RL_OK) /* not reached: simple arrays are the same or apart */
        return rl_return_status(env, st, "add-into: the kernel refused its operands");
    ecl_return2(env, out, bad ? ECL_T : ECL_NIL);
}

/* (%positions-of ids value out) -> COUNT: the positions p where (aref ids
 * p) is VALUE, IDS a fixnum vector (to its fill pointer), in increasing
 * order, stored in OUT (a fixnum vector) from its start as far as its
 * array dimension reaches; answers how many there are, so that a caller
 * grows OUT and calls again when they are more: a question's markers,
 * without an AREF of Lisp's per token. */
static cl_object rl_prim_positions_of(cl_object ids, cl_object value, cl_object out) {
    static const char fn[] = "%POSITIONS-OF";
    const cl_env_ptr env = ecl_process_env();
    if (!rl_fixnum_vector_p(ids))
        rl_type_error(fn, 1, ids, RL_T_VECTOR);
    const cl_fixnum v = rl_arg_fixnum(fn, 2, value, MOST_NEGATIVE_FIXNUM, MOST_POSITIVE_FIXNUM);
    if (!rl_fixnum_vector_p(out))
        rl_type_error(fn, 3, out, RL_T_VECTOR);
    const size_t n = (size_t)ecl_length(ids), cap = (size_t)out->vector.dim;
    size_t count = 0;
    for (size_t p = 0; p < n; p++)
        if (ids->vector.self.fix[p] == v) {
            if (count < cap)
                out->vector.self.fix[count] = (cl_fixnum)p;
            count++;
        }
    ecl_return1(env, ecl_make_fixnum((cl_fixnum)count));
}

/* (%gather-rows table ids out) -> OUT: row i of OUT (n x d) := row
 * (elt IDS i) of TABLE (vocab x d); IDS a proper list of n fixnums from 0
 * below vocab, or a fixnum vector of length n (its fill pointer, if any):
 * the token embedding's lookup, and the rows of a question's markers. */
static cl_object rl_prim_gather_rows(cl_object table, cl_object ids, cl_object out) {
    static const char fn[] = "%GATHER-ROWS";
    const cl_env_ptr env = ecl_process_env();
    size_t vocab, d, n, c;
    const float *tp = rl_sf_matrix(fn, 1, table, &vocab, &d);
    float *y = rl_sf_matrix(fn, 3, out, &n, &c);
    rl_same_dims(fn, "out", n, c, n, d);
    size_t i = 0;
    cl_object l = ids;
    if (rl_fixnum_vector_p(ids)) {
        if ((size_t)ecl_length(ids) != n)
            rl_signal(RL_C_SHAPE, "%s: expected a vector of %zu token ids (the rows of out), "
                      "found %zu", fn, n, (size_t)ecl_length(ids));
        for (; i < n; i++) {
            const cl_fixnum id = ids->vector.self.fix[i];
            if (id < 0 || (size_t)id >= vocab)
                rl_signal(RL_C_INDEX, "%s: expected token ids from 0 below %zu, found one out "
                          "of range at position %zu", fn, vocab, i);
            if (d)
                memcpy(y + i * d, tp + (size_t)id * d, d * sizeof *y);
        }
        ecl_return1(env, out);
    }
    for (; ECL_CONSP(l) && i < n; l = ECL_CONS_CDR(l), i++) {
        const cl_object id = ECL_CONS_CAR(l);
        if (!ECL_FIXNUMP(id) || ecl_fixnum(id) < 0 || (size_t)ecl_fixnum(id) >= vocab)
            rl_signal(RL_C_INDEX, "%s: expected token ids from 0 below %zu, found one out of "
                      "range at position %zu", fn, vocab, i);
        if (d)
            memcpy(y + i * d, tp + (size_t)ecl_fixnum(id) * d, d * sizeof *y);
    }
    if (i != n || l != ECL_NIL)
        rl_signal(RL_C_SHAPE, "%s: expected a proper list of %zu token ids (the rows of out), "
                  "found another list", fn, n);
    ecl_return1(env, out);
}

/* The single-floats of X, a vector that is not
 * displaced (its fill pointer, if any, its length), else NULL. */
static float *rl_sf_fill_vector(cl_object x, cl_index *n) {
    if (ECL_IMMEDIATE(x) || x->d.t != t_vector || x->vector.elttype != ecl_aet_sf ||
        x->vector.displaced != ECL_NIL)
        return NULL;
    *n = ecl_length(x);
    return x->vector.self.sf;
}

/* (%softmax-into logits temperature out copy) -> OUT: the softmax in
 * double of the single-floats LOGITS (a simple array of any rank, the
 * head's k x 1 logits) over TEMPERATURE, the largest
 * scaled logit subtracted first and the exponentials summed in order
 * (TEMPERATURE a single-float or double-float, widened exactly), stored
 * as single-floats in OUT (a single-float vector as long, a fill
 * pointer allowed); COPY, NIL or such a vector, receives LOGITS too.
 * libm's exp, as ECL's EXP of a double-float, so the bits are those of the
 * same steps in Lisp; nothing is consed. */
static cl_object rl_prim_softmax_into(cl_object logits, cl_object temperature, cl_object out,
                                      cl_object copy) {
    static const char fn[] = "%SOFTMAX-INTO";
    cl_index n = 0, m = 0, c = 0;
    const float *x = rl_simple_data(logits, ecl_aet_sf, &n);
    /* a single-float taken as it is: boxing it as a double would cons */
    const double t = ecl_t_of(temperature) == t_singlefloat
                         ? (double)ecl_single_float(temperature)
                         : rl_arg_df(fn, 2, temperature);
    float *y = rl_sf_fill_vector(out, &m);
    float *z = copy == ECL_NIL ? NULL : rl_sf_fill_vector(copy, &c);
    if (!x)
        rl_type_error(fn, 1, logits, RL_T_ARRAY);
    if (!y)
        rl_type_error(fn, 3, out, RL_T_VECTOR);
    if (copy != ECL_NIL && !z)
        rl_type_error(fn, 4, copy, RL_T_VECTOR);
    if (m != n || n == 0 || (z && c != n))
        rl_signal(RL_C_SHAPE, "%s: expected logits and out of one length (at least 1), "
                  "found %zu and %zu", fn, (size_t)n, (size_t)(m != n ? m : c));
    double top = (double)x[0] / t, sum = 0.0;
    for (cl_index i = 1; i < n; i++)
        if ((double)x[i] / t > top)
            top = (double)x[i] / t;
    for (cl_index i = 0; i < n; i++)
        sum += exp((double)x[i] / t - top);
    for (cl_index i = 0; i < n; i++)
        y[i] = (float)(exp((double)x[i] / t - top) / sum);
    if (z)
        memcpy(z, x, n * sizeof *z);
    ecl_return1(ecl_process_env(), out);
}

/* The sequence kernels behind VEC's MATMUL, LAYER-NORM, ROPE-NEOX,
 * ATTENTION and GEGLU. */
static const rl_prim_def rl_kernel_defs[] = {
    RL_PRIM("%MATMUL", rl_prim_matmul, 5),
    RL_PRIM("%MATMUL-ROWS", rl_prim_matmul_rows, 7),
    RL_PRIM("%OUTLIER-MATMUL", rl_prim_outlier_matmul, 6),
    RL_PRIM("%LAYER-NORM", rl_prim_layer_norm, 4),
    RL_PRIM("%ROPE-NEOX", rl_prim_rope_neox, 5),
    RL_PRIM("%ATTENTION", rl_prim_attention, 7),
    RL_PRIM("%GEGLU", rl_prim_geglu, 3),
};
RL_PRIM_TABLE(rl_kernel_prims, "VEC", rl_kernel_defs);

/* The encoder's fused steps, which only MODEL's forward pass runs. */
static const rl_prim_def rl_defs[] = {
    RL_PRIM("%LAYER-NORM-BIAS", rl_prim_layer_norm_bias, 5),
    RL_PRIM("%BIAS-ACT", rl_prim_bias_act, 4),
    RL_PRIM("%ATTENTION-ROWS", rl_prim_attention_rows, 6),
    RL_PRIM("%SET-MATRIX-ROWS", rl_prim_set_matrix_rows, 2),
    RL_PRIM("%QKV-ROPE", rl_prim_qkv_rope, 7),
    RL_PRIM("%ADD-INTO", rl_prim_add_into, 3),
    RL_PRIM("%GATHER-ROWS", rl_prim_gather_rows, 3),
    RL_PRIM("%POSITIONS-OF", rl_prim_positions_of, 3),
    RL_PRIM("%SOFTMAX-INTO", rl_prim_softmax_into, 4),
};
RL_PRIM_TABLE(rl_model_prims, "MODEL", rl_defs);
