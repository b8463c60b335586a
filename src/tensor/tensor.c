/* The tensor handle and its shared storage: creation, reference counting, properties, and the
 * argument checks every multi-tensor operation shares. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* Handles made and not yet freed (ct__tensor_live). */
static atomic_long ct__live;

long ct__tensor_live(void) { return atomic_load_explicit(&ct__live, memory_order_relaxed); }

/* ---- storage ---- */

bool ct__tensor_known_range(const ct_tensor *t, int64_t *lo, int64_t *hi) {
  const ct__storage *s = t->storage;
  if (!atomic_load_explicit(&s->range_known, memory_order_acquire) ||
      atomic_load_explicit(&s->version, memory_order_relaxed) != 0)
    return false;
  *lo = s->range_lo;
  *hi = s->range_hi;
  return true;
}

void ct__storage_retain(ct__storage *s) { atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed); }

void ct__storage_release(ct__storage *s) {
  if (!s) return;
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
  /* Nobody can read what a recorded node would write here any more: the graph drops the write
   * (or computes the value inline where another node needs it) before the memory is reused. */
  if (atomic_load_explicit(&s->pending, memory_order_acquire)) ct__deferred_storage_dead(s);
  if (s->block)
    ct__free(s->block);
  else if (s->mem)
    clReleaseMemObject(s->mem);
  if (s->release) s->release(s->release_ctx);
  free(s);
}

/* ---- shapes ---- */

const char *ct__shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
  if (size == 0) return buf;
  size_t n = 0;
  buf[0] = '\0';
#define CT__PUT(...)                                                  \
  do {                                                                \
    int w_ = snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__); \
    if (w_ > 0) n += (size_t)w_;                                      \
    if (n >= size) n = size - 1;                                      \
  } while (0)
  CT__PUT("[");
  for (int i = 0; i < ndim && shape; i++) CT__PUT(i ? ", %" PRId64 : "%" PRId64, shape[i]);
  CT__PUT("]");
#undef CT__PUT
  return buf;
}

void ct__contiguous_strides(int64_t *strides, int ndim, const int64_t *shape) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
}

ct_status ct__shape_numel(int64_t *numel, int ndim, const int64_t *shape, size_t elem_size, const char *fn) {
  char sb[200];
  /* Both products are unsigned and checked at every step, so no intermediate overflows
   * silently (an overflowed product may wrap to a small or zero value, as [2^32, 2^32, 4] did). */
  uint64_t span = 1;
  bool over = false, empty = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: shape %s has a negative dim (%" PRId64 " at dim %d)", fn,
                       ct__shape_str(sb, sizeof sb, ndim, shape), shape[i], i);
    over |= __builtin_mul_overflow(span, (uint64_t)(shape[i] ? shape[i] : 1), &span);
    empty |= shape[i] == 0;
  }
  if (over || span > (uint64_t)INT64_MAX)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: shape %s has too many elements (%s overflows int64)", fn,
                     ct__shape_str(sb, sizeof sb, ndim, shape),
                     empty ? "the product of its nonzero dims" : "the element count");
  uint64_t n = empty ? 0 : span;
  uint64_t limit = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX : (uint64_t)SIZE_MAX;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, (uint64_t)elem_size, &bytes) || bytes > limit)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: shape %s has %" PRIu64 " elements of %zu bytes: the byte size overflows (more than %" PRIu64
                     " bytes)", fn,
                     ct__shape_str(sb, sizeof sb, ndim, shape), n, elem_size, limit);
  *numel = (int64_t)n;
  return CT_OK;
}

/* Checks ndim and shape; *numel receives the element count (overflow-checked against both
 * int64 and the byte size of dtype t). */
