/* cltensor-tune: searches CLBlast GEMM parameters for one device and stores the best set where
 * libcltensor finds it (docs/GEMM.md). Every GEMM it times goes through ct_matmul_out() on the
 * CLBlast route, so it measures exactly what the library will run, and every candidate's result
 * is checked against a double-precision host reference before it may win.
 *
 * Three phases share the time budget:
 *   Xgemm        the indirect kernel (large products), at --size: random samples from the union
 *                of CLBlast's tuner spaces for both kernels (GEMMK 0 and 1; 0 only on CPU
 *                devices, see next_xgemm), then mutations of
 *                the best; the best few are measured again before one is chosen
 *   XgemmDirect  the single-kernel GEMM (small products): n = 256 and a batch of 64 64x64
 *                products, scored by their geometric mean
 *   GemmRoutine  the crossover: the smallest size from which the indirect kernel stays faster
 *
 * Candidates run in a worker process (this program re-executed with --worker), because some
 * parameter sets that pass every documented constraint still crash inside CLBlast's compiled
 * kernel on some drivers (seen on PoCL 3.1: a segfault in Xgemm), and a hung or crashed worker
 * must only cost that candidate. The worker keeps its operands and references between
 * candidates and is restarted after a crash or a timeout. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cltensor/cltensor.h"
#include "common/tune_support.h"

static void usage(FILE *f) {
  fprintf(f,
          "Usage: cltensor-tune [options]\n"
          "Searches CLBlast's GEMM parameters (Xgemm, XgemmDirect, GemmRoutine) for a device and stores\n"
          "the best set in libcltensor's cache folder, where every later GEMM on that device finds it.\n"
          "\n"
          "  -d, --device SPEC   the device (default: the default device; see cltensor-info)\n"
          "  -s, --seconds N     time budget for the whole search (default 600)\n"
          "  -n, --size N        matrix size of the Xgemm search, n x n x n (default 1024)\n"
          "  -t, --dtype T       f32 (default), f64, or f16 (devices with cl_khr_fp16)\n"
          "  -o, --output PATH   write the file here instead of the cache folder\n"
          "      --dry-run       search and report, write nothing\n"
          "      --seed N        random seed (default: from the clock)\n"
          "      --candidates N  at most N random candidates per phase besides the stored and shipped\n"
          "                      sets (default: as many as the time allows)\n"
          "      --clock C       wall (default) or cpu: time GEMMs by the process's CPU time over the\n"
          "                      device's compute units; steadier on a busy machine, CPU devices only\n"
          "  -h, --help          this text\n"
          "\n"
          "Progress and an ETA go to stderr; the summary to stdout. The file is written atomically and\n"
          "keeps the sets of other precisions already stored for the device.\n");
}

/* ---- Small utilities ---- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* --clock cpu: the process's CPU time divided by the device's compute units, which equals wall
 * time on an idle machine when the GEMM keeps every core busy, and is far less noisy on a busy
 * one. Only meaningful for CPU devices whose work runs in this process (PoCL). */
static bool cpu_clock;
static double cpu_units = 1;
static double bench_clock(void) {
  if (!cpu_clock) return now();
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return ((double)t.tv_sec + (double)t.tv_nsec * 1e-9) / cpu_units;
}

static uint64_t rng_state;
static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}
static size_t pick(const size_t *v, size_t n) { return v[rnd() % n]; }
#define PICK(...) pick((const size_t[]){__VA_ARGS__}, sizeof((const size_t[]){__VA_ARGS__}) / sizeof(size_t))

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static bool tty;
static double t_end;   /* when the search phases must end */
static long max_candidates = -1;   /* random candidates per phase; -1: no limit */

static void fmt_time(char *buf, size_t n, double s) {
  if (s < 0) s = 0;
  if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
  else snprintf(buf, n, "%ds", (int)s);
}

static void progress(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(tty ? "\r\033[K" : "", stderr);
  vfprintf(stderr, fmt, ap);
  fputs(tty ? "" : "\n", stderr);
  fflush(stderr);
  va_end(ap);
}

static void progress_done(void) {
  if (tty) fputc('\n', stderr);
}

/* ---- Problems: operands, result, reference ---- */

struct problem {
  const char *name;
  int64_t batch, m, n, k;
  ct_tensor *a, *b, *c;
  double *ref, *bound;
  double flops;
  uint64_t digest;   /* of the operands and the reference, to catch stray writes */
};

static uint64_t fnv(const void *data, size_t n, uint64_t h) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static ct_dtype dtype = CT_F32;
static enum ctt_prec prec = CTT_PREC_F32;
static ct_device *dev;

static void die(const char *what) {
  progress_done();
  fprintf(stderr, "cltensor-tune: %s: %s\n", what, ct_last_error());
  exit(1);
}

static double unit_roundoff(void) {
  return dtype == CT_F64 ? ldexp(1, -53) : dtype == CT_F16 ? ldexp(1, -11) : ldexp(1, -24);
}

static void store(void *p, size_t i, double v) {
  if (dtype == CT_F64) ((double *)p)[i] = v;
  else if (dtype == CT_F16) ((uint16_t *)p)[i] = ct_f32_to_f16((float)v);
  else ((float *)p)[i] = (float)v;
}

static double load(const void *p, size_t i) {
  if (dtype == CT_F64) return ((const double *)p)[i];
  if (dtype == CT_F16) return ct_f16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}

