/* Reductions: argument checks, result dtypes, planning (which kernel, how many parts, what
 * work-group size) and launches of kernels/reduce.cl. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "reduce/reduce.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* Must match kernels/reduce.cl. */
enum { EPI_NONE, EPI_MEAN, EPI_VAR, EPI_STD };
#define CT__RED_NAME(NAME, name, ...) #name,
static const char *const op_names[] = {CT_REDUCE_OPS(CT__RED_NAME)};
#undef CT__RED_NAME

static bool is_arg(int op) { return op == CT__RED_ARGMAX || op == CT__RED_ARGMIN; }

ct_dtype ct__reduce_acc_dtype(ct_dtype t) {
  if (t == CT_F64) return CT_F64;
  if (ct_dtype_is_floating_point(t)) return CT_F32;
  return CT_I64;
}

/* One pass's input: a tensor of dtype `dt` (the input's, or the accumulator's for partials)
 * plus, for argmax/argmin partials, their indices in the same layout. */
struct red_in {
  ct_dtype dt;
  const ct_tensor *t;
  const ct_tensor *idx;     /* NULL unless partials of argmax/argmin */
};

/* Where the final values go and how they are finished. */
struct red_out {
  const ct_tensor *t;       /* values (NULL for argmax/argmin) */
  ct_dtype dt;
  const ct_tensor *idx;     /* argmax/argmin indices (i64) */
  int epi;
  int64_t count, corr;
  const ct_tensor *center;  /* var/std: the means, accumulator dtype, one per output */
};

/* Launch plan of one pass. */
struct red_plan {
  bool rows;
  int64_t parts, chunk;
  size_t local;   /* rows: work-group size; cols: work-items per group along the outputs */
};

/* Outputs per work-item of reduce_cols (CT_COLS_OUT in kernels/reduce.cl). */
static int64_t cols_out(const ct_device *d) { return ct__cpu_layout(d) ? 64 : 8; }

/* Chooses the kernel and the split. Heuristics, by device type:
 *  - rows when the reduced extent is the innermost in memory (on GPUs only when long enough
 *    to share among a work-group) or when there is a single output; cols (outputs adjacent in
 *    memory, walked together down the reduced extent) otherwise;
 *  - enough parts per output to give every compute unit several work-groups, but never parts
 *    so small that the second pass costs more than it saves;
 *  - work-group sizes from a small fixed set, since some implementations (PoCL) compile a
 *    kernel anew for each work-group size: CPUs run rows with 1 or 64 work-items per group
 *    (each owning an extent), cols with 16; GPUs share an extent among 64 or 256 work-items
 *    and run cols with 64 (all capped by the kernel's and device's limits). */
static void plan_pass(struct red_plan *p, const struct ct__red_geom *g, ct_device *d, size_t lmax_rows,
                      size_t lmax_cols) {
  bool cpu = ct__cpu_layout(d);
  int64_t cu = d->props.compute_units ? d->props.compute_units : 1;
  int64_t target = cu * (cpu ? 4 : 8);
  int64_t red_inner = g->rndim ? g->rstride[g->rndim - 1] : 0;
  int64_t kept_inner = g->kndim ? g->kstride[g->kndim - 1] : INT64_MAX;
  int64_t rows_min = cpu ? 1 : 32;
  p->rows = g->nout == 1 || (red_inner < kept_inner && g->nred >= rows_min) ||
            (g->nout < target && g->nred >= 64 * 32);
  int64_t min_part = cpu ? 131072 : 4096;
  int64_t parts = 1;
  if (p->rows) {
    if (g->nout < target) parts = (target + g->nout - 1) / g->nout;
  } else {
    int64_t items = (g->nout + cols_out(d) - 1) / cols_out(d);
    p->local = cpu ? 16 : 64;
    if (p->local > lmax_cols) p->local = lmax_cols;
    int64_t gx = (items + (int64_t)p->local - 1) / (int64_t)p->local;
    if (gx < target) parts = (target + gx - 1) / gx;
    min_part = cpu ? 1024 : 256;
  }
  int64_t most = g->nred / min_part;
  if (parts > most) parts = most;
  if (parts < 1) parts = 1;
  /* A driver that ends long loops early (llvmpipe, device/quirks.c) gets parts short enough
   * for one work-item's loop: a whole part per item on the chunked layout and in cols, a
   * 1/64 share of it in a lanes work-group (64 or 256 items). */
  uint64_t budget = ct__device_loop_budget(d);
  if (budget != UINT64_MAX) {
    int64_t per_part = (int64_t)budget * (p->rows && !cpu ? 64 : 1);
    if (g->nred / parts > per_part) parts = (g->nred + per_part - 1) / per_part;
  }
  int64_t chunk = (g->nred + parts - 1) / parts;
  /* Parts start on 128-element boundaries (whole cache lines for contiguous rows). */
  if (parts > 1) chunk = (chunk + 127) / 128 * 128;
  if (chunk < 1) chunk = 1;
  p->parts = (g->nred + chunk - 1) / chunk;
  if (p->parts < 1) p->parts = 1;
  p->chunk = chunk;
  if (p->rows) {
    if (cpu) {
      p->local = g->nout * p->parts >= 64 * target ? 64 : 1;
    } else {
      p->local = chunk >= 2048 ? 256 : 64;
    }
    if (p->local > lmax_rows) p->local = lmax_rows;
  }
}

