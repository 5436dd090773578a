/* glue.h - what every file in prims/ecl/ shares: the primitive tables that
 * register.c walks, checked argument accessors, signalling rontolisp's own
 * conditions, the floating-point trap hold, foreign handles and the Lisp
 * strings made from UTF-8.  Only prims/ecl/ and runtime/ include ECL.
 *
 * Rule for every primitive: validate everything first, allocate after, and
 * never signal while anything malloc'd is live or worker threads run
 * (ECL's errors longjmp). */
#ifndef RL_PRIMS_ECL_GLUE_H
#define RL_PRIMS_ECL_GLUE_H

#include <ecl/ecl.h>
#include <fenv.h>
#include <stddef.h>
#include <stdint.h>

/* One Lisp primitive: its name (upper case, the package comes from the
 * table), the C function and its fixed argument count. */
typedef struct {
    const char *name;
    cl_objectfn_fixed fn;
    int narg;
} rl_prim_def;

/* A file's primitives, all in one package. */
typedef struct {
    const char *package;
    const rl_prim_def *defs;
    size_t count;
} rl_prim_table;

#define RL_PRIM(name, fn, narg) {name, (cl_objectfn_fixed)(fn), narg}
#define RL_PRIM_TABLE(var, pkg, defs) \
    const rl_prim_table var = {pkg, defs, sizeof defs / sizeof defs[0]}

/* ECL runs with the overflow, invalid and divide-by-zero traps enabled, so
 * Lisp signals floating-point conditions.  The kernels rely on IEEE
 * non-stop arithmetic (1/d is +inf for a subnormal d, by design), so every
 * primitive that does float arithmetic holds the traps around it: every
 * exception masked and the flags cleared, then the caller's state back
 * (flags raised inside discarded).  On x86-64 the C code does its float
 * arithmetic in SSE/AVX registers (no long double, and libm's float and
 * double functions are SSE code there), so only MXCSR is saved and set: two
 * instructions, where feholdexcept and fesetenv also save and reload the
 * x87 environment (a few percent of a one-token encode's primitives). */
#if defined(__x86_64__)
#include <xmmintrin.h>
#define RL_FP_HOLD()                               \
    const unsigned rl_mxcsr_ = _mm_getcsr();       \
    _mm_setcsr((rl_mxcsr_ | 0x1f80u) & ~0x3fu)
#define RL_FP_RELEASE() _mm_setcsr(rl_mxcsr_)
#else
#define RL_FP_HOLD()      \
    fenv_t rl_fenv_;      \
    feholdexcept(&rl_fenv_)
#define RL_FP_RELEASE() fesetenv(&rl_fenv_)
#endif

/* Run the statements (a kernel call setting a status, then any unpinning
 * and freeing) as every primitive that runs a kernel does: interrupts off
 * and the float traps held, both restored before an interrupt that arrived
 * meanwhile is handled (its handler may unwind, and must find the traps and
 * the pins as they were).  Variadic, so a braced block with commas passes
 * whole. */
#define RL_RUN_KERNEL(env, ...)                \
    do {                                       \
        RL_FP_HOLD();                          \
        ecl_disable_interrupts_env(env);       \
        __VA_ARGS__;                           \
        RL_FP_RELEASE();                       \
        ecl_enable_interrupts_env(env);        \
    } while (0)

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

/* Symbols that error reports name, made once by rl_glue_init (an error
 * must never intern: interning a primitive's name into a locked package
 * turned a type error into a package error). */
typedef enum {
    RL_T_ARRAY, RL_T_VECTOR, RL_T_LIST, RL_T_STRING, RL_T_INTEGER, RL_T_FIXNUM,
    RL_T_FLOAT, RL_T_SINGLE_FLOAT, RL_T_DOUBLE_FLOAT, RL_T_FOREIGN_DATA,
    RL_T_QM_OR_ARRAY, /* (or array quantized-matrix) */
    RL_T_COUNT
} rl_type_id;

/* rontolisp's condition classes that C signals (lisp/conditions.lisp). */
typedef enum {
    RL_C_ERROR,       /* rontolisp:rontolisp-error */
    RL_C_INDEX,       /* rontolisp:index-error */
    RL_C_SHAPE,       /* rontolisp:shape-error */
    RL_C_FILE_CLOSED, /* gguf:file-closed-error */
    RL_C_COUNT
} rl_condition_id;

/* Make the symbols above; call once before any table is registered. */
void rl_glue_init(void);

/* Define the primitives of TABLE and remember their symbols for error
 * reports.  Signals if the package does not exist. */
void rl_glue_define(const rl_prim_table *table);

