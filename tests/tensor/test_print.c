/* ct_print / ct_format against PyTorch's repr of the same values. */
#include <math.h>

#include "ct_test.h"
#include "tensor_util.h"

static char *fmt(const ct_tensor *t) {
  size_t need = 0;
  ck_assert_ct_status(ct_format(NULL, 0, &need, t), CT_ERR_INVALID_ARGUMENT);
  char *b = malloc(need + 1);
  ck_assert_ct_ok(ct_format(b, need + 1, NULL, t));
  ck_assert_uint_eq(strlen(b), need);
  return b;
}

static void expect_repr(ct_device *d, ct_dtype t, int ndim, const int64_t *shape, const void *data, const char *body) {
  ct_tensor *x;
  ck_assert_ct_ok(ct_from_host(&x, d, t, ndim, shape, data));
  char *got = fmt(x);
  char shp[64], want[4096];
  ct_format(NULL, 0, NULL, x);
  int n = snprintf(shp, sizeof shp, "[");
  for (int i = 0; i < ndim; i++) n += snprintf(shp + n, sizeof shp - (size_t)n, i ? ", %lld" : "%lld", (long long)shape[i]);
  snprintf(shp + n, sizeof shp - (size_t)n, "]");
  snprintf(want, sizeof want, "tensor(%s, shape=%s, dtype=%s, device=%s)", body, shp, ct_dtype_name(t), ct_device_spec(d));
  ck_assert_str_eq(got, want);
  free(got);
  ct_release(x);
}

START_TEST(test_repr_values) {
  ct_device *d = ct_test_device();
  expect_repr(d, CT_F32, 2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4}, "[[1., 2.],\n        [3., 4.]]");
  expect_repr(d, CT_F32, 1, (int64_t[]){2}, (float[]){1.5f, -2.25f}, "[ 1.5000, -2.2500]");
  expect_repr(d, CT_F32, 2, (int64_t[]){1, 2}, (float[]){1e10f, 1.0f}, "[[1.0000e+10, 1.0000e+00]]");
  expect_repr(d, CT_F32, 1, (int64_t[]){3}, (float[]){0.5f, NAN, -INFINITY}, "[0.5000,    nan,   -inf]");
  expect_repr(d, CT_F32, 1, (int64_t[]){2}, (float[]){1e-5f, 1.0f}, "[1.0000e-05, 1.0000e+00]");
  expect_repr(d, CT_I32, 1, (int64_t[]){3}, (int32_t[]){1, -10, 100}, "[  1, -10, 100]");
  expect_repr(d, CT_BOOL, 1, (int64_t[]){2}, (uint8_t[]){1, 0}, "[ True, False]");
  expect_repr(d, CT_F32, 0, NULL, (float[]){3.5f}, "3.5000");
  expect_repr(d, CT_I64, 3, (int64_t[]){2, 1, 2}, (int64_t[]){0, 1, 2, 3}, "[[[0, 1]],\n\n        [[2, 3]]]");
  uint16_t h[2] = {ct_f32_to_f16(0.5f), ct_f32_to_f16(-1.0f)};
  expect_repr(d, CT_F16, 1, (int64_t[]){2}, h, "[ 0.5000, -1.0000]");
  uint16_t bf[2] = {ct_f32_to_bf16(2.0f), ct_f32_to_bf16(3.0f)};
  expect_repr(d, CT_BF16, 1, (int64_t[]){2}, bf, "[2., 3.]");
  expect_repr(d, CT_U8, 1, (int64_t[]){3}, (uint8_t[]){255, 0, 7}, "[255,   0,   7]");
  expect_repr(d, CT_I8, 1, (int64_t[]){2}, (int8_t[]){-128, 5}, "[-128,    5]");
}
END_TEST

START_TEST(test_repr_summarized_and_views) {
  ct_device *d = ct_test_device();
  ct_tensor *x, *v;
  ck_assert_ct_ok(ct_arange(&x, d, CT_I32, 0, 2000, 1));
  char *got = fmt(x);
  char want[512];
  snprintf(want, sizeof want, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], shape=[2000], dtype=i32, device=%s)",
           ct_device_spec(d));
  ck_assert_str_eq(got, want);
  free(got);
  ck_assert_ct_ok(ct_view(&v, x, 2, (int64_t[]){40, 50}));
  got = fmt(v);
  snprintf(want, sizeof want,
           "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
           "        [  50,   51,   52,  ...,   97,   98,   99],\n"
           "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
           "        ...,\n"
           "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
           "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
           "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]], shape=[40, 50], dtype=i32, device=%s)",
           ct_device_spec(d));
  ck_assert_str_eq(got, want);
  free(got);
  ct_tensor *t;
  ck_assert_ct_ok(ct_transpose(&t, v, 0, 1));
  got = fmt(t);
  ck_assert(strstr(got, "tensor([[   0,   50,  100,  ..., 1850, 1900, 1950],\n") == got);
  ck_assert(strstr(got, "[  49,   99,  149,  ..., 1899, 1949, 1999]], shape=[50, 40]") != NULL);
  free(got);
  ct_release(t);
  ct_release(v);
  ct_release(x);
  /* Rows wrap at 80 columns, as torch.arange(30.) prints. */
  ck_assert_ct_ok(ct_arange(&x, d, CT_F32, 0, 30, 1));
  got = fmt(x);
  snprintf(want, sizeof want,
           "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
           "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
           "        28., 29.], shape=[30], dtype=f32, device=%s)", ct_device_spec(d));
  ck_assert_str_eq(got, want);
  free(got);
  ct_release(x);
  /* Empty */
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 2, (int64_t[]){0, 3}));
  got = fmt(x);
  snprintf(want, sizeof want, "tensor([], shape=[0, 3], dtype=f32, device=%s)", ct_device_spec(d));
  ck_assert_str_eq(got, want);
  free(got);
  ct_release(x);
}
END_TEST

START_TEST(test_format_buffer_and_errors) {
  ct_device *d = ct_test_device();
  ct_tensor *x;
  ck_assert_ct_ok(ct_ones(&x, d, CT_F32, 1, (int64_t[]){2}));
  char small[10];
  size_t need = 0;
  ck_assert_ct_status(ct_format(small, sizeof small, &need, x), CT_ERR_INVALID_ARGUMENT);
  ck_assert_str_eq(small, "tensor([1");
  ck_assert_uint_gt(need, 9);
  ck_assert_error_contains("too small");
  ck_assert_ct_status(ct_format(NULL, 5, NULL, x), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_format(small, sizeof small, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_print(NULL, x), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_print(stdout, NULL), CT_ERR_INVALID_ARGUMENT);
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  ck_assert_ct_ok(ct_print(f, x));
  rewind(f);
  char line[200];
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  ck_assert(strncmp(line, "tensor([1., 1.], shape=[2], dtype=f32, device=", 46) == 0);
  ck_assert(line[strlen(line) - 1] == '\n');
  fclose(f);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor-print");
  TCase *tc = tcase_create("print");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_repr_values);
  tcase_add_test(tc, test_repr_summarized_and_views);
  tcase_add_test(tc, test_format_buffer_and_errors);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
