/* Raw OpenCL interop: the device's handles, a tensor's buffer, and tensors over foreign
 * buffers (wrapped storage: block == NULL, mem retained here, released with the storage). */
#include <inttypes.h>
#include <stdlib.h>

#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "interop/interop.h"
#include "tensor/tensor.h"

ct_status ct_device_cl_context(struct _cl_context **out, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_device_cl_context", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_device_cl_context", d);
  CT__TRY(ct__device_open(d));
  *out = ct__device_context(d);
  return CT_OK;
}

ct_status ct_device_cl_queue(struct _cl_command_queue **out, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_device_cl_queue", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_device_cl_queue", d);
  CT__TRY(ct__device_open(d));
  CT__TRY(ct__deferred_realize("ct_device_cl_queue"));
  *out = ct__device_queue(d);
  return CT_OK;
}

ct_status ct_device_cl_device_id(struct _cl_device_id **out, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_device_cl_device_id", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_device_cl_device_id", d);
  *out = d->id;
  return CT_OK;
}

ct_status ct_tensor_cl_mem(struct _cl_mem **mem, size_t *byte_offset, const ct_tensor *t) {
  CT__CHECK_NOT_NULL("ct_tensor_cl_mem", mem);
  *mem = NULL;
  CT__CHECK_NOT_NULL("ct_tensor_cl_mem", t);
  /* The caller uses the buffer on queues of its own: recorded work is enqueued first. */
  CT__TRY(ct__deferred_realize("ct_tensor_cl_mem"));
  CT__TRY(ct__tensor_deferred_use(t, "ct_tensor_cl_mem"));
  *mem = ct__tensor_mem(t);
  if (byte_offset) *byte_offset = ct__tensor_byte_offset(t);
  /* The caller may write the buffer behind the version counter (tensor.h). */
  ct__storage_forget_range(t->storage);
  return CT_OK;
}

/* Bytes from element 0 to one past the furthest element; UINT64_MAX on overflow. */
static uint64_t ct__extent_bytes(int ndim, const int64_t *shape, const int64_t *strides, size_t esize) {
  uint64_t last = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 0) return 0;
    uint64_t span = (uint64_t)(shape[i] - 1), stride = (uint64_t)strides[i];
    if (stride && span > (UINT64_MAX - last) / stride) return UINT64_MAX;
    last += span * stride;
  }
  if (last >= UINT64_MAX / esize) return UINT64_MAX;
  return (last + 1) * esize;
}

ct_status ct__wrap_cl_mem(ct_tensor **out, ct_device *d, cl_mem mem, size_t byte_offset, ct_dtype t,
                          int ndim, const int64_t *shape, const int64_t *strides,
                          void (*release)(void *ctx), void *release_ctx, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  CT__CHECK_NOT_NULL(fn, mem);
  size_t esize = ct_dtype_size(t);
  if (esize == 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: invalid dtype %d", fn, (int)t);
  if (ndim < 0 || ndim > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ndim %d is outside [0, %d]", fn, ndim, CT_MAX_DIMS);
  if (ndim > 0) CT__CHECK_NOT_NULL(fn, shape);
  /* The shape's element count and byte size must fit like any tensor's, whatever the strides:
   * a broadcast (stride 0) dim of 2^62 f32 fits a 4-byte buffer but not ct_tensor_nbytes(). */
  int64_t numel;
  CT__TRY(ct__shape_numel(&numel, ndim, shape, esize, fn));
  int64_t st[CT_MAX_DIMS];
  for (int i = ndim - 1; i >= 0; i--) {
    if (strides) {
      if (strides[i] < 0)
        return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: strides[%d] is %" PRId64 ", strides must be >= 0",
                         fn, i, strides[i]);
      st[i] = strides[i];
    } else {
      /* Cannot overflow: ct__shape_numel() checked the product of the nonzero dims. */
      st[i] = i == ndim - 1 ? 1 : st[i + 1] * (shape[i + 1] ? shape[i + 1] : 1);
    }
  }
  if (byte_offset % esize != 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: byte_offset %zu is not a multiple of the %zu-byte %s element", fn, byte_offset,
                     esize, ct_dtype_name(t));
  if (t == CT_F64 && !d->props.fp64)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: f64 needs cl_khr_fp64, which device %s (%s) lacks", fn,
                     d->spec, d->props.name);
  CT__TRY(ct__device_open(d));

  cl_mem_object_type type;
  cl_context ctx;
  size_t size;
  cl_int err = clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, NULL);
  if (err == CL_SUCCESS) err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof ctx, &ctx, NULL);
  if (err == CL_SUCCESS) err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (err != CL_SUCCESS) return ct__cl_error(err, "%s: clGetMemObjectInfo on the buffer %p", fn, (void *)mem);
  if (type != CL_MEM_OBJECT_BUFFER)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the cl_mem %p is an image (type 0x%x), not a buffer", fn,
                     (void *)mem, (unsigned)type);
  if (ctx != ct__device_context(d))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: the buffer belongs to OpenCL context %p, not to context %p of device %s (%s)",
                     fn, (void *)ctx, (void *)ct__device_context(d), d->spec, d->props.name);
  uint64_t extent = ct__extent_bytes(ndim, shape, st, esize);
  if (extent > (uint64_t)size || byte_offset > (uint64_t)size - extent) {
    char sb[256];
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: the buffer has %zu bytes, too few for shape %s of %s: %s%" PRIu64
                     " bytes from byte_offset %zu",
                     fn, size, ct__shape_str(sb, sizeof sb, ndim, shape), ct_dtype_name(t),
                     extent == UINT64_MAX ? "more than " : "", extent, byte_offset);
  }

  ct_tensor *x;
  ct__storage *s;
  CT__TRY(ct__tensor_headers(&x, &s, d, t, ndim, shape, st, fn));
  err = clRetainMemObject(mem);
  if (err != CL_SUCCESS) {
    ct__tensor_headers_free(x, s);
    return ct__cl_error(err, "%s: clRetainMemObject", fn);
  }
  s->mem = mem;
  s->nbytes = size;
  s->release = release;
  s->release_ctx = release_ctx;
  x->offset = (int64_t)(byte_offset / esize);
  *out = x;
  return CT_OK;
}

ct_status ct_from_cl_mem(ct_tensor **out, ct_device *d, struct _cl_mem *mem, size_t byte_offset,
                         ct_dtype t, int ndim, const int64_t *shape, const int64_t *strides) {
  return ct__wrap_cl_mem(out, d, mem, byte_offset, t, ndim, shape, strides, NULL, NULL,
                         "ct_from_cl_mem");
}
