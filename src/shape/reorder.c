/* flip and roll (views + ct_copy), and the ops of kernels/shape.cl's one gather kernel: repeat,
 * tril/triu, pad. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "shape/shape.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* The modes of kernels/shape.cl. */
enum { CT__GATHER_MOD, CT__GATHER_CONSTANT, CT__GATHER_REFLECT, CT__GATHER_REPLICATE, CT__GATHER_TRIL,
       CT__GATHER_TRIU };

/* A new contiguous tensor of shape oshape (ndim dims, x's dtype) whose element at coordinates c
 * comes from x at the per-dim source coordinates the mode gives (kernels/shape.cl). x's shape
 * and strides are taken with leading size-1 dims up to ndim. value: the element's bits (dtype
 * size) stored where the mode takes nothing from x. */
static ct_status ct__gather(ct_tensor **out, const ct_tensor *x, int ndim, const int64_t *oshape, const int64_t *lo,
                            int mode, int64_t diag, const void *value, const char *fn) {
  ct_device *d = x->storage->device;
  ct_tensor *o;
  CT__TRY(ct__tensor_new(&o, d, x->dtype, ndim, oshape, fn));
  int64_t n = ct_numel(o);
  if (n == 0) {
    *out = o;
    return CT_OK;
  }
  /* The geometry padded to at least 2 dims with leading size-1 dims (x's too): the kernel takes
   * the two innermost as scalars and the rest (outermost first) in long8s. */
  int nd = ndim < 2 ? 2 : ndim, lead = nd - x->ndim, pre = nd - ndim;
  int64_t osh[CT_MAX_DIMS], ssh[CT_MAX_DIMS], sst[CT_MAX_DIMS], slo[CT_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    osh[i] = i < pre ? 1 : oshape[i - pre];
    slo[i] = i < pre ? 0 : lo[i - pre];
    ssh[i] = i < lead ? 1 : x->shape[i - lead];
    sst[i] = i < lead ? 0 : x->strides[i - lead];
  }
  int no = nd - 2;
  size_t es = ct_dtype_size(x->dtype);
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_BITS=%s", ct__dtype_bits_type(es));
  ct__kernel *k = NULL;
  ct_status st = ct__kernel_get(&k, d, "shape.cl", "shape_gather", opts);
  if (st != CT_OK) ct__error_append(" (in %s)", fn);
  if (st == CT_OK) {
    uint64_t zero = 0;
    struct ct__kargs a;
    ct__kargs_begin(&a, k, ct__kernel_lock(k));
    ct__karg_tensor(&a, "dst", o, 0);
    ct__karg_tensor(&a, "src", x, 0);
    ct__karg_long8(&a, "oshape", no, osh, 1);
    ct__karg_long8(&a, "sshape", no, ssh, 1);
    ct__karg_long8(&a, "sstr", no, sst, 0);
    ct__karg_long8(&a, "lo", no, slo, 0);
    ct__karg_int(&a, "nouter", no);
    ct__karg_long(&a, "n0", osh[nd - 1]);
    ct__karg_long(&a, "s0", ssh[nd - 1]);
    ct__karg_long(&a, "st0", sst[nd - 1]);
    ct__karg_long(&a, "lo0", slo[nd - 1]);
    ct__karg_long(&a, "n1", osh[nd - 2]);
    ct__karg_long(&a, "s1", ssh[nd - 2]);
    ct__karg_long(&a, "st1", sst[nd - 2]);
    ct__karg_long(&a, "lo1", slo[nd - 2]);
    /* Rows are cut into runs of at most 4096 elements, so that a long row (a 1-D tensor) still
     * spreads over many work-items. */
    int64_t n0 = osh[nd - 1], chunk = n0 < 4096 ? n0 : 4096, nchunks = (n0 + chunk - 1) / chunk;
    ct__karg_long(&a, "chunk", chunk);
    ct__karg_long(&a, "nchunks", nchunks);
    int64_t n2 = n / (n0 * osh[nd - 2]);
    ct__karg_long(&a, "n2", n2);
    ct__karg_int(&a, "mode", mode);
    ct__karg_long(&a, "diag", diag);
    ct__karg(&a, "value", es, value ? value : &zero);
    st = ct__kargs_end(&a, fn);
    if (st == CT_OK) {
      /* One work-item per run of an output row. */
      size_t global[2] = {(size_t)(osh[nd - 2] * nchunks), (size_t)n2}, local[2];
      ct__launch_dims(k, 2, global, local);
      st = ct__kernel_launch(k, d, 2, global, local);
    }
    ct__kernel_unlock(k);
  }
  return ct__tensor_result(out, o, st);
}

