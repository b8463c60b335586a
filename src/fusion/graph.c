/* The fusion graph (issue #16): elementwise ops are recorded, not run, and realized as few
 * generated kernels as the graph allows when something needs device memory.
 *
 * Recording. ct__ew_defer() takes the launch an op would have enqueued (struct ct__ew_launch,
 * after every metadata check, with its result already allocated) and appends a node to the
 * calling thread's graph (struct ct__fgraph, issue #28), in call order. An input that a recorded node writes, read whole (the node's
 * own result tensor), becomes an edge to that node; any other input is a leaf, retained. An
 * input that is some other view of memory a node will write (a slice, a transpose of a pending
 * result) first realizes the graph, then is a leaf. _out forms, which write into memory that
 * recorded nodes may read, never record: they run eagerly (ct__ew_run), after a realize.
 * Through the hooks of fusion/hooks.h three other families record too: ct_cast into floating
 * dtypes (a node whose value is its input loaded as the result dtype), and full reductions and
 * last-dim softmax of a recorded node's result (its kernel's trailing op: red >= 0 below).
 *
 * Realizing. Anything that enqueues work or reads memory calls ct__deferred_realize()
 * (fusion/hooks.h): every kernel launch, transfer, map, GEMM, wait, interop export. realize
 * runs the calling thread's whole graph (another thread's graph is realized when its memory is
 * used: ct__use, through ct__tensor_deferred_use):
 *   1. A node is needed when its result's storage is still alive (someone can read it) or a
 *      needed node consumes it; the others are dropped. A result released before the realize
 *      is never written.
 *   2. Needed nodes are grouped into kernels in call order. A kernel computes nodes of one
 *      compute dtype and one shape (leading 1s aside): every node's value is then the value at
 *      the work-item's own index, so a node consumed in its kernel is a private variable, and
 *      shared subexpressions are computed once. A node joins the newest kernel of its key unless
 *      it consumes a node of another key launched after it; an edge between kernels goes
 *      through memory (the producer's result, or a temporary when that result was released).
 *      A trailing reduction or softmax joins its producer's kernel, which then walks its
 *      elements in the reduction's or the rows' layout (ct__gen_kernel).
 *   3. Each kernel's source is generated from the op table: the functions of ops.def's fn
 *      column, in kernels/ew_ops.cl (which the per-op kernels use too), the same loads and
 *      conversions, intermediate values rounded to their dtype as a store and a load would,
 *      FP_CONTRACT off: a fused kernel gives the bits the per-op kernels give.
 *   4. Every kernel is built (through the engine and its disk cache, outside every lock: a
 *      realize missing a program builds it with its graph unlocked and starts again; the
 *      process keeps them in a bounded LRU keyed by a signature of what the source depends on)
 *      and temporaries allocated before anything is enqueued, so an error there leaves every node pending and
 *      nothing half-written; then they are enqueued in order.
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
#include "fusion/fusion.h"
#include "fusion/hooks.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "tensor/tensor.h"

/* A thread's graph (issue #28). Each thread records into its own, so the kernels a thread's
 * realize builds depend only on what that thread called: with one process-wide list, unrelated
 * threads' nodes met in one kernel whose text followed the threads' timing, and new texts kept
 * being compiled. Other threads take the lock only to realize this graph when they use its
 * memory (ct__use), to drop a write whose result they released (ct__storage_dead), and at
 * ct_shutdown. Graphs are never freed: a storage's fwriter/freaders may name one at any time.
 * A thread's graph is realized when the thread exits, then kept for a later thread. */
struct ct__fgraph {
  pthread_mutex_t lock;
  struct ct__fnode **v;        /* in call order */
  size_t n, cap;
  atomic_size_t count;         /* n, for looks without the lock */
  bool owned;                  /* a live thread records into it (under the registry lock) */
  struct ct__fgraph *next;     /* the registry */
};

