/* Printing like PyTorch's repr: "tensor([[1., 2.],\n        [3., 4.]], shape=[2, 2], dtype=f32,
 * device=cpu:0)". Past 1000 elements every dim longer than 6 shows its first and last 3 entries
 * around "...", and only those elements are brought to the host. Autograd as PyTorch shows it:
 * ", requires_grad=True" on a leaf that requires grad, ", grad_fn=<MulBackward0>" on a recorded
 * result (the names of PyTorch's backward nodes, from the recording call: grad_fn_name). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/text.h"
#include "device/device.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

#define CT__SUMMARY_THRESHOLD 1000
#define CT__EDGE 3
#define CT__LINE_WIDTH 80

/* How floats print, chosen from all shown finite values as PyTorch does. */
enum ct__fmode { CT__FINT, CT__FFIXED, CT__FSCI };

typedef struct {
  ct_dtype dtype;
  enum ct__fmode mode;
  int width;
  int ndim;
  const int64_t *shown;   /* shape of the gathered host block */
  int summarized[CT_MAX_DIMS];
  const unsigned char *data;
} ct__fmt;

static int ct__elem_text(char *out, size_t n, const ct__fmt *f, const unsigned char *p) {
  ct_dtype t = f->dtype;
  if (t == CT_BOOL) return snprintf(out, n, "%s", *p ? "True" : "False");
  if (t == CT_U64) return snprintf(out, n, "%" PRIu64, (uint64_t)ct__host_load_int(t, p)); /* its bits */
  if (!ct_dtype_is_floating_point(t)) return snprintf(out, n, "%" PRId64, ct__host_load_int(t, p));
  double v = ct__host_load_double(t, p);
  if (isnan(v)) return snprintf(out, n, "nan");
  if (isinf(v)) return snprintf(out, n, v < 0 ? "-inf" : "inf");
  switch (f->mode) {
    case CT__FINT: return snprintf(out, n, "%.0f.", v);
    case CT__FFIXED: return snprintf(out, n, "%.4f", v);
    default: return snprintf(out, n, "%.4e", v);
  }
}

static void ct__emit(struct ct__text *s, const ct__fmt *f, int dim, int64_t *flat, int indent) {
  size_t es = ct_dtype_size(f->dtype);
  if (dim == f->ndim) {
    char e[64];
    ct__elem_text(e, sizeof e, f, f->data + (size_t)(*flat) * es);
    ct__text_add(s, "%*s", f->width, e);
    (*flat)++;
    return;
  }
  ct__text_add(s, "[");
  int64_t n = f->shown[dim];
  if (dim == f->ndim - 1) {
    /* The innermost dim wraps at 80 columns as PyTorch's does: as many items per line as fit
     * after this depth's indent, the ellipsis counting as one item. */
    int depth_indent = indent + dim;
    int64_t per_line = (CT__LINE_WIDTH - depth_indent) / (f->width + 2);
    if (per_line < 1) per_line = 1;
    int64_t item = 0;
    char e[64];
    for (int64_t i = 0; i < n; i++) {
      int ellipsis = f->summarized[dim] && i == CT__EDGE;
      for (int k = ellipsis ? 0 : 1; k < 2; k++) {
        if (item > 0) {
          if (item % per_line == 0) ct__text_add(s, ",\n%*s", depth_indent + 1, "");
          else ct__text_add(s, ", ");
        }
        item++;
        if (k == 0) {
          ct__text_add(s, " ...");
        } else {
          ct__elem_text(e, sizeof e, f, f->data + (size_t)(*flat) * es);
          ct__text_add(s, "%*s", f->width, e);
          (*flat)++;
        }
      }
    }
    ct__text_add(s, "]");
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (i > 0) {
      ct__text_add(s, ",");
      for (int k = 0; k < f->ndim - 1 - dim; k++) ct__text_add(s, "\n");
      ct__text_add(s, "%*s", indent + dim + 1, "");
    }
    if (f->summarized[dim] && i == CT__EDGE) {
      ct__text_add(s, "...,");
      for (int k = 0; k < f->ndim - 1 - dim; k++) ct__text_add(s, "\n");
      ct__text_add(s, "%*s", indent + dim + 1, "");
    }
    ct__emit(s, f, dim + 1, flat, indent);
  }
  ct__text_add(s, "]");
}

