/* The matmul front end: ct_matmul, ct_linear, ct_addmm and their _out forms. Picks the compute
 * dtype and where the product is formed, then runs the integer kernel (matmul_int.c) or a GEMM
 * on the device's route (gemm_clblast.c, gemm_host.c). The shape rules are in matmul_shape.c,
 * the per-device GEMM state in gemm_state.c. */
#include <string.h>

#include "core/error.h"
#include "linalg/linalg.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* True (with *v set) when c broadcast to target is one row repeated: c's strides along the
 * result are 0 but for the last dim, c has target's dtype and shares no memory with it, and the
 * device's GEMM runs on the host route, which sets C's rows inside the product's command
 * (gemm_host.c): a linear layer's bias costs no copy kernel of its own. */
static bool ct__mm_row_bias(struct ct__gemm_vec *v, const struct ct__gemm_state *s, const ct_tensor *target,
                            const ct_tensor *c) {
  if (s->route != CT__ROUTE_HOST || !ct__gemm_host_available() || c->dtype != target->dtype ||
      ct__tensor_overlaps(c, target))
    return false;
  int64_t strides[CT_MAX_DIMS], off;
  ct__mm_expand_strides(strides, c, target->ndim, target->shape);
  for (int i = 0; i + 1 < target->ndim; i++)
    if (strides[i] != 0 && target->shape[i] != 1) return false;
  int64_t inc = target->ndim > 0 ? strides[target->ndim - 1] : 0;
  if (inc < 0 || !ct__tensor_elem_offset(c, &off)) return false;
  v->mem = ct__tensor_mem(c);
  v->off = off;
  v->inc = inc;
  return true;
}

/* Float product into a contiguous target of the compute dtype (f32, f64, or f16 where CLBlast
 * multiplies half). a and b have that dtype. */
static ct_status ct__mm_float(struct ct__mm *mm, const struct ct__gemm_state *s, ct_tensor *target,
                              const ct_tensor *a, const ct_tensor *b) {
  double gemm_beta = 0;
  struct ct__gemm_vec bias = {NULL, 0, 0};
  if (mm->c && mm->beta != 0) {
    if (ct__tensor_same_geometry(mm->c, target)) {
      gemm_beta = mm->beta;
    } else if (mm->k > 0 && ct__mm_row_bias(&bias, s, target, mm->c)) {
      gemm_beta = 1;
    } else {
      CT__TRY(ct__mm_init_c(mm->d, mm->fn, target, mm->c, mm->beta));
      gemm_beta = 1;
    }
  }
  if (mm->k == 0) {
    if (gemm_beta == 0) return ct__mm_init_c(mm->d, mm->fn, target, NULL, 0);
    if (gemm_beta != 1) return ct__mm_init_c(mm->d, mm->fn, target, target, gemm_beta);
    return CT_OK;
  }
  struct ct__gemm_op op;
  memset(&op, 0, sizeof op);
  op.fn = mm->fn;
  op.dtype = target->dtype;
  op.m = mm->m;
  op.n = mm->n;
  op.k = mm->k;
  op.alpha = mm->alpha;
  op.beta = gemm_beta;
  op.nbatch = mm->nb;
  op.bias = bias;
  op.bias_beta = mm->beta;
  memcpy(op.bshape, mm->bs, sizeof op.bshape);
  ct_tensor *ac = NULL, *bc = NULL;
  ct_status st = CT_OK;
  if (!ct__gemm_mat_of(&op.a, a, true, mm->nb, mm->bs, mm->m, mm->k)) {
    CT__TRY(ct_contiguous(&ac, a));
    if (!ct__gemm_mat_of(&op.a, ac, true, mm->nb, mm->bs, mm->m, mm->k))
      st = ct__error(CT_ERR_INTERNAL, "%s: a contiguous operand has no BLAS layout", mm->fn);
  }
  if (st == CT_OK && !ct__gemm_mat_of(&op.b, b, false, mm->nb, mm->bs, mm->k, mm->n)) {
    st = ct_contiguous(&bc, b);
    if (st == CT_OK && !ct__gemm_mat_of(&op.b, bc, false, mm->nb, mm->bs, mm->k, mm->n))
      st = ct__error(CT_ERR_INTERNAL, "%s: a contiguous operand has no BLAS layout", mm->fn);
  }
  if (st == CT_OK) {
    op.c.mem = ct__tensor_mem(target);
    ct__tensor_elem_offset(target, &op.c.off);
    op.c.ld = mm->n;
    op.c.trans = false;
    int64_t stride = mm->m * mm->n;
    for (int i = mm->nb - 1; i >= 0; i--) {
      op.c.bstride[i] = mm->bs[i] == 1 ? 0 : stride;
      stride *= mm->bs[i];
    }
    ct__gemm_simplify_batch(&op);
    st = s->route == CT__ROUTE_HOST ? ct__gemm_host(mm->d, &op) : ct__gemm_clblast(mm->d, s, &op);
  }
  ct_release(ac);
  ct_release(bc);
  return st;
}