static ct_status ct__check_shape(int64_t *numel, int ndim, const int64_t *shape, ct_dtype t,
                                 const char *fn) {
  if (ndim < 0 || ndim > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ndim %d out of range [0, %d]", fn, ndim, CT_MAX_DIMS);
  if (ndim > 0 && !shape) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 'shape' is NULL with ndim %d", fn, ndim);
  return ct__shape_numel(numel, ndim, shape, ct_dtype_size(t), fn);
}

static ct_status ct__check_dtype(ct_device *d, ct_dtype t, const char *fn) {
  if ((unsigned)t >= CT_DTYPE_COUNT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: invalid dtype %d", fn, (int)t);
  if (t == CT_F64 && !d->props.fp64)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: dtype f64 needs cl_khr_fp64, which device %s (%s) does not support", fn,
                     d->spec, d->props.name);
  return CT_OK;
}

ct_status ct__tensor_headers(ct_tensor **x, ct__storage **s, ct_device *d, ct_dtype t, int ndim,
                             const int64_t *shape, const int64_t *strides, const char *fn) {
  *x = calloc(1, sizeof **x);
  *s = calloc(1, sizeof **s);
  if (!*x || !*s) {
    free(*x);
    free(*s);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  atomic_init(&(*s)->refs, 1);
  (*s)->device = d;
  atomic_init(&(*x)->refs, 1);
  atomic_init(&(*x)->scope_refs, 0);
  atomic_fetch_add_explicit(&ct__live, 1, memory_order_relaxed);
  (*x)->storage = *s;
  (*x)->dtype = t;
  (*x)->ndim = ndim;
  if (ndim) memcpy((*x)->shape, shape, (size_t)ndim * sizeof *shape);
  if (strides)
    memcpy((*x)->strides, strides, (size_t)ndim * sizeof *strides);
  else
    ct__contiguous_strides((*x)->strides, ndim, (*x)->shape);
  return CT_OK;
}

void ct__tensor_headers_free(ct_tensor *x, ct__storage *s) {
  free(x);
  free(s);
  atomic_fetch_sub_explicit(&ct__live, 1, memory_order_relaxed);
}

ct_status ct__tensor_new(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                         const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  CT__TRY(ct__check_dtype(d, t, fn));
  int64_t numel = 0;
  CT__TRY(ct__check_shape(&numel, ndim, shape, t, fn));
  ct_tensor *x;
  ct__storage *s;
  CT__TRY(ct__tensor_headers(&x, &s, d, t, ndim, shape, NULL, fn));
  size_t nbytes = (size_t)numel * ct_dtype_size(t);
  ct_status st = ct__alloc(&s->block, d, nbytes);
  if (st != CT_OK) {
    ct__tensor_headers_free(x, s);
    char sb[200];
    ct__error_append(" (%s of shape %s, dtype %s)", fn, ct__shape_str(sb, sizeof sb, ndim, shape), ct_dtype_name(t));
    return st;
  }
  s->mem = s->block->mem;
  s->offset = s->block->offset;
  s->nbytes = nbytes;
  *out = x;
  return CT_OK;
}

ct_status ct__tensor_view(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset) {
  *out = NULL;
  if (ndim < 0 || ndim > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "view: ndim %d out of range [0, %d]", ndim, CT_MAX_DIMS);
  ct_tensor *x = calloc(1, sizeof *x);
  if (!x) return ct__error(CT_ERR_OUT_OF_MEMORY, "view: out of host memory");
  atomic_init(&x->refs, 1);
  atomic_init(&x->scope_refs, 0);
  atomic_fetch_add_explicit(&ct__live, 1, memory_order_relaxed);
  ct__storage_retain(t->storage);
  x->storage = t->storage;
  x->dtype = t->dtype;
  x->ndim = ndim;
  if (ndim) {
    memcpy(x->shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(x->strides, strides, (size_t)ndim * sizeof *strides);
  }
  x->offset = offset;
  *out = x;
  return CT_OK;
}

ct_status ct__check_same_device(const char *fn, const char *an, const ct_tensor *a,
                                const char *bn, const ct_tensor *b) {
  if (!a) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, an);
  if (!b) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, bn);
  if (a->storage->device != b->storage->device)
    return ct__error(CT_ERR_DEVICE_MISMATCH,
                     "%s: expected all tensors on the same device, but %s is on %s and %s is on %s", fn, an,
                     a->storage->device->spec, bn, b->storage->device->spec);
  return CT_OK;
}

ct_status ct__broadcast_shapes(int *out_ndim, int64_t *out, int an, const int64_t *a, int bn,
                               const int64_t *b, const char *fn) {
  int n = an > bn ? an : bn;
  int64_t r[CT_MAX_DIMS] = {0};
  for (int i = 0; i < n; i++) {
    int ia = an - n + i, ib = bn - n + i;
    int64_t x = ia >= 0 ? a[ia] : 1, y = ib >= 0 ? b[ib] : 1;
    if (x == y || y == 1) {
      r[i] = x;
    } else if (x == 1) {
      r[i] = y;
    } else {
      char sa[200], sb[200];
      return ct__error(CT_ERR_SHAPE_MISMATCH,
                       "%s: shapes %s and %s cannot be broadcast together (dim %d: %" PRId64 " vs %" PRId64 ")", fn,
                       ct__shape_str(sa, sizeof sa, an, a), ct__shape_str(sb, sizeof sb, bn, b), i - n, x, y);
    }
  }
  /* Two valid shapes can broadcast to one whose element count overflows ([2^32, 1] with
   * [1, 2^32]); the byte size is checked where the result is created. */
  int64_t numel = 0;
  CT__TRY(ct__shape_numel(&numel, n, r, 1, fn));
  if (n) memcpy(out, r, (size_t)n * sizeof *r);
  *out_ndim = n;
  return CT_OK;
}

/* ---- reference counting and properties ---- */

ct_tensor *ct_retain(ct_tensor *t) {
  if (t) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
  return t;
}

void ct_release(ct_tensor *t) {
  if (!t) return;
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  ct__node_release(t->grad_fn);
  ct_release(t->grad);
  ct__storage_release(t->storage);
  free(t);
  atomic_fetch_sub_explicit(&ct__live, 1, memory_order_relaxed);
}

ct_status ct__op_begin(ct_tensor **out, const ct_tensor *x, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  return CT_OK;
}

ct_status ct__tensor_result(ct_tensor **out, ct_tensor *r, ct_status st) {
  if (st != CT_OK) {
    ct_release(r);
    return st;
  }
  *out = r;
  return CT_OK;
}

ct_status ct__tensor_results(int n, ct_tensor **const outs[], ct_tensor *const rs[], ct_status st) {
  for (int i = 0; i < n; i++) {
    if (st == CT_OK && outs[i]) *outs[i] = rs[i];
    else ct_release(rs[i]);
  }
  return st;
}

ct_device *ct_tensor_device(const ct_tensor *t) { return t ? t->storage->device : NULL; }
ct_dtype ct_tensor_dtype(const ct_tensor *t) { return t ? t->dtype : (ct_dtype)-1; }
int ct_tensor_ndim(const ct_tensor *t) { return t ? t->ndim : -1; }
const int64_t *ct_tensor_shape(const ct_tensor *t) { return t ? t->shape : NULL; }
const int64_t *ct_tensor_strides(const ct_tensor *t) { return t ? t->strides : NULL; }
int64_t ct_tensor_offset(const ct_tensor *t) { return t ? t->offset : 0; }

int64_t ct_numel(const ct_tensor *t) {
  if (!t) return 0;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

size_t ct_tensor_nbytes(const ct_tensor *t) { return t ? (size_t)ct_numel(t) * ct_dtype_size(t->dtype) : 0; }

bool ct_tensor_is_contiguous(const ct_tensor *t) {
  if (!t) return false;
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 0) return true;
    if (t->shape[i] != 1 && t->strides[i] != expect) return false;
    expect *= t->shape[i];
  }
  return true;
}

