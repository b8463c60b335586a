/* Strided copies with broadcasting and dtype conversion, and fills.
 *
 * Host code collapses the geometry first, then picks one of:
 *   copy_contig   both sides contiguous: dst[i] = convert(src[i]), one work-item each
 *   copy_strided  dst[off_d(i)] = convert(src[off_s(i)]) over the (shared) shape, at least 2
 *                 dims (host pads with a leading size-1 dim); a broadcast src dim has stride 0
 *   fill_strided  the same addressing, storing a bit pattern (any dtype of that size)
 * Options: -DCT_SRC=<dtype> -DCT_DST=<dtype> for the converting kernels, -DCT_BITS=<uint type>
 * for same-dtype copies and fills (bits are moved, so NaN payloads and -0 survive).
 *
 * Conversion follows ct_cast(): every float result is rounded once, to nearest even. Sources are
 * widened exactly to long (integers, bool as 0/1), float (f16, bf16, f32) or double (f64);
 * where a second rounding would follow a first (64-bit integers or f64 to a 16-bit float) the
 * first step rounds to odd, which makes the final round-to-nearest-even exact. */

#ifdef CT_BITS
#define DT CT_BITS
#define ST CT_BITS
#define CONV(p, i) ((p)[i])
#define STORE(p, i, v) ((p)[i] = (v))
#else
#define DT CT_T(CT_DST)
#define ST CT_T(CT_SRC)

/* ---- widening loads ---- */
#if CT_SRC == CT_DT_F64
#define CT_WKIND 2
#define LOADW(p, i) ((p)[i])
#elif CT_SRC == CT_DT_F16
#define CT_WKIND 1
#define LOADW(p, i) vload_half((i), (p))
#elif CT_SRC == CT_DT_BF16
#define CT_WKIND 1
#define LOADW(p, i) ct_bf16_to_f32((p)[i])
#elif CT_SRC == CT_DT_F32
#define CT_WKIND 1
#define LOADW(p, i) ((p)[i])
#elif CT_SRC == CT_DT_BOOL
#define CT_WKIND 0
#define LOADW(p, i) ((long)((p)[i] != 0))
#elif CT_SRC == CT_DT_U64
/* Widened to long by its bits (integer stores wrap alike); float stores read it back as ulong. */
#define CT_WKIND 0
#define CT_USRC 1
#define LOADW(p, i) ((long)(p)[i])
#else
#define CT_WKIND 0
#define LOADW(p, i) ((long)(p)[i])
#endif

/* Round to odd: truncate, then set the last bit when anything was lost. */
inline float ct_long_to_f32_odd(long v) {
  float f = convert_float_rtz(v);
  if (convert_long(f) != v) f = as_float(as_uint(f) | 1u);
  return f;
}
inline float ct_int_to_f32_odd(int v) {
  float f = convert_float_rtz(v);
  /* |f| <= |v| <= 2^31 and f == -2^31 only for v == INT_MIN: the comparison is in long. */
  if ((long)f != (long)v) f = as_float(as_uint(f) | 1u);
  return f;
}
inline float ct_ulong_to_f32_odd(ulong v) {
  float f = convert_float_rtz(v);
  /* f <= v < 2^64, and f == 2^64 only if v rounded up, which rtz never does */
  if (convert_ulong(f) != v) f = as_float(as_uint(f) | 1u);
  return f;
}
/* Integer sources as float (odd, for a second rounding), f32 and f64; u64 by its unsigned value. */
#ifdef CT_USRC
#define CT_I2F_ODD(v) ct_ulong_to_f32_odd((ulong)(v))
#define CT_I2F32(v) convert_float_rte((ulong)(v))
#define CT_I2F64(v) convert_double_rte((ulong)(v))
#else
#define CT_I2F32(v) convert_float_rte(v)
#define CT_I2F64(v) convert_double_rte(v)
#if CT_SRC == CT_DT_I8 || CT_SRC == CT_DT_I16 || CT_SRC == CT_DT_I32
/* Sources of 32 bits or fewer round from int: Mesa's rusticl 22.3 (llvmpipe) computes
 * convert_float_rtz((long)x) for a sign-extended int x as if x were unsigned, so i32 -> f16/bf16
 * casts lost the sign (-6 became 6; tests/portability/test_driver_quirks.c). */
