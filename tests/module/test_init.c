/* The initializers of include/cltensor/init.h: fans and gains against PyTorch's
 * torch.nn.init (data/module_ref.safetensors, make_fixtures.py), and each distribution's
 * statistics on about a million draws.
 *
 * Tolerances. With n independent draws of a distribution of standard deviation s, the sample
 * mean is within 6 s / sqrt(n) of the true mean except with probability ~2e-9, and the sample
 * standard deviation within 6 s sqrt((k - 1) / (4 n)) of s, k the kurtosis (1.8 for a uniform,
 * 3 for a normal, below 3 for a truncated normal; 3 is used for it). The bounds of the uniform
 * and truncated draws are exact: no value may leave them. The draws are seeded, so a run that
 * passes passes every time; the 6-sigma margins keep the check meaningful for any seed (a
 * wrong bound, fan or gain moves the statistics by far more). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ct_fixture.h"

static const char *fixture_path(void) {
  static char path[1024];
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/tests/module/data/module_ref.safetensors", root ? root : ".");
  return path;
}

/* The fixture on d; its two f64 entries (fans, gains) arrive as f32 on a device without fp64,
 * and are read exactly on the host instead (ct_test_st_f64). */
static ct_safetensors *fixture(ct_device *d) {
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(
      ct_safetensors_load_as(&st, fixture_path(), d, CT_F64, ct_device_properties(d)->fp64 ? CT_F64 : CT_F32));
  return st;
}

static ct_tensor *empty_f32(ct_device *d, int ndim, const int64_t *shape) {
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_empty(&t, d, CT_F32, ndim, shape));
  return t;
}

struct stats {
  double mean, std, lo, hi;
  int64_t n;
};

static struct stats stats_of(const ct_tensor *t) {
  double *v = ct_test_to_doubles(t);
  struct stats s = {.lo = INFINITY, .hi = -INFINITY, .n = ct_numel(t)};
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < s.n; i++) {
    sum += v[i];
    s.lo = fmin(s.lo, v[i]);
    s.hi = fmax(s.hi, v[i]);
  }
  s.mean = sum / (double)s.n;
  for (int64_t i = 0; i < s.n; i++) sq += (v[i] - s.mean) * (v[i] - s.mean);
  s.std = sqrt(sq / (double)(s.n - 1));
  free(v);
  return s;
}

/* Mean and std within 6 sigma of (mean, std) for kurtosis k. */
static void assert_moments(const struct stats *s, double mean, double std, double k, const char *what) {
  double sn = sqrt((double)s->n);
  double tm = 6 * std / sn, ts = 6 * std * sqrt((k - 1) / 4) / sn;
  ck_assert_msg(fabs(s->mean - mean) <= tm, "%s: mean %.6g, expected %.6g +- %.3g", what, s->mean, mean, tm);
  ck_assert_msg(fabs(s->std - std) <= ts, "%s: std %.6g, expected %.6g +- %.3g", what, s->std, std, ts);
}

static void assert_within(const struct stats *s, double lo, double hi, const char *what) {
  ck_assert_msg(s->lo >= lo && s->hi <= hi, "%s: values in [%.9g, %.9g], outside [%.9g, %.9g]", what, s->lo, s->hi,
                lo, hi);
}

