/* ct_max_pool2d, ct_avg_pool2d, ct_adaptive_avg_pool2d, ct_max_pool1d, ct_avg_pool1d (kernels/pool.cl: one kernel, the mode a
 * runtime argument, plus an unrolled 2x2 max pool in the same program, so the three share one
 * program per dtype). */
#include <stdio.h>

#include "core/error.h"
#include "device/device.h"
#include "nn/nn.h"
#include "tensor/graph.h"

/* Max pooling over 2x2 windows, stride 2, no padding, no dilation: the unrolled kernels. */
static bool pool_is_max2(int mode, const int win[8]) {
  return mode == CT__POOL_MAX && win[0] == 2 && win[1] == 2 && win[2] == 2 && win[3] == 2 && win[4] == 0 &&
         win[5] == 0 && win[6] == 1 && win[7] == 1;
}

static const ct__gop pool_gops[4] = {CT__GOP_MAX_POOL2D, CT__GOP_AVG_POOL2D, CT__GOP_ADAPTIVE_AVG_POOL2D,
                                     CT__GOP_AVG_POOL2D};

/* Records the backward (src/autograd/grad_conv.c) on the result o: the window, the mode as the
 * node's sub; max pool saves x, whose first maximum per window its gradient recomputes (the
 * averages need only x's shape, which the node's edge has). */
static ct_status pool_record(ct_tensor *o, const ct_tensor *x, int mode, const int win[8], const char *fn) {
  ct__node *n = NULL;
  CT__TRY(ct__grad_record(&n, o, pool_gops[mode], mode, 1, (const ct_tensor *[]){x}, fn));
  if (!n) return CT_OK;
  ct__rec_pool *rec = &n->rec.pool; /* the three pools' record */
  for (int i = 0; i < 8; i++) rec->win[i] = win[i];
  return mode == CT__POOL_MAX ? ct__grad_save_as(n, &rec->x, x, fn) : CT_OK;
}

/* The arguments x, xs, C, H, W, out, OH, OW, mode, kh .. pw, N of pool2d, pool2d_max2 and
 * pool2d_bwd (x4 [N, C, H, W]). */
static void pool_kargs(struct ct__kargs *a, const ct_tensor *x4, const ct_tensor *o, int64_t OH, int64_t OW,
                       int mode, const int win[8]) {
  ct__karg_tensor(a, "x", x4, 0);
  cl_long4 xs = {{x4->strides[0], x4->strides[1], x4->strides[2], x4->strides[3]}};
  ct__karg(a, "xs", sizeof xs, &xs);
  ct__karg_long(a, "C", x4->shape[1]);
  ct__karg_long(a, "H", x4->shape[2]);
  ct__karg_long(a, "W", x4->shape[3]);
  ct__karg_tensor(a, "out", o, 0);
  ct__karg_long(a, "OH", OH);
  ct__karg_long(a, "OW", OW);
  ct__karg_int(a, "mode", mode);
  static const char *const names[8] = {"kh", "kw", "sth", "stw", "ph", "pw", "dh", "dw"};
  for (int i = 0; i < 8; i++) ct__karg_int(a, names[i], win[i]);
  ct__karg_long(a, "N", x4->shape[0]);
}

/* Launches the locked k over the 3-D range (n0, n1, n2) as pool2d's, ends a's list. */
static ct_status pool_launch(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t n0, int64_t n1, int64_t n2,
                             const char *fn) {
  ct_status st = ct__kargs_end(a, fn);
  if (st == CT_OK && n0 > 0 && n1 > 0 && n2 > 0) {
    size_t global[3] = {(size_t)n0, (size_t)n1, (size_t)n2}, local[3];
    ct__launch_planes(k, global, local);
    st = ct__kernel_launch(k, d, 3, global, local);
  }
  ct__kernel_unlock(k);
  return st;
}

