/* Modules: layers with their parameters, composed into models (torch.nn.Module).
 *
 *   ct_module *model, *layers[3];
 *   ct_module_linear(&layers[0], dev, 64, 32, true);        // Linear(64, 32)
 *   ct_module_relu(&layers[1]);
 *   ct_module_linear(&layers[2], dev, 32, 10, true);
 *   ct_module_sequential(&model, layers, 3);                // names "0.weight", "2.bias", ...
 *   for (int i = 0; i < 3; i++) ct_module_release(layers[i]);   // the Sequential holds them
 *
 *   ct_tensor *params[16];
 *   int n;
 *   ct_module_parameters(params, 16, &n, model);            // borrowed, for an optimizer
 *   ct_adam_new(&opt, params, n, 1e-3, 0.9, 0.999, 1e-8, 0.0, false);
 *   ct_module_forward(&logits, model, x);                   // a new tensor, as every op
 *   ...
 *   ct_module_save_state_dict(model, "model.safetensors");
 *   ct_module_release(model);
 *
 * A ct_module is an opaque, atomically reference-counted handle (ct_module_retain /
 * ct_module_release; releasing NULL is a no-op). A module has a type name (PyTorch's class name:
 * "Linear", "Sequential", or a user module's), named parameters (leaf tensors that require
 * grad), named buffers (state that is saved but not trained: batch norm's running statistics),
 * named children (modules, each held by one reference) and a training flag.
 *
 * Names are PyTorch's state_dict keys: a module's own parameters ("weight", "bias"), its own
 * buffers, then each child's entries prefixed by the child's name and a dot, recursively
 * ("features.0.weight", "bn1.running_mean", "bn1.num_batches_tracked"). A Sequential names its
 * children "0", "1", .... A name is non-empty, has no '.', and is unique among a module's
 * parameters, buffers and children (PyTorch's rules for attributes).
 *
 * Constructors. Every built-in constructor is `ct_status ct_module_X(ct_module **out, ...)`,
 * stores a NEW module in *out (NULL on failure), and takes PyTorch's constructor arguments in
 * PyTorch's order, each explicitly (C has no default arguments; each comment gives PyTorch's
 * default, and a NULL stride/padding/dilation array means PyTorch's default as in nn.h). The
 * device d is where the parameters and buffers are created (NULL: the default device,
 * ct_device_default). Parameters are f32 (PyTorch's default dtype), initialized as PyTorch's
 * reset_parameters() does, drawing from the global generator of random.h (ct_manual_seed makes
 * models reproducible; values are not PyTorch's bits, the distributions are):
 *   Linear, Conv1d, Conv2d: weight ct_kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(fan_in),
 *     1/sqrt(fan_in)); bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (fan_in of the weight);
 *   Embedding: N(0, 1); BatchNorm, LayerNorm, RMSNorm: weight 1, bias 0; running_mean 0,
 *     running_var 1, num_batches_tracked 0 (an i64 0-d tensor, as PyTorch's).
 * A new module is in training mode (PyTorch's default).
 *
 * Borrowed results. ct_module_parameters and the lookups return pointers the module owns, valid
 * until the module changes them: ct_module_to (which replaces every tensor), adding to it, or
 * its release. Loading a state dict copies values INTO the existing tensors, so pointers (and an
 * optimizer made from them) stay valid.
 *
 * Statuses, unless a function says otherwise: CT_OK; CT_ERR_INVALID_ARGUMENT (NULL, a size or
 * option out of range, a bad name, naming the value); the statuses of the ops a constructor or
 * forward runs (nn.h, linalg.h, elementwise.h), with the message prefixed by the module's path
 * and type ("ct_module_forward: 2 (Linear): ..."); CT_ERR_OUT_OF_MEMORY.
 *
 * Thread safety: a module is used by one thread at a time (a training forward updates batch
 * norm's running statistics in place); distinct modules may be used concurrently. */
#ifndef CLTENSOR_MODULE_H
#define CLTENSOR_MODULE_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/device.h"
#include "cltensor/export.h"
#include "cltensor/io.h"
#include "cltensor/optim.h"
#include "cltensor/sched.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

typedef struct ct_module ct_module;

/* ---- Lifetime ---- */
/* Adds a reference and returns m (NULL stays NULL). */
CT_API ct_module *ct_module_retain(ct_module *m);
/* Destructor: drops a reference; the last one releases the module's tensors and children (and
 * calls a user module's destroy callback). NULL is a no-op. */
