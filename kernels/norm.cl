/* Normalizations (src/nn/norm.c). Build options: CT_IN, the dtype of x and the output; CT_PD,
 * the dtype of the parameters (weight, bias, running stats): x's, or f32 for f16/bf16 x.
 * f16/bf16/f32 compute in float, f64 in double (acc_t). Sums add blocks of 16 terms and merge
 * the block sums pairwise (a binary cascade, as kernels/reduce.cl), so long rows keep their
 * precision; mean and variance take two passes (the variance around the mean). Contiguous rows
 * are read 16 elements at a time: a block of 16 terms is then one vector, summed across its
 * lanes (ct_hsum16) before the cascade.
 *
 *  norm_rows   layer_norm / rms_norm: a work-item per row (the last dims, n elements); rows
 *              are numbered row-major over the outer dims (geometry kshape/kstr), the row's
 *              elements over the inner dims (ishape/istr), unless inner_flat says the row is
 *              contiguous. The output is contiguous.
 *  bn_part     batch_norm's partial statistics: a work-item per (block of elements, channel)
 *              (a channel's N S elements cut into blocks of blk): the block's mean and M2 (the
 *              sum of squared deviations from that mean) in the forward, sum(g) and
 *              sum(g (x - mean)) in the backward
 *  bn_stats    batch_norm: a work-item per channel: the batch statistics (training: bn_part's
 *              blocks merged in order, Chan's formula) or the running ones (eval), the
 *              running-stat update, and per-channel scale and shift
 *              (y = x * scale + shift, scale = weight * invstd, shift = bias - mean * scale,
 *              PyTorch's CPU formula) into ss[c] and ss[C + c], mean and invstd into ss[2 C + c]
 *              and ss[3 C + c] (for the backward)
 *  bn_apply    a work-item per chunk of a row (n, c) of x ([N, C, S...])
 * Backward (src/autograd/grad_nn.c through norm.c's ct__norm_backward / ct__bn_backward):
 *  norm_rows_bwd  a work-item per row: the row's mean and rstd again (the sums of norm_rows, so
 *                 the same values) into stats, and dx
 *  norm_cols_bwd  a work-item per normalized element j: dweight[j], dbias[j] over the rows
 *  bn_bwd_stats   a work-item per channel: sum(g) and sum(g xhat) over N and S from bn_part's
 *                 blocks
 *  bn_bwd_apply   a work-item per chunk of a row (n, c): dx */

//#include "acc_types.cl"
#if CT_IN == CT_DT_F64
#define LOADP(p, i) ((p)[i])
#define STOREP(p, i, v) ((p)[i] = (v))
#else
#define LOADP(p, i) CT_LOADF(CT_PD, p, i)
#define STOREP(p, i, v) CT_STOREF(CT_PD, p, i, v)
#endif
typedef CT_T(CT_PD) pd_t;

/* v rounded to the I/O dtype and back (PyTorch's rms_norm rounds there before the weight). */
inline acc_t ct_round_io(acc_t v) {
#if CT_IN == CT_DT_F16
  ushort t;
  vstore_half_rte(v, 0, (__private half *)&t);
  return vload_half(0, (__private const half *)&t);
#elif CT_IN == CT_DT_BF16
  return ct_bf16_to_f32(ct_f32_to_bf16(v));
#else
  return v;
#endif
}

#define CT_LEVELS 40
//#include "cascade.cl"

inline acc_t ct_sq(acc_t v) { return v * v; }

/* res = the sum of term over i in [0, n): blocks of 16 terms, the block sums merged by the
 * cascade above. term reads i (declared here). */
#define CT_CASCADE_SUM(res, n, i, term)                                  \
  do {                                                                   \
    acc_t st_[CT_LEVELS];                                                \
    ulong cnt_ = 0;                                                      \
    for (long i = 0; i < (n);) {                                         \
      acc_t s_ = 0;                                                      \
      for (int t_ = 0; t_ < 16 && i < (n); t_++, i++) s_ += (term);      \
      ct_push1(st_, &cnt_, s_);                                           \
    }                                                                    \
    (res) = ct_pop1(st_, cnt_);                                           \
  } while (0)

