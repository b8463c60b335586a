/* Errors only the realize can see (issue #16): a fused kernel that fails to build, and out of
 * memory for a temporary, are returned by the call that triggered the realize, naming it and
 * the recorded calls of the failing kernel; nothing is enqueued, every node stays pending, and
 * a retry (after the cause is gone) gives the right values. An invalid $CLTENSOR_FUSION is
 * refused by each call. A reduction or softmax whose input's realize fails names itself, not
 * its kernel. */
#include "device/device.h"
#include "fz_util.h"

#define N 1000

/* The build of the realize's only kernel fails: the trigger returns CT_ERR_KERNEL_BUILD naming
 * itself and the deferred calls. */
START_TEST(build_failure_at_realize) {
  ct_device *d = ct_test_device();
  ct_tensor *x = fz_ramp(d, N, -4, 0.008f);
  float *want = fz_chain_eager(d, x);
  ct_tensor *z = fz_chain(x);
  struct ct__fusion_stats s0 = fz_stats();
  ck_assert_uint_eq(s0.pending, 4);
  atomic_store(&ct__fusion_fail_builds, 1);
  float h[N];
  ck_assert_ct_status(ct_to_host(z, h, sizeof h), CT_ERR_KERNEL_BUILD);
  ck_assert_error_contains("ct_to_host: realizing deferred elementwise work failed in the fused kernel of "
                           "ct_mul_scalar (call #");
  ck_assert_error_contains("ct_add_scalar (call #");
  ck_assert_error_contains("ct_tanh (call #");
  ck_assert_error_contains(", ct_mul (call #");
  ck_assert_error_contains("[1000] f32");
  ck_assert_error_contains("injected by a test");
  struct ct__fusion_stats s1 = fz_stats();
  ck_assert_uint_eq(s1.pending, 4);
  ck_assert_uint_eq(s1.kernels, s0.kernels);
  ck_assert_uint_eq(s1.launches, s0.launches);
  ck_assert_uint_eq(s1.realizes, s0.realizes);
  /* The failure is gone: the next realize runs everything. */
  ck_assert_ct_ok(ct_to_host(z, h, sizeof h));
  ck_assert_uint_eq(fz_pending(), 0);
  fz_assert_bits(h, want, sizeof h, CT_F32, "after a failed build");
  free(want);
  ct_release(z);
  ct_release(x);
}
END_TEST

/* Two kernels; the first is in the table of built kernels, the second fails to build: neither
 * is enqueued (all builds come first), so nothing is half-written.
 * FAILS UNTIL THE BUG test_graph.c's same_calls_reuse_their_kernel shows IS FIXED in src/fusion/:
 * the first kernel, recorded again, is new source text and its build is the one that fails. */
START_TEST(build_failure_second_kernel) {
  ct_device *d = ct_test_device();
  int64_t s2[2] = {2, N};
  ct_tensor *x = fz_ramp(d, N, -4, 0.008f), *y = NULL;
  ck_assert_ct_ok(ct_full(&y, d, CT_F32, 2, s2, 0.5));
  float *want = fz_chain_eager(d, x); /* builds nothing fused; fz_chain below builds kernel 1 */
  ct_tensor *z = fz_chain(x), *c = NULL;
  ck_assert_ct_ok(ct_device_synchronize(d));
  ct_release(z);
  z = fz_chain(x);                  /* kernel 1: [N], built already */
  ck_assert_ct_ok(ct_add(&c, z, y)); /* kernel 2: [2, N], new */
  struct ct__fusion_stats s0 = fz_stats();
  atomic_store(&ct__fusion_fail_builds, 1);
  ck_assert_ct_status(ct_device_synchronize(d), CT_ERR_KERNEL_BUILD);
  ck_assert_error_contains("ct_device_synchronize: realizing deferred elementwise work failed in the fused kernel of "
                           "ct_add (call #");
  ck_assert_error_contains("[2, 1000] f32");
  struct ct__fusion_stats s1 = fz_stats();
  ck_assert_uint_eq(s1.pending, 5);
  ck_assert_uint_eq(s1.builds, s0.builds); /* the first came from the table, the second failed */
  ck_assert_uint_eq(s1.kernels, s0.kernels);
  ck_assert_uint_eq(s1.launches, s0.launches);
  float hc[2 * N], hz[N];
  ck_assert_ct_ok(ct_to_host(c, hc, sizeof hc));
  ck_assert_ct_ok(ct_to_host(z, hz, sizeof hz));
  fz_assert_bits(hz, want, sizeof hz, CT_F32, "kernel 1 after a retry");
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < N; i++) ck_assert_float_eq(hc[r * N + i], want[i] + 0.5f);
  free(want);
  ct_release(c);
  ct_release(z);
  ct_release(y);
  ct_release(x);
}
END_TEST

