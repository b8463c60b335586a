/* Gradients of the norms, attention, dropout and losses (src/autograd/grad_nn.c) against
 * central finite differences in f64 (gradcheck.h), plus the rules finite differences can't
 * check: dropout's gradient is exactly the forward's own mask / (1 - p), fully masked attention
 * rows give zero gradients, batch norm's running statistics take no gradient, and autocast runs
 * the norms and losses in f32. Shapes are tiny (each element costs two forward calls) and
 * nearly everything runs in f64, so few kernel programs are built. */
#include <math.h>

#include "ct_fixture.h"
#include "gradcheck.h"

#include "data/nn_fixture.h"

/* Appends the norm's weight and bias (those not NULL) of shape pshape[0..pndim) after x (in[0]);
 * returns the number of inputs. */
static int add_params(gc_input *in, int pndim, const int64_t *pshape, double *w, double *b) {
  int n = 1;
  double *vals[2] = {w, b};
  for (int i = 0; i < 2; i++) {
    if (!vals[i]) continue;
    in[n] = (gc_input){.ndim = pndim, .data = vals[i], .requires_grad = true};
    memcpy(in[n++].shape, pshape, sizeof(int64_t) * (size_t)pndim);
  }
  return n;
}

/* ---- layer norm, rms norm ---- */

struct norm_ctx {
  int mode; /* 0 layer_norm, 1 rms_norm */
  int nnorm;
  bool w, b;
};

static ct_status f_norm(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct norm_ctx *c = ctx;
  const ct_tensor *w = c->w ? in[1] : NULL, *b = c->b ? in[c->w ? 2 : 1] : NULL;
  if (c->mode == 0) return ct_layer_norm(out, in[0], c->nnorm, w, b, 1e-5);
  return ct_rms_norm(out, in[0], c->nnorm, w, 1e-6);
}

START_TEST(layer_rms_norm_gradcheck) {
  ct_device *d = ct_test_device();
  static const struct {
    struct norm_ctx c;
    int ndim;
    int64_t shape[3];
    bool strided;
  } cases[] = {
      {{0, 1, true, true}, 2, {3, 5}, false},
      {{0, 1, false, false}, 2, {4, 3}, true},
      {{0, 2, true, false}, 3, {2, 3, 4}, false},
      {{0, 2, false, true}, 3, {2, 2, 3}, true},
      {{0, 1, true, true}, 3, {1, 2, 4}, false}, /* size-1 dim */
      {{1, 1, true, false}, 2, {3, 5}, true},
      {{1, 2, false, false}, 3, {2, 3, 2}, false},
      {{1, 2, true, false}, 3, {2, 2, 3}, false},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    double x[24], w[12], b[12];
    gc_fill(x, 24, -2.0, 2.0, 10 + k);
    gc_fill(w, 12, 0.5, 1.5, 20 + k);
    gc_fill(b, 12, -1.0, 1.0, 30 + k);
    const struct norm_ctx *c = &cases[k].c;
    gc_input in[3] = {{.ndim = cases[k].ndim, .data = x, .requires_grad = true, .strided = cases[k].strided}};
    memcpy(in[0].shape, cases[k].shape, sizeof cases[k].shape);
    int n = add_params(in, c->nnorm, cases[k].shape + cases[k].ndim - c->nnorm, c->w ? w : NULL, c->b ? b : NULL);
    char what[64];
    snprintf(what, sizeof what, "%s case %zu", c->mode ? "rms_norm" : "layer_norm", k);
    gc_check(d, what, f_norm, (void *)c, n, in);
  }
  /* 70 rows: the weight and bias gradients sum over several blocks of rows (x takes no gradient
   * here, so the check stays cheap) */
  double x[140], w[2], b[2];
  gc_fill(x, 140, -2.0, 2.0, 1);
  gc_fill(w, 2, 0.5, 1.5, 2);
  gc_fill(b, 2, -1.0, 1.0, 3);
  static const struct norm_ctx c = {0, 1, true, true};
  gc_input in[3] = {{.ndim = 2, .shape = {70, 2}, .data = x}};
  int64_t ps[1] = {2};
  int n = add_params(in, 1, ps, w, b);
  gc_check(d, "layer_norm 70 rows", f_norm, (void *)&c, n, in);
  /* Rows of 37 over two outer dims that collapse to one: the kernels' 16-wide vector blocks
   * (two of them, then 5 elements one at a time) and, for the weight and bias gradients, two
   * whole groups of 16 columns and a partial one. */
  static double xl[2 * 3 * 37], wl[37], bl[37];
  gc_fill(xl, 2 * 3 * 37, -2.0, 2.0, 4);
  gc_fill(wl, 37, 0.5, 1.5, 5);
  gc_fill(bl, 37, -1.0, 1.0, 6);
  static const struct norm_ctx cl = {0, 1, true, true}, cr = {1, 1, true, false};
  gc_input inl[3] = {{.ndim = 3, .shape = {2, 3, 37}, .data = xl, .requires_grad = true}};
  int64_t psl[1] = {37};
  n = add_params(inl, 1, psl, wl, bl);
  gc_check(d, "layer_norm rows of 37", f_norm, (void *)&cl, n, inl);
  gc_input inr[3] = {{.ndim = 2, .shape = {3, 32}, .data = xl, .requires_grad = true}};
  psl[0] = 32;
  n = add_params(inr, 1, psl, wl, NULL);
  gc_check(d, "rms_norm rows of 32", f_norm, (void *)&cr, n, inr);
}
END_TEST

