/* ct_layer_norm, ct_rms_norm, ct_batch_norm (kernels/norm.cl). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cltensor/reduce.h"
#include "cltensor/shape.h"
#include "core/error.h"
#include "device/device.h"
#include "kernel/launch_geom.h"
#include "nn/nn.h"
#include "tensor/graph.h"

/* The parameters' dtype for x's dtype: x's own, or f32 beside f16/bf16 x (PyTorch's mixed
 * mode). pd is CT_F32 or x's dtype when no parameter is given. */
static ct_status param_dtype(ct_dtype *pd, const ct_tensor *x, const ct_tensor *const *ps, const char *const *names,
                             int np, const char *fn) {
  *pd = x->dtype;
  bool set = false;
  for (int i = 0; i < np; i++) {
    const ct_tensor *p = ps[i];
    if (!p) continue;
    CT__TRY(ct__check_same_device(fn, "x", x, names[i], p));
    bool ok = p->dtype == x->dtype || (p->dtype == CT_F32 && (x->dtype == CT_F16 || x->dtype == CT_BF16));
    if (!ok)
      return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: %s has dtype %s but x has %s (parameters take x's dtype, or f32 "
                       "for f16/bf16 x)", fn, names[i], ct_dtype_name(p->dtype), ct_dtype_name(x->dtype));
    if (set && p->dtype != *pd)
      return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: %s has dtype %s but the other parameters have %s", fn, names[i],
                       ct_dtype_name(p->dtype), ct_dtype_name(*pd));
    *pd = p->dtype;
    set = true;
  }
  return CT_OK;
}

/* Whether x's dims from `from` on are laid out contiguously (element j of that block at j). */
static bool dims_flat(const ct_tensor *x, int from) {
  int64_t expect = 1;
  for (int i = x->ndim - 1; i >= from; i--) {
    if (x->shape[i] != 1 && x->strides[i] != expect) return false;
    expect *= x->shape[i];
  }
  return true;
}

/* Locks k and passes the arguments bn_part and the row kernels begin with: x as [N, C, S...]
 * (kernels/norm.cl, BN_ELEM). */
static void karg_bn_x(struct ct__kargs *a, ct__kernel *k, const ct_tensor *x, int64_t N, int64_t C, int64_t S) {
  ct__kargs_begin(a, k, ct__kernel_lock(k));
  ct__karg_tensor(a, "x", x, 0);
  ct__karg_long(a, "N", N);
  ct__karg_long(a, "C", C);
  ct__karg_long(a, "sn", x->strides[0]);
  ct__karg_long(a, "sc", x->strides[1]);
  ct__karg_int(a, "sndim", x->ndim - 2);
  ct__karg_long8(a, "sshape", x->ndim - 2, x->shape + 2, 1);
  ct__karg_long8(a, "sstr", x->ndim - 2, x->strides + 2, 0);
  ct__karg_int(a, "sflat", dims_flat(x, 2));
  ct__karg_long(a, "S", S);
}

static void karg_acc(struct ct__kargs *a, const char *name, ct_dtype xdt, double v) {
  if (xdt == CT_F64) ct__karg_double(a, name, v);
  else ct__karg_float(a, name, (float)v);
}

/* An optional parameter tensor: its buffer and offset (NULL when absent: the kernels read it
 * only under its has_ flag), then the flag when hasname is given. */
static void karg_param(struct ct__kargs *a, const char *name, const char *hasname, const ct_tensor *p) {
  ct__karg_tensor(a, name, p, 0);
  if (hasname) ct__karg_int(a, hasname, p != NULL);
}

/* karg_bn_x's arguments, then the row kernels' (bn_apply, bn_bwd_apply) chunks: rows of at most
 * 2048 elements are one work-item each, longer ones split evenly. *items gets the work-item
 * count. */
static void karg_bn_rows(struct ct__kargs *a, int64_t *items, ct__kernel *k, const ct_tensor *x, int64_t N, int64_t C,
                         int64_t S) {
  int64_t nchunk = (S + 2047) / 2048;
  if (nchunk < 1) nchunk = 1;
  karg_bn_x(a, k, x, N, C, S);
  ct__karg_long(a, "chunk", (S + nchunk - 1) / nchunk);
  ct__karg_long(a, "nchunk", nchunk);
  *items = N * C * nchunk;
}

