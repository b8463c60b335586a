/* Internal helpers of the nn ops (attention, dropout, losses). */
#ifndef CT_NN_NN_H
#define CT_NN_NN_H

#include <stddef.h>
#include <stdint.h>

#include "cltensor/status.h"
#include "core/error.h"
#include "kernel/engine.h"

/* Launches k (locked) over `items` work-items, one each, in groups of a fixed size (the kernels
 * check their bounds): one size per kernel, so implementations that compile per work-group size
 * (PoCL) compile once. */
static inline ct_status ct__nn_launch_items(ct__kernel *k, ct_device *d, int64_t items) {
  size_t local;
  CT__TRY(ct__kernel_group_limit(&local, k, d, 64, 0));
  size_t global = ((size_t)items + local - 1) / local * local;
  return ct__kernel_launch(k, d, 1, &global, &local);
}

#endif
