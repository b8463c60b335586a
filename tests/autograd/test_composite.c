/* Composite functions against PyTorch's gradients (data/composite.safetensors, made by
 * make_composite.py): an MLP with layer norm and cross entropy, a CNN with batch norm and max
 * pooling, a causal two-head attention block, and a mix of indexing, scans, softmax, where,
 * clamp and keepdim reductions. Everything is f64 here and in PyTorch, so the only differences
 * are summation orders: losses and gradients agree to 1e-9 relative (plus 1e-12 absolute for
 * values near zero), far below what a wrong formula gives.
 *
 * Without cl_khr_fp64 the fixture's f64 tensors load as f32 (ct_safetensors_load_as, as
 * PyTorch's .float()) and everything runs in f32 against PyTorch's f64 values: the inputs are
 * rounded (u = 6e-8) and each op rounds again. COMP_TOL32 bounds that: a few tens of ops on O(1)
 * values, sums of up to a few hundred terms (the CNN's linear layer), normalisations dividing by
 * standard deviations of about 1, give errors of tens of u relative to the values' scale (seen:
 * 7e-7 at most, on PoCL and rusticl); 2e-5 relative plus 2e-6 absolute (over 300 u) is the
 * bound, far below a wrong formula's O(1). */
#include <math.h>

#include "gradcheck.h"

#define COMP_TOL32_REL 2e-5
#define COMP_TOL32_ABS 2e-6

#define ARENA 96
typedef struct {
  ct_device *d;
  ct_safetensors *st;
  ct_tensor *t[ARENA];
  int n;
} arena;

static ct_tensor *keep(arena *a, ct_tensor *t) {
  ck_assert(a->n < ARENA);
  a->t[a->n++] = t;
  return t;
}
static void arena_free(arena *a) {
  for (int i = 0; i < a->n; i++) ct_release(a->t[i]);
  a->n = 0;
}
static ct_tensor *get(arena *a, const char *c, const char *name) {
  char key[96];
  snprintf(key, sizeof key, "%s.%s", c, name);
  ct_tensor *t = NULL;
  ck_assert_msg(ct_safetensors_get(&t, a->st, key) == CT_OK, "%s: %s", key, ct_last_error());
  return keep(a, t);
}
static ct_tensor *param(arena *a, const char *c, const char *name) {
  ct_tensor *t = get(a, c, name);
  ck_assert_ct_ok(ct_set_requires_grad(t, true));
  return t;
}

static void expect_close(const char *what, const ct_tensor *got, const ct_tensor *want) {
  ck_assert_msg(got != NULL, "%s: no gradient", what);
  ck_assert_int_eq(ct_numel(got), ct_numel(want));
  ck_assert_int_eq(ct_tensor_dtype(got), ct_tensor_dtype(want));
  const bool f64 = ct_tensor_dtype(want) == CT_F64;
  const double atol = f64 ? 1e-12 : COMP_TOL32_ABS, rtol = f64 ? 1e-9 : COMP_TOL32_REL;
  double *g = gc_host(got), *w = gc_host(want);
  for (int64_t i = 0; i < ct_numel(want); i++)
    ck_assert_msg(fabs(g[i] - w[i]) <= atol + rtol * fabs(w[i]), "%s[%lld]: %.15g, PyTorch %.15g", what,
                  (long long)i, g[i], w[i]);
  free(g);
  free(w);
}

/* Backpropagates loss and compares it and the gradients of names[] with the fixture's. */
static void check(arena *a, const char *c, ct_tensor *loss, const char *const *names, ct_tensor *const *params,
                  int n) {
  char what[96];
  snprintf(what, sizeof what, "%s loss", c);
  expect_close(what, loss, get(a, c, "loss"));
  ck_assert_ct_ok(ct_backward(loss, NULL));
  for (int i = 0; i < n; i++) {
    ct_tensor *g = NULL;
    ck_assert_ct_ok(ct_grad(&g, params[i]));
    keep(a, g);
    char key[64];
    snprintf(key, sizeof key, "grad.%s", names[i]);
    snprintf(what, sizeof what, "%s d/d %s", c, names[i]);
    expect_close(what, g, get(a, c, key));
  }
}

/* r = the result of a call whose first argument is &r. */
#define T(fn, ...)                                  \
  ({                                                \
    ct_tensor *r_ = NULL;                           \
    ck_assert_ct_ok(fn(&r_, __VA_ARGS__));          \
    keep(&A, r_);                                   \
  })

static arena open_fixture(void) {
  arena a = {.d = ct_test_device()};
  char path[512];
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/tests/autograd/data/composite.safetensors", root ? root : ".");
  /* f64 where the device has it (gc_float), else PyTorch's f64 values rounded to f32 */
  ck_assert_msg(ct_safetensors_load_as(&a.st, path, a.d, CT_F64, gc_float(a.d)) == CT_OK, "%s", ct_last_error());
  return a;
}

START_TEST(mlp) {
  arena A = open_fixture();
  const char *c = "mlp";
  const char *names[] = {"x", "w1", "b1", "lnw", "lnb", "w2", "b2"};
  ct_tensor *p[7];
  for (int i = 0; i < 7; i++) p[i] = param(&A, c, names[i]);
  ct_tensor *target = get(&A, c, "target");
  ct_tensor *h = T(ct_linear, p[0], p[1], p[2]);
  h = T(ct_gelu_tanh, h);
  h = T(ct_layer_norm, h, 1, p[3], p[4], 1e-5);
  ct_tensor *logits = T(ct_linear, h, p[5], p[6]);
  ct_tensor *loss = T(ct_cross_entropy, logits, target, -100, 0.1, CT_REDUCTION_MEAN);
  check(&A, c, loss, names, p, 7);
  arena_free(&A);
  ct_safetensors_free(A.st);
}
END_TEST

