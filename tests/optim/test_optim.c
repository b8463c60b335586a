/* Optimizers, gradient clipping, the gradient scaler and optimizer checkpoints
 * (include/cltensor/optim.h) against PyTorch's results in data/optim_ref.safetensors (made by
 * make_fixtures.py beside this file), plus checkpoint resumes, argument errors and an f16
 * smoke run.
 *
 * Tolerance. The kernels repeat torch.optim's operations one by one with the same f32
 * roundings (fused multiply-adds where PyTorch's CPU kernels use them), so SGD agrees with
 * PyTorch bit for bit. Adam's denominator takes a square root, which
 * PyTorch's CPU kernel computes up to 1 ulp off the correctly rounded value that OpenCL gives
 * here (measured: about 0.6% of values); that changes the update by 1 ulp of the update, and
 * over the few steps here the parameters by a few ulps of the update term at most. So each
 * value must be within 4 ulps of PyTorch's (2^-21 relative), which no wrong formula (a missed
 * bias correction, the wrong weight-decay form, lr applied to the wrong step) passes. (On
 * these fixtures Adam happens to agree bit for bit too.) Clipping: 2 ulps, for the order in
 * which the sums of squares are added. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ct_fixture.h"
#include "tensor/graph.h"

enum { K = 4 };

static ct_safetensors *fixture(ct_device *d) {
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/optim/data/optim_ref.safetensors", root ? root : ".");
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(ct_safetensors_load(&st, path, d));
  return st;
}

static float *host_f32(const ct_tensor *t) {
  size_t n = (size_t)ct_numel(t);
  float *h = calloc(n + 1, sizeof *h);
  ck_assert_ptr_nonnull(h);
  ck_assert_int_eq(ct_tensor_dtype(t), CT_F32);
  ck_assert_ct_ok(ct_to_host(t, h, n * sizeof *h));
  return h;
}

/* A new f32 tensor with t's values (a fresh copy through the host: no kernel program). */
static ct_tensor *copy_of(ct_device *d, const ct_tensor *t) {
  float *h = host_f32(t);
  ct_tensor *c = NULL;
  ck_assert_ct_ok(ct_from_host(&c, d, CT_F32, ct_tensor_ndim(t), ct_tensor_shape(t), h));
  free(h);
  return c;
}

/* A leaf parameter holding fixture tensor name. */
static ct_tensor *param(ct_device *d, const ct_safetensors *st, const char *name) {
  ct_tensor *f = ct_test_fx(st, "%s", name), *p = copy_of(d, f);
  ct_release(f);
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  return p;
}

/* Sets p's gradient to a copy of g (what ct_backward of sum(p * g) gives; set directly, so
 * these tests build no elementwise or reduction programs). NULL g: no gradient. */
static void set_grad(ct_device *d, ct_tensor *p, const ct_tensor *g) {
  ck_assert_ct_ok(ct_grad_clear(p));
  if (g) p->grad = copy_of(d, g);
}

/* |got - want| <= ulps * 2^-23 * max(|want|, 2^-10) elementwise (NaN only against NaN). */
static void assert_near(const ct_tensor *got, const ct_tensor *want, double ulps, const char *what) {
  ck_assert_int_eq(ct_numel(got), ct_numel(want));
  float *a = host_f32(got), *b = host_f32(want);
  for (int64_t i = 0; i < ct_numel(got); i++) {
    if (isnan(b[i])) {
      ck_assert_msg(isnan(a[i]), "%s[%lld]: %.9g, expected NaN", what, (long long)i, a[i]);
      continue;
    }
    double tol = ulps * ldexp(1, -23) * fmax(fabs(b[i]), ldexp(1, -10));
    ck_assert_msg(fabs((double)a[i] - b[i]) <= tol, "%s[%lld]: %.9g, PyTorch %.9g (diff %.3g > %.3g)", what,
                  (long long)i, a[i], b[i], fabs((double)a[i] - b[i]), tol);
  }
  free(a);
  free(b);
}

static void assert_bits_equal(const ct_tensor *a, const ct_tensor *b, const char *what) {
  ck_assert_int_eq(ct_numel(a), ct_numel(b));
  float *x = host_f32(a), *y = host_f32(b);
  ck_assert_msg(memcmp(x, y, sizeof(float) * (size_t)ct_numel(a)) == 0, "%s: not bit-identical", what);
  free(x);
  free(y);
}

/* The optimizers of the fixture's configurations. */
static ct_optimizer *make_opt(const char *cfg, ct_tensor **ps) {
  ct_optimizer *o = NULL;
  if (!strcmp(cfg, "sgd")) ck_assert_ct_ok(ct_sgd_new(&o, ps, 2, 0.1, 0, 0, false));
  else if (!strcmp(cfg, "sgd_wd")) ck_assert_ct_ok(ct_sgd_new(&o, ps, 2, 0.1, 0, 0.1, false));
  else if (!strcmp(cfg, "sgd_mom")) ck_assert_ct_ok(ct_sgd_new(&o, ps, 2, 0.1, 0.9, 0, false));
  else if (!strcmp(cfg, "sgd_nest")) ck_assert_ct_ok(ct_sgd_new(&o, ps, 2, 0.05, 0.9, 0.01, true));
  else if (!strcmp(cfg, "adam")) ck_assert_ct_ok(ct_adam_new(&o, ps, 2, 1e-2, 0.9, 0.999, 1e-8, 0, false));
  else if (!strcmp(cfg, "adam_wd")) ck_assert_ct_ok(ct_adam_new(&o, ps, 2, 1e-2, 0.9, 0.999, 1e-8, 0.1, false));
  else if (!strcmp(cfg, "adamw")) ck_assert_ct_ok(ct_adam_new(&o, ps, 2, 1e-2, 0.5, 0.99, 1e-6, 0.1, true));
  else if (!strcmp(cfg, "adam_sched")) ck_assert_ct_ok(ct_adam_new(&o, ps, 2, 1e-2, 0.9, 0.999, 1e-8, 0, false));
  ck_assert_ptr_nonnull(o);
  return o;
}

