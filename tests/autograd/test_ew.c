/* Gradients of the elementwise ops (src/autograd/grad_ew.c): every differentiable row of
 * src/elementwise/ops.def against central finite differences in f64 (gradcheck.h), with
 * broadcast, strided and scalar forms; the subgradients PyTorch defines at kinks (relu and abs
 * at 0, maximum/minimum ties, clamp at its bounds, leaky_relu at 0, softplus at its threshold)
 * checked exactly against values computed by the reference PyTorch 2.15 (quoted beside each);
 * the zero-gradient ops give explicit zeros; results of comparisons and argmax don't require
 * grad; and one f32 chain as a smoke test. Inputs stay away from kinks and jumps in the
 * finite-difference checks (a kink within h = 1e-6 of an input would make the numeric
 * derivative meaningless, not the formula wrong). */
#include "gradcheck.h"

/* ---- unary ops ---- */

typedef ct_status (*un_fn)(ct_tensor **out, const ct_tensor *x);

static ct_status ew_leaky(ct_tensor **out, const ct_tensor *x) { return ct_leaky_relu(out, x, 0.1); }
static ct_status ew_clamp_both(ct_tensor **out, const ct_tensor *x) { return ct_clamp(out, x, -0.5, 0.5); }
static ct_status ew_clamp_lo(ct_tensor **out, const ct_tensor *x) { return ct_clamp(out, x, -0.5, NAN); }
static ct_status ew_clamp_hi(ct_tensor **out, const ct_tensor *x) { return ct_clamp(out, x, NAN, 0.5); }
static ct_status ew_max_s(ct_tensor **out, const ct_tensor *x) { return ct_maximum_scalar(out, x, 0.3); }
static ct_status ew_min_s(ct_tensor **out, const ct_tensor *x) { return ct_minimum_scalar(out, x, 0.3); }
static ct_status ew_fdiv_s(ct_tensor **out, const ct_tensor *x) { return ct_floor_divide_scalar(out, x, 0.7); }
static ct_status ew_rem_s(ct_tensor **out, const ct_tensor *x) { return ct_remainder_scalar(out, x, 0.7); }
static ct_status ew_sub_s(ct_tensor **out, const ct_tensor *x) { return ct_sub_scalar(out, x, 0.7); }
static ct_status ew_add_s(ct_tensor **out, const ct_tensor *x) { return ct_add_scalar(out, x, 0.7); }

/* lo, hi: the range of the values; gap > 0 keeps |x - kink| >= gap for the kinks listed
 * (every op's kinks are at 0 and, for the clamps, at +-0.5; maximum/minimum_scalar at 0.3;
 * the jumps of floor_divide/remainder by 0.7 and of the rounding ops are crossed with
 * probability ~1e-6 per element, and the fixed seeds don't). */
