/* ct_conv2d / ct_conv1d against a double host loop over the values the inputs really hold.
 *
 * Bound: the GEMM (or direct) sum of K products in f32 (f64) has |err| <= gamma_K sum |x w|
 * with gamma_K ~ K u (u the compute dtype's unit roundoff, 2^-24 or 2^-53), whatever the
 * summation order (OpenBLAS, CLBlast and the direct kernel all differ); the bias adds one more
 * rounding and f16/bf16 outputs one rounding of u_out |y|. The test allows twice that:
 *   |y - ref| <= 2 (K + 2) u sum |x w| + 2 u_out |ref| + 1e-30.
 * Cases cover both paths (im2col + GEMM and the direct kernel), stride, padding, dilation,
 * groups, bias, strided inputs, unbatched inputs, the batch chunking and f16/bf16/f64, each on
 * every path the library has (the direct kernel, im2col + GEMM, the blocked direct kernel). */
#include <math.h>
#include <stdio.h>

#include "nn/nn.h"
#include "nn_test.h"

enum view { V_NONE, V_TRANSPOSE, V_SLICE, V_BATCH_SLICE };

struct ccase {
  const char *name;
  int64_t N, C, H, W, Cout, kh, kw;
  int s[2], p[2], dl[2], groups;
  bool bias, unbatched;
  enum view view;
};

static const struct ccase cases[] = {
    {"3x3 pad 1 (gemm)", 2, 8, 9, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_NONE},
    {"stride, padding, dilation", 3, 5, 11, 7, 4, 3, 2, {2, 1}, {2, 1}, {2, 3}, 1, false, false, V_NONE},
    {"groups 2 (gemm)", 2, 6, 8, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true, false, V_NONE},
    {"depthwise (direct)", 2, 6, 7, 9, 12, 3, 3, {2, 2}, {1, 1}, {1, 1}, 6, true, false, V_NONE},
    {"1x1 (direct)", 2, 4, 5, 6, 5, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, false, V_NONE},
    {"transposed x", 2, 8, 9, 7, 6, 3, 3, {1, 2}, {1, 0}, {1, 1}, 1, true, false, V_TRANSPOSE},
    {"channel-sliced x", 2, 6, 6, 6, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, false, V_SLICE},
    {"unbatched", 1, 5, 8, 6, 3, 3, 3, {1, 1}, {0, 1}, {1, 1}, 1, true, true, V_NONE},
    {"groups 2, 16 channels each, dilation 2", 2, 32, 10, 9, 32, 3, 3, {1, 1}, {2, 1}, {2, 1}, 2, true, false, V_NONE},
    {"5x5, wide row", 1, 3, 6, 40, 10, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, true, false, V_NONE},
    {"size-0 batch", 0, 4, 5, 5, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_NONE},
    /* an image of 71 padded rows of 67 floats > 4096: conv_pad fills it in 2 blocks of rows (61, 10) */
    {"batch-sliced x", 3, 4, 6, 6, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_BATCH_SLICE},
    {"large plane, transposed x", 1, 2, 70, 66, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_TRANSPOSE},
    /* Small planes: the blocked path's position blocks span images (ragged: 125 positions in
     * 3 blocks of 48), one image, 1x1 planes, odd 3x5 and 5x3 planes, no padding with dilation,
     * more padding than the window needs (output rows beyond H + ph, columns beyond W + pw),
     * groups, strided and batch-sliced x. */
    {"4x4 planes spanning blocks", 5, 3, 4, 4, 9, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_NONE},
    {"3x5 plane, one image", 1, 2, 3, 5, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_NONE},
    {"1x1 planes", 7, 3, 1, 1, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, false, V_NONE},
    {"5x3 planes, no padding, dilation 2x1", 4, 3, 5, 3, 8, 3, 3, {1, 1}, {0, 0}, {2, 1}, 1, true, false, V_NONE},
    {"1x1 window, padding 2x1", 3, 2, 3, 4, 8, 1, 1, {1, 1}, {2, 1}, {1, 1}, 1, true, false, V_NONE},
    {"4x4 planes, groups 2", 3, 4, 4, 4, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true, false, V_NONE},
    {"5x3 planes, transposed x", 3, 4, 5, 3, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_TRANSPOSE},
    {"4x4 planes, batch-sliced x", 3, 4, 4, 4, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_BATCH_SLICE},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ref[n, co, oh, ow] and absum (sum |x w| + |b|) for x [N, C, H, W] (row-major values). */
static void conv_ref(const struct ccase *c, int64_t OH, int64_t OW, const double *x, const double *w,
                     const double *b, double *ref, double *abssum) {
  int64_t cg = c->C / c->groups, og = c->Cout / c->groups;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t co = 0; co < c->Cout; co++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double s = b ? b[co] : 0, a = b ? fabs(b[co]) : 0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t i = 0; i < c->kh; i++)
              for (int64_t j = 0; j < c->kw; j++) {
                int64_t ih = oh * c->s[0] - c->p[0] + i * c->dl[0], iw = ow * c->s[1] - c->p[1] + j * c->dl[1];
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                int64_t cin = co / og * cg + ci;
                double p = x[((n * c->C + cin) * c->H + ih) * c->W + iw] * w[((co * cg + ci) * c->kh + i) * c->kw + j];
                s += p;
                a += fabs(p);
              }
          int64_t o = ((n * c->Cout + co) * OH + oh) * OW + ow;
          ref[o] = s;
          abssum[o] = a;
        }
}