/* A new contiguous copy of the view of x given by (shape, strides, offset). */
static ct_status ct__copy_of_view(ct_tensor **out, const ct_tensor *x, const int64_t *strides, int64_t offset,
                                  const char *fn) {
  ct_tensor *v = NULL, *o = NULL;
  ct_status st = ct__tensor_view(&v, x, x->ndim, x->shape, strides, offset);
  if (st == CT_OK) st = ct__tensor_new(&o, x->storage->device, x->dtype, x->ndim, x->shape, fn);
  if (st == CT_OK) st = ct__copy(o, v, fn);
  ct_release(v);
  return ct__tensor_result(out, o, st);
}

/* Hands out r, the result of op fn on x (status st so far), recording a node of kind op when x
 * requires grad; *node gets it (or NULL) for the op's arguments. */
static ct_status ct__reorder_result(ct_tensor **out, ct_tensor *r, const ct_tensor *x, ct_status st, ct__gop op,
                                    ct__node **node, const char *fn) {
  *node = NULL;
  if (st == CT_OK) st = ct__grad_record(node, r, op, 0, 1, (const ct_tensor *[]){x}, fn);
  if (st != CT_OK) *node = NULL;
  return ct__tensor_result(out, r, st);
}

ct_status ct_flip(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims) {
  const char *fn = "ct_flip";
  CT__TRY(ct__op_begin(out, x, fn));
  if (ndims < 0 || ndims > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ndims is %d (expected 0..%d)", fn, ndims, CT_MAX_DIMS);
  if (ndims > 0) CT__CHECK_NOT_NULL(fn, dims);
  int64_t strides[CT_MAX_DIMS], offset = x->offset;
  memcpy(strides, x->strides, sizeof strides);
  int seen[CT_MAX_DIMS] = {0};
  for (int i = 0; i < ndims; i++) {
    int d = 0;
    ct_status st = ct__dim_wrap(&d, x->ndim, dims[i], fn);
    if (st != CT_OK) {
      ct__error_append(" (dims[%d])", i);
      return st;
    }
    if (seen[d])
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dims[%d] = %d names dim %d a second time", fn, i, dims[i], d);
    seen[d] = 1;
  }
  /* Flipping is a view with negative strides (never handed out: only ct_copy reads it). */
  if (ct_numel(x) > 0)
    for (int d = 0; d < x->ndim; d++)
      if (seen[d]) {
        offset += (x->shape[d] - 1) * x->strides[d];
        strides[d] = -x->strides[d];
      }
  ct_tensor *r = NULL;
  ct__node *n;
  ct_status st = ct__copy_of_view(&r, x, strides, offset, fn);
  CT__TRY(ct__reorder_result(out, r, x, st, CT__GOP_FLIP, &n, fn));
  if (n) { /* FLIP: the dims (wrapped); the gradient flips back */
    ct__rec_flip *rec = ct__rec_FLIP(n);
    for (int d = 0; d < x->ndim; d++)
      if (seen[d]) rec->dims[rec->ndims++] = d;
  }
  return CT_OK;
}

ct_status ct_roll(ct_tensor **out, const ct_tensor *x, int64_t shift, int dim) {
  const char *fn = "ct_roll";
  CT__TRY(ct__op_begin(out, x, fn));
  int d = 0;
  CT__TRY(ct__dim_wrap(&d, x->ndim, dim, fn));
  /* ROLL: the shift in [0, size) and the dim; the gradient rolls back by -shift. */
  ct__node *n;
  ct_tensor *o = NULL;
  ct_status st = CT_OK;
  /* A 0-d tensor (dim 0 or -1, as PyTorch) holds one element: rolling leaves it as it is. */
  if (x->ndim == 0) {
    st = ct__copy_of_view(&o, x, x->strides, x->offset, fn);
    CT__TRY(ct__reorder_result(out, o, x, st, CT__GOP_ROLL, &n, fn));
    if (n) *ct__rec_ROLL(n) = (ct__rec_roll){.shift = 0, .dim = 0};
    return CT_OK;
  }
  int64_t size = x->shape[d], s = size > 0 ? ((shift % size) + size) % size : 0;
  CT__TRY(ct__tensor_new(&o, x->storage->device, x->dtype, x->ndim, x->shape, fn));
  if (ct_numel(o) > 0) {
    /* out[s:] = x[:size-s], out[:s] = x[size-s:]: two strided copies. */
    for (int part = 0; part < 2 && st == CT_OK; part++) {
      int64_t len = part == 0 ? size - s : s;
      if (len == 0) continue;
      ct_tensor *dv = NULL, *sv = NULL;
      st = ct__shape_narrow(&dv, o, d, part == 0 ? s : 0, len);
      if (st == CT_OK) st = ct__shape_narrow(&sv, x, d, part == 0 ? 0 : size - s, len);
      if (st == CT_OK) st = ct__copy(dv, sv, fn);
      ct_release(dv);
      ct_release(sv);
    }
  }
  CT__TRY(ct__reorder_result(out, o, x, st, CT__GOP_ROLL, &n, fn));
  if (n) *ct__rec_ROLL(n) = (ct__rec_roll){.shift = s, .dim = d};
  return CT_OK;
}

ct_status ct_repeat(ct_tensor **out, const ct_tensor *x, int ndim, const int64_t *repeats) {
  const char *fn = "ct_repeat";
  CT__TRY(ct__op_begin(out, x, fn));
  if (ndim < x->ndim || ndim > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: ndim is %d but x has %d dims (the number of repeats must be %d..%d)", fn, ndim, x->ndim,
                     x->ndim, CT_MAX_DIMS);
  if (ndim > 0) CT__CHECK_NOT_NULL(fn, repeats);
  int64_t oshape[CT_MAX_DIMS], lo[CT_MAX_DIMS] = {0};
  int lead = ndim - x->ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t s = i < lead ? 1 : x->shape[i - lead];
    if (repeats[i] < 0)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: repeats[%d] is %" PRId64 " (expected >= 0)", fn, i, repeats[i]);
    if (s > 0 && repeats[i] > INT64_MAX / s)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: repeats[%d] = %" PRId64 " times size %" PRId64 " overflows int64",
                       fn, i, repeats[i], s);
    oshape[i] = s * repeats[i];
  }
  ct_tensor *r = NULL;
  ct__node *n;
  ct_status st = ct__gather(&r, x, ndim, oshape, lo, CT__GATHER_MOD, 0, NULL, fn);
  CT__TRY(ct__reorder_result(out, r, x, st, CT__GOP_REPEAT, &n, fn));
  /* REPEAT: the repeats; the gradient sums the tiles. */
  for (int i = 0; n && i < ndim; i++) ct__rec_REPEAT(n)->repeats[i] = repeats[i];
  return CT_OK;
}

