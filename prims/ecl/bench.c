/* bench.c - what `rontolisp bench' (lisp/bench.lisp) times: products and
 * quantizations on an explicit path and thread count, the read bandwidth,
 * random matrices, the CPU's facts.  The timing loops live in
 * prims/bench.c; this checks the operands and holds traps and interrupts. */
#include "prims/bench.h"
#include "prims/bench_rows.h"
#include "prims/cpu.h"
#include "prims/ecl/qmatrix.h"
#include "prims/ecl/vec.h"
#include "prims/matmul.h"
#include "prims/matmul_q8.h"
#include "prims/q8.h"
#include "prims/rng.h"

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
    rl_matvec_operands o;
    rl_status st;
    const cl_env_ptr env = ecl_process_env();
    rl_path p = rl_arg_path("%BENCH-MATVEC", 4, path);
    int nth = (int)rl_arg_fixnum("%BENCH-MATVEC", 5, threads, 1, RL_MAX_THREADS);
    cl_index n = (cl_index)rl_arg_fixnum("%BENCH-MATVEC", 6, iters, 1, 1000000);
    uint64_t limit;
    cl_object times, pinned;
    size_t done = 0;
    if (!ECL_FIXNUMP(budget) || ecl_fixnum(budget) < 0)
        rl_type_error("%BENCH-MATVEC", 7, budget, RL_T_FIXNUM);
    limit = (uint64_t)ecl_fixnum(budget);
    times = ecl_alloc_simple_vector(n, ecl_aet_df);
    rl_mv_operands_of("%BENCH-MATVEC", m, x, out, &o, &pinned);
    /* Interrupts stay off for the whole loop: the kernels' scratch is
     * malloc'd inside each call, and a budget bounds the wait. */
    RL_RUN_KERNEL(env, {
        st = rl_bench_matvec(&o, p, nth, n, limit, times->vector.self.df, &done, msg, sizeof msg);
        rl_mv_operands_release(pinned); /* before an interrupt is handled */
    });
    if (st != RL_OK)
        ecl_return3(env, ECL_NIL, rl_keyword(rl_status_name(st)), ecl_make_simple_base_string(msg, -1));
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
    rl_status st;
    if (!xs || n % RL_QK8_0)
        rl_type_error("%BENCH-QUANTIZE", 1, x, RL_T_ARRAY);
    y = ecl_alloc_simple_vector(rl_q8_bytes(n) ? rl_q8_bytes(n) : 1, ecl_aet_b8);
    times = ecl_alloc_simple_vector(r, ecl_aet_df);
    RL_RUN_KERNEL(env, st = rl_bench_quantize(xs, n, (rl_block_q8_0 *)(void *)y->vector.self.b8,
                                              p, r, times->vector.self.df));
    if (st != RL_OK)
        ecl_return2(env, ECL_NIL, rl_keyword(rl_status_name(st)));
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
    RL_RUN_KERNEL(env, best = rl_bench_read_gbps(b, nth, r, &median)); /* it mallocs its buffer */
    if (best < 0)
        ecl_return1(env, ECL_NIL);
    ecl_return2(env, ecl_make_double_float(best), ecl_make_double_float(median));
}

/* (%bench-fill-random array seed) -> ARRAY: fills a simple single-float
 * array (any rank) with values uniform in [-1, 1), a fixed function of
 * SEED (prims/rng.h), fast enough for matrices of hundreds of MB. */
