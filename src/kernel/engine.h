/* The kernel engine: builds OpenCL programs per device on first use (from the kernels/ .cl
 * files embedded at build time, or from generated source strings), keeps them in memory and
 * on disk, and hands out kernels.
 *
 * A cl_kernel's arguments are shared state, so a ct__kernel carries a lock: set the arguments
 * and enqueue while holding it, e.g.
 *
 *   ct__kernel *k;
 *   CT__TRY(ct__kernel_get(&k, d, "copy.cl", "copy_strided", "-DCT_SRC=7 -DCT_DST=5"));
 *   struct ct__kargs a = ct__kargs_lock(k);     (kernel/kargs.h)
 *   ct__karg_mem(&a, "dst", buf); ...
 *   ct_status st = ct__kargs_end(&a, fn);
 *   if (st == CT_OK) st = ct__kernel_launch(k, d, 1, &global, &local);
 *   ct__kernel_unlock(k);
 *
 * Calling ct__kernel_get() on every op invocation is intended: after the first call for a
 * (file, kernel, options) triple it is a lock-free hash lookup (no allocation, no formatting).
 *
 * Every program is built with kernels/common.cl prepended (dtype codes, 16-bit float loads
 * and stores) and with options that fit the device ("-cl-std=CL1.2" where the compiler speaks
 * OpenCL C >= 1.2, "-DCT_HAS_FP64=0|1" from cl_khr_fp64), then the caller's options; never an
 * option that relaxes float semantics.
 *
 * Compiled binaries persist in a disk cache (src/kernel/cache.h: location, format, checks);
 * $CLTENSOR_CACHE=0 turns it off. Developer switch: $CLTENSOR_KERNEL_DIR, or the meson option
 * kernel_dir, names a folder from which kernels/ files (common.cl included) are read at run
 * time instead of the embedded copies; read once per device, when the device's engine starts. */
#ifndef CT_KERNEL_ENGINE_H
#define CT_KERNEL_ENGINE_H

#include <CL/cl.h>

#include "cltensor/device.h"

typedef struct ct__kernel ct__kernel;

/* OUT: *out, kernel `name` from embedded source `file` ("elementwise.cl") built with extra
 * `options` (may be NULL, same as ""). Owned by the device; valid until ct_shutdown().
 * Thread-safe. CT_ERR_KERNEL_BUILD with the build log; CT_ERR_INTERNAL for an unknown file or
 * kernel; CT_ERR_IO when the developer kernel folder lacks the file; the statuses of
 * ct__device_open(). Builds of one device are serialised; lookups of built kernels never wait. */
ct_status ct__kernel_get(ct__kernel **out, ct_device *d, const char *file, const char *name,
                         const char *options);

/* As ct__kernel_get() for a generated source string (common.cl is prepended as well). The
 * whole text is hashed and compared on each call, so equal texts share one program and one
 * kernel per device whatever buffer they are in; callers on a hot path should keep the
 * ct__kernel they got rather than regenerate the text. */
ct_status ct__kernel_get_source(ct__kernel **out, ct_device *d, const char *source,
                                const char *name, const char *options);

/* As ct__kernel_get_source() (same options, same disk cache), but the kernel is the caller's:
 * it is not entered in the device's tables, and ct__kernel_free_owned() releases it (after the
 * launches that use it were enqueued; OpenCL keeps an enqueued kernel alive). For generated
 * kernels whose number is unbounded (the fusion graph's, which keeps them in a bounded LRU). */
ct_status ct__kernel_build_owned(ct__kernel **out, ct_device *d, const char *source, const char *name,
                                 const char *options);
void ct__kernel_free_owned(ct__kernel *k);
cl_kernel ct__kernel_lock(ct__kernel *k);
/* Unlocks k. On a device whose kernels retain their buffer arguments (d->kargs_retain), first
 * sets every buffer argument noted since the lock (ct__kernel_note_mem) to NULL: the launches
 * enqueued keep what they need, and a released buffer is freed rather than held by the kernel. */
void ct__kernel_unlock(ct__kernel *k);
/* Notes that argument index of the locked k was set to a buffer (kargs.c's ct__karg_mem). */
void ct__kernel_note_mem(ct__kernel *k, cl_uint index);

/* Enqueues k (locked by the caller) on d's queue. local may be NULL. Zero-sized launches are
 * skipped and return CT_OK. The launch observer, when one is installed, sees each enqueued
 * launch (the profiler records its event under the kernel's name). */
ct_status ct__kernel_launch(ct__kernel *k, ct_device *d, cl_uint dims, const size_t *global,
                            const size_t *local);

/* Called by ct__kernel_launch() after each enqueue with the launch's event, which it borrows
 * (an observer that keeps it retains it). The profiler sits above the engine, so the engine
 * does not call it: the profiler installs itself here when the library is loaded
 * (src/profile/profile.c). One observer; NULL removes it. Read with one relaxed atomic load
 * per launch. */
