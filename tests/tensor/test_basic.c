/* Tensor creation, reference counting, properties, host round trips and argument errors. */
#include <math.h>
#include <stdint.h>

#include "ct_test.h"
#include "device/device.h"
#include "tensor/tensor.h"

static const ct_dtype all_dtypes[CT_DTYPE_COUNT] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32, CT_I64, CT_U16,
                                                    CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};

/* Deterministic bytes that are valid values of every dtype (bool gets 0/1). */
static void fill_bytes(void *p, size_t n, ct_dtype t, unsigned seed) {
  unsigned char *b = p;
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    b[i] = t == CT_BOOL ? (unsigned char)((x >> 24) & 1) : (unsigned char)(x >> 24);
  }
}

START_TEST(test_roundtrip_every_dtype) {
  ct_device *d = ct_test_device();
  int64_t shape[3] = {3, 5, 7};
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    size_t n = 3 * 5 * 7 * ct_dtype_size(t);
    unsigned char *src = malloc(n), *back = malloc(n);
    fill_bytes(src, n, t, (unsigned)k);
    ct_tensor *x;
    ck_assert_ct_ok(ct_from_host(&x, d, t, 3, shape, src));
    ck_assert_int_eq(ct_tensor_dtype(x), t);
    ck_assert_int_eq(ct_tensor_ndim(x), 3);
    ck_assert_int_eq(ct_numel(x), 105);
    ck_assert_uint_eq(ct_tensor_nbytes(x), n);
    ck_assert(ct_tensor_is_contiguous(x));
    ck_assert_ptr_eq(ct_tensor_device(x), d);
    memset(back, 0xAB, n);
    ck_assert_ct_ok(ct_to_host(x, back, n));
    ck_assert_msg(memcmp(src, back, n) == 0, "dtype %s did not round-trip", ct_dtype_name(t));
    ct_release(x);
    free(src);
    free(back);
  }
}
END_TEST

START_TEST(test_scalar_and_empty) {
  ct_device *d = ct_test_device();
  float v = 3.5f, back = 0;
  ct_tensor *s;
  ck_assert_ct_ok(ct_from_host(&s, d, CT_F32, 0, NULL, &v));
  ck_assert_int_eq(ct_tensor_ndim(s), 0);
  ck_assert_int_eq(ct_numel(s), 1);
  ck_assert_ct_ok(ct_to_host(s, &back, sizeof back));
  ck_assert_float_eq(back, 3.5f);
  ct_release(s);

  int64_t shape[2] = {4, 0};
  ct_tensor *e;
  ck_assert_ct_ok(ct_from_host(&e, d, CT_I32, 2, shape, NULL));
  ck_assert_int_eq(ct_numel(e), 0);
  ck_assert_uint_eq(ct_tensor_nbytes(e), 0);
  ck_assert_ct_ok(ct_to_host(e, NULL, 0));
  ct_release(e);
  ck_assert_ct_ok(ct_zeros(&e, d, CT_F16, 2, shape));
  ct_release(e);
}
END_TEST

START_TEST(test_fills) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {3, 4};
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    size_t es = ct_dtype_size(t);
    unsigned char buf[12 * 8], want[8];
    const double values[4] = {0.0, 1.0, -2.75, 300.5};
    for (int v = 0; v < 4; v++) {
      ct_tensor *x;
      /* -2.75 has no unsigned value, 300.5 none in u8 or i8: the scalar rule refuses them (the
       * fraction alone is truncated, as torch.full does). */
      bool fits = !((v == 2 && (t == CT_U8 || t == CT_U16 || t == CT_U32 || t == CT_U64)) ||
                    (v == 3 && (t == CT_U8 || t == CT_I8)));
      if (!fits) {
        ck_assert_ct_status(ct_full(&x, d, t, 2, shape, values[v]), CT_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_null(x);
        continue;
      }
      if (v == 0) ck_assert_ct_ok(ct_zeros(&x, d, t, 2, shape));
      else if (v == 1) ck_assert_ct_ok(ct_ones(&x, d, t, 2, shape));
      else ck_assert_ct_ok(ct_full(&x, d, t, 2, shape, values[v]));
      ck_assert_ct_ok(ct_to_host(x, buf, sizeof buf));
      ct__host_store_double(t, want, values[v]);
      for (int i = 0; i < 12; i++)
        ck_assert_msg(memcmp(buf + i * es, want, es) == 0, "%s fill %g element %d", ct_dtype_name(t), values[v], i);
      ct_release(x);
    }
  }
  /* Spot values of the documented conversion: truncation and saturation. */
  unsigned char b;
  ct__host_store_double(CT_U8, &b, 300.5);
  ck_assert_int_eq(b, 255);
  int8_t c;
  ct__host_store_double(CT_I8, &c, -2.75);
  ck_assert_int_eq(c, -2);
}
END_TEST

