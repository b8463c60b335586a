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

#define SAVED_A(n) ((n)->saved[0])
#define SAVED_B(n) ((n)->saved[1])
#define SAVED_OUT(n) ((n)->saved[CT__EW_SAVED_OUT])
/* Scalar forms: i[0] = 2 for "a op s", 1 for "s op a", 0 for two tensors. */
#define SPOS(n) ((int)(n)->i[0])

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
  if (SPOS(n) == 1) return n->in[0].needed ? ct_neg(&gin[0], g) : CT_OK; /* s - a */
  ct__pass_through(n, 0, g, gin);
  if (n->nin > 1 && n->in[1].needed) return ct_neg(&gin[1], g);
  return CT_OK;
}

static ct_status ct__ew_bw_mul(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (SPOS(n)) return ct_mul_scalar(&gin[0], g, n->d[0]);
  CT__TRY(ct__times(n, 0, g, SAVED_B(n), gin));
  return ct__times(n, 1, g, SAVED_A(n), gin);
}

static ct_status ct__ew_bw_div(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *a = SAVED_A(n), *b = SAVED_B(n);
  if (SPOS(n) == 2) return ct_div_scalar(&gin[0], g, n->d[0]); /* a / s */
  if (SPOS(n) == 1) {                                           /* s / a: -g s / a^2 */
    TRY(ct_mul(&t[0], a, a));
    TRY(ct_div(&t[1], g, t[0]));
    TRY(ct_mul_scalar(&gin[0], t[1], -n->d[0]));
    goto done;
  }
  if (n->in[0].needed) TRY(ct_div(&gin[0], g, b));
  if (n->in[1].needed) { /* -g a / b^2 */
    TRY(ct_div(&t[0], a, b));
    TRY(ct_div(&t[1], t[0], b));
    TRY(ct_mul(&t[2], g, t[1]));
    TRY(ct_neg(&gin[1], t[2]));
  }
done:
  RELEASE_TMP(t);
  return st;
}

/* d/da a^b = b a^(b-1), 0 where b == 0 (PyTorch's pow_backward_self);
 * d/db a^b = a^b log(a), 0 where a == 0 and b >= 0 (pow_backward_exponent). */
static ct_status ct__ew_bw_pow(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *a = SAVED_A(n), *b = SAVED_B(n), *out = SAVED_OUT(n);
  if (SPOS(n) == 2) { /* a ^ s */
    double s = n->d[0];
    if (s == 0) return ct_zeros_like(&gin[0], g);
    TRY(ct_pow_scalar(&t[0], a, s - 1));
    TRY(ct_mul_scalar(&t[1], t[0], s));
    TRY(ct_mul(&gin[0], g, t[1]));
    goto done;
  }
  if (SPOS(n) == 1) { /* s ^ a: g out log(s) */
    double s = n->d[0];
    TRY(ct_mul_scalar(&t[0], out, s == 0 ? 0.0 : log(s)));
    TRY(ct_mul(&gin[0], g, t[0]));
    goto done;
  }
  if (n->in[0].needed) {
    TRY(ct_sub_scalar(&t[0], b, 1.0));
    TRY(ct_pow(&t[1], a, t[0]));
    TRY(ct_mul(&t[2], t[1], b)); /* b a^(b-1): 0 where b == 0 unless a^(b-1) is inf or NaN */
    TRY(ct_eq_scalar(&t[3], b, 0.0));
    TRY(ct_zeros_like(&t[4], t[2]));
    TRY(ct_where(&t[5], t[3], t[4], t[2]));
    TRY(ct_mul(&gin[0], g, t[5]));
    for (int k = 0; k < 6; k++) {
      ct_release(t[k]);
      t[k] = NULL;
    }
  }
  if (n->nin > 1 && n->in[1].needed) {
    TRY(ct_log(&t[0], a));
    TRY(ct_mul(&t[1], out, t[0]));
    TRY(ct_eq_scalar(&t[2], a, 0.0));
    TRY(ct_ge_scalar(&t[3], b, 0.0));
    TRY(ct_logical_and(&t[4], t[2], t[3]));
    TRY(ct_zeros_like(&t[5], t[1]));
    TRY(ct_where(&t[6], t[4], t[5], t[1]));
    TRY(ct_mul(&gin[1], g, t[6]));
  }
done:
  RELEASE_TMP(t);
  return st;
}

