/* The figure groups measured in the main process: transfers, elementwise ops, reductions,
 * softmax, the chain of small ops and the MLP forward, each next to its references. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Everything an op figure touches; unused members stay NULL. */
typedef struct op_ctx {
  ct_device *d;
  ct_tensor *a, *b, *c;
  ct_tensor *w[3], *bias[3];
  void *host;
  size_t bytes;
  int ops;
  float result;
  /* host reference operands */
  float *ha, *hb, *hc;
  size_t n, rows, cols;
  float *hw[3], *hbias[3];
} op_ctx;

static int sync_dev(void *p) {
  op_ctx *c = p;
  ct_status st = ct_device_synchronize(c->d);
  return st == CT_OK ? 0 : bench_ct_fail("ct_device_synchronize", st);
}

#define CT_DO(name, call)                            \
  do {                                               \
    ct_status st_ = (call);                          \
    if (st_ != CT_OK) return bench_ct_fail(name, st_); \
  } while (0)

/* "2^20" for powers of two from 2^10 on, the number otherwise. */
static void size_str(char *buf, size_t n, int64_t v) {
  int k = 0;
  while (k < 62 && ((int64_t)1 << k) < v) k++;
  if (v >= 1024 && ((int64_t)1 << k) == v) snprintf(buf, n, "2^%d", k);
  else snprintf(buf, n, "%lld", (long long)v);
}

static float *host_array(size_t n, uint32_t seed, float lo, float hi) {
  float *p = malloc(n * sizeof *p);
  if (p) bench_fill(p, n, lo, hi, seed);
  return p;
}

static ct_status tensor_from(ct_tensor **out, ct_device *d, int ndim, const int64_t *shape, const float *data) {
  return ct_from_host(out, d, CT_F32, ndim, shape, data);
}

/* Figures whose setup failed carry the setup's error. */
static void emit_failed(const bench_opts *o, bench_fig *f) {
  bench_fig_fail(f, false, bench_error());
  bench_emit(o, f);
}

/* Measures a reference figure, keeps it for later lookups, and adds it to f. */
static void add_ref(bench_fig *f, const bench_fig *ref) {
  bench_keep_ref(ref);
  bench_fig_add_ref(f, ref);
}

/* Measures ours with its raw-OpenCL and host references interleaved, then emits ours with the
 * references that could be measured. cl_what names the clref job (NULL: none). */
typedef struct ref_plan {
  const char *name;   /* the reference figure's name */
  const char *cl_what; /* a clref job, or NULL for a host function */
  size_t cl_n;
  bench_fn host_fn;
  void *host_ctx;
} ref_plan;

static void measure_with_refs(const bench_opts *o, clref *r, bench_fig *f, bench_fn fn, bench_sync_fn sync,
                              void *ctx, int max_reps, double work, const ref_plan *plans, int nplans) {
  bench_item items[BENCH_MAX_ITEMS];
  bench_fig refs[BENCH_MAX_ITEMS];
  clref_job *jobs[BENCH_MAX_ITEMS] = {0};
  int n = 0;
  items[n++] = (bench_item){f, fn, sync, ctx, max_reps, work, false};
  for (int i = 0; i < nplans && n < BENCH_MAX_ITEMS; i++) {
    bench_fig *rf = &refs[n];
    bench_fig_init(rf, plans[i].name, f->size, f->shape, f->dtype, f->unit);
    if (plans[i].cl_what) {
      bench_clear_error();
      if (!(jobs[n] = clref_job_new(o, r, plans[i].cl_what, plans[i].cl_n))) {
        if (r) fprintf(stderr, "cltensor-bench: reference %s %s: %s\n", plans[i].name, f->shape, bench_error());
        continue;
      }
      items[n] = (bench_item){rf, clref_job_run, clref_job_sync, jobs[n], max_reps, work, false};
    } else {
      items[n] = (bench_item){rf, plans[i].host_fn, NULL, plans[i].host_ctx, max_reps, work, false};
    }
    n++;
  }
  bench_measure_set(o, items, n);
  for (int i = 1; i < n; i++) {
    if (items[i].fig->error[0])
      fprintf(stderr, "cltensor-bench: reference %s %s: %s\n", items[i].fig->name, f->shape, items[i].fig->error);
    else add_ref(f, items[i].fig);
    clref_job_free(jobs[i]);
  }
}

