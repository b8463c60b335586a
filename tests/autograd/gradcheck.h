/* Gradient checks for the autograd tests: a function's analytic gradients (ct_backward) against
 * central finite differences, in f64 where the device has cl_khr_fp64 (PoCL) and in f32 where it
 * has not (rusticl, Intel Arc, Apple): gc_float(d). CLTENSOR_TEST_GRADCHECK_F32=1 forces f32 on
 * any device, so the f32 form is checked on PoCL too.
 *
 * The scalar checked is L = sum(f(inputs) * w) with fixed random weights w, so every output
 * element's gradient matters and a formula that mixes elements up fails. Inputs are given as
 * host double values in logical row-major order; an input marked strided is built as a permuted
 * (transposed) view, so formulas see non-contiguous inputs. Integer inputs (indices) are built
 * as i64 and never perturbed.
 *
 * Tolerance in f64: central differences with h = 1e-6 have a truncation error O(h^2 f''') and a
 * cancellation error about 1e-16 |L| / h = 1e-10 |L|; |analytic - numeric| <= 1e-6 + 1e-5 |numeric|
 * leaves room for both on the O(1) values the tests use, while a wrong formula is off by O(1).
 *
 * Tolerance in f32 (unit roundoff u = 6e-8): each output the perturbed input reaches carries a
 * rounding error of a few u |o| (a sum of K terms: up to K u), different in the two evaluations,
 * so the difference quotient carries about sqrt(m) 4u |o| / (2h) for m reached outputs: with
 * h = 2^-9 (about 2e-3) and m |o| <= 100 as in these tests, about 1e-3. The quotient divides by
 * the perturbation actually applied, fl(x + h) - fl(x - h), and the inputs are rounded to f32
 * first, so the analytic and numeric gradients are taken at the same point. The truncation error
 * h^2 / 6 |f'''| is about 7e-7 |f'''|; the analytic gradient is itself an f32 result, a few u
 * relative times the fan-in. |analytic - numeric| <= 4e-3 + 4e-3 |numeric| covers these with a
 * margin of about 4 and still fails a wrong formula (off by O(1)) or a kernel that computes
 * garbage on one implementation, which is what the f32 form is for: the f64 form on PoCL stays the
 * precise check of the formulas. Kinks must be more than h away (the tests keep them further). */
#ifndef CT_GRADCHECK_H
#define CT_GRADCHECK_H

#include <math.h>
#include <stdint.h>

#include "ct_test.h"
#include "tensor/tensor.h"

#define GC_MAX_IN 6

/* The float dtype the checks run in on d: f64 with cl_khr_fp64, else f32 (see above). */
static inline ct_dtype gc_float(ct_device *d) {
  const char *f = getenv("CLTENSOR_TEST_GRADCHECK_F32");
  if (f && strcmp(f, "1") == 0) return CT_F32;
  return ct_device_properties(d)->fp64 ? CT_F64 : CT_F32;
}

typedef struct gc_input {
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  double *data;       /* logical row-major values (owned by the test) */
  bool requires_grad; /* checked against finite differences */
  bool strided;       /* built as a transposed view (ndim >= 2) */
  bool integer;       /* built as i64 (indices), never perturbed */
  ct_dtype dtype;     /* 0: gc_float(d) (or CT_I64 when integer) */
} gc_input;

/* f computes *out from in[0..n); ctx is the test's. Called once with grad mode on (analytic) and
 * many times with grad mode off (numeric). */
typedef ct_status (*gc_fn)(ct_tensor **out, ct_tensor *const *in, void *ctx);

static inline int64_t gc_numel(const gc_input *x) {
  int64_t n = 1;
  for (int i = 0; i < x->ndim; i++) n *= x->shape[i];
  return n;
}

/* A deterministic generator for the tests' values (xorshift64*). */
static inline double gc_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0; /* [0, 1) */
}
/* Fills v[0..n) with values in [lo, hi). */
static inline void gc_fill(double *v, int64_t n, double lo, double hi, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * gc_rand(&s);
}

