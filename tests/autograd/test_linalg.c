/* Gradients of matmul, linear and addmm against central finite differences in f64: every
 * shape rule of ct_matmul (1-D operands, batch dims that broadcast, a batched operand with a
 * shared matrix), transposed (strided) operands, linear with and without bias, addmm's scalars
 * and a broadcast c; the _out forms' autograd checks; autocast bf16 linear against f32. */
#include "ct_fixture.h"
#include "gradcheck.h"

/* ---- matmul ---- */

static ct_status f_matmul(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  (void)ctx;
  return ct_matmul(out, in[0], in[1]);
}

START_TEST(matmul_gradcheck) {
  ct_device *d = ct_test_device();
  /* {a shape}, {b shape}, a strided, b strided */
  static const struct {
    int an, bn;
    int64_t as[4], bs[4];
    bool sa, sb;
  } cases[] = {
      {2, 2, {3, 4}, {4, 2}, true, false},       /* 2-D, a transposed */
      {1, 1, {4}, {4}, false, false},            /* dot: 0-d result */
      {1, 2, {4}, {4, 3}, false, true},          /* vector @ matrix */
      {2, 1, {3, 4}, {4}, true, false},          /* matrix @ vector */
      {4, 3, {2, 1, 3, 2}, {3, 2, 2}, false, true}, /* batch dims broadcast both ways */
      {3, 2, {2, 3, 4}, {4, 2}, false, true},    /* batched a, shared b: one GEMM for b's grad */
      {1, 3, {3}, {2, 3, 2}, false, false},      /* vector @ batch */
      {3, 1, {2, 2, 3}, {3}, true, false},       /* batch @ vector */
      {2, 3, {3, 4}, {2, 4, 2}, false, false},   /* shared a, batched b */
      {2, 2, {1, 3}, {3, 1}, false, false},      /* size-1 dims */
      {2, 2, {2, 0}, {0, 3}, false, false},      /* k = 0: zero product, empty gradients */
      {3, 2, {2, 0, 3}, {3, 2}, false, false},   /* empty batch: b's gradient is zeros */
  };
  double a[24], b[24];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    gc_fill(a, 24, -1, 1, 10 + c);
    gc_fill(b, 24, -1, 1, 40 + c);
    gc_input in[2] = {{.ndim = cases[c].an, .data = a, .requires_grad = true, .strided = cases[c].sa},
                      {.ndim = cases[c].bn, .data = b, .requires_grad = true, .strided = cases[c].sb}};
    memcpy(in[0].shape, cases[c].as, sizeof cases[c].as);
    memcpy(in[1].shape, cases[c].bs, sizeof cases[c].bs);
    char what[64];
    snprintf(what, sizeof what, "matmul case %zu", c);
    gc_check(d, what, f_matmul, NULL, 2, in);
  }
}
END_TEST

/* Only one operand requiring grad: the other's gradient is not computed (its saved operand is
 * not even kept). */
START_TEST(matmul_one_side) {
  ct_device *d = ct_test_device();
  double a[6], b[6];
  gc_fill(a, 6, -1, 1, 3);
  gc_fill(b, 6, -1, 1, 4);
  for (int side = 0; side < 2; side++) {
    gc_input in[2] = {{.ndim = 2, .shape = {2, 3}, .data = a, .requires_grad = side == 0},
                      {.ndim = 2, .shape = {3, 2}, .data = b, .requires_grad = side == 1}};
    gc_check(d, side ? "matmul b only" : "matmul a only", f_matmul, NULL, 2, in);
  }
}
END_TEST

/* ---- linear ---- */

static ct_status f_linear(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  return ct_linear(out, in[0], in[1], *(int *)ctx ? in[2] : NULL);
}

