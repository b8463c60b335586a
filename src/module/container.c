/* Running modules: ct_module_forward's dispatch and the modules that are made of other modules
 * (Sequential, and user modules with a C forward callback). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "module/module.h"
#include "tensor/scope.h"

static const char k_prefix[] = "ct_module_forward: ";

/* Prefixes this thread's message with the failing module, once, and returns st: the innermost
 * module that failed writes "ct_module_forward: (Linear): <the op's message>"; each Sequential on
 * the way out puts its child's name in front of the path: "ct_module_forward: 0.2 (Linear): ...".
 * (A user forward calls its children itself, so there only the innermost type shows.) */
static ct_status blame(ct_status st, const ct_module *m, const char *child_name) {
  size_t pl = sizeof k_prefix - 1;
  char *copy = strdup(ct_last_error());
  if (!copy) return st;
  if (strncmp(copy, k_prefix, pl) != 0) {
    ct__error(st, "%s(%s): %s", k_prefix, ct_module_type_name(m), copy);
  } else if (child_name) {
    const char *rest = copy + pl;
    ct__error(st, "%s%s%s%s", k_prefix, child_name, rest[0] == '(' ? " " : ".", rest);
  }
  free(copy);
  return st;
}

ct_status ct_module_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  static const char fn[] = "ct_module_forward";
  CT__CHECK_NOT_NULL(fn, y);
  *y = NULL;
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, x);
  ct_status st;
  if (m->kind->forward) {
    st = m->kind->forward(y, m, x);
  } else {
    st = m->user_forward(y, m, x, m->user);
    /* The callback made *y through a public call (or kept it out of its own scope): a scope
     * open around this call owns it, and this call's wrapper registers it once more as its
     * result. Taken over here, so that the scope releases it once. */
    if (st == CT_OK && *y) ct__scope_adopt(*y);
    if (st == CT_OK && !*y)
      st = ct__error(CT_ERR_INVALID_ARGUMENT, "the forward callback returned CT_OK without a result");
  }
  if (st != CT_OK) {
    ct_release(*y);
    *y = NULL;
    return blame(st, m, NULL);
  }
  return CT_OK;
}

/* ---- Sequential ---- */

static ct_status sequential_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  ct_tensor *cur = ct_retain((ct_tensor *)x);
  for (int i = 0; i < m->nchildren; i++) {
    ct_tensor *next = NULL;
    ct_status st = ct_module_forward(&next, m->children[i].m, cur);
    ct_release(cur);
    if (st != CT_OK) return blame(st, m, m->children[i].name);
    cur = next;
  }
  *y = cur;
  return CT_OK;
}

static const ct__module_kind k_sequential = {"Sequential", sequential_forward};

ct_status ct_module_append(ct_module *seq, ct_module *child) {
  static const char fn[] = "ct_module_append";
  CT__CHECK_NOT_NULL(fn, seq);
  CT__CHECK_NOT_NULL(fn, child);
  if (seq->kind != &k_sequential)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: seq is a %s, not a Sequential", fn, ct_module_type_name(seq));
  char name[16];
  snprintf(name, sizeof name, "%d", seq->nchildren);
  return ct_module_add_child(seq, name, child);
}

ct_status ct_module_sequential(ct_module **out, ct_module *const *mods, int n) {
  static const char fn[] = "ct_module_sequential";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  if (n < 0 || (n > 0 && !mods)) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n = %d with mods %p", fn, n,
                                                  (const void *)mods);
  for (int i = 0; i < n; i++)
    if (!mods[i]) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: mods[%d] is NULL", fn, i);
  ct_module *m;
  CT__TRY(ct__module_new(&m, &k_sequential, fn));
  ct_status st = CT_OK;
  for (int i = 0; i < n && st == CT_OK; i++) st = ct_module_append(m, mods[i]);
  return ct__module_done(out, m, st);
}

/* ---- User modules ---- */

static const ct__module_kind k_custom = {"Module", NULL};

ct_status ct_module_custom(ct_module **out, const char *type_name, ct_module_forward_fn forward, void *user,
                           ct_module_destroy_fn destroy) {
  static const char fn[] = "ct_module_custom";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, forward);
  ct_module *m;
  CT__TRY(ct__module_new(&m, &k_custom, fn));
  if (type_name && !(m->type_name = strdup(type_name))) {
    ct_module_release(m);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory for the type name", fn);
  }
  m->user_forward = forward;
  m->user = user;
  m->destroy = destroy;
  *out = m;
  return CT_OK;
}