/* ---- batch norm ---- */

struct bn_ctx {
  bool training, running, w, b;
};

static ct_status f_bn(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct bn_ctx *c = ctx;
  int64_t C = ct_tensor_shape(in[0])[1];
  ct_tensor *rm = NULL, *rv = NULL;
  ct_device *d = ct_tensor_device(in[0]);
  if (c->running) {
    /* fresh running stats per call: their update must not leak into the next evaluation */
    double m[8], v[8];
    for (int i = 0; i < C; i++) m[i] = 0.1 * i - 0.2, v[i] = 0.5 + 0.25 * i;
    rm = gc_from(d, 1, &C, m);
    rv = gc_from(d, 1, &C, v);
  }
  ct_status st = ct_batch_norm(out, in[0], rm, rv, c->w ? in[1] : NULL, c->b ? in[c->w ? 2 : 1] : NULL, c->training,
                               0.1, 1e-5);
  ct_release(rm);
  ct_release(rv);
  return st;
}

START_TEST(batch_norm_gradcheck) {
  ct_device *d = ct_test_device();
  static const struct {
    struct bn_ctx c;
    int ndim;
    int64_t shape[4];
    bool strided;
  } cases[] = {
      {{true, true, true, true}, 2, {4, 3}, false},
      {{true, false, false, false}, 2, {3, 2}, true},
      {{true, true, true, true}, 4, {2, 2, 2, 3}, false},
      {{true, false, true, false}, 4, {2, 3, 1, 2}, true},
      {{false, true, true, true}, 2, {4, 3}, false},
      {{false, true, false, true}, 4, {2, 2, 3, 2}, true},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    double x[24], w[4], b[4];
    gc_fill(x, 24, -2.0, 2.0, 40 + k);
    gc_fill(w, 4, 0.5, 1.5, 50 + k);
    gc_fill(b, 4, -1.0, 1.0, 60 + k);
    const struct bn_ctx *c = &cases[k].c;
    gc_input in[3] = {{.ndim = cases[k].ndim, .data = x, .requires_grad = true, .strided = cases[k].strided}};
    memcpy(in[0].shape, cases[k].shape, sizeof cases[k].shape);
    int n = add_params(in, 1, cases[k].shape + 1, c->w ? w : NULL, c->b ? b : NULL);
    char what[64];
    snprintf(what, sizeof what, "batch_norm case %zu", k);
    gc_check(d, what, f_bn, (void *)c, n, in);
  }
}
END_TEST

/* Training updates the running statistics in place: no gradient flows into them, a running stat
 * that requires grad is refused while grad mode is on, and a graph that saved one (here: the
 * running mean used by an eval-mode product) notices the update. A saved input written in place
 * makes ct_backward fail naming the norm. */
