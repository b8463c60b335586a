/* Gradient formulas of the indexing and scans (rows of tensor/grad_ops.def).
 *
 * The nodes (recorded in src/index/) keep the wrapped dim and save the index, or the mask, or
 * cumprod's x and output (ct__rec_index). Integer indices and bool masks are inputs that never
 * take a gradient.
 *
 * Accumulations go through ct_scatter_add, which adds each destination's sources in the
 * index's row-major order: gradients with repeated indices have the same bits on every run. */
#include <stdint.h>

#include "autograd/autograd.h"
#include "autograd/grad_tmp.h"
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
  const ct__rec_index *r = ct__rec_INDEX_SELECT(n);
  int dim = r->dim, nd = ct_tensor_ndim(g);
  if (nd == 0) return scatter_into_zeros(&gin[0], &n->in[0], dim, NULL, g);
  int64_t shape[CT_MAX_DIMS];
  for (int i = 0; i < nd; i++) shape[i] = i == dim ? ct_tensor_shape(g)[i] : 1;
  ct__tmps s = {0};
  ct_tensor *ix = TMP(&s, ct_reshape, r->index, nd, shape);
  ct_tensor *ie = TMP(&s, ct_expand, ix, nd, ct_tensor_shape(g));
  GIN(&s, &gin[0], scatter_into_zeros, &n->in[0], dim, ie, g);
  return ct__tmps_end(&s);
}

/* gather (and the values of sort/topk, recorded as the gather of their indices): g scattered
 * back into zeros of x's shape. */
ct_status ct__grad_gather(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  const ct__rec_index *r = ct__rec_GATHER(n);
  return scatter_into_zeros(&gin[0], &n->in[0], r->dim, r->index, g);
}

/* r = x.scatter_add(dim, index, src): x gets g; src gets g gathered at the index. Where src is
 * larger than the index (allowed: only src's leading part along each dim is read), the rest of
 * src's gradient is zero; PyTorch's formula (grad.gather(dim, index)) has the index's shape
 * there and fails the shape check instead. */
ct_status ct__grad_scatter_add(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (n->in[0].needed) gin[0] = ct_retain((ct_tensor *)g);
  if (!n->in[2].needed) return CT_OK;
  const ct__edge *es = &n->in[2];
  const ct__rec_index *r = ct__rec_SCATTER_ADD(n);
  const ct_tensor *index = r->index;
  ct_tensor *gs = NULL;
  CT__TRY(ct_gather(&gs, g, r->dim, index));
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
  const ct_tensor *index = ct__rec_EMBEDDING(n)->index;
  int64_t rows = ct_numel(index), gshape[2] = {rows, n->in[0].shape[1]}, ishape[2] = {rows, 1};
  ct__tmps s = {0};
  ct_tensor *g2 = TMP(&s, ct_reshape, g, 2, gshape);
  ct_tensor *ix = TMP(&s, ct_reshape, index, 2, ishape);
  ct_tensor *ie = TMP(&s, ct_expand, ix, 2, gshape); /* g2's shape */
  GIN(&s, &gin[0], scatter_into_zeros, &n->in[0], 0, ie, g2);
  return ct__tmps_end(&s);
}

/* masked_fill: g with the filled positions zeroed (of the broadcast shape: the engine sums it
 * back to x's). */
ct_status ct__grad_masked_fill(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  return ct_masked_fill(&gin[0], g, ct__rec_MASKED_FILL(n)->mask, 0.0);
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
  return reverse_cumsum(&gin[0], g, ct__rec_CUMSUM(n)->dim);
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
  const ct__rec_index *r = ct__rec_CUMPROD(n);
  const ct_tensor *x = r->x, *y = r->out;
  int dim = r->dim;
  ct__tmps s = {0};
  ct_tensor *a1 = TMP(&s, rcs_of_product, g, y, dim);
  ct_tensor *isz = TMP(&s, ct_eq_scalar, x, 0.0);
  ct_tensor *anyz = TMP(&s, ct_any, isz, 0, NULL, false);
  uint8_t zeros = 0; /* bool elements are one byte */
  STEP(&s, ct_to_host(anyz, &zeros, sizeof zeros));
  ct__tmps_drop(&s, anyz);
  if (!zeros) {
    GIN(&s, &gin[0], ct_div, a1, x);
    return ct__tmps_end(&s);
  }
  ct_tensor *cz = TMP(&s, ct_cumsum, isz, dim); /* i64: the count of zeros up to each position */
  ct_tensor *c1 = TMP(&s, ct_eq_scalar, cz, 1.0);
  ct_tensor *first = TMP(&s, ct_logical_and, isz, c1);
  ct_tensor *x1 = TMP(&s, ct_masked_fill, x, first, 1.0);
  ct_tensor *y1 = TMP(&s, ct_cumprod, x1, dim);
  ct_tensor *a2 = TMP(&s, rcs_of_product, g, y1, dim);
  ct_tensor *q = TMP(&s, ct_div, a1, x);
  ct_tensor *q0 = TMP(&s, ct_masked_fill, q, isz, 0.0);
  GIN(&s, &gin[0], ct_where, first, a2, q0);
  return ct__tmps_end(&s);
}
