/* Trains the digits CNN (digits_cnn_model.c) from PyTorch's initial weights with Adam, on any
 * OpenCL device, and checks that the losses are PyTorch's.
 *
 *   train_digits [FIXTURE] [--device SPEC] [--epochs N | --steps N] [--check] [--save PATH]
 *                [--resume PATH] [--resume-check N] [--quiet]
 *
 * FIXTURE (default examples/data/train_digits.safetensors) is made by examples/train_digits.py:
 * the initial weights, the training and test splits, the batch order of every epoch and
 * PyTorch's losses. The program trains as the script did: batches of 64 in the stored order,
 * cross entropy, Adam (lr 3e-3), batch norm in training mode, dropout drawing its masks from
 * ct_manual_seed(seed) (the script feeds PyTorch the same masks), and prints one line per epoch:
 * the mean training loss, the test accuracy (eval mode) and the training examples per second.
 *
 *   (no option)      the full run of the fixture (20 epochs); fails below 97% test accuracy
 *   --epochs N       N epochs; --steps N: N steps (batches)
 *   --check          compares each of the first 50 losses (or --steps N) with PyTorch's, and
 *                    the gradients of step 0 (within 1e-3 of the largest); exits 1 on a
 *                    mismatch. A loss must be within 1e-4 relative, or LOSS_SPREAD_FACTOR
 *                    times the largest difference between PyTorch's own runs up to that step
 *                    (f32 vs f64, and f32 on 2 threads vs 1), whichever is larger: this
 *                    training amplifies rounding differences chaotically from step 14 on
 *                    (PyTorch on 1 thread leaves its 2-thread run by 1.4e-5 at step 15, 1e-4
 *                    at 21, 6.6e-3 at 43; see train_digits.py)
 *   --save PATH      writes a checkpoint at the end: the weights and running statistics, Adam's
 *                    state (ct_optimizer_save), the step and the generator's state
 *   --resume PATH    continues from such a checkpoint (bit-identical to an uninterrupted run)
 *   --resume-check N trains N steps while saving a checkpoint after N / 2 (to --save PATH, or
 *                    train_digits.ckpt in the current folder), then resumes a fresh model from
 *                    it and checks that steps N / 2 .. N give the same losses and weights, bit
 *                    for bit; exits 1 otherwise
 * The device is --device SPEC, else $CLTENSOR_DEVICE or the default. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/cltensor.h"
#include "digits_cnn_model.h"
#include "train_common.h"

#define PROG "train_digits"
#define LOSS_RTOL 1e-4
#define LOSS_SPREAD_FACTOR 4.0
#define GRAD_RTOL 1e-3
#define GRAD_FLOOR 1e-3
#define MIN_ACCURACY 0.97
#define MAX_BATCH 512

typedef struct trainer {
  ct_device *d;
  ct_safetensors *fix;
  digits_cnn m;
  ct_optimizer *opt;
  ct_tensor *x, *y, *tx, *ty; /* training and test images (f32, scaled) and labels */
  int16_t *order;             /* [epochs][n] */
  int64_t n, epochs, batch, steps_per_epoch, step;
  uint64_t seed;
} trainer;

static ct_status images(ct_tensor **out, const ct_safetensors *f, const char *name) {
  ct_tensor *u8 = NULL, *x = NULL;
  ct_status st = ct_safetensors_get(&u8, f, name);
  if (st == CT_OK) st = ct_cast(&x, u8, CT_F32);
  if (st == CT_OK) st = ct_mul_scalar(out, x, 1.0 / 16.0); /* exact: pixel values 0..16 */
  ct_release(x);
  ct_release(u8);
  return st;
}

static void trainer_free(trainer *t) {
  ct_optimizer_free(t->opt);
  digits_cnn_release(&t->m);
  ct_release(t->x);
  ct_release(t->y);
  ct_release(t->tx);
  ct_release(t->ty);
  free(t->order);
  memset(t, 0, sizeof *t);
}

