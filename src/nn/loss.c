/* Losses: nll_loss and cross_entropy (kernels/loss.cl, one work-item per position, then the
 * reduction: loss_sum in one work-group where it fits, else ct_sum), mse_loss (composed of
 * elementwise ops and a reduction). */
#include <limits.h>
#include <math.h>

#include "cltensor/elementwise.h"
#include "cltensor/nn.h"
#include "cltensor/reduce.h"
#include "core/error.h"
#include "device/device.h"
#include "index/index.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "kernel/launch_geom.h"
#include "nn/nn.h"
#include "reduce/reduce.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

static ct_status check_reduction(ct_reduction r, const char *fn) {
  if (r != CT_REDUCTION_NONE && r != CT_REDUCTION_MEAN && r != CT_REDUCTION_SUM)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: reduction is %d (expected CT_REDUCTION_NONE, _MEAN or _SUM)", fn, (int)r);
  return CT_OK;
}

/* The positions loss_sum sums in one work-group at most: beyond, ct_sum's parallel passes. */
#define CT__LOSS_SUM_MAX 65536

/* The loss.cl kernel `name` for x's dtype: every loss kernel from one program per dtype. */
static ct_status loss_kernel(ct__kernel **k, ct_device *d, const char *name, ct_dtype dt, const char *fn) {
  return ct__kernel_for(k, d, "loss.cl", name, (int)dt, ct__cpu_layout(d) ? "-DCT_CHUNKED=1" : "-DCT_CHUNKED=0", fn);
}

/* finish() for SUM and MEAN of npos <= CT__LOSS_SUM_MAX positions in one kernel (loss_sum), where
 * one work-group of the device can take them within its loop budget: *done false otherwise. */
static ct_status finish_one_group(bool *done, ct_tensor **out, ct_tensor **nvalid, ct_tensor *v, ct_tensor *count,
                                  ct_reduction r, ct_dtype dt, const char *fn) {
  *done = false;
  int64_t npos = ct_numel(v);
  if (npos > CT__LOSS_SUM_MAX) return CT_OK;
  ct_device *d = v->storage->device;
  ct__kernel *k = NULL;
  CT__TRY(loss_kernel(&k, d, "loss_sum", dt, fn));
  size_t group = 1, accsz = ct_dtype_size(v->dtype);
  if (!ct__cpu_layout(d)) CT__TRY(ct__kernel_group_limit(&group, k, d, 256, 2 * accsz));
  /* Each item's positions, and its blocks' cascade, within the loop budget. */
  if ((uint64_t)((npos + (int64_t)group - 1) / (int64_t)group) * 2 > ct__device_loop_budget(d)) return CT_OK;
  ct_tensor *o = NULL, *n = NULL;
  ct_status st = ct__tensor_new(&o, d, dt, 0, NULL, fn);
  if (st == CT_OK && r == CT_REDUCTION_MEAN) st = ct__tensor_new(&n, d, v->dtype, 0, NULL, fn);
  if (st == CT_OK) {
    struct ct__kargs a;
    ct__kargs_begin(&a, k, ct__kernel_lock(k));
    ct__karg_tensor(&a, "loss", v, 0);
    ct__karg_tensor(&a, "valid", count, 0);
    ct__karg_long(&a, "npos", npos);
    ct__karg_int(&a, "mean", r == CT_REDUCTION_MEAN);
    ct__karg_tensor(&a, "out", o, 0);
    ct__karg_tensor(&a, "nv", n, 0);
    ct__karg_local(&a, "ls", group * accsz);
    ct__karg_local(&a, "lc", group * accsz);
    st = ct__kargs_end(&a, fn);
    if (st == CT_OK) st = ct__kernel_launch(k, d, 1, &group, &group);
    ct__kernel_unlock(k);
  }
  if (st == CT_OK) {
    *done = true;
    *out = o;
    if (nvalid) *nvalid = n;
    else ct_release(n);
    return CT_OK;
  }
  ct_release(o);
  ct_release(n);
  return st;
}

