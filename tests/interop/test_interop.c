/* Interop: raw OpenCL handles, a user kernel on cltensor data, wrapped cl_mem buffers (checks,
 * reference counts, lifetimes), and DLPack export/import with the deleter honoured. */
#include <CL/cl.h>
#include <dlpack/dlpack.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "ct_test.h"
#include "device/device.h"

static cl_uint mem_refs(cl_mem m) {
  cl_uint n = 0;
  ck_assert_int_eq(clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL), CL_SUCCESS);
  return n;
}

/* The count a buffer settles to: rusticl's queue thread drops its own reference to a finished
 * command's buffer a moment after a blocking call or clFinish returns (docs/PORTABILITY.md,
 * the reproducer in tests/portability/test_driver_quirks.c), so a count read at once can be one
 * too high there. A reference the library keeps never settles; this waits up to 2 s. */
static cl_uint settled_refs(cl_mem m, cl_uint want) {
  cl_uint n = mem_refs(m);
  for (int i = 0; i < 2000 && n != want; i++) {
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    n = mem_refs(m);
  }
  return n;
}

static atomic_int destroyed;
static void CL_CALLBACK on_destroy(cl_mem m, void *user) {
  (void)m;
  (void)user;
  atomic_fetch_add(&destroyed, 1);
}

/* The destructor callback may come from another thread a little later. */
static int wait_destroyed(int want) {
  for (int i = 0; i < 2000 && atomic_load(&destroyed) != want; i++) sched_yield();
  return atomic_load(&destroyed);
}

static cl_mem host_buffer(ct_device *d, const void *data, size_t bytes) {
  struct _cl_context *ctx;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  cl_int err;
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, (void *)data, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  return m;
}