static struct {
  pthread_mutex_t lock;
  struct ct__fgraph *head;
  pthread_once_t once;
  pthread_key_t key;           /* realizes a thread's graph when the thread exits */
  bool key_ok;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static atomic_ulong ct__call_seq; /* numbers the recorded calls, for messages */
atomic_long ct__deferred_nodes;

/* The calling thread's graph, or NULL before it records anything. */
static _Thread_local struct ct__fgraph *ct__mine;
/* The graph whose lock this thread holds (so storage_dead does not take it again), or NULL. */
static _Thread_local struct ct__fgraph *ct__held;
/* This thread is realizing a graph: a kernel launch of it does not realize again. */
static _Thread_local bool ct__in_realize;

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

static struct ct__fnode *ct__writer(struct ct__fgraph *g, const ct__storage *s) {
  for (size_t i = g->n; i-- > 0;)
    if (g->v[i]->out == s) return g->v[i];
  return NULL;
}

/* Whether a node of g (locked) writes s or reads it as an input. */
static bool ct__touches(struct ct__fgraph *g, const ct__storage *s) {
  for (size_t i = 0; i < g->n; i++) {
    const struct ct__fnode *nd = g->v[i];
    if (nd->out == s) return true;
    for (int j = 0; j < 3; j++)
      if (nd->leaf[j] && nd->leaf[j]->storage == s) return true;
  }
  return false;
}

/* t reads the whole result of p in p's order: p's own result tensor (or a reshape of it that
 * only adds or drops leading 1s). */
static bool ct__reads_whole(const ct_tensor *t, const struct ct__fnode *p) {
  /* A reduction's result is one element, not its shape's; softmax's values exist only after
   * its kernel's last pass. */
  if (p->red >= 0) return false;
  if (t->dtype != p->odt || !ct_tensor_is_contiguous(t)) return false;
  int64_t off;
  if (!ct__tensor_elem_offset(t, &off) || off != p->out_off) return false;
  int64_t sh[CT_MAX_DIMS];
  int nd = ct__norm_shape(sh, t->ndim, t->shape);
  return nd == p->ndim && memcmp(sh, p->shape, (size_t)nd * sizeof *sh) == 0;
}

/* Room for one more node in g->v (under g->lock). */
static bool ct__room(struct ct__fgraph *g) {
  if (g->n < g->cap) return true;
  size_t cap = g->cap ? g->cap * 2 : 64;
  struct ct__fnode **v = realloc(g->v, cap * sizeof *v);
  if (!v) return false;
  g->v = v;
  g->cap = cap;
  return true;
}

static void ct__realize_at_exit(void *g);
static void ct__key_make(void) { R.key_ok = pthread_key_create(&R.key, ct__realize_at_exit) == 0; }

/* The calling thread's graph, made (or taken over from an exited thread, when it is empty) on
 * the first call that records; NULL when out of host memory. */
static struct ct__fgraph *ct__graph_of_thread(void) {
  if (ct__mine) return ct__mine;
  pthread_once(&R.once, ct__key_make);
  struct ct__fgraph *g = NULL;
  pthread_mutex_lock(&R.lock);
  for (struct ct__fgraph *q = R.head; q && !g; q = q->next)
    if (!q->owned && atomic_load(&q->count) == 0) g = q;
  if (!g && (g = calloc(1, sizeof *g))) {
    pthread_mutex_init(&g->lock, NULL);
    g->next = R.head;
    R.head = g;
  }
  if (g) g->owned = true;
  pthread_mutex_unlock(&R.lock);
  if (g && R.key_ok) pthread_setspecific(R.key, g);
  ct__mine = g;
  return g;
}

/* Marks s as read by g (under g->lock): a hint for other threads' ct__use. */
static void ct__tag_reader(ct__storage *s, struct ct__fgraph *g) {
  void *cur = NULL;
  if (atomic_compare_exchange_strong(&s->freaders, &cur, (void *)g) || cur == (void *)g || cur == CT__FREADERS_MANY)
    return;
  atomic_store(&s->freaders, CT__FREADERS_MANY);
}

static void ct__node_free(struct ct__fnode *nd) {
  for (int j = 0; j < 3; j++) ct_release(nd->leaf[j]);
  ct_release(nd->tmp);
  free(nd);
}

static ct_status ct__realize_graph(struct ct__fgraph *g, const char *fn);

/* Under g->lock, with room made (ct__room): nd, writing storage out, joins the list; the node
 * bound realizes the graph (its status, naming fn, is returned). */
static ct_status ct__append(struct ct__fgraph *g, struct ct__fnode *nd, ct__storage *out, const char *fn) {
  nd->out = out;
  atomic_store_explicit(&out->fwriter, (void *)g, memory_order_release);
  atomic_store_explicit(&out->pending, true, memory_order_release);
  for (int j = 0; j < 3; j++)
    if (nd->leaf[j]) ct__tag_reader(nd->leaf[j]->storage, g);
  nd->seq = atomic_fetch_add(&ct__call_seq, 1) + 1;
  g->v[g->n++] = nd;
  atomic_store(&g->count, g->n);
  atomic_fetch_add_explicit(&ct__deferred_nodes, 1, memory_order_release);
  if (g->n < CT__FUSE_MAX_NODES) return CT_OK;
  bool was = ct__in_realize;
  ct__in_realize = true;
  ct_status st = ct__realize_graph(g, fn);
  ct__in_realize = was;
  return st;
}

static ct_status ct__use(void *storage, const char *fn);

static void ct__lock(struct ct__fgraph *g) {
  pthread_mutex_lock(&g->lock);
  ct__held = g;
}
static void ct__unlock(struct ct__fgraph *g) {
  ct__held = NULL;
  pthread_mutex_unlock(&g->lock);
}

/* Records the launch l into out (cast: ct_cast's conversion, l->k the result dtype). What can't
 * be recorded runs now, except a cast, which has no per-op launch here: its failure is returned. */
static ct_status ct__ew_defer_node(const char *fn, const struct ct__ew_launch *l, ct_tensor *out, bool cast) {
  int64_t off;
  if (!ct__tensor_elem_offset(out, &off)) return cast ? ct__error(CT_ERR_INTERNAL, "%s: misaligned result", fn) : ct__ew_run(fn, l, out);
  struct ct__fnode *nd = calloc(1, sizeof *nd);
  if (!nd)
    return cast ? ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn) : ct__ew_run(fn, l, out);
  nd->cast = cast;
  nd->l = *l;
  nd->dev = out->storage->device;
  nd->odt = out->dtype;
  nd->ndim = ct__norm_shape(nd->shape, out->ndim, out->shape);
  nd->n = ct_numel(out);
  nd->out_off = off;
  nd->fn = fn;
  nd->red = -1;

  struct ct__fgraph *g = ct__graph_of_thread();
  ct_status st = CT_OK;
  /* An input another thread's graph will write (a tensor handed over) is enqueued there first:
   * graphs have no edges between them, so it is a leaf here. Not under g's lock: a thread holds
   * one graph's lock at a time. */
  for (int j = 0; j < l->nin && st == CT_OK && g; j++) {
    const ct_tensor *t = l->in[j];
    if (atomic_load_explicit(&t->storage->pending, memory_order_acquire) &&
        atomic_load_explicit(&t->storage->fwriter, memory_order_acquire) != (void *)g)
      st = ct__use(t->storage, fn);
  }
  if (st != CT_OK || !g) {
    free(nd);
    if (st == CT_OK && cast) st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return st != CT_OK || cast ? st : ct__ew_run(fn, l, out);
  }
  ct__lock(g);
  bool was = ct__in_realize;
  ct__in_realize = true; /* a realize below launches kernels: they must not realize again */
  /* An input that is a view of memory a node will write, other than that node's whole result,
   * can't be computed inline: realize first, then it is plain memory. */
  for (int j = 0; j < l->nin && st == CT_OK; j++) {
    const ct_tensor *t = l->in[j];
    if (!atomic_load_explicit(&t->storage->pending, memory_order_acquire)) continue;
    struct ct__fnode *p = ct__writer(g, t->storage);
    if (!p || !ct__reads_whole(t, p)) st = ct__realize_graph(g, fn);
  }
  ct__in_realize = was;
  if (st != CT_OK || !ct__room(g)) {
    ct__unlock(g);
    free(nd);
    if (st == CT_OK && cast) st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return st != CT_OK || cast ? st : ct__ew_run(fn, l, out);
  }
  for (int j = 0; j < l->nin; j++) {
    const ct_tensor *t = l->in[j];
    struct ct__fnode *p = atomic_load_explicit(&t->storage->pending, memory_order_acquire) ? ct__writer(g, t->storage) : NULL;
    if (p) {
      nd->src[j] = p;
    } else {
      nd->leaf[j] = ct_retain((ct_tensor *)t);
    }
    nd->l.in[j] = nd->leaf[j];
  }
  st = ct__append(g, nd, out->storage, fn);
  ct__unlock(g);
  return st;
}

