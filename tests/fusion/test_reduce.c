/* Fused trailing reductions (issue #16, src/fusion/): a full sum, mean, prod, max or
 * min of a recorded tensor, and softmax / log_softmax over its last dim, run in its producer's kernel (one kernel per chain, both layouts:
 * the CPU one of a work-item per chunk, and the GPU one of a tree per work-group, forced here
 * with ct__ew_gpu_paths). Compared with the same calls run eagerly (ct__fusion_override = 0):
 * max, min and integer sums and products bit for bit (their order does not matter; integers wrap
 * as reduce.cl's, both from kernels/reduce_ops.h); float sums within a
 * bound on the summation-order difference (both are blocked/pairwise, so a few ulps of the sum
 * of absolute values). A fused sum of a bool mask counts exactly (i64) past 2^24. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ct_fixture.h"
#include "ct_test.h"
#include "device/device.h"
#include "elementwise/elementwise.h"
#include "fusion/fusion.h"

static ct_tensor *from(ct_device *d, ct_dtype t, int64_t n, const void *h) {
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, t, 1, &n, h));
  return x;
}

/* A deterministic ramp with negatives, repeats and (optionally) a NaN. */
static float *ramp(int64_t n, bool nan) {
  float *h = malloc((size_t)n * sizeof *h);
  ck_assert_ptr_nonnull(h);
  for (int64_t i = 0; i < n; i++) h[i] = (float)((i * 7919) % 2003 - 1001) / 256.0f;
  if (nan && n > 3) h[n / 3] = NAN;
  return h;
}

/* A one-element result as a double (converted on the host: no f64 on the device needed). */
static double read1(const ct_tensor *r) {
  ck_assert_int_eq(ct_numel(r), 1);
  double *h = ct_test_to_doubles(r), v = h[0];
  free(h);
  return v;
}

enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN };

static ct_status reduce(ct_tensor **out, const ct_tensor *x, int op, bool keepdim) {
  switch (op) {
  case R_SUM: return ct_sum(out, x, 0, NULL, keepdim);
  case R_MEAN: return ct_mean(out, x, 0, NULL, keepdim);
  case R_PROD: return ct_prod(out, x, 0, NULL, keepdim);
  case R_MAX: return ct_max(out, x, 0, NULL, keepdim);
  default: return ct_min(out, x, 0, NULL, keepdim);
  }
}

/* op over (a - b)^2 * 0.5 (or, for prod, 1 + (a - b) / 1024 so the product stays finite),
 * the producer's intermediates released before the reduction, as a C user writes it. */
static double chain_reduce(ct_device *d, bool fused, ct_dtype dt, const ct_tensor *a, const ct_tensor *b, int op,
                           unsigned long *kernels) {
  ct__fusion_override = fused;
  ct_tensor *ac = NULL, *bc = NULL, *df = NULL, *p = NULL, *r = NULL;
  ck_assert_ct_ok(ct_cast(&ac, a, dt));
  ck_assert_ct_ok(ct_cast(&bc, b, dt));
  ck_assert_ct_ok(ct_device_synchronize(d));
  struct ct__fusion_stats s0, s1;
  ct__fusion_stats(&s0);
  ck_assert_ct_ok(ct_sub(&df, ac, bc));
  if (op == R_PROD) {
    ct_tensor *q = NULL;
    ck_assert_ct_ok(ct_div_scalar(&q, df, 1024));
    ck_assert_ct_ok(ct_add_scalar(&p, q, 1));
    ct_release(q);
  } else {
    ct_tensor *q = NULL;
    ck_assert_ct_ok(ct_mul(&q, df, df));
    ck_assert_ct_ok(ct_mul_scalar(&p, q, 0.5));
    ct_release(q);
  }
  ct_release(df);
  ck_assert_ct_ok(reduce(&r, p, op, false));
  ct_release(p);
  ck_assert_int_eq(ct_tensor_ndim(r), 0);
  ck_assert_ct_ok(ct_device_synchronize(d));
  ct__fusion_stats(&s1);
  double v = read1(r);
  if (kernels) *kernels = s1.kernels - s0.kernels;
  ct_release(r);
  ct_release(ac);
  ct_release(bc);
  return v;
}

