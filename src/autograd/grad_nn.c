/* Gradient formulas of the norms, attention, dropout and losses (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "cltensor/elementwise.h"
#include "core/error.h"
#include "nn/nn.h"

/* The gradient of input i when it is needed, else NULL (the kernel skips it). */
#define WANT(n, i, gin) ((i) < (n)->nin && (n)->in[i].needed ? &(gin)[i] : NULL)

static ct_status grad_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__norm_backward(WANT(n, 0, gin), WANT(n, 1, gin), WANT(n, 2, gin), n->saved[0], g, n->saved[1],
                           (int)n->i[0], n->d[0], n->sub, (ct_dtype)n->i[1], "ct_backward");
}

ct_status ct__grad_layer_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return grad_norm(n, g, gin); }

ct_status ct__grad_rms_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return grad_norm(n, g, gin); }

ct_status ct__grad_batch_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__bn_backward(WANT(n, 0, gin), WANT(n, 1, gin), WANT(n, 2, gin), n->saved[0], g, n->saved[1],
                         n->i[0] != 0, (ct_dtype)n->i[1], "ct_backward");
}

ct_status ct__grad_sdpa(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__sdpa_backward(WANT(n, 0, gin), WANT(n, 1, gin), WANT(n, 2, gin), WANT(n, 3, gin), n->saved[0],
                           n->saved[1], n->saved[2], n->saved[3], g, n->d[0]);
}

ct_status ct__grad_dropout(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__dropout_backward(&gin[0], g, n->d[0], (uint64_t)n->i[0], (uint64_t)n->i[1], "ct_backward");
}

static ct_status grad_class_loss(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  return ct__class_loss_backward(&gin[0], n->saved[0], n->saved[1], g, n->saved[2], n->i[0], n->d[0],
                                 (ct_reduction)n->i[1], (int)n->i[2], "ct_backward");
}

ct_status ct__grad_cross_entropy(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return grad_class_loss(n, g, gin);
}

ct_status ct__grad_nll_loss(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return grad_class_loss(n, g, gin); }

/* mse_loss: d/da = 2 (a - b) g (/ the broadcast count for MEAN), d/db its negation; the engine
 * sums them back to a's and b's shapes. */
ct_status ct__grad_mse_loss(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_tensor *diff = NULL, *t2 = NULL, *ga = NULL;
  ct_status st = ct_sub(&diff, n->saved[0], n->saved[1]);
  double f = 2.0;
  if (st == CT_OK && n->i[0] == CT_REDUCTION_MEAN) f /= (double)ct_numel(diff);
  if (st == CT_OK) st = ct_mul_scalar(&t2, diff, f);
  if (st == CT_OK) st = ct_mul(&ga, t2, g);
  if (st == CT_OK && n->in[1].needed) st = ct_neg(&gin[1], ga);
  if (st == CT_OK && n->in[0].needed) gin[0] = ct_retain(ga);
  ct_release(diff);
  ct_release(t2);
  ct_release(ga);
  return st;
}