CT_API void ct_module_release(ct_module *m);

/* ---- Layers ---- */
/* torch.nn.Linear(in_features, out_features, bias=True): y = x @ weight^T + bias over x
 * [..., in_features]. weight [out_features, in_features], bias [out_features]. Sizes >= 0. */
CT_API ct_status ct_module_linear(ct_module **out, ct_device *d, int64_t in_features, int64_t out_features,
                                  bool bias);
/* torch.nn.Conv1d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
 * groups=1, bias=True), padding_mode 'zeros': ct_conv1d over x [N, C, L] or [C, L]. weight
 * [out_channels, in_channels / groups, kernel_size]. groups >= 1 dividing both channel counts,
 * kernel_size, stride, dilation >= 1, padding >= 0. */
CT_API ct_status ct_module_conv1d(ct_module **out, ct_device *d, int64_t in_channels, int64_t out_channels,
                                  int kernel_size, int stride, int padding, int dilation, int groups, bool bias);
/* torch.nn.Conv2d with kernel_size {kh, kw} (required), stride, padding, dilation as {h, w}
 * (NULL: {1, 1}, {0, 0}, {1, 1}), groups (1), bias (true): ct_conv2d over x [N, C, H, W] or
 * [C, H, W]. weight [out_channels, in_channels / groups, kh, kw]. */
CT_API ct_status ct_module_conv2d(ct_module **out, ct_device *d, int64_t in_channels, int64_t out_channels,
                                  const int kernel_size[2], const int stride[2], const int padding[2],
                                  const int dilation[2], int groups, bool bias);
/* torch.nn.Embedding(num_embeddings, embedding_dim): ct_embedding(weight, x) for integer
 * indices x of any shape, giving [..., embedding_dim]. weight [num_embeddings, embedding_dim].
 * (PyTorch's padding_idx, max_norm and sparse options are not offered.) */
CT_API ct_status ct_module_embedding(ct_module **out, ct_device *d, int64_t num_embeddings, int64_t embedding_dim);

/* ---- Normalization ---- */
/* torch.nn.BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True,
 * track_running_stats=True) over x [N, C] or [N, C, L], and BatchNorm2d over x [N, C, H, W]
 * (another rank: CT_ERR_SHAPE_MISMATCH, as PyTorch's "expected 2D or 3D input"). Training (or no
 * running statistics): the batch's statistics, updating running_mean/running_var in place
 * (running = (1 - momentum) running + momentum stat, the unbiased variance) and adding 1 to
 * num_batches_tracked; momentum NaN is PyTorch's None: the cumulative average, factor
 * 1 / num_batches_tracked (read back from the device at each training forward). Eval: the
 * running statistics. weight [C] = 1 and bias [C] = 0 when affine; buffers running_mean [C] = 0,
 * running_var [C] = 1, num_batches_tracked (i64, 0-d) when track_running_stats. eps > 0,
 * momentum in [0, 1] or NaN. */
CT_API ct_status ct_module_batch_norm1d(ct_module **out, ct_device *d, int64_t num_features, double eps,
                                        double momentum, bool affine, bool track_running_stats);
CT_API ct_status ct_module_batch_norm2d(ct_module **out, ct_device *d, int64_t num_features, double eps,
                                        double momentum, bool affine, bool track_running_stats);
/* torch.nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True): ct_layer_norm
 * over x's last ndim dims, which must equal normalized_shape (1 <= ndim <= CT_MAX_DIMS, sizes
 * >= 0). weight = 1 (and bias = 0 when bias) of normalized_shape when elementwise_affine. */
CT_API ct_status ct_module_layer_norm(ct_module **out, ct_device *d, int ndim, const int64_t *normalized_shape,
                                      double eps, bool elementwise_affine, bool bias);
/* torch.nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True): ct_rms_norm; eps NaN is
 * PyTorch's None (the input dtype's machine epsilon). weight = 1 of normalized_shape. */
CT_API ct_status ct_module_rms_norm(ct_module **out, ct_device *d, int ndim, const int64_t *normalized_shape,
                                    double eps, bool elementwise_affine);

