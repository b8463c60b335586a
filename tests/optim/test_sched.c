/* Learning-rate schedulers (include/cltensor/sched.h) against PyTorch's lr sequences in
 * data/sched_ref.safetensors (made by make_sched_fixtures.py beside this file: 1000 steps of
 * each schedule over two parameter groups), scheduler checkpoints, and the optimizers'
 * parameter groups (optim.h): per-group lr and weight decay, checkpoints with groups.
 *
 * Tolerance: the schedulers repeat PyTorch's double expressions in Python's order, so the
 * sequences must agree to 1e-12 relative (and 1e-300 absolute for the zeros); the test also
 * requires every value of the purely multiplicative schedules (step, multistep, exponential,
 * linear, plateau) to be bit-identical, where no libm call is involved. The schedulers'
 * tests build no kernel program (the optimizer steps have no gradients, as in the fixture
 * script); the parameter-group tests build kernels/optim.cl for f32. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ct_fixture.h"
#include "ct_test.h"
#include "optim/optim.h"
#include "tensor/graph.h"

enum { STEPS = 1000 };

static const char *fixture_path(void) {
  static char path[1024];
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/tests/optim/data/sched_ref.safetensors", root ? root : ".");
  return path;
}

/* The fixture's values (all f64) are read on the host, exactly, on any device. */
static double *fx_doubles(const char *name, int64_t n) {
  int64_t got = 0;
  double *h = ct_test_st_f64(fixture_path(), name, &got);
  ck_assert_int_eq(got, n);
  return h;
}

/* A leaf of n zeros that requires grad. */
static ct_tensor *leaf(ct_device *d, int64_t n) {
  float z[8] = {0};
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, &n, z));
  ck_assert_ct_ok(ct_set_requires_grad(t, true));
  return t;
}

/* The fixture script's optimizer: SGD(lr 0.1) over [p0] and a group [p1] with lr 0.01 (its
 * OPTIMIZERS for the one-cycle schedules that cycle the momentum). */
static ct_optimizer *optimizer_for(const char *name, ct_tensor **ps) {
  ct_optimizer *o = NULL;
  if (!strcmp(name, "one_cycle_mom")) ck_assert_ct_ok(ct_sgd_new(&o, &ps[0], 1, 0.1, 0.9, 0, false));
  else if (!strcmp(name, "one_cycle_adam3"))
    ck_assert_ct_ok(ct_adam_new(&o, &ps[0], 1, 0.1, 0.9, 0.999, 1e-8, 0, false));
  else ck_assert_ct_ok(ct_sgd_new(&o, &ps[0], 1, 0.1, 0, 0, false));
  ck_assert_ct_ok(ct_optimizer_add_param_group(o, &ps[1], 1, 0.01, NAN));
  return o;
}

static ct_optimizer *two_groups(ct_tensor **ps) { return optimizer_for("", ps); }

/* The optimizer's momentum: SGD's, or Adam's beta1 (internal fields: no public getter). */
static double momentum_of(const ct_optimizer *o) { return o->kind == CT__OPTIM_SGD ? o->momentum : o->beta1; }

