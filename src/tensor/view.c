/* Views: new geometry over the same storage, never a copy (except ct_reshape's fallback). */
#include <inttypes.h>
#include <string.h>

#include "core/error.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* Records the backward of r, a view (or reshaped copy) of src made by fn, as node kind op when
 * src requires grad; *node (may be NULL) gets the node, or NULL, for the op's arguments. Hands
 * r out through *out, or releases it on failure. */
static ct_status ct__view_result(ct_tensor **out, ct_tensor *r, const ct_tensor *src, ct__gop op, ct__node **node,
                                 const char *fn) {
  ct__node *n = NULL;
  ct_status st = ct__grad_record(&n, r, op, 0, 1, (const ct_tensor *[]){src}, fn);
  if (node) *node = st == CT_OK ? n : NULL;
  return ct__tensor_result(out, r, st);
}

/* Every view is made here: the new shape's element count and byte size must fit in int64
 * (ct_expand and ct_view/ct_reshape of an empty tensor can produce shapes that don't), so
 * that ct_numel() and ct_tensor_nbytes() of any tensor are exact. The view of t records its
 * backward as op (see ct__view_result). */
static ct_status ct__new_view(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape,
                              const int64_t *strides, int64_t offset, ct__gop op, ct__node **node, const char *fn) {
  int64_t numel = 0;
  if (node) *node = NULL;
  CT__TRY(ct__shape_numel(&numel, ndim, shape, ct_dtype_size(t->dtype), fn));
  ct_tensor *r = NULL;
  CT__TRY(ct__tensor_view(&r, t, ndim, shape, strides, offset));
  return ct__view_result(out, r, t, op, node, fn);
}

/* Resolves a -1 in shape against numel into out. */
static ct_status ct__infer_shape(int64_t *out, const ct_tensor *t, int ndim, const int64_t *shape, const char *fn) {
  if (ndim < 0 || ndim > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: ndim %d out of range [0, %d]", fn, ndim, CT_MAX_DIMS);
  if (ndim > 0 && !shape) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 'shape' is NULL with ndim %d", fn, ndim);
  char sa[200], sb[200];
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == -1) {
      if (infer >= 0)
        return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: shape %s has more than one -1", fn,
                         ct__shape_str(sa, sizeof sa, ndim, shape));
      infer = i;
    } else if (shape[i] < 0) {
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: shape %s has a negative dim (%" PRId64 " at dim %d)", fn,
                       ct__shape_str(sa, sizeof sa, ndim, shape), shape[i], i);
    } else {
      if (shape[i] != 0 && known > INT64_MAX / shape[i])
        return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: shape %s is invalid for input of shape %s", fn,
                         ct__shape_str(sa, sizeof sa, ndim, shape), ct__shape_str(sb, sizeof sb, t->ndim, t->shape));
      known *= shape[i];
    }
    out[i] = shape[i];
  }
  int64_t numel = ct_numel(t);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: shape %s is invalid for input of shape %s (%" PRId64 " elements)", fn,
                       ct__shape_str(sa, sizeof sa, ndim, shape), ct__shape_str(sb, sizeof sb, t->ndim, t->shape), numel);
    out[infer] = numel / known;
  } else if (known != numel) {
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: shape %s is invalid for input of shape %s (%" PRId64 " elements)", fn,
                     ct__shape_str(sa, sizeof sa, ndim, shape), ct__shape_str(sb, sizeof sb, t->ndim, t->shape), numel);
  }
  /* An empty input takes any shape with a zero in it, including ones whose contiguous strides
   * would overflow; refuse those before strides are computed. */
  int64_t n = 0;
  return ct__shape_numel(&n, ndim, out, ct_dtype_size(t->dtype), fn);
}

/* Strides expressing new_shape over t's memory without a copy (PyTorch's computeStride): each
 * run of t's dims that is contiguous within itself must map onto whole dims of the new shape.
 * Returns 0 when impossible. */
