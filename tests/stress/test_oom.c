/* OOM storm under CLTENSOR_MEMORY_LIMIT (64 MiB per device, set by meson.build): allocate until
 * CT_ERR_OUT_OF_MEMORY (sequentially, and from four threads at once), check the failure is
 * clean and its message complete, compute while memory is full, release everything and compute
 * again: results correct and the allocator's statistics back to where they started. */
#include <pthread.h>

#include "clcount.h"
#include "ct_test.h"
#include "stress.h"

#define LIMIT (64ull << 20)

static ct_memory_stats stats_of(ct_device *d) {
  ct_memory_stats s = {.size = sizeof s};
  ck_assert_ct_ok(ct_device_get_memory_stats(&s, d));
  return s;
}

/* Sizes (in f32 elements) cycled by the storm: large blocks, small ones, odd ones. */
static const int64_t storm_sizes[] = {262144, 1000, 786432 + 3, 17, 131072, 524288 * 3, 4099, 65536};
enum { NSIZES = sizeof storm_sizes / sizeof storm_sizes[0], MAX_HELD = 100000 };

/* Allocates tensors until the allocator refuses; returns how many are held in held[]. */
static int storm(ct_device *d, ct_tensor **held, int start, char *msg, size_t msglen) {
  int n = 0;
  for (;;) {
    ck_assert_int_lt(n, MAX_HELD);
    int64_t shape[1] = {storm_sizes[(start + n) % NSIZES]};
    ct_tensor *t = NULL;
    ct_status st = ct_empty(&t, d, CT_F32, 1, shape);
    if (st == CT_ERR_OUT_OF_MEMORY) {
      ck_assert_ptr_null(t);
      snprintf(msg, msglen, "%s", ct_last_error());
      return n;
    }
    ck_assert_msg(st == CT_OK, "ct_empty: %s: %s", ct_status_name(st), ct_last_error());
    held[n++] = t;
  }
}

static void check_oom_message(const char *msg, ct_device *d) {
  ck_assert_msg(strstr(msg, "out of memory") != NULL, "message: %s", msg);
  ck_assert_msg(strstr(msg, ct_device_spec(d)) != NULL, "no device in: %s", msg);
  ck_assert_msg(strstr(msg, "CLTENSOR_MEMORY_LIMIT") != NULL, "no limit in: %s", msg);
  ck_assert_msg(strstr(msg, "64.00 MiB") != NULL, "no limit value in: %s", msg);
}

static void compute_ok(ct_device *d, uint32_t seed) {
  stress_why why = {{0}};
  long ops = 0;
  ck_assert_msg(stress_workload(d, 37, 29, seed, NULL, 0, &ops, &why), "%s", why.text);
}

START_TEST(test_storm_sequential) {
  ct_device *d = ct_test_device();
  ck_assert_uint_eq(stats_of(d).limit_bytes, LIMIT);
  compute_ok(d, 1); /* kernels built, the workload's blocks cached */
  ck_assert_ct_ok(ct_empty_cache(d));
  ct_memory_stats s0 = stats_of(d);
  ck_assert_uint_eq(s0.allocated_bytes, 0);
  ck_assert_uint_eq(s0.reserved_bytes, 0);

  ct_tensor **held = calloc(MAX_HELD, sizeof *held);
  char msg[4096];
  for (int round = 0; round < 6; round++) {
    int n = storm(d, held, round, msg, sizeof msg);
    check_oom_message(msg, d);
    ct_memory_stats full = stats_of(d);
    ck_assert_uint_le(full.reserved_bytes, LIMIT);
    /* Full means the failing request did not fit: within one request (at most 6 MiB rounded to
     * 2 MiB) of the limit. */
    ck_assert_msg(full.reserved_bytes + (8ull << 20) > LIMIT, "round %d: refused at %llu reserved of %llu", round,
                  (unsigned long long)full.reserved_bytes, LIMIT);
    ck_assert_int_gt(n, 0);
    /* An op while memory is full fails cleanly, or succeeds when its output fits. */
    ct_tensor *c = NULL;
    ct_status st = ct_cast(&c, held[0], CT_I32);
    ck_assert_msg(st == CT_OK || st == CT_ERR_OUT_OF_MEMORY, "ct_cast on a full device: %s", ct_status_name(st));
    ct_release(c);
    /* Release in an order that exercises merging: every other one, then the rest. */
    for (int i = 0; i < n; i += 2) ct_release(held[i]);
    for (int i = 1; i < n; i += 2) ct_release(held[i]);
    ct_memory_stats after = stats_of(d);
    ck_assert_uint_eq(after.allocated_bytes, s0.allocated_bytes);
    compute_ok(d, (uint32_t)round + 2);
    ck_assert_uint_eq(stats_of(d).allocated_bytes, s0.allocated_bytes);
    printf("# storm round %d: %d tensors held, %llu bytes reserved at the refusal\n", round, n,
           (unsigned long long)full.reserved_bytes);
  }
  free(held);
  ck_assert_ct_ok(ct_empty_cache(d));
  ct_memory_stats s1 = stats_of(d);
  ck_assert_uint_eq(s1.allocated_bytes, s0.allocated_bytes);
  ck_assert_uint_eq(s1.reserved_bytes, s0.reserved_bytes);
  ck_assert_uint_le(s1.peak_reserved_bytes, LIMIT);
  ct_shutdown();
  char counts[256];
  ck_assert_msg(clcount_all_released(), "OpenCL objects still held: %s", clcount_format(counts, sizeof counts));
}
END_TEST

