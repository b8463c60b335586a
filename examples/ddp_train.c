/* Data-parallel training of a small MLP (docs/DISTRIBUTED.md).
 *
 *   mpirun -np 2 ./ddp_train            one process per rank, each on its device
 *   ./ddp_train --devices               one process, one replica per OpenCL device
 *                                       (POCL_DEVICES="pthread pthread" gives PoCL two)
 *
 * Every rank (replica) trains on its shard of each batch; DDP averages the gradients during the
 * backward, so all replicas make the same update and stay identical. The program prints the
 * loss, checks that it fell and that the replicas agree, and prints "ddp_train rank R: ok". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/cltensor.h"

enum { IN = 8, HID = 16, OUT = 1, BATCH = 32, STEPS = 40, MAXR = 8 };

#define TRY(x)                                                                             \
  do {                                                                                     \
    ct_status s_ = (x);                                                                    \
    if (s_ != CT_OK) {                                                                     \
      fprintf(stderr, "ddp_train: %s: %s: %s\n", #x, ct_status_name(s_), ct_last_error()); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

struct mlp {
  ct_tensor *w1, *b1, *w2, *b2;
};

static ct_tensor *param(ct_device *dev, int ndim, const int64_t *shape, unsigned seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *h = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) h[i] = 0.3f * (float)sin(12.9898 * (double)(i + 1) * (seed + 1));
  ct_tensor *t = NULL;
  TRY(ct_from_host(&t, dev, CT_F32, ndim, shape, h));
  TRY(ct_set_requires_grad(t, true));
  free(h);
  return t;
}

/* Replicas start from different values on purpose: ct_ddp_new broadcasts rank 0's. */
static void mlp_new(struct mlp *m, ct_device *dev, unsigned seed) {
  m->w1 = param(dev, 2, (int64_t[]){HID, IN}, seed);
  m->b1 = param(dev, 1, (int64_t[]){HID}, seed + 1);
  m->w2 = param(dev, 2, (int64_t[]){OUT, HID}, seed + 2);
  m->b2 = param(dev, 1, (int64_t[]){OUT}, seed + 3);
}

/* The batch of step s, rows [first, first + rows): y = sum of sin(x). */
static void batch(int s, int first, int rows, float *x, float *y) {
  for (int i = 0; i < rows; i++) {
    double acc = 0;
    for (int j = 0; j < IN; j++) {
      double v = sin(0.7 * (s * BATCH + first + i) + 1.3 * j);
      x[i * IN + j] = (float)v;
      acc += sin(v);
    }
    y[i] = (float)(acc / IN);
  }
}

/* Forward and backward on this replica's shard; returns the loss. */
static float step(struct mlp *m, ct_device *dev, int s, int first, int rows) {
  float x[BATCH * IN], y[BATCH];
  batch(s, first, rows, x, y);
  ct_tensor *X, *Y, *t1, *h, *a, *t2, *o, *e, *e2, *loss, *w1t, *w2t;
  TRY(ct_from_host(&X, dev, CT_F32, 2, (int64_t[]){rows, IN}, x));
  TRY(ct_from_host(&Y, dev, CT_F32, 2, (int64_t[]){rows, OUT}, y));
  TRY(ct_transpose(&w1t, m->w1, 0, 1));
  TRY(ct_matmul(&t1, X, w1t));
  TRY(ct_add(&h, t1, m->b1));
  TRY(ct_tanh(&a, h));
  TRY(ct_transpose(&w2t, m->w2, 0, 1));
  TRY(ct_matmul(&t2, a, w2t));
  TRY(ct_add(&o, t2, m->b2));
  TRY(ct_sub(&e, o, Y));
  TRY(ct_mul(&e2, e, e));
  TRY(ct_mean(&loss, e2, 0, NULL, false));
  TRY(ct_backward(loss, NULL)); /* DDP averages the gradients over the replicas in here */
  float l = 0;
  TRY(ct_to_host(loss, &l, sizeof l));
  ct_tensor *all[] = {X, Y, t1, h, a, t2, o, e, e2, loss, w1t, w2t};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) ct_release(all[i]);
  return l;
}

