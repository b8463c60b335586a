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
 * zeros, PyTorch's rule, not 0 / 0. The row is contiguous, so the passes without a mask to read
 * load and store 8 elements at a time. */

typedef CT_T(CT_IN) acc_t;
#if CT_IN == CT_DT_F64
typedef double8 acc8_t;
#else
typedef float8 acc8_t;
#endif

inline acc_t ct_mask_load(__global const void *mask, long i, int m_dt) {
  if (m_dt == CT_DT_F16) return (acc_t)vload_half((size_t)i, (__global const half *)mask);
  if (m_dt == CT_DT_BF16) return (acc_t)ct_bf16_to_f32(((__global const ushort *)mask)[i]);
#if defined(CT_HAS_FP64) && CT_HAS_FP64
  if (m_dt == CT_DT_F64) return (acc_t)((__global const double *)mask)[i];
#endif
  return (acc_t)((__global const float *)mask)[i];
}

#define MAXN(a, b) (((a) > (b) || isnan(a)) ? (a) : (b))
#define MAXN8(a, b) select((b), (a), ((a) > (b)) | isnan(a))

/* Lane reductions by swizzles, not through a private array (PoCL gives those memory of their
 * own per work-item, a store and reloads per row). ct_hsum8 adds in the order
 * ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)). */
inline acc_t ct_hmax8(acc8_t v) {
  acc_t m = v.s0;
  m = MAXN(m, v.s1);
  m = MAXN(m, v.s2);
  m = MAXN(m, v.s3);
  m = MAXN(m, v.s4);
  m = MAXN(m, v.s5);
  m = MAXN(m, v.s6);
  return MAXN(m, v.s7);
}

inline acc_t ct_hsum8(acc8_t v) { return ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7)); }

/* Three passes over the row, the last two plain vector loops:
 *  1. s_j = score_j * scale, masked keys -inf, + the additive mask; written back; the maximum;
 *  2. exp(s_j - m), written back, and their sum;
 *  3. division by the sum.
 * With causal, keys j > i are only written (zeros): they take no part. */
__kernel void sdpa_softmax(__global acc_t *scores, long s_off, long rows, long L, long S,
                           acc_t scale, int causal, __global const void *mask, long m_off,
                           int m_kind, int m_dt, int mndim, long8 mshape, long8 mstride,
                           long mstep) {
  long r = get_global_id(0);
  if (r >= rows) return;
  long i = r % L;
  long n = causal ? min(S, i + 1) : S;
  __global acc_t *row = scores + s_off + r * S;
  acc_t m = (acc_t)(-INFINITY);
  if (m_kind == 0 && S % 8 == 0) {
    /* Without a mask to read, every row runs the same S / 8 vector steps, the causal keys j >= n
     * taken out by select() (-inf, which the exp below turns into 0), and the passes below run
     * over the whole row: rows of different lengths made the work-item loops diverge, 1.5x
     * slower per key computed than full rows. */
    long nv = S / 8;
    acc8_t sc8 = (acc8_t)scale, m8 = (acc8_t)(-INFINITY), lane = (acc8_t)(0, 1, 2, 3, 4, 5, 6, 7);
    acc_t na = (acc_t)n;
    for (long k = 0; k < nv; k++) {
      acc8_t s = vload8(k, row) * sc8;
      s = select((acc8_t)(-INFINITY), s, lane + (acc_t)(8 * k) < na);
      vstore8(s, k, row);
      m8 = MAXN8(s, m8);
    }
    m = ct_hmax8(m8);
    n = S;
  } else {
    for (long j = n; j < S; j++) row[j] = (acc_t)0;
    long mb = m_kind ? m_off + ct_offset(r, mndim, mshape, mstride) : 0;
    if (m_kind == 1) {
      __global const uchar *mk = (__global const uchar *)mask + mb;
      for (long j = 0; j < n; j++) {
        acc_t s = mk[j * mstep] ? row[j] * scale : (acc_t)(-INFINITY);
        row[j] = s;
        m = MAXN(s, m);
      }
    } else if (m_kind == 2) {
      for (long j = 0; j < n; j++) {
        acc_t s = row[j] * scale + ct_mask_load(mask, mb + j * mstep, m_dt);
        row[j] = s;
        m = MAXN(s, m);
      }
    } else {
      long nv = n / 8;
      acc8_t m8 = (acc8_t)(-INFINITY), sc8 = (acc8_t)scale;
      for (long k = 0; k < nv; k++) {
        acc8_t s = vload8(k, row) * sc8;
        vstore8(s, k, row);
        m8 = MAXN8(s, m8);
      }
      m = ct_hmax8(m8);
      for (long j = nv * 8; j < n; j++) {
        acc_t s = row[j] * scale;
        row[j] = s;
        m = MAXN(s, m);
      }
    }
  }
  if (m == (acc_t)(-INFINITY)) {
    for (long j = 0; j < n; j++) row[j] = (acc_t)0;
    return;
  }
  long nv = n / 8;
  acc8_t m8 = (acc8_t)m, sum8 = (acc8_t)0;
  for (long k = 0; k < nv; k++) {
    acc8_t e = CT_ACC_EXP8(vload8(k, row) - m8);
    vstore8(e, k, row);
    sum8 += e;
  }
  acc_t sum = ct_hsum8(sum8);
  for (long j = nv * 8; j < n; j++) {
    acc_t e = CT_ACC_EXP(row[j] - m);
    row[j] = e;
    sum += e;
  }
  acc8_t s8 = (acc8_t)sum;
  for (long k = 0; k < nv; k++) vstore8(vload8(k, row) / s8, k, row);
  for (long j = nv * 8; j < n; j++) row[j] = row[j] / sum;
}

/* The backward of the softmax above, in place on dp ([rows, S] contiguous, the gradient of the
 * probabilities p): dp_j = p_j (dp_j - sum_k p_k dp_k), the gradient of the masked, scaled scores.
 * Masked keys and fully masked rows have p = 0, so their gradient is 0 (PyTorch's rule). */
__kernel void sdpa_softmax_bwd(__global const acc_t *p, long p_off, __global acc_t *dp, long dp_off,
                               long rows, long S) {
  long r = get_global_id(0);
  if (r >= rows) return;
  __global const acc_t *pr = p + p_off + r * S;
  __global acc_t *dr = dp + dp_off + r * S;
  long nv = S / 8;
  acc8_t s8 = (acc8_t)0;
  for (long k = 0; k < nv; k++) s8 += vload8(k, pr) * vload8(k, dr);
  acc_t dot = ct_hsum8(s8);
  for (long j = nv * 8; j < S; j++) dot += pr[j] * dr[j];
  acc8_t d8 = (acc8_t)dot;
  for (long k = 0; k < nv; k++) vstore8(vload8(k, pr) * (vload8(k, dr) - d8), k, dr);
  for (long j = nv * 8; j < S; j++) dr[j] = pr[j] * (dr[j] - dot);
}