/* Runs mm into a new tensor (*res) or into out. */
static ct_status ct__mm_run(struct ct__mm *mm, ct_tensor **res, ct_tensor *out) {
  CT__TRY(ct__mm_check(mm, out));
  /* CLBlast and the host route take the buffers, not ct__karg_tensor(): other threads'
   * recorded work on them is enqueued here. */
  CT__TRY(ct__tensors_deferred_use(mm->fn, 4, (const ct_tensor *const[]){mm->a, mm->b, mm->c, out}));
  if (out) {
    /* An _out form writes existing memory: refused under autograd as PyTorch's, and a write
     * that a node saving out must notice. */
    const ct_tensor *ins[3] = {mm->a, mm->b, mm->c};
    const char *const names[3] = {mm->an, mm->bn, mm->cn};
    CT__TRY(ct__grad_check_out(mm->fn, mm->c ? 3 : 2, ins, names));
    CT__TRY(ct__tensor_check_writable(out, mm->fn, "out"));
    CT__TRY(ct__grad_check_inplace(mm->fn, out, "out"));
    ct__tensor_bump_version(out);
  }
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, mm->d));
  if (s->route_status != CT_OK) return ct__error(s->route_status, "%s: %s", mm->fn, s->route_error);
  /* Only a float GEMM on the CLBlast route uses (and so loads and verifies) the tuning. */
  if (s->route == CT__ROUTE_CLBLAST && ct_dtype_is_floating_point(mm->dt)) ct__gemm_tuning_ready(s, mm->d);

  bool is_float = ct_dtype_is_floating_point(mm->dt);
  ct_dtype cdt = mm->dt;
  if (mm->dt == CT_BF16 ||
      (mm->dt == CT_F16 && (mm->acc32 || !(s->route == CT__ROUTE_CLBLAST && mm->d->props.fp16))))
    cdt = CT_F32;

  /* Where the product is formed: the destination itself when it is contiguous, of the compute
   * dtype and shares no memory with the operands (c may be the destination: see ct_addmm_out). */
  ct_tensor *result = NULL, *target = NULL;
  if (res) {
    if (cdt == mm->dt) {
      CT__TRY(ct__tensor_new(&result, mm->d, mm->dt, mm->rnd, mm->rshape, mm->fn));
      target = result;
    }
  } else if (cdt == mm->dt && ct_tensor_is_contiguous(out) && !ct__tensor_overlaps(out, mm->a) &&
             !ct__tensor_overlaps(out, mm->b) && !(mm->c && ct__tensor_overlaps(out, mm->c) && !ct__tensor_same_geometry(out, mm->c)) &&
             ct__tensor_elem_offset(out, &(int64_t){0})) {
    target = out;
  }
  ct_status st = CT_OK;
  bool own_target = target == NULL;
  if (own_target) st = ct__tensor_new(&target, mm->d, cdt, mm->rnd, mm->rshape, mm->fn);
  int64_t numel = 1;
  for (int i = 0; i < mm->rnd; i++) numel *= mm->rshape[i];

  if (st == CT_OK && numel > 0) {
    if (!is_float) {
      st = ct__mm_int(mm, target);
    } else if (cdt == mm->dt) {
      st = ct__mm_float(mm, s, target, mm->a, mm->b);
    } else {
      ct_tensor *a32 = NULL, *b32 = NULL;
      st = ct_cast(&a32, mm->a, cdt);
      if (st == CT_OK) st = ct_cast(&b32, mm->b, cdt);
      if (st == CT_OK) st = ct__mm_float(mm, s, target, a32, b32);
      ct_release(a32);
      ct_release(b32);
    }
  }
  if (st == CT_OK && own_target) {
    if (res) st = cdt == mm->dt ? CT_OK : ct_cast(&result, target, mm->dt);
    else if (numel > 0) st = ct_copy(out, target);
  }
  if (own_target && result != target) ct_release(target);
  if (res) {
    if (st != CT_OK) {
      ct_release(result);
      result = NULL;
    }
    *res = result;
  }
  return st;
}

