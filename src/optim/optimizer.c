/* The optimizers: SGD and Adam/AdamW (include/cltensor/optim.h), each step one fused kernel of
 * kernels/optim.cl per parameter that has a gradient. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/autograd.h"
#include "core/error.h"
#include "optim/optim.h"
#include "tensor/graph.h"

static ct_status check_lr(double lr, const char *fn) {
  if (!(lr >= 0)) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: lr is %g (expected lr >= 0)", fn, lr);
  return CT_OK;
}

ct_status ct__optim_check_sgd(double lr, double momentum, double weight_decay, bool nesterov, const char *fn) {
  CT__TRY(check_lr(lr, fn));
  if (!(momentum >= 0))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: momentum is %g (expected momentum >= 0)", fn, momentum);
  if (!(weight_decay >= 0))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: weight_decay is %g (expected weight_decay >= 0)", fn,
                     weight_decay);
  if (nesterov && !(momentum > 0))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: nesterov momentum needs momentum > 0 (momentum is %g)", fn,
                     momentum);
  return CT_OK;
}

ct_status ct__optim_check_adam(double lr, double beta1, double beta2, double eps, double weight_decay,
                               const char *fn) {
  CT__TRY(check_lr(lr, fn));
  if (!(beta1 >= 0 && beta1 < 1))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: beta1 is %g (expected 0 <= beta1 < 1)", fn, beta1);
  if (!(beta2 >= 0 && beta2 < 1))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: beta2 is %g (expected 0 <= beta2 < 1)", fn, beta2);
  if (!(eps >= 0)) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: eps is %g (expected eps >= 0)", fn, eps);
  if (!(weight_decay >= 0))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: weight_decay is %g (expected weight_decay >= 0)", fn,
                     weight_decay);
  return CT_OK;
}

/* Grows the per-parameter arrays of o to hold cap parameters (zeroed), or CT_ERR_OUT_OF_MEMORY
 * leaving o as it was (each array that did grow keeps its old contents). */
static ct_status grow(ct_optimizer *o, int cap, const char *fn) {
  if (cap <= o->cap) return CT_OK;
  void *p;
#define CT__GROW(field)                                                                            \
  if (!(p = realloc(o->field, (size_t)cap * sizeof *o->field)))                                  \
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %d parameters", fn, cap); \
  o->field = p;                                                                                  \
  memset(o->field + o->cap, 0, (size_t)(cap - o->cap) * sizeof *o->field);
  CT__GROW(params)
  CT__GROW(s0)
  CT__GROW(s1)
  CT__GROW(steps)
  CT__GROW(group)
#undef CT__GROW
  o->cap = cap;
  return CT_OK;
}

/* A new optimizer over params (group 0, with the given lr and weight decay) with its state
 * arrays, or CT_ERR_OUT_OF_MEMORY. */
static ct_status optimizer_new(ct_optimizer **out, ct__optim_kind kind, ct_tensor *const *params, int n, double lr,
                               double weight_decay, const char *fn) {
  ct_optimizer *o = calloc(1, sizeof *o);
  if (o) o->groups = calloc(1, sizeof *o->groups);
  if (!o || !o->groups) {
    ct_optimizer_free(o);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %d parameters", fn, n);
  }
  ct_status st = grow(o, n, fn);
  if (st != CT_OK) {
    ct_optimizer_free(o);
    return st;
  }
  o->kind = kind;
  o->n = n;
  o->lr = lr;
  o->weight_decay = weight_decay;
  o->ngroups = 1;
  o->groups[0] = (ct__optim_group){.first = 0, .n = n, .lr = lr, .weight_decay = weight_decay, .initial_lr = NAN};
  for (int i = 0; i < n; i++) o->params[i] = ct_retain(params[i]);
  *out = o;
  return CT_OK;
}

ct_status ct_sgd_new(ct_optimizer **out, ct_tensor *const *params, int n, double lr, double momentum,
                     double weight_decay, bool nesterov) {
  const char *fn = "ct_sgd_new";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__TRY(ct__optim_check_params(params, n, false, true, fn));
  CT__TRY(ct__optim_check_sgd(lr, momentum, weight_decay, nesterov, fn));
  ct_optimizer *o;
  CT__TRY(optimizer_new(&o, CT__OPTIM_SGD, params, n, lr, weight_decay, fn));
  o->momentum = momentum;
  o->nesterov = nesterov;
  *out = o;
  return CT_OK;
}

