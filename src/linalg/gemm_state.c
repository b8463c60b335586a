/* The per-device GEMM state: the route, created on a device's first GEMM (from the environment,
 * gemm_env.c), and the tuning in use, loaded on its first CLBlast GEMM (the tuning file or
 * shipped parameters, tuning.c), and the public calls that report them. */
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
  struct ct__gemm_state *s = state;
  if (s->side_queue) {
    clFinish(s->side_queue);
    clReleaseCommandQueue(s->side_queue);
  }
  pthread_mutex_destroy(&s->side_lock);
  pthread_mutex_destroy(&s->tuning_lock);
  free(s);
}

static bool ct__prec_usable(const ct_device *d, int pr) {
  return !(pr == CT__PREC_F16 && !d->props.fp16) && !(pr == CT__PREC_F64 && !d->props.fp64);
}

/* Installs p for pr and records it; false (ct_last_error() says why) when CLBlast refuses. */
static bool ct__install(struct ct__gemm_state *s, ct_device *d, int pr, const ct__gemm_params *p,
                        enum ct__gemm_set kind) {
  if (ct__gemm_params_apply(d, ct__prec_bits(pr), p) != CT_OK) return false;
  s->tuned[pr] = true;
  s->params[pr] = *p;
  s->set[pr] = kind;
  return true;
}

/* Reads, verifies and installs the stored file; true when every set the device can use was
 * installed. Else note says why, and touched marks the precisions it installed anything for. */
static bool ct__load_tuning_file(struct ct__gemm_state *s, ct_device *d, bool *touched, char *note,
                                 size_t note_size) {
  char path[4096], why[400];
  ct__gemm_tuning t;
  if (!ct__gemm_tuning_load(&t, path, sizeof path, d, note, note_size)) return false;
  char esc[512]; /* under a folder from the environment */
  ct__escape(esc, sizeof esc, path);
  /* Every set this device can use must compute right products (tuning.c, Verification). */
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    if (!t.has[pr] || !ct__prec_usable(d, pr)) continue;
    touched[pr] = true;
    if (!ct__gemm_params_verify(d, ct__prec_bits(pr), &t.p[pr], why, sizeof why)) {
      ct__gemm_note(note, note_size, "tuning file %s ignored: %s", esc, why);
      return false;
    }
  }
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    if (!t.has[pr] || !ct__prec_usable(d, pr)) continue;
    if (!ct__install(s, d, pr, &t.p[pr], CT__SET_FILE)) {
      ct__gemm_note(note, note_size, "tuning file %s ignored: %s", esc, ct_last_error());
      return false;
    }
  }
  ct__gemm_note(note, note_size, "tuning file %s applied", esc);
  return true;
}

static const char *ct__set_text(enum ct__gemm_set k) {
  switch (k) {
    case CT__SET_SHIPPED: return "libcltensor's shipped parameters for PoCL CPU devices";
    case CT__SET_CONSERVATIVE:
      return "libcltensor's conservative parameters (CLBlast cannot drop a rejected set's override)";
    case CT__SET_FILE: return "the tuning file's parameters";
    default: return "CLBlast's built-in parameters";
  }
}

/* Without a usable file: the shipped set where there is one, and for every other precision the
 * file installed something for, the conservative set, since CLBlast cannot drop an override
 * (the file's set, verified or not, must not stay in use behind a status that says otherwise).
 * The status then says what each precision runs. */
