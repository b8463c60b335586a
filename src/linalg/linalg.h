/* GEMM internals shared by the matmul front end, the two routes (CLBlast, host BLAS), the
 * tuning layer and cltensor-tune's tools library (tools/common/). docs/GEMM.md describes the
 * design. */
#ifndef CT_LINALG_LINALG_H
#define CT_LINALG_LINALG_H

#include <pthread.h>
#include <stdatomic.h>
#include <CL/cl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cltensor/linalg.h"
#include "core/error.h"
#include "device/device.h"

/* ---- Tuning parameters (tuning.c) ----
 * CLBlast's GEMM is driven by three parameter sets per device and precision, named as in
 * CLBlast 1.5's database: the indirect kernel "Xgemm", the single-kernel "XgemmDirect", and the
 * "GemmRoutine" crossover (sizes with m*n*k < XGEMM_MIN_INDIRECT_SIZE^3 use the direct kernel).
 * The name lists are in CLBlast's order, which CLBlastOverrideParameters() does not need but
 * makes files diffable. */
#define CT__XGEMM_NPARAMS 16
#define CT__XDIRECT_NPARAMS 10
extern const char *const ct__xgemm_names[CT__XGEMM_NPARAMS];
extern const char *const ct__xdirect_names[CT__XDIRECT_NPARAMS];
enum {
  CT__X_GEMMK, CT__X_KREG, CT__X_KWG, CT__X_KWI, CT__X_MDIMA, CT__X_MDIMC, CT__X_MWG, CT__X_NDIMB,
  CT__X_NDIMC, CT__X_NWG, CT__X_SA, CT__X_SB, CT__X_STRM, CT__X_STRN, CT__X_VWM, CT__X_VWN
};
enum {
  CT__D_KWID, CT__D_MDIMAD, CT__D_MDIMCD, CT__D_NDIMBD, CT__D_NDIMCD, CT__D_PADA, CT__D_PADB,
  CT__D_VWMD, CT__D_VWND, CT__D_WGD
};

typedef struct ct__gemm_params {
  size_t xgemm[CT__XGEMM_NPARAMS];
  size_t direct[CT__XDIRECT_NPARAMS];
  size_t min_indirect;   /* GemmRoutine XGEMM_MIN_INDIRECT_SIZE */
} ct__gemm_params;

/* Precisions a tuning file may hold, in file order. */
enum ct__prec { CT__PREC_F16, CT__PREC_F32, CT__PREC_F64, CT__PREC_COUNT };
extern const char *const ct__prec_names[CT__PREC_COUNT];   /* "f16", "f32", "f64" */
int ct__prec_bits(enum ct__prec p);                          /* 16, 32, 64 */

typedef struct ct__gemm_tuning {
  bool has[CT__PREC_COUNT];
  ct__gemm_params p[CT__PREC_COUNT];
} ct__gemm_tuning;

/* Checks a parameter set against the kernels' constraints (those of CLBlast's own tuner) and
 * the device's limits (work-group size, local memory for elem_size-byte elements). On failure
 * writes the reason into why and returns false. */
bool ct__gemm_params_valid(const ct__gemm_params *p, const ct_device_props *props, size_t elem_size,
                           char *why, size_t why_size);

/* Installs p for precision bits on d through CLBlastOverrideParameters (process-wide in
 * CLBlast, per device and precision). CT_ERR_UNSUPPORTED naming the CLBlast status when CLBlast
 * refuses (e.g. a CLBlast whose kernels take other parameters). */
ct_status ct__gemm_params_apply(ct_device *d, int bits, const ct__gemm_params *p);

/* Whether p, installed for precision bits on d, computes right products: one small product on
 * each of its kernels (Xgemm on 67x65x69, XgemmDirect on 41^3 or below the crossover; a set whose
 * crossover is above those sizes is checked as a copy with it moved) against a double host
 * reference. Remembered per process, device, precision and set. Afterwards p, that copy or
 * (for a remembered verdict) whatever was there is installed: the caller installs the set it
 * wants. On failure why says what was wrong. */