#define CT_I2F_ODD(v) ct_int_to_f32_odd((int)(v))
#else
#define CT_I2F_ODD(v) ct_long_to_f32_odd(v)
#endif
#endif
#if defined(CT_HAS_FP64) && CT_HAS_FP64
inline float ct_f64_to_f32_odd(double v) {
  if (isnan(v) || isinf(v)) return (float)v;
  float f = convert_float_rtz(v);
  if ((double)f != v) f = as_float(as_uint(f) | 1u);
  return f;
}
#endif

/* Float to integer: truncation toward zero, saturating, NaN to 0. Written as compares and a plain
 * conversion (defined once the value is in range) rather than convert_T_sat_rtz, which some
 * compilers (PoCL's) leave scalar. Below LO every value truncates to TMIN or less, at or above
 * HI (TMAX + 1, exact in float and double) to more than TMAX. */
#define CT_F2I(T, v, LO, HI, TMIN, TMAX) \
  (isnan(v) ? (T)0 : (v) < (LO) ? (T)(TMIN) : (v) >= (HI) ? (T)(TMAX) : (T)(v))
#define CT_F2U8(v) CT_F2I(uchar, v, 0.0f, 256.0f, 0, 255)
/* Clamped, then through int: LLVM 15 as Mesa 22.3's llvmpipe uses it crashed
 * (SelectionDAG::LegalizeTypes) on the vectorized float -> char conversion of f16/bf16/f32 -> i8
 * casts, and with CT_F2I's compares through int gave 0 for f16 values of 128 and above (the
 * saturation lost); the clamped value is in range, so both conversions are exact. */
#if CT_WKIND == 2
#define CT_F2I8(v) ((char)(isnan(v) ? 0 : (int)clamp((v), -128.0, 127.0)))
#else
#define CT_F2I8(v) ((char)(isnan(v) ? 0 : (int)clamp((v), -128.0f, 127.0f)))
#endif
#define CT_F2I32(v) CT_F2I(int, v, -2147483648.0f, 2147483648.0f, INT_MIN, INT_MAX)
#define CT_F2I64(v) CT_F2I(long, v, -9223372036854775808.0f, 9223372036854775808.0f, LONG_MIN, LONG_MAX)
#define CT_F2I16(v) CT_F2I(short, v, -32768.0f, 32768.0f, -32768, 32767)
#define CT_F2U16(v) CT_F2I(ushort, v, 0.0f, 65536.0f, 0, 65535)
#define CT_F2U32(v) CT_F2I(uint, v, 0.0f, 4294967296.0f, 0, UINT_MAX)
#define CT_F2U64(v) CT_F2I(ulong, v, 0.0f, 18446744073709551616.0f, 0, ULONG_MAX)

