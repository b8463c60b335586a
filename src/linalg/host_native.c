/* Host functions as native commands: on devices whose memory is the host's (PoCL's CPU device),
 * a host function (a CBLAS product, the host attention) runs as a native kernel in queue order
 * on the device's buffers, with no host round trip. The host GEMM route (gemm_host.c) and the
 * host attention (nn/attention_host.c) enqueue through here; docs/GEMM.md, "Routes". */
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/env.h"
#include "core/error.h"
#include "fusion/hooks.h"
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

/* Native commands (and helpers) enqueued and not yet ended. A program that returns from main
 * while one runs (an error path that skips ct_synchronize, say) has its libraries' destructors
 * run beside it: OpenBLAS freed its buffers under a running product and the process died in
 * sgemm. This library's destructor runs before those of the libraries it links (OpenBLAS), and
 * waits for the count to drop, at most 2 s (a command that never runs, e.g. one terminated
 * after an earlier failure, is not waited for longer). */
static atomic_long ct__native_inflight;

__attribute__((destructor)) static void ct__native_drain(void) {
  for (int i = 0; i < 2000 && atomic_load(&ct__native_inflight) > 0; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

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
    if (!base[j]) {
      atomic_fetch_sub(&ct__native_inflight, 1);
      return;
    }
  c->fn(c->args, base);
  atomic_fetch_sub(&ct__native_inflight, 1);
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
  if (err == CL_SUCCESS) {
    atomic_fetch_add(&ct__native_inflight, 1);
    err = clEnqueueNativeKernel(q, ct__native_run, &c, offsetof(struct ct__native_cmd, args) + size, (cl_uint)nbuf,
                                bufs, locs, c.ptrs ? 0 : nwait, c.ptrs ? NULL : wait, evp);
    if (err != CL_SUCCESS) atomic_fetch_sub(&ct__native_inflight, 1);
  }
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

/* ---- A team of two: the device's second worker helps the command that runs ----
 * PoCL 3.1's workers sleep between commands, and waking one takes 25-90 us on a small virtual
 * machine (docs/PERFORMANCE.md, "Example models and training"); its scheduler also runs every
 * kernel it expects to take under 200 us on one worker. So two halves of a product on two
 * queues mostly ran one after the other. Instead, a command that can be cut into parts (a product's rows, the
 * attention's batch entries) posts them as a job on its device's team and claims parts itself,
 * one by one; a helper command on the side queue, started by a marker just before it, claims
 * the others once its worker is awake, and then stays (spinning, yielding its CPU to anyone
 * runnable) for ct__team_idle_ns after the last job ended, so that the next products find it
 * awake. The helper lists no buffers: it reaches memory only through a posted job's parts,
 * and the posting command returns only when every part has ended and no helper holds the job,
 * so the queue's order is as with one command.
 *
 * 50 us: in the GPT training step 0.3 ms kept the second worker spinning while PoCL wanted it
 * for the larger kernels (4% slower than 50 us, alternated runs); 0 loses the forward's
 * back-to-back products (1.87 against 1.66 ms). */

int64_t ct__team_idle_ns = 50000;
int64_t ct__team_share_wait_ns = 0;

static inline void ct__team_lock(struct ct__team *t) {
  while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire)) sched_yield();
}

static inline void ct__team_unlock(struct ct__team *t) { atomic_flag_clear_explicit(&t->lock, memory_order_release); }

static int64_t ct__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

atomic_long ct__team_parts_helped;

/* Helpers working on j now. */
static int ct__job_refs(struct ct__team *t, const struct ct__team_job *j) {
  ct__team_lock(t);
  int refs = j->refs;
  ct__team_unlock(t);
  return refs;
}

/* Claims and runs parts of j until none is left; helper: counted in ct__team_parts_helped. */
static void ct__team_work(struct ct__team_job *j, bool helper) {
  for (;;) {
    int64_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (i >= j->nparts) return;
    j->fn(j->ctx, i);
    if (helper) atomic_fetch_add_explicit(&ct__team_parts_helped, 1, memory_order_relaxed);
  }
}