/* The blocks bn_part cuts each channel's M = N S elements into: about 256 blocks over all
 * channels (enough work-items to fill a CPU's cores, few enough that the per-channel merge
 * stays short), at least 512 elements each (a block's cost outweighs its work-item's), at most
 * a whole channel. A function of the shape alone, so the statistics have the same bits on
 * every run and device. */
static void bn_blocks(int64_t *blk, int64_t *nblk, int64_t M, int64_t C) {
  int64_t b = (M * C + 255) / 256;
  if (b < 512) b = 512;
  if (b > M) b = M;
  *blk = b > 0 ? b : 1;
  *nblk = (M + *blk - 1) / *blk;
}

/* Launches bn_part (kernels/norm.cl) over nblk blocks of blk elements of each of x's C
 * channels, writing 2 values per block into part; backward with g and ss (bn_stats' output).
 * Groups of 8 work-items: a block is already a few hundred elements of work, and the default
 * 1024-item groups would put all of them on one core. */
static ct_status bn_part_launch(ct__kernel *k, ct_device *d, const ct_tensor *x, int64_t N, int64_t C, int64_t S,
                                int64_t blk, int64_t nblk, const ct_tensor *g, const ct_tensor *ss,
                                const ct_tensor *part, const char *fn) {
  struct ct__kargs a;
  karg_bn_x(&a, k, x, N, C, S);
  ct__karg_long(&a, "blk", blk);
  ct__karg_long(&a, "nblk", nblk);
  ct__karg_int(&a, "backward", g != NULL);
  karg_param(&a, "g", NULL, g);
  karg_param(&a, "ss", NULL, ss);
  ct__karg_tensor(&a, "part", part, 0);
  return ct__launch1(k, &a, d, nblk * C, 8, fn);
}

/* Locks k (norm_rows or one of its backward kernels) and passes the arguments they all begin
 * with: x as rows over its first outer dims, each row its last n elements, then the row-shaped
 * tensor t they write or read (the output, or the gradient g) as argument `name`. */
static void karg_rows_begin(struct ct__kargs *a, ct__kernel *k, const ct_tensor *x, int outer, int64_t nrows,
                            int64_t n, const char *name, const ct_tensor *t) {
  ct__kargs_begin(a, k, ct__kernel_lock(k));
  int nnorm = x->ndim - outer;
  /* Outer dims that collapse to one are rows at a fixed stride: kndim 0 and that stride, which
   * the kernels use instead of dividing each row number (ROW() in kernels/norm.cl). */
  int64_t osh[CT_MAX_DIMS], ost[CT_MAX_DIMS], *stp[1] = {ost};
  memcpy(osh, x->shape, (size_t)outer * sizeof *osh);
  memcpy(ost, x->strides, (size_t)outer * sizeof *ost);
  int od = ct__collapse_dims(outer, osh, 1, stp, 0);
  ct__karg_tensor(a, "x", x, 0);
  ct__karg_int(a, "kndim", od <= 1 ? 0 : outer);
  ct__karg_long8(a, "kshape", outer, x->shape, 1);
  ct__karg_long8(a, "kstr", outer, x->strides, 0);
  ct__karg_long(a, "rstride", od == 1 ? ost[0] : 0);
  ct__karg_int(a, "indim", nnorm);
  ct__karg_long8(a, "ishape", nnorm, x->shape + outer, 1);
  ct__karg_long8(a, "istr", nnorm, x->strides + outer, 0);
  ct__karg_int(a, "inner_flat", dims_flat(x, outer));
  ct__karg_long(a, "nrows", nrows);
  ct__karg_long(a, "n", n);
  ct__karg_tensor(a, name, t, 0);
}

/* Launches a row kernel (a work-item walks a whole row): groups of at most 64 rows, since a
 * transformer's few hundred rows in one 1024-item group (ct__launch_dims()) ran on one core of
 * a CPU. Ends a's list and unlocks k. */
