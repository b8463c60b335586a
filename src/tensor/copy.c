/* Device-side copies: ct_copy (broadcast + cast into any strided destination), ct_contiguous,
 * ct_cast, and strided fills. All of them launch kernels/copy.cl. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "kernel/launch_geom.h"
#include "profile/profile.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* A copy's geometry: shape and the two operands' strides, collapsed by ct__collapse_dims(),
 * then padded to at least 2 dims. */
struct ct__geom {
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t dst[CT_MAX_DIMS];
  int64_t src[CT_MAX_DIMS];
};

/* Collapses (shape, dst, src) into g. */
static void ct__copy_geom(struct ct__geom *g, int ndim, const int64_t *shape, const int64_t *dst,
                          const int64_t *src) {
  memcpy(g->shape, shape, (size_t)ndim * sizeof *shape);
  memcpy(g->dst, dst, (size_t)ndim * sizeof *dst);
  memcpy(g->src, src, (size_t)ndim * sizeof *src);
  int64_t *st[2] = {g->dst, g->src};
  g->ndim = ct__collapse_dims(ndim, g->shape, 2, st, 0);
}

/* Copies of at least this many elements get launch shapes fitted to their geometry (the dim
 * swap in ct__nd_range(), ct__launch_planes() in ct__strided_launch()); smaller ones keep
 * ct__launch_dims()'s few shapes: each new work-group shape costs PoCL a compile (seconds,
 * once per kernel cache), which a copy of a few KB never wins back. */
#define CT__COPY_FIT_MIN 16384

/* Pads g to at least 2 dims (a leading size-1 dim) and sets the NDRange: the innermost dim,
 * the next one, and the product of the rest. fit: see CT__COPY_FIT_MIN. */
static void ct__nd_range(struct ct__geom *g, size_t *global, size_t group, bool fit) {
  while (g->ndim < 2) {
    memmove(g->shape + 1, g->shape, (size_t)g->ndim * sizeof g->shape[0]);
    memmove(g->dst + 1, g->dst, (size_t)g->ndim * sizeof g->dst[0]);
    memmove(g->src + 1, g->src, (size_t)g->ndim * sizeof g->src[0]);
    g->shape[0] = 1;
    g->dst[0] = g->src[0] = 0;
    g->ndim++;
  }
  /* A short dim next to the innermost (attention's [B, T, H, D] -> [B, H, T, D] has H = 4
   * there) would leave most of each work-group idle or spread over dim 2; any order of the
   * outer dims copies the same elements, so the longest of them takes its place. */
  int n = g->ndim, longest = n - 2;
  for (int i = 0; i < n - 2; i++)
    if (g->shape[i] > g->shape[longest]) longest = i;
  if (fit && longest != n - 2 && ct__pow2_ceil((size_t)g->shape[n - 1]) * ct__pow2_ceil((size_t)g->shape[n - 2]) < group) {
    int64_t *v[3] = {g->shape, g->dst, g->src};
    for (int j = 0; j < 3; j++) {
      int64_t t = v[j][longest];
      v[j][longest] = v[j][n - 2];
      v[j][n - 2] = t;
    }
  }
  global[0] = (size_t)g->shape[g->ndim - 1];
  global[1] = (size_t)g->shape[g->ndim - 2];
  global[2] = 1;
  for (int i = 0; i < g->ndim - 2; i++) global[2] *= (size_t)g->shape[i];
}

/* The arguments copy_strided and fill_strided share: an operand (its two innermost strides as
 * scalars, the outer ones as long8s) and, last, the two innermost extents. */
static void ct__strided_operand(struct ct__kargs *a, const char *name, const ct_tensor *t, const struct ct__geom *g,
                                const int64_t *st) {
  int no = g->ndim - 2;
  ct__karg_tensor(a, name, t, 0);
  ct__karg_long(a, "s0", st[no + 1]);
  ct__karg_long(a, "s1", st[no]);
}

static ct_status ct__strided_launch(struct ct__kargs *a, ct__kernel *k, ct_device *d, size_t *global, bool fit,
                                    const char *fn) {
  ct__karg_long(a, "n0", (cl_long)global[0]);
  ct__karg_long(a, "n1", (cl_long)global[1]);
  ct__karg_long(a, "n2", (cl_long)global[2]);
  ct_status st = ct__kargs_end(a, fn);
  if (st == CT_OK) {
    size_t local[3];
    if (fit && ct__pow2_ceil(global[0]) * ct__pow2_ceil(global[1]) < ct__kernel_group_size(k))
      ct__launch_planes(k, global, local);
    else
      ct__launch_dims(k, 3, global, local);
    st = ct__kernel_launch(k, d, 3, global, local);
  }
  ct__kernel_unlock(k);
  return st;
}