ct_status ct_adam_new(ct_optimizer **out, ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                      double eps, double weight_decay, bool decoupled) {
  const char *fn = "ct_adam_new";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__TRY(ct__optim_check_params(params, n, false, true, fn));
  CT__TRY(ct__optim_check_adam(lr, beta1, beta2, eps, weight_decay, fn));
  ct_optimizer *o;
  CT__TRY(optimizer_new(&o, CT__OPTIM_ADAM, params, n, lr, weight_decay, fn));
  o->beta1 = beta1;
  o->beta2 = beta2;
  o->eps = eps;
  o->decoupled = decoupled;
  *out = o;
  return CT_OK;
}

/* Creates the state parameter i needs before its first step: zeros for Adam's moments (a
 * failed step leaves zeros, which are what a step-0 state means), an uninitialised momentum
 * buffer for SGD (its first step writes it). */
static ct_status ensure_state(ct_optimizer *o, int i) {
  const ct_tensor *p = o->params[i];
  ct_device *d = p->storage->device;
  if (o->kind == CT__OPTIM_SGD) {
    if (o->momentum == 0 || o->s0[i]) return CT_OK;
    return ct_empty(&o->s0[i], d, p->dtype, p->ndim, p->shape);
  }
  for (int k = 0; k < 2; k++) {
    ct_tensor **s = k ? &o->s1[i] : &o->s0[i];
    if (*s) continue;
    /* Filled once: a buffer fill, not the fill kernel a new process would build (tensor.h). */
    static const uint64_t zero = 0;
    CT__TRY(ct_empty(s, d, p->dtype, p->ndim, p->shape));
    ct_status st = ct__fill_once(*s, &zero, "ct_optimizer_step");
    if (st != CT_OK) {
      ct_release(*s);
      *s = NULL;
      return st;
    }
  }
  return CT_OK;
}

/* The start of an update kernel's launch: the kernel `name` for p's dtype, locked, with its first
 * two arguments, the parameter p and its gradient g (kernels/optim.cl). */
static ct_status launch_begin(ct__kernel **k, struct ct__kargs *a, const char *name, ct_tensor *p, ct_tensor *g,
                              const char *fn) {
  CT__TRY(ct__optim_kernel(k, p->storage->device, name, p->dtype, fn));
  *a = ct__kargs_lock(*k);
  ct__karg_tensor(a, "p", p, 0);
  ct__karg_tensor(a, "g", g, 0);
  return CT_OK;
}

static ct_status sgd_launch(ct_optimizer *o, int i, ct_tensor *g, const char *fn) {
  ct_tensor *p = o->params[i], *b = o->s0[i];
  const ct__optim_group *gr = &o->groups[o->group[i]];
  ct_dtype dt = p->dtype;
  ct__kernel *k;
  struct ct__kargs a;
  CT__TRY(launch_begin(&k, &a, "optim_sgd", p, g, fn));
  ct__karg_tensor(&a, "buf", b, 0);
  ct__optim_karg_geom(&a, 3, (const ct_tensor *[]){p, g, b ? b : p});
  ct__karg_long(&a, "n", ct_numel(p));
  ct__optim_karg_acc(&a, "neg_lr", dt, -gr->lr);
  ct__optim_karg_acc(&a, "momentum", dt, o->momentum);
  ct__optim_karg_acc(&a, "wd", dt, gr->weight_decay);
  ct__karg_int(&a, "first", o->steps[i] == 0);
  ct__karg_int(&a, "nesterov", o->nesterov);
  return ct__launch1(k, &a, p->storage->device, ct_numel(p), 0, fn);
}

