/* A growing string for text built piece by piece with printf formats: reports, printouts and
 * generated kernel source. */
#ifndef CT_CORE_TEXT_H
#define CT_CORE_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

/* Zero-initialised it is empty (s NULL); the owner frees s, and may set len back to 0 to reuse
 * it. A failed allocation (or a format vsnprintf refuses) sets oom and every later append is
 * dropped, so the text is cut short rather than left with holes; callers that must not use a
 * partial text check oom. */
struct ct__text {
  char *s;
  size_t len, cap;
  bool oom;
};

/* Appends the formatted text, keeping s NUL-terminated. */
void ct__text_add(struct ct__text *t, const char *fmt, ...) CT__PRINTF(2, 3);
void ct__text_vadd(struct ct__text *t, const char *fmt, va_list ap);

#endif
