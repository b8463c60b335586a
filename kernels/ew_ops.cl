/* The elementwise op functions and the conversions between storage and compute types, for one
 * compute dtype per program (-DEW_K; EW_O, the output dtype, only for the vector-path check):
 * shared by the per-op kernels of elementwise.cl and the fused kernels the fusion graph
 * generates (src/elementwise/fuse.c), which take it with the line `//#include "ew_ops.cl"`, as
 * elementwise.cl does. Nothing here is a kernel. */

/* Results must not depend on the compiler's choice to fuse a*b+c: host references and other
 * devices round each operation, and a fused kernel must give the bits the per-op kernels give. */
#pragma OPENCL FP_CONTRACT OFF

#ifndef EW_NIN
#define EW_NIN 1
#endif
#ifndef EW_SPOS
#define EW_SPOS 0
#endif
#ifndef EW_BA
#define EW_BA 0
#endif
#ifndef EW_BB
#define EW_BB 0
#endif
#ifndef EW_BC
#define EW_BC 0
#endif
#ifndef EW_VEC
#define EW_VEC 0
#endif
#ifndef EW_FULL
#define EW_FULL 0
#endif
#ifndef EW_SPER
#define EW_SPER 1
#endif
#ifndef EW_LO
#define EW_LO 0
#endif
#ifndef EW_HI
#define EW_HI 0
#endif

/* Every op function is inlined into its kernel: PoCL's inliner kept the larger ones (erf, gelu)
 * as calls, one per element, and a call keeps the work-item loop from being vectorized (erf:
 * 9-17 ns an element as a call, 1.9 inlined). Other compilers get plain `inline`. */
#if defined(__clang__)
#define EW_INLINE __attribute__((always_inline)) inline
#else
#define EW_INLINE inline
#endif

/* ---- compute types of the common dtype: element type EW_WB, its unsigned twin EW_UB (for
 * wrapping integer arithmetic), the mask element type EW_MB ---- */
#if EW_K == CT_DT_F16 || EW_K == CT_DT_BF16 || EW_K == CT_DT_F32
#define EW_FLT 1
#define EW_WB float
#define EW_MB int
#define EW_LIT(v) v##f /* unsuffixed constants are double, which needs cl_khr_fp64 */
#elif EW_K == CT_DT_F64
#define EW_FLT 1
#define EW_WB double
#define EW_MB long
#define EW_LIT(v) v
#else
#define EW_FLT 0
#if EW_K == CT_DT_BOOL || EW_K == CT_DT_U8
#define EW_WB uchar
#define EW_UB uchar
#define EW_MB char
#define EW_SIGNED 0
#define EW_BITS 8
#elif EW_K == CT_DT_I8
#define EW_WB char
#define EW_UB uchar
#define EW_MB char
#define EW_SIGNED 1
#define EW_BITS 8
#elif EW_K == CT_DT_I16
#define EW_WB short
#define EW_UB ushort
#define EW_MB short
#define EW_SIGNED 1
#define EW_BITS 16
#elif EW_K == CT_DT_U16
#define EW_WB ushort
#define EW_UB ushort
#define EW_MB short
#define EW_SIGNED 0
#define EW_BITS 16
#elif EW_K == CT_DT_I32
#define EW_WB int
#define EW_UB uint
#define EW_MB int
#define EW_SIGNED 1
#define EW_BITS 32
#elif EW_K == CT_DT_U32
#define EW_WB uint
#define EW_UB uint
#define EW_MB int
#define EW_SIGNED 0
#define EW_BITS 32
#elif EW_K == CT_DT_U64
#define EW_WB ulong
#define EW_UB ulong
#define EW_MB long
#define EW_SIGNED 0
#define EW_BITS 64
#else
#define EW_WB long
#define EW_UB ulong
#define EW_MB long
#define EW_SIGNED 1
#define EW_BITS 64
#endif
#endif

#define EW_WT(W) CT_CAT(EW_WB, W)
#define EW_MT(W) CT_CAT(EW_MB, W)
#define EW_UT(W) CT_CAT(EW_UB, W)
/* A constant of the compute type, broadcast for vectors. */
#define EW_CST(W, v) ((EW_WT(W))((EW_WB)(v)))
/* A condition as a mask of the compute type's size (scalar comparisons give int). */
#define EW_M(W, c) ((EW_MT(W))(c))
/* select() with the values in the compute type (scalar char arithmetic promotes to int). */
#define EW_SEL(W, a, b, c) select((EW_WT(W))(a), (EW_WT(W))(b), EW_M(W, c))
#define EW_ANY_(m) (m)
#define EW_ANY_8(m) any(m)
#define EW_ANY(W, m) CT_CAT(EW_ANY_, W)(m)
/* Integers wrap modulo 2^bits (two's complement), as in PyTorch: the arithmetic is done on the
 * unsigned type of the same size, where overflow is defined. */
#define EW_AS_U(W, x) CT_CAT(as_, EW_UT(W))(x)
#define EW_AS_W(W, x) CT_CAT(as_, EW_WT(W))(x)
#define EW_WRAP(W, x, op, y) EW_AS_W(W, (EW_UT(W))(EW_AS_U(W, x) op EW_AS_U(W, y)))

/* ---- the ops: one pure inline function per op (ew_add, ew_exp, ...; ops.def's fn column) on
 * values of the compute type, selected for a program by -DEW_FN=<function>. Every function
 * compiles for every compute dtype it can be called with (float-only ones exist only when EW_FLT,
 * integer-only ones only when !EW_FLT; dtype variants are #if inside), reads nothing but its
 * arguments and writes nothing, so a generated fused kernel (issue #16) can call them as they
 * are. Comparisons and the other bool-valued ops return a mask of the compute type's size
 * (EW_MT), stored as bool 0/1.
 *
 * Bodies that the 8-wide vector path also needs are written once for width W ("" or 8) as
 * EW_<OP>_B(W) and defined by EW_DEF1V/EW_DEF2V, which add the twin ew_<op>8 when EW_VEC. That
 * path serves plain arithmetic only (add, sub, mul, div, neg, abs): that is all the host asks it
 * for (f16 arithmetic on CPUs), and PoCL 3.1's vector math builtins return wrong lanes depending
 * on their neighbours (float8 sin/cos: a lane holding 1e30 turns sin(1e-3) into 0.008; double8
 * pow: pow(0.0117, 3) = inf; double8 fmod), while its scalar builtins, which the scalar path
 * uses, are right. Asking for the vector path with another op fails to build (no ew_<op>8). */
