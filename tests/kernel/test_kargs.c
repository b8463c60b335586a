/* The typed kernel argument builder (src/kernel/kargs.h): arguments set in order by name, one
 * status (CT_ERR_OPENCL) for every failure, the failing argument's index and name in the
 * message, and the count checked against CL_KERNEL_NUM_ARGS. */
#include "ct_test.h"
#include "core/error.h"
#include "device/device.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "tensor/tensor.h"

static const char *SRC =
    "__kernel void axpb(__global float *x, float a, long8 b, int n) {\n"
    "  int i = get_global_id(0);\n"
    "  if (i < n) x[i] = x[i] * a + (float)(b.s0 + b.s7);\n"
    "}\n";

/* The kernel name of the source text src (no disk cache: each test builds its own). */
static ct__kernel *get_src(ct_device *d, const char *src, const char *name) {
  setenv("CLTENSOR_CACHE", "0", 1);
  ct__kernel *k = NULL;
  ck_assert_ct_ok(ct__kernel_get_source(&k, d, src, name, NULL));
  return k;
}

static ct__kernel *get_axpb(ct_device *d) { return get_src(d, SRC, "axpb"); }

START_TEST(test_arguments_in_order_run) {
  ct_device *d = ct_test_device();
  ct__kernel *k = get_axpb(d);
  ck_assert_uint_eq(ct__kernel_num_args(k), 4);
  enum { N = 16 };
  float host[N];
  for (int i = 0; i < N; i++) host[i] = (float)i;
  cl_int err;
  cl_mem buf = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host,
                              &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  const int64_t b[2] = {5, 100};   /* b.s0 = 5; b.s1.. = fill 7: b.s7 = 7 */
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  ct__karg_mem(&a, "x", buf);
  ct__karg_float(&a, "a", 2.0f);
  ct__karg_long8(&a, "b", 1, b, 7);
  ct__karg_int(&a, "n", N);
  ct_status st = ct__kargs_end(&a, "test");
  size_t global = N, local;
  ct__launch_dims(k, 1, &global, &local);
  if (st == CT_OK) st = ct__kernel_launch(k, d, 1, &global, &local);
  ct__kernel_unlock(k);
  ck_assert_msg(st == CT_OK, "%s", ct_last_error());
  ck_assert_int_eq(clEnqueueReadBuffer(ct__device_queue(d), buf, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL),
                   CL_SUCCESS);
  clReleaseMemObject(buf);
  for (int i = 0; i < N; i++) ck_assert_float_eq(host[i], (float)i * 2.0f + 12.0f);
  ct_shutdown();
}
END_TEST

/* Starts an argument list for axpb on the default device; the kernel stays locked until
 * end_fails(). */
static ct__kernel *begin(struct ct__kargs *a) {
  ct__kernel *k = get_axpb(ct_test_device());
  ct__kargs_begin(a, k, ct__kernel_lock(k));
  return k;
}

/* Ends the list, which must fail as CT_ERR_OPENCL (the message stays for the checks). */
static void end_fails(struct ct__kargs *a, ct__kernel *k) {
  ck_assert_ct_status(ct__kargs_end(a, "ct_test_fn"), CT_ERR_OPENCL);
  ct__kernel_unlock(k);
}

/* A wrong size fails at that argument: its index and name are reported, later ones are not
 * set, and the status is CT_ERR_OPENCL as for every OpenCL failure. */
START_TEST(test_failing_argument_is_named) {
  struct ct__kargs a;
  ct__kernel *k = begin(&a);
  ct__karg_mem(&a, "x", NULL);
  ct__karg_long(&a, "a", 2); /* a float parameter given 8 bytes */
  ct__karg_long8(&a, "b", 0, NULL, 0);
  ct__karg_int(&a, "n", 1);
  end_fails(&a, k);
  ck_assert_error_contains("ct_test_fn: kernel axpb: setting argument 1 (a) failed");
  ck_assert_error_contains("CL_INVALID_ARG_SIZE");
  ct_shutdown();
}
END_TEST