ct_status ct__nn_pool2d_backward(ct_tensor **gx, const ct_tensor *g, const ct_tensor *x, int xndim,
                                 const int64_t *xshape, ct_dtype dt, ct_device *d, int mode, const int win[8],
                                 const char *fn) {
  *gx = NULL;
  /* x, g and the result as [N, C, H, W] (x: a header of the input's shape over g's storage when
   * the averages give no x; the kernel does not read it then). */
  int64_t s4[4] = {1, 1, 1, 1}, st4[4] = {0, 0, 0, 0};
  for (int i = 0; i < xndim; i++) s4[4 - xndim + i] = xshape[i];
  ct_tensor *g4 = NULL, *x4 = NULL, *o = NULL;
  ct_status st = ct__nn_batched4(&g4, g, fn);
  if (st == CT_OK) st = x ? ct__nn_batched4(&x4, x, fn) : ct__tensor_view(&x4, g, 4, s4, st4, g->offset);
  if (st == CT_OK) st = ct__tensor_new(&o, d, dt, 4, s4, fn);
  ct__kernel *k;
  if (st == CT_OK && ct_numel(o) > 0) {
    /* pool2d_max2's windows: a work-item per window (kernels/pool.cl says why); the elements
     * of an odd last row or column lie in no window and are zeroed first. */
    bool max2 = pool_is_max2(mode, win);
    if (max2 && (s4[2] % 2 || s4[3] % 2)) st = ct__fill_value(o, 0, fn);
    if (st == CT_OK) st = ct__kernel_for(&k, d, "pool.cl", max2 ? "pool2d_max2_bwd" : "pool2d_bwd", (int)dt, NULL, fn);
    if (st == CT_OK) {
      struct ct__kargs a;
      ct__kargs_begin(&a, k, ct__kernel_lock(k));
      pool_kargs(&a, x4, o, g4->shape[2], g4->shape[3], mode, win);
      ct__karg_tensor(&a, "g", g4, 0);
      cl_long4 gs = {{g4->strides[0], g4->strides[1], g4->strides[2], g4->strides[3]}};
      ct__karg(&a, "gs", sizeof gs, &gs);
      if (max2) st = pool_launch(k, &a, d, g4->shape[3], g4->shape[2], s4[0] * s4[1], fn);
      else st = pool_launch(k, &a, d, s4[3], s4[2], s4[0] * s4[1], fn);
    }
  }
  if (st == CT_OK && xndim == 3) st = ct__nn_unbatch(&o);
  ct_release(g4);
  ct_release(x4);
  return ct__tensor_result(gx, o, st);
}

/* Checks x and runs the kernel into a new [N, C, OH, OW] (or [C, OH, OW]) output. */
static ct_status pool_run(ct_tensor **out, const ct_tensor *x, int mode, const int win[8], int64_t OH, int64_t OW,
                          const ct_tensor *x4, const char *fn) {
  ct_device *d = x4->storage->device;
  int64_t oshape[4] = {x4->shape[0], x4->shape[1], OH, OW};
  ct_tensor *o = NULL;
  CT__TRY(ct__tensor_new(&o, d, x4->dtype, 4, oshape, fn));
  ct_status st = CT_OK;
  int64_t total = ct_numel(o);
  if (total > 0) {
    ct__kernel *k;
    /* 2x2 windows, stride 2, no padding: the unrolled kernel (kernels/pool.cl says why). */
    bool max2 = pool_is_max2(mode, win);
    st = ct__kernel_for(&k, d, "pool.cl", max2 ? "pool2d_max2" : "pool2d", (int)x4->dtype, NULL, fn);
    if (st == CT_OK) {
      struct ct__kargs a;
      ct__kargs_begin(&a, k, ct__kernel_lock(k));
      pool_kargs(&a, x4, o, OH, OW, mode, win);
      st = pool_launch(k, &a, d, OW, OH, x4->shape[0] * x4->shape[1], fn);
    }
  }
  if (st == CT_OK && x->ndim == 3) st = ct__nn_unbatch(&o);
  if (st == CT_OK) st = pool_record(o, x, mode, win, fn);
  return ct__tensor_result(out, o, st);
}

