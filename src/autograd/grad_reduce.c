/* Gradient formulas of the reductions and softmax (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "autograd/grad_tmp.h"
#include "cltensor/elementwise.h"
#include "cltensor/reduce.h"
#include "cltensor/shape.h"
#include "core/error.h"

/* The reduced dims of a reduction node (n->i[1], bits) as a list; returns how many. A 0-dim
 * input has none, which the reductions read as "every dim" (the same thing there). */
static int red_dims(const ct__node *n, int *dims) {
  int nd = 0;
  for (int d = 0; d < n->in[0].ndim; d++)
    if ((n->i[1] >> d) & 1) dims[nd++] = d;
  return nd;
}

/* The number of elements a reduction node folds into each output. */
static int64_t red_count(const ct__node *n) {
  int64_t c = 1;
  for (int d = 0; d < n->in[0].ndim; d++)
    if ((n->i[1] >> d) & 1) c *= n->in[0].shape[d];
  return c;
}

/* A 0-dim tensor of value v, dtype and device of like (a broadcast operand of where). */
static ct_status scalar_like(ct_tensor **out, const ct_tensor *like, double v) {
  return ct_full(out, like->storage->device, like->dtype, 0, NULL, v);
}

/* prod: PyTorch's prod_backward. Each element's gradient is g times the product of the other
 * elements of its slice: out / x when the slice has no zero; when it has exactly one, the zero
 * gets the product of the nonzero others and every other element 0; with two or more zeros
 * everything is 0. Computed for all three cases at once (the out / x of a zero is inf or NaN
 * but where() drops it), so there is no host round trip to look for zeros. */
ct_status ct__grad_prod(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = ct__ag_saved(n, 0), *out = ct__ag_saved(n, 1);
  int dims[CT_MAX_DIMS], nd = red_dims(n, dims);
  TRY(ct__ag_unreduce(&t[0], n, g));
  TRY(ct__ag_unreduce(&t[1], n, out));
  TRY(ct_div(&t[2], t[1], x));          /* out / x: the slice has no zero */
  TRY(ct_eq_scalar(&t[3], x, 0.0));     /* the zeros */
  TRY(ct_sum(&t[4], t[3], nd, dims, true)); /* zeros per slice (i64, kept dims) */
  TRY(scalar_like(&t[5], x, 1.0));
  TRY(ct_where(&t[6], t[3], t[5], x));
  TRY(ct_prod(&t[7], t[6], nd, dims, true)); /* product of the nonzero elements */
  TRY(ct_eq_scalar(&t[8], t[4], 1.0));
  TRY(ct_logical_and(&t[9], t[8], t[3])); /* the only zero of its slice */
  ct_release(t[5]), ct_release(t[6]), ct_release(t[8]);
  t[5] = t[6] = t[8] = NULL;
  TRY(scalar_like(&t[5], x, 0.0));
  TRY(ct_where(&t[6], t[9], t[7], t[5]));
  TRY(ct_eq_scalar(&t[8], t[4], 0.0));
  ct_release(t[9]);
  t[9] = NULL;
  TRY(ct_where(&t[9], t[8], t[2], t[6]));
  TRY(ct_mul(&gin[0], t[0], t[9]));
done:
  RELEASE_TMP(t);
  return st;
}

/* max/min over dims (torch.amax/amin): the gradient is shared evenly among the elements equal
 * to the result, (g / count) * (x == out), so a NaN result gives NaN as PyTorch's
 * scale_grad_by_count. */
ct_status ct__grad_amax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = ct__ag_saved(n, 0), *out = ct__ag_saved(n, 1);
  int dims[CT_MAX_DIMS], nd = red_dims(n, dims);
  TRY(ct__ag_unreduce(&t[0], n, out));
  TRY(ct_eq(&t[1], x, t[0]));
  TRY(ct_cast(&t[2], t[1], g->dtype));
  TRY(ct_sum(&t[3], t[2], nd, dims, true)); /* ties per slice */
  TRY(ct__ag_unreduce(&t[4], n, g));
  TRY(ct_div(&t[5], t[4], t[3]));
  TRY(ct_mul(&gin[0], t[5], t[2]));
done:
  RELEASE_TMP(t);
  return st;
}

/* var: g 2 (x - mean) / dof, dof = max(0, n - correction) as the forward's divisor (PyTorch's
 * var_backward). std (i[3]): the var gradient of g / (2 std), and 0 where std == 0 (PyTorch's
 * std_backward). */
