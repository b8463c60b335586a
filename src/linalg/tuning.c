/* CLBlast GEMM parameter sets: constraints, installation, and the per-device tuning file. */
#include <clblast_c.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cltensor/version.h"
#include "core/atomic_file.h"
#include "core/env.h"
#include "core/error.h"
#include "kernel/cache.h"
#include "linalg/linalg.h"
#include "cltensor/dtype.h"

const char *const ct__xgemm_names[CT__XGEMM_NPARAMS] = {
    "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
    "NDIMC", "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN"};
const char *const ct__xdirect_names[CT__XDIRECT_NPARAMS] = {
    "KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB", "VWMD", "VWND", "WGD"};
static const char *const ct__routine_name = "XGEMM_MIN_INDIRECT_SIZE";

const char *const ct__prec_names[CT__PREC_COUNT] = {"f16", "f32", "f64"};

int ct__prec_bits(enum ct__prec p) { return p == CT__PREC_F16 ? 16 : p == CT__PREC_F32 ? 32 : 64; }

/* ---- Constraints ---- */

static bool ct__fail(char *why, size_t n, const char *fmt, ...) CT__PRINTF(3, 4);
static bool ct__fail(char *why, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
  return false;
}

static bool ct__pow2(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

/* The largest value any parameter may take: bounds the products below far from overflow. */
#define CT__PARAM_MAX 4096u
/* m*n*k is compared with XGEMM_MIN_INDIRECT_SIZE^3 in 64 bits. */
#define CT__MIN_INDIRECT_MAX (1u << 20)

bool ct__gemm_params_valid(const ct__gemm_params *p, const ct_device_props *props, size_t elem_size,
                           char *why, size_t n) {
  const size_t *x = p->xgemm, *d = p->direct;
  for (int i = 0; i < CT__XGEMM_NPARAMS; i++) {
    bool flag = i == CT__X_GEMMK || i == CT__X_SA || i == CT__X_SB || i == CT__X_STRM || i == CT__X_STRN;
    if (flag ? x[i] > 1 : (x[i] == 0 || x[i] > CT__PARAM_MAX))
      return ct__fail(why, n, "Xgemm %s=%zu is out of range (%s)", ct__xgemm_names[i], x[i],
                      flag ? "0 or 1" : "1..4096");
  }
  for (int i = 0; i < CT__XDIRECT_NPARAMS; i++) {
    bool flag = i == CT__D_PADA || i == CT__D_PADB;
    if (flag ? d[i] > 1 : (d[i] == 0 || d[i] > CT__PARAM_MAX))
      return ct__fail(why, n, "XgemmDirect %s=%zu is out of range (%s)", ct__xdirect_names[i], d[i],
                      flag ? "0 or 1" : "1..4096");
  }
  if (p->min_indirect > CT__MIN_INDIRECT_MAX)
    return ct__fail(why, n, "GemmRoutine %s=%zu is above %u", ct__routine_name, p->min_indirect,
                    CT__MIN_INDIRECT_MAX);

  /* Xgemm, as CLBlast's tuner constrains it (src/tuning/kernels/xgemm.hpp). */
  size_t mdimc = x[CT__X_MDIMC], ndimc = x[CT__X_NDIMC], mwg = x[CT__X_MWG], nwg = x[CT__X_NWG];
  size_t kwg = x[CT__X_KWG], vwm = x[CT__X_VWM], vwn = x[CT__X_VWN];
  if (!ct__pow2(vwm) || vwm > 16 || !ct__pow2(vwn) || vwn > 16)
    return ct__fail(why, n, "Xgemm VWM=%zu and VWN=%zu must be OpenCL vector widths (1, 2, 4, 8, 16)", vwm, vwn);
  if (kwg % x[CT__X_KWI])
    return ct__fail(why, n, "Xgemm KWG=%zu is not a multiple of KWI=%zu", kwg, x[CT__X_KWI]);
  if (mwg % (mdimc * vwm))
    return ct__fail(why, n, "Xgemm MWG=%zu is not a multiple of MDIMC*VWM = %zu", mwg, mdimc * vwm);
  if (nwg % (ndimc * vwn))
    return ct__fail(why, n, "Xgemm NWG=%zu is not a multiple of NDIMC*VWN = %zu", nwg, ndimc * vwn);
  if (mwg % (x[CT__X_MDIMA] * vwm))
    return ct__fail(why, n, "Xgemm MWG=%zu is not a multiple of MDIMA*VWM = %zu", mwg, x[CT__X_MDIMA] * vwm);
  if (nwg % (x[CT__X_NDIMB] * vwn))
    return ct__fail(why, n, "Xgemm NWG=%zu is not a multiple of NDIMB*VWN = %zu", nwg, x[CT__X_NDIMB] * vwn);
  if (x[CT__X_GEMMK] == 0) {
    size_t threads = mdimc * ndimc;
    if (threads % x[CT__X_MDIMA] || threads % x[CT__X_NDIMB])
      return ct__fail(why, n, "Xgemm MDIMC*NDIMC = %zu is not a multiple of MDIMA=%zu and NDIMB=%zu",
                      threads, x[CT__X_MDIMA], x[CT__X_NDIMB]);
    size_t kdima = threads / x[CT__X_MDIMA], kdimb = threads / x[CT__X_NDIMB];
    if (kwg % kdima || kwg % kdimb)
      return ct__fail(why, n, "Xgemm KWG=%zu is not a multiple of MDIMC*NDIMC/MDIMA = %zu and of "
                      "MDIMC*NDIMC/NDIMB = %zu", kwg, kdima, kdimb);
  } else {
    if (x[CT__X_KREG] % vwn)
      return ct__fail(why, n, "Xgemm KREG=%zu is not a multiple of VWN=%zu (GEMMK=1)", x[CT__X_KREG], vwn);
    if (x[CT__X_SA] || x[CT__X_SB] || x[CT__X_STRM] || x[CT__X_STRN] || x[CT__X_MDIMA] != mdimc ||
        x[CT__X_NDIMB] != ndimc)
      return ct__fail(why, n, "Xgemm with GEMMK=1 needs SA=SB=STRM=STRN=0, MDIMA=MDIMC and NDIMB=NDIMC");
  }
  if (mdimc * ndimc > props->max_work_group_size)
    return ct__fail(why, n, "Xgemm MDIMC*NDIMC = %zu exceeds the device's work-group limit %zu",
                    mdimc * ndimc, props->max_work_group_size);
  size_t local = elem_size * (x[CT__X_SA] * kwg * mwg + x[CT__X_SB] * kwg * nwg);
  if (local > props->local_mem_bytes)
    return ct__fail(why, n, "Xgemm needs %zu bytes of local memory; the device has %llu", local,
                    (unsigned long long)props->local_mem_bytes);

  /* XgemmDirect (src/tuning/kernels/xgemm_direct.hpp). */
  size_t wgd = d[CT__D_WGD], mdimcd = d[CT__D_MDIMCD], ndimcd = d[CT__D_NDIMCD];
  size_t vwmd = d[CT__D_VWMD], vwnd = d[CT__D_VWND];
  if (!ct__pow2(vwmd) || vwmd > 16 || !ct__pow2(vwnd) || vwnd > 16)
    return ct__fail(why, n, "XgemmDirect VWMD=%zu and VWND=%zu must be OpenCL vector widths", vwmd, vwnd);
  if (wgd % d[CT__D_KWID])
    return ct__fail(why, n, "XgemmDirect WGD=%zu is not a multiple of KWID=%zu", wgd, d[CT__D_KWID]);
  if (wgd % (mdimcd * vwmd) || wgd % (ndimcd * vwnd) || wgd % (d[CT__D_MDIMAD] * vwmd) ||
      wgd % (d[CT__D_NDIMBD] * vwnd))
    return ct__fail(why, n, "XgemmDirect WGD=%zu is not a multiple of MDIMCD*VWMD, NDIMCD*VWND, "
                    "MDIMAD*VWMD and NDIMBD*VWND", wgd);
  size_t threads_d = mdimcd * ndimcd;
  if (threads_d % d[CT__D_MDIMAD] || threads_d % d[CT__D_NDIMBD] ||
      wgd % (threads_d / d[CT__D_MDIMAD]) || wgd % (threads_d / d[CT__D_NDIMBD]))
    return ct__fail(why, n, "XgemmDirect WGD=%zu is not a multiple of MDIMCD*NDIMCD/MDIMAD and "
                    "MDIMCD*NDIMCD/NDIMBD", wgd);
  if (threads_d > props->max_work_group_size)
    return ct__fail(why, n, "XgemmDirect MDIMCD*NDIMCD = %zu exceeds the device's work-group limit %zu",
                    threads_d, props->max_work_group_size);
  size_t local_d = elem_size * (wgd * (wgd + d[CT__D_PADA]) + wgd * (wgd + d[CT__D_PADB]));
  if (local_d > props->local_mem_bytes)
    return ct__fail(why, n, "XgemmDirect needs %zu bytes of local memory; the device has %llu", local_d,
                    (unsigned long long)props->local_mem_bytes);
  return true;
}

pthread_mutex_t ct__clblast_lock = PTHREAD_MUTEX_INITIALIZER;

ct_status ct__gemm_params_apply(ct_device *d, int bits, const ct__gemm_params *p) {
  CLBlastPrecision prec = bits == 16 ? CLBlastPrecisionHalf : bits == 32 ? CLBlastPrecisionSingle
                                                                         : CLBlastPrecisionDouble;
  const char *rn[1] = {ct__routine_name};
  size_t rv[1] = {p->min_indirect};
  struct { const char *kernel; size_t n; const char *const *names; const size_t *values; } sets[3] = {
      {"Xgemm", CT__XGEMM_NPARAMS, ct__xgemm_names, p->xgemm},
      {"XgemmDirect", CT__XDIRECT_NPARAMS, ct__xdirect_names, p->direct},
      {"GemmRoutine", 1, rn, rv}};
  for (int i = 0; i < 3; i++) {
    /* CLBlast's C API takes non-const arrays it only reads. */
    pthread_mutex_lock(&ct__clblast_lock);
    CLBlastStatusCode st = CLBlastOverrideParameters(d->id, sets[i].kernel, prec, sets[i].n,
                                                     (const char **)(uintptr_t)sets[i].names,
                                                     sets[i].values);
    pthread_mutex_unlock(&ct__clblast_lock);
    if (st != CLBlastSuccess) {
      ct__clblast_error(st, "GEMM tuning: CLBlastOverrideParameters(%s, f%d) on %s refused the parameters",
                        sets[i].kernel, bits, d->spec);
      return CT_ERR_UNSUPPORTED;
    }
  }
  return CT_OK;
}

/* ---- Verification ----
 * A parameter set can pass every constraint and still compute wrong products on a device (a
 * compiler bug, a corner CLBlast's kernels get wrong: GEMMK=1 KREG=16 KWG=1 ... VWN=2 on
 * PoCL 3.1). A stored set is therefore used only after one product on each of its kernels
 * agrees with a host reference. Results are remembered per process, device, precision and set,
 * so a ct_shutdown() and restart does not pay again. */

#define CT__VERIFIED_MAX 32

static struct ct__verified {
  cl_device_id dev;
  char name[128];       /* with dev: a handle reused by another device after ct_shutdown() */
  int bits;
  ct__gemm_params p;
  bool ok;
  char why[384];
} ct__verified[CT__VERIFIED_MAX];
static int ct__nverified;
static pthread_mutex_t ct__verified_lock = PTHREAD_MUTEX_INITIALIZER;

/* A set that fits every device OpenCL 1.2 allows (64 work-items, no local memory in Xgemm,
 * 4.3 KiB in XgemmDirect at f64), for when a bad set has to be replaced and there is no shipped
 * one: CLBlast cannot drop an override, so its built-in parameters cannot come back. */
static const ct__gemm_params ct__conservative = {
    /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
    .xgemm = {0, 1, 16, 2, 8, 8, 32, 8, 8, 32, 0, 0, 0, 0, 1, 1},
    /* KWID MDIMAD MDIMCD NDIMBD NDIMCD PADA PADB VWMD VWND WGD */
    .direct = {2, 8, 8, 8, 8, 1, 1, 1, 1, 16},
    .min_indirect = 384,
};

static void ct__put(void *buf, int bits, size_t i, double v) {
  if (bits == 64) ((double *)buf)[i] = v;
  else if (bits == 32) ((float *)buf)[i] = (float)v;
  else ((uint16_t *)buf)[i] = ct_f32_to_f16((float)v);
}

static double ct__get(const void *buf, int bits, size_t i) {
  if (bits == 64) return ((const double *)buf)[i];
  if (bits == 32) return ((const float *)buf)[i];
  return ct_f16_to_f32(((const uint16_t *)buf)[i]);
}

/* One row-major m x n x k product (small: every element is checked) with the parameters
 * installed for precision bits on d, compared with a double host reference. */
static bool ct__check_product(ct_device *d, int bits, size_t m, size_t n, size_t k, const char *kernel,
                              char *why, size_t why_size) {
  size_t es = (size_t)bits / 8;
  void *ha = malloc(m * k * es), *hb = malloc(k * n * es), *hc = malloc(m * n * es);
  cl_mem ma = NULL, mb = NULL, mc = NULL;
  bool ok = false;
  if (!ha || !hb || !hc) {
    snprintf(why, why_size, "out of host memory for the verification product");
    goto done;
  }
  /* Fixed operands in [-1, 1): a 64-bit LCG, the same on every run. */
  uint64_t x = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < m * k + k * n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    double v = (double)(x >> 11) / 9007199254740992.0 * 2 - 1;
    if (i < m * k) ct__put(ha, bits, i, v);
    else ct__put(hb, bits, i - m * k, v);
  }
  cl_int e1, e2, e3;
  cl_context ctx = ct__device_context(d);
  ma = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, m * k * es, ha, &e1);
  mb = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, k * n * es, hb, &e2);
  mc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, m * n * es, NULL, &e3);
  if (!ma || !mb || !mc) {
    snprintf(why, why_size, "cannot allocate the verification product's buffers: %s",
             ct__cl_error_name(!ma ? e1 : !mb ? e2 : e3));
    goto done;
  }
  cl_command_queue q = ct__device_queue(d);
  CLBlastStatusCode st;
  pthread_mutex_lock(&ct__clblast_lock);
  if (bits == 32)
    st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k, 1.0f, ma, 0, k,
                      mb, 0, n, 0.0f, mc, 0, n, &q, NULL);
  else if (bits == 64)
    st = CLBlastDgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k, 1.0, ma, 0, k, mb,
                      0, n, 0.0, mc, 0, n, &q, NULL);
  else
    st = CLBlastHgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k,
                      ct_f32_to_f16(1.0f), ma, 0, k, mb, 0, n, ct_f32_to_f16(0.0f), mc, 0, n, &q, NULL);
  pthread_mutex_unlock(&ct__clblast_lock);
  if (st != CLBlastSuccess) {
    snprintf(why, why_size, "the %s verification product (%zux%zux%zu) failed: %s (%d)", kernel, m, n, k,
             ct__clblast_status_name(st), (int)st);
    goto done;
  }
  cl_int err = clEnqueueReadBuffer(q, mc, CL_TRUE, 0, m * n * es, hc, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    snprintf(why, why_size, "reading the %s verification product failed: %s", kernel, ct__cl_error_name(err));
    goto done;
  }
  double u = bits == 64 ? ldexp(1, -53) : bits == 32 ? ldexp(1, -24) : ldexp(1, -11);
  ok = true;
  for (size_t i = 0; i < m && ok; i++) {
    for (size_t j = 0; j < n; j++) {
      double ref = 0, mag = 0;
      for (size_t t = 0; t < k; t++) {
        double prod = ct__get(ha, bits, i * k + t) * ct__get(hb, bits, t * n + j);
        ref += prod;
        mag += fabs(prod);
      }
      /* The dot-product error bound of the linalg tests and cltensor-tune. */
      double got = ct__get(hc, bits, i * n + j);
      if (!(fabs(got - ref) <= 2.0 * (double)(k + 2) * u * mag + 1e-300)) {
        snprintf(why, why_size, "f%d %s parameters compute wrong products: element (%zu, %zu) of a %zux%zux%zu "
                 "product is %g, expected %g", bits, kernel, i, j, m, n, k, got, ref);
        ok = false;
        break;
      }
    }
  }
