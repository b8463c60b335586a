/* rand/randn: the global (seed, offset) state and launches of kernels/random.cl. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"
#include "device/device.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "random/random.h"
#include "tensor/tensor.h"

/* PyTorch's default seed (default_rng_seed_val). */
#define CT__DEFAULT_SEED 67280421310721ull

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_seed = CT__DEFAULT_SEED, rng_offset = 0;

void ct_manual_seed(uint64_t seed) { ct_rng_set_state(seed, 0); }

void ct_rng_set_state(uint64_t seed, uint64_t offset) {
  pthread_mutex_lock(&rng_lock);
  rng_seed = seed;
  rng_offset = offset;
  pthread_mutex_unlock(&rng_lock);
}

ct_status ct_rng_get_state(uint64_t *seed, uint64_t *offset) {
  CT__CHECK_NOT_NULL("ct_rng_get_state", seed);
  CT__CHECK_NOT_NULL("ct_rng_get_state", offset);
  pthread_mutex_lock(&rng_lock);
  *seed = rng_seed;
  *offset = rng_offset;
  pthread_mutex_unlock(&rng_lock);
  return CT_OK;
}

/* Takes the current state and advances the offset, as one step. */
static void rng_take(uint64_t *seed, uint64_t *offset) {
  pthread_mutex_lock(&rng_lock);
  *seed = rng_seed;
  *offset = rng_offset++;
  pthread_mutex_unlock(&rng_lock);
}

static ct_status random_kernel(ct__kernel **k, ct_device *d, const char *name, const char *fn) {
  ct_status st = ct__kernel_get(k, d, "random.cl", name, NULL);
  if (st != CT_OK) ct__error_append(" (in %s)", fn);
  return st;
}

/* Launches k (locked) over `items` work-items in groups of a fixed size (the kernels check
 * their bounds): one size per kernel, so implementations that compile per work-group size
 * (PoCL) compile once. */
static ct_status launch(ct__kernel *k, ct_device *d, int64_t items) {
  size_t local;
  CT__TRY(ct__kernel_group_limit(&local, k, d, 64, 0));
  size_t global = ((size_t)items + local - 1) / local * local;
  return ct__kernel_launch(k, d, 1, &global, &local);
}

/* With use_global, (seed, offset) come from the global state, taken only once the result
 * exists, so a call that fails its checks consumes nothing. */
static ct_status fill(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                      bool use_global, uint64_t seed, uint64_t offset, int normal, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  if (!ct_dtype_is_float(t))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: dtype %s is not a float dtype (expected f16, bf16, f32 or f64)", fn,
                     ct_dtype_name(t));
  ct_tensor *o = NULL;
  CT__TRY(ct__tensor_new(&o, d, t, ndim, shape, fn));
  if (use_global) rng_take(&seed, &offset);
  int64_t n = ct_numel(o);
  if (n == 0) {
    *out = o;
    return CT_OK;
  }
  ct__kernel *k;
  ct_status st = random_kernel(&k, d, "rand_fill", fn);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  int64_t per = t == CT_F64 ? 2 : 4;
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_mem(&a, "out", ct__tensor_mem(o));
  ct__karg_long(&a, "out_off", (cl_long)(ct__tensor_byte_offset(o) / ct_dtype_size(t)));
  ct__karg_long(&a, "n", n);
  ct__karg_int(&a, "dt", (cl_int)t);
  ct__karg_int(&a, "normal", normal);
  ct__karg_ulong(&a, "seed", seed);
  ct__karg_ulong(&a, "offset", offset);
  st = ct__kargs_end(&a, fn);
  if (st == CT_OK) st = launch(k, d, (n + per - 1) / per);
  ct__kernel_unlock(k);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  *out = o;
  return CT_OK;
}

ct_status ct_rand(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape) {
  return fill(out, d, t, ndim, shape, true, 0, 0, 0, "ct_rand");
}

ct_status ct_rand_seeded(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                         uint64_t seed, uint64_t offset) {
  return fill(out, d, t, ndim, shape, false, seed, offset, 0, "ct_rand_seeded");
}

ct_status ct_randn(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape) {
  return fill(out, d, t, ndim, shape, true, 0, 0, 1, "ct_randn");
}

ct_status ct_randn_seeded(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                          uint64_t seed, uint64_t offset) {
  return fill(out, d, t, ndim, shape, false, seed, offset, 1, "ct_randn_seeded");
}

ct_status ct__random_bits(ct_tensor **out, ct_device *d, int64_t nblocks, uint64_t first,
                          uint64_t seed, uint64_t offset) {
  const char *fn = "ct__random_bits";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  if (nblocks < 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: nblocks is %lld (expected >= 0)", fn,
                     (long long)nblocks);
  int64_t shape[1] = {4 * nblocks};
  ct_tensor *o = NULL;
  CT__TRY(ct__tensor_new(&o, d, CT_I32, 1, shape, fn));
  ct__kernel *k;
  ct_status st = random_kernel(&k, d, "philox_bits", fn);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_mem(&a, "out", ct__tensor_mem(o));
  ct__karg_long(&a, "out_off", (cl_long)(ct__tensor_byte_offset(o) / 4));
  ct__karg_long(&a, "nblocks", nblocks);
  ct__karg_ulong(&a, "first", first);
  ct__karg_ulong(&a, "seed", seed);
  ct__karg_ulong(&a, "offset", offset);
  st = ct__kargs_end(&a, fn);
  if (st == CT_OK) st = launch(k, d, nblocks);
  ct__kernel_unlock(k);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  *out = o;
  return CT_OK;
}