/* Steps from..to-1 of configuration cfg on ps, with the fixture's gradients (and the
 * adam_sched schedule: lr 3e-3 from step 2, parameter 1 without a gradient at step 2). */
static void run_steps(ct_device *d, const ct_safetensors *st, const char *cfg, ct_optimizer *o, ct_tensor **ps,
                      int from, int to) {
  bool sched = !strcmp(cfg, "adam_sched");
  for (int k = from; k < to; k++) {
    if (sched) ck_assert_ct_ok(ct_optimizer_set_lr(o, k < 2 ? 1e-2 : 3e-3));
    for (int i = 0; i < 2; i++) {
      ct_tensor *g = ct_test_fx(st, "g.%d.%d", k, i);
      set_grad(d, ps[i], sched && k == 2 && i == 1 ? NULL : g);
      ct_release(g);
    }
    ck_assert_ct_ok(ct_optimizer_step(o));
  }
}

static void check_config(const char *cfg, double ulps) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  ct_tensor *ps[2] = {param(d, st, "p.0"), param(d, st, "p.1")};
  ct_optimizer *o = make_opt(cfg, ps);
  for (int k = 0; k < K; k++) {
    unsigned v0 = ct__tensor_version(ps[0]);
    run_steps(d, st, cfg, o, ps, k, k + 1);
    ck_assert_uint_gt(ct__tensor_version(ps[0]), v0); /* the step is a write */
    for (int i = 0; i < 2; i++) {
      ct_tensor *want = ct_test_fx(st, "%s.%d.%d", cfg, k, i);
      char what[64];
      snprintf(what, sizeof what, "%s step %d param %d", cfg, k, i);
      assert_near(ps[i], want, ulps, what);
      ct_release(want);
    }
  }
  ct_optimizer_free(o);
  ct_release(ps[0]);
  ct_release(ps[1]);
  ct_safetensors_free(st);
}

/* SGD has no square root: bit for bit. */
START_TEST(sgd_matches_pytorch) {
  check_config("sgd", 0);
  check_config("sgd_wd", 0);
  check_config("sgd_mom", 0);
  check_config("sgd_nest", 0);
}
END_TEST

START_TEST(adam_matches_pytorch) {
  check_config("adam", 4);
  check_config("adam_wd", 4);
  check_config("adamw", 4);
}
END_TEST

/* lr changed mid-run (ct_optimizer_set_lr) and a parameter without a gradient skipped, its
 * state and step count untouched (its next step uses bias corrections of its own count). */
START_TEST(adam_lr_change_and_skipped_param) {
  check_config("adam_sched", 4);
  ct_device *d = ct_test_device();
  ct_tensor *p = NULL;
  int64_t n = 3;
  ck_assert_ct_ok(ct_zeros(&p, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ct_optimizer *o = NULL;
  ck_assert_ct_ok(ct_adam_new(&o, &p, 1, 0.5, 0.9, 0.999, 1e-8, 0, false));
  ck_assert(ct_optimizer_get_lr(o) == 0.5);
  ck_assert_ct_ok(ct_optimizer_set_lr(o, 0.25));
  ck_assert(ct_optimizer_get_lr(o) == 0.25);
  ck_assert(isnan(ct_optimizer_get_lr(NULL)));
  unsigned v0 = ct__tensor_version(p);
  ck_assert_ct_ok(ct_optimizer_step(o)); /* no gradient: nothing happens */
  ck_assert_uint_eq(ct__tensor_version(p), v0);
  ct_optimizer_free(o);
  ct_release(p);
}
END_TEST

/* A parameter that is a strided view (a transposed leaf) updates like its contiguous copy. */
START_TEST(strided_parameter) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  ct_tensor *base = NULL, *pt = NULL, *pc = NULL, *g0 = ct_test_fx(st, "g.0.0"), *gt = NULL;
  ct_tensor *b0 = ct_test_fx(st, "p.0");
  base = copy_of(d, b0);
  ck_assert_ct_ok(ct_transpose(&pt, base, 0, 1)); /* [5, 3], strides (1, 5) */
  ck_assert(!ct_tensor_is_contiguous(pt));
  ck_assert_ct_ok(ct_contiguous(&pc, pt));
  ck_assert_ct_ok(ct_set_requires_grad(pt, true));
  ck_assert_ct_ok(ct_set_requires_grad(pc, true));
  ck_assert_ct_ok(ct_transpose(&gt, g0, 0, 1));
  ct_tensor *gc = NULL;
  ck_assert_ct_ok(ct_contiguous(&gc, gt));
  ct_optimizer *ot = NULL, *oc = NULL;
  ck_assert_ct_ok(ct_adam_new(&ot, &pt, 1, 1e-2, 0.9, 0.999, 1e-8, 0.1, true));
  ck_assert_ct_ok(ct_adam_new(&oc, &pc, 1, 1e-2, 0.9, 0.999, 1e-8, 0.1, true));
  for (int k = 0; k < 2; k++) {
    set_grad(d, pt, gc);
    set_grad(d, pc, gc);
    ck_assert_ct_ok(ct_optimizer_step(ot));
    ck_assert_ct_ok(ct_optimizer_step(oc));
  }
  ct_tensor *ptc = NULL;
  ck_assert_ct_ok(ct_contiguous(&ptc, pt));
  assert_bits_equal(ptc, pc, "transposed parameter");
  ct_optimizer_free(ot);
  ct_optimizer_free(oc);
  ct_release(ptc);
  ct_release(gc);
  ct_release(gt);
  ct_release(g0);
  ct_release(b0);
  ct_release(pc);
  ct_release(pt);
  ct_release(base);
  ct_safetensors_free(st);
}
END_TEST

START_TEST(zero_grad_drops_gradients) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  ct_tensor *ps[2] = {param(d, st, "p.0"), param(d, st, "p.1")}, *g = ct_test_fx(st, "g.0.0"), *got = NULL;
  set_grad(d, ps[0], g);
  ct_optimizer *o = make_opt("sgd", ps);
  ck_assert_ct_ok(ct_optimizer_zero_grad(o));
  ck_assert_ct_ok(ct_grad(&got, ps[0]));
  ck_assert_ptr_null(got);
  ck_assert_ct_status(ct_optimizer_zero_grad(NULL), CT_ERR_INVALID_ARGUMENT);
  ct_optimizer_free(o);
  ct_release(g);
  ct_release(ps[0]);
  ct_release(ps[1]);
  ct_safetensors_free(st);
}
END_TEST

