/* Checks, views and launches shared by the nn ops. */
#include "core/error.h"
#include "device/device.h"
#include "nn/nn.h"

ct_status ct__nn_check_float(const char *fn, const char *what, const ct_tensor *t) {
  if (!ct_dtype_is_floating_point(t->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: %s has dtype %s; it takes float tensors (f16, bf16, f32, f64), as PyTorch's CPU "
                     "does: cast it first with ct_cast()",
                     fn, what, ct_dtype_name(t->dtype));
  return CT_OK;
}

ct_status ct__nn_batched4(ct_tensor **out, const ct_tensor *x, const char *fn) {
  *out = NULL;
  char sx[160];
  if (x->ndim == 4) {
    *out = ct_retain((ct_tensor *)x);
    return CT_OK;
  }
  if (x->ndim != 3)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: x must be 4-D [N, C, H, W] or 3-D [C, H, W], got %s", fn,
                     ct__shape_str(sx, sizeof sx, x->ndim, x->shape));
  int64_t shape[4] = {1, x->shape[0], x->shape[1], x->shape[2]};
  int64_t strides[4] = {0, x->strides[0], x->strides[1], x->strides[2]};
  return ct__tensor_view(out, x, 4, shape, strides, x->offset);
}

ct_status ct__nn_unbatch(ct_tensor **t) {
  ct_tensor *v;
  ct_tensor *x = *t;
  ct_status st = ct__tensor_view(&v, x, x->ndim - 1, x->shape + 1, x->strides + 1, x->offset);
  if (st != CT_OK) return st;
  ct_release(x);
  *t = v;
  return CT_OK;
}

ct_status ct__nn_launch3(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t n0, int64_t n1, int64_t n2,
                         const char *fn) {
  ct_status st = ct__kargs_end(a, fn);
  if (st == CT_OK && n0 > 0 && n1 > 0 && n2 > 0) {
    size_t global[3] = {(size_t)n0, (size_t)n1, (size_t)n2}, local[3];
    ct__launch_dims(k, 3, global, local);
    st = ct__kernel_launch(k, d, 3, global, local);
  }
  ct__kernel_unlock(k);
  return st;
}
