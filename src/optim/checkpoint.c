/* Optimizer checkpoints in a ct_safetensors container (ct_optimizer_save / ct_optimizer_load).
 *
 * Layout: metadata "optim.kind" ("sgd" or "adam"), "optim.count", the hyperparameters
 * ("optim.lr", "optim.weight_decay"; SGD: "optim.momentum", "optim.nesterov"; Adam:
 * "optim.beta1", "optim.beta2", "optim.eps", "optim.decoupled"; doubles printed with 17
 * significant digits, so they read back exactly), and per parameter i "optim.<i>.step"; the
 * tensors "optim.<i>.momentum_buffer" (SGD with momentum) or "optim.<i>.exp_avg" and
 * "optim.<i>.exp_avg_sq" (Adam), present exactly when that parameter took a step. The step
 * count decides, not the presence of a tensor, so saving again into a container that held a
 * later state leaves nothing that load would misread. As PyTorch's load_state_dict, loading
 * restores the hyperparameters too.
 * Parameter groups: "optim.groups" (their number) and per group g "optim.group.<g>.count",
 * "optim.group.<g>.lr", "optim.group.<g>.weight_decay" and "optim.group.<g>.initial_lr" (the
 * schedulers' base, "nan" before one was attached); "optim.lr" and "optim.weight_decay" stay the
 * defaults of added groups. A container without "optim.groups" (written before groups existed)
 * loads into a one-group optimizer, its group taking "optim.lr" and "optim.weight_decay". */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/shape.h"
#include "core/error.h"
#include "io/io.h"
#include "optim/optim.h"

static const char *const KIND_NAME[] = {"sgd", "adam"};

/* The state tensor names of a kind: SGD's one, Adam's two. */
static int state_names(const ct_optimizer *o, double momentum, const char **n0, const char **n1) {
  *n0 = *n1 = NULL;
  if (o->kind == CT__OPTIM_SGD) {
    if (momentum == 0) return 0;
    *n0 = "momentum_buffer";
    return 1;
  }
  *n0 = "exp_avg";
  *n1 = "exp_avg_sq";
  return 2;
}

static ct_status set_double(ct_safetensors *st, const char *key, double v) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.17g", v);
  return ct_safetensors_metadata_set(st, key, buf);
}

