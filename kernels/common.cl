/* Prepended to every libcltensor program. OpenCL C 1.2.
 *
 * dtype codes match enum ct_dtype. A kernel specialised for a dtype gets it as a number through
 * a build option (e.g. -DCT_IN=5) and uses the macros below to name its storage type and to
 * load/store elements as float (or double, or integers) whatever the storage:
 *   CT_T(dt)              storage type of dt (f16 is `half`, storage-only; bf16 is `ushort`)
 *   CT_LOADF(dt, p, i)    element i of p as float
 *   CT_STOREF(dt, p, i, v) store float v as dt (rounding to nearest even; floats to integers
 *                          truncate toward zero and saturate, NaN gives 0; bool is v != 0)
 * f16 uses vload_half/vstore_half, so no cl_khr_fp16 is needed; bf16 is bit conversion. */
#if defined(CT_HAS_FP64) && CT_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

/* CT_FMA(a, b, c): a * b + c where speed matters and one extra rounding does not (polynomials,
 * accumulations): fma() on a device with fused multiply-add in hardware (-DCT_FAST_FMA=1 from
 * CL_FP_FMA), mad() elsewhere, where fma() is a software routine (llvmpipe: 4 ns a call;
 * src/device/quirks.c). Error-free transformations keep fma() itself. */
#if defined(CT_FAST_FMA) && !CT_FAST_FMA
#define CT_FMA(a, b, c) mad(a, b, c)
#else
#define CT_FMA(a, b, c) fma(a, b, c)
#endif

/* a * a - aa exactly, for aa = the rounded a * a (finite): fma() where it is fast, else Dekker's
 * product with a split by masking (ah and al of 12 bits each, so every partial product is exact;
 * ah * ah - aa is exact by Sterbenz's lemma). */
inline float ct_sq_err(float a, float aa) {
#if defined(CT_FAST_FMA) && !CT_FAST_FMA
  float ah = as_float(as_uint(a) & 0xfffff000u), al = a - ah;
  return ((ah * ah - aa) + 2.0f * ah * al) + al * al;
#else
  return fma(a, a, -aa);
#endif
}

#define CT_DT_BOOL 0
#define CT_DT_U8 1
#define CT_DT_I8 2
#define CT_DT_I32 3
#define CT_DT_I64 4
#define CT_DT_F16 5
#define CT_DT_BF16 6
#define CT_DT_F32 7
#define CT_DT_F64 8
#define CT_DT_I16 9
#define CT_DT_U16 10
#define CT_DT_U32 11
#define CT_DT_U64 12

#define CT_CAT_(a, b) a##b
#define CT_CAT(a, b) CT_CAT_(a, b)

#define CT_T_0 uchar
#define CT_T_1 uchar
#define CT_T_2 char
#define CT_T_3 int
#define CT_T_4 long
#define CT_T_5 half
#define CT_T_6 ushort
#define CT_T_7 float
#define CT_T_8 double
#define CT_T_9 short
#define CT_T_10 ushort
#define CT_T_11 uint
#define CT_T_12 ulong
#define CT_T(dt) CT_CAT(CT_T_, dt)

/* exp(x) in f32 without the builtin: a pass over 2^22 values takes 0.28 ns an element on PoCL
 * (2 threads) against 0.41 with PoCL 3.1's exp (a copy: 0.16), so half the compute. k = round(x /
 * ln2) by the 1.5 * 2^23 shifter, r = x - k ln2 in two parts (Cody-Waite), exp(r) = 1 + r + r^2
 * P(r) with Cephes' expf coefficients, then 2^k as two factors so that subnormal results (k down
 * to -150) and k = 128 come out right. 0.94 ulp at most on elementwise-sweep's values (every
 * 4093rd f32 bit pattern and the neighbours of the limits below; OpenCL's bound for exp is 3);
 * NaN stays NaN, -inf gives 0 and +inf, inf (with mad for fma, CT_FMA: 1.4 ulp at most). No builtins but fma and select: a call keeps PoCL
 * from vectorizing the work-item loop. */
