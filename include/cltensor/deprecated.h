/* Deprecated aliases: the names that the API grammar (docs/ARCHITECTURE.md, "API grammar")
 * replaced in 0.1.0, kept for one release so that programs written or built against them keep
 * working. Each old name is still an exported function that does what its new name does
 * (CHANGELOG.md lists them, "Deprecated: old -> new"); they are removed in the release after.
 *
 * They are declared through <cltensor/cltensor.h>, which includes this header: a program that
 * includes only the family headers (<cltensor/tensor.h>, ...) and still uses an old name includes
 * <cltensor/deprecated.h> as well. A use warns where the compiler knows the attribute (GCC,
 * Clang: -Wdeprecated-declarations).
 * Define CT_NO_DEPRECATED before including a cltensor header to hide them all, which checks that
 * a program uses none.
 *
 * Two changed more than their name: the structs they fill gained a leading size field
 * (ct_memory_stats, ct_profile_entry). The exported ct_memory_stats_get and ct_profile_entries
 * still fill the old layouts (ct_memory_stats_v0, ct_profile_entry_v0), which is what binaries
 * built before pass them; a source that calls them is compiled, through the macros below, into
 * a call of the new function with the size set, so it keeps working unchanged too. */
#ifndef CLTENSOR_DEPRECATED_H
#define CLTENSOR_DEPRECATED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cltensor/data.h"
#include "cltensor/dist.h"
#include "cltensor/dtype.h"
#include "cltensor/export.h"
#include "cltensor/linalg.h"
#include "cltensor/optim.h"
#include "cltensor/profile.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

#ifndef CT_NO_DEPRECATED

CT_BEGIN_DECLS

/* Getters and setters: ct_<object>_get_<property> / ct_<object>_set_<property>, out-parameters
 * first. */
CT_DEPRECATED CT_API ct_status ct_autocast_set(ct_dtype dt);                  /* ct_autocast_set_dtype */
CT_DEPRECATED CT_API ct_dtype ct_autocast_get(void);                          /* ct_autocast_get_dtype */
CT_DEPRECATED CT_API int64_t ct_dataloader_epoch(const ct_dataloader *dl);    /* ct_dataloader_get_epoch */
/* ct_gemm_tuning_get(source, message, d): the same, with the device last. */
CT_DEPRECATED CT_API ct_status ct_gemm_tuning_status(ct_device *d, ct_gemm_tuning_source *source,
                                                     const char **message);

/* Predicates: bool ct_<object>_is_<state>. The two that returned int still do. */
CT_DEPRECATED CT_API int ct_dtype_is_float(ct_dtype t);                       /* ct_dtype_is_floating_point */
CT_DEPRECATED CT_API int ct_dist_mpi_available(void);                         /* ct_dist_is_mpi_available */
CT_DEPRECATED CT_API bool ct_profile_enabled(void);                           /* ct_profile_is_enabled */
CT_DEPRECATED CT_API bool ct_dist_work_done(const ct_dist_work *work);        /* ct_dist_work_is_done */
CT_DEPRECATED CT_API bool ct_grad_scaler_step_skipped(const ct_grad_scaler *s); /* ct_grad_scaler_is_step_skipped */

/* Destructors: _free for objects the caller alone owns. */
CT_DEPRECATED CT_API void ct_event_release(ct_event *ev);                     /* ct_event_free */
CT_DEPRECATED CT_API void ct_pinned_release(ct_pinned *p);                    /* ct_pinned_free */

/* Caller-filled structs with a size field. The layouts before it: */
typedef struct ct_memory_stats_v0 {
  uint64_t allocated_bytes;
  uint64_t reserved_bytes;
  uint64_t peak_allocated_bytes;
  uint64_t peak_reserved_bytes;
  uint64_t alloc_count;
  uint64_t cache_hits;
  uint64_t cl_alloc_count;
  uint64_t limit_bytes;
} ct_memory_stats_v0;

typedef struct ct_profile_entry_v0 {
  const ct_device *device;
  char op[64];
  uint64_t calls;
  uint64_t timed_calls;
  double total_ms;
} ct_profile_entry_v0;

/* For binaries built before: ct_device_get_memory_stats into the old layout. */
CT_DEPRECATED CT_API ct_status ct_memory_stats_get(ct_memory_stats_v0 *out, ct_device *d);
/* For binaries built before: ct_profile_get_entries into an array of the old layout. */
CT_DEPRECATED CT_API ct_status ct_profile_entries(ct_profile_entry_v0 *out, size_t capacity, size_t *count);

#ifndef CT_BUILDING_LIBRARY
/* For sources written before: their ct_memory_stats / ct_profile_entry variables have the new
 * layout, so their calls go to the new functions, with the size set as the caller would. */
CT_DEPRECATED static inline ct_memory_stats *ct__deprecated_stats_sized(ct_memory_stats *s) {
  if (s) s->size = sizeof *s;
  return s;
}
/* A function, not a macro over the arguments: each is evaluated once, as in the old call. */
CT_DEPRECATED static inline ct_status ct__deprecated_profile_entries(ct_profile_entry *out, size_t capacity,
                                                                     size_t *count) {
  if (out && capacity > 0) out->size = sizeof *out;
  return ct_profile_get_entries(out, capacity, count);
}
#define ct_memory_stats_get(out, d) ct_device_get_memory_stats(ct__deprecated_stats_sized(out), (d))
#define ct_profile_entries(out, capacity, count) ct__deprecated_profile_entries((out), (capacity), (count))
#endif

CT_END_DECLS

#endif /* CT_NO_DEPRECATED */

#endif
