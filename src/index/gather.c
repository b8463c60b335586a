/* index_select, gather, embedding and masked_fill: element moves by kernels/index.cl, which is
 * specialised only by element size (one program per size serves every dtype). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"
#include "index/index.h"

/* A gather_bits launch: the contiguous out (shape oshape, ondim >= 1) gets
 * x[sum c_d xstr_d + index[sum c_d istr_d] * sel_stride]. On a bad index *bad holds the
 * record (ct__index_bad_read). */
struct gather_geom {
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t xstr[CT_MAX_DIMS];
  int64_t istr[CT_MAX_DIMS];
  int64_t sel_stride, sel_size;
};

/* Whether gather_bits should read each row's span of x in order before its random reads
 * (kernels/index.cl says why): on CPU devices (whose hardware prefetchers this serves; a GPU
 * would pay for a serial loop), for an index that varies along the row and selects along the
 * row's contiguous dim of x (the span x + [0, sel_size)), when the span fits in a core's cache
 * (64 KB) and costs at most one extra read per 4 output elements (sel_size / line <= inner / 4). */
static int touch_span(const ct_device *d, const struct gather_geom *g, size_t es) {
  int last = g->ndim - 1;
  int64_t span = g->sel_size * (int64_t)es;
  return ct__device_chunked(d) && g->istr[last] != 0 && g->xstr[last] == 0 && g->sel_stride == 1 &&
         span <= 65536 && span / 64 <= g->shape[last] / 4;
}

/* The most output elements an 8-byte gather moves as pairs of 4-byte ones (below). */
#define CT__GATHER_PAIRS_MAX 65536

/* An 8-byte gather (i64, f64) as a 4-byte one over pairs of uints, so that the 4-byte program
 * serves it too: a program and a kernel build fewer for a process that gathers both (a first
 * training step's images and labels, issue #30). x's strides and sel_stride double, and a last
 * dim of the 2 halves is added (stride 1 in x, 0 in the index), or merged into the last dim
 * where x is contiguous along it and the index constant (rows then stay as long). The added dim
 * makes rows of 2 elements, each a work-item's, so only small gathers take it; false when g
 * has no room for it. */
static bool gather_as_pairs(struct gather_geom *p, const struct gather_geom *g, int64_t n) {
  int last = g->ndim - 1;
  bool merge = g->xstr[last] == 1 && g->istr[last] == 0;
  if (!merge && (g->ndim == CT_MAX_DIMS || n > CT__GATHER_PAIRS_MAX)) return false;
  *p = *g;
  for (int i = 0; i < g->ndim; i++) p->xstr[i] = 2 * g->xstr[i];
  p->sel_stride = 2 * g->sel_stride;
  if (merge) {
    p->shape[last] = 2 * g->shape[last];
    p->xstr[last] = 1;
  } else {
    p->shape[g->ndim] = 2;
    p->xstr[g->ndim] = 1;
    p->istr[g->ndim] = 0;
    p->ndim = g->ndim + 1;
  }
  return true;
}

static ct_status gather_run(ct_tensor *out, const ct_tensor *x, const ct_tensor *index, const struct gather_geom *g0,
                            int64_t bad[4], const char *fn) {
  bad[0] = 0;
  int64_t n = ct_numel(out);
  if (n == 0) return CT_OK;
  ct_device *d = x->storage->device;
  size_t es = ct_dtype_size(x->dtype);
  struct gather_geom pairs;
  const struct gather_geom *g = g0;
  int64_t xoff = 0, ooff = 0; /* the offsets again in uints: 2x, so each shifted by itself */
  if (es == 8 && ct__tensor_elem_offset(x, &xoff) && ct__tensor_elem_offset(out, &ooff) &&
      gather_as_pairs(&pairs, g0, n)) {
    g = &pairs;
    es = 4;
  } else {
    xoff = ooff = 0;
  }
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_BITS=%s", ct__dtype_bits_type(es));
  ct__kernel *k;
  CT__TRY(ct__kernel_for(&k, d, "index.cl", "gather_bits", CT__NO_DTYPE, opts, fn));
  ct_tensor *rec;
  bool check = ct__index_check_needed(index, g->sel_size);
  CT__TRY(ct__index_bad_new(&rec, d, check, fn));
  int64_t inner = g->shape[g->ndim - 1], rows = 1;
  for (int i = 0; i < g->ndim - 1; i++) rows *= g->shape[i];
  int64_t nitems = rows * ((inner + 255) / 256); /* CT_CHUNK in kernels/index.cl */
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  ct__karg_tensor(&a, "out", out, ooff);
  ct__karg_tensor(&a, "x", x, xoff);
  ct__karg_long8(&a, "x", g->ndim, g->xstr, 0);
  ct__index_karg_strided(&a, "idx", index, g->ndim, g->istr);
  ct__karg_int(&a, "idx64", index->dtype == CT_I64);
  ct__karg_long(&a, "sel_stride", g->sel_stride);
  ct__karg_long(&a, "sel_size", g->sel_size);
  ct__karg_int(&a, "touch", touch_span(d, g, es));
  ct__karg_int(&a, "ndim", g->ndim);
  ct__karg_long8(&a, "shape", g->ndim, g->shape, 1);
  ct__karg_long(&a, "nitems", nitems);
  ct_status st = ct__index_launch_checked(k, &a, d, nitems, rec, check, bad, fn);
  if (st == CT_OK && bad[0] && g != g0) bad[1] /= 2; /* a position in uints: each element is 2 */
  return st;
}

