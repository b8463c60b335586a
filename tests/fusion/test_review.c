/* Review of the fusion graph (issue #16, src/elementwise/lazy.c, fuse_gen.c): one regression
 * test per bug found. Each compares the fused result with the exact value (or with the same
 * calls run eagerly, ct__fusion_override = 0). Few distinct programs: f32 inputs, small shapes
 * except where the bug needs a size. */
#include <check.h>
#include <stdint.h>
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

int main(void) {
  Suite *s = suite_create("fusion-review");
  TCase *tc = tcase_create("review");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, sum_of_mask_is_exact);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
