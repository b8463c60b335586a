/* ct_module_to and ct_module_to_dtype: every parameter and buffer to another device or floating
 * dtype, parameters staying leaves.
 *
 * ct_to_device (or ct_cast) of a parameter records an op (the gradient flows back to the
 * original), which is what an op should do and what a model conversion must not: the optimizer
 * needs leaves. So each tensor is converted with grad mode off (a plain tensor), then marked as
 * its original was, and its gradient is converted with it. Every conversion is made before the
 * first replacement, so a failure leaves the module as it was. */
#include <stdlib.h>

#include "cltensor/autograd.h"
#include "core/error.h"
#include "module/module.h"
#include "tensor/tensor.h"

/* Where a conversion goes: a device (d not NULL) or a floating dtype (d NULL). */
typedef struct target {
  ct_device *d;
  ct_dtype dt;
} target;

/* *out, t converted as a plain tensor (a new reference to t itself when nothing changes). */
static ct_status convert(ct_tensor **out, ct_tensor *t, const target *to) {
  if (to->d) return t->storage->device == to->d ? (*out = ct_retain(t), CT_OK) : ct_to_device(out, t, to->d);
  /* model.to(dtype) casts floating tensors only: integer buffers (num_batches_tracked) stay. */
  if (t->dtype == to->dt || !ct_dtype_is_floating_point(t->dtype)) return *out = ct_retain(t), CT_OK;
  return ct_cast(out, t, to->dt);
}

/* *out, t converted and marked as t is, with t's gradient converted too. */
static ct_status convert_one(ct_tensor **out, ct_tensor *t, const target *to) {
  ct_tensor *c = NULL, *g = NULL;
  *out = NULL;
  ct_status st = convert(&c, t, to); /* grad mode is off: nothing recorded */
  if (st == CT_OK && c == t) return *out = c, CT_OK;
  if (st == CT_OK && t->grad) st = convert(&g, t->grad, to);
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

/* Converts every tensor of m (each once, shared ones staying shared) or nothing. */
static ct_status convert_all(ct_module *m, const target *to, const char *fn) {
  ct__entries e;
  ct_tensor **out = NULL;
  ct_status st = ct__module_entries(&e, m, true, false, fn);
  if (st == CT_OK && e.n > 0 && !(out = calloc((size_t)e.n, sizeof *out)))
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory for the converted tensors' list", fn);
  bool prev = ct_set_grad_enabled(false);
  for (int i = 0; i < e.n && st == CT_OK; i++) st = convert_one(&out[i], e.ts[i], to);
  ct_set_grad_enabled(prev);
  if (st == CT_OK) replace(m, e.ts, out, e.n);
  else ct__error_append(" (%s)", fn);
  for (int i = 0; out && i < e.n; i++) ct_release(out[i]);
  free(out);
  ct__entries_free(&e);
  return st;
}

ct_status ct_module_to(ct_module *m, ct_device *d) {
  static const char fn[] = "ct_module_to";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, d);
  return convert_all(m, &(target){.d = d}, fn);
}

ct_status ct_module_to_dtype(ct_module *m, ct_dtype dt) {
  static const char fn[] = "ct_module_to_dtype";
  CT__CHECK_NOT_NULL(fn, m);
  if (!ct_dtype_is_floating_point(dt))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: dtype %d (%s) is not a floating dtype: a module converts to f16, bf16, f32 or f64 "
                     "(integer parameters and buffers keep their dtype)",
                     fn, (int)dt, ct_dtype_name(dt));
  return convert_all(m, &(target){.dt = dt}, fn);
}
