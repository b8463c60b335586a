/* The public collectives: argument checks, works, and the staging pipeline.
 *
 * The pipeline. A collective's values go device -> host -> (MPI, or the host reduction of a
 * device group) -> host -> device in chunks of CLTENSOR_DIST_CHUNK_BYTES (1 MiB by default)
 * through three slots of pinned host memory. Step k enqueues the device-to-host reads of chunk k
 * (non-blocking), then waits for the reads of chunk k-1, runs the MPI call on it and enqueues its
 * host-to-device writes (non-blocking). So while MPI works on chunk k-1, the read of chunk k and
 * the write of chunk k-2 run on the device's queue. A slot is refilled three chunks later; the
 * device's queue is in order, so its earlier write (which reads the slot) has finished before the
 * new read (which fills it) starts.
 *
 * An MPI group does not wait for the last chunk's writes before the work is done: its one device's
 * in-order queue runs every later command (the program's reads of the result, the next work's
 * reads into the slot) after them, and the wait was one ~25 us round trip through PoCL's queue per
 * collective. They stay with the slot (ct__dist_slot.wev) and are waited for before the host
 * touches the slot again or frees it; a failure is reported by the device's next blocking call
 * (every write is tracked as a kernel is, ct__event_track) and by that wait. A device group's
 * devices have a queue each, so it waits for every write before the work is done.
 *
 * Tensors that are not contiguous go through a contiguous copy (made on the communication
 * thread, copied back into t at the end). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "dist/dist.h"

const char *ct__dist_kind_name(enum ct__dist_kind k) {
  switch (k) {
    case CT__DK_ALL_REDUCE: return "all_reduce";
    case CT__DK_BROADCAST: return "broadcast";
    case CT__DK_ALL_GATHER: return "all_gather";
    case CT__DK_REDUCE_SCATTER: return "reduce_scatter";
    case CT__DK_BARRIER: return "barrier";
    case CT__DK_SEND: return "send";
    case CT__DK_RECV: return "recv";
  }
  return "?";
}

/* ---- the pipeline (the thread holding d->busy) ---- */

struct ct__pipe {
  struct ct_dist *d;
  struct ct_dist_work *w;
  ct_dtype dt, wt;
  size_t es, wes;
  bool conv;    /* f16/bf16: values convert to f32 on the host */
  int W;        /* group size */
  int N;        /* tensors of this process: 1, or the devices of a device group */
  int64_t unit; /* elements chunked over (per rank) */
  int64_t c;    /* chunk, elements */
  int64_t nch;
  ct_tensor **src; /* N flat contiguous views of the inputs (or copies) */
  ct_tensor **dst; /* N flat contiguous views of the outputs (in place: src) */
  ct_tensor **tmp; /* N contiguous copies for non-contiguous in-place tensors, or NULL */
  int64_t S, R;    /* elements per slot: send side, receive side */
  unsigned char *sb[3], *rb[3], *wi[3], *wo[3];
  ct_event **rev[3];
  int nrev[3], caprev;
};

static int64_t ct__pipe_len(const struct ct__pipe *pp, int64_t k) {
  int64_t rest = pp->unit - k * pp->c;
  return rest < pp->c ? rest : pp->c;
}

/* Enqueues the copy between elements [off, off + len) of flat and host (to the host when
 * to_host; host is then written) and appends its event to evs (the caller made room). */
static ct_status ct__pipe_copy(struct ct__pipe *pp, ct_tensor *flat, int64_t off, int64_t len, const void *host,
                               bool to_host, ct_event **evs, int *n) {
  ct_tensor *v = NULL;
  CT__TRY(ct_slice(&v, flat, 0, off, off + len, 1));
  ct_event *ev = NULL;
  size_t bytes = (size_t)len * pp->es;
  ct_status st = to_host ? ct_to_host_async(&ev, v, (void *)host, bytes) : ct_copy_from_host_async(&ev, v, host, bytes);
  ct_release(v);
  if (st != CT_OK) return st;
  evs[(*n)++] = ev;
  return CT_OK;
}

static ct_status ct__pipe_read(struct ct__pipe *pp, int s, ct_tensor *flat, int64_t off, int64_t len, void *host) {
  if (len == 0) return CT_OK;
  if (pp->nrev[s] == pp->caprev)
    return ct__error(CT_ERR_INTERNAL, "%s: more reads per chunk than planned", pp->w->fn);
  return ct__pipe_copy(pp, flat, off, len, host, true, pp->rev[s], &pp->nrev[s]);
}