bool ct__gemm_params_verify(ct_device *d, int bits, const ct__gemm_params *p, char *why, size_t why_size);

/* A set that fits every OpenCL 1.2 device, verified on d for pr (not installed), for when a
 * rejected set has to be replaced and there is no shipped one: CLBlast cannot drop an override,
 * so its built-in parameters cannot come back. NULL, why written, when even it fails. */
const ct__gemm_params *ct__gemm_conservative(ct_device *d, enum ct__prec pr, char *why, size_t why_size);

/* The shipped defaults for d's kind of device, or NULL (currently: PoCL CPU devices, f32). */
const ct__gemm_tuning *ct__gemm_shipped_tuning(const ct_device *d);

/* The tuning file's path for d: <cache dir>/gemm-<hash>.txt, the hash over the device name,
 * vendor, driver version and library version (as the kernel cache keys its binaries).
 * The cache dir is $CLTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/cltensor, else
 * $HOME/.cache/cltensor. CT_ERR_IO when none of these is set or $CLTENSOR_CACHE is off;
 * CT_ERR_INVALID_ARGUMENT when $CLTENSOR_CACHE is not a boolean. */
ct_status ct__gemm_tuning_path(char *buf, size_t size, const ct_device *d);

/* Reads d's stored tuning file (its path into path) under the kernel cache's trust rules
 * (src/kernel/cache.h: folder and file owned by this user and not writable by others, a regular
 * file, at most 64 KiB) and parses it; the caller verifies the sets (ct__gemm_params_verify).
 * True with *out filled, else note says why not (no file, refused, malformed, for another
 * device). */
bool ct__gemm_tuning_load(ct__gemm_tuning *out, char *path, size_t path_size, ct_device *d, char *note,
                          size_t note_size);

/* Parses a tuning file's text for device props. Returns CT_OK, or CT_ERR_FORMAT (malformed,
 * including parameter sets that fail ct__gemm_params_valid) or CT_ERR_DEVICE_MISMATCH (written
 * for another device, driver or library version), the reason in why. */
ct_status ct__gemm_tuning_parse(ct__gemm_tuning *out, const char *text, const ct_device_props *props,
                                char *why, size_t why_size);

/* Writes t for d to path atomically (a temporary file in the same folder, then rename), creating
 * the cache folder if needed. comment (may be NULL) is added as '#' lines. CT_ERR_IO. */
ct_status ct__gemm_tuning_save(const char *path, const ct_device *d, const ct__gemm_tuning *t,
                               const char *comment);

/* ---- Per-device GEMM state (gemm_state.c, gemm_env.c) ---- */
enum ct__gemm_route { CT__ROUTE_CLBLAST = CT_GEMM_ROUTE_CLBLAST, CT__ROUTE_HOST = CT_GEMM_ROUTE_HOST };

/* Which parameters are installed for one precision. */
enum ct__gemm_set { CT__SET_BUILTIN, CT__SET_SHIPPED, CT__SET_CONSERVATIVE, CT__SET_FILE };

/* The job a native command shares with its helpers (host_native.c); lock guards job and its
 * refs. */
struct ct__team_job {
  void (*fn)(void *ctx, int64_t part);
  void *ctx;
  int64_t nparts;
  atomic_llong next;             /* the next part to claim */
  int refs;                      /* helpers working on it */
};
struct ct__team {
  atomic_flag lock;
  struct ct__team_job *job;      /* posted, or NULL */
  uint64_t started;              /* the highest sequence number of a job that has started */
  atomic_ullong seq;             /* sequence numbers handed out (ct__team_call) */
  atomic_llong last_ns;          /* when the last posted job ended (CLOCK_MONOTONIC) */
};