/* The symbol of primitive FN (a name rl_glue_define defined, or AREF /
 * ROW-MAJOR-AREF, the CL functions the quantized matrix answers for);
 * looked up, never interned.  Aborts on an unknown name: that is a bug in
 * the glue, found by the test that calls every primitive wrongly. */
cl_object rl_fn_symbol(const char *fn);

/* A type error for argument POS (1-based) of primitive FN: X is not TYPE. */
void rl_type_error(const char *fn, int pos, cl_object x, rl_type_id type)
    __attribute__((noreturn));

/* Signal condition CLS with a formatted one-line :MESSAGE.  Never returns;
 * call it only when nothing malloc'd is live. */
void rl_signal(rl_condition_id cls, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* Checked argument accessors: the Lisp wrappers pass the right types, but a
 * direct call must not crash. */
float rl_arg_sf(const char *fn, int pos, cl_object x);
double rl_arg_df(const char *fn, int pos, cl_object x);
cl_fixnum rl_arg_fixnum(const char *fn, int pos, cl_object x, cl_fixnum lo, cl_fixnum hi);

/* A simple (not displaced, no fill pointer, not adjustable) vector or array
 * with element type AET: its data and total size, or NULL. */
void *rl_simple_data(cl_object x, cl_elttype aet, cl_index *n);

/* True for a vector of 64-bit integers that is not displaced (a fill
 * pointer and adjustability allowed): element type FIXNUM as ECL stores it
 * (EXT:CL-FIXNUM) or as (make-array n :element-type 'fixnum) makes it
 * (EXT:INTEGER64); read through self.fix either way. */
int rl_fixnum_vector_p(cl_object x);

/* The bytes of a simple (unsigned-byte 8) vector, argument POS of FN. */
const uint8_t *rl_octets(const char *fn, int pos, cl_object v, cl_index *n);

/* A path given as UTF-8 octets (argument 1 of FN), NUL-terminated into BUF. */
const char *rl_path_arg(const char *fn, cl_object octets, char *buf, size_t bufsz);

/* A simple rank-2 single-float array, argument POS of FN: its data (NULL
 * only when it is empty) and dimensions. */
float *rl_sf_matrix(const char *fn, int pos, cl_object a, size_t *rows, size_t *cols);

/* Signal SHAPE-ERROR with the slots EXPECTED and FOUND and a formatted
 * one-line message.  Never returns. */
void rl_signal_shape(cl_object expected, cl_object found, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/* The list (R C), a shape error's dimensions. */
cl_object rl_dims2(size_t r, size_t c);

/* Signal SHAPE-ERROR unless WHAT (an argument of FN) is er x ec: r x c is
 * what was found (the slots: the two lists of dimensions). */
void rl_same_dims(const char *fn, const char *what, size_t r, size_t c, size_t er, size_t ec);

/* Signal RONTOLISP-ERROR when OUT, the result argument of FN, is the input
 * WHAT itself (a kernel that reads IN while writing OUT).  Call it only
 * for a non-empty result: an empty one may be any array. */
void rl_out_not_input(const char *fn, cl_object out, cl_object in, const char *what);

/* The keyword named by NAME upper-cased (C status names are lower case;
 * ecl_make_keyword would keep the case and make :|truncated|). */
cl_object rl_keyword(const char *name);

/* (values nil status-keyword message offset): how a file primitive answers
 * a bad file, STATUS a C status name (rl_gguf_status_name, ...); the Lisp
 * side signals with the path. */
cl_object rl_status_values(const char *status, const char *msg, uint64_t off);

/* A Lisp string from UTF-8 bytes: a base string when they are ASCII, else an
 * extended one, each byte that is not valid UTF-8 kept as U+DC80..U+DCFF
 * (prims/utf8.h), so %UTF8-OCTETS gives the same bytes back. */
cl_object rl_string_from_utf8(const char *p, uint64_t n);

/* The inverse: the length of the Lisp string STR in UTF-8 bytes, and those
 * bytes written to OUT (that long): U+DC80..U+DCFF become the single bytes
 * 80..FF they stand for, other surrogates and characters above U+10FFFF
 * U+FFFD (prims/utf8.h).  STR must be a string. */
size_t rl_string_utf8_length(cl_object str);
void rl_string_to_utf8(cl_object str, uint8_t *out);

/* The file stream that STREAM (an output stream, through synonym and
 * two-way streams) writes to when it encodes UTF-8, else NIL. */
cl_object rl_utf8_file_stream(cl_object stream);

/* Write the N bytes of UTF-8 at P to the character stream STREAM as the
 * characters they encode: to a UTF-8 file stream as they are, in one
 * write of its bytes (not an encoder call per character); to any other
 * stream as the string rl_string_from_utf8 makes. */
void rl_write_utf8(cl_object stream, const char *p, size_t n);

/* ---- foreign handles ---------------------------------------------------
 * A C object owned by Lisp (a mapped GGUF or safetensors file, a GGUF
 * writer, a tokenizer) is a foreign-data object tagged with its kind.  Its pointer
 * becomes NULL when released -- explicitly (gguf:close) or by the
 * finalizer, the safety net -- so a later use signals, never reads freed
 * memory. */
typedef enum {
    RL_H_GGUF_FILE, RL_H_GGUF_WRITER, RL_H_SAFETENSORS, RL_H_TOKENIZER, RL_H_COUNT
} rl_handle_kind;

int rl_handle_p(cl_object h, rl_handle_kind kind);

/* A new handle of KIND for P, released by the collector if nobody releases
 * it first. */
cl_object rl_make_handle(rl_handle_kind kind, void *p);

/* Free what H points to (any kind); idempotent. */
void rl_release(cl_object h);

/* The live pointer of handle H (argument 1 of FN) of KIND; a wrong argument
 * is a type error, a released one signals CLS saying WHAT was closed. */
void *rl_handle(const char *fn, cl_object h, rl_handle_kind kind, rl_condition_id cls,
                const char *what);

/* ---- pinned mappings ----------------------------------------------------
 * A GGUF file's handle (kind RL_H_GGUF_FILE) is also the base of its
 * quantized matrices, and any Lisp thread may run a kernel on those bytes
 * while another calls gguf:close; a safetensors file's handle
 * (RL_H_SAFETENSORS) follows the same rules.  So nothing reads the mapping without a
 * pin: a use count that close cannot take from under a reader.  Close
 * marks the mapping closed (later pins fail, the caller signals
 * gguf:file-closed-error) and the unmap happens when the last pin goes:
 * close never waits, and no kernel ever runs on freed memory.  Pins are
 * held only around C code, never across a call that may signal, unless
 * RL_WHILE_PINNED (below) lets the pin go as the stack unwinds. */

/* A handle of KIND for the mapped OWNER whose bytes are BYTES (SIZE of
 * them); FREE_OWNER(OWNER) runs when it is closed and no pin remains. */
cl_object rl_make_mapped_handle(rl_handle_kind kind, void *owner, const uint8_t *bytes,
                                uint64_t size, void (*free_owner)(void *));

/* True when H is a mapped handle (open or closed). */
int rl_mapped_p(cl_object h);

/* Pin H's mapping: its owner, with its bytes and size through BYTES and
 * SIZE (either may be NULL); NULL when H was closed (nothing is pinned
 * then).  Each successful pin needs one rl_unpin. */
void *rl_pin(cl_object h, const uint8_t **bytes, uint64_t *size);
void rl_unpin(cl_object h);

/* The owner behind H, argument 1 of FN, pinned: H must be an open mapped
 * handle of KIND (rl_handle's checks), and one that another thread closed
 * meanwhile signals CLS saying the WHAT was closed. */
void *rl_pin_handle(const char *fn, cl_object h, rl_handle_kind kind, rl_condition_id cls,
                    const char *what);

/* Keep the Lisp object X reachable up to this point: a primitive that
 * took a plain pointer out of a handle (a tokenizer, say) puts this after
 * its last use of that pointer, so that the collector, run by another
 * thread meanwhile, cannot find the handle dead (the caller may hold no
 * other reference) and let its finalizer free what the C code still reads. */
#define RL_KEEP_LIVE(x) __asm__ volatile("" : : "g"(x) : "memory")

/* A block that builds Lisp objects (which may signal: the heap may be
 * exhausted) with H pinned, letting the pin go however it ends:
 *     RL_WHILE_PINNED(env) { ... } RL_UNPIN_AFTER(h);
 * (ECL's frame variable draws -Wclobbered, which a file using these
 * silences: nothing of ours lives across its setjmp.) */
#define RL_WHILE_PINNED(env) ECL_UNWIND_PROTECT_BEGIN(env)
#define RL_UNPIN_AFTER(h) ECL_UNWIND_PROTECT_EXIT { rl_unpin(h); } ECL_UNWIND_PROTECT_END

/* A pin held on H as a plain pointer, for a caller that keeps the pin
 * where the collector does not look (a writer that reads lent bytes when
 * it writes, long after): release it with rl_unpin_token, which stays valid
 * even if H itself is collected meanwhile. */
void *rl_pinned_token(cl_object h);
void rl_unpin_token(void *token);

extern const rl_prim_table rl_glue_prims;

#endif
