/* Reductions (sum, mean, prod, max, min, argmax, argmin, var, std, logsumexp, any, all) and
 * softmax.
 *
 * Every function here takes a tensor of any layout (contiguous, transposed, sliced, expanded)
 * and reads it in place; the result is a NEW contiguous tensor on the same device, stored in
 * *out (NULL on failure), which the caller releases with ct_release(). x is borrowed.
 *
 *   ct_tensor *s = NULL;
 *   int dims[1] = {-1};
 *   ct_sum(&s, x, 1, dims, false);        // x.sum(dim=-1)
 *   ct_sum(&s, x, 0, NULL, false);        // x.sum(): every element, a 0-dim tensor
 *
 * Dims. `ndims` entries of `dims` name the reduced dims; ndims == 0 reduces every dim (dims may
 * then be NULL). A negative dim counts from the end (-1 is the last). A 0-dim tensor accepts dim
 * 0 or -1, as PyTorch does, and reducing it gives a 0-dim tensor. A dim out of range or named
 * twice gives CT_ERR_INVALID_ARGUMENT with the dim and the tensor's shape. With keepdim the
 * reduced dims stay as size 1; without it they are removed.
 *
 * Result dtypes (as PyTorch):
 *   sum, prod   bool and integer inputs give i64 (exact, wrapping modulo 2^64 like PyTorch);
 *               float inputs keep their dtype
 *   mean, var, std, softmax, log_softmax
 *               float inputs only; keep the dtype. Integer or bool input gives
 *               CT_ERR_DTYPE_MISMATCH (PyTorch raises as well; cast first with ct_cast())
 *   max, min    keep the dtype (bool: max is "any", min is "all")
 *   argmax, argmin  i64 indices
 *   logsumexp   float inputs keep their dtype; bool and integer inputs give f32
 *   any, all    bool, except u8 input: u8 (0 or 1)
 *   u64 (a storage dtype) is not reduced by the others: CT_ERR_UNSUPPORTED (cast to i64 or f64
 *   first); u16 and u32 are, like the other integers
 *
 * Autocast (autograd.h): while ct_autocast_set_dtype() has f16 or bf16 on, sum, mean, prod, var, std,
 * logsumexp, softmax and log_softmax cast an f16/bf16 x to f32 and return f32 (torch.autocast's
 * fp32 list); max and min keep the dtype. Off, nothing changes.
 *
 * Gradients (autograd.h): every function here is differentiable except argmax, argmin, any and
 * all. max and min share the gradient evenly among the elements equal to the result (torch.amax
 * / amin), prod handles zeros as PyTorch (the product of the other elements), std's gradient is
 * 0 where std is 0.
 *
 * Accumulation. f16 and bf16 accumulate in f32 and round once at the end; f32 in f32; f64 in
 * f64; integers in i64. Float sums are pairwise: each work-item adds blocks of at most 16
 * elements per vector lane, combines the block sums in a binary cascade (a pairwise tree over
 * blocks), and work-items and work-groups combine in trees. The rounding error of a float sum
 * is therefore bounded by about (16 + 2 log2(n) + 8) * eps * sum|x|, not n * eps * sum|x| as
 * for one serial chain. mean is sum / n rounded once; var and std take two passes (the mean,
 * then the sum of squared deviations from it), which avoids the cancellation of sum(x^2) - n m^2.
 *
 * Empty inputs (as PyTorch): reducing zero elements gives sum 0, prod 1, mean NaN, var/std NaN;
 * max, min, argmax and argmin over a reduced extent of zero elements give
 * CT_ERR_INVALID_ARGUMENT (a reduction of a non-empty extent whose *output* is empty, e.g. the
 * max over dim 1 of a [0, 3] tensor, is fine and gives an empty result).
 *
 * NaN. max and min return NaN when the reduced elements contain a NaN; argmax and argmin then
 * return the index of the first NaN (PyTorch's semantics). Ties give the lowest index.
 *
 * Every function may also return CT_ERR_OPENCL, CT_ERR_OUT_OF_MEMORY, CT_ERR_KERNEL_BUILD and
 * CT_ERR_UNSUPPORTED (f64 on a device without cl_khr_fp64); NULL out or x gives
 * CT_ERR_INVALID_ARGUMENT. Thread safety as for every op (see tensor.h). */
