/* The matmul shape and dtype rules (PyTorch's torch.matmul, with addmm's c and an out tensor):
 * checks the operands and derives the product's dims, batch broadcast and result shape. */
#include <math.h>
#include <stdbool.h>

#include "core/error.h"
#include "linalg/linalg.h"
#include "tensor/tensor.h"

/* c's strides expanded to the full result shape (0 on broadcast dims). */
void ct__mm_expand_strides(int64_t *out, const ct_tensor *c, int rnd, const int64_t *rshape) {
  for (int i = 0; i < rnd; i++) {
    int j = i - (rnd - c->ndim);
    out[i] = (j < 0 || (c->shape[j] == 1 && rshape[i] != 1)) ? 0 : c->strides[j];
  }
}

ct_status ct__mm_check(struct ct__mm *mm, const ct_tensor *out) {
  const char *fn = mm->fn;
  const ct_tensor *a = mm->a, *b = mm->b, *c = mm->c;
  char sa[160], sb[160], sc[160];
  CT__TRY(ct__check_same_device(fn, mm->an, a, mm->bn, b));
  if (c) CT__TRY(ct__check_same_device(fn, mm->an, a, mm->cn, c));
  if (out) CT__TRY(ct__check_same_device(fn, mm->an, a, "out", out));
  mm->d = a->storage->device;
  mm->dt = a->dtype;
  if (b->dtype != a->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: %s is %s but %s is %s", fn, mm->an, ct_dtype_name(a->dtype),
                     mm->bn, ct_dtype_name(b->dtype));
  if (c && c->dtype != a->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: %s is %s but %s is %s", fn, mm->an, ct_dtype_name(a->dtype),
                     mm->cn, ct_dtype_name(c->dtype));
  if (out && out->dtype != a->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: the operands are %s but out is %s", fn,
                     ct_dtype_name(a->dtype), ct_dtype_name(out->dtype));
  if (a->ndim == 0 || b->ndim == 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: both operands need at least 1 dim; %s has shape %s and %s "
                     "has shape %s", fn, mm->an, ct__shape_str(sa, sizeof sa, a->ndim, a->shape), mm->bn,
                     ct__shape_str(sb, sizeof sb, b->ndim, b->shape));
  bool a1 = a->ndim == 1, b1 = b->ndim == 1;
  int64_t ak = a->shape[a->ndim - 1], bk = b1 ? b->shape[0] : b->shape[b->ndim - 2];
  if (ak != bk)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: %s %s and %s %s can't be multiplied: %s's last dim is %lld but "
                     "%s's %s is %lld", fn, mm->an, ct__shape_str(sa, sizeof sa, a->ndim, a->shape), mm->bn,
                     ct__shape_str(sb, sizeof sb, b->ndim, b->shape), mm->an, (long long)ak, mm->bn,
                     b1 ? "length" : "second-to-last dim", (long long)bk);
  mm->k = ak;
  mm->m = a1 ? 1 : a->shape[a->ndim - 2];
  mm->n = b1 ? 1 : b->shape[b->ndim - 1];
  int anb = a1 ? 0 : a->ndim - 2, bnb = b1 ? 0 : b->ndim - 2;
  mm->nb = anb > bnb ? anb : bnb;
  for (int i = 0; i < mm->nb; i++) {
    int ia = i - (mm->nb - anb), ib = i - (mm->nb - bnb);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: the batch dims of %s %s and %s %s don't broadcast (%lld vs "
                       "%lld)", fn, mm->an, ct__shape_str(sa, sizeof sa, a->ndim, a->shape), mm->bn,
                       ct__shape_str(sb, sizeof sb, b->ndim, b->shape), (long long)da, (long long)db);
    mm->bs[i] = da == 1 ? db : da;
  }
  mm->rnd = 0;
  for (int i = 0; i < mm->nb; i++) mm->rshape[mm->rnd++] = mm->bs[i];
  if (!a1) mm->rshape[mm->rnd++] = mm->m;
  if (!b1) mm->rshape[mm->rnd++] = mm->n;
  if (c) {
    bool fits = c->ndim <= mm->rnd;
    for (int i = 0; fits && i < c->ndim; i++) {
      int64_t cd = c->shape[c->ndim - 1 - i], rd = mm->rshape[mm->rnd - 1 - i];
      if (cd != rd && cd != 1) fits = false;
    }
    if (!fits)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: %s %s does not broadcast to the product's shape %s", fn,
                       mm->cn, ct__shape_str(sc, sizeof sc, c->ndim, c->shape),
                       ct__shape_str(sa, sizeof sa, mm->rnd, mm->rshape));
  }
  if (out) {
    bool same = out->ndim == mm->rnd;
    for (int i = 0; same && i < mm->rnd; i++) same = out->shape[i] == mm->rshape[i];
    if (!same)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: out has shape %s but %s %s @ %s %s has shape %s", fn,
                       ct__shape_str(sc, sizeof sc, out->ndim, out->shape), mm->an,
                       ct__shape_str(sa, sizeof sa, a->ndim, a->shape), mm->bn,
                       ct__shape_str(sb, sizeof sb, b->ndim, b->shape),
                       ct__shape_str(sc, sizeof sc, mm->rnd, mm->rshape));
  }
  if (a->dtype == CT_BOOL)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: matrix products of bool tensors are not supported (cast to an "
                     "integer or float dtype first)", fn);
  if (a->dtype == CT_U16 || a->dtype == CT_U32 || a->dtype == CT_U64)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: matrix products of %s tensors are not supported (a storage dtype; "
                     "cast to i64 or a float dtype first)", fn, ct_dtype_name(a->dtype));
  if (!ct_dtype_is_floating_point(a->dtype) && (mm->alpha != floor(mm->alpha) || mm->beta != floor(mm->beta) ||
                                       !isfinite(mm->alpha) || !isfinite(mm->beta)))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: integer (%s) products need integral alpha and beta, got "
                     "alpha=%g beta=%g", fn, ct_dtype_name(a->dtype), mm->alpha, mm->beta);
  return CT_OK;
}
