/* Learning-rate schedulers (torch.optim.lr_scheduler) over an optimizer's parameter groups.
 *
 *   ct_optimizer *opt;                     // optim.h
 *   ct_lr_scheduler *sched;
 *   ct_adam_new(&opt, params, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, true);
 *   ct_lr_cosine_new(&sched, opt, 1000, 0.0);     // sets the lr of step 0 at once
 *   for (int step = 0; step < 1000; step++) {
 *     ...zero_grad, forward, backward...
 *     ct_optimizer_step(opt);
 *     ct_lr_scheduler_step(sched);               // after the optimizer's step, as PyTorch
 *   }
 *   ct_lr_scheduler_free(sched);
 *   ct_optimizer_free(opt);
 *
 * Each scheduler computes every group's next lr with the formula PyTorch's step() uses (the
 * "chainable" form, which reads the group's current lr: a rate changed by hand between steps
 * carries on), in double in the same order of operations, so the sequences are PyTorch's to the
 * last bit where the C library's cos and pow are the ones Python calls (tested for 1000 steps,
 * docs/TRAINING.md). As PyTorch's:
 *  - constructing a scheduler is its first step (last_epoch -1 -> 0): it sets the lr of step 0
 *    (LinearLR multiplies it by start_factor; OneCycleLR sets max_lr / div_factor);
 *  - the base lr of a group is its "initial_lr": the lr it had when the first scheduler was
 *    attached to the optimizer (later schedulers on the same optimizer start from it, as
 *    PyTorch's group.setdefault("initial_lr", group["lr"])); OneCycleLR sets it to its own;
 *  - the scheduler covers the groups the optimizer has when it is made (groups added later keep
 *    their lr);
 *  - the scheduler borrows the optimizer: free the scheduler first. One thread at a time.
 * Not here: the epoch argument of step() (deprecated in PyTorch), ChainedScheduler, CyclicLR,
 * LambdaLR, per-group lists of max_lr or momenta.
 *
 * Constructors return CT_OK and a new scheduler in *out (NULL on failure);
 * CT_ERR_INVALID_ARGUMENT naming the value for NULL out/opt or an argument PyTorch refuses (or
 * would divide by zero with); CT_ERR_OUT_OF_MEMORY. */
#ifndef CLTENSOR_SCHED_H
#define CLTENSOR_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/io.h"
#include "cltensor/optim.h"
#include "cltensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_lr_scheduler ct_lr_scheduler;

/* Constructor. StepLR: every step_size steps (>= 1) lr *= gamma (>= 0; PyTorch's default 0.1):
 *   lr_e = e > 0 && e % step_size == 0 ? lr_{e-1} * gamma : lr_{e-1}. */
CT_API ct_status ct_lr_step_new(ct_lr_scheduler **out, ct_optimizer *opt, int64_t step_size, double gamma);
/* Constructor. MultiStepLR: lr *= gamma^k at step e, k the number of times e appears in
 * milestones (n >= 0 entries, any order, repeats count; the array is copied). */
CT_API ct_status ct_lr_multistep_new(ct_lr_scheduler **out, ct_optimizer *opt, const int64_t *milestones, int n,
                                     double gamma);
/* Constructor. ExponentialLR: lr *= gamma (>= 0) at every step after the first. */
CT_API ct_status ct_lr_exponential_new(ct_lr_scheduler **out, ct_optimizer *opt, double gamma);
/* Constructor. CosineAnnealingLR, PyTorch's recursive form (T_max >= 1, eta_min >= 0):
 *   e == 0: lr;  (e - 1 - T_max) mod 2 T_max == 0: lr + (base - eta_min)(1 - cos(pi / T_max)) / 2;
 *   else: (1 + cos(pi e / T_max)) / (1 + cos(pi (e - 1) / T_max)) (lr - eta_min) + eta_min,
 * which follows eta_min + (base - eta_min)(1 + cos(pi e / T_max)) / 2 and, past T_max, rises
 * again (a period of 2 T_max), as PyTorch's. */
