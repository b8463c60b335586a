/* A CNN trained in PyTorch on scikit-learn's handwritten digits, run on any OpenCL device.
 *
 *   digits_cnn [MODEL.safetensors [DEVICE]]    e.g. digits_cnn examples/data/digits_cnn.safetensors cpu:1
 *
 * examples/make_digits_cnn.py trained the network below in PyTorch and saved its weights, the
 * 450-image test split, and PyTorch's logits, predictions and accuracy in one safetensors file.
 * This program loads the file onto the device ($CLTENSOR_DEVICE or the default when DEVICE is
 * not given), classifies the whole test split in one batch, and prints its accuracy next to
 * PyTorch's, how many predicted classes differ from PyTorch's, and the largest logit difference.
 * It exits 0 only when every predicted class is PyTorch's (so the accuracy is PyTorch's too) and
 * the logits agree within 1e-4 relative to the largest logit (f32 rounding in a different order
 * differs by about 1e-6 here; a layout mistake by far more). The script checked that no test
 * image is a near tie between two classes, so any correct f32 implementation must agree.
 * The network, built from modules (module.h) as PyTorch's DigitsCNN, is in digits_cnn_model.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cltensor/cltensor.h"
#include "digits_cnn_model.h"

#define LOGIT_REL_TOL 1e-4

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what) {
  fprintf(stderr, "digits_cnn: %s: %s\n", what, ct_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "examples/data/digits_cnn.safetensors";
  ct_device *dev;
  if ((argc > 2 ? ct_device_find(&dev, argv[2]) : ct_device_default(&dev)) != CT_OK)
    return fail("choosing a device");
  printf("device: %s (%s)\n", ct_device_spec(dev), ct_device_properties(dev)->name);

  ct_safetensors *model;
  if (ct_safetensors_load(&model, path, dev) != CT_OK) return fail("loading the model");
  digits_cnn m;
  ct_tensor *xs = NULL, *ys = NULL, *tlogits = NULL, *tpred = NULL;
  if (digits_cnn_load(&m, model) != CT_OK) return fail("reading the weights");
  if (ct_safetensors_get(&xs, model, "test.x") != CT_OK || ct_safetensors_get(&ys, model, "test.y") != CT_OK ||
      ct_safetensors_get(&tlogits, model, "torch.logits") != CT_OK ||
      ct_safetensors_get(&tpred, model, "torch.pred") != CT_OK)
    return fail("reading the test split and PyTorch's results");
  const char *desc = ct_safetensors_metadata_get(model, "description");
  const char *t_correct = ct_safetensors_metadata_get(model, "torch_correct");
  if (!t_correct) {
    fprintf(stderr, "digits_cnn: %s lacks the torch_correct metadata\n", path);
    return 1;
  }
  printf("model: %s\n  %s\n", path, desc ? desc : "");

  const int64_t n = ct_tensor_shape(xs)[0], classes = ct_tensor_shape(tlogits)[1];
  int64_t *labels = malloc((size_t)n * sizeof *labels), *preds = malloc((size_t)n * sizeof *preds);
  int64_t *want = malloc((size_t)n * sizeof *want);
  float *logits_host = malloc((size_t)(n * classes) * sizeof *logits_host);
  float *want_logits = malloc((size_t)(n * classes) * sizeof *want_logits);
  if (!labels || !preds || !want || !logits_host || !want_logits) {
    fprintf(stderr, "digits_cnn: out of host memory\n");
    return 1;
  }
  if (ct_to_host(ys, labels, (size_t)n * sizeof *labels) != CT_OK ||
      ct_to_host(tpred, want, (size_t)n * sizeof *want) != CT_OK ||
      ct_to_host(tlogits, want_logits, (size_t)(n * classes) * sizeof *want_logits) != CT_OK)
    return fail("reading PyTorch's results");

  /* Twice: the first pass pays for building the kernels (or loading them from the cache). */
  double ms[2];
  ct_tensor *logits = NULL, *pred = NULL;
  for (int pass = 0; pass < 2; pass++) {
    ct_release(pred);
    ct_release(logits);
    double t0 = now_ms();
    if (digits_cnn_forward(&logits, &m, xs) != CT_OK || ct_argmax(&pred, logits, 1, false) != CT_OK ||
        ct_to_host(pred, preds, (size_t)n * sizeof *preds) != CT_OK)
      return fail("classifying the test split");
    ms[pass] = now_ms() - t0;
  }
  if (ct_to_host(logits, logits_host, (size_t)(n * classes) * sizeof *logits_host) != CT_OK)
    return fail("reading the logits");

  int64_t correct = 0, differ = 0;
  for (int64_t i = 0; i < n; i++) {
    correct += preds[i] == labels[i];
    if (preds[i] != want[i]) {
      if (differ++ < 10)
        printf("  image %lld: class %lld, PyTorch %lld\n", (long long)i, (long long)preds[i], (long long)want[i]);
    }
  }
  double max_diff = 0, max_ref = 0;
  for (int64_t i = 0; i < n * classes; i++) {
    double d = fabs((double)logits_host[i] - (double)want_logits[i]);
    if (!(d <= max_diff)) max_diff = d; /* NaN sticks */
    if (fabs((double)want_logits[i]) > max_ref) max_ref = fabs((double)want_logits[i]);
  }
  const double rel = max_diff / max_ref;
  const long long t_ok = atoll(t_correct);

  printf("test split: %lld images of 8x8 in one batch\n", (long long)n);
  printf("accuracy: %lld/%lld = %.2f%%   (PyTorch: %lld/%lld = %.2f%%)\n", (long long)correct, (long long)n,
         100.0 * (double)correct / (double)n, t_ok, (long long)n, 100.0 * (double)t_ok / (double)n);
  printf("predicted classes differing from PyTorch's: %lld of %lld\n", (long long)differ, (long long)n);
  printf("logits: max |difference| %.3g = %.3g relative to the largest logit (tolerance %g)\n", max_diff, rel,
         LOGIT_REL_TOL);
  printf("forward time: first %.1f ms (kernel builds or cache loads), then %.2f ms\n", ms[0], ms[1]);

  ct_release(pred);
  ct_release(logits);
  digits_cnn_release(&m);
  ct_release(xs);
  ct_release(ys);
  ct_release(tlogits);
  ct_release(tpred);
  ct_safetensors_free(model);
  free(labels);
  free(preds);
  free(want);
  free(logits_host);
  free(want_logits);
  ct_shutdown();
  if (differ != 0 || correct != t_ok || !(rel <= LOGIT_REL_TOL)) {
    printf("MISMATCH: this device's results differ from PyTorch's\n");
    return 1;
  }
  printf("every predicted class is PyTorch's; same accuracy\n");
  return 0;
}
