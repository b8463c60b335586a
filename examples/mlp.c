/* An MLP classifier made in NumPy, run on any OpenCL device.
 *
 *   mlp [MODEL.safetensors [DEVICE]]     e.g. mlp examples/data/mlp.safetensors gpu
 *
 * examples/make_mlp_model.py trained a 2-64-64-3 ReLU network on 2-D spirals and saved its
 * weights (PyTorch's nn.Linear layout), a test set and the accuracy NumPy gets on it in one
 * safetensors file. This program loads the file onto the device ($CLTENSOR_DEVICE or the
 * default when DEVICE is not given), classifies the test set in batches, prints the accuracy
 * and the time per batch, and exits 0 only when its accuracy equals NumPy's exactly (the
 * script left out test points too close to a decision boundary for float32 rounding to
 * decide, so every device must agree with NumPy on every point). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cltensor/cltensor.h"

#define BATCH 256

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what) {
  fprintf(stderr, "mlp: %s: %s\n", what, ct_last_error());
  return 1;
}

/* logits = fc3(relu(fc2(relu(fc1(x))))); pred = argmax over classes (i64). */
static ct_status classify(ct_tensor **pred, ct_tensor *const w[6], const ct_tensor *x) {
  ct_tensor *h1 = NULL, *a1 = NULL, *h2 = NULL, *a2 = NULL, *logits = NULL;
  ct_status st = ct_linear(&h1, x, w[0], w[1]);
  if (st == CT_OK) st = ct_relu(&a1, h1);
  if (st == CT_OK) st = ct_linear(&h2, a1, w[2], w[3]);
  if (st == CT_OK) st = ct_relu(&a2, h2);
  if (st == CT_OK) st = ct_linear(&logits, a2, w[4], w[5]);
  if (st == CT_OK) st = ct_argmax(pred, logits, 1, false);
  ct_release(logits);
  ct_release(a2);
  ct_release(h2);
  ct_release(a1);
  ct_release(h1);
  return st;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "examples/data/mlp.safetensors";
  ct_device *dev;
  if ((argc > 2 ? ct_device_find(&dev, argv[2]) : ct_device_default(&dev)) != CT_OK)
    return fail("choosing a device");
  printf("device: %s (%s)\n", ct_device_spec(dev), ct_device_properties(dev)->name);

  ct_safetensors *model;
  if (ct_safetensors_load(&model, path, dev) != CT_OK) return fail("loading the model");
  const char *names[6] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
  ct_tensor *w[6] = {NULL}, *xs = NULL, *ys = NULL;
  for (int i = 0; i < 6; i++)
    if (ct_safetensors_get(&w[i], model, names[i]) != CT_OK) return fail("reading the weights");
  if (ct_safetensors_get(&xs, model, "test.x") != CT_OK || ct_safetensors_get(&ys, model, "test.y") != CT_OK)
    return fail("reading the test set");
  const char *desc = ct_safetensors_metadata_get(model, "description");
  const char *np_correct = ct_safetensors_metadata_get(model, "numpy_correct");
  const char *np_count = ct_safetensors_metadata_get(model, "test_count");
  if (!np_correct || !np_count) {
    fprintf(stderr, "mlp: %s lacks the numpy_correct/test_count metadata\n", path);
    return 1;
  }
  printf("model: %s\n  %s\n", path, desc ? desc : "");

  int64_t n = ct_tensor_shape(xs)[0];
  int64_t *labels = malloc((size_t)n * sizeof *labels), *preds = malloc((size_t)n * sizeof *preds);
  if (!labels || !preds || ct_to_host(ys, labels, (size_t)n * sizeof *labels) != CT_OK) return fail("labels");

  double first = 0, rest = 0;
  int batches = 0;
  for (int64_t start = 0; start < n; start += BATCH) {
    ct_tensor *x = NULL, *pred = NULL;
    int64_t stop = start + BATCH < n ? start + BATCH : n;
    double t0 = now_ms();
    if (ct_slice(&x, xs, 0, start, stop, 1) != CT_OK || classify(&pred, w, x) != CT_OK ||
        ct_to_host(pred, preds + start, (size_t)(stop - start) * sizeof *preds) != CT_OK)
      return fail("classifying a batch");
    double ms = now_ms() - t0;
    /* The first batch pays for building the kernels (or loading them from the cache). */
    if (batches++ == 0)
      first = ms;
    else
      rest += ms;
    ct_release(pred);
    ct_release(x);
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < n; i++) correct += preds[i] == labels[i];

  long long want = atoll(np_correct), want_n = atoll(np_count);
  printf("test set: %lld points in %d batches of up to %d\n", (long long)n, batches, BATCH);
  printf("accuracy: %lld/%lld = %.2f%%   (NumPy: %lld/%lld = %.2f%%)\n", (long long)correct, (long long)n,
         100.0 * (double)correct / (double)n, want, want_n, 100.0 * (double)want / (double)want_n);
  printf("time per batch: first %.2f ms (kernel builds or cache loads), then %.3f ms on average over %d\n",
         first, batches > 1 ? rest / (batches - 1) : 0.0, batches - 1);

  for (int i = 0; i < 6; i++) ct_release(w[i]);
  ct_release(xs);
  ct_release(ys);
  ct_safetensors_free(model);
  free(labels);
  free(preds);
  ct_shutdown();
  if (correct != want || n != want_n) {
    printf("MISMATCH: this device's accuracy differs from NumPy's\n");
    return 1;
  }
  printf("same accuracy as NumPy\n");
  return 0;
}