#define ELEM(j) (inner_flat ? (j) : ct_offset((j), indim, ishape, istr))
/* Row r's offset: r times the row stride when the outer dims collapse to one (the host passes
 * kndim 0 then), which spares the 64-bit divisions of ct_offset() per row. */
#define ROW(r) (kndim == 0 ? (r) * rstride : ct_offset((r), kndim, kshape, kstr))

/* Rows whose elements are contiguous (inner_flat) are walked 16 elements at a time in vectors
 * of acc_t: a work-item per row left PoCL running one scalar element per instruction (its
 * work-item loop does not vectorize around the row loop), 730-800 us per pass over [2048, 64].
 * A sum keeps its blocks of 16 terms (CT_CASCADE_SUMV below): each block is one vector, summed
 * across its lanes in a fixed tree, then pushed onto the cascade as before; the shorter last
 * block is summed one term at a time. f16/bf16 go through the same vectors lane by lane. */
#if CT_IN == CT_DT_F64
typedef double16 acc16_t;
#else
typedef float16 acc16_t;
#endif
#if CT_IN == CT_DT_F32 || CT_IN == CT_DT_F64
#define LOADV(p, i) vload16(0, (p) + (i))
#define STOREV(p, i, v) vstore16((v), 0, (p) + (i))
#define ROUNDV(v) (v)
#else
inline acc16_t ct_loadv(__global const io_t *p) {
  acc_t t[16];
  for (int k = 0; k < 16; k++) t[k] = LOADA(p, k);
  return vload16(0, t);
}
inline void ct_storev(__global io_t *p, acc16_t v) {
  acc_t t[16];
  vstore16(v, 0, t);
  for (int k = 0; k < 16; k++) STOREA(p, k, t[k]);
}
inline acc16_t ct_roundv(acc16_t v) {
  acc_t t[16];
  vstore16(v, 0, t);
  for (int k = 0; k < 16; k++) t[k] = ct_round_io(t[k]);
  return vload16(0, t);
}
#define LOADV(p, i) ct_loadv((p) + (i))
#define STOREV(p, i, v) ct_storev((p) + (i), (v))
#define ROUNDV(v) ct_roundv(v)
#endif
/* The parameters (pd_t: x's dtype, or f32 for f16/bf16 x). */
#if CT_PD == CT_DT_F32 || CT_PD == CT_DT_F64
#define LOADPV(p, i) vload16(0, (p) + (i))
#else
inline acc16_t ct_loadpv(__global const pd_t *p) {
  acc_t t[16];
  for (int k = 0; k < 16; k++) t[k] = LOADP(p, k);
  return vload16(0, t);
}
#define LOADPV(p, i) ct_loadpv((p) + (i))
#endif

inline acc_t ct_hsum16(acc16_t v) {
  acc16_t h = v;
  h.lo = h.lo + h.hi;
  h.s0123 = h.s0123 + h.s4567;
  h.s01 = h.s01 + h.s23;
  return h.s0 + h.s1;
}

/* CT_CASCADE_SUM over a contiguous row: termv is the vector of the 16 terms from i on. */
#define CT_CASCADE_SUMV(res, n, i, termv, term)                        \
  do {                                                                 \
    acc_t st_[CT_LEVELS];                                              \
    ulong cnt_ = 0;                                                    \
    long i = 0;                                                        \
    for (; i + 16 <= (n); i += 16) ct_push1(st_, &cnt_, ct_hsum16(termv)); \
    if (i < (n)) {                                                     \
      acc_t s_ = 0;                                                    \
      for (; i < (n); i++) s_ += (term);                               \
      ct_push1(st_, &cnt_, s_);                                        \
    }                                                                  \
    (res) = ct_pop1(st_, cnt_);                                        \
  } while (0)

