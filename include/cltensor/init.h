/* Weight initializers (torch.nn.init): fill an existing tensor in place.
 *
 *   ct_tensor *w;                                     // e.g. [out, in] or [out, in, kh, kw]
 *   ct_empty(&w, dev, CT_F32, 2, (int64_t[]){128, 64});
 *   ct_kaiming_uniform_(w, 0.0, CT_FAN_IN, CT_NONLINEARITY_RELU);
 *
 * Every initializer writes t's elements in place (t may be a non-contiguous view, not an
 * expanded one), records nothing for autograd and runs with grad mode off, as torch.nn.init's
 * functions run under torch.no_grad(): a leaf that requires grad is initialized directly and
 * stays a leaf that requires grad. The write bumps t's version (autograd.h), so a graph that
 * saved t before refuses to backpropagate.
 *
 * Random bits. The random initializers draw from the library's Philox generator and its global
 * (seed, offset) state (random.h): each call takes one offset, as one ct_rand()/ct_randn() does
 * (after ct_manual_seed(s) the same program initializes the same values on every device). The
 * draws are made in f32 (f64 for an f64 t), the arithmetic done in that dtype, and the result
 * rounded once into t's dtype (f16, bf16, f32, f64). Values are not PyTorch's bits (a different
 * generator), but the same distributions with PyTorch's parameters.
 *
 * Fans and gains follow torch.nn.init exactly:
 *   fan_in  = shape[1] * receptive field, fan_out = shape[0] * receptive field, where the
 *             receptive field is the product of shape[2:] (1 for a 2-D t); t needs >= 2 dims
 *             (PyTorch's "Fan in and fan out can not be computed for tensor with fewer than 2
 *             dimensions");
 *   gain    = calculate_gain(nonlinearity, param): 1 for linear, the convolutions and sigmoid;
 *             5/3 for tanh; sqrt(2) for relu; sqrt(2 / (1 + slope^2)) for leaky_relu (slope =
 *             param, 0.01 when param is NaN, PyTorch's None); 3/4 for selu.
 *
 * Statuses (all functions): CT_OK; CT_ERR_INVALID_ARGUMENT (t NULL, an expanded t, a bound,
 * std or gain that is not finite, b < a, std < 0, gain < 0, fewer than 2 dims where a fan is
 * needed, a mode or nonlinearity outside its enum); CT_ERR_DTYPE_MISMATCH (a random initializer on a t that is not
 * floating); CT_ERR_UNSUPPORTED (f64 without cl_khr_fp64); CT_ERR_OUT_OF_MEMORY (a temporary of
 * t's size in the draw dtype); CT_ERR_OPENCL; CT_ERR_KERNEL_BUILD. On failure t is unchanged
 * unless the device failed during the final copy. A tensor with no elements is left alone (CT_OK
 * after the argument checks; PyTorch warns and returns), and takes no offset.
 *
 * Thread safety: as ct_copy() into t (t must not be used by another thread meanwhile). */
#ifndef CLTENSOR_INIT_H
#define CLTENSOR_INIT_H

#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* Which fan kaiming's std divides by (PyTorch's mode=). CT_FAN_IN, the zero value, is PyTorch's
 * default: it preserves the forward pass's variance; CT_FAN_OUT the backward pass's. */
typedef enum ct_fan_mode {
  CT_FAN_IN = 0,
  CT_FAN_OUT = 1
} ct_fan_mode;

/* The nonlinearity a gain is computed for (PyTorch's nonlinearity= strings). The zero value,
 * CT_NONLINEARITY_LEAKY_RELU, is kaiming's default in PyTorch ('leaky_relu'). */
typedef enum ct_nonlinearity {
  CT_NONLINEARITY_LEAKY_RELU = 0,
  CT_NONLINEARITY_LINEAR,
  CT_NONLINEARITY_CONV1D,
  CT_NONLINEARITY_CONV2D,
  CT_NONLINEARITY_CONV3D,
  CT_NONLINEARITY_CONV_TRANSPOSE1D,
  CT_NONLINEARITY_CONV_TRANSPOSE2D,
  CT_NONLINEARITY_CONV_TRANSPOSE3D,
  CT_NONLINEARITY_SIGMOID,
  CT_NONLINEARITY_TANH,
  CT_NONLINEARITY_RELU,
  CT_NONLINEARITY_SELU
} ct_nonlinearity;

/* OUT: *gain, torch.nn.init.calculate_gain(nl, param) (see the top; param is read for
 * leaky_relu only, NaN meaning PyTorch's None, a slope of 0.01). CT_ERR_INVALID_ARGUMENT for a
 * NULL gain, an nl outside the enum, or an infinite slope. */
CT_API ct_status ct_calculate_gain(double *gain, ct_nonlinearity nl, double param);

/* OUT: *fan_in and *fan_out (either may be NULL) of t's shape, as
 * torch.nn.init._calculate_fan_in_and_fan_out. CT_ERR_INVALID_ARGUMENT for a NULL t or fewer
 * than 2 dims. Reads the shape only. */
CT_API ct_status ct_calculate_fan_in_and_fan_out(int64_t *fan_in, int64_t *fan_out, const ct_tensor *t);

/* t ~ U[a, b): a + (b - a) * u with u from ct_rand (torch.nn.init.uniform_; a <= b, both finite). */
CT_API ct_status ct_uniform_(ct_tensor *t, double a, double b);
/* t ~ N(mean, std^2): mean + std * z with z from ct_randn (torch.nn.init.normal_; std >= 0). */
CT_API ct_status ct_normal_(ct_tensor *t, double mean, double std);
/* t ~ N(mean, std^2) truncated to [a, b] (torch.nn.init.trunc_normal_, PyTorch's inverse-CDF
 * method): u ~ U(2 Phi(alpha) - 1, 2 Phi(beta) - 1) with alpha = (a - mean) / std, beta =
 * (b - mean) / std, then mean + std sqrt(2) erfinv(u), clamped to [a, b]. std > 0, a < b. The
 * uniforms come from ct_rand (f64 for an f64 t, else f32); the inverse error function is
 * computed on the host in double (the library has no erfinv op, and initialization runs once),
 * so this one reads t's size back and writes it again. */
CT_API ct_status ct_trunc_normal_(ct_tensor *t, double mean, double std, double a, double b);
/* t ~ U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out))
 * (torch.nn.init.xavier_uniform_; PyTorch's default gain is 1). */
CT_API ct_status ct_xavier_uniform_(ct_tensor *t, double gain);
/* t ~ N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)) (torch.nn.init.xavier_normal_). */
CT_API ct_status ct_xavier_normal_(ct_tensor *t, double gain);
/* t ~ U(-bound, bound), bound = sqrt(3) * gain / sqrt(fan), gain = calculate_gain(nl, a), fan
 * by mode (torch.nn.init.kaiming_uniform_; PyTorch's defaults are a = 0, CT_FAN_IN,
 * CT_NONLINEARITY_LEAKY_RELU, so all-zero arguments give them). nn.Linear and nn.Conv*d
 * initialize their weights with a = sqrt(5). */
CT_API ct_status ct_kaiming_uniform_(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nl);
/* t ~ N(0, std^2), std = gain / sqrt(fan) (torch.nn.init.kaiming_normal_; arguments as above). */
CT_API ct_status ct_kaiming_normal_(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nl);
/* t = 0 and t = 1 (torch.nn.init.zeros_ / ones_): any dtype; no random bits. */
CT_API ct_status ct_zeros_(ct_tensor *t);
CT_API ct_status ct_ones_(ct_tensor *t);

CT_END_DECLS

#endif
