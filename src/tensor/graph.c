/* The recording side of autograd: nodes, grad mode, saved tensors (see graph.h). */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cltensor/autograd.h"
#include "tensor/graph.h"

static const char *const ct__gop_names[CT__GOP_COUNT] = {
#define CT__GOP(NAME, formula, rec, check) #NAME,
#include "tensor/grad_ops.def"
#undef CT__GOP
};

const char *ct__gop_name(ct__gop op) {
  return (unsigned)op < CT__GOP_COUNT ? ct__gop_names[op] : "?";
}

/* ---- grad mode ---- */

static _Thread_local bool ct__grad_off; /* zero-initialised: grad mode on in every thread */
static atomic_uint_fast64_t ct__node_seq;

bool ct__grad_mode(void) { return !ct__grad_off; }

bool ct__grad_mode_set(bool on) {
  bool prev = !ct__grad_off;
  ct__grad_off = !on;
  return prev;
}

bool ct__grad_needed(int nin, const ct_tensor *const *ins) {
  if (ct__grad_off) return false;
  for (int i = 0; i < nin; i++)
    if (ins[i] && ins[i]->requires_grad) return true;
  return false;
}

/* ---- autocast ---- */

static _Thread_local int ct__autocast = -1; /* -1: off (CT_F32) */

ct_dtype ct__autocast_dtype(void) { return ct__autocast < 0 ? CT_F32 : (ct_dtype)ct__autocast; }

ct_status ct_autocast_set_dtype(ct_dtype dt) {
  if (dt != CT_F32 && dt != CT_F16 && dt != CT_BF16)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_autocast_set_dtype: dtype %s is not f16, bf16 or f32 (off)",
                     ct_dtype_name(dt));
  ct__autocast = dt == CT_F32 ? -1 : (int)dt;
  return CT_OK;
}

ct_dtype ct_autocast_get_dtype(void) { return ct__autocast_dtype(); }

ct_dtype ct__autocast_suspend(void) {
  ct_dtype prev = ct__autocast_dtype();
  ct__autocast = -1;
  return prev;
}

void ct__autocast_resume(ct_dtype prev) { ct__autocast = prev == CT_F32 ? -1 : (int)prev; }

ct_status ct__autocast_to(ct_tensor **out, const ct_tensor *x, ct_dtype dt, const char *fn) {
  *out = NULL;
  if (!x || !ct_dtype_is_floating_point(x->dtype) || x->dtype == dt) {
    *out = ct_retain((ct_tensor *)x);
    return CT_OK;
  }
  ct_status st = ct_cast(out, x, dt);
  if (st != CT_OK) ct__error_append(" (autocast to %s in %s)", ct_dtype_name(dt), fn);
  return st;
}

/* ---- nodes ---- */

void ct__node_retain(ct__node *n) {
  if (n) atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
}

void ct__node_free_saved(ct__node *n) {
  for (int i = 0; i < CT__NODE_SAVED; i++) {
    ct_release(n->saved[i]);
    n->saved[i] = NULL;
    if (n->saved_as[i]) *n->saved_as[i] = NULL;
  }
  n->done = true;
}

/* Frees the nodes whose count drops to zero with a worklist (linked through next_ready, which
 * is free once nothing references the node) rather than recursion: a chain of 100000 ops
 * must not need 100000 stack frames. */
void ct__node_release(ct__node *n) {
  if (!n || atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1) return;
  n->next_ready = NULL;
  ct__node *work = n;
  while (work) {
    ct__node *cur = work;
    work = cur->next_ready;
    for (int i = 0; i < CT__NODE_SAVED; i++) ct_release(cur->saved[i]);
    ct_release(cur->gacc);
    for (int i = 0; i < cur->nin; i++) {
      ct_release(cur->in[i].leaf); /* a leaf has no grad_fn: no recursion into nodes */
      ct__node *p = cur->in[i].fn;
      if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
        p->next_ready = work;
        work = p;
      }
    }
    free(cur->in);
    free(cur);
  }
}

