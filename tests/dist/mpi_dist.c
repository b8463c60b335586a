/* The MPI tests (tests/dist/meson.build runs them under mpirun through run_mpi.py):
 *
 *   mpi_dist collectives   every collective, every dtype, sizes 0, 1, odd and larger than a
 *                          chunk (the suite sets CLTENSOR_DIST_CHUNK_BYTES=256): exact results,
 *                          so identical on every rank; async forms; send/recv; the agreement
 *                          check on ranks that disagree (a second group, which it breaks)
 *   mpi_dist train         DDP: N ranks on N shards give one process's parameters on the whole
 *                          batch, bit-identical on every rank; no_sync accumulation; an unused
 *                          parameter does not hang the step
 *   mpi_dist kill          rank 1 exits in the middle of a step: the others get CT_ERR_DIST
 *                          naming rank 1 and the collective within their 5 s timeout
 *
 * Not a Check suite: Check forks each test, and an MPI process can't fork into ranks. Each rank
 * prints "dist-test rank R: ok" when all its checks passed; run_mpi.py counts those lines. An
 * alarm bounds every run whatever happens. */
#include <mpi.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cltensor/cltensor.h"
#include "dist_values.h"

static int g_rank = -1, g_fail = 0;

#define FAIL(...)                                                  \
  do {                                                             \
    fprintf(stderr, "dist-test rank %d: FAIL %s:%d: ", g_rank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                                  \
    fprintf(stderr, "\n");                                         \
    g_fail++;                                                      \
  } while (0)
#define OK(x)                                                                                      \
  do {                                                                                             \
    ct_status s_ = (x);                                                                            \
    if (s_ != CT_OK) {                                                                             \
      FAIL("%s: %s: %s", #x, ct_status_name(s_), ct_last_error());                                 \
      return;                                                                                      \
    }                                                                                              \
  } while (0)
#define CHECK(c, ...)     \
  do {                    \
    if (!(c)) {           \
      FAIL(__VA_ARGS__);  \
      return;             \
    }                     \
  } while (0)

static ct_device *g_dev;

static ct_tensor *make(ct_dtype t, int r, int64_t n) {
  size_t es = ct_dtype_size(t);
  void *h = calloc((size_t)n + 1, es);
  dv_fill(t, h, r, n);
  ct_tensor *x = NULL;
  if (ct_from_host(&x, g_dev, t, 1, &n, h) != CT_OK) FAIL("ct_from_host: %s", ct_last_error());
  free(h);
  return x;
}

/* Compares x's bytes with want's. */
static int same(const ct_tensor *x, const void *want, size_t bytes, const char *what) {
  void *got = malloc(bytes + 1);
  if (ct_to_host(x, got, bytes) != CT_OK) {
    FAIL("%s: ct_to_host: %s", what, ct_last_error());
    free(got);
    return 0;
  }
  int ok = memcmp(got, want, bytes) == 0;
  if (!ok) FAIL("%s: wrong result", what);
  free(got);
  return ok;
}

static void test_collectives(ct_dist *d) {
  int R = ct_dist_rank(d), W = ct_dist_size(d);
  const int64_t sizes[] = {0, 1, 7, 301}; /* 301 elements: past the 256-byte chunk in every dtype */
  const ct_dist_op ops[] = {CT_DIST_SUM, CT_DIST_MAX, CT_DIST_MIN, CT_DIST_AVG};
  for (int di = 0; di < DV_NDTYPES; di++) {
    ct_dtype t = dv_dtypes[di];
    size_t es = ct_dtype_size(t);
    if (t == CT_F64 && !ct_device_properties(g_dev)->fp64) {
      /* the collectives' f64 wire is host-side, but the tensor itself needs cl_khr_fp64 */
      if (R == 0) printf("# skip: f64 collectives: no cl_khr_fp64 on %s\n", ct_device_properties(g_dev)->name);
      continue;
    }
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      int64_t n = sizes[si];
      char what[96];
      void *want = calloc((size_t)(W * n + 1), es);
      for (int oi = 0; oi < 4; oi++) {
        if (ops[oi] == CT_DIST_AVG && !dv_is_float(t)) continue;
        ct_tensor *x = make(t, R, n);
        OK(ct_dist_all_reduce(d, x, ops[oi]));
        for (int64_t i = 0; i < n; i++) dv_expect(t, ops[oi], W, want, i);
        snprintf(what, sizeof what, "all_reduce op %d %s[%lld]", (int)ops[oi], ct_dtype_name(t), (long long)n);
        same(x, want, (size_t)n * es, what);
        ct_release(x);
      }
      /* broadcast from the last rank */
      ct_tensor *x = make(t, R, n);
      OK(ct_dist_broadcast(d, x, W - 1));
      dv_fill(t, want, W - 1, n);
      snprintf(what, sizeof what, "broadcast %s[%lld]", ct_dtype_name(t), (long long)n);
      same(x, want, (size_t)n * es, what);
      ct_release(x);
      /* all_gather: [W, n], rank r's values in row r */
      x = make(t, R, n);
      ct_tensor *g = NULL;
      OK(ct_dist_all_gather(&g, d, x));
      CHECK(ct_tensor_ndim(g) == 2 && ct_tensor_shape(g)[0] == W && ct_tensor_shape(g)[1] == n, "all_gather shape");
      for (int r = 0; r < W; r++) dv_fill(t, (char *)want + (size_t)r * n * es, r, n);
      snprintf(what, sizeof what, "all_gather %s[%lld]", ct_dtype_name(t), (long long)n);
      same(g, want, (size_t)(W * n) * es, what);
      ct_release(g);
      ct_release(x);
      /* reduce_scatter of [W * n]: rank R gets part R of the sum */
      if (t != CT_BOOL) {
        x = make(t, R, W * n);
        OK(ct_dist_reduce_scatter(&g, d, x, CT_DIST_SUM));
        CHECK(ct_tensor_shape(g)[0] == n, "reduce_scatter shape");
        void *full = calloc((size_t)(W * n + 1), es);
        for (int64_t i = 0; i < W * n; i++) dv_expect(t, CT_DIST_SUM, W, full, i);
        snprintf(what, sizeof what, "reduce_scatter %s[%lld]", ct_dtype_name(t), (long long)(W * n));
        same(g, (char *)full + (size_t)R * n * es, (size_t)n * es, what);
        free(full);
        ct_release(g);
        ct_release(x);
      }
      free(want);
    }
  }
  /* A non-contiguous tensor (a transposed view) all-reduced in place. */
  {
    int64_t sh[2] = {3, 5};
    float h[15], want[15];
    for (int i = 0; i < 15; i++) h[i] = (float)(i + R);
    ct_tensor *x = NULL, *tr = NULL;
    OK(ct_from_host(&x, g_dev, CT_F32, 2, sh, h));
    OK(ct_transpose(&tr, x, 0, 1));
    OK(ct_dist_all_reduce(d, tr, CT_DIST_SUM));
    for (int i = 0; i < 15; i++) want[i] = (float)(W * i + W * (W - 1) / 2);
    same(x, want, sizeof want, "all_reduce of a transposed view");
    ct_release(tr);
    ct_release(x);
  }
  /* NaN and infinities (f32, 301 elements: past a chunk): a NaN on any rank makes the element NaN
   * under SUM, MAX and MIN; +inf on rank 0 and -inf on the others sum to NaN, and MAX and MIN pick
   * them; and every rank holds the same bits (the results gathered and compared row by row), also
   * where every rank has a NaN of its own payload (which one survives depends on the operands'
   * order). */
  for (int oi = 0; oi < 3; oi++) {
    enum { NV = 301 };
    float h[NV], got[NV];
    for (int i = 0; i < NV; i++) {
      if (i % 7 == 1) {
        uint32_t bits = 0x7fc00000u | (uint32_t)(R + 1); /* a quiet NaN with this rank's payload */
        memcpy(&h[i], &bits, sizeof bits);
      } else if (i % 3 == 0 && i % 5 == R % 5) h[i] = NAN;
      else if (i % 11 == 4) h[i] = R == 0 ? INFINITY : -INFINITY;
      else h[i] = (float)((i * 7 + R * 3) % 13) - 6.0f;
    }
    int64_t n = NV;
    ct_tensor *x = NULL, *g = NULL;
    OK(ct_from_host(&x, g_dev, CT_F32, 1, &n, h));
    OK(ct_dist_all_reduce(d, x, ops[oi]));
    OK(ct_to_host(x, got, sizeof got));
    for (int i = 0; i < NV; i++) {
      bool nan = false;
      float e = ops[oi] == CT_DIST_MAX ? -INFINITY : ops[oi] == CT_DIST_MIN ? INFINITY : 0.0f;
      for (int r = 0; r < W; r++) {
        float v;
        if (i % 7 == 1 || (i % 3 == 0 && i % 5 == r % 5)) v = NAN, nan = true;
        else if (i % 11 == 4) v = r == 0 ? INFINITY : -INFINITY;
        else v = (float)((i * 7 + r * 3) % 13) - 6.0f;
        if (ops[oi] == CT_DIST_SUM) e += v;
        else if (ops[oi] == CT_DIST_MAX) e = v > e ? v : e;
        else e = v < e ? v : e;
      }
      if (nan || isnan(e)) CHECK(isnan(got[i]), "op %d element %d: %g, expected NaN", (int)ops[oi], i, got[i]);
      else CHECK(got[i] == e, "op %d element %d: %g, expected %g", (int)ops[oi], i, got[i], e);
    }
    OK(ct_dist_all_gather(&g, d, x));
    float *rows = malloc(sizeof(float) * NV * (size_t)W);
    OK(ct_to_host(g, rows, sizeof(float) * NV * (size_t)W));
    for (int r = 1; r < W; r++)
      CHECK(memcmp(rows, rows + (size_t)r * NV, sizeof got) == 0, "op %d: rank %d's bits differ from rank 0's",
            (int)ops[oi], r);
    free(rows);
    ct_release(g);
    ct_release(x);
  }
  /* Async: several queued, then waited for in order. */
  {
    ct_tensor *xs[3];
    ct_dist_work *ws[3];
    for (int k = 0; k < 3; k++) {
      xs[k] = make(CT_I32, R + k, 100);
      OK(ct_dist_all_reduce_async(&ws[k], d, xs[k], CT_DIST_SUM));
    }
    for (int k = 0; k < 3; k++) {
      OK(ct_dist_wait(ws[k], -1));
      CHECK(ct_dist_work_is_done(ws[k]), "work done after wait");
      int32_t got[100];
      OK(ct_to_host(xs[k], got, sizeof got));
      for (int i = 0; i < 100; i++) {
        int32_t e = 0;
        for (int r = 0; r < W; r++) e += (int32_t)dv_value(CT_I32, r + k, i);
        CHECK(got[i] == e, "async all_reduce %d element %d: %d, expected %d", k, i, got[i], e);
      }
      ct_dist_work_release(ws[k]);
      ct_release(xs[k]);
    }
  }
  OK(ct_dist_barrier(d));
  /* send/recv in pairs (0 -> 1, then 1 -> 0; 2 <-> 3): the group's thread runs its works in order,
   * so a rank that sends first must be matched by one that receives first. */
  if (W % 2 == 0) {
    int peer = R ^ 1;
    ct_tensor *x = make(CT_F32, R, 301), *y = make(CT_F32, 99, 301);
    if (R % 2 == 0) {
      OK(ct_dist_send(d, x, peer));
      OK(ct_dist_recv(d, y, peer));
    } else {
      OK(ct_dist_recv(d, y, peer));
      OK(ct_dist_send(d, x, peer));
    }
    float want[301];
    dv_fill(CT_F32, want, peer, 301);
    same(y, want, sizeof want, "recv");
    ct_release(x);
    ct_release(y);
  }
  /* Errors found before any communication. */
  {
    ct_tensor *x = make(CT_I32, R, 4);
    ct_status st = ct_dist_all_reduce(d, x, CT_DIST_AVG);
    CHECK(st == CT_ERR_DTYPE_MISMATCH, "AVG of i32: %s", ct_status_name(st));
    st = ct_dist_broadcast(d, x, W);
    CHECK(st == CT_ERR_INVALID_ARGUMENT, "root out of range: %s", ct_status_name(st));
    ct_tensor *g = NULL;
    if (W > 1) {
      ct_tensor *odd = make(CT_I32, R, W + 1);
      st = ct_dist_reduce_scatter(&g, d, odd, CT_DIST_SUM);
      CHECK(st == CT_ERR_SHAPE_MISMATCH && !g, "reduce_scatter of an indivisible dim 0: %s", ct_status_name(st));
      ct_release(odd);
    }
    ct_release(x);
  }
  /* Ranks that disagree: on a second group (the failure breaks it), rank 0 passes another dtype. */
  {
    ct_dist *d2 = NULL;
    OK(ct_dist_from_comm(&d2, MPI_COMM_WORLD));
    OK(ct_dist_set_timeout(d2, 20000));
    ct_tensor *x = make(R == 0 ? CT_F32 : CT_I32, R, 5);
    ct_status st = ct_dist_all_reduce(d2, x, CT_DIST_SUM);
    if (W > 1) {
      CHECK(st == CT_ERR_DIST && strstr(ct_last_error(), "disagree on the dtype"), "mismatch: %s: %s",
            ct_status_name(st), ct_last_error());
      st = ct_dist_barrier(d2);
      CHECK(st == CT_ERR_DIST && strstr(ct_last_error(), "broken"), "after the mismatch: %s: %s", ct_status_name(st),
            ct_last_error());
    }
    ct_release(x);
    ct_dist_free(d2);
  }
}

/* ---- training ---- */

/* The model: y = x W^T + b, loss = mean((y - t)^2) over the rows given, plus an unused
 * parameter u (never in the graph). */
enum { IN = 5, OUT = 3, ROWS = 4 }; /* rows per rank */

static void data(int64_t rows, int64_t first, float *x, float *t) {
  for (int64_t i = 0; i < rows; i++) {
    for (int j = 0; j < IN; j++) x[i * IN + j] = (float)sin(0.37 * (double)((first + i) * IN + j));
    for (int j = 0; j < OUT; j++) t[i * OUT + j] = (float)cos(0.23 * (double)((first + i) * OUT + j));
  }
}

struct model {
  ct_tensor *w, *b, *u;
};

static void model_new(struct model *m, int seed) {
  float w[OUT * IN], b[OUT], u[7];
  for (int i = 0; i < OUT * IN; i++) w[i] = 0.1f * (float)((i * 7 + seed) % 11) - 0.5f;
  for (int i = 0; i < OUT; i++) b[i] = 0.05f * (float)(i + seed);
  for (int i = 0; i < 7; i++) u[i] = (float)i;
  int64_t ws[2] = {OUT, IN}, bs = OUT, us = 7;
  ct_from_host(&m->w, g_dev, CT_F32, 2, ws, w);
  ct_from_host(&m->b, g_dev, CT_F32, 1, &bs, b);
  ct_from_host(&m->u, g_dev, CT_F32, 1, &us, u);
  ct_set_requires_grad(m->w, true);
  ct_set_requires_grad(m->b, true);
  ct_set_requires_grad(m->u, true);
}

static void model_free(struct model *m) {
  ct_release(m->w);
  ct_release(m->b);
  ct_release(m->u);
}

/* One forward and backward on rows [first, first + rows). */
static ct_status fwd_bwd(struct model *m, int64_t first, int64_t rows) {
  float *x = malloc(sizeof(float) * (size_t)(rows * IN)), *t = malloc(sizeof(float) * (size_t)(rows * OUT));
  data(rows, first, x, t);
  int64_t xs[2] = {rows, IN}, ts[2] = {rows, OUT};
  ct_tensor *X = NULL, *T = NULL, *wt = NULL, *y = NULL, *yb = NULL, *e = NULL, *e2 = NULL, *loss = NULL;
  ct_status st = ct_from_host(&X, g_dev, CT_F32, 2, xs, x);
  if (st == CT_OK) st = ct_from_host(&T, g_dev, CT_F32, 2, ts, t);
  if (st == CT_OK) st = ct_transpose(&wt, m->w, 0, 1);
  if (st == CT_OK) st = ct_matmul(&y, X, wt);
  if (st == CT_OK) st = ct_add(&yb, y, m->b);
  if (st == CT_OK) st = ct_sub(&e, yb, T);
  if (st == CT_OK) st = ct_mul(&e2, e, e);
  if (st == CT_OK) st = ct_mean(&loss, e2, 0, NULL, false);
  if (st == CT_OK) st = ct_backward(loss, NULL);
  ct_release(X), ct_release(T), ct_release(wt), ct_release(y), ct_release(yb), ct_release(e), ct_release(e2);
  ct_release(loss);
  free(x);
  free(t);
  return st;
}

static void read_params(struct model *m, float *out) {
  ct_to_host(m->w, out, sizeof(float) * OUT * IN);
  ct_to_host(m->b, out + OUT * IN, sizeof(float) * OUT);
}

static void test_train(ct_dist *d) {
  int R = ct_dist_rank(d), W = ct_dist_size(d);
  enum { STEPS = 3, NP = OUT * IN + OUT };
  /* Each rank starts from other values: the broadcast from rank 0 must make them equal. */
  struct model m, ref;
  model_new(&m, R);
  model_new(&ref, 0);
  ct_tensor *params[3] = {m.w, m.b, m.u}, *rparams[3] = {ref.w, ref.b, ref.u};
  ct_ddp_opts opts = {.bucket_bytes = 40, .first_bucket_bytes = 16}; /* several buckets */
  ct_ddp *ddp = NULL;
  OK(ct_ddp_new(&ddp, d, params, 3, &opts));
  CHECK(ct_ddp_bucket_count(ddp) >= 2, "%d buckets", ct_ddp_bucket_count(ddp));
  ct_optimizer *opt = NULL, *ropt = NULL;
  OK(ct_sgd_new(&opt, params, 2, 0.1, 0.9, 0.0, false));
  OK(ct_sgd_new(&ropt, rparams, 2, 0.1, 0.9, 0.0, false));
  for (int s = 0; s < STEPS; s++) {
    OK(ct_optimizer_zero_grad(opt));
    OK(ct_optimizer_zero_grad(ropt));
    if (s == 1) {
      /* no_sync: two half-shards accumulated locally, synchronized at the second. Each half's
       * loss is a mean over ROWS/2 rows, so the sum of the two is twice the shard mean: the
       * reference does the same on two halves of the whole batch. */
      OK(ct_ddp_set_sync(ddp, false));
      OK(fwd_bwd(&m, (int64_t)R * ROWS, ROWS / 2));
      OK(ct_ddp_set_sync(ddp, true));
      OK(fwd_bwd(&m, (int64_t)R * ROWS + ROWS / 2, ROWS / 2));
      /* Reference: one process, the whole batch, in two halves of W * ROWS / 2 rows each taken
       * so that each half's mean matches: rows of each rank's first halves, then second halves. */
      for (int half = 0; half < 2; half++) {
        /* mean over the W first (second) halves = average over ranks of each rank's half-mean */
        for (int r = 0; r < W; r++) OK(fwd_bwd(&ref, (int64_t)r * ROWS + half * (ROWS / 2), ROWS / 2));
      }
      /* The reference summed W half-means per half: scale its gradients by 1 / W. */
      ct_tensor *g = NULL;
      OK(ct_grad(&g, ref.w));
      OK(ct_mul_scalar_out(g, g, 1.0 / W));
      ct_release(g);
      OK(ct_grad(&g, ref.b));
      OK(ct_mul_scalar_out(g, g, 1.0 / W));
      ct_release(g);
    } else {
      OK(fwd_bwd(&m, (int64_t)R * ROWS, ROWS));
      OK(fwd_bwd(&ref, 0, (int64_t)W * ROWS));
    }
    OK(ct_optimizer_step(opt));
    OK(ct_optimizer_step(ropt));
  }
  float got[NP], want[NP];
  read_params(&m, got);
  read_params(&ref, want);
  /* f32, values O(1): the shards sum their rows in another order than the whole batch (then the
   * ranks' means are averaged), a few ulps per step; 1e-5 is ~100 ulps of 1.0 after 3 steps. */
  for (int i = 0; i < NP; i++)
    CHECK(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])), "parameter %d: %.9g, one process: %.9g", i,
          (double)got[i], (double)want[i]);
  /* Bit-identical on every rank: gather the parameters and compare rows. */
  int64_t np = NP;
  ct_tensor *p = NULL, *g = NULL;
  OK(ct_from_host(&p, g_dev, CT_F32, 1, &np, got));
  OK(ct_dist_all_gather(&g, d, p));
  float *all = malloc(sizeof(float) * (size_t)(W * NP));
  OK(ct_to_host(g, all, sizeof(float) * (size_t)(W * NP)));
  for (int r = 1; r < W; r++) CHECK(memcmp(all, all + r * NP, sizeof got) == 0, "rank %d's parameters differ from rank 0's", r);
  free(all);
  ct_release(p);
  ct_release(g);
  ct_optimizer_free(opt);
  ct_optimizer_free(ropt);
  ct_ddp_free(ddp);
  model_free(&m);
  model_free(&ref);
}

