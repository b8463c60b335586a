/* Random numbers: rand and randn from Philox4x32-10. */
#ifndef CLTENSOR_RANDOM_H
#define CLTENSOR_RANDOM_H

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

CT_END_DECLS

#endif
