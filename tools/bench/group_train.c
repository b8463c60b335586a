/* The "train" group: one training step of each example model, as examples/train_digits.c and
 * examples/train_charlm.c run them on their committed fixtures (train_digits.safetensors,
 * train_charlm.safetensors): forward in training mode, cross entropy, zero_grad, backward, the
 * optimizer's step (Adam for the digits CNN on a batch of 64 images; AdamW for the character
 * GPT on 32 windows of 64 tokens), until the loss is on the host. The step changes the weights
 * each time, as training does; the work per step does not change. When $CLTENSOR_BENCH_PYTHON
 * names a Python with PyTorch, tools/bench/torch_train.py times PyTorch's same step (CPU) right
 * before and right after ours, with PyTorch's default threads ("torch_train") and one thread
 * ("torch_train_1t"). `torch_train.py --bench` runs this group and prints the ratios.
 * digits_first_step.cold/.warm: the first step of a new process (child mode first-train-step)
 * with empty kernel caches, then with the caches it filled (issue #30). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "charlm_model.h"
#include "digits_cnn_model.h"

typedef struct train_ctx {
  ct_device *d;
  digits_cnn cnn;
  charlm gpt;
  ct_optimizer *opt;
  ct_tensor *x, *y; /* the batch: images or token ids, and the targets */
  int64_t vocab;    /* the GPT's vocabulary; 0 for the digits CNN */
} train_ctx;

static int do_step(void *p) {
  train_ctx *c = p;
  ct_tensor *loss = NULL;
  float host = 0;
  ct_status st = c->vocab ? charlm_loss(&loss, &c->gpt, c->x, c->y) : digits_cnn_loss(&loss, &c->cnn, c->x, c->y);
  if (st == CT_OK) st = ct_optimizer_zero_grad(c->opt);
  if (st == CT_OK) st = ct_backward(loss, NULL);
  if (st == CT_OK) st = ct_optimizer_step(c->opt);
  if (st == CT_OK) st = ct_to_host(loss, &host, sizeof host);
  ct_release(loss);
  return st == CT_OK ? 0 : bench_ct_fail(c->vocab ? "the character GPT training step" : "the digits CNN training step", st);
}

/* Marks params[0..n) as requiring grad and makes the optimizer. */
static ct_status make_opt(train_ctx *c, ct_tensor **params, int n, double lr, double wd, bool decoupled) {
  ct_status st = CT_OK;
  for (int i = 0; i < n && st == CT_OK; i++) st = ct_set_requires_grad(params[i], true);
  if (st == CT_OK) st = ct_adam_new(&c->opt, params, n, lr, 0.9, 0.999, 1e-8, wd, decoupled);
  return st;
}

/* Times the step and, when it can, PyTorch's (default threads and one thread) around it; the
 * peak device memory of a step goes in the note. */
static void measure_step(const bench_opts *o, bench_fig *f, ct_status st, train_ctx *c) {
  if (st != CT_OK) {
    bench_fig_fail(f, false, ct_last_error());
    return;
  }
  const double before = bench_torch_ms(CT_BENCH_TORCH_TRAIN, "torch_train", f->name, NULL);
  const double before1 = before > 0 ? bench_torch_ms(CT_BENCH_TORCH_TRAIN, "torch_train", f->name, "--threads 1") : -1;
  ct_memory_reset_peak(c->d);
  if (bench_measure(o, f, do_step, NULL, c, 1000, 1e3) != 0) return;
  ct_memory_stats ms = {.size = sizeof ms};
  if (ct_device_get_memory_stats(&ms, c->d) == CT_OK)
    snprintf(f->note, sizeof f->note, "peak %.2f MiB", (double)ms.peak_allocated_bytes / (1024.0 * 1024.0));
  const double after = before > 0 ? bench_torch_ms(CT_BENCH_TORCH_TRAIN, "torch_train", f->name, NULL) : -1;
  const double after1 = before1 > 0 ? bench_torch_ms(CT_BENCH_TORCH_TRAIN, "torch_train", f->name, "--threads 1") : -1;
  bench_add_torch_ref(f, "torch_train", before, after);
  bench_add_torch_ref(f, "torch_train_1t", before1, after1);
}

