/* Autograd of the views, copies, casts and transfers (src/autograd/grad_view.c, the CAST and
 * TO_DEVICE rows of grad_ew.c): view, reshape, permute, transpose, slice, squeeze, unsqueeze,
 * expand, chunk/split pieces, contiguous, clone against central differences in f64 (strided
 * inputs, negative dims, size-1 dims, views of views); casts across float dtypes; ct_to_device
 * between two devices (run as "two" with POCL_DEVICES="pthread pthread"); and the in-place
 * rules of ct_copy, ct_fill_, ct_zero_ and ct_copy_from_host(_async). */
#include "ct_fixture.h"
#include "gradcheck.h"

/* Every tensor (and so every node, which holds its leaves) was released: the device holds no
 * bytes (Check forks each test, so the count starts at zero). */
static void assert_nothing_allocated(ct_device *d) {
  ct_memory_stats ms = {.size = sizeof ms};
  ck_assert_ct_ok(ct_device_get_memory_stats(&ms, d));
  ck_assert_msg(ms.allocated_bytes == 0, "%llu bytes still allocated", (unsigned long long)ms.allocated_bytes);
}

#define NCASES 20

/* One view (or a chain of them) of in[0], by case number. */
static ct_status f_view(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  int which = *(int *)ctx;
  const ct_tensor *x = in[0];
  ct_tensor *t = NULL, *u = NULL;
  ct_status st = CT_OK;
  switch (which) {
  case 0: return ct_view(out, x, 2, (const int64_t[]){2, 6});             /* [3, 4] contiguous */
  case 1: return ct_reshape(out, x, 1, (const int64_t[]){-1});            /* strided: copies */
  case 2: return ct_reshape(out, x, 3, (const int64_t[]){2, -1, 3});      /* contiguous: a view */
  case 3: return ct_permute(out, x, (const int[]){2, 0, -2});             /* [2, 3, 2] */
  case 4: return ct_transpose(out, x, 0, -1);                             /* strided [3, 4] */
  case 5: return ct_slice(out, x, -1, 1, 4, 2);                           /* [3, 4] step 2 */
  case 6: return ct_slice(out, x, 0, -2, 100, 1);                         /* strided, clamped */
  case 7: return ct_squeeze(out, x, -2);                                  /* [3, 1, 2] */
  case 8: return ct_squeeze(out, x, 0);                                   /* no size-1 dim: same */
  case 9: return ct_unsqueeze(out, x, -1);
  case 10: return ct_expand(out, x, 3, (const int64_t[]){2, 3, 4});      /* [3, 1] */
  case 11: return ct_contiguous(out, x);                                 /* strided: a copy */
  case 12: return ct_clone(out, x);
  case 13: /* a view of a view of a view: slice, transpose, reshape */
    st = ct_slice(&t, x, 1, 1, 4, 1);
    if (st == CT_OK) st = ct_transpose(&u, t, 0, 1);
    ct_release(t);
    if (st == CT_OK) st = ct_reshape(out, u, 1, (const int64_t[]){9});
    ct_release(u);
    return st;
  case 14: /* x used through two overlapping views: the gradients add up */
    st = ct_slice(&t, x, 0, 0, 2, 1);
    if (st == CT_OK) st = ct_slice(&u, x, 0, 1, 3, 1);
    if (st == CT_OK) st = ct_mul(out, t, u);
    ct_release(t);
    ct_release(u);
    return st;
  case 15: /* a slice of a size-1 dim, then expand of it */
    st = ct_slice(&t, x, 1, 0, 1, 1);
    if (st == CT_OK) st = ct_expand(out, t, 4, (const int64_t[]){2, 3, -1, 3});
    ct_release(t);
    return st;
  case 16: return ct_view(out, x, 0, NULL);                              /* [1, 1] to 0-d */
  case 17: return ct_transpose(out, x, 0, -1);                           /* 0-d: no dim to swap */
  case 18: return ct_unsqueeze(out, x, 0);                               /* 0-d */
  default: return ct_slice(out, x, 0, 2, 2, 1);                          /* empty: zero gradient */
  }
}

