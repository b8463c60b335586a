/* Host reference for the elementwise ops, in plain C, written from the documented semantics
 * (include/cltensor/elementwise.h, docs/OPS.md) and independent of the library's code:
 * its own promotion table, conversions through ct_f32_to_f16/ct_f32_to_bf16 only.
 *
 * How results are compared, and why these bounds:
 *  - Integer and bool results: bit-exact. Integer arithmetic is defined (wrapping), so there is
 *    one right answer.
 *  - "Exact" float ops (add, sub, mul, div and sqrt where the device rounds them correctly,
 *    maximum, minimum, floor_divide, remainder, neg, abs, relu, floor, ceil, round, clamp,
 *    where, comparisons): the reference computes the same IEEE operations in the same order in
 *    float (double for f64) on the host, where each is correctly rounded, so the device must
 *    match bit for bit (NaN matches any NaN). f16/bf16 compute in f32 and round once when
 *    stored, as the reference does, so they are bit-exact too.
 *  - Transcendental ops: the reference is the true value in long double (64-bit significand,
 *    11 bits beyond f64), and the device result must be within the OpenCL 1.2 full-profile
 *    bound of the builtin, in ulps of the true result (OpenCL's definition of ulp):
 *      f32: exp 3, log 3, sin 4, cos 4, tanh 5, rsqrt 2, pow 16 (and div 2.5, sqrt 3 on a
 *      device without correctly rounded division/sqrt); f64: exp 3, log 3, sin 4, cos 4,
 *      tanh 5, rsqrt 2, pow 16.
 *    Composites get a bound derived from their parts. A relative error of k ulp is at most
 *    k*2^-23 relative, and a relative error r is at most r*2^24 ulp, so relative errors add
 *    and the sum doubles when converted back to ulp:
 *      sigmoid = e/(1+e) or 1/(1+e), e = exp(-|x|): exp 3 ulp, 1+e inherits at most 3 ulp of
 *      e plus 0.5 for its rounding, the division 0.5: (3+3+0.5+0.5)*2 = 14, so 16 ulp.
 *      gelu = 0.5*x*erfc(-x*c): erfc 16 ulp; its argument carries 1 ulp (c's and the
 *      product's rounding), which erfc's condition number |z erfc'(z)/erfc(z)| <= 2z^2+2
 *      amplifies; two multiplications 0.5 each: 2*(16 + (2z^2+2) + 1) ulp, z = x/sqrt(2). The
 *      z^2 term is intrinsic to evaluating erfc at a rounded argument (PyTorch's f32 gelu
 *      carries it too) and only matters where gelu is tiny.
 *    f16/bf16 results of these ops: the device's f32 value is within the bound above, far
 *    below half a unit of a 16-bit format, so after both are rounded to the storage type they
 *    differ by at most 1 unit in the last place.
 *  - Infinities are one step beyond the largest finite value (so exp(88.7f) may round to
 *    FLT_MAX or inf within its bound); a true value beyond the format's range must give inf.
 *  - Devices without f32 denormals (CL_FP_DENORM) may flush a subnormal result to zero. */
#ifndef EW_REF_H
#define EW_REF_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cltensor/cltensor.h"

/* Reference op codes: the ref column of the op table (src/elementwise/ops.def), so that every
 * row has one; what each computes is written out below, from the documented semantics. */
enum ref_op {
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) ref,
#include "elementwise/ops.def"
#undef CT__EW_OP
  R_OP_COUNT
};

static const char *const ref_op_name[R_OP_COUNT] = {
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) [ref] = #name,
#include "elementwise/ops.def"
#undef CT__EW_OP
};

static inline bool ref_is_float(ct_dtype t) { return t == CT_F16 || t == CT_BF16 || t == CT_F32 || t == CT_F64; }
static inline bool ref_is_bool_out(enum ref_op op) {
  switch (op) {
  case R_EQ: case R_NE: case R_LT: case R_LE: case R_GT: case R_GE: case R_LOGICAL_AND: case R_LOGICAL_OR:
  case R_LOGICAL_NOT: case R_ISNAN: case R_ISINF: case R_ISFINITE: return true;
  default: return false;
  }
}
/* Float functions: bool and integer operands compute in f32 (and so does true division). */
static inline bool ref_is_unary_float_fn(enum ref_op op) {
  switch (op) {
  case R_EXP: case R_LOG: case R_SQRT: case R_RSQRT: case R_SIN: case R_COS: case R_TANH: case R_SIGMOID:
  case R_GELU: case R_ERF: case R_LOG1P: case R_EXPM1: case R_TAN: case R_ATAN: case R_SILU: case R_SOFTPLUS:
  case R_GELU_TANH: return true;
  default: return false;
  }
}
/* Ops PyTorch (and libcltensor) reject for bool. */
static inline bool ref_no_bool(enum ref_op op) {
  return op == R_SUB || op == R_NEG || op == R_FLOOR_DIVIDE || op == R_REMAINDER || op == R_FMOD || op == R_TRUNC;
}
/* Ops only for integer and bool dtypes (bitwise), and only for floating ones (leaky_relu). */
static inline bool ref_int_only(enum ref_op op) {
  return op == R_BITWISE_AND || op == R_BITWISE_OR || op == R_BITWISE_XOR || op == R_BITWISE_NOT;
}
static inline bool ref_float_only(enum ref_op op) { return op == R_LEAKY_RELU; }

