/* The fusion group (issue #16): the speed of elementwise chains fused into one generated kernel
 * (src/fusion/), each figure next to references timed in turns in the same process.
 *
 *   fusion.tanh_chain  tanh(z * 0.5 + 1) * z on 2^25 f32, as a C user writes it: each call
 *                      allocates its result, the intermediates are released before the realize
 *                      (ct_device_synchronize), the result after it. References: one ct_exp
 *                      over the same data (target: at most 1.3x), the same calls with fusion off
 *                      ("unfused", CLTENSOR_FUSION=0's eager kernels: target 4x faster), the
 *                      one-line OpenCL kernels of exp and of the whole chain (the floor a
 *                      generated kernel can reach); PyTorch CPU and tinygrad on the same PoCL
 *                      device when $CLTENSOR_BENCH_PYTHON has them (torch_fusion.py, run right
 *                      before and right after ours, as the models group runs PyTorch).
 *   fusion.gelu_tanh   GELU written out with the tanh formula, 8 calls (PyTorch's NewGELU:
 *                      0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))))): against
 *                      fusion off (target 5x faster), the library's one-op ct_gelu_tanh,
 *                      PyTorch. On 2^22 (2^20 quick), not 2^25: pow dominates (below).
 *   fusion.gelu_tanh_cube  The same with x^3 as x * x * x (9 calls), on 2^25: PoCL 3.1's pow
 *                      builtin takes ~100x the time of tanh (pow and pown alike), so the form
 *                      above measures pow, and this one what fusion saves.
 *   fusion.sum_sq_diff sum((a - b)^2) on 2^25, the scalar read back: GB/s on the bytes of a and
 *                      b, against the one-thread C loop's host_sum on one array (target 0.9x)
 *                      and against cl_sum, the one-line sum over 2n floats (the same bytes).
 *                      The note says how many fused kernels a call ran.
 *   fusion.add10       10 chained ct_add on 1024 elements, then ct_device_synchronize: the time
 *                      of the whole chain against one bare launch of the one-line add and a
 *                      clFinish (cl_launch, target at most 2x), and fusion off.
 *   fusion.first.*     A new process's first fused chain (the tanh chain on 1024 elements, to
 *                      the host) from its start: with empty caches, then with the disk caches
 *                      that run filled (target under 50 ms), against the same with fusion off
 *                      and the first_result group's process (one add) on warm caches.
 *
 * Fusion is switched per call through the library's test hook (tools/common/fusion_support.h):
 * $CLTENSOR_FUSION is read once per process, and the ratios must come from one process. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/fusion_support.h"

#define FZ_ADDS 10
#define FZ_SMALL 1024
#define FZ_FIRST_N 1024

typedef struct fz_ctx {
  ct_device *d;
  ct_tensor *x, *y;  /* the inputs (y: the second operand of binary chains) */
  int fusion;        /* for ctt_fusion_set() at each call */
  float *hx;         /* host copies for host references */
  size_t n;
  float result;
} fz_ctx;

#define FZ_DO(name, call)                              \
  do {                                                 \
    ct_status st_ = (call);                            \
    if (st_ != CT_OK) return bench_ct_fail(name, st_); \
  } while (0)

/* Realizes and waits: with fusion on, the chain's one kernel runs here. */
static int fz_sync(fz_ctx *c) {
  FZ_DO("ct_device_synchronize", ct_device_synchronize(c->d));
  return 0;
}

/* A step of a chain, fz_step(&t, &n, op(&n, t, ...)): the new result n replaces t, and t, the
 * previous intermediate, is released at once, as a C user releases what it no longer needs (so
 * the graph never stores it). n is read here, after the call that set it. */
static ct_status fz_step(ct_tensor **t, ct_tensor **n, ct_status st) {
  ct_release(*t);
  *t = *n;
  *n = NULL;
  return st;
}

