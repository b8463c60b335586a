/* The backward engine and the public autograd API (include/cltensor/autograd.h).
 *
 * ct_backward runs in three steps, so that a failure changes nothing the user sees:
 *   1. collect: walk the graph from the root (an explicit stack, no recursion), count each
 *      node's consumers, and check every node before computing anything: one already
 *      backpropagated is "the graph a second time"; a saved tensor whose storage version moved
 *      was written in place after it was saved;
 *   2. run: a node runs once all its consumers have given it their gradients (Kahn's order;
 *      among ready nodes the latest-created first, as PyTorch, which frees big late activations
 *      early; a binary heap on the creation number, so a graph N wide costs N log N); its formula (the grad_ops.def row) makes the inputs' gradients, which are summed
 *      back to each input's shape and cast to its dtype, then added into the producer's
 *      pending gradient or, for a leaf, into a pending table; the node's saved tensors are
 *      freed as soon as it ran;
 *   3. commit: the pending leaf gradients go into the leaves (the first one is kept as it is
 *      when nothing else references it, later ones are added in place, as PyTorch's
 *      AccumulateGrad), every allocation first, so that running out of memory there changes
 *      no leaf either. The exception: a leaf with a gradient hook (tensor/graph.h; DDP's
 *      parameters) is committed as soon as the last edge into it ran, and its hook told, so
 *      that communication can overlap the rest of the pass.
 * Whatever happens, every node the pass reached ends "done" with its saved tensors freed: the
 * graph is consumed by one ct_backward, as PyTorch's without retain_graph. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "cltensor/elementwise.h"
#include "cltensor/reduce.h"
#include "cltensor/shape.h"
#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"

static const ct__grad_formula ct__formulas[CT__GOP_COUNT] = {
#define CT__GOP(NAME, formula, rec, check) formula,
#include "fusion/hooks.h"
#include "tensor/grad_ops.def"
#undef CT__GOP
};

/* ---- small public functions ---- */

ct_status ct_set_requires_grad(ct_tensor *t, bool on) {
  CT__CHECK_NOT_NULL("ct_set_requires_grad", t);
  if (t->grad_fn) {
    if (on) return CT_OK;
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "ct_set_requires_grad: only a leaf's flag can be turned off; this tensor is the result of a "
                     "recorded %s (%s): use ct_detach for a copy outside the graph",
                     ct__gop_name(t->grad_fn->op), t->grad_fn->fn);
  }
  if (on && !ct_dtype_is_floating_point(t->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH,
                     "ct_set_requires_grad: only floating tensors can require grad, not %s (as in PyTorch)",
                     ct_dtype_name(t->dtype));
  t->requires_grad = on;
  return CT_OK;
}

bool ct_requires_grad(const ct_tensor *t) { return t && t->requires_grad; }
bool ct_is_leaf(const ct_tensor *t) { return t && !t->grad_fn; }
bool ct_set_grad_enabled(bool on) { return ct__grad_mode_set(on); }
bool ct_is_grad_enabled(void) { return ct__grad_mode(); }

