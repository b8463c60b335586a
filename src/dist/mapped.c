/* The zero-copy path: all-reduce and broadcast of an MPI group straight in the tensor's memory,
 * on devices whose memory is the host's. The default on PoCL's CPU devices since session 18;
 * CLTENSOR_DIST_ZERO_COPY=1 takes it on any CPU device with host-unified memory, =0 never
 * (measured below).
 *
 * On a CPU device with host-unified memory (PoCL's CPU devices) a buffer's memory is host
 * memory and mapping it returns a pointer into it: MPI can work there in place, where the
 * staging pipeline (collective.c) copies every chunk device -> pinned slot -> MPI -> slot ->
 * device. Here one blocking map (which, on the in-order queue, also waits for the kernels that
 * computed the values) gives the pointer, MPI runs in chunks of CLTENSOR_DIST_CHUNK_BYTES on it,
 * and one unmap ends it. The all-reduce's exchanges receive the peer's half into the group's
 * host scratch buffer (d->scratch, at most a chunk): until session 19 this path had none and
 * took MPI_Iallreduce, 2x slower than the exchanges (mpi.c).
 *
 * Measured on PoCL 3.1 (2 shared cores, 2 ranks; docs/DISTRIBUTED.md). On a busy machine (load
 * 2-21) it was no faster: a map and an unmap cost ~25 us each, as much as the pipeline's first
 * read and last write it saves, and MPI on the tensor's own memory looked slower at 16-64 MiB
 * (64-352 ms against 18-194 ms, with MPI_Allreduce itself moving 10x between runs). In two quiet
 * sittings (load 0.5-1.7, session 18) it was faster from 256 KiB up: 0.37-0.42x of MPI_Allreduce
 * at 256 KiB-1 MiB against the pipeline's 0.28-0.34x, 0.51-0.66x at 16 MiB against 0.32-0.50x,
 * 1.04-1.35x at 64 MiB against 0.49-0.78x, the same below 64 KiB, and DDP's steps alike (with
 * the exchanges and 1 MiB chunks, session 19: docs/DISTRIBUTED.md). Hence
 * the default on PoCL's CPU devices; other CPU runtimes keep the pipeline unless asked, since
 * there a map may be a copy or a kernel on a mapped buffer may misbehave (below). The tests run
 * both paths (tests/dist: the defaults, and *-staged with CLTENSOR_DIST_ZERO_COPY=0).
 *
 * Taken only where mapping costs no copy and the values need no conversion: an MPI group, one
 * contiguous tensor on a CPU device with host_unified_memory, a dtype that travels as itself
 * (f16 and bf16 travel as f32 and are staged). On a GPU a map is a copy, so GPUs keep the
 * pipeline.
 *
 * OpenCL leaves it undefined to run a kernel on a buffer while another range of it is mapped;
 * the allocator hands out ranges of shared buffers, so DDP's backward may run kernels on other
 * tensors of the mapped buffer while MPI works. On PoCL's CPU devices a mapping is the buffer's
 * own memory and disjoint ranges do not interact (the mpi-train tests train so on both paths);
 * elsewhere that is one more reason the path is taken only when asked. */
#include <CL/cl.h>
#include <stdlib.h>

#include "core/error.h"
#include "device/device.h"
#include "dist/dist.h"
#include "tensor/graph.h"

bool ct__dist_mapped_ok(const struct ct_dist *d, const struct ct_dist_work *w) {
  if (d->local || d->zero_copy == 0 || w->nt != 1) return false;
  if (w->kind != CT__DK_ALL_REDUCE && w->kind != CT__DK_BROADCAST) return false;
  const ct_tensor *t = w->t[0];
  const ct_device *dev = t->storage->device;
  return (d->zero_copy == 1 || ct__device_pocl_cpu(dev)) && dev->props.type == CT_DEVICE_CPU &&
         dev->props.host_unified_memory && ct_tensor_is_contiguous(t) && ct__dist_wire(t->dtype) == t->dtype &&
         t->storage->mem != NULL;
}

ct_status ct__dist_mapped_run(struct ct_dist *d, struct ct_dist_work *w) {
  ct_tensor *t = w->t[0];
  const ct_device *dev = t->storage->device;
  size_t es = ct_dtype_size(t->dtype), n = (size_t)ct_numel(t), bytes = n * es;
  if (n == 0) return CT_OK;
  if (w->kind == CT__DK_ALL_REDUCE || d->rank != w->peer) ct__tensor_bump_version(t);
  size_t off = t->storage->offset + (size_t)t->offset * es;
  cl_command_queue q = ct__device_queue(dev);
  cl_int err = CL_SUCCESS;
  unsigned char *p = clEnqueueMapBuffer(q, t->storage->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, off, bytes, 0, NULL,
                                        NULL, &err);
  if (!p)
    return ct__cl_error(err, "%s: mapping the %zu bytes of %s on %s", w->fn, bytes, d->what, dev->spec);
  /* Chunks as the pipeline's: MPI takes int counts, and every rank cuts at the same places. */
  size_t c = d->chunk_bytes / es > 0 ? d->chunk_bytes / es : 1;
  ct_status st = CT_OK;
  /* The all-reduce's exchanges receive the peer's part into host memory beside the tensor (mpi.c);
   * without it (out of host memory) MPI_Iallreduce does the work, slower but the same. */
  void *tmp = NULL;
  if (w->kind == CT__DK_ALL_REDUCE) {
    size_t need = (n < c ? n : c) * es;
    if (d->scratch_cap < need) {
      free(d->scratch);
      d->scratch = malloc(need);
      d->scratch_cap = d->scratch ? need : 0;
    }
    tmp = d->scratch;
  }
  for (size_t at = 0; at < n && st == CT_OK; at += c) {
    size_t len = n - at < c ? n - at : c;
    if (w->kind == CT__DK_ALL_REDUCE) {
      st = ct__mpi_all_reduce(d, p + at * es, tmp, len, t->dtype, w->op, w->fn);
      if (st == CT_OK && w->op == CT_DIST_AVG) ct__dist_divide(t->dtype, p + at * es, len, d->size);
    } else {
      st = ct__mpi_broadcast(d, p + at * es, len * es, w->peer, w->fn);
    }
  }
  /* The unmap is flushed, not waited for: the library uses the tensor's memory only through the
   * device's in-order queue, where everything queued later runs after it, and a program's own
   * queue synchronizes with ct_device_synchronize (interop.h), which waits for it too. Waiting
   * here would add another round trip through the device's queue (~25 us on PoCL) to every
   * collective. */
  err = clEnqueueUnmapMemObject(q, t->storage->mem, p, 0, NULL, NULL);
  if (err == CL_SUCCESS) err = clFlush(q);
  if (err != CL_SUCCESS && st == CT_OK)
    st = ct__cl_error(err, "%s: unmapping the %zu bytes of %s on %s", w->fn, bytes, d->what, dev->spec);
  return st;
}
