/* Weight initializers (include/cltensor/init.h): torch.nn.init's fans, gains and distributions
 * over the library's generator. Each one draws a temporary of t's shape (ct_rand/ct_randn), maps
 * it with elementwise ops (fused into one kernel) and copies the result into t with grad mode
 * off, so a parameter that requires grad is written in place and stays a leaf. */
#include <math.h>
#include <stdlib.h>

#include "cltensor/autograd.h"
#include "cltensor/elementwise.h"
#include "cltensor/init.h"
#include "cltensor/random.h"
#include "cltensor/shape.h"
#include "core/error.h"
#include "random/random.h"
#include "tensor/tensor.h"

ct_status ct_calculate_gain(double *gain, ct_nonlinearity nl, double param) {
  static const char fn[] = "ct_calculate_gain";
  CT__CHECK_NOT_NULL(fn, gain);
  *gain = NAN;
  switch (nl) {
  case CT_NONLINEARITY_LINEAR:
  case CT_NONLINEARITY_CONV1D:
  case CT_NONLINEARITY_CONV2D:
  case CT_NONLINEARITY_CONV3D:
  case CT_NONLINEARITY_CONV_TRANSPOSE1D:
  case CT_NONLINEARITY_CONV_TRANSPOSE2D:
  case CT_NONLINEARITY_CONV_TRANSPOSE3D:
  case CT_NONLINEARITY_SIGMOID:
    *gain = 1.0;
    return CT_OK;
  case CT_NONLINEARITY_TANH:
    *gain = 5.0 / 3.0;
    return CT_OK;
  case CT_NONLINEARITY_RELU:
    *gain = sqrt(2.0);
    return CT_OK;
  case CT_NONLINEARITY_SELU:
    *gain = 3.0 / 4.0; /* PyTorch's value for self-normalizing networks */
    return CT_OK;
  case CT_NONLINEARITY_LEAKY_RELU: {
    double slope = isnan(param) ? 0.01 : param;
    if (isinf(slope))
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: negative slope %g is not finite", fn, slope);
    *gain = sqrt(2.0 / (1.0 + slope * slope));
    return CT_OK;
  }
  }
  return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: nonlinearity %d is not a ct_nonlinearity", fn, (int)nl);
}

ct_status ct_calculate_fan_in_and_fan_out(int64_t *fan_in, int64_t *fan_out, const ct_tensor *t) {
  static const char fn[] = "ct_calculate_fan_in_and_fan_out";
  CT__CHECK_NOT_NULL(fn, t);
  if (t->ndim < 2)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
                     "(it has %d)",
                     fn, t->ndim);
  int64_t rf = 1;
  for (int i = 2; i < t->ndim; i++) rf *= t->shape[i]; /* fits: numel fits int64 (tensor.h) */
  if (fan_in) *fan_in = t->shape[1] * rf;
  if (fan_out) *fan_out = t->shape[0] * rf;
  return CT_OK;
}

/* The checks every initializer shares; *empty when there is nothing to write. */
static ct_status check_target(const ct_tensor *t, bool random, bool *empty, const char *fn) {
  CT__CHECK_NOT_NULL(fn, t);
  for (int i = 0; i < t->ndim; i++)
    if (t->strides[i] == 0 && t->shape[i] > 1)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: t is an expanded view (dim %d of size %lld has stride 0)",
                       fn, i, (long long)t->shape[i]);
  if (random && !ct_dtype_is_floating_point(t->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: t has dtype %s; random initialization needs a float dtype", fn,
                     ct_dtype_name(t->dtype));
  *empty = ct_numel(t) == 0;
  return CT_OK;
}

static ct_status check_finite(double v, const char *what, const char *fn) {
  return isfinite(v) ? CT_OK : ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s %g is not finite", fn, what, v);
}

/* The checks of a random initializer whose n parameters (names[i] = v[i]) must be finite. */
static ct_status check_random(const ct_tensor *t, bool *empty, int n, const double *v, const char *const *names,
                              const char *fn) {
  CT__TRY(check_target(t, true, empty, fn));
  for (int i = 0; i < n; i++) CT__TRY(check_finite(v[i], names[i], fn));
  return CT_OK;
}

