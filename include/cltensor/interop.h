/* Interop: the raw OpenCL objects behind devices and tensors, wrapping your own cl_mem buffers
 * as tensors, and DLPack.
 *
 * This header does not need the OpenCL headers: the handles are declared as pointers to
 * OpenCL's own incomplete structs, so `struct _cl_mem *` is exactly `cl_mem`, `struct
 * _cl_context *` is `cl_context`, and so on, and values pass between the two without casts.
 * DLPack's structs are likewise only named here; include <dlpack/dlpack.h> to look inside.
 *
 * Running your own kernels on cltensor data:
 *
 *   struct _cl_context *ctx;  struct _cl_command_queue *q;  struct _cl_mem *mem;  size_t off;
 *   ct_device_cl_context(&ctx, dev);               // build your program in this context
 *   ct_device_cl_queue(&q, dev);                   // enqueue on this queue: ordered after
 *   ct_tensor_cl_mem(&mem, &off, t);               //   cltensor's own work on t
 *   clSetKernelArg(k, 0, sizeof mem, &mem);        // pass off / element size as an index
 *   clEnqueueNDRangeKernel(q, k, ...);             // cltensor ops queued later run after it
 *
 * Ordering. cltensor queues work asynchronously on one in-order queue per device, so kernels
 * you enqueue on that queue see every earlier cltensor result, and later cltensor calls see
 * yours. On a queue of your own you must synchronize by hand: ct_device_synchronize(dev)
 * before using cltensor data, clFinish(your_queue) before handing data back.
 *
 * Handles returned here are borrowed: owned by cltensor, valid while the device (until
 * ct_shutdown()) or the tensor lives. Retain them (clRetainContext, clRetainMemObject) to keep
 * them longer. */
#ifndef CLTENSOR_INTEROP_H
#define CLTENSOR_INTEROP_H

#include <stddef.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

struct _cl_context;
struct _cl_command_queue;
struct _cl_device_id;
struct _cl_mem;
struct DLManagedTensor;
struct DLManagedTensorVersioned;

/* ---- Devices (each opens the device when it is not open yet) ----
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL; CT_ERR_OPENCL or CT_ERR_OUT_OF_MEMORY when
 * opening the device fails. */

/* OUT: *out, the device's OpenCL context (borrowed). Devices of one OpenCL platform share it. */
CT_API ct_status ct_device_cl_context(struct _cl_context **out, ct_device *d);
/* OUT: *out, the device's in-order command queue (borrowed), the one cltensor itself uses. */
CT_API ct_status ct_device_cl_queue(struct _cl_command_queue **out, ct_device *d);
/* OUT: *out, the device's OpenCL device id (borrowed). */
CT_API ct_status ct_device_cl_device_id(struct _cl_device_id **out, ct_device *d);

/* ---- Tensors ---- */

/* OUT: *mem, the buffer holding t's elements (borrowed: valid while t or a view of it lives),
 * and *byte_offset (may be NULL), where element 0 of t sits in it. Element (i0, i1, ...) is at
 * byte_offset + (i0 * strides[0] + i1 * strides[1] + ...) * ct_dtype_size(dtype), with
 * ct_tensor_strides(t). The buffer may hold other tensors too (the caching allocator splits
 * large buffers): write only inside t's elements. Autograd does not see writes made through
 * the buffer (nor through DLPack exports or wrapped buffers): don't write into a tensor a
 * recorded op saved for its backward (autograd.h's version counters can't catch it).
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL. */
CT_API ct_status ct_tensor_cl_mem(struct _cl_mem **mem, size_t *byte_offset, const ct_tensor *t);

/* OUT: *out, a new tensor over an existing OpenCL buffer, without copying: elements of dtype t,
 * the given shape, and strides in elements (NULL: contiguous; each >= 0), element 0 at
 * byte_offset (a multiple of ct_dtype_size(t)).
 * Ownership: the tensor retains mem (clRetainMemObject) and releases it when its storage goes,
 * i.e. when the last tensor or view over it is released; the caller keeps its own reference
 * and may release it at any time. Reads and writes through the tensor are reads and writes of
 * mem.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL mem or d, a bad ndim, shape or stride, a
 * misaligned byte_offset, a buffer from another OpenCL context than d's, an image instead of
 * a buffer, or a buffer too small for the elements (the sizes are in the message);
 * CT_ERR_UNSUPPORTED for f64 on a device without cl_khr_fp64; CT_ERR_OPENCL for an invalid
 * mem. *out is NULL on failure. */
CT_API ct_status ct_from_cl_mem(ct_tensor **out, ct_device *d, struct _cl_mem *mem, size_t byte_offset,
                                ct_dtype t, int ndim, const int64_t *shape, const int64_t *strides);

/* ---- DLPack ----
 * cltensor tensors are kDLOpenCL tensors: dl_tensor.data is the cl_mem (a `struct _cl_mem *`
 * cast to void *, not a host pointer), byte_offset is the offset of element 0 inside it, and
 * device_id is the ct_device index (ct_device_index()). Strides are in elements, always given.
 * dtypes: bool is {code 6 (kDLBool from DLPack 0.8 on), 8 bits}, u8 {kDLUInt, 8}, i8/i32/i64
 * {kDLInt, 8/32/64}, f16/f32/f64 {kDLFloat, 16/32/64}, bf16 {kDLBfloat, 16}; lanes 1.
 *
 * Import takes ownership on success only: the tensor calls the producer's deleter exactly once
 * (kDLOpenCL: when the tensor's storage is released; kDLCPU: right after the copy). On failure
 * the DLManagedTensor is left untouched and still belongs to the caller. */

/* OUT: *out, a new DLManagedTensor sharing t's memory (no copy). It holds a reference to t's
 * storage until the consumer calls its deleter, which frees it (once).
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL; CT_ERR_OUT_OF_MEMORY. */
CT_API ct_status ct_to_dlpack(struct DLManagedTensor **out, const ct_tensor *t);

/* OUT: *out, a new tensor from a DLManagedTensor.
 *  - kDLOpenCL: wraps the cl_mem in data (as ct_from_cl_mem(), plus the producer's
 *    byte_offset) without copying, on d, or when d is NULL on the device whose index is
 *    device_id; the buffer must belong to that device's context.
 *  - kDLCPU: copies the host data (any strides, also negative) onto d, which must not be
 *    NULL; the result is contiguous.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT (NULL src, NULL d for kDLCPU, ndim > CT_MAX_DIMS,
 * a NULL data pointer with elements, the checks of ct_from_cl_mem()); CT_ERR_UNSUPPORTED
 * for other device types, dtypes cltensor lacks and lanes != 1. */
CT_API ct_status ct_from_dlpack(ct_tensor **out, struct DLManagedTensor *src, ct_device *d);

/* The same for DLPack 1.x's DLManagedTensorVersioned (version 1.0 and later; the read-only
 * flag is set on no export, and an import of a read-only tensor is refused, as cltensor tensors
 * are writable). Where libcltensor was built against a DLPack header without the versioned
 * struct (< 1.0), both return CT_ERR_UNSUPPORTED. */
CT_API ct_status ct_to_dlpack_versioned(struct DLManagedTensorVersioned **out, const ct_tensor *t);
CT_API ct_status ct_from_dlpack_versioned(ct_tensor **out, struct DLManagedTensorVersioned *src,
                                          ct_device *d);

CT_END_DECLS

#endif
