/* The modules of include/cltensor/module.h against PyTorch (data/module_ref.safetensors and
 * data/net_state.safetensors, made by make_fixtures.py beside this file): state_dict names of a
 * nested model, a checkpoint written by safetensors.torch.save_file loaded strictly, forward
 * values and gradients, every module alone with PyTorch's weights, batch norm in training and
 * eval, loading errors, save/load round trips, default initialization, user modules,
 * containers, ct_module_to (with 'two': across devices).
 *
 * Tolerance. The forwards run the same f32 ops as PyTorch in other summation orders (GEMMs,
 * convolutions, norms over a few dozen terms), so values agree to a few ulps of their terms:
 * |got - want| <= 2e-5 + 2e-5 |want| is generous for that and far below any wrong weight,
 * option or formula (which moves values by 1e-2 or more). Gradients: 1e-4 (sums over the
 * batch and the spatial positions). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ct_fixture.h"

static ct_safetensors *load_data(ct_device *d, const char *file) {
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/module/data/%s", root ? root : ".", file);
  ct_safetensors *st = NULL;
  /* f64 entries (the initializers' fans and gains, unused here) as f32 on a device without fp64 */
  ck_assert_ct_ok(ct_safetensors_load_as(&st, path, d, CT_F64, ct_device_properties(d)->fp64 ? CT_F64 : CT_F32));
  return st;
}

static void net_state_path(char *path, size_t size) {
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  snprintf(path, size, "%s/tests/module/data/net_state.safetensors", root ? root : ".");
}

static void assert_equal(const ct_tensor *got, const ct_tensor *want, const char *what) {
  ct_test_assert_close(got, want, 0, what);
}

/* The module a constructor stored in *m (read after the call: argument order is unspecified). */
static ct_module *take(ct_status st, ct_module **m) {
  ck_assert_msg(st == CT_OK, "constructor: %s", ct_last_error());
  ck_assert_ptr_nonnull(*m);
  return *m;
}

/* A new collection with the entries of st named "<prefix>.<rest>" as "<rest>", leaving out the
 * fixture's inputs and outputs. */
static ct_safetensors *sub(const ct_safetensors *st, const char *prefix) {
  static const char *const skip[] = {"x", "x2", "y", "y_train", "y_eval", "running_mean_after", "running_var_after",
                                     "nbt_after"};
  ct_safetensors *out = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&out));
  size_t pl = strlen(prefix);
  for (size_t i = 0; i < ct_safetensors_count(st); i++) {
    const char *name = ct_safetensors_name(st, i);
    if (strncmp(name, prefix, pl) || name[pl] != '.') continue;
    bool skipped = false;
    for (size_t k = 0; k < sizeof skip / sizeof *skip; k++) skipped |= !strcmp(name + pl + 1, skip[k]);
    if (skipped) continue;
    ct_tensor *t = NULL;
    ck_assert_ct_ok(ct_safetensors_at(&t, st, i));
    ck_assert_ct_ok(ct_safetensors_set(out, name + pl + 1, t));
    ct_release(t);
  }
  return out;
}

static void load_prefixed(ct_module *m, const ct_safetensors *st, const char *prefix) {
  ct_safetensors *s = sub(st, prefix);
  ck_assert_ct_ok(ct_module_load_state_dict_from(m, s, true));
  ct_safetensors_free(s);
}

/* ---- The nested model of make_fixtures.py ---- */

static ct_status net_forward(ct_tensor **y, ct_module *self, const ct_tensor *x, void *user) {
  (void)user;
  static const char *const order[] = {"features", "pool", "flat", "head"};
  ct_tensor *cur = ct_retain((ct_tensor *)x);
  for (int i = 0; i < 4; i++) {
    ct_tensor *next = NULL;
    ct_status st = ct_module_forward(&next, ct_module_get_submodule(self, order[i]), cur);
    ct_release(cur);
    if (st != CT_OK) return st;
    cur = next;
  }
  *y = cur;
  return CT_OK;
}

static void add_child(ct_module *m, const char *name, ct_module *child) {
  ck_assert_ct_ok(ct_module_add_child(m, name, child));
  ct_module_release(child);
}

static ct_module *sequential(ct_module **mods, int n) {
  ct_module *s = NULL;
  ck_assert_ct_ok(ct_module_sequential(&s, mods, n));
  for (int i = 0; i < n; i++) ct_module_release(mods[i]);
  return s;
}

static ct_module *build_net(ct_device *d) {
  ct_module *f[6], *h[5], *m = NULL, *t = NULL;
  f[0] = take(ct_module_conv2d(&t, d, 1, 4, (int[]){3, 3}, NULL, (int[]){1, 1}, NULL, 1, true), &t);
  f[1] = take(ct_module_batch_norm2d(&t, d, 4, 1e-5, 0.1, true, true), &t);
  f[2] = take(ct_module_relu(&t), &t);
  f[3] = take(ct_module_max_pool2d(&t, (int[]){2, 2}, NULL, NULL), &t);
  f[4] = take(ct_module_conv2d(&t, d, 4, 6, (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}, NULL, 1, false), &t);
  f[5] = take(ct_module_gelu(&t, false), &t);
  h[0] = take(ct_module_linear(&t, d, 6, 8, true), &t);
  h[1] = take(ct_module_layer_norm(&t, d, 1, (int64_t[]){8}, 1e-5, true, true), &t);
  h[2] = take(ct_module_dropout(&t, 0.5), &t);
  h[3] = take(ct_module_silu(&t), &t);
  h[4] = take(ct_module_linear(&t, d, 8, 3, true), &t);
  ck_assert_ct_ok(ct_module_custom(&m, "Net", net_forward, NULL, NULL));
  add_child(m, "features", sequential(f, 6));
  add_child(m, "pool", take(ct_module_adaptive_avg_pool2d(&t, (int64_t[]){1, 1}), &t));
  add_child(m, "flat", take(ct_module_flatten(&t, 1, -1), &t));
  add_child(m, "head", sequential(h, 5));
  return m;
}

/* build_net with PyTorch's weights (data/net_state.safetensors, loaded strictly). */
static ct_module *loaded_net(ct_device *d) {
  ct_module *net = build_net(d);
  char path[1024];
  net_state_path(path, sizeof path);
  ck_assert_ct_ok(ct_module_load_state_dict(net, path, true));
  return net;
}

/* "name:dtype:d0,d1;..." of a state dict, PyTorch's dtype names. */
static void describe(char *buf, size_t size, const ct_safetensors *sd) {
  size_t len = 0;
  buf[0] = 0;
  for (size_t i = 0; i < ct_safetensors_count(sd); i++) {
    ct_tensor *t = NULL;
    ck_assert_ct_ok(ct_safetensors_at(&t, sd, i));
    const char *dt = ct_tensor_dtype(t) == CT_F32 ? "float32" : ct_tensor_dtype(t) == CT_I64 ? "int64" : "?";
    len += (size_t)snprintf(buf + len, size - len, "%s%s:%s:", i ? ";" : "", ct_safetensors_name(sd, i), dt);
    for (int k = 0; k < ct_tensor_ndim(t); k++)
      len += (size_t)snprintf(buf + len, size - len, "%s%lld", k ? "," : "", (long long)ct_tensor_shape(t)[k]);
    ck_assert_uint_lt(len, size);
    ct_release(t);
  }
}

static void join(char *buf, size_t size, const char **names, int n) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < n; i++) len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ";" : "", names[i]);
  ck_assert_uint_lt(len, size);
}