START_TEST(cnn) {
  arena A = open_fixture();
  const char *c = "cnn";
  const char *names[] = {"x", "cw", "cb", "bnw", "bnb", "fw", "fb"};
  ct_tensor *p[7];
  for (int i = 0; i < 7; i++) p[i] = param(&A, c, names[i]);
  ct_tensor *target = get(&A, c, "target");
  int64_t three = 3;
  ct_tensor *rm = T(ct_zeros, A.d, gc_float(A.d), 1, &three);
  ct_tensor *rv = T(ct_ones, A.d, gc_float(A.d), 1, &three);
  const int s1[2] = {1, 1}, p1[2] = {1, 1}, k2[2] = {2, 2}, p0[2] = {0, 0};
  ct_tensor *h = T(ct_conv2d, p[0], p[1], p[2], s1, p1, s1, 1);
  h = T(ct_batch_norm, h, rm, rv, p[3], p[4], true, 0.1, 1e-5);
  h = T(ct_relu, h);
  h = T(ct_max_pool2d, h, k2, k2, p0);
  const int64_t flat[2] = {2, -1};
  h = T(ct_reshape, h, 2, flat);
  ct_tensor *logits = T(ct_linear, h, p[5], p[6]);
  ct_tensor *lp = T(ct_log_softmax, logits, 1);
  ct_tensor *loss = T(ct_nll_loss, lp, target, -100, CT_REDUCTION_SUM);
  check(&A, c, loss, names, p, 7);
  arena_free(&A);
  ct_safetensors_free(A.st);
}
END_TEST

/* [2, 5, 8] -> [2, heads 2, 5, 4] */
static ct_tensor *heads(arena *a, ct_tensor *t) {
  const int64_t s[4] = {2, 5, 2, 4};
  ct_tensor *r = NULL, *tr = NULL;
  ck_assert_ct_ok(ct_reshape(&r, t, 4, s));
  keep(a, r);
  ck_assert_ct_ok(ct_transpose(&tr, r, 1, 2));
  return keep(a, tr);
}

START_TEST(attn) {
  arena A = open_fixture();
  const char *c = "attn";
  const char *names[] = {"x", "wq", "wk", "wv", "wo"};
  ct_tensor *p[5];
  for (int i = 0; i < 5; i++) p[i] = param(&A, c, names[i]);
  ct_tensor *tgt = get(&A, c, "tgt");
  ct_tensor *q = heads(&A, T(ct_linear, p[0], p[1], NULL));
  ct_tensor *k = heads(&A, T(ct_linear, p[0], p[2], NULL));
  ct_tensor *v = heads(&A, T(ct_linear, p[0], p[3], NULL));
  ct_tensor *att = T(ct_scaled_dot_product_attention, q, k, v, NULL, true, NAN);
  att = T(ct_transpose, att, 1, 2);
  const int64_t s3[3] = {2, 5, 8};
  att = T(ct_reshape, att, 3, s3);
  ct_tensor *y = T(ct_linear, att, p[4], NULL);
  y = T(ct_add, p[0], y);
  ct_tensor *loss = T(ct_mse_loss, y, tgt, CT_REDUCTION_MEAN);
  check(&A, c, loss, names, p, 5);
  arena_free(&A);
  ct_safetensors_free(A.st);
}
END_TEST

START_TEST(misc) {
  arena A = open_fixture();
  const char *c = "misc";
  const char *names[] = {"emb", "p"};
  ct_tensor *p[2] = {param(&A, c, "emb"), param(&A, c, "p")};
  ct_tensor *idx = get(&A, c, "idx"), *sel = get(&A, c, "sel");
  ct_tensor *e = T(ct_embedding, p[0], idx);
  ct_tensor *pu = T(ct_unsqueeze, p[1], 0);
  const int64_t s234[3] = {2, 3, 4};
  pu = T(ct_expand, pu, 3, s234);
  ct_tensor *parts[2] = {e, pu};
  ct_tensor *cc = T(ct_cat, parts, 2, 1);
  ct_tensor *s = T(ct_index_select, cc, 1, sel);
  ct_tensor *cs = T(ct_cumsum, s, 2);
  ct_tensor *sm = T(ct_softmax, s, -1);
  s = T(ct_mul, cs, sm);
  ct_tensor *pos = T(ct_gt_scalar, s, 0.0);
  ct_tensor *lk = T(ct_mul_scalar, s, 0.1);
  s = T(ct_where, pos, s, lk);
  s = T(ct_clamp, s, -1.5, 2.0);
  const int d02[2] = {0, 2}, d1[1] = {1};
  ct_tensor *m = T(ct_mean, s, 2, d02, true);
  ct_tensor *dv = T(ct_sub, s, m);
  dv = T(ct_pow_scalar, dv, 2.0);
  ct_tensor *l1 = T(ct_sum, dv, 0, NULL, false);
  ct_tensor *mx = T(ct_max, s, 1, d1, false);
  ct_tensor *l2 = T(ct_sum, mx, 0, NULL, false);
  ct_tensor *loss = T(ct_add, l1, l2);
  check(&A, c, loss, names, p, 2);
  arena_free(&A);
  ct_safetensors_free(A.st);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-composite");
  TCase *tc = tcase_create("composite");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, mlp);
  tcase_add_test(tc, cnn);
  tcase_add_test(tc, attn);
  tcase_add_test(tc, misc);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
