/* The fusion graph across threads (issue #16: "tensors pending on one thread may be realized
 * from another"; issue #28: a graph per thread): recorded on one thread and read on another;
 * two threads recording and realizing at once; a pending tensor released on another thread,
 * also while a realize runs; a pending tensor handed to another thread, which uses it in an
 * elementwise op, a reduction and a copy, and memory one thread's recorded node reads written
 * by another; eight threads building exactly the programs one thread builds. Values are exact
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

/* ---- issue #28 ---- */

/* A pending tensor handed to another thread, in steps (a barrier between the threads): used
 * there in an elementwise op (recorded in that thread's graph: the producer's graph is
 * enqueued first, the input is a leaf there), in a reduction (a kernel argument) and in a
 * copy, each time a chain recorded here just before and still pending. Then a write by the
 * other thread into memory that a node recorded here still reads: that node runs first, on
 * the old contents. */
struct handoff_job {
  ct_tensor *z, *w;     /* handed over; w: the memory written */
  const float *want;    /* the chain's eager bits */
  pthread_barrier_t step;
  char failure[512];
};

static void *use_on_thread(void *arg) {
  struct handoff_job *j = arg;
  float *got = malloc(N * sizeof *got);
  float mx = 0, want_mx = -INFINITY;
  for (int i = 0; i < N; i++) want_mx = fmaxf(want_mx, j->want[i]);
  ct_status st = CT_OK;
  for (int step = 0; step < 4; step++) {
    pthread_barrier_wait(&j->step); /* the other thread recorded */
    ct_tensor *r = NULL;
    if (st == CT_OK && step == 0) {
      st = ct_mul_scalar(&r, j->z, 2);
      if (st == CT_OK) st = ct_to_host(r, got, N * sizeof *got);
      for (int i = 0; i < N && st == CT_OK && !j->failure[0]; i++)
        if (got[i] != j->want[i] * 2)
          snprintf(j->failure, sizeof j->failure, "z * 2 on another thread: [%d] %.9g, not %.9g", i, got[i],
                   j->want[i] * 2);
    } else if (st == CT_OK && step == 1) {
      st = ct_max(&r, j->z, 0, NULL, false);
      if (st == CT_OK) st = ct_to_host(r, &mx, sizeof mx);
      if (st == CT_OK && !j->failure[0] && mx != want_mx)
        snprintf(j->failure, sizeof j->failure, "max(z) on another thread: %.9g, not %.9g", mx, want_mx);
    } else if (st == CT_OK && step == 2) {
      st = ct_clone(&r, j->z);
      if (st == CT_OK) st = ct_to_host(r, got, N * sizeof *got);
      if (st == CT_OK && !j->failure[0] && memcmp(got, j->want, N * sizeof *got) != 0)
        snprintf(j->failure, sizeof j->failure, "clone(z) on another thread differs from the chain");
    } else if (st == CT_OK && step == 3) {
      for (int i = 0; i < N; i++) got[i] = -1;
      st = ct_copy_from_host(j->w, got, N * sizeof *got);
    }
    ct_release(r);
    if (st != CT_OK && !j->failure[0])
      snprintf(j->failure, sizeof j->failure, "step %d: %s: %s", step, ct_status_name(st), ct_last_error());
    pthread_barrier_wait(&j->step); /* done */
  }
  free(got);
  return NULL;
}

START_TEST(handoff_across_threads) {
  ct_device *d = ct_test_device();
  fz_mode(d, 1);
  ct_tensor *x = fz_ramp(d, N, -4, 0.008f), *w = fz_ramp(d, N, 0, 1);
  float *want = fz_chain_eager(d, x);
  struct handoff_job j = {.want = want, .w = w};
  pthread_barrier_init(&j.step, NULL, 2);
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, use_on_thread, &j), 0);
  ct_tensor *y = NULL;
  for (int step = 0; step < 4; step++) {
    if (step < 3) {
      j.z = fz_chain(x);
      ck_assert_uint_eq(fz_pending(), 4);
    } else {
      ck_assert_ct_ok(ct_mul_scalar(&y, w, 3)); /* reads w, which the other thread overwrites */
      ck_assert_uint_eq(fz_pending(), 1);
    }
    pthread_barrier_wait(&j.step);
    pthread_barrier_wait(&j.step);
    ck_assert_msg(!j.failure[0], "%s", j.failure);
    /* The other thread's use enqueued this thread's graph (and its own reads realized its own). */
    ck_assert_uint_eq(fz_pending(), 0);
    ct_release(j.z);
    j.z = NULL;
  }
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  pthread_barrier_destroy(&j.step);
  float got[N];
  ck_assert_ct_ok(ct_to_host(y, got, sizeof got));
  for (int i = 0; i < N; i++)
    ck_assert_msg(got[i] == 3.0f * (float)i, "w * 3 [%d] = %g: computed after w was overwritten", i, got[i]);
  ck_assert_ct_ok(ct_to_host(w, got, sizeof got));
  ck_assert_float_eq(got[0], -1);
  ct_release(y);
  ct_release(w);
  ct_release(x);
  free(want);
}
END_TEST

/* Eight threads running chains on tensors of their own build exactly the programs one thread
 * running the same calls builds: a thread's kernels depend on its own calls only, never on
 * what the others record meanwhile (issue #28: one process-wide graph merged the threads'
 * nodes into kernels whose text followed their timing, and builds never stopped). Counts, not
 * time: ct__fusion_stats' builds. Each thread checks its values against one thread's bits. */
enum { MT_THREADS = 8, MT_ROUNDS = 240, MT_RECIPES = 4 };

