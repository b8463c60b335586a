/* Reductions: every op x dtype x layout against the host reference of reduce_ref.h (integers
 * exact, floats within the bounds stated there); dims lists, keepdim, negative dims, transposed,
 * sliced and expanded inputs, size-1, 0-dim and empty shapes; both kernels (rows/cols) with and
 * without a second pass; NaN and infinities; argument errors. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "ct_test.h"
#include "reduce/reduce.h"
#include "reduce_ref.h"

enum view { V_NONE, V_TRANSPOSE, V_SLICE, V_EXPAND };

struct rcase {
  const char *name;
  int ndim;
  int64_t shape[4];   /* of the base tensor, before the view */
  enum view view;
  int ndims;
  int dims[4];        /* argmax/argmin use dims[0], or CT_DIM_NONE when ndims == 0 */
  bool keepdim;
};

/* The comments name the kernel path each case exercises on CPU devices. */
static const struct rcase cases[] = {
    {"all", 3, {5, 37, 3}, V_NONE, 0, {0}, false},                 /* rows, one output */
    {"all keepdim", 3, {5, 37, 3}, V_NONE, 0, {0}, true},
    {"dim 1", 3, {5, 37, 3}, V_NONE, 1, {1}, false},              /* cols, gathered lanes */
    {"dims 0,2", 3, {5, 37, 3}, V_NONE, 2, {0, 2}, false},
    {"dim -1 keepdim", 3, {5, 37, 3}, V_NONE, 1, {-1}, true},
    {"dims -3,-1 of 4-d", 4, {3, 4, 5, 6}, V_NONE, 2, {-3, -1}, false},
    {"dims 3,0,1 of 4-d keepdim", 4, {3, 4, 5, 6}, V_NONE, 3, {3, 0, 1}, true},
    {"transposed dim 0", 3, {3, 37, 5}, V_TRANSPOSE, 1, {0}, false},
    {"transposed all", 3, {3, 37, 5}, V_TRANSPOSE, 0, {0}, false},
    {"transposed dims 1,2", 3, {3, 37, 5}, V_TRANSPOSE, 2, {1, 2}, true},
    {"sliced dim 1", 2, {3, 300}, V_SLICE, 1, {1}, false},          /* rows, strided */
    {"sliced dim 0", 2, {3, 300}, V_SLICE, 1, {0}, false},
    {"expanded dims 0,1", 3, {1, 37, 3}, V_EXPAND, 2, {0, 1}, false}, /* stride-0 dim */
    {"expanded dim 2", 3, {1, 37, 3}, V_EXPAND, 1, {2}, true},
    {"rows contiguous", 2, {3, 300}, V_NONE, 1, {1}, false},      /* rows, 8-wide loads */
    {"cols vector", 2, {300, 16}, V_NONE, 1, {0}, false},         /* cols, 8-wide loads */
    {"cols gather", 2, {300, 3}, V_NONE, 1, {0}, false},
    {"many rows", 2, {1000, 37}, V_NONE, 1, {1}, false},          /* rows, 64 per group */
    {"cols wide", 2, {50, 200}, V_NONE, 1, {0}, false},           /* cols, whole strips */
    {"cols short runs", 3, {40, 6, 50}, V_SLICE, 1, {0}, false},  /* cols, runs of 50 */
    {"rows two passes", 2, {2, 270000}, V_NONE, 1, {1}, false},   /* rows, partials */
    {"cols two passes", 2, {40000, 3}, V_NONE, 1, {0}, false},    /* cols, partials */
    {"size-1 dims", 4, {1, 7, 1, 5}, V_NONE, 2, {0, 2}, true},
    {"0-dim", 0, {0}, V_NONE, 0, {0}, false},
    {"0-dim dim 0 keepdim", 0, {0}, V_NONE, 1, {0}, true},
    {"empty output", 2, {0, 4}, V_NONE, 1, {1}, false},
    {"empty reduced dim", 2, {0, 4}, V_NONE, 1, {0}, false},
    {"empty all", 2, {3, 0}, V_NONE, 0, {0}, false},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static ct_status call_op(enum rop op, ct_tensor **out, const ct_tensor *x, int ndims, const int *dims,
                         bool keepdim, int correction) {
  switch (op) {
    case R_SUM: return ct_sum(out, x, ndims, dims, keepdim);
    case R_MEAN: return ct_mean(out, x, ndims, dims, keepdim);
    case R_PROD: return ct_prod(out, x, ndims, dims, keepdim);
    case R_MAX: return ct_max(out, x, ndims, dims, keepdim);
    case R_MIN: return ct_min(out, x, ndims, dims, keepdim);
    case R_ARGMAX: return ct_argmax(out, x, ndims ? dims[0] : CT_DIM_NONE, keepdim);
    case R_ARGMIN: return ct_argmin(out, x, ndims ? dims[0] : CT_DIM_NONE, keepdim);
    case R_VAR: return ct_var(out, x, ndims, dims, correction, keepdim);
    case R_STD: return ct_std(out, x, ndims, dims, correction, keepdim);
    default: return CT_ERR_INTERNAL;
  }
}

/* Builds the case's input as a view of a base tensor holding data. */
static ct_tensor *make_view(ct_device *d, ct_dtype t, const struct rcase *c, const void *data) {
  ct_tensor *base, *v = NULL;
  ck_assert_ct_ok(ct_from_host(&base, d, t, c->ndim, c->shape, data));
  switch (c->view) {
    case V_NONE: v = ct_retain(base); break;
    case V_TRANSPOSE: ck_assert_ct_ok(ct_transpose(&v, base, 0, c->ndim - 1)); break;
    case V_SLICE: ck_assert_ct_ok(ct_slice(&v, base, 1, 1, c->shape[1], 2)); break;
    case V_EXPAND: {
      int64_t shape[4];
      memcpy(shape, c->shape, sizeof shape);
      shape[0] = 4;
      ck_assert_ct_ok(ct_expand(&v, base, c->ndim, shape));
      break;
    }
  }
  ct_release(base);
  return v;
}

/* Runs one (op, dtype, case) and compares every output with the reference. Data: floats
 * uniform in [-1, 1) ([0.99, 1.01) for prod, so long products stay in range), integers over
 * their whole range ([-3, 3] for prod). */
static void run_case(ct_device *d, enum rop op, ct_dtype t, const struct rcase *c, int correction) {
  int64_t n = 1;
  for (int i = 0; i < c->ndim; i++) n *= c->shape[i];
  bool prod = op == R_PROD;
  void *data = make_data(t, n, (uint64_t)(op * 131 + t * 7 + 1), prod ? 0.99 : -1.0,
                         prod ? 1.01 : 1.0, prod);
  ct_tensor *x = make_view(d, t, c, data);
  free(data);
  int xnd = ct_tensor_ndim(x);
  const int64_t *xs = ct_tensor_shape(x);
  int64_t xn = ct_numel(x);
  void *vals = malloc((size_t)(xn ? xn : 1) * ct_dtype_size(t));
  ck_assert_ct_ok(ct_to_host(x, vals, (size_t)xn * ct_dtype_size(t)));

  bool mask[CT_MAX_DIMS] = {false};
  int nd = rop_is_arg(op) ? (c->ndims ? 1 : 0) : c->ndims;
  for (int i = 0; i < xnd; i++) mask[i] = nd == 0;
  for (int i = 0; i < nd; i++) {
    int dd = c->dims[i] < 0 ? c->dims[i] + xnd : c->dims[i];
    if (xnd > 0) mask[dd] = true;
  }
  int64_t nred = 1, nout = 1;
  for (int i = 0; i < xnd; i++) {
    if (mask[i]) nred *= xs[i];
    else nout *= xs[i];
  }
  char what[256];
  snprintf(what, sizeof what, "%s on %s, case \"%s\"", rop_names[op], ct_dtype_name(t), c->name);

  ct_tensor *y = NULL;
  ct_status st = call_op(op, &y, x, c->ndims, c->dims, c->keepdim, correction);
  if (rop_float_only(op) && !ct_dtype_is_floating_point(t)) {
    ck_assert_msg(st == CT_ERR_DTYPE_MISMATCH, "%s: %s", what, ct_status_name(st));
    ck_assert_ptr_null(y);
  } else if (t == CT_U64) {
    /* A storage dtype: not reduced (its values above 2^63 have no i64 accumulator). */
    ck_assert_msg(st == CT_ERR_UNSUPPORTED, "%s: %s", what, ct_status_name(st));
    ck_assert_ptr_null(y);
    ck_assert_error_contains("u64");
  } else if (nred == 0 && (op == R_MAX || op == R_MIN || rop_is_arg(op))) {
    ck_assert_msg(st == CT_ERR_INVALID_ARGUMENT, "%s: %s", what, ct_status_name(st));
    ck_assert_ptr_null(y);
    ck_assert_error_contains("empty");
  } else {
    ck_assert_msg(st == CT_OK, "%s: %s: %s", what, ct_status_name(st), ct_last_error());
    ct_dtype rt = rop_result_dtype(op, t);
    ck_assert_msg(ct_tensor_dtype(y) == rt, "%s: dtype %s", what, ct_dtype_name(ct_tensor_dtype(y)));
    /* Shape: reduced dims removed, or kept as 1. */
    int64_t want[CT_MAX_DIMS];
    int wn = 0;
    for (int i = 0; i < xnd; i++) {
      if (!mask[i]) want[wn++] = xs[i];
      else if (c->keepdim) want[wn++] = 1;
    }
    ck_assert_msg(ct_tensor_ndim(y) == wn, "%s: ndim %d, expected %d", what, ct_tensor_ndim(y), wn);
    for (int i = 0; i < wn; i++) ck_assert_int_eq(ct_tensor_shape(y)[i], want[i]);
    ck_assert(ct_tensor_is_contiguous(y));
    ck_assert_int_eq(ct_numel(y), nout);
    size_t rs = ct_dtype_size(rt);
    unsigned char *got = malloc((size_t)(nout ? nout : 1) * rs);
    ck_assert_ct_ok(ct_to_host(y, got, (size_t)nout * rs));
    for (int64_t o = 0; o < nout; o++) {
      struct expect e = ref_one(op, t, vals, xnd, xs, mask, o, correction);
      char msg[256];
      if (!check_one(&e, rt, got + o * rs, msg, sizeof msg))
        ck_abort_msg("%s, output %lld of %lld: %s", what, (long long)o, (long long)nout, msg);
    }
    free(got);
  }
  ct_release(y);
  ct_release(x);
  free(vals);
}

/* One (op, dtype) per loop iteration, so that each gets the test timeout to itself. The storage
 * dtypes u16 and u32 take every third layout case (their kernels are i64-accumulating like the
 * other integers'; fewer builds keep the suite's cold time down); u64 is refused at once. */
START_TEST(test_op_every_dtype_and_layout) {
  enum rop op = (enum rop)(_i / CT_DTYPE_COUNT);
  ct_dtype t = all_dtypes[_i % CT_DTYPE_COUNT];
  ct_device *d = ct_test_device();
  if (t == CT_F64 && !ct_device_properties(d)->fp64) return;
  bool storage = t == CT_U16 || t == CT_U32;
  for (int c = 0; c < NCASES; c++)
    if (!storage || c % 3 == 0) run_case(d, op, t, &cases[c], 1);
}
END_TEST

/* var/std with corrections 0, 1 and one larger than n (division by zero: inf or NaN). */
START_TEST(test_var_corrections) {
  ct_device *d = ct_test_device();
  const struct rcase c = {"dim 1", 2, {4, 5}, V_NONE, 1, {1}, false};
  const struct rcase one = {"single element", 2, {3, 1}, V_NONE, 1, {1}, false};
  for (int corr = 0; corr <= 7; corr += 1) {
    run_case(d, R_VAR, CT_F32, &c, corr);
    run_case(d, R_STD, CT_F32, &c, corr);
  }
  run_case(d, R_VAR, CT_F32, &one, 1); /* 0 / 0: NaN, as PyTorch */
  if (ct_device_properties(d)->fp64) {
    run_case(d, R_STD, CT_F64, &one, 0);
  } else {
    printf("# skip: std of one f64 element (%s has no cl_khr_fp64)\n", ct_device_properties(d)->name);
    fflush(stdout);
  }
}
END_TEST

/* Reads a 1-element result as double. */
static double scalar_of(const ct_tensor *y) {
  unsigned char buf[8];
  ck_assert_int_eq(ct_numel(y), 1);
  ck_assert_ct_ok(ct_to_host(y, buf, ct_dtype_size(ct_tensor_dtype(y))));
  return ct__host_load_double(ct_tensor_dtype(y), buf);
}

START_TEST(test_nan_and_inf) {
  ct_device *d = ct_test_device();
  const ct_dtype fts[4] = {CT_F16, CT_BF16, CT_F32, CT_F64};
  for (int k = 0; k < 4; k++) {
    ct_dtype t = fts[k];
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    /* 1000 elements: NaN at 300 and 700, +inf at 100, -inf at 900. */
    int64_t n = 1000, shape[1] = {n};
    size_t es = ct_dtype_size(t);
    unsigned char *p = malloc((size_t)n * es);
    for (int64_t i = 0; i < n; i++) ct__host_store_double(t, p + i * es, (double)(i % 17) - 8);
    ct__host_store_double(t, p + 100 * es, INFINITY);
    ct__host_store_double(t, p + 900 * es, -INFINITY);
    ct_tensor *x, *y;
    ck_assert_ct_ok(ct_from_host(&x, d, t, 1, shape, p));
    ck_assert_ct_ok(ct_max(&y, x, 0, NULL, false));
    ck_assert(isinf(scalar_of(y)) && scalar_of(y) > 0);
    ct_release(y);
    ck_assert_ct_ok(ct_argmin(&y, x, 0, false));
    ck_assert_int_eq((int64_t)scalar_of(y), 900);
    ct_release(y);
    ck_assert_ct_ok(ct_sum(&y, x, 0, NULL, false));
    ck_assert(isnan(scalar_of(y))); /* inf + -inf */
    ct_release(y);
    ct_release(x);
    ct__host_store_double(t, p + 300 * es, NAN);
    ct__host_store_double(t, p + 700 * es, NAN);
    ck_assert_ct_ok(ct_from_host(&x, d, t, 1, shape, p));
    ck_assert_ct_ok(ct_max(&y, x, 0, NULL, false));
    ck_assert_msg(isnan(scalar_of(y)), "max of %s with NaN gave %g", ct_dtype_name(t), scalar_of(y));
    ct_release(y);
    ck_assert_ct_ok(ct_min(&y, x, 0, NULL, false));
    ck_assert(isnan(scalar_of(y)));
    ct_release(y);
    ck_assert_ct_ok(ct_argmax(&y, x, CT_DIM_NONE, false));
    ck_assert_int_eq((int64_t)scalar_of(y), 300);
    ct_release(y);
    ck_assert_ct_ok(ct_argmin(&y, x, 0, false));
    ck_assert_int_eq((int64_t)scalar_of(y), 300);
    ct_release(y);
    ct_release(x);
    /* Along an outer dim (the cols kernel): [1000, 2], NaN only in column 1. */
    int64_t shape2[2] = {500, 2};
    for (int64_t i = 0; i < n; i++) ct__host_store_double(t, p + i * es, (double)(i % 13));
    ct__host_store_double(t, p + (2 * 200 + 1) * es, NAN);
    ck_assert_ct_ok(ct_from_host(&x, d, t, 2, shape2, p));
    int dim0 = 0;
    ck_assert_ct_ok(ct_max(&y, x, 1, &dim0, false));
    unsigned char two[16];
    ck_assert_ct_ok(ct_to_host(y, two, 2 * es));
    ck_assert_double_eq(ct__host_load_double(t, two), 12.0);
    ck_assert(isnan(ct__host_load_double(t, two + es)));
    ct_release(y);
    ck_assert_ct_ok(ct_argmax(&y, x, 0, false));
    int64_t idx[2];
    ck_assert_ct_ok(ct_to_host(y, idx, sizeof idx));
    ck_assert_int_eq(idx[0], 6);   /* first 12 in column 0: element 12 = row 6 */
    ck_assert_int_eq(idx[1], 200);
    ct_release(y);
    ct_release(x);
    free(p);
  }
}
END_TEST

/* Ties: the first index wins, on both kernels and across parts. */
START_TEST(test_arg_ties) {
  ct_device *d = ct_test_device();
  int64_t n = 100000, shape[1] = {n};
  int32_t *p = calloc((size_t)n, sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = (int32_t)(i % 1000);
  ct_tensor *x, *y;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 1, shape, p));
  ck_assert_ct_ok(ct_argmax(&y, x, 0, true));
  ck_assert_int_eq(ct_tensor_ndim(y), 1);
  ck_assert_int_eq((int64_t)scalar_of(y), 999);
  ct_release(y);
  ck_assert_ct_ok(ct_argmin(&y, x, -1, false));
  ck_assert_int_eq((int64_t)scalar_of(y), 0);
  ct_release(y);
  ct_release(x);
  int64_t shape2[2] = {n / 4, 4};
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 2, shape2, p));
  ck_assert_ct_ok(ct_argmax(&y, x, 0, false));
  int64_t idx[4];
  ck_assert_ct_ok(ct_to_host(y, idx, sizeof idx));
  for (int c = 0; c < 4; c++) {
    int64_t first = -1;
    int32_t best = -1;
    for (int64_t r = 0; r < n / 4; r++)
      if (p[4 * r + c] > best) {
        best = p[4 * r + c];
        first = r;
      }
    ck_assert_int_eq(idx[c], first);
  }
  ct_release(y);
  ck_assert_ct_ok(ct_argmax(&y, x, CT_DIM_NONE, true));
  ck_assert_int_eq(ct_tensor_ndim(y), 2);
  ck_assert_int_eq(ct_tensor_shape(y)[0], 1);
  ck_assert_int_eq(ct_tensor_shape(y)[1], 1);
  ck_assert_int_eq((int64_t)scalar_of(y), 999);
  ct_release(y);
  ct_release(x);
  free(p);
}
END_TEST

