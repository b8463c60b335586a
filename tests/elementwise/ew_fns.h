/* The types of the public elementwise forms (include/cltensor/elementwise.h), shared by the
 * tests that build op lists from the op table (src/elementwise/ops.def). Public API only. */
#ifndef EW_FNS_H
#define EW_FNS_H

#include "cltensor/cltensor.h"

typedef ct_status (*bin_fn)(ct_tensor **, const ct_tensor *, const ct_tensor *);
typedef ct_status (*bin_out_fn)(ct_tensor *, const ct_tensor *, const ct_tensor *);
typedef ct_status (*un_fn)(ct_tensor **, const ct_tensor *);
typedef ct_status (*un_out_fn)(ct_tensor *, const ct_tensor *);
/* tensor-scalar forms, and unary ops with one parameter (leaky_relu) */
typedef ct_status (*sc_fn)(ct_tensor **, const ct_tensor *, double);
typedef ct_status (*sc_out_fn)(ct_tensor *, const ct_tensor *, double);

#endif
