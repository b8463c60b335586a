/* Host element conversions with exactly ct_cast()'s semantics. They fill ct_full()'s pattern and
 * are the reference the cast tests compare the device kernels against, so they are written
 * independently of the kernels: integer paths never pass through a lossy float, and every
 * float result is rounded once, to nearest even. */
#include <math.h>
#include <string.h>

#include "tensor/tensor.h"

/* The integer -mag (neg) or mag rounded to p significant bits, nearest even, as an exact double
 * (p <= 53). */
static double ct__round_mag(int neg, uint64_t mag, int p) {
  if (mag == 0) return 0.0;
  int msb = 63;
  while (!(mag >> msb)) msb--;
  double r;
  if (msb + 1 <= p) {
    r = (double)mag;
  } else {
    int shift = msb + 1 - p;
    uint64_t q = mag >> shift;
    uint64_t rem = mag & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    r = ldexp((double)q, shift);
  }
  return neg ? -r : r;
}

static double ct__round_int(int64_t v, int p) {
  int neg = v < 0;
  return ct__round_mag(neg, neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, p);
}

/* x rounded once to a binary format with p significant bits, smallest normal exponent emin
 * (gradual underflow below it) and largest finite value maxv; overflow gives infinity. */
static double ct__round_fmt(double x, int p, int emin, double maxv) {
  if (x == 0.0 || isnan(x) || isinf(x)) return x;
  int e = ilogb(x);
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - p + 1);
  double r = nearbyint(x / q) * q;
  if (fabs(r) > maxv) return copysign(INFINITY, x);
  return r;
}

#define CT__F16_MAX 65504.0
#define CT__BF16_MAX 3.3895313892515355e38

static int ct__is_int(ct_dtype t) { return !ct_dtype_is_floating_point(t); }

int64_t ct__host_load_int(ct_dtype t, const void *p) {
  switch (t) {
    case CT_BOOL: return *(const uint8_t *)p != 0;
    case CT_U8: return *(const uint8_t *)p;
    case CT_I8: return *(const int8_t *)p;
    case CT_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case CT_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case CT_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case CT_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case CT_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case CT_U64: { int64_t v; memcpy(&v, p, 8); return v; } /* the bits; see ct__host_load_double */
    default: return (int64_t)ct__host_load_double(t, p);
  }
}

double ct__host_load_double(ct_dtype t, const void *p) {
  uint16_t h;
  float f;
  double d;
  switch (t) {
    case CT_F16: memcpy(&h, p, 2); return ct_f16_to_f32(h);
    case CT_BF16: memcpy(&h, p, 2); return ct_bf16_to_f32(h);
    case CT_F32: memcpy(&f, p, 4); return f;
    case CT_F64: memcpy(&d, p, 8); return d;
    case CT_U64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    default: return (double)ct__host_load_int(t, p);
  }
}

void ct__host_store_int(ct_dtype t, void *p, int64_t v) {
  uint8_t b;
  int32_t i;
  uint16_t h;
  float f;
  double d;
  switch (t) {
    case CT_BOOL: b = v != 0; memcpy(p, &b, 1); break;
    case CT_U8:
    case CT_I8: b = (uint8_t)(uint64_t)v; memcpy(p, &b, 1); break;  /* wraps modulo 2^8 */
    case CT_I32: i = (int32_t)(uint32_t)(uint64_t)v; memcpy(p, &i, 4); break;
    case CT_I64:
    case CT_U64: memcpy(p, &v, 8); break; /* u64 wraps modulo 2^64 */
    case CT_I16:
    case CT_U16: h = (uint16_t)(uint64_t)v; memcpy(p, &h, 2); break;
    case CT_U32: { uint32_t u = (uint32_t)(uint64_t)v; memcpy(p, &u, 4); break; }
    case CT_F16:
      d = ct__round_int(v, 11);
      h = fabs(d) > CT__F16_MAX ? ct_f32_to_f16(d < 0 ? -INFINITY : INFINITY) : ct_f32_to_f16((float)d);
      memcpy(p, &h, 2);
      break;
    case CT_BF16: h = ct_f32_to_bf16((float)ct__round_int(v, 8)); memcpy(p, &h, 2); break;
    case CT_F32: f = (float)ct__round_int(v, 24); memcpy(p, &f, 4); break;
    case CT_F64: d = ct__round_int(v, 53); memcpy(p, &d, 8); break;
  }
}

