/* The host-BLAS route: on devices whose memory is the host's (PoCL's CPU device), the host CBLAS
 * multiplies the buffers' memory, as a native kernel in queue order where the device runs them,
 * else on blocking maps from the calling thread. Built only with -Dhost_blas
 * (CT_HAVE_HOST_BLAS). docs/GEMM.md, "Routes". */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/env.h"
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

/* ---- The native-kernel path ----
 * OpenCL pairs mem_list[j] with args_mem_loc[j]: the pointer to buffer j replaces the handle at
 * location j. PoCL 3.1 does not. It sorts the buffers of every command by creation (its object
 * id) and then writes the i-th pointer of that order into args_mem_loc[i]: whenever the listed
 * buffers were not created in list order, the operands trade places. The allocator's cached
 * segments are reused in any order, so which product went wrong depended on allocation
 * history (f64 batches of a few MiB; one run in nine of eight threads' 128x128 f32 products).
 * It also passes a sub-buffer's parent instead of the sub-buffer, i.e. the parent's pointer.
 * (Newer PoCL keeps the list order.) So the GEMM trusts only what holds on every reading:
 *   - a command with one buffer gets that buffer's pointer: with n > 1 buffers, n - 1 probe
 *     commands of one buffer each record their pointers, in queue order before the GEMM, and the
 *     GEMM takes its last buffer's pointer as the one of its own n that no probe reported;
 *   - the GEMM's command lists all n buffers, so it is ordered after their writers and they stay
 *     alive (the implementation retains them) until it has run;
 *   - sub-buffers are replaced by their parent and origin before any of this. */

/* Pointers that probe commands hand to the GEMM command after them. Freed when the GEMM's
 * command completes or is terminated (an event callback: a command skipped after an earlier
 * failure never runs its function), or by the enqueuing thread after a clFinish when the GEMM
 * could not be enqueued. */
struct ct__native_ptrs {
  char *base[CT__NMAT];
};

static atomic_long ct__ptrs_live;

long ct__gemm_host_blocks_live(void) { return atomic_load(&ct__ptrs_live); }

static struct ct__native_ptrs *ct__ptrs_new(void) {
  struct ct__native_ptrs *p = calloc(1, sizeof *p);
  if (p) atomic_fetch_add(&ct__ptrs_live, 1);
  return p;
}

static void ct__ptrs_free(struct ct__native_ptrs *p) {
  if (!p) return;
  atomic_fetch_sub(&ct__ptrs_live, 1);
  free(p);
}

/* CL_COMPLETE fires for a command that ran and, with a negative status, for one that was
 * terminated: either way nothing reads the block any more. */
static void CL_CALLBACK ct__ptrs_release(cl_event ev, cl_int status, void *p) {
  (void)ev;
  (void)status;
  ct__ptrs_free(p);
}

struct ct__native_probe {
  struct ct__native_ptrs *ptrs;
  int j;
  char *base;          /* the buffer's handle until the implementation writes its pointer here */
};

static void CL_CALLBACK ct__native_probe_fn(void *p) {
  struct ct__native_probe *pr = p;
  pr->ptrs->base[pr->j] = pr->base;
}

/* The GEMM command's argument block. OpenCL copies it at the enqueue and, before the function
 * runs, overwrites base[0..nreg-1] (cl_mem handles until then) with the device's pointers to
 * those buffers (on a host-unified CPU device, host memory), in an order that may not be ours. */
struct ct__native_gemm {
  struct ct__gemm_op op;
  int nreg;
  struct ct__native_ptrs *ptrs;   /* the probes' pointers; NULL when nreg == 1 */
  char *base[CT__NMAT];
  int which[CT__NMAT];            /* op's a, b, c, bias: index of their buffer (bias: -1 if none) */
};

