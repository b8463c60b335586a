/* Making OpenBLAS use the kernels of the CPU it runs on.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's, Ubuntu's) picks its kernels from the CPU model
 * when it loads. Releases older than the CPU don't know its model and fall back to "Prescott"
 * (SSE3) kernels: OpenBLAS 0.3.21 (Debian 12) on a 5th-generation Xeon (family 6, model 207)
 * runs sgemm at 5-20 GFLOP/s single-threaded where its SkylakeX kernels give 30-110 (measured
 * side by side, docs/GEMM.md). The user's fix is OPENBLAS_CORETYPE=SkylakeX; we apply it for
 * them, once, before our first host GEMM, when all of these hold:
 *   - OpenBLAS reports core "Prescott" (its fallback; a genuinely old CPU fails the next test),
 *   - the CPU and the OS support AVX-512 (F, BW, DQ, VL: SkylakeX's kernels) or AVX2 + FMA
 *     (Haswell's),
 *   - OPENBLAS_CORETYPE is not set (the user decides) and CLTENSOR_OPENBLAS_CORETYPE is not 0,
 *   - the library exports gotoblas_dynamic_quit/init (DYNAMIC_ARCH builds; looked up with dlsym,
 *     so other BLAS libraries are untouched).
 * OpenBLAS's own re-initialisation (gotoblas_dynamic_quit, then gotoblas_dynamic_init reading
 * OPENBLAS_CORETYPE) does the switch, with the variable visible only for that call (below: the
 * environment itself is never written). It must not race another thread inside OpenBLAS: it
 * runs under pthread_once before any GEMM of ours; an application that calls OpenBLAS itself
 * from other threads at that moment should set OPENBLAS_CORETYPE itself (or
 * CLTENSOR_OPENBLAS_CORETYPE=0). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "linalg/linalg.h"

#if CT_HAVE_HOST_BLAS

static char ct__blas_core_before[32], ct__blas_core_after[32];

/* Whether $name turns a fix off: 0, off, false or no (any case), or `also` when not NULL. */
static bool ct__env_off(const char *name, const char *also) {
  const char *v = getenv(name);
  return v && (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
               (also && !strcasecmp(v, also)));
}

static const char *ct__cpu_coretype(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  /* libgcc's checks include the OS's XCR0 support of the AVX/AVX-512 state. */
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return NULL;
}

/* Runs init() with OPENBLAS_CORETYPE=want in its getenv(), without writing the environment.
 * setenv() and unsetenv() race every getenv() on other threads, and other threads read it all
 * the time: PoCL's device threads at each kernel launch, the application's, ours. glibc's
 * setenv() frees the array they may be walking (a segfault in PoCL's getenv, under
 * stress/threads-one, when the first GEMM came while other threads launched kernels). Instead
 * `environ` points, for the call, at a copy of the array with the variable added, then back;
 * neither array is changed or freed (the copy stays reachable from ct__blas_env), so a getenv()
 * elsewhere walks one whole array or the other. Returns false when the copy cannot be made. */
/* volatile: the store must stay (never read back, it would be optimized away), so that the copy
 * stays reachable for leak checkers. */
static char **volatile ct__blas_env;
static char ct__blas_env_var[64];

static bool ct__init_with_coretype(const char *want, void (*init)(void)) {
  char **old = __atomic_load_n(&environ, __ATOMIC_ACQUIRE);
  size_t n = 0;
  while (old && old[n]) n++;
  char **env = malloc((n + 2) * sizeof *env);
  if (!env) return false;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(old[i], "OPENBLAS_CORETYPE=", 18) != 0) env[m++] = old[i];
  snprintf(ct__blas_env_var, sizeof ct__blas_env_var, "OPENBLAS_CORETYPE=%s", want);
  env[m++] = ct__blas_env_var;
  env[m] = NULL;
  ct__blas_env = env;
  __atomic_store_n(&environ, env, __ATOMIC_RELEASE);
  init();
  __atomic_store_n(&environ, old, __ATOMIC_RELEASE);
  return true;
}

