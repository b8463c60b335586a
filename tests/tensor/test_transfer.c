/* Transfers: async host<->device with events, pinned buffers, ct_to_device between devices
 * (direct within a context, staged through host memory otherwise), and arange/eye. Run with
 * POCL_DEVICES="pthread pthread" too: the two-device cases then run. */
#include <math.h>

#include "ct_test.h"
#include "tensor/tensor.h"
#include "tensor_util.h"

START_TEST(test_async_roundtrip) {
  ct_device *d = ct_test_device();
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    size_t es = ct_dtype_size(t), nb = 64 * 33 * es;
    unsigned char *src = malloc(nb), *back = malloc(nb);
    fill_bytes(src, nb, t, 5 + (uint64_t)k);
    ct_tensor *x;
    ck_assert_ct_ok(ct_empty(&x, d, t, 2, (int64_t[]){64, 33}));
    ct_event *ev;
    ck_assert_ct_ok(ct_copy_from_host_async(&ev, x, src, nb));
    ck_assert_ct_ok(ct_event_wait(ev));
    ck_assert_ct_ok(ct_event_wait(ev)); /* waiting twice is fine */
    ct_event_free(ev);
    ck_assert_ct_ok(ct_to_host_async(&ev, x, back, nb));
    ck_assert_ct_ok(ct_event_wait(ev));
    ct_event_free(ev);
    ck_assert_mem_eq(src, back, nb);
    /* Strided, both ways: write the transpose, read it back through the transpose. */
    ct_tensor *tr;
    ck_assert_ct_ok(ct_transpose(&tr, x, 0, 1));
    ck_assert_ct_ok(ct_copy_from_host_async(&ev, tr, src, nb));
    ct_event_free(ev); /* release waits */
    memset(back, 0, nb);
    ck_assert_ct_ok(ct_to_host_async(&ev, tr, back, nb));
    ck_assert_ct_ok(ct_event_wait(ev));
    ct_event_free(ev);
    ck_assert_mem_eq(src, back, nb);
    /* and x holds the transpose of src */
    ck_assert_ct_ok(ct_to_host(x, back, nb));
    for (int i = 0; i < 64; i++)
      for (int j = 0; j < 33; j++)
        ck_assert(memcmp(back + ((size_t)i * 33 + (size_t)j) * es, src + ((size_t)j * 64 + (size_t)i) * es, es) == 0);
    ct_release(tr);
    ct_release(x);
    free(src);
    free(back);
  }
}
END_TEST

