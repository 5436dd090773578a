/* gguf.h - the GGUF container: a hardened zero-copy reader (versions 2 and
 * 3), a version-3 writer, and ggml's tensor type table.
 *
 * The reader maps a file read-only (or takes a caller's buffer) and checks
 * every count, length, offset, dimension and type before it is used; a bad
 * file gives a status, a one-line message and the byte offset of the field
 * that is wrong, never a crash and never a partly built result.  Nothing is
 * copied: keys, strings, arrays and tensor data are pointers into the
 * mapping.  The writer lays a file out as llama.cpp does and replaces the
 * target atomically (temporary file + rename).
 *
 * Plain C, no ECL: the Lisp glue (prims/) and the C tests both use it.
 *
 * THE FILE, BYTE BY BYTE (all integers little-endian, no implicit padding)
 *
 *   offset  size  field
 *   0       4     magic: the bytes 'G' 'G' 'U' 'F' (0x47 0x47 0x55 0x46)
 *   4       4     u32 version: 2 or 3 (1 used 32-bit counts; unsupported).
 *                 A version like 0x03000000 is a byte-swapped (big-endian) file.
 *   8       8     u64 tensor_count
 *   16      8     u64 kv_count
 *   24      ...   kv_count metadata pairs, each:
 *                   string key       (u64 length, then that many bytes, no NUL)
 *                   u32    value_type (table below)
 *                   value
 *   ...     ...   tensor_count tensor infos, each:
 *                   string name      (1..63 bytes: ggml's GGML_MAX_NAME - 1)
 *                   u32    n_dims    (1..4)
 *                   i64    ne[n_dims] ggml order: ne[0] is the row length
 *                   u32    ggml type id (rl_gguf_ggml_* below)
 *                   u64    offset of the data, relative to the data section,
 *                          a multiple of the alignment
 *   ...     ...   zero padding up to a multiple of the alignment: the start of
 *                 the data section ("data offset").  Only when tensor_count >
 *                 0: a file with no tensors may end right after the infos.
 *   ...     ...   tensor data; every tensor is followed by zero padding to a
 *                 multiple of the alignment (llama.cpp pads the last one too).
 *
 *   The alignment is the u32 value of the key "general.alignment", 32 when
 *   the key is absent; it must be a power of two.
 *
 *   Values, by value_type:
 *     0 u8   1 i8   2 u16   3 i16   4 u32   5 i32   6 f32   7 bool (1 byte,
 *     0 or 1)   8 string (u64 length + bytes)   9 array   10 u64   11 i64
 *     12 f64.
 *   An array is: u32 element type, u64 count, then count elements written
 *   without a type tag.  An element of an array of arrays is itself "u32
 *   element type, u64 count, elements" (no tag 9 in front), to any depth.
 *
 * DECISIONS
 * - Nested arrays are read (to RL_GGUF_MAX_ARRAY_DEPTH levels) and written.
 *   llama.cpp's own reader refuses them, gguf-py reads and writes them.
 * - Dimensions of 0 are accepted, as ggml does: the tensor has 0 elements and
 *   0 bytes, its offset must still be aligned and inside the file, and it
 *   overlaps nothing.  Negative dimensions, n_dims 0 and n_dims > 4 are
 *   refused.
 * - Tensor offsets must be aligned, inside the file and must not overlap;
 *   unlike llama.cpp they need not be in file order nor packed (gaps are
 *   allowed).  Padding bytes are not inspected.
 * - Booleans must be 0 or 1 (the GGUF spec calls anything else invalid).
 * - Keys may hold any bytes except that they must not be empty; duplicates
 *   (byte-wise equal) are refused, as are duplicate tensor names.
 * - rl_gguf_data_offset() is the end of the tensor infos padded to the
 *   alignment, for every file (as gguf-py reports it).  For a file with no
 *   tensors that may lie past the end of the file; that is valid.
 * - Memory: the reader allocates index tables linear in the file size (at
 *   most a few times it, and never more than the caps below allow); the
 *   tensor data and strings are never copied.
 *
 * THREADS: a parsed file is immutable; any number of threads may read it.
 * rl_gguf_retain / rl_gguf_close use an atomic reference count.
 *
 * A mapped file that another process truncates while it is mapped makes
 * later accesses fault (SIGBUS); that cannot be checked in advance.  An
 * opened file keeps its descriptor (rl_gguf_fd): pread through it meets a
 * truncation as a short read instead.
 */
