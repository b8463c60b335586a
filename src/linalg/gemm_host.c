/* The host-BLAS route: on devices whose memory is the host's (PoCL's CPU device), the host CBLAS
 * multiplies the buffers' memory, as a native kernel in queue order where the device runs them,
 * else on blocking maps from the calling thread. Built only with -Dhost_blas
 * (CT_HAVE_HOST_BLAS). docs/GEMM.md, "Routes". */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/env.h"
#include "core/error.h"
#include "fusion/hooks.h"
#include "linalg/linalg.h"
#include "profile/profile.h"

#if CT_HAVE_HOST_BLAS
#include <cblas.h>

bool ct__gemm_host_available(void) { return true; }

struct ct__region {
  cl_mem mem;
  int64_t lo, hi;        /* element range [lo, hi) */
  bool write;
  char *base;            /* mapped pointer of element lo */
};

static void ct__extent(const struct ct__gemm_mat *x, int64_t rows, int64_t cols, const struct ct__gemm_op *op,
                       int64_t *lo, int64_t *hi) {
  int64_t r = x->trans ? cols : rows, c = x->trans ? rows : cols;
  int64_t last = x->off + (r - 1) * x->ld + (c - 1);
  for (int i = 0; i < op->nbatch; i++) last += (op->bshape[i] - 1) * x->bstride[i];
  *lo = x->off;
  *hi = last + 1;
}

/* C's m rows at pc (ld apart) = bias_beta * the bias vector at pv (op's bias, before a product
 * with beta 1). */
