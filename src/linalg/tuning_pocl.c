/* Shipped CLBlast GEMM parameters for PoCL's CPU device ("pthread"/"cpu" drivers), used when no
 * tuning file is stored. CLBlast's database has no entry for PoCL, and its generic defaults
 * leave most of a CPU idle; these were found by cltensor-tune on PoCL 3.1 (LLVM 15) on an
 * AVX-512 x86-64 CPU. See docs/GEMM.md for the measurement. */
#include <string.h>

#include "linalg/linalg.h"

static const ct__gemm_tuning ct__pocl_cpu = {
    .has = {[CT__PREC_F32] = true},
    .p = {[CT__PREC_F32] = {
              /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
              .xgemm = {0, 1, 32, 2, 8, 8, 64, 8, 8, 64, 1, 1, 0, 0, 4, 2},
              /* KWID MDIMAD MDIMCD NDIMBD NDIMCD PADA PADB VWMD VWND WGD */
              .direct = {2, 8, 8, 8, 8, 1, 1, 1, 1, 16},
              .min_indirect = 896,
          }},
};

const ct__gemm_tuning *ct__gemm_shipped_tuning(const ct_device *d) {
  if (d->props.type == CT_DEVICE_CPU && strstr(d->props.platform_name, "Portable Computing Language"))
    return &ct__pocl_cpu;
  return NULL;
}
