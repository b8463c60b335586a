/* Launching elementwise kernels: geometry collapsing, the per-device kernel table, arguments.
 *
 * Per op the host does little: collapse the operands' dims, find the kernel in a small hash
 * table keyed by (op, dtypes, layout), set its arguments and enqueue it. The table sits in front
 * of ct__kernel_get() (which formats options and hashes the program source) so that a chain of
 * small _out ops costs close to the bare clEnqueueNDRangeKernel. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "elementwise/elementwise.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "kernel/launch_geom.h"
#include "tensor/tensor.h"

/* ---- per-device kernel table ---- */

struct ct__ew_entry {
  uint64_t key;     /* 0: empty (every real key has nin >= 1) */
  ct__kernel *k;
  int per;          /* contiguous kernel: elements per work-item (8 on the vector path, else 1) */
};

struct ct__ew_state {
  pthread_mutex_t lock;
  struct ct__ew_entry *tab;
  size_t cap, count;  /* cap is a power of two */
  int sper;           /* strided kernel: innermost elements per work-item */
  bool cpu;
  char opts[128];     /* options common to every elementwise program on this device */
};

int ct__ew_gpu_paths = 0;

static void ct__ew_state_destroy(ct_device *d, void *state) {
  (void)d;
  struct ct__ew_state *s = state;
  pthread_mutex_destroy(&s->lock);
  free(s->tab);
  free(s);
}

static ct_status ct__ew_state_create(void **state, ct_device *d) {
  struct ct__ew_state *s = calloc(1, sizeof *s);
  if (!s) return ct__error(CT_ERR_OUT_OF_MEMORY, "elementwise: out of host memory");
  s->cap = 256;
  s->tab = calloc(s->cap, sizeof *s->tab);
  if (!s->tab) {
    free(s);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "elementwise: out of host memory");
  }
  pthread_mutex_init(&s->lock, NULL);
  /* CPU compilers (PoCL) vectorise scalar code across work-items, and convert f16 in software
   * faster than through the half builtins; a strided row is walked 32 elements per work-item
   * there (3-4x a single one for a broadcast row). GPUs want neighbouring work-items on
   * neighbouring elements. */
  s->cpu = ct__device_chunked(d) && !ct__ew_gpu_paths;
  s->sper = s->cpu ? 32 : 1;
  /* Division and sqrt are correctly rounded only on request, and the request is only valid
   * where the device says it can. */
  cl_device_fp_config fp = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
  snprintf(s->opts, sizeof s->opts, "-DEW_SOFT16=%d -DEW_SPER=%d%s", s->cpu ? 1 : 0, s->sper,
           (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) ? " -cl-fp32-correctly-rounded-divide-sqrt" : "");
  *state = s;
  return CT_OK;
}

static uint64_t ct__ew_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

static ct_status ct__ew_grow(struct ct__ew_state *s) {
  size_t cap = s->cap * 2;
  struct ct__ew_entry *tab = calloc(cap, sizeof *tab);
  if (!tab) return ct__error(CT_ERR_OUT_OF_MEMORY, "elementwise: out of host memory");
  for (size_t i = 0; i < s->cap; i++) {
    if (!s->tab[i].key) continue;
    size_t j = ct__ew_hash(s->tab[i].key) & (cap - 1);
    while (tab[j].key) j = (j + 1) & (cap - 1);
    tab[j] = s->tab[i];
  }
  free(s->tab);
  s->tab = tab;
  s->cap = cap;
  return CT_OK;
}

/* Packs everything that selects a program and kernel into 64 bits. */
static uint64_t ct__ew_key(const struct ct__ew_launch *l, ct_dtype o, int strided, unsigned bflags) {
  uint64_t k = (uint64_t)l->op << 52; /* 12 bits: room for the op table to grow */
  k |= (uint64_t)l->nin << 6;
  for (int i = 0; i < l->nin; i++) k |= (uint64_t)l->in[i]->dtype << (8 + 4 * i);
  k |= (uint64_t)l->k << 20;
  k |= (uint64_t)o << 24;
  k |= (uint64_t)l->spos << 28;
  k |= (uint64_t)l->has_lo << 30;
  k |= (uint64_t)l->has_hi << 31;
  k |= (uint64_t)bflags << 32;
  k |= (uint64_t)(strided & 1) << 35;
  k |= (uint64_t)(strided >> 1) << 36; /* strided kernel: innermost stride kinds */
  k |= (uint64_t)ct__ew_pow_special(l) << 44;
  return k;
}

