/* Helpers shared by the nn ops (conv.c, pool.c, norm.c; attention.c, dropout.c, loss.c). */
#ifndef CT_NN_NN_H
#define CT_NN_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/nn.h"
#include "core/error.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "tensor/tensor.h"

/* CT_ERR_DTYPE_MISMATCH unless t is a float dtype the device computes: "<fn>: <what> has dtype
 * <name>; ... takes f16, bf16, f32 or f64". */
ct_status ct__nn_check_float(const char *fn, const char *what, const ct_tensor *t);

/* x as a 4-D [N, C, H, W] view: x itself (retained) when it has 4 dims, a [1, C, H, W] view of
 * an unbatched [C, H, W] x. CT_ERR_SHAPE_MISMATCH for other ranks, naming x's shape. */
ct_status ct__nn_batched4(ct_tensor **out, const ct_tensor *x, const char *fn);

/* Drops dim 0 of a [1, ...] result made for an unbatched input: *t is replaced by the view. */
ct_status ct__nn_unbatch(ct_tensor **t);


/* Launches k over a 3-D range n0 x n1 x n2 (the 1-D launch is ct__launch1(), kernel/kargs.h;
 * each extent rounded up to the work-group shape, so the kernel checks each id against its
 * extent): ends a's list, naming fn, and unlocks k. For kernels that would otherwise split a 1-D
 * index into coordinates with 64-bit divisions, which cost more than their arithmetic on CPUs. */
ct_status ct__nn_launch3(ct__kernel *k, struct ct__kargs *a, ct_device *d, int64_t n0, int64_t n1, int64_t n2,
                         const char *fn);

/* The bound on conv's column buffer in bytes (at least one image's columns are used whatever
 * it says): 64 MiB. Tests lower it to make the chunking over the batch run on small inputs; not
 * for concurrent change. */
extern int64_t ct__nn_col_bytes;

/* Which conv path runs (conv.c): AUTO picks (direct for few products per output, blocked for
 * stride-1 non-f64 convs on CPU devices, else im2col + GEMM); tests force the others. The
 * blocked path falls back to GEMM where it does not apply (stride > 1, f64). */
enum { CT__CONV_AUTO, CT__CONV_DIRECT, CT__CONV_GEMM, CT__CONV_BLOCKED };
extern int ct__nn_conv_path;

/* ---- backward kernels of norm.c, attention.c, dropout.c, loss.c (called by the formulas of
 * src/autograd/grad_nn.c). Each makes the gradients whose out-pointer is not NULL (new tensors;
 * a float dtype the engine casts to the input's); g is the output's gradient, any strides. */

/* layer_norm (mode 0) / rms_norm (mode 1) of x over its last nnorm dims with eps; w the
 * contiguous weight the forward read or NULL; pd the forward's parameter dtype (its program). */
ct_status ct__norm_backward(ct_tensor **dx, ct_tensor **dw, ct_tensor **db, const ct_tensor *x, const ct_tensor *g,
                            const ct_tensor *w, int nnorm, double eps, int mode, ct_dtype pd, const char *fn);
/* batch_norm: ss the forward's per-channel [scale, shift, mean, invstd] (NULL when it computed
 * nothing); training: the statistics were the batch's (they depend on x). */
ct_status ct__bn_backward(ct_tensor **dx, ct_tensor **dw, ct_tensor **db, const ct_tensor *x, const ct_tensor *g,
                          const ct_tensor *ss, bool training, ct_dtype pd, const char *fn);
/* cross_entropy (ce) / nll_loss: the gradient with respect to x (logits / log-probabilities) of
 * the forward with these arguments; nvalid MEAN's divisor (the forward's 0-d count). */
ct_status ct__class_loss_backward(ct_tensor **dx, const ct_tensor *x, const ct_tensor *target, const ct_tensor *g,
                                  const ct_tensor *nvalid, int64_t ignore_index, double eps, ct_reduction r, int ce,
                                  const char *fn);
/* scaled_dot_product_attention: p the forward's probabilities ([B..., L, S], contiguous, f32 or
 * f64), scale the one it used; dmask the gradient of an additive float mask ([B..., L, S]). */
ct_status ct__sdpa_backward(ct_tensor **dq, ct_tensor **dk, ct_tensor **dv, ct_tensor **dmask, const ct_tensor *q,
                            const ct_tensor *k, const ct_tensor *v, const ct_tensor *p, const ct_tensor *g,
                            double scale);
/* dropout: g * mask / (1 - p), the mask of the forward's Philox stream (seed, offset). */
ct_status ct__dropout_backward(ct_tensor **dx, const ct_tensor *g, double p, uint64_t seed, uint64_t offset,
                               const char *fn);

#endif
