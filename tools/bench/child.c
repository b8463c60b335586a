/* Groups that need processes of their own, and the hidden child modes they run.
 *
 * matmul: the GEMM route is chosen once per process (CLTENSOR_GEMM, read when the device's
 * GEMM state is created), so each route runs in a child with the variable set. CLBlast with its
 * built-in parameters runs in yet another child that never opens the device through the
 * library, so no tuned parameters the library applies can leak into the reference.
 * first_result: a new process with an empty, then a filled kernel cache. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

int bench_matmul_sizes(const bench_opts *o, const int **sizes) {
  static const int full[] = {64, 128, 256, 512, 1024, 2048, 4096}, quick[] = {256, 1024};
  *sizes = o->quick ? quick : full;
  return o->quick ? 2 : 7;
}

/* CLBlast's built-in parameters make large products very slow on CPU devices (a 4096^3 product
 * takes tens of seconds); the comparison needs 1024 and 2048. */
#define CLBLAST_DEFAULTS_MAX_N 2048

static void child_args(const bench_opts *o, const char *mode, char *runs, size_t runs_n, char *args[8]) {
  int k = 0;
  snprintf(runs, runs_n, "%d", o->runs);
  args[k++] = "--child";
  args[k++] = (char *)mode;
  args[k++] = "--device";
  args[k++] = (char *)o->device_spec;
  args[k++] = "--runs";
  args[k++] = runs;
  if (o->quick) args[k++] = "--quick";
  args[k] = NULL;
}

/* ---------------------------------------------------------------- matmul, parent side */

typedef struct host_gemm_ctx {
  float *a, *b, *c;
  int n, batch;
} host_gemm_ctx;

static int do_host_sgemm(void *p) {
  host_gemm_ctx *g = p;
  size_t nn = (size_t)g->n * g->n;
  for (int i = 0; i < g->batch; i++)
    if (!ref_host_sgemm(g->a + i * nn, g->b + i * nn, g->c + i * nn, g->n, g->n, g->n))
      return bench_fail("not built with CBLAS");
  return 0;
}

/* Runs a child and hands each figure it sends to `take`. Returns 0, or -1 with bench_fail()
 * when the child could not run or failed before sending anything. */
static int run_child(const bench_opts *o, char *const args[], char *const env[],
                     void (*take)(const bench_opts *, bench_fig *, void *), void *arg) {
  bench_child *c = bench_child_start(o, args, env);
  if (!c) return -1;
  bench_fig f;
  int got = 0, r;
  while ((r = bench_child_next(o, c, &f)) > 0)
    if (r == 1) {
      take(o, &f, arg);
      got++;
    }
  char err[sizeof f.error];
  snprintf(err, sizeof err, "%s", r < 0 ? bench_error() : "");
  int status = bench_child_finish(c);
  if (r < 0) return bench_fail("%s", err);
  if (status != 0 && got == 0)
    return status < 0 ? -1 : bench_fail("the child process (%s) exited with status %d", args[1], status);
  return 0;
}

/* The matmul group's figures, merged over the rounds, in the order first seen. */
typedef struct fig_pool {
  bench_fig v[96];
  const char *origin[96]; /* the child kind that measured it: a route, or "defaults" */
  int n;
  const char *current;    /* the child running now */
} fig_pool;

static void pool_add(fig_pool *p, const bench_fig *f) {
  for (int i = 0; i < p->n; i++)
    if (p->v[i].size == f->size && strcmp(p->v[i].name, f->name) == 0 && p->origin[i] == p->current) {
      bench_fig_merge(&p->v[i], f);
      return;
    }
  if (p->n < (int)(sizeof p->v / sizeof p->v[0])) {
    p->origin[p->n] = p->current;
    p->v[p->n++] = *f;
  }
}

