/* Host-memory helpers shared by the layers that move tensor data through host buffers (file
 * formats, DLPack import). */
#ifndef CT_CORE_HOST_H
#define CT_CORE_HOST_H

#include <stddef.h>

#include "cltensor/status.h"

/* OUT: *out, bytes of host memory (at least one byte, so NULL always means failure); free()
 * it. CT_ERR_OUT_OF_MEMORY "<fn>: cannot allocate <bytes> bytes of host memory" when refused. */
ct_status ct__host_malloc(void **out, size_t bytes, const char *fn);

/* Rewrites every nonzero byte of buf[0..count) as 1 (bool data from outside may hold any byte). */
void ct__normalize_bool(void *buf, size_t count);

#endif
