/* Distributed data parallel: process groups, collectives on tensors, and DDP (issue #31;
 * docs/DISTRIBUTED.md).
 *
 * A process group (ct_dist) is one of two kinds:
 *   - MPI ranks: one process per rank (mpirun -np N), made by ct_dist_init or ct_dist_from_comm.
 *     Each rank passes one tensor to a collective. Needs a library built with MPI (meson
 *     feature `mpi`, auto); without it both return CT_ERR_UNSUPPORTED saying so.
 *   - devices of one process: made by ct_dist_from_devices (needs no MPI, works in every build).
 *     Each device is a "rank"; a collective takes one tensor per device through the _multi
 *     forms, in the order of the device list.
 *
 *   ct_dist *d;  ct_device *dev;
 *   ct_dist_init(&d, &argc, &argv);          // MPI_Init_thread unless the program did it
 *   ct_dist_device(&dev, d);                 // $CLTENSOR_DEVICE, else the local-rank-th device
 *   ... make tensors on dev ...
 *   ct_dist_all_reduce(d, t, CT_DIST_SUM);   // t is the sum of every rank's t, on every rank
 *   ct_dist_free(d);                         // MPI_Finalize when ct_dist_init started MPI
 *
 * Collectives. Every rank calls the same collectives in the same order with tensors of the same
 * dtype and shape (a cheap check of kind, order, dtype and element count runs with each
 * collective and makes a disagreement CT_ERR_DIST naming both values; ct_dist_set_checks turns
 * it off). Any dtype: bool, integers, f16, bf16, f32, f64 (u16/u32/u64 too). Values move through
 * host memory in chunks (CLTENSOR_DIST_CHUNK_BYTES, default 1 MiB): while MPI works on chunk i,
 * the device-to-host copy of chunk i+1 and the host-to-device copy of chunk i-1 run on the
 * device's queue. Reductions:
 *   - CT_DIST_SUM, CT_DIST_MAX, CT_DIST_MIN on every dtype; integer sums wrap (two's
 *     complement), as PyTorch's; on bool SUM and MAX are logical or, MIN logical and;
 *   - CT_DIST_AVG on floating dtypes only (the sum divided by the group size); on integers and
 *     bool it is CT_ERR_DTYPE_MISMATCH (sum, then divide as you mean it: PyTorch's backends
 *     disagree on what an integer average is);
 *   - f16 and bf16 reduce in f32 and round once at the end, so every rank gets the same bits.
 * Every rank receives bit-identical results (an MPI group of a power-of-two size all-reduces by
 * its own exchanges, combining in an order every rank shares; otherwise MPI's reduction; a fixed
 * order, device 0 first, for device groups).
 *
 * Threads. All MPI calls of a group come from its communication thread, one per group
 * (MPI_THREAD_SERIALIZED is what ct_dist_init asks for), except that a synchronous collective
 * called while the group has no work queued or running runs on the calling thread (it would
 * only wait there), never at the same time as the thread's calls. The asynchronous forms queue
 * work on that thread and return a ct_dist_work; the synchronous forms are the asynchronous form
 * plus ct_dist_wait. Works run in the order they were queued, so every rank must queue them in the
 * same order (a program that queues from several threads must order them itself). A group is
 * used by one program thread at a time, except that ct_dist_wait and ct_dist_work_release may be
 * called from any thread.
 *
 * Failures are errors, not hangs. The communicator has MPI_ERRORS_RETURN. Each collective has a
 * timeout (default 30 minutes, PyTorch's; ct_dist_set_timeout, or CLTENSOR_DIST_TIMEOUT_MS);
 * when it passes, or MPI reports an error, the collective fails with CT_ERR_DIST naming the
 * collective, its size and, where it can tell (ranks on this node whose process is gone), the
 * rank that died. The group is then broken: every later collective fails at once with the same
 * story, and ct_dist_free does not call MPI_Finalize (which would wait for the dead rank); the
 * program should exit with a non-zero status. Under Open MPI's mpirun a rank that exits
 * abnormally makes mpirun kill the whole job unless it runs with --enable-recovery
 * (docs/DISTRIBUTED.md).
 *
 * DDP (ct_ddp_new): PyTorch's DistributedDataParallel for a list of parameters; see below. */
