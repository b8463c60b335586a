/* Process groups: construction, the communication thread and its queue, waiting for works,
 * the broken state, and each rank's device.
 *
 * Every group has one communication thread that runs its works one after the other in the order
 * they were queued: for an MPI group, this thread makes all MPI calls (so MPI_THREAD_SERIALIZED
 * suffices and MPI requests progress while the program computes); for a device group it runs the
 * host reductions, so the asynchronous forms overlap the program's work there too. The thread
 * runs with grad mode off (its views and copies are never recorded). A work that fails on an MPI
 * group breaks the group: the ranks are out of step from then on, so later works fail at once
 * with the first failure's story rather than wait for a timeout each.
 *
 * A synchronous collective submitted while the queue is empty and no work runs is run by the
 * program's thread itself (ct__dist_submit_sync): it would only wait for the thread anyway, and
 * the hand-over there and back cost 10-15 us per collective. d->busy, under the queue's lock, says
 * that some thread runs a work; only the thread that set it makes MPI calls until it clears it, so
 * the calls stay serialized and in queue order on every rank (a work is run inline only when it is
 * the next one in the queue's order). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cltensor/autograd.h"
#include "core/env.h"
#include "core/error.h"
#include "dist/dist.h"

enum { CT__DEFAULT_TIMEOUT_MS = 30 * 60 * 1000 };
/* 1 MiB: a chunk and the half of it an all-reduce receives stay within a core's L2 (1 MiB here).
 * Measured in session 19 (2 ranks, PoCL, docs/DISTRIBUTED.md): against 4 MiB chunks, 4 MiB
 * all-reduces went from 0.70-0.76x to 0.79-0.86x of MPI_Allreduce, 16 MiB staged ones from 0.64x
 * to 0.80x; below 1 MiB nothing changes (one chunk either way). */
#define CT__DEFAULT_CHUNK ((size_t)1 << 20)

int64_t ct__dist_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool ct_dist_is_mpi_available(void) {
#ifdef CT_HAVE_MPI
  return true;
#else
  return false;
#endif
}

/* ---- works ---- */

static void ct__cond_init_monotonic(pthread_cond_t *c) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

struct ct_dist_work *ct__dist_work_new(struct ct_dist *d, enum ct__dist_kind kind, const char *fn, int nt) {
  struct ct_dist_work *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->t = calloc((size_t)(nt > 0 ? nt : 1), sizeof *w->t);
  w->out = calloc((size_t)(nt > 0 ? nt : 1), sizeof *w->out);
  if (!w->t || !w->out) {
    free(w->t);
    free(w->out);
    free(w);
    return NULL;
  }
  atomic_init(&w->refs, 1);
  w->d = d;
  w->kind = kind;
  w->fn = fn;
  w->nt = nt;
  pthread_mutex_init(&w->lock, NULL);
  ct__cond_init_monotonic(&w->cond);
  return w;
}

static void ct__work_drop_tensors(struct ct_dist_work *w) {
  for (int i = 0; i < w->nt; i++) {
    ct_release(w->t[i]);
    ct_release(w->out[i]);
    w->t[i] = w->out[i] = NULL;
  }
}

void ct_dist_work_release(ct_dist_work *w) {
  if (!w || atomic_fetch_sub(&w->refs, 1) != 1) return;
  ct__work_drop_tensors(w);
  free(w->t);
  free(w->out);
  free(w->msg);
  pthread_mutex_destroy(&w->lock);
  pthread_cond_destroy(&w->cond);
  free(w);
}

