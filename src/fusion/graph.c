/* The fusion graph (issue #16, docs/FUSION.md): elementwise ops are recorded, not run, and
 * realized as few generated kernels as the graph allows when something needs device memory.
 * This file is the graph itself: the threads' graphs, recording, and the hooks the layers below
 * call (fusion/hooks.h). The rest of src/fusion/: schedule.c (which kernel computes what),
 * codegen.c (a kernel's source), cache.c (the built kernels), launch.c, realize.c (the steps in
 * order, and their errors).
 *
 * Recording. The elementwise hook takes the launch an op would have enqueued (struct
 * ct__ew_launch, after every metadata check, with its result already allocated) and appends a
 * node to the calling thread's graph (struct ct__fgraph, issue #28), in call order. An input
 * that a recorded node writes, read whole (the node's own result tensor), becomes an edge to
 * that node; any other input is a leaf, retained. An input that is some other view of memory a
 * node will write (a slice, a transpose of a pending result) first realizes the graph, then is a
 * leaf. _out forms, which write into memory that recorded nodes may read, never record: they run
 * eagerly (ct__ew_run), after a realize. Through the other hooks three other families record
 * too: ct_cast into floating dtypes (a node whose value is its input loaded as the result
 * dtype), and full reductions and last-dim softmax of a recorded node's result (its kernel's
 * trailing op: red >= 0).
 *
 * Realizing. Anything that enqueues work or reads memory calls ct__deferred_realize()
 * (fusion/hooks.h): every kernel launch, transfer, map, GEMM, wait, interop export. That
 * realizes the calling thread's whole graph (realize.c); another thread's graph is realized when
 * its memory is used (ct__use, through ct__tensor_deferred_use).
 *
 * $CLTENSOR_FUSION=0 turns recording off (every op runs at its call, as before);
 * $CLTENSOR_DEBUG_FUSION=1 prints each generated kernel's source when it is built and the calls
 * each launch covers, on stderr. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "device/device.h"
#include "elementwise/elementwise.h"
#include "fusion/fusion.h"
#include "fusion/hooks.h"
#include "tensor/tensor.h"

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
struct ct__fusion_counters ct__fstats;

void ct__fusion_stats(struct ct__fusion_stats *out) {
#define CT__LOAD(name) out->name = atomic_load(&ct__fstats.name);
  CT__FUSION_COUNTERS(CT__LOAD)
#undef CT__LOAD
  out->pending = (unsigned long)atomic_load(&ct__deferred_nodes);
}
static atomic_int ct__fusion_env = -1; /* -1 unread, 0 off, 1 on, 2 invalid */
static atomic_int ct__fusion_debug_env = -1;

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

bool ct__fusion_debug(void) {
  int e = atomic_load_explicit(&ct__fusion_debug_env, memory_order_relaxed);
  if (e < 0) {
    bool v = false;
    if (ct__env_bool("cltensor", "CLTENSOR_DEBUG_FUSION", false, &v) != CT_OK) v = false;
    e = v;
    atomic_store_explicit(&ct__fusion_debug_env, e, memory_order_relaxed);
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

void ct__fnode_free(struct ct__fnode *nd) {
  for (int j = 0; j < 3; j++) ct_release(nd->leaf[j]);
  ct_release(nd->tmp);
  free(nd);
}

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

void ct__fgraph_lock(struct ct__fgraph *g) {
  pthread_mutex_lock(&g->lock);
  ct__held = g;
}
void ct__fgraph_unlock(struct ct__fgraph *g) {
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
  ct__fgraph_lock(g);
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
    ct__fgraph_unlock(g);
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
  ct__fgraph_unlock(g);
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
  if (g) ct__fgraph_lock(g);
  struct ct__fnode *p = g ? ct__writer(g, x->storage) : NULL;
  if (!p || !ct__reads_whole(x, p) || !ct__room(g)) {
    if (g) ct__fgraph_unlock(g);
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
  ct__fgraph_unlock(g);
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
  if (!ct_dtype_is_floating_point(to)) return false;
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
  /* Into its own dtype, from memory no recorded node writes, a cast is a copy, with nothing to
   * fuse it into: ct_cast's copy path moves the bytes (clEnqueueCopyBuffer where contiguous)
   * rather than a fused program built for it (0.2 s of a new process on PoCL, issue #30). */
  if (dt == x->dtype && !atomic_load_explicit(&x->storage->pending, memory_order_acquire)) return CT_OK;
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

/* The realize hook: the calling thread's graph. */
static ct_status ct__realize(const char *fn) {
  if (ct__in_realize || ct__held) return CT_OK;
  struct ct__fgraph *g = ct__mine;
  if (!g || atomic_load(&g->count) == 0) return CT_OK;
  ct__fgraph_lock(g);
  ct__in_realize = true;
  ct_status st = ct__realize_graph(g, fn);
  ct__in_realize = false;
  ct__fgraph_unlock(g);
  return st;
}

/* Realizes g, another thread's graph, when a node of it writes or reads s (under g's lock). */
static ct_status ct__realize_other(struct ct__fgraph *g, const ct__storage *s, const char *fn) {
  ct__fgraph_lock(g);
  ct__in_realize = true;
  ct_status st = ct__touches(g, s) ? ct__realize_graph(g, fn) : CT_OK;
  ct__in_realize = false;
  ct__fgraph_unlock(g);
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
    ct__fgraph_lock(me);
    mine = ct__touches(me, s);
    ct__fgraph_unlock(me);
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
    ct__fgraph_lock(g);
    ct__in_realize = true;
    (void)ct__realize_graph(g, "thread exit");
    ct__in_realize = false;
    ct__fgraph_unlock(g);
  }
  pthread_mutex_lock(&R.lock);
  g->owned = false;
  pthread_mutex_unlock(&R.lock);
  ct__mine = NULL;
}

static void ct__drop_graph(struct ct__fgraph *g) {
  ct__fgraph_lock(g);
  size_t n = g->n;
  for (size_t i = 0; i < n; i++)
    if (g->v[i]->out) atomic_store_explicit(&g->v[i]->out->pending, false, memory_order_release);
  for (size_t i = 0; i < n; i++) ct__fnode_free(g->v[i]);
  g->n = 0;
  atomic_store(&g->count, 0);
  atomic_fetch_sub_explicit(&ct__deferred_nodes, (long)n, memory_order_release);
  ct__fgraph_unlock(g);
}

/* ct_shutdown: every thread's graph (the library is used by no other thread then). */
static void ct__drop(void) {
  pthread_mutex_lock(&R.lock);
  struct ct__fgraph *head = R.head;
  pthread_mutex_unlock(&R.lock);
  for (struct ct__fgraph *g = head; g; g = g->next) ct__drop_graph(g);
  ct__lru_drop();
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