static ct_status ct__pipe_write(struct ct__pipe *pp, int s, ct_tensor *flat, int64_t off, int64_t len,
                                const void *host) {
  if (len == 0) return CT_OK;
  struct ct__dist_slot *sl = &pp->d->slots[s];
  if (sl->nwev == sl->capwev) {
    int cap = sl->capwev ? 2 * sl->capwev : 16;
    ct_event **v = realloc(sl->wev, (size_t)cap * sizeof *v);
    if (!v) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", pp->w->fn);
    sl->wev = v;
    sl->capwev = cap;
  }
  CT__TRY(ct__pipe_copy(pp, flat, off, len, host, false, sl->wev, &sl->nwev));
  /* An MPI group leaves the last chunk's writes pending (ct__dist_slot_wait at the next use of the
   * slot): tracked, a failure is reported by the device's next blocking call meanwhile. */
  if (!pp->d->local) ct__event_track(sl->wev[sl->nwev - 1]);
  return CT_OK;
}

/* Waits for and frees the *n events of evs, then empties the list; st, or the first failure
 * when st is CT_OK (every event is waited for either way). Each event's own status only: the
 * slot's writes may be waited for at the next collective (on the communication thread, during a
 * backward), and a failure of a kernel the program enqueued meanwhile is the program's to see at
 * its next blocking call, not this collective's (the writes are tracked, so the device still
 * reports theirs). */
static ct_status ct__pipe_wait_events(ct_event **evs, int *n, ct_status st) {
  for (int i = 0; i < *n; i++) {
    ct_status e = ct__event_wait_own(evs[i]);
    if (st == CT_OK) st = e;
    ct_event_free(evs[i]);
  }
  *n = 0;
  return st;
}

static ct_status ct__pipe_wait_reads(struct ct__pipe *pp, int s) {
  return ct__pipe_wait_events(pp->rev[s], &pp->nrev[s], CT_OK);
}

/* Waits for the writes out of slot s. On one device the in-order queue would run them before a
 * later read refills the slot anyway, but a device group's devices have a queue each, and the
 * host itself writes some slots (MPI's receive of a broadcast or recv). */
ct_status ct__dist_slot_wait(struct ct_dist *d, int s, ct_status st) {
  struct ct__dist_slot *sl = &d->slots[s];
  return ct__pipe_wait_events(sl->wev, &sl->nwev, st);
}

/* Enqueues the reads of chunk k into slot s (once the slot's earlier writes are done). */
static ct_status ct__pipe_reads(struct ct__pipe *pp, int64_t k, int s) {
  struct ct_dist_work *w = pp->w;
  CT__TRY(ct__dist_slot_wait(pp->d, s, CT_OK));
  int64_t off = k * pp->c, len = ct__pipe_len(pp, k);
  size_t cb = (size_t)pp->c * pp->es; /* bytes of one chunk-sized part of a slot */
  ct_status st = CT_OK;
  switch (w->kind) {
    case CT__DK_BROADCAST:
      if (pp->d->local) st = ct__pipe_read(pp, s, pp->src[w->peer], off, len, pp->sb[s]);
      else if (pp->d->rank == w->peer) st = ct__pipe_read(pp, s, pp->src[0], off, len, pp->sb[s]);
      break;
    case CT__DK_RECV: break;
    case CT__DK_REDUCE_SCATTER:
      for (int j = 0; j < pp->N && st == CT_OK; j++)
        for (int i = 0; i < pp->W && st == CT_OK; i++)
          st = ct__pipe_read(pp, s, pp->src[j], i * pp->unit + off, len, pp->sb[s] + ((size_t)j * pp->W + i) * cb);
      break;
    default: /* all_reduce, all_gather, send: every tensor's chunk, side by side */
      for (int j = 0; j < pp->N && st == CT_OK; j++) st = ct__pipe_read(pp, s, pp->src[j], off, len, pp->sb[s] + j * cb);
      break;
  }
  if (st == CT_OK)
    for (int j = 0; j < pp->N; j++) clFlush(ct__device_queue(pp->d->local ? pp->d->devs[j] : pp->src[0]->storage->device));
  return st;
}