START_TEST(norm_inplace_rules) {
  ct_device *d = ct_test_device();
  double xv[6] = {1, 2, -1, 0.5, 3, -2}, mv[2] = {0, 0}, vv[2] = {1, 1};
  int64_t xs[2] = {3, 2}, cs = 2;
  ct_tensor *x = gc_from(d, 2, xs, xv), *rm = gc_from(d, 1, &cs, mv), *rv = gc_from(d, 1, &cs, vv);
  ct_tensor *y = NULL, *s = NULL, *p = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_set_requires_grad(rm, true));
  ck_assert_ct_status(ct_batch_norm(&y, x, rm, rv, NULL, NULL, true, 0.1, 1e-5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("running_mean");
  ck_assert(y == NULL);
  ck_assert_ct_ok(ct_set_requires_grad(rm, false));
  /* p = x * rm saves rm; the training update moves its version */
  ck_assert_ct_ok(ct_mul(&p, x, rm));
  ck_assert_ct_ok(ct_batch_norm(&y, x, rm, rv, NULL, NULL, true, 0.1, 1e-5));
  ck_assert(!ct_requires_grad(rm) && !ct_requires_grad(rv));
  ck_assert_ct_ok(ct_sum(&s, p, 0, NULL, false));
  ck_assert_ct_status(ct_backward(s, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("modified in place");
  ct_release(s);
  ct_release(p);
  /* the batch norm's own graph is fine */
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_release(s);
  ct_release(y);
  /* layer_norm saved x: writing x afterwards is detected */
  ct_tensor *x2 = gc_from(d, 2, xs, xv);
  ck_assert_ct_ok(ct_set_requires_grad(x2, true));
  ck_assert_ct_ok(ct_layer_norm(&y, x2, 1, NULL, NULL, 1e-5));
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  bool prev = ct_set_grad_enabled(false);
  ck_assert_ct_ok(ct_mul_scalar_out(x2, x2, 2.0));
  ct_set_grad_enabled(prev);
  ck_assert_ct_status(ct_backward(s, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("LAYER_NORM");
  ct_release(s);
  ct_release(y);
  ct_release(x2);
  ct_release(x);
  ct_release(rm);
  ct_release(rv);
}
END_TEST

/* ---- scaled dot-product attention ---- */

struct sdpa_ctx {
  bool causal;
  double scale;
  int mask; /* 0 none, 1 bool (from bmask), 2 float (input 3) */
  int mndim;
  int64_t mshape[4];
  const unsigned char *bmask;
};

static ct_status f_sdpa(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct sdpa_ctx *c = ctx;
  ct_tensor *m = NULL;
  if (c->mask == 1) ck_assert_ct_ok(ct_from_host(&m, ct_tensor_device(in[0]), CT_BOOL, c->mndim, c->mshape, c->bmask));
  ct_status st = ct_scaled_dot_product_attention(out, in[0], in[1], in[2], c->mask == 2 ? in[3] : m, c->causal,
                                                 c->scale);
  ct_release(m);
  return st;
}

START_TEST(sdpa_gradcheck) {
  ct_device *d = ct_test_device();
  /* row 1 of the bool mask attends nothing: zeros out, zero gradients (PyTorch 2.15) */
  static const unsigned char bm[12] = {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1};
  static const struct {
    struct sdpa_ctx c;
    int ndim[4];
    int64_t shape[4][4];
    bool strided;
  } cases[] = {
      /* batch, no mask, scale NaN */
      {{false, NAN, 0, 0, {0}, NULL}, {3, 3, 3}, {{2, 3, 2}, {2, 4, 2}, {2, 4, 3}}, false},
      /* causal, strided q */
      {{true, NAN, 0, 0, {0}, NULL}, {2, 2, 2}, {{3, 2}, {3, 2}, {3, 2}}, true},
      /* causal with L < S and an explicit scale */
      {{true, 0.7, 0, 0, {0}, NULL}, {2, 2, 2}, {{2, 3}, {4, 3}, {4, 2}}, false},
      /* bool mask with a fully masked row */
      {{false, NAN, 1, 2, {3, 4}, bm}, {2, 2, 2}, {{3, 2}, {4, 2}, {4, 2}}, false},
      /* float mask (requires grad), broadcast over the batch */
      {{false, NAN, 2, 2, {3, 4}, NULL}, {3, 3, 3, 2}, {{2, 3, 2}, {2, 4, 2}, {2, 4, 2}, {3, 4}}, false},
      /* batch and head dims broadcast: q [2, 1, L, E], k and v [1, 2, S, E] */
      {{false, NAN, 0, 0, {0}, NULL}, {4, 4, 4}, {{2, 1, 2, 2}, {1, 2, 3, 2}, {1, 2, 3, 2}}, true},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    double v[4][24];
    int n = cases[k].c.mask == 2 ? 4 : 3;
    gc_input in[4];
    for (int i = 0; i < n; i++) {
      gc_fill(v[i], 24, -1.5, 1.5, 70 + 4 * k + i);
      in[i] = (gc_input){.ndim = cases[k].ndim[i], .data = v[i], .requires_grad = true,
                         .strided = i == 0 && cases[k].strided};
      memcpy(in[i].shape, cases[k].shape[i], sizeof in[i].shape);
    }
    char what[64];
    snprintf(what, sizeof what, "sdpa case %zu", k);
    gc_check(d, what, f_sdpa, (void *)&cases[k].c, n, in);
  }
}
END_TEST

/* Fully masked rows, exactly: a float mask whose row 0 is all -inf gives that row zeros and
 * zero gradients for the row's query and mask entries (no NaN). */
START_TEST(sdpa_fully_masked_row_zero_grad) {
  ct_device *d = ct_test_device();
  double qv[6], kv[6], vv[6], mv[6] = {-INFINITY, -INFINITY, -INFINITY, 0.5, 0, -1};
  gc_fill(qv, 6, -1, 1, 1);
  gc_fill(kv, 6, -1, 1, 2);
  gc_fill(vv, 6, -1, 1, 3);
  /* L = 2, S = 3, E = Ev = 2 */
  int64_t sq[2] = {2, 2}, skv[2] = {3, 2}, sm[2] = {2, 3};
  ct_tensor *q = gc_from(d, 2, sq, qv), *k = gc_from(d, 2, skv, kv), *v = gc_from(d, 2, skv, vv),
            *m = gc_from(d, 2, sm, mv);
  ct_tensor *o = NULL, *s = NULL, *gq = NULL, *gm = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(q, true));
  ck_assert_ct_ok(ct_set_requires_grad(m, true));
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&o, q, k, v, m, false, NAN));
  ck_assert_ct_ok(ct_sum(&s, o, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&gq, q));
  ck_assert_ct_ok(ct_grad(&gm, m));
  double *ov = gc_host(o), *gqv = gc_host(gq), *gmv = gc_host(gm);
  for (int j = 0; j < 2; j++) {
    ck_assert(ov[j] == 0);
    ck_assert(gqv[j] == 0);
    ck_assert(isfinite(gqv[2 + j]));
  }
  for (int j = 0; j < 3; j++) {
    ck_assert(gmv[j] == 0);
    ck_assert(isfinite(gmv[3 + j]));
  }
  ck_assert(gqv[2] != 0 || gqv[3] != 0);
  free(ov);
  free(gqv);
  free(gmv);
  ct_release(gq);
  ct_release(gm);
  ct_release(s);
  ct_release(o);
  ct_release(q);
  ct_release(k);
  ct_release(v);
  ct_release(m);
}
END_TEST

/* ---- dropout ---- */

/* The gradient is g * mask / (1 - p) with the forward's own mask: x = 1 makes the forward's
 * output the mask times the scale, and the gradient must be g times exactly that factor (the
 * same f32 rounding: the kernel multiplies by the f32 scale). */
static void dropout_case(ct_device *d, ct_dtype dt, double p) {
  enum { N = 203 };
  double ones[N], gv[N];
  for (int i = 0; i < N; i++) ones[i] = 1;
  gc_fill(gv, N, -2, 2, 5);
  int64_t n = N;
  /* made on the host in dt (rounded as ct_cast rounds) */
  ct_tensor *x = ct_test_from_doubles(d, dt, 1, &n, ones), *g = ct_test_from_doubles(d, dt, 1, &n, gv);
  ct_tensor *y = NULL, *gx = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ct_manual_seed(1234);
  ck_assert_ct_ok(ct_dropout(&y, x, p, true));
  ck_assert_ct_ok(ct_backward(y, g));
  ck_assert_ct_ok(ct_grad(&gx, x));
  double *yv = gc_host(y), *gxv = gc_host(gx), *gq = gc_host(g);
  int kept = 0;
  for (int i = 0; i < N; i++) {
    double want;
    if (dt == CT_F32) want = (double)((float)gq[i] * (float)yv[i]);
    else want = gq[i] * yv[i];
    kept += yv[i] != 0;
    ck_assert_msg(gxv[i] == want, "dropout p %g element %d: gradient %.17g, expected %.17g", p, i, gxv[i], want);
  }
  /* the mask is not degenerate */
  ck_assert_int_gt(kept, 0);
  ck_assert_int_lt(kept, N);
  free(yv);
  free(gxv);
  free(gq);
  ct_release(gx);
  ct_release(y);
  ct_release(x);
  ct_release(g);
}

START_TEST(dropout_grad_is_forward_mask) {
  ct_device *d = ct_test_device();
  dropout_case(d, CT_F32, 0.3);
  if (ct_test_fp64(d, "f64 dropout's gradient")) dropout_case(d, CT_F64, 0.6);
  /* p = 0 and eval: identity; p = 1: zeros */
  double xv[4] = {1, -2, 3, 4};
  int64_t n = 4;
  for (int mode = 0; mode < 3; mode++) {
    ct_tensor *x = gc_from(d, 1, &n, xv), *y = NULL, *s = NULL, *gx = NULL;
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    ck_assert_ct_ok(ct_dropout(&y, x, mode == 2 ? 1.0 : mode == 1 ? 0.5 : 0.0, mode != 1));
    ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
    ck_assert_ct_ok(ct_backward(s, NULL));
    ck_assert_ct_ok(ct_grad(&gx, x));
    double *g = gc_host(gx);
    for (int i = 0; i < 4; i++) ck_assert(g[i] == (mode == 2 ? 0.0 : 1.0));
    free(g);
    ct_release(gx);
    ct_release(s);
    ct_release(y);
    ct_release(x);
  }
}
END_TEST

/* ---- losses ---- */

struct loss_ctx {
  int kind; /* 0 cross_entropy, 1 nll_loss, 2 mse_loss */
  ct_reduction r;
  double smoothing;
  int64_t ignore;
};

static ct_status f_loss(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct loss_ctx *c = ctx;
  if (c->kind == 0) return ct_cross_entropy(out, in[0], in[1], c->ignore, c->smoothing, c->r);
  if (c->kind == 1) return ct_nll_loss(out, in[0], in[1], c->ignore, c->r);
  return ct_mse_loss(out, in[0], in[1], c->r);
}

START_TEST(loss_gradcheck) {
  ct_device *d = ct_test_device();
  double t2[4] = {2, -100, 0, 1};   /* [4], one ignored (-100) */
  double t3[4] = {1, 2, 2, 0};      /* [2, 2] */
  double t3i[4] = {1, 3, 3, 3};     /* ignore_index 3: only one counts */
  double t0[1] = {2};               /* 0-d */
  for (int r = 0; r < 3; r++) {
    for (int sm = 0; sm < 2; sm++) {
      double eps = sm ? 0.2 : 0.0;
      double x[12];
      struct loss_ctx c = {0, (ct_reduction)r, eps, -100};
      char what[64];
      /* [N, C] with an ignored target */
      gc_fill(x, 12, -2, 2, 80 + r * 2 + sm);
      gc_input in[2] = {{.ndim = 2, .shape = {4, 3}, .data = x, .requires_grad = true, .strided = sm},
                        {.ndim = 1, .shape = {4}, .data = t2, .integer = true}};
      snprintf(what, sizeof what, "cross_entropy [4, 3] r %d eps %g", r, eps);
      gc_check(d, what, f_loss, &c, 2, in);
      /* [N, C, d] (class dim 1), strided */
      gc_input in3[2] = {{.ndim = 3, .shape = {2, 3, 2}, .data = x, .requires_grad = true, .strided = !sm},
                         {.ndim = 2, .shape = {2, 2}, .data = sm ? t3i : t3, .integer = true}};
      c.ignore = sm ? 3 : -100;
      snprintf(what, sizeof what, "cross_entropy [2, 3, 2] r %d eps %g", r, eps);
      gc_check(d, what, f_loss, &c, 2, in3);
      c.ignore = -100;
      /* [C] with a 0-d target */
      gc_input in1[2] = {{.ndim = 1, .shape = {3}, .data = x, .requires_grad = true},
                         {.ndim = 0, .data = t0, .integer = true}};
      snprintf(what, sizeof what, "cross_entropy [3] r %d eps %g", r, eps);
      gc_check(d, what, f_loss, &c, 2, in1);
    }
    /* nll_loss */
    double lp[12];
    gc_fill(lp, 12, -3, 0, 90 + r);
    struct loss_ctx c = {1, (ct_reduction)r, 0, -100};
    gc_input in[2] = {{.ndim = 2, .shape = {4, 3}, .data = lp, .requires_grad = true, .strided = r == 1},
                      {.ndim = 1, .shape = {4}, .data = t2, .integer = true}};
    char what[64];
    snprintf(what, sizeof what, "nll_loss r %d", r);
    gc_check(d, what, f_loss, &c, 2, in);
    /* mse_loss with broadcast: a [3, 4], b [4] (and b [3, 1]) */
    double a[12], b[4];
    gc_fill(a, 12, -2, 2, 100 + r);
    gc_fill(b, 4, -2, 2, 110 + r);
    c = (struct loss_ctx){2, (ct_reduction)r, 0, 0};
    gc_input im[2] = {{.ndim = 2, .shape = {3, 4}, .data = a, .requires_grad = true, .strided = r == 2},
                      {.ndim = 1, .shape = {4}, .data = b, .requires_grad = true}};
    snprintf(what, sizeof what, "mse_loss r %d", r);
    gc_check(d, what, f_loss, &c, 2, im);
    im[1] = (gc_input){.ndim = 2, .shape = {3, 1}, .data = b, .requires_grad = true};
    snprintf(what, sizeof what, "mse_loss [3, 1] r %d", r);
    gc_check(d, what, f_loss, &c, 2, im);
  }
  /* Rows of 19 classes: the backward's two vector blocks of 8 and a tail of 3, targets in a
   * block, in the tail and ignored, with label smoothing; and nll_loss's rows alike. */
  double xl[3 * 19], tl[3] = {5, 17, -100};
  gc_fill(xl, 3 * 19, -2, 2, 120);
  struct loss_ctx cl = {0, CT_REDUCTION_MEAN, 0.2, -100};
  gc_input il[2] = {{.ndim = 2, .shape = {3, 19}, .data = xl, .requires_grad = true},
                    {.ndim = 1, .shape = {3}, .data = tl, .integer = true}};
  gc_check(d, "cross_entropy [3, 19] eps 0.2", f_loss, &cl, 2, il);
  cl = (struct loss_ctx){1, CT_REDUCTION_SUM, 0, -100};
  gc_check(d, "nll_loss [3, 19]", f_loss, &cl, 2, il);
}
END_TEST

/* MEAN over targets that are all ignored is NaN (0 / 0, as PyTorch) and its gradient is zero. */
START_TEST(loss_all_ignored_mean) {
  ct_device *d = ct_test_device();
  double xv[6] = {0.1, 0.2, 0.3, -1, 0, 1};
  int64_t tv[2] = {-100, -100}, xs[2] = {2, 3}, ts = 2;
  ct_tensor *x = gc_from(d, 2, xs, xv), *t, *l = NULL, *g = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_I64, 1, &ts, tv));
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_cross_entropy(&l, x, t, -100, 0.1, CT_REDUCTION_MEAN));
  double *lv = gc_host(l);
  ck_assert(isnan(lv[0]));
  free(lv);
  ck_assert_ct_ok(ct_backward(l, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  double *gv = gc_host(g);
  for (int i = 0; i < 6; i++) ck_assert(gv[i] == 0);
  free(gv);
  ct_release(g);
  ct_release(l);
  ct_release(x);
  ct_release(t);
}
END_TEST

/* ---- autocast, and f32 runs of the backward kernels ---- */

/* Under autocast the norms and losses take f16/bf16 inputs in f32 and return f32; attention
 * casts f32 operands to the autocast dtype. The f32 backward of each kernel runs once. */
START_TEST(autocast_and_f32_smoke) {
  ct_device *d = ct_test_device();
  double xv[12];
  gc_fill(xv, 12, -1, 1, 7);
  int64_t xs[2] = {3, 4}, ts = 3, tv[3] = {0, 3, 1};
  /* x in f32 and bf16 rounded on the host from the doubles, as ct_cast of an f64 x rounds */
  ct_tensor *x64 = NULL, *x32 = ct_test_from_doubles(d, CT_F32, 2, xs, xv);
  ct_tensor *xh = ct_test_from_doubles(d, CT_BF16, 2, xs, xv), *t, *y = NULL, *l = NULL;
  if (ct_test_fp64(d, "f64 layer_norm under autocast")) x64 = ct_test_from_doubles(d, CT_F64, 2, xs, xv);
  ck_assert_ct_ok(ct_from_host(&t, d, CT_I64, 1, &ts, tv));
  ck_assert_ct_ok(ct_autocast_set_dtype(CT_BF16));
  ck_assert_ct_ok(ct_layer_norm(&y, xh, 1, NULL, NULL, 1e-5));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_F32);
  ct_release(y);
  ck_assert_ct_ok(ct_rms_norm(&y, xh, 2, NULL, NAN));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_F32);
  ct_release(y);
  ck_assert_ct_ok(ct_batch_norm(&y, xh, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_F32);
  ct_release(y);
  ck_assert_ct_ok(ct_cross_entropy(&l, xh, t, -100, 0.0, CT_REDUCTION_MEAN));
  ck_assert_int_eq(ct_tensor_dtype(l), CT_F32);
  ct_release(l);
  ck_assert_ct_ok(ct_nll_loss(&l, xh, t, -100, CT_REDUCTION_NONE));
  ck_assert_int_eq(ct_tensor_dtype(l), CT_F32);
  ct_release(l);
  ck_assert_ct_ok(ct_mse_loss(&l, xh, xh, CT_REDUCTION_SUM));
  ck_assert_int_eq(ct_tensor_dtype(l), CT_F32);
  ct_release(l);
  /* f64 stays f64 (autocast leaves it alone, as PyTorch) */
  if (x64) {
    ck_assert_ct_ok(ct_layer_norm(&y, x64, 1, NULL, NULL, 1e-5));
    ck_assert_int_eq(ct_tensor_dtype(y), CT_F64);
    ct_release(y);
  }
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&y, x32, x32, x32, NULL, true, NAN));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_BF16);
  ct_release(y);
  ck_assert_ct_ok(ct_autocast_set_dtype(CT_F32));
  /* f32 backward kernels: layer_norm, batch_norm, attention, cross_entropy, dropout */
  ck_assert_ct_ok(ct_set_requires_grad(x32, true));
  ct_tensor *a = NULL, *b = NULL, *c = NULL, *e = NULL, *f = NULL, *g = NULL;
  ck_assert_ct_ok(ct_layer_norm(&a, x32, 1, NULL, NULL, 1e-5));
  ck_assert_ct_ok(ct_batch_norm(&b, a, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&c, b, b, b, NULL, true, NAN));
  ck_assert_ct_ok(ct_dropout(&e, c, 0.25, true));
  ck_assert_ct_ok(ct_cross_entropy(&f, e, t, -100, 0.1, CT_REDUCTION_SUM));
  ck_assert_ct_ok(ct_backward(f, NULL));
  ck_assert_ct_ok(ct_grad(&g, x32));
  ck_assert_int_eq(ct_tensor_dtype(g), CT_F32);
  double *gv = gc_host(g);
  for (int i = 0; i < 12; i++) ck_assert(isfinite(gv[i]));
  free(gv);
  ct_release(g);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  ct_release(e);
  ct_release(f);
  ct_release(x64);
  ct_release(x32);
  ct_release(xh);
  ct_release(t);
}
END_TEST

