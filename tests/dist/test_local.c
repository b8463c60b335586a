/* Groups of devices in one process (ct_dist_from_devices) on two PoCL devices (the suite sets
 * POCL_DEVICES="pthread pthread" and 256-byte chunks): every collective and dtype with exact
 * values, identical results on both devices; argument errors; DDP over two replicas equals one
 * model on the whole batch, with identical parameters on both; no_sync; the gradient hook's
 * contract; MPI groups refusing cleanly in a build without MPI. */
#include <math.h>

#include "ct_test.h"
#include "dist_values.h"

static ct_dist *g_d;
static ct_device *g_dev[2];

static void open_group(void) {
  int n = 0;
  ck_assert_ct_ok(ct_device_count(&n));
  ck_assert_int_ge(n, 2);
  ck_assert_ct_ok(ct_device_get(&g_dev[0], 0));
  ck_assert_ct_ok(ct_device_get(&g_dev[1], 1));
  ck_assert_ct_ok(ct_dist_from_devices(&g_d, g_dev, 2));
  ck_assert_int_eq(ct_dist_size(g_d), 2);
  ck_assert_int_eq(ct_dist_local_count(g_d), 2);
  ck_assert(ct_dist_is_local(g_d));
}

static void close_group(void) {
  ct_dist_free(g_d);
  g_d = NULL;
  ct_shutdown();
}

static ct_tensor *make(int dev, ct_dtype t, int r, int64_t n) {
  size_t es = ct_dtype_size(t);
  void *h = calloc((size_t)n + 1, es);
  dv_fill(t, h, r, n);
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_from_host(&x, g_dev[dev], t, 1, &n, h));
  free(h);
  return x;
}

static void expect_bytes(const ct_tensor *x, const void *want, size_t bytes, const char *what) {
  void *got = malloc(bytes + 1);
  ck_assert_ct_ok(ct_to_host(x, got, bytes));
  ck_assert_msg(memcmp(got, want, bytes) == 0, "%s: wrong result", what);
  free(got);
}

START_TEST(test_all_reduce_every_dtype) {
  open_group();
  const int64_t sizes[] = {0, 1, 7, 301};
  const ct_dist_op ops[] = {CT_DIST_SUM, CT_DIST_MAX, CT_DIST_MIN, CT_DIST_AVG};
  for (int di = 0; di < DV_NDTYPES; di++) {
    ct_dtype t = dv_dtypes[di];
    if (t == CT_F64 && !ct_test_fp64(g_dev[0], "f64 all_reduce")) continue;
    size_t es = ct_dtype_size(t);
    for (size_t si = 0; si < 4; si++) {
      int64_t n = sizes[si];
      void *want = calloc((size_t)n + 1, es);
      for (int oi = 0; oi < 4; oi++) {
        ct_tensor *x[2] = {make(0, t, 0, n), make(1, t, 1, n)};
        if (ops[oi] == CT_DIST_AVG && !dv_is_float(t)) {
          ck_assert_ct_status(ct_dist_all_reduce_multi(g_d, x, CT_DIST_AVG), CT_ERR_DTYPE_MISMATCH);
        } else {
          ck_assert_ct_ok(ct_dist_all_reduce_multi(g_d, x, ops[oi]));
          for (int64_t i = 0; i < n; i++) dv_expect(t, ops[oi], 2, want, i);
          char what[64];
          snprintf(what, sizeof what, "op %d %s[%lld]", (int)ops[oi], ct_dtype_name(t), (long long)n);
          expect_bytes(x[0], want, (size_t)n * es, what);
          expect_bytes(x[1], want, (size_t)n * es, what);
        }
        ct_release(x[0]);
        ct_release(x[1]);
      }
      free(want);
    }
  }
  close_group();
}
END_TEST