static const struct un_case {
  const char *name;
  un_fn f;
  double lo, hi;
  int kinks; /* 0 none, 1 at 0, 2 at +-0.5, 3 at 0.3 */
} un_cases[] = {
    {"neg", ct_neg, -2, 2, 0},
    {"abs", ct_abs, -2, 2, 1},
    {"relu", ct_relu, -2, 2, 1},
    {"floor", ct_floor, -2, 2, 0},
    {"ceil", ct_ceil, -2, 2, 0},
    {"round", ct_round, -2, 2, 0},
    {"trunc", ct_trunc, -2, 2, 0},
    {"sign", ct_sign, -2, 2, 1},
    {"exp", ct_exp, -2, 2, 0},
    {"log", ct_log, 0.5, 2, 0},
    {"sqrt", ct_sqrt, 0.5, 2, 0},
    {"rsqrt", ct_rsqrt, 0.5, 2, 0},
    {"sin", ct_sin, -2, 2, 0},
    {"cos", ct_cos, -2, 2, 0},
    {"tanh", ct_tanh, -2, 2, 0},
    {"sigmoid", ct_sigmoid, -3, 3, 0},
    {"gelu", ct_gelu, -3, 3, 0},
    {"erf", ct_erf, -2, 2, 0},
    {"log1p", ct_log1p, -0.5, 2, 0},
    {"expm1", ct_expm1, -2, 2, 0},
    {"tan", ct_tan, -1, 1, 0},
    {"atan", ct_atan, -2, 2, 0},
    {"silu", ct_silu, -3, 3, 0},
    {"softplus", ct_softplus, -3, 3, 0},
    {"softplus above threshold", ct_softplus, 19, 23, 0},
    {"gelu_tanh", ct_gelu_tanh, -3, 3, 0},
    {"leaky_relu", ew_leaky, -2, 2, 1},
    {"clamp lo hi", ew_clamp_both, -1, 1, 2},
    {"clamp lo", ew_clamp_lo, -1, 1, 2},
    {"clamp hi", ew_clamp_hi, -1, 1, 2},
    {"maximum_scalar", ew_max_s, -1, 1, 3},
    {"minimum_scalar", ew_min_s, -1, 1, 3},
    {"floor_divide_scalar", ew_fdiv_s, -2, 2, 0},
    {"remainder_scalar", ew_rem_s, -2, 2, 0},
    {"sub_scalar", ew_sub_s, -2, 2, 0},
    {"add_scalar", ew_add_s, -2, 2, 0},
};

static ct_status f_unary(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  return ((const struct un_case *)ctx)->f(out, in[0]);
}

/* Moves values closer than gap to a kink k away from it (to k +- gap, keeping the side). */
static void away_from(double *v, int64_t n, double k, double gap) {
  for (int64_t i = 0; i < n; i++)
    if (fabs(v[i] - k) < gap) v[i] = v[i] < k ? k - gap : k + gap;
}

START_TEST(unary_gradcheck) {
  ct_device *d = ct_test_device();
  double x[6];
  for (size_t c = 0; c < sizeof un_cases / sizeof un_cases[0]; c++) {
    const struct un_case *u = &un_cases[c];
    gc_fill(x, 6, u->lo, u->hi, 7 + c);
    /* every side of each kink present: below, between, above */
    if (u->kinks == 1) away_from(x, 6, 0.0, 0.05), x[0] = -0.7, x[1] = 0.9;
    if (u->kinks == 2) away_from(x, 6, -0.5, 0.05), away_from(x, 6, 0.5, 0.05), x[0] = -0.8, x[1] = 0.1, x[2] = 0.7;
    if (u->kinks == 3) away_from(x, 6, 0.3, 0.05), x[0] = -0.4, x[1] = 0.8;
    /* [2, 3], every other op through a transposed (strided) view */
    gc_input in[1] = {{.ndim = 2, .shape = {2, 3}, .data = x, .requires_grad = true, .strided = c % 2}};
    gc_check(d, u->name, f_unary, (void *)u, 1, in);
  }
}
END_TEST

/* ---- binary ops ---- */

typedef ct_status (*bin_fn)(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);

static ct_status ew_where_gt0(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  (void)ctx;
  ct_tensor *c = NULL;
  ct_status st = ct_gt_scalar(&c, in[2], 0.0);
  if (st == CT_OK) st = ct_where(out, c, in[0], in[1]);
  ct_release(c);
  return st;
}

static const struct bin_case {
  const char *name;
  bin_fn f;
  double alo, ahi, blo, bhi;
} bin_cases[] = {
    {"maximum", ct_maximum, -1, 1, -1, 1},
    {"minimum", ct_minimum, -1, 1, -1, 1},
    {"floor_divide", ct_floor_divide, -3, 3, 0.5, 2},
    {"remainder", ct_remainder, -3, 3, 0.5, 2},
    {"fmod", ct_fmod, -3, 3, 0.5, 2},
    {"atan2", ct_atan2, -2, 2, 0.3, 2},
};

