/* Philox4x32-10 (Salmon et al., SC'11; constants and round function as in Random123) and the
 * rand/randn conversions documented in include/cltensor/random.h.
 *
 * The bits use integer arithmetic only (exact 64-bit products of 32-bit words), so they are the
 * same on every OpenCL implementation; the uniform conversions are exact (a k-bit integer times
 * 2^-k fits the target's significand). Work-item b computes 128-bit block b of the stream
 * (seed, offset): counter (b, offset) as four 32-bit words, low word first, key (seed lo, hi). */

#define CT_PHILOX_M0 0xD2511F53u
#define CT_PHILOX_M1 0xCD9E8D57u
#define CT_PHILOX_W0 0x9E3779B9u
#define CT_PHILOX_W1 0xBB67AE85u

inline uint4 ct_philox4x32_10(uint4 c, uint2 k) {
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k.x += CT_PHILOX_W0;
      k.y += CT_PHILOX_W1;
    }
    /* The 64-bit products give mul_hi's bits and the low words at once; PoCL ran mul_hi as a
     * scalar call per work-item (about half of the cost of ct_rand). */
    ulong p0 = (ulong)CT_PHILOX_M0 * c.x, p1 = (ulong)CT_PHILOX_M1 * c.z;
    c = (uint4)((uint)(p1 >> 32) ^ c.y ^ k.x, (uint)p1, (uint)(p0 >> 32) ^ c.w ^ k.y, (uint)p0);
  }
  return c;
}

inline uint4 ct_philox_block(ulong b, ulong seed, ulong offset) {
  uint4 c = (uint4)((uint)b, (uint)(b >> 32), (uint)offset, (uint)(offset >> 32));
  return ct_philox4x32_10(c, (uint2)((uint)seed, (uint)(seed >> 32)));
}

/* Raw blocks first, first + 1, ... (for known-answer tests). */
__kernel void philox_bits(__global uint *out, long out_off, long nblocks, ulong first, ulong seed,
                          ulong offset) {
  long i = get_global_id(0);
  if (i >= nblocks) return;
  vstore4(ct_philox_block(first + (ulong)i, seed, offset), 0, out + out_off + 4 * i);
}

/* Uniform [0, 1) with 24 bits, and (0, 1] for the Box-Muller radius (log never sees 0). */
inline float ct_u24(uint w) { return (float)(w >> 8) * 0x1.0p-24f; }
inline float ct_u24_open0(uint w) { return (float)((w >> 8) + 1u) * 0x1.0p-24f; }

inline void ct_store_f(__global void *out, long i, int dt, float v) {
  if (dt == CT_DT_F16)
    vstore_half_rte(v, (size_t)i, (__global half *)out);
  else if (dt == CT_DT_BF16)
    ((__global ushort *)out)[i] = ct_f32_to_bf16(v);
  else
    ((__global float *)out)[i] = v;
}

/* n elements of dtype dt (f16, bf16, f32, f64) from blocks 0, 1, ...: uniform, or normal when
 * `normal` is set. f64 uses two words per element, the others one. With `affine`, each value v
 * becomes v * scale + shift, rounded after the product and after the sum as the elementwise ops
 * would (fscale, fshift for the float dtypes; dscale, dshift the bits of the doubles for f64): the
 * initializers' draws in one kernel, not a draw and a fused multiply-add (src/nn/init.c). */