/* ---- promotion, written out as a table indexed by dtype value (rows a, columns b: bool u8 i8
 * i32 i64 f16 bf16 f32 f64 i16 u16 u32 u64), torch.promote_types' table; REF_NONE where PyTorch
 * refuses (u16, u32, u64 with another integer or bool dtype). ---- */
#define REF_NONE ((ct_dtype)-1)
#define REF_NDTYPES 13
#define N_ REF_NONE
static const ct_dtype ref_promote_table[REF_NDTYPES][REF_NDTYPES] = {
    /* bool */ {CT_BOOL, CT_U8, CT_I8, CT_I32, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64, CT_I16, N_, N_, N_},
    /* u8   */ {CT_U8, CT_U8, CT_I16, CT_I32, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64, CT_I16, N_, N_, N_},
    /* i8   */ {CT_I8, CT_I16, CT_I8, CT_I32, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64, CT_I16, N_, N_, N_},
    /* i32  */ {CT_I32, CT_I32, CT_I32, CT_I32, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64, CT_I32, N_, N_, N_},
    /* i64  */ {CT_I64, CT_I64, CT_I64, CT_I64, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64, CT_I64, N_, N_, N_},
    /* f16  */ {CT_F16, CT_F16, CT_F16, CT_F16, CT_F16, CT_F16, CT_F32, CT_F32, CT_F64, CT_F16, CT_F16, CT_F16, CT_F16},
    /* bf16 */ {CT_BF16, CT_BF16, CT_BF16, CT_BF16, CT_BF16, CT_F32, CT_BF16, CT_F32, CT_F64, CT_BF16, CT_BF16, CT_BF16, CT_BF16},
    /* f32  */ {CT_F32, CT_F32, CT_F32, CT_F32, CT_F32, CT_F32, CT_F32, CT_F32, CT_F64, CT_F32, CT_F32, CT_F32, CT_F32},
    /* f64  */ {CT_F64, CT_F64, CT_F64, CT_F64, CT_F64, CT_F64, CT_F64, CT_F64, CT_F64, CT_F64, CT_F64, CT_F64, CT_F64},
    /* i16  */ {CT_I16, CT_I16, CT_I16, CT_I32, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64, CT_I16, N_, N_, N_},
    /* u16  */ {N_, N_, N_, N_, N_, CT_F16, CT_BF16, CT_F32, CT_F64, N_, CT_U16, N_, N_},
    /* u32  */ {N_, N_, N_, N_, N_, CT_F16, CT_BF16, CT_F32, CT_F64, N_, N_, CT_U32, N_},
    /* u64  */ {N_, N_, N_, N_, N_, CT_F16, CT_BF16, CT_F32, CT_F64, N_, N_, N_, CT_U64},
};
#undef N_

static inline int ref_category(ct_dtype t) { return t == CT_BOOL ? 0 : ref_is_float(t) ? 2 : 1; }

/* torch.result_type of two tensors of dtypes ta, tb with ndim na, nb: a zero-dim tensor beside
 * a dimensioned one counts only when of a higher category (then the two promote). */
static inline ct_dtype ref_rank2(ct_dtype ta, int na, ct_dtype tb, int nb) {
  if ((na == 0) == (nb == 0)) return ref_promote_table[ta][tb];
  ct_dtype dim = na ? ta : tb, zero = na ? tb : ta;
  return ref_category(zero) > ref_category(dim) ? ref_promote_table[dim][zero] : dim;
}

static inline bool ref_scalar_is_int(double s) {
  return isfinite(s) && s == floor(s) && s >= -9223372036854775808.0 && s < 9223372036854775808.0;
}

