/* Internal layout of tensors and their shared storage. */
#ifndef CT_TENSOR_TENSOR_H
#define CT_TENSOR_TENSOR_H

#include <CL/cl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cltensor/tensor.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "kernel/kargs.h"
#include "memory/alloc.h"

/* Device memory shared by a tensor and its views. Either an allocator block or an external
 * cl_mem wrapped through the interop API (retained; released with the last reference). */
typedef struct ct__storage {
  atomic_int refs;
  ct_device *device;
  cl_mem mem;          /* = block->mem, or the wrapped buffer */
  size_t offset;       /* bytes into mem where this storage starts */
  size_t nbytes;
  ct__block *block;    /* NULL for wrapped buffers */
  /* Wrapped buffers only: called once after mem is released (a DLPack producer's deleter). */
  void (*release)(void *ctx);
  void *release_ctx;
  /* Bumped by every write into this memory after creation (tensor/graph.h): autograd compares
   * it with the version a saved tensor had. */
  atomic_uint version;
  /* A node of the fusion graph (src/fusion/) will write this memory when realized:
   * its contents are not there yet. Set and cleared under the graph's lock. */
  atomic_bool pending;
  /* The fusion graphs (one per recording thread, src/fusion/graph.c) that touch this memory: fwriter, the
   * one whose node writes it (meaningful while pending is set); freaders, one whose node reads
   * it as an input, or CT__FREADERS_MANY (a hint, cleared when that graph is realized and
   * checked under the graphs' locks). Another thread's use realizes them first
   * (ct__tensor_deferred_use). */
  _Atomic(void *) fwriter;
  _Atomic(void *) freaders;
  /* An integer storage filled by ct_from_host: the smallest and largest element, seen on the host
   * as they went in (tensor/transfer.c). Index checks use them to skip their device round trip
   * (index/common.c, nn/loss.c). They hold while range_known is set and version is still 0: every
   * write bumps the version, and handing the memory out (ct_tensor_cl_mem, DLPack) clears the
   * flag. ct__tensor_known_range() reads them. */
  atomic_bool range_known;
  int64_t range_lo, range_hi;
} ct__storage;

struct ct_tensor {
  atomic_int refs;
  ct__storage *storage;
  ct_dtype dtype;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t strides[CT_MAX_DIMS];  /* elements */
  int64_t offset;                /* elements, from storage->offset */
  /* Autograd (tensor/graph.h). A leaf requires grad and has no grad_fn; a result of a recorded
   * op owns its node. grad: the gradient accumulated into a leaf (one reference), or NULL. */
  bool requires_grad;
  struct ct__node *grad_fn;
  ct_tensor *grad;
  /* A leaf's gradient hook (tensor/graph.h, ct__grad_hook): the engine calls it when this
   * leaf's gradient is final in a backward pass. Borrowed from its owner (DDP), which clears it
   * before it goes; NULL for almost every tensor. */
  const struct ct__grad_hook *grad_hook;
  /* How many slots of scopes (tensor/scope.h), of any thread, own a reference to this tensor:
   * ct_release() searches its thread's scopes only when it is nonzero. */
  atomic_int scope_refs;
};

/* Tensor handles alive in the process (made and not yet freed): for tests of leaks. */
long ct__tensor_live(void);

/* Byte offset of element 0 of t inside its cl_mem (for kernel arguments and CLBlast). */
static inline size_t ct__tensor_byte_offset(const ct_tensor *t) {
  return t->storage->offset + (size_t)t->offset * ct_dtype_size(t->dtype);
}
static inline cl_mem ct__tensor_mem(const ct_tensor *t) { return t->storage->mem; }

#define CT__FREADERS_MANY ((void *)1)
/* Before t's memory goes to a queue outside the fusion graph (read or written): enqueues what
 * other threads' graphs recorded that writes it or reads it (fusion/hooks.h); the
 * calling thread's own recorded work is the caller's ct__deferred_realize(). One or two atomic
 * loads when no graph touches t. Errors name fn. */
static inline ct_status ct__tensor_deferred_use(const ct_tensor *t, const char *fn) {
  ct__storage *s = t->storage;
  if (!atomic_load_explicit(&s->pending, memory_order_acquire) &&
      !atomic_load_explicit(&s->freaders, memory_order_acquire))
    return CT_OK;
  return ct__deferred_use(s, fn);
}
/* The same for each of ts[0..n) (NULL entries skipped): for paths that hand memory to a queue
 * other than through ct__karg_tensor() (transfers, copies, GEMM, native commands, interop). */
static inline ct_status ct__tensors_deferred_use(const char *fn, int n, const ct_tensor *const *ts) {
  ct_status st = CT_OK;
  for (int i = 0; i < n && st == CT_OK; i++)
    if (ts[i]) st = ct__tensor_deferred_use(ts[i], fn);
  return st;
}

