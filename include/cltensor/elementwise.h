/* Elementwise ops: binary and unary math with broadcasting, comparisons, where, clamp. */
#ifndef CLTENSOR_ELEMENTWISE_H
#define CLTENSOR_ELEMENTWISE_H

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

CT_END_DECLS

#endif
