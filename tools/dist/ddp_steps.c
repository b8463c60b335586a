/* cltensor-dist-bench --ddp: how much of DDP's communication the backward hides (issue #31's
 * overlap figure, docs/DISTRIBUTED.md).
 *
 * For the digits CNN (Adam, a batch of 64 images) and the character GPT (AdamW, 32 windows of 64
 * tokens), as tools/bench/group_train.c steps them on the committed fixtures, each rank takes
 * its half of the batch and times, interleaved in one run (the ranks in step, medians):
 *   local   the training step on the half batch without communication (ct_ddp_set_sync false:
 *           the same step, the hooks on, the all-reduces off);
 *   allred  the bare all-reduce (AVG) of one flat f32 tensor as large as all the gradients;
 *   ddp     the DDP step on the half batch: the buckets' all-reduces during the backward.
 * overlap = ddp / (local + allred); the issue asks for at most 1.3 ("mostly hidden"); 1.0 means
 * the all-reduce costs what it costs alone, below 1 the backward hides part of it. Both ranks
 * compute in all three, so the machine is as loaded in each. Each time is the slower rank's of
 * each repetition (a synchronous step waits for the slower rank, so a local step that one rank
 * takes longer is a cost of DDP that no communication causes); local0 is rank 0's own, and
 * overlap0 = ddp / (local0 + allred) is the "one rank's step". Rank 0 prints. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "charlm_model.h"
#include "cltensor/cltensor.h"
#include "ddp_steps.h"
#include "digits_cnn_model.h"

#define DTRY(x)                                                                                       \
  do {                                                                                                \
    ct_status s_ = (x);                                                                               \
    if (s_ != CT_OK) {                                                                                \
      fprintf(stderr, "cltensor-dist-bench --ddp: %s: %s: %s\n", #x, ct_status_name(s_), ct_last_error()); \
      return 1;                                                                                       \
    }                                                                                                 \
  } while (0)

enum { REPS = 21 };

typedef struct model {
  const char *name, *what;
  digits_cnn cnn;
  charlm gpt;
  bool is_gpt;
  ct_tensor *params[CHARLM_MAX_PARAMS > DIGITS_NPARAMS ? CHARLM_MAX_PARAMS : DIGITS_NPARAMS];
  int np;
  ct_optimizer *opt;
  ct_tensor *x, *y; /* this rank's half of the batch */
} model;

double dist_bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int dist_bench_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static ct_status step(model *m) {
  ct_tensor *loss = NULL;
  float host = 0;
  ct_status st = m->is_gpt ? charlm_loss(&loss, &m->gpt, m->x, m->y) : digits_cnn_loss(&loss, &m->cnn, m->x, m->y);
  if (st == CT_OK) st = ct_optimizer_zero_grad(m->opt);
  if (st == CT_OK) st = ct_backward(loss, NULL);
  if (st == CT_OK) st = ct_optimizer_step(m->opt);
  if (st == CT_OK) st = ct_to_host(loss, &host, sizeof host); /* the step's end, as a program sees it */
  ct_release(loss);
  return st;
}

static ct_status make_opt(model *m, double lr, double wd, bool decoupled) {
  ct_status st = CT_OK;
  for (int i = 0; i < m->np && st == CT_OK; i++) st = ct_set_requires_grad(m->params[i], true);
  if (st == CT_OK) st = ct_adam_new(&m->opt, m->params, m->np, lr, 0.9, 0.999, 1e-8, wd, decoupled);
  return st;
}

/* The digits CNN and rank r's 32 of the first 64 images of epoch 0 (group_train.c's batch). */
static ct_status load_cnn(model *m, ct_safetensors *f, ct_device *dev, int rank) {
  ct_status st = digits_cnn_load(&m->cnn, f);
  (void)dev;
  m->cnn.training = true;
  m->np = DIGITS_NPARAMS;
  for (int i = 0; i < DIGITS_NPARAMS && st == CT_OK; i++) m->params[i] = m->cnn.w[digits_cnn_param_index[i]];
  if (st == CT_OK) st = make_opt(m, 3e-3, 0.0, false);
  if (st == CT_OK) st = digits_fixture_batch(&m->x, &m->y, f, 32 * rank, 32);
  return st;
}

/* The character GPT and rank r's 16 of step 0's 32 windows. */
static ct_status load_gpt(model *m, ct_safetensors *f, ct_device *dev, int rank) {
  ct_tensor *text = NULL, *starts = NULL, *row = NULL;
  ct_status st = charlm_load(&m->gpt, f);
  m->is_gpt = true;
  m->np = st == CT_OK ? charlm_params(&m->gpt, m->params, NULL) : 0;
  const char *lr = ct_safetensors_metadata_get(f, "lr"), *wd = ct_safetensors_metadata_get(f, "weight_decay");
  if (st == CT_OK) st = make_opt(m, lr ? atof(lr) : 1e-3, wd ? atof(wd) : 0.01, true);
  if (st == CT_OK) st = ct_safetensors_get(&text, f, "text");
  if (st == CT_OK) st = ct_safetensors_get(&starts, f, "starts");
  const int64_t b = 16, t = m->gpt.context;
  uint8_t *tx = st == CT_OK ? malloc(ct_tensor_nbytes(text)) : NULL;
  int16_t s0[32];
  int64_t *ids = malloc((size_t)(b * t) * sizeof *ids), *tgt = malloc((size_t)(b * t) * sizeof *tgt);
  if (st == CT_OK && (!tx || !ids || !tgt)) st = CT_ERR_OUT_OF_MEMORY;
  if (st == CT_OK) st = ct_to_host(text, tx, ct_tensor_nbytes(text));
  if (st == CT_OK && ct_tensor_shape(starts)[1] != 32) st = CT_ERR_FORMAT;
  if (st == CT_OK) st = ct_slice(&row, starts, 0, 0, 1, 1);
  if (st == CT_OK) st = ct_to_host(row, s0, sizeof s0);
  for (int64_t i = 0; st == CT_OK && i < b; i++)
    for (int64_t j = 0; j < t; j++) {
      ids[i * t + j] = tx[s0[16 * rank + i] + j];
      tgt[i * t + j] = tx[s0[16 * rank + i] + j + 1];
    }
  if (st == CT_OK) st = ct_from_host(&m->x, dev, CT_I64, 2, (int64_t[]){b, t}, ids);
  if (st == CT_OK) st = ct_from_host(&m->y, dev, CT_I64, 1, (int64_t[]){b * t}, tgt);
  free(tx);
  free(ids);
  free(tgt);
  ct_release(row);
  ct_release(text);
  ct_release(starts);
  return st;
}