struct storm_thread {
  ct_device *d;
  int id;
  pthread_barrier_t *start, *full;
  int held_count, refusals, ok;
  stress_why why;
};

static void *storm_thread_main(void *arg) {
  struct storm_thread *s = arg;
  stress_why *why = &s->why;
  ct_tensor **held = calloc(MAX_HELD, sizeof *held);
  s->ok = held != NULL;
  pthread_barrier_wait(s->start);
  int n = 0;
  while (s->ok && n < MAX_HELD) {
    int64_t shape[1] = {storm_sizes[(s->id * 3 + n) % NSIZES]};
    ct_tensor *t = NULL;
    ct_status st = ct_empty(&t, s->d, CT_F32, 1, shape);
    if (st == CT_ERR_OUT_OF_MEMORY) {
      if (strstr(ct_last_error(), "out of memory") == NULL) {
        s->ok = stress_fail(why, "OOM message: %s", ct_last_error());
      }
      s->refusals++;
      /* Others may still be releasing nothing: stop after a few refusals in a row. */
      if (s->refusals >= 3) break;
      continue;
    }
    if (st != CT_OK) {
      s->ok = stress_fail(why, "ct_empty: %s: %s", ct_status_name(st), ct_last_error());
      break;
    }
    held[n++] = t;
  }
  s->held_count = n;
  pthread_barrier_wait(s->full);
  for (int i = 0; i < n; i++) ct_release(held[i]);
  free(held);
  if (s->ok) {
    long ops = 0;
    s->ok = stress_workload(s->d, 11, 13, (uint32_t)s->id, NULL, 0, &ops, why);
  }
  return NULL;
}

START_TEST(test_storm_threads) {
  enum { T = 4 };
  ct_device *d = ct_test_device();
  compute_ok(d, 5);
  ck_assert_ct_ok(ct_empty_cache(d));
  ct_memory_stats s0 = stats_of(d);
  pthread_barrier_t start, full;
  pthread_barrier_init(&start, NULL, T);
  pthread_barrier_init(&full, NULL, T);
  struct storm_thread st[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    memset(&st[i], 0, sizeof st[i]);
    st[i].d = d;
    st[i].id = i;
    st[i].start = &start;
    st[i].full = &full;
    ck_assert_int_eq(pthread_create(&th[i], NULL, storm_thread_main, &st[i]), 0);
  }
  int total = 0;
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    total += st[i].held_count;
  }
  pthread_barrier_destroy(&start);
  pthread_barrier_destroy(&full);
  for (int i = 0; i < T; i++) ck_assert_msg(st[i].ok, "thread %d: %s", i, st[i].why.text);
  ct_memory_stats s1 = stats_of(d);
  ck_assert_uint_eq(s1.allocated_bytes, s0.allocated_bytes);
  ck_assert_uint_le(s1.peak_reserved_bytes, LIMIT);
  ck_assert_ct_ok(ct_empty_cache(d));
  ck_assert_uint_eq(stats_of(d).reserved_bytes, s0.reserved_bytes);
  printf("# %d threads held %d tensors together at the limit, then computed correctly\n", T, total);
  ct_shutdown();
}
END_TEST

/* The limit is per device: one full device leaves the other usable. */
START_TEST(test_storm_two_devices) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  ck_assert_int_ge(n, 2);
  ct_device *a, *b;
  ck_assert_ct_ok(ct_device_get(&a, 0));
  ck_assert_ct_ok(ct_device_get(&b, 1));
  ct_tensor **held = calloc(MAX_HELD, sizeof *held);
  char msg[4096];
  int k = storm(a, held, 0, msg, sizeof msg);
  check_oom_message(msg, a);
  compute_ok(b, 9);
  ck_assert_uint_eq(stats_of(b).limit_bytes, LIMIT);
  for (int i = 0; i < k; i++) ct_release(held[i]);
  free(held);
  compute_ok(a, 10);
  ck_assert_uint_eq(stats_of(a).allocated_bytes, 0);
  ck_assert_uint_eq(stats_of(b).allocated_bytes, 0);
  ct_shutdown();
}
END_TEST

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "one";
  Suite *s = suite_create("oom");
  TCase *tc = tcase_create(mode);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_storm_sequential);
  suite_add_tcase(s, tc);
  if (strcmp(mode, "two") == 0) {
    TCase *t2 = tcase_create("two");
    tcase_set_timeout(t2, 600);
    tcase_set_tags(t2, "two-devices"); /* skipped under Oclgrind, a single device */
    tcase_add_test(t2, test_storm_two_devices);
    suite_add_tcase(s, t2);
  }
  TCase *tt = tcase_create("threads");
  tcase_set_timeout(tt, 600);
  tcase_set_tags(tt, "threads"); /* skipped under Oclgrind, which runs one kernel at a time */
  tcase_add_test(tt, test_storm_threads);
  suite_add_tcase(s, tt);
  return ct_test_run(s);
}