/* The elementwise hook (fusion/hooks.h): an op's launch into its new result tensor (contiguous,
 * just allocated) is recorded, or run at once with fusion off and for what can't be recorded. */
static ct_status ct__defer_ew(const char *fn, const struct ct__ew_launch *l, ct_tensor *out) {
  bool on;
  CT__TRY(ct__fusion_on(&on, fn));
  /* Nothing to defer, or a result the fused store can't address: run it now. */
  if (!on || ct_numel(out) == 0 || !ct_tensor_is_contiguous(out) || (out->dtype != l->k && out->dtype != CT_BOOL))
    return ct__ew_run(fn, l, out);
  return ct__ew_defer_node(fn, l, out, false);
}

/* Records a trailing op (CT__RED_* or CT__FR_*; mean: the sum divided by the count) of x, a recorded node's
 * whole result, into a new result of dtype odt and shape (ondim, oshape): the producer kernel's
 * trailing reduction or softmax. *out NULL when not recorded (fusion off, x not pending or not
 * whole): the caller computes it itself. */
static ct_status ct__defer_trailing(ct_tensor **out, const ct_tensor *x, int red, bool mean, ct_dtype odt, int ondim,
                                    const int64_t *oshape, const char *fn) {
  *out = NULL;
  bool on;
  CT__TRY(ct__fusion_on(&on, fn));
  if (!on || !atomic_load_explicit(&x->storage->pending, memory_order_acquire)) return CT_OK;
  struct ct__fnode *nd = calloc(1, sizeof *nd);
  if (!nd) return CT_OK;
  ct_tensor *o = NULL;
  ct_status st = ct__tensor_new(&o, x->storage->device, odt, ondim, oshape, fn);
  int64_t off;
  if (st != CT_OK || !ct__tensor_elem_offset(o, &off)) {
    free(nd);
    ct_release(o);
    return st;
  }
  /* x pending in another thread's graph: not recorded here; the caller's own kernels realize
   * that graph through their arguments (ct__karg_tensor). */
  struct ct__fgraph *g = ct__graph_of_thread();
  if (g) ct__lock(g);
  struct ct__fnode *p = g ? ct__writer(g, x->storage) : NULL;
  if (!p || !ct__reads_whole(x, p) || !ct__room(g)) {
    if (g) ct__unlock(g);
    free(nd);
    ct_release(o);
    return CT_OK;
  }
  nd->l.nin = 1;
  nd->l.k = p->l.k;
  nd->src[0] = p;
  nd->dev = p->dev;
  nd->odt = odt;
  nd->ndim = p->ndim;
  memcpy(nd->shape, p->shape, sizeof p->shape);
  nd->n = p->n;
  nd->red = red;
  nd->mean = mean;
  nd->fn = fn;
  nd->out_off = off;
  st = ct__append(g, nd, o->storage, fn);
  ct__unlock(g);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  *out = o;
  return CT_OK;
}

/* The hook (fusion/hooks.h) behind reduce/'s full reductions (sum, prod, max, min; mean as a sum divided
 * by the count). */
static ct_status ct__defer_reduce(ct_tensor **out, const ct_tensor *x, int op, bool mean, ct_dtype odt, int ondim,
                                  const int64_t *oshape, const char *fn) {
  *out = NULL;
  if (op != CT__RED_SUM && op != CT__RED_PROD && op != CT__RED_MAX && op != CT__RED_MIN) return CT_OK;
  return ct__defer_trailing(out, x, op, mean, odt, ondim, oshape, fn);
}

/* Casts whose fused form (a load converted to the compute dtype, stored as the result) gives
 * ct_cast()'s bits: into a floating dtype, from a float or an integer every value of which a
 * float holds exactly (wider integers would round twice on the way to f16). */
static bool ct__cast_fusable(ct_dtype from, ct_dtype to) {
  if (!ct_dtype_is_float(to)) return false;
  switch (from) {
  case CT_F16: case CT_BF16: case CT_F32: case CT_F64: case CT_BOOL: case CT_U8: case CT_I8: case CT_I16:
  case CT_U16: return true;
  default: return false;
  }
}

static ct_status ct__defer_cast(ct_tensor **out, const ct_tensor *x, ct_dtype dt, const char *fn) {
  *out = NULL;
  bool on;
  CT__TRY(ct__fusion_on(&on, fn));
  if (!on || ct_numel(x) == 0 || !ct__cast_fusable(x->dtype, dt)) return CT_OK;
  ct_tensor *o = NULL;
  CT__TRY(ct__tensor_new(&o, x->storage->device, dt, x->ndim, x->shape, fn));
  struct ct__ew_launch l = {.op = CT__EW_OP_COUNT, .nin = 1, .in = {x}, .k = dt};
  ct_status st = ct__ew_defer_node(fn, &l, o, true);
  if (st != CT_OK) {
    ct_release(o);
    return st;
  }
  *out = o;
  return CT_OK;
}

/* The hook (fusion/hooks.h) behind ct_softmax / ct_log_softmax over the last dim. */
static ct_status ct__defer_softmax(ct_tensor **out, const ct_tensor *x, bool log, const char *fn) {
  *out = NULL;
  if (x->ndim == 0) return CT_OK;
  return ct__defer_trailing(out, x, log ? CT__FR_LOG_SOFTMAX : CT__FR_SOFTMAX, false, x->dtype, x->ndim, x->shape,
                            fn);
}

