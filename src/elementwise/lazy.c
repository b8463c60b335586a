/* The fusion graph (issue #16): elementwise ops are recorded, not run, and realized as few
 * generated kernels as the graph allows when something needs device memory.
 *
 * Recording. ct__ew_defer() takes the launch an op would have enqueued (struct ct__ew_launch,
 * after every metadata check, with its result already allocated) and appends a node to one
 * process-wide list, in call order. An input that a recorded node writes, read whole (the node's
 * own result tensor), becomes an edge to that node; any other input is a leaf, retained. An
 * input that is some other view of memory a node will write (a slice, a transpose of a pending
 * result) first realizes the graph, then is a leaf. _out forms, which write into memory that
 * recorded nodes may read, never record: they run eagerly (ct__ew_run), after a realize.
 *
 * Realizing. Anything that enqueues work or reads memory calls ct__deferred_realize()
 * (device/device.h): every kernel launch, transfer, map, GEMM, wait, interop export. realize
 * runs the whole list:
 *   1. A node is needed when its result's storage is still alive (someone can read it) or a
 *      needed node consumes it; the others are dropped. A result released before the realize
 *      is never written.
 *   2. Needed nodes are grouped into kernels in call order. A kernel computes nodes of one
 *      compute dtype and one shape (leading 1s aside): every node's value is then the value at
 *      the work-item's own index, so a node consumed in its kernel is a private variable, and
 *      shared subexpressions are computed once. A node joins the newest kernel of its key unless
 *      it consumes a node of another key launched after it; an edge between kernels goes
 *      through memory (the producer's result, or a temporary when that result was released).
 *   3. Each kernel's source is generated from the op table: the functions of ops.def's fn
 *      column, in kernels/ew_ops.cl (which the per-op kernels use too), the same loads and
 *      conversions, intermediate values rounded to their dtype as a store and a load would,
 *      FP_CONTRACT off: a fused kernel gives the bits the per-op kernels give.
 *   4. Every kernel is built (through the engine and its disk cache; the graph keeps them in a
 *      bounded LRU) and temporaries allocated before anything is enqueued, so an error there
 *      leaves every node pending and nothing half-written; then they are enqueued in order.
 * Errors name the call that triggered the realize and the recorded calls of the failing kernel.
 *
 * $CLTENSOR_FUSION=0 turns recording off (every op runs at its call, as before);
 * $CLTENSOR_DEBUG_FUSION=1 prints each generated kernel's source when it is built and the calls
 * each launch covers, on stderr. docs/FUSION.md has the design and the figures. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "device/device.h"
#include "elementwise/elementwise.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "tensor/tensor.h"

/* Nodes recorded before a realize is forced: bounds the host memory and the leaves the graph
 * keeps alive, and the size of a generated kernel. */
#define CT__FUSE_MAX_NODES 128
/* Generated kernels kept built (process-wide, all devices): the least recently used beyond
 * this is released. */
#define CT__FUSE_LRU 256

struct ct__fnode {
  struct ct__ew_launch l;      /* l.in[j]: leaf[j], or NULL for an edge */
  struct ct__fnode *src[3];    /* the recorded producer of input j, or NULL */
  ct_tensor *leaf[3];          /* retained */
  ct_device *dev;
  ct_dtype odt;
  int ndim;                    /* shape without leading 1s */
  int64_t shape[CT_MAX_DIMS];
  int64_t n;
  ct__storage *out;            /* the result's storage; NULL once released (weak) */
  int64_t out_off;             /* elements */
  const char *fn;              /* the public call that recorded it */
  unsigned long seq;           /* its number among recorded calls, for messages */
  int var;                     /* its variable v<var> in the kernel being generated */
  /* realize */
  bool needed, store;
  int kern;
  ct_tensor *tmp;              /* a temporary result, when store is set and out is NULL */
};