/* A reference, preferably the one measured in turns with the figure (same origin). */
static const bench_fig *pool_find(const fig_pool *p, const char *name, int64_t size, const char *origin) {
  const bench_fig *any = NULL;
  for (int i = 0; i < p->n; i++)
    if (p->v[i].size == size && strcmp(p->v[i].name, name) == 0 && !p->v[i].error[0]) {
      if (p->origin[i] == origin) return &p->v[i];
      if (!any) any = &p->v[i];
    }
  return any;
}

static void take_fig(const bench_opts *o, bench_fig *f, void *arg) {
  (void)o;
  pool_add(arg, f);
}

/* Rounds of child processes: CLBlast's defaults, then each route. A route is fixed per
 * process, and the defaults need a process the library never tuned, so the pairs can't be
 * timed in turns inside one process; instead every round runs each of them for a share of the
 * runs, and the runs of all rounds make the figure, so that slow minutes on a shared machine
 * fall on all of them. */
void bench_group_matmul(const bench_opts *o, ct_device *d) {
  static const char *routes[] = {"auto", "clblast", "host"};
  fig_pool *pool = calloc(1, sizeof *pool);
  char runs[16], *args[8], cl[32];
  bool failed[3] = {false, false, false};
  char errors[3][320];
  if (!pool) {
    fprintf(stderr, "cltensor-bench: out of host memory\n");
    return;
  }
  int rounds = o->quick ? 1 : 3;
  bench_opts co = *o;
  co.runs = (o->runs + rounds - 1) / rounds;
  if (co.runs < 2 && rounds > 1) co.runs = 2;
  const ct_device_props *p = ct_device_properties(d);
  snprintf(cl, sizeof cl, "%d:%d", p->platform_index, p->device_index);
  for (int r = 0; r < rounds; r++) {
    /* CLBlast's defaults on a CPU device take minutes at these sizes: left to the full run. */
    if (!o->quick) {
      child_args(&co, "clblast-defaults", runs, sizeof runs, args);
      args[2] = "--cl";
      args[3] = cl;
      bench_progress(o, "matmul round %d/%d: CLBlast with its default parameters", r + 1, rounds);
      pool->current = "defaults";
      if (run_child(o, args, NULL, take_fig, pool) != 0)
        fprintf(stderr, "cltensor-bench: CLBlast reference: %s\n", bench_error());
    }
    for (int i = 0; i < 3; i++) {
      if (failed[i]) continue;
      char env_route[64];
      snprintf(env_route, sizeof env_route, "CLTENSOR_GEMM=%s", routes[i]);
      char *env[] = {env_route, NULL};
      child_args(&co, "matmul", runs, sizeof runs, args);
      bench_progress(o, "matmul round %d/%d: route %s", r + 1, rounds, routes[i]);
      pool->current = routes[i];
      if (run_child(o, args, env, take_fig, pool) != 0) {
        failed[i] = true;
        snprintf(errors[i], sizeof errors[i], "%s", bench_error());
      }
    }
  }
  for (int i = 0; i < 3; i++) {
    char prefix[2][40];
    snprintf(prefix[0], sizeof prefix[0], "matmul.%s", routes[i]);
    snprintf(prefix[1], sizeof prefix[1], "matmul_batch.%s", routes[i]);
    int emitted = 0;
    for (int k = 0; k < pool->n; k++) {
      bench_fig *f = &pool->v[k];
      bool batch = strcmp(f->name, prefix[1]) == 0;
      if (!batch && strcmp(f->name, prefix[0]) != 0) continue;
      if (i == 1)
        bench_fig_add_ref(f, pool_find(pool, batch ? "clblast_sgemm_batch" : "clblast_sgemm", f->size, "defaults"));
      bench_fig_add_ref(f, pool_find(pool, batch ? "host_sgemm_batch" : "host_sgemm", f->size, routes[i]));
      bench_emit(o, f);
      emitted++;
    }
    if (failed[i] && !emitted) {
      bench_fig f;
      bench_fig_init(&f, prefix[0], 0, "", "f32", "GFLOP/s");
      bench_fig_fail(&f, false, errors[i]);
      bench_emit(o, &f);
    }
  }
  for (int k = 0; k < pool->n; k++)
    if (pool->v[k].is_ref || strncmp(pool->v[k].name, "clblast_sgemm", 13) == 0) bench_keep_ref(&pool->v[k]);
  free(pool);
}

