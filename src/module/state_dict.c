/* State dicts: a module's parameters and buffers under PyTorch's state_dict names, in and out of
 * safetensors collections and files (include/cltensor/io.h). Loading checks everything before
 * it copies anything, so a strict load that fails leaves the module as it was. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/autograd.h"
#include "core/error.h"
#include "core/text.h"
#include "module/module.h"
#include "tensor/tensor.h"

/* ---- Saving ---- */

static ct_status set_visit(void *ctx, const char *name, ct_tensor *t, bool is_param) {
  (void)is_param;
  return ct_safetensors_set(ctx, name, t);
}

ct_status ct_module_state_dict(ct_safetensors **out, const ct_module *m) {
  static const char fn[] = "ct_module_state_dict";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, m);
  ct_safetensors *st;
  CT__TRY(ct_safetensors_new(&st));
  ct_status s = ct__module_walk(m, true, true, false, set_visit, st);
  if (s != CT_OK) {
    ct_safetensors_free(st);
    return s;
  }
  *out = st;
  return CT_OK;
}

ct_status ct_module_save_state_dict(const ct_module *m, const char *path) {
  static const char fn[] = "ct_module_save_state_dict";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, path);
  ct_safetensors *st;
  CT__TRY(ct_module_state_dict(&st, m));
  ct_status s = ct_safetensors_save(st, path);
  ct_safetensors_free(st);
  return s;
}

/* ---- Loading ---- */

static void add_shape(struct ct__text *t, const ct_tensor *x) {
  ct__text_add(t, "[");
  for (int i = 0; i < x->ndim; i++) ct__text_add(t, "%s%lld", i ? ", " : "", (long long)x->shape[i]);
  ct__text_add(t, "]");
}

/* Which file entry each module entry loads from (-1: none), and the report's lists. */
struct plan {
  long *src;          /* per module entry */
  bool *used;         /* per file entry */
  struct ct__text missing, unexpected, shape, dtype;
  int nmissing, nunexpected, nshape, ndtype, nload;
};

static void plan_free(struct plan *p) {
  free(p->src);
  free(p->used);
  free(p->missing.s);
  free(p->unexpected.s);
  free(p->shape.s);
  free(p->dtype.s);
}

static ct_status make_plan(struct plan *p, const ct__entries *e, const ct_safetensors *st, const char *fn) {
  size_t nf = ct_safetensors_count(st);
  p->src = malloc(((size_t)e->n + 1) * sizeof *p->src);
  p->used = calloc(nf + 1, sizeof *p->used);
  if (!p->src || !p->used) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: no host memory for the plan", fn);
  for (int i = 0; i < e->n; i++) {
    p->src[i] = -1;
    size_t j = 0;
    while (j < nf && strcmp(ct_safetensors_name(st, j), e->names[i]) != 0) j++;
    if (j == nf) {
      ct__text_add(&p->missing, "%s%s", p->nmissing++ ? ", " : "", e->names[i]);
      continue;
    }
    p->used[j] = true;
    ct_tensor *f = NULL;
    CT__TRY(ct_safetensors_at(&f, st, j));
    const ct_tensor *t = e->ts[i];
    bool same_shape = f->ndim == t->ndim;
    for (int k = 0; same_shape && k < t->ndim; k++) same_shape = f->shape[k] == t->shape[k];
    if (!same_shape) {
      ct__text_add(&p->shape, "%s%s (file ", p->nshape++ ? ", " : "", e->names[i]);
      add_shape(&p->shape, f);
      ct__text_add(&p->shape, ", model ");
      add_shape(&p->shape, t);
      ct__text_add(&p->shape, ")");
    } else if (f->dtype != t->dtype) {
      ct__text_add(&p->dtype, "%s%s (file %s, model %s)", p->ndtype++ ? ", " : "", e->names[i], ct_dtype_name(f->dtype),
          ct_dtype_name(t->dtype));
    } else {
      p->src[i] = (long)j;
      p->nload++;
    }
    ct_release(f);
  }
  for (size_t j = 0; j < nf; j++)
    if (!p->used[j]) ct__text_add(&p->unexpected, "%s%s", p->nunexpected++ ? ", " : "", ct_safetensors_name(st, j));
  return CT_OK;
}

