/* The nn group: convolution figures, each beside PyTorch's CPU time for the same conv measured
 * in this sitting (tools/bench/torch_conv.py, run before and after ours when $CLTENSOR_BENCH_PYTHON names a Python
 * with PyTorch) and beside the floor of the library's own route: the same GEMM work (one
 * [Cout, Cin k k] x [Cin k k, OH OW] product per image) through ct_matmul on a ready column
 * matrix. More figures (the models' forwards) go in the table or beside bench_group_nn(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct conv_case {
  const char *name;          /* figure name */
  int n, cin, h, w, cout, k, pad, stride;
} conv_case;

/* The ResNet layer first: batch 32, 64 -> 64 channels, 56 x 56, 3 x 3, padding 1. */
static const conv_case k_convs[] = {
    {"conv2d", 32, 64, 56, 56, 64, 3, 1, 1},
};
static const conv_case k_convs_quick[] = {
    {"conv2d", 4, 64, 56, 56, 64, 3, 1, 1},
};

typedef struct conv_ctx {
  ct_device *d;
  ct_tensor *x, *w, *b, *wm, *col;
  int stride[2], pad[2];
} conv_ctx;

static int sync_conv(void *p) {
  conv_ctx *c = p;
  ct_status st = ct_device_synchronize(c->d);
  return st == CT_OK ? 0 : bench_ct_fail("ct_device_synchronize", st);
}

static int do_conv(void *p) {
  conv_ctx *c = p;
  ct_tensor *y = NULL;
  ct_status st = ct_conv2d(&y, c->x, c->w, c->b, c->stride, c->pad, NULL, 1);
  ct_release(y);
  return st == CT_OK ? 0 : bench_ct_fail("ct_conv2d", st);
}

/* The GEMM work alone: [cout, K] @ [n, K, P] (the weight broadcast over the batch). */
static int do_gemm(void *p) {
  conv_ctx *c = p;
  ct_tensor *y = NULL;
  ct_status st = ct_matmul(&y, c->wm, c->col);
  ct_release(y);
  return st == CT_OK ? 0 : bench_ct_fail("ct_matmul", st);
}

/* PyTorch's time for the same conv (ms), or a negative value with a note when not measured. */
static double torch_conv_ms(const conv_case *cc, char *note, size_t nn) {
  const char *py = getenv("CLTENSOR_BENCH_PYTHON");
  if (!py || !*py) {
    snprintf(note, nn, "$CLTENSOR_BENCH_PYTHON unset: no PyTorch reference");
    return -1;
  }
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' '%s' --shape %d,%d,%d,%d --cout %d --k %d --pad %d --stride %d 2>&1", py,
           CT_BENCH_TORCH_CONV, cc->n, cc->cin, cc->h, cc->w, cc->cout, cc->k, cc->pad, cc->stride);
  FILE *f = popen(cmd, "r");
  if (!f) {
    snprintf(note, nn, "could not run %s", py);
    return -1;
  }
  char line[512];
  double ms = -1;
  while (fgets(line, sizeof line, f)) {
    const char *m = strstr(line, "median_ms=");
    if (strncmp(line, "torch_conv2d ", 13) == 0 && m) ms = atof(m + 10);
  }
  if (pclose(f) != 0 || ms <= 0) {
    snprintf(note, nn, "torch_conv.py failed under %s", py);
    return -1;
  }
  return ms;
}