#define CT_EXPF_BODY(T, AS_INT, AS_FLOAT)                                          \
  T xc = select(x, (T)(-104.0f), x < (T)(-104.0f));                             \
  xc = select(xc, (T)(88.8f), xc > (T)(88.8f));                                 \
  T t = xc * (T)(1.44269504088896341f) + (T)(12582912.0f);                      \
  T k = t - (T)(12582912.0f);                                                   \
  T r = CT_FMA(k, (T)(-0.693145751953125f), xc);                                   \
  r = CT_FMA(k, (T)(-1.428606765330187045e-06f), r);                               \
  T p = (T)(1.9875691500e-4f);                                                  \
  p = CT_FMA(p, r, (T)(1.3981999507e-3f));                                         \
  p = CT_FMA(p, r, (T)(8.3334519073e-3f));                                         \
  p = CT_FMA(p, r, (T)(4.1665795894e-2f));                                         \
  p = CT_FMA(p, r, (T)(1.6666665459e-1f));                                         \
  p = CT_FMA(p, r, (T)(5.0000001201e-1f));                                         \
  p = CT_FMA(p, r * r, r) + (T)(1.0f);                                             \
  ki_t ki = AS_INT(t) - 0x4B400000;                                             \
  ki_t k1 = ki >> 1;                                                            \
  T y = p * AS_FLOAT((k1 + 127) << 23) * AS_FLOAT((ki - k1 + 127) << 23);       \
  y = select(y, (T)(INFINITY), x > (T)(88.72283935546875f));                    \
  y = select(y, (T)(0.0f), x < (T)(-103.98f));                                  \
  return select(y, x, x != x);

inline float ct_expf(float x) {
  typedef int ki_t;
  CT_EXPF_BODY(float, as_int, as_float)
}

/* exp in the accumulation type of a program specialised by CT_IN: ct_expf for float scalars
 * (f64 keeps the builtin). 8-lane code keeps the builtin too: ct_expf8 made the attention
 * softmax's vector rows 3x slower on PoCL (its float8 builtin is one vector call; the float8
 * form of ct_expf's body was not). */
#if defined(CT_IN) && CT_IN == CT_DT_F64
#define CT_ACC_EXP(x) exp(x)
#else
#define CT_ACC_EXP(x) ct_expf(x)
#endif
#define CT_ACC_EXP8(x) exp(x)

inline float ct_bf16_to_f32(ushort h) { return as_float(((uint)h) << 16); }

inline ushort ct_f32_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                                          /* nearest even */
  return (ushort)(u >> 16);
}

#define CT_LOADF_0(p, i) ((float)(p)[i])
#define CT_LOADF_1(p, i) ((float)(p)[i])
#define CT_LOADF_2(p, i) ((float)(p)[i])
#define CT_LOADF_3(p, i) ((float)(p)[i])
#define CT_LOADF_4(p, i) ((float)(p)[i])
#define CT_LOADF_5(p, i) vload_half((i), (p))
#define CT_LOADF_6(p, i) ct_bf16_to_f32((p)[i])
#define CT_LOADF_7(p, i) ((p)[i])
#define CT_LOADF_8(p, i) ((float)(p)[i])
#define CT_LOADF_9 CT_LOADF_0
#define CT_LOADF_10 CT_LOADF_0
#define CT_LOADF_11 CT_LOADF_0
#define CT_LOADF_12 CT_LOADF_0
#define CT_LOADF(dt, p, i) CT_CAT(CT_LOADF_, dt)(p, i)

/* Saturating float -> integer conversions (convert_T_sat_rtz maps NaN to 0). */
#define CT_STOREF_0(p, i, v) ((p)[i] = (uchar)((v) != 0.0f))
#define CT_STOREF_1(p, i, v) ((p)[i] = convert_uchar_sat_rtz(v))
#define CT_STOREF_2(p, i, v) ((p)[i] = convert_char_sat_rtz(v))
#define CT_STOREF_3(p, i, v) ((p)[i] = convert_int_sat_rtz(v))
#define CT_STOREF_4(p, i, v) ((p)[i] = convert_long_sat_rtz(v))
#define CT_STOREF_5(p, i, v) vstore_half_rte((v), (i), (p))
#define CT_STOREF_6(p, i, v) ((p)[i] = ct_f32_to_bf16(v))
#define CT_STOREF_7(p, i, v) ((p)[i] = (v))
#define CT_STOREF_8(p, i, v) ((p)[i] = (double)(v))
#define CT_STOREF_9(p, i, v) ((p)[i] = convert_short_sat_rtz(v))
#define CT_STOREF_10(p, i, v) ((p)[i] = convert_ushort_sat_rtz(v))
#define CT_STOREF_11(p, i, v) ((p)[i] = convert_uint_sat_rtz(v))
#define CT_STOREF_12(p, i, v) ((p)[i] = convert_ulong_sat_rtz(v))
#define CT_STOREF(dt, p, i, v) CT_CAT(CT_STOREF_, dt)(p, i, v)

