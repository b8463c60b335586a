/* The matmul front end: PyTorch shape rules, dtype handling, operand layouts for BLAS, the
 * per-device GEMM state (route and tuning), and the public ct_matmul/ct_linear/ct_addmm. */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <clblast_c.h>

#include "core/error.h"
#include "kernel/engine.h"
#include "linalg/linalg.h"
#include "tensor/tensor.h"

/* ---- Per-device state ---- */

/* snprintf for messages that may be cut at the buffer's end (paths can be long). */
static void ct__note(char *buf, size_t size, const char *fmt, ...) CT__PRINTF(3, 4);
static void ct__note(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
}

static void ct__gemm_state_destroy(ct_device *d, void *state) {
  (void)d;
  /* CLBlast keeps compiled programs, which hold the device's context, in a process-wide cache:
   * drop them so that ct_shutdown() really releases the context. Its parameter overrides stay. */
  pthread_mutex_lock(&ct__clblast_lock);
  CLBlastClearCache();
  pthread_mutex_unlock(&ct__clblast_lock);
  free(state);
}

static void ct__resolve_route(struct ct__gemm_state *s, const ct_device *d) {
  const char *env = getenv("CLTENSOR_GEMM");
  bool host_ok = ct__gemm_host_available();
  s->route_status = CT_OK;
  s->route = CT__ROUTE_CLBLAST;
  if (!env || !*env || strcasecmp(env, "auto") == 0) {
    if (host_ok && d->props.type == CT_DEVICE_CPU && d->props.host_unified_memory) s->route = CT__ROUTE_HOST;
  } else if (strcasecmp(env, "clblast") == 0) {
    s->route = CT__ROUTE_CLBLAST;
  } else if (strcasecmp(env, "host") == 0) {
    if (!host_ok) {
      s->route_status = CT_ERR_UNSUPPORTED;
      ct__note(s->route_error, sizeof s->route_error,
               "CLTENSOR_GEMM=host, but libcltensor was built without a host BLAS (configure with "
               "-Dhost_blas=enabled and OpenBLAS installed)");
    } else if (!d->props.host_unified_memory) {
      s->route_status = CT_ERR_UNSUPPORTED;
      ct__note(s->route_error, sizeof s->route_error,
               "CLTENSOR_GEMM=host, but %s (%s) has no host-unified memory; use auto or clblast", d->spec,
               d->props.name);
    } else {
      s->route = CT__ROUTE_HOST;
    }
  } else {
    s->route_status = CT_ERR_INVALID_ARGUMENT;
    ct__note(s->route_error, sizeof s->route_error,
             "CLTENSOR_GEMM='%.64s' is not valid: use auto, clblast or host", env);
  }
}

/* Installs one tuning set per precision the device supports. */
static ct_status ct__apply_tuning(struct ct__gemm_state *s, ct_device *d, const ct__gemm_tuning *t) {
  for (int pr = 0; pr < CT__PREC_COUNT; pr++) {
    if (!t->has[pr]) continue;
    if ((pr == CT__PREC_F16 && !d->props.fp16) || (pr == CT__PREC_F64 && !d->props.fp64)) continue;
    CT__TRY(ct__gemm_params_apply(d, ct__prec_bits(pr), &t->p[pr]));
    s->tuned[pr] = true;
    s->params[pr] = t->p[pr];
  }
  return CT_OK;
}

#define CT__TUNING_FILE_MAX (64 * 1024)

/* Reads the stored tuning file; returns true when it was applied, else writes why not. */
static bool ct__load_tuning_file(struct ct__gemm_state *s, ct_device *d, char *note, size_t note_size) {
  char path[4096];
  if (ct__gemm_tuning_path(path, sizeof path, d) != CT_OK) {
    ct__note(note, note_size, "%s", ct_last_error());
    return false;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) ct__note(note, note_size, "no tuning file %s", path);
    else ct__note(note, note_size, "tuning file %s ignored: cannot read it: %s", path, strerror(errno));
    return false;
  }
  char *text = malloc(CT__TUNING_FILE_MAX + 1);
  if (!text) {
    fclose(f);
    ct__note(note, note_size, "tuning file %s ignored: out of host memory", path);
    return false;
  }
  size_t len = fread(text, 1, CT__TUNING_FILE_MAX + 1, f);
  bool read_error = ferror(f) != 0;
  fclose(f);
  bool ok = false;
  if (read_error) {
    ct__note(note, note_size, "tuning file %s ignored: read error", path);
  } else if (len > CT__TUNING_FILE_MAX) {
    ct__note(note, note_size, "tuning file %s ignored: larger than %d bytes", path, CT__TUNING_FILE_MAX);
  } else if (memchr(text, '\0', len)) {
    ct__note(note, note_size, "tuning file %s ignored: malformed: it contains NUL bytes", path);
  } else {
    text[len] = '\0';
    ct__gemm_tuning t;
    char why[512];
    ct_status st = ct__gemm_tuning_parse(&t, text, &d->props, why, sizeof why);
    if (st == CT_ERR_DEVICE_MISMATCH) {
      ct__note(note, note_size, "tuning file %s ignored: it is for another device: %s", path, why);
    } else if (st != CT_OK) {
      ct__note(note, note_size, "tuning file %s ignored: malformed: %s", path, why);
    } else if (ct__apply_tuning(s, d, &t) != CT_OK) {
      ct__note(note, note_size, "tuning file %s ignored: %s", path, ct_last_error());
      memset(s->tuned, 0, sizeof s->tuned);
    } else {
      ct__note(note, note_size, "tuning file %s applied", path);
      ok = true;
    }
  }
  free(text);
  return ok;
}

