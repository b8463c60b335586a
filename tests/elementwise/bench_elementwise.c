/* Elementwise speed against the raw OpenCL references of /work/shared/peers (not a test).
 *
 * Runs in one process, on the default device, interleaving each libcltensor measurement with its
 * raw OpenCL counterpart on the same context and queue, so both see the same machine load:
 *   add      ct_add_out on 2^25 contiguous f32 vs peers' one-line kernel `cl_add`
 *            (c[i] = a[i] + b[i], best of local sizes NULL/64/256), GB/s counting 3 arrays
 *   chain    a chain of 1024-element _out ops (add, mul, sub, relu, maximum, ...) vs peers'
 *            `cl_launch` (back-to-back launches of the 1024-element add), microseconds per op
 * plus, for information, other dtypes and layouts of the big add. Each figure is the median of
 * the paired runs described in main(); the summary gives the median ratio over the rounds and
 * its spread.
 *
 * Usage: bench_elementwise [rounds]   (CLTENSOR_DEVICE picks the device) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ct_bench.h"
#include "cltensor/cltensor.h"
#include "device/device.h"
#include "tensor/tensor.h"

#define RUNS 7

#define CHECK_CT(x)                                                                \
  do {                                                                             \
    ct_status s_ = (x);                                                            \
    if (s_ != CT_OK) {                                                             \
      fprintf(stderr, "bench: %s: %s: %s\n", #x, ct_status_name(s_), ct_last_error()); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)
#define CHECK_CL(x)                                                 \
  do {                                                              \
    cl_int e_ = (x);                                                \
    if (e_ != CL_SUCCESS) {                                         \
      fprintf(stderr, "bench: %s failed: %d\n", #x, (int)e_);       \
      exit(1);                                                      \
    }                                                               \
  } while (0)

static const char *peer_src =
    "__kernel void add(__global const float *a, __global const float *b, __global float *c)\n"
    "{ size_t i = get_global_id(0); c[i] = a[i] + b[i]; }\n";

static cl_command_queue q;
static cl_kernel peer_add;

/* One run of peers' cl_add (local size l, 0 for NULL), in GB/s. */
static double peer_add_once(size_t n, size_t l) {
  size_t g = n;
  double t0 = ct_bench_now();
  CHECK_CL(clEnqueueNDRangeKernel(q, peer_add, 1, NULL, &g, l ? &l : NULL, 0, NULL, NULL));
  clFinish(q);
  return 3.0 * (double)n * 4 / (ct_bench_now() - t0) / 1e9;
}

/* peers' cl_add picks the best of local sizes NULL, 64, 256 by median; so does this, once. */
static size_t peer_best_local(size_t n) {
  const size_t locals[] = {0, 64, 256};
  double best = 0, t[RUNS];
  size_t bl = 0;
  for (int li = 0; li < 3; li++) {
    peer_add_once(n, locals[li]);
    for (int r = 0; r < RUNS; r++) t[r] = peer_add_once(n, locals[li]);
    double m = ct_bench_median(t, RUNS);
    if (m > best) best = m, bl = locals[li];
  }
  return bl;
}

/* Microseconds per launch of peers' 1024-element add, `launches` back to back. */
static double peer_launch_once(int launches) {
  size_t g = 1024;
  double t0 = ct_bench_now();
  for (int k = 0; k < launches; k++) CHECK_CL(clEnqueueNDRangeKernel(q, peer_add, 1, NULL, &g, NULL, 0, NULL, NULL));
  clFinish(q);
  return (ct_bench_now() - t0) / launches * 1e6;
}

typedef ct_status (*binop)(ct_tensor *, const ct_tensor *, const ct_tensor *);

/* One run of op into out, GB/s counting 2 inputs + 1 output at their own sizes. */
static double ct_bw_once(binop op, ct_tensor *out, const ct_tensor *a, const ct_tensor *b, ct_device *d) {
  double bytes = (double)(ct_tensor_nbytes(out) + ct_tensor_nbytes(a) + ct_tensor_nbytes(b));
  double t0 = ct_bench_now();
  CHECK_CT(op(out, a, b));
  CHECK_CT(ct_device_synchronize(d));
  return bytes / (ct_bench_now() - t0) / 1e9;
}

static double ct_bw(binop op, ct_tensor *out, const ct_tensor *a, const ct_tensor *b, ct_device *d) {
  double t[RUNS];
  ct_bw_once(op, out, a, b, d);
  for (int r = 0; r < RUNS; r++) t[r] = ct_bw_once(op, out, a, b, d);
  return ct_bench_median(t, RUNS);
}

/* Microseconds per op of a chain of 1024-element _out ops (8 * reps ops, one wait at the end):
 * add, mul, sub, relu, maximum, mul by a scalar, add, minimum. */
