/* Autograd of the shape ops (src/autograd/grad_shape.c): cat, stack, flip, roll, repeat,
 * tril/triu and pad (constant, reflect, replicate) against central differences in f64, with
 * strided inputs, negative dims, size-1 dims and inputs of which only some require grad; the
 * exact rules of cat (integer and skipped inputs, mixed float dtypes); an f32 smoke run. The
 * *_like constructors, fills and linspace record nothing. */
#include "ct_fixture.h"
#include "gradcheck.h"

/* Every tensor (and so every node, which holds its leaves) was released: the device holds no
 * bytes (Check forks each test, so the count starts at zero). */
static void assert_nothing_allocated(ct_device *d) {
  ct_memory_stats ms = {.size = sizeof ms};
  ck_assert_ct_ok(ct_device_get_memory_stats(&ms, d));
  ck_assert_msg(ms.allocated_bytes == 0, "%llu bytes still allocated", (unsigned long long)ms.allocated_bytes);
}

/* ---- cat and stack ---- */

static ct_status f_cat(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  int which = *(int *)ctx;
  switch (which) {
  case 0: return ct_cat(out, in, 3, -1); /* [2,3] [2,1] [2,2] strided */
  case 4: return ct_cat(out, in, 2, 1);  /* [2,0] (a size-0 input: an empty gradient) [2,2] */
  case 1: return ct_cat(out, in, 2, 0);  /* [1,3] [2,3] */
  case 2: return ct_stack(out, in, 3, 1);  /* three [2,3] -> [2,3,3] */
  default: return ct_stack(out, in, 2, -1); /* two [3,2] strided -> [3,2,2] */
  }
}

START_TEST(cat_stack_gradcheck) {
  ct_device *d = ct_test_device();
  double a[6], b[6], c[6];
  static const struct {
    int n;
    gc_input in[3];
  } cs[5] = {
      {3, {{.ndim = 2, .shape = {2, 3}, .requires_grad = true},
           {.ndim = 2, .shape = {2, 1}},
           {.ndim = 2, .shape = {2, 2}, .requires_grad = true, .strided = true}}},
      {2, {{.ndim = 2, .shape = {1, 3}}, {.ndim = 2, .shape = {2, 3}, .requires_grad = true, .strided = true}}},
      {3, {{.ndim = 2, .shape = {2, 3}, .requires_grad = true},
           {.ndim = 2, .shape = {2, 3}, .requires_grad = true, .strided = true},
           {.ndim = 2, .shape = {2, 3}}}},
      {2, {{.ndim = 2, .shape = {3, 2}, .requires_grad = true, .strided = true},
           {.ndim = 2, .shape = {3, 2}, .requires_grad = true}}},
      {2, {{.ndim = 2, .shape = {2, 0}, .requires_grad = true}, {.ndim = 2, .shape = {2, 2}, .requires_grad = true}}},
  };
  for (int which = 0; which < 5; which++) {
    gc_input in[3];
    memcpy(in, cs[which].in, sizeof in);
    double *bufs[3] = {a, b, c};
    for (int k = 0; k < cs[which].n; k++) {
      in[k].data = bufs[k];
      gc_fill(bufs[k], gc_numel(&in[k]), -1.0, 1.0, 20 * which + k + 1);
    }
    char what[32];
    snprintf(what, sizeof what, "cat/stack case %d", which);
    gc_check(d, what, f_cat, &which, cs[which].n, in);
  }
  assert_nothing_allocated(d);
}
END_TEST

/* cat of an f32 input, an f64 input, an i64 input and a skipped 1-D empty input that requires
 * grad: each float input gets its slice in its own dtype, the empty one an empty gradient, the
 * integer one nothing (lo = f32, hi = f64). Without cl_khr_fp64 the f64 form is skipped (said in
 * a TAP comment) and the same rules run one step down, lo = f16 and hi = f32 (every value here
 * is exact in f16). */
