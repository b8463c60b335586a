/* Host references and error bounds for the reduction tests.
 *
 * The references work on the logical (row-major) elements: floats in long double, integers in
 * 64-bit unsigned arithmetic (wrapping exactly as the library documents). Error bounds, with
 * eps_a the accumulator's epsilon (2^-23 for f16/bf16/f32, which accumulate in f32; 2^-52 for
 * f64) and eps_o the result dtype's (2^-10 f16, 2^-7 bf16, 2^-23 f32, 2^-52 f64), both twice the
 * unit roundoff so the bounds hold with a factor 2 to spare:
 *   sum   |err| <= c(n) eps_a sum|x| + eps_o |ref|, c(n) = 16 + 2 ceil(log2 n) + 8
 *         (the kernels add <= 16 elements per lane serially, then merge pairwise: the cascade
 *         and the work-item, work-group and partial trees each add O(log2 n) levels, the lane
 *         tree 3, the second pass a few more; eps_o |ref| covers the final rounding)
 *   mean  the sum's bound / n, plus one rounding for the division
 *   prod  (n + 2) eps_a |ref| + eps_o |ref| (each product rounds once; order doesn't matter)
 *   var   (c(n) + 4) eps_a S2 / den (the deviations and squares round once each, the sum as
 *         above) + n dm^2 / den (a mean off by dm adds n dm^2 to S2) + (eps_o + eps_a) |ref|
 *   std   the var bound through sqrt: dv / (2 sqrt v), or sqrt(dv) when v <= dv
 *   max, min, argmax, argmin and every integer result: exact. */
#ifndef CT_REDUCE_REF_H
#define CT_REDUCE_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/cltensor.h"
#include "tensor/tensor.h"

enum rop { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_VAR, R_STD, R_NOPS };
static const char *const rop_names[R_NOPS] = {"sum", "mean", "prod", "max", "min",
                                              "argmax", "argmin", "var", "std"};

static const ct_dtype all_dtypes[CT_DTYPE_COUNT] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32, CT_I64, CT_U16,
                                                    CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};

static inline bool rop_is_arg(enum rop op) { return op == R_ARGMAX || op == R_ARGMIN; }
static inline bool rop_float_only(enum rop op) { return op == R_MEAN || op == R_VAR || op == R_STD; }

static inline ct_dtype rop_result_dtype(enum rop op, ct_dtype t) {
  if (rop_is_arg(op)) return CT_I64;
  if ((op == R_SUM || op == R_PROD) && !ct_dtype_is_floating_point(t)) return CT_I64;
  return t;
}

static inline double dtype_eps(ct_dtype t) {
  switch (t) {
    case CT_F16: return ldexp(1, -10);
    case CT_BF16: return ldexp(1, -7);
    case CT_F32: return ldexp(1, -23);
    case CT_F64: return ldexp(1, -52);
    default: return 0;
  }
}
static inline double acc_eps(ct_dtype t) { return t == CT_F64 ? ldexp(1, -52) : ldexp(1, -23); }

static inline double c_of_n(int64_t n) {
  int lg = 0;
  while (((int64_t)1 << lg) < n) lg++;
  return 16 + 2.0 * lg + 8;
}

/* xorshift64: deterministic data. */
static inline uint64_t xs64(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}
static inline double unif(uint64_t *s) { return (double)(xs64(s) >> 11) * 0x1.0p-53; }

/* n elements of dtype t: floats uniform in [lo, hi) rounded to t, integers over their whole
 * range (or [-3, 3] when small_ints, so products stay interesting), bool 0/1. */
static inline void *make_data(ct_dtype t, int64_t n, uint64_t seed, double lo, double hi,
                              bool small_ints) {
  size_t es = ct_dtype_size(t);
  unsigned char *p = malloc((size_t)(n ? n : 1) * es);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (int64_t i = 0; i < n; i++) {
    void *e = p + (size_t)i * es;
    if (ct_dtype_is_floating_point(t)) {
      ct__host_store_double(t, e, lo + (hi - lo) * unif(&s));
    } else if (t == CT_BOOL) {
      ct__host_store_int(t, e, (int64_t)(xs64(&s) & 1));
    } else if (small_ints) {
      ct__host_store_int(t, e, (int64_t)(xs64(&s) % 7) - 3);
    } else {
      uint64_t r = xs64(&s);
      memcpy(e, &r, es); /* every bit pattern is a valid integer */
    }
  }
  return p;
}

/* The expected result of one output. */
struct expect {
  bool is_int;      /* compare ival exactly */
  int64_t ival;
  long double fval;
  long double tol;
};

/* Host reduction of vals (row-major of shape) over mask, output o (row-major over the kept
 * dims). For argmax/argmin the index is the position along the reduced dims in row-major order
 * (the flat index when every dim is reduced). */
