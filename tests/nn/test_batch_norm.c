/* ct_batch_norm's blocked statistics (kernels/norm.cl: bn_part cuts each channel's N S elements
 * into blocks of at least 512, bn_stats merges the blocks' means and M2 with Chan's formula,
 * bn_bwd_stats sums the backward's blocks): channels of several blocks, the last one ragged
 * and cut mid-row, up to 71 blocks (a deep merge), contiguous and strided (permuted) x, large
 * values with a small spread, rows that bn_apply and bn_bwd_apply split into chunks, f32, bf16
 * (f32 parameters) and f64. The forward's y and running
 * statistics and the backward's dx, dweight and dbias against f64 host loops over the values
 * the tensors hold.
 *
 * Bounds (u: the unit roundoff of the computing type, f32 for bf16; M = N S): a cascade sum of
 * M terms (blocks of 16, merged pairwise, then the blocks of a channel) adds each term through
 * at most L = 2 log2(M) + 24 roundings, so the mean is within e_m = L u max|x| and a sum of
 * terms t within L u sum|t|. M2 around a mean off by e_m moves by at most 2 e_m sum|x - mean|
 * + M e_m^2, so the variance is within rv = 2 (L u + (2 e_m std + e_m^2) / var) relative (twice
 * the bound). A sum-of-squares variance of the large-value case (x about 1000, var 1/3) would
 * be off by about u E[x^2] / var, over 10 times rv there. Every check allows twice its bound. */
#include <math.h>
#include <stdio.h>

#include "nn_test.h"

struct bn_case {
  ct_dtype dt, pdt;
  int64_t shape[4]; /* N, C, H, W */
  bool permuted;    /* x as [N, C, H, W] over [H, N, W, C] memory: strided spatial dims */
  double offset, spread;
};

