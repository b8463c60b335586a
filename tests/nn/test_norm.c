/* ct_layer_norm, ct_rms_norm, ct_batch_norm against double host loops over the values the
 * inputs hold.
 *
 * Bound: mean and variance are sums of n terms computed in f32 (f64), within n u of the
 * exact ones relative to the sums of absolute values whatever the order; propagated through
 * x_hat = (x - mean) * rstd that is at most about (2n + 8) u (1 + |x_hat|) on x_hat (|x_hat| is
 * at most sqrt(n)), scaled by |w|, plus roundings of the bias and of the output (u_out |y|,
 * twice for rms_norm's f16/bf16 intermediate rounding). The test allows twice that:
 *   |y - ref| <= 2 ((2n + 8) u (1 + |x_hat|) |w| + u |b| + 2 u_out |ref|) + 1e-30. */
#include <math.h>
#include <stdio.h>

#include "nn_test.h"

static double tol_of(ct_dtype dt, int64_t n, double xhat, double w, double b, double ref) {
  double u = dt == CT_F64 ? ldexp(1, -53) : ldexp(1, -24);
  return 2 * ((2 * (double)n + 8) * u * (1 + fabs(xhat)) * fabs(w) + u * fabs(b) + 2 * nt_unit(dt) * fabs(ref)) +
         1e-30;
}

enum view { V_NONE, V_TRANSPOSE };

struct lcase {
  const char *name;
  int ndim;
  int64_t shape[3];
  int nnorm;
  bool weight, bias;
  enum view view;
};

static const struct lcase lcases[] = {
    {"rows of 37, weight and bias", 2, {4, 37, 0}, 1, true, true, V_NONE},
    {"last 2 dims, weight only", 3, {3, 5, 6}, 2, true, false, V_NONE},
    {"all dims, no parameters", 2, {3, 7, 0}, 2, false, false, V_NONE},
    {"transposed x, nnorm 1", 3, {2, 9, 5}, 1, true, true, V_TRANSPOSE},
    {"transposed x, nnorm 2", 3, {2, 9, 5}, 2, true, true, V_TRANSPOSE},
    {"long rows", 2, {2, 3000, 0}, 1, true, true, V_NONE},
    {"3-D rows of 16", 3, {2, 3, 16}, 1, true, true, V_NONE},
    {"size-0 rows", 2, {0, 8, 0}, 1, true, true, V_NONE},
};
#define NL ((int)(sizeof lcases / sizeof lcases[0]))

/* mode 0 layer_norm, 1 rms_norm. */
static void run_norm(ct_device *d, ct_dtype dt, const struct lcase *c, int mode) {
  ct_tensor *base, *x;
  int64_t bshape[3];
  for (int i = 0; i < c->ndim; i++) bshape[i] = c->shape[i];
  if (c->view == V_TRANSPOSE) {
    bshape[c->ndim - 1] = c->shape[c->ndim - 2];
    bshape[c->ndim - 2] = c->shape[c->ndim - 1];
  }
  base = nt_random(d, dt, c->ndim, bshape, 41, 3, NULL);
  if (c->view == V_TRANSPOSE) ck_assert_ct_ok(ct_transpose(&x, base, c->ndim - 2, c->ndim - 1));
  else x = ct_retain(base);
  double *xv = nt_read(x), *wv = NULL, *bv = NULL;
  const int64_t *pshape = c->shape + c->ndim - c->nnorm;
  ct_tensor *w = c->weight ? nt_random(d, dt, c->nnorm, pshape, 42, 2, &wv) : NULL;
  ct_tensor *b = c->bias && mode == 0 ? nt_random(d, dt, c->nnorm, pshape, 43, 2, &bv) : NULL;
  ct_tensor *y = NULL;
  double eps = mode == 0 ? 1e-5 : NAN;
  if (mode == 0) ck_assert_ct_ok(ct_layer_norm(&y, x, c->nnorm, w, b, eps));
  else ck_assert_ct_ok(ct_rms_norm(&y, x, c->nnorm, w, eps));
  if (mode == 1)
    eps = dt == CT_F64 ? ldexp(1, -52) : dt == CT_F16 ? ldexp(1, -10) : dt == CT_BF16 ? ldexp(1, -7) : ldexp(1, -23);
  ck_assert_int_eq(ct_tensor_ndim(y), c->ndim);
  double *yv = nt_read(y);
  int64_t n = 1, rows = 1;
  for (int i = 0; i < c->ndim; i++) *(i >= c->ndim - c->nnorm ? &n : &rows) *= c->shape[i];
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = xv + r * n;
    double mean = 0, var = 0;
    if (mode == 0) {
      for (int64_t j = 0; j < n; j++) mean += xr[j];
      mean /= (double)n;
    }
    for (int64_t j = 0; j < n; j++) var += (xr[j] - mean) * (xr[j] - mean);
    double rstd = 1 / sqrt(var / (double)n + eps);
    for (int64_t j = 0; j < n; j++) {
      double xh = (xr[j] - mean) * rstd, wj = wv ? wv[j] : 1, bj = bv ? bv[j] : 0;
      double ref = xh * wj + bj;
      double tol = tol_of(dt, n, xh, wj, bj, ref) * (mode == 1 ? 2 : 1);
      ck_assert_msg(fabs(yv[r * n + j] - ref) <= tol, "%s %s %s: y[%lld] = %.9g, want %.9g (tol %.3g)", c->name,
                    mode ? "rms_norm" : "layer_norm", ct_dtype_name(dt), (long long)(r * n + j), yv[r * n + j], ref,
                    tol);
    }
  }
  free(xv);
  free(wv);
  free(bv);
  free(yv);
  ct_release(base);
  ct_release(x);
  ct_release(w);
  ct_release(b);
  ct_release(y);
}

