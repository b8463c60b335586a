/* Tensors on devices: creation, host<->device moves, views, the caching allocator.
 *
 * A ct_tensor is an opaque, atomically reference-counted handle: a device, a dtype, up to
 * CT_MAX_DIMS dims with shape and strides (in elements; a stride may be 0 for a broadcast dim),
 * an element offset, and shared device storage. Views share storage with their base and keep it
 * alive: releasing the base while a view lives is fine.
 *
 * Conventions.
 *  - Functions that create a tensor take `ct_tensor **out` first and store a NEW reference
 *    there, which the caller releases with ct_release(). On failure *out is NULL.
 *  - Input tensors are borrowed: the call neither keeps nor releases them (a view retains the
 *    storage, not the handle).
 *  - Every call taking several tensors checks them first: different devices give
 *    CT_ERR_DEVICE_MISMATCH naming both canonical specs; unfit dtypes CT_ERR_DTYPE_MISMATCH and
 *    unfit shapes CT_ERR_SHAPE_MISMATCH with both shapes printed; NULL pointers, negative dims,
 *    out-of-range dims or slices, too-small buffers CT_ERR_INVALID_ARGUMENT with the values.
 *  - Every call that produces a shape (creation, views, broadcasting) refuses one whose
 *    element count or byte size does not fit in int64 with CT_ERR_INVALID_ARGUMENT, so
 *    ct_numel() and ct_tensor_nbytes() are exact for every tensor.
 *  - Every call may also return CT_ERR_OPENCL (the message has the OpenCL error's name),
 *    CT_ERR_OUT_OF_MEMORY, and CT_ERR_UNSUPPORTED (f64 on a device without cl_khr_fp64).
 *    The blocking calls (ct_to_host, ct_copy_from_host, ct_event_wait) also report an
 *    earlier command on the device that failed after its enqueue (see
 *    ct_device_synchronize() in device.h).
 *  - "Row-major" host buffers hold the elements in C order of the tensor's shape, whatever the
 *    tensor's strides.
 *
 * Thread safety. Tensors may be shared between threads for reading (as operands of ops running
 * concurrently); a tensor that one thread writes (an _out destination, ct_copy_from_host) must
 * not be used by another thread at the same time. Reference counting is atomic. */
#ifndef CLTENSOR_TENSOR_H
#define CLTENSOR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cltensor/device.h"
#include "cltensor/dtype.h"
#include "cltensor/export.h"
#include "cltensor/status.h"

CT_BEGIN_DECLS

#define CT_MAX_DIMS 8

typedef struct ct_tensor ct_tensor;

/* ---- Creation (each returns a new, contiguous tensor on d) ----
 * ndim is 0 (a scalar) ... CT_MAX_DIMS; shape may be NULL when ndim is 0; a dim may be 0
 * (an empty tensor). */
CT_API ct_status ct_empty(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape);
CT_API ct_status ct_zeros(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape);
CT_API ct_status ct_ones(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape);
/* value is converted to t as ct_cast() converts (integers truncate toward zero). A value an
 * integer t can't represent is CT_ERR_INVALID_ARGUMENT naming value and dtype, as torch.full
 * (ct_full(u8, 300), -1 into an unsigned dtype, NaN or inf into an integer); bool and the floats
 * take every value (70000 into f16 is inf): the scalar rule of elementwise.h and docs/OPS.md. */
CT_API ct_status ct_full(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                         double value);
/* 1-D [start, start+step, ...) up to end exclusive, ceil((end-start)/step) elements; step != 0.
 * Every value produced must fit t (the scalar rule above, checked on start and the last value):
 * ct_arange(u8, 0, 300, 1) is CT_ERR_INVALID_ARGUMENT, ct_arange(u8, 0, 256, 1) is fine. */
CT_API ct_status ct_arange(ct_tensor **out, ct_device *d, ct_dtype t, double start, double end,
                           double step);
