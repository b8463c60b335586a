/* Shape limits: every call that produces a shape (creation, views, broadcasting) refuses an
 * element count or byte size that does not fit in int64 with CT_ERR_INVALID_ARGUMENT, so that
 * ct_numel() and ct_tensor_nbytes() of every tensor are exact. Before, ct_expand to
 * [2^32, 2^32, 4] gave ct_numel 0 (and ct_sum CT_OK with 0), and an f32 expanded to
 * [2^31, 2^31] gave ct_tensor_nbytes 0, so ct_to_host "succeeded" copying nothing.
 * Nothing here allocates more than a few bytes of device memory. */
#include "ct_test.h"

#define P2(k) ((int64_t)1 << (k))

/* A one-element tensor of dtype t with value 1, shaped [1] * ndim (ndim 0: a scalar). */
static ct_tensor *one(ct_device *d, ct_dtype t, int ndim) {
  int64_t shape[CT_MAX_DIMS];
  for (int i = 0; i < ndim; i++) shape[i] = 1;
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_full(&x, d, t, ndim, shape, 1.0));
  return x;
}

/* ct_expand must refuse shape with CT_ERR_INVALID_ARGUMENT naming ct_expand. */
static void expand_refused(const ct_tensor *x, int ndim, const int64_t *shape) {
  ct_tensor *v = (ct_tensor *)1;
  ck_assert_ct_status(ct_expand(&v, x, ndim, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(v);
  ck_assert_error_contains("ct_expand: shape [");
}

START_TEST(test_expand_overflow) {
  ct_device *d = ct_test_device();
  ct_tensor *f = one(d, CT_F32, 0), *u = one(d, CT_U8, 0), *v = NULL;
  /* The cases: numel 2^66 (wrapped to 0) and 2^62 f32 elements (2^64 bytes, wrapped). */
  expand_refused(f, 3, (const int64_t[]){P2(32), P2(32), 4});
  ck_assert_error_contains("too many elements");
  expand_refused(f, 2, (const int64_t[]){P2(31), P2(31)});
  ck_assert_error_contains("bytes");
  expand_refused(u, 3, (const int64_t[]){P2(32), P2(32), 4});
  /* Products that wrap to a small nonzero value are caught too: 3 * ((2^64 - 1) / 3 + 1) is
   * 2^64 + 2, which wraps to 2. */
  expand_refused(u, 2, (const int64_t[]){3, (int64_t)(UINT64_MAX / 3) + 1});

  /* The limits themselves: INT64_MAX one-byte elements fit; INT64_MAX / 4 f32 elements fit,
   * one more does not (its byte size is past INT64_MAX). numel and nbytes are then exact. */
  ck_assert_ct_ok(ct_expand(&v, u, 1, (const int64_t[]){INT64_MAX}));
  ck_assert_int_eq(ct_numel(v), INT64_MAX);
  ck_assert_uint_eq(ct_tensor_nbytes(v), (size_t)INT64_MAX);
  ct_release(v);
  ck_assert_ct_ok(ct_expand(&v, f, 1, (const int64_t[]){INT64_MAX / 4}));
  ck_assert_int_eq(ct_numel(v), INT64_MAX / 4);
  ck_assert_uint_eq(ct_tensor_nbytes(v), (size_t)(INT64_MAX / 4) * 4);
  ct_release(v);
  expand_refused(f, 1, (const int64_t[]){INT64_MAX / 4 + 1});

  /* A large expanded tensor that fits: 2^61 bytes, and ct_to_host compares against the exact
   * size rather than copying nothing. */
  ck_assert_ct_ok(ct_expand(&v, u, 2, (const int64_t[]){P2(31), P2(30)}));
  ck_assert_int_eq(ct_numel(v), P2(61));
  unsigned char buf[16];
  ck_assert_ct_status(ct_to_host(v, buf, sizeof buf), CT_ERR_INVALID_ARGUMENT);
  ct_release(v);
  ct_release(f);
  ct_release(u);
}
END_TEST

/* The other views keep an exact count: from a near-limit expanded tensor they cannot grow it,
 * and ct_view/ct_reshape of an empty tensor refuse shapes whose strides would overflow. */
START_TEST(test_views_of_large_and_empty) {
  ct_device *d = ct_test_device();
  ct_tensor *u = one(d, CT_U8, 0), *big = NULL, *v = NULL;
  ck_assert_ct_ok(ct_expand(&big, u, 2, (const int64_t[]){P2(31), P2(31)}));
  ck_assert_int_eq(ct_numel(big), P2(62));
  ck_assert_ct_ok(ct_unsqueeze(&v, big, 1));
  ck_assert_int_eq(ct_numel(v), P2(62));
  ct_release(v);
  ck_assert_ct_ok(ct_transpose(&v, big, 0, 1));
  ck_assert_int_eq(ct_numel(v), P2(62));
  ct_release(v);
  ck_assert_ct_ok(ct_permute(&v, big, (const int[]){1, 0}));
  ck_assert_int_eq(ct_numel(v), P2(62));
  ct_release(v);
  ck_assert_ct_ok(ct_slice(&v, big, 0, 1, P2(31), 2));
  ck_assert_int_eq(ct_numel(v), P2(30) * P2(31)); /* rows 1, 3, ..., 2^31 - 1 */
  ct_release(v);
  /* Expanding that further is refused: 2^62 * 2 = 2^63 > INT64_MAX. */
  expand_refused(big, 3, (const int64_t[]){2, P2(31), P2(31)});
  ct_release(big);

  ct_tensor *e = NULL;
  ck_assert_ct_ok(ct_empty(&e, d, CT_F32, 1, (const int64_t[]){0}));
  /* Any shape with a zero has as many elements as the empty input, but [0, 2^62, 2^62] would
   * get a contiguous stride of 2^124. */
  ck_assert_ct_status(ct_view(&v, e, 3, (const int64_t[]){0, P2(62), P2(62)}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_view: shape [0, 4611686018427387904, 4611686018427387904]");
  ck_assert_ct_status(ct_reshape(&v, e, 3, (const int64_t[]){P2(62), 0, P2(62)}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_reshape: shape [");
  ck_assert_ptr_null(v);
  /* Empty shapes whose strides fit are still fine. */
  ck_assert_ct_ok(ct_reshape(&v, e, 3, (const int64_t[]){0, P2(31), P2(31)}));
  ck_assert_int_eq(ct_numel(v), 0);
  ck_assert_uint_eq(ct_tensor_nbytes(v), 0);
  ct_release(v);
  ct_release(e);
  ct_release(u);
}
END_TEST

/* Broadcasting two valid shapes can overflow: the binary, where and matmul paths refuse it
 * before anything is allocated or launched. */
START_TEST(test_broadcast_overflow) {
  ct_device *d = ct_test_device();
  ct_tensor *f = one(d, CT_F32, 2), *u = one(d, CT_U8, 2), *a = NULL, *b = NULL, *o = (ct_tensor *)1;
  ck_assert_ct_ok(ct_expand(&a, u, 2, (const int64_t[]){P2(32), 1}));
  ck_assert_ct_ok(ct_expand(&b, u, 2, (const int64_t[]){1, P2(32)}));
  ck_assert_ct_status(ct_add(&o, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(o);
  ck_assert_error_contains("ct_add: shape [4294967296, 4294967296] has too many elements");
  ck_assert_ct_status(ct_lt(&o, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_lt: shape [");
  ck_assert_ct_status(ct_where(&o, a, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_where: shape [");
  ct_release(a);
  ct_release(b);
  /* 2^62 f32 elements fit in int64 but their 2^64 bytes do not: refused where the result is
   * created. */
  ck_assert_ct_ok(ct_expand(&a, f, 2, (const int64_t[]){P2(31), 1}));
  ck_assert_ct_ok(ct_expand(&b, f, 2, (const int64_t[]){1, P2(31)}));
  ck_assert_ct_status(ct_mul(&o, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_mul: shape [2147483648, 2147483648] has 4611686018427387904 elements of 4 bytes");
  ct_release(a);
  ct_release(b);
  /* Matrix products broadcast their batch dims. */
  ct_tensor *f4 = one(d, CT_F32, 4);
  ck_assert_ct_ok(ct_expand(&a, f4, 4, (const int64_t[]){P2(32), 1, 1, 1}));
  ck_assert_ct_ok(ct_expand(&b, f4, 4, (const int64_t[]){1, P2(32), 1, 1}));
  ck_assert_ct_status(ct_matmul(&o, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(o);
  ck_assert_error_contains("ct_matmul: shape [4294967296, 4294967296, 1, 1]");
  ct_release(a);
  ct_release(b);
  ct_release(f4);
  ct_release(f);
  ct_release(u);
}
END_TEST

/* Every creation call refuses such shapes, with its own name in the message. */
START_TEST(test_creation_overflow) {
  ct_device *d = ct_test_device();
  const int64_t wrap[] = {P2(32), P2(32), 4}, bytes[] = {P2(31), P2(31)}, empty_wide[] = {0, P2(62), P2(62)};
  const struct {
    int ndim;
    const int64_t *shape;
    ct_dtype t;
  } cases[] = {{3, wrap, CT_I32}, {2, bytes, CT_F32}, {3, empty_wide, CT_U8}};
  static const char small[16];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int n = cases[i].ndim;
    const int64_t *sh = cases[i].shape;
    ct_dtype t = cases[i].t;
    ct_tensor *x = (ct_tensor *)1;
    ck_assert_ct_status(ct_empty(&x, d, t, n, sh), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("ct_empty: shape [");
    ck_assert_ptr_null(x);
    ck_assert_ct_status(ct_zeros(&x, d, t, n, sh), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("ct_zeros: shape [");
    ck_assert_ct_status(ct_ones(&x, d, t, n, sh), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("ct_ones: shape [");
    ck_assert_ct_status(ct_full(&x, d, t, n, sh, 1.0), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("ct_full: shape [");
    ck_assert_ct_status(ct_from_host(&x, d, t, n, sh, small), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("ct_from_host");
    if (t == CT_F32) {
      ck_assert_ct_status(ct_rand(&x, d, t, n, sh), CT_ERR_INVALID_ARGUMENT);
      ck_assert_error_contains("ct_rand: shape [");
      ck_assert_ct_status(ct_randn(&x, d, t, n, sh), CT_ERR_INVALID_ARGUMENT);
      ck_assert_error_contains("ct_randn: shape [");
    }
    ck_assert_ptr_null(x);
  }
  ct_tensor *x = (ct_tensor *)1;
  ck_assert_ct_status(ct_eye(&x, d, CT_F32, P2(31), P2(31)), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_eye: shape [2147483648, 2147483648]");
  ck_assert_ptr_null(x);
  /* An empty identity of the widest valid shape: no diagonal to write (its stride would
   * overflow). */
  ck_assert_ct_ok(ct_eye(&x, d, CT_U8, 0, INT64_MAX));
  ck_assert_int_eq(ct_numel(x), 0);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor-limits");
  TCase *tc = tcase_create("limits");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_expand_overflow);
  tcase_add_test(tc, test_views_of_large_and_empty);
  tcase_add_test(tc, test_broadcast_overflow);
  tcase_add_test(tc, test_creation_overflow);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