START_TEST(test_layer_norm_f32) { run_norm(ct_test_device(), CT_F32, &lcases[_i], 0); }
END_TEST

START_TEST(test_rms_norm_f32) { run_norm(ct_test_device(), CT_F32, &lcases[_i], 1); }
END_TEST

START_TEST(test_norm_dtypes) {
  ct_device *d = ct_test_device();
  ct_dtype dts[3] = {CT_F16, CT_BF16, CT_F64};
  for (int t = 0; t < 3; t++) {
    if (dts[t] == CT_F64 && !nt_has_f64(d)) continue;
    for (int mode = 0; mode < 2; mode++) {
      run_norm(d, dts[t], &lcases[0], mode);
      run_norm(d, dts[t], &lcases[4], mode);
    }
  }
}
END_TEST

/* f16/bf16 x with f32 weight and bias (PyTorch's mixed mode): the same values as x's dtype
 * parameters holding the same numbers. */
START_TEST(test_layer_norm_mixed) {
  ct_device *d = ct_test_device();
  int64_t xs[2] = {3, 16}, ps[1] = {16};
  ct_tensor *x = nt_random(d, CT_BF16, 2, xs, 51, 2, NULL);
  ct_tensor *w16 = nt_random(d, CT_BF16, 1, ps, 52, 1, NULL), *b16 = nt_random(d, CT_BF16, 1, ps, 53, 1, NULL);
  ct_tensor *w32, *b32, *y1, *y2;
  ck_assert_ct_ok(ct_cast(&w32, w16, CT_F32));
  ck_assert_ct_ok(ct_cast(&b32, b16, CT_F32));
  ck_assert_ct_ok(ct_layer_norm(&y1, x, 1, w16, b16, 1e-5));
  ck_assert_ct_ok(ct_layer_norm(&y2, x, 1, w32, b32, 1e-5));
  ck_assert_int_eq(ct_tensor_dtype(y2), CT_BF16);
  double *v1 = nt_read(y1), *v2 = nt_read(y2);
  for (int i = 0; i < 48; i++) ck_assert_double_eq(v1[i], v2[i]);
  free(v1);
  free(v2);
  ct_release(x);
  ct_release(w16);
  ct_release(b16);
  ct_release(w32);
  ct_release(b32);
  ct_release(y1);
  ct_release(y2);
}
END_TEST

struct bcase {
  const char *name;
  int ndim;
  int64_t shape[4];
  bool training, running, weight, permuted;
};

static const struct bcase bcases[] = {
    {"train [N, C, H, W]", 4, {4, 3, 5, 6}, true, true, true, false},
    {"train [N, C]", 2, {7, 5, 0, 0}, true, true, false, false},
    {"train [N, C, L] no running stats", 3, {3, 4, 9}, true, false, true, false},
    {"train permuted x", 4, {4, 3, 5, 6}, true, true, true, true},
    {"eval [N, C, H, W]", 4, {2, 3, 4, 5}, false, true, true, false},
    {"eval permuted x", 4, {2, 3, 4, 5}, false, true, false, true},
};
#define NB ((int)(sizeof bcases / sizeof bcases[0]))

