/* Gradient formulas of the matmul, linear, addmm (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "core/error.h"

ct_status ct__grad_matmul(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_linear(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_addmm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}
