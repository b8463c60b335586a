/* Environment variables: the boolean rule and message escaping (see env.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"

const char *ct__escape(char *buf, size_t cap, const char *s) {
  if (!buf || cap < 8) return "";
  if (!s) s = "(null)";
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int plain = *p >= 0x20 && *p < 0x7f && *p != '\\';
    size_t need = plain ? 1 : 4;
    if (o + need + 4 > cap) { /* room for "..." and the NUL */
      memcpy(buf + o, "...", 4);
      return buf;
    }
    if (plain) buf[o++] = (char)*p;
    else o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", *p);
  }
  buf[o] = '\0';
  return buf;
}

ct_status ct__env_bool(const char *fn, const char *name, bool dflt, bool *out) {
  static const struct {
    const char *word;
    bool value;
  } words[] = {{"1", true},   {"0", false},  {"true", true}, {"false", false},
               {"yes", true}, {"no", false}, {"on", true},   {"off", false}};
  *out = dflt;
  const char *v = getenv(name);
  if (!v || !*v) return CT_OK;
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
    if (strcasecmp(v, words[i].word) == 0) {
      *out = words[i].value;
      return CT_OK;
    }
  }
  char esc[96];
  return ct__error(CT_ERR_INVALID_ARGUMENT,
                   "%s: $%s='%s' is not a boolean (expected 0, 1, true, false, yes, no, on or off, "
                   "in any case)",
                   fn, name, ct__escape(esc, sizeof esc, v));
}
