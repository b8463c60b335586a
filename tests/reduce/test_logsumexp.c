/* logsumexp, any, all against PyTorch's results (data/logsumexp_ref.h, made by
 * data/gen_logsumexp.py): dims lists, keepdim, every dim, negative dims, transposed and expanded
 * views, infinities and NaN, integer promotion, f16, u8/bool results, empty extents; and the
 * argument errors.
 *
 * Tolerances. logsumexp computes in f32 here, as PyTorch does on f32 input: m + log(s) with s
 * the pairwise sum of exp(x - m) (each term within a few ulp), so the result is within a few
 * f32 ulps of |m| plus a few of log(s) <= log(n): |err| <= 1e-5 (|r| + 1) holds with a margin of
 * tens of ulps. f16: the result is rounded to f16 (2^-11 relative) by both; a difference of one
 * f16 ulp (2^-10 relative) is allowed. any/all are exact. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ct_fixture.h"
#include "ct_test.h"

#include "data/logsumexp_ref.h"

#define NCASES ((int)(sizeof lse_cases / sizeof lse_cases[0]))

static ct_status run_op(int op, ct_tensor **out, const ct_tensor *x, int ndims, const int *dims,
                        bool keepdim) {
  if (op == 0) return ct_logsumexp(out, x, ndims, dims, keepdim);
  if (op == 1) return ct_any(out, x, ndims, dims, keepdim);
  return ct_all(out, x, ndims, dims, keepdim);
}

START_TEST(test_reference) {
  const struct lse_case *c = &lse_cases[_i];
  ct_device *d = ct_test_device();
  ct_tensor *base = ct_test_from_doubles(d, c->dt, c->ndim, c->shape, c->in), *x = NULL, *r = NULL;
  if (c->view == 't') {
    ck_assert_ct_ok(ct_transpose(&x, base, 0, -1));
  } else if (c->view == 'e') {
    int64_t sh[4] = {3, c->shape[1], c->shape[2], c->shape[3]};
    ck_assert_ct_ok(ct_expand(&x, base, c->ndim, sh));
  } else {
    x = ct_retain(base);
  }
  ck_assert_ct_ok(run_op(c->op, &r, x, c->ndims, c->dims, c->keepdim));
  ck_assert_msg(ct_tensor_dtype(r) == c->odt, "%s: dtype %s, expected %s", c->name,
                ct_dtype_name(ct_tensor_dtype(r)), ct_dtype_name(c->odt));
  ck_assert_int_eq(ct_tensor_ndim(r), c->ondim);
  for (int i = 0; i < c->ondim; i++) ck_assert_int_eq(ct_tensor_shape(r)[i], c->oshape[i]);
  ck_assert_int_eq(ct_numel(r), c->on);
  double *res = ct_test_to_doubles(r);
  for (int i = 0; i < c->on; i++) {
    double got = res[i], want = c->out[i];
    if (isnan(want)) {
      ck_assert_msg(isnan(got), "%s [%d]: %g, expected NaN", c->name, i, got);
    } else if (isinf(want)) {
      ck_assert_msg(got == want, "%s [%d]: %g, expected %g", c->name, i, got, want);
    } else {
      double tol = c->op != 0 ? 0 : c->odt == CT_F16 ? ldexp(fabs(want), -10) : 1e-5 * (fabs(want) + 1);
      ck_assert_msg(fabs(got - want) <= tol, "%s [%d]: %.9g, expected %.9g (tol %g)", c->name, i,
                    got, want, tol);
    }
  }
  free(res);
  ct_release(r);
  ct_release(x);
  ct_release(base);
}
END_TEST

START_TEST(test_errors) {
  ct_device *d = ct_test_device();
  int64_t sh[2] = {2, 3};
  ct_tensor *x = NULL, *r = (ct_tensor *)1;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 2, sh));
  int bad[1] = {2};
  ck_assert_ct_status(ct_logsumexp(&r, x, 1, bad, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("ct_logsumexp: dim 2 is out of range");
  int twice[2] = {1, -1};
  ck_assert_ct_status(ct_any(&r, x, 2, twice, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_any: dim 1 appears more than once");
  ck_assert_ct_status(ct_all(&r, NULL, 0, NULL, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_all");
  ck_assert_ct_status(ct_all(NULL, x, 0, NULL, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_logsumexp(&r, x, -1, NULL, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ndims is -1");
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("logsumexp");
  TCase *tc = tcase_create("reference");
  tcase_add_loop_test(tc, test_reference, 0, NCASES);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_test(tc, test_errors);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
