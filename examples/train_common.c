/* Checkpoints, loss checks and a clock for the training examples (see train_common.h). */
#include "train_common.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double train_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int train_fail(const char *prog, const char *what) {
  fprintf(stderr, "%s: %s: %s\n", prog, what, ct_last_error());
  return 1;
}

ct_status train_checkpoint_save(const char *path, ct_tensor *const *ts, const char *const *names, int n,
                                const ct_optimizer *opt, int64_t step) {
  ct_safetensors *st = NULL;
  uint64_t seed = 0, offset = 0;
  char buf[32];
  ct_status s = ct_safetensors_new(&st);
  for (int i = 0; i < n && s == CT_OK; i++) s = ct_safetensors_set(st, names[i], ts[i]);
  if (s == CT_OK) s = ct_optimizer_save(opt, st);
  if (s == CT_OK) s = ct_rng_get_state(&seed, &offset);
  /* Text metadata: the step and the generator's state are exact 64-bit integers. */
  snprintf(buf, sizeof buf, "%" PRId64, step);
  if (s == CT_OK) s = ct_safetensors_metadata_set(st, "train.step", buf);
  snprintf(buf, sizeof buf, "%" PRIu64, seed);
  if (s == CT_OK) s = ct_safetensors_metadata_set(st, "train.rng_seed", buf);
  snprintf(buf, sizeof buf, "%" PRIu64, offset);
  if (s == CT_OK) s = ct_safetensors_metadata_set(st, "train.rng_offset", buf);
  if (s == CT_OK) s = ct_safetensors_save(st, path);
  ct_safetensors_free(st);
  return s;
}

ct_status train_checkpoint_load(const char *path, ct_device *d, ct_tensor *const *ts, const char *const *names,
                                int n, ct_optimizer *opt, int64_t *step) {
  ct_safetensors *st = NULL;
  ct_status s = ct_safetensors_load(&st, path, d);
  if (s != CT_OK) return s;
  const char *k_step = ct_safetensors_metadata_get(st, "train.step");
  const char *k_seed = ct_safetensors_metadata_get(st, "train.rng_seed");
  const char *k_off = ct_safetensors_metadata_get(st, "train.rng_offset");
  if (!k_step || !k_seed || !k_off) {
    fprintf(stderr, "%s: not a training checkpoint (no train.step/train.rng_seed/train.rng_offset metadata)\n", path);
    ct_safetensors_free(st);
    return CT_ERR_FORMAT;
  }
  /* The parameters are leaves that require grad: written in place with recording off (as
   * PyTorch's load_state_dict under no_grad). */
  const bool grad = ct_set_grad_enabled(false);
  for (int i = 0; i < n && s == CT_OK; i++) {
    ct_tensor *t = NULL;
    s = ct_safetensors_get(&t, st, names[i]);
    if (s == CT_OK) s = ct_copy(ts[i], t);
    ct_release(t);
  }
  ct_set_grad_enabled(grad);
  if (s == CT_OK) s = ct_optimizer_load(opt, st);
  if (s == CT_OK) {
    *step = strtoll(k_step, NULL, 10);
    ct_rng_set_state(strtoull(k_seed, NULL, 10), strtoull(k_off, NULL, 10));
  }
  ct_safetensors_free(st);
  return s;
}

bool train_check_loss(const char *prog, int64_t step, double got, double want, double rtol, bool verbose) {
  const double rel = fabs(got - want) / fabs(want);
  const bool ok = rel <= rtol; /* false for NaN */
  if (verbose || !ok)
    printf("%s: step %3" PRId64 ": loss %.7f, PyTorch %.7f, relative difference %.2e (limit %.0e)%s\n", prog, step,
           got, want, rel, rtol, ok ? "" : "  MISMATCH");
  return ok;
}

const char *train_meta(const char *prog, const ct_safetensors *f, const char *key) {
  const char *v = ct_safetensors_metadata_get(f, key);
  if (!v) fprintf(stderr, "%s: the fixture lacks the metadata \"%s\"\n", prog, key);
  return v;
}

ct_status train_host_copy(void **out, const ct_safetensors *f, const char *name, int64_t *numel) {
  ct_tensor *t = NULL;
  *out = NULL;
  ct_status st = ct_safetensors_get(&t, f, name);
  if (st == CT_OK) {
    *out = malloc(ct_tensor_nbytes(t) ? ct_tensor_nbytes(t) : 1);
    st = *out ? ct_to_host(t, *out, ct_tensor_nbytes(t)) : CT_ERR_OUT_OF_MEMORY;
    if (numel) *numel = ct_numel(t);
  }
  ct_release(t);
  return st;
}

ct_status train_fixture_load(ct_safetensors **out, const char *path, ct_device *d) {
  return ct_safetensors_load_as(out, path, d, CT_F64, ct_device_properties(d)->fp64 ? CT_F64 : CT_F32);
}

ct_status train_host_doubles(double **out, const ct_safetensors *f, const char *name, int64_t *numel) {
  ct_tensor *t = NULL, *c = NULL;
  *out = NULL;
  ct_status st = ct_safetensors_get(&t, f, name);
  /* f64 is read as it is; any other float dtype through f32, which holds it exactly. */
  bool wide = st == CT_OK && ct_tensor_dtype(t) == CT_F64;
  if (st == CT_OK && !wide) st = ct_cast(&c, t, CT_F32);
  if (st == CT_OK) {
    int64_t n = ct_numel(t);
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    float *tmp = wide ? NULL : malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!*out || (!wide && !tmp)) st = CT_ERR_OUT_OF_MEMORY;
    if (st == CT_OK) st = wide ? ct_to_host(t, *out, (size_t)n * sizeof **out) : ct_to_host(c, tmp, (size_t)n * sizeof *tmp);
    for (int64_t i = 0; st == CT_OK && !wide && i < n; i++) (*out)[i] = tmp[i];
    free(tmp);
    if (numel) *numel = n;
    if (st != CT_OK) free(*out), *out = NULL;
  }
  ct_release(c);
  ct_release(t);
  return st;
}

ct_status train_item(double *v, const ct_tensor *t) {
  float f = 0;
  ct_status s = ct_to_host(t, &f, sizeof f);
  *v = f;
  return s;
}

double train_peak_mib(ct_device *d) {
  ct_memory_stats ms = {.size = sizeof ms};
  if (ct_device_get_memory_stats(&ms, d) != CT_OK) return NAN;
  return (double)ms.peak_allocated_bytes / (1024.0 * 1024.0);
}