/* ---------------------------------------------------------------- matmul, child side */

typedef struct mm_ctx {
  ct_device *d;
  ct_tensor *a, *b;
} mm_ctx;

static int do_matmul(void *p) {
  mm_ctx *c = p;
  ct_tensor *out = NULL;
  ct_status st = ct_matmul(&out, c->a, c->b);
  ct_release(out);
  if (st != CT_OK) return bench_ct_fail("ct_matmul", st);
  st = ct_device_synchronize(c->d);
  return st == CT_OK ? 0 : bench_ct_fail("ct_device_synchronize", st);
}

/* "route host", "route clblast, shipped tuning": what the figure actually measured. */
void bench_gemm_note(ct_device *d, char *buf, size_t n) {
  ct_gemm_route route;
  ct_gemm_tuning_source src;
  buf[0] = '\0';
  if (ct_gemm_route_get(&route, d) != CT_OK) return;
  const char *tuning = "";
  if (route == CT_GEMM_ROUTE_CLBLAST && ct_gemm_tuning_get(&src, NULL, d) == CT_OK)
    tuning = src == CT_GEMM_TUNING_FILE      ? ", tuned (file)"
             : src == CT_GEMM_TUNING_SHIPPED ? ", tuned (shipped)"
                                             : ", CLBlast defaults";
  snprintf(buf, n, "route %s%s", ct_gemm_route_name(route), tuning);
}

static void gemm_shape(char *buf, size_t size, int n, int batch) {
  if (batch > 1) snprintf(buf, size, "%d x %dx%dx%d", batch, n, n, n);
  else snprintf(buf, size, "%dx%dx%d", n, n, n);
}

/* One figure, measured in turns with OpenBLAS on the same operands when host_ref (the
 * reference goes to the parent first, then the figure). Returns the status of the failure that
 * ended it (CT_OK when measured). */
static ct_status matmul_one(const bench_opts *o, ct_device *d, const char *route, int n, int batch,
                            const char *skip_reason, bool host_ref) {
  char name[40], shape_s[64];
  snprintf(name, sizeof name, "%s.%s", batch > 1 ? "matmul_batch" : "matmul", route);
  gemm_shape(shape_s, sizeof shape_s, n, batch);
  bench_fig f, ref;
  bench_fig_init(&f, name, n, shape_s, "f32", "GFLOP/s");
  bench_fig_init(&ref, batch > 1 ? "host_sgemm_batch" : "host_sgemm", n, shape_s, "f32", "GFLOP/s");
  if (skip_reason) {
    bench_fig_fail(&f, true, skip_reason);
    bench_emit(o, &f);
    return CT_ERR_UNSUPPORTED;
  }
  bench_progress(o, "matmul route %s %s", route, shape_s);
  size_t count = (size_t)n * n * batch;
  host_gemm_ctx g = {malloc(count * sizeof(float)), malloc(count * sizeof(float)), malloc(count * sizeof(float)),
                     n, batch};
  mm_ctx c = {d, NULL, NULL};
  int64_t shape3[3] = {batch, n, n};
  int ndim = batch > 1 ? 3 : 2;
  const int64_t *shape = batch > 1 ? shape3 : shape3 + 1;
  ct_status st = CT_OK;
  if (!g.a || !g.b || !g.c) {
    bench_fail("out of host memory");
    bench_fig_fail(&f, false, bench_error());
    st = CT_ERR_OUT_OF_MEMORY;
    goto done;
  }
  bench_fill(g.a, count, -1.0f, 1.0f, 101);
  bench_fill(g.b, count, -1.0f, 1.0f, 102);
  if ((st = ct_from_host(&c.a, d, CT_F32, ndim, shape, g.a)) != CT_OK ||
      (st = ct_from_host(&c.b, d, CT_F32, ndim, shape, g.b)) != CT_OK) {
    bench_ct_fail("ct_from_host", st);
    bench_fig_fail(&f, false, bench_error());
    goto done;
  }
  double gflop = 2.0 * (double)n * n * n * batch / 1e9;
  bench_item items[2] = {{&f, do_matmul, NULL, &c, 1000, gflop, false},
                         {&ref, do_host_sgemm, NULL, &g, 1000, gflop, !host_ref}};
  bench_measure_set(o, items, 2);
  if (host_ref && !ref.error[0]) {
    ref.is_ref = true;
    bench_emit(o, &ref);
  }
  if (!f.error[0]) {
    bench_gemm_note(d, f.note, sizeof f.note);
  } else {
    /* A route this build or device does not have (no host BLAS, no unified memory) is a
     * skipped figure, not a failure. */
    st = strstr(f.error, "CT_ERR_UNSUPPORTED") ? CT_ERR_UNSUPPORTED : CT_ERR_INTERNAL;
    f.skipped = st == CT_ERR_UNSUPPORTED;
    bench_fail("%s", f.error);
  }
done:
  bench_emit(o, &f);
  ct_release(c.a);
  ct_release(c.b);
  ct_empty_cache(d);
  free(g.a);
  free(g.b);
  free(g.c);
  return st;
}