#ifndef RL_GGUF_GGUF_H
#define RL_GGUF_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/blocks.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "tensor data are handed out in place: little-endian hosts only");
_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE float sizes");

#define RL_GGUF_MAGIC "GGUF"
#define RL_GGUF_VERSION 3             /* what the writer writes */
#define RL_GGUF_DEFAULT_ALIGNMENT 32
#define RL_GGUF_HEADER_SIZE 24        /* magic + version + the two counts */
#define RL_GGUF_MAX_DIMS 4

/* Caps on hostile counts and lengths.  A count is also refused when its
 * smallest possible encoding would not fit in the rest of the file. */
#define RL_GGUF_MAX_KV_COUNT (1u << 20)
#define RL_GGUF_MAX_TENSOR_COUNT (1u << 20)
#define RL_GGUF_MAX_KEY_LENGTH 65535u         /* the GGUF spec's limit */
#define RL_GGUF_MAX_STRING_LENGTH (1ull << 30) /* as ggml */
#define RL_GGUF_MAX_ARRAY_LENGTH (1ull << 30)  /* as ggml */
#define RL_GGUF_MAX_ARRAY_DEPTH 8    /* arrays of arrays: levels of nesting */
#define RL_GGUF_MAX_NAME_LENGTH 63   /* tensor names: ggml's GGML_MAX_NAME-1 */

/* ------------------------------------------------------------------ status */

/* Every failure has its own status.  rl_gguf_status_name() gives a short
 * lowercase name ("truncated", "misaligned-tensor", ...) that the Lisp side
 * can turn into a keyword. */
typedef enum rl_gguf_status {
    RL_GGUF_OK = 0,
    /* the environment or the caller */
    RL_GGUF_E_IO,             /* open/stat/mmap/write/rename failed */
    RL_GGUF_E_NOMEM,          /* malloc failed */
    RL_GGUF_E_ARG,            /* NULL argument, index out of range, bad value */
    RL_GGUF_E_TYPE,           /* getter used on a value of another type */
    RL_GGUF_E_STATE,          /* writer calls out of order */
    /* the file */
    RL_GGUF_E_TRUNCATED,      /* the file ends inside a fixed-size field */
    RL_GGUF_E_MAGIC,          /* not "GGUF" */
    RL_GGUF_E_VERSION,        /* not 2 or 3 (message says "big-endian?") */
    RL_GGUF_E_KV_COUNT,       /* above the cap or cannot fit in the file */
    RL_GGUF_E_TENSOR_COUNT,   /* above the cap or cannot fit in the file */
    RL_GGUF_E_KEY_LENGTH,     /* key length above the cap or past EOF */
    RL_GGUF_E_KEY_EMPTY,
    RL_GGUF_E_KEY_DUPLICATE,
    RL_GGUF_E_VALUE_TYPE,     /* unknown value type (or array element type) */
    RL_GGUF_E_STRING_LENGTH,  /* string length above the cap or past EOF */
    RL_GGUF_E_ARRAY_LENGTH,   /* array count above the cap or past EOF */
    RL_GGUF_E_ARRAY_DEPTH,    /* arrays nested deeper than the cap */
    RL_GGUF_E_BOOL,           /* a bool byte other than 0 or 1 */
    RL_GGUF_E_ALIGNMENT_TYPE, /* general.alignment is not a u32 */
    RL_GGUF_E_ALIGNMENT,      /* general.alignment is 0 or not a power of 2 */
    RL_GGUF_E_TENSOR_NAME_EMPTY,
    RL_GGUF_E_TENSOR_NAME_LENGTH,    /* longer than 63 bytes */
    RL_GGUF_E_TENSOR_NAME_DUPLICATE,
    RL_GGUF_E_N_DIMS,         /* n_dims 0 or > 4 */
    RL_GGUF_E_DIM_NEGATIVE,
    RL_GGUF_E_DIM_OVERFLOW,   /* element count above INT64_MAX */
    RL_GGUF_E_GGML_TYPE,      /* unknown ggml type id */
    RL_GGUF_E_GGML_TYPE_REMOVED, /* an id ggml retired (Q4_2, Q4_0_4_4, ...) */
    RL_GGUF_E_BLOCK_SIZE,     /* ne[0] not a multiple of the type's block */
    RL_GGUF_E_SIZE_OVERFLOW,  /* byte size above INT64_MAX */
    RL_GGUF_E_TENSOR_ALIGNMENT, /* offset not a multiple of the alignment */
    RL_GGUF_E_TENSOR_BOUNDS,  /* data (or the data section) past EOF */
    RL_GGUF_E_TENSOR_OVERLAP, /* two tensors share bytes */
    RL_GGUF_E_NAME_NUL,       /* a key or tensor name holds a NUL byte */
    RL_GGUF_STATUS_COUNT
} rl_gguf_status;