START_TEST(views_gradcheck) {
  ct_device *d = ct_test_device();
  /* shape, strided, per case */
  static const struct {
    int ndim;
    int64_t shape[3];
    bool strided;
  } cs[NCASES] = {
      {2, {3, 4}, false}, {2, {3, 4}, true},  {2, {3, 4}, false}, {3, {2, 3, 2}, true},  {2, {3, 4}, true},
      {2, {3, 4}, false}, {2, {3, 4}, true},  {3, {3, 1, 2}, true}, {2, {3, 4}, false}, {2, {3, 2}, true},
      {2, {3, 1}, false}, {2, {3, 4}, true},  {2, {3, 4}, true},  {2, {3, 4}, true},  {2, {3, 2}, false},
      {3, {3, 2, 1}, true}, {2, {1, 1}, false}, {0, {0}, false},   {0, {0}, false},  {2, {3, 4}, true},
  };
  double v[24];
  for (int which = 0; which < NCASES; which++) {
    gc_input in = {.ndim = cs[which].ndim, .data = v, .requires_grad = true, .strided = cs[which].strided};
    memcpy(in.shape, cs[which].shape, sizeof cs[which].shape);
    gc_fill(v, gc_numel(&in), -1.0, 1.0, 10 + which);
    char what[32];
    snprintf(what, sizeof what, "view case %d", which);
    gc_check(d, what, f_view, &which, 1, &in);
  }
  assert_nothing_allocated(d);
}
END_TEST

/* Pieces of chunk and split, used partially: the unused pieces give zeros. */
static ct_status f_pieces(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  int which = *(int *)ctx;
  ct_tensor *p[4] = {0};
  int np = 0;
  ct_status st = which == 0   ? ct_chunk(p, &np, in[0], 3, 0)  /* [6, 2]: three [2, 2] */
                 : which == 1 ? ct_split(p, &np, in[0], 2, -1) /* [3, 5]: [3,2] [3,2] [3,1] */
                              : ct_chunk(p, &np, in[0], 4, -1); /* [2, 3] strided: three [2, 1] */
  if (st != CT_OK) return st;
  if (which == 0) st = ct_mul(out, p[0], p[2]); /* the middle piece unused */
  else if (which == 1) st = ct_mul(out, p[1], p[1]);
  else st = ct_clone(out, p[1]);
  for (int i = 0; i < np; i++) ct_release(p[i]);
  return st;
}