START_TEST(clip_matches_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  ct_tensor *ps[3] = {param(d, st, "p.0"), param(d, st, "p.1"), param(d, st, "p.1")};
  for (int i = 0; i < 2; i++) {
    ct_tensor *g = ct_test_fx(st, "clip.g.%d", i);
    set_grad(d, ps[i], g);
    ct_release(g);
  }
  /* ps[2] has no gradient: skipped. */
  ct_tensor *total = ct_test_fx(st, "clip.total");
  float *want = host_f32(total);
  double norm = 0;
  ck_assert_ct_ok(ct_clip_grad_norm(&norm, ps, 3, 1.0));
  ck_assert_msg(fabs(norm - want[0]) <= 2 * ldexp(1, -23) * want[0], "total norm %.9g, PyTorch %.9g", norm, want[0]);
  for (int i = 0; i < 2; i++) {
    ct_tensor *g = NULL, *w = ct_test_fx(st, "clip.out.%d", i);
    ck_assert_ct_ok(ct_grad(&g, ps[i]));
    assert_near(g, w, 2, "clipped gradient");
    ct_release(g);
    ct_release(w);
  }
  /* Below max_norm: nothing changes, bit for bit; NULL total_norm is fine. */
  ct_tensor *before = NULL, *after = NULL, *g = NULL;
  ck_assert_ct_ok(ct_grad(&g, ps[0]));
  before = copy_of(d, g);
  ck_assert_ct_ok(ct_clip_grad_norm(NULL, ps, 3, 100.0));
  after = copy_of(d, g);
  assert_bits_equal(before, after, "unclipped gradient");
  /* No gradient at all: norm 0. */
  ck_assert_ct_ok(ct_clip_grad_norm(&norm, ps + 2, 1, 1.0));
  ck_assert(norm == 0);
  ck_assert_ct_ok(ct_clip_grad_norm(&norm, NULL, 0, 1.0));
  ck_assert(norm == 0);
  free(want);
  ct_release(g);
  ct_release(before);
  ct_release(after);
  ct_release(total);
  for (int i = 0; i < 3; i++) ct_release(ps[i]);
  ct_safetensors_free(st);
}
END_TEST

/* A non-finite norm comes back as it is and scales the gradients by max_norm / inf = 0 (so inf
 * elements become NaN), as PyTorch with error_if_nonfinite false. */