struct ct__gemm_state {
  ct_status route_status;        /* CT_OK, or why $CLTENSOR_GEMM can't be honoured */
  char route_error[512];
  enum ct__gemm_route route;
  /* The tuning is loaded (and verified) on the first CLBlast GEMM or ct_gemm_tuning_get(),
   * never for GEMMs on the host route: until then the fields below are unset. */
  atomic_bool tuning_ready;
  pthread_mutex_t tuning_lock;
  ct_gemm_tuning_source tuning_source;
  bool tuned[CT__PREC_COUNT];    /* parameters this library installed, per precision */
  enum ct__gemm_set set[CT__PREC_COUNT];
  ct__gemm_params params[CT__PREC_COUNT];
  char tuning_message[1024];
  /* The host route's second queue (host_native.c): the team's helpers run there, beside the
   * native commands on the device's queue. Created on first use; side_state 0 not yet tried,
   * 1 ready, -1 none. */
  pthread_mutex_t side_lock;
  atomic_int side_state;
  cl_command_queue side_queue;
  struct ct__team team;
};

/* OUT: *out, d's GEMM state, created on first use: resolves $CLTENSOR_GEMM and
 * $CLTENSOR_GEMM_TUNING. */
ct_status ct__gemm_state(struct ct__gemm_state **out, ct_device *d);

/* Loads d's tuning into s once (the stored file, verified, or the shipped defaults), before the
 * first CLBlast GEMM. Tuning problems go to ct_gemm_tuning_get(), never to the caller. */
void ct__gemm_tuning_ready(struct ct__gemm_state *s, ct_device *d);

/* Resolves $CLTENSOR_GEMM for d into s->route; when it can't be honoured, s->route_status and
 * s->route_error say why (reported by every GEMM on d). */
void ct__gemm_env_route(struct ct__gemm_state *s, const ct_device *d);

/* Reads $CLTENSOR_GEMM_TUNING: true when tuning should be loaded (unset, empty or auto); else
 * false with s->tuning_message written (and, for an invalid value, s->route_status and
 * s->route_error unless the route already failed). */
bool ct__gemm_env_tuning(struct ct__gemm_state *s);

/* snprintf into a fixed message buffer, cut at its end (paths can be long). */
void ct__gemm_note(char *buf, size_t size, const char *fmt, ...) CT__PRINTF(3, 4);

/* Installs p for precision pr on d and records it in d's GEMM state, so that GEMMs plan their
 * CLBlast calls for it. For cltensor-tune's candidates; not safe while other threads use d. */
ct_status ct__gemm_use_params(ct_device *d, enum ct__prec pr, const ct__gemm_params *p);

/* ---- One GEMM as the routes see it ----
 * Row-major view: C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, repeated over
 * nbatch batch dims. Each matrix is (mem, element offset, leading dimension, transposed) with
 * one element stride per batch dim (0 for a broadcast dim). C is never transposed. */
struct ct__gemm_mat {
  cl_mem mem;
  int64_t off;
  int64_t ld;
  bool trans;
  int64_t bstride[CT_MAX_DIMS];
};

struct ct__gemm_op {
  ct_dtype dtype;                /* CT_F32, CT_F64, or CT_F16 on devices with cl_khr_fp16 */
  int64_t m, n, k;               /* all > 0 */
  double alpha, beta;
  int nbatch;
  int64_t bshape[CT_MAX_DIMS];
  struct ct__gemm_mat a, b, c;
  /* Host route only: when bias.mem is set, each row of C (of every batch entry) is first set to
   * bias_beta * bias (n elements, bias.inc apart), and beta is 1: ct_linear's bias broadcast
   * inside the product's own command instead of a copy kernel before it (matmul.c). */
  struct ct__gemm_vec {
    cl_mem mem;
    int64_t off, inc;
  } bias;
  double bias_beta;
  const char *fn;                /* public function, for messages */
};

/* Fills x from t (gemm_layout.c): the operand's matrix of rows x cols (a 1-D t is a row (left)
 * or column (right) vector) as BLAS addresses it, and its strides along the nb broadcast batch
 * dims of shape bs. False when t has no BLAS layout (make it contiguous) or its byte offset is
 * not a whole number of elements. */
bool ct__gemm_mat_of(struct ct__gemm_mat *x, const ct_tensor *t, bool left, int nb, const int64_t *bs,
                     int64_t rows, int64_t cols);

/* Drops size-1 batch dims, merges neighbours that are one dim for all three matrices, and
 * folds a batch of A into its rows when B is shared by every batch: [.., m, k] @ [k, n] becomes
 * one [b*m, k] @ [k, n] product, as PyTorch folds it. */