static ct_status f_binary(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  return ((const struct bin_case *)ctx)->f(out, in[0], in[1]);
}

START_TEST(binary_gradcheck) {
  ct_device *d = ct_test_device();
  double a[6], b[6];
  for (size_t c = 0; c < sizeof bin_cases / sizeof bin_cases[0]; c++) {
    const struct bin_case *u = &bin_cases[c];
    /* a [2, 3] (strided) against b broadcast from [3]; then both [2, 3], b strided, b's sign
     * flipped for atan2 (the other half plane) */
    gc_fill(a, 6, u->alo, u->ahi, 100 + c);
    gc_fill(b, 3, u->blo, u->bhi, 200 + c);
    gc_input in[2] = {{.ndim = 2, .shape = {2, 3}, .data = a, .requires_grad = true, .strided = true},
                      {.ndim = 1, .shape = {3}, .data = b, .requires_grad = true}};
    char what[64];
    snprintf(what, sizeof what, "%s broadcast", u->name);
    gc_check(d, what, f_binary, (void *)u, 2, in);
    gc_fill(b, 6, u->blo, u->bhi, 300 + c);
    if (c == 5)
      for (int i = 0; i < 6; i++) b[i] = -b[i];
    gc_input in2[2] = {{.ndim = 2, .shape = {2, 3}, .data = a, .requires_grad = true},
                       {.ndim = 2, .shape = {2, 3}, .data = b, .requires_grad = true, .strided = true}};
    snprintf(what, sizeof what, "%s strided", u->name);
    gc_check(d, what, f_binary, (void *)u, 2, in2);
  }
  /* where(c > 0, a, b): a [2, 3] strided, b broadcast from [3], c (no gradient) [2, 1] */
  double cv[2] = {1, -1};
  gc_fill(a, 6, -1, 1, 400);
  gc_fill(b, 3, -1, 1, 401);
  gc_input in[3] = {{.ndim = 2, .shape = {2, 3}, .data = a, .requires_grad = true, .strided = true},
                    {.ndim = 1, .shape = {3}, .data = b, .requires_grad = true},
                    {.ndim = 2, .shape = {2, 1}, .data = cv}};
  gc_check(d, "where", ew_where_gt0, NULL, 3, in);
}
END_TEST

/* ---- exact subgradients ---- */

/* A 1-D tensor of the checks' float dtype (gc_float: f64, or f32 without cl_khr_fp64). */
static ct_tensor *vec(ct_device *d, int64_t n, const double *v, bool rg) {
  ct_tensor *t = gc_from(d, 1, &n, v);
  if (rg) ck_assert_ct_ok(ct_set_requires_grad(t, true));
  return t;
}

/* Checks t's gradient against want[0..n) exactly (the rules are exact in binary: 0, 1, 0.5,
 * slopes; a slope as the gradient's dtype holds it, 0.1f in f32), or NaN where want is NaN. */
static void expect_grad(const char *what, const ct_tensor *t, int64_t n, const double *want) {
  ct_tensor *g = NULL;
  ck_assert_ct_ok(ct_grad(&g, t));
  ck_assert_msg(g != NULL, "%s: no gradient", what);
  double *v = gc_host(g);
  ct_dtype dt = ct_tensor_dtype(g);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(isnan(want[i]) ? isnan(v[i]) : v[i] == gc_round(dt, want[i]),
                  "%s: element %lld is %.17g, expected %.17g", what, (long long)i, v[i], gc_round(dt, want[i]));
  free(v);
  ct_release(g);
}

/* sum(y).backward() */
static void backward_sum(ct_tensor *y) {
  ct_tensor *s = NULL;
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_release(s);
}

/* grad of sum(f(x)) for x = v[0..n), against want */
static void unary_exact(ct_device *d, const char *what, un_fn f, int64_t n, const double *v, const double *want) {
  ct_tensor *x = vec(d, n, v, true), *y = NULL;
  ck_assert_ct_ok(f(&y, x));
  backward_sum(y);
  expect_grad(what, x, n, want);
  ct_release(y);
  ct_release(x);
}

