/* sort, argsort, topk: a stable merge sort of every slice along dim by kernels/order.cl:
 * sort_blocks sorts blocks of 16 positions, sort_merge passes double the sorted runs (ping-pong
 * between two work buffers of (key, position) pairs), or, for many slices, sort_slices does all
 * of that for a slice per work-item; sort_write writes the first kout positions and their
 * values. topk is the sort's first k: stable, so ties keep the lower position first. */
#include <inttypes.h>
#include <stdio.h>

#include "core/error.h"
#include "device/device.h"
#include "index/index.h"

#define SORT_BLOCK 16  /* CT_SORT_BLOCK in kernels/order.cl */
#define MERGE_TILE 256

/* The work buffers' key dtype: what ct_before() in kernels/order.cl compares. */
static ct_dtype key_dtype(ct_dtype t) { return t == CT_F16 || t == CT_BF16 ? CT_F32 : t; }

/* The arguments every sort kernel takes to read x's slices, in their order. */
static void slice_args(struct ct__kargs *a, const ct_tensor *x, int nd, const int64_t *xstr, const int64_t *lshape,
                       int64_t n, int64_t x_step) {
  ct__index_karg_strided(a, "x", x, nd, xstr);
  ct__karg_int(a, "ndim", nd);
  ct__karg_long8(a, "lshape", nd, lshape, 1);
  ct__karg_long(a, "n", n);
  ct__karg_long(a, "x_step", x_step);
}

/* Sorts x along dim dd into the first kout positions of each slice: vals (x's dtype) and idx
 * (i64), either may be NULL, both of x's shape with shape[dd] = kout, contiguous. */
static ct_status sort_run(ct_tensor *vals, ct_tensor *idx, const ct_tensor *x, int dd, bool desc, int64_t kout,
                          const char *fn) {
  int64_t numel = ct_numel(x);
  if (numel == 0 || kout == 0) return CT_OK;
  ct_device *d = x->storage->device;
  const ct_tensor *o = vals ? vals : idx;
  int64_t lshape[CT_MAX_DIMS], str[2][CT_MAX_DIMS], step[2], n;
  const ct_tensor *ts[2] = {o, x};
  int nd = ct__index_lines(lshape, &n, x->ndim, x->shape, dd, 2, ts, str, step);
  const int64_t *ostr = str[0], *xstr = str[1], o_step = step[0], x_step = step[1];
  int64_t nslices = numel / n;
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_IN=%d", (int)x->dtype);
  ct__kernel *kb, *km, *kw, *ks;
  CT__TRY(ct__kernel_for(&ks, d, "order.cl", "sort_slices", CT__NO_DTYPE, opts, fn));
  CT__TRY(ct__kernel_for(&kb, d, "order.cl", "sort_blocks", CT__NO_DTYPE, opts, fn));
  CT__TRY(ct__kernel_for(&km, d, "order.cl", "sort_merge", CT__NO_DTYPE, opts, fn));
  CT__TRY(ct__kernel_for(&kw, d, "order.cl", "sort_write", CT__NO_DTYPE, opts, fn));
  ct_tensor *keys[2] = {NULL, NULL}, *pos[2] = {NULL, NULL};
  int64_t total = numel;
  ct_status st = CT_OK;
  for (int i = 0; i < 2 && st == CT_OK; i++) {
    st = ct__tensor_new(&keys[i], d, key_dtype(x->dtype), 1, &total, fn);
    if (st == CT_OK) st = ct__tensor_new(&pos[i], d, CT_I64, 1, &total, fn);
  }
  /* Work buffers are allocator blocks, which may start inside a cl_mem: the kernels take
   * their element offsets (ct__karg_tensor). */
  int cur = 0;
  /* Many slices: a work-item sorts a whole slice (sort_slices), in the cache; few: the slices'
   * blocks and merge tiles spread over the device (sort_blocks, then a sort_merge per pass). */
  int64_t cu = d->props.compute_units ? d->props.compute_units : 1;
  bool whole = nslices >= 16 * cu;
  if (st == CT_OK && whole) {
    struct ct__kargs a;
    ct__kargs_begin(&a, ks, ct__kernel_lock(ks));
    for (int i = 0; i < 2; i++) {
      ct__karg_tensor(&a, "k", keys[i], 0);
      ct__karg_tensor(&a, "p", pos[i], 0);
    }
    slice_args(&a, x, nd, xstr, lshape, n, x_step);
    ct__karg_int(&a, "desc", desc);
    ct__karg_long(&a, "nslices", nslices);
    st = ct__launch1(ks, &a, d, nslices, 0, fn);
    for (int64_t w = SORT_BLOCK; w < n; w *= 2) cur = 1 - cur;
  }
  if (st == CT_OK && !whole) {
    int64_t nblocks = (n + SORT_BLOCK - 1) / SORT_BLOCK;
    struct ct__kargs a;
    ct__kargs_begin(&a, kb, ct__kernel_lock(kb));
    ct__karg_tensor(&a, "keys", keys[0], 0);
    ct__karg_tensor(&a, "pos", pos[0], 0);
    slice_args(&a, x, nd, xstr, lshape, n, x_step);
    ct__karg_int(&a, "desc", desc);
    ct__karg_long(&a, "nblocks", nblocks);
    ct__karg_long(&a, "nitems", nslices * nblocks);
    st = ct__launch1(kb, &a, d, nslices * nblocks, 0, fn);
  }
  for (int64_t w = SORT_BLOCK; st == CT_OK && !whole && w < n; w *= 2) {
    int64_t tile = 2 * w < MERGE_TILE ? 2 * w : MERGE_TILE;
    int64_t ntiles = (n + tile - 1) / tile;
    struct ct__kargs a;
    ct__kargs_begin(&a, km, ct__kernel_lock(km));
    ct__karg_tensor(&a, "kin", keys[cur], 0);
    ct__karg_tensor(&a, "pin", pos[cur], 0);
    ct__karg_tensor(&a, "kout", keys[1 - cur], 0);
    ct__karg_tensor(&a, "pout", pos[1 - cur], 0);
    ct__karg_long(&a, "n", n);
    ct__karg_long(&a, "width", w);
    ct__karg_long(&a, "tile", tile);
    ct__karg_long(&a, "ntiles", ntiles);
    ct__karg_int(&a, "desc", desc);
    ct__karg_long(&a, "nitems", nslices * ntiles);
    st = ct__launch1(km, &a, d, nslices * ntiles, 0, fn);
    cur = 1 - cur;
  }
  if (st == CT_OK) {
    struct ct__kargs a;
    ct__kargs_begin(&a, kw, ct__kernel_lock(kw));
    ct__karg_tensor(&a, "vals", vals, 0);
    ct__karg_tensor(&a, "oidx", idx, 0);
    ct__karg_long8(&a, "ostr", nd, ostr, 0); /* vals' and oidx's */
    ct__karg_int(&a, "has_vals", vals != NULL);
    ct__karg_int(&a, "has_idx", idx != NULL);
    ct__karg_tensor(&a, "pos", pos[cur], 0);
    slice_args(&a, x, nd, xstr, lshape, n, x_step);
    ct__karg_long(&a, "kout", kout);
    ct__karg_long(&a, "o_step", o_step);
    int64_t nitems = nslices * ((kout + 255) / 256); /* CT_WRITE_CHUNK in kernels/order.cl */
    ct__karg_long(&a, "nitems", nitems);
    st = ct__launch1(kw, &a, d, nitems, 0, fn);
  }
  for (int i = 0; i < 2; i++) {
    ct_release(keys[i]);
    ct_release(pos[i]);
  }
  return st;
}

