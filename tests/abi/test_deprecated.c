/* The deprecated aliases (include/cltensor/deprecated.h) as an old program meets them, through
 * the shared library: each old name is called once and behaves as its new name. The two whose
 * structs gained a size field are called both ways: as a binary built before calls the exported
 * symbol (the old layout), and as a source written before compiles (the macro, new layout). */
#include <stdint.h>
#include <string.h>

#include "ct_test.h"

/* Calling them is the point here; our own build warns at every other use (-Werror). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

START_TEST(test_getter_setter_aliases) {
  ct_device *d = ct_test_device();
  ck_assert_ct_ok(ct_autocast_set(CT_BF16));
  ck_assert_int_eq(ct_autocast_get_dtype(), CT_BF16);
  ck_assert_int_eq(ct_autocast_get(), CT_BF16);
  ck_assert_ct_status(ct_autocast_set(CT_I32), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_autocast_set_dtype");
  ck_assert_ct_ok(ct_autocast_set(CT_F32));
  ck_assert_int_eq(ct_autocast_get(), CT_F32);

  float host[4] = {1, 2, 3, 4};
  int64_t n = 4;
  ct_tensor *t = NULL;
  ct_dataloader *dl = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, &n, host));
  ck_assert_ct_ok(ct_dataloader_new(&dl, &t, 1, 2, false, false, 0));
  ck_assert_ct_ok(ct_dataloader_set_epoch(dl, 3));
  ck_assert_int_eq(ct_dataloader_epoch(dl), 3);
  ck_assert_int_eq(ct_dataloader_epoch(NULL), ct_dataloader_get_epoch(NULL));
  ct_dataloader_free(dl);
  ct_release(t);

  /* The tuning query with its arguments in the old order: its checks are the new one's (a
   * real query would build CLBlast's kernels, which this suite need not pay for). */
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_status(ct_gemm_tuning_status(NULL, &src, &msg), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_gemm_tuning_get");
  ck_assert_ct_status(ct_gemm_tuning_status(d, NULL, &msg), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("source");
  ct_shutdown();
}
END_TEST

START_TEST(test_predicate_aliases) {
  for (int t = CT_BOOL; t <= CT_U64; t++) {
    ck_assert_int_eq(ct_dtype_is_float((ct_dtype)t), ct_dtype_is_floating_point((ct_dtype)t) ? 1 : 0);
  }
  ck_assert_int_eq(ct_dtype_is_float(CT_F16), 1);
  ck_assert_int_eq(ct_dist_mpi_available(), ct_dist_is_mpi_available() ? 1 : 0);
  ck_assert_ct_ok(ct_profile_start());
  ck_assert(ct_profile_enabled() && ct_profile_is_enabled());
  ct_profile_stop();
  ck_assert(!ct_profile_enabled() && !ct_profile_is_enabled());
  ck_assert(!ct_dist_work_done(NULL) && !ct_dist_work_is_done(NULL));
  ct_grad_scaler *s = NULL;
  ck_assert_ct_ok(ct_grad_scaler_new(&s, 1024, 2, 0.5, 2000));
  ck_assert_int_eq(ct_grad_scaler_step_skipped(s), ct_grad_scaler_is_step_skipped(s));
  ck_assert_int_eq(ct_grad_scaler_step_skipped(NULL), ct_grad_scaler_is_step_skipped(NULL));
  ct_grad_scaler_free(s);
}
END_TEST

START_TEST(test_destructor_aliases) {
  ct_device *d = ct_test_device();
  ct_pinned *p = NULL;
  ck_assert_ct_ok(ct_pinned_alloc(&p, d, 64));
  ct_pinned_release(p);
  ct_pinned_release(NULL);
  float host[2] = {5, 6}, res[2] = {0};
  int64_t n = 2;
  ct_tensor *t = NULL;
  ct_event *ev = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, &n, host));
  ck_assert_ct_ok(ct_to_host_async(&ev, t, res, sizeof res));
  ck_assert_ct_ok(ct_event_wait(ev));
  ct_event_release(ev);
  ct_event_release(NULL);
  ck_assert_float_eq(res[1], 6);
  ct_release(t);
  ct_shutdown();
}
END_TEST