static void ct__load_fallback(struct ct__gemm_state *s, ct_device *d, const bool *touched, const char *note) {
  const ct__gemm_tuning *shipped = ct__gemm_shipped_tuning(d);
  char extra[600] = "";
  size_t u = 0;
  memset(s->tuned, 0, sizeof s->tuned);
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    s->set[pr] = CT__SET_BUILTIN;
    if (!ct__prec_usable(d, pr)) continue;
    char why[400] = "";
    bool done = shipped && shipped->has[pr] && ct__install(s, d, pr, &shipped->p[pr], CT__SET_SHIPPED);
    if (shipped && shipped->has[pr] && !done)
      ct__gemm_note(extra + u, sizeof extra - u, "; the shipped %s parameters were refused (%s)",
                    ct__prec_names[pr], ct_last_error());
    u = strlen(extra);
    if (!done && touched[pr]) {
      const ct__gemm_params *c = ct__gemm_conservative(d, pr, why, sizeof why);
      done = c && ct__install(s, d, pr, c, CT__SET_CONSERVATIVE);
      if (!done)
        ct__gemm_note(extra + u, sizeof extra - u, "; no verified %s set could replace the file's (%s): "
                      "%s products may be wrong", ct__prec_names[pr], c ? ct_last_error() : why,
                      ct__prec_names[pr]);
      u = strlen(extra);
    }
  }
  /* Shipped sets (the usual case) read as before; a conservative one names each precision. */
  bool library = false, conservative = false;
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    library |= s->set[pr] != CT__SET_BUILTIN;
    conservative |= s->set[pr] == CT__SET_CONSERVATIVE;
  }
  /* There is no source value of its own for the conservative set: it is libcltensor's, not
   * CLBlast's, so "shipped", with the message saying which. */
  s->tuning_source = library ? CT_GEMM_TUNING_SHIPPED : CT_GEMM_TUNING_BUILTIN;
  if (!conservative) {
    ct__gemm_note(s->tuning_message, sizeof s->tuning_message, "%s%s; %s in use", note, extra,
                  ct__set_text(library ? CT__SET_SHIPPED : CT__SET_BUILTIN));
    return;
  }
  char list[700] = "";
  size_t l = 0;
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    if (!ct__prec_usable(d, pr)) continue;
    ct__gemm_note(list + l, sizeof list - l, "%s%s: %s", l ? "; " : "", ct__prec_names[pr],
                  ct__set_text(s->set[pr]));
    l = strlen(list);
  }
  ct__gemm_note(s->tuning_message, sizeof s->tuning_message, "%s%s; in use: %s", note, extra, list);
}

static void ct__load_tuning(struct ct__gemm_state *s, ct_device *d) {
  char note[900];
  bool touched[CT__PREC_COUNT] = {false};
  if (ct__load_tuning_file(s, d, touched, note, sizeof note)) {
    s->tuning_source = CT_GEMM_TUNING_FILE;
    ct__gemm_note(s->tuning_message, sizeof s->tuning_message, "%s", note);
    return;
  }
  ct__load_fallback(s, d, touched, note);
}

void ct__gemm_tuning_ready(struct ct__gemm_state *s, ct_device *d) {
  if (atomic_load_explicit(&s->tuning_ready, memory_order_acquire)) return;
  pthread_mutex_lock(&s->tuning_lock);
  if (!atomic_load_explicit(&s->tuning_ready, memory_order_relaxed)) {
    /* Tuning problems are recorded for ct_gemm_tuning_get(), not reported as this call's
     * failure: keep the caller's last error as it was. */
    char saved[512];
    snprintf(saved, sizeof saved, "%s", ct_last_error());
    ct__load_tuning(s, d);
    if (saved[0]) ct__error(CT_OK, "%s", saved);
    else ct_clear_error();
    atomic_store_explicit(&s->tuning_ready, true, memory_order_release);
  }
  pthread_mutex_unlock(&s->tuning_lock);
}

static ct_status ct__gemm_state_create(void **out, ct_device *d) {
  struct ct__gemm_state *s = calloc(1, sizeof *s);
  if (!s) return ct__error(CT_ERR_OUT_OF_MEMORY, "GEMM state for %s: out of host memory", d->spec);
  if (pthread_mutex_init(&s->tuning_lock, NULL) != 0) {
    free(s);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "GEMM state for %s: cannot create its lock", d->spec);
  }
  if (pthread_mutex_init(&s->side_lock, NULL) != 0) {
    pthread_mutex_destroy(&s->tuning_lock);
    free(s);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "GEMM state for %s: cannot create its lock", d->spec);
  }
  ct__gemm_env_route(s, d);
  /* Nothing to load: ready at once, CLBlast's built-in parameters (the message says why). */
  atomic_init(&s->tuning_ready, !ct__gemm_env_tuning(s));
  atomic_flag_clear(&s->team.lock);
  s->tuning_source = CT_GEMM_TUNING_BUILTIN;
  *out = s;
  return CT_OK;
}

ct_status ct__gemm_state(struct ct__gemm_state **out, ct_device *d) {
  return ct__device_slot((void **)out, d, CT__SLOT_GEMM, ct__gemm_state_create, ct__gemm_state_destroy);
}

ct_status ct__gemm_use_params(ct_device *d, enum ct__prec pr, const ct__gemm_params *p) {
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  /* Loaded first, so that a later load cannot replace the caller's set. */
  ct__gemm_tuning_ready(s, d);
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

ct_status ct_gemm_tuning_get(ct_gemm_tuning_source *source, const char **message, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_gemm_tuning_get", d);
  CT__CHECK_NOT_NULL("ct_gemm_tuning_get", source);
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  ct__gemm_tuning_ready(s, d);
  *source = s->tuning_source;
  if (message) *message = s->tuning_message;
  return CT_OK;
}
