/* ct_shutdown() leaves nothing behind: after a full program's worth of work on every device
 * (tensors, views, copies, casts, failing calls), ct_shutdown() must have released every OpenCL
 * object the library created (counted by clcount.c), and repeating the whole cycle must not grow
 * the process. Under the asan and valgrind setups this binary is also the leak-checked program:
 * meson test --setup=valgrind --suite leak. */
#include <CL/cl.h>

#include "clcount.h"
#include "ct_test.h"
#include "stress.h"

static void assert_all_released(const char *when) {
  char counts[256];
  ck_assert_msg(clcount_all_released(), "OpenCL objects still held %s: %s", when,
                clcount_format(counts, sizeof counts));
}

/* A program's worth of work on every device. */
static void work_on_every_device(uint32_t seed) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  for (int i = 0; i < n; i++) {
    ct_device *d;
    ck_assert_ct_ok(ct_device_get(&d, i));
    stress_why why = {{0}};
    long ops = 0;
    ck_assert_msg(stress_workload(d, 13, 21, seed + (uint32_t)i, NULL, 0, &ops, &why), "%s: %s",
                  ct_device_spec(d), why.text);
    ck_assert_msg(stress_workload(d, 1, 1, seed, NULL, 0, &ops, &why), "%s: %s", ct_device_spec(d), why.text);
  }
  if (n >= 2) {
    /* A tensor moved between devices, and the classic mistake: operands on two devices. */
    ct_device *a, *b;
    ck_assert_ct_ok(ct_device_get(&a, 0));
    ck_assert_ct_ok(ct_device_get(&b, 1));
    ct_tensor *x = NULL, *y = NULL, *z = NULL;
    int64_t shape[1] = {100};
    ck_assert_ct_ok(ct_full(&x, a, CT_F32, 1, shape, 3.0));
    ck_assert_ct_ok(ct_to_device(&y, x, b));
    ck_assert_ct_ok(ct_empty(&z, a, CT_F32, 1, shape));
    ck_assert_ct_status(ct_copy(z, y), CT_ERR_DEVICE_MISMATCH);
    float back[100];
    ck_assert_ct_ok(ct_to_host(y, back, sizeof back));
    for (int i = 0; i < 100; i++) ck_assert_float_eq(back[i], 3.0f);
    ct_release(z);
    ct_release(y);
    ct_release(x);
  }
}

START_TEST(test_shutdown_releases_everything) {
  work_on_every_device(1);
  ct_shutdown();
  assert_all_released("after the first ct_shutdown()");
}
END_TEST

/* Views outliving their base, extra references, async transfers, pinned memory, then
 * shutdown. */
START_TEST(test_lifetimes) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {8, 16};
  ct_tensor *base = NULL, *view = NULL, *view2 = NULL;
  ck_assert_ct_ok(ct_full(&base, d, CT_F32, 2, shape, 1.5));
  ck_assert_ct_ok(ct_transpose(&view, base, 0, 1));
  ck_assert_ct_ok(ct_slice(&view2, view, 0, 2, 10, 3));
  ct_retain(base);
  ct_release(base);
  ct_release(base); /* the views keep the storage alive */
  float back[16 * 8];
  ck_assert_ct_ok(ct_to_host(view2, back, sizeof back));
  ck_assert_float_eq(back[0], 1.5f);
  ct_release(view);
  ct_release(view2);
  ct_release(NULL);

  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_zeros(&t, d, CT_F32, 2, shape));
  ct_event *ev = NULL;
  float src[128];
  for (int i = 0; i < 128; i++) src[i] = (float)i;
  ck_assert_ct_ok(ct_copy_from_host_async(&ev, t, src, sizeof src));
  ck_assert_ct_ok(ct_event_wait(ev));
  ct_event_free(ev);
  ck_assert_ct_ok(ct_to_host_async(&ev, t, back, sizeof back));
  ct_event_free(ev); /* waits first */
  for (int i = 0; i < 128; i++) ck_assert_float_eq(back[i], (float)i);
  ct_event_free(NULL);

  ct_pinned *p = NULL;
  ck_assert_ct_ok(ct_pinned_alloc(&p, d, 4096));
  ck_assert_ptr_nonnull(ct_pinned_ptr(p));
  ct_pinned_free(p);
  ct_pinned_free(NULL);
  ct_release(t);
  ct_shutdown();
  assert_all_released("after views, events and pinned memory");
}
END_TEST

