/* Host <-> device transfers. Contiguous tensors move with one enqueued read or write. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "tensor/tensor.h"

ct_status ct_from_host(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                       const void *data) {
  CT__TRY(ct__tensor_new(out, d, t, ndim, shape, "ct_from_host"));
  size_t nbytes = ct_tensor_nbytes(*out);
  if (nbytes == 0) return CT_OK;
  ct_status st = CT_OK;
  if (!data) {
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "ct_from_host: argument 'data' is NULL for %zu bytes", nbytes);
  } else {
    cl_int err = clEnqueueWriteBuffer(ct__device_queue(d), ct__tensor_mem(*out), CL_TRUE, ct__tensor_byte_offset(*out),
                                      nbytes, data, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      st = ct__cl_error(err, "ct_from_host: clEnqueueWriteBuffer of %zu bytes to %s failed", nbytes, d->spec);
  }
  if (st != CT_OK) {
    ct_release(*out);
    *out = NULL;
  }
  return st;
}

ct_status ct_to_host(const ct_tensor *t, void *dst, size_t dst_bytes) {
  CT__CHECK_NOT_NULL("ct_to_host", t);
  size_t nbytes = ct_tensor_nbytes(t);
  if (nbytes == 0) return CT_OK;
  CT__CHECK_NOT_NULL("ct_to_host", dst);
  if (dst_bytes < nbytes)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_to_host: destination buffer of %zu bytes is too small for %zu bytes",
                     dst_bytes, nbytes);
  if (!ct_tensor_is_contiguous(t))
    return ct__error(CT_ERR_UNSUPPORTED, "ct_to_host: non-contiguous tensors land in the next step");
  ct_device *d = t->storage->device;
  cl_int err = clEnqueueReadBuffer(ct__device_queue(d), ct__tensor_mem(t), CL_TRUE, ct__tensor_byte_offset(t), nbytes,
                                   dst, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    return ct__cl_error(err, "ct_to_host: clEnqueueReadBuffer of %zu bytes from %s failed", nbytes, d->spec);
  return CT_OK;
}