static void ct__rows_from_bias(const struct ct__gemm_op *op, char *pc, const char *pv) {
  int64_t m = op->m, n = op->n, ld = op->c.ld, inc = op->bias.inc;
  if (op->dtype == CT_F64) {
    const double *v = (const double *)pv;
    double bb = op->bias_beta;
    for (int64_t i = 0; i < m; i++) {
      double *row = (double *)pc + i * ld;
      for (int64_t j = 0; j < n; j++) row[j] = bb * v[j * inc];
    }
    return;
  }
  const float *v = (const float *)pv;
  float bb = (float)op->bias_beta;
  if (bb == 1 && inc == 1) {
    for (int64_t i = 0; i < m; i++) memcpy((float *)pc + i * ld, v, (size_t)n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < m; i++) {
    float *row = (float *)pc + i * ld;
    for (int64_t j = 0; j < n; j++) row[j] = bb * v[j * inc];
  }
}

/* The products of op on host pointers to a, b and c's first elements (and the bias vector's,
 * pv, when op has one). */
static void ct__host_multiply(const struct ct__gemm_op *op, char *pa, char *pb, char *pc, const char *pv) {
  enum CBLAS_TRANSPOSE ta = op->a.trans ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = op->b.trans ? CblasTrans : CblasNoTrans;
  int64_t idx[CT_MAX_DIMS] = {0};
  /* One product's size decides (a batch runs its products one after the other). */
  bool one = ct__host_blas_small_begin(op->m * op->n * op->k);
  for (;;) {
    int64_t ao = 0, bo = 0, co = 0;
    for (int i = 0; i < op->nbatch; i++) {
      ao += idx[i] * op->a.bstride[i];
      bo += idx[i] * op->b.bstride[i];
      co += idx[i] * op->c.bstride[i];
    }
    if (pv) ct__rows_from_bias(op, pc + co * (int64_t)ct_dtype_size(op->dtype), pv);
    if (op->dtype == CT_F64)
      cblas_dgemm(CblasRowMajor, ta, tb, (int)op->m, (int)op->n, (int)op->k, op->alpha, (const double *)pa + ao,
                  (int)op->a.ld, (const double *)pb + bo, (int)op->b.ld, op->beta, (double *)pc + co,
                  (int)op->c.ld);
    else
      cblas_sgemm(CblasRowMajor, ta, tb, (int)op->m, (int)op->n, (int)op->k, (float)op->alpha,
                  (const float *)pa + ao, (int)op->a.ld, (const float *)pb + bo, (int)op->b.ld, (float)op->beta,
                  (float *)pc + co, (int)op->c.ld);
    int i = op->nbatch - 1;
    for (; i >= 0; i--) {
      if (++idx[i] < op->bshape[i]) break;
      idx[i] = 0;
    }
    if (i < 0) break;
  }
  ct__host_blas_small_end(one);
}

/* Distinct buffers of a, b, c and the bias (at most CT__NMAT) with the element range each is
 * used over; which[3] is -1 without a bias. */
#define CT__NMAT 4
static int ct__regions(const struct ct__gemm_op *op, struct ct__region reg[CT__NMAT], int which[CT__NMAT]) {
  const struct ct__gemm_mat *mats[3] = {&op->a, &op->b, &op->c};
  int64_t dims[3][2] = {{op->m, op->k}, {op->k, op->n}, {op->m, op->n}};
  int nreg = 0;
  which[3] = -1;
  for (int i = 0; i < (op->bias.mem ? 4 : 3); i++) {
    int64_t lo, hi;
    cl_mem mem;
    if (i < 3) {
      ct__extent(mats[i], dims[i][0], dims[i][1], op, &lo, &hi);
      mem = mats[i]->mem;
    } else {
      lo = op->bias.off;
      hi = lo + (op->n - 1) * op->bias.inc + 1;
      mem = op->bias.mem;
    }
    int j = 0;
    for (; j < nreg; j++)
      if (reg[j].mem == mem) break;
    if (j == nreg) {
      reg[nreg++] = (struct ct__region){mem, lo, hi, i == 2, NULL};
    } else {
      if (lo < reg[j].lo) reg[j].lo = lo;
      if (hi > reg[j].hi) reg[j].hi = hi;
      reg[j].write |= i == 2;
    }
    which[i] = j;
  }
  return nreg;
}

/* ---- The native-kernel path (host_native.c) ---- */

/* Part i of nparts of op (nparts > 1), in *part: the outer batch dim's entries when there are
 * at least nparts of them, else C's rows (m >= n) or columns in multiples of 16. False when
 * the part is empty. */
static bool ct__gemm_part(const struct ct__gemm_op *op, int64_t i, int64_t nparts, struct ct__gemm_op *part) {
  *part = *op;
  if (op->nbatch > 0) {
    int64_t per = (op->bshape[0] + nparts - 1) / nparts, lo = i * per;
    int64_t hi = lo + per < op->bshape[0] ? lo + per : op->bshape[0];
    if (lo >= hi) return false;
    part->bshape[0] = hi - lo;
    part->a.off += lo * op->a.bstride[0];
    part->b.off += lo * op->b.bstride[0];
    part->c.off += lo * op->c.bstride[0];
    return true;
  }
  bool rows = op->m >= op->n;
  int64_t len = rows ? op->m : op->n, per = (len + nparts - 1) / nparts;
  per = (per + 15) / 16 * 16;
  int64_t lo = i * per, hi = lo + per < len ? lo + per : len;
  if (lo >= hi) return false;
  if (rows) {
    part->m = hi - lo;
    part->a.off += op->a.trans ? lo : lo * op->a.ld;
    part->c.off += lo * op->c.ld;
  } else {
    part->n = hi - lo;
    part->b.off += op->b.trans ? lo * op->b.ld : lo;
    part->c.off += lo;
    part->bias.off += lo * op->bias.inc;
  }
  return true;
}

/* The GEMM command's arguments: the op (its offsets from its buffers' starts), which of the
 * command's buffers each operand is in, and the parts it is cut into for its team. */
struct ct__native_gemm {
  struct ct__gemm_op op;
  int which[CT__NMAT];            /* op's a, b, c, bias: index of their buffer (bias: -1 if none) */
  struct ct__team *team;          /* NULL: no helper */
  uint64_t seq;
  int64_t nparts;
};

struct ct__gemm_run {
  const struct ct__native_gemm *g;
  char *const *base;
};

static void ct__gemm_run_op(const struct ct__native_gemm *g, const struct ct__gemm_op *op, char *const *base) {
  int64_t es = (int64_t)ct_dtype_size(op->dtype);
  ct__host_multiply(op, base[g->which[0]] + op->a.off * es, base[g->which[1]] + op->b.off * es,
                    base[g->which[2]] + op->c.off * es, g->which[3] < 0 ? NULL : base[g->which[3]] + op->bias.off * es);
}

static void ct__gemm_run_part(void *ctx, int64_t i) {
  struct ct__gemm_run *r = ctx;
  struct ct__gemm_op part;
  if (ct__gemm_part(&r->g->op, i, r->g->nparts, &part)) ct__gemm_run_op(r->g, &part, r->base);
}

static void ct__gemm_native(void *p, char *const *base) {
  struct ct__native_gemm *g = p;
  if (g->nparts <= 1) {
    ct__gemm_run_op(g, &g->op, base);
    return;
  }
  struct ct__gemm_run r = {g, base};
  ct__team_run(g->team, g->seq, ct__gemm_run_part, &r, g->nparts);
}

/* The GEMM command's arguments and buffers for op (sub-buffers replaced by their parents);
 * false when op needs the mapped path instead. */
static bool ct__gemm_native_args(struct ct__native_gemm *g, cl_mem *mems, int *nreg, const struct ct__gemm_op *op) {
  memset(g, 0, sizeof *g);
  g->op = *op;
  size_t es = ct_dtype_size(op->dtype);
  if (!ct__native_unwrap(&g->op.a.mem, &g->op.a.off, es) || !ct__native_unwrap(&g->op.b.mem, &g->op.b.off, es) ||
      !ct__native_unwrap(&g->op.c.mem, &g->op.c.off, es) ||
      !ct__native_unwrap(&g->op.bias.mem, &g->op.bias.off, es))
    return false;
  struct ct__region reg[CT__NMAT];
  *nreg = ct__regions(&g->op, reg, g->which);
  for (int j = 0; j < *nreg; j++) mems[j] = reg[j].mem;
  return true;
}

static const char *ct__gemm_prof(const struct ct__gemm_op *op) {
  return op->dtype == CT_F64 ? "cblas_dgemm (host)" : "cblas_sgemm (host)";
}

/* ---- Parts ----
 * OpenBLAS 0.3.21's own second thread gains little on the skinny products of the example models
 * (and spins beside the kernels afterwards: host_blas_core.c), while two single-threaded halves
 * on two threads of their own nearly halve the time: 2048 x 64 x 256 in 429 us against 558 on
 * one thread and 464 on OpenBLAS's two (standalone, same sitting). So a product from
 * ct__gemm_split_min_madds up to CT__BLAS_ONE_THREAD_BELOW multiply-adds is cut into parts of
 * at least 2^19 multiply-adds (at most 4) that the command and its team's helper share
 * (host_native.c). Each part writes its own rows (or columns, or batch entries) of C, computed
 * as the whole product computes them. */
int64_t ct__gemm_split_min_madds = (int64_t)1 << 20;

static int64_t ct__gemm_nparts(const struct ct__gemm_op *op) {
  int64_t count = 1;
  for (int i = 0; i < op->nbatch; i++) count *= op->bshape[i];
  int64_t one = op->m * op->n * op->k, all = count * one;
  if (one >= CT__BLAS_ONE_THREAD_BELOW || all < ct__gemm_split_min_madds) return 1;
  int64_t n = all >> 19;
  n = n < 2 ? 2 : n > 4 ? 4 : n;
  if (op->nbatch > 0) return op->bshape[0] >= 2 ? (op->bshape[0] < n ? op->bshape[0] : n) : 1;
  int64_t len = op->m >= op->n ? op->m : op->n;
  while (n > 1 && len < 16 * n) n--;
  return n;
}

/* The GEMM as a native kernel on d's queue: ordered after the commands before it like any
 * kernel, and no host round trip. A blocking map and unmap cost PoCL 35-80 us of thread
 * hand-offs, more than a whole 64^3 product (5 us in OpenBLAS). *done is false when op needs
 * the mapped path instead (then nothing was enqueued). */
static ct_status ct__gemm_host_native(ct_device *d, const struct ct__gemm_op *op, bool *done) {
  struct ct__native_gemm g;
  cl_mem mems[CT__NMAT];
  int nreg = 0;
  *done = ct__gemm_native_args(&g, mems, &nreg, op);
  if (!*done) return CT_OK;
  g.nparts = ct__gemm_nparts(op);
  if (g.nparts > 1) CT__TRY(ct__team_call(&g.team, &g.seq, d, op->fn));
  ct_status st = ct__native_enqueue(d, ct__device_queue(d), ct__gemm_native, &g, sizeof g, nreg, mems, 0, NULL, NULL,
                                    ct__gemm_prof(op), op->fn);
  if (st != CT_OK) ct__team_cancel(g.team, g.seq);
  return st;
}

ct_status ct__gemm_host(ct_device *d, const struct ct__gemm_op *op) {
  ct__host_blas_prepare();
  /* CBLAS takes int sizes (OpenBLAS's default, 32-bit integer interface). */
  if (op->m > INT_MAX || op->n > INT_MAX || op->k > INT_MAX || op->a.ld > INT_MAX || op->b.ld > INT_MAX ||
      op->c.ld > INT_MAX)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: the host BLAS takes 32-bit sizes; m=%lld n=%lld k=%lld is too "
                     "large for it (use CLTENSOR_GEMM=clblast)", op->fn, (long long)op->m, (long long)op->n,
                     (long long)op->k);
  if (d->native_kernels) {
    bool done;
    ct_status st = ct__gemm_host_native(d, op, &done);
    if (st != CT_OK || done) return st;
  }

  size_t es = ct_dtype_size(op->dtype);
  /* One mapping per buffer: OpenCL leaves overlapping maps with writes undefined, and the
   * allocator hands out ranges of shared buffers, so operands often share one. */
  struct ct__region reg[CT__NMAT];
  int which[CT__NMAT];
  int nreg = ct__regions(op, reg, which);
  CT__TRY(ct__deferred_realize(op->fn));
  cl_command_queue q = ct__device_queue(d);
  ct_status st = CT_OK;
  int mapped = 0;
  /* A blocking map on the in-order queue waits for every kernel queued before, so the
   * operands are complete when the host reads them. */
  for (; mapped < nreg; mapped++) {
    struct ct__region *r = &reg[mapped];
    cl_int err;
    void *p = clEnqueueMapBuffer(q, r->mem, CL_TRUE, r->write ? CL_MAP_READ | CL_MAP_WRITE : CL_MAP_READ,
                                 (size_t)r->lo * es, (size_t)(r->hi - r->lo) * es, 0, NULL, NULL, &err);
    if (!p) {
      st = ct__cl_error(err, "%s: mapping %lld bytes for the host BLAS on %s", op->fn,
                        (long long)((r->hi - r->lo) * (int64_t)es), d->spec);
      break;
    }
    r->base = p;
  }
  if (st == CT_OK) {
    char *pa = reg[which[0]].base + (op->a.off - reg[which[0]].lo) * (int64_t)es;
    char *pb = reg[which[1]].base + (op->b.off - reg[which[1]].lo) * (int64_t)es;
    char *pc = reg[which[2]].base + (op->c.off - reg[which[2]].lo) * (int64_t)es;
    char *pv = which[3] < 0 ? NULL : reg[which[3]].base + (op->bias.off - reg[which[3]].lo) * (int64_t)es;
    /* No OpenCL command runs this work, so the profiler gets its host time. */
    bool timed = ct__profile_active();
    struct timespec t0, t1;
    if (timed) clock_gettime(CLOCK_MONOTONIC, &t0);
    ct__host_multiply(op, pa, pb, pc, pv);
    if (timed) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      int64_t ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
      ct__profile_record_host(d, op->dtype == CT_F64 ? "cblas_dgemm (host)" : "cblas_sgemm (host)",
                              ns > 0 ? (uint64_t)ns : 0);
    }
  }
  for (int i = 0; i < mapped; i++) {
    cl_int err = clEnqueueUnmapMemObject(q, reg[i].mem, reg[i].base, 0, NULL, NULL);
    if (err != CL_SUCCESS && st == CT_OK)
      st = ct__cl_error(err, "%s: unmapping the host BLAS operands on %s", op->fn, d->spec);
  }
  return st;
}

#else

bool ct__gemm_host_available(void) { return false; }

ct_status ct__gemm_host(ct_device *d, const struct ct__gemm_op *op) {
  return ct__error(CT_ERR_UNSUPPORTED, "%s: libcltensor was built without a host BLAS, so GEMM on %s can't "
                   "take the host route", op->fn, d->spec);
}

#endif