START_TEST(test_device_handles) {
  ct_device *d = ct_test_device();
  struct _cl_context *ctx = NULL;
  struct _cl_command_queue *q = NULL;
  struct _cl_device_id *id = NULL;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  ck_assert_ct_ok(ct_device_cl_queue(&q, d));
  ck_assert_ct_ok(ct_device_cl_device_id(&id, d));
  cl_context qctx;
  cl_device_id qdev;
  ck_assert_int_eq(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL), CL_SUCCESS);
  ck_assert_int_eq(clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL), CL_SUCCESS);
  ck_assert_ptr_eq(qctx, ctx);
  ck_assert_ptr_eq(qdev, id);
  char name[256];
  ck_assert_int_eq(clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof name, name, NULL), CL_SUCCESS);
  ck_assert_str_eq(name, ct_device_properties(d)->name);
  ck_assert_ct_status(ct_device_cl_context(NULL, d), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_device_cl_queue(&q, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(q);
  ck_assert_ct_status(ct_device_cl_device_id(&id, NULL), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_tensor_mem_and_offset) {
  ct_device *d = ct_test_device();
  float host[24];
  for (int i = 0; i < 24; i++) host[i] = (float)i;
  int64_t shape[2] = {4, 6};
  ct_tensor *t = NULL, *v = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 2, shape, host));
  ck_assert_ct_ok(ct_slice(&v, t, 0, 2, 4, 1)); /* rows 2 and 3: element 0 is host[12] */
  struct _cl_mem *m = NULL, *mv = NULL;
  size_t off = 99, offv = 99;
  ck_assert_ct_ok(ct_tensor_cl_mem(&m, &off, t));
  ck_assert_ct_ok(ct_tensor_cl_mem(&mv, &offv, v));
  ck_assert_ptr_eq(m, mv);
  ck_assert_uint_eq(offv, off + 12 * sizeof(float));
  struct _cl_command_queue *q;
  ck_assert_ct_ok(ct_device_cl_queue(&q, d));
  float got[12];
  ck_assert_int_eq(clEnqueueReadBuffer(q, mv, CL_TRUE, offv, sizeof got, got, 0, NULL, NULL), CL_SUCCESS);
  for (int i = 0; i < 12; i++) ck_assert_float_eq(got[i], host[12 + i]);
  ck_assert_ct_ok(ct_tensor_cl_mem(&m, NULL, t));
  ck_assert_ct_status(ct_tensor_cl_mem(&m, &off, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(m);
  ct_release(v);
  ct_release(t);
}
END_TEST

/* A user's own kernel, enqueued on cltensor's queue, between cltensor calls. */
static const char *user_src =
    "__kernel void axpb(__global float *x, ulong off, float a, float b) {\n"
    "  size_t i = get_global_id(0);\n"
    "  x[off + i] = a * x[off + i] + b;\n"
    "}\n";

START_TEST(test_user_kernel_on_tensor) {
  ct_device *d = ct_test_device();
  struct _cl_context *ctx;
  struct _cl_command_queue *q;
  struct _cl_device_id *id;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  ck_assert_ct_ok(ct_device_cl_queue(&q, d));
  ck_assert_ct_ok(ct_device_cl_device_id(&id, d));
  cl_int err;
  cl_program p = clCreateProgramWithSource(ctx, 1, &user_src, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ck_assert_int_eq(clBuildProgram(p, 1, &id, "", NULL, NULL), CL_SUCCESS);
  cl_kernel k = clCreateKernel(p, "axpb", &err);
  ck_assert_int_eq(err, CL_SUCCESS);

  float host[10];
  for (int i = 0; i < 10; i++) host[i] = (float)i;
  int64_t n = 10;
  ct_tensor *t = NULL, *v = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, &n, host));
  ck_assert_ct_ok(ct_slice(&v, t, 0, 3, 8, 1));
  struct _cl_mem *m;
  size_t off;
  ck_assert_ct_ok(ct_tensor_cl_mem(&m, &off, v));
  cl_ulong eoff = off / sizeof(float);
  float a = 2.0f, b = 0.5f;
  size_t global = (size_t)ct_numel(v);
  ck_assert_int_eq(clSetKernelArg(k, 0, sizeof m, &m), CL_SUCCESS);
  ck_assert_int_eq(clSetKernelArg(k, 1, sizeof eoff, &eoff), CL_SUCCESS);
  ck_assert_int_eq(clSetKernelArg(k, 2, sizeof a, &a), CL_SUCCESS);
  ck_assert_int_eq(clSetKernelArg(k, 3, sizeof b, &b), CL_SUCCESS);
  ck_assert_int_eq(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL), CL_SUCCESS);
  /* No clFinish: the in-order queue orders ct_to_host after the kernel. */
  float got[10];
  ck_assert_ct_ok(ct_to_host(t, got, sizeof got));
  for (int i = 0; i < 10; i++) ck_assert_float_eq(got[i], i >= 3 && i < 8 ? 2.0f * (float)i + 0.5f : (float)i);
  ct_release(v);
  ct_release(t);
  clReleaseKernel(k);
  clReleaseProgram(p);
}
END_TEST

