/* testutil.h - what several C tests need besides check.h: a seeded
 * pseudo-random source (splitmix64, the same sequence on every run) and
 * reading a whole file. */
#ifndef RL_TEST_UTIL_H
#define RL_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "prims/rng.h"

#define RL_TEST_UNUSED __attribute__((unused))

static uint64_t rng_state = 0x243f6a8885a308d3u; /* tests may reseed it */

RL_TEST_UNUSED static uint64_t rnd(void) { return rl_rng_next(&rng_state); }

/* Uniform in [0, 1). */
RL_TEST_UNUSED static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; }

/* Uniform in [lo, hi]. */
RL_TEST_UNUSED static int rnd_int(int lo, int hi) {
    return lo + (int)(rnd() % (uint64_t)(hi - lo + 1));
}

/* Roughly normal, mean 0, deviation about 1 (a sum of four uniforms). */
RL_TEST_UNUSED static float rnd_gauss(void) {
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += rnd_unit() - 0.5;
    return (float)(s * 1.7);
}

/* The whole file at PATH in a malloc'd buffer with a NUL after the last
 * byte (so JSON can be read as a string); its size in *len when len is not
 * NULL.  NULL when the file cannot be read. */
RL_TEST_UNUSED static void *slurp(const char *path, uint64_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = n < 0 ? NULL : malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len)
            *len = (uint64_t)n;
    }
    return buf;
}

#endif
