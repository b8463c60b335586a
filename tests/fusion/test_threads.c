/* The fusion graph across threads (issue #16: "tensors pending on one thread may be realized
 * from another"): recorded on one thread and read on another; two threads recording and
 * realizing at once (one process-wide graph: each realize runs the other thread's work too);
 * a pending tensor released on another thread, also while a realize runs. Values are exact
 * host arithmetic or the eager chain's bits; a deadlock fails by the test's timeout. */
#include <pthread.h>

#include "fz_util.h"

#define N 1000

struct read_job {
  const ct_tensor *t;
  float *dst;
  size_t bytes;
  ct_status st;
  char err[512];
};

static void *read_on_thread(void *arg) {
  struct read_job *j = arg;
  j->st = ct_to_host(j->t, j->dst, j->bytes);
  snprintf(j->err, sizeof j->err, "%s", ct_last_error());
  return NULL;
}

START_TEST(record_here_realize_there) {
  ct_device *d = ct_test_device();
  ct_tensor *x = fz_ramp(d, N, -4, 0.008f);
  float *want = fz_chain_eager(d, x);
  ct_tensor *z = fz_chain(x);
  ck_assert_uint_eq(fz_pending(), 4);
  float got[N];
  struct read_job j = {.t = z, .dst = got, .bytes = sizeof got};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, read_on_thread, &j), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_msg(j.st == CT_OK, "ct_to_host on another thread: %s: %s", ct_status_name(j.st), j.err);
  ck_assert_uint_eq(fz_pending(), 0);
  fz_assert_bits(got, want, sizeof got, CT_F32, "realized on another thread");
  free(want);
  ct_release(z);
  ct_release(x);
}
END_TEST

/* Each thread: 40 rounds of c = (x * 2 + r) - x, which is x + r exactly (x holds small
 * integers), keeping 4 rounds' results and reading them every 4th round. */
struct worker {
  ct_device *d;
  const ct_tensor *x;
  int id;
  char failure[512];
};

static void *work(void *arg) {
  struct worker *w = arg;
  ct_tensor *kept[4] = {0};
  float *h = malloc(N * sizeof *h);
  for (int r = 0; r < 40 && !w->failure[0]; r++) {
    ct_tensor *a = NULL, *b = NULL, *c = NULL;
    ct_status st = ct_mul_scalar(&a, w->x, 2);
    if (st == CT_OK) st = ct_add_scalar(&b, a, r + 1000 * w->id);
    if (st == CT_OK) st = ct_sub(&c, b, w->x);
    ct_release(a);
    ct_release(b);
    if (st != CT_OK) {
      snprintf(w->failure, sizeof w->failure, "thread %d round %d: %s", w->id, r, ct_last_error());
      break;
    }
    kept[r % 4] = c;
    if (r % 4 != 3) continue;
    for (int k = 0; k < 4 && !w->failure[0]; k++) {
      int rr = r - 3 + k;
      if (ct_to_host(kept[k], h, N * sizeof *h) != CT_OK) {
        snprintf(w->failure, sizeof w->failure, "thread %d read: %s", w->id, ct_last_error());
        break;
      }
      for (int i = 0; i < N; i++)
        if (h[i] != (float)(i + rr + 1000 * w->id)) {
          snprintf(w->failure, sizeof w->failure, "thread %d round %d: c[%d] = %g, expected %d", w->id, rr, i, h[i],
                   i + rr + 1000 * w->id);
          break;
        }
    }
    for (int k = 0; k < 4; k++) {
      ct_release(kept[k]);
      kept[k] = NULL;
    }
  }
  for (int k = 0; k < 4; k++) ct_release(kept[k]);
  free(h);
  return NULL;
}

START_TEST(two_threads_record_and_realize) {
  ct_device *d = ct_test_device();
  fz_mode(d, 1);
  ct_tensor *x = fz_ramp(d, N, 0, 1);
  struct worker w[2] = {{.d = d, .x = x, .id = 0}, {.d = d, .x = x, .id = 1}};
  pthread_t th[2];
  for (int t = 0; t < 2; t++) ck_assert_int_eq(pthread_create(&th[t], NULL, work, &w[t]), 0);
  for (int t = 0; t < 2; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
  for (int t = 0; t < 2; t++) ck_assert_msg(!w[t].failure[0], "%s", w[t].failure);
  ck_assert_ct_ok(ct_device_synchronize(d));
  ck_assert_uint_eq(fz_pending(), 0);
  ct_release(x);
}
END_TEST

static void *release_on_thread(void *arg) {
  ct_release(arg);
  return NULL;
}

/* u = chain(x) pending, v = u * 2 recorded, u released on another thread: before the realize,
 * or while this thread realizes; v is right either way. And a pending result nothing consumes,
 * released on another thread, is dropped. */
START_TEST(pending_released_on_other_thread) {
  ct_device *d = ct_test_device();
  ct_tensor *x = fz_ramp(d, N, -4, 0.008f);
  float *want = fz_chain_eager(d, x);
  for (int i = 0; i < N; i++) want[i] *= 2;
  float got[N];
  for (int round = 0; round < 6; round++) {
    ct_tensor *u = fz_chain(x), *v = NULL;
    ck_assert_ct_ok(ct_mul_scalar(&v, u, 2));
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, release_on_thread, u), 0);
    if (round % 2 == 0) ck_assert_int_eq(pthread_join(th, NULL), 0); /* released before the realize */
    ck_assert_ct_ok(ct_to_host(v, got, sizeof got));
    if (round % 2 == 1) ck_assert_int_eq(pthread_join(th, NULL), 0); /* released during or after it */
    fz_assert_bits(got, want, sizeof got, CT_F32, "u * 2 with u released on another thread");
    ct_release(v);
  }
  ck_assert_uint_eq(fz_pending(), 0);
  /* nothing consumes it: dropped */
  ct_tensor *u = fz_chain(x);
  struct ct__fusion_stats s0 = fz_stats();
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, release_on_thread, u), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_ct_ok(ct_device_synchronize(d));
  struct ct__fusion_stats s1 = fz_stats();
  ck_assert_uint_eq(s1.pending, 0);
  ck_assert_uint_eq(s1.dropped - s0.dropped, 4);
  ck_assert_uint_eq(s1.kernels - s0.kernels, 0);
  free(want);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fusion-threads");
  TCase *tc = tcase_create("threads");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, record_here_realize_there);
  tcase_add_test(tc, two_threads_record_and_realize);
  tcase_add_test(tc, pending_released_on_other_thread);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
