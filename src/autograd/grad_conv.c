/* Gradient formulas of the convolutions and pooling (rows of tensor/grad_ops.def). The kernels
 * are the nn family's (src/nn/conv_bwd.c, src/nn/pool.c: ct__nn_conv_backward,
 * ct__nn_pool2d_backward); these unpack the node. */
#include "autograd/autograd.h"
#include "core/error.h"
#include "nn/nn.h"

/* CONV (ct_conv2d, ct_conv1d): ins x, w, bias. ct__nn_conv_backward makes the three gradients
 * (the bias's: g summed over all but the channel). */
ct_status ct__grad_conv(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_conv *r = ct__rec_CONV(n);
  return ct__nn_conv_backward(n->in[0].needed ? &gin[0] : NULL, n->in[1].needed ? &gin[1] : NULL,
                              n->in[2].needed ? &gin[2] : NULL, g, r->x, r->w, r->stride, r->padding, r->dilation,
                              r->groups, r->one_d, n->fn);
}

/* The three pools (their records are ct__rec_pool); max pool saved x. */
static ct_status grad_pool(ct__node *n, const ct_tensor *g, ct_tensor **gin, int mode) {
  if (!n->in[0].needed) return CT_OK;
  const ct__edge *e = &n->in[0];
  const ct__rec_pool *r = &n->rec.pool;
  return ct__nn_pool2d_backward(&gin[0], g, mode == CT__POOL_MAX ? r->x : NULL, e->ndim, e->shape, e->dtype,
                                e->device, mode, r->win, n->fn);
}

ct_status ct__grad_max_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return grad_pool(n, g, gin, CT__POOL_MAX);
}

ct_status ct__grad_avg_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return grad_pool(n, g, gin, n->sub); /* CT__POOL_AVG or CT__POOL_AVG_EXCL */
}

ct_status ct__grad_adaptive_avg_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return grad_pool(n, g, gin, CT__POOL_ADAPTIVE);
}
