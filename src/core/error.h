/* Internal error reporting: every failing path sets the thread-local message and returns its
 * status in one expression, e.g.
 *   return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_slice: dim %d out of range for %d dims", d, n);
 */
#ifndef CT_CORE_ERROR_H
#define CT_CORE_ERROR_H

#include <CL/cl.h>

#include "cltensor/status.h"

#if defined(__GNUC__)
#define CT__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CT__PRINTF(a, b)
#endif

/* Sets this thread's message (printf-style) and returns status. */
ct_status ct__error(ct_status status, const char *fmt, ...) CT__PRINTF(2, 3);

/* For a failed OpenCL call: maps err to a status (CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY and
 * CL_MEM_OBJECT_ALLOCATION_FAILURE give CT_ERR_OUT_OF_MEMORY, the rest CT_ERR_OPENCL) and sets
 * the message "<formatted text>: <CL error name> (<code>)". */
ct_status ct__cl_error(cl_int err, const char *fmt, ...) CT__PRINTF(2, 3);

/* "CL_OUT_OF_RESOURCES" etc.; "CL_UNKNOWN_ERROR" for codes outside the 1.2 table. */
const char *ct__cl_error_name(cl_int err);

/* Appends text to this thread's current message (for adding a build log or a device list). */
void ct__error_append(const char *fmt, ...) CT__PRINTF(1, 2);

/* Argument checks. Each expands to a statement that returns from the enclosing function. */
#define CT__CHECK_NOT_NULL(fn, p)                                                   \
  do {                                                                              \
    if ((p) == NULL)                                                                \
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, #p); \
  } while (0)

/* Evaluates a ct_status expression and returns it from the enclosing function on failure. */
#define CT__TRY(expr)                   \
  do {                                  \
    ct_status ct__s_ = (expr);          \
    if (ct__s_ != CT_OK) return ct__s_; \
  } while (0)

#endif
