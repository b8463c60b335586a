/* Threads: 8 threads create tensors and run ops at the same time, on one device and on two
 * (POCL_DEVICES="pthread pthread"), every result checked against the host; they also share
 * read-only tensors and reference-count them concurrently, as tensor.h allows. argv[1] is "one"
 * or "two" (the environment the runner set up); argv[2], optional, the rounds per thread.
 * This is the program the tsan setup checks: meson test --setup=tsan --suite stress. */
#include <pthread.h>

#include "clcount.h"
#include "ct_test.h"
#include "stress.h"

enum { THREADS = 8 };

static int rounds = 25;

struct worker {
  int id;
  ct_device *devs[2];
  int ndev;
  const ct_tensor *shared[2]; /* one per device, [1, 24] f32 */
  uint32_t shared_seed;
  pthread_barrier_t *start;
  long ops;
  int ok;
  stress_why why;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  stress_why *why = &w->why;
  uint32_t rng = 0x1234567u * (uint32_t)(w->id + 1);
  pthread_barrier_wait(w->start);
  w->ok = 1;
  for (int r = 0; r < rounds && w->ok; r++) {
    int di = (w->id + r) % w->ndev;
    ct_device *d = w->devs[di];
    /* Mostly the shared tensor's width, so that it is broadcast into this thread's tensors. */
    int64_t rows = 1 + (int64_t)(stress_rand(&rng) % 17);
    int64_t cols = (stress_rand(&rng) % 3 == 0) ? 1 + (int64_t)(stress_rand(&rng) % 40) : 24;
    w->ok = stress_workload(d, rows, cols, stress_rand(&rng), w->shared[di], w->shared_seed, &w->ops, why);
    if (!w->ok) break;
    /* Take and drop references to the shared tensors while others read them. */
    ct_tensor *extra = ct_retain((ct_tensor *)w->shared[di]);
    ct_release(extra);
    if (w->ndev == 2) {
      /* Move a tensor to the other device and back. */
      ct_tensor *x = NULL, *y = NULL, *z = NULL;
      int64_t shape[1] = {rows * 7};
      float back[17 * 7];
      double v = (double)(w->id * 100 + r);
      int ok = 0;
      STRESS_TRY(ct_full(&x, d, CT_F32, 1, shape, v));
      STRESS_TRY(ct_to_device(&y, x, w->devs[1 - di]));
      STRESS_TRY(ct_to_device(&z, y, d));
      STRESS_TRY(ct_to_host(z, back, sizeof back));
      w->ops += 4;
      for (int64_t i = 0; i < shape[0]; i++)
        STRESS_CHECK(back[i] == (float)v, "moved between devices [%lld]: %g != %g", (long long)i, back[i], v);
      ok = 1;
    done:
      ct_release(z);
      ct_release(y);
      ct_release(x);
      w->ok = ok;
    }
  }
  return NULL;
}

static void run_threads(int ndev) {
  ct_device *devs[2];
  for (int i = 0; i < ndev; i++) ck_assert_ct_ok(ct_device_get(&devs[i], i));
  uint32_t shared_seed = 77;
  float hs[24];
  for (int j = 0; j < 24; j++) hs[j] = stress_value(shared_seed, j);
  ct_tensor *shared[2] = {NULL, NULL};
  int64_t sshape[2] = {1, 24};
  for (int i = 0; i < ndev; i++) ck_assert_ct_ok(ct_from_host(&shared[i], devs[i], CT_F32, 2, sshape, hs));

  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  struct worker w[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    w[i].ndev = ndev;
    for (int k = 0; k < ndev; k++) {
      w[i].devs[k] = devs[k];
      w[i].shared[k] = shared[k];
    }
    w[i].shared_seed = shared_seed;
    w[i].start = &start;
    ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  long ops = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    ops += w[i].ops;
  }
  pthread_barrier_destroy(&start);
  for (int i = 0; i < THREADS; i++) ck_assert_msg(w[i].ok, "thread %d: %s", i, w[i].why.text);
  printf("# %d threads on %d device(s): %d rounds each, %ld device operations, all results correct\n",
         THREADS, ndev, rounds, ops);
  for (int i = 0; i < ndev; i++) ct_release(shared[i]);
  ct_shutdown();
  char counts[256];
  ck_assert_msg(clcount_all_released(), "OpenCL objects still held: %s", clcount_format(counts, sizeof counts));
}

START_TEST(test_threads_one_device) { run_threads(1); }
END_TEST

START_TEST(test_threads_two_devices) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  ck_assert_int_ge(n, 2);
  run_threads(2);
}
END_TEST

/* Every thread opening the library at once, from nothing: enumeration, context and queue
 * creation, the first kernel builds (a cold in-memory cache) all race. */
START_TEST(test_cold_start_race) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  ct_shutdown();
  int saved = rounds;
  rounds = 1;
  run_threads(n >= 2 ? 2 : 1);
  rounds = saved;
}
END_TEST

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "one";
  if (argc > 2) rounds = atoi(argv[2]);
  Suite *s = suite_create("threads");
  TCase *tc = tcase_create(mode);
  tcase_set_timeout(tc, 900);
  tcase_set_tags(tc, "threads"); /* skipped under Oclgrind, which runs one kernel at a time */
  tcase_add_test(tc, test_cold_start_race);
  tcase_add_test(tc, test_threads_one_device);
  suite_add_tcase(s, tc);
  if (strcmp(mode, "two") == 0) {
    TCase *t2 = tcase_create("two");
    tcase_set_timeout(t2, 900);
    tcase_set_tags(t2, "threads two-devices");
    tcase_add_test(t2, test_threads_two_devices);
    suite_add_tcase(s, t2);
  }
  return ct_test_run(s);
}