static const struct bn_case cases[] = {
    /* 5 blocks of 512 (the last one 64) per channel */
    {CT_F32, CT_F32, {33, 3, 8, 8}, false, 0, 3},
    /* 2 blocks (512, 181), the cut inside a row of 99, strided x */
    {CT_F32, CT_F32, {7, 2, 9, 11}, true, 0, 3},
    /* large values with a small spread; 4 blocks, cuts inside rows of 100 */
    {CT_F32, CT_F32, {16, 2, 10, 10}, false, 1000, 1},
    /* 71 blocks, the last one 160 */
    {CT_F32, CT_F32, {40, 2, 30, 30}, false, 10, 1},
    /* rows longer than 2048: bn_apply and bn_bwd_apply split each in 2 chunks */
    {CT_F32, CT_F32, {2, 2, 50, 50}, false, 0, 3},
    {CT_F32, CT_F32, {3, 2, 45, 50}, true, 0, 3},
    {CT_BF16, CT_F32, {33, 3, 8, 8}, false, 0, 3},
    {CT_F64, CT_F64, {7, 2, 9, 11}, true, 0, 3},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* x as the case lays it out; *leaf gets the tensor that requires grad (x itself, or the
 * memory x permutes). */
static ct_tensor *make_x(ct_device *d, const struct bn_case *c, ct_tensor **leaf) {
  int64_t bs[4] = {c->shape[2], c->shape[0], c->shape[3], c->shape[1]};
  ct_tensor *r = nt_random(d, c->dt, 4, c->permuted ? bs : c->shape, 71, c->spread, NULL), *base = NULL, *x = NULL;
  if (c->offset != 0) ck_assert_ct_ok(ct_add_scalar(&base, r, c->offset));
  else base = ct_retain(r);
  ct_release(r);
  ck_assert_ct_ok(ct_set_requires_grad(base, true));
  if (c->permuted) ck_assert_ct_ok(ct_permute(&x, base, (int[]){1, 3, 0, 2}));
  else x = ct_retain(base);
  *leaf = base;
  return x;
}

/* x's gradient in x's order (the leaf's, permuted like x). */
static double *read_dx(const struct bn_case *c, ct_tensor *leaf) {
  ct_tensor *g = NULL, *gp = NULL;
  ck_assert_ct_ok(ct_grad(&g, leaf));
  ck_assert_ptr_nonnull(g);
  if (c->permuted) ck_assert_ct_ok(ct_permute(&gp, g, (int[]){1, 3, 0, 2}));
  else gp = ct_retain(g);
  double *v = nt_read(gp);
  ct_release(g);
  ct_release(gp);
  return v;
}

static double *read_grad(ct_tensor *t) {
  ct_tensor *g = NULL;
  ck_assert_ct_ok(ct_grad(&g, t));
  ck_assert_ptr_nonnull(g);
  double *v = nt_read(g);
  ct_release(g);
  return v;
}

#define CLOSE(got, want, tol, ...)                                                                   \
  ck_assert_msg(fabs((got) - (want)) <= (tol), __VA_ARGS__), (void)0

START_TEST(test_batch_norm_blocks) {
  const struct bn_case *c = &cases[_i];
  ct_device *d = ct_test_device();
  if (c->dt == CT_F64 && !nt_has_f64(d)) return;
  int64_t N = c->shape[0], C = c->shape[1], S = c->shape[2] * c->shape[3], M = N * S;
  ct_tensor *leaf = NULL, *x = make_x(d, c, &leaf);
  double *xv = nt_read(x), *wv = NULL, *bv = NULL, *gv = NULL;
  ct_tensor *w = nt_random(d, c->pdt, 1, &C, 72, 2, &wv), *b = nt_random(d, c->pdt, 1, &C, 73, 2, &bv);
  ck_assert_ct_ok(ct_set_requires_grad(w, true));
  ck_assert_ct_ok(ct_set_requires_grad(b, true));
  ct_tensor *rm = NULL, *rv = NULL, *y = NULL;
  ck_assert_ct_ok(ct_zeros(&rm, d, c->pdt, 1, &C));
  ck_assert_ct_ok(ct_ones(&rv, d, c->pdt, 1, &C));
  /* momentum 1: the running statistics become the batch's (mean, unbiased variance). */
  const double eps = 1e-5;
  ck_assert_ct_ok(ct_batch_norm(&y, x, rm, rv, w, b, true, 1.0, eps));
  ct_tensor *g = nt_random(d, c->dt, 4, c->shape, 74, 1, &gv);
  ck_assert_ct_ok(ct_backward(y, g));
  double *yv = nt_read(y), *rmv = nt_read(rm), *rvv = nt_read(rv), *dxv = read_dx(c, leaf), *dwv = read_grad(w),
         *dbv = read_grad(b);
  double u = c->dt == CT_F64 ? ldexp(1, -53) : ldexp(1, -24), uo = nt_unit(c->dt), up = nt_unit(c->pdt);
  double L = 2 * ceil(log2((double)M)) + 24;
  for (int64_t ch = 0; ch < C; ch++) {
#define XI(n, s) xv[((n) * C + ch) * S + (s)]
#define GI(n, s) gv[((n) * C + ch) * S + (s)]
    double mean = 0, m2 = 0, xmax = 0, sg = 0, sgx = 0, asg = 0, asgx = 0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) {
        mean += XI(n, s);
        xmax = fmax(xmax, fabs(XI(n, s)));
      }
    mean /= (double)M;
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) m2 += (XI(n, s) - mean) * (XI(n, s) - mean);
    double var = m2 / (double)M, std = sqrt(var), rstd = 1 / sqrt(var + eps);
    double em = L * u * xmax, rvt = 2 * (L * u + (2 * em * std + em * em) / var);
    CLOSE(rmv[ch], mean, 2 * (em + up * fabs(mean)), "case %d: running_mean[%lld] = %.9g, want %.9g", _i,
          (long long)ch, rmv[ch], mean);
    double uvar = m2 / (double)(M - 1);
    CLOSE(rvv[ch], uvar, 2 * (rvt + up) * uvar, "case %d: running_var[%lld] = %.9g, want %.9g (M2 merge)", _i,
          (long long)ch, rvv[ch], uvar);
    double wj = wv[ch], bj = bv[ch], scale = wj * rstd, shift = bj - mean * scale;
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) {
        double xh = (XI(n, s) - mean) * rstd, ref = xh * wj + bj;
        double tol = 2 * (fabs(wj) * (rstd * em + fabs(xh) * rvt) + 2 * u * (fabs(XI(n, s) * scale) + fabs(shift)) +
                          uo * fabs(ref));
        int64_t i = (n * C + ch) * S + s;
        CLOSE(yv[i], ref, tol, "case %d: y[%lld] = %.9g, want %.9g (tol %.3g)", _i, (long long)i, yv[i], ref, tol);
        sg += GI(n, s);
        sgx += GI(n, s) * xh;
        asg += fabs(GI(n, s));
        asgx += fabs(GI(n, s)) * (rstd * em + fabs(xh) * rvt + L * u * fabs(xh));
      }
    /* dbias = sum(g), dweight = sum(g xhat), each through the cascade (and xhat's errors). */
    double tdb = 2 * L * u * asg + 1e-30, tdw = 2 * asgx + 1e-30;
    CLOSE(dbv[ch], sg, tdb, "case %d: dbias[%lld] = %.9g, want %.9g", _i, (long long)ch, dbv[ch], sg);
    CLOSE(dwv[ch], sgx, tdw, "case %d: dweight[%lld] = %.9g, want %.9g", _i, (long long)ch, dwv[ch], sgx);
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) {
        double xh = (XI(n, s) - mean) * rstd, inner = GI(n, s) - sg / (double)M - xh * sgx / (double)M;
        double ref = scale * inner;
        double err = rvt * fabs(inner) + tdb / (double)M + fabs(xh) * tdw / (double)M +
                     (rstd * em + fabs(xh) * rvt) * fabs(sgx) / (double)M +
                     4 * u * (fabs(GI(n, s)) + fabs(sg) / (double)M + fabs(xh * sgx) / (double)M);
        double tol = 2 * (fabs(scale) * err + uo * fabs(ref)) + 1e-30;
        int64_t i = (n * C + ch) * S + s;
        CLOSE(dxv[i], ref, tol, "case %d: dx[%lld] = %.9g, want %.9g (tol %.3g)", _i, (long long)i, dxv[i], ref,
              tol);
      }
#undef XI
#undef GI
  }
  free(xv), free(wv), free(bv), free(gv), free(yv), free(rmv), free(rvv), free(dxv), free(dwv), free(dbv);
  ct_release(x), ct_release(leaf), ct_release(w), ct_release(b), ct_release(rm), ct_release(rv);
  ct_release(y), ct_release(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nn-batch-norm");
  TCase *tc = tcase_create("batch_norm");
  tcase_set_timeout(tc, 300);
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_add_loop_test(tc, test_batch_norm_blocks, 0, NCASES);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