/* ---------------------------------------------------------------- transfers */

static int do_h2d(void *p) {
  op_ctx *c = p;
  CT_DO("ct_copy_from_host", ct_copy_from_host(c->a, c->host, c->bytes));
  return 0;
}

static int do_d2h(void *p) {
  op_ctx *c = p;
  CT_DO("ct_to_host", ct_to_host(c->a, c->host, c->bytes));
  return 0;
}

static void transfer_one(const bench_opts *o, ct_device *d, clref *r, size_t n, bool pinned) {
  size_t bytes = n * sizeof(float);
  char sz[32];
  size_str(sz, sizeof sz, (int64_t)n);
  bench_fig h2d, d2h;
  bench_fig_init(&h2d, pinned ? "h2d.pinned" : "h2d.pageable", (int64_t)n, sz, "f32", "GB/s");
  bench_fig_init(&d2h, pinned ? "d2h.pinned" : "d2h.pageable", (int64_t)n, sz, "f32", "GB/s");
  op_ctx c = {.d = d, .bytes = bytes};
  ct_pinned *pin = NULL;
  void *pageable = NULL;
  int64_t shape[1] = {(int64_t)n};
  ct_status st;
  bench_progress(o, "transfer %s %s", pinned ? "pinned" : "pageable", sz);
  if ((st = ct_empty(&c.a, d, CT_F32, 1, shape)) != CT_OK) {
    bench_ct_fail("ct_empty", st);
    goto fail;
  }
  if (pinned) {
    if ((st = ct_pinned_alloc(&pin, d, bytes)) != CT_OK) {
      bench_ct_fail("ct_pinned_alloc", st);
      goto fail;
    }
    c.host = ct_pinned_ptr(pin);
  } else if (!(c.host = pageable = malloc(bytes))) {
    bench_fail("out of host memory (%zu bytes)", bytes);
    goto fail;
  }
  bench_fill(c.host, n, -1.0f, 1.0f, 21);
  /* Both kinds are compared with the raw pageable copy (peers.c's cl_h2d and cl_d2h), pinned
   * ones also with the raw pinned recipe. */
  ref_plan up[2] = {{"cl_h2d", "h2d", n, NULL, NULL}, {"cl_h2d_pinned", "h2d_pinned", n, NULL, NULL}};
  ref_plan down[2] = {{"cl_d2h", "d2h", n, NULL, NULL}, {"cl_d2h_pinned", "d2h_pinned", n, NULL, NULL}};
  measure_with_refs(o, r, &h2d, do_h2d, sync_dev, &c, 1000, (double)bytes / 1e9, up, pinned ? 2 : 1);
  measure_with_refs(o, r, &d2h, do_d2h, sync_dev, &c, 1000, (double)bytes / 1e9, down, pinned ? 2 : 1);
  bench_emit(o, &h2d);
  bench_emit(o, &d2h);
  ct_release(c.a);
  ct_pinned_free(pin);
  free(pageable);
  ct_empty_cache(d);
  return;
fail:
  ct_release(c.a);
  ct_pinned_free(pin);
  free(pageable);
  emit_failed(o, &h2d);
  emit_failed(o, &d2h);
}

void bench_group_transfer(const bench_opts *o, ct_device *d, clref *r) {
  const size_t full[] = {(size_t)1 << 20, (size_t)1 << 25}, quick[] = {(size_t)1 << 22};
  const size_t *sizes = o->quick ? quick : full;
  size_t ns = o->quick ? 1 : 2;
  for (size_t i = 0; i < ns; i++) {
    transfer_one(o, d, r, sizes[i], false);
    transfer_one(o, d, r, sizes[i], true);
  }
}

/* ---------------------------------------------------------------- elementwise */