/* *out = per-position losses v (acc dtype, contiguous) reduced as r and stored as dtype dt:
 * NONE keeps them (cast), SUM sums them, MEAN divides the sum by the sum of `count` (1 for each
 * non-ignored target, else 0; all ignored gives 0 / 0 = NaN, as PyTorch). *nvalid, when not
 * NULL, gets MEAN's divisor (a 0-d tensor; NULL for the other reductions). */
static ct_status finish(ct_tensor **out, ct_tensor **nvalid, ct_tensor *v, ct_tensor *count, ct_reduction r,
                        ct_dtype dt, const char *fn) {
  ct_tensor *s = NULL, *n = NULL, *m = NULL;
  ct_status st;
  if (r == CT_REDUCTION_NONE) return ct__contiguous(out, v, dt, 0, fn);
  bool done = false;
  CT__TRY(finish_one_group(&done, out, nvalid, v, count, r, dt, fn));
  if (done) return CT_OK;
  st = ct_sum(&s, v, 0, NULL, false);
  if (st == CT_OK && r == CT_REDUCTION_MEAN) {
    st = ct_sum(&n, count, 0, NULL, false);
    if (st == CT_OK) st = ct_div(&m, s, n);
  } else if (st == CT_OK) {
    m = ct_retain(s);
  }
  if (st == CT_OK) st = ct__contiguous(out, m, dt, 0, fn);
  else ct__error_append(" (in %s)", fn);
  if (st == CT_OK && nvalid) *nvalid = ct_retain(n);
  ct_release(s);
  ct_release(n);
  ct_release(m);
  return st;
}

/* Reads back the kernel's flag; when a target was out of range, reads that one target and
 * returns the error naming it. */
static ct_status check_flag(ct_tensor *flag, const ct_tensor *target, int64_t ncls,
                            int64_t ignore_index, const char *fn) {
  cl_int bad = INT_MAX;
  atomic_fetch_add_explicit(&ct__index_checks_read, 1, memory_order_relaxed);
  CT__TRY(ct_to_host(flag, &bad, sizeof bad));
  if (bad == INT_MAX) return CT_OK;
  char ps[256];
  int64_t p = bad, e = 0, q = p;
  if (bad == INT_MAX - 1 && ct_numel(target) > INT_MAX - 1)
    /* The flag is a 32-bit int (OpenCL 1.2 has no portable 64-bit atomic_min): positions
     * from 2^31 - 2 on share its last value. */
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: a target at position %s or later is out of range for %lld classes "
                     "(expected 0..%lld, or ignore_index %lld)",
                     fn, ct__index_pos_str(ps, sizeof ps, p, target->ndim, target->shape), (long long)ncls,
                     (long long)ncls - 1, (long long)ignore_index);
  for (int i = target->ndim - 1; i >= 0; i--) {
    e += (q % target->shape[i]) * target->strides[i];
    q /= target->shape[i];
  }
  ct_tensor *one = NULL;
  int64_t value = 0;
  ct_status st = ct__tensor_view(&one, target, 0, NULL, NULL, target->offset + e);
  if (st == CT_OK) st = ct_to_host(one, &value, sizeof value);
  ct_release(one);
  if (st != CT_OK) return st;
  return ct__error(CT_ERR_INVALID_ARGUMENT,
                   "%s: target %lld at position %s is out of range for %lld classes (expected "
                   "0..%lld, or ignore_index %lld)",
                   fn, (long long)value, ct__index_pos_str(ps, sizeof ps, p, target->ndim, target->shape),
                   (long long)ncls, (long long)ncls - 1, (long long)ignore_index);
}

