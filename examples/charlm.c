/* A GPT-style character model trained in PyTorch, run on any OpenCL device.
 *
 *   charlm [MODEL.safetensors [DEVICE]]     e.g. charlm examples/data/charlm.safetensors cpu:1
 *
 * examples/make_charlm.py trained a 2-layer transformer on the Zen of Python and saved its
 * weights, its vocabulary (Unicode code points), a fixed batch of token ids with PyTorch's
 * logits on it, and a prompt with PyTorch's greedy continuation. This program loads the file
 * onto the device ($CLTENSOR_DEVICE or the default when DEVICE is not given) and
 *   1. continues the prompt greedily (each step: the last `context` tokens at positions 0...,
 *      the argmax of the last position's logits) and prints the text;
 *   2. runs the fixed batch and prints the largest logit difference from PyTorch's, relative to
 *      the largest logit;
 *   3. does 2 again with the model cast to f16 and to bf16 (ct_module_to_dtype, PyTorch's
 *      model.half() / model.bfloat16(): the activations then stay in that dtype, each op computing
 *      in f32 and rounding once).
 * It exits 0 only when the continuation is PyTorch's character for character, the f32 logits
 * are within 1e-4 relative, and the f16/bf16 logits within the file's tol_f16/tol_bf16 (4x
 * PyTorch's own error with the same weights cast on the CPU; see examples/make_charlm.py and
 * docs/MODELS.md).
 *
 * The model, as modules with PyTorch's state_dict names, is in charlm_model.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "charlm_model.h"
#include "cltensor/cltensor.h"

#define F32_REL_TOL 1e-4

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what) {
  fprintf(stderr, "charlm: %s: %s\n", what, ct_last_error());
  return 1;
}

/* Max |a - ref| / max |ref| of the logits on the batch, with the model in its own dtype. */
static ct_status batch_error(double *rel, double *ms, ct_module *m, const ct_tensor *ids, const float *ref,
                             int64_t count) {
  ct_tensor *logits = NULL, *f = NULL;
  float *got = malloc((size_t)count * sizeof *got);
  double t0 = now_ms();
  ct_status st = got ? ct_module_forward(&logits, m, ids) : CT_ERR_OUT_OF_MEMORY;
  if (st == CT_OK) st = ct_cast(&f, logits, CT_F32);
  if (st == CT_OK) st = ct_to_host(f, got, (size_t)count * sizeof *got);
  *ms = now_ms() - t0;
  if (st == CT_OK) {
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < count; i++) {
      double d = fabs((double)got[i] - (double)ref[i]);
      if (!(d <= max_diff)) max_diff = d; /* NaN sticks */
      if (fabs((double)ref[i]) > max_ref) max_ref = fabs((double)ref[i]);
    }
    *rel = max_diff / max_ref;
  }
  free(got);
  ct_release(f);
  ct_release(logits);
  return st;
}

/* Writes code point c as UTF-8. */
static void put_utf8(FILE *f, int64_t c) {
  if (c < 0x80) {
    fputc((int)c, f);
  } else if (c < 0x800) {
    fputc((int)(0xC0 | (c >> 6)), f);
    fputc((int)(0x80 | (c & 0x3F)), f);
  } else if (c < 0x10000) {
    fputc((int)(0xE0 | (c >> 12)), f);
    fputc((int)(0x80 | ((c >> 6) & 0x3F)), f);
    fputc((int)(0x80 | (c & 0x3F)), f);
  } else {
    fputc((int)(0xF0 | (c >> 18)), f);
    fputc((int)(0x80 | ((c >> 12) & 0x3F)), f);
    fputc((int)(0x80 | ((c >> 6) & 0x3F)), f);
    fputc((int)(0x80 | (c & 0x3F)), f);
  }
}

static void put_text(FILE *f, const int64_t *vocab, int64_t nvocab, const int64_t *ids, int64_t n) {
  for (int64_t i = 0; i < n; i++) put_utf8(f, ids[i] >= 0 && ids[i] < nvocab ? vocab[ids[i]] : '?');
}