static int do_add_out(void *p) {
  op_ctx *c = p;
  CT_DO("ct_add_out", ct_add_out(c->c, c->a, c->b));
  return 0;
}

static int do_mul_out(void *p) {
  op_ctx *c = p;
  CT_DO("ct_mul_out", ct_mul_out(c->c, c->a, c->b));
  return 0;
}

static int do_exp_out(void *p) {
  op_ctx *c = p;
  CT_DO("ct_exp_out", ct_exp_out(c->c, c->a));
  return 0;
}

static int do_host_add(void *p) {
  op_ctx *c = p;
  ref_host_add(c->ha, c->hb, c->hc, c->n);
  return 0;
}

static int do_host_mul(void *p) {
  op_ctx *c = p;
  ref_host_mul(c->ha, c->hb, c->hc, c->n);
  return 0;
}

static int do_host_exp(void *p) {
  op_ctx *c = p;
  ref_host_exp(c->ha, c->hc, c->n);
  return 0;
}

/* op is "add", "mul" or "exp", through the _out form (no allocation, as the one-line kernel).
 * Counts the bytes every element moves: 3 arrays for binary ops, 2 for exp. */
static void elementwise_one(const bench_opts *o, ct_device *d, clref *r, const char *op, size_t n) {
  bool unary = strcmp(op, "exp") == 0, add = strcmp(op, "add") == 0;
  double gb = (unary ? 2.0 : 3.0) * (double)n * sizeof(float) / 1e9;
  char sz[32], cl_name[16], host_name[16];
  size_str(sz, sizeof sz, (int64_t)n);
  bench_fig f;
  bench_fig_init(&f, op, (int64_t)n, sz, "f32", "GB/s");
  op_ctx c = {.d = d, .n = n};
  int64_t shape[1] = {(int64_t)n};
  ct_status st;
  bench_progress(o, "%s %s", op, sz);
  c.ha = host_array(n, 31, unary ? -4.0f : -1.0f, unary ? 4.0f : 1.0f);
  c.hb = unary ? NULL : host_array(n, 32, -1.0f, 1.0f);
  c.hc = malloc(n * sizeof(float));
  if (!c.ha || (!unary && !c.hb) || !c.hc) {
    bench_fail("out of host memory (3 x %zu floats)", n);
    emit_failed(o, &f);
    goto done;
  }
  if ((st = tensor_from(&c.a, d, 1, shape, c.ha)) != CT_OK ||
      (!unary && (st = tensor_from(&c.b, d, 1, shape, c.hb)) != CT_OK) ||
      (st = ct_empty(&c.c, d, CT_F32, 1, shape)) != CT_OK) {
    bench_ct_fail("creating the operands", st);
    emit_failed(o, &f);
    goto done;
  }
  snprintf(cl_name, sizeof cl_name, "cl_%s", op);
  snprintf(host_name, sizeof host_name, "host_%s", op);
  ref_plan plans[2] = {{cl_name, op, n, NULL, NULL},
                       {host_name, NULL, 0, unary ? do_host_exp : add ? do_host_add : do_host_mul, &c}};
  measure_with_refs(o, r, &f, unary ? do_exp_out : add ? do_add_out : do_mul_out, sync_dev, &c, 10000, gb, plans, 2);
  bench_emit(o, &f);
done:
  ct_release(c.a);
  ct_release(c.b);
  ct_release(c.c);
  free(c.ha);
  free(c.hb);
  free(c.hc);
  ct_empty_cache(d);
}

/* Elementwise math functions through their _out forms (the per-op kernels, which call the same
 * functions as fused ones), against one pass of the one-line OpenCL exp kernel over the same
 * data: on PoCL a function that does not vectorize costs 10-100x that (docs/PERFORMANCE.md,
 * "Elementwise"). GB/s count the 2 arrays every element moves. */
static ct_status (*math_fn)(ct_tensor *, const ct_tensor *);
static const char *math_name;

static int do_math_out(void *p) {
  op_ctx *c = p;
  CT_DO(math_name, math_fn(c->c, c->a));
  return 0;
}

