/* Learning-rate schedulers (include/cltensor/sched.h): torch.optim.lr_scheduler's formulas,
 * applied to the optimizer's parameter groups. Every expression keeps Python's order of
 * operations (left to right, in double), so that the sequences match PyTorch's bit for bit
 * where the C library's cos and pow are Python's. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/sched.h"
#include "core/error.h"
#include "io/io.h"
#include "optim/optim.h"

/* Python's math.pi (the double nearest pi). */
#define PY_PI 3.141592653589793

typedef enum kind { K_STEP, K_MULTISTEP, K_EXPONENTIAL, K_COSINE, K_LINEAR, K_ONE_CYCLE, K_PLATEAU, K_SEQUENTIAL } kind;

static const char *const KIND_NAME[] = {"step",      "multistep", "exponential", "cosine",
                                        "linear",    "one_cycle", "plateau",     "sequential"};

/* A phase of OneCycleLR: it ends at end_step, annealing from one of the group's rates to
 * another (0: initial, 1: max, 2: min), and the momentum from one of (0: max_momentum,
 * 1: base_momentum) to another. */
typedef struct phase {
  double end_step;
  int start_lr, end_lr, start_m, end_m;
} phase;

struct ct_lr_scheduler {
  kind kind;
  ct_optimizer *opt; /* borrowed */
  int ngroups;       /* the groups covered: the optimizer's when the scheduler was made */
  double *base_lrs, *last_lrs;
  int64_t last_epoch;
  /* the kinds' arguments */
  int64_t step_size, T_max, total_iters, total_steps, patience, cooldown;
  double gamma, eta_min, start_factor, end_factor;
  int64_t *milestones;
  int nmilestones;
  /* OneCycleLR: the phases and each group's rates (3 per group: initial, max, min) */
  phase phases[3];
  int nphases;
  ct_anneal anneal;
  double *rates;
  bool cycle_momentum;
  double momenta[2]; /* max_momentum, base_momentum */
  /* ReduceLROnPlateau */
  ct_plateau_mode mode;
  ct_threshold_mode threshold_mode;
  double factor, threshold, min_lr, eps, best;
  int64_t num_bad_epochs, cooldown_counter;
  /* SequentialLR: the children it owns, switched at milestones (nmilestones = nchildren - 1) */
  ct_lr_scheduler **children;
  int nchildren;
};

/* The PyTorch modulo of Python ints: the result has the divisor's sign (b > 0 here). */
static int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