/* 2-D identity-like [n, m]: ones on the main diagonal. The creation functions are not
 * differentiable: their results are leaves that do not require grad. */
CT_API ct_status ct_eye(ct_tensor **out, ct_device *d, ct_dtype t, int64_t n, int64_t m);
/* Copies numel * ct_dtype_size(t) bytes of row-major host data (blocking). data may be NULL
 * only when the tensor is empty. */
CT_API ct_status ct_from_host(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                              const void *data);

/* ---- Reference counting ---- */
/* Adds a reference and returns t (NULL stays NULL). */
CT_API ct_tensor *ct_retain(ct_tensor *t);
/* Drops a reference; the last one frees the handle (storage lives while views use it).
 * NULL is a no-op. */
CT_API void ct_release(ct_tensor *t);

/* ---- Properties (t must not be NULL unless stated) ---- */
CT_API ct_device *ct_tensor_device(const ct_tensor *t);       /* borrowed; NULL for NULL */
CT_API ct_dtype ct_tensor_dtype(const ct_tensor *t);            /* (ct_dtype)-1 for NULL */
CT_API int ct_tensor_ndim(const ct_tensor *t);                 /* -1 for NULL */
CT_API const int64_t *ct_tensor_shape(const ct_tensor *t);     /* ndim entries, owned by t; NULL for NULL */
CT_API const int64_t *ct_tensor_strides(const ct_tensor *t);   /* in elements, owned by t; NULL for NULL */
CT_API int64_t ct_tensor_offset(const ct_tensor *t);           /* in elements, into storage; 0 for NULL */
CT_API int64_t ct_numel(const ct_tensor *t);                   /* 0 for NULL */
CT_API size_t ct_tensor_nbytes(const ct_tensor *t);            /* numel * dtype size; 0 for NULL */
CT_API bool ct_tensor_is_contiguous(const ct_tensor *t);       /* C-contiguous; false for NULL */

/* ---- Moving data ---- */
/* Copies the tensor's elements, row-major, into dst (blocking). Works for any strides.
 * CT_ERR_INVALID_ARGUMENT when dst_bytes < ct_tensor_nbytes(t) (both sizes in the message). */
CT_API ct_status ct_to_host(const ct_tensor *t, void *dst, size_t dst_bytes);
/* Overwrites t's elements with row-major host data of ct_tensor_nbytes(t) bytes (blocking).
 * t may be a non-contiguous view, but not an expanded one (a stride-0 dim of size > 1:
 * CT_ERR_INVALID_ARGUMENT, before anything is written): its elements are written in place.
 * Autograd: a write in place (autograd.h): refused (CT_ERR_INVALID_ARGUMENT) when t requires
 * grad while grad mode is on; bumps t's version, so a graph that saved t fails ct_backward. */
CT_API ct_status ct_copy_from_host(ct_tensor *t, const void *src, size_t src_bytes);

/* t's one element as a double (PyTorch's .item(); a 64-bit integer beyond 2^53 rounds to the
 * nearest double). Any dtype, any shape with exactly one element ([], [1], [1, 1] ...): else
 * CT_ERR_INVALID_ARGUMENT naming the element count and shape. Blocking (as ct_to_host). On
 * failure *out is NaN. */
CT_API ct_status ct_item(double *out, const ct_tensor *t);
/* t's one element as an exact int64: integer and bool dtypes as they are (a u64 above INT64_MAX
 * is CT_ERR_INVALID_ARGUMENT); a float must hold an integer value in int64's range (else
 * CT_ERR_INVALID_ARGUMENT naming the value: use ct_item). On failure *out is 0. */
CT_API ct_status ct_item_int64(int64_t *out, const ct_tensor *t);

/* A pending transfer. */
typedef struct ct_event ct_event;
/* Non-blocking ct_to_host: enqueues the read and returns at once with *ev to wait on.
 * dst must stay valid and untouched until ct_event_wait() has returned. */
