/* The typed kernel argument builder, and the ops' kernel lookup and 1-D launch (kargs.h). */
#include "kernel/kargs.h"

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"

void ct__kargs_begin(struct ct__kargs *a, ct__kernel *k, cl_kernel ck) {
  a->k = k;
  a->ck = ck;
  a->next = 0;
  a->err = CL_SUCCESS;
  a->bad = 0;
  a->bad_name = NULL;
  a->st = CT_OK;
}

void ct__karg_fail(struct ct__kargs *a, const char *name, cl_int err) {
  cl_uint i = a->next++;
  if (a->err != CL_SUCCESS) return;
  a->err = err;
  a->bad = i;
  a->bad_name = name;
}

void ct__karg_fail_status(struct ct__kargs *a, const char *name, ct_status st) {
  bool first = a->err == CL_SUCCESS;
  ct__karg_fail(a, name, CL_INVALID_VALUE);
  if (first) a->st = st;
}

void ct__karg(struct ct__kargs *a, const char *name, size_t size, const void *value) {
  if (a->err != CL_SUCCESS) {
    a->next++;
    return;
  }
  cl_int err = clSetKernelArg(a->ck, a->next, size, value);
  if (err != CL_SUCCESS)
    ct__karg_fail(a, name, err);
  else
    a->next++;
}

void ct__karg_long8(struct ct__kargs *a, const char *name, int n, const int64_t *v, int64_t fill) {
  cl_long8 r;
  for (int i = 0; i < 8; i++) r.s[i] = i < n ? v[i] : fill;
  ct__karg(a, name, sizeof r, &r);
}

void ct__karg_geom(struct ct__kargs *a, const char *name, int ndim, const int64_t *shape, int nst,
                   const int64_t *const *strides) {
  ct__karg_int(a, name, ndim);
  ct__karg_long8(a, name, ndim, shape, 1);
  for (int i = 0; i < nst; i++) ct__karg_long8(a, name, ndim, strides[i], 0);
}

ct_status ct__kargs_end(struct ct__kargs *a, const char *fn) {
  const char *kn = ct__kernel_name(a->k);
  if (a->st != CT_OK) return a->st;
  if (a->err != CL_SUCCESS)
    return ct__cl_error(a->err, "%s: kernel %s: setting argument %u (%s) failed", fn, kn, a->bad,
                        a->bad_name ? a->bad_name : "?");
  cl_uint want = ct__kernel_num_args(a->k);
  if (want != CT__KERNEL_NARGS_UNKNOWN && a->next != want)
    return ct__cl_error(CL_INVALID_KERNEL_ARGS, "%s: kernel %s takes %u arguments but %u were set", fn, kn,
                        want, a->next);
  return CT_OK;
}

ct_status ct__kernel_for(ct__kernel **k, ct_device *d, const char *file, const char *name, int dt,
                         const char *extra, const char *fn) {
  char opts[128];
  bool more = extra && extra[0];
  if (dt == CT__NO_DTYPE)
    snprintf(opts, sizeof opts, "%s", more ? extra : "");
  else
    snprintf(opts, sizeof opts, "-DCT_IN=%d%s%s", dt, more ? " " : "", more ? extra : "");
  ct_status st = ct__kernel_get(k, d, file, name, opts);
  if (st != CT_OK) ct__error_append(" (in %s)", fn);
  return st;
}

ct_status ct__launch1_enqueue(ct__kernel *k, ct_device *d, int64_t n, size_t group) {
  if (n <= 0) return CT_OK;
  size_t global = (size_t)n, local;
  if (group == 0) {
    ct__launch_dims(k, 1, &global, &local);
  } else {
    CT__TRY(ct__kernel_group_limit(&local, k, d, group, 0));
    global = (global + local - 1) / local * local;
  }
  return ct__kernel_launch(k, d, 1, &global, &local);
}

ct_status ct__launch1(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t n, size_t group,
                      const char *fn) {
  ct_status st = ct__kargs_end(a, fn);
  if (st == CT_OK) st = ct__launch1_enqueue(k, d, n, group);
  ct__kernel_unlock(k);
  return st;
}