done:
  if (ma) clReleaseMemObject(ma);
  if (mb) clReleaseMemObject(mb);
  if (mc) clReleaseMemObject(mc);
  free(ha);
  free(hb);
  free(hc);
  return ok;
}

/* The verification products: Xgemm on 67x65x69 (several tiles of most sets, and padding) and
 * XgemmDirect on 41^3, both cheap whatever the set. CLBlast picks the kernel by the crossover
 * (m*n*k against XGEMM_MIN_INDIRECT_SIZE^3), so a set whose crossover would send these sizes
 * elsewhere is checked as a copy with the crossover at CT__VERIFY_CROSS (41^3 < 48^3 <=
 * 67*65*69): a file's legitimate crossover of 2048 must not cost a 2051x2049x2053 product on
 * the first GEMM. */
#define CT__VERIFY_M 67
#define CT__VERIFY_N 65
#define CT__VERIFY_K 69
#define CT__VERIFY_DIRECT 41
#define CT__VERIFY_CROSS 48

/* Installs p (or that copy of it) for precision bits and runs one product on each kernel. */
static bool ct__verify_installed(ct_device *d, int bits, const ct__gemm_params *p, char *why, size_t n) {
  ct__gemm_params q = *p;
  /* A crossover the Xgemm product reaches is kept: no second set to compile. */
  if ((unsigned long long)q.min_indirect * q.min_indirect * q.min_indirect >
      (unsigned long long)CT__VERIFY_M * CT__VERIFY_N * CT__VERIFY_K)
    q.min_indirect = CT__VERIFY_CROSS;
  if (ct__gemm_params_apply(d, bits, &q) != CT_OK) {
    snprintf(why, n, "%s", ct_last_error());
    return false;
  }
  if (!ct__check_product(d, bits, CT__VERIFY_M, CT__VERIFY_N, CT__VERIFY_K, "Xgemm", why, n)) return false;
  /* Below a crossover of 1 XgemmDirect is never used; below 42 it is used only under it. */
  if (q.min_indirect >= 2) {
    size_t t = q.min_indirect - 1 < CT__VERIFY_DIRECT ? q.min_indirect - 1 : CT__VERIFY_DIRECT;
    if (!ct__check_product(d, bits, t, t, t, "XgemmDirect", why, n)) return false;
  }
  return true;
}