/* ---- Public API ---- */

/* Autocast (PyTorch's lower-precision list): the new-tensor forms cast their f32, f16 and bf16
 * operands to the thread's autocast dtype (ct_cast, recorded, so gradients reach f32 leaves);
 * f64 and integer operands stay as they are, as torch.autocast leaves them. _out forms are not
 * autocast (PyTorch's rule for out= ops). held[] gets the casts, which the caller releases. */
static ct_status ct__mm_autocast(const ct_tensor **ops, ct_tensor **held, int n, bool *acc32, const char *fn) {
  ct_dtype dt = ct__autocast_dtype();
  *acc32 = dt != CT_F32;
  for (int i = 0; i < n && dt != CT_F32; i++) {
    if (!ops[i] || !ct_dtype_is_floating_point(ops[i]->dtype) || ops[i]->dtype == CT_F64) continue;
    CT__TRY(ct__autocast_to(&held[i], ops[i], dt, fn));
    ops[i] = held[i];
  }
  return CT_OK;
}

/* Records r's backward: op with inputs ins (the GEMM operands at ia and ib), saving each
 * operand where the other one's gradient needs it (the record's a: ins[ia], b: ins[ib]). */
static ct_status ct__mm_record(ct_tensor *r, ct__gop op, int nin, const ct_tensor *const *ins, int ia, int ib,
                               double beta, double alpha, const char *fn) {
  ct__node *n = NULL;
  CT__TRY(ct__grad_record(&n, r, op, 0, nin, ins, fn));
  if (!n) return CT_OK;
  ct__rec_matmul *rec = &n->rec.matmul; /* MATMUL, LINEAR and ADDMM's record */
  rec->beta = beta;
  rec->alpha = alpha;
  if (n->in[ib].needed) CT__TRY(ct__grad_save_as(n, &rec->a, ins[ia], fn));
  if (n->in[ia].needed) CT__TRY(ct__grad_save_as(n, &rec->b, ins[ib], fn));
  return CT_OK;
}

/* The four GEMM entry points differ only in where the result goes (a new tensor *out, or dst)
 * and whether they take c; the NULL checks run in the order of their arguments. */
