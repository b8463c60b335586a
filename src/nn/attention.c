/* Scaled dot-product attention: the scores q k^T through ct_matmul (the batched GEMM), the
 * scaling, masking and softmax in place by kernels/attention.cl, then the product with v
 * through ct_matmul again. The scores, [batch..., L, S], are the only temporary beyond the f32
 * copies of f16/bf16 operands. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cltensor/elementwise.h"
#include "cltensor/linalg.h"
#include "cltensor/nn.h"
#include "core/error.h"
#include "device/device.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "kernel/launch_geom.h"
#include "nn/nn.h"
#include "reduce/reduce.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

#define FN "ct_scaled_dot_product_attention"

/* Broadcasts the batch dims (all but the last two) of t into (*bn, b). */
static ct_status batch_broadcast(int *bn, int64_t *b, const ct_tensor *t, const char *name) {
  int tn = t->ndim >= 2 ? t->ndim - 2 : 0;
  int64_t tmp[CT_MAX_DIMS];
  int n = 0;
  ct_status st = ct__broadcast_shapes(&n, tmp, *bn, b, tn, t->shape, FN);
  if (st != CT_OK) {
    ct__error_append(" (the batch dims of %s)", name);
    return st;
  }
  *bn = n;
  memcpy(b, tmp, sizeof(int64_t) * (size_t)n);
  return CT_OK;
}

/* *out: t itself (a new reference) when of dtype cdt, else a copy converted to it. */
static ct_status to_compute(ct_tensor **out, const ct_tensor *t, ct_dtype cdt) {
  if (t->dtype == cdt) {
    *out = ct_retain((ct_tensor *)t);
    return CT_OK;
  }
  return ct__contiguous(out, t, cdt, 1, FN);
}

/* Launches the masked softmax over scores ([batch..., L, S], contiguous, the compute dtype);
 * me is the mask expanded to the scores' shape, or NULL. */
static ct_status masked_softmax(ct_tensor *scores, const ct_tensor *me, bool causal, double scale) {
  ct_device *d = scores->storage->device;
  int nd = scores->ndim;
  int64_t L = scores->shape[nd - 2], S = scores->shape[nd - 1], rows = ct_numel(scores) / S;
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_IN=%d", (int)scores->dtype);
  ct__kernel *k;
  ct_status st = ct__kernel_get(&k, d, "attention.cl", "sdpa_softmax", opts);
  if (st != CT_OK) {
    ct__error_append(" (in %s)", FN);
    return st;
  }
  /* The mask's geometry over the rows (every dim but the last), merged where it allows. */
  int64_t mshape[CT_MAX_DIMS], mstride[CT_MAX_DIMS], mstep = 0;
  int mndim = 0;
  int m_kind = 0;
  if (me) {
    m_kind = me->dtype == CT_BOOL ? 1 : 2;
    mndim = nd - 1;
    memcpy(mshape, me->shape, sizeof(int64_t) * (size_t)mndim);
    memcpy(mstride, me->strides, sizeof(int64_t) * (size_t)mndim);
    int64_t *sts[1] = {mstride};
    mndim = ct__collapse_dims(mndim, mshape, 1, sts, 0);
    mstep = me->strides[nd - 1];
  }
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  ct__karg_tensor(&a, "scores", scores, 0);
  ct__karg_long(&a, "rows", rows);
  ct__karg_long(&a, "L", L);
  ct__karg_long(&a, "S", S);
  if (scores->dtype == CT_F64) ct__karg_double(&a, "scale", scale);
  else ct__karg_float(&a, "scale", (float)scale);
  ct__karg_int(&a, "causal", causal);
  /* Without a mask the kernel reads nothing from it (a NULL buffer). */
  ct__karg_tensor(&a, "mask", me, 0);
  ct__karg_int(&a, "m_kind", m_kind);
  ct__karg_int(&a, "m_dt", me ? (cl_int)me->dtype : 0);
  ct__karg_int(&a, "mndim", mndim);
  ct__karg_long8(&a, "mshape", mndim, mshape, 1);
  ct__karg_long8(&a, "mstride", mndim, mstride, 0);
  ct__karg_long(&a, "mstep", mstep);
  st = ct__kargs_end(&a, FN);
  if (st == CT_OK) st = ct__launch1_enqueue(k, d, rows, 64);
  ct__kernel_unlock(k);
  return st;
}