/* A static string; "unknown-status" for values out of range. */
const char *rl_gguf_status_name(rl_gguf_status st);

/* Messages.  Functions that take (char *msg, size_t msgsz, uint64_t *err_off)
 * write a one-line NUL-terminated message into msg on failure (truncated to
 * msgsz; msg may be NULL when msgsz is 0) and the byte offset of the field at
 * fault into *err_off (may be NULL).  Messages start "at byte N: " and say
 * what was expected and what was found; names from the file are quoted with
 * control and non-ASCII bytes escaped.  They never contain the path (the
 * caller knows it).  On success msg and *err_off are left alone. */
#define RL_GGUF_MSG_SIZE 512 /* enough for every message this library writes */

/* ------------------------------------------------------- metadata values */

typedef enum rl_gguf_type {
    RL_GGUF_TYPE_U8 = 0,
    RL_GGUF_TYPE_I8 = 1,
    RL_GGUF_TYPE_U16 = 2,
    RL_GGUF_TYPE_I16 = 3,
    RL_GGUF_TYPE_U32 = 4,
    RL_GGUF_TYPE_I32 = 5,
    RL_GGUF_TYPE_F32 = 6,
    RL_GGUF_TYPE_BOOL = 7,
    RL_GGUF_TYPE_STRING = 8,
    RL_GGUF_TYPE_ARRAY = 9,
    RL_GGUF_TYPE_U64 = 10,
    RL_GGUF_TYPE_I64 = 11,
    RL_GGUF_TYPE_F64 = 12,
    RL_GGUF_TYPE_COUNT = 13
} rl_gguf_type;

/* "u8" "i8" "u16" "i16" "u32" "i32" "f32" "bool" "string" "array" "u64"
 * "i64" "f64" (the names of `inspect --json`); NULL for unknown types. */
const char *rl_gguf_type_name(uint32_t type);
/* Bytes of one scalar of that type; 0 for string, array and unknown. */
uint32_t rl_gguf_type_size(uint32_t type);

/* A metadata value: a small descriptor of bytes inside the file.  Fields are
 * public and read-only; only the functions below make them.
 *   type       RL_GGUF_TYPE_*
 *   elem_type  arrays: the element type; otherwise 0
 *   offset     absolute file offset of the payload: a scalar's bytes, a
 *              string's bytes (after its length), an array's first element
 *              (after its element type and count)
 *   count      string: byte length; array: element count; scalar: 1
 *   index      arrays of strings or arrays: private index-table position */
