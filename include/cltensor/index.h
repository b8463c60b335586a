/* libcltensor: indexing (index_select, gather, scatter_add, embedding, masked_fill), scans
 * (cumsum, cumprod) and ordering (sort, argsort, topk).
 *
 * Every function here reads its tensor arguments in place, whatever their layout (contiguous,
 * transposed, sliced, expanded), and returns NEW contiguous tensors on the same device in the
 * out-parameters (NULL on failure), which the caller releases with ct_release(). Inputs are
 * borrowed. All tensor arguments must be on one device (CT_ERR_DEVICE_MISMATCH otherwise).
 *
 * Dims. A negative dim counts from the end (-1 is the last); a 0-dim tensor accepts 0 and -1.
 * A dim out of range is CT_ERR_INVALID_ARGUMENT naming the dim and the tensor's dims.
 *
 * Indices are i64 or i32 tensors (anything else: CT_ERR_DTYPE_MISMATCH). As in PyTorch, a
 * negative index is out of range (index_select, gather, scatter_add and embedding do not wrap).
 * Indices are checked on the device while the kernel runs: an index outside [0, size) gives
 * CT_ERR_INVALID_ARGUMENT naming one bad index value and its position in the index tensor,
 * e.g. "ct_gather: index 7 at position [1, 0] is out of range for dim 1 of size 5" (when several
 * are bad, which one is reported is unspecified); the result is then not returned. The check
 * costs a round trip to the host (the op waits for the kernel), except for an index tensor made
 * by ct_from_host (or loaded from a file) and not written since: the library saw its values on
 * the way in, and when they all lie in range the op returns without waiting. Any write to it, or
 * handing its memory out (ct_tensor_cl_mem, ct_to_dlpack), brings the device check back.
 *
 * Size-0 dims are allowed everywhere and give empty results.
 *
 * Autograd (autograd.h): index_select, gather, scatter_add (x and src), embedding (weight),
 * masked_fill (x), cumsum, cumprod and the values of sort and topk are differentiable with
 * respect to their float inputs; gradients with repeated indices accumulate in a fixed order
 * (the same bits on every run). Indices, masks, argsort and the indices of sort and topk are
 * not differentiable (they never require grad); integer scans record nothing.
 *
 * Every function may also return CT_ERR_OPENCL, CT_ERR_OUT_OF_MEMORY, CT_ERR_KERNEL_BUILD, and
 * CT_ERR_UNSUPPORTED (f64 on a device without cl_khr_fp64); NULL out-parameters or inputs give
 * CT_ERR_INVALID_ARGUMENT. Thread safety as for every op (see tensor.h). */
#ifndef CLTENSOR_INDEX_H
#define CLTENSOR_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/dtype.h"
#include "cltensor/device.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* ---- Indexing ---- */

/* OUT: *out = torch.index_select(x, dim, index): x with dim `dim` replaced by index's entries,
 * shape x.shape with shape[dim] = numel(index). index is 1-D or 0-D (a 0-D index selects one
 * entry and keeps the dim, size 1, as PyTorch does). Any dtype; the result has x's dtype. */
CT_API ct_status ct_index_select(ct_tensor **out, const ct_tensor *x, int dim, const ct_tensor *index);

/* OUT: *out = torch.gather(x, dim, index): out[i][j][k] = x[index[i][j][k]][j][k] for dim 0
 * (and so on), shape index.shape. index has x's number of dims and index.shape[d] <= x.shape[d]
 * for every d != dim (CT_ERR_SHAPE_MISMATCH otherwise). Any dtype. */
CT_API ct_status ct_gather(ct_tensor **out, const ct_tensor *x, int dim, const ct_tensor *index);

/* OUT: *out = x.scatter_add(dim, index, src) (functional: x is not modified): a copy of x to
 * which src[i][j][k] is added at [index[i][j][k]][j][k] (dim 0, and so on). index has x's
 * number of dims, index.shape[d] <= src.shape[d] for every d and <= x.shape[d] for d != dim
 * (CT_ERR_SHAPE_MISMATCH otherwise); src has x's dtype (CT_ERR_DTYPE_MISMATCH otherwise).
 * Deterministic: each destination receives its sources in row-major order of the index, each
 * addition rounded to x's dtype (as PyTorch's sequential CPU loop), so the result has the same
 * bits on every run and device. Bool adds as logical or; integers wrap. Every dtype but u64
 * (CT_ERR_UNSUPPORTED). */
CT_API ct_status ct_scatter_add(ct_tensor **out, const ct_tensor *x, int dim, const ct_tensor *index,
                                const ct_tensor *src);

/* OUT: *out = torch.nn.functional.embedding(indices, weight): rows of the 2-D weight picked by
 * indices of any shape; shape indices.shape + [weight.shape[1]], weight's dtype. */
CT_API ct_status ct_embedding(ct_tensor **out, const ct_tensor *weight, const ct_tensor *indices);

/* OUT: *out = torch.masked_fill(x, mask, value): x where mask is false, value (converted to
 * x's dtype as ct_cast() converts) where it is true. mask is bool (CT_ERR_DTYPE_MISMATCH
 * otherwise); x and mask broadcast (NumPy rules) and the result has the broadcast shape.
 * value must fit x's dtype as ct_full()'s does (PyTorch's rule): 300 for u8, or NaN for an
 * integer dtype, is CT_ERR_INVALID_ARGUMENT naming the value. */
CT_API ct_status ct_masked_fill(ct_tensor **out, const ct_tensor *x, const ct_tensor *mask, double value);

/* ---- Scans ---- */

/* OUT: *out = torch.cumsum(x, dim) / torch.cumprod(x, dim): running sums / products along dim,
 * in order. Result dtypes as PyTorch: bool and integer inputs give i64 (wrapping); float inputs
 * keep their dtype. f16 and bf16 accumulate in f32 and round each result once; f32 in f32; f64
 * in f64. u64 is not supported (CT_ERR_UNSUPPORTED). */
CT_API ct_status ct_cumsum(ct_tensor **out, const ct_tensor *x, int dim);
CT_API ct_status ct_cumprod(ct_tensor **out, const ct_tensor *x, int dim);

/* ---- Ordering ---- */

/* OUT: *values, *indices = torch.sort(x, dim, descending, stable=True): x's slices along dim
 * sorted, and the i64 positions the values came from. Stable: equal elements keep their order
 * (ascending or descending). NaN is greater than every number (last ascending, first
 * descending); -0.0 and 0.0 are equal. Any dtype; values has x's dtype. values or indices may
 * be NULL when not wanted (not both). On failure both are NULL. */
CT_API ct_status ct_sort(ct_tensor **values, ct_tensor **indices, const ct_tensor *x, int dim,
                         bool descending);

/* OUT: *out = torch.argsort(x, dim, descending, stable=True): the indices of ct_sort. */
CT_API ct_status ct_argsort(ct_tensor **out, const ct_tensor *x, int dim, bool descending);

/* OUT: *values, *indices = torch.topk(x, k, dim, largest, sorted=True): the k largest (or
 * smallest) elements of each slice along dim, in sorted order (descending for largest), with
 * their i64 positions; ties keep the lower position first; NaN counts as the largest. k must be
 * in [0, x.shape[dim]] (CT_ERR_INVALID_ARGUMENT naming k and the dim size). values or indices
 * may be NULL when not wanted (not both). */
CT_API ct_status ct_topk(ct_tensor **values, ct_tensor **indices, const ct_tensor *x, int64_t k,
                         int dim, bool largest);

CT_END_DECLS

#endif