bool ct__gemm_params_verify(ct_device *d, int bits, const ct__gemm_params *p, char *why, size_t why_size) {
  pthread_mutex_lock(&ct__verified_lock);
  for (int i = 0; i < ct__nverified; i++) {
    struct ct__verified *v = &ct__verified[i];
    if (v->dev == d->id && strncmp(v->name, d->props.name, sizeof v->name - 1) == 0 && v->bits == bits &&
        memcmp(&v->p, p, sizeof *p) == 0) {
      bool ok = v->ok;
      snprintf(why, why_size, "%s", v->why);
      pthread_mutex_unlock(&ct__verified_lock);
      return ok;
    }
  }
  pthread_mutex_unlock(&ct__verified_lock);
  char reason[384] = "";
  bool ok = ct__verify_installed(d, bits, p, reason, sizeof reason);
  snprintf(why, why_size, "%s", reason);
  pthread_mutex_lock(&ct__verified_lock);
  if (ct__nverified < CT__VERIFIED_MAX) {
    struct ct__verified *v = &ct__verified[ct__nverified++];
    v->dev = d->id;
    snprintf(v->name, sizeof v->name, "%s", d->props.name);
    v->bits = bits;
    v->p = *p;
    v->ok = ok;
    snprintf(v->why, sizeof v->why, "%s", reason);
  }
  pthread_mutex_unlock(&ct__verified_lock);
  return ok;
}

