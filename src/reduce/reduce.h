/* Internal: reduction geometry (dims lists, output shapes, the kept/reduced split that the
 * kernels walk) shared by reductions and softmax. */
#ifndef CT_REDUCE_REDUCE_H
#define CT_REDUCE_REDUCE_H

#include <CL/cl.h>
#include <stdbool.h>
#include <stdint.h>

#include "cltensor/reduce.h"
#include "reduce_ops.h" /* kernels/reduce_ops.h: the reductions' table */
#include "cltensor/tensor.h"
#include "device/device.h"
#include "kernel/engine.h"
#include "tensor/graph.h"

/* The reductions, one per row of kernels/reduce_ops.h (which holds their identities and
 * combining steps, for reduce.cl and the fusion graph's kernels alike), in its order:
 * kernels/reduce.cl's CT_OP_* codes. */
enum ct__red_op {
#define CT__RED_CODE(NAME, ...) CT__RED_##NAME,
  CT_REDUCE_OPS(CT__RED_CODE)
#undef CT__RED_CODE
  CT__RED_COUNT
};

/* The accumulator dtype of a reduction of dt: f64 for f64, f32 for the other floats, i64 for
 * integers and bool. The one place this is decided: reduce.cl gets it as -DCT_ACC, the fusion
 * graph's kernels as their accumulator type. */
ct_dtype ct__reduce_acc_dtype(ct_dtype dt);

/* A tensor's elements split into kept dims (one output per index, row-major) and reduced dims
 * (walked by index j, row-major over the list). Size-1 dims are dropped and neighbouring dims
 * that address memory like one dim are merged, so most layouts end up with one reduced dim of
 * stride 1 and at most one kept dim. */
struct ct__red_geom {
  int kndim, rndim;
  int64_t kshape[CT_MAX_DIMS], kstride[CT_MAX_DIMS];
  int64_t rshape[CT_MAX_DIMS], rstride[CT_MAX_DIMS];
  int64_t nout, nred;   /* products of the kept / reduced sizes (a size-0 dim makes them 0) */
};

/* Marks the dims named by (ndims, dims) in mask[0..ndim) for a tensor of ndim dims;
 * ndims == 0 marks every dim. Negative dims count from the end; a 0-dim tensor accepts 0 and -1
 * (and marks nothing). CT_ERR_INVALID_ARGUMENT for a negative ndims, NULL dims with ndims > 0,
 * a dim out of range or named twice; fn and shape go into the message. Pure. */
ct_status ct__reduce_dims(bool *mask, int ndim, const int64_t *shape, int ndims, const int *dims,
                          const char *fn);

/* One dim (negative counts from the end; 0-dim tensors accept 0 and -1, giving *out = -1):
 * CT_ERR_INVALID_ARGUMENT when out of range. Pure. */
ct_status ct__reduce_dim(int *out, int ndim, const int64_t *shape, int dim, const char *fn);

/* The result shape: reduced dims become 1 with keepdim, else are removed. Returns its ndim. */
int ct__reduce_out_shape(int64_t *oshape, int ndim, const int64_t *shape, const bool *mask,
                         bool keepdim);

/* Splits (shape, strides) by mask and collapses both parts (ct__collapse_dims()). With
 * sort_reduced the reduced dims are ordered by decreasing |stride| first (only for ops whose
 * result doesn't depend on the walking order), so the innermost reduced dim has the smallest
 * stride. Pure. */
void ct__reduce_geom(struct ct__red_geom *g, int ndim, const int64_t *shape,
                     const int64_t *strides, const bool *mask, bool sort_reduced);

/* The start of every reduction of x over mask: *o gets a new result of dtype odt and shape
 * ct__reduce_out_shape()'s, g x's geometry (ct__reduce_geom()). The statuses of
 * ct__tensor_new() (naming fn), *o NULL then. */
ct_status ct__reduce_begin(ct_tensor **o, struct ct__red_geom *g, const ct_tensor *x, const bool *mask,
                           bool keepdim, ct_dtype odt, bool sort_reduced, const char *fn);

/* Records the backward node g of a reduction r = op(x) over mask (tensor/graph.h): i[0]
 * keepdim, i[1] the reduced dims as bits, i[2] var/std's correction, i[3] 1 for std; saved
 * (except for sum and mean, whose gradients need no values): 0 x, 1 r. Nothing when no input
 * requires grad. */
ct_status ct__reduce_record(ct_tensor *r, const ct_tensor *x, const bool *mask, bool keepdim, ct__gop g,
                            int64_t corr, bool std, const char *fn);

/* Autocast (ct_autocast_set_dtype; torch.autocast's fp32 list): the reductions that sum (sum, mean,
 * prod, var, std, logsumexp) and softmax/log_softmax run in f32 when autocast is on, so *xc =
 * x cast to f32 (recorded: the gradient flows back to x's dtype) when autocast is on and x is
 * f16 or bf16; else x itself, retained. The statuses of ct_cast. */
ct_status ct__reduce_autocast(ct_tensor **xc, const ct_tensor *x, const char *fn);

/* Tests set this to 1 to run the GPU layout on a CPU device, so both layouts are exercised
 * wherever the tests run. Read at each call; not for applications. */
extern int ct__reduce_gpu_layout;

/* Whether reductions and softmax on d use the CPU layout (a work-item owns an extent, wide
 * column strips, -DCT_CHUNKED=1) rather than the GPU one (work-groups share an extent). */
static inline bool ct__cpu_layout(const ct_device *d) {
  return ct__device_chunked(d) && !ct__reduce_gpu_layout;
}

#endif
