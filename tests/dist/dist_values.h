/* Values for the collective tests (tests/dist), shared by the MPI program and the device-group
 * suite: small integers, so that every sum is exact in every dtype, and the expected result of
 * each reduction computed on the host in double and stored with the library's conversions. */
#ifndef CT_TEST_DIST_VALUES_H
#define CT_TEST_DIST_VALUES_H

#include <stdint.h>
#include <string.h>

#include "cltensor/cltensor.h"

static const ct_dtype dv_dtypes[] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_U16, CT_I32, CT_U32,
                                     CT_I64,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
enum { DV_NDTYPES = sizeof dv_dtypes / sizeof dv_dtypes[0] };

/* Element i of rank r's tensor: 0..6 (bool: 0 or 1). */
static inline double dv_value(ct_dtype t, int r, int64_t i) {
  if (t == CT_BOOL) return (double)((i + r) % 3 == 0);
  return (double)((i * 3 + r * 5) % 7);
}

static inline void dv_store(ct_dtype t, void *p, int64_t i, double v) {
  switch (t) {
    case CT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case CT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case CT_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case CT_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case CT_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case CT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case CT_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case CT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case CT_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case CT_F16: ((uint16_t *)p)[i] = ct_f32_to_f16((float)v); break;
    case CT_BF16: ((uint16_t *)p)[i] = ct_f32_to_bf16((float)v); break;
    case CT_F32: ((float *)p)[i] = (float)v; break;
    case CT_F64: ((double *)p)[i] = v; break;
    default: break;
  }
}

/* Fills p with rank r's n elements. */
static inline void dv_fill(ct_dtype t, void *p, int r, int64_t n) {
  for (int64_t i = 0; i < n; i++) dv_store(t, p, i, dv_value(t, r, i));
}

/* The reduction over ranks 0..world-1 of element i, stored as the library must produce it: AVG
 * of f16/bf16 is the f32 sum divided in f32 and rounded once; of f32 the f32 quotient. */
static inline void dv_expect(ct_dtype t, ct_dist_op op, int world, void *p, int64_t i) {
  double acc = dv_value(t, 0, i);
  for (int r = 1; r < world; r++) {
    double v = dv_value(t, r, i);
    if (op == CT_DIST_MAX) acc = v > acc ? v : acc;
    else if (op == CT_DIST_MIN) acc = v < acc ? v : acc;
    else acc += v;
  }
  if (t == CT_BOOL && (op == CT_DIST_SUM)) acc = acc != 0;
  if (op == CT_DIST_AVG) {
    if (t == CT_F64) acc = acc / world;
    else acc = (double)((float)acc / (float)world);
  }
  dv_store(t, p, i, acc);
}

static inline int dv_is_float(ct_dtype t) { return t == CT_F16 || t == CT_BF16 || t == CT_F32 || t == CT_F64; }

#endif