/* ---- creation ---- */

ct_status ct_empty(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape) {
  return ct__tensor_new(out, d, t, ndim, shape, "ct_empty");
}

static ct_status ct__full(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                          double value, const char *fn) {
  CT__TRY(ct__tensor_new(out, d, t, ndim, shape, fn));
  ct_status st = ct__dtype_check_scalar(value, t, fn, "value");
  if (st == CT_OK) st = ct__fill_value(*out, value, fn);
  if (st != CT_OK) {
    ct_release(*out);
    *out = NULL;
  }
  return st;
}

ct_status ct_zeros(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape) {
  return ct__full(out, d, t, ndim, shape, 0.0, "ct_zeros");
}

ct_status ct_ones(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape) {
  return ct__full(out, d, t, ndim, shape, 1.0, "ct_ones");
}

ct_status ct_full(ct_tensor **out, ct_device *d, ct_dtype t, int ndim, const int64_t *shape,
                  double value) {
  return ct__full(out, d, t, ndim, shape, value, "ct_full");
}

ct_status ct_arange(ct_tensor **out, ct_device *d, ct_dtype t, double start, double end, double step) {
  CT__CHECK_NOT_NULL("ct_arange", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_arange", d);
  if (!isfinite(start) || !isfinite(end) || !isfinite(step) || step == 0.0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_arange: start %g, end %g and step %g must be finite, step nonzero",
                     start, end, step);
  double count = ceil((end - start) / step);
  if (count < 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "ct_arange: step %g goes away from end (start %g, end %g): the range would be empty backwards",
                     step, start, end);
  if (count > 9e15)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_arange: %g elements (start %g, end %g, step %g) is too many", count,
                     start, end, step);
  int64_t n = (int64_t)count;
  if (n > 0 && (unsigned)t < CT_DTYPE_COUNT) {
    /* Every value produced must fit t (the one scalar rule); the end is exclusive, so
     * arange(u8, 0, 256, 1) is fine. The values are monotonic: the first and last suffice. */
    CT__TRY(ct__dtype_check_scalar(start, t, "ct_arange", "start"));
    CT__TRY(ct__dtype_check_scalar(start + (double)(n - 1) * step, t, "ct_arange", "last value"));
  }
  CT__TRY(ct__tensor_new(out, d, t, 1, &n, "ct_arange"));
  size_t es = ct_dtype_size(t);
  unsigned char *h = malloc((size_t)n * es + 1);
  if (!h) {
    ct_release(*out);
    *out = NULL;
    return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_arange: out of host memory for %" PRId64 " elements", n);
  }
  /* Integral ranges into integer dtypes are computed in 64-bit integers, so values past 2^53
   * stay exact; everything else as start + i * step in double, as PyTorch does. */
  int integral = !ct_dtype_is_floating_point(t) && start == trunc(start) && step == trunc(step) && fabs(start) < 9.2e18 &&
                 fabs(step) < 9.2e18;
  for (int64_t i = 0; i < n; i++) {
    if (integral)
      ct__host_store_int(t, h + (size_t)i * es,
                         (int64_t)((uint64_t)(int64_t)start + (uint64_t)i * (uint64_t)(int64_t)step));
    else
      ct__host_store_double(t, h + (size_t)i * es, start + (double)i * step);
  }
  ct_status st = ct_copy_from_host(*out, h, (size_t)n * es);
  free(h);
  if (st != CT_OK) {
    ct_release(*out);
    *out = NULL;
  }
  return st;
}

ct_status ct_eye(ct_tensor **out, ct_device *d, ct_dtype t, int64_t n, int64_t m) {
  CT__CHECK_NOT_NULL("ct_eye", out);
  *out = NULL;
  if (n < 0 || m < 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_eye: n %" PRId64 " and m %" PRId64 " must be >= 0", n, m);
  int64_t shape[2] = {n, m};
  CT__TRY(ct__full(out, d, t, 2, shape, 0.0, "ct_eye"));
  /* The diagonal is a strided view with stride m + 1 (none when empty, where m + 1 could
   * overflow: [0, 2^63 - 1] is a valid empty shape). */
  int64_t k = n < m ? n : m;
  if (k == 0) return CT_OK;
  int64_t stride = m + 1;
  ct_tensor *diag;
  ct_status st = ct__tensor_view(&diag, *out, 1, &k, &stride, 0);
  if (st == CT_OK) {
    st = ct__fill_value(diag, 1.0, "ct_eye");
    ct_release(diag);
  }
  if (st != CT_OK) {
    ct_release(*out);
    *out = NULL;
  }
  return st;
}