void ct__gemm_simplify_batch(struct ct__gemm_op *op);

ct_status ct__gemm_clblast(ct_device *d, const struct ct__gemm_state *s, const struct ct__gemm_op *op);
ct_status ct__gemm_host(ct_device *d, const struct ct__gemm_op *op);
/* Products of at least this many multiply-adds (and below the size where OpenBLAS's own threads
 * take over, host_blas_core.c) are cut into parts shared with the device's team on the host route
 * (gemm_host.c, host_native.c). A variable so that tests can send small products through it. */
extern int64_t ct__gemm_split_min_madds;
/* Once per process, before the first host GEMM: switches a DYNAMIC_ARCH OpenBLAS that fell back
 * to its Prescott kernels to the CPU's (host_blas_core.c). ct__host_blas_core() gives the core
 * OpenBLAS runs (after the switch) and, in *before, the one it chose itself ("" without a host
 * BLAS or when it is not OpenBLAS). */
void ct__host_blas_prepare(void);
const char *ct__host_blas_core(const char **before);
/* Around one host product of madds multiply-adds (host_blas_core.c): below a size, OpenBLAS runs
 * it on one thread, so that its helper threads do not spin beside the device's kernels. Pass
 * begin's result to end. */
#define CT__BLAS_ONE_THREAD_BELOW ((int64_t)1 << 26)
bool ct__host_blas_small_begin(int64_t madds);
void ct__host_blas_small_end(bool began);
/* C (m x n, ldc) = alpha op(A) op(B), row-major, f32, for small products (host_small.c): false,
 * with nothing written, when it does not apply (no AVX2 and FMA, more than CT__SGEMM_SMALL_MAX
 * multiply-adds, a transposed B of more than 4096 elements, an empty C, ct__sgemm_small_off set):
 * the caller then uses CBLAS. Each element is one sequential FMA chain over k, times alpha. */
#define CT__SGEMM_SMALL_MAX ((int64_t)1 << 20)
bool ct__sgemm_small(bool ta, const float *a, int64_t lda, bool tb, const float *b, int64_t ldb, int64_t m,
                     int64_t n, int64_t k, float alpha, float *c, int64_t ldc);
/* Tests: nonzero makes ct__sgemm_small decline every product. */
extern int ct__sgemm_small_off;
/* Whether the library was built with a host CBLAS. */
bool ct__gemm_host_available(void);

/* Probe pointer blocks of native commands (host GEMMs, the host attention) not yet freed (for
 * tests: each is freed when its command completes or is terminated). */
long ct__gemm_host_blocks_live(void);

/* ---- Host functions as native commands (host_native.c) ----
 * On a device with native kernels whose memory is the host's (d->native_kernels), fn(args,
 * base) runs in queue order as one command, base[j] being the host pointer of bufs[j]'s first
 * byte: the host GEMM route's products and the host attention. */
#define CT__NATIVE_MAX_BUFS 9
#define CT__NATIVE_MAX_ARGS 2048
typedef void (*ct__native_fn)(void *args, char *const *base);
/* Enqueues fn with a copy of args (size bytes) on queue q of d after the nwait events of wait;
 * bufs: nbuf distinct buffers, none a sub-buffer (ct__native_unwrap). *done_ev (when not NULL)
 * receives the command's event; prof names it for the profiler, fname for messages. */
ct_status ct__native_enqueue(ct_device *d, cl_command_queue q, ct__native_fn fn, const void *args, size_t size,
                             int nbuf, const cl_mem *bufs, cl_uint nwait, const cl_event *wait, cl_event *done_ev,
                             const char *prof, const char *fname);
/* Replaces a sub-buffer by its parent, adding its origin to *off (elements of es bytes); false
 * when the origin is not a whole number of elements. NULL and plain buffers are left alone. */
bool ct__native_unwrap(cl_mem *mem, int64_t *off, size_t es);
/* Index of mem in bufs (n entries so far), appended when new. */
int ct__native_buf(cl_mem *bufs, int *n, cl_mem mem);
/* ---- A team of two (host_native.c) ----
 * A native command that can be cut into parts runs them through ct__team_run, and a helper on
 * the device's side queue (the second PoCL worker) claims parts beside it. */