ct_status ct_grad(ct_tensor **out, const ct_tensor *t) {
  CT__CHECK_NOT_NULL("ct_grad", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_grad", t);
  *out = ct_retain(t->grad);
  return CT_OK;
}

ct_status ct_grad_clear(ct_tensor *t) {
  CT__CHECK_NOT_NULL("ct_grad_clear", t);
  ct_tensor *g = t->grad;
  t->grad = NULL;
  ct_release(g);
  return CT_OK;
}

ct_status ct_detach(ct_tensor **out, const ct_tensor *t) {
  CT__TRY(ct__op_begin(out, t, "ct_detach"));
  return ct__tensor_view(out, t, t->ndim, t->shape, t->strides, t->offset);
}

/* ---- helpers formulas share ---- */

ct_status ct__ag_sum_to(ct_tensor **out, const ct_tensor *g, int ndim, const int64_t *shape, const char *fn) {
  *out = NULL;
  char sa[200], sb[200];
  int lead = g->ndim - ndim;
  bool ok = lead >= 0;
  int dims[CT_MAX_DIMS], nd = 0;
  for (int i = 0; ok && i < g->ndim; i++) {
    if (i < lead) {
      dims[nd++] = i;
    } else if (shape[i - lead] != g->shape[i]) {
      ok = shape[i - lead] == 1;
      dims[nd++] = i;
    }
  }
  if (!ok)
    return ct__error(CT_ERR_INTERNAL, "ct_backward: the gradient %s that %s's formula gave does not broadcast from "
                     "the input's shape %s", ct__shape_str(sa, sizeof sa, g->ndim, g->shape), fn,
                     ct__shape_str(sb, sizeof sb, ndim, shape));
  if (nd == 0) {
    *out = ct_retain((ct_tensor *)g);
    return CT_OK;
  }
  ct_tensor *s = NULL;
  CT__TRY(ct_sum(&s, g, nd, dims, false));
  ct_status st = ct_reshape(out, s, ndim, shape);
  ct_release(s);
  return st;
}

ct_status ct__ag_zeros_for(ct_tensor **out, const ct__edge *e) {
  return ct_zeros(out, e->device, e->dtype, e->ndim, e->shape);
}

/* ---- the pass ---- */

struct ct__pending_leaf {
  ct_tensor *leaf;
  ct_tensor *g;
  bool committed; /* early, by ct__hooked_final: g is gone */
};

/* A leaf with a gradient hook (tensor/graph.h, ct__grad_hook) that the pass reaches: how many
 * edges still have to give it their gradient, and whether its hook was told. One reference. */
struct ct__hooked {
  ct_tensor *leaf;
  int remaining;
  bool signalled;
};

struct ct__pass {
  ct__node **nodes; /* every node reached, each once */
  int nnodes, cap;
  struct ct__pending_leaf *leaves;
  int nleaves, leafcap;
  /* The ready nodes, a binary max-heap on seq (issue #28: a list scanned at each pop made a
   * graph N wide cost N^2; 21 s for N = 32,000). Sized to nnodes before the run: every node
   * enters it once, so a push never allocates. */
  ct__node **heap;
  int nheap;
  struct ct__hooked *hooked; /* usually none: only DDP's parameters have hooks */
  int nhooked, hookcap;
};

static ct_status ct__hooked_add(struct ct__pass *p, ct_tensor *leaf) {
  for (int i = 0; i < p->nhooked; i++)
    if (p->hooked[i].leaf == leaf) {
      p->hooked[i].remaining++;
      return CT_OK;
    }
  if (p->nhooked == p->hookcap) {
    int cap = p->hookcap ? 2 * p->hookcap : 16;
    struct ct__hooked *v = realloc(p->hooked, (size_t)cap * sizeof *v);
    if (!v) return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_backward: out of host memory for the gradient hooks");
    p->hooked = v;
    p->hookcap = cap;
  }
  p->hooked[p->nhooked++] = (struct ct__hooked){ct_retain(leaf), 1, false};
  return CT_OK;
}

static ct_status ct__pass_push(struct ct__pass *p, ct__node *n) {
  if (p->nnodes == p->cap) {
    int cap = p->cap ? 2 * p->cap : 64;
    ct__node **v = realloc(p->nodes, (size_t)cap * sizeof *v);
    if (!v) return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_backward: out of host memory walking the graph");
    p->nodes = v;
    p->cap = cap;
  }
  p->nodes[p->nnodes++] = n;
  return CT_OK;
}

/* Step 1. deps counts the consumers inside this graph; n->gacc is NULL on entry. The nodes are
 * appended in discovery order; p->nodes doubles as the DFS stack (index `next`). */
static ct_status ct__collect(struct ct__pass *p, ct__node *root) {
  char sb[200];
  CT__TRY(ct__pass_push(p, root));
  root->deps = 0;
  root->next_ready = root; /* "visited" mark during collection; cleared below */
  for (int next = 0; next < p->nnodes; next++) {
    ct__node *n = p->nodes[next];
    for (int i = 0; i < n->nin; i++) {
      ct__node *c = n->in[i].fn;
      if (!c) continue;
      if (c->next_ready != c) {
        /* Marked only once pushed: a node marked but left out of p->nodes by a failed push
         * would keep its mark, and a later pass through it would skip it as visited. */
        CT__TRY(ct__pass_push(p, c));
        c->deps = 0;
        c->next_ready = c;
      }
      c->deps++;
    }
  }
  ct_status st = CT_OK;
  for (int k = 0; k < p->nnodes; k++) {
    ct__node *n = p->nodes[k];
    n->next_ready = NULL;
    if (st != CT_OK) continue;
    if (n->done) {
      st = ct__error(CT_ERR_INVALID_ARGUMENT,
                     "ct_backward: trying to backward through the graph a second time: the saved tensors of %s (%s) "
                     "were freed by an earlier ct_backward through it; compute the forward again",
                     ct__gop_name(n->op), n->fn);
      continue;
    }
    for (int s = 0; s < CT__NODE_SAVED && st == CT_OK; s++) {
      const ct_tensor *t = n->saved[s];
      if (t && ct__tensor_version(t) != n->saved_version[s])
        st = ct__error(CT_ERR_INVALID_ARGUMENT,
                       "ct_backward: a tensor that %s (%s) saved for its gradient was modified in place after it was "
                       "saved: %s %s is at version %u, expected version %u; compute it into a new tensor instead",
                       ct__gop_name(n->op), n->fn, ct_dtype_name(t->dtype),
                       ct__shape_str(sb, sizeof sb, t->ndim, t->shape), ct__tensor_version(t), n->saved_version[s]);
    }
    for (int i = 0; i < n->nin && st == CT_OK; i++)
      if (n->in[i].leaf && n->in[i].leaf->grad_hook) st = ct__hooked_add(p, n->in[i].leaf);
  }
  return st;
}

/* *acc += g, as a new tensor (neither is written in place: either may be shared). */
static ct_status ct__acc(ct_tensor **acc, ct_tensor *g) {
  if (!*acc) {
    *acc = g;
    return CT_OK;
  }
  ct_tensor *s = NULL;
  ct_status st = ct_add(&s, *acc, g);
  ct_release(g);
  if (st != CT_OK) return st;
  ct_release(*acc);
  *acc = s;
  return CT_OK;
}

static ct_status ct__acc_leaf(struct ct__pass *p, ct_tensor *leaf, ct_tensor *g) {
  for (int i = 0; i < p->nleaves; i++)
    if (p->leaves[i].leaf == leaf) return ct__acc(&p->leaves[i].g, g);
  if (p->nleaves == p->leafcap) {
    int cap = p->leafcap ? 2 * p->leafcap : 16;
    struct ct__pending_leaf *v = realloc(p->leaves, (size_t)cap * sizeof *v);
    if (!v) {
      ct_release(g);
      return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_backward: out of host memory");
    }
    p->leaves = v;
    p->leafcap = cap;
  }
  p->leaves[p->nleaves++] = (struct ct__pending_leaf){ct_retain(leaf), g, false};
  return CT_OK;
}

/* g as the gradient of edge e: summed back to its shape, cast to its dtype. Consumes g. */
static ct_status ct__fit(ct_tensor **out, ct_tensor *g, const ct__edge *e, const ct__node *n) {
  *out = NULL;
  char sa[200];
  if (g->storage->device != e->device) {
    ct_release(g);
    return ct__error(CT_ERR_INTERNAL, "ct_backward: %s (%s) gave a gradient on another device than its input's",
                     ct__gop_name(n->op), n->fn);
  }
  ct_tensor *s = NULL;
  ct_status st = ct__ag_sum_to(&s, g, e->ndim, e->shape, n->fn);
  ct_release(g);
  if (st != CT_OK) return st;
  if (s->dtype != e->dtype) {
    if (!ct_dtype_is_floating_point(s->dtype)) {
      ct_release(s);
      return ct__error(CT_ERR_INTERNAL, "ct_backward: %s (%s) gave a %s gradient of shape %s", ct__gop_name(n->op),
                       n->fn, ct_dtype_name(s->dtype), ct__shape_str(sa, sizeof sa, e->ndim, e->shape));
    }
    ct_tensor *c = NULL;
    st = ct_cast(&c, s, e->dtype);
    ct_release(s);
    if (st != CT_OK) return st;
    s = c;
  }
  *out = s;
  return CT_OK;
}

/* Whether acc is a gradient nobody else can see: the pass's own fresh, contiguous tensor owning
 * all of its storage (the test ct__commit_prepare keeps a leaf's first gradient on). */
static bool ct__acc_private(const ct_tensor *t) {
  return atomic_load(&t->refs) == 1 && atomic_load(&t->storage->refs) == 1 && t->offset == 0 &&
         ct_tensor_is_contiguous(t) && t->storage->nbytes == ct_tensor_nbytes(t) && !t->grad_fn;
}

/* A slice's gradient is zeros of its input's shape with g in the slice. When the input already
 * has a private accumulated gradient (the second and later pieces of a split or chunk: q, k
 * and v of one projection), g is added into that slice of it in place instead: no full-size
 * zeros and no full-size sum per piece. Returns true when it did (or failed: *st). */
static bool ct__slice_into_acc(struct ct__pass *p, ct__node *n, ct_tensor *g, ct_status *st) {
  const ct__edge *e = &n->in[0];
  if (n->op != CT__GOP_SLICE || n->nin != 1 || !e->needed || !g) return false;
  ct_tensor **slot = NULL;
  if (e->fn) slot = &e->fn->gacc;
  else
    for (int i = 0; i < p->nleaves; i++)
      if (p->leaves[i].leaf == e->leaf) slot = &p->leaves[i].g;
  ct_tensor *acc = slot ? *slot : NULL;
  if (!acc || acc->dtype != e->dtype || g->dtype != e->dtype || !ct__acc_private(acc) ||
      acc->storage->device != g->storage->device)
    return false;
  const ct__rec_slice *r = ct__rec_SLICE(n);
  int d = r->dim;
  int64_t start = r->start, step = r->step, len = n->out_shape[d];
  if (len == 0) return true; /* an empty piece adds nothing */
  ct_tensor *v = NULL;
  *st = ct_slice(&v, acc, d, start, start + (len - 1) * step + 1, step);
  if (*st == CT_OK) *st = ct_add_out(v, v, g);
  ct_release(v);
  return true;
}

/* The ready heap. seq is unique (an atomic counter), so the order is total and the heap pops
 * exactly the node the former scan for the largest seq found: the order formulas run in, and so
 * every accumulation's rounding, is unchanged. */
static void ct__ready_push(struct ct__pass *p, ct__node *n) {
  int i = p->nheap++;
  while (i > 0) {
    int up = (i - 1) / 2;
    if (p->heap[up]->seq >= n->seq) break;
    p->heap[i] = p->heap[up];
    i = up;
  }
  p->heap[i] = n;
}

/* Pops the most recently created ready node (PyTorch's order: later activations, often the
 * big ones, are freed first). */
static ct__node *ct__ready_pop(struct ct__pass *p) {
  ct__node *top = p->heap[0], *last = p->heap[--p->nheap];
  int i = 0, n = p->nheap;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && p->heap[c + 1]->seq > p->heap[c]->seq) c++;
    if (p->heap[c]->seq <= last->seq) break;
    p->heap[i] = p->heap[c];
    i = c;
  }
  if (n > 0) p->heap[i] = last;
  return top;
}