/* The schedulers of make_sched_fixtures.py's SCHEDULES, with the same arguments. */
static ct_lr_scheduler *make_sched(const char *name, ct_optimizer *o) {
  ct_lr_scheduler *s = NULL;
  if (!strcmp(name, "step")) ck_assert_ct_ok(ct_lr_step_new(&s, o, 30, 0.5));
  else if (!strcmp(name, "multistep"))
    ck_assert_ct_ok(ct_lr_multistep_new(&s, o, (const int64_t[]){700, 100, 300, 300}, 4, 0.3));
  else if (!strcmp(name, "exponential")) ck_assert_ct_ok(ct_lr_exponential_new(&s, o, 0.995));
  else if (!strcmp(name, "cosine")) ck_assert_ct_ok(ct_lr_cosine_new(&s, o, 300, 1e-4));
  else if (!strcmp(name, "cosine_full")) ck_assert_ct_ok(ct_lr_cosine_new(&s, o, 1000, 0.0));
  else if (!strcmp(name, "linear")) ck_assert_ct_ok(ct_lr_linear_new(&s, o, 0.1, 1.0, 200));
  else if (!strcmp(name, "linear_down")) ck_assert_ct_ok(ct_lr_linear_new(&s, o, 1.0, 0.0, 1000));
  else if (!strcmp(name, "one_cycle"))
    ck_assert_ct_ok(ct_lr_one_cycle_new(&s, o, 0.5, 1000, 0.3, CT_ANNEAL_COS, false, 0.85, 0.95, 25.0, 1e4, false));
  else if (!strcmp(name, "one_cycle3"))
    ck_assert_ct_ok(ct_lr_one_cycle_new(&s, o, 0.2, 1000, 0.25, CT_ANNEAL_LINEAR, false, 0.85, 0.95, 10.0, 100.0, true));
  else if (!strcmp(name, "one_cycle_mom")) /* PyTorch's defaults */
    ck_assert_ct_ok(ct_lr_one_cycle_new(&s, o, 0.3, 1000, 0.3, CT_ANNEAL_COS, true, 0.85, 0.95, 25.0, 1e4, false));
  else if (!strcmp(name, "one_cycle_adam3"))
    ck_assert_ct_ok(ct_lr_one_cycle_new(&s, o, 0.01, 1000, 0.2, CT_ANNEAL_LINEAR, true, 0.8, 0.9, 25.0, 1e4, true));
  else if (!strcmp(name, "sequential")) {
    ct_lr_scheduler *w = NULL, *c = NULL;
    ck_assert_ct_ok(ct_lr_linear_new(&w, o, 0.01, 1.0, 100));
    ck_assert_ct_ok(ct_lr_cosine_new(&c, o, 900, 1e-5));
    ck_assert_ct_ok(ct_lr_sequential_new(&s, o, (ct_lr_scheduler *[]){w, c}, 2, (const int64_t[]){100}));
  } else if (!strcmp(name, "sequential3")) {
    ct_lr_scheduler *a = NULL, *b = NULL, *c = NULL;
    ck_assert_ct_ok(ct_lr_exponential_new(&a, o, 0.99));
    ck_assert_ct_ok(ct_lr_step_new(&b, o, 50, 0.5));
    ck_assert_ct_ok(ct_lr_one_cycle_new(&c, o, 0.2, 500, 0.3, CT_ANNEAL_COS, false, 0.85, 0.95, 25.0, 1e4, false));
    ck_assert_ct_ok(ct_lr_sequential_new(&s, o, (ct_lr_scheduler *[]){a, b, c}, 3, (const int64_t[]){200, 500}));
  } else if (!strcmp(name, "plateau_min"))
    ck_assert_ct_ok(ct_lr_plateau_new(&s, o, CT_PLATEAU_MIN, 0.5, 5, 1e-3, CT_THRESHOLD_REL, 3, 1e-4, 1e-8));
  else if (!strcmp(name, "plateau_max"))
    ck_assert_ct_ok(ct_lr_plateau_new(&s, o, CT_PLATEAU_MAX, 0.7, 3, 0.01, CT_THRESHOLD_ABS, 0, 0.0, 1e-8));
  ck_assert_ptr_nonnull(s);
  return s;
}

/* One step of the training loop of the fixture script: optimizer (nothing to do: no
 * gradients), then scheduler; the plateau ones with the metric (reversed for max). */
static void step(ct_optimizer *o, ct_lr_scheduler *s, const char *name, const double *metric, int t) {
  ck_assert_ct_ok(ct_optimizer_step(o));
  if (!strncmp(name, "plateau", 7))
    ck_assert_ct_ok(ct_lr_scheduler_step_metric(s, strstr(name, "max") ? metric[STEPS - 1 - t] : metric[t]));
  else
    ck_assert_ct_ok(ct_lr_scheduler_step(s));
}

