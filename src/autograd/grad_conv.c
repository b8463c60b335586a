/* Gradient formulas of the convolutions and pooling (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "core/error.h"

ct_status ct__grad_conv(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_max_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_avg_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_adaptive_avg_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

