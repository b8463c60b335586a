/* cross_entropy, nll_loss and mse_loss against PyTorch's results (data/loss_ref.h, made by
 * data/gen_loss.py): each reduction, ignore_index, label smoothing, the [N, C], [N, C, d] and
 * [C] forms, all-ignored and empty means (NaN), transposed logits, large logits, f16,
 * broadcasting mse; and the errors, including out-of-range targets found on the device.
 *
 * Tolerances. f32 and f64: the kernel computes each position's log-softmax in the input's
 * precision class (f32 here) as PyTorch does, in a different order: a few ulps of the largest
 * |logit| and of the loss, so |err| <= 1e-5 (|want| + max|x| eps-scaled) is taken as
 * 1e-5 * (|want| + 1) + 4 * 2^-23 * max|x| (the second term is the rounding of x - lse for large
 * logits). f16: PyTorch rounds every log-probability to f16 (2^-11 relative) before the nll and
 * the smoothing sum, so its result differs from ours (f32 throughout, rounded once) by up to a
 * few f16 ulps: 1e-2 * (|want| + 1). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ct_fixture.h"
#include "ct_test.h"

#include "data/loss_ref.h"

#define NCASES ((int)(sizeof loss_cases / sizeof loss_cases[0]))

START_TEST(test_reference) {
  const struct loss_case *c = &loss_cases[_i];
  ct_device *d = ct_test_device();
  ct_tensor *x = NULL, *y, *r = NULL;
  if (c->view == 't') {
    /* The same logical [N, C] values, stored as [C, N]. */
    int64_t n = c->xshape[0], k = c->xshape[1], tsh[2] = {k, n};
    double *tv = malloc(sizeof(double) * (size_t)(n * k));
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < k; j++) tv[j * n + i] = c->x[i * k + j];
    ct_tensor *base = ct_test_from_doubles(d, c->dt, 2, tsh, tv);
    ck_assert_ct_ok(ct_transpose(&x, base, 0, 1));
    ct_release(base);
    free(tv);
  } else {
    x = ct_test_from_doubles(d, c->dt, c->xndim, c->xshape, c->x);
  }
  y = ct_test_from_doubles(d, c->ydt, c->yndim, c->yshape, c->y);
  if (c->op == 0)
    ck_assert_ct_ok(ct_cross_entropy(&r, x, y, c->ignore, c->eps, c->red));
  else if (c->op == 1)
    ck_assert_ct_ok(ct_nll_loss(&r, x, y, c->ignore, c->red));
  else
    ck_assert_ct_ok(ct_mse_loss(&r, x, y, c->red));
  ck_assert_int_eq(ct_tensor_dtype(r), c->dt);
  ck_assert_int_eq(ct_tensor_ndim(r), c->ondim);
  for (int i = 0; i < c->ondim; i++) ck_assert_int_eq(ct_tensor_shape(r)[i], c->oshape[i]);
  double xmax = 0;
  for (int64_t i = 0; i < ct_test_numel(c->xndim, c->xshape); i++) xmax = fmax(xmax, fabs(c->x[i]));
  double *res = ct_test_to_doubles(r);
  for (int i = 0; i < c->on; i++) {
    double got = res[i], want = c->out[i];
    if (isnan(want)) {
      ck_assert_msg(isnan(got), "%s [%d]: %g, expected NaN", c->name, i, got);
      continue;
    }
    double tol = c->dt == CT_F16 ? 1e-2 * (fabs(want) + 1)
                                 : 1e-5 * (fabs(want) + 1) + 4 * ldexp(xmax, -23);
    ck_assert_msg(fabs(got - want) <= tol, "%s [%d]: %.9g, expected %.9g (tol %g)", c->name, i, got,
                  want, tol);
  }
  free(res);
  ct_release(r);
  ct_release(x);
  ct_release(y);
}
END_TEST

/* A strided target (every second element of a larger tensor) and logits expanded along N give
 * what their contiguous copies give (the same kernel on the same values: bit for bit). */
