/* softmax / log_softmax: every float dtype x dim x layout against a long double reference,
 * rows summing to 1, stability for large inputs, -inf and NaN entries, 0-dim and empty shapes.
 *
 * Bounds (eps_a = 2^-23 for f16/bf16/f32, which compute in f32, 2^-52 for f64; eps_o the result
 * dtype's epsilon; both twice the unit roundoff; c(n) as in reduce_ref.h; m the row max, s the
 * sum of exp(x - m)):
 *   softmax      |err| <= (eps_a (|x - m| + 4 + c(n)) + eps_o) y + tiny
 *                (x - m rounds to within eps_a |x - m|, which exp turns into a relative error;
 *                exp is within 3 ulp (OpenCL); the sum of positive terms within c(n) eps_a
 *                relatively; the division and the final rounding one each; tiny is the smallest
 *                subnormal of the result dtype, for results that underflow)
 *   log_softmax  |err| <= eps_a (|x - m| + 4 |log s| + c(n) + 2 |y|) + eps_o |y| + tiny */
#include <math.h>
#include <stdio.h>

#include "ct_test.h"
#include "reduce/reduce.h"
#include "reduce_ref.h"

enum view { V_NONE, V_TRANSPOSE, V_SLICE, V_EXPAND };

struct scase {
  const char *name;
  int ndim;
  int64_t shape[3];
  enum view view;
  int dim;
};