CT_API ct_status ct_to_host_async(ct_event **ev, const ct_tensor *t, void *dst, size_t dst_bytes);
/* Non-blocking ct_copy_from_host: src must stay valid and unchanged until ct_event_wait().
 * The same autograd rules as ct_copy_from_host. */
CT_API ct_status ct_copy_from_host_async(ct_event **ev, ct_tensor *t, const void *src, size_t src_bytes);
/* Blocks until the transfer is complete; returns its status. */
CT_API ct_status ct_event_wait(ct_event *ev);
/* Frees the handle (waiting first if the transfer is still running). NULL is a no-op. */
CT_API void ct_event_free(ct_event *ev);

/* OUT: *out, t's data on device d: a new reference to t itself when t is already on d (PyTorch
 * .to() semantics), else a new contiguous copy (direct when both devices share an OpenCL
 * context, staged through host memory otherwise). Differentiable: the gradient goes back to t's
 * device (nothing is recorded when t itself is returned). */
CT_API ct_status ct_to_device(ct_tensor **out, const ct_tensor *t, ct_device *d);

/* Copies src into dst on the same device, broadcasting src to dst's shape and converting the
 * dtype as ct_cast() does. dst may be a view, but not an expanded one (a stride-0 dim of size
 * > 1: CT_ERR_INVALID_ARGUMENT); src and dst may overlap (the copy goes through a temporary).
 * Autograd: a write in place, not recorded. While grad mode is on, a dst that requires grad is
 * refused (as PyTorch refuses in-place writes into a leaf that requires grad; PyTorch records
 * copies into non-leaf views, this library refuses them), and so is a src that requires grad
 * (its gradient would be lost: ct_clone records a copy). Bumps dst's version (autograd.h). */
CT_API ct_status ct_copy(ct_tensor *dst, const ct_tensor *src);

/* ---- Pinned host memory (CL_MEM_ALLOC_HOST_PTR, mapped): faster staging ---- */
typedef struct ct_pinned ct_pinned;
/* OUT: *out, bytes of page-locked host memory for transfers with device d. */
CT_API ct_status ct_pinned_alloc(ct_pinned **out, ct_device *d, size_t bytes);
CT_API void *ct_pinned_ptr(const ct_pinned *p);   /* host pointer; NULL for NULL */
CT_API size_t ct_pinned_size(const ct_pinned *p);
CT_API void ct_pinned_free(ct_pinned *p);         /* destructor; NULL is a no-op */

/* ---- Views (no copy; the result shares storage with t) ----
 * All differentiable: a view of a tensor that requires grad records its backward (the gradient
 * goes back reshaped, permuted back, or into the sliced elements; expand sums it back). */
/* New shape with the same numel; one dim may be -1 (inferred). ct_view fails with
 * CT_ERR_SHAPE_MISMATCH when the strides can't express it; ct_reshape then copies instead. */
CT_API ct_status ct_view(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape);
CT_API ct_status ct_reshape(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape);
/* torch.flatten: dims start_dim..end_dim (negative count from the end; start_dim after end_dim
 * is CT_ERR_INVALID_ARGUMENT) become one dim of their product, through ct_reshape: a view when
 * the strides allow, else a copy. A 0-d tensor gives [1] (start_dim and end_dim 0 or -1);
 * start_dim == end_dim gives a view of the same shape. */
CT_API ct_status ct_flatten(ct_tensor **out, const ct_tensor *t, int start_dim, int end_dim);
/* torch.unflatten: dim (negative counts from the end) becomes n >= 1 dims of the given sizes,
 * whose product must be its size (one size may be -1, inferred); always a view. A product that
 * differs: CT_ERR_SHAPE_MISMATCH naming the sizes and the dim's size; more than CT_MAX_DIMS
 * dims, NULL sizes, another negative size: CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_unflatten(ct_tensor **out, const ct_tensor *t, int dim, const int64_t *sizes, int n);
/* dims is a permutation of 0..ndim-1 (negative dims count from the end). */
CT_API ct_status ct_permute(ct_tensor **out, const ct_tensor *t, const int *dims);
CT_API ct_status ct_transpose(ct_tensor **out, const ct_tensor *t, int dim0, int dim1);
/* Elements start, start+step, ... < stop along dim; step > 0 (any int64: a step past the
 * extent gives one element); start/stop are clamped to [0, size] as Python slices are, negative
 * values count from the end. CT_ERR_INVALID_ARGUMENT when the view's stride (t's stride times
 * step, with two or more elements) does not fit int64. */