/* Tensor dtype t with scalar s: categories bool < integer < float; a scalar widens only a lower
 * category, to i64 (integer scalar) or f32 (float scalar). */
static inline ct_dtype ref_promote_scalar(ct_dtype t, double s) {
  bool si = ref_scalar_is_int(s);
  if (ref_is_float(t)) return t;
  if (t == CT_BOOL) return si ? CT_I64 : CT_F32;
  return si ? t : CT_F32;
}

/* The common (compute) dtype *k and result dtype *o of op when the operands promote to t. */
static inline void ref_types(enum ref_op op, ct_dtype t, ct_dtype *k, ct_dtype *o) {
  *k = t;
  if (op == R_DIV || op == R_ATAN2 || ref_is_unary_float_fn(op)) *k = ref_is_float(t) ? t : CT_F32;
  *o = ref_is_bool_out(op) ? CT_BOOL : *k;
}

/* The range of integer dtype k as doubles (exact for every dtype here but i64/u64, whose top is
 * given as 2^63 / 2^64, the first double past it). */
static inline void ref_range(ct_dtype k, double *mn, double *mx, bool *mx_excl) {
  *mx_excl = false;
  switch (k) {
  case CT_BOOL: *mn = 0; *mx = 1; break;
  case CT_U8: *mn = 0; *mx = 255; break;
  case CT_I8: *mn = -128; *mx = 127; break;
  case CT_I16: *mn = -32768; *mx = 32767; break;
  case CT_U16: *mn = 0; *mx = 65535; break;
  case CT_I32: *mn = INT32_MIN; *mx = INT32_MAX; break;
  case CT_U32: *mn = 0; *mx = 4294967295.0; break;
  case CT_I64: *mn = -0x1p63; *mx = 0x1p63; *mx_excl = true; break;
  case CT_U64: *mn = 0; *mx = 0x1p64; *mx_excl = true; break;
  default: *mn = -INFINITY; *mx = INFINITY; break;
  }
}

/* The documented scalar rule: does s fit dtype k (bool and floats: always; integers: finite
 * values in range)? */
static inline bool ref_scalar_fits(ct_dtype k, double s) {
  if (k == CT_BOOL || ref_is_float(k)) return true;
  double mn, mx;
  bool excl;
  ref_range(k, &mn, &mx, &excl);
  return s >= mn && (excl ? s < mx : s <= mx);
}

/* Types of "tensor of dtype t op scalar s": *overflow when s doesn't fit the compute dtype (an
 * error), except for comparisons, which then compare an integer scalar in i64 (u64 against a
 * negative one in f32). */
static inline void ref_scalar_types(enum ref_op op, ct_dtype t, double s, ct_dtype *k, ct_dtype *o, bool *overflow) {
  ref_types(op, ref_promote_scalar(t, s), k, o);
  *overflow = false;
  if (ref_scalar_fits(*k, s)) return;
  if (op >= R_EQ && op <= R_GE) {
    if (!ref_is_float(*k)) *k = *k == CT_U64 ? CT_F32 : CT_I64;
  } else {
    *overflow = true;
  }
}

/* ---- element access ---- */
static inline size_t ref_size(ct_dtype t) { return ct_dtype_size(t); }

static inline int64_t ref_ld_int(ct_dtype t, const void *p) {
  switch (t) {
  case CT_BOOL: return *(const uint8_t *)p != 0;
  case CT_U8: return *(const uint8_t *)p;
  case CT_I8: return *(const int8_t *)p;
  case CT_I32: return *(const int32_t *)p;
  case CT_I64: return *(const int64_t *)p;
  case CT_I16: return *(const int16_t *)p;
  case CT_U16: return *(const uint16_t *)p;
  case CT_U32: return *(const uint32_t *)p;
  case CT_U64: return *(const int64_t *)p; /* the bits; ref_ld_double/float read it unsigned */
  default: return 0;
  }
}

static inline double ref_ld_double(ct_dtype t, const void *p) {
  switch (t) {
  case CT_F16: return ct_f16_to_f32(*(const uint16_t *)p);
  case CT_BF16: return ct_bf16_to_f32(*(const uint16_t *)p);
  case CT_F32: return *(const float *)p;
  case CT_F64: return *(const double *)p;
  case CT_U64: return (double)*(const uint64_t *)p;
  default: return (double)ref_ld_int(t, p);
  }
}

/* Element of dtype t converted to float the way the device does: integers round once to float
 * (C's int64 -> float conversion rounds to nearest even, like OpenCL's). */
