/* What each kind of backward node keeps for its formula (issue #29): one typed record per row
 * of grad_ops.def, named by the row's `rec` column, so the op that records a node fills named
 * fields and its formula (src/autograd/grad_*.c) reads them (r->stride[0], r->x), instead of
 * both agreeing in comments on what slot 3 holds.
 *
 * A record has two kinds of fields:
 *   - saved tensors, `const ct_tensor *`: filled by ct__grad_save_as(n, &r->x, x, fn), which
 *     keeps a detached header of x in the node (version-checked by ct_backward, freed once the
 *     node's backward ran, when the field goes back to NULL); NULL when nothing was saved;
 *   - the op's arguments, of their own types.
 * A node's record starts zeroed (ct__grad_record), so a field an op does not fill reads 0,
 * false or NULL.
 *
 * Adding a kind: its struct here (or a row reusing one), a member of ct__grad_rec below named
 * as the struct's suffix, and the row's `rec` column naming it (grad_ops.def). */
#ifndef CT_TENSOR_GRAD_RECORDS_H
#define CT_TENSOR_GRAD_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/dtype.h"
#include "cltensor/tensor.h"

/* Rows that keep nothing (casts, to_device, reshape, expand, clone: the edges' shapes, dtypes
 * and devices are all their formulas need). C has no empty struct. */
typedef struct ct__rec_none {
  char unused;
} ct__rec_none;

/* EW (src/elementwise/ops.c): the elementwise op is the node's sub; what its ops.def bwd
 * column saves (S_IN: the inputs, S_OUT: the result) and the scalar arguments of its form. */
typedef struct ct__rec_ew {
  union {
    const ct_tensor *a;    /* input 0 */
    const ct_tensor *cond; /* where's condition (its input 0) */
  };
  const ct_tensor *b, *c; /* inputs 1 and 2 */
  const ct_tensor *out;   /* the result (S_OUT, S_INOUT) */
  int spos;               /* scalar forms: 2 for "a op s", 1 for "s op a"; 0 for tensors only */
  union {
    double scalar; /* the scalar operand of a scalar form */
    double slope;  /* leaky_relu's parameter */
    double lo;     /* clamp's lower bound (has_lo) */
  };
  double hi; /* clamp's upper bound (has_hi) */
  bool has_lo, has_hi;
} ct__rec_ew;

/* PERMUTE (permute, transpose; src/tensor/view.c): output dim k is input dim perm[k]. */
typedef struct ct__rec_permute {
  int perm[CT_MAX_DIMS];
} ct__rec_permute;

/* SLICE (slice, and the pieces of chunk and split; src/tensor/view.c, src/shape/assemble.c):
 * the output is the input's elements start, start + step, ... along dim. */
typedef struct ct__rec_slice {
  int dim;
  int64_t start, step;
} ct__rec_slice;

/* SUM, MEAN, PROD, AMAX, VAR, LOGSUMEXP (src/reduce/reduce.c): the reduced dims of the input
 * as bits (bit d: dim d reduced), whether they were kept; var's correction and whether it was
 * std. PROD, AMAX, VAR, LOGSUMEXP save the input and the result. */
typedef struct ct__rec_reduce {
  const ct_tensor *x, *out;
  uint32_t dims;
  bool keepdim;
  int64_t correction;
  bool std;
} ct__rec_reduce;

/* SOFTMAX, LOG_SOFTMAX (src/reduce/softmax.c): the dim (wrapped) and the result. */
typedef struct ct__rec_softmax {
  const ct_tensor *out;
  int dim;
} ct__rec_softmax;

/* MATMUL, LINEAR, ADDMM (src/linalg/matmul.c): the GEMM operands, each saved when the other
 * one's gradient needs it: a the left one (matmul's a, linear's x, addmm's mat1), b the right
 * one (b, linear's weight, mat2); addmm's beta and alpha. */
typedef struct ct__rec_matmul {
  const ct_tensor *a, *b;
  double beta, alpha;
} ct__rec_matmul;

/* CAT (cat, stack; src/shape/assemble.c): the result's dim; stack: input k is slice k of the
 * result with that dim removed. Each input's extent is its edge's. */
typedef struct ct__rec_cat {
  int dim;
  bool stack;
} ct__rec_cat;

/* FLIP (src/shape/reorder.c): the flipped dims, wrapped. */
typedef struct ct__rec_flip {
  int ndims;
  int dims[CT_MAX_DIMS];
} ct__rec_flip;

/* ROLL (src/shape/reorder.c): the shift, in [0, size), along dim. */
typedef struct ct__rec_roll {
  int64_t shift;
  int dim;
} ct__rec_roll;

/* REPEAT (src/shape/reorder.c): the repeats, one per output dim. */
typedef struct ct__rec_repeat {
  int64_t repeats[CT_MAX_DIMS];
} ct__rec_repeat;