/* The checks every pool op starts with: out, x and the op's size argument (what, "kernel" or
 * "size") not NULL, x a float tensor; *x4 is x as [N, C, H, W]. */
static ct_status pool_begin(ct_tensor **x4, ct_tensor **out, const ct_tensor *x, const void *param, const char *what,
                            const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  if (!param) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, what);
  CT__TRY(ct__nn_check_float(fn, "x", x));
  return ct__nn_batched4(x4, x, fn);
}

/* The output size of one spatial dim (PyTorch's pooling_output_shape): *o, or
 * CT_ERR_SHAPE_MISMATCH when no window fits. i: 0 (height) or 1 (width), for messages. */
static ct_status pool_out_size(int64_t *o, int64_t in, int kk, int s, int p, int dil, bool ceil_mode, int i,
                               const ct_tensor *x, const char *fn) {
  /* eff - 2p >= 0 (p <= kk / 2), so numer cannot overflow; ceil's adjustments stay below
   * in + s, refused first when that might not fit. */
  int64_t eff = (int64_t)dil * (kk - 1) + 1, numer = in - (eff - 2 * (int64_t)p), q = -1;
  if (ceil_mode && in > INT64_MAX / 2)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dim %d of x (%lld) is too large for ceil_mode", fn,
                     x->ndim - 2 + i, (long long)in);
  if (numer >= 0) q = numer / s + (ceil_mode && numer % s ? 1 : 0);
  else if (ceil_mode && numer + (s - 1) >= 0) q = 0;
  if (q < 0) {
    char dil_txt[48] = "";
    if (dil > 1) snprintf(dil_txt, sizeof dil_txt, " (dilated: %lld)", (long long)eff);
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: kernel[%d] = %d%s is larger than the padded input size %lld (dim %d of x)",
                     fn, i, kk, dil_txt, (long long)(in + 2 * (int64_t)p), x->ndim - 2 + i);
  }
  *o = q + 1;
  /* The last window must start inside the input or the left padding. */
  if (ceil_mode && (*o - 1) * s >= in + p) --*o;
  return CT_OK;
}

/* The windowed pools: kernel, stride (NULL: the kernel), padding (NULL: 0), dilation (NULL: 1),
 * ceil_mode; mode CT__POOL_MAX, _AVG or _AVG_EXCL. */
static ct_status pool_window(ct_tensor **out, const ct_tensor *x, const int kernel[2], const int stride[2],
                             const int padding[2], const int dilation[2], bool ceil_mode, int mode, const char *fn) {
  ct_tensor *x4 = NULL;
  CT__TRY(pool_begin(&x4, out, x, kernel, "kernel", fn));
  /* kh, kw, sh, sw, ph, pw, dh, dw */
  int win[8] = {kernel[0], kernel[1], stride ? stride[0] : kernel[0], stride ? stride[1] : kernel[1],
                padding ? padding[0] : 0, padding ? padding[1] : 0, dilation ? dilation[0] : 1,
                dilation ? dilation[1] : 1};
  ct_status st = CT_OK;
  int64_t o[2] = {0, 0};
  for (int i = 0; i < 2 && st == CT_OK; i++) {
    int kk = win[i], s = win[2 + i], p = win[4 + i], dil = win[6 + i];
    if (kk < 1) st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: kernel[%d] must be >= 1, got %d", fn, i, kk);
    else if (s < 1) st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: stride[%d] must be >= 1, got %d", fn, i, s);
    else if (dil < 1) st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dilation[%d] must be >= 1, got %d", fn, i, dil);
    else if (p < 0 || p > kk / 2)
      st = ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: padding[%d] is %d; it must be between 0 and half the kernel size (%d), as PyTorch's", fn,
                     i, p, kk / 2);
    else
      st = pool_out_size(&o[i], x4->shape[2 + i], kk, s, p, dil, ceil_mode, i, x, fn);
  }
  if (st == CT_OK) st = pool_run(out, x, mode, win, o[0], o[1], x4, fn);
  ct_release(x4);
  return st;
}

