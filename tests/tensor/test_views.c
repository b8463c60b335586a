/* Views (view/reshape, permute/transpose, slice, squeeze/unsqueeze, expand), contiguous copies
 * and non-contiguous transfers, each against a host reference on every dtype. */
#include "ct_test.h"
#include "tensor/tensor.h"
#include "tensor_util.h"

/* A contiguous base of shape [4, 5, 6] holding random bytes; returns the host copy. */
static ct_tensor *make_base(ct_device *d, ct_dtype t, void **host) {
  int64_t shape[3] = {4, 5, 6};
  size_t n = 120 * ct_dtype_size(t);
  *host = malloc(n);
  fill_bytes(*host, n, t, (uint64_t)t + 7);
  ct_tensor *x;
  ck_assert_ct_ok(ct_from_host(&x, d, t, 3, shape, *host));
  return x;
}

static void expect_view(const ct_tensor *v, const void *base, size_t es, const int64_t *coef, int64_t offset,
                        const char *what, ct_dtype t) {
  void *want = malloc(ct_tensor_nbytes(v) + 1);
  ref_gather(want, base, es, ct_tensor_ndim(v), ct_tensor_shape(v), coef, offset);
  void *got = read_all(v);
  ck_assert_msg(got != NULL, "%s: ct_to_host failed: %s", what, ct_last_error());
  ck_assert_msg(memcmp(want, got, ct_tensor_nbytes(v)) == 0, "%s on %s differs from the reference", what,
                ct_dtype_name(t));
  free(want);
  free(got);
}

START_TEST(test_views_every_dtype) {
  ct_device *d = ct_test_device();
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    size_t es = ct_dtype_size(t);
    void *host;
    ct_tensor *x = make_base(d, t, &host), *v, *w;
    /* transpose(0, 2): shape [6, 5, 4], element (i,j,k) = base(k,j,i) */
    ck_assert_ct_ok(ct_transpose(&v, x, 0, -1));
    ck_assert(!ct_tensor_is_contiguous(v));
    expect_view(v, host, es, (int64_t[]){1, 6, 30}, 0, "transpose", t);
    /* slice on the transposed view: dim 1 [1:5:2] */
    ck_assert_ct_ok(ct_slice(&w, v, 1, 1, 5, 2));
    ck_assert_int_eq(ct_tensor_shape(w)[1], 2);
    expect_view(w, host, es, (int64_t[]){1, 12, 30}, 6, "slice of transpose", t);
    ct_release(w);
    /* contiguous copy of the transpose */
    ck_assert_ct_ok(ct_contiguous(&w, v));
    ck_assert(ct_tensor_is_contiguous(w));
    expect_view(w, host, es, (int64_t[]){1, 6, 30}, 0, "contiguous(transpose)", t);
    ct_release(w);
    ct_release(v);
    /* permute [1, 2, 0]: shape [5, 6, 4] */
    ck_assert_ct_ok(ct_permute(&v, x, (int[]){1, 2, 0}));
    expect_view(v, host, es, (int64_t[]){6, 1, 30}, 0, "permute", t);
    /* reshape of a non-viewable permutation copies */
    ck_assert_ct_status(ct_view(&w, v, 1, (int64_t[]){-1}), CT_ERR_SHAPE_MISMATCH);
    ck_assert_error_contains("ct_reshape");
    ck_assert_ct_ok(ct_reshape(&w, v, 2, (int64_t[]){30, -1}));
    ck_assert_int_eq(ct_tensor_shape(w)[1], 4);
    expect_view(w, host, es, (int64_t[]){1, 30}, 0, "reshape(permute)", t);
    ct_release(w);
    ct_release(v);
    /* expand a [1, 5, 1] slice to [3, 4, 5, 6] */
    ck_assert_ct_ok(ct_slice(&v, x, 0, 2, 3, 1));
    ck_assert_ct_ok(ct_slice(&w, v, 2, -1, 100, 1));
    ct_release(v);
    ck_assert_int_eq(ct_tensor_shape(w)[2], 1);
    ck_assert_ct_ok(ct_expand(&v, w, 4, (int64_t[]){3, 4, -1, 6}));
    ct_release(w);
    ck_assert_int_eq(ct_tensor_strides(v)[0], 0);
    ck_assert_int_eq(ct_tensor_strides(v)[3], 0);
    expect_view(v, host, es, (int64_t[]){0, 0, 6, 0}, 2 * 30 + 5, "expand", t);
    ct_release(v);
    ct_release(x);
    free(host);
  }
}
END_TEST

