/* nll_loss and cross_entropy with class-index targets: one work-item per position (an index of
 * the non-class dims of the input, row-major; the target has exactly those dims).
 *
 * Build option: CT_IN, the input's dtype (f16, bf16, f32 compute in float, f64 in double).
 * The input's class dim has `ncls` entries `cstride` apart; position p's first class lies at
 * in_off + ct_offset(p, pndim, pshape, xstride), its target at t_off + ct_offset(p, pndim,
 * pshape, tstride). With `ce` set the input holds logits and the row's log-softmax is taken
 * here (max-shifted: lse = m + log(sum exp(x - m))), else it holds log-probabilities.
 *
 * Per position, with eps the label smoothing (0 for nll_loss) and C = ncls, as F.cross_entropy:
 *   loss = (1 - eps) * (-logp[t]) + eps / C * (-sum_c logp[c])
 * and 0 for a target equal to ignore_index, into loss[loss_off + p]; valid[valid_off + p] gets
 * 1 or 0 (the mean divides by the
 * count of non-ignored targets). A target outside [0, C) that is not ignore_index is an error:
 * the smallest such position (positions from 2^31 - 2 on count as 2^31 - 2: a 32-bit flag)
 * goes into bad[bad_off] (atomic_min; the host initialises it to INT_MAX and
 * reads it back after the kernel), and the position's loss is 0.
 *
 * loss_nll_bwd, the backward (a work-item per position, writing the position's whole row of
 * the gradient dx, contiguous in the input's shape: position p's row at ct_offset(p, ...,
 * ostride), classes ocstride apart). With gp the position's incoming gradient (g[p] for
 * reduction NONE, g[0] otherwise, divided by count[0], the number of non-ignored targets, for
 * MEAN), from the loss above:
 *   d loss / d in[c] = gp * (softmax(in)[c] (ce only) - (1 - eps) [c == t] - eps / C)
 * and 0 for the whole row of an ignored (or invalid) target. */

typedef CT_T(CT_IN) in_t;
#if CT_IN == CT_DT_F64
typedef double acc_t;
typedef double8 acc8_t;
#define LOAD1(p, i) ((p)[i])
#else
typedef float acc_t;
typedef float8 acc8_t;
#define LOAD1(p, i) CT_LOADF(CT_IN, p, i)
#endif
/* 8 consecutive elements as acc8_t. */
#if CT_IN == CT_DT_F16
#define LOAD8(p, i) vload_half8(0, (p) + (i))
#elif CT_IN == CT_DT_BF16
#define LOAD8(p, i) as_float8(convert_uint8(vload8(0, (p) + (i))) << 16)
#else
#define LOAD8(p, i) vload8(0, (p) + (i))
#endif

#define MAXN(a, b) (((a) > (b) || isnan(a)) ? (a) : (b))
#define MAXN8(a, b) select((b), (a), ((a) > (b)) | isnan(a))

