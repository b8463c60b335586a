/* Internal view of a device: its OpenCL handles and per-device state of other subsystems. */
#ifndef CT_DEVICE_DEVICE_H
#define CT_DEVICE_DEVICE_H

#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cltensor/device.h"
#include "cltensor/tensor.h"

/* Per-device state owned by other subsystems, created lazily through ct__device_slot() and
 * destroyed by ct_shutdown() in reverse slot order (so GEMM state goes before kernels, and
 * kernels before the allocator that backs their buffers). */
enum ct__slot {
  CT__SLOT_ALLOC = 0,   /* memory/alloc.c */
  CT__SLOT_KERNELS,     /* kernel/engine.c */
  CT__SLOT_PROFILE,     /* profile/ */
  CT__SLOT_RANDOM,      /* random/ */
  CT__SLOT_GEMM,        /* linalg/ */
  CT__SLOT_ELEMENTWISE, /* elementwise/: kernel lookup table */
  CT__SLOT_COUNT
};

struct ct__platform {
  cl_platform_id id;
  cl_uint ndev;
  cl_device_id *devs;   /* all of this platform's devices, OpenCL order */
  cl_context ctx;       /* one context for all of them, created on first open */
};

struct ct_device {
  int index;                   /* position in the documented order */
  char spec[32];               /* canonical spec */
  cl_device_id id;
  struct ct__platform *plat;
  ct_device_props props;
  char *strings;               /* one allocation backing the props strings */
  bool native_kernels;         /* CL_EXEC_NATIVE_KERNEL: runs host functions in queue order */
  cl_uint float_lanes;         /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT (at least 1): a CPU's SIMD width */
  /* What the implementation does (device/quirks.c): the kernel style the op families pick,
   * why, an invalid $CLTENSOR_KERNEL_STYLE (reported by the first open), and the driver's loop
   * limit per work-item (0: none). */
  bool pocl_cpu;               /* PoCL's CPU driver (what shipped tuning and the chunked style are for) */
  bool chunked;
  const char *style_reason;
  char style_error[160];       /* empty unless $CLTENSOR_KERNEL_STYLE is invalid */
  uint32_t loop_limit;
  bool kargs_retain;           /* a kernel keeps the buffers of its arguments alive (ct__kernel_unlock) */
  bool fast_fma;               /* CL_FP_FMA: fma() is an instruction, not a software routine */

  pthread_mutex_t lock;        /* guards opening and slot creation */
  atomic_int opened;
  cl_command_queue queue;      /* in-order; profiling enabled only when asked */
  int queue_profiling;

  _Atomic(void *) slot[CT__SLOT_COUNT];
  void (*slot_destroy[CT__SLOT_COUNT])(ct_device *d, void *state);

  /* Asynchronous failures (ct__device_track / ct__device_async_check): the event of the last
   * kernel the library enqueued, and the first failure seen but not yet reported. */
  _Atomic(cl_event) last_event;
  atomic_int async_error;
};

/* Sets the device's kernel style and driver limits from its properties and
 * $CLTENSOR_KERNEL_STYLE (device/quirks.c); called once when the device list is made. */
void ct__device_init_quirks(ct_device *d);

/* True when the op families run their chunked (PoCL CPU) kernel variants on d, false for the
 * lane-parallel (GPU-style) ones. */
static inline bool ct__device_chunked(const ct_device *d) { return d->chunked; }

/* Whether d is PoCL's CPU driver: the implementation, whatever the kernel style says. */
static inline bool ct__device_pocl_cpu(const ct_device *d) { return d->pocl_cpu; }

/* Whether fma() is cheap on d (CL_FP_FMA in CL_DEVICE_SINGLE_FP_CONFIG). Where it is not,
 * kernels build with -DCT_FAST_FMA=0 and their polynomials use mad() (common.cl's CT_FMA). */
static inline bool ct__device_fast_fma(const ct_device *d) { return d->fast_fma; }
/* Tests: nonzero makes every device listed afterwards take the mad() path, as a device without
 * CL_FP_FMA does (elementwise-sweep-soft-fma runs the sweep so on PoCL). */