static ct_status ct__hooked_edge_ran(struct ct__pass *p, ct_tensor *leaf);

/* Runs node n on its accumulated gradient. */
static ct_status ct__run_node(struct ct__pass *p, ct__node *n) {
  ct_tensor *g = n->gacc;
  n->gacc = NULL;
  ct_status st = CT_OK;
  ct_tensor *small[8] = {0};
  ct_tensor **gin = n->nin <= 8 ? small : calloc((size_t)n->nin, sizeof *gin);
  if (!gin) st = ct__error(CT_ERR_OUT_OF_MEMORY, "ct_backward: out of host memory");
  if (st == CT_OK && ct__slice_into_acc(p, n, g, &st)) {
    if (st != CT_OK)
      ct__error_append(" (in the backward of %s, recorded by %s)", ct__gop_name(n->op), n->fn);
  } else if (st == CT_OK && g) {
    st = ct__formulas[n->op](n, g, gin);
    if (st != CT_OK)
      ct__error_append(" (in the backward of %s, recorded by %s)", ct__gop_name(n->op), n->fn);
  }
  ct_release(g);
  for (int i = 0; i < n->nin; i++) {
    ct__edge *e = &n->in[i];
    ct_tensor *gi = gin ? gin[i] : NULL;
    if (gi && (!e->needed || st != CT_OK)) {
      ct_release(gi);
      gi = NULL;
    }
    if (gi) {
      ct_tensor *f = NULL;
      st = ct__fit(&f, gi, e, n);
      if (st == CT_OK) st = e->fn ? ct__acc(&e->fn->gacc, f) : ct__acc_leaf(p, e->leaf, f);
    }
    if (e->fn && --e->fn->deps == 0) ct__ready_push(p, e->fn);
    if (e->leaf && e->leaf->grad_hook && st == CT_OK) st = ct__hooked_edge_ran(p, e->leaf);
  }
  if (gin != small) free(gin);
  bool saved = false;
  for (int s = 0; s < CT__NODE_SAVED; s++) saved |= n->saved[s] != NULL;
  ct__node_free_saved(n);
  /* The fusion graph (docs/FUSION.md) holds the formula's inputs, saved activations among
   * them, until it runs: realize now, so that an activation is freed as soon as its backward
   * ran, as without fusion. The formula's own chain still fuses. */
  if (saved && st == CT_OK) st = ct__deferred_realize("ct_backward");
  return st;
}

