/* Matrix products from 8 threads on one device, issue #11's workload: each thread loops over
 * ct_from_host (two operands) -> ct_add -> ct_matmul -> ct_sum -> ct_to_host of the sum, the
 * product and the total, every value checked against a host loop.
 *
 * What it guards against: the host-BLAS route's native kernel once read and wrote the wrong
 * buffers whenever a product's buffers had not been created in the order a, b, c (PoCL 3.1
 * hands pointers out in creation order; docs/GEMM.md, "Routes"). With the caching allocator that
 * depends on which cached segments each thread's blocks come from, so the 10 s of
 * 128x128 products went wrong in about one run of nine. Half of the rounds here are that product;
 * the others have results or operands of 0.7-1 MiB, so that a product's three blocks often sit
 * in different segments of varied age: before the fix a run of this size failed every time (10
 * of 10 runs, about 5 s each on 2 busy cores) instead of one in nine.
 *
 * Operands are integers in [-2, 2] and every shape has m n k <= 2^21, so every partial sum of a
 * product element and of the total is an integer of magnitude at most 4 m n k <= 2^23: f32
 * results are exact whatever the order of accumulation, and the checks compare exactly.
 *
 * argv[1], optional: rounds per thread (default 40); argv[2]: a cap in seconds after which
 * threads start no new round (default 120; it bounds the run on a loaded machine and is not a
 * timing assertion: the test passes with however many rounds ran, at least one per thread). */
#include <pthread.h>
#include <time.h>

#include "ct_test.h"
#include "stress.h"

enum { THREADS = 8 };

static int rounds = 40;
static double cap_s = 120;

/* m x k @ k x n, each with m n k <= 2^21. The 128^3 product is the issue's; the others put a
 * result of 0.75 MiB or an operand of 0.25-1 MiB (the small pool's 2 MiB segments hold a few)
 * next to small blocks. */
static const int64_t shapes[][3] = {
    {128, 128, 128}, {2048, 8, 96}, {128, 128, 128}, {96, 8, 2048}, {128, 128, 128}, {1024, 32, 64},
    {128, 128, 128}, {32, 8192, 8},
};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

struct worker {
  int id;
  ct_device *d;
  pthread_barrier_t *start;
  struct timespec t0;
  int done_rounds;
  int ok;
  stress_why why;
};

static double since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* One round; returns 1 when every value is right, else 0 with why filled. */
static int one_round(ct_device *d, uint32_t *rng, int round, stress_why *why) {
  int ok = 0;
  const int64_t *s = shapes[stress_rand(rng) % NSHAPES];
  int64_t m = s[0], k = s[1], n = s[2];
  float *ha = malloc((size_t)(m * k) * sizeof *ha), *hb = malloc((size_t)(k * n) * sizeof *hb);
  float *hs = malloc((size_t)(m * k) * sizeof *hs), *hp = malloc((size_t)(m * n) * sizeof *hp);
  ct_tensor *a = NULL, *b = NULL, *sum = NULL, *p = NULL, *tot = NULL;
  if (!ha || !hb || !hs || !hp) {
    stress_fail(why, "out of host memory");
    goto done;
  }
  for (int64_t i = 0; i < m * k; i++) ha[i] = (float)((int)(stress_rand(rng) % 5) - 2);
  for (int64_t i = 0; i < k * n; i++) hb[i] = (float)((int)(stress_rand(rng) % 5) - 2);
  STRESS_TRY(ct_from_host(&a, d, CT_F32, 2, (int64_t[]){m, k}, ha));
  STRESS_TRY(ct_from_host(&b, d, CT_F32, 2, (int64_t[]){k, n}, hb));
  STRESS_TRY(ct_add(&sum, a, a));
  STRESS_TRY(ct_matmul(&p, a, b));
  STRESS_TRY(ct_sum(&tot, p, 0, NULL, false));
  float htot = 0;
  STRESS_TRY(ct_to_host(sum, hs, (size_t)(m * k) * sizeof *hs));
  STRESS_TRY(ct_to_host(p, hp, (size_t)(m * n) * sizeof *hp));
  STRESS_TRY(ct_to_host(tot, &htot, sizeof htot));
  for (int64_t i = 0; i < m * k; i++)
    STRESS_CHECK(hs[i] == 2 * ha[i], "round %d: a + a [%lld] is %g, expected %g", round, (long long)i, hs[i],
                 2 * ha[i]);
  int64_t wrong = 0, first = -1;
  double want_tot = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float e = 0;
      for (int64_t q = 0; q < k; q++) e += ha[i * k + q] * hb[q * n + j];
      want_tot += e;
      if (hp[i * n + j] != e) {
        if (first < 0) first = i * n + j;
        wrong++;
      }
    }
  STRESS_CHECK(wrong == 0, "round %d: [%lld, %lld] @ [%lld, %lld]: %lld of %lld elements wrong (first at %lld)",
               round, (long long)m, (long long)k, (long long)k, (long long)n, (long long)wrong,
               (long long)(m * n), (long long)first);
  STRESS_CHECK((double)htot == want_tot, "round %d: sum of the product is %g, expected %g", round, htot, want_tot);
  ok = 1;
done:
  ct_release(tot);
  ct_release(p);
  ct_release(sum);
  ct_release(b);
  ct_release(a);
  free(hp);
  free(hs);
  free(hb);
  free(ha);
  return ok;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  uint32_t rng = 0x9e3779b9u * (uint32_t)(w->id + 1);
  pthread_barrier_wait(w->start);
  w->ok = 1;
  for (int r = 0; r < rounds && w->ok; r++) {
    if (r > 0 && since(&w->t0) > cap_s) break;
    w->ok = one_round(w->d, &rng, r, &w->why);
    if (w->ok) w->done_rounds++;
  }
  return NULL;
}

START_TEST(test_matmul_threads) {
  ct_device *d = ct_test_device();
  ct_gemm_route route;
  ck_assert_ct_ok(ct_gemm_route_get(&route, d));
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  struct worker w[THREADS];
  pthread_t th[THREADS];
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    w[i].d = d;
    w[i].start = &start;
    w[i].t0 = t0;
    ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  int total = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    total += w[i].done_rounds;
  }
  pthread_barrier_destroy(&start);
  for (int i = 0; i < THREADS; i++) ck_assert_msg(w[i].ok, "thread %d: %s", i, w[i].why.text);
  printf("# %d threads, GEMM route %s: %d rounds, every product right\n", THREADS, ct_gemm_route_name(route), total);
}
END_TEST

int main(int argc, char **argv) {
  if (argc > 1) rounds = atoi(argv[1]);
  if (argc > 2) cap_s = atof(argv[2]);
  Suite *s = suite_create("matmul-threads");
  TCase *tc = tcase_create("matmul-threads");
  tcase_set_timeout(tc, 600);
  tcase_set_tags(tc, "threads");
  tcase_add_test(tc, test_matmul_threads);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
