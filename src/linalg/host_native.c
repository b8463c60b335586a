/* Host functions as native commands: on devices whose memory is the host's (PoCL's CPU device),
 * a host function (a CBLAS product, the host attention) runs as a native kernel in queue order
 * on the device's buffers, with no host round trip. The host GEMM route (gemm_host.c) and the
 * host attention (nn/attention_host.c) enqueue through here; docs/GEMM.md, "Routes". */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "linalg/linalg.h"
#include "profile/profile.h"

/* OpenCL pairs mem_list[j] with args_mem_loc[j]: the pointer to buffer j replaces the handle at
 * location j. PoCL 3.1 does not. It sorts the buffers of every command by creation (its object
 * id) and then writes the i-th pointer of that order into args_mem_loc[i]: whenever the listed
 * buffers were not created in list order, the operands trade places. The allocator's cached
 * segments are reused in any order, so which product went wrong depended on allocation
 * history (f64 batches of a few MiB; one run in nine of eight threads' 128x128 f32 products).
 * It also passes a sub-buffer's parent instead of the sub-buffer, i.e. the parent's pointer.
 * (Newer PoCL keeps the list order.) So a command trusts only what holds on every reading:
 *   - a command with one buffer gets that buffer's pointer: with n > 1 buffers, n - 1 probe
 *     commands of one buffer each record their pointers, in queue order before the command, and
 *     the command takes its last buffer's pointer as the one of its own n that no probe reported;
 *   - the command lists all n buffers, so it is ordered after their writers and they stay
 *     alive (the implementation retains them) until it has run;
 *   - sub-buffers are replaced by their parent and origin before any of this
 *     (ct__native_unwrap). */

/* Pointers that probe commands hand to the command after them. Freed when that command
 * completes or is terminated (an event callback: a command skipped after an earlier failure
 * never runs its function), or by the enqueuing thread after a clFinish when the command could
 * not be enqueued. */
struct ct__native_ptrs {
  char *base[CT__NATIVE_MAX_BUFS];
};

static atomic_long ct__ptrs_live;

long ct__gemm_host_blocks_live(void) { return atomic_load(&ct__ptrs_live); }

static struct ct__native_ptrs *ct__ptrs_new(void) {
  struct ct__native_ptrs *p = calloc(1, sizeof *p);
  if (p) atomic_fetch_add(&ct__ptrs_live, 1);
  return p;
}

static void ct__ptrs_free(struct ct__native_ptrs *p) {
  if (!p) return;
  atomic_fetch_sub(&ct__ptrs_live, 1);
  free(p);
}

/* CL_COMPLETE fires for a command that ran and, with a negative status, for one that was
 * terminated: either way nothing reads the block any more. */
static void CL_CALLBACK ct__ptrs_release(cl_event ev, cl_int status, void *p) {
  (void)ev;
  (void)status;
  ct__ptrs_free(p);
}

struct ct__native_probe {
  struct ct__native_ptrs *ptrs;
  int j;
  char *base;          /* the buffer's handle until the implementation writes its pointer here */
};

static void CL_CALLBACK ct__native_probe_fn(void *p) {
  struct ct__native_probe *pr = p;
  pr->ptrs->base[pr->j] = pr->base;
}

/* A command's argument block. OpenCL copies it (up to the used part of args) at the enqueue
 * and, before the function runs, overwrites base[0..nreg-1] (cl_mem handles until then) with
 * the device's pointers to those buffers (on a host-unified CPU device, host memory), in an
 * order that may not be ours. */
struct ct__native_cmd {
  ct__native_fn fn;
  int nreg;
  struct ct__native_ptrs *ptrs;   /* the probes' pointers; NULL when nreg == 1 */
  char *base[CT__NATIVE_MAX_BUFS];
  _Alignas(16) unsigned char args[CT__NATIVE_MAX_ARGS];
};

static void CL_CALLBACK ct__native_run(void *p) {
  struct ct__native_cmd *c = p;
  char *base[CT__NATIVE_MAX_BUFS] = {c->base[0]};
  if (c->ptrs) {
    int last = c->nreg - 1;
    for (int j = 0; j < last; j++) base[j] = c->ptrs->base[j];
    for (int i = 0; i < c->nreg; i++) {
      bool probed = false;
      for (int j = 0; j < last; j++) probed |= c->base[i] == base[j];
      if (!probed) base[last] = c->base[i];
    }
  }
  /* A probe that did not run (it failed) left its pointer NULL: the function must not get it.
   * The failure shows in the probe's command status; there is no way to report it from here. */
  for (int j = 0; j < c->nreg; j++)
    if (!base[j]) return;
  c->fn(c->args, base);
}

bool ct__native_unwrap(cl_mem *mem, int64_t *off, size_t es) {
  cl_mem parent = NULL;
  size_t origin = 0;
  if (!*mem) return true;
  if (clGetMemObjectInfo(*mem, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL) != CL_SUCCESS || !parent)
    return true;
  if (clGetMemObjectInfo(*mem, CL_MEM_OFFSET, sizeof origin, &origin, NULL) != CL_SUCCESS || origin % es)
    return false;
  *mem = parent;
  *off += (int64_t)(origin / es);
  return true;
}

int ct__native_buf(cl_mem *bufs, int *n, cl_mem mem) {
  for (int j = 0; j < *n; j++)
    if (bufs[j] == mem) return j;
  bufs[*n] = mem;
  return (*n)++;
}