static ct_status ew_clamp_12(ct_tensor **out, const ct_tensor *x) { return ct_clamp(out, x, 1, 2); }
static ct_status ew_clamp_1(ct_tensor **out, const ct_tensor *x) { return ct_clamp(out, x, 1, NAN); }
static ct_status ew_clamp_2(ct_tensor **out, const ct_tensor *x) { return ct_clamp(out, x, NAN, 2); }
static ct_status ew_clamp_21(ct_tensor **out, const ct_tensor *x) { return ct_clamp(out, x, 2, 1); }
static ct_status ew_max_2(ct_tensor **out, const ct_tensor *x) { return ct_maximum_scalar(out, x, 2); }
static ct_status ew_min_2(ct_tensor **out, const ct_tensor *x) { return ct_minimum_scalar(out, x, 2); }

START_TEST(kinks_exact) {
  ct_device *d = ct_test_device();
  const double m101[3] = {-1, 0, 1};
  /* torch.relu / abs / leaky_relu(0.1) of [-1, 0, 1]: [0, 0, 1], [-1, 0, 1], [0.1, 0.1, 1] */
  unary_exact(d, "relu at 0", ct_relu, 3, m101, (const double[]){0, 0, 1});
  unary_exact(d, "abs at 0", ct_abs, 3, m101, (const double[]){-1, 0, 1});
  unary_exact(d, "leaky_relu at 0", ew_leaky, 3, m101, (const double[]){0.1, 0.1, 1});
  /* clamp of [0, 1, 1.5, 2, 3, nan] (PyTorch 2.15, Scalar bounds: the gradient passes strictly
   * inside): (1, 2) [0, 0, 1, 0, 0, 0]; min 1 [0, 0, 1, 1, 1, 0]; max 2 [1, 1, 1, 0, 0, 0];
   * lo > hi (2, 1) all 0 */
  const double cv[6] = {0, 1, 1.5, 2, 3, NAN};
  unary_exact(d, "clamp(1, 2) at the bounds", ew_clamp_12, 6, cv, (const double[]){0, 0, 1, 0, 0, 0});
  unary_exact(d, "clamp(min 1) at the bound", ew_clamp_1, 6, cv, (const double[]){0, 0, 1, 1, 1, 0});
  unary_exact(d, "clamp(max 2) at the bound", ew_clamp_2, 6, cv, (const double[]){1, 1, 1, 0, 0, 0});
  unary_exact(d, "clamp(2, 1)", ew_clamp_21, 6, cv, (const double[]){0, 0, 0, 0, 0, 0});
  /* torch.maximum / minimum(x, tensor(2.)) of [1, 2, 3]: [0, 0.5, 1], [1, 0.5, 0] */
  const double v123[3] = {1, 2, 3};
  unary_exact(d, "maximum_scalar tie", ew_max_2, 3, v123, (const double[]){0, 0.5, 1});
  unary_exact(d, "minimum_scalar tie", ew_min_2, 3, v123, (const double[]){1, 0.5, 0});
  /* softplus at [19.9, 20, 20.1]: sigmoid(x) up to the threshold 20, then 1 */
  const double sp[3] = {19.9, 20, 20.1};
  ct_tensor *x = vec(d, 3, sp, true), *y = NULL;
  ck_assert_ct_ok(ct_softplus(&y, x));
  backward_sum(y);
  ct_tensor *g = NULL;
  ck_assert_ct_ok(ct_grad(&g, x));
  double *gv = gc_host(g);
  /* sigmoid(19.9) = 1 - 2.3e-9: in f32 1 or its predecessor (gc_tol's 1e-6 covers it) */
  for (int i = 0; i < 2; i++) ck_assert_double_eq_tol(gv[i], 1 / (1 + exp(-sp[i])), gc_tol(gc_float(d), 1e-15));
  ck_assert(gv[2] == 1);
  free(gv);
  ct_release(g);
  ct_release(y);
  ct_release(x);

  /* maximum / minimum with ties and a NaN: a = [1, nan, 2, 2], b = [1, 1, 3, 0]
   * torch.maximum: ga [0.5, 1, 0, 1], gb [0.5, 1, 1, 0] (no comparison holds at NaN: both
   * get g); torch.minimum: ga [0.5, 1, 1, 0], gb [0.5, 1, 0, 1] */
  const double av[4] = {1, NAN, 2, 2}, bv[4] = {1, 1, 3, 0};
  for (int mx = 0; mx < 2; mx++) {
    ct_tensor *a = vec(d, 4, av, true), *b = vec(d, 4, bv, true), *r = NULL;
    ck_assert_ct_ok(mx ? ct_maximum(&r, a, b) : ct_minimum(&r, a, b));
    backward_sum(r);
    expect_grad(mx ? "maximum a" : "minimum a", a, 4,
                mx ? (const double[]){0.5, 1, 0, 1} : (const double[]){0.5, 1, 1, 0});
    expect_grad(mx ? "maximum b" : "minimum b", b, 4,
                mx ? (const double[]){0.5, 1, 1, 0} : (const double[]){0.5, 1, 0, 1});
    ct_release(r);
    ct_release(a);
    ct_release(b);
  }
  /* where(cond, a, b) with a and b the same leaf: g reaches it once through either branch */
  ct_tensor *c = NULL, *w = NULL, *p = vec(d, 3, v123, true);
  ck_assert_ct_ok(ct_gt_scalar(&c, p, 1.5));
  ck_assert_ct_ok(ct_where(&w, c, p, p));
  backward_sum(w);
  expect_grad("where(c, p, p)", p, 3, (const double[]){1, 1, 1});
  ct_release(w);
  ct_release(c);
  ct_release(p);
}
END_TEST

