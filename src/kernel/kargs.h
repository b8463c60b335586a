/* The typed kernel argument builder: sets a locked kernel's arguments in order, by name, and
 * checks them once at the end, so that an op states its arguments as a list rather than as
 * numbered clSetKernelArg calls whose failures it must gather itself:
 *
 *   struct ct__kargs a = ct__kargs_lock(k);
 *   ct__karg_mem(&a, "out", mem);
 *   ct__karg_long(&a, "out_off", off);
 *   ct__karg_long8(&a, "shape", ndim, shape, 1);
 *   ct_status st = ct__kargs_end(&a, fn);
 *   if (st == CT_OK) st = ct__kernel_launch(k, d, 1, &global, &local);
 *   ct__kernel_unlock(k);
 *
 * After the first failing argument the later calls set nothing (but still count), and
 * ct__kargs_end() reports that argument's index and name. Every failure is CT_ERR_OPENCL (or
 * CT_ERR_OUT_OF_MEMORY for the CL allocation errors) through ct__cl_error(), including a count
 * that differs from the kernel's CL_KERNEL_NUM_ARGS (as CL_INVALID_KERNEL_ARGS, the error the
 * enqueue would give). The names are for messages only; nothing is looked up by name. */
#ifndef CT_KERNEL_KARGS_H
#define CT_KERNEL_KARGS_H

#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

#include "cltensor/status.h"
#include "kernel/engine.h"

struct ct__kargs {
  ct__kernel *k;
  cl_kernel ck;
  cl_uint next;          /* index of the next argument */
  cl_int err;            /* the first failure, CL_SUCCESS while none */
  cl_uint bad;           /* its index */
  const char *bad_name;  /* its name */
  /* A failure from outside OpenCL (enqueueing another thread's recorded work that an argument
   * reads, ct__karg_tensor()): returned as is by ct__kargs_end(), its message kept. */
  ct_status st;
};

/* Starts the list for k, locked by the caller (ck is what ct__kernel_lock() returned). */
void ct__kargs_begin(struct ct__kargs *a, ct__kernel *k, cl_kernel ck);

/* Locks k and starts its list: ct__kernel_lock() and ct__kargs_begin() in one, e.g.
 * `struct ct__kargs a = ct__kargs_lock(k);`. The caller unlocks k after the launch. */
static inline struct ct__kargs ct__kargs_lock(ct__kernel *k) {
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  return a;
}

/* The next argument: size bytes at value (value NULL with size > 0: __local memory). */
void ct__karg(struct ct__kargs *a, const char *name, size_t size, const void *value);

/* Counts the next argument as failed with err without setting it: for a value the caller
 * found it cannot pass (ct__karg_tensor() with a misaligned tensor). */
void ct__karg_fail(struct ct__kargs *a, const char *name, cl_int err);

/* Counts the next argument as failed with st, whose message ct_last_error() already holds. */
void ct__karg_fail_status(struct ct__kargs *a, const char *name, ct_status st);

/* CT_OK when every argument was set and their count is the kernel's; else the error of the
 * first failing argument, "<fn>: kernel <k>: setting argument <i> (<name>) failed: <CL error>",
 * or of a wrong count. */
ct_status ct__kargs_end(struct ct__kargs *a, const char *fn);

/* The typed setters: ct__karg_mem(), _int(), _long(), _ulong(), _float(), _double(). */
#define CT__KARG_TYPED(suffix, type)                                               \
  static inline void ct__karg_##suffix(struct ct__kargs *a, const char *name, type v) { \
    ct__karg(a, name, sizeof v, &v);                                               \
  }
CT__KARG_TYPED(int, cl_int)
CT__KARG_TYPED(long, cl_long)
CT__KARG_TYPED(ulong, cl_ulong)
CT__KARG_TYPED(float, cl_float)
CT__KARG_TYPED(double, cl_double)
#undef CT__KARG_TYPED

/* A buffer (NULL allowed), noted for ct__kernel_unlock() to drop where kernels retain buffers. */
static inline void ct__karg_mem(struct ct__kargs *a, const char *name, cl_mem v) {
  ct__kernel_note_mem(a->k, a->next);
  ct__karg(a, name, sizeof v, &v);
}

/* __local memory of bytes bytes. */
static inline void ct__karg_local(struct ct__kargs *a, const char *name, size_t bytes) {
  ct__karg(a, name, bytes, NULL);
}

/* A long8 of the first n values of v (n <= 8), the rest fill: the kernels' shape (fill 1) and
 * stride (fill 0) arguments, read by ct_offset() in kernels/common.cl. The one packer of
 * shape/stride arguments. */
void ct__karg_long8(struct ct__kargs *a, const char *name, int n, const int64_t *v, int64_t fill);

/* The kernels' strided geometry, read by ct_offset() in kernels/common.cl: an int ndim, a long8
 * shape (fill 1), then a long8 of strides (fill 0) for each of the nst arrays in strides. name
 * stands for all of them in messages. */
void ct__karg_geom(struct ct__kargs *a, const char *name, int ndim, const int64_t *shape, int nst,
                   const int64_t *const *strides);

/* No -DCT_IN option: ct__kernel_for()'s dt for kernels specialised otherwise (-DCT_BITS). */
#define CT__NO_DTYPE (-1)

/* OUT: *k, the kernel `name` of `file` built for dtype dt ("-DCT_IN=<dt>", then extra, which
 * may be NULL; dt CT__NO_DTYPE: extra alone). The statuses of ct__kernel_get(), whose message
 * gets " (in <fn>)" appended. The one "kernel of file X for dtype dt" lookup of the ops. */
ct_status ct__kernel_for(ct__kernel **k, ct_device *d, const char *file, const char *name, int dt,
                         const char *extra, const char *fn);

/* The one 1-D launch of kernels that bound-check their work-item ids: ends the argument list a
 * of the locked k (ct__kargs_end(), naming fn), launches n work-items and unlocks k, whatever
 * failed. group 0: ct__launch_dims()'s groups (global rounded up to whole groups); group > 0:
 * groups of that fixed size (a power of two, lowered to the kernel's limit), for kernels that
 * PoCL would otherwise compile once per group size. n <= 0 launches nothing. */
ct_status ct__launch1(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t n, size_t group,
                      const char *fn);

/* ct__launch1()'s launch step alone, for callers that end the list and unlock k themselves
 * (nn/attention.c, whose kernel's group size is fixed at 64). */
ct_status ct__launch1_enqueue(ct__kernel *k, ct_device *d, int64_t n, size_t group);

#endif
