/* Gradient formulas of the elementwise ops (grad_ops.def row EW, one function per row of
 * src/elementwise/ops.def with a bwd column other than 0), of casts and of ct_to_device.
 *
 * Formulas are written over the public ops, computed in the output's dtype (PyTorch computes
 * f16 gradients in f16 as well); the engine sums broadcast dims back and casts to each input's
 * dtype. Non-smooth points follow PyTorch's derivatives.yaml: relu'(0) = 0, abs'(0) = 0,
 * maximum/minimum split the gradient evenly on ties, clamp passes it strictly inside its bounds
 * (PyTorch 2.15), pow's base gradient is 0 where the exponent is 0. */
#include <math.h>

#include "autograd/autograd.h"
#include "autograd/grad_tmp.h"
#include "cltensor/elementwise.h"
#include "cltensor/shape.h"
#include "core/error.h"
#include "elementwise/elementwise.h"

typedef ct_status (*ct__ew_bw_fn)(ct__node *n, const ct_tensor *g, ct_tensor **gin);

#define CT__EW_BW_DECL_0(name)
#define CT__EW_BW_DECL_S_NONE(name) static ct_status ct__ew_bw_##name(ct__node *n, const ct_tensor *g, ct_tensor **gin);
#define CT__EW_BW_DECL_S_IN CT__EW_BW_DECL_S_NONE
#define CT__EW_BW_DECL_S_OUT CT__EW_BW_DECL_S_NONE
#define CT__EW_BW_DECL_S_INOUT CT__EW_BW_DECL_S_NONE
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) CT__EW_BW_DECL_##bwd(name)
#include "elementwise/ops.def"
#undef CT__EW_OP

#define CT__EW_BW_ROW_0(name) NULL
#define CT__EW_BW_ROW_S_NONE(name) ct__ew_bw_##name
#define CT__EW_BW_ROW_S_IN CT__EW_BW_ROW_S_NONE
#define CT__EW_BW_ROW_S_OUT CT__EW_BW_ROW_S_NONE
#define CT__EW_BW_ROW_S_INOUT CT__EW_BW_ROW_S_NONE
static const ct__ew_bw_fn ct__ew_bw[CT__EW_OP_COUNT] = {
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) [CT__EW_##NAME] = CT__EW_BW_ROW_##bwd(name),
#include "elementwise/ops.def"
#undef CT__EW_OP
};

ct_status ct__grad_ew(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if ((unsigned)n->sub >= CT__EW_OP_COUNT || !ct__ew_bw[n->sub])
    return ct__error(CT_ERR_INTERNAL, "ct_backward: elementwise op %d of %s has no gradient formula", n->sub, n->fn);
  return ct__ew_bw[n->sub](n, g, gin);
}

/* gin[i] = g (a new reference) when needed. */
static void ct__pass_through(ct__node *n, int i, const ct_tensor *g, ct_tensor **gin) {
  if (i < n->nin && n->in[i].needed) gin[i] = ct_retain((ct_tensor *)g);
}

/* gin[i] = g * f when needed; f is borrowed. */
static ct_status ct__times(ct__node *n, int i, const ct_tensor *g, const ct_tensor *f, ct_tensor **gin) {
  if (i >= n->nin || !n->in[i].needed) return CT_OK;
  return ct_mul(&gin[i], g, f);
}

/* Zero gradient (the rounding ops and sign: PyTorch gives zeros, not "no gradient"). */
static ct_status ct__zero_grad(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i].needed) CT__TRY(ct_zeros_like(&gin[i], g));
  return CT_OK;
}

/* ---- binary ---- */

static ct_status ct__ew_bw_add(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__pass_through(n, 0, g, gin);
  ct__pass_through(n, 1, g, gin);
  return CT_OK;
}

static ct_status ct__ew_bw_sub(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (ct__rec_EW(n)->spos == 1) return n->in[0].needed ? ct_neg(&gin[0], g) : CT_OK; /* s - a */
  ct__pass_through(n, 0, g, gin);
  if (n->nin > 1 && n->in[1].needed) return ct_neg(&gin[1], g);
  return CT_OK;
}

