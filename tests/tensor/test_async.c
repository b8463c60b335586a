/* Asynchronous failures: a library command that fails after its enqueue is reported by the
 * next blocking call on its device (ct_to_host, ct_copy_from_host, ct_device_synchronize,
 * ct_event_wait), once. Before, clFinish and the blocking read returned CL_SUCCESS, so
 * ct_to_host returned CT_OK with stale data: PoCL skips the kernels queued behind a failed
 * command but still runs the read.
 *
 * The failure is provoked deterministically: a marker waiting on a user event is enqueued on
 * the library's queue (through the interop API), an op is enqueued behind it, and the user
 * event is then set to a negative status, which fails the marker and, in the in-order queue,
 * the op's kernel still waiting behind it. Tensors are allocated before the queue is blocked
 * (a new allocator segment waits for the queue) and the ops write into them (_out forms). */
#include <CL/cl.h>

#include "ct_test.h"

/* A failure that is no OpenCL error code, so the message shows the status as it came. */
#define FAILED_STATUS (-9999)

typedef struct {
  ct_device *d;
  cl_event user, marker;
} blocker;

/* Holds the device's queue until release_failed(). */
static blocker block_queue(void) {
  blocker b;
  b.d = ct_test_device();
  cl_context ctx;
  cl_command_queue q;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, b.d));
  ck_assert_ct_ok(ct_device_cl_queue(&q, b.d));
  cl_int err = CL_SUCCESS;
  b.user = clCreateUserEvent(ctx, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ck_assert_int_eq(clEnqueueMarkerWithWaitList(q, 1, &b.user, &b.marker), CL_SUCCESS);
  return b;
}

static void release_failed(blocker *b) {
  ck_assert_int_eq(clSetUserEventStatus(b->user, FAILED_STATUS), CL_SUCCESS);
}

static void blocker_free(blocker *b) {
  clReleaseEvent(b->marker);
  clReleaseEvent(b->user);
}

static ct_tensor *vec4(ct_device *d, const float *v) {
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, (const int64_t[]){4}, v));
  return t;
}

static void expect_sum(ct_tensor *a, float scale) {
  ct_tensor *s = NULL;
  float r[4] = {0};
  ck_assert_ct_ok(ct_add(&s, a, a));
  ck_assert_ct_ok(ct_to_host(s, r, sizeof r));
  for (int i = 0; i < 4; i++) ck_assert_float_eq(r[i], 2 * scale * (float)(i + 1));
  ct_release(s);
}

static const float one_to_four[4] = {1, 2, 3, 4};

START_TEST(test_to_host_reports) {
  ct_device *d = ct_test_device();
  ct_tensor *a = vec4(d, one_to_four), *c = vec4(d, one_to_four);
  blocker b = block_queue();
  ck_assert_ct_ok(ct_add_out(c, a, a)); /* enqueued behind the marker: it never runs */
  release_failed(&b);
  float r[4];
  ck_assert_ct_status(ct_to_host(c, r, sizeof r), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_to_host: a command enqueued earlier on ");
  ck_assert_error_contains("failed after it was enqueued");
  /* Reported once: the device works again, and fresh results are right. */
  ck_assert_ct_ok(ct_device_synchronize(b.d));
  expect_sum(a, 1);
  ct_release(c);
  ct_release(a);
  blocker_free(&b);
}
END_TEST

START_TEST(test_synchronize_reports) {
  ct_device *d = ct_test_device();
  ct_tensor *a = vec4(d, one_to_four), *c = vec4(d, one_to_four);
  blocker b = block_queue();
  ck_assert_ct_ok(ct_mul_scalar_out(c, a, 3.0));
  release_failed(&b);
  ck_assert_ct_status(ct_device_synchronize(b.d), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_device_synchronize: a command enqueued earlier on ");
  float r[4];
  ck_assert_ct_ok(ct_to_host(a, r, sizeof r));
  ck_assert_float_eq(r[3], 4.0f);
  expect_sum(a, 1);
  ct_release(c);
  ct_release(a);
  blocker_free(&b);
}
END_TEST

START_TEST(test_event_wait_and_copy_from_host_report) {
  ct_device *d = ct_test_device();
  ct_tensor *a = vec4(d, one_to_four), *c = vec4(d, one_to_four);
  blocker b = block_queue();
  ck_assert_ct_ok(ct_neg_out(c, a));
  float r[4];
  ct_event *ev = NULL;
  ck_assert_ct_ok(ct_to_host_async(&ev, a, r, sizeof r));
  release_failed(&b);
  ck_assert_ct_status(ct_event_wait(ev), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_event_wait: ");
  ct_event_release(ev);

  blocker b2 = block_queue();
  ck_assert_ct_ok(ct_neg_out(c, a));
  release_failed(&b2);
  const float twos[4] = {2, 2, 2, 2};
  ck_assert_ct_status(ct_copy_from_host(a, twos, sizeof twos), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_copy_from_host: a command enqueued earlier on ");
  ck_assert_ct_ok(ct_copy_from_host(a, one_to_four, sizeof one_to_four));
  expect_sum(a, 1);
  ct_release(c);
  ct_release(a);
  blocker_free(&b);
  blocker_free(&b2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor-async");
  TCase *tc = tcase_create("async");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_to_host_reports);
  tcase_add_test(tc, test_synchronize_reports);
  tcase_add_test(tc, test_event_wait_and_copy_from_host_report);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
