/* Assembly and shape ops: cat, stack, chunk, split, flip, roll, repeat, tril/triu, pad, clone,
 * the *_like constructors, in-place fills, linspace and randint.
 *
 *   ct_tensor *parts[2] = {a, b}, *c = NULL;
 *   ct_cat(&c, parts, 2, -1);                 // torch.cat([a, b], dim=-1)
 *   int64_t pad[4] = {1, 1, 2, 2};
 *   ct_pad(&p, x, 4, pad, CT_PAD_REFLECT, 0); // F.pad(x, (1, 1, 2, 2), mode='reflect')
 *
 * Conventions (as for every op; see tensor.h):
 *  - Results are NEW tensors stored in *out (NULL on failure), released with ct_release();
 *    ct_chunk and ct_split store views of x (they share its storage, no copy). Inputs are
 *    borrowed. Every new result is contiguous, on the inputs' device.
 *  - Inputs of any layout (transposed, sliced, expanded with stride 0) are read in place.
 *  - Negative dims count from the end as in PyTorch, and a 0-d tensor accepts dim 0 and -1; a
 *    dim out of range is CT_ERR_INVALID_ARGUMENT naming the dim and the tensor's dims (ct_flip
 *    adds which dims[i]). Size-0 dims work.
 *  - Every dtype (the 13 of dtype.h: f16/bf16 are moved as stored bits; f64 needs a device with
 *    cl_khr_fp64). The result keeps the input's dtype, except ct_cat/ct_stack of mixed dtypes,
 *    which promote as torch.cat does (ct_promote_types() pairwise; u16/u32/u64 mixed with
 *    another integer or bool dtype is CT_ERR_DTYPE_MISMATCH as there).
 *  - Errors: NULL pointers and bad arguments are CT_ERR_INVALID_ARGUMENT, unfit shapes
 *    CT_ERR_SHAPE_MISMATCH, tensors on different devices CT_ERR_DEVICE_MISMATCH, each with a
 *    message naming the function, the argument and the values. Every call may also return
 *    CT_ERR_OPENCL, CT_ERR_OUT_OF_MEMORY, CT_ERR_KERNEL_BUILD and CT_ERR_UNSUPPORTED.
 *  - Autograd (autograd.h): cat, stack, chunk, split, flip, roll, repeat, tril/triu, pad (all
 *    modes) and clone are differentiable with respect to their float inputs; the *_like
 *    constructors, linspace and randint are not (their results do not require grad); fill_ and
 *    zero_ write in place (see there). */
#ifndef CLTENSOR_SHAPE_H
#define CLTENSOR_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/dtype.h"
#include "cltensor/device.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* ---- Assembly ---- */

/* torch.cat(ts[0..n), dim). n >= 1 tensors of equal ndim whose shapes agree except along dim;
 * as in PyTorch, a 1-D tensor of shape [0] is skipped whatever the others' ndim. The result
 * dtype promotes all inputs. OUT: *out. */
CT_API ct_status ct_cat(ct_tensor **out, ct_tensor *const *ts, int n, int dim);
/* torch.stack(ts[0..n), dim): n >= 1 tensors of one shape, joined along a new dim
 * (dim in [-(ndim+1), ndim]). OUT: *out. */
CT_API ct_status ct_stack(ct_tensor **out, ct_tensor *const *ts, int n, int dim);

/* torch.chunk(x, chunks, dim): views of x of ceil(size/chunks) elements along dim, the last
 * smaller; so there may be fewer than `chunks` pieces (a size-0 dim gives `chunks` empty
 * pieces, as PyTorch). OUT: outs[0..*nout), new references; outs has room for `chunks`
 * entries (chunks >= 1). On failure *nout is 0 and nothing is stored. */
CT_API ct_status ct_chunk(ct_tensor **outs, int *nout, const ct_tensor *x, int chunks, int dim);
/* torch.split(x, size, dim): views of `size` elements along dim (size >= 1; 0 only along a
 * size-0 dim, as PyTorch), the last one smaller. OUT: outs[0..*nout), new references; outs must have room for
 * max(1, ceil(dim_size / size)) entries: a size-0 dim gives one empty piece, as PyTorch.
 * On failure *nout is 0 and nothing is stored. */
CT_API ct_status ct_split(ct_tensor **outs, int *nout, const ct_tensor *x, int64_t size, int dim);

/* ---- Reordering ---- */

/* torch.flip(x, dims): reverses the order along the ndims dims (each named once). OUT: *out. */
CT_API ct_status ct_flip(ct_tensor **out, const ct_tensor *x, int ndims, const int *dims);
/* torch.roll(x, shift, dim): element i moves to (i + shift) mod size along dim; any shift,
 * negative too (a 0-d x comes back as it is). OUT: *out. */
CT_API ct_status ct_roll(ct_tensor **out, const ct_tensor *x, int64_t shift, int dim);
/* x.repeat(*repeats): tiles x repeats[i] times along dim i (ndim >= x's ndim, at most
 * CT_MAX_DIMS; x gets leading size-1 dims when ndim is larger); repeats[i] >= 0. OUT: *out. */
