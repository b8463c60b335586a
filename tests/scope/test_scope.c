/* Scopes (include/cltensor/scope.h): what a scope owns is released at its end and nothing
 * else (live tensor handles and allocated bytes return to where they were), nesting, keeping,
 * ct_release inside a scope, autograd across a scope's end, threads with scopes of their own,
 * the sticky error, and out of memory while recording. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "ct_test.h"
#include "tensor/scope.h"
#include "tensor/tensor.h"

/* Live tensor handles and allocated device bytes: what must return to its value. */
typedef struct {
  long live;
  uint64_t bytes;
} usage;

/* After ct_device_synchronize, which runs what the fusion graph recorded: it holds references to
 * its inputs until then. Called outside failed scopes (ct_device_get_memory_stats would be skipped). */
static usage usage_now(ct_device *d) {
  ct_memory_stats ms = {.size = sizeof ms};
  ck_assert_ct_ok(ct_device_synchronize(d));
  ck_assert_ct_ok(ct_device_get_memory_stats(&ms, d));
  return (usage){ct__tensor_live(), ms.allocated_bytes};
}

#define ck_assert_usage_eq(a, b)                                                                    \
  do {                                                                                              \
    usage a_ = (a), b_ = (b);                                                                       \
    ck_assert_msg(a_.live == b_.live && a_.bytes == b_.bytes,                                       \
                  "live tensors %ld, allocated bytes %llu; expected %ld and %llu", a_.live,          \
                  (unsigned long long)a_.bytes, b_.live, (unsigned long long)b_.bytes);            \
  } while (0)

static ct_tensor *from_floats(ct_device *d, int ndim, const int64_t *shape, const float *v) {
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, ndim, shape, v));
  return t;
}

/* A chain of calls handing out tensors every way the API does: op results, views, a no-op
 * ct_contiguous (a retained reference), two outs (ct_sort), an array of outs (ct_chunk). None
 * is released: the scope does it. *sum gets the sum of relu(x * 2 + x^T) (read in the scope). */
static void chain(ct_device *d, float *sum) {
  float v[6] = {1, -2, 3, -4, 5, -6};
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  ct_tensor *x, *xt, *xr, *y, *z, *r, *c, *s, *vals, *idx, *pieces[3];
  int npieces = 0;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, s23, v));
  ck_assert_ct_ok(ct_view(&xr, x, 2, s32));
  ck_assert_ct_ok(ct_transpose(&xt, xr, 0, 1));
  ck_assert_ct_ok(ct_mul_scalar(&y, x, 2));
  ck_assert_ct_ok(ct_add(&z, y, xt));
  ck_assert_ct_ok(ct_relu(&r, z));
  ck_assert_ct_ok(ct_contiguous(&c, r));
  ck_assert_ct_ok(ct_sort(&vals, &idx, c, 1, false));
  ck_assert_ct_ok(ct_chunk(pieces, &npieces, c, 3, 1));
  ck_assert_int_eq(npieces, 3);
  ck_assert_ct_ok(ct_sum(&s, vals, 0, NULL, false));
  ck_assert_ct_ok(ct_to_host(s, sum, sizeof *sum));
}

/* x = [[1,-2,3],[-4,5,-6]], x viewed [3,2] and transposed: [[1,3,5],[-2,-4,-6]];
 * 2x + that = [[3,-1,11],[-10,6,-18]]; relu sums to 20. */
#define CHAIN_SUM 20.0f