/* A fresh model at PyTorch's initial weights, the data and Adam; the generator seeded. */
static ct_status trainer_init(trainer *t, ct_device *d, const ct_safetensors *f) {
  memset(t, 0, sizeof *t);
  t->d = d;
  const char *lr = train_meta(PROG, f, "lr"), *batch = train_meta(PROG, f, "batch");
  const char *seed = train_meta(PROG, f, "seed"), *ep = train_meta(PROG, f, "epochs");
  if (!lr || !batch || !seed || !ep) return CT_ERR_FORMAT;
  t->batch = atoll(batch);
  if (t->batch < 1 || t->batch > MAX_BATCH) {
    fprintf(stderr, PROG ": batch %s in the fixture (expected 1..%d)\n", batch, MAX_BATCH);
    return CT_ERR_FORMAT;
  }
  t->seed = strtoull(seed, NULL, 10);
  ct_status st = digits_cnn_load(&t->m, f);
  if (st != CT_OK) return st;
  t->m.training = true;
  ct_tensor *params[DIGITS_NPARAMS];
  for (int i = 0; i < DIGITS_NPARAMS && st == CT_OK; i++) {
    params[i] = t->m.w[digits_cnn_param_index[i]];
    st = ct_set_requires_grad(params[i], true);
  }
  /* PyTorch's Adam defaults: betas (0.9, 0.999), eps 1e-8, no weight decay. */
  if (st == CT_OK) st = ct_adam_new(&t->opt, params, DIGITS_NPARAMS, atof(lr), 0.9, 0.999, 1e-8, 0.0, false);
  if (st == CT_OK) st = images(&t->x, f, "train.x");
  if (st == CT_OK) st = images(&t->tx, f, "test.x");
  if (st == CT_OK) st = ct_safetensors_get(&t->y, f, "train.y");
  if (st == CT_OK) st = ct_safetensors_get(&t->ty, f, "test.y");
  if (st == CT_OK) st = train_host_copy((void **)&t->order, f, "order", NULL);
  if (st == CT_OK) {
    t->epochs = atoll(ep);
    t->n = ct_tensor_shape(t->y)[0];
    t->steps_per_epoch = (t->n + t->batch - 1) / t->batch;
  }
  ct_manual_seed(t->seed);
  if (st != CT_OK) trainer_free(t);
  return st;
}

/* The tensors a checkpoint holds: every weight and running statistic, by their state-dict names. */
static void ckpt_names(const char **names) {
  for (int i = 0; i < DIGITS_NWEIGHTS; i++) names[i] = digits_cnn_name(i);
}

static ct_status save(const trainer *t, const char *path) {
  const char *names[DIGITS_NWEIGHTS];
  ckpt_names(names);
  return train_checkpoint_save(path, t->m.w, names, DIGITS_NWEIGHTS, t->opt, t->step);
}

static ct_status resume(trainer *t, const char *path) {
  const char *names[DIGITS_NWEIGHTS];
  ckpt_names(names);
  return train_checkpoint_load(path, t->d, t->m.w, names, DIGITS_NWEIGHTS, t->opt, &t->step);
}

/* One step: forward on batch t->step, cross entropy, backward, Adam. *loss: the loss. */
static ct_status train_step(trainer *t, double *loss, int64_t *count, ct_tensor **grads_out) {
  const int64_t e = (t->step / t->steps_per_epoch) % t->epochs, b = t->step % t->steps_per_epoch;
  const int64_t lo = b * t->batch, hi = lo + t->batch < t->n ? lo + t->batch : t->n;
  int64_t idx[MAX_BATCH];
  for (int64_t i = lo; i < hi; i++) idx[i - lo] = t->order[e * t->n + i];
  ct_tensor *ix = NULL, *xb = NULL, *yb = NULL, *logits = NULL, *l = NULL;
  ct_status st = ct_from_host(&ix, t->d, CT_I64, 1, (int64_t[]){hi - lo}, idx);
  if (st == CT_OK) st = ct_index_select(&xb, t->x, 0, ix);
  if (st == CT_OK) st = ct_index_select(&yb, t->y, 0, ix);
  if (st == CT_OK) st = digits_cnn_forward(&logits, &t->m, xb);
  if (st == CT_OK) st = ct_cross_entropy(&l, logits, yb, -100, 0.0, CT_REDUCTION_MEAN);
  if (st == CT_OK) st = ct_optimizer_zero_grad(t->opt);
  if (st == CT_OK) st = ct_backward(l, NULL);
  for (int i = 0; grads_out && i < DIGITS_NPARAMS && st == CT_OK; i++) {
    ct_tensor *g = NULL;
    st = ct_grad(&g, t->m.w[digits_cnn_param_index[i]]);
    if (st == CT_OK) st = g ? ct_clone(&grads_out[i], g) : CT_ERR_INVALID_ARGUMENT;
    ct_release(g);
  }
  if (st == CT_OK) st = ct_optimizer_step(t->opt);
  if (st == CT_OK) st = train_item(loss, l);
  *count = hi - lo;
  if (st == CT_OK) t->step++;
  ct_release(l);
  ct_release(logits);
  ct_release(yb);
  ct_release(xb);
  ct_release(ix);
  return st;
}

