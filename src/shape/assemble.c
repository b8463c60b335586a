/* cat, stack (copies into slices of the result, through ct_copy's converting strided copy) and
 * chunk, split (views). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cltensor/elementwise.h"
#include "core/error.h"
#include "device/device.h"
#include "shape/shape.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

ct_status ct__shape_narrow(ct_tensor **out, const ct_tensor *t, int dim, int64_t start, int64_t len) {
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = len;
  return ct__tensor_view(out, t, t->ndim, shape, t->strides, t->offset + (len > 0 ? start * t->strides[dim] : 0));
}

/* Checks ts[0..n) (non-NULL, one device) and promotes their dtypes into *dt. */
static ct_status ct__check_list(ct_dtype *dt, ct_tensor *const *ts, int n, const char *fn) {
  CT__CHECK_NOT_NULL(fn, ts);
  if (n < 1) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %d (expected at least 1 tensor)", fn, n);
  for (int i = 0; i < n; i++) {
    if (!ts[i]) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ts[%d] is NULL", fn, i);
    if (ts[i]->storage->device != ts[0]->storage->device)
      return ct__error(CT_ERR_DEVICE_MISMATCH,
                       "%s: expected all tensors on the same device, but ts[0] is on %s and ts[%d] is on %s", fn,
                       ts[0]->storage->device->spec, i, ts[i]->storage->device->spec);
  }
  ct_dtype r = ts[0]->dtype;
  for (int i = 1; i < n; i++) {
    ct_dtype p;
    if (ct_promote_types(&p, r, ts[i]->dtype) != CT_OK)
      return ct__error(CT_ERR_DTYPE_MISMATCH,
                       "%s: ts[%d] of dtype %s does not promote with %s (the dtype of ts[0..%d]); cast one first", fn,
                       i, ct_dtype_name(ts[i]->dtype), ct_dtype_name(r), i - 1);
    r = p;
  }
  *dt = r;
  return CT_OK;
}

/* torch.cat's legacy rule: a 1-D empty tensor joins anything (it is skipped). */
static int ct__cat_skipped(const ct_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

/* One CAT node for cat and stack over all n inputs (the formula reads each input's size along
 * dim from its edge): the dim of the result, and for stack input k is slice k of the result
 * with the dim removed. Inputs of integer dtypes take no gradient (never require
 * grad); a mix of float dtypes gets its gradients cast back by the engine. */
static ct_status ct__cat_record(ct_tensor *o, ct_tensor *const *ts, int n, int d, int stack, const char *fn) {
  ct__node *node = NULL;
  CT__TRY(ct__grad_record(&node, o, CT__GOP_CAT, 0, n, (const ct_tensor *const *)ts, fn));
  if (node) *ct__rec_CAT(node) = (ct__rec_cat){.dim = d, .stack = stack != 0};
  return CT_OK;
}

ct_status ct_cat(ct_tensor **out, ct_tensor *const *ts, int n, int dim) {
  const char *fn = "ct_cat";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  ct_dtype dt;
  CT__TRY(ct__check_list(&dt, ts, n, fn));
  int ref = 0;
  while (ref < n && ct__cat_skipped(ts[ref])) ref++;
  if (ref == n) ref = 0;
  const ct_tensor *r = ts[ref];
  if (r->ndim == 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ts[%d] is zero-dimensional and cannot be concatenated", fn, ref);
  int d = 0;
  CT__TRY(ct__dim_wrap(&d, r->ndim, dim, fn));
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, r->shape, sizeof shape);
  shape[d] = 0;
  char sa[200], sb[200];
  for (int i = 0; i < n; i++) {
    const ct_tensor *t = ts[i];
    if (ct__cat_skipped(t) && i != ref) continue;
    if (t->ndim != r->ndim)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: ts[%d] has shape %s (%d dims) but ts[%d] has %s (%d dims)", fn, i,
                       ct__shape_str(sa, sizeof sa, t->ndim, t->shape), t->ndim, ref,
                       ct__shape_str(sb, sizeof sb, r->ndim, r->shape), r->ndim);
    for (int k = 0; k < r->ndim; k++)
      if (k != d && t->shape[k] != r->shape[k])
        return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: ts[%d] has shape %s but ts[%d] has %s (dim %d differs)", fn, i,
                         ct__shape_str(sa, sizeof sa, t->ndim, t->shape), ref,
                         ct__shape_str(sb, sizeof sb, r->ndim, r->shape), k);
    if (shape[d] > INT64_MAX - t->shape[d])
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the sizes along dim %d overflow int64", fn, d);
    shape[d] += t->shape[d];
  }
  ct_tensor *o;
  CT__TRY(ct__tensor_new(&o, r->storage->device, dt, r->ndim, shape, fn));
  ct_status st = CT_OK;
  int64_t at = 0;
  for (int i = 0; i < n && st == CT_OK; i++) {
    const ct_tensor *t = ts[i];
    if ((ct__cat_skipped(t) && i != ref) || t->shape[d] == 0 || ct_numel(t) == 0) continue;
    ct_tensor *slot = NULL;
    st = ct__shape_narrow(&slot, o, d, at, t->shape[d]);
    if (st == CT_OK) st = ct__copy(slot, t, fn);
    ct_release(slot);
    at += t->shape[d];
  }
  if (st == CT_OK) st = ct__cat_record(o, ts, n, d, 0, fn);
  return ct__tensor_result(out, o, st);
}

