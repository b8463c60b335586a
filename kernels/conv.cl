/* Convolutions (src/nn/conv.c). Build option CT_IN: the dtype of x, w, bias and the output (f16,
 * bf16, f32, f64). f16/bf16/f32 compute in float, f64 in double; acc_t is that type, and the
 * column buffer and GEMM result of the im2col path have it.
 *
 *  conv_im2col   a work-item per (image, column row r = (ci, ki, kj), output row oh): writes the
 *                OW columns of that row, x read through its strides (zeros where padded), so a
 *                strided or f16/bf16 x needs no copy or cast pass before the GEMM
 *  conv_finish   out = gemm result + bias[co] (dtype conversion for f16/bf16; in place for
 *                f32/f64 when the GEMM wrote into out)
 *  conv_direct   a work-item per output element: the whole window sum, for depthwise and other
 *                convolutions with few products per output, where a GEMM would be mostly
 *                overhead
 * Geometry: x is [N, C, H, W] with element strides xs = (sn, sc, sh, sw); the kernel window is
 * kh x kw with stride (sth, stw), padding (ph, pw), dilation (dh, dw); the output is
 * [N, Cout, OH, OW], contiguous. */

#if CT_IN == CT_DT_F64
typedef double acc_t;
#define LOADA(p, i) ((p)[i])
#define STOREA(p, i, v) ((p)[i] = (v))
#else
typedef float acc_t;
#define LOADA(p, i) CT_LOADF(CT_IN, p, i)
#define STOREA(p, i, v) CT_STOREF(CT_IN, p, i, v)
#endif
typedef CT_T(CT_IN) io_t;

__kernel void conv_im2col(__global const io_t *x, long x_off, long4 xs, int C, int H, int W, int kh,
                          int kw, int sth, int stw, int ph, int pw, int dh, int dw, int OH, int OW,
                          long n0, int nimg, __global acc_t *col, long col_off) {
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
  __global acc_t *dst = col + col_off + (img * K + r) * P + (long)oh * OW;
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
                          long total) {
  long o = get_global_id(0);
  if (o >= total) return;
  int ow = (int)(o % OW);
  long t = o / OW;
  int oh = (int)(t % OH);
  t /= OH;
  int co = (int)(t % Cout);
  long n = t / Cout;
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
