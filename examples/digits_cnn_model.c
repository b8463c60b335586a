/* The digits CNN from libcltensor ops (see digits_cnn_model.h). */
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

ct_status digits_cnn_load(digits_cnn *m, const ct_safetensors *f) {
  *m = (digits_cnn){.eps = 0, .training = false};
  const char *eps = ct_safetensors_metadata_get(f, "bn_eps");
  if (!eps) {
    fprintf(stderr, "digits_cnn: the model file lacks the \"bn_eps\" metadata\n");
    return CT_ERR_FORMAT;
  }
  m->eps = atof(eps);
  for (int i = 0; i < DIGITS_NWEIGHTS; i++) {
    ct_status st = ct_safetensors_get(&m->w[i], f, k_names[i]);
    if (st != CT_OK) {
      digits_cnn_release(m);
      return st;
    }
  }
  return CT_OK;
}

void digits_cnn_release(digits_cnn *m) {
  for (int i = 0; i < DIGITS_NWEIGHTS; i++) {
    ct_release(m->w[i]);
    m->w[i] = NULL;
  }
}

/* relu(batch_norm(conv2d(x))) with 3x3 windows, padding 1; w points at the conv weight, followed
 * by the conv bias and the batch norm's running mean, running variance, weight and bias.
 * Training: the batch's statistics, the running ones updated in place (PyTorch's momentum). */
static ct_status conv_bn_relu(ct_tensor **out, const ct_tensor *x, ct_tensor *const *w, double eps, bool training) {
  static const int one[2] = {1, 1}, pad[2] = {1, 1};
  ct_tensor *c = NULL, *n = NULL;
  ct_status st = ct_conv2d(&c, x, w[0], w[1], one, pad, one, 1);
  if (st == CT_OK) st = ct_batch_norm(&n, c, w[2], w[3], w[4], w[5], training, 0.1, eps);
  if (st == CT_OK) st = ct_relu(out, n);
  ct_release(n);
  ct_release(c);
  return st;
}

ct_status digits_cnn_forward(ct_tensor **logits, const digits_cnn *m, const ct_tensor *x) {
  static const int two[2] = {2, 2}, zero[2] = {0, 0};
  static const int64_t one_by_one[2] = {1, 1};
  ct_tensor *a1 = NULL, *a2 = NULL, *p2 = NULL, *d2 = NULL, *a3 = NULL, *g = NULL, *f = NULL;
  *logits = NULL;
  ct_status st = conv_bn_relu(&a1, x, &m->w[DIGITS_CONV1_W], m->eps, m->training);
  if (st == CT_OK) st = conv_bn_relu(&a2, a1, &m->w[DIGITS_CONV2_W], m->eps, m->training);
  if (st == CT_OK) st = ct_max_pool2d(&p2, a2, two, two, zero);
  if (st == CT_OK) st = ct_dropout(&d2, p2, 0.25, m->training);
  if (st == CT_OK) st = conv_bn_relu(&a3, d2, &m->w[DIGITS_CONV3_W], m->eps, m->training);
  if (st == CT_OK) st = ct_adaptive_avg_pool2d(&g, a3, one_by_one);
  if (st == CT_OK) st = ct_view(&f, g, 2, (int64_t[]){ct_tensor_shape(g)[0], ct_tensor_shape(g)[1]});
  if (st == CT_OK) st = ct_linear(logits, f, m->w[DIGITS_FC_W], m->w[DIGITS_FC_B]);
  ct_release(f);
  ct_release(g);
  ct_release(a3);
  ct_release(d2);
  ct_release(p2);
  ct_release(a2);
  ct_release(a1);
  return st;
}