static void problem_init(struct problem *p, const char *name, int64_t batch, int64_t m, int64_t n, int64_t k,
                         uint64_t seed) {
  uint64_t saved_rng = rng_state;
  rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
  p->name = name;
  p->batch = batch;
  p->m = m;
  p->n = n;
  p->k = k;
  p->flops = 2.0 * (double)batch * (double)m * (double)n * (double)k;
  size_t es = ct_dtype_size(dtype), na = (size_t)(batch * m * k), nb = (size_t)(batch * k * n),
         nc = (size_t)(batch * m * n);
  void *ha = malloc(na * es), *hb = malloc(nb * es);
  double *da = malloc(na * sizeof(double)), *db = malloc(nb * sizeof(double));
  p->ref = calloc(nc, sizeof(double));
  p->bound = calloc(nc, sizeof(double));
  if (!ha || !hb || !da || !db || !p->ref || !p->bound) {
    fprintf(stderr, "cltensor-tune: out of host memory\n");
    exit(1);
  }
  for (size_t i = 0; i < na; i++) {
    store(ha, i, (double)(rnd() >> 11) / 9007199254740992.0 * 2 - 1);
    da[i] = load(ha, i);
  }
  for (size_t i = 0; i < nb; i++) {
    store(hb, i, (double)(rnd() >> 11) / 9007199254740992.0 * 2 - 1);
    db[i] = load(hb, i);
  }
  /* Reference in double, i-p-j order so the inner loop streams rows. */
  double *absum = calloc((size_t)n, sizeof(double));
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t i = 0; i < m; i++) {
      double *r = p->ref + (bi * m + i) * n, *bd = p->bound + (bi * m + i) * n;
      for (int64_t j = 0; j < n; j++) absum[j] = 0;
      for (int64_t q = 0; q < k; q++) {
        double x = da[(bi * m + i) * k + q];
        const double *brow = db + (bi * k + q) * n;
        for (int64_t j = 0; j < n; j++) {
          r[j] += x * brow[j];
          absum[j] += fabs(x * brow[j]);
        }
      }
      /* The dot-product bound of linalg's tests: 2 (k + 2) u sum |a||b|. */
      for (int64_t j = 0; j < n; j++) bd[j] = 2.0 * (double)(k + 2) * unit_roundoff() * absum[j] + 1e-300;
    }
  free(absum);
  int64_t sa[3] = {batch, m, k}, sb[3] = {batch, k, n}, sc[3] = {batch, m, n};
  int nd = batch > 1 ? 3 : 2, off = batch > 1 ? 0 : 1;
  if (ct_from_host(&p->a, dev, dtype, nd, sa + off, ha) != CT_OK ||
      ct_from_host(&p->b, dev, dtype, nd, sb + off, hb) != CT_OK ||
      ct_empty(&p->c, dev, dtype, nd, sc + off) != CT_OK)
    die("creating the operands");
  p->digest = fnv(ha, na * es, 14695981039346656037ull);
  p->digest = fnv(hb, nb * es, p->digest);
  p->digest = fnv(p->ref, nc * sizeof(double), p->digest);
  p->digest = fnv(p->bound, nc * sizeof(double), p->digest);
  free(ha);
  free(hb);
  free(da);
  free(db);
  rng_state = saved_rng;
}

/* Whether the operands on the device and the host reference are still what problem_init made.
 * On a CPU device the kernels run in this process's memory, and a parameter set can make
 * CLBlast's kernel write outside its buffers: a candidate that corrupts anything is rejected,
 * and the worker is replaced. */
static bool problem_intact(const struct problem *p) {
  size_t es = ct_dtype_size(dtype), na = (size_t)(p->batch * p->m * p->k), nb = (size_t)(p->batch * p->k * p->n),
         nc = (size_t)(p->batch * p->m * p->n);
  void *h = malloc((na > nb ? na : nb) * es);
  if (!h) return false;
  bool ok = ct_to_host(p->a, h, na * es) == CT_OK;
  uint64_t d = fnv(h, na * es, 14695981039346656037ull);
  ok = ok && ct_to_host(p->b, h, nb * es) == CT_OK;
  d = fnv(h, nb * es, d);
  free(h);
  d = fnv(p->ref, nc * sizeof(double), d);
  d = fnv(p->bound, nc * sizeof(double), d);
  return ok && d == p->digest;
}

/* The problems candidates are timed on, by id: the search size, 256^3, a batch of 64 64x64
 * products, then the crossover sizes. */
static const long cross_sizes[] = {64, 96, 128, 192, 256, 384, 512, 768, 1024};
#define NCROSS ((int)(sizeof cross_sizes / sizeof cross_sizes[0]))
enum { P_BIG, P_MID, P_BATCH, P_CROSS0, P_COUNT = P_CROSS0 + NCROSS };
static long size = 1024;
static struct problem probs[P_COUNT];

static struct problem *problem_get(int id) {
  struct problem *p = &probs[id];
  if (!p->a) {
    if (id == P_BIG) problem_init(p, "n", 1, size, size, size, 1);
    else if (id == P_MID) problem_init(p, "256", 1, 256, 256, 256, 2);
    else if (id == P_BATCH) problem_init(p, "batch", 64, 64, 64, 64, 3);
    else {
      long n = cross_sizes[id - P_CROSS0];
      problem_init(p, "crossover", 1, n, n, n, 10 + (uint64_t)id);
    }
  }
  return p;
}



