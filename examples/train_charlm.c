/* Trains the character transformer, built from modules (charlm_module, charlm_model.c), from
 * PyTorch's initial state_dict with AdamW, on any OpenCL device, and checks that the losses are
 * PyTorch's.
 *
 *   train_charlm [FIXTURE] [--device SPEC] [--steps N] [--check] [--bf16] [--quiet]
 *
 * FIXTURE (default examples/data/train_charlm.safetensors) is made by examples/train_charlm.py:
 * the initial weights, the text (token ids), the window starts of every step's batch and
 * PyTorch's loss at each step, in f32 and under torch.autocast(bfloat16). The program trains as
 * the script did (batches of 32 windows of 64 characters, next-character cross entropy, AdamW
 * with the fixture's lr and weight decay) for N steps (default: the fixture's 200), printing the
 * loss every 10 steps with the steps per second.
 *
 *   --check  compares every step's loss with PyTorch's within 1e-3 relative (f32 rounding in
 *            another order moves the losses by about 1e-6 relative at first, and the
 *            difference grows over the steps through the weights); exits 1 on a mismatch
 *   --bf16   runs the forward and the loss under ct_autocast_set_dtype(CT_BF16) (matmuls, linears
 *            and attention in bf16, norms, softmax and the loss in f32; the weights and Adam
 *            stay f32) and checks that the last step's loss is within 5% of PyTorch's f32 loss
 *            at that step; exits 1 otherwise
 * The device is --device SPEC, else $CLTENSOR_DEVICE or the default. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charlm_model.h"
#include "cltensor/cltensor.h"
#include "train_common.h"

#define PROG "train_charlm"
#define LOSS_RTOL 1e-3
#define BF16_RTOL 0.05

typedef struct trainer {
  ct_device *d;
  charlm_config m;   /* the dimensions */
  ct_module *model;  /* CharGPT */
  ct_optimizer *opt;
  uint8_t *text;
  int16_t *starts; /* [steps][batch] */
  int64_t ntext, steps, batch;
  int64_t *ids, *tgt; /* [batch * context] host buffers */
} trainer;

static void trainer_free(trainer *t) {
  ct_optimizer_free(t->opt);
  ct_module_release(t->model);
  free(t->text);
  free(t->starts);
  free(t->ids);
  free(t->tgt);
  memset(t, 0, sizeof *t);
}

static ct_status trainer_init(trainer *t, ct_device *d, const ct_safetensors *f) {
  memset(t, 0, sizeof *t);
  t->d = d;
  const char *lr = train_meta(PROG, f, "lr"), *wd = train_meta(PROG, f, "weight_decay");
  const char *batch = train_meta(PROG, f, "batch"), *steps = train_meta(PROG, f, "steps");
  if (!lr || !wd || !batch || !steps) return CT_ERR_FORMAT;
  t->batch = atoll(batch);
  t->steps = atoll(steps);
  ct_tensor *p[CHARLM_MAX_PARAMS];
  int np = 0;
  ct_status st = charlm_module_load(&t->model, &t->m, d, f); /* PyTorch's initial state_dict */
  if (st == CT_OK) st = ct_module_parameters(p, CHARLM_MAX_PARAMS, &np, t->model);
  /* torch.optim.AdamW with PyTorch's betas and eps. */
  if (st == CT_OK) st = ct_adam_new(&t->opt, p, np, atof(lr), 0.9, 0.999, 1e-8, atof(wd), true);
  if (st == CT_OK) st = train_host_copy((void **)&t->text, f, "text", &t->ntext);
  if (st == CT_OK) st = train_host_copy((void **)&t->starts, f, "starts", NULL);
  if (st == CT_OK) {
    t->ids = malloc((size_t)(t->batch * t->m.context) * sizeof *t->ids);
    t->tgt = malloc((size_t)(t->batch * t->m.context) * sizeof *t->tgt);
    if (!t->ids || !t->tgt) st = CT_ERR_OUT_OF_MEMORY;
  }
  if (st != CT_OK) trainer_free(t);
  return st;
}

/* One step on the batch of step s: windows text[start : start + T] and the next characters. */
static ct_status train_step(trainer *t, int64_t s, bool bf16, double *loss) {
  const int64_t b = t->batch, tt = t->m.context;
  for (int64_t i = 0; i < b; i++) {
    const int64_t s0 = t->starts[s * b + i];
    for (int64_t j = 0; j < tt; j++) {
      t->ids[i * tt + j] = t->text[s0 + j];
      t->tgt[i * tt + j] = t->text[s0 + j + 1];
    }
  }
  ct_tensor *ids = NULL, *tgt = NULL, *logits = NULL, *flat = NULL, *l = NULL;
  ct_status st = ct_from_host(&ids, t->d, CT_I64, 2, (int64_t[]){b, tt}, t->ids);
  if (st == CT_OK) st = ct_from_host(&tgt, t->d, CT_I64, 1, (int64_t[]){b * tt}, t->tgt);
  /* Autocast around the forward and the loss only, as torch.autocast's documented use: the
   * backward then runs each op's gradient in the dtype its forward used. */
  if (st == CT_OK && bf16) st = ct_autocast_set_dtype(CT_BF16);
  if (st == CT_OK) st = ct_module_forward(&logits, t->model, ids);
  if (st == CT_OK) st = ct_reshape(&flat, logits, 2, (int64_t[]){b * tt, t->m.vocab});
  if (st == CT_OK) st = ct_cross_entropy(&l, flat, tgt, -100, 0.0, CT_REDUCTION_MEAN);
  if (bf16) ct_autocast_set_dtype(CT_F32);
  if (st == CT_OK) st = ct_optimizer_zero_grad(t->opt);
  if (st == CT_OK) st = ct_backward(l, NULL);
  if (st == CT_OK) st = ct_optimizer_step(t->opt);
  if (st == CT_OK) st = ct_item(loss, l);
  ct_release(l);
  ct_release(flat);
  ct_release(logits);
  ct_release(tgt);
  ct_release(ids);
  return st;
}

