/* The index group: index_select, gather, cumsum and sort on 2^24 f32 elements (2^20 with
 * --quick), each timed in turns with a device copy of the same bytes (ct_copy of a contiguous
 * tensor, which is one clEnqueueCopyBuffer) as the reference, so that the ratio is the op's
 * bandwidth as a fraction of a copy's on this device in this sitting. Rates count the bytes each
 * moves: the result's twice (read and written, as the copy moves them), plus gather's index
 * (gather.result_bytes leaves it out); sort is reported in elements/s next to the same copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct index_ctx {
  ct_device *d;
  ct_tensor *x, *idx, *copy_src, *copy_dst;
  int what; /* W_* */
  int dim;
} index_ctx;

enum { W_INDEX_SELECT, W_GATHER, W_CUMSUM, W_SORT };

static int index_sync(void *p) {
  index_ctx *c = p;
  ct_status st = ct_device_synchronize(c->d);
  return st == CT_OK ? 0 : bench_ct_fail("ct_device_synchronize", st);
}

static int index_run(void *p) {
  index_ctx *c = p;
  ct_tensor *y = NULL, *yi = NULL;
  ct_status st;
  const char *name;
  switch (c->what) {
    case W_INDEX_SELECT: name = "ct_index_select"; st = ct_index_select(&y, c->x, c->dim, c->idx); break;
    case W_GATHER: name = "ct_gather"; st = ct_gather(&y, c->x, c->dim, c->idx); break;
    case W_CUMSUM: name = "ct_cumsum"; st = ct_cumsum(&y, c->x, c->dim); break;
    default: name = "ct_sort"; st = ct_sort(&y, &yi, c->x, c->dim, false); break;
  }
  ct_release(y);
  ct_release(yi);
  return st == CT_OK ? 0 : bench_ct_fail(name, st);
}

static int copy_run(void *p) {
  index_ctx *c = p;
  ct_status st = ct_copy(c->copy_dst, c->copy_src);
  return st == CT_OK ? 0 : bench_ct_fail("ct_copy", st);
}

/* Random i64 values in [0, bound). */
static ct_status random_index(ct_tensor **out, ct_device *d, int ndim, const int64_t *shape, int64_t bound,
                              uint32_t seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  int64_t *v = malloc((size_t)n * sizeof *v);
  if (!v) return CT_ERR_OUT_OF_MEMORY;
  uint64_t s = seed * 0x9e3779b97f4a7c15u + 1;
  for (int64_t i = 0; i < n; i++) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    v[i] = (int64_t)((s * 0x2545f4914f6cdd1dull) % (uint64_t)bound);
  }
  ct_status st = ct_from_host(out, d, CT_I64, ndim, shape, v);
  free(v);
  return st;
}

