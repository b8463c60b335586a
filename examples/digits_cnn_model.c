/* The digits CNN as modules (module.h), built as make_digits_cnn.py's DigitsCNN (see
 * digits_cnn_model.h). */
#include "digits_cnn_model.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const k_names[DIGITS_NWEIGHTS] = {
    "conv1.weight", "conv1.bias", "bn1.running_mean", "bn1.running_var", "bn1.weight", "bn1.bias",
    "conv2.weight", "conv2.bias", "bn2.running_mean", "bn2.running_var", "bn2.weight", "bn2.bias",
    "conv3.weight", "conv3.bias", "bn3.running_mean", "bn3.running_var", "bn3.weight", "bn3.bias",
    "fc.weight",    "fc.bias"};

const int digits_cnn_param_index[DIGITS_NPARAMS] = {
    DIGITS_CONV1_W, DIGITS_CONV1_B, DIGITS_BN1_W, DIGITS_BN1_B, DIGITS_CONV2_W, DIGITS_CONV2_B, DIGITS_BN2_W,
    DIGITS_BN2_B,   DIGITS_CONV3_W, DIGITS_CONV3_B, DIGITS_BN3_W, DIGITS_BN3_B, DIGITS_FC_W,   DIGITS_FC_B};

const char *digits_cnn_name(int i) { return i >= 0 && i < DIGITS_NWEIGHTS ? k_names[i] : NULL; }

/* relu(bn(conv(x))) through the children named conv and bn. */
static ct_status conv_bn_relu(ct_tensor **out, ct_module *self, const char *conv, const char *bn,
                              const ct_tensor *x) {
  ct_tensor *c = NULL, *n = NULL;
  ct_status st = ct_module_forward(&c, ct_module_get_submodule(self, conv), x);
  if (st == CT_OK) st = ct_module_forward(&n, ct_module_get_submodule(self, bn), c);
  if (st == CT_OK) st = ct_relu(out, n);
  ct_release(n);
  ct_release(c);
  return st;
}

/* DigitsCNN.forward of make_digits_cnn.py, line for line. */
static ct_status forward(ct_tensor **logits, ct_module *self, const ct_tensor *x, void *user) {
  (void)user;
  static const int two[2] = {2, 2};
  static const int64_t one_by_one[2] = {1, 1};
  ct_tensor *a1 = NULL, *a2 = NULL, *p2 = NULL, *d2 = NULL, *a3 = NULL, *g = NULL, *f = NULL;
  ct_status st = conv_bn_relu(&a1, self, "conv1", "bn1", x);
  if (st == CT_OK) st = conv_bn_relu(&a2, self, "conv2", "bn2", a1);
  if (st == CT_OK) st = ct_max_pool2d(&p2, a2, two, NULL, NULL);
  if (st == CT_OK) st = ct_module_forward(&d2, ct_module_get_submodule(self, "drop"), p2);
  if (st == CT_OK) st = conv_bn_relu(&a3, self, "conv3", "bn3", d2);
  if (st == CT_OK) st = ct_adaptive_avg_pool2d(&g, a3, one_by_one);
  if (st == CT_OK) st = ct_view(&f, g, 2, (int64_t[]){ct_tensor_shape(g)[0], ct_tensor_shape(g)[1]});
  if (st == CT_OK) st = ct_module_forward(logits, ct_module_get_submodule(self, "fc"), f);
  ct_release(f);
  ct_release(g);
  ct_release(a3);
  ct_release(d2);
  ct_release(p2);
  ct_release(a2);
  ct_release(a1);
  return st;
}

/* DigitsCNN.__init__: the children in PyTorch's order (its state_dict order). */
static ct_status build(ct_module **out, ct_device *d, double eps) {
  static const int k3[2] = {3, 3}, pad1[2] = {1, 1};
  ct_module *m = NULL, *c = NULL;
  ct_status st = ct_module_custom(&m, "DigitsCNN", forward, NULL, NULL);
  static const int64_t chans[4] = {1, 16, 32, 64};
  for (int i = 0; i < 3 && st == CT_OK; i++) {
    char conv[8], bn[8];
    snprintf(conv, sizeof conv, "conv%d", i + 1);
    snprintf(bn, sizeof bn, "bn%d", i + 1);
    st = ct_module_conv2d(&c, d, chans[i], chans[i + 1], k3, NULL, pad1, NULL, 1, true);
    if (st == CT_OK) st = ct_module_add_child(m, conv, c);
    ct_module_release(c);
    c = NULL;
    if (st == CT_OK) st = ct_module_batch_norm2d(&c, d, chans[i + 1], eps, 0.1, true, true);
    if (st == CT_OK) st = ct_module_add_child(m, bn, c);
    ct_module_release(c);
    c = NULL;
    if (st == CT_OK && i == 1) {
      st = ct_module_dropout(&c, 0.25);
      if (st == CT_OK) st = ct_module_add_child(m, "drop", c);
      ct_module_release(c);
      c = NULL;
    }
  }
  if (st == CT_OK) st = ct_module_linear(&c, d, 64, 10, true);
  if (st == CT_OK) st = ct_module_add_child(m, "fc", c);
  ct_module_release(c);
  if (st != CT_OK) {
    ct_module_release(m);
    m = NULL;
  }
  *out = m;
  return st;
}

