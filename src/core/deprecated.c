/* The deprecated aliases of include/cltensor/deprecated.h: each calls its new name, so an old
 * name behaves as the new one (messages name the new function). Removing them next release is
 * deleting this file and that header. They call the public functions as the rest of the library
 * does (api_rename.h), so only a call from outside goes through the scope wrappers. */
#include <stdlib.h>
#include <string.h>

#include "cltensor/cltensor.h"
#include "core/error.h"

ct_status ct_autocast_set(ct_dtype dt) { return ct_autocast_set_dtype(dt); }
ct_dtype ct_autocast_get(void) { return ct_autocast_get_dtype(); }
int64_t ct_dataloader_epoch(const ct_dataloader *dl) { return ct_dataloader_get_epoch(dl); }
ct_status ct_gemm_tuning_status(ct_device *d, ct_gemm_tuning_source *source, const char **message) {
  return ct_gemm_tuning_get(source, message, d);
}

int ct_dtype_is_float(ct_dtype t) { return ct_dtype_is_floating_point(t); }
int ct_dist_mpi_available(void) { return ct_dist_is_mpi_available(); }
bool ct_profile_enabled(void) { return ct_profile_is_enabled(); }
bool ct_dist_work_done(const ct_dist_work *work) { return ct_dist_work_is_done(work); }
bool ct_grad_scaler_step_skipped(const ct_grad_scaler *s) { return ct_grad_scaler_is_step_skipped(s); }

void ct_event_release(ct_event *ev) { ct_event_free(ev); }
void ct_pinned_release(ct_pinned *p) { ct_pinned_free(p); }
