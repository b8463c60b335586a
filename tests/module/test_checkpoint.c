/* Training checkpoints (ct_checkpoint_save / ct_checkpoint_load, module.h): a run resumed from a
 * checkpoint continues bit-identically (weights, Adam's state, the scheduler's lr, the dropout
 * masks drawn from the global generator), and every failing load leaves the model, the
 * optimizer, the scheduler, the generator and the step as they were.
 *
 * The reference is the same program not interrupted: bit-identical, since both runs execute the
 * same kernels on the same data in the same order (tolerance 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ct_fixture.h"

typedef struct run {
  ct_module *net;
  ct_optimizer *opt;
  ct_lr_scheduler *sched;
} run;

/* Sequential(Linear(8, 16), ReLU, Dropout(0.3), Linear(16, 4)), AdamW, cosine lrs over 20 steps;
 * the initial weights from a fixed seed. */
static run make_run(ct_device *d) {
  run r = {0};
  ct_module *layers[4] = {0};
  ct_tensor *params[8];
  int n = 0;
  ct_manual_seed(7);
  ck_assert_ct_ok(ct_module_linear(&layers[0], d, 8, 16, true));
  ck_assert_ct_ok(ct_module_relu(&layers[1]));
  ck_assert_ct_ok(ct_module_dropout(&layers[2], 0.3));
  ck_assert_ct_ok(ct_module_linear(&layers[3], d, 16, 4, true));
  ck_assert_ct_ok(ct_module_sequential(&r.net, layers, 4));
  for (int i = 0; i < 4; i++) ct_module_release(layers[i]);
  ck_assert_ct_ok(ct_module_parameters(params, 8, &n, r.net));
  ck_assert_ct_ok(ct_adam_new(&r.opt, params, n, 1e-2, 0.9, 0.999, 1e-8, 0.01, true));
  ck_assert_ct_ok(ct_lr_cosine_new(&r.sched, r.opt, 20, 1e-4));
  return r;
}

static void free_run(run *r) {
  ct_lr_scheduler_free(r->sched);
  ct_optimizer_free(r->opt);
  ct_module_release(r->net);
}

/* One training step on the fixed batch; the loss. */
static double step(run *r, const ct_tensor *x, const ct_tensor *y) {
  ct_tensor *logits = NULL, *loss = NULL;
  double v = 0;
  ck_assert_ct_ok(ct_module_forward(&logits, r->net, x));
  ck_assert_ct_ok(ct_cross_entropy(&loss, logits, y, -100, 0.0, CT_REDUCTION_MEAN));
  ck_assert_ct_ok(ct_optimizer_zero_grad(r->opt));
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ck_assert_ct_ok(ct_optimizer_step(r->opt));
  ck_assert_ct_ok(ct_lr_scheduler_step(r->sched));
  ck_assert_ct_ok(ct_item(&v, loss));
  ct_release(loss);
  ct_release(logits);
  return v;
}

static void batch(ct_device *d, ct_tensor **x, ct_tensor **y) {
  const int64_t xs[2] = {12, 8};
  ck_assert_ct_ok(ct_randn_seeded(x, d, CT_F32, 2, xs, 3, 0));
  ct_tensor *perm = NULL;
  ck_assert_ct_ok(ct_randperm_seeded(&perm, d, 12, 5, 0)); /* labels 0..11 -> 0..3 */
  ck_assert_ct_ok(ct_remainder_scalar(y, perm, 4));
  ct_release(perm);
}

static void temp_path(char *path, size_t size) {
  snprintf(path, size, "/tmp/ct_checkpoint_XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
}

static void assert_same_state(const run *a, const run *b) {
  ct_safetensors *sa = NULL, *sb = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&sa, a->net));
  ck_assert_ct_ok(ct_module_state_dict(&sb, b->net));
  ck_assert_ct_ok(ct_optimizer_save(a->opt, sa));
  ck_assert_ct_ok(ct_optimizer_save(b->opt, sb));
  ck_assert_uint_eq(ct_safetensors_count(sa), ct_safetensors_count(sb));
  for (size_t i = 0; i < ct_safetensors_count(sa); i++) {
    ct_tensor *ta = NULL, *tb = NULL;
    ck_assert_ct_ok(ct_safetensors_at(&ta, sa, i));
    ck_assert_ct_ok(ct_safetensors_get(&tb, sb, ct_safetensors_name(sa, i)));
    ct_test_assert_close(tb, ta, 0, ct_safetensors_name(sa, i));
    ct_release(ta);
    ct_release(tb);
  }
  ck_assert(ct_optimizer_get_lr(a->opt) == ct_optimizer_get_lr(b->opt));
  ck_assert_int_eq(ct_lr_scheduler_last_epoch(a->sched), ct_lr_scheduler_last_epoch(b->sched));
  ct_safetensors_free(sa);
  ct_safetensors_free(sb);
}