/* The shared entry: outputs of x's shape with shape[dim] = kout (the slice length for sort). */
static ct_status sort_common(ct_tensor **values, ct_tensor **indices, const ct_tensor *x, int dim, bool desc,
                             int64_t k, bool is_topk, const char *fn) {
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!values && !indices)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: arguments 'values' and 'indices' are both NULL", fn);
  CT__CHECK_NOT_NULL(fn, x);
  int dd;
  CT__TRY(ct__dim_wrap(&dd, x->ndim, dim, fn));
  int64_t n = x->ndim ? x->shape[dd] : 1;
  if (is_topk && (k < 0 || k > n)) {
    char sb[200];
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: k %" PRId64 " is out of range for dim %d of size %" PRId64
                     " (shape %s)", fn, k, dd, n, ct__shape_str(sb, sizeof sb, x->ndim, x->shape));
  }
  int64_t kout = is_topk ? k : n;
  int64_t shape[CT_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
  if (x->ndim) shape[dd] = kout;
  ct_tensor *v = NULL, *ix = NULL;
  ct_device *d = x->storage->device;
  ct_status st = CT_OK;
  /* The values' gradient is a gather's (values = gather(x, dim, indices)): it needs the
   * indices even when the caller does not want them. */
  bool record = values && ct_dtype_is_floating_point(x->dtype) && ct__grad_needed(1, &x);
  if (values) st = ct__tensor_new(&v, d, x->dtype, x->ndim, shape, fn);
  if (st == CT_OK && (indices || record)) st = ct__tensor_new(&ix, d, CT_I64, x->ndim, shape, fn);
  if (st == CT_OK) st = sort_run(v, ix, x, dd, desc, kout, fn);
  if (st == CT_OK && record)
    st = ct__index_record(v, CT__GOP_GATHER, 2, (const ct_tensor *[]){x, ix}, dd, ix, NULL, fn);
  if (st == CT_OK && !indices) {
    ct_release(ix);
    ix = NULL;
  }
  if (st != CT_OK) {
    ct_release(v);
    ct_release(ix);
    return st;
  }
  if (values) *values = v;
  if (indices) *indices = ix;
  return CT_OK;
}

ct_status ct_sort(ct_tensor **values, ct_tensor **indices, const ct_tensor *x, int dim, bool descending) {
  return sort_common(values, indices, x, dim, descending, 0, false, "ct_sort");
}

ct_status ct_argsort(ct_tensor **out, const ct_tensor *x, int dim, bool descending) {
  CT__CHECK_NOT_NULL("ct_argsort", out);
  return sort_common(NULL, out, x, dim, descending, 0, false, "ct_argsort");
}

ct_status ct_topk(ct_tensor **values, ct_tensor **indices, const ct_tensor *x, int64_t k, int dim, bool largest) {
  return sort_common(values, indices, x, dim, largest, k, true, "ct_topk");
}