static inline float ref_ld_float(ct_dtype t, const void *p) {
  switch (t) {
  case CT_F16: return ct_f16_to_f32(*(const uint16_t *)p);
  case CT_BF16: return ct_bf16_to_f32(*(const uint16_t *)p);
  case CT_F32: return *(const float *)p;
  case CT_F64: return (float)*(const double *)p;
  case CT_U64: return (float)*(const uint64_t *)p;
  default: return (float)ref_ld_int(t, p);
  }
}

static inline float ref_round16(ct_dtype k, float v) {
  if (k == CT_F16) return ct_f16_to_f32(ct_f32_to_f16(v));
  if (k == CT_BF16) return ct_bf16_to_f32(ct_f32_to_bf16(v));
  return v;
}

/* Wraps v to integer dtype k (two's complement). */
static inline int64_t ref_wrap(ct_dtype k, int64_t v) {
  switch (k) {
  case CT_BOOL: return v != 0;
  case CT_U8: return (uint8_t)(uint64_t)v;
  case CT_I8: return (int8_t)(uint8_t)(uint64_t)v;
  case CT_I32: return (int32_t)(uint32_t)(uint64_t)v;
  case CT_I16: return (int16_t)(uint16_t)(uint64_t)v;
  case CT_U16: return (uint16_t)(uint64_t)v;
  case CT_U32: return (uint32_t)(uint64_t)v;
  default: return v; /* i64, and u64 by its bits */
  }
}

/* A value in the compute domain of a common dtype k. */
typedef struct {
  int64_t i;   /* integer and bool k */
  float f;     /* f16, bf16, f32 k (f16/bf16 values are exact in float) */
  double d;    /* f64 k */
} ref_val;

static inline ref_val ref_convert(ct_dtype k, ct_dtype t, const void *p) {
  ref_val v = {0, 0, 0};
  if (k == CT_F64)
    v.d = ref_ld_double(t, p);
  else if (ref_is_float(k))
    v.f = (t == k) ? ref_ld_float(t, p) : ref_round16(k, ref_ld_float(t, p));
  else
    v.i = ref_wrap(k, ref_ld_int(t, p));
  return v;
}

/* A scalar s entering compute dtype k: floats unrounded into the f32 computation (f16, bf16,
 * f32 k), integers already range-checked. */
static inline ref_val ref_scalar(ct_dtype k, double s) {
  ref_val v = {0, 0, 0};
  if (k == CT_F64)
    v.d = s;
  else if (ref_is_float(k))
    v.f = (float)s;
  else
    v.i = ref_wrap(k, k == CT_U64 ? (int64_t)(uint64_t)s : (int64_t)s);
  return v;
}

static inline bool ref_nonzero(ct_dtype t, const void *p) {
  return ref_is_float(t) ? ref_ld_double(t, p) != 0.0 : ref_ld_int(t, p) != 0;
}

/* ---- the expected result of one element ---- */
typedef struct {
  bool approx;          /* compare against truth within ulps (else exact bits) */
  uint64_t bits;        /* exact: expected raw element of dtype o */
  long double truth;    /* approx: the true value */
  double ulps;          /* approx: bound for f32/f64 outputs */
} ref_expect;

static inline uint64_t ref_bits_of_float(ct_dtype o, float f) {
  uint64_t b = 0;
  if (o == CT_F16) b = ct_f32_to_f16(f);
  else if (o == CT_BF16) b = ct_f32_to_bf16(f);
  else memcpy(&b, &f, 4);
  return b;
}
static inline uint64_t ref_bits_of_double(double d) {
  uint64_t b;
  memcpy(&b, &d, 8);
  return b;
}

/* PyTorch's floor division and remainder on floats (same operations as the device). */
static inline float ref_floordiv_f(float x, float y) {
  if (y == 0) return x / y;
  float mod = fmodf(x, y), div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysignf(0.0f, x / y);
  float fl = floorf(div);
  if (div - fl > 0.5f) fl += 1;
  return fl;
}
static inline double ref_floordiv_d(double x, double y) {
  if (y == 0) return x / y;
  double mod = fmod(x, y), div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign(0.0, x / y);
  double fl = floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}
static inline float ref_rem_f(float x, float y) {
  float m = fmodf(x, y);
  return (m != 0 && ((y < 0) != (m < 0))) ? m + y : m;
}
static inline double ref_rem_d(double x, double y) {
  double m = fmod(x, y);
  return (m != 0 && ((y < 0) != (m < 0))) ? m + y : m;
}

