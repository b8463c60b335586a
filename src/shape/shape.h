/* Internal helpers of the shape ops (src/shape/). */
#ifndef CT_SHAPE_SHAPE_H
#define CT_SHAPE_SHAPE_H

#include <stdint.h>

#include "cltensor/shape.h"
#include "tensor/tensor.h"

/* A view of t: len elements along dim from start (both already in range). */
ct_status ct__shape_narrow(ct_tensor **out, const ct_tensor *t, int dim, int64_t start, int64_t len);

#endif
