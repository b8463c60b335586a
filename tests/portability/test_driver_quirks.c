/* Driver reproducers (issue #27): each kernel below is the smallest form of a miscompilation or
 * limit found on an OpenCL implementation, run on the default device. The driver's form is
 * run and what it gives is said as a TAP diagnostic (it is the driver's bug, not ours: the test
 * does not fail on it); the form the library's kernels use instead must be right on every
 * device. docs/PORTABILITY.md has the table of implementations and versions.
 *
 *  - loop limit: llvmpipe (Mesa's gallivm) ends a work-item's loops after 65535 back edges in
 *    all. The library's detection (device/quirks.c) must agree with what the device does.
 *  - select(long8, long8, convert_long8(int8 mask)): rusticl 22.3 takes the mask as all false.
 *  - (long)x for an int x, then compared or converted with convert_float_rtz: rusticl 22.3
 *    gets both wrong; ct_sext32 (kernels/common.cl) is the workaround.
 *  - a buffer's CL_MEM_REFERENCE_COUNT read right after a blocking write returns: rusticl 22.3's
 *    queue thread still holds the finished command, and with it the buffer, for a moment (one
 *    more reference in 1 to 5 of 100 reads on a loaded 2-core machine). Tests that count references wait for the count to
 *    settle (tests/interop). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <time.h>

#include "ct_test.h"
#include "device/device.h"

/* Builds src on d and runs kernel "k"(global long *buf) over global x local items; buf holds
 * n longs, initialised from init (or i when init is NULL), and is read back into out. */