#ifndef CLTENSOR_DIST_H
#define CLTENSOR_DIST_H

#include <stdbool.h>
#include <stddef.h>

#include "cltensor/device.h"
#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

typedef struct ct_dist ct_dist;
typedef struct ct_dist_work ct_dist_work;

typedef enum ct_dist_op { CT_DIST_SUM = 0, CT_DIST_AVG = 1, CT_DIST_MAX = 2, CT_DIST_MIN = 3 } ct_dist_op;

/* Predicate: whether this library was built with MPI (the meson feature `mpi`). Device groups
 * work either way. */
CT_API bool ct_dist_is_mpi_available(void);

/* ---- Process groups ---- */

/* Constructor. A group of all MPI processes (a duplicate of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN). Calls MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED) unless MPI is
 * already initialized (then it needs at least MPI_THREAD_SERIALIZED, else CT_ERR_UNSUPPORTED);
 * argc/argv may be NULL. Only a group whose ct_dist_init started MPI finalizes it at
 * ct_dist_free, so make at most one such group per process, and free it last.
 * OUT: *out, the new group (NULL on failure). Returns CT_OK; CT_ERR_UNSUPPORTED (built without
 * MPI, too low a thread level); CT_ERR_DIST (an MPI call failed: its error string);
 * CT_ERR_OUT_OF_MEMORY; CT_ERR_INVALID_ARGUMENT (out NULL). */
CT_API ct_status ct_dist_init(ct_dist **out, int *argc, char ***argv);

/* Constructor. A group over a communicator of a program that already uses MPI: comm points at
 * an MPI_Comm and comm_size is sizeof(MPI_Comm) (checked against the MPI the library was built
 * with: Open MPI's handle is a pointer, MPICH's an int). The communicator is duplicated
 * (MPI_Comm_dup, with MPI_ERRORS_RETURN), so the program keeps its own; MPI must have been
 * initialized with at least MPI_THREAD_SERIALIZED, and a program that makes MPI calls of its own
 * while the group has work queued needs MPI_THREAD_MULTIPLE. Statuses as ct_dist_init.
 * Programs call it through ct_dist_from_comm below. */
CT_API ct_status ct_dist_from_comm_handle(ct_dist **out, const void *comm, size_t comm_size);

/* ct_dist_from_comm(&d, comm): declared when <mpi.h> was included before this header (it
 * defines MPI_VERSION), so the header itself never needs mpi.h. */
#if defined(MPI_VERSION)
static inline ct_status ct_dist_from_comm(ct_dist **out, MPI_Comm comm) {
  return ct_dist_from_comm_handle(out, &comm, sizeof comm);
}
#endif

/* Constructor. A group of n >= 1 devices of this process (distinct, each given once; the array
 * is copied). Rank i is devs[i]; collectives take one tensor per device through the _multi
 * forms below. Needs no MPI.
 * OUT: *out (NULL on failure). Returns CT_OK; CT_ERR_INVALID_ARGUMENT (NULL, n < 1, a repeated
 * device); CT_ERR_OUT_OF_MEMORY. */
CT_API ct_status ct_dist_from_devices(ct_dist **out, ct_device *const *devs, int n);

/* Destructor. Waits for queued work (each for at most the group's timeout), stops the
 * communication thread, frees the communicator and, for a group whose ct_dist_init started MPI
 * and that is not broken, calls MPI_Finalize. NULL is a no-op. Works still held by the program
 * stay valid (finished or failed) until released. */
CT_API void ct_dist_free(ct_dist *d);

