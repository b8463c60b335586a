/* libcltensor: index ops (filled in by issue #14). */
#ifndef CLTENSOR_INDEX_H
#define CLTENSOR_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/dtype.h"
#include "cltensor/device.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

CT_END_DECLS

#endif
