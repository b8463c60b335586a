/* Deprecated aliases: the names that the API grammar (docs/ARCHITECTURE.md, "API grammar")
 * replaced in 0.1.0, kept for one release so that programs written or built against them keep
 * working. Each old name is still an exported function that does what its new name does
 * (CHANGELOG.md lists them, "Deprecated: old -> new"); they are removed in the release after.
 *
 * A use warns where the compiler knows the attribute (GCC, Clang: -Wdeprecated-declarations).
 * Define CT_NO_DEPRECATED before including a cltensor header to hide them all, which checks that
 * a program uses none. */
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

CT_END_DECLS

#endif /* CT_NO_DEPRECATED */

#endif