static void check_ops(bool gpu, int64_t n) {
  ct_device *d = ct_test_device();
  ct__ew_gpu_paths = gpu;
  float *ha = ramp(n, false), *hb = ramp(n, false);
  for (int64_t i = 0; i < n; i++) hb[i] = ha[(i * 31) % n] * 0.75f;
  ct_tensor *a = from(d, CT_F32, n, ha), *b = from(d, CT_F32, n, hb);
  double abs_sum = 0;
  for (int64_t i = 0; i < n; i++) abs_sum += 0.5 * ((double)ha[i] - hb[i]) * ((double)ha[i] - hb[i]);
  for (int op = R_SUM; op <= R_MIN; op++) {
    unsigned long k = 0;
    double e = chain_reduce(d, false, CT_F32, a, b, op, NULL);
    double f = chain_reduce(d, true, CT_F32, a, b, op, &k);
    /* One kernel: the chain and its reduction (the reduction's second pass counts with it). */
    ck_assert_uint_eq(k, 1);
    if (op == R_MAX || op == R_MIN) {
      ck_assert_msg(e == f, "op %d n %lld: fused %.9g eager %.9g", op, (long long)n, f, e);
    } else if (op == R_PROD) {
      ck_assert_msg(fabs(f - e) <= 1e-4 * fabs(e), "prod n %lld: fused %.9g eager %.9g", (long long)n, f, e);
    } else {
      /* Both sum f32 values in f32 with blocking: the orders differ by at most a few hundred
       * roundings of partial sums bounded by the sum of magnitudes. */
      double bound = 1e-5 * abs_sum / (op == R_MEAN ? (double)n : 1.0);
      ck_assert_msg(fabs(f - e) <= bound, "op %d n %lld: fused %.9g eager %.9g (bound %.3g)", op, (long long)n, f,
                    e, bound);
    }
  }
  ct_release(a);
  ct_release(b);
  free(ha);
  free(hb);
  ct_test_finish();
}

/* Sizes around the CPU chunk (8192) and the GPU group, with tails. */
START_TEST(cpu_layout) {
  check_ops(false, 1);
  check_ops(false, 1000);
  check_ops(false, 8192 * 5 + 13);
}
END_TEST

START_TEST(gpu_layout) {
  check_ops(true, 7);
  check_ops(true, 1024 * 3 + 5);
}
END_TEST

/* The GPU layout's grid-stride loop (issue #27): a few groups per compute unit, each work-item
 * summing many elements, then a tree. 2^18 elements give every work-item several on a device of
 * up to a few dozen compute units (groups of up to 1024 items); a small loop budget (llvmpipe's limit, planted on whatever
 * device runs the suite) must raise the group count so that no item's loop passes it, and the
 * results stay the eager ones. */
START_TEST(gpu_grid_stride) {
  check_ops(true, ((int64_t)1 << 18) + 77); /* ends with ct_test_finish: devices are released */
  ct_device *d = ct_test_device();
  d->loop_limit = 400; /* a budget of 100 back edges per item, until check_ops' ct_shutdown */
  int64_t n = 30011;
  struct ct__fkern K;
  memset(&K, 0, sizeof K);
  K.dev = d;
  K.n = n;
  ct__red_split(&K, 64, false);
  ck_assert_int_le(K.chunk, 100);
  ck_assert_int_ge(K.parts * 64 * K.chunk, n);
  check_ops(true, n); /* ends with ct_test_finish: d is released with the planted budget */
}
END_TEST

/* max/min keep a NaN (reduce.cl's rule), in both layouts. */
START_TEST(nan_propagates) {
  ct_device *d = ct_test_device();
  for (int gpu = 0; gpu < 2; gpu++) {
    ct__ew_gpu_paths = gpu;
    int64_t n = 20000;
    float *h = ramp(n, true);
    ct_tensor *x = from(d, CT_F32, n, h);
    for (int op = R_MAX; op <= R_MIN; op++) {
      ct__fusion_override = 1;
      ct_tensor *y = NULL, *r = NULL;
      ck_assert_ct_ok(ct_abs(&y, x));
      ck_assert_ct_ok(reduce(&r, y, op, true));
      ct_release(y);
      ck_assert_int_eq(ct_tensor_ndim(r), 1); /* keepdim */
      ck_assert(isnan(read1(r)));
      ct_release(r);
    }
    ct_release(x);
    free(h);
  }
  ct_test_finish();
}
END_TEST