/* The digits CNN at PyTorch's initial weights, Adam, and the first batch of the first epoch (the
 * example's step 0) in c->x, c->y. */
static ct_status cnn_setup(train_ctx *c, const ct_safetensors *file) {
  ct_tensor *params[DIGITS_NPARAMS];
  ct_status st = digits_cnn_load(&c->cnn, file);
  c->cnn.training = true;
  for (int i = 0; i < DIGITS_NPARAMS && st == CT_OK; i++) params[i] = c->cnn.w[digits_cnn_param_index[i]];
  if (st == CT_OK) st = make_opt(c, params, DIGITS_NPARAMS, 3e-3, 0.0, false);
  if (st == CT_OK) st = digits_fixture_batch(&c->x, &c->y, file, 0, 64);
  ct_manual_seed(0);
  return st;
}

static void cnn_free(train_ctx *c) {
  ct_optimizer_free(c->opt);
  digits_cnn_release(&c->cnn);
  ct_release(c->x);
  ct_release(c->y);
}

static void bench_cnn(const bench_opts *o, ct_device *d) {
  bench_fig f;
  bench_fig_init(&f, "digits_cnn_train_step", 64, "64x1x8x8, Adam", "f32", "ms");
  train_ctx c = {.d = d};
  bench_progress(o, "digits CNN training step");
  ct_safetensors *file = bench_load_fixture(&f, d, "train_digits.safetensors");
  if (file) measure_step(o, &f, cnn_setup(&c, file), &c);
  bench_emit(o, &f);
  cnn_free(&c);
  ct_safetensors_free(file);
}

/* Child mode "first-train-step": a new process's first digits CNN training step, from loading the
 * fixture to the loss on the host, kernel builds included; ready once the loss is there. */
int bench_child_first_train_step(const bench_opts *o) {
  bench_fig f;
  bench_fig_init(&f, "digits_first_step", 64, "", "f32", "ms");
  train_ctx c = {0};
  ct_safetensors *file = NULL;
  ct_status st = ct_device_find(&c.d, o->device_spec);
  if (st == CT_OK) file = bench_load_fixture(&f, c.d, "train_digits.safetensors");
  if (st == CT_OK && file) st = cnn_setup(&c, file);
  const int rc = st == CT_OK && file ? do_step(&c) : 1;
  if (rc == 0) {
    bench_child_ready(o);
  } else {
    if (!f.error[0]) bench_fig_fail(&f, false, st != CT_OK ? ct_last_error() : bench_error());
    bench_emit(o, &f);
  }
  cnn_free(&c);
  ct_safetensors_free(file);
  ct_shutdown();
  return rc;
}

/* The first training step of a new process (issue #30): "digits_first_step.cold" with both kernel
 * caches empty (the library's and PoCL's), then ".warm" twice (once with --quick) with the
 * caches that run filled; in rounds, so that cold and warm see the same moments of the machine. */
static void bench_first_step(const bench_opts *o) {
  bench_samples s[2] = {{.n = 0}, {.n = 0}};
  char err[320] = "", *root = bench_mkdtemp();
  const int rounds = o->quick ? 1 : 2;
  if (!root) snprintf(err, sizeof err, "%s", bench_error());
  for (int r = 0; r < rounds && !err[0]; r++) {
    char run[1024], ct_dir[1100], drv_dir[1100];
    snprintf(run, sizeof run, "%s/round%d", root, r);
    snprintf(ct_dir, sizeof ct_dir, "%s/ct", run);
    snprintf(drv_dir, sizeof drv_dir, "%s/driver", run);
    bench_progress(o, "first digits training step of a new process, round %d/%d", r + 1, rounds);
    for (int k = 0; k < (o->quick ? 2 : 3) && !err[0]; k++) { /* cold, then one or two warm */
      bench_samples *into = &s[k ? 1 : 0];
      if (bench_make_dir(run) || bench_make_dir(ct_dir) || bench_make_dir(drv_dir) ||
          bench_first_result_once(o, "first-train-step", NULL, ct_dir, drv_dir, &into->s[into->n]) != 0)
        snprintf(err, sizeof err, "%s", bench_error());
      else
        into->n++;
    }
  }
  static const char *const names[2] = {"digits_first_step.cold", "digits_first_step.warm"};
  for (int i = 0; i < 2; i++) {
    bench_fig f;
    bench_fig_init(&f, names[i], 64, "new process, 64x1x8x8, Adam", "f32", "ms");
    if (err[0]) bench_fig_fail(&f, false, err);
    else bench_fig_set(&f, &s[i], 1e3);
    bench_emit(o, &f);
  }
  if (root) bench_rmtree(root);
  free(root);
}