static void ct__storage_dead(void *storage) {
  ct__storage *s = storage;
  struct ct__fgraph *g = atomic_load_explicit(&s->fwriter, memory_order_acquire);
  if (!g) return;
  /* Under another graph's lock only storages no node writes die (leaves, temporaries): a
   * thread never waits for a second graph's lock while holding one. */
  bool held = ct__held == g;
  if (!held) pthread_mutex_lock(&g->lock);
  for (size_t i = 0; i < g->n; i++)
    if (g->v[i]->out == s) g->v[i]->out = NULL;
  if (!held) pthread_mutex_unlock(&g->lock);
}

/* ---- the LRU of generated kernels ----
 * Keyed by the kernel's signature (struct ct__fgen's sig: everything its source depends on),
 * so that a realize whose kernels are built formats no source at all. Process-wide, behind its
 * own lock, held only to look up and insert: a build runs outside every lock, behind an entry
 * marked "being built" on which a second thread needing the same kernel waits (issue #28: the
 * builds ran under the one graph lock, and all threads waited for each). A realize pins the
 * entries it launches (users), so that another thread's insertion does not release a kernel
 * between its lookup and its launch; only unpinned entries are evicted. */

struct ct__fk {
  ct_device *dev;
  uint64_t hash;
  int64_t *sig;
  int nsig;
  ct__kernel *k;     /* NULL while being built */
  bool building;
  int users;         /* realizes holding it, and the builder */
  unsigned long used;
};
static struct {
  pthread_mutex_t lock;
  pthread_cond_t built;
  struct ct__fk **v;
  int n, cap;
  unsigned long clock;
  unsigned gen; /* ct_shutdown() generation the entries belong to */
} L = {.lock = PTHREAD_MUTEX_INITIALIZER, .built = PTHREAD_COND_INITIALIZER};

static uint64_t ct__sig_hash(const int64_t *sig, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) h = (h ^ (uint64_t)sig[i]) * 1099511628211ull;
  return h;
}

static void ct__fk_free(struct ct__fk *e) {
  /* Kernels of a shut-down generation went with their context: only host memory is freed. */
  if (e->k && L.gen == ct__device_generation()) ct__kernel_free_owned(e->k);
  free(e->sig);
  free(e);
}

/* Under L.lock. */
static void ct__lru_clear(void) {
  int keep = 0;
  for (int i = 0; i < L.n; i++) {
    struct ct__fk *e = L.v[i];
    if (e->users) L.v[keep++] = e; /* pinned or being built: its holder releases it */
    else ct__fk_free(e);
  }
  L.n = keep;
}

/* Under L.lock: the entry of sig on d, or NULL. */
static struct ct__fk *ct__lru_entry(ct_device *d, const int64_t *sig, int nsig, uint64_t h) {
  if (L.gen != ct__device_generation()) {
    ct__lru_clear();
    L.gen = ct__device_generation();
  }
  for (int i = 0; i < L.n; i++) {
    struct ct__fk *e = L.v[i];
    if (e->dev == d && e->hash == h && e->nsig == nsig && memcmp(e->sig, sig, (size_t)nsig * sizeof *sig) == 0)
      return e;
  }
  return NULL;
}

/* The built kernel of signature sig on d, pinned (ct__lru_unpin), or NULL when it is not built
 * (or being built): never waits. */
static struct ct__fk *ct__lru_pin(ct_device *d, const int64_t *sig, int nsig) {
  pthread_mutex_lock(&L.lock);
  struct ct__fk *e = ct__lru_entry(d, sig, nsig, ct__sig_hash(sig, nsig));
  if (e && e->k) {
    e->users++;
    e->used = ++L.clock;
  } else {
    e = NULL;
  }
  pthread_mutex_unlock(&L.lock);
  return e;
}

static void ct__lru_unpin(struct ct__fk *e) {
  if (!e) return;
  pthread_mutex_lock(&L.lock);
  e->users--;
  pthread_mutex_unlock(&L.lock);
}

/* Under L.lock: room for one more entry, releasing the least recently used unpinned one when
 * the table holds CT__FUSE_LRU (it grows past that only while every entry is pinned). */
static bool ct__lru_room(void) {
  if (L.n >= CT__FUSE_LRU) {
    int victim = -1;
    for (int i = 0; i < L.n; i++)
      if (!L.v[i]->users && (victim < 0 || L.v[i]->used < L.v[victim]->used)) victim = i;
    if (victim >= 0) {
      ct__fk_free(L.v[victim]); /* enqueued launches keep their kernel alive (OpenCL) */
      L.v[victim] = L.v[--L.n];
    }
  }
  if (L.n < L.cap) return true;
  int cap = L.cap ? 2 * L.cap : 64;
  struct ct__fk **v = realloc(L.v, (size_t)cap * sizeof *v);
  if (!v) return false;
  L.v = v;
  L.cap = cap;
  return true;
}

/* The kernel `name` of src (signature sig) on d, pinned: found, or built here (outside every
 * lock), or waited for while another thread builds it. Called with no graph lock held. */
static ct_status ct__lru_acquire(struct ct__fk **out, ct_device *d, const int64_t *sig, int nsig, const char *src,
                                 const char *name, const char *opts) {
  *out = NULL;
  uint64_t h = ct__sig_hash(sig, nsig);
  pthread_mutex_lock(&L.lock);
  struct ct__fk *e;
  while ((e = ct__lru_entry(d, sig, nsig, h)) && e->building) pthread_cond_wait(&L.built, &L.lock);
  if (e) {
    e->users++;
    e->used = ++L.clock;
    pthread_mutex_unlock(&L.lock);
    *out = e;
    return CT_OK;
  }
  e = calloc(1, sizeof *e);
  int64_t *copy = malloc((size_t)nsig * sizeof *copy);
  if (!e || !copy || !ct__lru_room()) {
    pthread_mutex_unlock(&L.lock);
    free(e);
    free(copy);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "fusion: out of host memory");
  }
  memcpy(copy, sig, (size_t)nsig * sizeof *copy);
  *e = (struct ct__fk){.dev = d, .hash = h, .sig = copy, .nsig = nsig, .building = true, .users = 1};
  L.v[L.n++] = e;
  pthread_mutex_unlock(&L.lock);

  ct__kernel *k = NULL;
  ct_status st;
  if (atomic_load(&ct__fusion_fail_builds) > 0) {
    atomic_fetch_sub(&ct__fusion_fail_builds, 1);
    st = ct__error(CT_ERR_KERNEL_BUILD, "kernel engine: building %s on %s failed (injected by a test)", name, d->spec);
  } else {
    st = ct__kernel_build_owned(&k, d, src, name, opts);
  }
  if (st == CT_OK) {
    atomic_fetch_add(&ct__fstats.builds, 1);
    if (ct__debug()) fprintf(stderr, "cltensor fusion: built %s on %s:\n%s\n", name, d->spec, src);
  }

  pthread_mutex_lock(&L.lock);
  e->building = false;
  if (st == CT_OK) {
    e->k = k;
    e->used = ++L.clock;
    *out = e;
  } else {
    /* Gone again: a thread waiting for it builds it itself and reports its own failure. */
    for (int i = 0; i < L.n; i++)
      if (L.v[i] == e) L.v[i] = L.v[--L.n];
    ct__fk_free(e);
  }
  pthread_cond_broadcast(&L.built);
  pthread_mutex_unlock(&L.lock);
  return st;
}