static void ct__load_tuning(struct ct__gemm_state *s, ct_device *d) {
  char note[900];
  if (ct__load_tuning_file(s, d, note, sizeof note)) {
    s->tuning_source = CT_GEMM_TUNING_FILE;
    ct__note(s->tuning_message, sizeof s->tuning_message, "%s", note);
    return;
  }
  const ct__gemm_tuning *shipped = ct__gemm_shipped_tuning(d);
  if (shipped && ct__apply_tuning(s, d, shipped) == CT_OK) {
    s->tuning_source = CT_GEMM_TUNING_SHIPPED;
    ct__note(s->tuning_message, sizeof s->tuning_message, "%s; libcltensor's shipped parameters for PoCL CPU "
             "devices in use", note);
    return;
  }
  if (shipped) {
    memset(s->tuned, 0, sizeof s->tuned);
    ct__note(s->tuning_message, sizeof s->tuning_message, "%s; the shipped parameters were refused (%s); "
             "CLBlast's built-in parameters in use", note, ct_last_error());
  } else {
    ct__note(s->tuning_message, sizeof s->tuning_message, "%s; CLBlast's built-in parameters in use", note);
  }
  s->tuning_source = CT_GEMM_TUNING_BUILTIN;
}

static ct_status ct__gemm_state_create(void **out, ct_device *d) {
  struct ct__gemm_state *s = calloc(1, sizeof *s);
  if (!s) return ct__error(CT_ERR_OUT_OF_MEMORY, "GEMM state for %s: out of host memory", d->spec);
  /* Tuning problems are recorded for ct_gemm_tuning_status(), not reported as this call's
   * failure: keep the caller's last error as it was. */
  char saved[512];
  snprintf(saved, sizeof saved, "%s", ct_last_error());
  ct__resolve_route(s, d);
  const char *tenv = getenv("CLTENSOR_GEMM_TUNING");
  if (tenv && *tenv && strcasecmp(tenv, "auto") != 0 && strcasecmp(tenv, "builtin") != 0) {
    if (s->route_status == CT_OK) {
      s->route_status = CT_ERR_INVALID_ARGUMENT;
      ct__note(s->route_error, sizeof s->route_error,
               "CLTENSOR_GEMM_TUNING='%.64s' is not valid: use auto or builtin", tenv);
    }
    ct__note(s->tuning_message, sizeof s->tuning_message, "CLTENSOR_GEMM_TUNING='%.64s' is not valid", tenv);
  } else if (tenv && strcasecmp(tenv, "builtin") == 0) {
    ct__note(s->tuning_message, sizeof s->tuning_message,
             "CLTENSOR_GEMM_TUNING=builtin: CLBlast's built-in parameters in use, no tuning file read");
  } else {
    ct__load_tuning(s, d);
  }
  if (saved[0]) ct__error(CT_OK, "%s", saved);
  else ct_clear_error();
  *out = s;
  return CT_OK;
}

ct_status ct__gemm_state(struct ct__gemm_state **out, ct_device *d) {
  return ct__device_slot((void **)out, d, CT__SLOT_GEMM, ct__gemm_state_create, ct__gemm_state_destroy);
}

ct_status ct__gemm_use_params(ct_device *d, enum ct__prec pr, const ct__gemm_params *p) {
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  CT__TRY(ct__gemm_params_apply(d, ct__prec_bits(pr), p));
  s->tuned[pr] = true;
  s->params[pr] = *p;
  return CT_OK;
}

ct_status ct_gemm_route_get(ct_gemm_route *route, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_gemm_route_get", route);
  CT__CHECK_NOT_NULL("ct_gemm_route_get", d);
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  if (s->route_status != CT_OK) return ct__error(s->route_status, "ct_gemm_route_get: %s", s->route_error);
  *route = (ct_gemm_route)s->route;
  return CT_OK;
}

const char *ct_gemm_route_name(ct_gemm_route route) {
  switch (route) {
    case CT_GEMM_ROUTE_CLBLAST: return "clblast";
    case CT_GEMM_ROUTE_HOST: return "host";
    default: return "invalid";
  }
}

ct_status ct_gemm_tuning_status(ct_device *d, ct_gemm_tuning_source *source, const char **message) {
  CT__CHECK_NOT_NULL("ct_gemm_tuning_status", d);
  CT__CHECK_NOT_NULL("ct_gemm_tuning_status", source);
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  *source = s->tuning_source;
  if (message) *message = s->tuning_message;
  return CT_OK;
}

/* ---- Operand layouts ---- */

/* Expresses a strided rows x cols matrix as BLAS does: row-major with a leading dimension, or
 * its transpose. Strides of size-1 dims don't matter. False when neither fits. */
