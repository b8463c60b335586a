/* Interop: raw OpenCL handles and DLPack. */
#ifndef CLTENSOR_INTEROP_H
#define CLTENSOR_INTEROP_H

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

CT_END_DECLS

#endif
