/* Issue #11 (bugs 4 and 5): PyTorch's operand ranking in type promotion, the one rule for
 * scalars that don't fit a dtype, and the dtypes added then (i16 in full; u16, u32, u64 as
 * storage dtypes) through the ops the exhaustive tests don't reach: matmul, reductions, printing
 * and u64 values above 2^63.
 *
 * The ranking is checked against result_type_table.h, which gen_result_type.py makes from
 * torch.result_type (or, without PyTorch, from its transcription of c10's rules), on bare
 * tensor structs (no device, no kernels), then end to end on a few cases. */
#include <math.h>

#include "ct_fixture.h"
#include "ct_test.h"
#include "elementwise/elementwise.h"
#include "result_type_table.h"
#include "tensor/tensor.h"

static ct_tensor fake(enum rt_kind k, ct_dtype t) {
  ct_tensor x;
  memset(&x, 0, sizeof x);
  x.dtype = t;
  x.ndim = k == RT_DIM ? 1 : 0;
  x.shape[0] = 2;
  return x;
}

START_TEST(test_result_type_table) {
  int checked = 0;
  for (size_t i = 0; i < sizeof rt_cases / sizeof rt_cases[0]; i++) {
    ct_tensor a = fake(rt_cases[i].ka, rt_cases[i].ta), b = fake(rt_cases[i].kb, rt_cases[i].tb);
    const ct_tensor *both[2] = {&a, &b}, *one[1] = {&a};
    double s = rt_cases[i].kb == RT_INT ? 2.0 : 2.5;
    bool scalar = rt_cases[i].kb == RT_INT || rt_cases[i].kb == RT_FLOAT;
    ct_dtype r = RT_NONE;
    ct_status st = scalar ? ct__ew_result_type(&r, 1, one, 1, &s, "test") : ct__ew_result_type(&r, 2, both, 0, NULL, "test");
    static const char *const kinds[] = {"dim", "zero-dim", "int scalar", "float scalar"};
    if (rt_cases[i].r == RT_NONE) {
      ck_assert_msg(st == CT_ERR_DTYPE_MISMATCH, "%s %s with %s %s: %s, expected PyTorch's refusal",
                    kinds[rt_cases[i].ka], ct_dtype_name(rt_cases[i].ta), kinds[rt_cases[i].kb],
                    ct_dtype_name(rt_cases[i].tb), ct_status_name(st));
    } else {
      ck_assert_msg(st == CT_OK && r == rt_cases[i].r, "%s %s with %s %s: %s %s, expected %s",
                    kinds[rt_cases[i].ka], ct_dtype_name(rt_cases[i].ta), kinds[rt_cases[i].kb],
                    ct_dtype_name(rt_cases[i].tb), ct_status_name(st), ct_dtype_name(r),
                    ct_dtype_name(rt_cases[i].r));
    }
    if (!scalar) {
      /* The order of the operands never matters. */
      const ct_tensor *rev[2] = {&b, &a};
      ct_dtype r2 = RT_NONE;
      ct_status st2 = ct__ew_result_type(&r2, 2, rev, 0, NULL, "test");
      ck_assert_int_eq(st2, st);
      if (st == CT_OK) ck_assert_int_eq(r2, r);
    }
    checked++;
  }
  ck_assert_int_eq(checked, 2 * 13 * (2 * 13 + 2));
}
END_TEST

static ct_tensor *make(ct_device *d, ct_dtype t, int ndim, const int64_t *shape, const void *data) {
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, t, ndim, shape, data));
  return x;
}