static const char *const NAMES[] = {"step", "multistep", "exponential", "cosine", "cosine_full", "linear",
                                    "linear_down", "one_cycle", "one_cycle3", "one_cycle_mom", "one_cycle_adam3",
                                    "sequential", "sequential3", "plateau_min", "plateau_max"};

static bool exact_kind(const char *name) {
  return strncmp(name, "cosine", 6) != 0 && strncmp(name, "one_cycle", 9) != 0 && strncmp(name, "sequential", 10) != 0;
}

static void check_value(const char *name, int e, int g, double got, double want, bool exact, int *bit_equal) {
  if (memcmp(&got, &want, sizeof got) == 0) {
    (*bit_equal)++;
    return;
  }
  ck_assert_msg(!exact, "%s: lr of group %d at step %d is %.17g, PyTorch %.17g (expected bit-identical)", name, g, e,
                got, want);
  ck_assert_msg(fabs(got - want) <= fmax(1e-12 * fabs(want), 1e-300),
                "%s: lr of group %d at step %d is %.17g, PyTorch %.17g", name, g, e, got, want);
}

/* Every schedule's 1001 lrs of both groups, from the optimizer and from get_last_lr. */
START_TEST(schedules_match_pytorch) {
  ct_device *d = ct_test_device();
  double *metric = fx_doubles("metric", STEPS);
  int total = 0, bit_equal = 0;
  for (size_t k = 0; k < sizeof NAMES / sizeof *NAMES; k++) {
    const char *name = NAMES[k];
    char key[64];
    snprintf(key, sizeof key, "%s.lr", name);
    double *ref = fx_doubles(key, (STEPS + 1) * 2), *mref = NULL;
    bool cycles = !strcmp(name, "one_cycle_mom") || !strcmp(name, "one_cycle_adam3");
    if (cycles) {
      snprintf(key, sizeof key, "%s.momentum", name);
      mref = fx_doubles(key, (STEPS + 1) * 2);
    }
    ct_tensor *ps[2] = {leaf(d, 2), leaf(d, 3)};
    ct_optimizer *o = optimizer_for(name, ps);
    ct_lr_scheduler *s = make_sched(name, o);
    for (int e = 0; e <= STEPS; e++) {
      if (e > 0) step(o, s, name, metric, e - 1);
      ck_assert_int_eq(ct_lr_scheduler_last_epoch(s), e);
      for (int g = 0; g < 2; g++) {
        double got = ct_optimizer_get_group_lr(o, g);
        check_value(name, e, g, got, ref[2 * e + g], exact_kind(name), &bit_equal);
        ck_assert_msg(ct_lr_scheduler_get_last_lr(s, g) == got, "%s: get_last_lr differs", name);
        total++;
        if (cycles) { /* the momentum, the same for both groups */
          check_value(name, e, g, momentum_of(o), mref[2 * e + g], false, &bit_equal);
          total++;
        }
      }
    }
    ct_lr_scheduler_free(s);
    ct_optimizer_free(o);
    ct_release(ps[0]);
    ct_release(ps[1]);
    free(ref);
    free(mref);
  }
  /* Bit-identical also where cos is involved, with glibc's cos under both (a note, not an
   * assertion: another C library may round cos differently). */
  fprintf(stderr, "# schedules: %d of %d values (lrs, momenta) bit-identical to PyTorch's\n", bit_equal, total);
  free(metric);
}
END_TEST

/* A second scheduler on the same optimizer starts from the groups' initial_lr (PyTorch's
 * setdefault), and a one-cycle scheduler past total_steps refuses, changing nothing. */