static ct_status ct__tri(ct_tensor **out, const ct_tensor *x, int64_t diagonal, int mode, const char *fn) {
  CT__TRY(ct__op_begin(out, x, fn));
  if (x->ndim < 2)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: x has %d dims (expected at least 2)", fn, x->ndim);
  int64_t lo[CT_MAX_DIMS] = {0};
  /* The kernel compares col with row + diag: a diagonal near INT64_MIN or INT64_MAX would
   * overflow there. Every diagonal at or past the last column (or at or before minus the row
   * count) keeps or drops the same elements, so clamping to [-rows, cols] changes nothing. */
  int64_t rows = x->shape[x->ndim - 2], cols = x->shape[x->ndim - 1];
  int64_t diag = diagonal < -rows ? -rows : diagonal > cols ? cols : diagonal;
  ct_tensor *r = NULL;
  ct__node *n;
  ct_status st = ct__gather(&r, x, x->ndim, x->shape, lo, mode, diag, NULL, fn);
  CT__TRY(ct__reorder_result(out, r, x, st, CT__GOP_TRIL, &n, fn));
  /* TRIL: the gradient is masked the same way */
  if (n) *ct__rec_TRIL(n) = (ct__rec_tril){.diagonal = diagonal, .upper = mode == CT__GATHER_TRIU};
  return CT_OK;
}

ct_status ct_tril(ct_tensor **out, const ct_tensor *x, int64_t diagonal) {
  return ct__tri(out, x, diagonal, CT__GATHER_TRIL, "ct_tril");
}

ct_status ct_triu(ct_tensor **out, const ct_tensor *x, int64_t diagonal) {
  return ct__tri(out, x, diagonal, CT__GATHER_TRIU, "ct_triu");
}

static const char *ct__pad_mode_name(ct_pad_mode m) {
  return m == CT_PAD_CONSTANT ? "constant" : m == CT_PAD_REFLECT ? "reflect" : "replicate";
}

