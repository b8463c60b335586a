/* Initialising a float product's destination: zeros, or beta times c broadcast to the result
 * (the gemm_init kernel), before a GEMM accumulates into it. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "fusion/hooks.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "linalg/linalg.h"
#include "tensor/tensor.h"

/* target (contiguous) = beta * broadcast(c), converting c's dtype; zeros when c is NULL. */
ct_status ct__mm_init_c(ct_device *d, const char *fn, ct_tensor *target, const ct_tensor *c, double beta) {
  int64_t toff;
  size_t tes = ct_dtype_size(target->dtype);
  if (!ct__tensor_elem_offset(target, &toff)) return ct__error(CT_ERR_INTERNAL, "%s: misaligned result", fn);
  int64_t n = ct_numel(target);
  if (n == 0) return CT_OK;
  CT__TRY(ct__deferred_realize(fn));
  if (!c || beta == 0) {
    cl_ulong zero = 0;
    cl_int err = clEnqueueFillBuffer(ct__device_queue(d), ct__tensor_mem(target), &zero, tes,
                                     (size_t)toff * tes, (size_t)n * tes, 0, NULL, NULL);
    if (err != CL_SUCCESS) return ct__cl_error(err, "%s: clearing the result on %s", fn, d->spec);
    return CT_OK;
  }
  /* beta == 1 (ct_linear's bias, ct_addmm's default) is a broadcasting copy with the same single
   * rounding; the copy kernels walk the two inner dims without gemm_init's per-element index
   * divisions, which cost ~1 ms per 256x1024 result on a CPU device. */
  if (beta == 1) {
    /* ct_addmm_out(c, c, ...): the result already holds c. */
    bool same = c->storage == target->storage && c->offset == target->offset && c->dtype == target->dtype &&
                c->ndim == target->ndim &&
                memcmp(c->shape, target->shape, (size_t)c->ndim * sizeof c->shape[0]) == 0 &&
                memcmp(c->strides, target->strides, (size_t)c->ndim * sizeof c->strides[0]) == 0;
    return same ? CT_OK : ct__copy(target, c, fn);
  }
  int64_t coff = 0;
  ct_tensor *cc = NULL;
  if (!ct__tensor_elem_offset(c, &coff)) {
    CT__TRY(ct_contiguous(&cc, c));
    c = cc;
  }
  char opts[64];
  snprintf(opts, sizeof opts, "-DCT_OUT=%d -DCT_SRC=%d", (int)target->dtype, (int)c->dtype);
  ct__kernel *k;
  ct_status st = ct__kernel_get(&k, d, "linalg.cl", "gemm_init", opts);
  if (st != CT_OK) {
    ct_release(cc);
    return st;
  }
  int64_t strides[CT_MAX_DIMS];
  ct__mm_expand_strides(strides, c, target->ndim, target->shape);
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "out", target, 0);
  ct__karg_tensor(&a, "src", c, 0);
  ct__karg_int(&a, "nd", target->ndim);
  ct__karg_long8(&a, "shape", target->ndim, target->shape, 1);
  ct__karg_long8(&a, "strides", target->ndim, strides, 0);
  if (target->dtype == CT_F64) ct__karg_double(&a, "beta", beta);
  else ct__karg_float(&a, "beta", (cl_float)beta);
  ct__karg_long(&a, "n", n);
  st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    /* Explicit work-group sizes from a fixed set: with NULL, PoCL compiles anew per size. */
    size_t global = (size_t)n, local;
    ct__launch_dims(k, 1, &global, &local);
    st = ct__kernel_launch(k, d, 1, &global, &local);
  }
  ct__kernel_unlock(k);
  ct_release(cc);
  return st;
}
