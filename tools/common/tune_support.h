/* INTERNAL TO CLTENSOR'S TOOLS: not libcltensor's API, not installed, no stability promise.
 *
 * cltensor-tune needs a few GEMM tuning internals of the library (parameter sets, their checks,
 * the tuning file's path, parser and writer, installing a candidate set). The tools reach them
 * only through this header, which includes no private header of the library: its types mirror
 * those of src/linalg/linalg.h (ct__gemm_params, ct__gemm_tuning, the parameter indices), and
 * tune_support.c, built with the library's static objects (cltensor_internal) into the tools'
 * static library, checks at compile time that they stay identical, then forwards each call. */
#ifndef CT_TOOLS_TUNE_SUPPORT_H
#define CT_TOOLS_TUNE_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "cltensor/cltensor.h"

/* CLBlast 1.5's GEMM parameters, in CLBlast's order: the indirect kernel "Xgemm", the
 * single-kernel "XgemmDirect", and the "GemmRoutine" crossover (docs/GEMM.md). */
#define CTT_XGEMM_NPARAMS 16
#define CTT_XDIRECT_NPARAMS 10
extern const char *const *const ctt_xgemm_names;    /* CTT_XGEMM_NPARAMS names */
extern const char *const *const ctt_xdirect_names;  /* CTT_XDIRECT_NPARAMS names */
enum {
  CTT_X_GEMMK, CTT_X_KREG, CTT_X_KWG, CTT_X_KWI, CTT_X_MDIMA, CTT_X_MDIMC, CTT_X_MWG, CTT_X_NDIMB,
  CTT_X_NDIMC, CTT_X_NWG, CTT_X_SA, CTT_X_SB, CTT_X_STRM, CTT_X_STRN, CTT_X_VWM, CTT_X_VWN
};
enum {
  CTT_D_KWID, CTT_D_MDIMAD, CTT_D_MDIMCD, CTT_D_NDIMBD, CTT_D_NDIMCD, CTT_D_PADA, CTT_D_PADB,
  CTT_D_VWMD, CTT_D_VWND, CTT_D_WGD
};

typedef struct ctt_gemm_params {
  size_t xgemm[CTT_XGEMM_NPARAMS];
  size_t direct[CTT_XDIRECT_NPARAMS];
  size_t min_indirect;   /* GemmRoutine XGEMM_MIN_INDIRECT_SIZE */
} ctt_gemm_params;

/* Precisions a tuning file may hold, in file order. */
enum ctt_prec { CTT_PREC_F16, CTT_PREC_F32, CTT_PREC_F64, CTT_PREC_COUNT };

typedef struct ctt_gemm_tuning {
  bool has[CTT_PREC_COUNT];
  ctt_gemm_params p[CTT_PREC_COUNT];
} ctt_gemm_tuning;

/* Each forwards to the library's function of the same name with ct__ for ctt_ (documented in
 * src/linalg/linalg.h); the statuses are the library's, the message in ct_last_error(). */
bool ctt_gemm_params_valid(const ctt_gemm_params *p, const ct_device_props *props, size_t elem_size, char *why,
                           size_t why_size);
const ctt_gemm_tuning *ctt_gemm_shipped_tuning(ct_device *d);
ct_status ctt_gemm_tuning_path(char *buf, size_t size, ct_device *d);
ct_status ctt_gemm_tuning_parse(ctt_gemm_tuning *out, const char *text, const ct_device_props *props, char *why,
                                size_t why_size);
ct_status ctt_gemm_tuning_save(const char *path, ct_device *d, const ctt_gemm_tuning *t, const char *comment);
/* Installs p for precision pr on d and makes d's GEMMs plan for it (not safe while other
 * threads use d). */
ct_status ctt_gemm_use_params(ct_device *d, enum ctt_prec pr, const ctt_gemm_params *p);

#endif
