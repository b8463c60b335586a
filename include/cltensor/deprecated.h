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

CT_END_DECLS

#endif /* CT_NO_DEPRECATED */

#endif