START_TEST(chunk_split_pieces) {
  ct_device *d = ct_test_device();
  static const gc_input shapes[3] = {{.ndim = 2, .shape = {6, 2}},
                                     {.ndim = 2, .shape = {3, 5}, .strided = true},
                                     {.ndim = 2, .shape = {2, 3}, .strided = true}};
  double v[15];
  for (int which = 0; which < 3; which++) {
    gc_input in = shapes[which];
    in.data = v;
    in.requires_grad = true;
    gc_fill(v, gc_numel(&in), -1.0, 1.0, 40 + which);
    char what[32];
    snprintf(what, sizeof what, "pieces case %d", which);
    gc_check(d, what, f_pieces, &which, 1, &in);
  }
  /* the gradient of chunk 0's middle piece is exactly zero (rows 2 and 3) */
  int64_t sh[2] = {6, 2};
  double xv[12];
  gc_fill(xv, 12, -1.0, 1.0, 7);
  ct_tensor *x = gc_from(d, 2, sh, xv), *p[3] = {0}, *prod = NULL, *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  int np = 0;
  ck_assert_ct_ok(ct_chunk(p, &np, x, 3, 0));
  ck_assert_int_eq(np, 3);
  for (int i = 0; i < 3; i++) ck_assert(ct_requires_grad(p[i]) && !ct_is_leaf(p[i]));
  ck_assert_ct_ok(ct_mul(&prod, p[0], p[2]));
  ck_assert_ct_ok(ct_sum(&s, prod, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  double *gv = gc_host(g);
  const double tol = gc_tol(ct_tensor_dtype(g), 1e-15); /* f32: xv rounded once */
  for (int j = 0; j < 4; j++) {
    ck_assert_double_eq_tol(gv[j], xv[8 + j], tol);
    ck_assert(gv[4 + j] == 0.0);
    ck_assert_double_eq_tol(gv[8 + j], xv[j], tol);
  }
  free(gv);
  ct_release(g);
  ct_release(s);
  ct_release(prod);
  for (int i = 0; i < 3; i++) ct_release(p[i]);
  ct_release(x);
  assert_nothing_allocated(d);
}
END_TEST

/* ct_contiguous of a contiguous tensor is the same handle and records nothing; of a strided one
 * a new recorded copy. A cast to an integer or bool dtype is not differentiable. */
START_TEST(contiguous_and_integer_casts) {
  ct_device *d = ct_test_device();
  int64_t sh[2] = {2, 3};
  double xv[6] = {1, 2, 3, 4, 5, 6};
  ct_tensor *x = gc_from(d, 2, sh, xv), *y = NULL, *t = NULL, *c = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_contiguous(&y, x));
  ck_assert_ptr_eq(y, x);
  ck_assert(ct_is_leaf(y));
  ct_release(y);
  ck_assert_ct_ok(ct_transpose(&t, x, 0, 1));
  ck_assert(ct_requires_grad(t) && !ct_is_leaf(t));
  ck_assert_ct_ok(ct_contiguous(&c, t));
  ck_assert(c != t && ct_requires_grad(c) && !ct_is_leaf(c));
  ct_release(c);
  /* one integer dtype (each cast pair is its own kernel program: CI builds them cold) */
  ck_assert_ct_ok(ct_cast(&c, x, CT_I32));
  ck_assert(!ct_requires_grad(c) && ct_is_leaf(c));
  ct_release(c);
  /* and nothing records with grad mode off */
  bool prev = ct_set_grad_enabled(false);
  ck_assert_ct_ok(ct_reshape(&c, t, 1, (const int64_t[]){6}));
  ck_assert(!ct_requires_grad(c));
  ct_release(c);
  ct_set_grad_enabled(prev);
  /* failures leave *out NULL */
  c = x;
  ck_assert_ct_status(ct_contiguous(&c, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(c);
  ct_release(t);
  ct_release(x);
}
END_TEST

/* Gradients of mixed float dtypes through casts come back in each leaf's dtype: f32 -> f64 ->
 * f32 and f64 -> f32 -> f64 (lo = f32, hi = f64). Without cl_khr_fp64 the f64 form is skipped
 * (said in a TAP comment) and the same rule runs one step down, lo = f16 and hi = f32: every
 * value here and every product is exact in f16, so the expected values hold as they are. */
START_TEST(casts_between_float_dtypes) {
  ct_device *d = ct_test_device();
  const bool f64 = ct_test_fp64(d, "casts between f32 and f64 (f16 and f32 instead)");
  const ct_dtype lo = f64 ? CT_F32 : CT_F16, hi = f64 ? CT_F64 : CT_F32;
  int64_t n = 4;
  double x32v[4] = {0.5, -1.25, 2.0, 3.5};
  double x64v[4] = {1.5, -0.5, 0.25, 2.0}, wv[4] = {1, -2, 0.5, 3};
  ct_tensor *x32 = ct_test_from_doubles(d, lo, 1, &n, x32v);
  ct_tensor *x64 = ct_test_from_doubles(d, hi, 1, &n, x64v);
  ct_tensor *w = ct_test_from_doubles(d, hi, 1, &n, wv);
  ck_assert_ct_ok(ct_set_requires_grad(x32, true));
  ck_assert_ct_ok(ct_set_requires_grad(x64, true));
  /* L = sum(hi(x32) * w * hi(lo(x64))) */
  ct_tensor *a = NULL, *b = NULL, *b2 = NULL, *p = NULL, *q = NULL, *L = NULL, *g = NULL;
  ck_assert_ct_ok(ct_cast(&a, x32, hi));
  ck_assert_ct_ok(ct_cast(&b, x64, lo));
  ck_assert_ct_ok(ct_cast(&b2, b, hi));
  ck_assert(ct_requires_grad(a) && ct_requires_grad(b2));
  ck_assert_ct_ok(ct_mul(&p, a, w));
  ck_assert_ct_ok(ct_mul(&q, p, b2));
  ck_assert_ct_ok(ct_sum(&L, q, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(L, NULL));
  ck_assert_ct_ok(ct_grad(&g, x32));
  ck_assert_int_eq(ct_tensor_dtype(g), lo);
  double *gv = gc_host(g);
  /* b's values are exact in lo, so the lo gradients are the exact products rounded once */
  for (int i = 0; i < 4; i++) ck_assert(gv[i] == gc_round(lo, wv[i] * x64v[i]));
  free(gv);
  ct_release(g);
  ck_assert_ct_ok(ct_grad(&g, x64));
  ck_assert_int_eq(ct_tensor_dtype(g), hi);
  gv = gc_host(g);
  /* through the lo cast the gradient was lo: x32 * w rounded to lo */
  for (int i = 0; i < 4; i++) ck_assert(gv[i] == gc_round(lo, x32v[i] * wv[i]));
  free(gv);
  ct_release(g);
  ct_release(L);
  ct_release(q);
  ct_release(p);
  ct_release(b2);
  ct_release(b);
  ct_release(a);
  ct_release(w);
  ct_release(x64);
  ct_release(x32);
  assert_nothing_allocated(d);
}
END_TEST

/* In-place writes: refused into a tensor that requires grad (a leaf or a view of one) in grad
 * mode, and from a src that requires grad (ct_copy); allowed with grad mode off. */
START_TEST(inplace_writes_refused) {
  ct_device *d = ct_test_device();
  int64_t n = 3;
  double xv[3] = {1, 2, 3};
  ct_tensor *x = gc_from(d, 1, &n, xv), *o = gc_from(d, 1, &n, xv), *v = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_status(ct_copy(x, o), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_copy: argument 'dst' requires grad");
  ck_assert_ct_status(ct_copy(o, x), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'src' requires grad");
  ck_assert_ct_status(ct_fill_(x, 1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_fill_");
  ck_assert_ct_status(ct_zero_(x), CT_ERR_INVALID_ARGUMENT);
  unsigned char xb[3 * 8]; /* xv as x's dtype (the right size: only requires grad is wrong) */
  const size_t es = ct_dtype_size(ct_tensor_dtype(x));
  for (int i = 0; i < 3; i++) ct__host_store_double(ct_tensor_dtype(x), xb + i * es, xv[i]);
  ck_assert_ct_status(ct_copy_from_host(x, xb, 3 * es), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_copy_from_host");
  ct_event *ev = NULL;
  ck_assert_ct_status(ct_copy_from_host_async(&ev, x, xb, 3 * es), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(ev);
  ck_assert_ct_ok(ct_slice(&v, x, 0, 1, 3, 1)); /* a view of x requires grad too */
  ck_assert_ct_status(ct_fill_(v, 0.0), CT_ERR_INVALID_ARGUMENT);
  /* nothing was written */
  double *h = gc_host(x);
  for (int i = 0; i < 3; i++) ck_assert(h[i] == xv[i]);
  free(h);
  /* with grad mode off (an optimizer's update) the writes go through */
  bool prev = ct_set_grad_enabled(false);
  ck_assert_ct_ok(ct_fill_(v, 0.0));
  ck_assert_ct_ok(ct_copy(o, x));
  ct_set_grad_enabled(prev);
  h = gc_host(o);
  ck_assert(h[0] == 1 && h[1] == 0 && h[2] == 0);
  free(h);
  ct_release(v);
  ct_release(o);
  ct_release(x);
}
END_TEST

/* A tensor a node saved, written afterwards through each writing call (or through a view of
 * it: the version counter is the storage's), makes ct_backward fail naming the op. */
START_TEST(inplace_write_of_saved_tensor_detected) {
  ct_device *d = ct_test_device();
  int64_t n = 3;
  double xv[3] = {1, 2, 3}, cv[3] = {4, 5, 6};
  unsigned char cb[3 * 8]; /* cv as the tensors' dtype, for the host copies */
  const size_t es = ct_dtype_size(gc_float(d));
  for (int i = 0; i < 3; i++) ct__host_store_double(gc_float(d), cb + i * es, cv[i]);
  for (int how = 0; how < 6; how++) {
    ct_tensor *x = gc_from(d, 1, &n, xv), *c = gc_from(d, 1, &n, cv), *y = NULL, *s = NULL, *g = NULL, *v = NULL;
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    ck_assert_ct_ok(ct_mul(&y, x, c)); /* saves c */
    ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
    ct_event *ev = NULL;
    switch (how) {
    case 0: /* from a detached view of x: allowed, and a write into c all the same */
      ck_assert_ct_ok(ct_detach(&v, x));
      ck_assert_ct_ok(ct_copy(c, v));
      break;
    case 1: ck_assert_ct_ok(ct_fill_(c, 1.0)); break;
    case 2: ck_assert_ct_ok(ct_zero_(c)); break;
    case 3: ck_assert_ct_ok(ct_copy_from_host(c, cb, 3 * es)); break;
    case 4:
      ck_assert_ct_ok(ct_copy_from_host_async(&ev, c, cb, 3 * es));
      ck_assert_ct_ok(ct_event_wait(ev));
      ct_event_free(ev);
      break;
    default:
      ck_assert_ct_ok(ct_slice(&v, c, 0, 2, 3, 1));
      ck_assert_ct_ok(ct_fill_(v, 0.0));
      break;
    }
    ck_assert_ct_status(ct_backward(s, NULL), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("modified in place");
    ck_assert_ct_ok(ct_grad(&g, x));
    ck_assert_ptr_null(g);
    ct_release(v);
    ct_release(s);
    ct_release(y);
    ct_release(c);
    ct_release(x);
  }
  assert_nothing_allocated(d);
}
END_TEST

/* A refused write changes no version: the graph still backpropagates. */
START_TEST(refused_write_bumps_nothing) {
  ct_device *d = ct_test_device();
  int64_t n = 3, two = 2;
  double xv[3] = {1, 2, 3}, cv[3] = {4, 5, 6};
  ct_tensor *x = gc_from(d, 1, &n, xv), *c = gc_from(d, 1, &n, cv), *y = NULL, *s = NULL,
            *small = gc_from(d, 1, &two, cv), *e = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_mul(&y, x, c));
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ck_assert_ct_status(ct_copy(c, small), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_ok(ct_expand(&e, c, 2, (const int64_t[]){2, 3}));
  ck_assert_ct_status(ct_fill_(e, 1.0), CT_ERR_INVALID_ARGUMENT); /* an expanded view */
  ck_assert_ct_status(ct_copy_from_host(c, cv, 8), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_release(e);
  ct_release(small);
  ct_release(s);
  ct_release(y);
  ct_release(c);
  ct_release(x);
}
END_TEST

/* An f32 smoke run: a chain of views and copies in f32 backpropagates. */
START_TEST(f32_smoke) {
  ct_device *d = ct_test_device();
  int64_t sh[2] = {4, 3};
  float xv[12];
  for (int i = 0; i < 12; i++) xv[i] = (float)i;
  ct_tensor *x = NULL, *t = NULL, *sl = NULL, *r = NULL, *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, sh, xv));
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_transpose(&t, x, 0, 1));
  ck_assert_ct_ok(ct_slice(&sl, t, 1, 1, 4, 2));
  ck_assert_ct_ok(ct_reshape(&r, sl, 1, (const int64_t[]){-1}));
  ck_assert_ct_ok(ct_sum(&s, r, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  ck_assert_int_eq(ct_tensor_dtype(g), CT_F32);
  double *gv = gc_host(g);
  for (int i = 0; i < 12; i++) ck_assert(gv[i] == (i / 3 == 1 || i / 3 == 3 ? 1.0 : 0.0));
  free(gv);
  ct_release(g);
  ct_release(s);
  ct_release(r);
  ct_release(sl);
  ct_release(t);
  ct_release(x);
}
END_TEST

/* ---- two devices (POCL_DEVICES="pthread pthread") ---- */

/* x on device 0, used on device 1: the gradient comes back to device 0. ct_to_device onto x's
 * own device is x itself (no node). */
START_TEST(to_device_two_devices) {
  ct_device *d0 = NULL, *d1 = NULL;
  if (!ct_test_two_devices(&d0, &d1, "ct_to_device's gradient across devices")) return;
  ck_assert_ptr_ne(d0, d1);
  int64_t sh[2] = {2, 3};
  double xv[6] = {1, -2, 3, 0.5, -1.5, 2}, wv[6] = {0.5, 1, -1, 2, 0.25, -3};
  ct_tensor *x = NULL, *same = NULL, *y = NULL, *t = NULL, *w = NULL, *p = NULL, *q = NULL, *L = NULL, *g = NULL;
  x = gc_from(d0, 2, sh, xv);
  w = gc_from(d1, 2, sh, wv);
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_to_device(&same, x, d0));
  ck_assert_ptr_eq(same, x);
  ct_release(same);
  /* a strided view moves too: L = sum(y * y * w), y = x on device 1 */
  ck_assert_ct_ok(ct_transpose(&t, x, 0, 1));
  ck_assert_ct_ok(ct_to_device(&y, t, d1));
  ck_assert(ct_requires_grad(y) && ct_tensor_device(y) == d1);
  ct_tensor *wt = NULL;
  ck_assert_ct_ok(ct_transpose(&wt, w, 0, 1));
  ck_assert_ct_ok(ct_mul(&p, y, y));
  ck_assert_ct_ok(ct_mul(&q, p, wt));
  ck_assert_ct_ok(ct_sum(&L, q, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(L, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  ck_assert_ptr_eq(ct_tensor_device(g), d0);
  double *gv = gc_host(g);
  for (int i = 0; i < 6; i++) ck_assert_double_eq_tol(gv[i], 2 * xv[i] * wv[i], gc_tol(ct_tensor_dtype(g), 1e-14));
  free(gv);
  ct_release(g);
  ct_release(L);
  ct_release(q);
  ct_release(p);
  ct_release(wt);
  ct_release(y);
  ct_release(t);
  ct_release(w);
  ct_release(x);
}
END_TEST

int main(int argc, char **argv) {
  Suite *s = suite_create("autograd-view");
  TCase *tc;
  if (argc > 1 && strcmp(argv[1], "two") == 0) {
    tc = tcase_create("two_devices");
    tcase_add_checked_fixture(tc, NULL, ct_test_finish);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, to_device_two_devices);
    suite_add_tcase(s, tc);
    return ct_test_run(s);
  }
  tc = tcase_create("view");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, views_gradcheck);
  tcase_add_test(tc, chunk_split_pieces);
  tcase_add_test(tc, contiguous_and_integer_casts);
  tcase_add_test(tc, casts_between_float_dtypes);
  tcase_add_test(tc, inplace_writes_refused);
  tcase_add_test(tc, inplace_write_of_saved_tensor_detected);
  tcase_add_test(tc, refused_write_bumps_nothing);
  tcase_add_test(tc, f32_smoke);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