void ct__team_run(struct ct__team *t, uint64_t seq, ct__part_fn fn, void *ctx, int64_t nparts) {
  struct ct__team_job j = {.fn = fn, .ctx = ctx, .nparts = nparts, .refs = 0};
  atomic_init(&j.next, 0);
  bool posted = false;
  if (t && nparts > 1) {
    ct__team_lock(t);
    if (!t->job) {
      t->job = &j;
      posted = true;
    }
    if (seq > t->started) t->started = seq;
    ct__team_unlock(t);
  }
  if (posted && ct__team_share_wait_ns > 0) {
    /* Tests: give the helper the first claim, so that both threads run parts. */
    int64_t until = ct__now_ns() + ct__team_share_wait_ns;
    while (ct__job_refs(t, &j) == 0 && ct__now_ns() <= until) sched_yield();
  }
  ct__team_work(&j, false);
  if (!posted) return;
  /* Every part is claimed; wait until the helper's (if it took any) have ended. */
  ct__team_lock(t);
  t->job = NULL;
  atomic_store_explicit(&t->last_ns, ct__now_ns(), memory_order_relaxed);
  ct__team_unlock(t);
  while (ct__job_refs(t, &j) > 0) sched_yield();
}

/* The helper for the job of sequence number seq. It works on whatever job is posted. Once its
 * own job has started, it leaves after ct__team_idle_ns without one (helpers that start late,
 * queued behind one that stayed, leave at once); before that it waits for its job, at most
 * CT__TEAM_WAIT_NS (a command that failed to enqueue never posts it). */
#define CT__TEAM_WAIT_NS ((int64_t)5000000)
struct ct__team_helper_args {
  struct ct__team *team;
  uint64_t seq;
};

void ct__team_cancel(struct ct__team *t, uint64_t seq) {
  if (!t) return;
  ct__team_lock(t);
  if (seq > t->started) t->started = seq;
  ct__team_unlock(t);
}

static void CL_CALLBACK ct__team_helper(void *p) {
  const struct ct__team_helper_args *a = p;
  struct ct__team *t = a->team;
  int64_t begin = ct__now_ns();
  for (;;) {
    ct__team_lock(t);
    struct ct__team_job *j = t->job;
    if (j) j->refs++;
    bool mine_started = t->started >= a->seq;
    ct__team_unlock(t);
    if (j) {
      ct__team_work(j, true);
      ct__team_lock(t);
      j->refs--;
      ct__team_unlock(t);
      continue;
    }
    int64_t now = ct__now_ns();
    if (mine_started ? now - atomic_load_explicit(&t->last_ns, memory_order_relaxed) > ct__team_idle_ns
                     : now - begin > CT__TEAM_WAIT_NS) {
      atomic_fetch_sub(&ct__native_inflight, 1);
      return;
    }
    sched_yield();
  }
}

ct_status ct__team_call(struct ct__team **team, uint64_t *seq, ct_device *d, const char *fn) {
  *team = NULL;
  *seq = 0;
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
        s->side_queue = clCreateCommandQueue(ct__device_context(d), d->id, 0, &err);
      state = s->side_queue ? 1 : -1;
      atomic_store(&s->side_state, state);
    }
    pthread_mutex_unlock(&s->side_lock);
  }
  if (state != 1) return CT_OK;
  CT__TRY(ct__deferred_realize(fn));
  /* The helper starts once the device's queue reaches this point (not while the commands
   * before it run: it would spin beside them), and at once when the side queue is idle. */
  cl_event start = NULL;
  if (clEnqueueMarkerWithWaitList(ct__device_queue(d), 0, NULL, &start) != CL_SUCCESS) return CT_OK;
  struct ct__team_helper_args a = {&s->team, atomic_fetch_add(&s->team.seq, 1) + 1};
  atomic_fetch_add(&ct__native_inflight, 1);
  cl_int err = clEnqueueNativeKernel(s->side_queue, ct__team_helper, &a, sizeof a, 0, NULL, NULL, 1, &start, NULL);
  clReleaseEvent(start);
  if (err != CL_SUCCESS) {
    atomic_fetch_sub(&ct__native_inflight, 1);
    return CT_OK; /* the command runs alone */
  }
  clFlush(s->side_queue);
  *team = a.team;
  *seq = a.seq;
  return CT_OK;
}