static ct_status launch_rows(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t rows, const char *fn) {
  ct_status st = ct__kargs_end(a, fn);
  if (st == CT_OK && rows > 0) {
    size_t global = (size_t)rows, local;
    ct__launch_shape(k, 1, 64, &global, &local);
    st = ct__kernel_launch(k, d, 1, &global, &local);
  }
  ct__kernel_unlock(k);
  return st;
}

/* Autocast (torch.autocast's fp32 list): f16/bf16 x, weight and bias are cast up to f32 while a
 * low-precision autocast dtype is set; the cast records, so gradients flow back to the f16/bf16
 * tensors. Each *c is a new reference (the input itself when nothing changes). */
static ct_status autocast_f32(int n, ct_tensor **c, const ct_tensor *const *t, const char *fn) {
  bool on = ct__autocast_dtype() != CT_F32;
  ct_status st = CT_OK;
  for (int i = 0; i < n; i++) {
    c[i] = NULL;
    if (!t[i]) continue;
    bool low = t[i]->dtype == CT_F16 || t[i]->dtype == CT_BF16;
    if (st == CT_OK) st = on && low ? ct__autocast_to(&c[i], t[i], CT_F32, fn) : CT_OK;
    if (st == CT_OK && !c[i]) c[i] = ct_retain((ct_tensor *)t[i]);
  }
  if (st != CT_OK)
    for (int i = 0; i < n; i++) {
      ct_release(c[i]);
      c[i] = NULL;
    }
  return st;
}

static ct_status norm_api(ct_tensor **out, const ct_tensor *x, int nnorm, const ct_tensor *weight,
                          const ct_tensor *bias, double eps, int mode, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  CT__TRY(ct__nn_check_float(fn, "x", x));
  char sx[160], sp[160];
  if (nnorm < 1 || nnorm > x->ndim)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: nnorm is %d; it must be between 1 and x's %d dims (x %s)", fn,
                     nnorm, x->ndim, ct__shape_str(sx, sizeof sx, x->ndim, x->shape));
  if (mode == 1 && isnan(eps)) {
    switch (x->dtype) {
      case CT_F64: eps = ldexp(1, -52); break;
      case CT_F16: eps = ldexp(1, -10); break;
      case CT_BF16: eps = ldexp(1, -7); break;
      default: eps = ldexp(1, -23); break;
    }
  }
  if (!(eps >= 0)) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: eps must be >= 0, got %g", fn, eps);
  const ct_tensor *ps[2] = {weight, bias};
  static const char *const names[2] = {"weight", "bias"};
  ct_dtype pd;
  CT__TRY(param_dtype(&pd, x, ps, names, 2, fn));
  int outer = x->ndim - nnorm;
  for (int i = 0; i < 2; i++) {
    const ct_tensor *p = ps[i];
    if (!p) continue;
    bool same = p->ndim == nnorm && memcmp(p->shape, x->shape + outer, sizeof(int64_t) * (size_t)nnorm) == 0;
    if (!same)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: %s has shape %s but x's last %d dims are %s", fn, names[i],
                       ct__shape_str(sp, sizeof sp, p->ndim, p->shape), nnorm,
                       ct__shape_str(sx, sizeof sx, nnorm, x->shape + outer));
  }
  ct_device *d = x->storage->device;
  ct_tensor *o = NULL, *wc = NULL, *bc = NULL;
  CT__TRY(ct__tensor_new(&o, d, x->dtype, x->ndim, x->shape, fn));
  int64_t n = 1, nrows = 1;
  for (int i = outer; i < x->ndim; i++) n *= x->shape[i];
  for (int i = 0; i < outer; i++) nrows *= x->shape[i];
  ct_status st = CT_OK;
  if (ct_numel(o) > 0) {
    /* weight and bias are read in the row's order: contiguous copies if they are views. */
    if (weight) st = ct__contiguous(&wc, weight, weight->dtype, 0, fn);
    if (st == CT_OK && bias) st = ct__contiguous(&bc, bias, bias->dtype, 0, fn);
    char extra[32];
    snprintf(extra, sizeof extra, "-DCT_PD=%d", (int)pd);
    ct__kernel *k = NULL;
    if (st == CT_OK) st = ct__kernel_for(&k, d, "norm.cl", "norm_rows", (int)x->dtype, extra, fn);
    if (st == CT_OK) {
      struct ct__kargs a;
      karg_rows_begin(&a, k, x, outer, nrows, n, "out", o);
      karg_param(&a, "w", "has_w", wc);
      karg_param(&a, "b", "has_b", bc);
      ct__karg_int(&a, "mode", mode);
      karg_acc(&a, "eps", x->dtype, eps);
      st = launch_rows(k, &a, d, nrows, fn);
    }
  }
  /* The backward recomputes each row's mean and rstd from x (cheaper than keeping them for
   * rows this short) and needs the weight as the kernel read it. */
  ct__node *nd = NULL;
  if (st == CT_OK)
    st = ct__grad_record(&nd, o, mode == 0 ? CT__GOP_LAYER_NORM : CT__GOP_RMS_NORM, mode, 3,
                         (const ct_tensor *[]){x, weight, bias}, fn);
  if (st == CT_OK && nd) {
    ct__rec_norm *rec = &nd->rec.norm; /* LAYER_NORM and RMS_NORM's record */
    st = ct__grad_save_as(nd, &rec->x, x, fn);
    if (st == CT_OK && weight) {
      if (!wc) st = ct__contiguous(&wc, weight, weight->dtype, 0, fn);
      if (st == CT_OK) st = ct__grad_save_as(nd, &rec->w, wc, fn);
    }
    rec->nnorm = nnorm;
    rec->param_dtype = pd;
    rec->eps = eps;
  }
  ct_release(wc);
  ct_release(bc);
  return ct__tensor_result(out, o, st);
}

