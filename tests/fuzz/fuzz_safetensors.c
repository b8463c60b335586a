/* Fuzz target: the safetensors header parser (ct__safetensors_header_size,
 * ct__safetensors_parse; the JSON text walked in place, each entry through cJSON), fed exactly as ct_safetensors_load feeds it: the
 * first 8 bytes of the "file", then the header in a buffer of exactly header_end bytes (so any
 * read past it is an ASan finding). The input is the whole file. Contract checks (abort on
 * violation):
 *  - statuses are CT_OK, CT_ERR_FORMAT or CT_ERR_UNSUPPORTED;
 *  - an accepted header's tensors lie inside the file, each spans element count x dtype size
 *    bytes, names are present and unique; freeing it leaves no leak (LeakSanitizer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/io.h"

static int status_ok(ct_status st) {
  return st == CT_OK || st == CT_ERR_FORMAT || st == CT_ERR_UNSUPPORTED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t pre[8];
  size_t npre = size < sizeof pre ? size : sizeof pre;
  memcpy(pre, data, npre);
  uint64_t header_end = 0;
  ct_status st = ct__safetensors_header_size(&header_end, pre, npre, size, "fuzz.safetensors");
  if (!status_ok(st)) abort();
  if (st != CT_OK) return 0;
  if (header_end > size || header_end < 8) abort();

  uint8_t *header = malloc((size_t)header_end);
  if (!header) return 0;
  memcpy(header, data, (size_t)header_end);
  struct ct__st_header h;
  memset(&h, 0, sizeof h);
  st = ct__safetensors_parse(&h, header, (size_t)header_end, size, "fuzz.safetensors");
  free(header);
  if (!status_ok(st)) abort();
  if (st != CT_OK) return 0;

  if (h.data_offset != header_end) abort();
  for (size_t i = 0; i < h.count; i++) {
    const struct ct__st_entry *e = &h.entries[i];
    if (!e->name || e->ndim < 0 || e->ndim > CT_MAX_DIMS || e->begin > e->end) abort();
    if (h.data_offset + e->end > size) abort();
    uint64_t numel = 1;
    for (int k = 0; k < e->ndim; k++) {
      if (e->shape[k] < 0) abort();
      numel *= (uint64_t)e->shape[k];
    }
    if (numel * ct_dtype_size(e->dtype) != e->end - e->begin) abort();
    for (size_t j = 0; j < i; j++)
      if (strcmp(h.entries[j].name, e->name) == 0) abort();
  }
  for (size_t i = 0; i < 2 * h.meta_count; i++)
    if (!h.meta[i]) abort();
  ct__safetensors_header_free(&h);
  return 0;
}
