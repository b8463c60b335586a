/* Gradient formulas of the norms, attention, dropout and losses (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "autograd/grad_tmp.h"
#include "cltensor/elementwise.h"
#include "core/error.h"
#include "nn/nn.h"

/* The gradient of input i when it is needed, else NULL (the kernel skips it). */
#define WANT(n, i, gin) ((i) < (n)->nin && (n)->in[i].needed ? &(gin)[i] : NULL)

static ct_status grad_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_norm *r = &n->rec.norm;
  return ct__norm_backward(WANT(n, 0, gin), WANT(n, 1, gin), WANT(n, 2, gin), r->x, g, r->w, (int)r->nnorm, r->eps,
                           n->sub, r->param_dtype, "ct_backward");
}

ct_status ct__grad_layer_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return grad_norm(n, g, gin); }

ct_status ct__grad_rms_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return grad_norm(n, g, gin); }

ct_status ct__grad_batch_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_batch_norm *r = ct__rec_BATCH_NORM(n);
  return ct__bn_backward(WANT(n, 0, gin), WANT(n, 1, gin), WANT(n, 2, gin), r->x, g, r->ss, r->training,
                         r->param_dtype, "ct_backward");
}

ct_status ct__grad_sdpa(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_sdpa *r = ct__rec_SDPA(n);
  return ct__sdpa_backward(WANT(n, 0, gin), WANT(n, 1, gin), WANT(n, 2, gin), WANT(n, 3, gin), r->q, r->k, r->v,
                           r->probs, g, r->scale);
}

ct_status ct__grad_dropout(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_dropout *r = ct__rec_DROPOUT(n);
  return ct__dropout_backward(&gin[0], g, r->p, r->seed, r->offset, "ct_backward");
}

static ct_status grad_class_loss(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  const ct__rec_class_loss *r = &n->rec.class_loss;
  return ct__class_loss_backward(&gin[0], r->x, r->target, g, r->nvalid, r->ignore_index, r->eps,
                                 (ct_reduction)r->reduction, r->cross_entropy, "ct_backward");
}

ct_status ct__grad_cross_entropy(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return grad_class_loss(n, g, gin);
}

ct_status ct__grad_nll_loss(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return grad_class_loss(n, g, gin); }

/* mse_loss: d/da = 2 (a - b) g (/ the broadcast count for MEAN), d/db its negation; the engine
 * sums them back to a's and b's shapes. */
ct_status ct__grad_mse_loss(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_mse_loss *r = ct__rec_MSE_LOSS(n);
  ct__tmps s = {0};
  ct_tensor *diff = TMP(&s, ct_sub, r->a, r->b);
  double f = 2.0;
  if (diff && r->reduction == CT_REDUCTION_MEAN) f /= (double)ct_numel(diff);
  ct_tensor *d2 = TMP(&s, ct_mul_scalar, diff, f);
  ct_tensor *ga = TMP(&s, ct_mul, d2, g);
  if (n->in[1].needed) GIN(&s, &gin[1], ct_neg, ga);
  if (s.st == CT_OK && n->in[0].needed) gin[0] = ct_retain(ga);
  return ct__tmps_end(&s);
}