typedef struct rl_gguf_val {
    uint32_t type;
    uint32_t elem_type;
    uint64_t offset;
    uint64_t count;
    uint64_t index;
} rl_gguf_val;

typedef struct rl_gguf_file rl_gguf_file;

/* Scalar getters.  E_TYPE when the value is of another kind, E_ARG on NULL.
 *   u64:  u8 u16 u32 u64 and bool (0/1)
 *   i64:  i8 i16 i32 i64
 *   f64:  f32 (widened exactly) and f64
 *   bool: bool */
rl_gguf_status rl_gguf_val_u64(const rl_gguf_file *f, const rl_gguf_val *v, uint64_t *out);
rl_gguf_status rl_gguf_val_i64(const rl_gguf_file *f, const rl_gguf_val *v, int64_t *out);
rl_gguf_status rl_gguf_val_f64(const rl_gguf_file *f, const rl_gguf_val *v, double *out);
rl_gguf_status rl_gguf_val_bool(const rl_gguf_file *f, const rl_gguf_val *v, int *out);
/* A string's bytes (not NUL-terminated; may contain NUL) and length. */
rl_gguf_status rl_gguf_val_str(const rl_gguf_file *f, const rl_gguf_val *v,
                               const char **ptr, uint64_t *len);
/* Element j of an array (any element type, nested arrays included), O(1).
 * E_TYPE if v is not an array, E_ARG if j >= v->count. */
rl_gguf_status rl_gguf_array_get(const rl_gguf_file *f, const rl_gguf_val *v,
                                 uint64_t j, rl_gguf_val *out);
/* The raw little-endian elements of an array of fixed-size scalars
 * (count * rl_gguf_type_size(elem_type) bytes; not aligned: memcpy them).
 * E_TYPE for arrays of strings or arrays and for non-arrays. */
rl_gguf_status rl_gguf_array_data(const rl_gguf_file *f, const rl_gguf_val *v,
                                  const void **ptr);

/* The bytes that encode V, without a key's type tag: [*start, *end).  For
 * a string that includes its length field, for an array its element type
 * and count.  (What rl_gguf_w_copy copies.) */
rl_gguf_status rl_gguf_val_span(const rl_gguf_file *f, const rl_gguf_val *v,
                                uint64_t *start, uint64_t *end);

/* ------------------------------------------------------------- the reader */

/* Open PATH read-only, map it and check it.  On success *out is a file
 * holding one reference.  On failure *out is NULL and msg/err_off are set. */
rl_gguf_status rl_gguf_open(const char *path, rl_gguf_file **out, char *msg,
                            size_t msgsz, uint64_t *err_off);
/* The same over SIZE bytes at BUF, which are not copied: they must stay
 * valid and unchanged until the last rl_gguf_close. */
rl_gguf_status rl_gguf_parse(const void *buf, uint64_t size, rl_gguf_file **out,
                             char *msg, size_t msgsz, uint64_t *err_off);
/* Reference counting: retain adds one (returns f); close drops one and frees
 * (and unmaps) at zero.  Both accept NULL. */
rl_gguf_file *rl_gguf_retain(rl_gguf_file *f);
void rl_gguf_close(rl_gguf_file *f);

/* File facts.  All accept only a parsed file (not NULL). */
uint32_t rl_gguf_version(const rl_gguf_file *f);
uint32_t rl_gguf_alignment(const rl_gguf_file *f);
uint64_t rl_gguf_file_size(const rl_gguf_file *f);
uint64_t rl_gguf_header_end(const rl_gguf_file *f);  /* end of tensor infos */
uint64_t rl_gguf_data_offset(const rl_gguf_file *f); /* header_end padded */
const uint8_t *rl_gguf_bytes(const rl_gguf_file *f); /* the whole file */
/* A read-only descriptor of the file rl_gguf_open mapped (the same file
 * even if its path now names another), owned by F: for pread, never to be
 * closed; -1 for a file rl_gguf_parse read from a buffer. */
