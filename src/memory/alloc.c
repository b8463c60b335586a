/* Device memory blocks. First cut: one OpenCL buffer per block, released on free (the caching
 * allocator replaces this). */
#include <stdlib.h>

#include "core/error.h"
#include "device/device.h"
#include "memory/alloc.h"

ct_status ct__alloc(ct__block **out, ct_device *d, size_t bytes) {
  *out = NULL;
  CT__TRY(ct__device_open(d));
  /* Never ask OpenCL for 0 bytes (CL_INVALID_BUFFER_SIZE): empty tensors get a minimal block,
   * so every tensor has a valid cl_mem to pass to kernels. */
  size_t size = bytes == 0 ? 512 : (bytes + 511) / 512 * 512;
  if (size > d->props.max_alloc_bytes)
    return ct__error(CT_ERR_OUT_OF_MEMORY,
                     "out of memory on %s (%s): tried to allocate %zu bytes, above the device's "
                     "maximum single allocation of %llu bytes",
                     d->spec, d->props.name, bytes, (unsigned long long)d->props.max_alloc_bytes);
  ct__block *b = calloc(1, sizeof *b);
  if (!b) return ct__error(CT_ERR_OUT_OF_MEMORY, "out of host memory for a block header");
  cl_int err;
  b->mem = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE, size, NULL, &err);
  if (!b->mem) {
    free(b);
    return ct__cl_error(err, "clCreateBuffer of %zu bytes on %s failed", size, d->spec);
  }
  b->size = size;
  *out = b;
  return CT_OK;
}

void ct__free(ct__block *b) {
  if (!b) return;
  clReleaseMemObject(b->mem);
  free(b);
}
