/* Defining a model with modules and training it (docs/TRAINING.md, "Modules").
 *
 * Three interleaved spirals in the plane (made here, deterministic), an MLP built from modules,
 * AdamW on the module's parameter list, train/eval for batch norm and dropout, accuracy on a
 * held-out split, then the state dict saved and loaded into a freshly built model that must
 * predict the same. Exits 1 unless the test accuracy reaches 90%.
 *
 *   ./build/examples/train_modules [DEVICE] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cltensor/cltensor.h>

enum { CLASSES = 3, PER_CLASS = 200, N = CLASSES * PER_CLASS, NTRAIN = 450, STEPS = 300 };

#define CHECK(call)                                                   \
  do {                                                                \
    ct_status s_ = (call);                                            \
    if (s_ != CT_OK) {                                                \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ct_last_error()); \
      exit(1);                                                        \
    }                                                                 \
  } while (0)

/* The spirals, shuffled: point i of class c at radius r = i / PER_CLASS, angle 4 r + 2 pi c / 3,
 * with Gaussian noise of 0.2 radians (a small LCG and Box-Muller, so every run sees the same). */
static void make_data(float *x, int64_t *y) {
  uint64_t state = 30;
  int order[N];
  for (int i = 0; i < N; i++) order[i] = i;
  for (int i = N - 1; i > 0; i--) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    int j = (int)((state >> 33) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (int k = 0; k < N; k++) {
    int c = order[k] / PER_CLASS, i = order[k] % PER_CLASS;
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    double u1 = ((state >> 11) + 1.0) / 9007199254740993.0;
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    double u2 = (state >> 11) / 9007199254740992.0;
    double r = (double)i / PER_CLASS, a = 4 * r + 2 * M_PI * c / 3 + 0.2 * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    x[2 * k] = (float)(r * cos(a));
    x[2 * k + 1] = (float)(r * sin(a));
    y[k] = c;
  }
}

/* Linear(2, 64), BatchNorm1d(64), ReLU, Dropout(0.1), Linear(64, 64), ReLU, Linear(64, 3). */
static ct_module *make_model(ct_device *dev) {
  ct_module *layers[7], *model;
  CHECK(ct_module_linear(&layers[0], dev, 2, 64, true));
  CHECK(ct_module_batch_norm1d(&layers[1], dev, 64, 1e-5, 0.1, true, true));
  CHECK(ct_module_relu(&layers[2]));
  CHECK(ct_module_dropout(&layers[3], 0.1));
  CHECK(ct_module_linear(&layers[4], dev, 64, 64, true));
  CHECK(ct_module_relu(&layers[5]));
  CHECK(ct_module_linear(&layers[6], dev, 64, CLASSES, true));
  CHECK(ct_module_sequential(&model, layers, 7));
  for (int i = 0; i < 7; i++) ct_module_release(layers[i]); /* the Sequential holds them */
  return model;
}

/* The predicted classes of x, in eval mode. */
static void predict(int64_t *pred, ct_module *model, const ct_tensor *x) {
  ct_tensor *logits = NULL, *arg = NULL;
  CHECK(ct_module_eval(model));
  bool grad = ct_set_grad_enabled(false); /* no graph for inference */
  CHECK(ct_module_forward(&logits, model, x));
  CHECK(ct_argmax(&arg, logits, 1, false));
  CHECK(ct_to_host(arg, pred, ct_tensor_nbytes(arg)));
  ct_set_grad_enabled(grad);
  ct_release(arg);
  ct_release(logits);
}

int main(int argc, char **argv) {
  ct_device *dev;
  CHECK(argc > 1 ? ct_device_find(&dev, argv[1]) : ct_device_default(&dev));
  static float xh[N * 2];
  static int64_t yh[N], pred[N];
  make_data(xh, yh);
  ct_tensor *x = NULL, *y = NULL, *xtest = NULL;
  CHECK(ct_from_host(&x, dev, CT_F32, 2, (int64_t[]){NTRAIN, 2}, xh));
  CHECK(ct_from_host(&y, dev, CT_I64, 1, (int64_t[]){NTRAIN}, yh));
  CHECK(ct_from_host(&xtest, dev, CT_F32, 2, (int64_t[]){N - NTRAIN, 2}, xh + 2 * NTRAIN));

  ct_manual_seed(0); /* the initial weights and the dropout masks */
  ct_module *model = make_model(dev);
  ct_tensor *params[16];
  int nparams;
  CHECK(ct_module_parameters(params, 16, &nparams, model));
  ct_optimizer *opt;
  CHECK(ct_adam_new(&opt, params, nparams, 1e-2, 0.9, 0.999, 1e-8, 1e-4, true)); /* AdamW */

  CHECK(ct_module_train(model, true));
  for (int step = 0; step < STEPS; step++) { /* full batch */
    ct_tensor *logits = NULL, *loss = NULL;
    CHECK(ct_optimizer_zero_grad(opt));
    CHECK(ct_module_forward(&logits, model, x));
    CHECK(ct_cross_entropy(&loss, logits, y, -100, 0.0, CT_REDUCTION_MEAN));
    CHECK(ct_backward(loss, NULL));
    CHECK(ct_optimizer_step(opt));
    if (step % 100 == 0 || step == STEPS - 1) {
      float v;
      CHECK(ct_to_host(loss, &v, sizeof v));
      printf("step %3d  loss %.4f\n", step, v);
    }
    ct_release(loss);
    ct_release(logits);
  }

  predict(pred, model, xtest);
  int correct = 0;
  for (int i = 0; i < N - NTRAIN; i++) correct += pred[i] == yh[NTRAIN + i];
  double acc = (double)correct / (N - NTRAIN);
  printf("test accuracy %.1f%% (%d of %d)\n", 100 * acc, correct, N - NTRAIN);

  /* Checkpoint: the state dict (PyTorch's names: "0.weight", "1.running_mean", ...) to a
   * safetensors file, loaded strictly into a new model, which must predict the same. */
  char path[] = "/tmp/train_modules_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 1;
  close(fd);
  CHECK(ct_module_save_state_dict(model, path));
  ct_module *copy = make_model(dev);
  CHECK(ct_module_load_state_dict(copy, path, true));
  unlink(path);
  static int64_t pred2[N];
  predict(pred2, copy, xtest);
  int same = 1;
  for (int i = 0; i < N - NTRAIN; i++) same &= pred[i] == pred2[i];
  printf("reloaded model: %s predictions\n", same ? "the same" : "DIFFERENT");

  ct_module_release(copy);
  ct_optimizer_free(opt);
  ct_module_release(model);
  ct_release(xtest);
  ct_release(y);
  ct_release(x);
  ct_shutdown();
  return acc >= 0.9 && same ? 0 : 1;
}
