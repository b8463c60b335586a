/* The modules without parameters: Dropout, the activations, pooling, Flatten, Identity. Each is
 * a kind whose forward calls one op with the options its constructor stored. */
#include <math.h>

#include "cltensor/elementwise.h"
#include "cltensor/nn.h"
#include "cltensor/reduce.h"
#include "core/error.h"
#include "module/module.h"

static ct_status make(ct_module **out, const ct__module_kind *kind, const ct__module_options *o, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  ct_module *m;
  CT__TRY(ct__module_new(&m, kind, fn));
  if (o) m->opt = *o;
  *out = m;
  return CT_OK;
}

/* ---- Dropout ---- */

static ct_status dropout_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return ct_dropout(y, x, m->opt.p, m->training);
}

static const ct__module_kind k_dropout = {"Dropout", dropout_forward};

ct_status ct_module_dropout(ct_module **out, double p) {
  static const char fn[] = "ct_module_dropout";
  if (!(p >= 0 && p <= 1)) {
    if (out) *out = NULL;
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dropout probability has to be between 0 and 1, but got %g", fn, p);
  }
  return make(out, &k_dropout, &(ct__module_options){.p = p}, fn);
}

/* ---- Activations ---- */

#define UNARY_MODULE(lower, Name, op)                                              \
  static ct_status lower##_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) { \
    (void)m;                                                                       \
    return op(y, x);                                                               \
  }                                                                                \
  static const ct__module_kind k_##lower = {Name, lower##_forward};                \
  ct_status ct_module_##lower(ct_module **out) { return make(out, &k_##lower, NULL, "ct_module_" #lower); }

/* Identity: PyTorch returns the input itself; here a new reference to it. */
static ct_status same(ct_tensor **y, const ct_tensor *x) {
  *y = ct_retain((ct_tensor *)x);
  return CT_OK;
}

UNARY_MODULE(relu, "ReLU", ct_relu)
UNARY_MODULE(silu, "SiLU", ct_silu)
UNARY_MODULE(sigmoid, "Sigmoid", ct_sigmoid)
UNARY_MODULE(tanh, "Tanh", ct_tanh)
UNARY_MODULE(softplus, "Softplus", ct_softplus)
UNARY_MODULE(identity, "Identity", same)

static ct_status gelu_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return m->opt.flag ? ct_gelu_tanh(y, x) : ct_gelu(y, x);
}

static const ct__module_kind k_gelu = {"GELU", gelu_forward};

ct_status ct_module_gelu(ct_module **out, bool approximate_tanh) {
  return make(out, &k_gelu, &(ct__module_options){.flag = approximate_tanh}, "ct_module_gelu");
}

static ct_status leaky_relu_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return ct_leaky_relu(y, x, m->opt.slope);
}

static const ct__module_kind k_leaky_relu = {"LeakyReLU", leaky_relu_forward};

ct_status ct_module_leaky_relu(ct_module **out, double negative_slope) {
  static const char fn[] = "ct_module_leaky_relu";
  if (!isfinite(negative_slope)) {
    if (out) *out = NULL;
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: negative_slope %g is not finite", fn, negative_slope);
  }
  return make(out, &k_leaky_relu, &(ct__module_options){.slope = negative_slope}, fn);
}

static ct_status softmax_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return ct_softmax(y, x, m->opt.dim);
}

static ct_status log_softmax_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return ct_log_softmax(y, x, m->opt.dim);
}

static const ct__module_kind k_softmax = {"Softmax", softmax_forward};
static const ct__module_kind k_log_softmax = {"LogSoftmax", log_softmax_forward};

/* The dim is checked against each input by the op (PyTorch's Softmax(dim) checks it there too). */
ct_status ct_module_softmax(ct_module **out, int dim) {
  return make(out, &k_softmax, &(ct__module_options){.dim = dim}, "ct_module_softmax");
}

ct_status ct_module_log_softmax(ct_module **out, int dim) {
  return make(out, &k_log_softmax, &(ct__module_options){.dim = dim}, "ct_module_log_softmax");
}

/* ---- Pooling ---- */

static ct_status max_pool2d_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  const ct__module_options *o = &m->opt;
  return ct_max_pool2d(y, x, o->kernel, o->has_stride ? o->stride : NULL, o->padding);
}

static ct_status avg_pool2d_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  const ct__module_options *o = &m->opt;
  return ct_avg_pool2d(y, x, o->kernel, o->has_stride ? o->stride : NULL, o->padding);
}

