/* Trains the digits CNN of make_digits_cnn.py, built from modules, from PyTorch's initial weights
 * with Adam, and checks that the losses are PyTorch's (fixture: train_digits.py; options: main()).
 * As the script: batches of 64 in the stored order, cross entropy, Adam (lr 3e-3), dropout masks
 * from ct_manual_seed(seed) (the script feeds PyTorch the same masks); a line per epoch. No
 * option: the fixture's 20 epochs, failing below 97% test accuracy. --check: the first
 * check_steps losses within the fixture's limits (torch.tol, train_digits.py) and step 0's
 * gradients within 1e-3 of each tensor's largest. --save/--resume: a checkpoint (module.h).
 * --resume-check N: N steps saving at N / 2, a fresh model resumed from there; steps N / 2 .. N
 * and the final checkpoints must be bit-identical. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cltensor/cltensor.h"

#define PROG "train_digits"
#define FAIL(what) (fprintf(stderr, PROG ": %s: %s\n", what, ct_last_error()), 1)

typedef struct trainer {
  ct_module *model;
  ct_optimizer *opt;
  ct_tensor *x, *y, *tx, *ty, *order; /* images in [0, 1], labels; order [epochs, n] (i16) */
  int64_t n, epochs, batch, per_epoch, step;
} trainer;

static const ct_safetensors *g_fix; /* the fixture */
static bool g_check, g_quiet;
static int64_t g_check_steps;
static float *g_losses, *g_tol;     /* PyTorch's losses, the relative limit of each (train_digits.py) */

static const char *meta(const ct_safetensors *f, const char *key) {
  const char *v = ct_safetensors_metadata_get(f, key);
  if (!v) fprintf(stderr, PROG ": no metadata \"%s\"\n", key);
  return v ? v : "0";
}

/* make_digits_cnn.py's DigitsCNN as nn.Sequential(OrderedDict(...)): its children in forward order
 * under the script's names (3x3 convs with padding 1, 1->16->32->64 channels, fc 64->10), so the
 * state_dict is the script's. */
static ct_status build(ct_module **out, ct_device *d, double eps) {
  static const int k3[2] = {3, 3}, pad1[2] = {1, 1}, two[2] = {2, 2};
  static const int64_t one[2] = {1, 1};
  static const char *const names[14] = {"conv1", "bn1", "relu1", "conv2", "bn2", "relu2", "pool",
                                        "drop",  "conv3", "bn3", "relu3", "gap", "flat",  "fc"};
  ct_module *c[14] = {0};
  ct_status st = ct_module_sequential(out, NULL, 0);
  for (int i = 0, j = 0; i < 3 && st == CT_OK; i++, j = i == 1 ? 3 : 8) { /* conv, bn, relu at j */
    st = ct_module_conv2d(&c[j], d, i ? 8 << i : 1, 16 << i, k3, NULL, pad1, NULL, 1, true);
    if (st == CT_OK) st = ct_module_batch_norm2d(&c[j + 1], d, 16 << i, eps, 0.1, true, true);
    if (st == CT_OK) st = ct_module_relu(&c[j + 2]);
  }
  if (st == CT_OK) st = ct_module_max_pool2d(&c[6], two, NULL, NULL);
  if (st == CT_OK) st = ct_module_dropout(&c[7], 0.25);
  if (st == CT_OK) st = ct_module_adaptive_avg_pool2d(&c[11], one);
  if (st == CT_OK) st = ct_module_flatten(&c[12], 1, -1);
  if (st == CT_OK) st = ct_module_linear(&c[13], d, 64, 10, true);
  for (int i = 0; i < 14; i++) {
    if (st == CT_OK) st = ct_module_add_child(*out, names[i], c[i]); /* appends, as add_module */
    ct_module_release(c[i]);
  }
  return st;
}

/* A fresh model with PyTorch's initial state_dict (not strict: the fixture holds the data too,
 * and no num_batches_tracked), Adam with PyTorch's defaults, the data, the generator seeded. */
