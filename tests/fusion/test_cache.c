/* The fusion graph's table of generated kernels (src/fusion/): the same chain of
 * calls realized again, later in the process, must find the kernel it built the first time.
 * Regression: the generated source named each value after its call's process-wide number
 * (v1, v2, then v3, v4 for the same chain), so every realize produced new source text, missed
 * both the in-memory LRU and the disk cache (both keyed by the source) and compiled again:
 * about half a second per realize on PoCL. */
#include "ct_test.h"
#include "elementwise/elementwise.h"
#include "fusion/fusion.h"

#define N 1024

/* tanh(x * 0.5 + 1) * x, the intermediates released before the realize; the result's bits. */
static void chain(ct_device *d, ct_tensor *x, float *out) {
  ct_tensor *a = NULL, *b = NULL, *c = NULL, *y = NULL;
  ck_assert_ct_ok(ct_mul_scalar(&a, x, 0.5));
  ck_assert_ct_ok(ct_add_scalar(&b, a, 1.0));
  ct_release(a);
  ck_assert_ct_ok(ct_tanh(&c, b));
  ct_release(b);
  ck_assert_ct_ok(ct_mul(&y, c, x));
  ct_release(c);
  ck_assert_ct_ok(ct_device_synchronize(d));
  ck_assert_ct_ok(ct_to_host(y, out, N * sizeof *out));
  ct_release(y);
}

START_TEST(test_same_chain_reuses_its_kernel) {
  ct__fusion_override = 1;
  ct_device *d = ct_test_device();
  static float hx[N], first[N], again[N];
  for (int i = 0; i < N; i++) hx[i] = (float)(i - N / 2) / 256.0f;
  int64_t n = N;
  ct_tensor *x = NULL, *unused = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 1, &n, hx));
  struct ct__fusion_stats s0, s1, s2;
  ct__fusion_stats(&s0);
  chain(d, x, first);
  ct__fusion_stats(&s1);
  ck_assert_uint_eq(s1.builds - s0.builds, 1);
  /* A recorded call that is dropped in between: later calls' numbers move on by more than the
   * chain's length. */
  ck_assert_ct_ok(ct_neg(&unused, x));
  ct_release(unused);
  ck_assert_ct_ok(ct_device_synchronize(d));
  chain(d, x, again);
  ct__fusion_stats(&s2);
  ck_assert_msg(s2.builds == s1.builds, "the same chain built %lu more fused program(s) when realized again",
                s2.builds - s1.builds);
  ck_assert_uint_eq(s2.kernels - s1.kernels, 1);
  ck_assert_int_eq(memcmp(first, again, sizeof first), 0);
  ct_release(x);
}
END_TEST

/* Kernels are looked up by a signature of what their source depends on. Regression: a strided
 * operand's offset sums only its dims of nonzero stride, and the signature did not say which:
 * x + a row broadcast down [4, 5] (strides [0, 1]) built a kernel that x + a transposed
 * [5, 4] (strides [1, 4]) then reused, reading wrong elements. */
START_TEST(test_strided_operands_by_their_dims) {
  ct__fusion_override = 1;
  ct_device *d = ct_test_device();
  float hx[20], hr[5], ht[20], out[20];
  for (int i = 0; i < 20; i++) {
    hx[i] = (float)i;
    ht[i] = (float)(100 * i);
  }
  for (int i = 0; i < 5; i++) hr[i] = (float)(1000 * i);
  int64_t s45[2] = {4, 5}, s15[2] = {1, 5}, s54[2] = {5, 4};
  ct_tensor *x = NULL, *row = NULL, *rowx = NULL, *t = NULL, *tt = NULL, *y = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, s45, hx));
  ck_assert_ct_ok(ct_from_host(&row, d, CT_F32, 2, s15, hr));
  ck_assert_ct_ok(ct_expand(&rowx, row, 2, s45));
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 2, s54, ht));
  ck_assert_ct_ok(ct_transpose(&tt, t, 0, 1));
  ck_assert_ct_ok(ct_add(&y, x, rowx));
  ck_assert_ct_ok(ct_to_host(y, out, sizeof out));
  for (int i = 0; i < 20; i++) ck_assert_float_eq(out[i], hx[i] + hr[i % 5]);
  ct_release(y);
  ck_assert_ct_ok(ct_add(&y, x, tt));
  ck_assert_ct_ok(ct_to_host(y, out, sizeof out));
  for (int i = 0; i < 20; i++) ck_assert_float_eq(out[i], hx[i] + ht[(i % 5) * 4 + i / 5]);
  ct_release(y);
  ct_tensor *all[] = {x, row, rowx, t, tt};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) ct_release(all[k]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fusion-cache");
  TCase *tc = tcase_create("lru");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_add_test(tc, test_same_chain_reuses_its_kernel);
  tcase_add_test(tc, test_strided_operands_by_their_dims);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