START_TEST(test_strided_target) {
  ct_device *d = ct_test_device();
  int64_t ls[2] = {1, 5}, le[2] = {6, 5}, ts[1] = {12};
  const double lv[5] = {0.5, -1, 2, 0.25, 3}, tv[12] = {4, 9, 0, 9, -100, 9, 2, 9, 1, 9, 3, 9};
  ct_tensor *l1 = ct_test_from_doubles(d, CT_F32, 2, ls, lv), *t12 = ct_test_from_doubles(d, CT_I64, 1, ts, tv);
  ct_tensor *lx = NULL, *t = NULL, *lc = NULL, *tc = NULL, *a = NULL, *b = NULL;
  ck_assert_ct_ok(ct_expand(&lx, l1, 2, le));
  ck_assert_ct_ok(ct_slice(&t, t12, 0, 0, 12, 2));
  ck_assert_ct_ok(ct_contiguous(&lc, lx));
  ck_assert_ct_ok(ct_contiguous(&tc, t));
  ck_assert_ct_ok(ct_cross_entropy(&a, lx, t, -100, 0.1, CT_REDUCTION_NONE));
  ck_assert_ct_ok(ct_cross_entropy(&b, lc, tc, -100, 0.1, CT_REDUCTION_NONE));
  double *ha = ct_test_to_doubles(a), *hb = ct_test_to_doubles(b);
  for (int i = 0; i < 6; i++) ck_assert_double_eq(ha[i], hb[i]);
  ck_assert_double_eq(ha[2], 0.0); /* the ignored target */
  free(ha);
  free(hb);
  ct_release(l1);
  ct_release(t12);
  ct_release(lx);
  ct_release(t);
  ct_release(lc);
  ct_release(tc);
  ct_release(a);
  ct_release(b);
}
END_TEST

