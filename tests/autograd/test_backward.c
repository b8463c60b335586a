/* What one backward pass guarantees (issue #15): the graph's lifetime and memory, leaf gradients that
 * must never alias each other or the caller's tensors, failures in the middle of a pass (and in
 * its commit) that must change no leaf and leak nothing, requires-grad rules PyTorch has, and
 * grad mode per thread with two threads training at once.
 *
 * Everything runs in f64 (the kernels the rest of the suite builds), f32 without cl_khr_fp64
 * (gc_float); the memory tests use 2 MiB and 4 MiB tensors (of either dtype), which the caching
 * allocator serves as blocks of exactly that size, so the statistics count them without
 * rounding. The values compared exactly are small integers, exact in f32 too. */
#include <pthread.h>
#include <stdlib.h>

#include "gradcheck.h"

#define MIB ((uint64_t)1 << 20)

static ct_tensor *vec(ct_device *d, int64_t n, const double *v) { return gc_from(d, 1, &n, v); }

/* A 1-D tensor of the checks' float dtype (gc_float) of n elements, all v. */
static ct_tensor *full(ct_device *d, int64_t n, double v) {
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_full(&t, d, gc_float(d), 1, &n, v));
  return t;
}

/* The number of elements of the checks' float dtype in bytes. */
static int64_t elems(ct_device *d, uint64_t bytes) { return (int64_t)(bytes / ct_dtype_size(gc_float(d))); }

static ct_tensor *grad_of(const ct_tensor *t) {
  ct_tensor *g = NULL;
  ck_assert_ct_ok(ct_grad(&g, t));
  return g;
}

/* Checks that t (any float tensor) holds want[0..n) exactly (the values tested are exact in f64). */
static void expect(const ct_tensor *t, int64_t n, const double *want) {
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(ct_numel(t), n);
  double *v = gc_host(t);
  for (int64_t i = 0; i < n; i++) ck_assert_msg(v[i] == want[i], "element %lld: %g, want %g", (long long)i, v[i], want[i]);
  free(v);
}

/* Checks every element of t equals v. */
static void expect_all(const ct_tensor *t, double v) {
  ck_assert_ptr_nonnull(t);
  int64_t n = ct_numel(t);
  double *h = gc_host(t);
  for (int64_t i = 0; i < n; i++) ck_assert_msg(h[i] == v, "element %lld: %g, want %g", (long long)i, h[i], v);
  free(h);
}

static uint64_t allocated(ct_device *d) {
  ct_memory_stats s = {.size = sizeof s};
  ck_assert_ct_ok(ct_device_get_memory_stats(&s, d));
  return s.allocated_bytes;
}

static ct_tensor *sum_all(const ct_tensor *x) {
  ct_tensor *s = NULL;
  ck_assert_ct_ok(ct_sum(&s, x, 0, NULL, false));
  return s;
}

/* ---- leaf gradients never alias ---- */

/* x + z sends one gradient tensor to both leaves; each must get its own (accumulating into one
 * later must not change the other), and neither may be the caller's grad tensor. A reshape's
 * gradient is a view of its input's: the leaf must not share that storage with anything. */
START_TEST(leaf_gradients_are_distinct) {
  ct_device *d = ct_test_device();
  double one[3] = {1, 1, 1}, three[3] = {3, 3, 3}, four[3] = {4, 4, 4};
  ct_tensor *x = full(d, 3, 2), *z = full(d, 3, 5), *y = NULL, *s = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_set_requires_grad(z, true));
  ck_assert_ct_ok(ct_add(&y, x, z));
  s = sum_all(y);
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_tensor *gx = grad_of(x), *gz = grad_of(z);
  ck_assert_ptr_ne(gx, gz);
  expect(gx, 3, one);
  expect(gz, 3, one);
  ct_release(y);
  ct_release(s);
  /* a second graph through x only: gz must stay 1 */
  ck_assert_ct_ok(ct_mul_scalar(&y, x, 3.0));
  s = sum_all(y);
  ck_assert_ct_ok(ct_backward(s, NULL));
  expect(gx, 3, four);
  expect(gz, 3, one);
  ct_release(y);
  ct_release(s);
  ct_release(gx);
  ct_release(gz);

  /* the caller's grad goes unchanged through a pass-through (clone) into a fresh leaf */
  ct_tensor *w = full(d, 3, 1), *gin = full(d, 3, 3), *gw = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(w, true));
  ck_assert_ct_ok(ct_clone(&y, w));
  ck_assert_ct_ok(ct_backward(y, gin));
  gw = grad_of(w);
  ck_assert_ptr_ne(gw, gin);
  ck_assert_ct_ok(ct_fill_(gin, 7)); /* the caller reuses its tensor */
  expect(gw, 3, three);
  ct_release(gw);
  ct_release(y);

  /* a reshape chain: the leaf's gradient is a view of the pass's gradient, then stolen when
   * nothing else holds it; the next pass accumulates into it without touching gin */
  ct_tensor *m = NULL, *r = NULL;
  int64_t shape13[2] = {1, 3};
  ck_assert_ct_ok(ct_grad_clear(w));
  ck_assert_ct_ok(ct_reshape(&r, w, 2, shape13));
  ck_assert_ct_ok(ct_mul_scalar(&m, r, 2.0));
  ct_release(r);
  s = sum_all(m);
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_release(s);
  ct_release(m);
  ck_assert_ct_ok(ct_reshape(&r, w, 2, shape13));
  ck_assert_ct_status(ct_backward(r, NULL), CT_ERR_INVALID_ARGUMENT); /* 3 elements: needs grad */
  double g13v[3] = {1, 2, 3}, want[3] = {3, 4, 5};
  ct_tensor *g13 = vec(d, 3, g13v);
  ct_tensor *g13r = NULL;
  ck_assert_ct_ok(ct_reshape(&g13r, g13, 2, shape13));
  ck_assert_ct_ok(ct_backward(r, g13r));
  gw = grad_of(w);
  expect(gw, 3, want);
  expect(g13, 3, g13v);
  ct_release(gw);
  ct_release(g13r);
  ct_release(g13);
  ct_release(r);
  ct_release(gin);
  ct_release(w);
  ct_release(x);
  ct_release(z);
}
END_TEST