/* norm_api under autocast (autocast_f32). */
static ct_status norm_autocast(ct_tensor **out, const ct_tensor *x, int nnorm, const ct_tensor *weight,
                               const ct_tensor *bias, double eps, int mode, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  ct_tensor *c[3];
  CT__TRY(autocast_f32(3, c, (const ct_tensor *[]){x, weight, bias}, fn));
  ct_status st = norm_api(out, c[0], nnorm, c[1], c[2], eps, mode, fn);
  for (int i = 0; i < 3; i++) ct_release(c[i]);
  return st;
}

ct_status ct_layer_norm(ct_tensor **out, const ct_tensor *x, int nnorm, const ct_tensor *weight,
                        const ct_tensor *bias, double eps) {
  return norm_autocast(out, x, nnorm, weight, bias, eps, 0, "ct_layer_norm");
}

ct_status ct_rms_norm(ct_tensor **out, const ct_tensor *x, int nnorm, const ct_tensor *weight, double eps) {
  return norm_autocast(out, x, nnorm, weight, NULL, eps, 1, "ct_rms_norm");
}

ct_status ct__norm_backward(ct_tensor **dx, ct_tensor **dw, ct_tensor **db, const ct_tensor *x, const ct_tensor *g,
                            const ct_tensor *w, int nnorm, double eps, int mode, ct_dtype pd, const char *fn) {
  int outer = x->ndim - nnorm;
  int64_t n = 1, nrows = 1;
  for (int i = outer; i < x->ndim; i++) n *= x->shape[i];
  for (int i = 0; i < outer; i++) nrows *= x->shape[i];
  ct_device *d = x->storage->device;
  ct_dtype adt = x->dtype == CT_F64 ? CT_F64 : CT_F32;
  ct_tensor *gc = NULL, *stats = NULL, *ox = NULL, *ow = NULL, *ob = NULL;
  ct_status st = CT_OK;
  if (dx) st = ct__tensor_new(&ox, d, x->dtype, x->ndim, x->shape, fn);
  if (st == CT_OK && ct_numel(x) == 0) {
    /* No rows: the parameters' gradients are empty sums. */
    if (dw) st = ct_zeros(&ow, d, adt, nnorm, x->shape + outer);
    if (st == CT_OK && db) st = ct_zeros(&ob, d, adt, nnorm, x->shape + outer);
  } else if (st == CT_OK) {
    int64_t sshape[1] = {2 * nrows};
    st = ct__contiguous(&gc, g, x->dtype, 0, fn);
    if (st == CT_OK) st = ct__tensor_new(&stats, d, adt, 1, sshape, fn);
    char extra[32];
    snprintf(extra, sizeof extra, "-DCT_PD=%d", (int)pd);
    ct__kernel *kr = NULL, *kc = NULL;
    if (st == CT_OK) st = ct__kernel_for(&kr, d, "norm.cl", "norm_rows_bwd", (int)x->dtype, extra, fn);
    if (st == CT_OK && (dw || db)) st = ct__kernel_for(&kc, d, "norm.cl", "norm_cols_bwd", (int)x->dtype, extra, fn);
    if (st == CT_OK) {
      struct ct__kargs a;
      karg_rows_begin(&a, kr, x, outer, nrows, n, "g", gc);
      karg_param(&a, "w", "has_w", w);
      ct__karg_int(&a, "mode", mode);
      karg_acc(&a, "eps", x->dtype, eps);
      ct__karg_tensor(&a, "stats", stats, 0);
      ct__karg_int(&a, "want_dx", ox != NULL);
      karg_param(&a, "dx", NULL, ox);
      st = launch_rows(kr, &a, d, nrows, fn);
    }
    if (st == CT_OK && kc) {
      /* Blocks of 32 rows per work-item, partial sums [nblk, n] summed over the blocks. */
      int64_t rblk = 32, nblk = (nrows + rblk - 1) / rblk;
      int64_t pshape[2] = {nblk, n};
      ct_tensor *pw = NULL, *pb = NULL;
      if (dw) st = ct__tensor_new(&pw, d, adt, 2, pshape, fn);
      if (st == CT_OK && db) st = ct__tensor_new(&pb, d, adt, 2, pshape, fn);
      if (st == CT_OK) {
        struct ct__kargs a;
        karg_rows_begin(&a, kc, x, outer, nrows, n, "g", gc);
        ct__karg_tensor(&a, "stats", stats, 0);
        ct__karg_long(&a, "rblk", rblk);
        ct__karg_long(&a, "nblk", nblk);
        ct__karg_int(&a, "want_w", pw != NULL);
        karg_param(&a, "pw", NULL, pw);
        ct__karg_int(&a, "want_b", pb != NULL);
        karg_param(&a, "pb", NULL, pb);
        /* a work-item per 16 columns of a block (kernels/norm.cl), in groups of 64 as the rows */
        st = launch_rows(kc, &a, d, (n + 15) / 16 * nblk, fn);
      }
      int dim0[1] = {0};
      ct_tensor *sw = NULL, *sb = NULL;
      if (st == CT_OK && pw) st = ct_sum(&sw, pw, 1, dim0, false);
      if (st == CT_OK && pb) st = ct_sum(&sb, pb, 1, dim0, false);
      if (st == CT_OK && sw) st = ct_reshape(&ow, sw, nnorm, x->shape + outer);
      if (st == CT_OK && sb) st = ct_reshape(&ob, sb, nnorm, x->shape + outer);
      ct_release(pw);
      ct_release(pb);
      ct_release(sw);
      ct_release(sb);
    }
  }
  ct_release(gc);
  ct_release(stats);
  return ct__tensor_results(3, (ct_tensor **const[]){dx, dw, db}, (ct_tensor *const[]){ox, ow, ob}, st);
}

