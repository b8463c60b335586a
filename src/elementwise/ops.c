/* The public elementwise ops: argument checks, result dtypes, then one launch each. */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"
#include "elementwise/elementwise.h"
#include "fusion/hooks.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* How an op's result dtype follows from its operands' promoted dtype T (ops.def's rule column). */
enum ct__ew_rule {
  CT__EW_R_PROMOTE, /* T */
  CT__EW_R_FLOAT,   /* T if floating, else f32 (true division, float functions) */
  CT__EW_R_BOOL,    /* bool, computed in T (comparisons, logical ops, isnan, ...) */
  CT__EW_R_INT,     /* T, an integer or bool dtype (bitwise ops) */
  CT__EW_R_FLTONLY, /* T, a floating dtype (leaky_relu) */
};

/* The public forms of a row (ops.def's kind column); the wrappers below are generated per kind. */
enum ct__ew_kind {
  CT__EW_K_BIN,
  CT__EW_K_BINS,
  CT__EW_K_BINSR,
  CT__EW_K_UN,
  CT__EW_K_UNP,
  CT__EW_K_WHERE,
  CT__EW_K_CLAMP,
};

static const struct {
  enum ct__ew_rule rule;
  enum ct__ew_kind kind;
  bool no_bool; /* PyTorch rejects these for bool too: they have no boolean meaning */
  const char *fn;  /* the kernel function */
  int saves; /* autograd: 0 never differentiable, else CT__EW_SAVES_* bits (ops.def's bwd) */
} ct__ew_info[CT__EW_OP_COUNT] = {
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) \
  [CT__EW_##NAME] = {CT__EW_R_##rule, CT__EW_K_##kind, no_bool, #fn, CT__EW_SAVES_##bwd},
#include "elementwise/ops.def"
#undef CT__EW_OP
};

int ct__ew_saves(enum ct__ew_op op) { return (unsigned)op < CT__EW_OP_COUNT ? ct__ew_info[op].saves : 0; }

/* Records the backward node of a new result r (tensor/graph.h), when an input requires grad. */
static ct_status ct__ew_record(const char *fn, const struct ct__ew_launch *l, ct_tensor *r) {
  int saves = ct__ew_info[l->op].saves;
  if (!saves) return CT_OK;
  ct__node *n = NULL;
  CT__TRY(ct__grad_record(&n, r, CT__GOP_EW, (int)l->op, l->nin, l->in, fn));
  if (!n) return CT_OK;
  ct__rec_ew *rec = ct__rec_EW(n);
  rec->spos = l->spos;
  rec->has_lo = l->has_lo;
  rec->has_hi = l->has_hi;
  rec->scalar = l->sd[0];
  rec->hi = l->sd[1];
  const ct_tensor **ins[3] = {&rec->a, &rec->b, &rec->c};
  for (int i = 0; i < l->nin && i < 3 && (saves & CT__EW_SAVES_IN_BIT); i++)
    CT__TRY(ct__grad_save_as(n, ins[i], l->in[i], fn));
  if (saves & CT__EW_SAVES_OUT_BIT) CT__TRY(ct__grad_save_as(n, &rec->out, r, fn));
  return CT_OK;
}

const char *ct__ew_op_fn(enum ct__ew_op op) {
  return (unsigned)op < CT__EW_OP_COUNT ? ct__ew_info[op].fn : "INVALID";
}

int ct__ew_pow_special(const struct ct__ew_launch *l) {
  if (l->op != CT__EW_POW || l->spos != 2 || !ct_dtype_is_floating_point(l->k)) return 0;
  double e = l->sd[0];
  return e == 2 ? 1 : e == 3 ? 2 : e == -1 ? 3 : e == -2 ? 4 : 0;
}

const char *ct__ew_launch_fn(const struct ct__ew_launch *l) {
  static const char *const special[] = {NULL, "ew_powi2", "ew_powi3", "ew_powim1", "ew_powim2"};
  int sp = ct__ew_pow_special(l);
  return sp ? special[sp] : ct__ew_op_fn(l->op);
}

int ct__ew_op_nparams(enum ct__ew_op op) {
  if ((unsigned)op >= CT__EW_OP_COUNT) return 0;
  return ct__ew_info[op].kind == CT__EW_K_CLAMP ? 2 : ct__ew_info[op].kind == CT__EW_K_UNP ? 1 : 0;
}