/* A leaf's gradient that is a slice of a larger one (cat's formula hands each input a view of
 * g) must not keep the larger storage alive: x gets g[0:n] of cat(x, 2 w)'s 2n-element gradient
 * while w's part goes on through the product. After the pass, only x, w and their two gradients
 * (2 MiB each) may remain. */
START_TEST(leaf_gradient_does_not_pin_a_larger_storage) {
  ct_device *d = ct_test_device();
  const uint64_t blk = 2 * MIB;
  const int64_t n = elems(d, blk);
  uint64_t base = allocated(d);
  ct_tensor *x = full(d, n, 1), *w = full(d, n, 2), *z = NULL, *c = NULL, *s = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_set_requires_grad(w, true));
  ck_assert_ct_ok(ct_mul_scalar(&z, w, 2.0));
  ck_assert_ct_ok(ct_cat(&c, (ct_tensor *const[]){x, z}, 2, 0));
  ct_release(z);
  ct_tensor *wt = full(d, 2 * n, 3), *p = NULL;
  ck_assert_ct_ok(ct_mul(&p, c, wt)); /* g of c: a fresh 2n-element tensor of 3s */
  ct_release(c);
  ct_release(wt);
  s = sum_all(p);
  ct_release(p);
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_release(s);
  ct_tensor *gx = grad_of(x), *gw = grad_of(w);
  expect_all(gx, 3);
  expect_all(gw, 6);
  ck_assert_msg(allocated(d) <= base + 4 * blk + MIB,
                "after the pass: %.1f MiB over the start, want 8 (x, w and their gradients)",
                (double)(allocated(d) - base) / MIB);
  ct_release(gx);
  ct_release(gw);
  ct_release(x);
  ct_release(w);
  ck_assert_uint_eq(allocated(d), base);
}
END_TEST

/* ---- requires-grad rules ---- */

/* A leaf whose flag is turned off after the graph was recorded takes no gradient (PyTorch's
 * AccumulateGrad returns early; torch 2.15: x.grad stays None). Other leaves still get theirs. */
START_TEST(flag_turned_off_after_recording) {
  ct_device *d = ct_test_device();
  double two[2] = {2, 2};
  ct_tensor *x = full(d, 2, 1), *w = full(d, 2, 2), *y = NULL, *s = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_set_requires_grad(w, true));
  ck_assert_ct_ok(ct_mul(&y, x, w));
  s = sum_all(y);
  ck_assert_ct_ok(ct_set_requires_grad(x, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_tensor *gx = grad_of(x), *gw = grad_of(w);
  ck_assert_ptr_null(gx);
  expect(gw, 2, (double[]){1, 1});
  ct_release(gw);
  ct_release(s);
  ct_release(y);
  /* and back on: accumulates again */
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_mul(&y, x, w));
  s = sum_all(y);
  ck_assert_ct_ok(ct_backward(s, NULL));
  gx = grad_of(x);
  expect(gx, 2, two);
  ct_release(gx);
  ct_release(s);
  ct_release(y);
  ct_release(x);
  ct_release(w);
}
END_TEST

/* ---- graph shapes ---- */

/* chunk pieces that are partly used: the unused piece's rows get zeros; pieces used with
 * different weights each send their own part back. */
START_TEST(chunk_pieces_partially_used) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {3, 2};
  double xv[6] = {1, 2, 3, 4, 5, 6};
  ct_tensor *x = gc_from(d, 2, shape, xv), *pieces[3] = {0}, *a = NULL, *s = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  int np = 0;
  ck_assert_ct_ok(ct_chunk(pieces, &np, x, 3, 0));
  ck_assert_int_eq(np, 3);
  ck_assert_ct_ok(ct_mul(&a, pieces[1], pieces[1])); /* only the middle row: d/dx = 2x there */
  for (int i = 0; i < np; i++) ct_release(pieces[i]);
  s = sum_all(a);
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_tensor *g = grad_of(x);
  expect(g, 6, (double[]){0, 0, 6, 8, 0, 0});
  ct_release(g);
  ct_release(a);
  ct_release(s);

  /* two of three pieces, weighted 2 and -1 */
  ck_assert_ct_ok(ct_grad_clear(x));
  ck_assert_ct_ok(ct_chunk(pieces, &np, x, 3, -2));
  ct_tensor *p0 = NULL, *p2 = NULL, *sum = NULL;
  ck_assert_ct_ok(ct_mul_scalar(&p0, pieces[0], 2.0));
  ck_assert_ct_ok(ct_mul_scalar(&p2, pieces[2], -1.0));
  for (int i = 0; i < np; i++) ct_release(pieces[i]);
  ck_assert_ct_ok(ct_add(&sum, p0, p2));
  s = sum_all(sum);
  ck_assert_ct_ok(ct_backward(s, NULL));
  g = grad_of(x);
  expect(g, 6, (double[]){2, 2, 0, 0, -1, -1});
  ct_release(g);
  ct_release(p0);
  ct_release(p2);
  ct_release(sum);
  ct_release(s);
  ct_release(x);
}
END_TEST

