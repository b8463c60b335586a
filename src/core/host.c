/* Host-memory helpers (host.h). */
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/host.h"

ct_status ct__host_malloc(void **out, size_t bytes, const char *fn) {
  /* malloc(0) may return NULL; one byte keeps "NULL means failure" simple for callers. */
  *out = malloc(bytes ? bytes : 1);
  if (!*out)
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of host memory", fn,
                     bytes);
  return CT_OK;
}

void ct__normalize_bool(void *buf, size_t count) {
  uint8_t *p = buf;
  for (size_t i = 0; i < count; i++) p[i] = p[i] != 0;
}
