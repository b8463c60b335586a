/* The shape group: ct_cat on 2^24 f32 elements, against a ct_copy of the same bytes (issue 14:
 * at least 0.5x the bandwidth of a copy). Both move the same bytes (each element read once and
 * written once), so GB/s counts 2 * 4 bytes per element for both. Two forms: along the last dim
 * (strided slices of the result: the strided copy kernel) and along dim 0 (contiguous slices:
 * buffer copies). And ct_pad's constant pad of a ResNet-style activation (no target; GB/s
 * counts the input read and the output written), against a copy of the input. */
#include <stdio.h>
#include <string.h>

#include "bench.h"

typedef struct shape_ctx {
  ct_device *d;
  ct_tensor *parts[2]; /* cat's inputs; parts[0] is pad's */
  int dim;
  ct_tensor *src, *dst; /* the reference copy */
} shape_ctx;

static int do_cat(void *p) {
  shape_ctx *c = p;
  ct_tensor *out = NULL;
  ct_status st = ct_cat(&out, c->parts, 2, c->dim);
  ct_release(out);
  return st == CT_OK ? 0 : bench_ct_fail("ct_cat", st);
}

static int do_pad(void *p) {
  shape_ctx *c = p;
  ct_tensor *out = NULL;
  const int64_t pad[4] = {1, 1, 1, 1};
  ct_status st = ct_pad(&out, c->parts[0], 4, pad, CT_PAD_CONSTANT, 0);
  ct_release(out);
  return st == CT_OK ? 0 : bench_ct_fail("ct_pad", st);
}

static int do_copy(void *p) {
  shape_ctx *c = p;
  ct_status st = ct_copy(c->dst, c->src);
  return st == CT_OK ? 0 : bench_ct_fail("ct_copy", st);
}

static int sync_dev(void *p) {
  shape_ctx *c = p;
  ct_status st = ct_device_synchronize(c->d);
  return st == CT_OK ? 0 : bench_ct_fail("ct_device_synchronize", st);
}

/* Measures fn (f, moving `work` GB per call) in turns with a ct_copy of n f32 elements (the
 * reference "copy", 2 * 4 * n bytes per call), once st (the inputs' creation) is CT_OK; emits
 * f and releases c's tensors. */
static void measure_against_copy(const bench_opts *o, clref *r, bench_fig *f, bench_fn fn, shape_ctx *c,
                                 ct_status st, int64_t n, double work) {
  int64_t flat[1] = {n};
  bench_fig ref, clr;
  bench_fig_init(&ref, "copy", f->size, f->shape, f->dtype, f->unit);
  bench_fig_init(&clr, "cl_copy", f->size, f->shape, f->dtype, f->unit);
  /* The one-line copy kernel beside the copy command: some implementations copy buffers faster
   * (or slower) than a kernel can. */
  clref_job *job = st == CT_OK ? clref_job_new(o, r, "copy", (size_t)n) : NULL;
  if (st == CT_OK) st = ct_ones(&c->src, c->d, CT_F32, 1, flat);
  if (st == CT_OK) st = ct_empty(&c->dst, c->d, CT_F32, 1, flat);
  if (st != CT_OK) {
    bench_ct_fail("creating the inputs", st);
    bench_fig_fail(f, false, bench_error());
  } else {
    double bytes = 2.0 * (double)n * sizeof(float) / 1e9;
    bench_item items[3] = {{f, fn, sync_dev, c, 1000, work, false},
                           {&ref, do_copy, sync_dev, c, 1000, bytes, false},
                           {&clr, clref_job_run, clref_job_sync, job, 1000, bytes, false}};
    bench_measure_set(o, items, job ? 3 : 2);
    if (!ref.error[0]) bench_fig_add_ref(f, &ref);
    if (job && !clr.error[0]) bench_fig_add_ref(f, &clr);
  }
  clref_job_free(job);
  bench_emit(o, f);
  for (int i = 0; i < 2; i++) ct_release(c->parts[i]);
  ct_release(c->src);
  ct_release(c->dst);
}

static void cat_one(const bench_opts *o, ct_device *d, clref *r, int lg, int dim) {
  int64_t n = (int64_t)1 << lg, rows = (int64_t)1 << (lg / 2), cols = n / rows;
  /* Each part is half of the result: [rows, cols/2] along dim 1, [rows/2, cols] along dim 0. */
  int64_t ps[2] = {dim ? rows : rows / 2, dim ? cols / 2 : cols};
  char name[40], sz[32];
  snprintf(name, sizeof name, "cat.dim%d", dim);
  snprintf(sz, sizeof sz, "2x[%lld,%lld]", (long long)ps[0], (long long)ps[1]);
  bench_fig f;
  bench_fig_init(&f, name, n, sz, "f32", "GB/s");
  shape_ctx c = {.d = d, .dim = dim};
  bench_progress(o, "%s %s", name, sz);
  ct_status st = ct_ones(&c.parts[0], d, CT_F32, 2, ps);
  if (st == CT_OK) st = ct_zeros(&c.parts[1], d, CT_F32, 2, ps);
  measure_against_copy(o, r, &f, do_cat, &c, st, n, 2.0 * (double)n * sizeof(float) / 1e9);
}

static void pad_one(const bench_opts *o, ct_device *d, clref *r) {
  int64_t s[4] = {o->quick ? 8 : 32, o->quick ? 16 : 64, 56, 56}, n = s[0] * s[1] * s[2] * s[3];
  int64_t nout = s[0] * s[1] * 58 * 58;
  char sz[48];
  snprintf(sz, sizeof sz, "[%lld,%lld,56,56]+1", (long long)s[0], (long long)s[1]);
  bench_fig f;
  bench_fig_init(&f, "pad.constant", n, sz, "f32", "GB/s");
  shape_ctx c = {.d = d};
  bench_progress(o, "pad %s", sz);
  ct_status st = ct_ones(&c.parts[0], d, CT_F32, 4, s);
  measure_against_copy(o, r, &f, do_pad, &c, st, n, (double)(n + nout) * sizeof(float) / 1e9);
}

void bench_group_shape(const bench_opts *o, ct_device *d, clref *r) {
  int lg = o->quick ? 20 : 24;
  cat_one(o, d, r, lg, 1);
  cat_one(o, d, r, lg, 0);
  pad_one(o, d, r);
}
