/* sha256.c - the hex SHA-256 digest of a buffer for the C tests: the
 * padding here, the compression the product's own (prims/sha256.c), so
 * that the golden dumps' digests (Python's hashlib) check it too. */
#include "tests/c/support/sha256.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "prims/sha256.h"

void rl_test_sha256_hex(const void *data, uint64_t n, char out[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    uint64_t i = n / 64 * 64;
    rl_sha256_blocks(h, p, n / 64);
    /* The padding: 0x80, zeros, the bit length; one or two final blocks. */
    uint8_t tail[128] = {0};
    uint64_t r = n - i;
    if (r)
        memcpy(tail, p + i, r);
    tail[r] = 0x80;
    uint64_t tl = r + 9 <= 64 ? 64 : 128;
    uint64_t bits = n * 8;
    for (int k = 0; k < 8; k++)
        tail[tl - 1 - k] = (uint8_t)(bits >> (8 * k));
    rl_sha256_blocks(h, tail, tl / 64);
    for (int k = 0; k < 8; k++)
        sprintf(out + 8 * k, "%08" PRIx32, h[k]);
}
