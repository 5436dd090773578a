/* sha256.h - SHA-256 (FIPS 180-4) for the C tests: the golden JSON dumps
 * name every file and tensor by the SHA-256 of its bytes. */
#ifndef RL_TEST_SHA256_H
#define RL_TEST_SHA256_H

#include <stdint.h>

/* The lowercase hex digest of the N bytes at DATA, NUL-terminated in out. */
void rl_test_sha256_hex(const void *data, uint64_t n, char out[65]);

#endif