/* *out = where(cond, g, 0) (keep where cond) or where(cond, 0, g) (invert: zero where cond),
 * broadcast to the shapes of g and cond; the zero is a 0-dim tensor of g's dtype, so where's
 * promotion keeps g's dtype. */
static ct_status ct__keep(ct_tensor **out, const ct_tensor *g, const ct_tensor *cond, bool invert) {
  ct_tensor *z = NULL;
  CT__TRY(ct_zeros(&z, g->storage->device, g->dtype, 0, NULL));
  ct_status st = invert ? ct_where(out, cond, z, g) : ct_where(out, cond, g, z);
  ct_release(z);
  return st;
}

/* maximum (max = true) and minimum: PyTorch's maximum/minimum backward,
 *   t = where(a == b, g / 2, g);  ga = t zeroed where a loses (a < b for max);  gb likewise,
 * so ties split the gradient evenly and a NaN operand (no comparison true) gives both g.
 * The scalar form compares with the scalar as torch.maximum(a, tensor(s)) does. */
static ct_status ct__maxmin_bw(ct__node *n, const ct_tensor *g, ct_tensor **gin, bool max) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *a = SAVED_A(n), *b = SAVED_B(n);
  TRY(ct_mul_scalar(&t[0], g, 0.5));
  if (SPOS(n)) {
    double s = n->d[0];
    TRY(ct_eq_scalar(&t[1], a, s));
    TRY(ct_where(&t[2], t[1], t[0], g));
    TRY(max ? ct_lt_scalar(&t[3], a, s) : ct_gt_scalar(&t[3], a, s));
    TRY(ct__keep(&gin[0], t[2], t[3], true));
    goto done;
  }
  TRY(ct_eq(&t[1], a, b));
  TRY(ct_where(&t[2], t[1], t[0], g));
  if (n->in[0].needed) {
    TRY(max ? ct_lt(&t[3], a, b) : ct_gt(&t[3], a, b));
    TRY(ct__keep(&gin[0], t[2], t[3], true));
  }
  if (n->in[1].needed) {
    TRY(max ? ct_gt(&t[4], a, b) : ct_lt(&t[4], a, b));
    TRY(ct__keep(&gin[1], t[2], t[4], true));
  }
done:
  RELEASE_TMP(t);
  return st;
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
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  ct__pass_through(n, 0, g, gin);
  if (SPOS(n) || !n->in[1].needed) return CT_OK;
  const ct_tensor *a = SAVED_A(n), *b = SAVED_B(n);
  if (floor_q) {
    TRY(ct_floor_divide(&t[1], a, b));
  } else {
    TRY(ct_div(&t[0], a, b));
    TRY(ct_trunc(&t[1], t[0]));
  }
  TRY(ct_mul(&t[2], g, t[1]));
  TRY(ct_neg(&gin[1], t[2]));
done:
  RELEASE_TMP(t);
  return st;
}

static ct_status ct__ew_bw_remainder(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__mod_bw(n, g, gin, true);
}

static ct_status ct__ew_bw_fmod(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__mod_bw(n, g, gin, false);
}

/* atan2(a, b): ga = g b / (a^2 + b^2), gb = -g a / (a^2 + b^2) (PyTorch's atan2_backward). */
static ct_status ct__ew_bw_atan2(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *a = SAVED_A(n), *b = SAVED_B(n);
  TRY(ct_mul(&t[0], a, a));
  TRY(ct_mul(&t[1], b, b));
  TRY(ct_add(&t[2], t[0], t[1]));
  TRY(ct_div(&t[3], g, t[2])); /* g / (a^2 + b^2) */
  if (n->in[0].needed) TRY(ct_mul(&gin[0], t[3], b));
  if (n->in[1].needed) {
    TRY(ct_mul(&t[4], t[3], a));
    TRY(ct_neg(&gin[1], t[4]));
  }
done:
  RELEASE_TMP(t);
  return st;
}