/* Integer sums and products wrap modulo 2^64, fused as eagerly: both take the rule from the one
 * table (kernels/reduce_ops.h), and the host computes the wrapped value through uint64_t. The
 * producer itself never overflows (values below 2^61, plus 1); the reductions do. Both
 * layouts. */
START_TEST(integer_wrap_as_eager) {
  ct_device *d = ct_test_device();
  int64_t n = 3001;
  int64_t *h = malloc((size_t)n * sizeof *h);
  ck_assert_ptr_nonnull(h);
  uint64_t sum = 0, prod = 1;
  for (int64_t i = 0; i < n; i++) {
    h[i] = ((int64_t)1 << 60) + 2 * i * 7919 - (i % 3 ? 0 : ((int64_t)1 << 61)); /* even: odd factors */
    sum += (uint64_t)h[i] + 1;
    prod *= (uint64_t)h[i] + 1;
  }
  ct_tensor *x = from(d, CT_I64, n, h);
  for (int gpu = 0; gpu < 2; gpu++) {
    ct__ew_gpu_paths = gpu;
    int64_t got[2][2];
    for (int fused = 0; fused < 2; fused++) {
      ct__fusion_override = fused;
      ct_tensor *y = NULL, *s = NULL, *p = NULL;
      ck_assert_ct_ok(ct_add_scalar(&y, x, 1));
      ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
      ck_assert_ct_ok(ct_prod(&p, y, 0, NULL, false));
      ck_assert_ct_ok(ct_to_host(s, &got[fused][0], sizeof got[fused][0]));
      ck_assert_ct_ok(ct_to_host(p, &got[fused][1], sizeof got[fused][1]));
      ct_release(y);
      ct_release(s);
      ct_release(p);
    }
    ck_assert_int_eq(got[1][0], got[0][0]);
    ck_assert_int_eq(got[1][1], got[0][1]);
    ck_assert_int_eq(got[0][0], (int64_t)sum);
    ck_assert_int_eq(got[0][1], (int64_t)prod);
  }
  ct__ew_gpu_paths = 0;
  ct_release(x);
  free(h);
  ct_test_finish();
}
END_TEST

/* Integer and bool producers: sums in i64, exact; a count of a comparison; f16 and bf16 results
 * rounded once, as the eager reduction rounds them. */
START_TEST(dtypes) {
  ct_device *d = ct_test_device();
  int64_t n = 30001;
  int32_t *hi = malloc((size_t)n * sizeof *hi);
  ck_assert_ptr_nonnull(hi);
  int64_t want = 0, count = 0;
  for (int64_t i = 0; i < n; i++) {
    hi[i] = (int32_t)((i * 2654435761u) % 200001) - 100000;
    want += (int64_t)hi[i] * 3;
    count += hi[i] > 5000;
  }
  ct_tensor *x = from(d, CT_I32, n, hi);
  for (int fused = 0; fused < 2; fused++) {
    ct__fusion_override = fused;
    ct_tensor *y = NULL, *s = NULL, *c = NULL, *cnt = NULL;
    ck_assert_ct_ok(ct_mul_scalar(&y, x, 3));
    ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
    ck_assert_int_eq(ct_tensor_dtype(s), CT_I64);
    int64_t got = 0;
    ck_assert_ct_ok(ct_to_host(s, &got, sizeof got));
    ck_assert_int_eq(got, want);
    ck_assert_ct_ok(ct_gt_scalar(&c, x, 5000));
    ck_assert_ct_ok(ct_sum(&cnt, c, 0, NULL, false));
    ck_assert_ct_ok(ct_to_host(cnt, &got, sizeof got));
    ck_assert_int_eq(got, count);
    ct_release(y);
    ct_release(s);
    ct_release(c);
    ct_release(cnt);
  }
  /* 16-bit floats: the producer rounds each value to its dtype, the reduction accumulates in
   * f32 and rounds once; max is exact, so fused and eager agree bit for bit. */
  float *hf = ramp(n, false);
  ct_tensor *xf = from(d, CT_F32, n, hf);
  ct_dtype t16[2] = {CT_F16, CT_BF16};
  for (int k = 0; k < 2; k++) {
    uint16_t bits[2];
    double means[2];
    for (int fused = 0; fused < 2; fused++) {
      ct__fusion_override = fused;
      ct_tensor *h = NULL, *y = NULL, *m = NULL, *mx = NULL;
      ck_assert_ct_ok(ct_cast(&h, xf, t16[k]));
      ck_assert_ct_ok(ct_device_synchronize(d));
      ck_assert_ct_ok(ct_mul_scalar(&y, h, 1.5));
      ck_assert_ct_ok(ct_max(&mx, y, 0, NULL, false));
      ck_assert_ct_ok(ct_mean(&m, y, 0, NULL, false));
      ck_assert_int_eq(ct_tensor_dtype(m), t16[k]);
      ck_assert_ct_ok(ct_to_host(mx, &bits[fused], 2));
      means[fused] = read1(m);
      ct_release(h);
      ct_release(y);
      ct_release(m);
      ct_release(mx);
    }
    ck_assert_uint_eq(bits[0], bits[1]);
    /* The mean's f32 sums differ by order only; after rounding to 16 bits they agree to one
     * unit of the 16-bit dtype. */
    ck_assert_msg(fabs(means[0] - means[1]) <= fabs(means[0]) * (k ? 1.0 / 128 : 1.0 / 1024) + 1e-3,
                  "dtype %d: mean eager %.9g fused %.9g", (int)t16[k], means[0], means[1]);
  }
  ct_release(x);
  ct_release(xf);
  free(hi);
  free(hf);
  ct_test_finish();
}
END_TEST

