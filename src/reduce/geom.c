/* Reduction geometry: dims lists, output shapes, the kept/reduced split, launch limits. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
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

int ct__coalesce(int ndim, int64_t *shape, int nst, int64_t *const *strides) {
  int n = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 1) continue;
    shape[n] = shape[i];
    for (int s = 0; s < nst; s++) strides[s][n] = strides[s][i];
    n++;
  }
  /* A size-0 dim empties everything; keep the geometry as it is (nothing will be read). */
  for (int i = 0; i < n; i++)
    if (shape[i] == 0) return n;
  int m = 0;
  for (int i = 1; i < n; i++) {
    bool merge = true;
    for (int s = 0; s < nst; s++) merge = merge && strides[s][m] == shape[i] * strides[s][i];
    if (merge) {
      shape[m] *= shape[i];
      for (int s = 0; s < nst; s++) strides[s][m] = strides[s][i];
    } else {
      m++;
      shape[m] = shape[i];
      for (int s = 0; s < nst; s++) strides[s][m] = strides[s][i];
    }
  }
  return n == 0 ? 0 : m + 1;
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
  if (sort_reduced) {
    /* Insertion sort by decreasing stride, stable. */
    for (int i = 1; i < g->rndim; i++) {
      int64_t sh = g->rshape[i], st = g->rstride[i];
      int k = i;
      for (; k > 0 && g->rstride[k - 1] < st; k--) {
        g->rshape[k] = g->rshape[k - 1];
        g->rstride[k] = g->rstride[k - 1];
      }
      g->rshape[k] = sh;
      g->rstride[k] = st;
    }
  }
  int64_t *ks[1] = {g->kstride}, *rs[1] = {g->rstride};
  g->kndim = ct__coalesce(g->kndim, g->kshape, 1, ks);
  g->rndim = ct__coalesce(g->rndim, g->rshape, 1, rs);
}

void ct__long8(cl_long8 *shape8, cl_long8 *stride8, int ndim, const int64_t *shape,
               const int64_t *strides) {
  for (int i = 0; i < 8; i++) {
    shape8->s[i] = i < ndim ? shape[i] : 1;
    stride8->s[i] = i < ndim ? strides[i] : 0;
  }
}

int ct__reduce_gpu_layout = 0;

int64_t ct__elem_offset(const ct_tensor *t) {
  return (int64_t)(ct__tensor_byte_offset(t) / ct_dtype_size(t->dtype));
}