static void math_one(const bench_opts *o, ct_device *d, clref *r, const char *op,
                     ct_status (*fn)(ct_tensor *, const ct_tensor *), size_t n) {
  char name[32], sz[32];
  snprintf(name, sizeof name, "math.%s", op);
  size_str(sz, sizeof sz, (int64_t)n);
  bench_fig f;
  bench_fig_init(&f, name, (int64_t)n, sz, "f32", "GB/s");
  op_ctx c = {.d = d, .n = n};
  int64_t shape[1] = {(int64_t)n};
  ct_status st;
  bench_progress(o, "%s %s", name, sz);
  /* (0.01, 4): inside every function's domain (log's, log1p's), tails and middles alike. */
  c.ha = host_array(n, 33, 0.01f, 4.0f);
  if (!c.ha) {
    bench_fail("out of host memory (%zu floats)", n);
    emit_failed(o, &f);
    return;
  }
  if ((st = tensor_from(&c.a, d, 1, shape, c.ha)) != CT_OK || (st = ct_empty(&c.c, d, CT_F32, 1, shape)) != CT_OK) {
    bench_ct_fail("creating the operands", st);
    emit_failed(o, &f);
  } else {
    math_fn = fn;
    math_name = name;
    ref_plan plans[1] = {{"cl_exp", "exp", n, NULL, NULL}};
    measure_with_refs(o, r, &f, do_math_out, sync_dev, &c, 1000, 2.0 * (double)n * sizeof(float) / 1e9, plans, 1);
    bench_emit(o, &f);
  }
  ct_release(c.a);
  ct_release(c.c);
  free(c.ha);
  ct_empty_cache(d);
}

void bench_group_elementwise(const bench_opts *o, ct_device *d, clref *r) {
  const int full[] = {16, 18, 20, 22, 24, 25, 26}, quick[] = {16, 20, 22};
  const int *lg = o->quick ? quick : full;
  int ns = o->quick ? 3 : 7;
  const char *ops[] = {"add", "mul"};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < ns; i++) elementwise_one(o, d, r, ops[k], (size_t)1 << lg[i]);
  const int efull[] = {20, 25}, equick[] = {20};
  for (int i = 0; i < (o->quick ? 1 : 2); i++)
    elementwise_one(o, d, r, "exp", (size_t)1 << (o->quick ? equick : efull)[i]);
  static const struct {
    const char *name;
    ct_status (*fn)(ct_tensor *, const ct_tensor *);
  } math[] = {{"tanh", ct_tanh_out},   {"gelu", ct_gelu_out},   {"erf", ct_erf_out},       {"log", ct_log_out},
              {"log1p", ct_log1p_out}, {"expm1", ct_expm1_out}, {"softplus", ct_softplus_out},
              {"sigmoid", ct_sigmoid_out}, {"sin", ct_sin_out}};
  for (size_t k = 0; k < (o->quick ? 2 : sizeof math / sizeof math[0]); k++)
    math_one(o, d, r, math[k].name, math[k].fn, (size_t)1 << 22);
}

/* ---------------------------------------------------------------- reductions */

static int do_sum(void *p) {
  op_ctx *c = p;
  ct_tensor *out = NULL;
  ct_status st = ct_sum(&out, c->a, 0, NULL, false);
  if (st == CT_OK) st = ct_to_host(out, &c->result, sizeof c->result);
  ct_release(out);
  return st == CT_OK ? 0 : bench_ct_fail("ct_sum + ct_to_host", st);
}

static int do_max(void *p) {
  op_ctx *c = p;
  ct_tensor *out = NULL;
  ct_status st = ct_max(&out, c->a, 0, NULL, false);
  if (st == CT_OK) st = ct_to_host(out, &c->result, sizeof c->result);
  ct_release(out);
  return st == CT_OK ? 0 : bench_ct_fail("ct_max + ct_to_host", st);
}

static int do_host_sum(void *p) {
  op_ctx *c = p;
  c->result = ref_host_sum(c->ha, c->n);
  return 0;
}