__kernel void rand_fill(__global void *out, long out_off, long n, int dt, int normal, ulong seed,
                        ulong offset, int affine, float fscale, float fshift, ulong dscale, ulong dshift) {
  long b = get_global_id(0);
  if (b * (dt == CT_DT_F64 ? 2 : 4) >= n) return;
  uint4 w = ct_philox_block((ulong)b, seed, offset);
#if defined(CT_HAS_FP64) && CT_HAS_FP64
  if (dt == CT_DT_F64) {
    long e = out_off + 2 * b, left = n - 2 * b;
    ulong k0 = ((((ulong)w.y) << 32) | w.x) >> 11, k1 = ((((ulong)w.w) << 32) | w.z) >> 11;
    double v0, v1;
    if (normal) {
      double r = sqrt(-2.0 * log((double)(k0 + 1ul) * 0x1.0p-53));
      double t = 2.0 * (double)k1 * 0x1.0p-53;
      v0 = r * cospi(t);
      v1 = r * sinpi(t);
    } else {
      v0 = (double)k0 * 0x1.0p-53;
      v1 = (double)k1 * 0x1.0p-53;
    }
    if (affine) {
      v0 = v0 * as_double(dscale);
      v0 = v0 + as_double(dshift);
      v1 = v1 * as_double(dscale);
      v1 = v1 + as_double(dshift);
    }
    __global double *o = (__global double *)out;
    o[e] = v0;
    if (left > 1) o[e + 1] = v1;
    return;
  }
#endif
  long e = out_off + 4 * b, left = n - 4 * b;
  float v[4];
  if (normal) {
    float r0 = sqrt(-2.0f * log(ct_u24_open0(w.x))), t0 = 2.0f * ct_u24(w.y);
    float r1 = sqrt(-2.0f * log(ct_u24_open0(w.z))), t1 = 2.0f * ct_u24(w.w);
    v[0] = r0 * cospi(t0);
    v[1] = r0 * sinpi(t0);
    v[2] = r1 * cospi(t1);
    v[3] = r1 * sinpi(t1);
  } else if (dt == CT_DT_F16) {
    v[0] = (float)(w.x >> 21) * 0x1.0p-11f;
    v[1] = (float)(w.y >> 21) * 0x1.0p-11f;
    v[2] = (float)(w.z >> 21) * 0x1.0p-11f;
    v[3] = (float)(w.w >> 21) * 0x1.0p-11f;
  } else if (dt == CT_DT_BF16) {
    v[0] = (float)(w.x >> 24) * 0x1.0p-8f;
    v[1] = (float)(w.y >> 24) * 0x1.0p-8f;
    v[2] = (float)(w.z >> 24) * 0x1.0p-8f;
    v[3] = (float)(w.w >> 24) * 0x1.0p-8f;
  } else {
    v[0] = ct_u24(w.x);
    v[1] = ct_u24(w.y);
    v[2] = ct_u24(w.z);
    v[3] = ct_u24(w.w);
  }
  if (affine)
    for (int k = 0; k < 4; k++) {
      v[k] = v[k] * fscale;
      v[k] = v[k] + fshift;
    }
  for (int k = 0; k < 4 && k < left; k++) ct_store_f(out, e + k, dt, v[k]);
}

/* randint (include/cltensor/shape.h): n integers low + (w mod range) stored as dtype dt. A range
 * up to 2^32 takes one 32-bit word per element (four per block), a wider one the 64-bit
 * (w1 << 32 | w0) and (w3 << 32 | w2) (two per block). */
inline void ct_store_int(__global void *out, long i, int dt, long v) {
  switch (dt) {
    CT_STORE_CASES(out, i, v, convert_float_rte, convert_double_rte)
    case CT_DT_U64: ((__global ulong *)out)[i] = (ulong)v; break;
    default: break;
  }
}

__kernel void randint_fill(__global void *out, long out_off, long n, int dt, long low, ulong range, ulong seed,
                           ulong offset) {
  long b = get_global_id(0);
  int wide = range > 0x100000000ul;
  long per = wide ? 2 : 4;
  if (b * per >= n) return;
  uint4 w = ct_philox_block((ulong)b, seed, offset);
  ulong r[4];
  if (wide) {
    r[0] = ((((ulong)w.y) << 32) | w.x) % range;
    r[1] = ((((ulong)w.w) << 32) | w.z) % range;
  } else {
    r[0] = w.x % range;
    r[1] = w.y % range;
    r[2] = w.z % range;
    r[3] = w.w % range;
  }
  long e = out_off + per * b, left = n - per * b;
  for (int k = 0; k < per && k < left; k++) ct_store_int(out, e + k, dt, (long)((ulong)low + r[k]));
}

/* Philox4x32-10 on 8 counters at once (lane j: counter (c0[j], c1[j], c2[j], c3[j])), the
 * words of lane j those of ct_philox4x32_10 on that counter. Explicit vectors and 64-bit
 * products instead of mul_hi: PoCL runs the scalar rounds work-item by work-item, and they
 * were nearly all of dropout_fill's time (6-10x this, measured on 32K elements). */
