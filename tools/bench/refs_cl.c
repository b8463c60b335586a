/* Raw OpenCL references on the device being measured: one-line kernels, a simple two-stage
 * reduction, back-to-back launches and plain buffer transfers, written as
 * ../shared/peers/peers.c writes them. In the main process they run on the library's own
 * context and queue (obtained through the interop API), so both sides use the very same
 * OpenCL objects; the CLBlast child makes a context of its own instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>
#include <clblast_c.h>

#include "bench.h"

struct clref {
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q;
  cl_program prog;
  cl_kernel add, mul, ex, psum, pmax, tchain, copy, conv;
  size_t max_wg;
  cl_ulong max_alloc;
};

static const char *k_src =
    "__kernel void add(__global const float *a, __global const float *b, __global float *c)\n"
    "{ size_t i = get_global_id(0); c[i] = a[i] + b[i]; }\n"
    "__kernel void mul(__global const float *a, __global const float *b, __global float *c)\n"
    "{ size_t i = get_global_id(0); c[i] = a[i] * b[i]; }\n"
    "__kernel void ex(__global const float *a, __global float *c)\n"
    "{ size_t i = get_global_id(0); c[i] = exp(a[i]); }\n"
    "__kernel void tanh_chain(__global const float *a, __global float *c)\n"
    "{ size_t i = get_global_id(0); float x = a[i]; c[i] = tanh(x * 0.5f + 1.0f) * x; }\n"
    "__kernel void copy(__global const float *a, __global float *c)\n"
    "{ size_t i = get_global_id(0); c[i] = a[i]; }\n"
    "__kernel void conv_direct(__global const float *x, __global const float *w, __global float *y,\n"
    "                          int cin, int h, int wd, int cout, int k, int pad)\n"
    "{ size_t g = get_global_id(0); int oh = h + 2 * pad - k + 1, ow = wd + 2 * pad - k + 1;\n"
    "  int ox = g % ow, oy = (g / ow) % oh, co = (g / ow / oh) % cout, b = g / ow / oh / cout;\n"
    "  float acc = 0.0f;\n"
    "  for (int c = 0; c < cin; c++) for (int i = 0; i < k; i++) for (int j = 0; j < k; j++) {\n"
    "    int iy = oy + i - pad, ix = ox + j - pad;\n"
    "    if (iy >= 0 && iy < h && ix >= 0 && ix < wd)\n"
    "      acc += x[((b * cin + c) * h + iy) * wd + ix] * w[((co * cin + c) * k + i) * k + j]; }\n"
    "  y[g] = acc; }\n"
    "__kernel void partial_sum(__global const float *a, __global float *out, ulong n)\n"
    "{ size_t g = get_global_id(0), gs = get_global_size(0);\n"
    "  size_t chunk = (n + gs - 1) / gs, s = g * chunk, e = min(s + chunk, (size_t)n);\n"
    "  float acc = 0.0f; for (size_t i = s; i < e; i++) acc += a[i]; out[g] = acc; }\n"
    "__kernel void partial_max(__global const float *a, __global float *out, ulong n)\n"
    "{ size_t g = get_global_id(0), gs = get_global_size(0);\n"
    "  size_t chunk = (n + gs - 1) / gs, s = g * chunk, e = min(s + chunk, (size_t)n);\n"
    "  float acc = -INFINITY; for (size_t i = s; i < e; i++) acc = fmax(acc, a[i]); out[g] = acc; }\n";

#define CLTRY(call, what)                                                   \
  do {                                                                      \
    cl_int e_ = (call);                                                     \
    if (e_ != CL_SUCCESS) return bench_fail("raw OpenCL: %s failed (%d)", what, e_); \
  } while (0)

static int build_kernels(clref *r) {
  cl_int err;
  CLTRY(clGetDeviceInfo(r->dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof r->max_wg, &r->max_wg, NULL),
        "clGetDeviceInfo");
  CLTRY(clGetDeviceInfo(r->dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof r->max_alloc, &r->max_alloc, NULL),
        "clGetDeviceInfo");
  r->prog = clCreateProgramWithSource(r->ctx, 1, &k_src, NULL, &err);
  CLTRY(err, "clCreateProgramWithSource");
  CLTRY(clBuildProgram(r->prog, 1, &r->dev, "", NULL, NULL), "clBuildProgram");
  struct {
    cl_kernel *k;
    const char *name;
  } ks[] = {{&r->add, "add"}, {&r->mul, "mul"}, {&r->ex, "ex"}, {&r->psum, "partial_sum"}, {&r->pmax, "partial_max"},
                 {&r->tchain, "tanh_chain"}, {&r->copy, "copy"}, {&r->conv, "conv_direct"}};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    *ks[i].k = clCreateKernel(r->prog, ks[i].name, &err);
    CLTRY(err, "clCreateKernel");
  }
  return 0;
}

static int open_impl(clref *r, int pi, int di) {
  cl_uint np = 0, nd = 0;
  CLTRY(clGetPlatformIDs(0, NULL, &np), "clGetPlatformIDs");
  if (pi < 0 || (cl_uint)pi >= np) return bench_fail("raw OpenCL: no platform %d (%u platforms)", pi, np);
  cl_platform_id *plats = calloc(np, sizeof *plats);
  if (!plats) return bench_fail("out of host memory");
  cl_int err = clGetPlatformIDs(np, plats, NULL);
  cl_platform_id plat = plats[pi];
  free(plats);
  CLTRY(err, "clGetPlatformIDs");
  CLTRY(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 0, NULL, &nd), "clGetDeviceIDs");
  if (di < 0 || (cl_uint)di >= nd) return bench_fail("raw OpenCL: no device %d on platform %d", di, pi);
  cl_device_id *devs = calloc(nd, sizeof *devs);
  if (!devs) return bench_fail("out of host memory");
  err = clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, nd, devs, NULL);
  r->dev = devs[di];
  free(devs);
  CLTRY(err, "clGetDeviceIDs");
  r->ctx = clCreateContext(NULL, 1, &r->dev, NULL, NULL, &err);
  CLTRY(err, "clCreateContext");
  r->q = clCreateCommandQueue(r->ctx, r->dev, 0, &err);
  CLTRY(err, "clCreateCommandQueue");
  return build_kernels(r);
}

/* The library's objects are borrowed: retained here so clref_close() releases uniformly. */
static int open_device_impl(clref *r, ct_device *d) {
  ct_status st;
  if ((st = ct_device_cl_device_id(&r->dev, d)) != CT_OK) return bench_ct_fail("ct_device_cl_device_id", st);
  if ((st = ct_device_cl_context(&r->ctx, d)) != CT_OK) return bench_ct_fail("ct_device_cl_context", st);
  CLTRY(clRetainContext(r->ctx), "clRetainContext");
  if ((st = ct_device_cl_queue(&r->q, d)) != CT_OK) return bench_ct_fail("ct_device_cl_queue", st);
  CLTRY(clRetainCommandQueue(r->q), "clRetainCommandQueue");
  return build_kernels(r);
}