/* Enqueues the probe for buffer j of ptrs, after the nwait events of wait. */
static cl_int ct__enqueue_probe(cl_command_queue q, struct ct__native_ptrs *ptrs, int j, cl_mem mem, cl_uint nwait,
                                const cl_event *wait) {
  struct ct__native_probe pr = {ptrs, j, NULL};
  memcpy(&pr.base, &mem, sizeof mem);
  const void *loc = &pr.base;
  return clEnqueueNativeKernel(q, ct__native_probe_fn, &pr, sizeof pr, 1, &mem, &loc, nwait, wait, NULL);
}

ct_status ct__native_enqueue(ct_device *d, cl_command_queue q, ct__native_fn fn, const void *args, size_t size,
                             int nbuf, const cl_mem *bufs, cl_uint nwait, const cl_event *wait, cl_event *done_ev,
                             const char *prof, const char *fname) {
  if (size > CT__NATIVE_MAX_ARGS || nbuf < 1 || nbuf > CT__NATIVE_MAX_BUFS)
    return ct__error(CT_ERR_INTERNAL, "%s: a native command of %zu argument bytes and %d buffers", fname, size, nbuf);
  struct ct__native_cmd c;
  c.fn = fn;
  c.nreg = nbuf;
  c.ptrs = NULL;
  memcpy(c.args, args, size);
  const void *locs[CT__NATIVE_MAX_BUFS];
  for (int j = 0; j < nbuf; j++) {
    memcpy(&c.base[j], &bufs[j], sizeof bufs[j]);
    locs[j] = &c.base[j];
  }
  CT__TRY(ct__deferred_realize(fname));
  cl_int err = CL_SUCCESS;
  if (nbuf > 1) {
    c.ptrs = ct__ptrs_new();
    if (!c.ptrs) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a native command on %s", fname,
                                  d->spec);
    for (int j = 0; j < nbuf - 1 && err == CL_SUCCESS; j++)
      err = ct__enqueue_probe(q, c.ptrs, j, bufs[j], j == 0 ? nwait : 0, j == 0 ? wait : NULL);
  }
  cl_event ev = NULL;
  cl_event *evp = ct__profile_event(d, &ev);
  bool profiled = evp != NULL;
  /* With probes, the command's event frees their block (one command alone needs none). */
  if (c.ptrs || done_ev) evp = &ev;
  if (err == CL_SUCCESS)
    err = clEnqueueNativeKernel(q, ct__native_run, &c, offsetof(struct ct__native_cmd, args) + size, (cl_uint)nbuf,
                                bufs, locs, c.ptrs ? 0 : nwait, c.ptrs ? NULL : wait, evp);
  if (err != CL_SUCCESS) {
    /* Probes already enqueued still write into ptrs. */
    if (c.ptrs) {
      clFinish(q);
      ct__ptrs_free(c.ptrs);
    }
    return ct__cl_error(err, "%s: enqueueing a host function on %s", fname, d->spec);
  }
  if (c.ptrs && clSetEventCallback(ev, CL_COMPLETE, ct__ptrs_release, c.ptrs) != CL_SUCCESS) {
    /* No callback: wait for the command (run or terminated) and free the block here. */
    clWaitForEvents(1, &ev);
    ct__ptrs_free(c.ptrs);
  }
  if (done_ev) {
    clRetainEvent(ev);
    *done_ev = ev;
  }
  if (profiled) ct__profile_record(d, prof, ev);
  else if (ev) clReleaseEvent(ev);
  return CT_OK;
}

/* ---- Two halves at once ----
 * PoCL runs commands of two queues of a device at once on its worker threads: the half on the
 * side queue waits for a marker of everything enqueued before on the device's queue, the other
 * half follows on the device's queue, and a barrier there waits for the side half, so the
 * queue's order is as with one command. */

ct_status ct__native_side_queue(cl_command_queue *side, ct_device *d, const char *fn) {
  *side = NULL;
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  bool on = true;
  CT__TRY(ct__env_bool(fn, "CLTENSOR_GEMM_SPLIT", true, &on));
  if (!on) return CT_OK;
  int state = atomic_load(&s->side_state);
  if (state == 0) {
    pthread_mutex_lock(&s->side_lock);
    state = atomic_load(&s->side_state);
    if (state == 0) {
      cl_int err = CL_SUCCESS;
      if (d->props.compute_units >= 2)
        s->side_queue = clCreateCommandQueue(ct__device_context(d), d->id,
                                             d->queue_profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
      state = s->side_queue ? 1 : -1;
      atomic_store(&s->side_state, state);
    }
    pthread_mutex_unlock(&s->side_lock);
  }
  if (state == 1) *side = s->side_queue;
  return CT_OK;
}

ct_status ct__native_two(ct_device *d, cl_command_queue side, ct__native_fn fn, const void *args1, const void *args2,
                         size_t size, int nbuf, const cl_mem *bufs, const char *prof, const char *fname,
                         bool *done) {
  *done = false;
  CT__TRY(ct__deferred_realize(fname));
  cl_command_queue q = ct__device_queue(d);
  cl_event start = NULL, ev2 = NULL;
  if (clEnqueueMarkerWithWaitList(q, 0, NULL, &start) != CL_SUCCESS) return CT_OK; /* one command, then */
  ct_status st = ct__native_enqueue(d, side, fn, args2, size, nbuf, bufs, 1, &start, &ev2, prof, fname);
  clReleaseEvent(start);
  if (st != CT_OK) return st;
  clFlush(side);
  *done = true;
  st = ct__native_enqueue(d, q, fn, args1, size, nbuf, bufs, 0, NULL, NULL, prof, fname);
  cl_int err = clEnqueueBarrierWithWaitList(q, 1, &ev2, NULL);
  if (err != CL_SUCCESS) {
    /* Nothing else orders the queue after the side half: wait for it here. */
    clWaitForEvents(1, &ev2);
  }
  clReleaseEvent(ev2);
  return st;
}
