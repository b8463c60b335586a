/* 2-D pooling (src/nn/pool.c). Build option CT_IN: the dtype of x and the output (f16, bf16,
 * f32 computed in float; f64 in double). A work-item per output element of the contiguous
 * [N, C, OH, OW] output (a 3-D range OW x OH x N * C, src/nn/pool.c); x is [N, C, H, W] with
 * element strides xs, read in place.
 * mode 0: max over the window, dilated by (dh, dw) (padded positions never win; a NaN wins, as
 * PyTorch's `val > max || isnan(val)`); mode 1: average with count_include_pad, dividing by the
 * window's size clipped to the padded input (kh * kw but for ceil_mode's last windows, which
 * can reach past the padding: PyTorch's pool_size); mode 3: average without count_include_pad,
 * dividing by the number of input elements in the window; mode 2: adaptive average, output
 * (i, j) over rows [floor(i H / OH), ceil((i + 1) H / OH)) and the same for columns. The
 * averages take no dilation (dh = dw = 1), as PyTorch's. */

//#include "acc_types.cl"

/* The arguments of pool2d and pool2d_max2 (src/nn/pool.c sets them alike). */
#define POOL2D_PARAMS                                                                                   \
  __global const io_t *x, long x_off, long4 xs, long C, long H, long W, __global io_t *out, long out_off, \
      long OH, long OW, int mode, int kh, int kw, int sth, int stw, int ph, int pw, int dh, int dw, long N

/* The window of output (oh, ow) of the max pool: rows h0, h0 + dh, ... < h1 and columns alike
 * (PyTorch's: the dilated window's end clipped to the input, its start moved into it by whole
 * dilation steps). */
inline void pool_max_window(long oh, long ow, long H, long W, int kh, int kw, int sth, int stw, int ph, int pw, int dh,
                            int dw, long *h0, long *h1, long *w0, long *w1) {
  long a = oh * sth - ph, b = ow * stw - pw;
  *h1 = min(a + (long)(kh - 1) * dh + 1, H);
  *w1 = min(b + (long)(kw - 1) * dw + 1, W);
  if (a < 0) a += (-a + dh - 1) / dh * dh;
  if (b < 0) b += (-b + dw - 1) / dw * dw;
  *h0 = a;
  *w0 = b;
}

/* The window of output (oh, ow) of the average pools, clipped to the input; returns PyTorch's
 * pool_size, the window clipped to the padded input (count_include_pad's divisor). */
inline long pool_avg_window(long oh, long ow, long H, long W, int kh, int kw, int sth, int stw, int ph, int pw,
                            long *h0, long *h1, long *w0, long *w1) {
  long a = oh * sth - ph, b = ow * stw - pw;
  long ea = min(a + kh, H + ph), eb = min(b + kw, W + pw);
  long pool = (ea - a) * (eb - b);
  *h0 = max(a, 0l);
  *w0 = max(b, 0l);
  *h1 = min(ea, H);
  *w1 = min(eb, W);
  return pool;
}

__kernel void pool2d(POOL2D_PARAMS) {
  /* A 3-D range (OW, OH, N * C): the output's coordinates without a division but nc's, which
   * depends on id 2 alone, so CPU compilers that run a group as nested loops (PoCL) pay it once
   * per output plane, not per element (a range (OH * OW, C, N) paid a 64-bit one per element). */
  long ow = get_global_id(0), oh = get_global_id(1), nc = get_global_id(2);
  long n = nc / C, c = nc - n * C; /* before the test, so that it is not under a branch */
  if (ow >= OW || oh >= OH || nc >= N * C) return;
  long o = (nc * OH + oh) * OW + ow;
  long base = x_off + n * xs.s0 + c * xs.s1;
  long h0, h1, w0, w1, pool = 1;
  if (mode == 2) {
    h0 = (oh * H) / OH;
    h1 = ((oh + 1) * H + OH - 1) / OH;
    w0 = (ow * W) / OW;
    w1 = ((ow + 1) * W + OW - 1) / OW;
  } else if (mode == 0) {
    pool_max_window(oh, ow, H, W, kh, kw, sth, stw, ph, pw, dh, dw, &h0, &h1, &w0, &w1);
  } else {
    pool = pool_avg_window(oh, ow, H, W, kh, kw, sth, stw, ph, pw, &h0, &h1, &w0, &w1);
  }
  acc_t r;
  if (mode == 0) {
    r = (acc_t)(-INFINITY);
    for (long i = h0; i < h1; i += dh)
      for (long j = w0; j < w1; j += dw) {
        acc_t v = LOADA(x, base + i * xs.s2 + j * xs.s3);
        if (v > r || v != v) r = v; /* v != v: isnan() is a call on PoCL (pool2d_max2) */
      }
  } else {
    r = 0;
    for (long i = h0; i < h1; i++)
      for (long j = w0; j < w1; j++) r += LOADA(x, base + i * xs.s2 + j * xs.s3);
    long count = (h1 - h0) * (w1 - w0);
    /* An empty window (not reachable with PyTorch's output sizes) gives 0, as PyTorch's. */
    r = count <= 0 ? (acc_t)0 : r / (acc_t)(mode == 1 ? pool : count);
  }
  STOREA(out, out_off + o, r);
}

