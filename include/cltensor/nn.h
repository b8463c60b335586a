/* libcltensor: nn ops (filled in by issue #14). */
#ifndef CLTENSOR_NN_H
#define CLTENSOR_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/dtype.h"
#include "cltensor/device.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* ---- convolution, pooling, normalization ----
 * Images are NCHW ([N, C, H, W], or unbatched [C, H, W]), sequences NCL ([N, C, L] or [C, L]).
 * Floats only: f32, f64 (devices with fp64), f16 and bf16 (stored as such, computed in f32 and
 * rounded once, as PyTorch's CPU kernels do). Every function returns a new tensor in *out
 * (release it with ct_release), borrows its inputs, sets *out = NULL on failure and reads
 * strided inputs as they are unless its comment says it copies. Statuses: CT_OK;
 * CT_ERR_INVALID_ARGUMENT (NULL, a bad size, stride, padding, dim); CT_ERR_SHAPE_MISMATCH (ranks,
 * channels, parameter shapes); CT_ERR_DTYPE_MISMATCH (non-float or mixed dtypes);
 * CT_ERR_DEVICE_MISMATCH; CT_ERR_UNSUPPORTED (f64 without fp64); CT_ERR_OUT_OF_MEMORY;
 * CT_ERR_OPENCL; CT_ERR_KERNEL_BUILD. */

/* 2-D convolution (torch.nn.functional.conv2d): x [N, Cin, H, W] or [Cin, H, W], w
 * [Cout, Cin / groups, kh, kw], bias NULL or [Cout]; stride, padding, dilation as {h, w}
 * (stride and dilation >= 1, padding >= 0; NULL means {1, 1}, {0, 0}, {1, 1}); groups >= 1
 * dividing Cin and Cout. Out: [N, Cout, OH, OW] (or [Cout, OH, OW]) with
 * OH = (H + 2 ph - dh (kh - 1) - 1) / sh + 1. Sizes are computed in checked arithmetic: a
 * dilated kernel dh (kh - 1) + 1 past int64 is CT_ERR_SHAPE_MISMATCH (larger than any input),
 * w.shape[1] * groups past int64 too; every dim, and the padded input H + 2 ph, W + 2 pw, must
 * be at most 2^31 - 1, and the unfolded input (Cin kh kw by OH OW, 8 bytes an element) must fit
 * int64, else CT_ERR_INVALID_ARGUMENT. x, w and bias share one float dtype; integer
 * dtypes give CT_ERR_DTYPE_MISMATCH (PyTorch's CPU refuses them as well). Three paths
 * (docs/OPS.md, "How conv runs"): on CPU devices, a register-blocked kernel over a zero-padded
 * f32 copy of x for stride-1 f32/f16/bf16 convs (unless both fewer than 8 output channels per
 * group and at most 16 products per output, e.g. depthwise); a direct kernel for convs with few
 * products per output; otherwise im2col plus the library's GEMM (the device's GEMM route: the
 * host BLAS on PoCL, else CLBlast). The last two work a few images at a time, so their
 * buffers stay within 64 MiB (or one image's). A non-contiguous w is copied (it is small); x is
 * read through its strides. Differentiable with respect to x, w and bias (autograd.h). Under
 * ct_autocast_set_dtype(CT_F16 or CT_BF16), f32/f16/bf16 x, w and bias are cast to that dtype (casts
 * that record their backward; f64 is left alone, as torch.autocast) and the result has it. */
CT_API ct_status ct_conv2d(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                           const int stride[2], const int padding[2], const int dilation[2], int groups);

/* 1-D convolution (torch.nn.functional.conv1d): x [N, Cin, L] or [Cin, L], w [Cout, Cin / groups, k],
 * bias NULL or [Cout]. ct_conv2d over a height of 1; the same rules, statuses, gradients and
 * autocast. */
CT_API ct_status ct_conv1d(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                           int stride, int padding, int dilation, int groups);

/* 2-D max pooling (F.max_pool2d, ceil_mode false, dilation 1): kernel {kh, kw} >= 1; stride
 * NULL means the kernel size (PyTorch's default), else >= 1; padding NULL means {0, 0}, else at
 * most half the kernel (PyTorch's rule); padded positions never win. A NaN in a window makes
 * that output NaN (as PyTorch). x [N, C, H, W] or [C, H, W]; each spatial dim padded must
 * hold one window. Differentiable: each window's gradient goes to its first maximum (the last
 * NaN when it holds NaNs), as PyTorch's max_pool2d_with_indices; the average pools are too. */
CT_API ct_status ct_max_pool2d(ct_tensor **out, const ct_tensor *x, const int kernel[2], const int stride[2],
                               const int padding[2]);

/* 2-D average pooling (F.avg_pool2d with its defaults: count_include_pad true, ceil_mode
 * false): every window divides by kh * kw, padded zeros included. Arguments as ct_max_pool2d. */
CT_API ct_status ct_avg_pool2d(ct_tensor **out, const ct_tensor *x, const int kernel[2], const int stride[2],
                               const int padding[2]);

/* 1-D max pooling (F.max_pool1d with all its arguments): x [N, C, L] or [C, L]; kernel >= 1;
 * stride >= 1, or 0 for the kernel size (PyTorch's stride=None); 0 <= padding <= kernel / 2;
 * dilation >= 1 (the window's elements dilation apart); ceil_mode rounds the output size up
 * (PyTorch's rule: L_out = floor((L + 2 padding - dilation (kernel - 1) - 1 [+ stride - 1 with
 * ceil_mode]) / stride) + 1, one fewer when ceil_mode's last window would start past the input
 * and the left padding). Computed as PyTorch computes it: x viewed as [N, C, 1, L], pooled in
 * 2-D with a window of height 1 (the same kernel as ct_max_pool2d), and squeezed back; the NaN
 * and gradient rules of ct_max_pool2d (each window's gradient to its first maximum), recorded
 * through the two views (grad_fn SqueezeBackward1, as PyTorch's). No window fits:
 * CT_ERR_SHAPE_MISMATCH; other argument errors: CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_max_pool1d(ct_tensor **out, const ct_tensor *x, int kernel, int stride, int padding, int dilation,
                               bool ceil_mode);
/* 1-D average pooling (F.avg_pool1d with all its arguments): kernel, stride, padding and
 * ceil_mode as ct_max_pool1d's (no dilation, as PyTorch's); count_include_pad true divides each
 * window by its size within the padded input (kernel but for ceil_mode's last windows), false by
 * the number of input elements it covers. Through the 2-D kernel as ct_max_pool1d; the gradient
 * of each window is spread over its elements with the same divisor. */
CT_API ct_status ct_avg_pool1d(ct_tensor **out, const ct_tensor *x, int kernel, int stride, int padding, bool ceil_mode,
                               bool count_include_pad);

/* Adaptive average pooling (F.adaptive_avg_pool2d) to size {OH, OW} (each >= 0; an empty
 * input dim can only give an empty output dim): output (i, j) averages rows
 * [floor(i H / OH), ceil((i + 1) H / OH)) and the same for columns, PyTorch's windows.
 * x [N, C, H, W] or [C, H, W]. OH H + OH (and OW W + OW) must fit int64, else
 * CT_ERR_INVALID_ARGUMENT (only an expanded x comes near). */
CT_API ct_status ct_adaptive_avg_pool2d(ct_tensor **out, const ct_tensor *x, const int64_t size[2]);

/* Layer normalization (F.layer_norm) over x's last nnorm dims (1 <= nnorm <= ndim):
 * y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance; weight and bias
 * NULL or of shape x.shape[-nnorm:] and x's dtype. eps >= 0 (PyTorch's default 1e-5).
 * Differentiable with respect to x, weight and bias (autograd.h): the backward recomputes each
 * row's mean and rstd from the saved x (one kernel per row, one for the parameters). Under
 * autocast (ct_autocast_set_dtype) f16/bf16 x, weight and bias are cast to f32 and the result is f32,
 * as torch.autocast's fp32 list; ct_rms_norm likewise. */
CT_API ct_status ct_layer_norm(ct_tensor **out, const ct_tensor *x, int nnorm, const ct_tensor *weight,
                               const ct_tensor *bias, double eps);

/* RMS normalization (F.rms_norm): y = x / sqrt(mean(x^2) + eps) * weight over the last nnorm
 * dims; weight NULL or of shape x.shape[-nnorm:]. eps NaN means PyTorch's default,
 * torch.finfo(x.dtype).eps (2^-23 for f32, 2^-52 for f64, 2^-10 for f16, 2^-7 for bf16).
 * Differentiable with respect to x and weight (the f16/bf16 rounding of the normalized value
 * before the weight is not differentiated, as PyTorch). */
CT_API ct_status ct_rms_norm(ct_tensor **out, const ct_tensor *x, int nnorm, const ct_tensor *weight, double eps);

/* Batch normalization (F.batch_norm) of x [N, C, ...] (at least 2 dims) per channel C.
 * training: normalizes with the batch's mean and biased variance over N and the trailing dims,
 * and, when given, updates running_mean and running_var IN PLACE:
 * running = (1 - momentum) * running + momentum * stat, the variance with the unbiased batch
 * variance (as PyTorch). Training needs more than one value per channel (N times the trailing
 * sizes), with or without running stats: CT_ERR_INVALID_ARGUMENT otherwise, as PyTorch. Eval (training false): normalizes with running_mean and running_var, which are
 * then required. running stats, weight and bias: NULL or [C], contiguous, of one float dtype
 * (x's, or f32 for f16/bf16 x as PyTorch's mixed mode); the running stats are written, so in
 * training they must not be views that overlap x or each other, nor expanded views (stride 0 on
 * a dim of size > 1): CT_ERR_INVALID_ARGUMENT.
 * Differentiable with respect to x, weight and bias: in training through the batch statistics
 * (PyTorch's backward), in eval an affine map with the running statistics as constants. The
 * running statistics take no gradient; in training, grad mode on, a running stat that requires
 * grad is CT_ERR_INVALID_ARGUMENT (it is written in place). Under autocast, f16/bf16 x, weight
 * and bias are cast to f32 (result f32) when the running stats are f32 or NULL. */
CT_API ct_status ct_batch_norm(ct_tensor **out, const ct_tensor *x, ct_tensor *running_mean,
                               ct_tensor *running_var, const ct_tensor *weight, const ct_tensor *bias,
                               bool training, double momentum, double eps);
/* ---- attention, dropout, losses ---- */

/* OUT: *out, scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention,
 * its math backend): softmax(q k^T * scale + mask) v.
 *   q [..., L, E], k [..., S, E], v [..., S, Ev]; the leading dims broadcast (NumPy rules)
 *   into the batch shape B, and the result is [B..., L, Ev].
 *   mask  NULL; or bool, true where a query may attend a key; or a float tensor (any float
 *         dtype) added to the scaled scores (-inf masks). Either broadcasts to [B..., L, S];
 *         its batch dims join B (PyTorch requires them to fit q's).
 *   causal  query i attends keys j <= i only (top-left aligned, as PyTorch's is_causal, also
 *         when L != S); combines with mask.
 *   scale  NaN means 1 / sqrt(E).
 * A query row whose every key is masked gives zeros, not NaN (PyTorch 2.15's rule).
 * Differentiable with respect to q, k, v and a float mask (its gradient is that of the scaled
 * scores, summed to the mask's shape); a bool mask takes none; a fully masked row gives zero
 * gradients. The backward keeps the probabilities (B * L * S elements of the compute dtype).
 * Under autocast q, k and v (f16, bf16, f32; not f64) are cast to the autocast dtype, so the
 * result has that dtype (torch.autocast's lower-precision list).
 * dtypes: f32, f64; f16 and bf16 are converted to f32, computed, and rounded once to their
 * dtype. q, k and v share one dtype and may have any strides. Memory: the scores of all batch
 * entries, B * L * S elements of the compute dtype, plus the f32 copies of f16/bf16 operands
 * (and whatever copies ct_matmul makes of layouts it can't read in place); nothing larger.
 * The products go through ct_matmul (the library's batched GEMM), the masking and softmax
 * through one kernel; on a CPU device whose GEMMs take the host route (ct_gemm_route_get), an
 * attention without a mask is instead one host command (CBLAS and a vectorized softmax). The
 * result is a new tensor; on that host path, with two or more batch dims, it is not contiguous:
 * [..., H, L, Ev] over memory laid out [..., L, H, Ev], as PyTorch's CPU attention returns it,
 * so that transposing dims -3 and -2 gives a contiguous tensor (merging the heads is a view).
 * CT_ERR_INVALID_ARGUMENT (NULL, fewer than 2 dims, scale infinite), CT_ERR_SHAPE_MISMATCH (E,
 * S or the batch dims disagree, or a mask that doesn't broadcast; both shapes in the message),
 * CT_ERR_DTYPE_MISMATCH (integer operands, differing dtypes, an integer mask),
 * CT_ERR_DEVICE_MISMATCH, and the statuses of ct_matmul(). */
CT_API ct_status ct_scaled_dot_product_attention(ct_tensor **out, const ct_tensor *q,
                                                 const ct_tensor *k, const ct_tensor *v,
                                                 const ct_tensor *mask, bool causal, double scale);

/* OUT: *out, dropout (torch.nn.functional.dropout): with training set, each element is kept
 * with probability 1 - p and scaled by 1 / (1 - p), else multiplied by 0 (as PyTorch's mask
 * product: 0, or -0, and NaN for NaN and inf); the result is a new contiguous tensor of x's
 * shape and dtype (float dtypes; f16/bf16 compute in f32). Without training, or with p == 0,
 * *out is a new reference to x itself (ct_retain; PyTorch also returns the input), so writes
 * through either are seen by both; p == 1 gives x * 0 without drawing.
 * Bits: the mask comes from the Philox generator of random.h and uses and advances the global
 * (seed, offset) state like ct_rand() (one offset per call that draws: training with
 * 0 < p < 1). Element i (row-major) is kept when the 24-bit uniform u = (w >> 8) * 2^-24 of word
 * i % 4 of block i / 4 satisfies u >= p (p rounded to f32), which is exactly where
 * ct_rand_seeded(f32, same shape, seed, offset) is >= p, so the same seed gives the same mask
 * on every device. Kept values are x * (1 / (1 - p)), the factor rounded to f32 (f64 for f64
 * x) and the product computed in f32 (f64). x may have any strides. CT_ERR_INVALID_ARGUMENT for p outside [0, 1] or NaN, NULL;
 * CT_ERR_DTYPE_MISMATCH for a non-float x.
 * Differentiable: the gradient is g * mask / (1 - p) with the forward's mask (regenerated from its
 * (seed, offset), so nothing is kept); the identity without training or with p == 0, zeros for
 * p == 1. */
CT_API ct_status ct_dropout(ct_tensor **out, const ct_tensor *x, double p, bool training);

/* How a loss combines its per-element values (PyTorch's reduction=). */
typedef enum ct_reduction {
  CT_REDUCTION_NONE, /* per element, the target's shape */
  CT_REDUCTION_MEAN, /* a 0-d mean (over the non-ignored targets for the class losses) */
  CT_REDUCTION_SUM   /* a 0-d sum */
} ct_reduction;

/* OUT: *out, the cross entropy of logits against class indices
 * (torch.nn.functional.cross_entropy without class weights):
 *   logits [N, C] with target [N], logits [N, C, d1, ...] with target [N, d1, ...], or logits
 *   [C] with a 0-d target; the class dim is dim 1 (dim 0 for 1-D logits).
 *   target i64 class indices in [0, C); entries equal to ignore_index (PyTorch's default is
 *   -100) contribute nothing and don't count for the mean.
 *   label_smoothing eps in [0, 1]: loss = (1 - eps) * nll + eps / C * (-sum_c log_softmax),
 *   exactly as F.cross_entropy.
 * The result keeps the logits' float dtype (f16/bf16 compute in f32). MEAN with every target
 * ignored is NaN (0 / 0, as PyTorch), and so is the MEAN of no elements.
 * A target outside [0, C) that is not ignore_index gives CT_ERR_INVALID_ARGUMENT naming its
 * value and position; it is found on the device (a flag the kernel sets, read back after it),
 * so the call waits for the kernel. Other statuses: CT_ERR_INVALID_ARGUMENT (NULL, bad
 * reduction or label_smoothing), CT_ERR_SHAPE_MISMATCH (target shape), CT_ERR_DTYPE_MISMATCH
 * (non-float logits, non-i64 target), CT_ERR_DEVICE_MISMATCH.
 * Differentiable with respect to the logits (one fused backward kernel: softmax - (1 - eps) onehot
 * - eps / C, zero rows for ignored targets); the target takes none. Under autocast f16/bf16
 * logits are cast to f32 and the loss is f32; ct_nll_loss and ct_mse_loss likewise. */
CT_API ct_status ct_cross_entropy(ct_tensor **out, const ct_tensor *logits, const ct_tensor *target,
                                  int64_t ignore_index, double label_smoothing, ct_reduction r);

/* OUT: *out, the negative log likelihood of log-probabilities logp against class indices
 * (torch.nn.functional.nll_loss without class weights): -logp[n, target[n], ...], shapes,
 * ignore_index, dtypes and statuses as ct_cross_entropy(). Differentiable with respect to logp. */
CT_API ct_status ct_nll_loss(ct_tensor **out, const ct_tensor *logp, const ct_tensor *target,
                             int64_t ignore_index, ct_reduction r);

/* OUT: *out, the squared error (a - b)^2 (torch.nn.functional.mse_loss): a and b broadcast
 * (PyTorch warns when their shapes differ, and broadcasts too), float dtypes, promoted as
 * ct_sub(). NONE gives the broadcast shape; MEAN of no elements is NaN. Statuses as ct_sub()
 * and ct_mean(), and CT_ERR_DTYPE_MISMATCH for integer operands. Differentiable with respect to
 * a and b (2 (a - b) g, summed back to each one's shape). */
CT_API ct_status ct_mse_loss(ct_tensor **out, const ct_tensor *a, const ct_tensor *b, ct_reduction r);

CT_END_DECLS

#endif