CT_API ct_status ct_repeat(ct_tensor **out, const ct_tensor *x, int ndim, const int64_t *repeats);
/* torch.tril(x, diagonal) / torch.triu(x, diagonal) over the last two dims (x has >= 2 dims),
 * batched over the rest: elements with col - row > diagonal (tril) or < diagonal (triu) are 0.
 * Any int64 diagonal is valid (INT64_MAX: tril keeps all, triu none). OUT: *out. */
CT_API ct_status ct_tril(ct_tensor **out, const ct_tensor *x, int64_t diagonal);
CT_API ct_status ct_triu(ct_tensor **out, const ct_tensor *x, int64_t diagonal);

typedef enum ct_pad_mode {
  CT_PAD_CONSTANT = 0,  /* value */
  CT_PAD_REFLECT = 1,   /* mirrored without repeating the edge: [1 2 3] -> 2 | 1 2 3 | 2 */
  CT_PAD_REPLICATE = 2  /* the edge element repeated */
} ct_pad_mode;

/* torch.nn.functional.pad(x, pad, mode, value). pad holds npad (even) entries, pairs
 * (left, right) from the LAST dim backwards, as F.pad: {l_last, r_last, l_prev, r_prev, ...};
 * npad <= 2 * ndim.
 *   Every pad is > INT64_MIN (the gradient negates it).
 *   CT_PAD_CONSTANT: any ndim; negative pads crop; every padded size must stay >= 0; value is
 *     converted to x's dtype and must fit it (the scalar rule of ct_full).
 *   CT_PAD_REFLECT, CT_PAD_REPLICATE: PyTorch's forms only: npad 2, 4 or 6 with x of
 *     npad/2 + 1 or npad/2 + 2 dims (an optional batch dim, which may be empty; the other dims
 *     must not be); reflect needs each pad < the size of its dim. value is ignored.
 * OUT: *out. */
CT_API ct_status ct_pad(ct_tensor **out, const ct_tensor *x, int npad, const int64_t *pad, ct_pad_mode mode,
                        double value);

/* ---- Copies, constructors and fills ---- */

/* x.clone(): always a new contiguous copy, same dtype and shape. OUT: *out. */
CT_API ct_status ct_clone(ct_tensor **out, const ct_tensor *x);
/* torch.empty_like / zeros_like / ones_like: a new contiguous tensor of x's dtype, device and
 * shape (empty_like's elements are unspecified). OUT: *out. */
CT_API ct_status ct_empty_like(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_zeros_like(ct_tensor **out, const ct_tensor *x);
CT_API ct_status ct_ones_like(ct_tensor **out, const ct_tensor *x);
/* x.fill_(v) / x.zero_(): sets every element of x in place; x may be any strided view, but
 * not an expanded one (a stride-0 dim of size > 1: CT_ERR_INVALID_ARGUMENT, as PyTorch).
 * v must fit x's dtype (the scalar rule of ct_full: 300 into u8 is CT_ERR_INVALID_ARGUMENT).
 * Not differentiable: refused (CT_ERR_INVALID_ARGUMENT) when x requires grad while grad mode
 * is on; bumps x's version, so a graph that saved x fails ct_backward (autograd.h). */
CT_API ct_status ct_fill_(ct_tensor *x, double v);
CT_API ct_status ct_zero_(ct_tensor *x);

/* torch.linspace(start, end, steps, dtype): a new 1-D tensor of steps >= 0 values from start to
 * end inclusive, by torch.linspace's formula: step = (end - start) / (steps - 1), element i is
 * start + i * step for i < steps / 2 and end - (steps - 1 - i) * step from there on (so both
 * ends are exact). f32, f16 and bf16 compute in f32 (f16/bf16 rounded once at the end), f64 in
 * f64; integer dtypes compute in f64 and truncate toward zero, as PyTorch's integer linspace.
 * start and end must fit dtype (the scalar rule of ct_full). Computed on the host and copied
 * to d. OUT: *out. */
CT_API ct_status ct_linspace(ct_tensor **out, ct_device *d, ct_dtype dtype, double start, double end, int64_t steps);

/* torch.randint(low, high, shape, dtype): a new tensor of integers uniform in [low, high),
 * from the library's Philox generator and global (seed, offset) state (random.h: one offset
 * per call, the same values on every device for the same state). Element i of the row-major
 * order takes, for a range r = high - low up to 2^32, word (i mod 4) of Philox block i / 4 and
 * gives low + w mod r; above 2^32 it takes the 64-bit (w1 << 32 | w0) or (w3 << 32 | w2) of
 * block i / 2 (PyTorch's mapping, not its generator: the values differ from torch.randint's).
 * Every dtype; low < high, and low and high - 1 must fit dtype (CT_ERR_INVALID_ARGUMENT naming
 * low, high and the dtype), as torch.randint: bool takes [0, 2) at most, f16 its finite range
 * [-65504, 65504], the other floats any int64 (integers beyond a float's significand round as
 * ct_cast() rounds). OUT: *out. */
CT_API ct_status ct_randint(ct_tensor **out, ct_device *d, ct_dtype dtype, int64_t low, int64_t high, int ndim,
                            const int64_t *shape);

CT_END_DECLS

#endif
