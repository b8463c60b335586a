/* Elementwise ops: binary and unary math with broadcasting, comparisons, bitwise ops, where,
 * clamp. One table, src/elementwise/ops.def, lists them all (docs/ARCHITECTURE.md, "The
 * elementwise op table").
 *
 * Every op comes in two forms:
 *   ct_add(&out, a, b)       OUT: *out, a NEW contiguous tensor with the result (release it
 *                            with ct_release()); *out is NULL on failure.
 *   ct_add_out(out, a, b)    writes the result into an existing tensor (borrowed), which needs
 *                            exactly the result's shape and dtype and the inputs' device. out may
 *                            be a strided view (a slice, a transpose) and may be one of the inputs
 *                            element for element (a += b is ct_add_out(a, a, b)). It must not
 *                            have dims of stride 0 (expanded views) or partly overlap an input.
 *                            Nothing is allocated, so loops of _out calls cost only launches.
 * Inputs are borrowed and read in place whatever their layout: views, transposes and
 * broadcasts (ct_expand, stride 0) are not copied first.
 *
 * Broadcasting follows NumPy/PyTorch: shapes are aligned from the last dim; sizes must be equal
 * or 1; a 0-d tensor is a scalar. A dim of size 0 gives an empty result (no kernel runs).
 *
 * Result dtypes follow PyTorch's type promotion (torch.result_type); docs/OPS.md has the full
 * table. In short: bool < u8, i8 < i16 < i32 < i64 < f16, bf16 < f32 < f64, where mixing gives
 * the larger; u8 with i8 gives i16; f16 with bf16 gives f32. The storage dtypes u16, u32, u64
 * mix only with themselves and floats: with another integer or bool dtype there is no common
 * dtype (CT_ERR_DTYPE_MISMATCH, as PyTorch refuses). f16 and bf16 compute in f32 and round once
 * when stored. Operands are first converted to the result dtype, as PyTorch does.
 *
 * Ranking. Dimensioned tensors (ndim >= 1) decide the result dtype; a zero-dim tensor, and below
 * it a scalar, changes it only when of a higher category (bool < integer < float): f32[2] + f64
 * zero-dim is f32, u8[4] + i32 zero-dim is u8 (so u8 > (i32)-4 compares in u8, where -4 is 252),
 * i32[2] + f64 zero-dim is f64. This holds for every binary op, where (over a and b), clamp and
 * the tensor-scalar ops, and the _out forms.
 *
 * Scalars (double s). A finite s with an integral value in [-2^63, 2^63) counts as an integer
 * scalar (as Python's 2, dtype i64), anything else as a float scalar (2.5, NaN, inf; dtype f32).
 * A scalar never widens a tensor of its own category: i32 tensor + 2 is i32, f16 tensor * 2.5 is
 * f16 (the scalar enters the f32 computation unrounded). An integer scalar with a bool tensor
 * gives i64; a float scalar with a bool or integer tensor gives f32.
 *
 * One rule for scalars that don't fit (also ct_full, ct_arange, ct_clamp's bounds): a scalar an
 * integer compute dtype cannot represent is CT_ERR_INVALID_ARGUMENT naming the value and the
 * dtype ("ct_add_scalar: scalar 1000 cannot be converted to u8 without overflow", torch.full's
 * rule): integers hold finite values within their range (no NaN, no inf, no -1 in an unsigned
 * dtype). bool and the floats take every value (f16 * 1e6 is inf, as PyTorch). Comparisons are
 * exempt: they compare an integer scalar the compute dtype can't hold exactly (u8 < 300 is all
 * true). docs/OPS.md lists where PyTorch differs.
 *
 * Integers wrap modulo 2^bits (two's complement), as in PyTorch. No op traps on any device:
 * integer x // 0 and x % 0 give 0 (as NumPy), MIN // -1 wraps to MIN.
 *
 * Errors (checked in this order, before anything runs): CT_ERR_INVALID_ARGUMENT for a NULL
 * argument; CT_ERR_DEVICE_MISMATCH naming both devices; CT_ERR_SHAPE_MISMATCH naming both
 * shapes; CT_ERR_DTYPE_MISMATCH for an op that bool does not support (sub, neg, floor_divide,
 * remainder, fmod, trunc: PyTorch rejects them too), for bitwise ops on floats and leaky_relu on
 * integers, and for an out tensor of the wrong dtype;
 * CT_ERR_UNSUPPORTED for f64 on a device without cl_khr_fp64 (naming the device);
 * CT_ERR_INVALID_ARGUMENT for an out tensor with stride-0 dims or partly overlapping an input,
 * and for a scalar that doesn't fit; then CT_ERR_KERNEL_BUILD, CT_ERR_OPENCL or
 * CT_ERR_OUT_OF_MEMORY from the device.
 *
 * Accuracy: integer results are exact. add, sub, mul, div, sqrt, floor, ceil, round, maximum,
 * minimum, remainder, comparisons are correctly rounded (division and sqrt where the device
 * supports correctly rounded division, as every CPU does; elsewhere within OpenCL's 2.5 and 3
 * ulp); transcendental functions are within OpenCL 1.2's full-profile limits (docs/OPS.md gives
 * the bound of every op).
 *
 * Ops run asynchronously on the device's in-order queue: a call returns once the kernel is
 * enqueued, and ct_to_host() (or ct_device_synchronize()) waits for it.
 *
 * Thread safety: any thread may call these; an out tensor must not be used by another thread at
 * the same time. */
