/* Device layer: enumeration and order, specs, the default device, errors, shutdown.
 * argv[1] picks the environment the runner set up: "one" (a single PoCL device), "two"
 * (POCL_DEVICES="pthread pthread"; the two-device case skips, saying so, where the implementation
 * has one device, as rusticl's llvmpipe), "noplatform" (OCL_ICD_VENDORS at an empty folder). */
#include <ctype.h>
#include <pthread.h>

#include "ct_test.h"

START_TEST(test_status_table) {
  ck_assert_str_eq(ct_status_name(CT_OK), "CT_OK");
  ck_assert_str_eq(ct_status_name(CT_ERR_OUT_OF_MEMORY), "CT_ERR_OUT_OF_MEMORY");
  ck_assert_str_eq(ct_status_name(CT_ERR_DEVICE_NOT_FOUND), "CT_ERR_DEVICE_NOT_FOUND");
  ck_assert_str_eq(ct_status_name((ct_status)9999), "CT_ERR_UNKNOWN");
  ck_assert_str_eq(ct_status_description(CT_ERR_NO_PLATFORM), "no OpenCL platform is installed");
  ck_assert_str_eq(ct_status_description((ct_status)-5), "unknown status code");
  ck_assert_int_eq(CT_OK, 0);
}
END_TEST

static void *other_thread(void *arg) {
  (void)arg;
  return (void *)(ct_last_error()[0] == '\0' ? (void *)1 : NULL);
}