/* Checks y (of dtype dt, the case's output of OH x OW) against conv_ref within the bound above. */
static void check_conv(const struct ccase *c, ct_dtype dt, const ct_tensor *y, int64_t OH, int64_t OW,
                       const double *xv, const double *wv, const double *bv) {
  int64_t n = c->N * c->Cout * OH * OW;
  double *ref = malloc(sizeof(double) * (size_t)(n + 1)), *abssum = malloc(sizeof(double) * (size_t)(n + 1));
  conv_ref(c, OH, OW, xv, wv, bv, ref, abssum);
  double *yv = nt_read(y);
  double u = dt == CT_F64 ? ldexp(1, -53) : ldexp(1, -24);
  int64_t K = c->C / c->groups * c->kh * c->kw;
  for (int64_t i = 0; i < n; i++) {
    double tol = 2 * (double)(K + 2) * u * abssum[i] + 2 * nt_unit(dt) * fabs(ref[i]) + 1e-30;
    ck_assert_msg(fabs(yv[i] - ref[i]) <= tol, "%s %s: y[%lld] = %.9g, want %.9g (tol %.3g)", c->name,
                  ct_dtype_name(dt), (long long)i, yv[i], ref[i], tol);
  }
  free(ref);
  free(abssum);
  free(yv);
}

/* x of case c as the case's view, and its logical values. */
static ct_tensor *make_x(ct_device *d, ct_dtype dt, const struct ccase *c, uint64_t seed, double **vals) {
  ct_tensor *base, *v = NULL;
  if (c->view == V_TRANSPOSE) {
    int64_t shape[4] = {c->N, c->C, c->W, c->H};
    base = nt_random(d, dt, 4, shape, seed, 1, NULL);
    ck_assert_ct_ok(ct_transpose(&v, base, 2, 3));
  } else if (c->view == V_BATCH_SLICE) {
    /* every other image: images 2 C H W apart, not C of x's channel stride */
    int64_t shape[4] = {2 * c->N, c->C, c->H, c->W};
    base = nt_random(d, dt, 4, shape, seed, 1, NULL);
    ck_assert_ct_ok(ct_slice(&v, base, 0, 1, 2 * c->N, 2));
  } else if (c->view == V_SLICE) {
    int64_t shape[4] = {c->N, 2 * c->C, c->H, c->W};
    base = nt_random(d, dt, 4, shape, seed, 1, NULL);
    ck_assert_ct_ok(ct_slice(&v, base, 1, 1, 2 * c->C, 2));
  } else if (c->unbatched) {
    int64_t shape[3] = {c->C, c->H, c->W};
    base = nt_random(d, dt, 3, shape, seed, 1, NULL);
    v = ct_retain(base);
  } else {
    int64_t shape[4] = {c->N, c->C, c->H, c->W};
    base = nt_random(d, dt, 4, shape, seed, 1, NULL);
    v = ct_retain(base);
  }
  ct_release(base);
  *vals = nt_read(v);
  return v;
}