START_TEST(test_broadcast_gather_scatter) {
  open_group();
  const ct_dtype types[] = {CT_BOOL, CT_I8, CT_F16, CT_BF16, CT_F32, CT_I64};
  for (int di = 0; di < 6; di++) {
    ct_dtype t = types[di];
    size_t es = ct_dtype_size(t);
    const int64_t sizes[] = {0, 1, 43, 301};
    for (int si = 0; si < 4; si++) {
      int64_t n = sizes[si];
      void *want = calloc((size_t)(2 * n + 1), es);
      ct_tensor *x[2] = {make(0, t, 0, n), make(1, t, 1, n)};
      ck_assert_ct_ok(ct_dist_broadcast_multi(g_d, x, 1));
      dv_fill(t, want, 1, n);
      expect_bytes(x[0], want, (size_t)n * es, "broadcast to device 0");
      expect_bytes(x[1], want, (size_t)n * es, "broadcast, root");
      ct_release(x[0]);
      ct_release(x[1]);

      x[0] = make(0, t, 0, n);
      x[1] = make(1, t, 1, n);
      ct_tensor *g[2] = {0};
      ck_assert_ct_ok(ct_dist_all_gather_multi(g, g_d, x));
      dv_fill(t, want, 0, n);
      dv_fill(t, (char *)want + (size_t)n * es, 1, n);
      for (int j = 0; j < 2; j++) {
        ck_assert_int_eq(ct_tensor_shape(g[j])[0], 2);
        ck_assert_ptr_eq(ct_tensor_device(g[j]), g_dev[j]);
        expect_bytes(g[j], want, (size_t)(2 * n) * es, "all_gather");
        ct_release(g[j]);
      }
      ct_release(x[0]);
      ct_release(x[1]);

      if (t != CT_BOOL) {
        x[0] = make(0, t, 0, 2 * n);
        x[1] = make(1, t, 1, 2 * n);
        ck_assert_ct_ok(ct_dist_reduce_scatter_multi(g, g_d, x, CT_DIST_SUM));
        for (int64_t i = 0; i < 2 * n; i++) dv_expect(t, CT_DIST_SUM, 2, want, i);
        expect_bytes(g[0], want, (size_t)n * es, "reduce_scatter part 0");
        expect_bytes(g[1], (char *)want + (size_t)n * es, (size_t)n * es, "reduce_scatter part 1");
        ct_release(g[0]);
        ct_release(g[1]);
        ct_release(x[0]);
        ct_release(x[1]);
      }
      free(want);
    }
  }
  close_group();
}
END_TEST