/* Everything a kernel's launch needs besides the generated operand table. */
struct ct__fkern {
  ct_device *dev;
  ct_dtype k;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t n;
  int first, count;       /* nodes in order[] */
  ct__kernel *kf, *kc;    /* the unchecked (whole groups) and checked programs */
  struct ct__fnode *red;  /* its trailing reduction, or NULL */
  ct__kernel *kfin;       /* the reduction's second pass */
  struct ct__fk *pin[2];  /* the LRU entries of its programs, pinned until enqueued */
  ct_tensor *part;        /* the reduction's partials */
  int64_t parts, chunk;
};

/* A fused reduction's first pass. GPUs: a work-item per element, a partial per work-group of
 * `local`. CPUs: a work-item (alone in its group) per chunk, four per compute unit, chunks of
 * at least 8192 elements. */
static void ct__red_split(struct ct__fkern *K, size_t local, bool cpu) {
  if (cpu) {
    int64_t cu = K->dev->props.compute_units ? K->dev->props.compute_units : 1;
    int64_t parts = (K->n + 8191) / 8192;
    if (parts > 4 * cu) parts = 4 * cu;
    if (parts < 1) parts = 1;
    int64_t chunk = (K->n + parts - 1) / parts;
    K->chunk = (chunk + 7) / 8 * 8;
    K->parts = (K->n + K->chunk - 1) / K->chunk;
    return;
  }
  K->chunk = (int64_t)local;
  K->parts = (K->n + (int64_t)local - 1) / (int64_t)local;
}

static void ct__karg_common(struct ct__kargs *a, struct ct__fgen *g) {
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
    ct__karg_mem(a, "out", mem);
    ct__karg_long(a, "out_off", off);
  }
  for (int i = 0; i < g->nops; i++) {
    ct__karg_mem(a, "in", g->ops[i].mem);
    ct__karg_long(a, "in_off", g->ops[i].off);
    if (g->ops[i].kind == 2) ct__karg_long8(a, "in_st", g->ndim, g->ops[i].st, 0);
  }
  size_t ss = ct__ew_scalar_size(g->k);
  for (int i = 0; i < g->nsc; i++) ct__karg(a, "s", ss, &g->sc[i]);
  if (g->strided) ct__karg_long8(a, "shape", g->ndim, g->shape, 1);
  if (ct__fgen_magic(g)) {
    int64_t m[CT_MAX_DIMS], sh[CT_MAX_DIMS];
    for (int d = 0; d < g->ndim; d++) ct__fuse_magic(g->shape[d], &m[d], &sh[d]);
    ct__karg_long8(a, "shape_m", g->ndim, m, 1);
    ct__karg_long8(a, "shape_s", g->ndim, sh, 32);
  }
}

static ct_status ct__launch_kernel(ct__kernel *k, struct ct__fgen *g, int64_t base, int64_t items, const char *fn) {
  atomic_fetch_add(&ct__fstats.launches, 1);
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_common(&a, g);
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

/* Both passes of a kernel with a trailing reduction. */
static ct_status ct__launch_reduce(struct ct__fkern *K, struct ct__fgen *g, const char *fn) {
  atomic_fetch_add(&ct__fstats.launches, 2);
  size_t local = g->cpu_red ? 1 : ct__kernel_group_size(K->kc), accsz = ct__acc_size(ct__red_acc_dtype(K->red));
  struct ct__kargs a = ct__kargs_lock(K->kc);
  ct__karg_common(&a, g);
  if (g->cpu_red) ct__karg_long(&a, "chunk", K->chunk);
  ct__karg_long(&a, "n", g->n);
  ct__karg_tensor(&a, "part", K->part, 0);
  if (!g->cpu_red) ct__karg_local(&a, "lacc", local * accsz);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    size_t global = (size_t)K->parts * local;
    st = ct__kernel_launch(K->kc, g->dev, 1, &global, &local);
  }
  ct__kernel_unlock(K->kc);
  if (st != CT_OK) return st;
  struct ct__fnode *r = K->red;
  size_t l2 = ct__kernel_group_size(K->kfin);
  if (l2 > 64) l2 = 64; /* one fixed group size: PoCL compiles a kernel per size */
  a = ct__kargs_lock(K->kfin);
  ct__karg_tensor(&a, "part", K->part, 0);
  ct__karg_long(&a, "nparts", K->parts);
  ct__karg_mem(&a, "o", r->out->mem);
  ct__karg_long(&a, "o_off", r->out_off);
  ct__karg_long(&a, "count", r->n);
  ct__karg_local(&a, "lacc", l2 * accsz);
  st = ct__kargs_end(&a, fn);
  if (st == CT_OK) st = ct__kernel_launch(K->kfin, g->dev, 1, &l2, &l2);
  ct__kernel_unlock(K->kfin);
  return st;
}

