/* Kernel engine: building, lookup, generated sources, the disk cache (second process, corrupt,
 * truncated, mismatched and refused files, folder mode, switched off, unwritable), build errors,
 * the developer kernel folder, concurrency.
 *
 * Every test runs in its own forked process (Check's default), so each sets the environment it
 * needs and starts with a fresh engine. "child-load DIR" is the second process of
 * test_second_process_loads_binaries. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ct_test.h"
#include "cltensor/version.h"
#include "core/error.h"
#include "device/device.h"
#include "kernel/cache.h"
#include "kernel/engine.h"

extern char **environ;

/* x[i] = x[i] * a + CT_ADD: the option changes the result, so a binary built with other
 * options is caught by the values, not only by the counters. */
static const char *SCALE_SRC =
    "#ifndef CT_ADD\n#define CT_ADD 0\n#endif\n"
    "__kernel void scale(__global float *x, float a) {\n"
    "  size_t i = get_global_id(0);\n"
    "  x[i] = x[i] * a + CT_ADD;\n"
    "}\n";

/* ---- helpers ---- */

static char *make_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char *path = malloc(4096);
  snprintf(path, 4096, "%s/ct-kernel-XXXXXX", base && *base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(path));
  return path;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static void rm_rf(const char *path) { nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* Number of entries of dir whose names end with suffix (the cache's temporary files are
 * ".ct-<pid>-<n>.tmp", hidden, so they count too); -1 when dir does not exist. */
static int count_files(const char *dir, const char *suffix) {
  DIR *dh = opendir(dir);
  if (!dh) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dh))) {
    size_t l = strlen(e->d_name), s = strlen(suffix);
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && l >= s &&
        strcmp(e->d_name + l - s, suffix) == 0)
      n++;
  }
  closedir(dh);
  return n;
}

/* The single .clbin file in dir (path into out). */
static void only_cache_file(const char *dir, char *out, size_t cap) {
  DIR *dh = opendir(dir);
  ck_assert_ptr_nonnull(dh);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dh))) {
    size_t l = strlen(e->d_name);
    if (l > 6 && strcmp(e->d_name + l - 6, ".clbin") == 0) {
      snprintf(out, cap, "%s/%s", dir, e->d_name);
      n++;
    }
  }
  closedir(dh);
  ck_assert_int_eq(n, 1);
}

static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)size + 1);
  ck_assert_int_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *n = (size_t)size;
  return buf;
}

