/* softmax and log_softmax along a dim (kernels/softmax.cl). */
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "kernel/launch_geom.h"
#include "reduce/reduce.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* Computes *out; *dd gets dim wrapped (-1 for a 0-dim x). */
static ct_status softmax_run(ct_tensor **out, int *dd_out, const ct_tensor *x, int dim, int logsm,
                             const char *fn) {
  if (!ct_dtype_is_floating_point(x->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: input dtype %s is not a float dtype (f16, bf16, f32, f64); cast it first "
                     "with ct_cast()",
                     fn, ct_dtype_name(x->dtype));
  int dd;
  CT__TRY(ct__reduce_dim(&dd, x->ndim, x->shape, dim, fn));
  *dd_out = dd;
  ct_device *d = x->storage->device;
  ct_tensor *o = NULL;
  /* Over the last dim of a tensor the fusion graph will compute: in its producer's kernel
   * (src/fusion/; the sum of exps in another order, docs/FUSION.md). */
  if (dd == x->ndim - 1 && x->ndim > 0 && atomic_load_explicit(&x->storage->pending, memory_order_acquire)) {
    CT__TRY(ct__deferred_softmax(&o, x, logsm != 0, fn));
    if (o) {
      *out = o;
      return CT_OK;
    }
  }
  /* As in reduce.c: a failure to realize recorded work names this call, not a kernel. */
  CT__TRY(ct__deferred_realize(fn));
  CT__TRY(ct__tensor_new(&o, d, x->dtype, x->ndim, x->shape, fn));
  if (ct_numel(x) == 0) {
    *out = o;
    return CT_OK;
  }
  /* The other dims, with the input's and the output's strides, merged where both allow. */
  int64_t kshape[CT_MAX_DIMS], kin[CT_MAX_DIMS], kout[CT_MAX_DIMS];
  int kndim = 0;
  int64_t n = 1, in_step = 0, out_step = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (i == dd) {
      n = x->shape[i];
      in_step = x->strides[i];
      out_step = o->strides[i];
    } else {
      kshape[kndim] = x->shape[i];
      kin[kndim] = x->strides[i];
      kout[kndim++] = o->strides[i];
    }
  }
  int64_t *sts[2] = {kin, kout};
  kndim = ct__collapse_dims(kndim, kshape, 2, sts, 0);
  int64_t nrows = 1;
  for (int i = 0; i < kndim; i++) nrows *= kshape[i];

  bool cpu = ct__cpu_layout(d);
  int64_t cu = d->props.compute_units ? d->props.compute_units : 1;
  int64_t kept_inner = kndim ? kin[kndim - 1] : INT64_MAX;
  /* softmax_rows when the dim is the innermost in memory (on GPUs: and long enough to share
   * among a work-group), or when the rows are too few to keep the device busy; softmax_cols
   * (8 neighbouring rows per work-item) otherwise. */
  bool rows = (n > 1 && in_step < kept_inner && n >= (cpu ? 2 : 32)) ||
              (nrows < cu * (cpu ? 4 : 64) && n >= 1024);

  ct__kernel *k;
  ct_status st = ct__kernel_for(&k, d, "softmax.cl", rows ? "softmax_rows" : "softmax_cols", (int)x->dtype,
                                cpu ? "-DCT_CHUNKED=1" : "-DCT_CHUNKED=0", fn);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  size_t accsz = x->dtype == CT_F64 ? sizeof(cl_double) : sizeof(cl_float);
  size_t lmax = 1;
  st = ct__kernel_group_limit(&lmax, k, d, rows ? 256 : 64, rows ? accsz : 0);
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "in", x, 0);
  ct__karg_tensor(&a, "out", o, 0);
  ct__karg_long(&a, "n", n);
  ct__karg_long(&a, "in_step", in_step);
  ct__karg_long(&a, "out_step", out_step);
  ct__karg_geom(&a, "rows", kndim, kshape, 2, (const int64_t *const[]){kin, kout});
  ct__karg_int(&a, "logsm", logsm);
  ct__karg_long(&a, "nrows", nrows);
  size_t local, global;
  if (rows) {
    /* GPUs: a work-group of 64 or 256 per row. CPUs: a work-item per row (a CPU runs a
     * group's items one after another on one core, so sharing a row buys nothing), 64 rows
     * per group when there are plenty, else 1. Fixed sizes spare PoCL a compile per size. */
    int64_t target = cu * 4;
    if (cpu) {
      local = nrows >= 64 * target ? 64 : 1;
      if (local > lmax) local = lmax;
      global = ((size_t)nrows + local - 1) / local * local;
    } else {
      local = n >= 2048 ? 256 : 64;
      if (local > lmax) local = lmax;
      global = (size_t)nrows * local;
    }
    ct__karg_local(&a, "lv", local * accsz);
  } else {
    /* A work-item per 8 consecutive rows. */
    size_t items = ((size_t)nrows + 7) / 8;
    local = cpu ? 16 : 64;
    if (local > lmax) local = lmax;
    global = (items + local - 1) / local * local;
  }
  if (st == CT_OK) st = ct__kargs_end(&a, fn);
  if (st == CT_OK) st = ct__kernel_launch(k, d, 1, &global, &local);
  ct__kernel_unlock(k);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  *out = o;
  return CT_OK;
}

/* Records the backward node: the formula needs the output y (softmax: y (g - sum(g y)),
 * log_softmax: g - exp(y) sum(g)) and the dim. */
static ct_status softmax_record(ct_tensor *y, const ct_tensor *x, int dd, int logsm, const char *fn) {
  ct__node *n = NULL;
  CT__TRY(ct__grad_record(&n, y, logsm ? CT__GOP_LOG_SOFTMAX : CT__GOP_SOFTMAX, 0, 1, &x, fn));
  if (!n) return CT_OK;
  ct__rec_softmax *rec = &n->rec.softmax; /* both rows' record */
  rec->dim = dd;
  return ct__grad_save_as(n, &rec->out, y, fn);
}

static ct_status softmax_api(ct_tensor **out, const ct_tensor *x, int dim, int logsm, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  /* f32 under autocast (torch.autocast's fp32 list). */
  ct_tensor *xc = NULL, *y = NULL;
  int dd = 0;
  CT__TRY(ct__reduce_autocast(&xc, x, fn));
  ct_status st = softmax_run(&y, &dd, xc, dim, logsm, fn);
  if (st == CT_OK) st = softmax_record(y, xc, dd, logsm, fn);
  ct_release(xc);
  return ct__tensor_result(out, y, st);
}

ct_status ct_softmax(ct_tensor **out, const ct_tensor *x, int dim) {
  return softmax_api(out, x, dim, 0, "ct_softmax");
}

ct_status ct_log_softmax(ct_tensor **out, const ct_tensor *x, int dim) {
  return softmax_api(out, x, dim, 1, "ct_log_softmax");
}
