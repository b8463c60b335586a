/* The typed kernel argument builder (kargs.h). */
#include "kernel/kargs.h"

#include "core/error.h"

void ct__kargs_begin(struct ct__kargs *a, ct__kernel *k, cl_kernel ck) {
  a->k = k;
  a->ck = ck;
  a->next = 0;
  a->err = CL_SUCCESS;
  a->bad = 0;
  a->bad_name = NULL;
}

void ct__karg_fail(struct ct__kargs *a, const char *name, cl_int err) {
  cl_uint i = a->next++;
  if (a->err != CL_SUCCESS) return;
  a->err = err;
  a->bad = i;
  a->bad_name = name;
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

ct_status ct__kargs_end(struct ct__kargs *a, const char *fn) {
  const char *kn = ct__kernel_name(a->k);
  if (a->err != CL_SUCCESS)
    return ct__cl_error(a->err, "%s: kernel %s: setting argument %u (%s) failed", fn, kn, a->bad,
                        a->bad_name ? a->bad_name : "?");
  cl_uint want = ct__kernel_num_args(a->k);
  if (want != CT__KERNEL_NARGS_UNKNOWN && a->next != want)
    return ct__cl_error(CL_INVALID_KERNEL_ARGS, "%s: kernel %s takes %u arguments but %u were set", fn, kn,
                        want, a->next);
  return CT_OK;
}