clref *clref_open_device(ct_device *d) {
  clref *r = calloc(1, sizeof *r);
  if (!r) {
    bench_fail("out of host memory");
    return NULL;
  }
  if (open_device_impl(r, d) != 0) {
    clref_close(r);
    return NULL;
  }
  return r;
}

clref *clref_open(int platform_index, int device_index) {
  clref *r = calloc(1, sizeof *r);
  if (!r) {
    bench_fail("out of host memory");
    return NULL;
  }
  if (open_impl(r, platform_index, device_index) != 0) {
    clref_close(r);
    return NULL;
  }
  return r;
}

void clref_close(clref *r) {
  if (!r) return;
  cl_kernel ks[] = {r->add, r->mul, r->ex, r->psum, r->pmax, r->tchain};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    if (ks[i]) clReleaseKernel(ks[i]);
  if (r->prog) clReleaseProgram(r->prog);
  if (r->q) clReleaseCommandQueue(r->q);
  if (r->ctx) clReleaseContext(r->ctx);
  free(r);
}

/* Device buffers of n floats, filled with host data so that no page is untouched. */
static int make_buf(clref *r, cl_mem *m, size_t n, uint32_t seed) {
  size_t bytes = n * sizeof(float);
  if (bytes > r->max_alloc)
    return bench_fail("raw OpenCL: %zu bytes exceed the device's max allocation %llu", bytes,
                      (unsigned long long)r->max_alloc);
  cl_int err;
  *m = clCreateBuffer(r->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  CLTRY(err, "clCreateBuffer");
  float *h = malloc(bytes);
  if (!h) return bench_fail("out of host memory (%zu bytes)", bytes);
  bench_fill(h, n, -1.0f, 1.0f, seed);
  err = clEnqueueWriteBuffer(r->q, *m, CL_TRUE, 0, bytes, h, 0, NULL, NULL);
  free(h);
  CLTRY(err, "clEnqueueWriteBuffer");
  return 0;
}

typedef enum job_kind { JOB_KERNEL, JOB_REDUCE, JOB_LAUNCHES, JOB_XFER, JOB_GEMM } job_kind;

struct clref_job {
  clref *r;
  job_kind kind;
  cl_mem m[3];
  /* JOB_KERNEL, JOB_REDUCE, JOB_LAUNCHES */
  cl_kernel k;
  size_t global, local;
  int launches;
  /* JOB_REDUCE */
  size_t groups;
  bool is_max;
  float result;
  /* JOB_XFER */
  void *host, *mapped;
  cl_mem staging;
  size_t bytes;
  bool to_device;
  /* JOB_GEMM */
  size_t n, batch;
};

static int enqueue(clref_job *j, int times) {
  for (int i = 0; i < times; i++)
    CLTRY(clEnqueueNDRangeKernel(j->r->q, j->k, 1, NULL, &j->global, j->local ? &j->local : NULL, 0, NULL, NULL),
          "clEnqueueNDRangeKernel");
  return 0;
}

/* Stage one on the device (one work-item per chunk), stage two on the host after reading the
 * partials back: the result is on the host when the call returns, as with ct_sum + ct_to_host. */
static int run_reduce(clref_job *j) {
  size_t one = 1;
  float part[64];
  CLTRY(clEnqueueNDRangeKernel(j->r->q, j->k, 1, NULL, &j->groups, &one, 0, NULL, NULL), "clEnqueueNDRangeKernel");
  CLTRY(clEnqueueReadBuffer(j->r->q, j->m[1], CL_TRUE, 0, j->groups * sizeof(float), part, 0, NULL, NULL),
        "clEnqueueReadBuffer");
  float acc = j->is_max ? part[0] : 0.0f;
  for (size_t i = 0; i < j->groups; i++) acc = j->is_max ? (part[i] > acc ? part[i] : acc) : acc + part[i];
  j->result = acc;
  return 0;
}

static int run_gemm(clref_job *j) {
  size_t n = j->n, nn = n * n;
  CLBlastStatusCode st =
      j->batch > 1
          ? CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f,
                                       j->m[0], 0, n, nn, j->m[1], 0, n, nn, 0.0f, j->m[2], 0, n, nn, j->batch,
                                       &j->r->q, NULL)
          : CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f, j->m[0], 0,
                         n, j->m[1], 0, n, 0.0f, j->m[2], 0, n, &j->r->q, NULL);
  if (st != CLBlastSuccess) return bench_fail("CLBlast SGEMM failed (status %d)", (int)st);
  return 0;
}

