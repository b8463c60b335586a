/* libcltensor: PyTorch-style tensors on any OpenCL device, in C11.
 *
 * The umbrella header. A program picks a device, moves data there with explicit copies,
 * computes, and brings results back:
 *
 *   ct_device *dev;
 *   ct_tensor *a = NULL, *b = NULL, *c = NULL;
 *   float host[4] = {1, 2, 3, 4}, res[4];
 *   int64_t shape[2] = {2, 2};
 *   if (ct_device_default(&dev) != CT_OK ||                 // GPU if there is one, else CPU
 *       ct_from_host(&a, dev, CT_F32, 2, shape, host) != CT_OK ||
 *       ct_transpose(&b, a, 0, 1) != CT_OK ||               // a view, no copy
 *       ct_add(&c, a, b) != CT_OK ||
 *       ct_to_host(c, res, sizeof res) != CT_OK)
 *     fprintf(stderr, "cltensor: %s\n", ct_last_error());
 *   ct_release(c); ct_release(b); ct_release(a);
 *   ct_shutdown();
 *
 * Each header below is self-contained and documents ownership and the statuses it returns. */
#ifndef CLTENSOR_H
#define CLTENSOR_H

#include "cltensor/version.h"
#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/device.h"
#include "cltensor/dtype.h"
#include "cltensor/tensor.h"
#include "cltensor/elementwise.h"
#include "cltensor/reduce.h"
#include "cltensor/random.h"
#include "cltensor/linalg.h"
#include "cltensor/shape.h"
#include "cltensor/index.h"
#include "cltensor/nn.h"
#include "cltensor/init.h"
#include "cltensor/autograd.h"
#include "cltensor/optim.h"
#include "cltensor/dist.h"
#include "cltensor/sched.h"
#include "cltensor/data.h"
#include "cltensor/module.h"
#include "cltensor/io.h"
#include "cltensor/interop.h"
#include "cltensor/profile.h"
#include "cltensor/scope.h"
#include "cltensor/deprecated.h" /* the old names, for one release */

#endif
