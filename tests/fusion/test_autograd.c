/* Autograd over the fusion graph (issue #16: "autograd records the user-level ops; backward
 * chains fuse the same way"): a small two-layer model, linear -> GELU written out with the tanh
 * formula (8 elementwise calls) -> linear -> mean squared error written out, forward and
 * backward with fusion on and off: every gradient (both weights, both biases, the input) agrees
 * bit for bit, the loss within the rounding of its sum's order, and the fused run really fused
 * (fewer kernels than calls). */
#include "fz_util.h"

enum { B = 8, IN = 16, HID = 32, OUT = 4 };

static uint64_t seed;
static float rnd(void) {
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return (float)((double)(seed >> 11) * 0x1p-53 * 2 - 1);
}

static ct_tensor *param(ct_device *d, int ndim, const int64_t *shape, float scale, bool grad) {
  float h[HID * IN];
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  for (int64_t i = 0; i < n; i++) h[i] = rnd() * scale;
  ct_tensor *t = fz_from(d, CT_F32, ndim, shape, h);
  if (grad) ck_assert_ct_ok(ct_set_requires_grad(t, true));
  return t;
}

/* 0.5 h (1 + tanh(sqrt(2 / pi) (h + 0.044715 h^3))), one call per operation. */
static ct_tensor *gelu_tanh_written_out(const ct_tensor *h) {
  ct_tensor *h2 = NULL, *h3 = NULL, *a = NULL, *b = NULL, *c = NULL, *t = NULL, *u = NULL, *g = NULL, *out = NULL;
  ck_assert_ct_ok(ct_mul(&h2, h, h));
  ck_assert_ct_ok(ct_mul(&h3, h2, h));
  ck_assert_ct_ok(ct_mul_scalar(&a, h3, 0.044715));
  ck_assert_ct_ok(ct_add(&b, h, a));
  ck_assert_ct_ok(ct_mul_scalar(&c, b, 0.7978845608028654));
  ck_assert_ct_ok(ct_tanh(&t, c));
  ck_assert_ct_ok(ct_add_scalar(&u, t, 1));
  ck_assert_ct_ok(ct_mul(&g, h, u));
  ck_assert_ct_ok(ct_mul_scalar(&out, g, 0.5));
  ct_tensor *tmp[] = {h2, h3, a, b, c, t, u, g};
  for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) ct_release(tmp[i]);
  return out;
}

struct result {
  float loss;
  float *grad[5]; /* x, w1, b1, w2, b2 */
  size_t bytes[5];
};

static void step(ct_device *d, int fused, struct result *r) {
  fz_mode(d, fused);
  seed = 0x2545f4914f6cdd1dull;
  const int64_t sx[2] = {B, IN}, sw1[2] = {HID, IN}, sb1 = HID, sw2[2] = {OUT, HID}, sb2 = OUT, st[2] = {B, OUT};
  ct_tensor *p[5];
  p[0] = param(d, 2, sx, 2, true);
  p[1] = param(d, 2, sw1, 0.25f, true);
  p[2] = param(d, 1, &sb1, 0.1f, true);
  p[3] = param(d, 2, sw2, 0.2f, true);
  p[4] = param(d, 1, &sb2, 0.1f, true);
  ct_tensor *target = param(d, 2, st, 1, false);
  struct ct__fusion_stats s0 = fz_stats();
  ct_tensor *h = NULL, *g = NULL, *y = NULL, *diff = NULL, *sq = NULL, *loss = NULL;
  ck_assert_ct_ok(ct_linear(&h, p[0], p[1], p[2]));
  g = gelu_tanh_written_out(h);
  ck_assert_ct_ok(ct_linear(&y, g, p[3], p[4]));
  ck_assert_ct_ok(ct_sub(&diff, y, target));
  ck_assert_ct_ok(ct_mul(&sq, diff, diff));
  ck_assert_ct_ok(ct_mean(&loss, sq, 0, NULL, false));
  ct_release(h);
  ct_release(g);
  ct_release(y);
  ct_release(diff);
  ct_release(sq);
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ck_assert_ct_ok(ct_to_host(loss, &r->loss, sizeof r->loss));
  for (int i = 0; i < 5; i++) {
    ct_tensor *gr = NULL;
    ck_assert_ct_ok(ct_grad(&gr, p[i]));
    ck_assert_ptr_nonnull(gr);
    r->bytes[i] = ct_tensor_nbytes(gr);
    r->grad[i] = fz_read(gr);
    ct_release(gr);
  }
  struct ct__fusion_stats s1 = fz_stats();
  if (fused) {
    /* forward: 8 + 3 elementwise calls, backward more; grouped into far fewer kernels */
    ck_assert_msg(s1.nodes - s0.nodes >= 20, "only %lu calls recorded", s1.nodes - s0.nodes);
    ck_assert_msg(s1.kernels - s0.kernels < s1.nodes - s0.nodes, "%lu kernels for %lu calls",
                  s1.kernels - s0.kernels, s1.nodes - s0.nodes);
  } else {
    ck_assert_uint_eq(s1.nodes, s0.nodes);
  }
  ct_release(loss);
  ct_release(target);
  for (int i = 0; i < 5; i++) ct_release(p[i]);
}

START_TEST(model_gradients_fused_equal_eager) {
  ct_device *d = ct_test_device();
  struct result eager, fused;
  step(d, 0, &eager);
  step(d, 1, &fused);
  ck_assert_msg(isfinite(eager.loss) && eager.loss > 0, "loss %g", eager.loss);
  /* The loss is a mean of 32 squares: the fused reduction adds them in its own order (a chunk per
   * work-item on PoCL, a tree in the lanes style that rusticl and GPUs run), ct_mean's kernels in
   * theirs, so the sums may differ by rounding (docs/FUSION.md); a few ulps of the sum of
   * magnitudes (all terms are positive). The gradients do not depend on that order. */
  ck_assert_msg(fabsf(fused.loss - eager.loss) <= 1e-6f * eager.loss, "loss: fused %.9g eager %.9g", fused.loss,
                eager.loss);
  static const char *const names[5] = {"grad x", "grad w1", "grad b1", "grad w2", "grad b2"};
  for (int i = 0; i < 5; i++) {
    ck_assert_uint_eq(fused.bytes[i], eager.bytes[i]);
    fz_assert_bits(fused.grad[i], eager.grad[i], eager.bytes[i], CT_F32, names[i]);
    /* the gradient is not trivially zero */
    bool nonzero = false;
    for (size_t k = 0; k < eager.bytes[i] / sizeof(float); k++) nonzero |= eager.grad[i][k] != 0;
    ck_assert_msg(nonzero, "%s is all zero", names[i]);
    free(fused.grad[i]);
    free(eager.grad[i]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("fusion-autograd");
  TCase *tc = tcase_create("autograd");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, model_gradients_fused_equal_eager);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
