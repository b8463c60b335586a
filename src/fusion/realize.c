/* Realizing a thread's fusion graph (issue #16; its own file since issue #29): the schedule
 * (schedule.c), the temporaries, every kernel built (codegen.c's source, the table of built
 * kernels of cache.c) and every temporary allocated before anything is enqueued, so that an
 * error there leaves every node pending and nothing half-written; then the launches (launch.c)
 * in order, and the nodes freed. A program missing from the table is built with the graph
 * unlocked (no program is built under any lock, issue #28), and the realize starts again.
 * Errors name the call that triggered the realize and the recorded calls of the failing
 * kernel. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "elementwise/elementwise.h"
#include "fusion/fusion.h"
#include "fusion/hooks.h"
#include "kernel/engine.h"
#include "tensor/tensor.h"

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
  /* 1, 2. What is needed, which kernel computes what (schedule.c). */
  struct ct__fkern *ks = calloc(n, sizeof *ks);
  struct ct__fnode **order = malloc(n * sizeof *order);
  if (!ks || !order) {
    free(ks);
    free(order);
    ct__unschedule(gr->v, gr->n);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: realizing deferred elementwise work: out of host memory", fn);
  }
  int nk = ct__schedule(v, n, ks, order);
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
    b.t.len = 0;
    b.t.oom = false;
    if ((K->pin[0] = ct__lru_pin(K->dev, g->sig, g->nsig))) {
      *kp = K->pin[0]->k;
    } else {
      ct__gen_kernel(&b, g, order + K->first, K->count, name, full, K->red);
      if (!b.t.oom) ct__builds_add(bl, K->dev, g->sig, g->nsig, b.t.s, name, opts, order + K->first, K->count);
    }
    if (st == CT_OK && !b.t.oom && K->red && !CT__FR_IS_SOFTMAX(K->red->red)) {
      char fname[32];
      snprintf(fname, sizeof fname, "fz_final_%s", ct__node_name(K->red));
      /* The second pass depends on the reduction, its accumulator and its result dtype. */
      int64_t fsig[5] = {-1, K->red->red, K->red->mean, ct__red_acc_dtype(K->red), K->red->odt};
      if ((K->pin[1] = ct__lru_pin(K->dev, fsig, 5))) {
        K->kfin = K->pin[1]->k;
      } else {
        b.t.len = 0;
        ct__gen_final(&b, K->red, fname);
        if (!b.t.oom) ct__builds_add(bl, K->dev, fsig, 5, b.t.s, fname, opts, order + K->first, K->count);
      }
      if (st == CT_OK && !b.t.oom && !bl->n) {
        ct__red_split(K, ct__kernel_group_size(K->kc), g->cpu_red);
        int64_t pn = K->parts;
        ct_dtype adt = ct__reduce_acc_dtype(ct__red_acc_dtype(K->red));
        st = ct__tensor_new(&K->part, K->dev, adt, 1, &pn, fn);
      }
    }
    if ((b.t.oom || bl->oom) && st == CT_OK)
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
    if (ct__fusion_debug()) {
      char calls[768];
      ct__calls(calls, sizeof calls, order + K->first, K->count);
      fprintf(stderr, "cltensor fusion: %s (%s) covers %s\n", name, fn, calls);
    }
    st = ct__fusion_launch(K, g, fn);
    if (st != CT_OK) st = ct__realize_error(st, fn, order + K->first, K->count);
  }
  free(b.t.s);
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
    ct__unschedule(gr->v, gr->n);
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
    ct__fnode_free(v[i]);
  }
  return CT_OK;
}

/* Realizes gr (locked by this thread): each round that finds programs missing unlocks gr,
 * builds them (or waits for the thread building them) and starts again, since gr may have
 * changed meanwhile (a result released, another thread realizing it). A round builds every
 * program it found missing, so the rounds end. */
ct_status ct__realize_graph(struct ct__fgraph *gr, const char *fn) {
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
    ct__fgraph_unlock(gr);
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
    ct__fgraph_lock(gr);
    ct__builds_free(&bl);
    if (st != CT_OK) break;
  }
  for (int i = 0; i < nheld; i++) ct__lru_unpin(held[i]);
  return st;
}