static double anneal(ct_anneal a, double start, double end, double pct) {
  if (a == CT_ANNEAL_COS) {
    double cos_out = cos(PY_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

/* OneCycleLR's phase of epoch e and the fraction of it done (PyTorch's loop over the phases). */
static const phase *one_cycle_phase(const ct_lr_scheduler *s, int64_t e, double *pct) {
  double start_step = 0.0;
  for (int i = 0; i < s->nphases; i++) {
    double end_step = s->phases[i].end_step;
    if ((double)e <= end_step || i == s->nphases - 1) {
      *pct = ((double)e - start_step) / (end_step - start_step);
      return &s->phases[i];
    }
    start_step = end_step;
  }
  *pct = 0; /* not reached: the last phase always matches */
  return &s->phases[0];
}

/* The lr of group g at epoch e = s->last_epoch (already advanced), from its current lr: the
 * body of each scheduler's get_lr(). */
static ct_status next_lr(double *out, const ct_lr_scheduler *s, int g, const char *fn) {
  double lr = s->opt->groups[g].lr;
  int64_t e = s->last_epoch;
  switch (s->kind) {
  case K_STEP:
    *out = e == 0 || e % s->step_size != 0 ? lr : lr * s->gamma;
    return CT_OK;
  case K_MULTISTEP: {
    int k = 0;
    for (int i = 0; i < s->nmilestones; i++) k += s->milestones[i] == e;
    *out = k == 0 ? lr : lr * pow(s->gamma, (double)k);
    return CT_OK;
  }
  case K_EXPONENTIAL:
    *out = e == 0 ? lr : lr * s->gamma;
    return CT_OK;
  case K_COSINE: {
    double T = (double)s->T_max, base = s->base_lrs[g];
    if (e == 0) *out = lr;
    else if (py_mod(e - 1 - s->T_max, 2 * s->T_max) == 0)
      *out = lr + (base - s->eta_min) * (1 - cos(PY_PI / T)) / 2;
    else
      *out = (1 + cos(PY_PI * (double)e / T)) / (1 + cos(PY_PI * (double)(e - 1) / T)) * (lr - s->eta_min) +
             s->eta_min;
    return CT_OK;
  }
  case K_LINEAR:
    if (e == 0) *out = lr * s->start_factor;
    else if (e > s->total_iters) *out = lr;
    else
      *out = lr * (1.0 + (s->end_factor - s->start_factor) /
                             ((double)s->total_iters * s->start_factor +
                              (double)(e - 1) * (s->end_factor - s->start_factor)));
    return CT_OK;
  case K_ONE_CYCLE: {
    if (e > s->total_steps)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: tried to step %" PRId64 " times; the one-cycle scheduler's total_steps is %" PRId64, fn,
                       e, s->total_steps);
    double pct;
    const phase *ph = one_cycle_phase(s, e, &pct);
    const double *r = &s->rates[3 * g];
    *out = anneal(s->anneal, r[ph->start_lr], r[ph->end_lr], pct);
    return CT_OK;
  }
  case K_PLATEAU:
  case K_SEQUENTIAL:
    break;
  }
  return ct__error(CT_ERR_INTERNAL, "%s: scheduler kind %d has no formula", fn, (int)s->kind);
}

/* One step of a formula scheduler: every covered group's next lr, all computed and checked
 * before any is set. */
static ct_status advance(ct_lr_scheduler *s, const char *fn) {
  s->last_epoch++;
  ct_status st = CT_OK;
  for (int g = 0; g < s->ngroups && st == CT_OK; g++) {
    st = next_lr(&s->last_lrs[g], s, g, fn);
    /* PyTorch sets whatever the formula gives, a negative lr too (OneCycleLR's linear anneal
     * stepped a total_steps-th time goes below min_lr); only a NaN is refused here. */
    if (st == CT_OK && isnan(s->last_lrs[g]))
      st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the %s scheduler's lr of group %d at step %" PRId64 " is NaN", fn,
                     KIND_NAME[s->kind], g, s->last_epoch);
  }
  if (st != CT_OK) {
    s->last_epoch--;
    for (int g = 0; g < s->ngroups; g++) s->last_lrs[g] = s->opt->groups[g].lr;
    return st;
  }
  for (int g = 0; g < s->ngroups; g++) s->opt->groups[g].lr = s->last_lrs[g];
  if (s->kind == K_ONE_CYCLE && s->cycle_momentum) {
    /* Every group gets the same momentum here (one max and base momentum for all), so it is the
     * optimizer's: SGD's momentum or Adam's beta1. */
    double pct;
    const phase *ph = one_cycle_phase(s, s->last_epoch, &pct);
    double m = anneal(s->anneal, s->momenta[ph->start_m], s->momenta[ph->end_m], pct);
    if (s->opt->kind == CT__OPTIM_SGD) s->opt->momentum = m;
    else s->opt->beta1 = m;
  }
  return CT_OK;
}

/* PyTorch's _get_closed_form_lr at epoch e (what SequentialLR uses when it switches to a
 * scheduler at a milestone: step(0)); the kinds without one (OneCycleLR) take get_lr. */
static ct_status closed_form_lr(double *out, const ct_lr_scheduler *s, int g, int64_t e, const char *fn) {
  double base = s->base_lrs[g];
  switch (s->kind) {
  case K_STEP:
    *out = base * pow(s->gamma, (double)(e / s->step_size));
    return CT_OK;
  case K_MULTISTEP: {
    int k = 0; /* bisect_right over the sorted milestones: how many are <= e */
    for (int i = 0; i < s->nmilestones; i++) k += s->milestones[i] <= e;
    *out = base * pow(s->gamma, (double)k);
    return CT_OK;
  }
  case K_EXPONENTIAL:
    *out = base * pow(s->gamma, (double)e);
    return CT_OK;
  case K_COSINE:
    *out = s->eta_min + (base - s->eta_min) * (1 + cos(PY_PI * (double)e / (double)s->T_max)) / 2;
    return CT_OK;
  case K_LINEAR:
    *out = base * (s->start_factor + (s->end_factor - s->start_factor) *
                                         (double)(s->total_iters < e ? s->total_iters : e) / (double)s->total_iters);
    return CT_OK;
  default:
    return next_lr(out, s, g, fn);
  }
}

/* SequentialLR.step(): the child of the new epoch steps, or restarts at epoch 0 with its closed
 * form when the epoch is its milestone. */
static ct_status sequential_step(ct_lr_scheduler *s, const char *fn) {
  int64_t e = s->last_epoch + 1;
  int idx = 0; /* bisect_right(milestones, e) */
  while (idx < s->nmilestones && s->milestones[idx] <= e) idx++;
  ct_lr_scheduler *c = s->children[idx];
  ct_status st = CT_OK;
  if (idx > 0 && s->milestones[idx - 1] == e) {
    double *lrs = calloc((size_t)s->ngroups, sizeof *lrs);
    if (!lrs) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    int64_t saved = c->last_epoch;
    c->last_epoch = 0;
    for (int g = 0; g < s->ngroups && st == CT_OK; g++) {
      st = closed_form_lr(&lrs[g], c, g, 0, fn);
      if (st == CT_OK && isnan(lrs[g]))
        st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the %s scheduler's lr of group %d at its start is NaN", fn,
                       KIND_NAME[c->kind], g);
    }
    if (st == CT_OK) {
      for (int g = 0; g < s->ngroups; g++) c->last_lrs[g] = s->opt->groups[g].lr = lrs[g];
    } else {
      c->last_epoch = saved;
    }
    free(lrs);
  } else {
    st = advance(c, fn);
  }
  if (st != CT_OK) return st;
  s->last_epoch = e;
  memcpy(s->last_lrs, c->last_lrs, sizeof *s->last_lrs * (size_t)s->ngroups);
  return CT_OK;
}

