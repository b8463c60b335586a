/* The masked softmax of scaled dot-product attention, in place on the scores q k^T
 * ([rows, S] contiguous, rows = batch x L, row r being query i = r % L).
 *
 * Build option: CT_IN, the scores' dtype (f32, or f64 under CT_HAS_FP64). The mask is read in
 * place through its broadcast geometry: row r's mask starts at m_off + ct_offset(r, mndim,
 * mshape, mstride) and key j lies j * mstep further; m_kind 0 is no mask, 1 bool (nonzero
 * attends), 2 an additive float mask of dtype m_dt (f16, bf16, f32, f64). causal masks keys
 * j > i (top-left aligned).
 *
 * Each work-item owns a row: s_j = score_j * scale (+ mask_j), with masked keys -inf; then
 * exp(s_j - m) / sum, m the row's maximum. A row whose keys are all masked (m = -inf) becomes
 * zeros, PyTorch's rule, not 0 / 0. */

typedef CT_T(CT_IN) acc_t;

inline acc_t ct_mask_load(__global const void *mask, long i, int m_dt) {
  if (m_dt == CT_DT_F16) return (acc_t)vload_half((size_t)i, (__global const half *)mask);
  if (m_dt == CT_DT_BF16) return (acc_t)ct_bf16_to_f32(((__global const ushort *)mask)[i]);
#if defined(CT_HAS_FP64) && CT_HAS_FP64
  if (m_dt == CT_DT_F64) return (acc_t)((__global const double *)mask)[i];
#endif
  return (acc_t)((__global const float *)mask)[i];
}

/* Score j of the row, scaled and masked. */
inline acc_t ct_score(__global const acc_t *row, long j, long i, acc_t scale, int causal,
                      __global const void *mask, long mb, long mstep, int m_kind, int m_dt) {
  if (causal && j > i) return (acc_t)(-INFINITY);
  acc_t s = row[j] * scale;
  if (m_kind == 1 && ((__global const uchar *)mask)[mb + j * mstep] == 0) return (acc_t)(-INFINITY);
  if (m_kind == 2) s += ct_mask_load(mask, mb + j * mstep, m_dt);
  return s;
}

__kernel void sdpa_softmax(__global acc_t *scores, long s_off, long rows, long L, long S,
                           acc_t scale, int causal, __global const void *mask, long m_off,
                           int m_kind, int m_dt, int mndim, long8 mshape, long8 mstride,
                           long mstep) {
  long r = get_global_id(0);
  if (r >= rows) return;
  long i = r % L;
  __global acc_t *row = scores + s_off + r * S;
  long mb = m_kind ? m_off + ct_offset(r, mndim, mshape, mstride) : 0;
  acc_t m = (acc_t)(-INFINITY);
  for (long j = 0; j < S; j++) {
    acc_t s = ct_score(row, j, i, scale, causal, mask, mb, mstep, m_kind, m_dt);
    m = (s > m || isnan(s)) && !isnan(m) ? s : m;
  }
  if (m == (acc_t)(-INFINITY)) {
    for (long j = 0; j < S; j++) row[j] = (acc_t)0;
    return;
  }
  /* exp(s_j - m) replaces score j as soon as it is read. */
  acc_t sum = 0;
  for (long j = 0; j < S; j++) {
    acc_t e = exp(ct_score(row, j, i, scale, causal, mask, mb, mstep, m_kind, m_dt) - m);
    row[j] = e;
    sum += e;
  }
  for (long j = 0; j < S; j++) row[j] = row[j] / sum;
}
