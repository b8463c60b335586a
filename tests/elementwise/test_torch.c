/* The elementwise ops of issue #14 against PyTorch's own results (torch_ops_fixture.h, made by
 * gen_torch_ops.py from fixed inputs: signed zeros, the softplus threshold, large, tiny,
 * infinite, NaN, and seeded random values): values and result dtypes, f32 for every op, f64 for
 * the float functions, f16/bf16 for the ones transformers use, i64 for the integer ops. The
 * host references (ew_ref.h, test_ops.c) check every dtype to the ulp; this checks that the
 * semantics are PyTorch's. Also: integer fmod by zero (PyTorch raises; here 0, documented), and
 * the dtypes PyTorch refuses.
 *
 * Tolerances: both sides are within a few ulp of the true value (OpenCL's bounds: at most 16
 * ulp, erf; PyTorch's CPU functions within a few), so |ours - torch| <= rtol |torch| + atol with
 * rtol = 32 ulp (f32: 4e-6, f64: 1e-13 is looser than needed, 450 ulp) and, for f16/bf16, one
 * unit of the format plus the f32 bound (both round an f32 result once). atol covers gelu_tanh
 * for negative x, where PyTorch's form 1 + tanh(z) cancels (its f32 result is 0 below x = -5
 * while the true value is ~1e-7; ours keeps it): 1e-6 in f32, f16 and bf16, 1e-13 in f64.
 * NaN must match NaN, infinities exactly, bool and integer results bit for bit. */
#include "elementwise/elementwise.h"
#include "ew_util.h"
#include "ew_fns.h"
#include "torch_ops_fixture.h"

/* Every binary and unary op of the table, by name. */
static const struct {
  const char *name;
  bin_fn bin;
  un_fn un;
  sc_fn unp;
} ops[] = {
#define T_K_BIN(name) {#name, ct_##name, NULL, NULL},
#define T_K_BINS T_K_BIN
#define T_K_BINSR T_K_BIN
#define T_K_UN(name) {#name, NULL, ct_##name, NULL},
#define T_K_UNP(name) {#name, NULL, NULL, ct_##name},
#define T_K_WHERE(name)
#define T_K_CLAMP(name)
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) T_K_##kind(name)
#include "elementwise/ops.def"
#undef CT__EW_OP
};

static int find_op(const char *name) {
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i].name, name) == 0) return (int)i;
  ck_abort_msg("op %s is not in the table", name);
  return -1;
}

/* A tensor of dtype dt from doubles (f32 values: one rounding to f16/bf16) or int64s. */
static ct_tensor *make(ct_device *d, ct_dtype dt, const double *v, const int64_t *iv) {
  char buf[TF_N * 8];
  for (int i = 0; i < TF_N; i++) {
    void *p = buf + (size_t)i * ct_dtype_size(dt);
    if (iv)
      ew_store_int(dt, p, iv[i]);
    else
      ew_store_double(dt, p, v[i]);
  }
  int64_t shape[1] = {TF_N};
  return ew_tensor(d, dt, 1, shape, buf);
}

