/* Device-side copies: ct_copy (broadcast + cast into any strided destination), ct_contiguous,
 * ct_cast, and strided fills. All of them launch kernels/copy.cl. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "kernel/engine.h"
#include "profile/profile.h"
#include "tensor/tensor.h"

static const char *ct__bits_type(size_t es) {
  switch (es) {
    case 1: return "uchar";
    case 2: return "ushort";
    case 4: return "uint";
    default: return "ulong";
  }
}

/* A copy's geometry after dropping size-1 dims and merging dims that are contiguous with their
 * inner neighbour in both tensors. */
struct ct__geom {
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t dst[CT_MAX_DIMS];
  int64_t src[CT_MAX_DIMS];
};

static void ct__collapse(struct ct__geom *g, int ndim, const int64_t *shape, const int64_t *dst,
                         const int64_t *src) {
  int n = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 1) continue;
    if (n > 0 && g->dst[n - 1] == dst[i] * shape[i] && g->src[n - 1] == src[i] * shape[i]) {
      g->shape[n - 1] *= shape[i];
      g->dst[n - 1] = dst[i];
      g->src[n - 1] = src[i];
      continue;
    }
    g->shape[n] = shape[i];
    g->dst[n] = dst[i];
    g->src[n] = src[i];
    n++;
  }
  g->ndim = n;
}

static cl_long8 ct__long8(int n, const int64_t *v, int64_t pad) {
  cl_long8 r;
  for (int i = 0; i < 8; i++) r.s[i] = i < n ? v[i] : pad;
  return r;
}

/* Pads g to at least 2 dims (a leading size-1 dim) and sets the NDRange: the innermost dim,
 * the next one, and the product of the rest. */
static void ct__nd_range(struct ct__geom *g, size_t *global) {
  while (g->ndim < 2) {
    memmove(g->shape + 1, g->shape, (size_t)g->ndim * sizeof g->shape[0]);
    memmove(g->dst + 1, g->dst, (size_t)g->ndim * sizeof g->dst[0]);
    memmove(g->src + 1, g->src, (size_t)g->ndim * sizeof g->src[0]);
    g->shape[0] = 1;
    g->dst[0] = g->src[0] = 0;
    g->ndim++;
  }
  global[0] = (size_t)g->shape[g->ndim - 1];
  global[1] = (size_t)g->shape[g->ndim - 2];
  global[2] = 1;
  for (int i = 0; i < g->ndim - 2; i++) global[2] *= (size_t)g->shape[i];
}

/* Element offset of t's element 0 in its cl_mem. Storage offsets are aligned, so this divides. */
static cl_long ct__elem_off(const ct_tensor *t) {
  return (cl_long)(ct__tensor_byte_offset(t) / ct_dtype_size(t->dtype));
}

/* dst[...] = convert(src broadcast to dst's shape). src_strides has dst->ndim entries (0 on
 * broadcast dims). No checks: callers validated devices, shapes and overlap. */