/* A row's mean and rstd = 1 / sqrt(variance + eps): mode 0, layer_norm (mean, biased variance);
 * mode 1, rms_norm (mean 0, mean of squares). The one computation of both, so the backward
 * recomputes exactly the forward's values. */
inline void ct_row_stats(__global const io_t *x, long xb, int indim, long8 ishape, long8 istr, int inner_flat,
                         long n, int mode, acc_t eps, acc_t *mean_out, acc_t *rstd_out) {
  acc_t mean = 0, m2;
  if (inner_flat) {
    if (mode == 0) {
      CT_CASCADE_SUMV(mean, n, j, LOADV(x, xb + j), LOADA(x, xb + j));
      mean /= (acc_t)n;
    }
    acc16_t mv = (acc16_t)mean;
    CT_CASCADE_SUMV(m2, n, j, (LOADV(x, xb + j) - mv) * (LOADV(x, xb + j) - mv), ct_sq(LOADA(x, xb + j) - mean));
    *mean_out = mean;
    *rstd_out = (acc_t)1 / sqrt(m2 / (acc_t)n + eps);
    return;
  }
  if (mode == 0) {
    CT_CASCADE_SUM(mean, n, j, LOADA(x, xb + ELEM(j)));
    mean /= (acc_t)n;
  }
  CT_CASCADE_SUM(m2, n, j, ct_sq(LOADA(x, xb + ELEM(j)) - mean));
  *mean_out = mean;
  *rstd_out = (acc_t)1 / sqrt(m2 / (acc_t)n + eps);
}

/* The arguments the row kernels begin with (karg_rows_begin in src/nn/norm.c): x as nrows rows of
 * n elements, the rows over its first kndim dims (or rstride apart), a row's elements over the
 * last indim dims (or contiguous: inner_flat). */
#define CT_ROWS_ARGS                                                                                      \
  __global const io_t *x, long x_off, int kndim, long8 kshape, long8 kstr, long rstride, int indim,        \
      long8 ishape, long8 istr, int inner_flat, long nrows, long n

/* The start of a work-item of norm_rows and its backward: its row (none past nrows), xb the row's
 * first element in x, and the row's mean and rstd (ct_row_stats). */
#define CT_ROW_BEGIN                                                             \
  long row = get_global_id(0);                                                   \
  if (row >= nrows) return;                                                      \
  long xb = x_off + ROW(row);                                                    \
  acc_t mean, rstd;                                                              \
  ct_row_stats(x, xb, indim, ishape, istr, inner_flat, n, mode, eps, &mean, &rstd)

/* y = xhat v's weight and bias (one element, or a vector of 16 with RND and LDP to match):
 * rms_norm rounds xhat and the weight to the I/O dtype first (PyTorch's rms_norm). */
#define CT_NORM_AFFINE(v, RND, LDP, j)                             \
  do {                                                             \
    if (mode == 1) {                                               \
      v = RND(v);                                                  \
      if (has_w) v = v * RND(LDP(w, w_off + (j)));                 \
    } else {                                                       \
      if (has_w) v *= LDP(w, w_off + (j));                         \
      if (has_b) v += LDP(b, b_off + (j));                         \
    }                                                              \
  } while (0)

/* mode 0: layer_norm (mean, biased variance), mode 1: rms_norm (mean of squares). */
__kernel void norm_rows(CT_ROWS_ARGS, __global io_t *out, long out_off, __global const pd_t *w, long w_off,
                        int has_w, __global const pd_t *b, long b_off, int has_b, int mode, acc_t eps) {
  CT_ROW_BEGIN;
  long ob = out_off + row * n;
  long j = 0;
  if (inner_flat) {
    for (; j + 16 <= n; j += 16) {
      acc16_t v = (LOADV(x, xb + j) - (acc16_t)mean) * (acc16_t)rstd;
      CT_NORM_AFFINE(v, ROUNDV, LOADPV, j);
      STOREV(out, ob + j, v);
    }
  }
  for (; j < n; j++) {
    acc_t v = (LOADA(x, xb + ELEM(j)) - mean) * rstd;
    CT_NORM_AFFINE(v, ct_round_io, LOADP, j);
    STOREA(out, ob + j, v);
  }
}