static char *report_text(const struct plan *p, int n) {
  struct ct__text r = {0};
  ct__text_add(&r, "loaded %d of %d", p->nload, n);
  if (p->nmissing) ct__text_add(&r, "; missing: %s", p->missing.s);
  if (p->nunexpected) ct__text_add(&r, "; unexpected: %s", p->unexpected.s);
  if (p->nshape) ct__text_add(&r, "; shape mismatch: %s", p->shape.s);
  if (p->ndtype) ct__text_add(&r, "; dtype mismatch: %s", p->dtype.s);
  return r.s;
}

/* dst = src (src moved to dst's device first when it is elsewhere). Grad mode is off. */
static ct_status copy_into(ct_tensor *dst, const ct_safetensors *st, long j) {
  ct_tensor *f = NULL, *moved = NULL;
  CT__TRY(ct_safetensors_at(&f, st, (size_t)j));
  ct_status s = CT_OK;
  if (f->storage->device != dst->storage->device) s = ct_to_device(&moved, f, dst->storage->device);
  if (s == CT_OK) s = ct_copy(dst, moved ? moved : f);
  ct_release(moved);
  ct_release(f);
  return s;
}

ct_status ct__module_load_state(ct_module *m, const ct_safetensors *st, bool strict, bool check_only,
                                const char *fn) {
  ct__entries e;
  struct plan p = {0};
  ct_status s = ct__module_entries(&e, m, false, true, fn);
  if (s == CT_OK) s = make_plan(&p, &e, st, fn);
  if (s == CT_OK) {
    char *report = report_text(&p, e.n);
    bool clean = !p.nmissing && !p.nunexpected && !p.nshape && !p.ndtype;
    if (strict && !clean)
      s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: error(s) loading the state_dict of %s (nothing loaded): %s", fn,
                    ct_module_type_name(m), report ? report : "(no memory for the details)");
    if (check_only) {
      free(report);
    } else {
      free(m->report);
      m->report = report;
    }
    if (s == CT_OK && !check_only) {
      bool prev = ct_set_grad_enabled(false);
      for (int i = 0; i < e.n && s == CT_OK; i++)
        if (p.src[i] >= 0) s = copy_into(e.ts[i], st, p.src[i]);
      ct_set_grad_enabled(prev);
      if (s != CT_OK) ct__error_append(" (%s: copying the values; the module may be partly loaded)", fn);
    }
  }
  plan_free(&p);
  ct__entries_free(&e);
  return s;
}

ct_status ct_module_load_state_dict_from(ct_module *m, const ct_safetensors *st, bool strict) {
  static const char fn[] = "ct_module_load_state_dict";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, st);
  return ct__module_load_state(m, st, strict, false, fn);
}

static ct_status first_device(void *ctx, const char *name, ct_tensor *t, bool is_param) {
  (void)name;
  (void)is_param;
  ct_device **d = ctx;
  if (!*d) *d = t->storage->device;
  return CT_OK;
}

ct_status ct__module_home(ct_device **d, const ct_module *m) {
  *d = NULL;
  CT__TRY(ct__module_walk(m, true, true, false, first_device, d));
  return *d ? CT_OK : ct_device_default(d);
}

ct_status ct_module_load_state_dict(ct_module *m, const char *path, bool strict) {
  static const char fn[] = "ct_module_load_state_dict";
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, path);
  ct_device *d;
  CT__TRY(ct__module_home(&d, m));
  ct_safetensors *st;
  CT__TRY(ct_safetensors_load(&st, path, d));
  ct_status s = ct_module_load_state_dict_from(m, st, strict);
  ct_safetensors_free(st);
  return s;
}

const char *ct_module_load_report(const ct_module *m) { return m && m->report ? m->report : ""; }
