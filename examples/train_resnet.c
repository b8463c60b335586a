/* A small ResNet trained from scratch on scikit-learn's handwritten digits: modules, the C side's
 * initialization, parameter groups, a one-cycle schedule and the shuffling data loader together
 * (docs/TRAINING.md, "A ResNet from scratch").
 *
 *   ./build/examples/train_resnet [DATA.safetensors [DEVICE]]   (default examples/data/train_digits.safetensors)
 *
 * Data: the 8x8 digits of the train_digits fixture (1347 training and 450 test images, pixels
 * 0..16, scaled to [0, 1]). Model: torchvision's ResNet layout, small: a stem (3x3 conv 1->16, batch
 * norm, ReLU), layer1 a BasicBlock 16->16, layer2 a BasicBlock 16->32 with stride 2 and a 1x1
 * conv + batch norm shortcut, global average pooling, fc 32->10; state_dict names as torchvision's
 * ("layer2.0.downsample.0.weight"). Initialization on the library's Philox generator, seeded: each
 * module's PyTorch default, then torchvision's: kaiming_normal_(fan_out, relu) for the convs and
 * zero_init_residual (each block's last batch norm starts at weight 0, so a block starts as its
 * shortcut). Training: AdamW, weight decay 5e-4 on the conv and linear weights only (a second
 * parameter group without it for biases and batch norms), OneCycleLR (max lr 1e-2, cosine) stepped
 * every batch, batches of 64 shuffled by the data loader, 12 epochs. Prints the loss and the test
 * accuracy after each epoch; exits 1 when the final test accuracy is below 96%. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/cltensor.h"

#define PROG "train_resnet"
#define EPOCHS 12
#define BATCH 64
#define MIN_ACCURACY 0.96
#define FAIL(what) (fprintf(stderr, PROG ": %s: %s\n", what, ct_last_error()), 1)

/* BasicBlock.forward: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the shortcut being
 * downsample(x) when the block has one, else x. */
static ct_status block_forward(ct_tensor **y, ct_module *self, const ct_tensor *x, void *user) {
  (void)user;
  ct_module *down = ct_module_get_submodule(self, "downsample");
  ct_tensor *h = NULL, *s = NULL;
  ct_scope_begin(); /* one status at the end; every temporary released there */
  ct_module_forward(&h, ct_module_get_submodule(self, "conv1"), x);
  ct_module_forward(&h, ct_module_get_submodule(self, "bn1"), h);
  ct_relu(&h, h);
  ct_module_forward(&h, ct_module_get_submodule(self, "conv2"), h);
  ct_module_forward(&h, ct_module_get_submodule(self, "bn2"), h);
  if (down) ct_module_forward(&s, down, x);
  ct_add(&h, h, down ? s : x);
  ct_relu(y, h);
  return ct_scope_end_keep(y);
}

/* Adds child to m under name and drops the caller's reference (also when st already failed). */
static ct_status add(ct_module *m, const char *name, ct_module *child, ct_status st) {
  if (st == CT_OK) st = ct_module_add_child(m, name, child);
  ct_module_release(child);
  return st;
}

/* A BasicBlock cin -> cout: 3x3 convs without bias (the batch norms shift), the first with
 * stride; a 1x1 conv + batch norm shortcut where the shape changes. */
static ct_status basic_block(ct_module **out, ct_device *d, int64_t cin, int64_t cout, int stride) {
  static const int k3[2] = {3, 3}, k1[2] = {1, 1}, pad1[2] = {1, 1};
  const int st2[2] = {stride, stride};
  ct_module *m = NULL, *c = NULL, *seq = NULL;
  ct_status st = ct_module_custom(&m, "BasicBlock", block_forward, NULL, NULL);
  if (st == CT_OK) st = ct_module_conv2d(&c, d, cin, cout, k3, st2, pad1, NULL, 1, false);
  st = add(m, "conv1", c, st), c = NULL;
  if (st == CT_OK) st = ct_module_batch_norm2d(&c, d, cout, 1e-5, 0.1, true, true);
  st = add(m, "bn1", c, st), c = NULL;
  if (st == CT_OK) st = ct_module_conv2d(&c, d, cout, cout, k3, NULL, pad1, NULL, 1, false);
  st = add(m, "conv2", c, st), c = NULL;
  if (st == CT_OK) st = ct_module_batch_norm2d(&c, d, cout, 1e-5, 0.1, true, true);
  st = add(m, "bn2", c, st), c = NULL;
  if (cin != cout || stride != 1) {
    if (st == CT_OK) st = ct_module_sequential(&seq, NULL, 0);
    if (st == CT_OK) st = ct_module_conv2d(&c, d, cin, cout, k1, st2, NULL, NULL, 1, false);
    if (st == CT_OK) st = ct_module_append(seq, c);
    ct_module_release(c), c = NULL;
    if (st == CT_OK) st = ct_module_batch_norm2d(&c, d, cout, 1e-5, 0.1, true, true);
    if (st == CT_OK) st = ct_module_append(seq, c);
    ct_module_release(c);
    st = add(m, "downsample", seq, st);
  }
  if (st != CT_OK) ct_module_release(m), m = NULL;
  *out = m;
  return st;
}