static void bench_gpt(const bench_opts *o, ct_device *d) {
  bench_fig f;
  bench_fig_init(&f, "charlm_train_step", 32 * 64, "32x64 tokens, 2 blocks, AdamW", "f32", "ms");
  train_ctx c = {.d = d};
  bench_progress(o, "character GPT training step");
  ct_safetensors *file = bench_load_fixture(&f, d, "train_charlm.safetensors");
  if (file) {
    ct_tensor *text = NULL, *starts = NULL, *row = NULL, *params[CHARLM_MAX_PARAMS];
    ct_status st = charlm_load(&c.gpt, file);
    const int np = st == CT_OK ? charlm_params(&c.gpt, params, NULL) : 0;
    const char *lr = ct_safetensors_metadata_get(file, "lr"), *wd = ct_safetensors_metadata_get(file, "weight_decay");
    if (st == CT_OK) st = make_opt(&c, params, np, lr ? atof(lr) : 1e-3, wd ? atof(wd) : 0.01, true);
    if (st == CT_OK) st = ct_safetensors_get(&text, file, "text");
    if (st == CT_OK) st = ct_safetensors_get(&starts, file, "starts");
    /* Step 0's batch: windows text[s:s+T] and the next characters. */
    const int64_t b = 32, t = c.gpt.context;
    uint8_t *tx = st == CT_OK ? malloc(ct_tensor_nbytes(text)) : NULL;
    int16_t s0[32];
    int64_t *ids = malloc((size_t)(b * t) * sizeof *ids), *tgt = malloc((size_t)(b * t) * sizeof *tgt);
    if (st == CT_OK && (!tx || !ids || !tgt)) st = CT_ERR_OUT_OF_MEMORY;
    if (st == CT_OK) st = ct_to_host(text, tx, ct_tensor_nbytes(text));
    if (st == CT_OK && ct_tensor_shape(starts)[1] != b) st = CT_ERR_FORMAT;
    if (st == CT_OK) st = ct_slice(&row, starts, 0, 0, 1, 1); /* starts is [steps, 32] */
    if (st == CT_OK) st = ct_to_host(row, s0, sizeof s0);
    for (int64_t i = 0; st == CT_OK && i < b; i++)
      for (int64_t j = 0; j < t; j++) {
        ids[i * t + j] = tx[s0[i] + j];
        tgt[i * t + j] = tx[s0[i] + j + 1];
      }
    if (st == CT_OK) st = ct_from_host(&c.x, d, CT_I64, 2, (int64_t[]){b, t}, ids);
    if (st == CT_OK) st = ct_from_host(&c.y, d, CT_I64, 1, (int64_t[]){b * t}, tgt);
    c.vocab = c.gpt.vocab;
    measure_step(o, &f, st, &c);
    free(tx);
    free(ids);
    free(tgt);
    ct_release(row);
    ct_release(text);
    ct_release(starts);
  }
  bench_emit(o, &f);
  ct_optimizer_free(c.opt);
  charlm_release(&c.gpt);
  ct_release(c.x);
  ct_release(c.y);
  ct_safetensors_free(file);
}

void bench_group_train(const bench_opts *o, ct_device *d) {
  bench_cnn(o, d);
  bench_first_step(o);
  bench_gpt(o, d);
  ct_empty_cache(d);
}
