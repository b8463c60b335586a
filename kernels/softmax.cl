/* softmax and log_softmax along one dim, numerically stable: with m the row's maximum,
 * softmax = exp(x - m) / sum(exp(x - m)) and log_softmax = x - m - log(sum(exp(x - m))), so no
 * exp overflows. A NaN in a row makes the whole row NaN (as PyTorch).
 *
 * Build option CT_IN: the dtype (f16, bf16, f32, f64); f16/bf16 compute in float, f64 in double.
 * A "row" is the set of elements along the dim for one index of the other dims; rows are
 * numbered row-major over the other dims, whose geometry (kshape with the input's and the
 * output's strides) gives each row's start. Along the dim, element j is at j * in_step
 * (input) and j * out_step (output).
 *
 *  softmax_rows  one work-group per row, combining in local memory (long rows, small stride)
 *  softmax_cols  one work-item per row (rows along an outer dim: neighbouring work-items then
 *                read neighbouring addresses; short rows) */

#if CT_IN == CT_DT_F64
typedef double acc_t;
#define LOAD1(p, i) ((p)[i])
#define STORE1(p, i, v) ((p)[i] = (v))
#else
typedef float acc_t;
#define LOAD1(p, i) CT_LOADF(CT_IN, p, i)
#define STORE1(p, i, v) CT_STOREF(CT_IN, p, i, v)
#endif
typedef CT_T(CT_IN) io_t;

/* NaN-propagating max. */
#define MAXN(a, b) (((a) > (b) || isnan(a)) ? (a) : (b))

/* sum of exp(x_j - m) over j = j0, j0 + step, ... < j1: blocks of 16 terms merged in a binary
 * cascade (pairwise summation), so long rows keep an O(log n) error bound. */
inline acc_t ct_sm_sumexp(__global const io_t *in, long ib, long in_step, long j0, long j1,
                          long step, acc_t m) {
  acc_t st[34];
  ulong cnt = 0;
  long j = j0;
  while (j < j1) {
    acc_t b = 0;
    for (int k = 0; k < 16 && j < j1; k++, j += step) b += exp(LOAD1(in, ib + j * in_step) - m);
    int l = 0;
    for (ulong c = cnt; c & 1ul; c >>= 1, l++) b = st[l] + b;
    st[l] = b;
    cnt++;
  }
  acc_t s = 0;
  for (int l = 0; cnt; cnt >>= 1, l++)
    if (cnt & 1ul) s = st[l] + s;
  return s;
}

inline acc_t ct_sm_value(int logsm, acc_t x, acc_t m, acc_t s, acc_t logs) {
  return logsm ? (x - m) - logs : exp(x - m) / s;
}

__kernel void softmax_rows(__global const io_t *in, long in_off, __global io_t *out, long out_off,
                           long n, long in_step, long out_step, int kndim, long8 kshape,
                           long8 kin, long8 kout, int logsm, __local acc_t *lv) {
  long row = get_group_id(0);
  int lid = (int)get_local_id(0), L = (int)get_local_size(0);
  long ib = in_off + ct_offset(row, kndim, kshape, kin);
  long ob = out_off + ct_offset(row, kndim, kshape, kout);
#if CT_CHUNKED
  long per = (n + L - 1) / L, j0 = min(n, lid * per), j1 = min(n, j0 + per), step = 1;
#else
  long j0 = lid, j1 = n, step = L;
#endif
  acc_t m = (acc_t)(-INFINITY);
  for (long j = j0; j < j1; j += step) m = MAXN(m, LOAD1(in, ib + j * in_step));
  lv[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L / 2; s > 0; s >>= 1) {
    if (lid < s) lv[lid] = MAXN(lv[lid], lv[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  m = lv[0];
  barrier(CLK_LOCAL_MEM_FENCE);

  acc_t sum = ct_sm_sumexp(in, ib, in_step, j0, j1, step, m);
  lv[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L / 2; s > 0; s >>= 1) {
    if (lid < s) lv[lid] = lv[lid] + lv[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  sum = lv[0];
  acc_t logs = log(sum);
  for (long j = j0; j < j1; j += step)
    STORE1(out, ob + j * out_step, ct_sm_value(logsm, LOAD1(in, ib + j * in_step), m, sum, logs));
}

__kernel void softmax_cols(__global const io_t *in, long in_off, __global io_t *out, long out_off,
                           long n, long in_step, long out_step, int kndim, long8 kshape,
                           long8 kin, long8 kout, int logsm, long nrows) {
  long row = get_global_id(0);
  if (row >= nrows) return;
  long ib = in_off + ct_offset(row, kndim, kshape, kin);
  long ob = out_off + ct_offset(row, kndim, kshape, kout);
  acc_t m = (acc_t)(-INFINITY);
  for (long j = 0; j < n; j++) m = MAXN(m, LOAD1(in, ib + j * in_step));
  acc_t sum = ct_sm_sumexp(in, ib, in_step, 0, n, 1, m), logs = log(sum);
  for (long j = 0; j < n; j++)
    STORE1(out, ob + j * out_step, ct_sm_value(logsm, LOAD1(in, ib + j * in_step), m, sum, logs));
}
