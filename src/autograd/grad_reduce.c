/* Gradient formulas of the reductions and softmax (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "cltensor/elementwise.h"
#include "core/error.h"



ct_status ct__grad_prod(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_amax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_var(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_logsumexp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_softmax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

ct_status ct__grad_log_softmax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

/* g (the reduced shape, kept dims or not) as a view of the input's shape: reshaped to the
 * kept-dims shape, then expanded (stride 0 along the reduced dims). */
ct_status ct__ag_unreduce(ct_tensor **out, const ct__node *n, const ct_tensor *g) {
  const ct__edge *e = &n->in[0];
  int64_t ks[CT_MAX_DIMS];
  for (int d = 0; d < e->ndim; d++) ks[d] = (n->i[1] >> d) & 1 ? 1 : e->shape[d];
  ct_tensor *r = NULL;
  CT__TRY(ct_reshape(&r, g, e->ndim, ks));
  ct_status st = ct_expand(out, r, e->ndim, e->shape);
  ct_release(r);
  return st;
}

ct_status ct__grad_sum(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__ag_unreduce(&gin[0], n, g);
}

ct_status ct__grad_mean(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  int64_t in = 1, out = 1;
  for (int d = 0; d < n->in[0].ndim; d++) in *= n->in[0].shape[d];
  for (int d = 0; d < n->out_ndim; d++) out *= n->out_shape[d];
  ct_tensor *u = NULL;
  CT__TRY(ct__ag_unreduce(&u, n, g));
  /* PyTorch divides by the count of reduced elements; an empty reduction gives NaN there too. */
  ct_status st = ct_div_scalar(&gin[0], u, out ? (double)in / (double)out : 0.0);
  ct_release(u);
  return st;
}