/* The contiguous kernel's 8-wide vector path, on CPUs, for plain f16 arithmetic only. Measured
 * on PoCL 3.1: there f16 loads and stores in scalar code are not vectorised across work-items
 * when both appear in one kernel (0.06 G elements/s for f16 + f16), while vload_half8 and
 * vstore_half8_rte run an f16 add at ~0.9 G elements/s; for every other dtype and op scalar
 * code is as fast or faster (up to 6x for u8, and 40x for bool results, whose vector stores
 * PoCL handles very badly), and vector selects with f16 gain nothing. */
static bool ct__ew_use_vector(const struct ct__ew_launch *l, ct_dtype o) {
  bool f16 = o == CT_F16;
  for (int i = 0; i < l->nin; i++) f16 |= l->in[i]->dtype == CT_F16;
  switch (l->op) {
  case CT__EW_ADD: case CT__EW_SUB: case CT__EW_MUL: case CT__EW_DIV: case CT__EW_NEG: case CT__EW_ABS: return f16;
  default: return false;
  }
}

/* full: the contiguous kernel without its bounds check (EW_FULL), for exact launches. */
static ct_status ct__ew_kernel(struct ct__ew_entry *out, ct_device *d, struct ct__ew_state *s,
                               const struct ct__ew_launch *l, ct_dtype o, int strided, unsigned bflags, bool full) {
  uint64_t key = ct__ew_key(l, o, strided, bflags) | (uint64_t)full << 50;
  ct_status st = CT_OK;
  pthread_mutex_lock(&s->lock);
  size_t j = ct__ew_hash(key) & (s->cap - 1);
  while (s->tab[j].key && s->tab[j].key != key) j = (j + 1) & (s->cap - 1);
  if (!s->tab[j].key) {
    char opts[400];
    int dt[3] = {0, 0, 0};
    for (int i = 0; i < l->nin; i++) dt[i] = (int)l->in[i]->dtype;
    bool vec = s->cpu && !strided && ct__ew_use_vector(l, o);
    unsigned ik = (unsigned)strided >> 1;
    snprintf(opts, sizeof opts,
             "-DEW_FN=%s -DEW_NP=%d -DEW_NIN=%d -DEW_A=%d -DEW_B=%d -DEW_C=%d -DEW_K=%d -DEW_O=%d "
             "-DEW_SPOS=%d -DEW_LO=%d -DEW_HI=%d -DEW_BA=%u -DEW_BB=%u -DEW_BC=%u -DEW_VEC=%d -DEW_FULL=%d "
             "-DEW_IO=%u -DEW_IA=%u -DEW_IB=%u -DEW_IC=%u %s",
             ct__ew_launch_fn(l), ct__ew_op_nparams(l->op), l->nin, dt[0], dt[1], dt[2], (int)l->k, (int)o,
             l->spos, l->has_lo ? 1 : 0, l->has_hi ? 1 : 0, bflags & 1u, (bflags >> 1) & 1u, (bflags >> 2) & 1u,
             vec ? 1 : 0, full ? 1 : 0, ik & 3u, (ik >> 2) & 3u, (ik >> 4) & 3u, (ik >> 6) & 3u, s->opts);
    ct__kernel *k = NULL;
    st = ct__kernel_get(&k, d, "elementwise.cl", strided ? "ew_strided" : "ew_contig", opts);
    if (st == CT_OK && 2 * (s->count + 1) > s->cap) {
      st = ct__ew_grow(s);
      if (st == CT_OK) {
        j = ct__ew_hash(key) & (s->cap - 1);
        while (s->tab[j].key) j = (j + 1) & (s->cap - 1);
      }
    }
    if (st == CT_OK) {
      s->tab[j].key = key;
      s->tab[j].k = k;
      s->tab[j].per = vec ? 8 : 1;
      s->count++;
    }
  }
  if (st == CT_OK) *out = s->tab[j];
  pthread_mutex_unlock(&s->lock);
  return st;
}

/* ---- geometry ---- */

#define CT__EW_MAXOPS 4 /* out + up to 3 inputs */

struct ct__ew_geom {
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t st[CT__EW_MAXOPS][CT_MAX_DIMS]; /* [0] is out, [1 + i] input i; elements */
};