/* Rank 1 exits before its second all-reduce; the others must fail within the timeout. */
static void test_kill(ct_dist *d) {
  int R = ct_dist_rank(d);
  /* Step 0 runs under the default timeout, so that ranks started seconds apart on a loaded
   * machine (oversubscribed, under ASan) are not taken for dead; the short timeout applies from
   * step 1 on, which the survivors enter together, right after step 0. */
  for (int s = 0; s < 3; s++) {
    if (s == 1) OK(ct_dist_set_timeout(d, 5000));
    if (s == 1 && R == 1) _exit(3);
    ct_tensor *x = make(CT_F32, R, 1000);
    ct_status st = ct_dist_all_reduce(d, x, CT_DIST_SUM);
    ct_release(x);
    if (s == 0) {
      OK(st);
      continue;
    }
    CHECK(st == CT_ERR_DIST, "step %d after rank 1 died: %s: %s", s, ct_status_name(st), ct_last_error());
    const char *msg = ct_last_error();
    printf("dist-test rank %d: got: %s\n", R, msg);
    if (s == 1)
      /* "rank 1 (pid N) ... has exited", or "ranks 0 (pid N), 1 (pid M) ... have exited" when a
       * faster survivor has finished already. */
      CHECK(strstr(msg, "all_reduce") && strstr(msg, " 1 (pid") && strstr(msg, "exited") && strstr(msg, "5000 ms"),
            "the message names the collective, the dead rank and the timeout: %s", msg);
    else
      CHECK(strstr(msg, "broken"), "later collectives fail at once: %s", msg);
  }
}

