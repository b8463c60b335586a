/* Helpers for the linalg tests: tensors from deterministic data, a double-precision host
 * reference with PyTorch matmul semantics, and the error bound results are checked against.
 *
 * The bound. A dot product of length k evaluated in floating point with unit roundoff u (in any
 * order, with or without FMA, blocked as BLAS kernels do) satisfies
 *     |fl(sum a_p b_p) - sum a_p b_p| <= gamma_k * sum |a_p| |b_p|,  gamma_k = k u / (1 - k u)
 * (Higham, Accuracy and Stability of Numerical Algorithms, 3.1). addmm adds beta * c and scales
 * by alpha: two more roundings, so k + 2 stands for k. Results stored in a narrower dtype than
 * the accumulation (f16/bf16 through f32) are rounded once more: u_out * |exact|. The check is
 *     |got - exact| <= 2 (k + 2) u_acc (|alpha| S + |beta c|) + u_out |exact|
 * with S = sum |a_p||b_p| computed exactly enough in double; the factor 2 covers gamma_k's
 * denominator and the double reference's own (negligible) error. Integers must be bit-exact. */
#ifndef CT_LINALG_TEST_UTIL_H
#define CT_LINALG_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ct_test.h"
#include "device/device.h"

static inline uint64_t lt_rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static inline int64_t lt_numel(int nd, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  return n;
}

/* Stores double v as one element of dtype t (integers wrap as C's unsigned conversion). */
static inline void lt_store(void *p, int64_t i, ct_dtype t, double v) {
  switch (t) {
    case CT_F32: ((float *)p)[i] = (float)v; break;
    case CT_F64: ((double *)p)[i] = v; break;
    case CT_F16: ((uint16_t *)p)[i] = ct_f32_to_f16((float)v); break;
    case CT_BF16: ((uint16_t *)p)[i] = ct_f32_to_bf16((float)v); break;
    case CT_U8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
    case CT_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)(int64_t)v; break;
    case CT_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)(int64_t)v; break;
    case CT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
  }
}

static inline double lt_load(const void *p, int64_t i, ct_dtype t) {
  switch (t) {
    case CT_F32: return ((const float *)p)[i];
    case CT_F64: return ((const double *)p)[i];
    case CT_F16: return ct_f16_to_f32(((const uint16_t *)p)[i]);
    case CT_BF16: return ct_bf16_to_f32(((const uint16_t *)p)[i]);
    case CT_U8: return ((const uint8_t *)p)[i];
    case CT_I8: return ((const int8_t *)p)[i];
    case CT_I32: return ((const int32_t *)p)[i];
    case CT_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
  }
}

/* A new contiguous tensor of random values: floats uniform in [-1, 1) with full mantissas,
 * integers over their whole range (so products wrap), bool 0/1. */
static inline ct_tensor *lt_random(ct_device *d, ct_dtype t, int nd, const int64_t *shape, uint64_t seed) {
  int64_t n = lt_numel(nd, shape);
  void *h = malloc((size_t)(n ? n : 1) * 8);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = lt_rnd(&s);
    if (ct_dtype_is_floating_point(t)) lt_store(h, i, t, (double)(r >> 11) / 4503599627370496.0 - 1.0);
    else if (t == CT_I64) ((int64_t *)h)[i] = (int64_t)r;
    else lt_store(h, i, t, (double)(int64_t)(r >> 33) - 1073741824.0);
  }
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, t, nd, shape, h));
  free(h);
  return x;
}

/* The tensor's elements (row-major) as raw bytes, malloc'ed. */
static inline void *lt_read(const ct_tensor *t) {
  size_t n = ct_tensor_nbytes(t);
  void *p = malloc(n ? n : 1);
  ck_assert_ct_ok(ct_to_host(t, p, n));
  return p;
}

/* The matmul reference: shapes per PyTorch, exact values in double (and for integers in
 * wrapping 64-bit arithmetic), S = sum |a||b| per element. */
struct lt_ref {
  int nd;
  int64_t shape[CT_MAX_DIMS];
  int64_t n_el;
  int64_t k;
  double *val;      /* floats */
  double *absum;    /* floats: sum |a||b| */
  uint64_t *ival;   /* integers (wrapping) */
};

static inline void lt_ref_free(struct lt_ref *r) {
  free(r->val);
  free(r->absum);
  free(r->ival);
}

