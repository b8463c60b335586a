/* Your own OpenCL kernel on cltensor tensors, through the interop API (cltensor/interop.h).
 *
 * Two directions:
 *   1. cltensor -> your kernel: take a tensor's cl_mem and byte offset, build your program in
 *      the device's context, enqueue it on the device's queue (ordered with cltensor's work).
 *   2. your buffer -> cltensor: wrap a cl_mem you created as a tensor (ct_from_cl_mem), then
 *      use it like any tensor (views, copies, printing, saving).
 *
 * Exits 0 when the results match a host computation, 1 otherwise. */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cltensor/cltensor.h"

/* A soft-threshold ("shrink") kernel, plus an iota to fill a buffer of our own. Kernels get
 * the buffer and the element offset: cltensor tensors live at a byte offset inside a buffer
 * shared with other tensors, and OpenCL C 1.2 has no way to pass a pointer into a buffer. */
static const char *src =
    "__kernel void shrink(__global float *x, ulong off, long stride, float lambda) {\n"
    "  __global float *p = x + off + get_global_id(0) * stride;\n"
    "  float v = *p;\n"
    "  *p = sign(v) * fmax(fabs(v) - lambda, 0.0f);\n"
    "}\n"
    "__kernel void iota(__global int *y) { y[get_global_id(0)] = (int)get_global_id(0); }\n";

#define CHECK_CT(call)                                                                   \
  do {                                                                                   \
    if ((call) != CT_OK) {                                                               \
      fprintf(stderr, "custom_kernel: %s failed: %s\n", #call, ct_last_error());          \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)
#define CHECK_CL(call)                                                                   \
  do {                                                                                   \
    cl_int e_ = (call);                                                                  \
    if (e_ != CL_SUCCESS) {                                                              \
      fprintf(stderr, "custom_kernel: %s failed: OpenCL error %d\n", #call, (int)e_);     \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

int main(void) {
  ct_device *dev;
  CHECK_CT(ct_device_default(&dev));
  printf("device: %s (%s)\n", ct_device_spec(dev), ct_device_properties(dev)->name);

  cl_context ctx;
  cl_command_queue queue;
  cl_device_id id;
  CHECK_CT(ct_device_cl_context(&ctx, dev));
  CHECK_CT(ct_device_cl_queue(&queue, dev));
  CHECK_CT(ct_device_cl_device_id(&id, dev));
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  CHECK_CL(err);
  if (clBuildProgram(prog, 1, &id, "-cl-std=CL1.2", NULL, NULL) != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(prog, id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    fprintf(stderr, "custom_kernel: build failed:\n%s\n", log);
    return 1;
  }
  cl_kernel shrink = clCreateKernel(prog, "shrink", &err);
  CHECK_CL(err);
  cl_kernel iota = clCreateKernel(prog, "iota", &err);
  CHECK_CL(err);
  int ok = 1;

  /* 1. A 4x6 cltensor tensor; the kernel runs on one column of it (a strided view). */
  float host[24];
  for (int i = 0; i < 24; i++) host[i] = (float)(i - 12) * 0.25f;
  int64_t shape[2] = {4, 6};
  ct_tensor *x, *col;
  CHECK_CT(ct_from_host(&x, dev, CT_F32, 2, shape, host));
  CHECK_CT(ct_slice(&col, x, 1, 2, 3, 1)); /* column 2: shape [4, 1] */
  cl_mem mem;
  size_t byte_offset;
  CHECK_CT(ct_tensor_cl_mem(&mem, &byte_offset, col));
  cl_ulong off = byte_offset / sizeof(float);
  cl_long stride = ct_tensor_strides(col)[0];
  float lambda = 1.0f;
  CHECK_CL(clSetKernelArg(shrink, 0, sizeof mem, &mem));
  CHECK_CL(clSetKernelArg(shrink, 1, sizeof off, &off));
  CHECK_CL(clSetKernelArg(shrink, 2, sizeof stride, &stride));
  CHECK_CL(clSetKernelArg(shrink, 3, sizeof lambda, &lambda));
  size_t global = (size_t)ct_tensor_shape(col)[0];
  CHECK_CL(clEnqueueNDRangeKernel(queue, shrink, 1, NULL, &global, NULL, 0, NULL, NULL));
  /* Same in-order queue: ct_to_host sees the kernel's writes without a clFinish. */
  float got[24];
  CHECK_CT(ct_to_host(x, got, sizeof got));
  for (int i = 0; i < 24; i++) {
    float want = host[i];
    if (i % 6 == 2) want = (want > 0 ? 1.0f : want < 0 ? -1.0f : 0.0f) * fmaxf(fabsf(want) - lambda, 0.0f);
    if (got[i] != want) {
      fprintf(stderr, "custom_kernel: x[%d] = %g, expected %g\n", i, got[i], want);
      ok = 0;
    }
  }
  printf("after shrink(lambda=1) on column 2:\n");
  CHECK_CT(ct_print(stdout, x));
  printf("\n");

  /* 2. A buffer of our own, filled by our kernel, wrapped as a 3x4 i32 tensor. The tensor
   * retains the buffer, so we may release our reference at once. */
  cl_mem own = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 12 * sizeof(int32_t), NULL, &err);
  CHECK_CL(err);
  CHECK_CL(clSetKernelArg(iota, 0, sizeof own, &own));
  global = 12;
  CHECK_CL(clEnqueueNDRangeKernel(queue, iota, 1, NULL, &global, NULL, 0, NULL, NULL));
  ct_tensor *w, *wt, *wc;
  int64_t wshape[2] = {3, 4};
  CHECK_CT(ct_from_cl_mem(&w, dev, own, 0, CT_I32, 2, wshape, NULL));
  clReleaseMemObject(own);
  CHECK_CT(ct_transpose(&wt, w, 0, 1));
  CHECK_CT(ct_contiguous(&wc, wt)); /* cltensor's own kernel on our data */
  int32_t iw[12];
  CHECK_CT(ct_to_host(wc, iw, sizeof iw));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      if (iw[i * 3 + j] != j * 4 + i) {
        fprintf(stderr, "custom_kernel: wrapped^T[%d][%d] = %d, expected %d\n", i, j, iw[i * 3 + j], j * 4 + i);
        ok = 0;
      }
  printf("our buffer as a tensor, transposed:\n");
  CHECK_CT(ct_print(stdout, wc));
  printf("\n");

  ct_release(wc);
  ct_release(wt);
  ct_release(w); /* the buffer goes with the last tensor over it */
  ct_release(col);
  ct_release(x);
  clReleaseKernel(iota);
  clReleaseKernel(shrink);
  clReleaseProgram(prog);
  ct_shutdown();
  printf("%s\n", ok ? "custom kernel: results match the host" : "custom kernel: MISMATCH");
  return ok ? 0 : 1;
}