/* This process's rank in an MPI group (0 for a device group); -1 for NULL. */
CT_API int ct_dist_rank(const ct_dist *d);
/* The number of ranks (of devices, for a device group); -1 for NULL. */
CT_API int ct_dist_size(const ct_dist *d);
/* The rank among the group's processes on this node (MPI_Comm_split_type with
 * MPI_COMM_TYPE_SHARED); 0 for a device group; -1 for NULL. */
CT_API int ct_dist_local_rank(const ct_dist *d);
/* How many tensors each call of a _multi form takes: 1 for an MPI group, the number of devices
 * for a device group; -1 for NULL. */
CT_API int ct_dist_local_count(const ct_dist *d);
/* Whether d is a device group (ct_dist_from_devices); false for NULL. */
CT_API bool ct_dist_is_local(const ct_dist *d);

/* OUT: *out, this rank's device (owned by the runtime): $CLTENSOR_DEVICE when set (any spec
 * ct_device_find takes), else device number local_rank modulo the device count, so mpirun -np 2
 * on a node with two GPUs gives each rank its own. For a device group, its first device.
 * Returns CT_OK, or the statuses of ct_device_find / ct_device_get. */
CT_API ct_status ct_dist_device(ct_device **out, const ct_dist *d);
/* OUT: *out, device i of a device group (rank i); for an MPI group i must be 0 and it is
 * ct_dist_device. CT_ERR_INVALID_ARGUMENT for i out of range. */
CT_API ct_status ct_dist_device_at(ct_device **out, const ct_dist *d, int i);

/* Sets the timeout of each collective in milliseconds (> 0), from the next queued work on.
 * Default 1,800,000 (30 minutes, PyTorch's default), or $CLTENSOR_DIST_TIMEOUT_MS. */
CT_API ct_status ct_dist_set_timeout(ct_dist *d, int timeout_ms);
/* Turns the per-collective agreement check (kind, order, dtype, element count, op and root on
 * every rank) on or off (on by default; off saves one small all-reduce per collective of an MPI
 * group). */
CT_API ct_status ct_dist_set_checks(ct_dist *d, bool on);

/* ---- Collectives, synchronous ----
 * Each waits for the collective (at most the group's timeout) and returns CT_OK or the error:
 * CT_ERR_INVALID_ARGUMENT (NULL, a root or peer out of range, a device group given one tensor:
 * use the _multi form); CT_ERR_DEVICE_MISMATCH; CT_ERR_DTYPE_MISMATCH (AVG of integers);
 * CT_ERR_SHAPE_MISMATCH (reduce_scatter's dim 0 not divisible by the group size, a _multi
 * tensor of another shape); CT_ERR_DIST (timeout, a dead rank, an MPI error, ranks that
 * disagree, a broken group); CT_ERR_OUT_OF_MEMORY; the statuses of the transfers. In-place
 * collectives write t only when they succeed on this rank (a failure in the middle of a chunked
 * transfer can leave t partly written: the group is broken then). The tensors are borrowed. */

/* In place: t becomes the reduction of every rank's t. */
CT_API ct_status ct_dist_all_reduce(ct_dist *d, ct_tensor *t, ct_dist_op op);
/* In place: t becomes root's t on every rank. */
CT_API ct_status ct_dist_broadcast(ct_dist *d, ct_tensor *t, int root);
/* OUT: *out, a new tensor of shape [world, t's shape...] on t's device: every rank's t in rank
 * order (NULL on failure). */
CT_API ct_status ct_dist_all_gather(ct_tensor **out, ct_dist *d, const ct_tensor *t);
/* OUT: *out, a new tensor of shape [t.shape[0] / world, t's other dims...]: rank r gets part r
 * (of t's dim 0 split into world equal parts) reduced over every rank's t. t needs ndim >= 1. */