ct_status ct_optimizer_save(const ct_optimizer *opt, ct_safetensors *st) {
  const char *fn = "ct_optimizer_save";
  CT__CHECK_NOT_NULL(fn, opt);
  CT__CHECK_NOT_NULL(fn, st);
  /* Counts stay in 0..CT__OPTIM_MAX_STEPS (ct_optimizer_step and the loader see to it), so
   * everything written here loads; a count outside would be a bug, refused before st changes. */
  for (int i = 0; i < opt->n; i++)
    if (opt->steps[i] < 0 || opt->steps[i] > CT__OPTIM_MAX_STEPS)
      return ct__error(CT_ERR_INTERNAL, "%s: parameter %d's step count is %" PRId64 " (expected 0..%" PRId64 ")",
                       fn, i, opt->steps[i], (int64_t)CT__OPTIM_MAX_STEPS);
  const char *names[2];
  int ns = state_names(opt, opt->momentum, &names[0], &names[1]);
  /* Copies, so that later steps do not change what the container holds. */
  ct_tensor **copies = calloc((size_t)opt->n * 2 + 1, sizeof *copies);
  if (!copies) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ct_status st_ = CT_OK;
  for (int i = 0; i < opt->n && st_ == CT_OK; i++)
    for (int j = 0; j < ns && st_ == CT_OK && opt->steps[i] > 0; j++)
      st_ = ct_clone(&copies[2 * i + j], j == 0 ? opt->s0[i] : opt->s1[i]);
  char key[64];
  if (st_ == CT_OK) st_ = ct_safetensors_metadata_set(st, "optim.kind", KIND_NAME[opt->kind]);
  if (st_ == CT_OK) {
    snprintf(key, sizeof key, "%d", opt->n);
    st_ = ct_safetensors_metadata_set(st, "optim.count", key);
  }
  if (st_ == CT_OK) st_ = set_double(st, "optim.lr", opt->lr);
  if (st_ == CT_OK) st_ = set_double(st, "optim.weight_decay", opt->weight_decay);
  if (opt->kind == CT__OPTIM_SGD) {
    if (st_ == CT_OK) st_ = set_double(st, "optim.momentum", opt->momentum);
    if (st_ == CT_OK) st_ = ct_safetensors_metadata_set(st, "optim.nesterov", opt->nesterov ? "1" : "0");
  } else {
    if (st_ == CT_OK) st_ = set_double(st, "optim.beta1", opt->beta1);
    if (st_ == CT_OK) st_ = set_double(st, "optim.beta2", opt->beta2);
    if (st_ == CT_OK) st_ = set_double(st, "optim.eps", opt->eps);
    if (st_ == CT_OK) st_ = ct_safetensors_metadata_set(st, "optim.decoupled", opt->decoupled ? "1" : "0");
  }
  if (st_ == CT_OK) {
    snprintf(key, sizeof key, "%d", opt->ngroups);
    st_ = ct_safetensors_metadata_set(st, "optim.groups", key);
  }
  for (int g = 0; g < opt->ngroups && st_ == CT_OK; g++) {
    char val[32];
    const ct__optim_group *gr = &opt->groups[g];
    snprintf(key, sizeof key, "optim.group.%d.count", g);
    snprintf(val, sizeof val, "%d", gr->n);
    st_ = ct_safetensors_metadata_set(st, key, val);
    snprintf(key, sizeof key, "optim.group.%d.lr", g);
    if (st_ == CT_OK) st_ = set_double(st, key, gr->lr);
    snprintf(key, sizeof key, "optim.group.%d.weight_decay", g);
    if (st_ == CT_OK) st_ = set_double(st, key, gr->weight_decay);
    snprintf(key, sizeof key, "optim.group.%d.initial_lr", g);
    if (st_ == CT_OK) st_ = set_double(st, key, gr->initial_lr);
  }
  for (int i = 0; i < opt->n && st_ == CT_OK; i++) {
    char val[32];
    snprintf(key, sizeof key, "optim.%d.step", i);
    snprintf(val, sizeof val, "%" PRId64, opt->steps[i]);
    st_ = ct_safetensors_metadata_set(st, key, val);
    for (int j = 0; j < ns && st_ == CT_OK && copies[2 * i + j]; j++) {
      snprintf(key, sizeof key, "optim.%d.%s", i, names[j]);
      st_ = ct_safetensors_set(st, key, copies[2 * i + j]);
    }
  }
  for (int i = 0; i < 2 * opt->n; i++) ct_release(copies[i]);
  free(copies);
  if (st_ != CT_OK) ct__error_append(" (in %s)", fn);
  return st_;
}

/* The checkpoint's metadata value of key, or CT_ERR_INVALID_ARGUMENT naming it. */
static ct_status get_meta(const char **v, const ct_safetensors *st, const char *key, const char *fn) {
  *v = ct_safetensors_metadata_get(st, key);
  if (!*v) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container has no metadata '%s'", fn, key);
  return CT_OK;
}

/* A copy of the container's state tensor `name` of parameter i on p's device, after checking
 * that it has p's shape and dtype. */
static ct_status load_state(ct_tensor **out, const ct_safetensors *st, int i, const char *name, const ct_tensor *p,
                            const char *fn) {
  char key[64], sa[200], sb[200];
  snprintf(key, sizeof key, "optim.%d.%s", i, name);
  ct_tensor *t = NULL;
  if (ct_safetensors_get(&t, st, key) != CT_OK)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container has no tensor '%s'", fn, key);
  ct_status s = CT_OK;
  if (t->dtype != p->dtype || t->ndim != p->ndim ||
      memcmp(t->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) != 0)
    s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: tensor '%s' is %s %s but parameter %d is %s %s", fn, key,
                  ct_dtype_name(t->dtype), ct__shape_str(sa, sizeof sa, t->ndim, t->shape), i,
                  ct_dtype_name(p->dtype), ct__shape_str(sb, sizeof sb, p->ndim, p->shape));
  else if (t->storage->device == p->storage->device)
    s = ct_clone(out, t);
  else
    s = ct_to_device(out, t, p->storage->device); /* a new copy on another device */
  ct_release(t);
  return s;
}

