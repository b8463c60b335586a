/* Gradient formulas of the elementwise ops (grad_ops.def row EW, one function per row of
 * src/elementwise/ops.def with a bwd column other than 0), of casts and of ct_to_device.
 *
 * Formulas are written over the public ops, computed in the output's dtype (PyTorch computes
 * f16 gradients in f16 as well); the engine sums broadcast dims back and casts to each input's
 * dtype. Non-smooth points follow PyTorch's derivatives.yaml: relu'(0) = 0, abs'(0) = 0,
 * maximum/minimum split the gradient evenly on ties, clamp passes it where lo <= x <= hi, pow's
 * base gradient is 0 where the exponent is 0. */
#include <math.h>

#include "autograd/autograd.h"
#include "cltensor/elementwise.h"
#include "cltensor/shape.h"
#include "core/error.h"
#include "elementwise/elementwise.h"

/* Temporaries of a formula: every tensor made lands in one of these and is released at the end
 * (a result handed to gin[] is retained first). */
#define CT__TMP 8
#define TRY(call)                 \
  do {                            \
    st = (call);                  \
    if (st != CT_OK) goto done;   \
  } while (0)
#define RELEASE_TMP(t)                                  \
  for (int k_ = 0; k_ < CT__TMP; k_++) ct_release(t[k_])

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

/* ---- (to be written) ---- */

static ct_status ct__ew_bw_maximum(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_minimum(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_floor_divide(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_remainder(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_atan2(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_fmod(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_neg(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_abs(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_relu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_floor(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_ceil(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_round(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_trunc(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_sign(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_exp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_log(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_sqrt(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_rsqrt(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_sin(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_cos(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_tanh(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_sigmoid(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_gelu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_erf(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_log1p(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_expm1(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_tan(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_atan(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_silu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_softplus(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_gelu_tanh(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_leaky_relu(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_where(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
}

static ct_status ct__ew_bw_clamp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  (void)g;
  (void)gin;
  return ct__error(CT_ERR_UNSUPPORTED, "ct_backward: the gradient of %s is not implemented yet", n->fn);
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
