/* qtypes.c - quantizing single-floats into the legacy, K-quant and IQ4
 * types of prims/quants.h from Lisp (RONTOLISP:QUANTIZE with a format other
 * than Q8-0; Q8_0 has its own entry points in qmatrix.c). */
#include "prims/ecl/glue.h"
#include "prims/quants.h"

/* (%quant-quantize type-id src) -> octets | (values nil status where):
 * SRC a simple single-float array whose total size is a multiple of the
 * type's block; the bytes rl_quantize writes (ggml's no-imatrix
 * quantizer's), or its refusal (:non-finite WHERE the flat index of the
 * first NaN or infinity, :scale-overflow WHERE the flat block index). */
static cl_object rl_prim_quant_quantize(cl_object type, cl_object src) {
    static const char fn[] = "%QUANT-QUANTIZE";
    const cl_env_ptr env = ecl_process_env();
    uint32_t t = (uint32_t)rl_arg_fixnum(fn, 1, type, 0, 0xffff);
    const rl_type_traits *q = rl_quant_traits_of(t);
    cl_index n = 0;
    const float *x = rl_simple_data(src, ecl_aet_sf, &n);
    size_t where = 0;
    rl_status st;
    cl_object out;
    if (!q)
        rl_signal(RL_C_ERROR, "%s: expected a legacy, K-quant or IQ4 ggml type id, found %ld", fn,
                  (long)t);
    if (!x && n)
        rl_type_error(fn, 2, src, RL_T_ARRAY);
    if (n % rl_type_block(t))
        rl_signal(RL_C_SHAPE, "quantize: expected a total size that is a multiple of %s's block "
                  "of %u, found %lu", rl_gguf_ggml_type_name(t), (unsigned)rl_type_block(t),
                  (unsigned long)n);
    out = ecl_alloc_simple_vector(rl_quant_bytes(t, n), ecl_aet_b8);
    st = RL_OK;
    if (n)
        RL_RUN_KERNEL(env, st = rl_quantize(t, x, n, out->vector.self.b8, &where));
    if (st == RL_OK)
        ecl_return1(env, out);
    ecl_return3(env, ECL_NIL, rl_keyword(rl_status_name(st)),
                ecl_make_unsigned_integer(where));
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%QUANT-QUANTIZE", rl_prim_quant_quantize, 2),
};
RL_PRIM_TABLE(rl_qtypes_prims, "RONTOLISP", rl_defs);
