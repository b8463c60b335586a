/* The module tree (include/cltensor/module.h): lifetime, registration of parameters, buffers
 * and children under PyTorch's naming rules, lookups by dotted path, the training flag, the
 * state_dict-ordered walk and the lists built on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/autograd.h"
#include "core/error.h"
#include "module/module.h"
#include "tensor/tensor.h"

/* The longest state_dict name the walk composes (PyTorch has no limit; real models stay far
 * below). */
enum { PATH_CAP = 4096 };

ct_status ct__module_new(ct_module **out, const ct__module_kind *kind, const char *fn) {
  *out = NULL;
  ct_module *m = calloc(1, sizeof *m);
  if (!m) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory for a module", fn);
  atomic_init(&m->refs, 1);
  m->kind = kind;
  m->training = true;
  *out = m;
  return CT_OK;
}

ct_status ct__module_device(ct_device **d, ct_device *given, const char *fn) {
  *d = given;
  if (given) return CT_OK;
  ct_status st = ct_device_default(d);
  if (st != CT_OK) ct__error_append(" (%s: no device given, none by default)", fn);
  return st;
}

ct_status ct__module_done(ct_module **out, ct_module *m, ct_status st) {
  if (st != CT_OK) {
    ct_module_release(m);
    m = NULL;
  }
  *out = m;
  return st;
}

ct_module *ct_module_retain(ct_module *m) {
  if (m) atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
  return m;
}

static void free_entries(ct__module_entry *e, int n) {
  for (int i = 0; i < n; i++) {
    free(e[i].name);
    ct_release(e[i].t);
  }
  free(e);
}

void ct_module_release(ct_module *m) {
  if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
  if (m->destroy) m->destroy(m->user);
  free_entries(m->params, m->nparams);
  free_entries(m->buffers, m->nbuffers);
  for (int i = 0; i < m->nchildren; i++) {
    free(m->children[i].name);
    ct_module_release(m->children[i].m);
  }
  free(m->children);
  free(m->type_name);
  free(m->names);
  free(m->report);
  free(m);
}

const char *ct_module_type_name(const ct_module *m) {
  if (!m) return "";
  return m->type_name ? m->type_name : m->kind->name;
}

void *ct_module_user_data(const ct_module *m) { return m ? m->user : NULL; }

/* ---- Registration ---- */

static bool taken(const ct_module *m, const char *name) {
  for (int i = 0; i < m->nparams; i++)
    if (!strcmp(m->params[i].name, name)) return true;
  for (int i = 0; i < m->nbuffers; i++)
    if (!strcmp(m->buffers[i].name, name)) return true;
  for (int i = 0; i < m->nchildren; i++)
    if (!strcmp(m->children[i].name, name)) return true;
  return false;
}

/* PyTorch's register_* rules: a non-empty name without '.', not yet an attribute of m. */
static ct_status check_name(const ct_module *m, const char *name, const char *fn) {
  if (!name || !*name) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the name is NULL or empty", fn);
  if (strchr(name, '.'))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: name \"%.200s\" contains '.' (names join with dots)", fn, name);
  if (taken(m, name))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s already has an attribute \"%.200s\"", fn,
                     ct_module_type_name(m), name);
  return CT_OK;
}

/* Makes room for one more element in *arr (of size each) holding *n of *cap. */
static bool grow(void **arr, int *cap, int n, size_t size) {
  if (n < *cap) return true;
  int c = *cap ? 2 * *cap : 4;
  void *p = realloc(*arr, (size_t)c * size);
  if (!p) return false;
  *arr = p;
  *cap = c;
  return true;
}

static ct_status add_entry(ct_module *m, bool param, const char *name, ct_tensor *t, const char *fn) {
  ct_status st = check_name(m, name, fn);
  if (st != CT_OK) {
    ct_release(t);
    return st;
  }
  ct__module_entry **arr = param ? &m->params : &m->buffers;
  int *n = param ? &m->nparams : &m->nbuffers, *cap = param ? &m->cap_params : &m->cap_buffers;
  char *copy = strdup(name);
  if (!copy || !grow((void **)arr, cap, *n, sizeof **arr)) {
    free(copy);
    ct_release(t);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory to register \"%.200s\"", fn, name);
  }
  (*arr)[(*n)++] = (ct__module_entry){.name = copy, .t = t};
  return CT_OK;
}