#ifndef CLTENSOR_ELEMENTWISE_H
#define CLTENSOR_ELEMENTWISE_H

#include "cltensor/dtype.h"
#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* OUT: *out, the dtype ct_add() gives for dimensioned tensors of dtypes a and b
 * (torch.promote_types: u8 + i8 -> i16). Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL out or an
 * invalid dtype; CT_ERR_DTYPE_MISMATCH where PyTorch has no common dtype (u16, u32 or u64 with
 * another integer or bool dtype). */
CT_API ct_status ct_promote_types(ct_dtype *out, ct_dtype a, ct_dtype b);

/* ---- Binary arithmetic: result dtype is the promoted dtype ---- */

/* a + b. bool + bool is logical or. */
CT_API ct_status ct_add(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_add_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* a - b. Not for bool (CT_ERR_DTYPE_MISMATCH; use ct_logical_* instead). */
CT_API ct_status ct_sub(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_sub_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* a * b. bool * bool is logical and. */
CT_API ct_status ct_mul(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_mul_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* True division a / b, as torch.div: bool and integer operands give f32 (they are converted to
 * f32 first), so 7 / 2 is 3.5 and x / 0 is inf or NaN, never a trap. */
CT_API ct_status ct_div(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_div_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* a ** b. Floats: OpenCL pow (within 16 ulp in f32), except that ct_pow_scalar with the
 * exponent 2, 3, -1 or -2 computes a * a, a * a * a, 1 / a or 1 / (a * a), as PyTorch's CPU
 * kernel does (same bits). Integers: exact with wrapping; a negative exponent gives 1 for
 * a == 1, +-1 for a == -1 and 0 otherwise (PyTorch's rule). bool: a or not b. */
CT_API ct_status ct_pow(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_pow_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* Larger / smaller of a and b; NaN if either is NaN (torch.maximum / torch.minimum). Between
 * equal values (-0.0 and +0.0) the first operand is returned. Gradient (autograd.h): to the
 * larger / smaller operand, split evenly where a == b, to both where either is NaN (PyTorch's). */
CT_API ct_status ct_maximum(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_maximum_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_minimum(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_minimum_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* floor(a / b) (torch.floor_divide) and the matching modulus a - b * floor(a / b), which has the
 * sign of b (torch.remainder, Python's %). Integers: x // 0 and x % 0 are 0; MIN // -1 is MIN.
 * Floats: IEEE results for a zero divisor (inf or NaN). Not for bool. Gradients: floor_divide's
 * is zero (PyTorch 2.15 raises "not implemented" instead); remainder's is g for a and
 * -g floor(a / b) for b (fmod's: -g trunc(a / b)). */
CT_API ct_status ct_floor_divide(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_floor_divide_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_remainder(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_remainder_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* C's fmod(a, b) (torch.fmod): a - b * trunc(a / b), with the sign of a; exact. Floats: NaN for
 * b == 0 or infinite a. Integers: a fmod 0 is 0 (PyTorch raises ZeroDivisionError on the CPU; a
 * device can't, so the result is 0, as for ct_remainder) and MIN fmod -1 is 0. Not for bool. */
CT_API ct_status ct_fmod(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_fmod_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* atan2(a, b) (torch.atan2): the angle of the point (b, a), in [-pi, pi]. Float rule: bool and
 * integer operands give f32. Within OpenCL's 6 ulp. */
CT_API ct_status ct_atan2(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_atan2_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);

/* ---- Bitwise ops: integer and bool operands (the promoted dtype); floats are
 * CT_ERR_DTYPE_MISMATCH, as in PyTorch. On bool they are logical and, or, xor, not. ---- */
CT_API ct_status ct_bitwise_and(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_bitwise_and_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_bitwise_or(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_bitwise_or_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_bitwise_xor(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_bitwise_xor_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
/* ~x (two's complement; u8 ~0 is 255); on bool, not x. */
CT_API ct_status ct_bitwise_not(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_bitwise_not_out(ct_tensor *out, const ct_tensor *x);

/* ---- Comparisons: bool results; operands compared in their promoted dtype; any comparison
 * with NaN is false except ne ---- */
CT_API ct_status ct_eq(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_eq_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_ne(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_ne_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_lt(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_lt_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_le(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_le_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_gt(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_gt_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_ge(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_ge_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);

/* ---- Logical ops: bool results; an element is true when nonzero (NaN is true, -0.0 false) ---- */
CT_API ct_status ct_logical_and(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_logical_and_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_logical_or(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_logical_or_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_logical_not(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_logical_not_out(ct_tensor *out, const ct_tensor *x);

/* ---- Tensor-scalar forms: "a op s" (see the scalar rules at the top). Comparisons with the
 * scalar on the left need no form of their own: s < a is ct_gt_scalar(a, s). ---- */
CT_API ct_status ct_add_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_add_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_sub_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_sub_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_mul_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_mul_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_div_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_div_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_pow_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_pow_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_maximum_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_maximum_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_minimum_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_minimum_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_floor_divide_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_floor_divide_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_remainder_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_remainder_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_eq_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_eq_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_ne_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_ne_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_lt_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_lt_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_le_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_le_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_gt_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_gt_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_ge_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_ge_scalar_out(ct_tensor *out, const ct_tensor *a, double s);

/* Reversed operands, "s op a", where the order matters: s - a, s / a, s ** a. For the other
 * orders (s // a, s % a) make s a tensor (ct_full with shape NULL, ndim 0) and broadcast it. */
CT_API ct_status ct_rsub_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_rsub_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_rdiv_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_rdiv_scalar_out(ct_tensor *out, const ct_tensor *a, double s);
CT_API ct_status ct_rpow_scalar(ct_tensor **out, const ct_tensor *a, double s);
CT_API ct_status ct_rpow_scalar_out(ct_tensor *out, const ct_tensor *a, double s);

/* ---- Unary ops that keep the dtype (integers and bool too) ----
 * neg: -x (integers wrap: -MIN is MIN; u8 wraps modulo 256; not for bool).
 * abs: |x| (abs(MIN) is MIN). relu: max(x, 0), NaN stays NaN, relu(-0.0) is +0.0.
 * floor, ceil, round: exact; round is half to even (torch.round); identity on integers.
 * Gradients at 0 (autograd.h): abs and relu give 0; floor, ceil, round, trunc and sign have a
 * zero gradient everywhere (PyTorch's zeros). */
CT_API ct_status ct_neg(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_neg_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_abs(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_abs_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_relu(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_relu_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_floor(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_floor_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_ceil(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_ceil_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_round(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_round_out(ct_tensor *out, const ct_tensor *x);
/* trunc: rounds toward zero (torch.trunc); the identity on integers; not for bool (as PyTorch). */
CT_API ct_status ct_trunc(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_trunc_out(ct_tensor *out, const ct_tensor *x);
/* sign: -1, 0 or 1 in x's dtype (torch.sign); NaN and -0.0 give 0; bool is the identity. */
CT_API ct_status ct_sign(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_sign_out(ct_tensor *out, const ct_tensor *x);

/* ---- Tests of float values: bool results (torch.isnan, torch.isinf, torch.isfinite). Integer
 * and bool tensors hold no NaN or infinity: isnan and isinf are all false, isfinite all true. ---- */
CT_API ct_status ct_isnan(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_isnan_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_isinf(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_isinf_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_isfinite(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_isfinite_out(ct_tensor *out, const ct_tensor *x);

/* ---- Unary float functions: bool and integer inputs give f32 (as torch.exp on an int tensor).
 * sigmoid is 1 / (1 + exp(-x)), computed so large negative x keep their tiny values; gelu is
 * the exact form x * (1 + erf(x / sqrt(2))) / 2 (PyTorch's default), computed through erfc. ---- */
CT_API ct_status ct_exp(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_exp_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_log(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_log_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_sqrt(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_sqrt_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_rsqrt(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_rsqrt_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_sin(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_sin_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_cos(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_cos_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_tanh(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_tanh_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_sigmoid(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_sigmoid_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_gelu(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_gelu_out(ct_tensor *out, const ct_tensor *x);
/* erf, log1p = log(1 + x) (accurate for small x), expm1 = exp(x) - 1 (accurate for small x),
 * tan, atan: OpenCL's builtins (within 16, 2, 3, 5 and 5 ulp in f32 and f64). */
CT_API ct_status ct_erf(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_erf_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_log1p(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_log1p_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_expm1(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_expm1_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_tan(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_tan_out(ct_tensor *out, const ct_tensor *x);
CT_API ct_status ct_atan(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_atan_out(ct_tensor *out, const ct_tensor *x);
/* silu: x * sigmoid(x) (torch.nn.functional.silu; PyTorch refuses integer tensors, here they
 * give f32 as every float function). */
CT_API ct_status ct_silu(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_silu_out(ct_tensor *out, const ct_tensor *x);
/* softplus: log(1 + exp(x)), and x itself where x > 20 (torch.nn.functional.softplus with its
 * defaults beta = 1, threshold = 20). */
CT_API ct_status ct_softplus(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_softplus_out(ct_tensor *out, const ct_tensor *x);
/* gelu_tanh: the tanh approximation GPT-2 uses, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * (torch.nn.functional.gelu(x, approximate='tanh')), computed as the equal
 * x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)), which keeps the tiny values of negative x that
 * PyTorch's form rounds away (so for x < -5 in f32 the two differ by up to 1e-6 absolute). */
CT_API ct_status ct_gelu_tanh(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_gelu_tanh_out(ct_tensor *out, const ct_tensor *x);
/* leaky_relu: x where x > 0, else x * slope (torch.nn.functional.leaky_relu(x, slope)); NaN
 * stays NaN. Floating dtypes only, keeping x's dtype (f16/bf16: slope enters the f32
 * computation unrounded); integer and bool tensors are CT_ERR_DTYPE_MISMATCH, as PyTorch.
 * Gradient: g where x > 0, g * slope elsewhere (x == 0 included, as PyTorch). */
CT_API ct_status ct_leaky_relu(ct_tensor **out, const ct_tensor *x, double slope);
CT_API ct_status ct_leaky_relu_out(ct_tensor *out, const ct_tensor *x, double slope);

/* ---- Selection ----
 * where: cond ? a : b elementwise, cond of any dtype (nonzero is true; PyTorch wants bool), all
 * three broadcast together; the result has a and b's promoted dtype. */
CT_API ct_status ct_where(ct_tensor **out, const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b);
CT_API ct_status ct_where_out(ct_tensor *out, const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b);
/* clamp: min(max(x, lo), hi). A NaN bound means "no bound" (so ct_clamp(&y, x, 0, NAN) is
 * clamp_min), at least one must be given (CT_ERR_INVALID_ARGUMENT otherwise). The bounds take
 * part in type promotion like scalars (i32 x with bound 0.5 gives f32); a bound the result
 * dtype can't hold is CT_ERR_INVALID_ARGUMENT (the scalar rule above; it saturated before).
 * NaN x stays NaN; lo > hi gives hi everywhere. Gradient (autograd.h): g strictly between the
 * given bounds, 0 at a bound, beyond it and at NaN x (PyTorch 2.15's clamp with Scalar bounds;
 * earlier releases passed g at the bounds as well). */
CT_API ct_status ct_clamp(ct_tensor **out, const ct_tensor *x, double lo, double hi);
CT_API ct_status ct_clamp_out(ct_tensor *out, const ct_tensor *x, double lo, double hi);

CT_END_DECLS

#endif
