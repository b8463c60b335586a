/* The autograd engine: recording, ct_backward's rules (graph freed, second pass refused,
 * in-place writes detected, accumulation into leaves), grad mode, detach, and the gradients of
 * the arithmetic ops against finite differences (broadcast and strided inputs). */
#include "gradcheck.h"

/* A 1-D tensor of the checks' float dtype (gc_float: f64, or f32 without cl_khr_fp64). The values
 * compared below are small integers and halves, exact in f32 too, so their tolerances hold in
 * either dtype. */
static ct_tensor *vec(ct_device *d, int64_t n, const double *v) { return gc_from(d, 1, &n, v); }

static double scalar_of(const ct_tensor *t) {
  double *v = gc_host(t);
  double x = v[0];
  free(v);
  return x;
}

static ct_status f_arith(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  int which = *(int *)ctx;
  switch (which) {
  case 0: return ct_add(out, in[0], in[1]);
  case 1: return ct_sub(out, in[0], in[1]);
  case 2: return ct_mul(out, in[0], in[1]);
  case 3: return ct_div(out, in[0], in[1]);
  case 4: return ct_pow(out, in[0], in[1]);
  case 5: return ct_mul_scalar(out, in[0], -2.5);
  case 6: return ct_rsub_scalar(out, in[0], 3.0);
  case 7: return ct_rdiv_scalar(out, in[0], 3.0);
  case 8: return ct_pow_scalar(out, in[0], 3.0);
  case 9: return ct_rpow_scalar(out, in[0], 1.7);
  default: return ct_div_scalar(out, in[0], 4.0);
  }
}

START_TEST(arith_gradcheck) {
  ct_device *d = ct_test_device();
  double a[12], b[4];
  for (int which = 0; which <= 10; which++) {
    gc_fill(a, 12, 0.5, 2.0, 1 + which);
    gc_fill(b, 4, 0.5, 2.0, 50 + which);
    gc_input in[2] = {{.ndim = 2, .shape = {3, 4}, .data = a, .requires_grad = true, .strided = which % 2},
                      {.ndim = 1, .shape = {4}, .data = b, .requires_grad = true}};
    char what[64];
    snprintf(what, sizeof what, "arith %d", which);
    gc_check(d, what, f_arith, &which, which <= 4 ? 2 : 1, in);
  }
}
END_TEST