/* The cases, end to end: a zero-dim operand doesn't lift the dtype within its category. */
START_TEST(test_ranking_end_to_end) {
  ct_device *d = ct_test_device();
  const int64_t four = 4, two = 2;
  const uint8_t u[4] = {0, 100, 252, 255};
  const int32_t minus4 = -4;
  ct_tensor *a = make(d, CT_U8, 1, &four, u), *s = make(d, CT_I32, 0, NULL, &minus4), *y = NULL;
  /* u8 > (i32)-4 compares in u8, where -4 is 252. */
  ck_assert_ct_ok(ct_gt(&y, a, s));
  uint8_t got[4];
  ck_assert_ct_ok(ct_to_host(y, got, 4));
  const uint8_t want_gt[4] = {0, 0, 0, 1};
  ck_assert_mem_eq(got, want_gt, 4);
  ct_release(y);
  ck_assert_ct_ok(ct_add(&y, s, a)); /* either order */
  ck_assert_int_eq(ct_tensor_dtype(y), CT_U8);
  ck_assert_ct_ok(ct_to_host(y, got, 4));
  const uint8_t want_add[4] = {252, 96, 248, 251};
  ck_assert_mem_eq(got, want_add, 4);
  ct_release(y);
  /* The _out form takes the same result dtype: u8, not i32. */
  ct_tensor *o = NULL;
  ck_assert_ct_ok(ct_empty(&o, d, CT_I32, 1, &four));
  ck_assert_ct_status(ct_add_out(o, a, s), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("result is u8");
  ct_release(o);
  ct_release(s);
  ct_release(a);

  /* f32[2] + f64 zero-dim is f32; a zero-dim of a higher category still counts: i32[2] + f64
   * zero-dim is f64 (lo = f32, hi = f64). Without cl_khr_fp64 the f64 cases are skipped (said in
   * a TAP comment) and the same rules run one step down, lo = f16 and hi = f32 (the values are
   * exact in f16). */
  const bool f64 = ct_test_fp64(d, "f64 zero-dim operands (f16[2] and f32 zero-dims instead)");
  const ct_dtype lo = f64 ? CT_F32 : CT_F16, hi = f64 ? CT_F64 : CT_F32;
  const double f[2] = {1.5, -2.0}, half = 0.25;
  const int32_t iv[2] = {3, -7};
  ct_tensor *x = ct_test_from_doubles(d, lo, 1, &two, f), *h = ct_test_from_doubles(d, hi, 0, NULL, &half);
  ct_tensor *xi = make(d, CT_I32, 1, &two, iv);
  ck_assert_ct_ok(ct_add(&y, x, h));
  ck_assert_int_eq(ct_tensor_dtype(y), lo);
  double *gf = ct_test_to_doubles(y);
  ck_assert_double_eq(gf[0], 1.75);
  ck_assert_double_eq(gf[1], -1.75);
  free(gf);
  ct_release(y);
  ck_assert_ct_ok(ct_mul(&y, xi, h));
  ck_assert_int_eq(ct_tensor_dtype(y), hi);
  ct_release(y);
  /* where(cond, f32[2], f64 zero-dim): f32. */
  const uint8_t c[2] = {1, 0};
  ct_tensor *cond = make(d, CT_BOOL, 1, &two, c);
  ck_assert_ct_ok(ct_where(&y, cond, x, h));
  ck_assert_int_eq(ct_tensor_dtype(y), lo);
  gf = ct_test_to_doubles(y);
  ck_assert_double_eq(gf[0], 1.5);
  ck_assert_double_eq(gf[1], 0.25);
  free(gf);
  ct_release(y);
  /* Two zero-dim tensors promote as usual: i32 zero-dim + f64 zero-dim is f64. */
  ct_tensor *zi = make(d, CT_I32, 0, NULL, &minus4);
  ck_assert_ct_ok(ct_add(&y, zi, h));
  ck_assert_int_eq(ct_tensor_dtype(y), hi);
  ct_release(y);
  ct_release(zi);
  ct_release(cond);
  ct_release(xi);
  ct_release(h);
  ct_release(x);
}
END_TEST

/* One rule for scalars that don't fit the dtype: CT_ERR_INVALID_ARGUMENT naming value and dtype. */
START_TEST(test_scalar_rule) {
  ct_device *d = ct_test_device();
  const int64_t three = 3;
  ct_tensor *x = NULL, *y = NULL;
  /* ct_full (saturated before). */
  ck_assert_ct_status(ct_full(&x, d, CT_U8, 1, &three, 300), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(x);
  ck_assert_error_contains("ct_full: value 300 cannot be converted to u8 without overflow");
  ck_assert_ct_status(ct_full(&x, d, CT_U8, 1, &three, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_full(&x, d, CT_I32, 1, &three, NAN), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_full(&x, d, CT_I64, 1, &three, 9223372036854775808.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_full(&x, d, CT_I16, 1, &three, 32768), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_full(&x, d, CT_U64, 1, &three, 18446744073709551616.0), CT_ERR_INVALID_ARGUMENT);
  /* What fits: the range's ends, anything in bool and the floats (overflowing to inf, as
   * torch.full(70000, dtype=float16)), fractions truncated. */
  ck_assert_ct_ok(ct_full(&x, d, CT_F16, 1, &three, 70000));
  uint16_t gh[3];
  ck_assert_ct_ok(ct_to_host(x, gh, sizeof gh));
  ck_assert_uint_eq(gh[1], 0x7c00);
  ct_release(x);
  ck_assert_ct_ok(ct_full(&x, d, CT_BOOL, 1, &three, 5));
  ct_release(x);
  ck_assert_ct_ok(ct_full(&x, d, CT_U64, 1, &three, 18446744073709549568.0)); /* 2^64 - 2048 */
  uint64_t g64[3];
  ck_assert_ct_ok(ct_to_host(x, g64, sizeof g64));
  ck_assert(g64[2] == UINT64_C(18446744073709549568));
  ct_release(x);
  ck_assert_ct_status(ct_full(&x, d, CT_I16, 1, &three, -32768.5), CT_ERR_INVALID_ARGUMENT); /* as PyTorch */
  ck_assert_ct_ok(ct_full(&x, d, CT_I16, 1, &three, -32767.5));
  int16_t g16[3];
  ck_assert_ct_ok(ct_to_host(x, g16, sizeof g16));
  ck_assert_int_eq(g16[0], -32767);

  /* ct_arange: every value it produces must fit (it wrapped before); the end is exclusive. */
  ck_assert_ct_status(ct_arange(&y, d, CT_U8, 0, 300, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("last value 299 cannot be converted to u8");
  ck_assert_ct_status(ct_arange(&y, d, CT_U8, -1, 5, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("start -1");
  ck_assert_ct_ok(ct_arange(&y, d, CT_U8, 0, 256, 1));
  uint8_t all[256];
  ck_assert_ct_ok(ct_to_host(y, all, 256));
  ck_assert_int_eq(all[255], 255);
  ct_release(y);

  /* Scalar ops: checked against the compute dtype (errored before, and still does). */
  ck_assert_ct_status(ct_add_scalar(&y, x, 40000), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_add_scalar: scalar 40000 cannot be converted to i16");
  ck_assert_ct_ok(ct_add_scalar(&y, x, 2.5)); /* a float scalar: f32 */
  ck_assert_int_eq(ct_tensor_dtype(y), CT_F32);
  ct_release(y);
  ct_tensor *h = NULL;
  ck_assert_ct_ok(ct_ones(&h, d, CT_F16, 1, &three));
  ck_assert_ct_ok(ct_mul_scalar(&y, h, 1e6)); /* computed in f32, stored as inf, as PyTorch */
  ck_assert_ct_ok(ct_to_host(y, gh, sizeof gh));
  ck_assert_uint_eq(gh[0], 0x7c00);
  ct_release(y);
  /* Comparisons are exempt: they compare the exact value. */
  ck_assert_ct_ok(ct_lt_scalar(&y, x, 1e6));
  uint8_t b[3];
  ck_assert_ct_ok(ct_to_host(y, b, 3));
  ck_assert_int_eq(b[0], 1);
  ct_release(y);

  /* ct_clamp bounds (saturated before). */
  ck_assert_ct_status(ct_clamp(&y, x, -40000, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_clamp: lo -40000 cannot be converted to i16");
  ck_assert_ct_status(ct_clamp(&y, x, NAN, 1e5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("hi 100000");
  ck_assert_ct_ok(ct_clamp(&y, x, -100, 100));
  ck_assert_ct_ok(ct_to_host(y, g16, sizeof g16));
  ck_assert_int_eq(g16[0], -100);
  ct_release(y);
  ck_assert_ct_ok(ct_lt_scalar(&y, x, -32767.5)); /* a float scalar: compared in f32 */
  uint8_t lt[3];
  ck_assert_ct_ok(ct_to_host(y, lt, 3));
  ck_assert_int_eq(lt[0], 0);
  ct_release(y);
  ct_release(h);
  ct_release(x);
}
END_TEST

/* u64 values above 2^63, where an i64 view of the bits would order and convert them wrongly. */
START_TEST(test_u64_values) {
  ct_device *d = ct_test_device();
  const int64_t four = 4;
  const uint64_t v[4] = {0, 5, UINT64_C(1) << 63, UINT64_MAX};
  const uint64_t w[4] = {1, 5, 7, UINT64_MAX - 1};
  ct_tensor *a = make(d, CT_U64, 1, &four, v), *b = make(d, CT_U64, 1, &four, w), *y = NULL;
  uint8_t m[4];
  ck_assert_ct_ok(ct_lt(&y, a, b));
  ck_assert_ct_ok(ct_to_host(y, m, 4));
  const uint8_t want_lt[4] = {1, 0, 0, 0};
  ck_assert_mem_eq(m, want_lt, 4);
  ct_release(y);
  uint64_t g[4];
  ck_assert_ct_ok(ct_maximum(&y, a, b));
  ck_assert_ct_ok(ct_to_host(y, g, sizeof g));
  ck_assert(g[2] == (UINT64_C(1) << 63) && g[3] == UINT64_MAX);
  ct_release(y);
  ck_assert_ct_ok(ct_floor_divide(&y, a, b));
  ck_assert_ct_ok(ct_to_host(y, g, sizeof g));
  ck_assert(g[2] == (UINT64_C(1) << 63) / 7 && g[3] == 1);
  ct_release(y);
  /* Scalars: up to 2^64 - 1; a negative one compares (every u64 is greater), and is refused by
   * arithmetic. */
  ck_assert_ct_ok(ct_gt_scalar(&y, a, -1));
  ck_assert_ct_ok(ct_to_host(y, m, 4));
  const uint8_t all1[4] = {1, 1, 1, 1};
  ck_assert_mem_eq(m, all1, 4);
  ct_release(y);
  ck_assert_ct_status(ct_add_scalar(&y, a, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_ge_scalar(&y, a, 9223372036854775808.0));
  ck_assert_ct_ok(ct_to_host(y, m, 4));
  const uint8_t want_ge[4] = {0, 0, 1, 1};
  ck_assert_mem_eq(m, want_ge, 4);
  ct_release(y);
  /* Into floats by the unsigned value. */
  ck_assert_ct_ok(ct_add_scalar(&y, a, 0.5));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_F32);
  float f[4];
  ck_assert_ct_ok(ct_to_host(y, f, sizeof f));
  ck_assert_float_eq(f[2], 0x1p63f);
  ck_assert_float_eq(f[3], 0x1p64f);
  ct_release(y);
  /* Mixing with a signed integer is refused, as by PyTorch. */
  ct_tensor *i = NULL;
  ck_assert_ct_ok(ct_zeros(&i, d, CT_I16, 1, &four));
  ck_assert_ct_status(ct_add(&y, a, i), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("ct_add: dtypes u64 and i16 have no common dtype");
  ct_release(i);
  ct_release(b);
  ct_release(a);
}
END_TEST

/* The parts of the new dtypes outside elementwise: matmul, reductions, printing. */
START_TEST(test_new_dtypes_elsewhere) {
  ct_device *d = ct_test_device();
  const int64_t sq[2] = {2, 2};
  const int16_t a16[4] = {1, -2, 300, 4};
  ct_tensor *a = make(d, CT_I16, 2, sq, a16), *y = NULL;
  /* i16 is a full dtype: matmul (wrapping like the other integers) and reductions. */
  ck_assert_ct_ok(ct_matmul(&y, a, a));
  int16_t m[4];
  ck_assert_ct_ok(ct_to_host(y, m, sizeof m));
  ck_assert_int_eq(m[0], 1 * 1 + -2 * 300);
  ck_assert_int_eq(m[3], 300 * -2 + 4 * 4);
  ct_release(y);
  ck_assert_ct_ok(ct_sum(&y, a, 0, NULL, false));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_I64);
  int64_t s64;
  ck_assert_ct_ok(ct_to_host(y, &s64, 8));
  ck_assert_int_eq(s64, 303);
  ct_release(y);
  char buf[256];
  ck_assert_ct_ok(ct_format(buf, sizeof buf, NULL, a));
  ck_assert_msg(strstr(buf, "300") && strstr(buf, "-2") && strstr(buf, "dtype=i16"), "%s", buf);
  /* The storage dtypes: no matmul; u16 and u32 reduce; u64 doesn't; u64 prints unsigned. */
  const uint64_t big[2] = {UINT64_MAX, 7};
  const int64_t two = 2;
  ct_tensor *u = make(d, CT_U64, 1, &two, big), *u32 = NULL;
  ck_assert_ct_status(ct_matmul(&y, u, u), CT_ERR_UNSUPPORTED);
  ck_assert_error_contains("u64");
  ck_assert_ct_status(ct_max(&y, u, 0, NULL, false), CT_ERR_UNSUPPORTED);
  ck_assert_ct_ok(ct_format(buf, sizeof buf, NULL, u));
  ck_assert_msg(strstr(buf, "18446744073709551615") != NULL, "%s", buf);
  ck_assert_ct_ok(ct_cast(&u32, u, CT_U32));
  ck_assert_ct_ok(ct_max(&y, u32, 0, NULL, false));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_U32);
  uint32_t mx;
  ck_assert_ct_ok(ct_to_host(y, &mx, 4));
  ck_assert_uint_eq(mx, UINT32_MAX);
  ct_release(y);
  ct_release(u32);
  ct_release(u);
  ct_release(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("elementwise-dtypes");
  TCase *tc = tcase_create("dtypes");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_result_type_table);
  tcase_add_test(tc, test_ranking_end_to_end);
  tcase_add_test(tc, test_scalar_rule);
  tcase_add_test(tc, test_u64_values);
  tcase_add_test(tc, test_new_dtypes_elsewhere);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