/* ---- Attention ---- */
/* torch.nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False)
 * (add_bias_kv, add_zero_attn, kdim and vdim are not offered; dropout must be 0.0, since the
 * attention op has none). num_heads >= 1 divides embed_dim. Parameters under PyTorch's
 * state_dict names: in_proj_weight [3E, E] (q, k, v stacked), in_proj_bias [3E] when bias, and
 * the child out_proj, a Linear(E, E, bias): out_proj.weight, out_proj.bias. Initialized as
 * PyTorch's _reset_parameters: xavier_uniform_ on in_proj_weight, zero biases, out_proj.weight
 * as Linear's. batch_first: inputs and output [N, L, E]; else (PyTorch's default) [L, N, E];
 * unbatched [L, E] either way.
 * ct_module_forward(&y, m, x) is self-attention without a mask: PyTorch's m(x, x, x)[0]. */
CT_API ct_status ct_module_multihead_attention(ct_module **out, ct_device *d, int64_t embed_dim, int64_t num_heads,
                                               double dropout, bool bias, bool batch_first);
/* OUT: *out, MultiheadAttention.forward(query, key, value, attn_mask=attn_mask,
 * need_weights=False, is_causal=is_causal)[0]: query [L, N, E] (batch_first: [N, L, E]; or
 * [L, E]), key and value of S positions in the same layout. attn_mask (may be NULL), as
 * PyTorch's: [L, S] or [N * num_heads, L, S]; bool true where attending is NOT allowed, or a
 * float mask added to the scores. is_causal: query i attends keys j <= i only (PyTorch takes it
 * as a hint that attn_mask is that mask and needs both; here either alone works, and both are
 * applied). When query, key and value are the same tensor the projection is one product (as
 * PyTorch's). Not offered: key_padding_mask (fold it into a [N * num_heads, L, S] attn_mask) and
 * the attention weights (need_weights). The result is a new tensor (with batch_first false, a transposed view of one);
 * recorded for autograd. CT_ERR_INVALID_ARGUMENT (NULL, m not a MultiheadAttention),
 * CT_ERR_SHAPE_MISMATCH (ranks, a last dim other than E, a mask that doesn't fit), and the
 * statuses of ct_linear and ct_scaled_dot_product_attention. */
CT_API ct_status ct_module_multihead_attention_forward(ct_tensor **out, ct_module *m, const ct_tensor *query,
                                                       const ct_tensor *key, const ct_tensor *value,
                                                       const ct_tensor *attn_mask, bool is_causal);

/* ---- Without parameters ---- */
/* torch.nn.Dropout(p=0.5): ct_dropout(x, p, training flag); p in [0, 1]. */
CT_API ct_status ct_module_dropout(ct_module **out, double p);
/* torch.nn.ReLU(), GELU(approximate='none' | 'tanh': approximate_tanh), SiLU(), Sigmoid(),
 * Tanh(), Softplus() (beta 1, threshold 20 only), LeakyReLU(negative_slope=0.01),
 * Softmax(dim), LogSoftmax(dim), Identity(): the ops of elementwise.h and reduce.h. */
CT_API ct_status ct_module_relu(ct_module **out);
CT_API ct_status ct_module_gelu(ct_module **out, bool approximate_tanh);
CT_API ct_status ct_module_silu(ct_module **out);
CT_API ct_status ct_module_sigmoid(ct_module **out);
CT_API ct_status ct_module_tanh(ct_module **out);
CT_API ct_status ct_module_softplus(ct_module **out);
CT_API ct_status ct_module_leaky_relu(ct_module **out, double negative_slope);
CT_API ct_status ct_module_softmax(ct_module **out, int dim);
CT_API ct_status ct_module_log_softmax(ct_module **out, int dim);
CT_API ct_status ct_module_identity(ct_module **out);
/* torch.nn.MaxPool2d(kernel_size, stride=None, padding=0) and AvgPool2d (count_include_pad):
 * kernel {kh, kw} required, stride NULL = the kernel, padding NULL = {0, 0} (ct_max_pool2d). */
CT_API ct_status ct_module_max_pool2d(ct_module **out, const int kernel_size[2], const int stride[2],
                                      const int padding[2]);
CT_API ct_status ct_module_avg_pool2d(ct_module **out, const int kernel_size[2], const int stride[2],
                                      const int padding[2]);
/* torch.nn.AdaptiveAvgPool2d(output_size {oh, ow}), each >= 0. */
CT_API ct_status ct_module_adaptive_avg_pool2d(ct_module **out, const int64_t output_size[2]);
/* torch.nn.Flatten(start_dim=1, end_dim=-1): dims start..end of x merged into one (negative
 * dims count from the end of x's dims); a view when x's strides allow it, else a copy
 * (ct_reshape). A 0-d x becomes [1], as torch.flatten. start must not come after end. */