/* ---- unary ---- */

static ct_status ct__ew_bw_neg(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)n;
  return ct_neg(&gin[0], g);
}

/* g sign(x): 0 at 0 (PyTorch's grad * self.sgn()). */
static ct_status ct__ew_bw_abs(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_tensor *s = NULL;
  CT__TRY(ct_sign(&s, SAVED_A(n)));
  ct_status st = ct_mul(&gin[0], g, s);
  ct_release(s);
  return st;
}

/* threshold_backward(g, result, 0): zero where the result <= 0 (so 0 at x == 0). */
static ct_status ct__ew_bw_relu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_tensor *m = NULL;
  CT__TRY(ct_le_scalar(&m, SAVED_OUT(n), 0.0));
  ct_status st = ct__keep(&gin[0], g, m, true);
  ct_release(m);
  return st;
}

static ct_status ct__ew_bw_floor(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }
static ct_status ct__ew_bw_ceil(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }
static ct_status ct__ew_bw_round(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }
static ct_status ct__ew_bw_trunc(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }
static ct_status ct__ew_bw_sign(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return ct__zero_grad(n, g, gin); }

/* g out */
static ct_status ct__ew_bw_exp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct_mul(&gin[0], g, SAVED_OUT(n));
}

/* g / x */
static ct_status ct__ew_bw_log(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct_div(&gin[0], g, SAVED_A(n));
}

/* g / (2 out) */
static ct_status ct__ew_bw_sqrt(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_tensor *t = NULL;
  CT__TRY(ct_div(&t, g, SAVED_OUT(n)));
  ct_status st = ct_mul_scalar(&gin[0], t, 0.5);
  ct_release(t);
  return st;
}

/* -g out^3 / 2 */
static ct_status ct__ew_bw_rsqrt(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *y = SAVED_OUT(n);
  TRY(ct_mul(&t[0], y, y));
  TRY(ct_mul(&t[1], t[0], y));
  TRY(ct_mul(&t[2], g, t[1]));
  TRY(ct_mul_scalar(&gin[0], t[2], -0.5));
done:
  RELEASE_TMP(t);
  return st;
}

/* g cos(x) */
static ct_status ct__ew_bw_sin(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_tensor *c = NULL;
  CT__TRY(ct_cos(&c, SAVED_A(n)));
  ct_status st = ct_mul(&gin[0], g, c);
  ct_release(c);
  return st;
}

/* -g sin(x) */
static ct_status ct__ew_bw_cos(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  TRY(ct_sin(&t[0], SAVED_A(n)));
  TRY(ct_mul(&t[1], g, t[0]));
  TRY(ct_neg(&gin[0], t[1]));
done:
  RELEASE_TMP(t);
  return st;
}

/* g (1 - out^2) */
static ct_status ct__ew_bw_tanh(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *y = SAVED_OUT(n);
  TRY(ct_mul(&t[0], y, y));
  TRY(ct_rsub_scalar(&t[1], t[0], 1.0));
  TRY(ct_mul(&gin[0], g, t[1]));
done:
  RELEASE_TMP(t);
  return st;
}

/* g out (1 - out) */
static ct_status ct__ew_bw_sigmoid(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *y = SAVED_OUT(n);
  TRY(ct_rsub_scalar(&t[0], y, 1.0));
  TRY(ct_mul(&t[1], y, t[0]));
  TRY(ct_mul(&gin[0], g, t[1]));
done:
  RELEASE_TMP(t);
  return st;
}

/* The exact gelu x Phi(x): g (Phi(x) + x phi(x)), Phi(x) = (1 + erf(x / sqrt 2)) / 2,
 * phi(x) = exp(-x^2 / 2) / sqrt(2 pi) (PyTorch's gelu_backward, approximate='none'). */