CT_API ct_status ct_dist_reduce_scatter(ct_tensor **out, ct_dist *d, const ct_tensor *t, ct_dist_op op);
/* Returns when every rank has called it. */
CT_API ct_status ct_dist_barrier(ct_dist *d);
/* Point to point, MPI groups only: t goes to rank dst, whose ct_dist_recv with a tensor of the
 * same dtype and element count (checked: CT_ERR_DIST naming both) and src = this rank takes it.
 * Sends and receives between two ranks match in the order they were queued. */
CT_API ct_status ct_dist_send(ct_dist *d, const ct_tensor *t, int dst);
CT_API ct_status ct_dist_recv(ct_dist *d, ct_tensor *t, int src);

/* ---- Collectives, asynchronous ----
 * Queue the collective on the group's thread and return at once. OUT: *work (NULL on failure),
 * owned by the caller: ct_dist_wait for the outcome, ct_dist_work_release when done with it. The
 * tensors are retained by the work until it finishes; the program must not write t (nor read an
 * in-place t) until the work is waited for. Argument errors are returned at once. */
CT_API ct_status ct_dist_all_reduce_async(ct_dist_work **work, ct_dist *d, ct_tensor *t, ct_dist_op op);
CT_API ct_status ct_dist_broadcast_async(ct_dist_work **work, ct_dist *d, ct_tensor *t, int root);
/* *out is made at once (its values are there once the work succeeded). */
CT_API ct_status ct_dist_all_gather_async(ct_dist_work **work, ct_tensor **out, ct_dist *d, const ct_tensor *t);
CT_API ct_status ct_dist_reduce_scatter_async(ct_dist_work **work, ct_tensor **out, ct_dist *d, const ct_tensor *t,
                                              ct_dist_op op);
CT_API ct_status ct_dist_barrier_async(ct_dist_work **work, ct_dist *d);
CT_API ct_status ct_dist_send_async(ct_dist_work **work, ct_dist *d, const ct_tensor *t, int dst);
CT_API ct_status ct_dist_recv_async(ct_dist_work **work, ct_dist *d, ct_tensor *t, int src);

/* Waits for work for at most timeout_ms (< 0: without a limit of its own; the collective's own
 * timeout still ends it; 0: just looks). Returns the work's status once it finished (again on
 * every later call), or CT_ERR_DIST "not finished after N ms" when it is still running (the
 * work goes on: wait again). work NULL: CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_dist_wait(ct_dist_work *work, int timeout_ms);
/* Whether work has finished (successfully or not); false for NULL. */
CT_API bool ct_dist_work_is_done(const ct_dist_work *work);
/* Releases the caller's reference; a work still running finishes on the group's thread. NULL is
 * a no-op. */
CT_API void ct_dist_work_release(ct_dist_work *work);

/* ---- Collectives over a device group (one tensor per device) ----
 * ts: ct_dist_local_count(d) tensors, ts[i] on device i of the group (for an MPI group: one
 * tensor, and these are the single forms). Same dtype and shape for all. Synchronous; statuses
 * as above. */
CT_API ct_status ct_dist_all_reduce_multi(ct_dist *d, ct_tensor *const *ts, ct_dist_op op);
CT_API ct_status ct_dist_broadcast_multi(ct_dist *d, ct_tensor *const *ts, int root);
/* outs[i]: new tensors, each [world, shape...] on device i (all NULL on failure). */
CT_API ct_status ct_dist_all_gather_multi(ct_tensor **outs, ct_dist *d, ct_tensor *const *ts);
/* outs[i]: part i of the reduction, on device i (all NULL on failure). */
CT_API ct_status ct_dist_reduce_scatter_multi(ct_tensor **outs, ct_dist *d, ct_tensor *const *ts, ct_dist_op op);
/* The asynchronous all-reduce over a device group (DDP's buckets use it). */
CT_API ct_status ct_dist_all_reduce_multi_async(ct_dist_work **work, ct_dist *d, ct_tensor *const *ts,
                                                ct_dist_op op);