START_TEST(state_dict_names_match_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *ref = load_data(d, "module_ref.safetensors");
  ct_module *net = build_net(d);
  ct_safetensors *sd = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&sd, net));
  char buf[4096];
  describe(buf, sizeof buf, sd);
  ck_assert_str_eq(buf, ct_safetensors_metadata_get(ref, "net.names"));
  const char *names[32];
  ct_tensor *ts[32];
  int n = 0;
  ck_assert_ct_ok(ct_module_named_parameters(names, ts, 32, &n, net));
  join(buf, sizeof buf, names, n);
  ck_assert_str_eq(buf, ct_safetensors_metadata_get(ref, "net.params"));
  for (int i = 0; i < n; i++) ck_assert(ct_is_leaf(ts[i]) && ct_requires_grad(ts[i]));
  ck_assert_ct_ok(ct_module_named_buffers(names, ts, 32, &n, net));
  join(buf, sizeof buf, names, n);
  ck_assert_str_eq(buf, ct_safetensors_metadata_get(ref, "net.buffers"));
  for (int i = 0; i < n; i++) ck_assert(!ct_requires_grad(ts[i]));
  /* The lookups by path. */
  ck_assert_ptr_eq(ct_module_get_parameter(net, "head.4.bias"), ct_module_get_parameter(
                                                                   ct_module_get_submodule(net, "head.4"), "bias"));
  ck_assert_str_eq(ct_module_type_name(ct_module_get_submodule(net, "features.1")), "BatchNorm2d");
  ck_assert_ptr_nonnull(ct_module_get_buffer(net, "features.1.num_batches_tracked"));
  ck_assert_ptr_null(ct_module_get_parameter(net, "features.1.running_mean")); /* a buffer */
  ck_assert_error_contains("running_mean");
  ck_assert_ptr_null(ct_module_get_submodule(net, "features.9"));
  ck_assert_error_contains("\"9\"");
  ck_assert_ptr_eq(ct_module_get_submodule(net, ""), net);
  ct_safetensors_free(sd);
  ct_module_release(net);
  ct_safetensors_free(ref);
}
END_TEST

