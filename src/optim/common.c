/* What the optimizers, clipping and the gradient scaler share: the kernel lookup, the scalar
 * and geometry arguments, the gradient of a parameter and the check of a parameter list. */
#include <stdio.h>
#include <string.h>

#include "cltensor/autograd.h"
#include "core/error.h"
#include "device/device.h"
#include "kernel/launch_geom.h"
#include "optim/optim.h"
#include "tensor/graph.h"

ct_status ct__optim_kernel(ct__kernel **k, ct_device *d, const char *name, ct_dtype dt, const char *fn) {
  /* OpenCL lets f32 division and sqrt be 2.5 and 3 ulp off unless the device offers correct
   * rounding and the program asks for it; PyTorch's results are IEEE-rounded. */
  cl_device_fp_config cfg = 0;
  bool exact = clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof cfg, &cfg, NULL) == CL_SUCCESS &&
               (cfg & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT);
  return ct__kernel_for(k, d, "optim.cl", name, (int)dt, exact ? "-cl-fp32-correctly-rounded-divide-sqrt" : NULL,
                        fn);
}

void ct__optim_karg_acc(struct ct__kargs *a, const char *name, ct_dtype dt, double v) {
  if (dt == CT_F64)
    ct__karg_double(a, name, v);
  else
    ct__karg_float(a, name, (cl_float)v);
}

void ct__optim_karg_geom(struct ct__kargs *a, int nt, const ct_tensor *const *ts) {
  int64_t shape[CT_MAX_DIMS], st[3][CT_MAX_DIMS];
  int64_t *sts[3] = {st[0], st[1], st[2]};
  memcpy(shape, ts[0]->shape, sizeof shape);
  for (int j = 0; j < nt; j++) memcpy(st[j], ts[j]->strides, sizeof st[j]);
  int ndim = ct__collapse_dims(ts[0]->ndim, shape, nt, sts, CT__COLLAPSE_ORDER);
  ct__karg_geom(a, "geometry", ndim, shape, nt, (const int64_t *const *)sts);
}

ct_status ct__optim_grad_launch(ct_tensor *g, const char *name, double x, const ct_tensor *flag, const char *fn) {
  int64_t ne = ct_numel(g);
  if (ne == 0) return CT_OK;
  ct__kernel *k;
  CT__TRY(ct__optim_kernel(&k, g->storage->device, name, g->dtype, fn));
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "g", g, 0);
  ct__optim_karg_geom(&a, 1, (const ct_tensor *[]){g});
  ct__karg_long(&a, "n", ne);
  ct__optim_karg_acc(&a, "x", g->dtype, x);
  if (flag) ct__karg_tensor(&a, "flag", flag, 0);
  CT__TRY(ct__launch1(k, &a, g->storage->device, ne, 0, fn));
  ct__tensor_bump_version(g);
  return CT_OK;
}

ct_status ct__optim_grad(ct_tensor **g, const ct_tensor *p, int i, const char *fn) {
  *g = p->grad;
  if (!*g) return CT_OK;
  bool same = (*g)->dtype == p->dtype && (*g)->ndim == p->ndim && (*g)->storage->device == p->storage->device &&
              memcmp((*g)->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) == 0;
  if (!same) {
    char sg[200], sp[200];
    *g = NULL;
    return ct__error(CT_ERR_INTERNAL, "%s: the gradient of parameter %d (%s %s) does not match it (%s %s)", fn, i,
                     ct_dtype_name(p->grad->dtype),
                     ct__shape_str(sg, sizeof sg, p->grad->ndim, p->grad->shape), ct_dtype_name(p->dtype),
                     ct__shape_str(sp, sizeof sp, p->ndim, p->shape));
  }
  return CT_OK;
}

ct_status ct__optim_check_params(ct_tensor *const *params, int n, bool allow_empty, bool need_leaf,
                                 const char *fn) {
  if (n < (allow_empty ? 0 : 1))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %d (expected %s)", fn, n,
                     allow_empty ? "n >= 0" : "at least one parameter");
  if (n > 0 && !params) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 'params' is NULL", fn);
  for (int i = 0; i < n; i++) {
    const ct_tensor *p = params[i];
    if (!p) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: params[%d] is NULL", fn, i);
    if (!ct_dtype_is_floating_point(p->dtype))
      return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: params[%d] has dtype %s (expected a float dtype: f16, bf16, f32, f64)",
                       fn, i, ct_dtype_name(p->dtype));
    if (need_leaf && p->grad_fn)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: params[%d] is not a leaf (it is the result of a recorded op; optimize the leaves "
                       "it comes from, or ct_detach it)",
                       fn, i);
    if (need_leaf && !p->requires_grad)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: params[%d] does not require grad (mark it with ct_set_requires_grad)", fn, i);
    if (need_leaf) {
      char name[32];
      snprintf(name, sizeof name, "params[%d]", i);
      CT__TRY(ct__tensor_check_writable(p, fn, name));
    }
    for (int j = 0; j < i; j++)
      if (params[j] == p)
        return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: params[%d] is the same tensor as params[%d]", fn, i, j);
  }
  return CT_OK;
}