START_TEST(test_wrap_reads_and_views) {
  ct_device *d = ct_test_device();
  int32_t host[32];
  for (int i = 0; i < 32; i++) host[i] = i * 7 - 40;
  cl_mem m = host_buffer(d, host, sizeof host);
  /* Rows of 5 from element 4, as a 3x5 contiguous tensor. */
  ct_tensor *t = NULL, *tt = NULL, *c = NULL;
  int64_t shape[2] = {3, 5};
  ck_assert_ct_ok(ct_from_cl_mem(&t, d, m, 4 * sizeof(int32_t), CT_I32, 2, shape, NULL));
  ck_assert_int_eq(ct_tensor_strides(t)[0], 5);
  ck_assert_int_eq(ct_tensor_strides(t)[1], 1);
  int32_t got[15];
  ck_assert_ct_ok(ct_to_host(t, got, sizeof got));
  for (int i = 0; i < 15; i++) ck_assert_int_eq(got[i], host[4 + i]);
  struct _cl_mem *back;
  size_t off;
  ck_assert_ct_ok(ct_tensor_cl_mem(&back, &off, t));
  ck_assert_ptr_eq(back, m);
  ck_assert_uint_eq(off, 16);
  /* Explicit strides: a transposed 5x3 reading of the same elements, then made contiguous
   * by cltensor's own copy kernel. */
  int64_t tshape[2] = {5, 3}, tstrides[2] = {1, 5};
  ck_assert_ct_ok(ct_from_cl_mem(&tt, d, m, 4 * sizeof(int32_t), CT_I32, 2, tshape, tstrides));
  ck_assert_ct_ok(ct_contiguous(&c, tt));
  ck_assert_ct_ok(ct_to_host(c, got, sizeof got));
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 3; j++) ck_assert_int_eq(got[i * 3 + j], host[4 + j * 5 + i]);
  /* Writes through the tensor land in the buffer. */
  int32_t ones[15];
  for (int i = 0; i < 15; i++) ones[i] = 1000 + i;
  ck_assert_ct_ok(ct_copy_from_host(t, ones, sizeof ones));
  struct _cl_command_queue *q;
  ck_assert_ct_ok(ct_device_cl_queue(&q, d));
  int32_t all[32];
  ck_assert_int_eq(clEnqueueReadBuffer(q, m, CL_TRUE, 0, sizeof all, all, 0, NULL, NULL), CL_SUCCESS);
  for (int i = 0; i < 32; i++) ck_assert_int_eq(all[i], i >= 4 && i < 19 ? 1000 + i - 4 : host[i]);
  /* A 0-d tensor and an empty one. */
  ct_tensor *s = NULL, *e = NULL;
  ck_assert_ct_ok(ct_from_cl_mem(&s, d, m, 31 * sizeof(int32_t), CT_I32, 0, NULL, NULL));
  ck_assert_ct_ok(ct_to_host(s, got, 4));
  ck_assert_int_eq(got[0], host[31]);
  int64_t eshape[2] = {0, 1000};
  ck_assert_ct_ok(ct_from_cl_mem(&e, d, m, sizeof host, CT_I32, 2, eshape, NULL));
  ck_assert_int_eq(ct_numel(e), 0);
  ct_release(e);
  ct_release(s);
  ct_release(c);
  ct_release(tt);
  ct_release(t);
  ck_assert_uint_eq(settled_refs(m, 1), 1);
  clReleaseMemObject(m);
}
END_TEST

START_TEST(test_wrap_outlives_caller_reference) {
  ct_device *d = ct_test_device();
  float host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  cl_mem m = host_buffer(d, host, sizeof host);
  atomic_store(&destroyed, 0);
  ck_assert_int_eq(clSetMemObjectDestructorCallback(m, on_destroy, NULL), CL_SUCCESS);
  ck_assert_uint_eq(settled_refs(m, 1), 1);
  int64_t n = 8;
  ct_tensor *t = NULL, *v = NULL;
  ck_assert_ct_ok(ct_from_cl_mem(&t, d, m, 0, CT_F32, 1, &n, NULL));
  ck_assert_uint_eq(settled_refs(m, 2), 2);
  /* The caller lets go first: the tensor keeps the buffer alive, and so does a view after the
   * tensor is released. */
  clReleaseMemObject(m);
  ck_assert_uint_eq(settled_refs(m, 1), 1);
  ck_assert_ct_ok(ct_slice(&v, t, 0, 4, 8, 1));
  ct_release(t);
  ck_assert_uint_eq(settled_refs(m, 1), 1);
  float got[4];
  ck_assert_ct_ok(ct_to_host(v, got, sizeof got));
  for (int i = 0; i < 4; i++) ck_assert_float_eq(got[i], host[4 + i]);
  ck_assert_int_eq(atomic_load(&destroyed), 0);
  ct_release(v);
  ck_assert_int_eq(wait_destroyed(1), 1);
}
END_TEST

