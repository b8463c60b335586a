/* Reduction geometry: dims lists, output shapes, the kept/reduced split. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "kernel/launch_geom.h"
#include "reduce/reduce.h"
#include "tensor/tensor.h"

ct_status ct__reduce_dim(int *out, int ndim, const int64_t *shape, int dim, const char *fn) {
  int n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n) {
    char sh[256];
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: dim %d is out of range for a tensor of shape %s (expected %d..%d)", fn,
                     dim, ct__shape_str(sh, sizeof sh, ndim, shape), -n, n - 1);
  }
  *out = ndim == 0 ? -1 : (dim < 0 ? dim + n : dim);
  return CT_OK;
}

ct_status ct__reduce_dims(bool *mask, int ndim, const int64_t *shape, int ndims, const int *dims,
                          const char *fn) {
  for (int i = 0; i < ndim; i++) mask[i] = ndims == 0;
  if (ndims < 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ndims is %d (expected >= 0; 0 reduces every dim)",
                     fn, ndims);
  if (ndims == 0) return CT_OK;
  if (!dims)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dims is NULL but ndims is %d", fn, ndims);
  for (int i = 0; i < ndims; i++) {
    int d = 0; /* set by ct__reduce_dim on success; -O3 cannot see that */
    CT__TRY(ct__reduce_dim(&d, ndim, shape, dims[i], fn));
    for (int k = 0; k < i; k++) {
      int e = 0;
      ct__reduce_dim(&e, ndim, shape, dims[k], fn);
      if (e == d) {
        char sh[256];
        return ct__error(CT_ERR_INVALID_ARGUMENT,
                         "%s: dim %d appears more than once in dims (as %d and %d) for a tensor of "
                         "shape %s",
                         fn, d, dims[k], dims[i], ct__shape_str(sh, sizeof sh, ndim, shape));
      }
    }
    if (d >= 0) mask[d] = true;
  }
  return CT_OK;
}

int ct__reduce_out_shape(int64_t *oshape, int ndim, const int64_t *shape, const bool *mask,
                         bool keepdim) {
  int n = 0;
  for (int i = 0; i < ndim; i++) {
    if (!mask[i])
      oshape[n++] = shape[i];
    else if (keepdim)
      oshape[n++] = 1;
  }
  return n;
}

void ct__reduce_geom(struct ct__red_geom *g, int ndim, const int64_t *shape,
                     const int64_t *strides, const bool *mask, bool sort_reduced) {
  memset(g, 0, sizeof *g);
  g->nout = g->nred = 1;
  for (int i = 0; i < ndim; i++) {
    if (mask[i]) {
      g->rshape[g->rndim] = shape[i];
      g->rstride[g->rndim++] = strides[i];
      g->nred *= shape[i];
    } else {
      g->kshape[g->kndim] = shape[i];
      g->kstride[g->kndim++] = strides[i];
      g->nout *= shape[i];
    }
  }
  int64_t *ks[1] = {g->kstride}, *rs[1] = {g->rstride};
  g->kndim = ct__collapse_dims(g->kndim, g->kshape, 1, ks, 0);
  g->rndim = ct__collapse_dims(g->rndim, g->rshape, 1, rs, sort_reduced ? CT__COLLAPSE_ORDER : 0);
}

int ct__reduce_gpu_layout = 0;

ct_status ct__reduce_begin(ct_tensor **o, struct ct__red_geom *g, const ct_tensor *x, const bool *mask,
                           bool keepdim, ct_dtype odt, bool sort_reduced, const char *fn) {
  int64_t oshape[CT_MAX_DIMS];
  int ondim = ct__reduce_out_shape(oshape, x->ndim, x->shape, mask, keepdim);
  CT__TRY(ct__tensor_new(o, x->storage->device, odt, ondim, oshape, fn));
  ct__reduce_geom(g, x->ndim, x->shape, x->strides, mask, sort_reduced);
  return CT_OK;
}