/* The 128th recorded call realizes the graph; when that fails, the call itself fails (its
 * result, released, is dropped) and a later realize still gives every value. */
START_TEST(build_failure_at_node_bound) {
  ct_device *d = ct_test_device();
  fz_mode(d, 1);
  ct_tensor *x = fz_ramp(d, 64, 0, 1), *y = ct_retain(x);
  for (int i = 1; i <= 127; i++) {
    ct_tensor *t = NULL;
    ck_assert_ct_ok(ct_add_scalar(&t, y, 1));
    ct_release(y);
    y = t;
  }
  ck_assert_uint_eq(fz_pending(), 127);
  atomic_store(&ct__fusion_fail_builds, 1);
  ct_tensor *t = (ct_tensor *)1;
  ck_assert_ct_status(ct_mul_scalar(&t, y, 2), CT_ERR_KERNEL_BUILD);
  ck_assert_ptr_null(t);
  ck_assert_error_contains("ct_mul_scalar: realizing deferred elementwise work failed in the fused kernel of "
                           "ct_add_scalar (call #1,");
  float h[64];
  ck_assert_ct_ok(ct_to_host(y, h, sizeof h));
  ck_assert_uint_eq(fz_pending(), 0);
  for (int i = 0; i < 64; i++) ck_assert_float_eq(h[i], (float)i + 127);
  ct_release(y);
  ct_release(x);
}
END_TEST

/* A value released before the realize that crosses kernels needs a temporary: that allocation
 * fails under $CLTENSOR_MEMORY_LIMIT. Sizes: x f32 [2^20] (4 MiB), y f32 [2, 2^20] (8 MiB),
 * a = x * 2 (4 MiB, released), b = a + y (8 MiB); then a filler leaves between 1 and 3 MiB of
 * the 64 MiB limit free, so only a's 4 MiB temporary can't fit. */