ct_status ct__module_own_param(ct_module *m, const char *name, ct_tensor *t, const char *fn) {
  ct_status st = ct_set_requires_grad(t, true);
  if (st != CT_OK) {
    ct_release(t);
    return st;
  }
  return add_entry(m, true, name, t, fn);
}

ct_status ct__module_own_buffer(ct_module *m, const char *name, ct_tensor *t, const char *fn) {
  return add_entry(m, false, name, t, fn);
}

ct_status ct_module_add_parameter(ct_module *m, const char *name, ct_tensor *t) {
  static const char fn[] = "ct_module_add_parameter";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, t);
  CT__TRY(check_name(m, name, fn));
  if (!ct_dtype_is_floating_point(t->dtype))
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: \"%.200s\" has dtype %s; a parameter must be floating", fn, name,
                     ct_dtype_name(t->dtype));
  if (!ct_is_leaf(t))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: \"%.200s\" is the result of a recorded op, not a leaf (ct_detach it first)", fn, name);
  return ct__module_own_param(m, name, ct_retain(t), fn);
}

ct_status ct_module_add_buffer(ct_module *m, const char *name, ct_tensor *t) {
  static const char fn[] = "ct_module_add_buffer";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, t);
  CT__TRY(check_name(m, name, fn));
  if (ct_requires_grad(t))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: \"%.200s\" requires grad; a buffer is not trained", fn, name);
  return add_entry(m, false, name, ct_retain(t), fn);
}

/* Whether m is child or somewhere under it. */
static bool contains(const ct_module *child, const ct_module *m) {
  if (child == m) return true;
  for (int i = 0; i < child->nchildren; i++)
    if (contains(child->children[i].m, m)) return true;
  return false;
}

ct_status ct_module_add_child(ct_module *m, const char *name, ct_module *child) {
  static const char fn[] = "ct_module_add_child";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, child);
  CT__TRY(check_name(m, name, fn));
  if (contains(child, m))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: adding \"%.200s\" (%s) would make a cycle: it is or contains %s",
                     fn, name, ct_module_type_name(child), ct_module_type_name(m));
  char *copy = strdup(name);
  if (!copy || !grow((void **)&m->children, &m->cap_children, m->nchildren, sizeof *m->children)) {
    free(copy);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory to add \"%.200s\"", fn, name);
  }
  m->children[m->nchildren++] = (ct__module_child){.name = copy, .m = ct_module_retain(child)};
  return CT_OK;
}

/* ---- Lookups ---- */

ct_tensor *ct__module_param(const ct_module *m, const char *name) {
  for (int i = 0; i < m->nparams; i++)
    if (!strcmp(m->params[i].name, name)) return m->params[i].t;
  return NULL;
}

ct_tensor *ct__module_buffer(const ct_module *m, const char *name) {
  for (int i = 0; i < m->nbuffers; i++)
    if (!strcmp(m->buffers[i].name, name)) return m->buffers[i].t;
  return NULL;
}

/* Follows path's components but the last through children; *last the final component. */
static const ct_module *follow(const ct_module *m, const char *path, bool all, const char **last, const char *fn) {
  if (!m || !path) {
    ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, m ? "path" : "m");
    return NULL;
  }
  const char *p = path;
  for (;;) {
    const char *dot = strchr(p, '.');
    if (!dot && !all) {
      *last = p;
      return m;
    }
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    const ct_module *next = NULL;
    for (int i = 0; i < m->nchildren && !next; i++)
      if (strlen(m->children[i].name) == len && !strncmp(m->children[i].name, p, len)) next = m->children[i].m;
    if (!next) {
      ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s has no submodule \"%.*s\" (path \"%.200s\")", fn,
                ct_module_type_name(m), (int)(len > 200 ? 200 : len), p, path);
      return NULL;
    }
    m = next;
    if (!dot) {
      *last = NULL;
      return m;
    }
    p = dot + 1;
  }
}

ct_module *ct_module_get_submodule(const ct_module *m, const char *path) {
  const char *last;
  if (path && !*path) return (ct_module *)m; /* PyTorch: get_submodule("") is the module itself */
  return (ct_module *)follow(m, path, true, &last, "ct_module_get_submodule");
}

