/* Gradient formulas of the indexing and scans (rows of tensor/grad_ops.def).
 *
 * The nodes (recorded in src/index/) keep the wrapped dim in i[0] and save the index (or the
 * mask) in slot 0; cumprod saves x in slot 0 and its output in slot 1. Integer indices and bool
 * masks are inputs that never take a gradient.
 *
 * Accumulations go through ct_scatter_add, which adds each destination's sources in the
 * index's row-major order: gradients with repeated indices have the same bits on every run. */
#include <stdint.h>

#include "autograd/autograd.h"
#include "cltensor/elementwise.h"
#include "cltensor/index.h"
#include "cltensor/reduce.h"
#include "cltensor/shape.h"
#include "core/error.h"

/* *out = scatter_add(zeros of e's shape, dim, index, src): the gradient of a gather of e's
 * input. A 0-dim input was gathered whole: its gradient is src itself. */
static ct_status scatter_into_zeros(ct_tensor **out, const ct__edge *e, int dim, const ct_tensor *index,
                                    const ct_tensor *src) {
  if (e->ndim == 0) {
    *out = ct_retain((ct_tensor *)src);
    return CT_OK;
  }
  ct_tensor *z = NULL;
  CT__TRY(ct__ag_zeros_for(&z, e));
  ct_status st = ct_scatter_add(out, z, dim, index, src);
  ct_release(z);
  return st;
}

/* index_select: the selected slices go back to their positions, repeats accumulating: the 1-D
 * index, shaped [1, .., n, .., 1] along dim and expanded to g's shape, scatters g into zeros. */
ct_status ct__grad_index_select(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  int dim = (int)n->i[0], nd = ct_tensor_ndim(g);
  if (nd == 0) return scatter_into_zeros(&gin[0], &n->in[0], dim, NULL, g);
  int64_t shape[CT_MAX_DIMS];
  for (int i = 0; i < nd; i++) shape[i] = i == dim ? ct_tensor_shape(g)[i] : 1;
  ct_tensor *ix = NULL, *ie = NULL;
  ct_status st = ct_reshape(&ix, ct__ag_saved(n, 0), nd, shape);
  if (st == CT_OK) st = ct_expand(&ie, ix, nd, ct_tensor_shape(g));
  if (st == CT_OK) st = scatter_into_zeros(&gin[0], &n->in[0], dim, ie, g);
  ct_release(ix);
  ct_release(ie);
  return st;
}

/* gather (and the values of sort/topk, recorded as the gather of their indices): g scattered
 * back into zeros of x's shape. */
ct_status ct__grad_gather(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  return scatter_into_zeros(&gin[0], &n->in[0], (int)n->i[0], ct__ag_saved(n, 0), g);
}

/* r = x.scatter_add(dim, index, src): x gets g; src gets g gathered at the index. Where src is
 * larger than the index (allowed: only src's leading part along each dim is read), the rest of
 * src's gradient is zero; PyTorch's formula (grad.gather(dim, index)) has the index's shape
 * there and fails the shape check instead. */
ct_status ct__grad_scatter_add(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (n->in[0].needed) gin[0] = ct_retain((ct_tensor *)g);
  if (!n->in[2].needed) return CT_OK;
  const ct__edge *es = &n->in[2];
  const ct_tensor *index = ct__ag_saved(n, 0);
  ct_tensor *gs = NULL;
  CT__TRY(ct_gather(&gs, g, (int)n->i[0], index));
  int64_t pad[2 * CT_MAX_DIMS];
  bool same = true;
  for (int i = 0; i < es->ndim; i++) {
    /* F.pad's order: (left, right) pairs from the last dim backwards. */
    pad[2 * (es->ndim - 1 - i)] = 0;
    pad[2 * (es->ndim - 1 - i) + 1] = es->shape[i] - ct_tensor_shape(index)[i];
    same = same && es->shape[i] == ct_tensor_shape(index)[i];
  }
  if (same) {
    gin[2] = gs;
    return CT_OK;
  }
  ct_status st = ct_pad(&gin[2], gs, 2 * es->ndim, pad, CT_PAD_CONSTANT, 0.0);
  ct_release(gs);
  return st;
}

/* embedding: weight's gradient is zeros with g's rows added at their indices (g as [N, D],
 * the indices as [N, 1] expanded to [N, D]), in the indices' order. No padding_idx (PyTorch's
 * default); max_norm, scale_grad_by_freq and sparse gradients do not exist here. */
