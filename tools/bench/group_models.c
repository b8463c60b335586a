/* The "models" group: the forwards of the two example models (examples/digits_cnn_model.c,
 * examples/charlm_model.c) on their committed fixtures, as the examples run them: the digits
 * CNN on the whole 450-image test split in one batch, the character GPT on its fixed batch of
 * token ids. Times per forward, until the result is on the host (the predicted classes, the
 * logits), since that is what a user waits for. When $CLTENSOR_BENCH_PYTHON names a Python
 * with PyTorch, tools/bench/torch_models.py times PyTorch's forward of the same fixture (CPU)
 * in a process of its own right before and right after ours: the reference "torch_forward"
 * (the two medians), as the nn group does with torch_conv.py. `torch_models.py --bench` runs
 * this group and prints the ratios as well (docs/PERFORMANCE.md). The fixtures are read from
 * $CLTENSOR_BENCH_MODELS (a folder) or the source tree's examples/data; without them the
 * figures are skipped. Both forwards run through modules, as the examples do, and have the
 * reference "handwritten_forward": the same forward written with the functional ops (the digits
 * CNN's on the module's own tensors, as digits_cnn_model.c was before it became modules; the
 * GPT's in charlm_forward on the same weights), timed in turns with the modules' (issue #30:
 * the modules' cost). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "charlm_model.h"
#include "digits_cnn_model.h"

typedef struct models_ctx {
  ct_device *d;
  digits_cnn cnn;
  charlm gpt;      /* the weights for charlm_forward (ops) */
  ct_module *gpt_m; /* the same weights in charlm_module */
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

/* DigitsCNN's eval forward without modules: the same ops, on the module's tensors. */
static ct_status cnn_ops_forward(ct_tensor **logits, const digits_cnn *m, const ct_tensor *x) {
  static const int one[2] = {1, 1}, pad[2] = {1, 1}, two[2] = {2, 2}, zero[2] = {0, 0};
  static const int64_t one_by_one[2] = {1, 1};
  ct_tensor *const *w = m->w;
  ct_tensor *cur = (ct_tensor *)x, *t = NULL;
  ct_scope_begin();
  for (int i = 0; i < 3; i++) {
    ct_tensor *const *l = w + 6 * i; /* conv weight, bias, bn mean, var, weight, bias */
    ct_conv2d(&t, cur, l[0], l[1], one, pad, one, 1);
    ct_batch_norm(&t, t, l[2], l[3], l[4], l[5], false, 0.1, m->eps);
    ct_relu(&cur, t);
    if (i == 1) ct_max_pool2d(&cur, cur, two, two, zero);
    if (i == 1) ct_dropout(&cur, cur, 0.25, false);
  }
  ct_adaptive_avg_pool2d(&t, cur, one_by_one);
  ct_view(&t, t, 2, (int64_t[]){ct_tensor_shape(x)[0], 64});
  ct_linear(logits, t, w[DIGITS_FC_W], w[DIGITS_FC_B]);
  return ct_scope_end_keep(logits);
}

static int do_cnn_ops(void *p) {
  models_ctx *c = p;
  ct_tensor *logits = NULL, *pred = NULL;
  ct_status st = cnn_ops_forward(&logits, &c->cnn, c->x);
  if (st == CT_OK) st = ct_argmax(&pred, logits, 1, false);
  if (st == CT_OK) st = ct_to_host(pred, c->host, c->host_bytes);
  ct_release(pred);
  ct_release(logits);
  return st == CT_OK ? 0 : bench_ct_fail("the digits CNN forward with ops", st);
}

static int do_gpt(void *p) {
  models_ctx *c = p;
  ct_tensor *logits = NULL;
  ct_status st = ct_module_forward(&logits, c->gpt_m, c->x);
  if (st == CT_OK) st = ct_to_host(logits, c->host, c->host_bytes);
  ct_release(logits);
  return st == CT_OK ? 0 : bench_ct_fail("the character GPT forward", st);
}

static int do_gpt_ops(void *p) {
  models_ctx *c = p;
  ct_tensor *logits = NULL;
  ct_status st = charlm_forward(&logits, &c->gpt, c->x);
  if (st == CT_OK) st = ct_to_host(logits, c->host, c->host_bytes);
  ct_release(logits);
  return st == CT_OK ? 0 : bench_ct_fail("the character GPT forward with ops", st);
}

const char *bench_models_dir(void) {
  const char *dir = getenv("CLTENSOR_BENCH_MODELS");
  return dir && *dir ? dir : CT_BENCH_MODELS_DIR;
}

double bench_torch_ms(const char *script, const char *tag, const char *name, const char *extra) {
  const char *py = getenv("CLTENSOR_BENCH_PYTHON");
  if (!py || !*py) return -1;
  char cmd[2048], line[512];
  snprintf(cmd, sizeof cmd, "'%s' '%s' --figure %s --data '%s' %s 2>&1", py, script, name, bench_models_dir(),
           extra ? extra : "");
  FILE *f = popen(cmd, "r");
  const size_t tlen = strlen(tag);
  double ms = -1;
  while (f && fgets(line, sizeof line, f)) {
    const char *m = strstr(line, "median_ms=");
    if (strncmp(line, tag, tlen) == 0 && line[tlen] == ' ' && m) ms = atof(m + 10);
  }
  if (!f || pclose(f) != 0 || ms <= 0) {
    fprintf(stderr, "cltensor-bench: %s --figure %s %s failed under %s\n", script, name, extra ? extra : "", py);
    return -1;
  }
  return ms;
}

