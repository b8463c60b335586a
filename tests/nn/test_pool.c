/* ct_max_pool2d, ct_avg_pool2d, ct_adaptive_avg_pool2d against double host loops over the
 * values the inputs hold. max is exact; an average of n terms in f32 has |err| <=
 * (n + 1) u sum|x| / n (u = 2^-24; 2^-53 for f64) plus one rounding of the output (u_out |y|);
 * the test allows twice that. */
#include <math.h>
#include <stdio.h>

#include "nn_test.h"

enum { P_MAX, P_AVG, P_ADAPT };

struct pcase {
  const char *name;
  int mode;
  int64_t N, C, H, W;
  int k[2], s[2], p[2];
  bool stride_null, unbatched, transposed;
  int64_t size[2];
};

static const struct pcase cases[] = {
    {"max 2x2", P_MAX, 2, 3, 8, 8, {2, 2}, {2, 2}, {0, 0}, true, false, false, {0, 0}},
    /* the unrolled 2x2 kernel on odd sizes (the last row and column are left out) and strides */
    {"max 2x2 odd transposed", P_MAX, 2, 3, 7, 9, {2, 2}, {2, 2}, {0, 0}, false, false, true, {0, 0}},
    {"max 3x3 s2 p1", P_MAX, 2, 3, 9, 7, {3, 3}, {2, 2}, {1, 1}, false, false, false, {0, 0}},
    {"max 3x2 s1 p(1,0) transposed", P_MAX, 1, 4, 6, 5, {3, 2}, {1, 1}, {1, 0}, false, false, true, {0, 0}},
    {"avg 2x2", P_AVG, 2, 3, 7, 8, {2, 2}, {2, 2}, {0, 0}, true, false, false, {0, 0}},
    {"avg 3x3 s2 p1 (pad counted)", P_AVG, 2, 2, 9, 6, {3, 3}, {2, 1}, {1, 1}, false, false, false, {0, 0}},
    {"avg unbatched transposed", P_AVG, 1, 3, 5, 7, {3, 2}, {1, 2}, {1, 1}, false, true, true, {0, 0}},
    {"adaptive 7x9 -> 3x4", P_ADAPT, 2, 3, 7, 9, {0, 0}, {0, 0}, {0, 0}, false, false, false, {3, 4}},
    {"adaptive 5x5 -> 1x1", P_ADAPT, 2, 4, 5, 5, {0, 0}, {0, 0}, {0, 0}, false, false, true, {1, 1}},
    {"adaptive 4x6 -> 6x8 (upsampling)", P_ADAPT, 1, 2, 4, 6, {0, 0}, {0, 0}, {0, 0}, false, true, false, {6, 8}},
    {"max size-0 batch", P_MAX, 0, 3, 4, 4, {2, 2}, {2, 2}, {0, 0}, false, false, false, {0, 0}},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void run_case(ct_device *d, ct_dtype dt, const struct pcase *c) {
  ct_tensor *base, *x;
  double *xv;
  int64_t shape[4] = {c->N, c->C, c->transposed ? c->W : c->H, c->transposed ? c->H : c->W};
  if (c->unbatched) base = nt_random(d, dt, 3, shape + 1, 31, 2, NULL);
  else base = nt_random(d, dt, 4, shape, 31, 2, NULL);
  int r = c->unbatched ? 3 : 4;
  if (c->transposed) ck_assert_ct_ok(ct_transpose(&x, base, r - 2, r - 1));
  else x = ct_retain(base);
  xv = nt_read(x);
  ct_tensor *y = NULL;
  int64_t OH, OW;
  if (c->mode == P_ADAPT) {
    ck_assert_ct_ok(ct_adaptive_avg_pool2d(&y, x, c->size));
    OH = c->size[0];
    OW = c->size[1];
  } else {
    const int *s = c->stride_null ? NULL : c->s;
    if (c->mode == P_MAX) ck_assert_ct_ok(ct_max_pool2d(&y, x, c->k, s, c->p));
    else ck_assert_ct_ok(ct_avg_pool2d(&y, x, c->k, s, c->p));
    int sh = s ? s[0] : c->k[0], sw = s ? s[1] : c->k[1];
    OH = (c->H + 2 * c->p[0] - c->k[0]) / sh + 1;
    OW = (c->W + 2 * c->p[1] - c->k[1]) / sw + 1;
  }
  ck_assert_int_eq(ct_tensor_ndim(y), r);
  ck_assert_int_eq(ct_tensor_shape(y)[r - 2], OH);
  ck_assert_int_eq(ct_tensor_shape(y)[r - 1], OW);
  double *yv = nt_read(y);
  double u = dt == CT_F64 ? ldexp(1, -53) : ldexp(1, -24);
  for (int64_t nc = 0; nc < c->N * c->C; nc++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0, h1, w0, w1;
        if (c->mode == P_ADAPT) {
          h0 = oh * c->H / OH;
          h1 = ((oh + 1) * c->H + OH - 1) / OH;
          w0 = ow * c->W / OW;
          w1 = ((ow + 1) * c->W + OW - 1) / OW;
        } else {
          int sh = c->stride_null ? c->k[0] : c->s[0], sw = c->stride_null ? c->k[1] : c->s[1];
          h0 = oh * sh - c->p[0];
          w0 = ow * sw - c->p[1];
          h1 = h0 + c->k[0];
          w1 = w0 + c->k[1];
        }
        double m = -INFINITY, s = 0, a = 0;
        for (int64_t i = h0; i < h1; i++)
          for (int64_t j = w0; j < w1; j++) {
            if (i < 0 || j < 0 || i >= c->H || j >= c->W) continue;
            double v = xv[(nc * c->H + i) * c->W + j];
            m = v > m ? v : m;
            s += v;
            a += fabs(v);
          }
        double cnt = c->mode == P_AVG ? c->k[0] * c->k[1] : (double)((h1 - h0) * (w1 - w0));
        double ref = c->mode == P_MAX ? m : s / cnt, y1 = yv[(nc * OH + oh) * OW + ow];
        double tol = c->mode == P_MAX ? 0 : 2 * ((cnt + 1) * u * a / cnt + nt_unit(dt) * fabs(ref)) + 1e-30;
        ck_assert_msg(fabs(y1 - ref) <= tol, "%s %s: y[%lld, %lld, %lld] = %.9g, want %.9g", c->name,
                      ct_dtype_name(dt), (long long)nc, (long long)oh, (long long)ow, y1, ref);
      }
  free(xv);
  free(yv);
  ct_release(base);
  ct_release(x);
  ct_release(y);
}

START_TEST(test_pool_f32) { run_case(ct_test_device(), CT_F32, &cases[_i]); }
END_TEST

START_TEST(test_pool_dtypes) {
  ct_device *d = ct_test_device();
  ct_dtype dts[3] = {CT_F16, CT_BF16, CT_F64};
  for (int t = 0; t < 3; t++) {
    if (dts[t] == CT_F64 && !nt_has_f64(d)) continue;
    run_case(d, dts[t], &cases[1]);
    run_case(d, dts[t], &cases[4]);
    run_case(d, dts[t], &cases[6]);
  }
}
END_TEST

/* Inputs and output gradients whose images are not C planes apart (every other image of a
 * bigger batch: the kernels' plane offsets then divide, kernels/pool.cl POOL_PLANE) give the
 * bits of their contiguous copies, forward and backward, for each pool kernel: pool2d_max2(_bwd),
 * pool2d(_bwd) with max, average and adaptive windows. */
START_TEST(test_pool_batch_sliced) {
  ct_device *d = ct_test_device();
  int64_t shape[4] = {6, 3, 8, 6}, yshapes[4][4] = {{3, 3, 4, 3}, {3, 3, 4, 3}, {3, 3, 4, 3}, {3, 3, 2, 2}};
  for (int op = 0; op < 4; op++) {
    ct_tensor *base = nt_random(d, CT_F32, 4, shape, 81 + op, 2, NULL), *xs = NULL, *xc = NULL;
    ck_assert_ct_ok(ct_set_requires_grad(base, true));
    ck_assert_ct_ok(ct_slice(&xs, base, 0, 1, 6, 2));
    ck_assert_ct_ok(ct_contiguous(&xc, xs));
    ct_tensor *xd = NULL;
    ck_assert_ct_ok(ct_detach(&xd, xc));
    ck_assert_ct_ok(ct_set_requires_grad(xd, true));
    int64_t gshape[4] = {6, 3, yshapes[op][2], yshapes[op][3]};
    ct_tensor *gbase = nt_random(d, CT_F32, 4, gshape, 91 + op, 1, NULL), *gs = NULL, *gc = NULL;
    ck_assert_ct_ok(ct_slice(&gs, gbase, 0, 0, 6, 2));
    ck_assert_ct_ok(ct_contiguous(&gc, gs));
    ct_tensor *y[2] = {NULL, NULL}, *in[2] = {xs, xd};
    for (int v = 0; v < 2; v++) {
      if (op == 0) ck_assert_ct_ok(ct_max_pool2d(&y[v], in[v], (int[]){2, 2}, NULL, NULL));
      else if (op == 1) ck_assert_ct_ok(ct_max_pool2d(&y[v], in[v], (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}));
      else if (op == 2) ck_assert_ct_ok(ct_avg_pool2d(&y[v], in[v], (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}));
      else ck_assert_ct_ok(ct_adaptive_avg_pool2d(&y[v], in[v], (int64_t[]){2, 2}));
      ck_assert_ct_ok(ct_backward(y[v], v == 0 ? gs : gc));
    }
    double *y0 = nt_read(y[0]), *y1 = nt_read(y[1]);
    for (int64_t i = 0; i < ct_numel(y[1]); i++) ck_assert_msg(y0[i] == y1[i], "op %d: y[%lld]", op, (long long)i);
    ct_tensor *gb = NULL, *gx = NULL, *gbs = NULL;
    ck_assert_ct_ok(ct_grad(&gb, base));
    ck_assert_ct_ok(ct_grad(&gx, xd));
    ck_assert_ct_ok(ct_slice(&gbs, gb, 0, 1, 6, 2));
    double *a = nt_read(gbs), *b = nt_read(gx);
    for (int64_t i = 0; i < ct_numel(gx); i++) ck_assert_msg(a[i] == b[i], "op %d: dx[%lld]", op, (long long)i);
    free(y0), free(y1), free(a), free(b);
    ct_release(gb), ct_release(gx), ct_release(gbs), ct_release(y[0]), ct_release(y[1]);
    ct_release(base), ct_release(xs), ct_release(xc), ct_release(xd), ct_release(gbase), ct_release(gs), ct_release(gc);
  }
}
END_TEST

/* max_pool2d: a NaN in a window makes that output NaN, wherever it is in the window; -inf
 * stays -inf. */
START_TEST(test_max_pool_nan) {
  ct_device *d = ct_test_device();
  float xv[16] = {1, 2, 3, 4, NAN, 0, 5, 6, 7, 8, -INFINITY, -INFINITY, 9, 1, -INFINITY, -INFINITY};
  ct_tensor *x, *y;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 3, (int64_t[]){1, 4, 4}, xv));
  ck_assert_ct_ok(ct_max_pool2d(&y, x, (int[]){2, 2}, NULL, NULL));
  float yv[4];
  ck_assert_ct_ok(ct_to_host(y, yv, sizeof yv));
  ck_assert(isnan(yv[0]));
  ck_assert_float_eq(yv[1], 6);
  ck_assert_float_eq(yv[2], 9);
  ck_assert(isinf(yv[3]) && yv[3] < 0);
  ct_release(x);
  ct_release(y);
}
END_TEST