/* A producer the program keeps is stored by the reduction's kernel as well; two reductions of
 * one producer (the second reads the stored values); a strided, broadcast input; a reduction
 * over some dims only (not fused: it runs after the realize) and over all dims listed. */
START_TEST(shapes_and_outputs) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {96, 130}, n = shape[0] * shape[1];
  float *h = ramp(n, false);
  ct_tensor *x = NULL, *xt = NULL, *row = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, shape, h));
  ck_assert_ct_ok(ct_transpose(&xt, x, 0, 1)); /* [130, 96], strided */
  ck_assert_ct_ok(ct_from_host(&row, d, CT_F32, 1, &shape[0], h)); /* [96], broadcast */
  float *keep[2] = {NULL, NULL};
  double sums[2], maxs[2], part[2][130];
  for (int fused = 0; fused < 2; fused++) {
    ct__fusion_override = fused;
    ct_tensor *p = NULL, *s = NULL, *mx = NULL, *ps = NULL, *q = NULL;
    ck_assert_ct_ok(ct_add(&q, xt, row));
    ck_assert_ct_ok(ct_exp(&p, q)); /* p kept: stored by the reduction's kernel */
    ct_release(q);
    ck_assert_ct_ok(ct_sum(&s, p, 2, (const int[]){0, 1}, false));
    ck_assert_ct_ok(ct_max(&mx, p, 0, NULL, false));
    ck_assert_ct_ok(ct_sum(&ps, p, 1, (const int[]){1}, false));
    keep[fused] = malloc((size_t)n * sizeof(float));
    ck_assert_ct_ok(ct_to_host(p, keep[fused], (size_t)n * sizeof(float)));
    sums[fused] = read1(s);
    maxs[fused] = read1(mx);
    ck_assert_int_eq(ct_numel(ps), 130);
    double *ph = ct_test_to_doubles(ps);
    memcpy(part[fused], ph, sizeof part[fused]);
    free(ph);
    ct_release(p);
    ct_release(s);
    ct_release(mx);
    ct_release(ps);
  }
  ck_assert(memcmp(keep[0], keep[1], (size_t)n * sizeof(float)) == 0);
  ck_assert(maxs[0] == maxs[1]);
  ck_assert_msg(fabs(sums[0] - sums[1]) <= 1e-5 * fabs(sums[0]), "sum eager %.9g fused %.9g", sums[0], sums[1]);
  ck_assert(memcmp(part[0], part[1], sizeof part[0]) == 0);
  ct_release(x);
  ct_release(xt);
  ct_release(row);
  free(keep[0]);
  free(keep[1]);
  free(h);
  ct_test_finish();
}
END_TEST

