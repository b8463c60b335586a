/* The growing string of text.h. */
#include <stdio.h>
#include <stdlib.h>

#include "core/text.h"

/* One vsnprintf straight into the free space, which is enough once the buffer has grown (the
 * generated kernels' source is thousands of short appends); a second after growing when not. */
void ct__text_vadd(struct ct__text *t, const char *fmt, va_list ap) {
  if (t->oom) return;
  for (;;) {
    va_list aq;
    va_copy(aq, ap);
    int w = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, aq);
    va_end(aq);
    if (w < 0) {
      t->oom = true;
      break;
    }
    if (t->s && t->len + (size_t)w < t->cap) {
      t->len += (size_t)w;
      return;
    }
    size_t c = t->cap ? t->cap : 256;
    while (c <= t->len + (size_t)w) c *= 2;
    char *p = realloc(t->s, c);
    if (!p) {
      t->oom = true;
      break;
    }
    t->s = p;
    t->cap = c;
  }
  if (t->s) t->s[t->len] = '\0'; /* drop what a failed attempt wrote past len */
}

void ct__text_add(struct ct__text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ct__text_vadd(t, fmt, ap);
  va_end(ap);
}