/* nbt, when not NULL (training only): BatchNorm's num_batches_tracked (i64, one element),
 * incremented by bn_stats. */
static ct_status bn_api(ct_tensor **out, const ct_tensor *x, ct_tensor *running_mean, ct_tensor *running_var,
                        ct_tensor *nbt, const ct_tensor *weight, const ct_tensor *bias, bool training,
                        double momentum, double eps) {
  const char *fn = "ct_batch_norm";
  CT__CHECK_NOT_NULL(fn, x);
  CT__TRY(ct__nn_check_float(fn, "x", x));
  char sx[160], sp[160];
  if (x->ndim < 2)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: x must have at least 2 dims [N, C, ...], got %s", fn,
                     ct__shape_str(sx, sizeof sx, x->ndim, x->shape));
  if (!training && (!running_mean || !running_var))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: eval mode (training false) needs running_mean and running_var, "
                     "got %s NULL", fn, !running_mean ? "running_mean" : "running_var");
  if ((running_mean == NULL) != (running_var == NULL))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: running_mean and running_var must both be given or both be NULL "
                     "(%s is NULL)", fn, !running_mean ? "running_mean" : "running_var");
  if (!(eps >= 0)) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: eps must be >= 0, got %g", fn, eps);
  if (!isfinite(momentum))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: momentum must be finite, got %g", fn, momentum);
  const ct_tensor *ps[4] = {running_mean, running_var, weight, bias};
  static const char *const names[4] = {"running_mean", "running_var", "weight", "bias"};
  ct_dtype pd;
  CT__TRY(param_dtype(&pd, x, ps, names, 4, fn));
  int64_t N = x->shape[0], C = x->shape[1], S = 1;
  for (int i = 2; i < x->ndim; i++) S *= x->shape[i];
  for (int i = 0; i < 4; i++) {
    const ct_tensor *p = ps[i];
    if (!p) continue;
    if (p->ndim != 1 || p->shape[0] != C)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: %s must be [%lld] (x's channels, x %s), got %s", fn, names[i],
                       (long long)C, ct__shape_str(sx, sizeof sx, x->ndim, x->shape),
                       ct__shape_str(sp, sizeof sp, p->ndim, p->shape));
    if (i < 2 && ct__tensor_overlaps(p, x))
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s shares memory with x; it is written in place", fn, names[i]);
  }
  /* As PyTorch ("Expected more than 1 value per channel when training"), with or without
   * running statistics: one value has no batch variance. */
  if (training && N * S == 1 && C > 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: training needs more than 1 value per channel (as PyTorch), x %s", fn,
                     ct__shape_str(sx, sizeof sx, x->ndim, x->shape));
  if (training && N * S == 0 && C > 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: training on an empty batch has no statistics (x %s)", fn,
                     ct__shape_str(sx, sizeof sx, x->ndim, x->shape));
  /* Training writes the running statistics in place: refused for tensors that require grad (as
   * PyTorch's in-place rule), and their version moves (a graph that saved them notices). */
  if (training && running_mean) {
    CT__TRY(ct__tensor_check_writable(running_mean, fn, "running_mean"));
    CT__TRY(ct__tensor_check_writable(running_var, fn, "running_var"));
    /* One channel's two statistics would land on one cell. */
    if (ct__tensor_overlaps(running_mean, running_var))
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: running_mean and running_var share memory; both are written in place", fn);
    CT__TRY(ct__grad_check_inplace(fn, running_mean, "running_mean"));
    CT__TRY(ct__grad_check_inplace(fn, running_var, "running_var"));
  }
  if (training && nbt) CT__TRY(ct__tensor_check_writable(nbt, fn, "num_batches_tracked"));
  ct_device *d = x->storage->device;
  ct_tensor *o = NULL, *ss = NULL, *part = NULL;
  CT__TRY(ct__tensor_new(&o, d, x->dtype, x->ndim, x->shape, fn));
  ct_status st = CT_OK;
  /* Nothing to compute (no channels, or an empty batch in eval): the backward gives zeros. */
  bool empty = C == 0 || (ct_numel(x) == 0 && !training);
  ct_dtype adt = x->dtype == CT_F64 ? CT_F64 : CT_F32;
  /* ss: per channel scale, shift (the forward's), mean, invstd (the backward's). part: the
   * training statistics of each block of each channel (bn_part). */
  int64_t sshape[1] = {4 * C}, blk = 1, nblk = 0;
  if (training) bn_blocks(&blk, &nblk, N * S, C);
  int64_t pshape[1] = {2 * nblk * C};
  if (!empty) st = ct__tensor_new(&ss, d, adt, 1, sshape, fn);
  if (st == CT_OK && !empty && training) st = ct__tensor_new(&part, d, adt, 1, pshape, fn);
  char extra[32];
  snprintf(extra, sizeof extra, "-DCT_PD=%d", (int)pd);
  ct__kernel *kp = NULL, *ks = NULL, *ka = NULL;
  if (st == CT_OK && part) st = ct__kernel_for(&kp, d, "norm.cl", "bn_part", (int)x->dtype, extra, fn);
  if (st == CT_OK && !empty) st = ct__kernel_for(&ks, d, "norm.cl", "bn_stats", (int)x->dtype, extra, fn);
  if (st == CT_OK && !empty) st = ct__kernel_for(&ka, d, "norm.cl", "bn_apply", (int)x->dtype, extra, fn);
  if (st == CT_OK && kp) st = bn_part_launch(kp, d, x, N, C, S, blk, nblk, NULL, NULL, part, fn);
  if (st == CT_OK && !empty) {
    struct ct__kargs a;
    ct__kargs_begin(&a, ks, ct__kernel_lock(ks));
    ct__karg_long(&a, "C", C);
    ct__karg_long(&a, "nblk", nblk);
    ct__karg_long(&a, "blk", blk);
    ct__karg_long(&a, "cnt_all", N * S);
    karg_param(&a, "part", NULL, part);
    karg_param(&a, "rm", NULL, running_mean);
    karg_param(&a, "rv", NULL, running_var);
    ct__karg_int(&a, "has_running", running_mean != NULL);
    karg_param(&a, "w", "has_w", weight);
    karg_param(&a, "b", "has_b", bias);
    ct__karg_int(&a, "training", training);
    karg_acc(&a, "momentum", x->dtype, momentum);
    karg_acc(&a, "eps", x->dtype, eps);
    ct__karg_tensor(&a, "ss", ss, 0);
    karg_param(&a, "nbt", "has_nbt", training ? nbt : NULL);
    st = ct__launch1(ks, &a, d, C, 0, fn);
    if (training) {
      ct__tensor_bump_version(running_mean);
      ct__tensor_bump_version(running_var);
      ct__tensor_bump_version(nbt);
    }
  }
  if (st == CT_OK && !empty && ct_numel(x) > 0) {
    struct ct__kargs a;
    int64_t items;
    karg_bn_rows(&a, &items, ka, x, N, C, S);
    ct__karg_tensor(&a, "ss", ss, 0);
    ct__karg_tensor(&a, "out", o, 0);
    st = ct__launch1(ka, &a, d, items, 64, fn);
  }
  /* The running statistics are not inputs of the node: their update is not differentiable, and
   * the backward reads the statistics the forward used from ss (so a later update of the
   * running stats in place does not invalidate it). */
  ct__node *nd = NULL;
  if (st == CT_OK)
    st = ct__grad_record(&nd, o, CT__GOP_BATCH_NORM, 0, 3, (const ct_tensor *[]){x, weight, bias}, fn);
  if (st == CT_OK && nd) {
    ct__rec_batch_norm *rec = ct__rec_BATCH_NORM(nd);
    st = ct__grad_save_as(nd, &rec->x, x, fn);
    if (st == CT_OK) st = ct__grad_save_as(nd, &rec->ss, ss, fn);
    rec->training = training;
    rec->param_dtype = pd;
  }
  ct_release(ss);
  ct_release(part);
  return ct__tensor_result(out, o, st);
}