/* floor, ceil, round, trunc, sign, floor_divide: a gradient that exists and is 0 (PyTorch's
 * zeros_like(grad)), for the tensor the op was applied to and for a broadcast divisor. */
START_TEST(zero_gradient_ops) {
  ct_device *d = ct_test_device();
  const double v[4] = {-1.5, -0.2, 0.7, 2.5};
  const double z[4] = {0, 0, 0, 0};
  un_fn fs[] = {ct_floor, ct_ceil, ct_round, ct_trunc, ct_sign};
  const char *names[] = {"floor", "ceil", "round", "trunc", "sign"};
  for (int i = 0; i < 5; i++) unary_exact(d, names[i], fs[i], 4, v, z);
  ct_tensor *a = vec(d, 4, v, true), *two = NULL, *q = NULL;
  int64_t one = 1;
  ck_assert_ct_ok(ct_full(&two, d, gc_float(d), 1, &one, 2.0));
  ck_assert_ct_ok(ct_set_requires_grad(two, true));
  ck_assert_ct_ok(ct_floor_divide(&q, a, two));
  ck_assert(ct_requires_grad(q));
  backward_sum(q);
  expect_grad("floor_divide a", a, 4, z);
  expect_grad("floor_divide b", two, 1, z);
  ct_release(q);
  ct_release(two);
  ct_release(a);
}
END_TEST

/* Comparisons, logical ops, isnan/isinf/isfinite, argmax/argmin and integer ops record
 * nothing: their results never require grad, even from inputs that do. */
