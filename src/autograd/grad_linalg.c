/* Gradient formulas of the matmul, linear, addmm (rows of tensor/grad_ops.def).
 *
 * The nodes (recorded in src/linalg/matmul.c) save the GEMM operands where the other operand's
 * gradient needs them: the record's a the left operand (a, or linear's x), b the right one (b,
 * or linear's weight), with addmm's beta and alpha (ct__rec_matmul).
 *
 * The products run with autocast off: ct_backward suspends it for every formula, so a backward
 * computes in the dtypes the forward recorded (engine.c). */
#include "autograd/autograd.h"
#include "autograd/grad_tmp.h"
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
  const int64_t one[2] = {1, 1};
  ct__tmps s = {0};
  const ct_tensor *g2 = g;
  if (a1 && b1) g2 = TMP(&s, ct_reshape, g, 2, one);
  else if (a1 || b1) g2 = TMP(&s, ct_unsqueeze, g, a1 ? -2 : -1);
  if (ea->needed) { /* g @ b^T */
    ct_tensor *bt = TMP(&s, mm_t, b, true);
    if (a1) {
      ct_tensor *p = TMP(&s, ct_matmul, g2, bt);
      GIN(&s, ga, ct_squeeze, p, -2);
    } else {
      GIN(&s, ga, ct_matmul, g2, bt);
    }
  }
  if (eb->needed) { /* a^T @ g */
    const ct_tensor *at, *gm;
    if (ea->ndim > 2 && eb->ndim <= 2) {
      ct_tensor *af = TMP(&s, mm_flat, a);
      at = TMP(&s, ct_transpose, af, 0, 1);
      ct__tmps_drop(&s, af);
      gm = TMP(&s, mm_flat, g2);
    } else {
      at = TMP(&s, mm_t, a, false);
      gm = g2;
    }
    if (b1) {
      ct_tensor *p = TMP(&s, ct_matmul, at, gm);
      GIN(&s, gb, ct_squeeze, p, -1);
    } else {
      GIN(&s, gb, ct_matmul, at, gm);
    }
  }
  return ct__tmps_end(&s);
}

ct_status ct__grad_matmul(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_matmul *r = ct__rec_MATMUL(n);
  return mm_grads(&n->in[0], &n->in[1], g, r->a, r->b, &gin[0], &gin[1]);
}

/* y = x @ W^T + bias: gx = g @ W; gW = g^T @ x over x's leading dims flattened (one GEMM:
 * [out, N] @ [N, in]). gbias: for the usual 1-D bias [out], the sum of g's N rows as one more
 * GEMM, ones [1, N] @ g [N, out] (Caffe's "bias multiplier"; cuBLASLt fuses the same sum into
 * the weight gradient's GEMM), on the route the other two products take, so that a training
 * step needs no reduction program for it (issue #30: a new process's first step). Other bias
 * shapes (any that broadcasts to y): g, which the engine sums to the bias's shape. */
ct_status ct__grad_linear(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_matmul *r = ct__rec_LINEAR(n);
  ct__tmps s = {0};
  if (n->in[0].needed) GIN(&s, &gin[0], ct_matmul, g, r->b);
  ct_tensor *gf = n->in[1].needed || n->in[2].needed ? TMP(&s, mm_flat, g) : NULL;
  if (n->in[1].needed) {
    ct_tensor *gt = TMP(&s, ct_transpose, gf, 0, 1);
    ct_tensor *xf = TMP(&s, mm_flat, r->a);
    GIN(&s, &gin[1], ct_matmul, gt, xf);
  }
  const ct__edge *eb = &n->in[2];
  if (s.st == CT_OK && eb->needed && eb->ndim == 1 && ct_dtype_is_floating_point(g->dtype)) {
    const int64_t *fs = ct_tensor_shape(gf);
    ct_tensor *ones = TMP(&s, ct_ones, ct_tensor_device(g), g->dtype, 2, (int64_t[]){1, fs[0]});
    ct_tensor *row = TMP(&s, ct_matmul, ones, gf);
    GIN(&s, &gin[2], ct_reshape, row, 1, &fs[1]);
  } else if (s.st == CT_OK && eb->needed) {
    gin[2] = ct_retain((ct_tensor *)g);
  }
  return ct__tmps_end(&s);
}

/* r = beta * c + alpha * (a @ b): gc = beta * g (summed back to c's shape by the engine; as
 * PyTorch, beta = 0 still multiplies, so a NaN in g reaches c); ga, gb as matmul's, of alpha * g. */
ct_status ct__grad_addmm(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_matmul *r = ct__rec_ADDMM(n);
  ct__tmps s = {0};
  if (n->in[0].needed) {
    if (r->beta == 1) gin[0] = ct_retain((ct_tensor *)g);
    else GIN(&s, &gin[0], ct_mul_scalar, g, r->beta);
  }
  if (n->in[1].needed || n->in[2].needed) {
    const ct_tensor *ga = r->alpha == 1 ? g : TMP(&s, ct_mul_scalar, g, r->alpha);
    STEP(&s, mm_grads(&n->in[1], &n->in[2], ga, r->a, r->b, &gin[1], &gin[2]));
  }
  return ct__tmps_end(&s);
}
