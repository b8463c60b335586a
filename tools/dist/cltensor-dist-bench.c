/* cltensor-dist-bench: all-reduce bandwidth of device tensors against MPI_Allreduce on plain
 * host buffers of the same size, in one run (docs/DISTRIBUTED.md, "Figures").
 *
 *   mpirun -np 2 cltensor-dist-bench [max_bytes]     sizes 1 KiB .. max_bytes (64 MiB) by x4
 *   mpirun -np 2 cltensor-dist-bench --ddp [dir]    the DDP overlap figure (ddp_steps.c) on the
 *                                                   fixtures in dir (examples/data)
 *
 * For each size: the median time of ct_dist_all_reduce(SUM) on an f32 tensor of this rank's
 * device (staged through host memory in chunks, the agreement check off as in DDP's later
 * steps) and of MPI_Allreduce(MPI_IN_PLACE) on a host array; algorithm bandwidth bytes / time,
 * bus bandwidth algbw * 2 (n - 1) / n (the bytes each rank moves in a ring, NCCL's convention),
 * and the ratio of the two times (>= 0.8 means the staging costs at most 20%). Rank 0 prints.
 *
 * Also MPI_Iallreduce on the host array, completed by MPI_Test in a loop on the main thread
 * (mpi_i_us): the library makes that call for groups whose size is not a power of two (others
 * exchange with MPI_Isend/MPI_Irecv, src/dist/mpi.c), and with Open MPI a non-blocking collective
 * (libnbc) takes other algorithms than the blocking one (tuned). */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cltensor/cltensor.h"
#include "ddp_steps.h"

#define TRY(x)                                                                                    \
  do {                                                                                            \
    ct_status s_ = (x);                                                                           \
    if (s_ != CT_OK) {                                                                            \
      fprintf(stderr, "cltensor-dist-bench: %s: %s: %s\n", #x, ct_status_name(s_), ct_last_error()); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  bool ddp = argc > 1 && strcmp(argv[1], "--ddp") == 0;
  size_t max = argc > 1 && !ddp ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)64 << 20;
  ct_dist *d = NULL;
  ct_device *dev = NULL;
  TRY(ct_dist_from_comm(&d, MPI_COMM_WORLD));
  TRY(ct_dist_device(&dev, d));
  if (ddp) {
    int rc = dist_bench_ddp(d, dev, argc > 2 ? argv[2] : CT_DIST_BENCH_DATA_DIR);
    ct_dist_free(d);
    ct_shutdown();
    MPI_Finalize();
    return rc;
  }
  TRY(ct_dist_set_checks(d, false));
  int rank = ct_dist_rank(d), n = ct_dist_size(d);
  if (rank == 0) {
    printf("# %d ranks, device %s; times are medians\n", n, ct_device_spec(dev));
    printf("%10s %12s %12s %12s %12s %12s %7s %12s %7s\n", "bytes", "ct_us", "ct_algbw", "ct_busbw", "mpi_us",
           "mpi_algbw", "ratio", "mpi_i_us", "ratio_i");
  }
  for (size_t bytes = 1024; bytes <= max; bytes *= 4) {
    int64_t count = (int64_t)(bytes / 4);
    float *host = calloc((size_t)count, sizeof *host);
    ct_tensor *t = NULL;
    TRY(ct_from_host(&t, dev, CT_F32, 1, &count, host));
    int reps = bytes <= ((size_t)1 << 20) ? 50 : bytes <= ((size_t)16 << 20) ? 10 : 5;
    double ct_t[50], mpi_t[50], mpii_t[50];
    TRY(ct_dist_all_reduce(d, t, CT_DIST_SUM)); /* warm-up: slots, kernels, connections */
    MPI_Allreduce(MPI_IN_PLACE, host, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int r = 0; r < reps; r++) {
      /* Interleaved, so that both see the same machine state. The library's barrier keeps the
       * ranks in step; MPI calls of the program wait for the group's queue to be empty (every
       * work of the group was waited for), as MPI_THREAD_SERIALIZED requires. */
      TRY(ct_dist_barrier(d));
      double t0 = dist_bench_now();
      TRY(ct_dist_all_reduce(d, t, CT_DIST_SUM));
      ct_t[r] = dist_bench_now() - t0;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = dist_bench_now();
      MPI_Allreduce(MPI_IN_PLACE, host, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      mpi_t[r] = dist_bench_now() - t0;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = dist_bench_now();
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, host, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      for (int done = 0; !done;) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      mpii_t[r] = dist_bench_now() - t0;
    }
    qsort(ct_t, (size_t)reps, sizeof *ct_t, dist_bench_cmp);
    qsort(mpi_t, (size_t)reps, sizeof *mpi_t, dist_bench_cmp);
    qsort(mpii_t, (size_t)reps, sizeof *mpii_t, dist_bench_cmp);
    double tc = ct_t[reps / 2], tm = mpi_t[reps / 2], ti = mpii_t[reps / 2], bus = 2.0 * (n - 1) / n;
    if (rank == 0)
      printf("%10zu %12.1f %10.3fGB/s %10.3fGB/s %12.1f %10.3fGB/s %7.2f %12.1f %7.2f\n", bytes, tc * 1e6,
             (double)bytes / tc / 1e9, (double)bytes / tc / 1e9 * bus, tm * 1e6, (double)bytes / tm / 1e9, tm / tc,
             ti * 1e6, ti / tc);
    fflush(stdout);
    ct_release(t);
    free(host);
  }
  ct_dist_free(d);
  ct_shutdown();
  MPI_Finalize();
  return 0;
}