inline acc_t ct_hsum8(acc8_t v) {
  acc_t t[8];
  vstore8(v, 0, t);
  return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

/* A row's maximum, sum of exp(x - ms), and sum of (x - lse). Contiguous rows (cstride 1) go 8
 * elements at a time. */
inline acc_t ct_row_max(__global const in_t *in, long base, long ncls, long cstride) {
  acc_t m = (acc_t)(-INFINITY);
  long c = 0;
  if (cstride == 1) {
    acc8_t m8 = (acc8_t)(-INFINITY);
    for (; c + 8 <= ncls; c += 8) m8 = MAXN8(LOAD8(in, base + c), m8);
    acc_t t[8];
    vstore8(m8, 0, t);
    for (int l = 0; l < 8; l++) m = MAXN(t[l], m);
  }
  for (; c < ncls; c++) m = MAXN(LOAD1(in, base + c * cstride), m);
  return m;
}

inline acc_t ct_row_sumexp(__global const in_t *in, long base, long ncls, long cstride, acc_t ms) {
  acc_t s = 0;
  long c = 0;
  if (cstride == 1) {
    acc8_t s8 = (acc8_t)0, m8 = (acc8_t)ms;
    for (; c + 8 <= ncls; c += 8) s8 += CT_ACC_EXP8(LOAD8(in, base + c) - m8);
    s = ct_hsum8(s8);
  }
  for (; c < ncls; c++) s += CT_ACC_EXP(LOAD1(in, base + c * cstride) - ms);
  return s;
}

inline acc_t ct_row_sum_shifted(__global const in_t *in, long base, long ncls, long cstride,
                                acc_t lse) {
  acc_t s = 0;
  long c = 0;
  if (cstride == 1) {
    acc8_t s8 = (acc8_t)0, l8 = (acc8_t)lse;
    for (; c + 8 <= ncls; c += 8) s8 += LOAD8(in, base + c) - l8;
    s = ct_hsum8(s8);
  }
  for (; c < ncls; c++) s += LOAD1(in, base + c * cstride) - lse;
  return s;
}

__kernel void loss_nll(__global const in_t *in, long in_off, __global const long *target,
                       long t_off, __global acc_t *loss, long loss_off, __global acc_t *valid,
                       long valid_off, __global int *bad, long bad_off, long npos, long ncls,
                       long cstride, int pndim, long8 pshape, long8 xstride, long8 tstride,
                       long ignore_index, int ce, acc_t eps) {
  long p = get_global_id(0);
  if (p >= npos) return;
  loss += loss_off;
  valid += valid_off;
  bad += bad_off;
  long t = target[t_off + ct_offset(p, pndim, pshape, tstride)];
  if (t == ignore_index) {
    loss[p] = 0;
    valid[p] = 0;
    return;
  }
  if (t < 0 || t >= ncls) {
    atomic_min(bad, (int)min(p, (long)INT_MAX - 1));
    loss[p] = 0;
    valid[p] = 0;
    return;
  }
  long base = in_off + ct_offset(p, pndim, pshape, xstride);
  acc_t lse = 0, sum = 0;
  if (ce) {
    acc_t m = ct_row_max(in, base, ncls, cstride);
    /* An infinite maximum is not subtracted (inf - inf would be NaN), as logsumexp. */
    acc_t ms = isinf(m) ? (acc_t)0 : m;
    lse = ms + log(ct_row_sumexp(in, base, ncls, cstride, ms));
  }
  /* -sum_c logp[c], as a sum of the log-probabilities themselves (C * lse - sum_c x[c] would
   * cancel when lse is large). */
  if (eps != (acc_t)0) sum = ct_row_sum_shifted(in, base, ncls, cstride, lse);
  acc_t lpt = LOAD1(in, base + t * cstride) - lse;
  loss[p] = eps != (acc_t)0 ? ((acc_t)1 - eps) * -lpt + eps / (acc_t)ncls * -sum : -lpt;
  valid[p] = 1;
}

__kernel void loss_nll_bwd(__global const in_t *in, long in_off, __global const long *target,
                           long t_off, __global const acc_t *g, long g_off, int g_per_pos,
                           __global const acc_t *count, long count_off, int mean,
                           __global acc_t *dx, long dx_off, long npos, long ncls, long cstride,
                           long ocstride, int pndim, long8 pshape, long8 xstride, long8 tstride,
                           long8 ostride, long ignore_index, int ce, acc_t eps) {
  long p = get_global_id(0);
  if (p >= npos) return;
  long t = target[t_off + ct_offset(p, pndim, pshape, tstride)];
  long ob = dx_off + ct_offset(p, pndim, pshape, ostride);
  if (t == ignore_index || t < 0 || t >= ncls) {
    for (long c = 0; c < ncls; c++) dx[ob + c * ocstride] = 0;
    return;
  }
  acc_t gp = g[g_off + (g_per_pos ? p : 0)];
  if (mean) gp /= count[count_off];
  long base = in_off + ct_offset(p, pndim, pshape, xstride);
  acc_t lse = 0;
  if (ce) {
    acc_t m = ct_row_max(in, base, ncls, cstride);
    acc_t ms = isinf(m) ? (acc_t)0 : m;
    lse = ms + log(ct_row_sumexp(in, base, ncls, cstride, ms));
  }
  acc_t off = eps / (acc_t)ncls;
  long c = 0;
  /* Contiguous rows 8 classes at a time: the exponentials were most of this kernel's time one
   * at a time (PoCL's scalar exp). The target's element is rewritten after the loop. */
  if (cstride == 1 && ocstride == 1) {
    acc8_t g8 = (acc8_t)gp, l8 = (acc8_t)lse, o8 = (acc8_t)off;
    for (; c + 8 <= ncls; c += 8) {
      acc8_t v = ce ? CT_ACC_EXP8(LOAD8(in, base + c) - l8) : (acc8_t)0;
      vstore8(g8 * (v - o8), 0, dx + ob + c);
    }
  }
  for (; c < ncls; c++) {
    acc_t v = ce ? CT_ACC_EXP(LOAD1(in, base + c * cstride) - lse) : (acc_t)0;
    dx[ob + c * ocstride] = gp * (v - off);
  }
  acc_t v = ce ? CT_ACC_EXP(LOAD1(in, base + t * cstride) - lse) : (acc_t)0;
  dx[ob + t * ocstride] = gp * (v - (off + ((acc_t)1 - eps)));
}

/* ---- loss_sum: the SUM or MEAN of a loss small enough for one work-group ----
 * Build option CT_CHUNKED (1 on CPU devices, as reduce.cl). out[out_off] (the input's dtype) =
 * sum_p loss[p], or for MEAN that / sum_p valid[p], whose count also goes to nv[nv_off] (the
 * backward's divisor); p over [0, npos). What ct_sum, ct_sum and ct_div computed, in one kernel
 * instead of three. A work-group of L work-items (1 on CPU devices): work-item i sums positions
 * i, i + L, ... in blocks of 16 through the cascade (the error grows with the log of the
 * blocks), then the items combine in a local-memory tree. The host keeps each item's trip count
 * within the device's loop budget and L a power of two. */
#define CT_LEVELS 24
//#include "cascade.cl"

__kernel void loss_sum(__global const acc_t *loss, long loss_off, __global const acc_t *valid, long valid_off,
                       long npos, int mean, __global in_t *out, long out_off, __global acc_t *nv, long nv_off,
                       __local acc_t *ls, __local acc_t *lc) {
  const long L = (long)get_local_size(0), lid = (long)get_local_id(0);
  acc_t st[CT_LEVELS];
  ulong cnt = 0;
  acc_t c = 0; /* counts of 0s and 1s: exact in floats up to 2^24 */
  for (long p = lid; p < npos;) {
    acc_t b = 0;
    for (int k = 0; k < 16 && p < npos; k++, p += L) {
      b += loss[loss_off + p];
      c += valid[valid_off + p];
    }
    ct_push1(st, &cnt, b);
  }
  acc_t s = ct_pop1(st, cnt);
#if !CT_CHUNKED
  ls[lid] = s;
  lc[lid] = c;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long h = L / 2; h > 0; h >>= 1) {
    if (lid < h) {
      ls[lid] += ls[lid + h];
      lc[lid] += lc[lid + h];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  s = ls[0];
  c = lc[0];
#else
  (void)ls;
  (void)lc;
#endif
  if (lid == 0) {
    acc_t v = mean ? s / c : s;
    CT_STOREF(CT_IN, out, out_off, v);
    if (mean) nv[nv_off] = c;
  }
}