START_TEST(fans_and_gains_match_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  int64_t nf = 0, ng = 0;
  double *f = ct_test_st_f64(fixture_path(), "fans", &nf), *g = ct_test_st_f64(fixture_path(), "gains", &ng);
  ck_assert_int_eq(nf, 10);
  ck_assert_int_eq(ng, 14);
  static const int64_t shapes[][5] = {{3, 4}, {16, 3, 5, 5}, {8, 2, 7}, {5, 6, 1, 1, 2}, {1, 1}};
  static const int ndims[] = {2, 4, 3, 5, 2};
  ck_assert_str_eq(ct_safetensors_metadata_get(st, "fan_shapes"), "3,4;16,3,5,5;8,2,7;5,6,1,1,2;1,1");
  for (int i = 0; i < 5; i++) {
    ct_tensor *t = empty_f32(d, ndims[i], shapes[i]);
    int64_t fi = -1, fo = -1;
    ck_assert_ct_ok(ct_calculate_fan_in_and_fan_out(&fi, &fo, t));
    ck_assert_int_eq(fi, (int64_t)f[2 * i]);
    ck_assert_int_eq(fo, (int64_t)f[2 * i + 1]);
    ct_release(t);
  }
  for (int nl = CT_NONLINEARITY_LEAKY_RELU; nl <= CT_NONLINEARITY_SELU; nl++) {
    double gain = 0;
    ck_assert_ct_ok(ct_calculate_gain(&gain, (ct_nonlinearity)nl, NAN));
    ck_assert_msg(fabs(gain - g[nl]) <= 1e-15 * g[nl], "gain of nonlinearity %d: %.17g, PyTorch %.17g", nl, gain,
                  g[nl]);
  }
  double gain = 0;
  ck_assert_ct_ok(ct_calculate_gain(&gain, CT_NONLINEARITY_LEAKY_RELU, 0.2));
  ck_assert_double_eq_tol(gain, g[12], 1e-15);
  ck_assert_ct_ok(ct_calculate_gain(&gain, CT_NONLINEARITY_LEAKY_RELU, sqrt(5.0)));
  ck_assert_double_eq_tol(gain, g[13], 1e-15);
  /* A param is ignored where PyTorch ignores it. */
  ck_assert_ct_ok(ct_calculate_gain(&gain, CT_NONLINEARITY_RELU, 0.7));
  ck_assert_double_eq_tol(gain, sqrt(2.0), 1e-15);
  free(f);
  free(g);
  ct_safetensors_free(st);
}
END_TEST

START_TEST(uniform_and_normal_statistics) {
  ct_device *d = ct_test_device();
  ct_manual_seed(301);
  ct_tensor *t = empty_f32(d, 2, (int64_t[]){1024, 1024});
  ck_assert_ct_ok(ct_uniform_(t, -0.5, 2.5));
  struct stats s = stats_of(t);
  assert_within(&s, -0.5, 2.5, "uniform_(-0.5, 2.5)");
  ck_assert_double_lt(s.hi, 2.5); /* [a, b): f32 draws below 1 map below b here */
  assert_moments(&s, 1.0, 3.0 / sqrt(12.0), 1.8, "uniform_(-0.5, 2.5)");
  ck_assert_ct_ok(ct_normal_(t, 3.0, 0.25));
  s = stats_of(t);
  assert_moments(&s, 3.0, 0.25, 3.0, "normal_(3, 0.25)");
  /* std 0 is a constant, as PyTorch. */
  ck_assert_ct_ok(ct_normal_(t, -1.5, 0.0));
  s = stats_of(t);
  ck_assert(s.lo == -1.5 && s.hi == -1.5);
  ct_release(t);
}
END_TEST

static double phi(double x) { return exp(-x * x / 2) / sqrt(2 * M_PI); }
static double cdf(double x) { return 0.5 * (1 + erf(x / sqrt(2.0))); }

START_TEST(trunc_normal_statistics) {
  ct_device *d = ct_test_device();
  ct_manual_seed(302);
  ct_tensor *t = empty_f32(d, 1, (int64_t[]){1 << 20});
  /* (mean, std, a, b): timm's usual (0, 0.02, -2, 2) is the plain normal; a one-sided cut and
   * a window off the mean show the truncation. */
  static const double cases[][4] = {{0, 0.02, -2, 2}, {0, 1, -0.5, 3}, {1, 2, 2, 4}};
  for (int c = 0; c < 3; c++) {
    double mu = cases[c][0], sg = cases[c][1], a = cases[c][2], b = cases[c][3];
    ck_assert_ct_ok(ct_trunc_normal_(t, mu, sg, a, b));
    struct stats s = stats_of(t);
    double al = (a - mu) / sg, be = (b - mu) / sg, z = cdf(be) - cdf(al);
    double mean = mu + sg * (phi(al) - phi(be)) / z;
    double var = sg * sg * (1 + (al * phi(al) - be * phi(be)) / z - pow((phi(al) - phi(be)) / z, 2));
    char what[128];
    snprintf(what, sizeof what, "trunc_normal_(%g, %g, %g, %g)", mu, sg, a, b);
    assert_within(&s, a, b, what);
    assert_moments(&s, mean, sqrt(var), 3.0, what);
  }
  ct_release(t);
}
END_TEST