static void run_kernel(ct_device *d, const char *src, const long *init, long *out, size_t n, size_t global,
                       size_t local) {
  cl_context ctx;
  cl_command_queue q;
  cl_device_id id;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  ck_assert_ct_ok(ct_device_cl_queue(&q, d));
  ck_assert_ct_ok(ct_device_cl_device_id(&id, d));
  cl_int err;
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  err = clBuildProgram(p, 1, &id, "-cl-std=CL1.2", NULL, NULL);
  if (err != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(p, id, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    ck_abort_msg("build failed (%d): %s", err, log);
  }
  cl_kernel k = clCreateKernel(p, "k", &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  for (size_t i = 0; i < n; i++) out[i] = init ? init[i] : (long)i;
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(long), out, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ck_assert_int_eq(clSetKernelArg(k, 0, sizeof b, &b), CL_SUCCESS);
  ck_assert_int_eq(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL), CL_SUCCESS);
  ck_assert_int_eq(clEnqueueReadBuffer(q, b, CL_TRUE, 0, n * sizeof(long), out, 0, NULL, NULL), CL_SUCCESS);
  clReleaseMemObject(b);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

static void say(const char *what, bool driver_right) {
  printf("# %s: the driver's form is %s on this device\n", what, driver_right ? "right" : "WRONG");
  fflush(stdout);
}

START_TEST(test_loop_limit_detected) {
  ct_device *d = ct_test_device();
  /* buf[1] = 1 keeps the trip count unknown to the compiler. */
  static const char *src =
      "__kernel void k(__global long *o) {\n"
      "  long n = o[1] * 100000, c = 0;\n"
      "  for (long j = 0; j < n; j++) c++;\n"
      "  o[0] = c;\n"
      "}\n";
  long out[2];
  run_kernel(d, src, NULL, out, 2, 1, 1);
  printf("# %s: a loop of 100000 iterations ran %ld; the library assumes a limit of %u\n",
         ct_device_properties(d)->name, out[0], d->loop_limit);
  fflush(stdout);
  ck_assert_int_eq(out[0], d->loop_limit ? (long)d->loop_limit : 100000);
}
END_TEST

START_TEST(test_select_long8_mask) {
  ct_device *d = ct_test_device();
  /* Lanes 2, 4, 6 of x beat v: both forms must pick 100 + lane there, 18 + lane elsewhere. */
  static const char *src =
      "__kernel void k(__global long *o) {\n"
      "  float8 x = convert_float8(vload8(0, o));\n"
      "  float8 v = (float8)(0, 3, 0, 5, 0, 7, 0, 9) + (float)o[1] - 1.0f;\n"
      "  long8 bi = vload8(1, o) + 10, ni = vload8(0, o) + 100;\n"
      "  barrier(CLK_GLOBAL_MEM_FENCE);\n"
      "  int8 m = x > v;\n"
      "  vstore8(select(bi, ni, convert_long8(m)), 0, o);\n"
      "  vstore8(select(bi, ni, convert_long8(m) != 0), 1, o);\n"
      "}\n";
  long out[16];
  run_kernel(d, src, NULL, out, 16, 1, 1);
  static const long want[8] = {18, 19, 102, 21, 104, 23, 106, 25};
  bool driver = memcmp(out, want, sizeof want) == 0;
  say("select(long8, long8, convert_long8(int8 mask))", driver);
  for (int l = 0; l < 8; l++) ck_assert_int_eq(out[8 + l], want[l]);
}
END_TEST

START_TEST(test_sign_extension) {
  ct_device *d = ct_test_device();
  /* buf[4..5] hold the ints 4, -3, 6, 7. Row 0: (long)x; row 1: ct_sext32(x). Each work-item
   * writes (x < 0) * 100 + (x >= 600) * 10 + (convert_float_rtz(x) < 0). */
  static const char *src =
      "inline long ct_sext32(int x) { return (long)(uint)x - (x < 0 ? 0x100000000l : 0l); }\n"
      "__kernel void k(__global long *o) {\n"
      "  size_t i = get_global_id(0);\n"
      "  int x = ((__global const int *)(o + 4))[i];\n"
      "  long sel = 600 + (long)i * o[8];\n"
      "  long a = x, b = ct_sext32(x);\n"
      "  long ra = (a < 0) * 100 + (a >= sel) * 10 + (convert_float_rtz(a) < 0.0f);\n"
      "  long rb = (b < 0) * 100 + (b >= sel) * 10 + (convert_float_rtz(b) < 0.0f);\n"
      "  barrier(CLK_GLOBAL_MEM_FENCE);\n"
      "  o[i] = ra; o[4 + i] = rb;\n"
      "}\n";
  long init[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  int32_t *iv = (int32_t *)&init[4];
  iv[0] = 4, iv[1] = -3, iv[2] = 6, iv[3] = 7;
  long out[9];
  run_kernel(d, src, init, out, 9, 4, 4);
  static const long want[4] = {0, 101, 0, 0};
  bool driver = memcmp(out, want, sizeof want) == 0;
  say("(long)x of an int x, compared and converted with convert_float_rtz", driver);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(out[4 + i], want[i]);
}
END_TEST

static cl_uint mem_refs(cl_mem m) {
  cl_uint n = 0;
  ck_assert_int_eq(clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL), CL_SUCCESS);
  return n;
}

START_TEST(test_deferred_buffer_release) {
  ct_device *d = ct_test_device();
  cl_context ctx;
  cl_command_queue q;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  ck_assert_ct_ok(ct_device_cl_queue(&q, d));
  int host[32] = {0};
  cl_int err;
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  int extra = 0, tries = 400;
  for (int i = 0; i < tries; i++) {
    ck_assert_int_eq(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL), CL_SUCCESS);
    extra += mem_refs(b) != 1;
  }
  /* Not a bug by the specification (reference counts are for debugging, and nothing says when
   * an implementation lets go of a finished command), so this says what it saw, not right/wrong. */
  printf("# a buffer's reference count right after a blocking write: %d of %d reads saw the "
         "driver's own reference (%s release)\n", extra, tries, extra ? "deferred" : "immediate");
  fflush(stdout);
  /* What the tests rely on: the driver's reference goes, soon. */
  cl_uint n = mem_refs(b);
  for (int i = 0; i < 2000 && n != 1; i++) {
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    n = mem_refs(b);
  }
  ck_assert_uint_eq(n, 1);
  clReleaseMemObject(b);
}
END_TEST

/* The style follows the implementation (PoCL CPU: chunked, else lanes) unless
 * $CLTENSOR_KERNEL_STYLE says otherwise; meson runs this binary with and without it. */
START_TEST(test_kernel_style) {
  ct_device *d = ct_test_device();
  const char *env = getenv("CLTENSOR_KERNEL_STYLE");
  const ct_device_props *p = ct_device_properties(d);
  bool pocl_cpu = strstr(p->platform_name, "Portable Computing Language") && p->type == CT_DEVICE_CPU;
  const char *want = env && *env && strcmp(env, "auto") != 0 ? env : pocl_cpu ? "chunked" : "lanes";
  ck_assert_str_eq(ct_device_kernel_style(d), want);
  ck_assert_ptr_nonnull(ct_device_kernel_style_reason(d));
  ck_assert_ptr_null(ct_device_kernel_style(NULL));
  printf("# %s: kernel style %s (%s)\n", p->name, ct_device_kernel_style(d), ct_device_kernel_style_reason(d));
  fflush(stdout);
}
END_TEST

/* An invalid value is an error naming the variable, from the first call that uses a device. */
START_TEST(test_kernel_style_invalid) {
  setenv("CLTENSOR_KERNEL_STYLE", "gpu\x1b[31m", 1);
  ct_device *d = NULL;
  ck_assert_ct_ok(ct_device_get(&d, 0));
  ck_assert_ct_status(ct_device_open(d), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("CLTENSOR_KERNEL_STYLE");
  ck_assert_error_contains("auto, chunked or lanes");
  ck_assert_plain_text(ct_last_error());
  ct_tensor *t = NULL;
  int64_t shape[1] = {4};
  ck_assert_ct_status(ct_zeros(&t, d, CT_F32, 1, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("driver-quirks");
  TCase *tc = tcase_create("quirks");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_add_test(tc, test_loop_limit_detected);
  tcase_add_test(tc, test_select_long8_mask);
  tcase_add_test(tc, test_sign_extension);
  tcase_add_test(tc, test_deferred_buffer_release);
  tcase_add_test(tc, test_kernel_style);
  if (!getenv("CLTENSOR_KERNEL_STYLE")) tcase_add_test(tc, test_kernel_style_invalid);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
