/* OpenCL object counting by interposition; see clcount.h. Each wrapper resolves the real entry
 * point once with dlsym(RTLD_NEXT) (the ICD loader), forwards the call unchanged, and counts
 * only what succeeded. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

#include "clcount.h"

static atomic_long live[CLCOUNT_KINDS];

static const char *const names[CLCOUNT_KINDS] = {"context", "queue",  "mem",    "program",
                                                 "kernel",  "event", "sampler"};

long clcount_live(enum clcount_kind kind) { return atomic_load(&live[kind]); }

const char *clcount_name(enum clcount_kind kind) { return names[kind]; }

char *clcount_format(char *buf, unsigned long size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int k = 0; k < CLCOUNT_KINDS && used < size; k++) {
    int n = snprintf(buf + used, size - used, "%s%s=%ld", k ? " " : "", names[k], clcount_live(k));
    if (n < 0) break;
    used += (size_t)n;
  }
  return buf;
}

int clcount_all_released(void) {
  for (int k = 0; k < CLCOUNT_KINDS; k++)
    if (clcount_live(k) != 0) return 0;
  return 1;
}

/* The real entry point; a missing one is a broken installation, which a test may abort on. */
static void *real(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) {
    fprintf(stderr, "clcount: %s not found after the test executable: %s\n", name, dlerror());
    abort();
  }
  return f;
}