/* The ResNet: conv1, bn1, relu, layer1, layer2, avgpool, flatten, fc, in forward order. */
static ct_status resnet(ct_module **out, ct_device *d) {
  static const int k3[2] = {3, 3}, pad1[2] = {1, 1};
  static const int64_t one[2] = {1, 1};
  ct_module *m = NULL, *c = NULL, *layer = NULL;
  ct_status st = ct_module_sequential(&m, NULL, 0);
  if (st == CT_OK) st = ct_module_conv2d(&c, d, 1, 16, k3, NULL, pad1, NULL, 1, false);
  st = add(m, "conv1", c, st), c = NULL;
  if (st == CT_OK) st = ct_module_batch_norm2d(&c, d, 16, 1e-5, 0.1, true, true);
  st = add(m, "bn1", c, st), c = NULL;
  if (st == CT_OK) st = ct_module_relu(&c);
  st = add(m, "relu", c, st), c = NULL;
  for (int l = 1; l <= 2 && st == CT_OK; l++) { /* a layer: a Sequential of one block ("layer2.0") */
    char name[8];
    snprintf(name, sizeof name, "layer%d", l);
    st = ct_module_sequential(&layer, NULL, 0);
    if (st == CT_OK) st = basic_block(&c, d, 16, 16 << (l - 1), l);
    if (st == CT_OK) st = ct_module_append(layer, c);
    ct_module_release(c), c = NULL;
    st = add(m, name, layer, st), layer = NULL;
  }
  if (st == CT_OK) st = ct_module_adaptive_avg_pool2d(&c, one);
  st = add(m, "avgpool", c, st), c = NULL;
  if (st == CT_OK) st = ct_module_flatten(&c, 1, -1);
  st = add(m, "flatten", c, st), c = NULL;
  if (st == CT_OK) st = ct_module_linear(&c, d, 32, 10, true);
  st = add(m, "fc", c, st);
  if (st != CT_OK) ct_module_release(m), m = NULL;
  *out = m;
  return st;
}

/* torchvision's ResNet initialization over the defaults: kaiming_normal_(fan_out, relu) for every
 * conv weight, and zero_init_residual: each block's bn2.weight 0. Weights and biases of batch
 * norms already start at 1 and 0 (PyTorch's defaults). Splits the parameters into decay (conv
 * and linear weights) and no_decay (the rest). */
static ct_status initialize(ct_module *m, ct_tensor **decay, int *nd, ct_tensor **no_decay, int *nn) {
  const char *names[64];
  ct_tensor *p[64];
  int n = 0;
  ct_status st = ct_module_named_parameters(names, p, 64, &n, m);
  *nd = *nn = 0;
  for (int i = 0; i < n && st == CT_OK; i++) {
    const bool weight = strstr(names[i], ".weight") != NULL, conv = ct_tensor_ndim(p[i]) == 4;
    if (conv) st = ct_kaiming_normal_(p[i], 0.0, CT_FAN_OUT, CT_NONLINEARITY_RELU);
    if (st == CT_OK && strstr(names[i], ".bn2.weight")) st = ct_zeros_(p[i]);
    if (weight && ct_tensor_ndim(p[i]) >= 2) decay[(*nd)++] = p[i];
    else no_decay[(*nn)++] = p[i];
  }
  return st;
}