CT_API ct_status ct_slice(ct_tensor **out, const ct_tensor *t, int dim, int64_t start, int64_t stop,
                          int64_t step);
/* Removes dim when its size is 1 (else returns a view unchanged, as PyTorch does). */
CT_API ct_status ct_squeeze(ct_tensor **out, const ct_tensor *t, int dim);
/* Inserts a size-1 dim at position dim (0..ndim, negative counts from the end). */
CT_API ct_status ct_unsqueeze(ct_tensor **out, const ct_tensor *t, int dim);
/* Broadcasts to shape (stride 0 on expanded dims); -1 keeps a dim; new dims are prepended. */
CT_API ct_status ct_expand(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape);
/* A new reference to t when already contiguous (the same handle: nothing recorded), else a
 * contiguous copy (differentiable). */
CT_API ct_status ct_contiguous(ct_tensor **out, const ct_tensor *t);
/* A new contiguous tensor of dtype dt (a copy even when dt == t's dtype).
 * Rounding: float->float rounds to nearest even; float->integer truncates toward zero, and
 * NaN, infinities and out-of-range values saturate to the target's limits (NaN gives 0);
 * integer->integer wraps modulo 2^bits; anything->bool is (x != 0); bool->x is 0 or 1.
 * Differentiable between float dtypes (the gradient is cast back to t's dtype); a result of an
 * integer or bool dtype does not require grad. */
CT_API ct_status ct_cast(ct_tensor **out, const ct_tensor *t, ct_dtype dt);

/* ---- Printing, like PyTorch's repr ----
 * "tensor([[1., 2.],\n        [3., 4.]], shape=[2, 2], dtype=f32, device=cpu:0)";
 * summarized with "..." past 1000 elements (3 at each edge). Autograd as PyTorch prints it: a
 * leaf that requires grad ends with ", requires_grad=True", a result recorded by autograd with
 * ", grad_fn=<MulBackward0>" (PyTorch's name of the node the call records: MulBackward0 for
 * ct_mul, MmBackward0 for a 2-D ct_matmul, SumBackward0 for a full ct_sum, ViewBackward0 for
 * ct_view/ct_reshape/ct_flatten, ConvolutionBackward0, NllLossBackward0 for ct_cross_entropy...;
 * docs/AUTOGRAD.md). */
/* Writes the text and a newline to f (CT_ERR_IO when writing fails). Only the shown elements
 * are read from the device. */
CT_API ct_status ct_print(FILE *f, const ct_tensor *t);
/* Writes the same text into buf (always NUL-terminated when size > 0); *needed (may be NULL)
 * receives the full length without the NUL. CT_ERR_INVALID_ARGUMENT when it did not fit. */
CT_API ct_status ct_format(char *buf, size_t size, size_t *needed, const ct_tensor *t);

