/* Scheduling the fusion graph (issue #16; its own file since issue #29): which recorded nodes
 * are computed, which kernel computes each, and which values go through memory. Pure: it reads
 * and marks the nodes, allocates and enqueues nothing (realize.c does, from its answer).
 *
 *   1. A node is needed when its result's storage is still alive (someone can read it) or a
 *      needed node consumes it; the others are dropped. A result released before the realize
 *      is never written.
 *   2. Needed nodes are grouped into kernels in call order. A kernel computes nodes of one
 *      device, one compute dtype and one shape (leading 1s aside): every node's value is then
 *      the value at the work-item's own index, so a node consumed in its kernel is a private
 *      variable, and shared subexpressions are computed once. A node joins the newest kernel of
 *      its key unless it consumes a node of another key launched after it; an edge between
 *      kernels goes through memory (the producer's result, or a temporary when that result was
 *      released: store is set). A trailing reduction or softmax joins its producer's kernel
 *      (one per kernel: a second one reads the value from memory). */
#include <stdbool.h>
#include <string.h>

#include "fusion/fusion.h"

static bool ct__same_key(const struct ct__fnode *a, const struct ct__fnode *b) {
  return a->dev == b->dev && a->l.k == b->l.k && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
}

int ct__schedule(struct ct__fnode **v, size_t n, struct ct__fkern *ks, struct ct__fnode **order) {
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
  return nk;
}

void ct__unschedule(struct ct__fnode **v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    struct ct__fnode *nd = v[i];
    ct_release(nd->tmp);
    nd->tmp = NULL;
    nd->needed = nd->store = false;
    nd->kern = -1;
  }
}