static bool ct__blas_form(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans, int64_t *ld) {
  if (rows <= 1 && cols <= 1) {
    *trans = false;
    *ld = 1;
  } else if (rows <= 1) {
    if (cs < 1) return false;
    *trans = cs != 1;
    *ld = cs == 1 ? cols : cs;
  } else if (cols <= 1) {
    if (rs < 1) return false;
    *trans = rs == 1;
    *ld = rs == 1 ? rows : rs;
  } else if (cs == 1 && rs >= cols) {
    *trans = false;
    *ld = rs;
  } else if (rs == 1 && cs >= rows) {
    *trans = true;
    *ld = cs;
  } else {
    return false;
  }
  return true;
}

/* Element offset of t in its buffer; false when the byte offset is not a whole number of
 * elements (possible for wrapped foreign buffers), which BLAS can't address. */
static bool ct__elem_offset(const ct_tensor *t, int64_t *off) {
  size_t es = ct_dtype_size(t->dtype), bo = ct__tensor_byte_offset(t);
  if (bo % es) return false;
  *off = (int64_t)(bo / es);
  return true;
}

/* Fills x from t: the operand's matrix dims (rows, cols; a 1-D t is a row (left) or column
 * (right) vector) and its strides along the nb broadcast batch dims of shape bs. */
static bool ct__mat_of(struct ct__gemm_mat *x, const ct_tensor *t, bool left, int nb, const int64_t *bs,
                       int64_t rows, int64_t cols) {
  int64_t rs, cs;
  int tb = 0;
  if (t->ndim == 1) {
    rs = left ? 0 : t->strides[0];
    cs = left ? t->strides[0] : 0;
  } else {
    rs = t->strides[t->ndim - 2];
    cs = t->strides[t->ndim - 1];
    tb = t->ndim - 2;
  }
  if (!ct__blas_form(rows, cols, rs, cs, &x->trans, &x->ld)) return false;
  if (!ct__elem_offset(t, &x->off)) return false;
  x->mem = ct__tensor_mem(t);
  for (int i = 0; i < nb; i++) {
    int j = i - (nb - tb);
    x->bstride[i] = (j < 0 || t->shape[j] == 1 || bs[i] == 1) ? 0 : t->strides[j];
  }
  return true;
}

/* Drops size-1 batch dims, merges neighbours that are one dim for all three matrices, and
 * folds a batch of A into its rows when B is shared by every batch: [.., m, k] @ [k, n] becomes
 * one [b*m, k] @ [k, n] product, as PyTorch folds it. */
static void ct__simplify_batch(struct ct__gemm_op *op) {
  struct ct__gemm_mat *ms[3] = {&op->a, &op->b, &op->c};
  int nb = 0;
  for (int i = 0; i < op->nbatch; i++) {
    if (op->bshape[i] == 1) continue;
    op->bshape[nb] = op->bshape[i];
    for (int j = 0; j < 3; j++) ms[j]->bstride[nb] = ms[j]->bstride[i];
    nb++;
  }
  op->nbatch = nb;
  for (int i = op->nbatch - 2; i >= 0; i--) {
    bool merge = true;
    for (int j = 0; j < 3; j++)
      if (ms[j]->bstride[i] != ms[j]->bstride[i + 1] * op->bshape[i + 1]) merge = false;
    if (!merge) continue;
    op->bshape[i] *= op->bshape[i + 1];
    for (int j = 0; j < 3; j++) ms[j]->bstride[i] = ms[j]->bstride[i + 1];
    for (int r = i + 1; r < op->nbatch - 1; r++) {
      op->bshape[r] = op->bshape[r + 1];
      for (int j = 0; j < 3; j++) ms[j]->bstride[r] = ms[j]->bstride[r + 1];
    }
    op->nbatch--;
  }
  while (op->nbatch > 0) {
    int l = op->nbatch - 1;
    if (op->b.bstride[l] != 0 || op->a.trans || op->a.bstride[l] != op->m * op->a.ld ||
        op->c.bstride[l] != op->m * op->c.ld)
      break;
    op->m *= op->bshape[l];
    op->nbatch--;
  }
}

/* ---- Tensor helpers ---- */

static void ct__byte_range(const ct_tensor *t, size_t *lo, size_t *hi) {
  size_t es = ct_dtype_size(t->dtype);
  int64_t first = 0, last = 0;
  for (int i = 0; i < t->ndim; i++) {
    int64_t span = (t->shape[i] - 1) * t->strides[i];
    if (span < 0) first += span;
    else last += span;
  }
  size_t base = ct__tensor_byte_offset(t);
  *lo = base + (size_t)(first * (int64_t)es);
  *hi = base + (size_t)((last + 1) * (int64_t)es);
}

static bool ct__overlaps(const ct_tensor *x, const ct_tensor *y) {
  if (!x || !y || ct_numel(x) == 0 || ct_numel(y) == 0 || ct__tensor_mem(x) != ct__tensor_mem(y)) return false;
  size_t xl, xh, yl, yh;
  ct__byte_range(x, &xl, &xh);
  ct__byte_range(y, &yl, &yh);
  return xl < yh && yl < xh;
}

static bool ct__same_geometry(const ct_tensor *x, const ct_tensor *y) {
  if (ct__tensor_mem(x) != ct__tensor_mem(y) || ct__tensor_byte_offset(x) != ct__tensor_byte_offset(y) ||
      x->dtype != y->dtype || x->ndim != y->ndim)
    return false;
  for (int i = 0; i < x->ndim; i++)
    if (x->shape[i] != y->shape[i] || (x->shape[i] > 1 && x->strides[i] != y->strides[i])) return false;
  return true;
}

