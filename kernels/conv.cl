/* Convolutions (src/nn/conv.c). Build option CT_IN: the dtype of x, w, bias and the output (f16,
 * bf16, f32, f64). f16/bf16/f32 compute in float, f64 in double; acc_t is that type, and the
 * column buffer and GEMM result of the im2col path have it.
 *
 *  conv_im2col   a work-item per (image, column row r = (ci, ki, kj), output row oh): writes the
 *                OW columns of that row, x read through its strides (zeros where padded), so a
 *                strided or f16/bf16 x needs no copy or cast pass before the GEMM; element
 *                (img, r, p) at img * is + r * rs + p: [nimg, K, P] for the forward (is = K P,
 *                rs = P), [K, nimg * P] for the weight gradient (is = P, rs = nimg P), whose GEMM
 *                reduces over images and positions at once
 *  conv_finish   out = gemm result + bias[co] (dtype conversion for f16/bf16; in place for
 *                f32/f64 when the GEMM wrote into out)
 *  conv_direct   a work-item per output element (a 3-D range OH * OW x Cout x N): the window sum,
 *                for depthwise and other
 *                convolutions with few products per output, where a GEMM would be mostly
 *                overhead
 *  conv_col2im   the input gradient from the GEMM's w^T g columns (backward)
 *  conv_wflip    the flipped, transposed weight of the input gradient's transposed conv (backward)
 *  conv_wgrad    the blocked weight gradient of stride-1 convs on CPU devices (backward)
 * Geometry: x is [N, C, H, W] with element strides xs = (sn, sc, sh, sw); the kernel window is
 * kh x kw with stride (sth, stw), padding (ph, pw), dilation (dh, dw); the output is
 * [N, Cout, OH, OW], contiguous. */

/* io_t, acc_t, LOADA, STOREA. */
//#include "acc_types.cl"

__kernel void conv_im2col(__global const io_t *x, long x_off, long4 xs, int C, int H, int W, int kh,
                          int kw, int sth, int stw, int ph, int pw, int dh, int dw, int OH, int OW,
                          long n0, int nimg, __global acc_t *col, long col_off, long is, long rs) {
  long gid = get_global_id(0);
  long K = (long)C * kh * kw;
  long total = (long)nimg * K * OH;
  if (gid >= total) return;
  int oh = (int)(gid % OH);
  long t = gid / OH;
  long r = t % K;
  long img = t / K;
  int kj = (int)(r % kw);
  int ki = (int)((r / kw) % kh);
  int ci = (int)(r / ((long)kw * kh));
  long P = (long)OH * OW;
  __global acc_t *dst = col + col_off + img * is + r * rs + (long)oh * OW;
  int ih = oh * sth - ph + ki * dh;
  if (ih < 0 || ih >= H) {
    for (int ow = 0; ow < OW; ow++) dst[ow] = 0;
    return;
  }
  long base = x_off + (n0 + img) * xs.s0 + ci * xs.s1 + ih * xs.s2;
  int iw = kj * dw - pw;
  for (int ow = 0; ow < OW; ow++, iw += stw)
    dst[ow] = (iw >= 0 && iw < W) ? (acc_t)LOADA(x, base + iw * xs.s3) : (acc_t)0;
}

/* out[o] for o < total (the chunk's elements, contiguous [nimg, Cout, P] from out_off) =
 * acc[o] + bias[co]. */
__kernel void conv_finish(__global const acc_t *acc, long acc_off, __global io_t *out, long out_off,
                          __global const io_t *bias, long bias_off, int has_bias, int Cout, long P,
                          long total) {
  long o = get_global_id(0);
  if (o >= total) return;
  acc_t v = acc[acc_off + o];
  if (has_bias) v += (acc_t)LOADA(bias, bias_off + (o / P) % Cout);
  STOREA(out, out_off + o, v);
}