static void CL_CALLBACK ct__gemm_native(void *p) {
  struct ct__native_gemm *g = p;
  char *base[CT__NMAT] = {g->base[0], NULL, NULL, NULL};
  if (g->ptrs) {
    int last = g->nreg - 1;
    for (int j = 0; j < last; j++) base[j] = g->ptrs->base[j];
    for (int i = 0; i < g->nreg; i++) {
      bool probed = false;
      for (int j = 0; j < last; j++) probed |= g->base[i] == base[j];
      if (!probed) base[last] = g->base[i];
    }
  }
  /* A probe that did not run (it failed) left its pointer NULL: BLAS must not get it. The
   * failure shows in the probe's command status; there is no way to report it from here. */
  for (int j = 0; j < g->nreg; j++)
    if (!base[j]) return;
  int64_t es = (int64_t)ct_dtype_size(g->op.dtype);
  ct__host_multiply(&g->op, base[g->which[0]] + g->op.a.off * es, base[g->which[1]] + g->op.b.off * es,
                    base[g->which[2]] + g->op.c.off * es,
                    g->which[3] < 0 ? NULL : base[g->which[3]] + g->op.bias.off * es);
}

/* Replaces a sub-buffer operand by its parent and origin. False when the origin is not a whole
 * number of elements (then only the mapped path can address it). */
static bool ct__unwrap_sub_buffer(cl_mem *mem, int64_t *off, size_t es) {
  cl_mem parent = NULL;
  size_t origin = 0;
  if (!*mem) return true;
  if (clGetMemObjectInfo(*mem, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL) != CL_SUCCESS || !parent)
    return true;
  if (clGetMemObjectInfo(*mem, CL_MEM_OFFSET, sizeof origin, &origin, NULL) != CL_SUCCESS || origin % es)
    return false;
  *mem = parent;
  *off += (int64_t)(origin / es);
  return true;
}

/* Enqueues the probe for buffer j of ptrs, after the nwait events of wait. */
static cl_int ct__enqueue_probe(cl_command_queue q, struct ct__native_ptrs *ptrs, int j, cl_mem mem, cl_uint nwait,
                                const cl_event *wait) {
  struct ct__native_probe pr = {ptrs, j, NULL};
  memcpy(&pr.base, &mem, sizeof mem);
  const void *loc = &pr.base;
  return clEnqueueNativeKernel(q, ct__native_probe_fn, &pr, sizeof pr, 1, &mem, &loc, nwait, wait, NULL);
}

/* The GEMM as a native kernel on queue q of d (its own queue, or the side queue of a split):
 * ordered after the commands before it like any kernel, and no host round trip. A blocking map
 * and unmap cost PoCL 35-80 us of thread hand-offs, more than a whole 64^3 product (5 us in
 * OpenBLAS). Its first command waits for the nwait events of wait; *done_ev (when not NULL)
 * receives the GEMM command's event. *done is false when op needs the mapped path instead (then
 * nothing was enqueued). */