START_TEST(test_wrap_does_not_outlive) {
  ct_device *d = ct_test_device();
  float host[8] = {0};
  cl_mem m = host_buffer(d, host, sizeof host);
  atomic_store(&destroyed, 0);
  ck_assert_int_eq(clSetMemObjectDestructorCallback(m, on_destroy, NULL), CL_SUCCESS);
  int64_t n = 8;
  ct_tensor *t = NULL, *v = NULL;
  ck_assert_ct_ok(ct_from_cl_mem(&t, d, m, 0, CT_F32, 1, &n, NULL));
  ck_assert_ct_ok(ct_unsqueeze(&v, t, 0));
  ck_assert_uint_eq(settled_refs(m, 2), 2);
  ct_release(t);
  ck_assert_uint_eq(settled_refs(m, 2), 2); /* the view holds the storage */
  ct_release(v);
  ck_assert_uint_eq(settled_refs(m, 1), 1); /* the tensor is gone, the buffer is the caller's again */
  ck_assert_int_eq(atomic_load(&destroyed), 0);
  struct _cl_command_queue *q;
  ck_assert_ct_ok(ct_device_cl_queue(&q, d));
  float one = 1.0f;
  ck_assert_int_eq(clEnqueueWriteBuffer(q, m, CL_TRUE, 0, sizeof one, &one, 0, NULL, NULL), CL_SUCCESS);
  clReleaseMemObject(m);
  ck_assert_int_eq(wait_destroyed(1), 1);
}
END_TEST

/* A cached kernel does not keep a buffer alive once the tensors over it are released: rusticl's
 * kernels hold their last buffer arguments (CL_MEM_REFERENCE_COUNT stayed 2), and
 * ct__kernel_unlock() sets them back to NULL there. The kernels still compute right on the next
 * buffers. _i == 1 drops the arguments on any device (ct__device_force_drop_kargs), PoCL too. */
START_TEST(test_kernels_release_buffers) {
  ct__device_force_drop_kargs = _i;
  ct_device *d = ct_test_device();
  float host[32], got[32];
  for (int i = 0; i < 32; i++) host[i] = (float)i * 0.25f - 2.0f;
  int64_t n = 32;
  for (int round = 0; round < 2; round++) {
    cl_mem m = host_buffer(d, host, sizeof host);
    atomic_store(&destroyed, 0);
    ck_assert_int_eq(clSetMemObjectDestructorCallback(m, on_destroy, NULL), CL_SUCCESS);
    ct_tensor *t = NULL, *e = NULL;
    ck_assert_ct_ok(ct_from_cl_mem(&t, d, m, 0, CT_F32, 1, &n, NULL));
    ck_assert_ct_ok(ct_exp(&e, t));
    ck_assert_ct_ok(ct_to_host(e, got, sizeof got));
    for (int i = 0; i < 32; i++)
      ck_assert_msg(fabsf(got[i] - expf(host[i])) <= 1e-5f * expf(host[i]), "round %d: exp(%g) = %g", round,
                    (double)host[i], (double)got[i]);
    ct_release(e);
    ct_release(t);
    ck_assert_uint_eq(settled_refs(m, 1), 1);
    clReleaseMemObject(m);
    ck_assert_int_eq(wait_destroyed(1), 1);
  }
  ct__device_force_drop_kargs = 0;
}
END_TEST

