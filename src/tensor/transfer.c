/* Host <-> device transfers, transfer events, pinned host memory, and copies between devices.
 * Contiguous tensors move with one enqueued read or write; other layouts are gathered into (or
 * scattered from) a contiguous temporary by the copy kernel on the device. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "profile/profile.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

struct ct_event {
  cl_event ev;       /* NULL: nothing was enqueued (empty transfer) */
  ct_device *device;
  const char *what;  /* "ct_to_host_async" ... for messages */
  int done;
  ct_status status;
};

/* The smallest and largest of the n integers of dtype t at p (as int64); false for a u64 value
 * above INT64_MAX, or a dtype that is not an integer one. */
static bool ct__host_int_range(ct_dtype t, const void *p, size_t n, int64_t *lo, int64_t *hi) {
  int64_t mn = INT64_MAX, mx = INT64_MIN;
#define CT__RANGE(T)                          \
  do {                                        \
    const T *q = p;                           \
    for (size_t i = 0; i < n; i++) {          \
      int64_t v = (int64_t)q[i];              \
      mn = v < mn ? v : mn;                   \
      mx = v > mx ? v : mx;                   \
    }                                         \
  } while (0)
  switch (t) {
    case CT_U8: CT__RANGE(uint8_t); break;
    case CT_I8: CT__RANGE(int8_t); break;
    case CT_I16: CT__RANGE(int16_t); break;
    case CT_U16: CT__RANGE(uint16_t); break;
    case CT_I32: CT__RANGE(int32_t); break;
    case CT_U32: CT__RANGE(uint32_t); break;
    case CT_I64: CT__RANGE(int64_t); break;
    case CT_U64: {
      const uint64_t *q = p;
      for (size_t i = 0; i < n; i++)
        if (q[i] > (uint64_t)INT64_MAX) return false;
      CT__RANGE(uint64_t);
      break;
    }
    default: return false;
  }
#undef CT__RANGE
  *lo = mn;
  *hi = mx;
  return true;
}

ct_status ct_from_host(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                       const void *data) {
  CT__TRY(ct__tensor_new(out, d, t, ndim, shape, "ct_from_host"));
  size_t nbytes = ct_tensor_nbytes(*out);
  if (nbytes == 0) return CT_OK;
  ct_status st = CT_OK;
  if (!data) {
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "ct_from_host: argument 'data' is NULL for %zu bytes", nbytes);
  } else {
    cl_event pev;
    cl_int err = clEnqueueWriteBuffer(ct__device_queue(d), ct__tensor_mem(*out), CL_TRUE, ct__tensor_byte_offset(*out),
                                      nbytes, data, 0, NULL, ct__profile_event(d, &pev));
    if (err == CL_SUCCESS) ct__profile_record(d, "h2d", pev);
    if (err != CL_SUCCESS)
      st = ct__cl_error(err, "ct_from_host: clEnqueueWriteBuffer of %zu bytes to %s failed", nbytes, d->spec);
  }
  if (st != CT_OK) {
    ct_release(*out);
    *out = NULL;
    return st;
  }
  /* Index tensors come this way: their range lets index checks skip the device (tensor.h). The
   * scan reads what the write just read, at about its speed. */
  ct__storage *s = (*out)->storage;
  if (ct__host_int_range(t, data, (size_t)ct_numel(*out), &s->range_lo, &s->range_hi))
    atomic_store_explicit(&s->range_known, true, memory_order_release);
  return CT_OK;
}

static ct_status ct__check_host_buffer(const ct_tensor *t, const void *p, size_t bytes, const char *fn,
                                       const char *pname) {
  if (!t) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 't' is NULL", fn);
  size_t nbytes = ct_tensor_nbytes(t);
  if (nbytes == 0) return CT_OK;
  if (!p) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL for %zu bytes", fn, pname, nbytes);
  if (bytes < nbytes)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s buffer of %zu bytes is too small for the tensor's %zu bytes", fn,
                     strcmp(pname, "dst") == 0 ? "destination" : "source", bytes, nbytes);
  return CT_OK;
}

