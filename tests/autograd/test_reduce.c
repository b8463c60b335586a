/* Gradients of the reductions and softmax (src/autograd/grad_reduce.c): sum, mean, prod, max/min
 * over dims, var/std, logsumexp, softmax and log_softmax against central finite differences in
 * f64 (gradcheck.h) over dims lists with negative and size-1 dims, keepdim both ways, reduce-all
 * and 0-dim inputs, strided inputs; the rules PyTorch defines exactly (max ties shared 1/k,
 * prod through zeros, std of a constant slice) against values from the reference PyTorch 2.15;
 * the autocast policy (f16/bf16 inputs reduce in f32 while autocast is on); and f32 smoke runs. */
#include "gradcheck.h"

enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_VAR, R_STD, R_STD0, R_LSE, R_SOFTMAX, R_LOGSOFTMAX, R_COUNT };
static const char *const r_names[R_COUNT] = {"sum", "mean",      "prod", "max",     "min",        "var",
                                             "std", "std(c=0)", "logsumexp", "softmax", "log_softmax"};

/* One reduction call: op over (ndims, dims) with keepdim; softmax takes dims[0]. */
struct red_ctx {
  int op, ndims, dims[4];
  bool keepdim;
};

static ct_status f_red(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct red_ctx *c = ctx;
  const ct_tensor *x = in[0];
  switch (c->op) {
  case R_SUM: return ct_sum(out, x, c->ndims, c->dims, c->keepdim);
  case R_MEAN: return ct_mean(out, x, c->ndims, c->dims, c->keepdim);
  case R_PROD: return ct_prod(out, x, c->ndims, c->dims, c->keepdim);
  case R_MAX: return ct_max(out, x, c->ndims, c->dims, c->keepdim);
  case R_MIN: return ct_min(out, x, c->ndims, c->dims, c->keepdim);
  case R_VAR: return ct_var(out, x, c->ndims, c->dims, 1, c->keepdim);
  case R_STD: return ct_std(out, x, c->ndims, c->dims, 1, c->keepdim);
  case R_STD0: return ct_std(out, x, c->ndims, c->dims, 0, c->keepdim);
  case R_LSE: return ct_logsumexp(out, x, c->ndims, c->dims, c->keepdim);
  case R_SOFTMAX: return ct_softmax(out, x, c->dims[0]);
  default: return ct_log_softmax(out, x, c->dims[0]);
  }
}

/* The shapes and dims each op is checked over (every op, each case; softmax reads dims[0]):
 *   [3, 4] dim 1, strided            [3, 4] dim -2, keepdim
 *   [3, 4] every dim (ndims 0)       [2, 1, 3] dims {1, -1} (a size-1 dim), keepdim
 *   [] (0-dim) every dim */
static const struct red_shape {
  int ndim;
  int64_t shape[3];
  bool strided;
  struct red_ctx c;
} red_shapes[] = {
    {2, {3, 4}, true, {0, 1, {1}, false}},
    {2, {3, 4}, false, {0, 1, {-2}, true}},
    {2, {3, 4}, false, {0, 0, {-1}, false}},
    {3, {2, 1, 3}, false, {0, 2, {1, -1}, true}},
    {0, {0}, false, {0, 0, {0}, false}},
};

START_TEST(reductions_gradcheck) {
  ct_device *d = ct_test_device();
  double x[12];
  for (int op = 0; op < R_COUNT; op++)
    for (size_t s = 0; s < sizeof red_shapes / sizeof red_shapes[0]; s++) {
      const struct red_shape *rs = &red_shapes[s];
      /* var/std of a 0-dim tensor with correction 1 divide by zero (inf, NaN), which finite
       * differences can't check; std's gradient needs std > 0, which a single-element slice
       * with correction 0 doesn't have either. */
      if ((op == R_VAR || op == R_STD) && rs->ndim == 0) continue;
      if (op == R_STD0 && rs->ndim == 0) continue;
      /* prod: values in [0.5, 1.5] keep products O(1); others symmetric. Distinct random
       * values: max/min have no ties. */
      gc_fill(x, 12, op == R_PROD ? 0.5 : -2, op == R_PROD ? 1.5 : 2, 1000 + 10 * op + s);
      struct red_ctx c = rs->c;
      c.op = op;
      gc_input in[1] = {{.ndim = rs->ndim, .data = x, .requires_grad = true, .strided = rs->strided}};
      memcpy(in[0].shape, rs->shape, sizeof rs->shape);
      char what[96];
      snprintf(what, sizeof what, "%s case %d", r_names[op], (int)s);
      gc_check(d, what, f_red, &c, 1, in);
    }
}
END_TEST