int rl_gguf_fd(const rl_gguf_file *f);

/* Metadata, in file order.  i out of range: key NULL, type -1, E_ARG. */
uint64_t rl_gguf_kv_count(const rl_gguf_file *f);
const char *rl_gguf_kv_key(const rl_gguf_file *f, uint64_t i, uint64_t *len);
int rl_gguf_kv_type(const rl_gguf_file *f, uint64_t i);
rl_gguf_status rl_gguf_kv_value(const rl_gguf_file *f, uint64_t i, rl_gguf_val *out);
/* Index of the key with exactly these bytes, or -1.  O(log n). */
int64_t rl_gguf_find_key(const rl_gguf_file *f, const char *key, uint64_t len);

/* Tensors, in file order.  For i out of range: name NULL, 0 elsewhere,
 * ne -1, data NULL. */
uint64_t rl_gguf_tensor_count(const rl_gguf_file *f);
const char *rl_gguf_tensor_name(const rl_gguf_file *f, uint64_t i, uint64_t *len);
uint32_t rl_gguf_tensor_n_dims(const rl_gguf_file *f, uint64_t i); /* as written */
/* ne[d] in ggml order; 1 for n_dims <= d < 4; -1 for d >= 4. */
int64_t rl_gguf_tensor_ne(const rl_gguf_file *f, uint64_t i, uint32_t d);
uint32_t rl_gguf_tensor_type(const rl_gguf_file *f, uint64_t i);
uint64_t rl_gguf_tensor_offset(const rl_gguf_file *f, uint64_t i); /* in data section */
uint64_t rl_gguf_tensor_nbytes(const rl_gguf_file *f, uint64_t i);
uint64_t rl_gguf_tensor_nelements(const rl_gguf_file *f, uint64_t i);
/* Pointer to the tensor's bytes inside the mapping, valid while the file is
 * open.  Aligned to the file's alignment relative to the start of the file
 * (a mapping starts on a page), so F32 data are 4-byte aligned whenever the
 * alignment is at least 4 -- but a caller's buffer may not be: use memcpy. */
const void *rl_gguf_tensor_data(const rl_gguf_file *f, uint64_t i);
/* Index of the tensor with exactly this name, or -1.  O(log n). */
int64_t rl_gguf_find_tensor(const rl_gguf_file *f, const char *name, uint64_t len);

/* --------------------------------------------------------- ggml type table */

/* ggml type ids (ggml.h enum ggml_type).  Gaps are ids ggml retired. */
enum {
    RL_GGUF_GGML_F32 = 0,
    RL_GGUF_GGML_F16 = 1,
    RL_GGUF_GGML_Q4_0 = 2,
    RL_GGUF_GGML_Q4_1 = 3,
    /* 4 Q4_2 and 5 Q4_3: removed */
    RL_GGUF_GGML_Q5_0 = 6,
    RL_GGUF_GGML_Q5_1 = 7,
    RL_GGUF_GGML_Q8_0 = 8,
    RL_GGUF_GGML_Q8_1 = 9,
    RL_GGUF_GGML_Q2_K = 10,
    RL_GGUF_GGML_Q3_K = 11,
    RL_GGUF_GGML_Q4_K = 12,
    RL_GGUF_GGML_Q5_K = 13,
    RL_GGUF_GGML_Q6_K = 14,
    RL_GGUF_GGML_Q8_K = 15,
    RL_GGUF_GGML_IQ2_XXS = 16,
    RL_GGUF_GGML_IQ2_XS = 17,
    RL_GGUF_GGML_IQ3_XXS = 18,
    RL_GGUF_GGML_IQ1_S = 19,
    RL_GGUF_GGML_IQ4_NL = 20,
    RL_GGUF_GGML_IQ3_S = 21,
    RL_GGUF_GGML_IQ2_S = 22,
    RL_GGUF_GGML_IQ4_XS = 23,
    RL_GGUF_GGML_I8 = 24,
    RL_GGUF_GGML_I16 = 25,
    RL_GGUF_GGML_I32 = 26,
    RL_GGUF_GGML_I64 = 27,
    RL_GGUF_GGML_F64 = 28,
    RL_GGUF_GGML_IQ1_M = 29,
    RL_GGUF_GGML_BF16 = 30,
    /* 31..33 Q4_0_4_4, Q4_0_4_8, Q4_0_8_8: removed from GGUF files */
    RL_GGUF_GGML_TQ1_0 = 34,
    RL_GGUF_GGML_TQ2_0 = 35,
    /* 36..38 IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8: removed */
    RL_GGUF_GGML_MXFP4 = 39,
    RL_GGUF_GGML_NVFP4 = 40,
    RL_GGUF_GGML_Q1_0 = 41,
    RL_GGUF_GGML_Q2_0 = 42,
    RL_GGUF_GGML_TYPE_COUNT = 43
};

