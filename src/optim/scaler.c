/* The gradient scaler (torch.amp.GradScaler): dynamic loss scaling for f16/bf16 training.
 *
 * Per iteration each optimizer goes READY -> UNSCALED (ct_grad_scaler_unscale, or the unscale
 * inside ct_grad_scaler_step) -> STEPPED, and ct_grad_scaler_update() folds the inf/NaN
 * findings of every optimizer seen since the last update into the scale and starts afresh, as
 * PyTorch's per-optimizer states. Unscaling launches one optim_unscale kernel per gradient,
 * all writing one shared int flag per device, and reads each flag once. */
#include <math.h>
#include <stdlib.h>

#include "cltensor/elementwise.h"
#include "core/error.h"
#include "optim/optim.h"

enum { CT__SCALER_UNSCALED = 1, CT__SCALER_STEPPED = 2 };

struct ct__scaler_entry {
  const ct_optimizer *opt; /* identity only: never dereferenced after the call that added it */
  int stage;
  bool found_inf;
};

struct ct_grad_scaler {
  float scale; /* PyTorch keeps it in an f32 tensor */
  double growth_factor, backoff_factor;
  int growth_interval;
  int growth_tracker; /* consecutive steps without inf/NaN */
  bool skipped;
  int nentries, cap;
  struct ct__scaler_entry *entries;
};

ct_status ct_grad_scaler_new(ct_grad_scaler **out, double init_scale, double growth_factor, double backoff_factor,
                             int growth_interval) {
  const char *fn = "ct_grad_scaler_new";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  if (!(init_scale > 0 && init_scale <= 3.4028234663852886e38))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: init_scale is %g (expected a finite f32 value > 0)", fn,
                     init_scale);
  if (!(growth_factor > 1))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: growth_factor is %g (expected growth_factor > 1)", fn,
                     growth_factor);
  if (!(backoff_factor > 0 && backoff_factor < 1))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: backoff_factor is %g (expected 0 < backoff_factor < 1)", fn,
                     backoff_factor);
  if (growth_interval < 1)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: growth_interval is %d (expected >= 1)", fn, growth_interval);
  ct_grad_scaler *s = calloc(1, sizeof *s);
  if (!s) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  s->scale = (float)init_scale;
  s->growth_factor = growth_factor;
  s->backoff_factor = backoff_factor;
  s->growth_interval = growth_interval;
  *out = s;
  return CT_OK;
}

ct_status ct_grad_scaler_scale(ct_tensor **out, ct_grad_scaler *s, const ct_tensor *loss) {
  const char *fn = "ct_grad_scaler_scale";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, s);
  CT__CHECK_NOT_NULL(fn, loss);
  if (!ct_dtype_is_floating_point(loss->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: loss has dtype %s (expected a float dtype)", fn,
                     ct_dtype_name(loss->dtype));
  ct_status st = ct_mul_scalar(out, loss, s->scale);
  if (st != CT_OK) ct__error_append(" (in %s)", fn);
  return st;
}

/* The entry of opt in this iteration, added (READY, stage 0) when absent. */
static ct_status entry_of(struct ct__scaler_entry **e, ct_grad_scaler *s, const ct_optimizer *opt, const char *fn) {
  for (int i = 0; i < s->nentries; i++)
    if (s->entries[i].opt == opt) {
      *e = &s->entries[i];
      return CT_OK;
    }
  if (s->nentries == s->cap) {
    int cap = s->cap ? 2 * s->cap : 4;
    struct ct__scaler_entry *ne = realloc(s->entries, sizeof *ne * (size_t)cap);
    if (!ne) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    s->entries = ne;
    s->cap = cap;
  }
  *e = &s->entries[s->nentries++];
  **e = (struct ct__scaler_entry){.opt = opt};
  return CT_OK;
}