CT_API ct_status ct_module_flatten(ct_module **out, int start_dim, int end_dim);

/* ---- Containers ---- */
/* torch.nn.Sequential(*mods): forward runs the n >= 0 children in order, each on the previous
 * one's output (n = 0: the identity, a new reference to x). The children are named "0" ...
 * "n-1" and RETAINED (release your own references when you no longer need them); a NULL entry
 * is CT_ERR_INVALID_ARGUMENT. The same module may appear twice (its parameters are listed once).
 * Named children, as nn.Sequential(OrderedDict(...)) or add_module: ct_module_add_child(seq,
 * name, m) appends m under name (forward runs the children in the order they were added). */
CT_API ct_status ct_module_sequential(ct_module **out, ct_module *const *mods, int n);
/* Sequential.append: adds child (retained) under the next index. CT_ERR_INVALID_ARGUMENT when seq
 * is not a Sequential. */
CT_API ct_status ct_module_append(ct_module *seq, ct_module *child);

/* ---- User-defined modules ----
 * A module whose forward is a C function: give it children, parameters and buffers by name in
 * its constructor, and reach them in forward with the lookups below.
 *
 *   static ct_status mlp_forward(ct_tensor **y, ct_module *self, const ct_tensor *x, void *user) {
 *     ct_tensor *h = NULL, *a = NULL;
 *     ct_status st = ct_module_forward(&h, ct_module_get_submodule(self, "fc1"), x);
 *     if (st == CT_OK) st = ct_relu(&a, h);
 *     if (st == CT_OK) st = ct_module_forward(y, ct_module_get_submodule(self, "fc2"), a);
 *     ct_release(a); ct_release(h);
 *     return st;
 *   }
 *   ct_module_custom(&m, "MLP", mlp_forward, NULL, NULL);
 *   ct_module_linear(&fc1, dev, 64, 32, true); ct_module_add_child(m, "fc1", fc1); ct_module_release(fc1);
 *
 * forward must store a new tensor in *y and return CT_OK, or return a failing status (it should
 * set the message through the library's calls; *y is then released if set). *y must come from a
 * library call (an op, a view, ct_module_forward, or kept out of the callback's own scope with
 * ct_scope_end_keep): when the caller has a scope open, that scope owns it once, as any result
 * (a callback returning its input returns a view of it, not ct_retain(x)). type_name NULL means
 * "Module". destroy (may be NULL) is called with user once, by the last release. */
typedef ct_status (*ct_module_forward_fn)(ct_tensor **y, ct_module *self, const ct_tensor *x, void *user);
typedef void (*ct_module_destroy_fn)(void *user);
CT_API ct_status ct_module_custom(ct_module **out, const char *type_name, ct_module_forward_fn forward, void *user,
                                  ct_module_destroy_fn destroy);
/* Registers child under name (retained). Any module may take children (as PyTorch's
 * add_module); a child that would make a cycle (m itself, or a module that contains m) is
 * CT_ERR_INVALID_ARGUMENT. */
CT_API ct_status ct_module_add_child(ct_module *m, const char *name, ct_module *child);
/* Registers t (retained) as a parameter (nn.Parameter): t must be a floating-point leaf; it is
 * marked to require grad (ct_set_requires_grad(t, true)); turn that off afterwards to freeze it
 * (it stays a parameter, saved and loaded). */
CT_API ct_status ct_module_add_parameter(ct_module *m, const char *name, ct_tensor *t);
/* Registers t (retained) as a buffer (register_buffer, persistent): saved and loaded, moved by
 * ct_module_to, not trained. Any dtype; t must not require grad. */
CT_API ct_status ct_module_add_buffer(ct_module *m, const char *name, ct_tensor *t);
/* The user pointer given to ct_module_custom (NULL for built-in modules and NULL m). */
CT_API void *ct_module_user_data(const ct_module *m);

/* ---- Lookups (borrowed results; NULL, with ct_last_error() naming what was missing, when
 * there is none). path is a dotted name relative to m: "features.0", "fc.weight". ---- */
CT_API ct_module *ct_module_get_submodule(const ct_module *m, const char *path);
CT_API ct_tensor *ct_module_get_parameter(const ct_module *m, const char *path);
CT_API ct_tensor *ct_module_get_buffer(const ct_module *m, const char *path);
/* PyTorch's class name ("Linear", "Sequential", a user module's type_name); "" for NULL. */
CT_API const char *ct_module_type_name(const ct_module *m);