static cl_object rl_prim_bench_fill_random(cl_object a, cl_object seed) {
    cl_index n = 0;
    float *y = rl_simple_data(a, ecl_aet_sf, &n);
    uint64_t s = (uint64_t)rl_arg_fixnum("%BENCH-FILL-RANDOM", 2, seed, 0, MOST_POSITIVE_FIXNUM);
    if (!y)
        rl_type_error("%BENCH-FILL-RANDOM", 1, a, RL_T_ARRAY);
    rl_rng_fill_uniform_f32(y, n, &s);
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

/* (%bench-peak int8-p reps) -> G multiply-adds per second, one core, on
 * the knobs' path (rl_bench_peak): f32 FMAs, or int8 products with
 * INT8-P; the best of REPS runs.  Nothing is allocated; interrupts stay
 * off for the few milliseconds it runs. */
static cl_object rl_prim_bench_peak(cl_object int8_p, cl_object reps) {
    const int r = (int)rl_arg_fixnum("%BENCH-PEAK", 2, reps, 1, 1000);
    const cl_env_ptr env = ecl_process_env();
    double g = 0;
    rl_status st;
    RL_RUN_KERNEL(env, st = rl_bench_peak(rl_path_best(), int8_p != ECL_NIL, r, &g));
    if (st != RL_OK)
        ecl_return2(env, ECL_NIL, rl_keyword(rl_status_name(st)));
    ecl_return1(env, ecl_make_double_float(g));
}

/* (%matmul-q8-tiles) -> (values whole lanes): the tiles the :q8 matmul
 * kernel has summed by whole blocks and lane by lane since the start
 * (prims/matmul_q8.c; the same bits either way). */
static cl_object rl_prim_matmul_q8_tiles(void) {
    size_t whole, lanes;
    rl_mm_q8_tiles4(&whole, &lanes);
    ecl_return2(ecl_process_env(), ecl_make_unsigned_integer(whole),
                ecl_make_unsigned_integer(lanes));
}

/* (%bench-matmul m xs out threads iters mode) -> times | (values nil
 * status message): ITERS timed calls (after one untimed) of the Q8_0
 * matrix M times the rows of XS into OUT on the knobs' path with THREADS
 * chunks: MODE 0 one matmul with :q8, 1 one matmul with :q8x2, 2 a matvec
 * per row (the baseline matmul is measured against).  TIMES is a fresh
 * double-float vector of each call's nanoseconds.  The operands are
 * %MATMUL's; interrupts stay off for the loop (scratch lives in a call). */
static cl_object rl_prim_bench_matmul(cl_object m, cl_object xs, cl_object out,
                                      cl_object threads, cl_object iters, cl_object mode) {
    static const char fn[] = "%BENCH-MATMUL";
    const cl_env_ptr env = ecl_process_env();
    size_t n, cols, orows, ocols;
    if (!rl_qm_p(m))
        rl_type_error(fn, 1, m, RL_T_QM_OR_ARRAY);
    rl_qm_view v;
    rl_qm_shape_of(m, &v);
    if (v.rank != 2)
        rl_type_error(fn, 1, m, RL_T_QM_OR_ARRAY);
    const float *x = rl_sf_matrix(fn, 2, xs, &n, &cols);
    float *y = rl_sf_matrix(fn, 3, out, &orows, &ocols);
    rl_same_dims(fn, "xs", n, cols, n, (size_t)v.cols);
    rl_same_dims(fn, "out", orows, ocols, n, (size_t)v.rows);
    const int nth = (int)rl_arg_fixnum(fn, 4, threads, 1, RL_MAX_THREADS);
    const cl_index reps = (cl_index)rl_arg_fixnum(fn, 5, iters, 1, 1000000);
    const int md = (int)rl_arg_fixnum(fn, 6, mode, 0, 2);
    const rl_path path = rl_path_best();
    cl_object times = ecl_alloc_simple_vector(reps, ecl_aet_df);
    char msg[256] = "";
    rl_status st = RL_OK;
    rl_qm_pin(m, &v);
    RL_RUN_KERNEL(env, {
        for (cl_index r = 0; r <= reps && st == RL_OK; r++) {
            const uint64_t t0 = rl_bench_ns();
            if (md == 2)
                for (size_t t = 0; t < n && st == RL_OK; t++)
                    st = rl_matvec_q8_ex(v.blocks, v.rows, v.cols, RL_SRC_F32, x + t * cols, NULL,
                                         y + t * v.rows, path, nth, 0, msg, sizeof msg);
            else
                st = rl_matmul_ex(RL_WT_Q8_0, v.blocks, v.rows, v.cols, x, n, y,
                                  md ? RL_ACT_Q8X2 : RL_ACT_Q8, path, nth, 0, msg, sizeof msg, NULL);
            if (r) /* the first call warms caches and the pool */
                times->vector.self.df[r - 1] = (double)(rl_bench_ns() - t0);
        }
        rl_qm_unpin(&v);
    });
    if (st != RL_OK)
        return rl_return_status(env, st, msg);
    ecl_return1(env, times);
}

/* The most calls one measurement of %BENCH-ROWS or %BENCH-GGML-ROWS times
 * (its times vector's length). */
#define RL_BENCH_ROWS_CAP 16384

/* The operands of %BENCH-ROWS and %BENCH-GGML-ROWS: M a quantized matrix
 * (rank 2) or a single-float matrix (F32), X and OUT simple single-float
 * vectors of its columns and rows.  The matrix's memory is pinned last (v,
 * rl_qm_unpin after the product); nothing signals after. */
typedef struct {
    uint32_t type;
    const void *w;
    size_t rows, cols;
    const float *x;
    float *y;
    rl_qm_view v;
} rl_bench_rows_ops;

static void rl_bench_rows_operands(const char *fn, cl_object m, cl_object x, cl_object out,
                                   rl_bench_rows_ops *o) {
    cl_index n = 0, nout = 0;
    const float *mf = NULL;
    memset(o, 0, sizeof *o);
    o->v.pinned = ECL_NIL;
    if (rl_qm_p(m)) {
        rl_qm_shape_of(m, &o->v);
        if (o->v.rank != 2)
            rl_type_error(fn, 1, m, RL_T_QM_OR_ARRAY);
        o->type = o->v.ggml_type;
        o->rows = (size_t)o->v.rows;
        o->cols = (size_t)o->v.cols;
    } else {
        mf = rl_sf_matrix(fn, 1, m, &o->rows, &o->cols);
        o->type = RL_GGUF_GGML_F32;
    }
    o->x = rl_simple_data(x, ecl_aet_sf, &n);
    o->y = rl_simple_data(out, ecl_aet_sf, &nout);
    if (!o->x || x->d.t != t_vector)
        rl_type_error(fn, 2, x, RL_T_VECTOR);
    if (!o->y || out->d.t != t_vector)
        rl_type_error(fn, 3, out, RL_T_VECTOR);
    rl_same_dims(fn, "x", 1, n, 1, o->cols);
    rl_same_dims(fn, "out", 1, nout, 1, o->rows);
    if (o->rows)
        rl_out_not_input(fn, out, x, "x");
    if (mf) {
        o->w = mf;
    } else {
        rl_qm_pin_any(m, &o->v);
        o->w = o->v.data;
    }
}

/* The (min-calls min-ns max-ns) arguments at positions pos.. */
static void rl_bench_rows_limits(const char *fn, int pos, cl_object calls, cl_object min_ns,
                                 cl_object max_ns, size_t *c, uint64_t *lo, uint64_t *hi) {
    *c = (size_t)rl_arg_fixnum(fn, pos, calls, 1, RL_BENCH_ROWS_CAP);
    *lo = (uint64_t)rl_arg_fixnum(fn, pos + 1, min_ns, 0, MOST_POSITIVE_FIXNUM);
    *hi = (uint64_t)rl_arg_fixnum(fn, pos + 2, max_ns, 0, MOST_POSITIVE_FIXNUM);
}

/* %BENCH-ROWS and %BENCH-GGML-ROWS: ours on path p, or ggml's (ggml);
 * the limits' arguments from position pos. */
static cl_object rl_bench_rows_prim(const char *fn, int ggml, rl_path p, cl_object m, cl_object x,
                                    cl_object out, int pos, cl_object calls, cl_object min_ns,
                                    cl_object max_ns) {
    const cl_env_ptr env = ecl_process_env();
    size_t c, done = 0;
    uint64_t lo, hi;
    rl_bench_rows_limits(fn, pos, calls, min_ns, max_ns, &c, &lo, &hi);
    cl_object times = ecl_alloc_simple_vector(RL_BENCH_ROWS_CAP, ecl_aet_df);
    double *t = times->vector.self.df;
    char msg[256] = "";
    rl_bench_rows_ops o;
    rl_status st;
    rl_bench_rows_operands(fn, m, x, out, &o);
    RL_RUN_KERNEL(env, {
        st = ggml ? rl_bench_ggml_rows(o.type, o.w, o.rows, o.cols, o.x, o.y, c, lo, hi,
                                       RL_BENCH_ROWS_CAP, t, &done, msg, sizeof msg)
                  : rl_bench_rows(o.type, o.w, o.rows, o.cols, o.x, o.y, p, c, lo, hi,
                                  RL_BENCH_ROWS_CAP, t, &done, msg, sizeof msg);
        rl_qm_unpin(&o.v);
    });
    if (st != RL_OK)
        return rl_return_status(env, st, msg);
    ecl_return2(env, times, ecl_make_fixnum(done));
}

/* (%bench-rows m x out path min-calls min-ns max-ns) -> (values times
 * count), or (values nil status-keyword message)
 * Times OUT = M X in M's own type on kernel PATH (0 scalar .. 3
 * avx512vnni), one thread: M a quantized matrix of Q8_0 or of a type with
 * a row product (X quantized to its vec_dot_type, then each row's
 * product), or a single-float matrix (the f32 baseline).  One untimed
 * call, then timed calls until MIN-CALLS calls and MIN-NS nanoseconds,
 * stopping at 16384 calls or once MAX-NS (0: no limit) have passed with 3
 * timed (rl_bench_rows).  TIMES: a fresh double-float vector whose first
 * COUNT entries are each call's nanoseconds; OUT keeps the last result. */
static cl_object rl_prim_bench_rows(cl_object m, cl_object x, cl_object out, cl_object path,
                                    cl_object calls, cl_object min_ns, cl_object max_ns) {
    return rl_bench_rows_prim("%BENCH-ROWS", 0, rl_arg_path("%BENCH-ROWS", 4, path), m, x, out, 5,
                              calls, min_ns, max_ns);
}

/* (%ggml-open dir) -> variant-name, or (values nil reason): loads
 * llama.cpp's ggml CPU backend from the directory DIR (rl_ggml_open: the
 * variant that rates this CPU highest); once loaded, answers its variant
 * whatever DIR. */
static cl_object rl_prim_ggml_open(cl_object dir) {
    const cl_env_ptr env = ecl_process_env();
    char msg[512] = "";
    int ok;
    if (ECL_IMMEDIATE(dir) || !ecl_stringp(dir))
        rl_type_error("%GGML-OPEN", 1, dir, RL_T_STRING);
    cl_object d = si_coerce_to_base_string(dir);
    RL_RUN_KERNEL(env, ok = rl_ggml_open((const char *)d->base_string.self, msg, sizeof msg));
    if (!ok)
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    ecl_return1(env, ecl_make_simple_base_string(msg, -1));
}

/* (%bench-ggml-rows m x out min-calls min-ns max-ns) -> as %BENCH-ROWS,
 * with ggml's product (rl_bench_ggml_rows: its from_float and vec_dot for
 * M's type) instead of ours; %GGML-OPEN first, else the status is
 * :unsupported. */
static cl_object rl_prim_bench_ggml_rows(cl_object m, cl_object x, cl_object out,
                                         cl_object calls, cl_object min_ns, cl_object max_ns) {
    return rl_bench_rows_prim("%BENCH-GGML-ROWS", 1, RL_PATH_REF, m, x, out, 4, calls, min_ns,
                              max_ns);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%BENCH-MATVEC", rl_prim_bench_matvec, 7),
    RL_PRIM("%BENCH-MATMUL", rl_prim_bench_matmul, 6),
    RL_PRIM("%BENCH-QUANTIZE", rl_prim_bench_quantize, 3),
    RL_PRIM("%BENCH-READ-GBPS", rl_prim_bench_read_gbps, 3),
    RL_PRIM("%BENCH-FILL-RANDOM", rl_prim_bench_fill_random, 2),
    RL_PRIM("%CPU-INFO", rl_prim_cpu_info, 0),
    RL_PRIM("%BENCH-PEAK", rl_prim_bench_peak, 2),
    RL_PRIM("%MATMUL-Q8-TILES", rl_prim_matmul_q8_tiles, 0),
};
RL_PRIM_TABLE(rl_bench_prims, "COMMAND-LINE", rl_defs);

/* The monotonic clock the model's stage timing reads too. */
static const rl_prim_def rl_clock_defs[] = {
    RL_PRIM("%BENCH-NOW-NS", rl_prim_bench_now_ns, 0),
};
RL_PRIM_TABLE(rl_clock_prims, "RONTOLISP", rl_clock_defs);

/* The products in a file's own types are `bench FILE''s alone
 * (jobs/bench-products.lisp): in its package. */
static const rl_prim_def rl_rows_defs[] = {
    RL_PRIM("%BENCH-ROWS", rl_prim_bench_rows, 7),
    RL_PRIM("%BENCH-GGML-ROWS", rl_prim_bench_ggml_rows, 6),
    RL_PRIM("%GGML-OPEN", rl_prim_ggml_open, 1),
};
RL_PRIM_TABLE(rl_bench_rows_prims, "COMMAND-LINE", rl_rows_defs);
