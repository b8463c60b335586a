/* Gradient formulas of the shape ops (rows of tensor/grad_ops.def), written over the public
 * shape ops, so they are deterministic (no atomics) and serve every float dtype:
 *   cat/stack  each input's gradient is its slice of g (a view);
 *   flip       g flipped back; roll: g rolled back;
 *   repeat     the tiles of g summed, one repeated dim at a time;
 *   tril/triu  g masked the same way;
 *   pad        constant: g cropped (pad by the negated pads); reflect and replicate also add
 *              the border of g back onto the elements it copied (PyTorch's reflection_pad and
 *              replication_pad backward), one padded dim at a time: the forward maps each
 *              output coordinate per dim, so its adjoint is the product of per-dim adjoints. */
#include "autograd/autograd.h"
#include "cltensor/elementwise.h"
#include "cltensor/reduce.h"
#include "cltensor/shape.h"
#include "core/error.h"

/* cat and stack: a cat input's extent along the dim is its edge's (a 1-D empty input that cat
 * skipped has another ndim and takes none). */
ct_status ct__grad_cat(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__rec_cat *r = ct__rec_CAT(n);
  int d = r->dim;
  bool stack = r->stack;
  int64_t at = 0;
  for (int k = 0; k < n->nin; k++) {
    const ct__edge *e = &n->in[k];
    int64_t len = stack ? 1 : e->ndim == n->out_ndim ? e->shape[d] : 0;
    if (e->needed) {
      if (!stack && e->ndim != n->out_ndim) {
        CT__TRY(ct__ag_zeros_for(&gin[k], e));
      } else if (!stack) {
        CT__TRY(ct_slice(&gin[k], g, d, at, at + len, 1));
      } else {
        ct_tensor *s = NULL;
        CT__TRY(ct_slice(&s, g, d, at, at + 1, 1));
        ct_status st = ct_squeeze(&gin[k], s, d);
        ct_release(s);
        CT__TRY(st);
      }
    }
    at += len;
  }
  return CT_OK;
}

ct_status ct__grad_flip(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  const ct__rec_flip *r = ct__rec_FLIP(n);
  return ct_flip(&gin[0], g, r->ndims, r->dims);
}

ct_status ct__grad_roll(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  const ct__rec_roll *r = ct__rec_ROLL(n);
  return ct_roll(&gin[0], g, -r->shift, r->dim);
}

/* repeat: for each dim k repeated r times, g (whose dims before k
 * are already summed to the input's sizes) is seen as [before, r, size, after] and summed over
 * r: four dims whatever the rank, so CT_MAX_DIMS-dim inputs work too. The leading dims repeat
 * added come back as size 1, which the engine drops. */
ct_status ct__grad_repeat(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__edge *e = &n->in[0];
  if (!e->needed) return CT_OK;
  int nd = n->out_ndim, lead = nd - e->ndim;
  int64_t shape[CT_MAX_DIMS];
  for (int k = 0; k < nd; k++) shape[k] = n->out_shape[k];
  ct_tensor *cur = ct_retain((ct_tensor *)g);
  ct_status st = CT_OK;
  for (int k = 0; k < nd && st == CT_OK; k++) {
    int64_t r = ct__rec_REPEAT(n)->repeats[k], size = k < lead ? 1 : e->shape[k - lead];
    if (r == 1) continue;
    int64_t four[4] = {1, r, size, 1};
    for (int j = 0; j < k; j++) four[0] *= shape[j];
    for (int j = k + 1; j < nd; j++) four[3] *= shape[j];
    ct_tensor *v = NULL, *s = NULL;
    st = ct_reshape(&v, cur, 4, four);
    if (st == CT_OK) st = ct_sum(&s, v, 1, (const int[]){1}, false);
    shape[k] = size;
    ct_release(cur);
    cur = NULL;
    if (st == CT_OK) st = ct_reshape(&cur, s, nd, shape);
    ct_release(v);
    ct_release(s);
  }
  return ct__tensor_result(&gin[0], cur, st);
}

ct_status ct__grad_tril(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  if (!n->in[0].needed) return CT_OK;
  const ct__rec_tril *r = ct__rec_TRIL(n);
  return r->upper ? ct_triu(&gin[0], g, r->diagonal) : ct_tril(&gin[0], g, r->diagonal);
}