static ct_status trainer_init(trainer *t, ct_device *d) {
  const ct_safetensors *f = g_fix;
  *t = (trainer){.batch = atoll(meta(f, "batch")), .epochs = atoll(meta(f, "epochs"))};
  if (t->batch < 1 || t->epochs < 1)
    return fprintf(stderr, PROG ": batch %" PRId64 ", epochs %" PRId64 " in the fixture\n", t->batch, t->epochs),
           CT_ERR_FORMAT;
  ct_tensor *params[16], *u8 = NULL, *tu8 = NULL;
  int np = 0;
  ct_status st = build(&t->model, d, atof(meta(f, "bn_eps")));
  if (st == CT_OK) st = ct_module_load_state_dict_from(t->model, f, false);
  if (st == CT_OK) st = ct_module_parameters(params, 16, &np, t->model);
  if (st == CT_OK) st = ct_adam_new(&t->opt, params, np, atof(meta(f, "lr")), 0.9, 0.999, 1e-8, 0.0, false);
  ct_scope_begin(); /* after a failure each call returns at once: one check at the end */
  ct_safetensors_get(&u8, f, "train.x");
  ct_safetensors_get(&tu8, f, "test.x");
  ct_mul_scalar(&t->x, ct_cast(&u8, u8, CT_F32) ? NULL : u8, 1.0 / 16.0); /* pixels 0..16: exact */
  ct_mul_scalar(&t->tx, ct_cast(&tu8, tu8, CT_F32) ? NULL : tu8, 1.0 / 16.0);
  ct_safetensors_get(&t->y, f, "train.y");
  ct_safetensors_get(&t->ty, f, "test.y");
  ct_safetensors_get(&t->order, f, "order");
  ct_keep(t->x), ct_keep(t->tx), ct_keep(t->y), ct_keep(t->ty), ct_keep(t->order);
  const ct_status data = ct_scope_end();
  t->n = ct_tensor_shape(t->y) ? ct_tensor_shape(t->y)[0] : 0;
  t->per_epoch = (t->n + t->batch - 1) / t->batch;
  ct_manual_seed(strtoull(meta(f, "seed"), NULL, 10)); /* after the modules' initialization */
  return st == CT_OK ? data : st;
}

static void trainer_free(trainer *t) {
  ct_optimizer_free(t->opt), ct_module_release(t->model);
  ct_release(t->x), ct_release(t->y), ct_release(t->tx), ct_release(t->ty), ct_release(t->order);
}

/* One step on batch t->step of the stored order: *loss, *count examples. */
static ct_status train_step(trainer *t, double *loss, int64_t *count) {
  const int64_t e = t->step / t->per_epoch % t->epochs, lo = t->step % t->per_epoch * t->batch;
  ct_tensor *idx = NULL, *xb = NULL, *yb = NULL, *logits = NULL, *l = NULL;
  *count = lo + t->batch < t->n ? t->batch : t->n - lo;
  ct_scope_begin();
  ct_slice(&idx, t->order, 0, e, e + 1, 1);
  ct_slice(&idx, idx, 1, lo, lo + *count, 1);
  ct_cast(&idx, idx, CT_I64);
  ct_reshape(&idx, idx, 1, count);
  ct_index_select(&xb, t->x, 0, idx);
  ct_index_select(&yb, t->y, 0, idx);
  ct_module_forward(&logits, t->model, xb);
  ct_cross_entropy(&l, logits, yb, -100, 0.0, CT_REDUCTION_MEAN);
  ct_optimizer_zero_grad(t->opt);
  ct_backward(l, NULL);
  ct_optimizer_step(t->opt);
  ct_item(loss, l);
  ct_status st = ct_scope_end();
  t->step += st == CT_OK;
  return st;
}

/* Test accuracy in eval mode (running statistics, no dropout), without recording. */
static ct_status test_accuracy(trainer *t, double *acc) {
  const bool grad = ct_set_grad_enabled(false);
  ct_tensor *logits = NULL, *pred = NULL, *eq = NULL, *sum = NULL;
  ct_scope_begin();
  ct_module_eval(t->model);
  ct_module_forward(&logits, t->model, t->tx);
  ct_argmax(&pred, logits, 1, false);
  ct_eq(&eq, pred, t->ty);
  ct_sum(&sum, eq, 0, NULL, false);
  ct_item(acc, sum);
  ct_module_train(t->model, true);
  *acc /= t->ty ? (double)ct_tensor_shape(t->ty)[0] : 1.0;
  ct_set_grad_enabled(grad);
  return ct_scope_end();
}

/* Step 0's gradients against PyTorch's, relative to each tensor's largest (floor 1e-3: the conv
 * biases before a batch norm have zero gradients, rounding noise on both sides). */
static int check_grads(trainer *t) {
  const char *names[16];
  ct_tensor *params[16];
  int np = 0, bad = 0;
  ct_module_named_parameters(names, params, 16, &np, t->model);
  for (int i = 0; i < np; i++) {
    char key[96];
    ct_tensor *g = NULL, *m[2] = {NULL, NULL}; /* the largest |difference|, |PyTorch's| */
    double v[2] = {NAN, NAN};
    snprintf(key, sizeof key, "torch.grad0.%s", names[i]);
    ct_scope_begin();
    ct_grad(&g, params[i]);
    ct_safetensors_get(&m[1], g_fix, key);
    ct_sub(&m[0], g, m[1]);
    for (int k = 0; k < 2; k++) ct_abs(&m[k], m[k]), ct_max(&m[k], m[k], 0, NULL, false), ct_item(&v[k], m[k]);
    const bool ok = ct_scope_end() == CT_OK && v[0] <= 1e-3 * fmax(v[1], 1e-3);
    if (!g_quiet || !ok)
      printf(PROG ": step 0 gradient of %-14s max |difference| %.2e, max |PyTorch| %.2e%s\n", names[i], v[0], v[1],
             ok ? "" : "  MISMATCH");
    bad += !ok;
  }
  return bad;
}