START_TEST(kaiming_and_xavier_statistics) {
  ct_device *d = ct_test_device();
  ct_manual_seed(303);
  /* fan_in 128 * 9 = 1152, fan_out 1024 * 9 = 9216. */
  ct_tensor *w = empty_f32(d, 4, (int64_t[]){1024, 128, 3, 3});
  double fi = 1152, fo = 9216;
  /* PyTorch's defaults (a = 0, fan_in, leaky_relu): gain sqrt(2). */
  ck_assert_ct_ok(ct_kaiming_uniform_(w, 0, CT_FAN_IN, CT_NONLINEARITY_LEAKY_RELU));
  struct stats s = stats_of(w);
  double std = sqrt(2.0) / sqrt(fi), bound = sqrt(3.0) * std;
  assert_within(&s, -bound, bound, "kaiming_uniform_ defaults");
  assert_moments(&s, 0, std, 1.8, "kaiming_uniform_ defaults");
  /* nn.Linear's a = sqrt(5): bound 1 / sqrt(fan_in). */
  ck_assert_ct_ok(ct_kaiming_uniform_(w, sqrt(5.0), CT_FAN_IN, CT_NONLINEARITY_LEAKY_RELU));
  s = stats_of(w);
  assert_within(&s, -1 / sqrt(fi), 1 / sqrt(fi), "kaiming_uniform_(a = sqrt(5))");
  assert_moments(&s, 0, 1 / sqrt(fi) / sqrt(3.0), 1.8, "kaiming_uniform_(a = sqrt(5))");
  ck_assert_ct_ok(ct_kaiming_normal_(w, 0, CT_FAN_OUT, CT_NONLINEARITY_RELU));
  s = stats_of(w);
  assert_moments(&s, 0, sqrt(2.0) / sqrt(fo), 3.0, "kaiming_normal_(fan_out, relu)");
  ck_assert_ct_ok(ct_kaiming_normal_(w, 0, CT_FAN_IN, CT_NONLINEARITY_TANH));
  s = stats_of(w);
  assert_moments(&s, 0, 5.0 / 3.0 / sqrt(fi), 3.0, "kaiming_normal_(fan_in, tanh)");
  ck_assert_ct_ok(ct_xavier_uniform_(w, 2.0));
  s = stats_of(w);
  std = 2.0 * sqrt(2.0 / (fi + fo));
  assert_within(&s, -sqrt(3.0) * std, sqrt(3.0) * std, "xavier_uniform_(gain 2)");
  assert_moments(&s, 0, std, 1.8, "xavier_uniform_(gain 2)");
  ck_assert_ct_ok(ct_xavier_normal_(w, 1.0));
  s = stats_of(w);
  assert_moments(&s, 0, sqrt(2.0 / (fi + fo)), 3.0, "xavier_normal_(gain 1)");
  ct_release(w);
}
END_TEST

