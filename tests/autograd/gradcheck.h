/* Gradient checks for the autograd tests: a function's analytic gradients (ct_backward) against
 * central finite differences, in f64 (needs cl_khr_fp64; PoCL has it).
 *
 * The scalar checked is L = sum(f(inputs) * w) with fixed random weights w, so every output
 * element's gradient matters and a formula that mixes elements up fails. Inputs are given as
 * host f64 values in logical row-major order; an input marked strided is built as a permuted
 * (transposed) view, so formulas see non-contiguous inputs. Integer inputs (indices) are built
 * as i64 and never perturbed.
 *
 * Tolerance: central differences with h = 1e-6 in f64 have a truncation error O(h^2 f''') and a
 * cancellation error about 1e-16 |L| / h = 1e-10 |L|; |analytic - numeric| <= 1e-6 + 1e-5 |numeric|
 * leaves room for both on the O(1) values the tests use, while a wrong formula is off by O(1).
 * Tests keep inputs away from kinks (relu at 0, abs at 0, clamp bounds, max ties) unless they
 * check the kink's rule exactly. */
#ifndef CT_GRADCHECK_H
#define CT_GRADCHECK_H

#include <math.h>
#include <stdint.h>

#include "ct_test.h"

#define GC_MAX_IN 6

typedef struct gc_input {
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  double *data;       /* logical row-major values (owned by the test) */
  bool requires_grad; /* checked against finite differences */
  bool strided;       /* built as a transposed view (ndim >= 2) */
  bool integer;       /* built as i64 (indices), never perturbed */
  ct_dtype dtype;     /* 0: CT_F64 (or CT_I64 when integer) */
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
  ct_dtype dt = x->dtype ? x->dtype : (x->integer ? CT_I64 : CT_F64);
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

/* Copies any float tensor to host doubles (through a cast to f64). */
static inline double *gc_host(const ct_tensor *t) {
  int64_t n = ct_numel(t);
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  ck_assert(v);
  ct_tensor *c = NULL;
  bool prev = ct_set_grad_enabled(false);
  ck_assert_ct_ok(ct_cast(&c, t, CT_F64));
  ct_set_grad_enabled(prev);
  ck_assert_ct_ok(ct_to_host(c, v, (size_t)n * sizeof *v));
  ct_release(c);
  return v;
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
  ck_assert_ct_ok(ct_from_host(&wt, d, CT_F64, ct_tensor_ndim(out), ct_tensor_shape(out), w));
  if (ct_tensor_dtype(out) != CT_F64) {
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
  const double h = 1e-6;
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
      in[i].data[j] = x0 + h;
      double lp = gc_eval(d, f, ctx, n, in, w, wn);
      in[i].data[j] = x0 - h;
      double lm = gc_eval(d, f, ctx, n, in, w, wn);
      in[i].data[j] = x0;
      double num = (lp - lm) / (2 * h);
      ck_assert_msg(fabs(a[j] - num) <= 1e-6 + 1e-5 * fabs(num),
                    "%s: d/d input %d element %lld: analytic %.10g, numeric %.10g", what, i, (long long)j, a[j], num);
    }
    free(a);
  }
  for (int i = 0; i < n; i++) ct_release(t[i]);
  free(w);
}

#endif