static ct_status ct__ew_bw_gelu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = SAVED_A(n);
  const double inv_sqrt_2pi = 0.3989422804014327; /* 1 / sqrt(2 pi) */
  TRY(ct_mul_scalar(&t[0], x, M_SQRT1_2));
  TRY(ct_erf(&t[1], t[0]));
  TRY(ct_add_scalar(&t[2], t[1], 1.0));
  TRY(ct_mul_scalar(&t[3], t[2], 0.5)); /* Phi(x) */
  TRY(ct_mul(&t[4], x, x));
  TRY(ct_mul_scalar(&t[5], t[4], -0.5));
  TRY(ct_exp(&t[6], t[5]));
  TRY(ct_mul_scalar(&t[7], t[6], inv_sqrt_2pi)); /* phi(x) */
  TRY(ct_mul(&t[8], t[7], x));
  TRY(ct_add(&t[9], t[3], t[8]));
  TRY(ct_mul(&gin[0], g, t[9]));
done:
  RELEASE_TMP(t);
  return st;
}

/* g 2 / sqrt(pi) exp(-x^2) */
static ct_status ct__ew_bw_erf(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = SAVED_A(n);
  TRY(ct_mul(&t[0], x, x));
  TRY(ct_neg(&t[1], t[0]));
  TRY(ct_exp(&t[2], t[1]));
  TRY(ct_mul_scalar(&t[3], t[2], M_2_SQRTPI));
  TRY(ct_mul(&gin[0], g, t[3]));
done:
  RELEASE_TMP(t);
  return st;
}

/* g / (1 + x) */
static ct_status ct__ew_bw_log1p(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_tensor *t = NULL;
  CT__TRY(ct_add_scalar(&t, SAVED_A(n), 1.0));
  ct_status st = ct_div(&gin[0], g, t);
  ct_release(t);
  return st;
}

/* g (out + 1) */
static ct_status ct__ew_bw_expm1(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_tensor *t = NULL;
  CT__TRY(ct_add_scalar(&t, SAVED_OUT(n), 1.0));
  ct_status st = ct_mul(&gin[0], g, t);
  ct_release(t);
  return st;
}

/* g (1 + out^2) */
static ct_status ct__ew_bw_tan(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *y = SAVED_OUT(n);
  TRY(ct_mul(&t[0], y, y));
  TRY(ct_add_scalar(&t[1], t[0], 1.0));
  TRY(ct_mul(&gin[0], g, t[1]));
done:
  RELEASE_TMP(t);
  return st;
}

/* g / (1 + x^2) */
static ct_status ct__ew_bw_atan(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = SAVED_A(n);
  TRY(ct_mul(&t[0], x, x));
  TRY(ct_add_scalar(&t[1], t[0], 1.0));
  TRY(ct_div(&gin[0], g, t[1]));
done:
  RELEASE_TMP(t);
  return st;
}

/* x sigmoid(x): g s (1 + x (1 - s)), s = sigmoid(x) (PyTorch's silu_backward). */
static ct_status ct__ew_bw_silu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = SAVED_A(n);
  TRY(ct_sigmoid(&t[0], x));
  TRY(ct_rsub_scalar(&t[1], t[0], 1.0));
  TRY(ct_mul(&t[2], x, t[1]));
  TRY(ct_add_scalar(&t[3], t[2], 1.0));
  TRY(ct_mul(&t[4], t[0], t[3]));
  TRY(ct_mul(&gin[0], g, t[4]));
done:
  RELEASE_TMP(t);
  return st;
}

/* softplus with beta 1, threshold 20 (ct_softplus): g sigmoid(x), and g itself where x > 20,
 * where the forward is the identity (PyTorch's softplus_backward). */
static ct_status ct__ew_bw_softplus(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = SAVED_A(n);
  TRY(ct_sigmoid(&t[0], x));
  TRY(ct_mul(&t[1], g, t[0]));
  TRY(ct_gt_scalar(&t[2], x, 20.0));
  TRY(ct_where(&gin[0], t[2], g, t[1]));
done:
  RELEASE_TMP(t);
  return st;
}