/* For an empty result of a non-empty index: checks the index alone (as PyTorch does); on a bad
 * one bad[1] is its row-major position in the index. */
static ct_status check_only(const ct_tensor *x, const ct_tensor *index, int64_t sel_size, int64_t bad[4],
                            const char *fn) {
  bad[0] = 0;
  int64_t ni = ct_numel(index);
  if (ni == 0) return CT_OK;
  ct_device *d = x->storage->device;
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_BITS=%s", ct__dtype_bits_type(ct_dtype_size(x->dtype)));
  ct__kernel *k;
  CT__TRY(ct__kernel_for(&k, d, "index.cl", "index_check", CT__NO_DTYPE, opts, fn));
  ct_tensor *rec;
  bool check = ct__index_check_needed(index, sel_size);
  CT__TRY(ct__index_bad_new(&rec, d, check, fn));
  int nd = index->ndim ? index->ndim : 1;
  int64_t one = 1, zero = 0;
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  ct__index_karg_strided(&a, "idx", index, index->ndim, index->ndim ? index->strides : &zero);
  ct__karg_int(&a, "idx64", index->dtype == CT_I64);
  ct__karg_int(&a, "ndim", nd);
  ct__karg_long8(&a, "shape", index->ndim, index->ndim ? index->shape : &one, 1);
  ct__karg_long(&a, "sel_size", sel_size);
  ct__karg_long(&a, "nitems", ni);
  return ct__index_launch_checked(k, &a, d, ni, rec, check, bad, fn);
}

/* Common checks of an (x, index) pair. */
static ct_status check_pair(const ct_tensor *x, const char *xn, const ct_tensor *index, const char *in,
                            const char *fn) {
  CT__TRY(ct__check_same_device(fn, xn, x, in, index));
  return ct__index_check_dtype(index, in, fn);
}

ct_status ct_index_select(ct_tensor **out, const ct_tensor *x, int dim, const ct_tensor *index) {
  static const char fn[] = "ct_index_select";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__TRY(check_pair(x, "x", index, "index", fn));
  if (index->ndim > 1) {
    char sb[200];
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: index must be 1-D or 0-D, but has shape %s", fn,
                     ct__shape_str(sb, sizeof sb, index->ndim, index->shape));
  }
  int dd;
  CT__TRY(ct__dim_wrap(&dd, x->ndim, dim, fn));
  int64_t ni = ct_numel(index);
  struct gather_geom g;
  memset(&g, 0, sizeof g);
  g.ndim = x->ndim ? x->ndim : 1;
  for (int i = 0; i < x->ndim; i++) {
    g.shape[i] = x->shape[i];
    g.xstr[i] = x->strides[i];
  }
  if (x->ndim == 0) {
    g.shape[0] = 1;
    g.xstr[0] = 0;
  }
  g.sel_size = g.shape[dd];
  g.sel_stride = x->ndim ? x->strides[dd] : 0;
  g.shape[dd] = ni;
  g.xstr[dd] = 0;
  g.istr[dd] = index->ndim ? index->strides[0] : 0;
  /* A 0-dim x gives a 0-dim result (PyTorch), which needs exactly one index. */
  if (x->ndim == 0 && ni != 1)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: a 0-dim x needs exactly 1 index, got %" PRId64, fn, ni);
  ct_tensor *r;
  CT__TRY(ct__tensor_new(&r, x->storage->device, x->dtype, x->ndim, g.shape, fn));
  int64_t bad[4];
  bool empty = ct_numel(r) == 0;
  ct_status st = empty ? check_only(x, index, g.sel_size, bad, fn) : gather_run(r, x, index, &g, bad, fn);
  if (st == CT_OK && bad[0]) {
    /* The kernel records the output position; its coordinate along dim is the index's. */
    int64_t inner = 1;
    for (int i = dd + 1; i < g.ndim; i++) inner *= g.shape[i];
    int64_t j = empty ? bad[1] : bad[1] / inner % ni;
    char sp[200];
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: index %" PRId64 " at position %s is out of range for dim %d of size %" PRId64,
                   fn, bad[2], ct__index_pos_str(sp, sizeof sp, j, index->ndim, index->shape), dd, g.sel_size);
  }
  if (st == CT_OK)
    st = ct__index_record(r, CT__GOP_INDEX_SELECT, 2, (const ct_tensor *[]){x, index}, dd, index, NULL, fn);
  return ct__tensor_result(out, r, st);
}