static ct_status ct__copy_launch(ct_tensor *dst, const ct_tensor *src, const int64_t *src_strides,
                                 const char *fn) {
  int64_t n = ct_numel(dst);
  if (n == 0) return CT_OK;
  ct_device *d = dst->storage->device;
  struct ct__geom g;
  ct__collapse(&g, dst->ndim, dst->shape, dst->strides, src_strides);
  int contig = g.ndim == 0 || (g.ndim == 1 && g.dst[0] == 1 && g.src[0] == 1);
  size_t es = ct_dtype_size(dst->dtype);
  int same = dst->dtype == src->dtype;

  /* Callers route overlapping ranges through a temporary, so this is a legal copy even when
   * both blocks lie in one cached OpenCL buffer. */
  if (same && contig) {
    cl_event pev;
    cl_int err = clEnqueueCopyBuffer(ct__device_queue(d), src->storage->mem, dst->storage->mem,
                                     ct__tensor_byte_offset(src), ct__tensor_byte_offset(dst), (size_t)n * es, 0,
                                     NULL, ct__profile_event(d, &pev));
    if (err == CL_SUCCESS) ct__profile_record(d, "copy", pev);
    if (err != CL_SUCCESS)
      return ct__cl_error(err, "%s: clEnqueueCopyBuffer of %zu bytes on %s failed", fn, (size_t)n * es, d->spec);
    return CT_OK;
  }

  char opts[64];
  if (same)
    snprintf(opts, sizeof opts, "-DCT_BITS=%s", ct__bits_type(es));
  else
    snprintf(opts, sizeof opts, "-DCT_SRC=%d -DCT_DST=%d", (int)src->dtype, (int)dst->dtype);
  ct__kernel *k;
  CT__TRY(ct__kernel_get(&k, d, "copy.cl", contig ? "copy_contig" : "copy_strided", opts));
  cl_mem dm = dst->storage->mem, sm = src->storage->mem;
  cl_long doff = ct__elem_off(dst), soff = ct__elem_off(src);
  size_t global[3];
  cl_kernel ck = ct__kernel_lock(k);
  cl_int err = CL_SUCCESS;
  if (contig) {
    /* One work-item per element (what CPU compilers vectorize best), in launches of at most
     * 2^30 items, since some drivers cap a dimension's global size at 32 bits. The kernel has
     * no bounds test, so each launch is whole work-groups of a fixed size (ct__launch_dims: no
     * PoCL compile per tensor size) and the remainder goes in groups of one. */
    ct_status st = CT_OK;
    size_t group = ct__kernel_group_size(k), one = 1;
    const int64_t chunk = INT64_C(1) << 30;
    for (int64_t start = 0; start < n && st == CT_OK;) {
      int64_t left = n - start;
      size_t items = (size_t)(left < chunk ? left : chunk), *local = &group;
      if (items >= group)
        items -= items % group;
      else
        local = &one;
      cl_long dso = doff + start, sso = soff + start;
      start += (int64_t)items;
      err = clSetKernelArg(ck, 0, sizeof dm, &dm);
      err |= clSetKernelArg(ck, 1, sizeof dso, &dso);
      err |= clSetKernelArg(ck, 2, sizeof sm, &sm);
      err |= clSetKernelArg(ck, 3, sizeof sso, &sso);
      if (err != CL_SUCCESS)
        st = ct__error(CT_ERR_INTERNAL, "%s: setting the arguments of %s failed", fn, ct__kernel_name(k));
      else
        st = ct__kernel_launch(k, d, 1, &items, local);
    }
    ct__kernel_unlock(k);
    return st;
  } else {
    ct__nd_range(&g, global);
    int no = g.ndim - 2;
    cl_long ds0 = g.dst[no + 1], ds1 = g.dst[no], ss0 = g.src[no + 1], ss1 = g.src[no];
    cl_long8 sh = ct__long8(no, g.shape, 1), ds = ct__long8(no, g.dst, 0), ss = ct__long8(no, g.src, 0);
    cl_int nd = no;
    err |= clSetKernelArg(ck, 0, sizeof dm, &dm);
    err |= clSetKernelArg(ck, 1, sizeof doff, &doff);
    err |= clSetKernelArg(ck, 2, sizeof ds0, &ds0);
    err |= clSetKernelArg(ck, 3, sizeof ds1, &ds1);
    err |= clSetKernelArg(ck, 4, sizeof sm, &sm);
    err |= clSetKernelArg(ck, 5, sizeof soff, &soff);
    err |= clSetKernelArg(ck, 6, sizeof ss0, &ss0);
    err |= clSetKernelArg(ck, 7, sizeof ss1, &ss1);
    err |= clSetKernelArg(ck, 8, sizeof sh, &sh);
    err |= clSetKernelArg(ck, 9, sizeof ds, &ds);
    err |= clSetKernelArg(ck, 10, sizeof ss, &ss);
    err |= clSetKernelArg(ck, 11, sizeof nd, &nd);
    cl_long n0 = (cl_long)global[0], n1 = (cl_long)global[1];
    err |= clSetKernelArg(ck, 12, sizeof n0, &n0);
    err |= clSetKernelArg(ck, 13, sizeof n1, &n1);
  }
  ct_status st;
  if (err != CL_SUCCESS) {
    st = ct__error(CT_ERR_INTERNAL, "%s: setting the arguments of %s failed", fn, ct__kernel_name(k));
  } else {
    size_t local[3];
    ct__launch_dims(k, 3, global, local);
    st = ct__kernel_launch(k, d, 3, global, local);
  }
  ct__kernel_unlock(k);
  return st;
}