static ct_status sdpa_api(ct_tensor **out, const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                          const ct_tensor *mask, bool causal, double scale) {
  CT__CHECK_NOT_NULL(FN, q);
  CT__CHECK_NOT_NULL(FN, k);
  CT__CHECK_NOT_NULL(FN, v);
  CT__TRY(ct__check_same_device(FN, "q", q, "k", k));
  CT__TRY(ct__check_same_device(FN, "q", q, "v", v));
  /* The host route takes buffers: other threads' recorded work on them goes first. */
  CT__TRY(ct__tensors_deferred_use(FN, 4, (const ct_tensor *const[]){q, k, v, mask}));
  if (mask) CT__TRY(ct__check_same_device(FN, "q", q, "mask", mask));
  char s1[256], s2[256];
  const ct_tensor *ops[3] = {q, k, v};
  const char *names[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) {
    if (ops[i]->ndim < 2)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: %s has shape %s (expected at least 2 dims, [..., %s])", FN, names[i],
                       ct__shape_str(s1, sizeof s1, ops[i]->ndim, ops[i]->shape),
                       i == 0 ? "L, E" : i == 1 ? "S, E" : "S, Ev");
    if (!ct_dtype_is_floating_point(ops[i]->dtype))
      return ct__error(CT_ERR_DTYPE_MISMATCH,
                       "%s: %s has dtype %s (expected f16, bf16, f32 or f64)", FN, names[i],
                       ct_dtype_name(ops[i]->dtype));
    if (ops[i]->dtype != q->dtype)
      return ct__error(CT_ERR_DTYPE_MISMATCH,
                       "%s: %s has dtype %s but q has %s (expected one dtype)", FN, names[i],
                       ct_dtype_name(ops[i]->dtype), ct_dtype_name(q->dtype));
  }
  if (mask && mask->dtype != CT_BOOL && !ct_dtype_is_floating_point(mask->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: mask has dtype %s (expected bool, true where attention is allowed, or a "
                     "float dtype, added to the scores)",
                     FN, ct_dtype_name(mask->dtype));
  int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1];
  int64_t S = k->shape[k->ndim - 2];
  if (k->shape[k->ndim - 1] != E)
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "%s: q has shape %s and k %s: their last dims (E) differ", FN,
                     ct__shape_str(s1, sizeof s1, q->ndim, q->shape),
                     ct__shape_str(s2, sizeof s2, k->ndim, k->shape));
  if (v->shape[v->ndim - 2] != S)
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "%s: k has shape %s and v %s: their dims -2 (S, the number of keys) differ",
                     FN,
                     ct__shape_str(s1, sizeof s1, k->ndim, k->shape),
                     ct__shape_str(s2, sizeof s2, v->ndim, v->shape));
  if (isinf(scale))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: scale is %g (expected a finite number, or NaN "
                     "for 1/sqrt(E))", FN, scale);
  /* The batch shape B: q's, k's, v's and the mask's leading dims broadcast together. */
  int bn = 0;
  int64_t b[CT_MAX_DIMS];
  CT__TRY(batch_broadcast(&bn, b, q, "q"));
  CT__TRY(batch_broadcast(&bn, b, k, "k"));
  CT__TRY(batch_broadcast(&bn, b, v, "v"));
  if (mask) CT__TRY(batch_broadcast(&bn, b, mask, "mask"));
  if (bn + 2 > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: the batch dims broadcast to %d dims (at most %d)", FN, bn,
                     CT_MAX_DIMS - 2);
  int64_t sshape[CT_MAX_DIMS], qshape[CT_MAX_DIMS];
  memcpy(sshape, b, sizeof(int64_t) * (size_t)bn);
  memcpy(qshape, b, sizeof(int64_t) * (size_t)bn);
  sshape[bn] = L;
  sshape[bn + 1] = S;
  qshape[bn] = L;
  qshape[bn + 1] = E;
  if (mask) {
    int mn = 0;
    int64_t ms[CT_MAX_DIMS];
    bool ok = ct__broadcast_shapes(&mn, ms, mask->ndim, mask->shape, bn + 2, sshape, FN) ==
                  CT_OK &&
              mn == bn + 2 && memcmp(ms, sshape, sizeof(int64_t) * (size_t)mn) == 0;
    if (!ok)
      return ct__error(CT_ERR_SHAPE_MISMATCH,
                       "%s: mask has shape %s, which doesn't broadcast to the scores' shape %s "
                       "([batch..., L, S])",
                       FN, ct__shape_str(s1, sizeof s1, mask->ndim, mask->shape),
                       ct__shape_str(s2, sizeof s2, bn + 2, sshape));
  }
  /* With E = 0 every score is 0 (an empty sum), whatever 1/sqrt(0) says. */
  if (isnan(scale)) scale = E > 0 ? 1.0 / sqrt((double)E) : 1.0;

  ct_dtype cdt = q->dtype == CT_F64 ? CT_F64 : CT_F32;
  ct_tensor *qc = NULL, *kc = NULL, *vc = NULL, *qe = NULL, *kt = NULL, *me = NULL, *sc = NULL,
            *o = NULL, *res = NULL;
  /* The inner ops would record; the node below stands for all of them. */
  bool prev = ct__grad_mode_set(false);
  ct_dtype prev_ac = ct__autocast_suspend(); /* the products run in cdt, as chosen here */
  /* The operands keep their layouts (ct_matmul reads transposed views as they are, e.g. the
   * heads of a permuted [B, T, H, E] projection); only f16/bf16 are converted, to f32. */
  ct_status st = to_compute(&qc, q, cdt);
  if (st == CT_OK) st = to_compute(&kc, k, cdt);
  if (st == CT_OK) st = to_compute(&vc, v, cdt);
  /* q over the whole batch, so that the scores have the mask's batch dims too. */
  if (st == CT_OK) st = ct_expand(&qe, qc, bn + 2, qshape);
  /* Where the GEMMs take the host route, an unmasked attention is one native command
   * (attention_host.c); else the products and the softmax kernel below. */
  bool host = false;
  if (st == CT_OK && !mask) st = ct__sdpa_host(&host, &sc, &o, qe, kc, vc, bn, b, causal, scale, FN);
  if (st == CT_OK && !host) {
    st = ct_transpose(&kt, kc, -2, -1);
    if (st == CT_OK) st = ct_matmul(&sc, qe, kt);
    if (st == CT_OK && !ct_tensor_is_contiguous(sc)) {
      /* The kernel walks the scores as contiguous rows (ct_matmul's results are). */
      ct_tensor *c = NULL;
      st = ct__contiguous(&c, sc, cdt, 0, FN);
      ct_release(sc);
      sc = c;
    }
    if (st == CT_OK && mask) st = ct_expand(&me, mask, bn + 2, sshape);
    if (st == CT_OK && ct_numel(sc) > 0) st = masked_softmax(sc, me, causal, scale);
    if (st == CT_OK) st = ct_matmul(&o, sc, vc);
  }
  /* The host route's result keeps its layout ([..., H, L, Ev] over [..., L, H, Ev] memory, as
   * PyTorch's CPU attention returns it); f16/bf16 results are converted. */
  if (st == CT_OK && o->dtype == q->dtype) res = ct_retain(o);
  else if (st == CT_OK) st = ct__contiguous(&res, o, q->dtype, 0, FN);
  ct__autocast_resume(prev_ac);
  ct__grad_mode_set(prev);
  /* The backward needs the probabilities (sc, B L S elements: PyTorch's math backend keeps
   * them too) and the operands. A bool mask takes no gradient; a float one does. */
  ct__node *nd = NULL;
  const ct_tensor *fmask = mask && mask->dtype != CT_BOOL ? mask : NULL;
  if (st == CT_OK)
    st = ct__grad_record(&nd, res, CT__GOP_SDPA, 0, 4, (const ct_tensor *[]){q, k, v, fmask}, FN);
  if (st == CT_OK && nd) {
    ct__rec_sdpa *rec = ct__rec_SDPA(nd);
    st = ct__grad_save_as(nd, &rec->q, q, FN);
    if (st == CT_OK) st = ct__grad_save_as(nd, &rec->k, k, FN);
    if (st == CT_OK) st = ct__grad_save_as(nd, &rec->v, v, FN);
    if (st == CT_OK) st = ct__grad_save_as(nd, &rec->probs, sc, FN);
    rec->scale = scale;
  }
  if (st != CT_OK && strstr(ct_last_error(), FN) == NULL) ct__error_append(" (in %s)", FN);
  ct_release(qc);
  ct_release(kc);
  ct_release(vc);
  ct_release(qe);
  ct_release(kt);
  ct_release(me);
  ct_release(sc);
  ct_release(o);
  return ct__tensor_result(out, res, st);
}

