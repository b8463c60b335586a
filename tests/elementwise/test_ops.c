/* Every elementwise op against the host reference (ew_ref.h), contiguous operands. The op lists
 * are generated from the op table (src/elementwise/ops.def), so a new row is tested without
 * touching this file. argv[1] picks a group, so meson runs the groups as parallel tests:
 *   binary   the tensor-tensor ops, new and _out forms
 *   unary    the unary ops (and leaky_relu with slopes), where, clamp
 *   scalar   the tensor-scalar ops with integer and float scalars
 *   promote  the promotion table, add on every pair of dtypes (lt on a third, mul on the diagonal)
 *   gpu      a subset of the above over every dtype (add, div, lt, neg, exp, mul by a scalar,
 *            where, clamp, f16 with every dtype) with the kernels a GPU gets
 *            (ct__ew_gpu_paths: f16 through the half builtins, no CPU vector path)
 * Dtypes (tested_dtype): each distinct OpenCL program costs seconds to build cold, so the full
 * matrix of 13 dtypes runs for a few representative ops per group, whose code paths (signed,
 * unsigned, every width, f16/bf16 storage, the vector path) the other ops share; every other op
 * runs on the dtypes where its own function differs: f32, f64 and an integer input for float
 * functions; f32, i8, u8, i64 and bool for the rest (plus the dtypes it refuses, which build
 * nothing). Layouts, broadcasting and errors are in test_layout.c. */
#include "elementwise/elementwise.h"
#include "ew_fns.h"
#include "ew_util.h"

/* Row lists by kind. T_<list>_<kind>(name, ref) emits a row of that list or nothing. */
#define T_NONE(name, ref)
#define T_BIN(name, ref) {ref, ct_##name, ct_##name##_out},
#define T_UN(name, ref) {ref, ct_##name, ct_##name##_out, NULL, NULL},
#define T_UNP(name, ref) {ref, NULL, NULL, ct_##name, ct_##name##_out},
#define T_SC(name, ref) {ref, false, ct_##name##_scalar, ct_##name##_scalar_out, "ct_" #name "_scalar"},
#define T_RSC(name, ref) {ref, true, ct_r##name##_scalar, ct_r##name##_scalar_out, "ct_r" #name "_scalar"},

static const struct {
  enum ref_op op;
  bin_fn fn;
  bin_out_fn out;
} binary_ops[] = {
#define T_B_BIN T_BIN
#define T_B_BINS T_BIN
#define T_B_BINSR T_BIN
#define T_B_UN T_NONE
#define T_B_UNP T_NONE
#define T_B_WHERE T_NONE
#define T_B_CLAMP T_NONE
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) T_B_##kind(name, ref)
#include "elementwise/ops.def"
#undef CT__EW_OP
};
#define N_BINARY ((int)(sizeof binary_ops / sizeof binary_ops[0]))

/* Unary ops; those with a parameter (UNP) through pfn/pout. */
static const struct {
  enum ref_op op;
  un_fn fn;
  un_out_fn out;
  sc_fn pfn;
  sc_out_fn pout;
} unary_ops[] = {
#define T_U_BIN T_NONE
#define T_U_BINS T_NONE
#define T_U_BINSR T_NONE
#define T_U_UN T_UN
#define T_U_UNP T_UNP
#define T_U_WHERE T_NONE
#define T_U_CLAMP T_NONE
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) T_U_##kind(name, ref)
#include "elementwise/ops.def"
#undef CT__EW_OP
};
#define N_UNARY ((int)(sizeof unary_ops / sizeof unary_ops[0]))