#if EW_VEC && (!EW_FLT || EW_K == CT_DT_BF16 || EW_O == CT_DT_BF16)
#error "elementwise.cl: the vector path (EW_VEC) is for f16, f32 and f64 results"
#endif

#define EW_DEF1(name, BODY) \
  EW_INLINE EW_WT() name(EW_WT() x) { BODY() }
#define EW_DEF2(name, BODY) \
  EW_INLINE EW_WT() name(EW_WT() x, EW_WT() y) { BODY() }
#if EW_VEC
#define EW_DEF1V(name, BODY) \
  EW_DEF1(name, BODY)        \
  EW_INLINE EW_WT(8) name##8(EW_WT(8) x) { BODY(8) }
#define EW_DEF2V(name, BODY) \
  EW_DEF2(name, BODY)        \
  EW_INLINE EW_WT(8) name##8(EW_WT(8) x, EW_WT(8) y) { BODY(8) }
#else
#define EW_DEF1V EW_DEF1
#define EW_DEF2V EW_DEF2
#endif

/* A fused kernel (issue #30) defines EW_ONLY and EW_USE_<function> for the functions it calls,
 * so that its program parses those alone (about 15 ms less of PoCL's build each, of 130);
 * without EW_ONLY every function is defined. EW_WANT(f): whether f is. The functions that others
 * call are wanted with them (the lists below follow the bodies). An undefined EW_USE_f is 0 in
 * #if, so EW_WANT is 0 unless asked. */
#ifndef EW_ONLY
#define EW_ONLY 0
#endif
#define EW_WANT(f) (!EW_ONLY || EW_USE_##f)
#if EW_ONLY
#if EW_USE_ew_silu || EW_USE_ew_gelu_tanh
#define EW_USE_ew_sigmoid 1
#endif
#if EW_USE_ew_softplus
#define EW_USE_ew_log1p 1
#endif
#if EW_USE_ew_log1p || EW_USE_ew_expm1
#define EW_USE_ew_log 1
#endif
#if EW_USE_ew_erf || EW_USE_ew_gelu
#define EW_USE_ew_erf_small 1
#define EW_USE_ew_erfc_big 1
#endif
#endif

/* -- arithmetic -- */
#if EW_K == CT_DT_BOOL
#define EW_ADD_B(W) return x | y;
#elif EW_FLT
#define EW_ADD_B(W) return x + y;
#else
#define EW_ADD_B(W) return EW_WRAP(W, x, +, y);
#endif
#if EW_WANT(ew_add)
EW_DEF2V(ew_add, EW_ADD_B)
#endif

#if EW_FLT
#define EW_SUB_B(W) return x - y;
#else
#define EW_SUB_B(W) return EW_WRAP(W, x, -, y);
#endif
#if EW_WANT(ew_sub)
EW_DEF2V(ew_sub, EW_SUB_B)
#endif

#if EW_K == CT_DT_BOOL
#define EW_MUL_B(W) return x & y;
#elif EW_FLT
#define EW_MUL_B(W) return x * y;
#else
#define EW_MUL_B(W) return EW_WRAP(W, x, *, y);
#endif
#if EW_WANT(ew_mul)
EW_DEF2V(ew_mul, EW_MUL_B)
#endif

#define EW_DIV_B(W) return x / y;
#if EW_FLT
#if EW_WANT(ew_div)
EW_DEF2V(ew_div, EW_DIV_B)
#endif
#endif

#if EW_FLT
#define EW_POW_B(W) return pow(x, y);
#elif EW_K == CT_DT_BOOL
#define EW_POW_B(W) return x | (y ^ EW_CST(W, 1));
#else
/* Square-and-multiply with wrapping. A negative exponent follows PyTorch's powi: 1 and -1 keep
 * their magnitude, everything else gives 0 (no division, so nothing can trap). */
#if EW_SIGNED
#define EW_POW_NEG(W)                                                                         \
  EW_WT(W) neg = EW_SEL(W, EW_CST(W, 0), EW_CST(W, 1), x == EW_CST(W, 1));                          \
  neg = EW_SEL(W, neg, EW_SEL(W, EW_CST(W, 1), EW_CST(W, -1), (y & EW_CST(W, 1)) != EW_CST(W, 0)),   \
               x == EW_CST(W, -1));                                                             \
  res = EW_SEL(W, res, neg, y < EW_CST(W, 0));
#else
#define EW_POW_NEG(W)
#endif
#define EW_POW_B(W)                                                                \
  EW_UT(W) r = (EW_UT(W))((EW_UB)1), base = EW_AS_U(W, x), e = EW_AS_U(W, y);      \
  for (int k = 0; k < EW_BITS; k++) {                                              \
    if (!EW_ANY(W, e != (EW_UT(W))((EW_UB)0))) break;                              \
    r = select(r, (EW_UT(W))(r * base), EW_M(W, (e & (EW_UT(W))((EW_UB)1)) != (EW_UT(W))((EW_UB)0))); \
    e >>= (EW_UT(W))((EW_UB)1);                                                    \
    base = (EW_UT(W))(base * base);                                                \
  }                                                                                \
  EW_WT(W) res = EW_AS_W(W, r);                                                    \
  EW_POW_NEG(W)                                                                    \
  return res;
#endif
#if EW_WANT(ew_pow)
EW_DEF2(ew_pow, EW_POW_B)
#endif

#if EW_FLT
/* pow(x, s) for the scalar exponents 2, 3, -1 and -2 (the host picks these by s's value:
 * ct__ew_launch_fn), as PyTorch computes them: (x * x) * x, not OpenCL's pow. y is s. */