START_TEST(leaf_accumulates_and_graph_is_freed) {
  ct_device *d = ct_test_device();
  double xv[3] = {1, 2, 3};
  ct_tensor *x = vec(d, 3, xv), *y = NULL, *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert(ct_requires_grad(x) && ct_is_leaf(x));
  ck_assert_ct_ok(ct_mul(&y, x, x)); /* x used twice: d/dx = 2x */
  ck_assert(ct_requires_grad(y) && !ct_is_leaf(y));
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  double *gv = gc_host(g);
  for (int i = 0; i < 3; i++) ck_assert_double_eq_tol(gv[i], 2 * xv[i], 1e-12);
  free(gv);
  /* a second pass through the same graph is refused and changes nothing */
  ck_assert_ct_status(ct_backward(s, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("second time");
  gv = gc_host(g);
  ck_assert_double_eq_tol(gv[2], 6, 1e-12);
  free(gv);
  /* a new graph accumulates into the same gradient tensor (in place) */
  ct_release(y);
  ct_release(s);
  ck_assert_ct_ok(ct_mul(&y, x, x));
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  gv = gc_host(g);
  for (int i = 0; i < 3; i++) ck_assert_double_eq_tol(gv[i], 4 * xv[i], 1e-12);
  free(gv);
  ct_release(g);
  ck_assert_ct_ok(ct_grad_clear(x));
  ck_assert_ct_ok(ct_grad(&g, x));
  ck_assert_ptr_null(g);
  ct_release(y);
  ct_release(s);
  ct_release(x);
}
END_TEST

START_TEST(inplace_write_of_saved_tensor_detected) {
  ct_device *d = ct_test_device();
  double xv[2] = {1, 2}, cv[2] = {3, 4};
  ct_tensor *x = vec(d, 2, xv), *c = vec(d, 2, cv), *y = NULL, *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_mul(&y, x, c)); /* saves c */
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ck_assert_ct_ok(ct_add_out(c, c, c)); /* c does not require grad: allowed, bumps its version */
  ck_assert_ct_status(ct_backward(s, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("modified in place");
  ck_assert_ct_ok(ct_grad(&g, x));
  ck_assert_ptr_null(g); /* nothing was accumulated */
  ct_release(y);
  ct_release(s);
  ct_release(c);
  ct_release(x);
}
END_TEST

START_TEST(grad_mode_out_forms_and_flags) {
  ct_device *d = ct_test_device();
  double xv[2] = {1, 2};
  ct_tensor *x = vec(d, 2, xv), *y = NULL, *o = vec(d, 2, xv), *det = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert(ct_is_grad_enabled());
  ck_assert(ct_set_grad_enabled(false) == true);
  ck_assert_ct_ok(ct_exp(&y, x));
  ck_assert(!ct_requires_grad(y));
  ck_assert_ct_ok(ct_exp_out(o, x)); /* out forms are fine with grad mode off */
  ck_assert(ct_set_grad_enabled(true) == false);
  ct_release(y);
  ck_assert_ct_status(ct_exp_out(o, x), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("requires grad");
  ck_assert_ct_status(ct_exp_out(x, o), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("in place");
  ck_assert_ct_ok(ct_exp(&y, x));
  ck_assert_ct_status(ct_set_requires_grad(y, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_set_requires_grad(y, true));
  ck_assert_ct_ok(ct_detach(&det, y));
  ck_assert(!ct_requires_grad(det) && ct_is_leaf(det));
  ck_assert_ct_status(ct_backward(det, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_backward(y, NULL), CT_ERR_INVALID_ARGUMENT); /* two elements, no grad */
  ck_assert_error_contains("one-element");
  ct_tensor *i = NULL;
  int64_t two = 2;
  ck_assert_ct_ok(ct_zeros(&i, d, CT_I32, 1, &two));
  ck_assert_ct_status(ct_set_requires_grad(i, true), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ct_status(ct_set_requires_grad(NULL, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert(!ct_requires_grad(NULL));
  ct_release(i);
  ct_release(det);
  ct_release(y);
  ct_release(o);
  ct_release(x);
}
END_TEST

START_TEST(explicit_grad_and_leaf_root) {
  ct_device *d = ct_test_device();
  double xv[2] = {1, 2}, gv[2] = {0.5, -1};
  ct_tensor *x = vec(d, 2, xv), *gin = vec(d, 2, gv), *y = NULL, *g = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_mul_scalar(&y, x, 3.0));
  ck_assert_ct_ok(ct_backward(y, gin));
  ck_assert_ct_ok(ct_grad(&g, x));
  double *r = gc_host(g);
  ck_assert_double_eq_tol(r[0], 1.5, 1e-12);
  ck_assert_double_eq_tol(r[1], -3, 1e-12);
  free(r);
  ct_release(g);
  /* the user's grad tensor was not taken over: accumulating again leaves it as it was */
  ck_assert_ct_ok(ct_backward(x, gin)); /* a leaf root: its gradient is grad */
  r = gc_host(gin);
  ck_assert_double_eq_tol(r[0], 0.5, 1e-12);
  free(r);
  ck_assert_ct_ok(ct_grad(&g, x));
  r = gc_host(g);
  ck_assert_double_eq_tol(r[0], 2.0, 1e-12);
  free(r);
  ct_release(g);
  ct_release(y);
  ct_release(gin);
  ct_release(x);
}
END_TEST

/* A chain far deeper than any recursion could take frees without blowing the stack, and
 * backpropagates. */
START_TEST(deep_chain) {
  ct_device *d = ct_test_device();
  double xv[1] = {1};
  ct_tensor *x = vec(d, 1, xv), *y = ct_retain(x);
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  for (int i = 0; i < 3000; i++) {
    ct_tensor *z = NULL;
    ck_assert_ct_ok(ct_add_scalar(&z, y, 1.0));
    ct_release(y);
    y = z;
  }
  ck_assert_double_eq_tol(scalar_of(y), 3001, 1e-9);
  ct_tensor *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  ck_assert_double_eq_tol(scalar_of(g), 1, 1e-12);
  ct_release(g);
  ct_release(s);
  ct_release(y);
  /* and one released without a backward */
  y = ct_retain(x);
  for (int i = 0; i < 3000; i++) {
    ct_tensor *z = NULL;
    ck_assert_ct_ok(ct_mul_scalar(&z, y, 1.0));
    ct_release(y);
    y = z;
  }
  ct_release(y);
  ct_release(x);
}
END_TEST

/* Issue #28: a graph 5000 wide (every product of x is ready at once once the adds ran) gives the
 * right gradient, and in the engine's order, latest-recorded node first: the products' f32
 * gradients c_i (fractions: the sum rounds differently in any other order) are accumulated
 * into x's gradient from the last product to the first, which the host repeats here bit for
 * bit. The engine kept its ready nodes in a list scanned at each pop (quadratic in the width);
 * no timing is asserted, the figure is cltensor-bench's autograd.backward_wide. */
START_TEST(wide_graph_order) {
  enum { W = 5000 };
  ct_device *d = ct_test_device();
  int64_t n = 3;
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_full(&x, d, CT_F32, 1, &n, 0.25));
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ct_tensor **y = calloc(W, sizeof *y);
  ck_assert_ptr_nonnull(y);
  for (int i = 0; i < W; i++) ck_assert_ct_ok(ct_mul_scalar(&y[i], x, 1.0 / (3 + i % 97)));
  ct_tensor *s = ct_retain(y[0]);
  for (int i = 1; i < W; i++) {
    ct_tensor *t = NULL;
    ck_assert_ct_ok(ct_add(&t, s, y[i]));
    ct_release(s);
    s = t;
  }
  for (int i = 0; i < W; i++) ct_release(y[i]);
  free(y);
  ct_tensor *loss = NULL, *g = NULL;
  ck_assert_ct_ok(ct_sum(&loss, s, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  float got[3];
  ck_assert_ct_ok(ct_to_host(g, got, sizeof got));
  /* The adds run first (recorded last), then the products, latest first. */
  float want = (float)(1.0 / (3 + (W - 1) % 97));
  for (int i = W - 2; i >= 0; i--) want += (float)(1.0 / (3 + i % 97));
  double exact = 0;
  for (int i = 0; i < W; i++) exact += 1.0 / (3 + i % 97);
  for (int k = 0; k < 3; k++) {
    ck_assert_msg(fabs(got[k] - exact) < 1e-3 * exact, "gradient %d: %.9g, not about %.9g", k, got[k], exact);
    ck_assert_msg(memcmp(&got[k], &want, sizeof want) == 0,
                  "gradient %d: %.9g, but the latest-first order gives %.9g", k, got[k], want);
  }
  ct_release(g);
  ct_release(loss);
  ct_release(s);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-engine");
  TCase *tc = tcase_create("engine");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, arith_gradcheck);
  tcase_add_test(tc, leaf_accumulates_and_graph_is_freed);
  tcase_add_test(tc, inplace_write_of_saved_tensor_detected);
  tcase_add_test(tc, grad_mode_out_forms_and_flags);
  tcase_add_test(tc, explicit_grad_and_leaf_root);
  tcase_add_test(tc, deep_chain);
  tcase_add_test(tc, wide_graph_order);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