ct_status ct_pad(ct_tensor **out, const ct_tensor *x, int npad, const int64_t *pad, ct_pad_mode mode,
                 double value) {
  const char *fn = "ct_pad";
  CT__TRY(ct__op_begin(out, x, fn));
  if (mode != CT_PAD_CONSTANT && mode != CT_PAD_REFLECT && mode != CT_PAD_REPLICATE)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: mode %d is not a ct_pad_mode", fn, (int)mode);
  if (npad < 0 || npad % 2 != 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: npad is %d (expected an even count >= 0: (left, right) pairs)", fn,
                     npad);
  if (npad / 2 > x->ndim)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: npad is %d but x has only %d dims (at most 2 * ndim pads)", fn,
                     npad, x->ndim);
  if (npad > 0) CT__CHECK_NOT_NULL(fn, pad);
  char sa[200];
  int npd = npad / 2;
  if (mode != CT_PAD_CONSTANT) {
    /* PyTorch's reflection and replication pads: 1, 2 or 3 trailing dims, with an optional
     * batch dim in front of one more leading dim. */
    if (npd < 1 || npd > 3 || (x->ndim != npd + 1 && x->ndim != npd + 2))
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: npad %d with mode %s needs x of %d or %d dims, but x has shape %s (%d dims); "
                       "non-constant pads take npad 2, 4 or 6",
                       fn, npad, ct__pad_mode_name(mode), npd + 1, npd + 2,
                       ct__shape_str(sa, sizeof sa, x->ndim, x->shape), x->ndim);
    for (int i = x->ndim == npd + 2 ? 1 : 0; i < x->ndim; i++)
      if (x->shape[i] == 0)
        return ct__error(CT_ERR_INVALID_ARGUMENT,
                         "%s: mode %s needs non-empty dims (only a batch dim may be 0), but x has shape %s", fn,
                         ct__pad_mode_name(mode), ct__shape_str(sa, sizeof sa, x->ndim, x->shape));
  }
  uint64_t bits = 0;
  if (mode == CT_PAD_CONSTANT) {
    CT__TRY(ct__dtype_check_scalar(value, x->dtype, fn, "value"));
    ct__host_store_double(x->dtype, &bits, value);
  }
  int64_t oshape[CT_MAX_DIMS], lo[CT_MAX_DIMS] = {0};
  memcpy(oshape, x->shape, sizeof oshape);
  for (int p = 0; p < npd; p++) {
    int d = x->ndim - 1 - p;
    int64_t l = pad[2 * p], r = pad[2 * p + 1], s = x->shape[d];
    if (mode == CT_PAD_REFLECT && (l >= s || r >= s))
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: reflect pad (pad[%d], pad[%d]) = (%" PRId64 ", %" PRId64 ") must be less than the size %" PRId64
                       " of dim %d of x (shape %s)",
                       fn, 2 * p, 2 * p + 1, l, r, s, d, ct__shape_str(sa, sizeof sa, x->ndim, x->shape));
    /* The gradient pads by (-l, -r), which INT64_MIN has not. */
    if (l == INT64_MIN || r == INT64_MIN)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: pad (pad[%d], pad[%d]) = (%" PRId64 ", %" PRId64 ") holds INT64_MIN, whose negation "
                       "int64 cannot hold (expected pads > INT64_MIN)",
                       fn, 2 * p, 2 * p + 1, l, r);
    /* s + l + r, exactly: l + r overflows only when both have one sign (then the size is too
     * large or negative for sure), and s >= 0 can then only push it past INT64_MAX. */
    int64_t lr, size;
    if (__builtin_add_overflow(l, r, &lr) || __builtin_add_overflow(s, lr, &size) || size < 0)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: pad (pad[%d], pad[%d]) = (%" PRId64 ", %" PRId64 ") makes dim %d of size %" PRId64
                       " negative or too large",
                       fn, 2 * p, 2 * p + 1, l, r, d, s);
    oshape[d] = size;
    /* The kernel maps output coordinate c to c - lo: under the constant and replicate modes a
     * left pad before -s (everything cropped) or past the output's size (nothing of x reached)
     * takes the same elements as -s or the size, and clamping keeps c - lo from overflowing.
     * Reflect pads are within (-2s, s) already (each < s, the size >= 0). */
    lo[d] = mode == CT_PAD_REFLECT ? l : l < -s ? -s : l > size ? size : l;
  }
  int m = mode == CT_PAD_CONSTANT ? CT__GATHER_CONSTANT : mode == CT_PAD_REFLECT ? CT__GATHER_REFLECT
                                                                                 : CT__GATHER_REPLICATE;
  ct_tensor *r = NULL;
  ct__node *n;
  ct_status st = ct__gather(&r, x, x->ndim, oshape, lo, m, 0, &bits, fn);
  CT__TRY(ct__reorder_result(out, r, x, st, CT__GOP_PAD, &n, fn));
  if (n) { /* PAD: the mode and the pads as given (npad <= 2 * CT_MAX_DIMS) */
    ct__rec_pad *rec = ct__rec_PAD(n);
    rec->mode = mode;
    rec->npad = npad;
    for (int k = 0; k < npad; k++) rec->pad[k] = pad[k];
  }
  return CT_OK;
}