/* x is [N, C, S...]: element (n, c, s) at x_off + n * sn + c * sc + ct_offset(s, spatial);
 * sflat when the spatial dims are contiguous (offset s: BN_FLAT), the common case, which spares
 * the divisions of ct_offset (BN_STRIDED). g (the backward's) is contiguous [N, C, S]. */
#define BN_FLAT(s) (s)
#define BN_STRIDED(s) ct_offset((s), sndim, sshape, sstr)

/* The terms bn_part sums: x, (x - mean)^2 (forward); g, g (x - mean) (backward). */
#define BN_X 0
#define BN_SQ 1
#define BN_G 2
#define BN_GX 3
inline acc_t bn_term(int what, __global const io_t *x, long xo, __global const io_t *g, long go, acc_t mean) {
  switch (what) {
    case BN_X: return LOADA(x, xo);
    case BN_SQ: return ct_sq(LOADA(x, xo) - mean);
    case BN_G: return LOADA(g, go);
    default: return LOADA(g, go) * (LOADA(x, xo) - mean);
  }
}

/* Pushes the sums of term `what` over a row's elements s in [s, s1) (x offsets xb + OFF(s), g
 * offsets gb + s) onto the cascade st: blocks of 16 in 4 independent lanes (so the adds
 * overlap), then the rest. */
#define BN_ROW_SUM(OFF)                                                                   \
  do {                                                                                    \
    for (; s + 16 <= s1; s += 16) {                                                       \
      acc_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                               \
      for (int k = 0; k < 16; k += 4) {                                                   \
        a0 += bn_term(what, x, xb + OFF(s + k), g, gb + s + k, mean);                     \
        a1 += bn_term(what, x, xb + OFF(s + k + 1), g, gb + s + k + 1, mean);             \
        a2 += bn_term(what, x, xb + OFF(s + k + 2), g, gb + s + k + 2, mean);             \
        a3 += bn_term(what, x, xb + OFF(s + k + 3), g, gb + s + k + 3, mean);             \
      }                                                                                   \
      ct_push1(st, &cnt, (a0 + a1) + (a2 + a3));                                          \
    }                                                                                     \
    if (s < s1) {                                                                         \
      acc_t a = 0;                                                                        \
      for (; s < s1; s++) a += bn_term(what, x, xb + OFF(s), g, gb + s, mean);            \
      ct_push1(st, &cnt, a);                                                              \
    }                                                                                     \
  } while (0)

/* The sum of term `what` over the elements i in [i0, i1) of channel c (i = n S + s), walked
 * row by row (one division for the whole range), the rows' block sums merged by the
 * cascade. */
inline acc_t bn_sum(int what, __global const io_t *x, long x_off, long sn, long sc, int sndim, long8 sshape,
                    long8 sstr, int sflat, long S, long C, long c, __global const io_t *g, long g_off,
                    acc_t mean, long i0, long i1) {
  acc_t st[CT_LEVELS];
  ulong cnt = 0;
  long n = i0 / S, s0 = i0 - n * S;
  for (long i = i0; i < i1; n++, s0 = 0) {
    long s1 = min(S, s0 + (i1 - i)), xb = x_off + n * sn + c * sc, gb = g_off + (n * C + c) * S, s = s0;
    if (sflat) BN_ROW_SUM(BN_FLAT);
    else BN_ROW_SUM(BN_STRIDED);
    i += s1 - s0;
  }
  return ct_pop1(st, cnt);
}