START_TEST(pytorch_checkpoint_forward_and_gradients) {
  ct_device *d = ct_test_device();
  ct_safetensors *ref = load_data(d, "module_ref.safetensors");
  ct_module *net = loaded_net(d);
  ck_assert_str_eq(ct_module_load_report(net), "loaded 14 of 14");
  ck_assert_ct_ok(ct_module_eval(net));
  ct_tensor *x = ct_test_fx(ref, "net.x"), *want = ct_test_fx(ref, "net.y"), *g = ct_test_fx(ref, "net.g"), *y = NULL, *yg = NULL,
            *loss = NULL;
  ck_assert_ct_ok(ct_module_forward(&y, net, x));
  ct_test_assert_close(y, want, 2e-5, "Net(x)");
  ck_assert_ct_ok(ct_mul(&yg, y, g));
  ck_assert_ct_ok(ct_sum(&loss, yg, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(loss, NULL));
  const char *names[32];
  ct_tensor *ps[32];
  int n = 0;
  ck_assert_ct_ok(ct_module_named_parameters(names, ps, 32, &n, net));
  ck_assert_int_eq(n, 11);
  for (int i = 0; i < n; i++) {
    ct_tensor *gr = NULL, *gw = ct_test_fx(ref, "grad.%s", names[i]);
    ck_assert_ct_ok(ct_grad(&gr, ps[i]));
    ck_assert_ptr_nonnull(gr);
    ct_test_assert_close(gr, gw, 1e-4, names[i]);
    ct_release(gr);
    ct_release(gw);
  }
  ck_assert_ct_ok(ct_module_zero_grad(net));
  ct_tensor *gr = NULL;
  ck_assert_ct_ok(ct_grad(&gr, ps[0]));
  ck_assert_ptr_null(gr);
  ct_release(loss);
  ct_release(yg);
  ct_release(y);
  ct_release(g);
  ct_release(want);
  ct_release(x);
  ct_module_release(net);
  ct_safetensors_free(ref);
}
END_TEST

static ct_module *make_single(ct_device *d, const char *name) {
  ct_module *m = NULL;
  ct_status st = CT_ERR_INVALID_ARGUMENT;
  if (!strcmp(name, "linear")) st = ct_module_linear(&m, d, 5, 3, true);
  else if (!strcmp(name, "linear_nobias")) st = ct_module_linear(&m, d, 5, 3, false);
  else if (!strcmp(name, "conv1d")) st = ct_module_conv1d(&m, d, 2, 4, 3, 2, 1, 1, 1, true);
  else if (!strcmp(name, "conv2d"))
    st = ct_module_conv2d(&m, d, 2, 4, (int[]){3, 2}, (int[]){2, 1}, (int[]){1, 0}, NULL, 2, true);
  else if (!strcmp(name, "conv2d_dil"))
    st = ct_module_conv2d(&m, d, 3, 2, (int[]){3, 3}, NULL, (int[]){2, 2}, (int[]){2, 2}, 1, true);
  else if (!strcmp(name, "layer_norm")) st = ct_module_layer_norm(&m, d, 2, (int64_t[]){4, 5}, 1e-5, true, true);
  else if (!strcmp(name, "layer_norm_nobias")) st = ct_module_layer_norm(&m, d, 1, (int64_t[]){5}, 1e-3, true, false);
  else if (!strcmp(name, "rms_norm")) st = ct_module_rms_norm(&m, d, 1, (int64_t[]){6}, NAN, true);
  else if (!strcmp(name, "rms_norm_eps")) st = ct_module_rms_norm(&m, d, 2, (int64_t[]){2, 3}, 1e-2, true);
  else if (!strcmp(name, "max_pool2d")) st = ct_module_max_pool2d(&m, (int[]){2, 2}, NULL, NULL);
  else if (!strcmp(name, "max_pool2d_s")) st = ct_module_max_pool2d(&m, (int[]){3, 2}, (int[]){2, 1}, (int[]){1, 1});
  else if (!strcmp(name, "avg_pool2d")) st = ct_module_avg_pool2d(&m, (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1});
  else if (!strcmp(name, "adaptive")) st = ct_module_adaptive_avg_pool2d(&m, (int64_t[]){2, 3});
  else if (!strcmp(name, "flatten")) st = ct_module_flatten(&m, 1, -1);
  else if (!strcmp(name, "flatten_02")) st = ct_module_flatten(&m, 0, 2);
  else if (!strcmp(name, "embedding")) st = ct_module_embedding(&m, d, 10, 4);
  return take(st, &m);
}

START_TEST(each_module_matches_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *ref = load_data(d, "module_ref.safetensors");
  static const char *const names[] = {"linear", "linear_nobias", "conv1d", "conv2d", "conv2d_dil", "layer_norm",
                                      "layer_norm_nobias", "rms_norm", "rms_norm_eps", "max_pool2d", "max_pool2d_s",
                                      "avg_pool2d", "adaptive", "flatten", "flatten_02", "embedding"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    ct_module *m = make_single(d, names[i]);
    load_prefixed(m, ref, names[i]); /* strict: the names and shapes are PyTorch's */
    ck_assert_ct_ok(ct_module_eval(m));
    ct_tensor *x = ct_test_fx(ref, "%s.x", names[i]), *want = ct_test_fx(ref, "%s.y", names[i]), *y = NULL;
    ck_assert_ct_ok(ct_module_forward(&y, m, x));
    ct_test_assert_close(y, want, 2e-5, names[i]);
    ct_release(y);
    ct_release(want);
    ct_release(x);
    ct_module_release(m);
  }
  ct_safetensors_free(ref);
}
END_TEST

START_TEST(batch_norm_train_then_eval) {
  ct_device *d = ct_test_device();
  ct_safetensors *ref = load_data(d, "module_ref.safetensors");
  static const char *const names[] = {"bn1d", "bn1d3", "bn2d", "bnmom"};
  for (int i = 0; i < 4; i++) {
    ct_module *m = NULL;
    if (i == 0) m = take(ct_module_batch_norm1d(&m, d, 3, 1e-5, 0.1, true, true), &m);
    if (i == 1) m = take(ct_module_batch_norm1d(&m, d, 3, 1e-3, 0.3, true, true), &m);
    if (i == 2) m = take(ct_module_batch_norm2d(&m, d, 3, 1e-5, 0.1, true, true), &m);
    if (i == 3) m = take(ct_module_batch_norm1d(&m, d, 2, 1e-5, NAN, true, true), &m);
    load_prefixed(m, ref, names[i]);
    ck_assert(ct_module_is_training(m));
    ct_tensor *x = ct_test_fx(ref, "%s.x", names[i]), *y = NULL;
    ck_assert_ct_ok(ct_module_forward(&y, m, x));
    if (i == 3) { /* momentum None: a second batch, factor 1 / num_batches_tracked */
      ct_tensor *x2 = ct_test_fx(ref, "%s.x2", names[i]);
      ct_release(y);
      ck_assert_ct_ok(ct_module_forward(&y, m, x2));
      ct_release(x2);
    }
    char what[64];
    ct_tensor *w = ct_test_fx(ref, "%s.y_train", names[i]);
    snprintf(what, sizeof what, "%s train", names[i]);
    ct_test_assert_close(y, w, 2e-5, what);
    ct_release(w);
    ct_release(y);
    w = ct_test_fx(ref, "%s.running_mean_after", names[i]);
    ct_test_assert_close(ct_module_get_buffer(m, "running_mean"), w, 2e-5, "running_mean");
    ct_release(w);
    w = ct_test_fx(ref, "%s.running_var_after", names[i]);
    ct_test_assert_close(ct_module_get_buffer(m, "running_var"), w, 2e-5, "running_var");
    ct_release(w);
    w = ct_test_fx(ref, "%s.nbt_after", names[i]);
    assert_equal(ct_module_get_buffer(m, "num_batches_tracked"), w, "num_batches_tracked");
    ct_release(w);
    ck_assert_ct_ok(ct_module_eval(m));
    ck_assert_ct_ok(ct_module_forward(&y, m, x));
    w = ct_test_fx(ref, "%s.y_eval", names[i]);
    snprintf(what, sizeof what, "%s eval", names[i]);
    ct_test_assert_close(y, w, 2e-5, what);
    ct_release(w);
    ct_release(y);
    /* Eval does not count batches. */
    w = ct_test_fx(ref, "%s.nbt_after", names[i]);
    assert_equal(ct_module_get_buffer(m, "num_batches_tracked"), w, "num_batches_tracked after eval");
    ct_release(w);
    ct_release(x);
    ct_module_release(m);
  }
  /* PyTorch's rank checks, and a batch norm without running statistics normalizes with the
   * batch's in eval too. */
  ct_module *m = NULL, *m2 = NULL;
  ck_assert_ct_ok(ct_module_batch_norm2d(&m, d, 3, 1e-5, 0.1, false, false));
  int n = -1;
  ck_assert_ct_ok(ct_module_parameters(NULL, 0, &n, m));
  ck_assert_int_eq(n, 0);
  ct_tensor *x = ct_test_fx(ref, "bn1d.x"), *y = NULL, *y2 = NULL;
  ck_assert_ct_status(ct_module_forward(&y, m, x), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("expected 4D input (got 2D input)");
  ck_assert_ptr_null(y);
  ck_assert_ct_ok(ct_module_batch_norm1d(&m2, d, 3, 1e-5, 0.1, false, false));
  ck_assert_ct_ok(ct_module_forward(&y, m2, x));
  ck_assert_ct_ok(ct_module_eval(m2));
  ck_assert_ct_ok(ct_module_forward(&y2, m2, x));
  assert_equal(y2, y, "eval without running stats");
  ct_release(y2);
  ct_release(y);
  ct_release(x);
  ct_module_release(m2);
  ct_module_release(m);
  ct_safetensors_free(ref);
}
END_TEST

START_TEST(activations_match_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *ref = load_data(d, "module_ref.safetensors");
  static const char *const names[] = {"relu",      "gelu",       "gelu_tanh", "silu",        "sigmoid", "tanh",
                                      "softplus",  "leaky_relu", "softmax",   "log_softmax", "identity"};
  ct_tensor *x = ct_test_fx(ref, "act.x");
  for (int i = 0; i < 11; i++) {
    ct_module *m = NULL;
    switch (i) {
    case 0: ck_assert_ct_ok(ct_module_relu(&m)); break;
    case 1: ck_assert_ct_ok(ct_module_gelu(&m, false)); break;
    case 2: ck_assert_ct_ok(ct_module_gelu(&m, true)); break;
    case 3: ck_assert_ct_ok(ct_module_silu(&m)); break;
    case 4: ck_assert_ct_ok(ct_module_sigmoid(&m)); break;
    case 5: ck_assert_ct_ok(ct_module_tanh(&m)); break;
    case 6: ck_assert_ct_ok(ct_module_softplus(&m)); break;
    case 7: ck_assert_ct_ok(ct_module_leaky_relu(&m, 0.2)); break;
    case 8: ck_assert_ct_ok(ct_module_softmax(&m, 1)); break;
    case 9: ck_assert_ct_ok(ct_module_log_softmax(&m, -1)); break;
    default: ck_assert_ct_ok(ct_module_identity(&m)); break;
    }
    ct_tensor *y = NULL, *want = ct_test_fx(ref, "act.%s", names[i]);
    ck_assert_ct_ok(ct_module_forward(&y, m, x));
    ct_test_assert_close(y, want, 2e-5, names[i]);
    int n = -1;
    ck_assert_ct_ok(ct_module_parameters(NULL, 0, &n, m));
    ck_assert_int_eq(n, 0);
    ct_release(want);
    ct_release(y);
    ct_module_release(m);
  }
  ct_release(x);
  ct_safetensors_free(ref);
}
END_TEST

START_TEST(dropout_follows_the_training_flag) {
  ct_device *d = ct_test_device();
  ct_module *m = NULL;
  ck_assert_ct_ok(ct_module_dropout(&m, 0.5));
  ct_tensor *x = NULL, *y = NULL;
  ck_assert_ct_ok(ct_ones(&x, d, CT_F32, 1, (int64_t[]){4096}));
  ct_manual_seed(30);
  ck_assert_ct_ok(ct_module_forward(&y, m, x));
  double *h = ct_test_to_doubles(y);
  int zeros = 0;
  for (int i = 0; i < 4096; i++) {
    ck_assert(h[i] == 0 || h[i] == 2);
    zeros += h[i] == 0;
  }
  /* Binomial(4096, 1/2): 6 sigma is 192. */
  ck_assert_int_gt(zeros, 2048 - 192);
  ck_assert_int_lt(zeros, 2048 + 192);
  free(h);
  ct_release(y);
  ck_assert_ct_ok(ct_module_eval(m));
  ck_assert_ct_ok(ct_module_forward(&y, m, x));
  ck_assert_ptr_eq(y, x); /* PyTorch returns the input */
  ct_release(y);
  ck_assert_ct_ok(ct_module_train(m, true));
  ct_module *all = NULL;
  ck_assert_ct_ok(ct_module_dropout(&all, 1.0));
  ck_assert_ct_ok(ct_module_forward(&y, all, x));
  h = ct_test_to_doubles(y);
  for (int i = 0; i < 4096; i++) ck_assert(h[i] == 0);
  free(h);
  ct_release(y);
  ct_module_release(all);
  ck_assert_ct_status(ct_module_dropout(&all, 1.5), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(all);
  ct_release(x);
  ct_module_release(m);
}
END_TEST

/* A collection with net's state_dict names and shapes, every float value 0 and counts 0. */
static ct_safetensors *zero_state(ct_module *net) {
  ct_safetensors *sd = NULL, *z = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&sd, net));
  ck_assert_ct_ok(ct_safetensors_new(&z));
  for (size_t i = 0; i < ct_safetensors_count(sd); i++) {
    ct_tensor *t = NULL, *c = NULL;
    ck_assert_ct_ok(ct_safetensors_at(&t, sd, i));
    ck_assert_ct_ok(ct_zeros(&c, ct_tensor_device(t), ct_tensor_dtype(t), ct_tensor_ndim(t), ct_tensor_shape(t)));
    ck_assert_ct_ok(ct_safetensors_set(z, ct_safetensors_name(sd, i), c));
    ct_release(c);
    ct_release(t);
  }
  ct_safetensors_free(sd);
  return z;
}

static double first_value(const ct_tensor *t) {
  double *h = ct_test_to_doubles(t), v = h[0];
  free(h);
  return v;
}

START_TEST(load_errors_strict_and_not) {
  ct_device *d = ct_test_device();
  ct_module *net = loaded_net(d);
  ct_tensor *w0 = ct_module_get_parameter(net, "features.0.weight");
  double v0 = first_value(w0);
  ck_assert(v0 != 0);
  ct_tensor *t = NULL, *bad = NULL;
  /* Missing. */
  ct_safetensors *z = zero_state(net), *z2 = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&z2));
  for (size_t i = 0; i < ct_safetensors_count(z); i++) {
    if (!strcmp(ct_safetensors_name(z, i), "head.4.bias")) continue;
    ck_assert_ct_ok(ct_safetensors_at(&t, z, i));
    ck_assert_ct_ok(ct_safetensors_set(z2, ct_safetensors_name(z, i), t));
    ct_release(t);
  }
  ck_assert_ct_status(ct_module_load_state_dict_from(net, z2, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("missing: head.4.bias");
  ck_assert_error_contains("nothing loaded");
  ck_assert(first_value(w0) == v0);
  /* Unexpected. */
  ck_assert_ct_ok(ct_zeros(&bad, d, CT_F32, 1, (int64_t[]){2}));
  ck_assert_ct_ok(ct_safetensors_set(z, "head.9.weight", bad));
  ct_release(bad);
  ck_assert_ct_status(ct_module_load_state_dict_from(net, z, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("unexpected: head.9.weight");
  ck_assert(first_value(w0) == v0);
  /* Shape and dtype mismatches, all reported together. */
  ck_assert_ct_ok(ct_zeros(&bad, d, CT_F32, 1, (int64_t[]){4}));
  ck_assert_ct_ok(ct_safetensors_set(z, "head.4.bias", bad));
  ct_release(bad);
  ck_assert_ct_ok(ct_zeros(&bad, d, CT_F32, 0, NULL));
  ck_assert_ct_ok(ct_safetensors_set(z, "features.1.num_batches_tracked", bad));
  ct_release(bad);
  ck_assert_ct_status(ct_module_load_state_dict_from(net, z, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("unexpected: head.9.weight");
  ck_assert_error_contains("shape mismatch: head.4.bias (file [4], model [3])");
  ck_assert_error_contains("dtype mismatch: features.1.num_batches_tracked (file f32, model i64)");
  ck_assert(first_value(w0) == v0);
  /* Not strict: what matches loads, the rest is reported. */
  ct_tensor *b4 = ct_module_get_parameter(net, "head.4.bias");
  double bias0 = first_value(b4);
  ck_assert_ct_ok(ct_module_load_state_dict_from(net, z2, false));
  ck_assert_str_eq(ct_module_load_report(net), "loaded 13 of 14; missing: head.4.bias");
  ck_assert(first_value(w0) == 0);
  ck_assert(first_value(b4) == bias0);
  ck_assert_ct_ok(ct_module_load_state_dict_from(net, z, false));
  ck_assert_str_eq(ct_module_load_report(net),
                   "loaded 12 of 14; unexpected: head.9.weight; shape mismatch: head.4.bias (file [4], model [3]); "
                   "dtype mismatch: features.1.num_batches_tracked (file f32, model i64)");
  ck_assert(first_value(b4) == bias0);
  ck_assert(ct_is_leaf(w0) && ct_requires_grad(w0));
  /* A file that is not there. */
  ck_assert_ct_status(ct_module_load_state_dict(net, "/nonexistent/x.safetensors", true), CT_ERR_IO);
  ct_safetensors_free(z2);
  ct_safetensors_free(z);
  ct_module_release(net);
}
END_TEST

START_TEST(save_load_round_trip) {
  ct_device *d = ct_test_device();
  ct_module *net = build_net(d), *net2 = build_net(d);
  char path[1024], tmp[] = "/tmp/ct_module_XXXXXX";
  net_state_path(path, sizeof path);
  ck_assert_ct_ok(ct_module_load_state_dict(net, path, true));
  int fd = mkstemp(tmp);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_ct_ok(ct_module_save_state_dict(net, tmp));
  ck_assert_ct_ok(ct_module_load_state_dict(net2, tmp, true));
  unlink(tmp);
  ct_safetensors *a = NULL, *b = NULL, *file = load_data(d, "net_state.safetensors");
  ck_assert_ct_ok(ct_module_state_dict(&a, net));
  ck_assert_ct_ok(ct_module_state_dict(&b, net2));
  ck_assert_uint_eq(ct_safetensors_count(a), ct_safetensors_count(file));
  for (size_t i = 0; i < ct_safetensors_count(a); i++) {
    ct_tensor *x = NULL, *y = NULL, *f = NULL;
    ck_assert_ct_ok(ct_safetensors_at(&x, a, i));
    ck_assert_ct_ok(ct_safetensors_at(&y, b, i));
    ck_assert_ct_ok(ct_safetensors_get(&f, file, ct_safetensors_name(a, i)));
    assert_equal(y, x, ct_safetensors_name(a, i));
    assert_equal(x, f, ct_safetensors_name(a, i));
    ct_release(f);
    ct_release(y);
    ct_release(x);
  }
  /* The state dict shares the module's tensors. */
  ct_tensor *w = NULL;
  ck_assert_ct_ok(ct_safetensors_get(&w, a, "head.0.weight"));
  ck_assert_ptr_eq(w, ct_module_get_parameter(net, "head.0.weight"));
  ct_release(w);
  ct_safetensors_free(file);
  ct_safetensors_free(b);
  ct_safetensors_free(a);
  ct_module_release(net2);
  ct_module_release(net);
}
END_TEST

static void moments(const ct_tensor *t, double *mean, double *std, double *absmax) {
  double *h = ct_test_to_doubles(t), s = 0, q = 0, mx = 0;
  int64_t n = ct_numel(t);
  for (int64_t i = 0; i < n; i++) {
    s += h[i];
    mx = fmax(mx, fabs(h[i]));
  }
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) q += (h[i] - *mean) * (h[i] - *mean);
  *std = sqrt(q / (double)(n - 1));
  *absmax = mx;
  free(h);
}

START_TEST(default_initialization) {
  ct_device *d = ct_test_device();
  ct_manual_seed(30);
  double mean, std, mx;
  /* Linear(2000, 300): weight and bias U(-1/sqrt(2000), 1/sqrt(2000)) (6 sigma bounds as in
   * test_init.c: mean 6 s / sqrt(n), std 6 s sqrt(0.2 / n) for a uniform). */
  ct_module *lin = NULL;
  ck_assert_ct_ok(ct_module_linear(&lin, d, 2000, 300, true));
  double bound = 1 / sqrt(2000.0), s = bound / sqrt(3.0), n = 600000;
  moments(ct_module_get_parameter(lin, "weight"), &mean, &std, &mx);
  ck_assert_double_le(mx, bound);
  ck_assert_double_le(fabs(mean), 6 * s / sqrt(n));
  ck_assert_double_le(fabs(std - s), 6 * s * sqrt(0.2 / n));
  moments(ct_module_get_parameter(lin, "bias"), &mean, &std, &mx);
  ck_assert_double_le(mx, bound);
  ck_assert_double_gt(mx, 0.8 * bound); /* the bias's own bound, not a smaller one */
  ck_assert_int_eq(ct_tensor_shape(ct_module_get_parameter(lin, "bias"))[0], 300);
  /* Conv2d(16, 32, 3x3): fan_in 144. */
  ct_module *conv = NULL;
  ck_assert_ct_ok(ct_module_conv2d(&conv, d, 16, 32, (int[]){3, 3}, NULL, NULL, NULL, 1, true));
  moments(ct_module_get_parameter(conv, "weight"), &mean, &std, &mx);
  ck_assert_double_le(mx, 1 / 12.0);
  ck_assert_double_gt(mx, 0.95 / 12.0);
  ck_assert_double_le(fabs(std - 1 / 12.0 / sqrt(3.0)), 6 * (1 / 12.0 / sqrt(3.0)) * sqrt(0.2 / 4608));
  moments(ct_module_get_parameter(conv, "bias"), &mean, &std, &mx);
  ck_assert_double_le(mx, 1 / 12.0);
  /* Conv1d(4, 6, 5, groups 2): weight [6, 2, 5], fan_in 10. */
  ct_module *c1 = NULL;
  ck_assert_ct_ok(ct_module_conv1d(&c1, d, 4, 6, 5, 1, 0, 1, 2, false));
  ct_tensor *w = ct_module_get_parameter(c1, "weight");
  ck_assert_int_eq(ct_tensor_ndim(w), 3);
  ck_assert_int_eq(ct_tensor_shape(w)[1], 2);
  moments(w, &mean, &std, &mx);
  ck_assert_double_le(mx, 1 / sqrt(10.0));
  ck_assert_ptr_null(ct_module_get_parameter(c1, "bias"));
  /* Embedding: N(0, 1). */
  ct_module *emb = NULL;
  ck_assert_ct_ok(ct_module_embedding(&emb, d, 1000, 256));
  moments(ct_module_get_parameter(emb, "weight"), &mean, &std, &mx);
  ck_assert_double_le(fabs(mean), 6 / sqrt(256000.0));
  ck_assert_double_le(fabs(std - 1), 6 * sqrt(0.5 / 256000.0));
  /* Norms: ones and zeros; batch norm's buffers. */
  ct_module *bn = NULL, *ln = NULL, *rms = NULL;
  ck_assert_ct_ok(ct_module_batch_norm2d(&bn, d, 5, 1e-5, 0.1, true, true));
  ck_assert_ct_ok(ct_module_layer_norm(&ln, d, 2, (int64_t[]){3, 4}, 1e-5, true, true));
  ck_assert_ct_ok(ct_module_rms_norm(&rms, d, 1, (int64_t[]){7}, NAN, true));
  struct {
    ct_tensor *t;
    double v;
    int64_t numel;
  } want[] = {{ct_module_get_parameter(bn, "weight"), 1, 5},    {ct_module_get_parameter(bn, "bias"), 0, 5},
              {ct_module_get_buffer(bn, "running_mean"), 0, 5}, {ct_module_get_buffer(bn, "running_var"), 1, 5},
              {ct_module_get_buffer(bn, "num_batches_tracked"), 0, 1},
              {ct_module_get_parameter(ln, "weight"), 1, 12},   {ct_module_get_parameter(ln, "bias"), 0, 12},
              {ct_module_get_parameter(rms, "weight"), 1, 7}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    ck_assert_ptr_nonnull(want[i].t);
    ck_assert_int_eq(ct_numel(want[i].t), want[i].numel);
    double *h = ct_test_to_doubles(want[i].t);
    for (int64_t k = 0; k < want[i].numel; k++) ck_assert_double_eq(h[k], want[i].v);
    free(h);
  }
  ck_assert_int_eq(ct_tensor_dtype(ct_module_get_buffer(bn, "num_batches_tracked")), CT_I64);
  ck_assert_int_eq(ct_tensor_ndim(ct_module_get_buffer(bn, "num_batches_tracked")), 0);
  ck_assert(ct_module_is_training(bn));
  ck_assert_str_eq(ct_module_type_name(rms), "RMSNorm");
  ct_module_release(rms);
  ct_module_release(ln);
  ct_module_release(bn);
  ct_module_release(emb);
  ct_module_release(c1);
  ct_module_release(conv);
  ct_module_release(lin);
}
END_TEST

/* ---- User modules ---- */

struct mlp_state {
  int destroyed;
  bool fail;
};

static ct_status mlp_forward(ct_tensor **y, ct_module *self, const ct_tensor *x, void *user) {
  struct mlp_state *s = user;
  if (s->fail) return ct_relu(y, NULL);
  ct_tensor *h = NULL, *a = NULL, *o = NULL;
  ct_status st = ct_module_forward(&h, ct_module_get_submodule(self, "fc1"), x);
  if (st == CT_OK) st = ct_relu(&a, h);
  if (st == CT_OK) st = ct_module_forward(&o, ct_module_get_submodule(self, "fc2"), a);
  if (st == CT_OK) st = ct_mul(y, o, ct_module_get_parameter(self, "scale"));
  ct_release(o);
  ct_release(a);
  ct_release(h);
  return st;
}

static void mlp_destroy(void *user) { ((struct mlp_state *)user)->destroyed++; }

/* A forward that uses a scope of its own, as a user writes one (scope.h). */
static ct_status scoped_forward(ct_tensor **y, ct_module *self, const ct_tensor *x, void *user) {
  (void)user;
  ct_tensor *h = NULL;
  ct_scope_begin();
  ct_module_forward(&h, ct_module_get_submodule(self, "fc"), x);
  ct_relu(y, h);
  return ct_scope_end_keep(y);
}

/* Called inside the caller's scope, a user module's result belongs to that scope once (the
 * callback's own call handed it out too): kept, it outlives the scope; left, it goes with it. */
START_TEST(user_forward_inside_a_scope) {
  ct_device *d = ct_test_device();
  ct_module *m = NULL, *fc = NULL;
  ck_assert_ct_ok(ct_module_custom(&m, "Scoped", scoped_forward, NULL, NULL));
  ck_assert_ct_ok(ct_module_linear(&fc, d, 4, 3, true));
  ck_assert_ct_ok(ct_module_add_child(m, "fc", fc));
  ct_module_release(fc);
  ct_tensor *x = NULL, *ref = NULL, *y = NULL, *left = NULL;
  ck_assert_ct_ok(ct_randn(&x, d, CT_F32, 2, (int64_t[]){2, 4}));
  ck_assert_ct_ok(ct_module_forward(&ref, m, x)); /* outside any scope */
  for (int round = 0; round < 3; round++) {
    ck_assert_ct_ok(ct_scope_begin());
    ck_assert_ct_ok(ct_module_forward(&y, m, x));
    ck_assert_ct_ok(ct_keep(y));
    ck_assert_ct_ok(ct_module_forward(&left, m, x));
    ck_assert_ct_ok(ct_scope_end());
    float got[6], want[6];
    ck_assert_ct_ok(ct_to_host(y, got, sizeof got));
    ck_assert_ct_ok(ct_to_host(ref, want, sizeof want));
    for (int i = 0; i < 6; i++) ck_assert_float_eq(got[i], want[i]);
    ct_release(y);
  }
  ct_release(ref);
  ct_release(x);
  ct_module_release(m);
}
END_TEST

START_TEST(user_modules) {
  ct_device *d = ct_test_device();
  struct mlp_state s = {0};
  ct_module *m = NULL, *fc1 = NULL, *fc2 = NULL;
  ck_assert_ct_ok(ct_module_custom(&m, "MLP", mlp_forward, &s, mlp_destroy));
  ck_assert_ct_ok(ct_module_linear(&fc1, d, 4, 8, true));
  ck_assert_ct_ok(ct_module_linear(&fc2, d, 8, 2, true));
  ck_assert_ct_ok(ct_module_add_child(m, "fc1", fc1));
  ck_assert_ct_ok(ct_module_add_child(m, "fc2", fc2));
  ct_tensor *scale = NULL, *steps = NULL, *x = NULL, *y = NULL;
  ck_assert_ct_ok(ct_full(&scale, d, CT_F32, 1, (int64_t[]){1}, 2.0));
  ck_assert_ct_ok(ct_module_add_parameter(m, "scale", scale));
  ck_assert(ct_requires_grad(scale) && ct_is_leaf(scale));
  ck_assert_ct_ok(ct_zeros(&steps, d, CT_I64, 0, NULL));
  ck_assert_ct_ok(ct_module_add_buffer(m, "steps", steps));
  /* PyTorch's order: own parameters, own buffers, then the children's entries. */
  const char *names[16];
  ct_tensor *ts[16];
  int n = 0;
  ct_safetensors *sd = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&sd, m));
  ck_assert_uint_eq(ct_safetensors_count(sd), 6);
  static const char *const order[] = {"scale", "steps", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  for (int i = 0; i < 6; i++) ck_assert_str_eq(ct_safetensors_name(sd, (size_t)i), order[i]);
  ct_safetensors_free(sd);
  ck_assert_ct_ok(ct_module_named_parameters(names, ts, 16, &n, m));
  ck_assert_int_eq(n, 5);
  ck_assert_str_eq(names[0], "scale");
  ck_assert_ptr_eq(ts[0], scale);
  /* Forward: fc2(relu(fc1(x))) * scale. */
  ck_assert_ct_ok(ct_randn(&x, d, CT_F32, 2, (int64_t[]){3, 4}));
  ck_assert_ct_ok(ct_module_forward(&y, m, x));
  ck_assert_int_eq(ct_tensor_shape(y)[1], 2);
  ck_assert(ct_requires_grad(y));
  ct_release(y);
  ck_assert_str_eq(ct_module_type_name(m), "MLP");
  ck_assert_ptr_eq(ct_module_user_data(m), &s);
  ck_assert_ptr_null(ct_module_user_data(fc1));
  /* A failing forward names the module. */
  s.fail = true;
  ck_assert_ct_status(ct_module_forward(&y, m, x), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("ct_module_forward: (MLP): ct_relu");
  s.fail = false;
  /* Registration rules. */
  ck_assert_ct_status(ct_module_add_child(m, "fc1", fc2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("already has an attribute \"fc1\"");
  ck_assert_ct_status(ct_module_add_buffer(m, "scale", steps), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_add_child(m, "a.b", fc2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_add_child(m, "", fc2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_add_child(m, "self", m), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("cycle");
  ck_assert_ct_status(ct_module_add_child(fc1, "up", m), CT_ERR_INVALID_ARGUMENT);
  ct_tensor *nonleaf = NULL, *ints = NULL;
  ck_assert_ct_ok(ct_mul_scalar(&nonleaf, scale, 2.0));
  ck_assert_ct_status(ct_module_add_parameter(m, "twice", nonleaf), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_add_buffer(m, "twice", nonleaf), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_zeros(&ints, d, CT_I32, 1, (int64_t[]){2}));
  ck_assert_ct_status(ct_module_add_parameter(m, "ints", ints), CT_ERR_DTYPE_MISMATCH);
  ct_module *none = m;
  ck_assert_ct_status(ct_module_custom(&none, "X", NULL, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(none);
  ct_release(ints);
  ct_release(nonleaf);
  /* train/eval reach every child. */
  ck_assert_ct_ok(ct_module_eval(m));
  ck_assert(!ct_module_is_training(fc1) && !ct_module_is_training(m));
  ck_assert_ct_ok(ct_module_train(m, true));
  ck_assert(ct_module_is_training(fc1));
  /* Reference counting: destroy runs once, at the last release. */
  ck_assert_ptr_eq(ct_module_retain(m), m);
  ct_module_release(m);
  ck_assert_int_eq(s.destroyed, 0);
  ct_module_release(m);
  ck_assert_int_eq(s.destroyed, 1);
  ck_assert(ct_is_leaf(scale)); /* we still hold our references */
  ck_assert_ct_ok(ct_module_train(fc1, false));
  ct_module_release(fc2);
  ct_module_release(fc1);
  ct_module_release(NULL);
  ct_release(x);
  ct_release(steps);
  ct_release(scale);
}
END_TEST

START_TEST(sequential_and_lists) {
  ct_device *d = ct_test_device();
  ct_module *l1 = NULL, *l2 = NULL, *r = NULL, *seq = NULL, *outer = NULL;
  ck_assert_ct_ok(ct_module_linear(&l1, d, 4, 3, true));
  ck_assert_ct_ok(ct_module_linear(&l2, d, 5, 2, true));
  ck_assert_ct_ok(ct_module_relu(&r));
  /* A shared module: listed once by parameters(), twice by the state dict (as PyTorch). */
  ck_assert_ct_ok(ct_module_sequential(&seq, (ct_module *[]){l1, r}, 2));
  ck_assert_ct_ok(ct_module_append(seq, l1));
  int n = -1;
  ck_assert_ct_ok(ct_module_parameters(NULL, 0, &n, seq));
  ck_assert_int_eq(n, 2);
  ct_safetensors *sd = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&sd, seq));
  ck_assert_uint_eq(ct_safetensors_count(sd), 4);
  ck_assert_str_eq(ct_safetensors_name(sd, 2), "2.weight");
  ct_safetensors_free(sd);
  ct_tensor *ps[2];
  ck_assert_ct_status(ct_module_parameters(ps, 1, &n, seq), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(n, 2);
  ck_assert_error_contains("has 2 parameters, room for 1");
  ck_assert_ct_ok(ct_module_parameters(ps, 2, &n, seq));
  ck_assert_ptr_eq(ps[0], ct_module_get_parameter(l1, "weight"));
  ck_assert_ptr_eq(ps[1], ct_module_get_parameter(l1, "bias"));
  ck_assert_ct_status(ct_module_append(l1, r), CT_ERR_INVALID_ARGUMENT);
  ct_module_release(seq);
  /* A shape error deep inside names the path. */
  ck_assert_ct_ok(ct_module_sequential(&seq, (ct_module *[]){l1, l2}, 2));
  ck_assert_ct_ok(ct_module_sequential(&outer, (ct_module *[]){seq}, 1));
  ct_tensor *x = NULL, *y = NULL;
  ck_assert_ct_ok(ct_randn(&x, d, CT_F32, 2, (int64_t[]){2, 4}));
  ck_assert_ct_status(ct_module_forward(&y, outer, x), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("ct_module_forward: 0.1 (Linear): ");
  ck_assert_ptr_null(y);
  /* An empty Sequential is the identity. */
  ct_module *empty = NULL;
  ck_assert_ct_ok(ct_module_sequential(&empty, NULL, 0));
  ck_assert_ct_ok(ct_module_forward(&y, empty, x));
  ck_assert_ptr_eq(y, x);
  ct_release(y);
  /* Named children (nn.Sequential(OrderedDict(...))): forward in the order added, the names in
   * the state dict, ReLU under two names. (x [2, 4] -> l1 [2, 3] -> relu -> relu) */
  ck_assert_ct_ok(ct_module_add_child(empty, "fc", l1));
  ck_assert_ct_ok(ct_module_add_child(empty, "act1", r));
  ck_assert_ct_ok(ct_module_add_child(empty, "act2", r));
  ck_assert_ct_ok(ct_module_forward(&y, empty, x));
  ck_assert_int_eq(ct_tensor_shape(y)[1], 3);
  ct_tensor *lin = NULL, *ref = NULL;
  ck_assert_ct_ok(ct_module_forward(&lin, l1, x));
  ck_assert_ct_ok(ct_relu(&ref, lin));
  ct_test_assert_close(y, ref, 0, "named Sequential");
  ct_release(ref);
  ct_release(lin);
  ct_release(y);
  ck_assert_ct_ok(ct_module_state_dict(&sd, empty));
  ck_assert_str_eq(ct_safetensors_name(sd, 0), "fc.weight");
  ct_safetensors_free(sd);
  ck_assert_ct_ok(ct_module_append(empty, r)); /* the next index: "3" */
  ck_assert_ptr_eq(ct_module_get_submodule(empty, "3"), r);
  ct_module_release(empty);
  ck_assert_ct_status(ct_module_sequential(&empty, (ct_module *[]){l1, NULL}, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(empty);
  /* Constructor arguments PyTorch refuses. */
  ct_module *bad = NULL;
  ck_assert_ct_status(ct_module_linear(&bad, d, -1, 3, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_conv2d(&bad, d, 4, 6, (int[]){3, 3}, NULL, NULL, NULL, 4, true),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("groups");
  ck_assert_ct_status(ct_module_conv1d(&bad, d, 4, 6, 0, 1, 0, 1, 1, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_batch_norm1d(&bad, d, 3, 0, 0.1, true, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_batch_norm1d(&bad, d, 3, 1e-5, 2, true, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_layer_norm(&bad, d, 0, NULL, 1e-5, true, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_max_pool2d(&bad, (int[]){2, 2}, NULL, (int[]){2, 0}), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_flatten(&bad, 2, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(bad);
  ck_assert_ct_status(ct_module_forward(&y, NULL, x), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_parameters(NULL, 0, NULL, seq), CT_ERR_INVALID_ARGUMENT);
  ct_release(x);
  ct_module_release(outer);
  ct_module_release(seq);
  ct_module_release(r);
  ct_module_release(l2);
  ct_module_release(l1);
}
END_TEST

/* ---- Devices ---- */

/* ct_module_to(m, d2), then a training step on d2: the parameters must be leaves there. */
static void move_and_train(ct_device *d1, ct_device *d2) {
  ct_module *net = loaded_net(d1);
  ct_safetensors *before = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&before, net));
  /* A gradient before the move moves with its parameter. */
  ct_tensor *x = NULL, *y = NULL, *loss = NULL;
  ck_assert_ct_ok(ct_randn(&x, d1, CT_F32, 4, (int64_t[]){4, 1, 8, 8}));
  ck_assert_ct_ok(ct_module_forward(&y, net, x));
  ck_assert_ct_ok(ct_sum(&loss, y, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(loss, NULL));
  ct_release(loss);
  ct_release(y);
  ct_tensor *w_old = ct_module_get_parameter(net, "head.0.weight"), *g_old = NULL;
  ck_assert_ct_ok(ct_grad(&g_old, w_old));
  ck_assert_ct_ok(ct_module_to(net, d2));
  ct_tensor *ps[16];
  int n = 0;
  ck_assert_ct_ok(ct_module_parameters(ps, 16, &n, net));
  for (int i = 0; i < n; i++) {
    ck_assert_ptr_eq(ct_tensor_device(ps[i]), d2);
    ck_assert(ct_is_leaf(ps[i]) && ct_requires_grad(ps[i]));
  }
  ct_tensor *w = ct_module_get_parameter(net, "head.0.weight"), *g = NULL;
  ck_assert_ct_ok(ct_grad(&g, w));
  ck_assert_ptr_nonnull(g);
  ck_assert_ptr_eq(ct_tensor_device(g), d2);
  assert_equal(g, g_old, "moved gradient");
  ct_release(g);
  ct_release(g_old);
  ck_assert_ptr_eq(ct_tensor_device(ct_module_get_buffer(net, "features.1.running_var")), d2);
  /* Same values (the state dict taken before holds the old tensors). */
  ct_safetensors *after = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&after, net));
  for (size_t i = 0; i < ct_safetensors_count(after); i++) {
    ct_tensor *a = NULL, *b = NULL;
    ck_assert_ct_ok(ct_safetensors_at(&a, after, i));
    ck_assert_ct_ok(ct_safetensors_at(&b, before, i));
    assert_equal(a, b, ct_safetensors_name(after, i));
    ct_release(b);
    ct_release(a);
  }
  ct_safetensors_free(after);
  ct_safetensors_free(before);
  /* Train a few SGD steps on d2: the loss goes down. */
  ct_release(x);
  ck_assert_ct_ok(ct_randn(&x, d2, CT_F32, 4, (int64_t[]){8, 1, 8, 8}));
  ct_tensor *target = NULL;
  ck_assert_ct_ok(ct_zeros(&target, d2, CT_F32, 2, (int64_t[]){8, 3}));
  ct_optimizer *opt = NULL;
  ck_assert_ct_ok(ct_sgd_new(&opt, ps, n, 0.05, 0.0, 0.0, false));
  ck_assert_ct_ok(ct_module_eval(net)); /* deterministic: no dropout */
  double first = 0, last = 0;
  for (int step = 0; step < 5; step++) {
    ck_assert_ct_ok(ct_optimizer_zero_grad(opt));
    ck_assert_ct_ok(ct_module_forward(&y, net, x));
    ck_assert_ct_ok(ct_mse_loss(&loss, y, target, CT_REDUCTION_MEAN));
    ck_assert_ct_ok(ct_backward(loss, NULL));
    ck_assert_ct_ok(ct_optimizer_step(opt));
    float v = 0;
    ck_assert_ct_ok(ct_to_host(loss, &v, sizeof v));
    if (step == 0) first = v;
    last = v;
    ct_release(loss);
    ct_release(y);
  }
  ck_assert_double_lt(last, first);
  ct_optimizer_free(opt);
  ct_release(target);
  ct_release(x);
  ct_module_release(net);
}

START_TEST(module_to_same_device_keeps_everything) {
  ct_device *d = ct_test_device();
  ct_module *lin = NULL;
  ck_assert_ct_ok(ct_module_linear(&lin, d, 3, 2, true));
  ct_tensor *w = ct_module_get_parameter(lin, "weight");
  ck_assert_ct_ok(ct_module_to(lin, d));
  ck_assert_ptr_eq(ct_module_get_parameter(lin, "weight"), w);
  ck_assert_ct_status(ct_module_to(lin, NULL), CT_ERR_INVALID_ARGUMENT);
  ct_module_release(lin);
  move_and_train(d, d);
}
END_TEST

START_TEST(module_to_another_device) {
  ct_device *d0 = NULL, *d1 = NULL;
  if (!ct_test_two_devices(&d0, &d1, "a module moved to another device")) return;
  move_and_train(d0, d1);
}
END_TEST

/* ct_module_to_dtype: model.half() / .bfloat16() / .float(), checked against ct_cast of each
 * tensor, the forward in the new dtype against the f32 one, and the errors. */
START_TEST(module_to_dtype_casts_floating_tensors) {
  ct_device *d = ct_test_device();
  ct_module *net = loaded_net(d);
  ck_assert_ct_ok(ct_module_eval(net));
  ct_tensor *x = NULL, *y32 = NULL, *loss = NULL;
  ck_assert_ct_ok(ct_randn(&x, d, CT_F32, 4, (int64_t[]){4, 1, 8, 8}));
  ck_assert_ct_ok(ct_module_forward(&y32, net, x));
  ck_assert_ct_ok(ct_sum(&loss, y32, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(loss, NULL)); /* a gradient to cast with its parameter */
  ct_release(loss);
  ct_safetensors *before = NULL;
  ck_assert_ct_ok(ct_module_state_dict(&before, net));
  ct_tensor *g32 = NULL;
  ck_assert_ct_ok(ct_grad(&g32, ct_module_get_parameter(net, "head.0.weight")));
  ct_tensor *nbt = ct_module_get_buffer(net, "features.1.num_batches_tracked");

  /* Refused, and nothing changed: an integer dtype, an invalid one, NULL. */
  ck_assert_ct_status(ct_module_to_dtype(net, CT_I32), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_to_dtype(net, (ct_dtype)99), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_module_to_dtype(NULL, CT_F16), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ct_tensor_dtype(ct_module_get_parameter(net, "head.0.weight")), CT_F32);
  if (!ct_device_properties(d)->fp64) { /* f64 unsupported: an error, nothing half-cast */
    ck_assert_int_ne(ct_module_to_dtype(net, CT_F64), CT_OK);
    ck_assert_int_eq(ct_tensor_dtype(ct_module_get_parameter(net, "features.0.weight")), CT_F32);
  }
  ck_assert_ct_ok(ct_module_to_dtype(net, CT_F32)); /* already f32: the same tensors */
  ck_assert_ptr_eq(ct_module_get_buffer(net, "features.1.num_batches_tracked"), nbt);

  const ct_dtype dts[2] = {CT_F16, CT_BF16};
  for (int k = 0; k < 2; k++) {
    if (k == 1) ck_assert_ct_ok(ct_module_to_dtype(net, CT_F32)); /* f32 again, then the f32 values */
    if (k == 1) ck_assert_ct_ok(ct_module_load_state_dict_from(net, before, true));
    ck_assert_ct_ok(ct_module_to_dtype(net, dts[k]));
    /* Every floating tensor is ct_cast of the old one; num_batches_tracked stays i64. */
    ct_safetensors *after = NULL;
    ck_assert_ct_ok(ct_module_state_dict(&after, net));
    ck_assert_uint_eq(ct_safetensors_count(after), ct_safetensors_count(before));
    for (size_t i = 0; i < ct_safetensors_count(after); i++) {
      ct_tensor *a = NULL, *b = NULL, *want = NULL;
      ck_assert_ct_ok(ct_safetensors_at(&a, after, i));
      ck_assert_ct_ok(ct_safetensors_at(&b, before, i));
      const bool fl = ct_dtype_is_floating_point(ct_tensor_dtype(b));
      ck_assert_int_eq(ct_tensor_dtype(a), fl ? dts[k] : ct_tensor_dtype(b));
      ck_assert_ct_ok(ct_cast(&want, b, ct_tensor_dtype(a)));
      assert_equal(a, want, ct_safetensors_name(after, i));
      ct_release(want);
      ct_release(b);
      ct_release(a);
    }
    ct_safetensors_free(after);
    ck_assert_ptr_eq(ct_module_get_buffer(net, "features.1.num_batches_tracked"), nbt);
    /* Parameters stay leaves that require grad; the gradient was cast with its parameter. */
    ct_tensor *ps[16];
    int n = 0;
    ck_assert_ct_ok(ct_module_parameters(ps, 16, &n, net));
    for (int i = 0; i < n; i++) ck_assert(ct_is_leaf(ps[i]) && ct_requires_grad(ps[i]));
    if (k == 0) {
      ct_tensor *g = NULL, *want = NULL;
      ck_assert_ct_ok(ct_grad(&g, ct_module_get_parameter(net, "head.0.weight")));
      ck_assert_ptr_nonnull(g);
      ck_assert_ct_ok(ct_cast(&want, g32, CT_F16));
      assert_equal(g, want, "cast gradient");
      ct_release(want);
      ct_release(g);
    }
    /* The forward in the new dtype: close to the f32 one (f16 keeps 11 significant bits, bf16 8;
     * every op computes in f32 and rounds its output once, through 7 layers). */
    ct_tensor *xh = NULL, *yh = NULL;
    ck_assert_ct_ok(ct_cast(&xh, x, dts[k]));
    ck_assert_ct_ok(ct_module_forward(&yh, net, xh));
    ck_assert_int_eq(ct_tensor_dtype(yh), dts[k]);
    ct_test_assert_close(yh, y32, k == 0 ? 2e-2 : 1e-1, "forward in the cast model");
    ct_release(yh);
    ct_release(xh);
  }
  /* A shared parameter stays shared (the tied-weights case). */
  ct_module *a = NULL, *seq = NULL;
  ck_assert_ct_ok(ct_module_linear(&a, d, 3, 3, false));
  ck_assert_ct_ok(ct_module_sequential(&seq, (ct_module *[]){a, a}, 2));
  ck_assert_ct_ok(ct_module_to_dtype(seq, CT_BF16));
  ck_assert_ptr_eq(ct_module_get_parameter(seq, "0.weight"), ct_module_get_parameter(seq, "1.weight"));
  ck_assert_int_eq(ct_tensor_dtype(ct_module_get_parameter(seq, "1.weight")), CT_BF16);
  ct_module_release(seq);
  ct_module_release(a);
  ct_release(g32);
  ct_safetensors_free(before);
  ct_release(y32);
  ct_release(x);
  ct_module_release(net);
}
END_TEST

int main(int argc, char **argv) {
  Suite *s = suite_create("module");
  if (argc > 1 && !strcmp(argv[1], "two")) {
    tcase_add_test(ct_test_case(s, "two devices", 600), module_to_another_device);
    return ct_test_run(s);
  }
  TCase *tc = ct_test_case(s, "pytorch", 600);
  tcase_add_test(tc, state_dict_names_match_pytorch);
  tcase_add_test(tc, pytorch_checkpoint_forward_and_gradients);
  tcase_add_test(tc, each_module_matches_pytorch);
  tcase_add_test(tc, batch_norm_train_then_eval);
  tcase_add_test(tc, activations_match_pytorch);
  tc = ct_test_case(s, "state", 600);
  tcase_add_test(tc, dropout_follows_the_training_flag);
  tcase_add_test(tc, load_errors_strict_and_not);
  tcase_add_test(tc, save_load_round_trip);
  tcase_add_test(tc, default_initialization);
  tc = ct_test_case(s, "structure", 600);
  tcase_add_test(tc, user_modules);
  tcase_add_test(tc, user_forward_inside_a_scope);
  tcase_add_test(tc, sequential_and_lists);
  tc = ct_test_case(s, "devices", 600);
  tcase_add_test(tc, module_to_same_device_keeps_everything);
  tcase_add_test(tc, module_to_dtype_casts_floating_tensors);
  return ct_test_run(s);
}
