/* Profiler: recording kernels and other commands, the table and the entries, start/stop/reset,
 * a device opened before profiling, CLTENSOR_PROFILE=1 at shutdown, concurrency, no events
 * when off. Kernels are tiny generated sources, so nothing here depends on the ops.
 *
 * Each test runs in its own forked process and sets the environment it needs first. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ct_test.h"
#include "device/device.h"
#include "kernel/engine.h"
#include "linalg/linalg.h"
#include "profile/profile.h"

static const char *SRC =
    "__kernel void prof_inc(__global int *x) { x[get_global_id(0)] += 1; }\n"
    "__kernel void prof_dbl(__global int *x) { x[get_global_id(0)] *= 2; }\n";

struct buf {
  ct_device *d;
  cl_mem mem;
  int n;
};

static struct buf make_buf(ct_device *d, int n) {
  cl_int err;
  struct buf b = {d, NULL, n};
  ck_assert_ct_ok(ct_device_open(d));
  int *host = calloc((size_t)n, sizeof *host);
  b.mem = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                         (size_t)n * sizeof *host, host, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  free(host);
  return b;
}

static void launch(struct buf *b, const char *kernel, int times) {
  ct__kernel *k;
  ck_assert_ct_ok(ct__kernel_get_source(&k, b->d, SRC, kernel, NULL));
  for (int i = 0; i < times; i++) {
    cl_kernel ck = ct__kernel_lock(k);
    clSetKernelArg(ck, 0, sizeof b->mem, &b->mem);
    size_t g = (size_t)b->n;
    ct_status st = ct__kernel_launch(k, b->d, 1, &g, NULL);
    ct__kernel_unlock(k);
    ck_assert_msg(st == CT_OK, "%s", ct_last_error());
  }
}

static const ct_profile_entry *find(const ct_profile_entry *e, size_t n, const char *op) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(e[i].op, op) == 0) return &e[i];
  return NULL;
}

static size_t entries(ct_profile_entry *out, size_t cap) {
  size_t n = 0;
  if (cap > 0) out[0].size = sizeof *out;
  ck_assert_ct_ok(ct_profile_get_entries(out, cap, &n));
  return n;
}

/* Whether d's driver gives real command times (a blocking 4-byte write timed by its event):
 * rusticl 22.3 answers 0, 1, 2, 3 ns for every command, which the profiler counts as untimed
 * (docs/PORTABILITY.md). Where it does not, the tests expect no timed calls, and say the timed
 * part is skipped. Call after ct_profile_start() (the queue profiles). */
