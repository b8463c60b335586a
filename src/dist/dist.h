/* The distributed layer's internals (issue #31, include/cltensor/dist.h, docs/DISTRIBUTED.md).
 *
 *   group.c       process groups: construction, the communication thread and its queue of works,
 *                 ct_dist_wait, the broken state, device choice
 *   collective.c  the public collectives: argument checks, works, and the staging pipeline that
 *                 moves chunks between devices and host memory around each step
 *   mapped.c      the zero-copy path: MPI in place in a mapped tensor on host-memory devices
 *   wire.c        host side of the values: the wire dtype (f16/bf16 travel as f32), conversions,
 *                 host reductions for device groups, AVG's division
 *   mpi.c         every MPI call (built with MPI), each bounded by the work's deadline;
 *   mpi_none.c    the same functions refusing with CT_ERR_UNSUPPORTED (built without MPI)
 *   ddp.c         DDP: buckets, the autograd gradient hook, synchronization
 *
 * The layer is the top one (scripts/check_layers.py): it uses tensors, transfers and the
 * autograd hook of tensor/graph.h, and nothing below it knows it exists. */
#ifndef CT_DIST_DIST_H
#define CT_DIST_DIST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cltensor/dist.h"
#include "tensor/tensor.h"

enum ct__dist_kind {
  CT__DK_ALL_REDUCE,
  CT__DK_BROADCAST,
  CT__DK_ALL_GATHER,
  CT__DK_REDUCE_SCATTER,
  CT__DK_BARRIER,
  CT__DK_SEND,
  CT__DK_RECV,
};
const char *ct__dist_kind_name(enum ct__dist_kind k); /* "all_reduce" ... */

/* One queued collective. Two references while queued (the caller's and the thread's); its
 * outcome under its own lock, so a work outlives its group. */
struct ct_dist_work {
  atomic_int refs;
  struct ct_dist *d; /* valid until done */
  enum ct__dist_kind kind;
  const char *fn;    /* the public call, for messages */
  int nt;            /* tensors: 1 for MPI groups, the device count for device groups */
  ct_tensor **t;     /* inputs (in place: also outputs), retained */
  ct_tensor **out;   /* all_gather / reduce_scatter results, retained */
  ct_dist_op op;
  int peer;          /* root, dst or src */
  bool check;        /* run the agreement check (MPI groups) */
  uint64_t seq;      /* queue order, the same on every rank */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool done;
  ct_status status;
  int waiters;       /* threads in ct_dist_wait on it (under lock; also counted in d->waiting) */
  char *msg;         /* the failure's message (malloc'ed), copied from the thread that failed */
  struct ct_dist_work *next;
};

/* Staging buffers of one pipeline slot (the running work's, reused across works). */
struct ct__dist_slot {
  ct_pinned *mem;
  size_t cap;
  ct_device *device;
  /* Host-to-device writes out of the slot not yet waited for. An MPI group leaves the last
   * chunk's writes of a work pending (the device's in-order queue orders every later command
   * after them); they are waited for before the host touches the slot again or frees it. */
  ct_event **wev;
  int nwev, capwev;
};

struct ct_dist {
  bool local;        /* device group */
  int rank, size, local_rank, nlocal;
  ct_device **devs;  /* device groups: nlocal devices */
  void *mpi;         /* mpi.c's state (communicator, peers' pids), NULL for device groups */
  int timeout_ms;
  bool checks;
  size_t chunk_bytes;
  int zero_copy;     /* CLTENSOR_DIST_ZERO_COPY: 1 mapped.c's path where it applies, 0 never, -1 (unset)
                        on PoCL's CPU devices */
  /* The queue and the communication thread. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  bool thread_started, stop;
  /* A thread runs a work: the communication thread, or the program's thread running a
   * synchronous collective itself (ct__dist_submit_sync). Whoever holds it makes the MPI calls. */
  bool busy;
  struct ct_dist_work *head, *tail;
  uint64_t next_seq;
  /* The thread holding busy only: the deadline of the running work (CLOCK_MONOTONIC ns), the
   * broken state (CT_OK while usable) and the staging slots. */
  int64_t deadline_ns;
  int cur_timeout_ms; /* timeout_ms when the running work started */
  char what[192]; /* the running work, for messages: "all_reduce #12 of 4096 bytes" */
  atomic_int broken;
  /* Threads blocked in ct_dist_wait on works of this group: while one is, nothing else of the
   * process needs the cores, and MPI is polled without yielding (mpi.c). Changed only under a
   * work's lock while the work is not done (ct_dist_wait; its completion subtracts the rest). */
  atomic_int waiting;
  char *broken_msg;
  struct ct__dist_slot slots[3];
  /* The mapped path's receive buffer for MPI's exchanges (mapped.c), scratch_cap bytes. */
  void *scratch;
  size_t scratch_cap;
};