const ct__gemm_params *ct__gemm_conservative(ct_device *d, enum ct__prec pr, char *why, size_t why_size) {
  int bits = ct__prec_bits(pr);
  if (!ct__gemm_params_valid(&ct__conservative, &d->props, (size_t)bits / 8, why, why_size) ||
      !ct__gemm_params_verify(d, bits, &ct__conservative, why, why_size))
    return NULL;
  return &ct__conservative;
}

/* ---- File location ---- */

ct_status ct__gemm_tuning_path(char *buf, size_t size, const ct_device *d) {
  char dir[4096];
  bool on;
  CT__TRY(ct__cache_enabled(&on));
  if (!ct__cache_dir(dir, sizeof dir))
    return ct__error(CT_ERR_IO, "GEMM tuning: no cache folder ($CLTENSOR_CACHE=0, or none of "
                     "$CLTENSOR_CACHE_DIR, $XDG_CACHE_HOME and $HOME is usable)");
  /* Named by a digest of what the parameters depend on, as the kernel cache names binaries;
   * the file repeats the fields in clear, and those are what a reader checks. */
  const char *fields[4] = {d->props.name, d->props.vendor, d->props.driver_version, CT_VERSION_STRING};
  struct ct__sha256 sh;
  ct__sha256_init(&sh);
  for (int i = 0; i < 4; i++) ct__sha256_update(&sh, fields[i], strlen(fields[i]) + 1);
  unsigned char digest[32];
  ct__sha256_final(&sh, digest);
  char hex[33];
  ct__hex(hex, digest, 16);
  int n = snprintf(buf, size, "%s/gemm-%s.txt", dir, hex);
  if (n < 0 || (size_t)n >= size) {
    char esc[512];
    return ct__error(CT_ERR_IO, "GEMM tuning: cache folder path too long: %s", ct__escape(esc, sizeof esc, dir));
  }
  return CT_OK;
}

