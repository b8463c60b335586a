/* Where a tensor's elements lie in its cl_mem, for ops that hand buffers to kernels and BLAS. */
#include "core/error.h"
#include "kernel/launch_geom.h"
#include "tensor/tensor.h"

ct_status ct__dim_wrap(int *out, int ndim, int dim, const char *fn) {
  int n = ndim == 0 ? 1 : ndim;
  if (dim < -n || dim >= n)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dim %d is out of range for a tensor with %d dims (expected %d..%d)",
                     fn, dim, ndim, -n, n - 1);
  *out = dim < 0 ? dim + n : dim;
  return CT_OK;
}

bool ct__tensor_elem_offset(const ct_tensor *t, int64_t *off) {
  size_t es = ct_dtype_size(t->dtype), bo = ct__tensor_byte_offset(t);
  if (bo % es) return false;
  *off = (int64_t)(bo / es);
  return true;
}

void ct__karg_tensor(struct ct__kargs *a, const char *name, const ct_tensor *t, int64_t shift) {
  int64_t off = 0;
  /* Another thread's recorded work on this memory goes first (the launch realizes only the
   * calling thread's); a kernel may read or write any argument. */
  ct_status st = t ? ct__tensor_deferred_use(t, ct__kernel_name(a->k)) : CT_OK;
  if (st != CT_OK) {
    ct__karg_fail_status(a, name, st);
    ct__karg_fail(a, name, CL_INVALID_VALUE);
    return;
  }
  ct__karg_mem(a, name, t ? ct__tensor_mem(t) : NULL);
  if (t && !ct__tensor_elem_offset(t, &off))
    ct__karg_fail(a, name, CL_INVALID_VALUE);
  else
    ct__karg_long(a, name, t ? off + shift : 0);
}

void ct__tensor_span(const ct_tensor *t, size_t *lo, size_t *hi) {
  size_t es = ct_dtype_size(t->dtype);
  int64_t first, last;
  ct__elem_span(t->ndim, t->shape, t->strides, &first, &last);
  size_t base = ct__tensor_byte_offset(t);
  *lo = base + (size_t)(first * (int64_t)es);
  *hi = base + (size_t)((last + 1) * (int64_t)es);
}

bool ct__tensor_overlaps(const ct_tensor *x, const ct_tensor *y) {
  if (!x || !y || ct_numel(x) == 0 || ct_numel(y) == 0 || ct__tensor_mem(x) != ct__tensor_mem(y)) return false;
  size_t xl, xh, yl, yh;
  ct__tensor_span(x, &xl, &xh);
  ct__tensor_span(y, &yl, &yh);
  return xl < yh && yl < xh;
}

bool ct__tensor_same_geometry(const ct_tensor *x, const ct_tensor *y) {
  if (ct__tensor_mem(x) != ct__tensor_mem(y) || ct__tensor_byte_offset(x) != ct__tensor_byte_offset(y) ||
      x->dtype != y->dtype || x->ndim != y->ndim)
    return false;
  for (int i = 0; i < x->ndim; i++)
    if (x->shape[i] != y->shape[i] || (x->shape[i] > 1 && x->strides[i] != y->strides[i])) return false;
  return true;
}

ct_status ct__tensor_check_writable(const ct_tensor *t, const char *fn, const char *name) {
  if (ct_numel(t) == 0) return CT_OK;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] > 1 && t->strides[i] == 0) {
      char sa[200], sb[200];
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: %s of shape %s (strides %s) has stride 0 at dim %d (an expanded view), so several of "
                       "its elements share one memory location",
                       fn, name, ct__shape_str(sa, sizeof sa, t->ndim, t->shape),
                       ct__shape_str(sb, sizeof sb, t->ndim, t->strides), i);
    }
  return CT_OK;
}