/* ---- group.c ---- */
int64_t ct__dist_now_ns(void);
/* Marks the group broken with the calling thread's current error (the first failure wins). */
void ct__dist_break(struct ct_dist *d, ct_status st);
/* Queues w (takes the thread's reference; sets w->seq). CT_ERR_DIST when the group is broken. */
ct_status ct__dist_submit(struct ct_dist *d, struct ct_dist_work *w);
/* A synchronous collective's submission: when the queue is empty and no work runs, the calling
 * thread runs w itself (the hand-over to the communication thread and back costs 10-15 us per
 * collective); otherwise as ct__dist_submit. Either way ct_dist_wait(w) then gives the outcome. */
ct_status ct__dist_submit_sync(struct ct_dist *d, struct ct_dist_work *w);
/* A new work (one reference, the caller's) with room for nt tensors; NULL when out of memory. */
struct ct_dist_work *ct__dist_work_new(struct ct_dist *d, enum ct__dist_kind kind, const char *fn, int nt);

/* ---- collective.c ---- */
/* ct_dist_all_reduce_multi_async with the agreement check chosen (DDP checks its buckets at the
 * first step only) and fn for messages. */
ct_status ct__dist_all_reduce_work(ct_dist_work **work, struct ct_dist *d, ct_tensor *const *ts, ct_dist_op op,
                                   bool check, const char *fn);
/* Runs w on the thread that holds d->busy: the agreement check, then the pipeline. */
ct_status ct__dist_run(struct ct_dist *d, struct ct_dist_work *w);
/* Waits for and frees slot s's pending writes; st is kept when it is a failure already. */
ct_status ct__dist_slot_wait(struct ct_dist *d, int s, ct_status st);

/* ---- mapped.c ---- */
/* Whether w runs in place in its mapped tensor: an MPI group's all_reduce or broadcast of one
 * contiguous tensor on a host-unified CPU device, in a dtype that travels as itself. */
bool ct__dist_mapped_ok(const struct ct_dist *d, const struct ct_dist_work *w);
/* Runs w so (after the agreement check): map, MPI in chunks, unmap and wait for it. */
ct_status ct__dist_mapped_run(struct ct_dist *d, struct ct_dist_work *w);

/* ---- wire.c ---- */
/* The dtype values travel and reduce in: f32 for f16 and bf16, t itself otherwise. */
ct_dtype ct__dist_wire(ct_dtype t);
/* n elements of dtype t at src into the wire dtype at dst, and back. */
void ct__dist_to_wire(ct_dtype t, void *dst, const void *src, size_t n);
void ct__dist_from_wire(ct_dtype t, void *dst, const void *src, size_t n);
/* acc[i] = acc[i] op x[i] for n elements of wire dtype w (op SUM, MAX or MIN; bool: or / and). */
void ct__dist_reduce(ct_dtype w, ct_dist_op op, void *acc, const void *x, size_t n);
/* out[i] = x[i] op y[i] (out may be x or y): the operands in a given order, since MAX and MIN
 * of floats are not commutative in their bits (NaN payloads, -0 and +0). */
void ct__dist_reduce3(ct_dtype w, ct_dist_op op, void *out, const void *x, const void *y, size_t n);
/* acc[i] /= world (AVG, floating wire dtypes). */
void ct__dist_divide(ct_dtype w, void *acc, size_t n, int world);
/* Whether op is defined for dtype t: AVG needs a floating t. Sets the error naming fn. */
ct_status ct__dist_check_op(ct_dist_op op, ct_dtype t, const char *fn);

/* ---- mpi.c / mpi_none.c (every call but open/close on the thread holding d->busy) ---- */
ct_status ct__mpi_open(struct ct_dist *d, int *argc, char ***argv, const void *comm, size_t comm_size,
                       const char *fn);
/* Frees the communicator; finalizes MPI when open started it and finalize is true. */
void ct__mpi_close(struct ct_dist *d, bool finalize);
/* The agreement check: every rank's n fields (names for the message) must be equal. */
ct_status ct__mpi_agree(struct ct_dist *d, const int64_t *fields, const char *const *names, int n,
                        const char *fn);
/* In place in buf. tmp: room for count more elements, or NULL; with it the group runs
 * Rabenseifner's algorithm on point-to-point messages (mpi.c says why), else MPI_Iallreduce. */
ct_status ct__mpi_all_reduce(struct ct_dist *d, void *buf, void *tmp, size_t count, ct_dtype wire, ct_dist_op op,
                             const char *fn);
ct_status ct__mpi_broadcast(struct ct_dist *d, void *buf, size_t bytes, int root, const char *fn);
ct_status ct__mpi_all_gather(struct ct_dist *d, const void *send, void *recv, size_t bytes, const char *fn);
ct_status ct__mpi_reduce_scatter(struct ct_dist *d, const void *send, void *recv, size_t count, ct_dtype wire,
                                 ct_dist_op op, const char *fn);
ct_status ct__mpi_barrier(struct ct_dist *d, const char *fn);
ct_status ct__mpi_send(struct ct_dist *d, const void *buf, size_t bytes, int dst, const char *fn);
ct_status ct__mpi_recv(struct ct_dist *d, void *buf, size_t bytes, int src, const char *fn);

#endif
