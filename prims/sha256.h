/* sha256.h - SHA-256 (FIPS 180-4) compression, for the sha256 of the files
 * `export` lists: the padding and the file reading are the Lisp side's
 * (FILE-SHA256 in lisp/export.lisp). */
#ifndef RL_SHA256_H
#define RL_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* Fold the NBLOCKS 64-byte blocks at P into the state H. */
void rl_sha256_blocks(uint32_t h[8], const uint8_t *p, size_t nblocks);

#endif
