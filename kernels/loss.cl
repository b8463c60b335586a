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
 * and 0 for a target equal to ignore_index, into lv[lv_off + p]; lv[lv_off + npos + p] gets 1
 * or 0 (the mean divides by the
 * count of non-ignored targets). A target outside [0, C) that is not ignore_index is an error:
 * the smallest such position (positions from 2^31 - 2 on count as 2^31 - 2: a 32-bit flag)
 * goes into bad[bad_off] (atomic_min; the host initialises it to INT_MAX and
 * reads it back after the kernel), and the position's loss is 0. */

typedef CT_T(CT_IN) in_t;
#if CT_IN == CT_DT_F64
typedef double acc_t;
#define LOAD1(p, i) ((p)[i])
#else
typedef float acc_t;
#define LOAD1(p, i) CT_LOADF(CT_IN, p, i)
#endif

__kernel void loss_nll(__global const in_t *in, long in_off, __global const long *target,
                       long t_off, __global acc_t *lv, long lv_off, __global int *bad, long bad_off, long npos, long ncls, long cstride, int pndim,
                       long8 pshape, long8 xstride, long8 tstride, long ignore_index, int ce,
                       acc_t eps) {
  long p = get_global_id(0);
  if (p >= npos) return;
  __global acc_t *loss = lv + lv_off, *valid = loss + npos;
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
    acc_t m = (acc_t)(-INFINITY);
    for (long c = 0; c < ncls; c++) {
      acc_t x = LOAD1(in, base + c * cstride);
      m = (x > m || isnan(x)) && !isnan(m) ? x : m;
    }
    /* An infinite maximum is not subtracted (inf - inf would be NaN), as logsumexp. */
    acc_t ms = isinf(m) ? (acc_t)0 : m, s = 0;
    for (long c = 0; c < ncls; c++) s += exp(LOAD1(in, base + c * cstride) - ms);
    lse = ms + log(s);
  }
  /* -sum_c logp[c], as a sum of the log-probabilities themselves (C * lse - sum_c x[c] would
   * cancel when lse is large). */
  if (eps != (acc_t)0)
    for (long c = 0; c < ncls; c++) sum += LOAD1(in, base + c * cstride) - lse;
  acc_t lpt = LOAD1(in, base + t * cstride) - lse;
  loss[p] = eps != (acc_t)0 ? ((acc_t)1 - eps) * -lpt + eps / (acc_t)ncls * -sum : -lpt;
  valid[p] = 1;
}