START_TEST(test_async_and_errors) {
  open_group();
  ct_tensor *x[2] = {make(0, CT_F32, 0, 1000), make(1, CT_F32, 1, 1000)};
  ct_dist_work *w = NULL;
  ck_assert_ct_ok(ct_dist_all_reduce_multi_async(&w, g_d, x, CT_DIST_SUM));
  ck_assert_ct_ok(ct_dist_wait(w, -1));
  ck_assert(ct_dist_work_is_done(w));
  ck_assert_ct_ok(ct_dist_wait(w, 0)); /* again: the same outcome */
  ct_dist_work_release(w);
  float got[1000];
  ck_assert_ct_ok(ct_to_host(x[1], got, sizeof got));
  for (int i = 0; i < 1000; i++) ck_assert_float_eq(got[i], (float)(dv_value(CT_F32, 0, i) + dv_value(CT_F32, 1, i)));

  /* One tensor for a group of two devices. */
  ck_assert_ct_status(ct_dist_all_reduce(g_d, x[0], CT_DIST_SUM), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("_multi");
  /* Tensors on the wrong devices. */
  ct_tensor *swapped[2] = {x[1], x[0]};
  ck_assert_ct_status(ct_dist_all_reduce_multi(g_d, swapped, CT_DIST_SUM), CT_ERR_DEVICE_MISMATCH);
  /* Shapes that differ. */
  ct_tensor *y = make(1, CT_F32, 1, 999), *mixed[2] = {x[0], y};
  ck_assert_ct_status(ct_dist_all_reduce_multi(g_d, mixed, CT_DIST_SUM), CT_ERR_SHAPE_MISMATCH);
  ct_tensor *out[2] = {0};
  ct_tensor *odd[2] = {make(0, CT_F32, 0, 3), make(1, CT_F32, 1, 3)};
  ck_assert_ct_status(ct_dist_reduce_scatter_multi(out, g_d, odd, CT_DIST_SUM), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(out[0]);
  ck_assert_ct_status(ct_dist_broadcast_multi(g_d, x, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_dist_send(g_d, x[0], 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_dist_all_reduce_multi(g_d, x, (ct_dist_op)9), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_dist_barrier(g_d));
  ct_device *dv = NULL;
  ck_assert_ct_ok(ct_dist_device_at(&dv, g_d, 1));
  ck_assert_ptr_eq(dv, g_dev[1]);
  ck_assert_ct_status(ct_dist_device_at(&dv, g_d, 2), CT_ERR_INVALID_ARGUMENT);
  ct_device *dup[2] = {g_dev[0], g_dev[0]};
  ct_dist *bad = NULL;
  ck_assert_ct_status(ct_dist_from_devices(&bad, dup, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(bad);
  ck_assert_ct_status(ct_dist_set_timeout(g_d, 0), CT_ERR_INVALID_ARGUMENT);
  ct_release(odd[0]), ct_release(odd[1]), ct_release(y), ct_release(x[0]), ct_release(x[1]);
  close_group();
}
END_TEST

START_TEST(test_no_mpi_is_unsupported) {
  /* In a build without MPI the MPI constructors refuse with a message saying so. With MPI the
   * mpirun tests cover them; here only the flag is checked against the constructor. */
  if (ct_dist_is_mpi_available()) return;
  ct_dist *d = NULL;
  ck_assert_ct_status(ct_dist_init(&d, NULL, NULL), CT_ERR_UNSUPPORTED);
  ck_assert_error_contains("without MPI");
  ck_assert_ptr_null(d);
}
END_TEST

/* ---- DDP over two replicas ---- */

enum { IN = 4, OUT = 3, ROWS = 6 }; /* rows per replica */

struct model {
  ct_tensor *w, *b, *u;
};

static void model_new(struct model *m, ct_device *dev, float shift) {
  float w[OUT * IN], b[OUT], u[5] = {0};
  for (int i = 0; i < OUT * IN; i++) w[i] = 0.1f * (float)(i % 7) - 0.3f + shift;
  for (int i = 0; i < OUT; i++) b[i] = 0.05f * (float)i + shift;
  int64_t ws[2] = {OUT, IN}, bs = OUT, us = 5;
  ck_assert_ct_ok(ct_from_host(&m->w, dev, CT_F32, 2, ws, w));
  ck_assert_ct_ok(ct_from_host(&m->b, dev, CT_F32, 1, &bs, b));
  ck_assert_ct_ok(ct_from_host(&m->u, dev, CT_F32, 1, &us, u));
  ck_assert_ct_ok(ct_set_requires_grad(m->w, true));
  ck_assert_ct_ok(ct_set_requires_grad(m->b, true));
  ck_assert_ct_ok(ct_set_requires_grad(m->u, true));
}

static void model_free(struct model *m) {
  ct_release(m->w);
  ct_release(m->b);
  ct_release(m->u);
}

static void fwd_bwd(struct model *m, ct_device *dev, int64_t first, int64_t rows) {
  float x[64 * IN], t[64 * OUT];
  for (int64_t i = 0; i < rows; i++) {
    for (int j = 0; j < IN; j++) x[i * IN + j] = (float)sin(0.41 * (double)((first + i) * IN + j));
    for (int j = 0; j < OUT; j++) t[i * OUT + j] = (float)cos(0.19 * (double)((first + i) * OUT + j));
  }
  int64_t xs[2] = {rows, IN}, ts[2] = {rows, OUT};
  ct_tensor *X, *T, *wt, *y, *yb, *e, *e2, *loss;
  ck_assert_ct_ok(ct_from_host(&X, dev, CT_F32, 2, xs, x));
  ck_assert_ct_ok(ct_from_host(&T, dev, CT_F32, 2, ts, t));
  ck_assert_ct_ok(ct_transpose(&wt, m->w, 0, 1));
  ck_assert_ct_ok(ct_matmul(&y, X, wt));
  ck_assert_ct_ok(ct_add(&yb, y, m->b));
  ck_assert_ct_ok(ct_sub(&e, yb, T));
  ck_assert_ct_ok(ct_mul(&e2, e, e));
  ck_assert_ct_ok(ct_mean(&loss, e2, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ct_release(X), ct_release(T), ct_release(wt), ct_release(y), ct_release(yb), ct_release(e), ct_release(e2);
  ct_release(loss);
}

static void params_of(const struct model *m, float *out) {
  ck_assert_ct_ok(ct_to_host(m->w, out, sizeof(float) * OUT * IN));
  ck_assert_ct_ok(ct_to_host(m->b, out + OUT * IN, sizeof(float) * OUT));
}

START_TEST(test_ddp_two_replicas) {
  open_group();
  struct model m[2], ref;
  model_new(&m[0], g_dev[0], 0.0f);
  model_new(&m[1], g_dev[1], 0.25f); /* other values: the broadcast from replica 0 fixes them */
  model_new(&ref, g_dev[0], 0.0f);
  ct_tensor *params[6] = {m[0].w, m[0].b, m[0].u, m[1].w, m[1].b, m[1].u};
  ct_ddp_opts opts = {.bucket_bytes = 24, .first_bucket_bytes = 12};
  ct_ddp *ddp = NULL;
  ck_assert_ct_ok(ct_ddp_new(&ddp, g_d, params, 3, &opts));
  ck_assert_int_ge(ct_ddp_bucket_count(ddp), 3);
  ct_optimizer *opt[2], *ropt;
  ct_tensor *p0[2] = {m[0].w, m[0].b}, *p1[2] = {m[1].w, m[1].b}, *pr[2] = {ref.w, ref.b};
  ck_assert_ct_ok(ct_sgd_new(&opt[0], p0, 2, 0.1, 0.0, 0.0, false));
  ck_assert_ct_ok(ct_sgd_new(&opt[1], p1, 2, 0.1, 0.0, 0.0, false));
  ck_assert_ct_ok(ct_sgd_new(&ropt, pr, 2, 0.1, 0.0, 0.0, false));
  for (int s = 0; s < 3; s++) {
    for (int r = 0; r < 2; r++) ck_assert_ct_ok(ct_optimizer_zero_grad(opt[r]));
    ck_assert_ct_ok(ct_optimizer_zero_grad(ropt));
    if (s == 1) {
      /* no_sync: each replica accumulates its shard's two halves, synchronized at the second;
       * the reference runs the same four halves and scales by 1/2 (the average). */
      ck_assert_ct_ok(ct_ddp_set_sync(ddp, false));
      for (int r = 0; r < 2; r++) fwd_bwd(&m[r], g_dev[r], r * ROWS, ROWS / 2);
      ck_assert_ct_ok(ct_ddp_set_sync(ddp, true));
      for (int r = 0; r < 2; r++) fwd_bwd(&m[r], g_dev[r], r * ROWS + ROWS / 2, ROWS / 2);
      for (int r = 0; r < 2; r++)
        for (int h = 0; h < 2; h++) fwd_bwd(&ref, g_dev[0], r * ROWS + h * (ROWS / 2), ROWS / 2);
      ct_tensor *g;
      ck_assert_ct_ok(ct_grad(&g, ref.w));
      ck_assert_ct_ok(ct_mul_scalar_out(g, g, 0.5));
      ct_release(g);
      ck_assert_ct_ok(ct_grad(&g, ref.b));
      ck_assert_ct_ok(ct_mul_scalar_out(g, g, 0.5));
      ct_release(g);
    } else {
      fwd_bwd(&m[0], g_dev[0], 0, ROWS);
      fwd_bwd(&m[1], g_dev[1], ROWS, ROWS);
      fwd_bwd(&ref, g_dev[0], 0, 2 * ROWS);
    }
    for (int r = 0; r < 2; r++) ck_assert_ct_ok(ct_optimizer_step(opt[r]));
    ck_assert_ct_ok(ct_optimizer_step(ropt));
  }
  enum { NP = OUT * IN + OUT };
  float a[NP], b[NP], want[NP];
  params_of(&m[0], a);
  params_of(&m[1], b);
  params_of(&ref, want);
  ck_assert_msg(memcmp(a, b, sizeof a) == 0, "the replicas' parameters differ");
  /* f32 sums of the rows in another order (two shard means averaged vs one mean): a few ulps
   * per step; 1e-5 is about 100 ulps of 1.0. */
  for (int i = 0; i < NP; i++) ck_assert_float_eq_tol(a[i], want[i], 1e-5f * (1.0f + fabsf(want[i])));
  /* The unused parameter got an (averaged) zero gradient rather than hanging the step. */
  ct_tensor *gu = NULL;
  ck_assert_ct_ok(ct_grad(&gu, m[1].u));
  ck_assert_ptr_nonnull(gu);
  float z[5];
  ck_assert_ct_ok(ct_to_host(gu, z, sizeof z));
  for (int i = 0; i < 5; i++) ck_assert_float_eq(z[i], 0.0f);
  ct_release(gu);
  /* A parameter belongs to one DDP. */
  ct_ddp *other = NULL;
  ck_assert_ct_status(ct_ddp_new(&other, g_d, params, 3, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(other);
  for (int r = 0; r < 2; r++) ct_optimizer_free(opt[r]);
  ct_optimizer_free(ropt);
  ct_ddp_free(ddp);
  /* Freed: the hooks are gone, so the parameters can join a new DDP. */
  ck_assert_ct_ok(ct_ddp_new(&other, g_d, params, 3, &(ct_ddp_opts){.no_broadcast = true}));
  ct_ddp_free(other);
  model_free(&m[0]);
  model_free(&m[1]);
  model_free(&ref);
  close_group();
}
END_TEST

int main(void) {
  Suite *s = suite_create("dist");
  TCase *tc = tcase_create("device group");
  tcase_set_tags(tc, "two-devices");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_all_reduce_every_dtype);
  tcase_add_test(tc, test_broadcast_gather_scatter);
  tcase_add_test(tc, test_async_and_errors);
  tcase_add_test(tc, test_no_mpi_is_unsupported);
  tcase_add_test(tc, test_ddp_two_replicas);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