CT_API ct_status ct_lr_cosine_new(ct_lr_scheduler **out, ct_optimizer *opt, int64_t T_max, double eta_min);
/* Constructor. LinearLR (linear warmup): the factor goes from start_factor (0 < start_factor
 * <= 1; PyTorch's default 1/3) to end_factor (0 <= end_factor <= 1; default 1) over total_iters
 * (>= 0; default 5) steps, then stays:
 *   e == 0: lr * start_factor;  e > total_iters: lr;
 *   else: lr (1 + (end - start) / (total_iters start + (e - 1)(end - start))). */
CT_API ct_status ct_lr_linear_new(ct_lr_scheduler **out, ct_optimizer *opt, double start_factor, double end_factor,
                                  int64_t total_iters);

/* OneCycleLR's annealing (anneal_strategy "cos" or "linear"). */
typedef enum ct_anneal { CT_ANNEAL_COS = 0, CT_ANNEAL_LINEAR = 1 } ct_anneal;
/* Constructor. OneCycleLR, closed form over total_steps (>= 1) steps, PyTorch's arguments in
 * PyTorch's order (its defaults: pct_start 0.3, COS, cycle_momentum true, base_momentum 0.85,
 * max_momentum 0.95, div_factor 25, final_div_factor 1e4, three_phase false): initial =
 * max_lr / div_factor, min = initial / final_div_factor (max_lr >= 0, div_factor > 0,
 * final_div_factor > 0), pct_start in [0, 1]. Phases (end steps as PyTorch computes them, in
 * double): initial -> max until pct_start total_steps - 1, then max -> min until
 * total_steps - 1; with three_phase, initial -> max, max -> initial until
 * 2 pct_start total_steps - 2, initial -> min until total_steps - 1. Within a phase
 * pct = (e - start) / (end - start) and lr = anneal(start_lr, end_lr, pct): cos: end + (start -
 * end) / 2 (cos(pi pct) + 1); linear: (end - start) pct + start. Every group gets the same
 * max_lr. cycle_momentum: the momentum (SGD's momentum, Adam's beta1) goes the other way,
 * max_momentum -> base_momentum while the lr rises and back while it falls (three_phase: stays
 * at max in the last phase), the same anneal; SGD then needs momentum > 0 at construction and
 * both momenta > 0 (its momentum buffer must exist from the first step), Adam both in [0, 1);
 * else CT_ERR_INVALID_ARGUMENT. Stepping past total_steps (e > total_steps) is
 * CT_ERR_INVALID_ARGUMENT naming both, as PyTorch's ValueError, and changes nothing. */
CT_API ct_status ct_lr_one_cycle_new(ct_lr_scheduler **out, ct_optimizer *opt, double max_lr, int64_t total_steps,
                                     double pct_start, ct_anneal anneal, bool cycle_momentum, double base_momentum,
                                     double max_momentum, double div_factor, double final_div_factor,
                                     bool three_phase);

/* ReduceLROnPlateau's mode (whether the metric should go down or up) and threshold mode. */
typedef enum ct_plateau_mode { CT_PLATEAU_MIN = 0, CT_PLATEAU_MAX = 1 } ct_plateau_mode;
typedef enum ct_threshold_mode { CT_THRESHOLD_REL = 0, CT_THRESHOLD_ABS = 1 } ct_threshold_mode;
/* Constructor. ReduceLROnPlateau, stepped with ct_lr_scheduler_step_metric (PyTorch's defaults:
 * MIN, factor 0.1, patience 10, threshold 1e-4, REL, cooldown 0, min_lr 0, eps 1e-8). At each
 * step with metric m: m is better than the best so far when (MIN, REL) m < best (1 - threshold);
 * (MIN, ABS) m < best - threshold; (MAX, REL) m > best (threshold + 1); (MAX, ABS) m > best +
 * threshold (a NaN is never better; the first best is +inf for MIN, -inf for MAX). Better: best
 * = m and the count of bad steps restarts, else it grows; in cooldown the cooldown counter
 * drops and the count restarts; when the count exceeds patience every group's lr becomes
 * max(lr factor, min_lr), kept only when it moves by more than eps, the cooldown starts
 * (cooldown steps) and the count restarts. 0 <= factor < 1 (PyTorch: "Factor should be < 1.0"),
 * patience >= 0, threshold >= 0, cooldown >= 0, min_lr >= 0, eps >= 0. The lr is not changed
 * at construction. */