static ct_status ct__mm_api(const char *fn, ct_tensor **out, ct_tensor *dst, bool with_c, const ct_tensor *c,
                            const ct_tensor *a, const ct_tensor *b, double beta, double alpha) {
  if (out) {
    *out = NULL;
  } else {
    CT__CHECK_NOT_NULL(fn, dst);
  }
  if (with_c) CT__CHECK_NOT_NULL(fn, c);
  CT__CHECK_NOT_NULL(fn, a);
  CT__CHECK_NOT_NULL(fn, b);
  struct ct__mm mm = {.fn = fn, .an = "a", .bn = "b", .cn = with_c ? "c" : NULL, .a = a, .b = b, .c = c,
                      .alpha = alpha, .beta = beta};
  if (!out) return ct__mm_run(&mm, NULL, dst);
  const ct_tensor *ops[3] = {c, a, b};
  ct_tensor *held[3] = {NULL, NULL, NULL};
  ct_status st = ct__mm_autocast(ops, held, 3, &mm.acc32, fn);
  mm.c = ops[0];
  mm.a = ops[1];
  mm.b = ops[2];
  ct_tensor *r = NULL;
  if (st == CT_OK) st = ct__mm_run(&mm, &r, NULL);
  if (st == CT_OK)
    st = with_c ? ct__mm_record(r, CT__GOP_ADDMM, 3, ops, 1, 2, beta, alpha, fn)
                : ct__mm_record(r, CT__GOP_MATMUL, 2, ops + 1, 0, 1, 0, 1, fn);
  for (int i = 0; i < 3; i++) ct_release(held[i]);
  return ct__tensor_result(out, r, st);
}
ct_status ct_matmul(ct_tensor **out, const ct_tensor *a, const ct_tensor *b) {
  CT__CHECK_NOT_NULL("ct_matmul", out);
  return ct__mm_api("ct_matmul", out, NULL, false, NULL, a, b, 0, 1);
}

ct_status ct_matmul_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b) {
  return ct__mm_api("ct_matmul_out", NULL, out, false, NULL, a, b, 0, 1);
}

ct_status ct_addmm(ct_tensor **out, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, double beta,
                   double alpha) {
  CT__CHECK_NOT_NULL("ct_addmm", out);
  return ct__mm_api("ct_addmm", out, NULL, true, c, a, b, beta, alpha);
}

ct_status ct_addmm_out(ct_tensor *out, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, double beta,
                       double alpha) {
  return ct__mm_api("ct_addmm_out", NULL, out, true, c, a, b, beta, alpha);
}

ct_status ct_linear(ct_tensor **out, const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias) {
  CT__CHECK_NOT_NULL("ct_linear", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_linear", x);
  CT__CHECK_NOT_NULL("ct_linear", weight);
  const ct_tensor *w = weight;
  char sx[160], sw[160];
  if (w->ndim != 2)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "ct_linear: weight must be 2-D [out_features, in_features], got %s",
                     ct__shape_str(sw, sizeof sw, w->ndim, w->shape));
  if (x->ndim == 0 || x->shape[x->ndim - 1] != w->shape[1])
    return ct__error(CT_ERR_SHAPE_MISMATCH, "ct_linear: x %s and weight %s don't fit: x's last dim must be "
                     "weight's in_features %lld", ct__shape_str(sx, sizeof sx, x->ndim, x->shape),
                     ct__shape_str(sw, sizeof sw, w->ndim, w->shape), (long long)w->shape[1]);
  const ct_tensor *ops[3] = {x, weight, bias};
  ct_tensor *held[3] = {NULL, NULL, NULL}, *wt = NULL, *r = NULL;
  bool acc32 = false;
  ct_status st = ct__mm_autocast(ops, held, 3, &acc32, "ct_linear");
  w = ops[1];
  /* w^T as a view: the GEMM reads it with a transpose flag, no copy. It has weight's device and
   * dtype, so the shared checks' messages name it as the caller knows it, "weight". */
  int64_t shape[2] = {w->shape[1], w->shape[0]}, strides[2] = {w->strides[1], w->strides[0]};
  if (st == CT_OK) st = ct__tensor_view(&wt, w, 2, shape, strides, w->offset);
  if (st == CT_OK) {
    struct ct__mm mm = {.fn = "ct_linear", .an = "x", .bn = "weight", .cn = "bias", .a = ops[0], .b = wt,
                        .c = ops[2], .alpha = 1, .beta = 1, .acc32 = acc32};
    st = ct__mm_run(&mm, &r, NULL);
  }
  /* One LINEAR node over x, weight and bias (not the view): its formula makes weight's
   * gradient with one GEMM over x's flattened leading dims. */
  if (st == CT_OK) st = ct__mm_record(r, CT__GOP_LINEAR, 3, ops, 0, 1, 1, 1, "ct_linear");
  ct_release(wt);
  for (int i = 0; i < 3; i++) ct_release(held[i]);
  return ct__tensor_result(out, r, st);
}