static int ct__view_strides(int64_t *out, const ct_tensor *t, int ndim, const int64_t *shape) {
  int64_t numel = ct_numel(t);
  if (numel == 0) {
    ct__contiguous_strides(out, ndim, shape);
    return 1;
  }
  int on = t->ndim;
  int64_t osh[CT_MAX_DIMS], ost[CT_MAX_DIMS];
  if (on == 0) {
    on = 1;
    osh[0] = 1;
    ost[0] = 1;
  } else {
    memcpy(osh, t->shape, sizeof osh);
    memcpy(ost, t->strides, sizeof ost);
  }
  int view_d = ndim - 1;
  int64_t chunk_base = ost[on - 1], tensor_numel = 1, view_numel = 1;
  for (int td = on - 1; td >= 0; td--) {
    tensor_numel *= osh[td];
    if (td == 0 || (osh[td - 1] != 1 && ost[td - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (td > 0) {
        chunk_base = ost[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

ct_status ct_view(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape) {
  CT__CHECK_NOT_NULL("ct_view", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_view", t);
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  CT__TRY(ct__infer_shape(sh, t, ndim, shape, "ct_view"));
  if (!ct__view_strides(st, t, ndim, sh)) {
    char sa[200], sb[200], sc[200];
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "ct_view: shape %s cannot view a tensor of shape %s with strides %s without a copy; use "
                     "ct_reshape (which copies) or ct_contiguous first",
                     ct__shape_str(sa, sizeof sa, ndim, sh), ct__shape_str(sb, sizeof sb, t->ndim, t->shape),
                     ct__shape_str(sc, sizeof sc, t->ndim, t->strides));
  }
  return ct__new_view(out, t, ndim, sh, st, t->offset, CT__GOP_RESHAPE, NULL, "ct_view");
}

/* ct_reshape with fn for messages and the node (ct_flatten, ct_unflatten); out and t checked. */
static ct_status reshape(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape, const char *fn) {
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  CT__TRY(ct__infer_shape(sh, t, ndim, shape, fn));
  if (ct__view_strides(st, t, ndim, sh))
    return ct__new_view(out, t, ndim, sh, st, t->offset, CT__GOP_RESHAPE, NULL, fn);
  /* The copy is internal: one RESHAPE node from t covers it (its gradient is reshaped back). */
  ct_tensor *c, *r = NULL;
  CT__TRY(ct__contiguous(&c, t, t->dtype, 1, fn));
  ct__contiguous_strides(st, ndim, sh);
  ct_status s = ct__tensor_view(&r, c, ndim, sh, st, c->offset);
  ct_release(c);
  if (s != CT_OK) return s;
  return ct__view_result(out, r, t, CT__GOP_RESHAPE, NULL, fn);
}

ct_status ct_reshape(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape) {
  CT__CHECK_NOT_NULL("ct_reshape", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_reshape", t);
  return reshape(out, t, ndim, shape, "ct_reshape");
}

ct_status ct_flatten(ct_tensor **out, const ct_tensor *t, int start_dim, int end_dim) {
  const char *fn = "ct_flatten";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, t);
  int s, e;
  CT__TRY(ct__dim_wrap(&s, t->ndim, start_dim, fn));
  CT__TRY(ct__dim_wrap(&e, t->ndim, end_dim, fn));
  if (s > e)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: start_dim %d (dim %d) comes after end_dim %d (dim %d)", fn,
                     start_dim, s, end_dim, e);
  if (t->ndim == 0) return reshape(out, t, 1, (const int64_t[]){1}, fn); /* a scalar flattens to [1] */
  int64_t sh[CT_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < s; i++) sh[nd++] = t->shape[i];
  int64_t m = 1;
  for (int i = s; i <= e; i++) m *= t->shape[i]; /* fits: the tensor's numel does */
  sh[nd++] = m;
  for (int i = e + 1; i < t->ndim; i++) sh[nd++] = t->shape[i];
  return reshape(out, t, nd, sh, fn);
}

ct_status ct_unflatten(ct_tensor **out, const ct_tensor *t, int dim, const int64_t *sizes, int n) {
  const char *fn = "ct_unflatten";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, t);
  CT__CHECK_NOT_NULL(fn, sizes);
  if (t->ndim == 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: a 0-d tensor has no dim to unflatten", fn);
  int d;
  CT__TRY(ct__dim_wrap(&d, t->ndim, dim, fn));
  if (n < 1 || n > CT_MAX_DIMS - t->ndim + 1)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %d (expected 1..%d: at most %d dims in all)", fn, n,
                     CT_MAX_DIMS - t->ndim + 1, CT_MAX_DIMS);
  char sa[200];
  int infer = -1;
  int64_t prod = 1, size = t->shape[d];
  for (int i = 0; i < n; i++) {
    if (sizes[i] == -1 && infer < 0) {
      infer = i;
      continue;
    }
    if (sizes[i] < 0)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: sizes %s: only one size may be -1 and none other negative", fn,
                       ct__shape_str(sa, sizeof sa, n, sizes));
    /* The product is checked against size as it grows, so it cannot overflow. */
    if (sizes[i] != 0 && prod > (size > 0 ? size : 1) / sizes[i] + 1) prod = INT64_MAX;
    else prod *= sizes[i];
  }
  int64_t sh[CT_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < d; i++) sh[nd++] = t->shape[i];
  for (int i = 0; i < n; i++) sh[nd++] = sizes[i];
  for (int i = d + 1; i < t->ndim; i++) sh[nd++] = t->shape[i];
  bool ok = infer < 0 ? prod == size : prod != 0 && size % prod == 0;
  if (!ok)
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "%s: sizes %s don't multiply up to the size of dim %d (%" PRId64 ") of the input%s", fn,
                     ct__shape_str(sa, sizeof sa, n, sizes), d, size,
                     infer >= 0 && prod == 0 ? " (-1 is ambiguous beside a size 0)" : "");
  if (infer >= 0) sh[d + infer] = size / prod;
  return reshape(out, t, nd, sh, fn); /* splitting a dim always gives a view */
}

/* The view of t whose dim i is t's dim perm[i] (shape sh, strides st): a PERMUTE node keeps
 * perm for the inverse permutation of the gradient. */
static ct_status ct__permuted_view(ct_tensor **out, const ct_tensor *t, const int *perm, const int64_t *sh,
                                   const int64_t *st, const char *fn) {
  ct__node *n = NULL;
  CT__TRY(ct__new_view(out, t, t->ndim, sh, st, t->offset, CT__GOP_PERMUTE, &n, fn));
  for (int i = 0; n && i < t->ndim; i++) ct__rec_PERMUTE(n)->perm[i] = perm[i];
  return CT_OK;
}

ct_status ct_permute(ct_tensor **out, const ct_tensor *t, const int *dims) {
  CT__CHECK_NOT_NULL("ct_permute", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_permute", t);
  if (t->ndim > 0) CT__CHECK_NOT_NULL("ct_permute", dims);
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int seen[CT_MAX_DIMS] = {0}, perm[CT_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) {
    int d = 0;
    CT__TRY(ct__dim_wrap(&d, t->ndim, dims[i], "ct_permute"));
    if (seen[d])
      return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_permute: dim %d appears twice in the permutation of %d dims", d,
                       t->ndim);
    seen[d] = 1;
    perm[i] = d;
    sh[i] = t->shape[d];
    st[i] = t->strides[d];
  }
  return ct__permuted_view(out, t, perm, sh, st, "ct_permute");
}

ct_status ct_transpose(ct_tensor **out, const ct_tensor *t, int dim0, int dim1) {
  CT__CHECK_NOT_NULL("ct_transpose", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_transpose", t);
  int a = 0, b = 0;
  CT__TRY(ct__dim_wrap(&a, t->ndim, dim0, "ct_transpose"));
  CT__TRY(ct__dim_wrap(&b, t->ndim, dim1, "ct_transpose"));
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int perm[CT_MAX_DIMS];
  memcpy(sh, t->shape, sizeof sh);
  memcpy(st, t->strides, sizeof st);
  for (int i = 0; i < t->ndim; i++) perm[i] = i;
  /* A 0-d tensor takes dims 0 and -1 (wrapped to 0) but has no dim to swap. */
  if (t->ndim > 0) {
    sh[a] = t->shape[b];
    st[a] = t->strides[b];
    sh[b] = t->shape[a];
    st[b] = t->strides[a];
    perm[a] = b;
    perm[b] = a;
  }
  return ct__permuted_view(out, t, perm, sh, st, "ct_transpose");
}

ct_status ct_slice(ct_tensor **out, const ct_tensor *t, int dim, int64_t start, int64_t stop, int64_t step) {
  CT__CHECK_NOT_NULL("ct_slice", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_slice", t);
  /* As PyTorch's narrow/slicing: a 0-d tensor has no dim to slice. */
  if (t->ndim == 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_slice: t is zero-dimensional (expected >= 1 dim)");
  int d = 0;
  CT__TRY(ct__dim_wrap(&d, t->ndim, dim, "ct_slice"));
  if (step <= 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_slice: step must be positive, got %" PRId64, step);
  int64_t n = t->shape[d];
  if (start < 0) start = start < -n ? 0 : start + n;
  if (stop < 0) stop = stop < -n ? 0 : stop + n;
  if (start > n) start = n;
  if (stop > n) stop = n;
  /* ceil((stop - start) / step) without stop - start + step - 1, which overflows for a step
   * near INT64_MAX (Python: range(10)[0:10:2**63-1] is [0]). */
  int64_t len = stop > start ? (stop - start - 1) / step + 1 : 0;
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  memcpy(sh, t->shape, sizeof sh);
  memcpy(st, t->strides, sizeof st);
  sh[d] = len;
  /* With at most one element along d its stride is never used: keep t's rather than a product
   * that may not fit. */
  if (len > 1 && __builtin_mul_overflow(t->strides[d], step, &st[d]))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "ct_slice: stride %" PRId64 " of dim %d times step %" PRId64 " does not fit int64", t->strides[d],
                     d, step);
  ct__node *nd = NULL;
  CT__TRY(ct__new_view(out, t, t->ndim, sh, st, t->offset + (len > 0 ? start * t->strides[d] : 0), CT__GOP_SLICE,
                       &nd, "ct_slice"));
  if (nd) *ct__rec_SLICE(nd) = (ct__rec_slice){.dim = d, .start = start, .step = step};
  return CT_OK;
}

ct_status ct_squeeze(ct_tensor **out, const ct_tensor *t, int dim) {
  CT__CHECK_NOT_NULL("ct_squeeze", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_squeeze", t);
  int d = 0;
  CT__TRY(ct__dim_wrap(&d, t->ndim, dim, "ct_squeeze"));
  if (t->ndim == 0) return ct__new_view(out, t, 0, NULL, NULL, t->offset, CT__GOP_RESHAPE, NULL, "ct_squeeze");
  if (t->shape[d] != 1)
    return ct__new_view(out, t, t->ndim, t->shape, t->strides, t->offset, CT__GOP_RESHAPE, NULL, "ct_squeeze");
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (i == d) continue;
    sh[n] = t->shape[i];
    st[n++] = t->strides[i];
  }
  return ct__new_view(out, t, n, sh, st, t->offset, CT__GOP_RESHAPE, NULL, "ct_squeeze");
}

ct_status ct_unsqueeze(ct_tensor **out, const ct_tensor *t, int dim) {
  CT__CHECK_NOT_NULL("ct_unsqueeze", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_unsqueeze", t);
  if (t->ndim >= CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_unsqueeze: tensor already has the maximum of %d dims", CT_MAX_DIMS);
  int d = 0;
  CT__TRY(ct__dim_wrap(&d, t->ndim + 1, dim, "ct_unsqueeze"));
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int n = 0;
  for (int i = 0; i <= t->ndim; i++) {
    if (i == d) {
      sh[n] = 1;
      st[n++] = i < t->ndim ? t->shape[i] * t->strides[i] : 1;
    }
    if (i < t->ndim) {
      sh[n] = t->shape[i];
      st[n++] = t->strides[i];
    }
  }
  return ct__new_view(out, t, n, sh, st, t->offset, CT__GOP_RESHAPE, NULL, "ct_unsqueeze");
}

ct_status ct_expand(ct_tensor **out, const ct_tensor *t, int ndim, const int64_t *shape) {
  CT__CHECK_NOT_NULL("ct_expand", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_expand", t);
  char sa[200], sb[200];
  if (ndim < t->ndim || ndim > CT_MAX_DIMS)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "ct_expand: ndim %d must be between the tensor's %d dims and %d", ndim, t->ndim, CT_MAX_DIMS);
  if (ndim > 0) CT__CHECK_NOT_NULL("ct_expand", shape);
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int j = i - lead;
    if (j < 0) {
      if (shape[i] < 0)
        return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_expand: new leading dim %d of shape %s must be >= 0", i,
                         ct__shape_str(sa, sizeof sa, ndim, shape));
      sh[i] = shape[i];
      st[i] = 0;
    } else if (shape[i] == -1 || shape[i] == t->shape[j]) {
      sh[i] = t->shape[j];
      st[i] = t->strides[j];
    } else if (t->shape[j] == 1 && shape[i] >= 0) {
      sh[i] = shape[i];
      st[i] = 0;
    } else {
      return ct__error(CT_ERR_SHAPE_MISMATCH, "ct_expand: a tensor of shape %s cannot be expanded to %s (dim %d: %" PRId64
                       " to %" PRId64 ")", ct__shape_str(sa, sizeof sa, t->ndim, t->shape),
                       ct__shape_str(sb, sizeof sb, ndim, shape), i, t->shape[j], shape[i]);
    }
  }
  return ct__new_view(out, t, ndim, sh, st, t->offset, CT__GOP_EXPAND, NULL, "ct_expand");
}