int main(int argc, char **argv) {
  bool devices = argc > 1 && strcmp(argv[1], "--devices") == 0;
  ct_dist *d = NULL;
  ct_device *devs[MAXR];
  if (devices) {
    int n = 0;
    TRY(ct_device_count(&n));
    n = n > MAXR ? MAXR : n;
    for (int i = 0; i < n; i++) TRY(ct_device_get(&devs[i], i));
    TRY(ct_dist_from_devices(&d, devs, n));
  } else {
    TRY(ct_dist_init(&d, &argc, &argv));
    TRY(ct_dist_device(&devs[0], d));
  }
  int rank = ct_dist_rank(d), world = ct_dist_size(d), R = ct_dist_local_count(d);
  if (BATCH % world) {
    fprintf(stderr, "ddp_train: the batch of %d does not split into %d shards\n", BATCH, world);
    return 1;
  }
  int shard = BATCH / world;
  struct mlp m[MAXR];
  ct_tensor *params[4 * MAXR];
  ct_optimizer *opt[MAXR];
  for (int r = 0; r < R; r++) {
    mlp_new(&m[r], devs[r], (unsigned)(rank + r) * 7);
    ct_tensor *p[4] = {m[r].w1, m[r].b1, m[r].w2, m[r].b2};
    memcpy(params + 4 * r, p, sizeof p);
    TRY(ct_sgd_new(&opt[r], p, 4, 0.2, 0.9, 0.0, false));
  }
  ct_ddp *ddp = NULL;
  TRY(ct_ddp_new(&ddp, d, params, 4, NULL)); /* replica-major for a device group */
  float first = 0, last = 0;
  for (int s = 0; s < STEPS; s++) {
    float l = 0;
    for (int r = 0; r < R; r++) {
      TRY(ct_optimizer_zero_grad(opt[r]));
      l += step(&m[r], devs[r], s, (rank + r) * shard, shard);
    }
    for (int r = 0; r < R; r++) TRY(ct_optimizer_step(opt[r]));
    /* The mean loss over the whole batch, for printing. */
    ct_tensor *lt = NULL;
    TRY(ct_from_host(&lt, devs[0], CT_F32, 1, (int64_t[]){1}, &l));
    if (!devices) TRY(ct_dist_all_reduce(d, lt, CT_DIST_SUM));
    TRY(ct_to_host(lt, &l, sizeof l));
    ct_release(lt);
    l /= (float)world;
    if (s == 0) first = l;
    last = l;
    if (rank == 0 && (s % 10 == 0 || s == STEPS - 1)) printf("step %2d  loss %.5f\n", s, (double)l);
  }
  /* Every replica holds the same parameters: compare the first weight matrix with replica 0's. */
  int same = 1;
  for (int r = 0; r < R; r++) {
    float a[HID * IN], b[HID * IN];
    ct_tensor *g = NULL;
    if (devices) {
      TRY(ct_to_host(m[0].w1, a, sizeof a));
      TRY(ct_to_host(m[r].w1, b, sizeof b));
    } else {
      TRY(ct_dist_all_gather(&g, d, m[0].w1)); /* [world, HID, IN] */
      float all[MAXR * HID * IN];
      TRY(ct_to_host(g, all, sizeof(float) * (size_t)world * HID * IN));
      memcpy(a, all, sizeof a);
      memcpy(b, all + (size_t)(world - 1) * HID * IN, sizeof b);
      ct_release(g);
    }
    same &= memcmp(a, b, sizeof a) == 0;
  }
  int ok = same && last < 0.5f * first;
  printf("ddp_train rank %d: %s (%d %s, loss %.5f -> %.5f, replicas %s)\n", rank, ok ? "ok" : "FAILED", world,
         devices ? "devices" : "ranks", (double)first, (double)last, same ? "identical" : "DIFFER");
  ct_ddp_free(ddp);
  for (int r = 0; r < R; r++) {
    ct_optimizer_free(opt[r]);
    ct_release(m[r].w1), ct_release(m[r].b1), ct_release(m[r].w2), ct_release(m[r].b2);
  }
  ct_dist_free(d);
  ct_shutdown();
  return ok ? 0 : 1;
}
