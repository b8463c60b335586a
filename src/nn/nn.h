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
/* ct_batch_norm that also adds 1 to BatchNorm's num_batches_tracked nbt (i64, one element; NULL:
 * none) when training, in the statistics kernel instead of a kernel of its own. Training with
 * x's C == 0 runs no kernel and leaves nbt alone. */
ct_status ct__batch_norm_tracked(ct_tensor **out, const ct_tensor *x, ct_tensor *running_mean,
                                 ct_tensor *running_var, ct_tensor *nbt, const ct_tensor *weight,
                                 const ct_tensor *bias, bool training, double momentum, double eps);
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

/* ---- What conv.c shares with conv_bwd.c ---- */

/* A convolution's geometry: x [N, C, H, W], w [Cout, C / groups, kh, kw], output [N, Cout, OH, OW],
 * stride (sh, sw), padding (ph, pw), dilation (dh, dw). fn names the public call. */
struct ct__conv {
  const char *fn;
  int64_t N, C, H, W, Cout, kh, kw, OH, OW;
  int sh, sw, ph, pw, dh, dw, groups;
};

/* Checks the arguments of a conv over 4-D x4 and w (one_d: ct_conv1d's messages, which name the
 * width's values as index 0) and fills cv (cv->fn set by the caller). */
ct_status ct__conv_check(struct ct__conv *cv, const ct_tensor *x4, const ct_tensor *w, const ct_tensor *bias,
                         const int stride[2], const int padding[2], const int dilation[2], int groups, bool one_d);
/* *out = the conv of cv over x4 [N, C, H, W] and w4 (x4's dtype; the path picked as ct_conv2d's). */
ct_status ct__conv_run(ct_tensor **out, const struct ct__conv *cv, const ct_tensor *x4, const ct_tensor *w4,
                       const ct_tensor *bias);
/* The kernel arguments x, xs, C, H, W and kh ... OW of the conv kernels. */
void ct__conv_karg_xgeom(struct ct__kargs *a, const ct_tensor *x4, const struct ct__conv *cv);
void ct__conv_karg_window(struct ct__kargs *a, const struct ct__conv *cv);
/* Launches kcol (conv_im2col): the columns of images n0 .. n0 + nimg of x4 into col, element
 * (img, r, p) at img * is + r * rs + p. */
ct_status ct__conv_im2col(ct__kernel *kcol, ct_device *d, const struct ct__conv *cv, const ct_tensor *x4, int64_t n0,
                          int64_t nimg, const ct_tensor *col, int64_t is, int64_t rs);
/* The "tall" zero-padded f32 layout of the blocked paths (kernels/conv.cl, conv_pad) for images
 * of H x W padded by (ph, pw) into outputs of OH x OW: per channel, rows of S floats, Rimg rows
 * an image after ph leading zero rows, channels cs floats apart for nimg images (with at least
 * pw + 16 zeros after the last image's rows). */
struct ct__tall {
  int64_t S, Rimg, cs;
};
void ct__conv_tall(struct ct__tall *tl, int64_t H, int64_t W, int ph, int pw, int64_t OH, int64_t OW, int64_t nimg);
/* Launches k (conv_pad): images n0 .. n0 + nimg of t4 [N, C, H, W] (read through its strides)
 * into dst in the tall layout tl (its ph rows and pw columns of zeros before the values), and
 * tail_n values tail_v after its C channels (the slack the blocked kernels read past them is
 * only ever read for discarded lanes, but written all the same, so that no kernel reads memory
 * nothing wrote: strict simulators flag it). */
ct_status ct__conv_pad(ct__kernel *k, ct_device *d, const ct_tensor *t4, int ph, int pw, const struct ct__tall *tl,
                       int64_t n0, int64_t nimg, const ct_tensor *dst, int64_t tail_n, float tail_v,
                       const char *fn);