/* Pieces whose gradients meet in one accumulator: after the first piece the engine adds each
 * later piece's gradient into its slice of the accumulated one in place (the q, k, v split of
 * a projection). Pieces of split, an overlapping stepped slice and a piece used twice, on a
 * non-leaf (the accumulator of a node) and on a leaf; every column's weight is known. */
START_TEST(slice_pieces_accumulate_in_place) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {4, 6};
  double xv[24];
  for (int i = 0; i < 24; i++) xv[i] = 0.25 * i - 2;
  for (int leaf = 0; leaf < 2; leaf++) {
    ct_tensor *x = gc_from(d, 2, shape, xv), *y = NULL, *pieces[3] = {0}, *st = NULL, *acc = NULL;
    ck_assert_ct_ok(ct_set_requires_grad(x, true));
    if (leaf) y = ct_retain(x);
    else ck_assert_ct_ok(ct_mul_scalar(&y, x, 3.0));
    int np = 0;
    ck_assert_ct_ok(ct_split(pieces, &np, y, 2, 1));
    ck_assert_int_eq(np, 3);
    ck_assert_ct_ok(ct_slice(&st, y, 1, 1, 6, 2)); /* columns 1, 3, 5, overlapping every piece */
    const double wt[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
      ct_tensor *m = NULL, *s = NULL;
      ck_assert_ct_ok(ct_mul_scalar(&m, pieces[i], wt[i]));
      s = sum_all(m);
      if (acc) {
        ct_tensor *t = NULL;
        ck_assert_ct_ok(ct_add(&t, acc, s));
        ct_release(acc);
        ct_release(s);
        acc = t;
      } else acc = s;
      ct_release(m);
    }
    ct_tensor *m = NULL, *s = NULL, *t = NULL, *u = NULL;
    ck_assert_ct_ok(ct_mul_scalar(&m, st, 8.0));
    s = sum_all(m);
    ck_assert_ct_ok(ct_add(&t, acc, s));
    ct_tensor *s1 = sum_all(pieces[1]); /* piece 1 a second time: weight 2 + 1 */
    ck_assert_ct_ok(ct_add(&u, t, s1));
    for (int i = 0; i < 3; i++) ct_release(pieces[i]);
    ck_assert_ct_ok(ct_backward(u, NULL));
    double want[24];
    const double col[6] = {1, 1 + 8, 3, 3 + 8, 4, 4 + 8};
    for (int i = 0; i < 24; i++) want[i] = (leaf ? 1 : 3) * col[i % 6];
    ct_tensor *g = grad_of(x);
    expect(g, 24, want);
    ct_release(g);
    ct_release(s1);
    ct_release(u);
    ct_release(t);
    ct_release(s);
    ct_release(m);
    ct_release(acc);
    ct_release(st);
    ct_release(y);
    ct_release(x);
  }
}
END_TEST

/* A root that is a view of a leaf (a transpose: non-contiguous) with an explicit gradient. */
START_TEST(root_is_view_of_leaf) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {2, 3}, tshape[2] = {3, 2};
  double xv[6] = {0}, gv[6] = {1, 2, 3, 4, 5, 6}; /* gv as [3, 2] */
  ct_tensor *x = gc_from(d, 2, shape, xv), *t = NULL, *gt = gc_from(d, 2, tshape, gv);
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_transpose(&t, x, 0, 1));
  ck_assert(ct_requires_grad(t) && !ct_is_leaf(t));
  ck_assert_ct_ok(ct_backward(t, gt));
  ct_tensor *g = grad_of(x);
  expect(g, 6, (double[]){1, 3, 5, 2, 4, 6});
  ck_assert(ct_tensor_is_contiguous(g));
  ct_release(g);
  /* the view's graph is spent */
  ck_assert_ct_status(ct_backward(t, gt), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("second time");
  ct_release(t);
  ct_release(gt);
  ct_release(x);
}
END_TEST

/* One leaf in two graphs recorded before either runs: each backward adds its part; the second
 * graph still runs after the first freed its own nodes; releasing the leaf before the graphs
 * and the graphs in any order leaks nothing (LeakSanitizer). */
START_TEST(leaf_in_two_graphs) {
  ct_device *d = ct_test_device();
  double xv[2] = {1, 2};
  ct_tensor *x = vec(d, 2, xv), *y1 = NULL, *y2 = NULL, *s1 = NULL, *s2 = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_mul(&y1, x, x));           /* 2x */
  ck_assert_ct_ok(ct_mul_scalar(&y2, x, -3.0)); /* -3 */
  s1 = sum_all(y1);
  s2 = sum_all(y2);
  ct_tensor *keep = ct_retain(x);
  ct_release(x); /* the graphs and `keep` hold it */
  ck_assert_ct_ok(ct_backward(s2, NULL));
  ct_tensor *g = grad_of(keep);
  expect(g, 2, (double[]){-3, -3});
  ck_assert_ct_ok(ct_backward(s1, NULL));
  expect(g, 2, (double[]){-1, 1});
  ct_release(g);
  ct_release(keep);
  ct_release(y2);
  ct_release(s1);
  ct_release(s2);
  ct_release(y1);
}
END_TEST

/* A formula running out of device memory in the middle of a pass: the status says where, no
 * leaf gradient changes (p's was already computed when x's node failed), the graph is spent, and
 * every byte comes back. CLTENSOR_MEMORY_LIMIT = 12 MiB; x is 4 MiB: the forward holds x, x * x
 * (kept alive) and small blocks (10 MiB reserved), and x * x's backward needs at least one new
 * 4 MiB tensor, however the formula computes it. */