static cl_long8 ct__long8(int n, const int64_t *v, int64_t fill) {
  cl_long8 r;
  for (int i = 0; i < 8; i++) r.s[i] = i < n ? v[i] : fill;
  return r;
}

/* c's strides expanded to the full result shape (0 on broadcast dims). */
static void ct__expand_strides(int64_t *out, const ct_tensor *c, int rnd, const int64_t *rshape) {
  for (int i = 0; i < rnd; i++) {
    int j = i - (rnd - c->ndim);
    out[i] = (j < 0 || (c->shape[j] == 1 && rshape[i] != 1)) ? 0 : c->strides[j];
  }
}

/* target (contiguous) = beta * broadcast(c), converting c's dtype; zeros when c is NULL. */
static ct_status ct__init_c(ct_device *d, const char *fn, ct_tensor *target, const ct_tensor *c, double beta) {
  int64_t toff;
  size_t tes = ct_dtype_size(target->dtype);
  if (!ct__elem_offset(target, &toff)) return ct__error(CT_ERR_INTERNAL, "%s: misaligned result", fn);
  int64_t n = ct_numel(target);
  if (n == 0) return CT_OK;
  if (!c || beta == 0) {
    cl_ulong zero = 0;
    cl_int err = clEnqueueFillBuffer(ct__device_queue(d), ct__tensor_mem(target), &zero, tes,
                                     (size_t)toff * tes, (size_t)n * tes, 0, NULL, NULL);
    if (err != CL_SUCCESS) return ct__cl_error(err, "%s: clearing the result on %s", fn, d->spec);
    return CT_OK;
  }
  /* beta == 1 (ct_linear's bias, ct_addmm's default) is a broadcasting copy with the same single
   * rounding; the copy kernels walk the two inner dims without gemm_init's per-element index
   * divisions, which cost ~1 ms per 256x1024 result on a CPU device. */
  if (beta == 1) {
    /* ct_addmm_out(c, c, ...): the result already holds c. */
    bool same = c->storage == target->storage && c->offset == target->offset && c->dtype == target->dtype &&
                c->ndim == target->ndim &&
                memcmp(c->shape, target->shape, (size_t)c->ndim * sizeof c->shape[0]) == 0 &&
                memcmp(c->strides, target->strides, (size_t)c->ndim * sizeof c->strides[0]) == 0;
    return same ? CT_OK : ct__copy(target, c, fn);
  }
  int64_t coff = 0;
  ct_tensor *cc = NULL;
  if (!ct__elem_offset(c, &coff)) {
    CT__TRY(ct_contiguous(&cc, c));
    ct__elem_offset(cc, &coff);
    c = cc;
  }
  char opts[64];
  snprintf(opts, sizeof opts, "-DCT_OUT=%d -DCT_SRC=%d", (int)target->dtype, (int)c->dtype);
  ct__kernel *k;
  ct_status st = ct__kernel_get(&k, d, "linalg.cl", "gemm_init", opts);
  if (st != CT_OK) {
    ct_release(cc);
    return st;
  }
  int64_t strides[CT_MAX_DIMS];
  ct__expand_strides(strides, c, target->ndim, target->shape);
  cl_long8 shape8 = ct__long8(target->ndim, target->shape, 1), stride8 = ct__long8(target->ndim, strides, 0);
  cl_mem tm = ct__tensor_mem(target), cm = ct__tensor_mem(c);
  cl_long to = toff, co = coff;
  cl_int nd = target->ndim;
  cl_float bf = (cl_float)beta;
  cl_double bd = beta;
  cl_kernel ck = ct__kernel_lock(k);
  cl_int err = clSetKernelArg(ck, 0, sizeof tm, &tm);
  err |= clSetKernelArg(ck, 1, sizeof to, &to);
  err |= clSetKernelArg(ck, 2, sizeof cm, &cm);
  err |= clSetKernelArg(ck, 3, sizeof co, &co);
  err |= clSetKernelArg(ck, 4, sizeof nd, &nd);
  err |= clSetKernelArg(ck, 5, sizeof shape8, &shape8);
  err |= clSetKernelArg(ck, 6, sizeof stride8, &stride8);
  err |= target->dtype == CT_F64 ? clSetKernelArg(ck, 7, sizeof bd, &bd) : clSetKernelArg(ck, 7, sizeof bf, &bf);
  cl_long cn = n;
  err |= clSetKernelArg(ck, 8, sizeof cn, &cn);
  if (err != CL_SUCCESS) {
    st = ct__error(CT_ERR_INTERNAL, "%s: setting gemm_init's arguments failed", fn);
  } else {
    /* Explicit work-group sizes from a fixed set: with NULL, PoCL compiles anew per size. */
    size_t global = (size_t)n, local;
    ct__launch_dims(k, 1, &global, &local);
    st = ct__kernel_launch(k, d, 1, &global, &local);
  }
  ct__kernel_unlock(k);
  ct_release(cc);
  return st;
}

/* ---- The shared implementation ---- */

struct ct__mm {
  const char *fn;
  const char *an, *bn, *cn;      /* argument names for messages */
  const ct_tensor *a, *b, *c;
  double alpha, beta;
  /* derived */
  ct_device *d;
  ct_dtype dt;
  int64_t m, n, k;
  int nb;                        /* broadcast batch dims */
  int64_t bs[CT_MAX_DIMS];
  int rnd;                       /* result dims */
  int64_t rshape[CT_MAX_DIMS];
};