typedef void (*ct__part_fn)(void *ctx, int64_t part);
/* Enqueues a helper for the command the caller enqueues next on d's queue: *team and *seq are
 * to pass to that command (team NULL where the device cannot run two commands at once, where
 * the side queue cannot be created, or with CLTENSOR_GEMM_SPLIT=0; an invalid value is
 * reported with fn's name). */
ct_status ct__team_call(struct ct__team **team, uint64_t *seq, ct_device *d, const char *fn);
/* Inside a native command: runs fn(ctx, i) for i in [0, nparts), parts taken by the calling
 * thread and by a helper of team t that is awake (t may be NULL: all on this thread); seq is
 * ct__team_call's. Returns when all have ended. */
void ct__team_run(struct ct__team *t, uint64_t seq, ct__part_fn fn, void *ctx, int64_t nparts);
/* The command that ct__team_call enqueued a helper for will not run (its enqueue failed): the
 * helper leaves at once instead of waiting for it. */
void ct__team_cancel(struct ct__team *t, uint64_t seq);
/* How long a helper stays after its last part (ns). */
extern int64_t ct__team_idle_ns;
/* Tests: > 0 makes a command that posted a job wait up to this long (ns) for a helper to join
 * before it claims parts itself, so that the parts really run on two threads. */
extern int64_t ct__team_share_wait_ns;
/* Parts that helpers ran (tests). */
extern atomic_long ct__team_parts_helped;

/* "CLBlastInvalidLeadDimA" etc.; "CLBlastUnknownStatus" for codes outside 1.5's table. */
const char *ct__clblast_status_name(int status);
/* Maps a failed CLBlast call to a status and sets the message "<text>: <name> (<code>)". */
ct_status ct__clblast_error(int status, const char *fmt, ...) CT__PRINTF(2, 3);

/* ---- The matmul front end (matmul.c, matmul_shape.c, matmul_init.c, matmul_int.c) ---- */

/* One ct_matmul/ct_linear/ct_addmm call: its arguments, then what ct__mm_check() derives. */
struct ct__mm {
  const char *fn;
  const char *an, *bn, *cn;      /* argument names for messages */
  const ct_tensor *a, *b, *c;
  double alpha, beta;
  bool acc32;                    /* f16 accumulates in f32 even where CLBlast multiplies half (autocast) */
  /* derived */
  ct_device *d;
  ct_dtype dt;
  int64_t m, n, k;
  int nb;                        /* broadcast batch dims */
  int64_t bs[CT_MAX_DIMS];
  int rnd;                       /* result dims */
  int64_t rshape[CT_MAX_DIMS];
};

/* The shape and dtype rules (matmul_shape.c): devices, dtypes, PyTorch's matmul shapes with
 * batch broadcasting, c broadcasting to the result, out's shape, integral alpha and beta for
 * integer dtypes. Fills the derived fields. */
ct_status ct__mm_check(struct ct__mm *mm, const ct_tensor *out);

/* c's strides expanded to the full result shape of rnd dims (0 on broadcast dims). */
void ct__mm_expand_strides(int64_t *out, const ct_tensor *c, int rnd, const int64_t *rshape);

/* target (contiguous) = beta * broadcast(c), converting c's dtype; zeros when c is NULL or beta
 * is 0 (matmul_init.c). */
ct_status ct__mm_init_c(ct_device *d, const char *fn, ct_tensor *target, const ct_tensor *c, double beta);

/* Integer product into a contiguous target (which may be c itself: each element reads its own
 * c before writing) (matmul_int.c). */
ct_status ct__mm_int(struct ct__mm *mm, ct_tensor *target);

/* CLBlast keeps process-wide parameter databases and caches that its calls read and
 * CLBlastOverrideParameters rewrites without locking (ASan caught two devices' threads freeing
 * each other's database entries); every CLBlast call goes through this lock. */
extern pthread_mutex_t ct__clblast_lock;

#endif