static bool driver_times(ct_device *d) {
  cl_context ctx;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  cl_int err;
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  int x = 1;
  cl_event ev;
  ck_assert_int_eq(clEnqueueWriteBuffer(ct__device_queue(d), m, CL_TRUE, 0, 4, &x, 0, NULL, &ev), CL_SUCCESS);
  cl_ulong t0 = 0, t1 = 0;
  ck_assert_int_eq(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL), CL_SUCCESS);
  ck_assert_int_eq(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL), CL_SUCCESS);
  clReleaseEvent(ev);
  clReleaseMemObject(m);
  return ct_test_needs(t1 > t0 + 1, "the recorded commands' device times", "profiling times (more than 1 ns a command)",
                       d);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  char *text = calloc(1, 1 << 16);
  size_t n = fread(text, 1, (1 << 16) - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

/* The calls column of op's row in a dumped table; -1 when the row is missing. */
static long calls_in_table(const char *table, const char *op) {
  size_t n = strlen(op);
  for (const char *line = table; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    if (strncmp(line, op, n) == 0 && line[n] == ' ') return strtol(line + n, NULL, 10);
  }
  return -1;
}

static char *tmp_path(const char *name) {
  const char *base = getenv("TMPDIR");
  char *p = malloc(4096);
  snprintf(p, 4096, "%s/ct-profile-%ld-%s", base && *base ? base : "/tmp", (long)getpid(), name);
  return p;
}

static void clean_env(void) {
  fflush(stdout);
  dup2(STDERR_FILENO, STDOUT_FILENO); /* keep driver chatter out of the parent's TAP stream */
  unsetenv("CLTENSOR_PROFILE");
  unsetenv("CLTENSOR_PROFILE_FILE");
  setenv("CLTENSOR_CACHE", "0", 1);
}

START_TEST(test_records_kernels_and_transfers) {
  ck_assert(!ct_profile_is_enabled());
  ck_assert_ct_ok(ct_profile_start());
  ck_assert(ct_profile_is_enabled());
  ct_device *d = ct_test_device();
  struct buf b = make_buf(d, 1024);
  ck_assert_int_eq(d->queue_profiling, 1);
  launch(&b, "prof_inc", 10);
  launch(&b, "prof_dbl", 5);
  /* A transfer, recorded the way the tensor layer does it. */
  int host[1024];
  cl_event ev;
  cl_event *evp = ct__profile_event(d, &ev);
  ck_assert_ptr_eq(evp, &ev);
  ck_assert_int_eq(clEnqueueReadBuffer(ct__device_queue(d), b.mem, CL_TRUE, 0, sizeof host, host, 0, NULL, evp),
                   CL_SUCCESS);
  ct__profile_record(d, "d2h", ev);
  ck_assert_int_eq(host[0], 320); /* (0 + 10) * 2^5 */

  ct_profile_entry e[16];
  size_t n = entries(e, 16);
  ck_assert_uint_eq(n, 3);
  const ct_profile_entry *inc = find(e, n, "prof_inc"), *dbl = find(e, n, "prof_dbl"), *xfer = find(e, n, "d2h");
  ck_assert_ptr_nonnull(inc);
  ck_assert_ptr_nonnull(dbl);
  ck_assert_ptr_nonnull(xfer);
  bool t = driver_times(d);
  ck_assert_uint_eq(inc->calls, 10);
  ck_assert_uint_eq(inc->timed_calls, t ? 10 : 0);
  ck_assert_uint_eq(dbl->calls, 5);
  ck_assert_uint_eq(dbl->timed_calls, t ? 5 : 0);
  ck_assert_uint_eq(xfer->calls, 1);
  ck_assert_uint_eq(xfer->timed_calls, t ? 1 : 0);
  ck_assert_ptr_eq(inc->device, d);
  if (t) ck_assert(inc->total_ms > 0.0 && dbl->total_ms > 0.0);
  for (size_t i = 1; i < n; i++) ck_assert(e[i - 1].total_ms >= e[i].total_ms); /* largest first */
  /* Asking with a small array gives the full count. */
  size_t count = 0;
  ck_assert_ct_ok(ct_profile_get_entries(NULL, 0, &count));
  ck_assert_uint_eq(count, 3);
  ck_assert_ct_ok(ct_profile_get_entries(e, 1, &count));
  ck_assert_uint_eq(count, 3);

  char *path = tmp_path("table.txt");
  ck_assert_ct_ok(ct_profile_dump_to_file(path));
  char *table = slurp(path);
  char head[64];
  snprintf(head, sizeof head, "cltensor profile: %s (", ct_device_spec(d));
  ck_assert_msg(strncmp(table, head, strlen(head)) == 0, "%s", table);
  ck_assert_ptr_nonnull(strstr(table, "share %"));
  ck_assert_ptr_nonnull(strstr(table, "mean us"));
  ck_assert_int_eq(calls_in_table(table, "prof_inc"), 10);
  ck_assert_int_eq(calls_in_table(table, "prof_dbl"), 5);
  ck_assert_int_eq(calls_in_table(table, "d2h"), 1);
  ck_assert_int_eq(calls_in_table(table, "total"), 16);
  ck_assert_ptr_null(strstr(table, "before profiling"));
  free(table);
  unlink(path);
  free(path);
  clReleaseMemObject(b.mem);
  ct_shutdown();
}
END_TEST

START_TEST(test_stop_and_reset) {
  ck_assert_ct_ok(ct_profile_start());
  ct_device *d = ct_test_device();
  struct buf b = make_buf(d, 64);
  launch(&b, "prof_inc", 3);
  ct_profile_stop();
  ck_assert(!ct_profile_is_enabled());
  launch(&b, "prof_inc", 4); /* not recorded */
  cl_event ev;
  ck_assert_ptr_null(ct__profile_event(d, &ev));
  ct_profile_entry e[4];
  ck_assert_uint_eq(entries(e, 4), 1);
  ck_assert_uint_eq(e[0].calls, 3);
  /* Data survives stop; restart adds to it. */
  ck_assert_ct_ok(ct_profile_start());
  launch(&b, "prof_inc", 2);
  ck_assert_uint_eq(entries(e, 4), 1);
  ck_assert_uint_eq(e[0].calls, 5);
  ct_profile_reset();
  ck_assert(ct_profile_is_enabled());
  ck_assert_uint_eq(entries(e, 4), 0);
  char *path = tmp_path("empty.txt");
  ck_assert_ct_ok(ct_profile_dump_to_file(path));
  char *table = slurp(path);
  ck_assert_str_eq(table, "cltensor profile: no commands recorded\n");
  free(table);
  unlink(path);
  free(path);
  launch(&b, "prof_dbl", 1);
  ck_assert_uint_eq(entries(e, 4), 1);
  ck_assert_str_eq(e[0].op, "prof_dbl");
  clReleaseMemObject(b.mem);
  ct_shutdown();
}
END_TEST

START_TEST(test_off_creates_no_events) {
  ct_device *d = ct_test_device();
  struct buf b = make_buf(d, 64);
  ck_assert_int_eq(d->queue_profiling, 0);
  launch(&b, "prof_inc", 5);
  cl_event ev = (cl_event)1;
  ck_assert_ptr_null(ct__profile_event(d, &ev));
  ck_assert_ptr_null(ev);
  ct__profile_record(d, "ignored", NULL);
  ck_assert_ptr_null(atomic_load(&d->slot[CT__SLOT_PROFILE])); /* no state was even created */
  ct_profile_entry e[4];
  ck_assert_uint_eq(entries(e, 4), 0);
  clReleaseMemObject(b.mem);
  ct_shutdown();
}
END_TEST

START_TEST(test_device_opened_before_start) {
  ct_device *d = ct_test_device();
  ck_assert_ct_ok(ct_device_open(d));
  ck_assert_int_eq(d->queue_profiling, 0);
  ck_assert_ct_ok(ct_profile_start());
  struct buf b = make_buf(d, 64);
  launch(&b, "prof_inc", 3);
  ct_profile_entry e[4];
  ck_assert_uint_eq(entries(e, 4), 1);
  ck_assert_uint_eq(e[0].calls, 3);
  ck_assert_uint_eq(e[0].timed_calls, 0);
  char *path = tmp_path("unprofiled.txt");
  ck_assert_ct_ok(ct_profile_dump_to_file(path));
  char *table = slurp(path);
  ck_assert_msg(strstr(table, "created before profiling was asked for"), "%s", table);
  ck_assert_int_eq(calls_in_table(table, "prof_inc"), 3);
  free(table);
  unlink(path);
  free(path);
  clReleaseMemObject(b.mem);
  ct_shutdown();
  /* After shutdown the device reopens with a profiling queue (ct_profile_start() is sticky). */
  d = ct_test_device();
  ck_assert_ct_ok(ct_device_open(d));
  ck_assert_int_eq(d->queue_profiling, 1);
  ct_shutdown();
}
END_TEST

START_TEST(test_env_prints_table_at_shutdown) {
  char *path = tmp_path("shutdown.txt");
  setenv("CLTENSOR_PROFILE", "1", 1);
  setenv("CLTENSOR_PROFILE_FILE", path, 1);
  ck_assert(ct_profile_is_enabled());
  ct_device *d = ct_test_device();
  struct buf b = make_buf(d, 256);
  ck_assert_int_eq(d->queue_profiling, 1);
  launch(&b, "prof_inc", 7);
  launch(&b, "prof_dbl", 2);
  clReleaseMemObject(b.mem);
  ct_shutdown();
  char *table = slurp(path);
  ck_assert_int_eq(calls_in_table(table, "prof_inc"), 7);
  ck_assert_int_eq(calls_in_table(table, "prof_dbl"), 2);
  ck_assert_int_eq(calls_in_table(table, "total"), 9);
  free(table);
  unlink(path);
  free(path);
}
END_TEST

/* CLTENSOR_PROFILE=value leaves profiling off, and the device opens without timing. */
static void expect_env_off(const char *value) {
  setenv("CLTENSOR_PROFILE", value, 1);
  ck_assert(!ct_profile_is_enabled());
  ct_device *d = ct_test_device();
  ck_assert_ct_ok(ct_device_open(d));
  ck_assert_int_eq(d->queue_profiling, 0);
  ct_shutdown();
}

START_TEST(test_env_zero_is_off) { expect_env_off("0"); }
END_TEST

/* Runs 3 kernels with CLTENSOR_PROFILE=1 and CLTENSOR_PROFILE_FILE=file, shuts down with this
 * process's stderr going to a file, and returns what was written there (malloc'ed). */
static char *shutdown_stderr(const char *file) {
  setenv("CLTENSOR_PROFILE", "1", 1);
  setenv("CLTENSOR_PROFILE_FILE", file, 1);
  char *cap = tmp_path("stderr.txt");
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  FILE *c = fopen(cap, "w");
  ck_assert_ptr_nonnull(c);
  ct_device *d = ct_test_device();
  struct buf b = make_buf(d, 64);
  launch(&b, "prof_inc", 3);
  clReleaseMemObject(b.mem);
  dup2(fileno(c), STDERR_FILENO);
  ct_shutdown();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  fclose(c);
  char *text = slurp(cap);
  unlink(cap);
  free(cap);
  return text;
}

/* A full device: the table is not lost without a word; the failure and the table go to stderr. */
START_TEST(test_env_file_write_error_is_reported) {
  char *err = shutdown_stderr("/dev/full");
  ck_assert_msg(strstr(err, "cltensor profile: cannot write $CLTENSOR_PROFILE_FILE='/dev/full' (No space "
                            "left on device); the table follows here\n") != NULL, "stderr: %s", err);
  ck_assert_int_eq(calls_in_table(err, "prof_inc"), 3);
  ck_assert_ptr_null(strstr(strstr(err, "follows here") + 1, "follows here")); /* said once */
  free(err);
}
END_TEST

/* The path is escaped in the message (it comes from the environment), and a FIFO nobody reads
 * is an error at once, not a hang at exit. */
START_TEST(test_env_file_unwritable_paths) {
  char *dir = tmp_path("no\x1b[31mdir/table.txt");
  char *err = shutdown_stderr(dir);
  ck_assert_msg(strstr(err, "no\\x1b[31mdir/table.txt' (No such file or directory)") != NULL, "stderr: %s", err);
  ck_assert_ptr_null(strchr(err, '\x1b'));
  ck_assert_int_eq(calls_in_table(err, "prof_inc"), 3);
  free(err);
  free(dir);
}
END_TEST

START_TEST(test_env_file_fifo_does_not_hang) {
  char *fifo = tmp_path("fifo");
  unlink(fifo); /* a killed earlier run may have left one under a reused pid */
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  char *err = shutdown_stderr(fifo);
  unlink(fifo);
  ck_assert_msg(strstr(err, "(No such device or address); the table follows here") != NULL, "stderr: %s", err);
  ck_assert_int_eq(calls_in_table(err, "prof_inc"), 3);
  free(err);
  free(fifo);
}
END_TEST

/* CLTENSOR_PROFILE follows the one rule for boolean variables: words in any case, and anything
 * else is an error naming the variable (escaped), from ct_device_open, not "on". */
START_TEST(test_env_boolean_rule) {
  setenv("CLTENSOR_PROFILE", "garbage\x1b[2J", 1);
  ck_assert(!ct_profile_is_enabled());
  ck_assert_str_eq(ct_last_error(), ""); /* asking leaves the message alone */
  ct_device *d = ct_test_device();
  ck_assert_ct_status(ct_device_open(d), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_device_open: $CLTENSOR_PROFILE='garbage\\x1b[2J' is not a boolean");
  ck_assert_ptr_null(strchr(ct_last_error(), '\x1b'));
  ct_shutdown();
}
END_TEST

START_TEST(test_env_boolean_words) {
  setenv("CLTENSOR_PROFILE", "Yes", 1);
  ck_assert(ct_profile_is_enabled());
  ct_device *d = ct_test_device();
  ck_assert_ct_ok(ct_device_open(d));
  ck_assert_int_eq(d->queue_profiling, 1);
  ct_shutdown();
}
END_TEST

START_TEST(test_env_boolean_off) { expect_env_off("OFF"); }
END_TEST

START_TEST(test_many_launches_resolve_in_batches) {
  ck_assert_ct_ok(ct_profile_start());
  ct_device *d = ct_test_device();
  struct buf b = make_buf(d, 16);
  launch(&b, "prof_inc", 3000); /* several batches of pending events */
  ct_profile_entry e[2];
  ck_assert_uint_eq(entries(e, 2), 1);
  ck_assert_uint_eq(e[0].calls, 3000);
  ck_assert_uint_eq(e[0].timed_calls, driver_times(d) ? 3000 : 0);
  clReleaseMemObject(b.mem);
  ct_shutdown();
}
END_TEST

#define NTHREADS 8
#define PER_THREAD 200

static void *worker(void *arg) {
  struct buf *b = arg;
  ct__kernel *k;
  if (ct__kernel_get_source(&k, b->d, SRC, "prof_inc", NULL) != CT_OK) return (void *)1;
  char op[32];
  snprintf(op, sizeof op, "thread_op_%d", b->n % NTHREADS);
  for (int i = 0; i < PER_THREAD; i++) {
    cl_kernel ck = ct__kernel_lock(k);
    clSetKernelArg(ck, 0, sizeof b->mem, &b->mem);
    size_t g = 16;
    ct_status st = ct__kernel_launch(k, b->d, 1, &g, NULL);
    ct__kernel_unlock(k);
    if (st != CT_OK) return (void *)1;
    ct__profile_record(b->d, op, NULL); /* counted, untimed */
    if (i % 50 == 0) {
      ct_profile_entry e[32] = {{.size = sizeof e[0]}};
      size_t n;
      if (ct_profile_get_entries(e, 32, &n) != CT_OK) return (void *)1;
    }
  }
  return NULL;
}

START_TEST(test_concurrent_recording_is_exact) {
  ck_assert_ct_ok(ct_profile_start());
  ct_device *d = ct_test_device();
  struct buf bufs[NTHREADS];
  pthread_t th[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    bufs[i] = make_buf(d, 16);
    bufs[i].n = 16 * NTHREADS + i; /* n % NTHREADS names the thread's op; 16 elements launched */
  }
  for (int i = 0; i < NTHREADS; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &bufs[i]), 0);
  for (int i = 0; i < NTHREADS; i++) {
    void *r;
    pthread_join(th[i], &r);
    ck_assert_ptr_null(r);
  }
  ct_profile_entry e[32];
  size_t n = entries(e, 32);
  ck_assert_uint_eq(n, 1 + NTHREADS);
  const ct_profile_entry *inc = find(e, n, "prof_inc");
  ck_assert_ptr_nonnull(inc);
  ck_assert_uint_eq(inc->calls, NTHREADS * PER_THREAD);
  ck_assert_uint_eq(inc->timed_calls, driver_times(d) ? NTHREADS * PER_THREAD : 0);
  for (int i = 0; i < NTHREADS; i++) {
    char op[32];
    snprintf(op, sizeof op, "thread_op_%d", i);
    const ct_profile_entry *x = find(e, n, op);
    ck_assert_ptr_nonnull(x);
    ck_assert_uint_eq(x->calls, PER_THREAD);
    ck_assert_uint_eq(x->timed_calls, 0);
  }
  for (int i = 0; i < NTHREADS; i++) clReleaseMemObject(bufs[i].mem);
  ct_shutdown();
}
END_TEST

START_TEST(test_argument_errors) {
  ck_assert_ct_status(ct_profile_dump(NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_profile_dump_to_file(NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_profile_dump_to_file("/nonexistent-dir/x/profile.txt"), CT_ERR_IO);
  ck_assert_error_contains("/nonexistent-dir/x/profile.txt");
  ct_profile_entry e = {.size = sizeof e};
  size_t n;
  ck_assert_ct_status(ct_profile_get_entries(NULL, 1, &n), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_profile_get_entries(&e, 1, NULL), CT_ERR_INVALID_ARGUMENT);
  /* The size field: unset, too small, misaligned. */
  e.size = 0;
  ck_assert_ct_status(ct_profile_get_entries(&e, 1, &n), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("out[0].size is 0");
  e.size = sizeof e - 8;
  ck_assert_ct_status(ct_profile_get_entries(&e, 1, &n), CT_ERR_INVALID_ARGUMENT);
  e.size = sizeof e + 1;
  ck_assert_ct_status(ct_profile_get_entries(&e, 1, &n), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A later, larger layout: out[0].size is the stride, each row gets this layout's bytes and its
 * tail is left alone. */
START_TEST(test_entries_larger_layout) {
  ck_assert_ct_ok(ct_profile_start());
  ct_device *d = ct_test_device();
  float host[4] = {1, 2, 3, 4}, back[4];
  int64_t shape[1] = {4};
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, shape, host)); /* h2d */
  ck_assert_ct_ok(ct_to_host(t, back, sizeof back));            /* d2h */
  ct_profile_entry plain[4] = {{.size = sizeof plain[0]}};
  size_t n = 0, m = 0;
  ck_assert_ct_ok(ct_profile_get_entries(plain, 4, &n));
  ck_assert_uint_ge(n, 2);
  struct later {
    ct_profile_entry e;
    uint64_t extra;
  } rows[4];
  memset(rows, 0xab, sizeof rows);
  rows[0].e.size = sizeof rows[0];
  ck_assert_ct_ok(ct_profile_get_entries(&rows[0].e, 4, &m));
  ck_assert_uint_eq(m, n);
  for (size_t i = 0; i < n && i < 4; i++) {
    ck_assert_uint_eq(rows[i].e.size, sizeof(ct_profile_entry));
    ck_assert_str_eq(rows[i].e.op, plain[i].op);
    ck_assert_uint_eq(rows[i].e.calls, plain[i].calls);
    ck_assert_uint_eq(rows[i].extra, 0xababababababababull);
  }
  ct_release(t);
  ct_profile_stop();
  ct_shutdown();
}
END_TEST

START_TEST(test_tensor_transfers_are_recorded) {
  ck_assert_ct_ok(ct_profile_start());
  ct_device *d = ct_test_device();
  float host[256], back[256];
  for (int i = 0; i < 256; i++) host[i] = (float)i;
  int64_t shape[1] = {256};
  ct_tensor *t = NULL, *z = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, shape, host));      /* h2d */
  ck_assert_ct_ok(ct_to_host(t, back, sizeof back));                 /* d2h */
  ct_event *ev = NULL;
  ck_assert_ct_ok(ct_to_host_async(&ev, t, back, sizeof back));       /* d2h, the user's event */
  ck_assert_ct_ok(ct_event_wait(ev));
  ct_event_free(ev);
  ck_assert_ct_ok(ct_copy_from_host(t, host, sizeof host));           /* h2d */
  ck_assert_ct_ok(ct_zeros(&z, d, CT_F32, 1, shape));                 /* fill */
  ck_assert_int_eq(memcmp(host, back, sizeof host), 0);
  ct_profile_entry e[16];
  size_t n = entries(e, 16);
  const ct_profile_entry *h2d = find(e, n, "h2d"), *d2h = find(e, n, "d2h"), *fill = find(e, n, "fill");
  ck_assert_ptr_nonnull(h2d);
  ck_assert_ptr_nonnull(d2h);
  ck_assert_ptr_nonnull(fill);
  ck_assert_uint_eq(h2d->calls, 2);
  ck_assert_uint_eq(d2h->calls, 2);
  ck_assert_uint_eq(d2h->timed_calls, driver_times(d) ? 2 : 0);
  ck_assert_uint_eq(fill->calls, 1);
  ct_release(z);
  ct_release(t);
  ct_shutdown();
}
END_TEST

/* A 64x64 f32 product on the route CLTENSOR_GEMM names; returns the profile entry op, and in
 * *times (unless NULL) whether the driver gives command times (driver_times). */
static ct_profile_entry gemm_entry(const char *route, const char *op, bool *times) {
  setenv("CLTENSOR_GEMM", route, 1);
  ck_assert_ct_ok(ct_profile_start());
  ct_device *d = ct_test_device();
  static float host[64 * 64];
  for (int i = 0; i < 64 * 64; i++) host[i] = (float)(i % 7);
  int64_t shape[2] = {64, 64};
  ct_tensor *a = NULL, *c = NULL;
  ck_assert_ct_ok(ct_from_host(&a, d, CT_F32, 2, shape, host));
  for (int i = 0; i < 3; i++) {
    ck_assert_ct_ok(ct_matmul(&c, a, a));
    ct_release(c);
  }
  ct_profile_entry e[16];
  size_t n = entries(e, 16);
  const ct_profile_entry *g = find(e, n, op);
  ck_assert_msg(g != NULL, "no '%s' row among %zu", op, n);
  ct_profile_entry r = *g;
  if (times) *times = driver_times(d);
  ct_release(a);
  ct_shutdown();
  return r;
}

/* CLBlast enqueues its own kernels, outside ct__kernel_launch: each call is one row, timed
 * from a marker before it to its last kernel's end. */
START_TEST(test_clblast_gemm_is_recorded) {
  bool t;
  ct_profile_entry g = gemm_entry("clblast", "CLBlastSgemm", &t);
  ck_assert_uint_eq(g.calls, 3);
  ck_assert_uint_eq(g.timed_calls, t ? 3 : 0);
  if (t) ck_assert(g.total_ms > 0);
}
END_TEST

/* The host-BLAS route: a native kernel's event on PoCL, the host time of the call on devices
 * without native kernels. */
START_TEST(test_host_gemm_is_recorded) {
  if (!ct__gemm_host_available()) return; /* built without -Dhost_blas */
  /* Timed on the host where there are no native kernels: the driver's times do not matter. */
  ct_profile_entry g = gemm_entry("host", "cblas_sgemm (host)", NULL);
  ck_assert_uint_eq(g.calls, 3);
  ck_assert_uint_eq(g.timed_calls, 3);
  ck_assert(g.total_ms > 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("profile");
  TCase *tc = tcase_create("profile");
  tcase_set_timeout(tc, 300);
  tcase_add_checked_fixture(tc, clean_env, NULL);
  tcase_add_test(tc, test_records_kernels_and_transfers);
  tcase_add_test(tc, test_stop_and_reset);
  tcase_add_test(tc, test_off_creates_no_events);
  tcase_add_test(tc, test_device_opened_before_start);
  tcase_add_test(tc, test_env_prints_table_at_shutdown);
  tcase_add_test(tc, test_env_zero_is_off);
  tcase_add_test(tc, test_env_file_write_error_is_reported);
  tcase_add_test(tc, test_env_file_unwritable_paths);
  tcase_add_test(tc, test_env_file_fifo_does_not_hang);
  tcase_add_test(tc, test_env_boolean_rule);
  tcase_add_test(tc, test_env_boolean_words);
  tcase_add_test(tc, test_env_boolean_off);
  tcase_add_test(tc, test_many_launches_resolve_in_batches);
  tcase_add_test(tc, test_concurrent_recording_is_exact);
  tcase_add_test(tc, test_argument_errors);
  tcase_add_test(tc, test_entries_larger_layout);
  tcase_add_test(tc, test_tensor_transfers_are_recorded);
  tcase_add_test(tc, test_clblast_gemm_is_recorded);
  tcase_add_test(tc, test_host_gemm_is_recorded);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