START_TEST(dtypes_views_and_leaves) {
  ct_device *d = ct_test_device();
  ct_manual_seed(304);
  /* f16 and bf16 get values rounded once into their dtype, inside the bounds. */
  ct_dtype dts[] = {CT_F16, CT_BF16};
  for (int i = 0; i < 2; i++) {
    ct_tensor *t = NULL;
    ck_assert_ct_ok(ct_empty(&t, d, dts[i], 2, (int64_t[]){256, 256}));
    ck_assert_ct_ok(ct_uniform_(t, -1, 1));
    struct stats s = stats_of(t);
    assert_within(&s, -1, 1, ct_dtype_name(dts[i]));
    ck_assert_double_gt(s.hi - s.lo, 1.9);
    ck_assert_int_eq(ct_tensor_dtype(t), dts[i]);
    ct_release(t);
  }
  if (ct_test_fp64(d, "f64 initializers")) {
    ct_tensor *t = NULL;
    ck_assert_ct_ok(ct_empty(&t, d, CT_F64, 1, (int64_t[]){1 << 18}));
    ck_assert_ct_ok(ct_normal_(t, 0, 1));
    struct stats s = stats_of(t);
    assert_moments(&s, 0, 1, 3, "f64 normal_");
    ct_release(t);
  }
  /* A strided view: only its elements change. */
  ct_tensor *z = NULL, *v = NULL;
  ck_assert_ct_ok(ct_zeros(&z, d, CT_F32, 2, (int64_t[]){4, 6}));
  ck_assert_ct_ok(ct_slice(&v, z, 1, 1, 6, 2)); /* columns 1, 3, 5 */
  ck_assert_ct_ok(ct_uniform_(v, 1, 2));
  ck_assert_ct_ok(ct_ones_(v));
  double *h = ct_test_to_doubles(z);
  for (int i = 0; i < 24; i++) ck_assert_double_eq(h[i], (i % 6) % 2 ? 1.0 : 0.0);
  free(h);
  ck_assert_ct_ok(ct_kaiming_uniform_(v, 0, CT_FAN_IN, CT_NONLINEARITY_RELU));
  h = ct_test_to_doubles(z);
  for (int i = 0; i < 24; i++)
    if ((i % 6) % 2 == 0) ck_assert_double_eq(h[i], 0.0);
  free(h);
  ct_release(v);
  ct_release(z);
  /* A parameter with grad mode on: written in place, still a leaf that requires grad. */
  ct_tensor *p = empty_f32(d, 2, (int64_t[]){8, 4});
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ck_assert(ct_is_grad_enabled());
  ck_assert_ct_ok(ct_xavier_normal_(p, 1));
  ck_assert_ct_ok(ct_zeros_(p));
  ck_assert_ct_ok(ct_trunc_normal_(p, 0, 1, -1, 1));
  ck_assert(ct_is_leaf(p) && ct_requires_grad(p) && ct_is_grad_enabled());
  ct_release(p);
  /* zeros_/ones_ take any dtype. */
  ct_tensor *iz = NULL;
  ck_assert_ct_ok(ct_full(&iz, d, CT_I32, 1, (int64_t[]){5}, 7));
  ck_assert_ct_ok(ct_ones_(iz));
  h = ct_test_to_doubles(iz);
  for (int i = 0; i < 5; i++) ck_assert_double_eq(h[i], 1.0);
  free(h);
  ck_assert_ct_ok(ct_zeros_(iz));
  h = ct_test_to_doubles(iz);
  for (int i = 0; i < 5; i++) ck_assert_double_eq(h[i], 0.0);
  free(h);
  ct_release(iz);
}
END_TEST

