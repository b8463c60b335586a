/* Checks, views and launches shared by the nn ops. */
#include <stdio.h>

#include "core/error.h"
#include "device/device.h"
#include "nn/nn.h"

ct_status ct__nn_check_float(const char *fn, const char *what, const ct_tensor *t) {
  if (!ct_dtype_is_float(t->dtype))
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

ct_status ct__nn_result(ct_tensor **out, ct_tensor *o, ct_status st) {
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  *out = o;
  return CT_OK;
}

ct_status ct__nn_launch1(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t total, const char *fn) {
  ct_status st = ct__kargs_end(a, fn);
  if (st == CT_OK && total > 0) {
    size_t global = (size_t)total, local;
    ct__launch_dims(k, 1, &global, &local);
    st = ct__kernel_launch(k, d, 1, &global, &local);
  }
  ct__kernel_unlock(k);
  return st;
}

ct_status ct__nn_kernel(ct__kernel **k, ct_device *d, const char *file, const char *name, ct_dtype dt,
                        const char *extra, const char *fn) {
  char opts[96];
  snprintf(opts, sizeof opts, "-DCT_IN=%d %s", (int)dt, extra ? extra : "");
  ct_status st = ct__kernel_get(k, d, file, name, opts);
  if (st != CT_OK) ct__error_append(" (in %s)", fn);
  return st;
}