static ct_status class_loss(ct_tensor **out, const ct_tensor *x, const ct_tensor *target,
                            int64_t ignore_index, double eps, ct_reduction r, int ce,
                            const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  CT__CHECK_NOT_NULL(fn, target);
  CT__TRY(check_reduction(r, fn));
  const char *xn = ce ? "logits" : "logp";
  CT__TRY(ct__check_same_device(fn, xn, x, "target", target));
  if (!(eps >= 0 && eps <= 1))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: label_smoothing is %g (expected 0..1)", fn, eps);
  if (!ct_dtype_is_floating_point(x->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: %s has dtype %s (expected a float dtype: f16, bf16, f32, f64)", fn, xn,
                     ct_dtype_name(x->dtype));
  if (target->dtype != CT_I64)
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: target has dtype %s (expected i64 class indices; ct_cast it first)", fn,
                     ct_dtype_name(target->dtype));
  char xs[256], ts[256], ps[256];
  if (x->ndim < 1)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: %s is 0-d (expected [C], [N, C] or [N, C, d1, ...])", fn, xn);
  /* The positions: the input's dims without the class dim (1, or 0 for 1-D input). */
  int cdim = x->ndim == 1 ? 0 : 1;
  int pndim = 0;
  int64_t pshape[CT_MAX_DIMS], xst[CT_MAX_DIMS], tst[CT_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++)
    if (i != cdim) {
      pshape[pndim] = x->shape[i];
      xst[pndim++] = x->strides[i];
    }
  bool same = target->ndim == pndim;
  for (int i = 0; same && i < pndim; i++) same = target->shape[i] == pshape[i];
  if (!same)
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "%s: target has shape %s but %s of shape %s needs a target of shape %s "
                     "(its shape without the class dim %d)",
                     fn, ct__shape_str(ts, sizeof ts, target->ndim, target->shape), xn,
                     ct__shape_str(xs, sizeof xs, x->ndim, x->shape),
                     ct__shape_str(ps, sizeof ps, pndim, pshape), cdim);
  for (int i = 0; i < pndim; i++) tst[i] = target->strides[i];
  int64_t ncls = x->shape[cdim], cstride = x->strides[cdim], npos = ct_numel(target);
  ct_device *d = x->storage->device;
  ct_dtype adt = x->dtype == CT_F64 ? CT_F64 : CT_F32;
  ct_tensor *loss = NULL, *valid = NULL, *flag = NULL;
  ct_status st = ct__tensor_new(&loss, d, adt, pndim, pshape, fn);
  if (st == CT_OK) st = ct__tensor_new(&valid, d, adt, pndim, pshape, fn);
  /* Targets known to be class indices (a tensor from ct_from_host, unwritten since: tensor.h)
   * need no check: the flag is then neither set up nor read, and the loss makes no round trip to
   * the host in the middle of a training step. */
  bool check = ct__index_check_needed(target, ncls);
  if (st == CT_OK && npos > 0) {
    int64_t one = 1;
    cl_int init = INT_MAX;
    st = ct__tensor_new(&flag, d, CT_I32, 1, &one, fn);
    if (st == CT_OK && check) st = ct__fill_bits(flag, &init, fn);
    ct__kernel *k = NULL;
    if (st == CT_OK) st = loss_kernel(&k, d, "loss_nll", x->dtype, fn);
    if (st == CT_OK) {
      int64_t *sts[2] = {xst, tst};
      /* Merging positions dims that address both tensors alike spares ct_offset divisions. */
      int cn = ct__collapse_dims(pndim, pshape, 2, sts, 0);
      struct ct__kargs a;
      ct__kargs_begin(&a, k, ct__kernel_lock(k));
      ct__karg_tensor(&a, "in", x, 0);
      ct__karg_tensor(&a, "target", target, 0);
      ct__karg_tensor(&a, "loss", loss, 0);
      ct__karg_tensor(&a, "valid", valid, 0);
      ct__karg_tensor(&a, "bad", flag, 0);
      ct__karg_long(&a, "npos", npos);
      ct__karg_long(&a, "ncls", ncls);
      ct__karg_long(&a, "cstride", cstride);
      ct__karg_geom(&a, "positions", cn, pshape, 2, (const int64_t *const[]){xst, tst});
      ct__karg_long(&a, "ignore_index", ignore_index);
      ct__karg_int(&a, "ce", ce);
      if (adt == CT_F64) ct__karg_double(&a, "eps", eps);
      else ct__karg_float(&a, "eps", (float)eps);
      st = ct__launch1(k, &a, d, npos, 64, fn);
    }
    if (st == CT_OK && check) st = check_flag(flag, target, ncls, ignore_index, fn);
  }
  ct_tensor *res = NULL, *nvalid = NULL;
  if (st == CT_OK) st = finish(&res, &nvalid, loss, valid, r, x->dtype, fn);
  /* One node for the whole loss: its backward kernel recomputes the row's softmax from the
   * logits rather than keeping it. */
  ct__node *nd = NULL;
  if (st == CT_OK)
    st = ct__grad_record(&nd, res, ce ? CT__GOP_CROSS_ENTROPY : CT__GOP_NLL_LOSS, 0, 2,
                         (const ct_tensor *[]){x, target}, fn);
  if (st == CT_OK && nd) {
    ct__rec_class_loss *rec = &nd->rec.class_loss; /* CROSS_ENTROPY and NLL_LOSS's record */
    st = ct__grad_save_as(nd, &rec->x, x, fn);
    if (st == CT_OK) st = ct__grad_save_as(nd, &rec->target, target, fn);
    if (st == CT_OK) st = ct__grad_save_as(nd, &rec->nvalid, nvalid, fn);
    rec->ignore_index = ignore_index;
    rec->reduction = r;
    rec->cross_entropy = ce;
    rec->eps = eps;
  }
  ct_release(loss);
  ct_release(valid);
  ct_release(flag);
  ct_release(nvalid);
  return ct__tensor_result(out, res, st);
}

