/* vec.c - the matrix-vector product from Lisp (lisp/vec.lisp): operands
 * checked here, the product run by rl_matvec_run (prims/matvec.h) with the
 * knobs' path and thread count, with single-pass (%MATVEC) or two-pass
 * (%MATVEC-Q8X2) activations. */
#include "prims/ecl/qmatrix.h"
#include "prims/ecl/vec.h"
#include "prims/matmul.h"

cl_object rl_return_status(cl_env_ptr env, rl_status st, const char *msg) {
    ecl_return3(env, ECL_NIL, rl_keyword(rl_status_name(st)),
                ecl_make_simple_base_string(msg, -1));
}

void rl_mv_operands_of(const char *fn, cl_object m, cl_object x, cl_object out,
                       rl_matvec_operands *o, cl_object *pinned) {
    cl_index n = 0, nout = 0;
    o->w = NULL;
    o->wq = NULL;
    o->type = 0;
    o->mf = NULL;
    o->act = RL_ACT_Q8;
    o->x = rl_simple_data(x, ecl_aet_sf, &n);
    o->dbl = o->x == NULL;
    if (o->dbl)
        o->x = rl_simple_data(x, ecl_aet_df, &n);
    o->y = rl_simple_data(out, o->dbl ? ecl_aet_df : ecl_aet_sf, &nout);
    if (!o->x || ECL_IMMEDIATE(x) || x->d.t != t_vector)
        rl_type_error(fn, 2, x, RL_T_VECTOR);
    if (!o->y || out->d.t != t_vector)
        rl_type_error(fn, 3, out, RL_T_VECTOR);
    *pinned = ECL_NIL;
    if (rl_qm_p(m)) {
        rl_qm_view v;
        rl_qm_shape_of(m, &v);
        if (v.rank != 2)
            rl_type_error(fn, 1, m, RL_T_ARRAY);
        o->rows = v.rows;
        o->cols = v.cols;
    } else {
        cl_index total = 0;
        o->mf = rl_simple_data(m, ecl_aet_sf, &total);
        if (!o->mf || m->d.t != t_array || m->array.rank != 2)
            rl_type_error(fn, 1, m, RL_T_ARRAY);
        o->rows = m->array.dims[0];
        o->cols = m->array.dims[1];
    }
    if (n != o->cols || nout != o->rows)
        rl_type_error(fn, 2, x, RL_T_VECTOR);
    if (o->rows)
        rl_out_not_input(fn, out, x, "x");
    if (rl_qm_p(m)) { /* last: nothing signals while it is pinned */
        rl_qm_view v;
        rl_qm_pin_any(m, &v);
        if (v.ggml_type == RL_GGUF_GGML_Q8_0)
            o->w = v.blocks;
        else /* the type's row products (rl_matvec_quant_ex) */
            o->wq = v.data, o->type = v.ggml_type;
        *pinned = v.pinned;
    }
}

void rl_mv_operands_release(cl_object pinned) {
    if (pinned != ECL_NIL)
        rl_unpin(pinned);
}

/* (%matvec m x out) -> OUT, or (values nil status-keyword message where),
 * with the path and thread count of the knobs (--simd, --threads N).
 * WHERE is where quantizing X failed (rl_matvec_run), else 0.  Operands as
 * rl_mv_operands_of says. */
static cl_object rl_prim_matvec(cl_object m, cl_object x, cl_object out) {
    char msg[256] = "";
    rl_matvec_operands o;
    rl_status st;
    size_t where = 0;
    const cl_env_ptr env = ecl_process_env();
    cl_object pinned;
    rl_mv_operands_of("%MATVEC", m, x, out, &o, &pinned);
    RL_RUN_KERNEL(env, {
        st = rl_matvec_run(&o, rl_path_best(), rl_threads(), 1, msg, sizeof msg, &where);
        rl_mv_operands_release(pinned); /* before an interrupt is handled */
    });
    if (st == RL_OK)
        ecl_return1(env, out);
    rl_return4(env, ECL_NIL, rl_keyword(rl_status_name(st)), ecl_make_simple_base_string(msg, -1),
               ecl_make_unsigned_integer(where));
}

/* (%matvec-q8x2 m x out) -> OUT, or (values nil status message where):
 * %MATVEC with two-pass activations (doc/products.md §2); M must be a quantized
 * matrix. */
static cl_object rl_prim_matvec_q8x2(cl_object m, cl_object x, cl_object out) {
    static const char fn[] = "%MATVEC-Q8X2";
    const cl_env_ptr env = ecl_process_env();
    rl_matvec_operands o;
    cl_object pinned = ECL_NIL;
    if (!rl_qm_p(m))
        rl_type_error(fn, 1, m, RL_T_QM_OR_ARRAY);
    rl_mv_operands_of(fn, m, x, out, &o, &pinned);
    char msg[256] = "";
    size_t where = 0;
    rl_status st;
    o.act = RL_ACT_Q8X2;
    RL_RUN_KERNEL(env, st = rl_matvec_run(&o, rl_path_best(), rl_threads(), 1, msg, sizeof msg,
                                          &where);
                  rl_mv_operands_release(pinned));
    if (st == RL_OK)
        ecl_return1(env, out);
    rl_return4(env, ECL_NIL, rl_keyword(rl_status_name(st)),
               ecl_make_simple_base_string(msg, -1), ecl_make_unsigned_integer(where));
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%MATVEC", rl_prim_matvec, 3),
    RL_PRIM("%MATVEC-Q8X2", rl_prim_matvec_q8x2, 3),
};
RL_PRIM_TABLE(rl_vec_prims, "VEC", rl_defs);