/* Work-item (block b, channel c), numbered b + nblk c: elements [b blk, min((b + 1) blk, N S))
 * of channel c. Forward (backward 0): part[2 id] = the block's mean, part[2 id + 1] = its M2
 * (two passes over the block: the deviations from the block's own mean, so large values with
 * a small spread keep their precision). Backward: sum(g), sum(g (x - mean)) with mean from ss
 * (bn_stats' output). */
__kernel void bn_part(__global const io_t *x, long x_off, long N, long C, long sn, long sc, int sndim,
                      long8 sshape, long8 sstr, int sflat, long S, long blk, long nblk, int backward,
                      __global const io_t *g, long g_off, __global const acc_t *ss, long ss_off,
                      __global acc_t *part, long part_off) {
  long id = get_global_id(0);
  if (id >= nblk * C) return;
  long c = id / nblk, b = id - c * nblk, i0 = b * blk, i1 = min(N * S, i0 + blk);
  acc_t r0, r1;
  if (backward) {
    acc_t mean = ss[ss_off + 2 * C + c];
    r0 = bn_sum(BN_G, x, x_off, sn, sc, sndim, sshape, sstr, sflat, S, C, c, g, g_off, 0, i0, i1);
    r1 = bn_sum(BN_GX, x, x_off, sn, sc, sndim, sshape, sstr, sflat, S, C, c, g, g_off, mean, i0, i1);
  } else {
    r0 = bn_sum(BN_X, x, x_off, sn, sc, sndim, sshape, sstr, sflat, S, C, c, g, g_off, 0, i0, i1) /
         (acc_t)(i1 - i0);
    r1 = bn_sum(BN_SQ, x, x_off, sn, sc, sndim, sshape, sstr, sflat, S, C, c, g, g_off, r0, i0, i1);
  }
  part[part_off + 2 * id] = r0;
  part[part_off + 2 * id + 1] = r1;
}

/* Chan et al.'s merge of the statistics (count, mean, M2) of two sets, a the earlier one:
 * the mean moves by delta nb / n, M2 gains delta^2 na nb / n. */
inline void bn_merge(ulong *na, acc_t *ma, acc_t *qa, ulong nb, acc_t mb, acc_t qb) {
  ulong n = *na + nb;
  acc_t delta = mb - *ma, fb = (acc_t)nb / (acc_t)n;
  *ma += delta * fb;
  *qa += qb + delta * delta * ((acc_t)*na * fb);
  *na = n;
}

/* The training statistics of channel c from bn_part's nblk blocks: merged pairwise in a fixed
 * order (a binary counter over the blocks, as ct_push1: the error grows with log(nblk)). */
inline void bn_merge_blocks(__global const acc_t *part, long part_off, long c, long nblk, long blk, long cnt_all,
                            acc_t *mean, acc_t *m2) {
  ulong sn[CT_LEVELS];
  acc_t sm[CT_LEVELS], sq[CT_LEVELS];
  ulong cnt = 0;
  for (long b = 0; b < nblk; b++) {
    ulong nb = (ulong)min(blk, cnt_all - b * blk);
    acc_t mb = part[part_off + 2 * (c * nblk + b)], qb = part[part_off + 2 * (c * nblk + b) + 1];
    int l = 0;
    for (ulong k = cnt; k & 1ul; k >>= 1, l++) {
      bn_merge(&sn[l], &sm[l], &sq[l], nb, mb, qb);
      nb = sn[l];
      mb = sm[l];
      qb = sq[l];
    }
    sn[l] = nb;
    sm[l] = mb;
    sq[l] = qb;
    cnt++;
  }
  /* The occupied levels, the latest blocks (lowest level) first, each merged after the
   * earlier ones above it. */
  ulong rn = 0;
  acc_t rm = 0, rq = 0;
  for (int l = 0; cnt; cnt >>= 1, l++) {
    if (!(cnt & 1ul)) continue;
    if (rn == 0) {
      rn = sn[l];
      rm = sm[l];
      rq = sq[l];
    } else {
      bn_merge(&sn[l], &sm[l], &sq[l], rn, rm, rq);
      rn = sn[l];
      rm = sm[l];
      rq = sq[l];
    }
  }
  *mean = rm;
  *m2 = rq;
}