static ct_status reduce_kernel(ct__kernel **k, ct_device *d, ct_dtype in_dt, bool rows, int op,
                               const char *fn) {
  char name[64];
  snprintf(name, sizeof name, "reduce_%s_%s", rows ? "rows" : "cols", op_names[op]);
  /* The accumulator is the host's choice (ct__reduce_acc_dtype), made once for both sides. */
  char opts[48];
  snprintf(opts, sizeof opts, "-DCT_ACC=%d -DCT_CHUNKED=%d", (int)ct__reduce_acc_dtype(in_dt),
           ct__cpu_layout(d) ? 1 : 0);
  return ct__kernel_for(k, d, "reduce.cl", name, (int)in_dt, opts, fn);
}

static ct_status launch(ct_device *d, int op, const struct red_in *in, const struct ct__red_geom *g,
                        const struct red_plan *p, bool final_, const struct red_out *fo,
                        const ct_tensor *pout, const ct_tensor *pidx, bool pre, const char *fn) {
  ct__kernel *k;
  CT__TRY(reduce_kernel(&k, d, in->dt, p->rows, op, fn));
  size_t accsz = ct_dtype_size(ct__reduce_acc_dtype(in->dt));
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_tensor(&a, "in", in->t, 0);
  ct__karg_tensor(&a, "idx_in", in->idx, 0);
  ct__karg_int(&a, "has_idx", in->idx != NULL);
  ct__karg_tensor(&a, "center", pre ? fo->center : NULL, 0);
  ct__karg_int(&a, "pre", pre);
  ct__karg_tensor(&a, "out", final_ ? fo->t : pout, 0);
  ct__karg_tensor(&a, "idx_out", final_ ? fo->idx : pidx, 0);
  ct__karg_int(&a, "final", final_);
  ct__karg_int(&a, "out_dt", (cl_int)fo->dt);
  ct__karg_int(&a, "epi", fo->epi);
  ct__karg_long(&a, "count", fo->count);
  ct__karg_long(&a, "corr", fo->corr);
  ct__karg_long(&a, "parts", p->parts);
  ct__karg_long(&a, "chunk", p->chunk);
  ct__karg_long(&a, "nred", g->nred);
  ct__karg_long(&a, "nout", g->nout);
  ct__karg_geom(&a, "kept", g->kndim, g->kshape, 1, (const int64_t *const[]){g->kstride});
  ct__karg_geom(&a, "reduced", g->rndim, g->rshape, 1, (const int64_t *const[]){g->rstride});
  if (p->rows) {
    ct__karg_local(&a, "acc", p->local * accsz);
    ct__karg_local(&a, "acc_idx", p->local * sizeof(cl_long));
  }
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    if (p->rows) {
      /* A work-group per (output, part), or on CPUs a work-item. */
      size_t items = (size_t)(g->nout * p->parts), local = p->local;
      size_t global = ct__cpu_layout(d) ? (items + local - 1) / local * local : items * local;
      st = ct__kernel_launch(k, d, 1, &global, &local);
    } else {
      int64_t nblocks = (g->nout + cols_out(d) - 1) / cols_out(d);
      size_t local[2] = {p->local, 1};
      size_t global[2] = {(size_t)((nblocks + (int64_t)p->local - 1) / (int64_t)p->local) * p->local,
                          (size_t)p->parts};
      st = ct__kernel_launch(k, d, 2, global, local);
    }
  }
  ct__kernel_unlock(k);
  return st;
}

