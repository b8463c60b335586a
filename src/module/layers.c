/* The modules with parameters: Linear, Conv1d/2d, Embedding, BatchNorm1d/2d, LayerNorm, RMSNorm,
 * each created as PyTorch's constructor and reset_parameters() create it and run through the
 * functional op of nn.h / linalg.h / index.h. */
#include <math.h>
#include <string.h>

#include "cltensor/elementwise.h"
#include "cltensor/index.h"
#include "cltensor/init.h"
#include "cltensor/linalg.h"
#include "cltensor/nn.h"
#include "cltensor/shape.h"
#include "core/error.h"
#include "module/module.h"
#include "nn/nn.h"
#include "tensor/tensor.h"

/* A new uninitialized tensor on d (the message names the constructor on failure). */
static ct_status new_tensor(ct_tensor **t, ct_device *d, ct_dtype dt, int ndim, const int64_t *shape,
                            const char *fn) {
  ct_status st = ct_empty(t, d, dt, ndim, shape);
  if (st != CT_OK) ct__error_append(" (%s)", fn);
  return st;
}

/* PyTorch's Linear/Conv reset_parameters: kaiming_uniform_(weight, a=sqrt(5)), and the bias
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (bound 0 when fan_in is 0). */
static ct_status add_weight_bias(ct_module *m, ct_device *d, int ndim, const int64_t *wshape, bool bias,
                                 const char *fn) {
  ct_tensor *w = NULL, *b = NULL;
  CT__TRY(new_tensor(&w, d, CT_F32, ndim, wshape, fn));
  ct_status st = ct_kaiming_uniform_(w, sqrt(5.0), CT_FAN_IN, CT_NONLINEARITY_LEAKY_RELU);
  int64_t fan_in = 0;
  if (st == CT_OK) st = ct_calculate_fan_in_and_fan_out(&fan_in, NULL, w);
  if (st != CT_OK) {
    ct_release(w);
    return st;
  }
  CT__TRY(ct__module_own_param(m, "weight", w, fn));
  if (!bias) return CT_OK;
  CT__TRY(new_tensor(&b, d, CT_F32, 1, wshape, fn));
  double bound = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0.0;
  st = ct_uniform_(b, -bound, bound);
  if (st != CT_OK) {
    ct_release(b);
    return st;
  }
  return ct__module_own_param(m, "bias", b, fn);
}

static ct_status check_size(int64_t v, const char *what, int64_t min, const char *fn) {
  return v >= min ? CT_OK : ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s = %lld, must be >= %lld", fn, what,
                                      (long long)v, (long long)min);
}

/* The start of the Linear and Embedding constructors: out checked and NULLed, their two sizes
 * (names[i] = v[i]) >= 0, d resolved (ct__module_device), *m a new module of kind. */
static ct_status begin_sized(ct_module **m, ct_module **out, ct_device **d, const ct__module_kind *kind,
                             const int64_t v[2], const char *const names[2], const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  for (int i = 0; i < 2; i++) CT__TRY(check_size(v[i], names[i], 0, fn));
  CT__TRY(ct__module_device(d, *d, fn));
  return ct__module_new(m, kind, fn);
}

/* ---- Linear ---- */

static ct_status linear_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return ct_linear(y, x, ct__module_param(m, "weight"), ct__module_param(m, "bias"));
}

static const ct__module_kind k_linear = {"Linear", linear_forward};

ct_status ct_module_linear(ct_module **out, ct_device *d, int64_t in_features, int64_t out_features, bool bias) {
  static const char fn[] = "ct_module_linear";
  ct_module *m;
  CT__TRY(begin_sized(&m, out, &d, &k_linear, (const int64_t[]){in_features, out_features},
                      (const char *const[]){"in_features", "out_features"}, fn));
  return ct__module_done(out, m, add_weight_bias(m, d, 2, (int64_t[]){out_features, in_features}, bias, fn));
}

/* ---- Convolutions ---- */

static ct_status conv1d_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  const ct__module_options *o = &m->opt;
  return ct_conv1d(y, x, ct__module_param(m, "weight"), ct__module_param(m, "bias"), o->stride[0], o->padding[0],
                   o->dilation[0], o->groups);
}

static ct_status conv2d_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  const ct__module_options *o = &m->opt;
  return ct_conv2d(y, x, ct__module_param(m, "weight"), ct__module_param(m, "bias"), o->stride, o->padding,
                   o->dilation, o->groups);
}