/* Launches copy_contig (src given) or fill_contig (elem given) over n elements of dst: one
 * work-item per element (what CPU compilers vectorize best), in launches of at most 2^30
 * items, since some drivers cap a dimension's global size at 32 bits. The kernels have no
 * bounds test, so each launch is whole work-groups of a fixed size (ct__launch_dims: no PoCL
 * compile per tensor size). The remainder of a tensor of a group or more is the group ending at
 * its last element, which rewrites a few elements the launch before wrote with the same values
 * (the queue is in order; a copy's sides never overlap): a launch in groups of one would be
 * another PoCL compilation of the kernel (issue #30). Below a group, groups of one. Unlocks k. */
static ct_status ct__contig_launch(struct ct__kargs *a, ct__kernel *k, ct_device *d, const ct_tensor *dst,
                                   const ct_tensor *src, const void *elem, int64_t n, const char *fn) {
  ct_status st = CT_OK;
  size_t group = ct__kernel_group_size(k), one = 1;
  const int64_t chunk = INT64_C(1) << 30;
  for (int64_t start = 0; start < n && st == CT_OK;) {
    int64_t left = n - start;
    size_t items = (size_t)(left < chunk ? left : chunk), *local = &group;
    if (items >= group) {
      items -= items % group;
    } else if (n >= (int64_t)group) {
      start = n - (int64_t)group;
      items = group;
    } else {
      local = &one;
    }
    ct__kargs_begin(a, k, a->ck);
    ct__karg_tensor(a, "dst", dst, start);
    if (src) ct__karg_tensor(a, "src", src, start);
    if (elem) ct__karg(a, "value", ct_dtype_size(dst->dtype), elem);
    start += (int64_t)items;
    st = ct__kargs_end(a, fn);
    if (st == CT_OK) st = ct__kernel_launch(k, d, 1, &items, local);
  }
  ct__kernel_unlock(k);
  return st;
}

/* dst[...] = convert(src broadcast to dst's shape). src_strides has dst->ndim entries (0 on
 * broadcast dims). No checks: callers validated devices, shapes and overlap. */
static ct_status ct__copy_launch(ct_tensor *dst, const ct_tensor *src, const int64_t *src_strides,
                                 const char *fn) {
  int64_t n = ct_numel(dst);
  if (n == 0) return CT_OK;
  ct_device *d = dst->storage->device;
  struct ct__geom g;
  ct__copy_geom(&g, dst->ndim, dst->shape, dst->strides, src_strides);
  int contig = g.ndim == 0 || (g.ndim == 1 && g.dst[0] == 1 && g.src[0] == 1);
  size_t es = ct_dtype_size(dst->dtype);
  int same = dst->dtype == src->dtype;

  /* Callers route overlapping ranges through a temporary, so this is a legal copy even when
   * both blocks lie in one cached OpenCL buffer. */
  CT__TRY(ct__deferred_realize(fn));
  CT__TRY(ct__tensors_deferred_use(fn, 2, (const ct_tensor *const[]){dst, src}));
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
    snprintf(opts, sizeof opts, "-DCT_BITS=%s", ct__dtype_bits_type(es));
  else
    snprintf(opts, sizeof opts, "-DCT_SRC=%d -DCT_DST=%d", (int)src->dtype, (int)dst->dtype);
  /* Lanes style, two dims: copy_strided2, without copy_strided's outer dims and PoCL-shaped
   * tests (kernels/copy.cl). */
  bool two = !contig && g.ndim <= 2 && !ct__device_chunked(d);
  ct__kernel *k;
  CT__TRY(ct__kernel_get(&k, d, "copy.cl", contig ? "copy_contig" : two ? "copy_strided2" : "copy_strided", opts));
  struct ct__kargs a = ct__kargs_lock(k);
  if (contig) return ct__contig_launch(&a, k, d, dst, src, NULL, n, fn);
  size_t global[3];
  bool fit = n >= CT__COPY_FIT_MIN;
  ct__nd_range(&g, global, ct__kernel_group_size(k), fit);
  if (two) {
    size_t local[2];
    ct__strided_operand(&a, "dst", dst, &g, g.dst);
    ct__strided_operand(&a, "src", src, &g, g.src);
    ct__karg_long(&a, "n0", (cl_long)global[0]);
    ct__karg_long(&a, "n1", (cl_long)global[1]);
    ct_status st = ct__kargs_end(&a, fn);
    if (st == CT_OK) {
      ct__launch_dims(k, 2, global, local);
      st = ct__kernel_launch(k, d, 2, global, local);
    }
    ct__kernel_unlock(k);
    return st;
  }
  int no = g.ndim - 2;
  ct__strided_operand(&a, "dst", dst, &g, g.dst);
  ct__strided_operand(&a, "src", src, &g, g.src);
  ct__karg_long8(&a, "shape8", no, g.shape, 1);
  ct__karg_long8(&a, "dstr8", no, g.dst, 0);
  ct__karg_long8(&a, "sstr8", no, g.src, 0);
  return ct__strided_launch(&a, k, d, global, fit, fn);
}