/* The communication of chunk k in slot s (its reads done), then its writes enqueued. */
static ct_status ct__pipe_step(struct ct__pipe *pp, int64_t k, int s) {
  struct ct_dist *d = pp->d;
  struct ct_dist_work *w = pp->w;
  const char *fn = w->fn;
  int64_t off = k * pp->c, len = ct__pipe_len(pp, k);
  size_t n = (size_t)len, cb = (size_t)pp->c * pp->es, wcb = (size_t)pp->c * pp->wes;
  unsigned char *sb = pp->sb[s], *rb = pp->rb[s], *wi = pp->wi[s], *wo = pp->wo[s];
  bool avg = w->op == CT_DIST_AVG;
  switch (w->kind) {
    case CT__DK_ALL_REDUCE: {
      unsigned char *v = pp->conv ? wi : sb;
      if (pp->conv)
        for (int j = 0; j < pp->N; j++) ct__dist_to_wire(pp->dt, wi + j * wcb, sb + j * cb, n);
      if (d->local) {
        for (int j = 1; j < pp->N; j++) ct__dist_reduce(pp->wt, w->op, v, v + j * (pp->conv ? wcb : cb), n);
      } else {
        CT__TRY(ct__mpi_all_reduce(d, v, pp->conv ? wo : rb, n, pp->wt, w->op, fn));
      }
      if (avg) ct__dist_divide(pp->wt, v, n, pp->W);
      if (pp->conv) ct__dist_from_wire(pp->dt, sb, wi, n);
      for (int j = 0; j < pp->N; j++) CT__TRY(ct__pipe_write(pp, s, pp->dst[j], off, len, sb));
      return CT_OK;
    }
    case CT__DK_BROADCAST:
      if (d->local) {
        for (int j = 0; j < pp->N; j++)
          if (j != w->peer) CT__TRY(ct__pipe_write(pp, s, pp->dst[j], off, len, sb));
        return CT_OK;
      }
      CT__TRY(ct__mpi_broadcast(d, sb, n * pp->es, w->peer, fn));
      if (d->rank != w->peer) CT__TRY(ct__pipe_write(pp, s, pp->dst[0], off, len, sb));
      return CT_OK;
    case CT__DK_ALL_GATHER: {
      /* Part i of the gathered chunk is rank i's: local groups have it in sb, MPI puts it in rb. */
      const unsigned char *g = sb;
      if (!d->local) {
        CT__TRY(ct__mpi_all_gather(d, sb, rb, n * pp->es, fn));
        g = rb;
      }
      size_t stride = d->local ? cb : n * pp->es; /* MPI packs the parts at the chunk's real length */
      for (int j = 0; j < pp->N; j++)
        for (int i = 0; i < pp->W; i++) CT__TRY(ct__pipe_write(pp, s, pp->dst[j], i * pp->unit + off, len, g + i * stride));
      return CT_OK;
    }
    case CT__DK_REDUCE_SCATTER: {
      /* sb holds, per tensor j, the W parts of the chunk at (j * W + i) * cb. */
      int parts = pp->N * pp->W;
      unsigned char *v = pp->conv ? wi : sb;
      size_t vb = pp->conv ? wcb : cb;
      if (pp->conv)
        for (int p = 0; p < parts; p++) ct__dist_to_wire(pp->dt, wi + p * wcb, sb + p * cb, n);
      if (d->local) {
        for (int i = 0; i < pp->W; i++) {
          for (int j = 1; j < pp->N; j++)
            ct__dist_reduce(pp->wt, w->op, v + i * vb, v + ((size_t)j * pp->W + i) * vb, n);
          if (avg) ct__dist_divide(pp->wt, v + i * vb, n, pp->W);
          if (pp->conv) ct__dist_from_wire(pp->dt, sb + i * cb, v + i * vb, n);
          CT__TRY(ct__pipe_write(pp, s, pp->dst[i], off, len, sb + i * cb));
        }
        return CT_OK;
      }
      /* MPI wants the parts packed at the chunk's real length: close the gaps of a short last
       * chunk (memmove: the parts only move down). */
      if (n * (pp->conv ? pp->wes : pp->es) != vb)
        for (int i = 1; i < pp->W; i++) memmove(v + i * n * (vb / (size_t)pp->c), v + i * vb, n * (vb / (size_t)pp->c));
      unsigned char *r = pp->conv ? wo : rb;
      CT__TRY(ct__mpi_reduce_scatter(d, v, r, n, pp->wt, w->op, fn));
      if (avg) ct__dist_divide(pp->wt, r, n, pp->W);
      if (pp->conv) ct__dist_from_wire(pp->dt, rb, wo, n);
      return ct__pipe_write(pp, s, pp->dst[0], off, len, rb);
    }
    case CT__DK_SEND: return ct__mpi_send(d, sb, n * pp->es, w->peer, fn);
    case CT__DK_RECV:
      CT__TRY(ct__mpi_recv(d, sb, n * pp->es, w->peer, fn));
      return ct__pipe_write(pp, s, pp->dst[0], off, len, sb);
    case CT__DK_BARRIER: break;
  }
  return CT_OK;
}

