/* Internal: raw Philox4x32-10 output, for known-answer tests and tools. */
#ifndef CT_RANDOM_RANDOM_H
#define CT_RANDOM_RANDOM_H

#include <stdint.h>

#include "cltensor/random.h"

/* OUT: *out, a new i32 tensor of 4 * nblocks words: blocks first, first + 1, ... (wrapping
 * modulo 2^64) of the stream (seed, offset), each block's words w0..w3 in order, as the bits
 * ct_rand()/ct_randn() convert. */
ct_status ct__random_bits(ct_tensor **out, ct_device *d, int64_t nblocks, uint64_t first,
                          uint64_t seed, uint64_t offset);

/* Takes the global (seed, offset) for one drawing call and advances the offset (as ct_rand()
 * does); for ops of other families that draw from the generator (ct_dropout). */
void ct__rng_take(uint64_t *seed, uint64_t *offset);

/* OUT: *out, a new tensor of dtype t (f16, bf16, f32, f64) drawn from the global generator as
 * ct_rand() (or ct_randn() when normal) would, each value v then v * scale + shift, rounded in
 * t's compute type after the product and after the sum, as ct_mul_scalar() then ct_add_scalar()
 * would: one kernel for the initializers (src/nn/init.c). */
ct_status ct__rand_affine(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape, bool normal,
                          double scale, double shift, const char *fn);

/* perm[0..n-1]: ct_randperm_seeded's permutation of 0..n-1 on the host (random.h). */
void ct__randperm_host(int64_t *perm, int64_t n, uint64_t seed, uint64_t offset);

#endif