#if EW_WANT(ew_powi2)
EW_INLINE EW_WT() ew_powi2(EW_WT() x, EW_WT() y) { (void)y; return x * x; }
#endif
#if EW_WANT(ew_powi3)
EW_INLINE EW_WT() ew_powi3(EW_WT() x, EW_WT() y) { (void)y; return x * x * x; }
#endif
#if EW_WANT(ew_powim1)
EW_INLINE EW_WT() ew_powim1(EW_WT() x, EW_WT() y) { (void)y; return EW_CST(, 1) / x; }
#endif
#if EW_WANT(ew_powim2)
EW_INLINE EW_WT() ew_powim2(EW_WT() x, EW_WT() y) { (void)y; return EW_CST(, 1) / (x * x); }
#endif
#endif

/* NaN propagates; otherwise std::max(x, y) / std::min(x, y), so between equal values (-0.0 and
 * +0.0) x is returned, as PyTorch on the CPU. pick_y: when y is the answer. */
#if EW_FLT
#define EW_MAXMIN(pick_y)                       \
  EW_WT() r = EW_SEL(, x, y, pick_y);           \
  r = EW_SEL(, r, y, y != y);                   \
  return EW_SEL(, r, x, x != x);
#else
#define EW_MAXMIN(pick_y) return EW_SEL(, x, y, pick_y);
#endif
#if EW_WANT(ew_maximum)
EW_INLINE EW_WT() ew_maximum(EW_WT() x, EW_WT() y) { EW_MAXMIN(x < y) }
#endif
#if EW_WANT(ew_minimum)
EW_INLINE EW_WT() ew_minimum(EW_WT() x, EW_WT() y) { EW_MAXMIN(y < x) }
#endif

#if EW_FLT
/* PyTorch's div_floor for floats: fmod-based, exact for representable quotients. */
#define EW_FLOOR_DIVIDE_B(W)                                                                        \
  EW_WT(W) q0 = x / y, mod = fmod(x, y);                                                  \
  EW_WT(W) div = (x - mod) / y;                                                           \
  div = EW_SEL(W, div, div - EW_CST(W, 1), (mod != EW_CST(W, 0)) & ((y < EW_CST(W, 0)) != (mod < EW_CST(W, 0)))); \
  EW_WT(W) fl = floor(div);                                                               \
  fl = EW_SEL(W, fl, fl + EW_CST(W, 1), (div - fl) > EW_CST(W, EW_LIT(0.5)));                 \
  fl = EW_SEL(W, fl, copysign(EW_CST(W, 0), q0), div == EW_CST(W, 0));                        \
  return EW_SEL(W, fl, q0, y == EW_CST(W, 0));
#elif EW_SIGNED
/* x // 0 is 0 (as NumPy) and MIN // -1 wraps to MIN; the divider only ever sees other
 * divisors, so nothing traps. */
#define EW_FLOOR_DIVIDE_B(W)                                                                        \
  EW_MT(W) z = EW_M(W, y == EW_CST(W, 0)), m1 = EW_M(W, y == EW_CST(W, -1));                 \
  EW_WT(W) ys = EW_SEL(W, y, EW_CST(W, 1), z | m1);                                        \
  EW_WT(W) q = x / ys, rr = x - q * ys;                                                   \
  q = EW_SEL(W, q, q - EW_CST(W, 1), (rr != EW_CST(W, 0)) & ((rr < EW_CST(W, 0)) != (ys < EW_CST(W, 0)))); \
  q = select(q, EW_WRAP(W, EW_CST(W, 0), -, x), m1);                                       \
  return select(q, EW_CST(W, 0), z);
#else
#define EW_FLOOR_DIVIDE_B(W)                                \
  EW_MT(W) z = EW_M(W, y == EW_CST(W, 0));         \
  EW_WT(W) ys = select(y, EW_CST(W, 1), z);         \
  return select((EW_WT(W))(x / ys), EW_CST(W, 0), z);
#endif
#if EW_WANT(ew_floor_divide)
EW_DEF2(ew_floor_divide, EW_FLOOR_DIVIDE_B)
#endif

#if EW_FLT
/* Python-style modulus with the sign of the divisor, as torch.remainder. */
#define EW_REMAINDER_B(W)              \
  EW_WT(W) mod = fmod(x, y);   \
  return EW_SEL(W, mod, mod + y, (mod != EW_CST(W, 0)) & ((y < EW_CST(W, 0)) != (mod < EW_CST(W, 0))));
#elif EW_SIGNED
#define EW_REMAINDER_B(W)                                                                        \
  EW_MT(W) z = EW_M(W, y == EW_CST(W, 0)) | EW_M(W, y == EW_CST(W, -1));                     \
  EW_WT(W) ys = select(y, EW_CST(W, 1), z);                                                 \
  EW_WT(W) rr = x % ys;                                                                   \
  rr = EW_SEL(W, rr, rr + ys, (rr != EW_CST(W, 0)) & ((rr < EW_CST(W, 0)) != (ys < EW_CST(W, 0)))); \
  return select(rr, EW_CST(W, 0), z);
#else
#define EW_REMAINDER_B(W)                                \
  EW_MT(W) z = EW_M(W, y == EW_CST(W, 0));         \
  EW_WT(W) ys = select(y, EW_CST(W, 1), z);         \
  return select((EW_WT(W))(x % ys), EW_CST(W, 0), z);
#endif
#if EW_WANT(ew_remainder)
EW_DEF2(ew_remainder, EW_REMAINDER_B)
#endif

/* C's fmod: the remainder of truncated division, with the sign of x (torch.fmod). Integers: x
 * fmod 0 is 0 (PyTorch raises ZeroDivisionError on the CPU; a kernel can't, and no op traps) and
 * MIN fmod -1 is 0, without the divider seeing -1. */
#if EW_WANT(ew_fmod)
EW_INLINE EW_WT() ew_fmod(EW_WT() x, EW_WT() y) {
#if EW_FLT
  return fmod(x, y);
#else
#if EW_SIGNED
  EW_MT() z = EW_M(, y == EW_CST(, 0)) | EW_M(, y == EW_CST(, -1));
#else
  EW_MT() z = EW_M(, y == EW_CST(, 0));
#endif
  EW_WT() ys = select(y, EW_CST(, 1), z);
  return select((EW_WT())(x % ys), EW_CST(, 0), z);
#endif
}
#endif