START_TEST(test_view_reshape_rules) {
  ct_device *d = ct_test_device();
  int32_t host[24];
  for (int i = 0; i < 24; i++) host[i] = i;
  ct_tensor *x, *v, *w;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 2, (int64_t[]){4, 6}, host));
  ck_assert_ct_ok(ct_view(&v, x, 3, (int64_t[]){2, -1, 3}));
  ck_assert_int_eq(ct_tensor_shape(v)[1], 4);
  ck_assert(ct_tensor_is_contiguous(v));
  expect_view(v, host, 4, (int64_t[]){12, 3, 1}, 0, "view", CT_I32);
  ct_release(v);
  /* A column slice [:, 2:4] can be viewed as [4, 2, 1] and [2, 2, 2] splits only the leading dim. */
  ck_assert_ct_ok(ct_slice(&v, x, 1, 2, 4, 1));
  ck_assert_ct_ok(ct_view(&w, v, 3, (int64_t[]){2, 2, 2}));
  expect_view(w, host, 4, (int64_t[]){12, 6, 1}, 2, "view of a slice", CT_I32);
  ct_release(w);
  ck_assert_ct_status(ct_view(&w, v, 1, (int64_t[]){8}), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(w);
  ck_assert_ct_ok(ct_reshape(&w, v, 1, (int64_t[]){8}));
  ck_assert(ct_tensor_is_contiguous(w));
  ct_tensor *w2;
  ck_assert_ct_ok(ct_view(&w2, w, 2, (int64_t[]){4, 2}));
  expect_view(w2, host, 4, (int64_t[]){6, 1}, 2, "reshape of a slice", CT_I32);
  ct_release(w2);
  ct_release(w);
  ct_release(v);
  /* Errors */
  ck_assert_ct_status(ct_view(&v, x, 2, (int64_t[]){5, 5}), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("[5, 5]");
  ck_assert_error_contains("[4, 6]");
  ck_assert_ct_status(ct_view(&v, x, 2, (int64_t[]){-1, -1}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_view(&v, x, 2, (int64_t[]){-1, 7}), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_view(&v, x, 2, (int64_t[]){-2, -12}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_view(&v, x, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 24}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_view(NULL, x, 1, (int64_t[]){24}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_view(&v, NULL, 1, (int64_t[]){24}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_reshape(&v, x, 1, NULL), CT_ERR_INVALID_ARGUMENT);
  /* Scalars and empty tensors */
  ck_assert_ct_ok(ct_view(&v, x, 1, (int64_t[]){24}));
  ck_assert_ct_ok(ct_slice(&w, v, 0, 5, 6, 1));
  ct_release(v);
  ck_assert_ct_ok(ct_view(&v, w, 0, NULL));
  ck_assert_int_eq(ct_tensor_ndim(v), 0);
  int32_t s = -1;
  ck_assert_ct_ok(ct_to_host(v, &s, 4));
  ck_assert_int_eq(s, 5);
  ct_release(w);
  ck_assert_ct_ok(ct_view(&w, v, 3, (int64_t[]){1, 1, -1}));
  ck_assert_ct_ok(ct_to_host(w, &s, 4));
  ck_assert_int_eq(s, 5);
  ct_release(w);
  ct_release(v);
  ck_assert_ct_ok(ct_slice(&v, x, 0, 3, 1, 1));
  ck_assert_int_eq(ct_numel(v), 0);
  ck_assert_ct_ok(ct_reshape(&w, v, 3, (int64_t[]){0, 3, 2}));
  ck_assert_int_eq(ct_numel(w), 0);
  ct_release(w);
  /* -1 next to a 0 dim is ambiguous, as in PyTorch */
  ck_assert_ct_status(ct_reshape(&w, v, 2, (int64_t[]){0, -1}), CT_ERR_SHAPE_MISMATCH);
  ct_release(v);
  ct_release(x);
}
END_TEST

START_TEST(test_slice_semantics) {
  ct_device *d = ct_test_device();
  int32_t host[10];
  for (int i = 0; i < 10; i++) host[i] = i * 10;
  ct_tensor *x, *v;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 1, (int64_t[]){10}, host));
  /* Python semantics: {start, stop, step} -> expected elements */
  struct { int64_t a, b, s; int n; int first; } cases[] = {
      {0, 10, 1, 10, 0}, {2, 8, 3, 2, 2},   {-3, 10, 1, 3, 7},  {-100, 3, 1, 3, 0}, {5, 100, 2, 3, 5},
      {8, 2, 1, 0, 0},   {-1, -100, 1, 0, 0}, {9, 10, 5, 1, 9}, {10, 20, 1, 0, 0},  {0, -1, 4, 3, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ck_assert_ct_ok(ct_slice(&v, x, 0, cases[c].a, cases[c].b, cases[c].s));
    ck_assert_msg(ct_numel(v) == cases[c].n, "slice %zu: %lld elements", c, (long long)ct_numel(v));
    int32_t got[10];
    ck_assert_ct_ok(ct_to_host(v, got, sizeof got));
    for (int i = 0; i < cases[c].n; i++) ck_assert_int_eq(got[i], (cases[c].first + i * (int)cases[c].s) * 10);
    ct_release(v);
  }
  ck_assert_ct_status(ct_slice(&v, x, 0, 0, 5, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("step must be positive, got 0");
  ck_assert_ct_status(ct_slice(&v, x, 0, 0, 5, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_slice(&v, x, 1, 0, 5, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_slice: dim 1 is out of range for a tensor with 1 dims (expected -1..0)");
  ck_assert_ct_status(ct_slice(&v, x, -2, 0, 5, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_slice(NULL, x, 0, 0, 5, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_slice(&v, NULL, 0, 0, 5, 1), CT_ERR_INVALID_ARGUMENT);
  ct_release(x);
}
END_TEST

/* Steps near INT64_MAX (issue #28): the length computed stop - start + step - 1 and the stride
 * stride * step, both overflowing ("negative dim" for INT64_MAX - 2). As Python,
 * range(10)[0:10:2**63-1] == [0]; a view with one element along the dim keeps its stride. */
START_TEST(test_slice_huge_step) {
  ct_device *d = ct_test_device();
  int32_t host[20];
  for (int i = 0; i < 20; i++) host[i] = i;
  ct_tensor *x = NULL, *t = NULL, *v = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 2, (int64_t[]){2, 10}, host));
  ck_assert_ct_ok(ct_transpose(&t, x, 0, 1)); /* [10, 2], strides {1, 10} */
  int64_t steps[4] = {INT64_MAX, INT64_MAX - 1, INT64_MAX - 2, INT64_MAX / 10 + 1};
  for (int k = 0; k < 4; k++) {
    ck_assert_ct_ok(ct_slice(&v, x, 1, 3, 10, steps[k]));
    ck_assert_int_eq(ct_tensor_shape(v)[1], 1);
    int32_t got[2];
    ck_assert_ct_ok(ct_to_host(v, got, sizeof got));
    ck_assert_int_eq(got[0], 3);
    ck_assert_int_eq(got[1], 13);
    ct_release(v);
    /* Along the transposed view's dim of stride 10, whose product with the step overflows. */
    ck_assert_ct_ok(ct_slice(&v, t, 1, -INT64_MAX, INT64_MAX, steps[k]));
    ck_assert_int_eq(ct_tensor_shape(v)[1], 1);
    ck_assert_int_eq(ct_tensor_strides(v)[1], 10);
    int32_t col[10];
    ck_assert_ct_ok(ct_to_host(v, col, sizeof col));
    for (int i = 0; i < 10; i++) ck_assert_int_eq(col[i], i);
    ct_release(v);
  }
  ct_release(t);
  ct_release(x);
}
END_TEST

START_TEST(test_squeeze_unsqueeze_permute_expand) {
  ct_device *d = ct_test_device();
  float host[6] = {1, 2, 3, 4, 5, 6};
  ct_tensor *x, *v, *w;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 3, (int64_t[]){2, 1, 3}, host));
  ck_assert_ct_ok(ct_squeeze(&v, x, 1));
  ck_assert_int_eq(ct_tensor_ndim(v), 2);
  ck_assert_int_eq(ct_tensor_shape(v)[1], 3);
  ck_assert_ct_ok(ct_squeeze(&w, v, 0));  /* size 2: unchanged */
  ck_assert_int_eq(ct_tensor_ndim(w), 2);
  ct_release(w);
  ck_assert_ct_ok(ct_unsqueeze(&w, v, -1));
  ck_assert_int_eq(ct_tensor_ndim(w), 3);
  ck_assert_int_eq(ct_tensor_shape(w)[2], 1);
  ck_assert_int_eq(ct_tensor_strides(w)[2], 1);
  ck_assert(ct_tensor_is_contiguous(w));
  ct_release(w);
  ck_assert_ct_ok(ct_unsqueeze(&w, v, 0));
  ck_assert_int_eq(ct_tensor_shape(w)[0], 1);
  ct_release(w);
  ck_assert_ct_status(ct_unsqueeze(&w, v, 3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_unsqueeze(&w, v, -4), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_squeeze(&w, v, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_squeeze(NULL, v, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_unsqueeze(&w, NULL, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_permute(&w, v, (int[]){0, 0}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("twice");
  ck_assert_ct_status(ct_permute(&w, v, (int[]){0, 2}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_permute(&w, v, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_transpose(&w, v, 0, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_transpose(&w, NULL, 0, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_transpose(&w, v, 0, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_transpose: dim 2 is out of range for a tensor with 2 dims (expected -2..1)");
  /* The one dim rule (PyTorch's): a 0-d tensor takes dim 0 and -1 (transpose, squeeze), but has
   * no dim to slice. */
  ct_tensor *s0 = NULL;
  ck_assert_ct_ok(ct_from_host(&s0, d, CT_F32, 0, NULL, host));
  ck_assert_ct_ok(ct_transpose(&w, s0, 0, -1));
  ck_assert_int_eq(ct_tensor_ndim(w), 0);
  ct_release(w);
  ck_assert_ct_ok(ct_squeeze(&w, s0, -1));
  ck_assert_int_eq(ct_tensor_ndim(w), 0);
  ct_release(w);
  ck_assert_ct_status(ct_transpose(&w, s0, 0, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_transpose: dim 1 is out of range for a tensor with 0 dims (expected -1..0)");
  ck_assert_ct_status(ct_slice(&w, s0, 0, 0, 1, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_slice: t is zero-dimensional");
  ck_assert_ptr_null(w);
  ct_release(s0);
  ck_assert_ct_status(ct_expand(&w, v, 2, (int64_t[]){3, 3}), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("[2, 3]");
  ck_assert_error_contains("[3, 3]");
  ck_assert_ct_status(ct_expand(&w, v, 1, (int64_t[]){3}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_expand(&w, v, 3, (int64_t[]){-1, 2, 3}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_expand(&w, v, 2, NULL), CT_ERR_INVALID_ARGUMENT);
  ct_release(v);
  /* Unsqueeze to the limit of 8 dims, then one more is an error. */
  ck_assert_ct_ok(ct_view(&v, x, 8, (int64_t[]){1, 1, 1, 2, 1, 1, 3, 1}));
  ck_assert_ct_status(ct_unsqueeze(&w, v, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("8");
  ct_release(v);
  /* 0-d: squeeze accepts 0 / -1, unsqueeze makes [1], permute takes no dims */
  ct_tensor *s;
  ck_assert_ct_ok(ct_full(&s, d, CT_F32, 0, NULL, 2.5));
  ck_assert_ct_ok(ct_squeeze(&v, s, -1));
  ck_assert_int_eq(ct_tensor_ndim(v), 0);
  ct_release(v);
  ck_assert_ct_status(ct_squeeze(&v, s, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_unsqueeze(&v, s, 0));
  ck_assert_int_eq(ct_tensor_ndim(v), 1);
  ct_release(v);
  ck_assert_ct_ok(ct_permute(&v, s, NULL));
  ct_release(v);
  ck_assert_ct_ok(ct_expand(&v, s, 2, (int64_t[]){2, 2}));
  float got[4];
  ck_assert_ct_ok(ct_to_host(v, got, sizeof got));
  for (int i = 0; i < 4; i++) ck_assert_float_eq(got[i], 2.5f);
  ct_release(v);
  ct_release(s);
  ct_release(x);
}
END_TEST

START_TEST(test_views_keep_storage_alive) {
  ct_device *d = ct_test_device();
  int32_t host[12];
  for (int i = 0; i < 12; i++) host[i] = i + 100;
  ct_tensor *x, *v;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 2, (int64_t[]){3, 4}, host));
  ck_assert_ct_ok(ct_transpose(&v, x, 0, 1));
  ct_release(x);
  /* Allocate and fill other tensors: if the storage had been freed, they would reuse it. */
  ct_tensor *junk[4];
  for (int i = 0; i < 4; i++) ck_assert_ct_ok(ct_full(&junk[i], d, CT_I32, 2, (int64_t[]){3, 4}, -7));
  int32_t got[12];
  ck_assert_ct_ok(ct_to_host(v, got, sizeof got));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) ck_assert_int_eq(got[i * 3 + j], host[j * 4 + i]);
  for (int i = 0; i < 4; i++) ct_release(junk[i]);
  ct_release(v);
}
END_TEST

START_TEST(test_copy_from_host_strided) {
  ct_device *d = ct_test_device();
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    size_t es = ct_dtype_size(t);
    void *host;
    ct_tensor *x = make_base(d, t, &host), *v;
    /* Write into the [4, 6] column-major-like view x[:, 1:5:2, :].T(0, 2) */
    ck_assert_ct_ok(ct_slice(&v, x, 1, 1, 5, 2));
    ct_tensor *w;
    ck_assert_ct_ok(ct_transpose(&w, v, 0, 2));
    ct_release(v);
    size_t nb = ct_tensor_nbytes(w);
    unsigned char *src = malloc(nb);
    fill_bytes(src, nb, t, 99 + (uint64_t)k);
    ck_assert_ct_status(ct_copy_from_host(w, src, nb - 1), CT_ERR_INVALID_ARGUMENT);
    ck_assert_ct_status(ct_copy_from_host(w, NULL, nb), CT_ERR_INVALID_ARGUMENT);
    ck_assert_ct_ok(ct_copy_from_host(w, src, nb));
    /* Reference: scatter src into host through the same geometry. w shape [6, 2, 4], element
     * (i, j, l) lives at base (l, 1 + 2j, i). */
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 2; j++)
        for (int l = 0; l < 4; l++)
          memcpy((char *)host + ((size_t)l * 30 + (size_t)(1 + 2 * j) * 6 + (size_t)i) * es,
                 src + ((size_t)i * 8 + (size_t)j * 4 + (size_t)l) * es, es);
    void *got = read_all(x);
    ck_assert_msg(memcmp(got, host, 120 * es) == 0, "strided copy_from_host on %s", ct_dtype_name(t));
    free(got);
    free(src);
    ct_release(w);
    ct_release(x);
    free(host);
  }
}
END_TEST

/* Copy launches round their NDRange up to whole work-groups of a fixed size (so PoCL does not
 * compile per tensor size) and skip the excess: sizes that are not multiples of any group,
 * a single element, empty tensors, and 1-D casts whose remainder is launched separately. */
START_TEST(test_copy_odd_sizes) {
  ct_device *d = ct_test_device();
  const int64_t mats[][2] = {{127, 131}, {1, 1}, {3, 1000}, {1000, 3}, {0, 5}, {1, 257}, {1025, 2}};
  const ct_dtype dts[] = {CT_U8, CT_F16, CT_F32, CT_I64};
  for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
    ct_dtype t = dts[di];
    size_t es = ct_dtype_size(t);
    for (size_t m = 0; m < sizeof mats / sizeof mats[0]; m++) {
      int64_t r = mats[m][0], c = mats[m][1];
      size_t n = (size_t)(r * c);
      void *host = malloc(n * es + 1);
      fill_bytes(host, n * es, t, (uint64_t)(r * 7 + c));
      ct_tensor *x, *v, *w;
      ck_assert_ct_ok(ct_from_host(&x, d, t, 2, (int64_t[]){r, c}, host));
      ck_assert_ct_ok(ct_transpose(&v, x, 0, 1));
      ck_assert_ct_ok(ct_contiguous(&w, v));
      expect_view(w, host, es, (int64_t[]){1, c}, 0, "contiguous(transpose) of an odd size", t);
      /* a strided fill over the transposed view, then the whole base read back */
      ck_assert_ct_ok(ct__fill_value(v, 1.0, "test"));
      void *got = read_all(x), *want = malloc(n * es + 1);
      ck_assert_ptr_nonnull(got);
      uint64_t one = 0;
      ct__host_store_double(t, &one, 1.0);
      for (size_t i = 0; i < n; i++) memcpy((char *)want + i * es, &one, es);
      ck_assert_msg(memcmp(got, want, n * es) == 0, "strided fill of [%lld, %lld] %s", (long long)c, (long long)r,
                    ct_dtype_name(t));
      free(got);
      free(want);
      ct_release(w);
      ct_release(v);
      ct_release(x);
      free(host);
    }
  }
  /* 1-D converting copies: whole groups plus a remainder, and shorter than one group */
  const int64_t lens[] = {1, 5, 1023, 1025, 3001, 70000};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t n = lens[li];
    int32_t *src = malloc((size_t)n * sizeof *src);
    float *got = malloc((size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++) src[i] = (int32_t)(i * 37 - 1000);
    ct_tensor *x, *y;
    ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 1, &n, src));
    ck_assert_ct_ok(ct_cast(&y, x, CT_F32));
    ck_assert_ct_ok(ct_to_host(y, got, (size_t)n * sizeof *got));
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(got[i] == (float)src[i], "cast of %lld elements: [%lld] = %g, want %d", (long long)n,
                    (long long)i, (double)got[i], src[i]);
    ct_release(y);
    ct_release(x);
    free(src);
    free(got);
  }
}
END_TEST

/* copy_strided and fill_strided decompose the dims outside the two innermost from one work-item
 * id, over every possible outer dim (a padding dim has extent 1): layouts that collapse to 3 to
 * CT_MAX_DIMS dims (every outer dim count), a slice with an offset, and a cast through the
 * converting kernel. Reversing the dims of a contiguous tensor leaves nothing to merge. */
START_TEST(test_copy_every_outer_dim_count) {
  ct_device *d = ct_test_device();
  for (int nd = 3; nd <= CT_MAX_DIMS; nd++) {
    int64_t shape[CT_MAX_DIMS], n = 1;
    int perm[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
      shape[i] = 2 + (i + nd) % 3; /* 2, 3 or 4: distinct neighbours, so no dims merge */
      perm[i] = nd - 1 - i;
      n *= shape[i];
    }
    float *host = malloc((size_t)n * sizeof *host);
    for (int64_t i = 0; i < n; i++) host[i] = (float)i;
    ct_tensor *x, *v, *s, *w, *c;
    ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, nd, shape, host));
    ck_assert_ct_ok(ct_permute(&v, x, perm));
    ck_assert_ct_ok(ct_contiguous(&w, v));
    expect_view(w, host, sizeof *host, ct_tensor_strides(v), 0, "contiguous(reversed dims)", CT_F32);
    /* a slice starting past element 0 of the outermost (reversed) dim, cast to i32 */
    ck_assert_ct_ok(ct_slice(&s, v, 0, 1, ct_tensor_shape(v)[0], 1));
    ck_assert_ct_ok(ct_cast(&c, s, CT_I32));
    int64_t m = ct_numel(c);
    int32_t *got = malloc((size_t)m * sizeof *got);
    float *want = malloc((size_t)m * sizeof *want);
    ref_gather(want, host, sizeof *host, nd, ct_tensor_shape(s), ct_tensor_strides(s), ct_tensor_strides(v)[0]);
    ck_assert_ct_ok(ct_to_host(c, got, (size_t)m * sizeof *got));
    for (int64_t i = 0; i < m; i++)
      ck_assert_msg(got[i] == (int32_t)want[i], "%d dims: cast of a sliced reversed view: [%lld] = %d, want %g",
                    nd, (long long)i, got[i], (double)want[i]);
    /* a strided fill of the slice: exactly its elements change */
    ck_assert_ct_ok(ct__fill_value(s, -1.0, "test"));
    float *all = read_all(x);
    ck_assert_ptr_nonnull(all);
    int64_t first = ct_tensor_strides(v)[0], filled = 0;
    for (int64_t i = 0; i < n; i++) {
      /* element i of x lies in the slice when its index along x's last dim is at least 1 */
      bool in = (i / first) % shape[nd - 1] >= 1;
      filled += in;
      ck_assert_msg(all[i] == (in ? -1.0f : (float)i), "%d dims: strided fill: x[%lld] = %g", nd, (long long)i,
                    (double)all[i]);
    }
    ck_assert_int_eq(filled, m);
    free(all);
    free(got);
    free(want);
    free(host);
    ct_release(c);
    ct_release(s);
    ct_release(w);
    ct_release(v);
    ct_release(x);
  }
}
END_TEST

/* The layouts of attention's head split and merge ([B, T, H, D] <-> [B, H, T, D] with a short
 * H next to the innermost dim: in copies of CT__COPY_FIT_MIN elements or more, copy_strided
 * moves the longest outer dim there, and a plane smaller than a work-group spreads groups over
 * dim 2, whose extent is then no multiple of the group's), broadcast rows and columns (the
 * kernel's contiguous and broadcast inner paths), a copy into a column slice, a cast through
 * the converting kernel, and contiguous fills (clEnqueueFillBuffer below 16 KB, fill_contig
 * above: whole groups, then the remainder) that must stop at the tensor's ends. */
START_TEST(test_copy_attention_layouts) {
  ct_device *d = ct_test_device();
  for (int split = 0; split < 3; split++) {
    /* split 1: x is [B, H, T, D] = [2, 3, 9, 7] viewed as [B, T, H, D]; 0: the reverse; 2: a
     * [64, 5, 9, 7] split (20160 elements: the fitted launch) */
    int64_t shape[4] = {split == 2 ? 64 : 2, split == 1 ? 3 : split ? 5 : 9, split ? 9 : 3, 7};
    int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    float *host = malloc((size_t)n * sizeof *host);
    for (int64_t i = 0; i < n; i++) host[i] = (float)i;
    ct_tensor *x, *v, *w, *c;
    ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 4, shape, host));
    ck_assert_ct_ok(ct_permute(&v, x, (int[]){0, 2, 1, 3}));
    ck_assert_ct_ok(ct_contiguous(&w, v));
    expect_view(w, host, sizeof *host, ct_tensor_strides(v), 0, split ? "head split" : "head merge", CT_F32);
    ck_assert_ct_ok(ct_cast(&c, v, CT_I32));
    int32_t *got = read_all(c);
    float *want = malloc((size_t)n * sizeof *want);
    ref_gather(want, host, sizeof *host, 4, ct_tensor_shape(v), ct_tensor_strides(v), 0);
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(got[i] == (int32_t)want[i], "cast of the permuted view (split %d): [%lld] = %d, want %g", split,
                    (long long)i, got[i], (double)want[i]);
    free(got);
    free(want);
    free(host);
    ct_release(c);
    ct_release(w);
    ct_release(v);
    ct_release(x);
  }
  /* a row [9] and a column [5, 1] broadcast to [5, 9], then the row into a column slice */
  float row[9], col[5], got[45];
  for (int i = 0; i < 9; i++) row[i] = (float)(i + 1);
  for (int i = 0; i < 5; i++) col[i] = (float)(-10 * i);
  ct_tensor *r, *cl, *o, *s;
  ck_assert_ct_ok(ct_from_host(&r, d, CT_F32, 1, (int64_t[]){9}, row));
  ck_assert_ct_ok(ct_from_host(&cl, d, CT_F32, 2, (int64_t[]){5, 1}, col));
  ck_assert_ct_ok(ct_zeros(&o, d, CT_F32, 2, (int64_t[]){5, 9}));
  ck_assert_ct_ok(ct_copy(o, r));
  ck_assert_ct_ok(ct_to_host(o, got, sizeof got));
  for (int i = 0; i < 45; i++) ck_assert_float_eq(got[i], row[i % 9]);
  ck_assert_ct_ok(ct_copy(o, cl));
  ck_assert_ct_ok(ct_to_host(o, got, sizeof got));
  for (int i = 0; i < 45; i++) ck_assert_float_eq(got[i], col[i / 9]);
  ct_tensor *rs;
  ck_assert_ct_ok(ct_slice(&s, o, 1, 2, 5, 1));
  ck_assert_ct_ok(ct_slice(&rs, r, 0, 4, 7, 1));
  ck_assert_ct_ok(ct_copy(s, rs));
  ck_assert_ct_ok(ct_to_host(o, got, sizeof got));
  for (int i = 0; i < 45; i++)
    ck_assert_float_eq(got[i], i % 9 >= 2 && i % 9 < 5 ? row[i % 9 + 2] : col[i / 9]);
  ct_release(rs);
  ct_release(s);
  ct_release(o);
  ct_release(cl);
  ct_release(r);
  /* contiguous fills of 1 element and of 4 groups and 904 elements (20000 bytes), of a slice
   * with an offset */
  for (int64_t n = 1; n <= 5000; n += 4999) {
    float *h = malloc((size_t)(n + 2) * sizeof *h);
    for (int64_t i = 0; i < n + 2; i++) h[i] = -1.0f;
    ct_tensor *t, *mid;
    ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, (int64_t[]){n + 2}, h));
    ck_assert_ct_ok(ct_slice(&mid, t, 0, 1, n + 1, 1));
    ck_assert_ct_ok(ct__fill_value(mid, 2.5, "test"));
    ck_assert_ct_ok(ct_to_host(t, h, (size_t)(n + 2) * sizeof *h));
    for (int64_t i = 0; i < n + 2; i++)
      ck_assert_msg(h[i] == (i == 0 || i == n + 1 ? -1.0f : 2.5f), "fill of %lld elements: [%lld] = %g",
                    (long long)n, (long long)i, (double)h[i]);
    free(h);
    ct_release(mid);
    ct_release(t);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor-views");
  TCase *tc = tcase_create("views");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_views_every_dtype);
  tcase_add_test(tc, test_view_reshape_rules);
  tcase_add_test(tc, test_slice_semantics);
  tcase_add_test(tc, test_slice_huge_step);
  tcase_add_test(tc, test_squeeze_unsqueeze_permute_expand);
  tcase_add_test(tc, test_views_keep_storage_alive);
  tcase_add_test(tc, test_copy_from_host_strided);
  tcase_add_test(tc, test_copy_odd_sizes);
  tcase_add_test(tc, test_copy_every_outer_dim_count);
  tcase_add_test(tc, test_copy_attention_layouts);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