/* Builds input x on d (see gc_input). */
static inline ct_tensor *gc_make(ct_device *d, const gc_input *x) {
  ct_dtype dt = x->dtype ? x->dtype : (x->integer ? CT_I64 : gc_float(d));
  int64_t n = gc_numel(x);
  size_t es = ct_dtype_size(dt);
  void *buf = malloc((size_t)(n ? n : 1) * es);
  ck_assert(buf);
  for (int64_t i = 0; i < n; i++) {
    if (dt == CT_I64) ((int64_t *)buf)[i] = (int64_t)x->data[i];
    else if (dt == CT_I32) ((int32_t *)buf)[i] = (int32_t)x->data[i];
    else if (dt == CT_F64) ((double *)buf)[i] = x->data[i];
    else ((float *)buf)[i] = (float)x->data[i]; /* f32 only otherwise */
  }
  ct_tensor *t = NULL;
  if (x->strided && x->ndim >= 2) {
    /* Storage of the reversed shape holding the transposed values; the reversing permute gives
     * back the logical tensor, with non-contiguous strides. */
    int nd = x->ndim;
    int64_t rs[CT_MAX_DIMS], ls[CT_MAX_DIMS];
    int perm[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) rs[i] = x->shape[nd - 1 - i], perm[i] = nd - 1 - i;
    /* logical strides (row-major) */
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) ls[i] = s, s *= x->shape[i];
    void *tb = malloc((size_t)(n ? n : 1) * es);
    ck_assert(tb);
    for (int64_t j = 0; j < n; j++) { /* j: row-major index in the reversed shape */
      int64_t rem = j, li = 0;
      for (int k = nd - 1; k >= 0; k--) {
        int64_t c = rem % rs[k];
        rem /= rs[k];
        li += c * ls[nd - 1 - k];
      }
      memcpy((char *)tb + j * es, (char *)buf + li * es, es);
    }
    ct_tensor *base = NULL;
    ck_assert_ct_ok(ct_from_host(&base, d, dt, nd, rs, tb));
    ck_assert_ct_ok(ct_permute(&t, base, perm));
    ct_release(base);
    free(tb);
  } else {
    ck_assert_ct_ok(ct_from_host(&t, d, dt, x->ndim, x->shape, buf));
  }
  free(buf);
  return t;
}

/* Copies any float tensor to host doubles (through a cast to f64, or to f32 widened on the host
 * unless the tensor is f64 already: a device without cl_khr_fp64 has no f64 to cast to). */
static inline double *gc_host(const ct_tensor *t) {
  int64_t n = ct_numel(t);
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  ck_assert(v);
  ct_tensor *c = NULL;
  bool wide = ct_tensor_dtype(t) == CT_F64;
  bool prev = ct_set_grad_enabled(false);
  ck_assert_ct_ok(ct_cast(&c, t, wide ? CT_F64 : CT_F32));
  ct_set_grad_enabled(prev);
  if (wide) {
    ck_assert_ct_ok(ct_to_host(c, v, (size_t)n * sizeof *v));
  } else {
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    ck_assert(f);
    ck_assert_ct_ok(ct_to_host(c, f, (size_t)n * sizeof *f));
    for (int64_t i = 0; i < n; i++) v[i] = f[i];
    free(f);
  }
  ct_release(c);
  return v;
}

/* A new tensor on d of the checks' float dtype (gc_float) holding the doubles v in shape. */
static inline ct_tensor *gc_from(ct_device *d, int ndim, const int64_t *shape, const double *v) {
  gc_input x = {.ndim = ndim, .data = (double *)v};
  for (int i = 0; i < ndim; i++) x.shape[i] = shape[i];
  return gc_make(d, &x);
}

/* The tolerance in dt of a comparison that holds to tol64 in f64 (exact up to rounding): scaled
 * by the unit roundoffs' ratio (2^29), at least 1e-6 (a few f32 roundings of O(1) values). */
static inline double gc_tol(ct_dtype dt, double tol64) {
  return dt == CT_F64 ? tol64 : fmax(1e-6, tol64 * 536870912.0);
}

/* v as float dtype dt holds it (rounded to nearest even, as ct_cast), for results that are
 * exact in dt: a rule's slope of 0.1 is 0.1f in f32. */
static inline double gc_round(ct_dtype dt, double v) {
  unsigned char b[8];
  ct__host_store_double(dt, b, v);
  return ct__host_load_double(dt, b);
}

/* L = sum(f(in) * w) with grad mode off, from host values. */
static inline double gc_eval(ct_device *d, gc_fn f, void *ctx, int n, const gc_input *in, const double *w,
                             int64_t wn) {
  ct_tensor *t[GC_MAX_IN] = {0}, *out = NULL;
  for (int i = 0; i < n; i++) t[i] = gc_make(d, &in[i]);
  ck_assert_ct_ok(f(&out, t, ctx));
  ck_assert_int_eq(ct_numel(out), wn);
  double *o = gc_host(out);
  double L = 0;
  for (int64_t j = 0; j < wn; j++) L += o[j] * w[j];
  free(o);
  ct_release(out);
  for (int i = 0; i < n; i++) ct_release(t[i]);
  return L;
}

