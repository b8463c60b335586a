/* Small f32 products on the host, C = alpha op(A) op(B) (row-major, beta 0), for the host
 * attention's per-entry products (src/nn/attention_host.c): 64 x 64 x 16 and the like in the
 * character GPT, 1536 of them per training step. OpenBLAS 0.3.21 took about 6 us for each of
 * those (21 GFLOP/s on an AMD EPYC), most of it outside its kernel: a pass zeroing C for beta 0
 * and packing both operands. Here: B's rows are read in place (packed only when B is
 * transposed), C is written once, and a block of 4 rows x 16 columns of C stays in 8 AVX2
 * registers while k runs (2 loads of B, 4 broadcasts of A and 8 FMAs a step). x86-64 with AVX2
 * and FMA only (checked per call with __builtin_cpu_supports; the function is compiled for that
 * target alone); anywhere else, or for larger products, the caller uses CBLAS. */
#include "linalg/linalg.h"

int ct__sgemm_small_off = 0;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define CT__SMALL_PACK 4096 /* floats of B^T packed on the stack: 16 KiB */

/* rb (1..4) rows x nv (1 or 2) vectors of 8 columns of C at c, from A's rows at a (element (r, p)
 * at a + r si + p sk) and B's rows at b (ldb apart). Always inlined with constant rb and nv. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
ct__small_block(int rb, int nv, const float *a, int64_t si, int64_t sk, const float *b, int64_t ldb, int64_t k,
                __m256 alpha, float *c, int64_t ldc) {
  /* The r loops unrolled whatever the optimization level: at -O2 (meson's debugoptimized) GCC
   * kept them, so acc lived on the stack and the products ran at a quarter of the speed. */
  __m256 acc[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; p++) {
    const float *bp = b + p * ldb;
    __m256 b0 = _mm256_loadu_ps(bp), b1 = nv > 1 ? _mm256_loadu_ps(bp + 8) : b0;
#pragma GCC unroll 4
    for (int r = 0; r < rb; r++) {
      __m256 av = _mm256_broadcast_ss(a + r * si + p * sk);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      if (nv > 1) acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < rb; r++) {
    _mm256_storeu_ps(c + r * ldc, _mm256_mul_ps(acc[r][0], alpha));
    if (nv > 1) _mm256_storeu_ps(c + r * ldc + 8, _mm256_mul_ps(acc[r][1], alpha));
  }
}

/* Columns [j, j + 8 nv) of every row of C. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
ct__small_cols(int nv, const float *a, int64_t si, int64_t sk, const float *b, int64_t ldb, int64_t m, int64_t k,
               __m256 alpha, float *c, int64_t ldc) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) ct__small_block(4, nv, a + i * si, si, sk, b, ldb, k, alpha, c + i * ldc, ldc);
  for (; i < m; i++) ct__small_block(1, nv, a + i * si, si, sk, b, ldb, k, alpha, c + i * ldc, ldc);
}

__attribute__((target("avx2,fma"))) static void ct__sgemm_small_avx2(bool ta, const float *a, int64_t lda, bool tb,
                                                                      const float *b, int64_t ldb, int64_t m,
                                                                      int64_t n, int64_t k, float alpha, float *c,
                                                                      int64_t ldc) {
  float pack[CT__SMALL_PACK];
  if (tb) {
    /* op(B)(p, j) = b[j ldb + p]: rows of op(B) made contiguous. */
    for (int64_t p = 0; p < k; p++)
      for (int64_t j = 0; j < n; j++) pack[p * n + j] = b[j * ldb + p];
    b = pack;
    ldb = n;
  }
  int64_t si = ta ? 1 : lda, sk = ta ? lda : 1;
  __m256 al = _mm256_set1_ps(alpha);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) ct__small_cols(2, a, si, sk, b + j, ldb, m, k, al, c + j, ldc);
  if (j + 8 <= n) {
    ct__small_cols(1, a, si, sk, b + j, ldb, m, k, al, c + j, ldc);
    j += 8;
  }
  /* The last n % 8 columns, one at a time, in the same order (sequential FMAs over p). */
  for (; j < n; j++)
    for (int64_t i = 0; i < m; i++) {
      float s = 0;
      for (int64_t p = 0; p < k; p++) s = __builtin_fmaf(a[i * si + p * sk], b[p * ldb + j], s);
      c[i * ldc + j] = s * alpha;
    }
}
#endif

bool ct__sgemm_small(bool ta, const float *a, int64_t lda, bool tb, const float *b, int64_t ldb, int64_t m,
                     int64_t n, int64_t k, float alpha, float *c, int64_t ldc) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (ct__sgemm_small_off || m <= 0 || n <= 0 || k < 0 || m * n * k > CT__SGEMM_SMALL_MAX ||
      (tb && k * n > CT__SMALL_PACK) || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return false;
  ct__sgemm_small_avx2(ta, a, lda, tb, b, ldb, m, n, k, alpha, c, ldc);
  return true;
#else
  (void)ta, (void)a, (void)lda, (void)tb, (void)b, (void)ldb, (void)m, (void)n, (void)k, (void)alpha, (void)c,
      (void)ldc;
  return false;
#endif
}
