/* Matrix multiply: matmul, linear, addmm (CLBlast or host BLAS). */
#ifndef CLTENSOR_LINALG_H
#define CLTENSOR_LINALG_H

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

CT_END_DECLS

#endif