static ct_status ct__ew_bw_mul(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_ew *r = ct__rec_EW(n);
  if (r->spos) return ct_mul_scalar(&gin[0], g, r->scalar);
  CT__TRY(ct__times(n, 0, g, r->b, gin));
  return ct__times(n, 1, g, r->a, gin);
}

static ct_status ct__ew_bw_div(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_ew *r = ct__rec_EW(n);
  const ct_tensor *a = r->a, *b = r->b;
  if (r->spos == 2) return ct_div_scalar(&gin[0], g, r->scalar); /* a / s */
  ct__tmps s = {0};
  if (r->spos == 1) { /* s / a: -g s / a^2 */
    ct_tensor *a2 = TMP(&s, ct_mul, a, a);
    ct_tensor *q = TMP(&s, ct_div, g, a2);
    GIN(&s, &gin[0], ct_mul_scalar, q, -r->scalar);
    return ct__tmps_end(&s);
  }
  if (n->in[0].needed) GIN(&s, &gin[0], ct_div, g, b);
  if (n->in[1].needed) { /* -g a / b^2 */
    ct_tensor *ab = TMP(&s, ct_div, a, b);
    ct_tensor *ab2 = TMP(&s, ct_div, ab, b);
    ct_tensor *gab2 = TMP(&s, ct_mul, g, ab2);
    GIN(&s, &gin[1], ct_neg, gab2);
  }
  return ct__tmps_end(&s);
}

/* d/da a^b = b a^(b-1), 0 where b == 0 (PyTorch's pow_backward_self);
 * d/db a^b = a^b log(a), 0 where a == 0 and b >= 0 (pow_backward_exponent). */
static ct_status ct__ew_bw_pow(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_ew *r = ct__rec_EW(n);
  const ct_tensor *a = r->a, *b = r->b, *out = r->out;
  ct__tmps s = {0};
  if (r->spos == 2) { /* a ^ s */
    double e = r->scalar;
    if (e == 0) return ct_zeros_like(&gin[0], g);
    ct_tensor *p = TMP(&s, ct_pow_scalar, a, e - 1);
    ct_tensor *d = TMP(&s, ct_mul_scalar, p, e);
    GIN(&s, &gin[0], ct_mul, g, d);
    return ct__tmps_end(&s);
  }
  if (r->spos == 1) { /* s ^ a: g out log(s) */
    double base = r->scalar;
    ct_tensor *d = TMP(&s, ct_mul_scalar, out, base == 0 ? 0.0 : log(base));
    GIN(&s, &gin[0], ct_mul, g, d);
    return ct__tmps_end(&s);
  }
  if (n->in[0].needed) {
    ct_tensor *bm1 = TMP(&s, ct_sub_scalar, b, 1.0);
    ct_tensor *p = TMP(&s, ct_pow, a, bm1);
    ct_tensor *d = TMP(&s, ct_mul, p, b); /* b a^(b-1): 0 where b == 0 unless a^(b-1) is inf or NaN */
    ct_tensor *b0 = TMP(&s, ct_eq_scalar, b, 0.0);
    ct_tensor *z = TMP(&s, ct_zeros_like, d);
    ct_tensor *d0 = TMP(&s, ct_where, b0, z, d);
    GIN(&s, &gin[0], ct_mul, g, d0);
    ct__tmps_drop(&s, bm1), ct__tmps_drop(&s, p), ct__tmps_drop(&s, d);
    ct__tmps_drop(&s, b0), ct__tmps_drop(&s, z), ct__tmps_drop(&s, d0);
  }
  if (n->nin > 1 && n->in[1].needed) {
    ct_tensor *la = TMP(&s, ct_log, a);
    ct_tensor *d = TMP(&s, ct_mul, out, la);
    ct_tensor *a0 = TMP(&s, ct_eq_scalar, a, 0.0);
    ct_tensor *bpos = TMP(&s, ct_ge_scalar, b, 0.0);
    ct_tensor *zero = TMP(&s, ct_logical_and, a0, bpos);
    ct_tensor *z = TMP(&s, ct_zeros_like, d);
    ct_tensor *d0 = TMP(&s, ct_where, zero, z, d);
    GIN(&s, &gin[1], ct_mul, g, d0);
  }
  return ct__tmps_end(&s);
}