/* Which path ct__conv_run takes for cv over x of dtype dt on d (CT__CONV_DIRECT, _GEMM, _BLOCKED). */
int ct__conv_path(const struct ct__conv *cv, ct_dtype dt, const ct_device *d);
/* The blocked kernels' register blocking for a device (kernels/conv.cl, CT_VL and the rest): its
 * SIMD width (CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: 16 on AVX-512, 8 on AVX2, 4 on SSE and NEON)
 * decides how many accumulators fit its registers. opts: the kernels' build options. */
struct ct__conv_blocking {
  int vl, cb, nv;   /* the forward: cb output channels x nv vectors of vl positions */
  int wcb, wtb;     /* the weight gradient: wcb output channels x wtb taps */
  char opts[96];
};
void ct__conv_blocking(struct ct__conv_blocking *b, const ct_device *d);
/* Tests: 0 (default) the device's width, else this many lanes (4, 8 or 16) whatever the device. */
extern int ct__conv_lanes;
/* The floats the blocked kernel may read past the last channel of a tall buffer (tl) for cv. */
int64_t ct__conv_blocked_slack(const struct ct__conv *cv, const struct ct__tall *tl);
/* *out (new, [N, Cout, OH, OW] of dtype dt) = the stride-1 conv of cv on the blocked kernel, no
 * bias, from xp: all N images already padded in the tall layout tl (cv's padding), with
 * ct__conv_blocked_slack floats after its channels; w4 [Cout, C / groups, kh, kw], or with flip
 * the weight [C, Cout / groups, kh, kw] of the conv whose input gradient cv computes, used
 * flipped in both window dims and transposed per group (conv_wflip's result, packed directly). */
ct_status ct__conv_blocked_padded(ct_tensor **out, const struct ct__conv *cv, const ct_tensor *xp,
                                  const struct ct__tall *tl, const ct_tensor *w4, bool flip, ct_dtype dt);
/* The device's GEMM route state (its failure as cv->fn's error), and one GEMM on that route
 * (batch dims simplified first). */
struct ct__gemm_state;
struct ct__gemm_op;
ct_status ct__conv_gemm_state(struct ct__gemm_state **s, ct_device *d, const char *fn);
ct_status ct__conv_gemm(struct ct__gemm_state *s, ct_device *d, struct ct__gemm_op *op);
/* *op zeroed, then a GEMM m x n x k of dtype dt, alpha 1 and beta, for fn; the caller sets the
 * batch and the matrices. */
void ct__conv_gemm_op(struct ct__gemm_op *op, const char *fn, ct_dtype dt, int64_t m, int64_t n, int64_t k,
                      double beta);

/* ---- Backward (conv_bwd.c, pool.c), for the formulas of src/autograd/grad_conv.c ---- */

/* The gradients of ct_conv2d (one_d false) or ct_conv1d (one_d true: x, w and g of ct_conv1d's
 * ranks, stride/padding/dilation as {1, value}) for the output gradient g: *gx (x's shape and
 * dtype) when gx is not NULL, *gw (w's shape; w's dtype, or f32 for f16/bf16) when gw is not
 * NULL, *gb ([Cout], the bias gradient: g summed over all but the channel) when gb is not NULL
 * (the blocked weight gradient computes it in the same pass, with a weight gradient wanted or
 * not). x and g are read through their strides. Deterministic: no atomics, every sum in one
 * fixed order. Paths (ct__nn_conv_bwd_path): the input gradient of a stride-1 conv is the
 * stride-1 conv of g with the flipped, transposed weight (ct_conv2d's paths, so the blocked
 * kernel on CPU devices), else GEMM w^T g + col2im; the weight (and bias) gradient is the
 * blocked conv_wgrad kernel for stride-1 non-f64 convs on CPU devices, else im2col + one GEMM
 * per group and chunk of images reducing over images and positions at once (and ct_sum). */
ct_status ct__nn_conv_backward(ct_tensor **gx, ct_tensor **gw, ct_tensor **gb, const ct_tensor *g, const ct_tensor *x,
                               const ct_tensor *w, const int stride[2], const int padding[2], const int dilation[2],
                               int groups, bool one_d, const char *fn);