START_TEST(clip_nonfinite) {
  ct_device *d = ct_test_device();
  float v[4] = {1, INFINITY, -2, 0};
  int64_t n = 4;
  ct_tensor *p = NULL, *g = NULL;
  ck_assert_ct_ok(ct_zeros(&p, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ck_assert_ct_ok(ct_from_host(&p->grad, d, CT_F32, 1, &n, v));
  double norm = 0;
  ck_assert_ct_ok(ct_clip_grad_norm(&norm, &p, 1, 1.0));
  ck_assert(isinf(norm));
  ck_assert_ct_ok(ct_grad(&g, p));
  float *h = host_f32(g);
  ck_assert(h[0] == 0 && isnan(h[1]) && h[2] == 0 && h[3] == 0);
  free(h);
  ct_release(g);
  ct_release(p);
}
END_TEST

/* A gradient of 10000 elements takes several work-groups (their partial sums are added on the
 * host) and a strided f32 view: the norm against a double host sum (f32 partial sums of a few
 * hundred terms each: 1e-6 relative is far above their rounding, far below any lost group). */
START_TEST(clip_many_groups) {
  ct_device *d = ct_test_device();
  int64_t n = 10000, shape[2] = {100, 100};
  float *v = malloc(sizeof(float) * (size_t)n);
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    v[i] = (float)((i * 37) % 101 - 50) / 16.0f;
    sum += (double)v[i] * v[i];
  }
  ct_tensor *p = NULL, *base = NULL, *g = NULL;
  ck_assert_ct_ok(ct_zeros(&p, d, CT_F32, 2, shape));
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ck_assert_ct_ok(ct_from_host(&base, d, CT_F32, 2, shape, v));
  ck_assert_ct_ok(ct_transpose(&p->grad, base, 0, 1)); /* strided: the kernel walks ct_offset */
  double norm = 0;
  ck_assert_ct_ok(ct_clip_grad_norm(&norm, &p, 1, 2.0));
  ck_assert_msg(fabs(norm - sqrt(sum)) <= 1e-6 * sqrt(sum), "norm %.9g, expected %.9g", norm, sqrt(sum));
  float coef = (float)(1.0f / ((float)norm + 1e-6f) * 2.0f);
  float *h = calloc((size_t)n, sizeof(float));
  ck_assert_ct_ok(ct_to_host(base, h, sizeof(float) * (size_t)n)); /* the view scaled base in place */
  for (int64_t i = 0; i < n; i += 997) ck_assert_msg(h[i] == v[i] * coef, "[%lld] %g, expected %g", (long long)i, h[i], v[i] * coef);
  free(h);
  free(v);
  ct_release(g);
  ct_release(base);
  ct_release(p);
}
END_TEST

START_TEST(clip_errors) {
  ct_device *d = ct_test_device();
  int64_t n = 2;
  ct_tensor *p = NULL, *ps[2];
  ck_assert_ct_ok(ct_zeros(&p, d, CT_F32, 1, &n));
  ps[0] = ps[1] = p;
  double norm = 0;
  ck_assert_ct_status(ct_clip_grad_norm(&norm, &p, 1, -1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("max_norm is -1");
  ck_assert(isnan(norm));
  ck_assert_ct_status(ct_clip_grad_norm(&norm, &p, 1, NAN), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_clip_grad_norm(&norm, &p, -1, 1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_clip_grad_norm(&norm, NULL, 1, 1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_clip_grad_norm(&norm, ps, 2, 1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("params[1] is the same tensor as params[0]");
  ct_release(p);
}
END_TEST

/* The scaler over SGD with momentum: loss = sum(p * g_k) scaled and backpropagated (the real
 * path: ct_grad_scaler_scale records, ct_backward), an inf at step 1 and a NaN at step 4: the
 * step is skipped, the scale backs off, and grows after two good steps, as PyTorch's. */
START_TEST(scaler_matches_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  ct_tensor *p = param(d, st, "sc.p"), *ts = ct_test_fx(st, "sc.scale"), *tk = ct_test_fx(st, "sc.skipped");
  float *scales = host_f32(ts), *skipped = host_f32(tk);
  ct_optimizer *o = NULL;
  ck_assert_ct_ok(ct_sgd_new(&o, &p, 1, 0.1, 0.9, 0, false));
  ct_grad_scaler *s = NULL;
  ck_assert_ct_ok(ct_grad_scaler_new(&s, 1024, 2, 0.5, 2));
  ck_assert(ct_grad_scaler_get_scale(s) == 1024);
  for (int k = 0; k < 6; k++) {
    ct_tensor *g = ct_test_fx(st, "sc.g.%d", k), *y = NULL, *loss = NULL, *scaled = NULL;
    ck_assert_ct_ok(ct_optimizer_zero_grad(o));
    ck_assert_ct_ok(ct_mul(&y, p, g));
    ck_assert_ct_ok(ct_sum(&loss, y, 0, NULL, false));
    ck_assert_ct_ok(ct_grad_scaler_scale(&scaled, s, loss));
    ck_assert_ct_ok(ct_backward(scaled, NULL));
    ck_assert_ct_ok(ct_grad_scaler_step(s, o));
    ck_assert_msg(ct_grad_scaler_is_step_skipped(s) == (skipped[k] != 0), "step %d: skipped %d, PyTorch %g", k,
                  ct_grad_scaler_is_step_skipped(s), skipped[k]);
    ck_assert_ct_ok(ct_grad_scaler_update(s));
    ck_assert_msg(ct_grad_scaler_get_scale(s) == scales[k], "step %d: scale %g, PyTorch %g", k,
                  ct_grad_scaler_get_scale(s), scales[k]);
    ct_tensor *want = ct_test_fx(st, "sc.p.%d", k);
    assert_near(p, want, 0, "scaled SGD parameter");
    ct_release(want);
    ct_release(g);
    ct_release(y);
    ct_release(loss);
    ct_release(scaled);
  }
  free(scales);
  free(skipped);
  ct_grad_scaler_free(s);
  ct_optimizer_free(o);
  ct_release(ts);
  ct_release(tk);
  ct_release(p);
  ct_safetensors_free(st);
}
END_TEST

START_TEST(scaler_errors) {
  ct_device *d = ct_test_device();
  ct_grad_scaler *s = NULL;
  ck_assert_ct_status(ct_grad_scaler_new(&s, 0, 2, 0.5, 10), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(s);
  ck_assert_ct_status(ct_grad_scaler_new(&s, INFINITY, 2, 0.5, 10), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_grad_scaler_new(&s, 1024, 1, 0.5, 10), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("growth_factor is 1");
  ck_assert_ct_status(ct_grad_scaler_new(&s, 1024, 2, 1, 10), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_grad_scaler_new(&s, 1024, 2, 0.5, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_grad_scaler_new(NULL, 1024, 2, 0.5, 10), CT_ERR_INVALID_ARGUMENT);
  ck_assert(isnan(ct_grad_scaler_get_scale(NULL)));
  ck_assert(!ct_grad_scaler_is_step_skipped(NULL));
  ct_grad_scaler_free(NULL);

  ck_assert_ct_ok(ct_grad_scaler_new(&s, 8, 2, 0.5, 10));
  int64_t n = 3;
  float g[3] = {8, 16, -24};
  ct_tensor *p = NULL, *h = NULL, *out = NULL, *ip = NULL;
  ck_assert_ct_ok(ct_zeros(&p, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ck_assert_ct_ok(ct_from_host(&p->grad, d, CT_F32, 1, &n, g));
  ct_optimizer *o = NULL;
  ck_assert_ct_ok(ct_sgd_new(&o, &p, 1, 1.0, 0, 0, false));
  ck_assert_ct_status(ct_grad_scaler_update(s), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("no inf checks");
  ck_assert_ct_ok(ct_grad_scaler_unscale(s, o));
  ck_assert_ct_status(ct_grad_scaler_unscale(s, o), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("already called");
  ck_assert_ct_ok(ct_grad_scaler_step(s, o)); /* unscaled once: g / 8 = {1, 2, -3}, p -= g */
  float ph[3];
  ck_assert_ct_ok(ct_to_host(p, ph, sizeof ph));
  ck_assert(ph[0] == -1 && ph[1] == -2 && ph[2] == 3);
  ck_assert_ct_status(ct_grad_scaler_step(s, o), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_grad_scaler_unscale(s, o), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("after ct_grad_scaler_step");
  ck_assert_ct_ok(ct_grad_scaler_update(s));
  ck_assert(ct_grad_scaler_get_scale(s) == 8);
  ck_assert_ct_status(ct_grad_scaler_scale(&out, s, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_ct_ok(ct_zeros(&ip, d, CT_I32, 1, &n));
  ck_assert_ct_status(ct_grad_scaler_scale(&out, s, ip), CT_ERR_DTYPE_MISMATCH);

  /* f16 gradients are refused, as PyTorch's "Attempting to unscale FP16 gradients", before
   * anything changes. */
  ct_tensor *ph16 = NULL;
  ck_assert_ct_ok(ct_zeros(&ph16, d, CT_F16, 1, &n));
  ck_assert_ct_ok(ct_set_requires_grad(ph16, true));
  ck_assert_ct_ok(ct_zeros(&h, d, CT_F16, 1, &n));
  ph16->grad = h;
  ct_optimizer *o16 = NULL;
  ck_assert_ct_ok(ct_sgd_new(&o16, &ph16, 1, 1.0, 0, 0, false));
  ck_assert_ct_status(ct_grad_scaler_step(s, o16), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("f16 gradient");
  ct_optimizer_free(o16);
  ct_release(ph16);
  ct_release(ip);
  ct_optimizer_free(o);
  ct_release(p);
  ct_grad_scaler_free(s);
}
END_TEST

static char *tmp_path(const char *name) {
  static char path[256];
  snprintf(path, sizeof path, "/tmp/ct_optim_%d_%s", (int)getpid(), name);
  return path;
}

/* Train 2 steps, save the parameters and the optimizer to a file, train 2 more; then reload
 * the file into new parameters and an optimizer made with other hyperparameters (load restores
 * them) and train the same 2 steps: the parameters are bit-identical. */
static void resume_case(const char *cfg) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  ct_tensor *ps[2] = {param(d, st, "p.0"), param(d, st, "p.1")};
  ct_optimizer *o = make_opt(cfg, ps);
  run_steps(d, st, cfg, o, ps, 0, 2);
  ct_safetensors *ck = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&ck));
  ck_assert_ct_ok(ct_safetensors_set(ck, "p.0", ps[0]));
  ck_assert_ct_ok(ct_safetensors_set(ck, "p.1", ps[1]));
  ck_assert_ct_ok(ct_optimizer_save(o, ck));
  const char *path = tmp_path(cfg);
  ck_assert_ct_ok(ct_safetensors_save(ck, path));
  ct_safetensors_free(ck);
  run_steps(d, st, cfg, o, ps, 2, 4);

  ct_safetensors *back = NULL;
  ck_assert_ct_ok(ct_safetensors_load(&back, path, d));
  unlink(path);
  ct_tensor *qs[2] = {param(d, back, "p.0"), param(d, back, "p.1")};
  ct_optimizer *q = NULL;
  if (cfg[0] == 's') ck_assert_ct_ok(ct_sgd_new(&q, qs, 2, 7.0, 0.5, 0, false));
  else ck_assert_ct_ok(ct_adam_new(&q, qs, 2, 7.0, 0.1, 0.2, 0.3, 0, false));
  ck_assert_ct_ok(ct_optimizer_load(q, back));
  ck_assert(ct_optimizer_get_lr(q) == ct_optimizer_get_lr(o) || !strcmp(cfg, "adam_sched"));
  run_steps(d, st, cfg, q, qs, 2, 4);
  assert_bits_equal(qs[0], ps[0], "resumed parameter 0");
  assert_bits_equal(qs[1], ps[1], "resumed parameter 1");
  ct_optimizer_free(q);
  ct_optimizer_free(o);
  for (int i = 0; i < 2; i++) {
    ct_release(ps[i]);
    ct_release(qs[i]);
  }
  ct_safetensors_free(back);
  ct_safetensors_free(st);
}

START_TEST(checkpoint_resume_bit_identical) {
  resume_case("sgd_nest");
  resume_case("adamw");
  resume_case("adam_sched"); /* a skipped parameter: per-parameter step counts round-trip */
}
END_TEST

/* A container that does not fit fails with a message naming the difference, and the optimizer
 * keeps its state: its next step equals that of a twin that saw no load. */
START_TEST(checkpoint_mismatch_leaves_optimizer) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = fixture(d);
  ct_tensor *ps[2] = {param(d, st, "p.0"), param(d, st, "p.1")}, *qs[2] = {param(d, st, "p.0"), param(d, st, "p.1")};
  ct_optimizer *o = make_opt("adam", ps), *twin = make_opt("adam", qs), *sgd = make_opt("sgd_mom", ps);
  run_steps(d, st, "adam", o, ps, 0, 1);
  run_steps(d, st, "adam", twin, qs, 0, 1);
  ct_safetensors *ck = NULL;

  /* Another kind. */
  ck_assert_ct_ok(ct_safetensors_new(&ck));
  ck_assert_ct_ok(ct_optimizer_save(sgd, ck));
  ck_assert_ct_status(ct_optimizer_load(o, ck), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("holds a \"sgd\" optimizer but this one is adam");
  ct_safetensors_free(ck);

  /* Another count. */
  ct_optimizer *one = NULL;
  ck_assert_ct_ok(ct_adam_new(&one, ps, 1, 0.5, 0.9, 0.999, 1e-8, 0, false));
  ck_assert_ct_ok(ct_safetensors_new(&ck));
  ck_assert_ct_ok(ct_optimizer_save(one, ck));
  ck_assert_ct_status(ct_optimizer_load(o, ck), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("1 parameters' state but this optimizer has 2");
  ct_safetensors_free(ck);
  ct_optimizer_free(one);

  /* Other shapes: an optimizer over parameters of the same shapes in the other order. */
  ct_tensor *rs[2] = {param(d, st, "p.1"), param(d, st, "p.0")};
  ct_optimizer *rev = NULL;
  ck_assert_ct_ok(ct_adam_new(&rev, rs, 2, 0.5, 0.9, 0.999, 1e-8, 0, false));
  ct_tensor *g0 = ct_test_fx(st, "g.0.0"), *g1 = ct_test_fx(st, "g.0.1");
  set_grad(d, rs[0], g1);
  set_grad(d, rs[1], g0);
  ck_assert_ct_ok(ct_optimizer_step(rev));
  ck_assert_ct_ok(ct_safetensors_new(&ck));
  ck_assert_ct_ok(ct_optimizer_save(rev, ck));
  ck_assert_ct_status(ct_optimizer_load(o, ck), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("optim.0.exp_avg' is f32 [7] but parameter 0 is f32 [3, 5]");

  /* A missing tensor, and a bad value. */
  ct_optimizer *fresh = make_opt("adam", ps);
  ct_safetensors *ck2 = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&ck2));
  ck_assert_ct_ok(ct_optimizer_save(fresh, ck2)); /* step 0: no tensors */
  ck_assert_ct_ok(ct_safetensors_metadata_set(ck2, "optim.1.step", "3"));
  ck_assert_ct_status(ct_optimizer_load(o, ck2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("no tensor 'optim.1.exp_avg'");
  ck_assert_ct_ok(ct_safetensors_metadata_set(ck2, "optim.1.step", "0"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(ck2, "optim.lr", "fast"));
  ck_assert_ct_status(ct_optimizer_load(o, ck2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'optim.lr' is \"fast\"");
  ck_assert_ct_ok(ct_safetensors_metadata_set(ck2, "optim.lr", "-1"));
  ck_assert_ct_status(ct_optimizer_load(o, ck2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("lr is -1");
  ck_assert_ct_ok(ct_safetensors_metadata_set(ck2, "optim.beta1", NULL));
  ck_assert_ct_ok(ct_safetensors_metadata_set(ck2, "optim.lr", "0.1"));
  ck_assert_ct_status(ct_optimizer_load(o, ck2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("no metadata 'optim.beta1'");
  ck_assert_ct_status(ct_optimizer_load(NULL, ck2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_optimizer_load(o, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_optimizer_save(NULL, ck2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_optimizer_save(o, NULL), CT_ERR_INVALID_ARGUMENT);

  /* o is as it was: lr, and its next step. */
  ck_assert(ct_optimizer_get_lr(o) == 1e-2);
  run_steps(d, st, "adam", o, ps, 1, 2);
  run_steps(d, st, "adam", twin, qs, 1, 2);
  assert_bits_equal(ps[0], qs[0], "parameter 0 after failed loads");
  assert_bits_equal(ps[1], qs[1], "parameter 1 after failed loads");

  ct_safetensors_free(ck);
  ct_safetensors_free(ck2);
  ct_optimizer_free(fresh);
  ct_optimizer_free(rev);
  ct_optimizer_free(sgd);
  ct_optimizer_free(twin);
  ct_optimizer_free(o);
  ct_release(g0);
  ct_release(g1);
  for (int i = 0; i < 2; i++) {
    ct_release(ps[i]);
    ct_release(qs[i]);
    ct_release(rs[i]);
  }
  ct_safetensors_free(st);
}
END_TEST

/* Step counts at the int64 limit (issue #28): a checkpoint with step INT64_MAX was accepted, the
 * next step overflowed the count (signed overflow; Adam's bias correction then stopped the
 * updates) and the checkpoint saved after it was refused by the loader. Now the loader refuses a
 * count the next step would overflow, the step refuses to go past INT64_MAX - 1 (before changing
 * anything), and what is saved at the limit loads again. */
START_TEST(checkpoint_step_limit) {
  ct_device *d = ct_test_device();
  int64_t n = 3;
  float g[3] = {0.5f, -1.0f, 2.0f}, before[3], after[3];
  ct_tensor *p = NULL, *q = NULL;
  ck_assert_ct_ok(ct_zeros(&p, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ck_assert_ct_ok(ct_from_host(&p->grad, d, CT_F32, 1, &n, g));
  ck_assert_ct_ok(ct_zeros(&q, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_set_requires_grad(q, true));
  ct_optimizer *o = NULL, *fresh = NULL;
  ck_assert_ct_ok(ct_adam_new(&o, &p, 1, 0.1, 0.9, 0.999, 1e-8, 0, false));
  ck_assert_ct_ok(ct_adam_new(&fresh, &q, 1, 0.1, 0.9, 0.999, 1e-8, 0, false));
  ck_assert_ct_ok(ct_optimizer_step(o));
  ct_safetensors *ck = NULL, *back = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&ck));
  ck_assert_ct_ok(ct_optimizer_save(o, ck));

  /* A crafted file with step INT64_MAX, then -1: refused, naming the entry, fresh unchanged. */
  const char *path = tmp_path("step_limit");
  const char *bad[2] = {"9223372036854775807", "-1"};
  for (int k = 0; k < 2; k++) {
    ck_assert_ct_ok(ct_safetensors_metadata_set(ck, "optim.0.step", bad[k]));
    ck_assert_ct_ok(ct_safetensors_save(ck, path));
    ck_assert_ct_ok(ct_safetensors_load(&back, path, d));
    ck_assert_ct_status(ct_optimizer_load(fresh, back), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("metadata 'optim.0.step' is");
    ck_assert_error_contains(k == 0 ? "is 9223372036854775807 (expected a step count in 0..9223372036854775806: "
                                      "the next step would overflow it)"
                                    : "expected an integer in 0..");
    ct_safetensors_free(back);
    back = NULL;
    ct_safetensors *now = NULL;
    ck_assert_ct_ok(ct_safetensors_new(&now));
    ck_assert_ct_ok(ct_optimizer_save(fresh, now));
    ck_assert_str_eq(ct_safetensors_metadata_get(now, "optim.0.step"), "0");
    ct_tensor *m = NULL;
    ck_assert_int_ne(ct_safetensors_get(&m, now, "optim.0.exp_avg"), CT_OK); /* no state: step 0 */
    ck_assert_ptr_null(m);
    ct_safetensors_free(now);
  }

  /* INT64_MAX - 1 loads; the next step is refused and changes nothing. */
  ck_assert_ct_ok(ct_safetensors_metadata_set(ck, "optim.0.step", "9223372036854775806"));
  ck_assert_ct_ok(ct_optimizer_load(o, ck));
  ck_assert_ct_ok(ct_to_host(p, before, sizeof before));
  ck_assert_ct_status(ct_optimizer_step(o), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("parameter 0 has taken 9223372036854775806 steps");
  ck_assert_ct_ok(ct_to_host(p, after, sizeof after));
  ck_assert_mem_eq(before, after, sizeof before);

  /* What the optimizer saves at the limit loads again, through a file. */
  ct_safetensors *saved = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&saved));
  ck_assert_ct_ok(ct_optimizer_save(o, saved));
  ck_assert_str_eq(ct_safetensors_metadata_get(saved, "optim.0.step"), "9223372036854775806");
  ck_assert_ct_ok(ct_safetensors_save(saved, path));
  ck_assert_ct_ok(ct_safetensors_load(&back, path, d));
  unlink(path);
  ck_assert_ct_ok(ct_optimizer_load(fresh, back));

  ct_safetensors_free(back);
  ct_safetensors_free(saved);
  ct_safetensors_free(ck);
  ct_optimizer_free(fresh);
  ct_optimizer_free(o);
  ct_release(q);
  ct_release(p);
}
END_TEST

START_TEST(constructor_errors) {
  ct_device *d = ct_test_device();
  int64_t n = 2;
  ct_tensor *p = NULL, *i32 = NULL, *nl = NULL, *free_t = NULL;
  ck_assert_ct_ok(ct_zeros(&p, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ck_assert_ct_ok(ct_zeros(&free_t, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_zeros(&i32, d, CT_I32, 1, &n));
  ck_assert_ct_ok(ct_view(&nl, p, 1, &n)); /* a recorded view: not a leaf */
  ct_optimizer *o = (ct_optimizer *)&o;
  ck_assert_ct_status(ct_sgd_new(&o, &p, 1, -0.1, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(o);
  ck_assert_error_contains("ct_sgd_new: lr is -0.1");
  ck_assert_ct_status(ct_sgd_new(&o, &p, 1, NAN, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sgd_new(&o, &p, 1, 0.1, -0.5, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("momentum is -0.5");
  ck_assert_ct_status(ct_sgd_new(&o, &p, 1, 0.1, 0, -1, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sgd_new(&o, &p, 1, 0.1, 0, 0, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("nesterov");
  ck_assert_ct_status(ct_sgd_new(NULL, &p, 1, 0.1, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sgd_new(&o, NULL, 1, 0.1, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sgd_new(&o, &p, 0, 0.1, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("n is 0");
  ct_tensor *dup[2] = {p, p}, *withnull[2] = {p, NULL};
  ck_assert_ct_status(ct_sgd_new(&o, dup, 2, 0.1, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sgd_new(&o, withnull, 2, 0.1, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("params[1] is NULL");
  ck_assert_ct_status(ct_sgd_new(&o, &i32, 1, 0.1, 0, 0, false), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("params[0] has dtype i32");
  ck_assert_ct_status(ct_sgd_new(&o, &free_t, 1, 0.1, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("does not require grad");
  if (ct_requires_grad(nl)) {
    ck_assert_ct_status(ct_adam_new(&o, &nl, 1, 0.1, 0.9, 0.999, 1e-8, 0, false), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("not a leaf");
  }
  ck_assert_ct_status(ct_adam_new(&o, &p, 1, 0.1, 1.0, 0.999, 1e-8, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("beta1 is 1");
  ck_assert_ct_status(ct_adam_new(&o, &p, 1, 0.1, 0.9, -0.1, 1e-8, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("beta2 is -0.1");
  ck_assert_ct_status(ct_adam_new(&o, &p, 1, 0.1, 0.9, 0.999, -1e-8, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_adam_new(&o, &p, 1, 0.1, 0.9, 0.999, 1e-8, -0.01, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(o);
  ck_assert_ct_ok(ct_sgd_new(&o, &p, 1, 0.1, 0, 0, false));
  ck_assert_ct_status(ct_optimizer_set_lr(o, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert(ct_optimizer_get_lr(o) == 0.1);
  ck_assert_ct_status(ct_optimizer_set_lr(NULL, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_optimizer_step(NULL), CT_ERR_INVALID_ARGUMENT);
  /* The optimizer holds its own reference to each parameter. */
  ct_tensor *keep = ct_retain(p);
  ct_release(p);
  ct_optimizer_free(o);
  ct_optimizer_free(NULL);
  ct_release(keep);
  ct_release(i32);
  ct_release(nl);
  ct_release(free_t);
}
END_TEST

/* An expanded parameter (stride 0: several elements in one cell) is refused at construction
 * (issue #28): a step applied every element's update to the one cell (p = expand([1.0], [4]),
 * SGD with lr 0.1 and gradient 1 left -3e-8 instead of 0.9). */
START_TEST(expanded_parameter_refused) {
  ct_device *d = ct_test_device();
  int64_t one = 1, four = 4, n = 2;
  ct_tensor *cell = NULL, *e = NULL, *p = NULL;
  ck_assert_ct_ok(ct_ones(&cell, d, CT_F32, 1, &one));
  ck_assert_ct_ok(ct_expand(&e, cell, 1, &four));
  ck_assert_ct_ok(ct_set_requires_grad(e, true));
  ck_assert(ct_is_leaf(e));
  ck_assert_ct_ok(ct_zeros(&p, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ct_tensor *ps[2] = {p, e};
  ct_optimizer *o = (ct_optimizer *)&o;
  ck_assert_ct_status(ct_sgd_new(&o, ps, 2, 0.1, 0, 0, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(o);
  ck_assert_error_contains("ct_sgd_new: params[1] of shape [4] (strides [0]) has stride 0 at dim 0");
  ck_assert_error_contains("share one memory location");
  o = (ct_optimizer *)&o;
  ck_assert_ct_status(ct_adam_new(&o, ps, 2, 0.1, 0.9, 0.999, 1e-8, 0, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(o);
  ck_assert_error_contains("ct_adam_new: params[1] of shape [4]");
  /* An expanded size-1 dim shares nothing. */
  ct_tensor *e1 = NULL;
  ck_assert_ct_ok(ct_expand(&e1, cell, 2, (int64_t[]){1, 1}));
  ck_assert_ct_ok(ct_set_requires_grad(e1, true));
  ck_assert_ct_ok(ct_sgd_new(&o, &e1, 1, 0.1, 0, 0, false));
  ct_optimizer_free(o);
  ct_release(e1);
  ct_release(p);
  ct_release(e);
  ct_release(cell);
}
END_TEST

/* f16 parameters: the updates compute in f32 and round once per stored value, so after two
 * steps they agree with a double host computation to about an f16 ulp. */
START_TEST(f16_parameters_smoke) {
  ct_device *d = ct_test_device();
  int64_t n = 8;
  double p0[8], g[8];
  for (int i = 0; i < 8; i++) {
    p0[i] = 0.25 * (i - 3.5);
    g[i] = 0.125 * ((i * 5) % 8 - 4);
  }
  for (int kind = 0; kind < 2; kind++) {
    ct_tensor *p = ct_test_from_doubles(d, CT_F16, 1, &n, p0);
    ck_assert_ct_ok(ct_set_requires_grad(p, true));
    ct_optimizer *o = NULL;
    if (kind == 0) ck_assert_ct_ok(ct_sgd_new(&o, &p, 1, 0.1, 0.9, 0.01, true));
    else ck_assert_ct_ok(ct_adam_new(&o, &p, 1, 0.05, 0.9, 0.999, 1e-8, 0.1, true));
    double want[8], m[8] = {0}, v[8] = {0};
    memcpy(want, p0, sizeof want);
    for (int k = 1; k <= 2; k++) {
      ck_assert_ct_ok(ct_grad_clear(p));
      p->grad = ct_test_from_doubles(d, CT_F16, 1, &n, g);
      ck_assert_ct_ok(ct_optimizer_step(o));
      for (int i = 0; i < 8; i++) {
        if (kind == 0) {
          double gi = g[i] + 0.01 * want[i];
          m[i] = k == 1 ? gi : 0.9 * m[i] + gi;
          want[i] -= 0.1 * (gi + 0.9 * m[i]);
        } else {
          want[i] *= 1 - 0.05 * 0.1;
          m[i] = 0.9 * m[i] + 0.1 * g[i];
          v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
          double mh = m[i] / (1 - pow(0.9, k)), vh = v[i] / (1 - pow(0.999, k));
          want[i] -= 0.05 * mh / (sqrt(vh) + 1e-8);
        }
      }
    }
    double *got = ct_test_to_doubles(p);
    for (int i = 0; i < 8; i++)
      ck_assert_msg(fabs(got[i] - want[i]) <= 2e-3 * fmax(fabs(want[i]), 0.25), "f16 %s [%d]: %g, expected %g",
                    kind ? "AdamW" : "SGD", i, got[i], want[i]);
    free(got);
    ct_optimizer_free(o);
    ct_release(p);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("optim");
  TCase *tc = ct_test_case(s, "optimizers", 300);
  tcase_add_test(tc, sgd_matches_pytorch);
  tcase_add_test(tc, adam_matches_pytorch);
  tcase_add_test(tc, adam_lr_change_and_skipped_param);
  tcase_add_test(tc, strided_parameter);
  tcase_add_test(tc, zero_grad_drops_gradients);
  tcase_add_test(tc, f16_parameters_smoke);
  tc = ct_test_case(s, "clip", 300);
  tcase_add_test(tc, clip_matches_pytorch);
  tcase_add_test(tc, clip_nonfinite);
  tcase_add_test(tc, clip_many_groups);
  tcase_add_test(tc, clip_errors);
  tc = ct_test_case(s, "scaler", 300);
  tcase_add_test(tc, scaler_matches_pytorch);
  tcase_add_test(tc, scaler_errors);
  tc = ct_test_case(s, "checkpoint", 300);
  tcase_add_test(tc, checkpoint_resume_bit_identical);
  tcase_add_test(tc, checkpoint_mismatch_leaves_optimizer);
  tcase_add_test(tc, checkpoint_step_limit);
  tc = ct_test_case(s, "errors", 300);
  tcase_add_test(tc, constructor_errors);
  tcase_add_test(tc, expanded_parameter_refused);
  return ct_test_run(s);
}