/* Commit, in two phases so that a failure changes no leaf. Phase 1 makes every allocation:
 * the first gradient a leaf gets is kept as it is when nobody else can see it (a fresh,
 * contiguous tensor owning all of its storage), otherwise copied, since later passes add into
 * leaf->grad in place. Phase 2 allocates nothing: it adds into existing gradients in place (as
 * PyTorch's AccumulateGrad) and hands the prepared tensors over. A leaf whose flag was turned
 * off after the graph was recorded takes nothing (AccumulateGrad skips it too). */
static bool ct__commit_skips(const ct_tensor *leaf) { return !leaf->requires_grad; }

static ct_status ct__commit_prepare(const ct_tensor *leaf, ct_tensor **g) {
  if (leaf->grad || ct__commit_skips(leaf)) return CT_OK;
  ct_tensor *t = *g;
  /* A view covering only part of its storage (cat's formula hands out slices of g) is copied
   * too: kept, it would pin the whole storage for as long as the leaf keeps its gradient. */
  if (ct__acc_private(t)) return CT_OK;
  ct_tensor *c = NULL;
  CT__TRY(ct_clone(&c, t));
  ct_release(t);
  *g = c;
  return CT_OK;
}

static ct_status ct__commit(ct_tensor *leaf, ct_tensor *g) {
  if (ct__commit_skips(leaf)) {
    ct_release(g);
    return CT_OK;
  }
  if (!leaf->grad) {
    leaf->grad = g;
    return CT_OK;
  }
  ct_status st = ct_add_out(leaf->grad, leaf->grad, g);
  ct__tensor_bump_version(leaf->grad);
  ct_release(g);
  return st;
}