/* Integer sums are exact in i64 and wrap modulo 2^64, as PyTorch's. */
START_TEST(test_integer_exact_and_wrapping) {
  ct_device *d = ct_test_device();
  int64_t v[4] = {INT64_MAX, 1, INT64_MAX, 5}, shape[1] = {4};
  ct_tensor *x, *y;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I64, 1, shape, v));
  ck_assert_ct_ok(ct_sum(&y, x, 0, NULL, false));
  int64_t s;
  ck_assert_ct_ok(ct_to_host(y, &s, sizeof s));
  ck_assert_int_eq(s, (int64_t)((uint64_t)INT64_MAX * 2 + 6));
  ct_release(y);
  ck_assert_ct_ok(ct_prod(&y, x, 0, NULL, false));
  ck_assert_ct_ok(ct_to_host(y, &s, sizeof s));
  ck_assert_int_eq(s, (int64_t)((uint64_t)INT64_MAX * (uint64_t)INT64_MAX * 5u));
  ct_release(y);
  ct_release(x);
  /* u8 sums don't wrap at 256: 1000 x 255. */
  int64_t n = 1000, sh[1] = {n};
  unsigned char *u = malloc((size_t)n);
  memset(u, 255, (size_t)n);
  ck_assert_ct_ok(ct_from_host(&x, d, CT_U8, 1, sh, u));
  ck_assert_ct_ok(ct_sum(&y, x, 0, NULL, false));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_I64);
  ck_assert_ct_ok(ct_to_host(y, &s, sizeof s));
  ck_assert_int_eq(s, 255000);
  ct_release(y);
  ct_release(x);
  /* bool: sum counts, max is any, min is all. */
  for (int64_t i = 0; i < n; i++) u[i] = (unsigned char)(i == 500);
  ck_assert_ct_ok(ct_from_host(&x, d, CT_BOOL, 1, sh, u));
  ck_assert_ct_ok(ct_sum(&y, x, 0, NULL, false));
  ck_assert_ct_ok(ct_to_host(y, &s, sizeof s));
  ck_assert_int_eq(s, 1);
  ct_release(y);
  unsigned char b = 7;
  ck_assert_ct_ok(ct_max(&y, x, 0, NULL, false));
  ck_assert_int_eq(ct_tensor_dtype(y), CT_BOOL);
  ck_assert_ct_ok(ct_to_host(y, &b, 1));
  ck_assert_int_eq(b, 1);
  ct_release(y);
  ck_assert_ct_ok(ct_min(&y, x, 0, NULL, false));
  ck_assert_ct_ok(ct_to_host(y, &b, 1));
  ck_assert_int_eq(b, 0);
  ct_release(y);
  ct_release(x);
  free(u);
}
END_TEST