/* Input t's stride along out's dim d: 0 where t is broadcast (missing or size-1 dim). */
static int64_t ct__ew_bstride(const ct_tensor *t, int out_ndim, int d) {
  int td = d - (out_ndim - t->ndim);
  return (td < 0 || t->shape[td] == 1) ? 0 : t->strides[td];
}

/* out's shape with every operand's strides, collapsed in out's memory order (out is written in
 * memory order whatever its layout) by ct__collapse_dims(). */
static void ct__ew_collapse(struct ct__ew_geom *g, const ct_tensor *out, int nin, const ct_tensor *const *in) {
  int64_t *st[CT__EW_MAXOPS];
  for (int d = 0; d < out->ndim; d++) {
    g->shape[d] = out->shape[d];
    g->st[0][d] = out->strides[d];
    for (int i = 0; i < nin; i++) g->st[1 + i][d] = ct__ew_bstride(in[i], out->ndim, d);
  }
  for (int o = 0; o < 1 + nin; o++) st[o] = g->st[o];
  g->ndim = ct__collapse_dims(out->ndim, g->shape, 1 + nin, st, CT__COLLAPSE_ORDER);
}

/* ---- scalars ---- */

ct__ew_scalar ct__ew_make_scalar(ct_dtype k, double s) {
  ct__ew_scalar v;
  memset(&v, 0, sizeof v);
  switch (k) {
  case CT_BOOL: v.u8 = s != 0; break;
  case CT_U8: v.u8 = (uint8_t)(int64_t)s; break;
  case CT_I8: v.i8 = (int8_t)(int64_t)s; break;
  case CT_I16: v.i16 = (int16_t)(int64_t)s; break;
  case CT_U16: v.u16 = (uint16_t)(int64_t)s; break;
  case CT_I32: v.i32 = (int32_t)(int64_t)s; break;
  case CT_U32: v.u32 = (uint32_t)(int64_t)s; break;
  case CT_I64: v.i64 = (int64_t)s; break;
  case CT_U64: v.u64 = (uint64_t)s; break;
  case CT_F64: v.f64 = s; break;
  default: v.f32 = (float)s; break; /* f16, bf16, f32 compute in float */
  }
  return v;
}

size_t ct__ew_scalar_size(ct_dtype k) {
  switch (k) {
  case CT_F16: case CT_BF16: return 4; /* computed in float */
  default: return ct_dtype_size(k);
  }
}

ct_status ct__ew_device_options(const char **opts, ct_device *d) {
  struct ct__ew_state *s;
  CT__TRY(ct__device_slot((void **)&s, d, CT__SLOT_ELEMENTWISE, ct__ew_state_create, ct__ew_state_destroy));
  *opts = s->opts;
  return CT_OK;
}

/* ---- launch ---- */

/* The arguments every elementwise kernel starts with: out and each input as (buffer, element
 * offset), then the scalars. shift moves every offset but a broadcast input's (bit i of bflags)
 * that many elements on. */
static void ct__ew_common_args(struct ct__kargs *a, const struct ct__ew_launch *l, ct_tensor *out, unsigned bflags,
                               int64_t shift) {
  static const char *const names[] = {"a", "b", "c"};
  ct__karg_tensor(a, "out", out, shift);
  for (int i = 0; i < l->nin; i++) ct__karg_tensor(a, names[i], l->in[i], (bflags >> i) & 1u ? 0 : shift);
  size_t ss = ct__ew_scalar_size(l->k);
  int np = ct__ew_op_nparams(l->op);
  if (l->spos || np >= 1) ct__karg(a, "s0", ss, &l->s[0]);
  if (np >= 2) ct__karg(a, "s1", ss, &l->s[1]);
}

/* One launch of a contiguous kernel over elements [shift, shift + n) of the operands, per
 * elements a work-item, in groups of the kernel's group size. */
static ct_status ct__ew_launch_contig(const char *fn, ct_device *d, ct__kernel *k, const struct ct__ew_launch *l,
                                      ct_tensor *out, unsigned bflags, int64_t shift, int64_t n, int per) {
  struct ct__kargs a = ct__kargs_lock(k);
  ct__ew_common_args(&a, l, out, bflags, shift);
  ct__karg_long(&a, "n", n);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    size_t local = ct__kernel_group_size(k), items = (size_t)((n + per - 1) / per);
    size_t global = (items + local - 1) / local * local;
    st = ct__kernel_launch(k, d, 1, &global, &local);
    if (st != CT_OK) ct__error_append(" (%s)", fn);
  }
  ct__kernel_unlock(k);
  return st;
}