static ct_status adam_launch(ct_optimizer *o, int i, ct_tensor *g, const char *fn) {
  ct_tensor *p = o->params[i], *m = o->s0[i], *v = o->s1[i];
  const ct__optim_group *gr = &o->groups[o->group[i]];
  double lr = gr->lr, wd = gr->weight_decay;
  ct_dtype dt = p->dtype;
  /* PyTorch computes these in double on the host (Python floats; the step count is exact). */
  double t = (double)(o->steps[i] + 1);
  double bc1 = 1 - pow(o->beta1, t), bc2 = 1 - pow(o->beta2, t);
  bool dw = wd != 0 && o->decoupled, cw = wd != 0 && !o->decoupled;
  ct__kernel *k;
  struct ct__kargs a;
  CT__TRY(launch_begin(&k, &a, "optim_adam", p, g, fn));
  ct__karg_tensor(&a, "m", m, 0);
  ct__karg_tensor(&a, "v", v, 0);
  ct__optim_karg_geom(&a, 3, (const ct_tensor *[]){p, g, m});
  ct__karg_long(&a, "n", ct_numel(p));
  ct__optim_karg_acc(&a, "decay", dt, dw ? 1 - lr * wd : 1.0);
  ct__optim_karg_acc(&a, "wd", dt, cw ? wd : 0.0);
  ct__optim_karg_acc(&a, "w1", dt, 1 - o->beta1);
  ct__optim_karg_acc(&a, "beta2", dt, o->beta2);
  ct__optim_karg_acc(&a, "w2", dt, 1 - o->beta2);
  ct__optim_karg_acc(&a, "neg_step", dt, -(lr / bc1));
  ct__optim_karg_acc(&a, "bc2_sqrt", dt, pow(bc2, 0.5));
  ct__optim_karg_acc(&a, "eps", dt, o->eps);
  return ct__launch1(k, &a, p->storage->device, ct_numel(p), 0, fn);
}

ct_status ct_optimizer_step(ct_optimizer *opt) {
  const char *fn = "ct_optimizer_step";
  CT__CHECK_NOT_NULL(fn, opt);
  /* Everything that can fail for want of memory first, so that it changes no parameter. */
  for (int i = 0; i < opt->n; i++) {
    ct_tensor *g;
    CT__TRY(ct__optim_grad(&g, opt->params[i], i, fn));
    /* Checked before any parameter changes, so a refused step is no half step. */
    if (g && opt->steps[i] >= CT__OPTIM_MAX_STEPS)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: parameter %d has taken %" PRId64 " steps, the most its step count holds (another "
                       "would overflow it)",
                       fn, i, opt->steps[i]);
    if (g) {
      ct_status st = ensure_state(opt, i);
      if (st != CT_OK) {
        ct__error_append(" (in %s, the state of parameter %d)", fn, i);
        return st;
      }
    }
  }
  for (int i = 0; i < opt->n; i++) {
    ct_tensor *g, *p = opt->params[i];
    CT__TRY(ct__optim_grad(&g, p, i, fn));
    if (!g) continue; /* PyTorch skips p.grad is None: its state stays as it is */
    CT__TRY(opt->kind == CT__OPTIM_SGD ? sgd_launch(opt, i, g, fn) : adam_launch(opt, i, g, fn));
    opt->steps[i]++;
    ct__tensor_bump_version(p);
    ct__tensor_bump_version(opt->s0[i]);
    ct__tensor_bump_version(opt->s1[i]);
  }
  return CT_OK;
}

ct_status ct_optimizer_zero_grad(ct_optimizer *opt) {
  CT__CHECK_NOT_NULL("ct_optimizer_zero_grad", opt);
  for (int i = 0; i < opt->n; i++) CT__TRY(ct_grad_clear(opt->params[i]));
  return CT_OK;
}

ct_status ct_optimizer_set_lr(ct_optimizer *opt, double lr) {
  CT__CHECK_NOT_NULL("ct_optimizer_set_lr", opt);
  CT__TRY(check_lr(lr, "ct_optimizer_set_lr"));
  opt->lr = lr;
  for (int g = 0; g < opt->ngroups; g++) opt->groups[g].lr = lr;
  return CT_OK;
}

double ct_optimizer_get_lr(const ct_optimizer *opt) { return opt ? opt->groups[0].lr : NAN; }

