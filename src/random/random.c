/* rand/randn: the global (seed, offset) state and launches of kernels/random.cl. */
#include <pthread.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cltensor/shape.h"
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
void ct__rng_take(uint64_t *seed, uint64_t *offset) {
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

/* The launches that fill a new tensor o: fill_begin() hands an empty o straight to *out (*k
 * NULL: nothing to launch); else it gets the kernel, locks it and sets its first arguments
 * (out, n, dt), releasing o on failure. The caller adds the rest, and fill_end() launches
 * `items` work-items, unlocks, and stores o in *out (or releases it). */
static ct_status fill_begin(ct__kernel **k, struct ct__kargs *a, ct_tensor **out, ct_device *d, ct_tensor *o,
                            const char *name, const char *fn) {
  *k = NULL;
  if (ct_numel(o) == 0) return ct__tensor_result(out, o, CT_OK);
  ct_status st = random_kernel(k, d, name, fn);
  if (st != CT_OK) return ct__tensor_result(out, o, st);
  ct__kargs_begin(a, *k, ct__kernel_lock(*k));
  ct__karg_tensor(a, "out", o, 0);
  ct__karg_long(a, "n", ct_numel(o));
  ct__karg_int(a, "dt", (cl_int)o->dtype);
  return CT_OK;
}

static ct_status fill_end(ct_tensor **out, struct ct__kargs *a, ct__kernel *k, ct_device *d, ct_tensor *o,
                          int64_t items, const char *fn) {
  ct_status st = ct__kargs_end(a, fn);
  if (st == CT_OK) st = launch(k, d, items);
  ct__kernel_unlock(k);
  return ct__tensor_result(out, o, st);
}

/* With use_global, (seed, offset) come from the global state, taken only once the result
 * exists, so a call that fails its checks consumes nothing. With af, each value v is v * af[0]
 * + af[1] (ct__rand_affine). */
static ct_status fill(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                      bool use_global, uint64_t seed, uint64_t offset, int normal, const double *af,
                      const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  if (!ct_dtype_is_floating_point(t))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: dtype %s is not a float dtype (expected f16, bf16, f32 or f64)", fn,
                     ct_dtype_name(t));
  ct_tensor *o = NULL;
  CT__TRY(ct__tensor_new(&o, d, t, ndim, shape, fn));
  if (use_global) ct__rng_take(&seed, &offset);
  ct__kernel *k;
  struct ct__kargs a;
  ct_status st = fill_begin(&k, &a, out, d, o, "rand_fill", fn);
  if (st != CT_OK || !k) return st;
  int64_t n = ct_numel(o), per = t == CT_F64 ? 2 : 4;
  ct__karg_int(&a, "normal", normal);
  ct__karg_ulong(&a, "seed", seed);
  ct__karg_ulong(&a, "offset", offset);
  const double one[2] = {1.0, 0.0}, *v = af ? af : one;
  uint64_t bits[2];
  memcpy(bits, v, sizeof bits);
  ct__karg_int(&a, "affine", af != NULL);
  ct__karg_float(&a, "fscale", (float)v[0]);
  ct__karg_float(&a, "fshift", (float)v[1]);
  ct__karg_ulong(&a, "dscale", bits[0]);
  ct__karg_ulong(&a, "dshift", bits[1]);
  return fill_end(out, &a, k, d, o, (n + per - 1) / per, fn);
}

ct_status ct__rand_affine(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape, bool normal,
                          double scale, double shift, const char *fn) {
  const double af[2] = {scale, shift};
  return fill(out, d, t, ndim, shape, true, 0, 0, normal ? 1 : 0, af, fn);
}

ct_status ct_rand(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape) {
  return fill(out, d, t, ndim, shape, true, 0, 0, 0, NULL, "ct_rand");
}

ct_status ct_rand_seeded(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                         uint64_t seed, uint64_t offset) {
  return fill(out, d, t, ndim, shape, false, seed, offset, 0, NULL, "ct_rand_seeded");
}

ct_status ct_randn(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape) {
  return fill(out, d, t, ndim, shape, true, 0, 0, 1, NULL, "ct_randn");
}

ct_status ct_randn_seeded(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                          uint64_t seed, uint64_t offset) {
  return fill(out, d, t, ndim, shape, false, seed, offset, 1, NULL, "ct_randn_seeded");
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
  if (st != CT_OK) return ct__tensor_result(out, o, st);
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "out", o, 0);
  ct__karg_long(&a, "nblocks", nblocks);
  ct__karg_ulong(&a, "first", first);
  ct__karg_ulong(&a, "seed", seed);
  ct__karg_ulong(&a, "offset", offset);
  st = ct__kargs_end(&a, fn);
  if (st == CT_OK) st = launch(k, d, nblocks);
  ct__kernel_unlock(k);
  return ct__tensor_result(out, o, st);
}

/* The integers a dtype holds, as int64 (u64 above INT64_MAX is unreachable from int64 bounds). */
static void int_range(ct_dtype t, int64_t *lo, int64_t *hi) {
  switch (t) {
    case CT_BOOL: *lo = 0; *hi = 1; return;
    case CT_U8: *lo = 0; *hi = UINT8_MAX; return;
    case CT_I8: *lo = INT8_MIN; *hi = INT8_MAX; return;
    case CT_I16: *lo = INT16_MIN; *hi = INT16_MAX; return;
    case CT_U16: *lo = 0; *hi = UINT16_MAX; return;
    case CT_I32: *lo = INT32_MIN; *hi = INT32_MAX; return;
    case CT_U32: *lo = 0; *hi = UINT32_MAX; return;
    case CT_I64: *lo = INT64_MIN; *hi = INT64_MAX; return;
    case CT_U64: *lo = 0; *hi = INT64_MAX; return;
    /* The floats: their finite range, as torch.randint (only f16's is narrower than int64). */
    case CT_F16: *lo = -65504; *hi = 65504; return;
    default: *lo = INT64_MIN; *hi = INT64_MAX; return;
  }
}

ct_status ct_randint(ct_tensor **out, ct_device *d, ct_dtype dtype, int64_t low, int64_t high, int ndim,
                     const int64_t *shape) {
  const char *fn = "ct_randint";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  if ((unsigned)dtype >= CT_DTYPE_COUNT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dtype %d is not a ct_dtype", fn, (int)dtype);
  if (low >= high)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: low %" PRId64 " must be less than high %" PRId64, fn, low, high);
  int64_t tmin, tmax;
  int_range(dtype, &tmin, &tmax);
  if (low < tmin || high - 1 > tmax)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: [low, high) = [%" PRId64 ", %" PRId64 ") does not fit dtype %s (values %" PRId64
                     "..%" PRId64 ")",
                     fn, low, high, ct_dtype_name(dtype), tmin, tmax);
  ct_tensor *o = NULL;
  CT__TRY(ct__tensor_new(&o, d, dtype, ndim, shape, fn));
  uint64_t seed, offset;
  ct__rng_take(&seed, &offset);
  ct__kernel *k;
  struct ct__kargs a;
  ct_status st = fill_begin(&k, &a, out, d, o, "randint_fill", fn);
  if (st != CT_OK || !k) return st;
  uint64_t range = (uint64_t)high - (uint64_t)low;
  int64_t n = ct_numel(o), per = range > (UINT64_C(1) << 32) ? 2 : 4;
  ct__karg_long(&a, "low", low);
  ct__karg_ulong(&a, "range", range);
  ct__karg_ulong(&a, "seed", seed);
  ct__karg_ulong(&a, "offset", offset);
  return fill_end(out, &a, k, d, o, (n + per - 1) / per, fn);
}
