/* Gradient formulas of the views and copies (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "core/error.h"

ct_status ct__grad_reshape(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_permute(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_slice(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_expand(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_clone(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}
