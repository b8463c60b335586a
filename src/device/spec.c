/* Device spec strings: "auto", "gpu[:N]", "cpu[:N]", "accelerator[:N]", "cl:P:D", "name:SUB". */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "device/device.h"

#define CT__SPEC_FORMS \
  "valid forms: auto, gpu[:N], cpu[:N], accelerator[:N], cl:P:D, name:SUBSTRING"

static ct_status ct__spec_bad(const char *spec, const char *why) {
  return ct__error(CT_ERR_INVALID_ARGUMENT, "invalid device spec '%s': %s (" CT__SPEC_FORMS ")",
                   spec, why);
}

/* Parses a non-negative decimal integer filling [s, end) exactly. */
static int ct__parse_index(const char *s, const char *end, long *out) {
  if (s == end || end - s > 9) return 0;
  long v = 0;
  for (const char *p = s; p < end; p++) {
    if (!isdigit((unsigned char)*p)) return 0;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return 1;
}

ct_status ct__spec_parse(struct ct__spec *out, const char *spec) {
  CT__CHECK_NOT_NULL("ct_device_find", spec);
  memset(out, 0, sizeof *out);
  size_t len = strlen(spec);
  if (len == 0) return ct__spec_bad(spec, "empty");
  if (strcasecmp(spec, "auto") == 0) {
    out->kind = CT__SPEC_AUTO;
    return CT_OK;
  }
  if (strncasecmp(spec, "name:", 5) == 0) {
    if (spec[5] == '\0') return ct__spec_bad(spec, "empty name");
    out->kind = CT__SPEC_NAME;
    out->name = spec + 5;
    return CT_OK;
  }
  const char *colon = strchr(spec, ':');
  size_t head = colon ? (size_t)(colon - spec) : len;
  if (head == 2 && strncasecmp(spec, "cl", 2) == 0) {
    if (!colon) return ct__spec_bad(spec, "cl needs a platform and a device index");
    const char *c2 = strchr(colon + 1, ':');
    if (!c2) return ct__spec_bad(spec, "cl needs a platform and a device index");
    if (!ct__parse_index(colon + 1, c2, &out->platform) ||
        !ct__parse_index(c2 + 1, spec + len, &out->device))
      return ct__spec_bad(spec, "platform and device must be non-negative integers");
    out->kind = CT__SPEC_CL;
    return CT_OK;
  }
  static const struct {
    const char *word;
    ct_device_type type;
  } types[] = {{"gpu", CT_DEVICE_GPU},
               {"cpu", CT_DEVICE_CPU},
               {"accelerator", CT_DEVICE_ACCELERATOR},
               {"other", CT_DEVICE_OTHER}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    if (head == strlen(types[i].word) && strncasecmp(spec, types[i].word, head) == 0) {
      out->kind = CT__SPEC_TYPE;
      out->type = types[i].type;
      out->n = 0;
      if (colon && !ct__parse_index(colon + 1, spec + len, &out->n))
        return ct__spec_bad(spec, "the index after ':' must be a non-negative integer");
      return CT_OK;
    }
  }
  return ct__spec_bad(spec, "unknown device kind");
}