START_TEST(cat_mixed_inputs) {
  ct_device *d = ct_test_device();
  const bool f64 = ct_test_fp64(d, "cat of f32, f64 and i64 inputs (f16, f32 and i64 instead)");
  const ct_dtype lo = f64 ? CT_F32 : CT_F16, hi = f64 ? CT_F64 : CT_F32;
  int64_t sh32[2] = {2, 1}, sh64[2] = {2, 2}, shi[2] = {2, 1}, zero = 0;
  double v32[2] = {1, 2};
  double v64[4] = {3, 4, 5, 6}, wv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t vi[2] = {7, 8};
  ct_tensor *x32 = ct_test_from_doubles(d, lo, 2, sh32, v32), *x64 = ct_test_from_doubles(d, hi, 2, sh64, v64);
  ct_tensor *xi = NULL, *xe = NULL, *w = NULL;
  ck_assert_ct_ok(ct_from_host(&xi, d, CT_I64, 2, shi, vi));
  ck_assert_ct_ok(ct_zeros(&xe, d, hi, 1, &zero));
  ck_assert_ct_ok(ct_set_requires_grad(x32, true));
  ck_assert_ct_ok(ct_set_requires_grad(x64, true));
  ck_assert_ct_ok(ct_set_requires_grad(xe, true));
  ct_tensor *ts[4] = {x32, xe, x64, xi}, *o = NULL, *p = NULL, *L = NULL, *g = NULL;
  ck_assert_ct_ok(ct_cat(&o, ts, 4, 1)); /* [2, 4] hi: columns x32 | x64 x64 | xi */
  ck_assert_int_eq(ct_tensor_dtype(o), hi);
  ck_assert(ct_requires_grad(o));
  w = ct_test_from_doubles(d, hi, 2, (const int64_t[]){2, 4}, wv);
  ck_assert_ct_ok(ct_mul(&p, o, w));
  ck_assert_ct_ok(ct_sum(&L, p, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(L, NULL));
  ck_assert_ct_ok(ct_grad(&g, x32));
  ck_assert_int_eq(ct_tensor_dtype(g), lo);
  double *gv = gc_host(g);
  ck_assert(gv[0] == 1 && gv[1] == 5);
  free(gv);
  ct_release(g);
  ck_assert_ct_ok(ct_grad(&g, x64));
  ck_assert_int_eq(ct_tensor_dtype(g), hi);
  gv = gc_host(g);
  ck_assert(gv[0] == 2 && gv[1] == 3 && gv[2] == 6 && gv[3] == 7);
  free(gv);
  ct_release(g);
  ck_assert_ct_ok(ct_grad(&g, xe));
  ck_assert_ptr_nonnull(g);
  ck_assert_int_eq(ct_tensor_ndim(g), 1);
  ck_assert_int_eq(ct_tensor_shape(g)[0], 0);
  ct_release(g);
  ck_assert(!ct_requires_grad(xi));
  /* an integer-only cat records nothing */
  ct_tensor *ii[2] = {xi, xi};
  ct_release(o);
  ck_assert_ct_ok(ct_cat(&o, ii, 2, 0));
  ck_assert(!ct_requires_grad(o));
  ct_release(o);
  ct_release(L);
  ct_release(p);
  ct_release(w);
  ct_release(xe);
  ct_release(xi);
  ct_release(x64);
  ct_release(x32);
  assert_nothing_allocated(d);
}
END_TEST

/* ---- flip, roll, repeat, tril/triu ---- */

static ct_status f_reorder(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  int which = *(int *)ctx;
  const ct_tensor *x = in[0];
  switch (which) {
  case 0: return ct_flip(out, x, 2, (const int[]){0, -1});        /* [2,3,2] strided */
  case 1: return ct_flip(out, x, 1, (const int[]){1});            /* [3,4] */
  case 2: return ct_roll(out, x, -5, 1);                          /* [3,4] strided */
  case 3: return ct_roll(out, x, 7, -1);                          /* [2,3,2] */
  case 4: return ct_roll(out, x, 3, 0);                           /* 0-d */
  case 5: return ct_repeat(out, x, 3, (const int64_t[]){2, 1, 3}); /* [2,3] strided: a leading dim */
  case 6: return ct_repeat(out, x, 2, (const int64_t[]){2, 0});   /* a zero repeat */
  case 7: return ct_repeat(out, x, 3, (const int64_t[]){1, 2, 2}); /* [3,1,2] */
  case 8: return ct_tril(out, x, -1);                             /* [2,3,4] strided */
  case 9: return ct_triu(out, x, 1);                              /* [2,3,4] */
  default: return ct_tril(out, x, 2);                             /* [4,3] */
  }
}

START_TEST(reorder_gradcheck) {
  ct_device *d = ct_test_device();
  static const gc_input cs[11] = {
      {.ndim = 3, .shape = {2, 3, 2}, .strided = true}, {.ndim = 2, .shape = {3, 4}},
      {.ndim = 2, .shape = {3, 4}, .strided = true},    {.ndim = 3, .shape = {2, 3, 2}},
      {.ndim = 0},                                       {.ndim = 2, .shape = {2, 3}, .strided = true},
      {.ndim = 2, .shape = {2, 3}},                      {.ndim = 3, .shape = {3, 1, 2}},
      {.ndim = 3, .shape = {2, 3, 4}, .strided = true}, {.ndim = 3, .shape = {2, 3, 4}},
      {.ndim = 2, .shape = {4, 3}},
  };
  double v[24];
  for (int which = 0; which < 11; which++) {
    gc_input in = cs[which];
    in.data = v;
    in.requires_grad = true;
    gc_fill(v, gc_numel(&in), -1.0, 1.0, 60 + which);
    char what[32];
    snprintf(what, sizeof what, "reorder case %d", which);
    gc_check(d, what, f_reorder, &which, 1, &in);
  }
  assert_nothing_allocated(d);
}
END_TEST

/* ---- pad ---- */

struct pad_case {
  int ndim;
  int64_t shape[4];
  bool strided;
  int npad;
  int64_t pad[6];
  ct_pad_mode mode;
};

static const struct pad_case pad_cases[] = {
    {3, {2, 3, 2}, true, 4, {1, 2, -1, 1}, CT_PAD_CONSTANT}, /* crop and pad */
    {1, {3}, false, 2, {-1, -1}, CT_PAD_CONSTANT},
    {2, {2, 5}, false, 2, {2, 3}, CT_PAD_REFLECT},           /* [C, W] */
    {3, {1, 3, 4}, true, 4, {1, 2, 2, 1}, CT_PAD_REFLECT},   /* [C, H, W] */
    {2, {2, 5}, true, 2, {-1, 2}, CT_PAD_REFLECT},           /* a negative (cropping) pad */
    {2, {2, 4}, false, 2, {2, 3}, CT_PAD_REPLICATE},
    {3, {1, 3, 3}, true, 4, {2, 0, 1, 3}, CT_PAD_REPLICATE},
    {2, {2, 3}, false, 2, {-2, 4}, CT_PAD_REPLICATE},        /* crops, then replicates */
    {4, {1, 1, 2, 3}, false, 4, {1, 1, 1, 1}, CT_PAD_REFLECT}, /* with a batch dim */
};
#define NPAD ((int)(sizeof pad_cases / sizeof pad_cases[0]))

static ct_status f_pad(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct pad_case *c = &pad_cases[*(int *)ctx];
  return ct_pad(out, in[0], c->npad, c->pad, c->mode, 0.5);
}

START_TEST(pad_gradcheck) {
  ct_device *d = ct_test_device();
  double v[24];
  for (int which = 0; which < NPAD; which++) {
    const struct pad_case *c = &pad_cases[which];
    gc_input in = {.ndim = c->ndim, .data = v, .requires_grad = true, .strided = c->strided};
    memcpy(in.shape, c->shape, sizeof c->shape);
    gc_fill(v, gc_numel(&in), -1.0, 1.0, 80 + which);
    char what[32];
    snprintf(what, sizeof what, "pad case %d", which);
    gc_check(d, what, f_pad, &which, 1, &in);
  }
  assert_nothing_allocated(d);
}
END_TEST

/* Reflect and replicate gradients by hand on [1 2 3 4]-shaped ones: how many times each input
 * element was copied. */
START_TEST(pad_border_counts) {
  ct_device *d = ct_test_device();
  int64_t sh[2] = {1, 4};
  double xv[4] = {1, 2, 3, 4};
  static const struct {
    ct_pad_mode mode;
    int64_t pad[2];
    double want[4];
  } cs[2] = {
      {CT_PAD_REFLECT, {3, 2}, {1, 3, 3, 2}},   /* 3 2 1 | 0 1 2 3 | 2 1 */
      {CT_PAD_REPLICATE, {2, 3}, {3, 1, 1, 4}}, /* 0 0 | 0 1 2 3 | 3 3 3 */
  };
  for (int k = 0; k < 2; k++) {
    ct_tensor *x = gc_from(d, 2, sh, xv), *y = NULL, *s = NULL, *g = NULL;
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    ck_assert_ct_ok(ct_pad(&y, x, 2, cs[k].pad, cs[k].mode, 0));
    ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
    ck_assert_ct_ok(ct_backward(s, NULL));
    ck_assert_ct_ok(ct_grad(&g, x));
    double *gv = gc_host(g);
    for (int i = 0; i < 4; i++) ck_assert_msg(gv[i] == cs[k].want[i], "mode %d elem %d: %g", k, i, gv[i]);
    free(gv);
    ct_release(g);
    ct_release(s);
    ct_release(y);
    ct_release(x);
  }
}
END_TEST

/* An f32 run through every shape op (it just has to backpropagate, in f32), and the
 * constructors that record nothing. */
START_TEST(f32_smoke_and_nondifferentiable) {
  ct_device *d = ct_test_device();
  int64_t sh[2] = {3, 4};
  float xv[12];
  for (int i = 0; i < 12; i++) xv[i] = (float)i / 4;
  ct_tensor *x = NULL, *t[8] = {0}, *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, sh, xv));
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_pad(&t[0], x, 2, (const int64_t[]){1, 2}, CT_PAD_REFLECT, 0));
  ck_assert_ct_ok(ct_flip(&t[1], t[0], 1, (const int[]){0}));
  ck_assert_ct_ok(ct_roll(&t[2], t[1], 1, 1));
  ct_tensor *pair[2] = {t[2], x};
  ck_assert_ct_ok(ct_cat(&t[3], pair, 2, 1));
  ck_assert_ct_ok(ct_tril(&t[4], t[3], 0));
  ck_assert_ct_ok(ct_repeat(&t[5], t[4], 2, (const int64_t[]){2, 1}));
  ct_tensor *two[2] = {t[5], t[5]};
  ck_assert_ct_ok(ct_stack(&t[6], two, 2, 0));
  ck_assert_ct_ok(ct_sum(&s, t[6], 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  ck_assert_int_eq(ct_tensor_dtype(g), CT_F32);
  ct_release(g);
  ct_release(s);
  /* not differentiable: results are leaves that do not require grad */
  ck_assert_ct_ok(ct_zeros_like(&t[7], x));
  ck_assert(!ct_requires_grad(t[7]) && ct_is_leaf(t[7]));
  ct_release(t[7]);
  ck_assert_ct_ok(ct_ones_like(&t[7], x));
  ck_assert(!ct_requires_grad(t[7]));
  ct_release(t[7]);
  ck_assert_ct_ok(ct_empty_like(&t[7], x));
  ck_assert(!ct_requires_grad(t[7]));
  ct_release(t[7]);
  for (int i = 0; i < 7; i++) ct_release(t[i]);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-shape");
  TCase *tc = tcase_create("shape");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, cat_stack_gradcheck);
  tcase_add_test(tc, cat_mixed_inputs);
  tcase_add_test(tc, reorder_gradcheck);
  tcase_add_test(tc, pad_gradcheck);
  tcase_add_test(tc, pad_border_counts);
  tcase_add_test(tc, f32_smoke_and_nondifferentiable);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