ct_status digits_cnn_load(digits_cnn *m, const ct_safetensors *f) {
  *m = (digits_cnn){.eps = 0, .training = false};
  const char *eps = ct_safetensors_metadata_get(f, "bn_eps");
  if (!eps) {
    fprintf(stderr, "digits_cnn: the model file lacks the \"bn_eps\" metadata\n");
    return CT_ERR_FORMAT;
  }
  m->eps = atof(eps);
  ct_tensor *w0 = NULL;
  ct_status st = ct_safetensors_get(&w0, f, k_names[0]);
  if (st != CT_OK) return st;
  /* The model file holds the weights (without the batch counts, as the fixtures'
   * load_state_dict(strict=False) in PyTorch) and test data: load the weights strictly from a
   * collection of just them, with the counts at 0 as PyTorch leaves them. */
  ct_safetensors *sd = NULL;
  st = build(&m->net, ct_tensor_device(w0), m->eps);
  ct_release(w0);
  if (st == CT_OK) st = ct_safetensors_new(&sd);
  for (int i = 0; i < DIGITS_NWEIGHTS && st == CT_OK; i++) {
    ct_tensor *t = NULL;
    st = ct_safetensors_get(&t, f, k_names[i]);
    if (st == CT_OK) st = ct_safetensors_set(sd, k_names[i], t);
    ct_release(t);
  }
  for (int i = 1; i <= 3 && st == CT_OK; i++) {
    char name[32];
    snprintf(name, sizeof name, "bn%d.num_batches_tracked", i);
    st = ct_safetensors_set(sd, name, ct_module_get_buffer(m->net, name));
  }
  if (st == CT_OK) st = ct_module_load_state_dict_from(m->net, sd, true);
  ct_safetensors_free(sd);
  /* w[i]: the module's own tensors, by name. */
  for (int i = 0; i < DIGITS_NWEIGHTS && st == CT_OK; i++) {
    ct_tensor *t = ct_module_get_parameter(m->net, k_names[i]);
    if (!t) t = ct_module_get_buffer(m->net, k_names[i]);
    m->w[i] = ct_retain(t);
    if (!t) st = CT_ERR_INVALID_ARGUMENT;
  }
  if (st != CT_OK) digits_cnn_release(m);
  return st;
}

void digits_cnn_release(digits_cnn *m) {
  for (int i = 0; i < DIGITS_NWEIGHTS; i++) {
    ct_release(m->w[i]);
    m->w[i] = NULL;
  }
  ct_module_release(m->net);
  m->net = NULL;
}

ct_status digits_cnn_forward(ct_tensor **logits, const digits_cnn *m, const ct_tensor *x) {
  *logits = NULL;
  /* The flag the callers set (PyTorch's model.train() / model.eval()). */
  ct_status st = ct_module_train(m->net, m->training);
  return st == CT_OK ? ct_module_forward(logits, m->net, x) : st;
}

ct_status digits_cnn_loss(ct_tensor **loss, const digits_cnn *m, const ct_tensor *x, const ct_tensor *y) {
  ct_tensor *logits = NULL;
  ct_status st = digits_cnn_forward(&logits, m, x);
  if (st == CT_OK) st = ct_cross_entropy(loss, logits, y, -100, 0.0, CT_REDUCTION_MEAN);
  ct_release(logits);
  return st;
}

ct_status digits_fixture_batch(ct_tensor **x, ct_tensor **y, const ct_safetensors *f, int64_t start, int64_t count) {
  ct_tensor *xs = NULL, *ys = NULL, *u8 = NULL, *xf = NULL, *order = NULL, *row = NULL, *idx = NULL, *idx64 = NULL;
  *x = *y = NULL;
  ct_status st = ct_safetensors_get(&u8, f, "train.x");
  if (st == CT_OK) st = ct_cast(&xf, u8, CT_F32);
  if (st == CT_OK) st = ct_mul_scalar(&xs, xf, 1.0 / 16.0);
  if (st == CT_OK) st = ct_safetensors_get(&ys, f, "train.y");
  if (st == CT_OK) st = ct_safetensors_get(&order, f, "order");
  if (st == CT_OK) st = ct_slice(&row, order, 0, 0, 1, 1);
  if (st == CT_OK) st = ct_slice(&idx, row, 1, start, start + count, 1);
  if (st == CT_OK) st = ct_reshape(&idx64, idx, 1, (int64_t[]){count});
  ct_release(idx);
  idx = NULL;
  if (st == CT_OK) st = ct_cast(&idx, idx64, CT_I64);
  if (st == CT_OK) st = ct_index_select(x, xs, 0, idx);
  if (st == CT_OK) st = ct_index_select(y, ys, 0, idx);
  ct_release(idx64);
  ct_release(idx);
  ct_release(row);
  ct_release(order);
  ct_release(xf);
  ct_release(u8);
  ct_release(ys);
  ct_release(xs);
  return st;
}
