/* The GEMM environment variables: $CLTENSOR_GEMM (the route) and $CLTENSOR_GEMM_TUNING (whether
 * tuning is loaded), read into a device's GEMM state when it is created. docs/GEMM.md has the
 * rules. */
#include <stdlib.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"
#include "linalg/linalg.h"

void ct__gemm_env_route(struct ct__gemm_state *s, const ct_device *d) {
  const char *env = getenv("CLTENSOR_GEMM");
  bool host_ok = ct__gemm_host_available();
  s->route_status = CT_OK;
  s->route = CT__ROUTE_CLBLAST;
  if (!env || !*env || strcasecmp(env, "auto") == 0) {
    if (host_ok && d->props.type == CT_DEVICE_CPU && d->props.host_unified_memory) s->route = CT__ROUTE_HOST;
  } else if (strcasecmp(env, "clblast") == 0) {
    s->route = CT__ROUTE_CLBLAST;
  } else if (strcasecmp(env, "host") == 0) {
    if (!host_ok) {
      s->route_status = CT_ERR_UNSUPPORTED;
      ct__gemm_note(s->route_error, sizeof s->route_error,
               "CLTENSOR_GEMM=host, but libcltensor was built without a host BLAS (configure with "
               "-Dhost_blas=enabled and OpenBLAS installed)");
    } else if (!d->props.host_unified_memory) {
      s->route_status = CT_ERR_UNSUPPORTED;
      ct__gemm_note(s->route_error, sizeof s->route_error,
               "CLTENSOR_GEMM=host, but %s (%s) has no host-unified memory; use auto or clblast", d->spec,
               d->props.name);
    } else {
      s->route = CT__ROUTE_HOST;
    }
  } else {
    char esc[96];
    s->route_status = CT_ERR_INVALID_ARGUMENT;
    ct__gemm_note(s->route_error, sizeof s->route_error,
             "CLTENSOR_GEMM='%s' is not valid: use auto, clblast or host", ct__escape(esc, sizeof esc, env));
  }
}

bool ct__gemm_env_tuning(struct ct__gemm_state *s) {
  const char *tenv = getenv("CLTENSOR_GEMM_TUNING");
  if (tenv && *tenv && strcasecmp(tenv, "auto") != 0 && strcasecmp(tenv, "builtin") != 0) {
    char esc[96];
    ct__escape(esc, sizeof esc, tenv);
    if (s->route_status == CT_OK) {
      s->route_status = CT_ERR_INVALID_ARGUMENT;
      ct__gemm_note(s->route_error, sizeof s->route_error,
                    "CLTENSOR_GEMM_TUNING='%s' is not valid: use auto or builtin", esc);
    }
    ct__gemm_note(s->tuning_message, sizeof s->tuning_message, "CLTENSOR_GEMM_TUNING='%s' is not valid", esc);
    return false;
  }
  if (tenv && strcasecmp(tenv, "builtin") == 0) {
    ct__gemm_note(s->tuning_message, sizeof s->tuning_message,
                  "CLTENSOR_GEMM_TUNING=builtin: CLBlast's built-in parameters in use, no tuning file read");
    return false;
  }
  return true;
}