START_TEST(oom_in_the_middle_of_a_pass) {
  setenv("CLTENSOR_MEMORY_LIMIT", "12MiB", 1);
  ct_device *d = ct_test_device();
  uint64_t base = allocated(d);
  const int64_t n = elems(d, 4 * MIB);
  ct_tensor *x = full(d, n, 0.5), *p = full(d, 2, 1.0), *t = NULL, *xx = NULL, *s1 = NULL, *s2 = NULL, *loss = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_set_requires_grad(p, true));
  ck_assert_ct_ok(ct_mul(&xx, x, x));
  s1 = sum_all(xx);
  ck_assert_ct_ok(ct_mul_scalar(&t, p, 3.0));
  s2 = sum_all(t); /* recorded last: its branch runs first and gives p its gradient */
  ct_release(t);
  ck_assert_ct_ok(ct_add(&loss, s1, s2));
  ck_assert_ct_status(ct_backward(loss, NULL), CT_ERR_OUT_OF_MEMORY);
  ck_assert_error_contains("in the backward of EW");
  ct_tensor *gx = grad_of(x), *gp = grad_of(p);
  ck_assert_ptr_null(gx);
  ck_assert_ptr_null(gp);
  ck_assert_ct_status(ct_backward(loss, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("second time");
  ct_release(loss);
  ct_release(s1);
  ct_release(s2);
  ct_release(xx);
  ct_release(x);
  ct_release(p);
  ck_assert_uint_eq(allocated(d), base);
}
END_TEST

/* Running out of memory while committing: x1 and x2 both get the gradient of sum(x1 + x2), an
 * expanded (stride-0) view each leaf must copy. With CLTENSOR_MEMORY_LIMIT = 16 MiB one 4 MiB
 * copy fits (in the cached block x1 + x2 left) and the second does not: the pass must fail
 * without giving x1 its gradient (ct_backward "changes no leaf's gradient unless it succeeds"),
 * and without adding into an existing gradient either. */
START_TEST(oom_while_committing_changes_no_leaf) {
  setenv("CLTENSOR_MEMORY_LIMIT", "16MiB", 1);
  ct_device *d = ct_test_device();
  uint64_t base = allocated(d);
  const int64_t n = elems(d, 4 * MIB);
  ct_tensor *x1 = full(d, n, 1), *x2 = full(d, n, 2), *q = full(d, 2, 1), *t = NULL, *s = NULL, *u = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x1, true));
  ck_assert_ct_ok(ct_set_requires_grad(x2, true));
  ck_assert_ct_ok(ct_set_requires_grad(q, true));
  /* q gets a gradient first, which the failing pass must not add to */
  ck_assert_ct_ok(ct_mul_scalar(&t, q, 2.0));
  s = sum_all(t);
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_release(s);
  ct_release(t);
  ck_assert_ct_ok(ct_mul_scalar(&t, q, 5.0));
  u = sum_all(t); /* recorded first: its branch runs last; q is committed in place */
  ct_release(t);
  ck_assert_ct_ok(ct_add(&t, x1, x2));
  s = sum_all(t);
  ct_release(t);
  ct_tensor *loss = NULL;
  ck_assert_ct_ok(ct_add(&loss, u, s));
  ct_release(u);
  ct_release(s);
  ck_assert_ct_status(ct_backward(loss, NULL), CT_ERR_OUT_OF_MEMORY);
  ct_tensor *g1 = grad_of(x1), *g2 = grad_of(x2), *gq = grad_of(q);
  ck_assert_msg(g1 == NULL && g2 == NULL, "a failed ct_backward gave x1 (%p) or x2 (%p) a gradient", (void *)g1,
                (void *)g2);
  expect(gq, 2, (double[]){2, 2});
  ct_release(gq);
  ct_release(loss);
  /* with room again (x2 gone), the same rule gives both gradients */
  ct_release(x2);
  ck_assert_ct_ok(ct_add(&t, x1, x1));
  s = sum_all(t);
  ct_release(t);
  ck_assert_ct_ok(ct_backward(s, NULL));
  ct_release(s);
  g1 = grad_of(x1);
  expect_all(g1, 2);
  ct_release(g1);
  ct_release(x1);
  ct_release(q);
  ck_assert_uint_eq(allocated(d), base);
}
END_TEST

/* ---- formulas and the layout of the incoming gradient ---- */

/* Gradchecks weight the output (sum(f * w)), so every formula there receives a contiguous
 * gradient. In a real graph it receives whatever the consumer's formula made: a stride-0
 * expansion (behind a sum), a permuted view (behind a transpose). Each op below runs backward
 * four times on the same inputs: with a random contiguous G and with G as a transpose's
 * gradient (a permuted view; ndim >= 2), with a G constant along the last dim and with that G
 * as the expansion a sum over the last dim sends. The gradients must agree (the same arithmetic
 * on the same values: 1e-12 relative, scaled by gc_tol in f32). */
enum {
  L_LAYER_NORM, L_RMS_NORM, L_BATCH_NORM, L_SDPA, L_DROPOUT, L_CROSS_ENTROPY, L_NLL, L_MSE, L_SOFTMAX,
  L_LOG_SOFTMAX, L_LOGSUMEXP, L_VAR, L_AMAX, L_PROD, L_MEAN, L_CUMSUM, L_CUMPROD, L_INDEX_SELECT, L_GATHER,
  L_EMBEDDING, L_MATMUL, L_LINEAR, L_ADDMM, L_FLIP, L_ROLL, L_REPEAT, L_TRIL, L_PAD, L_CAT, L_WHERE, L_CLAMP,
  L_CAST, L_COUNT
};

