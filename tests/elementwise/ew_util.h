/* Helpers shared by the elementwise tests: device facts, test data, reading back, comparing. */
#ifndef EW_UTIL_H
#define EW_UTIL_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ct_test.h"
#include "device/device.h"
#include "ew_ref.h"
#include "tensor/tensor.h"

/* In dtype-value order, so that ew_all_dtypes[i] == i indexes ref_promote_table. */
static const ct_dtype ew_all_dtypes[REF_NDTYPES] = {CT_BOOL, CT_U8,  CT_I8,  CT_I32, CT_I64, CT_F16, CT_BF16,
                                                    CT_F32,  CT_F64, CT_I16, CT_U16, CT_U32, CT_U64};

/* Device facts the bounds depend on. */
typedef struct {
  ct_device *d;
  bool cr;     /* f32 division and sqrt correctly rounded */
  bool denorm; /* f32 subnormals kept */
  bool fp64;
} ew_dev;

static inline ew_dev ew_open(void) {
  ew_dev e;
  e.d = ct_test_device();
  cl_device_fp_config fp = 0;
  clGetDeviceInfo(e.d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
  e.cr = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  e.denorm = (fp & CL_FP_DENORM) != 0;
  e.fp64 = e.d->props.fp64;
  return e;
}

/* ---- deterministic data ---- */
static uint64_t ew_rng = 0x9e3779b97f4a7c15ull;
static inline uint64_t ew_rand(void) {
  ew_rng ^= ew_rng << 13;
  ew_rng ^= ew_rng >> 7;
  ew_rng ^= ew_rng << 17;
  return ew_rng;
}
static inline double ew_unit(void) { return (double)(ew_rand() >> 11) * 0x1p-53; }

static inline void ew_store_double(ct_dtype t, void *p, double v) {
  switch (t) {
  case CT_F16: *(uint16_t *)p = ct_f32_to_f16((float)v); break;
  case CT_BF16: *(uint16_t *)p = ct_f32_to_bf16((float)v); break;
  case CT_F32: *(float *)p = (float)v; break;
  case CT_F64: *(double *)p = v; break;
  default: break;
  }
}
static inline void ew_store_int(ct_dtype t, void *p, int64_t v) {
  switch (t) {
  case CT_BOOL: *(uint8_t *)p = v != 0; break;
  case CT_U8: *(uint8_t *)p = (uint8_t)v; break;
  case CT_I8: *(int8_t *)p = (int8_t)v; break;
  case CT_I32: *(int32_t *)p = (int32_t)v; break;
  case CT_I64: *(int64_t *)p = v; break;
  case CT_I16: *(int16_t *)p = (int16_t)v; break;
  case CT_U16: *(uint16_t *)p = (uint16_t)v; break;
  case CT_U32: *(uint32_t *)p = (uint32_t)v; break;
  case CT_U64: *(uint64_t *)p = (uint64_t)v; break;
  default: ew_store_double(t, p, (double)v); break;
  }
}

/* Values worth testing in each dtype: signed zeros, ties for rounding, extremes, non-finite,
 * subnormals (in f32 only where the device keeps them), range limits of integers. */
static inline int ew_specials(ct_dtype t, bool denorm, double *fv, int64_t *iv) {
  static const double fs[] = {0.0, -0.0, 1, -1, 0.5, -0.5, 1.5, -2.5, 2.5, 3, -7, 1e-3, 100, -100.25, 65504,
                              1e30, -3.4e38, INFINITY, -INFINITY, NAN, 1e-40, 6e-8};
  static const int64_t is[] = {0, 1, -1, 2, -2, 3, 7, -7, 100, -100, 127, -128, 255, 2147483647, -2147483647 - 1,
                               INT64_MAX, INT64_MIN, 65537};
  int n = 0;
  if (ref_is_float(t)) {
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
      if (!denorm && t == CT_F32 && fs[i] != 0 && fabs(fs[i]) < FLT_MIN) continue;
      fv[n++] = fs[i];
    }
  } else if (t == CT_BOOL) {
    iv[n++] = 0;
    iv[n++] = 1;
  } else {
    for (size_t i = 0; i < sizeof is / sizeof is[0]; i++) iv[n++] = is[i];
  }
  return n;
}

static inline void ew_random(ct_dtype t, void *p) {
  if (ref_is_float(t)) {
    double m = ew_unit() * 2 - 1, e = floor(ew_unit() * 24) - 12;
    double v = ew_rand() % 4 == 0 ? floor(m * 16) / 2 : ldexp(m, (int)e); /* some exact halves */
    ew_store_double(t, p, v);
  } else if (t == CT_BOOL) {
    ew_store_int(t, p, (int64_t)(ew_rand() & 1));
  } else {
    uint64_t r = ew_rand();
    ew_store_int(t, p, (r & 1) ? (int64_t)(ew_rand() % 201) - 100 : (int64_t)ew_rand());
  }
}

