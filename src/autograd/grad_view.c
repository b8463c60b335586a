/* Gradient formulas of the views and copies (rows of tensor/grad_ops.def).
 *
 * A view's gradient is the output's gradient seen in the input's geometry: reshaped back
 * (view, reshape, squeeze, unsqueeze), permuted back (permute, transpose), placed into zeros
 * (slice, and so chunk and split, whose pieces are slices), or passed through (expand: the
 * engine sums the broadcast dims back; clone and contiguous: identity). The results may be
 * views of g: formulas never write into g, and the engine copies what it keeps. */
#include "autograd/autograd.h"
#include "cltensor/shape.h"
#include "core/error.h"

/* view, reshape, squeeze, unsqueeze: g reshaped to the input's shape (a view when g's strides
 * allow it). */
ct_status ct__grad_reshape(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__edge *e = &n->in[0];
  if (!e->needed) return CT_OK;
  return ct_reshape(&gin[0], g, e->ndim, e->shape);
}

/* permute, transpose: the gradient goes back through the inverse permutation. */
ct_status ct__grad_permute(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  const int *perm = ct__rec_PERMUTE(n)->perm;
  int inv[CT_MAX_DIMS];
  for (int k = 0; k < n->out_ndim; k++) inv[perm[k]] = k;
  return ct_permute(&gin[0], g, inv);
}

/* slice (and the pieces of chunk and split): zeros of the input's shape with g copied into the
 * same slice. */
ct_status ct__grad_slice(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__edge *e = &n->in[0];
  if (!e->needed) return CT_OK;
  const ct__rec_slice *r = ct__rec_SLICE(n);
  int d = r->dim;
  int64_t start = r->start, step = r->step, len = n->out_shape[d];
  ct_tensor *z = NULL, *v = NULL;
  CT__TRY(ct__ag_zeros_for(&z, e));
  ct_status st = CT_OK;
  if (len > 0) {
    st = ct_slice(&v, z, d, start, start + (len - 1) * step + 1, step);
    if (st == CT_OK) st = ct_copy(v, g);
    ct_release(v);
  }
  return ct__tensor_result(&gin[0], z, st);
}

/* expand: g as it is; the engine sums it over the expanded dims back to the input's shape. */
ct_status ct__grad_expand(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (n->in[0].needed) gin[0] = ct_retain((ct_tensor *)g);
  return CT_OK;
}

/* clone, contiguous (when it copied): the identity, as expand's pass-through (shapes equal). */
ct_status ct__grad_clone(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__grad_expand(n, g, gin); }