/* Runs the product once and compares with the reference. */
static bool run_and_check(struct problem *p, char *why, size_t why_size) {
  if (ct_matmul_out(p->c, p->a, p->b) != CT_OK || ct_device_synchronize(dev) != CT_OK) {
    snprintf(why, why_size, "%s", ct_last_error());
    return false;
  }
  size_t nc = (size_t)(p->batch * p->m * p->n), es = ct_dtype_size(dtype);
  void *h = malloc(nc * es);
  if (!h || ct_to_host(p->c, h, nc * es) != CT_OK) {
    free(h);
    snprintf(why, why_size, "reading the result: %s", ct_last_error());
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < nc && ok; i++) {
    double g = load(h, i);
    if (!(fabs(g - p->ref[i]) <= p->bound[i])) {
      snprintf(why, why_size, "wrong result: element %zu is %g, expected %g", i, g, p->ref[i]);
      ok = false;
    }
  }
  free(h);
  return ok;
}

/* Median GFLOP/s of up to `runs` timed runs: fewer when a run is slow (the budget per
 * measurement is about max_seconds), and just one when that one is below give_up (a candidate
 * far behind the best needs no precise figure). */
static double measure(struct problem *p, int runs, double max_seconds, double give_up) {
  double g[16];
  int n = 0;
  double start = now();
  while (n < runs && n < 16) {
    double t0 = bench_clock();
    if (ct_matmul_out(p->c, p->a, p->b) != CT_OK || ct_device_synchronize(dev) != CT_OK) return 0;
    double dt = bench_clock() - t0;
    g[n++] = p->flops / dt / 1e9;
    if (n == 1 && g[0] < give_up) break;
    if (now() - start > max_seconds) break;
  }
  qsort(g, (size_t)n, sizeof g[0], cmp_double);
  return g[n / 2];
}

/* ---- Candidates ---- */

/* The value sets of CLBlast's own tuner (src/tuning/kernels/xgemm.hpp variations 2 and 12,
 * xgemm_direct.hpp variation 2): its kernels are exercised on those; wider values pass the
 * constraints but crash or write out of bounds far more often on PoCL. */
static void gen_xgemm(size_t *x, int gemmk) {
  x[CTT_X_GEMMK] = (size_t)gemmk;
  if (gemmk == 0) {
    x[CTT_X_MWG] = PICK(16, 32, 64, 128);
    x[CTT_X_NWG] = PICK(16, 32, 64, 128);
    x[CTT_X_KWG] = PICK(16, 32);
    x[CTT_X_MDIMC] = PICK(8, 16, 32);
    x[CTT_X_NDIMC] = PICK(8, 16, 32);
    x[CTT_X_MDIMA] = PICK(8, 16, 32);
    x[CTT_X_NDIMB] = PICK(8, 16, 32);
    x[CTT_X_KWI] = 2;
    x[CTT_X_VWM] = PICK(1, 2, 4, 8);
    x[CTT_X_VWN] = PICK(1, 2, 4, 8);
    x[CTT_X_STRM] = PICK(0, 1);
    x[CTT_X_STRN] = PICK(0, 1);
    x[CTT_X_SA] = PICK(0, 1);
    x[CTT_X_SB] = PICK(0, 1);
    x[CTT_X_KREG] = 1;
  } else {
    x[CTT_X_MWG] = PICK(8, 16, 32, 64, 128);
    x[CTT_X_NWG] = PICK(8, 16, 32, 64, 128);
    x[CTT_X_KWG] = 1;
    x[CTT_X_KWI] = 1;
    x[CTT_X_MDIMC] = x[CTT_X_MDIMA] = PICK(2, 4, 8, 16, 32);
    x[CTT_X_NDIMC] = x[CTT_X_NDIMB] = PICK(2, 4, 8, 16, 32);
    x[CTT_X_VWM] = PICK(1, 2, 4, 8);
    x[CTT_X_VWN] = PICK(1, 2, 4, 8);
    x[CTT_X_KREG] = PICK(1, 2, 4, 8, 16);
    x[CTT_X_SA] = x[CTT_X_SB] = x[CTT_X_STRM] = x[CTT_X_STRN] = 0;
  }
}

static void gen_direct(size_t *d) {
  d[CTT_D_WGD] = PICK(8, 16, 32, 64);
  d[CTT_D_MDIMCD] = PICK(8, 16, 32);
  d[CTT_D_NDIMCD] = PICK(8, 16, 32);
  d[CTT_D_MDIMAD] = PICK(8, 16, 32);
  d[CTT_D_NDIMBD] = PICK(8, 16, 32);
  d[CTT_D_KWID] = PICK(2, 8, 16);
  d[CTT_D_VWMD] = PICK(1, 2, 4, 8);
  d[CTT_D_VWND] = PICK(1, 2, 4, 8);
  d[CTT_D_PADA] = PICK(0, 1);
  d[CTT_D_PADB] = PICK(0, 1);
}

static bool valid(const ctt_gemm_params *p) {
  char why[256];
  return ctt_gemm_params_valid(p, ct_device_properties(dev), ct_dtype_size(dtype), why, sizeof why);
}