/* The work-group size limits of both kernels for this input dtype and op. */
static ct_status limits(size_t *lrows, size_t *lcols, ct_device *d, ct_dtype in_dt, int op,
                        const char *fn) {
  ct__kernel *k;
  size_t per = ct_dtype_size(ct__reduce_acc_dtype(in_dt)) + sizeof(cl_long);
  CT__TRY(reduce_kernel(&k, d, in_dt, true, op, fn));
  CT__TRY(ct__kernel_group_limit(lrows, k, d, 256, per));
  CT__TRY(reduce_kernel(&k, d, in_dt, false, op, fn));
  return ct__kernel_group_limit(lcols, k, d, 64, 0);
}

/* Reduces `in` (geometry g) into the final outputs fo, in one pass or, when the plan splits
 * the reduced extent, through partials [nout][parts] and a further reduction of those. */
static ct_status run(ct_device *d, int op, const struct red_in *in, const struct ct__red_geom *g,
                     bool pre, const struct red_out *fo, const char *fn) {
  size_t lrows, lcols;
  CT__TRY(limits(&lrows, &lcols, d, in->dt, op, fn));
  struct red_plan p;
  plan_pass(&p, g, d, lrows, lcols);
  if (p.parts == 1) return launch(d, op, in, g, &p, true, fo, NULL, NULL, pre, fn);

  ct_dtype adt = ct__reduce_acc_dtype(in->dt);
  int64_t pshape[1] = {g->nout * p.parts};
  ct_tensor *pv = NULL, *pi = NULL;
  ct_status st = ct__tensor_new(&pv, d, adt, 1, pshape, fn);
  if (st == CT_OK && is_arg(op)) st = ct__tensor_new(&pi, d, CT_I64, 1, pshape, fn);
  if (st == CT_OK)
    st = launch(d, op, in, g, &p, false, fo, pv, pi, pre, fn);
  if (st == CT_OK) {
    struct red_in pin = {adt, pv, pi};
    struct ct__red_geom pg;
    memset(&pg, 0, sizeof pg);
    pg.nout = g->nout;
    pg.nred = p.parts;
    if (g->nout > 1) {
      pg.kndim = 1;
      pg.kshape[0] = g->nout;
      pg.kstride[0] = p.parts;
    }
    pg.rndim = 1;
    pg.rshape[0] = p.parts;
    pg.rstride[0] = 1;
    st = run(d, op, &pin, &pg, false, fo, fn);
  }
  /* The queue is in order: whoever gets these blocks next is queued after our kernels. */
  ct_release(pv);
  ct_release(pi);
  return st;
}

/* The result dtype of op on dt, or CT_ERR_DTYPE_MISMATCH for float-only ops on integers. */
static ct_status result_dtype(ct_dtype *out, ct_dtype dt, int op, int epi, const char *fn) {
  if ((unsigned)dt >= CT_DTYPE_COUNT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: tensor has an invalid dtype %d", fn, (int)dt);
  if (epi != EPI_NONE && !ct_dtype_is_floating_point(dt))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: input dtype %s is not a float dtype (f16, bf16, f32, f64); cast it first "
                     "with ct_cast()",
                     fn, ct_dtype_name(dt));
  if (dt == CT_U64)
    /* The kernels accumulate integers in i64, which holds u64 values above 2^63 only by their
     * bits: max, min and their indices would order them wrongly. */
    return ct__error(CT_ERR_UNSUPPORTED,
                     "%s: reductions of u64 tensors are not supported (a storage dtype); ct_cast to i64 or "
                     "f64 first",
                     fn);
  if (is_arg(op))
    *out = CT_I64;
  else if ((op == CT__RED_SUM || op == CT__RED_PROD) && !ct_dtype_is_floating_point(dt))
    *out = CT_I64;
  else
    *out = dt;
  return CT_OK;
}

