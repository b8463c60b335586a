/* Strided copies with broadcasting and dtype conversion, and fills.
 *
 * Host code collapses the geometry first, then picks one of:
 *   copy_contig   both sides contiguous: dst[i] = convert(src[i])
 *   copy_strided  dst[off_d(i)] = convert(src[off_s(i)]), i in row-major order of the (shared)
 *                 shape; a broadcast src dim has stride 0
 *   fill_strided  dst[off_d(i)] = a bit pattern (any dtype of that size)
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
#if defined(CT_HAS_FP64) && CT_HAS_FP64
inline float ct_f64_to_f32_odd(double v) {
  if (isnan(v) || isinf(v)) return (float)v;
  float f = convert_float_rtz(v);
  if ((double)f != v) f = as_float(as_uint(f) | 1u);
  return f;
}
#endif

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
#elif CT_DST == CT_DT_F16
#define STORE(p, i, v) vstore_half_rte(ct_long_to_f32_odd(v), (i), (p))
#elif CT_DST == CT_DT_BF16
#define STORE(p, i, v) ((p)[i] = ct_f32_to_bf16(ct_long_to_f32_odd(v)))
#elif CT_DST == CT_DT_F32
#define STORE(p, i, v) ((p)[i] = convert_float_rte(v))
#elif CT_DST == CT_DT_F64
#define STORE(p, i, v) ((p)[i] = convert_double_rte(v))
#endif
#elif CT_WKIND == 1
#if CT_DST == CT_DT_U8
#define STORE(p, i, v) ((p)[i] = convert_uchar_sat_rtz(v))
#elif CT_DST == CT_DT_I8
#define STORE(p, i, v) ((p)[i] = convert_char_sat_rtz(v))
#elif CT_DST == CT_DT_I32
#define STORE(p, i, v) ((p)[i] = convert_int_sat_rtz(v))
#elif CT_DST == CT_DT_I64
#define STORE(p, i, v) ((p)[i] = convert_long_sat_rtz(v))
#elif CT_DST == CT_DT_F16
#define STORE(p, i, v) vstore_half_rte((v), (i), (p))
#elif CT_DST == CT_DT_BF16
#define STORE(p, i, v) ((p)[i] = ct_f32_to_bf16(v))
#elif CT_DST == CT_DT_F32
#define STORE(p, i, v) ((p)[i] = (v))
#elif CT_DST == CT_DT_F64
#define STORE(p, i, v) ((p)[i] = (double)(v))
#endif
#else
#if CT_DST == CT_DT_U8
#define STORE(p, i, v) ((p)[i] = convert_uchar_sat_rtz(v))
#elif CT_DST == CT_DT_I8
#define STORE(p, i, v) ((p)[i] = convert_char_sat_rtz(v))
#elif CT_DST == CT_DT_I32
#define STORE(p, i, v) ((p)[i] = convert_int_sat_rtz(v))
#elif CT_DST == CT_DT_I64
#define STORE(p, i, v) ((p)[i] = convert_long_sat_rtz(v))
#elif CT_DST == CT_DT_F16
#define STORE(p, i, v) vstore_half_rte((v), (i), (p))
#elif CT_DST == CT_DT_BF16
#define STORE(p, i, v) ((p)[i] = ct_f32_to_bf16(ct_f64_to_f32_odd(v)))
#elif CT_DST == CT_DT_F32
#define STORE(p, i, v) ((p)[i] = convert_float_rte(v))
#endif
#endif

#define CONV(p, i) LOADW(p, i)
#endif

kernel void copy_contig(global DT *dst, long dst_off, global const ST *src, long src_off, long n) {
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) STORE(dst + dst_off, i, CONV(src + src_off, i));
}

/* Both offsets in one pass over the dims (innermost first). */
kernel void copy_strided(global DT *dst, long dst_off, long8 shape8, long8 dstr8, global const ST *src,
                         long src_off, long8 sstr8, int ndim, long n) {
  long sh[8], ds[8], ss[8];
  vstore8(shape8, 0, sh);
  vstore8(dstr8, 0, ds);
  vstore8(sstr8, 0, ss);
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    long rest = i, od = dst_off, os = src_off;
    for (int d = ndim - 1; d >= 0; d--) {
      long q = rest / sh[d];
      long r = rest - q * sh[d];
      od += r * ds[d];
      os += r * ss[d];
      rest = q;
    }
    STORE(dst, od, CONV(src, os));
  }
}

#ifdef CT_BITS
kernel void fill_strided(global CT_BITS *dst, long dst_off, long8 shape8, long8 dstr8, int ndim, long n,
                         CT_BITS value) {
  long sh[8], ds[8];
  vstore8(shape8, 0, sh);
  vstore8(dstr8, 0, ds);
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    long rest = i, od = dst_off;
    for (int d = ndim - 1; d >= 0; d--) {
      long q = rest / sh[d];
      od += (rest - q * sh[d]) * ds[d];
      rest = q;
    }
    dst[od] = value;
  }
}
#endif