START_TEST(test_releases_everything) {
  ct_device *d = ct_test_device();
  float sum = 0;
  /* Once outside the measurement: kernels, caches and per-device state come to stay. */
  ck_assert_ct_ok(ct_scope_begin());
  chain(d, &sum);
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_float_eq(sum, CHAIN_SUM);

  usage before = usage_now(d);
  ck_assert_int_eq(ct_scope_depth(), 0);
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_int_eq(ct_scope_depth(), 1);
  chain(d, &sum);
  ck_assert_msg(ct__tensor_live() > before.live + 10, "the chain's tensors are alive until the end");
  ck_assert_ct_ok(ct_scope_status());
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_int_eq(ct_scope_depth(), 0);
  ck_assert_float_eq(sum, CHAIN_SUM);
  ck_assert_usage_eq(usage_now(d), before);

  /* Tensors made before the scope are untouched by it. */
  int64_t n = 4;
  float v[4] = {1, 2, 3, 4};
  ct_tensor *keep_me = from_floats(d, 1, &n, v);
  ck_assert_ct_ok(ct_scope_begin());
  ct_tensor *t;
  ck_assert_ct_ok(ct_neg(&t, keep_me));
  ck_assert_ct_ok(ct_scope_end());
  float back[4];
  ck_assert_ct_ok(ct_to_host(keep_me, back, sizeof back));
  ck_assert_float_eq(back[3], 4);
  ct_release(keep_me);
  ck_assert_usage_eq(usage_now(d), before);

  ck_assert_ct_status(ct_scope_end(), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_scope_end: no scope is open");
}
END_TEST

START_TEST(test_nested_and_keep) {
  ct_device *d = ct_test_device();
  int64_t n = 3;
  float v[3] = {1, 2, 3};
  ct_tensor *warm = from_floats(d, 1, &n, v), *w2;
  ck_assert_ct_ok(ct_mul(&w2, warm, warm));
  ct_release(w2);
  ct_release(warm);
  usage start = usage_now(d);

  ct_tensor *a, *b, *c;
  ck_assert_ct_ok(ct_scope_begin());
  a = from_floats(d, 1, &n, v);
  long outer_live = ct__tensor_live();
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_int_eq(ct_scope_depth(), 2);
  ck_assert_ct_ok(ct_mul(&b, a, a));
  ck_assert_ct_ok(ct_add(&c, b, a));
  ck_assert_ct_ok(ct_keep(c));
  /* c moved to the outer scope: keeping it again from the inner one is an error. */
  ck_assert_ct_status(ct_keep(c), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_keep: the tensor is not owned by the innermost scope");
  ck_assert_ct_status(ct_scope_end(), CT_ERR_INVALID_ARGUMENT);
  /* The inner scope failed (the bad keep), and so did the outer one with it; c is alive. */
  ck_assert_int_eq(ct_scope_depth(), 1);
  ck_assert_int_eq(ct__tensor_live(), outer_live + 1);
  ck_assert_ct_status(ct_scope_status(), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_keep:");
  float back[3] = {0};
  ck_assert_ct_status(ct_to_host(c, back, sizeof back), CT_ERR_INVALID_ARGUMENT);
  ck_assert_float_eq(back[2], 0); /* skipped: nothing read */
  ck_assert_ct_ok(ct_keep(c));    /* works in a failed scope: c is the caller's now */
  ck_assert_ct_status(ct_scope_end(), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ct_scope_depth(), 0);
  ck_assert_ct_ok(ct_to_host(c, back, sizeof back));
  ck_assert_float_eq(back[2], 12);
  ct_release(c);
  ck_assert_usage_eq(usage_now(d), start);

  /* The same without the mistake: keep from an inner scope, then from the outermost. */
  ck_assert_ct_ok(ct_scope_begin());
  a = from_floats(d, 1, &n, v);
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_ct_ok(ct_mul(&b, a, a));
  ck_assert_ct_ok(ct_keep(b));
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_ct_ok(ct_keep(b));
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_ct_ok(ct_to_host(b, back, sizeof back));
  ck_assert_float_eq(back[1], 4);
  ct_release(b);
  ck_assert_usage_eq(usage_now(d), start);

  /* Outside every scope ct_keep has nothing to do. */
  ck_assert_ct_status(ct_keep(NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("no scope is open");
}
END_TEST

/* The idiom of scope.h: a function is its ops, and its result is kept for the caller. */
static ct_status affine_relu(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *b) {
  ct_tensor *h, *a;
  ct_scope_begin();
  ct_matmul(&h, x, w);
  ct_add(&a, h, b);
  ct_relu(out, a);
  return ct_scope_end_keep(out);
}

START_TEST(test_function_idiom) {
  ct_device *d = ct_test_device();
  int64_t sx[2] = {2, 2}, sb = 2, sbad[2] = {3, 2};
  float xv[4] = {1, 2, 3, 4}, wv[4] = {1, -1, 1, 1}, bv[2] = {0, -5}, bad[6] = {0};
  ct_tensor *x = from_floats(d, 2, sx, xv), *w = from_floats(d, 2, sx, wv), *b = from_floats(d, 1, &sb, bv);
  ct_tensor *wbad = from_floats(d, 2, sbad, bad), *y = NULL;
  ck_assert_ct_ok(affine_relu(&y, x, w, b)); /* warm */
  ct_release(y);
  usage start = usage_now(d);

  /* Outside any scope: the result is the caller's. */
  ck_assert_ct_ok(affine_relu(&y, x, w, b));
  float back[4];
  ck_assert_ct_ok(ct_to_host(y, back, sizeof back));
  /* x @ w = [[3, 1], [7, 1]]; + b = [[3, -4], [7, -4]]; relu */
  ck_assert_float_eq(back[0], 3);
  ck_assert_float_eq(back[1], 0);
  ck_assert_float_eq(back[2], 7);
  ck_assert_float_eq(back[3], 0);
  ct_release(y);
  ck_assert_usage_eq(usage_now(d), start);

  /* Inside a caller's scope: the result joins it. */
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_ct_ok(affine_relu(&y, x, w, b));
  ck_assert_ct_ok(affine_relu(&y, y, w, b));
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_usage_eq(usage_now(d), start);

  /* A failure: the first call's error, *out NULL, nothing left behind. */
  y = x;
  ck_assert_ct_status(affine_relu(&y, x, wbad, b), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(y);
  ck_assert_msg(strncmp(ct_last_error(), "ct_matmul: ", 11) == 0, "message names the call: %s", ct_last_error());
  ck_assert_int_eq(ct_scope_depth(), 0);
  ck_assert_usage_eq(usage_now(d), start);

  /* ct_scope_end_keep of a tensor the scope does not own: an error, *t NULL, the scope ends. */
  ck_assert_ct_ok(ct_scope_begin());
  y = x;
  ck_assert_ct_status(ct_scope_end_keep(&y), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("ct_scope_end_keep: the tensor is not owned");
  ck_assert_int_eq(ct_scope_depth(), 0);
  ct_release(x);
  ct_release(w);
  ct_release(b);
  ct_release(wbad);
}
END_TEST

START_TEST(test_release_inside_scope) {
  ct_device *d = ct_test_device();
  int64_t n = 8;
  float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ct_tensor *base = from_floats(d, 1, &n, v), *t;
  ck_assert_ct_ok(ct_exp(&t, base)); /* warm */
  ct_release(t);
  usage start = usage_now(d);

  ck_assert_ct_ok(ct_scope_begin());
  /* Released by the caller: the scope forgets it (the end must not release it again). */
  ck_assert_ct_ok(ct_exp(&t, base));
  ct_release(t);
  ck_assert_usage_eq(usage_now(d), start);
  /* A reference of the caller's own (ct_retain) outlives the scope. */
  ct_tensor *held;
  ck_assert_ct_ok(ct_exp(&t, base));
  held = ct_retain(t);
  /* The same tensor handed out twice (a no-op ct_contiguous): two references, two entries. */
  ct_tensor *c1, *c2;
  ck_assert_ct_ok(ct_contiguous(&c1, base));
  ck_assert_ct_ok(ct_contiguous(&c2, base));
  ck_assert_ptr_eq(c1, base);
  ct_release(c1);
  /* Code written before scopes: every temporary released, out of order, many times over
   * (the entries' holes and their compaction). */
  for (int i = 0; i < 300; i++) {
    ct_tensor *p, *q, *r;
    ck_assert_ct_ok(ct_detach(&p, base));
    ck_assert_ct_ok(ct_detach(&q, p));
    ck_assert_ct_ok(ct_detach(&r, q));
    ct_release(p);
    if (i % 3) ct_release(r);
    ct_release(q);
  }
  ck_assert_ct_ok(ct_scope_end());
  float back[8];
  ck_assert_ct_ok(ct_to_host(held, back, sizeof back));
  ck_assert_float_eq_tol(back[0], expf(1), 1e-5);
  ct_release(held);
  ck_assert_usage_eq(usage_now(d), start);
  ck_assert_ct_ok(ct_to_host(base, back, sizeof back)); /* c2's reference was the scope's */
  ck_assert_float_eq(back[7], 8);
  ct_release(base);
}
END_TEST

START_TEST(test_many_and_deep) {
  ct_device *d = ct_test_device();
  int64_t n = 4;
  float v[4] = {1, 2, 3, 4};
  ct_tensor *base = from_floats(d, 1, &n, v);
  usage start = usage_now(d);

  /* Many temporaries in one scope (views: no kernels, so the count can be large). */
  ck_assert_ct_ok(ct_scope_begin());
  for (int i = 0; i < 50000; i++) {
    ct_tensor *t;
    ck_assert_ct_ok(ct_detach(&t, base));
  }
  ck_assert_int_eq(ct__tensor_live(), start.live + 50000);
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_usage_eq(usage_now(d), start);

  /* 1000 nested scopes, each with its tensors, one kept all the way out. */
  ct_tensor *kept = NULL;
  for (int i = 0; i < 1000; i++) {
    ck_assert_ct_ok(ct_scope_begin());
    ct_tensor *t;
    ck_assert_ct_ok(ct_detach(&t, base));
    if (i == 999) ck_assert_ct_ok(ct_add_scalar(&kept, base, 1));
  }
  ck_assert_int_eq(ct_scope_depth(), 1000);
  for (int i = 0; i < 1000; i++) {
    ck_assert_ct_ok(ct_keep(kept));
    ck_assert_ct_ok(ct_scope_end());
  }
  ck_assert_int_eq(ct_scope_depth(), 0);
  ck_assert_int_eq(ct__tensor_live(), start.live + 1);
  float back[4];
  ck_assert_ct_ok(ct_to_host(kept, back, sizeof back));
  ck_assert_float_eq(back[3], 5);
  ct_release(kept);
  ck_assert_usage_eq(usage_now(d), start);
  ct_release(base);
}
END_TEST

/* loss = mean((relu(x @ w) - target)^2), its intermediates the scope's when one is open. */
static ct_status forward_loss(ct_tensor **loss, const ct_tensor *x, const ct_tensor *w, const ct_tensor *target) {
  ct_tensor *h, *a;
  ct_matmul(&h, x, w);
  ct_relu(&a, h);
  return ct_mse_loss(loss, a, target, CT_REDUCTION_MEAN);
}

START_TEST(test_autograd_across_end) {
  ct_device *d = ct_test_device();
  int64_t sx[2] = {2, 3}, sw[2] = {3, 2};
  float xv[6] = {1, 2, 3, -1, 0.5f, 2}, wv[6] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, tv[4] = {1, 0, 0, 1};
  int64_t st[2] = {2, 2};
  ct_tensor *x = from_floats(d, 2, sx, xv), *w = from_floats(d, 2, sw, wv), *target = from_floats(d, 2, st, tv);
  ct_tensor *loss, *g;
  ck_assert_ct_ok(ct_set_requires_grad(w, true));

  /* The reference: no scope, every reference released by hand. */
  ct_tensor *h, *a;
  ck_assert_ct_ok(ct_matmul(&h, x, w));
  ck_assert_ct_ok(ct_relu(&a, h));
  ck_assert_ct_ok(ct_mse_loss(&loss, a, target, CT_REDUCTION_MEAN));
  ct_release(h);
  ct_release(a);
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ct_release(loss);
  float want[6], got[6];
  ck_assert_ct_ok(ct_grad(&g, w));
  ck_assert_ct_ok(ct_to_host(g, want, sizeof want));
  ct_release(g);
  ck_assert_ct_ok(ct_grad_clear(w));
  usage start = usage_now(d);

  /* Forward in a scope, loss kept; the scope's end releases h and a, whose saved parts the
   * graph holds; backward after the scope. */
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_ct_ok(forward_loss(&loss, x, w, target));
  ck_assert_ct_ok(ct_keep(loss));
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ct_release(loss);
  ck_assert_ct_ok(ct_grad(&g, w));
  ck_assert_ct_ok(ct_to_host(g, got, sizeof got));
  ct_release(g);
  for (int i = 0; i < 6; i++) ck_assert_float_eq_tol(got[i], want[i], 1e-6);
  ck_assert_ct_ok(ct_grad_clear(w));
  ck_assert_usage_eq(usage_now(d), start);

  /* All inside one scope: the gradient is the leaf's, ct_grad's reference the scope's. */
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_ct_ok(forward_loss(&loss, x, w, target));
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ck_assert_ct_ok(ct_grad(&g, w));
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_ct_ok(ct_grad(&g, w));
  ck_assert_ptr_nonnull(g);
  ck_assert_ct_ok(ct_to_host(g, got, sizeof got));
  for (int i = 0; i < 6; i++) ck_assert_float_eq_tol(got[i], want[i], 1e-6);
  ct_release(g);
  ck_assert_ct_ok(ct_grad_clear(w));
  ck_assert_usage_eq(usage_now(d), start);

  /* A loss not kept: its graph goes with the scope. */
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_ct_ok(forward_loss(&loss, x, w, target));
  ck_assert_ct_ok(ct_scope_end());
  ck_assert_usage_eq(usage_now(d), start);
  ct_release(x);
  ct_release(w);
  ct_release(target);
}
END_TEST

/* ---- threads ---- */

typedef struct {
  ct_device *d;
  pthread_barrier_t *bar;
  float scale;
  float result;
  ct_tensor *shared; /* made in the worker's scope (not kept) */
  ct_tensor *handed; /* made in the worker's scope and kept for the main thread */
  int ok;
} worker_arg;

static void *worker(void *p) {
  worker_arg *w = p;
  int64_t n = 4;
  float v[4] = {1, 2, 3, 4};
  w->ok = 0;
  if (ct_scope_begin() != CT_OK) return NULL;
  ct_tensor *x, *y, *s;
  ct_from_host(&x, w->d, CT_F32, 1, &n, v);
  ct_mul_scalar(&y, x, w->scale);
  ct_sum(&s, y, 0, NULL, false);
  ct_to_host(s, &w->result, sizeof w->result);
  ct_mul_scalar(&w->shared, x, 10);
  ct_mul_scalar(&w->handed, x, 100);
  ct_keep(w->handed);
  pthread_barrier_wait(w->bar); /* 1: shared is out; the main thread opens and ends its scope */
  pthread_barrier_wait(w->bar); /* 2: the main thread's scope ended */
  float back[4] = {0};
  if (ct_to_host(w->shared, back, sizeof back) != CT_OK || back[3] != 40) {
    ct_scope_end();
    return NULL;
  }
  w->ok = ct_scope_end() == CT_OK && ct_scope_depth() == 0;
  return NULL;
}

START_TEST(test_threads) {
  ct_device *d = ct_test_device();
  int64_t n = 4;
  float v[4] = {1, 2, 3, 4};
  ct_tensor *warm = from_floats(d, 1, &n, v), *wt, *ws;
  ck_assert_ct_ok(ct_mul_scalar(&wt, warm, 2));
  ck_assert_ct_ok(ct_sum(&ws, wt, 0, NULL, false));
  ct_release(ws);
  ct_release(wt);
  ct_release(warm);
  usage start = usage_now(d);

  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 3);
  worker_arg args[2] = {{.d = d, .bar = &bar, .scale = 2}, {.d = d, .bar = &bar, .scale = 3}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &args[i]), 0);
  pthread_barrier_wait(&bar);
  /* The main thread's own scope: it ends without touching the workers' tensors, and releasing
   * a reference of its own to one of them does not take it out of the worker's scope. */
  ck_assert_ct_ok(ct_scope_begin());
  ct_tensor *mine, *other = ct_retain(args[0].shared);
  ck_assert_ct_ok(ct_add(&mine, args[0].shared, args[1].shared));
  ct_release(other);
  ck_assert_ct_ok(ct_scope_end());
  pthread_barrier_wait(&bar);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
  pthread_barrier_destroy(&bar);
  ck_assert_int_eq(args[0].ok, 1);
  ck_assert_int_eq(args[1].ok, 1);
  ck_assert_float_eq(args[0].result, 20);
  ck_assert_float_eq(args[1].result, 30);
  /* What a worker kept is the main thread's to use and release. */
  for (int i = 0; i < 2; i++) {
    float back[4];
    ck_assert_ct_ok(ct_to_host(args[i].handed, back, sizeof back));
    ck_assert_float_eq(back[1], 200);
    ct_release(args[i].handed);
  }
  ck_assert_usage_eq(usage_now(d), start);
}
END_TEST

/* ---- the sticky error ---- */

START_TEST(test_sticky_error) {
  ct_device *d = ct_test_device();
  int64_t n3 = 3, n4 = 4;
  float v[4] = {1, 2, 3, 4};
  ct_tensor *warm = from_floats(d, 1, &n3, v), *wr;
  ck_assert_ct_ok(ct_relu(&wr, warm));
  ct_release(wr);
  ct_release(warm);
  usage start = usage_now(d);

  ck_assert_ct_ok(ct_autocast_set_dtype(CT_F32));
  ck_assert_ct_ok(ct_scope_begin());
  ct_tensor *a, *b, *sum, *r, *t2;
  ck_assert_ct_ok(ct_from_host(&a, d, CT_F32, 1, &n3, v));
  ck_assert_ct_ok(ct_from_host(&b, d, CT_F32, 1, &n4, v));
  ck_assert_ct_ok(ct_autocast_set_dtype(CT_F16));
  ck_assert_ct_status(ct_add(&sum, a, b), CT_ERR_SHAPE_MISMATCH);
  char first[512];
  snprintf(first, sizeof first, "%s", ct_last_error());
  ck_assert_msg(strncmp(first, "ct_add: ", 8) == 0, "%s", first);
  /* Every later call returns the first error without doing anything. */
  r = a;
  ck_assert_ct_status(ct_relu(&r, a), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(r);
  ck_assert_str_eq(ct_last_error(), first);
  t2 = a;
  ck_assert_ct_status(ct_from_host(&t2, d, CT_F32, 1, &n3, v), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(t2);
  float back[3] = {-1, -1, -1};
  ck_assert_ct_status(ct_to_host(a, back, sizeof back), CT_ERR_SHAPE_MISMATCH);
  ck_assert_float_eq(back[0], -1);
  ct_tensor *pieces[2] = {a, a};
  int np = 7;
  ck_assert_ct_status(ct_chunk(pieces, &np, a, 2, 0), CT_ERR_SHAPE_MISMATCH);
  ck_assert_int_eq(np, 0);
  ck_assert_ct_status(ct_keep(r), CT_ERR_SHAPE_MISMATCH); /* r was skipped: the first error */
  ct_device *dd = d;
  ck_assert_ct_status(ct_device_default(&dd), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(dd);
  /* A nested scope starts failed; its end hands the error back. */
  ck_assert_ct_status(ct_scope_begin(), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_neg(&r, a), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_scope_end(), CT_ERR_SHAPE_MISMATCH);
  /* Thread state is restored even so. */
  ck_assert_ct_ok(ct_autocast_set_dtype(CT_F32));
  ck_assert_int_eq(ct_autocast_get_dtype(), CT_F32);
  ck_assert_ct_status(ct_scope_status(), CT_ERR_SHAPE_MISMATCH);
  ck_assert_str_eq(ct_last_error(), first);
  ct_clear_error();
  ck_assert_ct_status(ct_scope_end(), CT_ERR_SHAPE_MISMATCH);
  ck_assert_str_eq(ct_last_error(), first);
  ck_assert_usage_eq(usage_now(d), start);

  /* The next scope is clean. */
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_ct_ok(ct_from_host(&a, d, CT_F32, 1, &n3, v));
  ck_assert_ct_ok(ct_relu(&r, a));
  ck_assert_ct_ok(ct_to_host(r, back, sizeof back));
  ck_assert_float_eq(back[2], 3);
  ck_assert_ct_ok(ct_scope_end());

  /* A nested scope's failure becomes the enclosing scope's, message and all. */
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_ct_ok(ct_from_host(&a, d, CT_F32, 1, &n3, v));
  ck_assert_ct_ok(ct_scope_begin());
  ck_assert_ct_status(ct_reshape(&r, a, 1, &n4), CT_ERR_SHAPE_MISMATCH);
  snprintf(first, sizeof first, "%s", ct_last_error());
  ck_assert_msg(strncmp(first, "ct_reshape: ", 12) == 0, "%s", first);
  ck_assert_ct_status(ct_scope_end(), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_relu(&r, a), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_scope_end(), CT_ERR_SHAPE_MISMATCH);
  ck_assert_str_eq(ct_last_error(), first);
  ck_assert_int_eq(ct_scope_depth(), 0);

  /* Outside scopes nothing is sticky. */
  ck_assert_ct_status(ct_reshape(&r, NULL, 1, &n4), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_from_host(&a, d, CT_F32, 1, &n3, v));
  ct_release(a);
  ck_assert_usage_eq(usage_now(d), start);
}
END_TEST

START_TEST(test_out_of_memory) {
  ct_device *d = ct_test_device();
  int64_t n = 4;
  float v[4] = {1, 2, 3, 4};
  ct_tensor *x = from_floats(d, 1, &n, v), *y;
  ck_assert_ct_ok(ct_neg(&y, x));
  ct_release(y);
  usage start = usage_now(d);

  /* The slot array's first allocation fails: the result is released, the call fails. */
  ck_assert_ct_ok(ct_scope_begin());
  ct__scope_test_fail_alloc(0);
  y = x;
  ck_assert_ct_status(ct_neg(&y, x), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("ct_neg: out of host memory for the scope's record");
  ck_assert_ct_status(ct_neg(&y, x), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ct_status(ct_scope_end(), CT_ERR_OUT_OF_MEMORY);
  ck_assert_error_contains("ct_neg: out of host memory");
  ck_assert_usage_eq(usage_now(d), start);

  /* An array of results (ct_chunk): all released, the count 0. */
  ck_assert_ct_ok(ct_scope_begin());
  ct__scope_test_fail_alloc(0);
  ct_tensor *pieces[2] = {x, x};
  int np = 2;
  ck_assert_ct_status(ct_chunk(pieces, &np, x, 2, 0), CT_ERR_OUT_OF_MEMORY);
  ck_assert_int_eq(np, 0);
  ck_assert_ptr_null(pieces[0]);
  ck_assert_ptr_null(pieces[1]);
  ck_assert_error_contains("ct_chunk: out of host memory for the scope's record of its 2 results");
  ck_assert_ct_status(ct_scope_end(), CT_ERR_OUT_OF_MEMORY);
  ck_assert_usage_eq(usage_now(d), start);

  /* Growing the array (the 65th slot) fails the same way; the earlier slots are released. */
  ck_assert_ct_ok(ct_scope_begin());
  ct__scope_test_fail_alloc(1);
  for (int i = 0; i < 64; i++) ck_assert_ct_ok(ct_detach(&y, x));
  ck_assert_ct_status(ct_detach(&y, x), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ct_status(ct_scope_end(), CT_ERR_OUT_OF_MEMORY);
  ck_assert_usage_eq(usage_now(d), start);

  /* A scope whose record can't be allocated still opens, failed, and pairs with its end. */
  ct__scope_test_fail_alloc(0);
  ck_assert_ct_status(ct_scope_begin(), CT_ERR_OUT_OF_MEMORY);
  ck_assert_int_eq(ct_scope_depth(), 1);
  ck_assert_ct_status(ct_neg(&y, x), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_null(y);
  ck_assert_ct_status(ct_scope_end(), CT_ERR_OUT_OF_MEMORY);
  ck_assert_int_eq(ct_scope_depth(), 0);
  /* ... and inside a working scope, whose error it becomes. */
  ck_assert_ct_ok(ct_scope_begin());
  ct__scope_test_fail_alloc(0); /* the frames grow by 16: the 17th scope needs an allocation */
  for (int i = 0; i < 15; i++) ck_assert_ct_ok(ct_scope_begin());
  ck_assert_int_eq(ct_scope_depth(), 16);
  ck_assert_ct_status(ct_scope_begin(), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ct_status(ct_scope_end(), CT_ERR_OUT_OF_MEMORY);
  for (int i = 0; i < 16; i++) ck_assert_ct_status(ct_scope_end(), CT_ERR_OUT_OF_MEMORY);
  ck_assert_int_eq(ct_scope_depth(), 0);
  ct__scope_test_fail_alloc(-1);

  ct_release(x);
  ck_assert_int_eq(ct__tensor_live(), start.live - 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("scope");
  TCase *tc = tcase_create("scope");
  tcase_set_timeout(tc, 300);
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_add_test(tc, test_releases_everything);
  tcase_add_test(tc, test_nested_and_keep);
  tcase_add_test(tc, test_function_idiom);
  tcase_add_test(tc, test_release_inside_scope);
  tcase_add_test(tc, test_many_and_deep);
  tcase_add_test(tc, test_autograd_across_end);
  tcase_add_test(tc, test_threads);
  tcase_add_test(tc, test_sticky_error);
  tcase_add_test(tc, test_out_of_memory);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