ct_status ct__grad_var(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *x = ct__ag_saved(n, 0), *out = ct__ag_saved(n, 1);
  int dims[CT_MAX_DIMS], nd = red_dims(n, dims);
  double dof = (double)red_count(n) - (double)n->i[2];
  if (dof < 0) dof = 0;
  const ct_tensor *gv = g;
  if (n->i[3]) {
    TRY(ct_mul_scalar(&t[0], out, 2.0));
    TRY(ct_div(&t[1], g, t[0]));
    TRY(ct_eq_scalar(&t[2], out, 0.0));
    TRY(scalar_like(&t[3], t[1], 0.0));
    TRY(ct_where(&t[4], t[2], t[3], t[1]));
    gv = t[4];
  }
  /* (2 / dof) g first, on the reduced shape: PyTorch's order, and the cheaper one */
  TRY(ct_mul_scalar(&t[5], gv, 2.0 / dof));
  TRY(ct__ag_unreduce(&t[6], n, t[5]));
  TRY(ct_mean(&t[7], x, nd, dims, true));
  TRY(ct_sub(&t[8], x, t[7]));
  TRY(ct_mul(&gin[0], t[6], t[8]));
done:
  RELEASE_TMP(t);
  return st;
}

/* logsumexp: g exp(x - out) (PyTorch's logsumexp_backward; a slice of all -inf gives NaN there
 * too). */
ct_status ct__grad_logsumexp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  TRY(ct__ag_unreduce(&t[0], n, ct__ag_saved(n, 1)));
  TRY(ct_sub(&t[1], ct__ag_saved(n, 0), t[0]));
  TRY(ct_exp(&t[2], t[1]));
  TRY(ct__ag_unreduce(&t[3], n, g));
  TRY(ct_mul(&gin[0], t[3], t[2]));
done:
  RELEASE_TMP(t);
  return st;
}

/* softmax along dim i[0], y its saved output: y (g - sum(g y, dim)). */
ct_status ct__grad_softmax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  const ct_tensor *y = ct__ag_saved(n, 0);
  int dim = (int)n->i[0];
  TRY(ct_mul(&t[0], g, y));
  TRY(ct_sum(&t[1], t[0], 1, &dim, true));
  TRY(ct_sub(&t[2], g, t[1]));
  TRY(ct_mul(&gin[0], y, t[2]));
done:
  RELEASE_TMP(t);
  return st;
}

/* log_softmax along dim i[0], y its saved output: g - exp(y) sum(g, dim). */
ct_status ct__grad_log_softmax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  ct_status st = CT_OK;
  ct_tensor *t[CT__TMP] = {0};
  int dim = (int)n->i[0];
  TRY(ct_exp(&t[0], ct__ag_saved(n, 0)));
  TRY(ct_sum(&t[1], g, 1, &dim, true));
  TRY(ct_mul(&t[2], t[0], t[1]));
  TRY(ct_sub(&gin[0], g, t[2]));
done:
  RELEASE_TMP(t);
  return st;
}

/* g (the reduced shape, kept dims or not) as a view of the input's shape: reshaped to the
 * kept-dims shape, then expanded (stride 0 along the reduced dims). */
ct_status ct__ag_unreduce(ct_tensor **out, const ct__node *n, const ct_tensor *g) {
  const ct__edge *e = &n->in[0];
  int64_t ks[CT_MAX_DIMS];
  for (int d = 0; d < e->ndim; d++) ks[d] = (n->i[1] >> d) & 1 ? 1 : e->shape[d];
  ct_tensor *r = NULL;
  CT__TRY(ct_reshape(&r, g, e->ndim, ks));
  ct_status st = ct_expand(out, r, e->ndim, e->shape);
  ct_release(r);
  return st;
}

ct_status ct__grad_sum(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  return ct__ag_unreduce(&gin[0], n, g);
}

ct_status ct__grad_mean(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  int64_t in = 1, out = 1;
  for (int d = 0; d < n->in[0].ndim; d++) in *= n->in[0].shape[d];
  for (int d = 0; d < n->out_ndim; d++) out *= n->out_shape[d];
  ct_tensor *u = NULL;
  CT__TRY(ct__ag_unreduce(&u, n, g));
  /* PyTorch divides by the count of reduced elements; an empty reduction gives NaN there too. */
  ct_status st = ct_div_scalar(&gin[0], u, out ? (double)in / (double)out : 0.0);
  ct_release(u);
  return st;
}
