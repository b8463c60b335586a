/* The gradient scaler (to be written). */
#include "cltensor/optim.h"
#include "core/error.h"
ct_status ct_grad_scaler_new(ct_grad_scaler **out, double init_scale, double growth_factor, double backoff_factor,
                             int growth_interval) {
  (void)out, (void)init_scale, (void)growth_factor, (void)backoff_factor, (void)growth_interval;
  return CT_ERR_UNSUPPORTED;
}
ct_status ct_grad_scaler_scale(ct_tensor **out, ct_grad_scaler *s, const ct_tensor *loss) { (void)out, (void)s, (void)loss; return CT_ERR_UNSUPPORTED; }
ct_status ct_grad_scaler_unscale(ct_grad_scaler *s, ct_optimizer *opt) { (void)s, (void)opt; return CT_ERR_UNSUPPORTED; }
ct_status ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt) { (void)s, (void)opt; return CT_ERR_UNSUPPORTED; }
bool ct_grad_scaler_step_skipped(const ct_grad_scaler *s) { (void)s; return false; }
ct_status ct_grad_scaler_update(ct_grad_scaler *s) { (void)s; return CT_ERR_UNSUPPORTED; }
double ct_grad_scaler_get_scale(const ct_grad_scaler *s) { (void)s; return 0; }
void ct_grad_scaler_free(ct_grad_scaler *s) { (void)s; }