/* w is contiguous [Cout, C / groups, kh, kw]. */
__kernel void conv_direct(__global const io_t *x, long x_off, long4 xs, int C, int H, int W,
                          __global const io_t *w, long w_off, __global const io_t *bias, long bias_off,
                          int has_bias, __global io_t *out, long out_off, int Cout, int groups, int kh,
                          int kw, int sth, int stw, int ph, int pw, int dh, int dw, int OH, int OW,
                          long N) {
  /* A 3-D range (OH * OW, Cout, N): no 64-bit divisions to find the output. */
  int p = (int)get_global_id(0), co = (int)get_global_id(1);
  long n = get_global_id(2);
  if (p >= OH * OW || co >= Cout || n >= N) return;
  int oh = p / OW, ow = p - oh * OW;
  long o = (n * Cout + co) * (long)OH * OW + p;
  int cg = C / groups, og = Cout / groups;
  int c0 = (co / og) * cg;
  acc_t s = 0;
  for (int c = 0; c < cg; c++) {
    long xb = x_off + n * xs.s0 + (long)(c0 + c) * xs.s1;
    long wb = w_off + ((long)co * cg + c) * kh * kw;
    for (int i = 0; i < kh; i++) {
      int ih = oh * sth - ph + i * dh;
      if (ih < 0 || ih >= H) continue;
      for (int j = 0; j < kw; j++) {
        int iw = ow * stw - pw + j * dw;
        if (iw < 0 || iw >= W) continue;
        s += (acc_t)LOADA(x, xb + ih * xs.s2 + iw * xs.s3) * (acc_t)LOADA(w, wb + i * kw + j);
      }
    }
  }
  if (has_bias) s += (acc_t)LOADA(bias, bias_off + co);
  STOREA(out, out_off + o, s);
}

/* ---- Backward (src/nn/conv_bwd.c) ---- */

/* gx[n0 + img, c, ih, iw] for the nimg images of a chunk: the sum over the window taps (ki, kj)
 * that put (ih, iw) under an output (oh, ow) of col[img][(c kh + ki) kw + kj][oh OW + ow] (col
 * [nimg, C kh kw, OH OW], the GEMM's w^T g). A work-item per element of x: a gather, so the sum
 * has one fixed order and needs no atomics. gx is contiguous [N, C, H, W]. */
__kernel void conv_col2im(__global const acc_t *col, long col_off, int C, int H, int W, int kh, int kw,
                          int sth, int stw, int ph, int pw, int dh, int dw, int OH, int OW, long n0,
                          int nimg, __global io_t *gx, long gx_off) {
  long gid = get_global_id(0);
  long CHW = (long)C * H * W;
  if (gid >= nimg * CHW) return;
  int iw = (int)(gid % W);
  long t = gid / W;
  int ih = (int)(t % H);
  t /= H; /* img * C + c */
  long P = (long)OH * OW;
  __global const acc_t *cb = col + col_off + t * kh * kw * P;
  acc_t s = 0;
  for (int ki = 0; ki < kh; ki++) {
    int y = ih + ph - ki * dh;
    if (y < 0 || y % sth != 0 || y / sth >= OH) continue;
    for (int kj = 0; kj < kw; kj++) {
      int z = iw + pw - kj * dw;
      if (z < 0 || z % stw != 0 || z / stw >= OW) continue;
      s += cb[((long)ki * kw + kj) * P + (long)(y / sth) * OW + z / stw];
    }
  }
  STOREA(gx, gx_off + n0 * CHW + gid, s);
}

/* w contiguous [Cout, Cg, kh, kw] -> wf [groups * Cg, og, kh, kw] (og = Cout / groups):
 * wf[g Cg + c, o, i, j] = w[g og + o, c, kh - 1 - i, kw - 1 - j], the weight of the stride-1
 * convolution of the output gradient that gives the input gradient (a transposed conv). A
 * work-item per window t = (g Cg + c) og + o of wf (total elements): the divisions once per
 * window, not per element. */
__kernel void conv_wflip(__global const io_t *w, long w_off, int Cg, int og, int kh, int kw,
                         __global io_t *wf, long wf_off, long total) {
  long t = get_global_id(0);
  int khw = kh * kw;
  if (t * khw >= total) return;
  int oo = (int)(t % og);
  long gc = t / og;
  int c = (int)(gc % Cg);
  long g = gc / Cg;
  __global const io_t *src = w + w_off + ((g * og + oo) * Cg + c) * khw;
  long o = wf_off + t * khw;
  /* Through acc_t: f16 can't be assigned as half without cl_khr_fp16 (exact either way). */
  for (int i = 0; i < kh; i++)
    for (int j = 0; j < kw; j++, o++) STOREA(wf, o, LOADA(src, (kh - 1 - i) * kw + (kw - 1 - j)));
}