inline void ct_philox4x32_10_v8(uint8 *c0, uint8 *c1, uint8 *c2, uint8 *c3, uint2 k) {
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k.x += CT_PHILOX_W0;
      k.y += CT_PHILOX_W1;
    }
    ulong8 p0 = convert_ulong8(*c0) * (ulong)CT_PHILOX_M0, p1 = convert_ulong8(*c2) * (ulong)CT_PHILOX_M1;
    uint8 n0 = convert_uint8(p1 >> 32) ^ *c1 ^ k.x, n2 = convert_uint8(p0 >> 32) ^ *c3 ^ k.y;
    *c1 = convert_uint8(p1); /* the low words: conversion to unsigned wraps (C99 6.3.1.3) */
    *c3 = convert_uint8(p0);
    *c0 = n0;
    *c2 = n2;
  }
}

/* Element i of dropout_fill: out[dst] = in[src] * scale when kept, else in[src] * 0. One
 * product by a factor chosen first: Mesa's rusticl 22.3 folds a written-out x * 0.0f to 0,
 * which turned NaN and inf inputs into 0 instead of NaN (tests/nn/test_dropout.c,
 * test_nonfinite). */
inline void ct_dropout_one(__global const void *in, long src, __global void *out, long dst, int dt, bool keep,
                           float scale, ulong scale_bits) {
#if defined(CT_HAS_FP64) && CT_HAS_FP64
  if (dt == CT_DT_F64) {
    double x = ((__global const double *)in)[src];
    ((__global double *)out)[dst] = x * (keep ? as_double(scale_bits) : 0.0);
    return;
  }
#endif
  float x;
  if (dt == CT_DT_F16)
    x = vload_half((size_t)src, (__global const half *)in);
  else if (dt == CT_DT_BF16)
    x = ct_bf16_to_f32(((__global const ushort *)in)[src]);
  else
    x = ((__global const float *)in)[src];
  ct_store_f(out, dst, dt, x * (keep ? scale : 0.0f));
  (void)scale_bits;
}

/* Dropout (ct_dropout, src/nn/dropout.c): element i (row-major over the input's shape, read
 * through its strides) is kept when the 24-bit uniform of word i % 4 of block i / 4,
 * (w >> 8) * 2^-24, is >= p, and is then multiplied by scale = 1 / (1 - p) (f64: the double
 * scale, scale_bits being its bits, as float arguments can't carry it); else it becomes
 * x * 0 (as PyTorch's mask product: -0 for negative x, NaN for NaN and inf). Work-item t
 * computes blocks 8t..8t+7 (ct_philox4x32_10_v8) and writes elements 32t..32t+31 of the
 * contiguous output. dt is the dtype of both (f16, bf16, f32, f64). */
__kernel void dropout_fill(__global const void *in, long in_off, int ndim, long8 shape,
                           long8 strides, __global void *out, long out_off, long n, int dt,
                           float p, float scale, ulong scale_bits, ulong seed, ulong offset) {
  long t = get_global_id(0), i0 = 32 * t;
  if (i0 >= n) return;
  ulong8 b = (ulong)(8 * t) + (ulong8)(0, 1, 2, 3, 4, 5, 6, 7);
  uint8 c0 = convert_uint8(b), c1 = convert_uint8(b >> 32), c2 = (uint8)((uint)offset),
        c3 = (uint8)((uint)(offset >> 32));
  ct_philox4x32_10_v8(&c0, &c1, &c2, &c3, (uint2)((uint)seed, (uint)(seed >> 32)));
  uint w[4][8];
  vstore8(c0, 0, w[0]);
  vstore8(c1, 0, w[1]);
  vstore8(c2, 0, w[2]);
  vstore8(c3, 0, w[3]);
  long cnt = min(32L, n - i0), s = strides.s0;
  if (dt == CT_DT_F32 && cnt == 32 && ndim == 1 && s == 1) {
    /* The common case (a whole tile of contiguous f32) as one plain loop: a third of the
     * time of the general one below. */
    __global const float *x = (__global const float *)in + in_off + i0;
    __global float *o = (__global float *)out + out_off + i0;
    for (int e = 0; e < 32; e++) o[e] = x[e] * (ct_u24(w[e & 3][e >> 2]) >= p ? scale : 0.0f);
    return;
  }
  /* One dim (contiguous or evenly strided input, once the host merged dims): no division. */
  for (int e = 0; e < cnt; e++) {
    long i = i0 + e;
    long src = in_off + (ndim == 1 ? i * s : ct_offset(i, ndim, shape, strides));
    ct_dropout_one(in, src, out, out_off + i, dt, ct_u24(w[e & 3][e >> 2]) >= p, scale, scale_bits);
  }
}
