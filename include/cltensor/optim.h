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
 * Updates follow PyTorch's torch.optim formulas exactly: one fused kernel per parameter and step
 * repeats the operations of torch.optim's single-tensor path (foreach and fused off) with the
 * same f32 roundings, so f32 results agree with PyTorch's CPU results to the last bit for SGD and
 * to a few ulps for Adam (PyTorch's CPU square root is sometimes 1 ulp off the correctly rounded
 * one used here). f16/bf16 parameters (and their state, kept in the parameter's dtype as
 * PyTorch's) compute in f32 and round once per stored value, as PyTorch's fused=True optimizers
 * (its single-tensor path rounds after every operation); f64 computes in double. Parameters are
 * updated in place with grad mode off (their storage version moves, as PyTorch's); a parameter
 * without a gradient is skipped, as PyTorch skips p.grad is None: its state and step count stay
 * as they are. The optimizer holds a reference to each parameter. An optimizer is used by one
 * thread at a time. See docs/TRAINING.md. */
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

/* Constructor. Stochastic gradient descent with momentum (torch.optim.SGD, dampening 0):
 *   g = grad + weight_decay * p;  b = momentum * b + g (b = g at the first step);
 *   g = nesterov ? g + momentum * b : b  (when momentum != 0);  p -= lr * g.
 * params: n >= 1 float leaves that require grad, all distinct, none an expanded view (a dim of
 * size > 1 with stride 0, whose one memory cell a step would update once per element) (the
 * array is copied; each tensor retained). lr >= 0, momentum >= 0, weight_decay >= 0, nesterov
 * needs momentum > 0.
 * OUT: *out, a new optimizer (NULL on failure). Returns CT_OK; CT_ERR_INVALID_ARGUMENT naming
 * the value or the entry (NULL, n < 1, a duplicate, not a leaf, not requiring grad, expanded);
 * CT_ERR_DTYPE_MISMATCH for a parameter that is not floating; CT_ERR_OUT_OF_MEMORY. */
CT_API ct_status ct_sgd_new(ct_optimizer **out, ct_tensor *const *params, int n, double lr, double momentum,
                            double weight_decay, bool nesterov);
/* Constructor. Adam (decoupled false: torch.optim.Adam, weight decay added to the gradient) or
 * AdamW (decoupled true: torch.optim.AdamW, p *= 1 - lr * weight_decay before the update),
 * amsgrad off; t counts each parameter's own steps:
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
 * 0 <= beta1, beta2 < 1, eps >= 0, lr >= 0, weight_decay >= 0; params and statuses as
 * ct_sgd_new. */
CT_API ct_status ct_adam_new(ct_optimizer **out, ct_tensor *const *params, int n, double lr, double beta1,
                             double beta2, double eps, double weight_decay, bool decoupled);
/* Method. One update of every parameter that has a gradient: one kernel each, enqueued without
 * waiting. The state a parameter needs is created at its first step (zeros for Adam's moments),
 * all of it before any parameter changes, so CT_ERR_OUT_OF_MEMORY changes no parameter; a
 * device failure (CT_ERR_OPENCL) can leave the step half done. opt NULL, or a parameter with a
 * gradient whose step count is already INT64_MAX - 1 (the most a count holds; reachable only
 * through ct_optimizer_load): CT_ERR_INVALID_ARGUMENT, before anything changes. */
CT_API ct_status ct_optimizer_step(ct_optimizer *opt);
/* Method. Drops every parameter's gradient (set_to_none, PyTorch's default). */
CT_API ct_status ct_optimizer_zero_grad(ct_optimizer *opt);
/* Method. Sets the learning rate of every parameter group (and the default of groups added
 * later) for the next steps. lr >= 0, else CT_ERR_INVALID_ARGUMENT and the rates stay. */
CT_API ct_status ct_optimizer_set_lr(ct_optimizer *opt, double lr);
CT_API double ct_optimizer_get_lr(const ct_optimizer *opt); /* group 0's; NaN for NULL */

/* Parameter groups (PyTorch's param_groups): each group has its own learning rate and weight
 * decay; the other hyperparameters (momentum, betas, eps, nesterov, decoupled) are the
 * optimizer's. The constructor's parameters are group 0, with its lr and weight_decay. The
 * common use, no weight decay on biases and norms (PyTorch:
 * AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3,
 * weight_decay=0.01)):
 *   ct_adam_new(&opt, decay, n_decay, 1e-3, 0.9, 0.999, 1e-8, 0.01, true);   // group 0
 *   ct_optimizer_add_param_group(opt, no_decay, n_no_decay, NAN, 0.0);      // group 1
 * Schedulers (sched.h) set every group's lr from its own base. Groups are numbered 0, 1, ... in
 * the order they were made; the parameters of all groups form one list in that order (the
 * indices i of the checkpoint entries "optim.<i>.*"). */
/* Method. Appends a group over params (n >= 1 leaves as for the constructors, none already in
 * a group of opt: CT_ERR_INVALID_ARGUMENT naming it, as PyTorch's "some parameters appear in
 * more than one parameter group"; the array is copied, each tensor retained). lr and
 * weight_decay: the group's values (>= 0), or NaN for the constructor's (PyTorch's defaults of
 * add_param_group). Their state starts empty (created at their first step). Returns CT_OK;
 * CT_ERR_INVALID_ARGUMENT; CT_ERR_DTYPE_MISMATCH; CT_ERR_OUT_OF_MEMORY (opt unchanged). */
CT_API ct_status ct_optimizer_add_param_group(ct_optimizer *opt, ct_tensor *const *params, int n, double lr,
                                              double weight_decay);
CT_API int ct_optimizer_num_groups(const ct_optimizer *opt);             /* 0 for NULL */
CT_API int ct_optimizer_group_size(const ct_optimizer *opt, int group);  /* its parameters; -1 if none */
/* Method. The learning rate / weight decay of one group (0 <= group < ct_optimizer_num_groups,
 * else CT_ERR_INVALID_ARGUMENT naming it; the value must be >= 0, else CT_ERR_INVALID_ARGUMENT
 * and it stays). The getters return NaN for NULL or a group out of range. */
CT_API ct_status ct_optimizer_set_group_lr(ct_optimizer *opt, int group, double lr);
CT_API double ct_optimizer_get_group_lr(const ct_optimizer *opt, int group);
CT_API ct_status ct_optimizer_set_group_weight_decay(ct_optimizer *opt, int group, double weight_decay);
CT_API double ct_optimizer_get_group_weight_decay(const ct_optimizer *opt, int group);
/* Releases the optimizer, its state and its parameter references. NULL is a no-op. */
CT_API void ct_optimizer_free(ct_optimizer *opt);

/* Checkpoints: the optimizer's state (copies of the momentum buffers / Adam moments as tensors
 * "optim.<i>.momentum_buffer", "optim.<i>.exp_avg", "optim.<i>.exp_avg_sq"; the kind, the
 * hyperparameters, the parameter groups (their sizes, lr, weight decay and the schedulers'
 * base lr) and each parameter's step count as metadata "optim.kind", "optim.lr", ...,
 * "optim.groups", "optim.group.<g>.lr", ..., "optim.<i>.step", listed in docs/TRAINING.md) goes
 * into st, replacing entries of the same names; later steps do not change what st holds. Load
 * reads it back into an optimizer of the same kind over parameters of the same shapes and
 * dtypes, in groups of the same sizes (copying the state onto each parameter's device) and, as
 * PyTorch's load_state_dict, restores the hyperparameters too (every group's lr and weight
 * decay included), so that training resumes with bit-identical steps. Save the parameters
 * themselves with ct_safetensors_set. A container that does not match (other kind, count,
 * groups, shapes, dtypes, a missing entry or metadata, a value that does not parse or is out of
 * range, a step count outside 0..INT64_MAX - 1: INT64_MAX would overflow at the next step) is
 * CT_ERR_INVALID_ARGUMENT naming what differs, and the optimizer is left as it was. Every count
 * the optimizer saves loads again. NULL
 * arguments: CT_ERR_INVALID_ARGUMENT; also CT_ERR_OUT_OF_MEMORY and the device statuses of the
 * copies. */
CT_API ct_status ct_optimizer_save(const ct_optimizer *opt, ct_safetensors *st);
CT_API ct_status ct_optimizer_load(ct_optimizer *opt, const ct_safetensors *st);

/* Scales the gradients of params so that their global 2-norm is at most max_norm
 * (torch.nn.utils.clip_grad_norm_ with norm_type 2: coefficient max_norm / (norm + 1e-6),
 * applied when < 1). The sums of squares run on the device (one kernel per gradient, one small
 * read per device), then one scaling kernel per gradient. *total_norm gets the norm before
 * clipping (may be NULL; NaN on failure), rounded to f32 unless every gradient is f64, as
 * PyTorch's norm tensor. Parameters without a gradient are skipped; none at all gives 0. A
 * non-finite norm is returned as it is and the gradients are scaled as PyTorch scales them
 * (error_if_nonfinite false): by max_norm / inf = 0 for an inf norm (inf elements become NaN),
 * by NaN for a NaN norm. params: n >= 0 distinct float tensors (need not be leaves). max_norm
 * >= 0 (PyTorch takes a negative one too and flips the gradients; refused here).
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT; CT_ERR_DTYPE_MISMATCH; CT_ERR_OUT_OF_MEMORY. */
CT_API ct_status ct_clip_grad_norm(double *total_norm, ct_tensor *const *params, int n, double max_norm);

/* Dynamic loss scaling for f16/bf16 training (torch.amp.GradScaler):
 *   ct_grad_scaler_scale(&scaled, s, loss); ct_backward(scaled, NULL);
 *   ct_grad_scaler_step(s, opt);   // unscales the gradients; skips the step on inf/NaN
 *   ct_grad_scaler_update(s);      // backoff on overflow, growth after growth_interval steps
 * The inf/NaN check runs on the device (one kernel per gradient, all writing one flag per
 * device) with one flag read per step. As PyTorch's, each optimizer goes through unscale (at
 * most once) and step (at most once) per iteration, and update folds the findings of every
 * optimizer seen since the last update into the scale (kept in f32):
 *   found inf/NaN: scale *= backoff_factor, the count of good steps restarts;
 *   else after growth_interval consecutive good steps: scale *= growth_factor (kept only when
 *   finite). The scaler remembers optimizers by address until the next update: free an
 *   optimizer only after it. Unscaling f16 gradients is refused (CT_ERR_DTYPE_MISMATCH), as
 *   PyTorch refuses it: keep the parameters f32 and let ct_autocast_set_dtype run the ops in f16. */
typedef struct ct_grad_scaler ct_grad_scaler;
/* Constructor. init_scale: a finite f32 value > 0 (PyTorch's default 65536), growth_factor > 1
 * (2), 0 < backoff_factor < 1 (0.5), growth_interval >= 1 (2000); else CT_ERR_INVALID_ARGUMENT.
 * OUT: *out (NULL on failure). */
CT_API ct_status ct_grad_scaler_new(ct_grad_scaler **out, double init_scale, double growth_factor,
                                    double backoff_factor, int growth_interval);
/* *out = loss * scale (a new tensor of loss's dtype, recorded by autograd). A loss that is not
 * floating: CT_ERR_DTYPE_MISMATCH. */
CT_API ct_status ct_grad_scaler_scale(ct_tensor **out, ct_grad_scaler *s, const ct_tensor *loss);
/* Unscales the gradients of opt's parameters in place (g *= 1 / scale, the reciprocal rounded
 * to f32 as PyTorch's) and records whether one held inf/NaN, without stepping: for clipping
 * the true gradients before ct_grad_scaler_step. A second call before update, or a call after
 * step: CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_grad_scaler_unscale(ct_grad_scaler *s, ct_optimizer *opt);
/* Unscales (unless done), then steps opt unless a gradient was inf/NaN. A second call before
 * update: CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt);
/* Whether the last ct_grad_scaler_step skipped its step (found inf/NaN); false for NULL. */
CT_API bool ct_grad_scaler_is_step_skipped(const ct_grad_scaler *s);
/* Updates the scale as above. No unscale or step since the last update:
 * CT_ERR_INVALID_ARGUMENT (PyTorch: "No inf checks were recorded prior to update"). */
CT_API ct_status ct_grad_scaler_update(ct_grad_scaler *s);
CT_API double ct_grad_scaler_get_scale(const ct_grad_scaler *s); /* NaN for NULL */
CT_API void ct_grad_scaler_free(ct_grad_scaler *s); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
