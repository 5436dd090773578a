/* arrays.c - packed arrays: float <-> half conversion, the non-finite scan,
 * raw octets, and strings <-> UTF-8 octets.  The loops live in plain C
 * (gguf/numfmt.c, prims/utf8.c); this checks and unwraps Lisp arrays. */
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/ecl/arrays.h"
#include "prims/nn.h"
#include "prims/rng.h"

void *rl_tensor_array_data(cl_object a, uint64_t *nbytes) {
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

void *rl_tensor_array_dest(cl_object dest, int f32_p, uint64_t nbytes) {
    cl_index n = 0;
    void *y = rl_simple_data(dest, f32_p ? ecl_aet_sf : ecl_aet_b16, &n);
    return y && (uint64_t)n * (f32_p ? 4 : 2) == nbytes ? y : NULL;
}

void rl_copy_to_tensor_array(const char *fn, cl_object dest, int f32_p, const void *src,
                             uint64_t nbytes) {
    void *y = rl_tensor_array_dest(dest, f32_p, nbytes);
    if (!y)
        rl_type_error(fn, 3, dest, RL_T_ARRAY);
    if (nbytes)
        memcpy(y, src, (size_t)nbytes);
}

/* (%to-half-into src bf16-p dest): SRC a simple single- or double-float
 * array, DEST a simple (unsigned-byte 16) array of the same total size;
 * fills DEST with binary16 (bf16-p NIL) or bfloat16 bits.  A double goes
 * through C's cast to float first (doc/formats.md §1). */
static cl_object rl_prim_to_half_into(cl_object src, cl_object bf16, cl_object dest) {
    cl_index n = 0, m = 0;
    const float *xs = rl_simple_data(src, ecl_aet_sf, &n);
    const double *xd = xs ? NULL : rl_simple_data(src, ecl_aet_df, &n);
    uint16_t *y = rl_simple_data(dest, ecl_aet_b16, &m);
    if (!xs && !xd)
        rl_type_error("%TO-HALF-INTO", 1, src, RL_T_ARRAY);
    if (!y || m != n)
        rl_type_error("%TO-HALF-INTO", 3, dest, RL_T_ARRAY);
    {
        RL_FP_HOLD();
        if (xs && bf16 != ECL_NIL)
            rl_gguf_f32_to_bf16_row(xs, y, n);
        else if (xs)
            rl_gguf_f32_to_f16_row(xs, y, n);
        else if (bf16 != ECL_NIL)
            rl_gguf_f64_to_bf16_row(xd, y, n);
        else
            rl_gguf_f64_to_f16_row(xd, y, n);
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
        rl_type_error("%HALF-TO-SINGLE-INTO", 1, src, RL_T_ARRAY);
    if (!y || m != n)
        rl_type_error("%HALF-TO-SINGLE-INTO", 3, dest, RL_T_ARRAY);
    if (bf16 != ECL_NIL)
        rl_gguf_bf16_to_f32_row(x, y, n);
    else
        rl_gguf_f16_to_f32_row(x, y, n);
    ecl_return1(ecl_process_env(), dest);
}

/* (%first-non-finite data kind) -> the row-major index of the first NaN or
 * infinity in DATA, or NIL.  KIND says how to read it (rl_gguf_num_kind):
 * 0 single-floats, 1 double-floats (non-finite once cast to single, as
 * every kernel casts them), 2 binary16 bits, 3 bfloat16 bits, both in
 * (unsigned-byte 16). */
static cl_object rl_prim_first_non_finite(cl_object data, cl_object kind) {
    static const cl_elttype aet[] = {ecl_aet_sf, ecl_aet_df, ecl_aet_b16, ecl_aet_b16};
    cl_index k = (cl_index)rl_arg_fixnum("%FIRST-NON-FINITE", 2, kind, 0, 3), n = 0, i;
    const void *p = rl_simple_data(data, aet[k], &n);
    if (!p)
        rl_type_error("%FIRST-NON-FINITE", 1, data, RL_T_ARRAY);
    {
        RL_FP_HOLD(); /* a double beyond single range becomes inf, not a trap */
        /* Single-floats (the encoder's every step) by the SIMD scan. */
        i = k == RL_GGUF_NUM_F32 ? rl_first_non_finite_f32(p, n)
                                 : rl_gguf_first_non_finite(p, n, (rl_gguf_num_kind)k);
        RL_FP_RELEASE();
    }
    ecl_return1(ecl_process_env(), i < n ? ecl_make_fixnum(i) : ECL_NIL);
}

/* (%octets-of array): a fresh (unsigned-byte 8) vector holding the raw
 * (little-endian) bytes of a simple single-float or (unsigned-byte 16)
 * array: what a safetensors file stores. */
static cl_object rl_prim_octets_of(cl_object a) {
    uint64_t size = 0;
    const void *p = rl_tensor_array_data(a, &size);
    cl_object v;
    if (!p)
        rl_type_error("%OCTETS-OF", 1, a, RL_T_ARRAY);
    v = ecl_alloc_simple_vector((cl_index)size, ecl_aet_b8);
    if (size)
        memcpy(v->vector.self.b8, p, (size_t)size);
    ecl_return1(ecl_process_env(), v);
}

/* (%utf8-octets string) -> its UTF-8 encoding as an (unsigned-byte 8)
 * vector, the inverse of %UTF8-STRING: U+DC80..U+DCFF become the single
 * bytes 80..FF they stand for (prims/utf8.h), other surrogates and
 * characters above U+10FFFF become U+FFFD. */
static cl_object rl_prim_utf8_octets(cl_object str) {
    if (!ECL_STRINGP(str))
        rl_type_error("%UTF8-OCTETS", 1, str, RL_T_STRING);
    cl_object out = ecl_alloc_simple_vector(rl_string_utf8_length(str), ecl_aet_b8);
    rl_string_to_utf8(str, out->vector.self.b8);
    ecl_return1(ecl_process_env(), out);
}

/* (%utf8-string octets) -> the string those bytes spell as UTF-8, each
 * byte that is not part of valid UTF-8 kept as U+DC80..U+DCFF. */
static cl_object rl_prim_utf8_string(cl_object octets) {
    cl_index n = 0;
    const uint8_t *p = rl_octets("%UTF8-STRING", 1, octets, &n);
    ecl_return1(ecl_process_env(), rl_string_from_utf8((const char *)p, n));
}

/* (%random-normal-fill array sigma state) -> the generator's next state:
 * fills a simple single-float ARRAY with normal values of deviation SIGMA
 * (a double-float) from the (unsigned-byte 64) STATE of prims/rng.h, so a
 * seed makes the same weights everywhere. */
static cl_object rl_prim_random_normal_fill(cl_object a, cl_object sigma, cl_object state) {
    cl_index n = 0;
    float *y = rl_simple_data(a, ecl_aet_sf, &n);
    double sd = rl_arg_df("%RANDOM-NORMAL-FILL", 2, sigma);
    uint64_t s;
    if (!y)
        rl_type_error("%RANDOM-NORMAL-FILL", 1, a, RL_T_ARRAY);
    if ((!ECL_FIXNUMP(state) && !ECL_BIGNUMP(state)) || ecl_minusp(state) ||
        ecl_integer_length(state) > 64)
        rl_type_error("%RANDOM-NORMAL-FILL", 3, state, RL_T_INTEGER);
    s = ecl_to_uint64_t(state);
    {
        RL_FP_HOLD();
        rl_rng_fill_normal_f32(y, n, sd, &s);
        RL_FP_RELEASE();
    }
    ecl_return1(ecl_process_env(), ecl_make_uint64_t(s));
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%TO-HALF-INTO", rl_prim_to_half_into, 3),
    RL_PRIM("%HALF-TO-SINGLE-INTO", rl_prim_half_to_single_into, 3),
    RL_PRIM("%FIRST-NON-FINITE", rl_prim_first_non_finite, 2),
    RL_PRIM("%UTF8-OCTETS", rl_prim_utf8_octets, 1),
    RL_PRIM("%UTF8-STRING", rl_prim_utf8_string, 1),
};
RL_PRIM_TABLE(rl_array_prims, "RONTOLISP", rl_defs);

/* What only the jobs of the command line use: an array's bytes, random weights. */
static const rl_prim_def rl_job_defs[] = {
    RL_PRIM("%OCTETS-OF", rl_prim_octets_of, 1),
    RL_PRIM("%RANDOM-NORMAL-FILL", rl_prim_random_normal_fill, 3),
};
RL_PRIM_TABLE(rl_array_job_prims, "COMMAND-LINE", rl_job_defs);