/* Which backward paths run: AUTO as above; GEMM forces GEMM + col2im for the input gradient and
 * im2col + GEMM for the weight gradient; for tests, not for concurrent change. */
enum { CT__CONV_BWD_AUTO, CT__CONV_BWD_GEMM };
extern int ct__nn_conv_bwd_path;
/* The blocked weight gradient's positions per work-item: ct__nn_wgrad_positions (1024), or as
 * many as fit ct__nn_wgrad_group_bytes of padded x and g (1 MiB); tests lower both to make
 * several position groups. Not for concurrent change. */
extern int64_t ct__nn_wgrad_positions, ct__nn_wgrad_group_bytes;

/* conv1d's [N, C, L] or [C, L] tensor (x or an output gradient) as [N, C, 1, L]. */
ct_status ct__nn_conv1d_view4(ct_tensor **out, const ct_tensor *t);

/* pool.c's modes (the kernels' mode argument): AVG counts the padding (count_include_pad),
 * AVG_EXCL does not. */
enum { CT__POOL_MAX, CT__POOL_AVG, CT__POOL_ADAPTIVE, CT__POOL_AVG_EXCL };

/* The input gradient of pool2d (pool.c): g the output gradient ([N, C, OH, OW] or unbatched,
 * as the op's output), x the op's input (needed for max, whose gradient goes to the first
 * maximum of each window, recomputed; NULL for the averages), xndim/xshape/dt/d the input's
 * geometry; mode and win[8] (kh, kw, sh, sw, ph, pw, dh, dw) as the forward's. *gx has the
 * input's shape and dtype. */
ct_status ct__nn_pool2d_backward(ct_tensor **gx, const ct_tensor *g, const ct_tensor *x, int xndim,
                                 const int64_t *xshape, ct_dtype dt, ct_device *d, int mode, const int win[8],
                                 const char *fn);

/* The host attention (attention_host.c): where d's GEMMs take the host route and the device runs
 * native kernels, an unmasked attention of f32/f64 q [batch..., L, E] (expanded to the batch
 * shape bshape, nb dims), k [..., S, E] and v [..., S, Ev] as one native command per half of
 * the batch. *p_out gets the probabilities ([batch..., L, S], contiguous), *o_out the result
 * ([batch..., L, Ev]; with nb >= 2 over memory laid out [..., L, batch[nb-1], Ev]). *done false
 * when it doesn't apply (nothing enqueued, outputs untouched). */
ct_status ct__sdpa_host(bool *done, ct_tensor **p_out, ct_tensor **o_out, const ct_tensor *q, const ct_tensor *k,
                        const ct_tensor *v, int nb, const int64_t *bshape, bool causal, double scale,
                        const char *fn);
/* The attention's backward as one native command (attention_host.c), where the forward's host
 * command could run and all three gradients are wanted: q, k, v and the output's gradient g of
 * p's dtype (f32/f64) and p's batch shape (no broadcast batch dims), p the saved probabilities.
 * *dq, *dk, *dv get new tensors (with two or more batch dims in the forward result's layout).
 * *done false when it doesn't apply (nothing enqueued). */
ct_status ct__sdpa_host_backward(bool *done, ct_tensor **dq, ct_tensor **dk, ct_tensor **dv, const ct_tensor *q,
                                 const ct_tensor *k, const ct_tensor *v, const ct_tensor *p, const ct_tensor *g,
                                 double scale, const char *fn);
/* Batches of at least this many multiply-adds (both products) are cut into parts shared with
 * the device's second worker; tests lower it. */
extern int64_t ct__sdpa_split_min;
/* The host softmax's vector width: 0 (default) the widest the CPU has (16 lanes on AVX-512, 8 on
 * AVX2, else 4); 4, 8 or 16 the widest the CPU has up to that. Tests run each. */
extern int ct__sdpa_host_lanes;

#endif
