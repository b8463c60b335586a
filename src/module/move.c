/* ct_module_to: every parameter and buffer to another device, parameters staying leaves.
 *
 * ct_to_device of a parameter records a copy (the gradient flows back to the original), which
 * is what an op should do and what a model move must not: the optimizer needs leaves. So each
 * tensor is copied with grad mode off (a plain tensor), then marked as its original was, and its
 * gradient moves with it. Every copy is made before the first replacement, so a failure leaves
 * the module as it was. */
#include <stdlib.h>

#include "cltensor/autograd.h"
#include "core/error.h"
#include "module/module.h"
#include "tensor/tensor.h"

/* *out, t on d as a plain tensor marked as t is, with t's gradient moved too. */
static ct_status move_one(ct_tensor **out, ct_tensor *t, ct_device *d) {
  *out = NULL;
  if (t->storage->device == d) {
    *out = ct_retain(t);
    return CT_OK;
  }
  ct_tensor *c = NULL, *g = NULL;
  ct_status st = ct_to_device(&c, t, d); /* grad mode is off: nothing recorded */
  if (st == CT_OK && t->grad) st = ct_to_device(&g, t->grad, d);
  if (st == CT_OK && t->requires_grad) st = ct_set_requires_grad(c, true);
  if (st != CT_OK) {
    ct_release(g);
    ct_release(c);
    return st;
  }
  c->grad = g;
  *out = c;
  return CT_OK;
}

/* Points every entry of m (and its children) that holds from[j] at to[j]. */
static void replace(ct_module *m, ct_tensor *const *from, ct_tensor *const *to, int n) {
  ct__module_entry *lists[2] = {m->params, m->buffers};
  int counts[2] = {m->nparams, m->nbuffers};
  for (int l = 0; l < 2; l++)
    for (int i = 0; i < counts[l]; i++)
      for (int j = 0; j < n; j++)
        if (lists[l][i].t == from[j]) {
          ct_release(lists[l][i].t);
          lists[l][i].t = ct_retain(to[j]);
          break;
        }
  for (int i = 0; i < m->nchildren; i++) replace(m->children[i].m, from, to, n);
}

ct_status ct_module_to(ct_module *m, ct_device *d) {
  static const char fn[] = "ct_module_to";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, d);
  ct__entries e;
  ct_tensor **to = NULL;
  ct_status st = ct__module_entries(&e, m, true, false, fn);
  if (st == CT_OK && e.n > 0 && !(to = calloc((size_t)e.n, sizeof *to)))
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory for the moved tensors' list", fn);
  bool prev = ct_set_grad_enabled(false);
  for (int i = 0; i < e.n && st == CT_OK; i++) st = move_one(&to[i], e.ts[i], d);
  ct_set_grad_enabled(prev);
  if (st == CT_OK) replace(m, e.ts, to, e.n);
  else ct__error_append(" (%s)", fn);
  for (int i = 0; to && i < e.n; i++) ct_release(to[i]);
  free(to);
  ct__entries_free(&e);
  return st;
}
