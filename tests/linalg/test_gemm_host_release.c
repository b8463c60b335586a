/* The host-BLAS route's native-kernel path when its commands do not run: a GEMM whose command is
 * skipped (PoCL terminates the commands after a failed one without running their functions)
 * must still free its probe pointer block, and a GEMM whose probe did not run must not hand
 * BLAS a NULL pointer.
 *
 * PoCL 3.1 aborts when a user event is failed (pocl_update_event_failed), so a real failed
 * command cannot be staged. Instead this binary interposes clEnqueueNativeKernel (the library
 * is linked statically into it) and, when told to, enqueues a marker in place of the chosen
 * commands: their functions never run and their events complete, as for a skipped command. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <unistd.h>

#include "ct_test.h"
#include "device/device.h"
#include "linalg/linalg.h"
#include "linalg_util.h"

enum skip { SKIP_NONE, SKIP_GEMM, SKIP_PROBES };
static _Atomic int skip_mode = SKIP_NONE;
static atomic_int skipped;

typedef cl_int (*native_fn)(cl_command_queue, void(CL_CALLBACK *)(void *), void *, size_t, cl_uint, const cl_mem *,
                            const void **, cl_uint, const cl_event *, cl_event *);

cl_int clEnqueueNativeKernel(cl_command_queue q, void(CL_CALLBACK *fn)(void *), void *args, size_t args_size,
                             cl_uint nmem, const cl_mem *mems, const void **locs, cl_uint nwait,
                             const cl_event *wait, cl_event *ev) {
  static native_fn real;
  if (!real) real = (native_fn)dlsym(RTLD_NEXT, "clEnqueueNativeKernel");
  int mode = atomic_load(&skip_mode);
  /* The GEMM lists all of its (here: distinct) buffers, a probe one. */
  if ((mode == SKIP_GEMM && nmem > 1) || (mode == SKIP_PROBES && nmem == 1)) {
    atomic_fetch_add(&skipped, 1);
    return clEnqueueMarkerWithWaitList(q, nwait, wait, ev);
  }
  return real(q, fn, args, args_size, nmem, mems, locs, nwait, wait, ev);
}

/* a, b and c in buffers of their own: the GEMM has two probes and a pointer block. */
static void run_product(ct_device *d, enum skip mode) {
  if (!d) return; /* skipped, and said, by native_host_device() */
  ct_tensor *a = lt_own_buffer(d, CT_F32, 2, (int64_t[]){8, 8}), *b = lt_own_buffer(d, CT_F32, 2, (int64_t[]){8, 8}),
            *c = lt_own_buffer(d, CT_F32, 2, (int64_t[]){8, 8});
  cl_command_queue q = ct__device_queue(d);
  ck_assert_int_eq(clFinish(q), CL_SUCCESS);
  long before = ct__gemm_host_blocks_live();
  atomic_store(&skipped, 0);
  atomic_store(&skip_mode, mode);
  ck_assert_ct_ok(ct_matmul_out(c, a, b));
  atomic_store(&skip_mode, SKIP_NONE);
  ck_assert_int_eq(atomic_load(&skipped), mode == SKIP_GEMM ? 1 : mode == SKIP_PROBES ? 2 : 0);
  ck_assert_int_eq(clFinish(q), CL_SUCCESS);
  /* Freed by an event callback, which may run just after clFinish returns: poll, with a
   * generous deadline that only bounds a hang. */
  for (int i = 0; i < 3000 && ct__gemm_host_blocks_live() != before; i++) usleep(10000);
  ck_assert_int_eq(ct__gemm_host_blocks_live(), before);
  ct_release(c);
  ct_release(b);
  ct_release(a);
}

/* The device, on the host route with native kernels (CLTENSOR_GEMM=host on PoCL); NULL after a
 * TAP skip comment where the implementation has no native kernels (rusticl): the host route
 * then maps buffers instead, which linalg-matrix-host-mapped tests. */
static ct_device *native_host_device(void) {
  ct_device *d = ct_test_device();
  ct_gemm_route route;
  ck_assert_ct_ok(ct_gemm_route_get(&route, d));
  if (!ct_test_needs(d->native_kernels, "the host route's native-kernel products",
                     "native kernels (CL_EXEC_NATIVE_KERNEL)", d))
    return NULL;
  ck_assert_msg(route == CT_GEMM_ROUTE_HOST, "this test needs the host route (CLTENSOR_GEMM=host)");
  return d;
}