/* ---- The blocked direct path for stride-1 convolutions of f32/f16/bf16 (CPU devices) ----
 * x is first copied, as float, into a zero-padded "tall" layout xp (conv_pad): for each channel
 * c, at c * cs, the chunk's images stacked as rows of S = max(W + pw, OW) floats: ph zero rows,
 * then per image its H rows (pw zeros, then the W values, zeros to S) and Rimg - H >= ph zero
 * rows (Rimg = max(H + ph, OH)), then at least pw + 16 zeros. The zeros after a row are the
 * right padding of that row and the left padding of the next; the zero rows after an image its
 * bottom padding and the next image's top padding. An output position q = R S + col (image
 * R / Rimg, row oh = R % Rimg, column col; oh < OH and col < OW valid, the rest discarded) then
 * reads xp at q + i dh S + j dw for window tap (i, j), every valid one inside its own image's
 * padded window. So PB consecutive positions read PB consecutive floats, CT_NV vector loads per
 * tap, and a block spans images: on small planes (8x8, 4x4) most lanes are valid outputs, where
 * blocks of one padded plane each left half or two thirds of them discarded. A work-item
 * computes CB output channels x PB positions in registers (CB x CT_NV vector accumulators: with
 * AVX-512, 8 x 3 float16, 24 of its 32 registers; with AVX2, 6 x 2 float8, 12 of 16), streaming
 * the taps of its group's input channels with the CB weights of each tap next to each other (w
 * packed by conv_wpack as
 * [groups][channel blocks][C/groups][kh][kw][CB], zeros past the group's channels). */
/* The blocking, from the host (src/nn/conv.c, ct__conv_blocking: the device's SIMD width):
 * CT_VL floats a vector, CB = CT_CB output channels x CT_NV vectors of positions a work-item,
 * and for the weight gradient CT_WCB channels x CT_WTB taps. The defaults are AVX-512's. */
#ifndef CT_VL
#define CT_VL 16
#define CT_CB 8
#define CT_NV 3
#define CT_WCB 8
#define CT_WTB 3
#endif
#define CB CT_CB
#define PB (CT_NV * CT_VL)
#if CT_VL == 16
typedef float16 vf_t;
#define VLOAD vload16
#define VSTORE vstore16
#define VHSUM(v) (((v).lo + (v).hi).lo + ((v).lo + (v).hi).hi)
#elif CT_VL == 8
typedef float8 vf_t;
#define VLOAD vload8
#define VSTORE vstore8
#define VHSUM(v) ((v).lo + (v).hi)
#else
typedef float4 vf_t;
#define VLOAD vload4
#define VSTORE vstore4
#define VHSUM(v) (v)
#endif
/* v's lanes summed in a fixed order (halves, then the 4 left). */
#define HSUM(v) (VHSUM(v).s0 + VHSUM(v).s1 + VHSUM(v).s2 + VHSUM(v).s3)

/* A work-item per block of rb rows [h0, h1) of image n's Rimg rows of channel c (t = c nimg + n;
 * nrb blocks an image; one block for small planes): the index arithmetic once per block, none
 * per row or element, and the zeros as one plain loop over the block before x's rows (about
 * half the time of zeroing each row's margins around its copy). The first image's first block
 * also zeros the ph rows before it, the last image's last block the channel's rest up to cs,
 * and the very last block writes the tail_n values tail_v after the channels (the slack the
 * blocked kernels read, or the weight gradient's ones), which saves a fill pass. */
