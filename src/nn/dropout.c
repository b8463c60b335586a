/* Dropout on the Philox generator (the dropout_fill kernel of kernels/random.cl), so its mask
 * bits are those of ct_rand() from the same (seed, offset). */
#include <math.h>
#include <string.h>

#include "cltensor/elementwise.h"
#include "cltensor/nn.h"
#include "core/error.h"
#include "device/device.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "kernel/launch_geom.h"
#include "nn/nn.h"
#include "random/random.h"
#include "reduce/reduce.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* o = x * mask / (1 - p) with the mask of the Philox stream (seed, offset): o is a new
 * contiguous tensor of x's shape and dtype. The forward applies it to x, the backward to the
 * output's gradient with the forward's (seed, offset), so both see the same mask. */
static ct_status dropout_apply(ct_tensor **out, const ct_tensor *x, double p, uint64_t seed, uint64_t offset,
                               const char *fn) {
  ct_device *d = x->storage->device;
  ct_tensor *o = NULL;
  CT__TRY(ct__tensor_new(&o, d, x->dtype, x->ndim, x->shape, fn));
  int64_t n = ct_numel(o);
  if (n == 0) {
    *out = o;
    return CT_OK;
  }
  ct__kernel *k;
  ct_status st = ct__kernel_for(&k, d, "random.cl", "dropout_fill", CT__NO_DTYPE, NULL, fn);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  int64_t shape[CT_MAX_DIMS], strides[CT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  memcpy(strides, x->strides, sizeof strides);
  int64_t *sts[1] = {strides};
  int ndim = ct__collapse_dims(x->ndim, shape, 1, sts, 0);
  double scale = 1.0 / (1.0 - p);
  cl_ulong scale_bits;
  memcpy(&scale_bits, &scale, sizeof scale_bits);
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  ct__karg_tensor(&a, "in", x, 0);
  ct__karg_geom(&a, "in", ndim, shape, 1, (const int64_t *const[]){strides});
  ct__karg_tensor(&a, "out", o, 0);
  ct__karg_long(&a, "n", n);
  ct__karg_int(&a, "dt", (cl_int)x->dtype);
  ct__karg_float(&a, "p", (float)p);
  ct__karg_float(&a, "scale", (float)scale);
  ct__karg_ulong(&a, "scale_bits", scale_bits);
  ct__karg_ulong(&a, "seed", seed);
  ct__karg_ulong(&a, "offset", offset);
  /* A work-item per 32 elements (8 Philox blocks: kernels/random.cl). */
  st = ct__launch1(k, &a, d, (n + 31) / 32, 64, fn);
  return ct__tensor_result(out, o, st);
}

ct_status ct_dropout(ct_tensor **out, const ct_tensor *x, double p, bool training) {
  const char *fn = "ct_dropout";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  if (!(p >= 0 && p <= 1))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: p is %g (expected a probability in [0, 1])", fn, p);
  if (!ct_dtype_is_floating_point(x->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: x has dtype %s (expected a float dtype: f16, bf16, f32, f64)", fn,
                     ct_dtype_name(x->dtype));
  /* PyTorch returns the input itself here; a new reference is the closest C equivalent (the
   * gradient flows through unchanged: it is the same tensor). */
  if (!training || p == 0) {
    *out = ct_retain((ct_tensor *)x);
    return CT_OK;
  }
  if (p == 1) {
    /* Everything dropped, without drawing (PyTorch: input * 0), which records its own zero
     * gradient. */
    ct_status st = ct_mul_scalar(out, x, 0.0);
    if (st != CT_OK) ct__error_append(" (in %s)", fn);
    return st;
  }
  uint64_t seed, offset;
  ct__rng_take(&seed, &offset);
  ct_tensor *o = NULL;
  CT__TRY(dropout_apply(&o, x, p, seed, offset, fn));
  /* The backward regenerates the mask from (seed, offset) rather than keeping it. */
  ct__node *nd = NULL;
  ct_status st = ct__grad_record(&nd, o, CT__GOP_DROPOUT, 0, 1, (const ct_tensor *[]){x}, fn);
  if (st == CT_OK && nd) *ct__rec_DROPOUT(nd) = (ct__rec_dropout){.seed = seed, .offset = offset, .p = p};
  return ct__tensor_result(out, o, st);
}

ct_status ct__dropout_backward(ct_tensor **dx, const ct_tensor *g, double p, uint64_t seed, uint64_t offset,
                               const char *fn) {
  return dropout_apply(dx, g, p, seed, offset, fn);
}