#ifndef CLTENSOR_REDUCE_H
#define CLTENSOR_REDUCE_H

#include <stdbool.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* The `dim` of ct_argmax/ct_argmin that means "no dim" (PyTorch's dim=None): the index into
 * the row-major flattened tensor. */
#define CT_DIM_NONE (-2147483647 - 1)

/* OUT: *out, the sum over dims (i64 for bool/integer x, else x's dtype). */
CT_API ct_status ct_sum(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim);
/* OUT: *out, sum / n, for float x only (CT_ERR_DTYPE_MISMATCH otherwise). */
CT_API ct_status ct_mean(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim);
/* OUT: *out, the product over dims (i64 for bool/integer x, else x's dtype). */
CT_API ct_status ct_prod(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim);
/* OUT: *out, the largest / smallest element over dims (x's dtype; NaN propagates).
 * CT_ERR_INVALID_ARGUMENT when a reduced dim has size 0. */
CT_API ct_status ct_max(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim);
CT_API ct_status ct_min(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim);

/* OUT: *out, i64 indices of the first largest / smallest element along dim (NaN counts as the
 * largest and as the smallest, so the first NaN wins). dim == CT_DIM_NONE: the index into the
 * flattened tensor, a 0-dim result, or with keepdim a result of x's ndim dims all of size 1.
 * CT_ERR_INVALID_ARGUMENT when the reduced extent is empty. */
CT_API ct_status ct_argmax(ct_tensor **out, const ct_tensor *x, int dim, bool keepdim);
CT_API ct_status ct_argmin(ct_tensor **out, const ct_tensor *x, int dim, bool keepdim);

/* OUT: *out, the variance sum((x - mean)^2) / max(0, n - correction) over dims, for float x
 * (correction 1: unbiased, PyTorch's default; 0: population variance). n - correction <= 0
 * divides by zero: inf, or NaN when the deviations are all zero (as PyTorch). */
CT_API ct_status ct_var(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, int correction,
                        bool keepdim);
/* OUT: *out, sqrt of ct_var(). */
CT_API ct_status ct_std(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, int correction,
                        bool keepdim);

/* OUT: *out, log(sum(exp(x))) over dims (torch.logsumexp), computed stably as
 * m + log(sum(exp(x - m))) with m the slice's maximum (an infinite m counts as 0, so a slice of
 * all -inf gives -inf and one holding +inf gives inf, as PyTorch). Float x keeps its dtype
 * (f16/bf16 compute in f32, f64 in f64); bool and integer x promote to f32, as PyTorch. An empty
 * reduced extent gives -inf. NaN propagates. */
CT_API ct_status ct_logsumexp(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims,
                              bool keepdim);
/* OUT: *out, whether any / all elements over dims are nonzero (torch.any / torch.all; NaN is
 * nonzero). Every dtype; the result is bool, except for u8 x, which gives u8 (0 or 1) as
 * PyTorch does. An empty reduced extent gives false (any) / true (all). */
CT_API ct_status ct_any(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim);
CT_API ct_status ct_all(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims, bool keepdim);

/* OUT: *out, softmax along dim: exp(x - max) / sum(exp(x - max)), same shape and dtype as x
 * (float only; f16/bf16 compute in f32). The maximum is subtracted first, so large inputs
 * (1000, 1001) don't overflow. A 0-dim x accepts dim 0 or -1 and gives 1. */
CT_API ct_status ct_softmax(ct_tensor **out, const ct_tensor *x, int dim);
/* OUT: *out, log(softmax(x)) along dim, computed as x - max - log(sum(exp(x - max))). */
CT_API ct_status ct_log_softmax(ct_tensor **out, const ct_tensor *x, int dim);

CT_END_DECLS

#endif