/* max_pool2d with 2x2 windows, stride 2, no padding (most CNNs' pooling): the window unrolled,
 * with no loop and no bounds (every window lies inside x), which CPU compilers vectorize
 * across work-items; pool2d's window loops, whose trip counts vary per work-item, they don't
 * (PoCL: ~7 ms against ~2 ms for [450, 32, 8, 8]). Same order of comparisons as pool2d, so
 * the same NaN wins; NaN is tested as v != v, a select, where isnan() stayed a call per element
 * on PoCL and kept the loop scalar (2x2 unrolled with isnan: no faster than pool2d). Same
 * arguments and range as pool2d. */
__kernel void pool2d_max2(POOL2D_PARAMS) {
  long ow = get_global_id(0), oh = get_global_id(1), nc = get_global_id(2);
  long n = nc / C, c = nc - n * C; /* before the test, so that it is not under a branch */
  if (ow >= OW || oh >= OH || nc >= N * C) return;
  long p = x_off + n * xs.s0 + c * xs.s1 + 2 * oh * xs.s2 + 2 * ow * xs.s3;
  acc_t r = (acc_t)(-INFINITY), v;
#define POOL_MAX_AT(off)        \
  v = LOADA(x, p + (off));      \
  r = (v > r || v != v) ? v : r;
  POOL_MAX_AT(0)
  POOL_MAX_AT(xs.s3)
  POOL_MAX_AT(xs.s2)
  POOL_MAX_AT(xs.s2 + xs.s3)
#undef POOL_MAX_AT
  STOREA(out, out_off + (nc * OH + oh) * OW + ow, r);
}

/* ---- Backward (src/nn/pool.c, ct__nn_pool2d_backward) ----
 * The input gradient out = gx, contiguous [N, C, H, W], from g [N, C, OH, OW] (element strides
 * gs): a work-item per element of x over a 3-D range (W, H, N * C), summing, in a fixed order
 * (oh, then ow, ascending), over the windows that contain it: a gather, so the sum needs no
 * atomics and its bits do not depend on scheduling. mode 0: g of each window whose first maximum
 * (recomputed as pool2d finds it: the window's first element unless a later one is greater or
 * NaN, padded positions never) is this element, as PyTorch's max_pool2d_with_indices; modes 1
 * and 3: g / the forward's divisor of each window; mode 2: g / the window's size. The other pool2d arguments as pool2d's (x is not
 * read by the averages). */
