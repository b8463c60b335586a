/* The public elementwise ops: argument checks, result dtypes, then one launch each. */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"
#include "elementwise/elementwise.h"
#include "tensor/tensor.h"

/* How an op's result dtype follows from its operands' promoted dtype T. */
enum ct__ew_rule {
  CT__EW_R_PROMOTE, /* T */
  CT__EW_R_TRUEDIV, /* T if floating, else f32 */
  CT__EW_R_BOOL,    /* bool, computed in T (comparisons, logical ops) */
  CT__EW_R_FLOAT,   /* unary float functions: T if floating, else f32 */
};

static const struct {
  enum ct__ew_rule rule;
  bool no_bool; /* PyTorch rejects these for bool too: they have no boolean meaning */
} ct__ew_info[CT__EW_OP_COUNT] = {
    [CT__EW_ADD] = {CT__EW_R_PROMOTE, false},
    [CT__EW_SUB] = {CT__EW_R_PROMOTE, true},
    [CT__EW_MUL] = {CT__EW_R_PROMOTE, false},
    [CT__EW_DIV] = {CT__EW_R_TRUEDIV, false},
    [CT__EW_POW] = {CT__EW_R_PROMOTE, false},
    [CT__EW_MAXIMUM] = {CT__EW_R_PROMOTE, false},
    [CT__EW_MINIMUM] = {CT__EW_R_PROMOTE, false},
    [CT__EW_FLOOR_DIVIDE] = {CT__EW_R_PROMOTE, true},
    [CT__EW_REMAINDER] = {CT__EW_R_PROMOTE, true},
    [CT__EW_EQ] = {CT__EW_R_BOOL, false},
    [CT__EW_NE] = {CT__EW_R_BOOL, false},
    [CT__EW_LT] = {CT__EW_R_BOOL, false},
    [CT__EW_LE] = {CT__EW_R_BOOL, false},
    [CT__EW_GT] = {CT__EW_R_BOOL, false},
    [CT__EW_GE] = {CT__EW_R_BOOL, false},
    [CT__EW_LOGICAL_AND] = {CT__EW_R_BOOL, false},
    [CT__EW_LOGICAL_OR] = {CT__EW_R_BOOL, false},
    [CT__EW_LOGICAL_NOT] = {CT__EW_R_BOOL, false},
    [CT__EW_NEG] = {CT__EW_R_PROMOTE, true},
    [CT__EW_ABS] = {CT__EW_R_PROMOTE, false},
    [CT__EW_RELU] = {CT__EW_R_PROMOTE, false},
    [CT__EW_FLOOR] = {CT__EW_R_PROMOTE, false},
    [CT__EW_CEIL] = {CT__EW_R_PROMOTE, false},
    [CT__EW_ROUND] = {CT__EW_R_PROMOTE, false},
    [CT__EW_EXP] = {CT__EW_R_FLOAT, false},
    [CT__EW_LOG] = {CT__EW_R_FLOAT, false},
    [CT__EW_SQRT] = {CT__EW_R_FLOAT, false},
    [CT__EW_RSQRT] = {CT__EW_R_FLOAT, false},
    [CT__EW_SIN] = {CT__EW_R_FLOAT, false},
    [CT__EW_COS] = {CT__EW_R_FLOAT, false},
    [CT__EW_TANH] = {CT__EW_R_FLOAT, false},
    [CT__EW_SIGMOID] = {CT__EW_R_FLOAT, false},
    [CT__EW_GELU] = {CT__EW_R_FLOAT, false},
    [CT__EW_WHERE] = {CT__EW_R_PROMOTE, false},
    [CT__EW_CLAMP] = {CT__EW_R_PROMOTE, false},
};

/* The common (compute) dtype *k and the result dtype *o of op on operands promoting to t. */
static ct_status ct__ew_types(const char *fn, enum ct__ew_op op, ct_dtype t, ct_dtype *k, ct_dtype *o) {
  switch (ct__ew_info[op].rule) {
  case CT__EW_R_PROMOTE: *k = *o = t; break;
  case CT__EW_R_TRUEDIV:
  case CT__EW_R_FLOAT: *k = *o = ct__ew_float_of(t); break;
  case CT__EW_R_BOOL: *k = t; *o = CT_BOOL; break;
  }
  if (ct__ew_info[op].no_bool && *k == CT_BOOL)
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: not defined for bool tensors (as in PyTorch); use ct_logical_and/or/not, or ct_cast to an "
                     "integer dtype first",
                     fn);
  return CT_OK;
}

/* Checks the dtypes against the device, then allocates the result (new form) or checks the
 * given out tensor (_out form), and launches. names[] name the inputs in messages. */