/* A function pointer from dlsym: POSIX guarantees the conversion, ISO C doesn't. */
#define REAL(type, name)                                                    \
  static _Atomic(type) real_##name;                                         \
  type fn_ = atomic_load(&real_##name);                                     \
  if (!fn_) {                                                               \
    void *p_ = real(#name);                                                 \
    memcpy(&fn_, &p_, sizeof fn_);                                          \
    atomic_store(&real_##name, fn_);                                        \
  }

static void count_created(enum clcount_kind kind, const void *obj) {
  if (obj) atomic_fetch_add(&live[kind], 1);
}

static cl_int count_status(enum clcount_kind kind, cl_int err, long delta) {
  if (err == CL_SUCCESS) atomic_fetch_add(&live[kind], delta);
  return err;
}

/* An enqueue that may hand back an event: count it when the caller asked for one. */
static cl_int count_event(cl_int err, const cl_event *event) {
  if (err == CL_SUCCESS && event && *event) atomic_fetch_add(&live[CLCOUNT_EVENT], 1);
  return err;
}

/* ---- contexts ---- */
typedef cl_context (*create_context_fn)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                        void(CL_CALLBACK *)(const char *, const void *, size_t, void *),
                                        void *, cl_int *);
cl_context clCreateContext(const cl_context_properties *properties, cl_uint num_devices,
                           const cl_device_id *devices,
                           void(CL_CALLBACK *pfn_notify)(const char *, const void *, size_t, void *),
                           void *user_data, cl_int *errcode_ret) {
  REAL(create_context_fn, clCreateContext)
  cl_context c = fn_(properties, num_devices, devices, pfn_notify, user_data, errcode_ret);
  count_created(CLCOUNT_CONTEXT, c);
  return c;
}

typedef cl_context (*create_context_type_fn)(const cl_context_properties *, cl_device_type,
                                             void(CL_CALLBACK *)(const char *, const void *, size_t, void *),
                                             void *, cl_int *);
cl_context clCreateContextFromType(const cl_context_properties *properties, cl_device_type device_type,
                                   void(CL_CALLBACK *pfn_notify)(const char *, const void *, size_t, void *),
                                   void *user_data, cl_int *errcode_ret) {
  REAL(create_context_type_fn, clCreateContextFromType)
  cl_context c = fn_(properties, device_type, pfn_notify, user_data, errcode_ret);
  count_created(CLCOUNT_CONTEXT, c);
  return c;
}

typedef cl_int (*context_fn)(cl_context);
cl_int clRetainContext(cl_context context) {
  REAL(context_fn, clRetainContext)
  return count_status(CLCOUNT_CONTEXT, fn_(context), 1);
}
cl_int clReleaseContext(cl_context context) {
  REAL(context_fn, clReleaseContext)
  return count_status(CLCOUNT_CONTEXT, fn_(context), -1);
}

/* ---- command queues ---- */
typedef cl_command_queue (*create_queue_fn)(cl_context, cl_device_id, cl_command_queue_properties, cl_int *);
cl_command_queue clCreateCommandQueue(cl_context context, cl_device_id device,
                                      cl_command_queue_properties properties, cl_int *errcode_ret) {
  REAL(create_queue_fn, clCreateCommandQueue)
  cl_command_queue q = fn_(context, device, properties, errcode_ret);
  count_created(CLCOUNT_QUEUE, q);
  return q;
}

typedef cl_int (*queue_fn)(cl_command_queue);
cl_int clRetainCommandQueue(cl_command_queue q) {
  REAL(queue_fn, clRetainCommandQueue)
  return count_status(CLCOUNT_QUEUE, fn_(q), 1);
}
cl_int clReleaseCommandQueue(cl_command_queue q) {
  REAL(queue_fn, clReleaseCommandQueue)
  return count_status(CLCOUNT_QUEUE, fn_(q), -1);
}

/* ---- memory objects ---- */
typedef cl_mem (*create_buffer_fn)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
cl_mem clCreateBuffer(cl_context context, cl_mem_flags flags, size_t size, void *host_ptr,
                      cl_int *errcode_ret) {
  REAL(create_buffer_fn, clCreateBuffer)
  cl_mem m = fn_(context, flags, size, host_ptr, errcode_ret);
  count_created(CLCOUNT_MEM, m);
  return m;
}

typedef cl_mem (*create_sub_buffer_fn)(cl_mem, cl_mem_flags, cl_buffer_create_type, const void *, cl_int *);
cl_mem clCreateSubBuffer(cl_mem buffer, cl_mem_flags flags, cl_buffer_create_type type,
                         const void *info, cl_int *errcode_ret) {
  REAL(create_sub_buffer_fn, clCreateSubBuffer)
  cl_mem m = fn_(buffer, flags, type, info, errcode_ret);
  count_created(CLCOUNT_MEM, m);
  return m;
}

typedef cl_mem (*create_image_fn)(cl_context, cl_mem_flags, const cl_image_format *, const cl_image_desc *,
                                  void *, cl_int *);
cl_mem clCreateImage(cl_context context, cl_mem_flags flags, const cl_image_format *format,
                     const cl_image_desc *desc, void *host_ptr, cl_int *errcode_ret) {
  REAL(create_image_fn, clCreateImage)
  cl_mem m = fn_(context, flags, format, desc, host_ptr, errcode_ret);
  count_created(CLCOUNT_MEM, m);
  return m;
}

typedef cl_int (*mem_fn)(cl_mem);
cl_int clRetainMemObject(cl_mem m) {
  REAL(mem_fn, clRetainMemObject)
  return count_status(CLCOUNT_MEM, fn_(m), 1);
}
cl_int clReleaseMemObject(cl_mem m) {
  REAL(mem_fn, clReleaseMemObject)
  return count_status(CLCOUNT_MEM, fn_(m), -1);
}

/* ---- programs ---- */
typedef cl_program (*program_source_fn)(cl_context, cl_uint, const char **, const size_t *, cl_int *);
cl_program clCreateProgramWithSource(cl_context context, cl_uint count, const char **strings,
                                     const size_t *lengths, cl_int *errcode_ret) {
  REAL(program_source_fn, clCreateProgramWithSource)
  cl_program p = fn_(context, count, strings, lengths, errcode_ret);
  count_created(CLCOUNT_PROGRAM, p);
  return p;
}

typedef cl_program (*program_binary_fn)(cl_context, cl_uint, const cl_device_id *, const size_t *,
                                        const unsigned char **, cl_int *, cl_int *);
cl_program clCreateProgramWithBinary(cl_context context, cl_uint num_devices, const cl_device_id *device_list,
                                     const size_t *lengths, const unsigned char **binaries,
                                     cl_int *binary_status, cl_int *errcode_ret) {
  REAL(program_binary_fn, clCreateProgramWithBinary)
  cl_program p = fn_(context, num_devices, device_list, lengths, binaries, binary_status, errcode_ret);
  count_created(CLCOUNT_PROGRAM, p);
  return p;
}

typedef cl_program (*program_builtin_fn)(cl_context, cl_uint, const cl_device_id *, const char *, cl_int *);
cl_program clCreateProgramWithBuiltInKernels(cl_context context, cl_uint num_devices,
                                             const cl_device_id *device_list, const char *kernel_names,
                                             cl_int *errcode_ret) {
  REAL(program_builtin_fn, clCreateProgramWithBuiltInKernels)
  cl_program p = fn_(context, num_devices, device_list, kernel_names, errcode_ret);
  count_created(CLCOUNT_PROGRAM, p);
  return p;
}

typedef cl_program (*link_program_fn)(cl_context, cl_uint, const cl_device_id *, const char *, cl_uint,
                                      const cl_program *, void(CL_CALLBACK *)(cl_program, void *), void *,
                                      cl_int *);
cl_program clLinkProgram(cl_context context, cl_uint num_devices, const cl_device_id *device_list,
                         const char *options, cl_uint num_input_programs, const cl_program *input_programs,
                         void(CL_CALLBACK *pfn_notify)(cl_program, void *), void *user_data,
                         cl_int *errcode_ret) {
  REAL(link_program_fn, clLinkProgram)
  cl_program p = fn_(context, num_devices, device_list, options, num_input_programs, input_programs,
                     pfn_notify, user_data, errcode_ret);
  count_created(CLCOUNT_PROGRAM, p);
  return p;
}

typedef cl_int (*program_fn)(cl_program);
cl_int clRetainProgram(cl_program p) {
  REAL(program_fn, clRetainProgram)
  return count_status(CLCOUNT_PROGRAM, fn_(p), 1);
}
cl_int clReleaseProgram(cl_program p) {
  REAL(program_fn, clReleaseProgram)
  return count_status(CLCOUNT_PROGRAM, fn_(p), -1);
}

/* ---- kernels ---- */
typedef cl_kernel (*create_kernel_fn)(cl_program, const char *, cl_int *);
cl_kernel clCreateKernel(cl_program program, const char *kernel_name, cl_int *errcode_ret) {
  REAL(create_kernel_fn, clCreateKernel)
  cl_kernel k = fn_(program, kernel_name, errcode_ret);
  count_created(CLCOUNT_KERNEL, k);
  return k;
}

typedef cl_int (*create_kernels_fn)(cl_program, cl_uint, cl_kernel *, cl_uint *);
cl_int clCreateKernelsInProgram(cl_program program, cl_uint num_kernels, cl_kernel *kernels,
                                cl_uint *num_kernels_ret) {
  REAL(create_kernels_fn, clCreateKernelsInProgram)
  cl_int err = fn_(program, num_kernels, kernels, num_kernels_ret);
  if (err == CL_SUCCESS && kernels)
    for (cl_uint i = 0; i < num_kernels; i++) count_created(CLCOUNT_KERNEL, kernels[i]);
  return err;
}

typedef cl_int (*kernel_fn)(cl_kernel);
cl_int clRetainKernel(cl_kernel k) {
  REAL(kernel_fn, clRetainKernel)
  return count_status(CLCOUNT_KERNEL, fn_(k), 1);
}
cl_int clReleaseKernel(cl_kernel k) {
  REAL(kernel_fn, clReleaseKernel)
  return count_status(CLCOUNT_KERNEL, fn_(k), -1);
}

/* ---- samplers ---- */
typedef cl_sampler (*create_sampler_fn)(cl_context, cl_bool, cl_addressing_mode, cl_filter_mode, cl_int *);
cl_sampler clCreateSampler(cl_context context, cl_bool normalized, cl_addressing_mode addressing,
                           cl_filter_mode filter, cl_int *errcode_ret) {
  REAL(create_sampler_fn, clCreateSampler)
  cl_sampler s = fn_(context, normalized, addressing, filter, errcode_ret);
  count_created(CLCOUNT_SAMPLER, s);
  return s;
}

typedef cl_int (*sampler_fn)(cl_sampler);
cl_int clRetainSampler(cl_sampler s) {
  REAL(sampler_fn, clRetainSampler)
  return count_status(CLCOUNT_SAMPLER, fn_(s), 1);
}
cl_int clReleaseSampler(cl_sampler s) {
  REAL(sampler_fn, clReleaseSampler)
  return count_status(CLCOUNT_SAMPLER, fn_(s), -1);
}

/* ---- events ---- */
typedef cl_event (*user_event_fn)(cl_context, cl_int *);
cl_event clCreateUserEvent(cl_context context, cl_int *errcode_ret) {
  REAL(user_event_fn, clCreateUserEvent)
  cl_event e = fn_(context, errcode_ret);
  count_created(CLCOUNT_EVENT, e);
  return e;
}

typedef cl_int (*event_fn)(cl_event);
cl_int clRetainEvent(cl_event e) {
  REAL(event_fn, clRetainEvent)
  return count_status(CLCOUNT_EVENT, fn_(e), 1);
}
cl_int clReleaseEvent(cl_event e) {
  REAL(event_fn, clReleaseEvent)
  return count_status(CLCOUNT_EVENT, fn_(e), -1);
}

/* ---- enqueues that may return an event ---- */
#define WAIT cl_uint num_events_in_wait_list, const cl_event *event_wait_list, cl_event *event
#define WAIT_ARGS num_events_in_wait_list, event_wait_list, event
#define WAIT_TYPES cl_uint, const cl_event *, cl_event *

typedef cl_int (*read_buffer_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, WAIT_TYPES);
cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem buffer, cl_bool blocking, size_t offset, size_t size,
                           void *ptr, WAIT) {
  REAL(read_buffer_fn, clEnqueueReadBuffer)
  return count_event(fn_(q, buffer, blocking, offset, size, ptr, WAIT_ARGS), event);
}

typedef cl_int (*write_buffer_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, WAIT_TYPES);
cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem buffer, cl_bool blocking, size_t offset, size_t size,
                            const void *ptr, WAIT) {
  REAL(write_buffer_fn, clEnqueueWriteBuffer)
  return count_event(fn_(q, buffer, blocking, offset, size, ptr, WAIT_ARGS), event);
}