START_TEST(linear_gradcheck) {
  ct_device *d = ct_test_device();
  double x[24], w[20], bias[10];
  gc_fill(x, 24, -1, 1, 5);
  gc_fill(w, 20, -1, 1, 6);
  gc_fill(bias, 10, -1, 1, 7);
  /* x [2, 3, 4] (leading dims flattened for weight's gradient), weight [5, 4], bias [5] */
  int with_bias = 1;
  gc_input in[3] = {{.ndim = 3, .shape = {2, 3, 4}, .data = x, .requires_grad = true},
                    {.ndim = 2, .shape = {5, 4}, .data = w, .requires_grad = true, .strided = true},
                    {.ndim = 1, .shape = {5}, .data = bias, .requires_grad = true}};
  gc_check(d, "linear 3-D x", f_linear, &with_bias, 3, in);
  /* bias of a broadcasting shape [2, 1, 5]: summed back over the broadcast dims */
  gc_input in2[3] = {{.ndim = 3, .shape = {2, 3, 4}, .data = x, .requires_grad = true, .strided = true},
                     {.ndim = 2, .shape = {5, 4}, .data = w, .requires_grad = true},
                     {.ndim = 3, .shape = {2, 1, 5}, .data = bias, .requires_grad = true}};
  gc_check(d, "linear broadcast bias", f_linear, &with_bias, 3, in2);
  /* 1-D x, no bias */
  with_bias = 0;
  gc_input in3[2] = {{.ndim = 1, .shape = {4}, .data = x, .requires_grad = true},
                     {.ndim = 2, .shape = {5, 4}, .data = w, .requires_grad = true, .strided = true}};
  gc_check(d, "linear 1-D x", f_linear, &with_bias, 2, in3);
  /* x strided 2-D, weight only */
  gc_input in4[2] = {{.ndim = 2, .shape = {3, 4}, .data = x, .strided = true},
                     {.ndim = 2, .shape = {5, 4}, .data = w, .requires_grad = true}};
  gc_check(d, "linear weight only", f_linear, &with_bias, 2, in4);
  /* an empty batch: weight's and bias's gradients are zeros */
  with_bias = 1;
  gc_input in5[3] = {{.ndim = 2, .shape = {0, 4}, .data = x, .requires_grad = true},
                     {.ndim = 2, .shape = {5, 4}, .data = w, .requires_grad = true},
                     {.ndim = 1, .shape = {5}, .data = bias, .requires_grad = true}};
  gc_check(d, "linear empty batch", f_linear, &with_bias, 3, in5);
}
END_TEST

/* ---- addmm ---- */

static ct_status f_addmm(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const double *s = ctx;
  return ct_addmm(out, in[0], in[1], in[2], s[0], s[1]);
}

START_TEST(addmm_gradcheck) {
  ct_device *d = ct_test_device();
  double c[6], a[12], b[8];
  gc_fill(c, 6, -1, 1, 8);
  gc_fill(a, 12, -1, 1, 9);
  gc_fill(b, 8, -1, 1, 10);
  double s1[2] = {0.5, -1.5}; /* beta, alpha */
  gc_input in[3] = {{.ndim = 2, .shape = {3, 2}, .data = c, .requires_grad = true},
                    {.ndim = 2, .shape = {3, 4}, .data = a, .requires_grad = true, .strided = true},
                    {.ndim = 2, .shape = {4, 2}, .data = b, .requires_grad = true}};
  gc_check(d, "addmm", f_addmm, s1, 3, in);
  /* c broadcast from [2], beta 1, alpha 1, batched a */
  double s2[2] = {1, 1};
  gc_input in2[3] = {{.ndim = 1, .shape = {2}, .data = c, .requires_grad = true},
                     {.ndim = 3, .shape = {2, 3, 2}, .data = a, .requires_grad = true},
                     {.ndim = 2, .shape = {2, 2}, .data = b, .requires_grad = true, .strided = true}};
  gc_check(d, "addmm broadcast c", f_addmm, s2, 3, in2);
  /* beta 0: c's values are ignored, its gradient is 0 * g */
  double s3[2] = {0, 2};
  gc_check(d, "addmm beta 0", f_addmm, s3, 3, in);
}
END_TEST

/* ---- _out forms ---- */

static ct_tensor *mat(ct_device *d, int64_t r, int64_t c, uint64_t seed) {
  double v[64];
  gc_fill(v, r * c, -1, 1, seed);
  int64_t shape[2] = {r, c};
  return gc_from(d, 2, shape, v); /* gc_float: f64, or f32 without cl_khr_fp64 */
}

