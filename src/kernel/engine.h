/* The kernel engine: builds OpenCL programs per device on first use (from the embedded
 * kernels/ .cl files or from generated source strings), keeps them in memory, and hands out kernels.
 *
 * A cl_kernel's arguments are shared state, so a ct__kernel carries a lock: set the arguments
 * and enqueue while holding it, e.g.
 *
 *   ct__kernel *k;
 *   CT__TRY(ct__kernel_get(&k, d, "copy.cl", "copy_strided", "-DCT_SRC=7 -DCT_DST=5"));
 *   cl_kernel ck = ct__kernel_lock(k);
 *   clSetKernelArg(ck, 0, sizeof(cl_mem), &buf); ...
 *   ct_status st = ct__kernel_launch(k, d, 1, &global, NULL);
 *   ct__kernel_unlock(k);
 *
 * Every program is built with kernels/common.cl prepended (dtype codes, 16-bit float loads
 * and stores) and with options that fit the device ("-cl-std=CL1.2", "-DCT_HAS_FP64=1" where
 * cl_khr_fp64 exists). */
#ifndef CT_KERNEL_ENGINE_H
#define CT_KERNEL_ENGINE_H

#include <CL/cl.h>

#include "cltensor/device.h"

typedef struct ct__kernel ct__kernel;

/* OUT: *out, kernel `name` from embedded source `file` ("elementwise.cl") built with extra
 * `options` (may be NULL). Owned by the device; valid until ct_shutdown().
 * CT_ERR_KERNEL_BUILD with the build log; CT_ERR_INTERNAL for an unknown file or kernel. */
ct_status ct__kernel_get(ct__kernel **out, ct_device *d, const char *file, const char *name,
                         const char *options);

/* As ct__kernel_get() for a generated source string; programs are keyed by the source's hash
 * and the options, so the same source builds once per device. */
ct_status ct__kernel_get_source(ct__kernel **out, ct_device *d, const char *source,
                                const char *name, const char *options);

cl_kernel ct__kernel_lock(ct__kernel *k);
void ct__kernel_unlock(ct__kernel *k);

/* Enqueues k (locked by the caller) on d's queue. local may be NULL. Zero-sized launches are
 * skipped and return CT_OK. */
ct_status ct__kernel_launch(ct__kernel *k, ct_device *d, cl_uint dims, const size_t *global,
                            const size_t *local);

/* The kernel's name (for messages and the profiler). */
const char *ct__kernel_name(const ct__kernel *k);

/* Embedded sources (generated at build time by src/kernel/embed.py). */
struct ct__embedded_source {
  const char *name;   /* file name, e.g. "common.cl" */
  const char *text;   /* NUL-terminated */
  size_t size;        /* without the NUL */
};
extern const struct ct__embedded_source ct__embedded_sources[];
extern const int ct__embedded_source_count;

/* The embedded source called name, or NULL. */
const struct ct__embedded_source *ct__embedded_find(const char *name);

#endif
