/* The profiler's internal hooks (the public API is include/cltensor/profile.h).
 *
 * Anything that enqueues a command itself (transfers, CLBlast calls) records it like this:
 *
 *   cl_event ev;
 *   cl_int err = clEnqueueWriteBuffer(q, buf, CL_FALSE, off, n, host, 0, NULL,
 *                                     ct__profile_event(d, &ev));
 *   if (err == CL_SUCCESS) ct__profile_record(d, "h2d", ev);
 *
 * ct__profile_event() asks for an event only when recording is on and d's queue can time
 * commands, so nothing is created when the profiler is off. ct__kernel_launch() does this for
 * every kernel. */
#ifndef CT_PROFILE_PROFILE_H
#define CT_PROFILE_PROFILE_H

#include <CL/cl.h>
#include <stdatomic.h>
#include <stdint.h>

#include "device/device.h"

/* -1 until $CLTENSOR_PROFILE has been read, then 0 (off) or 1 (recording). */
extern atomic_int ct__profile_on;
int ct__profile_env_init(void);

/* True while recording; one relaxed atomic load once the environment has been read. */
static inline int ct__profile_active(void) {
  int on = atomic_load_explicit(&ct__profile_on, memory_order_relaxed);
  return on >= 0 ? on : ct__profile_env_init();
}

/* Sets *slot to NULL and returns slot when the command should produce an event for the
 * profiler, else NULL (pass the result as the enqueue call's event argument). */
static inline cl_event *ct__profile_event(const ct_device *d, cl_event *slot) {
  *slot = NULL;
  return d->queue_profiling && ct__profile_active() ? slot : NULL;
}

/* Records one command named op (copied; a kernel name, "h2d", "gemm" ...) on d. Takes over ev
 * (released once its times are read); ev may be NULL, then the call is counted without a time.
 * Never blocks on the device except to bound memory when tens of thousands of commands are
 * still pending; never fails (a command that cannot be recorded for lack of memory is counted
 * as dropped). When the profiler is off it only releases ev. */
void ct__profile_record(ct_device *d, const char *op, cl_event ev);

/* For work that enqueues several commands but hands back one event for its last (a CLBlast
 * routine: pad/transpose kernels, then the GEMM kernel, then maybe a copy back): begin is a
 * marker enqueued just before the work (clEnqueueMarkerWithWaitList with
 * ct__profile_event()), end the event of its last command. The time is from the marker's end
 * to end's end: on an in-order queue, everything the work enqueued, plus any time the device
 * waited for the host between those commands. Takes over both events; either may be NULL (then
 * the call is counted without a time). */
void ct__profile_record_span(ct_device *d, const char *op, cl_event begin, cl_event end);

/* For work a device's op runs on the host (the host-BLAS GEMM route on mapped buffers): ns is
 * the host wall time of that work. Counted and timed like a command. */
void ct__profile_record_host(ct_device *d, const char *op, uint64_t ns);

/* For a command whose event the caller keeps (an async transfer handed to the user): the
 * profiler takes its own reference, so both may release independently. */
static inline void ct__profile_record_shared(ct_device *d, const char *op, cl_event ev) {
  if (ev && d->queue_profiling && ct__profile_active()) {
    clRetainEvent(ev);
    ct__profile_record(d, op, ev);
  }
}

#endif