/* prod through zeros is a polynomial in each element, so finite differences are exact there:
 * slices with no zero, one zero and two zeros, over dim 1 and over every dim. */
START_TEST(prod_zeros_gradcheck) {
  ct_device *d = ct_test_device();
  double x[12] = {0, 1.5, -0.5, 2, 0, 0, 1.25, 0.75, 1.1, -1.3, 0.9, 0.6};
  struct red_ctx c1 = {R_PROD, 1, {-1}, false}, call = {R_PROD, 0, {0}, true};
  gc_input in[1] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true, .strided = true}};
  gc_check(d, "prod zeros dim -1", f_red, &c1, 1, in);
  double y[4] = {0.5, 0, 1.5, 2};
  gc_input in2[1] = {{.ndim = 2, .shape = {2, 2}, .data = y, .requires_grad = true}};
  gc_check(d, "prod one zero, all dims", f_red, &call, 1, in2);
}
END_TEST

/* A leaf of the checks' float dtype (gc_float: f64, or f32 without cl_khr_fp64). */
static ct_tensor *mat(ct_device *d, int ndim, const int64_t *shape, const double *v) {
  ct_tensor *t = gc_from(d, ndim, shape, v);
  ck_assert_ct_ok(ct_set_requires_grad(t, true));
  return t;
}

/* grad of sum(r) with respect to x against want (exact: the values are ratios of small
 * integers, computed in f64 by the same operations PyTorch performs; in f32 a few roundings of
 * u = 6e-8 relative each, within gc_tol's 1e-6 relative). */
