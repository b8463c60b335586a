/* Gradient formulas of the matmul, linear, addmm (rows of tensor/grad_ops.def).
 *
 * The nodes (recorded in src/linalg/matmul.c) save the GEMM operands where the other operand's
 * gradient needs them: slot 0 the left operand (a, or linear's x), slot 1 the right one (b, or
 * linear's weight); d[0] is addmm's beta, d[1] its alpha.
 *
 * The products run with autocast off: ct_backward suspends it for every formula, so a backward
 * computes in the dtypes the forward recorded (engine.c). */
#include "autograd/autograd.h"
#include "cltensor/elementwise.h"
#include "cltensor/linalg.h"
#include "core/error.h"

/* t with its last two dims swapped (a view); a 1-D t of length k as the [1, k] or [k, 1]
 * matrix (row: [1, k]) that the transposed operand of a matrix-vector product is. */
static ct_status mm_t(ct_tensor **out, const ct_tensor *t, bool row) {
  if (ct_tensor_ndim(t) == 1) {
    int64_t k = ct_tensor_shape(t)[0];
    int64_t shape[2] = {row ? 1 : k, row ? k : 1};
    return ct_reshape(out, t, 2, shape);
  }
  return ct_transpose(out, t, -1, -2);
}

/* *out = t as the matrix [product of all dims but the last, last dim] (sizes given, not -1:
 * an empty t has no inferable dim). */
static ct_status mm_flat(ct_tensor **out, const ct_tensor *t) {
  int nd = ct_tensor_ndim(t);
  const int64_t *sh = ct_tensor_shape(t);
  int64_t shape[2] = {1, sh[nd - 1]};
  for (int i = 0; i < nd - 1; i++) shape[0] *= sh[i];
  return ct_reshape(out, t, 2, shape);
}

/* ga = g @ b^T and gb = a^T @ g for r = a @ b with ct_matmul's shapes (ea, eb: a's and b's
 * edges; a is needed for gb, b for ga). g gets back the dims a 1-D operand's product removed
 * ([..., n] -> [..., 1, n] for a 1-D a, [..., m] -> [..., m, 1] for a 1-D b), and the results
 * lose the dims the 1-D operands gained. Batch dims broadcast in the products; the engine sums
 * them back to each operand's shape, except for a 2-D (or 1-D) b under a batched a: its
 * gradient is one GEMM over a's flattened leading dims, a^T [k, B*m] @ g [B*m, n], rather
 * than B products and a sum. */
static ct_status mm_grads(const ct__edge *ea, const ct__edge *eb, const ct_tensor *g, const ct_tensor *a,
                          const ct_tensor *b, ct_tensor **ga, ct_tensor **gb) {
  bool a1 = ea->ndim == 1, b1 = eb->ndim == 1;
  ct_tensor *g2 = NULL, *x = NULL, *y = NULL, *p = NULL;
  ct_status st = CT_OK;
  if (a1 && b1) {
    int64_t one[2] = {1, 1};
    st = ct_reshape(&g2, g, 2, one);
  } else if (a1 || b1) {
    st = ct_unsqueeze(&g2, g, a1 ? -2 : -1);
  } else {
    g2 = ct_retain((ct_tensor *)g);
  }
  if (st == CT_OK && ea->needed) {
    st = mm_t(&x, b, true);
    if (st == CT_OK) st = ct_matmul(&p, g2, x);
    if (st == CT_OK) st = a1 ? ct_squeeze(ga, p, -2) : (*ga = ct_retain(p), CT_OK);
    ct_release(x);
    ct_release(p);
    x = p = NULL;
  }
  if (st == CT_OK && eb->needed) {
    if (ea->ndim > 2 && eb->ndim <= 2) {
      st = mm_flat(&y, a);
      if (st == CT_OK) st = ct_transpose(&x, y, 0, 1);
      ct_release(y);
      y = NULL;
      if (st == CT_OK) st = mm_flat(&y, g2);
    } else {
      st = mm_t(&x, a, false);
      if (st == CT_OK) y = ct_retain(g2);
    }
    if (st == CT_OK) st = ct_matmul(&p, x, y);
    if (st == CT_OK) st = b1 ? ct_squeeze(gb, p, -1) : (*gb = ct_retain(p), CT_OK);
    ct_release(x);
    ct_release(y);
    ct_release(p);
  }
  ct_release(g2);
  return st;
}

ct_status ct__grad_matmul(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return mm_grads(&n->in[0], &n->in[1], g, ct__ag_saved(n, 0), ct__ag_saved(n, 1), &gin[0], &gin[1]);
}

/* y = x @ W^T + bias: gx = g @ W; gW = g^T @ x over x's leading dims flattened (one GEMM:
 * [out, N] @ [N, in]); gbias = g, which the engine sums to bias's shape (any shape that
 * broadcasts to y). */
ct_status ct__grad_linear(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *x = ct__ag_saved(n, 0), *w = ct__ag_saved(n, 1);
  ct_status st = CT_OK;
  if (n->in[0].needed) st = ct_matmul(&gin[0], g, w);
  if (st == CT_OK && n->in[1].needed) {
    ct_tensor *gf = NULL, *gt = NULL, *xf = NULL;
    st = mm_flat(&gf, g);
    if (st == CT_OK) st = ct_transpose(&gt, gf, 0, 1);
    if (st == CT_OK) st = mm_flat(&xf, x);
    if (st == CT_OK) st = ct_matmul(&gin[1], gt, xf);
    ct_release(gf);
    ct_release(gt);
    ct_release(xf);
  }
  if (st == CT_OK && n->in[2].needed) gin[2] = ct_retain((ct_tensor *)g);
  return st;
}

/* r = beta * c + alpha * (a @ b): gc = beta * g (summed back to c's shape by the engine; as
 * PyTorch, beta = 0 still multiplies, so a NaN in g reaches c); ga, gb as matmul's, of alpha * g. */
ct_status ct__grad_addmm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  double beta = n->d[0], alpha = n->d[1];
  ct_status st = CT_OK;
  if (n->in[0].needed)
    st = beta == 1 ? (gin[0] = ct_retain((ct_tensor *)g), CT_OK) : ct_mul_scalar(&gin[0], g, beta);
  if (st == CT_OK && (n->in[1].needed || n->in[2].needed)) {
    ct_tensor *ga = NULL;
    st = alpha == 1 ? (ga = ct_retain((ct_tensor *)g), CT_OK) : ct_mul_scalar(&ga, g, alpha);
    if (st == CT_OK)
      st = mm_grads(&n->in[1], &n->in[2], ga, ct__ag_saved(n, 0), ct__ag_saved(n, 1), &gin[1], &gin[2]);
    ct_release(ga);
  }
  return st;
}