static void run_bn(ct_device *d, ct_dtype dt, ct_dtype pdt, const struct bcase *c) {
  ct_tensor *base, *x;
  if (c->permuted) {
    /* x as [N, C, H, W] over [H, N, W, C] memory. */
    int64_t bs[4] = {c->shape[2], c->shape[0], c->shape[3], c->shape[1]};
    base = nt_random(d, dt, 4, bs, 61, 3, NULL);
    ck_assert_ct_ok(ct_permute(&x, base, (int[]){1, 3, 0, 2}));
  } else {
    base = nt_random(d, dt, c->ndim, c->shape, 61, 3, NULL);
    x = ct_retain(base);
  }
  double *xv = nt_read(x);
  int64_t N = c->shape[0], C = c->shape[1], S = 1;
  for (int i = 2; i < c->ndim; i++) S *= c->shape[i];
  double *wv = NULL, *bv = NULL, *rmv = NULL, *rvv = NULL;
  ct_tensor *w = NULL, *b = NULL, *rm = NULL, *rv = NULL;
  if (c->weight) {
    w = nt_random(d, pdt, 1, &C, 62, 2, &wv);
    b = nt_random(d, pdt, 1, &C, 63, 2, &bv);
  }
  if (c->running) {
    rm = nt_random(d, pdt, 1, &C, 64, 1, &rmv);
    ct_tensor *r0 = nt_random(d, pdt, 1, &C, 65, 1, NULL), *r1 = NULL;
    ck_assert_ct_ok(ct_abs(&r1, r0));  /* variances are positive */
    ct_release(r0);
    rv = r1;
    rvv = nt_read(rv);
  }
  ct_tensor *y = NULL;
  double mom = 0.1, eps = 1e-5;
  ck_assert_ct_ok(ct_batch_norm(&y, x, rm, rv, w, b, c->training, mom, eps));
  double *yv = nt_read(y);
  double *rm2 = rm ? nt_read(rm) : NULL, *rv2 = rv ? nt_read(rv) : NULL;
  double u = dt == CT_F64 ? ldexp(1, -53) : ldexp(1, -24);
  for (int64_t ch = 0; ch < C; ch++) {
    double mean, var;
    if (c->training) {
      mean = 0;
      var = 0;
      for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) mean += xv[(n * C + ch) * S + s];
      mean /= (double)(N * S);
      for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) var += pow(xv[(n * C + ch) * S + s] - mean, 2);
      if (c->running) {
        double um = (1 - mom) * rmv[ch] + mom * mean, uv = (1 - mom) * rvv[ch] + mom * var / (double)(N * S - 1);
        double pu = nt_unit(pdt) * 2 + (double)(N * S + 8) * u * 2;
        ck_assert_msg(fabs(rm2[ch] - um) <= pu * (fabs(um) + 3), "running_mean[%lld] = %.9g, want %.9g",
                      (long long)ch, rm2[ch], um);
        ck_assert_msg(fabs(rv2[ch] - uv) <= pu * (fabs(uv) + 9), "running_var[%lld] = %.9g, want %.9g",
                      (long long)ch, rv2[ch], uv);
      }
      var /= (double)(N * S);
    } else {
      mean = rmv[ch];
      var = rvv[ch];
      ck_assert_double_eq(rm2[ch], rmv[ch]);  /* eval leaves them alone */
      ck_assert_double_eq(rv2[ch], rvv[ch]);
    }
    double rstd = 1 / sqrt(var + eps);
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) {
        int64_t i = (n * C + ch) * S + s;
        double xh = (xv[i] - mean) * rstd, wj = wv ? wv[ch] : 1, bj = bv ? bv[ch] : 0, ref = xh * wj + bj;
        double tol = tol_of(dt, c->training ? N * S : 4, xh, wj, bj, ref) + 2 * u * fabs(mean * rstd * wj);
        ck_assert_msg(fabs(yv[i] - ref) <= tol, "%s %s: y[%lld] = %.9g, want %.9g (tol %.3g)", c->name,
                      ct_dtype_name(dt), (long long)i, yv[i], ref, tol);
      }
  }
  free(xv);
  free(yv);
  free(wv);
  free(bv);
  free(rmv);
  free(rvv);
  free(rm2);
  free(rv2);
  ct_release(base);
  ct_release(x);
  ct_release(w);
  ct_release(b);
  ct_release(rm);
  ct_release(rv);
  ct_release(y);
}

START_TEST(test_batch_norm_f32) { run_bn(ct_test_device(), CT_F32, CT_F32, &bcases[_i]); }
END_TEST

START_TEST(test_batch_norm_dtypes) {
  ct_device *d = ct_test_device();
  run_bn(d, CT_BF16, CT_F32, &bcases[0]);
  run_bn(d, CT_F16, CT_F16, &bcases[4]);
  if (nt_has_f64(d)) run_bn(d, CT_F64, CT_F64, &bcases[0]);
}
END_TEST