static void check_case(const ew_dev *e, const tf_case *c) {
  ct_dtype dt = (ct_dtype)c->dt, odt = (ct_dtype)c->odt;
  if (dt == CT_F64 && !e->fp64) return;
  int w = find_op(c->op);
  bool ints = c->form == 'U' || c->form == 'B', binary = c->form == 'b' || c->form == 'B';
  ct_tensor *x = make(e->d, dt, tf_x, ints ? tf_xi : NULL), *y = NULL, *r = NULL;
  if (binary) y = make(e->d, dt, tf_y, ints ? tf_yi : NULL);
  ct_status st = binary ? ops[w].bin(&r, x, y) : ops[w].un ? ops[w].un(&r, x) : ops[w].unp(&r, x, 0.01);
  ck_assert_msg(st == CT_OK, "%s(%s): %s", c->op, ct_dtype_name(dt), ct_last_error());
  ck_assert_msg(ct_tensor_dtype(r) == odt, "%s(%s) gave %s; PyTorch gives %s", c->op, ct_dtype_name(dt),
                ct_dtype_name(ct_tensor_dtype(r)), ct_dtype_name(odt));
  char *got = ew_read(r);
  double rtol = odt == CT_F64 ? 1e-13 : odt == CT_F16 ? 0x1p-10 + 4e-6 : odt == CT_BF16 ? 0x1p-7 + 4e-6 : 4e-6;
  double atol = odt == CT_F64 ? 1e-13 : 1e-6;
  for (int i = 0; i < TF_N; i++) {
    const void *p = got + (size_t)i * ct_dtype_size(odt);
    char in[80];
    if (ints && binary)
      snprintf(in, sizeof in, "%" PRId64 ", %" PRId64, tf_xi[i], tf_yi[i]);
    else if (ints)
      snprintf(in, sizeof in, "%" PRId64, tf_xi[i]);
    else if (binary)
      snprintf(in, sizeof in, "%.9g, %.9g", tf_x[i], tf_y[i]);
    else
      snprintf(in, sizeof in, "%.9g", tf_x[i]);
    if (odt == CT_BOOL || !ref_is_float(odt)) {
      int64_t g = ref_ld_int(odt, p), want = ints ? c->iwant[i] : (int64_t)c->want[i];
      ck_assert_msg(g == want, "%s(%s [%s]) [%d] = %" PRId64 ", PyTorch %" PRId64, c->op, ct_dtype_name(dt), in, i, g,
                    want);
      continue;
    }
    double g = ref_ld_double(odt, p), want = c->want[i];
    bool ok = isnan(want) ? isnan(g) : isinf(want) ? g == want : fabs(g - want) <= rtol * fabs(want) + atol;
    ck_assert_msg(ok, "%s(%s [%s]) [%d] = %.17g, PyTorch %.17g", c->op, ct_dtype_name(dt), in, i, g, want);
  }
  free(got);
  ct_release(r);
  ct_release(x);
  ct_release(y);
}

START_TEST(test_against_torch) {
  ew_dev e = ew_open();
  check_case(&e, &tf_cases[_i]);
}
END_TEST

/* What PyTorch refuses or raises on, and what happens here instead. */
START_TEST(test_refusals) {
  ew_dev e = ew_open();
  int64_t s3[1] = {3};
  int64_t xi[3] = {5, -5, INT64_MIN}, yi[3] = {0, 0, -1};
  ct_tensor *a = ew_tensor(e.d, CT_I64, 1, s3, xi), *b = ew_tensor(e.d, CT_I64, 1, s3, yi), *r = NULL;
  /* x fmod 0: PyTorch raises ZeroDivisionError on the CPU; a kernel can't, the result is 0 (as
   * ct_remainder's), and MIN fmod -1 is 0 without a trap */
  ck_assert_ct_ok(ct_fmod(&r, a, b));
  int64_t got[3];
  ck_assert_ct_ok(ct_to_host(r, got, sizeof got));
  for (int i = 0; i < 3; i++) ck_assert_int_eq(got[i], 0);
  ct_release(r);
  float hf[3] = {1, 2, 3};
  ct_tensor *f = ew_tensor(e.d, CT_F32, 1, s3, hf), *bo;
  ck_assert_ct_ok(ct_zeros(&bo, e.d, CT_BOOL, 1, s3));
  /* bitwise ops on floats, leaky_relu on integers and bool, fmod and trunc on bool */
  ck_assert_ct_status(ct_bitwise_and(&r, f, a), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("ct_bitwise_and: not defined for floating dtype f32");
  ck_assert_ct_status(ct_bitwise_not(&r, f), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("ct_bitwise_not");
  ck_assert_ct_status(ct_leaky_relu(&r, a, 0.1), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("ct_leaky_relu: not defined for i64 tensors");
  ck_assert_ct_status(ct_leaky_relu_out(bo, bo, 0.1), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ct_status(ct_fmod(&r, bo, bo), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("ct_fmod: not defined for bool");
  ck_assert_ct_status(ct_trunc(&r, bo), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ct_status(ct_isnan(NULL, f), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_isnan: argument 'out' is NULL");
  ck_assert_ct_status(ct_gelu_tanh(&r, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_gelu_tanh: argument 'x' is NULL");
  ct_release(bo);
  ct_release(f);
  ct_release(a);
  ct_release(b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("elementwise-torch");
  TCase *tc = tcase_create("torch");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, test_against_torch, 0, (int)(sizeof tf_cases / sizeof tf_cases[0]));
  tcase_add_test(tc, test_refusals);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