/* A random valid Xgemm set: fresh (mutate == NULL) or one or two parameters of *mutate changed. */
static void next_xgemm(ctt_gemm_params *p, const ctt_gemm_params *mutate) {
  for (int tries = 0; tries < 100000; tries++) {
    size_t fresh[CTT_XGEMM_NPARAMS];
    if (!mutate || rnd() % 8 == 0) {
      /* No fresh GEMMK=1 sets on CPU devices: there a kernel's stray writes land in this
       * process's heap, and CLBlast's GEMMK=1 kernel writes past C with most of its space
       * (of 8 sets tried on PoCL 3.1, the first also on rusticl's llvmpipe, 7 wrong and 6 of
       * them writing past C; 5 GEMMK=0 sets right; docs/GEMM.md). A stored set's GEMMK stays. */
      bool cpu = ct_device_properties(dev)->type == CT_DEVICE_CPU;
      gen_xgemm(p->xgemm, cpu ? 0 : (int)(rnd() % 2));
    } else {
      memcpy(p->xgemm, mutate->xgemm, sizeof p->xgemm);
      gen_xgemm(fresh, (int)p->xgemm[CTT_X_GEMMK]);
      int changes = 1 + (int)(rnd() % 2);
      for (int c = 0; c < changes; c++) {
        int i = (int)(rnd() % CTT_XGEMM_NPARAMS);
        if (i == CTT_X_GEMMK) continue;
        p->xgemm[i] = fresh[i];
        /* GEMMK=1 ties these together; keep them tied. */
        if (p->xgemm[CTT_X_GEMMK] == 1) {
          if (i == CTT_X_MDIMC || i == CTT_X_MDIMA) p->xgemm[CTT_X_MDIMC] = p->xgemm[CTT_X_MDIMA] = fresh[i];
          if (i == CTT_X_NDIMC || i == CTT_X_NDIMB) p->xgemm[CTT_X_NDIMC] = p->xgemm[CTT_X_NDIMB] = fresh[i];
        }
      }
    }
    if (valid(p) && (!mutate || memcmp(p->xgemm, mutate->xgemm, sizeof p->xgemm) != 0)) return;
  }
  memcpy(p->xgemm, mutate ? mutate->xgemm : p->xgemm, sizeof p->xgemm);
}

static void next_direct(ctt_gemm_params *p, const ctt_gemm_params *mutate) {
  for (int tries = 0; tries < 100000; tries++) {
    size_t fresh[CTT_XDIRECT_NPARAMS];
    if (!mutate || rnd() % 8 == 0) {
      gen_direct(p->direct);
    } else {
      memcpy(p->direct, mutate->direct, sizeof p->direct);
      gen_direct(fresh);
      int changes = 1 + (int)(rnd() % 2);
      for (int c = 0; c < changes; c++) {
        int i = (int)(rnd() % CTT_XDIRECT_NPARAMS);
        p->direct[i] = fresh[i];
      }
    }
    if (valid(p) && (!mutate || memcmp(p->direct, mutate->direct, sizeof p->direct) != 0)) return;
  }
  memcpy(p->direct, mutate ? mutate->direct : p->direct, sizeof p->direct);
}

