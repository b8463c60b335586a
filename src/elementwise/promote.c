/* Type promotion for elementwise ops: PyTorch's promote_types and result_type (with its ranking
 * of dimensioned tensors, zero-dim tensors and scalars), on libcltensor's dtypes. */
#include <math.h>

#include "core/dtype.h"
#include "core/error.h"
#include "elementwise/elementwise.h"
#include "tensor/tensor.h"

/* Categories: bool < integer < float. */
static int ct__ew_category(ct_dtype t) {
  if (t == CT_BOOL) return 0;
  return ct_dtype_is_floating_point(t) ? 2 : 1;
}

/* Bits of a signed integer dtype (u8 counts as 8, unsigned but ranked with them). */
static int ct__ew_int_bits(ct_dtype t) { return (int)ct_dtype_size(t) * 8; }

ct_status ct__ew_promote(ct_dtype *out, ct_dtype a, ct_dtype b, const char *fn) {
  if (a == b) {
    *out = a;
    return CT_OK;
  }
  if (ct__dtype_is_unsigned_storage(a) || ct__dtype_is_unsigned_storage(b)) {
    /* PyTorch promotes u16, u32 and u64 only with floats (the float wins) and refuses every
     * other mix: no signed dtype holds u64, and widening would differ from NumPy's rules. */
    if (ct_dtype_is_floating_point(a)) {
      *out = a;
      return CT_OK;
    }
    if (ct_dtype_is_floating_point(b)) {
      *out = b;
      return CT_OK;
    }
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: dtypes %s and %s have no common dtype (PyTorch promotes u16, u32 and u64 only with "
                     "themselves and floats); ct_cast one operand first",
                     fn, ct_dtype_name(a), ct_dtype_name(b));
  }
  int ca = ct__ew_category(a), cb = ct__ew_category(b);
  if (ca != cb) {
    *out = ca > cb ? a : b;
    return CT_OK;
  }
  if (ca == 1) {
    /* The wider one, except that u8 with i8 needs i16 to hold both ranges. */
    int ba = ct__ew_int_bits(a), bb = ct__ew_int_bits(b);
    if (ba == bb) {
      *out = CT_I16; /* u8 and i8 */
    } else {
      *out = ba > bb ? a : b;
    }
    return CT_OK;
  }
  /* Floats: f16 and bf16 each lack the other's range or precision; f32 holds both. */
  if ((a == CT_F16 && b == CT_BF16) || (a == CT_BF16 && b == CT_F16)) {
    *out = CT_F32;
    return CT_OK;
  }
  *out = ct_dtype_size(a) > ct_dtype_size(b) ? a : b;
  return CT_OK;
}

bool ct__ew_scalar_is_int(double s) {
  /* 2^63 is exact in double; the range is [-2^63, 2^63). */
  return isfinite(s) && s == floor(s) && s >= -9223372036854775808.0 && s < 9223372036854775808.0;
}

/* c10's combine_categories: the dtype of a higher-ranked group (dimensioned tensors over zero-dim
 * ones over scalars) stands unless the lower group is of a higher category (float over integer
 * over bool), in which case the two promote. CT__EW_NONE is "no operand in that group". */
#define CT__EW_NONE ((ct_dtype)-1)
static ct_status ct__ew_combine(ct_dtype *out, ct_dtype higher, ct_dtype lower, const char *fn) {
  if (higher == CT__EW_NONE || lower == CT__EW_NONE) {
    *out = higher == CT__EW_NONE ? lower : higher;
    return CT_OK;
  }
  if (ct_dtype_is_floating_point(higher) || ct__ew_category(higher) >= ct__ew_category(lower)) {
    *out = higher;
    return CT_OK;
  }
  return ct__ew_promote(out, higher, lower, fn);
}

static ct_status ct__ew_group(ct_dtype *g, ct_dtype t, const char *fn) {
  if (*g == CT__EW_NONE) {
    *g = t;
    return CT_OK;
  }
  return ct__ew_promote(g, *g, t, fn);
}

ct_status ct__ew_result_type(ct_dtype *out, int n, const ct_tensor *const *t, int ns, const double *s,
                             const char *fn) {
  ct_dtype dim = CT__EW_NONE, zero = CT__EW_NONE, wrapped = CT__EW_NONE, low;
  for (int i = 0; i < n; i++) CT__TRY(ct__ew_group(t[i]->ndim ? &dim : &zero, t[i]->dtype, fn));
  /* A scalar is Python's int (i64) or float (the default dtype, f32). */
  for (int i = 0; i < ns; i++) CT__TRY(ct__ew_group(&wrapped, ct__ew_scalar_is_int(s[i]) ? CT_I64 : CT_F32, fn));
  CT__TRY(ct__ew_combine(&low, zero, wrapped, fn));
  return ct__ew_combine(out, dim, low, fn);
}

ct_dtype ct__ew_float_of(ct_dtype t) { return ct_dtype_is_floating_point(t) ? t : CT_F32; }

ct_status ct_promote_types(ct_dtype *out, ct_dtype a, ct_dtype b) {
  CT__CHECK_NOT_NULL("ct_promote_types", out);
  if ((unsigned)a >= CT_DTYPE_COUNT || (unsigned)b >= CT_DTYPE_COUNT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_promote_types: invalid dtype (%d, %d)", (int)a, (int)b);
  return ct__ew_promote(out, a, b, "ct_promote_types");
}