/* Truncation toward zero with saturation at [lo, hi]; NaN gives 0. */
static int64_t ct__sat(double x, double lo, double hi, int64_t ilo, int64_t ihi) {
  if (isnan(x)) return 0;
  if (x <= lo) return ilo;
  if (x >= hi) return ihi;
  return (int64_t)trunc(x);
}

void ct__host_store_double(ct_dtype t, void *p, double x) {
  uint8_t b;
  int32_t i;
  int64_t l;
  uint16_t h;
  float f;
  switch (t) {
    case CT_BOOL: b = x != 0.0; memcpy(p, &b, 1); break;
    case CT_U8: b = (uint8_t)ct__sat(x, 0.0, 255.0, 0, 255); memcpy(p, &b, 1); break;
    case CT_I8: b = (uint8_t)(int8_t)ct__sat(x, -128.0, 127.0, -128, 127); memcpy(p, &b, 1); break;
    case CT_I32: i = (int32_t)ct__sat(x, -2147483648.0, 2147483647.0, INT32_MIN, INT32_MAX); memcpy(p, &i, 4); break;
    case CT_I16: h = (uint16_t)(int16_t)ct__sat(x, -32768.0, 32767.0, INT16_MIN, INT16_MAX); memcpy(p, &h, 2); break;
    case CT_U16: h = (uint16_t)ct__sat(x, 0.0, 65535.0, 0, UINT16_MAX); memcpy(p, &h, 2); break;
    case CT_U32: {
      uint32_t u = (uint32_t)ct__sat(x, 0.0, 4294967295.0, 0, UINT32_MAX);
      memcpy(p, &u, 4);
      break;
    }
    case CT_U64: {
      /* 2^64 is the first double above UINT64_MAX. */
      uint64_t u = isnan(x) || x <= 0.0 ? 0 : x >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)trunc(x);
      memcpy(p, &u, 8);
      break;
    }
    case CT_I64:
      /* 2^63 is the first double above INT64_MAX; -2^63 is exactly INT64_MIN. */
      if (isnan(x)) l = 0;
      else if (x >= 9223372036854775808.0) l = INT64_MAX;
      else if (x <= -9223372036854775808.0) l = INT64_MIN;
      else l = (int64_t)trunc(x);
      memcpy(p, &l, 8);
      break;
    case CT_F16:
      h = isnan(x) ? ct_f32_to_f16(NAN) : ct_f32_to_f16((float)ct__round_fmt(x, 11, -14, CT__F16_MAX));
      memcpy(p, &h, 2);
      break;
    case CT_BF16:
      h = isnan(x) ? ct_f32_to_bf16(NAN) : ct_f32_to_bf16((float)ct__round_fmt(x, 8, -126, CT__BF16_MAX));
      memcpy(p, &h, 2);
      break;
    case CT_F32: f = (float)x; memcpy(p, &f, 4); break;
    case CT_F64: memcpy(p, &x, 8); break;
  }
}

void ct__host_cast(ct_dtype dt, void *dst, ct_dtype st, const void *src) {
  if (st == CT_U64 && ct_dtype_is_floating_point(dt)) {
    /* Above 2^63 the value has no int64; round it once from its unsigned magnitude. */
    uint64_t v;
    memcpy(&v, src, 8);
    int p = dt == CT_F16 ? 11 : dt == CT_BF16 ? 8 : dt == CT_F32 ? 24 : 53;
    ct__host_store_double(dt, dst, ct__round_mag(0, v, p));
  } else if (ct__is_int(st))
    ct__host_store_int(dt, dst, ct__host_load_int(st, src));
  else
    ct__host_store_double(dt, dst, ct__host_load_double(st, src));
}