/* Failing calls must not leak what they created before failing. */
START_TEST(test_failures_release) {
  ct_device *d = ct_test_device();
  int64_t a_shape[2] = {4, 5}, b_shape[2] = {3, 5}, bad[2] = {-1, 5};
  ct_tensor *a = NULL, *b = NULL, *out = NULL;
  ck_assert_ct_ok(ct_zeros(&a, d, CT_F32, 2, a_shape));
  ck_assert_ct_ok(ct_ones(&b, d, CT_I32, 2, b_shape));
  ck_assert_ct_status(ct_copy(a, b), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_empty(&out, d, CT_F32, 2, bad), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_ct_status(ct_transpose(&out, a, 0, 5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_view(&out, a, 2, b_shape), CT_ERR_SHAPE_MISMATCH);
  float small[2];
  ck_assert_ct_status(ct_to_host(a, small, sizeof small), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_copy_from_host(a, small, sizeof small), CT_ERR_INVALID_ARGUMENT);
  ct_release(a);
  ct_release(b);
  ct_shutdown();
  assert_all_released("after failing calls");
}
END_TEST

/* A bare OpenCL cycle on the first device, without the library: context, queue, program, kernel
 * and buffer made, used once and released. What it moves the heap by is the implementation's
 * own noise, which the library's cycles carry too. */
static void bare_cl_cycle(void) {
  cl_platform_id pl;
  cl_device_id dev;
  cl_int err;
  ck_assert_int_eq(clGetPlatformIDs(1, &pl, NULL), CL_SUCCESS);
  ck_assert_int_eq(clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &dev, NULL), CL_SUCCESS);
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  static const char *src = "__kernel void k(__global float *o) { o[get_global_id(0)] *= 2.0f; }";
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ck_assert_int_eq(clBuildProgram(p, 1, &dev, NULL, NULL, NULL), CL_SUCCESS);
  cl_kernel k = clCreateKernel(p, "k", &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  float host[256] = {0};
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ck_assert_int_eq(clSetKernelArg(k, 0, sizeof b, &b), CL_SUCCESS);
  size_t n = 256;
  ck_assert_int_eq(clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL), CL_SUCCESS);
  ck_assert_int_eq(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL), CL_SUCCESS);
  clReleaseMemObject(b);
  clReleaseKernel(k);
  clReleaseProgram(p);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
}

/* The most the heap moved, either way, over bare cycles 3 to 8 from where cycle 2 left it. */
static int64_t bare_heap_noise(void) {
  enum { CYCLES = 8 };
  int64_t first = 0, most = 0;
  for (int c = 0; c < CYCLES; c++) {
    bare_cl_cycle();
    int64_t h = (int64_t)stress_heap_bytes();
    if (c == 1) first = h;
    if (c >= 2) most = llabs(h - first) > most ? llabs(h - first) : most;
  }
  return most;
}

/* The whole cycle again and again: after the first two (which pay for the OpenCL
 * implementation's one-time setup and its caches), the host heap and RSS must stay flat. */