#if EW_FLT
#if EW_WANT(ew_atan2)
EW_INLINE EW_WT() ew_atan2(EW_WT() x, EW_WT() y) { return atan2(x, y); }
#endif
#endif

/* -- bitwise (integer and bool compute types; bool values are 0/1, so these stay 0/1) -- */
#if !EW_FLT
#if EW_WANT(ew_bitwise_and)
EW_INLINE EW_WT() ew_bitwise_and(EW_WT() x, EW_WT() y) { return x & y; }
#endif
#if EW_WANT(ew_bitwise_or)
EW_INLINE EW_WT() ew_bitwise_or(EW_WT() x, EW_WT() y) { return x | y; }
#endif
#if EW_WANT(ew_bitwise_xor)
EW_INLINE EW_WT() ew_bitwise_xor(EW_WT() x, EW_WT() y) { return x ^ y; }
#endif
#if EW_WANT(ew_bitwise_not)
EW_INLINE EW_WT() ew_bitwise_not(EW_WT() x) {
#if EW_K == CT_DT_BOOL
  return x ^ EW_CST(, 1);
#else
  return ~x;
#endif
}
#endif
#endif

/* -- comparisons and logical ops: masks -- */
#if EW_WANT(ew_eq)
EW_INLINE EW_MT() ew_eq(EW_WT() x, EW_WT() y) { return EW_M(, x == y); }
#endif
#if EW_WANT(ew_ne)
EW_INLINE EW_MT() ew_ne(EW_WT() x, EW_WT() y) { return EW_M(, x != y); }
#endif
#if EW_WANT(ew_lt)
EW_INLINE EW_MT() ew_lt(EW_WT() x, EW_WT() y) { return EW_M(, x < y); }
#endif
#if EW_WANT(ew_le)
EW_INLINE EW_MT() ew_le(EW_WT() x, EW_WT() y) { return EW_M(, x <= y); }
#endif
#if EW_WANT(ew_gt)
EW_INLINE EW_MT() ew_gt(EW_WT() x, EW_WT() y) { return EW_M(, x > y); }
#endif
#if EW_WANT(ew_ge)
EW_INLINE EW_MT() ew_ge(EW_WT() x, EW_WT() y) { return EW_M(, x >= y); }
#endif
#if EW_WANT(ew_logical_and)
EW_INLINE EW_MT() ew_logical_and(EW_WT() x, EW_WT() y) { return EW_M(, (x != EW_CST(, 0)) & (y != EW_CST(, 0))); }
#endif
#if EW_WANT(ew_logical_or)
EW_INLINE EW_MT() ew_logical_or(EW_WT() x, EW_WT() y) { return EW_M(, (x != EW_CST(, 0)) | (y != EW_CST(, 0))); }
#endif
#if EW_WANT(ew_logical_not)
EW_INLINE EW_MT() ew_logical_not(EW_WT() x) { return EW_M(, x == EW_CST(, 0)); }
#endif

/* isnan, isinf, isfinite: integers and bool hold no NaN or infinity, so for them each is the
 * constant int_value (EW_CLASS_TEST(name, float test, int_value)). */
#if EW_FLT
#define EW_CLASS_TEST(name, test, int_value) \
  EW_INLINE EW_MT() name(EW_WT() x) { return EW_M(, test); }
#else
#define EW_CLASS_TEST(name, test, int_value) \
  EW_INLINE EW_MT() name(EW_WT() x) {        \
    (void)x;                                 \
    return EW_M(, int_value);                \
  }
#endif
#if EW_WANT(ew_isnan)
EW_CLASS_TEST(ew_isnan, x != x, 0)
#endif
#if EW_WANT(ew_isinf)
EW_CLASS_TEST(ew_isinf, fabs(x) == (EW_WB)INFINITY, 0)
#endif
#if EW_WANT(ew_isfinite)
EW_CLASS_TEST(ew_isfinite, fabs(x) < (EW_WB)INFINITY, 1) /* false for NaN */
#endif

/* -- unary ops that keep the dtype -- */
#if EW_FLT
#define EW_NEG_B(W) return -x;
#else
#define EW_NEG_B(W) return EW_WRAP(W, EW_CST(W, 0), -, x);
#endif
#if EW_WANT(ew_neg)
EW_DEF1V(ew_neg, EW_NEG_B)
#endif

#if EW_FLT
#define EW_ABS_B(W) return fabs(x);
#elif EW_SIGNED
#define EW_ABS_B(W) return EW_SEL(W, x, EW_WRAP(W, EW_CST(W, 0), -, x), x < EW_CST(W, 0));
#else
#define EW_ABS_B(W) return x;
#endif
#if EW_WANT(ew_abs)
EW_DEF1V(ew_abs, EW_ABS_B)
#endif

#if EW_WANT(ew_relu)
EW_INLINE EW_WT() ew_relu(EW_WT() x) {
#if EW_FLT
  return EW_SEL(, EW_CST(, 0), x, (x > EW_CST(, 0)) | (x != x));
#elif EW_SIGNED
  return EW_SEL(, x, EW_CST(, 0), x < EW_CST(, 0));
#else
  return x;
#endif
}
#endif

/* floor, ceil, round (half to even in the default rounding mode, as torch.round), trunc: exact;
 * the identity on integers. */
#if EW_FLT
#define EW_ROUNDED(f) f(x)
#else
#define EW_ROUNDED(f) x
#endif
#if EW_WANT(ew_floor)
EW_INLINE EW_WT() ew_floor(EW_WT() x) { return EW_ROUNDED(floor); }
#endif
#if EW_WANT(ew_ceil)
EW_INLINE EW_WT() ew_ceil(EW_WT() x) { return EW_ROUNDED(ceil); }
#endif
#if EW_WANT(ew_round)
EW_INLINE EW_WT() ew_round(EW_WT() x) { return EW_ROUNDED(rint); }
#endif
#if EW_WANT(ew_trunc)
EW_INLINE EW_WT() ew_trunc(EW_WT() x) { return EW_ROUNDED(trunc); }
#endif
#undef EW_ROUNDED