static void ct__work_finish(struct ct_dist_work *w, ct_status st, const char *msg) {
  char *m = st != CT_OK ? strdup(msg ? msg : "") : NULL;
  /* The tensors go before done is set: a program that waited may free everything at once. */
  ct__work_drop_tensors(w);
  pthread_mutex_lock(&w->lock);
  if (w->waiters) atomic_fetch_sub(&w->d->waiting, w->waiters);
  w->waiters = 0;
  w->status = st;
  w->msg = m;
  w->done = true;
  w->d = NULL;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

ct_status ct_dist_wait(ct_dist_work *w, int timeout_ms) {
  CT__CHECK_NOT_NULL("ct_dist_wait", w);
  pthread_mutex_lock(&w->lock);
  if (!w->done && timeout_ms != 0) {
    /* w->d is valid until done; the completion takes this waiter off d->waiting. */
    struct ct_dist *d = w->d;
    w->waiters++;
    atomic_fetch_add(&d->waiting, 1);
    if (timeout_ms < 0) {
      while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
    } else {
      int64_t end = ct__dist_now_ns() + (int64_t)timeout_ms * 1000000;
      struct timespec ts = {(time_t)(end / 1000000000), (long)(end % 1000000000)};
      while (!w->done && pthread_cond_timedwait(&w->cond, &w->lock, &ts) != ETIMEDOUT) {
      }
    }
    if (!w->done) {
      w->waiters--;
      atomic_fetch_sub(&d->waiting, 1);
    }
  }
  bool done = w->done;
  ct_status st = w->status;
  pthread_mutex_unlock(&w->lock);
  if (!done)
    return ct__error(CT_ERR_DIST, "ct_dist_wait: the %s is not finished after %d ms (it goes on: wait again)", w->fn,
                     timeout_ms);
  /* msg is written once, before done: no lock needed to read it now. */
  if (st != CT_OK) return ct__error(st, "%s", w->msg);
  return CT_OK;
}

bool ct_dist_work_is_done(const ct_dist_work *w) {
  if (!w) return false;
  pthread_mutex_lock((pthread_mutex_t *)&w->lock);
  bool done = w->done;
  pthread_mutex_unlock((pthread_mutex_t *)&w->lock);
  return done;
}

/* ---- the communication thread ---- */

void ct__dist_break(struct ct_dist *d, ct_status st) {
  pthread_mutex_lock(&d->lock);
  if (!atomic_load(&d->broken)) {
    d->broken_msg = strdup(ct_last_error());
    atomic_store(&d->broken, (int)st);
  }
  pthread_mutex_unlock(&d->lock);
}

static void *ct__dist_thread(void *arg) {
  struct ct_dist *d = arg;
  ct_set_grad_enabled(false);
  pthread_mutex_lock(&d->lock);
  for (;;) {
    /* A caller running a collective itself (busy) is waited for even when stopping: two threads
     * must never make MPI calls at once. */
    while (d->busy || (!d->head && !d->stop)) pthread_cond_wait(&d->cond, &d->lock);
    struct ct_dist_work *w = d->head;
    if (!w) break; /* stop, and the queue is empty */
    d->busy = true;
    d->head = w->next;
    if (!d->head) d->tail = NULL;
    bool broken = atomic_load(&d->broken) != 0;
    d->cur_timeout_ms = d->timeout_ms;
    w->check = w->check && d->checks;
    pthread_mutex_unlock(&d->lock);
    ct_status st;
    if (broken) {
      st = ct__error(CT_ERR_DIST, "%s: the process group is broken by an earlier failure: %s", w->fn,
                     d->broken_msg ? d->broken_msg : "");
    } else {
      d->deadline_ns = ct__dist_now_ns() + (int64_t)d->cur_timeout_ms * 1000000;
      st = ct__dist_run(d, w);
      if (st != CT_OK && !d->local) ct__dist_break(d, st);
    }
    ct__work_finish(w, st, st != CT_OK ? ct_last_error() : NULL);
    ct_dist_work_release(w);
    pthread_mutex_lock(&d->lock);
    d->busy = false;
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

ct_status ct__dist_submit(struct ct_dist *d, struct ct_dist_work *w) {
  pthread_mutex_lock(&d->lock);
  if (atomic_load(&d->broken)) {
    ct_status st = ct__error(CT_ERR_DIST, "%s: the process group is broken by an earlier failure: %s", w->fn,
                             d->broken_msg ? d->broken_msg : "");
    pthread_mutex_unlock(&d->lock);
    return st;
  }
  w->seq = d->next_seq++;
  atomic_fetch_add(&w->refs, 1); /* the thread's */
  w->next = NULL;
  if (d->tail) d->tail->next = w;
  else d->head = w;
  d->tail = w;
  pthread_cond_signal(&d->cond);
  pthread_mutex_unlock(&d->lock);
  return CT_OK;
}

ct_status ct__dist_submit_sync(struct ct_dist *d, struct ct_dist_work *w) {
  pthread_mutex_lock(&d->lock);
  if (atomic_load(&d->broken) || d->head || d->busy) {
    pthread_mutex_unlock(&d->lock);
    return ct__dist_submit(d, w);
  }
  /* The communication thread is idle and nothing is queued: this thread takes its role. */
  d->busy = true;
  w->seq = d->next_seq++;
  d->cur_timeout_ms = d->timeout_ms;
  w->check = w->check && d->checks;
  pthread_mutex_unlock(&d->lock);
  /* As on the communication thread: grad mode off (its views and copies are never recorded), and
   * MPI polled back to back (the program waits for this work). */
  bool grad = ct_set_grad_enabled(false);
  atomic_fetch_add(&d->waiting, 1);
  d->deadline_ns = ct__dist_now_ns() + (int64_t)d->cur_timeout_ms * 1000000;
  ct_status st = ct__dist_run(d, w);
  if (st != CT_OK && !d->local) ct__dist_break(d, st);
  atomic_fetch_sub(&d->waiting, 1);
  ct_set_grad_enabled(grad);
  ct__work_finish(w, st, st != CT_OK ? ct_last_error() : NULL);
  pthread_mutex_lock(&d->lock);
  d->busy = false;
  pthread_cond_broadcast(&d->cond); /* works queued meanwhile by other threads, or a stop waiting */
  pthread_mutex_unlock(&d->lock);
  return CT_OK;
}

/* ---- construction ---- */

static ct_status ct__env_int(const char *name, long long lo, long long hi, long long dflt, long long *out,
                             const char *fn) {
  *out = dflt;
  const char *v = getenv(name);
  if (!v || !*v) return CT_OK;
  char *end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end || x < lo || x > hi) {
    char esc[96];
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: $%s='%s' is not an integer in [%lld, %lld]", fn, name,
                     ct__escape(esc, sizeof esc, v), lo, hi);
  }
  *out = x;
  return CT_OK;
}

static ct_status ct__dist_alloc(struct ct_dist **out, const char *fn) {
  *out = NULL;
  long long tmo, chunk;
  CT__TRY(ct__env_int("CLTENSOR_DIST_TIMEOUT_MS", 1, INT_MAX, CT__DEFAULT_TIMEOUT_MS, &tmo, fn));
  CT__TRY(ct__env_int("CLTENSOR_DIST_CHUNK_BYTES", 64, (long long)1 << 28, (long long)CT__DEFAULT_CHUNK, &chunk, fn));
  bool zero_copy;
  CT__TRY(ct__env_bool(fn, "CLTENSOR_DIST_ZERO_COPY", false, &zero_copy));
  const char *zc = getenv("CLTENSOR_DIST_ZERO_COPY");
  struct ct_dist *d = calloc(1, sizeof *d);
  if (!d) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  d->timeout_ms = (int)tmo;
  d->chunk_bytes = (size_t)chunk;
  d->zero_copy = zc && *zc ? zero_copy : -1; /* unset: mapped.c decides by the device */
  d->checks = true;
  pthread_mutex_init(&d->lock, NULL);
  pthread_cond_init(&d->cond, NULL);
  *out = d;
  return CT_OK;
}

static void ct__dist_dealloc(struct ct_dist *d) {
  for (int s = 0; s < 3; s++) {
    /* ct_event_free waits for a write still pending from the slot before its memory goes. */
    for (int i = 0; i < d->slots[s].nwev; i++) ct_event_free(d->slots[s].wev[i]);
    free(d->slots[s].wev);
    ct_pinned_free(d->slots[s].mem);
  }
  free(d->scratch);
  pthread_mutex_destroy(&d->lock);
  pthread_cond_destroy(&d->cond);
  free(d->broken_msg);
  free(d->devs);
  free(d);
}

static ct_status ct__dist_start(struct ct_dist *d, const char *fn) {
  int rc = pthread_create(&d->thread, NULL, ct__dist_thread, d);
  if (rc != 0) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: pthread_create of the communication thread failed: %s", fn,
                                strerror(rc));
  d->thread_started = true;
  return CT_OK;
}

