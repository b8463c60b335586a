/* Shared helpers of the stress tests: host memory figures and a workload that exercises the
 * library end to end (creation, transfers, views, copy and cast kernels) and checks every value
 * against a host reference. Header-only, like tests/common/ct_test.h. */
#ifndef CT_STRESS_H
#define CT_STRESS_H

#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cltensor/cltensor.h"
#include "ct_test.h"

/* Resident set size of this process in bytes (/proc/self/statm), 0 when unreadable. Free heap
 * memory goes back to the system first (malloc_trim): glibc keeps freed chunks mapped, and after
 * a freed mmapped block raises its trim threshold (up to 32 MiB) whether the brk heap's free top
 * is returned depends on what happens to sit above it, so without the trim the same workload read
 * 117 or 154 MiB from one cycle to the next with the heap in use flat to the byte. */
static inline uint64_t stress_rss_bytes(void) {
  malloc_trim(0);
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  int n = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  return n == 2 ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* Bytes of host heap in use (glibc's mallinfo2(): chunks handed out plus mmapped blocks). Exact
 * only when freed chunks go straight back to the bins and every thread shares one arena: the
 * stress tests run with GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1 (set
 * in meson.build), because RSS alone also moves with fragmentation and thread stacks. 0 under
 * ASan and TSan, whose allocators don't fill it in (LeakSanitizer checks leaks there). */
static inline uint64_t stress_heap_bytes(void) {
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}


/* A failure description, filled by the first failing check of a workload. */
typedef struct stress_why {
  char text[512];
} stress_why;

static inline int stress_fail(stress_why *why, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why->text, sizeof why->text, fmt, ap);
  va_end(ap);
  return 0;
}

/* Evaluates a ct_status expression; on failure records it with ct_last_error() (this thread's)
 * and jumps to the workload's cleanup label `done`. */
#define STRESS_TRY(expr)                                                                     \
  do {                                                                                       \
    ct_status s_ = (expr);                                                                   \
    if (s_ != CT_OK) {                                                                       \
      stress_fail(why, "%s returned %s: %s", #expr, ct_status_name(s_), ct_last_error());  \
      goto done;                                                                             \
    }                                                                                        \
  } while (0)

#define STRESS_CHECK(cond, ...)          \
  do {                                   \
    if (!(cond)) {                       \
      stress_fail(why, __VA_ARGS__);     \
      goto done;                         \
    }                                    \
  } while (0)

/* A small deterministic generator (xorshift32), per thread. */
static inline uint32_t stress_rand(uint32_t *state) {
  uint32_t x = *state ? *state : 0x9e3779b9u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *state = x;
}

/* Host value of element i for a seed: small integers, exact in every dtype used here
 * (f16 and bf16 hold integers up to 256 exactly). */
static inline float stress_value(uint32_t seed, int64_t i) {
  return (float)((int64_t)((seed + (uint32_t)i * 7u) % 201u) - 100);
}

/* One round of work on device d: a [rows, cols] f32 tensor from the host, then a transposed
 * contiguous copy, casts to i32, f16 and back, a broadcasting copy of a row, a fill, a row sum,
 * a broadcasting add, a product of strided views, a max and a matrix product, each result read back and compared exactly with the host. `shared`, when not NULL, is a [1, cols]
 * f32 tensor (values stress_value(shared_seed, j)) that other threads read at the same time.
 * Returns 1 on success; 0 with why filled. *ops counts the device operations it ran. */
static inline int stress_workload(ct_device *d, int64_t rows, int64_t cols, uint32_t seed,
                                  const ct_tensor *shared, uint32_t shared_seed, long *ops,
                                  stress_why *why) {
  int ok = 0;
  int64_t n = rows * cols;
  float *h = malloc((size_t)n * sizeof *h);
  float *back = malloc((size_t)n * sizeof *back);
  int32_t *ib = malloc((size_t)n * sizeof *ib);
  ct_tensor *t = NULL, *tt = NULL, *c = NULL, *i32 = NULL, *f16 = NULL, *f32 = NULL, *row = NULL,
            *dst = NULL, *full = NULL, *sh = NULL, *sum = NULL, *mx = NULL, *mm = NULL,
            *add = NULL, *sq = NULL;
  float *prod = NULL;
  if (!h || !back || !ib) {
    stress_fail(why, "out of host memory for %lld elements", (long long)n);
    goto done;
  }
  for (int64_t i = 0; i < n; i++) h[i] = stress_value(seed, i);
  int64_t shape[2] = {rows, cols};

  STRESS_TRY(ct_from_host(&t, d, CT_F32, 2, shape, h));
  STRESS_TRY(ct_to_host(t, back, (size_t)n * sizeof *back));
  *ops += 2;
  for (int64_t i = 0; i < n; i++)
    STRESS_CHECK(back[i] == h[i], "round trip [%lld]: %g != %g", (long long)i, back[i], h[i]);

  STRESS_TRY(ct_transpose(&tt, t, 0, 1));
  STRESS_TRY(ct_contiguous(&c, tt));
  STRESS_TRY(ct_to_host(c, back, (size_t)n * sizeof *back));
  *ops += 2;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < cols; k++)
      STRESS_CHECK(back[k * rows + r] == h[r * cols + k], "transpose [%lld,%lld]: %g != %g",
                   (long long)k, (long long)r, back[k * rows + r], h[r * cols + k]);

  STRESS_TRY(ct_cast(&i32, t, CT_I32));
  STRESS_TRY(ct_to_host(i32, ib, (size_t)n * sizeof *ib));
  *ops += 2;
  for (int64_t i = 0; i < n; i++)
    STRESS_CHECK(ib[i] == (int32_t)h[i], "cast i32 [%lld]: %d != %g", (long long)i, ib[i], h[i]);

  STRESS_TRY(ct_cast(&f16, tt, CT_F16));
  STRESS_TRY(ct_cast(&f32, f16, CT_F32));
  STRESS_TRY(ct_to_host(f32, back, (size_t)n * sizeof *back));
  *ops += 3;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < cols; k++)
      STRESS_CHECK(back[k * rows + r] == h[r * cols + k], "f16 round trip [%lld,%lld]: %g != %g",
                   (long long)k, (long long)r, back[k * rows + r], h[r * cols + k]);

  /* Row `rows - 1` broadcast over every row of a new tensor. */
  STRESS_TRY(ct_slice(&row, t, 0, rows - 1, rows, 1));
  STRESS_TRY(ct_empty(&dst, d, CT_F32, 2, shape));
  STRESS_TRY(ct_copy(dst, row));
  STRESS_TRY(ct_to_host(dst, back, (size_t)n * sizeof *back));
  *ops += 3;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < cols; k++)
      STRESS_CHECK(back[r * cols + k] == h[(rows - 1) * cols + k], "broadcast copy [%lld,%lld]: %g != %g",
                   (long long)r, (long long)k, back[r * cols + k], h[(rows - 1) * cols + k]);

  STRESS_TRY(ct_full(&full, d, CT_F32, 2, shape, -2.5));
  STRESS_TRY(ct_to_host(full, back, (size_t)n * sizeof *back));
  *ops += 2;
  for (int64_t i = 0; i < n; i++)
    STRESS_CHECK(back[i] == -2.5f, "full [%lld]: %g", (long long)i, back[i]);

  /* Elementwise: t + its last row (broadcast), and the square of the transposed view. */
  STRESS_TRY(ct_add(&add, t, row));
  STRESS_TRY(ct_to_host(add, back, (size_t)n * sizeof *back));
  *ops += 2;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < cols; k++) {
      float want = h[r * cols + k] + h[(rows - 1) * cols + k];
      STRESS_CHECK(back[r * cols + k] == want, "add [%lld,%lld]: %g != %g", (long long)r, (long long)k,
                   back[r * cols + k], want);
    }
  STRESS_TRY(ct_mul(&sq, tt, tt));
  STRESS_TRY(ct_to_host(sq, back, (size_t)n * sizeof *back));
  *ops += 2;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < cols; k++) {
      float want = h[r * cols + k] * h[r * cols + k];
      STRESS_CHECK(back[k * rows + r] == want, "mul [%lld,%lld]: %g != %g", (long long)k, (long long)r,
                   back[k * rows + r], want);
    }

  /* Reductions and a matrix product: every partial result is an integer below 2^24, so f32
   * results are exact whatever the order of accumulation. */
  int dim1 = 1;
  STRESS_TRY(ct_sum(&sum, t, 1, &dim1, false));
  STRESS_TRY(ct_to_host(sum, back, (size_t)rows * sizeof *back));
  *ops += 2;
  for (int64_t r = 0; r < rows; r++) {
    float want = 0;
    for (int64_t k = 0; k < cols; k++) want += h[r * cols + k];
    STRESS_CHECK(back[r] == want, "sum row %lld: %g != %g", (long long)r, back[r], want);
  }
  STRESS_TRY(ct_max(&mx, t, 0, NULL, false));
  STRESS_TRY(ct_to_host(mx, back, sizeof *back));
  *ops += 2;
  {
    float want = h[0];
    for (int64_t i = 1; i < n; i++) want = h[i] > want ? h[i] : want;
    STRESS_CHECK(back[0] == want, "max: %g != %g", back[0], want);
  }
  STRESS_TRY(ct_matmul(&mm, t, c)); /* [rows, cols] x [cols, rows] */
  prod = malloc((size_t)(rows * rows) * sizeof *prod);
  STRESS_CHECK(prod != NULL, "out of host memory for a %lld x %lld product", (long long)rows, (long long)rows);
  STRESS_TRY(ct_to_host(mm, prod, (size_t)(rows * rows) * sizeof *prod));
  *ops += 2;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t q = 0; q < rows; q++) {
      float want = 0;
      for (int64_t k = 0; k < cols; k++) want += h[r * cols + k] * h[q * cols + k];
      STRESS_CHECK(prod[r * rows + q] == want, "matmul [%lld,%lld]: %g != %g", (long long)r, (long long)q,
                   prod[r * rows + q], want);
    }

  if (shared) {
    /* Read a tensor other threads read too: broadcast it into dst (same device only). */
    int64_t scols = ct_tensor_shape(shared)[1];
    if (ct_tensor_device(shared) == d && scols == cols) {
      STRESS_TRY(ct_copy(dst, shared));
      STRESS_TRY(ct_to_host(dst, back, (size_t)n * sizeof *back));
      *ops += 2;
      for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++)
          STRESS_CHECK(back[r * cols + k] == stress_value(shared_seed, k), "shared copy [%lld,%lld]: %g != %g",
                       (long long)r, (long long)k, back[r * cols + k], stress_value(shared_seed, k));
    }
    STRESS_TRY(ct_cast(&sh, shared, CT_I32));
    int32_t *sv = ib; /* ib holds n >= cols elements only when rows*cols >= scols */
    if (scols <= n) {
      STRESS_TRY(ct_to_host(sh, sv, (size_t)scols * sizeof *sv));
      for (int64_t k = 0; k < scols; k++)
        STRESS_CHECK(sv[k] == (int32_t)stress_value(shared_seed, k), "shared cast [%lld]: %d", (long long)k, sv[k]);
    }
    *ops += 2;
  }
  ok = 1;
done:
  free(prod);
  ct_release(sq);
  ct_release(add);
  ct_release(mm);
  ct_release(mx);
  ct_release(sum);
  ct_release(sh);
  ct_release(full);
  ct_release(dst);
  ct_release(row);
  ct_release(f32);
  ct_release(f16);
  ct_release(i32);
  ct_release(c);
  ct_release(tt);
  ct_release(t);
  free(ib);
  free(back);
  free(h);
  return ok;
}

#endif