/* The dtype draws are made and mapped in: f64 for f64, else f32 (f16/bf16 are rounded once, at
 * the copy into t). */
static ct_dtype draw_dtype(const ct_tensor *t) { return t->dtype == CT_F64 ? CT_F64 : CT_F32; }

/* t = src (cast to t's dtype) with grad mode off; takes src. */
static ct_status store(ct_tensor *t, ct_tensor *src) {
  bool prev = ct_set_grad_enabled(false);
  ct_status st = ct_copy(t, src);
  ct_set_grad_enabled(prev);
  ct_release(src);
  return st;
}

/* t = x * scale + shift, x a fresh draw of t's shape (normal or uniform), in one kernel
 * (ct__rand_affine: the same values as ct_rand() or ct_randn() then ct_mul_scalar() and
 * ct_add_scalar(), without their fused program to build in a new process); takes nothing. */
static ct_status draw_affine(ct_tensor *t, bool normal, double scale, double shift, const char *fn) {
  ct_tensor *z = NULL;
  ct_status st = ct__rand_affine(&z, t->storage->device, draw_dtype(t), t->ndim, t->shape, normal, scale, shift, fn);
  return st == CT_OK ? store(t, z) : st;
}

/* t = a fresh draw of mean 0 and standard deviation std: normal, or uniform in [-bound, bound)
 * with bound = sqrt(3) std (the kaiming and xavier initializers). */
static ct_status draw_std(ct_tensor *t, bool normal, double std, const char *fn) {
  double bound = sqrt(3.0) * std;
  return normal ? draw_affine(t, true, std, 0.0, fn) : draw_affine(t, false, 2 * bound, -bound, fn);
}

ct_status ct_uniform_(ct_tensor *t, double a, double b) {
  static const char fn[] = "ct_uniform_";
  bool empty;
  CT__TRY(check_random(t, &empty, 2, (const double[]){a, b}, (const char *const[]){"a", "b"}, fn));
  if (a > b) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: expects a <= b, got a = %g > b = %g", fn, a, b);
  return empty ? CT_OK : draw_affine(t, false, b - a, a, fn);
}

ct_status ct_normal_(ct_tensor *t, double mean, double std) {
  static const char fn[] = "ct_normal_";
  bool empty;
  CT__TRY(check_random(t, &empty, 2, (const double[]){mean, std}, (const char *const[]){"mean", "std"}, fn));
  if (std < 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: expects std >= 0, got %g", fn, std);
  return empty ? CT_OK : draw_affine(t, true, std, mean, fn);
}

/* erfinv(y) for y in [-1, 1] in double: Giles' single-precision approximation ("Approximating
 * the erfinv function", GPU Computing Gems, 2011) as the start, then two Newton steps on
 * erf(x) = y, which bring it to double's precision except within a few ulps of +-1. */
static double erfinv(double y) {
  if (y <= -1) return -INFINITY;
  if (y >= 1) return INFINITY;
  double w = -log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 2; i++) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x)); /* 2 / sqrt(pi) */
  return x;
}

static double norm_cdf(double x) { return (1.0 + erf(x / sqrt(2.0))) / 2.0; }

