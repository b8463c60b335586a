/* OpenCL devices: enumeration, device specs, the default device, properties.
 *
 * Order. ct_device_get(i) walks every device of every OpenCL platform (CL_DEVICE_TYPE_ALL) in
 * one stable order: GPUs, then accelerators, then CPUs, then anything else; within a type, more
 * compute first (compute units x max clock), then more global memory; ties by OpenCL platform
 * index, then device index.
 *
 * Specs (case-insensitive strings):
 *   "auto"                      the default device (see ct_device_default)
 *   "gpu", "gpu:N"              the N-th GPU in the order above (N defaults to 0)
 *   "cpu", "cpu:N"              likewise for CPUs
 *   "accelerator", "accelerator:N"
 *   "cl:P:D"                    OpenCL platform P, device D, as OpenCL lists them
 *   "name:SUBSTRING"            the first device whose name contains SUBSTRING
 * Each device has a canonical spec ("gpu:0", "cpu:1", "accelerator:0", "other:0") used in every
 * message and listing.
 *
 * Ownership. ct_device handles are owned by the runtime: never freed by the caller, valid until
 * ct_shutdown(). Enumeration happens once, on the first call, and is thread-safe. Each device's
 * OpenCL context and in-order command queue are created lazily on first use.
 *
 * Thread safety. Every function here may be called from any thread, except ct_shutdown(), which
 * must be called once no other thread uses the library (tensors still alive may only be
 * released afterwards: see ct_shutdown()). */
#ifndef CLTENSOR_DEVICE_H
#define CLTENSOR_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"

CT_BEGIN_DECLS

typedef struct ct_device ct_device;

typedef enum ct_device_type {
  CT_DEVICE_GPU = 0,
  CT_DEVICE_ACCELERATOR = 1,
  CT_DEVICE_CPU = 2,
  CT_DEVICE_OTHER = 3
} ct_device_type;

/* Properties queried once from OpenCL. Strings are NUL-terminated and owned by the runtime.
 * Fields are only ever appended, never reordered. */
typedef struct ct_device_props {
  const char *name;
  const char *vendor;
  const char *platform_name;
  const char *platform_version;
  const char *driver_version;
  const char *device_version;   /* CL_DEVICE_VERSION, e.g. "OpenCL 3.0 PoCL ..." */
  const char *opencl_c_version; /* CL_DEVICE_OPENCL_C_VERSION */
  const char *extensions;       /* space-separated list */
  ct_device_type type;
  int platform_index;           /* OpenCL's own indices (the "cl:P:D" spec) */
  int device_index;
  uint32_t compute_units;
  uint32_t max_clock_mhz;
  uint64_t global_mem_bytes;
  uint64_t max_alloc_bytes;     /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
  uint64_t local_mem_bytes;
  size_t max_work_group_size;
  uint32_t mem_base_addr_align_bits;
  bool host_unified_memory;
  bool fp64;                    /* cl_khr_fp64 */
  bool fp16;                    /* cl_khr_fp16 */
} ct_device_props;

/* Number of OpenCL devices on all platforms.
 * Returns CT_OK; CT_ERR_NO_PLATFORM when no OpenCL ICD is installed (the message names the fix);
 * CT_ERR_INVALID_ARGUMENT when count is NULL; CT_ERR_OPENCL when enumeration fails. */
CT_API ct_status ct_device_count(int *count);

/* OUT: *out, the index-th device in the documented order (borrowed, owned by the runtime).
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for a NULL out or an index out of range (the message
 * gives the count); the statuses of ct_device_count(). *out is NULL on failure. */
CT_API ct_status ct_device_get(ct_device **out, int index);

/* OUT: *out, the device a spec names (see the top of this header).
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for a malformed spec (the message quotes it and lists
 * the valid forms); CT_ERR_DEVICE_NOT_FOUND for a valid spec that matches nothing (the message
 * lists the available devices); the statuses of ct_device_count(). */
CT_API ct_status ct_device_find(ct_device **out, const char *spec);