/* Empty reductions: sum 0, prod 1, mean NaN (as PyTorch). */
START_TEST(test_empty_values) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {0, 3};
  ct_tensor *x, *y;
  ck_assert_ct_ok(ct_empty(&x, d, CT_F32, 2, shape));
  int dim0 = 0;
  float r[3];
  ck_assert_ct_ok(ct_sum(&y, x, 1, &dim0, false));
  ck_assert_ct_ok(ct_to_host(y, r, sizeof r));
  for (int i = 0; i < 3; i++) ck_assert_float_eq(r[i], 0.0f);
  ct_release(y);
  ck_assert_ct_ok(ct_prod(&y, x, 1, &dim0, false));
  ck_assert_ct_ok(ct_to_host(y, r, sizeof r));
  for (int i = 0; i < 3; i++) ck_assert_float_eq(r[i], 1.0f);
  ct_release(y);
  ck_assert_ct_ok(ct_mean(&y, x, 0, NULL, false));
  ck_assert(isnan(scalar_of(y)));
  ct_release(y);
  ck_assert_ct_status(ct_max(&y, x, 0, NULL, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(y);
  ck_assert_ct_status(ct_argmin(&y, x, CT_DIM_NONE, false), CT_ERR_INVALID_ARGUMENT);
  /* max over the non-empty dim of an empty tensor is an empty result, not an error. */
  int dim1 = 1;
  ck_assert_ct_ok(ct_max(&y, x, 1, &dim1, true));
  ck_assert_int_eq(ct_numel(y), 0);
  ck_assert_int_eq(ct_tensor_shape(y)[0], 0);
  ck_assert_int_eq(ct_tensor_shape(y)[1], 1);
  ct_release(y);
  ct_release(x);
}
END_TEST

START_TEST(test_argument_errors) {
  ct_device *d = ct_test_device();
  int64_t shape[3] = {2, 3, 4};
  ct_tensor *x, *y = (ct_tensor *)1;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 3, shape));
  int dims[3] = {0, 3, 1};
  ck_assert_ct_status(ct_sum(&y, x, 2, dims, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("dim 3");
  ck_assert_error_contains("[2, 3, 4]");
  int neg[1] = {-4};
  ck_assert_ct_status(ct_mean(&y, x, 1, neg, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("-4");
  int dup[2] = {1, -2};
  ck_assert_ct_status(ct_max(&y, x, 2, dup, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("more than once");
  ck_assert_ct_status(ct_sum(&y, x, 1, NULL, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sum(&y, x, -1, dims, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sum(NULL, x, 0, NULL, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_sum(&y, NULL, 0, NULL, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_argmax(&y, x, 3, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_argmax(&y, x, -4, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_var(&y, x, 1, dims + 1, 1, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_softmax(&y, x, 3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_log_softmax(&y, NULL, 0), CT_ERR_INVALID_ARGUMENT);
  ct_release(x);
  ck_assert_ct_ok(ct_zeros(&x, d, CT_I32, 3, shape));
  ck_assert_ct_status(ct_mean(&y, x, 0, NULL, false), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("i32");
  ck_assert_ct_status(ct_std(&y, x, 0, NULL, 1, false), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ct_status(ct_softmax(&y, x, 0), CT_ERR_DTYPE_MISMATCH);
  ct_release(x);
  /* 0-dim tensors take dim 0 and -1 only. */
  float v = 2.5f;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 0, NULL, &v));
  int bad[1] = {1};
  ck_assert_ct_status(ct_sum(&y, x, 1, bad, false), CT_ERR_INVALID_ARGUMENT);
  int ok[2] = {0, -1};
  ck_assert_ct_status(ct_sum(&y, x, 2, ok, false), CT_ERR_INVALID_ARGUMENT); /* the same dim twice */
  ck_assert_ct_ok(ct_sum(&y, x, 1, ok + 1, false));
  ck_assert_double_eq(scalar_of(y), 2.5);
  ct_release(y);
  ck_assert_ct_ok(ct_argmax(&y, x, 0, false));
  ck_assert_double_eq(scalar_of(y), 0.0);
  ct_release(y);
  ct_release(x);
}
END_TEST

/* Two threads reducing the same tensor at once get the same results. */
struct thread_job {
  const ct_tensor *x;
  double result;
  ct_status st;
};
static void *thread_sum(void *arg) {
  struct thread_job *j = arg;
  for (int r = 0; r < 20 && j->st == CT_OK; r++) {
    ct_tensor *y = NULL;
    j->st = ct_sum(&y, j->x, 0, NULL, false);
    float v = 0;
    if (j->st == CT_OK) j->st = ct_to_host(y, &v, sizeof v);
    j->result = v;
    ct_release(y);
  }
  return NULL;
}

START_TEST(test_threads) {
  ct_device *d = ct_test_device();
  int64_t n = 100000, shape[1] = {n};
  float *p = malloc((size_t)n * sizeof *p);
  double want = 0;
  for (int64_t i = 0; i < n; i++) want += p[i] = (float)(i % 7);
  ct_tensor *x;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 1, shape, p));
  struct thread_job jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (struct thread_job){x, 0, CT_OK};
    ck_assert_int_eq(pthread_create(&th[i], NULL, thread_sum, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    ck_assert_int_eq(jobs[i].st, CT_OK);
    ck_assert_double_eq(jobs[i].result, want);
  }
  ct_release(x);
  free(p);
}
END_TEST

int main(int argc, char **argv) {
  /* "gpu-layout": the GPU kernels' layout on this (CPU) device, so both layouts are tested. */
  ct__reduce_gpu_layout = argc > 1 && strcmp(argv[1], "gpu-layout") == 0;
  Suite *s = suite_create("reduce");
  TCase *tc = tcase_create("ops");
  tcase_add_loop_test(tc, test_op_every_dtype_and_layout, 0, R_NOPS * CT_DTYPE_COUNT);
  tcase_add_test(tc, test_var_corrections);
  suite_add_tcase(s, tc);
  tc = tcase_create("semantics");
  tcase_add_test(tc, test_nan_and_inf);
  tcase_add_test(tc, test_arg_ties);
  tcase_add_test(tc, test_integer_exact_and_wrapping);
  tcase_add_test(tc, test_empty_values);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_test(tc, test_argument_errors);
  suite_add_tcase(s, tc);
  tc = tcase_create("threads");
  tcase_set_tags(tc, "threads"); /* skipped under Oclgrind, which runs one kernel at a time */
  tcase_add_test(tc, test_threads);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