/* Test accuracy in eval mode (running statistics), without recording. */
static ct_status accuracy(double *acc, ct_module *m, const ct_tensor *x, const ct_tensor *y) {
  const bool grad = ct_set_grad_enabled(false);
  ct_tensor *logits = NULL, *hits = NULL;
  ct_scope_begin();
  ct_module_eval(m);
  ct_module_forward(&logits, m, x);
  ct_argmax(&hits, logits, 1, false);
  ct_eq(&hits, hits, y);
  ct_sum(&hits, hits, 0, NULL, false);
  ct_item(acc, hits);
  ct_module_train(m, true);
  *acc /= (double)ct_tensor_shape(y)[0];
  ct_set_grad_enabled(grad);
  return ct_scope_end();
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "examples/data/train_digits.safetensors";
  ct_device *dev;
  if ((argc > 2 ? ct_device_find(&dev, argv[2]) : ct_device_default(&dev)) != CT_OK) return FAIL("choosing a device");
  ct_safetensors *file;
  /* The fixture's f64 entries (PyTorch's losses, unused here) as f32: devices without fp64 too. */
  if (ct_safetensors_load_as(&file, path, dev, CT_F64, CT_F32) != CT_OK) return FAIL("loading the digits");
  ct_tensor *x = NULL, *y = NULL, *tx = NULL, *ty = NULL;
  ct_scope_begin();
  ct_safetensors_get(&x, file, "train.x"), ct_cast(&x, x, CT_F32), ct_mul_scalar(&x, x, 1.0 / 16.0);
  ct_safetensors_get(&tx, file, "test.x"), ct_cast(&tx, tx, CT_F32), ct_mul_scalar(&tx, tx, 1.0 / 16.0);
  ct_safetensors_get(&y, file, "train.y"), ct_safetensors_get(&ty, file, "test.y");
  ct_keep(x), ct_keep(tx), ct_keep(y), ct_keep(ty);
  if (ct_scope_end() != CT_OK) return FAIL("reading the digits");
  printf(PROG ": %lld training and %lld test images on %s\n", (long long)ct_tensor_shape(y)[0],
         (long long)ct_tensor_shape(ty)[0], ct_device_properties(dev)->name);

  ct_manual_seed(0); /* the initialization and nothing else draws from the global generator */
  ct_module *net = NULL;
  ct_tensor *decay[64], *no_decay[64];
  int nd = 0, nn = 0;
  ct_optimizer *opt = NULL;
  ct_lr_scheduler *sched = NULL;
  ct_dataloader *loader = NULL;
  ct_tensor *data[2] = {x, y};
  if (resnet(&net, dev) != CT_OK || initialize(net, decay, &nd, no_decay, &nn) != CT_OK) return FAIL("the model");
  /* torch.optim.AdamW([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0}]) */
  if (ct_adam_new(&opt, decay, nd, 1e-3, 0.9, 0.999, 1e-8, 5e-4, true) != CT_OK ||
      ct_optimizer_add_param_group(opt, no_decay, nn, NAN, 0.0) != CT_OK ||
      ct_dataloader_new(&loader, data, 2, BATCH, true, false, 1234) != CT_OK ||
      ct_lr_one_cycle_new(&sched, opt, 1e-2, EPOCHS * ct_dataloader_num_batches(loader), 0.3, CT_ANNEAL_COS, true,
                          0.85, 0.95, 25.0, 1e4, false) != CT_OK)
    return FAIL("the optimizer, data loader and schedule");

  double acc = 0;
  for (int epoch = 0; epoch < EPOCHS; epoch++) {
    double sum = 0, loss = 0;
    int64_t batches = 0;
    ct_tensor *b[2];
    bool more = true;
    while (more) {
      ct_tensor *logits = NULL, *l = NULL;
      ct_scope_begin();
      ct_dataloader_next(loader, b, &more); /* the batch: the scope's, as every result */
      if (more) {
        ct_module_forward(&logits, net, b[0]);
        ct_cross_entropy(&l, logits, b[1], -100, 0.0, CT_REDUCTION_MEAN);
        ct_optimizer_zero_grad(opt);
        ct_backward(l, NULL);
        ct_optimizer_step(opt);
        ct_lr_scheduler_step(sched);
        ct_item(&loss, l);
      }
      if (ct_scope_end() != CT_OK) return FAIL("a training step");
      sum += more ? loss : 0, batches += more;
    }
    if (accuracy(&acc, net, tx, ty) != CT_OK) return FAIL("the test accuracy");
    printf("epoch %2d  loss %.4f  lr %.5f  test accuracy %.2f%%\n", epoch + 1, sum / (double)batches,
           ct_lr_scheduler_get_last_lr(sched, 0), 100 * acc);
  }
  ct_dataloader_free(loader);
  ct_lr_scheduler_free(sched);
  ct_optimizer_free(opt);
  ct_module_release(net);
  ct_release(x), ct_release(y), ct_release(tx), ct_release(ty);
  ct_safetensors_free(file);
  ct_shutdown();
  if (acc < MIN_ACCURACY) {
    printf(PROG ": test accuracy %.2f%% is below %.0f%%\n", 100 * acc, 100 * MIN_ACCURACY);
    return 1;
  }
  printf(PROG ": test accuracy %.2f%% (at least %.0f%%)\n", 100 * acc, 100 * MIN_ACCURACY);
  return 0;
}