/* Contiguous fills of at least this many bytes run fill_contig: PoCL's clEnqueueFillBuffer took
 * 11 us for 64 KB, 180 us for 1 MB, the kernel 2 and 29 us; below it the two cost about the same
 * and the fill needs no kernel build. */
#define CT__FILL_KERNEL_MIN 16384
/* A fill done once in a tensor's life (ct__fill_once) takes clEnqueueFillBuffer up to this size:
 * at 180 us a MB it costs less than building fill_contig in a new process (about 90 ms on PoCL,
 * a launch-time compilation) up to about 500 MB. */
#define CT__FILL_ONCE_MAX ((size_t)256 << 20)

static ct_status ct__fill_bits_upto(ct_tensor *t, const void *elem, size_t buffer_max, const char *fn) {
  int64_t n = ct_numel(t);
  if (n == 0) return CT_OK;
  ct_device *d = t->storage->device;
  size_t es = ct_dtype_size(t->dtype);
  CT__TRY(ct__deferred_realize(fn));
  CT__TRY(ct__tensor_deferred_use(t, fn));
  bool contig = ct_tensor_is_contiguous(t);
  if (contig && (size_t)n * es < buffer_max) {
    cl_event pev;
    cl_int err = clEnqueueFillBuffer(ct__device_queue(d), t->storage->mem, elem, es, ct__tensor_byte_offset(t),
                                     (size_t)n * es, 0, NULL, ct__profile_event(d, &pev));
    if (err == CL_SUCCESS) ct__profile_record(d, "fill", pev);
    if (err != CL_SUCCESS)
      return ct__cl_error(err, "%s: clEnqueueFillBuffer of %zu bytes on %s failed", fn, (size_t)n * es, d->spec);
    return CT_OK;
  }
  char opts[64];
  snprintf(opts, sizeof opts, "-DCT_BITS=%s", ct__dtype_bits_type(es));
  ct__kernel *k;
  CT__TRY(ct__kernel_get(&k, d, "copy.cl", contig ? "fill_contig" : "fill_strided", opts));
  if (contig) {
    struct ct__kargs a = ct__kargs_lock(k);
    return ct__contig_launch(&a, k, d, t, NULL, elem, n, fn);
  }
  struct ct__geom g;
  size_t global[3];
  ct__copy_geom(&g, t->ndim, t->shape, t->strides, t->strides);
  bool fit = n >= CT__COPY_FIT_MIN;
  ct__nd_range(&g, global, ct__kernel_group_size(k), fit);
  int no = g.ndim - 2;
  struct ct__kargs a = ct__kargs_lock(k);
  ct__strided_operand(&a, "dst", t, &g, g.dst);
  ct__karg_long8(&a, "shape8", no, g.shape, 1);
  ct__karg_long8(&a, "dstr8", no, g.dst, 0);
  ct__karg(&a, "value", es, elem);
  return ct__strided_launch(&a, k, d, global, fit, fn);
}

ct_status ct__fill_bits(ct_tensor *t, const void *elem, const char *fn) {
  return ct__fill_bits_upto(t, elem, CT__FILL_KERNEL_MIN, fn);
}

ct_status ct__fill_once(ct_tensor *t, const void *elem, const char *fn) {
  return ct__fill_bits_upto(t, elem, CT__FILL_ONCE_MAX, fn);
}