static ct_status ct__mm_check(struct ct__mm *mm, const ct_tensor *out) {
  const char *fn = mm->fn;
  const ct_tensor *a = mm->a, *b = mm->b, *c = mm->c;
  char sa[160], sb[160], sc[160];
  CT__TRY(ct__check_same_device(fn, mm->an, a, mm->bn, b));
  if (c) CT__TRY(ct__check_same_device(fn, mm->an, a, mm->cn, c));
  if (out) CT__TRY(ct__check_same_device(fn, mm->an, a, "out", out));
  mm->d = a->storage->device;
  mm->dt = a->dtype;
  if (b->dtype != a->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: %s is %s but %s is %s", fn, mm->an, ct_dtype_name(a->dtype),
                     mm->bn, ct_dtype_name(b->dtype));
  if (c && c->dtype != a->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: %s is %s but %s is %s", fn, mm->an, ct_dtype_name(a->dtype),
                     mm->cn, ct_dtype_name(c->dtype));
  if (out && out->dtype != a->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: the operands are %s but out is %s", fn,
                     ct_dtype_name(a->dtype), ct_dtype_name(out->dtype));
  if (a->ndim == 0 || b->ndim == 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: both operands need at least 1 dim; %s has shape %s and %s "
                     "has shape %s", fn, mm->an, ct__shape_str(sa, sizeof sa, a->ndim, a->shape), mm->bn,
                     ct__shape_str(sb, sizeof sb, b->ndim, b->shape));
  bool a1 = a->ndim == 1, b1 = b->ndim == 1;
  int64_t ak = a->shape[a->ndim - 1], bk = b1 ? b->shape[0] : b->shape[b->ndim - 2];
  if (ak != bk)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: %s %s and %s %s can't be multiplied: %s's last dim is %lld but "
                     "%s's %s is %lld", fn, mm->an, ct__shape_str(sa, sizeof sa, a->ndim, a->shape), mm->bn,
                     ct__shape_str(sb, sizeof sb, b->ndim, b->shape), mm->an, (long long)ak, mm->bn,
                     b1 ? "length" : "second-to-last dim", (long long)bk);
  mm->k = ak;
  mm->m = a1 ? 1 : a->shape[a->ndim - 2];
  mm->n = b1 ? 1 : b->shape[b->ndim - 1];
  int anb = a1 ? 0 : a->ndim - 2, bnb = b1 ? 0 : b->ndim - 2;
  mm->nb = anb > bnb ? anb : bnb;
  for (int i = 0; i < mm->nb; i++) {
    int ia = i - (mm->nb - anb), ib = i - (mm->nb - bnb);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: the batch dims of %s %s and %s %s don't broadcast (%lld vs "
                       "%lld)", fn, mm->an, ct__shape_str(sa, sizeof sa, a->ndim, a->shape), mm->bn,
                       ct__shape_str(sb, sizeof sb, b->ndim, b->shape), (long long)da, (long long)db);
    mm->bs[i] = da == 1 ? db : da;
  }
  mm->rnd = 0;
  for (int i = 0; i < mm->nb; i++) mm->rshape[mm->rnd++] = mm->bs[i];
  if (!a1) mm->rshape[mm->rnd++] = mm->m;
  if (!b1) mm->rshape[mm->rnd++] = mm->n;
  if (c) {
    bool fits = c->ndim <= mm->rnd;
    for (int i = 0; fits && i < c->ndim; i++) {
      int64_t cd = c->shape[c->ndim - 1 - i], rd = mm->rshape[mm->rnd - 1 - i];
      if (cd != rd && cd != 1) fits = false;
    }
    if (!fits)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: %s %s does not broadcast to the product's shape %s", fn,
                       mm->cn, ct__shape_str(sc, sizeof sc, c->ndim, c->shape),
                       ct__shape_str(sa, sizeof sa, mm->rnd, mm->rshape));
  }
  if (out) {
    bool same = out->ndim == mm->rnd;
    for (int i = 0; same && i < mm->rnd; i++) same = out->shape[i] == mm->rshape[i];
    if (!same)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: out has shape %s but %s %s @ %s %s has shape %s", fn,
                       ct__shape_str(sc, sizeof sc, out->ndim, out->shape), mm->an,
                       ct__shape_str(sa, sizeof sa, a->ndim, a->shape), mm->bn,
                       ct__shape_str(sb, sizeof sb, b->ndim, b->shape),
                       ct__shape_str(sc, sizeof sc, mm->rnd, mm->rshape));
  }
  if (a->dtype == CT_BOOL)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: matrix products of bool tensors are not supported (cast to an "
                     "integer or float dtype first)", fn);
  if (a->dtype == CT_U16 || a->dtype == CT_U32 || a->dtype == CT_U64)
    return ct__error(CT_ERR_UNSUPPORTED, "%s: matrix products of %s tensors are not supported (a storage dtype; "
                     "cast to i64 or a float dtype first)", fn, ct_dtype_name(a->dtype));
  if (!ct_dtype_is_float(a->dtype) && (mm->alpha != floor(mm->alpha) || mm->beta != floor(mm->beta) ||
                                       !isfinite(mm->alpha) || !isfinite(mm->beta)))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: integer (%s) products need integral alpha and beta, got "
                     "alpha=%g beta=%g", fn, ct_dtype_name(a->dtype), mm->alpha, mm->beta);
  return CT_OK;
}