static ct_status f_layout(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  int op = *(int *)ctx;
  int d1 = 1, dm1 = -1;
  switch (op) {
  case L_LAYER_NORM: return ct_layer_norm(out, in[0], 1, in[1], in[2], 1e-5);
  case L_RMS_NORM: return ct_rms_norm(out, in[0], 1, in[1], 1e-6);
  case L_BATCH_NORM: return ct_batch_norm(out, in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
  case L_SDPA: return ct_scaled_dot_product_attention(out, in[0], in[1], in[2], NULL, true, 0.5);
  case L_DROPOUT:
    ct_manual_seed(11); /* the same mask on every run */
    return ct_dropout(out, in[0], 0.25, true);
  case L_CROSS_ENTROPY: return ct_cross_entropy(out, in[0], in[1], -100, 0.1, CT_REDUCTION_NONE);
  case L_NLL: return ct_nll_loss(out, in[0], in[1], -100, CT_REDUCTION_NONE);
  case L_MSE: return ct_mse_loss(out, in[0], in[1], CT_REDUCTION_NONE);
  case L_SOFTMAX: return ct_softmax(out, in[0], -1);
  case L_LOG_SOFTMAX: return ct_log_softmax(out, in[0], 0);
  case L_LOGSUMEXP: return ct_logsumexp(out, in[0], 1, &d1, false);
  case L_VAR: return ct_var(out, in[0], 1, &d1, 1, false);
  case L_AMAX: return ct_max(out, in[0], 1, &d1, true);
  case L_PROD: return ct_prod(out, in[0], 1, &dm1, true);
  case L_MEAN: return ct_mean(out, in[0], 1, &d1, false);
  case L_CUMSUM: return ct_cumsum(out, in[0], 0);
  case L_CUMPROD: return ct_cumprod(out, in[0], 1);
  case L_INDEX_SELECT: return ct_index_select(out, in[0], 1, in[1]);
  case L_GATHER: return ct_gather(out, in[0], 1, in[1]);
  case L_EMBEDDING: return ct_embedding(out, in[0], in[1]);
  case L_MATMUL: return ct_matmul(out, in[0], in[1]);
  case L_LINEAR: return ct_linear(out, in[0], in[1], in[2]);
  case L_ADDMM: return ct_addmm(out, in[0], in[1], in[2], 0.5, 2.0);
  case L_FLIP: return ct_flip(out, in[0], 1, &d1);
  case L_ROLL: return ct_roll(out, in[0], 2, 1);
  case L_REPEAT: return ct_repeat(out, in[0], 2, (const int64_t[]){2, 1});
  case L_TRIL: return ct_tril(out, in[0], 0);
  case L_PAD: return ct_pad(out, in[0], 2, (const int64_t[]){1, 0}, CT_PAD_REFLECT, 0);
  case L_CAT: return ct_cat(out, (ct_tensor *const[]){in[0], in[1]}, 2, 1);
  case L_WHERE: {
    ct_tensor *c = NULL;
    ct_status st = ct_gt_scalar(&c, in[2], 0.0);
    if (st == CT_OK) st = ct_where(out, c, in[0], in[1]);
    ct_release(c);
    return st;
  }
  case L_CLAMP: return ct_clamp(out, in[0], -0.5, 0.5);
  default: return ct_cast(out, in[0], CT_F32);
  }
}

/* The inputs of op (values filled by the caller from the seeds). */
static int layout_inputs(int op, gc_input *in, double (*buf)[64]) {
  static const double idx3[3] = {2, 0, 2}, gidx[6] = {1, 3, 0, 0, 2, 1}, emb[4] = {4, 0, 4, 2}, tgt[4] = {1, 4, 0, 2};
  memset(in, 0, GC_MAX_IN * sizeof *in);
#define IN(i, nd, ...) (in[i] = (gc_input){.ndim = nd, .shape = {__VA_ARGS__}, .data = buf[i], .requires_grad = true})
  switch (op) {
  case L_LAYER_NORM: IN(0, 2, 3, 4); IN(1, 1, 4); IN(2, 1, 4); return 3;
  case L_RMS_NORM: IN(0, 2, 3, 4); IN(1, 1, 4); return 2;
  case L_BATCH_NORM: IN(0, 3, 4, 3, 2); IN(1, 1, 3); IN(2, 1, 3); return 3;
  case L_SDPA: IN(0, 3, 2, 3, 4); IN(1, 3, 2, 5, 4); IN(2, 3, 2, 5, 4); return 3;
  case L_CROSS_ENTROPY:
  case L_NLL:
    IN(0, 2, 4, 5);
    in[1] = (gc_input){.ndim = 1, .shape = {4}, .data = (double *)tgt, .integer = true};
    return 2;
  case L_MSE: IN(0, 2, 3, 4); IN(1, 2, 3, 4); return 2;
  case L_LOGSUMEXP: case L_VAR: case L_AMAX: case L_MEAN: case L_PAD: IN(0, 3, 3, 4, 2); return 1;
  case L_INDEX_SELECT:
    IN(0, 2, 3, 4);
    in[1] = (gc_input){.ndim = 1, .shape = {3}, .data = (double *)idx3, .integer = true};
    return 2;
  case L_GATHER:
    IN(0, 2, 3, 4);
    in[1] = (gc_input){.ndim = 2, .shape = {3, 2}, .data = (double *)gidx, .integer = true};
    return 2;
  case L_EMBEDDING:
    IN(0, 2, 5, 3);
    in[1] = (gc_input){.ndim = 2, .shape = {2, 2}, .data = (double *)emb, .integer = true};
    return 2;
  case L_MATMUL: IN(0, 2, 3, 4); IN(1, 2, 4, 2); return 2;
  case L_LINEAR: IN(0, 2, 3, 4); IN(1, 2, 2, 4); IN(2, 1, 2); return 3;
  case L_ADDMM: IN(0, 1, 2); IN(1, 2, 3, 4); IN(2, 2, 4, 2); return 3;
  case L_CAT: IN(0, 2, 3, 2); IN(1, 2, 3, 3); return 2;
  case L_WHERE: IN(0, 2, 3, 4); IN(1, 1, 4); IN(2, 2, 3, 4); in[2].requires_grad = false; return 3;
  default: IN(0, 2, 3, 4); return 1;
  }
#undef IN
}

/* One backward of op's output through `how`: 0 root = out with grad G; 1 root = out^T with
 * grad G^T (contiguous); 2 root = sum(out, -1) with grad Gs (G = Gs expanded). G is random
 * (how 0, 1) or constant along the last dim (how 2, and how 0 when rowconst). Returns the
 * gradients of the inputs that require grad, as host arrays. */
static void layout_run(ct_device *d, int op, int nin, const gc_input *in, int how, bool rowconst, double **grads) {
  ct_tensor *t[GC_MAX_IN] = {0}, *out = NULL, *root = NULL, *g = NULL;
  for (int i = 0; i < nin; i++) {
    t[i] = gc_make(d, &in[i]);
    if (in[i].requires_grad) ck_assert_ct_ok(ct_set_requires_grad(t[i], true));
  }
  ck_assert_ct_ok(f_layout(&out, t, &op));
  int nd = ct_tensor_ndim(out);
  const int64_t *sh = ct_tensor_shape(out);
  int64_t n = ct_numel(out), last = nd ? sh[nd - 1] : 1, hs[CT_MAX_DIMS];
  double *G = malloc((size_t)n * sizeof *G), *H = malloc((size_t)n * sizeof *H);
  ck_assert(G && H);
  uint64_t seed = 77 + (uint64_t)op;
  for (int64_t e = 0; e < n; e++) G[e] = rowconst ? 0.25 + (double)(e / last) : -1 + 2 * gc_rand(&seed);
  if (how == 0) {
    root = ct_retain(out);
    g = gc_from(d, nd, sh, G);
  } else if (how == 1) {
    ck_assert_ct_ok(ct_transpose(&root, out, -1, -2));
    int64_t rows = sh[nd - 2], batch = n / (rows * last);
    for (int64_t b = 0; b < batch; b++) /* H = G with its last two dims swapped, contiguous */
      for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < last; c++) H[(b * last + c) * rows + r] = G[(b * rows + r) * last + c];
    memcpy(hs, sh, (size_t)nd * sizeof *hs);
    hs[nd - 2] = last;
    hs[nd - 1] = rows;
    g = gc_from(d, nd, hs, H);
  } else {
    int dm1 = -1;
    ck_assert_ct_ok(ct_sum(&root, out, 1, &dm1, false));
    for (int64_t r = 0; r < n / last; r++) H[r] = G[r * last];
    g = gc_from(d, nd - 1, sh, H);
  }
  ck_assert_msg(ct_backward(root, g) == CT_OK, "layout op %d how %d: %s", op, how, ct_last_error());
  for (int i = 0; i < nin; i++) {
    grads[i] = NULL;
    if (!in[i].requires_grad) continue;
    ct_tensor *gi = grad_of(t[i]);
    ck_assert_msg(gi != NULL, "layout op %d how %d: input %d got no gradient", op, how, i);
    grads[i] = gc_host(gi);
    ct_release(gi);
  }
  free(G);
  free(H);
  ct_release(g);
  ct_release(root);
  ct_release(out);
  for (int i = 0; i < nin; i++) ct_release(t[i]);
}

