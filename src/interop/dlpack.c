/* DLPack export (kDLOpenCL: the cl_mem as data) and import (kDLOpenCL wrapped without a copy,
 * kDLCPU copied), with DLManagedTensor and, where the header has it, DLManagedTensorVersioned. */
#include <dlpack/dlpack.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "interop/interop.h"
#include "tensor/tensor.h"

/* kDLBool entered the enum in DLPack 0.8; older headers (Debian's 0.6) lack it, but the value
 * is what every newer consumer expects. */
#define CT__DL_BOOL 6

static DLDataType ct__dl_dtype(ct_dtype t) {
  static const DLDataType map[CT_DTYPE_COUNT] = {
      [CT_BOOL] = {CT__DL_BOOL, 8, 1}, [CT_U8] = {kDLUInt, 8, 1},    [CT_I8] = {kDLInt, 8, 1},
      [CT_I32] = {kDLInt, 32, 1},      [CT_I64] = {kDLInt, 64, 1},   [CT_F16] = {kDLFloat, 16, 1},
      [CT_BF16] = {kDLBfloat, 16, 1},  [CT_F32] = {kDLFloat, 32, 1}, [CT_F64] = {kDLFloat, 64, 1},
      [CT_I16] = {kDLInt, 16, 1},      [CT_U16] = {kDLUInt, 16, 1},  [CT_U32] = {kDLUInt, 32, 1},
      [CT_U64] = {kDLUInt, 64, 1},
  };
  return map[t];
}

static ct_status ct__dl_to_ct(ct_dtype *out, DLDataType dt, const char *fn) {
  if (dt.lanes == 1)
    for (int t = 0; t < CT_DTYPE_COUNT; t++) {
      DLDataType m = ct__dl_dtype((ct_dtype)t);
      if (m.code == dt.code && m.bits == dt.bits) {
        *out = (ct_dtype)t;
        return CT_OK;
      }
    }
  return ct__error(CT_ERR_UNSUPPORTED,
                   "%s: DLPack dtype {code %u, bits %u, lanes %u} has no cltensor equivalent", fn,
                   (unsigned)dt.code, (unsigned)dt.bits, (unsigned)dt.lanes);
}

/* ---- export ---- */

/* The DLPack struct and the arrays it points to, in one allocation, plus a view of the tensor
 * that keeps its storage alive until the consumer's deleter call. */
struct ct__dl_export {
  DLManagedTensor managed;
#ifdef DLPACK_MAJOR_VERSION
  DLManagedTensorVersioned versioned;
#endif
  int64_t shape[CT_MAX_DIMS];
  int64_t strides[CT_MAX_DIMS];
  ct_tensor *view;
};

static void ct__dl_free(struct ct__dl_export *e) {
  ct_release(e->view);
  free(e);
}

static void ct__dl_delete(DLManagedTensor *self) { ct__dl_free(self->manager_ctx); }

#ifdef DLPACK_MAJOR_VERSION
static void ct__dlv_delete(DLManagedTensorVersioned *self) { ct__dl_free(self->manager_ctx); }
#endif