/* tanh(x * 0.5 + 1) * x; *out is the result (NULL on failure). */
static ct_status tanh_chain(ct_tensor **out, const ct_tensor *x) {
  ct_tensor *t = NULL, *n = NULL;
  ct_status st = ct_mul_scalar(&t, x, 0.5);
  if (st == CT_OK) st = fz_step(&t, &n, ct_add_scalar(&n, t, 1.0));
  if (st == CT_OK) st = fz_step(&t, &n, ct_tanh(&n, t));
  if (st == CT_OK) st = fz_step(&t, &n, ct_mul(&n, t, x));
  if (st != CT_OK) {
    ct_release(t);
    t = NULL;
  }
  *out = t;
  return st;
}

/* GELU written out from t = x^3 (taken over; st: how computing it went):
 * 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * t))), 6 more calls. */
static ct_status gelu_from_cube(ct_tensor **out, const ct_tensor *x, ct_tensor *t, ct_status st) {
  const double k = 0.7978845608028654; /* sqrt(2 / pi) */
  ct_tensor *n = NULL, *h = NULL, *r = NULL;
  if (st == CT_OK) st = fz_step(&t, &n, ct_mul_scalar(&n, t, 0.044715));
  if (st == CT_OK) st = fz_step(&t, &n, ct_add(&n, x, t));
  if (st == CT_OK) st = fz_step(&t, &n, ct_mul_scalar(&n, t, k));
  if (st == CT_OK) st = fz_step(&t, &n, ct_tanh(&n, t));
  if (st == CT_OK) st = fz_step(&t, &n, ct_add_scalar(&n, t, 1.0));
  if (st == CT_OK) st = ct_mul_scalar(&h, x, 0.5);
  if (st == CT_OK) st = ct_mul(&r, h, t);
  ct_release(t);
  ct_release(h);
  *out = st == CT_OK ? r : NULL;
  if (st != CT_OK) ct_release(r);
  return st;
}

/* The cube as pow(x, 3): 8 calls, PyTorch's NewGELU. */
static ct_status gelu_chain(ct_tensor **out, const ct_tensor *x) {
  ct_tensor *t = NULL;
  ct_status st = ct_pow_scalar(&t, x, 3.0);
  return gelu_from_cube(out, x, t, st);
}

/* The cube as x * x * x (9 calls): PoCL's pow builtin costs ~100x a tanh, so the form with pow
 * measures pow; this one measures what fusion saves. */
static ct_status gelu_cube_chain(ct_tensor **out, const ct_tensor *x) {
  ct_tensor *t = NULL, *n = NULL;
  ct_status st = ct_mul(&t, x, x);
  if (st == CT_OK) st = fz_step(&t, &n, ct_mul(&n, t, x));
  return gelu_from_cube(out, x, t, st);
}

/* One call of a chain: fusion as the item asks, the chain, the realize, the result released. */
static int run_chain(fz_ctx *c, ct_status (*chain)(ct_tensor **, const ct_tensor *), const char *what) {
  ct_tensor *r = NULL;
  ctt_fusion_set(c->fusion);
  ct_status st = chain(&r, c->x);
  if (st != CT_OK) return bench_ct_fail(what, st);
  int rc = fz_sync(c);
  ct_release(r);
  return rc;
}

static int do_tanh_chain(void *p) { return run_chain(p, tanh_chain, "the tanh chain"); }
static int do_gelu_chain(void *p) { return run_chain(p, gelu_chain, "the written-out GELU"); }
static int do_gelu_cube(void *p) { return run_chain(p, gelu_cube_chain, "the written-out GELU (x * x * x)"); }

static ct_status one_exp(ct_tensor **out, const ct_tensor *x) { return ct_exp(out, x); }
static ct_status one_gelu(ct_tensor **out, const ct_tensor *x) { return ct_gelu_tanh(out, x); }
static int do_exp(void *p) { return run_chain(p, one_exp, "ct_exp"); }
static int do_gelu_op(void *p) { return run_chain(p, one_gelu, "ct_gelu_tanh"); }

