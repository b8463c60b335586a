/* Helpers shared by the index ops (index.h). */
#include <inttypes.h>
#include <stdio.h>

#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "index/index.h"

ct_status ct__index_check_dtype(const ct_tensor *index, const char *name, const char *fn) {
  if (index->dtype != CT_I64 && index->dtype != CT_I32)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: %s has dtype %s; expected i64 or i32", fn, name,
                     ct_dtype_name(index->dtype));
  return CT_OK;
}

void ct__index_karg_strided(struct ct__kargs *a, const char *name, const ct_tensor *t, int n,
                            const int64_t *strides) {
  ct__karg_tensor(a, name, t, 0);
  ct__karg_long8(a, name, n, strides, 0);
}

bool ct__index_check_needed(const ct_tensor *index, int64_t size) {
  int64_t lo, hi;
  return !ct__tensor_known_range(index, &lo, &hi) || lo < 0 || hi >= size;
}

ct_status ct__index_bad_new(ct_tensor **rec, ct_device *d, bool check, const char *fn) {
  static const cl_long zeros[4] = {0, 0, 0, 0};
  int64_t n = 4;
  CT__TRY(ct__tensor_new(rec, d, CT_I64, 1, &n, fn));
  if (!check) return CT_OK;
  /* Non-blocking from static memory: the queue is in order, so the kernel sees the zeros. */
  CT__TRY(ct__deferred_realize(fn));
  cl_int err = clEnqueueWriteBuffer(ct__device_queue(d), ct__tensor_mem(*rec), CL_FALSE,
                                    ct__tensor_byte_offset(*rec), sizeof zeros, zeros, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    ct_release(*rec);
    *rec = NULL;
    return ct__cl_error(err, "%s: clearing the bad-index record on %s failed", fn, d->spec);
  }
  return CT_OK;
}

ct_status ct__index_launch_checked(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t nitems,
                                   ct_tensor *rec, bool check, int64_t bad[4], const char *fn) {
  ct__karg_tensor(a, "err", rec, 0);
  ct_status st = ct__launch1(k, a, d, nitems, 0, fn);
  bad[0] = 0;
  if (st == CT_OK && check) st = ct__index_bad_read(rec, bad, fn);
  ct_release(rec);
  return st;
}

atomic_long ct__index_checks_read;

ct_status ct__index_bad_read(const ct_tensor *rec, int64_t out[4], const char *fn) {
  atomic_fetch_add_explicit(&ct__index_checks_read, 1, memory_order_relaxed);
  cl_long v[4];
  ct_device *d = rec->storage->device;
  CT__TRY(ct__deferred_realize(fn));
  cl_int err = clEnqueueReadBuffer(ct__device_queue(d), ct__tensor_mem(rec), CL_TRUE, ct__tensor_byte_offset(rec),
                                   sizeof v, v, 0, NULL, NULL);
  if (err != CL_SUCCESS) return ct__cl_error(err, "%s: reading the bad-index record on %s failed", fn, d->spec);
  /* The kernels set a 32-bit flag inside v[0] (a 32-bit atomic); the rest of it stays 0. */
  out[0] = v[0] != 0;
  for (int i = 1; i < 4; i++) out[i] = v[i];
  return CT_OK;
}

int ct__index_lines(int64_t *lshape, int64_t *len, int ndim, const int64_t *shape, int dd, int nt,
                    const ct_tensor *const *ts, int64_t (*str)[CT_MAX_DIMS], int64_t *step) {
  lshape[0] = 1;
  for (int t = 0; t < nt; t++) str[t][0] = 0;
  for (int i = 0; i < ndim; i++) {
    lshape[i] = shape[i];
    for (int t = 0; t < nt; t++) str[t][i] = ts[t]->strides[i];
  }
  *len = lshape[dd];
  for (int t = 0; t < nt; t++) step[t] = str[t][dd];
  lshape[dd] = 1;
  return ndim ? ndim : 1;
}

ct_status ct__index_record(ct_tensor *r, ct__gop op, int nin, const ct_tensor *const *ins, int dim,
                           const ct_tensor *saved, const ct_tensor *out, const char *fn) {
  ct__node *n = NULL;
  CT__TRY(ct__grad_record(&n, r, op, 0, nin, ins, fn));
  if (!n) return CT_OK;
  ct__rec_index *rec = &n->rec.index; /* every indexing row's record */
  rec->dim = dim;
  CT__TRY(ct__grad_save_as(n, &rec->index, saved, fn));
  return ct__grad_save_as(n, &rec->out, out, fn);
}

const char *ct__index_pos_str(char *buf, size_t size, int64_t pos, int ndim, const int64_t *shape) {
  int64_t c[CT_MAX_DIMS];
  for (int d = ndim - 1; d >= 0; d--) {
    c[d] = shape[d] > 0 ? pos % shape[d] : 0;
    pos = shape[d] > 0 ? pos / shape[d] : 0;
  }
  return ct__shape_str(buf, size, ndim, c);
}