START_TEST(formulas_take_any_gradient_layout) {
  ct_device *d = ct_test_device();
  const double rel = gc_tol(gc_float(d), 1e-12);
  for (int op = 0; op < L_COUNT; op++) {
    gc_input in[GC_MAX_IN];
    double buf[GC_MAX_IN][64];
    int nin = layout_inputs(op, in, buf);
    for (int i = 0; i < nin; i++)
      if (!in[i].integer) gc_fill(buf[i], gc_numel(&in[i]), -1.0, 1.0, 1000 + 10 * (uint64_t)op + (uint64_t)i);
    if (op == L_PROD || op == L_CUMPROD) gc_fill(buf[0], gc_numel(&in[0]), 0.5, 1.5, 5);
    for (int pair = 0; pair < 2; pair++) {
      double *ref[GC_MAX_IN], *got[GC_MAX_IN];
      layout_run(d, op, nin, in, 0, pair == 1, ref);
      /* a transpose needs 2 dims, a sum over the last dim 1 */
      ct_tensor *probe[GC_MAX_IN] = {0}, *o = NULL;
      bool prev = ct_set_grad_enabled(false);
      for (int i = 0; i < nin; i++) probe[i] = gc_make(d, &in[i]);
      ck_assert_ct_ok(f_layout(&o, probe, &op));
      int nd = ct_tensor_ndim(o);
      ct_release(o);
      for (int i = 0; i < nin; i++) ct_release(probe[i]);
      ct_set_grad_enabled(prev);
      int how = pair == 0 ? 1 : 2;
      if (nd >= (how == 1 ? 2 : 1)) {
        layout_run(d, op, nin, in, how, pair == 1, got);
        for (int i = 0; i < nin; i++) {
          if (!ref[i]) continue;
          for (int64_t e = 0; e < gc_numel(&in[i]); e++)
            ck_assert_msg(fabs(got[i][e] - ref[i][e]) <= rel * (1 + fabs(ref[i][e])),
                          "op %d, %s gradient: input %d element %lld is %.17g, with a contiguous one %.17g", op,
                          how == 1 ? "a transposed" : "an expanded", i, (long long)e, got[i][e], ref[i][e]);
          free(got[i]);
        }
      }
      for (int i = 0; i < nin; i++) free(ref[i]);
    }
  }
}
END_TEST

