/* The launch layer's geometry on plain shape/stride arrays (launch_geom.h). */
#include "kernel/launch_geom.h"

#include <stdbool.h>

static int64_t ct__abs64(int64_t v) { return v < 0 ? -v : v; }

int ct__collapse_dims(int ndim, int64_t *shape, int nst, int64_t *const *strides, unsigned flags) {
  int n = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 1) continue;
    shape[n] = shape[i];
    for (int s = 0; s < nst; s++) strides[s][n] = strides[s][i];
    n++;
  }
  if (flags & CT__COLLAPSE_ORDER) {
    /* Insertion sort: stable, and ndim is at most CT_MAX_DIMS. */
    for (int i = 1; i < n; i++) {
      for (int j = i; j > 0 && ct__abs64(strides[0][j - 1]) < ct__abs64(strides[0][j]); j--) {
        int64_t t = shape[j];
        shape[j] = shape[j - 1];
        shape[j - 1] = t;
        for (int s = 0; s < nst; s++) {
          t = strides[s][j];
          strides[s][j] = strides[s][j - 1];
          strides[s][j - 1] = t;
        }
      }
    }
  }
  /* A size-0 dim empties everything; keep the geometry as it is (nothing will be read). */
  for (int i = 0; i < n; i++)
    if (shape[i] == 0) return n;
  int m = 0;
  for (int i = 1; i < n; i++) {
    bool merge = true;
    for (int s = 0; s < nst; s++) merge = merge && strides[s][m] == shape[i] * strides[s][i];
    if (merge)
      shape[m] *= shape[i];
    else
      shape[++m] = shape[i];
    for (int s = 0; s < nst; s++) strides[s][m] = strides[s][i];
  }
  return n == 0 ? 0 : m + 1;
}

void ct__elem_span(int ndim, const int64_t *shape, const int64_t *strides, int64_t *first, int64_t *last) {
  *first = *last = 0;
  for (int i = 0; i < ndim; i++) {
    int64_t ext = (shape[i] - 1) * strides[i];
    if (ext < 0)
      *first += ext;
    else
      *last += ext;
  }
}