/* Q8_0's geometry (its block struct and every other type's are in
 * gguf/blocks.h, the one header of block structs). */
#define RL_GGUF_Q8_0_BYTES ((int)sizeof(rl_gguf_block_q8_0))

/* The one scalar Q8_0 dequantizer: nblocks blocks at x (any alignment: it
 * reads bytes) into 32 * nblocks floats at y.  q * d is exact in f32 (8
 * bits times 11), so faster versions cannot differ from it. */
void rl_gguf_q8_0_to_f32(const void *x, uint64_t nblocks, float *y);

/* Upper-case name as gguf-py spells it ("F32", "Q8_0", "Q4_K", "IQ2_XXS");
 * removed ids answer their old name ("Q4_2"); NULL for ids never used. */
const char *rl_gguf_ggml_type_name(uint32_t id);
/* 1 if the id is a usable type (known and not removed). */
int rl_gguf_ggml_type_known(uint32_t id);
/* 1 if the id is one ggml retired. */
int rl_gguf_ggml_type_removed(uint32_t id);
/* Elements per block and bytes per block; 0 for unusable ids. */
uint32_t rl_gguf_ggml_block_size(uint32_t id);
uint32_t rl_gguf_ggml_block_bytes(uint32_t id);
/* Bytes of a tensor of that type and shape, with every check the reader
 * makes (n_dims 1..4, dims >= 0, element count and byte size <= INT64_MAX,
 * ne[0] a multiple of the block).  On failure msg says why (no offset: the
 * message starts with the problem). */
rl_gguf_status rl_gguf_tensor_bytes(uint32_t id, uint32_t n_dims, const int64_t *ne,
                                    uint64_t *bytes, char *msg, size_t msgsz);
/* The same checks (the one set the reader and the writer share), and on a
 * bad dimension (E_DIM_NEGATIVE, E_DIM_OVERFLOW) *bad_dim (may be NULL)
 * says which, so the reader can name its byte offset. */
rl_gguf_status rl_gguf_tensor_check(uint32_t id, uint32_t n_dims, const int64_t *ne,
                                    uint64_t *bytes, uint32_t *bad_dim, char *msg,
                                    size_t msgsz);

/* Rows to and from f32.  to_f32: F32, F16, BF16, Q8_0 (n a multiple of 32);
 * from_f32: F32, F16, BF16 (round to nearest even, see numfmt.h).  SRC/DST
 * may be unaligned.  E_TYPE for other types, E_BLOCK_SIZE for a bad n. */
rl_gguf_status rl_gguf_row_to_f32(uint32_t id, const void *src, float *dst, uint64_t n);
rl_gguf_status rl_gguf_row_from_f32(uint32_t id, const float *src, void *dst, uint64_t n);

