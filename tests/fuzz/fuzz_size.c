/* Fuzz target: the size-string parser (ct__parse_size, the syntax of CLTENSOR_MEMORY_LIMIT).
 * Pure: no OpenCL. Besides ASan/UBSan findings it checks the parser's contract and aborts on a
 * violation, which libFuzzer reports as a crash:
 *  - the only statuses are CT_OK and CT_ERR_INVALID_ARGUMENT, the latter quoting the text;
 *  - a plain decimal number ("123", with optional blanks around and an optional "B") is that
 *    many bytes, exactly as strtoull reads it;
 *  - a number with a unit is the number times the unit, give or take the truncated fraction:
 *    the same text with "KiB" gives 1024 times the value with "B" when both are integers. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "memory/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';

  uint64_t v = 0;
  ct_status st = ct__parse_size(&v, text);
  if (st != CT_OK) {
    if (st != CT_ERR_INVALID_ARGUMENT || strstr(ct_last_error(), "size string '") == NULL) abort();
    free(text);
    return 0;
  }
  /* Digits only (between optional blanks): compare with strtoull. */
  const char *p = text + strspn(text, " \t");
  size_t digits = strspn(p, "0123456789");
  const char *after = p + digits;
  if (digits > 0 && after[strspn(after, " \t")] == '\0') {
    errno = 0;
    unsigned long long want = strtoull(p, NULL, 10);
    if (errno == ERANGE || want != v) abort();
    /* The same number with the binary kilo unit: 1024 times as many bytes, or an overflow
     * error when that does not fit. */
    char *kib = malloc(digits + 4);
    if (kib) {
      memcpy(kib, p, digits);
      memcpy(kib + digits, "KiB", 4);
      uint64_t k = 0;
      ct_status sk = ct__parse_size(&k, kib);
      if (v <= UINT64_MAX / 1024) {
        if (sk != CT_OK || k != v * 1024) abort();
      } else if (sk != CT_ERR_INVALID_ARGUMENT) {
        abort();
      }
      free(kib);
    }
  }
  free(text);
  return 0;
}
