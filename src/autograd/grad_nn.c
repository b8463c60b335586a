/* Gradient formulas of the norms, attention, dropout and losses (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
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
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_dropout(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_cross_entropy(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_nll_loss(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_mse_loss(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}
