/* The C side of python/bench/small_op.py: the same 1024-element f32 add the Python side times,
 * as a C program calls it. Prints three figures in microseconds per iteration (median of RUNS):
 *   dispatch      ct_add + ct_release, N times, then ct_device_synchronize (the call cost)
 *   dispatch_cpu  the same loop's CPU time on the calling thread, without the synchronize (what
 *                 the call costs the caller, less exposed than wall time to a loaded machine)
 *   roundtrip     ct_add, ct_to_host of the 4 KiB result, ct_release (a result read every time) */
#include <cltensor/cltensor.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 1024
#define RUNS 7

static double now_us(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#define TRY(call)                                                   \
  do {                                                              \
    if ((call) != CT_OK) {                                          \
      fprintf(stderr, "small_op: %s\n", ct_last_error());           \
      return 1;                                                     \
    }                                                               \
  } while (0)

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 2000;
  ct_device *d;
  TRY(ct_device_default(&d));
  static float host[N], res[N];
  for (int i = 0; i < N; i++) host[i] = (float)i;
  int64_t shape[1] = {N};
  ct_tensor *a = NULL, *b = NULL, *c = NULL;
  TRY(ct_from_host(&a, d, CT_F32, 1, shape, host));
  TRY(ct_from_host(&b, d, CT_F32, 1, shape, host));
  double t[3][RUNS];
  for (int r = -1; r < RUNS; r++) { /* run -1 warms up (kernel builds) */
    double t0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < iters; i++) {
      TRY(ct_add(&c, a, b));
      ct_release(c);
    }
    double c1 = now_us(CLOCK_THREAD_CPUTIME_ID);
    TRY(ct_device_synchronize(d));
    double t1 = now_us(CLOCK_MONOTONIC);
    for (int i = 0; i < iters / 4; i++) {
      TRY(ct_add(&c, a, b));
      TRY(ct_to_host(c, res, sizeof res));
      ct_release(c);
    }
    double t2 = now_us(CLOCK_MONOTONIC);
    if (r >= 0) {
      t[0][r] = (t1 - t0) / iters;
      t[1][r] = (c1 - c0) / iters;
      t[2][r] = (t2 - t1) / (iters / 4);
    }
  }
  for (int k = 0; k < 3; k++) qsort(t[k], RUNS, sizeof(double), cmp);
  printf("dispatch %.3f\ndispatch_cpu %.3f\nroundtrip %.3f\n", t[0][RUNS / 2], t[1][RUNS / 2], t[2][RUNS / 2]);
  ct_release(a);
  ct_release(b);
  ct_shutdown();
  return res[N - 1] == 2.0f * (N - 1) ? 0 : 1;
}