/* -1, 0 or 1 (torch.sign): NaN and -0.0 give +0.0; bool is the identity. */
#if EW_WANT(ew_sign)
EW_INLINE EW_WT() ew_sign(EW_WT() x) {
#if EW_FLT || EW_SIGNED
  EW_WT() r = EW_SEL(, EW_CST(, 0), EW_CST(, 1), x > EW_CST(, 0));
  return EW_SEL(, r, EW_CST(, -1), x < EW_CST(, 0));
#else
  return EW_SEL(, EW_CST(, 0), EW_CST(, 1), x != EW_CST(, 0));
#endif
}
#endif

/* -- float functions (integer operands were converted to f32 by the host's rule) -- */
#if EW_FLT
/* f32 (and f16/bf16, computed in f32): common.cl's ct_expf, twice as fast as PoCL's exp. */
#if EW_K == CT_DT_F64
#define EW_EXP(x) exp(x)
#else
#define EW_EXP(x) ct_expf(x)
#endif
#if EW_WANT(ew_exp)
EW_INLINE EW_WT() ew_exp(EW_WT() x) { return EW_EXP(x); }
#endif
#if EW_WANT(ew_sqrt)
EW_INLINE EW_WT() ew_sqrt(EW_WT() x) { return sqrt(x); }
#endif
#if EW_WANT(ew_rsqrt)
EW_INLINE EW_WT() ew_rsqrt(EW_WT() x) { return rsqrt(x); }
#endif
#if EW_WANT(ew_sin)
EW_INLINE EW_WT() ew_sin(EW_WT() x) { return sin(x); }
#endif
#if EW_WANT(ew_cos)
EW_INLINE EW_WT() ew_cos(EW_WT() x) { return cos(x); }
#endif
#if EW_WANT(ew_tan)
EW_INLINE EW_WT() ew_tan(EW_WT() x) { return tan(x); }
#endif
#if EW_WANT(ew_atan)
EW_INLINE EW_WT() ew_atan(EW_WT() x) { return atan(x); }
#endif

/* exp(-|x|) never overflows, and e / (1 + e) keeps the tiny values of large negative x that
 * 1 / (1 + exp(-x)) would flush to 0. */
#if EW_WANT(ew_sigmoid)
EW_INLINE EW_WT() ew_sigmoid(EW_WT() x) {
  EW_WT() e = EW_EXP(-fabs(x));
  EW_WT() d = EW_CST(, 1) + e;
  return EW_SEL(, e / d, EW_CST(, 1) / d, x >= EW_CST(, 0));
}
#endif

/* log, log1p, expm1, tanh, erf and gelu's erfc in f32 are computed here, from exp and
 * polynomials, rather than with the builtins: PoCL 3.1's log, log1p, expm1, erf and erfc take
 * 14-110 ns an element on a CPU (scalar calls that keep the work-item loop from being
 * vectorized; exp takes 0.6-1) and its tanh 2-3 times an exp, which made nn.GELU() 100x and
 * tanh 3x slower than a memory pass. f64 keeps the builtins. The polynomials are near-minimax fits
 * (Lawson's algorithm against mpmath; tools/common/fit_ew_poly.py) with fitting errors of 4e-9
 * to 6e-9 relative, below f32's 6e-8; the results stay within OpenCL's bounds of the builtins
 * (tanh 5 ulp, erf/erfc 16): on every 61st f32 bit pattern, against long double references, with
 * a 1-ulp exp: tanh 1.3 ulp, erf 2.4, erfc 8.9 (1 - erf near |x| = 1), gelu 13.5. Every lane
 * computes both branches and picks one with select() (a ?: between them became a branch, which
 * kept PoCL from vectorizing the work-item loop: erf 10 ns an element, 1.7 with select), and
 * signs go on with bit operations (PoCL's copysign is a call per element). */
#if EW_K == CT_DT_F64
#if EW_WANT(ew_log)
EW_INLINE EW_WT() ew_log(EW_WT() x) { return log(x); }
#endif
#if EW_WANT(ew_log1p)
EW_INLINE EW_WT() ew_log1p(EW_WT() x) { return log1p(x); }
#endif
#if EW_WANT(ew_expm1)
EW_INLINE EW_WT() ew_expm1(EW_WT() x) { return expm1(x); }
#endif
#if EW_WANT(ew_tanh)
EW_INLINE EW_WT() ew_tanh(EW_WT() x) { return tanh(x); }
#endif
#if EW_WANT(ew_erf)
EW_INLINE EW_WT() ew_erf(EW_WT() x) { return erf(x); }
#endif
/* The exact (erf) form, written with erfc: 1 + erf(x/sqrt2) = erfc(-x/sqrt2), which keeps its
 * relative accuracy for negative x where 1 + erf cancels. */
#if EW_WANT(ew_gelu)
EW_INLINE EW_WT() ew_gelu(EW_WT() x) { return EW_LIT(0.5) * x * erfc(-x * EW_LIT(0.70710678118654752440)); }
#endif
#else
/* log(x) = k ln2 + log(m), x = m 2^k with m in [sqrt(1/2), sqrt(2)), log(m) from s = f / (2 + f),
 * f = m - 1, as FreeBSD's logf (its constants: ln2 in two parts, the Lg1-4 of its polynomial
 * in s^2); subnormal x scaled by 2^23 first. 0.83 ulp at most on the sweep (bound 3). */
