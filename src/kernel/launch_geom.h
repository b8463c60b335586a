/* The launch layer's geometry on plain shape/stride arrays, shared by every op that hands a
 * strided tensor to a kernel (copies, elementwise, reductions, softmax, GEMM batches):
 *
 *  - ct__collapse_dims(): the one dimension collapser (drop size-1 dims, optionally order
 *    them, merge neighbours that every operand walks as one dim);
 *  - ct__elem_span(): the element range a strided layout touches (tensor/ builds its byte
 *    span and overlap check on it);
 *  - ct__pow2_floor() / ct__pow2_ceil(): the power-of-two rounding of work-group sizes.
 *
 * The rest of the launch layer: the shape/stride packer and the typed argument builder are in
 * kargs.h (ct__karg_long8()), the work-group-size policy in engine.h (ct__kernel_group_size(),
 * ct__launch_dims(), ct__kernel_group_limit()), and what needs a ct_tensor (its element
 * offset, span, overlap, ct__karg_tensor()) in tensor/tensor.h, above this layer. */
#ifndef CT_KERNEL_LAUNCH_GEOM_H
#define CT_KERNEL_LAUNCH_GEOM_H

#include <stddef.h>
#include <stdint.h>

/* ct__collapse_dims() flags. */
enum {
  /* Before merging, order the dims by decreasing |strides[0][d]| (stable), so the first
   * operand (an op's output) is walked in memory order whatever its layout. */
  CT__COLLAPSE_ORDER = 1u,
};

/* Collapses (shape, strides[0..nst)) of ndim dims in place and returns the new ndim: drops
 * size-1 dims, orders the rest when flags has CT__COLLAPSE_ORDER, then merges neighbours (outer
 * a, inner b) wherever, in every one of the nst stride arrays, stride[a] == shape[b] *
 * stride[b]. When a dim has size 0 nothing is merged (nothing will be read). Pure. */
int ct__collapse_dims(int ndim, int64_t *shape, int nst, int64_t *const *strides, unsigned flags);

/* The elements a layout touches, relative to its element 0: [*first, *last], with *first <= 0
 * <= *last (negative strides reach below element 0). Shape must have no size-0 dim. Pure. */
void ct__elem_span(int ndim, const int64_t *shape, const int64_t *strides, int64_t *first, int64_t *last);

/* The largest power of two <= v (1 for v <= 1), and the smallest >= v (1 for v <= 1). */
static inline size_t ct__pow2_floor(size_t v) {
  size_t p = 1;
  while (p <= v / 2) p <<= 1;
  return p;
}
static inline size_t ct__pow2_ceil(size_t v) {
  size_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

#endif