/* Allocates a new contiguous tensor (uninitialised). Checks dtype support on d (f64 needs
 * cl_khr_fp64: CT_ERR_UNSUPPORTED naming the device), ndim/shape validity, numel overflow.
 * fn names the public function for messages. */
ct_status ct__tensor_new(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                         const char *fn);

/* A new tensor x (one reference, dtype t, shape, strides or NULL for contiguous ones, offset 0)
 * over a new storage header s (one reference, device d, the rest zero): what ct__tensor_new()
 * and the interop wraps share. Both or neither (CT_ERR_OUT_OF_MEMORY naming fn); until s holds
 * memory, the caller undoes it with ct__tensor_headers_free(x, s). */
ct_status ct__tensor_headers(ct_tensor **x, ct__storage **s, ct_device *d, ct_dtype t, int ndim,
                             const int64_t *shape, const int64_t *strides, const char *fn);
void ct__tensor_headers_free(ct_tensor *x, ct__storage *s);

/* How an op hands over the result r it built: on st == CT_OK *out = r (the caller's
 * reference), else r is released (NULL is fine) and *out left as it is. Returns st. */
ct_status ct__tensor_result(ct_tensor **out, ct_tensor *r, ct_status st);
/* The same for an op with n results, each optional (a backward's input, weight and bias
 * gradients): on success *outs[i] = rs[i] where outs[i] is not NULL (rs[i] is released where it
 * is NULL); on failure every rs[i] is released and st returned. */
ct_status ct__tensor_results(int n, ct_tensor **const outs[], ct_tensor *const rs[], ct_status st);
/* The opening of an op making one new tensor from x: out and x must not be NULL
 * (CT_ERR_INVALID_ARGUMENT "<fn>: argument 'out' is NULL", likewise 'x'); *out = NULL. */
ct_status ct__op_begin(ct_tensor **out, const ct_tensor *x, const char *fn);

/* A new tensor header over t's storage with the given geometry (retains the storage). */
ct_status ct__tensor_view(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset);

/* Geometry helpers for ops (geometry.c), the one home of each; those on plain shape/stride
 * arrays (the dimension collapser, element spans) are in kernel/launch_geom.h. */
/* Element offset of t's first element from the start of its cl_mem; false when the byte offset
 * is not a whole number of elements (possible for wrapped foreign buffers), which kernels and
 * BLAS can't address. */
bool ct__tensor_elem_offset(const ct_tensor *t, int64_t *off);
/* t as the two kernel arguments every kernel takes per tensor, its buffer and the element
 * offset of its element 0 (shift elements on), both called name in messages. t NULL: a NULL
 * buffer and offset 0 (an operand the kernel does not read). A byte offset that is not a whole
 * number of elements fails the builder with CL_INVALID_VALUE (interop refuses such views). */
void ct__karg_tensor(struct ct__kargs *a, const char *name, const ct_tensor *t, int64_t shift);
/* Byte range [lo, hi) that t's elements span inside its cl_mem. */
void ct__tensor_span(const ct_tensor *t, size_t *lo, size_t *hi);
/* Whether x and y share bytes: the same cl_mem and overlapping spans. False when either is
 * NULL or empty. */
bool ct__tensor_overlaps(const ct_tensor *x, const ct_tensor *y);
/* The one check of every write into a caller's tensor (in-place ops, _out forms, copies,
 * optimizer parameters, running statistics): CT_ERR_INVALID_ARGUMENT "<fn>: <name> of shape
 * [...] (strides [...]) has stride 0 at dim d (an expanded view), so several of its elements
 * share one memory location" when a dim longer than 1 has stride 0, whose element writes would
 * race or be applied several times to one cell (PyTorch refuses them too). An empty t passes. */
ct_status ct__tensor_check_writable(const ct_tensor *t, const char *fn, const char *name);
/* Whether x and y address the same elements in the same order: the same cl_mem, byte offset,
 * dtype and shape, and the same strides along every dim longer than 1. */
bool ct__tensor_same_geometry(const ct_tensor *x, const ct_tensor *y);

/* The one check every shape-producing call makes (creation, views, broadcasting): *numel gets
 * the element count of shape, which must have no negative dim, and whose element count and
 * byte size (numel * elem_size) must both fit in int64 (and size_t). The product of the dims
 * with zeros counted as 1 must fit as well: it is the outermost contiguous stride, so an empty
 * [0, 2^62, 2^62] is refused too rather than given strides that overflow. Otherwise
 * CT_ERR_INVALID_ARGUMENT "<fn>: shape [...] ..." naming the shape. ndim must be in range. */