/* CT_STORE_CASES(out, i, v, TO_F, TO_D): the cases of a switch on a dtype known only at run time
 * (a kernel argument, not a build option: the reductions' and randint's outputs) that store v as
 * element i of out: bool as v != 0, the integers by C's conversion, the floats through TO_F (to
 * float, then f16, bf16 or f32) and TO_D (to double, where f64 exists). u64 is the caller's. */
#define CT_STORE_CASES(out, i, v, TO_F, TO_D)                                               \
  case CT_DT_BOOL: ((__global uchar *)(out))[i] = (uchar)((v) != 0); break;                 \
  case CT_DT_U8: ((__global uchar *)(out))[i] = (uchar)(v); break;                          \
  case CT_DT_I8: ((__global char *)(out))[i] = (char)(v); break;                            \
  case CT_DT_I16: ((__global short *)(out))[i] = (short)(v); break;                         \
  case CT_DT_U16: ((__global ushort *)(out))[i] = (ushort)(v); break;                       \
  case CT_DT_I32: ((__global int *)(out))[i] = (int)(v); break;                             \
  case CT_DT_U32: ((__global uint *)(out))[i] = (uint)(v); break;                           \
  case CT_DT_I64: ((__global long *)(out))[i] = (long)(v); break;                           \
  case CT_DT_F16: vstore_half_rte(TO_F(v), (size_t)(i), (__global half *)(out)); break;      \
  case CT_DT_BF16: ((__global ushort *)(out))[i] = ct_f32_to_bf16(TO_F(v)); break;          \
  case CT_DT_F32: ((__global float *)(out))[i] = TO_F(v); break;                            \
  CT_STORE_CASE_F64(out, i, v, TO_D)
#if defined(CT_HAS_FP64) && CT_HAS_FP64
#define CT_STORE_CASE_F64(out, i, v, TO_D) \
  case CT_DT_F64: ((__global double *)(out))[i] = TO_D(v); break;
#else
#define CT_STORE_CASE_F64(out, i, v, TO_D)
#endif

/* CT_UNIT(u, count): the unit of work (a row, an output) of a kernel built for either layout
 * (-DCT_CHUNKED, reduce.cl and softmax.cl): on CPUs (CT_CHUNKED=1) work-item u does unit u alone
 * (lid 0 of L = 1) and those past count return; on GPUs work-group u does it, its items lid of L.
 * Declares u, lid and L. */
#if defined(CT_CHUNKED) && CT_CHUNKED
#define CT_UNIT(u, count)       \
  long u = get_global_id(0);   \
  if (u >= (count)) return;    \
  const int lid = 0, L = 1
#else
#define CT_UNIT(u, count)                                           \
  long u = get_group_id(0);                                        \
  int lid = (int)get_local_id(0), L = (int)get_local_size(0);      \
  (void)(count)
#endif

/* 1 when dt is a floating dtype. */
#define CT_ISFLOAT_0 0
#define CT_ISFLOAT_1 0
#define CT_ISFLOAT_2 0
#define CT_ISFLOAT_3 0
#define CT_ISFLOAT_4 0
#define CT_ISFLOAT_5 1
#define CT_ISFLOAT_6 1
#define CT_ISFLOAT_7 1
#define CT_ISFLOAT_8 1
#define CT_ISFLOAT_9 0
#define CT_ISFLOAT_10 0
#define CT_ISFLOAT_11 0
#define CT_ISFLOAT_12 0
#define CT_ISFLOAT(dt) CT_CAT(CT_ISFLOAT_, dt)

/* x sign-extended to long, by hand: Mesa's rusticl 22.3 (llvmpipe) miscompiles comparisons and
 * convert_float_rtz() of a value sign-extended from int ((long)x): with x = 4, (long)x < 0 and
 * (long)x >= 600 were both true, and x = -3 passed as an index in range, so a gather with a
 * negative i32 index returned CT_OK. The zero extension and the subtraction compile correctly
 * everywhere (tests/portability/test_driver_quirks.c). */
inline long ct_sext32(int x) { return (long)(uint)x - (x < 0 ? 0x100000000l : 0l); }

/* Strided addressing. Host code passes a tensor's geometry as two long8 arguments (shape and
 * strides in elements; unused trailing dims have shape 1, stride 0) plus ndim. ct_offset gives
 * the element offset of the i-th element in row-major order of shape. */
inline long ct_offset(long i, int ndim, long8 shape, long8 strides) {
  long sh[8], st[8];
  vstore8(shape, 0, sh);
  vstore8(strides, 0, st);
  long off = 0;
  for (int d = ndim - 1; d >= 0; d--) {
    long q = i / sh[d];
    off += (i - q * sh[d]) * st[d];
    i = q;
  }
  return off;
}