ct_status ct__grad_record(ct__node **node, ct_tensor *r, ct__gop op, int sub, int nin, const ct_tensor *const *ins,
                          const char *fn) {
  *node = NULL;
  /* Integer and bool results are never differentiable (argmax, comparisons): no node. */
  if (!ct__grad_needed(nin, ins) || !ct_dtype_is_floating_point(r->dtype)) return CT_OK;
  ct__node *n = calloc(1, sizeof *n);
  ct__edge *in = nin ? calloc((size_t)nin, sizeof *in) : NULL;
  if (!n || (nin && !in)) {
    free(n);
    free(in);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory recording the backward node", fn);
  }
  atomic_init(&n->refs, 1);
  n->op = op;
  n->sub = sub;
  n->fn = fn;
  n->seq = atomic_fetch_add_explicit(&ct__node_seq, 1, memory_order_relaxed);
  n->nin = nin;
  n->in = in;
  n->out_dtype = r->dtype;
  n->out_ndim = r->ndim;
  memcpy(n->out_shape, r->shape, sizeof r->shape);
  for (int i = 0; i < nin; i++) {
    const ct_tensor *t = ins[i];
    if (!t) continue;
    in[i].dtype = t->dtype;
    in[i].ndim = t->ndim;
    memcpy(in[i].shape, t->shape, sizeof t->shape);
    in[i].device = t->storage->device;
    if (!t->requires_grad) continue;
    in[i].needed = true;
    if (t->grad_fn) {
      ct__node_retain(t->grad_fn);
      in[i].fn = t->grad_fn;
    } else {
      in[i].leaf = ct_retain((ct_tensor *)t);
    }
  }
  /* r is new and unshared: nothing else sees these fields yet. */
  ct__node_release(r->grad_fn);
  r->grad_fn = n;
  r->requires_grad = true;
  *node = n;
  return CT_OK;
}

/* Saves t into slot: a detached header over t's storage and its version now. */
static ct_status save_slot(ct__node *n, int slot, const ct_tensor *t) {
  ct_tensor *v = NULL;
  CT__TRY(ct__tensor_view(&v, t, t->ndim, t->shape, t->strides, t->offset));
  ct_release(n->saved[slot]);
  n->saved[slot] = v;
  n->saved_version[slot] = ct__tensor_version(t);
  return CT_OK;
}

ct_status ct__grad_save_as(ct__node *n, const ct_tensor **field, const ct_tensor *t, const char *fn) {
  if (!t) return CT_OK;
  /* The field's slot when it was saved before (saved again: replaced), else the first free. */
  int slot = -1;
  for (int i = 0; i < CT__NODE_SAVED && slot < 0; i++)
    if (n->saved_as[i] == field) slot = i;
  for (int i = 0; i < CT__NODE_SAVED && slot < 0; i++)
    if (!n->saved[i] && !n->saved_as[i]) slot = i;
  if (slot < 0)
    return ct__error(CT_ERR_INTERNAL, "%s: all %d saved-tensor slots of the %s node are taken", fn, CT__NODE_SAVED,
                     ct__gop_name(n->op));
  CT__TRY(save_slot(n, slot, t));
  n->saved_as[slot] = field;
  *field = n->saved[slot];
  return CT_OK;
}

/* ---- the checks writes make ---- */

ct_status ct__grad_check_out(const char *fn, int nin, const ct_tensor *const *ins, const char *const *names) {
  if (ct__grad_off) return CT_OK;
  for (int i = 0; i < nin; i++)
    if (ins[i] && ins[i]->requires_grad)
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: functions with an out argument don't support automatic differentiation, but argument "
                       "'%s' requires grad (use the form that returns a new tensor, or turn grad mode off with "
                       "ct_set_grad_enabled(false))",
                       fn, names ? names[i] : "?");
  return CT_OK;
}

ct_status ct__grad_check_inplace(const char *fn, const ct_tensor *t, const char *name) {
  if (ct__grad_off || !t || !t->requires_grad) return CT_OK;
  return ct__error(CT_ERR_INVALID_ARGUMENT,
                   "%s: argument '%s' requires grad and can't be written in place while grad mode is on (a leaf "
                   "would lose its identity, a recorded result its backward); write it with "
                   "ct_set_grad_enabled(false), as optimizers do, or compute a new tensor",
                   fn, name);
}