START_TEST(test_last_error_is_thread_local) {
  ck_assert_ct_status(ct_device_count(NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("count");
  pthread_t th;
  void *clean = NULL;
  ck_assert_int_eq(pthread_create(&th, NULL, other_thread, NULL), 0);
  pthread_join(th, &clean);
  ck_assert_ptr_nonnull(clean);
  ct_clear_error();
  ck_assert_str_eq(ct_last_error(), "");
}
END_TEST

START_TEST(test_enumeration_order) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  ck_assert_int_ge(n, 1);
  int prev_type = -1, per_type[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; i++) {
    ct_device *d;
    ck_assert_ct_ok(ct_device_get(&d, i));
    ck_assert_int_eq(ct_device_index(d), i);
    const ct_device_props *p = ct_device_properties(d);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_ge((int)p->type, prev_type);
    if ((int)p->type != prev_type) prev_type = (int)p->type;
    char want[32];
    snprintf(want, sizeof want, "%s:%d", ct_device_type_name(p->type), per_type[p->type]++);
    ck_assert_str_eq(ct_device_spec(d), want);
    ck_assert_uint_gt(p->compute_units, 0);
    ck_assert_uint_gt(p->global_mem_bytes, 0);
    ck_assert_uint_gt(p->max_alloc_bytes, 0);
    ck_assert_uint_ge(p->max_work_group_size, 1);
    ck_assert(strlen(p->name) > 0);
    ck_assert_int_eq(p->fp64, strstr(p->extensions, "cl_khr_fp64") != NULL);
    /* The same device through its canonical spec and through cl:P:D. */
    ct_device *again;
    ck_assert_ct_ok(ct_device_find(&again, want));
    ck_assert_ptr_eq(again, d);
    char cl[32];
    snprintf(cl, sizeof cl, "cl:%d:%d", p->platform_index, p->device_index);
    ck_assert_ct_ok(ct_device_find(&again, cl));
    ck_assert_ptr_eq(again, d);
  }
  ct_device *d;
  ck_assert_ct_status(ct_device_get(&d, n), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(d);
  ck_assert_ct_status(ct_device_get(&d, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_device_get(NULL, 0), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_valid_specs) {
  ct_device *first, *d;
  ck_assert_ct_ok(ct_device_get(&first, 0));
  /* name: takes a substring of the device's name in any case: its first word (PoCL's
   * "pthread-...", rusticl's "llvmpipe"), as written and upper-cased. */
  char name[40] = "name:", upper[40] = "NAME:";
  const char *dn = ct_device_properties(first)->name;
  size_t w = strcspn(dn, " -(");
  if (w > sizeof name - 6) w = sizeof name - 6;
  ck_assert_uint_gt(w, 0);
  memcpy(name + 5, dn, w);
  name[5 + w] = '\0';
  for (size_t i = 0; i <= w; i++) upper[5 + i] = (char)toupper((unsigned char)name[5 + i]);
  const char *same[] = {"auto", "AUTO", "cpu", "CPU", "cpu:0", "Cpu:0", "cl:0:0", name, upper};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    ck_assert_ct_ok(ct_device_find(&d, same[i]));
    ck_assert_msg(d == first, "spec %s gave %s", same[i], ct_device_spec(d));
  }
}
END_TEST

START_TEST(test_invalid_specs) {
  const char *bad[] = {"", "gpux", "cpu:", "cpu:-1", "cpu:1x", "cl", "cl:0", "cl:a:b", "cl:0:0:0",
                       "name:", "fpga", ":0", "gpu:99999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ct_device *d = (ct_device *)1;
    ct_status st = ct_device_find(&d, bad[i]);
    ck_assert_msg(st == CT_ERR_INVALID_ARGUMENT, "spec '%s' gave %s", bad[i], ct_status_name(st));
    ck_assert_ptr_null(d);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
    ck_assert_error_contains(quoted);
    ck_assert_error_contains("valid forms");
    ck_assert_error_contains("cl:P:D");
    /* Every message names the function, as every other message of the library does. */
    static const char head[] = "ct_device_find: invalid device spec '";
    ck_assert_msg(strncmp(ct_last_error(), head, strlen(head)) == 0, "message: %s", ct_last_error());
  }
  ct_device *d;
  ck_assert_ct_status(ct_device_find(&d, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_device_find(NULL, "cpu"), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* Too many digits is "out of range", not "must be a non-negative integer"; leading zeros do not
 * count. */
START_TEST(test_spec_index_range) {
  const char *range[] = {"gpu:99999999999", "cpu:1000000000", "cl:0:99999999999", "cl:12345678901:0"};
  for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
    ct_device *d = (ct_device *)1;
    ck_assert_ct_status(ct_device_find(&d, range[i]), CT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(d);
    ck_assert_error_contains("out of range");
    ck_assert_msg(strstr(ct_last_error(), "non-negative integer") == NULL, "message: %s", ct_last_error());
  }
  ct_device *d;
  ck_assert_ct_status(ct_device_find(&d, "cpu:x1"), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("non-negative integer");
  ck_assert_ct_status(ct_device_find(&d, "cl:0:-1"), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("non-negative integers");
  /* Largest accepted index: valid syntax, no such device. */
  ck_assert_ct_status(ct_device_find(&d, "cpu:999999999"), CT_ERR_DEVICE_NOT_FOUND);
  ck_assert_ct_ok(ct_device_find(&d, "cpu:0000000000000"));
  ck_assert_str_eq(ct_device_spec(d), "cpu:0");
}
END_TEST

/* Control bytes from $CLTENSOR_DEVICE never reach a message raw. */
START_TEST(test_spec_escaped) {
  const char *hostile[] = {"\x1b[31mgpu", "gpu\nct_device_default: all is well", "name:\x1b]0;pwned\x07", "gpu:\x7f"};
  for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
    setenv("CLTENSOR_DEVICE", hostile[i], 1);
    ct_device *d = (ct_device *)1;
    ct_status st = ct_device_default(&d);
    ck_assert_msg(st == CT_ERR_INVALID_ARGUMENT || st == CT_ERR_DEVICE_NOT_FOUND, "value %zu gave %s", i,
                  ct_status_name(st));
    ck_assert_ptr_null(d);
    const char *m = ct_last_error();
    static const char head[] = "ct_device_default: $CLTENSOR_DEVICE: ";
    ck_assert_msg(strncmp(m, head, strlen(head)) == 0, "message: %s", m);
    for (const char *p = m; *p; p++)
      ck_assert_msg((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f, "raw byte 0x%02x in: %s", (unsigned char)*p, m);
    ck_assert_error_contains("\\x");
    /* Through ct_device_find as well. */
    ck_assert_ct_status(ct_device_find(&d, hostile[i]), st);
    for (const char *p = ct_last_error(); *p; p++) ck_assert((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f);
  }
  unsetenv("CLTENSOR_DEVICE");
}
END_TEST

START_TEST(test_unmatched_specs) {
  const char *none[] = {"gpu", "gpu:0", "accelerator", "cpu:7", "cl:9:0", "cl:0:9", "name:no-such-device"};
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
    ct_device *d = (ct_device *)1;
    ct_status st = ct_device_find(&d, none[i]);
    ck_assert_msg(st == CT_ERR_DEVICE_NOT_FOUND, "spec '%s' gave %s", none[i], ct_status_name(st));
    ck_assert_ptr_null(d);
    ck_assert_error_contains(none[i]);
    ck_assert_error_contains("available:");
    ck_assert_error_contains("cpu:0");
  }
}
END_TEST

START_TEST(test_default_device) {
  ct_device *d, *first;
  unsetenv("CLTENSOR_DEVICE");
  ck_assert_ct_ok(ct_device_get(&first, 0));
  ck_assert_ct_ok(ct_device_default(&d));
  ck_assert_ptr_eq(d, first);
  setenv("CLTENSOR_DEVICE", "cl:0:0", 1);
  ck_assert_ct_ok(ct_device_default(&d));
  ck_assert_ptr_eq(d, first);
  setenv("CLTENSOR_DEVICE", "gpu:3", 1);
  ck_assert_ct_status(ct_device_default(&d), CT_ERR_DEVICE_NOT_FOUND);
  ck_assert_error_contains("CLTENSOR_DEVICE");
  ck_assert_error_contains("gpu:3");
  setenv("CLTENSOR_DEVICE", "warp-drive", 1);
  ck_assert_ct_status(ct_device_default(&d), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'warp-drive'");
  ck_assert_ptr_null(d);
  unsetenv("CLTENSOR_DEVICE");
}
END_TEST

START_TEST(test_open_and_shutdown) {
  ct_device *d;
  ck_assert_ct_ok(ct_device_default(&d));
  ck_assert_ct_ok(ct_device_open(d));
  ck_assert_ct_ok(ct_device_synchronize(d));
  ck_assert_ct_status(ct_device_open(NULL), CT_ERR_INVALID_ARGUMENT);
  ct_shutdown();
  ct_shutdown(); /* twice is fine */
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n)); /* enumerates anew */
  ck_assert_int_ge(n, 1);
  ck_assert_ct_ok(ct_device_default(&d));
  ck_assert_ct_ok(ct_device_open(d));
  ct_shutdown();
}
END_TEST

static void *open_concurrently(void *arg) {
  (void)arg;
  ct_device *d;
  if (ct_device_default(&d) != CT_OK || ct_device_open(d) != CT_OK) return NULL;
  return d;
}

START_TEST(test_concurrent_init) {
  pthread_t th[8];
  void *res[8];
  for (int i = 0; i < 8; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, open_concurrently, NULL), 0);
  for (int i = 0; i < 8; i++) pthread_join(th[i], &res[i]);
  for (int i = 0; i < 8; i++) {
    ck_assert_ptr_nonnull(res[i]);
    ck_assert_ptr_eq(res[i], res[0]);
  }
  ct_shutdown();
}
END_TEST

START_TEST(test_two_devices) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  /* POCL_DEVICES gives PoCL two; an implementation with one device (rusticl's llvmpipe) skips. */
  ct_device *first;
  ck_assert_ct_ok(ct_device_get(&first, 0));
  if (!ct_test_needs(n >= 2, "two devices' order and specs", "a second device", first)) return;
  ck_assert_int_eq(n, 2);
  ct_device *a, *b;
  ck_assert_ct_ok(ct_device_find(&a, "cpu:0"));
  ck_assert_ct_ok(ct_device_find(&b, "cpu:1"));
  ck_assert_ptr_ne(a, b);
  ck_assert_str_eq(ct_device_spec(b), "cpu:1");
  /* Equal devices tie-break by OpenCL index. */
  ck_assert_int_lt(ct_device_properties(a)->device_index, ct_device_properties(b)->device_index);
  ck_assert_ct_ok(ct_device_open(a));
  ck_assert_ct_ok(ct_device_open(b));
  ck_assert_ct_status(ct_device_find(&a, "cpu:2"), CT_ERR_DEVICE_NOT_FOUND);
  ck_assert_error_contains("cpu:1");
  ct_shutdown();
}
END_TEST

START_TEST(test_no_platform) {
  int n = 5;
  ck_assert_ct_status(ct_device_count(&n), CT_ERR_NO_PLATFORM);
  ck_assert_int_eq(n, 0);
  ck_assert_error_contains("pocl-opencl-icd");
  ck_assert_error_contains("/etc/OpenCL/vendors");
  ct_device *d = (ct_device *)1;
  ck_assert_ct_status(ct_device_default(&d), CT_ERR_NO_PLATFORM);
  ck_assert_ptr_null(d);
  ck_assert_ct_status(ct_device_find(&d, "cpu"), CT_ERR_NO_PLATFORM);
  ck_assert_ct_status(ct_device_get(&d, 0), CT_ERR_NO_PLATFORM);
  ct_shutdown();
}
END_TEST

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "one";
  Suite *s = suite_create("device");
  TCase *tc = tcase_create(mode);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_status_table);
  tcase_add_test(tc, test_last_error_is_thread_local);
  if (strcmp(mode, "noplatform") == 0) {
    tcase_add_test(tc, test_no_platform);
  } else {
    tcase_add_test(tc, test_enumeration_order);
    tcase_add_test(tc, test_valid_specs);
    tcase_add_test(tc, test_invalid_specs);
    tcase_add_test(tc, test_spec_index_range);
    tcase_add_test(tc, test_spec_escaped);
    tcase_add_test(tc, test_unmatched_specs);
    tcase_add_test(tc, test_default_device);
    tcase_add_test(tc, test_open_and_shutdown);
    tcase_add_test(tc, test_concurrent_init);
    if (strcmp(mode, "two") == 0) tcase_add_test(tc, test_two_devices);
  }
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
