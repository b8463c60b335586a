/* The f32 functions kernels/ew_ops.cl computes itself (log, log1p, expm1, tanh, erf, gelu:
 * polynomials, exp and log, not the builtins) over a sweep of f32 values, against the long double references and the
 * bounds of ew_ref.h (OpenCL's bounds of the builtins they replace): every 4093rd bit pattern of
 * the 2^32 (subnormals, infinities and NaNs included), and 4096 neighbouring values on each side
 * of every place the code switches formula (tanh: |x| = 0.625; erf: 1, 2, 10.1; gelu: the same
 * points of x / sqrt2; exp, which is common.cl's ct_expf: its limits). Also the ops built from them (gelu_tanh, sigmoid, silu) and exp, which
 * they rest on. Random values and the other dtypes are test_ops.c's; this is the dense check
 * that a fitted polynomial holds between the values test_ops.c happens to draw. */
#include "device/device.h"
#include "elementwise/elementwise.h"
#include "ew_fns.h"
#include "ew_util.h"

enum { STRIDE = 4093, NEAR = 4096 };
static const ref_val ref_zero = {0, 0, 0};

static const float switch_points[] = {0.625f, 1.0f, 2.0f, 10.1f, 1.41421356f, 2.82842712f, 14.2835934f,
                                      0.70710678f, 1.17549435e-38f, 20.0f, 88.7f,
                                      /* common.cl's ct_expf: its overflow and clamp limits, the
                                       * last normal result, the last one above 0 */
                                      88.7228394f, 88.8f, 87.3365479f, 103.972076f, 103.98f, 104.0f};

/* The inputs: the bit-pattern sweep, then each switch point's neighbours, both signs. */
static float *sweep_values(size_t *n) {
  size_t cap = (size_t)(((1ull << 32) + STRIDE - 1) / STRIDE) +
               sizeof switch_points / sizeof switch_points[0] * 2 * 2 * NEAR;
  float *v = malloc(cap * sizeof *v);
  ck_assert_ptr_nonnull(v);
  size_t k = 0;
  for (uint64_t b = 0; b < (1ull << 32); b += STRIDE) {
    uint32_t u = (uint32_t)b;
    memcpy(&v[k++], &u, sizeof u);
  }
  for (size_t p = 0; p < sizeof switch_points / sizeof switch_points[0]; p++)
    for (int sign = 0; sign < 2; sign++) {
      uint32_t c;
      float x = sign ? -switch_points[p] : switch_points[p];
      memcpy(&c, &x, sizeof c);
      for (int i = -NEAR; i < NEAR; i++) {
        uint32_t u = c + (uint32_t)i;
        memcpy(&v[k++], &u, sizeof u);
      }
    }
  *n = k;
  return v;
}

static const struct {
  enum ref_op op;
  un_fn fn;
  const char *name;
} ops[] = {
    {R_TANH, ct_tanh, "tanh"},       {R_ERF, ct_erf, "erf"},         {R_GELU, ct_gelu, "gelu"},
    {R_GELU_TANH, ct_gelu_tanh, "gelu_tanh"}, {R_SIGMOID, ct_sigmoid, "sigmoid"}, {R_SILU, ct_silu, "silu"},
    {R_EXP, ct_exp, "exp"},          {R_LOG, ct_log, "log"},         {R_LOG1P, ct_log1p, "log1p"},
    {R_EXPM1, ct_expm1, "expm1"},    {R_SOFTPLUS, ct_softplus, "softplus"},
};

START_TEST(test_sweep) {
  ew_dev e = ew_open();
  size_t n;
  float *hx = sweep_values(&n);
  int64_t shape[1] = {(int64_t)n};
  ct_tensor *x = ew_tensor(e.d, CT_F32, 1, shape, hx), *y = NULL;
  ck_assert_ct_ok(ops[_i].fn(&y, x));
  float *r = ew_read(y);
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    ref_val v = ref_convert(CT_F32, CT_F32, &hx[i]);
    ref_expect ex = ref_compute(ops[_i].op, CT_F32, CT_F32, v, ref_zero, ref_zero, ref_zero, false, false, e.cr);
    char xa[64];
    EW_CHECK_ELEM(&ex, CT_F32, &r[i], e.denorm, "%s(%s) [%zu]", ops[_i].name, ew_fmt(xa, sizeof xa, CT_F32, &hx[i]),
                  i);
    double err;
    ref_check(&ex, CT_F32, &r[i], e.denorm, &err);
    if (err > worst) worst = err;
  }
  printf("# %s: %zu values, largest error %.2f ulp\n", ops[_i].name, n, worst);
  free(r);
  free(hx);
  ct_release(y);
  ct_release(x);
}
END_TEST

