/* The CLBlast route: one GEMM description (linalg.h) to CLBlast calls. */
#include <clblast_c.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/error.h"
#include "cltensor/dtype.h"
#include "fusion/hooks.h"
#include "linalg/linalg.h"
#include "memory/alloc.h"
#include "profile/profile.h"

const char *ct__clblast_status_name(int status) {
  switch (status) {
#define CT__CLB(name) \
  case CLBlast##name: return "CLBlast" #name;
    CT__CLB(Success)
    CT__CLB(OpenCLCompilerNotAvailable)
    CT__CLB(TempBufferAllocFailure)
    CT__CLB(OpenCLOutOfResources)
    CT__CLB(OpenCLOutOfHostMemory)
    CT__CLB(OpenCLBuildProgramFailure)
    CT__CLB(InvalidValue)
    CT__CLB(InvalidCommandQueue)
    CT__CLB(InvalidMemObject)
    CT__CLB(InvalidBinary)
    CT__CLB(InvalidBuildOptions)
    CT__CLB(InvalidProgram)
    CT__CLB(InvalidProgramExecutable)
    CT__CLB(InvalidKernelName)
    CT__CLB(InvalidKernelDefinition)
    CT__CLB(InvalidKernel)
    CT__CLB(InvalidArgIndex)
    CT__CLB(InvalidArgValue)
    CT__CLB(InvalidArgSize)
    CT__CLB(InvalidKernelArgs)
    CT__CLB(InvalidLocalNumDimensions)
    CT__CLB(InvalidLocalThreadsTotal)
    CT__CLB(InvalidLocalThreadsDim)
    CT__CLB(InvalidGlobalOffset)
    CT__CLB(InvalidEventWaitList)
    CT__CLB(InvalidEvent)
    CT__CLB(InvalidOperation)
    CT__CLB(InvalidBufferSize)
    CT__CLB(InvalidGlobalWorkSize)
    CT__CLB(NotImplemented)
    CT__CLB(InvalidMatrixA)
    CT__CLB(InvalidMatrixB)
    CT__CLB(InvalidMatrixC)
    CT__CLB(InvalidVectorX)
    CT__CLB(InvalidVectorY)
    CT__CLB(InvalidDimension)
    CT__CLB(InvalidLeadDimA)
    CT__CLB(InvalidLeadDimB)
    CT__CLB(InvalidLeadDimC)
    CT__CLB(InvalidIncrementX)
    CT__CLB(InvalidIncrementY)
    CT__CLB(InsufficientMemoryA)
    CT__CLB(InsufficientMemoryB)
    CT__CLB(InsufficientMemoryC)
    CT__CLB(InsufficientMemoryX)
    CT__CLB(InsufficientMemoryY)
    CT__CLB(InsufficientMemoryTemp)
    CT__CLB(InvalidBatchCount)
    CT__CLB(InvalidOverrideKernel)
    CT__CLB(MissingOverrideParameter)
    CT__CLB(InvalidLocalMemUsage)
    CT__CLB(NoHalfPrecision)
    CT__CLB(NoDoublePrecision)
    CT__CLB(InvalidVectorScalar)
    CT__CLB(InsufficientMemoryScalar)
    CT__CLB(DatabaseError)
    CT__CLB(UnknownError)
    CT__CLB(UnexpectedError)
#undef CT__CLB
    default: return "CLBlastUnknownStatus";
  }
}