static ct_tensor *get_entry(const ct_module *m, const char *path, bool param, const char *fn) {
  const char *last;
  const ct_module *owner = follow(m, path, false, &last, fn);
  if (!owner) return NULL;
  ct_tensor *t = param ? ct__module_param(owner, last) : ct__module_buffer(owner, last);
  if (!t)
    ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s has no %s \"%.200s\" (path \"%.200s\")", fn,
              ct_module_type_name(owner), param ? "parameter" : "buffer", last, path);
  return t;
}

ct_tensor *ct_module_get_parameter(const ct_module *m, const char *path) {
  return get_entry(m, path, true, "ct_module_get_parameter");
}

ct_tensor *ct_module_get_buffer(const ct_module *m, const char *path) {
  return get_entry(m, path, false, "ct_module_get_buffer");
}

/* ---- Training flag ---- */

ct_status ct_module_train(ct_module *m, bool mode) {
  CT__CHECK_NOT_NULL("ct_module_train", m);
  m->training = mode;
  for (int i = 0; i < m->nchildren; i++) ct_module_train(m->children[i].m, mode);
  return CT_OK;
}

ct_status ct_module_eval(ct_module *m) {
  CT__CHECK_NOT_NULL("ct_module_eval", m);
  return ct_module_train(m, false);
}

bool ct_module_is_training(const ct_module *m) { return m && m->training; }

/* ---- The walk ---- */

struct walk {
  bool params, buffers, dedup;
  ct__module_visit visit;
  void *ctx;
  char path[PATH_CAP];
  ct_tensor **seen; /* dedup: the tensors visited so far */
  int nseen, cap_seen;
};

static ct_status walk_entries(struct walk *w, size_t len, const ct__module_entry *e, int n, bool is_param) {
  for (int i = 0; i < n; i++) {
    if (w->dedup) {
      bool dup = false;
      for (int j = 0; j < w->nseen && !dup; j++) dup = w->seen[j] == e[i].t;
      if (dup) continue;
      if (!grow((void **)&w->seen, &w->cap_seen, w->nseen, sizeof *w->seen))
        return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_module: no host memory for the walk");
      w->seen[w->nseen++] = e[i].t;
    }
    size_t nl = strlen(e[i].name);
    if (len + nl + 1 > sizeof w->path)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_module: a state_dict name is longer than %d bytes", PATH_CAP - 1);
    memcpy(w->path + len, e[i].name, nl + 1);
    CT__TRY(w->visit(w->ctx, w->path, e[i].t, is_param));
  }
  return CT_OK;
}

/* w->path[0..len) is m's prefix ("" or "features.0."). */
static ct_status walk(struct walk *w, const ct_module *m, size_t len) {
  if (w->params) CT__TRY(walk_entries(w, len, m->params, m->nparams, true));
  if (w->buffers) CT__TRY(walk_entries(w, len, m->buffers, m->nbuffers, false));
  for (int i = 0; i < m->nchildren; i++) {
    size_t nl = strlen(m->children[i].name);
    if (len + nl + 2 > sizeof w->path)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_module: a state_dict name is longer than %d bytes", PATH_CAP - 1);
    memcpy(w->path + len, m->children[i].name, nl);
    w->path[len + nl] = '.';
    w->path[len + nl + 1] = 0;
    CT__TRY(walk(w, m->children[i].m, len + nl + 1));
  }
  return CT_OK;
}

ct_status ct__module_walk(const ct_module *m, bool params, bool buffers, bool dedup, ct__module_visit visit,
                          void *ctx) {
  struct walk *w = malloc(sizeof *w);
  if (!w) return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_module: no host memory for the walk");
  *w = (struct walk){.params = params, .buffers = buffers, .dedup = dedup, .visit = visit, .ctx = ctx};
  w->path[0] = 0;
  ct_status st = walk(w, m, 0);
  free(w->seen);
  free(w);
  return st;
}