/* Integer product into a contiguous target (which may be c itself: each element reads its own
 * c before writing). */
static ct_status ct__mm_int(struct ct__mm *mm, ct_tensor *target) {
  const char *fn = mm->fn;
  ct_tensor *ac = NULL, *bc = NULL;
  const ct_tensor *a = mm->a, *b = mm->b, *c = mm->c;
  int64_t aoff = 0, boff = 0, coff = 0, toff = 0;
  if (!ct__elem_offset(a, &aoff)) {
    CT__TRY(ct_contiguous(&ac, a));
    a = ac;
    ct__elem_offset(a, &aoff);
  }
  ct_status st = CT_OK;
  if (!ct__elem_offset(b, &boff)) {
    st = ct_contiguous(&bc, b);
    if (st != CT_OK) goto done;
    b = bc;
    ct__elem_offset(b, &boff);
  }
  ct_tensor *cc = NULL;
  if (c && !ct__elem_offset(c, &coff)) {
    st = ct_contiguous(&cc, c);
    if (st != CT_OK) goto done;
    c = cc;
    ct__elem_offset(c, &coff);
  }
  ct__elem_offset(target, &toff);
  char opts[32];
  snprintf(opts, sizeof opts, "-DCT_DT=%d", (int)mm->dt);
  ct__kernel *k;
  st = ct__kernel_get(&k, mm->d, "linalg.cl", "matmul_int", opts);
  if (st == CT_OK) {
    int64_t a_rs = a->ndim == 1 ? 0 : a->strides[a->ndim - 2], a_cs = a->strides[a->ndim - 1];
    int64_t b_rs = b->ndim == 1 ? b->strides[0] : b->strides[b->ndim - 2];
    int64_t b_cs = b->ndim == 1 ? 0 : b->strides[b->ndim - 1];
    int64_t abs_[CT_MAX_DIMS] = {0}, bbs[CT_MAX_DIMS] = {0};
    int anb = a->ndim == 1 ? 0 : a->ndim - 2, bnb = b->ndim == 1 ? 0 : b->ndim - 2;
    for (int i = 0; i < mm->nb; i++) {
      int ia = i - (mm->nb - anb), ib = i - (mm->nb - bnb);
      abs_[i] = (ia < 0 || a->shape[ia] == 1) ? 0 : a->strides[ia];
      bbs[i] = (ib < 0 || b->shape[ib] == 1) ? 0 : b->strides[ib];
    }
    int64_t cstr[CT_MAX_DIMS] = {0};
    if (c) ct__expand_strides(cstr, c, mm->rnd, mm->rshape);
    int64_t batch = 1;
    for (int i = 0; i < mm->nb; i++) batch *= mm->bs[i];
    cl_mem tm = ct__tensor_mem(target), am = ct__tensor_mem(a), bm = ct__tensor_mem(b);
    cl_mem cm = c ? ct__tensor_mem(c) : tm;
    cl_long args_l[] = {toff, aoff, a_rs, a_cs, boff, b_rs, b_cs, mm->m, mm->n, mm->k,
                        (cl_long)mm->alpha, (cl_long)mm->beta, coff};
    cl_long8 ab8 = ct__long8(mm->nb, abs_, 0), bb8 = ct__long8(mm->nb, bbs, 0);
    cl_long8 bs8 = ct__long8(mm->nb, mm->bs, 1);
    cl_long8 os8 = ct__long8(mm->rnd, mm->rshape, 1), cs8 = ct__long8(mm->rnd, cstr, 0);
    cl_int nb = mm->nb, od = mm->rnd, has_c = c != NULL;
    cl_kernel ck = ct__kernel_lock(k);
    cl_int err = clSetKernelArg(ck, 0, sizeof tm, &tm);
    err |= clSetKernelArg(ck, 1, sizeof(cl_long), &args_l[0]);
    err |= clSetKernelArg(ck, 2, sizeof am, &am);
    err |= clSetKernelArg(ck, 3, sizeof(cl_long), &args_l[1]);
    err |= clSetKernelArg(ck, 4, sizeof(cl_long), &args_l[2]);
    err |= clSetKernelArg(ck, 5, sizeof(cl_long), &args_l[3]);
    err |= clSetKernelArg(ck, 6, sizeof ab8, &ab8);
    err |= clSetKernelArg(ck, 7, sizeof bm, &bm);
    err |= clSetKernelArg(ck, 8, sizeof(cl_long), &args_l[4]);
    err |= clSetKernelArg(ck, 9, sizeof(cl_long), &args_l[5]);
    err |= clSetKernelArg(ck, 10, sizeof(cl_long), &args_l[6]);
    err |= clSetKernelArg(ck, 11, sizeof bb8, &bb8);
    err |= clSetKernelArg(ck, 12, sizeof nb, &nb);
    err |= clSetKernelArg(ck, 13, sizeof bs8, &bs8);
    err |= clSetKernelArg(ck, 14, sizeof(cl_long), &args_l[7]);
    err |= clSetKernelArg(ck, 15, sizeof(cl_long), &args_l[8]);
    err |= clSetKernelArg(ck, 16, sizeof(cl_long), &args_l[9]);
    err |= clSetKernelArg(ck, 17, sizeof(cl_long), &args_l[10]);
    err |= clSetKernelArg(ck, 18, sizeof(cl_long), &args_l[11]);
    err |= clSetKernelArg(ck, 19, sizeof cm, &cm);
    err |= clSetKernelArg(ck, 20, sizeof(cl_long), &args_l[12]);
    err |= clSetKernelArg(ck, 21, sizeof od, &od);
    err |= clSetKernelArg(ck, 22, sizeof os8, &os8);
    err |= clSetKernelArg(ck, 23, sizeof cs8, &cs8);
    err |= clSetKernelArg(ck, 24, sizeof has_c, &has_c);
    if (err != CL_SUCCESS) {
      st = ct__error(CT_ERR_INTERNAL, "%s: setting matmul_int's arguments failed", fn);
    } else {
      size_t global[3] = {(size_t)mm->n, (size_t)mm->m, (size_t)batch}, local[3];
      ct__launch_dims(k, 3, global, local);
      st = ct__kernel_launch(k, mm->d, 3, global, local);
    }
    ct__kernel_unlock(k);
  }
  ct_release(cc);
done:
  ct_release(ac);
  ct_release(bc);
  return st;
}