static int64_t *read_i64(const ct_safetensors *st, const char *name, int64_t *n, int64_t extra) {
  ct_tensor *t = NULL;
  if (ct_safetensors_get(&t, st, name) != CT_OK) return NULL;
  *n = ct_numel(t);
  int64_t *v = malloc((size_t)(*n + extra) * sizeof *v);
  if (v && ct_to_host(t, v, (size_t)*n * sizeof *v) != CT_OK) {
    free(v);
    v = NULL;
  }
  ct_release(t);
  return v;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "examples/data/charlm.safetensors";
  ct_device *dev;
  if ((argc > 2 ? ct_device_find(&dev, argv[2]) : ct_device_default(&dev)) != CT_OK)
    return fail("choosing a device");
  printf("device: %s (%s)\n", ct_device_spec(dev), ct_device_properties(dev)->name);

  ct_safetensors *file;
  if (ct_safetensors_load(&file, path, dev) != CT_OK) return fail("loading the model");
  const char *desc = ct_safetensors_metadata_get(file, "description");
  const char *tol_f16 = ct_safetensors_metadata_get(file, "tol_f16");
  const char *tol_bf16 = ct_safetensors_metadata_get(file, "tol_bf16");
  if (!tol_f16 || !tol_bf16) {
    fprintf(stderr, "charlm: %s lacks the tol_f16/tol_bf16 metadata\n", path);
    return 1;
  }
  printf("model: %s\n  %s\n", path, desc ? desc : "");
  charlm_config c;
  ct_module *m;
  if (charlm_module_load(&m, &c, dev, file) != CT_OK) return fail("reading the model");

  int64_t nvocab, nprompt, ngreedy;
  int64_t *vocab = read_i64(file, "vocab", &nvocab, 0);
  int64_t *greedy_want = read_i64(file, "greedy.ids", &ngreedy, 0);
  int64_t *ids = greedy_want ? read_i64(file, "prompt.ids", &nprompt, ngreedy) : NULL;
  if (!vocab || !greedy_want || !ids) return fail("reading the vocabulary, the prompt and PyTorch's continuation");

  /* 1. Greedy continuation. */
  double t0 = now_ms();
  if (charlm_greedy(m, c.context, dev, ids, nprompt, ngreedy) != CT_OK) return fail("greedy decoding");
  const double greedy_ms = now_ms() - t0;
  int64_t first_diff = -1;
  for (int64_t i = 0; i < ngreedy && first_diff < 0; i++)
    if (ids[nprompt + i] != greedy_want[i]) first_diff = i;
  printf("prompt: \"");
  put_text(stdout, vocab, nvocab, ids, nprompt);
  printf("\"\ngreedy continuation (%lld characters, %.0f ms):\n", (long long)ngreedy, greedy_ms);
  put_text(stdout, vocab, nvocab, ids + nprompt, ngreedy);
  if (first_diff < 0) {
    printf("\n-> identical to PyTorch's\n");
  } else {
    printf("\n-> DIFFERS from PyTorch's at character %lld; PyTorch's:\n", (long long)first_diff);
    put_text(stdout, vocab, nvocab, greedy_want, ngreedy);
    printf("\n");
  }

  /* 2, 3. Logits on the fixed batch in f32, f16, bf16. */
  ct_tensor *batch = NULL, *ref_t = NULL;
  if (ct_safetensors_get(&batch, file, "batch.ids") != CT_OK ||
      ct_safetensors_get(&ref_t, file, "batch.logits") != CT_OK)
    return fail("reading the fixed batch");
  const int64_t count = ct_numel(ref_t);
  float *ref = malloc((size_t)count * sizeof *ref);
  if (!ref || ct_to_host(ref_t, ref, (size_t)count * sizeof *ref) != CT_OK) return fail("reading PyTorch's logits");
  const int64_t *bs = ct_tensor_shape(batch);
  printf("fixed batch: %lld x %lld tokens, vocabulary %lld\n", (long long)bs[0], (long long)bs[1], (long long)c.vocab);

  const struct {
    ct_dtype dt;
    const char *name;
    double tol;
  } runs[3] = {{CT_F32, "f32", F32_REL_TOL}, {CT_F16, "f16", atof(tol_f16)}, {CT_BF16, "bf16", atof(tol_bf16)}};
  bool logits_ok = true;
  for (int r = 0; r < 3; r++) {
    double rel = NAN, ms[2];
    /* PyTorch's tolerances are for its f32 weights cast once: reload them before each cast. */
    if (r > 0 && (ct_module_to_dtype(m, CT_F32) != CT_OK || ct_module_load_state_dict_from(m, file, false) != CT_OK ||
                  ct_module_to_dtype(m, runs[r].dt) != CT_OK))
      return fail("casting the model");
    /* Twice: the first run pays for building the kernels (or loading them from the cache). */
    for (int pass = 0; pass < 2; pass++)
      if (batch_error(&rel, &ms[pass], m, batch, ref, count) != CT_OK) return fail("running the fixed batch");
    const bool ok = rel <= runs[r].tol;
    logits_ok = logits_ok && ok;
    printf("logits, %-4s weights: max |difference| / max |logit| = %.3g (tolerance %.3g) %s; forward %.1f ms, "
           "then %.2f ms\n",
           runs[r].name, rel, runs[r].tol, ok ? "ok" : "EXCEEDED", ms[0], ms[1]);
  }

  ct_release(batch);
  ct_release(ref_t);
  ct_module_release(m);
  ct_safetensors_free(file);
  free(ref);
  free(vocab);
  free(greedy_want);
  free(ids);
  ct_shutdown();
  if (first_diff >= 0 || !logits_ok) {
    printf("MISMATCH: this device's results differ from PyTorch's\n");
    return 1;
  }
  printf("same continuation and logits as PyTorch\n");
  return 0;
}