int clref_job_run(void *p) {
  clref_job *j = p;
  switch (j->kind) {
    case JOB_KERNEL: return enqueue(j, 1);
    case JOB_REDUCE: return run_reduce(j);
    case JOB_LAUNCHES:
      /* One call is the whole chain and its clFinish: the figure is per launch. */
      if (enqueue(j, j->launches) != 0) return -1;
      return clref_job_sync(j);
    case JOB_XFER:
      if (j->to_device)
        CLTRY(clEnqueueWriteBuffer(j->r->q, j->m[0], CL_TRUE, 0, j->bytes, j->host, 0, NULL, NULL),
              "clEnqueueWriteBuffer");
      else
        CLTRY(clEnqueueReadBuffer(j->r->q, j->m[0], CL_TRUE, 0, j->bytes, j->host, 0, NULL, NULL),
              "clEnqueueReadBuffer");
      return 0;
    case JOB_GEMM: return run_gemm(j);
  }
  return bench_fail("unknown reference job");
}

int clref_job_sync(void *p) {
  clref_job *j = p;
  CLTRY(clFinish(j->r->q), "clFinish");
  return 0;
}

/* peers.c takes the best of a few local sizes (NULL, 64, 256), since an implementation's own
 * choice is not always its best; this picks the one with the shortest of 3 timed launches. */
