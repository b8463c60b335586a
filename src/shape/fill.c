/* clone, the *_like constructors, in-place fills and linspace. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "core/dtype.h"
#include "core/host.h"
#include "core/error.h"
#include "shape/shape.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

ct_status ct_clone(ct_tensor **out, const ct_tensor *x) {
  CT__CHECK_NOT_NULL("ct_clone", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_clone", x);
  ct_tensor *r = NULL;
  CT__TRY(ct__contiguous(&r, x, x->dtype, 1, "ct_clone"));
  ct__node *n = NULL; /* CLONE: the gradient passes through */
  ct_status st = ct__grad_record(&n, r, CT__GOP_CLONE, 0, 1, (const ct_tensor *[]){x}, "ct_clone");
  return ct__tensor_result(out, r, st);
}

/* A new contiguous tensor like x, filled with value unless fill is 0. */
static ct_status ct__like(ct_tensor **out, const ct_tensor *x, int fill, double value, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  ct_tensor *o;
  CT__TRY(ct__tensor_new(&o, x->storage->device, x->dtype, x->ndim, x->shape, fn));
  if (fill) {
    ct_status st = ct__fill_value(o, value, fn);
    if (st != CT_OK) {
      ct_release(o);
      return st;
    }
  }
  *out = o;
  return CT_OK;
}

ct_status ct_empty_like(ct_tensor **out, const ct_tensor *x) { return ct__like(out, x, 0, 0, "ct_empty_like"); }
ct_status ct_zeros_like(ct_tensor **out, const ct_tensor *x) { return ct__like(out, x, 1, 0, "ct_zeros_like"); }
ct_status ct_ones_like(ct_tensor **out, const ct_tensor *x) { return ct__like(out, x, 1, 1, "ct_ones_like"); }

static ct_status ct__fill_(ct_tensor *x, double v, const char *fn) {
  CT__CHECK_NOT_NULL(fn, x);
  CT__TRY(ct__dtype_check_scalar(v, x->dtype, fn, "value"));
  /* Several elements in one location would be written by several work-items: refuse, as
   * PyTorch's in-place ops do. */
  CT__TRY(ct__tensor_check_writable(x, fn, "x"));
  CT__TRY(ct__grad_check_inplace(fn, x, "x"));
  ct__tensor_bump_version(x);
  return ct__fill_value(x, v, fn);
}

ct_status ct_fill_(ct_tensor *x, double v) { return ct__fill_(x, v, "ct_fill_"); }
ct_status ct_zero_(ct_tensor *x) { return ct__fill_(x, 0, "ct_zero_"); }

ct_status ct_linspace(ct_tensor **out, ct_device *d, ct_dtype dtype, double start, double end, int64_t steps) {
  const char *fn = "ct_linspace";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  if ((unsigned)dtype >= CT_DTYPE_COUNT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dtype %d is not a ct_dtype", fn, (int)dtype);
  if (steps < 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: steps is %" PRId64 " (expected >= 0)", fn, steps);
  CT__TRY(ct__dtype_check_scalar(start, dtype, fn, "start"));
  CT__TRY(ct__dtype_check_scalar(end, dtype, fn, "end"));
  ct_tensor *o;
  CT__TRY(ct__tensor_new(&o, d, dtype, 1, &steps, fn));
  if (steps == 0) {
    *out = o;
    return CT_OK;
  }
  size_t es = ct_dtype_size(dtype);
  unsigned char *h = NULL;
  ct_status st = ct__host_malloc((void **)&h, (size_t)steps * es, fn);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  /* steps == 1 gives start, as torch.linspace (the formula below would give end). */
  int64_t half = steps == 1 ? 1 : steps / 2;
  /* torch.linspace's CPU kernel: the step in the dtype's compute precision (f32 for f32 and the
   * 16-bit floats, f64 for f64 and, with an f64 step, for the integers), the first half counted
   * from start and the second from end, so both ends are exact. */
  if (dtype == CT_F32 || dtype == CT_F16 || dtype == CT_BF16) {
    float fs = (float)start, fe = (float)end;
    float step = steps > 1 ? (fe - fs) / (float)(steps - 1) : 0.0f;
    for (int64_t i = 0; i < steps; i++) {
      float v = i < half ? fs + step * (float)i : fe - step * (float)(steps - 1 - i);
      ct__host_store_double(dtype, h + (size_t)i * es, (double)v);
    }
  } else {
    /* Integers: start and end converted to the dtype first (they fit), the step in f64. */
    double ds = start, de = end;
    if (!ct_dtype_is_floating_point(dtype)) {
      ds = trunc(start);
      de = trunc(end);
    }
    double step = steps > 1 ? (de - ds) / (double)(steps - 1) : 0.0;
    for (int64_t i = 0; i < steps; i++) {
      double v = i < half ? ds + step * (double)i : de - step * (double)(steps - 1 - i);
      ct__host_store_double(dtype, h + (size_t)i * es, v);
    }
  }
  st = ct_copy_from_host(o, h, (size_t)steps * es);
  free(h);
  return ct__tensor_result(out, o, st);
}
