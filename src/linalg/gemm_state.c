/* The per-device GEMM state: the route and the tuning in use, created on a device's first GEMM
 * (from the environment, gemm_env.c, and the tuning file or shipped parameters, tuning.c), and
 * the public calls that report them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clblast_c.h>

#include "core/env.h"
#include "core/error.h"
#include "linalg/linalg.h"

/* snprintf for messages that may be cut at the buffer's end (paths can be long). */
void ct__gemm_note(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
}

static void ct__gemm_state_destroy(ct_device *d, void *state) {
  (void)d;
  /* CLBlast keeps compiled programs, which hold the device's context, in a process-wide cache:
   * drop them so that ct_shutdown() really releases the context. Its parameter overrides stay. */
  pthread_mutex_lock(&ct__clblast_lock);
  CLBlastClearCache();
  pthread_mutex_unlock(&ct__clblast_lock);
  free(state);
}

/* Installs one tuning set per precision the device supports. */
static ct_status ct__apply_tuning(struct ct__gemm_state *s, ct_device *d, const ct__gemm_tuning *t) {
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    if (!t->has[pr]) continue;
    if ((pr == CT__PREC_F16 && !d->props.fp16) || (pr == CT__PREC_F64 && !d->props.fp64)) continue;
    CT__TRY(ct__gemm_params_apply(d, ct__prec_bits(pr), &t->p[pr]));
    s->tuned[pr] = true;
    s->params[pr] = t->p[pr];
  }
  return CT_OK;
}

/* Reads the stored tuning file; returns true when it was applied, else writes why not. */
static bool ct__load_tuning_file(struct ct__gemm_state *s, ct_device *d, char *note, size_t note_size) {
  char path[4096];
  ct__gemm_tuning t;
  if (!ct__gemm_tuning_load(&t, path, sizeof path, d, note, note_size)) return false;
  char esc[512]; /* under a folder from the environment */
  ct__escape(esc, sizeof esc, path);
  if (ct__apply_tuning(s, d, &t) != CT_OK) {
    ct__gemm_note(note, note_size, "tuning file %s ignored: %s", esc, ct_last_error());
    memset(s->tuned, 0, sizeof s->tuned);
    return false;
  }
  ct__gemm_note(note, note_size, "tuning file %s applied", esc);
  return true;
}

static void ct__load_tuning(struct ct__gemm_state *s, ct_device *d) {
  char note[900];
  if (ct__load_tuning_file(s, d, note, sizeof note)) {
    s->tuning_source = CT_GEMM_TUNING_FILE;
    ct__gemm_note(s->tuning_message, sizeof s->tuning_message, "%s", note);
    return;
  }
  const ct__gemm_tuning *shipped = ct__gemm_shipped_tuning(d);
  if (shipped && ct__apply_tuning(s, d, shipped) == CT_OK) {
    s->tuning_source = CT_GEMM_TUNING_SHIPPED;
    ct__gemm_note(s->tuning_message, sizeof s->tuning_message, "%s; libcltensor's shipped parameters for PoCL CPU "
             "devices in use", note);
    return;
  }
  if (shipped) {
    memset(s->tuned, 0, sizeof s->tuned);
    ct__gemm_note(s->tuning_message, sizeof s->tuning_message, "%s; the shipped parameters were refused (%s); "
             "CLBlast's built-in parameters in use", note, ct_last_error());
  } else {
    ct__gemm_note(s->tuning_message, sizeof s->tuning_message, "%s; CLBlast's built-in parameters in use", note);
  }
  s->tuning_source = CT_GEMM_TUNING_BUILTIN;
}

static ct_status ct__gemm_state_create(void **out, ct_device *d) {
  struct ct__gemm_state *s = calloc(1, sizeof *s);
  if (!s) return ct__error(CT_ERR_OUT_OF_MEMORY, "GEMM state for %s: out of host memory", d->spec);
  /* Tuning problems are recorded for ct_gemm_tuning_status(), not reported as this call's
   * failure: keep the caller's last error as it was. */
  char saved[512];
  snprintf(saved, sizeof saved, "%s", ct_last_error());
  ct__gemm_env_route(s, d);
  if (ct__gemm_env_tuning(s)) ct__load_tuning(s, d);
  if (saved[0]) ct__error(CT_OK, "%s", saved);
  else ct_clear_error();
  *out = s;
  return CT_OK;
}

ct_status ct__gemm_state(struct ct__gemm_state **out, ct_device *d) {
  return ct__device_slot((void **)out, d, CT__SLOT_GEMM, ct__gemm_state_create, ct__gemm_state_destroy);
}

ct_status ct__gemm_use_params(ct_device *d, enum ct__prec pr, const ct__gemm_params *p) {
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  CT__TRY(ct__gemm_params_apply(d, ct__prec_bits(pr), p));
  s->tuned[pr] = true;
  s->params[pr] = *p;
  return CT_OK;
}

ct_status ct_gemm_route_get(ct_gemm_route *route, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_gemm_route_get", route);
  CT__CHECK_NOT_NULL("ct_gemm_route_get", d);
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  if (s->route_status != CT_OK) return ct__error(s->route_status, "ct_gemm_route_get: %s", s->route_error);
  *route = (ct_gemm_route)s->route;
  return CT_OK;
}

const char *ct_gemm_route_name(ct_gemm_route route) {
  switch (route) {
    case CT_GEMM_ROUTE_CLBLAST: return "clblast";
    case CT_GEMM_ROUTE_HOST: return "host";
    default: return "invalid";
  }
}

ct_status ct_gemm_tuning_status(ct_device *d, ct_gemm_tuning_source *source, const char **message) {
  CT__CHECK_NOT_NULL("ct_gemm_tuning_status", d);
  CT__CHECK_NOT_NULL("ct_gemm_tuning_status", source);
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  *source = s->tuning_source;
  if (message) *message = s->tuning_message;
  return CT_OK;
}