START_TEST(test_gemm_run_frees_its_block) {
  run_product(native_host_device(), SKIP_NONE);
}
END_TEST

START_TEST(test_skipped_gemm_frees_its_block) {
  run_product(native_host_device(), SKIP_GEMM);
}
END_TEST

/* Before the fix: BLAS got a NULL base pointer (a crash). Now the product is skipped. */
START_TEST(test_gemm_after_skipped_probes_is_not_run) {
  run_product(native_host_device(), SKIP_PROBES);
}
END_TEST

/* A DYNAMIC_ARCH OpenBLAS that fell back to its Prescott kernels on a CPU with AVX2 or AVX-512
 * is switched to the CPU's kernels before the first host GEMM (host_blas_core.c), unless the
 * user set OPENBLAS_CORETYPE or CLTENSOR_OPENBLAS_CORETYPE=0; the products stay right
 * (run_product checks them). On a machine where OpenBLAS chose well, nothing changes. */
static bool cpu_has_avx2_fma(void) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

START_TEST(test_openblas_core_switch) {
  if (_i == 1) setenv("CLTENSOR_OPENBLAS_CORETYPE", "0", 1);
  ct_device *d = native_host_device();
  if (!d) return;
  run_product(d, SKIP_NONE);
  const char *before = NULL, *after = ct__host_blas_core(&before);
  if (_i == 1 || getenv("OPENBLAS_CORETYPE") || !cpu_has_avx2_fma() || strcasecmp(before, "Prescott") != 0)
    ck_assert_str_eq(after, before);
  else
    ck_assert_msg(strcasecmp(after, "Prescott") != 0, "OpenBLAS still runs %s kernels", after);
}
END_TEST

/* The switch must not write the environment: other threads read it meanwhile (PoCL's device
 * threads at each launch, the application's). With setenv()/unsetenv() it crashed a getenv()
 * on another thread (stress/threads-one). Here three threads walk the environment while the
 * first GEMM switches the kernels; the setenv() first makes glibc own the array, which a
 * setenv() by the library would then reallocate and free (MALLOC_PERTURB_ makes the freed
 * array's pointers garbage). */
static atomic_bool readers_stop;
static atomic_long readers_reads;

static void *env_reader(void *arg) {
  (void)arg;
  long n = 0;
  while (!atomic_load(&readers_stop)) {
    if (getenv("CT_TEST_ENV_READER_NO_SUCH_VARIABLE")) abort();
    if (!getenv("CT_TEST_ENV_READER")) abort();
    n++;
  }
  atomic_fetch_add(&readers_reads, n);
  return NULL;
}

START_TEST(test_openblas_core_switch_leaves_environment) {
  ck_assert_int_eq(setenv("CT_TEST_ENV_READER", "1", 1), 0);
  ct_device *d = native_host_device();
  if (!d) return;
  pthread_t th[3];
  for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, env_reader, NULL), 0);
  run_product(d, SKIP_NONE);
  atomic_store(&readers_stop, true);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  ck_assert_ptr_null(getenv("OPENBLAS_CORETYPE"));
  ck_assert_str_eq(getenv("CT_TEST_ENV_READER"), "1");
}
END_TEST

/* Small products run with one OpenBLAS thread, large ones with OpenBLAS's count, and the count
 * is put back after the last small product ends, also with products running on several threads
 * at once (host_blas_core.c). cblas_sgemm is interposed to record the count each call sees; _i
 * 1 is CLTENSOR_OPENBLAS_THREADS=keep, which leaves the count alone. */
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
static atomic_int seen_small_max, seen_large_min = 1000;

