/* Profiler: per-kernel and per-transfer device time. */
#ifndef CLTENSOR_PROFILE_H
#define CLTENSOR_PROFILE_H

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

CT_END_DECLS

#endif
