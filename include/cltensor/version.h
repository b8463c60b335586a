/* libcltensor version: the single source of truth, read by meson for the project version and
 * the library soname. Self-contained; usable from C and C++. */
#ifndef CLTENSOR_VERSION_H
#define CLTENSOR_VERSION_H

#define CT_VERSION_MAJOR 0
#define CT_VERSION_MINOR 1
#define CT_VERSION_PATCH 0
#define CT_VERSION_STRING "0.1.0"

#endif
