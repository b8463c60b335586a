/* Helpers of the nn tests: seeded random tensors of any float dtype with the values they
 * really hold (after rounding to the dtype), and results read back as doubles. */
#ifndef CT_NN_TEST_H
#define CT_NN_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "ct_test.h"

/* xorshift64*: fixed seeds give the same values everywhere. */
static inline double nt_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2 - 1;
}

/* Reads t (any float dtype, any strides) into a malloc'ed array of doubles, row-major. */
static inline double *nt_read(const ct_tensor *t) {
  int64_t n = ct_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  ct_tensor *c = NULL;
  if (ct_tensor_dtype(t) == CT_F64) {
    ck_assert_ct_ok(ct_contiguous(&c, t));
    ck_assert_ct_ok(ct_to_host(c, v, sizeof(double) * (size_t)n));
  } else {
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    ck_assert_ct_ok(ct_cast(&c, t, CT_F32));
    ct_tensor *cc = NULL;
    ck_assert_ct_ok(ct_contiguous(&cc, c));
    ck_assert_ct_ok(ct_to_host(cc, f, sizeof(float) * (size_t)n));
    for (int64_t i = 0; i < n; i++) v[i] = f[i];
    ct_release(cc);
    free(f);
  }
  ct_release(c);
  return v;
}

/* A new contiguous tensor of dtype dt with uniform values in [-scale, scale) from seed; *vals
 * (malloc'ed) gets the values it holds. */
static inline ct_tensor *nt_random(ct_device *d, ct_dtype dt, int ndim, const int64_t *shape, uint64_t seed,
                                   double scale, double **vals) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  double *h = malloc(sizeof(double) * (size_t)(n ? n : 1));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; i++) h[i] = nt_rand(&s) * scale;
  ct_tensor *t64 = NULL, *t = NULL;
  if (dt == CT_F64) {
    ck_assert_ct_ok(ct_from_host(&t, d, CT_F64, ndim, shape, h));
  } else {
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) f[i] = (float)h[i];
    ck_assert_ct_ok(ct_from_host(&t64, d, CT_F32, ndim, shape, f));
    free(f);
    if (dt == CT_F32) t = ct_retain(t64);
    else ck_assert_ct_ok(ct_cast(&t, t64, dt));
    ct_release(t64);
  }
  free(h);
  if (vals) *vals = nt_read(t);
  return t;
}

/* The dtype's unit roundoff (half an ulp at 1). */
static inline double nt_unit(ct_dtype dt) {
  switch (dt) {
    case CT_F16: return ldexp(1, -11);
    case CT_BF16: return ldexp(1, -8);
    case CT_F64: return ldexp(1, -53);
    default: return ldexp(1, -24);
  }
}

/* Whether the default device computes f64. */
static inline bool nt_has_f64(ct_device *d) {
  const ct_device_props *p = ct_device_properties(d);
  return p && p->fp64;
}

/* PyTorch's results (tests/nn/data/nn_ref.safetensors, made by gen_nn.py beside it). */
static inline ct_safetensors *nt_fixture(ct_device *d) {
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/nn/data/nn_ref.safetensors", root ? root : ".");
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(ct_safetensors_load(&st, path, d));
  return st;
}

static inline ct_tensor *nt_get(const ct_safetensors *st, const char *name) {
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_safetensors_get(&t, st, name));
  return t;
}

/* Asserts y and ref (same shape) agree within atol + rtol |ref| elementwise. */
static inline void nt_assert_close(const ct_tensor *y, const ct_tensor *ref, double atol, double rtol,
                                   const char *what) {
  ck_assert_int_eq(ct_tensor_ndim(y), ct_tensor_ndim(ref));
  for (int i = 0; i < ct_tensor_ndim(y); i++) ck_assert_int_eq(ct_tensor_shape(y)[i], ct_tensor_shape(ref)[i]);
  ck_assert_int_eq(ct_tensor_dtype(y), ct_tensor_dtype(ref));
  double *a = nt_read(y), *b = nt_read(ref);
  for (int64_t i = 0; i < ct_numel(y); i++)
    ck_assert_msg(fabs(a[i] - b[i]) <= atol + rtol * fabs(b[i]), "%s: [%lld] = %.9g, PyTorch %.9g", what,
                  (long long)i, a[i], b[i]);
  free(a);
  free(b);
}

#endif