/* *sp: a new scheduler of kind k over opt's groups, their base lr set (PyTorch's setdefault of
 * "initial_lr"); the caller fills the kind's fields and hands it to sched_start, which stores
 * it in *out (NULLed here). */
static ct_status sched_new(ct_lr_scheduler **sp, ct_lr_scheduler **out, ct_optimizer *opt, kind k, const char *fn) {
  *sp = NULL;
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, opt);
  ct_lr_scheduler *s = calloc(1, sizeof *s);
  if (s) {
    s->base_lrs = calloc((size_t)opt->ngroups, sizeof *s->base_lrs);
    s->last_lrs = calloc((size_t)opt->ngroups, sizeof *s->last_lrs);
  }
  if (!s || !s->base_lrs || !s->last_lrs) {
    ct_lr_scheduler_free(s);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  s->kind = k;
  s->opt = opt;
  s->ngroups = opt->ngroups;
  s->last_epoch = -1;
  for (int g = 0; g < s->ngroups; g++) {
    s->base_lrs[g] = isnan(opt->groups[g].initial_lr) ? opt->groups[g].lr : opt->groups[g].initial_lr;
    s->last_lrs[g] = opt->groups[g].lr;
  }
  *sp = s;
  return CT_OK;
}

/* The end of a constructor: *out = s when st is CT_OK, else s is freed (what the constructor set
 * in it goes with it) and st returned. */
static ct_status sched_finish(ct_lr_scheduler **out, ct_lr_scheduler *s, ct_status st) {
  if (st != CT_OK) ct_lr_scheduler_free(s);
  else *out = s;
  return st;
}

/* st, the constructor's checks, passed: marks the groups' initial_lr (only then, so a refused
 * scheduler leaves the optimizer as it was) and takes the first step. */
static ct_status sched_start(ct_lr_scheduler **out, ct_lr_scheduler *s, ct_status st, const char *fn) {
  if (st == CT_OK) {
    for (int g = 0; g < s->ngroups; g++)
      if (isnan(s->opt->groups[g].initial_lr)) s->opt->groups[g].initial_lr = s->base_lrs[g];
    st = advance(s, fn);
  }
  return sched_finish(out, s, st);
}

static ct_status check_gamma(double gamma, const char *fn) {
  if (!(gamma >= 0) || isinf(gamma))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: gamma is %g (expected a finite gamma >= 0)", fn, gamma);
  return CT_OK;
}

ct_status ct_lr_step_new(ct_lr_scheduler **out, ct_optimizer *opt, int64_t step_size, double gamma) {
  const char *fn = "ct_lr_step_new";
  ct_lr_scheduler *s;
  CT__TRY(sched_new(&s, out, opt, K_STEP, fn));
  ct_status st = check_gamma(gamma, fn);
  if (st == CT_OK && step_size < 1)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: step_size is %" PRId64 " (expected step_size >= 1)", fn, step_size);
  s->step_size = step_size;
  s->gamma = gamma;
  return sched_start(out, s, st, fn);
}

ct_status ct_lr_multistep_new(ct_lr_scheduler **out, ct_optimizer *opt, const int64_t *milestones, int n,
                              double gamma) {
  const char *fn = "ct_lr_multistep_new";
  ct_lr_scheduler *s;
  CT__TRY(sched_new(&s, out, opt, K_MULTISTEP, fn));
  ct_status st = check_gamma(gamma, fn);
  if (st == CT_OK && n < 0) st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %d (expected n >= 0)", fn, n);
  if (st == CT_OK && n > 0 && !milestones)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 'milestones' is NULL", fn);
  if (st == CT_OK && !(s->milestones = malloc(((size_t)n + 1) * sizeof *s->milestones)))
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (st == CT_OK && n > 0) memcpy(s->milestones, milestones, (size_t)n * sizeof *milestones);
  s->nmilestones = n;
  s->gamma = gamma;
  return sched_start(out, s, st, fn);
}