static ct_status ct__ew_finish(const char *fn, const struct ct__ew_launch *l, ct_dtype o, int ndim,
                               const int64_t *shape, ct_tensor **outp, ct_tensor *out, const char *const *names) {
  ct_device *d = l->in[0]->storage->device;
  bool f64 = l->k == CT_F64 || o == CT_F64;
  for (int i = 0; i < l->nin; i++) f64 |= l->in[i]->dtype == CT_F64;
  if (f64 && !d->props.fp64)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: dtype f64 needs cl_khr_fp64, which device %s (%s) does not support", fn,
                     d->spec, d->props.name);
  if (outp) {
    CT__TRY(ct__tensor_new(outp, d, o, ndim, shape, fn));
    ct_status st = ct__ew_run(fn, l, *outp);
    if (st != CT_OK) {
      ct_release(*outp);
      *outp = NULL;
    }
    return st;
  }
  char sa[200], sb[200];
  if (out->ndim != ndim || (ndim && memcmp(out->shape, shape, (size_t)ndim * sizeof *shape) != 0))
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: out has shape %s but the result has shape %s", fn,
                     ct__shape_str(sa, sizeof sa, out->ndim, out->shape), ct__shape_str(sb, sizeof sb, ndim, shape));
  if (out->dtype != o)
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "%s: out has dtype %s but the result is %s (ops do not convert into out; give an out of "
                     "dtype %s or ct_cast the result)",
                     fn, ct_dtype_name(out->dtype), ct_dtype_name(o), ct_dtype_name(o));
  CT__TRY(ct__ew_check_out_overlap(fn, out, l->nin, l->in, names));
  return ct__ew_run(fn, l, out);
}

/* The new-tensor form passes outp (non-NULL check done here), the _out form passes out. */
static ct_status ct__ew_check_dest(const char *fn, ct_tensor **outp, ct_tensor *out, bool into,
                                   const ct_tensor *first, const char *first_name) {
  if (!into) {
    if (!outp) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 'out' is NULL", fn);
    *outp = NULL;
    if (!first) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, first_name);
    return CT_OK;
  }
  return ct__check_same_device(fn, "out", out, first_name, first);
}

static ct_status ct__ew_binary(const char *fn, enum ct__ew_op op, ct_tensor **outp, ct_tensor *out, bool into,
                               const ct_tensor *a, const ct_tensor *b) {
  CT__TRY(ct__ew_check_dest(fn, outp, out, into, a, "a"));
  CT__TRY(ct__check_same_device(fn, "a", a, "b", b));
  int nd;
  int64_t shape[CT_MAX_DIMS];
  CT__TRY(ct__broadcast_shapes(&nd, shape, a->ndim, a->shape, b->ndim, b->shape, fn));
  struct ct__ew_launch l = {.op = op, .nin = 2, .in = {a, b}};
  ct_dtype o = CT_F32, t = CT_F32; /* set on success */
  CT__TRY(ct__ew_result_type(&t, 2, l.in, 0, NULL, fn));
  CT__TRY(ct__ew_types(fn, op, t, &l.k, &o));
  static const char *const names[] = {"a", "b"};
  return ct__ew_finish(fn, &l, o, nd, shape, into ? NULL : outp, out, names);
}

/* spos 2: a op s; spos 1: s op a. */
static ct_status ct__ew_scalar_op(const char *fn, enum ct__ew_op op, ct_tensor **outp, ct_tensor *out, bool into,
                                  const ct_tensor *a, double s, int spos) {
  CT__TRY(ct__ew_check_dest(fn, outp, out, into, a, "a"));
  struct ct__ew_launch l = {.op = op, .nin = 1, .in = {a}, .spos = spos};
  ct_dtype o = CT_F32, t = CT_F32; /* set on success */
  CT__TRY(ct__ew_result_type(&t, 1, l.in, 1, &s, fn));
  CT__TRY(ct__ew_types(fn, op, t, &l.k, &o));
  if (ct__ew_info[op].rule != CT__EW_R_BOOL) {
    CT__TRY(ct__dtype_check_scalar(s, l.k, fn, "scalar"));
  } else if (!ct_dtype_is_float(l.k) && ct__dtype_check_scalar(s, l.k, fn, "scalar") != CT_OK) {
    /* Comparisons compare an integer scalar the compute dtype can't hold exactly, in i64 (u64
     * against a negative scalar in f32, where the order of any u64 and any negative number
     * holds). The check's message is dropped with its status. */
    l.k = l.k == CT_U64 ? CT_F32 : CT_I64;
  }
  l.s[0] = ct__ew_make_scalar(l.k, s);
  static const char *const names[] = {"a"};
  return ct__ew_finish(fn, &l, o, a->ndim, a->shape, into ? NULL : outp, out, names);
}