ct_status ct_scaled_dot_product_attention(ct_tensor **out, const ct_tensor *q, const ct_tensor *k,
                                          const ct_tensor *v, const ct_tensor *mask, bool causal,
                                          double scale) {
  CT__CHECK_NOT_NULL(FN, out);
  *out = NULL;
  /* Autocast (torch.autocast's lower-precision list): f32/f16/bf16 q, k and v are cast to the
   * autocast dtype (recorded: gradients flow back through the casts); f64 is left alone, as
   * PyTorch's autocast does. */
  ct_dtype ad = ct__autocast_dtype();
  if (ad == CT_F32 || !q || !k || !v) return sdpa_api(out, q, k, v, mask, causal, scale);
  const ct_tensor *ops[3] = {q, k, v};
  ct_tensor *c[3] = {NULL, NULL, NULL};
  ct_status st = CT_OK;
  for (int i = 0; i < 3 && st == CT_OK; i++) {
    if (ops[i]->dtype == CT_F64) c[i] = ct_retain((ct_tensor *)ops[i]);
    else st = ct__autocast_to(&c[i], ops[i], ad, FN);
  }
  if (st == CT_OK) st = sdpa_api(out, c[0], c[1], c[2], mask, causal, scale);
  for (int i = 0; i < 3; i++) ct_release(c[i]);
  return st;
}

