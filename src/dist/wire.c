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

/* The reductions, in place: o[i] = o[i] op v[i], or v[i] op o[i] when vfirst (the operands'
 * order matters: MAX and MIN of floats are not commutative in their bits, nor is a sum of two
 * NaNs). o and v never overlap, so the compiler vectorizes the loops (restrict); the earlier
 * out = x op y, out being x or y, ran scalar. SUM is done in U: for integers the unsigned type
 * of the same width, so that it wraps without undefined behaviour. MAX and MIN keep NaN (a NaN
 * on any rank gives NaN); for integers the NaN test is always false. */
#define CT__MAX(a, b) (((b) > (a) || (b) != (b)) ? (b) : (a))
#define CT__MIN(a, b) (((b) < (a) || (b) != (b)) ? (b) : (a))
/* Blocks of 16 with a fixed inner count, so that -O2's cheap vectorizer (GCC 12) takes them;
 * it leaves loops of unknown count scalar. */
#define CT__RED_LOOP(EXPR, A, B)                                                    \
  do {                                                                              \
    size_t i = 0;                                                                   \
    for (; i + 16 <= n; i += 16)                                                    \
      for (size_t j = i; j < i + 16; j++) o[j] = (ct__t)(EXPR(A[j], B[j]));        \
    for (; i < n; i++) o[i] = (ct__t)(EXPR(A[i], B[i]));                           \
  } while (0)
#define CT__ADD(a, b) ((ct__u)(a) + (ct__u)(b))
#define CT__RED_FN(name, T, U)                                                                  \
  static void name(ct_dist_op op, T *restrict o, const T *restrict v, size_t n, bool vfirst) { \
    typedef T ct__t;                                                                            \
    typedef U ct__u;                                                                            \
    if ((op == CT_DIST_SUM || op == CT_DIST_AVG) && vfirst) CT__RED_LOOP(CT__ADD, v, o);        \
    else if (op == CT_DIST_SUM || op == CT_DIST_AVG) CT__RED_LOOP(CT__ADD, o, v);               \
    else if (op == CT_DIST_MAX && vfirst) CT__RED_LOOP(CT__MAX, v, o);                          \
    else if (op == CT_DIST_MAX) CT__RED_LOOP(CT__MAX, o, v);                                    \
    else if (vfirst) CT__RED_LOOP(CT__MIN, v, o);                                               \
    else CT__RED_LOOP(CT__MIN, o, v);                                                           \
  }
CT__RED_FN(ct__red_u8, uint8_t, uint8_t)
CT__RED_FN(ct__red_i8, int8_t, uint8_t)
CT__RED_FN(ct__red_u16, uint16_t, uint16_t)
CT__RED_FN(ct__red_i16, int16_t, uint16_t)
CT__RED_FN(ct__red_u32, uint32_t, uint32_t)
CT__RED_FN(ct__red_i32, int32_t, uint32_t)
CT__RED_FN(ct__red_u64, uint64_t, uint64_t)
CT__RED_FN(ct__red_i64, int64_t, uint64_t)
CT__RED_FN(ct__red_f32, float, float)
CT__RED_FN(ct__red_f64, double, double)
#undef CT__RED_FN
#undef CT__RED_LOOP
#undef CT__ADD
#undef CT__MAX
#undef CT__MIN

/* bool: one byte 0/1; MIN is "and", SUM and MAX "or" (commutative in bits). */
static void ct__red_bool(ct_dist_op op, uint8_t *restrict o, const uint8_t *restrict v, size_t n) {
  if (op == CT_DIST_MIN)
    for (size_t i = 0; i < n; i++) o[i] = (uint8_t)(o[i] && v[i]);
  else
    for (size_t i = 0; i < n; i++) o[i] = (uint8_t)(o[i] || v[i]);
}

void ct__dist_reduce(ct_dtype w, ct_dist_op op, void *acc, const void *x, size_t n) {
  ct__dist_reduce3(w, op, acc, acc, x, n);
}

void ct__dist_reduce3(ct_dtype w, ct_dist_op op, void *out, const void *x, const void *y, size_t n) {
  /* In place into out, which is x or y; another out gets x first. */
  bool vfirst = out == y && out != x;
  const void *v = vfirst ? x : y;
  if (out != x && out != y) memcpy(out, x, n * ct_dtype_size(w));
  switch (w) {
    case CT_BOOL: ct__red_bool(op, out, v, n); break;
    case CT_U8: ct__red_u8(op, out, v, n, vfirst); break;
    case CT_I8: ct__red_i8(op, out, v, n, vfirst); break;
    case CT_I16: ct__red_i16(op, out, v, n, vfirst); break;
    case CT_U16: ct__red_u16(op, out, v, n, vfirst); break;
    case CT_I32: ct__red_i32(op, out, v, n, vfirst); break;
    case CT_U32: ct__red_u32(op, out, v, n, vfirst); break;
    case CT_I64: ct__red_i64(op, out, v, n, vfirst); break;
    case CT_U64: ct__red_u64(op, out, v, n, vfirst); break;
    case CT_F32: ct__red_f32(op, out, v, n, vfirst); break;
    case CT_F64: ct__red_f64(op, out, v, n, vfirst); break;
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
