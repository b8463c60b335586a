/* 2-D pooling (src/nn/pool.c). Build option CT_IN: the dtype of x and the output (f16, bf16,
 * f32 computed in float; f64 in double). A work-item per output element of the contiguous
 * [N, C, OH, OW] output (a 3-D range OW x OH x N * C, src/nn/pool.c); x is [N, C, H, W] with
 * element strides xs, read in place.
 * mode 0: max over the window (padded positions never win; a NaN wins, as PyTorch's
 * `val > max || isnan(val)`); mode 1: average dividing by kh * kw (count_include_pad, and with
 * ceil_mode false no window reaches past the padding); mode 2: adaptive average, output (i, j)
 * over rows [floor(i H / OH), ceil((i + 1) H / OH)) and the same for columns. */

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

__kernel void pool2d(__global const io_t *x, long x_off, long4 xs, long C, long H, long W,
                     __global io_t *out, long out_off, long OH, long OW, int mode, int kh, int kw,
                     int sth, int stw, int ph, int pw, long N) {
  /* A 3-D range (OW, OH, N * C): the output's coordinates without a division but nc's, which
   * depends on id 2 alone, so CPU compilers that run a group as nested loops (PoCL) pay it once
   * per output plane, not per element (a range (OH * OW, C, N) paid a 64-bit one per element). */
  long ow = get_global_id(0), oh = get_global_id(1), nc = get_global_id(2);
  long n = nc / C, c = nc - n * C; /* before the test, so that it is not under a branch */
  if (ow >= OW || oh >= OH || nc >= N * C) return;
  long o = (nc * OH + oh) * OW + ow;
  long base = x_off + n * xs.s0 + c * xs.s1;
  long h0, h1, w0, w1;
  if (mode == 2) {
    h0 = (oh * H) / OH;
    h1 = ((oh + 1) * H + OH - 1) / OH;
    w0 = (ow * W) / OW;
    w1 = ((ow + 1) * W + OW - 1) / OW;
  } else {
    h0 = oh * sth - ph;
    w0 = ow * stw - pw;
    h1 = min(h0 + kh, H);
    w1 = min(w0 + kw, W);
    h0 = max(h0, 0l);
    w0 = max(w0, 0l);
  }
  acc_t r;
  if (mode == 0) {
    r = (acc_t)(-INFINITY);
    for (long i = h0; i < h1; i++)
      for (long j = w0; j < w1; j++) {
        acc_t v = LOADA(x, base + i * xs.s2 + j * xs.s3);
        if (v > r || isnan(v)) r = v;
      }
  } else {
    r = 0;
    for (long i = h0; i < h1; i++)
      for (long j = w0; j < w1; j++) r += LOADA(x, base + i * xs.s2 + j * xs.s3);
    r /= (acc_t)(mode == 1 ? (long)kh * kw : (h1 - h0) * (w1 - w0));
  }
  STOREA(out, out_off + o, r);
}