/* *z (new) = the 0-dim zero of g's dtype that ct__keep takes, so where's promotion keeps g's
 * dtype. A backward makes it before the comparisons it records: making it enqueues a fill, which
 * runs what is recorded so far, so made after them it would split the comparison and the where
 * into two fused kernels with a bool mask between. */
static ct_status ct__zero_for(ct_tensor **z, const ct_tensor *g) {
  return ct_zeros(z, g->storage->device, g->dtype, 0, NULL);
}

/* *out = where(cond, g, z) (keep where cond) or where(cond, z, g) (invert: zero where cond),
 * broadcast to the shapes of g and cond; z from ct__zero_for(). */
static ct_status ct__keep(ct_tensor **out, const ct_tensor *g, const ct_tensor *cond, const ct_tensor *z,
                          bool invert) {
  return invert ? ct_where(out, cond, z, g) : ct_where(out, cond, g, z);
}

/* maximum (max = true) and minimum: PyTorch's maximum/minimum backward,
 *   t = where(a == b, g / 2, g);  ga = t zeroed where a loses (a < b for max);  gb likewise,
 * so ties split the gradient evenly and a NaN operand (no comparison true) gives both g.
 * The scalar form compares with the scalar as torch.maximum(a, tensor(s)) does. */
static ct_status ct__maxmin_bw(ct__node *n, const ct_tensor *g, ct_tensor **gin, bool max) {
  const ct__rec_ew *r = ct__rec_EW(n);
  const ct_tensor *a = r->a, *b = r->b;
  ct__tmps s = {0};
  ct_tensor *z = TMP(&s, ct__zero_for, g);
  ct_tensor *half = TMP(&s, ct_mul_scalar, g, 0.5);
  if (r->spos) {
    double v = r->scalar;
    ct_tensor *tie = TMP(&s, ct_eq_scalar, a, v);
    ct_tensor *t = TMP(&s, ct_where, tie, half, g);
    ct_tensor *loses = max ? TMP(&s, ct_lt_scalar, a, v) : TMP(&s, ct_gt_scalar, a, v);
    GIN(&s, &gin[0], ct__keep, t, loses, z, true);
    return ct__tmps_end(&s);
  }
  ct_tensor *tie = TMP(&s, ct_eq, a, b);
  ct_tensor *t = TMP(&s, ct_where, tie, half, g);
  if (n->in[0].needed) {
    ct_tensor *a_loses = max ? TMP(&s, ct_lt, a, b) : TMP(&s, ct_gt, a, b);
    GIN(&s, &gin[0], ct__keep, t, a_loses, z, true);
  }
  if (n->in[1].needed) {
    ct_tensor *b_loses = max ? TMP(&s, ct_gt, a, b) : TMP(&s, ct_lt, a, b);
    GIN(&s, &gin[1], ct__keep, t, b_loses, z, true);
  }
  return ct__tmps_end(&s);
}

static ct_status ct__ew_bw_maximum(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__maxmin_bw(n, g, gin, true);
}

static ct_status ct__ew_bw_minimum(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__maxmin_bw(n, g, gin, false);
}

/* Piecewise constant: zeros (PyTorch 2.15 refuses to differentiate floor_divide at all; a
 * zero gradient is its value away from the jumps, as for floor). */
static ct_status ct__ew_bw_floor_divide(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__zero_grad(n, g, gin);
}

/* a - b q with q = floor(a / b) (remainder) or trunc(a / b) (fmod), constant between jumps:
 * ga = g, gb = -g q. The scalar form (remainder only) needs ga alone. */
