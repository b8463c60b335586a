/* softmax and log_softmax along one dim, numerically stable: with m the row's maximum,
 * softmax = exp(x - m) / sum(exp(x - m)) and log_softmax = x - m - log(sum(exp(x - m))), so no
 * exp overflows. A NaN in a row makes the whole row NaN (as PyTorch).
 *
 * Build options: CT_IN, the dtype (f16, bf16, f32, f64; f16/bf16 compute in float, f64 in
 * double); CT_CHUNKED, 1 on CPU devices, where softmax_rows gives each work-item a row of its
 * own (a CPU runs a group's items one after another anyway) and needs no barriers.
 * A "row" is the set of elements along the dim for one index of the other dims; rows are
 * numbered row-major over the other dims, whose geometry (kshape with the input's and the
 * output's strides) gives each row's start. Along the dim, element j is at j * in_step
 * (input) and j * out_step (output).
 *
 *  softmax_rows  a work-group per row (CPUs: a work-item), for rows of small stride: 8-wide
 *                loads and vector exp when the row is contiguous in input and output
 *  softmax_cols  a work-item per 8 consecutive rows, for a dim that is outer in memory: the 8
 *                rows' elements are then usually adjacent and load as one vector per step
 * The sums of exp add 16 terms (per lane) serially and merge the block sums in a binary
 * cascade, pairwise, as the reductions do. */

#if CT_IN == CT_DT_F64
typedef double acc_t;
typedef double8 acc8_t;
#define LOAD1(p, i) ((p)[i])
#define STORE1(p, i, v) ((p)[i] = (v))
#define LOAD8(p, i) vload8(0, (p) + (i))
#define STORE8(p, i, v) vstore8((v), 0, (p) + (i))
#else
typedef float acc_t;
typedef float8 acc8_t;
#define LOAD1(p, i) CT_LOADF(CT_IN, p, i)
#define STORE1(p, i, v) CT_STOREF(CT_IN, p, i, v)
#if CT_IN == CT_DT_F16
#define LOAD8(p, i) vload_half8(0, (p) + (i))
#define STORE8(p, i, v) vstore_half8_rte((v), 0, (p) + (i))
#elif CT_IN == CT_DT_BF16
#define LOAD8(p, i) as_float8(convert_uint8(vload8(0, (p) + (i))) << 16)
#define STORE8(p, i, v) vstore8(ct_f32_to_bf16_8(v), 0, (p) + (i))
#else
#define LOAD8(p, i) vload8(0, (p) + (i))
#define STORE8(p, i, v) vstore8((v), 0, (p) + (i))
#endif
#endif
typedef CT_T(CT_IN) io_t;

/* ct_f32_to_bf16 of common.cl, 8 lanes at once. */
inline ushort8 ct_f32_to_bf16_8(float8 f) {
  uint8 u = as_uint8(f);
  uint8 r = (u + (uint8)0x7fffu + ((u >> 16) & (uint8)1u)) >> 16;
  uint8 q = (u >> 16) | (uint8)0x40u;
  return convert_ushort8(select(r, q, (u & (uint8)0x7fffffffu) > (uint8)0x7f800000u));
}

/* NaN-propagating max, scalar and vector. */
#define MAXN(a, b) (((a) > (b) || isnan(a)) ? (a) : (b))
#define MAXN8(a, b) select((b), (a), ((a) > (b)) | isnan(a))

inline acc_t ct_hmax8(acc8_t v) {
  acc_t t[8];
  vstore8(v, 0, t);
  for (int s = 4; s > 0; s >>= 1)
    for (int l = 0; l < s; l++) t[l] = MAXN(t[l], t[l + s]);
  return t[0];
}

inline acc_t ct_hsum8(acc8_t v) {
  acc_t t[8];
  vstore8(v, 0, t);
  for (int s = 4; s > 0; s >>= 1)
    for (int l = 0; l < s; l++) t[l] = t[l] + t[l + s];
  return t[0];
}

/* The binary cascade of block sums: ct_push8/ct_pop8, ct_push1/ct_pop1. */
//#include "cascade.cl"

/* Sum of exp(x_j - m) for j = j0, j0 + step, ... < j1 of a strided row. */
inline acc_t ct_sumexp1(__global const io_t *in, long ib, long in_step, long j0, long j1,
                        long step, acc_t m) {
  acc_t st[CT_LEVELS];
  ulong cnt = 0;
  long j = j0;
  while (j < j1) {
    acc_t b = 0;
    for (int k = 0; k < 16 && j < j1; k++, j += step) b += CT_ACC_EXP(LOAD1(in, ib + j * in_step) - m);
    ct_push1(st, &cnt, b);
  }
  return ct_pop1(st, cnt);
}

#define CT_SM_VALUE(logsm, x, m, s, logs) ((logsm) ? ((x) - (m)) - (logs) : CT_ACC_EXP((x) - (m)) / (s))
#define CT_SM_VALUE8(logsm, x, m, s, logs) ((logsm) ? ((x) - (m)) - (logs) : CT_ACC_EXP8((x) - (m)) / (s))