/* Checks every input with requires_grad: the analytic gradient against central differences.
 * what names the case in failure messages. */
static inline void gc_check(ct_device *d, const char *what, gc_fn f, void *ctx, int n, gc_input *in) {
  ck_assert(n <= GC_MAX_IN);
  /* In f32 the values are rounded first: the analytic gradient is taken where the numeric one is. */
  for (int i = 0; i < n; i++)
    if (!in[i].integer && gc_float(d) == CT_F32)
      for (int64_t j = 0; j < gc_numel(&in[i]); j++) in[i].data[j] = (float)in[i].data[j];
  /* analytic */
  ct_tensor *t[GC_MAX_IN] = {0}, *out = NULL;
  for (int i = 0; i < n; i++) {
    t[i] = gc_make(d, &in[i]);
    if (in[i].requires_grad) {
      /* A strided input is a view (a non-leaf would not collect .grad): mark the view itself,
       * which is a leaf since permute of a tensor not requiring grad records nothing. */
      ck_assert_ct_ok(ct_set_requires_grad(t[i], true));
    }
  }
  ck_assert_ct_ok(f(&out, t, ctx));
  int64_t wn = ct_numel(out);
  double *w = malloc((size_t)(wn ? wn : 1) * sizeof *w);
  gc_fill(w, wn, -1.0, 1.0, 99);
  ct_tensor *wt = NULL, *prod = NULL, *L = NULL;
  wt = gc_from(d, ct_tensor_ndim(out), ct_tensor_shape(out), w);
  if (ct_tensor_dtype(out) != ct_tensor_dtype(wt)) {
    ct_tensor *c = NULL;
    ck_assert_ct_ok(ct_cast(&c, wt, ct_tensor_dtype(out)));
    ct_release(wt);
    wt = c;
  }
  ck_assert_ct_ok(ct_mul(&prod, out, wt));
  ck_assert_ct_ok(ct_sum(&L, prod, 0, NULL, false));
  ck_assert_msg(ct_requires_grad(L), "%s: the result does not require grad", what);
  ck_assert_ct_ok(ct_backward(L, NULL));
  ct_release(L);
  ct_release(prod);
  ct_release(wt);
  ct_release(out);
  /* numeric */
  const bool f32 = gc_float(d) == CT_F32;
  const double h = f32 ? 1.0 / 512 : 1e-6, atol = f32 ? 4e-3 : 1e-6, rtol = f32 ? 4e-3 : 1e-5;
  for (int i = 0; i < n; i++) {
    if (!in[i].requires_grad) continue;
    ct_tensor *g = NULL;
    ck_assert_ct_ok(ct_grad(&g, t[i]));
    ck_assert_msg(g != NULL, "%s: input %d got no gradient", what, i);
    ck_assert_int_eq(ct_tensor_ndim(g), in[i].ndim);
    for (int k = 0; k < in[i].ndim; k++) ck_assert_int_eq(ct_tensor_shape(g)[k], in[i].shape[k]);
    ck_assert_int_eq(ct_tensor_dtype(g), ct_tensor_dtype(t[i]));
    double *a = gc_host(g);
    ct_release(g);
    int64_t m = gc_numel(&in[i]);
    for (int64_t j = 0; j < m; j++) {
      double x0 = in[i].data[j];
      /* The perturbation applied is what the input's dtype holds of x0 +- h. */
      double xp = f32 ? (double)(float)(x0 + h) : x0 + h, xm = f32 ? (double)(float)(x0 - h) : x0 - h;
      in[i].data[j] = xp;
      double lp = gc_eval(d, f, ctx, n, in, w, wn);
      in[i].data[j] = xm;
      double lm = gc_eval(d, f, ctx, n, in, w, wn);
      in[i].data[j] = x0;
      double num = (lp - lm) / (xp - xm);
      ck_assert_msg(fabs(a[j] - num) <= atol + rtol * fabs(num),
                    "%s: d/d input %d element %lld: analytic %.10g, numeric %.10g", what, i, (long long)j, a[j], num);
    }
    free(a);
  }
  for (int i = 0; i < n; i++) ct_release(t[i]);
  free(w);
}

#endif