/* ---- composites against PyTorch (data/nn_fixture.h) ---- */

static ct_tensor *leaf(ct_device *d, int ndim, const int64_t *shape, const double *v, bool grad) {
  ct_tensor *t = gc_from(d, ndim, shape, v);
  if (grad) ck_assert_ct_ok(ct_set_requires_grad(t, true));
  return t;
}

/* The tolerance of a composite's values against PyTorch's (f64), relative to 1 + |value|. In f64
 * (PyTorch ran in f64 too) only the order of roundings differs, so 1e-10 leaves a wide margin.
 * In f32 (no cl_khr_fp64) the inputs are rounded (u = 6e-8) and every op rounds again: a
 * handful of ops on O(1) values, sums of up to 24 terms and the normalisations' division by a
 * standard deviation of about 1 give errors of some tens of u (seen: 2.2e-6 at most, the sum of
 * squares of loss B); 2e-5 (over 300 u) is the bound, which a wrong formula (off by O(1)) is far
 * above. */
static double nn_tol(ct_dtype dt) { return dt == CT_F64 ? 1e-10 : 2e-5; }

/* t's gradient against ref (n values), within nn_tol. */
static void check_grad(const char *what, const ct_tensor *t, const double *ref, int n) {
  ct_tensor *g = NULL;
  ck_assert_ct_ok(ct_grad(&g, t));
  ck_assert_msg(g != NULL, "%s: no gradient", what);
  ck_assert_int_eq(ct_numel(g), n);
  double *v = gc_host(g);
  const double tol = nn_tol(ct_tensor_dtype(g));
  for (int i = 0; i < n; i++)
    ck_assert_msg(fabs(v[i] - ref[i]) <= tol * (1 + fabs(ref[i])), "%s element %d: %.17g, PyTorch %.17g", what, i,
                  v[i], ref[i]);
  free(v);
  ct_release(g);
}