static int do_host_max(void *p) {
  op_ctx *c = p;
  c->result = ref_host_max(c->ha, c->n);
  return 0;
}

/* The result is on the host when a call returns (the scalar is read back), for ours and for
 * both references alike. */
static void reduce_one(const bench_opts *o, ct_device *d, clref *r, const char *op, size_t n) {
  bool is_max = strcmp(op, "max") == 0;
  double gb = (double)n * sizeof(float) / 1e9;
  char sz[32];
  size_str(sz, sizeof sz, (int64_t)n);
  bench_fig f;
  bench_fig_init(&f, op, (int64_t)n, sz, "f32", "GB/s");
  op_ctx c = {.d = d, .n = n};
  int64_t shape[1] = {(int64_t)n};
  ct_status st;
  bench_progress(o, "%s %s", op, sz);
  if (!(c.ha = host_array(n, 41, -1.0f, 1.0f))) {
    bench_fail("out of host memory (%zu floats)", n);
    emit_failed(o, &f);
    return;
  }
  if ((st = tensor_from(&c.a, d, 1, shape, c.ha)) != CT_OK) {
    bench_ct_fail("ct_from_host", st);
    emit_failed(o, &f);
    goto done;
  }
  ref_plan plans[2] = {{is_max ? "cl_max" : "cl_sum", op, n, NULL, NULL},
                       {is_max ? "host_max" : "host_sum", NULL, 0, is_max ? do_host_max : do_host_sum, &c}};
  measure_with_refs(o, r, &f, is_max ? do_max : do_sum, sync_dev, &c, 10000, gb, plans, 2);
  bench_emit(o, &f);
done:
  ct_release(c.a);
  free(c.ha);
  ct_empty_cache(d);
}

void bench_group_reduce(const bench_opts *o, ct_device *d, clref *r) {
  const int full[] = {16, 20, 22, 25}, quick[] = {20, 22};
  const int *lg = o->quick ? quick : full;
  int ns = o->quick ? 2 : 4;
  for (int i = 0; i < ns; i++) reduce_one(o, d, r, "sum", (size_t)1 << lg[i]);
  for (int i = 0; i < ns; i++) reduce_one(o, d, r, "max", (size_t)1 << lg[i]);
}

/* ---------------------------------------------------------------- softmax */

static int do_softmax(void *p) {
  op_ctx *c = p;
  ct_tensor *y = NULL;
  ct_status st = ct_softmax(&y, c->a, 1);
  ct_release(y);
  return st == CT_OK ? 0 : bench_ct_fail("ct_softmax", st);
}

static int do_host_softmax(void *p) {
  op_ctx *c = p;
  ref_host_softmax(c->ha, c->hc, c->rows, c->cols);
  return 0;
}

static void softmax_one(const bench_opts *o, ct_device *d, size_t rows, size_t cols) {
  char shape_s[64];
  snprintf(shape_s, sizeof shape_s, "%zux%zu", rows, cols);
  bench_fig f;
  bench_fig_init(&f, "softmax", (int64_t)rows, shape_s, "f32", "rows/s");
  op_ctx c = {.d = d, .rows = rows, .cols = cols};
  int64_t shape[2] = {(int64_t)rows, (int64_t)cols};
  ct_status st;
  bench_progress(o, "softmax %s", shape_s);
  c.ha = host_array(rows * cols, 51, -4.0f, 4.0f);
  c.hc = malloc(rows * cols * sizeof(float));
  if (!c.ha || !c.hc) {
    bench_fail("out of host memory (2 x %zu floats)", rows * cols);
    emit_failed(o, &f);
    goto done;
  }
  if ((st = tensor_from(&c.a, d, 2, shape, c.ha)) != CT_OK) {
    bench_ct_fail("ct_from_host", st);
    emit_failed(o, &f);
    goto done;
  }
  ref_plan plan = {"host_softmax", NULL, 0, do_host_softmax, &c};
  measure_with_refs(o, NULL, &f, do_softmax, sync_dev, &c, 10000, (double)rows, &plan, 1);
  bench_emit(o, &f);
done:
  ct_release(c.a);
  free(c.ha);
  free(c.hc);
  ct_empty_cache(d);
}