/* ---- memory of a pass ---- */

/* A 16-layer model y_k = tanh(y_{k-1} * w_k) with 2 MiB weights and activations. The forward
 * holds the weights and the activations (2N + 1 blocks with the input); the backward turns
 * activations into weight gradients one layer at a time, because each node frees what it saved
 * as soon as it ran. Its peak is the forward's plus one node's gradient and temporaries (4
 * blocks today: tanh's backward makes three products); the bound allows 10. Keeping the saved
 * tensors until the end of the pass would need another N blocks for the gradients (3N + 1 =
 * 49 blocks, the bound is 43). After the pass, with the loss (and so the graph) still alive,
 * only the weights, their gradients and the input remain; after releasing everything, nothing. */
START_TEST(peak_memory_of_a_pass) {
  enum { N = 16 };
  ct_device *d = ct_test_device();
  const uint64_t blk = 2 * MIB;
  const int64_t n = elems(d, blk);
  uint64_t base = allocated(d);
  ct_tensor *w[N], *x = full(d, n, 0.25), *y = ct_retain(x);
  for (int k = 0; k < N; k++) {
    w[k] = full(d, n, 1.0 + 0.01 * k);
    ck_assert_ct_ok(ct_set_requires_grad(w[k], true));
  }
  ck_assert_ct_ok(ct_memory_reset_peak(d));
  for (int k = 0; k < N; k++) {
    ct_tensor *p = NULL, *t = NULL;
    ck_assert_ct_ok(ct_mul(&p, y, w[k]));
    ck_assert_ct_ok(ct_tanh(&t, p));
    ct_release(p);
    ct_release(y);
    y = t;
  }
  ct_tensor *loss = sum_all(y);
  ct_release(y);
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ct_memory_stats st = {.size = sizeof st};
  ck_assert_ct_ok(ct_device_get_memory_stats(&st, d));
  uint64_t small = MIB; /* scalars, reduction partials: small-pool blocks far below this */
  uint64_t bound = base + (2 * N + 1 + 10) * blk + small;
  ck_assert_msg(st.peak_allocated_bytes <= bound,
                "peak %.1f MiB over the start, bound %.1f MiB (activations %d x 2 MiB, weights %d x 2 MiB)",
                (double)(st.peak_allocated_bytes - base) / MIB, (double)(bound - base) / MIB, N, N);
  /* the forward alone peaked at 2N + 1 blocks: the peak is at least that (sanity of the count) */
  ck_assert_uint_ge(st.peak_allocated_bytes, base + (2 * N + 1) * blk);
  ck_assert_msg(st.allocated_bytes <= base + (2 * N + 1) * blk + small,
                "after the pass, with the graph alive: %.1f MiB over the start, want at most the weights, their "
                "gradients and the input (%d x 2 MiB)",
                (double)(st.allocated_bytes - base) / MIB, 2 * N + 1);
  ct_tensor *g = grad_of(w[N - 1]);
  ck_assert_int_eq(ct_numel(g), n);
  ct_release(g);
  ct_release(loss);
  for (int k = 0; k < N; k++) ct_release(w[k]);
  ct_release(x);
  ck_assert_uint_eq(allocated(d), base);
}
END_TEST

/* ---- threads ---- */

/* Each thread trains w (3 elements) on loss = sum((w x - t)^2) with plain gradient descent for
 * STEPS steps, updating w with grad mode off in its own thread only; a third thread runs with
 * grad mode off throughout and checks that its results record nothing while the trainers'
 * do. A barrier starts every step of all three together. Failures are reported as text (Check's
 * assertions belong to the test's main thread). */
enum { STEPS = 8 };
struct trainer {
  ct_device *d;
  pthread_barrier_t *bar;
  int role; /* 0, 1: trainers; 2: the thread with grad mode off */
  ct_dtype dt; /* gc_float: f64, or f32 without cl_khr_fp64 */
  double w[3], x[3], t[3], lr;
  char err[256];
};

#define TFAIL(tr, ...)                                          \
  do {                                                          \
    if (!(tr)->err[0]) snprintf((tr)->err, sizeof (tr)->err, __VA_ARGS__); \
  } while (0)
