/* Helpers shared by the fusion tests (issue #16): switching the fusion graph on and off between
 * runs of the same calls, its counters, reading tensors back and comparing them bit for bit.
 * Fused results are compared with the same calls run eagerly (ct__fusion_override = 0): the
 * generated kernels call the per-op kernels' functions (kernels/ew_ops.cl) with the same loads,
 * conversions and roundings, so every bit must agree (a NaN matches any NaN: fz_assert_bits). */
#ifndef FZ_UTIL_H
#define FZ_UTIL_H

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ct_test.h"
#include "elementwise/elementwise.h"
#include "fusion/fusion.h"

/* The graph's counters now. */
static inline struct ct__fusion_stats fz_stats(void) {
  struct ct__fusion_stats s;
  ct__fusion_stats(&s);
  return s;
}

static inline unsigned long fz_pending(void) { return fz_stats().pending; }

/* Realizes whatever is recorded, then turns fusion on (1) or off (0): the override may only
 * change while nothing is recorded (elementwise.h). */
static inline void fz_mode(ct_device *d, int on) {
  ck_assert_ct_ok(ct_device_synchronize(d));
  ck_assert_uint_eq(fz_pending(), 0);
  ct__fusion_override = on;
}

static inline ct_tensor *fz_from(ct_device *d, ct_dtype t, int ndim, const int64_t *shape, const void *data) {
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, t, ndim, shape, data));
  return x;
}

/* f32 tensor of shape [n] with x[i] = a + b * i. */
static inline ct_tensor *fz_ramp(ct_device *d, int64_t n, float a, float b) {
  float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
  ck_assert_ptr_nonnull(h);
  for (int64_t i = 0; i < n; i++) h[i] = a + b * (float)i;
  ct_tensor *x = fz_from(d, CT_F32, 1, &n, h);
  free(h);
  return x;
}

/* tanh(x * 0.5 + 1) * x, the example: 4 recorded calls (ct_mul_scalar, ct_add_scalar,
 * ct_tanh, ct_mul), intermediates released. */
static inline ct_tensor *fz_chain(const ct_tensor *x) {
  ct_tensor *a = NULL, *b = NULL, *c = NULL, *z = NULL;
  ck_assert_ct_ok(ct_mul_scalar(&a, x, 0.5));
  ck_assert_ct_ok(ct_add_scalar(&b, a, 1));
  ct_release(a);
  ck_assert_ct_ok(ct_tanh(&c, b));
  ct_release(b);
  ck_assert_ct_ok(ct_mul(&z, c, x));
  ct_release(c);
  return z;
}

/* The tensor's elements, row-major, malloc'd (one byte for an empty tensor). */
static inline void *fz_read(const ct_tensor *t) {
  size_t bytes = ct_tensor_nbytes(t);
  void *p = malloc(bytes ? bytes : 1);
  ck_assert_ptr_nonnull(p);
  ck_assert_ct_ok(ct_to_host(t, p, bytes));
  return p;
}

/* The elements of an f32 tensor as floats, malloc'd. */
static inline float *fz_read_f32(const ct_tensor *t) {
  ck_assert_int_eq(ct_tensor_dtype(t), CT_F32);
  return fz_read(t);
}

/* fz_chain(x) computed eagerly, as host floats (malloc'd); fusion is on afterwards. */
static inline float *fz_chain_eager(ct_device *d, const ct_tensor *x) {
  fz_mode(d, 0);
  ct_tensor *z = fz_chain(x);
  float *h = fz_read_f32(z);
  ct_release(z);
  fz_mode(d, 1);
  return h;
}

/* True when element bits a and b (es bytes of dtype t) are both a NaN. */
static inline bool fz_both_nan(ct_dtype t, uint64_t a, uint64_t b) {
  switch (t) {
  case CT_F16: return (a & 0x7c00) == 0x7c00 && (a & 0x3ff) && (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
  case CT_BF16: return (a & 0x7f80) == 0x7f80 && (a & 0x7f) && (b & 0x7f80) == 0x7f80 && (b & 0x7f);
  case CT_F32: {
    float x, y;
    uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
    memcpy(&x, &ua, 4);
    memcpy(&y, &ub, 4);
    return isnan(x) && isnan(y);
  }
  case CT_F64: {
    double x, y;
    memcpy(&x, &a, 8);
    memcpy(&y, &b, 8);
    return isnan(x) && isnan(y);
  }
  default: return false;
  }
}

/* Fails with the first differing element of two host copies of nbytes of dtype t. Every bit
 * must agree, except that a NaN matches any NaN: the sign and payload of a NaN are not part of
 * any op's result (PyTorch doesn't specify them either), and they do differ where the fused
 * kernel's compiler folds an invalid operation whose operands it can prove (floor_divide(v, v)
 * with v = log1p(lt(x, x)): LLVM folds 0 / 0 to +NaN, 0x7fc00000, where the per-op kernel's
 * division by zero at run time gives x86's default NaN, 0xffc00000). */
static inline void fz_assert_bits(const void *got, const void *want, size_t nbytes, ct_dtype t, const char *what) {
  if (memcmp(got, want, nbytes) == 0) return;
  size_t es = ct_dtype_size(t);
  for (size_t i = 0; i + es <= nbytes; i += es) {
    if (memcmp((const char *)got + i, (const char *)want + i, es) == 0) continue;
    uint64_t g = 0, w = 0;
    memcpy(&g, (const char *)got + i, es);
    memcpy(&w, (const char *)want + i, es);
    if (fz_both_nan(t, g, w)) continue;
    ck_abort_msg("%s: element %zu (%s) differs: fused 0x%" PRIx64 ", eager 0x%" PRIx64, what, i / es,
                 ct_dtype_name(t), g, w);
  }
}

#endif
