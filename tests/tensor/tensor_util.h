/* Helpers shared by the tensor tests: a strided host gather (the reference for views) and
 * deterministic data. */
#ifndef CT_TENSOR_TEST_UTIL_H
#define CT_TENSOR_TEST_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/cltensor.h"

static const ct_dtype all_dtypes[CT_DTYPE_COUNT] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32, CT_I64, CT_U16,
                                                    CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};

static inline int dtype_ok(ct_device *d, ct_dtype t) {
  return t != CT_F64 || ct_device_properties(d)->fp64;
}

/* xorshift: deterministic pseudo-random 64-bit values. */
static inline uint64_t rnd64(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* Deterministic bytes that are valid values of dtype t (bool gets 0/1). */
static inline void fill_bytes(void *p, size_t n, ct_dtype t, uint64_t seed) {
  unsigned char *b = p;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) b[i] = t == CT_BOOL ? (unsigned char)(rnd64(&s) & 1) : (unsigned char)rnd64(&s);
}

/* Reference gather: out (row-major over shape) gets the elements of base at
 * offset + sum(index_k * coef_k), where the test derives coef and offset from the semantics of
 * the view under test over a contiguous base. */
static inline void ref_gather(void *out, const void *base, size_t es, int ndim, const int64_t *shape,
                              const int64_t *coef, int64_t offset) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, off = offset;
    for (int k = ndim - 1; k >= 0; k--) {
      off += (rest % shape[k]) * coef[k];
      rest /= shape[k];
    }
    memcpy((char *)out + i * es, (const char *)base + off * es, es);
  }
}

/* Reads t into a fresh malloc'd buffer (row-major). */
static inline void *read_all(const ct_tensor *t) {
  size_t n = ct_tensor_nbytes(t);
  void *p = malloc(n ? n : 1);
  if (ct_to_host(t, p, n) != CT_OK) {
    free(p);
    return NULL;
  }
  return p;
}

#endif