START_TEST(schedulers_share_initial_lr_and_refuse_overrun) {
  ct_device *d = ct_test_device();
  ct_tensor *ps[2] = {leaf(d, 2), leaf(d, 3)};
  ct_optimizer *o = two_groups(ps);
  ct_lr_scheduler *a = NULL, *b = NULL;
  ck_assert_ct_ok(ct_lr_exponential_new(&a, o, 0.5));
  ck_assert_ct_ok(ct_lr_scheduler_step(a));
  ck_assert_double_eq(ct_optimizer_get_group_lr(o, 0), 0.05);
  /* Cosine's base is the initial 0.1, not the current 0.05: its special step adds
   * (base - eta_min)(1 - cos(pi / T)) / 2 at e = T + 1 = 2. */
  ck_assert_ct_ok(ct_lr_cosine_new(&b, o, 1, 0.0));
  ck_assert_ct_ok(ct_lr_scheduler_step(b)); /* e = 1: (1 + cos(pi)) / (1 + cos(0)) * lr = 0 */
  ck_assert_double_eq(ct_optimizer_get_group_lr(o, 0), 0.0);
  ck_assert_ct_ok(ct_lr_scheduler_step(b)); /* e = 2: 0 + 0.1 (1 - cos(pi)) / 2 = 0.1 */
  ck_assert_double_eq(ct_optimizer_get_group_lr(o, 0), 0.1);
  ct_lr_scheduler_free(a);
  ct_lr_scheduler_free(b);

  ct_lr_scheduler *c = NULL;
  ck_assert_ct_ok(ct_lr_one_cycle_new(&c, o, 1.0, 3, 0.5, CT_ANNEAL_COS, false, 0.85, 0.95, 4.0, 10.0, false));
  for (int i = 0; i < 2; i++) ck_assert_ct_ok(ct_lr_scheduler_step(c));
  /* At total_steps - 1: min = max / div / final_div (the same for every group). */
  ck_assert_double_eq_tol(ct_optimizer_get_group_lr(o, 1), 0.025, 1e-15);
  ck_assert_ct_ok(ct_lr_scheduler_step(c)); /* e = total_steps: PyTorch allows it too */
  double last = ct_optimizer_get_group_lr(o, 1);
  ck_assert_ct_status(ct_lr_scheduler_step(c), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("tried to step 4 times; the one-cycle scheduler's total_steps is 3");
  ck_assert_int_eq(ct_lr_scheduler_last_epoch(c), 3);
  ck_assert_double_eq(ct_optimizer_get_group_lr(o, 1), last);
  ct_lr_scheduler_free(c);
  ct_optimizer_free(o);
  ct_release(ps[0]);
  ct_release(ps[1]);
}
END_TEST

/* Stopping after 400 steps, saving optimizer and scheduler, and resuming into new objects
 * gives the same lrs as the run that never stopped, to the last bit. */
START_TEST(scheduler_checkpoint_resume) {
  ct_device *d = ct_test_device();
  double *metric = fx_doubles("metric", STEPS);
  const char *names[] = {"cosine", "linear", "one_cycle3", "one_cycle_adam3", "sequential3", "plateau_min"};
  for (int k = 0; k < 6; k++) {
    ct_tensor *ps[2] = {leaf(d, 2), leaf(d, 3)};
    ct_optimizer *o = optimizer_for(names[k], ps), *o2 = optimizer_for(names[k], ps);
    ct_lr_scheduler *s = make_sched(names[k], o);
    for (int t = 0; t < 400; t++) step(o, s, names[k], metric, t);
    ct_safetensors *ck = NULL;
    ck_assert_ct_ok(ct_safetensors_new(&ck));
    ck_assert_ct_ok(ct_optimizer_save(o, ck));
    ck_assert_ct_ok(ct_lr_scheduler_save(s, ck));
    /* Resume: build as before (the constructor takes its first step), then load both. */
    ct_lr_scheduler *s2 = make_sched(names[k], o2);
    ck_assert_ct_ok(ct_optimizer_load(o2, ck));
    ck_assert_ct_ok(ct_lr_scheduler_load(s2, ck));
    ck_assert_int_eq(ct_lr_scheduler_last_epoch(s2), 400);
    for (int t = 400; t < STEPS; t++) {
      step(o, s, names[k], metric, t);
      step(o2, s2, names[k], metric, t);
      for (int g = 0; g < 2; g++) {
        double a = ct_optimizer_get_group_lr(o, g), b = ct_optimizer_get_group_lr(o2, g);
        ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "%s: resumed lr %.17g != %.17g at step %d", names[k], b, a, t);
      }
      ck_assert(momentum_of(o) == momentum_of(o2));
    }
    /* Another kind refuses, naming both. */
    ct_lr_scheduler *other = NULL;
    ck_assert_ct_ok(ct_lr_step_new(&other, o2, 10, 0.5));
    ck_assert_ct_status(ct_lr_scheduler_load(other, ck), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("scheduler but this one is step");
    ct_lr_scheduler_free(other);
    ct_safetensors_free(ck);
    ct_lr_scheduler_free(s);
    ct_lr_scheduler_free(s2);
    ct_optimizer_free(o);
    ct_optimizer_free(o2);
    ct_release(ps[0]);
    ct_release(ps[1]);
  }
  free(metric);
}
END_TEST

START_TEST(scheduler_errors) {
  ct_device *d = ct_test_device();
  ct_tensor *ps[2] = {leaf(d, 2), leaf(d, 3)};
  ct_optimizer *o = two_groups(ps);
  ct_lr_scheduler *s = (ct_lr_scheduler *)1;
  ck_assert_ct_status(ct_lr_step_new(&s, NULL, 1, 0.5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(s);
  ck_assert_ct_status(ct_lr_step_new(&s, o, 0, 0.5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("step_size is 0");
  ck_assert_ct_status(ct_lr_exponential_new(&s, o, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("gamma is -1");
  ck_assert_ct_status(ct_lr_cosine_new(&s, o, 0, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("T_max is 0");
  ck_assert_ct_status(ct_lr_linear_new(&s, o, 0, 1, 5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("start_factor is 0 (expected 0 < start_factor <= 1)");
  ck_assert_ct_status(ct_lr_linear_new(&s, o, 0.5, 1.5, 5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_lr_multistep_new(&s, o, NULL, 2, 0.5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_lr_one_cycle_new(&s, o, 0.1, 0, 0.3, CT_ANNEAL_COS, false, 0.85, 0.95, 25, 1e4, false),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("total_steps is 0");
  ck_assert_ct_status(ct_lr_one_cycle_new(&s, o, 0.1, 10, 1.5, CT_ANNEAL_COS, false, 0.85, 0.95, 25, 1e4, false),
                      CT_ERR_INVALID_ARGUMENT);
  /* Cycling the momentum of an SGD made without momentum: refused (no momentum buffers). */
  ck_assert_ct_status(ct_lr_one_cycle_new(&s, o, 0.1, 10, 0.3, CT_ANNEAL_COS, true, 0.85, 0.95, 25, 1e4, false),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("cycle_momentum needs an SGD optimizer made with momentum > 0");
  ck_assert_ct_status(ct_lr_plateau_new(&s, o, CT_PLATEAU_MIN, 1.0, 10, 1e-4, CT_THRESHOLD_REL, 0, 0, 1e-8),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("factor is 1");
  ck_assert_ptr_null(s);
  /* A refused scheduler leaves the optimizer as it was (no initial_lr, no lr change). */
  ck_assert_double_eq(ct_optimizer_get_group_lr(o, 0), 0.1);
  ck_assert_ct_ok(ct_lr_plateau_new(&s, o, CT_PLATEAU_MIN, 0.1, 10, 1e-4, CT_THRESHOLD_REL, 0, 0, 1e-8));
  ck_assert_ct_status(ct_lr_scheduler_step(s), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_lr_scheduler_step_metric");
  /* A plateau scheduler cannot join a sequence; the caller keeps its schedulers on failure. */
  ct_lr_scheduler *w = NULL, *seq = NULL;
  ck_assert_ct_ok(ct_lr_linear_new(&w, o, 0.5, 1.0, 4));
  ck_assert_ct_status(ct_lr_sequential_new(&seq, o, (ct_lr_scheduler *[]){w, s}, 2, (const int64_t[]){4}),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("schedulers[1] is a plateau scheduler");
  ck_assert_ct_status(ct_lr_sequential_new(&seq, o, (ct_lr_scheduler *[]){w, w}, 2, (const int64_t[]){4}),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(seq);
  ct_lr_scheduler_free(w);
  ct_lr_scheduler_free(s);
  ck_assert_ct_ok(ct_lr_step_new(&s, o, 3, 0.5));
  ck_assert_ct_status(ct_lr_scheduler_step_metric(s, 1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert(isnan(ct_lr_scheduler_get_last_lr(s, 2)));
  ck_assert(isnan(ct_lr_scheduler_get_last_lr(NULL, 0)));
  ck_assert_int_eq(ct_lr_scheduler_last_epoch(NULL), -1);
  ct_lr_scheduler_free(s);
  ct_lr_scheduler_free(NULL);
  ct_optimizer_free(o);
  ct_release(ps[0]);
  ct_release(ps[1]);
}
END_TEST

/* ---- parameter groups ---- */

static ct_tensor *values(ct_device *d, int64_t n, float seed) {
  float v[16];
  for (int64_t i = 0; i < n; i++) v[i] = seed * (float)(i + 1) - 0.3f * (float)(i * i % 5);
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 1, &n, v));
  return t;
}

static ct_tensor *param_like(ct_device *d, int64_t n, float seed) {
  ct_tensor *t = values(d, n, seed);
  ck_assert_ct_ok(ct_set_requires_grad(t, true));
  return t;
}

static void set_grad(ct_device *d, ct_tensor *p, float seed) {
  ck_assert_ct_ok(ct_grad_clear(p));
  p->grad = values(d, ct_numel(p), seed);
}

static void assert_same(const ct_tensor *a, const ct_tensor *b, const char *what) {
  float x[16], y[16];
  ck_assert_ct_ok(ct_to_host(a, x, sizeof x));
  ck_assert_ct_ok(ct_to_host(b, y, sizeof y));
  ck_assert_msg(memcmp(x, y, sizeof(float) * (size_t)ct_numel(a)) == 0, "%s: not bit-identical", what);
}

/* AdamW over a decay group and a no-decay group with its own lr steps each parameter exactly as
 * a separate optimizer with that group's lr and weight decay (PyTorch's groups are independent
 * but for the shared hyperparameters); ct_optimizer_set_group_lr reaches only its group. */
START_TEST(param_groups_step_with_their_own_hyperparameters) {
  ct_device *d = ct_test_device();
  ct_tensor *w = param_like(d, 6, 0.5f), *b = param_like(d, 3, -0.25f);
  ct_tensor *w2 = param_like(d, 6, 0.5f), *b2 = param_like(d, 3, -0.25f);
  ct_optimizer *o = NULL, *ow = NULL, *ob = NULL;
  ck_assert_ct_ok(ct_adam_new(&o, &w, 1, 1e-2, 0.9, 0.999, 1e-8, 0.1, true));
  ck_assert_ct_ok(ct_optimizer_add_param_group(o, &b, 1, NAN, 0.0)); /* lr: the default */
  ck_assert_int_eq(ct_optimizer_num_groups(o), 2);
  ck_assert_int_eq(ct_optimizer_group_size(o, 1), 1);
  ck_assert_double_eq(ct_optimizer_get_group_lr(o, 1), 1e-2);
  ck_assert_double_eq(ct_optimizer_get_group_weight_decay(o, 1), 0.0);
  ck_assert_double_eq(ct_optimizer_get_group_weight_decay(o, 0), 0.1);
  ck_assert_ct_ok(ct_adam_new(&ow, &w2, 1, 1e-2, 0.9, 0.999, 1e-8, 0.1, true));
  ck_assert_ct_ok(ct_adam_new(&ob, &b2, 1, 1e-2, 0.9, 0.999, 1e-8, 0.0, true));
  for (int k = 0; k < 4; k++) {
    if (k == 2) {
      ck_assert_ct_ok(ct_optimizer_set_group_lr(o, 1, 3e-3));
      ck_assert_ct_ok(ct_optimizer_set_lr(ob, 3e-3));
      ck_assert_double_eq(ct_optimizer_get_group_lr(o, 0), 1e-2);
    }
    set_grad(d, w, 0.1f * (float)(k + 1));
    set_grad(d, w2, 0.1f * (float)(k + 1));
    set_grad(d, b, -0.2f * (float)(k + 1));
    set_grad(d, b2, -0.2f * (float)(k + 1));
    ck_assert_ct_ok(ct_optimizer_step(o));
    ck_assert_ct_ok(ct_optimizer_step(ow));
    ck_assert_ct_ok(ct_optimizer_step(ob));
  }
  assert_same(w, w2, "decay group");
  assert_same(b, b2, "no-decay group");

  /* Checkpoint: groups round-trip (lr, weight decay), and a one-group optimizer refuses. */
  ct_safetensors *ck = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&ck));
  ck_assert_ct_ok(ct_optimizer_save(o, ck));
  ck_assert_str_eq(ct_safetensors_metadata_get(ck, "optim.groups"), "2");
  ct_optimizer *r = NULL;
  ck_assert_ct_ok(ct_adam_new(&r, &w2, 1, 0.5, 0.9, 0.999, 1e-8, 0.5, true));
  ck_assert_ct_status(ct_optimizer_load(r, ck), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("holds 2 parameters' state but this optimizer has 1");
  ck_assert_ct_ok(ct_optimizer_add_param_group(r, &b2, 1, 0.5, 0.5));
  ck_assert_ct_ok(ct_optimizer_load(r, ck));
  ck_assert_double_eq(ct_optimizer_get_group_lr(r, 0), 1e-2);
  ck_assert_double_eq(ct_optimizer_get_group_lr(r, 1), 3e-3);
  ck_assert_double_eq(ct_optimizer_get_group_weight_decay(r, 0), 0.1);
  ck_assert_double_eq(ct_optimizer_get_group_weight_decay(r, 1), 0.0);
  /* Groups of other sizes: refused, naming the group. */
  ct_optimizer *q = NULL;
  ck_assert_ct_ok(ct_adam_new(&q, (ct_tensor *[]){w2, b2}, 2, 0.5, 0.9, 0.999, 1e-8, 0.5, true));
  ck_assert_ct_status(ct_optimizer_load(q, ck), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("holds 2 parameter groups but this optimizer has 1");
  ct_safetensors_free(ck);
  ct_optimizer_free(q);
  ct_optimizer_free(r);

  /* An older checkpoint (written before groups: no "optim.groups") loads into a one-group
   * optimizer, its group taking "optim.lr" and "optim.weight_decay". */
  ck_assert_ct_ok(ct_safetensors_new(&ck));
  const char *kv[][2] = {{"optim.kind", "adam"}, {"optim.count", "1"},  {"optim.lr", "0.25"},
                         {"optim.weight_decay", "0.125"}, {"optim.beta1", "0.9"}, {"optim.beta2", "0.999"},
                         {"optim.eps", "1e-08"}, {"optim.decoupled", "1"}, {"optim.0.step", "0"}};
  for (size_t i = 0; i < sizeof kv / sizeof *kv; i++) ck_assert_ct_ok(ct_safetensors_metadata_set(ck, kv[i][0], kv[i][1]));
  ct_optimizer *old = NULL;
  ck_assert_ct_ok(ct_adam_new(&old, &w2, 1, 0.5, 0.9, 0.999, 1e-8, 0.5, true));
  ck_assert_ct_ok(ct_optimizer_load(old, ck));
  ck_assert_double_eq(ct_optimizer_get_group_lr(old, 0), 0.25);
  ck_assert_double_eq(ct_optimizer_get_group_weight_decay(old, 0), 0.125);
  ck_assert_ct_ok(ct_optimizer_add_param_group(old, &b2, 1, NAN, NAN));
  ck_assert_ct_status(ct_optimizer_load(old, ck), CT_ERR_INVALID_ARGUMENT);
  ct_safetensors_free(ck);
  ct_optimizer_free(old);

  ct_optimizer_free(o);
  ct_optimizer_free(ow);
  ct_optimizer_free(ob);
  ct_release(w);
  ct_release(b);
  ct_release(w2);
  ct_release(b2);
}
END_TEST

START_TEST(param_group_errors) {
  ct_device *d = ct_test_device();
  ct_tensor *w = param_like(d, 4, 1.0f), *b = param_like(d, 2, 1.0f), *c = values(d, 2, 1.0f);
  ct_optimizer *o = NULL;
  ck_assert_ct_ok(ct_sgd_new(&o, &w, 1, 0.1, 0.9, 0.0, false));
  ck_assert_ct_status(ct_optimizer_add_param_group(o, &w, 1, 0.1, 0.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("params[0] is already in group 0");
  ck_assert_ct_status(ct_optimizer_add_param_group(o, &c, 1, 0.1, 0.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("does not require grad");
  ck_assert_ct_status(ct_optimizer_add_param_group(o, &b, 1, -1.0, 0.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_optimizer_add_param_group(o, &b, 1, 0.1, -1.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_optimizer_add_param_group(o, &b, 0, 0.1, 0.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_optimizer_add_param_group(NULL, &b, 1, 0.1, 0.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ct_optimizer_num_groups(o), 1);
  ck_assert_ct_ok(ct_optimizer_add_param_group(o, &b, 1, 0.2, 0.0));
  ck_assert_ct_status(ct_optimizer_set_group_lr(o, 2, 0.1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("group 2 is out of range (the optimizer has 2 groups)");
  ck_assert_ct_status(ct_optimizer_set_group_lr(o, 1, NAN), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_optimizer_set_group_weight_decay(o, 1, -0.5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_double_eq(ct_optimizer_get_group_lr(o, 1), 0.2);
  ck_assert(isnan(ct_optimizer_get_group_lr(o, -1)));
  ck_assert(isnan(ct_optimizer_get_group_weight_decay(NULL, 0)));
  ck_assert_int_eq(ct_optimizer_num_groups(NULL), 0);
  ck_assert_int_eq(ct_optimizer_group_size(o, 5), -1);
  /* set_lr reaches every group, get_lr reads group 0. */
  ck_assert_ct_ok(ct_optimizer_set_lr(o, 0.05));
  ck_assert_double_eq(ct_optimizer_get_group_lr(o, 1), 0.05);
  ck_assert_double_eq(ct_optimizer_get_lr(o), 0.05);
  ct_optimizer_free(o);
  ct_release(w);
  ct_release(b);
  ct_release(c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sched");
  TCase *tc = ct_test_case(s, "schedulers", 300);
  tcase_add_test(tc, schedules_match_pytorch);
  tcase_add_test(tc, schedulers_share_initial_lr_and_refuse_overrun);
  tcase_add_test(tc, scheduler_checkpoint_resume);
  tcase_add_test(tc, scheduler_errors);
  tc = ct_test_case(s, "groups", 300);
  tcase_add_test(tc, param_groups_step_with_their_own_hyperparameters);
  tcase_add_test(tc, param_group_errors);
  return ct_test_run(s);
}
