/* Reading the environment: one rule for boolean variables, and escaping of values (or any
 * untrusted text) before they go into an error message. */
#ifndef CT_CORE_ENV_H
#define CT_CORE_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "cltensor/status.h"

/* Copies s into buf (cap bytes, cap >= 8) with control bytes, DEL, backslash and non-ASCII bytes
 * written as \xNN, so that a message built from a hostile value cannot move the cursor, colour
 * the terminal or forge a second line. Truncates with "..." when the escaped text does not fit.
 * s NULL gives "(null)". Returns buf. */
const char *ct__escape(char *buf, size_t cap, const char *s);

/* *out = the boolean variable `name`: unset or empty gives dflt; 0/1/true/false/yes/no/on/off
 * (any case) give their value; anything else is CT_ERR_INVALID_ARGUMENT with a message
 * "<fn>: $<name>='<escaped value>' is not a boolean (expected ...)". *out is dflt on failure. */
ct_status ct__env_bool(const char *fn, const char *name, bool dflt, bool *out);

#endif