/* Enqueues the read of t's elements (row-major) into dst; blocking or with *ev. */
static ct_status ct__read(const ct_tensor *t, void *dst, int blocking, cl_event *ev, const char *fn) {
  CT__TRY(ct__deferred_realize(fn));
  CT__TRY(ct__tensor_deferred_use(t, fn));
  size_t nbytes = ct_tensor_nbytes(t);
  ct_device *d = t->storage->device;
  ct_tensor *c;
  CT__TRY(ct__contiguous(&c, t, t->dtype, 0, fn));
  cl_event pev;
  cl_int err = clEnqueueReadBuffer(ct__device_queue(d), ct__tensor_mem(c), blocking ? CL_TRUE : CL_FALSE,
                                   ct__tensor_byte_offset(c), nbytes, dst, 0, NULL,
                                   ev ? ev : ct__profile_event(d, &pev));
  if (err == CL_SUCCESS) {
    if (ev) ct__profile_record_shared(d, "d2h", *ev);
    else ct__profile_record(d, "d2h", pev);
  }
  /* Releasing a temporary right after enqueueing is safe: its block is only reused by commands
   * later in the same in-order queue. */
  ct_release(c);
  /* A blocking read has waited for every earlier command: report one that failed (once: when
   * the read itself failed, that failure is the report). */
  ct_status async = blocking ? ct__device_async_check(d, fn) : CT_OK;
  if (err != CL_SUCCESS)
    return ct__cl_error(err, "%s: clEnqueueReadBuffer of %zu bytes from %s failed", fn, nbytes, d->spec);
  return async;
}

/* Enqueues the write of row-major src into t's elements; blocking or with *ev. */
static ct_status ct__write(ct_tensor *t, const void *src, int blocking, cl_event *ev, const char *fn) {
  CT__TRY(ct__deferred_realize(fn));
  CT__TRY(ct__tensor_deferred_use(t, fn));
  size_t nbytes = ct_tensor_nbytes(t);
  ct_device *d = t->storage->device;
  cl_command_queue q = ct__device_queue(d);
  if (ct_tensor_is_contiguous(t)) {
    cl_event pev;
    cl_int err = clEnqueueWriteBuffer(q, ct__tensor_mem(t), blocking ? CL_TRUE : CL_FALSE, ct__tensor_byte_offset(t),
                                      nbytes, src, 0, NULL, ev ? ev : ct__profile_event(d, &pev));
    if (err == CL_SUCCESS) {
      if (ev) ct__profile_record_shared(d, "h2d", *ev);
      else ct__profile_record(d, "h2d", pev);
    }
    ct_status async = blocking ? ct__device_async_check(d, fn) : CT_OK;
    if (err != CL_SUCCESS)
      return ct__cl_error(err, "%s: clEnqueueWriteBuffer of %zu bytes to %s failed", fn, nbytes, d->spec);
    return async;
  }
  ct_tensor *tmp;
  CT__TRY(ct__tensor_new(&tmp, d, t->dtype, t->ndim, t->shape, fn));
  cl_event pev;
  cl_int err = clEnqueueWriteBuffer(q, ct__tensor_mem(tmp), blocking ? CL_TRUE : CL_FALSE, ct__tensor_byte_offset(tmp),
                                    nbytes, src, 0, NULL, ct__profile_event(d, &pev));
  if (err == CL_SUCCESS) ct__profile_record(d, "h2d", pev);
  ct_status st = blocking ? ct__device_async_check(d, fn) : CT_OK;
  if (err != CL_SUCCESS)
    st = ct__cl_error(err, "%s: clEnqueueWriteBuffer of %zu bytes to %s failed", fn, nbytes, d->spec);
  if (st == CT_OK) st = ct__copy(t, tmp, fn);
  ct_release(tmp);
  if (st == CT_OK && ev) {
    /* The event must cover the scatter kernel too; in an in-order queue a marker does. */
    err = clEnqueueMarkerWithWaitList(q, 0, NULL, ev);
    if (err != CL_SUCCESS) st = ct__cl_error(err, "%s: clEnqueueMarkerWithWaitList on %s failed", fn, d->spec);
  }
  return st;
}