/* Both forms of the export filled in; the caller hands out one of them. */
static ct_status ct__dl_export(struct ct__dl_export **out, const ct_tensor *t, const char *fn) {
  CT__CHECK_NOT_NULL(fn, t);
  /* The consumer reads the memory on its own queue: recorded work is enqueued first. */
  CT__TRY(ct__deferred_realize(fn));
  CT__TRY(ct__tensor_deferred_use(t, fn));
  struct ct__dl_export *e = calloc(1, sizeof *e);
  if (!e) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ct_status st = ct__tensor_view(&e->view, t, t->ndim, t->shape, t->strides, t->offset);
  if (st != CT_OK) {
    free(e);
    return st;
  }
  memcpy(e->shape, t->shape, sizeof e->shape);
  memcpy(e->strides, t->strides, sizeof e->strides);
  DLTensor *dl = &e->managed.dl_tensor; /* zeroed by calloc */
  dl->data = ct__tensor_mem(t);
  /* The consumer may write the memory behind the version counter (tensor.h). */
  ct__storage_forget_range(t->storage);
  dl->device.device_type = kDLOpenCL;
  dl->device.device_id = ct_device_index(t->storage->device);
  dl->ndim = t->ndim;
  dl->dtype = ct__dl_dtype(t->dtype);
  dl->shape = e->shape;
  dl->strides = e->strides;
  dl->byte_offset = ct__tensor_byte_offset(t);
  e->managed.manager_ctx = e;
  e->managed.deleter = ct__dl_delete;
#ifdef DLPACK_MAJOR_VERSION
  e->versioned.version.major = DLPACK_MAJOR_VERSION;
  e->versioned.version.minor = DLPACK_MINOR_VERSION;
  e->versioned.manager_ctx = e;
  e->versioned.deleter = ct__dlv_delete;
  e->versioned.flags = 0;
  e->versioned.dl_tensor = *dl;
#endif
  *out = e;
  return CT_OK;
}

ct_status ct_to_dlpack(struct DLManagedTensor **out, const ct_tensor *t) {
  static const char fn[] = "ct_to_dlpack";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  struct ct__dl_export *e = NULL;
  CT__TRY(ct__dl_export(&e, t, fn));
  *out = &e->managed;
  return CT_OK;
}

/* ---- import ---- */

/* Host copy of a strided kDLCPU tensor into row-major order, element by element. */
static void ct__dl_gather(uint8_t *dst, const uint8_t *src, int ndim, const int64_t *shape,
                          const int64_t *strides, size_t esize, uint64_t numel) {
  int64_t idx[CT_MAX_DIMS] = {0};
  int64_t off = 0;
  for (uint64_t n = 0; n < numel; n++) {
    memcpy(dst + n * esize, src + off * (int64_t)esize, esize);
    for (int i = ndim - 1; i >= 0; i--) {
      off += strides[i];
      if (++idx[i] < shape[i]) break;
      off -= strides[i] * shape[i];
      idx[i] = 0;
    }
  }
}

static ct_status ct__dl_import(ct_tensor **out, const DLTensor *dl, ct_device *d, int read_only,
                               void (*release)(void *ctx), void *release_ctx, const char *fn) {
  if (dl->ndim < 0 || dl->ndim > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ndim %d is outside [0, %d]", fn, (int)dl->ndim,
                     CT_MAX_DIMS);
  int ndim = (int)dl->ndim;
  if (ndim > 0 && !dl->shape) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the DLTensor has no shape", fn);
  ct_dtype t = CT_BOOL;
  CT__TRY(ct__dl_to_ct(&t, dl->dtype, fn));
  size_t esize = ct_dtype_size(t);
  /* The one shape check (tensor.h): its element count and byte size, and the product of its
   * nonzero dims (the contiguous strides below), all fit. */
  int64_t count;
  CT__TRY(ct__shape_numel(&count, ndim, dl->shape, esize, fn));
  uint64_t numel = (uint64_t)count;

  if (dl->device.device_type == kDLOpenCL) {
    if (read_only)
      return ct__error(CT_ERR_UNSUPPORTED,
                       "%s: the kDLOpenCL tensor is read-only, and cltensor tensors are writable", fn);
    if (!d) CT__TRY(ct_device_get(&d, (int)dl->device.device_id));
    if (dl->byte_offset > SIZE_MAX)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: byte_offset %" PRIu64 " is out of range", fn,
                       (uint64_t)dl->byte_offset);
    return ct__wrap_cl_mem(out, d, (cl_mem)dl->data, (size_t)dl->byte_offset, t, ndim, dl->shape,
                           dl->strides, release, release_ctx, fn);
  }
  if (dl->device.device_type != kDLCPU)
    return ct__error(CT_ERR_UNSUPPORTED,
                     "%s: DLPack device type %d is not supported (cltensor imports kDLOpenCL and kDLCPU)",
                     fn, (int)dl->device.device_type);
  if (!d)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 'd' is NULL: a kDLCPU tensor is copied onto d",
                     fn);
  if (numel > 0 && !dl->data)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the kDLCPU tensor has %" PRIu64 " elements and no data",
                     fn, numel);
  if (numel * esize > SIZE_MAX) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: tensor too large for this host", fn);
  int64_t contiguous[CT_MAX_DIMS];
  for (int i = ndim - 1; i >= 0; i--)
    contiguous[i] = i == ndim - 1 ? 1 : contiguous[i + 1] * (dl->shape[i + 1] ? dl->shape[i + 1] : 1);
  void *buf;
  CT__TRY(ct__host_malloc(&buf, (size_t)(numel * esize), fn));
  if (numel > 0)
    ct__dl_gather(buf, (const uint8_t *)dl->data + dl->byte_offset, ndim, dl->shape,
                  dl->strides ? dl->strides : contiguous, esize, numel);
  if (t == CT_BOOL) ct__normalize_bool(buf, (size_t)numel);
  ct_status st = ct_from_host(out, d, t, ndim, dl->shape, buf);
  free(buf);
  if (st == CT_OK && release) release(release_ctx);
  return st;
}

