/* Review of the fusion graph (issue #16, src/fusion/): one regression
 * test per bug found. Each compares the fused result with the exact value (or with the same
 * calls run eagerly, ct__fusion_override = 0). Few distinct programs: f32 inputs, small shapes
 * except where the bug needs a size. */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

#include "ct_test.h"
#include "elementwise/elementwise.h"
#include "fusion/fusion.h"

/* ct_sum of a bool mask is i64 and exact (reduce.cl counts in a long). The fused reduction of
 * a comparison took its accumulator from the comparison's compute dtype (float): a count above
 * 2^24 rounded. 2^24 + 1 ones: float holds 2^24 but not 2^24 + 1. Both layouts. */
START_TEST(sum_of_mask_is_exact) {
  ct_device *d = ct_test_device();
  const int64_t n = (1 << 24) + 1;
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_ones(&x, d, CT_F16, 1, &n));
  for (int gpu = 0; gpu < 2; gpu++) {
    ct__ew_gpu_paths = gpu;
    ct__fusion_override = 1;
    ct_tensor *m = NULL, *s = NULL;
    ck_assert_ct_ok(ct_gt_scalar(&m, x, 0.5));
    ck_assert_ct_ok(ct_sum(&s, m, 0, NULL, false));
    ct_release(m);
    ck_assert_int_eq(ct_tensor_dtype(s), CT_I64);
    int64_t v = 0;
    ck_assert_ct_ok(ct_to_host(s, &v, sizeof v));
    ck_assert_msg(v == n, "layout %s: fused sum of the mask is %lld, want %lld", gpu ? "gpu" : "cpu", (long long)v,
                  (long long)n);
    ct_release(s);
  }
  ct__ew_gpu_paths = false;
  ct__fusion_override = -1;
  ct_release(x);
  ct_test_finish();
}
END_TEST

/* A realize that fails names the call that triggered it. A reduction over some dims (or a
 * softmax over another dim) of a recorded tensor realized it from its kernel's launch, whose
 * message named the kernel ("reduce_cols_sum: realizing ..."), not ct_sum (ct_any: "red_anyall"). */
START_TEST(failed_realize_names_the_call) {
  ct_device *d = ct_test_device();
  ct__fusion_override = 1;
  const int64_t sh[2] = {3, 40};
  ct_tensor *a = NULL, *y = NULL, *r = NULL;
  ck_assert_ct_ok(ct_ones(&a, d, CT_F32, 2, sh));
  ck_assert_ct_ok(ct_mul_scalar(&y, a, 0.5));
  int dim = 0;
  atomic_store(&ct__fusion_fail_builds, 1);
  ck_assert_ct_status(ct_sum(&r, y, 1, &dim, false), CT_ERR_KERNEL_BUILD);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("ct_sum: realizing deferred elementwise work failed in the fused kernel of ct_mul_scalar");
  atomic_store(&ct__fusion_fail_builds, 1);
  ck_assert_ct_status(ct_softmax(&r, y, 0), CT_ERR_KERNEL_BUILD);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("ct_softmax: realizing deferred elementwise work failed");
  atomic_store(&ct__fusion_fail_builds, 1);
  ck_assert_ct_status(ct_any(&r, y, 1, &dim, false), CT_ERR_KERNEL_BUILD);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("ct_any: realizing deferred elementwise work failed");
  /* The retry works. */
  atomic_store(&ct__fusion_fail_builds, 0);
  ck_assert_ct_ok(ct_sum(&r, y, 1, &dim, false));
  float v[40];
  ck_assert_ct_ok(ct_to_host(r, v, sizeof v));
  for (int i = 0; i < 40; i++) ck_assert(v[i] == 1.5f);
  ct_release(r);
  ct_release(y);
  ct_release(a);
  ct__fusion_override = -1;
  ct_test_finish();
}
END_TEST

/* The strided kernels' division by multiplication (ct__fuse_magic): q = (r m) >> s is r / d for
 * every index r < 2^31, checked on every divisor below 4097, powers of two and their neighbours,
 * and large divisors, at the indices where a floor is closest to going wrong (k d - 1, k d)
 * and the largest ones, computed as the kernel does in 64-bit unsigned arithmetic. */
START_TEST(fuse_magic_divides_exactly) {
  int64_t ds[4096 + 3 * 31 + 4];
  int nd = 0;
  for (int64_t d = 1; d <= 4096; d++) ds[nd++] = d;
  for (int p = 12; p < 31; p++) {
    ds[nd++] = ((int64_t)1 << p) - 1;
    ds[nd++] = (int64_t)1 << p;
    ds[nd++] = ((int64_t)1 << p) + 1;
  }
  ds[nd++] = 1000003;
  ds[nd++] = 2147483647; /* 2^31 - 1 */
  ds[nd++] = 1073741823;
  ds[nd++] = 45 * 64;
  const uint64_t rmax = ((uint64_t)1 << 31) - 1;
  for (int i = 0; i < nd; i++) {
    int64_t m, sh;
    ct__fuse_magic(ds[i], &m, &sh);
    uint64_t d = (uint64_t)ds[i];
    uint64_t rs[] = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, rmax, rmax - 1, rmax - rmax % d, rmax - rmax % d - 1,
                     (rmax / d) * d - 1};
    for (size_t j = 0; j < sizeof rs / sizeof rs[0]; j++) {
      uint64_t r = rs[j];
      if (r > rmax) continue;
      uint64_t q = (r * (uint64_t)m) >> sh;
      ck_assert_msg(q == r / d, "d=%llu r=%llu: %llu, not %llu", (unsigned long long)d, (unsigned long long)r,
                    (unsigned long long)q, (unsigned long long)(r / d));
    }
    /* every multiple's neighbours for the small divisors */
    if (d <= 64)
      for (uint64_t k = 1; k * d <= rmax; k += 9973) {
        uint64_t r = k * d - 1;
        ck_assert_uint_eq((r * (uint64_t)m) >> sh, r / d);
      }
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("fusion-review");
  TCase *tc = tcase_create("review");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, sum_of_mask_is_exact);
  tcase_add_test(tc, fuse_magic_divides_exactly);
  tcase_add_test(tc, failed_realize_names_the_call);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
