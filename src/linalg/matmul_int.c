/* The integer matrix product (u8, i8, i32, i64): a kernel, since BLAS has none (docs/GEMM.md,
 * "Integer matmul"). */
#include <stdio.h>

#include "core/error.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "linalg/linalg.h"
#include "tensor/tensor.h"

/* Integer product into a contiguous target (which may be c itself: each element reads its own
 * c before writing). */
ct_status ct__mm_int(struct ct__mm *mm, ct_tensor *target) {
  const char *fn = mm->fn;
  ct_tensor *ac = NULL, *bc = NULL;
  const ct_tensor *a = mm->a, *b = mm->b, *c = mm->c;
  int64_t off;
  /* Operands whose byte offset is not a whole number of elements go through a copy. */
  if (!ct__tensor_elem_offset(a, &off)) {
    CT__TRY(ct_contiguous(&ac, a));
    a = ac;
  }
  ct_status st = CT_OK;
  if (!ct__tensor_elem_offset(b, &off)) {
    st = ct_contiguous(&bc, b);
    if (st != CT_OK) goto done;
    b = bc;
  }
  ct_tensor *cc = NULL;
  if (c && !ct__tensor_elem_offset(c, &off)) {
    st = ct_contiguous(&cc, c);
    if (st != CT_OK) goto done;
    c = cc;
  }
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_DT=%d", (int)mm->dt);
  ct__kernel *k;
  st = ct__kernel_get(&k, mm->d, "linalg.cl", "matmul_int", opts);
  if (st == CT_OK) {
    int64_t a_rs = a->ndim == 1 ? 0 : a->strides[a->ndim - 2], a_cs = a->strides[a->ndim - 1];
    int64_t b_rs = b->ndim == 1 ? b->strides[0] : b->strides[b->ndim - 2];
    int64_t b_cs = b->ndim == 1 ? 0 : b->strides[b->ndim - 1];
    int64_t abs_[CT_MAX_DIMS] = {0}, bbs[CT_MAX_DIMS] = {0};
    int anb = a->ndim == 1 ? 0 : a->ndim - 2, bnb = b->ndim == 1 ? 0 : b->ndim - 2;
    for (int i = 0; i < mm->nb; i++) {
      int ia = i - (mm->nb - anb), ib = i - (mm->nb - bnb);
      abs_[i] = (ia < 0 || a->shape[ia] == 1) ? 0 : a->strides[ia];
      bbs[i] = (ib < 0 || b->shape[ib] == 1) ? 0 : b->strides[ib];
    }
    int64_t cstr[CT_MAX_DIMS] = {0};
    if (c) ct__mm_expand_strides(cstr, c, mm->rnd, mm->rshape);
    int64_t batch = 1;
    for (int i = 0; i < mm->nb; i++) batch *= mm->bs[i];
    struct ct__kargs g = ct__kargs_lock(k);
    ct__karg_tensor(&g, "out", target, 0);
    ct__karg_tensor(&g, "a", a, 0);
    ct__karg_long(&g, "a_rs", a_rs);
    ct__karg_long(&g, "a_cs", a_cs);
    ct__karg_long8(&g, "a_bstrides", mm->nb, abs_, 0);
    ct__karg_tensor(&g, "b", b, 0);
    ct__karg_long(&g, "b_rs", b_rs);
    ct__karg_long(&g, "b_cs", b_cs);
    ct__karg_long8(&g, "b_bstrides", mm->nb, bbs, 0);
    ct__karg_int(&g, "nb", mm->nb);
    ct__karg_long8(&g, "bshape", mm->nb, mm->bs, 1);
    ct__karg_long(&g, "m", mm->m);
    ct__karg_long(&g, "n", mm->n);
    ct__karg_long(&g, "k", mm->k);
    ct__karg_long(&g, "alpha", (cl_long)mm->alpha);
    ct__karg_long(&g, "beta", (cl_long)mm->beta);
    ct__karg_tensor(&g, "c", c ? c : target, 0);
    ct__karg_int(&g, "od", mm->rnd);
    ct__karg_long8(&g, "oshape", mm->rnd, mm->rshape, 1);
    ct__karg_long8(&g, "c_strides", mm->rnd, cstr, 0);
    ct__karg_int(&g, "has_c", c != NULL);
    st = ct__kargs_end(&g, fn);
    if (st == CT_OK) {
      size_t global[3] = {(size_t)mm->n, (size_t)mm->m, (size_t)batch}, local[3];
      ct__launch_dims(k, 3, global, local);
      st = ct__kernel_launch(k, mm->d, 3, global, local);
    }
    ct__kernel_unlock(k);
  }
  ct_release(cc);
done:
  ct_release(ac);
  ct_release(bc);
  return st;
}
