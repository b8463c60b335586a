/* A reproducer without the library (docs/DISTRIBUTED.md, "MPICH beside Open MPI"): under MPICH
 * 4.0.2 with UCX over TCP (Debian 12), 4 ranks on 2 cores, this plain program of Isend/Irecv
 * pairs and Iallreduce, all completed, sometimes hangs in MPI_Finalize after every rank printed
 * "ok" (1 in 8 and 1 in 25 runs in session 18). Not built by meson; by hand:
 *   mpicc.mpich -O2 mpich_ucx_finalize.c -o t && UCX_TLS=tcp,self timeout 20 mpiexec.mpich -n 4 ./t */
#include <mpi.h>
#include <stdio.h>
#include <pthread.h>
int main(int argc, char **argv) {
  int prov; MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &prov);
  MPI_Comm c; MPI_Comm_dup(MPI_COMM_WORLD, &c);
  int r; MPI_Comm_rank(c, &r);
  float buf[1024] = {0}, tmp[1024];
  for (int i = 0; i < 200; i++) {
    int peer = r ^ 1; MPI_Request q[2];
    MPI_Irecv(tmp, 4096, MPI_BYTE, peer, 32, c, &q[0]);
    MPI_Isend(buf, 4096, MPI_BYTE, peer, 32, c, &q[1]);
    int f = 0; while (!f) MPI_Test(&q[0], &f, MPI_STATUS_IGNORE);
    f = 0; while (!f) MPI_Test(&q[1], &f, MPI_STATUS_IGNORE);
    MPI_Request a; MPI_Iallreduce(MPI_IN_PLACE, buf, 16, MPI_FLOAT, MPI_SUM, c, &a);
    f = 0; while (!f) MPI_Test(&a, &f, MPI_STATUS_IGNORE);
  }
  printf("rank %d ok\n", r); fflush(stdout);
  MPI_Comm_free(&c);
  MPI_Finalize();
  return 0;
}