CT_API ct_status ct_lr_plateau_new(ct_lr_scheduler **out, ct_optimizer *opt, ct_plateau_mode mode, double factor,
                                   int64_t patience, double threshold, ct_threshold_mode threshold_mode,
                                   int64_t cooldown, double min_lr, double eps);

/* Constructor. SequentialLR: schedulers[0] until milestones[0], schedulers[1] until
 * milestones[1], ... (n >= 1 schedulers of opt, made just before; n - 1 milestones, ascending).
 * As PyTorch's: construction puts every group back at its initial lr, undoes each scheduler's
 * first step and takes the first step of the one of epoch 0 again; a step at a milestone starts
 * the next scheduler at its epoch 0 from its closed form (PyTorch's step(0): StepLR, MultiStepLR,
 * ExponentialLR and CosineAnnealingLR give base lr at 0, LinearLR base * start_factor,
 * OneCycleLR its get_lr), other steps step the current one. The typical warmup:
 *   ct_lr_linear_new(&warm, opt, 0.01, 1.0, 100);
 *   ct_lr_cosine_new(&cos, opt, 900, 0.0);
 *   ct_lr_sequential_new(&s, opt, (ct_lr_scheduler *[]){warm, cos}, 2, (const int64_t[]){100});
 * On success the sequence owns the schedulers (ct_lr_scheduler_free frees them with it: do not
 * step or free them yourself); on failure the caller keeps them. Plateau and sequential
 * schedulers cannot be members (CT_ERR_INVALID_ARGUMENT; PyTorch refuses plateau too), nor a
 * scheduler of another optimizer, nor one twice. Checkpoints hold the members under
 * "sched.<k>.". */
CT_API ct_status ct_lr_sequential_new(ct_lr_scheduler **out, ct_optimizer *opt, ct_lr_scheduler *const *schedulers,
                                      int n, const int64_t *milestones);

/* Method. One step (after ct_optimizer_step): the epoch counter moves on and every covered
 * group's lr is set. Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL, for a plateau scheduler
 * (it needs ct_lr_scheduler_step_metric), past a one-cycle's total_steps, or when a computed lr
 * is NaN (nothing changes). A negative lr is set as PyTorch sets it (OneCycleLR's linear anneal
 * stepped a total_steps-th time goes below min_lr; the optimizer steps with it). */
CT_API ct_status ct_lr_scheduler_step(ct_lr_scheduler *s);
/* Method. One step of a plateau scheduler with the metric of this epoch (any double; NaN
 * counts as not better). Other kinds: CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_lr_scheduler_step_metric(ct_lr_scheduler *s, double metric);
/* The lr the last step set for group (PyTorch's get_last_lr()[group]); NaN for NULL or a group
 * the scheduler does not cover. */
CT_API double ct_lr_scheduler_get_last_lr(const ct_lr_scheduler *s, int group);
/* The epoch counter (PyTorch's last_epoch: 0 after construction, + 1 per step); -1 for NULL. */
CT_API int64_t ct_lr_scheduler_last_epoch(const ct_lr_scheduler *s);

/* Checkpoints: the scheduler's state as metadata "sched.kind", "sched.last_epoch",
 * "sched.groups", "sched.<g>.base_lr", "sched.<g>.last_lr" and, for plateau, "sched.best",
 * "sched.num_bad_epochs", "sched.cooldown_counter" (doubles with 17 digits) into st, beside the
 * optimizer's (ct_optimizer_save holds the groups' current lr). Load restores them into a
 * scheduler of the same kind over as many groups (its constructor's arguments are not in the
 * file: build it as before); a mismatch or a missing or malformed entry is
 * CT_ERR_INVALID_ARGUMENT naming it and changes nothing. Resuming then gives the same lrs as
 * the run that never stopped. */
CT_API ct_status ct_lr_scheduler_save(const ct_lr_scheduler *s, ct_safetensors *st);
CT_API ct_status ct_lr_scheduler_load(ct_lr_scheduler *s, const ct_safetensors *st);

/* Destructor. Leaves the optimizer (and its lrs) as they are. NULL is a no-op. */
CT_API void ct_lr_scheduler_free(ct_lr_scheduler *s);

#ifdef __cplusplus
}
#endif
#endif