static void run_case(ct_device *d, ct_dtype dt, const struct ccase *c) {
  double *xv, *wv, *bv = NULL;
  ct_tensor *x = make_x(d, dt, c, 11, &xv);
  int64_t wshape[4] = {c->Cout, c->C / c->groups, c->kh, c->kw};
  ct_tensor *w = nt_random(d, dt, 4, wshape, 12, 1, &wv);
  ct_tensor *b = NULL;
  if (c->bias) b = nt_random(d, dt, 1, &c->Cout, 13, 1, &bv);
  ct_tensor *y = NULL;
  ck_assert_ct_ok(ct_conv2d(&y, x, w, b, c->s, c->p, c->dl, c->groups));
  int64_t OH = (c->H + 2 * c->p[0] - c->dl[0] * (c->kh - 1) - 1) / c->s[0] + 1;
  int64_t OW = (c->W + 2 * c->p[1] - c->dl[1] * (c->kw - 1) - 1) / c->s[1] + 1;
  int64_t want[4] = {c->N, c->Cout, OH, OW};
  int rank = c->unbatched ? 3 : 4;
  ck_assert_int_eq(ct_tensor_ndim(y), rank);
  for (int i = 0; i < rank; i++) ck_assert_int_eq(ct_tensor_shape(y)[i], want[i + 4 - rank]);
  ck_assert_int_eq(ct_tensor_dtype(y), dt);
  check_conv(c, dt, y, OH, OW, xv, wv, bv);
  free(xv);
  free(wv);
  free(bv);
  ct_release(x);
  ct_release(w);
  ct_release(b);
  ct_release(y);
}

static const int k_paths[4] = {CT__CONV_AUTO, CT__CONV_DIRECT, CT__CONV_GEMM, CT__CONV_BLOCKED};

/* argv[1] "gemm": only the im2col + GEMM path, f32 (the run on the CLBlast route, whose cold
 * kernel builds are slow: f32 only keeps it to one precision of CLBlast's kernels). */
static bool g_gemm_only;
#define FOR_PATHS(p) for (int p = g_gemm_only ? 2 : 0; p < (g_gemm_only ? 3 : 4); p++)

/* Every case on every path (the blocked path falls back to the GEMM for strides > 1), and on the
 * blocked path with each register blocking (4, 8 and 16 lanes: ct__conv_blocking), whatever the
 * device's own width. */
START_TEST(test_conv2d_f32) {
  ct_device *d = ct_test_device();
  FOR_PATHS(p) {
    ct__nn_conv_path = k_paths[p];
    run_case(d, CT_F32, &cases[_i]);
  }
  for (int lanes = 4; lanes <= 16 && !g_gemm_only; lanes *= 2) {
    ct__nn_conv_path = CT__CONV_BLOCKED;
    ct__conv_lanes = lanes;
    run_case(d, CT_F32, &cases[_i]);
  }
  ct__conv_lanes = 0;
}
END_TEST

/* f16/bf16 (storage, f32 compute) and f64 on a GEMM case, a direct case and small planes. */
START_TEST(test_conv2d_dtypes) {
  ct_device *d = ct_test_device();
  ct_dtype dts[3] = {CT_F16, CT_BF16, CT_F64};
  /* a GEMM case, a direct case, small planes spanning the blocked path's position blocks */
  const int which[3] = {0, 3, 13};
  for (int t = 0; t < 3; t++) {
    if (dts[t] == CT_F64 && !nt_has_f64(d)) continue;
    for (int p = 0; p < 4; p++) {
      ct__nn_conv_path = k_paths[p];
      for (int i = 0; i < 3; i++) run_case(d, dts[t], &cases[which[i]]);
    }
  }
}
END_TEST