__kernel void pool2d_bwd(POOL2D_PARAMS, __global const io_t *g, long g_off, long4 gs) {
  long iw = get_global_id(0), ih = get_global_id(1), nc = get_global_id(2);
  long n = nc / C, c = nc - n * C;
  if (iw >= W || ih >= H || nc >= N * C) return;
  long gb = g_off + n * gs.s0 + c * gs.s1;
  if (mode == 2 && OH == 1 && OW == 1) {
    /* Global average pooling (the common adaptive case): one window, no window arithmetic. */
    STOREA(out, out_off + (nc * H + ih) * W + iw, LOADA(g, gb) / (acc_t)(H * W));
    return;
  }
  long oh0, oh1, ow0, ow1;
  if (mode == 2) {
    oh0 = (ih * OH) / H;
    oh1 = min(((ih + 1) * OH + H - 1) / H, OH);
    ow0 = (iw * OW) / W;
    ow1 = min(((iw + 1) * OW + W - 1) / W, OW);
  } else {
    /* oh * sth - ph <= ih <= oh * sth - ph + (kh - 1) dh (dh = 1 for the averages) */
    long a = ih + ph - (long)(kh - 1) * dh, b = iw + pw - (long)(kw - 1) * dw;
    oh0 = a <= 0 ? 0 : (a + sth - 1) / sth;
    ow0 = b <= 0 ? 0 : (b + stw - 1) / stw;
    oh1 = min((ih + ph) / sth + 1, OH);
    ow1 = min((iw + pw) / stw + 1, OW);
  }
  long base = x_off + n * xs.s0 + c * xs.s1;
  acc_t s = 0;
  for (long oh = oh0; oh < oh1; oh++)
    for (long ow = ow0; ow < ow1; ow++) {
      acc_t gv = LOADA(g, gb + oh * gs.s2 + ow * gs.s3);
      if (mode == 2) {
        long h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        long w0 = (ow * W) / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        if (ih >= h0 && ih < h1 && iw >= w0 && iw < w1) s += gv / (acc_t)((h1 - h0) * (w1 - w0));
      } else if (mode == 1 || mode == 3) {
        long h0, h1, w0, w1;
        long pool = pool_avg_window(oh, ow, H, W, kh, kw, sth, stw, ph, pw, &h0, &h1, &w0, &w1);
        s += gv / (acc_t)(mode == 1 ? pool : (h1 - h0) * (w1 - w0));
      } else {
        long h0, h1, w0, w1;
        pool_max_window(oh, ow, H, W, kh, kw, sth, stw, ph, pw, dh, dw, &h0, &h1, &w0, &w1);
        /* Only a window that holds (ih, iw) (the range above also holds windows that step over
         * it when dilated): its first maximum may be it. */
        if ((ih - h0) % dh != 0 || (iw - w0) % dw != 0) continue;
        acc_t r = (acc_t)(-INFINITY);
        long bi = h0, bj = w0;
        for (long i = h0; i < h1; i += dh)
          for (long j = w0; j < w1; j += dw) {
            acc_t v = LOADA(x, base + i * xs.s2 + j * xs.s3);
            if (v > r || v != v) {
              r = v;
              bi = i;
              bj = j;
            }
          }
        if (bi == ih && bj == iw) s += gv;
      }
    }
  STOREA(out, out_off + (nc * H + ih) * W + iw, s);
}

/* pool2d_bwd for pool2d_max2's windows (2x2, stride 2, no padding): a work-item per window
 * (pool2d_max2's range OW x OH x N * C) finds the window's first maximum with pool2d_max2's
 * comparisons and writes g there and zeros at the 3 other positions. The windows do not
 * overlap, so each element of gx has one writer (no atomics); elements in no window (the last
 * row or column of an odd H or W) are zeroed beforehand by the caller. Unrolled, without loops,
 * as pool2d_max2, which PoCL vectorizes across work-items; pool2d_bwd's window loops it does
 * not. */
__kernel void pool2d_max2_bwd(POOL2D_PARAMS, __global const io_t *g, long g_off, long4 gs) {
  long ow = get_global_id(0), oh = get_global_id(1), nc = get_global_id(2);
  long n = nc / C, c = nc - n * C; /* before the test, so that it is not under a branch */
  if (ow >= OW || oh >= OH || nc >= N * C) return;
  long p = x_off + n * xs.s0 + c * xs.s1 + 2 * oh * xs.s2 + 2 * ow * xs.s3;
  acc_t v0 = LOADA(x, p), v1 = LOADA(x, p + xs.s3), v2 = LOADA(x, p + xs.s2), v3 = LOADA(x, p + xs.s2 + xs.s3);
  acc_t r = (acc_t)(-INFINITY);
  int best = 0;
  if (v0 > r || v0 != v0) { r = v0; best = 0; }
  if (v1 > r || v1 != v1) { r = v1; best = 1; }
  if (v2 > r || v2 != v2) { r = v2; best = 2; }
  if (v3 > r || v3 != v3) { r = v3; best = 3; }
  acc_t gv = LOADA(g, g_off + n * gs.s0 + c * gs.s1 + oh * gs.s2 + ow * gs.s3);
  long o = out_off + (nc * H + 2 * oh) * W + 2 * ow;
  STOREA(out, o, best == 0 ? gv : (acc_t)0);
  STOREA(out, o + 1, best == 1 ? gv : (acc_t)0);
  STOREA(out, o + W, best == 2 ? gv : (acc_t)0);
  STOREA(out, o + W + 1, best == 3 ? gv : (acc_t)0);
}
