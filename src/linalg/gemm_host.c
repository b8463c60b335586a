/* The host-BLAS route: on devices whose memory is the host's (PoCL's CPU device), the host CBLAS
 * multiplies the buffers' memory, as a native kernel in queue order where the device runs them,
 * else on blocking maps from the calling thread. Built only with -Dhost_blas
 * (CT_HAVE_HOST_BLAS). docs/GEMM.md, "Routes". */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
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

/* The products of op on host pointers to a, b and c's first elements. */
static void ct__host_multiply(const struct ct__gemm_op *op, char *pa, char *pb, char *pc) {
  enum CBLAS_TRANSPOSE ta = op->a.trans ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = op->b.trans ? CblasTrans : CblasNoTrans;
  int64_t idx[CT_MAX_DIMS] = {0};
  for (;;) {
    int64_t ao = 0, bo = 0, co = 0;
    for (int i = 0; i < op->nbatch; i++) {
      ao += idx[i] * op->a.bstride[i];
      bo += idx[i] * op->b.bstride[i];
      co += idx[i] * op->c.bstride[i];
    }
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
}

/* A native kernel's argument block. OpenCL copies it at the enqueue and, before the function
 * runs, overwrites each base[j] (a cl_mem handle until then) with the device's pointer to that
 * buffer, which on a host-unified CPU device is host memory. */
struct ct__native_gemm {
  struct ct__gemm_op op;
  char *base[3];
  int which[3];      /* op's a, b, c: index into base */
};

static void CL_CALLBACK ct__gemm_native(void *p) {
  struct ct__native_gemm *g = p;
  int64_t es = (int64_t)ct_dtype_size(g->op.dtype);
  ct__host_multiply(&g->op, g->base[g->which[0]] + g->op.a.off * es, g->base[g->which[1]] + g->op.b.off * es,
                    g->base[g->which[2]] + g->op.c.off * es);
}

/* Distinct buffers of a, b and c (at most 3) with the element range each is used over. */
static int ct__regions(const struct ct__gemm_op *op, struct ct__region reg[3], int which[3]) {
  const struct ct__gemm_mat *mats[3] = {&op->a, &op->b, &op->c};
  int64_t dims[3][2] = {{op->m, op->k}, {op->k, op->n}, {op->m, op->n}};
  int nreg = 0;
  for (int i = 0; i < 3; i++) {
    int64_t lo, hi;
    ct__extent(mats[i], dims[i][0], dims[i][1], op, &lo, &hi);
    int j = 0;
    for (; j < nreg; j++)
      if (reg[j].mem == mats[i]->mem) break;
    if (j == nreg) {
      reg[nreg++] = (struct ct__region){mats[i]->mem, lo, hi, i == 2, NULL};
    } else {
      if (lo < reg[j].lo) reg[j].lo = lo;
      if (hi > reg[j].hi) reg[j].hi = hi;
      reg[j].write |= i == 2;
    }
    which[i] = j;
  }
  return nreg;
}

/* The GEMM as a native kernel on d's queue: ordered after the commands before it like any
 * kernel, and no host round trip. A blocking map and unmap cost PoCL 35-80 us of thread
 * hand-offs, more than a whole 64^3 product (5 us in OpenBLAS). */
static ct_status ct__gemm_host_native(ct_device *d, const struct ct__gemm_op *op) {
  struct ct__region reg[3];
  struct ct__native_gemm g;
  memset(&g, 0, sizeof g);
  g.op = *op;
  int nreg = ct__regions(op, reg, g.which);
  cl_mem mems[3];
  const void *locs[3];
  for (int j = 0; j < nreg; j++) {
    mems[j] = reg[j].mem;
    memcpy(&g.base[j], &reg[j].mem, sizeof reg[j].mem);
    locs[j] = &g.base[j];
  }
  cl_event ev;
  cl_event *evp = ct__profile_event(d, &ev);
  cl_int err = clEnqueueNativeKernel(ct__device_queue(d), ct__gemm_native, &g, sizeof g, (cl_uint)nreg, mems,
                                     locs, 0, NULL, evp);
  if (err != CL_SUCCESS)
    return ct__cl_error(err, "%s: enqueueing the host BLAS on %s", op->fn, d->spec);
  if (evp) ct__profile_record(d, op->dtype == CT_F64 ? "cblas_dgemm (host)" : "cblas_sgemm (host)", ev);
  return CT_OK;
}

ct_status ct__gemm_host(ct_device *d, const struct ct__gemm_op *op) {
  /* CBLAS takes int sizes (OpenBLAS's default, 32-bit integer interface). */
  if (op->m > INT_MAX || op->n > INT_MAX || op->k > INT_MAX || op->a.ld > INT_MAX || op->b.ld > INT_MAX ||
      op->c.ld > INT_MAX)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: the host BLAS takes 32-bit sizes; m=%lld n=%lld k=%lld is too "
                     "large for it (use CLTENSOR_GEMM=clblast)", op->fn, (long long)op->m, (long long)op->n,
                     (long long)op->k);
  if (d->native_kernels) return ct__gemm_host_native(d, op);

  size_t es = ct_dtype_size(op->dtype);
  /* One mapping per buffer: OpenCL leaves overlapping maps with writes undefined, and the
   * allocator hands out ranges of shared buffers, so operands often share one. */
  struct ct__region reg[3];
  int which[3];
  int nreg = ct__regions(op, reg, which);
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
    /* No OpenCL command runs this work, so the profiler gets its host time. */
    bool timed = ct__profile_active();
    struct timespec t0, t1;
    if (timed) clock_gettime(CLOCK_MONOTONIC, &t0);
    ct__host_multiply(op, pa, pb, pc);
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
