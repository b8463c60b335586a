/* Training: optimizers, gradient clipping, checkpoints, loss scaling for mixed precision.
 *
 *   ct_tensor *params[] = {w1, b1, w2, b2};          // leaves with ct_set_requires_grad
 *   ct_optimizer *opt;
 *   ct_adam_new(&opt, params, 4, 1e-3, 0.9, 0.999, 1e-8, 0.0, false);
 *   for (...) {
 *     ct_optimizer_zero_grad(opt);
 *     ...forward...; ct_backward(loss, NULL);
 *     ct_optimizer_step(opt);
 *   }
 *   ct_optimizer_free(opt);
 *
 * Updates follow PyTorch's torch.optim formulas exactly (same results to f32 rounding), each
 * step a few fused kernels per parameter. Parameters are updated in place with grad mode off
 * (their storage version moves, as PyTorch's); a parameter without a gradient is skipped, as
 * PyTorch skips p.grad is None. The optimizer holds a reference to each parameter. */
#ifndef CLTENSOR_OPTIM_H
#define CLTENSOR_OPTIM_H

#include <stdbool.h>

#include "cltensor/export.h"
#include "cltensor/io.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_optimizer ct_optimizer;

/* Stochastic gradient descent with momentum (torch.optim.SGD, dampening 0):
 *   g = grad + weight_decay * p;  b = momentum * b + g (b = g at the first step);
 *   g = nesterov ? g + momentum * b : b  (when momentum != 0);  p -= lr * g.
 * params: n float leaves that require grad, all distinct. lr >= 0, momentum >= 0,
 * weight_decay >= 0, nesterov needs momentum > 0 (CT_ERR_INVALID_ARGUMENT otherwise, naming
 * the value). */
CT_API ct_status ct_sgd_new(ct_optimizer **out, ct_tensor *const *params, int n, double lr, double momentum,
                            double weight_decay, bool nesterov);
/* Adam (decoupled false: torch.optim.Adam, weight decay added to the gradient) or AdamW
 * (decoupled true: torch.optim.AdamW, p *= 1 - lr * weight_decay before the update):
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
 * 0 <= beta1, beta2 < 1, eps >= 0, lr >= 0, weight_decay >= 0. */
CT_API ct_status ct_adam_new(ct_optimizer **out, ct_tensor *const *params, int n, double lr, double beta1,
                             double beta2, double eps, double weight_decay, bool decoupled);
/* One update of every parameter that has a gradient. */
CT_API ct_status ct_optimizer_step(ct_optimizer *opt);
/* Drops every parameter's gradient (set_to_none, PyTorch's default). */
CT_API ct_status ct_optimizer_zero_grad(ct_optimizer *opt);
/* Sets the learning rate for the next steps (schedulers call this). lr >= 0. */
CT_API ct_status ct_optimizer_set_lr(ct_optimizer *opt, double lr);
CT_API double ct_optimizer_get_lr(const ct_optimizer *opt); /* NaN for NULL */
/* Releases the optimizer, its state and its parameter references. NULL is a no-op. */
CT_API void ct_optimizer_free(ct_optimizer *opt);

/* Checkpoints: the optimizer's state (step count, hyperparameters, momentum buffers / Adam
 * moments, each under "optim.<i>.<name>" plus metadata) goes into st; load reads it back into an
 * optimizer made with the same kind and parameter shapes, so that training resumes with
 * bit-identical steps. Save the parameters themselves with ct_safetensors_set. A container
 * that does not match (other kind, count, shapes, dtypes, a missing entry) is
 * CT_ERR_INVALID_ARGUMENT naming what differs, and the optimizer is left as it was. */
CT_API ct_status ct_optimizer_save(const ct_optimizer *opt, ct_safetensors *st);
CT_API ct_status ct_optimizer_load(ct_optimizer *opt, const ct_safetensors *st);

/* Scales the gradients of params so that their global 2-norm is at most max_norm
 * (torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), applied when < 1).
 * *total_norm gets the norm before clipping (may be NULL). Parameters without a gradient are
 * skipped. A non-finite norm is returned as it is, and the gradients are then scaled by NaN
 * as PyTorch does (error_if_nonfinite false). */
CT_API ct_status ct_clip_grad_norm(double *total_norm, ct_tensor *const *params, int n, double max_norm);

/* Dynamic loss scaling for f16/bf16 training (torch.amp.GradScaler):
 *   ct_grad_scaler_scale(&scaled, s, loss); ct_backward(scaled, NULL);
 *   ct_grad_scaler_step(s, opt);   // unscales the gradients; skips the step on inf/NaN
 *   ct_grad_scaler_update(s);      // backoff on overflow, growth after growth_interval steps
 * The inf/NaN check runs on the device with one flag read per step. */
typedef struct ct_grad_scaler ct_grad_scaler;
CT_API ct_status ct_grad_scaler_new(ct_grad_scaler **out, double init_scale, double growth_factor,
                                    double backoff_factor, int growth_interval);
/* *out = loss * scale (a new tensor, recorded by autograd). */
CT_API ct_status ct_grad_scaler_scale(ct_tensor **out, ct_grad_scaler *s, const ct_tensor *loss);
/* Unscales the gradients of opt's parameters (once per step) without stepping. */
CT_API ct_status ct_grad_scaler_unscale(ct_grad_scaler *s, ct_optimizer *opt);
/* Unscales (unless done), then steps opt unless a gradient is inf/NaN. */
CT_API ct_status ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt);
/* Whether the last ct_grad_scaler_step skipped its step (found inf/NaN); false for NULL. */
CT_API bool ct_grad_scaler_step_skipped(const ct_grad_scaler *s);
CT_API ct_status ct_grad_scaler_update(ct_grad_scaler *s);
CT_API double ct_grad_scaler_get_scale(const ct_grad_scaler *s); /* NaN for NULL */
CT_API void ct_grad_scaler_free(ct_grad_scaler *s);

#ifdef __cplusplus
}
#endif
#endif