/* ---- narrowing stores ---- */
#if CT_DST == CT_DT_BOOL
#define STORE(p, i, v) ((p)[i] = (uchar)((v) != 0))
#elif CT_WKIND == 0
/* integer -> integer wraps modulo 2^bits (two's complement) */
#if CT_DST == CT_DT_U8
#define STORE(p, i, v) ((p)[i] = (uchar)(v))
#elif CT_DST == CT_DT_I8
#define STORE(p, i, v) ((p)[i] = (char)(uchar)(v))
#elif CT_DST == CT_DT_I32
#define STORE(p, i, v) ((p)[i] = (int)(uint)(v))
#elif CT_DST == CT_DT_I64
#define STORE(p, i, v) ((p)[i] = (v))
#elif CT_DST == CT_DT_I16
#define STORE(p, i, v) ((p)[i] = (short)(ushort)(v))
#elif CT_DST == CT_DT_U16
#define STORE(p, i, v) ((p)[i] = (ushort)(v))
#elif CT_DST == CT_DT_U32
#define STORE(p, i, v) ((p)[i] = (uint)(v))
#elif CT_DST == CT_DT_U64
#define STORE(p, i, v) ((p)[i] = (ulong)(v))
#elif CT_DST == CT_DT_F16
#define STORE(p, i, v) vstore_half_rte(CT_I2F_ODD(v), (i), (p))
#elif CT_DST == CT_DT_BF16
#define STORE(p, i, v) ((p)[i] = ct_f32_to_bf16(CT_I2F_ODD(v)))
#elif CT_DST == CT_DT_F32
#define STORE(p, i, v) ((p)[i] = CT_I2F32(v))
#elif CT_DST == CT_DT_F64
#define STORE(p, i, v) ((p)[i] = CT_I2F64(v))
#endif
/* float or double -> integer: the saturating conversions take either width */
#elif CT_DST == CT_DT_U8
#define STORE(p, i, v) ((p)[i] = CT_F2U8(v))
#elif CT_DST == CT_DT_I8
#define STORE(p, i, v) ((p)[i] = CT_F2I8(v))
#elif CT_DST == CT_DT_I16
#define STORE(p, i, v) ((p)[i] = CT_F2I16(v))
#elif CT_DST == CT_DT_U16
#define STORE(p, i, v) ((p)[i] = CT_F2U16(v))
#elif CT_DST == CT_DT_I32
#define STORE(p, i, v) ((p)[i] = CT_F2I32(v))
#elif CT_DST == CT_DT_U32
#define STORE(p, i, v) ((p)[i] = CT_F2U32(v))
#elif CT_DST == CT_DT_I64
#define STORE(p, i, v) ((p)[i] = CT_F2I64(v))
#elif CT_DST == CT_DT_U64
#define STORE(p, i, v) ((p)[i] = CT_F2U64(v))
#elif CT_WKIND == 1
#if CT_DST == CT_DT_F16
#define STORE(p, i, v) vstore_half_rte((v), (i), (p))
#elif CT_DST == CT_DT_BF16
#define STORE(p, i, v) ((p)[i] = ct_f32_to_bf16(v))
#elif CT_DST == CT_DT_F32
#define STORE(p, i, v) ((p)[i] = (v))
#elif CT_DST == CT_DT_F64
#define STORE(p, i, v) ((p)[i] = (double)(v))
#endif
#else
#if CT_DST == CT_DT_F16
#define STORE(p, i, v) vstore_half_rte((v), (i), (p))
#elif CT_DST == CT_DT_BF16
#define STORE(p, i, v) ((p)[i] = ct_f32_to_bf16(ct_f64_to_f32_odd(v)))
#elif CT_DST == CT_DT_F32
#define STORE(p, i, v) ((p)[i] = convert_float_rte(v))
#endif
#endif

#define CONV(p, i) LOADW(p, i)
#endif

/* The host rounds every NDRange up to a multiple of a work-group size taken from a small fixed
 * set (ct__launch_dims: PoCL compiles one work-group function per local size), so each kernel
 * gets its exact extents and skips the ids past them. The tests are arranged so that PoCL's
 * work-item loops (dim 0 innermost) still vectorize: i1 < n1 and "the group is whole along
 * dim 0" do not change along dim 0, so only partial groups test i0 (a plain
 * `if (i0 >= n0 || i1 >= n1) return;` made copies up to 2x slower there). */
#define CT_GROUP_IN(dim, n) ((long)(get_group_id(dim) + 1) * (long)get_local_size(dim) <= (n))
/* No bounds test at all (even the split one cost PoCL 2x on f32 -> f16 casts): the host
 * launches whole work-groups, then the remainder as groups of one (see ct__copy_launch). */
kernel void copy_contig(global DT *dst, long dst_off, global const ST *src, long src_off) {
  long i = get_global_id(0);
  STORE(dst + dst_off, i, CONV(src + src_off, i));
}

/* The NDRange carries the two innermost dims (ids 0 and 1, strides as scalars), so most copies
 * need no division and vectorize; id 2 enumerates the outer dims (shapes and strides in
 * the long8s, outermost first, padded with extent 1 and stride 0), decomposed innermost first.
 *
 * The decomposition is straight-line and unconditional over all six possible outer dims (a
 * padding dim divides by 1 and adds 0): it depends on id 2 alone, which is the same for every
 * work-item of a group (local size 1 along dim 2), so CPU compilers that run a group as a loop
 * (PoCL) hoist it out of that loop. A loop over the outer dims with the values in private arrays, or a
 * test per dim, was not hoisted: one to two 64-bit divisions per element made copy_strided ~10x
 * slower than copy_contig on [6, 4, 64, 16] f32 (attention's per-head layouts). On GPUs this is
 * up to six divisions per work-item, uniform across the group, next to one load and store. */