int main(int argc, char **argv) {
  alarm(120); /* whatever happens, this process ends */
  const char *mode = argc > 1 ? argv[1] : "collectives";
  ct_dist *d = NULL;
  ct_status st = ct_dist_init(&d, &argc, &argv);
  if (st != CT_OK) {
    fprintf(stderr, "dist-test: ct_dist_init: %s: %s\n", ct_status_name(st), ct_last_error());
    return 1;
  }
  g_rank = ct_dist_rank(d);
  st = ct_dist_device(&g_dev, d);
  if (st != CT_OK) {
    fprintf(stderr, "dist-test: ct_dist_device: %s\n", ct_last_error());
    return 1;
  }
  if (strcmp(mode, "collectives") == 0) test_collectives(d);
  else if (strcmp(mode, "train") == 0) test_train(d);
  else if (strcmp(mode, "kill") == 0) test_kill(d);
  else FAIL("unknown mode %s", mode);
  if (!g_fail) printf("dist-test rank %d: ok\n", g_rank);
  fflush(stdout);
  fflush(stderr);
  if (strcmp(mode, "kill") == 0) {
    /* The group is broken: MPI can't finalize with a dead rank. Leave at once. */
    _exit(g_fail ? 1 : 0);
  }
  ct_dist_free(d);
  ct_shutdown();
  return g_fail ? 1 : 0;
}
