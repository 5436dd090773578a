/* safetensors.h - a hardened zero-copy reader of Hugging Face's safetensors
 * files (the weights of a Laya model directory), for the converter.
 *
 * THE FILE
 *   offset  size  field
 *   0       8     u64 little-endian N: the length of the header
 *   8       N     the header: a UTF-8 JSON object.  Each key but
 *                 "__metadata__" names a tensor:
 *                   {"dtype": "F32", "shape": [rows, cols],
 *                    "data_offsets": [begin, end]}
 *                 with offsets relative to the end of the header (byte
 *                 8 + N).  "__metadata__" maps strings to strings.
 *   8+N     ...   the tensor data, row-major, little-endian.
 *
 * Every field is checked before use: N (at most RL_ST_MAX_HEADER and inside
 * the file), the JSON (parsed by libjansson, duplicate keys refused), each
 * entry's dtype (F32, F16 and BF16 are taken; other known dtypes are
 * refused by name), its shape (at most RL_ST_MAX_DIMS non-negative
 * dimensions whose element count and byte size do not overflow), its
 * offsets (begin <= end, end inside the file, end - begin equal to the
 * shape's byte size), and that no two tensors share a byte.  A bad file
 * gives a status, a one-line message and the byte offset at fault (inside
 * the header for a bad entry: the header's start), never a crash.
 *
 * Tensor data are pointers into the mapping, not copies; they are not
 * aligned (safetensors does not align them): memcpy them.
 *
 * Plain C (libjansson for the JSON), no ECL.
 */
#ifndef RL_GGUF_SAFETENSORS_H
#define RL_GGUF_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define RL_ST_MAX_HEADER (100u << 20) /* as the safetensors crate */
#define RL_ST_MAX_DIMS 8
#define RL_ST_MAX_TENSORS (1u << 20)
#define RL_ST_MSG_SIZE 512

typedef enum rl_st_status {
    RL_ST_OK = 0,
    RL_ST_E_IO,            /* open/stat/mmap failed */
    RL_ST_E_NOMEM,
    RL_ST_E_ARG,
    RL_ST_E_TRUNCATED,     /* shorter than the 8-byte length */
    RL_ST_E_HEADER_LENGTH, /* N above the cap or past the end of the file */
    RL_ST_E_JSON,          /* the header is not JSON (or has duplicate keys) */
    RL_ST_E_HEADER,        /* not an object, or an entry of the wrong form */
    RL_ST_E_DTYPE,         /* a dtype this reader does not take */
    RL_ST_E_SHAPE,         /* rank, negative or overflowing dimensions */
    RL_ST_E_OFFSETS,       /* begin > end, or past the end of the file */
    RL_ST_E_SIZE,          /* end - begin differs from the shape's size */
    RL_ST_E_OVERLAP,       /* two tensors share bytes */
    RL_ST_E_METADATA,      /* __metadata__ not an object of strings */
    RL_ST_STATUS_COUNT
} rl_st_status;

/* "ok", "io-error", "truncated", "header-length", ... (static strings). */
const char *rl_st_status_name(rl_st_status st);

typedef enum rl_st_dtype { RL_ST_F32 = 0, RL_ST_F16 = 1, RL_ST_BF16 = 2 } rl_st_dtype;

/* "F32", "F16", "BF16"; NULL for others. */
const char *rl_st_dtype_name(uint32_t dtype);
/* 4, 2, 2; 0 for others. */
uint32_t rl_st_dtype_size(uint32_t dtype);

typedef struct rl_st_tensor {
    const char *name;  /* NUL-terminated UTF-8, owned by the file */
    uint32_t dtype;    /* rl_st_dtype */
    uint32_t n_dims;   /* 0..RL_ST_MAX_DIMS (0: a scalar) */
    int64_t shape[RL_ST_MAX_DIMS]; /* row-major, outermost first */
    uint64_t begin;    /* absolute file offset of the data */
    uint64_t nbytes;
} rl_st_tensor;

typedef struct rl_st_file rl_st_file;

/* Open PATH read-only, map it and check it.  On failure *out is NULL and
 * msg (msgsz bytes, may be NULL when 0) and *err_off (may be NULL) say why.
 * Messages start "at byte N: " and never contain the path. */
rl_st_status rl_st_open(const char *path, rl_st_file **out, char *msg, size_t msgsz,
                        uint64_t *err_off);
/* The same over SIZE bytes at BUF, which must outlive the file object. */
rl_st_status rl_st_parse(const void *buf, uint64_t size, rl_st_file **out, char *msg,
                         size_t msgsz, uint64_t *err_off);
/* Free (and unmap); accepts NULL. */
void rl_st_close(rl_st_file *f);

/* Tensors in header order; i out of range answers NULL. */
uint64_t rl_st_tensor_count(const rl_st_file *f);
const rl_st_tensor *rl_st_tensor_at(const rl_st_file *f, uint64_t i);
const void *rl_st_tensor_data(const rl_st_file *f, uint64_t i);
/* __metadata__ entries in header order; i out of range answers NULL. */
uint64_t rl_st_metadata_count(const rl_st_file *f);
const char *rl_st_metadata_key(const rl_st_file *f, uint64_t i);
const char *rl_st_metadata_value(const rl_st_file *f, uint64_t i);
uint64_t rl_st_file_size(const rl_st_file *f);

#endif
