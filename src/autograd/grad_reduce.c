/* Gradient formulas of the reductions and softmax (rows of tensor/grad_ops.def). */
#include "autograd/autograd.h"
#include "autograd/grad_tmp.h"
#include "cltensor/elementwise.h"
#include "cltensor/reduce.h"
#include "cltensor/shape.h"
#include "core/error.h"

/* The reduced dims of a reduction node as a list; returns how many. A 0-dim input has none,
 * which the reductions read as "every dim" (the same thing there). */
static int red_dims(const ct__node *n, int *dims) {
  int nd = 0;
  for (int d = 0; d < n->in[0].ndim; d++)
    if ((n->rec.reduce.dims >> d) & 1) dims[nd++] = d;
  return nd;
}

/* The number of elements a reduction node folds into each output. */
static int64_t red_count(const ct__node *n) {
  int64_t c = 1;
  for (int d = 0; d < n->in[0].ndim; d++)
    if ((n->rec.reduce.dims >> d) & 1) c *= n->in[0].shape[d];
  return c;
}

/* A 0-dim tensor of value v, dtype and device of like (a broadcast operand of where). */
static ct_status scalar_like(ct_tensor **out, const ct_tensor *like, double v) {
  return ct_full(out, like->storage->device, like->dtype, 0, NULL, v);
}

/* TMP(s, unreduce, t): t, of a reduction node n's output shape, as a view of its input's. */
static ct_status unreduce(ct_tensor **out, const ct__node *n, const ct_tensor *t) {
  return ct__ag_unreduce(out, t, &n->in[0], n->rec.reduce.dims);
}

/* prod: PyTorch's prod_backward. Each element's gradient is g times the product of the other
 * elements of its slice: out / x when the slice has no zero; when it has exactly one, the zero
 * gets the product of the nonzero others and every other element 0; with two or more zeros
 * everything is 0. Computed for all three cases at once (the out / x of a zero is inf or NaN
 * but where() drops it), so there is no host round trip to look for zeros. */
ct_status ct__grad_prod(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_reduce *r = ct__rec_PROD(n);
  const ct_tensor *x = r->x;
  int dims[CT_MAX_DIMS], nd = red_dims(n, dims);
  ct__tmps s = {0};
  ct_tensor *gu = TMP(&s, unreduce, n, g);
  ct_tensor *outu = TMP(&s, unreduce, n, r->out);
  ct_tensor *no_zero_g = TMP(&s, ct_div, outu, x); /* out / x: the slice has no zero */
  ct_tensor *zero = TMP(&s, ct_eq_scalar, x, 0.0);
  ct_tensor *nzeros = TMP(&s, ct_sum, zero, nd, dims, true); /* zeros per slice (i64, kept dims) */
  ct_tensor *one = TMP(&s, scalar_like, x, 1.0);
  ct_tensor *x1 = TMP(&s, ct_where, zero, one, x);
  ct_tensor *others = TMP(&s, ct_prod, x1, nd, dims, true); /* product of the nonzero elements */
  ct_tensor *one_zero = TMP(&s, ct_eq_scalar, nzeros, 1.0);
  ct_tensor *only = TMP(&s, ct_logical_and, one_zero, zero); /* the only zero of its slice */
  ct__tmps_drop(&s, one), ct__tmps_drop(&s, x1), ct__tmps_drop(&s, one_zero);
  ct_tensor *z = TMP(&s, scalar_like, x, 0.0);
  ct_tensor *one_zero_g = TMP(&s, ct_where, only, others, z);
  ct_tensor *none = TMP(&s, ct_eq_scalar, nzeros, 0.0);
  ct__tmps_drop(&s, only);
  ct_tensor *f = TMP(&s, ct_where, none, no_zero_g, one_zero_g);
  GIN(&s, &gin[0], ct_mul, gu, f);
  return ct__tmps_end(&s);
}

/* max/min over dims (torch.amax/amin): the gradient is shared evenly among the elements equal
 * to the result, (g / count) * (x == out), so a NaN result gives NaN as PyTorch's
 * scale_grad_by_count. */
ct_status ct__grad_amax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_reduce *r = ct__rec_AMAX(n);
  int dims[CT_MAX_DIMS], nd = red_dims(n, dims);
  ct__tmps s = {0};
  ct_tensor *outu = TMP(&s, unreduce, n, r->out);
  ct_tensor *hit = TMP(&s, ct_eq, r->x, outu);
  ct_tensor *hitf = TMP(&s, ct_cast, hit, g->dtype);
  ct_tensor *ties = TMP(&s, ct_sum, hitf, nd, dims, true); /* ties per slice */
  ct_tensor *gu = TMP(&s, unreduce, n, g);
  ct_tensor *share = TMP(&s, ct_div, gu, ties);
  GIN(&s, &gin[0], ct_mul, share, hitf);
  return ct__tmps_end(&s);
}

