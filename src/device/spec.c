/* Device spec strings: "auto", "gpu[:N]", "cpu[:N]", "accelerator[:N]", "cl:P:D", "name:SUB". */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"
#include "device/device.h"

#define CT__SPEC_FORMS \
  "valid forms: auto, gpu[:N], cpu[:N], accelerator[:N], cl:P:D, name:SUBSTRING"

/* The spec may come from $CLTENSOR_DEVICE: escaped, so that control bytes in it cannot reach
 * a terminal through the message. */
static ct_status ct__spec_bad(const char *fn, const char *spec, const char *why) {
  char esc[160];
  return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: invalid device spec '%s': %s (" CT__SPEC_FORMS ")", fn,
                   ct__escape(esc, sizeof esc, spec), why);
}

/* Indices have at most this many digits (a long then never overflows, and no machine has a
 * billion devices). */
#define CT__INDEX_DIGITS 9

enum { CT__INDEX_OK, CT__INDEX_BAD, CT__INDEX_RANGE };

/* Parses a non-negative decimal integer filling [s, end) exactly: CT__INDEX_BAD when it is not
 * one, CT__INDEX_RANGE when it has more than CT__INDEX_DIGITS significant digits. */
static int ct__parse_index(const char *s, const char *end, long *out) {
  if (s == end) return CT__INDEX_BAD;
  for (const char *p = s; p < end; p++)
    if (!isdigit((unsigned char)*p)) return CT__INDEX_BAD;
  while (end - s > 1 && *s == '0') s++;
  if (end - s > CT__INDEX_DIGITS) return CT__INDEX_RANGE;
  long v = 0;
  for (const char *p = s; p < end; p++) v = v * 10 + (*p - '0');
  *out = v;
  return CT__INDEX_OK;
}

#define CT__RANGE_TEXT(what) what " out of range (at most 999999999)"

ct_status ct__spec_parse(struct ct__spec *out, const char *spec) {
  return ct__spec_parse_fn(out, spec, "ct_device_find");
}

ct_status ct__spec_parse_fn(struct ct__spec *out, const char *spec, const char *fn) {
  CT__CHECK_NOT_NULL(fn, spec);
  memset(out, 0, sizeof *out);
  size_t len = strlen(spec);
  if (len == 0) return ct__spec_bad(fn, spec, "empty");
  if (strcasecmp(spec, "auto") == 0) {
    out->kind = CT__SPEC_AUTO;
    return CT_OK;
  }
  if (strncasecmp(spec, "name:", 5) == 0) {
    if (spec[5] == '\0') return ct__spec_bad(fn, spec, "empty name");
    out->kind = CT__SPEC_NAME;
    out->name = spec + 5;
    return CT_OK;
  }
  const char *colon = strchr(spec, ':');
  size_t head = colon ? (size_t)(colon - spec) : len;
  if (head == 2 && strncasecmp(spec, "cl", 2) == 0) {
    if (!colon) return ct__spec_bad(fn, spec, "cl needs a platform and a device index");
    const char *c2 = strchr(colon + 1, ':');
    if (!c2) return ct__spec_bad(fn, spec, "cl needs a platform and a device index");
    int rp = ct__parse_index(colon + 1, c2, &out->platform);
    int rd = rp == CT__INDEX_BAD ? CT__INDEX_BAD : ct__parse_index(c2 + 1, spec + len, &out->device);
    if (rp == CT__INDEX_BAD || rd == CT__INDEX_BAD)
      return ct__spec_bad(fn, spec, "platform and device must be non-negative integers");
    if (rp == CT__INDEX_RANGE) return ct__spec_bad(fn, spec, CT__RANGE_TEXT("the platform index is"));
    if (rd == CT__INDEX_RANGE) return ct__spec_bad(fn, spec, CT__RANGE_TEXT("the device index is"));
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
      int r = colon ? ct__parse_index(colon + 1, spec + len, &out->n) : CT__INDEX_OK;
      if (r == CT__INDEX_BAD) return ct__spec_bad(fn, spec, "the index after ':' must be a non-negative integer");
      if (r == CT__INDEX_RANGE) return ct__spec_bad(fn, spec, CT__RANGE_TEXT("the index after ':' is"));
      return CT_OK;
    }
  }
  return ct__spec_bad(fn, spec, "unknown device kind");
}