static const ct__module_kind k_max_pool2d = {"MaxPool2d", max_pool2d_forward};
static const ct__module_kind k_avg_pool2d = {"AvgPool2d", avg_pool2d_forward};

/* The sizes are checked here so that a bad module fails when made, not at its first forward:
 * kernel and stride >= 1, 0 <= padding <= kernel / 2 (PyTorch's rule). */
static ct_status pool_new(ct_module **out, const ct__module_kind *kind, const int *kernel, const int *stride,
                          const int *padding, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, kernel);
  ct__module_options o = {.has_stride = stride != NULL};
  for (int i = 0; i < 2; i++) {
    o.kernel[i] = kernel[i];
    o.stride[i] = stride ? stride[i] : kernel[i];
    o.padding[i] = padding ? padding[i] : 0;
    if (o.kernel[i] < 1 || o.stride[i] < 1 || o.padding[i] < 0 || o.padding[i] > o.kernel[i] / 2)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: kernel {%d, %d}, stride {%d, %d}, padding {%d, %d}: kernel and stride must be >= 1, "
                       "padding in [0, kernel / 2]",
                       fn, kernel[0], kernel[1], stride ? stride[0] : kernel[0], stride ? stride[1] : kernel[1],
                       padding ? padding[0] : 0, padding ? padding[1] : 0);
  }
  return make(out, kind, &o, fn);
}

ct_status ct_module_max_pool2d(ct_module **out, const int kernel_size[2], const int stride[2],
                               const int padding[2]) {
  return pool_new(out, &k_max_pool2d, kernel_size, stride, padding, "ct_module_max_pool2d");
}

ct_status ct_module_avg_pool2d(ct_module **out, const int kernel_size[2], const int stride[2],
                               const int padding[2]) {
  return pool_new(out, &k_avg_pool2d, kernel_size, stride, padding, "ct_module_avg_pool2d");
}

static ct_status adaptive_avg_pool2d_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return ct_adaptive_avg_pool2d(y, x, m->opt.size);
}

static const ct__module_kind k_adaptive_avg_pool2d = {"AdaptiveAvgPool2d", adaptive_avg_pool2d_forward};

ct_status ct_module_adaptive_avg_pool2d(ct_module **out, const int64_t output_size[2]) {
  static const char fn[] = "ct_module_adaptive_avg_pool2d";
  if (out) *out = NULL;
  CT__CHECK_NOT_NULL(fn, output_size);
  if (output_size[0] < 0 || output_size[1] < 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: output_size {%lld, %lld} must be >= 0", fn,
                     (long long)output_size[0], (long long)output_size[1]);
  return make(out, &k_adaptive_avg_pool2d, &(ct__module_options){.size = {output_size[0], output_size[1]}}, fn);
}

/* ---- Flatten ---- */

static ct_status flatten_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  int nd = ct_tensor_ndim(x);
  const int64_t *s = ct_tensor_shape(x);
  if (nd == 0) return ct_reshape(y, x, 1, (int64_t[]){1}); /* torch.flatten of a 0-d tensor */
  int a = m->opt.dim < 0 ? m->opt.dim + nd : m->opt.dim;
  int b = m->opt.end_dim < 0 ? m->opt.end_dim + nd : m->opt.end_dim;
  if (a < 0 || a >= nd || b < 0 || b >= nd)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "start_dim %d or end_dim %d out of range for a %d-dim input",
                     m->opt.dim, m->opt.end_dim, nd);
  if (a > b)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "start_dim %d (%d) comes after end_dim %d (%d) for a %d-dim input",
                     m->opt.dim, a, m->opt.end_dim, b, nd);
  int64_t shape[CT_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < a; i++) shape[k++] = s[i];
  int64_t merged = 1;
  for (int i = a; i <= b; i++) merged *= s[i]; /* fits: the numel does */
  shape[k++] = merged;
  for (int i = b + 1; i < nd; i++) shape[k++] = s[i];
  return ct_reshape(y, x, k, shape);
}

static const ct__module_kind k_flatten = {"Flatten", flatten_forward};

ct_status ct_module_flatten(ct_module **out, int start_dim, int end_dim) {
  static const char fn[] = "ct_module_flatten";
  /* Both negative or both not: the order is known now (PyTorch checks it at the forward). */
  if ((start_dim < 0) == (end_dim < 0) && start_dim > end_dim) {
    if (out) *out = NULL;
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: start_dim %d comes after end_dim %d", fn, start_dim, end_dim);
  }
  return make(out, &k_flatten, &(ct__module_options){.dim = start_dim, .end_dim = end_dim}, fn);
}
