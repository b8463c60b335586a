/* Scans and ordering against host loops: cumsum / cumprod (result dtypes, strided inputs, every
 * dim, size-0 and 0-dim), sort / argsort / topk (stability, NaN order, signed zeros, ascending
 * and descending, slices along inner and outer dims, runs longer than the merge tiles), errors,
 * and PyTorch's own results on a small vector (order_fixtures.h, made by gen_fixtures.py).
 *
 * Programs built (cold cache cost): kernels/order.cl for f32, i32 and f16.
 *
 * Exactness: cumsum / cumprod add or multiply in the order of the dim, each operation rounded
 * once in the accumulator dtype (f32 here, and for f16), as the host loops do, so the results
 * are compared bit for bit; integer scans are exact (wrapping). Sorts move elements, so values
 * and indices are compared exactly with a stable host sort. */
#include <math.h>

#include "index_util.h"
#include "order_fixtures.h"

/* ---- cumsum / cumprod ---- */

START_TEST(test_cum_f32) {
  ct_device *d = ct_test_device();
  ix_seed(1000 + (uint64_t)_i);
  int dim = (int[]){0, 1, -1, 2}[_i % 4];
  int prod = _i >= 4;
  int64_t shape[3] = {6, 3, 50};
  int64_t n = ix_numel(3, shape);
  float *xv = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) xv[i] = prod ? 1.0f + ix_float() / 8.0f : ix_float();
  ct_tensor *x = ix_tensor(d, CT_F32, 3, shape, xv, _i % 2), *out = NULL;
  ck_assert_ct_ok(prod ? ct_cumprod(&out, x, dim) : ct_cumsum(&out, x, dim));
  ck_assert_int_eq(ct_tensor_dtype(out), CT_F32);
  ix_check_shape(out, 3, shape);
  int dd = dim < 0 ? dim + 3 : dim;
  float *ov = ix_read(out);
  for (int64_t i = 0; i < n; i++) {
    int64_t c[3];
    ix_coords(c, i, 3, shape);
    int64_t upto = c[dd];
    float acc = prod ? 1.0f : 0.0f;
    for (int64_t k = 0; k <= upto; k++) {
      c[dd] = k;
      float v = xv[ix_linear(c, 3, shape)];
      acc = prod ? acc * v : acc + v;
    }
    ck_assert_msg(ov[i] == acc, "element %lld: %.9g vs %.9g", (long long)i, ov[i], acc);
  }
  free(ov);
  free(xv);
  ct_release(out);
  ct_release(x);
}
END_TEST

