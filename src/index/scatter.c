/* scatter_add: a contiguous copy of x, then kernels/order.cl's scatter_add_lines adds src into
 * it, one work-item per line of the index, in index order (so the result is deterministic). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "index/index.h"

ct_status ct_scatter_add(ct_tensor **out, const ct_tensor *x, int dim, const ct_tensor *index,
                         const ct_tensor *src) {
  static const char fn[] = "ct_scatter_add";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__TRY(ct__check_same_device(fn, "x", x, "index", index));
  CT__TRY(ct__check_same_device(fn, "x", x, "src", src));
  CT__TRY(ct__index_check_dtype(index, "index", fn));
  if (src->dtype != x->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: src has dtype %s but x has %s", fn, ct_dtype_name(src->dtype),
                     ct_dtype_name(x->dtype));
  if (x->dtype == CT_U64)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: dtype u64 is not supported (cast to i64 first)", fn);
  int dd;
  CT__TRY(ct__dim_wrap(&dd, x->ndim, dim, fn));
  char sx[200], si[200], ss[200];
  if (index->ndim != x->ndim || src->ndim != x->ndim)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: x %s, index %s and src %s must have the same number of dims", fn,
                     ct__shape_str(sx, sizeof sx, x->ndim, x->shape),
                     ct__shape_str(si, sizeof si, index->ndim, index->shape),
                     ct__shape_str(ss, sizeof ss, src->ndim, src->shape));
  for (int i = 0; i < x->ndim; i++) {
    if (index->shape[i] > src->shape[i] || (i != dd && index->shape[i] > x->shape[i]))
      return ct__error(CT_ERR_SHAPE_MISMATCH,
                       "%s: index shape %s must be no larger than src %s at every dim and than x %s at every dim but "
                       "%d (dim %d differs)",
                       fn, ct__shape_str(si, sizeof si, index->ndim, index->shape),
                       ct__shape_str(ss, sizeof ss, src->ndim, src->shape),
                       ct__shape_str(sx, sizeof sx, x->ndim, x->shape), dd, i);
  }
  ct_tensor *r;
  CT__TRY(ct__contiguous(&r, x, x->dtype, 1, fn));
  /* Recorded first (the node saves only the index): the kernel below writes r, which the
   * node does not save. */
  ct_status st = ct__index_record(r, CT__GOP_SCATTER_ADD, 3, (const ct_tensor *[]){x, index, src}, dd, index, NULL, fn);
  int64_t ni = ct_numel(index);
  if (ni == 0 || st != CT_OK) return ct__tensor_result(out, r, st);
  /* Lines: the index's coordinates with dim set to 1. */
  int64_t lshape[CT_MAX_DIMS], str[3][CT_MAX_DIMS], step[3], klen;
  const ct_tensor *ts[3] = {r, src, index};
  int n = ct__index_lines(lshape, &klen, x->ndim, index->shape, dd, 3, ts, str, step);
  const int64_t *ostr = str[0], *sstr = str[1], *istr = str[2];
  int64_t o_step = step[0], s_step = step[1], i_step = step[2], dim_size = x->ndim ? x->shape[dd] : 1;
  int64_t nlines = ni / klen;
  ct_device *d = x->storage->device;
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_IN=%d", (int)x->dtype);
  ct__kernel *k;
  ct_tensor *rec = NULL;
  int64_t bad[4] = {0, 0, 0, 0};
  st = ct__kernel_for(&k, d, "order.cl", "scatter_add_lines", CT__NO_DTYPE, opts, fn);
  bool check = ct__index_check_needed(index, dim_size);
  if (st == CT_OK) st = ct__index_bad_new(&rec, d, check, fn);
  if (st == CT_OK) {
    struct ct__kargs a;
    ct__kargs_begin(&a, k, ct__kernel_lock(k));
    ct__index_karg_strided(&a, "out", r, n, ostr);
    ct__index_karg_strided(&a, "src", src, n, sstr);
    ct__index_karg_strided(&a, "idx", index, n, istr);
    ct__karg_int(&a, "idx64", index->dtype == CT_I64);
    ct__karg_geom(&a, "lshape", n, lshape, 0, NULL); /* ndim, lshape */
    ct__karg_long(&a, "klen", klen);
    ct__karg_long(&a, "o_step", o_step);
    ct__karg_long(&a, "s_step", s_step);
    ct__karg_long(&a, "i_step", i_step);
    ct__karg_long(&a, "dim_size", dim_size);
    /* 16 lines a work-item (kernels/order.cl) where the lines' fastest dim ld is contiguous in
     * r and src and the index is the same along it. */
    int ld = dd == n - 1 ? n - 2 : n - 1;
    bool vec = (x->dtype == CT_F32 || x->dtype == CT_F64) && ld >= 0 && lshape[ld] % 16 == 0 && ostr[ld] == 1 &&
               sstr[ld] == 1 && istr[ld] == 0;
    ct__karg_long(&a, "nlines", nlines);
    ct__karg_int(&a, "vec", vec);
    st = ct__index_launch_checked(k, &a, d, vec ? nlines / 16 : nlines, rec, check, bad, fn);
  }
  if (st == CT_OK && bad[0]) {
    /* The kernel records the line and the position k along dim. */
    char sp[200];
    int64_t c[CT_MAX_DIMS], line = bad[1];
    for (int i = n - 1; i >= 0; i--) {
      c[i] = line % lshape[i];
      line /= lshape[i];
    }
    c[dd] = bad[3];
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: index %" PRId64 " at position %s is out of range for dim %d of size %" PRId64,
                   fn, bad[2], ct__shape_str(sp, sizeof sp, index->ndim, c), dd, dim_size);
  }
  return ct__tensor_result(out, r, st);
}