START_TEST(test_repeated_cycles_flat) {
  enum { CYCLES = 8 };
  uint64_t rss[CYCLES] = {0}, heap[CYCLES] = {0};
  for (int c = 0; c < CYCLES; c++) {
    work_on_every_device((uint32_t)c);
    ct_shutdown();
    assert_all_released("after a cycle");
    rss[c] = stress_rss_bytes();
    heap[c] = stress_heap_bytes();
  }
  /* PoCL frees some of a released context's memory on its own worker threads a moment later,
   * so one reading may be high: take the lower of the last two. */
  uint64_t heap_end = heap[CYCLES - 1] < heap[CYCLES - 2] ? heap[CYCLES - 1] : heap[CYCLES - 2];
  uint64_t rss_end = rss[CYCLES - 1] < rss[CYCLES - 2] ? rss[CYCLES - 1] : rss[CYCLES - 2];
  int64_t heap_growth = (int64_t)heap_end - (int64_t)heap[1];
  int64_t rss_growth = (int64_t)rss_end - (int64_t)rss[1];
  /* Bounds over six cycles: 64 KiB of heap (a cycle leaking a context, a queue, a program or a
   * few dozen tensor headers exceeds it; LeakSanitizer and valgrind catch smaller leaks), and
   * 8 MiB of RSS, read after malloc_trim (stress_rss_bytes), which still moves with thread
   * stacks and fragmentation: with two PoCL devices each cycle starts new worker threads. Without
   * the trim, glibc keeping up to 32 MiB of freed heap made RSS flip by 36 MiB between cycles
   * (a CI failure at 38 MiB "growth" with the heap flat); with it six cycles moved it by less
   * than 64 KiB. The heap bound is the leak check; the RSS bound catches growth outside malloc. */
  const int64_t heap_bound = 64 << 10, rss_bound = 8 << 20;
  printf("# after cycle 2 / cycle %d: heap %llu / %llu bytes (growth %lld, bound %lld), "
         "RSS %llu / %llu bytes (growth %lld, bound %lld)\n",
         CYCLES, (unsigned long long)heap[1], (unsigned long long)heap_end, (long long)heap_growth,
         (long long)heap_bound, (unsigned long long)rss[1], (unsigned long long)rss_end,
         (long long)rss_growth, (long long)rss_bound);
  const char *skip = ct_test_host_memory_unmeasurable();
  if (skip) {
    printf("# heap and RSS bounds not checked under %s\n", skip);
    return;
  }
  ck_assert_msg(rss_growth <= rss_bound, "host RSS grew by %lld bytes over %d shutdown cycles (bound %lld)",
                (long long)rss_growth, CYCLES - 2, (long long)rss_bound);
  /* The heap bound is only a leak check where the implementation's own cycles keep the heap
   * still: PoCL's move it by a few KiB, rusticl's by 170 KB to 2.4 MB (docs/PORTABILITY.md). So
   * the same process first measures a bare OpenCL cycle's movement, and where that alone exceeds
   * half the bound the heap bound is skipped, naming the device and the figure; the OpenCL
   * object counts above and the RSS bound still hold there. */
  int64_t noise = bare_heap_noise();
  char dev_name[256] = "";
  ct_device *d0 = NULL;
  const ct_device_props *props = ct_device_get(&d0, 0) == CT_OK ? ct_device_properties(d0) : NULL;
  snprintf(dev_name, sizeof dev_name, "%s", props ? props->name : "the first device");
  ct_shutdown();
  printf("# a bare OpenCL cycle on %s moved the heap by up to %lld bytes\n", dev_name, (long long)noise);
  fflush(stdout);
  if (noise > heap_bound / 2) {
    printf("# skip: heap bound (%lld bytes): a bare OpenCL cycle on %s moves the heap by %lld bytes by "
           "itself\n", (long long)heap_bound, dev_name, (long long)noise);
    fflush(stdout);
    return;
  }
  ck_assert_msg(heap_growth <= heap_bound, "host heap grew by %lld bytes over %d shutdown cycles (bound %lld)",
                (long long)heap_growth, CYCLES - 2, (long long)heap_bound);
}
END_TEST

int main(void) {
  Suite *s = suite_create("leak");
  TCase *tc = tcase_create("shutdown");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_shutdown_releases_everything);
  tcase_add_test(tc, test_lifetimes);
  tcase_add_test(tc, test_failures_release);
  tcase_add_test(tc, test_repeated_cycles_flat);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