ct_status ct_lr_exponential_new(ct_lr_scheduler **out, ct_optimizer *opt, double gamma) {
  const char *fn = "ct_lr_exponential_new";
  ct_lr_scheduler *s;
  CT__TRY(sched_new(&s, out, opt, K_EXPONENTIAL, fn));
  ct_status st = check_gamma(gamma, fn);
  s->gamma = gamma;
  return sched_start(out, s, st, fn);
}

ct_status ct_lr_cosine_new(ct_lr_scheduler **out, ct_optimizer *opt, int64_t T_max, double eta_min) {
  const char *fn = "ct_lr_cosine_new";
  ct_lr_scheduler *s;
  CT__TRY(sched_new(&s, out, opt, K_COSINE, fn));
  ct_status st = CT_OK;
  if (T_max < 1 || T_max > INT64_MAX / 4)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: T_max is %" PRId64 " (expected T_max >= 1)", fn, T_max);
  else if (!(eta_min >= 0) || isinf(eta_min))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: eta_min is %g (expected a finite eta_min >= 0)", fn, eta_min);
  s->T_max = T_max;
  s->eta_min = eta_min;
  return sched_start(out, s, st, fn);
}

ct_status ct_lr_linear_new(ct_lr_scheduler **out, ct_optimizer *opt, double start_factor, double end_factor,
                           int64_t total_iters) {
  const char *fn = "ct_lr_linear_new";
  ct_lr_scheduler *s;
  CT__TRY(sched_new(&s, out, opt, K_LINEAR, fn));
  ct_status st = CT_OK;
  /* PyTorch's checks and messages. */
  if (!(start_factor > 0 && start_factor <= 1))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: start_factor is %g (expected 0 < start_factor <= 1)", fn,
                   start_factor);
  else if (!(end_factor >= 0 && end_factor <= 1))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: end_factor is %g (expected 0 <= end_factor <= 1)", fn, end_factor);
  else if (total_iters < 0)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: total_iters is %" PRId64 " (expected total_iters >= 0)", fn,
                   total_iters);
  s->start_factor = start_factor;
  s->end_factor = end_factor;
  s->total_iters = total_iters;
  return sched_start(out, s, st, fn);
}

ct_status ct_lr_one_cycle_new(ct_lr_scheduler **out, ct_optimizer *opt, double max_lr, int64_t total_steps,
                              double pct_start, ct_anneal anneal_strategy, bool cycle_momentum, double base_momentum,
                              double max_momentum, double div_factor, double final_div_factor, bool three_phase) {
  const char *fn = "ct_lr_one_cycle_new";
  ct_lr_scheduler *s;
  CT__TRY(sched_new(&s, out, opt, K_ONE_CYCLE, fn));
  ct_status st = CT_OK;
  if (total_steps < 1)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: total_steps is %" PRId64 " (expected a positive integer)", fn,
                   total_steps);
  else if (!(pct_start >= 0 && pct_start <= 1))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: pct_start is %g (expected a number between 0 and 1)", fn, pct_start);
  else if (anneal_strategy != CT_ANNEAL_COS && anneal_strategy != CT_ANNEAL_LINEAR)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: anneal is %d (expected CT_ANNEAL_COS or CT_ANNEAL_LINEAR)", fn,
                   (int)anneal_strategy);
  else if (!(max_lr >= 0) || isinf(max_lr))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: max_lr is %g (expected a finite max_lr >= 0)", fn, max_lr);
  else if (!(div_factor > 0) || isinf(div_factor))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: div_factor is %g (expected a finite div_factor > 0)", fn, div_factor);
  else if (!(final_div_factor > 0) || isinf(final_div_factor))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: final_div_factor is %g (expected a finite final_div_factor > 0)", fn,
                   final_div_factor);
  else if (cycle_momentum && opt->kind == CT__OPTIM_SGD && !(opt->momentum > 0 && base_momentum > 0 &&
                                                              max_momentum > 0 && isfinite(base_momentum) &&
                                                              isfinite(max_momentum)))
    st = ct__error(CT_ERR_INVALID_ARGUMENT,
                   "%s: cycle_momentum needs an SGD optimizer made with momentum > 0 and base_momentum, "
                   "max_momentum > 0 (momentum %g, base_momentum %g, max_momentum %g)",
                   fn, opt->momentum, base_momentum, max_momentum);
  else if (cycle_momentum && opt->kind == CT__OPTIM_ADAM &&
           !(base_momentum >= 0 && base_momentum < 1 && max_momentum >= 0 && max_momentum < 1))
    st = ct__error(CT_ERR_INVALID_ARGUMENT,
                   "%s: base_momentum %g and max_momentum %g become Adam's beta1 (expected 0 <= beta1 < 1)", fn,
                   base_momentum, max_momentum);
  else if (!(s->rates = calloc((size_t)s->ngroups * 3, sizeof *s->rates)))
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (st != CT_OK) {
    ct_lr_scheduler_free(s);
    return st;
  }
  double ts = (double)total_steps;
  /* PyTorch's _schedule_phases (momenta: 0 max, 1 base). */
  if (three_phase) {
    s->phases[0] = (phase){pct_start * ts - 1, 0, 1, 0, 1};
    s->phases[1] = (phase){2 * pct_start * ts - 2, 1, 0, 1, 0};
    s->phases[2] = (phase){ts - 1, 0, 2, 0, 0};
    s->nphases = 3;
  } else {
    s->phases[0] = (phase){pct_start * ts - 1, 0, 1, 0, 1};
    s->phases[1] = (phase){ts - 1, 1, 2, 1, 0};
    s->nphases = 2;
  }
  s->cycle_momentum = cycle_momentum;
  s->momenta[0] = max_momentum;
  s->momenta[1] = base_momentum;
  s->anneal = anneal_strategy;
  s->total_steps = total_steps;
  for (int g = 0; g < s->ngroups; g++) {
    double initial = max_lr / div_factor;
    s->rates[3 * g] = initial;
    s->rates[3 * g + 1] = max_lr;
    s->rates[3 * g + 2] = initial / final_div_factor;
    /* OneCycleLR sets initial_lr itself (not setdefault). */
    s->base_lrs[g] = initial;
    opt->groups[g].initial_lr = initial;
  }
  return sched_start(out, s, CT_OK, fn);
}

