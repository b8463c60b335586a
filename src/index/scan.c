/* cumsum and cumprod: kernels/order.cl's cum_lines, one work-item per line along dim. */
#include <stdio.h>

#include "core/error.h"
#include "device/device.h"
#include "index/index.h"

/* The scan of non-empty x along dim dd into r. */
static ct_status cum_run(ct_tensor *r, const ct_tensor *x, int dd, int prod, const char *fn) {
  int64_t numel = ct_numel(x);
  int64_t lshape[CT_MAX_DIMS], str[2][CT_MAX_DIMS], step[2], len;
  const ct_tensor *ts[2] = {r, x};
  int n = ct__index_lines(lshape, &len, x->ndim, x->shape, dd, 2, ts, str, step);
  const int64_t *ostr = str[0], *xstr = str[1], o_step = step[0], x_step = step[1];
  int64_t nlines = numel / len;
  ct_device *d = x->storage->device;
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_IN=%d", (int)x->dtype);
  /* Along an outer dim, cum_cols walks neighbouring lines together (not for f16/bf16, whose f32
   * accumulators it could not keep in the result). */
  bool cols = dd != n - 1 && x->dtype != CT_F16 && x->dtype != CT_BF16;
  int64_t inner = lshape[n - 1];
  ct__kernel *k;
  ct_status st = ct__kernel_for(&k, d, "order.cl", cols ? "cum_cols" : "cum_lines", CT__NO_DTYPE, opts, fn);
  if (st == CT_OK) {
    struct ct__kargs a;
    ct__kargs_begin(&a, k, ct__kernel_lock(k));
    ct__index_karg_strided(&a, "out", r, n, ostr);
    ct__index_karg_strided(&a, "x", x, n, xstr);
    ct__karg_geom(&a, "lshape", n, lshape, 0, NULL); /* ndim, lshape */
    ct__karg_long(&a, "n", len);
    ct__karg_long(&a, "o_step", o_step);
    ct__karg_long(&a, "x_step", x_step);
    ct__karg_int(&a, "prod", prod);
    if (cols) {
      int64_t nitems = nlines / inner * ((inner + 255) / 256); /* CT_CUM_CHUNK in kernels/order.cl */
      ct__karg_long(&a, "inner", inner);
      ct__karg_long(&a, "o_in", ostr[n - 1]);
      ct__karg_long(&a, "x_in", xstr[n - 1]);
      ct__karg_long(&a, "nitems", nitems);
      st = ct__launch1(k, &a, d, nitems, 0, fn);
    } else {
      ct__karg_long(&a, "nlines", nlines);
      st = ct__launch1(k, &a, d, nlines, 0, fn);
    }
  }
  return st;
}

static ct_status cum(ct_tensor **out, const ct_tensor *x, int dim, int prod, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  if (x->dtype == CT_U64)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: dtype u64 is not supported (cast to i64 first)", fn);
  int dd;
  CT__TRY(ct__dim_wrap(&dd, x->ndim, dim, fn));
  ct_dtype odt = ct_dtype_is_floating_point(x->dtype) ? x->dtype : CT_I64;
  ct_tensor *r;
  CT__TRY(ct__tensor_new(&r, x->storage->device, odt, x->ndim, x->shape, fn));
  ct_status st = ct_numel(x) ? cum_run(r, x, dd, prod, fn) : CT_OK;
  /* cumprod's gradient needs x and the products; cumsum's none. (Integer scans give i64,
   * which records nothing.) */
  if (st == CT_OK)
    st = ct__index_record(r, prod ? CT__GOP_CUMPROD : CT__GOP_CUMSUM, 1, &x, dd, prod ? x : NULL, prod ? r : NULL, fn);
  return ct__tensor_result(out, r, st);
}

ct_status ct_cumsum(ct_tensor **out, const ct_tensor *x, int dim) { return cum(out, x, dim, 0, "ct_cumsum"); }

ct_status ct_cumprod(ct_tensor **out, const ct_tensor *x, int dim) { return cum(out, x, dim, 1, "ct_cumprod"); }