static struct {
  pthread_mutex_t lock;
  struct ct__fnode **v;
  size_t n, cap;
  unsigned long seq;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* This thread holds G.lock (so storage_dead does not take it again). */
static _Thread_local bool ct__held;

int ct__fusion_override = -1;
atomic_int ct__fusion_fail_builds;
static struct {
  atomic_ulong realizes, kernels, launches, nodes, dropped, temps, builds;
} ct__fstats;

void ct__fusion_stats(struct ct__fusion_stats *out) {
  out->realizes = atomic_load(&ct__fstats.realizes);
  out->kernels = atomic_load(&ct__fstats.kernels);
  out->launches = atomic_load(&ct__fstats.launches);
  out->nodes = atomic_load(&ct__fstats.nodes);
  out->dropped = atomic_load(&ct__fstats.dropped);
  out->temps = atomic_load(&ct__fstats.temps);
  out->builds = atomic_load(&ct__fstats.builds);
  out->pending = (unsigned long)atomic_load(&ct__deferred_nodes);
}
static atomic_int ct__fusion_env = -1; /* -1 unread, 0 off, 1 on, 2 invalid */
static atomic_int ct__fusion_debug = -1;

static ct_status ct__fusion_on(bool *on, const char *fn) {
  *on = false;
  if (ct__fusion_override >= 0) {
    *on = ct__fusion_override != 0;
    return CT_OK;
  }
  int e = atomic_load_explicit(&ct__fusion_env, memory_order_relaxed);
  if (e < 0) {
    bool v = true;
    ct_status st = ct__env_bool(fn, "CLTENSOR_FUSION", true, &v);
    if (st != CT_OK) return st; /* refused at each call, where it can be reported */
    e = v ? 1 : 0;
    atomic_store_explicit(&ct__fusion_env, e, memory_order_relaxed);
  }
  *on = e == 1;
  return CT_OK;
}

static bool ct__debug(void) {
  int e = atomic_load_explicit(&ct__fusion_debug, memory_order_relaxed);
  if (e < 0) {
    bool v = false;
    if (ct__env_bool("cltensor", "CLTENSOR_DEBUG_FUSION", false, &v) != CT_OK) v = false;
    e = v;
    atomic_store_explicit(&ct__fusion_debug, e, memory_order_relaxed);
  }
  return e == 1;
}

/* ---- recording ---- */

static int ct__norm_shape(int64_t *out, int ndim, const int64_t *shape) {
  int s = 0;
  while (s < ndim && shape[s] == 1) s++;
  for (int i = s; i < ndim; i++) out[i - s] = shape[i];
  return ndim - s;
}

static struct ct__fnode *ct__writer(const ct__storage *s) {
  for (size_t i = G.n; i-- > 0;)
    if (G.v[i]->out == s) return G.v[i];
  return NULL;
}

/* t reads the whole result of p in p's order: p's own result tensor (or a reshape of it that
 * only adds or drops leading 1s). */
static bool ct__reads_whole(const ct_tensor *t, const struct ct__fnode *p) {
  if (t->dtype != p->odt || !ct_tensor_is_contiguous(t)) return false;
  int64_t off;
  if (!ct__tensor_elem_offset(t, &off) || off != p->out_off) return false;
  int64_t sh[CT_MAX_DIMS];
  int nd = ct__norm_shape(sh, t->ndim, t->shape);
  return nd == p->ndim && memcmp(sh, p->shape, (size_t)nd * sizeof *sh) == 0;
}

static void ct__node_free(struct ct__fnode *nd) {
  for (int j = 0; j < 3; j++) ct_release(nd->leaf[j]);
  ct_release(nd->tmp);
  free(nd);
}

static ct_status ct__realize_locked(const char *fn);

ct_status ct__ew_defer(const char *fn, const struct ct__ew_launch *l, ct_tensor *out) {
  bool on;
  CT__TRY(ct__fusion_on(&on, fn));
  int64_t off;
  /* Nothing to defer, or a result the fused store can't address: run it now. */
  if (!on || ct_numel(out) == 0 || !ct__tensor_elem_offset(out, &off) || !ct_tensor_is_contiguous(out) ||
      (out->dtype != l->k && out->dtype != CT_BOOL))
    return ct__ew_run(fn, l, out);
  struct ct__fnode *nd = calloc(1, sizeof *nd);
  if (!nd) return ct__ew_run(fn, l, out);
  nd->l = *l;
  nd->dev = out->storage->device;
  nd->odt = out->dtype;
  nd->ndim = ct__norm_shape(nd->shape, out->ndim, out->shape);
  nd->n = ct_numel(out);
  nd->out_off = off;
  nd->fn = fn;

  pthread_mutex_lock(&G.lock);
  ct__held = true;
  ct_status st = CT_OK;
  /* An input that is a view of memory a node will write, other than that node's whole result,
   * can't be computed inline: realize first, then it is plain memory. */
  for (int j = 0; j < l->nin && st == CT_OK; j++) {
    const ct_tensor *t = l->in[j];
    if (!atomic_load_explicit(&t->storage->pending, memory_order_acquire)) continue;
    struct ct__fnode *p = ct__writer(t->storage);
    if (!p || !ct__reads_whole(t, p)) st = ct__realize_locked(fn);
  }
  if (st == CT_OK && G.n == G.cap) {
    size_t cap = G.cap ? G.cap * 2 : 64;
    struct ct__fnode **v = realloc(G.v, cap * sizeof *v);
    if (v) {
      G.v = v;
      G.cap = cap;
    }
  }
  if (st != CT_OK || G.n == G.cap) {
    ct__held = false;
    pthread_mutex_unlock(&G.lock);
    free(nd);
    return st != CT_OK ? st : ct__ew_run(fn, l, out);
  }
  for (int j = 0; j < l->nin; j++) {
    const ct_tensor *t = l->in[j];
    struct ct__fnode *p = atomic_load_explicit(&t->storage->pending, memory_order_acquire) ? ct__writer(t->storage) : NULL;
    if (p) {
      nd->src[j] = p;
    } else {
      nd->leaf[j] = ct_retain((ct_tensor *)t);
    }
    nd->l.in[j] = nd->leaf[j];
  }
  nd->out = out->storage;
  atomic_store_explicit(&out->storage->pending, true, memory_order_release);
  nd->seq = ++G.seq;
  G.v[G.n++] = nd;
  atomic_fetch_add_explicit(&ct__deferred_nodes, 1, memory_order_release);
  if (G.n >= CT__FUSE_MAX_NODES) st = ct__realize_locked(fn);
  ct__held = false;
  pthread_mutex_unlock(&G.lock);
  return st;
}

static void ct__storage_dead(void *storage) {
  bool held = ct__held;
  if (!held) pthread_mutex_lock(&G.lock);
  for (size_t i = 0; i < G.n; i++)
    if (G.v[i]->out == storage) G.v[i]->out = NULL;
  if (!held) pthread_mutex_unlock(&G.lock);
}

/* ---- the LRU of generated kernels ---- */

struct ct__fk {
  ct_device *dev;
  uint64_t hash;
  char *src;
  ct__kernel *k;
  unsigned long used;
};
static struct ct__fk ct__lru[CT__FUSE_LRU];
static unsigned long ct__lru_clock;
static unsigned ct__lru_gen; /* ct_shutdown() generation the entries belong to */

static uint64_t ct__fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static void ct__lru_clear(void) {
  for (int i = 0; i < CT__FUSE_LRU; i++) {
    /* Kernels of a shut-down generation went with their context: only host memory is freed. */
    if (ct__lru[i].k && ct__lru_gen == ct__device_generation()) ct__kernel_free_owned(ct__lru[i].k);
    free(ct__lru[i].src);
    memset(&ct__lru[i], 0, sizeof ct__lru[i]);
  }
}

/* Under G.lock. The kernel `name` of src on d, built on a miss. */
static ct_status ct__lru_get(ct__kernel **out, ct_device *d, const char *src, const char *name, const char *opts) {
  if (ct__lru_gen != ct__device_generation()) {
    ct__lru_clear();
    ct__lru_gen = ct__device_generation();
  }
  uint64_t h = ct__fnv(src);
  int victim = 0;
  for (int i = 0; i < CT__FUSE_LRU; i++) {
    struct ct__fk *e = &ct__lru[i];
    if (e->k && e->dev == d && e->hash == h && strcmp(e->src, src) == 0) {
      e->used = ++ct__lru_clock;
      *out = e->k;
      return CT_OK;
    }
    if (!e->k || (ct__lru[victim].k && e->used < ct__lru[victim].used)) victim = i;
  }
  char *copy = strdup(src);
  if (!copy) return ct__error(CT_ERR_OUT_OF_MEMORY, "fusion: out of host memory");
  ct__kernel *k;
  if (atomic_load(&ct__fusion_fail_builds) > 0) {
    atomic_fetch_sub(&ct__fusion_fail_builds, 1);
    free(copy);
    return ct__error(CT_ERR_KERNEL_BUILD, "kernel engine: building %s on %s failed (injected by a test)", name,
                     d->spec);
  }
  ct_status st = ct__kernel_build_owned(&k, d, src, name, opts);
  if (st != CT_OK) {
    free(copy);
    return st;
  }
  atomic_fetch_add(&ct__fstats.builds, 1);
  if (ct__debug()) fprintf(stderr, "cltensor fusion: built %s on %s:\n%s\n", name, d->spec, src);
  struct ct__fk *e = &ct__lru[victim];
  ct__kernel_free_owned(e->k); /* enqueued launches keep their kernel alive (OpenCL) */
  free(e->src);
  *e = (struct ct__fk){.dev = d, .hash = h, .src = copy, .k = k, .used = ++ct__lru_clock};
  *out = k;
  return CT_OK;
}

/* ---- code generation ---- */

struct ct__buf {
  char *p;
  size_t n, cap;
  bool oom;
  bool skip; /* collect the operands only, no text */
};

static void ct__put(struct ct__buf *b, const char *fmt, ...) CT__PRINTF(2, 3);
static void ct__put(struct ct__buf *b, const char *fmt, ...) {
  if (b->oom || b->skip) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (w < 0) {
      b->oom = true;
      return;
    }
    if (b->p && b->n + (size_t)w < b->cap) {
      b->n += (size_t)w;
      return;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap <= b->n + (size_t)w) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

/* An operand in memory: a leaf, or a node computed by an earlier kernel. */
struct ct__fop {
  cl_mem mem;
  int64_t off;
  ct_dtype dt;
  int kind;                    /* 0 element i, 1 one element, 2 through strides */
  int64_t st[CT_MAX_DIMS];     /* strides over the kernel's dims (0 where broadcast) */
  bool cond;                   /* read as a where() condition (EW_NZ) rather than a value */
};

/* One kernel being generated. */
struct ct__fgen {
  int kk;
  ct_device *dev;
  ct_dtype k;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t n;
  struct ct__fop ops[3 * CT__FUSE_MAX_NODES];
  int nops;
  ct__ew_scalar sc[2 * CT__FUSE_MAX_NODES];
  int nsc;
  struct ct__fnode *outs[CT__FUSE_MAX_NODES];
  int nouts;
  bool strided;
};

static int ct__dt_code(ct_dtype t) {
  switch (t) {
  case CT_BOOL: return 0;
  case CT_U8: return 1;
  case CT_I8: return 2;
  case CT_I32: return 3;
  case CT_I64: return 4;
  case CT_F16: return 5;
  case CT_BF16: return 6;
  case CT_F32: return 7;
  case CT_F64: return 8;
  case CT_I16: return 9;
  case CT_U16: return 10;
  case CT_U32: return 11;
  default: return 12; /* u64 */
  }
}

/* The operand index of a memory read (deduplicated: one load of each distinct operand). */
static int ct__op_add(struct ct__fgen *g, cl_mem mem, int64_t off, ct_dtype dt, int ndim, const int64_t *shape,
                      const int64_t *strides, bool cond) {
  struct ct__fop o;
  memset(&o, 0, sizeof o); /* compared with memcmp: no stray padding */
  o.mem = mem;
  o.off = off;
  o.dt = dt;
  o.cond = cond;
  /* Strides over the kernel's dims, right-aligned; 0 where the operand broadcasts. */
  bool lin = true, one = true;
  int64_t want = 1;
  for (int i = g->ndim - 1; i >= 0; i--) {
    int j = i - (g->ndim - ndim);
    int64_t s = (j >= 0 && shape[j] != 1) ? strides[j] : 0;
    o.st[i] = s;
    if (g->shape[i] != 1) {
      if (s != want) lin = false;
      if (s != 0) one = false;
    }
    want *= g->shape[i];
  }
  o.kind = lin ? 0 : one ? 1 : 2;
  if (o.kind != 2) memset(o.st, 0, sizeof o.st);
  for (int i = 0; i < g->nops; i++)
    if (memcmp(&g->ops[i], &o, sizeof o) == 0) return i;
  if (o.kind == 2) g->strided = true;
  g->ops[g->nops] = o;
  return g->nops++;
}

static const char *ct__node_var_type(const struct ct__fnode *nd) {
  /* Comparisons and the other bool-valued functions return a mask of the compute type's size. */
  return nd->odt == CT_BOOL && nd->l.k != CT_BOOL ? "EW_MT()" : "EW_WB";
}

/* Operand j of node nd as an expression (its value in the compute type, or for where's
 * condition a mask). */
static void ct__operand(struct ct__buf *b, struct ct__fgen *g, struct ct__fnode *nd, int j, int *nop,
                        int *opidx) {
  bool cond = nd->l.op == CT__EW_WHERE && j == 0;
  struct ct__fnode *p = nd->src[j];
  if (p && p->kern == g->kk) {
    if (cond)
      ct__put(b, "EW_M(, ((v%d) & 1) != 0)", p->var);
    else if (p->odt == CT_BOOL && g->k != CT_BOOL)
      ct__put(b, "((EW_WB)((v%d) & 1))", p->var);
    else
      ct__put(b, "v%d", p->var);
    return;
  }
  (void)nop;
  ct__put(b, "x%d", opidx[j]);
}

static void ct__gen_kernel(struct ct__buf *b, struct ct__fgen *g, struct ct__fnode **nodes, int nn, const char *name,
                           bool full) {
  /* Values are named by their place in the kernel, not by their calls' numbers, so that the
   * same chain recorded again gives the same source: the LRU and the disk cache are keyed by it. */
  for (int a = 0; a < nn; a++) nodes[a]->var = a;
  /* Operands first (their indices decide the parameter list). */
  int opidx[CT__FUSE_MAX_NODES][3];
  g->nops = 0;
  g->nsc = 0;
  g->nouts = 0;
  g->strided = false;
  for (int a = 0; a < nn; a++) {
    struct ct__fnode *nd = nodes[a];
    for (int j = 0; j < nd->l.nin; j++) {
      opidx[a][j] = -1;
      struct ct__fnode *p = nd->src[j];
      bool cond = nd->l.op == CT__EW_WHERE && j == 0;
      if (p && p->kern == g->kk) continue;
      if (p) {
        int64_t st[CT_MAX_DIMS];
        ct__contiguous_strides(st, p->ndim, p->shape);
        ct_tensor *t = p->tmp;
        cl_mem mem = t ? ct__tensor_mem(t) : p->out->mem;
        int64_t off = p->out_off;
        if (t) ct__tensor_elem_offset(t, &off);
        opidx[a][j] = ct__op_add(g, mem, off, p->odt, p->ndim, p->shape, st, cond);
      } else {
        const ct_tensor *t = nd->leaf[j];
        int64_t off = 0;
        ct__tensor_elem_offset(t, &off);
        opidx[a][j] = ct__op_add(g, ct__tensor_mem(t), off, t->dtype, t->ndim, t->shape, t->strides, cond);
      }
    }
    if (nd->store) g->outs[g->nouts++] = nd;
  }

  ct__put(b, "/* generated by the fusion graph (src/elementwise/lazy.c) */\n");
  ct__put(b, "#define EW_K %d\n#define EW_O %d\n//#include \"ew_ops.cl\"\n\n", ct__dt_code(g->k), ct__dt_code(g->k));
  ct__put(b, "__kernel void %s(", name);
  for (int o = 0; o < g->nouts; o++) ct__put(b, "__global CT_T(%d) *o%d, long o%d_off, ", ct__dt_code(g->outs[o]->odt), o, o);
  for (int i = 0; i < g->nops; i++) {
    ct__put(b, "__global const CT_T(%d) *a%d, long a%d_off, ", ct__dt_code(g->ops[i].dt), i, i);
    if (g->ops[i].kind == 2) ct__put(b, "long8 a%d_st, ", i);
  }
  /* Scalars: one parameter per scalar of each node, in node order. */
  int nsc = 0;
  for (int a = 0; a < nn; a++) {
    struct ct__fnode *nd = nodes[a];
    int np = ct__ew_op_nparams(nd->l.op);
    int cnt = nd->l.op == CT__EW_CLAMP ? (nd->l.has_lo + nd->l.has_hi) : (nd->l.spos ? 1 : 0) + (np == 1 ? 1 : 0);
    for (int c = 0; c < cnt; c++) ct__put(b, "EW_WB s%d, ", nsc++);
  }
  if (g->strided) ct__put(b, "long8 shp, ");
  ct__put(b, "long base, long n) {\n  long i = base + (long)get_global_id(0);\n");
  if (!full) ct__put(b, "  if (i >= n) return;\n");
  else ct__put(b, "  (void)n;\n");
  if (g->strided) {
    ct__put(b, "  long r = i, c;\n");
    for (int i = 0; i < g->nops; i++)
      if (g->ops[i].kind == 2) ct__put(b, "  long a%d_o = a%d_off;\n", i, i);
    for (int dd = g->ndim - 1; dd >= 0; dd--) {
      ct__put(b, "  c = r %% shp.s%d;%s\n", dd, dd ? "" : "");
      if (dd) ct__put(b, "  r /= shp.s%d;\n", dd);
      for (int i = 0; i < g->nops; i++)
        if (g->ops[i].kind == 2 && g->ops[i].st[dd] != 0) ct__put(b, "  a%d_o += c * a%d_st.s%d;\n", i, i, dd);
    }
  }
  /* Each memory operand loaded once, as the per-op kernels load it. */
  for (int i = 0; i < g->nops; i++) {
    const struct ct__fop *o = &g->ops[i];
    char idx[48];
    if (o->kind == 0) snprintf(idx, sizeof idx, "a%d_off + i", i);
    else if (o->kind == 1) snprintf(idx, sizeof idx, "a%d_off", i);
    else snprintf(idx, sizeof idx, "a%d_o", i);
    if (o->cond)
      ct__put(b, "  const EW_MT() x%d = EW_NZ(%d, a%d, %s);\n", i, ct__dt_code(o->dt), i, idx);
    else
      ct__put(b, "  const EW_WB x%d = EW_LOAD(%d, a%d, %s);\n", i, ct__dt_code(o->dt), i, idx);
  }
  nsc = 0;
  for (int a = 0; a < nn; a++) {
    struct ct__fnode *nd = nodes[a];
    const char *f = ct__ew_op_fn(nd->l.op);
    int np = ct__ew_op_nparams(nd->l.op);
    ct__put(b, "  %s v%d = ", ct__node_var_type(nd), nd->var);
    if (nd->l.op == CT__EW_CLAMP) {
      /* ew_clamp's steps, with the bounds the call gave (ew_clamp takes which at build time). */
      ct__operand(b, g, nd, 0, NULL, opidx[a]);
      ct__put(b, ";\n");
      if (nd->l.has_lo) {
        ct__put(b, "  v%d = EW_SEL(, v%d, s%d, v%d < s%d);\n", nd->var, nd->var, nsc, nd->var, nsc);
        g->sc[nsc++] = nd->l.s[0];
      }
      if (nd->l.has_hi) {
        ct__put(b, "  v%d = EW_SEL(, v%d, s%d, v%d > s%d);\n", nd->var, nd->var, nsc, nd->var, nsc);
        g->sc[nsc++] = nd->l.s[1];
      }
    } else {
      ct__put(b, "%s(", f);
      if (nd->l.spos == 1) {
        ct__put(b, "s%d, ", nsc);
        g->sc[nsc++] = nd->l.s[0];
        ct__operand(b, g, nd, 0, NULL, opidx[a]);
      } else {
        for (int j = 0; j < nd->l.nin; j++) {
          if (j) ct__put(b, ", ");
          ct__operand(b, g, nd, j, NULL, opidx[a]);
        }
        if (nd->l.spos == 2) {
          ct__put(b, ", s%d", nsc);
          g->sc[nsc++] = nd->l.s[0];
        } else if (np == 1) {
          ct__put(b, ", s%d", nsc);
          g->sc[nsc++] = nd->l.s[0];
        }
      }
      ct__put(b, ");\n");
    }
    /* A 16-bit result is rounded as its store and a later load would round it. */
    if (nd->odt == CT_F16) ct__put(b, "  v%d = ew_round_f16(v%d);\n", nd->var, nd->var);
    if (nd->odt == CT_BF16) ct__put(b, "  v%d = ew_round_bf16(v%d);\n", nd->var, nd->var);
  }
  g->nsc = nsc;
  for (int o = 0; o < g->nouts; o++) {
    struct ct__fnode *nd = g->outs[o];
    if (nd->odt == CT_BOOL)
      ct__put(b, "  o%d[o%d_off + i] = (uchar)((v%d) & 1);\n", o, o, nd->var);
    else if (nd->odt == CT_F16)
      ct__put(b, "  EW_STH(o%d, o%d_off + i, v%d);\n", o, o, nd->var);
    else if (nd->odt == CT_BF16)
      ct__put(b, "  EW_STBF(o%d, o%d_off + i, v%d);\n", o, o, nd->var);
    else
      ct__put(b, "  o%d[o%d_off + i] = v%d;\n", o, o, nd->var);
  }
  ct__put(b, "}\n");
}

static void ct__kernel_name_of(char *name, size_t size, struct ct__fnode **nodes, int nn) {
  size_t w = (size_t)snprintf(name, size, "fz");
  for (int a = 0; a < nn && w + 24 < size; a++) {
    const char *f = ct__ew_op_fn(nodes[a]->l.op);
    if (strncmp(f, "ew_", 3) == 0) f += 3;
    if (a == 6) {
      w += (size_t)snprintf(name + w, size - w, "_x%d", nn);
      break;
    }
    w += (size_t)snprintf(name + w, size - w, "_%s", f);
  }
}

static ct_status ct__launch_kernel(ct__kernel *k, struct ct__fgen *g, int64_t base, int64_t items, const char *fn) {
  atomic_fetch_add(&ct__fstats.launches, 1);
  struct ct__kargs a = ct__kargs_lock(k);
  for (int o = 0; o < g->nouts; o++) {
    struct ct__fnode *nd = g->outs[o];
    int64_t off = nd->out_off;
    cl_mem mem;
    if (nd->tmp) {
      mem = ct__tensor_mem(nd->tmp);
      ct__tensor_elem_offset(nd->tmp, &off);
    } else {
      mem = nd->out->mem;
    }
    ct__karg_mem(&a, "out", mem);
    ct__karg_long(&a, "out_off", off);
  }
  for (int i = 0; i < g->nops; i++) {
    ct__karg_mem(&a, "in", g->ops[i].mem);
    ct__karg_long(&a, "in_off", g->ops[i].off);
    if (g->ops[i].kind == 2) ct__karg_long8(&a, "in_st", g->ndim, g->ops[i].st, 0);
  }
  size_t ss = ct__ew_scalar_size(g->k);
  for (int i = 0; i < g->nsc; i++) ct__karg(&a, "s", ss, &g->sc[i]);
  if (g->strided) ct__karg_long8(&a, "shape", g->ndim, g->shape, 1);
  ct__karg_long(&a, "base", base);
  ct__karg_long(&a, "n", g->n);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    size_t global = (size_t)items, local;
    ct__launch_dims(k, 1, &global, &local);
    st = ct__kernel_launch(k, g->dev, 1, &global, &local);
  }
  ct__kernel_unlock(k);
  return st;
}

/* "ct_mul (#12, [1024] f32), ct_add (#13, ...)" for messages. */
static void ct__calls(char *out, size_t size, struct ct__fnode **nodes, int nn) {
  size_t w = 0;
  out[0] = '\0';
  for (int a = 0; a < nn && w + 64 < size; a++) {
    char sh[96];
    ct__shape_str(sh, sizeof sh, nodes[a]->ndim, nodes[a]->shape);
    w += (size_t)snprintf(out + w, size - w, "%s%s (call #%lu, %s %s)", a ? ", " : "", nodes[a]->fn, nodes[a]->seq,
                          sh, ct_dtype_name(nodes[a]->odt));
  }
  if (w + 64 >= size && size > 8) snprintf(out + size - 8, 8, ", ...");
}

/* Wraps the current error (left by a failure of the kernel covering nodes[]) with what was being
 * realized. */
static ct_status ct__realize_error(ct_status st, const char *fn, struct ct__fnode **nodes, int nn) {
  char prev[1024], calls[768];
  snprintf(prev, sizeof prev, "%s", ct_last_error());
  ct__calls(calls, sizeof calls, nodes, nn);
  return ct__error(st, "%s: realizing deferred elementwise work failed in the fused kernel of %s: %s", fn, calls,
                   prev);
}

struct ct__fkern {
  ct_device *dev;
  ct_dtype k;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t n;
  int first, count;       /* nodes in order[] */
  ct__kernel *kf, *kc;    /* the unchecked (whole groups) and checked programs */
};

static bool ct__same_key(const struct ct__fnode *a, const struct ct__fnode *b) {
  return a->dev == b->dev && a->l.k == b->l.k && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
}

static void ct__unschedule(void) {
  for (size_t i = 0; i < G.n; i++) {
    struct ct__fnode *nd = G.v[i];
    ct_release(nd->tmp);
    nd->tmp = NULL;
    nd->needed = nd->store = false;
    nd->kern = -1;
  }
}

static ct_status ct__realize_locked(const char *fn) {
  if (G.n == 0) return CT_OK;
  size_t n = G.n;
  struct ct__fnode **v = G.v;
  /* 1. What is needed, and what must be stored. */
  for (size_t i = n; i-- > 0;) {
    struct ct__fnode *nd = v[i];
    nd->kern = -1;
    nd->tmp = NULL;
    if (nd->out) nd->needed = nd->store = true;
    if (!nd->needed) continue;
    for (int j = 0; j < nd->l.nin; j++)
      if (nd->src[j]) nd->src[j]->needed = true;
  }
  /* 2. Kernels, in call order. */
  struct ct__fkern *ks = calloc(n, sizeof *ks);
  struct ct__fnode **order = malloc(n * sizeof *order);
  if (!ks || !order) {
    free(ks);
    free(order);
    ct__unschedule();
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: realizing deferred elementwise work: out of host memory", fn);
  }
  int nk = 0;
  for (size_t i = 0; i < n; i++) {
    struct ct__fnode *nd = v[i];
    if (!nd->needed) continue;
    int req = 0;
    for (int j = 0; j < nd->l.nin; j++) {
      struct ct__fnode *p = nd->src[j];
      if (!p) continue;
      bool inl = ct__same_key(p, nd) && !(nd->l.op == CT__EW_WHERE && j == 0 && p->odt != CT_BOOL);
      if (!inl && p->kern + 1 > req) req = p->kern + 1;
      if (!inl) p->store = true;
    }
    int kk = -1;
    for (int q = nk - 1; q >= 0; q--)
      if (ks[q].dev == nd->dev && ks[q].k == nd->l.k && ks[q].ndim == nd->ndim &&
          memcmp(ks[q].shape, nd->shape, (size_t)nd->ndim * sizeof *nd->shape) == 0) {
        kk = q;
        break;
      }
    if (kk < 0 || kk < req) {
      kk = nk++;
      ks[kk].dev = nd->dev;
      ks[kk].k = nd->l.k;
      ks[kk].ndim = nd->ndim;
      memcpy(ks[kk].shape, nd->shape, sizeof nd->shape);
      ks[kk].n = nd->n;
    }
    nd->kern = kk;
    ks[kk].count++;
    for (int j = 0; j < nd->l.nin; j++)
      if (nd->src[j] && nd->src[j]->kern != kk) nd->src[j]->store = true;
  }
  int pos = 0;
  for (int q = 0; q < nk; q++) {
    ks[q].first = pos;
    int c = 0;
    for (size_t i = 0; i < n; i++)
      if (v[i]->needed && v[i]->kern == q) order[pos + c++] = v[i];
    pos += c;
  }
  ct_status st = CT_OK;
  /* 3. Temporaries for values that cross kernels but whose result was released. */
  for (size_t i = 0; i < n && st == CT_OK; i++) {
    struct ct__fnode *nd = v[i];
    if (!nd->needed || !nd->store || nd->out) continue;
    st = ct__tensor_new(&nd->tmp, nd->dev, nd->odt, nd->ndim, nd->shape, fn);
    if (st != CT_OK) st = ct__realize_error(st, fn, &nd, 1);
    else atomic_fetch_add(&ct__fstats.temps, 1);
  }
  /* 4. Every kernel built before anything is enqueued. */
  struct ct__fgen *g = st == CT_OK ? malloc(sizeof *g) : NULL;
  if (st == CT_OK && !g) st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: realizing deferred elementwise work: out of host memory", fn);
  struct ct__buf b = {0};
  for (int q = 0; q < nk && st == CT_OK; q++) {
    struct ct__fkern *K = &ks[q];
    const char *opts;
    st = ct__ew_device_options(&opts, K->dev);
    if (st != CT_OK) break;
    char name[96];
    ct__kernel_name_of(name, sizeof name, order + K->first, K->count);
    g->kk = q;
    g->dev = K->dev;
    g->k = K->k;
    g->ndim = K->ndim;
    memcpy(g->shape, K->shape, sizeof K->shape);
    g->n = K->n;
    bool want_full = (size_t)K->n >= ct__device_group_target(K->dev);
    for (int full = 0; full < 2 && st == CT_OK; full++) {
      if (full != (int)want_full) continue;
      b.n = 0;
      ct__gen_kernel(&b, g, order + K->first, K->count, name, full);
      if (b.oom) {
        st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: realizing deferred elementwise work: out of host memory", fn);
        break;
      }
      st = ct__lru_get(full ? &K->kf : &K->kc, K->dev, b.p, name, opts);
      if (st != CT_OK) st = ct__realize_error(st, fn, order + K->first, K->count);
    }
  }
  /* 5. Enqueue, in order. A launch failing leaves every node pending: running a kernel again
   * only recomputes the same values (kernels read leaves, which no node writes). */
  for (int q = 0; q < nk && st == CT_OK; q++) {
    struct ct__fkern *K = &ks[q];
    g->kk = q;
    g->dev = K->dev;
    g->k = K->k;
    g->ndim = K->ndim;
    memcpy(g->shape, K->shape, sizeof K->shape);
    g->n = K->n;
    /* The argument lists again (the operand table of the last generated kernel is another's). */
    char name[96];
    ct__kernel_name_of(name, sizeof name, order + K->first, K->count);
    struct ct__buf none = {.skip = true};
    ct__gen_kernel(&none, g, order + K->first, K->count, name, K->kf != NULL);
    if (ct__debug()) {
      char calls[768];
      ct__calls(calls, sizeof calls, order + K->first, K->count);
      fprintf(stderr, "cltensor fusion: %s (%s) covers %s\n", name, fn, calls);
    }
    atomic_fetch_add(&ct__fstats.kernels, 1);
    if (K->kf) {
      int64_t local = (int64_t)ct__kernel_group_size(K->kf);
      int64_t nfull = K->n / local * local;
      st = ct__launch_kernel(K->kf, g, 0, nfull, fn);
      /* The rest as one more whole group ending at n: it recomputes up to a group of elements
       * with the same values (results never alias a kernel's inputs). */
      if (st == CT_OK && nfull < K->n) st = ct__launch_kernel(K->kf, g, K->n - local, local, fn);
    } else {
      st = ct__launch_kernel(K->kc, g, 0, K->n, fn);
    }
    if (st != CT_OK) st = ct__realize_error(st, fn, order + K->first, K->count);
  }
  free(b.p);
  free(g);
  free(ks);
  free(order);
  if (st != CT_OK) {
    ct__unschedule();
    return st;
  }
  /* 6. Done: results are in memory. */
  size_t live = 0;
  for (size_t i = 0; i < n; i++) {
    struct ct__fnode *nd = v[i];
    if (nd->out) atomic_store_explicit(&nd->out->pending, false, memory_order_release);
    live += nd->needed;
  }
  atomic_fetch_add(&ct__fstats.realizes, 1);
  atomic_fetch_add(&ct__fstats.nodes, live);
  atomic_fetch_add(&ct__fstats.dropped, n - live);
  G.n = 0;
  atomic_fetch_sub_explicit(&ct__deferred_nodes, (long)n, memory_order_release);
  for (size_t i = 0; i < n; i++) ct__node_free(v[i]);
  return CT_OK;
}

static _Thread_local bool ct__in_realize;

static ct_status ct__realize(const char *fn) {
  if (ct__in_realize || ct__held) return CT_OK;
  pthread_mutex_lock(&G.lock);
  ct__held = true;
  ct__in_realize = true;
  ct_status st = ct__realize_locked(fn);
  ct__in_realize = false;
  ct__held = false;
  pthread_mutex_unlock(&G.lock);
  return st;
}

static void ct__drop(void) {
  pthread_mutex_lock(&G.lock);
  ct__held = true;
  size_t n = G.n;
  for (size_t i = 0; i < n; i++)
    if (G.v[i]->out) atomic_store_explicit(&G.v[i]->out->pending, false, memory_order_release);
  for (size_t i = 0; i < n; i++) ct__node_free(G.v[i]);
  G.n = 0;
  atomic_fetch_sub_explicit(&ct__deferred_nodes, (long)n, memory_order_release);
  ct__lru_clear();
  ct__lru_gen = ct__device_generation() + 1; /* ct_shutdown() bumps it after this */
  ct__held = false;
  pthread_mutex_unlock(&G.lock);
}

static const struct ct__deferred_hooks ct__hooks = {
    .realize = ct__realize,
    .storage_dead = ct__storage_dead,
    .drop = ct__drop,
};

__attribute__((constructor)) static void ct__fusion_install(void) { ct__deferred_install(&ct__hooks); }