START_TEST(not_differentiable) {
  ct_device *d = ct_test_device();
  const double v[3] = {1, 2, 3};
  ct_tensor *x = vec(d, 3, v, true), *y = vec(d, 3, v, false);
  ct_tensor *r[10] = {0};
  ck_assert_ct_ok(ct_eq(&r[0], x, y));
  ck_assert_ct_ok(ct_lt_scalar(&r[1], x, 2));
  ck_assert_ct_ok(ct_isnan(&r[2], x));
  ck_assert_ct_ok(ct_isfinite(&r[3], x));
  ck_assert_ct_ok(ct_argmax(&r[4], x, 0, false));
  ck_assert_ct_ok(ct_argmin(&r[5], x, CT_DIM_NONE, false));
  ck_assert_ct_ok(ct_logical_not(&r[6], r[0]));
  ck_assert_ct_ok(ct_ge(&r[7], x, x));
  ck_assert_ct_ok(ct_any(&r[8], x, 0, NULL, false));
  ck_assert_ct_ok(ct_cast(&r[9], x, CT_I32)); /* a cast to an integer dtype */
  for (int i = 0; i < 10; i++) {
    ck_assert_msg(!ct_requires_grad(r[i]), "result %d requires grad", i);
    ck_assert_msg(ct_is_leaf(r[i]), "result %d is not a leaf", i);
    ct_release(r[i]);
  }
  ct_release(y);
  ct_release(x);
}
END_TEST

/* f32: tanh(x * w + b).sum(), x [2, 3] (no grad), w and b [3]; the gradients against a host
 * loop in double. f32 rounding of O(1) values through a few ops: 1e-5 absolute is ~100 ulps. */
START_TEST(f32_chain_smoke) {
  ct_device *d = ct_test_device();
  float xv[6] = {0.5f, -1.0f, 0.25f, 1.5f, -0.75f, 0.1f}, wv[3] = {0.3f, -0.6f, 1.1f}, bv[3] = {0.1f, 0.2f, -0.3f};
  int64_t xs[2] = {2, 3}, ws = 3;
  ct_tensor *x = NULL, *w = NULL, *b = NULL, *t0 = NULL, *t1 = NULL, *t2 = NULL, *s = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, xs, xv));
  ck_assert_ct_ok(ct_from_host(&w, d, CT_F32, 1, &ws, wv));
  ck_assert_ct_ok(ct_from_host(&b, d, CT_F32, 1, &ws, bv));
  ck_assert_ct_ok(ct_set_requires_grad(w, true));
  ck_assert_ct_ok(ct_set_requires_grad(b, true));
  ck_assert_ct_ok(ct_mul(&t0, x, w));
  ck_assert_ct_ok(ct_add(&t1, t0, b));
  ck_assert_ct_ok(ct_tanh(&t2, t1));
  ck_assert_ct_ok(ct_sum(&s, t2, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  double gw[3] = {0}, gb[3] = {0};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      double th = tanh((double)xv[i * 3 + j] * wv[j] + bv[j]), dz = 1 - th * th;
      gw[j] += dz * xv[i * 3 + j];
      gb[j] += dz;
    }
  ct_tensor *g = NULL;
  ck_assert_ct_ok(ct_grad(&g, w));
  ck_assert_int_eq(ct_tensor_dtype(g), CT_F32);
  double *v = gc_host(g);
  for (int j = 0; j < 3; j++) ck_assert_double_eq_tol(v[j], gw[j], 1e-5);
  free(v);
  ct_release(g);
  ck_assert_ct_ok(ct_grad(&g, b));
  v = gc_host(g);
  for (int j = 0; j < 3; j++) ck_assert_double_eq_tol(v[j], gb[j], 1e-5);
  free(v);
  ct_release(g);
  ct_release(s);
  ct_release(t2);
  ct_release(t1);
  ct_release(t0);
  ct_release(b);
  ct_release(w);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-ew");
  TCase *tc = tcase_create("ew");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, unary_gradcheck);
  tcase_add_test(tc, binary_gradcheck);
  tcase_add_test(tc, kinks_exact);
  tcase_add_test(tc, zero_gradient_ops);
  tcase_add_test(tc, not_differentiable);
  tcase_add_test(tc, f32_chain_smoke);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