/* Whether out's bytes overlap any input's. */
static bool ct__ew_out_aliases(const ct_tensor *out, const struct ct__ew_launch *l) {
  for (int i = 0; i < l->nin; i++)
    if (ct__tensor_overlaps(out, l->in[i])) return true;
  return false;
}

ct_status ct__ew_run(const char *fn, const struct ct__ew_launch *l, ct_tensor *out) {
  int64_t n = ct_numel(out);
  if (n == 0) return CT_OK;
  ct_device *d = out->storage->device;
  struct ct__ew_state *s;
  CT__TRY(ct__device_slot((void **)&s, d, CT__SLOT_ELEMENTWISE, ct__ew_state_create, ct__ew_state_destroy));

  struct ct__ew_geom g;
  ct__ew_collapse(&g, out, l->nin, l->in);
  int nops = 1 + l->nin;
  bool contig = g.ndim == 0 || (g.ndim == 1 && g.st[0][0] == 1);
  unsigned bflags = 0;
  for (int i = 0; i < l->nin && contig && g.ndim == 1; i++) {
    if (g.st[1 + i][0] == 0)
      bflags |= 1u << i;
    else if (g.st[1 + i][0] != 1)
      contig = false;
  }
  if (!contig) bflags = 0;

  /* Strided kernel: 1 | the innermost stride kind of each operand (1 unit, 2 zero, 0 other) << 1. */
  int strided = 0;
  if (!contig) {
    unsigned ik = 0;
    for (int o = 0; o < nops; o++) {
      int64_t st = g.st[o][g.ndim - 1];
      ik |= (st == 1 ? 1u : st == 0 ? 2u : 0u) << (2 * o);
    }
    strided = 1 | (int)(ik << 1);
  }
  struct ct__ew_entry e;
  if (contig) {
    /* Launches of at least a group, on the scalar path, go to the EW_FULL program over the
     * largest multiple of the group size, and the remainder to one more full group ending at
     * element n (recomputing up to a group's worth of elements already written, with the
     * same values) unless out shares memory with an input, which the first launch may have
     * changed; then the checked kernel takes the remainder. kernels/elementwise.cl says why. */
    if (s->cpu && ct__ew_use_vector(l, out->dtype)) {
      CT__TRY(ct__ew_kernel(&e, d, s, l, out->dtype, 0, bflags, false));
      return ct__ew_launch_contig(fn, d, e.k, l, out, bflags, 0, n, e.per);
    }
    /* Shorter than a group (the size every kernel's group aims at; the kernel's own limit can
     * only make it smaller): the checked kernel alone, without building the EW_FULL program. */
    if ((size_t)n < ct__device_group_target(d)) {
      CT__TRY(ct__ew_kernel(&e, d, s, l, out->dtype, 0, bflags, false));
      return ct__ew_launch_contig(fn, d, e.k, l, out, bflags, 0, n, 1);
    }
    struct ct__ew_entry f;
    CT__TRY(ct__ew_kernel(&f, d, s, l, out->dtype, 0, bflags, true));
    int64_t local = (int64_t)ct__kernel_group_size(f.k);
    int64_t nfull = n / local * local;
    bool overlap = nfull > 0 && !ct__ew_out_aliases(out, l);
    if (nfull > 0) CT__TRY(ct__ew_launch_contig(fn, d, f.k, l, out, bflags, 0, nfull, 1));
    if (nfull == n) return CT_OK;
    if (overlap) return ct__ew_launch_contig(fn, d, f.k, l, out, bflags, n - local, local, 1);
    CT__TRY(ct__ew_kernel(&e, d, s, l, out->dtype, 0, bflags, false));
    return ct__ew_launch_contig(fn, d, e.k, l, out, bflags, nfull, n - nfull, 1);
  }
  CT__TRY(ct__ew_kernel(&e, d, s, l, out->dtype, strided, bflags, false));

  /* The innermost dim (last after collapsing) is walked by dim 0, the rest by dim 1. */
  int in = g.ndim - 1, ond = g.ndim - 1;
  bool general_inner = false;
  for (int o = 0; o < nops; o++) general_inner |= g.st[o][in] != 0 && g.st[o][in] != 1;
  int64_t n0 = g.shape[in], nouter = n / g.shape[in];
  cl_long4 ist = {{0, 0, 0, 0}};
  for (int o = 0; o < nops; o++) ist.s[o] = g.st[o][in];
  static const char *const names[CT__EW_MAXOPS] = {"out_strides", "a_strides", "b_strides", "c_strides"};
  struct ct__kargs a = ct__kargs_lock(e.k);
  ct__ew_common_args(&a, l, out, 0, 0);
  ct__karg_long(&a, "n0", n0);
  ct__karg(&a, "inner_strides", sizeof ist, &ist);
  ct__karg_long(&a, "nouter", nouter);
  ct__karg_int(&a, "ondim", ond);
  ct__karg_long8(&a, "oshape", ond, g.shape, 1);
  for (int o = 0; o < nops; o++) ct__karg_long8(&a, names[o], ond, g.st[o], 0);
  /* A group of the kernel's size, as many work-items along the row as it needs (a power of
   * two) and the rest across rows, so short rows don't leave most of a work-group idle
   * (ct__launch_shape(): at most log2(group) + 1 local shapes, each a compilation on PoCL).
   * On CPUs a work-item walks its stretch of a row alone, so when an operand strides across
   * rows (a transposed input) the work-group is better made of neighbouring rows: their
   * elements share cache lines (2.5x for a transposed f32 add on PoCL). */
  size_t global[2] = {(size_t)((n0 + s->sper - 1) / s->sper), (size_t)nouter}, local[2];
  ct__launch_shape(e.k, 2, s->cpu && general_inner ? 1 : ct__kernel_group_size(e.k), global, local);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    st = ct__kernel_launch(e.k, d, 2, global, local);
    if (st != CT_OK) ct__error_append(" (%s)", fn);
  }
  ct__kernel_unlock(e.k);
  return st;
}