/* Unscales opt's gradients and records whether one held inf/NaN. */
static ct_status unscale(ct_grad_scaler *s, ct_optimizer *opt, struct ct__scaler_entry *e, const char *fn) {
  /* PyTorch refuses f16 gradients here (the parameters should be f32 master weights); checked
   * before anything changes. */
  for (int i = 0; i < opt->n; i++) {
    ct_tensor *g;
    CT__TRY(ct__optim_grad(&g, opt->params[i], i, fn));
    if (g && g->dtype == CT_F16)
      return ct__error(CT_ERR_DTYPE_MISMATCH,
                       "%s: parameter %d has an f16 gradient; unscaling f16 gradients is refused as PyTorch's "
                       "GradScaler refuses it (keep the parameters in f32 and let ct_autocast_set_dtype run the "
                       "ops in f16)",
                       fn, i);
  }
  /* PyTorch: inv_scale = scale.double().reciprocal().float(). */
  double inv = (float)(1.0 / (double)s->scale);
  bool found = false;
  ct_status st = CT_OK;
  /* One flag per device, in the order the devices first appear; each read once. */
  for (int i = 0; i < opt->n && st == CT_OK; i++) {
    ct_tensor *gi = opt->params[i]->grad;
    if (!gi) continue;
    ct_device *d = gi->storage->device;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = opt->params[j]->grad && opt->params[j]->grad->storage->device == d;
    if (seen) continue;
    ct_tensor *flag = NULL;
    st = ct_zeros(&flag, d, CT_I32, 0, NULL);
    for (int j = i; j < opt->n && st == CT_OK; j++) {
      ct_tensor *g = opt->params[j]->grad;
      if (g && g->storage->device == d) st = ct__optim_grad_launch(g, "optim_unscale", inv, flag, fn);
    }
    int32_t f = 0;
    if (st == CT_OK) st = ct_to_host(flag, &f, sizeof f);
    ct_release(flag);
    found = found || f != 0;
  }
  if (st != CT_OK) return st;
  e->stage = CT__SCALER_UNSCALED;
  e->found_inf = found;
  return CT_OK;
}

/* The entry of opt for unscale or step, which move it to `stage` once an iteration:
 * CT_ERR_INVALID_ARGUMENT when it is there already (called twice since the last update). */
static ct_status entry_once(struct ct__scaler_entry **e, ct_grad_scaler *s, ct_optimizer *opt, int stage,
                            const char *fn) {
  CT__CHECK_NOT_NULL(fn, s);
  CT__CHECK_NOT_NULL(fn, opt);
  CT__TRY(entry_of(e, s, opt, fn));
  if ((*e)->stage == stage)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: already called on this optimizer since the last ct_grad_scaler_update()", fn);
  return CT_OK;
}

ct_status ct_grad_scaler_unscale(ct_grad_scaler *s, ct_optimizer *opt) {
  const char *fn = "ct_grad_scaler_unscale";
  struct ct__scaler_entry *e = NULL;
  CT__TRY(entry_once(&e, s, opt, CT__SCALER_UNSCALED, fn));
  if (e->stage == CT__SCALER_STEPPED)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: called after ct_grad_scaler_step() (call it before)", fn);
  return unscale(s, opt, e, fn);
}

ct_status ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt) {
  const char *fn = "ct_grad_scaler_step";
  struct ct__scaler_entry *e = NULL;
  CT__TRY(entry_once(&e, s, opt, CT__SCALER_STEPPED, fn));
  if (e->stage == 0) CT__TRY(unscale(s, opt, e, fn));
  s->skipped = e->found_inf;
  if (!e->found_inf) CT__TRY(ct_optimizer_step(opt));
  e->stage = CT__SCALER_STEPPED;
  return CT_OK;
}

bool ct_grad_scaler_is_step_skipped(const ct_grad_scaler *s) { return s && s->skipped; }

ct_status ct_grad_scaler_update(ct_grad_scaler *s) {
  const char *fn = "ct_grad_scaler_update";
  CT__CHECK_NOT_NULL(fn, s);
  bool found = false, any = false;
  for (int i = 0; i < s->nentries; i++) {
    if (s->entries[i].stage == 0) continue;
    any = true;
    found = found || s->entries[i].found_inf;
  }
  if (!any)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: no inf checks were recorded since the last update (call ct_grad_scaler_step or "
                     "ct_grad_scaler_unscale first)",
                     fn);
  /* torch._amp_update_scale_: the products in double, stored as f32. */
  if (found) {
    s->scale = (float)((double)s->scale * s->backoff_factor);
    s->growth_tracker = 0;
  } else if (s->growth_tracker + 1 == s->growth_interval) {
    float grown = (float)((double)s->scale * s->growth_factor);
    if (isfinite(grown)) s->scale = grown;
    s->growth_tracker = 0;
  } else {
    s->growth_tracker++;
  }
  s->nentries = 0;
  return CT_OK;
}

double ct_grad_scaler_get_scale(const ct_grad_scaler *s) { return s ? s->scale : NAN; }

void ct_grad_scaler_free(ct_grad_scaler *s) {
  if (!s) return;
  free(s->entries);
  free(s);
}