/* TRIL (tril, triu; src/shape/reorder.c). */
typedef struct ct__rec_tril {
  int64_t diagonal;
  bool upper; /* triu */
} ct__rec_tril;

/* PAD (src/shape/reorder.c): the ct_pad_mode and the pads as given, (left, right) pairs from
 * the last dim. */
typedef struct ct__rec_pad {
  int mode;
  int npad;
  int64_t pad[2 * CT_MAX_DIMS];
} ct__rec_pad;

/* INDEX_SELECT, GATHER, SCATTER_ADD, EMBEDDING, MASKED_FILL, CUMSUM, CUMPROD (src/index/): the
 * dim (wrapped); the index (index_select, gather, sort/topk values, scatter_add, embedding), or
 * masked_fill's mask, or cumprod's input x, and cumprod's result. */
typedef struct ct__rec_index {
  union {
    const ct_tensor *index;
    const ct_tensor *mask;
    const ct_tensor *x;
  };
  const ct_tensor *out;
  int dim;
} ct__rec_index;

/* CONV (conv2d, conv1d; src/nn/conv.c): the input and weight (the weight's gradient reads x,
 * the input's w) and the geometry, (h, w) pairs; conv1d runs as a conv2d of height 1. */
typedef struct ct__rec_conv {
  const ct_tensor *x, *w;
  int stride[2], padding[2], dilation[2];
  int groups;
  bool one_d;
} ct__rec_conv;

/* MAX_POOL2D, AVG_POOL2D, ADAPTIVE_AVG_POOL2D (src/nn/pool.c): the pool's window as its kernels
 * take it (kh, kw, sh, sw, ph, pw, dh, dw; ct__nn_pool2d_backward); the mode is the node's sub
 * (CT__POOL_AVG or CT__POOL_AVG_EXCL for the averages); max pool saves x, whose first maximum
 * per window its gradient recomputes (the averages need only x's shape, the edge's). */
typedef struct ct__rec_pool {
  const ct_tensor *x;
  int win[8];
} ct__rec_pool;

/* LAYER_NORM, RMS_NORM (src/nn/norm.c; the node's sub is the mode): x, the weight as the kernel
 * read it (contiguous), the number of normalized elements per row, the parameters' dtype and
 * eps. The backward recomputes each row's mean and rstd from x. */
typedef struct ct__rec_norm {
  const ct_tensor *x, *w;
  int64_t nnorm;
  ct_dtype param_dtype;
  double eps;
} ct__rec_norm;

/* BATCH_NORM (src/nn/norm.c): x and the per-channel scale and shift the forward used (ss), so
 * a later update of the running statistics does not change the gradient. */
typedef struct ct__rec_batch_norm {
  const ct_tensor *x, *ss;
  bool training;
  ct_dtype param_dtype;
} ct__rec_batch_norm;

/* SDPA (src/nn/attention.c): q, k, v, the probabilities and the scale. */
typedef struct ct__rec_sdpa {
  const ct_tensor *q, *k, *v, *probs;
  double scale;
} ct__rec_sdpa;

/* DROPOUT (src/nn/dropout.c): the generator position the mask came from (the backward makes
 * it again) and p. */
typedef struct ct__rec_dropout {
  uint64_t seed, offset;
  double p;
} ct__rec_dropout;

/* CROSS_ENTROPY, NLL_LOSS (src/nn/loss.c): the logits (or log-probabilities), the targets, the
 * count of targets not ignored, and the loss's arguments; eps is the label smoothing. */
typedef struct ct__rec_class_loss {
  const ct_tensor *x, *target, *nvalid;
  int64_t ignore_index;
  int reduction; /* ct_reduction */
  bool cross_entropy;
  double eps;
} ct__rec_class_loss;

/* MSE_LOSS (src/nn/loss.c): both operands (as the forward computed them) and the reduction. */
typedef struct ct__rec_mse_loss {
  const ct_tensor *a, *b;
  int reduction; /* ct_reduction */
} ct__rec_mse_loss;

/* A node's record: the member its row names (grad_ops.def's rec column). */
typedef union ct__grad_rec {
  ct__rec_none none;
  ct__rec_ew ew;
  ct__rec_permute permute;
  ct__rec_slice slice;
  ct__rec_reduce reduce;
  ct__rec_softmax softmax;
  ct__rec_matmul matmul;
  ct__rec_cat cat;
  ct__rec_flip flip;
  ct__rec_roll roll;
  ct__rec_repeat repeat;
  ct__rec_tril tril;
  ct__rec_pad pad;
  ct__rec_index index;
  ct__rec_conv conv;
  ct__rec_pool pool;
  ct__rec_norm norm;
  ct__rec_batch_norm batch_norm;
  ct__rec_sdpa sdpa;
  ct__rec_dropout dropout;
  ct__rec_class_loss class_loss;
  ct__rec_mse_loss mse_loss;
} ct__grad_rec;

#endif