/* Slot memory: three slots of pinned memory on the first tensor's device, kept by the group. */
static ct_status ct__pipe_slots(struct ct__pipe *pp) {
  struct ct_dist *d = pp->d;
  size_t sbytes = (size_t)pp->S * pp->es, rbytes = (size_t)pp->R * pp->es;
  size_t wib = pp->conv ? (size_t)pp->S * pp->wes : 0, wob = pp->conv ? (size_t)pp->R * pp->wes : 0;
  /* Each part 64-byte aligned. */
#define CT__AL(x) (((x) + 63) & ~(size_t)63)
  size_t need = CT__AL(sbytes) + CT__AL(rbytes) + CT__AL(wib) + CT__AL(wob);
  ct_device *dev = pp->src[0]->storage->device;
  for (int s = 0; s < 3; s++) {
    struct ct__dist_slot *sl = &d->slots[s];
    if (!sl->mem || sl->cap < need || sl->device != dev) {
      CT__TRY(ct__dist_slot_wait(d, s, CT_OK)); /* no write may still read the memory */
      ct_pinned_free(sl->mem);
      sl->mem = NULL;
      sl->cap = 0;
      CT__TRY(ct_pinned_alloc(&sl->mem, dev, need));
      sl->cap = need;
      sl->device = dev;
    }
    unsigned char *b = ct_pinned_ptr(sl->mem);
    pp->sb[s] = b;
    pp->rb[s] = b + CT__AL(sbytes);
    pp->wi[s] = pp->rb[s] + CT__AL(rbytes);
    pp->wo[s] = pp->wi[s] + CT__AL(wib);
  }
#undef CT__AL
  return CT_OK;
}

/* A flat contiguous view of t (through a copy when t is not contiguous; *tmp then holds it). */
static ct_status ct__flat(ct_tensor **out, ct_tensor **tmp, ct_tensor *t, bool copy_in) {
  *out = NULL;
  int64_t n = ct_numel(t);
  ct_tensor *c = t;
  if (!ct_tensor_is_contiguous(t)) {
    CT__TRY(copy_in ? ct_contiguous(&c, t) : ct_empty(&c, t->storage->device, t->dtype, t->ndim, t->shape));
    *tmp = c;
  }
  return ct_view(out, c, 1, &n);
}

static ct_status ct__pipe_run(struct ct__pipe *pp) {
  ct_status st = CT_OK;
  int64_t k = 0;
  for (k = 0; k <= pp->nch && st == CT_OK; k++) {
    if (k < pp->nch) st = ct__pipe_reads(pp, k, (int)(k % 3));
    if (st == CT_OK && k >= 1) {
      st = ct__pipe_wait_reads(pp, (int)((k - 1) % 3));
      if (st == CT_OK) st = ct__pipe_step(pp, k - 1, (int)((k - 1) % 3));
    }
  }
  /* Whatever happened, no read may still fill a slot when the host reuses it. The writes too,
   * unless this is an MPI group that succeeded (the file's comment): then they stay pending. */
  for (int s = 0; s < 3; s++) {
    ct_status e = ct__pipe_wait_reads(pp, s);
    if (st == CT_OK) st = e;
  }
  bool defer = st == CT_OK && !pp->d->local;
  for (int s = 0; s < 3; s++) {
    if (!defer) st = ct__dist_slot_wait(pp->d, s, st);
  }
  return st;
}