__kernel void conv_pad(__global const io_t *x, long x_off, long4 xs, int C, int H, int W, int ph, int pw,
                       int Rimg, int S, long cs, long n0, int nimg, __global float *xp, long xp_off, int rb,
                       int nrb, long tail_n, float tail_v) {
  long id = get_global_id(0);
  long planes = (long)nimg * C;
  if (id >= planes * nrb) return;
  long t = nrb == 1 ? id : id / nrb;
  int h0 = (int)(id - t * nrb) * rb, h1 = min(Rimg, h0 + rb);
  int c = (int)(t / nimg), n = (int)(t - (long)c * nimg);
  long pbase = x_off + (n0 + n) * xs.s0 + c * xs.s1;
  __global float *cb = xp + xp_off + c * cs;
  __global float *dst = cb + ((long)ph + (long)n * Rimg + h0) * S;
  int nq = (h1 - h0) * S;
  for (int q = 0; q < nq; q++) dst[q] = 0;
  if (n == 0 && h0 == 0)
    for (int q = 0; q < ph * S; q++) cb[q] = 0;
  if (n == nimg - 1 && h1 == Rimg)
    for (long q = ((long)ph + (long)nimg * Rimg) * S; q < cs; q++) cb[q] = 0;
  if (t == planes - 1 && h1 == Rimg)
    for (long q = 0; q < tail_n; q++) cb[cs + q] = tail_v;
  int r1 = min(h1, H);
  for (int hq = h0; hq < r1; hq++) {
    __global float *row = dst + (hq - h0) * S + pw;
    long base = pbase + hq * xs.s2;
    if (xs.s3 == 1)
      for (int iw = 0; iw < W; iw++) row[iw] = (float)LOADA(x, base + iw);
    else
      for (int iw = 0; iw < W; iw++) row[iw] = (float)LOADA(x, base + iw * xs.s3);
  }
}

/* w contiguous [Cout, Cg, kh, kw] -> wt [groups][ncb][Cg][kh][kw][CB] (total elements). A
 * work-item per (group, channel block, input channel) t: its kh kw CB contiguous values of wt,
 * the divisions once for them. With flip set, w is instead the weight [groups Cg, og, kh, kw] of
 * the convolution whose input gradient this one computes, and the packed weight is its
 * transpose per group flipped in both window dims (conv_wflip's, without writing it out): the
 * value at (col, c, r) is w[g Cg + c, col, khw - 1 - r]. */
__kernel void conv_wpack(__global const io_t *w, long w_off, int Cg, int kh, int kw, int og, int ncb,
                         __global float *wt, long wt_off, long total, int flip) {
  long t = get_global_id(0);
  int khw = kh * kw;
  if (t * khw * CB >= total) return;
  int c = (int)(t % Cg);
  long gcb = t / Cg;
  int cb = (int)(gcb % ncb), g = (int)(gcb / ncb);
  __global float *dst = wt + wt_off + t * khw * CB;
  for (int r = 0; r < khw; r++)
    for (int k = 0; k < CB; k++) {
      int col = cb * CB + k;
      long src = flip ? ((long)(g * Cg + c) * og + col) * khw + (khw - 1 - r)
                      : ((long)g * og + col) * Cg * khw + c * khw + r;
      *dst++ = col < og ? (float)LOADA(w, w_off + src) : 0.0f;
    }
}