/* Copies the shown part of t (edges of summarized dims) into a new contiguous tensor. */
static ct_status ct__gather_shown(ct_tensor **out, const ct_tensor *t, const int *summ, int64_t *shown) {
  for (int i = 0; i < t->ndim; i++) shown[i] = summ[i] ? 2 * CT__EDGE : t->shape[i];
  ct_tensor *r;
  CT__TRY(ct__tensor_new(&r, t->storage->device, t->dtype, t->ndim, shown, "ct_format"));
  int k = 0, which[CT_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) k += summ[i];
  ct_status st = CT_OK;
  /* One copy per combination of leading/trailing edges over the summarized dims. */
  for (int combo = 0; combo < (1 << k) && st == CT_OK; combo++) {
    for (int i = 0, b = 0; i < t->ndim; i++) which[i] = summ[i] ? (combo >> b++) & 1 : 0;
    ct_tensor *sv = NULL, *dv = NULL;
    sv = ct_retain((ct_tensor *)t);
    dv = ct_retain(r);
    for (int i = 0; i < t->ndim && st == CT_OK; i++) {
      if (!summ[i]) continue;
      ct_tensor *a = NULL, *b = NULL;
      int64_t s0 = which[i] ? t->shape[i] - CT__EDGE : 0;
      st = ct_slice(&a, sv, i, s0, s0 + CT__EDGE, 1);
      if (st == CT_OK) st = ct_slice(&b, dv, i, which[i] ? CT__EDGE : 0, which[i] ? 2 * CT__EDGE : CT__EDGE, 1);
      ct_release(sv);
      ct_release(dv);
      sv = a;
      dv = b;
    }
    if (st == CT_OK) st = ct__copy(dv, sv, "ct_format");
    ct_release(sv);
    ct_release(dv);
  }
  return ct__tensor_result(out, r, st);
}

/* PyTorch's name for the backward node of the call that recorded n, where it differs from the
 * call's name in CamelCase + "Backward0" (ct_mul: MulBackward0, ct_leaky_relu:
 * LeakyReluBackward0). PyTorch numbers overloads (Backward0, Backward1): the ones here are
 * those of the overload the library's call corresponds to. */
static const struct {
  const char *fn, *name;
} GRAD_FN_NAMES[] = {
    {"ct_rsub_scalar", "RsubBackward1"},
    {"ct_pow", "PowBackward1"},
    {"ct_pow_scalar", "PowBackward0"},
    {"ct_square", "PowBackward0"},
    {"ct_log1p", "Log1PBackward0"},
    {"ct_clamp", "ClampBackward1"},
    {"ct_addmm", "AddmmBackward0"},
    {"ct_view", "ViewBackward0"},
    {"ct_reshape", "ViewBackward0"},
    {"ct_flatten", "ViewBackward0"},
    {"ct_unflatten", "ViewBackward0"},
    {"ct_squeeze", "SqueezeBackward1"},
    {"ct_max_pool1d", "SqueezeBackward1"}, /* PyTorch too pools 1-D through 2-D and squeezes */
    {"ct_avg_pool1d", "SqueezeBackward1"},
    {"ct_contiguous", "CloneBackward0"},
    {"ct_cast", "ToCopyBackward0"},
    {"ct_to_device", "ToCopyBackward0"},
    {"ct_max", "MaxBackward1"},
    {"ct_min", "MinBackward1"},
    {"ct_pad", "ConstantPadNdBackward0"},
    {"ct_chunk", "SplitBackward0"},
    {"ct_split", "SplitBackward0"},
    {"ct_conv1d", "ConvolutionBackward0"},
    {"ct_conv2d", "ConvolutionBackward0"},
    {"ct_max_pool2d", "MaxPool2DWithIndicesBackward0"},
    {"ct_avg_pool2d", "AvgPool2DBackward0"},
    {"ct_adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0"},
    {"ct_layer_norm", "NativeLayerNormBackward0"},
    {"ct_batch_norm", "NativeBatchNormBackward0"},
    {"ct_dropout", "NativeDropoutBackward0"},
    {"ct_cross_entropy", "NllLossBackward0"},
    {"ct_grad_scaler_scale", "MulBackward0"},
};

