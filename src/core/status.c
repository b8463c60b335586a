/* The status table's name and description functions, and the thread-local error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <CL/cl_ext.h>

#include "core/error.h"

/* Long enough for a build log excerpt or a full device list; longer text is cut. */
#define CT__MSG_CAP 16384

static _Thread_local char ct__msg[CT__MSG_CAP];

const char *ct_status_name(ct_status status) {
  switch (status) {
#define CT_STATUS_NAME_(name, value, desc) \
  case name:                               \
    return #name;
    CT_STATUS_MAP(CT_STATUS_NAME_)
#undef CT_STATUS_NAME_
  }
  return "CT_ERR_UNKNOWN";
}

const char *ct_status_description(ct_status status) {
  switch (status) {
#define CT_STATUS_DESC_(name, value, desc) \
  case name:                               \
    return desc;
    CT_STATUS_MAP(CT_STATUS_DESC_)
#undef CT_STATUS_DESC_
  }
  return "unknown status code";
}

const char *ct_last_error(void) { return ct__msg; }

void ct_clear_error(void) { ct__msg[0] = '\0'; }

ct_status ct__error(ct_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ct__msg, sizeof ct__msg, fmt, ap);
  va_end(ap);
  return status;
}

void ct__error_append(const char *fmt, ...) {
  size_t len = strlen(ct__msg);
  if (len + 1 >= sizeof ct__msg) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ct__msg + len, sizeof ct__msg - len, fmt, ap);
  va_end(ap);
}

ct_status ct__cl_error(cl_int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ct__msg, sizeof ct__msg, fmt, ap);
  va_end(ap);
  ct__error_append(": %s (%d)", ct__cl_error_name(err), (int)err);
  if (err == CL_OUT_OF_RESOURCES || err == CL_OUT_OF_HOST_MEMORY ||
      err == CL_MEM_OBJECT_ALLOCATION_FAILURE)
    return CT_ERR_OUT_OF_MEMORY;
  return CT_ERR_OPENCL;
}

const char *ct__cl_error_name(cl_int err) {
  switch (err) {
#define CT__CL_(e) \
  case e:          \
    return #e;
    CT__CL_(CL_SUCCESS)
    CT__CL_(CL_DEVICE_NOT_FOUND)
    CT__CL_(CL_DEVICE_NOT_AVAILABLE)
    CT__CL_(CL_COMPILER_NOT_AVAILABLE)
    CT__CL_(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    CT__CL_(CL_OUT_OF_RESOURCES)
    CT__CL_(CL_OUT_OF_HOST_MEMORY)
    CT__CL_(CL_PROFILING_INFO_NOT_AVAILABLE)
    CT__CL_(CL_MEM_COPY_OVERLAP)
    CT__CL_(CL_IMAGE_FORMAT_MISMATCH)
    CT__CL_(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    CT__CL_(CL_BUILD_PROGRAM_FAILURE)
    CT__CL_(CL_MAP_FAILURE)
    CT__CL_(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    CT__CL_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    CT__CL_(CL_COMPILE_PROGRAM_FAILURE)
    CT__CL_(CL_LINKER_NOT_AVAILABLE)
    CT__CL_(CL_LINK_PROGRAM_FAILURE)
    CT__CL_(CL_DEVICE_PARTITION_FAILED)
    CT__CL_(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    CT__CL_(CL_INVALID_VALUE)
    CT__CL_(CL_INVALID_DEVICE_TYPE)
    CT__CL_(CL_INVALID_PLATFORM)
    CT__CL_(CL_INVALID_DEVICE)
    CT__CL_(CL_INVALID_CONTEXT)
    CT__CL_(CL_INVALID_QUEUE_PROPERTIES)
    CT__CL_(CL_INVALID_COMMAND_QUEUE)
    CT__CL_(CL_INVALID_HOST_PTR)
    CT__CL_(CL_INVALID_MEM_OBJECT)
    CT__CL_(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    CT__CL_(CL_INVALID_IMAGE_SIZE)
    CT__CL_(CL_INVALID_SAMPLER)
    CT__CL_(CL_INVALID_BINARY)
    CT__CL_(CL_INVALID_BUILD_OPTIONS)
    CT__CL_(CL_INVALID_PROGRAM)
    CT__CL_(CL_INVALID_PROGRAM_EXECUTABLE)
    CT__CL_(CL_INVALID_KERNEL_NAME)
    CT__CL_(CL_INVALID_KERNEL_DEFINITION)
    CT__CL_(CL_INVALID_KERNEL)
    CT__CL_(CL_INVALID_ARG_INDEX)
    CT__CL_(CL_INVALID_ARG_VALUE)
    CT__CL_(CL_INVALID_ARG_SIZE)
    CT__CL_(CL_INVALID_KERNEL_ARGS)
    CT__CL_(CL_INVALID_WORK_DIMENSION)
    CT__CL_(CL_INVALID_WORK_GROUP_SIZE)
    CT__CL_(CL_INVALID_WORK_ITEM_SIZE)
    CT__CL_(CL_INVALID_GLOBAL_OFFSET)
    CT__CL_(CL_INVALID_EVENT_WAIT_LIST)
    CT__CL_(CL_INVALID_EVENT)
    CT__CL_(CL_INVALID_OPERATION)
    CT__CL_(CL_INVALID_GL_OBJECT)
    CT__CL_(CL_INVALID_BUFFER_SIZE)
    CT__CL_(CL_INVALID_MIP_LEVEL)
    CT__CL_(CL_INVALID_GLOBAL_WORK_SIZE)
    CT__CL_(CL_INVALID_PROPERTY)
    CT__CL_(CL_INVALID_IMAGE_DESCRIPTOR)
    CT__CL_(CL_INVALID_COMPILER_OPTIONS)
    CT__CL_(CL_INVALID_LINKER_OPTIONS)
    CT__CL_(CL_INVALID_DEVICE_PARTITION_COUNT)
    CT__CL_(CL_PLATFORM_NOT_FOUND_KHR)
#undef CT__CL_
  }
  return "CL_UNKNOWN_ERROR";
}
