/* Gradient formulas of the convolutions and pooling (rows of tensor/grad_ops.def). The kernels
 * are the nn family's (src/nn/conv_bwd.c, src/nn/pool.c: ct__nn_conv_backward,
 * ct__nn_pool2d_backward); these unpack the node and add the bias gradient. */
#include "autograd/autograd.h"
#include "cltensor/reduce.h"
#include "core/error.h"
#include "nn/nn.h"

/* CONV (ct_conv2d, ct_conv1d): ins x, w, bias; saved x, w; i[0..7] stride h, w, padding h, w,
 * dilation h, w, groups, one_d. gx and gw from ct__nn_conv_backward; gbias = g summed over every
 * dim but the channel (dim 1 of a batched output, 0 of an unbatched one). */
ct_status ct__grad_conv(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *x = ct__ag_saved(n, 0), *w = ct__ag_saved(n, 1);
  int stride[2] = {(int)n->i[0], (int)n->i[1]}, padding[2] = {(int)n->i[2], (int)n->i[3]};
  int dilation[2] = {(int)n->i[4], (int)n->i[5]};
  bool one_d = n->i[7] != 0;
  if (n->in[0].needed || n->in[1].needed)
    CT__TRY(ct__nn_conv_backward(n->in[0].needed ? &gin[0] : NULL, n->in[1].needed ? &gin[1] : NULL, g, x, w,
                                 stride, padding, dilation, (int)n->i[6], one_d, n->fn));
  if (n->in[2].needed) {
    /* Output [N, Cout, ...] or unbatched [Cout, ...]: the channel is dim 1 when the output has
     * as many dims as the batched form (4 for conv2d, 3 for conv1d). */
    int batched_ndim = one_d ? 3 : 4, ch = g->ndim == batched_ndim ? 1 : 0, dims[CT_MAX_DIMS], nd = 0;
    for (int i = 0; i < g->ndim; i++)
      if (i != ch) dims[nd++] = i;
    CT__TRY(ct_sum(&gin[2], g, nd, dims, false));
  }
  return CT_OK;
}

/* The three pools: i[0..5] the window (kh, kw, sh, sw, ph, pw); max pool saved x. */
static ct_status grad_pool(ct__node *n, const ct_tensor *g, ct_tensor **gin, int mode) {
  if (!n->in[0].needed) return CT_OK;
  const ct__edge *e = &n->in[0];
  int win[6];
  for (int i = 0; i < 6; i++) win[i] = (int)n->i[i];
  return ct__nn_pool2d_backward(&gin[0], g, mode == CT__POOL_MAX ? ct__ag_saved(n, 0) : NULL, e->ndim, e->shape,
                                e->dtype, e->device, mode, win, n->fn);
}

ct_status ct__grad_max_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return grad_pool(n, g, gin, CT__POOL_MAX);
}

ct_status ct__grad_avg_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return grad_pool(n, g, gin, CT__POOL_AVG);
}

ct_status ct__grad_adaptive_avg_pool2d(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return grad_pool(n, g, gin, CT__POOL_ADAPTIVE);
}