static int pick_local(const bench_opts *o, clref_job *j) {
  const size_t locals[] = {0, 64, 256};
  double best = -1;
  size_t chosen = 0;
  for (int i = 0; i < (o->quick ? 1 : 3); i++) {
    if (locals[i] && (locals[i] > j->r->max_wg || j->global % locals[i])) continue;
    j->local = locals[i];
    if (enqueue(j, 1) != 0 || clref_job_sync(j) != 0) return -1;
    for (int k = 0; k < 3; k++) {
      double t0 = bench_now();
      if (enqueue(j, 1) != 0 || clref_job_sync(j) != 0) return -1;
      double t = bench_now() - t0;
      if (best < 0 || t < best) best = t, chosen = locals[i];
    }
  }
  j->local = chosen;
  return 0;
}

static int set_args(cl_kernel k, const cl_mem *m, int n) {
  for (int i = 0; i < n; i++)
    CLTRY(clSetKernelArg(k, (cl_uint)i, sizeof m[i], &m[i]), "clSetKernelArg");
  return 0;
}

static int job_init(const bench_opts *o, clref_job *j, const char *what, size_t n) {
  clref *r = j->r;
  cl_int err;
  if (!strcmp(what, "add") || !strcmp(what, "mul") || !strcmp(what, "exp") || !strcmp(what, "tanh_chain") ||
      !strcmp(what, "copy")) {
    bool unary = !strcmp(what, "exp") || !strcmp(what, "tanh_chain") || !strcmp(what, "copy");
    j->kind = JOB_KERNEL;
    j->k = !strcmp(what, "exp")          ? r->ex
           : !strcmp(what, "tanh_chain") ? r->tchain
           : !strcmp(what, "copy")       ? r->copy
           : !strcmp(what, "add")        ? r->add
                                         : r->mul;
    j->global = n;
    int nb = unary ? 2 : 3;
    for (int i = 0; i < nb; i++)
      if (make_buf(r, &j->m[i], n, 1 + (uint32_t)i)) return -1;
    if (set_args(j->k, j->m, nb)) return -1;
    return pick_local(o, j);
  }
  if (!strcmp(what, "sum") || !strcmp(what, "max")) {
    cl_ulong nn = n;
    j->kind = JOB_REDUCE;
    j->is_max = !strcmp(what, "max");
    j->k = j->is_max ? r->pmax : r->psum;
    j->groups = 64;
    if (make_buf(r, &j->m[0], n, 6)) return -1;
    j->m[1] = clCreateBuffer(r->ctx, CL_MEM_READ_WRITE, j->groups * sizeof(float), NULL, &err);
    CLTRY(err, "clCreateBuffer");
    if (set_args(j->k, j->m, 2)) return -1;
    CLTRY(clSetKernelArg(j->k, 2, sizeof nn, &nn), "clSetKernelArg");
    return 0;
  }
  if (!strcmp(what, "launch")) {
    /* n launches of a 1024-element add, back to back, then one clFinish. */
    j->kind = JOB_LAUNCHES;
    j->k = r->add;
    j->global = 1024;
    j->launches = (int)n;
    for (int i = 0; i < 3; i++)
      if (make_buf(r, &j->m[i], 1024, 7 + (uint32_t)i)) return -1;
    return set_args(j->k, j->m, 3);
  }
  if (!strncmp(what, "h2d", 3) || !strncmp(what, "d2h", 3)) {
    j->kind = JOB_XFER;
    j->to_device = !strncmp(what, "h2d", 3);
    j->bytes = n * sizeof(float);
    if (make_buf(r, &j->m[0], n, 10)) return -1;
    if (strstr(what, "pinned")) {
      /* The usual OpenCL recipe for page-locked staging memory: a host-allocated buffer, mapped. */
      j->staging = clCreateBuffer(r->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, j->bytes, NULL, &err);
      CLTRY(err, "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)");
      j->mapped = clEnqueueMapBuffer(r->q, j->staging, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, j->bytes, 0, NULL,
                                     NULL, &err);
      CLTRY(err, "clEnqueueMapBuffer");
      j->host = j->mapped;
    } else if (!(j->host = malloc(j->bytes))) {
      return bench_fail("out of host memory (%zu bytes)", j->bytes);
    }
    bench_fill(j->host, n, -1.0f, 1.0f, 11);
    return 0;
  }
  if (!strncmp(what, "clblast_sgemm", 13)) {
    j->kind = JOB_GEMM;
    j->batch = !strcmp(what, "clblast_sgemm_batch") ? BENCH_BATCH : 1;
    j->n = n;
    for (int i = 0; i < 3; i++)
      if (make_buf(r, &j->m[i], n * n * j->batch, 81 + (uint32_t)i)) return -1;
    return 0;
  }
  return bench_fail("unknown reference '%s'", what);
}