static void index_one(const bench_opts *o, ct_device *d, clref *r, int what, const char *name, int ndim, const int64_t *shape,
                      int dim) {
  char shape_s[64];
  if (ndim == 1) snprintf(shape_s, sizeof shape_s, "%lld dim %d", (long long)shape[0], dim);
  else snprintf(shape_s, sizeof shape_s, "%lldx%lld dim %d", (long long)shape[0], (long long)shape[1], dim);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  bool sort = what == W_SORT;
  bench_fig f, ref;
  bench_fig_init(&f, name, n, shape_s, "f32", sort ? "elem/s" : "GB/s");
  bench_fig_init(&ref, "copy", n, shape_s, "f32", sort ? "elem/s" : "GB/s");
  bench_progress(o, "%s %s", name, shape_s);
  index_ctx c = {.d = d, .what = what, .dim = dim};
  float *h = malloc((size_t)n * sizeof *h);
  ct_status st = h ? CT_OK : CT_ERR_OUT_OF_MEMORY;
  if (h) bench_fill(h, (size_t)n, -1.0f, 1.0f, 61);
  if (st == CT_OK) st = ct_from_host(&c.x, d, CT_F32, ndim, shape, h);
  if (st == CT_OK && what == W_INDEX_SELECT) st = random_index(&c.idx, d, 1, &shape[dim], shape[dim], 62);
  if (st == CT_OK && what == W_GATHER) st = random_index(&c.idx, d, ndim, shape, shape[dim], 63);
  if (st == CT_OK) st = ct_from_host(&c.copy_src, d, CT_F32, ndim, shape, h);
  if (st == CT_OK) st = ct_empty(&c.copy_dst, d, CT_F32, ndim, shape);
  free(h);
  if (st != CT_OK) {
    bench_ct_fail("setup", st);
    bench_fig_fail(&f, false, bench_error());
    bench_emit(o, &f);
  } else {
    double work = sort ? (double)n : 2.0 * (double)n * sizeof(float) / 1e9;
    /* gather also reads an i64 index element per result element: its rate counts the bytes it
     * moves (index, x's elements, result), the copy's the bytes it moves, so that the ratio
     * compares bandwidths as the target does; "gather.result_bytes" repeats the figure
     * counting only the result's bytes twice (as for the other ops, the index ignored). */
    double op_work = what == W_GATHER ? (double)n * (sizeof(int64_t) + 2 * sizeof(float)) / 1e9 : work;
    /* Beside the copy command, the one-line copy kernel (sort: in elements/s alike). */
    bench_fig clr;
    bench_fig_init(&clr, "cl_copy", n, shape_s, "f32", sort ? "elem/s" : "GB/s");
    clref_job *job = clref_job_new(o, r, "copy", (size_t)n);
    bench_item items[3] = {{&f, index_run, index_sync, &c, 1000, op_work, false},
                           {&ref, copy_run, index_sync, &c, 1000, work, false},
                           {&clr, clref_job_run, clref_job_sync, job, 1000, work, false}};
    bench_measure_set(o, items, job ? 3 : 2);
    if (!ref.error[0]) bench_fig_add_ref(&f, &ref);
    if (job && !clr.error[0]) bench_fig_add_ref(&f, &clr);
    clref_job_free(job);
    if (what == W_GATHER) snprintf(f.note, sizeof f.note, "bytes moved: index, x and result");
    bench_emit(o, &f);
    if (what == W_GATHER && !f.error[0]) {
      bench_fig r = f;
      double k = work / op_work;
      snprintf(r.name, sizeof r.name, "gather.result_bytes");
      snprintf(r.note, sizeof r.note, "the result's bytes only (index not counted)");
      r.median *= k;
      r.min *= k;
      r.max *= k;
      for (int i = 0; i < r.nsamples; i++) r.samples[i] *= k;
      bench_emit(o, &r);
    }
  }
  ct_release(c.x);
  ct_release(c.idx);
  ct_release(c.copy_src);
  ct_release(c.copy_dst);
  ct_empty_cache(d);
}

void bench_group_index(const bench_opts *o, ct_device *d, clref *r) {
  /* --quick (CI's smoke test) measures 2^20 elements: the 2^24 sort alone takes seconds. */
  const int64_t full[2] = {4096, 4096}, quick[2] = {1024, 1024}, line = (int64_t)1 << 24;
  const int64_t *sq = o->quick ? quick : full;
  index_one(o, d, r, W_INDEX_SELECT, "index_select", 2, sq, 0);
  index_one(o, d, r, W_GATHER, "gather", 2, sq, 1);
  index_one(o, d, r, W_CUMSUM, "cumsum", 2, sq, 0);
  index_one(o, d, r, W_CUMSUM, "cumsum", 2, sq, 1);
  index_one(o, d, r, W_SORT, "sort", 2, sq, 1);
  if (!o->quick) {
    index_one(o, d, r, W_CUMSUM, "cumsum", 1, &line, 0);
    index_one(o, d, r, W_SORT, "sort", 1, &line, 0);
  }
}