__kernel void bn_stats(long C, long nblk, long blk, long cnt_all, __global const acc_t *part, long part_off,
                       __global pd_t *rm, long rm_off, __global pd_t *rv, long rv_off, int has_running,
                       __global const pd_t *w, long w_off, int has_w, __global const pd_t *b, long b_off,
                       int has_b, int training, acc_t momentum, acc_t eps, __global acc_t *ss, long ss_off,
                       __global long *nbt, long nbt_off, int has_nbt) {
  long c = get_global_id(0);
  /* BatchNorm's num_batches_tracked += 1, here rather than in a kernel of its own. */
  if (has_nbt && c == 0) nbt[nbt_off] += 1;
  if (c >= C) return;
  acc_t mean, invstd;
  if (training) {
    acc_t m2;
    bn_merge_blocks(part, part_off, c, nblk, blk, cnt_all, &mean, &m2);
    invstd = (acc_t)1 / sqrt(m2 / (acc_t)cnt_all + eps);
    if (has_running) {
      acc_t unbiased = m2 / (acc_t)(cnt_all - 1);
      STOREP(rm, rm_off + c, ((acc_t)1 - momentum) * (acc_t)LOADP(rm, rm_off + c) + momentum * mean);
      STOREP(rv, rv_off + c, ((acc_t)1 - momentum) * (acc_t)LOADP(rv, rv_off + c) + momentum * unbiased);
    }
  } else {
    mean = LOADP(rm, rm_off + c);
    invstd = (acc_t)1 / sqrt((acc_t)LOADP(rv, rv_off + c) + eps);
  }
  acc_t scale = has_w ? (acc_t)LOADP(w, w_off + c) * invstd : invstd;
  acc_t shift = (has_b ? (acc_t)LOADP(b, b_off + c) : (acc_t)0) - mean * scale;
  ss[ss_off + c] = scale;
  ss[ss_off + C + c] = shift;
  ss[ss_off + 2 * C + c] = mean;
  ss[ss_off + 3 * C + c] = invstd;
}

/* The work-item of the row kernels bn_apply and bn_bwd_apply: elements [s0, s1) (a chunk of
 * at most `chunk`, nchunk per row) of row r = n C + c of [N, C, S]; x's row starts at xb, the
 * contiguous output's (and g's) at ob. Two divisions per work-item, none per element: a
 * work-item per element paid them (or a 3-D range's rounding to whole groups of 1024). */
#define BN_ROW_ITEM                                                                        \
  long id = get_global_id(0);                                                              \
  if (id >= N * C * nchunk) return;                                                        \
  long r = id / nchunk, n = r / C, c = r - n * C, s0 = (id - r * nchunk) * chunk,          \
       s1 = min(S, s0 + chunk), xb = x_off + n * sn + c * sc, ob = r * S

/* out[n, c, s] = x[n, c, s] * scale[c] + shift[c]. */
__kernel void bn_apply(__global const io_t *x, long x_off, long N, long C, long sn, long sc, int sndim,
                       long8 sshape, long8 sstr, int sflat, long S, long chunk, long nchunk,
                       __global const acc_t *ss, long ss_off, __global io_t *out, long out_off) {
  BN_ROW_ITEM;
  acc_t scale = ss[ss_off + c], shift = ss[ss_off + C + c];
  ob += out_off;
  if (sflat)
    for (long s = s0; s < s1; s++) STOREA(out, ob + s, LOADA(x, xb + s) * scale + shift);
  else
    for (long s = s0; s < s1; s++) STOREA(out, ob + s, LOADA(x, xb + BN_STRIDED(s)) * scale + shift);
}