ct_status ct_stack(ct_tensor **out, ct_tensor *const *ts, int n, int dim) {
  const char *fn = "ct_stack";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  ct_dtype dt;
  CT__TRY(ct__check_list(&dt, ts, n, fn));
  const ct_tensor *r = ts[0];
  if (r->ndim >= CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ts[0] has %d dims; the result would have more than %d", fn, r->ndim,
                     CT_MAX_DIMS);
  int d = 0;
  CT__TRY(ct__dim_wrap(&d, r->ndim + 1, dim, fn));
  char sa[200], sb[200];
  for (int i = 1; i < n; i++) {
    const ct_tensor *t = ts[i];
    if (t->ndim != r->ndim || memcmp(t->shape, r->shape, (size_t)r->ndim * sizeof *r->shape) != 0)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: ts[%d] has shape %s but ts[0] has %s (stack needs equal shapes)", fn,
                       i, ct__shape_str(sa, sizeof sa, t->ndim, t->shape),
                       ct__shape_str(sb, sizeof sb, r->ndim, r->shape));
  }
  int64_t shape[CT_MAX_DIMS];
  for (int k = 0, j = 0; k <= r->ndim; k++) shape[k] = k == d ? n : r->shape[j++];
  ct_tensor *o;
  CT__TRY(ct__tensor_new(&o, r->storage->device, dt, r->ndim + 1, shape, fn));
  ct_status st = CT_OK;
  if (ct_numel(o) > 0) {
    /* Slot i: the result without dim d, at offset i * stride[d]. */
    int64_t sstr[CT_MAX_DIMS];
    for (int k = 0, j = 0; k <= r->ndim; k++)
      if (k != d) sstr[j++] = o->strides[k];
    for (int i = 0; i < n && st == CT_OK; i++) {
      ct_tensor *slot = NULL;
      st = ct__tensor_view(&slot, o, r->ndim, r->shape, sstr, o->offset + i * o->strides[d]);
      if (st == CT_OK) st = ct__copy(slot, ts[i], fn);
      ct_release(slot);
    }
  }
  if (st == CT_OK) st = ct__cat_record(o, ts, n, d, 1, fn);
  return ct__tensor_result(out, o, st);
}

/* Views of x along d of `size` elements each (the last smaller), npieces of them. Each piece is
 * a slice of x and records a SLICE node (step 1), so a piece left unused gives no gradient and
 * the others' gradients sum into x's. */
static ct_status ct__pieces(ct_tensor **outs, int *nout, const ct_tensor *x, int d, int64_t size, int64_t npieces,
                            const char *fn) {
  for (int64_t i = 0; i < npieces; i++) {
    int64_t start = i * size, len = x->shape[d] - start < size ? x->shape[d] - start : size;
    if (len < 0) len = 0;
    ct_status st = ct__shape_narrow(&outs[i], x, d, start, len);
    ct__node *node = NULL;
    if (st == CT_OK) st = ct__grad_record(&node, outs[i], CT__GOP_SLICE, 0, 1, (const ct_tensor *[]){x}, fn);
    if (node) *ct__rec_SLICE(node) = (ct__rec_slice){.dim = d, .start = len > 0 ? start : 0, .step = 1};
    if (st != CT_OK) {
      ct_release(outs[i]);
      outs[i] = NULL;
      for (int64_t j = 0; j < i; j++) {
        ct_release(outs[j]);
        outs[j] = NULL;
      }
      return st;
    }
  }
  *nout = (int)npieces;
  return CT_OK;
}

ct_status ct_chunk(ct_tensor **outs, int *nout, const ct_tensor *x, int chunks, int dim) {
  const char *fn = "ct_chunk";
  CT__CHECK_NOT_NULL(fn, nout);
  *nout = 0;
  CT__CHECK_NOT_NULL(fn, outs);
  CT__CHECK_NOT_NULL(fn, x);
  if (chunks < 1) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: chunks is %d (expected >= 1)", fn, chunks);
  if (x->ndim == 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: x is zero-dimensional (expected >= 1 dim)", fn);
  int d = 0;
  CT__TRY(ct__dim_wrap(&d, x->ndim, dim, fn));
  int64_t size = x->shape[d];
  /* PyTorch: pieces of ceil(size / chunks); a size-0 dim gives `chunks` empty pieces. */
  int64_t each = size / chunks + (size % chunks != 0);
  /* ceil(size / each) without size + each - 1, which overflows for an expanded dim near
   * INT64_MAX. */
  int64_t npieces = size == 0 ? chunks : (size - 1) / each + 1;
  return ct__pieces(outs, nout, x, d, each, npieces, fn);
}

ct_status ct_split(ct_tensor **outs, int *nout, const ct_tensor *x, int64_t size, int dim) {
  const char *fn = "ct_split";
  CT__CHECK_NOT_NULL(fn, nout);
  *nout = 0;
  CT__CHECK_NOT_NULL(fn, outs);
  CT__CHECK_NOT_NULL(fn, x);
  if (x->ndim == 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: x is zero-dimensional (expected >= 1 dim)", fn);
  int d = 0;
  CT__TRY(ct__dim_wrap(&d, x->ndim, dim, fn));
  int64_t dsize = x->shape[d];
  if (size < 1 && !(size == 0 && dsize == 0))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: size is %" PRId64 " (expected >= 1; 0 only for a size-0 dim)", fn,
                     size);
  /* ceil(dsize / size) without dsize + size - 1, which overflowed for size near INT64_MAX. */
  int64_t npieces = dsize == 0 ? 1 : (dsize - 1) / size + 1;
  if (npieces > INT32_MAX)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: size %" PRId64 " splits dim %d of size %" PRId64 " into %" PRId64
                     " pieces, more than an int counts", fn, size, d, dsize, npieces);
  return ct__pieces(outs, nout, x, d, size == 0 ? 1 : size, npieces, fn);
}