#define TOK(tr, call)                                                              \
  do {                                                                             \
    ct_status st_ = (call);                                                        \
    if (st_ != CT_OK) TFAIL(tr, "role %d: %s: %s", (tr)->role, #call, ct_last_error()); \
  } while (0)

static void trainer_step(struct trainer *tr, ct_tensor *w, ct_tensor *x, ct_tensor *t) {
  ct_tensor *p = NULL, *e = NULL, *q = NULL, *loss = NULL, *g = NULL, *u = NULL;
  TOK(tr, ct_mul(&p, w, x));
  if (p) TOK(tr, ct_sub(&e, p, t));
  if (e) TOK(tr, ct_mul(&q, e, e));
  if (q) TOK(tr, ct_sum(&loss, q, 0, NULL, false));
  if (loss && !ct_requires_grad(loss)) TFAIL(tr, "role %d: the loss records nothing", tr->role);
  if (loss) TOK(tr, ct_backward(loss, NULL));
  TOK(tr, ct_grad(&g, w));
  bool prev = ct_set_grad_enabled(false);
  if (g) TOK(tr, ct_mul_scalar(&u, g, tr->lr));
  if (u) TOK(tr, ct_sub_out(w, w, u));
  ct_set_grad_enabled(prev);
  TOK(tr, ct_grad_clear(w));
  ct_release(p);
  ct_release(e);
  ct_release(q);
  ct_release(loss);
  ct_release(g);
  ct_release(u);
}

/* *out: v[0..3) as a 1-D tensor of dtype dt (converted on the host: no Check assertion here). */
static ct_status trainer_vec(ct_tensor **out, ct_device *d, ct_dtype dt, const double *v) {
  unsigned char b[3 * 8];
  const size_t es = ct_dtype_size(dt);
  for (int i = 0; i < 3; i++) ct__host_store_double(dt, b + i * es, v[i]);
  return ct_from_host(out, d, dt, 1, (const int64_t[]){3}, b);
}

static void *trainer_main(void *arg) {
  struct trainer *tr = arg;
  if (!ct_is_grad_enabled()) TFAIL(tr, "role %d: grad mode is off in a new thread", tr->role);
  ct_tensor *w = NULL, *x = NULL, *t = NULL;
  TOK(tr, trainer_vec(&w, tr->d, tr->dt, tr->w));
  TOK(tr, trainer_vec(&x, tr->d, tr->dt, tr->x));
  TOK(tr, trainer_vec(&t, tr->d, tr->dt, tr->t));
  if (tr->role == 2) ct_set_grad_enabled(false);
  else if (w) TOK(tr, ct_set_requires_grad(w, true));
  for (int s = 0; s < STEPS; s++) {
    pthread_barrier_wait(tr->bar);
    if (tr->err[0] || !w || !x || !t) continue;
    if (tr->role < 2) {
      trainer_step(tr, w, x, t);
      continue;
    }
    /* grad mode off here while the others record: nothing here records, even from a leaf
     * that requires grad */
    ct_tensor *y = NULL;
    TOK(tr, ct_set_requires_grad(x, true));
    TOK(tr, ct_mul(&y, x, w));
    if (y && ct_requires_grad(y)) TFAIL(tr, "role 2: recorded with grad mode off");
    if (ct_is_grad_enabled()) TFAIL(tr, "role 2: grad mode came back on");
    TOK(tr, ct_set_requires_grad(x, false));
    ct_release(y);
  }
  if (w && tr->role < 2) {
    unsigned char b[3 * 8];
    const size_t es = ct_dtype_size(tr->dt);
    TOK(tr, ct_to_host(w, b, 3 * es));
    for (int i = 0; i < 3; i++) tr->w[i] = ct__host_load_double(tr->dt, b + i * es);
  }
  ct_release(w);
  ct_release(x);
  ct_release(t);
  return NULL;
}

START_TEST(threads_train_independently) {
  ct_device *d = ct_test_device();
  pthread_barrier_t bar;
  ck_assert_int_eq(pthread_barrier_init(&bar, NULL, 3), 0);
  const ct_dtype dt = gc_float(d);
  struct trainer tr[3] = {
      {.d = d, .bar = &bar, .role = 0, .dt = dt, .w = {0.5, -1, 2}, .x = {1, 2, 3}, .t = {2, 0, 1}, .lr = 0.05},
      {.d = d, .bar = &bar, .role = 1, .dt = dt, .w = {1, 1, 1}, .x = {-1, 0.5, 2}, .t = {1, 1, -3}, .lr = 0.1},
      {.d = d, .bar = &bar, .role = 2, .dt = dt, .w = {1, 2, 3}, .x = {1, 1, 1}, .t = {0, 0, 0}},
  };
  /* grad mode off in the creating thread does not reach the new threads */
  bool prev = ct_set_grad_enabled(false);
  pthread_t th[3];
  for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, trainer_main, &tr[i]), 0);
  for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
  ck_assert(!ct_is_grad_enabled());
  ct_set_grad_enabled(prev);
  pthread_barrier_destroy(&bar);
  for (int i = 0; i < 3; i++) ck_assert_msg(!tr[i].err[0], "%s", tr[i].err);
  /* the same descent on the host: grad = 2 (w x - t) x. Each step contracts the error (|1 - 2 lr
   * x^2| <= 0.95), so in f32 the device's roundings stay some u of w: gc_tol scales 1e-12. */
  const double tol = gc_tol(dt, 1e-12);
  for (int i = 0; i < 2; i++) {
    static const double w0[2][3] = {{0.5, -1, 2}, {1, 1, 1}};
    double w[3] = {w0[i][0], w0[i][1], w0[i][2]};
    for (int s = 0; s < STEPS; s++)
      for (int j = 0; j < 3; j++) {
        double e = w[j] * tr[i].x[j] - tr[i].t[j];
        w[j] -= (e + e) * tr[i].x[j] * tr[i].lr;
      }
    for (int j = 0; j < 3; j++)
      ck_assert_msg(fabs(tr[i].w[j] - w[j]) <= tol * (1 + fabs(w[j])), "trainer %d w[%d] = %.17g, host %.17g", i,
                    j, tr[i].w[j], w[j]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-backward");
  TCase *tc = tcase_create("backward");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, leaf_gradients_are_distinct);
  tcase_add_test(tc, leaf_gradient_does_not_pin_a_larger_storage);
  tcase_add_test(tc, flag_turned_off_after_recording);
  tcase_add_test(tc, chunk_pieces_partially_used);
  tcase_add_test(tc, slice_pieces_accumulate_in_place);
  tcase_add_test(tc, root_is_view_of_leaf);
  tcase_add_test(tc, leaf_in_two_graphs);
  tcase_add_test(tc, oom_in_the_middle_of_a_pass);
  tcase_add_test(tc, oom_while_committing_changes_no_leaf);
  tcase_add_test(tc, formulas_take_any_gradient_layout);
  tcase_add_test(tc, peak_memory_of_a_pass);
  tcase_add_test(tc, threads_train_independently);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
