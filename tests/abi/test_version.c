/* A program as a user writes it: only the installed headers, linked with the shared
 * libcltensor (cltensor_dep, not the internal static library), so it sees the exported API
 * and nothing else. It checks the runtime version query against the header macros, and that a
 * small computation works through the shared library. */
#include <stdio.h>

#include "ct_test.h"

START_TEST(test_version_query) {
  /* The library in this build is the one the headers describe. */
  ck_assert_str_eq(ct_version(), CT_VERSION_STRING);
  ck_assert_int_eq(ct_version_number(), CT_VERSION_NUMBER);
  /* The number is major * 10000 + minor * 100 + patch of the string. */
  int major = -1, minor = -1, patch = -1;
  char tail = 0;
  ck_assert_int_eq(sscanf(ct_version(), "%d.%d.%d%c", &major, &minor, &patch, &tail), 3);
  ck_assert_int_eq(major, CT_VERSION_MAJOR);
  ck_assert_int_eq(minor, CT_VERSION_MINOR);
  ck_assert_int_eq(patch, CT_VERSION_PATCH);
  ck_assert_int_eq(ct_version_number(), major * 10000 + minor * 100 + patch);
  ck_assert_ptr_eq(ct_version(), ct_version()); /* a static string */
}
END_TEST

START_TEST(test_compute_through_shared_library) {
  ct_device *d = ct_test_device();
  float host[4] = {1, 2, 3, 4}, res[4] = {0};
  int64_t shape[2] = {2, 2};
  ct_tensor *a = NULL, *b = NULL, *c = NULL;
  ck_assert_ct_ok(ct_from_host(&a, d, CT_F32, 2, shape, host));
  ck_assert_ct_ok(ct_transpose(&b, a, 0, 1));
  ck_assert_ct_ok(ct_add(&c, a, b));
  ck_assert_ct_ok(ct_to_host(c, res, sizeof res));
  const float want[4] = {2, 5, 5, 8};
  for (int i = 0; i < 4; i++) ck_assert_float_eq(res[i], want[i]);
  ct_release(c);
  ct_release(b);
  ct_release(a);
  ct_shutdown();
}
END_TEST

int main(void) {
  Suite *s = suite_create("abi");
  TCase *tc = tcase_create("abi");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_version_query);
  tcase_add_test(tc, test_compute_through_shared_library);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