static ct_status ct__ew_unary(const char *fn, enum ct__ew_op op, ct_tensor **outp, ct_tensor *out, bool into,
                              const ct_tensor *x) {
  CT__TRY(ct__ew_check_dest(fn, outp, out, into, x, "x"));
  struct ct__ew_launch l = {.op = op, .nin = 1, .in = {x}};
  ct_dtype o = CT_F32; /* set by ct__ew_types on success */
  CT__TRY(ct__ew_types(fn, op, x->dtype, &l.k, &o));
  static const char *const names[] = {"x"};
  return ct__ew_finish(fn, &l, o, x->ndim, x->shape, into ? NULL : outp, out, names);
}

static ct_status ct__ew_where(const char *fn, ct_tensor **outp, ct_tensor *out, bool into, const ct_tensor *cond,
                              const ct_tensor *a, const ct_tensor *b) {
  CT__TRY(ct__ew_check_dest(fn, outp, out, into, cond, "cond"));
  CT__TRY(ct__check_same_device(fn, "cond", cond, "a", a));
  CT__TRY(ct__check_same_device(fn, "cond", cond, "b", b));
  int nab, nd;
  int64_t ab[CT_MAX_DIMS], shape[CT_MAX_DIMS];
  CT__TRY(ct__broadcast_shapes(&nab, ab, a->ndim, a->shape, b->ndim, b->shape, fn));
  CT__TRY(ct__broadcast_shapes(&nd, shape, cond->ndim, cond->shape, nab, ab, fn));
  struct ct__ew_launch l = {.op = CT__EW_WHERE, .nin = 3, .in = {cond, a, b}};
  ct_dtype o = CT_F32, t = CT_F32; /* set on success */
  CT__TRY(ct__ew_result_type(&t, 2, l.in + 1, 0, NULL, fn));
  CT__TRY(ct__ew_types(fn, CT__EW_WHERE, t, &l.k, &o));
  static const char *const names[] = {"cond", "a", "b"};
  return ct__ew_finish(fn, &l, o, nd, shape, into ? NULL : outp, out, names);
}

static ct_status ct__ew_clamp(const char *fn, ct_tensor **outp, ct_tensor *out, bool into, const ct_tensor *x,
                              double lo, double hi) {
  CT__TRY(ct__ew_check_dest(fn, outp, out, into, x, "x"));
  struct ct__ew_launch l = {.op = CT__EW_CLAMP, .nin = 1, .in = {x}, .has_lo = !isnan(lo), .has_hi = !isnan(hi)};
  if (!l.has_lo && !l.has_hi)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: both bounds are NaN (no bound); give lo, hi or both", fn);
  double bounds[2];
  int nb = 0;
  if (l.has_lo) bounds[nb++] = lo;
  if (l.has_hi) bounds[nb++] = hi;
  ct_dtype o = CT_F32, t = CT_F32; /* set on success */
  CT__TRY(ct__ew_result_type(&t, 1, l.in, nb, bounds, fn));
  CT__TRY(ct__ew_types(fn, CT__EW_CLAMP, t, &l.k, &o));
  if (l.has_lo) CT__TRY(ct__dtype_check_scalar(lo, l.k, fn, "lo"));
  if (l.has_hi) CT__TRY(ct__dtype_check_scalar(hi, l.k, fn, "hi"));
  l.s[0] = ct__ew_make_scalar(l.k, l.has_lo ? lo : 0);
  l.s[1] = ct__ew_make_scalar(l.k, l.has_hi ? hi : 0);
  static const char *const names[] = {"x"};
  return ct__ew_finish(fn, &l, o, x->ndim, x->shape, into ? NULL : outp, out, names);
}

/* ---- the public functions ---- */

#define CT__EW_BINARY(name, OP)                                                                  \
  ct_status ct_##name(ct_tensor **out, const ct_tensor *a, const ct_tensor *b) {                 \
    return ct__ew_binary("ct_" #name, OP, out, NULL, false, a, b);                               \
  }                                                                                              \
  ct_status ct_##name##_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b) {            \
    return ct__ew_binary("ct_" #name "_out", OP, NULL, out, true, a, b);                         \
  }

#define CT__EW_SCALAR(name, OP, SPOS)                                                            \
  ct_status ct_##name(ct_tensor **out, const ct_tensor *a, double s) {                           \
    return ct__ew_scalar_op("ct_" #name, OP, out, NULL, false, a, s, SPOS);                      \
  }                                                                                              \
  ct_status ct_##name##_out(ct_tensor *out, const ct_tensor *a, double s) {                      \
    return ct__ew_scalar_op("ct_" #name "_out", OP, NULL, out, true, a, s, SPOS);                \
  }