/* Pairs (a[i], b[i]): every special of ta against every special of tb, then nrand random pairs.
 * Buffers are malloc'd; *n receives the count. */
static inline void ew_pairs(ct_dtype ta, ct_dtype tb, bool denorm, int nrand, void **a, void **b, size_t *n) {
  double fa[64], fb[64];
  int64_t ia[64], ib[64];
  int na = ew_specials(ta, denorm, fa, ia), nb = ew_specials(tb, denorm, fb, ib);
  size_t total = (size_t)(na * nb + nrand);
  size_t sa = ref_size(ta), sb = ref_size(tb);
  char *pa = calloc(total, sa), *pb = calloc(total, sb);
  ck_assert_ptr_nonnull(pa);
  ck_assert_ptr_nonnull(pb);
  size_t k = 0;
  for (int i = 0; i < na; i++)
    for (int j = 0; j < nb; j++, k++) {
      if (ref_is_float(ta)) ew_store_double(ta, pa + k * sa, fa[i]); else ew_store_int(ta, pa + k * sa, ia[i]);
      if (ref_is_float(tb)) ew_store_double(tb, pb + k * sb, fb[j]); else ew_store_int(tb, pb + k * sb, ib[j]);
    }
  for (; k < total; k++) {
    ew_random(ta, pa + k * sa);
    ew_random(tb, pb + k * sb);
  }
  *a = pa;
  *b = pb;
  *n = total;
}

/* Specials then nrand random values of t. */
static inline void *ew_values(ct_dtype t, bool denorm, int nrand, size_t *n) {
  double f[64];
  int64_t iv[64];
  int ns = ew_specials(t, denorm, f, iv);
  size_t total = (size_t)(ns + nrand), s = ref_size(t);
  char *p = calloc(total, s);
  ck_assert_ptr_nonnull(p);
  for (int i = 0; i < ns; i++) {
    if (ref_is_float(t)) ew_store_double(t, p + (size_t)i * s, f[i]); else ew_store_int(t, p + (size_t)i * s, iv[i]);
  }
  for (size_t k = (size_t)ns; k < total; k++) ew_random(t, p + k * s);
  *n = total;
  return p;
}

/* ---- tensors ---- */
static inline ct_tensor *ew_tensor(ct_device *d, ct_dtype t, int ndim, const int64_t *shape, const void *data) {
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, t, ndim, shape, data));
  return x;
}

/* The tensor's elements, row-major (it must be contiguous), malloc'd. */
static inline void *ew_read(const ct_tensor *t) {
  size_t bytes = ct_tensor_nbytes(t);
  void *p = malloc(bytes ? bytes : 1);
  ck_assert_ptr_nonnull(p);
  ck_assert_ct_ok(ct_to_host(t, p, bytes));
  return p;
}

/* An element as text for failure messages. */
static inline const char *ew_fmt(char *buf, size_t size, ct_dtype t, const void *p) {
  if (ref_is_float(t)) {
    uint64_t bits = 0;
    memcpy(&bits, p, ref_size(t));
    snprintf(buf, size, "%.17g (0x%" PRIx64 ")", ref_ld_double(t, p), bits);
  } else if (t == CT_U64) {
    snprintf(buf, size, "%" PRIu64, (uint64_t)ref_ld_int(t, p));
  } else {
    snprintf(buf, size, "%" PRId64, ref_ld_int(t, p));
  }
  return buf;
}

/* Checks one element and fails the test with the whole story otherwise. */
#define EW_CHECK_ELEM(exp, o, dev, denorm, what_fmt, ...)                                                \
  do {                                                                                                 \
    double err_;                                                                                       \
    if (!ref_check((exp), (o), (dev), (denorm), &err_)) {                                              \
      char gb_[64], eb_[64];                                                                           \
      if ((exp)->approx)                                                                               \
        snprintf(eb_, sizeof eb_, "true %.17Lg within %.1f ulp (err %.2f)", (exp)->truth, (exp)->ulps, err_); \
      else                                                                                             \
        ew_fmt(eb_, sizeof eb_, (o), &(exp)->bits);                                                    \
      ck_abort_msg(what_fmt ": got %s, expected %s", __VA_ARGS__, ew_fmt(gb_, sizeof gb_, (o), (dev)), eb_); \
    }                                                                                                  \
  } while (0)

#endif
