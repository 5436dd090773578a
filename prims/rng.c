/* rng.c - the bulk fills of rng.h: `bench` fills matrices of hundreds of MB
 * and `convert --random` millions of weights, too slow one boxed number at
 * a time in Lisp. */
#include "prims/rng.h"

#include <math.h>

void rl_rng_fill_uniform_f32(float *y, size_t n, uint64_t *state) {
    for (size_t i = 0; i < n; i++)
        /* 24 random bits: k / 2^23 - 1 is exact in f32, in [-1, 1) */
        y[i] = (float)(int32_t)(rl_rng_next(state) >> 40) * 0x1p-23f - 1.0f;
}

void rl_rng_fill_normal_f32(float *y, size_t n, double sigma, uint64_t *state) {
    const double two_pi = 6.283185307179586476925286766559;
    for (size_t i = 0; i < n; i += 2) {
        double u1 = rl_rng_open_unit(state), u2 = rl_rng_open_unit(state);
        double m = sigma * sqrt(-2.0 * log(u1));
        y[i] = (float)(m * cos(two_pi * u2));
        if (i + 1 < n)
            y[i + 1] = (float)(m * sin(two_pi * u2));
    }
}
