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
  cl_kernel add, mul, ex, psum, pmax;
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
  } ks[] = {{&r->add, "add"}, {&r->mul, "mul"}, {&r->ex, "ex"}, {&r->psum, "partial_sum"}, {&r->pmax, "partial_max"}};
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
  cl_kernel ks[] = {r->add, r->mul, r->ex, r->psum, r->pmax};
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

static void release_bufs(cl_mem *m, int n) {
  for (int i = 0; i < n; i++)
    if (m[i]) clReleaseMemObject(m[i]);
}

typedef struct launch_ctx {
  clref *r;
  cl_kernel k;
  size_t global, local;
  int launches;
} launch_ctx;

static int do_launch(void *p) {
  launch_ctx *c = p;
  for (int i = 0; i < c->launches; i++)
    CLTRY(clEnqueueNDRangeKernel(c->r->q, c->k, 1, NULL, &c->global, c->local ? &c->local : NULL, 0, NULL,
                                 NULL),
          "clEnqueueNDRangeKernel");
  return 0;
}

static int do_finish(void *p) {
  launch_ctx *c = p;
  CLTRY(clFinish(c->r->q), "clFinish");
  return 0;
}

/* Times a one-dimensional kernel over n items, best median over a few local sizes (NULL, 64,
 * 256) as peers.c does, since the implementation's own choice is not always its best. */
static int time_kernel(const bench_opts *o, clref *r, cl_kernel k, size_t n, double gbytes, bench_fig *f) {
  const size_t locals[] = {0, 64, 256};
  int nl = o->quick ? 1 : 3;
  bench_fig best = *f, cur;
  for (int i = 0; i < nl; i++) {
    if (locals[i] && (locals[i] > r->max_wg || n % locals[i])) continue;
    launch_ctx c = {r, k, n, locals[i], 1};
    cur = *f;
    bench_clear_error();
    if (bench_measure(o, &cur, do_launch, do_finish, &c, 1000, gbytes) != 0) return -1;
    if (!(best.median >= cur.median)) best = cur;
  }
  *f = best;
  return 0;
}

int clref_binary(const bench_opts *o, clref *r, const char *op, size_t n, bench_fig *f) {
  cl_mem m[3] = {0};
  int rc = -1;
  cl_kernel k = strcmp(op, "add") == 0 ? r->add : r->mul;
  if (make_buf(r, &m[0], n, 1) || make_buf(r, &m[1], n, 2) || make_buf(r, &m[2], n, 3)) goto done;
  for (cl_uint i = 0; i < 3; i++)
    if (clSetKernelArg(k, i, sizeof m[i], &m[i]) != CL_SUCCESS) {
      bench_fail("raw OpenCL: clSetKernelArg failed");
      goto done;
    }
  rc = time_kernel(o, r, k, n, 3.0 * (double)n * sizeof(float) / 1e9, f);
done:
  release_bufs(m, 3);
  if (rc) bench_fig_fail(f, false, bench_error());
  return rc;
}

int clref_unary_exp(const bench_opts *o, clref *r, size_t n, bench_fig *f) {
  cl_mem m[2] = {0};
  int rc = -1;
  if (make_buf(r, &m[0], n, 4) || make_buf(r, &m[1], n, 5)) goto done;
  if (clSetKernelArg(r->ex, 0, sizeof m[0], &m[0]) != CL_SUCCESS ||
      clSetKernelArg(r->ex, 1, sizeof m[1], &m[1]) != CL_SUCCESS) {
    bench_fail("raw OpenCL: clSetKernelArg failed");
    goto done;
  }
  rc = time_kernel(o, r, r->ex, n, 2.0 * (double)n * sizeof(float) / 1e9, f);
done:
  release_bufs(m, 2);
  if (rc) bench_fig_fail(f, false, bench_error());
  return rc;
}

typedef struct reduce_ctx {
  clref *r;
  cl_kernel k;
  cl_mem part;
  size_t groups;
  int is_max;
  float result;
} reduce_ctx;

/* Stage one on the device (one work-item per chunk), stage two on the host after reading the
 * partials back: the result is on the host when the call returns, as with ct_sum + ct_to_host. */
static int do_reduce(void *p) {
  reduce_ctx *c = p;
  size_t one = 1;
  float part[64];
  CLTRY(clEnqueueNDRangeKernel(c->r->q, c->k, 1, NULL, &c->groups, &one, 0, NULL, NULL),
        "clEnqueueNDRangeKernel");
  CLTRY(clEnqueueReadBuffer(c->r->q, c->part, CL_TRUE, 0, c->groups * sizeof(float), part, 0, NULL, NULL),
        "clEnqueueReadBuffer");
  float acc = c->is_max ? part[0] : 0.0f;
  for (size_t i = 0; i < c->groups; i++) acc = c->is_max ? (part[i] > acc ? part[i] : acc) : acc + part[i];
  c->result = acc;
  return 0;
}