inline void ct_outer_offsets(long i, long8 sh, long8 dstr, long8 sstr, long *od, long *os) {
  long q, r;
#define CT_OUTER_STEP(c)            \
  q = i / sh.s##c;                  \
  r = i - q * sh.s##c;              \
  *od += r * dstr.s##c;             \
  *os += r * sstr.s##c;             \
  i = q;
  CT_OUTER_STEP(5)
  CT_OUTER_STEP(4)
  CT_OUTER_STEP(3)
  CT_OUTER_STEP(2)
  CT_OUTER_STEP(1)
#undef CT_OUTER_STEP
  /* what is left is below the outermost extent */
  *od += i * dstr.s0;
  *os += i * sstr.s0;
}

kernel void copy_strided(global DT *dst, long dst_off, long ds0, long ds1, global const ST *src, long src_off,
                         long ss0, long ss1, long8 shape8, long8 dstr8, long8 sstr8, long n0,
                         long n1, long n2) {
  long i0 = get_global_id(0), i1 = get_global_id(1), i2 = get_global_id(2);
  long od = dst_off + i1 * ds1;
  long os = src_off + i1 * ss1;
  ct_outer_offsets(i2, shape8, dstr8, sstr8, &od, &os);
  if (i1 < n1 && i2 < n2) {
    if (ds0 == 1 && ss0 == 1) {
      if (CT_GROUP_IN(0, n0))
        STORE(dst + od, i0, CONV(src + os, i0));
      else if (i0 < n0)
        STORE(dst + od, i0, CONV(src + os, i0));
    } else if (ds0 == 1 && ss0 == 0) {
      if (CT_GROUP_IN(0, n0))
        STORE(dst + od, i0, CONV(src, os));
      else if (i0 < n0)
        STORE(dst + od, i0, CONV(src, os));
    } else {
      od += i0 * ds0;
      os += i0 * ss0;
      if (CT_GROUP_IN(0, n0))
        STORE(dst, od, CONV(src, os));
      else if (i0 < n0)
        STORE(dst, od, CONV(src, os));
    }
  }
}

/* Lanes style (src/device/quirks.c), no outer dims: straight-line code and one bounds test.
 * Compilers that run work-items as SIMD lanes pay for every branch of copy_strided, taken or
 * not (llvmpipe: 0.1 GB/s for a 2-D copy into a strided slice, 0.44 without the outer
 * decomposition, 1.0 as here, its one-line copy 1.0); PoCL needs copy_strided's shape instead. */
kernel void copy_strided2(global DT *dst, long dst_off, long ds0, long ds1, global const ST *src, long src_off,
                          long ss0, long ss1, long n0, long n1) {
  long i0 = get_global_id(0), i1 = get_global_id(1);
  if (i0 < n0 && i1 < n1) STORE(dst, dst_off + i0 * ds0 + i1 * ds1, CONV(src, src_off + i0 * ss0 + i1 * ss1));
}

#ifdef CT_BITS
/* A contiguous fill, launched as copy_contig: clEnqueueFillBuffer took PoCL 60-120 us for
 * 512 KB (a pattern loop per byte range), this kernel a memory pass. */
kernel void fill_contig(global CT_BITS *dst, long dst_off, CT_BITS value) { dst[dst_off + get_global_id(0)] = value; }

kernel void fill_strided(global CT_BITS *dst, long dst_off, long ds0, long ds1, long8 shape8, long8 dstr8,
                         CT_BITS value, long n0, long n1, long n2) {
  long i0 = get_global_id(0), i1 = get_global_id(1), i2 = get_global_id(2);
  long od = dst_off + i0 * ds0 + i1 * ds1, unused = 0;
  ct_outer_offsets(i2, shape8, dstr8, dstr8, &od, &unused);
  if (i1 < n1 && i2 < n2) {
    if (CT_GROUP_IN(0, n0))
      dst[od] = value;
    else if (i0 < n0)
      dst[od] = value;
  }
}
#endif