static inline bool ref_signed(ct_dtype k) { return k == CT_I8 || k == CT_I16 || k == CT_I32 || k == CT_I64; }
static inline int64_t ref_kmin(ct_dtype k) {
  return k == CT_I8 ? INT8_MIN : k == CT_I16 ? INT16_MIN : k == CT_I32 ? INT32_MIN : k == CT_I64 ? INT64_MIN : 0;
}
static inline unsigned ref_bits(ct_dtype k) { return k == CT_BOOL ? 8 : (unsigned)ref_size(k) * 8; }

/* u64 values travel as int64 bits; this orders them (and every other integer) correctly. */
static inline bool ref_int_less(ct_dtype k, int64_t x, int64_t y) {
  return k == CT_U64 ? (uint64_t)x < (uint64_t)y : x < y;
}

/* Integer op on values already wrapped to k; the result wrapped to k. */
static inline int64_t ref_int_op(enum ref_op op, ct_dtype k, int64_t x, int64_t y, int64_t lo, int64_t hi) {
  uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  bool sg = ref_signed(k);
  switch (op) {
  case R_ADD: return k == CT_BOOL ? (x | y) : ref_wrap(k, (int64_t)(ux + uy));
  case R_SUB: return ref_wrap(k, (int64_t)(ux - uy));
  case R_MUL: return k == CT_BOOL ? (x & y) : ref_wrap(k, (int64_t)(ux * uy));
  case R_POW: {
    if (k == CT_BOOL) return x | !y;
    if (sg && y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    uint64_t e = (uint64_t)y & (ref_bits(k) == 64 ? ~0ull : ((1ull << ref_bits(k)) - 1)), r = 1, b = ux;
    while (e) {
      if (e & 1) r *= b;
      b *= b;
      e >>= 1;
    }
    return ref_wrap(k, (int64_t)r);
  }
  case R_MAXIMUM: return ref_int_less(k, x, y) ? y : x;
  case R_MINIMUM: return ref_int_less(k, y, x) ? y : x;
  case R_FLOOR_DIVIDE: {
    if (y == 0) return 0;
    if (k == CT_U64) return (int64_t)(ux / uy);
    if (sg && y == -1) return ref_wrap(k, (int64_t)(0 - ux));
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) q -= 1;
    return q;
  }
  case R_REMAINDER: {
    if (y == 0 || (sg && y == -1)) return 0;
    if (k == CT_U64) return (int64_t)(ux % uy);
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  }
  case R_NEG: return ref_wrap(k, (int64_t)(0 - ux));
  case R_ABS: return (sg && x < 0) ? ref_wrap(k, (int64_t)(0 - ux)) : x;
  case R_RELU: return (sg && x < 0) ? 0 : x;
  case R_FLOOR: case R_CEIL: case R_ROUND: case R_TRUNC: return x;
  case R_FMOD: {
    if (y == 0 || (sg && y == -1)) return 0;
    if (k == CT_U64) return (int64_t)(ux % uy);
    return x % y; /* C: truncated, the sign of x */
  }
  case R_BITWISE_AND: return x & y;
  case R_BITWISE_OR: return x | y;
  case R_BITWISE_XOR: return x ^ y;
  case R_BITWISE_NOT: return k == CT_BOOL ? !x : ref_wrap(k, (int64_t)~ux);
  case R_SIGN: return sg ? (x > 0) - (x < 0) : x != 0;
  case R_CLAMP: {
    int64_t r = x;
    if (ref_int_less(k, r, lo)) r = lo;
    if (ref_int_less(k, hi, r)) r = hi;
    return r;
  }
  default: return 0;
  }
}

static inline bool ref_cmp(enum ref_op op, long double x, long double y) {
  switch (op) {
  case R_EQ: return x == y;
  case R_NE: return x != y;
  case R_LT: return x < y;
  case R_LE: return x <= y;
  case R_GT: return x > y;
  case R_GE: return x >= y;
  case R_LOGICAL_AND: return x != 0 && y != 0;
  case R_LOGICAL_OR: return x != 0 || y != 0;
  case R_LOGICAL_NOT: return x == 0;
  case R_ISNAN: return isnan(x);
  case R_ISINF: return isinf(x);
  case R_ISFINITE: return isfinite(x);
  default: return false;
  }
}
static inline bool ref_cmp_int(enum ref_op op, ct_dtype k, int64_t x, int64_t y) {
  switch (op) {
  case R_EQ: return x == y;
  case R_NE: return x != y;
  case R_LT: return ref_int_less(k, x, y);
  case R_LE: return !ref_int_less(k, y, x);
  case R_GT: return ref_int_less(k, y, x);
  case R_GE: return !ref_int_less(k, x, y);
  case R_LOGICAL_AND: return x != 0 && y != 0;
  case R_LOGICAL_OR: return x != 0 || y != 0;
  case R_LOGICAL_NOT: return x == 0;
  case R_ISFINITE: return true; /* integers: never NaN or infinite */
  default: return false;
  }
}

