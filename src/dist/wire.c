/* Values on the host side of a collective: the wire dtype, conversions to and from it, and the
 * reductions a device group computes on the host (MPI groups let MPI reduce the wire values).
 *
 * f16 and bf16 travel and reduce as f32 and round once at the end: the same bits on every rank
 * whatever the reduction order inside MPI, and no rounding per addition. Integer sums wrap (done
 * in unsigned arithmetic, so the wrap is defined); bool is one byte 0/1 where SUM and MAX are
 * "or" and MIN is "and". */
#include <string.h>

#include "core/error.h"
#include "dist/dist.h"

ct_dtype ct__dist_wire(ct_dtype t) { return t == CT_F16 || t == CT_BF16 ? CT_F32 : t; }

/* The conversion `name` of n values of dtype t between storage and the wire: f16 and bf16 from
 * S to D by F16 and BF16, every other dtype copied as it is (nothing to do in place). */
#define CT__WIRE_CONVERT(name, S, D, F16, BF16)                              \
  void name(ct_dtype t, void *dst, const void *src, size_t n) {             \
    const S *s = src;                                                        \
    D *o = dst;                                                              \
    if (t == CT_F16)                                                         \
      for (size_t i = 0; i < n; i++) o[i] = F16(s[i]);                       \
    else if (t == CT_BF16)                                                   \
      for (size_t i = 0; i < n; i++) o[i] = BF16(s[i]);                      \
    else if (dst != src)                                                     \
      memcpy(dst, src, n * ct_dtype_size(t));                                \
  }
CT__WIRE_CONVERT(ct__dist_to_wire, uint16_t, float, ct_f16_to_f32, ct_bf16_to_f32)
CT__WIRE_CONVERT(ct__dist_from_wire, float, uint16_t, ct_f32_to_f16, ct_f32_to_bf16)
#undef CT__WIRE_CONVERT

/* SUM in the unsigned type U of the same width (wraps without undefined behaviour), MAX and MIN
 * in T. Floats: plain IEEE operations; MAX/MIN keep NaN (a NaN on any rank gives NaN). */
#define CT__RED_INT(T, U)                                                     \
  do {                                                                        \
    T *o = out;                                                               \
    const T *a = x, *b = y;                                                   \
    if (op == CT_DIST_SUM || op == CT_DIST_AVG)                               \
      for (size_t i = 0; i < n; i++) o[i] = (T)((U)a[i] + (U)b[i]);           \
    else if (op == CT_DIST_MAX)                                               \
      for (size_t i = 0; i < n; i++) o[i] = b[i] > a[i] ? b[i] : a[i];        \
    else                                                                      \
      for (size_t i = 0; i < n; i++) o[i] = b[i] < a[i] ? b[i] : a[i];        \
  } while (0)
#define CT__RED_FLT(T)                                                                  \
  do {                                                                                  \
    T *o = out;                                                                         \
    const T *a = x, *b = y;                                                             \
    if (op == CT_DIST_SUM || op == CT_DIST_AVG)                                         \
      for (size_t i = 0; i < n; i++) o[i] = a[i] + b[i];                                \
    else if (op == CT_DIST_MAX)                                                         \
      for (size_t i = 0; i < n; i++) o[i] = (b[i] > a[i] || b[i] != b[i]) ? b[i] : a[i]; \
    else                                                                                \
      for (size_t i = 0; i < n; i++) o[i] = (b[i] < a[i] || b[i] != b[i]) ? b[i] : a[i]; \
  } while (0)

void ct__dist_reduce(ct_dtype w, ct_dist_op op, void *acc, const void *x, size_t n) {
  ct__dist_reduce3(w, op, acc, acc, x, n);
}

void ct__dist_reduce3(ct_dtype w, ct_dist_op op, void *out, const void *x, const void *y, size_t n) {
  switch (w) {
    case CT_BOOL: {
      uint8_t *o = out;
      const uint8_t *a = x, *b = y;
      if (op == CT_DIST_MIN)
        for (size_t i = 0; i < n; i++) o[i] = (uint8_t)(a[i] && b[i]);
      else
        for (size_t i = 0; i < n; i++) o[i] = (uint8_t)(a[i] || b[i]);
      break;
    }
    case CT_U8: CT__RED_INT(uint8_t, uint8_t); break;
    case CT_I8: CT__RED_INT(int8_t, uint8_t); break;
    case CT_I16: CT__RED_INT(int16_t, uint16_t); break;
    case CT_U16: CT__RED_INT(uint16_t, uint16_t); break;
    case CT_I32: CT__RED_INT(int32_t, uint32_t); break;
    case CT_U32: CT__RED_INT(uint32_t, uint32_t); break;
    case CT_I64: CT__RED_INT(int64_t, uint64_t); break;
    case CT_U64: CT__RED_INT(uint64_t, uint64_t); break;
    case CT_F32: CT__RED_FLT(float); break;
    case CT_F64: CT__RED_FLT(double); break;
    default: break; /* f16/bf16 never are wire dtypes */
  }
}

void ct__dist_divide(ct_dtype w, void *acc, size_t n, int world) {
  if (w == CT_F32) {
    float *a = acc;
    for (size_t i = 0; i < n; i++) a[i] /= (float)world;
  } else if (w == CT_F64) {
    double *a = acc;
    for (size_t i = 0; i < n; i++) a[i] /= (double)world;
  }
}

ct_status ct__dist_check_op(ct_dist_op op, ct_dtype t, const char *fn) {
  if (op != CT_DIST_SUM && op != CT_DIST_AVG && op != CT_DIST_MAX && op != CT_DIST_MIN)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: op %d is not a ct_dist_op (CT_DIST_SUM, AVG, MAX or MIN)", fn,
                     (int)op);
  if (op == CT_DIST_AVG && !ct_dtype_is_floating_point(t))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: CT_DIST_AVG needs a floating tensor, not %s (an integer average would have to round: use "
                     "CT_DIST_SUM and divide as you mean it, or cast to a float first)",
                     fn, ct_dtype_name(t));
  return CT_OK;
}
