/* Shipped CLBlast GEMM parameters for PoCL's CPU device ("pthread"/"cpu" drivers), used when no
 * tuning file is stored. CLBlast's database has no entry for PoCL, and its generic defaults
 * leave most of a CPU idle. Found by cltensor-tune (900 s, CPU clock, seed 12) on PoCL 3.1 /
 * LLVM 15, 2 cores of an AVX-512 AMD EPYC shared with other jobs; the Xgemm set started from a
 * short random search's result (MWG=NWG=64 KWG=32 VWM=4 VWN=2 SA=SB=1) and won as its mutation.
 * docs/GEMM.md has the figures. */
#include <string.h>

#include "linalg/linalg.h"

static const ct__gemm_tuning ct__pocl_cpu = {
    .has = {[CT__PREC_F32] = true},
    .p = {[CT__PREC_F32] = {
              /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
              .xgemm = {0, 1, 32, 2, 8, 8, 64, 8, 8, 64, 0, 1, 0, 0, 4, 4},
              /* KWID MDIMAD MDIMCD NDIMBD NDIMCD PADA PADB VWMD VWND WGD */
              .direct = {8, 32, 16, 32, 16, 1, 0, 1, 2, 64},
              .min_indirect = 128,
          }},
};

const ct__gemm_tuning *ct__gemm_shipped_tuning(const ct_device *d) {
  if (d->props.type == CT_DEVICE_CPU && strstr(d->props.platform_name, "Portable Computing Language"))
    return &ct__pocl_cpu;
  return NULL;
}