__kernel void softmax_rows(__global const io_t *in, long in_off, __global io_t *out, long out_off,
                           long n, long in_step, long out_step, int kndim, long8 kshape,
                           long8 kin, long8 kout, int logsm, long nrows, __local acc_t *lv) {
  CT_UNIT(row, nrows);
#if CT_CHUNKED
  (void)lv;
#endif
  long ib = in_off + ct_offset(row, kndim, kshape, kin);
  long ob = out_off + ct_offset(row, kndim, kshape, kout);
  /* Contiguous rows: vectors k = lid, lid + L, ... < nv, then the n % 8 tail. */
  bool vec = in_step == 1 && out_step == 1;
  long nv = vec ? n / 8 : 0, t0 = nv * 8 + lid;

  acc_t m = (acc_t)(-INFINITY);
  if (vec) {
    acc8_t m8 = (acc8_t)(-INFINITY);
    for (long k = lid; k < nv; k += L) m8 = MAXN8(m8, LOAD8(in, ib + 8 * k));
    m = ct_hmax8(m8);
  }
  for (long j = t0; j < n; j += L) m = MAXN(m, LOAD1(in, ib + j * in_step));
#if !CT_CHUNKED
  lv[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L / 2; s > 0; s >>= 1) {
    if (lid < s) lv[lid] = MAXN(lv[lid], lv[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  m = lv[0];
  barrier(CLK_LOCAL_MEM_FENCE);
#endif

  acc_t sum = 0;
  if (vec) {
    acc8_t st[CT_LEVELS];
    ulong cnt = 0;
    acc8_t m8 = (acc8_t)m;
    for (long k = lid; k < nv;) {
      acc8_t b = (acc8_t)0;
      for (int t = 0; t < 16 && k < nv; t++, k += L) b += CT_ACC_EXP8(LOAD8(in, ib + 8 * k) - m8);
      ct_push8(st, &cnt, b);
    }
    sum = ct_hsum8(ct_pop8(st, cnt));
  }
  sum += ct_sumexp1(in, ib, in_step, t0, n, L, m);
#if !CT_CHUNKED
  lv[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L / 2; s > 0; s >>= 1) {
    if (lid < s) lv[lid] = lv[lid] + lv[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  sum = lv[0];
#endif
  acc_t logs = log(sum);
  if (vec) {
    acc8_t m8 = (acc8_t)m, s8 = (acc8_t)sum, l8 = (acc8_t)logs;
    for (long k = lid; k < nv; k += L) {
      acc8_t x = LOAD8(in, ib + 8 * k);
      STORE8(out, ob + 8 * k, CT_SM_VALUE8(logsm, x, m8, s8, l8));
    }
  }
  for (long j = t0; j < n; j += L) {
    acc_t x = LOAD1(in, ib + j * in_step);
    STORE1(out, ob + j * out_step, CT_SM_VALUE(logsm, x, m, sum, logs));
  }
}

__kernel void softmax_cols(__global const io_t *in, long in_off, __global io_t *out, long out_off,
                           long n, long in_step, long out_step, int kndim, long8 kshape,
                           long8 kin, long8 kout, int logsm, long nrows) {
  long r0 = get_global_id(0) * 8;
  if (r0 >= nrows) return;
  int nr = (int)min(8l, nrows - r0);
  long ib[8], ob[8];
  for (int l = 0; l < nr; l++) {
    ib[l] = in_off + ct_offset(r0 + l, kndim, kshape, kin);
    ob[l] = out_off + ct_offset(r0 + l, kndim, kshape, kout);
  }
  bool vec = nr == 8;
  for (int l = 1; vec && l < 8; l++) vec = ib[l] == ib[0] + l && ob[l] == ob[0] + l;
  if (vec) {
    /* The 8 rows side by side: lane l is row r0 + l. */
    acc8_t m = (acc8_t)(-INFINITY);
    for (long j = 0; j < n; j++) m = MAXN8(m, LOAD8(in, ib[0] + j * in_step));
    acc8_t st[CT_LEVELS];
    ulong cnt = 0;
    for (long j = 0; j < n;) {
      acc8_t b = (acc8_t)0;
      for (int t = 0; t < 16 && j < n; t++, j++) b += CT_ACC_EXP8(LOAD8(in, ib[0] + j * in_step) - m);
      ct_push8(st, &cnt, b);
    }
    acc8_t s = ct_pop8(st, cnt), logs = log(s);
    for (long j = 0; j < n; j++) {
      acc8_t x = LOAD8(in, ib[0] + j * in_step);
      STORE8(out, ob[0] + j * out_step, CT_SM_VALUE8(logsm, x, m, s, logs));
    }
    return;
  }
  for (int l = 0; l < nr; l++) {
    acc_t m = (acc_t)(-INFINITY);
    for (long j = 0; j < n; j++) m = MAXN(m, LOAD1(in, ib[l] + j * in_step));
    acc_t s = ct_sumexp1(in, ib[l], in_step, 0, n, 1, m), logs = log(s);
    for (long j = 0; j < n; j++) {
      acc_t x = LOAD1(in, ib[l] + j * in_step);
      STORE1(out, ob[l] + j * out_step, CT_SM_VALUE(logsm, x, m, s, logs));
    }
  }
}