/* Autograd records through a fused reduction: the mean's gradient is the same. */
START_TEST(autograd_through) {
  ct_device *d = ct_test_device();
  int64_t n = 5000;
  float *h = ramp(n, false);
  float *g[2];
  for (int fused = 0; fused < 2; fused++) {
    ct__fusion_override = fused;
    ct_tensor *x = from(d, CT_F32, n, h), *y = NULL, *l = NULL, *gx = NULL;
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    ck_assert_ct_ok(ct_tanh(&y, x));
    ck_assert_ct_ok(ct_mean(&l, y, 0, NULL, false));
    ck_assert_ct_ok(ct_backward(l, NULL));
    ck_assert_ct_ok(ct_grad(&gx, x));
    g[fused] = malloc((size_t)n * sizeof(float));
    ck_assert_ct_ok(ct_to_host(gx, g[fused], (size_t)n * sizeof(float)));
    ct_release(gx);
    ct_release(l);
    ct_release(y);
    ct_release(x);
  }
  ck_assert(memcmp(g[0], g[1], (size_t)n * sizeof(float)) == 0);
  free(g[0]);
  free(g[1]);
  free(h);
  ct_test_finish();
}
END_TEST

/* softmax / log_softmax over the last dim of a recorded producer: in its kernel, against the
 * eager kernels within the summation-order difference; a NaN row stays NaN; f16 and bf16
 * rounded once; the producer kept by the program stored as well; gradients the same. */
static void softmax_case(ct_device *d, ct_dtype dt, int64_t rows, int64_t cols, bool log, bool nan_row) {
  int64_t shape[2] = {rows, cols}, n = rows * cols;
  float *h = ramp(n, false);
  if (nan_row) h[cols + 3] = NAN;
  float *out[2], *kept[2];
  unsigned long kernels = 0;
  for (int fused = 0; fused < 2; fused++) {
    ct__fusion_override = fused;
    ct_tensor *x = NULL, *xc = NULL, *a = NULL, *p = NULL, *y = NULL, *yf = NULL, *pf = NULL;
    ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, shape, h));
    ck_assert_ct_ok(ct_cast(&xc, x, dt));
    ck_assert_ct_ok(ct_device_synchronize(d));
    struct ct__fusion_stats s0, s1;
    ct__fusion_stats(&s0);
    ck_assert_ct_ok(ct_mul_scalar(&a, xc, 0.75));
    ck_assert_ct_ok(ct_add_scalar(&p, a, 1)); /* p is kept: stored in the first pass */
    ct_release(a);
    ck_assert_ct_ok(log ? ct_log_softmax(&y, p, -1) : ct_softmax(&y, p, 1));
    ck_assert_ct_ok(ct_device_synchronize(d));
    ct__fusion_stats(&s1);
    if (fused) kernels = s1.kernels - s0.kernels;
    ck_assert_ct_ok(ct_cast(&yf, y, CT_F32));
    ck_assert_ct_ok(ct_cast(&pf, p, CT_F32));
    out[fused] = malloc((size_t)n * sizeof(float));
    kept[fused] = malloc((size_t)n * sizeof(float));
    ck_assert_ct_ok(ct_to_host(yf, out[fused], (size_t)n * sizeof(float)));
    ck_assert_ct_ok(ct_to_host(pf, kept[fused], (size_t)n * sizeof(float)));
    ct_tensor *all[] = {x, xc, p, y, yf, pf};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) ct_release(all[k]);
  }
  ck_assert_uint_eq(kernels, 1);
  ck_assert(memcmp(kept[0], kept[1], (size_t)n * sizeof(float)) == 0);
  /* f32: the sums of exp differ by order only (a few ulps); 16-bit results by a unit of the
   * result's last place, at most. */
  double tol = dt == CT_F32 ? 2e-6 : dt == CT_F16 ? 1.0 / 1024 : 1.0 / 128;
  for (int64_t k = 0; k < n; k++) {
    float e = out[0][k], f = out[1][k];
    if (nan_row && k / cols == 1) {
      ck_assert_msg(isnan(e) && isnan(f), "row with a NaN: eager %g fused %g", e, f);
      continue;
    }
    ck_assert_msg(fabs(e - f) <= tol * (fabs(e) + (log ? 1 : 1e-3)), "%s %s [%lld]: eager %.9g fused %.9g",
                  log ? "log_softmax" : "softmax", ct_dtype_name(dt), (long long)k, e, f);
  }
  for (int f = 0; f < 2; f++) {
    free(out[f]);
    free(kept[f]);
  }
  free(h);
}