static void write_all(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

static struct ct__engine_stats stats(void) {
  struct ct__engine_stats s;
  ct__engine_stats(&s);
  return s;
}

/* Runs scale on 64 floats (x[i] = i) with factor a; checks x[i] * a + add. */
static void run_scale(ct_device *d, ct__kernel *k, float a, float add) {
  enum { N = 64 };
  float host[N];
  for (int i = 0; i < N; i++) host[i] = (float)i;
  cl_int err;
  cl_mem buf = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              sizeof host, host, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  cl_kernel ck = ct__kernel_lock(k);
  ck_assert_int_eq(clSetKernelArg(ck, 0, sizeof buf, &buf), CL_SUCCESS);
  ck_assert_int_eq(clSetKernelArg(ck, 1, sizeof a, &a), CL_SUCCESS);
  size_t global = N;
  ct_status st = ct__kernel_launch(k, d, 1, &global, NULL);
  ct__kernel_unlock(k);
  ck_assert_msg(st == CT_OK, "launch: %s", ct_last_error());
  ck_assert_int_eq(clEnqueueReadBuffer(ct__device_queue(d), buf, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL),
                   CL_SUCCESS);
  clReleaseMemObject(buf);
  for (int i = 0; i < N; i++) ck_assert_float_eq(host[i], (float)i * a + add);
}

static ct__kernel *get_scale(ct_device *d, const char *options) {
  ct__kernel *k = NULL;
  ck_assert_ct_ok(ct__kernel_get_source(&k, d, SCALE_SRC, "scale", options));
  ck_assert_ptr_nonnull(k);
  return k;
}

static char *use_fresh_cache(void) {
  char *dir = make_tmpdir();
  setenv("CLTENSOR_CACHE_DIR", dir, 1);
  unsetenv("CLTENSOR_CACHE");
  return dir;
}

/* ---- lookup and generated sources ---- */

START_TEST(test_generated_source_runs_and_is_cached) {
  setenv("CLTENSOR_CACHE", "0", 1);
  ct_device *d = ct_test_device();
  struct ct__engine_stats s0 = stats();
  ct__kernel *k = get_scale(d, NULL);
  ck_assert_str_eq(ct__kernel_name(k), "scale");
  run_scale(d, k, 2.0f, 0.0f);
  /* Same request, NULL vs "" options, the same text in another buffer: one kernel. */
  ck_assert_ptr_eq(get_scale(d, NULL), k);
  ck_assert_ptr_eq(get_scale(d, ""), k);
  char *copy = strdup(SCALE_SRC);
  ct__kernel *k2;
  ck_assert_ct_ok(ct__kernel_get_source(&k2, d, copy, "scale", NULL));
  ck_assert_ptr_eq(k2, k);
  free(copy);
  /* Other options: another program and kernel. */
  ct__kernel *k3 = get_scale(d, "-DCT_ADD=3");
  ck_assert_ptr_ne(k3, k);
  ck_assert_ptr_eq(get_scale(d, "-DCT_ADD=3"), k3);
  run_scale(d, k3, 2.0f, 3.0f);
  /* A different text with the same kernel name is another program. */
  char other[512];
  snprintf(other, sizeof other, "%s\n/* variant */\n", SCALE_SRC);
  ct__kernel *k4;
  ck_assert_ct_ok(ct__kernel_get_source(&k4, d, other, "scale", NULL));
  ck_assert_ptr_ne(k4, k);
  struct ct__engine_stats s1 = stats();
  ck_assert_uint_eq(s1.builds_from_source - s0.builds_from_source, 3);
  ck_assert_uint_eq(s1.cache_writes, s0.cache_writes);
  ct_shutdown();
}
END_TEST

START_TEST(test_options_fit_device) {
  setenv("CLTENSOR_CACHE", "0", 1);
  ct_device *d = ct_test_device();
  const char *src =
      "__kernel void probe(__global int *out) {\n"
      "  out[0] = CT_HAS_FP64;\n"
      "  out[1] = __OPENCL_C_VERSION__;\n"
      "#if CT_HAS_FP64\n"
      "  double x = 1.0 / 3.0; out[2] = (int)(x * 3.0 + 0.5);\n"
      "#else\n"
      "  out[2] = 1;\n"
      "#endif\n"
      "  out[3] = CT_DT_F32;\n" /* common.cl is prepended */
      "}\n";
  ct__kernel *k;
  ck_assert_ct_ok(ct__kernel_get_source(&k, d, src, "probe", NULL));
  cl_int err;
  int out[4] = {-1, -1, -1, -1};
  cl_mem buf = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE, sizeof out, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  cl_kernel ck = ct__kernel_lock(k);
  clSetKernelArg(ck, 0, sizeof buf, &buf);
  size_t one = 1;
  ck_assert_ct_ok(ct__kernel_launch(k, d, 1, &one, NULL));
  ct__kernel_unlock(k);
  clEnqueueReadBuffer(ct__device_queue(d), buf, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
  clReleaseMemObject(buf);
  ck_assert_int_eq(out[0], d->props.fp64 ? 1 : 0);
  ck_assert_int_eq(out[1], 120); /* -cl-std=CL1.2 on a compiler that accepts it */
  ck_assert_int_eq(out[2], 1);
  ck_assert_int_eq(out[3], CT_F32);
  ct_shutdown();
}
END_TEST

START_TEST(test_zero_sized_launch_is_skipped) {
  setenv("CLTENSOR_CACHE", "0", 1);
  ct_device *d = ct_test_device();
  ct__kernel *k = get_scale(d, NULL);
  size_t zero[2] = {4, 0};
  cl_kernel ck = ct__kernel_lock(k);
  (void)ck; /* arguments unset: a real enqueue would fail */
  ck_assert_ct_ok(ct__kernel_launch(k, d, 2, zero, NULL));
  ct__kernel_unlock(k);
  ct_shutdown();
}
END_TEST

START_TEST(test_unknown_file_and_kernel) {
  setenv("CLTENSOR_CACHE", "0", 1);
  unsetenv("CLTENSOR_KERNEL_DIR");
  ct_device *d = ct_test_device();
  ct__kernel *k = (ct__kernel *)1;
  ck_assert_ct_status(ct__kernel_get(&k, d, "no_such_file.cl", "x", NULL), CT_ERR_INTERNAL);
  ck_assert_ptr_null(k);
  ck_assert_error_contains("no_such_file.cl");
  /* common.cl builds (without being prepended to itself) but has no kernels. */
  ck_assert_ct_status(ct__kernel_get(&k, d, "common.cl", "no_such_kernel", NULL), CT_ERR_INTERNAL);
  ck_assert_ptr_null(k);
  /* The library's words, not the driver's code: PoCL says CL_INVALID_KERNEL_NAME, rusticl
   * CL_INVALID_PROGRAM_EXECUTABLE (docs/PORTABILITY.md). */
  ck_assert_error_contains("no kernel 'no_such_kernel' in common.cl");
  ck_assert_ct_status(ct__kernel_get_source(&k, d, SCALE_SRC, "nope", NULL), CT_ERR_INTERNAL);
  ck_assert_error_contains("nope");
  /* The program built; the right name still works afterwards. */
  run_scale(d, get_scale(d, NULL), 1.5f, 0.0f);
  ck_assert_ct_status(ct__kernel_get(NULL, d, "common.cl", "x", NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct__kernel_get(&k, NULL, "common.cl", "x", NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct__kernel_get(&k, d, NULL, "x", NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct__kernel_get(&k, d, "common.cl", NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct__kernel_get_source(&k, d, NULL, "x", NULL), CT_ERR_INVALID_ARGUMENT);
  ct_shutdown();
}
END_TEST

START_TEST(test_build_error_has_log) {
  char *dir = use_fresh_cache();
  ct_device *d = ct_test_device();
  const char *bad = "__kernel void broken(__global float *x) { x[0] = undefined_thing_42; }\n";
  struct ct__engine_stats s0 = stats();
  ct__kernel *k = (ct__kernel *)1;
  ck_assert_ct_status(ct__kernel_get_source(&k, d, bad, "broken", "-DSOMETHING=1"), CT_ERR_KERNEL_BUILD);
  ck_assert_ptr_null(k);
  ck_assert_error_contains("build log");
  ck_assert_error_contains("undefined_thing_42"); /* the compiler's own words */
  ck_assert_error_contains("-DSOMETHING=1");
  ck_assert_error_contains(ct_device_spec(d));
  struct ct__engine_stats s1 = stats();
  ck_assert_uint_eq(s1.build_failures - s0.build_failures, 1);
  ck_assert_uint_eq(s1.cache_writes, s0.cache_writes);
  ck_assert_int_le(count_files(dir, ".clbin"), 0);
  /* A failure is not cached: asking again fails again, the engine stays usable. */
  ck_assert_ct_status(ct__kernel_get_source(&k, d, bad, "broken", "-DSOMETHING=1"), CT_ERR_KERNEL_BUILD);
  run_scale(d, get_scale(d, NULL), 2.0f, 0.0f);
  ct_shutdown();
  rm_rf(dir);
  free(dir);
}
END_TEST

/* ---- the disk cache ---- */

START_TEST(test_second_process_loads_binaries) {
  char *dir = use_fresh_cache();
  ct_device *d = ct_test_device();
  struct ct__engine_stats s0 = stats();
  run_scale(d, get_scale(d, "-DCT_ADD=1"), 2.0f, 1.0f);
  struct ct__engine_stats s1 = stats();
  ck_assert_uint_eq(s1.builds_from_source - s0.builds_from_source, 1);
  ck_assert_uint_eq(s1.loads_from_binary - s0.loads_from_binary, 0);
  ck_assert_uint_eq(s1.cache_writes - s0.cache_writes, 1);
  ck_assert_int_eq(count_files(dir, ".clbin"), 1);
  ck_assert_int_eq(count_files(dir, ".tmp"), 0);
  ct_shutdown();

  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ck_assert_int_gt(n, 0);
  self[n] = '\0';
  char *args[] = {self, "child-load", dir, NULL};
  pid_t pid;
  ck_assert_int_eq(posix_spawn(&pid, self, NULL, NULL, args, environ), 0);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "the second process did not load the kernel from the disk cache (status %d)", status);
  ck_assert_int_eq(count_files(dir, ".clbin"), 1);
  rm_rf(dir);
  free(dir);
}
END_TEST

/* The second process: must get the kernel from the binary, compiling nothing. */
static int child_load(const char *dir) {
  setenv("CLTENSOR_CACHE_DIR", dir, 1);
  ct_device *d;
  ct__kernel *k;
  if (ct_device_default(&d) != CT_OK || ct__kernel_get_source(&k, d, SCALE_SRC, "scale", "-DCT_ADD=1") != CT_OK) {
    fprintf(stderr, "child-load: %s\n", ct_last_error());
    return 2;
  }
  struct ct__engine_stats s = stats();
  float x[4] = {1, 2, 3, 4};
  cl_int err;
  cl_mem buf = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof x, x, &err);
  float a = 3.0f;
  cl_kernel ck = ct__kernel_lock(k);
  clSetKernelArg(ck, 0, sizeof buf, &buf);
  clSetKernelArg(ck, 1, sizeof a, &a);
  size_t g = 4;
  ct_status st = ct__kernel_launch(k, d, 1, &g, NULL);
  ct__kernel_unlock(k);
  clEnqueueReadBuffer(ct__device_queue(d), buf, CL_TRUE, 0, sizeof x, x, 0, NULL, NULL);
  clReleaseMemObject(buf);
  ct_shutdown();
  int ok = st == CT_OK && err == CL_SUCCESS && s.loads_from_binary == 1 && s.builds_from_source == 0 &&
           x[0] == 4.0f && x[3] == 13.0f;
  if (!ok)
    fprintf(stderr, "child-load: loads %lu, builds %lu, rejected %lu, refused %lu, x = %g %g\n",
            s.loads_from_binary, s.builds_from_source, s.cache_rejected, s.binary_refused, x[0], x[3]);
  return ok ? 0 : 1;
}

START_TEST(test_cache_folder_created_private) {
  char *base = make_tmpdir();
  char dir[4096], p[4096];
  snprintf(dir, sizeof dir, "%s/a/b/cache", base);
  setenv("CLTENSOR_CACHE_DIR", dir, 1);
  unsetenv("CLTENSOR_CACHE");
  ct_device *d = ct_test_device();
  run_scale(d, get_scale(d, NULL), 2.0f, 0.0f);
  const char *parts[] = {"/a", "/a/b", "/a/b/cache"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s%s", base, parts[i]);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_msg(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700, "%s has mode %o", p,
                  (unsigned)(st.st_mode & 0777));
  }
  char file[4096];
  only_cache_file(dir, file, sizeof file);
  struct stat st;
  ck_assert_int_eq(stat(file, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  ct_shutdown();
  rm_rf(base);
  free(base);
}
END_TEST

START_TEST(test_cache_location_from_xdg_and_home) {
  char *base = make_tmpdir();
  char want[4096], path[4096];
  unsetenv("CLTENSOR_CACHE_DIR");
  unsetenv("CLTENSOR_CACHE");
  setenv("XDG_CACHE_HOME", base, 1);
  ck_assert_int_eq(ct__cache_dir(path, sizeof path), 1);
  snprintf(want, sizeof want, "%s/cltensor", base);
  ck_assert_str_eq(path, want);
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  setenv("HOME", base, 1);
  ck_assert_int_eq(ct__cache_dir(path, sizeof path), 1);
  snprintf(want, sizeof want, "%s/.cache/cltensor", base);
  ck_assert_str_eq(path, want);
  setenv("CLTENSOR_CACHE_DIR", "/somewhere/else", 1);
  ck_assert_int_eq(ct__cache_dir(path, sizeof path), 1);
  ck_assert_str_eq(path, "/somewhere/else");
  setenv("CLTENSOR_CACHE", "0", 1);
  ck_assert_int_eq(ct__cache_dir(path, sizeof path), 0);
  unsetenv("CLTENSOR_CACHE_DIR");
  unsetenv("CLTENSOR_CACHE");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  ck_assert_int_eq(ct__cache_dir(path, sizeof path), 0);
  rm_rf(base);
  free(base);
}
END_TEST

START_TEST(test_pocl_cpu_stores_no_binary_by_default) {
  /* PoCL's CPU driver: no binary fetched or stored unless $CLTENSOR_CACHE_POCL asks (issue #30);
   * every other driver stores as before. A stored entry is still read either way. */
  char *dir = use_fresh_cache();
  unsetenv("CLTENSOR_CACHE_POCL");
  ct_device *d = ct_test_device();
  const bool pocl = ct__device_pocl_cpu(d);
  struct ct__engine_stats s0 = stats();
  run_scale(d, get_scale(d, "-DCT_ADD=4"), 2.0f, 4.0f);
  struct ct__engine_stats s1 = stats();
  ck_assert_uint_eq(s1.builds_from_source - s0.builds_from_source, 1);
  ck_assert_uint_eq(s1.cache_writes - s0.cache_writes, pocl ? 0 : 1);
  ck_assert_int_eq(count_files(dir, ".clbin"), pocl ? 0 : 1);
  ct_shutdown();
  setenv("CLTENSOR_CACHE_POCL", "1", 1);
  d = ct_test_device();
  run_scale(d, get_scale(d, "-DCT_ADD=5"), 2.0f, 5.0f);
  ck_assert_int_eq(count_files(dir, ".clbin"), pocl ? 1 : 2);
  ct_shutdown();
  unsetenv("CLTENSOR_CACHE_POCL");
  d = ct_test_device();
  struct ct__engine_stats s2 = stats();
  run_scale(d, get_scale(d, "-DCT_ADD=5"), 2.0f, 5.0f);
  ck_assert_uint_eq(stats().loads_from_binary - s2.loads_from_binary, 1);
  ct_shutdown();
  if (pocl) {
    setenv("CLTENSOR_CACHE_POCL", "maybe", 1);
    d = ct_test_device();
    ct__kernel *k = NULL;
    ck_assert_ct_status(ct__kernel_get_source(&k, d, SCALE_SRC, "scale", "-DCT_ADD=6"), CT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "CLTENSOR_CACHE_POCL"));
    ct_shutdown();
  }
  setenv("CLTENSOR_CACHE_POCL", "1", 1);
  rm_rf(dir);
  free(dir);
}
END_TEST

START_TEST(test_cache_off_writes_nothing) {
  char *base = make_tmpdir();
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/never", base);
  setenv("CLTENSOR_CACHE_DIR", dir, 1);
  setenv("CLTENSOR_CACHE", "0", 1);
  ct_device *d = ct_test_device();
  struct ct__engine_stats s0 = stats();
  run_scale(d, get_scale(d, NULL), 2.0f, 0.0f);
  ct_shutdown();
  run_scale(ct_test_device(), get_scale(ct_test_device(), NULL), 2.0f, 0.0f);
  struct ct__engine_stats s1 = stats();
  ck_assert_uint_eq(s1.builds_from_source - s0.builds_from_source, 2);
  ck_assert_uint_eq(s1.cache_writes, s0.cache_writes);
  ck_assert_uint_eq(s1.loads_from_binary, s0.loads_from_binary);
  ck_assert_int_eq(count_files(dir, ""), -1); /* not even created */
  ct_shutdown();
  rm_rf(base);
  free(base);
}
END_TEST

START_TEST(test_unwritable_cache_is_harmless) {
  char *base = make_tmpdir();
  char file[2048], dir[4096];
  /* A path under a regular file cannot be created, whoever runs the test (root included). */
  snprintf(file, sizeof file, "%s/plain-file", base);
  write_all(file, "x", 1);
  snprintf(dir, sizeof dir, "%s/sub", file);
  setenv("CLTENSOR_CACHE_DIR", dir, 1);
  unsetenv("CLTENSOR_CACHE");
  ct_device *d = ct_test_device();
  struct ct__engine_stats s0 = stats();
  ct_clear_error();
  run_scale(d, get_scale(d, NULL), 2.0f, 0.0f);
  struct ct__engine_stats s1 = stats();
  ck_assert_uint_eq(s1.builds_from_source - s0.builds_from_source, 1);
  ck_assert_uint_eq(s1.cache_writes, s0.cache_writes);
  ck_assert_str_eq(ct_last_error(), "");
  ct_shutdown();
  if (geteuid() != 0) {
    /* A read-only folder (permissions bind only non-root users). */
    char ro[4096];
    snprintf(ro, sizeof ro, "%s/ro", base);
    ck_assert_int_eq(mkdir(ro, 0500), 0);
    setenv("CLTENSOR_CACHE_DIR", ro, 1);
    run_scale(ct_test_device(), get_scale(ct_test_device(), "-DCT_ADD=2"), 2.0f, 2.0f);
    ck_assert_uint_eq(stats().cache_writes, s0.cache_writes);
    ck_assert_int_eq(count_files(ro, ".tmp"), 0);
    chmod(ro, 0700);
    ct_shutdown();
  }
  rm_rf(base);
  free(base);
}
END_TEST

START_TEST(test_shared_folder_is_not_used) {
  char *dir = use_fresh_cache();
  char file[4096];
  ct_device *d = ct_test_device();
  run_scale(d, get_scale(d, NULL), 2.0f, 0.0f);
  ct_shutdown();
  only_cache_file(dir, file, sizeof file);
  /* Group-writable: the file there is neither loaded nor rewritten. */
  ck_assert_int_eq(chmod(dir, 0770), 0);
  struct stat before, after;
  ck_assert_int_eq(stat(file, &before), 0);
  struct ct__engine_stats s0 = stats();
  d = ct_test_device();
  run_scale(d, get_scale(d, NULL), 2.0f, 0.0f);
  run_scale(d, get_scale(d, "-DCT_ADD=4"), 2.0f, 4.0f);
  ct_shutdown();
  struct ct__engine_stats s1 = stats();
  ck_assert_uint_eq(s1.loads_from_binary - s0.loads_from_binary, 0);
  ck_assert_uint_eq(s1.builds_from_source - s0.builds_from_source, 2);
  ck_assert_uint_eq(s1.cache_writes - s0.cache_writes, 0);
  ck_assert_int_eq(count_files(dir, ".clbin"), 1);
  ck_assert_int_eq(stat(file, &after), 0);
  ck_assert_int_eq(before.st_mtime, after.st_mtime);
  /* Private again: used again. */
  ck_assert_int_eq(chmod(dir, 0700), 0);
  d = ct_test_device();
  run_scale(d, get_scale(d, NULL), 2.0f, 0.0f);
  ct_shutdown();
  ck_assert_uint_eq(stats().loads_from_binary - s1.loads_from_binary, 1);
  rm_rf(dir);
  free(dir);
}
END_TEST

/* Builds scale(-DCT_ADD=add) in a fresh cache and returns the cache file's path. */
static void fill_one(const char *options, float add, char *file, size_t cap) {
  ct_device *d = ct_test_device();
  run_scale(d, get_scale(d, options), 2.0f, add);
  ct_shutdown();
  only_cache_file(getenv("CLTENSOR_CACHE_DIR"), file, cap);
}

/* REJECTED: a check fails; REFUSED: the driver refuses the binary; MISSING: the driver loads it
 * but the kernel is not in it. */
enum damage { REJECTED, REFUSED, MISSING };

/* After damaging the cache file: the next use (after ct_shutdown, so the in-memory cache is
 * gone) must reject it (or have the driver refuse it), rebuild from source and overwrite it,
 * and the use after that must load the healed file. */
static void expect_rejected_then_healed(const char *options, float add, enum damage how) {
  struct ct__engine_stats s0 = stats();
  ct_device *d = ct_test_device();
  run_scale(d, get_scale(d, options), 2.0f, add);
  ct_shutdown();
  struct ct__engine_stats s1 = stats();
  if (how == REJECTED) {
    ck_assert_uint_eq(s1.cache_rejected - s0.cache_rejected, 1);
  } else {
    ck_assert_uint_eq(s1.binary_refused - s0.binary_refused, 1);
  }
  ck_assert_uint_eq(s1.builds_from_source - s0.builds_from_source, 1);
  ck_assert_uint_eq(s1.loads_from_binary - s0.loads_from_binary, how == MISSING ? 1 : 0);
  ck_assert_uint_eq(s1.cache_writes - s0.cache_writes, 1);
  d = ct_test_device();
  run_scale(d, get_scale(d, options), 2.0f, add);
  ct_shutdown();
  struct ct__engine_stats s2 = stats();
  ck_assert_uint_eq(s2.loads_from_binary - s1.loads_from_binary, 1);
  ck_assert_uint_eq(s2.builds_from_source - s1.builds_from_source, 0);
  ck_assert_uint_eq(s2.cache_rejected - s1.cache_rejected, 0);
}

START_TEST(test_corrupt_cache_file_is_rebuilt) {
  char *dir = use_fresh_cache();
  char file[4096];
  fill_one(NULL, 0.0f, file, sizeof file);
  size_t n;
  unsigned char *buf = read_all(file, &n);
  buf[n - 7] ^= 0x5a; /* inside the binary: only the checksum can tell */
  write_all(file, buf, n);
  expect_rejected_then_healed(NULL, 0.0f, REJECTED);
  /* Header damage: magic, format version, a key field's length. */
  const size_t spots[] = {0, 8, 16};
  for (size_t i = 0; i < 3; i++) {
    unsigned char *b = read_all(file, &n);
    b[spots[i]] ^= 0x01;
    write_all(file, b, n);
    free(b);
    expect_rejected_then_healed(NULL, 0.0f, REJECTED);
  }
  free(buf);
  rm_rf(dir);
  free(dir);
}
END_TEST

START_TEST(test_truncated_cache_file_is_rebuilt) {
  char *dir = use_fresh_cache();
  char file[4096];
  fill_one(NULL, 0.0f, file, sizeof file);
  size_t n;
  unsigned char *full = read_all(file, &n);
  const size_t keep[] = {0, 3, 20, n / 2, n - 1};
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
    write_all(file, full, keep[i]);
    expect_rejected_then_healed(NULL, 0.0f, REJECTED);
  }
  /* Trailing bytes are as wrong as missing ones. */
  unsigned char *longer = malloc(n + 5);
  memcpy(longer, full, n);
  memset(longer + n, 0, 5);
  write_all(file, longer, n + 5);
  expect_rejected_then_healed(NULL, 0.0f, REJECTED);
  free(longer);
  free(full);
  rm_rf(dir);
  free(dir);
}
END_TEST

START_TEST(test_mismatched_cache_file_is_rebuilt) {
  char *dir = use_fresh_cache();
  char file_a[4096], file_b[4096];
  fill_one("-DCT_ADD=1", 1.0f, file_a, sizeof file_a);
  char *moved = malloc(strlen(file_a) + 8);
  sprintf(moved, "%s.keep", file_a);
  ck_assert_int_eq(rename(file_a, moved), 0);
  fill_one("-DCT_ADD=2", 2.0f, file_b, sizeof file_b);
  ck_assert_str_ne(file_a, file_b); /* the key names the file */
  /* A's file (intact, valid checksum) under B's name: its options field differs, so it must not
   * be used (run_scale would see +1 instead of +2). */
  ck_assert_int_eq(rename(moved, file_b), 0);
  expect_rejected_then_healed("-DCT_ADD=2", 2.0f, REJECTED);
  /* A stale library version in the header (same length, so only the comparison catches it). */
  size_t n;
  unsigned char *b = read_all(file_b, &n);
  unsigned char *v = memmem(b, n, CT_VERSION_STRING, strlen(CT_VERSION_STRING));
  ck_assert_ptr_nonnull(v);
  v[0] = v[0] == '9' ? '8' : '9';
  write_all(file_b, b, n);
  free(b);
  expect_rejected_then_healed("-DCT_ADD=2", 2.0f, REJECTED);
  free(moved);
  rm_rf(dir);
  free(dir);
}
END_TEST

/* Offset of the binary and of its checksum in a cache file, walking the documented layout. */
static void parse_layout(const unsigned char *b, size_t n, size_t *sum_at, size_t *bin_at) {
  ck_assert_uint_ge(n, 16);
  ck_assert_int_eq(memcmp(b, CT__CACHE_MAGIC, 8), 0);
  size_t pos = 16;
  for (unsigned i = 0; i < CT__CACHE_NFIELDS; i++) {
    uint32_t len = (uint32_t)b[pos] | (uint32_t)b[pos + 1] << 8 | (uint32_t)b[pos + 2] << 16 | (uint32_t)b[pos + 3] << 24;
    pos += 4 + len;
  }
  uint64_t blen = 0;
  for (int i = 7; i >= 0; i--) blen = blen << 8 | b[pos + (size_t)i];
  *sum_at = pos + 8;
  *bin_at = pos + 8 + 32;
  ck_assert_uint_eq(*bin_at + blen, n);
}

/* Rewrites the checksum of the cache file image b (n bytes) as the cache computes it, so that
 * every check passes. */
static void reseal(unsigned char *b, size_t n) {
  size_t sum_at, bin_at;
  parse_layout(b, n, &sum_at, &bin_at);
  struct ct__sha256 s;
  ct__sha256_init(&s);
  ct__sha256_update(&s, b, sum_at);
  ct__sha256_update(&s, b + bin_at, n - bin_at);
  ct__sha256_final(&s, b + sum_at);
}

/* Writes the image b (freed here) to file with a checksum that passes, then expects the
 * default scale entry to be found bad in the way `how` says, rebuilt and healed. */
static void plant_sealed(const char *file, unsigned char *b, size_t n, enum damage how) {
  reseal(b, n);
  write_all(file, b, n);
  free(b);
  expect_rejected_then_healed(NULL, 0.0f, how);
}

START_TEST(test_refused_binary_falls_back_to_source) {
  /* rusticl 22.3 does not refuse such a binary: it panics ("unknown version", program.rs) and
   * aborts the process. The cache's checksum keeps corrupt files from reaching it; only this
   * planted garbage with a valid checksum would (docs/PORTABILITY.md). */
  const char *plat = ct_device_properties(ct_test_device())->platform_name;
  if (plat && strstr(plat, "rusticl")) {
    printf("# skip: %s aborts the process on a program binary it cannot read\n", plat);
    return;
  }
  char *dir = use_fresh_cache();
  char file[4096];
  fill_one(NULL, 0.0f, file, sizeof file);
  size_t n, sum_at, bin_at;
  unsigned char *b = read_all(file, &n);
  parse_layout(b, n, &sum_at, &bin_at);
  /* Garbage with a valid checksum: every check passes and the driver gets to refuse it. */
  for (size_t i = bin_at; i < n; i++) b[i] = (unsigned char)(i * 131u + 7u);
  plant_sealed(file, b, n, REFUSED);
  rm_rf(dir);
  free(dir);
}
END_TEST

/* The image of a cache file with header's key (up to the binary length) and the binary of
 * donor: what an entry made around another program's binary looks like. */
static unsigned char *graft(const char *header, const char *donor, size_t *out_n) {
  size_t hn, dn, h_sum, h_bin, d_sum, d_bin;
  unsigned char *h = read_all(header, &hn), *dbuf = read_all(donor, &dn);
  parse_layout(h, hn, &h_sum, &h_bin);
  parse_layout(dbuf, dn, &d_sum, &d_bin);
  size_t blen = dn - d_bin, n = h_bin + blen;
  unsigned char *b = malloc(n);
  memcpy(b, h, h_bin);
  for (int i = 0; i < 8; i++) b[h_sum - 8 + (size_t)i] = (unsigned char)((uint64_t)blen >> (8 * i));
  memcpy(b + h_bin, dbuf + d_bin, blen);
  free(h);
  free(dbuf);
  *out_n = n;
  return b;
}

/* An entry that passes every check but whose program lacks the kernel asked for: discarded and
 * rebuilt from source, not CT_ERR_INTERNAL on every run. */
START_TEST(test_binary_without_the_kernel_is_rebuilt) {
  char *dir = use_fresh_cache();
  char file[4096], other[4096], aside[4200];
  fill_one(NULL, 0.0f, file, sizeof file);
  snprintf(aside, sizeof aside, "%s.aside", file);
  ck_assert_int_eq(rename(file, aside), 0);
  /* The same program with the kernel renamed. */
  char src[512];
  snprintf(src, sizeof src, "%s", SCALE_SRC);
  memcpy(strstr(src, "void scale("), "void scalf(", 11);
  ct_device *d = ct_test_device();
  ct__kernel *k;
  ck_assert_ct_ok(ct__kernel_get_source(&k, d, src, "scalf", NULL));
  ct_shutdown();
  only_cache_file(dir, other, sizeof other);
  ck_assert_int_eq(rename(aside, file), 0);
  size_t n;
  unsigned char *b = graft(file, other, &n);
  ck_assert_int_eq(unlink(other), 0);
  plant_sealed(file, b, n, MISSING);
  rm_rf(dir);
  free(dir);
}
END_TEST

/* Another program's binary (same kernel name, other options) in an entry with a valid header
 * and a SHA-256 of that binary: the checksum is keyed to the header, so it is rejected rather
 * than run (run_scale would see +2 for +1). */
START_TEST(test_swapped_binary_is_rejected) {
  char *dir = use_fresh_cache();
  char file_a[4096], file_b[4096], aside[4200];
  fill_one("-DCT_ADD=1", 1.0f, file_a, sizeof file_a);
  snprintf(aside, sizeof aside, "%s.aside", file_a);
  ck_assert_int_eq(rename(file_a, aside), 0);
  fill_one("-DCT_ADD=2", 2.0f, file_b, sizeof file_b);
  ck_assert_int_eq(rename(aside, file_a), 0);
  size_t n, sum_at, bin_at;
  unsigned char *b = graft(file_a, file_b, &n);
  parse_layout(b, n, &sum_at, &bin_at);
  struct ct__sha256 s;
  ct__sha256_init(&s);
  ct__sha256_update(&s, b + bin_at, n - bin_at);
  ct__sha256_final(&s, b + sum_at);
  write_all(file_a, b, n);
  free(b);
  expect_rejected_then_healed("-DCT_ADD=1", 1.0f, REJECTED);
  rm_rf(dir);
  free(dir);
}
END_TEST

START_TEST(test_key_covers_source_and_options) {
  char *dir = use_fresh_cache();
  ct_device *d = ct_test_device();
  get_scale(d, NULL);
  get_scale(d, "-DCT_ADD=1");
  char other[512];
  snprintf(other, sizeof other, "%s\n", SCALE_SRC);
  ct__kernel *k;
  ck_assert_ct_ok(ct__kernel_get_source(&k, d, other, "scale", NULL));
  ck_assert_int_eq(count_files(dir, ".clbin"), 3);
  ct_shutdown();
  rm_rf(dir);
  free(dir);
}
END_TEST

START_TEST(test_sha256_vectors) {
  struct {
    const char *in;
    const char *hex;
  } v[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
  };
  for (size_t i = 0; i < 3; i++) {
    struct ct__sha256 s;
    unsigned char d[32];
    char hex[65];
    ct__sha256_init(&s);
    /* Byte by byte for one vector, whole for the others: the buffering must not matter. */
    if (i == 2)
      for (size_t j = 0; v[i].in[j]; j++) ct__sha256_update(&s, v[i].in + j, 1);
    else
      ct__sha256_update(&s, v[i].in, strlen(v[i].in));
    ct__sha256_final(&s, d);
    ct__hex(hex, d, 32);
    ck_assert_str_eq(hex, v[i].hex);
  }
  /* One million 'a'. */
  struct ct__sha256 s;
  unsigned char d[32];
  char hex[65], block[1000];
  memset(block, 'a', sizeof block);
  ct__sha256_init(&s);
  for (int i = 0; i < 1000; i++) ct__sha256_update(&s, block, sizeof block);
  ct__sha256_final(&s, d);
  ct__hex(hex, d, 32);
  ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* ---- the developer kernel folder ---- */

START_TEST(test_kernel_dir_reads_sources) {
  setenv("CLTENSOR_CACHE", "0", 1);
  char *dir = make_tmpdir();
  char path[4096];
  /* common.cl from the folder too: a marker only that copy defines. */
  const struct ct__embedded_source *common = ct__embedded_find("common.cl");
  ck_assert_ptr_nonnull(common);
  snprintf(path, sizeof path, "%s/common.cl", dir);
  FILE *f = fopen(path, "w");
  fprintf(f, "%s\n#define CT_DEV_MARK 5\n", common->text);
  fclose(f);
  snprintf(path, sizeof path, "%s/devk.cl", dir);
  write_all(path, "__kernel void scale(__global float *x, float a) {\n"
                  "  size_t i = get_global_id(0); x[i] = x[i] * a + CT_DEV_MARK;\n}\n",
            strlen("__kernel void scale(__global float *x, float a) {\n"
                   "  size_t i = get_global_id(0); x[i] = x[i] * a + CT_DEV_MARK;\n}\n"));
  setenv("CLTENSOR_KERNEL_DIR", dir, 1);
  ck_assert_str_eq(ct__kernel_dir(), dir);
  ct_device *d = ct_test_device();
  ct__kernel *k;
  ck_assert_ct_ok(ct__kernel_get(&k, d, "devk.cl", "scale", NULL));
  run_scale(d, k, 2.0f, 5.0f);
  /* Read once: later edits need a new process (or ct_shutdown). */
  ct__kernel *again;
  ck_assert_ct_ok(ct__kernel_get(&again, d, "devk.cl", "scale", NULL));
  ck_assert_ptr_eq(again, k);
  ck_assert_ct_status(ct__kernel_get(&k, d, "missing.cl", "scale", NULL), CT_ERR_IO);
  ck_assert_error_contains("missing.cl");
  ck_assert_error_contains("CLTENSOR_KERNEL_DIR");
  ck_assert_ct_status(ct__kernel_get(&k, d, "../devk.cl", "scale", NULL), CT_ERR_INTERNAL);
  ct_shutdown();
  unsetenv("CLTENSOR_KERNEL_DIR");
  rm_rf(dir);
  free(dir);
}
END_TEST

static void write_text(const char *dir, const char *name, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  write_all(path, text, strlen(text));
}

/* On PoCL's CPU driver the library's programs start with kernels/pocl_builtins.h and are built
 * with -D_OPENCL_H_ (src/kernel/engine.c, ct__build_any): a kernel calling a builtin the file
 * does not declare (hypot) is built again with the full header and counted, is an error under
 * $CLTENSOR_POCL_LIGHT_HEADER=strict, and is built as before with =0. Other drivers ignore it. */
START_TEST(test_pocl_light_header) {
  setenv("CLTENSOR_CACHE", "0", 1);
  char *dir = make_tmpdir();
  static const char *const files[2] = {"common.cl", "pocl_builtins.h"};
  for (int i = 0; i < 2; i++) {
    const struct ct__embedded_source *src = ct__embedded_find(files[i]);
    ck_assert_ptr_nonnull(src);
    write_text(dir, files[i], src->text);
  }
  write_text(dir, "plain.cl", "__kernel void scale(__global float *x, float a) {\n"
                              "  size_t i = get_global_id(0); x[i] = fabs(x[i]) * a;\n}\n");
  write_text(dir, "hyp.cl", "__kernel void scale(__global float *x, float a) {\n"
                            "  size_t i = get_global_id(0); x[i] = hypot(x[i], 0.0f) * a;\n}\n");
  setenv("CLTENSOR_KERNEL_DIR", dir, 1);
  static const char *const modes[3] = {"1", "0", "strict"};
  for (int m = 0; m < 3; m++) {
    setenv("CLTENSOR_POCL_LIGHT_HEADER", modes[m], 1);
    ct_device *d = ct_test_device();
    const bool light = ct__device_pocl_cpu(d) && m != 1;
    ct__kernel *k = NULL;
    struct ct__engine_stats s0 = stats();
    ck_assert_ct_ok(ct__kernel_get(&k, d, "plain.cl", "scale", NULL));
    run_scale(d, k, 2.0f, 0.0f);
    ck_assert_uint_eq(stats().light_fallbacks, s0.light_fallbacks);
    ct_status st = ct__kernel_get(&k, d, "hyp.cl", "scale", NULL);
    if (light && m == 2) {
      ck_assert_int_eq(st, CT_ERR_KERNEL_BUILD);
      ck_assert_error_contains("-D_OPENCL_H_");
      ck_assert_error_contains("hypot");
    } else {
      ck_assert_ct_ok(st);
      run_scale(d, k, 3.0f, 0.0f);
    }
    ck_assert_uint_eq(stats().light_fallbacks - s0.light_fallbacks, light && m == 0 ? 1 : 0);
    ct_shutdown();
  }
  setenv("CLTENSOR_POCL_LIGHT_HEADER", "maybe", 1);
  ct_device *d = ct_test_device();
  ct__kernel *k = NULL;
  if (ct__device_pocl_cpu(d)) {
    ck_assert_ct_status(ct__kernel_get(&k, d, "plain.cl", "scale", NULL), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("CLTENSOR_POCL_LIGHT_HEADER");
  } else {
    ck_assert_ct_ok(ct__kernel_get(&k, d, "plain.cl", "scale", NULL));
  }
  ct_shutdown();
  unsetenv("CLTENSOR_KERNEL_DIR");
  rm_rf(dir);
  free(dir);
}
END_TEST

/* A line `//#include "x.cl"` is replaced by kernels/x.cl where it stands (after what the file
 * defined before it); the same text elsewhere on a line stays a comment. The disk cache's key
 * covers the prelude: an edited prelude is built again, never served the stale binary. */
START_TEST(test_kernel_dir_include_prelude) {
  char *cache = use_fresh_cache();
  char *dir = make_tmpdir();
  const struct ct__embedded_source *common = ct__embedded_find("common.cl");
  ck_assert_ptr_nonnull(common);
  write_text(dir, "common.cl", common->text);
  write_text(dir, "pre.cl", "inline float ct_pre_add(float v, float a) { return v * a + PRE_ADD; }\n");
  write_text(dir, "devk.cl",
             "#define PRE_ADD 3\n"
             "//#include \"pre.cl\"\n"
             "// a comment naming //#include \"missing.cl\" is no directive\n"
             "__kernel void scale(__global float *x, float a) {\n"
             "  size_t i = get_global_id(0); x[i] = ct_pre_add(x[i], a);\n}\n");
  write_text(dir, "bad.cl", "//#include \"missing.cl\"\n");
  setenv("CLTENSOR_KERNEL_DIR", dir, 1);
  ct_device *d = ct_test_device();
  ct__kernel *k;
  ck_assert_ct_ok(ct__kernel_get(&k, d, "devk.cl", "scale", NULL));
  run_scale(d, k, 2.0f, 3.0f);
  ck_assert_ct_status(ct__kernel_get(&k, d, "bad.cl", "scale", NULL), CT_ERR_IO);
  ck_assert_error_contains("missing.cl");
  ct_shutdown();

  /* The same devk.cl with another prelude: a build from source, not the cached binary. */
  write_text(dir, "pre.cl", "inline float ct_pre_add(float v, float a) { return v * a + PRE_ADD + 1; }\n");
  struct ct__engine_stats s0 = stats();
  d = ct_test_device();
  ck_assert_ct_ok(ct__kernel_get(&k, d, "devk.cl", "scale", NULL));
  run_scale(d, k, 2.0f, 4.0f);
  struct ct__engine_stats s1 = stats();
  ck_assert_uint_eq(s1.loads_from_binary, s0.loads_from_binary);
  ck_assert_uint_eq(s1.builds_from_source, s0.builds_from_source + 1);
  ct_shutdown();
  /* Unchanged, it is the cached binary (so the cache was on above). */
  d = ct_test_device();
  ck_assert_ct_ok(ct__kernel_get(&k, d, "devk.cl", "scale", NULL));
  run_scale(d, k, 2.0f, 4.0f);
  ck_assert_uint_eq(stats().loads_from_binary, s1.loads_from_binary + 1);
  ct_shutdown();
  unsetenv("CLTENSOR_KERNEL_DIR");
  unsetenv("CLTENSOR_CACHE_DIR");
  rm_rf(dir);
  rm_rf(cache);
  free(dir);
  free(cache);
}
END_TEST

/* A hostile $CLTENSOR_KERNEL_DIR reaches the message escaped (core/env.h). */
START_TEST(test_kernel_dir_is_escaped) {
  setenv("CLTENSOR_CACHE", "0", 1);
  setenv("CLTENSOR_KERNEL_DIR", "/nonexistent/k\x1b[31m\nct_foo: fine", 1);
  ct_device *d = ct_test_device();
  ct__kernel *k;
  ck_assert_ct_status(ct__kernel_get(&k, d, "missing.cl", "scale", NULL), CT_ERR_IO);
  ck_assert_error_contains("cannot read /nonexistent/k\\x1b[31m\\x0act_foo: fine/");
  ck_assert_plain_text(ct_last_error());
  ct_shutdown();
  unsetenv("CLTENSOR_KERNEL_DIR");
}
END_TEST

START_TEST(test_kernel_dir_source_tree) {
  /* The meson test environment names the source root. */
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  if (!root) return;
  setenv("CLTENSOR_CACHE", "0", 1);
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s/kernels", root);
  /* embed.py's arrays hold the files byte for byte, with the size and the NUL right. */
  for (int i = 0; i < ct__embedded_source_count; i++) {
    const struct ct__embedded_source *src = &ct__embedded_sources[i];
    snprintf(path, sizeof path, "%s/%s", dir, src->name);
    size_t n;
    unsigned char *text = read_all(path, &n);
    ck_assert_uint_eq(src->size, n);
    ck_assert_int_eq(memcmp(src->text, text, n), 0);
    ck_assert_int_eq(src->text[n], '\0');
    free(text);
  }
  ck_assert_ptr_null(ct__embedded_sources[ct__embedded_source_count].name);
  /* Every file is found in the folder (specialised kernels need their -D options to build, so
   * a build failure is fine here; a read failure is not). */
  setenv("CLTENSOR_KERNEL_DIR", dir, 1);
  ct_device *d = ct_test_device();
  ct__kernel *k;
  for (int i = 0; i < ct__embedded_source_count; i++) {
    ct_status st = ct__kernel_get(&k, d, ct__embedded_sources[i].name, "ct__no_such_kernel", NULL);
    ck_assert_msg(st == CT_ERR_INTERNAL || st == CT_ERR_KERNEL_BUILD, "%s from %s: %s",
                  ct__embedded_sources[i].name, dir, ct_last_error());
  }
  ck_assert_ct_status(ct__kernel_get(&k, d, "common.cl", "ct__no_such_kernel", NULL), CT_ERR_INTERNAL);
  ck_assert_error_contains("no kernel 'ct__no_such_kernel' in common.cl");
  ct_shutdown();
}
END_TEST

/* ---- concurrency ---- */

#define NTHREADS 8
#define NVARIANTS 4

struct worker {
  ct_device *d;
  int id;
  ct__kernel *got[NVARIANTS];
  int failures;
  char msg[256];
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  for (int round = 0; round < 50; round++) {
    for (int v = 0; v < NVARIANTS; v++) {
      int var = (v + w->id) % NVARIANTS; /* threads ask in different orders */
      char opts[32];
      snprintf(opts, sizeof opts, "-DCT_ADD=%d", var);
      ct__kernel *k;
      if (ct__kernel_get_source(&k, w->d, SCALE_SRC, "scale", opts) != CT_OK) {
        w->failures++;
        snprintf(w->msg, sizeof w->msg, "%s", ct_last_error());
        continue;
      }
      if (w->got[var] && w->got[var] != k) w->failures++;
      w->got[var] = k;
      if (round % 10 != 0) continue;
      /* Launch through the shared kernel under its lock, on this thread's own buffer. */
      float x[16];
      for (int i = 0; i < 16; i++) x[i] = (float)(i + w->id);
      cl_int err;
      cl_mem buf = clCreateBuffer(ct__device_context(w->d), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                  sizeof x, x, &err);
      float a = (float)w->id;
      cl_kernel ck = ct__kernel_lock(k);
      clSetKernelArg(ck, 0, sizeof buf, &buf);
      clSetKernelArg(ck, 1, sizeof a, &a);
      size_t g = 16;
      ct_status st = ct__kernel_launch(k, w->d, 1, &g, NULL);
      ct__kernel_unlock(k);
      clEnqueueReadBuffer(ct__device_queue(w->d), buf, CL_TRUE, 0, sizeof x, x, 0, NULL, NULL);
      clReleaseMemObject(buf);
      if (st != CT_OK) w->failures++;
      for (int i = 0; i < 16; i++)
        if (x[i] != (float)(i + w->id) * a + (float)var) w->failures++;
    }
  }
  return NULL;
}

START_TEST(test_concurrent_get_from_8_threads) {
  setenv("CLTENSOR_CACHE", "0", 1);
  ct_device *d = ct_test_device();
  struct ct__engine_stats s0 = stats();
  pthread_t th[NTHREADS];
  struct worker w[NTHREADS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < NTHREADS; i++) {
    w[i].d = d;
    w[i].id = i;
    ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < NTHREADS; i++) {
    ck_assert_msg(w[i].failures == 0, "thread %d: %d failures (%s)", i, w[i].failures, w[i].msg);
    for (int v = 0; v < NVARIANTS; v++) ck_assert_ptr_eq(w[i].got[v], w[0].got[v]);
  }
  for (int v = 1; v < NVARIANTS; v++) ck_assert_ptr_ne(w[0].got[v], w[0].got[0]);
  ck_assert_uint_eq(stats().builds_from_source - s0.builds_from_source, NVARIANTS);
  ct_shutdown();
}
END_TEST

/* ---- trust: what is read from the cache folder (pure: a fake key, no device) ---- */

/* A nobody uid for "owned by another user" (the tests run as root in CI). */
#define OTHER_UID 65534

static struct ct__cache_key fake_key(void) {
  struct ct__cache_key k = {.device_name = "Fake Device", .device_vendor = "Fake Vendor",
                            .device_version = "OpenCL 1.2", .driver_version = "1.0",
                            .platform_name = "Fake Platform", .platform_version = "OpenCL 1.2",
                            .library_version = CT_VERSION_STRING, .options = "-DX=1"};
  memset(k.source_sha256, 'a', 64);
  k.source_sha256[64] = '\0';
  return k;
}

static const unsigned char FAKE_BIN[] = "not really a program binary, but the cache does not care";

/* Stores the fake entry in dir and returns its path. */
static void store_fake(const char *dir, char *path, size_t cap) {
  setenv("CLTENSOR_CACHE_DIR", dir, 1);
  unsetenv("CLTENSOR_CACHE");
  struct ct__cache_key k = fake_key();
  ck_assert_int_eq(ct__cache_store(&k, FAKE_BIN, sizeof FAKE_BIN), 1);
  ck_assert_int_eq(ct__cache_path(path, cap, &k), 1);
}

static enum ct__cache_result load_fake(void) {
  struct ct__cache_key k = fake_key();
  unsigned char *bin = NULL;
  size_t len = 0;
  enum ct__cache_result r = ct__cache_load(&k, &bin, &len);
  if (r == CT__CACHE_HIT) {
    ck_assert_uint_eq(len, sizeof FAKE_BIN);
    ck_assert_int_eq(memcmp(bin, FAKE_BIN, len), 0);
  }
  free(bin);
  return r;
}

/* As root (as in CI): with path handed to another user, load_fake() gives want; handed back
 * after. Other users cannot give files away, so the case needs root. */
static void expect_if_others_own(const char *path, enum ct__cache_result want) {
  if (geteuid() != 0) return;
  ck_assert_int_eq(chown(path, OTHER_UID, OTHER_UID), 0);
  ck_assert_int_eq(load_fake(), want);
  ck_assert_int_eq(chown(path, 0, 0), 0);
}

START_TEST(test_cache_switch_is_a_boolean) {
  char path[4096];
  setenv("CLTENSOR_CACHE_DIR", "/somewhere", 1);
  const char *off[] = {"0", "no", "false", "OFF", "No"}, *on[] = {"1", "yes", "TRUE", "on", ""};
  for (size_t i = 0; i < 5; i++) {
    setenv("CLTENSOR_CACHE", off[i], 1);
    ck_assert_msg(ct__cache_dir(path, sizeof path) == 0, "CLTENSOR_CACHE=%s left the cache on", off[i]);
    setenv("CLTENSOR_CACHE", on[i], 1);
    ck_assert_msg(ct__cache_dir(path, sizeof path) == 1, "CLTENSOR_CACHE=%s turned the cache off", on[i]);
  }
  /* Anything else: off where it cannot be reported, refused where it can. */
  setenv("CLTENSOR_CACHE", "maybe", 1);
  ct__error(CT_OK, "earlier message");
  ck_assert_int_eq(ct__cache_dir(path, sizeof path), 0);
  ck_assert_str_eq(ct_last_error(), "earlier message");
  bool v;
  ck_assert_ct_status(ct__cache_enabled(&v), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("CLTENSOR_CACHE");
  ck_assert_error_contains("maybe");
}
END_TEST

/* Through the engine: a non-boolean value fails the build naming the variable; "off" builds
 * and caches nothing. */
START_TEST(test_cache_switch_in_the_engine) {
  char *dir = use_fresh_cache();
  setenv("CLTENSOR_CACHE", "maybe", 1);
  ct_device *d = ct_test_device();
  ct__kernel *k;
  ck_assert_ct_status(ct__kernel_get_source(&k, d, SCALE_SRC, "scale", NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("$CLTENSOR_CACHE='maybe'");
  setenv("CLTENSOR_CACHE", "off", 1);
  run_scale(d, get_scale(d, NULL), 2.0f, 0.0f);
  ck_assert_int_eq(count_files(dir, ".clbin"), 0);
  ct_shutdown();
  rm_rf(dir);
  free(dir);
}
END_TEST

START_TEST(test_untrusted_folder_is_not_read) {
  char *base = make_tmpdir(), dir[4096], path[4096];
  snprintf(dir, sizeof dir, "%s/c", base);
  store_fake(dir, path, sizeof path);
  ck_assert_int_eq(load_fake(), CT__CACHE_HIT);
  /* World-writable with the sticky bit (as /tmp): others can still add files. */
  ck_assert_int_eq(chmod(dir, 01777), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_OFF);
  struct ct__cache_key k = fake_key();
  ck_assert_int_eq(ct__cache_store(&k, FAKE_BIN, sizeof FAKE_BIN), 0);
  ck_assert_int_eq(chmod(dir, 0700), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_HIT);
  expect_if_others_own(dir, CT__CACHE_OFF);
  rm_rf(base);
  free(base);
}
END_TEST

/* A symbolic link as the cache folder: followed when it is ours and its target passes, refused
 * when its target fails the rules or someone else owns the link. */
START_TEST(test_symlinked_folder) {
  char *base = make_tmpdir(), target[4096], link[4096], path[4096];
  snprintf(target, sizeof target, "%s/target", base);
  snprintf(link, sizeof link, "%s/link", base);
  store_fake(target, path, sizeof path);
  ck_assert_int_eq(symlink(target, link), 0);
  setenv("CLTENSOR_CACHE_DIR", link, 1);
  ck_assert_int_eq(load_fake(), CT__CACHE_HIT);
  ck_assert_int_eq(chmod(target, 0777), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_OFF);
  ck_assert_int_eq(chmod(target, 0700), 0);
  if (geteuid() == 0) {
    /* A link planted by another user, to a folder that passes every check (as root: any folder
     * root owns, /etc included): nothing is read or written through it. */
    ck_assert_int_eq(lchown(link, OTHER_UID, OTHER_UID), 0);
    ck_assert_int_eq(load_fake(), CT__CACHE_OFF);
    struct ct__cache_key k = fake_key();
    k.options = "-DX=2";
    ck_assert_int_eq(ct__cache_store(&k, FAKE_BIN, sizeof FAKE_BIN), 0);
    ck_assert_int_eq(count_files(target, ".clbin"), 1);
    /* ... also as a folder further up the path */
    char deeper[4200];
    snprintf(deeper, sizeof deeper, "%s/sub", link);
    ck_assert_int_eq(mkdir(deeper, 0700), 0);
    setenv("CLTENSOR_CACHE_DIR", deeper, 1);
    ck_assert_int_eq(ct__cache_store(&k, FAKE_BIN, sizeof FAKE_BIN), 0);
    ck_assert_int_eq(count_files(deeper, ".clbin"), 0);
  }
  rm_rf(base);
  free(base);
}
END_TEST

/* The folders above the cache folder: another user's one, or a non-sticky shared one, could
 * swap the checked folder for a link between the check and a write; a sticky shared one (/tmp)
 * cannot. */
START_TEST(test_untrusted_ancestor_is_refused) {
  char *top = make_tmpdir(), dir[4096], path[4096];
  snprintf(dir, sizeof dir, "%s/mid/c", top);
  store_fake(dir, path, sizeof path);
  ck_assert_int_eq(load_fake(), CT__CACHE_HIT);
  char mid[4096], why[512], real[4096];
  snprintf(mid, sizeof mid, "%s/mid", top);
  ck_assert_int_eq(chmod(mid, 0777), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_OFF);
  ck_assert_int_eq(ct__cache_dir_check(dir, real, sizeof real, why, sizeof why), CT__TRUST_DIR_REFUSED);
  ck_assert_msg(strstr(why, mid) && strstr(why, "not sticky"), "%s", why);
  ck_assert_int_eq(chmod(mid, 01777), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_HIT);
  ck_assert_int_eq(chmod(mid, 0755), 0);
  if (geteuid() == 0) {
    ck_assert_int_eq(chown(mid, OTHER_UID, OTHER_UID), 0);
    ck_assert_int_eq(load_fake(), CT__CACHE_OFF);
    ck_assert_int_eq(ct__cache_dir_check(dir, real, sizeof real, why, sizeof why), CT__TRUST_DIR_REFUSED);
    ck_assert_msg(strstr(why, mid) && strstr(why, "owned by another user"), "%s", why);
    struct ct__cache_key k = fake_key();
    k.options = "-DX=2";
    ck_assert_int_eq(ct__cache_store(&k, FAKE_BIN, sizeof FAKE_BIN), 0);
    ck_assert_int_eq(count_files(dir, ".clbin"), 1);
    ck_assert_int_eq(chown(mid, 0, 0), 0);
  }
  rm_rf(top);
  free(top);
  /* Directly in /tmp (root's, 1777, sticky): accepted. */
  char tmp[] = "/tmp/ct-kernel-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(tmp));
  store_fake(tmp, path, sizeof path);
  ck_assert_int_eq(ct__cache_dir_check(tmp, real, sizeof real, why, sizeof why), CT__TRUST_OK);
  ck_assert_int_eq(load_fake(), CT__CACHE_HIT);
  rm_rf(tmp);
}
END_TEST

/* Each file must be a regular file of ours that nobody else can write. */
START_TEST(test_untrusted_file_is_rejected) {
  char *dir = make_tmpdir(), path[4096], copy[4200];
  store_fake(dir, path, sizeof path);
  ck_assert_int_eq(chmod(path, 0666), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_REJECTED);
  ck_assert_int_eq(chmod(path, 0600), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_HIT);
  expect_if_others_own(path, CT__CACHE_REJECTED);
  /* a link to a good copy */
  snprintf(copy, sizeof copy, "%s.copy", path);
  ck_assert_int_eq(rename(path, copy), 0);
  ck_assert_int_eq(symlink(copy, path), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_REJECTED);
  rm_rf(dir);
  free(dir);
}
END_TEST

/* A FIFO in place of an entry: rejected at once, not a reader waiting for a writer forever (the
 * tcase's timeout is the guard). */
START_TEST(test_fifo_entry_does_not_hang) {
  char *dir = make_tmpdir(), path[4096];
  store_fake(dir, path, sizeof path);
  ck_assert_int_eq(unlink(path), 0);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_REJECTED);
  rm_rf(dir);
  free(dir);
}
END_TEST

/* A hostile $CLTENSOR_CACHE_DIR reaches the trust messages escaped (core/env.h): an ESC cannot
 * colour the terminal, a newline cannot forge a second line. */
START_TEST(test_cache_dir_is_escaped) {
  char *base = make_tmpdir(), dir[4200], got[4096], real[4096], path[4300], why[1024];
  snprintf(dir, sizeof dir, "%s/c\x1b[31m\nd", base);
  ck_assert_int_eq(mkdir(dir, 0700), 0);
  ck_assert_int_eq(chmod(dir, 0777), 0);
  setenv("CLTENSOR_CACHE_DIR", dir, 1);
  unsetenv("CLTENSOR_CACHE");
  ck_assert_int_eq(ct__cache_dir(got, sizeof got), 1);
  ck_assert_str_eq(got, dir);
  ck_assert_int_eq(ct__cache_dir_check(got, real, sizeof real, why, sizeof why), CT__TRUST_DIR_REFUSED);
  ck_assert_msg(strstr(why, "/c\\x1b[31m\\x0ad refused: writable"), "%s", why);
  ck_assert_plain_text(why);
  /* a file in it, refused for the folder and then for itself */
  snprintf(path, sizeof path, "%s/x.clbin", dir);
  write_all(path, FAKE_BIN, sizeof FAKE_BIN);
  int fd;
  uint64_t size;
  ck_assert_int_eq(ct__cache_open(path, 1024, &fd, &size, why, sizeof why), CT__TRUST_DIR_REFUSED);
  ck_assert_plain_text(why);
  ck_assert_int_eq(chmod(dir, 0700), 0);
  ck_assert_int_eq(chmod(path, 0666), 0);
  ck_assert_int_eq(ct__cache_open(path, 1024, &fd, &size, why, sizeof why), CT__TRUST_FILE_REFUSED);
  ck_assert_msg(strstr(why, "/c\\x1b[31m\\x0ad/x.clbin refused"), "%s", why);
  ck_assert_plain_text(why);
  rm_rf(base);
  free(base);
}
END_TEST

/* A 1 GiB entry (sparse: no disk used) is refused from its header and size, not read whole;
 * a 100 MiB one, below the size cap, from its header alone. */
START_TEST(test_huge_entry_is_not_read) {
  char *dir = make_tmpdir(), path[4096];
  store_fake(dir, path, sizeof path);
  size_t n;
  unsigned char *b = read_all(path, &n);
  /* First, while the high-water mark is low: a wrong header on an entry the size cap lets
   * through. Reading it whole would add its 100 MiB; the bound is a quarter of that, the
   * ratio of the bound below. */
  const off_t big = (off_t)100 << 20;
  ck_assert_int_lt(big, CT__CACHE_MAX_BYTES);
  long before = ct_test_maxrss_kib();
  ck_assert_int_eq(truncate(path, big), 0);
  int fd = open(path, O_WRONLY);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(pwrite(fd, "NOTOURS!", 8, 0), 8);
  close(fd);
  ck_assert_int_eq(load_fake(), CT__CACHE_REJECTED);
  long grown = ct_test_maxrss_kib() - before;
  ck_assert_msg(grown < (long)(big / 4 / 1024), "resident size grew by %ld KiB loading a 100 MiB entry", grown);
  write_all(path, b, n);
  ck_assert_int_eq(load_fake(), CT__CACHE_HIT);
  const off_t huge = (off_t)1 << 30;
  before = ct_test_maxrss_kib();
  /* A valid header whose length field disagrees with the size, then one that agrees. */
  ck_assert_int_eq(truncate(path, huge), 0);
  ck_assert_int_eq(load_fake(), CT__CACHE_REJECTED);
  uint64_t blen = (uint64_t)huge - (n - sizeof FAKE_BIN);
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)(blen >> (8 * i));
  fd = open(path, O_WRONLY);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(pwrite(fd, le, 8, (off_t)(n - sizeof FAKE_BIN - 32 - 8)), 8);
  close(fd);
  ck_assert_int_eq(load_fake(), CT__CACHE_REJECTED);
  /* Reading either whole would add 1 GiB; the margin allows for any allocator noise. */
  grown = ct_test_maxrss_kib() - before;
  ck_assert_msg(grown < 256 * 1024, "resident size grew by %ld KiB loading a 1 GiB entry", grown);
  free(b);
  rm_rf(dir);
  free(dir);
}
END_TEST

/* PoCL prints compiler diagnostics on stdout, where they would corrupt the TAP stream that
 * the parent process writes; in the forked child they go to stderr instead. */
static void child_setup(void) {
  fflush(stdout);
  dup2(STDERR_FILENO, STDOUT_FILENO);
}

int main(int argc, char **argv) {
  /* The disk-cache tests check stored binaries on every driver: PoCL's CPU driver stores them
   * only when asked (test_pocl_cpu_stores_no_binary_by_default checks its default). Before
   * child-load, which the tests run as a second process. */
  setenv("CLTENSOR_CACHE_POCL", "1", 1);
  if (argc == 3 && strcmp(argv[1], "child-load") == 0) return child_load(argv[2]);
  Suite *s = suite_create("kernel");
  TCase *tc = tcase_create("engine");
  tcase_set_timeout(tc, 300);
  tcase_add_checked_fixture(tc, child_setup, NULL);
  tcase_add_test(tc, test_sha256_vectors);
  tcase_add_test(tc, test_cache_location_from_xdg_and_home);
  tcase_add_test(tc, test_generated_source_runs_and_is_cached);
  tcase_add_test(tc, test_options_fit_device);
  tcase_add_test(tc, test_zero_sized_launch_is_skipped);
  tcase_add_test(tc, test_unknown_file_and_kernel);
  tcase_add_test(tc, test_build_error_has_log);
  tcase_add_test(tc, test_kernel_dir_reads_sources);
  tcase_add_test(tc, test_kernel_dir_include_prelude);
  tcase_add_test(tc, test_pocl_light_header);
  tcase_add_test(tc, test_kernel_dir_is_escaped);
  tcase_add_test(tc, test_kernel_dir_source_tree);
  tcase_add_test(tc, test_concurrent_get_from_8_threads);
  suite_add_tcase(s, tc);
  TCase *cache = tcase_create("disk-cache");
  tcase_set_timeout(cache, 600);
  tcase_add_checked_fixture(cache, child_setup, NULL);
  tcase_add_test(cache, test_second_process_loads_binaries);
  tcase_add_test(cache, test_cache_folder_created_private);
  tcase_add_test(cache, test_cache_off_writes_nothing);
  tcase_add_test(cache, test_pocl_cpu_stores_no_binary_by_default);
  tcase_add_test(cache, test_unwritable_cache_is_harmless);
  tcase_add_test(cache, test_shared_folder_is_not_used);
  tcase_add_test(cache, test_corrupt_cache_file_is_rebuilt);
  tcase_add_test(cache, test_truncated_cache_file_is_rebuilt);
  tcase_add_test(cache, test_mismatched_cache_file_is_rebuilt);
  tcase_add_test(cache, test_refused_binary_falls_back_to_source);
  tcase_add_test(cache, test_key_covers_source_and_options);
  tcase_add_test(cache, test_binary_without_the_kernel_is_rebuilt);
  tcase_add_test(cache, test_swapped_binary_is_rejected);
  suite_add_tcase(s, cache);
  TCase *trust = tcase_create("trust");
  tcase_set_timeout(trust, 120);
  tcase_add_checked_fixture(trust, child_setup, NULL);
  tcase_add_test(trust, test_cache_switch_is_a_boolean);
  tcase_add_test(trust, test_cache_switch_in_the_engine);
  tcase_add_test(trust, test_untrusted_folder_is_not_read);
  tcase_add_test(trust, test_symlinked_folder);
  tcase_add_test(trust, test_untrusted_ancestor_is_refused);
  tcase_add_test(trust, test_untrusted_file_is_rejected);
  tcase_add_test(trust, test_fifo_entry_does_not_hang);
  tcase_add_test(trust, test_huge_entry_is_not_read);
  tcase_add_test(trust, test_cache_dir_is_escaped);
  suite_add_tcase(s, trust);
  return ct_test_run(s);
}
