/* Review of the fusion graph (issue #16, src/elementwise/lazy.c, fuse_gen.c): one regression
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

int main(void) {
  Suite *s = suite_create("fusion-review");
  TCase *tc = tcase_create("review");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, sum_of_mask_is_exact);
  tcase_add_test(tc, failed_realize_names_the_call);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