struct ct__optim_loaded {
  ct_optimizer h;          /* the hyperparameters read */
  ct__optim_group *groups; /* opt->ngroups */
  int64_t *steps;          /* opt->n each */
  ct_tensor **ns0, **ns1;
  int n;
};

/* Everything st holds for opt, read and checked into l (ct__optim_read); l's arrays are freed
 * by ct__optim_loaded_free whatever this returns. */
static ct_status read_all(ct__optim_loaded *l, const ct_optimizer *opt, const ct_safetensors *st, const char *fn) {
  ct_optimizer h = l->h;
  int64_t flag = 0;
  CT__TRY(ct__meta_double(&h.lr, st, "optim.lr", fn));
  CT__TRY(ct__meta_double(&h.weight_decay, st, "optim.weight_decay", fn));
  ct_status s;
  if (opt->kind == CT__OPTIM_SGD) {
    CT__TRY(ct__meta_double(&h.momentum, st, "optim.momentum", fn));
    CT__TRY(ct__meta_i64(&flag, st, "optim.nesterov", 0, 1, fn));
    h.nesterov = flag;
    s = ct__optim_check_sgd(h.lr, h.momentum, h.weight_decay, h.nesterov, fn);
  } else {
    CT__TRY(ct__meta_double(&h.beta1, st, "optim.beta1", fn));
    CT__TRY(ct__meta_double(&h.beta2, st, "optim.beta2", fn));
    CT__TRY(ct__meta_double(&h.eps, st, "optim.eps", fn));
    CT__TRY(ct__meta_i64(&flag, st, "optim.decoupled", 0, 1, fn));
    h.decoupled = flag;
    s = ct__optim_check_adam(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, fn);
  }
  if (s != CT_OK) {
    ct__error_append(" (in %s: the container's hyperparameters)", fn);
    return s;
  }
  /* The groups: each one's parameter count must match; their lr and weight decay come back. */
  ct__optim_group *groups = l->groups = calloc((size_t)opt->ngroups, sizeof *groups);
  if (!groups) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  memcpy(groups, opt->groups, (size_t)opt->ngroups * sizeof *groups);
  if (!ct_safetensors_metadata_get(st, "optim.groups")) {
    if (opt->ngroups != 1)
      s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container has no parameter groups (metadata 'optim.groups') "
                    "but this optimizer has %d groups", fn, opt->ngroups);
    groups[0].lr = h.lr;
    groups[0].weight_decay = h.weight_decay;
  } else {
    int64_t ng = 0;
    s = ct__meta_i64(&ng, st, "optim.groups", 1, INT32_MAX, fn);
    if (s == CT_OK && ng != opt->ngroups)
      s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container holds %" PRId64 " parameter groups but this "
                    "optimizer has %d", fn, ng, opt->ngroups);
    for (int g = 0; g < opt->ngroups && s == CT_OK; g++) {
      char key[64];
      int64_t cnt = 0;
      snprintf(key, sizeof key, "optim.group.%d.count", g);
      s = ct__meta_i64(&cnt, st, key, 0, INT32_MAX, fn);
      if (s == CT_OK && cnt != groups[g].n)
        s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container's group %d holds %" PRId64 " parameters but this "
                      "optimizer's holds %d", fn, g, cnt, groups[g].n);
      snprintf(key, sizeof key, "optim.group.%d.lr", g);
      if (s == CT_OK) s = ct__meta_double(&groups[g].lr, st, key, fn);
      /* A scheduler may have set a negative lr, as PyTorch's (sched.h): any number but NaN. */
      if (s == CT_OK && isnan(groups[g].lr))
        s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: metadata '%s' is NaN (expected an lr)", fn, key);
      snprintf(key, sizeof key, "optim.group.%d.weight_decay", g);
      if (s == CT_OK) s = ct__meta_double(&groups[g].weight_decay, st, key, fn);
      if (s == CT_OK && !(groups[g].weight_decay >= 0))
        s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: metadata '%s' is %g (expected weight_decay >= 0)", fn, key,
                      groups[g].weight_decay);
      snprintf(key, sizeof key, "optim.group.%d.initial_lr", g);
      if (s == CT_OK) s = ct__meta_double(&groups[g].initial_lr, st, key, fn);
    }
  }
  if (s != CT_OK) return s;
  const char *names[2];
  int ns = state_names(opt, h.momentum, &names[0], &names[1]);
  int64_t *steps = l->steps = calloc((size_t)opt->n + 1, sizeof *steps);
  ct_tensor **ns0 = l->ns0 = calloc((size_t)opt->n + 1, sizeof *ns0);
  ct_tensor **ns1 = l->ns1 = calloc((size_t)opt->n + 1, sizeof *ns1);
  if (!steps || !ns0 || !ns1) s = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (int i = 0; i < opt->n && s == CT_OK; i++) {
    char key[64];
    snprintf(key, sizeof key, "optim.%d.step", i);
    s = ct__meta_i64(&steps[i], st, key, 0, INT64_MAX, fn);
    /* A count the next step's increment would overflow (an optimizer never saves one). */
    if (s == CT_OK && steps[i] > CT__OPTIM_MAX_STEPS)
      s = ct__error(CT_ERR_INVALID_ARGUMENT,
                    "%s: metadata '%s' is %" PRId64 " (expected a step count in 0..%" PRId64
                    ": the next step would overflow it)",
                    fn, key, steps[i], (int64_t)CT__OPTIM_MAX_STEPS);
    if (s == CT_OK && steps[i] > 0 && ns > 0) s = load_state(&ns0[i], st, i, names[0], opt->params[i], fn);
    if (s == CT_OK && steps[i] > 0 && ns > 1) s = load_state(&ns1[i], st, i, names[1], opt->params[i], fn);
  }
  l->h = h;
  return s;
}