static ct_status reduce_api(ct_tensor **out, const ct_tensor *x, const bool *mask, bool keepdim,
                            int op, int epi, int64_t corr, const char *fn) {
  ct_dtype odt = x->dtype;
  CT__TRY(result_dtype(&odt, x->dtype, op, epi, fn));
  int64_t nred = 1;
  for (int i = 0; i < x->ndim; i++)
    if (mask[i]) nred *= x->shape[i];
  if (nred == 0 && (op == CT__RED_MAX || op == CT__RED_MIN || is_arg(op))) {
    char sh[256];
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: the reduced extent of a tensor of shape %s is empty (a zero-size dim is "
                     "reduced), and %s of no elements is undefined",
                     fn, ct__shape_str(sh, sizeof sh, x->ndim, x->shape), fn);
  }
  ct_device *d = x->storage->device;
  ct_tensor *o = NULL;
  /* A full reduction of a tensor the fusion graph will compute runs in its producer's kernel
   * (src/fusion/; the summation order differs from run()'s, docs/FUSION.md). */
  bool all = true;
  for (int i = 0; i < x->ndim; i++) all &= mask[i] || x->shape[i] == 1;
  if (all && !is_arg(op) && (epi == EPI_NONE || epi == EPI_MEAN) &&
      atomic_load_explicit(&x->storage->pending, memory_order_acquire)) {
    int64_t oshape[CT_MAX_DIMS];
    int ond = ct__reduce_out_shape(oshape, x->ndim, x->shape, mask, keepdim);
    CT__TRY(ct__deferred_reduce(&o, x, op, epi == EPI_MEAN, odt, ond, oshape, fn));
    if (o) {
      *out = o;
      return CT_OK;
    }
  }
  /* Recorded work the kernels below need runs now, so that a failure to realize it names this
   * call (the launch would realize it too, but name its kernel). */
  CT__TRY(ct__deferred_realize(fn));
  struct ct__red_geom g;
  /* argmax/argmin indices are row-major positions, so they walk the dims in order. */
  CT__TRY(ct__reduce_begin(&o, &g, x, mask, keepdim, odt, !is_arg(op), fn));
  if (g.nout == 0) {
    *out = o;
    return CT_OK;
  }
  struct red_in in = {x->dtype, x, NULL};
  struct red_out fo = {o, odt, NULL, epi, nred, corr, NULL};
  if (is_arg(op)) {
    fo.t = NULL;
    fo.idx = o;
  }
  ct_status st;
  if (epi == EPI_VAR || epi == EPI_STD) {
    /* Two passes: the means (accumulator dtype), then the squared deviations from them. */
    ct_tensor *mean = NULL;
    ct_dtype adt = ct__reduce_acc_dtype(x->dtype);
    int64_t mshape[1] = {g.nout};
    st = ct__tensor_new(&mean, d, adt, 1, mshape, fn);
    if (st == CT_OK) {
      struct red_out mo = {mean, adt, NULL, EPI_MEAN, nred, 0, NULL};
      st = run(d, CT__RED_SUM, &in, &g, false, &mo, fn);
    }
    if (st == CT_OK) {
      fo.center = mean;
      st = run(d, CT__RED_SUM, &in, &g, true, &fo, fn);
    }
    ct_release(mean);
  } else {
    st = run(d, op, &in, &g, false, &fo, fn);
  }
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  *out = o;
  return CT_OK;
}

ct_status ct__reduce_record(ct_tensor *r, const ct_tensor *x, const bool *mask, bool keepdim, ct__gop g,
                            int64_t corr, bool std, const char *fn) {
  ct__node *n = NULL;
  CT__TRY(ct__grad_record(&n, r, g, 0, 1, &x, fn));
  if (!n) return CT_OK;
  ct__rec_reduce *rec = &n->rec.reduce; /* every reduction row's record */
  rec->keepdim = keepdim;
  for (int d = 0; d < x->ndim; d++)
    if (mask[d]) rec->dims |= 1u << d;
  rec->correction = corr;
  rec->std = std;
  if (g != CT__GOP_SUM && g != CT__GOP_MEAN) {
    CT__TRY(ct__grad_save_as(n, &rec->x, x, fn));
    CT__TRY(ct__grad_save_as(n, &rec->out, r, fn));
  }
  return CT_OK;
}

