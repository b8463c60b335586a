/* Gradient clipping (to be written). */
#include "cltensor/optim.h"
#include "core/error.h"
ct_status ct_clip_grad_norm(double *total_norm, ct_tensor *const *params, int n, double max_norm) {
  (void)total_norm, (void)params, (void)n, (void)max_norm;
  return CT_ERR_UNSUPPORTED;
}