__kernel void conv_blk(__global const float *xp, long xp_off, long cs, int Cg, int S, int Rimg,
                       __global const float *wt, long wt_off, int kh, int kw, int dh, int dw,
                       __global const io_t *bias, long bias_off, int has_bias, __global io_t *out,
                       long out_off, int Cout, int og, int ncb, int groups, int OH, int OW, int npb,
                       long n0, int nimg, long items) {
  long gid = get_global_id(0);
  if (gid >= items) return;
  /* The channel blocks of one position block are neighbours (and share a work-group), so the
   * input tile they all read stays in the core's caches. */
  int cb = (int)(gid % ncb);
  long t = gid / ncb;
  int pb = (int)(t % npb);
  int g = (int)(t / npb);
  long q0 = (long)pb * PB;
  __global const float *xb = xp + xp_off + (long)g * Cg * cs + q0;
  __global const float *wb = wt + wt_off + ((long)g * ncb + cb) * Cg * kh * kw * CB;
  /* Fully unrolled: the arrays are registers. */
  vf_t acc[CB][CT_NV];
#pragma unroll
  for (int k = 0; k < CB; k++)
#pragma unroll
    for (int u = 0; u < CT_NV; u++) acc[k][u] = (vf_t)0;
  for (int c = 0; c < Cg; c++, xb += cs) {
    for (int i = 0; i < kh; i++) {
      __global const float *xr = xb + (long)i * dh * S;
      for (int j = 0; j < kw; j++, wb += CB) {
        vf_t v[CT_NV];
#pragma unroll
        for (int u = 0; u < CT_NV; u++) v[u] = VLOAD(0, xr + j * dw + u * CT_VL);
        /* Scalar weight loads: the FMAs take them as memory broadcasts (a load port) rather
         * than shuffles of a vector (the port the second FMA unit shares). */
#pragma unroll
        for (int k = 0; k < CB; k++) {
          vf_t w_ = (vf_t)(wb[k]);
#pragma unroll
          for (int u = 0; u < CT_NV; u++) acc[k][u] = CT_FMA(w_, v[u], acc[k][u]);
        }
      }
    }
  }
  float r[CB][PB];
#pragma unroll
  for (int k = 0; k < CB; k++)
#pragma unroll
    for (int u = 0; u < CT_NV; u++) VSTORE(acc[k][u], u, r[k]);
  /* Each lane's output offset from its image's channel 0 plane (image n: n Cout OH OW + oh OW
   * + col), or -1 for the discarded positions (col >= OW, oh >= OH, past the last image): the
   * divisions once per work-item rather than per element. */
  long lo[PB];
  long R = q0 / S;
  int col = (int)(q0 - R * S), n = (int)(R / Rimg), oh = (int)(R - (long)n * Rimg);
  long img_sz = (long)Cout * OH * OW;
  for (int l = 0; l < PB; l++) {
    lo[l] = (oh < OH && col < OW && n < nimg) ? n * img_sz + (long)oh * OW + col : -1;
    if (++col == S) {
      col = 0;
      if (++oh == Rimg) {
        oh = 0;
        n++;
      }
    }
  }
  for (int k = 0; k < CB; k++) {
    int cok = cb * CB + k;
    if (cok >= og) break;
    int co = g * og + cok;
    float b = has_bias ? (float)LOADA(bias, bias_off + co) : 0.0f;
    long ob = out_off + n0 * img_sz + (long)co * OH * OW;
    for (int l = 0; l < PB; l++)
      if (lo[l] >= 0) STOREA(out, ob + lo[l], r[k][l] + b);
  }
}

/* ---- The blocked weight gradient of stride-1 convs (f32/f16/bf16 on CPU devices) ----
 * gw[co, c, i, j] = sum over images and output positions of g[n, co, oh, ow] *
 * xp[n, c, oh + i dh, ow + j dw], with xp x in the forward's tall layout (conv_pad: channels xcs
 * floats apart, rows of S) and gq g in the same layout without padding (channels gcs apart):
 * g[n, co, oh, ow] at position q = (n Rimg + oh) S + ow, zeros at every other position up to the
 * nv 16-float vectors the sums run over. On these grids position q meets x at q + i dh S + j dw
 * for every tap, so 16 consecutive positions (of any images) are one vector load of g and one of
 * x per tap; the discarded positions multiply zeros of gq. Each group's taps are its Cg kh kw
 * window taps and one more, tap T = Cg kh kw, whose x is a run of ones at xp + ones_off: its sums
 * are the bias gradient (sum of g), so g is read once for both. A work-item sums, over its vpg
 * vectors of positions (ig: its position group), CT_WCB output channels (cb: a block of the
 * group's og) x CT_WTB taps (tb) in vector accumulators (AVX-512: 8 x 3 float16, AVX2: 4 x 3
 * float8), then writes their sums: window taps to pw[(ig Cout + co) T + tap], the bias tap to
 * pb[ig Cout + co] (has_bias). With one position
 * group these are gw and gb themselves, else partial sums that conv_wsum adds in order. The x
 * reads of discarded positions land in x's zeros, other channels, the ones or the slack after
 * them (all written, finite for finite x). Non-finite x values there can turn a gradient that
 * would be +-inf into NaN (0 * inf), a difference only for inputs holding infinities. */
