/* Paired measurement of the sum speed target (issue 4): ct_sum of 2^25 f32 plus reading the
 * scalar back, against the two references of ../shared/peers/run in the same process:
 *   host_sum  peers' plain one-thread loop (16 accumulators), on a malloc'd array
 *   cl_sum    peers' simple two-stage OpenCL sum (64 work-items, serial loops, host adds the 64
 *             partials), on its own context of the same device
 * Each repetition runs the three back to back, so a ratio compares runs under the same load;
 * the medians and quartiles of the per-repetition ratios are the figures (the machine may be
 * shared). Not a test: build it with the tests and run
 *   build/tests/reduce/bench_sum [repetitions]
 * with the device chosen by $CLTENSOR_DEVICE (the cl_sum reference uses the first device of the
 * first platform, as peers does). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ct_bench.h"
#include "cltensor/cltensor.h"

static const char *cl_src =
    "__kernel void partial_sum(__global const float *a, __global float *out, ulong n)\n"
    "{ size_t g = get_global_id(0), gs = get_global_size(0);\n"
    "  size_t chunk = (n + gs - 1) / gs, s = g * chunk, e = min(s + chunk, (size_t)n);\n"
    "  float acc = 0.0f; for (size_t i = s; i < e; i++) acc += a[i]; out[g] = acc; }\n";

/* peers' host_sum loop. */
static float host_sum(const float *h, size_t n) {
  float acc[16] = {0};
  for (size_t i = 0; i < n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += h[i + j];
  float s = 0;
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

struct clsum {
  cl_context ctx;
  cl_command_queue q;
  cl_kernel k;
  cl_mem a, p;
};

static int clsum_init(struct clsum *c, const float *h, size_t n) {
  cl_platform_id plat;
  cl_device_id dev;
  cl_int e;
  if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS)
    return -1;
  c->ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  if (!c->ctx) return -1;
  c->q = clCreateCommandQueue(c->ctx, dev, 0, &e);
  cl_program prog = clCreateProgramWithSource(c->ctx, 1, &cl_src, NULL, &e);
  if (!c->q || !prog || clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) return -1;
  c->k = clCreateKernel(prog, "partial_sum", &e);
  clReleaseProgram(prog);
  c->a = clCreateBuffer(c->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float), (void *)h, &e);
  c->p = clCreateBuffer(c->ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &e);
  cl_ulong nn = n;
  if (!c->k || !c->a || !c->p || clSetKernelArg(c->k, 0, sizeof c->a, &c->a) != CL_SUCCESS ||
      clSetKernelArg(c->k, 1, sizeof c->p, &c->p) != CL_SUCCESS ||
      clSetKernelArg(c->k, 2, sizeof nn, &nn) != CL_SUCCESS)
    return -1;
  return 0;
}

static float clsum_run(struct clsum *c) {
  size_t groups = 64, local = 1;
  float part[64];
  clEnqueueNDRangeKernel(c->q, c->k, 1, NULL, &groups, &local, 0, NULL, NULL);
  clEnqueueReadBuffer(c->q, c->p, CL_TRUE, 0, sizeof part, part, 0, NULL, NULL);
  double s = 0;
  for (int i = 0; i < 64; i++) s += part[i];
  return (float)s;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 31;
  if (reps < 3) reps = 3;
  size_t n = (size_t)1 << 25, bytes = n * sizeof(float);
  float *h = malloc(bytes);
  double *tc = malloc((size_t)reps * sizeof(double)), *th = malloc((size_t)reps * sizeof(double));
  double *tl = malloc((size_t)reps * sizeof(double)), *rh = malloc((size_t)reps * sizeof(double));
  double *rl = malloc((size_t)reps * sizeof(double));
  if (!h || !tc || !th || !tl || !rh || !rl) return 1;
  for (size_t i = 0; i < n; i++) h[i] = (float)(i % 1000) * 1e-3f;
  ct_device *d;
  ct_tensor *x = NULL;
  int64_t shape[1] = {(int64_t)n};
  if (ct_device_default(&d) != CT_OK || ct_from_host(&x, d, CT_F32, 1, shape, h) != CT_OK) {
    fprintf(stderr, "bench_sum: %s\n", ct_last_error());
    return 1;
  }
  struct clsum c;
  if (clsum_init(&c, h, n) != 0) {
    fprintf(stderr, "bench_sum: the cl_sum reference could not be set up\n");
    return 1;
  }
  float vct = 0, vh = 0, vcl = 0;
  for (int r = -2; r < reps; r++) {
    double t0 = ct_bench_now();
    ct_tensor *s = NULL;
    if (ct_sum(&s, x, 0, NULL, false) != CT_OK || ct_to_host(s, &vct, sizeof vct) != CT_OK) {
      fprintf(stderr, "bench_sum: %s\n", ct_last_error());
      return 1;
    }
    ct_release(s);
    double t1 = ct_bench_now();
    vh = host_sum(h, n);
    double t2 = ct_bench_now();
    vcl = clsum_run(&c);
    double t3 = ct_bench_now();
    if (r < 0) continue; /* warm-up */
    tc[r] = (double)bytes / (t1 - t0) / 1e9;
    th[r] = (double)bytes / (t2 - t1) / 1e9;
    tl[r] = (double)bytes / (t3 - t2) / 1e9;
    rh[r] = tc[r] / th[r];
    rl[r] = tc[r] / tl[r];
  }
  double exact = 0;
  for (size_t i = 0; i < n; i++) exact += h[i];
  double *all[5] = {tc, th, tl, rh, rl};
  for (int i = 0; i < 5; i++) qsort(all[i], (size_t)reps, sizeof(double), ct_bench_cmp);
  int m = reps / 2, q1 = reps / 4, q3 = (3 * reps) / 4;
  printf("sum of 2^25 f32 on %s, %d paired repetitions, median [q1, q3]\n", ct_device_spec(d), reps);
  printf("  ct_sum   %6.2f GB/s [%.2f, %.2f]\n", tc[m], tc[q1], tc[q3]);
  printf("  host_sum %6.2f GB/s [%.2f, %.2f]\n", th[m], th[q1], th[q3]);
  printf("  cl_sum   %6.2f GB/s [%.2f, %.2f]\n", tl[m], tl[q1], tl[q3]);
  printf("  ct_sum / host_sum  %.3f [%.3f, %.3f]\n", rh[m], rh[q1], rh[q3]);
  printf("  ct_sum / cl_sum    %.3f [%.3f, %.3f]\n", rl[m], rl[q1], rl[q3]);
  printf("  results: ct_sum %.1f, host_sum %.1f, cl_sum %.1f, double %.1f\n", vct, vh, vcl, exact);
  ct_release(x);
  ct_shutdown();
  free(h);
  for (int i = 0; i < 5; i++) free(all[i]);
  return 0;
}
