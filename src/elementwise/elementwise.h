/* Elementwise internals: the op list, type promotion, and the launcher other areas may reuse. */
#ifndef CT_ELEMENTWISE_ELEMENTWISE_H
#define CT_ELEMENTWISE_ELEMENTWISE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cltensor/elementwise.h"

/* The ops, one per row of ops.def (the table that drives the rules, the public wrappers, the
 * kernel functions and the test loops). */
enum ct__ew_op {
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) CT__EW_##NAME,
#include "elementwise/ops.def"
#undef CT__EW_OP
  CT__EW_OP_COUNT
};

/* The kernel function that computes op ("ew_add"), which the kernel calls through -DEW_FN. */
const char *ct__ew_op_fn(enum ct__ew_op op);

/* The parameters op takes after its operands (s[0], s[1] of the launch): 1 for leaky_relu's
 * slope, 2 for clamp's bounds, else 0. */
int ct__ew_op_nparams(enum ct__ew_op op);

/* ---- Type promotion (promote.c; pure, no OpenCL) ---- */

/* torch.promote_types for valid dtypes (u8 + i8 -> i16, f16 + bf16 -> f32); u16, u32 and u64
 * with another integer or bool dtype are CT_ERR_DTYPE_MISMATCH naming fn, as PyTorch refuses. */
ct_status ct__ew_promote(ct_dtype *out, ct_dtype a, ct_dtype b, const char *fn);

/* True when s counts as an integer scalar (Python's int): finite, integral, within [-2^63, 2^63);
 * any other s is a float scalar. */
bool ct__ew_scalar_is_int(double s);

/* torch.result_type of n tensors t[] and ns scalars s[]: the dimensioned tensors' promoted dtype,
 * which zero-dim tensors and then scalars change only when of a higher category (bool < integer
 * < float); an integer scalar counts as i64, a float one as f32 (PyTorch's default dtype). */
ct_status ct__ew_result_type(ct_dtype *out, int n, const ct_tensor *const *t, int ns, const double *s,
                             const char *fn);

/* t itself when floating, else f32 (true division, unary float functions). */
ct_dtype ct__ew_float_of(ct_dtype t);

/* ---- Launching (launch.c) ---- */

/* A scalar already converted to the compute type of the common dtype. */
typedef union ct__ew_scalar {
  uint8_t u8;
  int8_t i8;
  int16_t i16;
  uint16_t u16;
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f32;
  double f64;
} ct__ew_scalar;

/* Converts s to the compute type of common dtype k (f16 and bf16 compute in f32; integers
 * must have been range-checked, ct__dtype_check_scalar). */
ct__ew_scalar ct__ew_make_scalar(ct_dtype k, double s);

/* One elementwise launch: out[i] = op(in[0][i], in[1][i], ...) over out's shape, each input
 * broadcast to it. in[] are nin tensors (3 for where: cond, a, b); k is the common dtype the
 * value inputs are converted to, out must have the result dtype. spos: 0 for none, 2 when the
 * second operand is scalar s[0], 1 when the first is. An op's parameters (ct__ew_op_nparams) are
 * s[0], s[1]; clamp: has_lo/has_hi say which of its bounds s[0]/s[1] are given.
 * Shapes, devices and dtypes must have been checked; this collapses the geometry, fetches the
 * cached kernel and enqueues it (no wait). */
/* ops.def's bwd column as bits: what an op's backward node saves (autograd, issue #15). */
enum {
  CT__EW_SAVES_0 = 0,          /* never differentiable: records nothing */
  CT__EW_SAVES_DIFF = 1,       /* differentiable */
  CT__EW_SAVES_IN_BIT = 2,     /* saves the inputs (the record's a, b, c) */
  CT__EW_SAVES_OUT_BIT = 4,    /* saves the result (the record's out) */
  CT__EW_SAVES_S_NONE = 1,
  CT__EW_SAVES_S_IN = 3,
  CT__EW_SAVES_S_OUT = 5,
  CT__EW_SAVES_S_INOUT = 7,
};
/* The node an elementwise op records: sub = the op; inputs as the launch's (where: cond, a, b;
 * scalar forms: the one tensor); its record (ct__rec_ew, tensor/grad_records.h) the saved
 * tensors, spos, clamp's has_lo and has_hi, and the scalar, the parameter, or clamp's bounds as
 * given. */
int ct__ew_saves(enum ct__ew_op op);

struct ct__ew_launch {
  enum ct__ew_op op;
  int nin;
  const ct_tensor *in[3];
  ct_dtype k;
  int spos;
  bool has_lo, has_hi;
  ct__ew_scalar s[2];
  double sd[2]; /* the same scalars as given (autograd records them) */
};
ct_status ct__ew_run(const char *fn, const struct ct__ew_launch *l, ct_tensor *out);
/* pow with a float scalar exponent of 2, 3, -1 or -2 runs as x * x, x * x * x, 1 / x and
 * 1 / (x * x), as PyTorch's CPU kernel does: exact or one or two roundings, where OpenCL's pow
 * is within 16 ulp and costs 50-250 ns an element on PoCL (GELU written out with x ** 3).
 * ct__ew_pow_special: 1-4 for those exponents, else 0; ct__ew_launch_fn: the function the
 * kernel calls for l (ew_powi2, ... or the op's own, ct__ew_op_fn). */
int ct__ew_pow_special(const struct ct__ew_launch *l);
const char *ct__ew_launch_fn(const struct ct__ew_launch *l);

/* The build options every elementwise program of d takes (EW_SOFT16, correctly rounded
 * division), which fused programs take too so that their bits are the per-op kernels'. */
ct_status ct__ew_device_options(const char **opts, ct_device *d);
/* Bytes of a scalar kernel argument of compute dtype k (f16/bf16 compute in float). */
size_t ct__ew_scalar_size(ct_dtype k);

/* Tests set this to 1 to give a CPU device the kernels a GPU gets (f16 through the half
 * builtins, EW_SOFT16=0; one element per work-item on strided rows, EW_SPER=1; no vector path;
 * work-group sizes stay the device's, from the engine), so those paths are tested wherever the tests run, as
 * ct__reduce_gpu_layout does for reductions. Read once per device, when its first elementwise
 * op runs; not for applications. */
extern int ct__ew_gpu_paths;

/* Checks an _out destination against the inputs before writing: no stride-0 dims of size > 1,
 * and no partial overlap with an input (exact element-for-element aliasing is fine). */
ct_status ct__ew_check_out_overlap(const char *fn, const ct_tensor *out, int nin, const ct_tensor *const *in,
                                   const char *const *names);

#endif