/* Float product into a contiguous target of the compute dtype (f32, f64, or f16 where CLBlast
 * multiplies half). a and b have that dtype. */
static ct_status ct__mm_float(struct ct__mm *mm, const struct ct__gemm_state *s, ct_tensor *target,
                              const ct_tensor *a, const ct_tensor *b) {
  double gemm_beta = 0;
  if (mm->c && mm->beta != 0) {
    if (ct__same_geometry(mm->c, target)) {
      gemm_beta = mm->beta;
    } else {
      CT__TRY(ct__init_c(mm->d, mm->fn, target, mm->c, mm->beta));
      gemm_beta = 1;
    }
  }
  if (mm->k == 0) {
    if (gemm_beta == 0) return ct__init_c(mm->d, mm->fn, target, NULL, 0);
    if (gemm_beta != 1) return ct__init_c(mm->d, mm->fn, target, target, gemm_beta);
    return CT_OK;
  }
  struct ct__gemm_op op;
  memset(&op, 0, sizeof op);
  op.fn = mm->fn;
  op.dtype = target->dtype;
  op.m = mm->m;
  op.n = mm->n;
  op.k = mm->k;
  op.alpha = mm->alpha;
  op.beta = gemm_beta;
  op.nbatch = mm->nb;
  memcpy(op.bshape, mm->bs, sizeof op.bshape);
  ct_tensor *ac = NULL, *bc = NULL;
  ct_status st = CT_OK;
  if (!ct__mat_of(&op.a, a, true, mm->nb, mm->bs, mm->m, mm->k)) {
    CT__TRY(ct_contiguous(&ac, a));
    if (!ct__mat_of(&op.a, ac, true, mm->nb, mm->bs, mm->m, mm->k))
      st = ct__error(CT_ERR_INTERNAL, "%s: a contiguous operand has no BLAS layout", mm->fn);
  }
  if (st == CT_OK && !ct__mat_of(&op.b, b, false, mm->nb, mm->bs, mm->k, mm->n)) {
    st = ct_contiguous(&bc, b);
    if (st == CT_OK && !ct__mat_of(&op.b, bc, false, mm->nb, mm->bs, mm->k, mm->n))
      st = ct__error(CT_ERR_INTERNAL, "%s: a contiguous operand has no BLAS layout", mm->fn);
  }
  if (st == CT_OK) {
    op.c.mem = ct__tensor_mem(target);
    ct__elem_offset(target, &op.c.off);
    op.c.ld = mm->n;
    op.c.trans = false;
    int64_t stride = mm->m * mm->n;
    for (int i = mm->nb - 1; i >= 0; i--) {
      op.c.bstride[i] = mm->bs[i] == 1 ? 0 : stride;
      stride *= mm->bs[i];
    }
    ct__simplify_batch(&op);
    st = s->route == CT__ROUTE_HOST ? ct__gemm_host(mm->d, &op) : ct__gemm_clblast(mm->d, s, &op);
  }
  ct_release(ac);
  ct_release(bc);
  return st;
}