int main(int argc, char **argv) {
  const char *path = "examples/data/train_charlm.safetensors", *spec = NULL;
  int64_t steps = -1;
  bool check = false, bf16 = false, quiet = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const bool has = i + 1 < argc;
    if (!strcmp(a, "--device") && has) spec = argv[++i];
    else if (!strcmp(a, "--steps") && has) steps = atoll(argv[++i]);
    else if (!strcmp(a, "--check")) check = true;
    else if (!strcmp(a, "--bf16")) bf16 = true;
    else if (!strcmp(a, "--quiet")) quiet = true;
    else if (a[0] != '-') path = a;
    else {
      fprintf(stderr, "usage: " PROG " [FIXTURE] [--device SPEC] [--steps N] [--check] [--bf16] [--quiet]\n");
      return 2;
    }
  }
  ct_device *d;
  if ((spec ? ct_device_find(&d, spec) : ct_device_default(&d)) != CT_OK) return train_fail(PROG, "choosing a device");
  printf("device: %s (%s)\n", ct_device_spec(d), ct_device_properties(d)->name);
  ct_safetensors *f = NULL;
  if (train_fixture_load(&f, path, d) != CT_OK) return train_fail(PROG, "loading the fixture");
  trainer t;
  if (trainer_init(&t, d, f) != CT_OK) return train_fail(PROG, "setting up");
  float *ref = NULL, *ref_bf16 = NULL;
  int64_t nref = 0;
  if (train_host_copy((void **)&ref, f, "torch.losses", &nref) != CT_OK ||
      train_host_copy((void **)&ref_bf16, f, "torch.bf16_losses", NULL) != CT_OK)
    return train_fail(PROG, "reading PyTorch's losses");
  if (steps < 0 || steps > t.steps) steps = t.steps;
  if (steps > nref) steps = nref;
  printf(PROG ": %d layers, d_model %" PRId64 ", vocabulary %" PRId64 ", batch %" PRId64 "x%" PRId64 ", %" PRId64
              " steps%s\n", t.m.layers, t.m.d_model, t.m.vocab, t.batch, t.m.context, steps,
         bf16 ? ", autocast bf16" : "");

  ct_memory_reset_peak(d);
  int bad = 0;
  double loss = NAN, ms = 0, worst = 0, t0 = train_now_ms();
  for (int64_t s = 0; s < steps; s++) {
    if (train_step(&t, s, bf16, &loss) != CT_OK) return train_fail(PROG, "training step");
    if (check) {
      bad += !train_check_loss(PROG, s, loss, ref[s], LOSS_RTOL, false);
      worst = fmax(worst, fabs(loss - ref[s]) / ref[s]);
    }
    if ((s + 1) % 10 == 0 || s + 1 == steps) {
      ms = train_now_ms() - t0;
      if (!quiet || s + 1 == steps)
        printf("step %3" PRId64 ": loss %.5f (PyTorch f32 %.5f, bf16 %.5f), %.2f steps/s\n", s + 1, loss, ref[s],
               ref_bf16[s], (double)(s + 1) / (ms / 1e3));
      fflush(stdout);
    }
  }
  printf(PROG ": peak device memory held by tensors: %.2f MiB\n", train_peak_mib(d));
  if (check)
    printf(PROG ": %d of %" PRId64 " steps differ from PyTorch's losses beyond %.0e relative (largest difference %.2e)\n",
           bad, steps, LOSS_RTOL, worst);
  if (bf16 && steps > 0) {
    const double rel = fabs(loss - ref[steps - 1]) / ref[steps - 1];
    printf(PROG ": final loss under bf16 autocast %.5f, PyTorch f32 %.5f: %.2f%% apart (limit %.0f%%)\n", loss,
           ref[steps - 1], 100 * rel, 100 * BF16_RTOL);
    if (!(rel <= BF16_RTOL)) bad++;
  }
  trainer_free(&t);
  free(ref);
  free(ref_bf16);
  ct_safetensors_free(f);
  ct_shutdown(); /* prints the CLTENSOR_PROFILE table */
  return bad ? 1 : 0;
}
