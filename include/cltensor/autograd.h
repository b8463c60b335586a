/* Reverse-mode automatic differentiation, PyTorch's way.
 *
 * Mark the tensors you want gradients for (the parameters) with ct_set_requires_grad(); every
 * differentiable op applied to them records its backward while grad mode is on. ct_backward()
 * on a result (a loss) runs the recorded graph backwards and accumulates d(result)/d(leaf) into
 * each leaf's gradient, read with ct_grad().
 *
 *   ct_set_requires_grad(w, true);
 *   ct_matmul(&y, x, w); ct_mse_loss(&loss, y, target, CT_REDUCTION_MEAN);
 *   ct_backward(loss, NULL);          // frees the graph
 *   ct_grad(&gw, w);                  // d loss / d w, shape and dtype of w
 *
 * The graph's lifetime. A result of a recorded op holds its backward node; a node holds its
 * inputs' nodes, the leaves it feeds, and the tensors its formula needs (saved tensors). So the
 * graph lives as long as the results that reach it, and goes away when they are released or
 * when ct_backward ran through it: each node frees its saved tensors as soon as its backward
 * ran (peak memory is the forward's activations, not twice that), and a second ct_backward
 * through the same nodes is CT_ERR_INVALID_ARGUMENT. There are no reference cycles (saved
 * outputs are detached), so releasing every tensor frees everything (LeakSanitizer-clean).
 *
 * Differentiable (recorded): elementwise arithmetic and float functions (with broadcasting:
 * gradients are summed back to each input's shape), where, masked_fill, clamp, casts between
 * float dtypes, ct_to_device; views (view, reshape, transpose, permute, slice, expand,
 * squeeze/unsqueeze, chunk/split) and copies (contiguous, clone); sum, mean, prod, max/min over
 * dims (gradient shared evenly among ties, as torch.amax), var/std, logsumexp, softmax,
 * log_softmax; matmul, linear, addmm; cat, stack, flip, roll, repeat, tril/triu, pad;
 * index_select, gather, scatter_add, embedding, cumsum, cumprod, sort/topk values; conv1d/2d,
 * pooling, layer/RMS/batch norm, scaled-dot-product attention, dropout, and the losses (with
 * respect to their float inputs).
 * sign, trunc, floor, ceil, round and floor_divide record a zero gradient (as PyTorch, which
 * refuses floor_divide's backward instead).
 * Not differentiable (results never require grad): comparisons and logical ops, isnan/isinf/
 * isfinite, integer and bitwise ops, argmax/argmin, sort/argsort/topk indices, any/all, casts to
 * integer or bool dtypes, creation functions, random sampling. Integer indices and targets take
 * no gradient.
 *
 * In place: a tensor that requires grad can't be written in place (ct_copy into it, ct_fill_,
 * an _out form) while grad mode is on, and _out forms refuse inputs that require grad, as
 * PyTorch. A write (in grad mode or not) into memory a recorded node saved bumps the storage's
 * version, and ct_backward then fails naming the op whose saved tensor changed, instead of
 * computing a wrong gradient.
 *
 * Threads: grad mode is per thread. A graph is backpropagated by one thread at a time; leaves
 * shared by graphs on several threads must not be backpropagated into concurrently. */
#ifndef CLTENSOR_AUTOGRAD_H
#define CLTENSOR_AUTOGRAD_H

#include <stdbool.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks t as a leaf that requires grad (on), or not (off). Only floating dtypes can require
 * grad (CT_ERR_DTYPE_MISMATCH otherwise). A result of a recorded op already requires grad;
 * turning that off is CT_ERR_INVALID_ARGUMENT (use ct_detach), turning it on is a no-op.
 * Turning a leaf's flag off after ops recorded it makes their graphs skip it (no gradient), as
 * PyTorch's AccumulateGrad. t NULL: CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_set_requires_grad(ct_tensor *t, bool on);
/* Whether t requires grad (a marked leaf or a recorded result); false for NULL. */
CT_API bool ct_requires_grad(const ct_tensor *t);
/* Whether t is a leaf: it has no recorded backward (every tensor that does not require grad is
 * one, as in PyTorch); false for NULL. */
CT_API bool ct_is_leaf(const ct_tensor *t);

/* Backpropagates from root: accumulates d(root)/d(leaf), weighted by grad, into every leaf
 * that requires grad and that root depends on. grad has root's shape (its dtype is converted);
 * NULL means 1 and needs a one-element root (CT_ERR_INVALID_ARGUMENT otherwise, as PyTorch's
 * "grad can be implicitly created only for scalar outputs"). The pass runs with grad mode off,
 * frees the graph it went through (a second call is CT_ERR_INVALID_ARGUMENT: "trying to
 * backward through the graph a second time", also where no node saved anything, which PyTorch
 * would allow), and changes no leaf's gradient unless it
 * succeeds. Fails with CT_ERR_INVALID_ARGUMENT when root does not require grad, and when a
 * saved tensor was written in place since it was saved (the message names the op).
 * Out of memory and device errors leave the leaves' gradients as they were. */
CT_API ct_status ct_backward(ct_tensor *root, const ct_tensor *grad);

/* *out = a new reference to t's accumulated gradient (t's shape and dtype, on t's device), or
 * NULL when there is none yet (or t is not a leaf, as PyTorch's .grad of a non-leaf). The
 * gradient tensor is the one later backward passes accumulate into in place: copy it (ct_clone)
 * to keep a snapshot. */
CT_API ct_status ct_grad(ct_tensor **out, const ct_tensor *t);
/* Drops t's gradient (PyTorch's zero_grad(set_to_none=True)). NULL t: CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_grad_clear(ct_tensor *t);

/* Turns recording on or off for the calling thread (PyTorch's torch.set_grad_enabled; off is
 * torch.no_grad) and returns the previous setting. On by default in every thread. */
CT_API bool ct_set_grad_enabled(bool on);
CT_API bool ct_is_grad_enabled(void);

/* *out = a view of t sharing its memory (and version counter) but outside any graph: it does
 * not require grad. PyTorch's detach. */
CT_API ct_status ct_detach(ct_tensor **out, const ct_tensor *t);

/* Mixed precision (PyTorch's autocast), per thread. ct_autocast_set_dtype(CT_F16 or CT_BF16) makes
 * matmul, linear, addmm, conv1d/conv2d and scaled-dot-product attention cast their float
 * inputs to that dtype (accumulating in f32 in the kernels) and return results of that dtype;
 * reductions, softmax/log_softmax, norms and losses run in f32 (their f16/bf16 inputs are cast
 * up, as torch.autocast's fp32 list); other ops take what they are given. CT_F32 turns it off
 * (the default). Other dtypes: CT_ERR_INVALID_ARGUMENT. Gradients flow through the casts, so
 * parameters stay f32 ("master weights"); pair f16 with ct_grad_scaler (optim.h). */
CT_API ct_status ct_autocast_set_dtype(ct_dtype dt);
CT_API ct_dtype ct_autocast_get_dtype(void);

#ifdef __cplusplus
}
#endif
#endif