ct_status ct__sdpa_backward(ct_tensor **dq, ct_tensor **dk, ct_tensor **dv, ct_tensor **dmask, const ct_tensor *q,
                            const ct_tensor *k, const ct_tensor *v, const ct_tensor *p, const ct_tensor *g,
                            double scale) {
  const char *fn = "ct_backward";
  ct_dtype cdt = p->dtype;
  /* The host route takes buffers: other threads' recorded work on them goes first. */
  CT__TRY(ct__tensors_deferred_use(fn, 5, (const ct_tensor *const[]){q, k, v, p, g}));
  if (!dmask) {
    bool host = false;
    CT__TRY(ct__sdpa_host_backward(&host, dq, dk, dv, q, k, v, p, g, scale, fn));
    if (host) return CT_OK;
  }
  ct_tensor *qc = NULL, *kc = NULL, *vc = NULL, *gc = NULL, *t = NULL, *ds = NULL, *m = NULL;
  /* g as it comes (often the permuted view of a head merge's gradient): ct_matmul reads BLAS
   * layouts in place, so only a dtype other than cdt makes a copy. */
  ct_status st = to_compute(&gc, g, cdt);
  if (st == CT_OK && dv) {
    /* dV = P^T dO */
    st = ct_transpose(&t, p, -2, -1);
    if (st == CT_OK) st = ct_matmul(dv, t, gc);
    ct_release(t);
    t = NULL;
  }
  if (st == CT_OK && (dq || dk || dmask)) {
    /* dP = dO V^T, then the softmax's backward in place: dS */
    st = to_compute(&vc, v, cdt);
    if (st == CT_OK) st = ct_transpose(&t, vc, -2, -1);
    if (st == CT_OK) st = ct_matmul(&m, gc, t);
    if (st == CT_OK) st = ct__contiguous(&ds, m, cdt, 0, fn);
    if (st == CT_OK && ct_numel(ds) > 0) {
      ct_device *d = p->storage->device;
      int64_t S = p->shape[p->ndim - 1], rows = ct_numel(p) / S;
      char opts[32];
      snprintf(opts, sizeof opts, "-DCT_IN=%d", (int)cdt);
      ct__kernel *kk;
      st = ct__kernel_get(&kk, d, "attention.cl", "sdpa_softmax_bwd", opts);
      if (st == CT_OK) {
        struct ct__kargs a;
        ct__kargs_begin(&a, kk, ct__kernel_lock(kk));
        ct__karg_tensor(&a, "p", p, 0);
        ct__karg_tensor(&a, "dp", ds, 0);
        ct__karg_long(&a, "rows", rows);
        ct__karg_long(&a, "S", S);
        st = ct__kargs_end(&a, fn);
        if (st == CT_OK) st = ct__launch1_enqueue(kk, d, rows, 64);
        ct__kernel_unlock(kk);
      }
    }
  }
  ct_release(t);
  t = NULL;
  ct_release(m);
  m = NULL;
  if (st == CT_OK && dq) {
    /* dQ = scale dS K */
    st = to_compute(&kc, k, cdt);
    if (st == CT_OK) st = ct_matmul(&m, ds, kc);
    if (st == CT_OK) st = ct_mul_scalar(dq, m, scale);
    ct_release(m);
    m = NULL;
  }
  if (st == CT_OK && dk) {
    /* dK = scale dS^T Q */
    st = to_compute(&qc, q, cdt);
    if (st == CT_OK) st = ct_transpose(&t, ds, -2, -1);
    if (st == CT_OK) st = ct_matmul(&m, t, qc);
    if (st == CT_OK) st = ct_mul_scalar(dk, m, scale);
  }
  /* The additive mask's gradient is dS itself (it is added after the scaling). */
  if (st == CT_OK && dmask) *dmask = ct_retain(ds);
  ct_release(qc);
  ct_release(kc);
  ct_release(vc);
  ct_release(gc);
  ct_release(t);
  ct_release(ds);
  ct_release(m);
  return st;
}