static double ct_chain_once(ct_tensor *x, ct_tensor *y, ct_tensor *z, ct_device *d, int reps) {
  double t0 = ct_bench_now();
  for (int k = 0; k < reps; k++) {
    CHECK_CT(ct_add_out(z, x, y));
    CHECK_CT(ct_mul_out(z, z, y));
    CHECK_CT(ct_sub_out(z, z, x));
    CHECK_CT(ct_relu_out(z, z));
    CHECK_CT(ct_maximum_out(z, z, x));
    CHECK_CT(ct_mul_scalar_out(z, z, 0.5));
    CHECK_CT(ct_add_out(z, z, y));
    CHECK_CT(ct_minimum_out(z, z, y));
  }
  CHECK_CT(ct_device_synchronize(d));
  return (ct_bench_now() - t0) / (8.0 * reps) * 1e6;
}

static void summary(const char *what, double *ratio, int n, const char *goal) {
  double v[64];
  memcpy(v, ratio, (size_t)n * sizeof *v);
  qsort(v, (size_t)n, sizeof *v, ct_bench_cmp);
  printf("%-8s median ratio %.3f  (min %.3f, max %.3f over %d rounds)  goal %s\n", what, ct_bench_median(v, n), v[0], v[n - 1], n,
         goal);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (rounds < 1 || rounds > 64) rounds = 5;
  ct_device *d;
  CHECK_CT(ct_device_default(&d));
  CHECK_CT(ct_device_open(d));
  printf("device %s (%s)\n", ct_device_spec(d), ct_device_properties(d)->name);
  q = ct__device_queue(d);
  cl_context ctx = ct__device_context(d);
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &peer_src, NULL, &err);
  CHECK_CL(err);
  CHECK_CL(clBuildProgram(prog, 1, &d->id, "", NULL, NULL));
  peer_add = clCreateKernel(prog, "add", &err);
  CHECK_CL(err);

  size_t n = (size_t)1 << 25;
  float *h = malloc(n * sizeof *h);
  for (size_t i = 0; i < n; i++) h[i] = (float)(i % 1000) * 1e-3f;
  int64_t shape[1] = {(int64_t)n};
  ct_tensor *a, *b, *c;
  CHECK_CT(ct_from_host(&a, d, CT_F32, 1, shape, h));
  CHECK_CT(ct_from_host(&b, d, CT_F32, 1, shape, h));
  CHECK_CT(ct_from_host(&c, d, CT_F32, 1, shape, h));
  /* The peer kernel works on the same buffers (offset 0 of their blocks). */
  cl_mem A = ct__tensor_mem(a), B = ct__tensor_mem(b), C = ct__tensor_mem(c);
  if (ct__tensor_byte_offset(a) || ct__tensor_byte_offset(b) || ct__tensor_byte_offset(c)) {
    size_t bytes = n * sizeof(float);
    A = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, h, &err);
    B = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, h, &err);
    C = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, h, &err);
  }
  clSetKernelArg(peer_add, 0, sizeof A, &A);
  clSetKernelArg(peer_add, 1, sizeof B, &B);
  clSetKernelArg(peer_add, 2, sizeof C, &C);

  int64_t small[1] = {1024};
  ct_tensor *x, *y, *z;
  CHECK_CT(ct_from_host(&x, d, CT_F32, 1, small, h));
  CHECK_CT(ct_from_host(&y, d, CT_F32, 1, small, h + 1024));
  CHECK_CT(ct_empty(&z, d, CT_F32, 1, small));

  /* Each round: PAIRS alternations of (peer, ct, peer); a pair's ratio is ct over the mean of
   * the peer runs on either side, so both see the same moment's load. The round reports the
   * median ratio of its pairs and the medians of both sides. */
  enum { PAIRS = 9 };
  size_t bl = peer_best_local(n);
  printf("cl_add best local size: %zu (0 = NULL)\n", bl);
  ct_bw_once(ct_add_out, c, a, b, d);
  ct_chain_once(x, y, z, d, 25);
  peer_launch_once(200);
  double add_ratio[64], chain_ratio[64];
  static double all_p[64 * (PAIRS + 1)], all_c[64 * PAIRS], all_l[64 * (PAIRS + 1)], all_h[64 * PAIRS];
  int np = 0, nc = 0, nl = 0, nh = 0;
  for (int r = 0; r < rounds; r++) {
    double pr[PAIRS], pv[PAIRS + 1], cv[PAIRS];
    pv[0] = peer_add_once(n, bl);
    for (int i = 0; i < PAIRS; i++) {
      cv[i] = ct_bw_once(ct_add_out, c, a, b, d);
      pv[i + 1] = peer_add_once(n, bl);
      pr[i] = cv[i] / (0.5 * (pv[i] + pv[i + 1]));
    }
    for (int i = 0; i <= PAIRS; i++) all_p[np++] = pv[i];
    for (int i = 0; i < PAIRS; i++) all_c[nc++] = cv[i];
    add_ratio[r] = ct_bench_median(pr, PAIRS);
    printf("round %d  add: cl_add %.2f GB/s, ct_add_out %.2f GB/s (medians), ratio %.3f\n", r, ct_bench_median(pv, PAIRS + 1),
           ct_bench_median(cv, PAIRS), add_ratio[r]);
    double lv[PAIRS + 1], chv[PAIRS];
    lv[0] = peer_launch_once(400);
    for (int i = 0; i < PAIRS; i++) {
      chv[i] = ct_chain_once(x, y, z, d, 50);
      lv[i + 1] = peer_launch_once(400);
      pr[i] = chv[i] / (0.5 * (lv[i] + lv[i + 1]));
    }
    for (int i = 0; i <= PAIRS; i++) all_l[nl++] = lv[i];
    for (int i = 0; i < PAIRS; i++) all_h[nh++] = chv[i];
    chain_ratio[r] = ct_bench_median(pr, PAIRS);
    printf("round %d  chain: cl_launch %.3f us, ct chain %.3f us/op (medians), ratio %.3f\n", r, ct_bench_median(lv, PAIRS + 1),
           ct_bench_median(chv, PAIRS), chain_ratio[r]);
    fflush(stdout);
  }
  summary("add", add_ratio, rounds, ">= 0.9 (ct_add_out / cl_add)");
  summary("chain", chain_ratio, rounds, "<= 2.0 (ct op / cl_launch)");
  /* The same figures pooled over every run of the sitting, for those who prefer medians of
   * the two sides to a median of pairs. */
  double mp = ct_bench_median(all_p, np), mc = ct_bench_median(all_c, nc), ml = ct_bench_median(all_l, nl), mh = ct_bench_median(all_h, nh);
  printf("pooled   add: cl_add %.2f GB/s, ct_add_out %.2f GB/s, ratio %.3f;  chain: cl_launch %.3f us, ct %.3f us/op, "
         "ratio %.3f\n", mp, mc, mc / mp, ml, mh, mh / ml);

  /* For information: the allocating form, other dtypes, broadcast and strided layouts. */
  double t[RUNS];
  for (int r = 0; r < RUNS; r++) {
    ct_tensor *o;
    double t0 = ct_bench_now();
    CHECK_CT(ct_add(&o, a, b));
    CHECK_CT(ct_device_synchronize(d));
    t[r] = 3.0 * (double)n * 4 / (ct_bench_now() - t0) / 1e9;
    ct_release(o);
  }
  printf("info  ct_add (allocating) f32 2^25: %.2f GB/s\n", ct_bench_median(t, RUNS));
  const ct_dtype dts[] = {CT_F16, CT_BF16, CT_I32, CT_U8, CT_F64};
  for (int i = 0; i < 5; i++) {
    if (dts[i] == CT_F64 && !d->props.fp64) continue;
    ct_tensor *p, *s, *o;
    CHECK_CT(ct_zeros(&p, d, dts[i], 1, shape));
    CHECK_CT(ct_zeros(&s, d, dts[i], 1, shape));
    CHECK_CT(ct_zeros(&o, d, dts[i], 1, shape));
    printf("info  ct_add_out %s 2^25: %.2f GB/s\n", ct_dtype_name(dts[i]), ct_bw(ct_add_out, o, p, s, d));
    ct_release(p);
    ct_release(s);
    ct_release(o);
  }
  {
    int64_t sq[2] = {4096, 8192}, row[2] = {1, 8192};
    ct_tensor *m2, *r2, *o2, *tv;
    CHECK_CT(ct__tensor_view(&m2, a, 2, sq, (int64_t[]){8192, 1}, 0));
    CHECK_CT(ct__tensor_view(&o2, c, 2, sq, (int64_t[]){8192, 1}, 0));
    CHECK_CT(ct__tensor_view(&r2, b, 2, row, (int64_t[]){0, 1}, 0));
    printf("info  ct_add_out f32 [4096, 8192] + [1, 8192] (broadcast row): %.2f GB/s\n", ct_bw(ct_add_out, o2, m2, r2, d));
    ct_release(r2);
    CHECK_CT(ct__tensor_view(&tv, b, 2, sq, (int64_t[]){1, 4096}, 0));
    printf("info  ct_add_out f32 [4096, 8192] + transposed view: %.2f GB/s\n", ct_bw(ct_add_out, o2, m2, tv, d));
    ct_release(tv);
    ct_release(m2);
    ct_release(o2);
  }
  ct_release(x);
  ct_release(y);
  ct_release(z);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  free(h);
  clReleaseKernel(peer_add);
  clReleaseProgram(prog);
  ct_shutdown();
  return 0;
}