/* OUT: *out, the default device: $CLTENSOR_DEVICE when set (same syntax; an invalid or unmatched
 * value is an error, never ignored), else the first device in the order above (a GPU if there
 * is one, else an accelerator, else the CPU). Statuses as ct_device_find(). */
CT_API ct_status ct_device_default(ct_device **out);

/* The canonical spec ("gpu:0", "cpu:1"); "(null)" for NULL. Owned by the runtime. */
CT_API const char *ct_device_spec(const ct_device *d);

/* The device's position in ct_device_get() order; -1 for NULL. */
CT_API int ct_device_index(const ct_device *d);

/* The device's properties (borrowed, valid until ct_shutdown()); NULL for NULL. */
CT_API const ct_device_props *ct_device_properties(const ct_device *d);

/* The family of kernel variants the library runs on the device: "chunked" (one work-item
 * streams a run of elements: what PoCL's CPU drivers are fast at) or "lanes" (neighbouring
 * work-items on neighbouring elements, work-groups sharing an extent: GPUs, and CPU
 * implementations that run work-items as SIMD lanes, such as Mesa's rusticl on llvmpipe). The
 * choice follows the OpenCL implementation, not the device type; $CLTENSOR_KERNEL_STYLE
 * (auto, chunked, lanes) overrides it for every device. Both styles give the same results.
 * Returns a static string; NULL for NULL. See docs/PORTABILITY.md, "Kernel style". */
CT_API const char *ct_device_kernel_style(const ct_device *d);

/* Why the device got its kernel style, in words (a static string, e.g. "$CLTENSOR_KERNEL_STYLE"
 * when the variable chose it); NULL for NULL. */
CT_API const char *ct_device_kernel_style_reason(const ct_device *d);

/* "gpu", "accelerator", "cpu" or "other". */
CT_API const char *ct_device_type_name(ct_device_type type);

/* Makes sure the device's OpenCL context and queue exist (they are otherwise created on first
 * use), so that later calls don't pay for it.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL or an invalid $CLTENSOR_KERNEL_STYLE (every
 * call that uses the device reports it the same way); CT_ERR_OPENCL or CT_ERR_OUT_OF_MEMORY
 * when OpenCL refuses. */
CT_API ct_status ct_device_open(ct_device *d);

/* Waits until every command queued on the device has finished.
 * Asynchronous failures: ops only enqueue their kernels, so a kernel that fails after its
 * enqueue cannot be reported by the op that enqueued it. It is reported, once, by the next
 * blocking call on the device from any thread: this one, ct_to_host(), ct_copy_from_host(),
 * ct_event_wait() (and the calls reading results through ct_to_host: ct_print, ct_format, the
 * savers), as CT_ERR_OPENCL (or CT_ERR_OUT_OF_MEMORY for an out-of-resources status) with
 * "a command enqueued earlier on <spec> failed after it was enqueued". Results of that command
 * and of those queued behind it may be missing; the device keeps working. Commands a program
 * enqueues itself on the queue (ct_device_cl_queue) are its own to check.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL; CT_ERR_OPENCL. */
CT_API ct_status ct_device_synchronize(ct_device *d);

/* Releases every OpenCL object and all memory the library holds; device handles become invalid.
 * Call it when no other thread uses the library, best after releasing every tensor; the
 * library may be used again afterwards (it enumerates anew). Safe to call when nothing was
 * initialized, and twice.
 * Objects still alive may be released afterwards, in any order, as a garbage-collected binding
 * finalizes them: ct_release(), ct_event_free(), ct_pinned_free(),
 * ct_safetensors_free() and DLPack deleters then free their host-side state only (the device
 * memory went with the runtime). Any other use of such an object is undefined.
 * Before a program exits, wait for its devices (read a result, ct_device_synchronize or
 * ct_shutdown): PoCL 3.1 can crash when the process exits while it still compiles a kernel the
 * last commands use (docs/PORTABILITY.md). */
CT_API void ct_shutdown(void);

CT_END_DECLS

#endif