ct_status ct__fill_bits(ct_tensor *t, const void *elem, const char *fn) {
  int64_t n = ct_numel(t);
  if (n == 0) return CT_OK;
  ct_device *d = t->storage->device;
  size_t es = ct_dtype_size(t->dtype);
  if (ct_tensor_is_contiguous(t)) {
    cl_event pev;
    cl_int err = clEnqueueFillBuffer(ct__device_queue(d), t->storage->mem, elem, es, ct__tensor_byte_offset(t),
                                     (size_t)n * es, 0, NULL, ct__profile_event(d, &pev));
    if (err == CL_SUCCESS) ct__profile_record(d, "fill", pev);
    if (err != CL_SUCCESS)
      return ct__cl_error(err, "%s: clEnqueueFillBuffer of %zu bytes on %s failed", fn, (size_t)n * es, d->spec);
    return CT_OK;
  }
  struct ct__geom g;
  ct__collapse(&g, t->ndim, t->shape, t->strides, t->strides);
  char opts[64];
  snprintf(opts, sizeof opts, "-DCT_BITS=%s", ct__bits_type(es));
  ct__kernel *k;
  CT__TRY(ct__kernel_get(&k, d, "copy.cl", "fill_strided", opts));
  cl_mem dm = t->storage->mem;
  cl_long doff = ct__elem_off(t);
  size_t global[3];
  ct__nd_range(&g, global);
  int no = g.ndim - 2;
  cl_long ds0 = g.dst[no + 1], ds1 = g.dst[no];
  cl_long8 sh = ct__long8(no, g.shape, 1), ds = ct__long8(no, g.dst, 0);
  cl_int nd = no;
  cl_kernel ck = ct__kernel_lock(k);
  cl_int err = CL_SUCCESS;
  err |= clSetKernelArg(ck, 0, sizeof dm, &dm);
  err |= clSetKernelArg(ck, 1, sizeof doff, &doff);
  err |= clSetKernelArg(ck, 2, sizeof ds0, &ds0);
  err |= clSetKernelArg(ck, 3, sizeof ds1, &ds1);
  err |= clSetKernelArg(ck, 4, sizeof sh, &sh);
  err |= clSetKernelArg(ck, 5, sizeof ds, &ds);
  err |= clSetKernelArg(ck, 6, sizeof nd, &nd);
  err |= clSetKernelArg(ck, 7, es, elem);
  cl_long n0 = (cl_long)global[0], n1 = (cl_long)global[1];
  err |= clSetKernelArg(ck, 8, sizeof n0, &n0);
  err |= clSetKernelArg(ck, 9, sizeof n1, &n1);
  size_t local[3];
  ct__launch_dims(k, 3, global, local);
  ct_status st;
  if (err != CL_SUCCESS)
    st = ct__error(CT_ERR_INTERNAL, "%s: setting the arguments of fill_strided failed", fn);
  else
    st = ct__kernel_launch(k, d, 3, global, local);
  ct__kernel_unlock(k);
  return st;
}

ct_status ct__fill_value(ct_tensor *t, double value, const char *fn) {
  uint64_t pattern = 0;
  ct__host_store_double(t->dtype, &pattern, value);
  return ct__fill_bits(t, &pattern, fn);
}

/* Byte range [lo, hi) that t's elements span inside its cl_mem. */
static void ct__span(const ct_tensor *t, size_t *lo, size_t *hi) {
  int64_t mn = 0, mx = 0;
  for (int i = 0; i < t->ndim; i++) {
    int64_t e = (t->shape[i] - 1) * t->strides[i];
    if (e < 0) mn += e; else mx += e;
  }
  size_t es = ct_dtype_size(t->dtype), base = ct__tensor_byte_offset(t);
  *lo = base + (size_t)(mn * (int64_t)es);
  *hi = base + (size_t)((mx + 1) * (int64_t)es);
}