int bench_child_matmul(const bench_opts *o) {
  const char *route = getenv("CLTENSOR_GEMM");
  if (!route || !*route) route = "auto";
  ct_device *d = NULL;
  ct_status st = ct_device_find(&d, o->device_spec);
  if (st != CT_OK) {
    fprintf(stderr, "cltensor-bench: %s\n", ct_last_error());
    return 1;
  }
  const int *sizes;
  int ns = bench_matmul_sizes(o, &sizes);
  char skip[sizeof((bench_fig *)0)->error] = "";
  /* OpenBLAS next to each figure, in the same process and moment, so that load on a shared
   * machine hits both alike. The CLBlast route is compared with the last of these the parent
   * kept, and with CLBlast's defaults. */
  bool host_ref = bench_have_cblas() && strcmp(route, "clblast") != 0;
  for (int i = 0; i <= ns; i++) {
    int n = i < ns ? sizes[i] : BENCH_BATCH_N, batch = i < ns ? 1 : BENCH_BATCH;
    if (matmul_one(o, d, route, n, batch, skip[0] ? skip : NULL, host_ref) == CT_ERR_UNSUPPORTED && !skip[0])
      snprintf(skip, sizeof skip, "%s", bench_error());
  }
  ct_shutdown();
  return 0;
}

int bench_child_clblast_defaults(const bench_opts *o, int platform_index, int device_index) {
  clref *r = clref_open(platform_index, device_index);
  const int *sizes;
  int ns = bench_matmul_sizes(o, &sizes);
  for (int i = 0; i <= ns; i++) {
    int n = i < ns ? sizes[i] : BENCH_BATCH_N, batch = i < ns ? 1 : BENCH_BATCH;
    if (n > CLBLAST_DEFAULTS_MAX_N) continue;
    char shape[64];
    bench_fig f;
    gemm_shape(shape, sizeof shape, n, batch);
    bench_fig_init(&f, batch > 1 ? "clblast_sgemm_batch" : "clblast_sgemm", n, shape, "f32", "GFLOP/s");
    bench_progress(o, "%s %s", f.name, shape);
    clref_job *job = r ? clref_job_new(o, r, f.name, (size_t)n) : NULL;
    if (!job) bench_fig_fail(&f, false, bench_error());
    else bench_measure(o, &f, clref_job_run, clref_job_sync, job, 1000, 2.0 * (double)n * n * n * batch / 1e9);
    clref_job_free(job);
    bench_emit(o, &f);
  }
  clref_close(r);
  return r ? 0 : 1;
}