static void grad_fn_name(char *buf, size_t size, const ct__node *n) {
  const char *fn = n->fn ? n->fn : "unknown";
  /* The overloads that depend on the arguments. */
  if (!strcmp(fn, "ct_matmul") || !strcmp(fn, "ct_matmul_out")) {
    int a = n->nin > 0 ? n->in[0].ndim : 0, b = n->nin > 1 ? n->in[1].ndim : 0;
    snprintf(buf, size, "%s", a == 1 && b == 1 ? "DotBackward0" : a == 2 && b == 2 ? "MmBackward0"
                              : a == 2 && b == 1 ? "MvBackward0" : a == 3 && b == 3 ? "BmmBackward0"
                              : "UnsafeViewBackward0");
    return;
  }
  if (!strcmp(fn, "ct_linear")) { /* F.linear of a matrix: addmm with a bias, mm without */
    bool bias = n->nin > 2 && n->in[2].device; /* an edge without a device: no bias given */
    snprintf(buf, size, "%s", n->in[0].ndim != 2 ? "ViewBackward0" : bias ? "AddmmBackward0" : "MmBackward0");
    return;
  }
  if (!strcmp(fn, "ct_sum") || !strcmp(fn, "ct_mean") || !strcmp(fn, "ct_prod")) {
    /* sum() over everything is SumBackward0, sum(dim) SumBackward1 */
    bool all = n->out_ndim == 0;
    snprintf(buf, size, "%s%s", !strcmp(fn, "ct_sum") ? "Sum" : !strcmp(fn, "ct_mean") ? "Mean" : "Prod",
             all ? "Backward0" : "Backward1");
    return;
  }
  for (size_t i = 0; i < sizeof GRAD_FN_NAMES / sizeof *GRAD_FN_NAMES; i++)
    if (!strcmp(fn, GRAD_FN_NAMES[i].fn)) {
      snprintf(buf, size, "%s", GRAD_FN_NAMES[i].name);
      return;
    }
  /* CamelCase of the call without "ct_" and a "_scalar"/"_out" form suffix. */
  if (!strncmp(fn, "ct_", 3)) fn += 3;
  size_t len = strlen(fn), o = 0;
  if (len > 7 && !strcmp(fn + len - 7, "_scalar")) len -= 7;
  else if (len > 4 && !strcmp(fn + len - 4, "_out")) len -= 4;
  bool up = true;
  for (size_t i = 0; i < len && o + 1 < size; i++) {
    if (fn[i] == '_') {
      up = true;
      continue;
    }
    buf[o++] = up && fn[i] >= 'a' && fn[i] <= 'z' ? (char)(fn[i] - 'a' + 'A') : fn[i];
    up = false;
  }
  snprintf(buf + o, size - o, "Backward0");
}

/* The autograd part of the text: ", requires_grad=True" or ", grad_fn=<...>" (or nothing). */
static void autograd_suffix(struct ct__text *s, const ct_tensor *t) {
  if (t->grad_fn) {
    char name[96];
    grad_fn_name(name, sizeof name, t->grad_fn);
    ct__text_add(s, ", grad_fn=<%s>", name);
  } else if (t->requires_grad) {
    ct__text_add(s, ", requires_grad=True");
  }
}