/* ---- out checks ---- */

/* Non-overlapping and dense: the elements tile one range without holes or repeats. */
static bool ct__ew_dense(const ct_tensor *t) {
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 1) continue;
    int j = n++;
    for (; j > 0 && imaxabs(st[j - 1]) > imaxabs(t->strides[d]); j--) {
      st[j] = st[j - 1];
      sh[j] = sh[j - 1];
    }
    st[j] = t->strides[d];
    sh[j] = t->shape[d];
  }
  int64_t expect = 1;
  for (int i = 0; i < n; i++) {
    if (imaxabs(st[i]) != expect) return false;
    expect *= sh[i];
  }
  return true;
}

/* Every element of out is the same memory as the corresponding element of t. */
static bool ct__ew_same_elements(const ct_tensor *out, const ct_tensor *t) {
  if (ct__tensor_byte_offset(out) != ct__tensor_byte_offset(t) || ct_dtype_size(out->dtype) != ct_dtype_size(t->dtype))
    return false;
  for (int d = 0; d < out->ndim; d++)
    if (out->shape[d] != 1 && ct__ew_bstride(t, out->ndim, d) != out->strides[d]) return false;
  return true;
}

ct_status ct__ew_check_out_overlap(const char *fn, const ct_tensor *out, int nin, const ct_tensor *const *in,
                                   const char *const *names) {
  if (ct_numel(out) == 0) return CT_OK;
  char sb[200], tb[200];
  CT__TRY(ct__tensor_check_writable(out, fn, "out"));
  for (int i = 0; i < nin; i++) {
    const ct_tensor *t = in[i];
    if (!ct__tensor_overlaps(out, t) || ct__ew_same_elements(out, t)) continue;
    /* Dense tensors whose ranges meet share elements for sure; strided ones may interleave
     * without sharing any (x[:, ::2] and x[:, 1::2]), which is fine, as in PyTorch. */
    if (ct__ew_dense(out) && ct__ew_dense(t))
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: out (shape %s) partly overlaps %s (shape %s) in memory; results would depend on "
                       "the order of writes. Write to a separate tensor, or pass the very same elements as "
                       "out and input for an in-place op",
                       fn, ct__shape_str(sb, sizeof sb, out->ndim, out->shape), names[i],
                       ct__shape_str(tb, sizeof tb, t->ndim, t->shape));
  }
  return CT_OK;
}