extern int ct__device_force_soft_fma;
/* Tests: nonzero makes every device listed afterwards drop its kernels' buffer arguments at
 * unlock, as on implementations whose kernels retain them (interop runs that path on PoCL). */
extern int ct__device_force_drop_kargs;

/* How many iterations one loop of a work-item may take on d: UINT64_MAX unless the driver ends
 * loops early (llvmpipe), then a share of its limit. Host code that sizes per-item loops from
 * the input (reduction parts) keeps below it. */
uint64_t ct__device_loop_budget(const ct_device *d);

/* Opens the device (context + queue) if needed; thread-safe. */
ct_status ct__device_open(ct_device *d);

/* The device's context and queue; valid after a successful ct__device_open(). */
static inline cl_context ct__device_context(const ct_device *d) { return d->plat->ctx; }
static inline cl_command_queue ct__device_queue(const ct_device *d) { return d->queue; }

/* Returns the state in slot, opening the device and creating the state once with create()
 * (called under the device lock; on failure it returns a status with the error set).
 * destroy() runs at ct_shutdown(), when the queue has drained. */
ct_status ct__device_slot(void **out, ct_device *d, enum ct__slot slot,
                          ct_status (*create)(void **state, ct_device *d),
                          void (*destroy)(ct_device *d, void *state));

/* A command that fails after it was enqueued (its event ends with a negative status) is
 * reported by the next blocking call on the device. OpenCL itself does not say so: clFinish
 * and a blocking read return CL_SUCCESS after an earlier command failed (PoCL runs the read,
 * and skips the kernels queued behind the failure, so the read returns stale data).
 *
 * ct__device_track() takes over ev, the event of a command just enqueued on d, and keeps it
 * as the last one, checking the one it replaces: a failure found there is kept for the next
 * check. Only the last event is kept: an in-order queue fails the commands enqueued while an
 * earlier one is pending when that one fails (PoCL does), so a failure still pending is seen
 * in a later event. ct__device_async_check() is called by blocking calls after their wait: it
 * returns CT_OK, or the kept failure as ct__cl_error() does ("<fn>: a command enqueued earlier
 * on <spec> failed ...") and clears it, so each failure is reported once, to the first thread
 * that blocks on d afterwards. */
void ct__device_track(ct_device *d, cl_event ev);
ct_status ct__device_async_check(ct_device *d, const char *fn);

/* True when both devices share one OpenCL context (same platform), so buffers copy directly. */
static inline int ct__device_same_context(const ct_device *a, const ct_device *b) {
  return a->plat == b->plat;
}

/* Set by the profiler before devices are opened: new queues get CL_QUEUE_PROFILING_ENABLE.
 * $CLTENSOR_PROFILE=1 has the same effect. */
extern atomic_int ct__want_queue_profiling;

/* Counts ct_shutdown() calls. Objects that outlive a shutdown (a tensor a garbage-collected
 * binding finalizes late) record the generation they were made in and, when it has changed,
 * free only their host-side state: their device, queue and allocator are gone. */
unsigned ct__device_generation(void);

/* Canonical short spec of each device, comma-separated with names, for "available devices"
 * messages: appends to the current error message. */
void ct__device_append_list(void);

/* ---- Device specs (spec.c): a pure parser, fuzzable without OpenCL ---- */
enum ct__spec_kind { CT__SPEC_AUTO, CT__SPEC_TYPE, CT__SPEC_CL, CT__SPEC_NAME };
struct ct__spec {
  enum ct__spec_kind kind;
  ct_device_type type;    /* CT__SPEC_TYPE */
  long n;                 /* CT__SPEC_TYPE: ordinal */
  long platform, device;  /* CT__SPEC_CL */
  const char *name;       /* CT__SPEC_NAME: points into the parsed string */
};
/* Parses spec into *out. CT_ERR_INVALID_ARGUMENT with the quoted (escaped) spec and the valid
 * forms, the message starting "<fn>: " (ct__spec_parse: "ct_device_find: "). An index of more
 * than 9 digits is "out of range". */
ct_status ct__spec_parse(struct ct__spec *out, const char *spec);
ct_status ct__spec_parse_fn(struct ct__spec *out, const char *spec, const char *fn);

#endif