void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc) {
  static sgemm_fn real;
  if (!real) real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
  int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
  int t = get ? get() : 0;
  if ((int64_t)m * n * k < ((int64_t)1 << 26)) {
    int cur = atomic_load(&seen_small_max);
    while (t > cur && !atomic_compare_exchange_weak(&seen_small_max, &cur, t)) {}
  } else {
    int cur = atomic_load(&seen_large_min);
    while (t < cur && !atomic_compare_exchange_weak(&seen_large_min, &cur, t)) {}
  }
  real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

struct mm_job {
  ct_device *d;
  int64_t m, n, k;
  int reps;
};

static void *mm_worker(void *arg) {
  struct mm_job *j = arg;
  ct_tensor *a = NULL, *b = NULL, *c = NULL;
  ck_assert_ct_ok(ct_ones(&a, j->d, CT_F32, 2, (int64_t[]){j->m, j->k}));
  ck_assert_ct_ok(ct_ones(&b, j->d, CT_F32, 2, (int64_t[]){j->k, j->n}));
  ck_assert_ct_ok(ct_empty(&c, j->d, CT_F32, 2, (int64_t[]){j->m, j->n}));
  for (int r = 0; r < j->reps; r++) ck_assert_ct_ok(ct_matmul_out(c, a, b));
  size_t nb = (size_t)(j->m * j->n) * sizeof(float);
  float *v = malloc(nb);
  ck_assert_ptr_nonnull(v);
  ck_assert_ct_ok(ct_to_host(c, v, nb)); /* waits; every element of ones @ ones is k */
  for (int64_t i = 0; i < j->m * j->n; i++) ck_assert(v[i] == (float)j->k);
  free(v);
  ct_release(c);
  ct_release(b);
  ct_release(a);
  return NULL;
}

START_TEST(test_openblas_threads_small_products) {
  if (_i == 1) setenv("CLTENSOR_OPENBLAS_THREADS", "keep", 1);
  int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
  void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
  if (!get || !set) return; /* another BLAS: nothing to check */
  set(2);
  ck_assert_int_eq(get(), 2);
  ct_device *d = native_host_device();
  if (!d) return;
  /* Three threads of small products at once, then one large product (2^26 multiply-adds). */
  struct mm_job small = {d, 64, 64, 64, 20}, large = {d, 512, 512, 256, 1};
  pthread_t th[3];
  for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, mm_worker, &small), 0);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  mm_worker(&large);
  ck_assert_int_eq(atomic_load(&seen_small_max), _i == 1 ? 2 : 1);
  ck_assert_int_eq(atomic_load(&seen_large_min), 2);
  ck_assert_int_eq(get(), 2);
}
END_TEST

/* CLTENSOR_GEMM_SPLIT: 0 keeps every product on the device's queue (results as with the split);
 * a value that is not a boolean is an error of the product that would split, naming it. */
START_TEST(test_gemm_split_env) {
  ct_device *d = native_host_device();
  if (!d) return;
  ct__gemm_split_min_madds = 1;
  setenv("CLTENSOR_GEMM_SPLIT", _i == 0 ? "0" : "maybe", 1);
  ct_tensor *a = NULL, *b = NULL, *c = NULL;
  ck_assert_ct_ok(ct_ones(&a, d, CT_F32, 2, (int64_t[]){64, 48}));
  ck_assert_ct_ok(ct_ones(&b, d, CT_F32, 2, (int64_t[]){48, 40}));
  ct_status st = ct_matmul(&c, a, b);
  if (_i == 0) {
    ck_assert_ct_ok(st);
    float v[64 * 40];
    ck_assert_ct_ok(ct_to_host(c, v, sizeof v));
    for (int i = 0; i < 64 * 40; i++) ck_assert(v[i] == 48.0f);
  } else {
    ck_assert_int_eq(st, CT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "CLTENSOR_GEMM_SPLIT='maybe'"));
    ck_assert_ptr_null(c);
  }
  ct_release(c);
  ct_release(b);
  ct_release(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("linalg-gemm-host-release");
  TCase *tc = tcase_create("release");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_gemm_run_frees_its_block);
  tcase_add_test(tc, test_skipped_gemm_frees_its_block);
  tcase_add_test(tc, test_gemm_after_skipped_probes_is_not_run);
  tcase_add_loop_test(tc, test_openblas_core_switch, 0, 2);
  tcase_add_loop_test(tc, test_openblas_core_switch_leaves_environment, 0, 8);
  tcase_add_loop_test(tc, test_openblas_threads_small_products, 0, 2);
  tcase_add_loop_test(tc, test_gemm_split_env, 0, 2);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