ct_status ct_lr_plateau_new(ct_lr_scheduler **out, ct_optimizer *opt, ct_plateau_mode mode, double factor,
                            int64_t patience, double threshold, ct_threshold_mode threshold_mode, int64_t cooldown,
                            double min_lr, double eps) {
  const char *fn = "ct_lr_plateau_new";
  ct_lr_scheduler *s;
  CT__TRY(sched_new(&s, out, opt, K_PLATEAU, fn));
  ct_status st = CT_OK;
  if (mode != CT_PLATEAU_MIN && mode != CT_PLATEAU_MAX)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: mode is %d (expected CT_PLATEAU_MIN or CT_PLATEAU_MAX)", fn, (int)mode);
  else if (threshold_mode != CT_THRESHOLD_REL && threshold_mode != CT_THRESHOLD_ABS)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: threshold_mode is %d (expected CT_THRESHOLD_REL or CT_THRESHOLD_ABS)",
                   fn, (int)threshold_mode);
  else if (!(factor >= 0 && factor < 1))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: factor is %g (expected 0 <= factor < 1)", fn, factor);
  else if (patience < 0 || cooldown < 0)
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: patience is %" PRId64 " and cooldown %" PRId64 " (expected >= 0)", fn,
                   patience, cooldown);
  else if (!(threshold >= 0) || isinf(threshold))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: threshold is %g (expected a finite threshold >= 0)", fn, threshold);
  else if (!(min_lr >= 0) || isinf(min_lr))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: min_lr is %g (expected a finite min_lr >= 0)", fn, min_lr);
  else if (!(eps >= 0))
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: eps is %g (expected eps >= 0)", fn, eps);
  s->mode = mode;
  s->threshold_mode = threshold_mode;
  s->factor = factor;
  s->patience = patience;
  s->threshold = threshold;
  s->cooldown = cooldown;
  s->min_lr = min_lr;
  s->eps = eps;
  s->best = mode == CT_PLATEAU_MIN ? INFINITY : -INFINITY; /* PyTorch's mode_worse */
  s->last_epoch = 0; /* ReduceLROnPlateau takes no first step */
  return sched_finish(out, s, st);
}

