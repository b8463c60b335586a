/* Host references: plain one-thread C loops (written as ../shared/peers/peers.c writes
 * host_add and host_sum) and OpenBLAS SGEMM through CBLAS when the build found it. */
#include <math.h>
#include <stdint.h>

#include "bench.h"

#ifdef CT_BENCH_HAVE_CBLAS
#include <cblas.h>
#endif

/* The loops are built for the CPU they run on (AVX-512, AVX2 or baseline, picked at load time),
 * as peers.c's -march=native build is, without making the binary need that CPU. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HOST_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HOST_LOOP
#endif

HOST_LOOP void ref_host_add(const float *a, const float *b, float *c, size_t n) {
  for (size_t i = 0; i < n; i++) c[i] = a[i] + b[i];
}

HOST_LOOP void ref_host_mul(const float *a, const float *b, float *c, size_t n) {
  for (size_t i = 0; i < n; i++) c[i] = a[i] * b[i];
}

HOST_LOOP void ref_host_exp(const float *a, float *c, size_t n) {
  for (size_t i = 0; i < n; i++) c[i] = expf(a[i]);
}

/* 16 independent accumulators, as peers.c's host_sum: the loop vectorizes and is not one long
 * dependent chain. */
HOST_LOOP float ref_host_sum(const float *a, size_t n) {
  float acc[16] = {0};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += a[i + j];
  float s = 0;
  for (; i < n; i++) s += a[i];
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

HOST_LOOP float ref_host_max(const float *a, size_t n) {
  float acc[16];
  for (int j = 0; j < 16; j++) acc[j] = -INFINITY;
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] = a[i + j] > acc[j] ? a[i + j] : acc[j];
  float m = -INFINITY;
  for (; i < n; i++) m = a[i] > m ? a[i] : m;
  for (int j = 0; j < 16; j++) m = acc[j] > m ? acc[j] : m;
  return m;
}

HOST_LOOP void ref_host_softmax(const float *x, float *y, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float m = -INFINITY;
    for (size_t c = 0; c < cols; c++) m = xr[c] > m ? xr[c] : m;
    float s = 0;
    for (size_t c = 0; c < cols; c++) s += (yr[c] = expf(xr[c] - m));
    float inv = 1.0f / s;
    for (size_t c = 0; c < cols; c++) yr[c] *= inv;
  }
}

bool bench_have_cblas(void) {
#ifdef CT_BENCH_HAVE_CBLAS
  return true;
#else
  return false;
#endif
}

bool ref_host_sgemm(const float *a, const float *b, float *c, int m, int n, int k) {
#ifdef CT_BENCH_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
  return true;
#else
  (void)a, (void)b, (void)c, (void)m, (void)n, (void)k;
  return false;
#endif
}

bool ref_host_linear_relu(const float *x, const float *w, const float *bias, float *y, int m, int n, int k) {
#ifdef CT_BENCH_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
  for (int i = 0; i < m; i++) {
    float *yr = y + (size_t)i * n;
    for (int j = 0; j < n; j++) {
      float v = yr[j] + bias[j];
      yr[j] = v > 0 ? v : 0;
    }
  }
  return true;
#else
  (void)x, (void)w, (void)bias, (void)y, (void)m, (void)n, (void)k;
  return false;
#endif
}

/* xorshift32: fast, deterministic, and good enough for benchmark inputs. */
void bench_fill(float *p, size_t n, float lo, float hi, uint32_t seed) {
  uint32_t s = seed ? seed : 0x9e3779b9u;
  float scale = (hi - lo) / 16777216.0f;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    p[i] = lo + (float)(s >> 8) * scale;
  }
}