static ct_status ct__dist_open_mpi(ct_dist **out, int *argc, char ***argv, const void *comm, size_t comm_size,
                                   const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  struct ct_dist *d;
  CT__TRY(ct__dist_alloc(&d, fn));
  ct_status st = ct__mpi_open(d, argc, argv, comm, comm_size, fn);
  if (st == CT_OK) {
    st = ct__dist_start(d, fn);
    if (st != CT_OK) ct__mpi_close(d, true);
  }
  if (st != CT_OK) {
    ct__dist_dealloc(d);
    return st;
  }
  *out = d;
  return CT_OK;
}

ct_status ct_dist_init(ct_dist **out, int *argc, char ***argv) {
  return ct__dist_open_mpi(out, argc, argv, NULL, 0, "ct_dist_init");
}

ct_status ct_dist_from_comm_handle(ct_dist **out, const void *comm, size_t comm_size) {
  if (!comm) return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_dist_from_comm: argument 'comm' is NULL");
  return ct__dist_open_mpi(out, NULL, NULL, comm, comm_size, "ct_dist_from_comm");
}

ct_status ct_dist_from_devices(ct_dist **out, ct_device *const *devs, int n) {
  const char *fn = "ct_dist_from_devices";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, devs);
  if (n < 1) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %d; a group needs at least one device", fn, n);
  for (int i = 0; i < n; i++) {
    if (!devs[i]) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: device %d is NULL", fn, i);
    for (int j = 0; j < i; j++)
      if (devs[j] == devs[i])
        return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: device %d (%s) is device %d again; each device is one rank", fn,
                         i, ct_device_spec(devs[i]), j);
    CT__TRY(ct_device_open(devs[i]));
  }
  struct ct_dist *d;
  CT__TRY(ct__dist_alloc(&d, fn));
  d->local = true;
  d->size = d->nlocal = n;
  d->devs = malloc((size_t)n * sizeof *d->devs);
  ct_status st = d->devs ? CT_OK : ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (st == CT_OK) {
    memcpy(d->devs, devs, (size_t)n * sizeof *devs);
    st = ct__dist_start(d, fn);
  }
  if (st != CT_OK) {
    ct__dist_dealloc(d);
    return st;
  }
  *out = d;
  return CT_OK;
}