START_TEST(test_norm_errors) {
  ct_device *d = ct_test_device();
  ct_tensor *x, *xi, *w, *w64, *one, *y = (ct_tensor *)1;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 3, (int64_t[]){2, 3, 4}));
  ck_assert_ct_ok(ct_zeros(&xi, d, CT_I32, 3, (int64_t[]){2, 3, 4}));
  ck_assert_ct_ok(ct_zeros(&w, d, CT_F32, 1, (int64_t[]){3}));
  ck_assert_ct_ok(ct_zeros(&one, d, CT_F32, 2, (int64_t[]){1, 3}));
  ck_assert_ct_status(ct_layer_norm(&y, x, 1, w, NULL, 1e-5), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("ct_layer_norm: weight has shape [3] but x's last 1 dims are [4]");
  ck_assert_ct_status(ct_layer_norm(&y, x, 4, NULL, NULL, 1e-5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("nnorm is 4; it must be between 1 and x's 3 dims");
  ck_assert_ct_status(ct_rms_norm(&y, xi, 1, NULL, NAN), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("ct_rms_norm: x has dtype i32");
  ck_assert_ct_status(ct_layer_norm(&y, x, 1, NULL, NULL, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("eps must be >= 0, got -1");
  ck_assert_ct_status(ct_batch_norm(&y, x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("eval mode (training false) needs running_mean and running_var");
  ck_assert_ct_status(ct_batch_norm(&y, x, one, one, NULL, NULL, true, 0.1, 1e-5), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("running_mean must be [3] (x's channels, x [2, 3, 4]), got [1, 3]");
  if (nt_has_f64(d)) {
    ck_assert_ct_ok(ct_zeros(&w64, d, CT_F64, 1, (int64_t[]){3}));
    ct_tensor *x2;
    ck_assert_ct_ok(ct_zeros(&x2, d, CT_F32, 2, (int64_t[]){2, 3}));
    ck_assert_ct_status(ct_batch_norm(&y, x2, NULL, NULL, w64, NULL, true, 0.1, 1e-5), CT_ERR_DTYPE_MISMATCH);
    ck_assert_error_contains("weight has dtype f64 but x has f32");
    ct_release(x2);
    ct_release(w64);
  }
  ct_tensor *rm, *rv;
  ck_assert_ct_ok(ct_zeros(&rm, d, CT_F32, 1, (int64_t[]){3}));
  ck_assert_ct_ok(ct_ones(&rv, d, CT_F32, 1, (int64_t[]){3}));
  ck_assert_ct_status(ct_batch_norm(&y, one, rm, rv, NULL, NULL, true, 0.1, 1e-5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("more than 1 value per channel");
  /* Without running statistics too, as PyTorch (it returned zeros before). */
  ck_assert_ct_status(ct_batch_norm(&y, one, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("more than 1 value per channel");
  ck_assert_ct_status(ct_batch_norm(&y, w, rm, rv, NULL, NULL, true, 0.1, 1e-5), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("x must have at least 2 dims [N, C, ...], got [3]");
  /* Size-0 batch in eval mode: an empty result. */
  ct_tensor *e;
  ck_assert_ct_ok(ct_zeros(&e, d, CT_F32, 3, (int64_t[]){0, 3, 4}));
  ck_assert_ct_ok(ct_batch_norm(&y, e, rm, rv, NULL, NULL, false, 0.1, 1e-5));
  ck_assert_int_eq(ct_numel(y), 0);
  ct_release(y);
  ct_release(e);
  ct_release(rm);
  ct_release(rv);
  ct_release(x);
  ct_release(xi);
  ct_release(w);
  ct_release(one);
}
END_TEST

/* Training writes the running statistics in place (issue #28): an expanded one (stride 0, one
 * cell for every channel) took every channel's update, and one tensor passed as both took both
 * statistics; both are refused before anything runs. */
START_TEST(test_batch_norm_running_stats_writable) {
  ct_device *d = ct_test_device();
  ct_tensor *x, *cell, *wide, *rm, *rv, *y = (ct_tensor *)1;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 3, (int64_t[]){2, 3, 4}));
  ck_assert_ct_ok(ct_zeros(&cell, d, CT_F32, 1, (int64_t[]){1}));
  ck_assert_ct_ok(ct_expand(&wide, cell, 1, (int64_t[]){3}));
  ck_assert_ct_ok(ct_zeros(&rm, d, CT_F32, 1, (int64_t[]){3}));
  ck_assert_ct_ok(ct_ones(&rv, d, CT_F32, 1, (int64_t[]){3}));
  ck_assert_ct_status(ct_batch_norm(&y, x, wide, rv, NULL, NULL, true, 0.1, 1e-5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("ct_batch_norm: running_mean of shape [3] (strides [0]) has stride 0 at dim 0");
  ck_assert_error_contains("share one memory location");
  ck_assert_ct_status(ct_batch_norm(&y, x, rm, wide, NULL, NULL, true, 0.1, 1e-5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("running_var of shape [3] (strides [0])");
  ck_assert_ct_status(ct_batch_norm(&y, x, rm, rm, NULL, NULL, true, 0.1, 1e-5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("running_mean and running_var share memory");
  ct_release(rv);
  ct_release(rm);
  ct_release(wide);
  ct_release(cell);
  ct_release(x);
}
END_TEST

/* PyTorch's norms on the cases of tests/nn/data/gen_nn.py. f32: rows of at most 20 (layer/rms
 * norm) or 100 values (batch norm) with |x| <= 3: the statistics' summation order changes y by
 * far less than 1e-5 + 1e-5 |ref|. bf16 layer_norm: both compute in f32 and round once, so the
 * results differ only where the f32 values straddle a rounding boundary: at most one bf16 ulp
 * (2^-7 |ref|). */
START_TEST(test_norm_torch) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = nt_fixture(d);
  ct_tensor *x = nt_get(st, "ln_bf16.x"), *w = nt_get(st, "ln_bf16.w"), *b = nt_get(st, "ln_bf16.b");
  ct_tensor *ref = nt_get(st, "ln_bf16.y"), *y;
  ck_assert_ct_ok(ct_layer_norm(&y, x, 1, w, b, 1e-5));
  nt_assert_close(y, ref, 1e-30, ldexp(1, -7), "layer_norm bf16");
  ct_release(x), ct_release(w), ct_release(b), ct_release(ref), ct_release(y);
  x = nt_get(st, "ln.x"), w = nt_get(st, "ln.w"), b = nt_get(st, "ln.b"), ref = nt_get(st, "ln.y");
  ck_assert_ct_ok(ct_layer_norm(&y, x, 2, w, b, 1e-5));
  nt_assert_close(y, ref, 1e-5, 1e-5, "layer_norm");
  ct_release(x), ct_release(w), ct_release(b), ct_release(ref), ct_release(y);
  x = nt_get(st, "rms.x"), w = nt_get(st, "rms.w"), ref = nt_get(st, "rms.y");
  ck_assert_ct_ok(ct_rms_norm(&y, x, 1, w, NAN));
  nt_assert_close(y, ref, 1e-5, 1e-5, "rms_norm");
  ct_release(x), ct_release(w), ct_release(ref), ct_release(y);
  x = nt_get(st, "bn.x"), w = nt_get(st, "bn.w"), b = nt_get(st, "bn.b");
  ct_tensor *rm = nt_get(st, "bn.rm"), *rv = nt_get(st, "bn.rv");
  ref = nt_get(st, "bn.y_train");
  ck_assert_ct_ok(ct_batch_norm(&y, x, rm, rv, w, b, true, 0.1, 1e-5));
  nt_assert_close(y, ref, 1e-5, 1e-5, "batch_norm training");
  ct_release(ref), ct_release(y);
  ref = nt_get(st, "bn.rm_after");
  nt_assert_close(rm, ref, 1e-6, 1e-5, "running_mean after training");
  ct_release(ref);
  ref = nt_get(st, "bn.rv_after");
  nt_assert_close(rv, ref, 1e-6, 1e-5, "running_var after training");
  ct_release(ref);
  ref = nt_get(st, "bn.y_eval");
  ck_assert_ct_ok(ct_batch_norm(&y, x, rm, rv, w, b, false, 0.1, 1e-5));
  nt_assert_close(y, ref, 1e-5, 1e-5, "batch_norm eval");
  ct_release(ref), ct_release(y), ct_release(x), ct_release(w), ct_release(b), ct_release(rm), ct_release(rv);
  ct_safetensors_free(st);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nn-norm");
  TCase *tc = tcase_create("norm");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_layer_norm_f32, 0, NL);
  tcase_add_loop_test(tc, test_rms_norm_f32, 0, NL);
  tcase_add_test(tc, test_norm_dtypes);
  tcase_add_test(tc, test_layer_norm_mixed);
  tcase_add_loop_test(tc, test_batch_norm_f32, 0, NB);
  tcase_add_test(tc, test_batch_norm_dtypes);
  tcase_add_test(tc, test_norm_errors);
  tcase_add_test(tc, test_batch_norm_running_stats_writable);
  tcase_add_test(tc, test_norm_torch);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