/* Tells a hooked leaf's hook that its gradient is final, committing it first. */
static ct_status ct__hooked_final(struct ct__pass *p, struct ct__hooked *h) {
  h->signalled = true;
  ct_status st = CT_OK;
  for (int i = 0; i < p->nleaves; i++) {
    struct ct__pending_leaf *l = &p->leaves[i];
    if (l->leaf != h->leaf || l->committed) continue;
    st = ct__commit_prepare(l->leaf, &l->g);
    if (st == CT_OK) st = ct__commit(l->leaf, l->g);
    else ct_release(l->g);
    l->g = NULL;
    l->committed = true;
    break;
  }
  if (st != CT_OK) return st;
  const ct__grad_hook *hk = h->leaf->grad_hook;
  return hk ? hk->ready(hk->ctx, h->leaf) : CT_OK;
}

/* An edge into a hooked leaf ran: after the last one, the leaf's gradient is final. */
static ct_status ct__hooked_edge_ran(struct ct__pass *p, ct_tensor *leaf) {
  for (int i = 0; i < p->nhooked; i++) {
    struct ct__hooked *h = &p->hooked[i];
    if (h->leaf != leaf) continue;
    if (--h->remaining == 0 && !h->signalled) return ct__hooked_final(p, h);
    return CT_OK;
  }
  return CT_OK;
}

/* The end of a pass for the hooks: leaves not signalled yet (a root that is a leaf) are, when
 * the pass succeeded; then each distinct hook hears the pass's status once. */
static ct_status ct__hooks_end(struct ct__pass *p, ct_status st) {
  for (int i = 0; i < p->nhooked && st == CT_OK; i++)
    if (!p->hooked[i].signalled) st = ct__hooked_final(p, &p->hooked[i]);
  for (int i = 0; i < p->nhooked; i++) {
    const ct__grad_hook *hk = p->hooked[i].leaf->grad_hook;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = p->hooked[j].leaf->grad_hook == hk;
    if (hk && !seen) {
      ct_status e = hk->pass_end(hk->ctx, st);
      if (st == CT_OK) st = e;
    }
  }
  for (int i = 0; i < p->nhooked; i++) ct_release(p->hooked[i].leaf);
  free(p->hooked);
  p->hooked = NULL;
  p->nhooked = 0;
  return st;
}