static ct_status entries_visit(void *ctx, const char *name, ct_tensor *t, bool is_param) {
  (void)is_param;
  ct__entries *e = ctx;
  if (e->n == e->cap) {
    int c = e->cap ? 2 * e->cap : 16;
    ct_tensor **tt = realloc(e->ts, (size_t)c * sizeof *tt);
    if (tt) e->ts = tt;
    char **nn = tt && e->with_names ? realloc(e->names, (size_t)c * sizeof *nn) : NULL;
    if (nn) e->names = nn;
    if (!tt || (e->with_names && !nn))
      return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory for the module's entries", e->fn);
    e->cap = c;
  }
  if (e->with_names && !(e->names[e->n] = strdup(name)))
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory for the module's entry names", e->fn);
  e->ts[e->n++] = t;
  return CT_OK;
}

ct_status ct__module_entries(ct__entries *e, const ct_module *m, bool dedup, bool names, const char *fn) {
  *e = (ct__entries){.with_names = names, .fn = fn};
  return ct__module_walk(m, true, true, dedup, entries_visit, e);
}

void ct__entries_free(ct__entries *e) {
  for (int i = 0; e->names && i < e->n; i++) free(e->names[i]);
  free(e->names);
  free(e->ts);
  *e = (ct__entries){0};
}

/* ---- Lists ---- */

struct list {
  const char **names;
  ct_tensor **ts;
  int cap, n;
  char *arena; /* names, when wanted: NUL-separated */
  size_t arena_len, arena_cap;
  bool want_names;
};

static ct_status list_visit(void *ctx, const char *name, ct_tensor *t, bool is_param) {
  (void)is_param;
  struct list *l = ctx;
  if (l->n < l->cap) l->ts[l->n] = t;
  if (l->want_names) {
    size_t nl = strlen(name) + 1;
    if (l->arena_len + nl > l->arena_cap) {
      size_t c = l->arena_cap ? l->arena_cap * 2 : 256;
      while (c < l->arena_len + nl) c *= 2;
      char *p = realloc(l->arena, c);
      if (!p) return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_module: no host memory for the names");
      l->arena = p;
      l->arena_cap = c;
    }
    memcpy(l->arena + l->arena_len, name, nl);
    l->arena_len += nl;
  }
  l->n++;
  return CT_OK;
}

static ct_status make_list(const char **names, ct_tensor **ts, int cap, int *n, ct_module *m, bool params, bool named,
                           const char *fn) {
  CT__CHECK_NOT_NULL(fn, n);
  *n = 0;
  CT__CHECK_NOT_NULL(fn, m);
  if (cap < 0 || (cap > 0 && (!ts || (named && !names))))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: cap %d with a NULL array", fn, cap);
  struct list l = {.names = names, .ts = ts, .cap = cap, .want_names = named && cap > 0};
  ct_status st = ct__module_walk(m, params, !params, true, list_visit, &l);
  if (st == CT_OK && l.n > cap && cap > 0) {
    free(l.arena);
    *n = l.n;
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: %s has %d %s, room for %d", fn, ct_module_type_name(m), l.n,
                     params ? "parameters" : "buffers", cap);
  }
  if (st != CT_OK) {
    free(l.arena);
    return st;
  }
  if (l.want_names) {
    free(m->names);
    m->names = l.arena;
    const char *p = l.arena;
    for (int i = 0; i < l.n; i++, p += strlen(p) + 1) names[i] = p;
  }
  *n = l.n;
  return CT_OK;
}

ct_status ct_module_parameters(ct_tensor **params, int cap, int *n, const ct_module *m) {
  return make_list(NULL, params, cap, n, (ct_module *)m, true, false, "ct_module_parameters");
}

ct_status ct_module_named_parameters(const char **names, ct_tensor **params, int cap, int *n, ct_module *m) {
  return make_list(names, params, cap, n, m, true, true, "ct_module_named_parameters");
}

ct_status ct_module_named_buffers(const char **names, ct_tensor **buffers, int cap, int *n, ct_module *m) {
  return make_list(names, buffers, cap, n, m, false, true, "ct_module_named_buffers");
}

static ct_status zero_grad_visit(void *ctx, const char *name, ct_tensor *t, bool is_param) {
  (void)ctx;
  (void)name;
  (void)is_param;
  return ct_grad_clear(t);
}

ct_status ct_module_zero_grad(ct_module *m) {
  CT__CHECK_NOT_NULL("ct_module_zero_grad", m);
  return ct__module_walk(m, true, false, true, zero_grad_visit, NULL);
}