START_TEST(generator_state) {
  ct_device *d = ct_test_device();
  ct_tensor *a = empty_f32(d, 2, (int64_t[]){16, 16}), *b = empty_f32(d, 2, (int64_t[]){16, 16});
  uint64_t seed, off0, off1;
  ct_manual_seed(7);
  ck_assert_ct_ok(ct_kaiming_normal_(a, 0, CT_FAN_IN, CT_NONLINEARITY_RELU));
  ck_assert_ct_ok(ct_rng_get_state(&seed, &off0));
  ck_assert_int_eq(off0, 1); /* one offset per call */
  ct_manual_seed(7);
  ck_assert_ct_ok(ct_kaiming_normal_(b, 0, CT_FAN_IN, CT_NONLINEARITY_RELU));
  double *x = ct_test_to_doubles(a), *y = ct_test_to_doubles(b);
  ck_assert(memcmp(x, y, 256 * sizeof *x) == 0);
  ck_assert_ct_ok(ct_kaiming_normal_(b, 0, CT_FAN_IN, CT_NONLINEARITY_RELU));
  free(y);
  y = ct_test_to_doubles(b);
  ck_assert(memcmp(x, y, 256 * sizeof *x) != 0);
  free(x);
  free(y);
  /* An empty tensor and a refused call take no offset. */
  ck_assert_ct_ok(ct_rng_get_state(&seed, &off0));
  ct_tensor *e = empty_f32(d, 2, (int64_t[]){0, 5});
  ck_assert_ct_ok(ct_uniform_(e, 0, 1));
  ck_assert_ct_ok(ct_trunc_normal_(e, 0, 1, -2, 2));
  ck_assert_ct_status(ct_uniform_(a, 1, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_rng_get_state(&seed, &off1));
  ck_assert_int_eq(off0, off1);
  ct_release(e);
  ct_release(a);
  ct_release(b);
}
END_TEST

/* ct_uniform_ and ct_normal_ draw and scale in one kernel (ct__rand_affine): the values are those
 * of ct_rand() / ct_randn() from the same generator state, then ct_mul_scalar() and
 * ct_add_scalar(), bit for bit, in every float dtype (f16 and bf16 draw in f32 and round once
 * at the store, as the ops' result copied into them would); odd sizes leave a partial block. */
START_TEST(affine_draws_equal_the_ops) {
  ct_device *d = ct_test_device();
  const ct_dtype dts[4] = {CT_F32, CT_F16, CT_BF16, CT_F64};
  const int ndt = ct_device_properties(d)->fp64 ? 4 : 3;
  const double ab[3][2] = {{-0.37, 0.91}, {1e-3, 2.5}, {-3.0, -1.0 / 3.0}};
  for (int k = 0; k < ndt; k++)
    for (int normal = 0; normal < 2; normal++)
      for (int c = 0; c < 3; c++) {
        const int64_t shape[2] = {3, 37 + c};
        const ct_dtype dt = dts[k], draw = dt == CT_F64 ? CT_F64 : CT_F32;
        ct_tensor *t = NULL, *x = NULL, *y = NULL, *z = NULL, *w = NULL;
        const double scale = ab[c][1] - ab[c][0], shift = ab[c][0]; /* the std of a normal */
        ct_manual_seed(900 + (uint64_t)c);
        ck_assert_ct_ok(ct_empty(&t, d, dt, 2, shape));
        ck_assert_ct_ok(normal ? ct_normal_(t, shift, scale) : ct_uniform_(t, ab[c][0], ab[c][1]));
        ct_manual_seed(900 + (uint64_t)c);
        ck_assert_ct_ok(normal ? ct_randn(&x, d, draw, 2, shape) : ct_rand(&x, d, draw, 2, shape));
        ck_assert_ct_ok(ct_mul_scalar(&y, x, scale));
        ck_assert_ct_ok(ct_add_scalar(&z, y, shift));
        ck_assert_ct_ok(ct_cast(&w, z, dt));
        const size_t nb = ct_tensor_nbytes(t);
        unsigned char *a = malloc(nb), *b = malloc(nb);
        ck_assert_ct_ok(ct_to_host(t, a, nb));
        ck_assert_ct_ok(ct_to_host(w, b, nb));
        ck_assert_msg(memcmp(a, b, nb) == 0, "%s %s draw %d differs from the ops", ct_dtype_name(dt),
                      normal ? "normal" : "uniform", c);
        free(a), free(b);
        ct_release(t), ct_release(x), ct_release(y), ct_release(z), ct_release(w);
      }
}
END_TEST

START_TEST(errors) {
  ct_device *d = ct_test_device();
  ct_tensor *v1 = empty_f32(d, 1, (int64_t[]){5}), *w = empty_f32(d, 2, (int64_t[]){3, 4}), *i = NULL, *x = NULL;
  ck_assert_ct_ok(ct_empty(&i, d, CT_I64, 2, (int64_t[]){3, 4}));
  ck_assert_ct_status(ct_kaiming_uniform_(v1, 0, CT_FAN_IN, CT_NONLINEARITY_RELU), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("fewer than 2 dimensions");
  ck_assert_ct_status(ct_xavier_normal_(v1, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_uniform_(i, 0, 1), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("i64");
  ck_assert_ct_status(ct_normal_(w, 0, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_normal_(w, NAN, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_uniform_(w, 0, INFINITY), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_trunc_normal_(w, 0, 1, 2, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_trunc_normal_(w, 0, 0, -1, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_kaiming_uniform_(w, 0, (ct_fan_mode)2, CT_NONLINEARITY_RELU), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_kaiming_uniform_(w, 0, CT_FAN_IN, (ct_nonlinearity)99), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_xavier_uniform_(w, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_calculate_gain(NULL, CT_NONLINEARITY_RELU, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_calculate_fan_in_and_fan_out(NULL, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_zeros_(NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_expand(&x, v1, 2, (int64_t[]){3, 5}));
  ck_assert_ct_status(ct_normal_(x, 0, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("expanded");
  ct_release(x);
  ct_release(i);
  ct_release(w);
  ct_release(v1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("init");
  TCase *tc = ct_test_case(s, "pytorch", 300);
  tcase_add_test(tc, fans_and_gains_match_pytorch);
  tc = ct_test_case(s, "statistics", 300);
  tcase_add_test(tc, uniform_and_normal_statistics);
  tcase_add_test(tc, trunc_normal_statistics);
  tcase_add_test(tc, kaiming_and_xavier_statistics);
  tcase_add_test(tc, dtypes_views_and_leaves);
  tcase_add_test(tc, generator_state);
  tcase_add_test(tc, affine_draws_equal_the_ops);
  tc = ct_test_case(s, "errors", 300);
  tcase_add_test(tc, errors);
  return ct_test_run(s);
}