ct_status ct_gather(ct_tensor **out, const ct_tensor *x, int dim, const ct_tensor *index) {
  static const char fn[] = "ct_gather";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__TRY(check_pair(x, "x", index, "index", fn));
  int dd;
  CT__TRY(ct__dim_wrap(&dd, x->ndim, dim, fn));
  char sx[200], si[200];
  if (index->ndim != x->ndim)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: index has %d dims (shape %s) but x has %d (shape %s)", fn,
                     index->ndim, ct__shape_str(si, sizeof si, index->ndim, index->shape), x->ndim,
                     ct__shape_str(sx, sizeof sx, x->ndim, x->shape));
  for (int i = 0; i < x->ndim; i++)
    if (i != dd && index->shape[i] > x->shape[i])
      return ct__error(CT_ERR_SHAPE_MISMATCH,
                       "%s: index shape %s is larger than x shape %s at dim %d (%" PRId64 " > %" PRId64 ")", fn,
                       ct__shape_str(si, sizeof si, index->ndim, index->shape),
                       ct__shape_str(sx, sizeof sx, x->ndim, x->shape), i, index->shape[i], x->shape[i]);
  struct gather_geom g;
  memset(&g, 0, sizeof g);
  g.ndim = x->ndim ? x->ndim : 1;
  g.shape[0] = 1;
  for (int i = 0; i < x->ndim; i++) {
    g.shape[i] = index->shape[i];
    g.xstr[i] = i == dd ? 0 : x->strides[i];
    g.istr[i] = index->strides[i];
  }
  g.sel_size = x->ndim ? x->shape[dd] : 1;
  g.sel_stride = x->ndim ? x->strides[dd] : 0;
  ct_tensor *r;
  CT__TRY(ct__tensor_new(&r, x->storage->device, x->dtype, index->ndim, index->shape, fn));
  int64_t bad[4];
  ct_status st = gather_run(r, x, index, &g, bad, fn);
  if (st == CT_OK && bad[0]) {
    char sp[200];
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: index %" PRId64 " at position %s is out of range for dim %d of size %" PRId64,
                   fn, bad[2], ct__index_pos_str(sp, sizeof sp, bad[1], index->ndim, index->shape), dd, g.sel_size);
  }
  if (st == CT_OK) st = ct__index_record(r, CT__GOP_GATHER, 2, (const ct_tensor *[]){x, index}, dd, index, NULL, fn);
  return ct__tensor_result(out, r, st);
}