/* sum((a - b)^2), the scalar on the host. */
static int do_sum_sq(void *p) {
  fz_ctx *c = p;
  ctt_fusion_set(c->fusion);
  ct_tensor *d = NULL, *sq = NULL, *s = NULL;
  ct_status st = ct_sub(&d, c->x, c->y);
  if (st == CT_OK) st = ct_mul(&sq, d, d);
  ct_release(d);
  if (st == CT_OK) st = ct_sum(&s, sq, 0, NULL, false);
  ct_release(sq);
  if (st == CT_OK) st = ct_to_host(s, &c->result, sizeof c->result);
  ct_release(s);
  return st == CT_OK ? 0 : bench_ct_fail("sum((a - b)^2)", st);
}

static int do_host_sum(void *p) {
  fz_ctx *c = p;
  c->result = ref_host_sum(c->hx, c->n);
  return 0;
}

/* x + y + y + ... (FZ_ADDS adds), then a synchronize. */
static int do_add10(void *p) {
  fz_ctx *c = p;
  ctt_fusion_set(c->fusion);
  ct_tensor *t = ct_retain(c->x), *n = NULL;
  ct_status st = CT_OK;
  for (int i = 0; i < FZ_ADDS && st == CT_OK; i++) st = fz_step(&t, &n, ct_add(&n, t, c->y));
  if (st != CT_OK) {
    ct_release(t);
    return bench_ct_fail("ct_add", st);
  }
  int rc = fz_sync(c);
  ct_release(t);
  return rc;
}

/* "2 fused kernels, 3 launches per call": what one more call of fn ran (fn with fusion on). */
static void kernel_note(bench_fig *f, bench_fn fn, void *ctx) {
  ctt_fusion_stats a, b;
  ctt_fusion_stats_get(&a);
  bench_clear_error();
  if (fn(ctx) != 0) return;
  ctt_fusion_stats_get(&b);
  snprintf(f->note, sizeof f->note, "%lu fused kernel%s, %lu launch%s per call", b.kernels - a.kernels,
           b.kernels - a.kernels == 1 ? "" : "s", b.launches - a.launches, b.launches - a.launches == 1 ? "" : "es");
}

/* torch_fusion.py's median ms for figure name on n elements with library lib ("torch",
 * "tinygrad_cl"), or a negative value when it can't run. */
static double py_ms(const char *name, int64_t n, const char *lib, int threads) {
  char extra[128];
  snprintf(extra, sizeof extra, "--n %lld --lib %s%s", (long long)n, lib, threads == 1 ? " --threads 1" : "");
  return bench_torch_ms(CT_BENCH_TORCH_FUSION, "torch_fusion", name, extra);
}

typedef struct py_ref {
  const char *ref;   /* the reference's name */
  const char *lib;   /* torch_fusion.py --lib */
  int threads;       /* 1, or 0 for the library's default */
  double before;
} py_ref;

/* The Python references of a figure: timed before ours (before), then again after it and added
 * to f with the two medians. */
static void py_refs(bench_fig *f, py_ref *refs, int nrefs, bool before) {
  for (int i = 0; i < nrefs; i++) {
    if (before) {
      refs[i].before = py_ms(f->name, f->size, refs[i].lib, refs[i].threads);
    } else if (refs[i].before > 0 && !f->error[0]) {
      bench_add_torch_ref(f, refs[i].ref, refs[i].before, py_ms(f->name, f->size, refs[i].lib, refs[i].threads));
    }
  }
}

/* A figure of a chain on one input of n f32 in [lo, hi): the chain fused, the references
 * `others` (same context, own fusion mode), then the Python ones. */
typedef struct fz_other {
  const char *name;
  bench_fn fn;
  int fusion;
} fz_other;