/* A column buffer bound of two images' columns: a batch of 5 runs in chunks of 2, 2, 1. */
START_TEST(test_conv2d_chunks) {
  ct_device *d = ct_test_device();
  struct ccase c = {"chunks", 5, 4, 6, 6, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, V_NONE};
  FOR_PATHS(p) {
    if (p < 2) continue;
    ct__nn_conv_path = k_paths[p];
    ct__nn_col_bytes = 2 * 4 * 9 * 36 * 4;  /* the GEMM path's columns; the blocked path's
                                             * padded input (4 x 8 x 8 floats) gets more */
    c.groups = 1;
    run_case(d, CT_F32, &c);
    c.groups = 2;
    run_case(d, CT_F32, &c);
    ct__nn_col_bytes = 1;  /* still one image at a time */
    run_case(d, CT_F32, &c);
    /* the blocked path's padded input in chunks of 2, 2, 1 (4 channels of 7 x 7: 784 bytes an
     * image), the last chunk's rest of each channel zeroed again */
    ct__nn_col_bytes = 2 * 4 * 7 * 7 * 4;
    run_case(d, CT_F32, &c);
  }
}
END_TEST

/* conv1d through conv2d: batched and unbatched, with groups, stride, padding, dilation. */
START_TEST(test_conv1d) {
  ct_device *d = ct_test_device();
  for (int unb = 0; unb < 2; unb++) {
    struct ccase c = {"conv1d", unb ? 1 : 2, 4, 1, 20, 6, 1, 5, {1, 2}, {0, 3}, {1, 2}, 2, true, unb, V_NONE};
    double *xv, *wv, *bv;
    int64_t xs[3] = {c.N, c.C, c.W}, ws[3] = {c.Cout, c.C / c.groups, c.kw};
    ct_tensor *x = unb ? nt_random(d, CT_F32, 2, xs + 1, 21, 1, &xv) : nt_random(d, CT_F32, 3, xs, 21, 1, &xv);
    ct_tensor *w = nt_random(d, CT_F32, 3, ws, 22, 1, &wv);
    ct_tensor *b = nt_random(d, CT_F32, 1, &c.Cout, 23, 1, &bv);
    ct_tensor *y = NULL;
    ck_assert_ct_ok(ct_conv1d(&y, x, w, b, 2, 3, 2, 2));
    int64_t OW = (20 + 6 - 2 * 4 - 1) / 2 + 1;
    ck_assert_int_eq(ct_tensor_ndim(y), unb ? 2 : 3);
    ck_assert_int_eq(ct_tensor_shape(y)[unb ? 1 : 2], OW);
    check_conv(&c, CT_F32, y, 1, OW, xv, wv, bv);
    free(xv);
    free(wv);
    free(bv);
    ct_release(x);
    ct_release(w);
    ct_release(b);
    ct_release(y);
  }
}
END_TEST