static const struct {
  enum ref_op op;
  bool reversed; /* s op a */
  sc_fn fn;
  sc_out_fn out;
  const char *name;
} scalar_ops[] = {
#define T_S_BIN T_NONE
#define T_S_BINS T_SC
#define T_S_BINSR T_SC
#define T_S_UN T_NONE
#define T_S_UNP T_NONE
#define T_S_WHERE T_NONE
#define T_S_CLAMP T_NONE
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) T_S_##kind(name, ref)
#include "elementwise/ops.def"
#undef CT__EW_OP
#define T_R_BIN T_NONE
#define T_R_BINS T_NONE
#define T_R_BINSR T_RSC
#define T_R_UN T_NONE
#define T_R_UNP T_NONE
#define T_R_WHERE T_NONE
#define T_R_CLAMP T_NONE
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) T_R_##kind(name, ref)
#include "elementwise/ops.def"
#undef CT__EW_OP
};
#define N_SCALAR ((int)(sizeof scalar_ops / sizeof scalar_ops[0]))

static bool no_bool(enum ref_op op) { return ref_no_bool(op); }

/* Ops run on all 13 dtypes (see the top); the list names code paths, not favourites: add (bool
 * as or, wrapping, the f16 vector path), floor_divide (signed, unsigned and float divisions
 * without traps), lt (masks of every width), bitwise_and (every integer width); neg, abs (the
 * vector path's unary ops), exp (float functions on integer inputs), sign; mul and rsub by a
 * scalar (scalars of every compute type, both operand orders). */
static bool full_matrix(enum ref_op op, bool scalar) {
  if (scalar) return op == R_MUL || op == R_SUB;
  switch (op) {
  case R_ADD: case R_FLOOR_DIVIDE: case R_LT: case R_BITWISE_AND: case R_NEG: case R_ABS: case R_EXP: case R_SIGN:
    return true;
  default: return false;
  }
}

static bool all_dtypes; /* the gpu group: every dtype for its subset of ops */

static bool tested_dtype(const ew_dev *e, enum ref_op op, bool scalar, ct_dtype t) {
  if (t == CT_F64 && !e->fp64) return false;
  if (all_dtypes || full_matrix(op, scalar)) return true;
  bool refused = (ref_int_only(op) && ref_is_float(t)) || (ref_float_only(op) && !ref_is_float(t)) ||
                 (no_bool(op) && t == CT_BOOL);
  if (refused) return true; /* the error path builds nothing */
  if (ref_is_unary_float_fn(op) || op == R_DIV || op == R_ATAN2 || ref_float_only(op))
    return t == CT_F32 || t == CT_F64 || t == CT_I32 || (ref_float_only(op) && (t == CT_F16 || t == CT_BF16));
  return t == CT_F32 || t == CT_I8 || t == CT_U8 || t == CT_I64 || t == CT_BOOL;
}

/* The status an op must give on dtype k (the promoted one) when it refuses it, else CT_OK. */
static ct_status refusal(enum ref_op op, ct_dtype k, const char **what) {
  if (ref_int_only(op) && ref_is_float(k)) {
    *what = "floating";
    return CT_ERR_DTYPE_MISMATCH;
  }
  if (ref_float_only(op) && !ref_is_float(k)) {
    *what = "floating dtypes";
    return CT_ERR_DTYPE_MISMATCH;
  }
  if (no_bool(op) && k == CT_BOOL) {
    *what = "bool";
    return CT_ERR_DTYPE_MISMATCH;
  }
  return CT_OK;
}

static const ref_val ref_zero = {0, 0, 0};

