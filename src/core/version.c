/* The runtime version query: the version this library was built as, which may differ from the
 * headers a program was compiled with (see cltensor/version.h). */
#include "cltensor/version.h"

/* Built from the numbers meson reads, so the string and the number cannot disagree
 * (tests/abi checks that CT_VERSION_STRING, written by hand, says the same). */
#define CT__STR_(x) #x
#define CT__STR(x) CT__STR_(x)

_Static_assert(CT_VERSION_MINOR < 100 && CT_VERSION_PATCH < 100, "CT_VERSION_NUMBER needs minor and patch < 100");

const char *ct_version(void) {
  return CT__STR(CT_VERSION_MAJOR) "." CT__STR(CT_VERSION_MINOR) "." CT__STR(CT_VERSION_PATCH);
}

int ct_version_number(void) { return CT_VERSION_NUMBER; }