/* The common (compute) dtype *k and the result dtype *o of op on operands promoting to t. */
static ct_status ct__ew_types(const char *fn, enum ct__ew_op op, ct_dtype t, ct_dtype *k, ct_dtype *o) {
  switch (ct__ew_info[op].rule) {
  case CT__EW_R_PROMOTE: *k = *o = t; break;
  case CT__EW_R_FLOAT: *k = *o = ct__ew_float_of(t); break;
  case CT__EW_R_BOOL: *k = t; *o = CT_BOOL; break;
  case CT__EW_R_INT:
    *k = *o = t;
    if (ct_dtype_is_floating_point(t))
      return ct__error(CT_ERR_DTYPE_MISMATCH,
                       "%s: not defined for floating dtype %s (as in PyTorch): bitwise ops take integer and bool "
                       "tensors",
                       fn, ct_dtype_name(t));
    break;
  case CT__EW_R_FLTONLY:
    *k = *o = t;
    if (!ct_dtype_is_floating_point(t))
      return ct__error(CT_ERR_DTYPE_MISMATCH,
                       "%s: not defined for %s tensors (as in PyTorch): it takes floating dtypes; ct_cast to f32 "
                       "first",
                       fn, ct_dtype_name(t));
    break;
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
    /* Recorded by the fusion graph (fusion/hooks.h), which runs what it can't record. */
    ct_status st = ct__deferred_elementwise(fn, l, *outp);
    if (st == CT_OK) st = ct__ew_record(fn, l, *outp);
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
  CT__TRY(ct__grad_check_out(fn, l->nin, l->in, names));
  CT__TRY(ct__grad_check_inplace(fn, out, "out"));
  ct__tensor_bump_version(out);
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
  } else if (!ct_dtype_is_floating_point(l.k) && ct__dtype_check_scalar(s, l.k, fn, "scalar") != CT_OK) {
    /* Comparisons compare an integer scalar the compute dtype can't hold exactly, in i64 (u64
     * against a negative scalar in f32, where the order of any u64 and any negative number
     * holds). The check's message is dropped with its status. */
    l.k = l.k == CT_U64 ? CT_F32 : CT_I64;
  }
  l.s[0] = ct__ew_make_scalar(l.k, s);
  l.sd[0] = s;
  static const char *const names[] = {"a"};
  return ct__ew_finish(fn, &l, o, a->ndim, a->shape, into ? NULL : outp, out, names);
}

/* np: the op's parameters p[] (leaky_relu's slope), converted to the compute dtype. */
static ct_status ct__ew_unary(const char *fn, enum ct__ew_op op, ct_tensor **outp, ct_tensor *out, bool into,
                              const ct_tensor *x, int np, const double *p) {
  CT__TRY(ct__ew_check_dest(fn, outp, out, into, x, "x"));
  struct ct__ew_launch l = {.op = op, .nin = 1, .in = {x}};
  ct_dtype o = CT_F32; /* set by ct__ew_types on success */
  CT__TRY(ct__ew_types(fn, op, x->dtype, &l.k, &o));
  for (int i = 0; i < np; i++) {
    l.s[i] = ct__ew_make_scalar(l.k, p[i]);
    l.sd[i] = p[i];
  }
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
  l.sd[0] = lo;
  l.sd[1] = hi;
  static const char *const names[] = {"x"};
  return ct__ew_finish(fn, &l, o, x->ndim, x->shape, into ? NULL : outp, out, names);
}

/* ---- the public functions ---- */

/* One macro per kind (ops.def's kind column) generates a row's public functions. */
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

#define CT__EW_PUBLIC_BIN(name, OP) CT__EW_BINARY(name, OP)
#define CT__EW_PUBLIC_BINS(name, OP) CT__EW_BINARY(name, OP) CT__EW_SCALAR(name##_scalar, OP, 2)
#define CT__EW_PUBLIC_BINSR(name, OP) CT__EW_PUBLIC_BINS(name, OP) CT__EW_SCALAR(r##name##_scalar, OP, 1)

#define CT__EW_PUBLIC_UN(name, OP)                                                               \
  ct_status ct_##name(ct_tensor **out, const ct_tensor *x) {                                     \
    return ct__ew_unary("ct_" #name, OP, out, NULL, false, x, 0, NULL);                          \
  }                                                                                              \
  ct_status ct_##name##_out(ct_tensor *out, const ct_tensor *x) {                                \
    return ct__ew_unary("ct_" #name "_out", OP, NULL, out, true, x, 0, NULL);                    \
  }

#define CT__EW_PUBLIC_UNP(name, OP)                                                              \
  ct_status ct_##name(ct_tensor **out, const ct_tensor *x, double p) {                           \
    return ct__ew_unary("ct_" #name, OP, out, NULL, false, x, 1, &p);                            \
  }                                                                                              \
  ct_status ct_##name##_out(ct_tensor *out, const ct_tensor *x, double p) {                      \
    return ct__ew_unary("ct_" #name "_out", OP, NULL, out, true, x, 1, &p);                      \
  }

/* where and clamp are written out below. */
#define CT__EW_PUBLIC_WHERE(name, OP)
#define CT__EW_PUBLIC_CLAMP(name, OP)

#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) CT__EW_PUBLIC_##kind(name, CT__EW_##NAME)
#include "elementwise/ops.def"
#undef CT__EW_OP

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