/* Runs a binary op on (ta, tb) pairs and checks every element, in both forms. */
static void check_binary(const ew_dev *e, int which, ct_dtype ta, ct_dtype tb) {
  enum ref_op op = binary_ops[which].op;
  const char *refused = "";
  const char *name = ref_op_name[op];
  ct_dtype k = REF_NONE, o = REF_NONE;
  if (ref_promote_table[ta][tb] != REF_NONE) ref_types(op, ref_promote_table[ta][tb], &k, &o);
  void *ha, *hb;
  size_t n;
  ew_pairs(ta, tb, e->denorm, 300, &ha, &hb, &n);
  int64_t shape[1] = {(int64_t)n};
  ct_tensor *a = ew_tensor(e->d, ta, 1, shape, ha), *b = ew_tensor(e->d, tb, 1, shape, hb), *c = NULL;
  if (k == REF_NONE) {
    /* PyTorch has no common dtype for them (u16, u32, u64 with another integer or bool). */
    ck_assert_ct_status(binary_ops[which].fn(&c, a, b), CT_ERR_DTYPE_MISMATCH);
    ck_assert_ptr_null(c);
    ck_assert_error_contains("no common dtype");
  } else if (refusal(op, k, &refused) != CT_OK) {
    ck_assert_ct_status(binary_ops[which].fn(&c, a, b), refusal(op, k, &refused));
    ck_assert_ptr_null(c);
    ck_assert_error_contains(refused);
  } else {
    ck_assert_ct_ok(binary_ops[which].fn(&c, a, b));
    ck_assert_msg(ct_tensor_dtype(c) == o, "%s(%s, %s) gave %s, expected %s", name, ct_dtype_name(ta),
                  ct_dtype_name(tb), ct_dtype_name(ct_tensor_dtype(c)), ct_dtype_name(o));
    ct_tensor *c2;
    ck_assert_ct_ok(ct_empty(&c2, e->d, o, 1, shape));
    ck_assert_ct_ok(binary_ops[which].out(c2, a, b));
    char *r = ew_read(c), *r2 = ew_read(c2);
    size_t so = ref_size(o), sa = ref_size(ta), sb = ref_size(tb);
    for (size_t i = 0; i < n; i++) {
      ref_val x = ref_convert(k, ta, (char *)ha + i * sa), y = ref_convert(k, tb, (char *)hb + i * sb);
      ref_expect ex = ref_compute(op, k, o, x, y, ref_zero, ref_zero, false, false, e->cr);
      char xa[64], xb[64];
      EW_CHECK_ELEM(&ex, o, r + i * so, e->denorm, "%s(%s %s, %s %s) [%zu]", name, ct_dtype_name(ta),
                    ew_fmt(xa, sizeof xa, ta, (char *)ha + i * sa), ct_dtype_name(tb),
                    ew_fmt(xb, sizeof xb, tb, (char *)hb + i * sb), i);
      EW_CHECK_ELEM(&ex, o, r2 + i * so, e->denorm, "%s_out(%s %s, %s %s) [%zu]", name, ct_dtype_name(ta),
                    ew_fmt(xa, sizeof xa, ta, (char *)ha + i * sa), ct_dtype_name(tb),
                    ew_fmt(xb, sizeof xb, tb, (char *)hb + i * sb), i);
    }
    free(r);
    free(r2);
    ct_release(c2);
  }
  ct_release(c);
  ct_release(a);
  ct_release(b);
  free(ha);
  free(hb);
}

START_TEST(test_binary) {
  ew_dev e = ew_open();
  for (int i = 0; i < REF_NDTYPES; i++) {
    ct_dtype t = ew_all_dtypes[i];
    if (!tested_dtype(&e, binary_ops[_i].op, false, t)) continue;
    check_binary(&e, _i, t, t);
  }
}
END_TEST