/* ---------------------------------------------------------------- first result */

#define FIRST_N 1024

int bench_child_first_result(const bench_opts *o) {
  ct_device *d = NULL;
  ct_tensor *a = NULL, *b = NULL, *c = NULL;
  float ha[FIRST_N], hb[FIRST_N], hc[FIRST_N];
  int64_t shape[1] = {FIRST_N};
  bench_fill(ha, FIRST_N, -1.0f, 1.0f, 111);
  bench_fill(hb, FIRST_N, -1.0f, 1.0f, 112);
  ct_status st = ct_device_find(&d, o->device_spec);
  if (st == CT_OK) st = ct_from_host(&a, d, CT_F32, 1, shape, ha);
  if (st == CT_OK) st = ct_from_host(&b, d, CT_F32, 1, shape, hb);
  if (st == CT_OK) st = ct_add(&c, a, b);
  if (st == CT_OK) st = ct_to_host(c, hc, sizeof hc);
  if (st == CT_OK) bench_child_ready(o);
  int rc = 0;
  if (st != CT_OK) {
    bench_fig f;
    bench_fig_init(&f, "first_result", FIRST_N, "", "f32", "ms");
    bench_ct_fail("first result", st);
    bench_fig_fail(&f, false, bench_error());
    bench_emit(o, &f);
    rc = 1;
  } else {
    for (int i = 0; i < FIRST_N; i++)
      if (hc[i] != ha[i] + hb[i]) {
        fprintf(stderr, "cltensor-bench: wrong first result at %d: %g + %g gave %g\n", i, ha[i], hb[i], hc[i]);
        rc = 1;
        break;
      }
  }
  ct_release(a);
  ct_release(b);
  ct_release(c);
  ct_shutdown();
  return rc;
}

int bench_make_dir(const char *path) {
  if (mkdir(path, 0700) != 0 && errno != EEXIST) return bench_fail("mkdir %s: %s", path, strerror(errno));
  return 0;
}

int bench_first_result_once(const bench_opts *o, const char *mode, char *const env_extra[], const char *ct_dir,
                            const char *driver_dir, double *secs) {
  char runs[16], *args[8];
  child_args(o, mode, runs, sizeof runs, args);
  size_t n1 = strlen(ct_dir) + 32, n2 = strlen(driver_dir) + 32;
  char *e1 = malloc(n1), *e2 = malloc(n2);
  char *env[8];
  int ne = 0;
  if (!e1 || !e2) {
    free(e1);
    free(e2);
    return bench_fail("out of host memory");
  }
  snprintf(e1, n1, "CLTENSOR_CACHE_DIR=%s", ct_dir);
  snprintf(e2, n2, "POCL_CACHE_DIR=%s", driver_dir);
  env[ne++] = e1;
  env[ne++] = e2;
  /* CLTENSOR_CACHE (no '=') removes a user's CLTENSOR_CACHE=0, which would make warm = cold. */
  env[ne++] = "CLTENSOR_CACHE";
  for (int i = 0; env_extra && env_extra[i] && ne < 7; i++) env[ne++] = env_extra[i];
  env[ne] = NULL;
  double t0 = bench_now();
  bench_child *c = bench_child_start(o, args, env);
  free(e1);
  free(e2);
  if (!c) return -1;
  bench_fig f;
  int r;
  while ((r = bench_child_next(o, c, &f)) == 1 && f.error[0] == '\0') {
  }
  double t1 = bench_now();
  char err[sizeof f.error] = "";
  if (r == 1) snprintf(err, sizeof err, "%s", f.error);
  else if (r == 0) snprintf(err, sizeof err, "the child process ended without a result");
  else if (r < 0) snprintf(err, sizeof err, "%s", bench_error());
  while (r > 0) r = bench_child_next(o, c, &f);
  int status = bench_child_finish(c);
  if (err[0]) return bench_fail("%s", err);
  if (status != 0) return bench_fail("the child process exited with status %d", status);
  *secs = t1 - t0;
  return 0;
}