ct_status ct__reduce_autocast(ct_tensor **xc, const ct_tensor *x, const char *fn) {
  if (ct__autocast_dtype() != CT_F32 && (x->dtype == CT_F16 || x->dtype == CT_BF16))
    return ct__autocast_to(xc, x, CT_F32, fn);
  *xc = ct_retain((ct_tensor *)x);
  return CT_OK;
}

static ct_status reduce_dims_api(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims,
                                 bool keepdim, int op, int epi, int64_t corr, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  bool mask[CT_MAX_DIMS];
  CT__TRY(ct__reduce_dims(mask, x->ndim, x->shape, ndims, dims, fn));
  /* Autocast: the sums (sum, mean, prod, var, std) run in f32; max and min keep the dtype. */
  ct_tensor *xc = NULL, *r = NULL;
  if (op == CT__RED_SUM || op == CT__RED_PROD)
    CT__TRY(ct__reduce_autocast(&xc, x, fn));
  else
    xc = ct_retain((ct_tensor *)x);
  ct_status st = reduce_api(&r, xc, mask, keepdim, op, epi, corr, fn);
  if (st == CT_OK) {
    ct__gop g = op == CT__RED_PROD                  ? CT__GOP_PROD
                : op == CT__RED_MAX || op == CT__RED_MIN ? CT__GOP_AMAX
                : epi == EPI_MEAN              ? CT__GOP_MEAN
                : epi == EPI_VAR || epi == EPI_STD ? CT__GOP_VAR
                                                   : CT__GOP_SUM;
    st = ct__reduce_record(r, xc, mask, keepdim, g, corr, epi == EPI_STD, fn);
  }
  ct_release(xc);
  return ct__tensor_result(out, r, st);
}

ct_status ct_sum(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim) {
  return reduce_dims_api(out, x, ndims, dims, keepdim, CT__RED_SUM, EPI_NONE, 0, "ct_sum");
}

ct_status ct_mean(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim) {
  return reduce_dims_api(out, x, ndims, dims, keepdim, CT__RED_SUM, EPI_MEAN, 0, "ct_mean");
}

ct_status ct_prod(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim) {
  return reduce_dims_api(out, x, ndims, dims, keepdim, CT__RED_PROD, EPI_NONE, 0, "ct_prod");
}

ct_status ct_max(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim) {
  return reduce_dims_api(out, x, ndims, dims, keepdim, CT__RED_MAX, EPI_NONE, 0, "ct_max");
}

ct_status ct_min(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim) {
  return reduce_dims_api(out, x, ndims, dims, keepdim, CT__RED_MIN, EPI_NONE, 0, "ct_min");
}

ct_status ct_var(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, int correction,
                 bool keepdim) {
  return reduce_dims_api(out, x, ndims, dims, keepdim, CT__RED_SUM, EPI_VAR, correction, "ct_var");
}

ct_status ct_std(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, int correction,
                 bool keepdim) {
  return reduce_dims_api(out, x, ndims, dims, keepdim, CT__RED_SUM, EPI_STD, correction, "ct_std");
}

static ct_status arg_api(ct_tensor **out, const ct_tensor *x, int dim, bool keepdim, int op,
                         const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  bool mask[CT_MAX_DIMS];
  if (dim == CT_DIM_NONE) {
    for (int i = 0; i < x->ndim; i++) mask[i] = true;
  } else {
    int dd;
    CT__TRY(ct__reduce_dim(&dd, x->ndim, x->shape, dim, fn));
    for (int i = 0; i < x->ndim; i++) mask[i] = i == dd;
  }
  return reduce_api(out, x, mask, keepdim, op, EPI_NONE, 0, fn);
}

ct_status ct_argmax(ct_tensor **out, const ct_tensor *x, int dim, bool keepdim) {
  return arg_api(out, x, dim, keepdim, CT__RED_ARGMAX, "ct_argmax");
}

ct_status ct_argmin(ct_tensor **out, const ct_tensor *x, int dim, bool keepdim) {
  return arg_api(out, x, dim, keepdim, CT__RED_ARGMIN, "ct_argmin");
}
