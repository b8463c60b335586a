/* The "autograd" group (issue #28): the backward engine's own cost, apart from the formulas'
 * kernels.
 *
 *   autograd.backward_wide  N products of one leaf x ([16] f32), y_i = x * c_i, all recorded
 *                           first, then summed left to right (s = y_0 + y_1, s = s + y_2, ...);
 *                           the figure is the time of ct_backward(s) alone, up to the leaf's
 *                           gradient on the host. Every add is recorded after every product, so
 *                           all N products are ready at once: the engine's ready set is N wide.
 *                           Before issue #28 each pop scanned that set (quadratic: about 21 s
 *                           at N = 32,000); a binary heap makes it N log N. The forward is
 *                           rebuilt (untimed) for each run: backward consumes the graph.
 *
 * N is 32,000 (4,000 with --quick). The gradient is checked against sum(c_i). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#define AG_WIDTH 16

/* Records the forward: *loss = sum over i of x * c_i (a [16] tensor), c_i = 1 + i % 7. */
static ct_status wide_forward(ct_tensor **loss, ct_tensor *x, int n) {
  *loss = NULL;
  ct_tensor **y = calloc((size_t)n, sizeof *y);
  if (!y) return CT_ERR_OUT_OF_MEMORY;
  ct_status st = CT_OK;
  for (int i = 0; i < n && st == CT_OK; i++) st = ct_mul_scalar(&y[i], x, 1.0 + i % 7);
  ct_tensor *s = NULL;
  if (st == CT_OK) s = ct_retain(y[0]);
  for (int i = 1; i < n && st == CT_OK; i++) {
    ct_tensor *t = NULL;
    st = ct_add(&t, s, y[i]);
    ct_release(s);
    s = t;
  }
  for (int i = 0; i < n; i++) ct_release(y[i]);
  free(y);
  if (st == CT_OK) st = ct_sum(loss, s, 0, NULL, false);
  ct_release(s);
  return st;
}

static void backward_wide_fig(const bench_opts *o, ct_device *d) {
  const int n = o->quick ? 4000 : 32000;
  char shape[64];
  snprintf(shape, sizeof shape, "%d products of [%d], summed", n, AG_WIDTH);
  bench_fig f;
  bench_fig_init(&f, "autograd.backward_wide", n, shape, "f32", "ms");
  bench_samples s = {0};
  double want = 0;
  for (int i = 0; i < n; i++) want += 1.0 + i % 7;
  ct_tensor *x = NULL;
  int64_t xs[1] = {AG_WIDTH};
  ct_status st = ct_full(&x, d, CT_F32, 1, xs, 0.5);
  if (st == CT_OK) st = ct_set_requires_grad(x, true);
  for (int r = 0; r <= o->runs && st == CT_OK; r++) { /* run 0 is the warm-up */
    bench_progress(o, "autograd.backward_wide: run %d of %d", r, o->runs);
    ct_tensor *loss = NULL, *g = NULL;
    float hg[AG_WIDTH];
    st = ct_grad_clear(x);
    if (st == CT_OK) st = wide_forward(&loss, x, n);
    if (st == CT_OK) st = ct_device_synchronize(d);
    double t0 = bench_now();
    if (st == CT_OK) st = ct_backward(loss, NULL);
    if (st == CT_OK) st = ct_grad(&g, x);
    if (st == CT_OK) st = ct_to_host(g, hg, sizeof hg);
    double t1 = bench_now();
    ct_release(g);
    ct_release(loss);
    if (st != CT_OK) break;
    if (fabs(hg[0] - want) > 1e-3 * want) {
      char msg[128];
      snprintf(msg, sizeof msg, "the gradient is %g, not %g", hg[0], want);
      bench_fig_fail(&f, false, msg);
      break;
    }
    if (r > 0) s.s[s.n++] = t1 - t0;
  }
  bench_progress_done(o);
  if (st != CT_OK) bench_fig_fail(&f, false, ct_last_error());
  else if (!f.error[0]) bench_fig_set(&f, &s, 1e3);
  bench_emit(o, &f);
  ct_release(x);
}

void bench_group_autograd(const bench_opts *o, ct_device *d) { backward_wide_fig(o, d); }