typedef cl_int (*read_rect_fn)(cl_command_queue, cl_mem, cl_bool, const size_t *, const size_t *,
                               const size_t *, size_t, size_t, size_t, size_t, void *, WAIT_TYPES);
cl_int clEnqueueReadBufferRect(cl_command_queue q, cl_mem buffer, cl_bool blocking, const size_t *buffer_origin,
                               const size_t *host_origin, const size_t *region, size_t buffer_row_pitch,
                               size_t buffer_slice_pitch, size_t host_row_pitch, size_t host_slice_pitch,
                               void *ptr, WAIT) {
  REAL(read_rect_fn, clEnqueueReadBufferRect)
  return count_event(fn_(q, buffer, blocking, buffer_origin, host_origin, region, buffer_row_pitch,
                         buffer_slice_pitch, host_row_pitch, host_slice_pitch, ptr, WAIT_ARGS),
                     event);
}

typedef cl_int (*write_rect_fn)(cl_command_queue, cl_mem, cl_bool, const size_t *, const size_t *,
                                const size_t *, size_t, size_t, size_t, size_t, const void *, WAIT_TYPES);
cl_int clEnqueueWriteBufferRect(cl_command_queue q, cl_mem buffer, cl_bool blocking, const size_t *buffer_origin,
                                const size_t *host_origin, const size_t *region, size_t buffer_row_pitch,
                                size_t buffer_slice_pitch, size_t host_row_pitch, size_t host_slice_pitch,
                                const void *ptr, WAIT) {
  REAL(write_rect_fn, clEnqueueWriteBufferRect)
  return count_event(fn_(q, buffer, blocking, buffer_origin, host_origin, region, buffer_row_pitch,
                         buffer_slice_pitch, host_row_pitch, host_slice_pitch, ptr, WAIT_ARGS),
                     event);
}

