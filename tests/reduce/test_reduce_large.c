/* Reductions over 10^7+ elements against double-precision (long double) references, one test per
 * kind, within the bounds of reduce_ref.h. These also pin down the accumulation scheme: serial
 * f32 chains (even 8 of them, one per vector lane) miss the sum bound of a constant by orders of
 * magnitude, since their rounding errors all go the same way, and a single chain stops counting
 * at 2^24 in the sum of ones. */
#include <math.h>
#include <stdio.h>

#include "ct_test.h"
#include "reduce/reduce.h"
#include "reduce_ref.h"

#define BIG 12345679 /* > 10^7, and no power of two, so every remainder path runs */

static ct_tensor *upload(ct_device *d, ct_dtype t, int ndim, const int64_t *shape, const void *p) {
  ct_tensor *x;
  ck_assert_ct_ok(ct_from_host(&x, d, t, ndim, shape, p));
  return x;
}

/* Compares every output of op over dims with the reference. */
static void check_all(ct_device *d, enum rop op, ct_dtype t, int ndim, const int64_t *shape,
                      const void *vals, int ndims, const int *dims, const char *what) {
  ct_tensor *x = upload(d, t, ndim, shape, vals), *y = NULL;
  ct_status st;
  switch (op) {
    case R_SUM: st = ct_sum(&y, x, ndims, dims, false); break;
    case R_MEAN: st = ct_mean(&y, x, ndims, dims, false); break;
    case R_PROD: st = ct_prod(&y, x, ndims, dims, false); break;
    case R_MAX: st = ct_max(&y, x, ndims, dims, false); break;
    case R_MIN: st = ct_min(&y, x, ndims, dims, false); break;
    case R_ARGMAX: st = ct_argmax(&y, x, ndims ? dims[0] : CT_DIM_NONE, false); break;
    case R_ARGMIN: st = ct_argmin(&y, x, ndims ? dims[0] : CT_DIM_NONE, false); break;
    case R_VAR: st = ct_var(&y, x, ndims, dims, 1, false); break;
    default: st = ct_std(&y, x, ndims, dims, 1, false); break;
  }
  ck_assert_msg(st == CT_OK, "%s: %s", what, ct_last_error());
  bool mask[CT_MAX_DIMS];
  for (int i = 0; i < ndim; i++) mask[i] = ndims == 0;
  for (int i = 0; i < ndims; i++) mask[dims[i] < 0 ? dims[i] + ndim : dims[i]] = true;
  ct_dtype rt = rop_result_dtype(op, t);
  int64_t nout = ct_numel(y);
  size_t rs = ct_dtype_size(rt);
  unsigned char *got = malloc((size_t)nout * rs);
  ck_assert_ct_ok(ct_to_host(y, got, (size_t)nout * rs));
  for (int64_t o = 0; o < nout; o++) {
    struct expect e = ref_one(op, t, vals, ndim, shape, mask, o, 1);
    char msg[256];
    if (!check_one(&e, rt, got + o * rs, msg, sizeof msg))
      ck_abort_msg("%s, output %lld: %s", what, (long long)o, msg);
  }
  free(got);
  ct_release(y);
  ct_release(x);
}

START_TEST(test_sum_f32) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {BIG};
  float *p = make_data(CT_F32, BIG, 1, 0, 1, false);
  check_all(d, R_SUM, CT_F32, 1, shape, p, 0, NULL, "sum f32 of 12345679 values in [0, 1)");
  /* A constant: 0.1f (0x3dcccccd) every time. */
  for (int64_t i = 0; i < BIG; i++) p[i] = 0.1f;
  check_all(d, R_SUM, CT_F32, 1, shape, p, 0, NULL, "sum f32 of 12345679 x 0.1f");
  free(p);
  /* 2^24 + 1000 ones: a serial f32 chain stops at 2^24 (2^24 + 1 rounds back to 2^24). */
  int64_t n1[1] = {(1 << 24) + 1000};
  ct_tensor *x, *y;
  ck_assert_ct_ok(ct_ones(&x, d, CT_F32, 1, n1));
  ck_assert_ct_ok(ct_sum(&y, x, 0, NULL, false));
  float s = 0;
  ck_assert_ct_ok(ct_to_host(y, &s, sizeof s));
  ck_assert_float_eq(s, (float)((1 << 24) + 1000));
  ct_release(y);
  ct_release(x);
}
END_TEST

