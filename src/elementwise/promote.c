/* Type promotion for elementwise ops, PyTorch's rules restricted to libcltensor's dtypes. */
#include <math.h>

#include "core/error.h"
#include "elementwise/elementwise.h"

/* Categories: bool < integer < float. Within integers and floats, a rank orders the dtypes. */
static int ct__ew_category(ct_dtype t) {
  if (t == CT_BOOL) return 0;
  return ct_dtype_is_float(t) ? 2 : 1;
}

ct_dtype ct__ew_promote(ct_dtype a, ct_dtype b) {
  if (a == b) return a;
  int ca = ct__ew_category(a), cb = ct__ew_category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) {
    /* u8 and i8 need i16 to hold both ranges; the next integer type up is i32. */
    if ((a == CT_U8 && b == CT_I8) || (a == CT_I8 && b == CT_U8)) return CT_I32;
    return a > b ? a : b; /* enum order u8, i8 < i32 < i64 */
  }
  /* Floats: f16 and bf16 each lack the other's range or precision; f32 holds both. */
  if ((a == CT_F16 && b == CT_BF16) || (a == CT_BF16 && b == CT_F16)) return CT_F32;
  return a > b ? a : b; /* f16, bf16 < f32 < f64 */
}

bool ct__ew_scalar_is_int(double s) {
  /* 2^63 is exact in double; the range is [-2^63, 2^63). */
  return isfinite(s) && s == floor(s) && s >= -9223372036854775808.0 && s < 9223372036854775808.0;
}

ct_dtype ct__ew_promote_scalar(ct_dtype t, double s) {
  int cs = ct__ew_scalar_is_int(s) ? 1 : 2, ct = ct__ew_category(t);
  if (cs <= ct) return t;
  return cs == 1 ? CT_I64 : CT_F32;
}

ct_dtype ct__ew_float_of(ct_dtype t) { return ct_dtype_is_float(t) ? t : CT_F32; }

void ct__ew_int_range(ct_dtype t, int64_t *lo, int64_t *hi) {
  switch (t) {
  case CT_BOOL: *lo = 0; *hi = 1; break;
  case CT_U8: *lo = 0; *hi = 255; break;
  case CT_I8: *lo = -128; *hi = 127; break;
  case CT_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
  default: *lo = INT64_MIN; *hi = INT64_MAX; break;
  }
}

ct_status ct_promote_types(ct_dtype *out, ct_dtype a, ct_dtype b) {
  CT__CHECK_NOT_NULL("ct_promote_types", out);
  if ((unsigned)a >= CT_DTYPE_COUNT || (unsigned)b >= CT_DTYPE_COUNT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_promote_types: invalid dtype (%d, %d)", (int)a, (int)b);
  *out = ct__ew_promote(a, b);
  return CT_OK;
}