ct_status ct_lr_sequential_new(ct_lr_scheduler **out, ct_optimizer *opt, ct_lr_scheduler *const *schedulers, int n,
                               const int64_t *milestones) {
  const char *fn = "ct_lr_sequential_new";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, opt);
  CT__CHECK_NOT_NULL(fn, schedulers);
  if (n < 1) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %d (expected at least one scheduler)", fn, n);
  if (n > 1 && !milestones) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 'milestones' is NULL", fn);
  for (int i = 0; i < n; i++) {
    const ct_lr_scheduler *c = schedulers[i];
    if (!c) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: schedulers[%d] is NULL", fn, i);
    if (c->opt != opt)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: schedulers[%d] belongs to another optimizer", fn, i);
    if (c->kind == K_PLATEAU || c->kind == K_SEQUENTIAL)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: schedulers[%d] is a %s scheduler (not supported in a sequence%s)",
                       fn, i, KIND_NAME[c->kind], c->kind == K_PLATEAU ? ", as PyTorch's" : "");
    if (c->ngroups != opt->ngroups)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: schedulers[%d] covers %d groups but the optimizer has %d", fn, i,
                       c->ngroups, opt->ngroups);
    for (int j = 0; j < i; j++)
      if (schedulers[j] == c) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: schedulers[%d] is schedulers[%d]", fn, i, j);
  }
  for (int i = 1; i < n - 1; i++)
    if (milestones[i] < milestones[i - 1])
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: milestones[%d] = %" PRId64 " is below milestones[%d] = %" PRId64
                       " (expected them in ascending order)", fn, i, milestones[i], i - 1, milestones[i - 1]);
  ct_lr_scheduler *s;
  CT__TRY(sched_new(&s, out, opt, K_SEQUENTIAL, fn));
  s->children = calloc((size_t)n, sizeof *s->children);
  s->milestones = calloc((size_t)n, sizeof *s->milestones);
  if (!s->children || !s->milestones) {
    ct_lr_scheduler_free(s);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  /* PyTorch: the groups back at their initial lr, every child's own first step undone, then the
   * first step of the child of epoch 0 (its constructor's first step again). */
  for (int g = 0; g < s->ngroups; g++) {
    s->base_lrs[g] = opt->groups[g].lr; /* kept to undo a failure */
    if (!isnan(opt->groups[g].initial_lr)) opt->groups[g].lr = opt->groups[g].initial_lr;
  }
  for (int i = 0; i < n; i++) {
    s->children[i] = schedulers[i];
    s->children[i]->last_epoch--;
  }
  s->nchildren = n;
  if (n > 1) memcpy(s->milestones, milestones, (size_t)(n - 1) * sizeof *milestones);
  s->nmilestones = n - 1;
  int idx = 0;
  while (idx < s->nmilestones && s->milestones[idx] <= 0) idx++;
  ct_status st = advance(s->children[idx], fn);
  if (st != CT_OK) { /* the caller keeps the children, as they were */
    for (int i = 0; i < n; i++) s->children[i]->last_epoch++;
    for (int g = 0; g < s->ngroups; g++) opt->groups[g].lr = s->base_lrs[g];
    s->nchildren = 0;
    ct_lr_scheduler_free(s);
    return st;
  }
  s->last_epoch = 0;
  memcpy(s->last_lrs, s->children[idx]->last_lrs, sizeof *s->last_lrs * (size_t)s->ngroups);
  *out = s;
  return CT_OK;
}

ct_status ct_lr_scheduler_step(ct_lr_scheduler *s) {
  const char *fn = "ct_lr_scheduler_step";
  CT__CHECK_NOT_NULL(fn, s);
  if (s->kind == K_PLATEAU)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: a plateau scheduler steps with a metric "
                     "(ct_lr_scheduler_step_metric)", fn);
  if (s->kind == K_SEQUENTIAL) return sequential_step(s, fn);
  return advance(s, fn);
}

static bool is_better(const ct_lr_scheduler *s, double a, double best) {
  if (s->mode == CT_PLATEAU_MIN && s->threshold_mode == CT_THRESHOLD_REL) {
    double rel_epsilon = 1.0 - s->threshold;
    return a < best * rel_epsilon;
  }
  if (s->mode == CT_PLATEAU_MIN) return a < best - s->threshold;
  if (s->threshold_mode == CT_THRESHOLD_REL) {
    double rel_epsilon = s->threshold + 1.0;
    return a > best * rel_epsilon;
  }
  return a > best + s->threshold;
}

ct_status ct_lr_scheduler_step_metric(ct_lr_scheduler *s, double metric) {
  const char *fn = "ct_lr_scheduler_step_metric";
  CT__CHECK_NOT_NULL(fn, s);
  if (s->kind != K_PLATEAU)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: only a plateau scheduler steps with a metric (this one is %s: "
                     "ct_lr_scheduler_step)", fn, KIND_NAME[s->kind]);
  s->last_epoch++;
  if (is_better(s, metric, s->best)) {
    s->best = metric;
    s->num_bad_epochs = 0;
  } else {
    s->num_bad_epochs++;
  }
  if (s->cooldown_counter > 0) {
    s->cooldown_counter--;
    s->num_bad_epochs = 0;
  }
  if (s->num_bad_epochs > s->patience) {
    for (int g = 0; g < s->ngroups; g++) {
      double old_lr = s->opt->groups[g].lr;
      double new_lr = fmax(old_lr * s->factor, s->min_lr);
      if (old_lr - new_lr > s->eps) s->opt->groups[g].lr = new_lr;
    }
    s->cooldown_counter = s->cooldown;
    s->num_bad_epochs = 0;
  }
  for (int g = 0; g < s->ngroups; g++) s->last_lrs[g] = s->opt->groups[g].lr;
  return CT_OK;
}