/* ---- Running ---- */
/* OUT: *y, m's forward of x (a new tensor; NULL on failure). The ops record autograd as usual. */
CT_API ct_status ct_module_forward(ct_tensor **y, ct_module *m, const ct_tensor *x);
/* Sets the training flag of m and every module under it (model.train(mode)); ct_module_eval(m)
 * is ct_module_train(m, false). They affect Dropout and BatchNorm (and what user forwards read
 * with ct_module_is_training). */
CT_API ct_status ct_module_train(ct_module *m, bool mode);
CT_API ct_status ct_module_eval(ct_module *m);
CT_API bool ct_module_is_training(const ct_module *m); /* false for NULL */

/* ---- Parameters and buffers ----
 * The lists below fill caller arrays: cap entries of room; *n gets the number of entries. cap 0
 * is a size query: only *n is set (the arrays may be NULL). When the entries do not fit:
 * CT_ERR_INVALID_ARGUMENT (the message gives the count), *n the count, nothing stored. Tensors
 * and names are borrowed (see "Borrowed results" above; a name stays valid until the next
 * ct_module_named_* call on m). NULL n or m, cap < 0, or cap > 0 with a NULL array:
 * CT_ERR_INVALID_ARGUMENT. */
/* model.parameters(): every parameter of m and the modules under it, in state_dict order, each
 * tensor once (a shared parameter is listed where it first appears), ready for ct_sgd_new /
 * ct_adam_new. */
CT_API ct_status ct_module_parameters(ct_tensor **params, int cap, int *n, const ct_module *m);
/* model.named_parameters(): the same parameters with their state_dict names. */
CT_API ct_status ct_module_named_parameters(const char **names, ct_tensor **params, int cap, int *n,
                                            ct_module *m);
/* model.named_buffers(): the buffers (running_mean, running_var, num_batches_tracked, ...). */
CT_API ct_status ct_module_named_buffers(const char **names, ct_tensor **buffers, int cap, int *n,
                                         ct_module *m);
/* model.zero_grad(): drops every parameter's gradient (set_to_none). */
CT_API ct_status ct_module_zero_grad(ct_module *m);

/* Moves every parameter and buffer of m (and the modules under it) to device d (model.to(d)):
 * each becomes a copy on d (tensors already on d stay as they are) and a parameter stays a LEAF
 * that requires grad exactly when it did (unlike ct_to_device of a tensor that requires grad,
 * which records a copy); a gradient moves with its parameter; a tensor shared by several
 * modules stays shared. All copies are made before anything is replaced: on failure m is
 * unchanged. Optimizers hold the old tensors: make them after ct_module_to (as in PyTorch). */
CT_API ct_status ct_module_to(ct_module *m, ct_device *d);
/* Casts every floating parameter and buffer of m (and the modules under it) to the floating
 * dtype dt: model.to(dtype), model.half() (CT_F16), model.bfloat16() (CT_BF16), model.float()
 * (CT_F32), model.double() (CT_F64). As in PyTorch, integer and bool tensors keep their dtype
 * (BatchNorm's num_batches_tracked stays i64). Otherwise as ct_module_to: parameters stay leaves
 * that require grad exactly when they did, a gradient is cast with its parameter, shared
 * tensors stay shared, tensors already in dt stay as they are, and on failure m is unchanged;
 * make optimizers after the cast. Each value rounds to nearest even as ct_cast() rounds it.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for NULL m or an integer, bool or invalid dt;
 * ct_cast()'s errors (f64 on a device without cl_khr_fp64, out of memory). */
CT_API ct_status ct_module_to_dtype(ct_module *m, ct_dtype dt);

/* ---- State dicts (safetensors files) ---- */
/* OUT: *out, a new ct_safetensors (io.h) holding m's state_dict: every parameter and buffer
 * under its state_dict name, in state_dict order; the collection holds references to m's own
 * tensors (not copies, as PyTorch's state_dict shares storage). Free it with
 * ct_safetensors_free. */
CT_API ct_status ct_module_state_dict(ct_safetensors **out, const ct_module *m);
/* Writes m's state_dict to a safetensors file (atomically; ct_safetensors_save). The file
 * loads in PyTorch with model.load_state_dict(safetensors.torch.load_file(path)). CT_ERR_IO. */
