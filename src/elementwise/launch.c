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
#include "tensor/tensor.h"

/* ---- per-device kernel table ---- */

struct ct__ew_entry {
  uint64_t key;     /* 0: empty (every real key has nin >= 1) */
  ct__kernel *k;
  size_t local;     /* work-group size (product over dims) */
  int per;          /* contiguous kernel: elements per work-item (8 on the vector path, else 1) */
};

struct ct__ew_state {
  pthread_mutex_t lock;
  struct ct__ew_entry *tab;
  size_t cap, count;  /* cap is a power of two */
  int sper;           /* strided kernel: innermost elements per work-item */
  bool cpu;
  size_t max_items[2]; /* CL_DEVICE_MAX_WORK_ITEM_SIZES of dims 0 and 1 */
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
  s->cpu = d->props.type == CT_DEVICE_CPU && !ct__ew_gpu_paths;
  s->sper = s->cpu ? 32 : 1;
  /* Division and sqrt are correctly rounded only on request, and the request is only valid
   * where the device says it can. */
  cl_device_fp_config fp = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
  /* Per-dimension work-item limits; the query needs room for every dimension the device has. */
  cl_uint ndims = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof ndims, &ndims, NULL);
  size_t *items = calloc(ndims > 2 ? ndims : 2, sizeof *items);
  if (items && ndims >= 2)
    clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_ITEM_SIZES, ndims * sizeof *items, items, NULL);
  s->max_items[0] = items && items[0] ? items[0] : 1;
  s->max_items[1] = items && items[1] ? items[1] : 1;
  free(items);
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

/* Work-group size: always given, never left to the driver, because PoCL compiles a kernel
 * anew for every local size it picks, and it picks one per global size (100-200 ms for each new
 * tensor size). Within the kernel's limit and a multiple of its preferred multiple
 * (warp/wavefront): 256 work-items on GPUs; 1024 on CPUs, where a work-group is a loop on one
 * thread and fewer, larger groups cost less (PoCL, 2^25-element add against the raw kernel with
 * the driver's choice: 0.77x with 64, 0.85-1.0x with 256, 0.97-1.0x with 1024 or 4096). */
static size_t ct__ew_want(bool cpu) { return cpu ? 1024 : 256; }