typedef cl_int (*fill_buffer_fn)(cl_command_queue, cl_mem, const void *, size_t, size_t, size_t, WAIT_TYPES);
cl_int clEnqueueFillBuffer(cl_command_queue q, cl_mem buffer, const void *pattern, size_t pattern_size,
                           size_t offset, size_t size, WAIT) {
  REAL(fill_buffer_fn, clEnqueueFillBuffer)
  return count_event(fn_(q, buffer, pattern, pattern_size, offset, size, WAIT_ARGS), event);
}

typedef cl_int (*copy_buffer_fn)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, WAIT_TYPES);
cl_int clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t src_offset, size_t dst_offset,
                           size_t size, WAIT) {
  REAL(copy_buffer_fn, clEnqueueCopyBuffer)
  return count_event(fn_(q, src, dst, src_offset, dst_offset, size, WAIT_ARGS), event);
}

typedef cl_int (*copy_rect_fn)(cl_command_queue, cl_mem, cl_mem, const size_t *, const size_t *,
                               const size_t *, size_t, size_t, size_t, size_t, WAIT_TYPES);
cl_int clEnqueueCopyBufferRect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *src_origin,
                               const size_t *dst_origin, const size_t *region, size_t src_row_pitch,
                               size_t src_slice_pitch, size_t dst_row_pitch, size_t dst_slice_pitch, WAIT) {
  REAL(copy_rect_fn, clEnqueueCopyBufferRect)
  return count_event(fn_(q, src, dst, src_origin, dst_origin, region, src_row_pitch, src_slice_pitch,
                         dst_row_pitch, dst_slice_pitch, WAIT_ARGS),
                     event);
}