int clref_reduce(const bench_opts *o, clref *r, const char *op, size_t n, bench_fig *f) {
  cl_mem m[2] = {0};
  int rc = -1;
  reduce_ctx c = {r, strcmp(op, "max") == 0 ? r->pmax : r->psum, NULL, 64, strcmp(op, "max") == 0, 0};
  cl_ulong nn = n;
  cl_int err;
  if (make_buf(r, &m[0], n, 6)) goto done;
  m[1] = c.part = clCreateBuffer(r->ctx, CL_MEM_READ_WRITE, c.groups * sizeof(float), NULL, &err);
  if (err != CL_SUCCESS) {
    bench_fail("raw OpenCL: clCreateBuffer failed (%d)", err);
    goto done;
  }
  if (clSetKernelArg(c.k, 0, sizeof m[0], &m[0]) != CL_SUCCESS ||
      clSetKernelArg(c.k, 1, sizeof m[1], &m[1]) != CL_SUCCESS ||
      clSetKernelArg(c.k, 2, sizeof nn, &nn) != CL_SUCCESS) {
    bench_fail("raw OpenCL: clSetKernelArg failed");
    goto done;
  }
  rc = bench_measure(o, f, do_reduce, NULL, &c, 1000, (double)n * sizeof(float) / 1e9);
done:
  release_bufs(m, 2);
  if (rc) bench_fig_fail(f, false, bench_error());
  return rc;
}

static int do_launch_finish(void *p) { return do_launch(p) || do_finish(p) ? -1 : 0; }

int clref_launch(const bench_opts *o, clref *r, int launches, bench_fig *f) {
  cl_mem m[3] = {0};
  int rc = -1;
  if (make_buf(r, &m[0], 1024, 7) || make_buf(r, &m[1], 1024, 8) || make_buf(r, &m[2], 1024, 9)) goto done;
  for (cl_uint i = 0; i < 3; i++)
    if (clSetKernelArg(r->add, i, sizeof m[i], &m[i]) != CL_SUCCESS) {
      bench_fail("raw OpenCL: clSetKernelArg failed");
      goto done;
    }
  launch_ctx c = {r, r->add, 1024, 0, launches};
  /* One call is the whole chain and its clFinish; the figure is per launch. */
  rc = bench_measure(o, f, do_launch_finish, NULL, &c, 1, 1e6 / launches);
done:
  release_bufs(m, 3);
  if (rc) bench_fig_fail(f, false, bench_error());
  return rc;
}

typedef struct xfer_ctx {
  clref *r;
  cl_mem dev;
  void *host;
  size_t bytes;
  int to_device;
} xfer_ctx;

static int do_xfer(void *p) {
  xfer_ctx *c = p;
  if (c->to_device)
    CLTRY(clEnqueueWriteBuffer(c->r->q, c->dev, CL_TRUE, 0, c->bytes, c->host, 0, NULL, NULL),
          "clEnqueueWriteBuffer");
  else
    CLTRY(clEnqueueReadBuffer(c->r->q, c->dev, CL_TRUE, 0, c->bytes, c->host, 0, NULL, NULL),
          "clEnqueueReadBuffer");
  return 0;
}

int clref_transfer(const bench_opts *o, clref *r, bool to_device, bool pinned, size_t bytes, bench_fig *f) {
  cl_mem m[2] = {0};
  void *host = NULL, *mapped = NULL;
  int rc = -1;
  cl_int err;
  if (make_buf(r, &m[0], bytes / sizeof(float), 10)) goto done;
  if (pinned) {
    /* The usual OpenCL recipe for page-locked staging memory: a host-allocated buffer, mapped. */
    m[1] = clCreateBuffer(r->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err);
    if (err == CL_SUCCESS)
      mapped = clEnqueueMapBuffer(r->q, m[1], CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
      bench_fail("raw OpenCL: pinned staging buffer failed (%d)", err);
      goto done;
    }
    host = mapped;
  } else if (!(host = malloc(bytes))) {
    bench_fail("out of host memory (%zu bytes)", bytes);
    goto done;
  }
  bench_fill(host, bytes / sizeof(float), -1.0f, 1.0f, 11);
  xfer_ctx c = {r, m[0], host, bytes, to_device};
  rc = bench_measure(o, f, do_xfer, NULL, &c, 1000, (double)bytes / 1e9);
done:
  if (mapped) {
    clEnqueueUnmapMemObject(r->q, m[1], mapped, 0, NULL, NULL);
    clFinish(r->q);
  } else {
    free(host);
  }
  release_bufs(m, 2);
  if (rc) bench_fig_fail(f, false, bench_error());
  return rc;
}

typedef struct gemm_ctx {
  clref *r;
  cl_mem a, b, c;
  size_t n, batch;
} gemm_ctx;

static int do_clblast(void *p) {
  gemm_ctx *g = p;
  size_t n = g->n, nn = n * n;
  CLBlastStatusCode st =
      g->batch > 1
          ? CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f,
                                       g->a, 0, n, nn, g->b, 0, n, nn, 0.0f, g->c, 0, n, nn, g->batch, &g->r->q,
                                       NULL)
          : CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f, g->a, 0, n,
                         g->b, 0, n, 0.0f, g->c, 0, n, &g->r->q, NULL);
  if (st != CLBlastSuccess) return bench_fail("CLBlast SGEMM failed (status %d)", (int)st);
  return 0;
}

static int do_gemm_finish(void *p) {
  gemm_ctx *g = p;
  CLTRY(clFinish(g->r->q), "clFinish");
  return 0;
}

int clref_clblast_sgemm(const bench_opts *o, clref *r, size_t n, size_t batch, bench_fig *f) {
  cl_mem m[3] = {0};
  int rc = -1;
  size_t count = n * n * batch;
  if (make_buf(r, &m[0], count, 81) || make_buf(r, &m[1], count, 82) || make_buf(r, &m[2], count, 83)) goto done;
  gemm_ctx g = {r, m[0], m[1], m[2], n, batch};
  rc = bench_measure(o, f, do_clblast, do_gemm_finish, &g, 1000, 2.0 * (double)n * n * n * batch / 1e9);
done:
  release_bufs(m, 3);
  if (rc) bench_fig_fail(f, false, bench_error());
  return rc;
}