/* ---- Reading the stored file ---- */

#define CT__TUNING_FILE_MAX (64 * 1024)

bool ct__gemm_tuning_load(ct__gemm_tuning *out, char *path, size_t path_size, ct_device *d, char *note,
                          size_t note_size) {
  if (ct__gemm_tuning_path(path, path_size, d) != CT_OK) {
    snprintf(note, note_size, "%s", ct_last_error());
    return false;
  }
  /* The kernel cache's trust rules (src/kernel/cache.h): the parameters go to CLBlast's
   * compiler, so a file someone else could have written is not read at all. The path is under
   * a folder from the environment: escaped in the notes (core/env.h). */
  char ep[512];
  ct__escape(ep, sizeof ep, path);
  int fd;
  uint64_t size;
  char why[1024];
  switch (ct__cache_open(path, CT__TUNING_FILE_MAX, &fd, &size, why, sizeof why)) {
    case CT__TRUST_OK: break;
    case CT__TRUST_MISSING: snprintf(note, note_size, "no tuning file %s", ep); return false;
    default: snprintf(note, note_size, "tuning file ignored: %s", why); return false;
  }
  char *text = malloc((size_t)size + 1);
  bool ok = false;
  if (!text) {
    snprintf(note, note_size, "tuning file %s ignored: out of host memory", ep);
  } else if (!ct__read_exact(fd, text, (size_t)size)) {
    snprintf(note, note_size, "tuning file %s ignored: read error", ep);
  } else if (memchr(text, '\0', (size_t)size)) {
    snprintf(note, note_size, "tuning file %s ignored: malformed: it contains NUL bytes", ep);
  } else {
    text[size] = '\0';
    ct_status st = ct__gemm_tuning_parse(out, text, &d->props, why, sizeof why);
    if (st == CT_ERR_DEVICE_MISMATCH)
      snprintf(note, note_size, "tuning file %s ignored: it is for another device: %s", ep, why);
    else if (st != CT_OK)
      snprintf(note, note_size, "tuning file %s ignored: malformed: %s", ep, why);
    else
      ok = true;
  }
  close(fd);
  free(text);
  return ok;
}

