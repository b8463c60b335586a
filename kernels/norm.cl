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
 *  bn_stats    batch_norm: a work-item per channel: the batch statistics (training) or the
 *              running ones (eval), the running-stat update, and per-channel scale and shift
 *              (y = x * scale + shift, scale = weight * invstd, shift = bias - mean * scale,
 *              PyTorch's CPU formula) into ss[c] and ss[C + c], mean and invstd into ss[2 C + c]
 *              and ss[3 C + c] (for the backward)
 *  bn_apply    a work-item per element of x (geometry shape/str, [N, C, S...])
 * Backward (src/autograd/grad_nn.c through norm.c's ct__norm_backward / ct__bn_backward):
 *  norm_rows_bwd  a work-item per row: the row's mean and rstd again (the sums of norm_rows, so
 *                 the same values) into stats, and dx
 *  norm_cols_bwd  a work-item per normalized element j: dweight[j], dbias[j] over the rows
 *  bn_bwd_stats   a work-item per channel: sum(g) and sum(g xhat) over N and S
 *  bn_bwd_apply   a work-item per element: dx */

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
__kernel void norm_rows(__global const io_t *x, long x_off, int kndim, long8 kshape, long8 kstr, long rstride,
                        int indim, long8 ishape, long8 istr, int inner_flat, long nrows, long n,
                        __global io_t *out, long out_off, __global const pd_t *w, long w_off, int has_w,
                        __global const pd_t *b, long b_off, int has_b, int mode, acc_t eps) {
  long row = get_global_id(0);
  if (row >= nrows) return;
  long xb = x_off + ROW(row);
  long ob = out_off + row * n;
  acc_t mean, rstd;
  ct_row_stats(x, xb, indim, ishape, istr, inner_flat, n, mode, eps, &mean, &rstd);
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
 * sflat when the spatial dims are contiguous (offset s), the common case, which spares the
 * divisions of ct_offset. */
#define BN_ELEM(i) (x_off + ((i) / S) * sn + c * sc + \
                    (sflat ? (i) % S : ct_offset((i) % S, sndim, sshape, sstr)))
__kernel void bn_stats(__global const io_t *x, long x_off, long N, long C, long sn, long sc, int sndim,
                       long8 sshape, long8 sstr, int sflat, long S, __global pd_t *rm, long rm_off,
                       __global pd_t *rv, long rv_off, int has_running, __global const pd_t *w,
                       long w_off, int has_w, __global const pd_t *b, long b_off, int has_b,
                       int training, acc_t momentum, acc_t eps, __global acc_t *ss, long ss_off) {
  long c = get_global_id(0);
  if (c >= C) return;
  acc_t mean, invstd;
  if (training) {
    long cnt_all = N * S;
    acc_t m2;
    CT_CASCADE_SUM(mean, cnt_all, i, LOADA(x, BN_ELEM(i)));
    mean /= (acc_t)cnt_all;
    CT_CASCADE_SUM(m2, cnt_all, i, ct_sq(LOADA(x, BN_ELEM(i)) - mean));
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

/* out[n, c, s] = x[n, c, s] * scale[c] + shift[c]: ids (s, c, n), so the channel and the
 * batch index come without a division (a 1-D range paid two 64-bit divisions per element for
 * them: 2-5 ms for the digits CNN's [450, 32, 8, 8] on PoCL). The spatial offset is s when
 * those dims are contiguous (sflat), else ct_offset. */
__kernel void bn_apply(__global const io_t *x, long x_off, long N, long C, long sn, long sc, int sndim,
                       long8 sshape, long8 sstr, int sflat, long S, __global const acc_t *ss, long ss_off,
                       __global io_t *out, long out_off) {
  long s = get_global_id(0), c = get_global_id(1), n = get_global_id(2);
  if (s >= S || c >= C || n >= N) return; /* the NDRange is rounded up to whole work-groups */
  long xo = x_off + n * sn + c * sc + (sflat ? s : ct_offset(s, sndim, sshape, sstr));
  acc_t v = LOADA(x, xo);
  STOREA(out, out_off + (n * C + c) * S + s, v * ss[ss_off + c] + ss[ss_off + C + c]);
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
__kernel void norm_rows_bwd(__global const io_t *x, long x_off, int kndim, long8 kshape, long8 kstr,
                            long rstride, int indim, long8 ishape, long8 istr, int inner_flat, long nrows,
                            long n, __global const io_t *g, long g_off, __global const pd_t *w, long w_off,
                            int has_w, int mode, acc_t eps, __global acc_t *stats, long stats_off,
                            int want_dx, __global io_t *dx, long dx_off) {
  long row = get_global_id(0);
  if (row >= nrows) return;
  long xb = x_off + ROW(row);
  long gb = g_off + row * n;
  acc_t mean, rstd;
  ct_row_stats(x, xb, indim, ishape, istr, inner_flat, n, mode, eps, &mean, &rstd);
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
__kernel void norm_cols_bwd(__global const io_t *x, long x_off, int kndim, long8 kshape, long8 kstr,
                            long rstride, int indim, long8 ishape, long8 istr, int inner_flat, long nrows,
                            long n, __global const io_t *g, long g_off, __global const acc_t *stats,
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

/* Batch norm backward. ss holds 4 C values from bn_stats: scale, shift, mean, invstd. g is
 * contiguous [N, C, S]. red gets sum(g) at c and sum(g xhat) at C + c. */
__kernel void bn_bwd_stats(__global const io_t *x, long x_off, long N, long C, long sn, long sc, int sndim,
                           long8 sshape, long8 sstr, int sflat, long S, __global const io_t *g, long g_off,
                           __global const acc_t *ss, long ss_off, __global acc_t *red, long red_off) {
  long c = get_global_id(0);
  if (c >= C) return;
  long cnt_all = N * S;
  acc_t mean = ss[ss_off + 2 * C + c], invstd = ss[ss_off + 3 * C + c], sg, sgx;
#define BN_G(i) LOADA(g, g_off + (((i) / S) * C + c) * S + (i) % S)
  CT_CASCADE_SUM(sg, cnt_all, i, BN_G(i));
  CT_CASCADE_SUM(sgx, cnt_all, i, BN_G(i) * ((LOADA(x, BN_ELEM(i)) - mean) * invstd));
#undef BN_G
  red[red_off + c] = sg;
  red[red_off + C + c] = sgx;
}

/* dx = scale (g - sum(g) / M - xhat sum(g xhat) / M) in training (the batch statistics depend
 * on x), dx = scale g in eval (running statistics are constants); M = N S. */
__kernel void bn_bwd_apply(__global const io_t *x, long x_off, long N, long C, long sn, long sc, int sndim,
                           long8 sshape, long8 sstr, int sflat, long S, __global const io_t *g, long g_off,
                           __global const acc_t *ss, long ss_off, __global const acc_t *red, long red_off,
                           int training, __global io_t *dx, long dx_off) {
  long s = get_global_id(0), c = get_global_id(1), n = get_global_id(2);
  if (s >= S || c >= C || n >= N) return;
  long o = (n * C + c) * S + s;
  acc_t gv = LOADA(g, g_off + o), scale = ss[ss_off + c];
  if (training) {
    acc_t m = (acc_t)(N * S);
    long xo = x_off + n * sn + c * sc + (sflat ? s : ct_offset(s, sndim, sshape, sstr));
    acc_t xhat = (LOADA(x, xo) - ss[ss_off + 2 * C + c]) * ss[ss_off + 3 * C + c];
    gv = gv - red[red_off + c] / m - xhat * (red[red_off + C + c] / m);
  }
  STOREA(dx, dx_off + o, scale * gv);
}