#if EW_WANT(ew_log)
EW_INLINE float ew_log(float x0) {
  bool sub = x0 < 1.17549435e-38f;
  float x = EW_SEL(, x0, x0 * 8388608.0f, sub);
  uint ix = as_uint(x) + (0x3f800000u - 0x3f3504f3u);
  int k = (int)(ix >> 23) - 0x7f - select(0, 23, (int)sub);
  float f = as_float((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  float s = f / (2.0f + f);
  float z = s * s, w = z * z;
  float r2 = z * (0.66666662693f + w * 0.28498786688f) + w * (0.40000972152f + w * 0.24279078841f);
  float hfsq = 0.5f * f * f, dk = (float)k;
  float r = s * (hfsq + r2) + dk * 9.0580006145e-06f - hfsq + f + dk * 6.9313812256e-01f;
  r = EW_SEL(, r, -INFINITY, x0 == 0.0f);
  r = EW_SEL(, r, NAN, x0 < 0.0f);
  r = EW_SEL(, r, INFINITY, x0 == INFINITY);
  return EW_SEL(, r, x0, x0 != x0);
}
#endif

/* log1p(x) = log(u) - ((u - 1) - x) / u, u = 1 + x: the second term corrects u's rounding
 * (x where u rounds to 1). 1.44 ulp at most on the sweep (bound 2). */
#if EW_WANT(ew_log1p)
EW_INLINE float ew_log1p(float x) {
  float u = 1.0f + x;
  float r = ew_log(u) - ((u - 1.0f) - x) / u;
  r = EW_SEL(, r, x, u == 1.0f);
  r = EW_SEL(, r, -INFINITY, x == -1.0f);
  return EW_SEL(, r, INFINITY, x == INFINITY);
}
#endif

/* expm1(x) = (u - 1) x / log(u), u = exp(x) (Kahan's: the log of the rounded u undoes most of
 * its rounding); x where u rounds to 1, -1 where u - 1 does, u - 1 itself above 20 (u's rounding
 * is then the result's). 2.4 ulp at most on the sweep with glibc's expf (bound 3). */
#if EW_WANT(ew_expm1)
EW_INLINE float ew_expm1(float x) {
  float u = ct_expf(x), um1 = u - 1.0f;
  float r = um1 * (x / ew_log(u));
  r = EW_SEL(, r, x, u == 1.0f);
  r = EW_SEL(, r, -1.0f, um1 == -1.0f);
  r = EW_SEL(, r, um1, x > 20.0f);
  return EW_SEL(, r, x, x != x);
}
#endif

/* tanh(z) for z = |x| < 0.625 as z + z^3 P(z^2), else 1 - 2 / (exp(2z) + 1); the sign of x. */
#if EW_WANT(ew_tanh)
EW_INLINE float ew_tanh(float x) {
  float z = fabs(x), s = x * x;
  float p = CT_FMA(CT_FMA(CT_FMA(CT_FMA(-5.704986327e-03f, s, 2.063908657e-02f), s, -5.373971485e-02f), s, 1.333144219e-01f), s,
                -3.333328194e-01f);
  float small = CT_FMA(z * s, p, z);
  float big = 1.0f - 2.0f / (ct_expf(z + z) + 1.0f);
  /* x's sign bit on t >= 0 (-0.0 stays -0.0): PoCL's copysign is a call per element. */
  return as_float(as_uint(EW_SEL(, big, small, z < 0.625f)) | (as_uint(x) & 0x80000000u));
}
#endif

/* erf(x) = x T(x^2) for |x| <= 1. */
#if EW_WANT(ew_erf_small)
EW_INLINE float ew_erf_small(float x) {
  float s = x * x;
  float p = CT_FMA(CT_FMA(CT_FMA(CT_FMA(CT_FMA(CT_FMA(7.853860975e-05f, s, -8.010193511e-04f), s, 5.188327673e-03f), s, -2.685381193e-02f),
                        s, 1.128358515e-01f), s, -3.761262582e-01f), s, 1.128379166e+00f);
  return x * p;
}
#endif

/* erfc(z) = exp(-z^2) / z P(1 / z^2) for z >= 1, one P for [1, 2) and one for [2, 10.1], where
 * z^2 = zz + err exactly (err from ct_sq_err), so that the exponent carries no rounding: exp(-z^2) =
 * exp(-zz) (1 - err). 0 beyond 10.1, where erfc underflows f32 (and inf would make err NaN). */
#if EW_WANT(ew_erfc_big)
EW_INLINE float ew_erfc_big(float z, float zz, float err) {
  float y = 1.0f / zz;
  bool lo = z < 2.0f;
  float p = lo ? -2.454820510e-02f : 0.0f;
  p = CT_FMA(p, y, lo ? 1.608219572e-01f : 2.921446233e+01f);
  p = CT_FMA(p, y, lo ? -4.734889284e-01f : -3.982543374e+01f);
  p = CT_FMA(p, y, lo ? 8.325114377e-01f : 2.498379035e+01f);
  p = CT_FMA(p, y, lo ? -9.847970175e-01f : -1.006379979e+01f);
  p = CT_FMA(p, y, lo ? 8.473101445e-01f : 3.227570513e+00f);
  p = CT_FMA(p, y, lo ? -5.768773945e-01f : -1.035413868e+00f);
  p = CT_FMA(p, y, lo ? 3.592096173e-01f : 4.225168660e-01f);
  p = CT_FMA(p, y, lo ? -2.765169271e-01f : -2.820859914e-01f);
  p = CT_FMA(p, y, lo ? 5.639588893e-01f : 5.641895381e-01f);
  float e0 = ct_expf(-zz);
  return EW_SEL(, CT_FMA(-e0, err, e0) * p / z, 0.0f, z > 10.1f);
}
#endif

#if EW_WANT(ew_erf)
EW_INLINE float ew_erf(float x) {
  float a = fabs(x), aa = a * a;
  float big = as_float(as_uint(1.0f - ew_erfc_big(a, aa, ct_sq_err(a, aa))) | (as_uint(x) & 0x80000000u));
  return EW_SEL(, big, ew_erf_small(x), a <= 1.0f);
}
#endif

/* The exact (erf) form: 0.5 x erfc(z), z = -x / sqrt2 (1 + erf(x / sqrt2) would cancel for
 * negative x), with z^2 = x^2 / 2 taken from x exactly, not from the rounded z. */
#if EW_WANT(ew_gelu)
EW_INLINE float ew_gelu(float x) {
  float z = -x * 0.70710678118654752440f, a = fabs(z);
  float xx = x * x;
  float big = ew_erfc_big(a, 0.5f * xx, 0.5f * ct_sq_err(x, xx));
  big = EW_SEL(, big, 2.0f - big, z < 0.0f);
  return 0.5f * x * EW_SEL(, big, 1.0f - ew_erf_small(z), a < 1.0f);
}
#endif
#endif

/* x * sigmoid(x) (torch.nn.functional.silu). */
#if EW_WANT(ew_silu)
EW_INLINE EW_WT() ew_silu(EW_WT() x) { return x * ew_sigmoid(x); }
#endif

/* log(1 + exp(x)), and x itself above the threshold 20 (torch.nn.functional.softplus with its
 * defaults beta = 1, threshold = 20). */
#if EW_WANT(ew_softplus)
EW_INLINE EW_WT() ew_softplus(EW_WT() x) { return EW_SEL(, ew_log1p(EW_EXP(x)), x, x > EW_CST(, 20)); }
#endif

/* GPT-2's gelu, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (gelu(approximate='tanh')),
 * written as x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)), the same function, which does not
 * cancel where tanh nears -1 (PyTorch's form loses every digit there, below x = -5 in f32). */
#if EW_WANT(ew_gelu_tanh)
EW_INLINE EW_WT() ew_gelu_tanh(EW_WT() x) {
  EW_WT() w = EW_LIT(1.5957691216057307117) * (x + EW_LIT(0.044715) * x * x * x);
  return x * ew_sigmoid(w);
}
#endif

/* x for x > 0, else x * slope (torch.nn.functional.leaky_relu): NaN stays NaN, -0.0 gives -0.0. */
#if EW_WANT(ew_leaky_relu)
EW_INLINE EW_WT() ew_leaky_relu(EW_WT() x, EW_WT() slope) { return EW_SEL(, x * slope, x, x > EW_CST(, 0)); }
#endif
#endif

/* -- selection -- */

/* min(max(x, lo), hi): a NaN x stays NaN (its comparisons are false); lo > hi gives hi. -DEW_LO
 * and -DEW_HI say which bounds are given (the other argument is then ignored). */
#if EW_WANT(ew_clamp)
EW_INLINE EW_WT() ew_clamp(EW_WT() x, EW_WT() lo, EW_WT() hi) {
  EW_WT() r = x;
  (void)lo;
  (void)hi;
#if EW_LO
  r = EW_SEL(, r, lo, r < lo);
#endif
#if EW_HI
  r = EW_SEL(, r, hi, r > hi);
#endif
  return r;
}
#endif

/* c ? x : y for a mask c of the compute type's size (where()). */
#if EW_WANT(ew_where)
EW_INLINE EW_WT() ew_where(EW_MT() c, EW_WT() x, EW_WT() y) { return select(y, x, c); }
#endif

#ifndef EW_NP
#define EW_NP 0
#endif

/* ---- 16-bit floats in scalar code ----
 * With EW_SOFT16 (CPU devices) f16 converts with plain integer and float operations, which
 * compilers that vectorise across work-items (PoCL) vectorise; there the vload_half and
 * vstore_half builtins are opaque calls, several times slower. Both are exact (round to
 * nearest even, subnormals, inf, NaN) and need no f32 denormal support; GPUs keep the builtins,
 * which are hardware conversions there. bf16 is bit manipulation everywhere, without branches. */
#ifndef EW_SOFT16
#define EW_SOFT16 0
#endif
#if EW_SOFT16
EW_INLINE float ew_h2f(ushort hs) {
  uint h = hs, sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
  float r = select(as_float((em << 13) + 0x38000000u), (float)em * 0x1p-24f, (int)(em < 0x400u)); /* normal, subnormal */
  r = select(r, as_float((em << 13) | 0x7f800000u), (int)(em >= 0x7c00u));                    /* inf, NaN */
  return as_float(as_uint(r) | sign);
}
EW_INLINE ushort ew_f2h(float f) {
  uint u = as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  uint hn = (a + 0x0fffu + ((a >> 13) & 1u) - 0x38000000u) >> 13; /* normal: rebias, round to even */
  uint hs = as_uint(as_float(a) + 0.5f) - 0x3f000000u;          /* subnormal: the FPU rounds */
  uint h = select(hn, hs, (uint)(a < 0x38800000u));
  h = select(h, 0x7c00u, (uint)(a >= 0x47800000u)); /* overflow: inf */
  h = select(h, 0x7e00u, (uint)(a > 0x7f800000u));  /* NaN stays NaN */
  return (ushort)(h | sign);
}
#define EW_LDH(p, i) ew_h2f(((__global const ushort *)(p))[i])
#define EW_STH(p, i, v) (((__global ushort *)(p))[i] = ew_f2h(v))
#else
#define EW_LDH(p, i) vload_half((i), (p))
#define EW_STH(p, i, v) vstore_half_rte((v), (i), (p))
#endif
EW_INLINE ushort ew_f2bf(float f) {
  uint u = as_uint(f);
  uint r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;                                /* nearest even */
  return (ushort)select(r, (u >> 16) | 0x40u, (uint)((u & 0x7fffffffu) > 0x7f800000u)); /* quiet NaN */
}
#define EW_LDBF(p, i) as_float(((uint)(p)[i]) << 16)
#define EW_STBF(p, i, v) ((p)[i] = ew_f2bf(v))

/* A dtype's load class: bool and the integers (ew_cls_int) load alike into every compute type;
 * f16, bf16, f32 and f64 each have their own. The load and rounding tables below are written once
 * per class, not once per dtype: EW_BY_CLASS(EW_LF_, dt) names EW_LF_ew_cls_f16 for dt = 5. */
#define EW_CLS_0 ew_cls_int
#define EW_CLS_1 ew_cls_int
#define EW_CLS_2 ew_cls_int
#define EW_CLS_3 ew_cls_int
#define EW_CLS_4 ew_cls_int
#define EW_CLS_5 ew_cls_f16
#define EW_CLS_6 ew_cls_bf16
#define EW_CLS_7 ew_cls_f32
#define EW_CLS_8 ew_cls_f64
#define EW_CLS_9 ew_cls_int
#define EW_CLS_10 ew_cls_int
#define EW_CLS_11 ew_cls_int
#define EW_CLS_12 ew_cls_int
#define EW_BY_CLASS(prefix, dt) CT_CAT(prefix, CT_CAT(EW_CLS_, dt))

/* Element i of p (dtype dt) as float, one rounding for i64. */
#define EW_LF_ew_cls_int(p, i) ((float)(p)[i])
#define EW_LF_ew_cls_f16(p, i) EW_LDH(p, i)
#define EW_LF_ew_cls_bf16(p, i) EW_LDBF(p, i)
#define EW_LF_ew_cls_f32(p, i) ((p)[i])
#define EW_LF(dt, p, i) EW_BY_CLASS(EW_LF_, dt)(p, i)
/* A zero-dim operand of a wider float dtype than the common one (f32[2] + f64 zero-dim computes
 * in f32, PyTorch's ranking) is converted like ct_cast: f64 rounds to f32 once; into f16 and
 * bf16 through float rounded to odd, so that the second rounding is exact. */
#if defined(CT_HAS_FP64) && CT_HAS_FP64
EW_INLINE float ew_f64_to_f32_odd(double v) {
  float f = convert_float_rtz(v);
  return (isnan(v) || (double)f == v) ? f : as_float(as_uint(f) | 1u);
}
#if EW_K == CT_DT_F16 || EW_K == CT_DT_BF16
#define EW_LF_ew_cls_f64(p, i) ew_f64_to_f32_odd((p)[i])
#else
#define EW_LF_ew_cls_f64(p, i) ((float)(p)[i])
#endif
#endif

/* ---- conversions between storage and the compute type ---- */
#if EW_SOFT16
EW_INLINE float ew_round_f16(float v) { return ew_h2f(ew_f2h(v)); }
#else
EW_INLINE float ew_round_f16(float v) {
  ushort h;
  vstore_half_rte(v, 0, (__private half *)&h);
  return vload_half(0, (__private const half *)&h);
}
#endif
EW_INLINE float ew_round_bf16(float v) { return as_float(((uint)ew_f2bf(v)) << 16); }
EW_INLINE float8 ew_bf16_to_f32_8(ushort8 h) { return as_float8(convert_uint8(h) << 16); }
EW_INLINE float8 ew_round_f16_8(float8 v) {
  ushort h[8];
  vstore_half8_rte(v, 0, (__private half *)h);
  return vload_half8(0, (__private const half *)h);
}

/* EW_LOAD(dt, p, i): element i of p (dtype dt) converted to the common dtype, as a scalar of the
 * compute type. EW_LOAD8: elements i..i+7, as a vector. Integers reach f16 and bf16 through
 * float, as c10::Half(float(x)) does. */
#if EW_K == CT_DT_F32
#define EW_LOAD(dt, p, i) EW_LF(dt, p, i)
#define EW_V_ew_cls_int(p, i) convert_float8(vload8(0, (p) + (i)))
#define EW_V_ew_cls_f16(p, i) vload_half8(0, (p) + (i))
#define EW_V_ew_cls_bf16(p, i) ew_bf16_to_f32_8(vload8(0, (p) + (i)))
#define EW_V_ew_cls_f32(p, i) vload8(0, (p) + (i))
#elif EW_K == CT_DT_F16 || EW_K == CT_DT_BF16
/* Rounded to the compute type once loaded as float, except the compute type's own dtype. */
#if EW_K == CT_DT_F16
#define EW_RK_ew_cls_int(v) ew_round_f16(v)
#define EW_RK_ew_cls_f16(v) (v)
#define EW_RK_ew_cls_bf16 EW_RK_ew_cls_int
#else
#define EW_RK_ew_cls_int(v) ew_round_bf16(v)
#define EW_RK_ew_cls_f16 EW_RK_ew_cls_int
#define EW_RK_ew_cls_bf16(v) (v)
#endif
#define EW_RK_ew_cls_f32 EW_RK_ew_cls_int
#define EW_RK_ew_cls_f64 EW_RK_ew_cls_int
#define EW_LOAD(dt, p, i) EW_BY_CLASS(EW_RK_, dt)(EW_LF(dt, p, i))
#if EW_K == CT_DT_F16
#define EW_V_ew_cls_int(p, i) ew_round_f16_8(convert_float8(vload8(0, (p) + (i))))
#define EW_V_ew_cls_f16(p, i) vload_half8(0, (p) + (i))
#endif
#elif EW_K == CT_DT_F64
#define EW_LD64_ew_cls_int(p, i) ((double)(p)[i])
#define EW_LD64_ew_cls_f16(p, i) ((double)EW_LDH(p, i))
#define EW_LD64_ew_cls_bf16(p, i) ((double)EW_LDBF(p, i))
#define EW_LD64_ew_cls_f32 EW_LD64_ew_cls_int
#define EW_LD64_ew_cls_f64(p, i) ((p)[i])
#define EW_LOAD(dt, p, i) EW_BY_CLASS(EW_LD64_, dt)(p, i)
#define EW_V_ew_cls_int(p, i) convert_double8(vload8(0, (p) + (i)))
#define EW_V_ew_cls_f16(p, i) convert_double8(vload_half8(0, (p) + (i)))
#define EW_V_ew_cls_bf16(p, i) convert_double8(ew_bf16_to_f32_8(vload8(0, (p) + (i))))
#define EW_V_ew_cls_f32 EW_V_ew_cls_int
#define EW_V_ew_cls_f64(p, i) vload8(0, (p) + (i))
#else
#define EW_LOAD(dt, p, i) ((EW_WB)(p)[i])
#endif
#define EW_LOAD8(dt, p, i) EW_BY_CLASS(EW_V_, dt)(p, i)

/* Nonzero test of a where() condition in its own dtype (NaN is true, -0.0 false), as a mask of
 * the compute type's size. */
#define EW_NZ_ew_cls_f16(p, i) ((((__global const ushort *)(p))[i] & 0x7fff) != 0)
#define EW_NZ_ew_cls_bf16(p, i) (((p)[i] & 0x7fff) != 0)
#define EW_NZ_ew_cls_int(p, i) ((p)[i] != 0)
#define EW_NZ_ew_cls_f32 EW_NZ_ew_cls_int
#define EW_NZ_ew_cls_f64 EW_NZ_ew_cls_int
#define EW_NZ(dt, p, i) EW_M(, EW_BY_CLASS(EW_NZ_, dt)(p, i))