/* A kernel ending in softmax: a work-item per row. */
static ct_status ct__launch_softmax(struct ct__fkern *K, struct ct__fgen *g, const char *fn) {
  atomic_fetch_add(&ct__fstats.launches, 1);
  struct ct__fnode *r = K->red;
  int64_t ncols = K->ndim ? K->shape[K->ndim - 1] : 1, nrows = K->n / ncols;
  struct ct__kargs a = ct__kargs_lock(K->kc);
  ct__karg_common(&a, g);
  ct__karg_long(&a, "ncols", ncols);
  ct__karg_long(&a, "nrows", nrows);
  ct__karg_mem(&a, "so", r->out->mem);
  ct__karg_long(&a, "so_off", r->out_off);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    size_t global = (size_t)nrows, local;
    ct__launch_dims(K->kc, 1, &global, &local);
    st = ct__kernel_launch(K->kc, g->dev, 1, &global, &local);
  }
  ct__kernel_unlock(K->kc);
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

static bool ct__same_key(const struct ct__fnode *a, const struct ct__fnode *b) {
  return a->dev == b->dev && a->l.k == b->l.k && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
}

static void ct__unschedule(struct ct__fgraph *gr) {
  for (size_t i = 0; i < gr->n; i++) {
    struct ct__fnode *nd = gr->v[i];
    ct_release(nd->tmp);
    nd->tmp = NULL;
    nd->needed = nd->store = false;
    nd->kern = -1;
  }
}

static void ct__fgen_set(struct ct__fgen *g, int q, const struct ct__fkern *K) {
  g->cpu_red = ct__device_chunked(K->dev) && !ct__ew_gpu_paths;
  g->kk = q;
  g->dev = K->dev;
  g->k = K->k;
  g->ndim = K->ndim;
  memcpy(g->shape, K->shape, sizeof K->shape);
  g->n = K->n;
}

/* A program a realize found missing: built (ct__lru_acquire) with no graph lock held, then the
 * realize starts again. */
struct ct__tobuild {
  ct_device *dev;
  int64_t *sig;
  int nsig;
  char *src;
  char name[96];
  const char *opts;
  char calls[768];  /* for the error message: the recorded calls it covers */
};
struct ct__builds {
  struct ct__tobuild *v;
  int n, cap;
  bool oom;
};

static void ct__builds_add(struct ct__builds *bl, ct_device *d, const int64_t *sig, int nsig, const char *src,
                           const char *name, const char *opts, struct ct__fnode **nodes, int nn) {
  for (int i = 0; i < bl->n; i++) /* two kernels of one realize with one text */
    if (bl->v[i].dev == d && bl->v[i].nsig == nsig && memcmp(bl->v[i].sig, sig, (size_t)nsig * sizeof *sig) == 0)
      return;
  if (bl->n == bl->cap) {
    int cap = bl->cap ? 2 * bl->cap : 8;
    struct ct__tobuild *v = realloc(bl->v, (size_t)cap * sizeof *v);
    if (!v) {
      bl->oom = true;
      return;
    }
    bl->v = v;
    bl->cap = cap;
  }
  struct ct__tobuild *t = &bl->v[bl->n];
  t->sig = malloc((size_t)nsig * sizeof *sig);
  t->src = strdup(src);
  if (!t->sig || !t->src) {
    free(t->sig);
    free(t->src);
    bl->oom = true;
    return;
  }
  memcpy(t->sig, sig, (size_t)nsig * sizeof *sig);
  t->dev = d;
  t->nsig = nsig;
  snprintf(t->name, sizeof t->name, "%s", name);
  t->opts = opts;
  if (nodes) ct__calls(t->calls, sizeof t->calls, nodes, nn);
  else t->calls[0] = '\0';
  bl->n++;
}

static void ct__builds_free(struct ct__builds *bl) {
  for (int i = 0; i < bl->n; i++) {
    free(bl->v[i].sig);
    free(bl->v[i].src);
  }
  free(bl->v);
  *bl = (struct ct__builds){0};
}

/* One attempt at realizing gr (locked). When a program is not built yet, nothing is enqueued:
 * the programs go to *bl and the caller builds them outside the lock and tries again. */
