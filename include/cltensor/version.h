/* libcltensor version: the single source of truth, read by meson for the project version and
 * the library soname. Self-contained; usable from C and C++.
 *
 * Two versions can differ: the macros below describe the headers a program was compiled
 * with; ct_version() and ct_version_number() describe the library loaded at run time (the
 * shared library found by the dynamic linker, which a binding or a program built against an
 * older header may meet). Compare them to detect a mismatch:
 *
 *   if (ct_version_number() / 100 != CT_VERSION_NUMBER / 100)  // major.minor differ
 *     fprintf(stderr, "built with cltensor %s, running %s\n", CT_VERSION_STRING, ct_version());
 */
#ifndef CLTENSOR_VERSION_H
#define CLTENSOR_VERSION_H

#include "cltensor/export.h"

#define CT_VERSION_MAJOR 0
#define CT_VERSION_MINOR 1
#define CT_VERSION_PATCH 0
#define CT_VERSION_STRING "0.1.0"
/* major * 10000 + minor * 100 + patch (minor and patch stay below 100): 0.1.0 is 100, 1.2.3
 * is 10203; ordered as the versions are. */
#define CT_VERSION_NUMBER (CT_VERSION_MAJOR * 10000 + CT_VERSION_MINOR * 100 + CT_VERSION_PATCH)

CT_BEGIN_DECLS

/* The loaded library's version as "major.minor.patch" (a static string; never NULL). */
CT_API const char *ct_version(void);
/* The loaded library's version as major * 10000 + minor * 100 + patch (CT_VERSION_NUMBER of
 * the headers it was built from). */
CT_API int ct_version_number(void);

CT_END_DECLS

#endif
