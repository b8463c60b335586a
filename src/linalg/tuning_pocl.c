/* Shipped CLBlast GEMM parameters for PoCL's CPU device ("pthread"/"cpu" drivers), used when no
 * tuning file is stored. CLBlast's database has no entry for PoCL, and its generic defaults
 * leave most of a CPU idle. Found by cltensor-tune (2700 s, CPU clock, seed 21: 127 Xgemm and
 * 23 XgemmDirect candidates, starting from the previous shipped set) on PoCL 3.1 / LLVM 15,
 * 2 cores of an AVX-512 AMD EPYC: 47.3 GFLOP/s at 1024^3 against 11.0 for CLBlast's built-in
 * parameters, 20.2 against 4.2 for a batch of 64 64x64 products. KWG then went from 32 to 64:
 * once CLBlast's scratch stopped page-faulting (gemm_clblast.c), timing the Xgemm kernel alone
 * in alternated processes showed 17.4 against 19.3-19.9 ms at 1024^3 (also ~10% at 512 and
 * 2048), a gain the tuner's whole-call timings had lost in the copy kernels' noise.
 * docs/GEMM.md has the figures. */

#include "linalg/linalg.h"

static const ct__gemm_tuning ct__pocl_cpu = {
    .has = {[CT__PREC_F32] = true},
    .p = {[CT__PREC_F32] = {
              /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
              .xgemm = {0, 1, 64, 2, 8, 8, 64, 8, 8, 64, 1, 1, 0, 1, 8, 8},
              /* KWID MDIMAD MDIMCD NDIMBD NDIMCD PADA PADB VWMD VWND WGD */
              .direct = {16, 16, 8, 8, 32, 0, 0, 4, 1, 64},
              .min_indirect = 192,
          }},
};

const ct__gemm_tuning *ct__gemm_shipped_tuning(const ct_device *d) {
  if (ct__device_pocl_cpu(d)) return &ct__pocl_cpu;
  return NULL;
}
