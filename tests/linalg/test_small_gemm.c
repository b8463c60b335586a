/* ct__sgemm_small (src/linalg/host_small.c), the host attention's small f32 products, against a
 * double loop: every combination of transposes, sizes around its blocks (4 rows, 8 and 16
 * columns, the column tail) and k = 0, leading dimensions wider than the matrices, an alpha,
 * NaN and infinity propagation, and what it declines (too large, a transposed B too large to
 * pack, ct__sgemm_small_off). No OpenCL: a pure host function.
 *
 * Tolerance: each element is a sequential FMA chain over k <= 40 products of values in [-1, 1]:
 * |error| <= k 2^-24 sum |a b| (plus one rounding for alpha); 1e-6 (1 + sum |a b|) is above
 * 40 * 6e-8 = 2.4e-6 relative only where sum |a b| is large, so 4e-6 (1 + sum |a b|). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ct_test.h"
#include "linalg/linalg.h"

static float frand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static bool have_avx2_fma(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

/* One product of op(A) [m, k] and op(B) [k, n] with leading dimensions 3 wider than needed. */
static void check(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, uint32_t seed) {
  int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 3, ldc = n + 3;
  int64_t ra = ta ? k : m, rb = tb ? n : k;
  float *a = malloc(sizeof(float) * (size_t)(ra * lda + 1)), *b = malloc(sizeof(float) * (size_t)(rb * ldb + 1));
  float *c = malloc(sizeof(float) * (size_t)(m * ldc + 1));
  for (int64_t i = 0; i < ra * lda; i++) a[i] = frand(&seed);
  for (int64_t i = 0; i < rb * ldb; i++) b[i] = frand(&seed);
  for (int64_t i = 0; i < m * ldc; i++) c[i] = 12345.0f; /* the padding must stay */
  bool done = ct__sgemm_small(ta, a, lda, tb, b, ldb, m, n, k, alpha, c, ldc);
  ck_assert_msg(done == have_avx2_fma(), "ta %d tb %d %lldx%lldx%lld: done %d", ta, tb, (long long)m, (long long)n,
                (long long)k, done);
  if (done)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ldc; j++) {
        if (j >= n) {
          ck_assert_msg(c[i * ldc + j] == 12345.0f, "C's padding at (%lld, %lld) written", (long long)i, (long long)j);
          continue;
        }
        double s = 0, sa = 0;
        for (int64_t p = 0; p < k; p++) {
          double x = ta ? a[p * lda + i] : a[i * lda + p], y = tb ? b[j * ldb + p] : b[p * ldb + j];
          s += x * y;
          sa += fabs(x * y);
        }
        double want = s * alpha, got = c[i * ldc + j];
        ck_assert_msg(fabs(got - want) <= 4e-6 * (1 + sa * fabs(alpha)),
                      "ta %d tb %d %lldx%lldx%lld (%lld, %lld): %.9g, expected %.9g", ta, tb, (long long)m,
                      (long long)n, (long long)k, (long long)i, (long long)j, got, want);
      }
  free(a);
  free(b);
  free(c);
}

START_TEST(test_shapes) {
  static const int64_t ms[] = {1, 3, 4, 5, 9}, ns[] = {1, 7, 8, 9, 16, 17, 24, 33}, ks[] = {0, 1, 5, 16, 40};
  uint32_t seed = 1;
  for (int t = 0; t < 4; t++)
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
      for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
        for (size_t p = 0; p < sizeof ks / sizeof ks[0]; p++)
          check(t & 1, t & 2, ms[i], ns[j], ks[p], p % 2 ? 0.25f : 1.0f, seed++);
  /* The attention's shapes: 64 x 64 x 16 and 64 x 16 x 64. */
  for (int t = 0; t < 4; t++) {
    check(t & 1, t & 2, 64, 64, 16, 0.25f, seed++);
    check(t & 1, t & 2, 64, 16, 64, 1.0f, seed++);
  }
}
END_TEST

/* A NaN in A makes its row NaN, an infinity in B its column +-inf or NaN, as a BLAS gives. */
START_TEST(test_nonfinite) {
  if (!have_avx2_fma()) return;
  enum { M = 5, N = 20, K = 6 };
  float a[M * K], b[K * N], c[M * N];
  for (int i = 0; i < M * K; i++) a[i] = 0.5f;
  for (int i = 0; i < K * N; i++) b[i] = 0.25f;
  a[2 * K + 3] = NAN;
  b[1 * N + 18] = INFINITY;
  ck_assert(ct__sgemm_small(false, a, K, false, b, N, M, N, K, 1.0f, c, N));
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float v = c[i * N + j];
      if (i == 2) ck_assert_msg(isnan(v), "(%d, %d) = %g, not NaN", i, j, v);
      else if (j == 18) ck_assert_msg(isinf(v) && v > 0, "(%d, %d) = %g, not inf", i, j, v);
      else ck_assert_msg(v == 0.75f, "(%d, %d) = %g", i, j, v);
    }
}
END_TEST

/* What it declines, writing nothing. */
START_TEST(test_declines) {
  static float a[4096 + 64], b[4096 + 64], c[64 * 80];
  c[0] = 7;
  ck_assert(!ct__sgemm_small(false, a, 1 << 11, false, b, 1 << 11, 1 << 10, 1 << 10, 2, 1, c, 1 << 10)); /* > 2^20 */
  ck_assert(!ct__sgemm_small(false, a, 65, true, b, 65, 8, 80, 65, 1, c, 80)); /* B^T of 5200 > 4096 */
  ck_assert(!ct__sgemm_small(false, a, 4, false, b, 4, 0, 4, 4, 1, c, 4));     /* empty C */
  ct__sgemm_small_off = 1;
  ck_assert(!ct__sgemm_small(false, a, 4, false, b, 4, 4, 4, 4, 1, c, 4));
  ct__sgemm_small_off = 0;
  ck_assert(c[0] == 7);
}
END_TEST

int main(void) {
  Suite *s = suite_create("linalg-small-gemm");
  TCase *tc = tcase_create("small");
  tcase_add_test(tc, test_shapes);
  tcase_add_test(tc, test_nonfinite);
  tcase_add_test(tc, test_declines);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
