/* The digits CNN of examples/make_digits_cnn.py, built from modules (module.h) as PyTorch's
 * DigitsCNN is; shared by the digits_cnn example and cltensor-bench
 * (train_digits.c builds the same model in a few lines of its own).
 *
 *   conv1 1->16 3x3 pad 1, bn1, relu                      [N, 16, 8, 8]
 *   conv2 16->32 3x3 pad 1, bn2, relu, max_pool 2x2       [N, 32, 4, 4]
 *   dropout 0.25 (eval: identity)
 *   conv3 32->64 3x3 pad 1, bn3, relu                     [N, 64, 4, 4]
 *   adaptive_avg_pool 1x1, flatten, fc 64->10             [N, 10] logits
 * Weights in PyTorch's layouts (conv [out, in, kh, kw], linear [out, in]). Inference (training
 * false, as loaded): batch norms with their running statistics, no dropout. Training (model.train()
 * in PyTorch): batch norms with the batch's statistics, updating the running ones in place
 * (momentum 0.1), and dropout drawing its mask from the library's generator (ct_manual_seed);
 * digits_cnn_params() gives the parameters to mark with ct_set_requires_grad and hand to an
 * optimizer (the running statistics are not parameters). */
#ifndef CLTENSOR_EXAMPLES_DIGITS_CNN_MODEL_H
#define CLTENSOR_EXAMPLES_DIGITS_CNN_MODEL_H

#include "cltensor/cltensor.h"

enum { DIGITS_CONV1_W, DIGITS_CONV1_B, DIGITS_BN1_M, DIGITS_BN1_V, DIGITS_BN1_W, DIGITS_BN1_B,
       DIGITS_CONV2_W, DIGITS_CONV2_B, DIGITS_BN2_M, DIGITS_BN2_V, DIGITS_BN2_W, DIGITS_BN2_B,
       DIGITS_CONV3_W, DIGITS_CONV3_B, DIGITS_BN3_M, DIGITS_BN3_V, DIGITS_BN3_W, DIGITS_BN3_B,
       DIGITS_FC_W,    DIGITS_FC_B,    DIGITS_NWEIGHTS };

typedef struct digits_cnn {
  ct_module *net;                /* DigitsCNN: children conv1, bn1, conv2, bn2, drop, conv3, bn3, fc */
  ct_tensor *w[DIGITS_NWEIGHTS]; /* by the enum above: the module's own tensors (references) */
  double eps;                    /* the batch norms' */
  bool training;                 /* false after digits_cnn_load */
} digits_cnn;

/* The parameters (weights and biases of the convs, batch norms and fc, not the running
 * statistics) in the enum's order: DIGITS_NPARAMS indices into digits_cnn.w, and their names in
 * the state dict. */
enum { DIGITS_NPARAMS = 14 };
extern const int digits_cnn_param_index[DIGITS_NPARAMS];
const char *digits_cnn_name(int i); /* the state-dict name of w[i] */

/* Takes the weights from f (new references) and the batch norms' eps from its "bn_eps"
 * metadata. On failure (a message on stderr or in ct_last_error()) *m holds nothing. */
ct_status digits_cnn_load(digits_cnn *m, const ct_safetensors *f);
void digits_cnn_release(digits_cnn *m);
/* OUT: *logits [N, 10] of images x [N, 1, 8, 8]: the module's forward, in training mode when
 * m->training is set (ct_module_train). */
ct_status digits_cnn_forward(ct_tensor **logits, const digits_cnn *m, const ct_tensor *x);
/* OUT: *loss, the mean cross entropy of digits_cnn_forward's logits of x against the labels y
 * (i64 [N]): the training loss of cltensor-bench and cltensor-dist-bench. */
ct_status digits_cnn_loss(ct_tensor **loss, const digits_cnn *m, const ct_tensor *x, const ct_tensor *y);
/* OUT: *x [count, 1, 8, 8] f32 (pixels / 16) and *y [count] of the training set of the fixture f,
 * images start .. start + count - 1 of epoch 0's order ("order" [epochs, n]): a slice of
 * train_digits' first batches, for the benchmarks. */
ct_status digits_fixture_batch(ct_tensor **x, ct_tensor **y, const ct_safetensors *f, int64_t start, int64_t count);

#endif