ct_status ct__clblast_error(int status, const char *fmt, ...) {
  char text[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  ct_status st;
  switch (status) {
    case CLBlastTempBufferAllocFailure:
    case CLBlastOpenCLOutOfResources:
    case CLBlastOpenCLOutOfHostMemory: st = CT_ERR_OUT_OF_MEMORY; break;
    case CLBlastOpenCLBuildProgramFailure:
    case CLBlastOpenCLCompilerNotAvailable: st = CT_ERR_KERNEL_BUILD; break;
    case CLBlastNoHalfPrecision:
    case CLBlastNoDoublePrecision:
    case CLBlastNotImplemented: st = CT_ERR_UNSUPPORTED; break;
    default:
      /* Argument errors (-1024 and below) mean this library called CLBlast wrongly. */
      st = status <= CLBlastNotImplemented ? CT_ERR_INTERNAL : CT_ERR_OPENCL;
      break;
  }
  return ct__error(st, "%s: %s (%d)", text, ct__clblast_status_name(status), status);
}

/* ---- How CLBlast 1.5 will treat a call ----
 * Its "indirect" GEMM copies (and transposes/pads) any matrix that is not already in the
 * kernel's preferred layout; GEMMK selects the kernel and so the layout. A row-major product
 * C = A B is the same memory as the column-major C^T = B^T A^T, so each call is issued in the
 * layout that needs fewer of those copies. */

struct ct__call {
  CLBlastLayout layout;
  bool ta, tb;                        /* CLBlast's A and B transposed */
  size_t m, n, k;
  const struct ct__gemm_mat *a, *b;   /* CLBlast's A and B */
};

static struct ct__call ct__make_call(const struct ct__gemm_op *op, bool col) {
  struct ct__call c;
  if (!col) {
    c = (struct ct__call){CLBlastLayoutRowMajor, op->a.trans, op->b.trans, (size_t)op->m, (size_t)op->n,
                          (size_t)op->k, &op->a, &op->b};
  } else {
    c = (struct ct__call){CLBlastLayoutColMajor, op->b.trans, op->a.trans, (size_t)op->n, (size_t)op->m,
                          (size_t)op->k, &op->b, &op->a};
  }
  return c;
}

/* CLBlast's ProcessArguments(): which matrices its indirect kernel GEMMK must copy-transpose,
 * and their first/second dimensions in memory. */
struct ct__plan {
  bool a_do, b_do, c_do;
  size_t a_one, a_two, b_one, b_two, c_one, c_two;
};

static struct ct__plan ct__plan_of(const struct ct__call *c, size_t gemmk) {
  bool col = c->layout == CLBlastLayoutColMajor;
  bool a_rot = col ? c->ta : !c->ta;
  bool b_rot = col ? c->tb : !c->tb;
  bool c_rot = !col;
  struct ct__plan p;
  p.a_do = a_rot != (gemmk == 1);
  p.b_do = b_rot != true;
  p.c_do = c_rot != (gemmk == 1);
  p.a_one = a_rot ? c->k : c->m;
  p.a_two = a_rot ? c->m : c->k;
  p.b_one = b_rot ? c->n : c->k;
  p.b_two = b_rot ? c->k : c->n;
  p.c_one = c_rot ? c->n : c->m;
  p.c_two = c_rot ? c->m : c->n;
  return p;
}

static size_t ct__ceil(size_t v, size_t m) { return (v + m - 1) / m * m; }

/* CLBlast 1.5's strided-batched indirect GEMM leaves a matrix in place when it needs no copy,
 * and then ignores that matrix's offset and batch stride (it assumes offset 0 and packed
 * batches). This says whether a matrix could hit that path with a wrong result. With the
 * parameters known (p != NULL) it follows CLBlast's test exactly; otherwise it relies on every
 * CLBlast tile size (MWG, NWG) being a multiple of 8, as in all of CLBlast's tuner spaces. */
static bool ct__batched_unsafe(const struct ct__gemm_mat *x, size_t one, size_t two, bool do_tr,
                               size_t one_i, size_t two_i, size_t tile_dim, int64_t bstride, bool known) {
  bool packed_ok = x->off == 0 && bstride == (int64_t)(one * two) && (size_t)x->ld == one;
  if (packed_ok) return false;
  if (known) return one == one_i && two == two_i && (size_t)x->ld == one && !do_tr;
  return (size_t)x->ld == one && tile_dim % 8 == 0;
}

/* One CLBlast call: plain (batch == 1) or strided batched; tmp, when not NULL, is the plain
 * call's scratch buffer for CLBlast's copies (see ct__clblast_call). */
static CLBlastStatusCode ct__clblast_call_unlocked(cl_command_queue *q, ct_dtype dt, const struct ct__call *c,
                                          double alpha, double beta, size_t a_off, size_t b_off,
                                          cl_mem cmem, size_t c_off, size_t ldc, size_t batch,
                                          size_t sa, size_t sb, size_t sc, cl_mem tmp, cl_event *ev) {
  CLBlastTranspose ta = c->ta ? CLBlastTransposeYes : CLBlastTransposeNo;
  CLBlastTranspose tb = c->tb ? CLBlastTransposeYes : CLBlastTransposeNo;
  cl_mem am = c->a->mem, bm = c->b->mem;
  size_t lda = (size_t)c->a->ld, ldb = (size_t)c->b->ld;
  if (dt == CT_F32) {
    if (batch == 1 && tmp)
      return CLBlastSgemmWithTempBuffer(c->layout, ta, tb, c->m, c->n, c->k, (float)alpha, am, a_off, lda, bm,
                                        b_off, ldb, (float)beta, cmem, c_off, ldc, q, ev, tmp);
    if (batch == 1)
      return CLBlastSgemm(c->layout, ta, tb, c->m, c->n, c->k, (float)alpha, am, a_off, lda, bm, b_off, ldb,
                          (float)beta, cmem, c_off, ldc, q, ev);
    return CLBlastSgemmStridedBatched(c->layout, ta, tb, c->m, c->n, c->k, (float)alpha, am, a_off, lda, sa,
                                      bm, b_off, ldb, sb, (float)beta, cmem, c_off, ldc, sc, batch, q, ev);
  }
  if (dt == CT_F64) {
    if (batch == 1 && tmp)
      return CLBlastDgemmWithTempBuffer(c->layout, ta, tb, c->m, c->n, c->k, alpha, am, a_off, lda, bm, b_off,
                                        ldb, beta, cmem, c_off, ldc, q, ev, tmp);
    if (batch == 1)
      return CLBlastDgemm(c->layout, ta, tb, c->m, c->n, c->k, alpha, am, a_off, lda, bm, b_off, ldb, beta,
                          cmem, c_off, ldc, q, ev);
    return CLBlastDgemmStridedBatched(c->layout, ta, tb, c->m, c->n, c->k, alpha, am, a_off, lda, sa, bm, b_off,
                                      ldb, sb, beta, cmem, c_off, ldc, sc, batch, q, ev);
  }
  cl_half ha = ct_f32_to_f16((float)alpha), hb = ct_f32_to_f16((float)beta);
  if (batch == 1 && tmp)
    return CLBlastHgemmWithTempBuffer(c->layout, ta, tb, c->m, c->n, c->k, ha, am, a_off, lda, bm, b_off, ldb, hb,
                                      cmem, c_off, ldc, q, ev, tmp);
  if (batch == 1)
    return CLBlastHgemm(c->layout, ta, tb, c->m, c->n, c->k, ha, am, a_off, lda, bm, b_off, ldb, hb, cmem,
                        c_off, ldc, q, ev);
  return CLBlastHgemmStridedBatched(c->layout, ta, tb, c->m, c->n, c->k, ha, am, a_off, lda, sa, bm, b_off, ldb,
                                    sb, hb, cmem, c_off, ldc, sc, batch, q, ev);
}

/* Bytes of scratch CLBlast's plain GEMM needs for this call (0: none, or it could not say). */
static size_t ct__clblast_temp_bytes(cl_command_queue *q, ct_dtype dt, const struct ct__call *c, size_t a_off,
                                     size_t b_off, size_t c_off, size_t ldc) {
  CLBlastTranspose ta = c->ta ? CLBlastTransposeYes : CLBlastTransposeNo;
  CLBlastTranspose tb = c->tb ? CLBlastTransposeYes : CLBlastTransposeNo;
  size_t lda = (size_t)c->a->ld, ldb = (size_t)c->b->ld, bytes = 0;
  CLBlastStatusCode st =
      dt == CT_F32   ? CLBlastSGemmTempBufferSize(c->layout, ta, tb, c->m, c->n, c->k, a_off, lda, b_off, ldb,
                                                  c_off, ldc, q, &bytes)
      : dt == CT_F64 ? CLBlastDGemmTempBufferSize(c->layout, ta, tb, c->m, c->n, c->k, a_off, lda, b_off, ldb,
                                                  c_off, ldc, q, &bytes)
                     : CLBlastHGemmTempBufferSize(c->layout, ta, tb, c->m, c->n, c->k, a_off, lda, b_off, ldb,
                                                  c_off, ldc, q, &bytes);
  return st == CLBlastSuccess ? bytes : 0;
}

/* Scratch for CLBlast's copies from the caching allocator. CLBlast 1.5 otherwise creates (and
 * drops) a fresh OpenCL buffer per call: on PoCL that is fresh host memory whose page faults
 * landed in the first copy kernel, which took 0.6-2.5 ms instead of ~0.6 ms for a 1024^2 f32
 * transpose (a tenth of the whole 1024^3 product). CLBlast takes the buffer from offset 0, so a
 * block that starts inside its segment is handed over as a sub-buffer. Returns NULL (CLBlast
 * then allocates as before, and reports its own failure) when there is no block or sub-buffer
 * to be had. */
static cl_mem ct__clblast_scratch(ct__block **blk, ct_device *d, size_t bytes) {
  *blk = NULL;
  if (bytes == 0) return NULL;
  if (ct__alloc(blk, d, bytes) != CT_OK) return NULL;
  cl_mem mem = (*blk)->mem;
  if ((*blk)->offset == 0 && clRetainMemObject(mem) == CL_SUCCESS) return mem;
  cl_buffer_region region = {(*blk)->offset, bytes};
  cl_int err = CL_SUCCESS;
  cl_mem sub = (*blk)->offset == 0 ? NULL
                                   : clCreateSubBuffer(mem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                                       &region, &err);
  if (!sub || err != CL_SUCCESS) {
    ct__free(*blk);
    *blk = NULL;
    return NULL;
  }
  return sub;
}

/* indirect: CLBlast may take its indirect path (false only when the parameters this library
 * installed put the product below the crossover), the one that needs scratch. */
static CLBlastStatusCode ct__clblast_call(cl_command_queue *q, ct_dtype dt, const struct ct__call *c,
                                          double alpha, double beta, size_t a_off, size_t b_off,
                                          cl_mem cmem, size_t c_off, size_t ldc, size_t batch,
                                          size_t sa, size_t sb, size_t sc, bool indirect, ct_device *d) {
  /* CLBlast 1.5 takes scratch from the caller for the plain GEMM only. */
  ct__block *blk = NULL;
  cl_mem tmp = NULL;
  if (batch == 1 && indirect) {
    pthread_mutex_lock(&ct__clblast_lock);
    size_t bytes = ct__clblast_temp_bytes(q, dt, c, a_off, b_off, c_off, ldc);
    pthread_mutex_unlock(&ct__clblast_lock);
    tmp = ct__clblast_scratch(&blk, d, bytes);
  }
  /* CLBlast hands back the event of its last kernel only; the marker before it lets the
   * profiler time the whole routine, its copy kernels included. */
  cl_event mark, done;
  cl_event *mp = ct__profile_event(d, &mark), *dp = ct__profile_event(d, &done);
  if (mp && clEnqueueMarkerWithWaitList(*q, 0, NULL, mp) != CL_SUCCESS) mark = NULL;
  pthread_mutex_lock(&ct__clblast_lock);
  CLBlastStatusCode st = ct__clblast_call_unlocked(q, dt, c, alpha, beta, a_off, b_off, cmem, c_off, ldc,
                                                   batch, sa, sb, sc, tmp, dp);
  if (st == CLBlastInsufficientMemoryTemp) /* the parameters changed since the size was asked */
    st = ct__clblast_call_unlocked(q, dt, c, alpha, beta, a_off, b_off, cmem, c_off, ldc, batch, sa, sb, sc,
                                   NULL, dp);
  pthread_mutex_unlock(&ct__clblast_lock);
  /* The queue is in order, so the block may go back to the cache at once: whatever is
   * enqueued next runs after CLBlast's kernels (src/memory/alloc.c). */
  if (tmp) clReleaseMemObject(tmp);
  ct__free(blk);
  if (st == CLBlastSuccess && dp) {
    char name[40];
    snprintf(name, sizeof name, "CLBlast%cgemm%s", dt == CT_F32 ? 'S' : dt == CT_F64 ? 'D' : 'H',
             batch > 1 ? "StridedBatched" : "");
    ct__profile_record_span(d, name, mark, done);
  } else {
    if (mp && mark) clReleaseEvent(mark);
    if (dp && done) clReleaseEvent(done);
  }
  return st;
}

/* Highest element index a matrix reaches (all strides are non-negative). */
static int64_t ct__last_index(const struct ct__gemm_mat *x, int64_t rows, int64_t cols, const struct ct__gemm_op *op) {
  int64_t r = x->trans ? cols : rows, c = x->trans ? rows : cols;
  int64_t last = x->off + (r - 1) * x->ld + (c - 1);
  for (int i = 0; i < op->nbatch; i++) last += (op->bshape[i] - 1) * x->bstride[i];
  return last;
}

ct_status ct__gemm_clblast(ct_device *d, const struct ct__gemm_state *s, const struct ct__gemm_op *op) {
  /* CLBlast passes offsets, leading dimensions and batch strides to its kernels as int. */
  int64_t reach = ct__last_index(&op->a, op->m, op->k, op);
  int64_t rb = ct__last_index(&op->b, op->k, op->n, op), rc = ct__last_index(&op->c, op->m, op->n, op);
  if (rb > reach) reach = rb;
  if (rc > reach) reach = rc;
  if (reach > INT_MAX)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: CLBlast addresses elements with 32-bit ints; this GEMM reaches "
                     "element %lld of its buffers on %s", op->fn, (long long)reach, d->spec);

  enum ct__prec pr = op->dtype == CT_F16 ? CT__PREC_F16 : op->dtype == CT_F32 ? CT__PREC_F32 : CT__PREC_F64;
  bool known = s->tuned[pr];
  const ct__gemm_params *p = &s->params[pr];
  size_t gemmk = known ? p->xgemm[CT__X_GEMMK] : 0;
  struct ct__call row = ct__make_call(op, false), col = ct__make_call(op, true);
  struct ct__plan pr_row = ct__plan_of(&row, gemmk), pr_col = ct__plan_of(&col, gemmk);
  int copies_row = pr_row.a_do + pr_row.b_do + pr_row.c_do;
  int copies_col = pr_col.a_do + pr_col.b_do + pr_col.c_do;
  bool use_col = copies_col < copies_row;
  const struct ct__call *call = use_col ? &col : &row;
  const struct ct__plan *plan = use_col ? &pr_col : &pr_row;

  /* CLBlast's own crossover test (Xgemm<T>::UseDirectKernel). */
  unsigned long long mnk = (unsigned long long)op->m * (unsigned long long)op->n * (unsigned long long)op->k;
  unsigned long long mi = known ? p->min_indirect : 0;
  bool indirect = !known || mnk >= mi * mi * mi;

  /* The innermost batch dim goes to one strided-batched call when that is safe (see above). */
  int inner = op->nbatch - 1;
  size_t batch = inner >= 0 ? (size_t)op->bshape[inner] : 1;
  bool batched = batch > 1;
  if (batched) {
    if (indirect) {
      size_t mwg = known ? p->xgemm[CT__X_MWG] : 8, nwg = known ? p->xgemm[CT__X_NWG] : 8;
      size_t kwg = known ? p->xgemm[CT__X_KWG] : 1;
      size_t mc = ct__ceil(call->m, mwg), nc = ct__ceil(call->n, nwg), kc = ct__ceil(call->k, kwg);
      bool want_ac = gemmk == 1;
      size_t a_one_i = want_ac ? kc : mc, a_two_i = want_ac ? mc : kc;
      size_t c_one_i = want_ac ? nc : mc, c_two_i = want_ac ? mc : nc;
      bool unsafe =
          ct__batched_unsafe(call->a, plan->a_one, plan->a_two, plan->a_do, a_one_i, a_two_i, call->m,
                             call->a->bstride[inner], known) ||
          ct__batched_unsafe(call->b, plan->b_one, plan->b_two, plan->b_do, nc, kc, call->n,
                             call->b->bstride[inner], known) ||
          ct__batched_unsafe(&op->c, plan->c_one, plan->c_two, plan->c_do, c_one_i, c_two_i,
                             call->m % 8 ? call->m : call->n, op->c.bstride[inner], known);
      if (unsafe) batched = false;
    }
  }

  CT__TRY(ct__deferred_realize(op->fn));
  cl_command_queue q = ct__device_queue(d);
  int outer = batched ? op->nbatch - 1 : op->nbatch;
  int64_t idx[CT_MAX_DIMS] = {0};
  for (;;) {
    int64_t ao = call->a->off, bo = call->b->off, co = op->c.off;
    for (int i = 0; i < outer; i++) {
      ao += idx[i] * call->a->bstride[i];
      bo += idx[i] * call->b->bstride[i];
      co += idx[i] * op->c.bstride[i];
    }
    CLBlastStatusCode st;
    if (batched) {
      st = ct__clblast_call(&q, op->dtype, call, op->alpha, op->beta, (size_t)ao, (size_t)bo, op->c.mem,
                            (size_t)co, (size_t)op->c.ld, batch, (size_t)call->a->bstride[inner],
                            (size_t)call->b->bstride[inner], (size_t)op->c.bstride[inner], indirect, d);
    } else {
      st = ct__clblast_call(&q, op->dtype, call, op->alpha, op->beta, (size_t)ao, (size_t)bo, op->c.mem,
                            (size_t)co, (size_t)op->c.ld, 1, 0, 0, 0, indirect, d);
    }
    if (st != CLBlastSuccess) {
      char tc = op->dtype == CT_F32 ? 'S' : op->dtype == CT_F64 ? 'D' : 'H';
      return ct__clblast_error(st, "%s: CLBlast%cgemm%s (m=%zu n=%zu k=%zu, batch %zu) on %s failed", op->fn, tc,
                               batched ? "StridedBatched" : "", call->m, call->n, call->k, batch, d->spec);
    }
    int i = outer - 1;
    for (; i >= 0; i--) {
      if (++idx[i] < op->bshape[i]) break;
      idx[i] = 0;
    }
    if (i < 0) break;
  }
  return CT_OK;
}