/* t zero-padded by (a, b) along dim d alone (a, b >= 0). */
static ct_status ct__pad_dim(ct_tensor **out, const ct_tensor *t, int d, int64_t a, int64_t b) {
  int nd = ct_tensor_ndim(t), npad = 2 * (nd - d);
  int64_t pad[2 * CT_MAX_DIMS] = {0};
  pad[npad - 2] = a;
  pad[npad - 1] = b;
  return ct_pad(out, t, npad, pad, CT_PAD_CONSTANT, 0.0);
}

/* *acc += the part [from, to) of g along d, flipped (reflect) or summed (replicate), zero-padded
 * by (a, b) to the input's size along d. */
static ct_status ct__pad_border(ct_tensor **acc, const ct_tensor *g, int d, int64_t from, int64_t to, bool reflect,
                                int64_t a, int64_t b) {
  ct_tensor *t[3] = {0}, *sum = NULL;
  ct_status st = ct_slice(&t[0], g, d, from, to, 1);
  if (st == CT_OK)
    st = reflect ? ct_flip(&t[1], t[0], 1, (const int[]){d}) : ct_sum(&t[1], t[0], 1, (const int[]){d}, true);
  if (st == CT_OK) st = ct__pad_dim(&t[2], t[1], d, a, b);
  if (st == CT_OK) st = ct_add(&sum, *acc, t[2]);
  for (int k = 0; k < 3; k++) ct_release(t[k]);
  if (st != CT_OK) return st;
  ct_release(*acc);
  *acc = sum;
  return CT_OK;
}

/* The adjoint of a reflect or replicate pad (l, r) of dim d, of input size s, applied to g
 * (output size o = l + s + r along d). With u = j - l for output coordinate j: u in [0, s) is
 * element u (g cropped, as the constant pad's adjoint), u < 0 is element -u (reflect) or 0
 * (replicate), u >= s is element 2(s-1) - u (reflect) or s-1 (replicate). Pads may be negative
 * (crops), as the forward allows. */
static ct_status ct__pad_adjoint_dim(ct_tensor **out, const ct_tensor *g, int d, int64_t l, int64_t r, int64_t s,
                                     bool reflect) {
  int64_t o = l + s + r;
  ct_tensor *acc = NULL;
  int nd = ct_tensor_ndim(g), npad = 2 * (nd - d);
  int64_t pad[2 * CT_MAX_DIMS] = {0};
  pad[npad - 2] = -l;
  pad[npad - 1] = -r;
  CT__TRY(ct_pad(&acc, g, npad, pad, CT_PAD_CONSTANT, 0.0));
  ct_status st = CT_OK;
  if (l > 0) { /* j in [0, a): element l - j (reflect; l < s), or 0 */
    int64_t a = o < l ? o : l;
    st = reflect ? ct__pad_border(&acc, g, d, 0, a, true, l - a + 1, s - l - 1)
                 : ct__pad_border(&acc, g, d, 0, a, false, 0, s - 1);
  }
  if (st == CT_OK && r > 0) { /* j in [c, o): element 2(s-1) + l - j (reflect; r < s), or s-1 */
    int64_t c = l + s > 0 ? l + s : 0, m = o - c;
    st = reflect ? ct__pad_border(&acc, g, d, c, o, true, s - 1 - r, r + 1 - m)
                 : ct__pad_border(&acc, g, d, c, o, false, s - 1, 0);
  }
  return ct__tensor_result(out, acc, st);
}

/* pad: the pads are (left, right) pairs from the last dim. */
ct_status ct__grad_pad(ct__node *n, const ct_tensor *g, ct_tensor **gin) {
  const ct__edge *e = &n->in[0];
  if (!e->needed) return CT_OK;
  const ct__rec_pad *r = ct__rec_PAD(n);
  int mode = r->mode, npad = r->npad;
  int64_t neg[2 * CT_MAX_DIMS];
  if (mode == CT_PAD_CONSTANT) {
    for (int k = 0; k < npad; k++) neg[k] = -r->pad[k];
    return ct_pad(&gin[0], g, npad, neg, CT_PAD_CONSTANT, 0.0);
  }
  ct_tensor *cur = ct_retain((ct_tensor *)g);
  ct_status st = CT_OK;
  for (int p = 0; p < npad / 2 && st == CT_OK; p++) {
    int d = e->ndim - 1 - p;
    ct_tensor *next = NULL;
    st = ct__pad_adjoint_dim(&next, cur, d, r->pad[2 * p], r->pad[2 * p + 1], e->shape[d], mode == CT_PAD_REFLECT);
    ct_release(cur);
    cur = next;
  }
  return ct__tensor_result(&gin[0], cur, st);
}