/* Over the outer dim: [BIG / 8 rows, 8 columns], summed down the columns (one work-item per 8
 * outputs, split into parts). */
START_TEST(test_sum_outer_dim) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {BIG / 8 + 1, 8};
  void *p = make_data(CT_F32, shape[0] * 8, 2, 0, 1, false);
  int dim0 = 0;
  check_all(d, R_SUM, CT_F32, 2, shape, p, 1, &dim0, "sum f32 over dim 0 of [1543210, 8]");
  free(p);
}
END_TEST

/* Integer sums are exact in i64: 12345679 i32 values over the whole range. */
START_TEST(test_sum_i32) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {BIG};
  void *p = make_data(CT_I32, BIG, 3, 0, 0, false);
  check_all(d, R_SUM, CT_I32, 1, shape, p, 0, NULL, "sum i32");
  free(p);
}
END_TEST

/* f16 mean accumulates in f32 (an f16 accumulator would stop at 2048). */
START_TEST(test_mean_f16) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {BIG};
  void *p = make_data(CT_F16, BIG, 4, 0, 1, false);
  check_all(d, R_MEAN, CT_F16, 1, shape, p, 0, NULL, "mean f16");
  free(p);
}
END_TEST

/* var of values with a large mean: two passes keep the result accurate where
 * sum(x^2) - n mean^2 would cancel to noise. */
START_TEST(test_var_f32) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {BIG};
  void *p = make_data(CT_F32, BIG, 5, 1000, 1001, false);
  check_all(d, R_VAR, CT_F32, 1, shape, p, 0, NULL, "var f32 of values in [1000, 1001)");
  check_all(d, R_STD, CT_F32, 1, shape, p, 0, NULL, "std f32 of values in [1000, 1001)");
  free(p);
}
END_TEST

/* max and argmax: the largest value appears twice, late; the first occurrence wins. */
START_TEST(test_max_argmax_f32) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {BIG};
  float *p = make_data(CT_F32, BIG, 6, -1, 1, false);
  p[BIG - 1000] = 5.0f;
  p[BIG - 10] = 5.0f;
  p[77] = -7.0f;
  check_all(d, R_MAX, CT_F32, 1, shape, p, 0, NULL, "max f32");
  check_all(d, R_ARGMAX, CT_F32, 1, shape, p, 0, NULL, "argmax f32");
  check_all(d, R_ARGMIN, CT_F32, 1, shape, p, 0, NULL, "argmin f32");
  free(p);
}
END_TEST

/* f64 product of values near 1 (relative bound). */
START_TEST(test_prod_f64) {
  ct_device *d = ct_test_device();
  if (!ct_device_properties(d)->fp64) return;
  int64_t shape[1] = {BIG};
  void *p = make_data(CT_F64, BIG, 7, 1 - 1e-4, 1 + 1e-4, false);
  check_all(d, R_PROD, CT_F64, 1, shape, p, 0, NULL, "prod f64");
  free(p);
}
END_TEST

int main(int argc, char **argv) {
  /* "gpu-layout": the GPU kernels' layout on this (CPU) device, so both layouts are tested. */
  ct__reduce_gpu_layout = argc > 1 && strcmp(argv[1], "gpu-layout") == 0;
  Suite *s = suite_create("reduce_large");
  TCase *tc = tcase_create("large");
  tcase_add_test(tc, test_sum_f32);
  tcase_add_test(tc, test_sum_outer_dim);
  tcase_add_test(tc, test_sum_i32);
  tcase_add_test(tc, test_mean_f16);
  tcase_add_test(tc, test_var_f32);
  tcase_add_test(tc, test_max_argmax_f32);
  tcase_add_test(tc, test_prod_f64);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