ct_status ct_optimizer_add_param_group(ct_optimizer *opt, ct_tensor *const *params, int n, double lr,
                                       double weight_decay) {
  const char *fn = "ct_optimizer_add_param_group";
  CT__CHECK_NOT_NULL(fn, opt);
  CT__TRY(ct__optim_check_params(params, n, false, true, fn));
  if (isnan(lr)) lr = opt->lr;
  if (isnan(weight_decay)) weight_decay = opt->weight_decay;
  CT__TRY(check_lr(lr, fn));
  if (!(weight_decay >= 0))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: weight_decay is %g (expected weight_decay >= 0)", fn,
                     weight_decay);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < opt->n; j++)
      if (opt->params[j] == params[i])
        return ct__error(CT_ERR_INVALID_ARGUMENT,
                         "%s: params[%d] is already in group %d of the optimizer (a parameter belongs to one "
                         "group, as PyTorch's)",
                         fn, i, opt->group[j]);
  if (n > INT32_MAX - opt->n || opt->ngroups == INT32_MAX)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: too many parameters (%d + %d)", fn, opt->n, n);
  ct__optim_group *gs = realloc(opt->groups, (size_t)(opt->ngroups + 1) * sizeof *gs);
  if (!gs) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  opt->groups = gs;
  int need = opt->n + n, cap = opt->cap;
  while (cap < need) cap = cap > INT32_MAX / 2 ? need : 2 * cap;
  CT__TRY(grow(opt, cap, fn));
  int g = opt->ngroups++;
  opt->groups[g] = (ct__optim_group){.first = opt->n, .n = n, .lr = lr, .weight_decay = weight_decay,
                                     .initial_lr = NAN};
  for (int i = 0; i < n; i++) {
    opt->params[opt->n + i] = ct_retain(params[i]);
    opt->group[opt->n + i] = g;
  }
  opt->n += n;
  return CT_OK;
}

int ct_optimizer_num_groups(const ct_optimizer *opt) { return opt ? opt->ngroups : 0; }

/* CT_ERR_INVALID_ARGUMENT unless opt is not NULL and group names one of its groups. */
static ct_status check_group(const ct_optimizer *opt, int group, const char *fn) {
  CT__CHECK_NOT_NULL(fn, opt);
  if (group < 0 || group >= opt->ngroups)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: group %d is out of range (the optimizer has %d groups)", fn,
                     group, opt->ngroups);
  return CT_OK;
}

ct_status ct_optimizer_set_group_lr(ct_optimizer *opt, int group, double lr) {
  const char *fn = "ct_optimizer_set_group_lr";
  CT__TRY(check_group(opt, group, fn));
  CT__TRY(check_lr(lr, fn));
  opt->groups[group].lr = lr;
  return CT_OK;
}

double ct_optimizer_get_group_lr(const ct_optimizer *opt, int group) {
  return opt && group >= 0 && group < opt->ngroups ? opt->groups[group].lr : NAN;
}

ct_status ct_optimizer_set_group_weight_decay(ct_optimizer *opt, int group, double weight_decay) {
  const char *fn = "ct_optimizer_set_group_weight_decay";
  CT__TRY(check_group(opt, group, fn));
  if (!(weight_decay >= 0))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: weight_decay is %g (expected weight_decay >= 0)", fn,
                     weight_decay);
  opt->groups[group].weight_decay = weight_decay;
  return CT_OK;
}

double ct_optimizer_get_group_weight_decay(const ct_optimizer *opt, int group) {
  return opt && group >= 0 && group < opt->ngroups ? opt->groups[group].weight_decay : NAN;
}

int ct_optimizer_group_size(const ct_optimizer *opt, int group) {
  return opt && group >= 0 && group < opt->ngroups ? opt->groups[group].n : -1;
}

void ct_optimizer_free(ct_optimizer *opt) {
  if (!opt) return;
  for (int i = 0; i < opt->n; i++) {
    if (opt->params) ct_release(opt->params[i]);
    if (opt->s0) ct_release(opt->s0[i]);
    if (opt->s1) ct_release(opt->s1[i]);
  }
  free(opt->params);
  free(opt->s0);
  free(opt->s1);
  free(opt->steps);
  free(opt->group);
  free(opt->groups);
  free(opt);
}