START_TEST(test_pool_errors) {
  ct_device *d = ct_test_device();
  ct_tensor *x, *xi, *y = (ct_tensor *)1;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 4, (int64_t[]){1, 2, 3, 4}));
  ck_assert_ct_ok(ct_zeros(&xi, d, CT_I64, 4, (int64_t[]){1, 2, 3, 4}));
  ck_assert_ct_status(ct_max_pool2d(&y, x, (int[]){4, 2}, NULL, NULL), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("ct_max_pool2d: kernel[0] = 4 is larger than the padded input size 3");
  ck_assert_ct_status(ct_avg_pool2d(&y, x, (int[]){2, 2}, NULL, (int[]){2, 0}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("padding[0] is 2");
  ck_assert_ct_status(ct_avg_pool2d(&y, x, (int[]){0, 2}, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("kernel[0] must be >= 1, got 0");
  ck_assert_ct_status(ct_max_pool2d(&y, x, (int[]){2, 2}, (int[]){1, -1}, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("stride[1] must be >= 1, got -1");
  ck_assert_ct_status(ct_max_pool2d(&y, xi, (int[]){2, 2}, NULL, NULL), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("x has dtype i64");
  ck_assert_ct_status(ct_adaptive_avg_pool2d(&y, x, (int64_t[]){-1, 2}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("size[0] must be >= 0, got -1");
  ct_tensor *v;
  ck_assert_ct_ok(ct_view(&v, x, 2, (int64_t[]){6, 4}));
  ck_assert_ct_status(ct_adaptive_avg_pool2d(&y, v, (int64_t[]){1, 1}), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("got [6, 4]");
  ct_release(v);
  /* An expanded row of 2^60 pooled to 16: the kernel's window bound (o + 1) * 2^60 overflowed
   * (issue #28); refused, naming both sizes. */
  ct_tensor *cell, *wide;
  ck_assert_ct_ok(ct_zeros(&cell, d, CT_F32, 4, (int64_t[]){1, 1, 1, 1}));
  ck_assert_ct_ok(ct_expand(&wide, cell, 4, (int64_t[]){1, 1, 1, (int64_t)1 << 60}));
  ck_assert_ct_status(ct_adaptive_avg_pool2d(&y, wide, (int64_t[]){1, 16}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("size[1] = 16 times dim 3 of x (1152921504606846976) does not fit int64");
  ck_assert_ptr_null(y);
  ct_release(wide);
  ct_release(cell);
  ct_release(x);
  ct_release(xi);
}
END_TEST

/* PyTorch's pools on the cases of tests/nn/data/gen_nn.py: max is exact; the averages of at
 * most 9 terms of |x| < 1 differ by the summation order at most 9 * 2^-24 * 9 / 9 < 1e-6. */
START_TEST(test_pool_torch) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = nt_fixture(d);
  ct_tensor *x = nt_get(st, "pool.x"), *ax = nt_get(st, "pool.ax"), *ref, *y;
  ref = nt_get(st, "pool.max");
  ck_assert_ct_ok(ct_max_pool2d(&y, x, (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}));
  nt_assert_close(y, ref, 0, 0, "max_pool2d");
  ct_release(ref), ct_release(y);
  ref = nt_get(st, "pool.avg");
  ck_assert_ct_ok(ct_avg_pool2d(&y, x, (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}));
  nt_assert_close(y, ref, 1e-6, 1e-6, "avg_pool2d");
  ct_release(ref), ct_release(y);
  ref = nt_get(st, "pool.avg_k2");
  ck_assert_ct_ok(ct_avg_pool2d(&y, x, (int[]){2, 2}, NULL, NULL));
  nt_assert_close(y, ref, 1e-6, 1e-6, "avg_pool2d k2");
  ct_release(ref), ct_release(y);
  ref = nt_get(st, "pool.adaptive");
  ck_assert_ct_ok(ct_adaptive_avg_pool2d(&y, ax, (int64_t[]){3, 4}));
  nt_assert_close(y, ref, 1e-6, 1e-6, "adaptive_avg_pool2d");
  ct_release(ref), ct_release(y);
  ct_release(x);
  ct_release(ax);
  ct_safetensors_free(st);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nn-pool");
  TCase *tc = tcase_create("pool");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_pool_f32, 0, NCASES);
  tcase_add_test(tc, test_pool_dtypes);
  tcase_add_test(tc, test_pool_batch_sliced);
  tcase_add_test(tc, test_max_pool_nan);
  tcase_add_test(tc, test_pool_errors);
  tcase_add_test(tc, test_pool_torch);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