/* Trains until t->step == until, a line per epoch; record (if not NULL) gets each step's loss.
 * Returns the number of mismatches with PyTorch (--check), -1 on an error. */
static int run(trainer *t, int64_t until, double *record) {
  int bad = 0;
  double ep_loss = 0, ep_s = 0, acc = 0, loss = 0;
  int64_t ep_count = 0, count = 0;
  struct timespec t0, t1;
  while (t->step < until) {
    const int64_t s = t->step;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (train_step(t, &loss, &count) != CT_OK) return -FAIL("training step");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ep_s += (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (g_check && s == 0) bad += check_grads(t);
    if (record) record[s] = loss;
    const double rel = s < g_check_steps ? fabs(loss - g_losses[s]) / g_losses[s] : 0;
    if (g_check && s < g_check_steps && (!g_quiet || !(rel <= g_tol[s])))
      printf(PROG ": step %3" PRId64 ": loss %.7f, PyTorch %.7f, relative difference %.2e (limit %.0e)%s\n", s, loss,
             g_losses[s], rel, g_tol[s], rel <= g_tol[s] ? "" : "  MISMATCH");
    bad += g_check && !(rel <= (s < g_check_steps ? g_tol[s] : 0));
    ep_loss += loss * (double)count;
    ep_count += count;
    if (t->step % t->per_epoch && t->step != until) continue;
    if (test_accuracy(t, &acc) != CT_OK) return -FAIL("test accuracy");
    printf("epoch %" PRId64 "%s (step %" PRId64 "): loss %.4f, test accuracy %.2f%%, %.0f examples/s\n",
           (t->step - 1) / t->per_epoch + 1, t->step % t->per_epoch ? " (partial)" : "", t->step,
           ep_loss / (double)ep_count, 100 * acc, (double)ep_count / ep_s);
    fflush(stdout);
    ep_loss = ep_s = 0;
    ep_count = 0;
  }
  return bad;
}

/* Whether two files have the same bytes. */
static bool same_file(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  int ca = 0, cb = 0;
  while (fa && fb && (ca = getc(fa)) == (cb = getc(fb)) && ca != EOF) continue;
  const bool same = fa && fb && ca == EOF && cb == EOF;
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

static int resume_check(ct_device *d, int64_t n, const char *path) {
  trainer a, b;
  char end_a[1024], end_b[1024];
  double *la = calloc((size_t)n, sizeof *la), *lb = calloc((size_t)n, sizeof *lb);
  snprintf(end_a, sizeof end_a, "%s.end", path);
  snprintf(end_b, sizeof end_b, "%s.resumed", path);
  if (!la || !lb || trainer_init(&a, d) != CT_OK || run(&a, n / 2, la) < 0 ||
      ct_checkpoint_save(a.model, a.opt, NULL, a.step, path) != CT_OK || run(&a, n, la) < 0 ||
      trainer_init(&b, d) != CT_OK || ct_checkpoint_load(&b.step, b.model, b.opt, NULL, path) != CT_OK)
    return FAIL("resume check");
  printf(PROG ": resumed at step %" PRId64 " from %s\n", b.step, path);
  if (run(&b, n, lb) < 0 || ct_checkpoint_save(a.model, a.opt, NULL, a.step, end_a) != CT_OK ||
      ct_checkpoint_save(b.model, b.opt, NULL, b.step, end_b) != CT_OK)
    return FAIL("resume check");
  int bad = !same_file(end_a, end_b); /* every weight, running statistic, Adam state, the generator */
  if (bad) printf(PROG ": the checkpoints after step %" PRId64 " differ (%s, %s)\n", n, end_a, end_b);
  for (int64_t s = n / 2; s < n; s++)
    if (memcmp(&la[s], &lb[s], sizeof la[s]) && ++bad)
      printf(PROG ": step %" PRId64 ": loss %.9g uninterrupted, %.9g resumed\n", s, la[s], lb[s]);
  printf(PROG ": resume check over steps %" PRId64 "..%" PRId64 ": %s\n", n / 2, n, bad ? "FAILED" : "identical");
  trainer_free(&a), trainer_free(&b), free(la), free(lb);
  return bad ? 1 : 0;
}

/* The fixture's f32 tensor name [n] on the host. */
static float *host_floats(const char *name, int64_t n) {
  ct_tensor *t = NULL;
  float *h = malloc((size_t)n * sizeof *h + 1);
  if (ct_safetensors_get(&t, g_fix, name) != CT_OK || ct_numel(t) != n || ct_to_host(t, h, (size_t)n * sizeof *h))
    free(h), h = NULL;
  ct_release(t);
  return h;
}

int main(int argc, char **argv) {
  const char *path = "examples/data/train_digits.safetensors", *spec = NULL, *save_path = NULL, *resume_path = NULL;
  int64_t epochs = -1, steps = -1, rcheck = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--check")) g_check = true;
    else if (!strcmp(a, "--quiet")) g_quiet = true;
    else if (a[0] != '-') path = a;
    else if (v && !strcmp(a, "--device")) spec = argv[++i];
    else if (v && !strcmp(a, "--epochs")) epochs = atoll(argv[++i]);
    else if (v && !strcmp(a, "--steps")) steps = atoll(argv[++i]);
    else if (v && !strcmp(a, "--save")) save_path = argv[++i];
    else if (v && !strcmp(a, "--resume")) resume_path = argv[++i];
    else if (v && !strcmp(a, "--resume-check")) rcheck = atoll(argv[++i]);
    else return fprintf(stderr, "usage: " PROG " [FIXTURE] [--device SPEC] [--epochs N | --steps N] [--check]"
                                " [--save PATH] [--resume PATH] [--resume-check N] [--quiet]\n"), 2;
  }
  ct_device *d;
  ct_safetensors *f = NULL;
  if ((spec ? ct_device_find(&d, spec) : ct_device_default(&d)) != CT_OK) return FAIL("choosing a device");
  printf("device: %s (%s)\n", ct_device_spec(d), ct_device_properties(d)->name);
  /* PyTorch's f64 losses as f32 on a device without cl_khr_fp64 */
  if (ct_safetensors_load_as(&f, path, d, CT_F64, ct_device_properties(d)->fp64 ? CT_F64 : CT_F32) != CT_OK)
    return FAIL("loading the fixture");
  g_fix = f;
  g_check_steps = atoll(meta(f, "check_steps"));
  g_losses = host_floats("torch.losses", g_check_steps);
  g_tol = host_floats("torch.tol", g_check_steps); /* 1e-4, or 4x PyTorch's own spread so far */
  if (!g_losses || !g_tol) return FAIL("reading PyTorch's losses");
  if (rcheck > 0) return resume_check(d, rcheck, save_path ? save_path : "train_digits.ckpt");
  trainer t;
  if (trainer_init(&t, d) != CT_OK) return FAIL("setting up");
  if (resume_path && ct_checkpoint_load(&t.step, t.model, t.opt, NULL, resume_path) != CT_OK) return FAIL("resuming");
  if (resume_path) printf(PROG ": resumed at step %" PRId64 " from %s\n", t.step, resume_path);
  const bool full = steps < 0 && epochs < 0 && !g_check;
  int64_t until = steps >= 0 ? t.step + steps : epochs >= 0 ? t.step + epochs * t.per_epoch
                  : g_check ? g_check_steps : t.epochs * t.per_epoch;
  if (g_check && until > g_check_steps) until = g_check_steps;
  printf(PROG ": %" PRId64 " training images, batch %" PRId64 ", %" PRId64 " steps per epoch; steps %" PRId64
              " to %" PRId64 "\n", t.n, t.batch, t.per_epoch, t.step, until);
  ct_memory_reset_peak(d);
  int bad = run(&t, until, NULL);
  ct_memory_stats ms = {.size = sizeof ms};
  if (bad >= 0 && ct_device_get_memory_stats(&ms, d) == CT_OK)
    printf(PROG ": peak device memory held by tensors: %.2f MiB\n", (double)ms.peak_allocated_bytes / 1048576.0);
  if (bad >= 0 && g_check) printf(PROG ": %d mismatches with PyTorch's losses and step 0's gradients\n", bad);
  if (bad >= 0 && save_path && ct_checkpoint_save(t.model, t.opt, NULL, t.step, save_path) != CT_OK)
    return FAIL("saving the checkpoint");
  if (bad >= 0 && save_path) printf(PROG ": checkpoint at step %" PRId64 " saved to %s\n", t.step, save_path);
  double acc = 0;
  if (bad >= 0 && full) {
    if (test_accuracy(&t, &acc) != CT_OK) return FAIL("test accuracy");
    printf(PROG ": final test accuracy %.2f%% (PyTorch's run: %.2f%%)\n", 100 * acc,
           100 * atof(meta(f, "torch_test_accuracy")));
    bad += acc < 0.97;
  }
  trainer_free(&t);
  ct_safetensors_free(f);
  free(g_losses), free(g_tol);
  ct_shutdown(); /* prints the CLTENSOR_PROFILE table */
  return bad ? 1 : 0;
}
