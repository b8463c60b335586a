/* Gradient formulas of the norms, attention, dropout and losses (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "core/error.h"

ct_status ct__grad_layer_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_rms_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_batch_norm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
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