void ct__optim_loaded_free(ct__optim_loaded *l) {
  if (!l) return;
  for (int i = 0; l->ns0 && l->ns1 && i < l->n; i++) {
    ct_release(l->ns0[i]);
    ct_release(l->ns1[i]);
  }
  free(l->steps);
  free(l->ns0);
  free(l->ns1);
  free(l->groups);
  free(l);
}

ct_status ct__optim_read(ct__optim_loaded **out, const ct_optimizer *opt, const ct_safetensors *st, const char *fn) {
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, opt);
  CT__CHECK_NOT_NULL(fn, st);
  const char *kind;
  CT__TRY(get_meta(&kind, st, "optim.kind", fn));
  if (strcmp(kind, KIND_NAME[opt->kind]) != 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container holds a \"%.20s\" optimizer but this one is %s", fn,
                     kind, KIND_NAME[opt->kind]);
  int64_t count;
  CT__TRY(ct__meta_i64(&count, st, "optim.count", 0, INT32_MAX, fn));
  if (count != opt->n)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container holds %" PRId64 " parameters' state but this "
                     "optimizer has %d parameters", fn, count, opt->n);
  ct__optim_loaded *l = calloc(1, sizeof *l);
  if (!l) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  l->h = *opt;
  l->n = opt->n;
  ct_status s = read_all(l, opt, st, fn);
  if (s != CT_OK) ct__optim_loaded_free(l);
  else *out = l;
  return s;
}

void ct__optim_apply(ct_optimizer *opt, ct__optim_loaded *l) {
  for (int i = 0; i < opt->n; i++) {
    ct_release(opt->s0[i]);
    ct_release(opt->s1[i]);
    opt->s0[i] = l->ns0[i];
    opt->s1[i] = l->ns1[i];
    l->ns0[i] = l->ns1[i] = NULL;
  }
  memcpy(opt->steps, l->steps, sizeof *l->steps * (size_t)opt->n);
  memcpy(opt->groups, l->groups, (size_t)opt->ngroups * sizeof *l->groups);
  const ct_optimizer *h = &l->h;
  opt->lr = h->lr;
  opt->weight_decay = h->weight_decay;
  opt->momentum = h->momentum;
  opt->nesterov = h->nesterov;
  opt->beta1 = h->beta1;
  opt->beta2 = h->beta2;
  opt->eps = h->eps;
  opt->decoupled = h->decoupled;
  ct__optim_loaded_free(l);
}

ct_status ct_optimizer_load(ct_optimizer *opt, const ct_safetensors *st) {
  ct__optim_loaded *l;
  CT__TRY(ct__optim_read(&l, opt, st, "ct_optimizer_load"));
  ct__optim_apply(opt, l);
  return CT_OK;
}