#define CT__EW_UNARY(name, OP)                                                                   \
  ct_status ct_##name(ct_tensor **out, const ct_tensor *x) {                                     \
    return ct__ew_unary("ct_" #name, OP, out, NULL, false, x);                                   \
  }                                                                                              \
  ct_status ct_##name##_out(ct_tensor *out, const ct_tensor *x) {                                \
    return ct__ew_unary("ct_" #name "_out", OP, NULL, out, true, x);                             \
  }

CT__EW_BINARY(add, CT__EW_ADD)
CT__EW_BINARY(sub, CT__EW_SUB)
CT__EW_BINARY(mul, CT__EW_MUL)
CT__EW_BINARY(div, CT__EW_DIV)
CT__EW_BINARY(pow, CT__EW_POW)
CT__EW_BINARY(maximum, CT__EW_MAXIMUM)
CT__EW_BINARY(minimum, CT__EW_MINIMUM)
CT__EW_BINARY(floor_divide, CT__EW_FLOOR_DIVIDE)
CT__EW_BINARY(remainder, CT__EW_REMAINDER)
CT__EW_BINARY(eq, CT__EW_EQ)
CT__EW_BINARY(ne, CT__EW_NE)
CT__EW_BINARY(lt, CT__EW_LT)
CT__EW_BINARY(le, CT__EW_LE)
CT__EW_BINARY(gt, CT__EW_GT)
CT__EW_BINARY(ge, CT__EW_GE)
CT__EW_BINARY(logical_and, CT__EW_LOGICAL_AND)
CT__EW_BINARY(logical_or, CT__EW_LOGICAL_OR)

CT__EW_SCALAR(add_scalar, CT__EW_ADD, 2)
CT__EW_SCALAR(sub_scalar, CT__EW_SUB, 2)
CT__EW_SCALAR(mul_scalar, CT__EW_MUL, 2)
CT__EW_SCALAR(div_scalar, CT__EW_DIV, 2)
CT__EW_SCALAR(pow_scalar, CT__EW_POW, 2)
CT__EW_SCALAR(maximum_scalar, CT__EW_MAXIMUM, 2)
CT__EW_SCALAR(minimum_scalar, CT__EW_MINIMUM, 2)
CT__EW_SCALAR(floor_divide_scalar, CT__EW_FLOOR_DIVIDE, 2)
CT__EW_SCALAR(remainder_scalar, CT__EW_REMAINDER, 2)
CT__EW_SCALAR(eq_scalar, CT__EW_EQ, 2)
CT__EW_SCALAR(ne_scalar, CT__EW_NE, 2)
CT__EW_SCALAR(lt_scalar, CT__EW_LT, 2)
CT__EW_SCALAR(le_scalar, CT__EW_LE, 2)
CT__EW_SCALAR(gt_scalar, CT__EW_GT, 2)
CT__EW_SCALAR(ge_scalar, CT__EW_GE, 2)
CT__EW_SCALAR(rsub_scalar, CT__EW_SUB, 1)
CT__EW_SCALAR(rdiv_scalar, CT__EW_DIV, 1)
CT__EW_SCALAR(rpow_scalar, CT__EW_POW, 1)

CT__EW_UNARY(logical_not, CT__EW_LOGICAL_NOT)
CT__EW_UNARY(neg, CT__EW_NEG)
CT__EW_UNARY(abs, CT__EW_ABS)
CT__EW_UNARY(relu, CT__EW_RELU)
CT__EW_UNARY(floor, CT__EW_FLOOR)
CT__EW_UNARY(ceil, CT__EW_CEIL)
CT__EW_UNARY(round, CT__EW_ROUND)
CT__EW_UNARY(exp, CT__EW_EXP)
CT__EW_UNARY(log, CT__EW_LOG)
CT__EW_UNARY(sqrt, CT__EW_SQRT)
CT__EW_UNARY(rsqrt, CT__EW_RSQRT)
CT__EW_UNARY(sin, CT__EW_SIN)
CT__EW_UNARY(cos, CT__EW_COS)
CT__EW_UNARY(tanh, CT__EW_TANH)
CT__EW_UNARY(sigmoid, CT__EW_SIGMOID)
CT__EW_UNARY(gelu, CT__EW_GELU)

ct_status ct_where(ct_tensor **out, const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b) {
  return ct__ew_where("ct_where", out, NULL, false, cond, a, b);
}
ct_status ct_where_out(ct_tensor *out, const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b) {
  return ct__ew_where("ct_where_out", NULL, out, true, cond, a, b);
}
ct_status ct_clamp(ct_tensor **out, const ct_tensor *x, double lo, double hi) {
  return ct__ew_clamp("ct_clamp", out, NULL, false, x, lo, hi);
}
ct_status ct_clamp_out(ct_tensor *out, const ct_tensor *x, double lo, double hi) {
  return ct__ew_clamp("ct_clamp_out", NULL, out, true, x, lo, hi);
}
