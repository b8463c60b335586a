/* dtype sizes and names, and host conversions for f16 and bf16. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "cltensor/dtype.h"
#include "core/dtype.h"
#include "core/error.h"

static const struct {
  const char *name;
  size_t size;
} ct__dtypes[CT_DTYPE_COUNT] = {
    [CT_BOOL] = {"bool", 1}, [CT_U8] = {"u8", 1},     [CT_I8] = {"i8", 1},
    [CT_I32] = {"i32", 4},   [CT_I64] = {"i64", 8},   [CT_F16] = {"f16", 2},
    [CT_BF16] = {"bf16", 2}, [CT_F32] = {"f32", 4},   [CT_F64] = {"f64", 8},
    [CT_I16] = {"i16", 2},   [CT_U16] = {"u16", 2},   [CT_U32] = {"u32", 4},
    [CT_U64] = {"u64", 8},
};

size_t ct_dtype_size(ct_dtype t) {
  return ((unsigned)t < CT_DTYPE_COUNT) ? ct__dtypes[t].size : 0;
}

const char *ct_dtype_name(ct_dtype t) {
  return ((unsigned)t < CT_DTYPE_COUNT) ? ct__dtypes[t].name : "invalid";
}

ct_status ct_dtype_from_name(ct_dtype *out, const char *name) {
  CT__CHECK_NOT_NULL("ct_dtype_from_name", out);
  CT__CHECK_NOT_NULL("ct_dtype_from_name", name);
  for (int i = 0; i < CT_DTYPE_COUNT; i++) {
    if (strcasecmp(name, ct__dtypes[i].name) == 0) {
      *out = (ct_dtype)i;
      return CT_OK;
    }
  }
  return ct__error(CT_ERR_INVALID_ARGUMENT,
                   "ct_dtype_from_name: unknown dtype '%s' (expected bool, u8, i8, i16, i32, i64, "
                   "u16, u32, u64, f16, bf16, f32 or f64)",
                   name);
}

bool ct_dtype_is_floating_point(ct_dtype t) {
  return t == CT_F16 || t == CT_BF16 || t == CT_F32 || t == CT_F64;
}

bool ct__dtype_is_unsigned_storage(ct_dtype t) { return t == CT_U16 || t == CT_U32 || t == CT_U64; }

ct_status ct__dtype_check_scalar(double v, ct_dtype t, const char *fn, const char *what) {
  /* [lo, hi] for the small integers; [lo, past) for i64 and u64, whose largest values have no
   * double: 2^63 and 2^64 are the first doubles above them. */
  double lo = 0, hi = 0, past = 0;
  switch (t) {
  case CT_U8: hi = 255; break;
  case CT_I8: lo = -128; hi = 127; break;
  case CT_I16: lo = -32768; hi = 32767; break;
  case CT_U16: hi = 65535; break;
  case CT_I32: lo = -2147483648.0; hi = 2147483647.0; break;
  case CT_U32: hi = 4294967295.0; break;
  case CT_I64: lo = -9223372036854775808.0; past = 9223372036854775808.0; break;
  case CT_U64: past = 18446744073709551616.0; break;
  default: return CT_OK; /* bool and the floats take every value */
  }
  if (v >= lo && (past ? v < past : v <= hi)) return CT_OK; /* false for NaN; inf is out of range */
  return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s %.17g cannot be converted to %s without overflow", fn, what, v,
                   ct_dtype_name(t));
}

static uint32_t ct__f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static float ct__bits_f32(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

uint16_t ct_f32_to_f16(float x) {
  uint32_t u = ct__f32_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t exp = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int e = (int)exp - 127 + 15;
  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    /* Subnormal (or zero) half: shift the full significand into place, rounding to even. */
    if (e < -10) return sign;
    uint32_t m = mant | 0x800000u;
    int shift = 14 - e;
    uint32_t half = m >> shift, rem = m & ((1u << shift) - 1u), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  /* A carry out of the mantissa correctly bumps the exponent, up to infinity. */
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;
  return (uint16_t)(sign | half);
}

float ct_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return ct__bits_f32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  return ct__bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t ct_f32_to_bf16(float x) {
  uint32_t u = ct__f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float ct_bf16_to_f32(uint16_t h) { return ct__bits_f32((uint32_t)h << 16); }

const char *ct__dtype_bits_type(size_t elem_size) {
  switch (elem_size) {
    case 1: return "uchar";
    case 2: return "ushort";
    case 4: return "uint";
    default: return "ulong";
  }
}