ct_status ct__grad_embedding(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  int64_t rows = ct_numel(ct__ag_saved(n, 0)), gshape[2] = {rows, n->in[0].shape[1]}, ishape[2] = {rows, 1};
  ct_tensor *g2 = NULL, *ix = NULL, *ie = NULL;
  ct_status st = ct_reshape(&g2, g, 2, gshape);
  if (st == CT_OK) st = ct_reshape(&ix, ct__ag_saved(n, 0), 2, ishape);
  if (st == CT_OK) st = ct_expand(&ie, ix, 2, ct_tensor_shape(g2));
  if (st == CT_OK) st = scatter_into_zeros(&gin[0], &n->in[0], 0, ie, g2);
  ct_release(g2);
  ct_release(ix);
  ct_release(ie);
  return st;
}

/* masked_fill: g with the filled positions zeroed (of the broadcast shape: the engine sums it
 * back to x's). */
ct_status ct__grad_masked_fill(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  return ct_masked_fill(&gin[0], g, ct__ag_saved(n, 0), 0.0);
}

/* The sums of g from each position to the end along dim: flip, cumsum, flip. */
static ct_status reverse_cumsum(ct_tensor **out, const ct_tensor *g, int dim) {
  *out = NULL;
  if (ct_tensor_ndim(g) == 0) {
    *out = ct_retain((ct_tensor *)g);
    return CT_OK;
  }
  ct_tensor *f = NULL, *c = NULL;
  ct_status st = ct_flip(&f, g, 1, &dim);
  if (st == CT_OK) st = ct_cumsum(&c, f, dim);
  if (st == CT_OK) st = ct_flip(out, c, 1, &dim);
  ct_release(f);
  ct_release(c);
  return st;
}

ct_status ct__grad_cumsum(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  return reverse_cumsum(&gin[0], g, (int)n->i[0]);
}

/* *out = reverse_cumsum(g * y) along dim. */
static ct_status rcs_of_product(ct_tensor **out, const ct_tensor *g, const ct_tensor *y, int dim) {
  ct_tensor *w = NULL;
  CT__TRY(ct_mul(&w, g, y));
  ct_status st = reverse_cumsum(out, w, dim);
  ct_release(w);
  return st;
}

/* cumprod, y_k = x_0 ... x_k: dx_i = sum_{k >= i} g_k y_k / x_i wherever x_i != 0 (exact, as the
 * product y_k holds x_i; it is 0 after a line's first zero, as it should). At a line's first
 * zero z, dx_z = sum_{k >= z} g_k y'_k where y' = cumprod of x with that zero replaced by 1;
 * at later zeros dx = 0 (their products hold the first zero). PyTorch's cumprod_backward
 * computes the same values (it also takes the division-only path when x has no zero). */
ct_status ct__grad_cumprod(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  int dim = (int)n->i[0];
  const ct_tensor *x = ct__ag_saved(n, 0), *y = ct__ag_saved(n, 1);
  ct_tensor *a1 = NULL, *isz = NULL, *anyz = NULL;
  ct_status st = rcs_of_product(&a1, g, y, dim);
  if (st == CT_OK) st = ct_eq_scalar(&isz, x, 0.0);
  if (st == CT_OK) st = ct_any(&anyz, isz, 0, NULL, false);
  uint8_t zeros = 0; /* bool elements are one byte */
  if (st == CT_OK) st = ct_to_host(anyz, &zeros, sizeof zeros);
  ct_release(anyz);
  if (st == CT_OK && !zeros) {
    st = ct_div(&gin[0], a1, x);
  } else if (st == CT_OK) {
    ct_tensor *cz = NULL, *c1 = NULL, *first = NULL, *x1 = NULL, *y1 = NULL, *a2 = NULL, *q = NULL, *q0 = NULL;
    st = ct_cumsum(&cz, isz, dim); /* i64: the count of zeros up to each position */
    if (st == CT_OK) st = ct_eq_scalar(&c1, cz, 1.0);
    if (st == CT_OK) st = ct_logical_and(&first, isz, c1);
    if (st == CT_OK) st = ct_masked_fill(&x1, x, first, 1.0);
    if (st == CT_OK) st = ct_cumprod(&y1, x1, dim);
    if (st == CT_OK) st = rcs_of_product(&a2, g, y1, dim);
    if (st == CT_OK) st = ct_div(&q, a1, x);
    if (st == CT_OK) st = ct_masked_fill(&q0, q, isz, 0.0);
    if (st == CT_OK) st = ct_where(&gin[0], first, a2, q0);
    ct_release(cz);
    ct_release(c1);
    ct_release(first);
    ct_release(x1);
    ct_release(y1);
    ct_release(a2);
    ct_release(q);
    ct_release(q0);
  }
  ct_release(a1);
  ct_release(isz);
  return st;
}