/* Autocast (torch.autocast's fp32 list): f16/bf16 float inputs are cast up to f32 (recorded, so
 * gradients flow back) while a low-precision autocast dtype is set; *c is a new reference. */
static ct_status autocast_f32(ct_tensor **c, const ct_tensor *t, const char *fn) {
  if (t && ct__autocast_dtype() != CT_F32 && (t->dtype == CT_F16 || t->dtype == CT_BF16))
    return ct__autocast_to(c, t, CT_F32, fn);
  *c = ct_retain((ct_tensor *)t);
  return CT_OK;
}

static ct_status class_loss_autocast(ct_tensor **out, const ct_tensor *x, const ct_tensor *target,
                                     int64_t ignore_index, double eps, ct_reduction r, int ce, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  ct_tensor *xc = NULL;
  CT__TRY(autocast_f32(&xc, x, fn));
  ct_status st = class_loss(out, xc, target, ignore_index, eps, r, ce, fn);
  ct_release(xc);
  return st;
}

ct_status ct__class_loss_backward(ct_tensor **dx, const ct_tensor *x, const ct_tensor *target, const ct_tensor *g,
                                  const ct_tensor *nvalid, int64_t ignore_index, double eps, ct_reduction r, int ce,
                                  const char *fn) {
  *dx = NULL;
  int cdim = x->ndim == 1 ? 0 : 1;
  int pndim = 0;
  int64_t pshape[CT_MAX_DIMS], xst[CT_MAX_DIMS], tst[CT_MAX_DIMS], ost[CT_MAX_DIMS], cst[CT_MAX_DIMS];
  ct__contiguous_strides(cst, x->ndim, x->shape);
  for (int i = 0; i < x->ndim; i++)
    if (i != cdim) {
      pshape[pndim] = x->shape[i];
      tst[pndim] = target->strides[pndim];
      ost[pndim] = cst[i];
      xst[pndim++] = x->strides[i];
    }
  int64_t ncls = x->shape[cdim], npos = ct_numel(target);
  ct_device *d = x->storage->device;
  ct_dtype adt = x->dtype == CT_F64 ? CT_F64 : CT_F32;
  ct_tensor *o = NULL, *gc = NULL;
  ct_status st = ct__tensor_new(&o, d, adt, x->ndim, x->shape, fn);
  if (st == CT_OK && ct_numel(o) > 0 && npos > 0) {
    st = ct__contiguous(&gc, g, adt, 0, fn);
    ct__kernel *k = NULL;
    if (st == CT_OK) st = loss_kernel(&k, d, "loss_nll_bwd", x->dtype, fn);
    if (st == CT_OK) {
      int64_t *sts[3] = {xst, tst, ost};
      int cn = ct__collapse_dims(pndim, pshape, 3, sts, 0);
      struct ct__kargs a;
      ct__kargs_begin(&a, k, ct__kernel_lock(k));
      ct__karg_tensor(&a, "in", x, 0);
      ct__karg_tensor(&a, "target", target, 0);
      ct__karg_tensor(&a, "g", gc, 0);
      ct__karg_int(&a, "g_per_pos", r == CT_REDUCTION_NONE);
      ct__karg_tensor(&a, "count", nvalid, 0);
      ct__karg_int(&a, "mean", r == CT_REDUCTION_MEAN);
      ct__karg_tensor(&a, "dx", o, 0);
      ct__karg_long(&a, "npos", npos);
      ct__karg_long(&a, "ncls", ncls);
      ct__karg_long(&a, "cstride", x->strides[cdim]);
      ct__karg_long(&a, "ocstride", cst[cdim]);
      ct__karg_geom(&a, "positions", cn, pshape, 3, (const int64_t *const[]){xst, tst, ost});
      ct__karg_long(&a, "ignore_index", ignore_index);
      ct__karg_int(&a, "ce", ce);
      if (adt == CT_F64) ct__karg_double(&a, "eps", eps);
      else ct__karg_float(&a, "eps", (float)eps);
      st = ct__launch1(k, &a, d, npos, 64, fn);
    }
  } else if (st == CT_OK) {
    st = ct__fill_value(o, 0.0, fn);
  }
  ct_release(gc);
  return ct__tensor_result(dx, o, st);
}