static void ct__blas_core_fix(void) {
  const char *(*corename)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_corename");
  void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
  void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
  if (!corename || !quit || !init) return;
  const char *now = corename();
  if (!now) return;
  strncpy(ct__blas_core_before, now, sizeof ct__blas_core_before - 1);
  strncpy(ct__blas_core_after, now, sizeof ct__blas_core_after - 1);
  if (ct__env_off("CLTENSOR_OPENBLAS_CORETYPE", NULL)) return;
  if (getenv("OPENBLAS_CORETYPE") || strcasecmp(now, "Prescott") != 0) return;
  const char *want = ct__cpu_coretype();
  if (!want) return;
  quit();
  if (!ct__init_with_coretype(want, init)) init(); /* no memory for the copy: OpenBLAS's own choice */
  now = corename();
  if (now) strncpy(ct__blas_core_after, now, sizeof ct__blas_core_after - 1);
}

static pthread_once_t ct__blas_core_once = PTHREAD_ONCE_INIT;

void ct__host_blas_prepare(void) { pthread_once(&ct__blas_core_once, ct__blas_core_fix); }

const char *ct__host_blas_core(const char **before) {
  ct__host_blas_prepare();
  if (before) *before = ct__blas_core_before;
  return ct__blas_core_after;
}

/* ---- One OpenBLAS thread for the small products ----
 * OpenBLAS's pthread server keeps its helper threads spinning on sched_yield() for about 2^28
 * cycles (0.1 s) after every threaded call before they sleep (OPENBLAS_THREAD_TIMEOUT, read once
 * when OpenBLAS loads). Our GEMMs alternate with kernels that PoCL spreads over every core, so
 * after each threaded product a spinning helper takes a core's share from the next kernels, and
 * the calling thread spins while it waits for the helper inside the product: perf of the
 * character GPT's forward showed 60% of the process's samples in sched_yield. On the small and
 * skinny products of the example models OpenBLAS's second thread gains little (0.3.21: 2048 x
 * 64 x 256 in 464 us on two threads against 558 on one), so products of fewer than
 * CT__BLAS_ONE_THREAD_BELOW multiply-adds run with one OpenBLAS thread: the helpers are never
 * woken and stay asleep. Larger products keep OpenBLAS's thread count (the 1024^3 matmul target
 * is measured against OpenBLAS's own threads). OpenBLAS has one global thread count: it is
 * lowered while at least one of our small products runs and put back when the last one ends,
 * under a mutex; an application calling OpenBLAS itself from another thread meanwhile runs on
 * one thread too (only its speed differs: OpenBLAS's sgemm/dgemm split rows and columns across
 * threads, never the sum over k, so results are the same bits). CLTENSOR_OPENBLAS_THREADS=keep
 * (or 0, off) leaves the count alone. Looked up with dlsym: other BLAS libraries are untouched. */
static int (*ct__ob_get_threads)(void);
static void (*ct__ob_set_threads)(int);
static pthread_once_t ct__ob_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t ct__ob_mutex = PTHREAD_MUTEX_INITIALIZER;
static int ct__ob_inflight, ct__ob_saved;

static void ct__ob_lookup(void) {
  if (ct__env_off("CLTENSOR_OPENBLAS_THREADS", "keep")) return;
  int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
  void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
  if (get && set) {
    ct__ob_get_threads = get;
    ct__ob_set_threads = set;
  }
}

bool ct__host_blas_small_begin(int64_t madds) {
  if (madds >= CT__BLAS_ONE_THREAD_BELOW) return false;
  pthread_once(&ct__ob_once, ct__ob_lookup);
  if (!ct__ob_set_threads) return false;
  pthread_mutex_lock(&ct__ob_mutex);
  if (ct__ob_inflight++ == 0) {
    ct__ob_saved = ct__ob_get_threads();
    if (ct__ob_saved > 1) ct__ob_set_threads(1);
  }
  pthread_mutex_unlock(&ct__ob_mutex);
  return true;
}

void ct__host_blas_small_end(bool began) {
  if (!began) return;
  pthread_mutex_lock(&ct__ob_mutex);
  if (--ct__ob_inflight == 0 && ct__ob_saved > 1) ct__ob_set_threads(ct__ob_saved);
  pthread_mutex_unlock(&ct__ob_mutex);
}

#else

bool ct__host_blas_small_begin(int64_t madds) {
  (void)madds;
  return false;
}
void ct__host_blas_small_end(bool began) { (void)began; }
void ct__host_blas_prepare(void) {}
const char *ct__host_blas_core(const char **before) {
  if (before) *before = "";
  return "";
}

#endif