/* g and dx are contiguous [nrows, n] in x's dtype; stats gets (mean, rstd) per row (mean 0 for
 * rms_norm). With gy = g * w (w when has_w) and xhat = (x - mean) * rstd:
 *   layer_norm: dx = rstd (gy - mean(gy) - xhat mean(gy xhat))   (PyTorch's native_layer_norm
 *               backward)
 *   rms_norm:   dx = rstd (gy - xhat mean(gy xhat))
 * rms_norm's rounding of xhat to f16/bf16 in the forward is not differentiated (PyTorch's
 * composite backward computes in the input's precision likewise). */
#define GY(j) (LOADA(g, gb + (j)) * (has_w ? (acc_t)LOADP(w, w_off + (j)) : (acc_t)1))
#define XHAT(j) ((LOADA(x, xb + ELEM(j)) - mean) * rstd)
#define GYV(j) (has_w ? LOADV(g, gb + (j)) * LOADPV(w, w_off + (j)) : LOADV(g, gb + (j)))
#define XHATV(j) ((LOADV(x, xb + (j)) - (acc16_t)mean) * (acc16_t)rstd)
__kernel void norm_rows_bwd(CT_ROWS_ARGS, __global const io_t *g, long g_off, __global const pd_t *w, long w_off,
                            int has_w, int mode, acc_t eps, __global acc_t *stats, long stats_off,
                            int want_dx, __global io_t *dx, long dx_off) {
  CT_ROW_BEGIN;
  long gb = g_off + row * n;
  stats[stats_off + 2 * row] = mean;
  stats[stats_off + 2 * row + 1] = rstd;
  if (!want_dx) return;
  acc_t sg = 0, sgx;
  long j = 0;
  if (inner_flat) {
    if (mode == 0) CT_CASCADE_SUMV(sg, n, i, GYV(i), GY(i));
    CT_CASCADE_SUMV(sgx, n, i, GYV(i) * XHATV(i), GY(i) * XHAT(i));
    sg /= (acc_t)n;
    sgx /= (acc_t)n;
    for (; j + 16 <= n; j += 16)
      STOREV(dx, dx_off + row * n + j, (acc16_t)rstd * (GYV(j) - (acc16_t)sg - XHATV(j) * (acc16_t)sgx));
  } else {
    if (mode == 0) CT_CASCADE_SUM(sg, n, i, GY(i));
    CT_CASCADE_SUM(sgx, n, i, GY(i) * XHAT(i));
    sg /= (acc_t)n;
    sgx /= (acc_t)n;
  }
  for (; j < n; j++) STOREA(dx, dx_off + row * n + j, rstd * (GY(j) - sg - XHAT(j) * sgx));
}

/* Partial sums over blocks of rows: work-item rb * ceil(n / 16) + j / 16 sums, for the 16
 * columns from j on, rows [rb * rblk, (rb + 1) * rblk) of
 * column j into pw[rb * n + j] (g * xhat, for dweight) and pb[rb * n + j] (g, for dbias), from
 * the stats norm_rows_bwd wrote; the host sums the blocks (ct_sum). A work-item per column alone
 * left most of a CPU idle for the few hundred columns of a transformer, walking 8192 rows each. */
