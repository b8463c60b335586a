/* Gradients of ct_conv2d, ct_conv1d and the pools: central finite differences in f64
 * (gradcheck.h) over stride, padding, dilation, groups, bias, 1x1 windows, unbatched and strided
 * inputs; the backward paths against each other (the stride-1 transposed conv and the blocked
 * weight gradient against GEMM + col2im / im2col + GEMM, f32 against f64, chunked over the batch);
 * the bits of two runs; max pooling's subgradient rule (first maximum, NaN, -inf windows) against
 * PyTorch's values; autocast to bf16. */
#include "gradcheck.h"
#include "nn/nn.h"

/* ---- conv2d / conv1d by finite differences ---- */

struct cconv {
  const char *name;
  int nd;                /* 4 (conv2d, or 3 for an unbatched conv2d) or 3/2 (conv1d) */
  bool one_d;
  int64_t xs[4], ws[4];
  int s[2], p[2], dl[2], groups;
  bool bias, strided;
};

static const struct cconv conv_cases[] = {
    {"stride 2x1, pad 1x0, bias", 4, false, {2, 2, 3, 5}, {3, 2, 2, 3}, {2, 1}, {1, 0}, {1, 1}, 1, true, false},
    {"dilation 2, groups 2, pad 1", 4, false, {1, 2, 5, 4}, {4, 1, 2, 2}, {1, 1}, {1, 1}, {2, 2}, 2, true, false},
    {"1x1, no bias, strided x", 4, false, {2, 3, 3, 3}, {2, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false, true},
    {"1x1 padding 1 (crop)", 4, false, {1, 2, 3, 3}, {2, 2, 1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {"unbatched 3x3 pad 1", 3, false, {2, 4, 4}, {2, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
    {"stride 2, dilation 2, groups 2", 4, false, {1, 4, 4, 3}, {2, 2, 2, 2}, {2, 2}, {1, 2}, {2, 1}, 2, true, false},
    {"conv1d stride 2 pad 1", 3, true, {2, 2, 6}, {3, 2, 3}, {1, 2}, {0, 1}, {1, 1}, 1, true, true},
    {"conv1d unbatched dilation 2 groups 2", 2, true, {4, 7}, {2, 2, 2}, {1, 1}, {0, 2}, {1, 2}, 2, true, false},
};

static ct_status f_conv(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct cconv *c = ctx;
  ct_tensor *b = c->bias ? in[2] : NULL;
  if (c->one_d) return ct_conv1d(out, in[0], in[1], b, c->s[1], c->p[1], c->dl[1], c->groups);
  return ct_conv2d(out, in[0], in[1], b, c->s, c->p, c->dl, c->groups);
}

static void conv_inputs(gc_input in[3], double *xv, double *wv, double *bv, const struct cconv *c) {
  in[0] = (gc_input){.ndim = c->nd, .data = xv, .requires_grad = true, .strided = c->strided};
  int wnd = c->one_d ? 3 : 4;
  in[1] = (gc_input){.ndim = wnd, .data = wv, .requires_grad = true};
  memcpy(in[0].shape, c->xs, sizeof c->xs);
  memcpy(in[1].shape, c->ws, sizeof c->ws);
  in[2] = (gc_input){.ndim = 1, .shape = {c->ws[0]}, .data = bv, .requires_grad = true};
  gc_fill(xv, gc_numel(&in[0]), -1, 1, 11);
  gc_fill(wv, gc_numel(&in[1]), -1, 1, 12);
  gc_fill(bv, c->ws[0], -1, 1, 13);
}

START_TEST(conv_gradcheck) {
  ct_device *d = ct_test_device();
  const struct cconv *c = &conv_cases[_i];
  double xv[64], wv[64], bv[8];
  gc_input in[3];
  conv_inputs(in, xv, wv, bv, c);
  ck_assert_int_le(gc_numel(&in[0]), 64);
  ck_assert_int_le(gc_numel(&in[1]), 64);
  gc_check(d, c->name, f_conv, (void *)c, c->bias ? 3 : 2, in);
}
END_TEST

/* ---- the backward paths against each other, and the bits of two runs ---- */

/* gc_make of dtype dt (bf16: made as f32, then cast). */
static ct_tensor *make_as(ct_device *d, gc_input *in, ct_dtype dt) {
  in->dtype = dt == CT_BF16 ? CT_F32 : dt;
  ct_tensor *t = gc_make(d, in);
  if (dt == CT_BF16) {
    ct_tensor *c = NULL;
    ck_assert_ct_ok(ct_cast(&c, t, CT_BF16));
    ct_release(t);
    t = c;
  }
  return t;
}

/* conv_grads' loss: sum(y * g) with a random g (false), or sum(y). */
static bool sum_loss;

/* Gradients of L = sum(conv(x, w, b) * gw) for x, w, b of dtype dt (values from host doubles),
 * as host doubles in gx/gw/gb (malloc'ed). */
static void conv_grads(ct_device *d, ct_dtype dt, const struct cconv *c, double **gx, double **gw, double **gb) {
  gc_input in[3];
  int64_t nx = 1, nw = 1;
  for (int i = 0; i < c->nd; i++) nx *= c->xs[i];
  for (int i = 0; i < (c->one_d ? 3 : 4); i++) nw *= c->ws[i];
  double *xv = malloc(sizeof(double) * (size_t)nx), *wv = malloc(sizeof(double) * (size_t)nw),
         *bv = malloc(sizeof(double) * (size_t)c->ws[0]);
  in[0] = (gc_input){.ndim = c->nd, .data = xv, .strided = c->strided, .dtype = dt};
  in[1] = (gc_input){.ndim = c->one_d ? 3 : 4, .data = wv, .dtype = dt};
  in[2] = (gc_input){.ndim = 1, .shape = {c->ws[0]}, .data = bv, .dtype = dt};
  memcpy(in[0].shape, c->xs, sizeof c->xs);
  memcpy(in[1].shape, c->ws, sizeof c->ws);
  gc_fill(xv, nx, -1, 1, 21);
  gc_fill(wv, nw, -1, 1, 22);
  gc_fill(bv, c->ws[0], -1, 1, 23);
  ct_tensor *t[3];
  for (int i = 0; i < 3; i++) {
    t[i] = make_as(d, &in[i], dt);
    ck_assert_ct_ok(ct_set_requires_grad(t[i], true));
  }
  ct_tensor *y = NULL, *g = NULL;
  ck_assert_ct_ok(f_conv(&y, t, (void *)c));
  int64_t ny = ct_numel(y);
  double *gv = malloc(sizeof(double) * (size_t)ny);
  gc_fill(gv, ny, -1, 1, 24);
  gc_input gi = {.ndim = ct_tensor_ndim(y), .data = gv, .dtype = dt};
  memcpy(gi.shape, ct_tensor_shape(y), sizeof(int64_t) * (size_t)gi.ndim);
  g = make_as(d, &gi, dt);
  if (sum_loss) {
    /* L = sum(y): the output gradient reaches the conv as an expanded view (stride 0). */
    ct_tensor *L = NULL;
    ck_assert_ct_ok(ct_sum(&L, y, 0, NULL, false));
    ck_assert_ct_ok(ct_backward(L, NULL));
    ct_release(L);
  } else {
    ck_assert_ct_ok(ct_backward(y, g));
  }
  double **outs[3] = {gx, gw, gb};
  for (int i = 0; i < 3; i++) {
    ct_tensor *gr = NULL;
    ck_assert_ct_ok(ct_grad(&gr, t[i]));
    ck_assert_ptr_nonnull(gr);
    *outs[i] = gc_host(gr);
    ct_release(gr);
    ct_release(t[i]);
  }
  ct_release(g);
  ct_release(y);
  free(gv);
  free(xv);
  free(wv);
  free(bv);
}

/* |a - b| <= tol * max |b| over n values. */
static void assert_close(const char *what, const double *a, const double *b, int64_t n, double tol) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(b[i]));
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabs(a[i] - b[i]) <= tol * m + 1e-300, "%s: element %lld: %.9g against %.9g (max %.3g)", what,
                  (long long)i, a[i], b[i], m);
}

/* Bigger than the gradchecks, for the blocked kernels: 8 output channels per group and more
 * (3x3 pad 1, dilation 2 with groups 2, a 1x1, a strided x, conv1d) and fewer (depthwise, and
 * 5 per group with a tap count that leaves a partial block of 3). */
static const struct cconv path_cases[] = {
    {"3x3 pad 1", 4, false, {3, 5, 7, 6}, {9, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {"dilation 2 groups 2 pad 2", 4, false, {2, 4, 9, 8}, {16, 2, 3, 2}, {1, 1}, {2, 1}, {2, 2}, 2, true, true},
    {"1x1", 4, false, {2, 6, 5, 5}, {8, 6, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true, false},
    {"conv1d k5 pad 2", 3, true, {2, 4, 11}, {8, 4, 5}, {1, 1}, {0, 2}, {1, 1}, 1, true, false},
    {"depthwise 3x3 pad 1 (1 channel per group)", 4, false, {2, 4, 5, 5}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4,
     true, false},
    {"5 channels per group, 7 taps", 4, false, {2, 2, 6, 5}, {10, 1, 1, 7}, {1, 1}, {0, 3}, {1, 1}, 2, true, false},
    /* Small planes, whose position blocks and 16-position vectors span images in the blocked
     * kernels' tall layout: 4x4 (a partial channel block of 4), 1x1 with one image, 3x5 with
     * more padding than the window needs (output rows and columns beyond the padded input's,
     * the input gradient through a cropped g), 8x8 with groups and a strided x. */
    {"4x4 planes, 12 channels", 4, false, {5, 6, 4, 4}, {12, 6, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {"1x1 plane, one image", 4, false, {1, 8, 1, 1}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {"3x5, 1x1 window padding 2x1", 4, false, {3, 4, 3, 5}, {8, 4, 1, 1}, {1, 1}, {2, 1}, {1, 1}, 1, true, false},
    {"8x8 groups 2, strided x", 4, false, {4, 4, 8, 8}, {16, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true, true},
};

static int64_t prod(const int64_t *s, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= s[i];
  return p;
}

/* Each of the gradients gx, gw, gb of case c close to rx, rw, rb (assert_close with tol); frees
 * gx, gw, gb. */
static void grads_close(const char *what, const struct cconv *c, double *gx, double *gw, double *gb, const double *rx,
                        const double *rw, const double *rb, double tol) {
  char m[128];
  snprintf(m, sizeof m, "%s: gx", what);
  assert_close(m, gx, rx, prod(c->xs, c->nd), tol);
  snprintf(m, sizeof m, "%s: gw", what);
  assert_close(m, gw, rw, prod(c->ws, c->one_d ? 3 : 4), tol);
  snprintf(m, sizeof m, "%s: gb", what);
  assert_close(m, gb, rb, c->ws[0], tol);
  free(gx);
  free(gw);
  free(gb);
}

/* The gradients conv_grads computes, from the same values, in double on the host by the
 * definition (direct loops): y[n, o, i, j] = b[o] + sum over the group's channels and the taps
 * of x[n, c, i s - p + k dl, ...] w[o, c, k, ...]. The reference of the path checks below. */
static void conv_grads_host(const struct cconv *c, double **gx, double **gw, double **gb) {
  const bool batched = c->nd == (c->one_d ? 3 : 4);
  const int64_t N = batched ? c->xs[0] : 1, C = c->xs[batched ? 1 : 0];
  const int64_t H = c->one_d ? 1 : c->xs[c->nd - 2], W = c->xs[c->nd - 1];
  const int64_t O = c->ws[0], Cg = c->ws[1], KH = c->one_d ? 1 : c->ws[2], KW = c->ws[c->one_d ? 2 : 3];
  const int64_t sh = c->one_d ? 1 : c->s[0], sw = c->s[1], ph = c->one_d ? 0 : c->p[0], pw = c->p[1];
  const int64_t dh = c->one_d ? 1 : c->dl[0], dw = c->dl[1], Og = O / c->groups;
  const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  const int64_t nx = N * C * H * W, nw = O * Cg * KH * KW, ny = N * O * OH * OW;
  double *xv = malloc(sizeof(double) * (size_t)nx), *wv = malloc(sizeof(double) * (size_t)nw),
         *bv = malloc(sizeof(double) * (size_t)O), *gv = malloc(sizeof(double) * (size_t)ny);
  *gx = calloc((size_t)nx, sizeof(double));
  *gw = calloc((size_t)nw, sizeof(double));
  *gb = calloc((size_t)O, sizeof(double));
  ck_assert(xv && wv && bv && gv && *gx && *gw && *gb);
  gc_fill(xv, nx, -1, 1, 21); /* conv_grads' seeds */
  gc_fill(wv, nw, -1, 1, 22);
  gc_fill(bv, O, -1, 1, 23);
  gc_fill(gv, ny, -1, 1, 24);
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t i = 0; i < OH; i++)
        for (int64_t j = 0; j < OW; j++) {
          const double g = sum_loss ? 1 : gv[((n * O + o) * OH + i) * OW + j];
          (*gb)[o] += g;
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t kh = 0; kh < KH; kh++)
              for (int64_t kw = 0; kw < KW; kw++) {
                const int64_t ih = i * sh - ph + kh * dh, iw = j * sw - pw + kw * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t xi = ((n * C + o / Og * Cg + ci) * H + ih) * W + iw, wi = ((o * Cg + ci) * KH + kh) * KW + kw;
                (*gx)[xi] += g * wv[wi];
                (*gw)[wi] += g * xv[xi];
              }
        }
  free(xv);
  free(wv);
  free(bv);
  free(gv);
}

/* The reference gradients of case c: the host's (conv_grads_host); where the device has f64,
 * its f64 gradients are checked against them first (summation orders differ: 1e-12 of the
 * largest magnitude). */
static void conv_reference(ct_device *d, const struct cconv *c, double **rx, double **rw, double **rb) {
  conv_grads_host(c, rx, rw, rb);
  if (!ct_test_fp64(d, "f64 conv gradients against the host's")) return;
  double *gx, *gw, *gb;
  conv_grads(d, CT_F64, c, &gx, &gw, &gb);
  grads_close("f64 against the host", c, gx, gw, gb, *rx, *rw, *rb, 1e-12);
}

/* f32 on the automatic paths (the transposed conv on the blocked kernel and the blocked weight
 * gradient on CPU devices) and on the forced GEMM paths, chunked one image at a time, against
 * the host's double (conv_reference). Tolerance: each gradient element is a sum of at most a few
 * hundred products of values in [-1, 1] accumulated in f32 (u = 6e-8): 1e-5 of the largest
 * magnitude covers K u. */
START_TEST(conv_paths_agree) {
  ct_device *d = ct_test_device();
  const struct cconv *c = &path_cases[_i];
  double *rx, *rw, *rb;
  conv_reference(d, c, &rx, &rw, &rb);
  for (int mode = 0; mode < 8; mode++) {
    /* auto, GEMM, auto one image at a time, GEMM one image at a time, auto with an image group
     * per image (the blocked weight gradient's partial sums), auto with the blocked kernels'
     * 4-, 8- and 16-lane register blockings (ct__conv_blocking) */
    ct__conv_lanes = mode >= 5 ? 4 << (mode - 5) : 0;
    ct__nn_conv_bwd_path = mode % 2 == 0 || mode >= 5 ? CT__CONV_BWD_AUTO : CT__CONV_BWD_GEMM;
    ct__nn_col_bytes = mode == 2 || mode == 3 ? 1 : (int64_t)64 << 20;
    ct__nn_wgrad_positions = mode == 4 ? 1 : 1024;
    ct__nn_wgrad_group_bytes = mode == 4 ? 1 : (int64_t)1 << 20;
    double *gx, *gw, *gb;
    conv_grads(d, CT_F32, c, &gx, &gw, &gb);
    char what[96];
    snprintf(what, sizeof what, "%s mode %d", c->name, mode);
    grads_close(what, c, gx, gw, gb, rx, rw, rb, 1e-5);
  }
  ct__conv_lanes = 0;
  ct__nn_conv_bwd_path = CT__CONV_BWD_AUTO;
  ct__nn_col_bytes = (int64_t)64 << 20;
  ct__nn_wgrad_positions = 1024;
  ct__nn_wgrad_group_bytes = (int64_t)1 << 20;
  free(rx);
  free(rw);
  free(rb);
}
END_TEST

/* An output gradient that is a stride-0 view (the backward of sum) on the automatic f32 paths
 * and the forced GEMM paths, against the host's double (tolerance as conv_paths_agree). */
START_TEST(conv_expanded_grad) {
  ct_device *d = ct_test_device();
  const struct cconv *c = &path_cases[0];
  sum_loss = true;
  double *rx, *rw, *rb, *gx, *gw, *gb;
  conv_reference(d, c, &rx, &rw, &rb);
  for (int mode = 0; mode < 2; mode++) {
    ct__nn_conv_bwd_path = mode == 0 ? CT__CONV_BWD_AUTO : CT__CONV_BWD_GEMM;
    conv_grads(d, CT_F32, c, &gx, &gw, &gb);
    grads_close(mode == 0 ? "sum loss, auto" : "sum loss, gemm", c, gx, gw, gb, rx, rw, rb, 1e-5);
  }
  ct__nn_conv_bwd_path = CT__CONV_BWD_AUTO;
  sum_loss = false;
  free(rx);
  free(rw);
  free(rb);
}
END_TEST

/* Two runs give the same bits (no atomics, fixed summation orders), on each path. */
START_TEST(conv_deterministic) {
  ct_device *d = ct_test_device();
  const struct cconv *c = &path_cases[1];
  int64_t nx = prod(c->xs, c->nd), nw = prod(c->ws, 4);
  for (int mode = 0; mode < 2; mode++) {
    ct__nn_conv_bwd_path = mode == 0 ? CT__CONV_BWD_AUTO : CT__CONV_BWD_GEMM;
    double *gx[2], *gw[2], *gb[2];
    for (int r = 0; r < 2; r++) conv_grads(d, CT_F32, c, &gx[r], &gw[r], &gb[r]);
    ck_assert(memcmp(gx[0], gx[1], sizeof(double) * (size_t)nx) == 0);
    ck_assert(memcmp(gw[0], gw[1], sizeof(double) * (size_t)nw) == 0);
    ck_assert(memcmp(gb[0], gb[1], sizeof(double) * (size_t)c->ws[0]) == 0);
    for (int r = 0; r < 2; r++) {
      free(gx[r]);
      free(gw[r]);
      free(gb[r]);
    }
  }
  ct__nn_conv_bwd_path = CT__CONV_BWD_AUTO;
}
END_TEST

/* ---- pooling by finite differences ---- */

struct cpool {
  const char *name;
  int mode; /* CT__POOL_MAX, _AVG, _ADAPTIVE */
  int nd;
  int64_t xs[4];
  int k[2], s[2], p[2];
  int64_t size[2];
  bool strided;
};

static const struct cpool pool_cases[] = {
    {"max 3x3 stride 2 pad 1 (overlapping)", CT__POOL_MAX, 4, {1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, false},
    {"max 2x3 stride 1x2, strided x", CT__POOL_MAX, 4, {2, 1, 4, 5}, {2, 3}, {1, 2}, {0, 0}, {0, 0}, true},
    {"max 2x2 (unrolled kernels), unbatched", CT__POOL_MAX, 3, {2, 4, 6}, {2, 2}, {2, 2}, {0, 0}, {0, 0}, false},
    {"max 2x2, odd H and W, strided x", CT__POOL_MAX, 4, {1, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0}, {0, 0}, true},
    {"avg 3x3 stride 2 pad 1", CT__POOL_AVG, 4, {1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, false},
    {"avg 2x3 stride 2x1 pad 0x1, strided x, last row unused", CT__POOL_AVG, 4, {1, 2, 5, 4}, {2, 3}, {2, 1}, {0, 1}, {0, 0},
     true},
    {"adaptive 4x5 -> 3x3 (overlapping)", CT__POOL_ADAPTIVE, 4, {2, 1, 4, 5}, {0, 0}, {0, 0}, {0, 0}, {3, 3}, false},
    {"adaptive unbatched 5x4 -> 2x3, strided", CT__POOL_ADAPTIVE, 3, {2, 5, 4}, {0, 0}, {0, 0}, {0, 0}, {2, 3}, true},
    {"adaptive to 1x1", CT__POOL_ADAPTIVE, 4, {2, 3, 3, 2}, {0, 0}, {0, 0}, {0, 0}, {1, 1}, false},
};

static ct_status f_pool(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct cpool *c = ctx;
  if (c->mode == CT__POOL_MAX) return ct_max_pool2d(out, in[0], c->k, c->s, c->p);
  if (c->mode == CT__POOL_AVG) return ct_avg_pool2d(out, in[0], c->k, c->s, c->p);
  return ct_adaptive_avg_pool2d(out, in[0], c->size);
}

START_TEST(pool_gradcheck) {
  ct_device *d = ct_test_device();
  const struct cpool *c = &pool_cases[_i];
  gc_input in = {.ndim = c->nd, .requires_grad = true, .strided = c->strided};
  memcpy(in.shape, c->xs, sizeof c->xs);
  double v[64];
  int64_t n = gc_numel(&in);
  ck_assert_int_le(n, 64);
  /* Distinct values far apart (a permutation of a spaced grid), so that no finite step moves a
   * window's maximum. */
  for (int64_t i = 0; i < n; i++) v[i] = 0.05 * (double)((i * 37 + 11) % n) - 1;
  in.data = v;
  gc_check(d, c->name, f_pool, (void *)c, 1, &in);
}
END_TEST

/* The pools' gradients for an output gradient that is a stride-0 view (the backward of sum):
 * every window's 1 reaches its maximum (2x2 max) or spreads evenly (global average). */
START_TEST(pool_expanded_grad) {
  ct_device *d = ct_test_device();
  int64_t xs[4] = {1, 2, 3, 4};
  double xv[24];
  for (int i = 0; i < 24; i++) xv[i] = (double)((i * 7) % 24);
  for (int which = 0; which < 2; which++) {
    ct_tensor *x = gc_from(d, 4, xs, xv), *y = NULL, *L = NULL, *gx = NULL;
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    int two[2] = {2, 2};
    int64_t one[2] = {1, 1};
    ck_assert_ct_ok(which == 0 ? ct_max_pool2d(&y, x, two, two, NULL) : ct_adaptive_avg_pool2d(&y, x, one));
    ck_assert_ct_ok(ct_sum(&L, y, 0, NULL, false));
    ck_assert_ct_ok(ct_backward(L, NULL));
    ck_assert_ct_ok(ct_grad(&gx, x));
    double *r = gc_host(gx);
    /* 1/12 as the device divides in f32 (not always correctly rounded): within gc_tol's 1e-6 */
    const double tol = gc_tol(ct_tensor_dtype(gx), 0);
    for (int c = 0; c < 2; c++)
      for (int h = 0; h < 3; h++)
        for (int w = 0; w < 4; w++) {
          double want = 1.0 / 12;
          if (which == 0) {
            /* the maximum of the 2x2 window holding (h, w); row 2 is in no window */
            want = 0;
            if (h < 2) {
              int bi = 0, bj = w / 2 * 2;
              double best = -1;
              for (int i = 0; i < 2; i++)
                for (int j = w / 2 * 2; j < w / 2 * 2 + 2; j++)
                  if (xv[c * 12 + i * 4 + j] > best) best = xv[c * 12 + i * 4 + j], bi = i, bj = j;
              want = bi == h && bj == w ? 1 : 0;
            }
          }
          ck_assert_msg(fabs(r[c * 12 + h * 4 + w] - want) <= tol, "pool %d at (%d, %d, %d): %g, want %g", which, c,
                        h, w, r[c * 12 + h * 4 + w], want);
        }
    free(r);
    ct_release(gx);
    ct_release(L);
    ct_release(y);
    ct_release(x);
  }
}
END_TEST

/* Max pooling's gradient goes to the first maximum of each window (NaN: the last NaN; a window
 * of -inf: its first element), as PyTorch's max_pool2d_with_indices. Expected values are
 * PyTorch 2.15's (x.grad after y.backward(1, 2, ... numel)). */
START_TEST(max_pool_subgradient) {
  ct_device *d = ct_test_device();
  const double nan = NAN, inf = INFINITY;
  struct {
    int64_t h, w;
    double x[8];
    int k[2], s[2], p[2];
    double want[8];
  } cases[] = {
      {2, 4, {1, 1, 0, 2, 1, 0, 2, 2}, {2, 2}, {2, 2}, {0, 0}, {1, 0, 0, 2, 0, 0, 0, 0}},
      {1, 3, {3, 3, 3}, {1, 2}, {1, 1}, {0, 0}, {1, 2, 0}},
      {1, 4, {nan, 1, nan, 2}, {1, 4}, {1, 1}, {0, 0}, {0, 0, 1, 0}},
      {2, 2, {nan, 1, nan, 2}, {2, 2}, {2, 2}, {0, 0}, {0, 0, 1, 0}},
      {2, 2, {-inf, -inf, -inf, -inf}, {2, 2}, {1, 1}, {1, 1}, {12, 9, 15, 9}},
      {2, 3, {5, 1, 1, 1, 1, 5}, {2, 2}, {1, 1}, {1, 1}, {14, 3, 4, 19, 0, 38}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t xs[4] = {1, 1, cases[c].h, cases[c].w};
    ct_tensor *x = gc_from(d, 4, xs, cases[c].x), *y = NULL, *g = NULL, *gx = NULL;
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    ck_assert_ct_ok(ct_max_pool2d(&y, x, cases[c].k, cases[c].s, cases[c].p));
    int64_t ny = ct_numel(y);
    double gv[16];
    for (int64_t i = 0; i < ny; i++) gv[i] = (double)(i + 1);
    g = gc_from(d, 4, ct_tensor_shape(y), gv);
    ck_assert_ct_ok(ct_backward(y, g));
    ck_assert_ct_ok(ct_grad(&gx, x));
    double *r = gc_host(gx);
    for (int64_t i = 0; i < xs[2] * xs[3]; i++)
      ck_assert_msg(r[i] == cases[c].want[i], "case %zu element %lld: %g, PyTorch %g", c, (long long)i, r[i],
                    cases[c].want[i]);
    free(r);
    ct_release(gx);
    ct_release(g);
    ct_release(y);
    ct_release(x);
  }
}
END_TEST

/* ---- bf16 and autocast ---- */

/* bf16 leaves: the gradients (bf16) close to f32's. bf16 keeps 8 significant bits (u = 2^-8);
 * the inputs, the output gradient, the conv's result and each gradient are rounded to it once
 * and the sums run in f32, so a few u of the largest magnitude bound the difference: 3e-2
 * (about 8 u). Under ct_autocast_set_dtype(CT_BF16), conv2d and conv1d of f32 inputs return bf16 and,
 * once casts record their backward, their gradients reach the f32 leaves as f32, as close. */
START_TEST(bf16_and_autocast) {
  ct_device *d = ct_test_device();
  const struct cconv *cs[2] = {&path_cases[0], &path_cases[3]};
  for (int k = 0; k < 2; k++) {
    const struct cconv *c = cs[k];
    double *rx, *rw, *rb, *gx, *gw, *gb;
    conv_grads(d, CT_F32, c, &rx, &rw, &rb);
    conv_grads(d, CT_BF16, c, &gx, &gw, &gb);
    grads_close("bf16", c, gx, gw, gb, rx, rw, rb, 3e-2);

    ck_assert_ct_ok(ct_autocast_set_dtype(CT_BF16));
    ct_tensor *x = NULL, *w = NULL, *y = NULL, *xc = NULL;
    int64_t xs[4] = {1, 2, 3, 3}, ws[4] = {2, 2, 2, 2};
    ck_assert_ct_ok(ct_ones(&x, d, CT_F32, c->one_d ? 3 : 4, xs));
    ck_assert_ct_ok(ct_ones(&w, d, CT_F32, c->one_d ? 3 : 4, ws));
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    ck_assert_ct_ok(c->one_d ? ct_conv1d(&y, x, w, NULL, 1, 0, 1, 1) : ct_conv2d(&y, x, w, NULL, NULL, NULL, NULL, 1));
    ck_assert_int_eq(ct_tensor_dtype(y), CT_BF16);
    ck_assert_ct_ok(ct_cast(&xc, x, CT_BF16));
    bool casts_record = ct_requires_grad(xc);
    ct_release(xc);
    ct_release(y);
    ct_release(x);
    ct_release(w);
    if (casts_record) {
      conv_grads(d, CT_F32, c, &gx, &gw, &gb);
      grads_close("autocast", c, gx, gw, gb, rx, rw, rb, 3e-2);
    }
    ck_assert_ct_ok(ct_autocast_set_dtype(CT_F32));
    free(rx);
    free(rw);
    free(rb);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-conv");
  TCase *tc = tcase_create("conv");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, conv_gradcheck, 0, (int)(sizeof conv_cases / sizeof conv_cases[0]));
  tcase_add_loop_test(tc, conv_paths_agree, 0, (int)(sizeof path_cases / sizeof path_cases[0]));
  tcase_add_test(tc, conv_deterministic);
  tcase_add_test(tc, conv_expanded_grad);
  tcase_add_loop_test(tc, pool_gradcheck, 0, (int)(sizeof pool_cases / sizeof pool_cases[0]));
  tcase_add_test(tc, max_pool_subgradient);
  tcase_add_test(tc, pool_expanded_grad);
  tcase_add_test(tc, bf16_and_autocast);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