static const ct__module_kind k_conv1d = {"Conv1d", conv1d_forward};
static const ct__module_kind k_conv2d = {"Conv2d", conv2d_forward};

/* nk spatial dims: kernel, stride, dilation >= 1, padding >= 0, groups dividing the channels. */
static ct_status conv_new(ct_module **out, const ct__module_kind *kind, ct_device *d, int64_t cin, int64_t cout,
                          int nk, const int *kernel, const int *stride, const int *padding, const int *dilation,
                          int groups, bool bias, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, kernel);
  CT__TRY(check_size(cin, "in_channels", 1, fn));
  CT__TRY(check_size(cout, "out_channels", 1, fn));
  CT__TRY(check_size(groups, "groups", 1, fn));
  if (cin % groups || cout % groups)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: groups = %d must divide in_channels = %lld and out_channels = %lld", fn, groups,
                     (long long)cin, (long long)cout);
  ct__module_options o = {.groups = groups};
  for (int i = 0; i < 2; i++) {
    int j = i < nk ? i : 0; /* conv1d keeps its one value in slot 0 */
    o.kernel[i] = kernel[j];
    o.stride[i] = stride ? stride[j] : 1;
    o.padding[i] = padding ? padding[j] : 0;
    o.dilation[i] = dilation ? dilation[j] : 1;
    CT__TRY(check_size(o.kernel[i], "kernel_size", 1, fn));
    CT__TRY(check_size(o.stride[i], "stride", 1, fn));
    CT__TRY(check_size(o.padding[i], "padding", 0, fn));
    CT__TRY(check_size(o.dilation[i], "dilation", 1, fn));
  }
  CT__TRY(ct__module_device(&d, d, fn));
  ct_module *m;
  CT__TRY(ct__module_new(&m, kind, fn));
  m->opt = o;
  int64_t wshape[4] = {cout, cin / groups, o.kernel[0], o.kernel[1]};
  return ct__module_done(out, m, add_weight_bias(m, d, 2 + nk, wshape, bias, fn));
}

ct_status ct_module_conv1d(ct_module **out, ct_device *d, int64_t in_channels, int64_t out_channels, int kernel_size,
                           int stride, int padding, int dilation, int groups, bool bias) {
  return conv_new(out, &k_conv1d, d, in_channels, out_channels, 1, &kernel_size, &stride, &padding, &dilation,
                  groups, bias, "ct_module_conv1d");
}

ct_status ct_module_conv2d(ct_module **out, ct_device *d, int64_t in_channels, int64_t out_channels,
                           const int kernel_size[2], const int stride[2], const int padding[2],
                           const int dilation[2], int groups, bool bias) {
  return conv_new(out, &k_conv2d, d, in_channels, out_channels, 2, kernel_size, stride, padding, dilation, groups,
                  bias, "ct_module_conv2d");
}

/* ---- Embedding ---- */

static ct_status embedding_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return ct_embedding(y, ct__module_param(m, "weight"), x);
}

static const ct__module_kind k_embedding = {"Embedding", embedding_forward};

ct_status ct_module_embedding(ct_module **out, ct_device *d, int64_t num_embeddings, int64_t embedding_dim) {
  static const char fn[] = "ct_module_embedding";
  ct_module *m;
  CT__TRY(begin_sized(&m, out, &d, &k_embedding, (const int64_t[]){num_embeddings, embedding_dim},
                      (const char *const[]){"num_embeddings", "embedding_dim"}, fn));
  ct_tensor *w = NULL;
  ct_status st = new_tensor(&w, d, CT_F32, 2, (int64_t[]){num_embeddings, embedding_dim}, fn);
  if (st == CT_OK) st = ct_normal_(w, 0.0, 1.0);
  if (st == CT_OK) {
    st = ct__module_own_param(m, "weight", w, fn);
    w = NULL;
  }
  ct_release(w);
  return ct__module_done(out, m, st);
}

/* ---- Batch norm ---- */