/* Bounds of the transcendental ops (see the top of this file). cr: the device rounds f32
 * division and sqrt correctly. x: the operand (gelu's and gelu_tanh's bounds depend on it).
 * OpenCL 1.2's bounds of the new builtins: erf 16, log1p 2, expm1 3, tan 5, atan 5, atan2 6.
 * silu = x * sigmoid(x): sigmoid's 16 and the product's 0.5, doubled: 33, so 34. softplus =
 * log1p(exp(x)): exp's 3 ulp enter log1p, whose condition number u / ((1 + u) log1p(u)) is at
 * most 1, and log1p adds 2: (3 + 2) * 2 = 10. gelu_tanh = x * sigmoid(w), w = 2 sqrt(2/pi) (x +
 * 0.044715 x^3): w carries 3.5 ulp (five roundings and two constants), which sigmoid's condition
 * number (at most |w|) amplifies, then sigmoid's 16 and the product's 0.5: 2 * (3.5|w| + 16.5),
 * so 8|w| + 34. Both add ref_subnormal_slack where sigmoid's value is subnormal. */
/* x * sigmoid(w) where exp(-|w|) is subnormal (f32: |w| > 87, f64: |w| > 708): the product of
 * that e, 3 ulp of the smallest subnormal off (its ulp does not shrink with it), and |x| is off
 * by 3|x| of those ulps, which are the result's too (the result is subnormal). */
static inline double ref_subnormal_slack(ct_dtype k, long double w, long double x) {
  long double lim = k == CT_F64 ? 708 : 87;
  return fabsl(w) > lim ? 3 * (double)fabsl(x) : 0;
}

static inline double ref_ulps(enum ref_op op, ct_dtype k, bool cr, long double x) {
  bool f64 = k == CT_F64;
  long double z2 = x * x / 2;
  switch (op) {
  case R_DIV: return f64 || cr ? 0 : 2.5;
  case R_SQRT: return f64 || cr ? 0 : 3;
  case R_EXP: case R_LOG: return 3;
  case R_SIN: case R_COS: return 4;
  case R_TANH: return 5;
  case R_RSQRT: return 2;
  case R_POW: return 16;
  case R_SIGMOID: return 16;
  case R_GELU: return 2 * (16 + (2 * (double)z2 + 2) + 1);
  case R_ERF: return 16;
  case R_LOG1P: return 2;
  case R_EXPM1: return 3;
  case R_TAN: case R_ATAN: return 5;
  case R_ATAN2: return 6;
  case R_SILU: return 34 + ref_subnormal_slack(k, x, x);
  case R_SOFTPLUS: return 10;
  case R_GELU_TANH: {
    long double w = 1.5957691216057307117L * (x + 0.044715L * x * x * x);
    return isfinite(w) ? 8 * (double)fabsl(w) + 34 + ref_subnormal_slack(k, w, x) : 34;
  }
  default: return 0;
  }
}