static void chain_fig(const bench_opts *o, ct_device *d, clref *r, const char *name, bench_fn fn, int64_t n,
                      float lo, float hi, const fz_other *others, int nothers, bool cl_refs, py_ref *pys, int npys) {
  char sz[32];
  snprintf(sz, sizeof sz, "2^%d", (int)lround(log2((double)n)));
  bench_fig f, refs[BENCH_MAX_ITEMS];
  bench_fig_init(&f, name, n, sz, "f32", "ms");
  fz_ctx ctx[BENCH_MAX_ITEMS];
  bench_item items[BENCH_MAX_ITEMS];
  clref_job *jobs[2] = {NULL, NULL};
  int ni = 0;
  float *h = malloc((size_t)n * sizeof *h);
  ct_tensor *x = NULL;
  bench_progress(o, "%s %s", name, sz);
  if (!h) {
    bench_fail("out of host memory (%lld floats)", (long long)n);
    goto fail;
  }
  bench_fill(h, (size_t)n, lo, hi, 131);
  ct_status st = ct_from_host(&x, d, CT_F32, 1, &n, h);
  if (st != CT_OK) {
    bench_ct_fail("ct_from_host", st);
    goto fail;
  }
  py_refs(&f, pys, npys, true);
  ctx[0] = (fz_ctx){.d = d, .x = x, .fusion = 1};
  items[ni++] = (bench_item){&f, fn, NULL, &ctx[0], 1000, 1e3, false};
  for (int i = 0; i < nothers && ni < BENCH_MAX_ITEMS; i++, ni++) {
    bench_fig_init(&refs[ni], others[i].name, n, sz, "f32", "ms");
    ctx[ni] = (fz_ctx){.d = d, .x = x, .fusion = others[i].fusion};
    items[ni] = (bench_item){&refs[ni], others[i].fn, NULL, &ctx[ni], 1000, 1e3, false};
  }
  /* The one-line OpenCL kernels of one exp and of the whole chain: the floor a generated
   * kernel can reach on this device. */
  static const char *const cl_what[2] = {"exp", "tanh_chain"}, *const cl_name[2] = {"cl_exp", "cl_tanh_chain"};
  for (int k = 0; cl_refs && r && k < 2 && ni < BENCH_MAX_ITEMS; k++) {
    bench_clear_error();
    if ((jobs[k] = clref_job_new(o, r, cl_what[k], (size_t)n))) {
      bench_fig_init(&refs[ni], cl_name[k], n, sz, "f32", "ms");
      items[ni] = (bench_item){&refs[ni], clref_job_run, clref_job_sync, jobs[k], 1000, 1e3, false};
      ni++;
    } else {
      fprintf(stderr, "cltensor-bench: reference %s %s: %s\n", cl_name[k], sz, bench_error());
    }
  }
  bench_measure_set(o, items, ni);
  if (!f.error[0]) kernel_note(&f, fn, &ctx[0]);
  ctt_fusion_set(-1);
  for (int i = 1; i < ni; i++) {
    if (refs[i].error[0]) fprintf(stderr, "cltensor-bench: reference %s %s: %s\n", refs[i].name, sz, refs[i].error);
    else bench_fig_add_ref(&f, &refs[i]);
  }
  py_refs(&f, pys, npys, false);
  bench_emit(o, &f);
  clref_job_free(jobs[0]);
  clref_job_free(jobs[1]);
  ct_release(x);
  free(h);
  ct_empty_cache(d);
  return;
fail:
  bench_fig_fail(&f, false, bench_error());
  bench_emit(o, &f);
  ct_release(x);
  free(h);
}

