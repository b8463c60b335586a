/* The small utilities of issue #30: ct_item / ct_item_int64, ct_randperm, ct_flatten /
 * ct_unflatten, ct_print's autograd suffix, and the 1-D pools against PyTorch's results
 * (data/utils_ref.safetensors, made by make_utils_fixtures.py beside this file).
 *
 * Tolerances: the pools' forward values must equal PyTorch's (max picks an element; the
 * averages add at most 4 halves, exact in f32, and divide once as PyTorch does); x's gradients
 * are sums of a few products of fixture values, within 1e-6 relative. Programs built: pool.cl
 * (f32), the copy and elementwise programs of the views and of ct_mul. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ct_fixture.h"

static ct_tensor *from(ct_device *d, ct_dtype dt, int ndim, const int64_t *shape, const double *v) {
  return ct_test_from_doubles(d, dt, ndim, shape, v);
}

START_TEST(item_values) {
  ct_device *d = ct_test_device();
  double v = 0;
  int64_t i = 0;
  ct_tensor *a = from(d, CT_F32, 1, (const int64_t[]){1}, (const double[]){2.5});
  ck_assert_ct_ok(ct_item(&v, a));
  ck_assert_double_eq(v, 2.5);
  ck_assert_ct_status(ct_item_int64(&i, a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("the f32 value 2.5 is not an integer");
  ck_assert_int_eq(i, 0);
  ct_release(a);

  /* An exact int64 beyond 2^53, in a [1, 1] tensor; ct_item rounds it to a double. */
  int64_t big = (INT64_C(1) << 53) + 1;
  ct_tensor *b = NULL;
  ck_assert_ct_ok(ct_from_host(&b, d, CT_I64, 2, (const int64_t[]){1, 1}, &big));
  ck_assert_ct_ok(ct_item_int64(&i, b));
  ck_assert_int_eq(i, big);
  ck_assert_ct_ok(ct_item(&v, b));
  ck_assert_double_eq(v, 9007199254740992.0);
  ct_release(b);

  /* 0-d tensors of other dtypes; a view (an element of a larger tensor). */
  const struct {
    ct_dtype dt;
    double x;
  } cases[] = {{CT_F16, -3.0}, {CT_BF16, 96.0}, {CT_F64, 1e300}, {CT_BOOL, 1}, {CT_U8, 200}, {CT_I8, -7}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    if (cases[k].dt == CT_F64 && !ct_test_fp64(d, "ct_item of an f64 tensor")) continue;
    ct_tensor *t = from(d, cases[k].dt, 0, NULL, &cases[k].x);
    ck_assert_ct_ok(ct_item(&v, t));
    ck_assert_double_eq(v, cases[k].x);
    if (cases[k].dt != CT_F64) {
      ck_assert_ct_ok(ct_item_int64(&i, t));
      ck_assert_int_eq(i, (int64_t)cases[k].x);
    } else {
      ck_assert_ct_status(ct_item_int64(&i, t), CT_ERR_INVALID_ARGUMENT); /* 1e300 does not fit */
    }
    ct_release(t);
  }
  ct_tensor *m = from(d, CT_I32, 1, (const int64_t[]){4}, (const double[]){5, 6, 7, 8}), *s = NULL;
  ck_assert_ct_ok(ct_slice(&s, m, 0, 2, 3, 1));
  ck_assert_ct_ok(ct_item_int64(&i, s));
  ck_assert_int_eq(i, 7);
  uint64_t huge = UINT64_MAX;
  ct_tensor *u = NULL;
  ck_assert_ct_ok(ct_from_host(&u, d, CT_U64, 0, NULL, &huge));
  ck_assert_ct_status(ct_item_int64(&i, u), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("u64 value 18446744073709551615 does not fit int64");

  /* Not one element: the count and the shape are named. */
  ck_assert_ct_status(ct_item(&v, m), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_item: a tensor with 4 elements (shape [4]) cannot be converted to a scalar");
  ck_assert(isnan(v));
  ck_assert_ct_status(ct_item(&v, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_item(NULL, m), CT_ERR_INVALID_ARGUMENT);
  ct_release(u);
  ct_release(s);
  ct_release(m);
}
END_TEST

static int64_t *perm_of(const ct_tensor *t) {
  int64_t n = ct_numel(t);
  ck_assert_int_eq(ct_tensor_dtype(t), CT_I64);
  int64_t *h = calloc((size_t)n + 1, sizeof *h);
  ck_assert_ct_ok(ct_to_host(t, h, (size_t)n * sizeof *h));
  return h;
}

static void assert_permutation(const int64_t *p, int64_t n) {
  char *seen = calloc((size_t)n + 1, 1);
  for (int64_t i = 0; i < n; i++) {
    ck_assert_msg(p[i] >= 0 && p[i] < n, "element %" PRId64 " is %" PRId64, i, p[i]);
    ck_assert_msg(!seen[p[i]], "%" PRId64 " appears twice", p[i]);
    seen[p[i]] = 1;
  }
  free(seen);
}

START_TEST(randperm_is_a_reproducible_permutation) {
  ct_device *d = ct_test_device();
  enum { N = 1000 };
  ct_tensor *a = NULL, *b = NULL, *c = NULL;
  ck_assert_ct_ok(ct_randperm_seeded(&a, d, N, 42, 7));
  ck_assert_ct_ok(ct_randperm_seeded(&b, d, N, 42, 7));
  ck_assert_ct_ok(ct_randperm_seeded(&c, d, N, 42, 8));
  ck_assert_int_eq(ct_tensor_ndim(a), 1);
  ck_assert_int_eq(ct_tensor_shape(a)[0], N);
  int64_t *pa = perm_of(a), *pb = perm_of(b), *pc = perm_of(c);
  assert_permutation(pa, N);
  assert_permutation(pc, N);
  ck_assert(memcmp(pa, pb, sizeof(int64_t) * N) == 0);
  ck_assert(memcmp(pa, pc, sizeof(int64_t) * N) != 0);
  /* Shuffled: few fixed points (about 1 expected) and every position reachable. */
  int fixed = 0;
  for (int i = 0; i < N; i++) fixed += pa[i] == i;
  ck_assert_int_lt(fixed, 10);
  /* The global state: after ct_manual_seed(s) the k-th call is the seeded one at offset k. */
  ct_manual_seed(42);
  ct_tensor *g0 = NULL, *g1 = NULL, *r = NULL;
  ck_assert_ct_ok(ct_randperm(&g0, d, N));
  ck_assert_ct_ok(ct_randperm(&g1, d, N));
  ck_assert_ct_ok(ct_randperm_seeded(&r, d, N, 42, 0));
  int64_t *p0 = perm_of(g0), *p1 = perm_of(g1), *pr = perm_of(r);
  ck_assert(memcmp(p0, pr, sizeof(int64_t) * N) == 0);
  ck_assert(memcmp(p1, pr, sizeof(int64_t) * N) != 0);
  /* The index ops accept it without a device range check (known on the way in). */
  ct_tensor *x = NULL, *y = NULL;
  ck_assert_ct_ok(ct_arange(&x, d, CT_F32, 0, N, 1));
  ck_assert_ct_ok(ct_index_select(&y, x, 0, a));
  float *hy = malloc(sizeof(float) * N);
  ck_assert_ct_ok(ct_to_host(y, hy, sizeof(float) * N));
  for (int i = 0; i < N; i++) ck_assert_float_eq(hy[i], (float)pa[i]);
  free(hy);
  /* Sizes 0 and 1; errors. */
  ct_tensor *e = NULL, *one = NULL;
  ck_assert_ct_ok(ct_randperm_seeded(&e, d, 0, 1, 0));
  ck_assert_int_eq(ct_numel(e), 0);
  ck_assert_ct_ok(ct_randperm_seeded(&one, d, 1, 1, 0));
  int64_t z = -1;
  ck_assert_ct_ok(ct_item_int64(&z, one));
  ck_assert_int_eq(z, 0);
  ct_tensor *bad = (ct_tensor *)1;
  ck_assert_ct_status(ct_randperm(&bad, d, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(bad);
  ck_assert_error_contains("n is -1");
  ck_assert_ct_status(ct_randperm(&bad, NULL, 3), CT_ERR_INVALID_ARGUMENT);
  free(pa);
  free(pb);
  free(pc);
  free(p0);
  free(p1);
  free(pr);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  ct_release(g0);
  ct_release(g1);
  ct_release(r);
  ct_release(x);
  ct_release(y);
  ct_release(e);
  ct_release(one);
}
END_TEST

static void assert_shape(const ct_tensor *t, int ndim, const int64_t *shape) {
  ck_assert_int_eq(ct_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++) ck_assert_int_eq(ct_tensor_shape(t)[i], shape[i]);
}

START_TEST(flatten_unflatten) {
  ct_device *d = ct_test_device();
  ct_tensor *x = NULL, *f = NULL, *u = NULL;
  ck_assert_ct_ok(ct_arange(&x, d, CT_F32, 0, 120, 1));
  ct_tensor *x4 = NULL;
  ck_assert_ct_ok(ct_view(&x4, x, 4, (const int64_t[]){2, 3, 4, 5}));
  /* flatten(1) as in a CNN head: a view of the same memory. */
  ck_assert_ct_ok(ct_flatten(&f, x4, 1, -1));
  assert_shape(f, 2, (const int64_t[]){2, 60});
  ck_assert_int_eq(ct_tensor_strides(f)[0], 60);
  ct_release(f);
  ck_assert_ct_ok(ct_flatten(&f, x4, 0, -1));
  assert_shape(f, 1, (const int64_t[]){120});
  ct_release(f);
  ck_assert_ct_ok(ct_flatten(&f, x4, -3, 2));
  assert_shape(f, 3, (const int64_t[]){2, 12, 5});
  ct_release(f);
  ck_assert_ct_ok(ct_flatten(&f, x4, 2, 2));
  assert_shape(f, 4, (const int64_t[]){2, 3, 4, 5});
  ct_release(f);
  ck_assert_ct_status(ct_flatten(&f, x4, 2, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("start_dim 2 (dim 2) comes after end_dim 1 (dim 1)");
  ck_assert_ct_status(ct_flatten(&f, x4, 0, 4), CT_ERR_INVALID_ARGUMENT);

  /* A transposed tensor cannot be flattened as a view: a copy, with the values in order. */
  ct_tensor *m = NULL, *mt = NULL;
  ck_assert_ct_ok(ct_view(&m, x, 2, (const int64_t[]){10, 12}));
  ck_assert_ct_ok(ct_transpose(&mt, m, 0, 1));
  ck_assert_ct_ok(ct_flatten(&f, mt, 0, 1));
  float h[120];
  ck_assert_ct_ok(ct_to_host(f, h, sizeof h));
  for (int i = 0; i < 12; i++)
    for (int j = 0; j < 10; j++) ck_assert_float_eq(h[i * 10 + j], (float)(j * 12 + i));
  ct_release(f);

  /* A scalar flattens to [1]. */
  ct_tensor *sc = from(d, CT_F32, 0, NULL, (const double[]){4});
  ck_assert_ct_ok(ct_flatten(&f, sc, 0, -1));
  assert_shape(f, 1, (const int64_t[]){1});
  ct_release(f);

  /* unflatten: the inverse, with -1 and negative dims. */
  ck_assert_ct_ok(ct_unflatten(&u, m, -1, (const int64_t[]){3, -1}, 2));
  assert_shape(u, 3, (const int64_t[]){10, 3, 4});
  ck_assert_int_eq(ct_tensor_strides(u)[1], 4);
  ct_release(u);
  ck_assert_ct_ok(ct_unflatten(&u, m, 0, (const int64_t[]){1, 5, 2}, 3));
  assert_shape(u, 4, (const int64_t[]){1, 5, 2, 12});
  ct_release(u);
  ck_assert_ct_ok(ct_unflatten(&u, mt, 0, (const int64_t[]){2, 6}, 2)); /* a transposed view splits too */
  assert_shape(u, 3, (const int64_t[]){2, 6, 10});
  ck_assert_int_eq(ct_tensor_strides(u)[2], 12);
  ct_release(u);
  ck_assert_ct_status(ct_unflatten(&u, m, 1, (const int64_t[]){5, 3}, 2), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("sizes [5, 3] don't multiply up to the size of dim 1 (12)");
  ck_assert_ct_status(ct_unflatten(&u, m, 1, (const int64_t[]){-1, -1}, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_unflatten(&u, m, 1, (const int64_t[]){5, -1}, 2), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_unflatten(&u, m, 2, (const int64_t[]){12}, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_unflatten(&u, sc, 0, (const int64_t[]){1}, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_unflatten(&u, m, 0, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 10}, 8),
                      CT_ERR_INVALID_ARGUMENT);
  ct_release(sc);
  ct_release(m);
  ct_release(mt);
  ct_release(x4);
  ct_release(x);
}
END_TEST

/* The text's end: what follows the device. */
static void assert_print_ends(const ct_tensor *t, const char *tail) {
  char buf[4096];
  ck_assert_ct_ok(ct_format(buf, sizeof buf, NULL, t));
  size_t n = strlen(buf), m = strlen(tail);
  ck_assert_msg(n >= m && !strcmp(buf + n - m, tail), "\"%s\" does not end with \"%s\"", buf, tail);
}

START_TEST(print_shows_autograd) {
  ct_device *d = ct_test_device();
  ct_tensor *x = from(d, CT_F32, 2, (const int64_t[]){2, 3}, (const double[]){1, 2, 3, 4, 5, 6});
  assert_print_ends(x, "device=cpu:0)");
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  assert_print_ends(x, "dtype=f32, device=cpu:0, requires_grad=True)");
  ct_tensor *y = NULL, *f = NULL, *s = NULL, *xt = NULL, *p = NULL, *e = NULL;
  ck_assert_ct_ok(ct_mul(&y, x, x));
  assert_print_ends(y, ", grad_fn=<MulBackward0>)");
  ck_assert_ct_ok(ct_flatten(&f, y, 0, -1));
  assert_print_ends(f, ", grad_fn=<ViewBackward0>)");
  ck_assert_ct_ok(ct_sum(&s, x, 0, NULL, false));
  assert_print_ends(s, ", grad_fn=<SumBackward0>)");
  ck_assert_ct_ok(ct_transpose(&xt, x, 0, 1));
  assert_print_ends(xt, ", grad_fn=<TransposeBackward0>)");
  ck_assert_ct_ok(ct_max_pool1d(&p, x, 2, 0, 0, 1, false));
  assert_print_ends(p, ", grad_fn=<SqueezeBackward1>)");
  /* An empty result shows it too. */
  ck_assert_ct_ok(ct_slice(&e, x, 1, 0, 0, 1));
  assert_print_ends(e, "shape=[2, 0], dtype=f32, device=cpu:0, grad_fn=<SliceBackward0>)");
  ct_release(x);
  ct_release(y);
  ct_release(f);
  ct_release(s);
  ct_release(xt);
  ct_release(p);
  ct_release(e);
}
END_TEST

/* ---- 1-D pools against PyTorch ---- */

static ct_safetensors *fixture(ct_device *d) {
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/tensor/data/utils_ref.safetensors", root ? root : ".");
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(ct_safetensors_load(&st, path, d));
  return st;
}

static ct_tensor *fx(const ct_safetensors *st, const char *name, const char *part) {
  char key[96];
  snprintf(key, sizeof key, "%s%s%s", name, part ? "." : "", part ? part : "");
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_safetensors_get(&t, st, key));
  return t;
}

static void assert_close(const ct_tensor *got, const ct_tensor *want, double rel, const char *what) {
  ck_assert_int_eq(ct_tensor_ndim(got), ct_tensor_ndim(want));
  for (int i = 0; i < ct_tensor_ndim(got); i++)
    ck_assert_msg(ct_tensor_shape(got)[i] == ct_tensor_shape(want)[i], "%s: dim %d is %lld, PyTorch %lld", what, i,
                  (long long)ct_tensor_shape(got)[i], (long long)ct_tensor_shape(want)[i]);
  double *a = ct_test_to_doubles(got), *b = ct_test_to_doubles(want);
  for (int64_t i = 0; i < ct_numel(got); i++)
    ck_assert_msg(fabs(a[i] - b[i]) <= rel * fmax(fabs(b[i]), 1e-3), "%s[%lld]: %.9g, PyTorch %.9g", what,
                  (long long)i, a[i], b[i]);
  free(a);
  free(b);
}

/* make_utils_fixtures.py's CASES. */
static const struct {
  const char *name;
  bool is_max;
  int k, s, p, dil;
  bool ceil, cip, unbatched;
} CASES[] = {
    {"max_k2", true, 2, 0, 0, 1, false, true, false},
    {"max_k3s2p1d2_ceil", true, 3, 2, 1, 2, true, true, false},
    {"max_k4s3p2_ceil", true, 4, 3, 2, 1, true, true, false},
    {"max_k3s1p1d3", true, 3, 1, 1, 3, false, true, false},
    {"max_k2s2_ceil_u", true, 2, 2, 0, 1, true, true, true},
    {"avg_k2", false, 2, 0, 0, 1, false, true, false},
    {"avg_k3s2p1_ceil_cip", false, 3, 2, 1, 1, true, true, false},
    {"avg_k3s2p1_ceil_excl", false, 3, 2, 1, 1, true, false, false},
    {"avg_k4s3p2_excl", false, 4, 3, 2, 1, false, false, false},
    {"avg_k4s3p2_ceil_cip_u", false, 4, 3, 2, 1, true, true, true},
};

START_TEST(pool1d_matches_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
    /* The container hands out the same leaf each time: its gradient restarts per case. */
    ct_tensor *x = fx(st, CASES[c].unbatched ? "x2" : "x", NULL);
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    ck_assert_ct_ok(ct_grad_clear(x));
    ct_tensor *y = NULL;
    if (CASES[c].is_max)
      ck_assert_ct_ok(ct_max_pool1d(&y, x, CASES[c].k, CASES[c].s, CASES[c].p, CASES[c].dil, CASES[c].ceil));
    else
      ck_assert_ct_ok(ct_avg_pool1d(&y, x, CASES[c].k, CASES[c].s, CASES[c].p, CASES[c].ceil, CASES[c].cip));
    ct_tensor *wy = fx(st, CASES[c].name, "y"), *gy = fx(st, CASES[c].name, "gy"), *wgx = fx(st, CASES[c].name, "gx");
    char what[96];
    snprintf(what, sizeof what, "%s: y", CASES[c].name);
    assert_close(y, wy, 0, what);
    ck_assert_ct_ok(ct_backward(y, gy));
    ct_tensor *gx = NULL;
    ck_assert_ct_ok(ct_grad(&gx, x));
    snprintf(what, sizeof what, "%s: x's gradient", CASES[c].name);
    assert_close(gx, wgx, 1e-6, what);
    ct_release(gx);
    ct_release(x);
    ct_release(y);
    ct_release(wy);
    ct_release(gy);
    ct_release(wgx);
  }
  ct_safetensors_free(st);
}
END_TEST

START_TEST(pool1d_errors) {
  ct_device *d = ct_test_device();
  double v[8] = {0};
  ct_tensor *x = from(d, CT_F32, 3, (const int64_t[]){1, 2, 4}, v), *x4 = from(d, CT_F32, 4, (const int64_t[]){1, 1, 2, 4}, v);
  ct_tensor *y = (ct_tensor *)1;
  ck_assert_ct_status(ct_max_pool1d(&y, x4, 2, 0, 0, 1, false), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("expected [N, C, L] or [C, L]");
  ck_assert_ptr_null(y);
  ck_assert_ct_status(ct_max_pool1d(&y, x, 2, 0, 2, 1, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("padding[1] is 2; it must be between 0 and half the kernel size (1)");
  ck_assert_ct_status(ct_max_pool1d(&y, x, 2, 0, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("dilation[1] must be >= 1");
  ck_assert_ct_status(ct_max_pool1d(&y, x, 3, 1, 0, 2, false), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("ct_max_pool1d: kernel[1] = 3 (dilated: 5) is larger than the padded input size 4");
  ck_assert_ct_status(ct_avg_pool1d(&y, x, 2, -1, 0, false, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_avg_pool1d(&y, x, 0, 0, 0, false, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_avg_pool1d(&y, NULL, 2, 0, 0, false, true), CT_ERR_INVALID_ARGUMENT);
  /* ceil_mode lets a window hang past the end: 4 elements, kernel 3, stride 2 give 2 outputs. */
  ck_assert_ct_ok(ct_max_pool1d(&y, x, 3, 2, 0, 1, true));
  ck_assert_int_eq(ct_tensor_shape(y)[2], 2);
  ct_release(y);
  ct_release(x);
  ct_release(x4);
}
END_TEST

int main(void) {
  Suite *s = suite_create("utils");
  TCase *tc = tcase_create("utils");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, item_values);
  tcase_add_test(tc, randperm_is_a_reproducible_permutation);
  tcase_add_test(tc, flatten_unflatten);
  tcase_add_test(tc, print_shows_autograd);
  tcase_add_test(tc, pool1d_matches_pytorch);
  tcase_add_test(tc, pool1d_errors);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