static double torch_ms(const char *name) { return bench_torch_ms(CT_BENCH_TORCH_MODELS, "torch_model", name, NULL); }

ct_safetensors *bench_load_fixture(bench_fig *f, ct_device *d, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", bench_models_dir(), name);
  ct_safetensors *st = NULL;
  /* f64 entries (PyTorch's reference losses) as f32 on a device without cl_khr_fp64. */
  if (ct_safetensors_load_as(&st, path, d, CT_F64, ct_device_properties(d)->fp64 ? CT_F64 : CT_F32) != CT_OK) {
    char msg[sizeof f->error];
    snprintf(msg, sizeof msg, "no fixture (set $CLTENSOR_BENCH_MODELS to examples/data): %s", ct_last_error());
    bench_fig_fail(f, true, msg);
    return NULL;
  }
  return st;
}

void bench_add_torch_ref(bench_fig *f, const char *ref_name, double before_ms, double after_ms) {
  if (before_ms <= 0 || after_ms <= 0) return;
  bench_fig ref;
  bench_fig_init(&ref, ref_name, f->size, f->shape, "f32", "ms");
  bench_samples s = {.n = 2};
  s.s[0] = before_ms / 1e3;
  s.s[1] = after_ms / 1e3;
  bench_fig_set(&ref, &s, 1e3);
  bench_fig_add_ref(f, &ref);
}

/* Measures fn once the setup (st, the result buffer) succeeded, else records why not; PyTorch's
 * time right before and right after, as the reference, when it can be run; with ops_fn, also the
 * reference "handwritten_forward", timed in turns with fn. */
static void measure_model(const bench_opts *o, bench_fig *f, ct_status st, bench_fn fn, bench_fn ops_fn,
                          models_ctx *c) {
  if (st != CT_OK || !c->host) {
    bench_fig_fail(f, false, st != CT_OK ? ct_last_error() : "out of host memory");
    return;
  }
  const double before = torch_ms(f->name);
  bench_fig ops;
  bench_fig_init(&ops, "handwritten_forward", f->size, f->shape, "f32", "ms");
  bench_item items[2] = {{.fig = f, .fn = fn, .ctx = c, .max_reps = 1000, .work = 1e3},
                         {.fig = &ops, .fn = ops_fn, .ctx = c, .max_reps = 1000, .work = 1e3}};
  bench_measure_set(o, items, ops_fn ? 2 : 1);
  if (f->error[0]) return;
  if (ops_fn && !ops.error[0]) bench_fig_add_ref(f, &ops);
  bench_gemm_note(c->d, f->note, sizeof f->note); /* the convolutions and linears go through it */
  const double after = before > 0 ? torch_ms(f->name) : -1;
  bench_add_torch_ref(f, "torch_forward", before, after);
}

static void bench_cnn(const bench_opts *o, ct_device *d) {
  bench_fig f;
  bench_fig_init(&f, "digits_cnn_forward", 450, "450x1x8x8, 3 conv", "f32", "ms");
  models_ctx c = {.d = d};
  bench_progress(o, "digits CNN forward");
  ct_safetensors *file = bench_load_fixture(&f, d, "digits_cnn.safetensors");
  if (file) {
    ct_status st = digits_cnn_load(&c.cnn, file);
    if (st == CT_OK) st = ct_safetensors_get(&c.x, file, "test.x");
    if (st == CT_OK) {
      c.host_bytes = (size_t)ct_tensor_shape(c.x)[0] * sizeof(int64_t);
      c.host = malloc(c.host_bytes);
    }
    measure_model(o, &f, st, do_cnn, do_cnn_ops, &c);
  }
  bench_emit(o, &f);
  digits_cnn_release(&c.cnn);
  ct_release(c.x);
  ct_safetensors_free(file);
  free(c.host);
}

static void bench_gpt(const bench_opts *o, ct_device *d) {
  bench_fig f;
  bench_fig_init(&f, "charlm_forward", 6 * 64, "6x64 tokens, 2 blocks", "f32", "ms");
  models_ctx c = {.d = d};
  bench_progress(o, "character GPT forward");
  ct_safetensors *file = bench_load_fixture(&f, d, "charlm.safetensors");
  if (file) {
    charlm_config cfg;
    ct_status st = charlm_load(&c.gpt, file);
    if (st == CT_OK) st = charlm_module_load(&c.gpt_m, &cfg, d, file);
    if (st == CT_OK) st = ct_module_eval(c.gpt_m);
    if (st == CT_OK) st = ct_safetensors_get(&c.x, file, "batch.ids");
    if (st == CT_OK) {
      const int64_t *s = ct_tensor_shape(c.x);
      snprintf(f.shape, sizeof f.shape, "%lldx%lld tokens, %d blocks", (long long)s[0], (long long)s[1],
               c.gpt.layers);
      f.size = s[0] * s[1];
      c.host_bytes = (size_t)(s[0] * s[1] * c.gpt.vocab) * sizeof(float);
      c.host = malloc(c.host_bytes);
    }
    measure_model(o, &f, st, do_gpt, do_gpt_ops, &c);
  }
  bench_emit(o, &f);
  charlm_release(&c.gpt);
  ct_module_release(c.gpt_m);
  ct_release(c.x);
  ct_safetensors_free(file);
  free(c.host);
}

void bench_group_models(const bench_opts *o, ct_device *d) {
  bench_cnn(o, d);
  bench_gpt(o, d);
  ct_empty_cache(d);
}