/* r = alpha * a @ b (+ beta * c when c), read from the device tensors. */
static inline void lt_reference(struct lt_ref *r, const ct_tensor *a, const ct_tensor *b, const ct_tensor *c,
                                double alpha, double beta) {
  ct_dtype t = ct_tensor_dtype(a);
  bool isf = ct_dtype_is_floating_point(t);
  int an = ct_tensor_ndim(a), bn = ct_tensor_ndim(b);
  const int64_t *as = ct_tensor_shape(a), *bsh = ct_tensor_shape(b);
  bool a1 = an == 1, b1 = bn == 1;
  int64_t m = a1 ? 1 : as[an - 2], k = as[an - 1], n = b1 ? 1 : bsh[bn - 1];
  int anb = a1 ? 0 : an - 2, bnb = b1 ? 0 : bn - 2, nb = anb > bnb ? anb : bnb;
  int64_t bs[CT_MAX_DIMS];
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - anb), ib = i - (nb - bnb);
    int64_t da = ia >= 0 ? as[ia] : 1, db = ib >= 0 ? bsh[ib] : 1;
    bs[i] = da == 1 ? db : da;
  }
  r->nd = 0;
  for (int i = 0; i < nb; i++) r->shape[r->nd++] = bs[i];
  if (!a1) r->shape[r->nd++] = m;
  if (!b1) r->shape[r->nd++] = n;
  r->k = k;
  int64_t batch = lt_numel(nb, bs);
  r->n_el = batch * m * n;
  size_t cnt = (size_t)(r->n_el ? r->n_el : 1);
  r->val = calloc(cnt, sizeof(double));
  r->absum = calloc(cnt, sizeof(double));
  r->ival = calloc(cnt, sizeof(uint64_t));
  void *ha = lt_read(a), *hb = lt_read(b), *hc = c ? lt_read(c) : NULL;
  /* Float operands as doubles once, not per multiply-add: f16 and bf16 loads call the library's
   * converters, m n k calls per product, which under ASan (detect_stack_use_after_return gives
   * each call a fake stack frame) took a third of the GEMM matrix's time. */
  double *da = NULL, *db = NULL;
  if (isf) {
    int64_t na = lt_numel(an, as), nbl = lt_numel(bn, bsh);
    da = malloc((size_t)(na ? na : 1) * sizeof(double));
    db = malloc((size_t)(nbl ? nbl : 1) * sizeof(double));
    ck_assert_ptr_nonnull(da);
    ck_assert_ptr_nonnull(db);
    for (int64_t i = 0; i < na; i++) da[i] = lt_load(ha, i, t);
    for (int64_t i = 0; i < nbl; i++) db[i] = lt_load(hb, i, t);
  }
  int cn = c ? ct_tensor_ndim(c) : 0;
  const int64_t *cs = c ? ct_tensor_shape(c) : NULL;
  for (int64_t bi = 0; bi < batch; bi++) {
    int64_t idx[CT_MAX_DIMS], rest = bi;
    for (int i = nb - 1; i >= 0; i--) {
      idx[i] = rest % bs[i];
      rest /= bs[i];
    }
    int64_t aoff = 0, boff = 0, am = 1, bm = 1;
    for (int i = anb - 1; i >= 0; i--) {
      int g = i + (nb - anb);
      aoff += (as[i] == 1 ? 0 : idx[g]) * am;
      am *= as[i];
    }
    for (int i = bnb - 1; i >= 0; i--) {
      int g = i + (nb - bnb);
      boff += (bsh[i] == 1 ? 0 : idx[g]) * bm;
      bm *= bsh[i];
    }
    aoff *= m * k;
    boff *= k * n;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0, sa = 0;
        uint64_t si = 0;
        for (int64_t p = 0; p < k; p++) {
          int64_t ia = aoff + i * k + p, ib = boff + p * n + j;
          if (isf) {
            double x = da[ia], y = db[ib];
            s += x * y;
            sa += fabs(x * y);
          } else {
            uint64_t x = t == CT_I64 ? (uint64_t)((int64_t *)ha)[ia] : (uint64_t)(int64_t)lt_load(ha, ia, t);
            uint64_t y = t == CT_I64 ? (uint64_t)((int64_t *)hb)[ib] : (uint64_t)(int64_t)lt_load(hb, ib, t);
            si += x * y;
          }
        }
        int64_t o = (bi * m + i) * n + j;
        double cv = 0;
        uint64_t ci = 0;
        if (c) {
          /* c's element for result index o, broadcast (right-aligned). */
          int64_t ridx[CT_MAX_DIMS], ro = o;
          for (int q = r->nd - 1; q >= 0; q--) {
            ridx[q] = ro % r->shape[q];
            ro /= r->shape[q];
          }
          int64_t coff = 0, cm = 1;
          for (int q = cn - 1; q >= 0; q--) {
            int g = q + (r->nd - cn);
            coff += (cs[q] == 1 ? 0 : ridx[g]) * cm;
            cm *= cs[q];
          }
          if (isf) cv = lt_load(hc, coff, t);
          else ci = t == CT_I64 ? (uint64_t)((int64_t *)hc)[coff] : (uint64_t)(int64_t)lt_load(hc, coff, t);
        }
        if (isf) {
          r->val[o] = alpha * s + (beta != 0 ? beta * cv : 0);
          r->absum[o] = fabs(alpha) * sa + fabs(beta * cv);
        } else {
          r->ival[o] = (uint64_t)(int64_t)alpha * si + (uint64_t)(int64_t)beta * ci;
        }
      }
  }
  free(ha);
  free(hb);
  free(hc);
  free(da);
  free(db);
}