START_TEST(out_forms_under_autograd) {
  ct_device *d = ct_test_device();
  ct_tensor *a = mat(d, 2, 3, 1), *b = mat(d, 3, 2, 2), *o = mat(d, 2, 2, 3), *c = mat(d, 2, 2, 4);
  ck_assert_ct_ok(ct_set_requires_grad(a, true));
  /* an input that requires grad: refused in grad mode, as PyTorch's out= ops */
  ck_assert_ct_status(ct_matmul_out(o, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_matmul_out");
  ck_assert_error_contains("'a' requires grad");
  ck_assert_ct_status(ct_addmm_out(o, c, a, b, 1, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_addmm_out");
  /* allowed with grad mode off */
  bool prev = ct_set_grad_enabled(false);
  ck_assert_ct_ok(ct_matmul_out(o, a, b));
  ct_set_grad_enabled(prev);
  /* writing a tensor a node saved is detected by ct_backward */
  ct_tensor *y = NULL, *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_matmul(&y, o, a)); /* saves o for a's gradient */
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ct_tensor *b2 = mat(d, 3, 2, 5), *a2 = mat(d, 2, 3, 6);
  ck_assert_ct_ok(ct_matmul_out(o, a2, b2)); /* nothing requires grad: allowed, bumps o's version */
  ck_assert_ct_status(ct_backward(s, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("modified in place");
  ck_assert_ct_ok(ct_grad(&g, a));
  ck_assert_ptr_null(g);
  ct_release(s);
  ct_release(y);
  /* and an out that requires grad can't be written in grad mode */
  ct_tensor *leaf = mat(d, 2, 2, 7);
  ck_assert_ct_ok(ct_set_requires_grad(leaf, true));
  ck_assert_ct_status(ct_matmul_out(leaf, a2, b2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'out' requires grad");
  ct_release(leaf);
  ct_release(a2);
  ct_release(b2);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  ct_release(o);
}
END_TEST

/* ---- autocast ---- */

static float *host_f32(const ct_tensor *t) {
  double *v = gc_host(t);
  int64_t n = ct_numel(t);
  float *f = malloc((size_t)n * sizeof *f);
  for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
  free(v);
  return f;
}

static ct_tensor *f32_from(ct_device *d, int nd, const int64_t *shape, const float *v) {
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, nd, shape, v));
  return t;
}

/* bf16 has an 8-bit significand: each rounding is within u = 2^-8 relative. The bf16 product
 * rounds x and w (each product then within 2u + u^2 of the exact one), accumulates in f32
 * (error ~1e-7 of the sum of magnitudes), and rounds the result once more (u |y|); the bias is
 * rounded too (u |b|). So |y_bf16 - y_f32| <= 3u S + 2u |b| + u |y| + 1e-5 with S = sum |x w|. */
START_TEST(autocast_bf16_linear) {
  ct_device *d = ct_test_device();
  enum { N = 4, IN = 8, OUT = 3 };
  float xv[N * IN], wv[OUT * IN], bv[OUT];
  double tmp[N * IN];
  gc_fill(tmp, N * IN, -1, 1, 21);
  for (int i = 0; i < N * IN; i++) xv[i] = (float)tmp[i];
  gc_fill(tmp, OUT * IN, -1, 1, 22);
  for (int i = 0; i < OUT * IN; i++) wv[i] = (float)tmp[i];
  gc_fill(tmp, OUT, -1, 1, 23);
  for (int i = 0; i < OUT; i++) bv[i] = (float)tmp[i];
  int64_t xs[2] = {N, IN}, ws[2] = {OUT, IN}, bs[1] = {OUT};
  ct_tensor *x = f32_from(d, 2, xs, xv), *w = f32_from(d, 2, ws, wv), *b = f32_from(d, 1, bs, bv);
  ck_assert_ct_ok(ct_set_requires_grad(w, true));

  /* f32 reference, and its weight gradient (of sum(y)) */
  ct_tensor *y32 = NULL, *s32 = NULL, *g32 = NULL;
  ck_assert_ct_ok(ct_linear(&y32, x, w, b));
  ck_assert_int_eq(ct_tensor_dtype(y32), CT_F32);
  ck_assert_ct_ok(ct_sum(&s32, y32, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s32, NULL));
  ck_assert_ct_ok(ct_grad(&g32, w));
  ck_assert_ct_ok(ct_grad_clear(w));

  ck_assert_ct_ok(ct_autocast_set_dtype(CT_BF16));
  ct_tensor *y16 = NULL;
  ck_assert_ct_ok(ct_linear(&y16, x, w, b));
  ck_assert_int_eq(ct_tensor_dtype(y16), CT_BF16);
  float *a = host_f32(y32), *c = host_f32(y16);
  const double u = 1.0 / 256;
  for (int i = 0; i < N; i++)
    for (int o = 0; o < OUT; o++) {
      double S = 0;
      for (int k = 0; k < IN; k++) S += fabs((double)xv[i * IN + k] * wv[o * IN + k]);
      double tol = 3 * u * S + 2 * u * fabs(bv[o]) + u * fabs(a[i * OUT + o]) + 1e-5;
      ck_assert_msg(fabs(a[i * OUT + o] - c[i * OUT + o]) <= tol, "y[%d][%d]: f32 %g, bf16 %g, tol %g", i, o,
                    a[i * OUT + o], c[i * OUT + o], tol);
    }
  free(a);
  free(c);
  /* The gradient reaches the f32 weight through the autocast's cast, which ct_cast records
   * (the views/casts branch of issue #15): until it does, only the forward can be checked. */
  ct_tensor *wc = NULL;
  ck_assert_ct_ok(ct_cast(&wc, w, CT_BF16));
  bool cast_records = ct_requires_grad(wc);
  ct_release(wc);
  ct_tensor *s16 = NULL, *g16 = NULL;
  if (!cast_records) {
    fprintf(stderr, "autocast_bf16_linear: ct_cast does not record yet; gradient part skipped\n");
    ck_assert_ct_ok(ct_autocast_set_dtype(CT_F32));
  } else {
    ck_assert_msg(ct_requires_grad(y16), "autocast linear of an f32 weight that requires grad does not require grad");
    ck_assert_ct_ok(ct_sum(&s16, y16, 0, NULL, false));
    /* backward inside the autocast region: the formulas compute in the recorded dtypes */
    ck_assert_ct_ok(ct_backward(s16, NULL));
    ck_assert_ct_ok(ct_autocast_set_dtype(CT_F32));
    ck_assert_ct_ok(ct_grad(&g16, w));
    ck_assert_ptr_nonnull(g16);
    ck_assert_int_eq(ct_tensor_dtype(g16), CT_F32);
    /* dL/dw[o][k] = sum_i x[i][k]: the bf16 x's sum (f32 accumulation), rounded to bf16:
     * within u S' + u |sum| + 1e-5 of the f32 one, S' = sum_i |x[i][k]|. */
    a = host_f32(g32);
    c = host_f32(g16);
    for (int o = 0; o < OUT; o++)
      for (int k = 0; k < IN; k++) {
        double S = 0;
        for (int i = 0; i < N; i++) S += fabs(xv[i * IN + k]);
        double tol = u * S + u * fabs(a[o * IN + k]) + 1e-5;
        ck_assert_msg(fabs(a[o * IN + k] - c[o * IN + k]) <= tol, "gw[%d][%d]: f32 %g, bf16 %g, tol %g", o, k,
                      a[o * IN + k], c[o * IN + k], tol);
      }
    free(a);
    free(c);
  }
  ct_release(g16);
  ct_release(s16);
  ct_release(g32);
  ct_release(s32);
  ct_release(y32);
  ct_release(y16);
  ct_release(x);
  ct_release(w);
  ct_release(b);
}
END_TEST

/* f64 operands stay f64 under autocast (torch.autocast leaves float64 alone), and _out forms
 * are not autocast. */
START_TEST(autocast_leaves_f64) {
  ct_device *d = ct_test_device();
  if (!ct_test_fp64(d, "f64 matmul under autocast")) return;
  double v[6];
  gc_fill(v, 6, -1, 1, 1);
  ct_tensor *a = ct_test_from_doubles(d, CT_F64, 2, (const int64_t[]){2, 3}, v), *y = NULL;
  gc_fill(v, 6, -1, 1, 2);
  ct_tensor *b = ct_test_from_doubles(d, CT_F64, 2, (const int64_t[]){3, 2}, v);
  ck_assert_ct_ok(ct_autocast_set_dtype(CT_BF16));
  ck_assert_ct_ok(ct_matmul(&y, a, b));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_F64);
  ck_assert_ct_ok(ct_matmul_out(y, a, b));
  ck_assert_ct_ok(ct_autocast_set_dtype(CT_F32));
  ct_release(y);
  ct_release(a);
  ct_release(b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-linalg");
  TCase *tc = tcase_create("linalg");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, matmul_gradcheck);
  tcase_add_test(tc, matmul_one_side);
  tcase_add_test(tc, linear_gradcheck);
  tcase_add_test(tc, addmm_gradcheck);
  tcase_add_test(tc, out_forms_under_autograd);
  tcase_add_test(tc, autocast_bf16_linear);
  tcase_add_test(tc, autocast_leaves_f64);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