static ct_status ct__realize_once(struct ct__fgraph *gr, const char *fn, struct ct__builds *bl) {
  if (gr->n == 0) return CT_OK;
  size_t n = gr->n;
  struct ct__fnode **v = gr->v;
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
    ct__unschedule(gr);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: realizing deferred elementwise work: out of host memory", fn);
  }
  int nk = 0;
  for (size_t i = 0; i < n; i++) {
    struct ct__fnode *nd = v[i];
    if (!nd->needed) continue;
    int kk = -1;
    if (nd->red >= 0) {
      /* A trailing reduction runs in its producer's kernel, unless that one already has one. */
      struct ct__fnode *p = nd->src[0];
      if (ks[p->kern].red == NULL) {
        kk = p->kern;
      } else {
        p->store = true;
      }
    } else {
      int req = 0;
      for (int j = 0; j < nd->l.nin; j++) {
        struct ct__fnode *p = nd->src[j];
        if (!p) continue;
        bool inl = p->red < 0 && ct__same_key(p, nd) && !(nd->l.op == CT__EW_WHERE && j == 0 && p->odt != CT_BOOL);
        if (!inl && p->kern + 1 > req) req = p->kern + 1;
        if (!inl) p->store = true;
      }
      for (int q = nk - 1; q >= 0; q--)
        if (ks[q].dev == nd->dev && ks[q].k == nd->l.k && ks[q].ndim == nd->ndim &&
            memcmp(ks[q].shape, nd->shape, (size_t)nd->ndim * sizeof *nd->shape) == 0) {
          kk = q >= req ? q : -1;
          break;
        }
    }
    if (kk < 0) {
      kk = nk++;
      ks[kk].dev = nd->dev;
      ks[kk].k = nd->l.k;
      ks[kk].ndim = nd->ndim;
      memcpy(ks[kk].shape, nd->shape, sizeof nd->shape);
      ks[kk].n = nd->n;
    }
    nd->kern = kk;
    if (nd->red >= 0) ks[kk].red = nd;
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
    if (!nd->needed || !nd->store || nd->out || nd->red >= 0) continue;
    st = ct__tensor_new(&nd->tmp, nd->dev, nd->odt, nd->ndim, nd->shape, fn);
    if (st != CT_OK) st = ct__realize_error(st, fn, &nd, 1);
  }
  /* 4. Every kernel built, and the reductions' partials allocated, before anything is enqueued. */
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
    ct__fgen_set(g, q, K);
    /* Reductions use the checked program; plain kernels the unchecked one when they fill a group. */
    bool full = !K->red && (size_t)K->n >= ct__device_group_target(K->dev);
    if (K->red && CT__FR_IS_SOFTMAX(K->red->red)) g->cpu_red = false; /* one layout */
    /* The signature first; the text only for a kernel not built yet. */
    struct ct__buf none = {.skip = true};
    ct__gen_kernel(&none, g, order + K->first, K->count, name, full, K->red);
    ct__kernel **kp = full ? &K->kf : &K->kc;
    b.n = 0;
    b.oom = false;
    if ((K->pin[0] = ct__lru_pin(K->dev, g->sig, g->nsig))) {
      *kp = K->pin[0]->k;
    } else {
      ct__gen_kernel(&b, g, order + K->first, K->count, name, full, K->red);
      if (!b.oom) ct__builds_add(bl, K->dev, g->sig, g->nsig, b.p, name, opts, order + K->first, K->count);
    }
    if (st == CT_OK && !b.oom && K->red && !CT__FR_IS_SOFTMAX(K->red->red)) {
      char fname[32];
      snprintf(fname, sizeof fname, "fz_final_%s", ct__node_name(K->red));
      /* The second pass depends on the reduction, its accumulator and its result dtype. */
      int64_t fsig[5] = {-1, K->red->red, K->red->mean, ct__red_acc_dtype(K->red), K->red->odt};
      if ((K->pin[1] = ct__lru_pin(K->dev, fsig, 5))) {
        K->kfin = K->pin[1]->k;
      } else {
        b.n = 0;
        ct__gen_final(&b, K->red, fname);
        if (!b.oom) ct__builds_add(bl, K->dev, fsig, 5, b.p, fname, opts, order + K->first, K->count);
      }
      if (st == CT_OK && !b.oom && !bl->n) {
        ct__red_split(K, ct__kernel_group_size(K->kc), g->cpu_red);
        int64_t pn = K->parts;
        ct_dtype adt = ct__reduce_acc_dtype(ct__red_acc_dtype(K->red));
        st = ct__tensor_new(&K->part, K->dev, adt, 1, &pn, fn);
      }
    }
    if ((b.oom || bl->oom) && st == CT_OK)
      st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: realizing deferred elementwise work: out of host memory", fn);
    else if (st != CT_OK)
      st = ct__realize_error(st, fn, order + K->first, K->count);
  }
  /* Programs to build: nothing enqueued, the caller builds them and starts again. */
  bool again = st == CT_OK && bl->n > 0;
  /* 5. Enqueue, in order. A launch failing leaves every node pending: running a kernel again
   * only recomputes the same values (kernels read leaves, which no node writes). */
  for (int q = 0; q < nk && st == CT_OK && !again; q++) {
    struct ct__fkern *K = &ks[q];
    ct__fgen_set(g, q, K);
    char name[96];
    ct__kernel_name_of(name, sizeof name, order + K->first, K->count);
    /* The operand table again (what the last generated kernel left is another kernel's). */
    struct ct__buf none = {.skip = true};
    if (K->red && CT__FR_IS_SOFTMAX(K->red->red)) g->cpu_red = false;
    ct__gen_kernel(&none, g, order + K->first, K->count, name, K->kf != NULL, K->red);
    if (ct__debug()) {
      char calls[768];
      ct__calls(calls, sizeof calls, order + K->first, K->count);
      fprintf(stderr, "cltensor fusion: %s (%s) covers %s\n", name, fn, calls);
    }
    atomic_fetch_add(&ct__fstats.kernels, 1);
    if (K->red && CT__FR_IS_SOFTMAX(K->red->red)) {
      st = ct__launch_softmax(K, g, fn);
    } else if (K->red) {
      st = ct__launch_reduce(K, g, fn);
    } else if (K->kf) {
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
  /* The queue is in order: whoever gets the partials' blocks next is queued after them. */
  for (int q = 0; q < nk; q++) {
    ct_release(ks[q].part);
    ct__lru_unpin(ks[q].pin[0]);
    ct__lru_unpin(ks[q].pin[1]);
  }
  free(ks);
  free(order);
  if (st != CT_OK || again) {
    ct__unschedule(gr);
    return st;
  }
  /* 6. Done: results are in memory. */
  size_t live = 0, temps = 0;
  for (size_t i = 0; i < n; i++) {
    struct ct__fnode *nd = v[i];
    if (nd->out) atomic_store_explicit(&nd->out->pending, false, memory_order_release);
    live += nd->needed;
    temps += nd->tmp != NULL; /* counted here: a round that went to build allocated them too */
  }
  atomic_fetch_add(&ct__fstats.temps, temps);
  atomic_fetch_add(&ct__fstats.realizes, 1);
  atomic_fetch_add(&ct__fstats.nodes, live);
  atomic_fetch_add(&ct__fstats.dropped, n - live);
  gr->n = 0;
  atomic_store(&gr->count, 0);
  atomic_fetch_sub_explicit(&ct__deferred_nodes, (long)n, memory_order_release);
  for (size_t i = 0; i < n; i++) {
    /* This graph reads its leaves no more: other threads' uses of them need not look here. */
    for (int j = 0; j < 3; j++) {
      void *me = gr;
      if (v[i]->leaf[j]) atomic_compare_exchange_strong(&v[i]->leaf[j]->storage->freaders, &me, NULL);
    }
    ct__node_free(v[i]);
  }
  return CT_OK;
}

/* Realizes gr (locked by this thread): each round that finds programs missing unlocks gr,
 * builds them (or waits for the thread building them) and starts again, since gr may have
 * changed meanwhile (a result released, another thread realizing it). A round builds every
 * program it found missing, so the rounds end. */
static ct_status ct__realize_graph(struct ct__fgraph *gr, const char *fn) {
  ct_status st = CT_OK;
  struct ct__fk *held[64];
  int nheld = 0;
  for (int round = 0;; round++) {
    struct ct__builds bl = {0};
    st = ct__realize_once(gr, fn, &bl);
    /* The programs a round built stay pinned until the next round launched them. */
    for (int i = 0; i < nheld; i++) ct__lru_unpin(held[i]);
    nheld = 0;
    if (st != CT_OK || bl.n == 0) {
      ct__builds_free(&bl);
      break;
    }
    ct__held = NULL;
    pthread_mutex_unlock(&gr->lock);
    for (int i = 0; i < bl.n && st == CT_OK; i++) {
      struct ct__fk *e = NULL;
      st = ct__lru_acquire(&e, bl.v[i].dev, bl.v[i].sig, bl.v[i].nsig, bl.v[i].src, bl.v[i].name, bl.v[i].opts);
      if (st != CT_OK) {
        char prev[1024];
        snprintf(prev, sizeof prev, "%s", ct_last_error());
        st = ct__error(st, "%s: realizing deferred elementwise work failed in the fused kernel of %s: %s", fn,
                       bl.v[i].calls, prev);
      } else if (nheld < (int)(sizeof held / sizeof *held)) {
        held[nheld++] = e;
      } else {
        ct__lru_unpin(e);
      }
    }
    pthread_mutex_lock(&gr->lock);
    ct__held = gr;
    ct__builds_free(&bl);
    if (st != CT_OK) break;
  }
  for (int i = 0; i < nheld; i++) ct__lru_unpin(held[i]);
  return st;
}

/* The realize hook: the calling thread's graph. */
static ct_status ct__realize(const char *fn) {
  if (ct__in_realize || ct__held) return CT_OK;
  struct ct__fgraph *g = ct__mine;
  if (!g || atomic_load(&g->count) == 0) return CT_OK;
  ct__lock(g);
  ct__in_realize = true;
  ct_status st = ct__realize_graph(g, fn);
  ct__in_realize = false;
  ct__unlock(g);
  return st;
}

/* Realizes g, another thread's graph, when a node of it writes or reads s (under g's lock). */
static ct_status ct__realize_other(struct ct__fgraph *g, const ct__storage *s, const char *fn) {
  ct__lock(g);
  ct__in_realize = true;
  ct_status st = ct__touches(g, s) ? ct__realize_graph(g, fn) : CT_OK;
  ct__in_realize = false;
  ct__unlock(g);
  return st;
}

/* The use hook (fusion/hooks.h): before this thread's work reads or writes storage s, what other
 * threads' graphs recorded that writes it (a tensor handed over while pending) or reads it (a
 * write must not overtake their reads) is enqueued, each such graph whole. Independent threads
 * never meet here: their storages name no other graph. */
static ct_status ct__use(void *storage, const char *fn) {
  if (ct__in_realize || ct__held) return CT_OK;
  ct__storage *s = storage;
  struct ct__fgraph *me = ct__mine;
  ct_status st = CT_OK;
  struct ct__fgraph *w = atomic_load_explicit(&s->fwriter, memory_order_acquire);
  if (w && w != me && atomic_load_explicit(&s->pending, memory_order_acquire)) st = ct__realize_other(w, s, fn);
  void *r = atomic_load_explicit(&s->freaders, memory_order_acquire);
  if (st != CT_OK || !r || r == (void *)me) return st;
  if (r != CT__FREADERS_MANY) {
    st = ct__realize_other(r, s, fn);
  } else {
    /* Several graphs: every other one (graphs are never freed, so the list can be walked
     * without the registry lock once read: a graph added later did not exist at the call). */
    pthread_mutex_lock(&R.lock);
    struct ct__fgraph *head = R.head;
    pthread_mutex_unlock(&R.lock);
    for (struct ct__fgraph *g = head; g && st == CT_OK; g = g->next)
      if (g != me && atomic_load(&g->count) > 0) st = ct__realize_other(g, s, fn);
  }
  if (st != CT_OK) return st;
  /* No other graph reads s now: the hint names this thread's graph when it reads s, else none. */
  bool mine = false;
  if (me) {
    ct__lock(me);
    mine = ct__touches(me, s);
    ct__unlock(me);
  }
  atomic_compare_exchange_strong(&s->freaders, &r, mine ? (void *)me : NULL);
  return CT_OK;
}

/* The pthread key's destructor: a thread's recorded work is enqueued when it exits (what
 * fails stays pending, for a thread that uses its tensors to report), and its graph is left for
 * a later thread. */
static void ct__realize_at_exit(void *p) {
  struct ct__fgraph *g = p;
  if (atomic_load(&g->count) > 0) {
    ct__lock(g);
    ct__in_realize = true;
    (void)ct__realize_graph(g, "thread exit");
    ct__in_realize = false;
    ct__unlock(g);
  }
  pthread_mutex_lock(&R.lock);
  g->owned = false;
  pthread_mutex_unlock(&R.lock);
  ct__mine = NULL;
}

static void ct__drop_graph(struct ct__fgraph *g) {
  ct__lock(g);
  size_t n = g->n;
  for (size_t i = 0; i < n; i++)
    if (g->v[i]->out) atomic_store_explicit(&g->v[i]->out->pending, false, memory_order_release);
  for (size_t i = 0; i < n; i++) ct__node_free(g->v[i]);
  g->n = 0;
  atomic_store(&g->count, 0);
  atomic_fetch_sub_explicit(&ct__deferred_nodes, (long)n, memory_order_release);
  ct__unlock(g);
}

/* ct_shutdown: every thread's graph (the library is used by no other thread then). */
static void ct__drop(void) {
  pthread_mutex_lock(&R.lock);
  struct ct__fgraph *head = R.head;
  pthread_mutex_unlock(&R.lock);
  for (struct ct__fgraph *g = head; g; g = g->next) ct__drop_graph(g);
  pthread_mutex_lock(&L.lock);
  ct__lru_clear();
  L.gen = ct__device_generation() + 1; /* ct_shutdown() bumps it after this */
  pthread_mutex_unlock(&L.lock);
}

/* What the layers below reach of the graph (fusion/hooks.h). */
const struct ct__fusion_hooks ct__fusion_graph_hooks = {
    .realize = ct__realize,
    .use = ct__use,
    .storage_dead = ct__storage_dead,
    .drop = ct__drop,
    .elementwise = ct__defer_ew,
    .reduce = ct__defer_reduce,
    .cast = ct__defer_cast,
    .softmax = ct__defer_softmax,
};