ct_status ct__shape_numel(int64_t *numel, int ndim, const int64_t *shape, size_t elem_size, const char *fn);

/* The one dim-wrapping rule (PyTorch's): *out = dim in [0, ndim), a negative dim counting from
 * the end; a 0-d tensor accepts dim 0 and -1 (as if it had one dim), so *out is then 0 and the
 * caller must not read shape[0]. Otherwise CT_ERR_INVALID_ARGUMENT "<fn>: dim <d> is out of
 * range for a tensor with <n> dims (expected <lo>..<hi>)". An op that takes a new dim (unsqueeze,
 * stack) passes ndim + 1. */
ct_status ct__dim_wrap(int *out, int ndim, int dim, const char *fn);

/* Shape text "[2, 3]" into buf (for messages). Returns buf. */
const char *ct__shape_str(char *buf, size_t size, int ndim, const int64_t *shape);

/* Common checks for ops: both non-NULL, same device (CT_ERR_DEVICE_MISMATCH naming the
 * canonical specs with the argument names). */
ct_status ct__check_same_device(const char *fn, const char *an, const ct_tensor *a,
                                const char *bn, const ct_tensor *b);

/* Broadcasts two shapes (NumPy rules) into out (ndim in *out_ndim); CT_ERR_SHAPE_MISMATCH with
 * both shapes otherwise. */
ct_status ct__broadcast_shapes(int *out_ndim, int64_t *out, int an, const int64_t *a, int bn,
                               const int64_t *b, const char *fn);

/* *lo and *hi bound every element of t without reading the device: t is a view of an integer
 * storage filled by ct_from_host and not written since (ct__storage above). False when that is
 * not known. */
bool ct__tensor_known_range(const ct_tensor *t, int64_t *lo, int64_t *hi);
/* The memory of s is handed out: its elements can change without a version bump. */
static inline void ct__storage_forget_range(ct__storage *s) {
  atomic_store_explicit(&s->range_known, false, memory_order_release);
}

/* Storage reference counting (a view retains its base's storage). */
void ct__storage_retain(ct__storage *s);
void ct__storage_release(ct__storage *s);

/* Row-major contiguous strides for shape into strides. */
void ct__contiguous_strides(int64_t *strides, int ndim, const int64_t *shape);

/* Host element conversions with exactly ct_cast()'s semantics (round to nearest even once;
 * floats to integers truncate and saturate, NaN gives 0; integers wrap; bool is x != 0).
 * ct__host_cast converts one element of dtype st at src into dtype dt at dst. */
void ct__host_cast(ct_dtype dt, void *dst, ct_dtype st, const void *src);
int64_t ct__host_load_int(ct_dtype t, const void *p);
double ct__host_load_double(ct_dtype t, const void *p);
void ct__host_store_int(ct_dtype t, void *p, int64_t v);
void ct__host_store_double(ct_dtype t, void *p, double x);
/* Device copies (copy.c). ct__copy is ct_copy with fn for messages. ct__contiguous returns a
 * contiguous tensor of dtype dt with t's values: t itself (retained) when it already is one and
 * force is 0, else a new copy. */
ct_status ct__copy(ct_tensor *dst, const ct_tensor *src, const char *fn);
ct_status ct__contiguous(ct_tensor **out, const ct_tensor *t, ct_dtype dt, int force, const char *fn);
/* Hands ev's OpenCL event to ct__device_track (transfer.c), as a kernel's is: a transfer whose
 * wait is deferred still has its failure reported by the device's next blocking call. */
void ct__event_track(const ct_event *ev);
/* ct_event_wait for ev's own transfer only: a failure of another command of the device stays
 * for the device's next blocking call (whose thread enqueued it), where ct_event_wait would
 * take it. ev is not NULL. */
ct_status ct__event_wait_own(ct_event *ev);

/* Sets every element of t (any strides) to one element's bits (ct_dtype_size(t) bytes), or to
 * value converted as ct_cast() converts. */
ct_status ct__fill_bits(ct_tensor *t, const void *elem, const char *fn);
/* As ct__fill_bits, for a fill a tensor gets once (an optimizer's state): a contiguous t up to
 * 256 MB takes clEnqueueFillBuffer, which needs no kernel built (copy.c says when that pays). */
ct_status ct__fill_once(ct_tensor *t, const void *elem, const char *fn);
ct_status ct__fill_value(ct_tensor *t, double value, const char *fn);
/* Copies src's elements into the contiguous dst of the same shape and dtype on another device:
 * directly when both share an OpenCL context (unless staged is set), else through pinned host
 * memory. Blocking. */
ct_status ct__copy_between(ct_tensor *dst, const ct_tensor *src, int staged, const char *fn);

#endif
