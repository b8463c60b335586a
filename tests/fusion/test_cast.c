/* Fused casts (issue #16, src/fusion/): ct_cast into a floating dtype from a float or
 * a small integer dtype is recorded and computed in the kernel of its neighbours; its bits are
 * ct_cast()'s (the copy kernel's conversions: one rounding, NaN and inf kept, subnormals), checked
 * against the same calls run eagerly (ct__fusion_override = 0), except for the payload bits of
 * NaNs, which the per-op kernels themselves do not keep alike (the f16 vector path and the
 * copy kernel keep them, the scalar f16 conversion makes the canonical NaN): a NaN matches any
 * NaN. Casts the graph does not record (into integers, from wide integers) give the eager bits. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ct_test.h"
#include "elementwise/elementwise.h"
#include "fusion/fusion.h"

#define N 4099 /* above the CPU group: the whole-group kernel and its tail */

/* Values that exercise every conversion: tiny, huge, halfway cases, NaN, +-inf, -0. */
static void fill(float *h, int64_t n) {
  static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 1e-8f, 6e-5f,
                                  3.0e38f, -1.0000001f, 1.00048828125f, 2049.0f};
  for (int64_t i = 0; i < n; i++) {
    if (i < (int64_t)(sizeof special / sizeof special[0]))
      h[i] = special[i];
    else
      h[i] = (float)((i * 2654435761u) % 100003) / 97.0f - 500.0f;
  }
}

/* x (f32) -> (x * 3) as dt -> + 1 in dt -> back to f32 -> ... -> a bool mask cast to f16, and
 * an i16 tensor cast to bf16: every result kept and compared. */
static void run(ct_device *d, int fused, ct_dtype dt, const float *h, void *outs[4], size_t sizes[4]) {
  ct__fusion_override = fused;
  int64_t n = N;
  ct_tensor *x = NULL, *a = NULL, *b = NULL, *c = NULL, *e = NULL, *m = NULL, *mf = NULL, *i16 = NULL, *ib = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 1, &n, h));
  ck_assert_ct_ok(ct_mul_scalar(&a, x, 3));
  ck_assert_ct_ok(ct_cast(&b, a, dt));
  ct_release(a);
  ck_assert_ct_ok(ct_add_scalar(&c, b, 1));
  ck_assert_ct_ok(ct_cast(&e, c, CT_F32));
  ck_assert_ct_ok(ct_gt_scalar(&m, x, 10));
  ck_assert_ct_ok(ct_cast(&mf, m, CT_F16));
  ck_assert_ct_ok(ct_cast(&i16, x, CT_I16)); /* not recorded: into an integer */
  ck_assert_ct_ok(ct_cast(&ib, i16, CT_BF16));
  const ct_tensor *keep[4] = {b, e, mf, ib};
  for (int k = 0; k < 4; k++) {
    sizes[k] = (size_t)n * ct_dtype_size(ct_tensor_dtype(keep[k]));
    outs[k] = malloc(sizes[k]);
    ck_assert_ptr_nonnull(outs[k]);
    ck_assert_ct_ok(ct_to_host(keep[k], outs[k], sizes[k]));
  }
  ct_tensor *all[] = {x, b, c, e, m, mf, i16, ib};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) ct_release(all[k]);
}

/* Element k of p (dtype t) is a NaN. */
static bool is_nan(ct_dtype t, const void *p, int64_t k) {
  switch (t) {
  case CT_F16: { uint16_t v = ((const uint16_t *)p)[k]; return (v & 0x7c00) == 0x7c00 && (v & 0x3ff); }
  case CT_BF16: { uint16_t v = ((const uint16_t *)p)[k]; return (v & 0x7f80) == 0x7f80 && (v & 0x7f); }
  case CT_F32: return isnan(((const float *)p)[k]);
  case CT_F64: return isnan(((const double *)p)[k]);
  default: return false;
  }
}

/* a and b hold n elements of dtype t with the same bits, NaNs aside (see above). */
static bool same_bits(ct_dtype t, const void *a, const void *b, int64_t n) {
  size_t es = ct_dtype_size(t);
  for (int64_t k = 0; k < n; k++) {
    if (memcmp((const char *)a + (size_t)k * es, (const char *)b + (size_t)k * es, es) == 0) continue;
    if (!is_nan(t, a, k) || !is_nan(t, b, k)) return false;
  }
  return true;
}

static void check(ct_dtype dt) {
  ct_device *d = ct_test_device();
  if (dt == CT_F64 && !ct_test_fp64(d, "fused casts through f64")) {
    ct_test_finish();
    return;
  }
  float *h = malloc(N * sizeof *h);
  ck_assert_ptr_nonnull(h);
  fill(h, N);
  void *eager[4], *fused[4];
  size_t se[4], sf[4];
  run(d, 0, dt, h, eager, se);
  struct ct__fusion_stats s0, s1;
  ct__fusion_stats(&s0);
  run(d, 1, dt, h, fused, sf);
  ct__fusion_stats(&s1);
  ck_assert_uint_gt(s1.nodes, s0.nodes); /* the casts were recorded */
  for (int k = 0; k < 4; k++) {
    ck_assert_uint_eq(se[k], sf[k]);
    ct_dtype kt = k == 0 ? dt : k == 1 ? CT_F32 : k == 2 ? CT_F16 : CT_BF16;
    ck_assert_msg(same_bits(kt, eager[k], fused[k], N), "dtype %s: output %d differs", ct_dtype_name(dt), k);
    free(eager[k]);
    free(fused[k]);
  }
  free(h);
  ct_test_finish();
}

START_TEST(cast_f16) { check(CT_F16); }
END_TEST
START_TEST(cast_bf16) { check(CT_BF16); }
END_TEST
START_TEST(cast_f64) { check(CT_F64); }
END_TEST

int main(void) {
  Suite *s = suite_create("fusion-cast");
  TCase *tc = tcase_create("cast");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, cast_f16);
  tcase_add_test(tc, cast_bf16);
  tcase_add_test(tc, cast_f64);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
