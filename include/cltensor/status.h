/* Status codes and error messages.
 *
 * Every public function that can fail returns a ct_status. CT_OK is 0; every other code is a
 * failure, and the calling thread's ct_last_error() then tells the story of that failure: the
 * function, the cause, the values involved (shapes, devices, sizes) and, where OpenCL was
 * involved, the OpenCL error's name (e.g. "CL_OUT_OF_RESOURCES").
 *
 * One table, CT_STATUS_MAP, generates the enum, ct_status_name() and ct_status_description(),
 * so the three can never drift apart. Codes are stable: new ones are only appended. */
#ifndef CLTENSOR_STATUS_H
#define CLTENSOR_STATUS_H

#include "cltensor/export.h"

CT_BEGIN_DECLS

/* X(name, value, fixed description) */
#define CT_STATUS_MAP(X)                                                                   \
  X(CT_OK, 0, "success")                                                                   \
  X(CT_ERR_INVALID_ARGUMENT, 1, "invalid argument")                                        \
  X(CT_ERR_NO_PLATFORM, 2, "no OpenCL platform is installed")                              \
  X(CT_ERR_DEVICE_NOT_FOUND, 3, "no OpenCL device matches the request")                    \
  X(CT_ERR_DEVICE_MISMATCH, 4, "tensors are on different devices")                         \
  X(CT_ERR_DTYPE_MISMATCH, 5, "tensor dtypes do not fit together")                         \
  X(CT_ERR_SHAPE_MISMATCH, 6, "tensor shapes do not fit together")                         \
  X(CT_ERR_OUT_OF_MEMORY, 7, "out of memory")                                              \
  X(CT_ERR_UNSUPPORTED, 8, "operation or dtype not supported on this device")              \
  X(CT_ERR_KERNEL_BUILD, 9, "an OpenCL kernel failed to build")                            \
  X(CT_ERR_OPENCL, 10, "an OpenCL call failed")                                            \
  X(CT_ERR_IO, 11, "a file could not be read or written")                                  \
  X(CT_ERR_FORMAT, 12, "malformed file or data")                                           \
  X(CT_ERR_INTERNAL, 13, "internal error in libcltensor")                                  \
  X(CT_ERR_DIST, 14, "a distributed collective failed, timed out or the ranks disagreed")

typedef enum ct_status {
#define CT_STATUS_ENUM_(name, value, desc) name = value,
  CT_STATUS_MAP(CT_STATUS_ENUM_)
#undef CT_STATUS_ENUM_
} ct_status;

/* The code's identifier as a static string ("CT_ERR_OUT_OF_MEMORY"); "CT_ERR_UNKNOWN" for a
 * value outside the table. Never NULL. */
CT_API const char *ct_status_name(ct_status status);

/* A fixed, one-line description of the code ("out of memory"); never NULL. */
CT_API const char *ct_status_description(ct_status status);

/* The calling thread's message for its most recent failure, or "" when none failed yet.
 * The string is owned by the library and stays valid until this thread's next failing call. */
CT_API const char *ct_last_error(void);

/* Clears the calling thread's message (ct_last_error() returns "" afterwards). */
CT_API void ct_clear_error(void);

CT_END_DECLS

#endif