ct_status ct__batch_norm_tracked(ct_tensor **out, const ct_tensor *x, ct_tensor *running_mean,
                                 ct_tensor *running_var, ct_tensor *nbt, const ct_tensor *weight,
                                 const ct_tensor *bias, bool training, double momentum, double eps) {
  const char *fn = "ct_batch_norm";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  /* Autocast casts x, weight and bias up to f32 only when the running statistics (written in
   * place, so never cast) are f32 or absent: f16 running stats keep the call as it is. */
  bool f32_running = (!running_mean || running_mean->dtype == CT_F32) && (!running_var || running_var->dtype == CT_F32);
  ct_tensor *c[3] = {NULL, NULL, NULL};
  if (f32_running) CT__TRY(autocast_f32(3, c, (const ct_tensor *[]){x, weight, bias}, fn));
  ct_status st = f32_running
                     ? bn_api(out, c[0], running_mean, running_var, nbt, c[1], c[2], training, momentum, eps)
                     : bn_api(out, x, running_mean, running_var, nbt, weight, bias, training, momentum, eps);
  for (int i = 0; i < 3; i++) ct_release(c[i]);
  return st;
}

ct_status ct_batch_norm(ct_tensor **out, const ct_tensor *x, ct_tensor *running_mean, ct_tensor *running_var,
                        const ct_tensor *weight, const ct_tensor *bias, bool training, double momentum,
                        double eps) {
  return ct__batch_norm_tracked(out, x, running_mean, running_var, NULL, weight, bias, training, momentum, eps);
}

