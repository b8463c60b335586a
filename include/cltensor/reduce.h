/* Reductions (sum, mean, prod, max, min, argmax, argmin, var, std) and softmax. */
#ifndef CLTENSOR_REDUCE_H
#define CLTENSOR_REDUCE_H

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

CT_END_DECLS

#endif