static ct_status ct__mod_bw(ct__node *n, const ct_tensor *g, ct_tensor **gin, bool floor_q) {
  const ct__rec_ew *r = ct__rec_EW(n);
  ct__pass_through(n, 0, g, gin);
  if (r->spos || !n->in[1].needed) return CT_OK;
  const ct_tensor *a = r->a, *b = r->b;
  ct__tmps s = {0};
  ct_tensor *q;
  if (floor_q) {
    q = TMP(&s, ct_floor_divide, a, b);
  } else {
    ct_tensor *ab = TMP(&s, ct_div, a, b);
    q = TMP(&s, ct_trunc, ab);
  }
  ct_tensor *gq = TMP(&s, ct_mul, g, q);
  GIN(&s, &gin[1], ct_neg, gq);
  return ct__tmps_end(&s);
}

static ct_status ct__ew_bw_remainder(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__mod_bw(n, g, gin, true);
}

static ct_status ct__ew_bw_fmod(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__mod_bw(n, g, gin, false);
}

/* atan2(a, b): ga = g b / (a^2 + b^2), gb = -g a / (a^2 + b^2) (PyTorch's atan2_backward). */
static ct_status ct__ew_bw_atan2(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_ew *r = ct__rec_EW(n);
  const ct_tensor *a = r->a, *b = r->b;
  ct__tmps s = {0};
  ct_tensor *a2 = TMP(&s, ct_mul, a, a);
  ct_tensor *b2 = TMP(&s, ct_mul, b, b);
  ct_tensor *r2 = TMP(&s, ct_add, a2, b2);
  ct_tensor *q = TMP(&s, ct_div, g, r2); /* g / (a^2 + b^2) */
  if (n->in[0].needed) GIN(&s, &gin[0], ct_mul, q, b);
  if (n->in[1].needed) {
    ct_tensor *qa = TMP(&s, ct_mul, q, a);
    GIN(&s, &gin[1], ct_neg, qa);
  }
  return ct__tmps_end(&s);
}

/* ---- unary ---- */

static ct_status ct__ew_bw_neg(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)n;
  return ct_neg(&gin[0], g);
}

/* g sign(x): 0 at 0 (PyTorch's grad * self.sgn()). */
static ct_status ct__ew_bw_abs(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__tmps s = {0};
  ct_tensor *sg = TMP(&s, ct_sign, ct__rec_EW(n)->a);
  GIN(&s, &gin[0], ct_mul, g, sg);
  return ct__tmps_end(&s);
}

/* threshold_backward(g, result, 0): zero where the result <= 0 (so 0 at x == 0). */
static ct_status ct__ew_bw_relu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__tmps s = {0};
  ct_tensor *z = TMP(&s, ct__zero_for, g);
  ct_tensor *off = TMP(&s, ct_le_scalar, ct__rec_EW(n)->out, 0.0);
  GIN(&s, &gin[0], ct__keep, g, off, z, true);
  return ct__tmps_end(&s);
}

static ct_status ct__ew_bw_floor(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }
static ct_status ct__ew_bw_ceil(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }
static ct_status ct__ew_bw_round(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }
static ct_status ct__ew_bw_trunc(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }
static ct_status ct__ew_bw_sign(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }

/* g out */
static ct_status ct__ew_bw_exp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct_mul(&gin[0], g, ct__rec_EW(n)->out);
}

/* g / x */
static ct_status ct__ew_bw_log(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct_div(&gin[0], g, ct__rec_EW(n)->a);
}

/* g / (2 out) */
static ct_status ct__ew_bw_sqrt(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__tmps s = {0};
  ct_tensor *q = TMP(&s, ct_div, g, ct__rec_EW(n)->out);
  GIN(&s, &gin[0], ct_mul_scalar, q, 0.5);
  return ct__tmps_end(&s);
}