ct_status ct__dist_run(struct ct_dist *d, struct ct_dist_work *w) {
  const ct_tensor *t0 = w->kind == CT__DK_BARRIER ? NULL : w->t[0];
  size_t bytes = t0 ? ct_tensor_nbytes(t0) : 0;
  snprintf(d->what, sizeof d->what, "%s #%llu of %zu bytes", ct__dist_kind_name(w->kind),
           (unsigned long long)w->seq, bytes);
  if (!d->local && w->check && w->kind != CT__DK_SEND && w->kind != CT__DK_RECV) {
    static const char *const names[] = {"collective", "position in the queue", "dtype", "element count", "op",
                                        "root"};
    int64_t f[6] = {w->kind, (int64_t)w->seq, t0 ? (int64_t)t0->dtype : -1, t0 ? ct_numel(t0) : 0,
                    w->kind == CT__DK_ALL_REDUCE || w->kind == CT__DK_REDUCE_SCATTER ? (int64_t)w->op : -1,
                    w->kind == CT__DK_BROADCAST ? w->peer : -1};
    CT__TRY(ct__mpi_agree(d, f, names, 6, w->fn));
  }
  if (w->kind == CT__DK_BARRIER) return d->local ? CT_OK : ct__mpi_barrier(d, w->fn);
  if (ct__dist_mapped_ok(d, w)) return ct__dist_mapped_run(d, w);

  if (w->kind == CT__DK_SEND || w->kind == CT__DK_RECV) {
    /* A header first, so that a receive of another dtype or size is an error, not garbage. */
    int64_t hdr[2] = {t0->dtype, ct_numel(t0)}, got[2] = {0, 0};
    if (w->kind == CT__DK_SEND) {
      CT__TRY(ct__mpi_send(d, hdr, sizeof hdr, w->peer, w->fn));
    } else {
      CT__TRY(ct__mpi_recv(d, got, sizeof got, w->peer, w->fn));
      if (got[0] != hdr[0] || got[1] != hdr[1])
        return ct__error(CT_ERR_DIST, "%s: rank %d sent %lld elements of %s, but this rank (%d) receives %lld of %s",
                         w->fn, w->peer, (long long)got[1], ct_dtype_name((ct_dtype)got[0]), d->rank,
                         (long long)hdr[1], ct_dtype_name(t0->dtype));
    }
  }

  struct ct__pipe pp = {.d = d, .w = w, .dt = t0->dtype, .W = d->size, .N = w->nt};
  pp.es = ct_dtype_size(pp.dt);
  pp.wt = ct__dist_wire(pp.dt);
  pp.wes = ct_dtype_size(pp.wt);
  pp.conv = pp.wt != pp.dt;
  int64_t numel = ct_numel(t0);
  pp.unit = w->kind == CT__DK_REDUCE_SCATTER ? numel / pp.W : numel;
  size_t cbytes = d->chunk_bytes / (pp.conv ? pp.wes : pp.es);
  pp.c = cbytes > 0 ? (int64_t)cbytes : 1;
  pp.nch = pp.unit == 0 ? 0 : (pp.unit + pp.c - 1) / pp.c;
  if (pp.nch == 0) return CT_OK;
  int N = pp.N, W = pp.W;
  switch (w->kind) {
    case CT__DK_ALL_REDUCE:
      pp.S = N * pp.c;
      pp.R = d->local ? 0 : pp.c; /* the peer's part in MPI's exchanges (mpi.c) */
      break;
    case CT__DK_BROADCAST:
    case CT__DK_SEND:
    case CT__DK_RECV: pp.S = pp.c; break;
    case CT__DK_ALL_GATHER:
      pp.S = N * pp.c;
      pp.R = d->local ? 0 : W * pp.c;
      break;
    case CT__DK_REDUCE_SCATTER:
      pp.S = (int64_t)N * W * pp.c;
      pp.R = pp.c;
      break;
    default: break;
  }
  pp.caprev = N * W + 1;
  ct_tensor *arrays[3 * 16];
  ct_tensor **mem = N <= 16 ? arrays : calloc((size_t)3 * N, sizeof *mem);
  ct_event **revs = calloc((size_t)3 * pp.caprev, sizeof *revs);
  if (!mem || !revs) {
    if (mem != arrays) free(mem);
    free(revs);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", w->fn);
  }
  memset(mem, 0, (size_t)3 * N * sizeof *mem);
  for (int s = 0; s < 3; s++) pp.rev[s] = revs + s * pp.caprev;
  pp.src = mem;
  pp.dst = mem + N;
  pp.tmp = mem + 2 * N;
  bool in_place = w->kind == CT__DK_ALL_REDUCE || w->kind == CT__DK_BROADCAST || w->kind == CT__DK_RECV;
  ct_status st = CT_OK;
  for (int j = 0; j < N && st == CT_OK; j++) {
    bool copy_in = w->kind != CT__DK_RECV;
    st = ct__flat(&pp.src[j], &pp.tmp[j], w->t[j], copy_in);
    if (st == CT_OK) {
      if (in_place) pp.dst[j] = ct_retain(pp.src[j]);
      else if (w->kind == CT__DK_ALL_GATHER || w->kind == CT__DK_REDUCE_SCATTER) {
        int64_t on = ct_numel(w->out[j]);
        st = ct_view(&pp.dst[j], w->out[j], 1, &on);
      }
    }
  }
  if (st == CT_OK) st = ct__pipe_slots(&pp);
  if (st == CT_OK) st = ct__pipe_run(&pp);
  /* Copy the results back into non-contiguous in-place tensors. */
  for (int j = 0; j < N && st == CT_OK; j++)
    if (pp.tmp[j] && in_place) st = ct_copy(w->t[j], pp.tmp[j]);
  for (int j = 0; j < N; j++) {
    ct_release(pp.src[j]);
    ct_release(pp.dst[j]);
    ct_release(pp.tmp[j]);
  }
  if (mem != arrays) free(mem);
  free(revs);
  return st;
}