static void sum_sq_fig(const bench_opts *o, ct_device *d, clref *r, int64_t n) {
  char sz[32];
  snprintf(sz, sizeof sz, "2^%d", (int)lround(log2((double)n)));
  bench_fig f, unfused, host;
  bench_fig_init(&f, "fusion.sum_sq_diff", n, sz, "f32", "GB/s");
  bench_fig_init(&unfused, "unfused", n, sz, "f32", "GB/s");
  bench_fig_init(&host, "host_sum", n, sz, "f32", "GB/s");
  float *ha = malloc((size_t)n * sizeof *ha), *hb = malloc((size_t)n * sizeof *hb);
  ct_tensor *a = NULL, *b = NULL;
  ct_status st = CT_OK;
  bench_progress(o, "sum((a - b)^2) %s", sz);
  if (!ha || !hb) {
    bench_fail("out of host memory (2 x %lld floats)", (long long)n);
    bench_fig_fail(&f, false, bench_error());
    goto done;
  }
  bench_fill(ha, (size_t)n, -1.0f, 1.0f, 141);
  bench_fill(hb, (size_t)n, -1.0f, 1.0f, 142);
  if ((st = ct_from_host(&a, d, CT_F32, 1, &n, ha)) != CT_OK || (st = ct_from_host(&b, d, CT_F32, 1, &n, hb)) != CT_OK) {
    bench_ct_fail("ct_from_host", st);
    bench_fig_fail(&f, false, bench_error());
    goto done;
  }
  /* ours and "unfused" move the bytes of a and b; host_sum reads one array of n floats. */
  double gb2 = 2.0 * (double)n * sizeof(float) / 1e9, gb1 = gb2 / 2;
  fz_ctx cf = {.d = d, .x = a, .y = b, .fusion = 1}, cu = cf, ch = {.hx = ha, .n = (size_t)n};
  cu.fusion = 0;
  bench_item items[4] = {{&f, do_sum_sq, NULL, &cf, 1000, gb2, false},
                         {&unfused, do_sum_sq, NULL, &cu, 1000, gb2, false},
                         {&host, do_host_sum, NULL, &ch, 1000, gb1, false}};
  /* cl_sum: the one-line two-stage sum over 2n floats, the bytes ours moves (issue #27's target
   * for the fused reduction is half its rate). */
  int ni = 3;
  bench_fig clsum;
  bench_fig_init(&clsum, "cl_sum", n, sz, "f32", "GB/s");
  clref_job *job = clref_job_new(o, r, "sum", 2 * (size_t)n);
  if (job) items[ni++] = (bench_item){&clsum, clref_job_run, clref_job_sync, job, 1000, gb2, false};
  bench_measure_set(o, items, ni);
  if (!f.error[0]) kernel_note(&f, do_sum_sq, &cf);
  ctt_fusion_set(-1);
  bench_fig_add_ref(&f, &host);
  bench_fig_add_ref(&f, &unfused);
  if (job && !clsum.error[0]) bench_fig_add_ref(&f, &clsum);
  clref_job_free(job);
done:
  bench_emit(o, &f);
  ct_release(a);
  ct_release(b);
  free(ha);
  free(hb);
  ct_empty_cache(d);
}

static void add10_fig(const bench_opts *o, ct_device *d, clref *r) {
  char shape[32];
  snprintf(shape, sizeof shape, "%d adds x %d", FZ_ADDS, FZ_SMALL);
  bench_fig f, unfused, launch;
  bench_fig_init(&f, "fusion.add10", FZ_SMALL, shape, "f32", "us");
  bench_fig_init(&unfused, "unfused", FZ_SMALL, shape, "f32", "us");
  bench_fig_init(&launch, "cl_launch", FZ_SMALL, shape, "f32", "us");
  float h[FZ_SMALL];
  int64_t n = FZ_SMALL;
  ct_tensor *x = NULL, *y = NULL;
  bench_progress(o, "%d chained adds of %d elements", FZ_ADDS, FZ_SMALL);
  bench_fill(h, FZ_SMALL, -1e-3f, 1e-3f, 151);
  ct_status st = ct_from_host(&x, d, CT_F32, 1, &n, h);
  if (st == CT_OK) st = ct_from_host(&y, d, CT_F32, 1, &n, h);
  if (st != CT_OK) {
    bench_ct_fail("ct_from_host", st);
    bench_fig_fail(&f, false, bench_error());
  } else {
    /* One launch of the one-line add and its clFinish: a chain realized once is one launch. */
    bench_clear_error();
    clref_job *job = clref_job_new(o, r, "launch", 1);
    if (r && !job) fprintf(stderr, "cltensor-bench: reference cl_launch: %s\n", bench_error());
    fz_ctx cf = {.d = d, .x = x, .y = y, .fusion = 1}, cu = cf;
    cu.fusion = 0;
    bench_item items[3] = {{&f, do_add10, NULL, &cf, 10000, 1e6, false},
                           {&unfused, do_add10, NULL, &cu, 10000, 1e6, false},
                           {&launch, clref_job_run, NULL, job, 10000, 1e6, job == NULL}};
    bench_measure_set(o, items, 3);
    if (!f.error[0]) kernel_note(&f, do_add10, &cf);
    ctt_fusion_set(-1);
    if (job) bench_fig_add_ref(&f, &launch);
    bench_fig_add_ref(&f, &unfused);
    clref_job_free(job);
  }
  bench_emit(o, &f);
  ct_release(x);
  ct_release(y);
}