static void describe(char *buf, size_t n, const char *const *names, const size_t *v, int count) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < count && used < n; i++) {
    int w = snprintf(buf + used, n - used, "%s%s=%zu", i ? " " : "", names[i], v[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* ---- Search ---- */

#define TOP 3
struct scored {
  ctt_gemm_params p;
  double score;
};

static void keep_top(struct scored *top, int *ntop, const ctt_gemm_params *p, double score) {
  int i;
  if (*ntop < TOP) {
    i = (*ntop)++;
  } else {
    if (top[TOP - 1].score >= score) return;
    i = TOP - 1;
  }
  top[i] = (struct scored){*p, score};
  for (; i > 0 && top[i].score > top[i - 1].score; i--) {
    struct scored t = top[i];
    top[i] = top[i - 1];
    top[i - 1] = t;
  }
}

/* ---- The worker ----
 * Protocol, one line each way:
 *   E <seq> <with_params 0|1> <runs> <give_up> <nprob> <ids...> [16 Xgemm, 10 XgemmDirect, crossover]
 *   R <seq> <score>      geometric mean of GFLOP/s over the problems
 *   F <seq> <reason>     the candidate failed (error or wrong result) */

/* Copies text into a buffer, cut to fit. */
static void copy_text(char *dst, size_t n, const char *src) {
  size_t len = strlen(src);
  if (len >= n) len = n - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

static void one_line(char *s) {
  for (; *s; s++)
    if (*s == '\n' || *s == '\r') *s = ' ';
}

static int worker_main(const char *spec) {
  /* Answers go to a private copy of stdout; whatever a driver or CLBlast prints lands on stderr
   * and can't be mistaken for one. */
  int proto_fd = dup(1);
  FILE *proto = proto_fd >= 0 ? fdopen(proto_fd, "w") : NULL;
  if (!proto || dup2(2, 1) < 0) return 1;
  if ((spec && *spec ? ct_device_find(&dev, spec) : ct_device_default(&dev)) != CT_OK) die("finding the device");
  char line[4096];
  while (fgets(line, sizeof line, stdin)) {
    char *q = line;
    long seq = strtol(q + 1, &q, 10);
    long with_params = strtol(q, &q, 10), runs = strtol(q, &q, 10);
    double give_up = strtod(q, &q);
    long nprob = strtol(q, &q, 10);
    long ids[P_COUNT];
    for (long i = 0; i < nprob && i < P_COUNT; i++) ids[i] = strtol(q, &q, 10);
    char why[600] = "";
    double score = 0;
    bool ok = line[0] == 'E' && nprob > 0 && nprob <= P_COUNT;
    if (ok && with_params) {
      ctt_gemm_params p;
      for (int i = 0; i < CTT_XGEMM_NPARAMS; i++) p.xgemm[i] = strtoull(q, &q, 10);
      for (int i = 0; i < CTT_XDIRECT_NPARAMS; i++) p.direct[i] = strtoull(q, &q, 10);
      p.min_indirect = strtoull(q, &q, 10);
      if (ctt_gemm_use_params(dev, prec, &p) != CT_OK) {
        snprintf(why, sizeof why, "%s", ct_last_error());
        ok = false;
      }
    }
    double logsum = 0;
    for (long i = 0; ok && i < nprob; i++) {
      if (ids[i] < 0 || ids[i] >= P_COUNT) {
        snprintf(why, sizeof why, "bad problem id %ld", ids[i]);
        ok = false;
        break;
      }
      struct problem *pr = problem_get((int)ids[i]);
      if (!run_and_check(pr, why, sizeof why)) {
        ok = false;
        break;
      }
      double g = measure(pr, (int)runs, 2.0, give_up);
      if (g <= 0) {
        snprintf(why, sizeof why, "%s", ct_last_error());
        ok = false;
        break;
      }
      logsum += log(g);
    }
    if (ok) score = exp(logsum / (double)nprob);
    bool intact = true;
    for (int i = 0; i < P_COUNT; i++)
      if (probs[i].a && !problem_intact(&probs[i])) intact = false;
    if (!intact) {
      snprintf(why, sizeof why, "wrote outside its buffers (the operands or references changed)");
      ok = false;
    }
    one_line(why);
    if (ok) fprintf(proto, "R %ld %.6f\n", seq, score);
    else fprintf(proto, "F %ld %s\n", seq, why[0] ? why : "failed");
    fflush(proto);
    if (!intact) return 3;
  }
  return 0;
}

static char self_path[4096];
static const char *dev_spec = "";
static pid_t wpid = -1;
static FILE *wto;
static int wfrom = -1;
/* A candidate may compile (minutes on a busy machine) and run a few large products. */
#define WORKER_TIMEOUT_S 300

static void worker_stop(void) {
  if (wpid > 0) {
    kill(wpid, SIGKILL);
    waitpid(wpid, NULL, 0);
  }
  if (wto) fclose(wto);
  if (wfrom >= 0) close(wfrom);
  wpid = -1;
  wto = NULL;
  wfrom = -1;
}

static bool worker_start(void) {
  int in[2], out[2];
  if (pipe(in) != 0) return false;
  if (pipe(out) != 0) {
    close(in[0]);
    close(in[1]);
    return false;
  }
  char sz[32], cl[8];
  snprintf(sz, sizeof sz, "%ld", size);
  snprintf(cl, sizeof cl, "%s", cpu_clock ? "cpu" : "wall");
  char *args[] = {self_path, "--worker", "--device", (char *)dev_spec, "--dtype", (char *)ct_dtype_name(dtype),
                  "--size", sz, "--clock", cl, NULL};
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    execv(self_path, args);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  wpid = pid;
  wto = fdopen(in[1], "w");
  wfrom = out[0];
  return wto != NULL;
}

/* Reads one line from the worker within the timeout; false on EOF or timeout. */
static bool worker_read(char *buf, size_t n, double timeout, bool *timed_out) {
  size_t used = 0;
  double deadline = now() + timeout;
  *timed_out = false;
  while (used + 1 < n) {
    int left = (int)((deadline - now()) * 1000);
    if (left <= 0) {
      *timed_out = true;
      return false;
    }
    struct pollfd pf = {wfrom, POLLIN, 0};
    int r = poll(&pf, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t got = read(wfrom, buf + used, 1);
    if (got <= 0) return false;
    if (buf[used] == '\n') break;
    used++;
  }
  buf[used] = '\0';
  return true;
}

/* Scores a candidate (NULL: whatever the worker has, i.e. CLBlast's built-in parameters in a
 * fresh worker) on the problems: the geometric mean of GFLOP/s, or 0 with the reason in why. */
static double evaluate(const ctt_gemm_params *p, const int *ids, int nprob, int runs, double give_up, char *why,
                       size_t why_size) {
  if (wpid < 0 && !worker_start()) {
    snprintf(why, why_size, "cannot start a worker: %s", strerror(errno));
    return 0;
  }
  static long seq;
  seq++;
  fprintf(wto, "E %ld %d %d %.6f %d", seq, p != NULL, runs, give_up, nprob);
  for (int i = 0; i < nprob; i++) fprintf(wto, " %d", ids[i]);
  if (p) {
    for (int i = 0; i < CTT_XGEMM_NPARAMS; i++) fprintf(wto, " %zu", p->xgemm[i]);
    for (int i = 0; i < CTT_XDIRECT_NPARAMS; i++) fprintf(wto, " %zu", p->direct[i]);
    fprintf(wto, " %zu", p->min_indirect);
  }
  fputc('\n', wto);
  fflush(wto);
  char line[700];
  bool timed_out, got;
  char *rest = NULL;
  /* The answer carries the request's number: anything else is skipped. */
  while ((got = worker_read(line, sizeof line, WORKER_TIMEOUT_S, &timed_out))) {
    if ((line[0] == 'R' || line[0] == 'F') && strtol(line + 1, &rest, 10) == seq) break;
  }
  if (!got) {
    int status = 0;
    pid_t pid = wpid;
    if (timed_out) kill(pid, SIGKILL);
    if (wpid > 0) waitpid(wpid, &status, 0);
    wpid = -1;
    worker_stop();
    if (timed_out) snprintf(why, why_size, "no answer within %d s", WORKER_TIMEOUT_S);
    else if (WIFSIGNALED(status)) snprintf(why, why_size, "crashed the worker (signal %d)", WTERMSIG(status));
    else snprintf(why, why_size, "the worker exited (status %d)", WEXITSTATUS(status));
    return 0;
  }
  if (line[0] == 'R') return strtod(rest, NULL);
  copy_text(why, why_size, *rest == ' ' ? rest + 1 : rest);
  /* A failed candidate may have left the worker's memory or CLBlast's state damaged: the next
   * candidate gets a fresh worker. */
  worker_stop();
  return 0;
}

struct phase_stats {
  int tried, rejected;
  char last_reject[300];
};

/* Random search then mutation of the best, until the deadline; fills top. */
static void search(const char *label, bool xgemm_phase, ctt_gemm_params *base, const ctt_gemm_params *seeds,
                   int nseeds, const int *ids, int nprob, double deadline, struct scored *top, int *ntop,
                   struct phase_stats *st) {
  double start = now();
  double best = 0;
  for (int iter = 0;; iter++) {
    double t = now();
    if (t >= deadline && iter > nseeds) break;
    if (max_candidates >= 0 && iter >= nseeds + max_candidates) break;
    ctt_gemm_params cand = *base;
    if (iter < nseeds) {
      if (xgemm_phase) memcpy(cand.xgemm, seeds[iter].xgemm, sizeof cand.xgemm);
      else memcpy(cand.direct, seeds[iter].direct, sizeof cand.direct);
      if (!valid(&cand)) continue;
    } else {
      /* First half of the phase explores, the second refines the best so far. */
      bool refine = *ntop > 0 && (t - start) > (deadline - start) / 2;
      if (xgemm_phase) next_xgemm(&cand, refine ? &top[0].p : NULL);
      else next_direct(&cand, refine ? &top[0].p : NULL);
    }
    char why[300] = "";
    /* Half the best so far: such a candidate can't win, one run tells. */
    double score = evaluate(&cand, ids, nprob, 3, 0.5 * best, why, sizeof why);
    st->tried++;
    if (score <= 0) {
      st->rejected++;
      snprintf(st->last_reject, sizeof st->last_reject, "%s", why);
    } else {
      keep_top(top, ntop, &cand, score);
      if (score > best) best = score;
    }
    char left[32], total[32];
    fmt_time(left, sizeof left, deadline - now());
    fmt_time(total, sizeof total, t_end - now());
    progress("[%s] %d tried, %d rejected | last %6.1f | best %6.1f GFLOP/s | phase ends in %s, ETA %s%s%.70s",
             label, st->tried, st->rejected, score, best, left, total, score <= 0 ? " | rejected: " : "",
             score <= 0 ? why : "");
  }
  progress_done();
}

/* Re-measures the finalists with more runs and returns the best (the winner's curse: a
 * candidate that won one noisy measurement is measured again before it is stored). */
static struct scored confirm(struct scored *top, int ntop, const int *ids, int nprob) {
  struct scored best = {top[0].p, 0};
  for (int i = 0; i < ntop; i++) {
    char why[300];
    double s = evaluate(&top[i].p, ids, nprob, 7, 0, why, sizeof why);
    if (s > best.score) best = (struct scored){top[i].p, s};
  }
  return best;
}

int main(int argc, char **argv) {
  const char *spec = NULL, *output = NULL;
  double seconds = 600;
  bool dry_run = false, worker = false;
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  static const struct option opts[] = {{"device", required_argument, 0, 'd'}, {"seconds", required_argument, 0, 's'},
                                       {"size", required_argument, 0, 'n'},   {"dtype", required_argument, 0, 't'},
                                       {"output", required_argument, 0, 'o'}, {"dry-run", no_argument, 0, 'D'},
                                       {"seed", required_argument, 0, 'S'},   {"help", no_argument, 0, 'h'},
                                       {"clock", required_argument, 0, 'C'},  {"worker", no_argument, 0, 'W'},
                                       {"candidates", required_argument, 0, 'K'},
                                       {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "d:s:n:t:o:h", opts, NULL)) != -1) {
    char *end;
    switch (c) {
      case 'd': spec = optarg; break;
      case 's':
        seconds = strtod(optarg, &end);
        if (*end || !(seconds > 0)) {
          fprintf(stderr, "cltensor-tune: --seconds needs a positive number, got '%s'\n", optarg);
          return 2;
        }
        break;
      case 'n':
        size = strtol(optarg, &end, 10);
        if (*end || size < 64 || size > 16384) {
          fprintf(stderr, "cltensor-tune: --size needs 64 ... 16384, got '%s'\n", optarg);
          return 2;
        }
        break;
      case 't':
        if (ct_dtype_from_name(&dtype, optarg) != CT_OK ||
            (dtype != CT_F32 && dtype != CT_F64 && dtype != CT_F16)) {
          fprintf(stderr, "cltensor-tune: --dtype is f32, f64 or f16, got '%s'\n", optarg);
          return 2;
        }
        break;
      case 'o': output = optarg; break;
      case 'D': dry_run = true; break;
      case 'S': seed = strtoull(optarg, NULL, 0); break;
      case 'W': worker = true; break;
      case 'K':
        max_candidates = strtol(optarg, &end, 10);
        if (*end || max_candidates < 0) {
          fprintf(stderr, "cltensor-tune: --candidates needs a count >= 0, got '%s'\n", optarg);
          return 2;
        }
        break;
      case 'C':
        if (strcmp(optarg, "cpu") == 0) cpu_clock = true;
        else if (strcmp(optarg, "wall") != 0) {
          fprintf(stderr, "cltensor-tune: --clock is wall or cpu, got '%s'\n", optarg);
          return 2;
        }
        break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    usage(stderr);
    return 2;
  }
  rng_state = seed ? seed : 88172645463325252ull;
  tty = isatty(2);
  prec = dtype == CT_F16 ? CTT_PREC_F16 : dtype == CT_F64 ? CTT_PREC_F64 : CTT_PREC_F32;
  /* Time CLBlast itself, starting from its built-in parameters. */
  setenv("CLTENSOR_GEMM", "clblast", 1);
  setenv("CLTENSOR_GEMM_TUNING", "builtin", 1);
  /* Each candidate is a new program: keep PoCL from caching hundreds of them on disk. */
  setenv("POCL_KERNEL_CACHE", "0", 0);

  if (worker) return worker_main(spec);
  signal(SIGPIPE, SIG_IGN);
  ssize_t sl = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
  if (sl > 0) self_path[sl] = '\0';
  else snprintf(self_path, sizeof self_path, "%s", argv[0]);
  dev_spec = spec ? spec : "";

  if ((spec ? ct_device_find(&dev, spec) : ct_device_default(&dev)) != CT_OK) die("finding the device");
  const ct_device_props *props = ct_device_properties(dev);
  if (cpu_clock && props->type != CT_DEVICE_CPU) {
    fprintf(stderr, "cltensor-tune: --clock cpu needs a CPU device; %s is a %s\n", ct_device_spec(dev),
            ct_device_type_name(props->type));
    return 2;
  }
  cpu_units = props->compute_units ? props->compute_units : 1;
  if (dtype == CT_F64 && !props->fp64) {
    fprintf(stderr, "cltensor-tune: %s has no cl_khr_fp64\n", ct_device_spec(dev));
    return 1;
  }
  if (dtype == CT_F16 && !props->fp16) {
    fprintf(stderr, "cltensor-tune: %s has no cl_khr_fp16, so its f16 GEMMs run in f32: tune f32\n",
            ct_device_spec(dev));
    return 1;
  }
  char path[4096];
  if (output) snprintf(path, sizeof path, "%s", output);
  else if (ctt_gemm_tuning_path(path, sizeof path, dev) != CT_OK) die("locating the cache folder");
  printf("device: %s (%s, %s, driver %s)\n", ct_device_spec(dev), props->name, props->vendor, props->driver_version);
  printf("tuning %s GEMM for %.0f s (%s clock); file: %s%s\n", ct_dtype_name(dtype), seconds,
         cpu_clock ? "CPU" : "wall", path, dry_run ? " (dry run: not written)" : "");
  fflush(stdout);
  double t_start = now();
  t_end = t_start + seconds;

  fprintf(stderr, "preparing operands and host references ...\n");
  /* Baseline: CLBlast's own parameters, as its database picks them for this device (the first
   * worker has installed nothing yet). */
  char why[300];
  const int ids_big[1] = {P_BIG}, ids_batch[1] = {P_BATCH}, ids_d[2] = {P_MID, P_BATCH};
  double t_eval = now();
  double base_big = evaluate(NULL, ids_big, 1, 5, 0, why, sizeof why);
  t_eval = now() - t_eval;   /* one candidate's cost, compile included: plans the budget */
  double base_batch = base_big > 0 ? evaluate(NULL, ids_batch, 1, 5, 0, why, sizeof why) : 0;
  if (base_big <= 0 || base_batch <= 0)
    fprintf(stderr, "cltensor-tune: CLBlast's built-in parameters fail here: %s\n", why);
  fprintf(stderr, "CLBlast built-in: %.1f GFLOP/s at %ld^3, %.1f GFLOP/s for 64 x 64^3\n", base_big, size,
          base_batch);

  /* Seeds: the shipped set and the stored file's set, so the search never does worse. */
  ctt_gemm_params seeds[3];
  int nseeds = 0;
  const ctt_gemm_tuning *shipped = ctt_gemm_shipped_tuning(dev);
  if (shipped && shipped->has[prec]) seeds[nseeds++] = shipped->p[prec];
  ctt_gemm_tuning stored;
  memset(&stored, 0, sizeof stored);
  bool have_stored = false;
  FILE *f = fopen(path, "rb");
  if (f) {
    static char text[65536];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    char pwhy[512];
    if (ctt_gemm_tuning_parse(&stored, text, props, pwhy, sizeof pwhy) == CT_OK) {
      have_stored = true;
      if (stored.has[prec]) seeds[nseeds++] = stored.p[prec];
    } else {
      fprintf(stderr, "cltensor-tune: the stored file is not used (%s); it will be replaced\n", pwhy);
    }
  }
  /* Starting point for the other kernels: the first seed, else a set CLBlast's tuner space holds. */
  ctt_gemm_params base;
  if (nseeds) {
    base = seeds[0];
  } else {
    const size_t x0[CTT_XGEMM_NPARAMS] = {0, 1, 32, 2, 8, 8, 32, 16, 16, 32, 1, 1, 0, 0, 4, 2};
    const size_t d0[CTT_XDIRECT_NPARAMS] = {2, 8, 8, 8, 8, 1, 1, 1, 1, 16};
    memcpy(base.xgemm, x0, sizeof x0);
    memcpy(base.direct, d0, sizeof d0);
    base.min_indirect = 896;
  }

  /* After the two searches: confirming the finalists of both, the crossover (2 evaluations
   * per size, mostly without compiling) and the final measurement. */
  int ncross = 0;
  while (ncross < NCROSS && cross_sizes[ncross] <= size) ncross++;
  /* Finalists and crossover mostly reuse programs the worker compiled already: a few
   * evaluations' worth, at most 40% of the budget. */
  double reserve = fmin(4 * t_eval, 0.4 * seconds);
  (void)ncross;
  double remaining = t_end - now() - reserve;
  if (remaining < 0) remaining = 0;
  double t_x = 0.6 * remaining;
  double t_d_end = now() + remaining;
  struct phase_stats sx = {0}, sd = {0};

  /* Phase 1: Xgemm, forced indirect (XGEMM_MIN_INDIRECT_SIZE = 0). */
  ctt_gemm_params px = base;
  px.min_indirect = 0;
  struct scored topx[TOP];
  int ntopx = 0;
  search("Xgemm      ", true, &px, seeds, nseeds, ids_big, 1, now() + t_x, topx, &ntopx, &sx);
  if (sx.tried == 0) {
    fprintf(stderr, "cltensor-tune: no candidate to try (--candidates 0, and no shipped or stored set for "
            "this device)\n");
    worker_stop();
    return 1;
  }
  if (ntopx == 0) {
    fprintf(stderr, "cltensor-tune: every Xgemm candidate failed; last: %s\n", sx.last_reject);
    worker_stop();
    return 1;
  }
  struct scored bx = confirm(topx, ntopx, ids_big, 1);

  /* Phase 2: XgemmDirect, forced direct. */
  ctt_gemm_params pd = bx.p;
  pd.min_indirect = 1u << 20;
  struct scored topd[TOP];
  int ntopd = 0;
  search("XgemmDirect", false, &pd, seeds, nseeds, ids_d, 2, t_d_end, topd, &ntopd, &sd);
  if (ntopd == 0) {
    fprintf(stderr, "cltensor-tune: every XgemmDirect candidate failed; last: %s\n", sd.last_reject);
    worker_stop();
    return 1;
  }
  struct scored bd = confirm(topd, ntopd, ids_d, 2);

  /* Phase 3: the crossover. */
  ctt_gemm_params best = bd.p;
  bool indirect_wins[NCROSS] = {false};
  for (int i = 0; i < NCROSS && cross_sizes[i] <= size; i++) {
    double g[2];
    const int id[1] = {P_CROSS0 + i};
    for (int v = 0; v < 2; v++) {
      ctt_gemm_params q = best;
      q.min_indirect = v ? 0 : 1u << 20;
      g[v] = evaluate(&q, id, 1, 5, 0, why, sizeof why);
    }
    indirect_wins[i] = g[1] > g[0];
    progress("[GemmRoutine] n=%4ld: direct %6.1f, indirect %6.1f GFLOP/s", cross_sizes[i], g[0], g[1]);
    if (!tty) progress_done();
  }
  progress_done();
  /* The smallest size from which the indirect kernel wins at every measured larger size. */
  size_t crossover = (size_t)size + 1;
  for (int i = NCROSS - 1; i >= 0; i--) {
    if (cross_sizes[i] > size) continue;
    if (!indirect_wins[i]) break;
    crossover = (size_t)cross_sizes[i];
  }
  best.min_indirect = crossover;

  /* The chosen set, checked and measured as the library will run it. */
  double tuned_big = evaluate(&best, ids_big, 1, 7, 0, why, sizeof why);
  double tuned_batch = tuned_big > 0 ? evaluate(&best, ids_batch, 1, 7, 0, why, sizeof why) : 0;
  worker_stop();
  if (tuned_big <= 0 || tuned_batch <= 0) {
    fprintf(stderr, "cltensor-tune: the chosen set fails its final check: %s\n", why);
    return 1;
  }
  char xs[400], ds[300], summary[1200];
  describe(xs, sizeof xs, ctt_xgemm_names, best.xgemm, CTT_XGEMM_NPARAMS);
  describe(ds, sizeof ds, ctt_xdirect_names, best.direct, CTT_XDIRECT_NPARAMS);
  char when[64];
  time_t tt = time(NULL);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&tt));
  snprintf(summary, sizeof summary,
           "%s, %.0f s, %s clock, seed %llu: %d Xgemm and %d XgemmDirect candidates (%d and %d rejected)\n"
           "%s %ld^3: %.1f GFLOP/s (CLBlast built-in %.1f); batch of 64 64x64x64: %.1f GFLOP/s (built-in %.1f)",
           when, now() - t_start, cpu_clock ? "CPU" : "wall", (unsigned long long)seed, sx.tried, sd.tried,
           sx.rejected, sd.rejected, ct_dtype_name(dtype), size, tuned_big, base_big, tuned_batch, base_batch);
  printf("Xgemm       %s\nXgemmDirect %s\nGemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu\n", xs, ds, best.min_indirect);
  printf("%s\n", summary);
  if (base_big > 0 && base_batch > 0)
    printf("speedup over CLBlast built-in: %.2fx at %ld^3, %.2fx for the batch\n", tuned_big / base_big, size,
           tuned_batch / base_batch);
  if (sx.rejected + sd.rejected > 0) printf("last rejection: %s\n", sx.rejected ? sx.last_reject : sd.last_reject);
  if (!dry_run) {
    ctt_gemm_tuning out;
    memset(&out, 0, sizeof out);
    if (have_stored) out = stored;
    out.has[prec] = true;
    out.p[prec] = best;
    if (ctt_gemm_tuning_save(path, dev, &out, summary) != CT_OK) die("writing the file");
    printf("written: %s\n", path);
  }
  ct_shutdown();
  return 0;
}