static void conv_figure(const bench_opts *o, ct_device *d, clref *r, const conv_case *cc) {
  int oh = (cc->h + 2 * cc->pad - cc->k) / cc->stride + 1, ow = (cc->w + 2 * cc->pad - cc->k) / cc->stride + 1;
  int64_t kk = (int64_t)cc->cin * cc->k * cc->k, pp = (int64_t)oh * ow;
  double gflop = 2.0 * cc->n * cc->cout * pp * kk / 1e9;
  char shape_s[64];
  snprintf(shape_s, sizeof shape_s, "%dx%dx%dx%d k%d p%d -> %d", cc->n, cc->cin, cc->h, cc->w, cc->k, cc->pad,
           cc->cout);
  bench_fig f, gemm;
  bench_fig_init(&f, cc->name, cc->n, shape_s, "f32", "GFLOP/s");
  bench_fig_init(&gemm, "conv_gemm_only", cc->n, shape_s, "f32", "GFLOP/s");
  bench_progress(o, "%s %s", cc->name, shape_s);
  conv_ctx c = {.d = d, .stride = {cc->stride, cc->stride}, .pad = {cc->pad, cc->pad}};
  int64_t xs[4] = {cc->n, cc->cin, cc->h, cc->w}, ws[4] = {cc->cout, cc->cin, cc->k, cc->k};
  int64_t bs[1] = {cc->cout}, wms[2] = {cc->cout, kk}, cs[3] = {cc->n, kk, pp};
  ct_tensor *xr = NULL, *wr = NULL;
  ct_status st = ct_rand_seeded(&xr, d, CT_F32, 4, xs, 1, 0);
  if (st == CT_OK) st = ct_rand_seeded(&wr, d, CT_F32, 4, ws, 2, 0);
  if (st == CT_OK) st = ct_sub_scalar(&c.x, xr, 0.5);
  if (st == CT_OK) st = ct_mul_scalar(&c.w, wr, 0.05);
  if (st == CT_OK) st = ct_full(&c.b, d, CT_F32, 1, bs, 0.01);
  if (st == CT_OK) st = ct_full(&c.wm, d, CT_F32, 2, wms, 0.01);
  if (st == CT_OK) st = ct_full(&c.col, d, CT_F32, 3, cs, 0.5);
  ct_release(xr);
  ct_release(wr);
  if (st != CT_OK) {
    bench_ct_fail("creating the operands", st);
    bench_fig_fail(&f, false, bench_error());
    bench_emit(o, &f);
    goto done;
  }
  /* PyTorch runs in a process of its own (its own threads) right before and right after ours;
   * its figure is the two medians' mean, so a change of load during the sitting weighs on
   * both sides alike. */
  char why[128] = "";
  double before = torch_conv_ms(cc, why, sizeof why);
  /* The one-line direct convolution (stride 1 only) on the same device: what the device does
   * with the plainest kernel. */
  const int dims[7] = {cc->n, cc->cin, cc->h, cc->w, cc->cout, cc->k, cc->pad};
  bench_fig direct;
  bench_fig_init(&direct, "cl_conv_direct", cc->n, shape_s, "f32", "GFLOP/s");
  clref_job *job = cc->stride == 1 ? clref_job_conv(o, r, dims) : NULL;
  bench_item items[3] = {{&f, do_conv, sync_conv, &c, 100, gflop, false},
                         {&gemm, do_gemm, sync_conv, &c, 100, gflop, false},
                         {&direct, clref_job_run, clref_job_sync, job, 100, gflop, false}};
  bench_measure_set(o, items, job ? 3 : 2);
  bench_gemm_note(d, f.note, sizeof f.note);
  if (!gemm.error[0]) bench_fig_add_ref(&f, &gemm);
  if (job && !direct.error[0]) bench_fig_add_ref(&f, &direct);
  clref_job_free(job);
  double after = before > 0 ? torch_conv_ms(cc, why, sizeof why) : -1;
  if (before > 0 && after > 0) {
    bench_fig ref;
    bench_fig_init(&ref, "torch_conv2d", cc->n, shape_s, "f32", "GFLOP/s");
    bench_samples s = {.n = 2};
    s.s[0] = before / 1e3;
    s.s[1] = after / 1e3;
    bench_fig_set(&ref, &s, gflop);
    bench_fig_add_ref(&f, &ref);
  } else {
    fprintf(stderr, "cltensor-bench: %s\n", why);
  }
  bench_emit(o, &f);
done:
  ct_release(c.x);
  ct_release(c.w);
  ct_release(c.b);
  ct_release(c.wm);
  ct_release(c.col);
  ct_empty_cache(d);
}

void bench_group_nn(const bench_opts *o, ct_device *d, clref *r) {
  const conv_case *cs = o->quick ? k_convs_quick : k_convs;
  size_t n = o->quick ? sizeof k_convs_quick / sizeof k_convs_quick[0] : sizeof k_convs / sizeof k_convs[0];
  for (size_t i = 0; i < n; i++) conv_figure(o, d, r, &cs[i]);
}
