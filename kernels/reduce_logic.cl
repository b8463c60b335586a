/* logsumexp, any and all: one work-item per output, walking the reduced extent.
 *
 * Build option: CT_IN, the input's storage dtype. Geometry as in kernels/reduce.cl: output o
 * starts at in_off + ct_offset(o, kept...) and its j-th reduced element lies
 * ct_offset(j, red...) further. These reductions are rarely on a hot path (a model's loss or
 * a mask test), so the kernels stay simple: no splitting of long extents into parts.
 *
 * logsumexp: f64 computes in double, every other dtype in float (integers promote to f32 as
 * PyTorch). Max-shifted: m = max x, r = m + log(sum exp(x - m)), with an infinite m replaced by
 * 0 (as PyTorch), so an all -inf slice gives log(0) = -inf and a +inf gives inf rather than
 * NaN. The sum of exp adds 16 terms serially and merges block sums in a binary cascade
 * (pairwise, as kernels/reduce.cl); a contiguous extent does so 8 lanes at a time. An empty
 * extent gives -inf.
 *
 * any / all: x != 0 for every dtype (NaN counts as true, as in PyTorch); stops at the first
 * deciding element. An empty extent gives false / true. The result is one byte, 0 or 1 (bool
 * or u8). */

typedef CT_T(CT_IN) in_t;
#if CT_IN == CT_DT_F64
typedef double acc_t;
typedef double8 acc8_t;
#define LOAD1(p, i) ((p)[i])
#define LOAD8(p, i) vload8(0, (p) + (i))
#else
typedef float acc_t;
typedef float8 acc8_t;
#define LOAD1(p, i) CT_LOADF(CT_IN, p, i)
#if CT_IN == CT_DT_F16
#define LOAD8(p, i) vload_half8(0, (p) + (i))
#elif CT_IN == CT_DT_BF16
#define LOAD8(p, i) as_float8(convert_uint8(vload8(0, (p) + (i))) << 16)
#else
#define LOAD8(p, i) convert_float8(vload8(0, (p) + (i)))
#endif
#endif

#define MAXN(a, b) (((a) > (b) || isnan(a)) ? (a) : (b))
#define MAXN8(a, b) select((b), (a), ((a) > (b)) | isnan(a))

/* The binary cascade of block sums: ct_push8/ct_pop8, ct_push1/ct_pop1. */
//#include "cascade.cl"

/* logsumexp of n contiguous elements at p: 8 lanes, blocks of 16 vectors through the
 * cascade, then the n % 8 tail. */
inline acc_t ct_lse_contiguous(__global const in_t *p, long n) {
  long nv = n / 8;
  acc8_t m8 = (acc8_t)(-INFINITY);
  for (long k = 0; k < nv; k++) m8 = MAXN8(LOAD8(p, 8 * k), m8);
  acc_t t[8];
  vstore8(m8, 0, t);
  acc_t m = (acc_t)(-INFINITY);
  for (int l = 0; l < 8; l++) m = MAXN(t[l], m);
  for (long j = nv * 8; j < n; j++) m = MAXN(LOAD1(p, j), m);
  if (isinf(m)) m = (acc_t)0;
  acc8_t st[CT_LEVELS], ms8 = (acc8_t)m;
  ulong cnt = 0;
  for (long k = 0; k < nv;) {
    acc8_t b = (acc8_t)0;
    for (int q = 0; q < 16 && k < nv; q++, k++) b += CT_ACC_EXP8(LOAD8(p, 8 * k) - ms8);
    ct_push8(st, &cnt, b);
  }
  acc8_t s8 = ct_pop8(st, cnt);
  vstore8(s8, 0, t);
  acc_t s = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
  for (long j = nv * 8; j < n; j++) s += CT_ACC_EXP(LOAD1(p, j) - m);
  return log(s) + m;
}

inline long ct_lg_offset(long j, int rndim, long8 rshape, long8 rstride) {
  return rndim == 1 ? j * rstride.s0 : ct_offset(j, rndim, rshape, rstride);
}

__kernel void red_logsumexp(__global const in_t *in, long in_off, __global void *out,
                            long out_off, int out_dt, long nout, long nred, int kndim,
                            long8 kshape, long8 kstride, int rndim, long8 rshape,
                            long8 rstride) {
  long o = get_global_id(0);
  if (o >= nout) return;
  long base = in_off + ct_offset(o, kndim, kshape, kstride);
  acc_t r;
  if (rndim == 1 && rstride.s0 == 1) {
    r = ct_lse_contiguous(in + base, nred);
  } else {
    acc_t m = (acc_t)(-INFINITY);
    for (long j = 0; j < nred; j++)
      m = MAXN(LOAD1(in, base + ct_lg_offset(j, rndim, rshape, rstride)), m);
    if (isinf(m)) m = (acc_t)0;
    acc_t st[CT_LEVELS];
    ulong cnt = 0;
    for (long j = 0; j < nred;) {
      acc_t b = 0;
      for (int t = 0; t < 16 && j < nred; t++, j++)
        b += CT_ACC_EXP(LOAD1(in, base + ct_lg_offset(j, rndim, rshape, rstride)) - m);
      ct_push1(st, &cnt, b);
    }
    r = log(ct_pop1(st, cnt)) + m;
  }
  long i = out_off + o;
  if (out_dt == CT_DT_F16)
    vstore_half_rte((float)r, (size_t)i, (__global half *)out);
  else if (out_dt == CT_DT_BF16)
    ((__global ushort *)out)[i] = ct_f32_to_bf16((float)r);
#if defined(CT_HAS_FP64) && CT_HAS_FP64
  else if (out_dt == CT_DT_F64)
    ((__global double *)out)[i] = (double)r;
#endif
  else
    ((__global float *)out)[i] = (float)r;
}

/* is_all 0: any, 1: all. */
__kernel void red_anyall(__global const in_t *in, long in_off, __global uchar *out, long out_off,
                         int is_all, long nout, long nred, int kndim, long8 kshape,
                         long8 kstride, int rndim, long8 rshape, long8 rstride) {
  long o = get_global_id(0);
  if (o >= nout) return;
  long base = in_off + ct_offset(o, kndim, kshape, kstride);
  uchar r = is_all ? 1 : 0;
  for (long j = 0; j < nred; j++) {
#if CT_ISFLOAT(CT_IN)
    bool nz = LOAD1(in, base + ct_lg_offset(j, rndim, rshape, rstride)) != (acc_t)0;
#else
    bool nz = in[base + ct_lg_offset(j, rndim, rshape, rstride)] != (in_t)0;
#endif
    if (nz != (bool)is_all) {
      r = !is_all;
      break;
    }
  }
  out[out_off + o] = r;
}