/* Builds the whole text into s. */
static ct_status ct__repr(struct ct__text *s, const ct_tensor *t) {
  char shape[200];
  ct__shape_str(shape, sizeof shape, t->ndim, t->shape);
  int64_t numel = ct_numel(t);
  const char *suffix_fmt = ", shape=%s, dtype=%s, device=%s";
  if (numel == 0) {
    ct__text_add(s, "tensor([]");
    ct__text_add(s, suffix_fmt, shape, ct_dtype_name(t->dtype), t->storage->device->spec);
    autograd_suffix(s, t);
    ct__text_add(s, ")");
    return CT_OK;
  }
  int summ[CT_MAX_DIMS] = {0};
  int64_t shown[CT_MAX_DIMS];
  ct_tensor *h = NULL;
  if (numel > CT__SUMMARY_THRESHOLD) {
    int any = 0;
    for (int i = 0; i < t->ndim; i++) any |= summ[i] = t->shape[i] > 2 * CT__EDGE;
    if (any) CT__TRY(ct__gather_shown(&h, t, summ, shown));
  }
  if (!h) {
    for (int i = 0; i < t->ndim; i++) shown[i] = t->shape[i];
    h = ct_retain((ct_tensor *)t);
  }
  size_t nb = ct_tensor_nbytes(h);
  unsigned char *data = malloc(nb);
  if (!data) {
    ct_release(h);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_format: out of host memory for %zu bytes", nb);
  }
  ct_status st = ct_to_host(h, data, nb);
  int64_t n = ct_numel(h);
  ct_release(h);
  if (st != CT_OK) {
    free(data);
    return st;
  }
  ct__fmt f = {.dtype = t->dtype, .mode = CT__FINT, .width = 0, .ndim = t->ndim, .shown = shown, .data = data};
  memcpy(f.summarized, summ, sizeof summ);
  size_t es = ct_dtype_size(t->dtype);
  if (ct_dtype_is_floating_point(t->dtype)) {
    double mx = 0, mn = INFINITY;
    int all_int = 1, any = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = ct__host_load_double(t->dtype, data + (size_t)i * es);
      if (!isfinite(v)) continue;
      any = 1;
      if (v != nearbyint(v)) all_int = 0;
      double a = fabs(v);
      if (a > mx) mx = a;
      if (a > 0 && a < mn) mn = a;
    }
    /* PyTorch's rules, over the nonzero finite magnitudes shown. */
    int wide = mn != INFINITY && (mx / mn > 1000.0 || mx > 1e8);
    if (!any || all_int) f.mode = wide ? CT__FSCI : CT__FINT;
    else f.mode = wide || mn < 1e-4 ? CT__FSCI : CT__FFIXED;
  }
  for (int64_t i = 0; i < n; i++) {
    char e[64];
    int w = ct__elem_text(e, sizeof e, &f, data + (size_t)i * es);
    if (w > f.width) f.width = w;
  }
  ct__text_add(s, "tensor(");
  int64_t flat = 0;
  ct__emit(s, &f, 0, &flat, (int)strlen("tensor("));
  ct__text_add(s, suffix_fmt, shape, ct_dtype_name(t->dtype), t->storage->device->spec);
  autograd_suffix(s, t);
  ct__text_add(s, ")");
  free(data);
  return CT_OK;
}

ct_status ct_format(char *buf, size_t size, size_t *needed, const ct_tensor *t) {
  CT__CHECK_NOT_NULL("ct_format", t);
  if (!buf && size > 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_format: argument 'buf' is NULL with size %zu", size);
  struct ct__text s = {0};
  ct_status st = ct__repr(&s, t);
  if (st == CT_OK && s.oom) st = ct__error(CT_ERR_OUT_OF_MEMORY, "ct_format: out of host memory");
  if (st != CT_OK) {
    free(s.s);
    return st;
  }
  if (needed) *needed = s.len;
  if (size > 0) {
    size_t c = s.len < size - 1 ? s.len : size - 1;
    memcpy(buf, s.s, c);
    buf[c] = '\0';
  }
  if (s.len + 1 > size) st = ct__error(CT_ERR_INVALID_ARGUMENT, "ct_format: buffer of %zu bytes is too small for %zu bytes of text (and the NUL)", size, s.len);
  free(s.s);
  return st;
}

ct_status ct_print(FILE *f, const ct_tensor *t) {
  CT__CHECK_NOT_NULL("ct_print", f);
  CT__CHECK_NOT_NULL("ct_print", t);
  struct ct__text s = {0};
  ct_status st = ct__repr(&s, t);
  if (st == CT_OK && s.oom) st = ct__error(CT_ERR_OUT_OF_MEMORY, "ct_print: out of host memory");
  if (st == CT_OK && (fwrite(s.s, 1, s.len, f) != s.len || fputc('\n', f) == EOF))
    st = ct__error(CT_ERR_IO, "ct_print: writing %zu bytes failed", s.len + 1);
  free(s.s);
  return st;
}