double ct_lr_scheduler_get_last_lr(const ct_lr_scheduler *s, int group) {
  return s && group >= 0 && group < s->ngroups ? s->last_lrs[group] : NAN;
}

int64_t ct_lr_scheduler_last_epoch(const ct_lr_scheduler *s) { return s ? s->last_epoch : -1; }

/* ---- checkpoints ---- */

static ct_status set_meta(ct_safetensors *st, const char *key, const char *fmt, ...) {
  char buf[48];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return ct_safetensors_metadata_set(st, key, buf);
}

/* Writes s's entries with keys prefix + name ("sched." for the scheduler, "sched.<k>." for a
 * sequence's children). */
static ct_status save_prefixed(const ct_lr_scheduler *s, ct_safetensors *st, const char *prefix) {
  char key[96];
#define CT__KEY(...) (snprintf(key, sizeof key, "%s", prefix), \
                      snprintf(key + strlen(key), sizeof key - strlen(key), __VA_ARGS__), key)
  ct_status r = ct_safetensors_metadata_set(st, CT__KEY("kind"), KIND_NAME[s->kind]);
  if (r == CT_OK) r = set_meta(st, CT__KEY("last_epoch"), "%" PRId64, s->last_epoch);
  if (r == CT_OK) r = set_meta(st, CT__KEY("groups"), "%d", s->ngroups);
  for (int g = 0; g < s->ngroups && r == CT_OK; g++) {
    r = set_meta(st, CT__KEY("%d.base_lr", g), "%.17g", s->base_lrs[g]);
    if (r == CT_OK) r = set_meta(st, CT__KEY("%d.last_lr", g), "%.17g", s->last_lrs[g]);
  }
  if (s->kind == K_PLATEAU) {
    if (r == CT_OK) r = set_meta(st, CT__KEY("best"), "%.17g", s->best);
    if (r == CT_OK) r = set_meta(st, CT__KEY("num_bad_epochs"), "%" PRId64, s->num_bad_epochs);
    if (r == CT_OK) r = set_meta(st, CT__KEY("cooldown_counter"), "%" PRId64, s->cooldown_counter);
  }
  if (s->kind == K_SEQUENTIAL && r == CT_OK) r = set_meta(st, CT__KEY("count"), "%d", s->nchildren);
#undef CT__KEY
  for (int i = 0; i < s->nchildren && r == CT_OK; i++) {
    char sub[64];
    snprintf(sub, sizeof sub, "%s%d.", prefix, i);
    r = save_prefixed(s->children[i], st, sub);
  }
  return r;
}

ct_status ct_lr_scheduler_save(const ct_lr_scheduler *s, ct_safetensors *st) {
  const char *fn = "ct_lr_scheduler_save";
  CT__CHECK_NOT_NULL(fn, s);
  CT__CHECK_NOT_NULL(fn, st);
  ct_status r = save_prefixed(s, st, "sched.");
  if (r != CT_OK) ct__error_append(" (in %s)", fn);
  return r;
}

/* The state read from a container for one scheduler (and its children), applied only when all
 * of it was read. */
typedef struct loaded {
  int64_t epoch, bad, cool;
  double best;
  double *lrs; /* base, last per group */
} loaded;

/* Reads s's entries under prefix into l[0] and its children's into the next entries (l has one
 * entry per scheduler of the tree, depth first); *used counts them. */