START_TEST(resume_is_bit_identical) {
  ct_device *d = ct_test_device();
  ct_tensor *x = NULL, *y = NULL;
  char path[64];
  double la[10], lb[10];
  int64_t at = -1;
  batch(d, &x, &y);
  temp_path(path, sizeof path);
  run a = make_run(d), b = make_run(d);
  for (int s = 0; s < 10; s++) {
    if (s == 5) ck_assert_ct_ok(ct_checkpoint_save(a.net, a.opt, a.sched, s, path));
    la[s] = step(&a, x, y);
  }
  ct_manual_seed(99); /* the load restores the generator */
  ck_assert_ct_ok(ct_checkpoint_load(&at, b.net, b.opt, b.sched, path));
  ck_assert_int_eq(at, 5);
  for (int s = 5; s < 10; s++) {
    lb[s] = step(&b, x, y);
    ck_assert_msg(la[s] == lb[s], "step %d: loss %.9g uninterrupted, %.9g resumed", s, la[s], lb[s]);
  }
  assert_same_state(&a, &b);
  /* The file is the model's state_dict too: a module alone loads it (not strictly: the
   * optimizer's entries are not the model's). */
  run c = make_run(d);
  ck_assert_ct_ok(ct_module_load_state_dict(c.net, path, false));
  ck_assert_ptr_nonnull(strstr(ct_module_load_report(c.net), "unexpected: optim.0.exp_avg"));
  /* Without optimizer and scheduler: only the model and the step. */
  ck_assert_ct_ok(ct_checkpoint_save(a.net, NULL, NULL, 10, path));
  ck_assert_ct_ok(ct_checkpoint_load(&at, c.net, NULL, NULL, path));
  ck_assert_int_eq(at, 10);
  /* ... and the optimizer's state is then missing for one that asks for it. */
  ck_assert_int_eq(ct_checkpoint_load(&at, c.net, c.opt, NULL, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("optim.kind");
  unlink(path);
  free_run(&a), free_run(&b), free_run(&c);
  ct_release(x), ct_release(y);
}
END_TEST

/* A load that fails changes nothing: the model, the optimizer (lr and state), the scheduler, the
 * generator and *step are the values from before the call. */
static void assert_untouched(const run *r, const run *snapshot, uint64_t seed, uint64_t offset, int64_t at) {
  uint64_t s = 0, o = 0;
  assert_same_state(r, snapshot);
  ck_assert_ct_ok(ct_rng_get_state(&s, &o));
  ck_assert_uint_eq(s, seed);
  ck_assert_uint_eq(o, offset);
  ck_assert_int_eq(at, -1);
}

START_TEST(failed_loads_change_nothing) {
  ct_device *d = ct_test_device();
  ct_tensor *x = NULL, *y = NULL;
  char path[64];
  int64_t at = -1;
  uint64_t seed = 0, offset = 0;
  batch(d, &x, &y);
  temp_path(path, sizeof path);
  run a = make_run(d), b = make_run(d), snap = make_run(d);
  for (int s = 0; s < 3; s++) step(&a, x, y);
  ck_assert_ct_ok(ct_checkpoint_save(a.net, a.opt, a.sched, 3, path));
  /* b and snap take one step each from the same start: equal, and unlike the file */
  ct_manual_seed(11);
  step(&b, x, y);
  ct_manual_seed(11);
  step(&snap, x, y);
  ck_assert_ct_ok(ct_rng_get_state(&seed, &offset));

  /* The scheduler of another kind: the optimizer, loaded first, is put back. */
  ct_lr_scheduler *other = NULL;
  ck_assert_ct_ok(ct_lr_step_new(&other, b.opt, 2, 0.5));
  ck_assert_int_eq(ct_checkpoint_load(&at, b.net, b.opt, other, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_checkpoint_load");
  ck_assert_error_contains("scheduler");
  ct_lr_scheduler_free(other);
  ck_assert_ct_ok(ct_optimizer_set_lr(b.opt, ct_optimizer_get_lr(snap.opt))); /* the new one set it */
  assert_untouched(&b, &snap, seed, offset, at);

  /* A model of another shape (strict): checked before the optimizer and scheduler are read;
   * the model's load report stays as it was. */
  const char *report_before = ct_module_load_report(b.net);
  ct_module *wide = NULL, *layers[2] = {0};
  ck_assert_ct_ok(ct_module_linear(&layers[0], d, 8, 17, true));
  ck_assert_ct_ok(ct_module_linear(&layers[1], d, 17, 4, true));
  ck_assert_ct_ok(ct_module_sequential(&wide, layers, 2));
  ct_module_release(layers[0]), ct_module_release(layers[1]);
  ck_assert_ct_ok(ct_rng_get_state(&seed, &offset)); /* their initialization drew numbers */
  ck_assert_int_eq(ct_checkpoint_load(&at, wide, b.opt, b.sched, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("shape mismatch");
  assert_untouched(&b, &snap, seed, offset, at);
  ck_assert_str_eq(ct_module_load_report(b.net), report_before);
  ct_module_release(wide);

  /* Metadata that does not parse, and a file that is not a checkpoint. */
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&st, b.net));
  ck_assert_ct_ok(ct_safetensors_save(st, path));
  ck_assert_int_eq(ct_checkpoint_load(&at, b.net, NULL, NULL, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("train.step");
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "train.step", "-3"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "train.rng_seed", "1"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "train.rng_offset", "1"));
  ck_assert_ct_ok(ct_safetensors_save(st, path));
  ck_assert_int_eq(ct_checkpoint_load(&at, b.net, b.opt, b.sched, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("\"-3\"");
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "train.step", "3"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "train.rng_offset", "-1"));
  ck_assert_ct_ok(ct_safetensors_save(st, path));
  ck_assert_int_eq(ct_checkpoint_load(&at, b.net, NULL, NULL, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("train.rng_offset");
  ct_safetensors_free(st);
  assert_untouched(&b, &snap, seed, offset, at);
  ck_assert_int_ne(ct_checkpoint_load(&at, b.net, NULL, NULL, "/nonexistent/ckpt.safetensors"), CT_OK);
  ck_assert_int_eq(at, -1);
  unlink(path);
  free_run(&a), free_run(&b), free_run(&snap);
  ct_release(x), ct_release(y);
}
END_TEST

static ct_status identity(ct_tensor **y, ct_module *self, const ct_tensor *x, void *user) {
  (void)self, (void)user;
  return ct_contiguous(y, x);
}

/* A learning rate decayed into the subnormals (ExponentialLR stepped long enough) is written
 * with 17 digits and read back exactly (strtod flags it ERANGE; only overflow is refused). */
START_TEST(subnormal_values_round_trip) {
  ct_device *d = ct_test_device();
  run r = make_run(d);
  char path[64];
  temp_path(path, sizeof path);
  ck_assert_ct_ok(ct_optimizer_set_lr(r.opt, 8.4879831638610893e-314));
  ck_assert_ct_ok(ct_checkpoint_save(r.net, r.opt, NULL, 1, path));
  ck_assert_ct_ok(ct_optimizer_set_lr(r.opt, 1.0));
  ck_assert_ct_ok(ct_checkpoint_load(NULL, r.net, r.opt, NULL, path));
  ck_assert(ct_optimizer_get_lr(r.opt) == 8.4879831638610893e-314);
  unlink(path);
  free_run(&r);
}
END_TEST

START_TEST(bad_arguments) {
  ct_device *d = ct_test_device();
  run r = make_run(d);
  char path[64];
  int64_t at = -1;
  temp_path(path, sizeof path);
  ck_assert_int_eq(ct_checkpoint_save(NULL, NULL, NULL, 0, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ct_checkpoint_save(r.net, NULL, NULL, 0, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ct_checkpoint_save(r.net, NULL, NULL, -1, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("step is -1");
  ck_assert_int_eq(ct_checkpoint_load(&at, NULL, NULL, NULL, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ct_checkpoint_load(&at, r.net, NULL, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  /* A child named "optim" would collide with the optimizer's entries. */
  ct_module *outer = NULL, *lin = NULL;
  ck_assert_ct_ok(ct_module_custom(&outer, "Outer", identity, NULL, NULL));
  ck_assert_ct_ok(ct_module_linear(&lin, d, 2, 2, false));
  ck_assert_ct_ok(ct_module_add_child(outer, "optim", lin));
  ck_assert_int_eq(ct_checkpoint_save(outer, NULL, NULL, 0, path), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("optim.weight");
  /* NULL step: the rest loads. */
  ck_assert_ct_ok(ct_checkpoint_save(r.net, r.opt, r.sched, 4, path));
  ck_assert_ct_ok(ct_checkpoint_load(NULL, r.net, r.opt, r.sched, path));
  unlink(path);
  ct_module_release(lin);
  ct_module_release(outer);
  free_run(&r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("module-checkpoint");
  TCase *tc = ct_test_case(s, "checkpoint", 300);
  tcase_add_test(tc, resume_is_bit_identical);
  tcase_add_test(tc, failed_loads_change_nothing);
  tcase_add_test(tc, subnormal_values_round_trip);
  tcase_add_test(tc, bad_arguments);
  return ct_test_run(s);
}