ct_status ct_max_pool2d(ct_tensor **out, const ct_tensor *x, const int kernel[2], const int stride[2],
                        const int padding[2]) {
  return pool_window(out, x, kernel, stride, padding, NULL, false, CT__POOL_MAX, "ct_max_pool2d");
}

ct_status ct_avg_pool2d(ct_tensor **out, const ct_tensor *x, const int kernel[2], const int stride[2],
                        const int padding[2]) {
  return pool_window(out, x, kernel, stride, padding, NULL, false, CT__POOL_AVG, "ct_avg_pool2d");
}

/* The 1-D pools as PyTorch computes them: x [N, C, L] or [C, L] unsqueezed to a height of 1,
 * pooled in 2-D with a window of height 1, squeezed back (the two views record their
 * backward, so the gradient goes through the 2-D pool's). */
static ct_status pool1d(ct_tensor **out, const ct_tensor *x, int kernel, int stride, int padding, int dilation,
                        bool ceil_mode, int mode, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  if (x->ndim != 2 && x->ndim != 3) {
    char sa[200];
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: x has shape %s (expected [N, C, L] or [C, L])", fn,
                     ct__shape_str(sa, sizeof sa, x->ndim, x->shape));
  }
  if (stride < 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: stride must be >= 1 (or 0: the kernel), got %d", fn, stride);
  ct_tensor *x4 = NULL, *o4 = NULL;
  CT__TRY(ct_unsqueeze(&x4, x, -2));
  int k2[2] = {1, kernel}, s2[2] = {1, stride ? stride : kernel}, p2[2] = {0, padding}, d2[2] = {1, dilation};
  ct_status st = pool_window(&o4, x4, k2, s2, p2, d2, ceil_mode, mode, fn);
  if (st == CT_OK) st = ct_squeeze(out, o4, -2);
  ct_release(x4);
  ct_release(o4);
  return st;
}

ct_status ct_max_pool1d(ct_tensor **out, const ct_tensor *x, int kernel, int stride, int padding, int dilation,
                        bool ceil_mode) {
  return pool1d(out, x, kernel, stride, padding, dilation, ceil_mode, CT__POOL_MAX, "ct_max_pool1d");
}

ct_status ct_avg_pool1d(ct_tensor **out, const ct_tensor *x, int kernel, int stride, int padding, bool ceil_mode,
                        bool count_include_pad) {
  return pool1d(out, x, kernel, stride, padding, 1, ceil_mode, count_include_pad ? CT__POOL_AVG : CT__POOL_AVG_EXCL,
                "ct_avg_pool1d");
}

ct_status ct_adaptive_avg_pool2d(ct_tensor **out, const ct_tensor *x, const int64_t size[2]) {
  const char *fn = "ct_adaptive_avg_pool2d";
  ct_tensor *x4 = NULL;
  CT__TRY(pool_begin(&x4, out, x, size, "size", fn));
  ct_status st = CT_OK;
  for (int i = 0; i < 2 && st == CT_OK; i++) {
    if (size[i] < 0)
      st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: size[%d] must be >= 0, got %lld", fn, i, (long long)size[i]);
    else if (x4->shape[2 + i] == 0 && size[i] != 0)
      st = ct__error(CT_ERR_SHAPE_MISMATCH, "%s: dim %d of x is empty; it can't be pooled to size[%d] = %lld", fn,
                     x->ndim - 2 + i, i, (long long)size[i]);
    /* The kernel's window bounds are (o + 1) * in / size, so size times the input size (plus a
     * size) must fit int64. */
    else if (size[i] > 0 && (x4->shape[2 + i] > (INT64_MAX - size[i]) / size[i]))
      st = ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: size[%d] = %lld times dim %d of x (%lld) does not fit int64", fn, i, (long long)size[i],
                     x->ndim - 2 + i, (long long)x4->shape[2 + i]);
  }
  int win[8] = {1, 1, 1, 1, 0, 0, 1, 1};
  if (st == CT_OK) st = pool_run(out, x, CT__POOL_ADAPTIVE, win, size[0], size[1], x4, fn);
  ct_release(x4);
  return st;
}
