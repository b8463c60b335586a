/* The MPI functions of a library built without MPI (meson feature `mpi` disabled or MPI not
 * found): opening a group refuses, so nothing else is ever called. Device groups
 * (ct_dist_from_devices) do not need these. */
#include "core/error.h"
#include "dist/dist.h"

ct_status ct__mpi_open(struct ct_dist *d, int *argc, char ***argv, const void *comm, size_t comm_size,
                       const char *fn) {
  (void)d, (void)argc, (void)argv, (void)comm, (void)comm_size;
  return ct__error(CT_ERR_UNSUPPORTED,
                   "%s: this libcltensor was built without MPI (meson feature 'mpi'; install libopenmpi-dev or MPICH "
                   "and reconfigure); groups of devices in one process (ct_dist_from_devices) still work",
                   fn);
}

void ct__mpi_close(struct ct_dist *d, bool finalize) { (void)d, (void)finalize; }

#define CT__NO_MPI(fn) ct__error(CT_ERR_UNSUPPORTED, "%s: built without MPI", fn)

ct_status ct__mpi_agree(struct ct_dist *d, const int64_t *fields, const char *const *names, int n,
                        const char *fn) {
  (void)d, (void)fields, (void)names, (void)n;
  return CT__NO_MPI(fn);
}
ct_status ct__mpi_all_reduce(struct ct_dist *d, void *buf, void *tmp, size_t count, ct_dtype wire, ct_dist_op op,
                             const char *fn) {
  (void)d, (void)buf, (void)tmp, (void)count, (void)wire, (void)op;
  return CT__NO_MPI(fn);
}
ct_status ct__mpi_broadcast(struct ct_dist *d, void *buf, size_t bytes, int root, const char *fn) {
  (void)d, (void)buf, (void)bytes, (void)root;
  return CT__NO_MPI(fn);
}
ct_status ct__mpi_all_gather(struct ct_dist *d, const void *send, void *recv, size_t bytes, const char *fn) {
  (void)d, (void)send, (void)recv, (void)bytes;
  return CT__NO_MPI(fn);
}
ct_status ct__mpi_reduce_scatter(struct ct_dist *d, const void *send, void *recv, size_t count, ct_dtype wire,
                                 ct_dist_op op, const char *fn) {
  (void)d, (void)send, (void)recv, (void)count, (void)wire, (void)op;
  return CT__NO_MPI(fn);
}
ct_status ct__mpi_barrier(struct ct_dist *d, const char *fn) {
  (void)d;
  return CT__NO_MPI(fn);
}
ct_status ct__mpi_send(struct ct_dist *d, const void *buf, size_t bytes, int dst, const char *fn) {
  (void)d, (void)buf, (void)bytes, (void)dst;
  return CT__NO_MPI(fn);
}
ct_status ct__mpi_recv(struct ct_dist *d, void *buf, size_t bytes, int src, const char *fn) {
  (void)d, (void)buf, (void)bytes, (void)src;
  return CT__NO_MPI(fn);
}
