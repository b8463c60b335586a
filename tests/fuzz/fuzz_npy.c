/* Fuzz target: the .npy header parser (ct__npy_header_size, ct__npy_parse_header), fed exactly
 * as ct_npy_load feeds it: the first 12 bytes of the "file", then the whole header in a buffer
 * of exactly header_end bytes (so any read past it is an ASan finding). The input is the whole
 * file. Contract checks (abort on violation):
 *  - statuses are CT_OK, CT_ERR_FORMAT or CT_ERR_UNSUPPORTED (CT_ERR_OUT_OF_MEMORY never: the
 *    parser itself allocates nothing large);
 *  - an accepted header describes data that ends exactly at the end of the file, with a shape
 *    whose element count times the dtype size is data_bytes;
 *  - the header cltensor would write for that dtype and shape parses back to the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/io.h"

static int status_ok(ct_status st) {
  return st == CT_OK || st == CT_ERR_FORMAT || st == CT_ERR_UNSUPPORTED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t pre[12];
  size_t npre = size < sizeof pre ? size : sizeof pre;
  memcpy(pre, data, npre);
  uint64_t header_end = 0;
  ct_status st = ct__npy_header_size(&header_end, pre, npre, size, "fuzz.npy");
  if (!status_ok(st)) abort();
  if (st != CT_OK) return 0;
  if (header_end > size) abort();

  uint8_t *header = malloc(header_end ? (size_t)header_end : 1);
  if (!header) return 0;
  memcpy(header, data, (size_t)header_end);
  struct ct__npy_header h;
  st = ct__npy_parse_header(&h, header, (size_t)header_end, size, "fuzz.npy");
  free(header);
  if (!status_ok(st)) abort();
  if (st != CT_OK) return 0;

  if (h.version < 1 || h.version > 3 || h.ndim < 0 || h.ndim > CT_MAX_DIMS) abort();
  if (h.data_offset != header_end || h.data_offset + h.data_bytes != size) abort();
  uint64_t numel = 1;
  for (int i = 0; i < h.ndim; i++) {
    if (h.shape[i] < 0) abort();
    numel *= (uint64_t)h.shape[i];
  }
  if (numel * ct_dtype_size(h.dtype) != h.data_bytes) abort();

  /* What cltensor writes for this dtype and shape must parse back to the same. */
  char out[4096];
  size_t n = ct__npy_format_header(out, sizeof out, h.dtype, h.ndim, h.shape);
  if (n > 0) {
    struct ct__npy_header back;
    uint64_t file = n + h.data_bytes;
    if (ct__npy_parse_header(&back, out, n, file, "formatted.npy") != CT_OK) abort();
    if (back.dtype != h.dtype || back.ndim != h.ndim || back.fortran_order || back.swap ||
        back.data_bytes != h.data_bytes)
      abort();
    for (int i = 0; i < h.ndim; i++)
      if (back.shape[i] != h.shape[i]) abort();
  }
  return 0;
}