/* ---- File format ----
 *   # comments and blank lines anywhere
 *   cltensor-gemm-tuning 1
 *   device <CL_DEVICE_NAME>
 *   vendor <CL_DEVICE_VENDOR>
 *   driver <CL_DRIVER_VERSION>
 *   library <libcltensor version>
 *   <f16|f32|f64> Xgemm NAME=VALUE ... (all 16 parameters)
 *   <f16|f32|f64> XgemmDirect NAME=VALUE ... (all 10)
 *   <f16|f32|f64> GemmRoutine XGEMM_MIN_INDIRECT_SIZE=VALUE
 * A precision present must have all three lines. */

#define CT__TUNING_MAGIC "cltensor-gemm-tuning 1"

static int ct__index_of(const char *const *names, int n, const char *name, size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == len && strncmp(names[i], name, len) == 0) return i;
  return -1;
}

/* Parses "NAME=VALUE NAME=VALUE ..." into values (indexed like names); every name exactly once. */
static bool ct__parse_assignments(const char *s, const char *const *names, int count, size_t *values,
                                  char *why, size_t n, int line, const char *kernel) {
  bool seen[CT__XGEMM_NPARAMS] = {false};
  while (*s) {
    while (*s == ' ' || *s == '\t') s++;
    if (!*s) break;
    const char *eq = s;
    while (*eq && *eq != '=' && *eq != ' ' && *eq != '\t') eq++;
    if (*eq != '=')
      return ct__fail(why, n, "line %d: expected NAME=VALUE in the %s line, found \"%.*s\"", line, kernel,
                      (int)(eq - s), s);
    int i = ct__index_of(names, count, s, (size_t)(eq - s));
    if (i < 0)
      return ct__fail(why, n, "line %d: %s has no parameter '%.*s'", line, kernel, (int)(eq - s), s);
    if (seen[i]) return ct__fail(why, n, "line %d: %s parameter %s given twice", line, kernel, names[i]);
    const char *v = eq + 1;
    if (*v < '0' || *v > '9')
      return ct__fail(why, n, "line %d: %s %s needs a non-negative integer value", line, kernel, names[i]);
    errno = 0;
    char *end;
    unsigned long long val = strtoull(v, &end, 10);
    if (errno || (*end && *end != ' ' && *end != '\t') || val > SIZE_MAX)
      return ct__fail(why, n, "line %d: %s %s has a malformed value \"%.*s\"", line, kernel, names[i],
                      (int)strcspn(v, " \t"), v);
    values[i] = (size_t)val;
    seen[i] = true;
    s = end;
  }
  for (int i = 0; i < count; i++)
    if (!seen[i]) return ct__fail(why, n, "line %d: %s lacks parameter %s", line, kernel, names[i]);
  return true;
}

