/* Loss checks, fixture helpers and a clock for the character GPT training example (train_common.h). */
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

double train_peak_mib(ct_device *d) {
  ct_memory_stats ms = {.size = sizeof ms};
  if (ct_device_get_memory_stats(&ms, d) != CT_OK) return NAN;
  return (double)ms.peak_allocated_bytes / (1024.0 * 1024.0);
}