/* Float op in the compute precision of k (float for f16/bf16/f32), for the exact ops. */
static inline float ref_float_op(enum ref_op op, float x, float y, float lo, float hi, bool has_lo, bool has_hi) {
  switch (op) {
  case R_ADD: return x + y;
  case R_SUB: return x - y;
  case R_MUL: return x * y;
  case R_DIV: return x / y;
  case R_SQRT: return sqrtf(x);
  case R_MAXIMUM: return isnan(x) ? x : isnan(y) ? y : (x < y ? y : x);
  case R_MINIMUM: return isnan(x) ? x : isnan(y) ? y : (y < x ? y : x);
  case R_FLOOR_DIVIDE: return ref_floordiv_f(x, y);
  case R_REMAINDER: return ref_rem_f(x, y);
  case R_NEG: return -x;
  case R_ABS: return fabsf(x);
  case R_RELU: return (x > 0 || isnan(x)) ? x : 0.0f;
  case R_FLOOR: return floorf(x);
  case R_CEIL: return ceilf(x);
  case R_ROUND: return rintf(x);
  case R_TRUNC: return truncf(x);
  case R_SIGN: return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
  case R_FMOD: return fmodf(x, y);
  case R_LEAKY_RELU: return x > 0 ? x : x * y; /* y: the slope */
  case R_CLAMP: {
    float r = x;
    if (has_lo && r < lo) r = lo;
    if (has_hi && r > hi) r = hi;
    return r;
  }
  default: return 0;
  }
}
static inline double ref_double_op(enum ref_op op, double x, double y, double lo, double hi, bool has_lo, bool has_hi) {
  switch (op) {
  case R_ADD: return x + y;
  case R_SUB: return x - y;
  case R_MUL: return x * y;
  case R_DIV: return x / y;
  case R_SQRT: return sqrt(x);
  case R_MAXIMUM: return isnan(x) ? x : isnan(y) ? y : (x < y ? y : x);
  case R_MINIMUM: return isnan(x) ? x : isnan(y) ? y : (y < x ? y : x);
  case R_FLOOR_DIVIDE: return ref_floordiv_d(x, y);
  case R_REMAINDER: return ref_rem_d(x, y);
  case R_NEG: return -x;
  case R_ABS: return fabs(x);
  case R_RELU: return (x > 0 || isnan(x)) ? x : 0.0;
  case R_FLOOR: return floor(x);
  case R_CEIL: return ceil(x);
  case R_ROUND: return rint(x);
  case R_TRUNC: return trunc(x);
  case R_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
  case R_FMOD: return fmod(x, y);
  case R_LEAKY_RELU: return x > 0 ? x : x * y;
  case R_CLAMP: {
    double r = x;
    if (has_lo && r < lo) r = lo;
    if (has_hi && r > hi) r = hi;
    return r;
  }
  default: return 0;
  }
}

/* The true value of a transcendental op. */
static inline long double ref_truth(enum ref_op op, long double x, long double y) {
  switch (op) {
  case R_EXP: return expl(x);
  case R_LOG: return logl(x);
  case R_SQRT: return sqrtl(x);
  case R_RSQRT: return 1.0L / sqrtl(x);
  case R_SIN: return sinl(x);
  case R_COS: return cosl(x);
  case R_TANH: return tanhl(x);
  case R_SIGMOID: return 1.0L / (1.0L + expl(-x));
  case R_GELU: return 0.5L * x * erfcl(-x / sqrtl(2.0L));
  case R_POW: return powl(x, y);
  case R_DIV: return x / y;
  case R_ERF: return erfl(x);
  case R_LOG1P: return log1pl(x);
  case R_EXPM1: return expm1l(x);
  case R_TAN: return tanl(x);
  case R_ATAN: return atanl(x);
  case R_ATAN2: return atan2l(x, y);
  case R_SILU: return x / (1.0L + expl(-x));
  case R_SOFTPLUS: return x > 20 ? x : log1pl(expl(x)); /* PyTorch's threshold */
  case R_GELU_TANH: {
    /* 0.5 x (1 + tanh(z)) = x / (1 + exp(-2z)), which does not cancel for negative x */
    long double z = 0.79788456080286535588L * (x + 0.044715L * x * x * x);
    return x / (1.0L + expl(-2 * z));
  }
  default: return 0;
  }
}

/* Is op computed approximately for compute dtype k? */
static inline bool ref_is_approx(enum ref_op op, ct_dtype k, bool cr) {
  if (!ref_is_float(k)) return false;
  if (op == R_DIV || op == R_SQRT) return !(k == CT_F64 || cr);
  return op == R_POW || op == R_ATAN2 || (ref_is_unary_float_fn(op) && op != R_SQRT);
}

/* Expected output of op on x (and y) in compute dtype k, stored as dtype o. lo/hi: clamp. */
static inline ref_expect ref_compute(enum ref_op op, ct_dtype k, ct_dtype o, ref_val x, ref_val y, ref_val lo,
                                     ref_val hi, bool has_lo, bool has_hi, bool cr) {
  ref_expect e = {false, 0, 0, 0};
  if (ref_is_bool_out(op)) {
    bool r;
    if (k == CT_F64) r = ref_cmp(op, x.d, y.d);
    else if (ref_is_float(k)) r = ref_cmp(op, x.f, y.f);
    else r = ref_cmp_int(op, k, x.i, y.i);
    e.bits = r;
    return e;
  }
  if (!ref_is_float(k)) {
    e.bits = (uint64_t)ref_int_op(op, k, x.i, y.i, lo.i, hi.i);
    if (ref_size(o) < 8) e.bits &= (1ull << (8 * ref_size(o))) - 1;
    return e;
  }
  if (ref_is_approx(op, k, cr)) {
    long double xv = k == CT_F64 ? (long double)x.d : (long double)x.f;
    long double yv = k == CT_F64 ? (long double)y.d : (long double)y.f;
    e.approx = true;
    e.truth = ref_truth(op, xv, yv);
    e.ulps = ref_ulps(op, k, cr, xv);
    return e;
  }
  if (k == CT_F64)
    e.bits = ref_bits_of_double(ref_double_op(op, x.d, y.d, lo.d, hi.d, has_lo, has_hi));
  else
    e.bits = ref_bits_of_float(o, ref_float_op(op, x.f, y.f, lo.f, hi.f, has_lo, has_hi));
  return e;
}

