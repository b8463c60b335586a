/* Shared helpers for the Check tests. Header-only so each test binary stays one file. */
#ifndef CT_TEST_H
#define CT_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cltensor/cltensor.h"

/* Every passing ck_assert records its location (check.h's _mark_point) so that a crash or a
 * timeout can name the last one: a message the forked child writes to a file and the parent
 * unpacks one at a time. A check per element repeats the same location millions of times:
 * linalg-matrix-host under ASan took 54 s with them, 5 s without (docs/RELIABILITY.md, issue
 * #29). A location is recorded only when it differs from the one recorded before on the same
 * thread, so the last location Check reports after a crash or a timeout is unchanged. */
static inline void ct__test_mark_point(const char *file, int line) {
  static _Thread_local const char *last_file;
  static _Thread_local int last_line;
  if (file == last_file && line == last_line) return;
  last_file = file;
  last_line = line;
  (_mark_point)(file, line);
}
#define _mark_point(file, line) ct__test_mark_point(file, line)

/* Asserts that a call returns CT_OK, printing ct_last_error() otherwise. */
#define ck_assert_ct_ok(expr)                                                                 \
  do {                                                                                        \
    ct_status st_ = (expr);                                                                   \
    ck_assert_msg(st_ == CT_OK, "%s returned %s: %s", #expr, ct_status_name(st_), ct_last_error()); \
  } while (0)

/* Asserts that a call returns a given status. */
#define ck_assert_ct_status(expr, want)                                                       \
  do {                                                                                        \
    ct_status st_ = (expr);                                                                   \
    ck_assert_msg(st_ == (want), "%s returned %s, expected %s: %s", #expr, ct_status_name(st_), \
                  ct_status_name(want), ct_last_error());                                     \
  } while (0)

/* Asserts that ct_last_error() contains a substring. */
#define ck_assert_error_contains(sub)                                                  \
  ck_assert_msg(strstr(ct_last_error(), (sub)) != NULL, "ct_last_error() = \"%s\" lacks \"%s\"", \
                ct_last_error(), (sub))

/* Asserts that a message holds no raw control byte or DEL (hostile values must reach it
 * escaped, as \xNN: core/env.h). */
#define ck_assert_plain_text(msg)                                                          \
  do {                                                                                     \
    const char *m_ = (msg);                                                                \
    for (const unsigned char *p_ = (const unsigned char *)m_; *p_; p_++)                   \
      ck_assert_msg(*p_ >= 0x20 && *p_ != 0x7f, "raw byte 0x%02x at offset %d of \"%s\"", *p_, \
                    (int)((const char *)p_ - m_), m_);                                     \
  } while (0)

/* Runs a suite with CK_TAP output configured by the environment; returns a process exit code
 * (EXIT_FAILURE on any failure, never a raw count). */
static inline int ct_test_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* A checked teardown (tcase_add_checked_fixture(tc, NULL, ct_test_finish)): waits for every
 * device's queue and releases the library's state in the test's child before it exits. A test
 * that ends right after enqueueing a kernel no other test built may otherwise exit while PoCL
 * 3.1 still compiles it in a worker thread, racing the process's C++ static destructors (LLVM's
 * pass registry): a segfault or "Failed to create kernel compiler pass" (docs/PORTABILITY.md). */
static inline void ct_test_finish(void) { ct_shutdown(); }

/* A test case of suite s whose children end with the checked teardown ct_test_finish(), with a
 * Check timeout of timeout_s seconds (CK_RUN_CASE=name runs it alone, e.g. under valgrind). */
static inline TCase *ct_test_case(Suite *s, const char *name, int timeout_s) {
  TCase *tc = tcase_create(name);
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, timeout_s);
  suite_add_tcase(s, tc);
  return tc;
}

/* The default device; fails the test when none. Call in the test body (the forked child). */
static inline ct_device *ct_test_device(void) {
  ct_device *d = NULL;
  ct_status st = ct_device_default(&d);
  ck_assert_msg(st == CT_OK, "no default device: %s", ct_last_error());
  return d;
}

/* True when d has cl_khr_fp64. Otherwise prints a TAP comment, "# skip: what: no cl_khr_fp64 on
 * <device>", and returns false: the part of a test that is about f64 itself (an f64 input keeps
 * its dtype, promotion to f64, a cast to f64) runs wherever f64 exists and says so where it is
 * skipped, never passing silently. Call in the test body (the forked child). */
static inline bool ct_test_fp64(ct_device *d, const char *what) {
  if (ct_device_properties(d)->fp64) return true;
  printf("# skip: %s: no cl_khr_fp64 on %s\n", what, ct_device_properties(d)->name);
  fflush(stdout);
  return false;
}

/* True when `have`. Otherwise prints a TAP comment, "# skip: what: needs need: <device> has
 * none", and returns false: a test of a behaviour only some implementations have (PoCL's native
 * kernels, a second device, a driver that reports failures the test injects) asks for it through
 * the library's own queries and says where it is skipped, never passing silently. */
static inline bool ct_test_needs(bool have, const char *what, const char *need, ct_device *d) {
  if (have) return true;
  printf("# skip: %s: needs %s: %s has none\n", what, need, ct_device_properties(d)->name);
  fflush(stdout);
  return false;
}

/* Devices 0 and 1 for a test of two devices (POCL_DEVICES="pthread pthread" on PoCL). False,
 * after a TAP skip comment ("needs a second device: <device> has none"), where the
 * implementation has one device (rusticl's llvmpipe). */
static inline bool ct_test_two_devices(ct_device **d0, ct_device **d1, const char *what) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  ck_assert_ct_ok(ct_device_get(d0, 0));
  if (!ct_test_needs(n >= 2, what, "a second device", *d0)) return false;
  ck_assert_ct_ok(ct_device_get(d1, 1));
  return true;
}

/* Why host memory figures mean nothing in this run (a sanitizer's allocator keeps freed memory
 * in quarantine and adds shadow memory; valgrind replaces malloc), or NULL when they do. Tests
 * then skip their heap and RSS bounds (leak, soak, the safetensors header's peak), and
 * LeakSanitizer or valgrind's leak check stands in for them. */
static inline const char *ct_test_host_memory_unmeasurable(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return "a sanitizer's allocator";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return "a sanitizer's allocator";
#endif
#endif
  const char *pre = getenv("LD_PRELOAD");
  if (pre && strstr(pre, "vgpreload")) return "valgrind";
  return NULL;
}

/* This process's resident high-water mark in KiB (ru_maxrss): growth over a step bounds what the
 * step held at once. Check forks each test, so the mark starts with the test. */
static inline long ct_test_maxrss_kib(void) {
  struct rusage ru;
  ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
  return ru.ru_maxrss;
}

#endif