/* ---- submission (the program's thread) ---- */

static bool ct__reduces(enum ct__dist_kind k) { return k == CT__DK_ALL_REDUCE || k == CT__DK_REDUCE_SCATTER; }

/* Checks the arguments, makes the outputs, queues the work. ts: nt tensors. sync: the caller
 * waits for the work at once, so it may run it itself (ct__dist_submit_sync). */
static ct_status ct__queue_checked(ct_dist_work **work, ct_tensor **outs, struct ct_dist *d, enum ct__dist_kind kind,
                                   const char *fn, ct_tensor *const *ts, int nt, ct_dist_op op, int peer, bool check,
                                   bool sync) {
  char sa[200], sb[200];
  CT__CHECK_NOT_NULL(fn, work);
  *work = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  if (kind != CT__DK_BARRIER) {
    if (!ts) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 'ts' is NULL", fn);
    if (nt != d->nlocal)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: this is a group of %d devices in one process: pass one tensor per device to the _multi "
                       "form (ct_dist_all_reduce_multi, ...)",
                       fn, d->nlocal);
    for (int i = 0; i < nt; i++) {
      const ct_tensor *t = ts[i];
      if (!t) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: tensor %d is NULL", fn, i);
      if (d->local && t->storage->device != d->devs[i])
        return ct__error(CT_ERR_DEVICE_MISMATCH, "%s: tensor %d is on %s, but device %d of the group is %s", fn, i,
                         ct_device_spec(t->storage->device), i, ct_device_spec(d->devs[i]));
      if (i > 0 && (t->dtype != ts[0]->dtype))
        return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: tensor %d is %s, tensor 0 %s", fn, i, ct_dtype_name(t->dtype),
                         ct_dtype_name(ts[0]->dtype));
      if (i > 0 && (t->ndim != ts[0]->ndim || memcmp(t->shape, ts[0]->shape, (size_t)t->ndim * sizeof *t->shape)))
        return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: tensor %d has shape %s, tensor 0 %s", fn, i,
                         ct__shape_str(sa, sizeof sa, t->ndim, t->shape),
                         ct__shape_str(sb, sizeof sb, ts[0]->ndim, ts[0]->shape));
      if (kind == CT__DK_ALL_REDUCE || kind == CT__DK_RECV || (kind == CT__DK_BROADCAST && (d->local ? i != peer : d->rank != peer)))
        CT__TRY(ct__tensor_check_writable(t, fn, "t"));
    }
    if (ct__reduces(kind)) CT__TRY(ct__dist_check_op(op, ts[0]->dtype, fn));
  }
  if (kind == CT__DK_BROADCAST && (peer < 0 || peer >= d->size))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: root %d is out of range for a group of %d", fn, peer, d->size);
  if (kind == CT__DK_SEND || kind == CT__DK_RECV) {
    if (d->local)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: a group of devices has no point-to-point messages (use ct_copy)",
                       fn);
    if (peer < 0 || peer >= d->size || peer == d->rank)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s %d is out of range for a group of %d or this rank (%d)", fn,
                       kind == CT__DK_SEND ? "dst" : "src", peer, d->size, d->rank);
  }
  if (kind == CT__DK_REDUCE_SCATTER && (ts[0]->ndim < 1 || ts[0]->shape[0] % d->size != 0))
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "%s: t has shape %s, but its dim 0 must split into %d equal parts (one per rank)", fn,
                     ct__shape_str(sa, sizeof sa, ts[0]->ndim, ts[0]->shape), d->size);
  /* Work the caller recorded but did not enqueue yet goes to the queues now, so the
   * communication thread reads finished values. */
  CT__TRY(ct__deferred_realize(fn));

  struct ct_dist_work *w = ct__dist_work_new(d, kind, fn, kind == CT__DK_BARRIER ? 0 : nt);
  if (!w) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  w->op = op;
  w->peer = peer;
  w->check = check;
  ct_status st = CT_OK;
  for (int i = 0; i < w->nt; i++) w->t[i] = ct_retain(ts[i]);
  if (outs && (kind == CT__DK_ALL_GATHER || kind == CT__DK_REDUCE_SCATTER)) {
    for (int i = 0; i < nt && st == CT_OK; i++) {
      const ct_tensor *t = ts[i];
      int64_t shape[CT_MAX_DIMS + 1];
      int nd;
      if (kind == CT__DK_ALL_GATHER) {
        if (t->ndim + 1 > CT_MAX_DIMS) {
          st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: t has %d dims; the result would have more than %d", fn,
                         t->ndim, CT_MAX_DIMS);
          break;
        }
        shape[0] = d->size;
        memcpy(shape + 1, t->shape, (size_t)t->ndim * sizeof *shape);
        nd = t->ndim + 1;
      } else {
        memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
        shape[0] /= d->size;
        nd = t->ndim;
      }
      st = ct_empty(&w->out[i], t->storage->device, t->dtype, nd, shape);
    }
  }
  /* The caller's references to the results are taken before the work is queued: the thread
   * drops the work's own as soon as it finishes. */
  if (st == CT_OK && outs)
    for (int i = 0; i < nt; i++) outs[i] = ct_retain(w->out[i]);
  if (st == CT_OK) st = sync ? ct__dist_submit_sync(d, w) : ct__dist_submit(d, w);
  if (st != CT_OK) {
    if (outs)
      for (int i = 0; i < nt; i++) {
        ct_release(outs[i]);
        outs[i] = NULL;
      }
    ct_dist_work_release(w);
    return st;
  }
  *work = w;
  return CT_OK;
}