/* Unit roundoffs: of the accumulation and of the stored result. */
static inline double lt_u(ct_dtype t) {
  switch (t) {
    case CT_F64: return ldexp(1, -53);
    case CT_F16: return ldexp(1, -11);
    case CT_BF16: return ldexp(1, -8);
    default: return ldexp(1, -24);
  }
}

/* f16 accumulates in half only where CLBlast's half GEMM runs (cl_khr_fp16, CLBlast route). */
static inline double lt_u_acc(ct_device *d, ct_dtype t) {
  if (t == CT_F64) return ldexp(1, -53);
  if (t == CT_F16 && ct_device_properties(d)->fp16) {
    ct_gemm_route route;
    if (ct_gemm_route_get(&route, d) == CT_OK && route == CT_GEMM_ROUTE_CLBLAST) return ldexp(1, -11);
  }
  return ldexp(1, -24);
}

/* Checks got (a device tensor) against the reference; what names the case in messages. */
static inline void lt_check(const ct_tensor *got, const struct lt_ref *r, const char *what) {
  ct_dtype t = ct_tensor_dtype(got);
  ck_assert_msg(ct_tensor_ndim(got) == r->nd, "%s: result has %d dims, expected %d", what, ct_tensor_ndim(got),
                r->nd);
  for (int i = 0; i < r->nd; i++)
    ck_assert_msg(ct_tensor_shape(got)[i] == r->shape[i], "%s: result dim %d is %lld, expected %lld", what, i,
                  (long long)ct_tensor_shape(got)[i], (long long)r->shape[i]);
  void *h = lt_read(got);
  ct_device *d = ct_tensor_device(got);
  double ua = lt_u_acc(d, t), uo = t == CT_F16 || t == CT_BF16 ? lt_u(t) : 0;
  for (int64_t o = 0; o < r->n_el; o++) {
    if (ct_dtype_is_floating_point(t)) {
      double g = lt_load(h, o, t), e = r->val[o];
      double tol = 2.0 * (double)(r->k + 2) * ua * r->absum[o] + uo * fabs(e) + 1e-300;
      ck_assert_msg(fabs(g - e) <= tol, "%s (%s): element %lld is %.9g, expected %.9g (|err| %.3g > bound %.3g, "
                    "k=%lld)", what, ct_dtype_name(t), (long long)o, g, e, fabs(g - e), tol, (long long)r->k);
    } else {
      uint64_t mask = t == CT_I64 ? ~0ull : t == CT_I32 ? 0xffffffffull : 0xffull;
      uint64_t g = t == CT_I64 ? (uint64_t)((int64_t *)h)[o] : (uint64_t)(int64_t)lt_load(h, o, t);
      ck_assert_msg((g & mask) == (r->ival[o] & mask), "%s (%s): element %lld is %llu, expected %llu", what,
                    ct_dtype_name(t), (long long)o, (unsigned long long)(g & mask),
                    (unsigned long long)(r->ival[o] & mask));
    }
  }
  free(h);
}

/* Multiplies a @ b with ct_matmul and checks it. */
static inline void lt_matmul_check(const ct_tensor *a, const ct_tensor *b, const char *what) {
  ct_tensor *c = NULL;
  ck_assert_ct_ok(ct_matmul(&c, a, b));
  struct lt_ref r;
  lt_reference(&r, a, b, NULL, 1, 0);
  lt_check(c, &r, what);
  lt_ref_free(&r);
  ct_release(c);
}

/* A new tensor in an OpenCL buffer of its own, created now (so its object is younger than every
 * buffer before it): the order in which a product's buffers were created is what PoCL 3.1's
 * native kernels hand pointers out by (docs/GEMM.md, "Routes"). */
static inline ct_tensor *lt_own_buffer(ct_device *d, ct_dtype t, int nd, const int64_t *shape) {
  struct _cl_context *ctx;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  size_t bytes = (size_t)lt_numel(nd, shape) * ct_dtype_size(t);
  cl_int err;
  cl_mem mem = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ct_tensor *x;
  ck_assert_ct_ok(ct_from_cl_mem(&x, d, mem, 0, t, nd, shape, NULL));
  clReleaseMemObject(mem);
  return x;
}

/* Checked fixture for the host route's mapped path (map, CBLAS on the calling thread, unmap),
 * which devices without native kernels take; PoCL has them, so the tests turn them off. */
static inline void lt_without_native_kernels(void) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  for (int i = 0; i < n; i++) {
    ct_device *d;
    ck_assert_ct_ok(ct_device_get(&d, i));
    d->native_kernels = false;
  }
}

#endif