static ct_status batch_norm_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  const ct__module_options *o = &m->opt;
  int nd = ct_tensor_ndim(x);
  if (nd < o->rank_lo || nd > o->rank_hi) {
    if (o->rank_lo == o->rank_hi)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "expected %dD input (got %dD input)", o->rank_lo, nd);
    return ct__error(CT_ERR_SHAPE_MISMATCH, "expected %dD or %dD input (got %dD input)", o->rank_lo, o->rank_hi, nd);
  }
  ct_tensor *rm = ct__module_buffer(m, "running_mean"), *rv = ct__module_buffer(m, "running_var");
  ct_tensor *nbt = ct__module_buffer(m, "num_batches_tracked");
  double factor = isnan(o->momentum) ? 0.0 : o->momentum;
  /* PyTorch adds 1 to num_batches_tracked before the forward. The statistics kernel does it when
   * it runs (a kernel fewer per batch norm and step); else, and for a buffer a state dict made
   * other than PyTorch's i64 scalar, an add. */
  const bool tracked = m->training && nbt;
  const bool in_kernel = tracked && ct_tensor_dtype(nbt) == CT_I64 && ct_numel(nbt) == 1 && ct_tensor_shape(x)[1] > 0;
  if (tracked && !in_kernel) CT__TRY(ct_add_scalar_out(nbt, nbt, 1.0));
  if (tracked && isnan(o->momentum)) { /* momentum None: the factor is 1 / the new count */
    int64_t count = 0;
    CT__TRY(ct_to_host(nbt, &count, sizeof count));
    factor = 1.0 / (double)(in_kernel ? count + 1 : count);
  }
  /* PyTorch: the batch's statistics when training, or in eval when there are no running ones. */
  return ct__batch_norm_tracked(y, x, rm, rv, in_kernel ? nbt : NULL, ct__module_param(m, "weight"),
                                ct__module_param(m, "bias"), m->training || !rm, factor, o->eps);
}

static const ct__module_kind k_batch_norm1d = {"BatchNorm1d", batch_norm_forward};
static const ct__module_kind k_batch_norm2d = {"BatchNorm2d", batch_norm_forward};

/* ones [n] or zeros [n] of dtype dt on d. */
static ct_status filled(ct_tensor **t, ct_device *d, ct_dtype dt, int ndim, const int64_t *shape, double v,
                        const char *fn) {
  ct_status st = ct_full(t, d, dt, ndim, shape, v);
  if (st != CT_OK) ct__error_append(" (%s)", fn);
  return st;
}

static ct_status add_filled(ct_module *m, bool param, const char *name, ct_device *d, ct_dtype dt, int ndim,
                            const int64_t *shape, double v, const char *fn) {
  ct_tensor *t;
  CT__TRY(filled(&t, d, dt, ndim, shape, v, fn));
  return param ? ct__module_own_param(m, name, t, fn) : ct__module_own_buffer(m, name, t, fn);
}

static ct_status batch_norm_new(ct_module **out, const ct__module_kind *kind, int rank_lo, int rank_hi, ct_device *d,
                                int64_t c, double eps, double momentum, bool affine, bool track, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__TRY(check_size(c, "num_features", 1, fn));
  if (!(eps > 0) || !isfinite(eps)) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: eps = %g, must be > 0", fn, eps);
  if (!isnan(momentum) && !(momentum >= 0 && momentum <= 1))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: momentum = %g, must be in [0, 1] or NaN (None)", fn, momentum);
  CT__TRY(ct__module_device(&d, d, fn));
  ct_module *m;
  CT__TRY(ct__module_new(&m, kind, fn));
  m->opt = (ct__module_options){.eps = eps, .momentum = momentum, .rank_lo = rank_lo, .rank_hi = rank_hi};
  ct_status st = CT_OK;
  /* PyTorch's registration order, which is its state_dict order. */
  if (affine) {
    st = add_filled(m, true, "weight", d, CT_F32, 1, &c, 1.0, fn);
    if (st == CT_OK) st = add_filled(m, true, "bias", d, CT_F32, 1, &c, 0.0, fn);
  }
  if (track && st == CT_OK) {
    st = add_filled(m, false, "running_mean", d, CT_F32, 1, &c, 0.0, fn);
    if (st == CT_OK) st = add_filled(m, false, "running_var", d, CT_F32, 1, &c, 1.0, fn);
    if (st == CT_OK) st = add_filled(m, false, "num_batches_tracked", d, CT_I64, 0, NULL, 0.0, fn);
  }
  return ct__module_done(out, m, st);
}

ct_status ct_module_batch_norm1d(ct_module **out, ct_device *d, int64_t num_features, double eps, double momentum,
                                 bool affine, bool track_running_stats) {
  return batch_norm_new(out, &k_batch_norm1d, 2, 3, d, num_features, eps, momentum, affine, track_running_stats,
                        "ct_module_batch_norm1d");
}