/* Unary op on dtype t; p: the parameter of an op that takes one (leaky_relu's slope). */
static void check_unary(const ew_dev *e, int which, ct_dtype t, double p) {
  enum ref_op op = unary_ops[which].op;
  const char *name = ref_op_name[op], *refused = "";
  bool param = unary_ops[which].pfn != NULL;
  ct_dtype k, o;
  ref_types(op, t, &k, &o);
  size_t n;
  void *hx = ew_values(t, e->denorm, 400, &n);
  int64_t shape[2] = {1, (int64_t)n};
  ct_tensor *x = ew_tensor(e->d, t, 2, shape, hx), *y = NULL;
  ct_status want = refusal(op, k, &refused);
  ct_status st = param ? unary_ops[which].pfn(&y, x, p) : unary_ops[which].fn(&y, x);
  if (want != CT_OK) {
    ck_assert_msg(st == want, "%s(%s) returned %s, expected %s", name, ct_dtype_name(t), ct_status_name(st),
                  ct_status_name(want));
    ck_assert_ptr_null(y);
    ck_assert_error_contains(refused);
  } else {
    ck_assert_msg(st == CT_OK, "%s(%s): %s: %s", name, ct_dtype_name(t), ct_status_name(st), ct_last_error());
    ck_assert_msg(ct_tensor_dtype(y) == o, "%s(%s) gave %s, expected %s", name, ct_dtype_name(t),
                  ct_dtype_name(ct_tensor_dtype(y)), ct_dtype_name(o));
    ck_assert_int_eq(ct_tensor_ndim(y), 2);
    ct_tensor *y2;
    ck_assert_ct_ok(ct_empty(&y2, e->d, o, 2, shape));
    ck_assert_ct_ok(param ? unary_ops[which].pout(y2, x, p) : unary_ops[which].out(y2, x));
    char *r = ew_read(y), *r2 = ew_read(y2);
    size_t so = ref_size(o), st_ = ref_size(t);
    ref_val pv = ref_scalar(k, p);
    for (size_t i = 0; i < n; i++) {
      ref_val v = ref_convert(k, t, (char *)hx + i * st_);
      ref_expect ex = ref_compute(op, k, o, v, param ? pv : ref_zero, ref_zero, ref_zero, false, false, e->cr);
      char xa[64];
      EW_CHECK_ELEM(&ex, o, r + i * so, e->denorm, "%s(%s %s, p = %g) [%zu]", name, ct_dtype_name(t),
                    ew_fmt(xa, sizeof xa, t, (char *)hx + i * st_), p, i);
      EW_CHECK_ELEM(&ex, o, r2 + i * so, e->denorm, "%s_out(%s %s, p = %g) [%zu]", name, ct_dtype_name(t),
                    ew_fmt(xa, sizeof xa, t, (char *)hx + i * st_), p, i);
    }
    free(r);
    free(r2);
    ct_release(y2);
  }
  ct_release(y);
  ct_release(x);
  free(hx);
}

START_TEST(test_unary) {
  ew_dev e = ew_open();
  for (int i = 0; i < REF_NDTYPES; i++) {
    ct_dtype t = ew_all_dtypes[i];
    if (!tested_dtype(&e, unary_ops[_i].op, false, t)) continue;
    check_unary(&e, _i, t, 0.01);
    /* other parameters reuse the program (the parameter is a kernel argument) */
    if (unary_ops[_i].pfn && ref_is_float(t)) {
      check_unary(&e, _i, t, -3);
      check_unary(&e, _i, t, 0);
    }
  }
}
END_TEST

/* where(cond, a, b) for cond dtype tc and value dtypes ta, tb. */
static void check_where(const ew_dev *e, ct_dtype tc, ct_dtype ta, ct_dtype tb) {
  ct_dtype k = ref_promote_table[ta][tb];
  void *ha, *hb;
  size_t n, nc;
  ew_pairs(ta, tb, e->denorm, 200, &ha, &hb, &n);
  void *hc0 = ew_values(tc, e->denorm, (int)n, &nc);
  int64_t shape[1] = {(int64_t)n};
  ct_tensor *a = ew_tensor(e->d, ta, 1, shape, ha), *b = ew_tensor(e->d, tb, 1, shape, hb);
  ct_tensor *c = ew_tensor(e->d, tc, 1, shape, hc0), *r = NULL;
  ck_assert_ct_ok(ct_where(&r, c, a, b));
  ck_assert_int_eq(ct_tensor_dtype(r), k);
  char *got = ew_read(r);
  for (size_t i = 0; i < n; i++) {
    bool pick = ref_nonzero(tc, (char *)hc0 + i * ref_size(tc));
    ref_val v = pick ? ref_convert(k, ta, (char *)ha + i * ref_size(ta)) : ref_convert(k, tb, (char *)hb + i * ref_size(tb));
    ref_expect ex = ref_value(k, v);
    char cb[64];
    EW_CHECK_ELEM(&ex, k, got + i * ref_size(k), e->denorm, "where(%s %s, %s, %s) [%zu]", ct_dtype_name(tc),
                  ew_fmt(cb, sizeof cb, tc, (char *)hc0 + i * ref_size(tc)), ct_dtype_name(ta), ct_dtype_name(tb), i);
  }
  free(got);
  ct_release(r);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  free(ha);
  free(hb);
  free(hc0);
}