__kernel void norm_cols_bwd(CT_ROWS_ARGS, __global const io_t *g, long g_off, __global const acc_t *stats,
                            long stats_off, long rblk, long nblk, int want_w, __global acc_t *pw,
                            long pw_off, int want_b, __global acc_t *pb, long pb_off) {
  /* columns [j0, j0 + 16): one vector of them when whole and contiguous (each lane adds its
   * rows in the same order as the one-column loop below) */
  long ncb = (n + 15) / 16, id = get_global_id(0), rb = id / ncb, j0 = (id - rb * ncb) * 16;
  if (rb >= nblk) return;
  long r0 = rb * rblk, r1 = min(nrows, (rb + 1) * rblk);
  if (inner_flat && j0 + 16 <= n) {
    acc16_t sw = 0, sb = 0;
    for (long r = r0; r < r1; r++) {
      acc16_t gv = LOADV(g, g_off + r * n + j0);
      sb += gv;
      if (want_w)
        sw += gv * ((LOADV(x, x_off + ROW(r) + j0) - (acc16_t)stats[stats_off + 2 * r]) *
                    (acc16_t)stats[stats_off + 2 * r + 1]);
    }
    if (want_w) vstore16(sw, 0, pw + pw_off + rb * n + j0);
    if (want_b) vstore16(sb, 0, pb + pb_off + rb * n + j0);
    return;
  }
  for (long j = j0; j < min(n, j0 + 16); j++) {
    long e = ELEM(j);
    acc_t sw = 0, sb = 0;
    for (long r = r0; r < r1; r++) {
      acc_t gv = LOADA(g, g_off + r * n + j);
      sb += gv;
      if (want_w)
        sw += gv * ((LOADA(x, x_off + ROW(r) + e) - stats[stats_off + 2 * r]) * stats[stats_off + 2 * r + 1]);
    }
    if (want_w) pw[pw_off + rb * n + j] = sw;
    if (want_b) pb[pb_off + rb * n + j] = sb;
  }
}

/* Batch norm backward. ss holds 4 C values from bn_stats: scale, shift, mean, invstd. red gets
 * sum(g) at c and sum(g xhat) at C + c, from bn_part's blocks (summed by the cascade, in
 * order). */
__kernel void bn_bwd_stats(long C, long nblk, __global const acc_t *part, long part_off, __global const acc_t *ss,
                           long ss_off, __global acc_t *red, long red_off) {
  long c = get_global_id(0);
  if (c >= C) return;
  acc_t st0[CT_LEVELS], st1[CT_LEVELS];
  ulong cnt0 = 0, cnt1 = 0;
  for (long b = 0; b < nblk; b++) {
    ct_push1(st0, &cnt0, part[part_off + 2 * (c * nblk + b)]);
    ct_push1(st1, &cnt1, part[part_off + 2 * (c * nblk + b) + 1]);
  }
  red[red_off + c] = ct_pop1(st0, cnt0);
  red[red_off + C + c] = ct_pop1(st1, cnt1) * ss[ss_off + 3 * C + c];
}

/* dx = scale (g - sum(g) / M - xhat sum(g xhat) / M) in training (the batch statistics depend
 * on x), dx = scale g in eval (running statistics are constants); M = N S. */
__kernel void bn_bwd_apply(__global const io_t *x, long x_off, long N, long C, long sn, long sc, int sndim,
                           long8 sshape, long8 sstr, int sflat, long S, long chunk, long nchunk,
                           __global const io_t *g, long g_off, __global const acc_t *ss, long ss_off,
                           __global const acc_t *red, long red_off, int training, __global io_t *dx,
                           long dx_off) {
  BN_ROW_ITEM;
  acc_t scale = ss[ss_off + c], m = (acc_t)(N * S);
  __global const io_t *gr = g + g_off + ob;
  __global io_t *dr = dx + dx_off + ob;
  if (!training) {
    for (long s = s0; s < s1; s++) STOREA(dr, s, scale * LOADA(gr, s));
    return;
  }
  acc_t mean = ss[ss_off + 2 * C + c], invstd = ss[ss_off + 3 * C + c], sg = red[red_off + c] / m,
        sgx = red[red_off + C + c] / m;
  if (sflat)
    for (long s = s0; s < s1; s++)
      STOREA(dr, s, scale * (LOADA(gr, s) - sg - (LOADA(x, xb + s) - mean) * invstd * sgx));
  else
    for (long s = s0; s < s1; s++)
      STOREA(dr, s, scale * (LOADA(gr, s) - sg - (LOADA(x, xb + BN_STRIDED(s)) - mean) * invstd * sgx));
}