ct_status ct_module_batch_norm2d(ct_module **out, ct_device *d, int64_t num_features, double eps, double momentum,
                                 bool affine, bool track_running_stats) {
  return batch_norm_new(out, &k_batch_norm2d, 4, 4, d, num_features, eps, momentum, affine, track_running_stats,
                        "ct_module_batch_norm2d");
}

/* ---- Layer norm, RMS norm ---- */

/* x's last nnorm dims must be normalized_shape (PyTorch's check; the functional ops check only
 * against the weight, which may be absent). */
static ct_status check_norm_shape(const ct_module *m, const ct_tensor *x) {
  const ct__module_options *o = &m->opt;
  int nd = ct_tensor_ndim(x);
  const int64_t *s = ct_tensor_shape(x);
  bool ok = nd >= o->nnorm;
  for (int i = 0; ok && i < o->nnorm; i++) ok = s[nd - o->nnorm + i] == o->norm_shape[i];
  if (ok) return CT_OK;
  char want[256] = "", got[256] = "";
  size_t wl = 0, gl = 0;
  for (int i = 0; i < o->nnorm; i++)
    wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%lld", i ? ", " : "", (long long)o->norm_shape[i]);
  for (int i = 0; i < nd; i++)
    gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", i ? ", " : "", (long long)s[i]);
  return ct__error(CT_ERR_SHAPE_MISMATCH, "normalized_shape [%s] is not the end of the input's shape [%s]", want,
                   got);
}

static ct_status layer_norm_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  CT__TRY(check_norm_shape(m, x));
  return ct_layer_norm(y, x, m->opt.nnorm, ct__module_param(m, "weight"), ct__module_param(m, "bias"), m->opt.eps);
}

static ct_status rms_norm_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  CT__TRY(check_norm_shape(m, x));
  return ct_rms_norm(y, x, m->opt.nnorm, ct__module_param(m, "weight"), m->opt.eps);
}

static const ct__module_kind k_layer_norm = {"LayerNorm", layer_norm_forward};
static const ct__module_kind k_rms_norm = {"RMSNorm", rms_norm_forward};

static ct_status norm_new(ct_module **out, const ct__module_kind *kind, ct_device *d, int ndim, const int64_t *shape,
                          double eps, bool eps_may_be_nan, bool affine, bool bias, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  if (ndim < 1 || ndim > CT_MAX_DIMS || !shape)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: normalized_shape of %d dims (%s), must be 1..%d", fn, ndim,
                     shape ? "given" : "NULL", CT_MAX_DIMS);
  for (int i = 0; i < ndim; i++) CT__TRY(check_size(shape[i], "a normalized_shape size", 0, fn));
  if (!(eps_may_be_nan && isnan(eps)) && !(eps >= 0 && isfinite(eps)))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: eps = %g, must be >= 0%s", fn, eps,
                     eps_may_be_nan ? " or NaN (None)" : "");
  CT__TRY(ct__module_device(&d, d, fn));
  ct_module *m;
  CT__TRY(ct__module_new(&m, kind, fn));
  m->opt = (ct__module_options){.eps = eps, .nnorm = ndim};
  memcpy(m->opt.norm_shape, shape, (size_t)ndim * sizeof *shape);
  ct_status st = CT_OK;
  if (affine) {
    st = add_filled(m, true, "weight", d, CT_F32, ndim, shape, 1.0, fn);
    if (st == CT_OK && bias) st = add_filled(m, true, "bias", d, CT_F32, ndim, shape, 0.0, fn);
  }
  return ct__module_done(out, m, st);
}

ct_status ct_module_layer_norm(ct_module **out, ct_device *d, int ndim, const int64_t *normalized_shape, double eps,
                               bool elementwise_affine, bool bias) {
  return norm_new(out, &k_layer_norm, d, ndim, normalized_shape, eps, false, elementwise_affine, bias,
                  "ct_module_layer_norm");
}

ct_status ct_module_rms_norm(ct_module **out, ct_device *d, int ndim, const int64_t *normalized_shape, double eps,
                             bool elementwise_affine) {
  return norm_new(out, &k_rms_norm, d, ndim, normalized_shape, eps, true, elementwise_affine, false,
                  "ct_module_rms_norm");
}