/* ---------------------------------------------------------------- the first fused chain */

/* Child mode "first-fusion": the tanh chain on FZ_FIRST_N elements from the process's start to
 * the result on the host ($CLTENSOR_FUSION decides fused or not), checked against tanhf. */
int bench_child_first_fusion(const bench_opts *o) {
  ct_device *d = NULL;
  ct_tensor *x = NULL, *y = NULL;
  float hx[FZ_FIRST_N], hy[FZ_FIRST_N];
  int64_t n = FZ_FIRST_N;
  bench_fill(hx, FZ_FIRST_N, -2.0f, 2.0f, 161);
  ct_status st = ct_device_find(&d, o->device_spec);
  if (st == CT_OK) st = ct_from_host(&x, d, CT_F32, 1, &n, hx);
  if (st == CT_OK) st = tanh_chain(&y, x);
  if (st == CT_OK) st = ct_to_host(y, hy, sizeof hy);
  if (st == CT_OK) bench_child_ready(o);
  int rc = 0;
  if (st != CT_OK) {
    bench_fig f;
    bench_fig_init(&f, "fusion.first", FZ_FIRST_N, "", "f32", "ms");
    bench_ct_fail("the first fused chain", st);
    bench_fig_fail(&f, false, bench_error());
    bench_emit(o, &f);
    rc = 1;
  } else {
    /* OpenCL's tanh is within 5 ulp, then one more rounding by the multiply. */
    for (int i = 0; i < FZ_FIRST_N; i++) {
      float want = tanhf(hx[i] * 0.5f + 1.0f) * hx[i];
      if (!(fabsf(hy[i] - want) <= 1e-5f * fabsf(want) + 1e-7f)) {
        fprintf(stderr, "cltensor-bench: wrong first fused result at %d: %g gave %g, want %g\n", i, hx[i], hy[i],
                want);
        rc = 1;
        break;
      }
    }
  }
  ct_release(x);
  ct_release(y);
  ct_shutdown();
  return rc;
}

/* Rounds of: a process with both caches empty that fuses (it fills them), one with fusion off
 * on the same caches (fills the per-op kernels), one of the first_result group (a single add,
 * to the host) likewise, then warm processes of each in turns. */