static void check_exact(const char *what, ct_tensor *x, ct_tensor *r, int64_t n, const double *want) {
  ct_tensor *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_sum(&s, r, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  ck_assert_msg(g != NULL, "%s: no gradient", what);
  double *v = gc_host(g);
  const double rel = gc_tol(ct_tensor_dtype(g), 1e-15);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(isnan(want[i]) ? isnan(v[i]) : fabs(v[i] - want[i]) <= rel * fabs(want[i]),
                  "%s: element %lld is %.17g, expected %.17g", what, (long long)i, v[i], want[i]);
  free(v);
  ct_release(g);
  ct_release(s);
  ct_release(r);
  ck_assert_ct_ok(ct_grad_clear(x));
}

/* Values from PyTorch 2.15:
 *   torch.amax([[1, 3, 3], [2, 2, 2]], 1)  -> [[0, .5, .5], [1/3, 1/3, 1/3]]
 *   torch.amin(same, 1)                      -> [[1, 0, 0], [1/3, 1/3, 1/3]]
 *   torch.max([1, 3, 3, 2])                  -> [0, .5, .5, 0]
 *   torch.amax([1, nan, 2])                  -> [nan, nan, nan]
 *   torch.prod([[0, 2, 3], [0, 0, 4], [1, 2, 3]], 1) -> [[6, 0, 0], [0, 0, 0], [6, 3, 2]]
 *   torch.prod(same)                         -> zeros
 *   torch.std([2, 2, 2])                     -> [0, 0, 0]
 *   torch.var([1, 2, 4], correction=0)       -> [-8/9, -2/9, 10/9] */
START_TEST(reduction_rules_exact) {
  ct_device *d = ct_test_device();
  const int64_t s23[2] = {2, 3}, s4 = 4, s3 = 3, s33[2] = {3, 3};
  const int dim1 = 1;
  const double third = 1.0 / 3;
  const double tv[6] = {1, 3, 3, 2, 2, 2};
  ct_tensor *x = mat(d, 2, s23, tv), *r = NULL;
  ck_assert_ct_ok(ct_max(&r, x, 1, &dim1, false));
  check_exact("amax ties", x, r, 6, (const double[]){0, 0.5, 0.5, third, third, third});
  ck_assert_ct_ok(ct_min(&r, x, 1, &dim1, true));
  check_exact("amin ties", x, r, 6, (const double[]){1, 0, 0, third, third, third});
  ct_release(x);
  x = mat(d, 1, &s4, (const double[]){1, 3, 3, 2});
  ck_assert_ct_ok(ct_max(&r, x, 0, NULL, false));
  check_exact("max over all, ties", x, r, 4, (const double[]){0, 0.5, 0.5, 0});
  ct_release(x);
  x = mat(d, 1, &s3, (const double[]){1, NAN, 2});
  ck_assert_ct_ok(ct_max(&r, x, 0, NULL, false));
  check_exact("max with a NaN", x, r, 3, (const double[]){NAN, NAN, NAN});
  ct_release(x);
  x = mat(d, 2, s33, (const double[]){0, 2, 3, 0, 0, 4, 1, 2, 3});
  ck_assert_ct_ok(ct_prod(&r, x, 1, &dim1, false));
  check_exact("prod zeros", x, r, 9, (const double[]){6, 0, 0, 0, 0, 0, 6, 3, 2});
  ck_assert_ct_ok(ct_prod(&r, x, 0, NULL, false));
  check_exact("prod all, two zeros", x, r, 9, (const double[]){0, 0, 0, 0, 0, 0, 0, 0, 0});
  ct_release(x);
  x = mat(d, 1, &s3, (const double[]){2, 2, 2});
  ck_assert_ct_ok(ct_std(&r, x, 0, NULL, 1, false));
  check_exact("std of a constant", x, r, 3, (const double[]){0, 0, 0});
  ct_release(x);
  x = mat(d, 1, &s3, (const double[]){1, 2, 4});
  ck_assert_ct_ok(ct_var(&r, x, 0, NULL, 0, false));
  check_exact("var correction 0", x, r, 3, (const double[]){-8.0 / 9, -2.0 / 9, 10.0 / 9});
  ct_release(x);
}
END_TEST

/* Autocast (torch.autocast's fp32 list): with ct_autocast_set_dtype(CT_BF16), sum, mean, prod, var,
 * std, logsumexp, softmax and log_softmax of an f16 input return f32 (max keeps f16, f32 and
 * f64 inputs keep their dtype), and the gradient flows back to the f16 leaf through the cast.
 * With autocast off nothing changes: f16 in, f16 out. */
START_TEST(autocast_reductions_f32) {
  ct_device *d = ct_test_device();
  const float v[6] = {0.5f, -1.0f, 0.25f, 1.5f, -0.75f, 0.125f};
  const int64_t s23[2] = {2, 3};
  ct_tensor *x32 = NULL, *x = NULL, *x64 = NULL, *r = NULL;
  ck_assert_ct_ok(ct_from_host(&x32, d, CT_F32, 2, s23, v));
  ck_assert_ct_ok(ct_cast(&x, x32, CT_F16));
  if (ct_test_fp64(d, "f64 reductions keep f64 under autocast")) ck_assert_ct_ok(ct_cast(&x64, x32, CT_F64));
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  /* Whether ct_cast records (agview's part of issue #15, merged separately): until it does,
   * the autocast casts can't carry a gradient and only the dtypes are checked here. */
  ct_tensor *probe = NULL;
  ck_assert_ct_ok(ct_cast(&probe, x, CT_F32));
  bool cast_records = ct_requires_grad(probe);
  ct_release(probe);
  ck_assert_ct_ok(ct_autocast_set_dtype(CT_BF16));
  for (int op = 0; op < R_COUNT; op++) {
    struct red_ctx c = {op, 1, {-1}, false};
    ck_assert_ct_ok(f_red(&r, (ct_tensor *const[]){x}, &c));
    ct_dtype want = op == R_MAX || op == R_MIN ? CT_F16 : CT_F32;
    ck_assert_msg(ct_tensor_dtype(r) == want, "%s under autocast: dtype %s", r_names[op],
                  ct_dtype_name(ct_tensor_dtype(r)));
    ck_assert_msg(!cast_records || ct_requires_grad(r), "%s under autocast: the result does not require grad",
                  r_names[op]);
    ct_release(r);
    ck_assert_ct_ok(f_red(&r, (ct_tensor *const[]){x32}, &c));
    ck_assert_int_eq(ct_tensor_dtype(r), CT_F32);
    ct_release(r);
    if (!x64) continue;
    ck_assert_ct_ok(f_red(&r, (ct_tensor *const[]){x64}, &c));
    ck_assert_int_eq(ct_tensor_dtype(r), CT_F64);
    ct_release(r);
  }
  /* d/dx mean(x) over every element = 1/6, as f16 (1/6 in f16 is 0.16663) */
  if (cast_records) {
    ct_tensor *m = NULL, *g = NULL;
    ck_assert_ct_ok(ct_mean(&m, x, 0, NULL, false));
    ck_assert_int_eq(ct_tensor_dtype(m), CT_F32);
    ck_assert_ct_ok(ct_backward(m, NULL));
    ck_assert_ct_ok(ct_grad(&g, x));
    ck_assert_int_eq(ct_tensor_dtype(g), CT_F16);
    double *gv = gc_host(g);
    for (int i = 0; i < 6; i++) ck_assert_double_eq_tol(gv[i], 1.0 / 6, 1e-3);
    free(gv);
    ct_release(g);
    ct_release(m);
  }
  /* off: f16 stays f16 */
  ck_assert_ct_ok(ct_autocast_set_dtype(CT_F32));
  ck_assert_ct_ok(ct_sum(&r, x, 0, NULL, false));
  ck_assert_int_eq(ct_tensor_dtype(r), CT_F16);
  ct_release(r);
  ck_assert_ct_ok(ct_softmax(&r, x, -1));
  ck_assert_int_eq(ct_tensor_dtype(r), CT_F16);
  ct_release(r);
  ct_release(x64);
  ct_release(x);
  ct_release(x32);
}
END_TEST

/* f32: sum(logsumexp(x, -1)) has the gradient softmax(x) along the last dim, and
 * sum(std(x, 0) * mean(x, 0)) runs through var/std and mean; against host loops in double.
 * f32 rounding of O(1) values through a handful of ops: 1e-6 absolute is ~10 ulps. */
START_TEST(f32_smoke) {
  ct_device *d = ct_test_device();
  const float xv[6] = {0.5f, -1.0f, 0.25f, 1.5f, -0.75f, 0.125f};
  const int64_t s23[2] = {2, 3};
  const int last = -1, first = 0;
  ct_tensor *x = NULL, *l = NULL, *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, s23, xv));
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_logsumexp(&l, x, 1, &last, false));
  ck_assert_ct_ok(ct_sum(&s, l, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  ck_assert_int_eq(ct_tensor_dtype(g), CT_F32);
  double *v = gc_host(g);
  for (int i = 0; i < 2; i++) {
    double z = 0;
    for (int j = 0; j < 3; j++) z += exp((double)xv[i * 3 + j]);
    for (int j = 0; j < 3; j++) ck_assert_double_eq_tol(v[i * 3 + j], exp((double)xv[i * 3 + j]) / z, 1e-6);
  }
  free(v);
  ct_release(g);
  ct_release(s);
  ct_release(l);
  ck_assert_ct_ok(ct_grad_clear(x));
  /* d/dx sum_j std_j m_j, over the columns j (2 elements each, correction 1): with
   * a = x0j, b = x1j: std = |a - b| / sqrt 2, m = (a + b) / 2 */
  ct_tensor *sd = NULL, *m = NULL, *p = NULL;
  ck_assert_ct_ok(ct_std(&sd, x, 1, &first, 1, false));
  ck_assert_ct_ok(ct_mean(&m, x, 1, &first, false));
  ck_assert_ct_ok(ct_mul(&p, sd, m));
  ck_assert_ct_ok(ct_sum(&s, p, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  v = gc_host(g);
  for (int j = 0; j < 3; j++) {
    double a = xv[j], b = xv[3 + j], sg = a > b ? 1 : -1;
    double stdv = fabs(a - b) / sqrt(2.0), mv = (a + b) / 2;
    ck_assert_double_eq_tol(v[j], sg / sqrt(2.0) * mv + stdv / 2, 1e-6);
    ck_assert_double_eq_tol(v[3 + j], -sg / sqrt(2.0) * mv + stdv / 2, 1e-6);
  }
  free(v);
  ct_release(g);
  ct_release(s);
  ct_release(p);
  ct_release(m);
  ct_release(sd);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-reduce");
  TCase *tc = tcase_create("reduce");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, reductions_gradcheck);
  tcase_add_test(tc, prod_zeros_gradcheck);
  tcase_add_test(tc, reduction_rules_exact);
  tcase_add_test(tc, autocast_reductions_f32);
  tcase_add_test(tc, f32_smoke);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