ct_status ct__fill_value(ct_tensor *t, double value, const char *fn) {
  uint64_t pattern = 0;
  ct__host_store_double(t->dtype, &pattern, value);
  return ct__fill_bits(t, &pattern, fn);
}

/* ct_copy's checks: one device, src broadcasts to dst's shape, dst has no expanded dim. On
 * success sstr gets src's strides over dst's dims (0 on broadcast dims). Writes nothing. */
static ct_status ct__copy_check(int64_t *sstr, const ct_tensor *dst, const ct_tensor *src, const char *fn) {
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
  ct_status wst = ct__tensor_check_writable(dst, fn, "dst");
  if (wst != CT_OK) {
    ct__error_append("; write into a contiguous tensor instead");
    return wst;
  }
  for (int i = 0; i < dst->ndim; i++) {
    int j = i - (dst->ndim - src->ndim);
    sstr[i] = (j < 0 || src->shape[j] == 1) ? 0 : src->strides[j];
  }
  return CT_OK;
}

/* The copy itself, after ct__copy_check. */
static ct_status ct__copy_run(ct_tensor *dst, const ct_tensor *src, int64_t *sstr, const char *fn) {
  ct_status st;
  if (ct__tensor_overlaps(dst, src)) {
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

ct_status ct__copy(ct_tensor *dst, const ct_tensor *src, const char *fn) {
  int64_t sstr[CT_MAX_DIMS];
  CT__TRY(ct__copy_check(sstr, dst, src, fn));
  return ct__copy_run(dst, src, sstr, fn);
}

/* The public copy writes into the caller's tensor: autograd's rules for in-place writes apply
 * (tensor/graph.h). dst.copy_(src) is differentiable in PyTorch (through CopySlices when dst is
 * a view); here a dst that requires grad is refused, and so is a src that requires grad (its
 * gradient would be lost silently, as through an _out form), while grad mode is on. */
ct_status ct_copy(ct_tensor *dst, const ct_tensor *src) {
  const char *fn = "ct_copy";
  int64_t sstr[CT_MAX_DIMS];
  CT__TRY(ct__copy_check(sstr, dst, src, fn));
  CT__TRY(ct__grad_check_inplace(fn, dst, "dst"));
  if (ct__grad_mode() && src->requires_grad)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: argument 'src' requires grad, and a copy into an existing tensor is not recorded (its "
                     "gradient would be lost); use ct_clone for a recorded copy, or ct_detach src (or turn grad "
                     "mode off) to copy its values only",
                     fn);
  ct__tensor_bump_version(dst);
  return ct__copy_run(dst, src, sstr, fn);
}

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

/* Records the backward of r, a copy of t made by fn (op CLONE or CAST: the gradient passes
 * through; the engine casts it back to t's dtype), and hands r out. */
static ct_status ct__copy_result(ct_tensor **out, ct_tensor *r, const ct_tensor *t, ct__gop op, const char *fn) {
  ct__node *n = NULL;
  ct_status st = ct__grad_record(&n, r, op, 0, 1, (const ct_tensor *[]){t}, fn);
  return ct__tensor_result(out, r, st);
}

ct_status ct_contiguous(ct_tensor **out, const ct_tensor *t) {
  CT__TRY(ct__op_begin(out, t, "ct_contiguous"));
  ct_tensor *r = NULL;
  CT__TRY(ct__contiguous(&r, t, t->dtype, 0, "ct_contiguous"));
  /* t itself when already contiguous: the same handle, no node (as PyTorch's .contiguous()). */
  if (r == t) {
    *out = r;
    return CT_OK;
  }
  return ct__copy_result(out, r, t, CT__GOP_CLONE, "ct_contiguous");
}

ct_status ct_cast(ct_tensor **out, const ct_tensor *t, ct_dtype dt) {
  CT__TRY(ct__op_begin(out, t, "ct_cast"));
  ct_tensor *r = NULL;
  /* Recorded by the fusion graph where its kernels convert as the copy kernel does. */
  if ((unsigned)dt < CT_DTYPE_COUNT) CT__TRY(ct__deferred_cast(&r, t, dt, "ct_cast"));
  if (!r) CT__TRY(ct__contiguous(&r, t, dt, 1, "ct_cast"));
  /* A cast to an integer or bool dtype records nothing (ct__grad_record: not differentiable). */
  return ct__copy_result(out, r, t, CT__GOP_CAST, "ct_cast");
}