START_TEST(test_too_few_arguments) {
  struct ct__kargs a;
  ct__kernel *k = begin(&a);
  ct__karg_mem(&a, "x", NULL);
  ct__karg_float(&a, "a", 1.0f);
  end_fails(&a, k);
  ck_assert_error_contains("ct_test_fn: kernel axpb takes 4 arguments but 2 were set");
  ck_assert_error_contains("CL_INVALID_KERNEL_ARGS");
  ct_shutdown();
}
END_TEST

START_TEST(test_too_many_arguments) {
  struct ct__kargs a;
  ct__kernel *k = begin(&a);
  ct__karg_mem(&a, "x", NULL);
  ct__karg_float(&a, "a", 1.0f);
  ct__karg_long8(&a, "b", 0, NULL, 0);
  ct__karg_int(&a, "n", 1);
  ct__karg_int(&a, "extra", 1);
  end_fails(&a, k);
  ck_assert_error_contains("setting argument 4 (extra) failed");
  ct_shutdown();
}
END_TEST

static const char *FILL_SRC =
    "__kernel void fill_at(__global float *x, long x_off, float v, int n) {\n"
    "  int i = get_global_id(0);\n"
    "  if (i < n) x[x_off + i] = v;\n"
    "}\n";

/* A tensor's two arguments (buffer, element offset of its element 0) through
 * ct__karg_tensor(): a view's writes land at its offset. */
START_TEST(test_tensor_arguments_run) {
  ct_device *d = ct_test_device();
  ct__kernel *k = get_src(d, FILL_SRC, "fill_at");
  enum { N = 8 };
  float host[N];
  for (int i = 0; i < N; i++) host[i] = (float)i;
  ct_tensor *t = NULL, *v = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, (const int64_t[]){N}, host));
  ck_assert_ct_ok(ct__tensor_view(&v, t, 1, (const int64_t[]){N - 3}, (const int64_t[]){1}, 3));
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "x", v, 1); /* shifted one element further: elements 4.. of t */
  ct__karg_float(&a, "v", -1.0f);
  ct__karg_int(&a, "n", N - 4);
  ct_status st = ct__kargs_end(&a, "test");
  size_t global = N - 4, local;
  ct__launch_dims(k, 1, &global, &local);
  if (st == CT_OK) st = ct__kernel_launch(k, d, 1, &global, &local);
  ct__kernel_unlock(k);
  ck_assert_msg(st == CT_OK, "%s", ct_last_error());
  ck_assert_ct_ok(ct_to_host(t, host, sizeof host));
  for (int i = 0; i < N; i++) ck_assert_float_eq(host[i], i < 4 ? (float)i : -1.0f);

  /* NULL: a NULL buffer and offset 0, both accepted. */
  a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "none", NULL, 0);
  ck_assert_uint_eq(a.next, 2);
  ck_assert_int_eq(a.err, CL_SUCCESS);
  ct__kernel_unlock(k);

  /* A byte offset that is not a whole number of elements (interop refuses such views; forged
   * here) fails the builder at the offset, naming the tensor. */
  v->storage->offset += 2;
  a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "x", v, 0);
  ct__karg_float(&a, "v", 0.0f);
  ct__karg_int(&a, "n", 1);
  ck_assert_ct_status(ct__kargs_end(&a, "ct_test_fn"), CT_ERR_OPENCL);
  ct__kernel_unlock(k);
  v->storage->offset -= 2;
  ck_assert_error_contains("ct_test_fn: kernel fill_at: setting argument 1 (x) failed");
  ck_assert_error_contains("CL_INVALID_VALUE");
  ct_release(v);
  ct_release(t);
  ct_shutdown();
}
END_TEST

/* ct__launch1(): ends the list, launches n items (ct__launch_dims()'s groups, or a fixed group
 * size) and unlocks k, also when the list is wrong or n is 0 (a later lock would hang). */