static ct_status load_prefixed(const ct_lr_scheduler *s, const ct_safetensors *st, const char *prefix, loaded *l,
                               int *used, const char *fn) {
  char key[96];
#define CT__KEY(...) (snprintf(key, sizeof key, "%s", prefix), \
                      snprintf(key + strlen(key), sizeof key - strlen(key), __VA_ARGS__), key)
  loaded *me = &l[(*used)++];
  const char *kind = ct_safetensors_metadata_get(st, CT__KEY("kind"));
  if (!kind) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container has no metadata '%s'", fn, key);
  if (strcmp(kind, KIND_NAME[s->kind]) != 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container holds a \"%.20s\" scheduler but this one is %s", fn,
                     kind, KIND_NAME[s->kind]);
  int64_t ng = 0;
  CT__TRY(ct__meta_i64(&me->epoch, st, CT__KEY("last_epoch"), -1, INT64_MAX, fn));
  CT__TRY(ct__meta_i64(&ng, st, CT__KEY("groups"), 0, INT32_MAX, fn));
  if (ng != s->ngroups)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container's scheduler covers %" PRId64 " groups but this one %d",
                     fn, ng, s->ngroups);
  if (me->epoch < -1 || (s->kind == K_ONE_CYCLE && me->epoch > s->total_steps))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: metadata '%slast_epoch' is %" PRId64 " (out of range)", fn, prefix,
                     me->epoch);
  if (s->kind == K_PLATEAU) {
    CT__TRY(ct__meta_double(&me->best, st, CT__KEY("best"), fn));
    CT__TRY(ct__meta_i64(&me->bad, st, CT__KEY("num_bad_epochs"), 0, INT64_MAX, fn));
    CT__TRY(ct__meta_i64(&me->cool, st, CT__KEY("cooldown_counter"), 0, INT64_MAX, fn));
  }
  if (s->kind == K_SEQUENTIAL) {
    int64_t cnt = 0;
    CT__TRY(ct__meta_i64(&cnt, st, CT__KEY("count"), 0, INT32_MAX, fn));
    if (cnt != s->nchildren)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container's sequence holds %" PRId64 " schedulers but this "
                       "one %d", fn, cnt, s->nchildren);
  }
  me->lrs = calloc((size_t)s->ngroups * 2 + 1, sizeof *me->lrs);
  if (!me->lrs) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (int g = 0; g < s->ngroups; g++) {
    CT__TRY(ct__meta_double(&me->lrs[2 * g], st, CT__KEY("%d.base_lr", g), fn));
    CT__TRY(ct__meta_double(&me->lrs[2 * g + 1], st, CT__KEY("%d.last_lr", g), fn));
  }
#undef CT__KEY
  for (int i = 0; i < s->nchildren; i++) {
    char sub[64];
    snprintf(sub, sizeof sub, "%s%d.", prefix, i);
    CT__TRY(load_prefixed(s->children[i], st, sub, l, used, fn));
  }
  return CT_OK;
}

/* Applies l (load_prefixed's order) to s and its children. */
static void apply_loaded(ct_lr_scheduler *s, const loaded *l, int *used) {
  const loaded *me = &l[(*used)++];
  for (int g = 0; g < s->ngroups; g++) {
    s->base_lrs[g] = me->lrs[2 * g];
    s->last_lrs[g] = me->lrs[2 * g + 1];
  }
  s->last_epoch = me->epoch;
  s->best = me->best;
  s->num_bad_epochs = me->bad;
  s->cooldown_counter = me->cool;
  for (int i = 0; i < s->nchildren; i++) apply_loaded(s->children[i], l, used);
}

static int tree_size(const ct_lr_scheduler *s) {
  int n = 1;
  for (int i = 0; i < s->nchildren; i++) n += tree_size(s->children[i]);
  return n;
}

struct ct__sched_loaded {
  loaded *l; /* load_prefixed's order */
  int n;
};

void ct__sched_loaded_free(ct__sched_loaded *r) {
  if (!r) return;
  for (int i = 0; r->l && i < r->n; i++) free(r->l[i].lrs);
  free(r->l);
  free(r);
}

ct_status ct__sched_read(ct__sched_loaded **out, const ct_lr_scheduler *s, const ct_safetensors *st, const char *fn) {
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, s);
  CT__CHECK_NOT_NULL(fn, st);
  ct__sched_loaded *r = calloc(1, sizeof *r);
  int used = 0;
  if (r) r->n = tree_size(s), r->l = calloc((size_t)r->n, sizeof *r->l);
  if (!r || !r->l) {
    ct__sched_loaded_free(r);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  ct_status e = load_prefixed(s, st, "sched.", r->l, &used, fn);
  if (e != CT_OK) ct__sched_loaded_free(r);
  else *out = r;
  return e;
}

void ct__sched_apply(ct_lr_scheduler *s, ct__sched_loaded *r) {
  int used = 0;
  apply_loaded(s, r->l, &used);
  ct__sched_loaded_free(r);
}

ct_status ct_lr_scheduler_load(ct_lr_scheduler *s, const ct_safetensors *st) {
  ct__sched_loaded *r;
  ct_status e = ct__sched_read(&r, s, st, "ct_lr_scheduler_load");
  if (e == CT_OK) ct__sched_apply(s, r); /* nothing changes before: all was read and checked */
  return e;
}

void ct_lr_scheduler_free(ct_lr_scheduler *s) {
  if (!s) return;
  free(s->base_lrs);
  free(s->last_lrs);
  free(s->milestones);
  free(s->rates);
  for (int i = 0; i < s->nchildren; i++) ct_lr_scheduler_free(s->children[i]);
  free(s->children);
  free(s);
}