/* -g out^3 / 2 */
static ct_status ct__ew_bw_rsqrt(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *y = ct__rec_EW(n)->out;
  ct__tmps s = {0};
  ct_tensor *y2 = TMP(&s, ct_mul, y, y);
  ct_tensor *y3 = TMP(&s, ct_mul, y2, y);
  ct_tensor *gy3 = TMP(&s, ct_mul, g, y3);
  GIN(&s, &gin[0], ct_mul_scalar, gy3, -0.5);
  return ct__tmps_end(&s);
}

/* g cos(x) */
static ct_status ct__ew_bw_sin(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__tmps s = {0};
  ct_tensor *c = TMP(&s, ct_cos, ct__rec_EW(n)->a);
  GIN(&s, &gin[0], ct_mul, g, c);
  return ct__tmps_end(&s);
}

/* -g sin(x) */
static ct_status ct__ew_bw_cos(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__tmps s = {0};
  ct_tensor *sn = TMP(&s, ct_sin, ct__rec_EW(n)->a);
  ct_tensor *gs = TMP(&s, ct_mul, g, sn);
  GIN(&s, &gin[0], ct_neg, gs);
  return ct__tmps_end(&s);
}

/* g (1 - out^2) */
static ct_status ct__ew_bw_tanh(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *y = ct__rec_EW(n)->out;
  ct__tmps s = {0};
  ct_tensor *y2 = TMP(&s, ct_mul, y, y);
  ct_tensor *d = TMP(&s, ct_rsub_scalar, y2, 1.0);
  GIN(&s, &gin[0], ct_mul, g, d);
  return ct__tmps_end(&s);
}

/* g out (1 - out) */
static ct_status ct__ew_bw_sigmoid(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *y = ct__rec_EW(n)->out;
  ct__tmps s = {0};
  ct_tensor *c = TMP(&s, ct_rsub_scalar, y, 1.0);
  ct_tensor *d = TMP(&s, ct_mul, y, c);
  GIN(&s, &gin[0], ct_mul, g, d);
  return ct__tmps_end(&s);
}

/* The exact gelu x Phi(x): g (Phi(x) + x phi(x)), Phi(x) = (1 + erf(x / sqrt 2)) / 2,
 * phi(x) = exp(-x^2 / 2) / sqrt(2 pi) (PyTorch's gelu_backward, approximate='none'). */
static ct_status ct__ew_bw_gelu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *x = ct__rec_EW(n)->a;
  const double inv_sqrt_2pi = 0.3989422804014327; /* 1 / sqrt(2 pi) */
  ct__tmps s = {0};
  ct_tensor *u = TMP(&s, ct_mul_scalar, x, M_SQRT1_2);
  ct_tensor *e = TMP(&s, ct_erf, u);
  ct_tensor *e1 = TMP(&s, ct_add_scalar, e, 1.0);
  ct_tensor *cdf = TMP(&s, ct_mul_scalar, e1, 0.5); /* Phi(x) */
  ct_tensor *x2 = TMP(&s, ct_mul, x, x);
  ct_tensor *h = TMP(&s, ct_mul_scalar, x2, -0.5);
  ct_tensor *ex = TMP(&s, ct_exp, h);
  ct_tensor *pdf = TMP(&s, ct_mul_scalar, ex, inv_sqrt_2pi); /* phi(x) */
  ct_tensor *xpdf = TMP(&s, ct_mul, pdf, x);
  ct_tensor *d = TMP(&s, ct_add, cdf, xpdf);
  GIN(&s, &gin[0], ct_mul, g, d);
  return ct__tmps_end(&s);
}

/* g 2 / sqrt(pi) exp(-x^2) */
static ct_status ct__ew_bw_erf(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *x = ct__rec_EW(n)->a;
  ct__tmps s = {0};
  ct_tensor *x2 = TMP(&s, ct_mul, x, x);
  ct_tensor *m = TMP(&s, ct_neg, x2);
  ct_tensor *e = TMP(&s, ct_exp, m);
  ct_tensor *d = TMP(&s, ct_mul_scalar, e, M_2_SQRTPI);
  GIN(&s, &gin[0], ct_mul, g, d);
  return ct__tmps_end(&s);
}