/* i32 gives i64 (wrapping products); f16 keeps f16, accumulating in f32; size 0; 0-dim. */
START_TEST(test_cum_dtypes) {
  ct_device *d = ct_test_device();
  ix_seed(1100);
  int64_t n = 40;
  int32_t iv[40];
  for (int i = 0; i < 40; i++) iv[i] = i % 7 == 0 ? INT32_MAX - i : (int32_t)ix_below(2000) - 1000;
  ct_tensor *xi = ix_tensor(d, CT_I32, 1, &n, iv, 0), *o = NULL;
  ck_assert_ct_ok(ct_cumsum(&o, xi, 0));
  ck_assert_int_eq(ct_tensor_dtype(o), CT_I64);
  int64_t *ov = ix_read(o);
  int64_t s = 0;
  for (int i = 0; i < 40; i++) {
    s += iv[i];
    ck_assert_int_eq(ov[i], s);
  }
  free(ov);
  ct_release(o);
  ck_assert_ct_ok(ct_cumprod(&o, xi, -1));
  ck_assert_int_eq(ct_tensor_dtype(o), CT_I64);
  ov = ix_read(o);
  uint64_t p = 1;
  for (int i = 0; i < 40; i++) {
    p *= (uint64_t)(int64_t)iv[i];
    ck_assert_int_eq(ov[i], (int64_t)p);
  }
  free(ov);
  ct_release(o);
  /* along the outer dim of an [8, 5] view (neighbouring lines walked together) */
  int64_t s85[2] = {8, 5};
  ct_tensor *x85 = NULL;
  ck_assert_ct_ok(ct_view(&x85, xi, 2, s85));
  ck_assert_ct_ok(ct_cumsum(&o, x85, 0));
  ck_assert_int_eq(ct_tensor_dtype(o), CT_I64);
  ov = ix_read(o);
  for (int j = 0; j < 5; j++) {
    int64_t cs = 0;
    for (int i = 0; i < 8; i++) {
      cs += iv[i * 5 + j];
      ck_assert_int_eq(ov[i * 5 + j], cs);
    }
  }
  free(ov);
  ct_release(o);
  ct_release(x85);
  ct_release(xi);

  uint16_t hv[40];
  for (int i = 0; i < 40; i++) hv[i] = ct_f32_to_f16(ix_float() * 10.0f);
  ct_tensor *xh = ix_tensor(d, CT_F16, 1, &n, hv, 0);
  ck_assert_ct_ok(ct_cumsum(&o, xh, 0));
  ck_assert_int_eq(ct_tensor_dtype(o), CT_F16);
  uint16_t *oh = ix_read(o);
  float acc = 0.0f;
  for (int i = 0; i < 40; i++) {
    acc += ct_f16_to_f32(hv[i]);
    ck_assert_uint_eq(oh[i], ct_f32_to_f16(acc));
  }
  free(oh);
  ct_release(o);
  ct_release(xh);

  int64_t zs[2] = {0, 3};
  ct_tensor *xe = NULL;
  ck_assert_ct_ok(ct_empty(&xe, d, CT_I32, 2, zs));
  ck_assert_ct_ok(ct_cumsum(&o, xe, 1));
  ix_check_shape(o, 2, zs);
  ck_assert_int_eq(ct_tensor_dtype(o), CT_I64);
  ct_release(o);
  ct_release(xe);
  float f = 2.5f;
  ct_tensor *x0 = NULL;
  ck_assert_ct_ok(ct_from_host(&x0, d, CT_F32, 0, NULL, &f));
  ck_assert_ct_ok(ct_cumprod(&o, x0, -1));
  ck_assert_int_eq(ct_tensor_ndim(o), 0);
  float *fv = ix_read(o);
  ck_assert(*fv == 2.5f);
  free(fv);
  ct_release(o);
  ck_assert_ct_status(ct_cumsum(&o, x0, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_cumsum: dim 1 is out of range");
  ck_assert_ptr_null(o);
  ct_release(x0);
}
END_TEST

/* ---- sort ---- */

/* a strictly before b in the sort order (NaN greatest). */
static int before(double a, double b, int desc) {
  if (desc) return a > b || (isnan(a) && !isnan(b));
  return a < b || (isnan(b) && !isnan(a));
}

/* Stable insertion sort of the n keys (stride ks) into pos. */
static void host_sort(int64_t *pos, const double *keys, int64_t n, int desc) {
  for (int64_t i = 0; i < n; i++) {
    int64_t j = i;
    while (j > 0 && before(keys[i], keys[pos[j - 1]], desc)) {
      pos[j] = pos[j - 1];
      j--;
    }
    pos[j] = i;
  }
}

/* Key of element i of host data of dtype t. */
static double key_of(ct_dtype t, const void *v, int64_t i) {
  switch (t) {
    case CT_F32: return ((const float *)v)[i];
    case CT_F16: return ct_f16_to_f32(((const uint16_t *)v)[i]);
    default: return ((const int32_t *)v)[i];
  }
}

/* Checks sort (and argsort, topk with k) of x (logical host values xv, dtype t, shape 2-D)
 * along dim against the host's stable sort. kk < 0: a full sort. */
static void check_sort(const ct_tensor *x, ct_dtype t, const void *xv, const int64_t *shape, int dim, int desc,
                       int64_t kk) {
  int dd = dim < 0 ? dim + 2 : dim;
  int64_t n = shape[dd], other = shape[1 - dd], kout = kk < 0 ? n : kk;
  ct_tensor *vals = NULL, *idx = NULL, *arg = NULL;
  if (kk < 0) {
    ck_assert_ct_ok(ct_sort(&vals, &idx, x, dim, desc));
    ck_assert_ct_ok(ct_argsort(&arg, x, dim, desc));
  } else {
    ck_assert_ct_ok(ct_topk(&vals, &idx, x, kk, dim, desc));
  }
  int64_t oshape[2] = {shape[0], shape[1]};
  oshape[dd] = kout;
  ix_check_shape(vals, 2, oshape);
  ix_check_shape(idx, 2, oshape);
  ck_assert_int_eq(ct_tensor_dtype(vals), t);
  ck_assert_int_eq(ct_tensor_dtype(idx), CT_I64);
  size_t es = ct_dtype_size(t);
  unsigned char *vv = ix_read(vals);
  int64_t *iv = ix_read(idx), *av = arg ? ix_read(arg) : NULL;
  double *keys = malloc((size_t)n * sizeof *keys);
  int64_t *pos = malloc((size_t)n * sizeof *pos);
  for (int64_t s = 0; s < other; s++) {
    for (int64_t k = 0; k < n; k++) keys[k] = key_of(t, xv, dd == 1 ? s * n + k : k * other + s);
    host_sort(pos, keys, n, desc);
    for (int64_t k = 0; k < kout; k++) {
      int64_t o = dd == 1 ? s * kout + k : k * other + s;
      int64_t src = dd == 1 ? s * n + pos[k] : pos[k] * other + s;
      ck_assert_msg(iv[o] == pos[k], "slice %lld position %lld: index %lld, expected %lld", (long long)s,
                    (long long)k, (long long)iv[o], (long long)pos[k]);
      ck_assert_int_eq(memcmp(vv + (size_t)o * es, (const unsigned char *)xv + (size_t)src * es, es), 0);
      if (av) ck_assert_int_eq(av[o], pos[k]);
    }
  }
  free(keys);
  free(pos);
  free(vv);
  free(iv);
  free(av);
  ct_release(vals);
  ct_release(idx);
  ct_release(arg);
}

/* Values drawn from a small set with NaNs, infinities and signed zeros (many ties), or random. */
static float sort_value(void) {
  static const float special[] = {-2.0f, -1.0f, -0.0f, 0.0f, 1.0f, 2.0f, NAN, INFINITY, -INFINITY};
  if (ix_below(2)) return special[ix_below(9)];
  return ix_float();
}

struct sort_case {
  int64_t shape[2];
  int dim, transposed;
};
static const struct sort_case SORT_CASES[] = {
    {{3, 1000}, 1, 0},  /* merge passes up to width 512: several tiles per run */
    {{3, 1000}, -1, 1}, /* strided slices */
    {{700, 2}, 0, 0},   /* the outer dim */
    {{5, 37}, 1, 1},    /* one partial block */
    {{4, 32}, 1, 0},    /* exactly one block: no merge */
    {{2, 1}, 1, 0},
    {{300, 100}, 1, 1}, /* many slices: a whole sort per work-item (sort_slices) */
    {{150, 2}, 0, 0},   /* few slices */
};

START_TEST(test_sort_f32) {
  ct_device *d = ct_test_device();
  const struct sort_case *c = &SORT_CASES[_i / 2];
  int desc = _i % 2;
  ix_seed(1200 + (uint64_t)_i);
  int64_t n = ix_numel(2, c->shape);
  float *xv = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) xv[i] = sort_value();
  ct_tensor *x = ix_tensor(d, CT_F32, 2, c->shape, xv, c->transposed);
  check_sort(x, CT_F32, xv, c->shape, c->dim, desc, -1);
  int dd = c->dim < 0 ? c->dim + 2 : c->dim;
  int64_t len = c->shape[dd];
  check_sort(x, CT_F32, xv, c->shape, c->dim, desc, len < 5 ? len : 5);
  free(xv);
  ct_release(x);
}
END_TEST

/* i32 and f16 (many ties), topk of every size on one case. */
START_TEST(test_sort_dtypes) {
  ct_device *d = ct_test_device();
  ix_seed(1300);
  int64_t shape[2] = {3, 300};
  int32_t iv[900];
  uint16_t hv[900];
  for (int i = 0; i < 900; i++) {
    int32_t r = (int32_t)ix_below(50) - 25;
    iv[i] = i % 97 == 0 ? INT32_MIN + 25 + r : r; /* the extreme end, without overflow */
    hv[i] = ct_f32_to_f16(sort_value());
  }
  ct_tensor *xi = ix_tensor(d, CT_I32, 2, shape, iv, 1), *xh = ix_tensor(d, CT_F16, 2, shape, hv, 0);
  for (int desc = 0; desc < 2; desc++) {
    check_sort(xi, CT_I32, iv, shape, 1, desc, -1);
    check_sort(xh, CT_F16, hv, shape, -1, desc, -1);
    check_sort(xh, CT_F16, hv, shape, 0, desc, -1);
  }
  for (int64_t k = 0; k <= 3; k++) check_sort(xh, CT_F16, hv, shape, 0, 1, k);
  check_sort(xi, CT_I32, iv, shape, 1, 0, 300);
  ct_release(xi);
  ct_release(xh);
}
END_TEST

/* PyTorch's results on a vector with ties, signed zeros and NaNs. sort is stable in both, so it
 * must match exactly; PyTorch's topk returns ties in an unspecified order, so topk is checked by
 * value (-0.0 == 0.0) and by each index pointing at its value. */
START_TEST(test_pytorch_fixture) {
  ct_device *d = ct_test_device();
  int64_t n = 12;
  ct_tensor *x = ix_tensor(d, CT_F32, 1, &n, FX_X, 0);
  for (int desc = 0; desc < 2; desc++) {
    ct_tensor *v = NULL, *i = NULL;
    ck_assert_ct_ok(ct_sort(&v, &i, x, 0, desc));
    float *vv = ix_read(v);
    int64_t *iv = ix_read(i);
    ck_assert_int_eq(memcmp(iv, desc ? FX_SORT_DESC_I : FX_SORT_ASC_I, sizeof FX_SORT_ASC_I), 0);
    const float *want = desc ? FX_SORT_DESC_V : FX_SORT_ASC_V;
    for (int k = 0; k < 12; k++) ck_assert(memcmp(&vv[k], &want[k], 4) == 0 || (isnan(vv[k]) && isnan(want[k])));
    free(vv);
    free(iv);
    ct_release(v);
    ct_release(i);
    ck_assert_ct_ok(ct_topk(&v, &i, x, 5, -1, !desc));
    vv = ix_read(v);
    iv = ix_read(i);
    want = desc ? FX_TOPK_SMALLEST_V : FX_TOPK_LARGEST_V;
    for (int k = 0; k < 5; k++) {
      ck_assert(vv[k] == want[k] || (isnan(vv[k]) && isnan(want[k])));
      ck_assert(memcmp(&FX_X[iv[k]], &vv[k], 4) == 0);
      if (k) ck_assert_int_ne(iv[k], iv[k - 1]);
    }
    free(vv);
    free(iv);
    ct_release(v);
    ct_release(i);
  }
  ct_release(x);
}
END_TEST

START_TEST(test_sort_edges) {
  ct_device *d = ct_test_device();
  int64_t zs[2] = {0, 4}, ks[2] = {0, 2};
  ct_tensor *xe = NULL, *v = NULL, *i = NULL;
  ck_assert_ct_ok(ct_empty(&xe, d, CT_F32, 2, zs));
  ck_assert_ct_ok(ct_sort(&v, &i, xe, 1, false));
  ix_check_shape(v, 2, zs);
  ix_check_shape(i, 2, zs);
  ct_release(v);
  ct_release(i);
  ck_assert_ct_ok(ct_topk(&v, &i, xe, 2, -1, true));
  ix_check_shape(v, 2, ks);
  ct_release(v);
  ct_release(i);
  ck_assert_ct_status(ct_topk(&v, &i, xe, 5, 1, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_topk: k 5 is out of range for dim 1 of size 4");
  ck_assert_ptr_null(v);
  ck_assert_ptr_null(i);
  ck_assert_ct_status(ct_topk(&v, &i, xe, -1, 0, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("k -1 is out of range for dim 0 of size 0");
  ck_assert_ct_status(ct_sort(NULL, NULL, xe, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sort(&v, &i, xe, 2, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_sort: dim 2 is out of range for a tensor with 2 dims (expected -2..1)");
  ck_assert_ct_status(ct_argsort(NULL, xe, 0, false), CT_ERR_INVALID_ARGUMENT);
  /* 0-dim: one element, index 0; values only */
  float f = -3.0f;
  ct_tensor *x0 = NULL;
  ck_assert_ct_ok(ct_from_host(&x0, d, CT_F32, 0, NULL, &f));
  ck_assert_ct_ok(ct_sort(&v, NULL, x0, -1, true));
  ck_assert_int_eq(ct_tensor_ndim(v), 0);
  float *fv = ix_read(v);
  ck_assert(*fv == -3.0f);
  free(fv);
  ct_release(v);
  ck_assert_ct_ok(ct_argsort(&i, x0, 0, false));
  int64_t *iv = ix_read(i);
  ck_assert_int_eq(*iv, 0);
  free(iv);
  ct_release(i);
  ct_release(x0);
  ct_release(xe);
}
END_TEST

int main(void) {
  Suite *s = suite_create("order");
  TCase *tc = tcase_create("order");
  tcase_add_loop_test(tc, test_cum_f32, 0, 8);
  tcase_add_test(tc, test_cum_dtypes);
  tcase_add_loop_test(tc, test_sort_f32, 0, (int)(2 * sizeof SORT_CASES / sizeof SORT_CASES[0]));
  tcase_add_test(tc, test_sort_dtypes);
  tcase_add_test(tc, test_pytorch_fixture);
  tcase_add_test(tc, test_sort_edges);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