static ct_status ct__gemm_host_native(ct_device *d, cl_command_queue q, const struct ct__gemm_op *op, cl_uint nwait,
                                      const cl_event *wait, cl_event *done_ev, bool *done) {
  struct ct__native_gemm g;
  memset(&g, 0, sizeof g);
  g.op = *op;
  size_t es = ct_dtype_size(op->dtype);
  *done = ct__unwrap_sub_buffer(&g.op.a.mem, &g.op.a.off, es) &&
          ct__unwrap_sub_buffer(&g.op.b.mem, &g.op.b.off, es) &&
          ct__unwrap_sub_buffer(&g.op.c.mem, &g.op.c.off, es) &&
          ct__unwrap_sub_buffer(&g.op.bias.mem, &g.op.bias.off, es);
  if (!*done) return CT_OK;
  struct ct__region reg[CT__NMAT];
  g.nreg = ct__regions(&g.op, reg, g.which);
  cl_mem mems[CT__NMAT];
  const void *locs[CT__NMAT];
  for (int j = 0; j < g.nreg; j++) {
    mems[j] = reg[j].mem;
    memcpy(&g.base[j], &reg[j].mem, sizeof reg[j].mem);
    locs[j] = &g.base[j];
  }
  CT__TRY(ct__deferred_realize(op->fn));
  cl_int err = CL_SUCCESS;
  if (g.nreg > 1) {
    g.ptrs = ct__ptrs_new();
    if (!g.ptrs) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the host BLAS on %s", op->fn,
                                  d->spec);
    for (int j = 0; j < g.nreg - 1 && err == CL_SUCCESS; j++)
      err = ct__enqueue_probe(q, g.ptrs, j, mems[j], j == 0 ? nwait : 0, j == 0 ? wait : NULL);
  }
  cl_event ev = NULL;
  cl_event *evp = ct__profile_event(d, &ev);
  bool profiled = evp != NULL;
  /* With probes, the GEMM's event frees their block (one command alone needs none). */
  if (g.ptrs || done_ev) evp = &ev;
  if (err == CL_SUCCESS)
    err = clEnqueueNativeKernel(q, ct__gemm_native, &g, sizeof g, (cl_uint)g.nreg, mems, locs, g.ptrs ? 0 : nwait,
                                g.ptrs ? NULL : wait, evp);
  if (err != CL_SUCCESS) {
    /* Probes already enqueued still write into ptrs. */
    if (g.ptrs) {
      clFinish(q);
      ct__ptrs_free(g.ptrs);
    }
    return ct__cl_error(err, "%s: enqueueing the host BLAS on %s", op->fn, d->spec);
  }
  if (g.ptrs && clSetEventCallback(ev, CL_COMPLETE, ct__ptrs_release, g.ptrs) != CL_SUCCESS) {
    /* No callback: wait for the command (run or terminated) and free the block here. */
    clWaitForEvents(1, &ev);
    ct__ptrs_free(g.ptrs);
  }
  if (done_ev) {
    clRetainEvent(ev);
    *done_ev = ev;
  }
  if (profiled) ct__profile_record(d, op->dtype == CT_F64 ? "cblas_dgemm (host)" : "cblas_sgemm (host)", ev);
  else if (ev) clReleaseEvent(ev);
  return CT_OK;
}

/* ---- Two halves at once ----
 * OpenBLAS 0.3.21's own second thread gains little on the skinny products of the example models
 * (and spins beside the kernels afterwards: host_blas_core.c), while two single-threaded halves
 * on two threads of their own nearly halve the time: 2048 x 64 x 256 in 429 us against 558 on
 * one thread and 464 on OpenBLAS's two (standalone, same sitting). PoCL runs commands of two
 * queues of a device at once on its worker threads, so a product from ct__gemm_split_min_madds
 * up to CT__BLAS_ONE_THREAD_BELOW multiply-adds is cut in two: the half on the side queue waits
 * for a marker of everything enqueued before on the device's queue, the other half follows on
 * the device's queue, and a barrier there waits for the side half, so the queue's order is as
 * with one command. Each half writes its own rows (or columns, or batch entries) of C. */
int64_t ct__gemm_split_min_madds = (int64_t)1 << 22;

/* *side: the side queue of d's GEMM state, created on first use; NULL where the device cannot
 * run two commands at once (a single compute unit), where it cannot be created, or with
 * CLTENSOR_GEMM_SPLIT=0. An invalid CLTENSOR_GEMM_SPLIT is reported by every product. */
