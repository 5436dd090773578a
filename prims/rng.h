/* rng.h - the one pseudo-random source of rontolisp: splitmix64, a fixed
 * function of its seed on every machine, used by the C tests, `bench`'s
 * random matrices and `convert --random`'s weights.  Not for anything
 * secret.  Plain C, no ECL. */
#ifndef RL_PRIMS_RNG_H
#define RL_PRIMS_RNG_H

#include <stddef.h>
#include <stdint.h>

/* The next 64 random bits; advances *state. */
static inline uint64_t rl_rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in the open interval (0, 1): 53 random bits plus a half. */
static inline double rl_rng_open_unit(uint64_t *state) {
    return ((double)(rl_rng_next(state) >> 11) + 0.5) * 0x1p-53;
}

/* Fill y with n floats uniform in [-1, 1) (24 random bits each, exact in
 * f32), continuing from *state. */
void rl_rng_fill_uniform_f32(float *y, size_t n, uint64_t *state);

/* Fill y with n floats normal with mean 0 and deviation sigma (Box-Muller
 * in double, a pair per two uniforms), continuing from *state. */
void rl_rng_fill_normal_f32(float *y, size_t n, double sigma, uint64_t *state);

#endif