ct_status ct__bn_backward(ct_tensor **dx, ct_tensor **dw, ct_tensor **db, const ct_tensor *x, const ct_tensor *g,
                          const ct_tensor *ss, bool training, ct_dtype pd, const char *fn) {
  int64_t N = x->shape[0], C = x->shape[1], S = 1;
  for (int i = 2; i < x->ndim; i++) S *= x->shape[i];
  ct_device *d = x->storage->device;
  ct_dtype adt = x->dtype == CT_F64 ? CT_F64 : CT_F32;
  ct_tensor *gc = NULL, *red = NULL, *ox = NULL, *part = NULL;
  ct_status st = CT_OK;
  int64_t rshape[1] = {2 * C}, blk, nblk;
  bn_blocks(&blk, &nblk, N * S, C);
  int64_t pshape[1] = {2 * nblk * C};
  if (dx) st = ct__tensor_new(&ox, d, x->dtype, x->ndim, x->shape, fn);
  if (st == CT_OK) st = ct__tensor_new(&red, d, adt, 1, rshape, fn);
  if (st == CT_OK && !ss) {
    /* The forward computed nothing (no channels or an empty eval batch): zero gradients. */
    if (ox) st = ct__fill_value(ox, 0.0, fn);
    if (st == CT_OK) st = ct__fill_value(red, 0.0, fn);
  } else if (st == CT_OK) {
    char extra[32];
    snprintf(extra, sizeof extra, "-DCT_PD=%d", (int)pd);
    ct__kernel *kp = NULL, *ks = NULL, *ka = NULL;
    st = ct__contiguous(&gc, g, x->dtype, 0, fn);
    if (st == CT_OK) st = ct__tensor_new(&part, d, adt, 1, pshape, fn);
    if (st == CT_OK) st = ct__kernel_for(&kp, d, "norm.cl", "bn_part", (int)x->dtype, extra, fn);
    if (st == CT_OK) st = ct__kernel_for(&ks, d, "norm.cl", "bn_bwd_stats", (int)x->dtype, extra, fn);
    if (st == CT_OK && ox) st = ct__kernel_for(&ka, d, "norm.cl", "bn_bwd_apply", (int)x->dtype, extra, fn);
    if (st == CT_OK) st = bn_part_launch(kp, d, x, N, C, S, blk, nblk, gc, ss, part, fn);
    if (st == CT_OK) {
      struct ct__kargs a;
      ct__kargs_begin(&a, ks, ct__kernel_lock(ks));
      ct__karg_long(&a, "C", C);
      ct__karg_long(&a, "nblk", nblk);
      ct__karg_tensor(&a, "part", part, 0);
      ct__karg_tensor(&a, "ss", ss, 0);
      ct__karg_tensor(&a, "red", red, 0);
      st = ct__launch1(ks, &a, d, C, 0, fn);
    }
    if (st == CT_OK && ka) {
      struct ct__kargs a;
      int64_t items;
      karg_bn_rows(&a, &items, ka, x, N, C, S);
      ct__karg_tensor(&a, "g", gc, 0);
      ct__karg_tensor(&a, "ss", ss, 0);
      ct__karg_tensor(&a, "red", red, 0);
      ct__karg_int(&a, "training", training);
      ct__karg_tensor(&a, "dx", ox, 0);
      st = ct__launch1(ka, &a, d, items, 64, fn);
    }
  }
  /* dbias = sum(g) is red[0, C), dweight = sum(g xhat) is red[C, 2 C). */
  int64_t one[1] = {1}, cs[1] = {C};
  if (st == CT_OK && db) st = ct__tensor_view(db, red, 1, cs, one, red->offset);
  if (st == CT_OK && dw) st = ct__tensor_view(dw, red, 1, cs, one, red->offset + C);
  ct_release(gc);
  ct_release(red);
  ct_release(part);
  if (st != CT_OK) {
    ct_release(ox);
    if (db) {
      ct_release(*db);
      *db = NULL;
    }
    return st;
  }
  if (dx) *dx = ox;
  return CT_OK;
}