static ct_status ct__queue(ct_dist_work **work, ct_tensor **outs, struct ct_dist *d, enum ct__dist_kind kind,
                           const char *fn, ct_tensor *const *ts, int nt, ct_dist_op op, int peer) {
  return ct__queue_checked(work, outs, d, kind, fn, ts, nt, op, peer, true, false);
}

ct_status ct__dist_all_reduce_work(ct_dist_work **work, struct ct_dist *d, ct_tensor *const *ts, ct_dist_op op,
                                   bool check, const char *fn) {
  return ct__queue_checked(work, NULL, d, CT__DK_ALL_REDUCE, fn, ts, d ? d->nlocal : 0, op, 0, check, false);
}

/* The synchronous form: queue, wait, hand the results over only on success. */
static ct_status ct__sync(ct_tensor **outs, struct ct_dist *d, enum ct__dist_kind kind, const char *fn,
                          ct_tensor *const *ts, int nt, ct_dist_op op, int peer) {
  ct_tensor *tmp[16] = {0};
  ct_tensor **o = NULL;
  if (outs) {
    o = nt <= 16 ? tmp : calloc((size_t)nt, sizeof *o);
    if (!o) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int i = 0; i < nt; i++) outs[i] = NULL;
  }
  ct_dist_work *w = NULL;
  ct_status st = ct__queue_checked(&w, o, d, kind, fn, ts, nt, op, peer, true, true);
  if (st == CT_OK) st = ct_dist_wait(w, -1);
  ct_dist_work_release(w);
  if (outs) {
    for (int i = 0; i < nt; i++) {
      if (st == CT_OK) outs[i] = o[i];
      else ct_release(o[i]);
    }
    if (o != tmp) free(o);
  }
  return st;
}

#define CT__ONE(t) (ct_tensor *const[]){(ct_tensor *)(t)}

ct_status ct_dist_all_reduce(ct_dist *d, ct_tensor *t, ct_dist_op op) {
  return ct__sync(NULL, d, CT__DK_ALL_REDUCE, "ct_dist_all_reduce", t ? CT__ONE(t) : NULL, 1, op, 0);
}
ct_status ct_dist_broadcast(ct_dist *d, ct_tensor *t, int root) {
  return ct__sync(NULL, d, CT__DK_BROADCAST, "ct_dist_broadcast", t ? CT__ONE(t) : NULL, 1, CT_DIST_SUM, root);
}
ct_status ct_dist_all_gather(ct_tensor **out, ct_dist *d, const ct_tensor *t) {
  CT__CHECK_NOT_NULL("ct_dist_all_gather", out);
  return ct__sync(out, d, CT__DK_ALL_GATHER, "ct_dist_all_gather", t ? CT__ONE(t) : NULL, 1, CT_DIST_SUM, 0);
}
ct_status ct_dist_reduce_scatter(ct_tensor **out, ct_dist *d, const ct_tensor *t, ct_dist_op op) {
  CT__CHECK_NOT_NULL("ct_dist_reduce_scatter", out);
  return ct__sync(out, d, CT__DK_REDUCE_SCATTER, "ct_dist_reduce_scatter", t ? CT__ONE(t) : NULL, 1, op, 0);
}
ct_status ct_dist_barrier(ct_dist *d) {
  return ct__sync(NULL, d, CT__DK_BARRIER, "ct_dist_barrier", NULL, 0, CT_DIST_SUM, 0);
}
ct_status ct_dist_send(ct_dist *d, const ct_tensor *t, int dst) {
  return ct__sync(NULL, d, CT__DK_SEND, "ct_dist_send", t ? CT__ONE(t) : NULL, 1, CT_DIST_SUM, dst);
}
ct_status ct_dist_recv(ct_dist *d, ct_tensor *t, int src) {
  return ct__sync(NULL, d, CT__DK_RECV, "ct_dist_recv", t ? CT__ONE(t) : NULL, 1, CT_DIST_SUM, src);
}

