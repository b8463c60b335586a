/* Internal: what the index ops (gather.c, scatter.c, scan.c, sort.c) share: dim and index
 * checks, the device-side bad-index record, and 1-D launches of kernels that bound-check their
 * work-item ids. */
#ifndef CT_INDEX_INDEX_H
#define CT_INDEX_INDEX_H

#include <CL/cl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cltensor/index.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* index must be i64 or i32: CT_ERR_DTYPE_MISMATCH naming fn, the argument name and its dtype. */
ct_status ct__index_check_dtype(const ct_tensor *index, const char *name, const char *fn);

/* t as the three kernel arguments the index kernels take per strided operand: its buffer, its
 * element offset (ct__karg_tensor) and n strides (in elements) as a long8, all called name. */
void ct__index_karg_strided(struct ct__kargs *a, const char *name, const ct_tensor *t, int n,
                            const int64_t *strides);

/* The bad-index record the kernels fill (kernels/index.cl, order.cl): 4 i64, zeroed on d's
 * queue when check is true (else left as allocated: see ct__index_check_needed).
 * ct__index_bad_read() reads it back (one small blocking read) into rec: rec[0] != 0
 * when an index was out of range, rec[1] the position the kernel recorded, rec[2] the value,
 * rec[3] a second coordinate where the kernel gives one. */
ct_status ct__index_bad_new(ct_tensor **rec, ct_device *d, bool check, const char *fn);
ct_status ct__index_bad_read(const ct_tensor *rec, int64_t out[4], const char *fn);
/* The launch of a kernel that checks indices: adds rec as its last argument ("err"), launches
 * nitems work-items as ct__launch1() (which ends the arguments and unlocks k), reads the
 * record into bad when check is true (else bad[0] = 0) and releases rec, whatever happens. */
ct_status ct__index_launch_checked(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t nitems,
                                   ct_tensor *rec, bool check, int64_t bad[4], const char *fn);
/* Whether the values of index must be checked against [0, size) on the device: false when they
 * are known to lie there (ct__tensor_known_range: an index tensor from ct_from_host, unwritten
 * since). Then the record is neither cleared nor read (check false above): the kernel cannot
 * write it, and the op makes no round trip to the host. */
bool ct__index_check_needed(const ct_tensor *index, int64_t size);
/* How many index checks read their result back from a device (ct__index_bad_read and the class
 * losses' flag): tests see with it that known indices make no round trip. */
extern atomic_long ct__index_checks_read;

/* Lines along dim dd (the elements along dd at fixed other coordinates), numbered row-major over
 * lshape: `shape` (ndim dims; a 0-dim shape counts as [1]) with dim dd set to 1. For each of the
 * nt tensors ts[i] (of ndim dims) str[i] gets its strides (0 for a 0-dim one) and step[i] its
 * stride along dd. Returns lshape's number of dims (at least 1); *len gets shape[dd]. */
int ct__index_lines(int64_t *lshape, int64_t *len, int ndim, const int64_t *shape, int dd, int nt,
                    const ct_tensor *const *ts, int64_t (*str)[CT_MAX_DIMS], int64_t *step);

/* Records r's backward when an input requires grad (tensor/graph.h): node op over ins[0..nin),
 * its record (ct__rec_index) the wrapped dim, saved (the index, the mask, or cumprod's x) and
 * out (cumprod's result); either may be NULL. */
ct_status ct__index_record(ct_tensor *r, ct__gop op, int nin, const ct_tensor *const *ins, int dim,
                           const ct_tensor *saved, const ct_tensor *out, const char *fn);

/* Row-major coordinates of linear position pos in shape, as text "[1, 0]". */
const char *ct__index_pos_str(char *buf, size_t size, int64_t pos, int ndim, const int64_t *shape);

#endif
