/* Helpers of the index tests: a fixed-seed generator, tensors from host arrays in a few
 * layouts, and reading results back. */
#ifndef INDEX_UTIL_H
#define INDEX_UTIL_H

#include <stdint.h>
#include <string.h>

#include "ct_test.h"

static uint64_t ix_state = 0x9e3779b97f4a7c15u;

static inline void ix_seed(uint64_t s) { ix_state = s * 0x9e3779b97f4a7c15u + 1; }

/* xorshift64*: deterministic across platforms. */
static inline uint64_t ix_next(void) {
  ix_state ^= ix_state >> 12;
  ix_state ^= ix_state << 25;
  ix_state ^= ix_state >> 27;
  return ix_state * 0x2545f4914f6cdd1dull;
}

static inline int64_t ix_below(int64_t n) { return (int64_t)(ix_next() % (uint64_t)n); }

/* Uniform in [-1, 1) with 12 bits, so that sums are exact enough to repeat but not trivial. */
static inline float ix_float(void) { return (float)((int64_t)(ix_next() >> 52) - 2048) / 2048.0f; }

static inline int64_t ix_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* A tensor of dtype t, shape, holding data (row-major logical values). With transposed, it is
 * stored as the transpose of its last two dims and returned as a transposed view, so that it
 * reads the same values through non-contiguous strides. */
static inline ct_tensor *ix_tensor(ct_device *d, ct_dtype t, int ndim, const int64_t *shape, const void *data,
                                   int transposed) {
  ct_tensor *x = NULL;
  if (!transposed || ndim < 2) {
    ck_assert_ct_ok(ct_from_host(&x, d, t, ndim, shape, data));
    return x;
  }
  size_t es = ct_dtype_size(t);
  int64_t n = ix_numel(ndim, shape), r = shape[ndim - 2], c = shape[ndim - 1];
  unsigned char *buf = malloc((size_t)n * es + 1);
  int64_t tshape[CT_MAX_DIMS];
  memcpy(tshape, shape, (size_t)ndim * sizeof *shape);
  tshape[ndim - 2] = c;
  tshape[ndim - 1] = r;
  for (int64_t b = 0; b < n / (r * c > 0 ? r * c : 1) && r * c > 0; b++)
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++)
        memcpy(buf + ((size_t)(b * r * c + j * r + i)) * es, (const unsigned char *)data + ((size_t)(b * r * c + i * c + j)) * es,
               es);
  ct_tensor *base = NULL;
  ck_assert_ct_ok(ct_from_host(&base, d, t, ndim, tshape, buf));
  ck_assert_ct_ok(ct_transpose(&x, base, ndim - 2, ndim - 1));
  ct_release(base);
  free(buf);
  return x;
}

/* The tensor's elements, row-major, in a new buffer (free it). */
static inline void *ix_read(const ct_tensor *t) {
  size_t nb = ct_tensor_nbytes(t);
  void *p = malloc(nb + 1);
  ct_tensor *c = NULL;
  ck_assert_ct_ok(ct_contiguous(&c, t));
  ck_assert_ct_ok(ct_to_host(c, p, nb));
  ct_release(c);
  return p;
}

static inline void ix_check_shape(const ct_tensor *t, int ndim, const int64_t *shape) {
  ck_assert_int_eq(ct_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++) ck_assert_int_eq(ct_tensor_shape(t)[i], shape[i]);
}

/* Row-major coordinates of i in shape. */
static inline void ix_coords(int64_t *c, int64_t i, int ndim, const int64_t *shape) {
  for (int d = ndim - 1; d >= 0; d--) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
}

static inline int64_t ix_linear(const int64_t *c, int ndim, const int64_t *shape) {
  int64_t i = 0;
  for (int d = 0; d < ndim; d++) i = i * shape[d] + c[d];
  return i;
}

/* Index values as i64 or i32 host data (buf has room for n i64). */
static inline ct_tensor *ix_index(ct_device *d, ct_dtype t, int ndim, const int64_t *shape, const int64_t *v,
                                  int transposed) {
  int64_t n = ix_numel(ndim, shape);
  if (t == CT_I64) return ix_tensor(d, t, ndim, shape, v, transposed);
  int32_t *w = malloc((size_t)n * 4 + 4);
  for (int64_t i = 0; i < n; i++) w[i] = (int32_t)v[i];
  ct_tensor *x = ix_tensor(d, t, ndim, shape, w, transposed);
  free(w);
  return x;
}

#endif