/* The gradient the pass starts from: grad (converted to root's dtype), or 1. */
static ct_status ct__root_grad(ct_tensor **out, ct_tensor *root, const ct_tensor *grad) {
  char sa[200], sb[200];
  if (!grad) {
    if (ct_numel(root) != 1)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "ct_backward: grad can be implicitly created only for one-element roots; root has shape %s "
                       "(pass grad of that shape)",
                       ct__shape_str(sa, sizeof sa, root->ndim, root->shape));
    return ct_full(out, root->storage->device, root->dtype, root->ndim, root->shape, 1.0);
  }
  CT__TRY(ct__check_same_device("ct_backward", "root", root, "grad", grad));
  if (grad->ndim != root->ndim || memcmp(grad->shape, root->shape, (size_t)root->ndim * sizeof *root->shape))
    return ct__error(CT_ERR_SHAPE_MISMATCH, "ct_backward: grad has shape %s but root has shape %s",
                     ct__shape_str(sa, sizeof sa, grad->ndim, grad->shape),
                     ct__shape_str(sb, sizeof sb, root->ndim, root->shape));
  if (!ct_dtype_is_floating_point(grad->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH, "ct_backward: grad must be floating, not %s", ct_dtype_name(grad->dtype));
  if (grad->dtype == root->dtype) {
    *out = ct_retain((ct_tensor *)grad);
    return CT_OK;
  }
  return ct_cast(out, grad, root->dtype);
}

ct_status ct_backward(ct_tensor *root, const ct_tensor *grad) {
  CT__CHECK_NOT_NULL("ct_backward", root);
  if (!root->requires_grad)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "ct_backward: root does not require grad and has no recorded backward (no input of the ops that "
                     "made it requires grad, or grad mode was off)");
  bool prev = ct__grad_mode_set(false);
  ct_dtype prev_ac = ct__autocast_suspend(); /* formulas run in the forward's dtypes */
  ct_tensor *g0 = NULL;
  ct_status st = ct__root_grad(&g0, root, grad);
  struct ct__pass p = {0};
  if (st == CT_OK && !root->grad_fn) {
    st = ct__acc_leaf(&p, root, g0);
    g0 = NULL;
    if (st == CT_OK && root->grad_hook) st = ct__hooked_add(&p, root);
  } else if (st == CT_OK) {
    ct__node *rn = root->grad_fn;
    ct__node_retain(rn); /* the pass holds the root node even if root is released meanwhile */
    st = ct__collect(&p, rn);
    if (st == CT_OK) {
      p.heap = malloc((size_t)p.nnodes * sizeof *p.heap);
      if (!p.heap) st = ct__error(CT_ERR_OUT_OF_MEMORY, "ct_backward: out of host memory for the ready nodes");
    }
    if (st == CT_OK) {
      rn->gacc = g0;
      g0 = NULL;
      ct__ready_push(&p, rn);
      while (p.nheap > 0 && st == CT_OK) st = ct__run_node(&p, ct__ready_pop(&p));
    }
    /* Consume the whole graph, whatever happened. */
    for (int k = 0; k < p.nnodes; k++) {
      ct__node *n = p.nodes[k];
      ct_release(n->gacc);
      n->gacc = NULL;
      n->next_ready = NULL; /* collect's mark, left when it stopped early */
      if (st == CT_OK || !n->done) ct__node_free_saved(n);
    }
    ct__node_release(rn);
  }
  ct_release(g0);
  for (int i = 0; i < p.nleaves && st == CT_OK; i++)
    if (!p.leaves[i].committed) st = ct__commit_prepare(p.leaves[i].leaf, &p.leaves[i].g);
  for (int i = 0; i < p.nleaves; i++) {
    if (p.leaves[i].committed) continue;
    if (st == CT_OK)
      st = ct__commit(p.leaves[i].leaf, p.leaves[i].g);
    else
      ct_release(p.leaves[i].g);
    p.leaves[i].g = NULL;
    p.leaves[i].committed = true;
  }
  /* The hooks may commit leaves still in the table (a root that is a leaf): after the commit, so
   * the table's leaves are released only then. */
  st = ct__hooks_end(&p, st);
  for (int i = 0; i < p.nleaves; i++) ct_release(p.leaves[i].leaf);
  free(p.leaves);
  free(p.nodes);
  free(p.heap);
  ct__autocast_resume(prev_ac);
  ct__grad_mode_set(prev);
  return st;
}
