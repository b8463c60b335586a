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

/* A device with two 4-element f32 tensors, a = [1, 2, 3, 4] and c, and its queue held by a
 * marker waiting on a user event until fail_marker() sets that event to a negative status. */
typedef struct {
  ct_device *d;
  ct_tensor *a, *c;
  cl_event user, marker;
} scene;

static const float one_to_four[4] = {1, 2, 3, 4};

static void block_queue(scene *s) {
  cl_context ctx;
  cl_command_queue q;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, s->d));
  ck_assert_ct_ok(ct_device_cl_queue(&q, s->d));
  cl_int err = CL_SUCCESS;
  s->user = clCreateUserEvent(ctx, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ck_assert_int_eq(clEnqueueMarkerWithWaitList(q, 1, &s->user, &s->marker), CL_SUCCESS);
}

static scene scene_open(void) {
  scene s;
  s.d = ct_test_device();
  s.a = s.c = NULL;
  ck_assert_ct_ok(ct_from_host(&s.a, s.d, CT_F32, 1, (const int64_t[]){4}, one_to_four));
  ck_assert_ct_ok(ct_from_host(&s.c, s.d, CT_F32, 1, (const int64_t[]){4}, one_to_four));
  block_queue(&s);
  return s;
}

/* After the report the device works again: a fresh a + a is right. */
static void scene_close(scene *s) {
  ct_tensor *sum = NULL;
  float r[4] = {0};
  ck_assert_ct_ok(ct_add(&sum, s->a, s->a));
  ck_assert_ct_ok(ct_to_host(sum, r, sizeof r));
  for (int i = 0; i < 4; i++) ck_assert_float_eq(r[i], 2 * one_to_four[i]);
  ct_release(sum);
  ct_release(s->c);
  ct_release(s->a);
}

/* Fails the marker. Returns whether the implementation fails the commands queued behind it as
 * well (PoCL does; rusticl 22.3 fails only the marker and runs the rest): a second marker, queued
 * behind the op, tells. Where it does not, there is no failure for the library to report, and the
 * test skips, saying so, after checking that the op's result is there (want: c's values) and the
 * blocking calls report nothing. */
static bool fail_marker(scene *s, const float *want) {
  cl_command_queue q;
  cl_event probe;
  ck_assert_ct_ok(ct_device_cl_queue(&q, s->d));
  ck_assert_int_eq(clEnqueueMarkerWithWaitList(q, 0, NULL, &probe), CL_SUCCESS);
  ck_assert_int_eq(clSetUserEventStatus(s->user, FAILED_STATUS), CL_SUCCESS);
  clReleaseEvent(s->marker);
  clReleaseEvent(s->user);
  clWaitForEvents(1, &probe); /* an error when it failed: the status below says */
  cl_int exec = CL_COMPLETE;
  ck_assert_int_eq(clGetEventInfo(probe, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL), CL_SUCCESS);
  clReleaseEvent(probe);
  if (ct_test_needs(exec < 0, "failures reported after the enqueue",
                    "an implementation that fails the commands queued behind a failed one", s->d))
    return true;
  float r[4];
  ck_assert_ct_ok(ct_device_synchronize(s->d));
  ck_assert_ct_ok(ct_to_host(s->c, r, sizeof r));
  for (int i = 0; i < 4; i++) ck_assert_float_eq(r[i], want[i]);
  scene_close(s);
  return false;
}

START_TEST(test_to_host_reports) {
  scene s = scene_open();
  ck_assert_ct_ok(ct_add_out(s.c, s.a, s.a)); /* enqueued behind the marker: it never runs */
  if (!fail_marker(&s, (const float[]){2, 4, 6, 8})) return;
  float r[4];
  ck_assert_ct_status(ct_to_host(s.c, r, sizeof r), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_to_host: a command enqueued earlier on ");
  ck_assert_error_contains("failed after it was enqueued");
  ck_assert_ct_ok(ct_device_synchronize(s.d)); /* reported once */
  scene_close(&s);
}
END_TEST

START_TEST(test_synchronize_reports) {
  scene s = scene_open();
  ck_assert_ct_ok(ct_mul_scalar_out(s.c, s.a, 3.0));
  if (!fail_marker(&s, (const float[]){3, 6, 9, 12})) return;
  ck_assert_ct_status(ct_device_synchronize(s.d), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_device_synchronize: a command enqueued earlier on ");
  float r[4];
  ck_assert_ct_ok(ct_to_host(s.a, r, sizeof r));
  ck_assert_float_eq(r[3], 4.0f);
  scene_close(&s);
}
END_TEST

START_TEST(test_event_wait_reports) {
  scene s = scene_open();
  ck_assert_ct_ok(ct_neg_out(s.c, s.a));
  float r[4];
  ct_event *ev = NULL;
  ck_assert_ct_ok(ct_to_host_async(&ev, s.a, r, sizeof r));
  if (!fail_marker(&s, (const float[]){-1, -2, -3, -4})) {
    ck_assert_ct_ok(ct_event_wait(ev));
    ct_event_free(ev);
    return;
  }
  ck_assert_ct_status(ct_event_wait(ev), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_event_wait: ");
  ct_event_free(ev);
  scene_close(&s);
}
END_TEST

START_TEST(test_copy_from_host_reports) {
  scene s = scene_open();
  ck_assert_ct_ok(ct_neg_out(s.c, s.a));
  if (!fail_marker(&s, (const float[]){-1, -2, -3, -4})) return;
  const float twos[4] = {2, 2, 2, 2};
  ck_assert_ct_status(ct_copy_from_host(s.a, twos, sizeof twos), CT_ERR_OPENCL);
  ck_assert_error_contains("ct_copy_from_host: a command enqueued earlier on ");
  ck_assert_ct_ok(ct_copy_from_host(s.a, one_to_four, sizeof one_to_four));
  scene_close(&s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor-async");
  TCase *tc = tcase_create("async");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_to_host_reports);
  tcase_add_test(tc, test_synchronize_reports);
  tcase_add_test(tc, test_event_wait_reports);
  tcase_add_test(tc, test_copy_from_host_reports);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