START_TEST(composites_match_pytorch) {
  ct_device *d = ct_test_device();
  /* A: layer_norm -> causal self-attention -> cross_entropy (ignore_index, smoothing, mean) */
  int64_t xs[2] = {6, 4}, ps[1] = {4}, ts[1] = {6};
  ct_tensor *x = leaf(d, 2, xs, fa_x, true), *w = leaf(d, 1, ps, fa_w, true), *b = leaf(d, 1, ps, fa_b, true);
  ct_tensor *t = NULL, *y = NULL, *a = NULL, *l = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_I64, 1, ts, fa_target));
  ck_assert_ct_ok(ct_layer_norm(&y, x, 1, w, b, 1e-5));
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&a, y, y, y, NULL, true, NAN));
  ck_assert_ct_ok(ct_cross_entropy(&l, a, t, -100, 0.1, CT_REDUCTION_MEAN));
  double *lv = gc_host(l);
  ck_assert_double_eq_tol(lv[0], fa_loss[0], ct_tensor_dtype(l) == CT_F64 ? 1e-12 : nn_tol(CT_F32) * (1 + fabs(fa_loss[0])));
  free(lv);
  ck_assert_ct_ok(ct_backward(l, NULL));
  check_grad("A x", x, fa_gx, 24);
  check_grad("A weight", w, fa_gw, 4);
  check_grad("A bias", b, fa_gb, 4);
  ct_release(l);
  ct_release(a);
  ct_release(y);
  ct_release(t);
  ct_release(x);
  ct_release(w);
  ct_release(b);
  /* B: batch_norm (training) -> mse_loss (sum) */
  int64_t bs[3] = {3, 2, 2}, cs[1] = {2};
  x = leaf(d, 3, bs, fb_x, true);
  w = leaf(d, 1, cs, fb_w, true);
  b = leaf(d, 1, cs, fb_b, true);
  t = leaf(d, 3, bs, fb_t, false);
  double zeros[2] = {0, 0}, ones[2] = {1, 1};
  ct_tensor *rm = leaf(d, 1, cs, zeros, false), *rv = leaf(d, 1, cs, ones, false);
  ck_assert_ct_ok(ct_batch_norm(&y, x, rm, rv, w, b, true, 0.1, 1e-5));
  ck_assert_ct_ok(ct_mse_loss(&l, y, t, CT_REDUCTION_SUM));
  lv = gc_host(l);
  ck_assert_double_eq_tol(lv[0], fb_loss[0], ct_tensor_dtype(l) == CT_F64 ? 1e-12 : nn_tol(CT_F32) * (1 + fabs(fb_loss[0])));
  free(lv);
  ck_assert_ct_ok(ct_backward(l, NULL));
  check_grad("B x", x, fb_gx, 12);
  check_grad("B weight", w, fb_gw, 2);
  check_grad("B bias", b, fb_gb, 2);
  ct_release(l);
  ct_release(y);
  ct_release(t);
  ct_release(x);
  ct_release(w);
  ct_release(b);
  ct_release(rm);
  ct_release(rv);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-nn");
  TCase *tc = tcase_create("nn");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, layer_rms_norm_gradcheck);
  tcase_add_test(tc, batch_norm_gradcheck);
  tcase_add_test(tc, norm_inplace_rules);
  tcase_add_test(tc, sdpa_gradcheck);
  tcase_add_test(tc, sdpa_fully_masked_row_zero_grad);
  tcase_add_test(tc, dropout_grad_is_forward_mask);
  tcase_add_test(tc, loss_gradcheck);
  tcase_add_test(tc, loss_all_ignored_mean);
  tcase_add_test(tc, autocast_and_f32_smoke);
  tcase_add_test(tc, composites_match_pytorch);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