ct_status ct__gemm_tuning_parse(ct__gemm_tuning *out, const char *text, const ct_device_props *props,
                                char *why, size_t why_size) {
  memset(out, 0, sizeof *out);
  enum { K_DEVICE, K_VENDOR, K_DRIVER, K_LIBRARY, K_COUNT };
  static const char *const keys[K_COUNT] = {"device", "vendor", "driver", "library"};
  const char *want[K_COUNT] = {props->name, props->vendor, props->driver_version, CT_VERSION_STRING};
  bool have_key[K_COUNT] = {false};
  bool mismatch = false;
  char mismatch_why[512] = "";
  bool magic = false;
  bool seen[CT__PREC_COUNT][3] = {{false}};
  int line = 0;
  const char *p = text;
  char buf[1024];
  while (*p) {
    line++;
    size_t len = strcspn(p, "\n");
    if (len >= sizeof buf) {
      ct__fail(why, why_size, "line %d: longer than %zu characters", line, sizeof buf - 1);
      return CT_ERR_FORMAT;
    }
    memcpy(buf, p, len);
    buf[len] = '\0';
    p += len + (p[len] == '\n');
    while (len > 0 && (buf[len - 1] == '\r' || buf[len - 1] == ' ' || buf[len - 1] == '\t')) buf[--len] = '\0';
    if (len == 0 || buf[0] == '#') continue;
    if (!magic) {
      if (strcmp(buf, CT__TUNING_MAGIC) != 0) {
        ct__fail(why, why_size, "line %d: expected \"%s\", found \"%s\"", line, CT__TUNING_MAGIC, buf);
        return CT_ERR_FORMAT;
      }
      magic = true;
      continue;
    }
    size_t wl = strcspn(buf, " \t");
    const char *rest = buf + wl;
    while (*rest == ' ' || *rest == '\t') rest++;
    int key = ct__index_of(keys, K_COUNT, buf, wl);
    if (key >= 0) {
      if (have_key[key]) {
        ct__fail(why, why_size, "line %d: '%s' given twice", line, keys[key]);
        return CT_ERR_FORMAT;
      }
      have_key[key] = true;
      if (strcmp(rest, want[key]) != 0 && !mismatch) {
        mismatch = true;
        snprintf(mismatch_why, sizeof mismatch_why, "written for %s \"%s\", this is \"%s\"",
                 key == K_LIBRARY ? "libcltensor" : keys[key], rest, want[key]);
      }
      continue;
    }
    int prec = ct__index_of(ct__prec_names, CT__PREC_COUNT, buf, wl);
    if (prec < 0) {
      ct__fail(why, why_size, "line %d: unknown keyword '%.*s'", line, (int)wl, buf);
      return CT_ERR_FORMAT;
    }
    size_t kl = strcspn(rest, " \t");
    const char *assign = rest + kl;
    static const char *const kernels[3] = {"Xgemm", "XgemmDirect", "GemmRoutine"};
    int kernel = ct__index_of(kernels, 3, rest, kl);
    if (kernel < 0) {
      ct__fail(why, why_size, "line %d: unknown kernel '%.*s' (Xgemm, XgemmDirect or GemmRoutine)", line,
               (int)kl, rest);
      return CT_ERR_FORMAT;
    }
    if (seen[prec][kernel]) {
      ct__fail(why, why_size, "line %d: %s %s given twice", line, ct__prec_names[prec], kernels[kernel]);
      return CT_ERR_FORMAT;
    }
    seen[prec][kernel] = true;
    ct__gemm_params *pp = &out->p[prec];
    bool ok = kernel == 0 ? ct__parse_assignments(assign, ct__xgemm_names, CT__XGEMM_NPARAMS, pp->xgemm,
                                                  why, why_size, line, kernels[0])
              : kernel == 1 ? ct__parse_assignments(assign, ct__xdirect_names, CT__XDIRECT_NPARAMS,
                                                    pp->direct, why, why_size, line, kernels[1])
                            : ct__parse_assignments(assign, &ct__routine_name, 1, &pp->min_indirect,
                                                    why, why_size, line, kernels[2]);
    if (!ok) return CT_ERR_FORMAT;
  }
  if (!magic) {
    ct__fail(why, why_size, "empty: no \"%s\" line", CT__TUNING_MAGIC);
    return CT_ERR_FORMAT;
  }
  for (int k = 0; k < K_COUNT; k++)
    if (!have_key[k]) {
      ct__fail(why, why_size, "no '%s' line", keys[k]);
      return CT_ERR_FORMAT;
    }
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    int count = seen[pr][0] + seen[pr][1] + seen[pr][2];
    if (count != 0 && count != 3) {
      ct__fail(why, why_size, "%s needs all of Xgemm, XgemmDirect and GemmRoutine", ct__prec_names[pr]);
      return CT_ERR_FORMAT;
    }
  }
  /* Another device's limits may differ: its file is "not ours" rather than malformed. */
  if (mismatch) {
    snprintf(why, why_size, "%s", mismatch_why);
    return CT_ERR_DEVICE_MISMATCH;
  }
  bool any = false;
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    if (!seen[pr][0]) continue;
    char reason[400];
    size_t elem = (size_t)ct__prec_bits(pr) / 8;
    if (!ct__gemm_params_valid(&out->p[pr], props, elem, reason, sizeof reason)) {
      ct__fail(why, why_size, "%s: %s", ct__prec_names[pr], reason);
      return CT_ERR_FORMAT;
    }
    out->has[pr] = true;
    any = true;
  }
  if (!any) {
    ct__fail(why, why_size, "no parameter sets");
    return CT_ERR_FORMAT;
  }
  return CT_OK;
}