static ct_status ct__side_queue(cl_command_queue *side, ct_device *d, const char *fn) {
  *side = NULL;
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  bool on = true;
  CT__TRY(ct__env_bool(fn, "CLTENSOR_GEMM_SPLIT", true, &on));
  if (!on) return CT_OK;
  int state = atomic_load(&s->side_state);
  if (state == 0) {
    pthread_mutex_lock(&s->side_lock);
    state = atomic_load(&s->side_state);
    if (state == 0) {
      cl_int err = CL_SUCCESS;
      if (d->props.compute_units >= 2)
        s->side_queue = clCreateCommandQueue(ct__device_context(d), d->id,
                                             d->queue_profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
      state = s->side_queue ? 1 : -1;
      atomic_store(&s->side_state, state);
    }
    pthread_mutex_unlock(&s->side_lock);
  }
  if (state == 1) *side = s->side_queue;
  return CT_OK;
}

/* Cuts op into h1 and h2 along its longest independent dim: the outer batch dim, else the rows
 * of C (m) or its columns (n), the second half starting at a multiple of 16. False when op is
 * outside the split's sizes. */
static bool ct__gemm_halves(const struct ct__gemm_op *op, struct ct__gemm_op *h1, struct ct__gemm_op *h2) {
  int64_t count = 1;
  for (int i = 0; i < op->nbatch; i++) count *= op->bshape[i];
  int64_t one = op->m * op->n * op->k;
  if (one >= CT__BLAS_ONE_THREAD_BELOW || count * one < ct__gemm_split_min_madds) return false;
  *h1 = *op;
  *h2 = *op;
  if (op->nbatch > 0 && op->bshape[0] >= 2) {
    int64_t h = op->bshape[0] / 2;
    h1->bshape[0] = h;
    h2->bshape[0] = op->bshape[0] - h;
    h2->a.off += h * op->a.bstride[0];
    h2->b.off += h * op->b.bstride[0];
    h2->c.off += h * op->c.bstride[0];
    return true;
  }
  if (op->nbatch > 0) return false; /* a batch whose outer dim is 1 was simplified away */
  if (op->m >= op->n) {
    if (op->m < 32) return false;
    int64_t h = (op->m / 2 + 15) / 16 * 16;
    h1->m = h;
    h2->m = op->m - h;
    h2->a.off += op->a.trans ? h : h * op->a.ld;
    h2->c.off += h * op->c.ld;
  } else {
    if (op->n < 32) return false;
    int64_t h = (op->n / 2 + 15) / 16 * 16;
    h1->n = h;
    h2->n = op->n - h;
    h2->b.off += op->b.trans ? h * op->b.ld : h;
    h2->c.off += h;
    h2->bias.off += h * op->bias.inc;
  }
  return true;
}

/* op as two halves at once (above); *done false when it is not split (nothing enqueued). */
static ct_status ct__gemm_host_two(ct_device *d, const struct ct__gemm_op *op, bool *done) {
  *done = false;
  struct ct__gemm_op h1, h2;
  if (!ct__gemm_halves(op, &h1, &h2)) return CT_OK;
  cl_command_queue side;
  CT__TRY(ct__side_queue(&side, d, op->fn));
  if (!side) return CT_OK;
  CT__TRY(ct__deferred_realize(op->fn));
  cl_command_queue q = ct__device_queue(d);
  cl_event start = NULL, ev2 = NULL;
  if (clEnqueueMarkerWithWaitList(q, 0, NULL, &start) != CL_SUCCESS) return CT_OK; /* one command, then */
  ct_status st = ct__gemm_host_native(d, side, &h2, 1, &start, &ev2, done);
  clReleaseEvent(start);
  if (st != CT_OK || !*done) return st;
  clFlush(side);
  /* The same buffers as h2's, so h1 takes the native path too. */
  st = ct__gemm_host_native(d, q, &h1, 0, NULL, NULL, done);
  cl_int err = clEnqueueBarrierWithWaitList(q, 1, &ev2, NULL);
  if (err != CL_SUCCESS) {
    /* Nothing else orders the queue after the side half: wait for it here. */
    clWaitForEvents(1, &ev2);
  }
  clReleaseEvent(ev2);
  *done = true;
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
    ct_status st = ct__gemm_host_two(d, op, &done);
    if (st != CT_OK || done) return st;
    st = ct__gemm_host_native(d, ct__device_queue(d), op, 0, NULL, NULL, &done);
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

long ct__gemm_host_blocks_live(void) { return 0; }

ct_status ct__gemm_host(ct_device *d, const struct ct__gemm_op *op) {
  return ct__error(CT_ERR_UNSUPPORTED, "%s: libcltensor was built without a host BLAS, so GEMM on %s can't "
                   "take the host route", op->fn, d->spec);
}

#endif