START_TEST(test_memory_stats_aliases) {
  ct_device *d = ct_test_device();
  int64_t n = 1000;
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_zeros(&t, d, CT_F32, 1, &n));
  ct_memory_stats now = {.size = sizeof now};
  ck_assert_ct_ok(ct_device_get_memory_stats(&now, d));
  /* A binary built before: the exported symbol fills the old layout. */
  ct_memory_stats_v0 v0;
  memset(&v0, 0xab, sizeof v0);
  ck_assert_ct_ok((ct_memory_stats_get)(&v0, d));
  ck_assert_uint_eq(v0.allocated_bytes, now.allocated_bytes);
  ck_assert_uint_eq(v0.reserved_bytes, now.reserved_bytes);
  ck_assert_uint_eq(v0.peak_allocated_bytes, now.peak_allocated_bytes);
  ck_assert_uint_eq(v0.peak_reserved_bytes, now.peak_reserved_bytes);
  ck_assert_uint_eq(v0.alloc_count, now.alloc_count);
  ck_assert_uint_eq(v0.cache_hits, now.cache_hits);
  ck_assert_uint_eq(v0.cl_alloc_count, now.cl_alloc_count);
  ck_assert_uint_eq(v0.limit_bytes, now.limit_bytes);
  ck_assert_ct_status((ct_memory_stats_get)(NULL, d), CT_ERR_INVALID_ARGUMENT);
  /* A source written before never set the size: the macro does. */
  ct_memory_stats old;
  memset(&old, 0, sizeof old);
  ck_assert_ct_ok(ct_memory_stats_get(&old, d));
  ck_assert_uint_eq(old.size, sizeof old);
  ck_assert_uint_eq(old.allocated_bytes, now.allocated_bytes);
  ct_release(t);
  ct_shutdown();
}
END_TEST

START_TEST(test_profile_entries_aliases) {
  ck_assert_ct_ok(ct_profile_start()); /* before the device's queue exists, so it is timed */
  ct_device *d = ct_test_device();
  float host[2] = {1, 2}, res[2];
  int64_t n = 2;
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, &n, host));
  ck_assert_ct_ok(ct_to_host(t, res, sizeof res));
  ct_profile_entry now[8] = {{.size = sizeof now[0]}};
  size_t count = 0, old_count = 0;
  ck_assert_ct_ok(ct_profile_get_entries(now, 8, &count));
  ck_assert_uint_ge(count, 1);
  ck_assert_uint_le(count, 8);
  /* A binary built before: an array of the old layout. */
  ct_profile_entry_v0 v0[8];
  memset(v0, 0, sizeof v0);
  ck_assert_ct_ok((ct_profile_entries)(v0, 8, &old_count));
  ck_assert_uint_eq(old_count, count);
  for (size_t i = 0; i < count; i++) {
    ck_assert_ptr_eq(v0[i].device, now[i].device);
    ck_assert_str_eq(v0[i].op, now[i].op);
    ck_assert_uint_eq(v0[i].calls, now[i].calls);
  }
  ck_assert_ct_ok((ct_profile_entries)(NULL, 0, &old_count));
  ck_assert_uint_eq(old_count, count);
  ck_assert_ct_status((ct_profile_entries)(NULL, 1, &old_count), CT_ERR_INVALID_ARGUMENT);
  /* A source written before: the macro sets out[0].size. */
  ct_profile_entry old[8];
  memset(old, 0, sizeof old);
  ck_assert_ct_ok(ct_profile_entries(old, 8, &old_count));
  ck_assert_uint_eq(old_count, count);
  ck_assert_str_eq(old[0].op, now[0].op);
  ct_profile_stop();
  ct_release(t);
  ct_shutdown();
}
END_TEST

int main(void) {
  Suite *s = suite_create("abi-deprecated");
  TCase *tc = tcase_create("aliases");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_getter_setter_aliases);
  tcase_add_test(tc, test_predicate_aliases);
  tcase_add_test(tc, test_destructor_aliases);
  tcase_add_test(tc, test_memory_stats_aliases);
  tcase_add_test(tc, test_profile_entries_aliases);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