START_TEST(test_wrap_checks) {
  ct_device *d = ct_test_device();
  uint8_t host[64] = {0};
  cl_mem m = host_buffer(d, host, sizeof host);
  ct_tensor *t = (ct_tensor *)1;
  int64_t n17 = 17, n16 = 16, n4 = 4;
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, CT_F32, 1, &n17, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(t);
  ck_assert_error_contains("the buffer has 64 bytes, too few for shape [17] of f32: 68 bytes from byte_offset 0");
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 4, CT_F32, 1, &n16, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("64 bytes from byte_offset 4");
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 2, CT_F32, 1, &n4, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("byte_offset 2 is not a multiple of the 4-byte f32 element");
  int64_t stride = -1, big_stride = 100;
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, CT_F32, 1, &n4, &stride), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("strides[0] is -1");
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, CT_F32, 1, &n4, &big_stride), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("1204 bytes from byte_offset 0");
  int64_t neg = -3;
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, CT_U8, 1, &neg, NULL), CT_ERR_INVALID_ARGUMENT);
  int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 1 << 20};
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, CT_U8, 3, huge, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("too many elements");
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, CT_U8, 9, huge, NULL), CT_ERR_INVALID_ARGUMENT);
  /* Count x element size must fit as well, whatever the strides: 2^62 broadcast f32 fit the
   * buffer's 64 bytes, but their 2^64 bytes made ct_tensor_nbytes() wrap to 0. */
  int64_t n62 = INT64_C(1) << 62, zero = 0;
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, CT_F32, 1, &n62, &zero), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(t);
  ck_assert_error_contains("the byte size overflows");
  int64_t empty[3] = {0, INT64_C(1) << 62, INT64_C(1) << 62};
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, CT_U8, 3, empty, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(t);
  ck_assert_ct_ok(ct_from_cl_mem(&t, d, m, 0, CT_U8, 1, &n62, &zero)); /* 2^62 bytes fit */
  ck_assert_uint_eq(ct_tensor_nbytes(t), (uint64_t)1 << 62);
  ct_release(t);
  t = (ct_tensor *)1;
  ck_assert_ct_status(ct_from_cl_mem(&t, d, m, 0, (ct_dtype)42, 1, &n4, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_from_cl_mem(&t, d, NULL, 0, CT_U8, 1, &n4, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_from_cl_mem(&t, NULL, m, 0, CT_U8, 1, &n4, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_uint_eq(settled_refs(m, 1), 1); /* no failure kept a reference */

  /* A buffer of another context, even for the same device. */
  struct _cl_device_id *id;
  ck_assert_ct_ok(ct_device_cl_device_id(&id, d));
  cl_int err;
  cl_context other = clCreateContext(NULL, 1, &id, NULL, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  cl_mem om = clCreateBuffer(other, CL_MEM_READ_WRITE, 64, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ck_assert_ct_status(ct_from_cl_mem(&t, d, om, 0, CT_U8, 1, &n4, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("the buffer belongs to OpenCL context");
  ck_assert_error_contains(ct_device_spec(d));
  ck_assert_uint_eq(settled_refs(om, 1), 1);
  clReleaseMemObject(om);
  clReleaseContext(other);
  clReleaseMemObject(m);
}
END_TEST

/* ---- DLPack ---- */

static atomic_int deleted;
static void (*inner_deleter)(DLManagedTensor *);
static void counting_deleter(DLManagedTensor *self) {
  atomic_fetch_add(&deleted, 1);
  if (inner_deleter) inner_deleter(self);
}

START_TEST(test_dlpack_export_fields) {
  ct_device *d = ct_test_device();
  const struct {
    ct_dtype t;
    uint8_t code, bits;
  } want[] = {{CT_BOOL, 6, 8},         {CT_U8, kDLUInt, 8},      {CT_I8, kDLInt, 8},
              {CT_I32, kDLInt, 32},    {CT_I64, kDLInt, 64},     {CT_F16, kDLFloat, 16},
              {CT_BF16, kDLBfloat, 16}, {CT_F32, kDLFloat, 32}, {CT_F64, kDLFloat, 64},
              {CT_I16, kDLInt, 16},    {CT_U16, kDLUInt, 16},    {CT_U32, kDLUInt, 32},
              {CT_U64, kDLUInt, 64}};
  int64_t shape[2] = {4, 6};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (want[i].t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    ct_tensor *t = NULL, *v = NULL;
    ck_assert_ct_ok(ct_zeros(&t, d, want[i].t, 2, shape));
    ck_assert_ct_ok(ct_slice(&v, t, 1, 1, 6, 2)); /* [4, 3], strides [6, 2], offset 1 */
    DLManagedTensor *m = NULL;
    ck_assert_ct_ok(ct_to_dlpack(&m, v));
    struct _cl_mem *mem;
    size_t off;
    ck_assert_ct_ok(ct_tensor_cl_mem(&mem, &off, v));
    ck_assert_ptr_eq(m->dl_tensor.data, mem);
    ck_assert_uint_eq(m->dl_tensor.byte_offset, off);
    ck_assert_int_eq(m->dl_tensor.device.device_type, kDLOpenCL);
    ck_assert_int_eq(m->dl_tensor.device.device_id, ct_device_index(d));
    ck_assert_int_eq(m->dl_tensor.ndim, 2);
    ck_assert_int_eq(m->dl_tensor.shape[0], 4);
    ck_assert_int_eq(m->dl_tensor.shape[1], 3);
    ck_assert_int_eq(m->dl_tensor.strides[0], 6);
    ck_assert_int_eq(m->dl_tensor.strides[1], 2);
    ck_assert_uint_eq(m->dl_tensor.dtype.code, want[i].code);
    ck_assert_uint_eq(m->dl_tensor.dtype.bits, want[i].bits);
    ck_assert_uint_eq(m->dl_tensor.dtype.lanes, 1);
    /* The export keeps the storage alive after the tensors are gone. */
    ct_release(v);
    ct_release(t);
    ct_tensor *back = NULL;
    inner_deleter = m->deleter;
    m->deleter = counting_deleter;
    atomic_store(&deleted, 0);
    ck_assert_ct_ok(ct_from_dlpack(&back, m, NULL));
    ck_assert_ptr_eq(ct_tensor_device(back), d);
    ck_assert_int_eq(ct_tensor_strides(back)[1], 2);
    ck_assert_int_eq(atomic_load(&deleted), 0);
    ct_release(back);
    ck_assert_int_eq(atomic_load(&deleted), 1);
  }
}
END_TEST

START_TEST(test_dlpack_round_trip_shares_memory) {
  ct_device *d = ct_test_device();
  float host[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  ct_tensor *x = NULL, *y = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, shape, host));
  DLManagedTensor *m = NULL;
  ck_assert_ct_ok(ct_to_dlpack(&m, x));
  inner_deleter = m->deleter;
  m->deleter = counting_deleter;
  atomic_store(&deleted, 0);
  ck_assert_ct_ok(ct_from_dlpack(&y, m, d));
  float other[6] = {-1, -2, -3, -4, -5, -6}, got[6];
  ck_assert_ct_ok(ct_copy_from_host(y, other, sizeof other));
  ck_assert_ct_ok(ct_to_host(x, got, sizeof got));
  for (int i = 0; i < 6; i++) ck_assert_float_eq(got[i], other[i]);
  ct_release(x);
  ck_assert_int_eq(atomic_load(&deleted), 0);
  ck_assert_ct_ok(ct_to_host(y, got, sizeof got));
  ct_release(y);
  ck_assert_int_eq(atomic_load(&deleted), 1);
  /* An export never imported is freed by its own deleter. */
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, shape, host));
  ck_assert_ct_ok(ct_to_dlpack(&m, x));
  ct_release(x);
  m->deleter(m);
  ck_assert_ct_status(ct_to_dlpack(NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_to_dlpack(&m, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(m);
}
END_TEST

/* A foreign producer: its own cl_mem, released by its deleter. */
struct producer {
  DLManagedTensor managed;
  int64_t shape[1];
  cl_mem mem;
  int deleted;
};
static void producer_delete(DLManagedTensor *self) {
  struct producer *p = self->manager_ctx;
  clReleaseMemObject(p->mem);
  p->deleted++;
}

START_TEST(test_dlpack_import_foreign_opencl) {
  ct_device *d = ct_test_device();
  int64_t host[5] = {10, 20, 30, 40, 50};
  struct producer p;
  memset(&p, 0, sizeof p);
  p.mem = host_buffer(d, host, sizeof host);
  p.shape[0] = 3;
  p.managed.dl_tensor.data = p.mem;
  p.managed.dl_tensor.device.device_type = kDLOpenCL;
  p.managed.dl_tensor.device.device_id = ct_device_index(d);
  p.managed.dl_tensor.ndim = 1;
  p.managed.dl_tensor.dtype.code = kDLInt;
  p.managed.dl_tensor.dtype.bits = 64;
  p.managed.dl_tensor.dtype.lanes = 1;
  p.managed.dl_tensor.shape = p.shape;
  p.managed.dl_tensor.strides = NULL;
  p.managed.dl_tensor.byte_offset = 16;
  p.managed.manager_ctx = &p;
  p.managed.deleter = producer_delete;
  ct_tensor *t = NULL;
  /* Failures leave the producer's tensor alone. */
  p.managed.dl_tensor.dtype.lanes = 2;
  ck_assert_ct_status(ct_from_dlpack(&t, &p.managed, NULL), CT_ERR_UNSUPPORTED);
  ck_assert_error_contains("{code 0, bits 64, lanes 2}");
  p.managed.dl_tensor.dtype.lanes = 1;
  p.managed.dl_tensor.byte_offset = 17;
  ck_assert_ct_status(ct_from_dlpack(&t, &p.managed, NULL), CT_ERR_INVALID_ARGUMENT);
  p.managed.dl_tensor.byte_offset = 24;
  ck_assert_ct_status(ct_from_dlpack(&t, &p.managed, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("24 bytes from byte_offset 24");
  p.managed.dl_tensor.device.device_id = 1000;
  ck_assert_ct_status(ct_from_dlpack(&t, &p.managed, NULL), CT_ERR_INVALID_ARGUMENT);
  p.managed.dl_tensor.device.device_id = ct_device_index(d);
  p.managed.dl_tensor.byte_offset = 16;
  ck_assert_int_eq(p.deleted, 0);
  ck_assert_uint_eq(settled_refs(p.mem, 1), 1);

  ck_assert_ct_ok(ct_from_dlpack(&t, &p.managed, NULL));
  int64_t got[3];
  ck_assert_ct_ok(ct_to_host(t, got, sizeof got));
  for (int i = 0; i < 3; i++) ck_assert_int_eq(got[i], host[2 + i]);
  ck_assert_int_eq(p.deleted, 0);
  ct_release(t);
  ck_assert_int_eq(p.deleted, 1);
}
END_TEST

static int cpu_deleted;
static void cpu_deleter(DLManagedTensor *self) {
  (void)self;
  cpu_deleted++;
}

START_TEST(test_dlpack_import_cpu_copies) {
  ct_device *d = ct_test_device();
  /* A 3x4 host array read transposed and reversed: shape [4, 3], strides [-1, 4], element 0
   * at the last column of row 0. */
  int32_t host[12];
  for (int i = 0; i < 12; i++) host[i] = i * i;
  int64_t shape[2] = {4, 3}, strides[2] = {-1, 4};
  DLManagedTensor m;
  memset(&m, 0, sizeof m);
  m.dl_tensor.data = host;
  m.dl_tensor.device.device_type = kDLCPU;
  m.dl_tensor.ndim = 2;
  m.dl_tensor.dtype.code = kDLInt;
  m.dl_tensor.dtype.bits = 32;
  m.dl_tensor.dtype.lanes = 1;
  m.dl_tensor.shape = shape;
  m.dl_tensor.strides = strides;
  m.dl_tensor.byte_offset = 3 * sizeof(int32_t);
  m.deleter = cpu_deleter;
  cpu_deleted = 0;
  ct_tensor *t = NULL;
  ck_assert_ct_status(ct_from_dlpack(&t, &m, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("a kDLCPU tensor is copied onto d");
  m.dl_tensor.dtype.code = kDLComplex;
  m.dl_tensor.dtype.bits = 64;
  ck_assert_ct_status(ct_from_dlpack(&t, &m, d), CT_ERR_UNSUPPORTED);
  m.dl_tensor.dtype.code = kDLInt;
  m.dl_tensor.dtype.bits = 32;
  m.dl_tensor.device.device_type = kDLCUDA;
  ck_assert_ct_status(ct_from_dlpack(&t, &m, d), CT_ERR_UNSUPPORTED);
  ck_assert_error_contains("device type 2");
  m.dl_tensor.device.device_type = kDLCPU;
  ck_assert_int_eq(cpu_deleted, 0);

  ck_assert_ct_ok(ct_from_dlpack(&t, &m, d));
  ck_assert_int_eq(cpu_deleted, 1); /* called right after the copy */
  ck_assert(ct_tensor_is_contiguous(t));
  int32_t got[12];
  ck_assert_ct_ok(ct_to_host(t, got, sizeof got));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) ck_assert_int_eq(got[i * 3 + j], host[3 - i + 4 * j]);
  ct_release(t);
  ck_assert_int_eq(cpu_deleted, 1);

  /* Compact row-major (strides NULL), bool with odd bytes, no deleter at all. */
  uint8_t b[4] = {0, 2, 1, 255};
  int64_t four = 4;
  m.dl_tensor.data = b;
  m.dl_tensor.shape = &four;
  m.dl_tensor.strides = NULL;
  m.dl_tensor.ndim = 1;
  m.dl_tensor.byte_offset = 0;
  m.dl_tensor.dtype.code = 6;
  m.dl_tensor.dtype.bits = 8;
  m.deleter = NULL;
  ck_assert_ct_ok(ct_from_dlpack(&t, &m, d));
  ck_assert_int_eq(ct_tensor_dtype(t), CT_BOOL);
  uint8_t bg[4];
  ck_assert_ct_ok(ct_to_host(t, bg, 4));
  ck_assert_int_eq(bg[0], 0);
  ck_assert_int_eq(bg[1], 1);
  ck_assert_int_eq(bg[2], 1);
  ck_assert_int_eq(bg[3], 1);
  ct_release(t);
}
END_TEST

START_TEST(test_dlpack_versioned) {
  ct_device *d = ct_test_device();
  int64_t n = 3;
  float host[3] = {1, 2, 3};
  ct_tensor *x = NULL, *y = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 1, &n, host));
#ifdef DLPACK_MAJOR_VERSION
  DLManagedTensorVersioned *m = NULL;
  ck_assert_ct_ok(ct_to_dlpack_versioned(&m, x));
  ck_assert_uint_eq(m->version.major, DLPACK_MAJOR_VERSION);
  ck_assert_uint_eq(m->flags, 0);
  m->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  ck_assert_ct_status(ct_from_dlpack_versioned(&y, m, NULL), CT_ERR_UNSUPPORTED);
  m->flags = 0;
  m->version.major++;
  ck_assert_ct_status(ct_from_dlpack_versioned(&y, m, NULL), CT_ERR_UNSUPPORTED);
  m->version.major--;
  ck_assert_ct_ok(ct_from_dlpack_versioned(&y, m, NULL));
  float got[3];
  ck_assert_ct_ok(ct_to_host(y, got, sizeof got));
  ck_assert_float_eq(got[2], 3.0f);
  ct_release(y);
#else
  struct DLManagedTensorVersioned *m = (struct DLManagedTensorVersioned *)1;
  ck_assert_ct_status(ct_to_dlpack_versioned(&m, x), CT_ERR_UNSUPPORTED);
  ck_assert_ptr_null(m);
  ck_assert_error_contains("use ct_to_dlpack");
  ck_assert_ct_status(ct_from_dlpack_versioned(&y, NULL, d), CT_ERR_UNSUPPORTED);
#endif
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("interop");
  TCase *tc = tcase_create("opencl");
  tcase_add_test(tc, test_device_handles);
  tcase_add_test(tc, test_tensor_mem_and_offset);
  tcase_add_test(tc, test_user_kernel_on_tensor);
  tcase_add_test(tc, test_wrap_reads_and_views);
  tcase_add_test(tc, test_wrap_outlives_caller_reference);
  tcase_add_test(tc, test_wrap_does_not_outlive);
  tcase_add_test(tc, test_wrap_checks);
  tcase_add_loop_test(tc, test_kernels_release_buffers, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("dlpack");
  tcase_add_test(tc, test_dlpack_export_fields);
  tcase_add_test(tc, test_dlpack_round_trip_shares_memory);
  tcase_add_test(tc, test_dlpack_import_foreign_opencl);
  tcase_add_test(tc, test_dlpack_import_cpu_copies);
  tcase_add_test(tc, test_dlpack_versioned);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