ct_status ct_cross_entropy(ct_tensor **out, const ct_tensor *logits, const ct_tensor *target,
                           int64_t ignore_index, double label_smoothing, ct_reduction r) {
  return class_loss_autocast(out, logits, target, ignore_index, label_smoothing, r, 1, "ct_cross_entropy");
}

ct_status ct_nll_loss(ct_tensor **out, const ct_tensor *logp, const ct_tensor *target,
                      int64_t ignore_index, ct_reduction r) {
  return class_loss_autocast(out, logp, target, ignore_index, 0.0, r, 0, "ct_nll_loss");
}

ct_status ct_mse_loss(ct_tensor **out, const ct_tensor *a, const ct_tensor *b, ct_reduction r) {
  const char *fn = "ct_mse_loss";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, a);
  CT__CHECK_NOT_NULL(fn, b);
  CT__TRY(check_reduction(r, fn));
  if (!ct_dtype_is_floating_point(a->dtype) || !ct_dtype_is_floating_point(b->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: a has dtype %s and b %s (expected float dtypes: f16, bf16, f32, f64)", fn,
                     ct_dtype_name(a->dtype), ct_dtype_name(b->dtype));
  /* Computed by public ops with grad mode off, then one node that saves the inputs only (the
   * ops' own nodes would keep a - b twice). */
  ct_tensor *ac = NULL, *bc = NULL, *diff = NULL, *sq = NULL, *res = NULL;
  ct_status st = autocast_f32(&ac, a, fn);
  if (st == CT_OK) st = autocast_f32(&bc, b, fn);
  bool prev = ct__grad_mode_set(false);
  if (st == CT_OK) st = ct_sub(&diff, ac, bc);
  if (st == CT_OK) st = ct_mul(&sq, diff, diff);
  if (st != CT_OK) {
    ct__error_append(" (in %s)", fn);
  } else if (r == CT_REDUCTION_NONE) {
    res = ct_retain(sq);
  } else {
    st = r == CT_REDUCTION_MEAN ? ct_mean(&res, sq, 0, NULL, false) : ct_sum(&res, sq, 0, NULL, false);
    if (st != CT_OK) ct__error_append(" (in %s)", fn);
  }
  ct__grad_mode_set(prev);
  ct__node *nd = NULL;
  if (st == CT_OK) st = ct__grad_record(&nd, res, CT__GOP_MSE_LOSS, 0, 2, (const ct_tensor *[]){ac, bc}, fn);
  if (st == CT_OK && nd) {
    ct__rec_mse_loss *rec = ct__rec_MSE_LOSS(nd);
    st = ct__grad_save_as(nd, &rec->a, ac, fn);
    if (st == CT_OK) st = ct__grad_save_as(nd, &rec->b, bc, fn);
    rec->reduction = r;
  }
  ct_release(ac);
  ct_release(bc);
  ct_release(diff);
  ct_release(sq);
  return ct__tensor_result(out, res, st);
}