static size_t ct__ew_local(ct_device *d, ct__kernel *k, bool cpu) {
  const size_t want = ct__ew_want(cpu);
  cl_kernel ck = ct__kernel_lock(k);
  size_t wg = 0, mult = 0;
  clGetKernelWorkGroupInfo(ck, d->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  clGetKernelWorkGroupInfo(ck, d->id, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof mult, &mult, NULL);
  ct__kernel_unlock(k);
  if (wg == 0 || wg > d->props.max_work_group_size) wg = d->props.max_work_group_size;
  size_t local = wg < want ? wg : want;
  if (mult > 0 && local >= mult) local -= local % mult;
  return local ? local : 1;
}

static size_t ct__ew_pow2_at_least(size_t v) {
  size_t p = 1;
  while (p < v) p <<= 1;
  return p;
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
             ct__ew_op_fn(l->op), ct__ew_op_nparams(l->op), l->nin, dt[0], dt[1], dt[2], (int)l->k, (int)o,
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
      s->tab[j].local = ct__ew_local(d, k, s->cpu);
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

static int64_t ct__ew_abs(int64_t v) { return v < 0 ? -v : v; }

/* Drops size-1 dims, orders dims by out's strides (largest first, so out is written in memory
 * order whatever its layout) and merges neighbours that every operand walks as one. */
static void ct__ew_collapse(struct ct__ew_geom *g, const ct_tensor *out, int nin, const ct_tensor *const *in) {
  int nops = 1 + nin, n = 0;
  for (int d = 0; d < out->ndim; d++) {
    if (out->shape[d] == 1) continue;
    g->shape[n] = out->shape[d];
    g->st[0][n] = out->strides[d];
    for (int i = 0; i < nin; i++) g->st[1 + i][n] = ct__ew_bstride(in[i], out->ndim, d);
    n++;
  }
  for (int i = 1; i < n; i++) {
    for (int j = i; j > 0 && ct__ew_abs(g->st[0][j - 1]) < ct__ew_abs(g->st[0][j]); j--) {
      int64_t t = g->shape[j];
      g->shape[j] = g->shape[j - 1];
      g->shape[j - 1] = t;
      for (int o = 0; o < nops; o++) {
        t = g->st[o][j];
        g->st[o][j] = g->st[o][j - 1];
        g->st[o][j - 1] = t;
      }
    }
  }
  int m = 0;
  for (int d = 0; d < n; d++) {
    bool merge = m > 0;
    for (int o = 0; o < nops && merge; o++) merge = g->st[o][m - 1] == g->st[o][d] * g->shape[d];
    if (merge) {
      g->shape[m - 1] *= g->shape[d];
      for (int o = 0; o < nops; o++) g->st[o][m - 1] = g->st[o][d];
    } else {
      g->shape[m] = g->shape[d];
      for (int o = 0; o < nops; o++) g->st[o][m] = g->st[o][d];
      m++;
    }
  }
  g->ndim = m;
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

static size_t ct__ew_scalar_size(ct_dtype k) {
  switch (k) {
  case CT_F16: case CT_BF16: return 4; /* computed in float */
  default: return ct_dtype_size(k);
  }
}

/* ---- launch ---- */

static cl_long8 ct__ew_long8(const int64_t *v, int n, int64_t fill) {
  cl_long8 r;
  for (int i = 0; i < 8; i++) r.s[i] = i < n ? v[i] : fill;
  return r;
}

static long ct__ew_elem_offset(const ct_tensor *t) {
  return (long)(ct__tensor_byte_offset(t) / ct_dtype_size(t->dtype));
}

/* The arguments every elementwise kernel starts with: out and each input as (buffer, element
 * offset), then the scalars. shift moves every offset but a broadcast input's (bit i of bflags)
 * that many elements on. */
static cl_int ct__ew_common_args(cl_kernel ck, cl_uint *ai, const struct ct__ew_launch *l, ct_tensor *out,
                                 unsigned bflags, int64_t shift) {
  cl_int err = CL_SUCCESS;
#define CT__ARG(size, ptr) \
  if (err == CL_SUCCESS) err = clSetKernelArg(ck, (*ai)++, (size), (ptr))
  cl_mem mem = ct__tensor_mem(out);
  cl_long off = ct__ew_elem_offset(out) + shift;
  CT__ARG(sizeof mem, &mem);
  CT__ARG(sizeof off, &off);
  for (int i = 0; i < l->nin; i++) {
    cl_mem m = ct__tensor_mem(l->in[i]);
    cl_long o = ct__ew_elem_offset(l->in[i]) + ((bflags >> i) & 1u ? 0 : shift);
    CT__ARG(sizeof m, &m);
    CT__ARG(sizeof o, &o);
  }
  size_t ss = ct__ew_scalar_size(l->k);
  int np = ct__ew_op_nparams(l->op);
  if (l->spos || np >= 1) CT__ARG(ss, &l->s[0]);
  if (np >= 2) CT__ARG(ss, &l->s[1]);
#undef CT__ARG
  return err;
}

/* One launch of a contiguous kernel over elements [shift, shift + n) of the operands, per
 * elements a work-item, in groups of local. */
static ct_status ct__ew_launch_contig(const char *fn, ct_device *d, ct__kernel *k, const struct ct__ew_launch *l,
                                      ct_tensor *out, unsigned bflags, int64_t shift, int64_t n, int per,
                                      size_t local) {
  cl_kernel ck = ct__kernel_lock(k);
  cl_uint ai = 0;
  cl_int err = ct__ew_common_args(ck, &ai, l, out, bflags, shift);
  cl_long nn = n;
  if (err == CL_SUCCESS) err = clSetKernelArg(ck, ai++, sizeof nn, &nn);
  ct_status st;
  if (err != CL_SUCCESS) {
    st = ct__cl_error(err, "%s: clSetKernelArg(%u) for %s on %s failed", fn, ai - 1, ct__kernel_name(k), d->spec);
  } else {
    size_t items = (size_t)((n + per - 1) / per);
    size_t global = (items + local - 1) / local * local;
    st = ct__kernel_launch(k, d, 1, &global, &local);
    if (st != CT_OK) ct__error_append(" (%s)", fn);
  }
  ct__kernel_unlock(k);
  return st;
}

static void ct__ew_span(const ct_tensor *t, int64_t *lo, int64_t *hi);

/* Whether out's bytes overlap any input's (same buffer). */
static bool ct__ew_out_aliases(const ct_tensor *out, const struct ct__ew_launch *l) {
  int64_t olo, ohi;
  ct__ew_span(out, &olo, &ohi);
  for (int i = 0; i < l->nin; i++) {
    if (ct__tensor_mem(l->in[i]) != ct__tensor_mem(out)) continue;
    int64_t lo, hi;
    ct__ew_span(l->in[i], &lo, &hi);
    if (lo < ohi && olo < hi) return true;
  }
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
    size_t maxl = s->max_items[0];
    if (s->cpu && ct__ew_use_vector(l, out->dtype)) {
      CT__TRY(ct__ew_kernel(&e, d, s, l, out->dtype, 0, bflags, false));
      return ct__ew_launch_contig(fn, d, e.k, l, out, bflags, 0, n, e.per, e.local < maxl ? e.local : maxl);
    }
    /* Shorter than a group (the size ct__ew_local aims at; the kernel's own limit can only make
     * it smaller): the checked kernel alone, without building the EW_FULL program. */
    size_t aim = ct__ew_want(s->cpu);
    if (aim > d->props.max_work_group_size) aim = d->props.max_work_group_size;
    if (aim > maxl) aim = maxl;
    if ((size_t)n < aim) {
      CT__TRY(ct__ew_kernel(&e, d, s, l, out->dtype, 0, bflags, false));
      return ct__ew_launch_contig(fn, d, e.k, l, out, bflags, 0, n, 1, e.local < maxl ? e.local : maxl);
    }
    struct ct__ew_entry f;
    CT__TRY(ct__ew_kernel(&f, d, s, l, out->dtype, 0, bflags, true));
    size_t local = f.local < maxl ? f.local : maxl;
    int64_t nfull = n / (int64_t)local * (int64_t)local;
    bool overlap = nfull > 0 && !ct__ew_out_aliases(out, l);
    if (nfull > 0) CT__TRY(ct__ew_launch_contig(fn, d, f.k, l, out, bflags, 0, nfull, 1, local));
    if (nfull == n) return CT_OK;
    if (overlap)
      return ct__ew_launch_contig(fn, d, f.k, l, out, bflags, n - (int64_t)local, (int64_t)local, 1, local);
    CT__TRY(ct__ew_kernel(&e, d, s, l, out->dtype, 0, bflags, false));
    return ct__ew_launch_contig(fn, d, e.k, l, out, bflags, nfull, n - nfull, 1, local);
  }
  CT__TRY(ct__ew_kernel(&e, d, s, l, out->dtype, strided, bflags, false));

  cl_kernel ck = ct__kernel_lock(e.k);
  cl_uint ai = 0;
  cl_int err = ct__ew_common_args(ck, &ai, l, out, 0, 0);
#define CT__ARG(size, ptr) \
  if (err == CL_SUCCESS) err = clSetKernelArg(ck, ai++, (size), (ptr))
  size_t global[2], local[2];
  /* The innermost dim (last after collapsing) is walked by dim 0, the rest by dim 1. */
  int in = g.ndim - 1, ond = g.ndim - 1;
  bool general_inner = false;
  for (int o = 0; o < nops; o++) general_inner |= g.st[o][in] != 0 && g.st[o][in] != 1;
  cl_long n0 = g.shape[in], nouter = n / g.shape[in];
  cl_long4 ist = {{0, 0, 0, 0}};
  for (int o = 0; o < nops; o++) ist.s[o] = g.st[o][in];
  cl_int cond = ond;
  cl_long8 oshape = ct__ew_long8(g.shape, ond, 1), strides[CT__EW_MAXOPS];
  CT__ARG(sizeof n0, &n0);
  CT__ARG(sizeof ist, &ist);
  CT__ARG(sizeof nouter, &nouter);
  CT__ARG(sizeof cond, &cond);
  CT__ARG(sizeof oshape, &oshape);
  for (int o = 0; o < nops; o++) {
    strides[o] = ct__ew_long8(g.st[o], ond, 0);
    CT__ARG(sizeof strides[o], &strides[o]);
  }
#undef CT__ARG
  /* e.local work-items, as many along the row as it needs (a power of two) and the rest
   * across rows, so short rows don't leave most of a work-group idle, and a kernel meets
   * at most log2(e.local) + 1 local shapes (each one a compilation on PoCL). */
  size_t items = (size_t)((n0 + s->sper - 1) / s->sper);
  local[0] = ct__ew_pow2_at_least(items);
  if (local[0] > e.local) local[0] = e.local;
  /* On CPUs a work-item walks its stretch of a row alone, so when an operand strides across
   * rows (a transposed input) the work-group is better made of neighbouring rows: their
   * elements share cache lines (2.5x for a transposed f32 add on PoCL). */
  if (s->cpu && general_inner) local[0] = 1;
  if (local[0] > s->max_items[0]) local[0] = s->max_items[0];
  local[1] = e.local / local[0];
  if (local[1] > s->max_items[1]) local[1] = s->max_items[1];
  if (local[1] == 0) local[1] = 1;
  global[0] = (items + local[0] - 1) / local[0] * local[0];
  global[1] = ((size_t)nouter + local[1] - 1) / local[1] * local[1];
  ct_status st;
  if (err != CL_SUCCESS) {
    st = ct__cl_error(err, "%s: clSetKernelArg(%u) for %s on %s failed", fn, ai - 1, ct__kernel_name(e.k), d->spec);
  } else {
    st = ct__kernel_launch(e.k, d, 2, global, local);
    if (st != CT_OK) ct__error_append(" (%s)", fn);
  }
  ct__kernel_unlock(e.k);
  return st;
}

/* ---- out checks ---- */

/* Bytes [lo, hi) that t's elements span inside its cl_mem. */
static void ct__ew_span(const ct_tensor *t, int64_t *lo, int64_t *hi) {
  int64_t es = (int64_t)ct_dtype_size(t->dtype);
  *lo = (int64_t)ct__tensor_byte_offset(t);
  *hi = *lo + es;
  for (int d = 0; d < t->ndim; d++) {
    int64_t ext = (t->shape[d] - 1) * t->strides[d] * es;
    if (ext < 0)
      *lo += ext;
    else
      *hi += ext;
  }
}

/* Non-overlapping and dense: the elements tile one range without holes or repeats. */
static bool ct__ew_dense(const ct_tensor *t) {
  int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 1) continue;
    int j = n++;
    for (; j > 0 && ct__ew_abs(st[j - 1]) > ct__ew_abs(t->strides[d]); j--) {
      st[j] = st[j - 1];
      sh[j] = sh[j - 1];
    }
    st[j] = t->strides[d];
    sh[j] = t->shape[d];
  }
  int64_t expect = 1;
  for (int i = 0; i < n; i++) {
    if (ct__ew_abs(st[i]) != expect) return false;
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
  for (int d = 0; d < out->ndim; d++)
    if (out->shape[d] > 1 && out->strides[d] == 0)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: out (shape %s, strides %s) has stride 0 on dim %d of size %" PRId64
                       ", so several results would land on one element; write to a tensor without expanded dims",
                       fn, ct__shape_str(sb, sizeof sb, out->ndim, out->shape),
                       ct__shape_str(tb, sizeof tb, out->ndim, out->strides), d, out->shape[d]);
  int64_t olo, ohi;
  ct__ew_span(out, &olo, &ohi);
  for (int i = 0; i < nin; i++) {
    const ct_tensor *t = in[i];
    if (ct__tensor_mem(t) != ct__tensor_mem(out) || ct_numel(t) == 0) continue;
    int64_t lo, hi;
    ct__ew_span(t, &lo, &hi);
    if (hi <= olo || ohi <= lo || ct__ew_same_elements(out, t)) continue;
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
