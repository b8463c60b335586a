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

ct_status ct_memory_stats_get(ct_memory_stats_v0 *out, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_memory_stats_get", out);
  ct_memory_stats s = {.size = sizeof s};
  CT__TRY(ct_device_get_memory_stats(&s, d));
  *out = (ct_memory_stats_v0){s.allocated_bytes, s.reserved_bytes, s.peak_allocated_bytes, s.peak_reserved_bytes,
                              s.alloc_count,     s.cache_hits,     s.cl_alloc_count,       s.limit_bytes};
  return CT_OK;
}

ct_status ct_profile_entries(ct_profile_entry_v0 *out, size_t capacity, size_t *count) {
  if (!out || capacity == 0) return ct_profile_get_entries(NULL, capacity, count); /* its checks */
  /* The rows in the new layout first, then each copied into the old one. */
  ct_profile_entry *rows = calloc(capacity, sizeof *rows);
  if (!rows) {
    if (count) *count = 0;
    return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_profile_entries: out of host memory for %zu rows", capacity);
  }
  rows[0].size = sizeof *rows;
  ct_status st = ct_profile_get_entries(rows, capacity, count);
  for (size_t i = 0; st == CT_OK && i < capacity && i < *count; i++) {
    out[i].device = rows[i].device;
    memcpy(out[i].op, rows[i].op, sizeof out[i].op);
    out[i].calls = rows[i].calls;
    out[i].timed_calls = rows[i].timed_calls;
    out[i].total_ms = rows[i].total_ms;
  }
  free(rows);
  return st;
}