/* gelu's tanh approximation 0.5 x (1 + tanh(u)), u = k (x + 0.044715 x^3), k = sqrt(2 / pi), is
 * x s with s = sigmoid(w), w = 2u (the form ew_gelu_tanh computes), so its derivative is
 *   s + x s (1 - s) w',  w' = 2k (1 + 3 * 0.044715 x^2),
 * i.e. g s (1 + x w' (1 - s)): PyTorch's gelu_backward (approximate='tanh') rewritten with
 * 0.5 (1 + tanh u) = s and 1 - tanh^2 u = 4 s (1 - s). One exp and one division instead of
 * tanh's, and no 1 - tanh^2 that cancels where tanh nears +-1. */
static ct_status ct__ew_bw_gelu_tanh(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = SAVED_A(n);
  const double k2 = 2.0 * M_2_SQRTPI * M_SQRT1_2, kappa = 0.044715;
  TRY(ct_mul(&t[0], x, x));                          /* x^2 */
  TRY(ct_mul_scalar(&t[1], t[0], k2 * kappa));
  TRY(ct_add_scalar(&t[2], t[1], k2));
  TRY(ct_mul(&t[3], x, t[2]));                       /* w = 2k (x + kappa x^3) */
  TRY(ct_sigmoid(&t[4], t[3]));                      /* s */
  TRY(ct_mul_scalar(&t[5], t[0], 3.0 * k2 * kappa));
  TRY(ct_add_scalar(&t[6], t[5], k2));               /* w' */
  TRY(ct_mul(&t[7], x, t[6]));                       /* x w' */
  ct_release(t[1]), ct_release(t[2]), ct_release(t[3]), ct_release(t[5]);
  t[1] = t[2] = t[3] = t[5] = NULL;
  TRY(ct_rsub_scalar(&t[1], t[4], 1.0));             /* 1 - s */
  TRY(ct_mul(&t[2], t[7], t[1]));
  TRY(ct_add_scalar(&t[3], t[2], 1.0));              /* 1 + x w' (1 - s) */
  TRY(ct_mul(&t[5], t[4], t[3]));
  TRY(ct_mul(&gin[0], g, t[5]));
done:
  RELEASE_TMP(t);
  return st;
}

/* g where x > 0, g slope elsewhere (0 included: PyTorch's leaky_relu_backward). */
static ct_status ct__ew_bw_leaky_relu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  TRY(ct_mul_scalar(&t[0], g, n->d[0]));
  TRY(ct_gt_scalar(&t[1], SAVED_A(n), 0.0));
  TRY(ct_where(&gin[0], t[1], g, t[0]));
done:
  RELEASE_TMP(t);
  return st;
}

/* where(cond, a, b): a gets g where cond holds, b elsewhere; cond (bool) takes none. */
static ct_status ct__ew_bw_where(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct_tensor *cond = n->saved[0];
  if (n->in[1].needed) CT__TRY(ct__keep(&gin[1], g, cond, false));
  if (n->in[2].needed) CT__TRY(ct__keep(&gin[2], g, cond, true));
  return CT_OK;
}

/* clamp(x, lo, hi), bounds optional (i[1], i[2]): the gradient passes strictly inside the
 * bounds, lo < x < hi, and is 0 at a bound, outside, and at NaN. This is what the reference
 * PyTorch 2.15 does for Scalar bounds (clamp_backward; clamp_min/clamp_max use self > min,
 * self < max); older PyTorch releases passed it at the bounds too (lo <= x <= hi). */
static ct_status ct__ew_bw_clamp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = SAVED_A(n), *keep = NULL;
  if (n->i[1]) TRY(ct_gt_scalar(&t[0], x, n->d[0]));
  if (n->i[2]) TRY(ct_lt_scalar(&t[1], x, n->d[1]));
  if (t[0] && t[1]) {
    TRY(ct_logical_and(&t[2], t[0], t[1]));
    keep = t[2];
  } else {
    keep = t[0] ? t[0] : t[1];
  }
  TRY(ct__keep(&gin[0], g, keep, false));
done:
  RELEASE_TMP(t);
  return st;
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