void bench_group_softmax(const bench_opts *o, ct_device *d) {
  if (o->quick) {
    softmax_one(o, d, 1024, 1024);
    return;
  }
  softmax_one(o, d, 16384, 128);
  softmax_one(o, d, 4096, 1024);
  softmax_one(o, d, 256, 16384);
}

/* ---------------------------------------------------------------- chain of small ops */

#define CHAIN_OPS 1000
#define CHAIN_N 1024

/* A dependent chain without allocation: y = x + b, x = y + b, ... then one synchronize. */
static int do_chain_out(void *p) {
  op_ctx *c = p;
  ct_tensor *x = c->a, *y = c->c;
  for (int i = 0; i < c->ops; i++) {
    CT_DO("ct_add_out", ct_add_out(y, x, c->b));
    ct_tensor *t = x;
    x = y;
    y = t;
  }
  return sync_dev(c);
}

/* The same chain as users write it first: every op allocates its result (from the cache). */
static int do_chain_alloc(void *p) {
  op_ctx *c = p;
  ct_tensor *x = ct_retain(c->a);
  for (int i = 0; i < c->ops; i++) {
    ct_tensor *y = NULL;
    ct_status st = ct_add(&y, x, c->b);
    ct_release(x);
    if (st != CT_OK) return bench_ct_fail("ct_add", st);
    x = y;
  }
  ct_release(x);
  return sync_dev(c);
}

void bench_group_chain(const bench_opts *o, ct_device *d, clref *r) {
  char shape_s[32];
  snprintf(shape_s, sizeof shape_s, "%d x %d", CHAIN_OPS, CHAIN_N);
  bench_fig f, falloc, ref;
  bench_fig_init(&f, "add_chain", CHAIN_N, shape_s, "f32", "us");
  bench_fig_init(&falloc, "add_chain_alloc", CHAIN_N, shape_s, "f32", "us");
  bench_fig_init(&ref, "cl_launch", CHAIN_N, shape_s, "f32", "us");
  op_ctx c = {.d = d, .ops = CHAIN_OPS};
  int64_t shape[1] = {CHAIN_N};
  float h[CHAIN_N];
  ct_status st;
  bench_progress(o, "chain of %d adds", CHAIN_OPS);
  bench_fill(h, CHAIN_N, -1e-3f, 1e-3f, 61);
  if ((st = tensor_from(&c.a, d, 1, shape, h)) != CT_OK || (st = tensor_from(&c.b, d, 1, shape, h)) != CT_OK ||
      (st = ct_empty(&c.c, d, CT_F32, 1, shape)) != CT_OK) {
    bench_ct_fail("creating the operands", st);
    emit_failed(o, &f);
    emit_failed(o, &falloc);
    goto done;
  }
  clref_job *job = clref_job_new(o, r, "launch", CHAIN_OPS);
  if (r && !job) fprintf(stderr, "cltensor-bench: reference cl_launch: %s\n", bench_error());
  /* A call is a whole chain; the figures are per op. */
  bench_item items[3] = {{&f, do_chain_out, NULL, &c, 1, 1e6 / CHAIN_OPS, false},
                         {&falloc, do_chain_alloc, NULL, &c, 1, 1e6 / CHAIN_OPS, false},
                         {&ref, clref_job_run, NULL, job, 1, 1e6 / CHAIN_OPS, job == NULL}};
  bench_measure_set(o, items, 3);
  clref_job_free(job);
  if (job && !ref.error[0]) {
    add_ref(&f, &ref);
    bench_fig_add_ref(&falloc, &ref);
  }
  bench_emit(o, &f);
  bench_emit(o, &falloc);
done:
  ct_release(c.a);
  ct_release(c.b);
  ct_release(c.c);
}

/* ---------------------------------------------------------------- MLP forward */