START_TEST(test_conv_errors) {
  ct_device *d = ct_test_device();
  int64_t xs[4] = {2, 3, 5, 5}, ws[4] = {4, 4, 3, 3}, w2[4] = {4, 1, 3, 3}, w3[4] = {4, 3, 7, 7}, w4[4] = {5, 1, 3, 3}, w5[4] = {3, 1, 3, 3};
  ct_tensor *x, *w, *wg, *wdw, *wbig, *wodd, *y = (ct_tensor *)1, *xi, *b;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 4, xs));
  ck_assert_ct_ok(ct_zeros(&w, d, CT_F32, 4, ws));
  ck_assert_ct_ok(ct_zeros(&wg, d, CT_F32, 4, w2));
  ck_assert_ct_ok(ct_zeros(&wdw, d, CT_F32, 4, w5));
  ck_assert_ct_ok(ct_zeros(&wbig, d, CT_F32, 4, w3));
  ck_assert_ct_ok(ct_zeros(&wodd, d, CT_F32, 4, w4));
  ck_assert_ct_ok(ct_zeros(&xi, d, CT_I32, 4, xs));
  ck_assert_ct_ok(ct_zeros(&b, d, CT_F32, 1, (int64_t[]){4}));
  ck_assert_ct_status(ct_conv2d(&y, x, w, NULL, NULL, NULL, NULL, 1), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("ct_conv2d: x has 3 channels but w expects 4 (w.shape[1] * groups)");
  ck_assert_ct_status(ct_conv2d(&y, x, wg, NULL, NULL, NULL, NULL, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("groups 2 does not divide x's 3 input channels");
  ck_assert_ct_status(ct_conv2d(&y, x, wodd, NULL, NULL, NULL, NULL, 3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("groups 3 does not divide w's 5 output channels");
  ck_assert_ct_status(ct_conv2d(&y, x, wbig, NULL, NULL, (int[]){1, 0}, NULL, 1), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("padded input size (7 x 5) is smaller than the dilated kernel size (7 x 7)");
  ck_assert_ct_status(ct_conv2d(&y, xi, xi, NULL, NULL, NULL, NULL, 1), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("x has dtype i32");
  ck_assert_ct_status(ct_conv2d(&y, x, wdw, b, NULL, NULL, NULL, 3), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("bias must be [3] (w.shape[0]), got [4]");
  ck_assert_ct_status(ct_conv2d(&y, x, wdw, NULL, (int[]){0, 1}, NULL, NULL, 3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("stride[0] must be >= 1, got 0");
  ck_assert_ct_status(ct_conv2d(&y, x, wdw, NULL, NULL, (int[]){0, -1}, NULL, 3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("padding[1] must be >= 0, got -1");
  ck_assert_ct_status(ct_conv2d(&y, b, wdw, NULL, NULL, NULL, NULL, 3), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("x must be 4-D [N, C, H, W] or 3-D [C, H, W], got [4]");
  ck_assert_ct_status(ct_conv1d(&y, x, wg, NULL, 1, 0, 1, 1), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("ct_conv1d: x must be 3-D [N, C, L] or 2-D [C, L]");
  ck_assert_ct_status(ct_conv2d(NULL, x, w, NULL, NULL, NULL, NULL, 1), CT_ERR_INVALID_ARGUMENT);
  ct_release(x);
  ct_release(w);
  ct_release(wg);
  ct_release(wdw);
  ct_release(wbig);
  ct_release(wodd);
  ct_release(xi);
  ct_release(b);
}
END_TEST

/* Huge dilation, stride, padding and kernel sizes (issue #28): the checks computed
 * dilation * (k - 1) + 1 and w.shape[1] * groups with signed overflow (UBSan flagged them for an
 * empty w of width 2^62), and the kernels index the padded input in int. Each call returns an
 * error naming the values, or the right result; none runs a kernel. */
START_TEST(test_conv_huge_arguments) {
  ct_device *d = ct_test_device();
  ct_tensor *x, *xe, *x0, *w, *wwide, *wch, *y = (ct_tensor *)1;
  int64_t big = (int64_t)1 << 62;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 4, (int64_t[]){1, 1, 5, 5}));
  ck_assert_ct_ok(ct_zeros(&w, d, CT_F32, 4, (int64_t[]){1, 1, 3, 3}));
  ck_assert_ct_ok(ct_zeros(&wwide, d, CT_F32, 4, (int64_t[]){0, 1, 1, big}));
  ck_assert_ct_ok(ct_zeros(&x0, d, CT_F32, 4, (int64_t[]){1, 0, 5, 5}));
  ck_assert_ct_ok(ct_zeros(&wch, d, CT_F32, 4, (int64_t[]){0, (int64_t)1 << 40, 1, 1}));
  /* dilation * (kw - 1) + 1 past int64. */
  ck_assert_ct_status(ct_conv2d(&y, x, wwide, NULL, NULL, NULL, (int[]){1, 4}, 1), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("dilation[1] * (k - 1) + 1 = 4 * (4611686018427387904 - 1) + 1 overflows int64");
  ck_assert_ct_status(ct_conv2d(&y, x, wwide, NULL, NULL, NULL, (int[]){1, INT32_MAX}, 1), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("overflows int64");
  /* Within int64 but larger than the input: the usual message. */
  ck_assert_ct_status(ct_conv2d(&y, x, wwide, NULL, NULL, NULL, NULL, 1), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("smaller than the dilated kernel size (1 x 4611686018427387904)");
  /* w.shape[1] * groups past int64 (x has 0 channels, which any groups divides). */
  ck_assert_ct_status(ct_conv2d(&y, x0, wch, NULL, NULL, NULL, NULL, 1 << 24), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("w.shape[1] * groups = 1099511627776 * 16777216, which overflows int64");
  /* conv1d: a dilation of INT32_MAX is a kernel of 2^32 - 1, longer than the input. */
  ct_tensor *x1, *w1;
  ck_assert_ct_ok(ct_zeros(&x1, d, CT_F32, 3, (int64_t[]){1, 1, 10}));
  ck_assert_ct_ok(ct_zeros(&w1, d, CT_F32, 3, (int64_t[]){1, 1, 3}));
  ck_assert_ct_status(ct_conv1d(&y, x1, w1, NULL, 1, 0, INT32_MAX, 1), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("padded input length 10 is smaller than the dilated kernel size 4294967295");
  /* Padding INT32_MAX with stride INT32_MAX: three outputs a row, but padded coordinates past
   * int, which the kernels index in. */
  ck_assert_ct_status(ct_conv2d(&y, x, w, NULL, (int[]){INT32_MAX, INT32_MAX}, (int[]){INT32_MAX, INT32_MAX}, NULL, 1),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("padded input size (4294967299 x 4294967299) is beyond 2^31 - 1");
  ck_assert_ct_status(ct_conv1d(&y, x1, w1, NULL, INT32_MAX, INT32_MAX, 1, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("padded input size (1 x 4294967304)");
  /* Expanded operands of 2^20 channels and a 2^20 x 2^20 kernel: one output, but an unfolded
   * input of 2^60 elements, whose byte size does not fit. */
  ct_tensor *one, *wexp;
  int64_t m = (int64_t)1 << 20;
  ck_assert_ct_ok(ct_zeros(&one, d, CT_F32, 4, (int64_t[]){1, 1, 1, 1}));
  ck_assert_ct_ok(ct_expand(&xe, one, 4, (int64_t[]){1, m, m, m}));
  ck_assert_ct_ok(ct_expand(&wexp, one, 4, (int64_t[]){1, m, m, m}));
  ck_assert_ct_status(ct_conv2d(&y, xe, wexp, NULL, NULL, NULL, NULL, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("the unfolded input (1048576 channels x 1048576 x 1048576 kernel by 1 x 1 outputs)");
  ck_assert_ptr_null(y);
  ct_release(wexp);
  ct_release(xe);
  ct_release(one);
  ct_release(w1);
  ct_release(x1);
  ct_release(wch);
  ct_release(x0);
  ct_release(wwide);
  ct_release(w);
  ct_release(x);
}
END_TEST

/* An input whose byte offset is not a whole number of elements (interop refuses such views;
 * forged here) fails with the argument named, on the direct and the im2col path, rather than
 * being read from offset 0 (conv used to ignore the failed offset conversion). */
START_TEST(test_conv_misaligned_input) {
  ct_device *d = ct_test_device();
  int64_t xs[4] = {1, 1, 3, 3}, ws[4] = {1, 1, 2, 2};
  ct_tensor *x, *w, *y = (ct_tensor *)1;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 4, xs));
  ck_assert_ct_ok(ct_zeros(&w, d, CT_F32, 4, ws));
  const int paths[2] = {CT__CONV_DIRECT, CT__CONV_GEMM};
  const char *kernels[2] = {"kernel conv_direct", "kernel conv_im2col"};
  x->storage->offset += 2;
  for (int p = 0; p < 2; p++) {
    ct__nn_conv_path = paths[p];
    ck_assert_ct_status(ct_conv2d(&y, x, w, NULL, NULL, NULL, NULL, 1), CT_ERR_OPENCL);
    ck_assert_ptr_null(y);
    ck_assert_error_contains("ct_conv2d: ");
    ck_assert_error_contains(kernels[p]);
    ck_assert_error_contains("(x) failed");
  }
  x->storage->offset -= 2;
  ct__nn_conv_path = CT__CONV_AUTO;
  ct_release(x);
  ct_release(w);
}
END_TEST

/* PyTorch's conv2d/conv1d on the cases of tests/nn/data/gen_nn.py. f32 with |x|, |w|, |b| < 1
 * and at most 144 products per output: any summation order is within 144 * 2^-24 * 145 < 1.3e-3
 * absolutely in the worst case, far less in practice; 1e-5 + 1e-4 |ref| (the GEMM-order
 * tolerance of the issue) holds with a wide margin for these sums of random signs. */
START_TEST(test_conv_torch) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = nt_fixture(d);
  FOR_PATHS(p) {
    ct__nn_conv_path = k_paths[p];
    ct_tensor *x = nt_get(st, "conv_a.x"), *w = nt_get(st, "conv_a.w"), *b = nt_get(st, "conv_a.b");
    ct_tensor *ref = nt_get(st, "conv_a.y"), *y;
    ck_assert_ct_ok(ct_conv2d(&y, x, w, b, (int[]){2, 1}, (int[]){1, 2}, (int[]){2, 1}, 2));
    nt_assert_close(y, ref, 1e-5, 1e-4, "conv_a");
    ct_release(x), ct_release(w), ct_release(b), ct_release(ref), ct_release(y);
    x = nt_get(st, "conv_b.x"), w = nt_get(st, "conv_b.w"), b = nt_get(st, "conv_b.b"), ref = nt_get(st, "conv_b.y");
    ck_assert_ct_ok(ct_conv2d(&y, x, w, b, NULL, (int[]){1, 1}, NULL, 1));
    nt_assert_close(y, ref, 1e-5, 1e-4, "conv_b");
    ct_release(x), ct_release(w), ct_release(b), ct_release(ref), ct_release(y);
    x = nt_get(st, "conv_c.x"), w = nt_get(st, "conv_c.w"), ref = nt_get(st, "conv_c.y");
    ck_assert_ct_ok(ct_conv2d(&y, x, w, NULL, (int[]){2, 2}, (int[]){1, 1}, NULL, 4));
    nt_assert_close(y, ref, 1e-5, 1e-4, "conv_c");
    ct_release(x), ct_release(w), ct_release(ref), ct_release(y);
    x = nt_get(st, "conv1d.x"), w = nt_get(st, "conv1d.w"), b = nt_get(st, "conv1d.b"), ref = nt_get(st, "conv1d.y");
    ck_assert_ct_ok(ct_conv1d(&y, x, w, b, 2, 1, 2, 2));
    nt_assert_close(y, ref, 1e-5, 1e-4, "conv1d");
    ct_release(x), ct_release(w), ct_release(b), ct_release(ref), ct_release(y);
  }
  ct_safetensors_free(st);
}
END_TEST

int main(int argc, char **argv) {
  g_gemm_only = argc > 1 && strcmp(argv[1], "gemm") == 0;
  if (g_gemm_only) ct__nn_conv_path = CT__CONV_GEMM;  /* conv1d too */
  Suite *s = suite_create("nn-conv");
  TCase *tc = tcase_create("conv");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, test_conv2d_f32, 0, NCASES);
  if (!g_gemm_only) tcase_add_test(tc, test_conv2d_dtypes);
  tcase_add_test(tc, test_conv2d_chunks);
  tcase_add_test(tc, test_conv1d);
  if (!g_gemm_only) tcase_add_test(tc, test_conv_errors);
  if (!g_gemm_only) tcase_add_test(tc, test_conv_huge_arguments);
  if (!g_gemm_only) tcase_add_test(tc, test_conv_misaligned_input);
  tcase_add_test(tc, test_conv_torch);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