static inline struct expect ref_one(enum rop op, ct_dtype t, const void *vals, int ndim,
                                    const int64_t *shape, const bool *mask, int64_t o,
                                    int correction) {
  size_t es = ct_dtype_size(t);
  int64_t kshape[CT_MAX_DIMS], rshape[CT_MAX_DIMS], kstr[CT_MAX_DIMS], rstr[CT_MAX_DIMS];
  int kn = 0, rn = 0;
  int64_t stride = 1;
  int64_t strides[CT_MAX_DIMS];
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= shape[i];
  }
  for (int i = 0; i < ndim; i++) {
    if (mask[i]) {
      rshape[rn] = shape[i];
      rstr[rn++] = strides[i];
    } else {
      kshape[kn] = shape[i];
      kstr[kn++] = strides[i];
    }
  }
  int64_t base = 0, rest = o, nred = 1;
  for (int i = kn - 1; i >= 0; i--) {
    base += (rest % kshape[i]) * kstr[i];
    rest /= kshape[i];
  }
  for (int i = 0; i < rn; i++) nred *= rshape[i];
  struct expect e = {0};
  bool isf = ct_dtype_is_floating_point(t);
  uint64_t usum = 0, uprod = 1;
  int64_t imax = INT64_MIN, imin = INT64_MAX;
  long double fsum = 0, fabs_sum = 0, fprod = 1, fmax = -INFINITY, fmin = INFINITY;
  bool nan = false;
  int64_t best = -1, bestiv = 0;
  long double bestv = 0;
  bool best_nan = false;
  for (int64_t j = 0; j < nred; j++) {
    int64_t off = base, r = j;
    for (int i = rn - 1; i >= 0; i--) {
      off += (r % rshape[i]) * rstr[i];
      r /= rshape[i];
    }
    const void *p = (const unsigned char *)vals + (size_t)off * es;
    if (isf) {
      long double x = ct__host_load_double(t, p);
      if (isnan(x)) nan = true;
      fsum += x;
      fabs_sum += fabsl(x);
      fprod *= x;
      if (x > fmax) fmax = x;
      if (x < fmin) fmin = x;
      if (rop_is_arg(op) && !best_nan) {
        if (isnan(x)) {
          best = j;
          best_nan = true;
        } else if (best < 0 || (op == R_ARGMAX ? x > bestv : x < bestv)) {
          best = j;
          bestv = x;
        }
      }
    } else {
      int64_t x = ct__host_load_int(t, p);
      usum += (uint64_t)x;
      uprod *= (uint64_t)x;
      if (x > imax) imax = x;
      if (x < imin) imin = x;
      if (rop_is_arg(op) && (best < 0 || (op == R_ARGMAX ? x > bestiv : x < bestiv))) {
        best = j;
        bestiv = x;
      }
    }
  }
  ct_dtype rt = rop_result_dtype(op, t);
  double eo = dtype_eps(rt), ea = acc_eps(t);
  switch (op) {
    case R_ARGMAX:
    case R_ARGMIN:
      e.is_int = true;
      e.ival = best;
      break;
    case R_SUM:
      if (!isf) {
        e.is_int = true;
        e.ival = (int64_t)usum;
      } else {
        e.fval = fsum;
        e.tol = c_of_n(nred) * ea * fabs_sum + eo * fabsl(fsum);
      }
      break;
    case R_PROD:
      if (!isf) {
        e.is_int = true;
        e.ival = (int64_t)uprod;
      } else {
        e.fval = fprod;
        e.tol = (nred + 2) * ea * fabsl(fprod) + eo * fabsl(fprod);
      }
      break;
    case R_MAX:
    case R_MIN:
      if (!isf) {
        e.is_int = true;
        e.ival = op == R_MAX ? imax : imin;
        if (t == CT_BOOL) e.ival = e.ival != 0;
      } else {
        e.fval = nan ? NAN : (op == R_MAX ? fmax : fmin);
        e.tol = 0;
      }
      break;
    case R_MEAN:
      e.fval = fsum / nred;
      e.tol = c_of_n(nred) * ea * fabs_sum / nred + (eo + ea) * fabsl(e.fval);
      break;
    case R_VAR:
    case R_STD: {
      long double m = fsum / nred, s2 = 0;
      for (int64_t j = 0; j < nred; j++) {
        int64_t off = base, r = j;
        for (int i = rn - 1; i >= 0; i--) {
          off += (r % rshape[i]) * rstr[i];
          r /= rshape[i];
        }
        long double d = ct__host_load_double(t, (const unsigned char *)vals + (size_t)off * es) - m;
        s2 += d * d;
      }
      long double den = nred - correction > 0 ? (long double)(nred - correction) : 0;
      long double v = s2 / den;
      long double dm = c_of_n(nred) * ea * fabs_sum / (nred ? nred : 1) + ea * fabsl(m);
      long double vt = ((c_of_n(nred) + 4) * ea * s2 + nred * dm * dm) / den + (eo + ea) * fabsl(v);
      if (op == R_VAR) {
        e.fval = v;
        e.tol = vt;
      } else {
        e.fval = sqrtl(v);
        e.tol = (v > vt ? vt / (2 * sqrtl(v)) : sqrtl(vt)) + (eo + ea) * e.fval;
      }
      break;
    }
    default:
      break;
  }
  return e;
}

/* Checks got (a device result element of dtype rt) against e; returns true when it passes. */
static inline bool check_one(const struct expect *e, ct_dtype rt, const void *got, char *msg,
                             size_t msz) {
  if (e->is_int) {
    int64_t g = ct__host_load_int(rt, got);
    if (g != e->ival) {
      snprintf(msg, msz, "got %lld, expected %lld", (long long)g, (long long)e->ival);
      return false;
    }
    return true;
  }
  long double g = ct__host_load_double(rt, got);
  if (isnan(e->fval) || isinf(e->fval)) {
    bool ok = isnan(e->fval) ? isnan(g) : g == e->fval;
    if (!ok) snprintf(msg, msz, "got %.17Lg, expected %.17Lg", g, e->fval);
    return ok;
  }
  if (!(fabsl(g - e->fval) <= e->tol)) {
    snprintf(msg, msz, "got %.17Lg, expected %.17Lg (error %.3Lg > bound %.3Lg)", g, e->fval,
             fabsl(g - e->fval), e->tol);
    return false;
  }
  return true;
}

#endif