static int measure(model *m, ct_dist *d, ct_device *dev) {
  int64_t total = 0;
  for (int i = 0; i < m->np; i++) total += ct_numel(m->params[i]);
  ct_tensor *flat = NULL;
  ct_ddp *ddp = NULL;
  DTRY(ct_zeros(&flat, dev, CT_F32, 1, &total));
  DTRY(ct_ddp_new(&ddp, d, m->params, m->np, NULL));
  double tl[REPS], tl0[REPS], ta[REPS], td[REPS];
  /* Warm-up: kernels, buckets, MPI connections; the agreement checks of the first DDP step. */
  DTRY(ct_ddp_set_sync(ddp, false));
  DTRY(step(m));
  DTRY(ct_ddp_set_sync(ddp, true));
  DTRY(step(m));
  DTRY(ct_dist_all_reduce(d, flat, CT_DIST_AVG));
  for (int r = 0; r < REPS; r++) {
    DTRY(ct_ddp_set_sync(ddp, false));
    DTRY(ct_dist_barrier(d));
    double t0 = dist_bench_now();
    DTRY(step(m));
    tl[r] = dist_bench_now() - t0;
    DTRY(ct_dist_barrier(d));
    t0 = dist_bench_now();
    DTRY(ct_dist_all_reduce(d, flat, CT_DIST_AVG));
    ta[r] = dist_bench_now() - t0;
    DTRY(ct_ddp_set_sync(ddp, true));
    DTRY(ct_dist_barrier(d));
    t0 = dist_bench_now();
    DTRY(step(m));
    td[r] = dist_bench_now() - t0;
    /* The slower rank's times (the program's own MPI call: the group is idle after a
     * synchronous collective). */
    double mine[3] = {tl[r], ta[r], td[r]}, slow[3];
    MPI_Allreduce(mine, slow, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    tl0[r] = tl[r];
    tl[r] = slow[0];
    ta[r] = slow[1];
    td[r] = slow[2];
  }
  qsort(tl, REPS, sizeof *tl, dist_bench_cmp);
  qsort(tl0, REPS, sizeof *tl0, dist_bench_cmp);
  qsort(ta, REPS, sizeof *ta, dist_bench_cmp);
  qsort(td, REPS, sizeof *td, dist_bench_cmp);
  double l = tl[REPS / 2], l0 = tl0[REPS / 2], a = ta[REPS / 2], s = td[REPS / 2];
  if (ct_dist_rank(d) == 0)
    printf("%-22s %-30s %8lld %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f\n", m->name, m->what, (long long)total, l0 * 1e3,
           l * 1e3, a * 1e3, s * 1e3, s / (l + a), s / (l0 + a));
  fflush(stdout);
  ct_ddp_free(ddp);
  ct_release(flat);
  return 0;
}

int dist_bench_ddp(ct_dist *d, ct_device *dev, const char *data_dir) {
  int rank = ct_dist_rank(d);
  if (ct_dist_size(d) != 2) {
    if (rank == 0) fprintf(stderr, "cltensor-dist-bench --ddp: run it on 2 ranks (the batches are split in two)\n");
    return 1;
  }
  if (rank == 0) {
    printf("# DDP steps on 2 ranks, device %s; ms, medians of %d (the slower rank's); overlap = ddp / (local + "
           "allred)\n",
           ct_device_spec(dev), REPS);
    printf("%-22s %-30s %8s %9s %9s %9s %9s %8s %8s\n", "model", "per rank", "params", "local0_ms", "local_ms",
           "allred_ms", "ddp_ms", "overlap", "overlap0");
  }
  char path[1024];
  int rc = 0;
  for (int k = 0; k < 2 && rc == 0; k++) {
    model m = {.name = k ? "charlm_train_step" : "digits_cnn_train_step",
               .what = k ? "16x64 tokens, 2 blocks, AdamW" : "32x1x8x8, Adam"};
    snprintf(path, sizeof path, "%s/%s", data_dir, k ? "train_charlm.safetensors" : "train_digits.safetensors");
    ct_safetensors *f = NULL;
    ct_status st = ct_safetensors_load_as(&f, path, dev, CT_F64, CT_F32);
    if (st == CT_OK) st = k ? load_gpt(&m, f, dev, rank) : load_cnn(&m, f, dev, rank);
    if (st != CT_OK) {
      fprintf(stderr, "cltensor-dist-bench --ddp: %s: %s: %s\n", path, ct_status_name(st), ct_last_error());
      rc = 1;
    }
    ct_manual_seed(0);
    if (rc == 0) rc = measure(&m, d, dev);
    ct_optimizer_free(m.opt);
    if (k) charlm_release(&m.gpt);
    else digits_cnn_release(&m.cnn);
    ct_release(m.x);
    ct_release(m.y);
    ct_safetensors_free(f);
  }
  return rc;
}