static int ct__overlap(const ct_tensor *a, const ct_tensor *b) {
  if (a->storage->mem != b->storage->mem || ct_numel(a) == 0 || ct_numel(b) == 0) return 0;
  size_t alo, ahi, blo, bhi;
  ct__span(a, &alo, &ahi);
  ct__span(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

ct_status ct__copy(ct_tensor *dst, const ct_tensor *src, const char *fn) {
  CT__TRY(ct__check_same_device(fn, "dst", dst, "src", src));
  int bn;
  int64_t bshape[CT_MAX_DIMS];
  char sa[200], sb[200];
  ct_status st = ct__broadcast_shapes(&bn, bshape, dst->ndim, dst->shape, src->ndim, src->shape, fn);
  if (st != CT_OK || bn != dst->ndim || memcmp(bshape, dst->shape, (size_t)bn * sizeof *bshape) != 0)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: src of shape %s cannot be broadcast to dst of shape %s", fn,
                     ct__shape_str(sa, sizeof sa, src->ndim, src->shape),
                     ct__shape_str(sb, sizeof sb, dst->ndim, dst->shape));
  /* Several destination elements in one memory location (an expanded view) would receive
   * different values in an unspecified order: refuse, as PyTorch does. */
  for (int i = 0; i < dst->ndim; i++)
    if (dst->shape[i] > 1 && dst->strides[i] == 0)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: dst of shape %s has stride 0 at dim %d (an expanded view), so several of its elements "
                       "share one memory location; write into a contiguous tensor instead",
                       fn, ct__shape_str(sb, sizeof sb, dst->ndim, dst->shape), i);
  int64_t sstr[CT_MAX_DIMS];
  for (int i = 0; i < dst->ndim; i++) {
    int j = i - (dst->ndim - src->ndim);
    sstr[i] = (j < 0 || src->shape[j] == 1) ? 0 : src->strides[j];
  }
  if (ct__overlap(dst, src)) {
    /* A parallel kernel reading and writing the same elements would race: go through a copy. */
    ct_tensor *tmp;
    CT__TRY(ct__tensor_new(&tmp, src->storage->device, src->dtype, src->ndim, src->shape, fn));
    int64_t cstr[CT_MAX_DIMS];
    memcpy(cstr, src->strides, sizeof cstr);
    st = ct__copy_launch(tmp, src, cstr, fn);
    if (st == CT_OK) {
      for (int i = 0; i < dst->ndim; i++) {
        int j = i - (dst->ndim - src->ndim);
        sstr[i] = (j < 0 || src->shape[j] == 1) ? 0 : tmp->strides[j];
      }
      st = ct__copy_launch(dst, tmp, sstr, fn);
    }
    ct_release(tmp);
    return st;
  }
  return ct__copy_launch(dst, src, sstr, fn);
}

ct_status ct_copy(ct_tensor *dst, const ct_tensor *src) { return ct__copy(dst, src, "ct_copy"); }

ct_status ct__contiguous(ct_tensor **out, const ct_tensor *t, ct_dtype dt, int force, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, t);
  if (!force && dt == t->dtype && ct_tensor_is_contiguous(t)) {
    *out = ct_retain((ct_tensor *)t);
    return CT_OK;
  }
  ct_tensor *r;
  CT__TRY(ct__tensor_new(&r, t->storage->device, dt, t->ndim, t->shape, fn));
  ct_status st = ct__copy_launch(r, t, t->strides, fn);
  if (st != CT_OK) {
    ct_release(r);
    return st;
  }
  *out = r;
  return CT_OK;
}

ct_status ct_contiguous(ct_tensor **out, const ct_tensor *t) {
  CT__CHECK_NOT_NULL("ct_contiguous", t);
  return ct__contiguous(out, t, t->dtype, 0, "ct_contiguous");
}

ct_status ct_cast(ct_tensor **out, const ct_tensor *t, ct_dtype dt) {
  CT__CHECK_NOT_NULL("ct_cast", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_cast", t);
  return ct__contiguous(out, t, dt, 1, "ct_cast");
}