/* ------------------------------------------------------------- the writer */

/* The writer collects metadata (copied into its own buffer) and tensor
 * descriptions (data by pointer: the bytes must stay valid until the file is
 * written), then writes a GGUF v3 file in one go.
 *
 * Metadata is a stream of calls: rl_gguf_w_key() opens a pair, the next value
 * closes it.  A value is a scalar (w_uint / w_int / w_float / w_str), a copy
 * of a value read from a file (w_copy), or an array: w_array_begin(elem
 * type), its elements (values of exactly that type; arrays of arrays take
 * w_array_begin/w_array_end pairs as elements), w_array_end().
 *
 * Errors are sticky: the first failure is kept (see rl_gguf_writer_error),
 * every later call returns it, and nothing can be written from that writer.
 *
 * general.alignment: if the caller adds it, it must be a u32 power of two,
 * and it is the alignment the file is laid out with.  Otherwise the writer's
 * alignment (32, or rl_gguf_writer_set_alignment) is used and the key is
 * appended after the caller's keys as a u32 -- unless implicit alignment is
 * on (see below).
 *
 * Layout: header, metadata, tensor infos in the order added; when there is at
 * least one tensor, zero padding to the alignment and then each tensor's data
 * followed by zero padding to the alignment (the last one included), offsets
 * assigned in order.  A file without tensors ends right after the metadata,
 * as llama.cpp's vocab files do.  So a canonical llama.cpp file read and
 * written back (keys copied in order, tensors added in order) comes out byte
 * for byte identical. */
typedef struct rl_gguf_writer rl_gguf_writer;

/* A new empty writer (alignment 32), or NULL when out of memory. */
rl_gguf_writer *rl_gguf_writer_new(void);
/* Accepts NULL. */
void rl_gguf_writer_free(rl_gguf_writer *w);

/* Have rl_gguf_writer_free call FN(ARG) (before it frees anything): a
 * caller that lent W bytes (rl_gguf_w_tensor keeps the pointer until the
 * write) learns when they are no longer read.  RL_GGUF_E_NOMEM, FN not
 * recorded, when memory runs out. */
rl_gguf_status rl_gguf_writer_on_free(rl_gguf_writer *w, void (*fn)(void *), void *arg);
/* The layout alignment when the metadata has no general.alignment (power of
 * two, 1..2^31).  If the key was given, A must equal it. */
rl_gguf_status rl_gguf_writer_set_alignment(rl_gguf_writer *w, uint32_t a);
/* ON = 1: do not append general.alignment when the caller did not give it.
 * Only allowed while the alignment is the default 32 (which every reader
 * assumes for a file without the key), so such a file reads back the same.
 * This is how files made by llama.cpp, which omit the key, round-trip. */
rl_gguf_status rl_gguf_writer_set_implicit_alignment(rl_gguf_writer *w, int on);

rl_gguf_status rl_gguf_w_key(rl_gguf_writer *w, const char *key, uint64_t len);
/* TYPE u8 u16 u32 u64 bool; V must fit (bool: 0 or 1). */
rl_gguf_status rl_gguf_w_uint(rl_gguf_writer *w, uint32_t type, uint64_t v);
/* TYPE i8 i16 i32 i64; V must fit. */
rl_gguf_status rl_gguf_w_int(rl_gguf_writer *w, uint32_t type, int64_t v);
/* TYPE f32 (V rounded by the C cast; an f32 widened to double is exact) or
 * f64. */
rl_gguf_status rl_gguf_w_float(rl_gguf_writer *w, uint32_t type, double v);
rl_gguf_status rl_gguf_w_str(rl_gguf_writer *w, const char *s, uint64_t len);
rl_gguf_status rl_gguf_w_array_begin(rl_gguf_writer *w, uint32_t elem_type);
rl_gguf_status rl_gguf_w_array_end(rl_gguf_writer *w);
/* N elements of the open array's fixed-size element type at once, as raw
 * little-endian bytes (N * type size of them; bools checked 0/1). */