static const struct scase cases[] = {
    {"dim 0", 3, {5, 37, 3}, V_NONE, 0},
    {"dim 1", 3, {5, 37, 3}, V_NONE, 1},
    {"dim 2", 3, {5, 37, 3}, V_NONE, 2},
    {"dim -1", 3, {5, 37, 3}, V_NONE, -1},
    {"transposed dim 0", 3, {3, 37, 5}, V_TRANSPOSE, 0},
    {"transposed dim -1", 3, {3, 37, 5}, V_TRANSPOSE, -1},
    {"sliced dim 1", 2, {3, 600}, V_SLICE, 1},
    {"expanded dim 0", 3, {1, 37, 3}, V_EXPAND, 0},
    {"expanded dim 1", 3, {1, 37, 3}, V_EXPAND, 1},
    {"long rows", 2, {3, 1000}, V_NONE, 1},            /* work-group per row, vectors */
    {"long strided rows", 2, {2000, 3}, V_NONE, 0},    /* work-group per row, strided */
    {"outer dim", 2, {40, 300}, V_NONE, 0},            /* work-item per 8 rows */
    {"many short rows", 2, {600, 21}, V_NONE, 1},      /* CPUs: 64 rows per work-group */
    {"size-1 dim", 2, {4, 1}, V_NONE, 1},
    {"0-dim", 0, {0}, V_NONE, 0},
    {"0-dim dim -1", 0, {0}, V_NONE, -1},
    {"empty", 2, {0, 5}, V_NONE, 1},
    {"empty dim", 2, {5, 0}, V_NONE, 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static double tiny_of(ct_dtype t) {
  switch (t) {
    case CT_F16: return ldexp(1, -24);
    case CT_BF16: return ldexp(1, -133);
    case CT_F32: return ldexp(1, -149);
    default: return ldexp(1, -1074);
  }
}

static ct_tensor *make_view(ct_device *d, ct_dtype t, const struct scase *c, const void *data) {
  ct_tensor *base, *v = NULL;
  ck_assert_ct_ok(ct_from_host(&base, d, t, c->ndim, c->shape, data));
  switch (c->view) {
    case V_NONE: v = ct_retain(base); break;
    case V_TRANSPOSE: ck_assert_ct_ok(ct_transpose(&v, base, 0, c->ndim - 1)); break;
    case V_SLICE: ck_assert_ct_ok(ct_slice(&v, base, 1, 3, c->shape[1], 3)); break;
    case V_EXPAND: {
      int64_t shape[3] = {4, c->shape[1], c->shape[2]};
      ck_assert_ct_ok(ct_expand(&v, base, c->ndim, shape));
      break;
    }
  }
  ct_release(base);
  return v;
}

/* Compares ct_(log_)softmax of x (logical values vals) along dim with the reference; checks
 * that softmax rows sum to 1. */
static void check_softmax(const ct_tensor *x, const void *vals, int dim, int logsm, const char *what) {
  ct_dtype t = ct_tensor_dtype(x);
  int nd = ct_tensor_ndim(x);
  const int64_t *shape = ct_tensor_shape(x);
  ct_tensor *y = NULL;
  ck_assert_ct_ok(logsm ? ct_log_softmax(&y, x, dim) : ct_softmax(&y, x, dim));
  ck_assert_int_eq(ct_tensor_dtype(y), t);
  ck_assert_int_eq(ct_tensor_ndim(y), nd);
  for (int i = 0; i < nd; i++) ck_assert_int_eq(ct_tensor_shape(y)[i], shape[i]);
  int64_t numel = ct_numel(x);
  size_t es = ct_dtype_size(t);
  unsigned char *got = malloc((size_t)(numel ? numel : 1) * es);
  ck_assert_ct_ok(ct_to_host(y, got, (size_t)numel * es));
  ct_release(y);
  int dd = nd == 0 ? 0 : (dim < 0 ? dim + nd : dim);
  int64_t n = nd ? shape[dd] : 1, inner = 1;
  for (int i = dd + 1; i < nd; i++) inner *= shape[i];
  int64_t rows = n ? numel / n : 0;
  double ea = acc_eps(t), eo = dtype_eps(t), tiny = tiny_of(t);
  for (int64_t r = 0; r < rows; r++) {
    int64_t base = (r / inner) * n * inner + r % inner;
    long double m = -INFINITY, s = 0, gs = 0, gs_tol = 0;
    bool nan = false;
    for (int64_t j = 0; j < n; j++) {
      long double v = ct__host_load_double(t, (const unsigned char *)vals + (base + j * inner) * es);
      if (isnan(v)) nan = true;
      if (v > m) m = v;
    }
    for (int64_t j = 0; j < n; j++)
      s += expl(ct__host_load_double(t, (const unsigned char *)vals + (base + j * inner) * es) - m);
    long double ls = logl(s);
    for (int64_t j = 0; j < n; j++) {
      int64_t e = base + j * inner;
      long double xv = ct__host_load_double(t, (const unsigned char *)vals + e * es);
      long double g = ct__host_load_double(t, got + e * es);
      if (nan) {
        ck_assert_msg(isnan(g), "%s: row %lld has a NaN but element %lld is %Lg", what, (long long)r,
                      (long long)j, g);
        continue;
      }
      long double want, tol;
      long double dx = isinf(xv) ? 0 : fabsl(xv - m);
      if (logsm) {
        want = (xv - m) - ls;
        tol = ea * (dx + 4 * fabsl(ls) + c_of_n(n) + 2 * fabsl(want)) + eo * fabsl(want) + tiny;
      } else {
        want = expl(xv - m) / s;
        tol = (ea * (dx + 4 + c_of_n(n)) + eo) * want + tiny;
        gs += g;
        gs_tol += tol;
      }
      /* A result beyond the dtype's range rounds to an infinity (log_softmax in f16). */
      unsigned char rounded[8];
      ct__host_store_double(t, rounded, (double)want);
      if (isinf(ct__host_load_double(t, rounded))) want = ct__host_load_double(t, rounded);
      if (isinf(want)) {
        ck_assert_msg(g == want, "%s: row %lld element %lld: got %Lg, expected %Lg", what,
                      (long long)r, (long long)j, g, want);
        continue;
      }
      ck_assert_msg(fabsl(g - want) <= tol,
                    "%s: row %lld element %lld (x = %Lg): got %.10Lg, expected %.10Lg (error %.3Lg > %.3Lg)",
                    what, (long long)r, (long long)j, xv, g, want, fabsl(g - want), tol);
    }
    /* Each of the n results is within its bound, so the row sums to 1 within the sum of the
     * bounds (plus the host's own rounding, far smaller). */
    if (!logsm && !nan && n > 0)
      ck_assert_msg(fabsl(gs - 1) <= gs_tol + 1e-15L, "%s: row %lld sums to %.10Lg (bound %.3Lg)",
                    what, (long long)r, gs, gs_tol);
  }
  free(got);
}

START_TEST(test_softmax_cases) {
  int logsm = _i;
  ct_device *d = ct_test_device();
  const ct_dtype fts[4] = {CT_F16, CT_BF16, CT_F32, CT_F64};
  for (int k = 0; k < 4; k++) {
    ct_dtype t = fts[k];
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    for (int c = 0; c < NCASES; c++) {
      int64_t n = 1;
      for (int i = 0; i < cases[c].ndim; i++) n *= cases[c].shape[i];
      void *data = make_data(t, n, (uint64_t)(c * 11 + k), -5, 5, false);
      ct_tensor *x = make_view(d, t, &cases[c], data);
      free(data);
      int64_t xn = ct_numel(x);
      void *vals = malloc((size_t)(xn ? xn : 1) * ct_dtype_size(t));
      ck_assert_ct_ok(ct_to_host(x, vals, (size_t)xn * ct_dtype_size(t)));
      char what[128];
      snprintf(what, sizeof what, "%s on %s, case \"%s\"", logsm ? "log_softmax" : "softmax",
               ct_dtype_name(t), cases[c].name);
      check_softmax(x, vals, cases[c].dim, logsm, what);
      ct_release(x);
      free(vals);
    }
  }
}
END_TEST

/* Large inputs: exp(1000) overflows, so only max subtraction gives finite results. */
START_TEST(test_stable_large_inputs) {
  ct_device *d = ct_test_device();
  const ct_dtype fts[4] = {CT_F16, CT_BF16, CT_F32, CT_F64};
  for (int k = 0; k < 4; k++) {
    ct_dtype t = fts[k];
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    int64_t shape[2] = {3, 400};
    size_t es = ct_dtype_size(t);
    unsigned char *p = malloc(1200 * es);
    for (int i = 0; i < 1200; i++) {
      double v = i < 400 ? 1000 + (i % 2) : (i < 800 ? -1000.0 - (i % 3) : 60000.0 * ((i % 5) - 2) / 2);
      ct__host_store_double(t, p + i * es, v);
    }
    ct_tensor *x;
    ck_assert_ct_ok(ct_from_host(&x, d, t, 2, shape, p));
    for (int logsm = 0; logsm < 2; logsm++) {
      char what[64];
      snprintf(what, sizeof what, "%s of large values, %s", logsm ? "log_softmax" : "softmax",
               ct_dtype_name(t));
      check_softmax(x, p, 1, logsm, what);
      check_softmax(x, p, 0, logsm, what);
    }
    /* The documented example: softmax([1000, 1001]) = [1 / (1 + e), e / (1 + e)] (bf16 can't
     * hold 1001, so it takes [1000, 1008]). */
    ct_tensor *y, *two;
    int64_t sh2[1] = {2};
    double delta = t == CT_BF16 ? 8 : 1, h2[2] = {1000, 1000 + delta};
    unsigned char b2[16];
    ct__host_store_double(t, b2, h2[0]);
    ct__host_store_double(t, b2 + es, h2[1]);
    ck_assert_ct_ok(ct_from_host(&two, d, t, 1, sh2, b2));
    ck_assert_ct_ok(ct_softmax(&y, two, 0));
    ck_assert_ct_ok(ct_to_host(y, b2, 2 * es));
    double e1 = 1 / (1 + exp(delta));
    ck_assert_double_eq_tol(ct__host_load_double(t, b2), e1, 2 * dtype_eps(t));
    ck_assert_double_eq_tol(ct__host_load_double(t, b2 + es), 1 - e1, 2 * dtype_eps(t));
    ct_release(y);
    ct_release(two);
    ct_release(x);
    free(p);
  }
}
END_TEST

START_TEST(test_infinities_and_nan) {
  ct_device *d = ct_test_device();
  float v[8] = {1, -INFINITY, 2, 3, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  float nanrow[4] = {1, NAN, 2, 3};
  int64_t shape[2] = {2, 4};
  ct_tensor *x, *y;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, shape, v));
  float r[8];
  ck_assert_ct_ok(ct_softmax(&y, x, 1));
  ck_assert_ct_ok(ct_to_host(y, r, sizeof r));
  ck_assert_float_eq(r[1], 0.0f);
  ck_assert_float_eq_tol(r[0] + r[2] + r[3], 1.0f, 1e-6f);
  for (int i = 4; i < 8; i++) ck_assert(isnan(r[i])); /* all -inf: 0/0, as PyTorch */
  ct_release(y);
  ck_assert_ct_ok(ct_log_softmax(&y, x, 1));
  ck_assert_ct_ok(ct_to_host(y, r, sizeof r));
  ck_assert(isinf(r[1]) && r[1] < 0);
  ct_release(y);
  ct_release(x);
  int64_t s1[1] = {4};
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 1, s1, nanrow));
  ck_assert_ct_ok(ct_softmax(&y, x, 0));
  ck_assert_ct_ok(ct_to_host(y, r, 16));
  for (int i = 0; i < 4; i++) ck_assert(isnan(r[i]));
  ct_release(y);
  ct_release(x);
}
END_TEST

int main(int argc, char **argv) {
  /* "gpu-layout": the GPU kernels' layout on this (CPU) device, so both layouts are tested. */
  ct__reduce_gpu_layout = argc > 1 && strcmp(argv[1], "gpu-layout") == 0;
  Suite *s = suite_create("softmax");
  TCase *tc = tcase_create("softmax");
  tcase_add_loop_test(tc, test_softmax_cases, 0, 2);
  tcase_add_test(tc, test_stable_large_inputs);
  tcase_add_test(tc, test_infinities_and_nan);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