/* ---- Caching allocator (per device) ----
 * Freed device blocks are kept for reuse; sizes are rounded up (512 B below 1 MiB, 2 MiB
 * above; an empty tensor holds one minimal block) and large cached blocks are split.
 * Allocations are made real when OpenCL buffers are created, so an out-of-memory condition is
 * reported by the call that allocates: the allocator first returns its cache to OpenCL and
 * retries, then fails with CT_ERR_OUT_OF_MEMORY and a message giving the request, why it did
 * not fit, the device, and the bytes allocated and reserved. A request above the device's
 * maximum single allocation (ct_device_props.max_alloc_bytes) is CT_ERR_OUT_OF_MEMORY too.
 * Cap. The reserved bytes never exceed the device's global memory (global_mem_bytes), since
 * drivers that allocate lazily (PoCL) would accept far more and fail later, or get the process
 * killed. On a device whose memory is the host's (host_unified_memory), the reserved bytes
 * must also fit in the host's available memory: a new OpenCL buffer of N bytes is refused when
 *   R + N > A + T - M
 * with R the bytes reserved, A the host's available memory at that moment (Linux: MemAvailable
 * in /proc/meminfo), M a margin left to the system of max(256 MiB, 5% of MemTotal), and T the
 * part of R already resident, estimated as min(R, the process's resident anonymous memory:
 * RssAnon in /proc/self/status). Written memory has left A already and is not counted twice;
 * reserved but never written memory (ct_empty) counts in full, since writing it later would
 * otherwise end in the OOM killer. The estimate is generous to a process that holds much
 * anonymous memory of its own (T is then R: the new buffer alone must fit in A - M). /proc is
 * read only when a new buffer is needed; where MemAvailable cannot be read the device cap alone
 * applies, and where the resident size cannot, T = R. The out-of-memory message says which rule
 * refused: the device's memory, the host's available memory, or $CLTENSOR_MEMORY_LIMIT.
 * Environment, read when a device first allocates:
 *   $CLTENSOR_MEMORY_LIMIT  lowers the cap of each device's reserved bytes: "512MiB", "2GB",
 *                           "1.5 GiB", "1048576" (units B, k/kB, KiB, M/MB, MiB, G/GB, GiB,
 *                           T/TB, TiB, case-insensitive; 0 means no limit below the device's
 *                           memory). It never raises the cap above the device's global memory.
 *                           Below 2 MiB, small tensors' buffers shrink to fit; a value below one
 *                           block (512 B) could hold nothing and is an error;
 *   $CLTENSOR_NO_CACHING    a boolean (1/0, true/false, yes/no, on/off, any case): when true,
 *                           every block goes back to OpenCL as soon as it is freed (for leak
 *                           checkers);
 * a malformed value makes every allocation on the device (and the calls below) fail with
 * CT_ERR_INVALID_ARGUMENT quoting it (escaped): it is never ignored. */
typedef struct ct_memory_stats {
  size_t size;                   /* set by the caller to sizeof(ct_memory_stats), see below */
  uint64_t allocated_bytes;      /* held by live tensors (rounded sizes) */
  uint64_t reserved_bytes;       /* held from OpenCL: allocated + cached */
  uint64_t peak_allocated_bytes;
  uint64_t peak_reserved_bytes;
  uint64_t alloc_count;          /* allocations served */
  uint64_t cache_hits;           /* of which served from the cache */
  uint64_t cl_alloc_count;       /* buffers created with OpenCL */
  uint64_t limit_bytes;          /* $CLTENSOR_MEMORY_LIMIT, at most global_mem_bytes; 0 when unset
                                    (the cap is then the device's memory) */
} ct_memory_stats;

/* OUT: *out, d's allocator figures. Caller-filled, so that the struct can grow without breaking
 * programs built before: the caller sets out->size to sizeof(ct_memory_stats) (the
 * size its headers give); the library fills at most that many bytes, its own layout's, and
 * sets out->size to the bytes it filled. Returns CT_OK; CT_ERR_INVALID_ARGUMENT for a NULL out
 * or d, or an out->size below this layout's (0 when unset): the message gives both sizes. */
CT_API ct_status ct_device_get_memory_stats(ct_memory_stats *out, ct_device *d);
/* Sets the peaks to the current values. */
CT_API ct_status ct_memory_reset_peak(ct_device *d);
/* Returns every cached (unused) block to OpenCL. */
CT_API ct_status ct_empty_cache(ct_device *d);

CT_END_DECLS

#endif