/* A new job on r (NULL when r is, or out of memory). */
static clref_job *job_alloc(clref *r) {
  if (!r) return NULL;
  clref_job *j = calloc(1, sizeof *j);
  if (!j) {
    bench_fail("out of host memory");
    return NULL;
  }
  j->r = r;
  return j;
}

clref_job *clref_job_conv(const bench_opts *o, clref *r, const int dims[7]) {
  clref_job *j = job_alloc(r);
  if (!j) return NULL;
  j->kind = JOB_KERNEL;
  j->k = r->conv;
  int n = dims[0], cin = dims[1], h = dims[2], w = dims[3], cout = dims[4], k = dims[5], pad = dims[6];
  size_t oh = (size_t)(h + 2 * pad - k + 1), ow = (size_t)(w + 2 * pad - k + 1);
  j->global = (size_t)n * (size_t)cout * oh * ow;
  int ok = make_buf(r, &j->m[0], (size_t)n * (size_t)cin * (size_t)h * (size_t)w, 91) == 0 &&
           make_buf(r, &j->m[1], (size_t)cout * (size_t)cin * (size_t)k * (size_t)k, 92) == 0 &&
           make_buf(r, &j->m[2], j->global, 93) == 0 && set_args(j->k, j->m, 3) == 0;
  for (int i = 1; ok && i < 7; i++)
    ok = clSetKernelArg(j->k, (cl_uint)(i + 2), sizeof(cl_int), &dims[i]) == CL_SUCCESS;
  if (!ok || pick_local(o, j) != 0) {
    if (ok) bench_fail("raw OpenCL: setting the direct convolution's arguments failed");
    clref_job_free(j);
    return NULL;
  }
  return j;
}

clref_job *clref_job_new(const bench_opts *o, clref *r, const char *what, size_t n) {
  clref_job *j = job_alloc(r);
  if (!j) return NULL;
  if (job_init(o, j, what, n) != 0) {
    clref_job_free(j);
    return NULL;
  }
  return j;
}

void clref_job_free(clref_job *j) {
  if (!j) return;
  if (j->mapped) {
    clEnqueueUnmapMemObject(j->r->q, j->staging, j->mapped, 0, NULL, NULL);
    clFinish(j->r->q);
  } else if (j->kind == JOB_XFER) {
    free(j->host);
  }
  if (j->staging) clReleaseMemObject(j->staging);
  for (int i = 0; i < 3; i++)
    if (j->m[i]) clReleaseMemObject(j->m[i]);
  free(j);
}