/* Test accuracy in eval mode (running statistics, no dropout), without recording. */
static ct_status test_accuracy(trainer *t, double *acc) {
  const bool grad = ct_set_grad_enabled(false);
  t->m.training = false;
  ct_tensor *logits = NULL, *pred = NULL, *eq = NULL, *sum = NULL;
  ct_status st = digits_cnn_forward(&logits, &t->m, t->tx);
  if (st == CT_OK) st = ct_argmax(&pred, logits, 1, false);
  if (st == CT_OK) st = ct_eq(&eq, pred, t->ty);
  if (st == CT_OK) st = ct_sum(&sum, eq, 0, NULL, false);
  int64_t correct = 0;
  if (st == CT_OK) st = ct_to_host(sum, &correct, sizeof correct);
  *acc = (double)correct / (double)ct_tensor_shape(t->ty)[0];
  ct_release(sum);
  ct_release(eq);
  ct_release(pred);
  ct_release(logits);
  t->m.training = true;
  ct_set_grad_enabled(grad);
  return st;
}

/* Step 0's gradients against PyTorch's (relative to the largest |gradient| of each tensor). */
static bool check_grads(const trainer *t, ct_tensor *const *g, bool verbose) {
  bool ok = true;
  for (int i = 0; i < DIGITS_NPARAMS; i++) {
    char name[96];
    snprintf(name, sizeof name, "torch.grad0.%s", digits_cnn_name(digits_cnn_param_index[i]));
    ct_tensor *ref = NULL;
    const int64_t n = ct_numel(g[i]);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    ct_status st = ct_safetensors_get(&ref, t->fix, name);
    if (st == CT_OK && a && b && ct_numel(ref) == n) st = ct_to_host(g[i], a, (size_t)n * sizeof *a);
    else if (st == CT_OK) st = CT_ERR_INVALID_ARGUMENT;
    if (st == CT_OK) st = ct_to_host(ref, b, (size_t)n * sizeof *b);
    double diff = 0, mx = 0;
    for (int64_t k = 0; st == CT_OK && k < n; k++) {
      diff = fmax(diff, fabs((double)a[k] - b[k]));
      mx = fmax(mx, fabs((double)b[k]));
    }
    /* The conv biases before a batch norm have a zero gradient (the norm removes any shift):
     * both sides are rounding noise there (~1e-7), so the scale has a floor of 1e-3, below
     * every other tensor's largest gradient (3.7e-3 .. 8e-2 here). */
    const bool good = st == CT_OK && diff <= GRAD_RTOL * fmax(mx, GRAD_FLOOR);
    if (verbose || !good)
      printf(PROG ": step 0 gradient of %-14s max |difference| %.2e, max |PyTorch| %.2e%s\n",
             digits_cnn_name(digits_cnn_param_index[i]), diff, mx, good ? "" : "  MISMATCH");
    ok = ok && good;
    free(a);
    free(b);
    ct_release(ref);
  }
  return ok;
}

typedef struct run_opts {
  int64_t steps;        /* total steps to reach (absolute), -1: from epochs */
  bool check, quiet;
  const float *losses;  /* PyTorch's, check_steps of them */
  const double *tol;    /* the relative limit of each checked step */
  int64_t check_steps;
  double *record;       /* when not NULL: the loss of each step (by absolute step) */
} run_opts;

/* Trains until t->step == until; prints a line per completed epoch. Returns the number of loss
 * mismatches (check), or -1 on an error (printed). */
static int run(trainer *t, int64_t until, const run_opts *o) {
  int mismatches = 0;
  double ep_loss = 0, ep_ms = 0;
  int64_t ep_count = 0;
  while (t->step < until) {
    const int64_t s = t->step;
    double loss = 0, t0 = train_now_ms();
    int64_t count = 0;
    ct_tensor *g[DIGITS_NPARAMS] = {0};
    const bool grads = o->check && s == 0;
    ct_status st = train_step(t, &loss, &count, grads ? g : NULL);
    ep_ms += train_now_ms() - t0;
    if (st != CT_OK) {
      train_fail(PROG, "training step");
      return -1;
    }
    if (grads) mismatches += !check_grads(t, g, !o->quiet);
    for (int i = 0; i < DIGITS_NPARAMS; i++) ct_release(g[i]);
    if (o->record) o->record[s] = loss;
    if (o->check && s < o->check_steps)
      mismatches += !train_check_loss(PROG, s, loss, o->losses[s], o->tol[s], !o->quiet);
    ep_loss += loss * (double)count;
    ep_count += count;
    if (t->step % t->steps_per_epoch == 0 || t->step == until) {
      double acc = 0;
      if (test_accuracy(t, &acc) != CT_OK) {
        train_fail(PROG, "test accuracy");
        return -1;
      }
      printf("epoch %" PRId64 "%s (step %" PRId64 "): loss %.4f, test accuracy %.2f%%, %.0f examples/s\n",
             (t->step - 1) / t->steps_per_epoch + 1, t->step % t->steps_per_epoch ? " (partial)" : "", t->step,
             ep_loss / (double)ep_count, 100 * acc, (double)ep_count / (ep_ms / 1e3));
      fflush(stdout);
      ep_loss = 0;
      ep_ms = 0;
      ep_count = 0;
    }
  }
  return mismatches;
}