#define MLP_BATCH 256
#define MLP_WIDTH 1024

static int do_mlp(void *p) {
  op_ctx *c = p;
  ct_tensor *h = ct_retain(c->a);
  for (int l = 0; l < 3; l++) {
    ct_tensor *lin = NULL, *act = NULL;
    ct_status st = ct_linear(&lin, h, c->w[l], c->bias[l]);
    if (st == CT_OK) st = ct_relu(&act, lin);
    ct_release(lin);
    ct_release(h);
    if (st != CT_OK) return bench_ct_fail(lin ? "ct_relu" : "ct_linear", st);
    h = act;
  }
  ct_release(h);
  return sync_dev(c);
}

static int do_host_mlp(void *p) {
  op_ctx *c = p;
  const float *in = c->ha;
  float *bufs[2] = {c->hb, c->hc};
  for (int l = 0; l < 3; l++) {
    if (!ref_host_linear_relu(in, c->hw[l], c->hbias[l], bufs[l % 2], MLP_BATCH, MLP_WIDTH, MLP_WIDTH))
      return bench_fail("not built with CBLAS");
    in = bufs[l % 2];
  }
  return 0;
}

void bench_group_mlp(const bench_opts *o, ct_device *d) {
  char shape_s[64];
  snprintf(shape_s, sizeof shape_s, "%dx%d, 3 layers", MLP_BATCH, MLP_WIDTH);
  bench_fig f;
  bench_fig_init(&f, "mlp_forward", MLP_BATCH, shape_s, "f32", "ms");
  op_ctx c = {.d = d};
  int64_t xs[2] = {MLP_BATCH, MLP_WIDTH}, ws[2] = {MLP_WIDTH, MLP_WIDTH}, bs[1] = {MLP_WIDTH};
  ct_status st = CT_OK;
  bench_progress(o, "MLP forward");
  c.ha = host_array((size_t)MLP_BATCH * MLP_WIDTH, 71, -1.0f, 1.0f);
  c.hb = malloc((size_t)MLP_BATCH * MLP_WIDTH * sizeof(float));
  c.hc = malloc((size_t)MLP_BATCH * MLP_WIDTH * sizeof(float));
  bool host_ok = c.ha && c.hb && c.hc;
  for (int l = 0; l < 3; l++) {
    /* Weights scaled as a default initialisation would be (about 1/sqrt(width)), so the
     * activations keep their magnitude through the layers. */
    c.hw[l] = host_array((size_t)MLP_WIDTH * MLP_WIDTH, 72 + l, -0.03f, 0.03f);
    c.hbias[l] = host_array(MLP_WIDTH, 75 + l, -0.1f, 0.1f);
    host_ok = host_ok && c.hw[l] && c.hbias[l];
  }
  if (!host_ok) {
    bench_fail("out of host memory");
    emit_failed(o, &f);
    goto done;
  }
  st = tensor_from(&c.a, d, 2, xs, c.ha);
  for (int l = 0; l < 3 && st == CT_OK; l++) {
    st = tensor_from(&c.w[l], d, 2, ws, c.hw[l]);
    if (st == CT_OK) st = tensor_from(&c.bias[l], d, 1, bs, c.hbias[l]);
  }
  if (st != CT_OK) {
    bench_ct_fail("creating the operands", st);
    emit_failed(o, &f);
    goto done;
  }
  ref_plan plan = {"host_mlp", NULL, 0, do_host_mlp, &c};
  measure_with_refs(o, NULL, &f, do_mlp, NULL, &c, 1000, 1e3, &plan, bench_have_cblas() ? 1 : 0);
  if (!f.error[0]) bench_gemm_note(d, f.note, sizeof f.note);
  bench_emit(o, &f);
done:
  ct_release(c.a);
  for (int l = 0; l < 3; l++) {
    ct_release(c.w[l]);
    ct_release(c.bias[l]);
    free(c.hw[l]);
    free(c.hbias[l]);
  }
  free(c.ha);
  free(c.hb);
  free(c.hc);
  ct_empty_cache(d);
}