START_TEST(out_of_memory_at_realize) {
  setenv("CLTENSOR_MEMORY_LIMIT", "64MiB", 1);
  ct_device *d = ct_test_device();
  fz_mode(d, 1);
  const int64_t n = 1 << 20, s2[2] = {2, 1 << 20};
  const uint64_t MiB = 1 << 20, temp = 4 * MiB;
  ct_tensor *x = NULL, *y = NULL, *a = NULL, *b = NULL, *filler = NULL;
  ck_assert_ct_ok(ct_full(&x, d, CT_F32, 1, &n, 1.5));
  ck_assert_ct_ok(ct_full(&y, d, CT_F32, 2, s2, 0.25));
  ck_assert_ct_ok(ct_mul_scalar(&a, x, 2));
  ck_assert_ct_ok(ct_add(&b, a, y));
  ct_release(a);
  ck_assert_uint_eq(fz_pending(), 2);
  ck_assert_ct_ok(ct_empty_cache(d)); /* a's block goes back to OpenCL */
  ck_assert_uint_eq(fz_pending(), 2);
  ct_memory_stats ms = {.size = sizeof ms};
  ck_assert_ct_ok(ct_device_get_memory_stats(&ms, d));
  ck_assert_uint_eq(ms.limit_bytes, 64 * MiB);
  ck_assert_msg(ms.reserved_bytes + 2 * MiB < ms.limit_bytes, "reserved %" PRIu64 " bytes already",
                ms.reserved_bytes);
  int64_t fill = (int64_t)(ms.limit_bytes - ms.reserved_bytes - 2 * MiB);
  ck_assert_ct_ok(ct_empty(&filler, d, CT_U8, 1, &fill));
  ck_assert_ct_ok(ct_device_get_memory_stats(&ms, d));
  uint64_t free_bytes = ms.limit_bytes - ms.reserved_bytes;
  ck_assert_msg(free_bytes >= MiB && free_bytes < temp - MiB,
                "the filler should leave 1-3 MiB of the limit: %" PRIu64 " bytes free", free_bytes);
  struct ct__fusion_stats s0 = fz_stats();
  float *h = malloc(2 * (size_t)n * sizeof *h);
  ck_assert_ptr_nonnull(h);
  ck_assert_ct_status(ct_to_host(b, h, 2 * (size_t)n * sizeof *h), CT_ERR_OUT_OF_MEMORY);
  ck_assert_error_contains("ct_to_host: realizing deferred elementwise work failed in the fused kernel of "
                           "ct_mul_scalar (call #1, [1048576] f32)");
  ck_assert_error_contains("CLTENSOR_MEMORY_LIMIT");
  struct ct__fusion_stats s1 = fz_stats();
  ck_assert_uint_eq(s1.pending, 2);
  ck_assert_uint_eq(s1.kernels, s0.kernels);
  ck_assert_uint_eq(s1.temps, s0.temps);
  /* Memory freed: the retry allocates the temporary and runs both kernels. */
  ct_release(filler);
  ck_assert_ct_ok(ct_to_host(b, h, 2 * (size_t)n * sizeof *h));
  struct ct__fusion_stats s2s = fz_stats();
  ck_assert_uint_eq(s2s.pending, 0);
  ck_assert_uint_eq(s2s.temps, s0.temps + 1);
  ck_assert_uint_eq(s2s.kernels, s0.kernels + 2);
  for (int64_t i = 0; i < 2 * n; i++)
    if (h[i] != 3.25f) ck_abort_msg("b[%" PRId64 "] = %g, expected 3.25", i, h[i]);
  free(h);
  ct_release(b);
  ct_release(y);
  ct_release(x);
}
END_TEST

/* $CLTENSOR_FUSION must be a boolean: anything else is refused by each recording call. */
START_TEST(invalid_env_fusion_refused) {
  setenv("CLTENSOR_FUSION", "sometimes\x01", 1);
  ct_device *d = ct_test_device();
  ct_tensor *x = fz_ramp(d, 8, 0, 1), *r = (ct_tensor *)1;
  for (int i = 0; i < 2; i++) {
    ck_assert_ct_status(ct_add(&r, x, x), CT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(r);
    ck_assert_error_contains("CLTENSOR_FUSION");
    ck_assert_error_contains("sometimes\\x01");
    ck_assert_plain_text(ct_last_error());
    r = (ct_tensor *)1;
    ck_assert_ct_status(ct_exp(&r, x), CT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(r);
    ck_assert_error_contains("ct_exp");
  }
  ck_assert_uint_eq(fz_pending(), 0);
  ct_release(x);
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
}
END_TEST

int main(void) {
  Suite *s = suite_create("fusion-errors");
  TCase *tc = tcase_create("errors");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, build_failure_at_realize);
  tcase_add_test(tc, build_failure_second_kernel);
  tcase_add_test(tc, build_failure_at_node_bound);
  tcase_add_test(tc, out_of_memory_at_realize);
  tcase_add_test(tc, invalid_env_fusion_refused);
  tcase_add_test(tc, failed_realize_names_the_call);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