ct_status ct_to_host(const ct_tensor *t, void *dst, size_t dst_bytes) {
  CT__TRY(ct__check_host_buffer(t, dst, dst_bytes, "ct_to_host", "dst"));
  if (ct_tensor_nbytes(t) == 0) return CT_OK;
  return ct__read(t, dst, 1, NULL, "ct_to_host");
}

ct_status ct_copy_from_host(ct_tensor *t, const void *src, size_t src_bytes) {
  CT__TRY(ct__check_host_buffer(t, src, src_bytes, "ct_copy_from_host", "src"));
  CT__TRY(ct__tensor_check_writable(t, "ct_copy_from_host", "t"));
  CT__TRY(ct__grad_check_inplace("ct_copy_from_host", t, "t"));
  if (ct_tensor_nbytes(t) == 0) return CT_OK;
  ct__tensor_bump_version(t);
  return ct__write(t, src, 1, NULL, "ct_copy_from_host");
}

static ct_status ct__event_new(ct_event **ev, ct_device *d, const char *what) {
  ct_event *e = calloc(1, sizeof *e);
  if (!e) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
  e->device = d;
  e->what = what;
  *ev = e;
  return CT_OK;
}

/* The async transfers: checks, a new event, the enqueue (a read into dst, or a write from src). */
static ct_status ct__transfer_async(ct_event **ev, const ct_tensor *t, bool read, void *dst, const void *src,
                                    size_t bytes, const char *fn) {
  CT__CHECK_NOT_NULL(fn, ev);
  *ev = NULL;
  CT__TRY(ct__check_host_buffer(t, read ? (const void *)dst : src, bytes, fn, read ? "dst" : "src"));
  if (!read) {
    CT__TRY(ct__tensor_check_writable(t, fn, "t"));
    CT__TRY(ct__grad_check_inplace(fn, t, "t"));
  }
  ct_event *e = NULL;
  CT__TRY(ct__event_new(&e, t->storage->device, fn));
  if (ct_tensor_nbytes(t) > 0) {
    /* A write's tensor is the caller's non-const t (ct_copy_from_host_async). */
    if (!read) ct__tensor_bump_version((ct_tensor *)t);
    ct_status st = read ? ct__read(t, dst, 0, &e->ev, fn) : ct__write((ct_tensor *)t, src, 0, &e->ev, fn);
    if (st != CT_OK) {
      free(e);
      return st;
    }
    /* Non-blocking enqueues may sit in the queue until something flushes it. */
    if (!read) clFlush(ct__device_queue(t->storage->device));
  }
  *ev = e;
  return CT_OK;
}

ct_status ct_to_host_async(ct_event **ev, const ct_tensor *t, void *dst, size_t dst_bytes) {
  return ct__transfer_async(ev, t, true, dst, NULL, dst_bytes, "ct_to_host_async");
}

ct_status ct_copy_from_host_async(ct_event **ev, ct_tensor *t, const void *src, size_t src_bytes) {
  return ct__transfer_async(ev, t, false, NULL, src, src_bytes, "ct_copy_from_host_async");
}

/* Waits for ev; with device_errors, also reports (once) a failure of any earlier command of the
 * device, as a blocking call does. */