/* Runs mm into a new tensor (*res) or into out. */
static ct_status ct__mm_run(struct ct__mm *mm, ct_tensor **res, ct_tensor *out) {
  CT__TRY(ct__mm_check(mm, out));
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, mm->d));
  if (s->route_status != CT_OK) return ct__error(s->route_status, "%s: %s", mm->fn, s->route_error);

  bool is_float = ct_dtype_is_float(mm->dt);
  ct_dtype cdt = mm->dt;
  if (mm->dt == CT_BF16 || (mm->dt == CT_F16 && !(s->route == CT__ROUTE_CLBLAST && mm->d->props.fp16)))
    cdt = CT_F32;

  /* Where the product is formed: the destination itself when it is contiguous, of the compute
   * dtype and shares no memory with the operands (c may be the destination: see ct_addmm_out). */
  ct_tensor *result = NULL, *target = NULL;
  if (res) {
    if (cdt == mm->dt) {
      CT__TRY(ct__tensor_new(&result, mm->d, mm->dt, mm->rnd, mm->rshape, mm->fn));
      target = result;
    }
  } else if (cdt == mm->dt && ct_tensor_is_contiguous(out) && !ct__overlaps(out, mm->a) &&
             !ct__overlaps(out, mm->b) && !(mm->c && ct__overlaps(out, mm->c) && !ct__same_geometry(out, mm->c)) &&
             ct__elem_offset(out, &(int64_t){0})) {
    target = out;
  }
  ct_status st = CT_OK;
  bool own_target = target == NULL;
  if (own_target) st = ct__tensor_new(&target, mm->d, cdt, mm->rnd, mm->rshape, mm->fn);
  int64_t numel = 1;
  for (int i = 0; i < mm->rnd; i++) numel *= mm->rshape[i];

  if (st == CT_OK && numel > 0) {
    if (!is_float) {
      st = ct__mm_int(mm, target);
    } else if (cdt == mm->dt) {
      st = ct__mm_float(mm, s, target, mm->a, mm->b);
    } else {
      ct_tensor *a32 = NULL, *b32 = NULL;
      st = ct_cast(&a32, mm->a, cdt);
      if (st == CT_OK) st = ct_cast(&b32, mm->b, cdt);
      if (st == CT_OK) st = ct__mm_float(mm, s, target, a32, b32);
      ct_release(a32);
      ct_release(b32);
    }
  }
  if (st == CT_OK && own_target) {
    if (res) st = cdt == mm->dt ? CT_OK : ct_cast(&result, target, mm->dt);
    else if (numel > 0) st = ct_copy(out, target);
  }
  if (own_target && result != target) ct_release(target);
  if (res) {
    if (st != CT_OK) {
      ct_release(result);
      result = NULL;
    }
    *res = result;
  }
  return st;
}

/* ---- Public API ---- */

ct_status ct_matmul(ct_tensor **out, const ct_tensor *a, const ct_tensor *b) {
  CT__CHECK_NOT_NULL("ct_matmul", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_matmul", a);
  CT__CHECK_NOT_NULL("ct_matmul", b);
  struct ct__mm mm = {.fn = "ct_matmul", .an = "a", .bn = "b", .a = a, .b = b, .alpha = 1, .beta = 0};
  return ct__mm_run(&mm, out, NULL);
}

ct_status ct_matmul_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b) {
  CT__CHECK_NOT_NULL("ct_matmul_out", out);
  CT__CHECK_NOT_NULL("ct_matmul_out", a);
  CT__CHECK_NOT_NULL("ct_matmul_out", b);
  struct ct__mm mm = {.fn = "ct_matmul_out", .an = "a", .bn = "b", .a = a, .b = b, .alpha = 1, .beta = 0};
  return ct__mm_run(&mm, NULL, out);
}

ct_status ct_addmm(ct_tensor **out, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, double beta,
                   double alpha) {
  CT__CHECK_NOT_NULL("ct_addmm", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_addmm", c);
  CT__CHECK_NOT_NULL("ct_addmm", a);
  CT__CHECK_NOT_NULL("ct_addmm", b);
  struct ct__mm mm = {.fn = "ct_addmm", .an = "a", .bn = "b", .cn = "c", .a = a, .b = b, .c = c, .alpha = alpha,
                      .beta = beta};
  return ct__mm_run(&mm, out, NULL);
}

ct_status ct_addmm_out(ct_tensor *out, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, double beta,
                       double alpha) {
  CT__CHECK_NOT_NULL("ct_addmm_out", out);
  CT__CHECK_NOT_NULL("ct_addmm_out", c);
  CT__CHECK_NOT_NULL("ct_addmm_out", a);
  CT__CHECK_NOT_NULL("ct_addmm_out", b);
  struct ct__mm mm = {.fn = "ct_addmm_out", .an = "a", .bn = "b", .cn = "c", .a = a, .b = b, .c = c, .alpha = alpha,
                      .beta = beta};
  return ct__mm_run(&mm, NULL, out);
}

ct_status ct_linear(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias) {
  CT__CHECK_NOT_NULL("ct_linear", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct_linear", x);
  CT__CHECK_NOT_NULL("ct_linear", w);
  char sx[160], sw[160];
  if (w->ndim != 2)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "ct_linear: w must be 2-D [out_features, in_features], got %s",
                     ct__shape_str(sw, sizeof sw, w->ndim, w->shape));
  if (x->ndim == 0 || x->shape[x->ndim - 1] != w->shape[1])
    return ct__error(CT_ERR_SHAPE_MISMATCH, "ct_linear: x %s and w %s don't fit: x's last dim must be w's "
                     "in_features %lld", ct__shape_str(sx, sizeof sx, x->ndim, x->shape),
                     ct__shape_str(sw, sizeof sw, w->ndim, w->shape), (long long)w->shape[1]);
  /* w^T as a view: the GEMM reads it with a transpose flag, no copy. */
  int64_t shape[2] = {w->shape[1], w->shape[0]}, strides[2] = {w->strides[1], w->strides[0]};
  ct_tensor *wt;
  CT__TRY(ct__tensor_view(&wt, w, 2, shape, strides, w->offset));
  struct ct__mm mm = {.fn = "ct_linear", .an = "x", .bn = "w^T", .cn = "bias", .a = x, .b = wt, .c = bias, .alpha = 1,
                      .beta = 1};
  ct_status st = ct__mm_run(&mm, out, NULL);
  ct_release(wt);
  return st;
}