ct_status ct_trunc_normal_(ct_tensor *t, double mean, double std, double a, double b) {
  static const char fn[] = "ct_trunc_normal_";
  bool empty;
  CT__TRY(check_random(t, &empty, 4, (const double[]){mean, std, a, b},
                       (const char *const[]){"mean", "std", "a", "b"}, fn));
  if (!(std > 0)) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: expects std > 0, got %g", fn, std);
  if (!(a < b)) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: expects a < b, got a = %g, b = %g", fn, a, b);
  if (empty) return CT_OK;
  /* PyTorch's method (torch.nn.init._no_grad_trunc_normal_). */
  double lo = 2.0 * norm_cdf((a - mean) / std) - 1.0, hi = 2.0 * norm_cdf((b - mean) / std) - 1.0;
  ct_dtype dt = draw_dtype(t);
  int64_t n = ct_numel(t);
  size_t es = ct_dtype_size(dt);
  void *h = malloc((size_t)n * es);
  if (!h) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory for %lld values", fn, (long long)n);
  ct_tensor *u = NULL, *r = NULL;
  ct_status st = ct_rand(&u, t->storage->device, dt, t->ndim, t->shape);
  if (st == CT_OK) st = ct_to_host(u, h, (size_t)n * es);
  if (st == CT_OK) {
    for (int64_t i = 0; i < n; i++) {
      double v = dt == CT_F64 ? ((double *)h)[i] : (double)((float *)h)[i];
      double x = mean + std * sqrt(2.0) * erfinv(lo + (hi - lo) * v);
      x = x < a ? a : x > b ? b : x; /* also catches erfinv(+-1) = +-inf */
      if (dt == CT_F64)
        ((double *)h)[i] = x;
      else
        ((float *)h)[i] = (float)x;
    }
    st = ct_from_host(&r, t->storage->device, dt, t->ndim, t->shape, h);
  }
  ct_release(u);
  free(h);
  return st == CT_OK ? store(t, r) : st;
}

/* The fan kaiming divides by. */
static ct_status kaiming_std(double *std, const ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nl,
                             const char *fn) {
  if (mode != CT_FAN_IN && mode != CT_FAN_OUT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: mode %d is neither CT_FAN_IN nor CT_FAN_OUT", fn, (int)mode);
  CT__TRY(check_finite(a, "a", fn));
  int64_t fi, fo;
  CT__TRY(ct_calculate_fan_in_and_fan_out(&fi, &fo, t));
  double gain;
  CT__TRY(ct_calculate_gain(&gain, nl, a));
  int64_t fan = mode == CT_FAN_IN ? fi : fo;
  *std = gain / sqrt((double)fan); /* fan > 0 whenever t has elements */
  return CT_OK;
}

static ct_status kaiming(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nl, bool normal,
                         const char *fn) {
  bool empty;
  double std = 0;
  CT__TRY(check_target(t, true, &empty, fn));
  CT__TRY(kaiming_std(&std, t, a, mode, nl, fn));
  return empty ? CT_OK : draw_std(t, normal, std, fn);
}

ct_status ct_kaiming_uniform_(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nl) {
  return kaiming(t, a, mode, nl, false, "ct_kaiming_uniform_");
}

ct_status ct_kaiming_normal_(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nl) {
  return kaiming(t, a, mode, nl, true, "ct_kaiming_normal_");
}

static ct_status xavier_std(double *std, const ct_tensor *t, double gain, const char *fn) {
  CT__TRY(check_finite(gain, "gain", fn));
  if (gain < 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: expects gain >= 0, got %g", fn, gain);
  int64_t fi, fo;
  CT__TRY(ct_calculate_fan_in_and_fan_out(&fi, &fo, t));
  *std = gain * sqrt(2.0 / (double)(fi + fo));
  return CT_OK;
}

static ct_status xavier(ct_tensor *t, double gain, bool normal, const char *fn) {
  bool empty;
  double std = 0;
  CT__TRY(check_target(t, true, &empty, fn));
  CT__TRY(xavier_std(&std, t, gain, fn));
  return empty ? CT_OK : draw_std(t, normal, std, fn);
}

ct_status ct_xavier_uniform_(ct_tensor *t, double gain) { return xavier(t, gain, false, "ct_xavier_uniform_"); }

ct_status ct_xavier_normal_(ct_tensor *t, double gain) { return xavier(t, gain, true, "ct_xavier_normal_"); }

static ct_status fill(ct_tensor *t, double v, const char *fn) {
  bool empty;
  CT__TRY(check_target(t, false, &empty, fn));
  if (empty) return CT_OK;
  bool prev = ct_set_grad_enabled(false);
  ct_status st = ct_fill_(t, v);
  ct_set_grad_enabled(prev);
  return st;
}

ct_status ct_zeros_(ct_tensor *t) { return fill(t, 0.0, "ct_zeros_"); }
ct_status ct_ones_(ct_tensor *t) { return fill(t, 1.0, "ct_ones_"); }