static void ct__write_set(FILE *f, const char *prec, const char *kernel, const char *const *names,
                          const size_t *values, int n) {
  fprintf(f, "%s %s", prec, kernel);
  for (int i = 0; i < n; i++) fprintf(f, " %s=%zu", names[i], values[i]);
  fputc('\n', f);
}

/* mkdir -p for the folder part of path. */
static ct_status ct__make_parents(const char *path) {
  char dir[4096];
  int n = snprintf(dir, sizeof dir, "%s", path);
  char esc[512];
  if (n < 0 || (size_t)n >= sizeof dir)
    return ct__error(CT_ERR_IO, "GEMM tuning: path too long: %s", ct__escape(esc, sizeof esc, path));
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return CT_OK;
  *slash = '\0';
  int e = ct__mkdirs(dir);
  if (e != 0) {
    char eb[128];
    char pesc[512];
    return ct__error(CT_ERR_IO, "GEMM tuning: cannot save %s: cannot create folder %s: %s",
                     ct__escape(pesc, sizeof pesc, path), ct__escape(esc, sizeof esc, dir),
                     ct__strerror(e, eb, sizeof eb));
  }
  return CT_OK;
}

ct_status ct__gemm_tuning_save(const char *path, const ct_device *d, const ct__gemm_tuning *t,
                               const char *comment) {
  CT__TRY(ct__make_parents(path));
  /* The text is formatted in memory first, so the file itself is written by the one atomic
   * writer (unique temporary name, fsync, rename) and a stdio error can only mean memory. */
  char *text = NULL;
  size_t len = 0;
  char esc[512];
  ct__escape(esc, sizeof esc, path);
  FILE *f = open_memstream(&text, &len);
  if (!f) return ct__error(CT_ERR_OUT_OF_MEMORY, "GEMM tuning: out of host memory formatting %s", esc);
  fprintf(f, "# CLBlast GEMM parameters for one OpenCL device, written by cltensor-tune.\n"
             "# Format: docs/GEMM.md. A file whose device, vendor, driver or library differs is ignored.\n");
  if (comment) {
    for (const char *c = comment; *c;) {
      size_t clen = strcspn(c, "\n");
      fprintf(f, "# %.*s\n", (int)clen, c);
      c += clen + (c[clen] == '\n');
    }
  }
  fprintf(f, "%s\ndevice %s\nvendor %s\ndriver %s\nlibrary %s\n", CT__TUNING_MAGIC, d->props.name,
          d->props.vendor, d->props.driver_version, CT_VERSION_STRING);
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    if (!t->has[pr]) continue;
    ct__write_set(f, ct__prec_names[pr], "Xgemm", ct__xgemm_names, t->p[pr].xgemm, CT__XGEMM_NPARAMS);
    ct__write_set(f, ct__prec_names[pr], "XgemmDirect", ct__xdirect_names, t->p[pr].direct, CT__XDIRECT_NPARAMS);
    ct__write_set(f, ct__prec_names[pr], "GemmRoutine", &ct__routine_name, &t->p[pr].min_indirect, 1);
  }
  bool bad = ferror(f) != 0;
  if (fclose(f) != 0) bad = true;
  if (bad) {
    free(text);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "GEMM tuning: out of host memory formatting %s", esc);
  }
  struct ct__afile w;
  /* 0644, not 0666: under a umask of 002 a group-writable file would fail the trust rules the
   * reader applies (src/kernel/cache.h). */
  ct_status st = ct__afile_open(&w, path, 0644, "GEMM tuning");
  if (st == CT_OK) st = ct__afile_finish(&w, ct__afile_write(&w, text, len));
  free(text);
  return st;
}