void ct_dist_free(ct_dist *d) {
  if (!d) return;
  pthread_mutex_lock(&d->lock);
  d->stop = true;
  pthread_cond_signal(&d->cond);
  pthread_mutex_unlock(&d->lock);
  if (d->thread_started) pthread_join(d->thread, NULL);
  if (!d->local) ct__mpi_close(d, atomic_load(&d->broken) == 0);
  ct__dist_dealloc(d);
}

int ct_dist_rank(const ct_dist *d) { return d ? d->rank : -1; }
int ct_dist_size(const ct_dist *d) { return d ? d->size : -1; }
int ct_dist_local_rank(const ct_dist *d) { return d ? d->local_rank : -1; }
int ct_dist_local_count(const ct_dist *d) { return d ? d->nlocal : -1; }
bool ct_dist_is_local(const ct_dist *d) { return d && d->local; }

ct_status ct_dist_device(ct_device **out, const ct_dist *d) {
  CT__CHECK_NOT_NULL("ct_dist_device", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_dist_device", d);
  if (d->local) {
    *out = d->devs[0];
    return CT_OK;
  }
  const char *spec = getenv("CLTENSOR_DEVICE");
  if (spec && *spec) return ct_device_find(out, spec);
  int count = 0;
  CT__TRY(ct_device_count(&count));
  if (count < 1) return ct__error(CT_ERR_DEVICE_NOT_FOUND, "ct_dist_device: no OpenCL device");
  return ct_device_get(out, d->local_rank % count);
}

ct_status ct_dist_device_at(ct_device **out, const ct_dist *d, int i) {
  CT__CHECK_NOT_NULL("ct_dist_device_at", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_dist_device_at", d);
  if (i < 0 || i >= d->nlocal)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_dist_device_at: i %d is out of range for %d local device(s)", i,
                     d->nlocal);
  if (!d->local) return ct_dist_device(out, d);
  *out = d->devs[i];
  return CT_OK;
}

ct_status ct_dist_set_timeout(ct_dist *d, int timeout_ms) {
  CT__CHECK_NOT_NULL("ct_dist_set_timeout", d);
  if (timeout_ms <= 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_dist_set_timeout: timeout_ms is %d; it must be > 0", timeout_ms);
  /* Read by the communication thread when a work starts; a plain int store is enough there,
   * under the queue's lock so it is ordered with the works queued after it. */
  pthread_mutex_lock(&d->lock);
  d->timeout_ms = timeout_ms;
  pthread_mutex_unlock(&d->lock);
  return CT_OK;
}

ct_status ct_dist_set_checks(ct_dist *d, bool on) {
  CT__CHECK_NOT_NULL("ct_dist_set_checks", d);
  pthread_mutex_lock(&d->lock);
  d->checks = on;
  pthread_mutex_unlock(&d->lock);
  return CT_OK;
}