/* A target outside [0, C) is reported with its value and position, found on the device. */
START_TEST(test_target_out_of_range) {
  ct_device *d = ct_test_device();
  int64_t xs[2] = {4, 5}, ts[1] = {4};
  ct_tensor *x = NULL, *t, *r = (ct_tensor *)1;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 2, xs));
  const double tv[4] = {1, 5, 0, -3};
  t = ct_test_from_doubles(d, CT_I64, 1, ts, tv);
  ck_assert_ct_status(ct_cross_entropy(&r, x, t, -100, 0.0, CT_REDUCTION_MEAN),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("ct_cross_entropy: target 5 at position [1] is out of range for 5 classes");
  ct_release(t);
  /* [N, C, d] form: the position is (n, d); a negative target that isn't ignore_index. */
  int64_t x3[3] = {2, 5, 3}, t3[2] = {2, 3};
  const double tv3[6] = {0, 1, 2, 3, -100, -1};
  ct_tensor *x3t = NULL;
  ck_assert_ct_ok(ct_zeros(&x3t, d, CT_F32, 3, x3));
  t = ct_test_from_doubles(d, CT_I64, 2, t3, tv3);
  ck_assert_ct_status(ct_nll_loss(&r, x3t, t, -100, CT_REDUCTION_NONE), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_nll_loss: target -1 at position [1, 2]");
  ct_release(t);
  ct_release(x3t);
  ct_release(x);
}
END_TEST

/* SUM and MEAN take one kernel (loss_sum, one work-group) up to 65536 positions and ct_sum's
 * passes beyond: both against a host reference in double, with every 7th target ignored, in f32
 * and bf16 (whose result rounds once), and MEAN's gradient (softmax - onehot) / count. The f32
 * tolerance: each position's loss carries a few ulps (the header), and the sum's rounding grows
 * with the log of the blocks: 1e-5 relative is far above both. */
START_TEST(test_reduction_paths) {
  ct_device *d = ct_test_device();
  static const int64_t sizes[3] = {1000, 65536, 70001};
  const int64_t C = 3;
  for (int si = 0; si < 3; si++) {
    const int64_t n = sizes[si];
    float *xv = malloc(sizeof(float) * (size_t)(n * C));
    int64_t *tv = malloc(sizeof(int64_t) * (size_t)n);
    double sum = 0, cnt = 0;
    uint32_t r = 12345;
    for (int64_t i = 0; i < n; i++) {
      double m = -INFINITY, se = 0;
      for (int64_t c = 0; c < C; c++) {
        r = r * 1664525u + 1013904223u;
        xv[i * C + c] = (float)((double)(r >> 8) / (1 << 24) * 8.0 - 4.0);
        m = fmax(m, xv[i * C + c]);
      }
      for (int64_t c = 0; c < C; c++) se += exp(xv[i * C + c] - m);
      tv[i] = i % 7 == 3 ? -100 : (int64_t)(i % C);
      if (tv[i] >= 0) {
        sum += m + log(se) - xv[i * C + tv[i]];
        cnt += 1;
      }
    }
    for (int k = 0; k < 2; k++) {
      const ct_dtype dt = k ? CT_BF16 : CT_F32;
      ct_tensor *x32 = NULL, *x = NULL, *t = NULL, *ls = NULL, *lm = NULL, *g = NULL;
      ck_assert_ct_ok(ct_from_host(&x32, d, CT_F32, 2, (int64_t[]){n, C}, xv));
      ck_assert_ct_ok(ct_cast(&x, x32, dt)); /* bf16 inputs: the reference then only roughly */
      ck_assert_ct_ok(ct_set_requires_grad(x, true));
      ck_assert_ct_ok(ct_from_host(&t, d, CT_I64, 1, &n, tv));
      ck_assert_ct_ok(ct_cross_entropy(&ls, x, t, -100, 0.0, CT_REDUCTION_SUM));
      ck_assert_ct_ok(ct_cross_entropy(&lm, x, t, -100, 0.0, CT_REDUCTION_MEAN));
      ck_assert_int_eq(ct_tensor_dtype(lm), dt);
      ck_assert_int_eq(ct_tensor_ndim(lm), 0);
      double got[2];
      ck_assert_ct_ok(ct_item(&got[0], ls));
      ck_assert_ct_ok(ct_item(&got[1], lm));
      const double tol = k ? 3e-2 : 1e-5; /* bf16: its inputs' rounding, then the result's */
      ck_assert_msg(fabs(got[0] - sum) <= tol * fabs(sum), "n %lld %s sum: %.9g, expected %.9g", (long long)n,
                    ct_dtype_name(dt), got[0], sum);
      ck_assert_msg(fabs(got[1] - sum / cnt) <= tol * fabs(sum / cnt), "n %lld %s mean: %.9g, expected %.9g",
                    (long long)n, ct_dtype_name(dt), got[1], sum / cnt);
      if (k == 0) { /* MEAN's gradient at the first two rows (the second one's target kept) */
        ck_assert_ct_ok(ct_backward(lm, NULL));
        ck_assert_ct_ok(ct_grad(&g, x));
        float gv[6];
        ct_tensor *view = NULL, *rows = NULL;
        ck_assert_ct_ok(ct_slice(&view, g, 0, 0, 2, 1));
        ck_assert_ct_ok(ct_contiguous(&rows, view));
        ck_assert_ct_ok(ct_to_host(rows, gv, sizeof gv));
        ct_release(view);
        for (int64_t i = 0; i < 2; i++) {
          double m = fmax(fmax(xv[i * C], xv[i * C + 1]), xv[i * C + 2]), se = 0;
          for (int64_t c = 0; c < C; c++) se += exp(xv[i * C + c] - m);
          for (int64_t c = 0; c < C; c++) {
            double want = (exp(xv[i * C + c] - m) / se - (c == tv[i])) / cnt;
            ck_assert_msg(fabs(gv[i * C + c] - want) <= 1e-5 * fabs(want) + 1e-9, "grad [%lld, %lld]: %g, expected %g",
                          (long long)i, (long long)c, gv[i * C + c], want);
          }
        }
        ct_release(rows);
        ct_release(g);
      }
      ct_release(ls);
      ct_release(lm);
      ct_release(t);
      ct_release(x);
      ct_release(x32);
    }
    free(xv);
    free(tv);
  }
}
END_TEST

START_TEST(test_errors) {
  ct_device *d = ct_test_device();
  int64_t xs[2] = {4, 5}, ts[1] = {3}, t4[1] = {4};
  ct_tensor *x = NULL, *t = NULL, *ti = NULL, *xi = NULL, *r = (ct_tensor *)1;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 2, xs));
  ck_assert_ct_ok(ct_zeros(&t, d, CT_I64, 1, ts));
  ck_assert_ct_status(ct_cross_entropy(&r, x, t, -100, 0.0, CT_REDUCTION_MEAN), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("target has shape [3] but logits of shape [4, 5] needs a target of shape [4]");
  ck_assert_ct_ok(ct_zeros(&ti, d, CT_I32, 1, t4));
  ck_assert_ct_status(ct_nll_loss(&r, x, ti, -100, CT_REDUCTION_MEAN), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("target has dtype i32");
  ck_assert_ct_status(ct_cross_entropy(&r, x, ti, -100, 1.5, CT_REDUCTION_MEAN), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("label_smoothing is 1.5");
  ck_assert_ct_status(ct_cross_entropy(&r, x, ti, -100, 0.0, (ct_reduction)7), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("reduction is 7");
  ck_assert_ct_ok(ct_zeros(&xi, d, CT_I32, 2, xs));
  ck_assert_ct_status(ct_cross_entropy(&r, xi, t, -100, 0.0, CT_REDUCTION_MEAN), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("logits has dtype i32");
  ck_assert_ct_status(ct_mse_loss(&r, xi, x, CT_REDUCTION_SUM), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("ct_mse_loss");
  ck_assert_ct_status(ct_mse_loss(&r, x, t, CT_REDUCTION_SUM), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ct_status(ct_nll_loss(&r, NULL, t, -100, CT_REDUCTION_SUM), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(r);
  ct_release(x);
  ct_release(t);
  ct_release(ti);
  ct_release(xi);
}
END_TEST

int main(void) {
  Suite *s = suite_create("loss");
  TCase *tc = tcase_create("reference");
  tcase_add_loop_test(tc, test_reference, 0, NCASES);
  tcase_add_test(tc, test_strided_target);
  tcase_add_test(tc, test_reduction_paths);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_test(tc, test_target_out_of_range);
  tcase_add_test(tc, test_errors);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