START_TEST(test_refcount) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {10};
  ct_tensor *x;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_I32, 1, shape));
  ck_assert_ptr_eq(ct_retain(x), x);
  ct_release(x);
  ck_assert_int_eq(ct_numel(x), 10);
  ct_release(x);
  ck_assert_ptr_null(ct_retain(NULL));
  ct_release(NULL);
}
END_TEST

START_TEST(test_argument_errors) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {2, -3};
  ct_tensor *x = (ct_tensor *)1;
  ck_assert_ct_status(ct_empty(&x, d, CT_F32, 2, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(x);
  ck_assert_error_contains("[2, -3]");
  ck_assert_error_contains("-3 at dim 1");
  ck_assert_ct_status(ct_empty(NULL, d, CT_F32, 1, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_empty(&x, NULL, CT_F32, 1, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'d'");
  ck_assert_ct_status(ct_empty(&x, d, (ct_dtype)42, 1, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("42");
  ck_assert_ct_status(ct_empty(&x, d, CT_F32, 9, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_empty(&x, d, CT_F32, -1, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_empty(&x, d, CT_F32, 2, NULL), CT_ERR_INVALID_ARGUMENT);
  int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 2};
  ck_assert_ct_status(ct_empty(&x, d, CT_F32, 3, huge), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("overflow");
  int64_t ok[1] = {4};
  ck_assert_ct_status(ct_from_host(&x, d, CT_F32, 1, ok, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'data'");
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 1, ok));
  float small[2];
  ck_assert_ct_status(ct_to_host(x, small, sizeof small), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("8 bytes");
  ck_assert_error_contains("16 bytes");
  ck_assert_ct_status(ct_to_host(x, NULL, 16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_to_host(NULL, small, 16), CT_ERR_INVALID_ARGUMENT);
  ct_release(x);
  /* Properties of NULL. */
  ck_assert_ptr_null(ct_tensor_device(NULL));
  ck_assert_int_eq(ct_tensor_ndim(NULL), -1);
  ck_assert_int_eq(ct_numel(NULL), 0);
  ck_assert_ptr_null(ct_tensor_shape(NULL));
  ck_assert(!ct_tensor_is_contiguous(NULL));
}
END_TEST

START_TEST(test_shape_helpers) {
  char buf[64];
  int64_t s[3] = {2, 3, 4};
  ck_assert_str_eq(ct__shape_str(buf, sizeof buf, 3, s), "[2, 3, 4]");
  ck_assert_str_eq(ct__shape_str(buf, sizeof buf, 0, NULL), "[]");
  ck_assert_str_eq(ct__shape_str(buf, 5, 3, s), "[2, ");
  int n;
  int64_t out[CT_MAX_DIMS];
  int64_t a[2] = {3, 1}, b[3] = {2, 1, 4};
  ck_assert_ct_ok(ct__broadcast_shapes(&n, out, 2, a, 3, b, "t"));
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(out[0], 2);
  ck_assert_int_eq(out[1], 3);
  ck_assert_int_eq(out[2], 4);
  int64_t c[1] = {5}, e[2] = {3, 2};
  ck_assert_ct_status(ct__broadcast_shapes(&n, out, 2, e, 1, c, "ct_add"), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("ct_add: shapes [3, 2] and [5] cannot be broadcast");
  ck_assert_error_contains("[5]");
  ck_assert_ct_ok(ct__broadcast_shapes(&n, out, 0, NULL, 0, NULL, "t"));
  ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(test_same_device_two) {
  ct_device *d0, *d1;
  int count = 0;
  ck_assert_ct_ok(ct_device_count(&count));
  if (count < 2) return;
  ck_assert_ct_ok(ct_device_get(&d0, 0));
  ck_assert_ct_ok(ct_device_get(&d1, 1));
  int64_t shape[1] = {3};
  ct_tensor *a, *b;
  ck_assert_ct_ok(ct_zeros(&a, d0, CT_F32, 1, shape));
  ck_assert_ct_ok(ct_zeros(&b, d1, CT_F32, 1, shape));
  ck_assert_ct_ok(ct__check_same_device("f", "a", a, "b", a));
  ck_assert_ct_status(ct__check_same_device("ct_add", "a", a, "b", b), CT_ERR_DEVICE_MISMATCH);
  char want[128];
  snprintf(want, sizeof want, "expected all tensors on the same device, but a is on %s and b is on %s",
           ct_device_spec(d0), ct_device_spec(d1));
  ck_assert_error_contains(want);
  ck_assert_ct_status(ct__check_same_device("ct_add", "a", NULL, "b", b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'a'");
  ct_release(a);
  ct_release(b);
}
END_TEST


START_TEST(test_f64_unsupported) {
  ct_device *d = ct_test_device();
  /* Pretend the device lacks cl_khr_fp64 (this forked test process owns its device table). */
  d->props.fp64 = false;
  ct_tensor *x = (ct_tensor *)1;
  int64_t shape[1] = {3};
  ck_assert_ct_status(ct_zeros(&x, d, CT_F64, 1, shape), CT_ERR_UNSUPPORTED);
  ck_assert_ptr_null(x);
  ck_assert_error_contains("cl_khr_fp64");
  ck_assert_error_contains(ct_device_spec(d));
  ck_assert_error_contains(ct_device_properties(d)->name);
  ck_assert_ct_status(ct_arange(&x, d, CT_F64, 0, 3, 1), CT_ERR_UNSUPPORTED);
  ct_tensor *f;
  ck_assert_ct_ok(ct_zeros(&f, d, CT_F32, 1, shape));
  ck_assert_ct_status(ct_cast(&x, f, CT_F64), CT_ERR_UNSUPPORTED);
  ct_release(f);
}
END_TEST

START_TEST(test_null_arguments) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {3};
  ct_tensor *x = (ct_tensor *)1;
  ck_assert_ct_status(ct_zeros(NULL, d, CT_F32, 1, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_zeros(&x, NULL, CT_F32, 1, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(x);
  ck_assert_ct_status(ct_ones(NULL, d, CT_F32, 1, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_ones(&x, d, CT_F32, 1, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_full(NULL, d, CT_F32, 1, shape, 1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_full(&x, d, CT_F32, -2, shape, 1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_from_host(NULL, d, CT_F32, 1, shape, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_from_host(&x, NULL, CT_F32, 1, shape, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_from_host(&x, d, (ct_dtype)-1, 1, shape, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_empty(&x, d, CT_F32, 1, (int64_t[]){-1}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_copy_from_host(NULL, shape, 8), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_to_host(NULL, shape, 8), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_copy(NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_contiguous(NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_view(NULL, NULL, 0, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_reshape(NULL, NULL, 0, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_permute(NULL, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_transpose(NULL, NULL, 0, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_slice(NULL, NULL, 0, 0, 1, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_squeeze(NULL, NULL, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_unsqueeze(NULL, NULL, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_expand(NULL, NULL, 0, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_cast(NULL, NULL, CT_F32), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_to_device(NULL, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_format(NULL, 0, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_print(NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_eye(&x, NULL, CT_F32, 2, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ct_tensor_offset(NULL), 0);
  ck_assert_ptr_null(ct_tensor_strides(NULL));
  ck_assert_uint_eq(ct_tensor_nbytes(NULL), 0);
  ck_assert_int_eq((int)ct_tensor_dtype(NULL), -1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor-basic");
  TCase *tc = tcase_create("basic");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_roundtrip_every_dtype);
  tcase_add_test(tc, test_scalar_and_empty);
  tcase_add_test(tc, test_fills);
  tcase_add_test(tc, test_refcount);
  tcase_add_test(tc, test_argument_errors);
  tcase_add_test(tc, test_shape_helpers);
  tcase_add_test(tc, test_same_device_two);
  tcase_add_test(tc, test_f64_unsupported);
  tcase_add_test(tc, test_null_arguments);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
