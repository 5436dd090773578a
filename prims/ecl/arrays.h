/* arrays.h - packed arrays shared by the file glue: F32, F16 and BF16
 * tensors live in Lisp as simple single-float or (unsigned-byte 16) arrays. */
#ifndef RL_PRIMS_ECL_ARRAYS_H
#define RL_PRIMS_ECL_ARRAYS_H

#include "prims/ecl/glue.h"

/* The data and byte size of a simple single-float or (unsigned-byte 16)
 * array, or NULL. */
void *rl_tensor_array_data(cl_object a, uint64_t *nbytes);

/* DEST's data when it is a simple single-float (F32_P) or (unsigned-byte
 * 16) array of exactly NBYTES bytes, else NULL; never signals. */
void *rl_tensor_array_dest(cl_object dest, int f32_p, uint64_t nbytes);

/* Copy NBYTES of a file's tensor at SRC into DEST (argument 3 of FN): a
 * simple single-float array for F32 data (F32-P), an (unsigned-byte 16) one
 * for F16/BF16, of exactly that many bytes. */
void rl_copy_to_tensor_array(const char *fn, cl_object dest, int f32_p, const void *src,
                             uint64_t nbytes);

#endif
