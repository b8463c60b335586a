/* logsumexp, any and all (kernels/reduce_logic.cl): the argument checks and result dtypes of
 * the reduce family (ct__reduce_dims, ct__reduce_geom), one work-item per output. */
#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "reduce/reduce.h"
#include "tensor/tensor.h"

enum { LG_LOGSUMEXP, LG_ANY, LG_ALL };

static ct_status logic_run(ct_tensor **out, const ct_tensor *x, const bool *mask, bool keepdim, int op,
                           const char *fn) {
  /* PyTorch's result dtypes: logsumexp keeps float dtypes and promotes bool and integers to
   * f32; any/all give bool, except u8 input, which gives u8. */
  ct_dtype odt;
  if (op == LG_LOGSUMEXP)
    odt = ct_dtype_is_floating_point(x->dtype) ? x->dtype : CT_F32;
  else
    odt = x->dtype == CT_U8 ? CT_U8 : CT_BOOL;
  ct_device *d = x->storage->device;
  ct_tensor *o = NULL;
  /* As in reduce.c: a failure to realize recorded work names this call, not a kernel. */
  CT__TRY(ct__deferred_realize(fn));
  struct ct__red_geom g;
  CT__TRY(ct__reduce_begin(&o, &g, x, mask, keepdim, odt, true, fn));
  if (g.nout == 0) {
    *out = o;
    return CT_OK;
  }
  ct__kernel *k;
  ct_status st = ct__kernel_for(&k, d, "reduce_logic.cl", op == LG_LOGSUMEXP ? "red_logsumexp" : "red_anyall",
                                (int)x->dtype, NULL, fn);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  ct__karg_tensor(&a, "in", x, 0);
  ct__karg_tensor(&a, "out", o, 0);
  ct__karg_int(&a, op == LG_LOGSUMEXP ? "out_dt" : "is_all",
               op == LG_LOGSUMEXP ? (cl_int)odt : op == LG_ALL);
  ct__karg_long(&a, "nout", g.nout);
  /* A size-0 reduced dim: the geometry keeps it, but the extent is empty. */
  ct__karg_long(&a, "nred", g.nred);
  ct__karg_geom(&a, "kept", g.kndim, g.kshape, 1, (const int64_t *const[]){g.kstride});
  ct__karg_geom(&a, "reduced", g.rndim, g.rshape, 1, (const int64_t *const[]){g.rstride});
  /* Groups of a fixed 64: one compile per kernel on PoCL. */
  st = ct__launch1(k, &a, d, g.nout, 64, fn);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  *out = o;
  return CT_OK;
}

static ct_status logic_api(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims,
                           bool keepdim, int op, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  if ((unsigned)x->dtype >= CT_DTYPE_COUNT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: tensor has an invalid dtype %d", fn,
                     (int)x->dtype);
  bool mask[CT_MAX_DIMS];
  CT__TRY(ct__reduce_dims(mask, x->ndim, x->shape, ndims, dims, fn));
  if (op != LG_LOGSUMEXP) return logic_run(out, x, mask, keepdim, op, fn);
  /* logsumexp: f32 under autocast, and differentiable (its gradient needs x and the result). */
  ct_tensor *xc = NULL, *r = NULL;
  CT__TRY(ct__reduce_autocast(&xc, x, fn));
  ct_status st = logic_run(&r, xc, mask, keepdim, op, fn);
  if (st == CT_OK) st = ct__reduce_record(r, xc, mask, keepdim, CT__GOP_LOGSUMEXP, 0, false, fn);
  ct_release(xc);
  return ct__tensor_result(out, r, st);
}

ct_status ct_logsumexp(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims,
                       bool keepdim) {
  return logic_api(out, x, ndims, dims, keepdim, LG_LOGSUMEXP, "ct_logsumexp");
}

ct_status ct_any(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim) {
  return logic_api(out, x, ndims, dims, keepdim, LG_ANY, "ct_any");
}

ct_status ct_all(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim) {
  return logic_api(out, x, ndims, dims, keepdim, LG_ALL, "ct_all");
}
