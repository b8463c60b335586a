/* Optimizers (to be written). */
#include "cltensor/optim.h"
#include "core/error.h"
ct_status ct_sgd_new(ct_optimizer **out, ct_tensor *const *params, int n, double lr, double momentum,
                     double weight_decay, bool nesterov) {
  (void)out, (void)params, (void)n, (void)lr, (void)momentum, (void)weight_decay, (void)nesterov;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_sgd_new: not implemented yet");
}
ct_status ct_adam_new(ct_optimizer **out, ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                      double eps, double weight_decay, bool decoupled) {
  (void)out, (void)params, (void)n, (void)lr, (void)beta1, (void)beta2, (void)eps, (void)weight_decay, (void)decoupled;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_adam_new: not implemented yet");
}
ct_status ct_optimizer_step(ct_optimizer *opt) { (void)opt; return CT_ERR_UNSUPPORTED; }
ct_status ct_optimizer_zero_grad(ct_optimizer *opt) { (void)opt; return CT_ERR_UNSUPPORTED; }
ct_status ct_optimizer_set_lr(ct_optimizer *opt, double lr) { (void)opt, (void)lr; return CT_ERR_UNSUPPORTED; }
double ct_optimizer_get_lr(const ct_optimizer *opt) { (void)opt; return 0; }
void ct_optimizer_free(ct_optimizer *opt) { (void)opt; }
ct_status ct_optimizer_save(const ct_optimizer *opt, ct_safetensors *st) { (void)opt, (void)st; return CT_ERR_UNSUPPORTED; }
ct_status ct_optimizer_load(ct_optimizer *opt, const ct_safetensors *st) { (void)opt, (void)st; return CT_ERR_UNSUPPORTED; }