/* ---- DDP: data-parallel training (PyTorch's DistributedDataParallel) ----
 *
 *   ct_ddp *ddp;
 *   ct_ddp_new(&ddp, d, params, n, NULL);     // params broadcast from rank 0
 *   for (...) {
 *     ct_optimizer_zero_grad(opt);
 *     forward on this rank's shard; ct_backward(loss, NULL);   // grads averaged over ranks
 *     ct_optimizer_step(opt);                 // same update on every rank
 *   }
 *
 * At construction the parameters are broadcast from rank 0 and grouped into buckets in reverse
 * order (the order gradients tend to become ready in a backward), the first bucket at most
 * first_bucket_bytes, the others at most bucket_bytes (a bucket holds one dtype). During
 * ct_backward, a hook in the autograd engine marks a parameter ready as soon as its .grad is
 * final; a bucket whose parameters are all ready is copied into one flat tensor and its
 * all-reduce (CT_DIST_AVG) is queued at once — buckets in index order on every rank — so the
 * communication overlaps the rest of the backward. When the backward ends, parameters that got
 * no gradient in it are marked ready (with zeros where they have no .grad), the remaining
 * buckets are queued, and ct_backward waits for all of them and writes the averaged gradients
 * into every parameter's .grad before it returns; a communication failure is its status.
 * A parameter keeps its .grad between steps (accumulation), so what is averaged is the .grad a
 * step ends with.
 *
 * Device groups: params holds one replica per device, replica-major (params[i * n + j] is
 * parameter j of the replica on device i), and each replica runs its own ct_backward (in turn,
 * or on threads); buckets are reduced when every replica has made them ready, and the
 * ct_backward that completes the last replica waits for them and writes every replica's .grad.
 *
 * The hooks act on backward passes that reach at least one of the parameters; a rank whose
 * backward reaches none of them does not take part in that step (the others time out). */
typedef struct ct_ddp ct_ddp;

typedef struct ct_ddp_opts {
  size_t bucket_bytes;       /* 0: 25 MiB (PyTorch's bucket_cap_mb) */
  size_t first_bucket_bytes; /* 0: 1 MiB (PyTorch's first bucket) */
  bool no_broadcast;         /* true: skip the broadcast of the parameters from rank 0 */
} ct_ddp_opts;

/* Constructor. params: n >= 1 floating leaf tensors that require grad (n * ct_dist_local_count(d)
 * for a device group, replica-major), distinct, each on its rank's device (retained; the array
 * is copied); the same list (dtypes and shapes) on every rank. opts NULL: the defaults. A
 * parameter belongs to at most one DDP. Broadcasts the parameters from rank 0 (replica 0) unless
 * opts->no_broadcast.
 * OUT: *out (NULL on failure). Returns CT_OK; CT_ERR_INVALID_ARGUMENT; CT_ERR_DTYPE_MISMATCH (a
 * parameter that is not floating); CT_ERR_DEVICE_MISMATCH (a replica off its device);
 * CT_ERR_OUT_OF_MEMORY; CT_ERR_DIST (the broadcast). */
CT_API ct_status ct_ddp_new(ct_ddp **out, ct_dist *d, ct_tensor *const *params, int n, const ct_ddp_opts *opts);
/* Turns gradient synchronization on (the default) or off: off, backward passes accumulate into
 * .grad without communication (PyTorch's no_sync()); the first synchronized backward after them
 * averages the accumulated gradients. */
CT_API ct_status ct_ddp_set_sync(ct_ddp *ddp, bool on);
/* How many buckets the parameters were grouped into; -1 for NULL. */
CT_API int ct_ddp_bucket_count(const ct_ddp *ddp);
/* Destructor: removes the hooks, releases the parameters. NULL is a no-op. The group must
 * outlive it. */
CT_API void ct_ddp_free(ct_ddp *ddp);

CT_END_DECLS

#endif