ct_status ct_embedding(ct_tensor **out, const ct_tensor *weight, const ct_tensor *indices) {
  static const char fn[] = "ct_embedding";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__TRY(check_pair(weight, "weight", indices, "indices", fn));
  char sb[200];
  if (weight->ndim != 2)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: weight must be 2-D, but has shape %s", fn,
                     ct__shape_str(sb, sizeof sb, weight->ndim, weight->shape));
  if (indices->ndim + 1 > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: indices has %d dims; the result would have more than %d", fn,
                     indices->ndim, CT_MAX_DIMS);
  struct gather_geom g;
  memset(&g, 0, sizeof g);
  g.ndim = indices->ndim + 1;
  for (int i = 0; i < indices->ndim; i++) {
    g.shape[i] = indices->shape[i];
    g.istr[i] = indices->strides[i];
  }
  g.shape[indices->ndim] = weight->shape[1];
  g.xstr[indices->ndim] = weight->strides[1];
  g.sel_size = weight->shape[0];
  g.sel_stride = weight->strides[0];
  ct_tensor *r;
  CT__TRY(ct__tensor_new(&r, weight->storage->device, weight->dtype, g.ndim, g.shape, fn));
  int64_t bad[4];
  bool empty = ct_numel(r) == 0;
  ct_status st = empty ? check_only(weight, indices, g.sel_size, bad, fn) : gather_run(r, weight, indices, &g, bad, fn);
  if (st == CT_OK && bad[0]) {
    char sp[200];
    int64_t cols = empty ? 1 : weight->shape[1];
    st = ct__error(CT_ERR_INVALID_ARGUMENT,
                   "%s: index %" PRId64 " at position %s is out of range for weight with %" PRId64 " rows", fn,
                   bad[2], ct__index_pos_str(sp, sizeof sp, bad[1] / cols, indices->ndim, indices->shape),
                   g.sel_size);
  }
  if (st == CT_OK)
    st = ct__index_record(r, CT__GOP_EMBEDDING, 2, (const ct_tensor *[]){weight, indices}, 0, indices, NULL, fn);
  return ct__tensor_result(out, r, st);
}

/* Strides of t read as the broadcast shape (ndim dims): 0 on new and expanded dims. */
static void broadcast_strides(int64_t *st, const ct_tensor *t, int ndim, const int64_t *shape) {
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int j = i - lead;
    st[i] = j < 0 || (t->shape[j] == 1 && shape[i] != 1) ? 0 : t->strides[j];
  }
}

ct_status ct_masked_fill(ct_tensor **out, const ct_tensor *x, const ct_tensor *mask, double value) {
  static const char fn[] = "ct_masked_fill";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__TRY(ct__check_same_device(fn, "x", x, "mask", mask));
  if (mask->dtype != CT_BOOL)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: mask has dtype %s; expected bool", fn, ct_dtype_name(mask->dtype));
  CT__TRY(ct__dtype_check_scalar(value, x->dtype, fn, "value"));
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  CT__TRY(ct__broadcast_shapes(&ndim, shape, x->ndim, x->shape, mask->ndim, mask->shape, fn));
  ct_tensor *r;
  CT__TRY(ct__tensor_new(&r, x->storage->device, x->dtype, ndim, shape, fn));
  ct_status st = ct__index_record(r, CT__GOP_MASKED_FILL, 2, (const ct_tensor *[]){x, mask}, 0, mask, NULL, fn);
  int64_t n = ct_numel(r);
  if (n == 0 || st != CT_OK) return ct__tensor_result(out, r, st);
  int64_t xs[CT_MAX_DIMS], ms[CT_MAX_DIMS];
  broadcast_strides(xs, x, ndim, shape);
  broadcast_strides(ms, mask, ndim, shape);
  int kn = ndim;
  if (kn == 0) {
    kn = 1;
    shape[0] = 1;
    xs[0] = ms[0] = 0;
  }
  ct_device *d = x->storage->device;
  size_t es = ct_dtype_size(x->dtype);
  unsigned char bits[8] = {0};
  ct__host_store_double(x->dtype, bits, value);
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_BITS=%s", ct__dtype_bits_type(es));
  ct__kernel *k;
  st = ct__kernel_for(&k, d, "index.cl", "masked_fill_bits", CT__NO_DTYPE, opts, fn);
  if (st == CT_OK) {
    int64_t inner = shape[kn - 1];
    int64_t nitems = n / inner * ((inner + 255) / 256); /* CT_CHUNK in kernels/index.cl */
    struct ct__kargs a;
    ct__kargs_begin(&a, k, ct__kernel_lock(k));
    ct__karg_tensor(&a, "out", r, 0);
    ct__index_karg_strided(&a, "x", x, kn, xs);
    ct__index_karg_strided(&a, "mask", mask, kn, ms);
    ct__karg(&a, "value", es, bits);
    ct__karg_int(&a, "ndim", kn);
    ct__karg_long8(&a, "shape", kn, shape, 1);
    ct__karg_long(&a, "nitems", nitems);
    st = ct__launch1(k, &a, d, nitems, 0, fn);
  }
  return ct__tensor_result(out, r, st);
}
