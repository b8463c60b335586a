/* Training checkpoints (module.h): a model's state_dict, its optimizer's and scheduler's state,
 * the step and the global generator in one safetensors file, and back. Each part has its own
 * saver and loader (state_dict.c, optim/checkpoint.c, optim/sched.c); this file only puts them
 * in one container and makes loading all-or-nothing across the parts, which each loader alone
 * is for its own part. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cltensor/random.h"
#include "core/error.h"
#include "io/io.h"
#include "module/module.h"
#include "optim/optim.h"

/* The optimizer's tensors are "optim.<i>.<state>" (optim/checkpoint.c); a model entry under
 * "optim." could collide with them, so saving refuses one and loading leaves them out. */
static const char OPTIM_PREFIX[] = "optim.";

static bool is_optim_entry(const char *name) { return strncmp(name, OPTIM_PREFIX, sizeof OPTIM_PREFIX - 1) == 0; }

static ct_status set_u64(ct_safetensors *st, const char *key, uint64_t v) {
  char buf[24]; /* text: a double would round 64-bit counts */
  snprintf(buf, sizeof buf, "%" PRIu64, v);
  return ct_safetensors_metadata_set(st, key, buf);
}

ct_status ct_checkpoint_save(const ct_module *m, const ct_optimizer *opt, const ct_lr_scheduler *sched, int64_t step,
                             const char *path) {
  static const char fn[] = "ct_checkpoint_save";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, path);
  if (step < 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: step is %" PRId64 " (expected >= 0)", fn, step);
  ct_safetensors *st;
  uint64_t seed = 0, offset = 0;
  CT__TRY(ct_module_state_dict(&st, m));
  ct_status s = CT_OK;
  for (size_t i = 0; i < ct_safetensors_count(st) && s == CT_OK; i++)
    if (is_optim_entry(ct_safetensors_name(st, i)))
      s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the model's state_dict entry '%s' begins with \"%s\", which names "
                    "the optimizer's entries in a checkpoint (rename the child)", fn, ct_safetensors_name(st, i),
                    OPTIM_PREFIX);
  if (s == CT_OK && opt) s = ct_optimizer_save(opt, st);
  if (s == CT_OK && sched) s = ct_lr_scheduler_save(sched, st);
  if (s == CT_OK) s = ct_rng_get_state(&seed, &offset);
  if (s == CT_OK) s = set_u64(st, "train.step", (uint64_t)step);
  if (s == CT_OK) s = set_u64(st, "train.rng_seed", seed);
  if (s == CT_OK) s = set_u64(st, "train.rng_offset", offset);
  if (s == CT_OK) s = ct_safetensors_save(st, path);
  if (s != CT_OK) ct__error_append(" (in %s)", fn);
  ct_safetensors_free(st);
  return s;
}

/* The file's model entries: every tensor but the optimizer's, as references. */
static ct_status model_entries(ct_safetensors **out, const ct_safetensors *file) {
  ct_safetensors *st;
  CT__TRY(ct_safetensors_new(&st));
  ct_status s = CT_OK;
  for (size_t i = 0; i < ct_safetensors_count(file) && s == CT_OK; i++) {
    const char *name = ct_safetensors_name(file, i);
    ct_tensor *t = NULL;
    if (is_optim_entry(name)) continue;
    s = ct_safetensors_at(&t, file, i);
    if (s == CT_OK) s = ct_safetensors_set(st, name, t);
    ct_release(t);
  }
  if (s != CT_OK) ct_safetensors_free(st), st = NULL;
  *out = st;
  return s;
}

ct_status ct_checkpoint_load(int64_t *step, ct_module *m, ct_optimizer *opt, ct_lr_scheduler *sched,
                             const char *path) {
  static const char fn[] = "ct_checkpoint_load";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, path);
  ct_device *d = NULL;
  ct_safetensors *file = NULL, *model = NULL;
  ct__optim_loaded *opt_state = NULL;
  ct__sched_loaded *sched_state = NULL;
  int64_t at = 0;
  uint64_t seed = 0, offset = 0;
  /* Everything is read and checked first (the optimizer's state copied onto its devices, the
   * scheduler's read, the model's entries matched strictly); then the model's values are copied
   * (only a device failure can stop that, leaving the rest as it was), and the optimizer and
   * scheduler take what was read, which cannot fail. */
  ct_status s = ct__module_home(&d, m);
  if (s == CT_OK) s = ct_safetensors_load(&file, path, d);
  if (s == CT_OK) s = ct__meta_i64(&at, file, "train.step", 0, INT64_MAX, fn);
  if (s == CT_OK) s = ct__meta_u64(&seed, file, "train.rng_seed", fn);
  if (s == CT_OK) s = ct__meta_u64(&offset, file, "train.rng_offset", fn);
  if (s == CT_OK) s = model_entries(&model, file);
  if (s == CT_OK) s = ct__module_load_state(m, model, true, true, fn);
  if (s == CT_OK && opt) s = ct__optim_read(&opt_state, opt, file, fn);
  if (s == CT_OK && sched) s = ct__sched_read(&sched_state, sched, file, fn);
  if (s == CT_OK) s = ct__module_load_state(m, model, true, false, fn);
  if (s == CT_OK) {
    if (opt) ct__optim_apply(opt, opt_state), opt_state = NULL;
    if (sched) ct__sched_apply(sched, sched_state), sched_state = NULL;
    ct_rng_set_state(seed, offset);
    if (step) *step = at;
  } else {
    ct__error_append(" (in %s, loading %s)", fn, path);
  }
  ct__sched_loaded_free(sched_state);
  ct__optim_loaded_free(opt_state);
  ct_safetensors_free(model);
  ct_safetensors_free(file);
  return s;
}
