/* Fuzz target: the device-spec parser (ct__spec_parse, the syntax of CLTENSOR_DEVICE and
 * ct_device_find). Pure: no OpenCL is touched. Besides ASan/UBSan findings it checks the
 * parser's contract and aborts on a violation, which libFuzzer reports as a crash:
 *  - the only statuses are CT_OK and CT_ERR_INVALID_ARGUMENT, the latter with a message that
 *    lists the valid forms;
 *  - an accepted spec printed back in its canonical form parses to the same thing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"

static const char *const kind_word[] = {"gpu", "accelerator", "cpu", "other"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The parser takes a C string: the input up to its first NUL, in an exact-size copy so a
   * read past the terminator is caught. */
  char *spec = malloc(size + 1);
  if (!spec) return 0;
  memcpy(spec, data, size);
  spec[size] = '\0';

  struct ct__spec s;
  ct_status st = ct__spec_parse(&s, spec);
  if (st != CT_OK) {
    if (st != CT_ERR_INVALID_ARGUMENT || strstr(ct_last_error(), "valid forms") == NULL) abort();
    free(spec);
    return 0;
  }
  char again[64];
  struct ct__spec t;
  switch (s.kind) {
    case CT__SPEC_AUTO:
      break;
    case CT__SPEC_NAME:
      if (s.name != spec + 5 || s.name[0] == '\0') abort();
      break;
    case CT__SPEC_TYPE:
      if ((int)s.type < 0 || (int)s.type > 3 || s.n < 0) abort();
      snprintf(again, sizeof again, "%s:%ld", kind_word[s.type], s.n);
      if (ct__spec_parse(&t, again) != CT_OK || t.kind != CT__SPEC_TYPE || t.type != s.type || t.n != s.n)
        abort();
      break;
    case CT__SPEC_CL:
      if (s.platform < 0 || s.device < 0) abort();
      snprintf(again, sizeof again, "cl:%ld:%ld", s.platform, s.device);
      if (ct__spec_parse(&t, again) != CT_OK || t.kind != CT__SPEC_CL || t.platform != s.platform ||
          t.device != s.device)
        abort();
      break;
    default:
      abort();
  }
  free(spec);
  return 0;
}
