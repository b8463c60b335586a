/* Files: .npy and safetensors. */
#ifndef CLTENSOR_IO_H
#define CLTENSOR_IO_H

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

CT_END_DECLS

#endif