/* g / (1 + x) */
static ct_status ct__ew_bw_log1p(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__tmps s = {0};
  ct_tensor *x1 = TMP(&s, ct_add_scalar, ct__rec_EW(n)->a, 1.0);
  GIN(&s, &gin[0], ct_div, g, x1);
  return ct__tmps_end(&s);
}

/* g (out + 1) */
static ct_status ct__ew_bw_expm1(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__tmps s = {0};
  ct_tensor *y1 = TMP(&s, ct_add_scalar, ct__rec_EW(n)->out, 1.0);
  GIN(&s, &gin[0], ct_mul, g, y1);
  return ct__tmps_end(&s);
}

/* g (1 + out^2) */
static ct_status ct__ew_bw_tan(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *y = ct__rec_EW(n)->out;
  ct__tmps s = {0};
  ct_tensor *y2 = TMP(&s, ct_mul, y, y);
  ct_tensor *d = TMP(&s, ct_add_scalar, y2, 1.0);
  GIN(&s, &gin[0], ct_mul, g, d);
  return ct__tmps_end(&s);
}

/* g / (1 + x^2) */
static ct_status ct__ew_bw_atan(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *x = ct__rec_EW(n)->a;
  ct__tmps s = {0};
  ct_tensor *x2 = TMP(&s, ct_mul, x, x);
  ct_tensor *d = TMP(&s, ct_add_scalar, x2, 1.0);
  GIN(&s, &gin[0], ct_div, g, d);
  return ct__tmps_end(&s);
}

/* x sigmoid(x): g s (1 + x (1 - s)), s = sigmoid(x) (PyTorch's silu_backward). */
static ct_status ct__ew_bw_silu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *x = ct__rec_EW(n)->a;
  ct__tmps s = {0};
  ct_tensor *sg = TMP(&s, ct_sigmoid, x);
  ct_tensor *c = TMP(&s, ct_rsub_scalar, sg, 1.0);
  ct_tensor *xc = TMP(&s, ct_mul, x, c);
  ct_tensor *xc1 = TMP(&s, ct_add_scalar, xc, 1.0);
  ct_tensor *d = TMP(&s, ct_mul, sg, xc1);
  GIN(&s, &gin[0], ct_mul, g, d);
  return ct__tmps_end(&s);
}

/* softplus with beta 1, threshold 20 (ct_softplus): g sigmoid(x), and g itself where x > 20,
 * where the forward is the identity (PyTorch's softplus_backward). */
static ct_status ct__ew_bw_softplus(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *x = ct__rec_EW(n)->a;
  ct__tmps s = {0};
  ct_tensor *sg = TMP(&s, ct_sigmoid, x);
  ct_tensor *gs = TMP(&s, ct_mul, g, sg);
  ct_tensor *above = TMP(&s, ct_gt_scalar, x, 20.0);
  GIN(&s, &gin[0], ct_where, above, g, gs);
  return ct__tmps_end(&s);
}

/* gelu's tanh approximation 0.5 x (1 + tanh(u)), u = k (x + 0.044715 x^3), k = sqrt(2 / pi), is
 * x s with s = sigmoid(w), w = 2u (the form ew_gelu_tanh computes), so its derivative is
 *   s + x s (1 - s) w',  w' = 2k (1 + 3 * 0.044715 x^2),
 * i.e. g s (1 + x w' (1 - s)): PyTorch's gelu_backward (approximate='tanh') rewritten with
 * 0.5 (1 + tanh u) = s and 1 - tanh^2 u = 4 s (1 - s). One exp and one division instead of
 * tanh's, and no 1 - tanh^2 that cancels where tanh nears +-1. */