START_TEST(test_where) {
  ew_dev e = ew_open();
  for (int i = 0; i < REF_NDTYPES; i++) {
    ct_dtype t = ew_all_dtypes[i];
    if (t == CT_F64 && !e.fp64) continue;
    check_where(&e, CT_BOOL, t, t);
    check_where(&e, t, CT_F32, CT_I32); /* every condition dtype */
  }
  check_where(&e, CT_BOOL, CT_F16, CT_BF16);
  check_where(&e, CT_BOOL, CT_U8, CT_I8);
  check_where(&e, CT_BOOL, CT_U32, CT_F16);
}
END_TEST

/* clamp on dtype t with bounds lo, hi (NaN: none). */
static void check_clamp(const ew_dev *e, ct_dtype t, double lo, double hi) {
  bool hl = !isnan(lo), hh = !isnan(hi);
  ct_dtype k = t;
  if (hl) k = ref_promote_scalar(k, lo);
  if (hh) k = ref_promote_scalar(k, hi);
  size_t n;
  void *hx = ew_values(t, e->denorm, 300, &n);
  int64_t shape[1] = {(int64_t)n};
  ct_tensor *x = ew_tensor(e->d, t, 1, shape, hx), *y = NULL;
  if ((hl && !ref_scalar_fits(k, lo)) || (hh && !ref_scalar_fits(k, hi))) {
    /* A bound the result dtype can't hold is refused (the one scalar rule), not saturated. */
    ck_assert_ct_status(ct_clamp(&y, x, lo, hi), CT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(y);
    ck_assert_error_contains("without overflow");
    ct_release(x);
    free(hx);
    return;
  }
  ck_assert_ct_ok(ct_clamp(&y, x, lo, hi));
  ck_assert_int_eq(ct_tensor_dtype(y), k);
  char *got = ew_read(y);
  ref_val vlo = ref_scalar(k, hl ? lo : 0), vhi = ref_scalar(k, hh ? hi : 0);
  if (!ref_is_float(k)) {
    /* A missing integer bound is the dtype's own limit (ref_int_op clamps on both). */
    unsigned bits = ref_bits(k);
    uint64_t umax = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (!hl) vlo.i = ref_kmin(k);
    if (!hh) vhi.i = ref_signed(k) ? (int64_t)(umax >> 1) : (int64_t)umax;
  }
  for (size_t i = 0; i < n; i++) {
    ref_val v = ref_convert(k, t, (char *)hx + i * ref_size(t));
    ref_expect ex = ref_compute(R_CLAMP, k, k, v, ref_zero, vlo, vhi, hl, hh, e->cr);
    char xb[64];
    EW_CHECK_ELEM(&ex, k, got + i * ref_size(k), e->denorm, "clamp(%s %s, %g, %g) [%zu]", ct_dtype_name(t),
                  ew_fmt(xb, sizeof xb, t, (char *)hx + i * ref_size(t)), lo, hi, i);
  }
  free(got);
  ct_release(y);
  ct_release(x);
  free(hx);
}

START_TEST(test_clamp) {
  ew_dev e = ew_open();
  for (int i = 0; i < REF_NDTYPES; i++) {
    ct_dtype t = ew_all_dtypes[i];
    if (t == CT_F64 && !e.fp64) continue;
    check_clamp(&e, t, -2, 7);           /* integer bounds */
    check_clamp(&e, t, 0, NAN);          /* clamp_min, as relu */
    check_clamp(&e, t, NAN, 100.5);      /* float bound: integers go to f32 */
    check_clamp(&e, t, 5, -5);           /* lo > hi gives hi */
    check_clamp(&e, t, -1000, 1e6);      /* refused for the small integers */
  }
}
END_TEST

/* a op s (or s op a) on dtype t. */
static void check_scalar(const ew_dev *e, int which, ct_dtype t, double s) {
  enum ref_op op = scalar_ops[which].op;
  bool rev = scalar_ops[which].reversed;
  const char *name = scalar_ops[which].name;
  ct_dtype k, o;
  bool overflow;
  ref_scalar_types(op, t, s, &k, &o, &overflow);
  size_t n;
  void *hx = ew_values(t, e->denorm, 300, &n);
  int64_t shape[1] = {(int64_t)n};
  ct_tensor *x = ew_tensor(e->d, t, 1, shape, hx), *y = NULL;
  ct_status st = scalar_ops[which].fn(&y, x, s);
  const char *refused = "";
  if (refusal(op, k, &refused) != CT_OK) {
    ck_assert_int_eq(st, refusal(op, k, &refused));
  } else if (overflow) {
    ck_assert_msg(st == CT_ERR_INVALID_ARGUMENT, "%s(%s, %g) returned %s, expected an overflow error", name,
                  ct_dtype_name(t), s, ct_status_name(st));
    ck_assert_error_contains("overflow");
  } else {
    ck_assert_msg(st == CT_OK, "%s(%s, %g): %s: %s", name, ct_dtype_name(t), s, ct_status_name(st), ct_last_error());
    ck_assert_msg(ct_tensor_dtype(y) == o, "%s(%s, %g) gave %s, expected %s", name, ct_dtype_name(t), s,
                  ct_dtype_name(ct_tensor_dtype(y)), ct_dtype_name(o));
    ct_tensor *y2;
    ck_assert_ct_ok(ct_empty(&y2, e->d, o, 1, shape));
    ck_assert_ct_ok(scalar_ops[which].out(y2, x, s));
    char *r = ew_read(y), *r2 = ew_read(y2);
    ref_val sv = ref_scalar(k, s);
    for (size_t i = 0; i < n; i++) {
      ref_val v = ref_convert(k, t, (char *)hx + i * ref_size(t));
      ref_expect ex = rev ? ref_compute(op, k, o, sv, v, ref_zero, ref_zero, false, false, e->cr)
                          : ref_compute(op, k, o, v, sv, ref_zero, ref_zero, false, false, e->cr);
      char xb[64];
      EW_CHECK_ELEM(&ex, o, r + i * ref_size(o), e->denorm, "%s(%s %s, %.17g) [%zu]", name, ct_dtype_name(t),
                    ew_fmt(xb, sizeof xb, t, (char *)hx + i * ref_size(t)), s, i);
      EW_CHECK_ELEM(&ex, o, r2 + i * ref_size(o), e->denorm, "%s_out(%s %s, %.17g) [%zu]", name, ct_dtype_name(t),
                    ew_fmt(xb, sizeof xb, t, (char *)hx + i * ref_size(t)), s, i);
    }
    free(r);
    free(r2);
    ct_release(y2);
  }
  ct_release(y);
  ct_release(x);
  free(hx);
}

START_TEST(test_scalar) {
  ew_dev e = ew_open();
  /* Integer scalars keep integer dtypes; float ones lift them to f32; 0 divides by zero;
   * 1e10 overflows i32 and smaller (an error, but not for comparisons). */
  const double scalars[] = {3, -2, 0, 2.5, -0.75, 1e10};
  for (int i = 0; i < REF_NDTYPES; i++) {
    ct_dtype t = ew_all_dtypes[i];
    if (!tested_dtype(&e, scalar_ops[_i].op, true, t)) continue;
    for (size_t j = 0; j < sizeof scalars / sizeof scalars[0]; j++) check_scalar(&e, _i, t, scalars[j]);
  }
}
END_TEST

START_TEST(test_promote_table) {
  for (int i = 0; i < REF_NDTYPES; i++)
    for (int j = 0; j < REF_NDTYPES; j++) {
      ct_dtype r;
      if (ref_promote_table[i][j] == REF_NONE) {
        ck_assert_ct_status(ct_promote_types(&r, ew_all_dtypes[i], ew_all_dtypes[j]), CT_ERR_DTYPE_MISMATCH);
        continue;
      }
      ck_assert_ct_ok(ct_promote_types(&r, ew_all_dtypes[i], ew_all_dtypes[j]));
      ck_assert_msg(r == ref_promote_table[i][j], "promote(%s, %s) = %s, expected %s", ct_dtype_name(ew_all_dtypes[i]),
                    ct_dtype_name(ew_all_dtypes[j]), ct_dtype_name(r), ct_dtype_name(ref_promote_table[i][j]));
    }
  ct_dtype r;
  ck_assert_ct_status(ct_promote_types(&r, (ct_dtype)42, CT_F32), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_promote_types(NULL, CT_F32, CT_F32), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* add on every ordered pair of dtypes: the conversions into the common dtype. */
START_TEST(test_promote_pairs) {
  ew_dev e = ew_open();
  const enum ref_op want[] = {R_ADD, R_MUL, R_LT};
  int ops[3];
  for (int w = 0; w < 3; w++)
    for (int i = 0; i < N_BINARY; i++)
      if (binary_ops[i].op == want[w]) ops[w] = i;
  ct_dtype ta = ew_all_dtypes[_i];
  if (ta == CT_F64 && !e.fp64) return;
  for (int j = 0; j < REF_NDTYPES; j++) {
    ct_dtype tb = ew_all_dtypes[j];
    if (tb == CT_F64 && !e.fp64) continue;
    /* add converts every pair into its common dtype; lt on a third of the pairs checks masks
     * after conversions; mul on the diagonal, its compute in every dtype (each program costs a
     * cold build; the conversions are add's, the compute paths mul shares with add) */
    check_binary(&e, ops[0], ta, tb);
    if ((j + _i) % 3 == 0) check_binary(&e, ops[2], ta, tb);
    if (j == _i) check_binary(&e, ops[1], ta, tb);
  }
}
END_TEST

int main(int argc, char **argv) {
  const char *group = argc > 1 ? argv[1] : "all";
  bool all = strcmp(group, "all") == 0;
  Suite *s = suite_create("elementwise-ops");
  TCase *tc = tcase_create(group);
  tcase_set_timeout(tc, 600);
  if (all || strcmp(group, "binary") == 0) tcase_add_loop_test(tc, test_binary, 0, N_BINARY);
  if (all || strcmp(group, "unary") == 0) {
    tcase_add_loop_test(tc, test_unary, 0, N_UNARY);
    tcase_add_test(tc, test_where);
    tcase_add_test(tc, test_clamp);
  }
  if (all || strcmp(group, "scalar") == 0) tcase_add_loop_test(tc, test_scalar, 0, N_SCALAR);
  if (all || strcmp(group, "promote") == 0) {
    tcase_add_test(tc, test_promote_table);
    tcase_add_loop_test(tc, test_promote_pairs, 0, REF_NDTYPES);
  }
  if (strcmp(group, "gpu") == 0) {
    /* Set before the first op: the launcher reads it once per device. */
    ct__ew_gpu_paths = 1;
    all_dtypes = true;
    const enum ref_op bin[] = {R_ADD, R_DIV, R_LT};
    const enum ref_op un[] = {R_NEG, R_EXP};
    const enum ref_op sc[] = {R_MUL};
    for (int i = 0; i < N_BINARY; i++)
      for (size_t j = 0; j < sizeof bin / sizeof bin[0]; j++)
        if (binary_ops[i].op == bin[j]) tcase_add_loop_test(tc, test_binary, i, i + 1);
    for (int i = 0; i < N_UNARY; i++)
      for (size_t j = 0; j < sizeof un / sizeof un[0]; j++)
        if (unary_ops[i].op == un[j]) tcase_add_loop_test(tc, test_unary, i, i + 1);
    for (int i = 0; i < N_SCALAR; i++)
      for (size_t j = 0; j < sizeof sc / sizeof sc[0]; j++)
        if (scalar_ops[i].op == sc[j] && !scalar_ops[i].reversed) tcase_add_loop_test(tc, test_scalar, i, i + 1);
    tcase_add_test(tc, test_where);
    tcase_add_test(tc, test_clamp);
    tcase_add_loop_test(tc, test_promote_pairs, 5, 6); /* f16 with every dtype */
  }
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