START_TEST(test_launch1) {
  ct_device *d = ct_test_device();
  ct__kernel *k = get_src(d, FILL_SRC, "fill_at");
  enum { N = 8 };
  float host[N] = {0};
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, (const int64_t[]){N}, host));
  const size_t groups[3] = {0, 64, 0};
  const int64_t ns[3] = {5, 3, 0};
  for (int i = 0; i < 3; i++) {
    struct ct__kargs a = ct__kargs_lock(k);
    ct__karg_tensor(&a, "x", t, 0);
    ct__karg_float(&a, "v", (float)-(i + 1));
    ct__karg_int(&a, "n", (cl_int)ns[i]);
    ck_assert_ct_ok(ct__launch1(k, &a, d, ns[i], groups[i], "ct_test_fn"));
  }
  ck_assert_ct_ok(ct_to_host(t, host, sizeof host));
  for (int i = 0; i < N; i++) ck_assert_float_eq(host[i], i < 3 ? -2.0f : i < 5 ? -1.0f : 0.0f);
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "x", t, 0);
  ck_assert_ct_status(ct__launch1(k, &a, d, 4, 0, "ct_test_fn"), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_test_fn: kernel fill_at takes 4 arguments but 2 were set");
  a = ct__kargs_lock(k); /* unlocked by the failed launch */
  ct__kernel_unlock(k);
  ct_release(t);
  ct_shutdown();
}
END_TEST

/* ct__kernel_for(): a failed lookup's message names the op. */
START_TEST(test_kernel_for_names_fn) {
  ct_device *d = ct_test_device();
  ct__kernel *k = NULL;
  ck_assert_int_ne(ct__kernel_for(&k, d, "no_such_file.cl", "nope", CT_F32, NULL, "ct_test_fn"), CT_OK);
  ck_assert_error_contains(" (in ct_test_fn)");
  ck_assert_int_ne(ct__kernel_for(&k, d, "no_such_file.cl", "nope", CT__NO_DTYPE, "-DX=1", "ct_test_fn"), CT_OK);
  ck_assert_error_contains(" (in ct_test_fn)");
  ct_shutdown();
}
END_TEST

static const char *GEOM_SRC =
    "__kernel void geom(__global long *out, int ndim, long8 shape, long8 s0, long8 s1) {\n"
    "  out[0] = ndim; out[1] = shape.s0; out[2] = shape.s7; out[3] = s0.s1; out[4] = s0.s7;\n"
    "  out[5] = s1.s0; out[6] = s1.s7;\n"
    "}\n";

/* ct__karg_geom(): ndim, the shape filled with 1, each stride array filled with 0. */
START_TEST(test_karg_geom) {
  ct_device *d = ct_test_device();
  ct__kernel *k = get_src(d, GEOM_SRC, "geom");
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_zeros(&t, d, CT_I64, 1, (const int64_t[]){7}));
  const int64_t shape[2] = {3, 4}, s0[2] = {4, 1}, s1[2] = {9, 2};
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_mem(&a, "out", ct__tensor_mem(t));
  ct__karg_geom(&a, "geom", 2, shape, 2, (const int64_t *const[]){s0, s1});
  ck_assert_uint_eq(a.next, 5);
  ck_assert_ct_ok(ct__launch1(k, &a, d, 1, 0, "ct_test_fn"));
  int64_t host[7];
  ck_assert_ct_ok(ct_to_host(t, host, sizeof host));
  const int64_t want[7] = {2, 3, 1, 1, 0, 9, 0};
  for (int i = 0; i < 7; i++) ck_assert_int_eq(host[i], want[i]);
  ct_release(t);
  ct_shutdown();
}
END_TEST

int main(void) {
  Suite *s = suite_create("kernel-kargs");
  TCase *tc = tcase_create("kargs");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_arguments_in_order_run);
  tcase_add_test(tc, test_failing_argument_is_named);
  tcase_add_test(tc, test_too_few_arguments);
  tcase_add_test(tc, test_too_many_arguments);
  tcase_add_test(tc, test_tensor_arguments_run);
  tcase_add_test(tc, test_launch1);
  tcase_add_test(tc, test_kernel_for_names_fn);
  tcase_add_test(tc, test_karg_geom);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
