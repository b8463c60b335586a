/* Operands as BLAS takes them: a strided tensor as a (possibly transposed) matrix with a
 * leading dimension and per-batch strides, and the batch dims reduced to as few as possible. */
#include <stdbool.h>
#include <stdint.h>

#include "kernel/launch_geom.h"
#include "linalg/linalg.h"
#include "tensor/tensor.h"

/* Expresses a strided rows x cols matrix as BLAS does: row-major with a leading dimension, or
 * its transpose. Strides of size-1 dims don't matter. False when neither fits. */
static bool ct__blas_form(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans, int64_t *ld) {
  if (rows <= 1 && cols <= 1) {
    *trans = false;
    *ld = 1;
  } else if (rows <= 1) {
    if (cs < 1) return false;
    *trans = cs != 1;
    *ld = cs == 1 ? cols : cs;
  } else if (cols <= 1) {
    if (rs < 1) return false;
    *trans = rs == 1;
    *ld = rs == 1 ? rows : rs;
  } else if (cs == 1 && rs >= cols) {
    *trans = false;
    *ld = rs;
  } else if (rs == 1 && cs >= rows) {
    *trans = true;
    *ld = cs;
  } else {
    return false;
  }
  return true;
}

/* Fills x from t: the operand's matrix dims (rows, cols; a 1-D t is a row (left) or column
 * (right) vector) and its strides along the nb broadcast batch dims of shape bs. */
bool ct__gemm_mat_of(struct ct__gemm_mat *x, const ct_tensor *t, bool left, int nb, const int64_t *bs,
                       int64_t rows, int64_t cols) {
  int64_t rs, cs;
  int tb = 0;
  if (t->ndim == 1) {
    rs = left ? 0 : t->strides[0];
    cs = left ? t->strides[0] : 0;
  } else {
    rs = t->strides[t->ndim - 2];
    cs = t->strides[t->ndim - 1];
    tb = t->ndim - 2;
  }
  if (!ct__blas_form(rows, cols, rs, cs, &x->trans, &x->ld)) return false;
  if (!ct__tensor_elem_offset(t, &x->off)) return false;
  x->mem = ct__tensor_mem(t);
  for (int i = 0; i < nb; i++) {
    int j = i - (nb - tb);
    x->bstride[i] = (j < 0 || t->shape[j] == 1 || bs[i] == 1) ? 0 : t->strides[j];
  }
  return true;
}

/* Drops size-1 batch dims, merges neighbours that are one dim for all three matrices, and
 * folds a batch of A into its rows when B is shared by every batch: [.., m, k] @ [k, n] becomes
 * one [b*m, k] @ [k, n] product, as PyTorch folds it. */
void ct__gemm_simplify_batch(struct ct__gemm_op *op) {
  int64_t *bst[3] = {op->a.bstride, op->b.bstride, op->c.bstride};
  op->nbatch = ct__collapse_dims(op->nbatch, op->bshape, 3, bst, 0);
  while (op->nbatch > 0) {
    int l = op->nbatch - 1;
    if (op->b.bstride[l] != 0 || op->a.trans || op->a.bstride[l] != op->m * op->a.ld ||
        op->c.bstride[l] != op->m * op->c.ld)
      break;
    op->m *= op->bshape[l];
    op->nbatch--;
  }
}