ct_status ct_dist_all_reduce_async(ct_dist_work **work, ct_dist *d, ct_tensor *t, ct_dist_op op) {
  return ct__queue(work, NULL, d, CT__DK_ALL_REDUCE, "ct_dist_all_reduce_async", t ? CT__ONE(t) : NULL, 1, op, 0);
}
ct_status ct_dist_broadcast_async(ct_dist_work **work, ct_dist *d, ct_tensor *t, int root) {
  return ct__queue(work, NULL, d, CT__DK_BROADCAST, "ct_dist_broadcast_async", t ? CT__ONE(t) : NULL, 1,
                   CT_DIST_SUM, root);
}
ct_status ct_dist_all_gather_async(ct_dist_work **work, ct_tensor **out, ct_dist *d, const ct_tensor *t) {
  CT__CHECK_NOT_NULL("ct_dist_all_gather_async", out);
  *out = NULL;
  return ct__queue(work, out, d, CT__DK_ALL_GATHER, "ct_dist_all_gather_async", t ? CT__ONE(t) : NULL, 1,
                   CT_DIST_SUM, 0);
}
ct_status ct_dist_reduce_scatter_async(ct_dist_work **work, ct_tensor **out, ct_dist *d, const ct_tensor *t,
                                       ct_dist_op op) {
  CT__CHECK_NOT_NULL("ct_dist_reduce_scatter_async", out);
  *out = NULL;
  return ct__queue(work, out, d, CT__DK_REDUCE_SCATTER, "ct_dist_reduce_scatter_async", t ? CT__ONE(t) : NULL, 1,
                   op, 0);
}
ct_status ct_dist_barrier_async(ct_dist_work **work, ct_dist *d) {
  return ct__queue(work, NULL, d, CT__DK_BARRIER, "ct_dist_barrier_async", NULL, 0, CT_DIST_SUM, 0);
}
ct_status ct_dist_send_async(ct_dist_work **work, ct_dist *d, const ct_tensor *t, int dst) {
  return ct__queue(work, NULL, d, CT__DK_SEND, "ct_dist_send_async", t ? CT__ONE(t) : NULL, 1, CT_DIST_SUM, dst);
}
ct_status ct_dist_recv_async(ct_dist_work **work, ct_dist *d, ct_tensor *t, int src) {
  return ct__queue(work, NULL, d, CT__DK_RECV, "ct_dist_recv_async", t ? CT__ONE(t) : NULL, 1, CT_DIST_SUM, src);
}

static int ct__nt(const struct ct_dist *d) { return d ? d->nlocal : 0; }

ct_status ct_dist_all_reduce_multi(ct_dist *d, ct_tensor *const *ts, ct_dist_op op) {
  return ct__sync(NULL, d, CT__DK_ALL_REDUCE, "ct_dist_all_reduce_multi", ts, ct__nt(d), op, 0);
}
ct_status ct_dist_broadcast_multi(ct_dist *d, ct_tensor *const *ts, int root) {
  return ct__sync(NULL, d, CT__DK_BROADCAST, "ct_dist_broadcast_multi", ts, ct__nt(d), CT_DIST_SUM, root);
}
ct_status ct_dist_all_gather_multi(ct_tensor **outs, ct_dist *d, ct_tensor *const *ts) {
  CT__CHECK_NOT_NULL("ct_dist_all_gather_multi", outs);
  return ct__sync(outs, d, CT__DK_ALL_GATHER, "ct_dist_all_gather_multi", ts, ct__nt(d), CT_DIST_SUM, 0);
}
ct_status ct_dist_reduce_scatter_multi(ct_tensor **outs, ct_dist *d, ct_tensor *const *ts, ct_dist_op op) {
  CT__CHECK_NOT_NULL("ct_dist_reduce_scatter_multi", outs);
  return ct__sync(outs, d, CT__DK_REDUCE_SCATTER, "ct_dist_reduce_scatter_multi", ts, ct__nt(d), op, 0);
}
ct_status ct_dist_all_reduce_multi_async(ct_dist_work **work, ct_dist *d, ct_tensor *const *ts, ct_dist_op op) {
  return ct__queue(work, NULL, d, CT__DK_ALL_REDUCE, "ct_dist_all_reduce_multi_async", ts, ct__nt(d), op, 0);
}