static void first_fusion_figs(const bench_opts *o) {
  static char *const env_on[] = {"CLTENSOR_FUSION=1", NULL}, *const env_off[] = {"CLTENSOR_FUSION=0", NULL};
  static const char *const names[4] = {"fusion.first.cold", "fusion.first.warm", "unfused_warm", "first_result_warm"};
  static const char *const modes[4] = {"first-fusion", "first-fusion", "first-fusion", "first-result"};
  char *const *const envs[4] = {env_on, env_on, env_off, NULL};
  bench_samples s[4] = {{.n = 0}, {.n = 0}, {.n = 0}, {.n = 0}};
  char err[320] = "";
  int rounds = o->quick ? 1 : 3, warm_per_round = o->quick ? 1 : 2;
  char *root = bench_mkdtemp();
  size_t len = root ? strlen(root) + 64 : 0;
  char *ct_dir = root ? malloc(len) : NULL, *drv_dir = root ? malloc(len) : NULL;
  if (!root || !ct_dir || !drv_dir) snprintf(err, sizeof err, "%s", root ? "out of host memory" : bench_error());
  for (int r = 0; r < rounds && !err[0]; r++) {
    snprintf(ct_dir, len, "%s/ct%d", root, r);
    snprintf(drv_dir, len, "%s/driver%d", root, r);
    bench_progress(o, "first fused chain of a new process, round %d/%d", r + 1, rounds);
    double t, fill;
    if (bench_make_dir(ct_dir) || bench_make_dir(drv_dir) ||
        bench_first_result_once(o, modes[0], envs[0], ct_dir, drv_dir, &t) ||
        bench_first_result_once(o, modes[2], envs[2], ct_dir, drv_dir, &fill) ||
        bench_first_result_once(o, modes[3], envs[3], ct_dir, drv_dir, &fill)) {
      snprintf(err, sizeof err, "%s", bench_error());
      break;
    }
    s[0].s[s[0].n++] = t;
    for (int w = 0; w < warm_per_round && !err[0]; w++)
      for (int k = 1; k < 4; k++) {
        if (bench_first_result_once(o, modes[k], envs[k], ct_dir, drv_dir, &t) != 0) {
          snprintf(err, sizeof err, "%s", bench_error());
          break;
        }
        s[k].s[s[k].n++] = t;
      }
  }
  bench_fig f[4];
  for (int k = 0; k < 4; k++) {
    bench_fig_init(&f[k], names[k], FZ_FIRST_N, "tanh chain 1024, new process", "f32", "ms");
    if (err[0]) bench_fig_fail(&f[k], false, err);
    else bench_fig_set(&f[k], &s[k], 1e3);
  }
  bench_fig_add_ref(&f[1], &f[2]);
  bench_fig_add_ref(&f[1], &f[3]);
  bench_emit(o, &f[0]);
  bench_emit(o, &f[1]);
  bench_rmtree(root);
  free(root);
  free(ct_dir);
  free(drv_dir);
}

void bench_group_fusion(const bench_opts *o, ct_device *d, clref *r) {
  const int64_t n = (int64_t)1 << (o->quick ? 22 : 25);
  py_ref tanh_py[] = {{"torch", "torch", 0, 0}, {"torch_1t", "torch", 1, 0}, {"tinygrad", "tinygrad_cl", 0, 0}};
  py_ref gelu_py[] = {{"torch", "torch", 0, 0}, {"torch_1t", "torch", 1, 0}};
  const fz_other tanh_refs[] = {{"exp", do_exp, 1}, {"unfused", do_tanh_chain, 0}};
  const fz_other gelu_refs[] = {{"unfused", do_gelu_chain, 0}, {"gelu_tanh_op", do_gelu_op, 1}};
  chain_fig(o, d, r, "fusion.tanh_chain", do_tanh_chain, n, -2.0f, 2.0f, tanh_refs, 2, true, tanh_py, 3);
  /* PoCL 3.1's pow takes ~0.25 us per element (both cores): a 2^25 figure would take minutes.
   * pow's arithmetic dominates every form of it, so the ratios do not depend on the size. */
  const int64_t n_pow = (int64_t)1 << (o->quick ? 20 : 22);
  chain_fig(o, d, r, "fusion.gelu_tanh", do_gelu_chain, n_pow, -4.0f, 4.0f, gelu_refs, 2, false, gelu_py, 2);
  const fz_other cube_refs[] = {{"unfused", do_gelu_cube, 0}, {"gelu_tanh_op", do_gelu_op, 1}};
  chain_fig(o, d, r, "fusion.gelu_tanh_cube", do_gelu_cube, n, -4.0f, 4.0f, cube_refs, 2, false, NULL, 0);
  sum_sq_fig(o, d, r, n);
  add10_fig(o, d, r);
  first_fusion_figs(o);
}