typedef void *(*map_buffer_fn)(cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t, WAIT_TYPES,
                               cl_int *);
void *clEnqueueMapBuffer(cl_command_queue q, cl_mem buffer, cl_bool blocking, cl_map_flags flags, size_t offset,
                         size_t size, WAIT, cl_int *errcode_ret) {
  REAL(map_buffer_fn, clEnqueueMapBuffer)
  cl_int err = CL_SUCCESS;
  void *p = fn_(q, buffer, blocking, flags, offset, size, WAIT_ARGS, &err);
  if (errcode_ret) *errcode_ret = err;
  count_event(p ? err : CL_INVALID_VALUE, event);
  return p;
}

typedef cl_int (*unmap_fn)(cl_command_queue, cl_mem, void *, WAIT_TYPES);
cl_int clEnqueueUnmapMemObject(cl_command_queue q, cl_mem memobj, void *mapped_ptr, WAIT) {
  REAL(unmap_fn, clEnqueueUnmapMemObject)
  return count_event(fn_(q, memobj, mapped_ptr, WAIT_ARGS), event);
}

typedef cl_int (*migrate_fn)(cl_command_queue, cl_uint, const cl_mem *, cl_mem_migration_flags, WAIT_TYPES);
cl_int clEnqueueMigrateMemObjects(cl_command_queue q, cl_uint num_mem_objects, const cl_mem *mem_objects,
                                  cl_mem_migration_flags flags, WAIT) {
  REAL(migrate_fn, clEnqueueMigrateMemObjects)
  return count_event(fn_(q, num_mem_objects, mem_objects, flags, WAIT_ARGS), event);
}

typedef cl_int (*ndrange_fn)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                             const size_t *, WAIT_TYPES);
cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel kernel, cl_uint work_dim,
                              const size_t *global_work_offset, const size_t *global_work_size,
                              const size_t *local_work_size, WAIT) {
  REAL(ndrange_fn, clEnqueueNDRangeKernel)
  return count_event(fn_(q, kernel, work_dim, global_work_offset, global_work_size, local_work_size, WAIT_ARGS),
                     event);
}

typedef cl_int (*task_fn)(cl_command_queue, cl_kernel, WAIT_TYPES);
cl_int clEnqueueTask(cl_command_queue q, cl_kernel kernel, WAIT) {
  REAL(task_fn, clEnqueueTask)
  return count_event(fn_(q, kernel, WAIT_ARGS), event);
}

typedef cl_int (*marker_fn)(cl_command_queue, WAIT_TYPES);
cl_int clEnqueueMarkerWithWaitList(cl_command_queue q, WAIT) {
  REAL(marker_fn, clEnqueueMarkerWithWaitList)
  return count_event(fn_(q, WAIT_ARGS), event);
}
cl_int clEnqueueBarrierWithWaitList(cl_command_queue q, WAIT) {
  REAL(marker_fn, clEnqueueBarrierWithWaitList)
  return count_event(fn_(q, WAIT_ARGS), event);
}