/* var: g 2 (x - mean) / dof, dof = max(0, n - correction) as the forward's divisor (PyTorch's
 * var_backward). std: the var gradient of g / (2 std), and 0 where std == 0 (PyTorch's
 * std_backward). */
ct_status ct__grad_var(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_reduce *r = ct__rec_VAR(n);
  const ct_tensor *x = r->x, *out = r->out;
  int dims[CT_MAX_DIMS], nd = red_dims(n, dims);
  double dof = (double)red_count(n) - (double)r->correction;
  if (dof < 0) dof = 0;
  ct__tmps s = {0};
  const ct_tensor *gv = g;
  if (r->std) {
    ct_tensor *two_std = TMP(&s, ct_mul_scalar, out, 2.0);
    ct_tensor *q = TMP(&s, ct_div, g, two_std);
    ct_tensor *zero_std = TMP(&s, ct_eq_scalar, out, 0.0);
    ct_tensor *z = TMP(&s, scalar_like, q, 0.0);
    gv = TMP(&s, ct_where, zero_std, z, q);
  }
  /* (2 / dof) g first, on the reduced shape: PyTorch's order, and the cheaper one */
  ct_tensor *g2 = TMP(&s, ct_mul_scalar, gv, 2.0 / dof);
  ct_tensor *gu = TMP(&s, unreduce, n, g2);
  ct_tensor *mean = TMP(&s, ct_mean, x, nd, dims, true);
  ct_tensor *dev = TMP(&s, ct_sub, x, mean);
  GIN(&s, &gin[0], ct_mul, gu, dev);
  return ct__tmps_end(&s);
}

/* logsumexp: g exp(x - out) (PyTorch's logsumexp_backward; a slice of all -inf gives NaN there
 * too). */
ct_status ct__grad_logsumexp(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_reduce *r = ct__rec_LOGSUMEXP(n);
  ct__tmps s = {0};
  ct_tensor *outu = TMP(&s, unreduce, n, r->out);
  ct_tensor *d = TMP(&s, ct_sub, r->x, outu);
  ct_tensor *e = TMP(&s, ct_exp, d);
  ct_tensor *gu = TMP(&s, unreduce, n, g);
  GIN(&s, &gin[0], ct_mul, gu, e);
  return ct__tmps_end(&s);
}

/* softmax along dim, y its saved output: y (g - sum(g y, dim)). */
ct_status ct__grad_softmax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_softmax *r = ct__rec_SOFTMAX(n);
  const ct_tensor *y = r->out;
  ct__tmps s = {0};
  ct_tensor *gy = TMP(&s, ct_mul, g, y);
  ct_tensor *sum = TMP(&s, ct_sum, gy, 1, &r->dim, true);
  ct_tensor *d = TMP(&s, ct_sub, g, sum);
  GIN(&s, &gin[0], ct_mul, y, d);
  return ct__tmps_end(&s);
}

/* log_softmax along dim, y its saved output: g - exp(y) sum(g, dim). */
ct_status ct__grad_log_softmax(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_softmax *r = ct__rec_LOG_SOFTMAX(n);
  ct__tmps s = {0};
  ct_tensor *p = TMP(&s, ct_exp, r->out);
  ct_tensor *sum = TMP(&s, ct_sum, g, 1, &r->dim, true);
  ct_tensor *ps = TMP(&s, ct_mul, p, sum);
  GIN(&s, &gin[0], ct_sub, g, ps);
  return ct__tmps_end(&s);
}

/* g (the reduced shape, kept dims or not) as a view of the input's shape: reshaped to the
 * kept-dims shape, then expanded (stride 0 along the reduced dims). */
ct_status ct__ag_unreduce(ct_tensor **out, const ct_tensor *g, const ct__edge *e, uint32_t dims) {
  int64_t ks[CT_MAX_DIMS];
  for (int d = 0; d < e->ndim; d++) ks[d] = (dims >> d) & 1 ? 1 : e->shape[d];
  ct_tensor *r = NULL;
  CT__TRY(ct_reshape(&r, g, e->ndim, ks));
  ct_status st = ct_expand(out, r, e->ndim, e->shape);
  ct_release(r);
  return st;
}

ct_status ct__grad_sum(ct__node *n, const ct_tensor *g, ct_tensor **gin) { return unreduce(&gin[0], n, g); }

ct_status ct__grad_mean(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  int64_t in = 1, out = 1;
  for (int d = 0; d < n->in[0].ndim; d++) in *= n->in[0].shape[d];
  for (int d = 0; d < n->out_ndim; d++) out *= n->out_shape[d];
  /* PyTorch divides by the count of reduced elements; an empty reduction gives NaN there too. */
  ct__tmps s = {0};
  ct_tensor *gu = TMP(&s, unreduce, n, g);
  GIN(&s, &gin[0], ct_div_scalar, gu, out ? (double)in / (double)out : 0.0);
  return ct__tmps_end(&s);
}
