/* The tools' window on the library's GEMM tuning internals (tune_support.h). */
#include <stddef.h>
#include <string.h>

#include "linalg/linalg.h"
#include "tune_support.h"

/* The mirrored types must stay identical to the library's: the calls below pass them through
 * by pointer. */
#define CTT_SAME(a, b) _Static_assert((long)(a) == (long)(b), #a " != " #b)
CTT_SAME(CTT_XGEMM_NPARAMS, CT__XGEMM_NPARAMS);
CTT_SAME(CTT_XDIRECT_NPARAMS, CT__XDIRECT_NPARAMS);
CTT_SAME(CTT_X_GEMMK, CT__X_GEMMK);
CTT_SAME(CTT_X_KREG, CT__X_KREG);
CTT_SAME(CTT_X_KWG, CT__X_KWG);
CTT_SAME(CTT_X_KWI, CT__X_KWI);
CTT_SAME(CTT_X_MDIMA, CT__X_MDIMA);
CTT_SAME(CTT_X_MDIMC, CT__X_MDIMC);
CTT_SAME(CTT_X_MWG, CT__X_MWG);
CTT_SAME(CTT_X_NDIMB, CT__X_NDIMB);
CTT_SAME(CTT_X_NDIMC, CT__X_NDIMC);
CTT_SAME(CTT_X_NWG, CT__X_NWG);
CTT_SAME(CTT_X_SA, CT__X_SA);
CTT_SAME(CTT_X_SB, CT__X_SB);
CTT_SAME(CTT_X_STRM, CT__X_STRM);
CTT_SAME(CTT_X_STRN, CT__X_STRN);
CTT_SAME(CTT_X_VWM, CT__X_VWM);
CTT_SAME(CTT_X_VWN, CT__X_VWN);
CTT_SAME(CTT_D_KWID, CT__D_KWID);
CTT_SAME(CTT_D_MDIMAD, CT__D_MDIMAD);
CTT_SAME(CTT_D_MDIMCD, CT__D_MDIMCD);
CTT_SAME(CTT_D_NDIMBD, CT__D_NDIMBD);
CTT_SAME(CTT_D_NDIMCD, CT__D_NDIMCD);
CTT_SAME(CTT_D_PADA, CT__D_PADA);
CTT_SAME(CTT_D_PADB, CT__D_PADB);
CTT_SAME(CTT_D_VWMD, CT__D_VWMD);
CTT_SAME(CTT_D_VWND, CT__D_VWND);
CTT_SAME(CTT_D_WGD, CT__D_WGD);
CTT_SAME(CTT_PREC_F16, CT__PREC_F16);
CTT_SAME(CTT_PREC_F32, CT__PREC_F32);
CTT_SAME(CTT_PREC_F64, CT__PREC_F64);
CTT_SAME(CTT_PREC_COUNT, CT__PREC_COUNT);
CTT_SAME(sizeof(ctt_gemm_params), sizeof(ct__gemm_params));
CTT_SAME(offsetof(ctt_gemm_params, direct), offsetof(ct__gemm_params, direct));
CTT_SAME(offsetof(ctt_gemm_params, min_indirect), offsetof(ct__gemm_params, min_indirect));
CTT_SAME(sizeof(ctt_gemm_tuning), sizeof(ct__gemm_tuning));
CTT_SAME(offsetof(ctt_gemm_tuning, p), offsetof(ct__gemm_tuning, p));

const char *const *const ctt_xgemm_names = ct__xgemm_names;
const char *const *const ctt_xdirect_names = ct__xdirect_names;

/* The conversions copy, so that no object is read through a pointer to another struct type. */
static ct__gemm_params to_lib(const ctt_gemm_params *p) {
  ct__gemm_params q;
  memcpy(&q, p, sizeof q);
  return q;
}

bool ctt_gemm_params_valid(const ctt_gemm_params *p, const ct_device_props *props, size_t elem_size, char *why,
                           size_t why_size) {
  ct__gemm_params q = to_lib(p);
  return ct__gemm_params_valid(&q, props, elem_size, why, why_size);
}

const ctt_gemm_tuning *ctt_gemm_shipped_tuning(ct_device *d) {
  static ctt_gemm_tuning copy;   /* the shipped sets are constant: one copy serves every call */
  const ct__gemm_tuning *t = ct__gemm_shipped_tuning(d);
  if (!t) return NULL;
  memcpy(&copy, t, sizeof copy);
  return &copy;
}

ct_status ctt_gemm_tuning_path(char *buf, size_t size, ct_device *d) { return ct__gemm_tuning_path(buf, size, d); }

ct_status ctt_gemm_tuning_parse(ctt_gemm_tuning *out, const char *text, const ct_device_props *props, char *why,
                                size_t why_size) {
  ct__gemm_tuning t;
  ct_status st = ct__gemm_tuning_parse(&t, text, props, why, why_size);
  memcpy(out, &t, sizeof *out);
  return st;
}

ct_status ctt_gemm_tuning_save(const char *path, ct_device *d, const ctt_gemm_tuning *t, const char *comment) {
  ct__gemm_tuning q;
  memcpy(&q, t, sizeof q);
  return ct__gemm_tuning_save(path, d, &q, comment);
}

ct_status ctt_gemm_use_params(ct_device *d, enum ctt_prec pr, const ctt_gemm_params *p) {
  ct__gemm_params q = to_lib(p);
  return ct__gemm_use_params(d, (enum ct__prec)pr, &q);
}
