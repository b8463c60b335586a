/* Kernel engine figures (run with `meson test -C build --benchmark --suite kernel -v`, or the
 * binary itself; nothing here asserts a speed):
 *
 *   first_result   a new process, from exec to the first result back on the host (ct_from_host,
 *                  ct_cast f32 -> f16, ct_to_host: one real library kernel), with the
 *                  cltensor disk cache empty or filled, and PoCL's own kernel cache (which
 *                  holds the code generated per work-group size) empty or filled;
 *   lookup         ct__kernel_get() hit for an embedded file with typical options;
 *   launch         per-launch cost of back-to-back 1024-element launches: a raw
 *                  clEnqueueNDRangeKernel (for peers.c's own add kernel, exactly what
 *                  ../shared/peers/run calls cl_launch) against the engine path an op takes
 *                  (ct__kernel_get + lock + arguments + ct__kernel_launch + unlock), for that
 *                  kernel and for a real library kernel, with the profiler off and on.
 *
 * Each figure is the median of several runs after a warm-up. One JSON object per line. */
#define _GNU_SOURCE
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ct_bench.h"
#include "cltensor/cltensor.h"
#include "device/device.h"
#include "kernel/engine.h"

extern char **environ;

static double minimum(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

static void emit(const char *name, const char *variant, double value, const char *unit) {
  printf("{\"name\": \"%s\", \"variant\": \"%s\", \"value\": %.3f, \"unit\": \"%s\"}\n", name, variant, value, unit);
  fflush(stdout);
}

#define FAIL(...)                       \
  do {                                  \
    fprintf(stderr, __VA_ARGS__);       \
    fprintf(stderr, "\n");              \
    exit(1);                            \
  } while (0)
#define CT_OK_OR_DIE(x)                                                             \
  do {                                                                              \
    ct_status s_ = (x);                                                             \
    if (s_ != CT_OK) FAIL("%s: %s: %s", #x, ct_status_name(s_), ct_last_error()); \
  } while (0)

/* ---- child: the first result of a fresh process ---- */
static int first_result(void) {
  double t0 = ct_bench_now();
  ct_device *d;
  CT_OK_OR_DIE(ct_device_default(&d));
  float host[1024];
  uint16_t half[1024];
  for (int i = 0; i < 1024; i++) host[i] = (float)i * 0.5f;
  int64_t shape[1] = {1024};
  ct_tensor *a = NULL, *b = NULL;
  CT_OK_OR_DIE(ct_from_host(&a, d, CT_F32, 1, shape, host));
  CT_OK_OR_DIE(ct_cast(&b, a, CT_F16));
  CT_OK_OR_DIE(ct_to_host(b, half, sizeof half));
  double t1 = ct_bench_now();
  if (half[2] != 0x3c00) FAIL("wrong result %#x", half[2]); /* 1.0 in f16 */
  struct ct__engine_stats s;
  ct__engine_stats(&s);
  printf("%.3f %lu %lu\n", (t1 - t0) * 1e3, s.builds_from_source, s.loads_from_binary);
  ct_release(b);
  ct_release(a);
  ct_shutdown();
  return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

/* Runs `self first` with the given cache folders; returns the wall time of the whole process
 * in ms and the in-process time to the result in *inner. */
static double spawn_first(const char *self, const char *ct_cache, const char *pocl_cache, double *inner,
                          unsigned long *builds, unsigned long *loads) {
  setenv("CLTENSOR_CACHE_DIR", ct_cache, 1);
  setenv("POCL_CACHE_DIR", pocl_cache, 1);
  int fds[2];
  if (pipe(fds) != 0) FAIL("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  char *args[] = {(char *)self, "first", NULL};
  pid_t pid;
  double t0 = ct_bench_now();
  if (posix_spawn(&pid, self, &fa, NULL, args, environ) != 0) FAIL("spawn");
  close(fds[1]);
  char buf[256] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  int status;
  waitpid(pid, &status, 0);
  double wall = (ct_bench_now() - t0) * 1e3;
  close(fds[0]);
  posix_spawn_file_actions_destroy(&fa);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) FAIL("child failed (%d)", status);
  if (sscanf(buf, "%lf %lu %lu", inner, builds, loads) != 3) FAIL("child said '%s'", buf);
  return wall;
}

static void bench_first_result(const char *self) {
  const char *base = getenv("TMPDIR");
  char root[4096], ct_cache[4200], pocl_cache[4200];
  snprintf(root, sizeof root, "%s/ct-bench-XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(root)) FAIL("mkdtemp");
  enum { RUNS = 5 };
  struct {
    const char *variant;
    int keep_ct, keep_pocl;
  } cases[] = {
      {"cold: both caches empty", 0, 0},
      {"cltensor cache filled, PoCL cache empty", 1, 0},
      {"cltensor cache empty, PoCL cache filled", 0, 1},
      {"warm: both caches filled", 1, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    double wall[RUNS], inner[RUNS];
    unsigned long builds = 0, loads = 0;
    for (int r = 0; r < RUNS; r++) {
      snprintf(ct_cache, sizeof ct_cache, "%s/ct", root);
      snprintf(pocl_cache, sizeof pocl_cache, "%s/pocl", root);
      /* Fill both, then empty what this case wants empty. */
      double ignore;
      unsigned long b0, l0;
      spawn_first(self, ct_cache, pocl_cache, &ignore, &b0, &l0);
      if (!cases[c].keep_ct) nftw(ct_cache, rm_one, 16, FTW_DEPTH | FTW_PHYS);
      if (!cases[c].keep_pocl) nftw(pocl_cache, rm_one, 16, FTW_DEPTH | FTW_PHYS);
      mkdir(pocl_cache, 0700);
      wall[r] = spawn_first(self, ct_cache, pocl_cache, &inner[r], &builds, &loads);
    }
    char v[160];
    snprintf(v, sizeof v, "%s (process wall; built %lu, loaded %lu)", cases[c].variant, builds, loads);
    emit("first_result", v, ct_bench_median(wall, RUNS), "ms");
    snprintf(v, sizeof v, "%s (in process, device lookup to result)", cases[c].variant);
    emit("first_result", v, ct_bench_median(inner, RUNS), "ms");
  }
  nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  unsetenv("POCL_CACHE_DIR");
}

/* ---- child: launch overhead ---- */

/* peers.c's kernel, byte for byte, so the raw figure is its cl_launch. */
static const char *PEERS_ADD =
    "__kernel void add(__global const float *a, __global const float *b, __global float *c)\n"
    "{ size_t i = get_global_id(0); c[i] = a[i] + b[i]; }\n";

struct launch_case {
  const char *label;
  const char *file;    /* embedded file, or NULL for source */
  const char *source;
  const char *kernel;
  int src_dt, dst_dt;  /* formatted into the options each call when >= 0, as an op does */
  int nargs;
  size_t arg_size[5];
  const void *arg[5];
};

static ct__kernel *case_get(ct_device *d, const struct launch_case *c) {
  char opts[64] = "";
  if (c->src_dt >= 0) snprintf(opts, sizeof opts, "-DCT_SRC=%d -DCT_DST=%d", c->src_dt, c->dst_dt);
  ct__kernel *k;
  ct_status st = c->file ? ct__kernel_get(&k, d, c->file, c->kernel, opts)
                         : ct__kernel_get_source(&k, d, c->source, c->kernel, opts);
  if (st != CT_OK) FAIL("get: %s", ct_last_error());
  return k;
}

static void set_args(cl_kernel ck, const struct launch_case *c) {
  for (int i = 0; i < c->nargs; i++) clSetKernelArg(ck, (cl_uint)i, c->arg_size[i], c->arg[i]);
}

/* Three ways to issue the same launches, interleaved run by run so that drift in a shared
 * machine's load hits all three alike:
 *   raw         arguments set once, back-to-back enqueues (peers' cl_launch);
 *   raw+args    the clSetKernelArg calls an op must make, then the enqueue;
 *   engine      the path an op takes: options formatted, ct__kernel_get(_source), lock,
 *               arguments, ct__kernel_launch, unlock. */
static void launch_case(ct_device *d, const struct launch_case *c, const char *variant) {
  enum { LAUNCHES = 20000, RUNS = 7 };
  size_t global = 1024;
  cl_command_queue q = ct__device_queue(d);
  ct__kernel *k = case_get(d, c);
  double traw[RUNS], targs[RUNS], teng[RUNS];
  for (int r = -1; r < RUNS; r++) {
    cl_kernel ck = ct__kernel_lock(k);
    set_args(ck, c);
    double t0 = ct_bench_now();
    for (int i = 0; i < LAUNCHES; i++)
      if (clEnqueueNDRangeKernel(q, ck, 1, NULL, &global, NULL, 0, NULL, NULL) != CL_SUCCESS) FAIL("enqueue");
    clFinish(q);
    double t1 = ct_bench_now();
    for (int i = 0; i < LAUNCHES; i++) {
      set_args(ck, c);
      if (clEnqueueNDRangeKernel(q, ck, 1, NULL, &global, NULL, 0, NULL, NULL) != CL_SUCCESS) FAIL("enqueue");
    }
    clFinish(q);
    ct__kernel_unlock(k);
    double t2 = ct_bench_now();
    for (int i = 0; i < LAUNCHES; i++) {
      ct__kernel *kk = case_get(d, c);
      set_args(ct__kernel_lock(kk), c);
      ct_status st = ct__kernel_launch(kk, d, 1, &global, NULL);
      ct__kernel_unlock(kk);
      if (st != CT_OK) FAIL("launch: %s", ct_last_error());
    }
    clFinish(q);
    double t3 = ct_bench_now();
    if (r < 0) continue;
    traw[r] = (t1 - t0) / LAUNCHES * 1e6;
    targs[r] = (t2 - t1) / LAUNCHES * 1e6;
    teng[r] = (t3 - t2) / LAUNCHES * 1e6;
  }
  /* On a loaded machine the fastest run is the best estimate of the intrinsic cost. */
  double braw = minimum(traw, RUNS), beng = minimum(teng, RUNS);
  double raw = ct_bench_median(traw, RUNS), args = ct_bench_median(targs, RUNS), eng = ct_bench_median(teng, RUNS);
  char v[160];
  snprintf(v, sizeof v, "%s: raw clEnqueueNDRangeKernel, %s", c->label, variant);
  emit("launch", v, raw, "us");
  snprintf(v, sizeof v, "%s: raw with clSetKernelArg per launch, %s", c->label, variant);
  emit("launch", v, args, "us");
  snprintf(v, sizeof v, "%s: engine path, %s", c->label, variant);
  emit("launch", v, eng, "us");
  snprintf(v, sizeof v, "%s: engine path / raw, %s", c->label, variant);
  emit("launch_ratio", v, eng / raw, "x");
  snprintf(v, sizeof v, "%s: fastest runs, raw clEnqueueNDRangeKernel, %s", c->label, variant);
  emit("launch_best", v, braw, "us");
  snprintf(v, sizeof v, "%s: fastest runs, engine path, %s", c->label, variant);
  emit("launch_best", v, beng, "us");
  snprintf(v, sizeof v, "%s: fastest runs, engine path / raw, %s", c->label, variant);
  emit("launch_ratio", v, beng / braw, "x");
}

static int launch_cost(void) {
  ct_device *d;
  CT_OK_OR_DIE(ct_device_default(&d));
  CT_OK_OR_DIE(ct_device_open(d));
  const char *variant = getenv("CLTENSOR_PROFILE") ? "profiler on" : "profiler off";
  cl_int err;
  cl_mem a = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE, 1024 * 4, NULL, &err);
  cl_mem b = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE, 1024 * 4, NULL, &err);
  cl_mem c = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE, 1024 * 4, NULL, &err);
  if (err != CL_SUCCESS) FAIL("buffers");
  cl_long off = 0, n = 1024;

  struct launch_case copy = {"copy_contig f32->f16 (copy.cl)", "copy.cl", NULL, "copy_contig", 7, 5, 5,
                             {sizeof c, sizeof off, sizeof a, sizeof off, sizeof n},
                             {&c, &off, &a, &off, &n}};
  struct launch_case add = {"peers add (generated source)", NULL, PEERS_ADD, "add", -1, -1, 3,
                            {sizeof a, sizeof b, sizeof c}, {&a, &b, &c}};

  /* Lookup alone, with the options formatted each time as an op does, and without. */
  enum { RUNS = 7, LOOKUPS = 100000 };
  double t[RUNS];
  ct__kernel *k = case_get(d, &copy);
  for (int r = -1; r < RUNS; r++) {
    double t0 = ct_bench_now();
    for (int i = 0; i < LOOKUPS; i++)
      if (case_get(d, &copy) != k) FAIL("lookup");
    if (r >= 0) t[r] = (ct_bench_now() - t0) / LOOKUPS * 1e9;
  }
  emit("lookup", "ct__kernel_get hit incl. snprintf of options", ct_bench_median(t, RUNS), "ns");
  for (int r = -1; r < RUNS; r++) {
    double t0 = ct_bench_now();
    for (int i = 0; i < LOOKUPS; i++) {
      ct__kernel *k2;
      if (ct__kernel_get(&k2, d, "copy.cl", "copy_contig", "-DCT_SRC=7 -DCT_DST=5") != CT_OK || k2 != k)
        FAIL("lookup");
    }
    if (r >= 0) t[r] = (ct_bench_now() - t0) / LOOKUPS * 1e9;
  }
  emit("lookup", "ct__kernel_get hit", ct_bench_median(t, RUNS), "ns");
  ct__kernel *ka = case_get(d, &add);
  for (int r = -1; r < RUNS; r++) {
    double t0 = ct_bench_now();
    for (int i = 0; i < LOOKUPS; i++)
      if (case_get(d, &add) != ka) FAIL("lookup");
    if (r >= 0) t[r] = (ct_bench_now() - t0) / LOOKUPS * 1e9;
  }
  emit("lookup", "ct__kernel_get_source hit (the 120-byte add kernel)", ct_bench_median(t, RUNS), "ns");

  launch_case(d, &add, variant);
  launch_case(d, &copy, variant);
  clReleaseMemObject(a);
  clReleaseMemObject(b);
  clReleaseMemObject(c);
  ct_shutdown();
  return 0;
}

static void spawn_wait(const char *self, const char *mode) {
  char *args[] = {(char *)self, (char *)mode, NULL};
  pid_t pid;
  if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0) FAIL("spawn");
  int status;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) FAIL("%s child failed", mode);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "first") == 0) return first_result();
  if (argc > 1 && strcmp(argv[1], "launch") == 0) return launch_cost();
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) FAIL("readlink");
  self[n] = '\0';
  unsetenv("CLTENSOR_CACHE");
  /* Its figures are the disk cache's: binaries stored on PoCL's CPU driver too (issue #30). */
  setenv("CLTENSOR_CACHE_POCL", "1", 1);
  unsetenv("CLTENSOR_PROFILE");
  spawn_wait(self, "launch");
  setenv("CLTENSOR_PROFILE", "1", 1);
  setenv("CLTENSOR_PROFILE_FILE", "/dev/null", 1);
  spawn_wait(self, "launch");
  unsetenv("CLTENSOR_PROFILE");
  unsetenv("CLTENSOR_PROFILE_FILE");
  bench_first_result(self);
  return 0;
}