START_TEST(softmax_fused) {
  ct_device *d = ct_test_device();
  softmax_case(d, CT_F32, 37, 100, false, true);
  softmax_case(d, CT_F32, 5, 3000, true, false);
  softmax_case(d, CT_F16, 64, 77, false, false);
  softmax_case(d, CT_BF16, 9, 130, true, false);
  ct_test_finish();
}
END_TEST

START_TEST(softmax_autograd) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {12, 50}, n = 600;
  float *h = ramp(n, false), *g[2];
  for (int fused = 0; fused < 2; fused++) {
    ct__fusion_override = fused;
    ct_tensor *x = NULL, *a = NULL, *y = NULL, *w = NULL, *l = NULL, *gx = NULL;
    ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, shape, h));
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    ck_assert_ct_ok(ct_mul_scalar(&a, x, 2));
    ck_assert_ct_ok(ct_softmax(&y, a, -1));
    ck_assert_ct_ok(ct_mul(&w, y, x));
    ck_assert_ct_ok(ct_sum(&l, w, 0, NULL, false));
    ck_assert_ct_ok(ct_backward(l, NULL));
    ck_assert_ct_ok(ct_grad(&gx, x));
    g[fused] = malloc((size_t)n * sizeof(float));
    ck_assert_ct_ok(ct_to_host(gx, g[fused], (size_t)n * sizeof(float)));
    ct_tensor *all[] = {x, a, y, w, l, gx};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) ct_release(all[k]);
  }
  for (int64_t k = 0; k < n; k++)
    ck_assert_msg(fabs(g[0][k] - g[1][k]) <= 1e-5 * (fabs(g[0][k]) + 1), "[%lld] eager %.9g fused %.9g",
                  (long long)k, g[0][k], g[1][k]);
  free(g[0]);
  free(g[1]);
  free(h);
  ct_test_finish();
}
END_TEST

/* ct_sum of a bool mask is i64 and exact (reduce.cl counts in a long). The fused reduction of
 * a comparison took its accumulator from the comparison's compute dtype (float): a count above
 * 2^24 rounded. 2^24 + 1 ones: float holds 2^24 but not 2^24 + 1. Both layouts. */
START_TEST(sum_of_mask_is_exact) {
  ct_device *d = ct_test_device();
  const int64_t n = (1 << 24) + 1;
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_ones(&x, d, CT_F16, 1, &n));
  for (int gpu = 0; gpu < 2; gpu++) {
    ct__ew_gpu_paths = gpu;
    ct__fusion_override = 1;
    ct_tensor *m = NULL, *s = NULL;
    ck_assert_ct_ok(ct_gt_scalar(&m, x, 0.5));
    ck_assert_ct_ok(ct_sum(&s, m, 0, NULL, false));
    ct_release(m);
    ck_assert_int_eq(ct_tensor_dtype(s), CT_I64);
    int64_t v = 0;
    ck_assert_ct_ok(ct_to_host(s, &v, sizeof v));
    ck_assert_msg(v == n, "layout %s: fused sum of the mask is %lld, want %lld", gpu ? "gpu" : "cpu", (long long)v,
                  (long long)n);
    ct_release(s);
  }
  ct__ew_gpu_paths = false;
  ct__fusion_override = -1;
  ct_release(x);
  ct_test_finish();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fusion-reduce");
  TCase *tc = tcase_create("reduce");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, cpu_layout);
  tcase_add_test(tc, gpu_layout);
  tcase_add_test(tc, gpu_grid_stride);
  tcase_add_test(tc, nan_propagates);
  tcase_add_test(tc, integer_wrap_as_eager);
  tcase_add_test(tc, dtypes);
  tcase_add_test(tc, shapes_and_outputs);
  tcase_add_test(tc, autograd_through);
  tcase_add_test(tc, softmax_fused);
  tcase_add_test(tc, softmax_autograd);
  tcase_add_test(tc, sum_of_mask_is_exact);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