static void first_result_fig(const bench_opts *o, const char *name, const bench_samples *s, const char *error) {
  bench_fig f;
  bench_fig_init(&f, name, FIRST_N, "add 1024, new process", "f32", "ms");
  if (error) bench_fig_fail(&f, false, error);
  else bench_fig_set(&f, s, 1e3);
  bench_emit(o, &f);
}

/* One kind of first-result run: its samples, or the error that stopped it. */
typedef struct fr_kind {
  const char *name;
  bench_samples s;
  char err[320];
} fr_kind;

static void fr_run(const bench_opts *o, fr_kind *k, const char *ct_dir, const char *drv_dir) {
  if (k->err[0] || k->s.n >= BENCH_MAX_RUNS) return;
  if (bench_make_dir(ct_dir) || bench_make_dir(drv_dir) ||
      bench_first_result_once(o, "first-result", NULL, ct_dir, drv_dir, &k->s.s[k->s.n]) != 0)
    snprintf(k->err, sizeof k->err, "%s", bench_error());
  else
    k->s.n++;
}

/* Rounds of: a process with both caches empty (a freshly installed machine), then processes
 * finding the caches that one filled, so cold and warm see the same moments of the machine.
 * On PoCL also the library's cache alone, with PoCL's own cache (which keeps generated machine
 * code, and hides part of what the library's cache saves) empty. */
void bench_group_first_result(const bench_opts *o, ct_device *d) {
  bool pocl = !o->quick && strstr(ct_device_properties(d)->platform_name, "Portable Computing Language");
  fr_kind kinds[3] = {{"first_result.cold", {.n = 0}, ""},
                      {"first_result.warm", {.n = 0}, ""},
                      {"first_result.warm_ct_only", {.n = 0}, ""}};
  fr_kind *cold = &kinds[0], *warm = &kinds[1], *ct_only = &kinds[2];
  int rounds = o->quick ? 1 : 3, warm_per_round = 2;
  char *root = bench_mkdtemp();
  size_t n = root ? strlen(root) + 64 : 0;
  char *run = root ? malloc(n) : NULL, *ct_dir = root ? malloc(n) : NULL, *drv_dir = root ? malloc(n) : NULL;
  char *fresh = root ? malloc(n) : NULL;
  if (!root || !run || !ct_dir || !drv_dir || !fresh) {
    snprintf(cold->err, sizeof cold->err, "%s", root ? "out of host memory" : bench_error());
  }
  for (int r = 0; r < rounds && !cold->err[0]; r++) {
    snprintf(run, n, "%s/round%d", root, r);
    snprintf(ct_dir, n, "%s/ct", run);
    snprintf(drv_dir, n, "%s/driver", run);
    snprintf(fresh, n, "%s/driver-empty", run);
    bench_progress(o, "first result of a new process, round %d/%d", r + 1, rounds);
    if (bench_make_dir(run) != 0) {
      snprintf(cold->err, sizeof cold->err, "%s", bench_error());
      break;
    }
    fr_run(o, cold, ct_dir, drv_dir);
    if (cold->err[0]) break;
    for (int w = 0; w < warm_per_round; w++) fr_run(o, warm, ct_dir, drv_dir);
    if (pocl) fr_run(o, ct_only, ct_dir, fresh);
  }
  for (int i = 0; i < (pocl ? 3 : 2); i++) {
    fr_kind *k = &kinds[i];
    if (!k->err[0] && k->s.n == 0) snprintf(k->err, sizeof k->err, "%s", cold->err);
    first_result_fig(o, k->name, &k->s, k->err[0] ? k->err : NULL);
  }
  bench_rmtree(root);
  free(root);
  free(run);
  free(ct_dir);
  free(drv_dir);
  free(fresh);
}