static ct_status ct__ew_bw_gelu_tanh(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *x = ct__rec_EW(n)->a;
  const double k2 = 2.0 * M_2_SQRTPI * M_SQRT1_2, kappa = 0.044715;
  ct__tmps s = {0};
  ct_tensor *x2 = TMP(&s, ct_mul, x, x);
  ct_tensor *t1 = TMP(&s, ct_mul_scalar, x2, k2 * kappa);
  ct_tensor *t2 = TMP(&s, ct_add_scalar, t1, k2);
  ct_tensor *w = TMP(&s, ct_mul, x, t2); /* w = 2k (x + kappa x^3) */
  ct_tensor *sg = TMP(&s, ct_sigmoid, w);
  ct_tensor *t5 = TMP(&s, ct_mul_scalar, x2, 3.0 * k2 * kappa);
  ct_tensor *dw = TMP(&s, ct_add_scalar, t5, k2); /* w' */
  ct_tensor *xdw = TMP(&s, ct_mul, x, dw);
  ct__tmps_drop(&s, t1), ct__tmps_drop(&s, t2), ct__tmps_drop(&s, w), ct__tmps_drop(&s, t5);
  ct_tensor *c = TMP(&s, ct_rsub_scalar, sg, 1.0); /* 1 - s */
  ct_tensor *xdwc = TMP(&s, ct_mul, xdw, c);
  ct_tensor *xdwc1 = TMP(&s, ct_add_scalar, xdwc, 1.0); /* 1 + x w' (1 - s) */
  ct_tensor *d = TMP(&s, ct_mul, sg, xdwc1);
  GIN(&s, &gin[0], ct_mul, g, d);
  return ct__tmps_end(&s);
}

/* g where x > 0, g slope elsewhere (0 included: PyTorch's leaky_relu_backward). */
static ct_status ct__ew_bw_leaky_relu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_ew *r = ct__rec_EW(n);
  ct__tmps s = {0};
  ct_tensor *gs = TMP(&s, ct_mul_scalar, g, r->slope);
  ct_tensor *pos = TMP(&s, ct_gt_scalar, r->a, 0.0);
  GIN(&s, &gin[0], ct_where, pos, g, gs);
  return ct__tmps_end(&s);
}

/* where(cond, a, b): a gets g where cond holds, b elsewhere; cond (bool) takes none. */
static ct_status ct__ew_bw_where(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *cond = ct__rec_EW(n)->cond;
  ct__tmps s = {0};
  ct_tensor *z = TMP(&s, ct__zero_for, g);
  if (n->in[1].needed) GIN(&s, &gin[1], ct__keep, g, cond, z, false);
  if (n->in[2].needed) GIN(&s, &gin[2], ct__keep, g, cond, z, true);
  return ct__tmps_end(&s);
}

/* clamp(x, lo, hi), bounds optional (has_lo, has_hi): the gradient passes strictly inside the
 * bounds, lo < x < hi, and is 0 at a bound, outside, and at NaN. This is what the reference
 * PyTorch 2.15 does for Scalar bounds (clamp_backward; clamp_min/clamp_max use self > min,
 * self < max); older PyTorch releases passed it at the bounds too (lo <= x <= hi). */
static ct_status ct__ew_bw_clamp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_ew *r = ct__rec_EW(n);
  ct__tmps s = {0};
  ct_tensor *z = TMP(&s, ct__zero_for, g);
  ct_tensor *above = r->has_lo ? TMP(&s, ct_gt_scalar, r->a, r->lo) : NULL;
  ct_tensor *below = r->has_hi ? TMP(&s, ct_lt_scalar, r->a, r->hi) : NULL;
  ct_tensor *keep = above && below ? TMP(&s, ct_logical_and, above, below) : above ? above : below;
  GIN(&s, &gin[0], ct__keep, g, keep, z, false);
  return ct__tmps_end(&s);
}

/* ---- casts and transfers ---- */

/* A cast between float dtypes passes the gradient through; the engine casts it back to the
 * input's dtype. */
ct_status ct__grad_cast(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct__pass_through(n, 0, g, gin);
  return CT_OK;
}

/* ct_to_device: the gradient goes back to the input's device. */
ct_status ct__grad_to_device(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  return ct_to_device(&gin[0], (ct_tensor *)g, n->in[0].device);
}