rl_gguf_status rl_gguf_w_array_raw(rl_gguf_writer *w, const void *p, uint64_t n);
/* A value read from F, copied byte for byte (NaN payloads kept). */
rl_gguf_status rl_gguf_w_copy(rl_gguf_writer *w, const rl_gguf_file *f,
                              const rl_gguf_val *v);
/* Key i of F with its value, byte for byte. */
rl_gguf_status rl_gguf_w_copy_kv(rl_gguf_writer *w, const rl_gguf_file *f, uint64_t i);

/* A tensor: NAME (1..63 bytes, unique), N_DIMS 1..4 written as given, NE in
 * ggml order, a usable ggml TYPE, and NBYTES bytes at DATA, which must equal
 * the size the type and shape give (DATA may be NULL when NBYTES is 0). */
rl_gguf_status rl_gguf_w_tensor(rl_gguf_writer *w, const char *name, uint64_t name_len,
                                uint32_t n_dims, const int64_t *ne, uint32_t type,
                                const void *data, uint64_t nbytes);

/* A tensor whose bytes are given later, through the stream below (its size
 * follows from type and shape; checks as rl_gguf_w_tensor). */
rl_gguf_status rl_gguf_w_tensor_deferred(rl_gguf_writer *w, const char *name, uint64_t name_len,
                                         uint32_t n_dims, const int64_t *ne, uint32_t type);

/* Streaming, for files whose tensor data do not all fit in memory at once:
 * the header, metadata and tensor infos are written at stream_begin (types
 * and sizes are known), then each deferred tensor's bytes are appended in
 * file order by stream_put, in as many pieces as the caller likes (the
 * padding after a tensor, and the tensors added with their bytes, are
 * written as the stream reaches them).  stream_end checks that every byte
 * came and commits the file (temporary file flushed and renamed, as
 * rl_gguf_writer_write); stream_abort, or any failure of stream_end,
 * removes the temporary file and leaves PATH untouched.  After a failed
 * stream_put the caller aborts.  rl_gguf_writer_free aborts an open stream.
 * No tensor can be added while a stream is open. */
rl_gguf_status rl_gguf_writer_stream_begin(rl_gguf_writer *w, const char *path, char *msg,
                                           size_t msgsz, uint64_t *err_off);
rl_gguf_status rl_gguf_writer_stream_put(rl_gguf_writer *w, const void *p, uint64_t n,
                                         char *msg, size_t msgsz, uint64_t *err_off);
rl_gguf_status rl_gguf_writer_stream_end(rl_gguf_writer *w, char *msg, size_t msgsz,
                                         uint64_t *err_off);
void rl_gguf_writer_stream_abort(rl_gguf_writer *w);

/* Write the file to PATH: into a new temporary file in the same directory,
 * flushed to disk, then renamed over PATH.  On any failure the temporary
 * file is removed and PATH is untouched.  The writer stays usable (it can be
 * written again).  err_off: for I/O failures, the output offset reached. */
rl_gguf_status rl_gguf_writer_write(rl_gguf_writer *w, const char *path, char *msg,
                                    size_t msgsz, uint64_t *err_off);
/* The same into a fresh malloc'd buffer (*out, *size; free() it), for tests
 * and fuzzing; the whole file is in memory. */
rl_gguf_status rl_gguf_writer_to_memory(rl_gguf_writer *w, uint8_t **out, uint64_t *size,
                                        char *msg, size_t msgsz, uint64_t *err_off);
/* The first error recorded (RL_GGUF_OK if none) with its message and offset
 * (the offset in the output where the offending item would have gone). */
rl_gguf_status rl_gguf_writer_error(const rl_gguf_writer *w, char *msg, size_t msgsz,
                                    uint64_t *err_off);

#endif