__kernel void conv_wgrad(__global const float *xp, long xp_off, long xcs, long ones_off, int Cg,
                         __global const float *gq, long gq_off, long gcs, long nv, long vpg, int Cout, int og,
                         int ncb, int kh, int kw, int dh, int dw, int S, int groups, int ntb, int has_bias,
                         __global float *pw, long pw_off, __global float *pb, long pb_off, long items) {
  long gid = get_global_id(0);
  if (gid >= items) return;
  int tb = (int)(gid % ntb);
  long t = gid / ntb;
  int cb = (int)(t % ncb);
  t /= ncb;
  int g = (int)(t % groups);
  long ig = t / groups;
  int khw = kh * kw, T = Cg * khw, Tb = T + has_bias;
  /* The taps' offsets in xp; the ones for the bias tap; past Tb: the last tap again, its sums
   * not written. */
  __global const float *xr[CT_WTB];
#pragma unroll
  for (int u = 0; u < CT_WTB; u++) {
    int tap = min(tb * CT_WTB + u, Tb - 1), c = tap / khw, r = tap - c * khw, i = r / kw, j = r - i * kw;
    xr[u] = xp + xp_off + (tap == T ? ones_off : (long)(g * Cg + c) * xcs + (long)i * dh * S + (long)j * dw);
  }
  int co0 = g * og + cb * CT_WCB, nco = min(CT_WCB, og - cb * CT_WCB);
  /* Channels past the group's: the last one again, not written. */
  __global const float *gr[CT_WCB];
#pragma unroll
  for (int k = 0; k < CT_WCB; k++) gr[k] = gq + gq_off + (long)(co0 + min(k, nco - 1)) * gcs;
  /* Fully unrolled: the arrays are registers. */
  vf_t acc[CT_WCB][CT_WTB];
#pragma unroll
  for (int k = 0; k < CT_WCB; k++)
#pragma unroll
    for (int u = 0; u < CT_WTB; u++) acc[k][u] = (vf_t)0;
  long q1 = min(nv, (ig + 1) * vpg) * 16;
  for (long q = ig * vpg * 16; q < q1; q += CT_VL) {
    vf_t x[CT_WTB];
#pragma unroll
    for (int u = 0; u < CT_WTB; u++) x[u] = VLOAD(0, xr[u] + q);
#pragma unroll
    for (int k = 0; k < CT_WCB; k++) {
      vf_t g_ = VLOAD(0, gr[k] + q);
#pragma unroll
      for (int u = 0; u < CT_WTB; u++) acc[k][u] = CT_FMA(g_, x[u], acc[k][u]);
    }
  }
  for (int k = 0; k < nco; k++)
    for (int u = 0; u < CT_WTB; u++) {
      int tap = tb * CT_WTB + u;
      float r = HSUM(acc[k][u]);
      if (tap < T) pw[pw_off + (ig * Cout + co0 + k) * (long)T + tap] = r;
      else if (tap == T && has_bias) pb[pb_off + ig * Cout + co0 + k] = r;
    }
}

/* gw[o] for o < nw and gb[o - nw] for nw <= o < total (no gb: total = nw) = (acc ? the value
 * there : 0) + the sum over the nig position groups of the partial sums pw[ig][o] (pb[ig][o - nw]),
 * in order. */
__kernel void conv_wsum(__global const float *pw, long pw_off, __global const float *pb, long pb_off, int nig,
                        int acc, __global float *gw, long gw_off, __global float *gb, long gb_off, long nw,
                        long total) {
  long o = get_global_id(0);
  if (o >= total) return;
  bool w = o < nw;
  long nb = total - nw, i0 = w ? o : o - nw;
  __global float *dst = w ? gw + gw_off + i0 : gb + gb_off + i0;
  __global const float *src = w ? pw + pw_off + i0 : pb + pb_off + i0;
  long step = w ? nw : nb;
  float s = acc ? *dst : 0.0f;
  for (int i = 0; i < nig; i++) s += src[i * step];
  *dst = s;
}