START_TEST(test_async_errors_and_empty) {
  ct_device *d = ct_test_device();
  ct_tensor *x;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 1, (int64_t[]){4}));
  float buf[4];
  ct_event *ev = (ct_event *)1;
  ck_assert_ct_status(ct_to_host_async(&ev, x, buf, 15), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(ev);
  ck_assert_error_contains("15 bytes");
  ck_assert_error_contains("16 bytes");
  ck_assert_ct_status(ct_to_host_async(NULL, x, buf, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_to_host_async(&ev, NULL, buf, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_to_host_async(&ev, x, NULL, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_copy_from_host_async(&ev, x, buf, 3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_copy_from_host_async(NULL, x, buf, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_copy_from_host_async(&ev, NULL, buf, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_copy_from_host(NULL, buf, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_event_wait(NULL), CT_ERR_INVALID_ARGUMENT);
  ct_event_free(NULL);
  /* An expanded destination (four elements in one cell) is refused before anything is
   * enqueued, naming t (issue #28: the write went through a scratch tensor first and failed
   * in the copy from it, naming its 'dst'). */
  ct_tensor *cell, *wide;
  ck_assert_ct_ok(ct_zeros(&cell, d, CT_F32, 1, (int64_t[]){1}));
  ck_assert_ct_ok(ct_expand(&wide, cell, 1, (int64_t[]){4}));
  ck_assert_ct_status(ct_copy_from_host(wide, buf, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_copy_from_host: t of shape [4] (strides [0]) has stride 0 at dim 0");
  ck_assert_error_contains("share one memory location");
  ev = (ct_event *)1;
  ck_assert_ct_status(ct_copy_from_host_async(&ev, wide, buf, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(ev);
  ck_assert_error_contains("ct_copy_from_host_async: t of shape [4]");
  ct_release(wide);
  ct_release(cell);
  ct_release(x);
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 2, (int64_t[]){0, 4}));
  ck_assert_ct_ok(ct_to_host_async(&ev, x, NULL, 0));
  ck_assert_ct_ok(ct_event_wait(ev));
  ct_event_free(ev);
  ck_assert_ct_ok(ct_copy_from_host(x, NULL, 0));
  ct_release(x);
}
END_TEST

START_TEST(test_pinned) {
  ct_device *d = ct_test_device();
  ct_pinned *p;
  size_t n = 1000 * sizeof(float);
  ck_assert_ct_ok(ct_pinned_alloc(&p, d, n));
  ck_assert_uint_eq(ct_pinned_size(p), n);
  float *h = ct_pinned_ptr(p);
  ck_assert_ptr_nonnull(h);
  for (int i = 0; i < 1000; i++) h[i] = (float)i * 0.5f;
  ct_tensor *x;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 1, (int64_t[]){1000}, h));
  memset(h, 0, n);
  ct_event *ev;
  ck_assert_ct_ok(ct_to_host_async(&ev, x, h, n));
  ck_assert_ct_ok(ct_event_wait(ev));
  ct_event_free(ev);
  for (int i = 0; i < 1000; i++) ck_assert_float_eq(h[i], (float)i * 0.5f);
  ct_release(x);
  ct_pinned_free(p);
  ck_assert_ct_ok(ct_pinned_alloc(&p, d, 0));
  ck_assert_uint_eq(ct_pinned_size(p), 0);
  ct_pinned_free(p);
  ct_pinned_free(NULL);
  ck_assert_ptr_null(ct_pinned_ptr(NULL));
  ck_assert_uint_eq(ct_pinned_size(NULL), 0);
  ck_assert_ct_status(ct_pinned_alloc(NULL, d, 4), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_pinned_alloc(&p, NULL, 4), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_to_device) {
  ct_device *d0 = ct_test_device(), *d1 = NULL;
  int count = 0;
  ck_assert_ct_ok(ct_device_count(&count));
  for (int i = 0; i < count; i++) {
    ct_device *c;
    ck_assert_ct_ok(ct_device_get(&c, i));
    if (c != d0) d1 = c;
  }
  int32_t host[12];
  for (int i = 0; i < 12; i++) host[i] = i * 3 - 7;
  ct_tensor *x, *y;
  ck_assert_ct_ok(ct_from_host(&x, d0, CT_I32, 2, (int64_t[]){3, 4}, host));
  /* Same device: the same tensor, a new reference. */
  ck_assert_ct_ok(ct_to_device(&y, x, d0));
  ck_assert_ptr_eq(y, x);
  ct_release(y);
  ck_assert_ct_status(ct_to_device(NULL, x, d0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_to_device(&y, NULL, d0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_to_device(&y, x, NULL), CT_ERR_INVALID_ARGUMENT);
  if (!d1) {
    ct_release(x);
    return;
  }
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d0, t) || !dtype_ok(d1, t)) continue;
    size_t es = ct_dtype_size(t), nb = 5 * 7 * es;
    unsigned char *src = malloc(nb), *back = malloc(nb);
    fill_bytes(src, nb, t, 77 + (uint64_t)k);
    ct_tensor *a, *at, *b, *c;
    ck_assert_ct_ok(ct_from_host(&a, d0, t, 2, (int64_t[]){5, 7}, src));
    ck_assert_ct_ok(ct_transpose(&at, a, 0, 1));
    ck_assert_ct_ok(ct_to_device(&b, at, d1));  /* non-contiguous source */
    ck_assert_ptr_eq(ct_tensor_device(b), d1);
    ck_assert(ct_tensor_is_contiguous(b));
    ck_assert_ct_ok(ct_to_device(&c, b, d0));   /* and back */
    ck_assert_ct_ok(ct_to_host(c, back, nb));
    for (int i = 0; i < 7; i++)
      for (int j = 0; j < 5; j++)
        ck_assert(memcmp(back + ((size_t)i * 5 + (size_t)j) * es, src + ((size_t)j * 7 + (size_t)i) * es, es) == 0);
    ct_release(c);
    /* The staged path (what devices in different contexts use), forced. */
    ct_tensor *s;
    ck_assert_ct_ok(ct_empty(&s, d0, t, 2, (int64_t[]){7, 5}));
    ck_assert_ct_ok(ct__copy_between(s, b, 1, "test"));
    memset(back, 0, nb);
    ck_assert_ct_ok(ct_to_host(s, back, nb));
    ck_assert_ct_ok(ct_to_host(b, src, nb));
    ck_assert_mem_eq(back, src, nb);
    ct_release(s);
    /* Mixing devices is an error that names both. */
    ck_assert_ct_status(ct_copy(a, b), CT_ERR_DEVICE_MISMATCH);
    char want[160];
    snprintf(want, sizeof want, "expected all tensors on the same device, but dst is on %s and src is on %s",
             ct_device_spec(d0), ct_device_spec(d1));
    ck_assert_error_contains(want);
    ct_release(b);
    ct_release(at);
    ct_release(a);
    free(src);
    free(back);
  }
  /* Empty tensors move too. */
  ct_tensor *e, *f;
  ck_assert_ct_ok(ct_zeros(&e, d0, CT_F32, 2, (int64_t[]){0, 3}));
  ck_assert_ct_ok(ct_to_device(&f, e, d1));
  ck_assert_int_eq(ct_numel(f), 0);
  ck_assert_int_eq(ct_tensor_shape(f)[1], 3);
  ct_release(f);
  ct_release(e);
  ct_release(x);
}
END_TEST

START_TEST(test_arange_eye) {
  ct_device *d = ct_test_device();
  ct_tensor *x;
  ck_assert_ct_ok(ct_arange(&x, d, CT_F32, 0, 5, 1));
  float f[8];
  ck_assert_int_eq(ct_numel(x), 5);
  ck_assert_ct_ok(ct_to_host(x, f, sizeof f));
  for (int i = 0; i < 5; i++) ck_assert_float_eq(f[i], (float)i);
  ct_release(x);
  ck_assert_ct_ok(ct_arange(&x, d, CT_F32, 1, 2.05, 0.25));
  ck_assert_int_eq(ct_numel(x), 5);
  ck_assert_ct_ok(ct_to_host(x, f, sizeof f));
  ck_assert_float_eq(f[4], 2.0f);
  ct_release(x);
  ck_assert_ct_ok(ct_arange(&x, d, CT_I32, 10, 0, -3));
  int32_t ib[4];
  ck_assert_int_eq(ct_numel(x), 4);
  ck_assert_ct_ok(ct_to_host(x, ib, sizeof ib));
  ck_assert_int_eq(ib[0], 10);
  ck_assert_int_eq(ib[3], 1);
  ct_release(x);
  /* 64-bit integers past 2^53 stay exact */
  ck_assert_ct_ok(ct_arange(&x, d, CT_I64, 9007199254740992.0, 9007199254740996.0, 1));
  int64_t lb[4];
  ck_assert_ct_ok(ct_to_host(x, lb, sizeof lb));
  ck_assert(lb[1] == INT64_C(9007199254740993));
  ct_release(x);
  ck_assert_ct_ok(ct_arange(&x, d, CT_F32, 3, 3, 1));
  ck_assert_int_eq(ct_numel(x), 0);
  ct_release(x);
  ck_assert_ct_status(ct_arange(&x, d, CT_F32, 0, 5, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_arange(&x, d, CT_F32, 0, 5, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_arange(&x, d, CT_F32, 0, NAN, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_arange(NULL, d, CT_F32, 0, 5, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_arange(&x, NULL, CT_F32, 0, 5, 1), CT_ERR_INVALID_ARGUMENT);

  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    ck_assert_ct_ok(ct_eye(&x, d, t, 3, 5));
    size_t es = ct_dtype_size(t);
    unsigned char got[15 * 8], one[8], zero[8];
    ct__host_store_int(t, one, 1);
    ct__host_store_int(t, zero, 0);
    ck_assert_ct_ok(ct_to_host(x, got, sizeof got));
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 5; j++)
        ck_assert(memcmp(got + (size_t)(i * 5 + j) * es, i == j ? one : zero, es) == 0);
    ct_release(x);
  }
  ck_assert_ct_ok(ct_eye(&x, d, CT_F32, 0, 4));
  ck_assert_int_eq(ct_numel(x), 0);
  ct_release(x);
  ck_assert_ct_status(ct_eye(&x, d, CT_F32, -1, 4), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("-1");
  ck_assert_ct_status(ct_eye(NULL, d, CT_F32, 1, 4), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor-transfer");
  TCase *tc = tcase_create("transfer");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_async_roundtrip);
  tcase_add_test(tc, test_async_errors_and_empty);
  tcase_add_test(tc, test_pinned);
  tcase_add_test(tc, test_to_device);
  tcase_add_test(tc, test_arange_eye);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
