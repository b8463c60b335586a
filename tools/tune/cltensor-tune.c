/* cltensor-tune: searches CLBlast GEMM parameters for one device and stores the best set where
 * libcltensor finds it (docs/GEMM.md). Every GEMM it times goes through ct_matmul_out() on the
 * CLBlast route, so it measures exactly what the library will run, and every candidate's result
 * is checked against a double-precision host reference before it may win.
 *
 * Three phases share the time budget:
 *   Xgemm        the indirect kernel (large products), at --size: random samples from the union
 *                of CLBlast's tuner spaces for both kernels (GEMMK 0 and 1), then mutations of
 *                the best; the best few are measured again before one is chosen
 *   XgemmDirect  the single-kernel GEMM (small products): n = 256 and a batch of 64 64x64
 *                products, scored by their geometric mean
 *   GemmRoutine  the crossover: the smallest size from which the indirect kernel stays faster */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cltensor/cltensor.h"
#include "device/device.h"
#include "linalg/linalg.h"

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
};

static ct_dtype dtype = CT_F32;
static enum ct__prec prec = CT__PREC_F32;
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

static void problem_init(struct problem *p, const char *name, int64_t batch, int64_t m, int64_t n, int64_t k) {
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
    store(ha, i, (double)(rnd() >> 11) / 4503599627370496.0 * 2 - 1);
    da[i] = load(ha, i);
  }
  for (size_t i = 0; i < nb; i++) {
    store(hb, i, (double)(rnd() >> 11) / 4503599627370496.0 * 2 - 1);
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
  free(ha);
  free(hb);
  free(da);
  free(db);
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

/* Median GFLOP/s of up to `runs` timed runs (fewer when a run is slow: the budget per
 * measurement is about max_seconds). */
static double measure(struct problem *p, int runs, double max_seconds) {
  double g[16];
  int n = 0;
  double start = now();
  while (n < runs && n < 16) {
    double t0 = now();
    if (ct_matmul_out(p->c, p->a, p->b) != CT_OK || ct_device_synchronize(dev) != CT_OK) return 0;
    double dt = now() - t0;
    g[n++] = p->flops / dt / 1e9;
    if (now() - start > max_seconds && n >= 1) break;
  }
  qsort(g, (size_t)n, sizeof g[0], cmp_double);
  return g[n / 2];
}

/* ---- Candidates ---- */

static void gen_xgemm(size_t *x, int gemmk) {
  x[CT__X_GEMMK] = (size_t)gemmk;
  if (gemmk == 0) {
    x[CT__X_MWG] = PICK(16, 32, 64, 128);
    x[CT__X_NWG] = PICK(16, 32, 64, 128);
    x[CT__X_KWG] = PICK(16, 32);
    x[CT__X_MDIMC] = PICK(4, 8, 16, 32);
    x[CT__X_NDIMC] = PICK(4, 8, 16, 32);
    x[CT__X_MDIMA] = PICK(4, 8, 16, 32);
    x[CT__X_NDIMB] = PICK(4, 8, 16, 32);
    x[CT__X_KWI] = PICK(1, 2, 4, 8);
    x[CT__X_VWM] = PICK(1, 2, 4, 8);
    x[CT__X_VWN] = PICK(1, 2, 4, 8);
    x[CT__X_STRM] = PICK(0, 1);
    x[CT__X_STRN] = PICK(0, 1);
    x[CT__X_SA] = PICK(0, 1);
    x[CT__X_SB] = PICK(0, 1);
    x[CT__X_KREG] = 1;
  } else {
    x[CT__X_MWG] = PICK(8, 16, 32, 64, 128);
    x[CT__X_NWG] = PICK(8, 16, 32, 64, 128);
    x[CT__X_KWG] = 1;
    x[CT__X_KWI] = 1;
    x[CT__X_MDIMC] = x[CT__X_MDIMA] = PICK(2, 4, 8, 16, 32);
    x[CT__X_NDIMC] = x[CT__X_NDIMB] = PICK(2, 4, 8, 16, 32);
    x[CT__X_VWM] = PICK(1, 2, 4, 8);
    x[CT__X_VWN] = PICK(1, 2, 4, 8);
    x[CT__X_KREG] = PICK(1, 2, 4, 8, 16);
    x[CT__X_SA] = x[CT__X_SB] = x[CT__X_STRM] = x[CT__X_STRN] = 0;
  }
}

static void gen_direct(size_t *d) {
  d[CT__D_WGD] = PICK(8, 16, 32, 64);
  d[CT__D_MDIMCD] = PICK(4, 8, 16, 32);
  d[CT__D_NDIMCD] = PICK(4, 8, 16, 32);
  d[CT__D_MDIMAD] = PICK(4, 8, 16, 32);
  d[CT__D_NDIMBD] = PICK(4, 8, 16, 32);
  d[CT__D_KWID] = PICK(1, 2, 8, 16);
  d[CT__D_VWMD] = PICK(1, 2, 4, 8);
  d[CT__D_VWND] = PICK(1, 2, 4, 8);
  d[CT__D_PADA] = PICK(0, 1);
  d[CT__D_PADB] = PICK(0, 1);
}

static bool valid(const ct__gemm_params *p) {
  char why[256];
  return ct__gemm_params_valid(p, ct_device_properties(dev), ct_dtype_size(dtype), why, sizeof why);
}

/* A random valid Xgemm set: fresh (mutate == NULL) or one or two parameters of *mutate changed. */
static void next_xgemm(ct__gemm_params *p, const ct__gemm_params *mutate) {
  for (int tries = 0; tries < 100000; tries++) {
    size_t fresh[CT__XGEMM_NPARAMS];
    if (!mutate || rnd() % 8 == 0) {
      gen_xgemm(p->xgemm, (int)(rnd() % 2));
    } else {
      memcpy(p->xgemm, mutate->xgemm, sizeof p->xgemm);
      gen_xgemm(fresh, (int)p->xgemm[CT__X_GEMMK]);
      int changes = 1 + (int)(rnd() % 2);
      for (int c = 0; c < changes; c++) {
        int i = (int)(rnd() % CT__XGEMM_NPARAMS);
        if (i == CT__X_GEMMK) continue;
        p->xgemm[i] = fresh[i];
        /* GEMMK=1 ties these together; keep them tied. */
        if (p->xgemm[CT__X_GEMMK] == 1) {
          if (i == CT__X_MDIMC || i == CT__X_MDIMA) p->xgemm[CT__X_MDIMC] = p->xgemm[CT__X_MDIMA] = fresh[i];
          if (i == CT__X_NDIMC || i == CT__X_NDIMB) p->xgemm[CT__X_NDIMC] = p->xgemm[CT__X_NDIMB] = fresh[i];
        }
      }
    }
    if (valid(p) && (!mutate || memcmp(p->xgemm, mutate->xgemm, sizeof p->xgemm) != 0)) return;
  }
  memcpy(p->xgemm, mutate ? mutate->xgemm : p->xgemm, sizeof p->xgemm);
}

static void next_direct(ct__gemm_params *p, const ct__gemm_params *mutate) {
  for (int tries = 0; tries < 100000; tries++) {
    size_t fresh[CT__XDIRECT_NPARAMS];
    if (!mutate || rnd() % 8 == 0) {
      gen_direct(p->direct);
    } else {
      memcpy(p->direct, mutate->direct, sizeof p->direct);
      gen_direct(fresh);
      int changes = 1 + (int)(rnd() % 2);
      for (int c = 0; c < changes; c++) {
        int i = (int)(rnd() % CT__XDIRECT_NPARAMS);
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
  ct__gemm_params p;
  double score;
};

static void keep_top(struct scored *top, int *ntop, const ct__gemm_params *p, double score) {
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

/* Installs p; checks every problem; returns the score (geometric mean of GFLOP/s), or 0 when
 * the candidate failed (why says how). */
static double evaluate(const ct__gemm_params *p, struct problem **probs, int nprob, int runs, char *why,
                       size_t why_size) {
  if (ct__gemm_use_params(dev, prec, p) != CT_OK) {
    snprintf(why, why_size, "%s", ct_last_error());
    return 0;
  }
  double logsum = 0;
  for (int i = 0; i < nprob; i++) {
    if (!run_and_check(probs[i], why, why_size)) return 0;
    double g = measure(probs[i], runs, 2.0);
    if (g <= 0) {
      snprintf(why, why_size, "%s", ct_last_error());
      return 0;
    }
    logsum += log(g);
  }
  return exp(logsum / nprob);
}

struct phase_stats {
  int tried, rejected;
  char last_reject[300];
};

/* Random search then mutation of the best, until the deadline; fills top. */
static void search(const char *label, bool xgemm_phase, ct__gemm_params *base, const ct__gemm_params *seeds,
                   int nseeds, struct problem **probs, int nprob, double deadline, struct scored *top, int *ntop,
                   struct phase_stats *st) {
  double start = now();
  double best = 0;
  for (int iter = 0;; iter++) {
    double t = now();
    if (t >= deadline && iter > nseeds) break;
    ct__gemm_params cand = *base;
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
    double score = evaluate(&cand, probs, nprob, 3, why, sizeof why);
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
    progress("[%s] %d tried, %d rejected | last %6.1f | best %6.1f GFLOP/s | phase ends in %s, ETA %s", label,
             st->tried, st->rejected, score, best, left, total);
  }
  progress_done();
}

/* Re-measures the finalists with more runs and returns the best (the winner's curse: a
 * candidate that won one noisy measurement is measured again before it is stored). */
static struct scored confirm(struct scored *top, int ntop, struct problem **probs, int nprob) {
  struct scored best = {top[0].p, 0};
  for (int i = 0; i < ntop; i++) {
    char why[300];
    double s = evaluate(&top[i].p, probs, nprob, 7, why, sizeof why);
    if (s > best.score) best = (struct scored){top[i].p, s};
  }
  return best;
}

int main(int argc, char **argv) {
  const char *spec = NULL, *output = NULL;
  double seconds = 600;
  long size = 1024;
  bool dry_run = false;
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  static const struct option opts[] = {{"device", required_argument, 0, 'd'}, {"seconds", required_argument, 0, 's'},
                                       {"size", required_argument, 0, 'n'},   {"dtype", required_argument, 0, 't'},
                                       {"output", required_argument, 0, 'o'}, {"dry-run", no_argument, 0, 'D'},
                                       {"seed", required_argument, 0, 'S'},   {"help", no_argument, 0, 'h'},
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
  prec = dtype == CT_F16 ? CT__PREC_F16 : dtype == CT_F64 ? CT__PREC_F64 : CT__PREC_F32;
  /* Time CLBlast itself, starting from its built-in parameters. */
  setenv("CLTENSOR_GEMM", "clblast", 1);
  setenv("CLTENSOR_GEMM_TUNING", "builtin", 1);
  /* Each candidate is a new program: keep PoCL from caching hundreds of them on disk. */
  setenv("POCL_KERNEL_CACHE", "0", 0);

  if ((spec ? ct_device_find(&dev, spec) : ct_device_default(&dev)) != CT_OK) die("finding the device");
  const ct_device_props *props = ct_device_properties(dev);
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
  else if (ct__gemm_tuning_path(path, sizeof path, dev) != CT_OK) die("locating the cache folder");
  printf("device: %s (%s, %s, driver %s)\n", ct_device_spec(dev), props->name, props->vendor, props->driver_version);
  printf("tuning %s GEMM for %.0f s; file: %s%s\n", ct_dtype_name(dtype), seconds, path,
         dry_run ? " (dry run: not written)" : "");
  fflush(stdout);
  double t_start = now();
  t_end = t_start + seconds;

  fprintf(stderr, "preparing operands and host references ...\n");
  struct problem big, mid, small_batch;
  problem_init(&big, "n", 1, size, size, size);
  problem_init(&mid, "256", 1, 256, 256, 256);
  problem_init(&small_batch, "batch 64 x 64", 64, 64, 64, 64);

  /* Baseline: CLBlast's own parameters, as its database picks them for this device. */
  char why[300];
  double base_big = 0, base_batch = 0;
  if (!run_and_check(&big, why, sizeof why) || !run_and_check(&small_batch, why, sizeof why))
    fprintf(stderr, "cltensor-tune: CLBlast's built-in parameters fail here: %s\n", why);
  else {
    base_big = measure(&big, 5, 10);
    base_batch = measure(&small_batch, 5, 10);
  }
  fprintf(stderr, "CLBlast built-in: %.1f GFLOP/s at %ld^3, %.1f GFLOP/s for 64 x 64^3\n", base_big, size,
          base_batch);

  /* Seeds: the shipped set and the stored file's set, so the search never does worse. */
  ct__gemm_params seeds[3];
  int nseeds = 0;
  const ct__gemm_tuning *shipped = ct__gemm_shipped_tuning(dev);
  if (shipped && shipped->has[prec]) seeds[nseeds++] = shipped->p[prec];
  ct__gemm_tuning stored;
  memset(&stored, 0, sizeof stored);
  bool have_stored = false;
  FILE *f = fopen(path, "rb");
  if (f) {
    static char text[65536];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    char pwhy[512];
    if (ct__gemm_tuning_parse(&stored, text, props, pwhy, sizeof pwhy) == CT_OK) {
      have_stored = true;
      if (stored.has[prec]) seeds[nseeds++] = stored.p[prec];
    } else {
      fprintf(stderr, "cltensor-tune: the stored file is not used (%s); it will be replaced\n", pwhy);
    }
  }
  /* Starting point for the other kernels: the first seed, else a set CLBlast's tuner space holds. */
  ct__gemm_params base;
  if (nseeds) {
    base = seeds[0];
  } else {
    const size_t x0[CT__XGEMM_NPARAMS] = {0, 1, 32, 2, 8, 8, 32, 16, 16, 32, 1, 1, 0, 0, 4, 2};
    const size_t d0[CT__XDIRECT_NPARAMS] = {2, 8, 8, 8, 8, 1, 1, 1, 1, 16};
    memcpy(base.xgemm, x0, sizeof x0);
    memcpy(base.direct, d0, sizeof d0);
    base.min_indirect = 896;
  }

  double remaining = t_end - now();
  double t_routine = fmin(0.15 * remaining, 90);
  double t_x = 0.6 * (remaining - t_routine);
  struct phase_stats sx = {0}, sd = {0};

  /* Phase 1: Xgemm, forced indirect (XGEMM_MIN_INDIRECT_SIZE = 0). */
  ct__gemm_params px = base;
  px.min_indirect = 0;
  struct scored topx[TOP];
  int ntopx = 0;
  struct problem *probs_x[1] = {&big};
  search("Xgemm      ", true, &px, seeds, nseeds, probs_x, 1, now() + t_x, topx, &ntopx, &sx);
  if (ntopx == 0) {
    fprintf(stderr, "cltensor-tune: every Xgemm candidate failed; last: %s\n", sx.last_reject);
    return 1;
  }
  struct scored bx = confirm(topx, ntopx, probs_x, 1);

  /* Phase 2: XgemmDirect, forced direct. */
  ct__gemm_params pd = bx.p;
  pd.min_indirect = 1u << 20;
  struct scored topd[TOP];
  int ntopd = 0;
  struct problem *probs_d[2] = {&mid, &small_batch};
  search("XgemmDirect", false, &pd, seeds, nseeds, probs_d, 2, t_end - t_routine, topd, &ntopd, &sd);
  if (ntopd == 0) {
    fprintf(stderr, "cltensor-tune: every XgemmDirect candidate failed; last: %s\n", sd.last_reject);
    return 1;
  }
  struct scored bd = confirm(topd, ntopd, probs_d, 2);

  /* Phase 3: the crossover. */
  ct__gemm_params best = bd.p;
  const long sizes[] = {64, 96, 128, 192, 256, 384, 512, 768, 1024};
  const int nsizes = sizeof sizes / sizeof sizes[0];
  bool indirect_wins[16] = {false};
  for (int i = 0; i < nsizes && sizes[i] <= size; i++) {
    struct problem p;
    problem_init(&p, "crossover", 1, sizes[i], sizes[i], sizes[i]);
    double g[2];
    for (int v = 0; v < 2; v++) {
      ct__gemm_params q = best;
      q.min_indirect = v ? 0 : 1u << 20;
      g[v] = evaluate(&q, (struct problem *[]){&p}, 1, 5, why, sizeof why);
    }
    indirect_wins[i] = g[1] > g[0];
    progress("[GemmRoutine] n=%4ld: direct %6.1f, indirect %6.1f GFLOP/s", sizes[i], g[0], g[1]);
    if (!tty) progress_done();
    ct_release(p.a);
    ct_release(p.b);
    ct_release(p.c);
    free(p.ref);
    free(p.bound);
  }
  progress_done();
  /* The smallest size from which the indirect kernel wins at every measured larger size. */
  size_t crossover = (size_t)size + 1;
  for (int i = nsizes - 1; i >= 0; i--) {
    if (sizes[i] > size) continue;
    if (!indirect_wins[i]) break;
    crossover = (size_t)sizes[i];
  }
  best.min_indirect = crossover;

  /* Final check of the chosen set in the library's own planning, then the figures. */
  if (evaluate(&best, (struct problem *[]){&big, &small_batch}, 2, 1, why, sizeof why) <= 0) {
    fprintf(stderr, "cltensor-tune: the chosen set fails its final check: %s\n", why);
    return 1;
  }
  double tuned_big = measure(&big, 5, 10), tuned_batch = measure(&small_batch, 5, 10);
  char xs[400], ds[300], summary[1200];
  describe(xs, sizeof xs, ct__xgemm_names, best.xgemm, CT__XGEMM_NPARAMS);
  describe(ds, sizeof ds, ct__xdirect_names, best.direct, CT__XDIRECT_NPARAMS);
  char when[64];
  time_t tt = time(NULL);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&tt));
  snprintf(summary, sizeof summary,
           "%s, %.0f s, seed %llu: %d Xgemm and %d XgemmDirect candidates (%d and %d rejected)\n"
           "%s %ld^3: %.1f GFLOP/s (CLBlast built-in %.1f); batch of 64 64x64x64: %.1f GFLOP/s (built-in %.1f)",
           when, now() - t_start, (unsigned long long)seed, sx.tried, sd.tried, sx.rejected, sd.rejected,
           ct_dtype_name(dtype), size, tuned_big, base_big, tuned_batch, base_batch);
  printf("Xgemm       %s\nXgemmDirect %s\nGemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu\n", xs, ds, best.min_indirect);
  printf("%s\n", summary);
  if (base_big > 0) printf("speedup over CLBlast built-in: %.2fx at %ld^3, %.2fx for the batch\n",
                           tuned_big / base_big, size, base_batch > 0 ? tuned_batch / base_batch : 0.0);
  if (!dry_run) {
    ct__gemm_tuning out;
    memset(&out, 0, sizeof out);
    if (have_stored) out = stored;
    out.has[prec] = true;
    out.p[prec] = best;
    if (ct__gemm_tuning_save(path, dev, &out, summary) != CT_OK) die("writing the file");
    printf("written: %s\n", path);
  }
  ct_release(big.a);
  ct_release(big.b);
  ct_release(big.c);
  ct_release(mid.a);
  ct_release(mid.b);
  ct_release(mid.c);
  ct_release(small_batch.a);
  ct_release(small_batch.b);
  ct_release(small_batch.c);
  free(big.ref);
  free(big.bound);
  free(mid.ref);
  free(mid.bound);
  free(small_batch.ref);
  free(small_batch.bound);
  ct_shutdown();
  return 0;
}