static ct_status event_wait(ct_event *ev, bool device_errors) {
  if (ev->done) {
    if (ev->status != CT_OK)
      return ct__error(ev->status, "ct_event_wait: the transfer (%s on %s) failed earlier", ev->what, ev->device->spec);
    return CT_OK;
  }
  ev->done = 1;
  ev->status = CT_OK;
  if (!ev->ev) return CT_OK;
  cl_int err = clWaitForEvents(1, &ev->ev);
  cl_int exec = CL_COMPLETE;
  if (err == CL_SUCCESS || err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    clGetEventInfo(ev->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
  if (exec < 0) err = exec;
  /* Every earlier command has finished: report one that failed, once (when the transfer
   * failed too, its failure is the report). */
  if (device_errors) ev->status = ct__device_async_check(ev->device, "ct_event_wait");
  if (err != CL_SUCCESS)
    ev->status = ct__cl_error(err, "ct_event_wait: the transfer (%s on %s) failed", ev->what, ev->device->spec);
  return ev->status;
}

ct_status ct_event_wait(ct_event *ev) {
  CT__CHECK_NOT_NULL("ct_event_wait", ev);
  return event_wait(ev, true);
}

ct_status ct__event_wait_own(ct_event *ev) {
  return event_wait(ev, false);
}

void ct__event_track(const ct_event *ev) {
  if (!ev || ev->done || !ev->ev) return;
  clRetainEvent(ev->ev); /* the device's reference; the handle keeps its own */
  ct__device_track(ev->device, ev->ev);
}

void ct_event_free(ct_event *ev) {
  if (!ev) return;
  /* Waits without touching the thread's error message: releasing is not a failing call. */
  if (!ev->done && ev->ev) clWaitForEvents(1, &ev->ev);
  if (ev->ev) clReleaseEvent(ev->ev);
  free(ev);
}

/* ---- pinned host memory ---- */

struct ct_pinned {
  ct_device *device;
  unsigned generation;  /* ct__device_generation() at allocation */
  cl_mem mem;
  void *ptr;
  size_t size;
};

ct_status ct_pinned_alloc(ct_pinned **out, ct_device *d, size_t bytes) {
  CT__CHECK_NOT_NULL("ct_pinned_alloc", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_pinned_alloc", d);
  CT__TRY(ct__device_open(d));
  ct_pinned *p = calloc(1, sizeof *p);
  if (!p) return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_pinned_alloc: out of host memory");
  /* OpenCL refuses 0-byte buffers; a 0-byte request still gets a valid, usable pointer. */
  size_t real = bytes ? bytes : 1;
  cl_int err;
  p->mem = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, real, NULL, &err);
  if (!p->mem) {
    free(p);
    return ct__cl_error(err, "ct_pinned_alloc: clCreateBuffer(CL_MEM_ALLOC_HOST_PTR) of %zu bytes on %s failed", real,
                        d->spec);
  }
  p->ptr = clEnqueueMapBuffer(ct__device_queue(d), p->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, real, 0, NULL, NULL,
                              &err);
  if (!p->ptr) {
    clReleaseMemObject(p->mem);
    free(p);
    return ct__cl_error(err, "ct_pinned_alloc: clEnqueueMapBuffer of %zu bytes on %s failed", real, d->spec);
  }
  p->device = d;
  p->generation = ct__device_generation();
  p->size = bytes;
  *out = p;
  return CT_OK;
}

void *ct_pinned_ptr(const ct_pinned *p) { return p ? p->ptr : NULL; }
size_t ct_pinned_size(const ct_pinned *p) { return p ? p->size : 0; }

void ct_pinned_free(ct_pinned *p) {
  if (!p) return;
  cl_event ev = NULL;
  /* After ct_shutdown() the device and its queue are gone: no unmapping then. The buffer itself
   * is still ours to release (it keeps its context alive until then, as OpenCL promises). */
  if (p->generation == ct__device_generation() &&
      clEnqueueUnmapMemObject(ct__device_queue(p->device), p->mem, p->ptr, 0, NULL, &ev) == CL_SUCCESS && ev) {
    clWaitForEvents(1, &ev);
    clReleaseEvent(ev);
  }
  clReleaseMemObject(p->mem);
  free(p);
}

/* ---- between devices ---- */

ct_status ct__copy_between(ct_tensor *dst, const ct_tensor *src, int staged, const char *fn) {
  CT__TRY(ct__deferred_realize(fn));
  CT__TRY(ct__tensors_deferred_use(fn, 2, (const ct_tensor *const[]){dst, src}));
  ct_device *sd = src->storage->device, *dd = dst->storage->device;
  size_t nbytes = ct_tensor_nbytes(src);
  if (nbytes == 0) return CT_OK;
  ct_tensor *c;
  CT__TRY(ct__contiguous(&c, src, src->dtype, 0, fn));
  ct_status st = CT_OK;
  cl_int err;
  if (!staged && ct__device_same_context(sd, dd)) {
    /* Two queues share the buffers but not their order: the source queue must have finished
     * writing c before the destination queue reads it, and the copy must finish before c's
     * block may be reused by the source device (which knows nothing of the other queue). */
    err = clFinish(ct__device_queue(sd));
    if (err != CL_SUCCESS) {
      st = ct__cl_error(err, "%s: clFinish on %s failed", fn, sd->spec);
    } else {
      cl_event ev = NULL;
      err = clEnqueueCopyBuffer(ct__device_queue(dd), ct__tensor_mem(c), ct__tensor_mem(dst), ct__tensor_byte_offset(c),
                                ct__tensor_byte_offset(dst), nbytes, 0, NULL, &ev);
      if (err == CL_SUCCESS) {
        err = clWaitForEvents(1, &ev);
        ct__profile_record_shared(dd, "d2d", ev);
        clReleaseEvent(ev);
      }
      if (err != CL_SUCCESS)
        st = ct__cl_error(err, "%s: copying %zu bytes from %s to %s failed", fn, nbytes, sd->spec, dd->spec);
    }
  } else {
    /* Different contexts share no buffers: stage through page-locked host memory. */
    ct_pinned *p;
    st = ct_pinned_alloc(&p, sd, nbytes);
    if (st == CT_OK) {
      cl_event pev;
      err = clEnqueueReadBuffer(ct__device_queue(sd), ct__tensor_mem(c), CL_TRUE, ct__tensor_byte_offset(c), nbytes,
                                p->ptr, 0, NULL, ct__profile_event(sd, &pev));
      if (err == CL_SUCCESS) ct__profile_record(sd, "d2h", pev);
      if (err != CL_SUCCESS)
        st = ct__cl_error(err, "%s: reading %zu bytes from %s failed", fn, nbytes, sd->spec);
      if (st == CT_OK) {
        err = clEnqueueWriteBuffer(ct__device_queue(dd), ct__tensor_mem(dst), CL_TRUE, ct__tensor_byte_offset(dst),
                                   nbytes, p->ptr, 0, NULL, ct__profile_event(dd, &pev));
        if (err == CL_SUCCESS) ct__profile_record(dd, "h2d", pev);
        if (err != CL_SUCCESS)
          st = ct__cl_error(err, "%s: writing %zu bytes to %s failed", fn, nbytes, dd->spec);
      }
      ct_pinned_free(p);
    }
  }
  ct_release(c);
  return st;
}

ct_status ct_to_device(ct_tensor **out, const ct_tensor *t, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_to_device", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_to_device", t);
  CT__CHECK_NOT_NULL("ct_to_device", d);
  if (t->storage->device == d) {
    *out = ct_retain((ct_tensor *)t); /* a new reference, as ct_contiguous gives one */
    return CT_OK;
  }
  ct_tensor *r;
  CT__TRY(ct__tensor_new(&r, d, t->dtype, t->ndim, t->shape, "ct_to_device"));
  ct_status st = ct__copy_between(r, t, 0, "ct_to_device");
  ct__node *n = NULL; /* TO_DEVICE: the gradient goes back to t's device */
  if (st == CT_OK) st = ct__grad_record(&n, r, CT__GOP_TO_DEVICE, 0, 1, (const ct_tensor *[]){t}, "ct_to_device");
  return ct__tensor_result(out, r, st);
}