typedef void (*ct__launch_observer)(ct_device *d, const char *kernel_name, cl_event ev);
void ct__kernel_set_launch_observer(ct__launch_observer obs);

/* Picks the work-group size of a launch of k over global[0..dims) (dims 1-3) and rounds
 * global[] up to a multiple of it; the kernel must ignore ids at or past the real extents.
 * Launches should never pass local = NULL on a hot path: PoCL then picks a local size from the
 * global size and compiles a work-group function for each one it has not seen (100-400 ms), so
 * every new tensor shape costs a compile. Groups are always the kernel's group size (1024
 * work-items on CPUs, 256 elsewhere, within CL_KERNEL_WORK_GROUP_SIZE and
 * CL_DEVICE_MAX_WORK_ITEM_SIZES), except 1-D launches shorter than that, which get the power of
 * two at least global[0] (on PoCL's CPU driver the whole group too, issue #30); dim 2 gets 1. So a kernel sees at most log2(group size) + 1 shapes
 * per number of dims. This and the two below are the one work-group-size policy: every launch
 * with a free group size takes its size and shape from them. */
void ct__launch_dims(const ct__kernel *k, cl_uint dims, size_t *global, size_t *local);

/* As ct__launch_dims() with at most cap0 (a power of two) work-items along dim 0, unless dim 1
 * is too short to fill the group: for launches whose dim 0 walks rows an op has sized itself
 * (elementwise strided kernels: cap0 is the group, or 1 to group neighbouring rows). */
void ct__launch_shape(const ct__kernel *k, cl_uint dims, size_t cap0, size_t *global, size_t *local);

/* A 3-D launch whose dims 0 and 1 may be short (an output plane of a few rows and columns,
 * dim 2 enumerating planes): dims 0 and 1 get the power of two at least their extent (within the
 * group), dim 2 the rest of the group, so small planes don't leave most of each group idle as
 * ct__launch_dims() would (it fills a group along dims 0 and 1 only). At most
 * (log2(group size) + 1)^2 shapes. Rounds global[] up like ct__launch_dims(). */
void ct__launch_planes(const ct__kernel *k, size_t *global, size_t *local);

/* The work-group size ct__launch_dims() fills groups to (a power of two, at most
 * ct__device_group_target() and dim 0's work-item limit), for launches that split whole
 * groups from a remainder themselves (1-D kernels without a bounds check). */
size_t ct__kernel_group_size(const ct__kernel *k);

/* The group size every kernel of d aims at (1024 work-items on CPUs, 256 elsewhere, within the
 * device's limit; a power of two): ct__kernel_group_size() is this or less, by the kernel's own
 * limit. For deciding before a kernel is built whether a launch fills a group. */
size_t ct__device_group_target(const ct_device *d);

/* The largest power-of-two work-group size usable for k on d, at most cap, with per_item bytes
 * of local memory each: the device's and the kernel's limits (CL_KERNEL_WORK_GROUP_SIZE) and
 * local memory. For kernels whose group size is part of their algorithm (a group sharing a
 * reduction, a fixed 64 for random fills); others use ct__launch_dims(). CT_ERR_UNSUPPORTED
 * when none fits; the statuses of ct__cl_error(). */
ct_status ct__kernel_group_limit(size_t *out, ct__kernel *k, ct_device *d, size_t cap, size_t per_item);

/* The kernel's CL_KERNEL_NUM_ARGS (queried once), or CT__KERNEL_NARGS_UNKNOWN when the driver
 * did not say. */
#define CT__KERNEL_NARGS_UNKNOWN ((cl_uint)-1)
cl_uint ct__kernel_num_args(const ct__kernel *k);

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

/* The developer kernel folder ($CLTENSOR_KERNEL_DIR, else -Dkernel_dir), or NULL when the
 * embedded sources are used. */
const char *ct__kernel_dir(void);

/* Process-wide counters, for tests and diagnostics: the one list (X(name)) that the snapshot's
 * fields, the engine's atomic counters and ct__engine_stats() are made of. */
#define CT__ENGINE_COUNTERS(X)                                                                          \
  X(builds_from_source) /* successful compilations from source */                                      \
  X(loads_from_binary)  /* programs created from a disk-cache binary */                                \
  X(cache_rejected)     /* cache files ignored: corrupt, truncated or mismatched */                    \
  X(binary_refused)     /* valid cache files the driver would not load, or whose program lacked a      \
                           kernel its source has */                                                    \
  X(cache_writes)       /* cache files written */                                                      \
  X(build_failures)     /* builds that returned CT_ERR_KERNEL_BUILD */                                \
  X(light_fallbacks)    /* PoCL builds that failed with kernels/pocl_builtins.h and were built with    \
                           the full opencl-c.h (ct__build_any) */
#define CT__ENGINE_STAT_FIELD(name) unsigned long name;
struct ct__engine_stats {
  CT__ENGINE_COUNTERS(CT__ENGINE_STAT_FIELD)
};
void ct__engine_stats(struct ct__engine_stats *out);

#endif