/* Compares two trainers' weights, running statistics included, bit for bit. */
static bool same_weights(const trainer *a, const trainer *b) {
  bool same = true;
  for (int i = 0; i < DIGITS_NWEIGHTS; i++) {
    const size_t n = ct_tensor_nbytes(a->m.w[i]);
    void *x = malloc(n), *y = malloc(n);
    same = same && x && y && ct_to_host(a->m.w[i], x, n) == CT_OK && ct_to_host(b->m.w[i], y, n) == CT_OK &&
           memcmp(x, y, n) == 0;
    if (!same) printf(PROG ": %s differs after resuming\n", digits_cnn_name(i));
    free(x);
    free(y);
    if (!same) break;
  }
  return same;
}

static int resume_check(ct_device *d, ct_safetensors *f, int64_t n, const char *path, const run_opts *base) {
  trainer a, b;
  double *la = calloc((size_t)n, sizeof *la), *lb = calloc((size_t)n, sizeof *lb);
  if (!la || !lb || trainer_init(&a, d, f) != CT_OK) return train_fail(PROG, "setting up");
  a.fix = f;
  run_opts o = *base;
  o.record = la;
  if (run(&a, n / 2, &o) < 0) return 1;
  if (save(&a, path) != CT_OK) return train_fail(PROG, "saving the checkpoint");
  if (run(&a, n, &o) < 0) return 1;
  if (trainer_init(&b, d, f) != CT_OK) return train_fail(PROG, "setting up");
  b.fix = f;
  if (resume(&b, path) != CT_OK) return train_fail(PROG, "resuming");
  printf(PROG ": resumed at step %" PRId64 " from %s\n", b.step, path);
  o.record = lb;
  if (run(&b, n, &o) < 0) return 1;
  int bad = 0;
  for (int64_t s = n / 2; s < n; s++)
    if (memcmp(&la[s], &lb[s], sizeof la[s]) != 0) {
      printf(PROG ": step %" PRId64 ": loss %.9g uninterrupted, %.9g resumed\n", s, la[s], lb[s]);
      bad++;
    }
  if (!same_weights(&a, &b)) bad++;
  printf(PROG ": resume check over steps %" PRId64 "..%" PRId64 ": %s\n", n / 2, n, bad ? "FAILED" : "identical");
  trainer_free(&a);
  trainer_free(&b);
  free(la);
  free(lb);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *path = "examples/data/train_digits.safetensors", *spec = NULL, *save_path = NULL, *resume_path = NULL;
  int64_t epochs = -1, steps = -1, rcheck = -1;
  bool check = false, quiet = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const bool has = i + 1 < argc;
    if (!strcmp(a, "--device") && has) spec = argv[++i];
    else if (!strcmp(a, "--epochs") && has) epochs = atoll(argv[++i]);
    else if (!strcmp(a, "--steps") && has) steps = atoll(argv[++i]);
    else if (!strcmp(a, "--save") && has) save_path = argv[++i];
    else if (!strcmp(a, "--resume") && has) resume_path = argv[++i];
    else if (!strcmp(a, "--resume-check") && has) rcheck = atoll(argv[++i]);
    else if (!strcmp(a, "--check")) check = true;
    else if (!strcmp(a, "--quiet")) quiet = true;
    else if (a[0] != '-') path = a;
    else {
      fprintf(stderr, "usage: " PROG " [FIXTURE] [--device SPEC] [--epochs N | --steps N] [--check] [--save PATH]\n"
                      "       [--resume PATH] [--resume-check N] [--quiet]\n");
      return 2;
    }
  }
  ct_device *d;
  if ((spec ? ct_device_find(&d, spec) : ct_device_default(&d)) != CT_OK) return train_fail(PROG, "choosing a device");
  printf("device: %s (%s)\n", ct_device_spec(d), ct_device_properties(d)->name);
  ct_safetensors *f = NULL;
  if (train_fixture_load(&f, path, d) != CT_OK) return train_fail(PROG, "loading the fixture");
  const char *cs = train_meta(PROG, f, "check_steps");
  if (!cs) return 1;
  run_opts o = {.check = check, .quiet = quiet, .check_steps = atoll(cs)};
  float *losses = NULL;
  double *f64 = NULL, *f1t = NULL;
  int64_t n32 = 0, n64 = 0, n1t = 0;
  if (train_host_copy((void **)&losses, f, "torch.losses", &n32) != CT_OK ||
      train_host_doubles(&f64, f, "torch.losses_f64", &n64) != CT_OK ||
      train_host_doubles(&f1t, f, "torch.losses_1t", &n1t) != CT_OK)
    return train_fail(PROG, "reading PyTorch's losses");
  if (n32 < o.check_steps || n64 < o.check_steps || n1t < o.check_steps) {
    fprintf(stderr, PROG ": the fixture has %" PRId64 ", %" PRId64 " and %" PRId64 " losses for check_steps %" PRId64 "\n",
            n32, n64, n1t, o.check_steps);
    return 1;
  }
  o.losses = losses;
  /* The limit of each step: 1e-4, or LOSS_SPREAD_FACTOR times the largest relative difference
   * between PyTorch's own runs so far (f32 and f64; f32 on 2 threads and on 1), whichever is
   * larger. */
  double *tol = calloc((size_t)o.check_steps, sizeof *tol);
  if (!tol) return train_fail(PROG, "out of host memory");
  double spread = 0;
  for (int64_t s = 0; s < o.check_steps; s++) {
    spread = fmax(spread, fabs(losses[s] - f64[s]) / f64[s]);
    spread = fmax(spread, fabs(losses[s] - f1t[s]) / fabs(losses[s]));
    tol[s] = fmax(LOSS_RTOL, LOSS_SPREAD_FACTOR * spread);
  }
  free(f64);
  free(f1t);
  o.tol = tol;
  if (rcheck > 0) {
    int rc = resume_check(d, f, rcheck, save_path ? save_path : "train_digits.ckpt", &o);
    ct_safetensors_free(f);
    free(losses);
    free(tol);
    return rc;
  }

  trainer t;
  if (trainer_init(&t, d, f) != CT_OK) return train_fail(PROG, "setting up");
  t.fix = f;
  if (resume_path) {
    if (resume(&t, resume_path) != CT_OK) return train_fail(PROG, "resuming");
    printf(PROG ": resumed at step %" PRId64 " from %s\n", t.step, resume_path);
  }
  const bool full = steps < 0 && epochs < 0 && !check;
  int64_t until;
  if (steps >= 0) until = t.step + steps;
  else if (epochs >= 0) until = t.step + epochs * t.steps_per_epoch;
  else if (check) until = o.check_steps;
  else until = t.epochs * t.steps_per_epoch;
  if (check && until > o.check_steps) until = o.check_steps;
  printf(PROG ": %" PRId64 " training images, batch %" PRId64 ", %" PRId64 " steps per epoch; steps %" PRId64
              " to %" PRId64 "\n", t.n, t.batch, t.steps_per_epoch, t.step, until);
  ct_memory_reset_peak(d);
  int bad = run(&t, until, &o);
  if (bad < 0) return 1;
  printf(PROG ": peak device memory held by tensors: %.2f MiB\n", train_peak_mib(d));
  if (check) printf(PROG ": %d mismatches with PyTorch's losses and step 0's gradients\n", bad);
  if (save_path) {
    if (save(&t, save_path) != CT_OK) return train_fail(PROG, "saving the checkpoint");
    printf(PROG ": checkpoint at step %" PRId64 " saved to %s\n", t.step, save_path);
  }
  int rc = bad ? 1 : 0;
  if (full) {
    double acc = 0;
    if (test_accuracy(&t, &acc) != CT_OK) return train_fail(PROG, "test accuracy");
    const char *ta = ct_safetensors_metadata_get(f, "torch_test_accuracy");
    printf(PROG ": final test accuracy %.2f%% (PyTorch's run: %.2f%%)\n", 100 * acc, ta ? 100 * atof(ta) : NAN);
    if (acc < MIN_ACCURACY) rc = 1;
  }
  trainer_free(&t);
  ct_safetensors_free(f);
  free(losses);
  free(tol);
  ct_shutdown(); /* prints the CLTENSOR_PROFILE table */
  return rc;
}
