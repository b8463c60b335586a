/* Random numbers: rand, randn and randperm from Philox4x32-10.
 *
 * Generator. Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC'11; the Random123 reference) maps a 128-bit counter and a 64-bit key to 128 random bits.
 * The kernel uses integer arithmetic only (mul_hi and 32-bit products), so the same (seed,
 * offset) gives the same bits on every device and OpenCL implementation.
 *   key     = (seed & 0xffffffff, seed >> 32)
 *   counter = (b & 0xffffffff, b >> 32, offset & 0xffffffff, offset >> 32)
 * where b = 0, 1, 2, ... numbers the 128-bit blocks that fill the tensor in row-major order.
 * Each call draws from its own stream `offset`, so a call never overlaps another call's bits
 * whatever the sizes.
 *
 * rand: uniform on [0, 1). A block gives four 32-bit words w0..w3.
 *   f32:  4 elements per block, u = (w >> 8) * 2^-24       (24 random bits, exact)
 *   f64:  2 elements per block, u = (((w1 << 32) | w0) >> 11) * 2^-53   (53 bits, exact);
 *         the second element uses (w3, w2) likewise
 *   f16:  4 elements per block, u = (w >> 21) * 2^-11       (11 bits, exact in f16)
 *   bf16: 4 elements per block, u = (w >> 24) * 2^-8        (8 bits, exact in bf16)
 * so 1.0 never appears, and the values are bit-identical on every device.
 *
 * randn: standard normal, Box-Muller on uniforms from the same blocks.
 *   f32, f16, bf16 (computed in f32, then rounded): 4 elements per block from two pairs
 *     (w0, w1) and (w2, w3): u1 = ((w0 >> 8) + 1) * 2^-24 in (0, 1] (never 0, so log(u1) is
 *     finite), u2 = (w1 >> 8) * 2^-24; r = sqrt(-2 log u1); z0 = r cos(2 pi u2),
 *     z1 = r sin(2 pi u2).
 *   f64: 2 elements per block from one pair of 53-bit uniforms ((w1,w0) gives u1 as
 *     (k + 1) * 2^-53, (w3,w2) gives u2 as k * 2^-53), computed in f64.
 * The uniforms are bit-identical everywhere; the normals differ between OpenCL implementations
 * only by their log/sqrt/sin/cos rounding (within OpenCL's ULP bounds).
 *
 * Global state. A process-wide seed (default 67280421310721, PyTorch's default seed) and
 * offset (starting at 0). ct_rand()/ct_randn() use the current (seed, offset) and advance the
 * offset by one, atomically, so successive and concurrent calls get different streams. After
 * ct_manual_seed(s), the k-th call (counting from 0) gives exactly what
 * ct_rand_seeded(..., s, k) gives. The state is shared by all devices: the same sequence of
 * calls gives the same values on any device.
 *
 * Dtypes: f16, bf16, f32, f64 (f64 needs cl_khr_fp64, else CT_ERR_UNSUPPORTED). Any other dtype
 * gives CT_ERR_DTYPE_MISMATCH (PyTorch raises for integer rand too). Shapes follow ct_empty():
 * 0..CT_MAX_DIMS dims, sizes >= 0. An unseeded call consumes an offset once its result exists
 * (an empty result too); a call that fails its checks consumes none. Other statuses: CT_ERR_INVALID_ARGUMENT (NULL out/d, bad shape), CT_ERR_OPENCL,
 * CT_ERR_OUT_OF_MEMORY, CT_ERR_KERNEL_BUILD.
 *
 * Thread safety: every function may be called from any thread. */
#ifndef CLTENSOR_RANDOM_H
#define CLTENSOR_RANDOM_H

#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* Sets the global seed and resets the global offset to 0 (torch.manual_seed). */
CT_API void ct_manual_seed(uint64_t seed);

/* OUT: *seed and *offset, the global state the next unseeded call will use.
 * CT_ERR_INVALID_ARGUMENT when either pointer is NULL. */
CT_API ct_status ct_rng_get_state(uint64_t *seed, uint64_t *offset);

/* Sets the global state (e.g. one saved with ct_rng_get_state()). */
CT_API void ct_rng_set_state(uint64_t seed, uint64_t offset);

/* OUT: *out, a new contiguous tensor of uniform [0, 1) values, from the global state. */
CT_API ct_status ct_rand(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape);
/* As ct_rand() from the given (seed, offset); leaves the global state alone. */
CT_API ct_status ct_rand_seeded(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                                uint64_t seed, uint64_t offset);

/* OUT: *out, a new contiguous tensor of standard normal values, from the global state. */
CT_API ct_status ct_randn(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape);
/* As ct_randn() from the given (seed, offset); leaves the global state alone. */
CT_API ct_status ct_randn_seeded(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                                 uint64_t seed, uint64_t offset);

/* OUT: *out, a new i64 tensor [n] holding a random permutation of 0 .. n-1 (torch.randperm,
 * n >= 0), from the global state (one offset consumed, as ct_rand). Algorithm, so that a
 * (seed, offset) gives the same permutation everywhere: start from 0, 1, ..., n-1; for i = n-1
 * down to 1 swap element i with element j, j uniform in [0, i]: j = x mod (i + 1) for the first
 * x of the stream's 32-bit words (w0..w3 of block 0, then of block 1, ...) that is below the
 * largest multiple of i + 1 that fits in 2^32 (rejection, so every j is exactly equally likely);
 * when i + 1 > 2^32, x is two words (the first one high) and 2^64 takes 2^32's place. The
 * shuffle runs on the host (it is sequential) and the result is uploaded: the order differs from
 * PyTorch's for the same seed. CT_ERR_INVALID_ARGUMENT for NULL out/d or n < 0;
 * CT_ERR_OUT_OF_MEMORY; the statuses of ct_from_host. */
CT_API ct_status ct_randperm(ct_tensor **out, ct_device *d, int64_t n);
/* As ct_randperm() from the given (seed, offset); leaves the global state alone. */
CT_API ct_status ct_randperm_seeded(ct_tensor **out, ct_device *d, int64_t n, uint64_t seed, uint64_t offset);

CT_END_DECLS

#endif
