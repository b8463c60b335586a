/* The "models" group: the forwards of the two example models (examples/digits_cnn_model.c,
 * examples/charlm_model.c) on their committed fixtures, as the examples run them: the digits
 * CNN on the whole 450-image test split in one batch, the character GPT on its fixed batch of
 * token ids. Times per forward, until the result is on the host (the predicted classes, the
 * logits), since that is what a user waits for. PyTorch's times for the same forwards come
 * from tools/bench/torch_models.py, which runs this group in the same sitting and prints the
 * ratios (docs/PERFORMANCE.md). The fixtures are read from $CLTENSOR_BENCH_MODELS (a folder)
 * or the source tree's examples/data; without them the figures are skipped. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "charlm_model.h"
#include "digits_cnn_model.h"

typedef struct models_ctx {
  ct_device *d;
  digits_cnn cnn;
  charlm gpt;
  ct_tensor *x;     /* the input: images or token ids */
  void *host;       /* where the result goes */
  size_t host_bytes;
} models_ctx;

static int do_cnn(void *p) {
  models_ctx *c = p;
  ct_tensor *logits = NULL, *pred = NULL;
  ct_status st = digits_cnn_forward(&logits, &c->cnn, c->x);
  if (st == CT_OK) st = ct_argmax(&pred, logits, 1, false);
  if (st == CT_OK) st = ct_to_host(pred, c->host, c->host_bytes);
  ct_release(pred);
  ct_release(logits);
  return st == CT_OK ? 0 : bench_ct_fail("the digits CNN forward", st);
}

static int do_gpt(void *p) {
  models_ctx *c = p;
  ct_tensor *logits = NULL;
  ct_status st = charlm_forward(&logits, &c->gpt, c->x);
  if (st == CT_OK) st = ct_to_host(logits, c->host, c->host_bytes);
  ct_release(logits);
  return st == CT_OK ? 0 : bench_ct_fail("the character GPT forward", st);
}

/* Loads dir/name onto d; NULL (with the figure marked skipped) when the file is not there. */
static ct_safetensors *load_fixture(bench_fig *f, ct_device *d, const char *name) {
  const char *dir = getenv("CLTENSOR_BENCH_MODELS");
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : CT_BENCH_MODELS_DIR, name);
  ct_safetensors *st = NULL;
  if (ct_safetensors_load(&st, path, d) != CT_OK) {
    char msg[sizeof f->error];
    snprintf(msg, sizeof msg, "no fixture (set $CLTENSOR_BENCH_MODELS to examples/data): %s", ct_last_error());
    bench_fig_fail(f, true, msg);
    return NULL;
  }
  return st;
}

/* Measures fn once the setup (st, the result buffer) succeeded, else records why not. */
static void measure_model(const bench_opts *o, bench_fig *f, ct_status st, bench_fn fn, models_ctx *c) {
  if (st != CT_OK || !c->host)
    bench_fig_fail(f, false, st != CT_OK ? ct_last_error() : "out of host memory");
  else if (bench_measure(o, f, fn, NULL, c, 1000, 1e3) == 0)
    bench_gemm_note(c->d, f->note, sizeof f->note); /* the convolutions and linears go through it */
}

static void bench_cnn(const bench_opts *o, ct_device *d) {
  bench_fig f;
  bench_fig_init(&f, "digits_cnn_forward", 450, "450x1x8x8, 3 conv", "f32", "ms");
  models_ctx c = {.d = d};
  bench_progress(o, "digits CNN forward");
  ct_safetensors *file = load_fixture(&f, d, "digits_cnn.safetensors");
  if (file) {
    ct_status st = digits_cnn_load(&c.cnn, file);
    if (st == CT_OK) st = ct_safetensors_get(&c.x, file, "test.x");
    if (st == CT_OK) {
      c.host_bytes = (size_t)ct_tensor_shape(c.x)[0] * sizeof(int64_t);
      c.host = malloc(c.host_bytes);
    }
    measure_model(o, &f, st, do_cnn, &c);
  }
  bench_emit(o, &f);
  digits_cnn_release(&c.cnn);
  ct_release(c.x);
  ct_safetensors_free(file);
  free(c.host);
}

static void bench_gpt(const bench_opts *o, ct_device *d) {
  bench_fig f;
  bench_fig_init(&f, "charlm_forward", 6 * 64, "6x64 tokens, 2 layers, C 64", "f32", "ms");
  models_ctx c = {.d = d};
  bench_progress(o, "character GPT forward");
  ct_safetensors *file = load_fixture(&f, d, "charlm.safetensors");
  if (file) {
    ct_status st = charlm_load(&c.gpt, file);
    if (st == CT_OK) st = ct_safetensors_get(&c.x, file, "batch.ids");
    if (st == CT_OK) {
      const int64_t *s = ct_tensor_shape(c.x);
      snprintf(f.shape, sizeof f.shape, "%lldx%lld tokens, %d layers, C %lld", (long long)s[0], (long long)s[1],
               c.gpt.layers, (long long)c.gpt.d_model);
      f.size = s[0] * s[1];
      c.host_bytes = (size_t)(s[0] * s[1] * c.gpt.vocab) * sizeof(float);
      c.host = malloc(c.host_bytes);
    }
    measure_model(o, &f, st, do_gpt, &c);
  }
  bench_emit(o, &f);
  charlm_release(&c.gpt);
  ct_release(c.x);
  ct_safetensors_free(file);
  free(c.host);
}

void bench_group_models(const bench_opts *o, ct_device *d) {
  bench_cnn(o, d);
  bench_gpt(o, d);
  ct_empty_cache(d);
}
