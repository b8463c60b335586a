/* Internal side of interop: tensors over buffers that cltensor's allocator did not make. */
#ifndef CT_INTEROP_INTEROP_H
#define CT_INTEROP_INTEROP_H

#include <CL/cl.h>

#include "cltensor/interop.h"

/* ct_from_cl_mem() with a hook: when the new tensor's storage is released, mem is released
 * and then release(release_ctx) runs (once), e.g. a DLPack producer's deleter. release may be
 * NULL. On failure nothing is retained and release is not called. fn names the public
 * function for messages. */
ct_status ct__wrap_cl_mem(ct_tensor **out, ct_device *d, cl_mem mem, size_t byte_offset, ct_dtype t,
                          int ndim, const int64_t *shape, const int64_t *strides,
                          void (*release)(void *ctx), void *release_ctx, const char *fn);

#endif