/* pow with the scalar exponents 2, 3, -1 and -2 is x * x, (x * x) * x, 1 / x and 1 / (x * x),
 * as PyTorch computes it (ct__ew_launch_fn), bit for bit, recorded (fused) and eager (_out);
 * f32 and, where the device has it, f64. Another exponent still takes pow (2.5: within bound). */
static double pow_ref(double x, int e, bool f32) {
  if (f32) {
    float v = (float)x;
    return e == 2 ? v * v : e == 3 ? v * v * v : e == -1 ? 1.0f / v : 1.0f / (v * v);
  }
  return e == 2 ? x * x : e == 3 ? x * x * x : e == -1 ? 1.0 / x : 1.0 / (x * x);
}

START_TEST(test_pow_special) {
  ew_dev e = ew_open();
  static const int exps[] = {2, 3, -1, -2};
  for (int f = 0; f < 2; f++) {
    ct_dtype t = f ? CT_F64 : CT_F32;
    if (t == CT_F64 && !e.fp64) continue;
    enum { N = 4099 };
    double hv[N];
    for (int i = 0; i < N; i++) hv[i] = (ew_unit() - 0.5) * 64;
    const double specials[] = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 1e-30, -3e20, 1e-45};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) hv[i] = specials[i];
    char hx[N * 8];
    for (int i = 0; i < N; i++) ew_store_double(t, hx + i * ct_dtype_size(t), hv[i]);
    int64_t shape[1] = {N};
    ct_tensor *x = ew_tensor(e.d, t, 1, shape, hx);
    for (size_t k = 0; k < sizeof exps / sizeof exps[0]; k++) {
      ct_tensor *y = NULL, *y2 = NULL;
      ck_assert_ct_ok(ct_pow_scalar(&y, x, exps[k]));
      ck_assert_ct_ok(ct_empty(&y2, e.d, t, 1, shape));
      ck_assert_ct_ok(ct_pow_scalar_out(y2, x, exps[k]));
      char *r = ew_read(y), *r2 = ew_read(y2);
      for (int i = 0; i < N; i++) {
        double xi = f ? ((double *)hx)[i] : ((float *)hx)[i];
        double want = pow_ref(xi, exps[k], !f), got, got2;
        if (f) {
          got = ((double *)r)[i];
          got2 = ((double *)r2)[i];
        } else {
          got = ((float *)r)[i];
          got2 = ((float *)r2)[i];
        }
        bool same = (isnan(want) && isnan(got) && isnan(got2)) ||
                    (memcmp(&want, &got, sizeof want) == 0 && memcmp(&want, &got2, sizeof want) == 0);
        ck_assert_msg(same, "pow(%s %.17g, %d): got %.17g (eager %.17g), want %.17g", ct_dtype_name(t), xi, exps[k], got,
                      got2, want);
      }
      free(r);
      free(r2);
      ct_release(y2);
      ct_release(y);
    }
    ct_release(x);
  }
}
END_TEST

int main(int argc, char **argv) {
  /* "soft-fma": the kernels as a device without CL_FP_FMA builds them (mad() for fma() in the
   * polynomials, Dekker's product for the exact squares; common.cl's CT_FMA and ct_sq_err). */
  if (argc > 1 && strcmp(argv[1], "soft-fma") == 0) ct__device_force_soft_fma = 1;
  Suite *s = suite_create("elementwise-sweep");
  TCase *tc = tcase_create("sweep");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_sweep, 0, (int)(sizeof ops / sizeof ops[0]));
  tcase_add_test(tc, test_pow_special);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
