/* Internal: the optimizer's layout (shared by the update, the checkpoints and the gradient
 * scaler) and the launch helpers of kernels/optim.cl. */
#ifndef CT_OPTIM_OPTIM_H
#define CT_OPTIM_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/optim.h"
#include "cltensor/sched.h"
#include "kernel/kargs.h"
#include "tensor/tensor.h"

typedef enum ct__optim_kind { CT__OPTIM_SGD, CT__OPTIM_ADAM } ct__optim_kind;

/* A parameter group (PyTorch's param_groups entry): the parameters first .. first + n - 1 of
 * the optimizer's flat list (groups are appended, so each is one range) with their own lr and
 * weight decay. initial_lr: set by the first scheduler attached (PyTorch's
 * group.setdefault("initial_lr", group["lr"])), NaN before; later schedulers start from it. */
typedef struct ct__optim_group {
  int first, n;
  double lr, weight_decay, initial_lr;
} ct__optim_group;

struct ct_optimizer {
  ct__optim_kind kind;
  int n;
  ct_tensor **params; /* one reference each */
  int cap;            /* the arrays' capacity (ct_optimizer_add_param_group grows them) */
  int *group;         /* the group of each parameter */
  int ngroups;
  ct__optim_group *groups; /* ngroups entries; group 0 holds the constructor's parameters */
  /* Per-parameter state, NULL until the parameter's first step (PyTorch creates it lazily
   * too): SGD's momentum buffer in s0 (none when momentum is 0); Adam's exp_avg in s0 and
   * exp_avg_sq in s1. Contiguous, the parameter's shape, dtype and device. */
  ct_tensor **s0, **s1;
  int64_t *steps; /* the steps each parameter took (Adam's bias corrections are per parameter),
                   * 0..CT__OPTIM_MAX_STEPS */
  /* The constructor's values: lr and weight_decay are the defaults of a group added without its
   * own (NaN arguments); every group's own values are in groups[]. */
  double lr, momentum, weight_decay, beta1, beta2, eps;
  bool nesterov, decoupled;
};

/* The most steps a parameter's count holds. A checkpoint's count must leave room for the next
 * step's increment (INT64_MAX does not), and the saver must only write counts the loader takes:
 * so a count stops one short of INT64_MAX, where ct_optimizer_step refuses to go on, and the
 * loader takes every count up to it. */
#define CT__OPTIM_MAX_STEPS (INT64_MAX - 1)

/* The checks of the constructors' hyperparameters (CT_ERR_INVALID_ARGUMENT naming the value),
 * shared with ct_optimizer_load. */
ct_status ct__optim_check_sgd(double lr, double momentum, double weight_decay, bool nesterov, const char *fn);
ct_status ct__optim_check_adam(double lr, double beta1, double beta2, double eps, double weight_decay,
                               const char *fn);

/* ct_optimizer_load in two steps, for loading several parts of a checkpoint all-or-nothing
 * (ct_checkpoint_load): ct__optim_read reads and checks everything st holds for opt into *out
 * (copies of the state tensors on the parameters' devices; opt unchanged; fn names the public
 * call in messages, also for a NULL opt or st); ct__optim_apply puts it into opt, cannot fail, and frees it;
 * ct__optim_loaded_free frees one not applied (NULL is a no-op). */
typedef struct ct__optim_loaded ct__optim_loaded;
ct_status ct__optim_read(ct__optim_loaded **out, const ct_optimizer *opt, const ct_safetensors *st, const char *fn);
void ct__optim_apply(ct_optimizer *opt, ct__optim_loaded *l);
void ct__optim_loaded_free(ct__optim_loaded *l);

/* ct_lr_scheduler_load in the same two steps (sched.c): read and check into *out (s
 * unchanged), then apply (cannot fail; frees it). */
typedef struct ct__sched_loaded ct__sched_loaded;
ct_status ct__sched_read(ct__sched_loaded **out, const ct_lr_scheduler *s, const ct_safetensors *st, const char *fn);
void ct__sched_apply(ct_lr_scheduler *s, ct__sched_loaded *r);
void ct__sched_loaded_free(ct__sched_loaded *r);

/* The kernel `name` of kernels/optim.cl for parameters of dtype dt on d; on devices that can,
 * built with correctly rounded f32 division and square root (Adam's denominator then rounds
 * as IEEE, as PyTorch's CPU kernels). */
ct_status ct__optim_kernel(ct__kernel **k, ct_device *d, const char *name, ct_dtype dt, const char *fn);

/* A kernel scalar in the compute type of dt: float (rounded from v once, as PyTorch's CPU
 * kernels round their scalars), double for f64. */
void ct__optim_karg_acc(struct ct__kargs *a, const char *name, ct_dtype dt, double v);

/* The shared iteration space of nt (<= 3) tensors of one shape (a parameter, its gradient, its
 * state), collapsed, as the kernels' `int ndim, long8 shape, long8 strides...` arguments. */
void ct__optim_karg_geom(struct ct__kargs *a, int nt, const ct_tensor *const *ts);

/* Launches kernel `name` (optim_scale, optim_unscale) over the gradient g with its geometry, the
 * scalar x in g's compute type and, when flag is not NULL, the flag tensor; bumps g's version. */
ct_status ct__optim_grad_launch(ct_tensor *g, const char *name, double x, const ct_tensor *flag, const char *fn);

/* The gradient of parameter i of params, after checking that it matches the parameter (shape,
 * dtype, device): NULL (and CT_OK) when it has none. A mismatch can only come from a bug. */
ct_status ct__optim_grad(ct_tensor **g, const ct_tensor *p, int i, const char *fn);

/* Checks a parameter list: params non-NULL, n >= 1 (or >= 0 with allow_empty), every entry a
 * distinct float tensor (CT_ERR_DTYPE_MISMATCH otherwise); with need_leaf (the optimizers, which
 * write the entries), a leaf that requires grad and has no elements sharing one memory location
 * (an expanded view: a step would update one cell several times). Messages name the entry. */
ct_status ct__optim_check_params(ct_tensor *const *params, int n, bool allow_empty, bool need_leaf,
                                 const char *fn);

#endif