struct mt_job {
  ct_device *d;
  float (*want)[N];      /* [MT_RECIPES]: one thread's results, or NULL to record them */
  pthread_barrier_t *start;
  char failure[512];
};

/* Recipe r on x, read back into out (N floats, or one for the reduction). keep holds the
 * sigmoid of recipe 3 for a round: two chains pending in one realize. */
static ct_status mt_recipe(int r, const ct_tensor *x, float *out, ct_tensor **keep) {
  ct_tensor *a = NULL, *b = NULL, *c = NULL;
  ct_status st;
  switch (r) {
  case 0: /* tanh(x * 0.5 + 1) */
    st = ct_mul_scalar(&a, x, 0.5);
    if (st == CT_OK) st = ct_add_scalar(&b, a, 1);
    if (st == CT_OK) st = ct_tanh(&c, b);
    break;
  case 1: /* (x * 2 + 7) - x */
    st = ct_mul_scalar(&a, x, 2);
    if (st == CT_OK) st = ct_add_scalar(&b, a, 7);
    if (st == CT_OK) st = ct_sub(&c, b, x);
    break;
  case 2: /* sum(exp(x * 0.25) * x) */
    st = ct_mul_scalar(&a, x, 0.25);
    if (st == CT_OK) st = ct_exp(&b, a);
    ct_release(a);
    a = NULL;
    if (st == CT_OK) st = ct_mul(&a, b, x);
    if (st == CT_OK) st = ct_sum(&c, a, 0, NULL, false);
    if (st == CT_OK) st = ct_to_host(c, out, sizeof *out);
    ct_release(a);
    ct_release(b);
    ct_release(c);
    return st;
  default: /* sigmoid(x) kept, then (x - 1) * sigmoid(x) with both read */
    st = ct_sigmoid(keep, x);
    if (st == CT_OK) st = ct_sub_scalar(&a, x, 1);
    if (st == CT_OK) st = ct_mul(&c, a, *keep);
    break;
  }
  if (st == CT_OK) st = ct_to_host(c, out, N * sizeof *out);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  return st;
}

static void *mt_work(void *arg) {
  struct mt_job *j = arg;
  float *got = malloc(N * sizeof *got), *kept = malloc(N * sizeof *kept);
  float *h = malloc(N * sizeof *h);
  for (int i = 0; i < N; i++) h[i] = -3 + 0.006f * (float)i;
  int64_t n = N;
  ct_tensor *x = NULL;
  ct_status st = ct_from_host(&x, j->d, CT_F32, 1, &n, h);
  if (j->start) pthread_barrier_wait(j->start);
  for (int r = 0; r < MT_ROUNDS && st == CT_OK && !j->failure[0]; r++) {
    int k = r % MT_RECIPES;
    ct_tensor *keep = NULL;
    st = mt_recipe(k, x, got, &keep);
    if (st == CT_OK && keep) st = ct_to_host(keep, kept, N * sizeof *kept);
    ct_release(keep);
    if (st != CT_OK) break;
    size_t bytes = (k == 2 ? 1 : N) * sizeof *got;
    if (!j->start && r < MT_RECIPES) memcpy(j->want[k], got, bytes); /* one thread: the reference */
    else if (memcmp(got, j->want[k], bytes) != 0)
      snprintf(j->failure, sizeof j->failure, "recipe %d, round %d: differs from one thread's bits", k, r);
  }
  if (st != CT_OK) snprintf(j->failure, sizeof j->failure, "%s: %s", ct_status_name(st), ct_last_error());
  ct_release(x);
  free(h);
  free(kept);
  free(got);
  return NULL;
}

START_TEST(threads_build_what_one_thread_builds) {
  ct_device *d = ct_test_device();
  fz_mode(d, 1);
  static float want[MT_RECIPES][N];
  /* One thread (on a thread of its own, as the eight). */
  struct ct__fusion_stats s0 = fz_stats();
  struct mt_job one = {.d = d, .want = want};
  pthread_t th[MT_THREADS];
  ck_assert_int_eq(pthread_create(&th[0], NULL, mt_work, &one), 0);
  ck_assert_int_eq(pthread_join(th[0], NULL), 0);
  ck_assert_msg(!one.failure[0], "one thread: %s", one.failure);
  unsigned long one_builds = fz_stats().builds - s0.builds;
  ck_assert_uint_gt(one_builds, 0);
  /* The table of built programs starts empty again (the disk cache still serves the texts:
   * a build counts a load from it too). */
  ct_shutdown();
  d = ct_test_device();
  fz_mode(d, 1);
  struct ct__fusion_stats s1 = fz_stats();
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, MT_THREADS);
  struct mt_job jobs[MT_THREADS];
  for (int t = 0; t < MT_THREADS; t++) {
    jobs[t] = (struct mt_job){.d = d, .want = want, .start = &start};
    ck_assert_int_eq(pthread_create(&th[t], NULL, mt_work, &jobs[t]), 0);
  }
  for (int t = 0; t < MT_THREADS; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
  pthread_barrier_destroy(&start);
  for (int t = 0; t < MT_THREADS; t++) ck_assert_msg(!jobs[t].failure[0], "thread %d: %s", t, jobs[t].failure);
  unsigned long many_builds = fz_stats().builds - s1.builds;
  ck_assert_msg(many_builds == one_builds, "%d threads built %lu fused programs, one thread %lu", MT_THREADS,
                many_builds, one_builds);
  ck_assert_uint_eq(fz_pending(), 0);
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
  tcase_add_test(tc, handoff_across_threads);
  tcase_add_test(tc, threads_build_what_one_thread_builds);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
