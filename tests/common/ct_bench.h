/* Timing helpers shared by the measurement programs under tests/ (bench_*.c: built, not run as
 * tests). Header-only, so a program needs nothing but ct_test_inc. */
#ifndef CT_BENCH_H
#define CT_BENCH_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double ct_bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* qsort comparator for doubles, ascending. */
static inline int ct_bench_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v); for an even n the mean of the middle two. */
static inline double ct_bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, ct_bench_cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