/* The expectation "exactly v" for a value v of compute dtype k stored as k (where()). */
static inline ref_expect ref_value(ct_dtype k, ref_val v) {
  ref_expect e = {false, 0, 0, 0};
  if (k == CT_F64)
    e.bits = ref_bits_of_double(v.d);
  else if (ref_is_float(k))
    e.bits = ref_bits_of_float(k, v.f);
  else
    e.bits = (uint64_t)v.i & (ref_size(k) < 8 ? (1ull << (8 * ref_size(k))) - 1 : ~0ull);
  return e;
}

/* ---- comparing a device element against the expectation ---- */

static inline double ref_dev_value(ct_dtype o, const void *p) { return ref_ld_double(o, p); }

/* Ordered integer of a 16-bit float's bits, so that neighbours differ by 1. */
static inline int32_t ref_ord16(uint16_t h) { return (h & 0x8000) ? -(int32_t)(h & 0x7fff) : (int32_t)h; }

static inline bool ref_isnan16(ct_dtype o, uint16_t h) {
  return o == CT_F16 ? ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) : ((h & 0x7f80) == 0x7f80 && (h & 0x7f));
}

/* ulp of the true value t in a format with p significand bits and minimum exponent emin. */
static inline long double ref_ulp(long double t, int p, int emin) {
  if (t == 0 || !isfinite(t)) return ldexpl(1.0L, emin - p + 1);
  int e;
  frexpl(fabsl(t), &e); /* |t| = m 2^e, m in [0.5, 1) */
  if (e - 1 < emin) e = emin + 1;
  return ldexpl(1.0L, e - p);
}

/* Does device element dev (dtype o) satisfy the expectation? denorm: the device keeps f32
 * subnormals. *err receives the error in ulps (approx) for messages. */
static inline bool ref_check(const ref_expect *e, ct_dtype o, const void *dev, bool denorm, double *err) {
  *err = 0;
  size_t sz = ref_size(o);
  uint64_t got = 0;
  memcpy(&got, dev, sz);
  if (!e->approx) {
    if (got == e->bits) return true;
    if (!ref_is_float(o)) return false;
    double gv = ref_dev_value(o, &got), ev = ref_dev_value(o, &e->bits);
    if (isnan(gv) && isnan(ev)) return true;
    if (!denorm && o == CT_F32 && ev != 0 && fabs(ev) < FLT_MIN && gv == 0) return true;
    return false;
  }
  long double t = e->truth;
  if (o == CT_F16 || o == CT_BF16) {
    uint16_t g = (uint16_t)got;
    bool tn = isnan(t);
    if (tn || ref_isnan16(o, g)) return tn && ref_isnan16(o, g);
    float tf = (float)t; /* beyond float range: inf, as the 16-bit format too */
    uint16_t want = o == CT_F16 ? ct_f32_to_f16(tf) : ct_f32_to_bf16(tf);
    int32_t d = ref_ord16(g) - ref_ord16(want);
    *err = d < 0 ? -d : d;
    return *err <= 1;
  }
  double gv = ref_dev_value(o, &got);
  if (isnan(t) || isnan(gv)) return isnan(t) && isnan(gv);
  int p = o == CT_F64 ? 53 : 24, emin = o == CT_F64 ? -1022 : -126;
  long double top = ldexpl(1.0L, o == CT_F64 ? 1024 : 128); /* one step past the largest finite */
  long double g = isinf(gv) ? copysignl(top, gv) : (long double)gv;
  if (fabsl(t) >= top) t = copysignl(top, t);
  if (!denorm && o == CT_F32 && fabsl(t) < FLT_MIN && fabsl(g) <= FLT_MIN) return true;
  long double u = ref_ulp(t, p, emin);
  *err = (double)(fabsl(g - t) / u);
  return *err <= e->ulps;
}

#endif