static void ct__dl_call_deleter(void *ctx) {
  DLManagedTensor *m = ctx;
  if (m->deleter) m->deleter(m);
}

ct_status ct_from_dlpack(ct_tensor **out, struct DLManagedTensor *src, ct_device *d) {
  static const char fn[] = "ct_from_dlpack";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, src);
  return ct__dl_import(out, &src->dl_tensor, d, 0, ct__dl_call_deleter, src, fn);
}

#ifdef DLPACK_MAJOR_VERSION

ct_status ct_to_dlpack_versioned(struct DLManagedTensorVersioned **out, const ct_tensor *t) {
  static const char fn[] = "ct_to_dlpack_versioned";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  struct ct__dl_export *e = NULL;
  CT__TRY(ct__dl_export(&e, t, fn));
  *out = &e->versioned;
  return CT_OK;
}

static void ct__dlv_call_deleter(void *ctx) {
  DLManagedTensorVersioned *m = ctx;
  if (m->deleter) m->deleter(m);
}

ct_status ct_from_dlpack_versioned(ct_tensor **out, struct DLManagedTensorVersioned *src, ct_device *d) {
  static const char fn[] = "ct_from_dlpack_versioned";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, src);
  /* A different major version may lay the struct out differently past the deleter. */
  if (src->version.major != DLPACK_MAJOR_VERSION)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: DLPack version %u.%u, this build reads %d.x", fn,
                     (unsigned)src->version.major, (unsigned)src->version.minor, DLPACK_MAJOR_VERSION);
  return ct__dl_import(out, &src->dl_tensor, d, (src->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0,
                       ct__dlv_call_deleter, src, fn);
}

#else

ct_status ct_to_dlpack_versioned(struct DLManagedTensorVersioned **out, const ct_tensor *t) {
  (void)t;
  if (out) *out = NULL;
  return ct__error(CT_ERR_UNSUPPORTED,
                   "ct_to_dlpack_versioned: libcltensor was built against DLPack %d, which has no "
                   "DLManagedTensorVersioned (DLPack 1.0); use ct_to_dlpack",
                   DLPACK_VERSION);
}

ct_status ct_from_dlpack_versioned(ct_tensor **out, struct DLManagedTensorVersioned *src, ct_device *d) {
  (void)src;
  (void)d;
  if (out) *out = NULL;
  return ct__error(CT_ERR_UNSUPPORTED,
                   "ct_from_dlpack_versioned: libcltensor was built against DLPack %d, which has no "
                   "DLManagedTensorVersioned (DLPack 1.0); use ct_from_dlpack",
                   DLPACK_VERSION);
}

#endif