CT_API ct_status ct_module_save_state_dict(const ct_module *m, const char *path);
/* model.load_state_dict(safetensors.torch.load_file(path), strict): copies each entry of the
 * file INTO the tensor of the same name (with grad mode off, so parameters stay leaves; their
 * versions move). The file is read onto the device of m's first tensor; entries are copied to
 * each tensor's device. A file written by safetensors.torch.save_file(model.state_dict(), path)
 * loads into the same architecture built here.
 * strict (PyTorch's default): any missing key (in m, not in the file), unexpected key (in the
 * file, not in m), shape mismatch or dtype mismatch is CT_ERR_INVALID_ARGUMENT, the message
 * naming every one of them, and NOTHING is loaded. (PyTorch converts dtypes silently; here a
 * mismatch is an error, so that an f64 checkpoint is not truncated unnoticed: load it with
 * ct_safetensors_load_as and ct_module_load_state_dict_from.)
 * Not strict: every entry whose name, shape and dtype match is loaded, the rest skipped; CT_OK,
 * and ct_module_load_report(m) tells what was missing, unexpected and skipped.
 * Also CT_ERR_IO, CT_ERR_FORMAT (the file), CT_ERR_OUT_OF_MEMORY and the device statuses. */
CT_API ct_status ct_module_load_state_dict(ct_module *m, const char *path, bool strict);
/* As ct_module_load_state_dict from a collection already in memory (Candle's VarBuilder: any
 * ct_safetensors, e.g. one also holding an optimizer's state). */
CT_API ct_status ct_module_load_state_dict_from(ct_module *m, const ct_safetensors *st, bool strict);
/* The last load's report, owned by m (valid until the next load or m's release): "loaded 10 of
 * 12; missing: a.b, c; unexpected: d; shape mismatch: e (file [3], model [4]); dtype mismatch: f
 * (file f64, model f32)" (parts with nothing to say are left out); "" before any load or for NULL. */
CT_API const char *ct_module_load_report(const ct_module *m);

/* ---- Training checkpoints ---- */
/* One safetensors file holding what resuming a training run needs (PyTorch's
 * torch.save({"model": ..., "optimizer": ..., "scheduler": ..., "step": ...}) plus the
 * generator): m's state_dict under its own names (the file loads into PyTorch's model with
 * load_state_dict(..., strict=False)), the optimizer's state (ct_optimizer_save: "optim.*"),
 * the scheduler's (ct_lr_scheduler_save: "sched.*" metadata), and as metadata "train.step" (step,
 * >= 0) and "train.rng_seed" / "train.rng_offset" (the global generator, ct_rng_get_state, so
 * that dropout masks after a resume are the uninterrupted run's). opt and sched may be NULL
 * (left out). Written atomically (ct_safetensors_save): a failure leaves no file, or the old one.
 * m NULL, path NULL, step < 0, or a state_dict name beginning "optim." (it would collide with
 * the optimizer's entries: name the child otherwise): CT_ERR_INVALID_ARGUMENT. Also CT_ERR_IO,
 * CT_ERR_OUT_OF_MEMORY and the device statuses of the copies. */
CT_API ct_status ct_checkpoint_save(const ct_module *m, const ct_optimizer *opt, const ct_lr_scheduler *sched,
                                    int64_t step, const char *path);
/* Resumes from ct_checkpoint_save's file: loads the state_dict into m STRICTLY (every parameter
 * and buffer, shapes and dtypes equal; the optimizer's entries are not the model's), the
 * optimizer (ct_optimizer_load: same kind, groups, shapes) and the scheduler (same kind) when
 * given (the file must then hold them), the global generator state, and *step (may be NULL).
 * The file is read onto the device of m's first tensor. Everything is read and checked before
 * anything changes (the optimizer's state is copied onto its devices first, so loading needs
 * that much device memory beside the current state): on any mismatch or malformed entry
 * (CT_ERR_INVALID_ARGUMENT naming it; CT_ERR_IO and CT_ERR_FORMAT for the file; also
 * CT_ERR_OUT_OF_MEMORY) m (its load report too), opt, sched, the generator and *step are as they
 * were. Then the model's values are copied: only a device failure there (CT_ERR_OPENCL) can
 * leave m partly loaded, with opt, sched, the generator and *step unchanged; after it nothing
 * can fail. Make opt and sched over m's parameters as the saving run did, before loading. */
CT_API ct_status ct_checkpoint_load(int64_t *step, ct_module *m, ct_optimizer *opt, ct_lr_scheduler *sched,
                                    const char *path);

CT_END_DECLS

#endif
