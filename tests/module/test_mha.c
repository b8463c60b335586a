/* ct_module_multihead_attention against PyTorch's nn.MultiheadAttention (data/mha_state.safetensors
 * and data/mha_ref.safetensors, made by make_mha_fixture.py beside this file): a state_dict
 * written by safetensors.torch.save_file loaded strictly, forward values (causal self-attention,
 * cross attention without a mask, with a bool and a float mask, batch_first false, unbatched)
 * and the gradients of the parameters and inputs; PyTorch's default initialization and the
 * argument errors.
 *
 * Tolerance: the same f32 ops as PyTorch in other summation orders over 16-term dot products
 * and softmaxes over at most 7 keys: |got - want| <= 2e-5 + 2e-5 |want| (a swapped head, weight
 * slice or mask sense moves values by 1e-2 or more); gradients 1e-4 (sums over the batch and
 * the positions). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ct_fixture.h"

#define TOL 2e-5
#define GRAD_TOL 1e-4

static void data_path(char *path, size_t size, const char *file) {
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  snprintf(path, size, "%s/tests/module/data/%s", root ? root : ".", file);
}

static ct_safetensors *load_ref(ct_device *d) {
  char path[1024];
  data_path(path, sizeof path, "mha_ref.safetensors");
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(ct_safetensors_load(&st, path, d));
  return st;
}

/* A MultiheadAttention(16, 4) with the fixture's state dict, loaded strictly from PyTorch's file. */
static ct_module *pytorch_mha(ct_device *d, bool batch_first) {
  ct_module *m = NULL;
  ck_assert_ct_ok(ct_module_multihead_attention(&m, d, 16, 4, 0.0, true, batch_first));
  char path[1024];
  data_path(path, sizeof path, "mha_state.safetensors");
  ck_assert_ct_ok(ct_module_load_state_dict(m, path, true));
  return m;
}

/* Backward of sum(y * g); then each parameter's gradient against prefix.grad.<name>. */
static void check_param_grads(ct_module *m, const ct_tensor *y, const ct_safetensors *ref, const char *prefix) {
  ct_tensor *g = ct_test_fx(ref, "g"), *yg = NULL, *s = NULL;
  ck_assert_ct_ok(ct_mul(&yg, y, g));
  ck_assert_ct_ok(ct_sum(&s, yg, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  const char *names[8];
  ct_tensor *params[8];
  int n = 0;
  ck_assert_ct_ok(ct_module_named_parameters(names, params, 8, &n, m));
  ck_assert_int_eq(n, 4);
  for (int i = 0; i < n; i++) {
    ct_tensor *grad = NULL, *want = ct_test_fx(ref, "%s.grad.%s", prefix, names[i]);
    ck_assert_ct_ok(ct_grad(&grad, params[i]));
    ck_assert_ptr_nonnull(grad);
    ct_test_assert_close(grad, want, GRAD_TOL, names[i]);
    ct_release(grad);
    ct_release(want);
  }
  ct_release(s);
  ct_release(yg);
  ct_release(g);
}

static void check_input_grad(ct_tensor *x, const ct_safetensors *ref, const char *name) {
  ct_tensor *grad = NULL, *want = ct_test_fx(ref, "%s", name);
  ck_assert_ct_ok(ct_grad(&grad, x));
  ck_assert_ptr_nonnull(grad);
  ct_test_assert_close(grad, want, GRAD_TOL, name);
  ct_release(grad);
  ct_release(want);
}

static ct_tensor *leaf(const ct_safetensors *ref, const char *name) {
  ct_tensor *t = ct_test_fx(ref, "%s", name);
  ck_assert_ct_ok(ct_set_requires_grad(t, true));
  return t;
}

START_TEST(defaults_and_names) {
  ct_device *d = ct_test_device();
  ct_manual_seed(1);
  ct_module *m = NULL;
  ck_assert_ct_ok(ct_module_multihead_attention(&m, d, 16, 4, 0.0, true, false));
  ck_assert_str_eq(ct_module_type_name(m), "MultiheadAttention");
  ck_assert_str_eq(ct_module_type_name(ct_module_get_submodule(m, "out_proj")), "Linear");
  const char *names[8];
  ct_tensor *params[8];
  int n = 0;
  ck_assert_ct_ok(ct_module_named_parameters(names, params, 8, &n, m));
  static const char *const want[] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
  static const int64_t rows[] = {48, 48, 16, 16};
  ck_assert_int_eq(n, 4);
  for (int i = 0; i < 4; i++) {
    ck_assert_str_eq(names[i], want[i]);
    ck_assert_int_eq(ct_tensor_shape(params[i])[0], rows[i]);
  }
  /* xavier_uniform_: U(-b, b), b = sqrt(6 / (fan_in + fan_out)) = sqrt(6 / 64); biases zero. */
  double *w = ct_test_to_doubles(params[0]), *b = ct_test_to_doubles(params[1]), *ob = ct_test_to_doubles(params[3]);
  double bound = sqrt(6.0 / 64.0), mx = 0;
  for (int i = 0; i < 48 * 16; i++) {
    ck_assert_msg(fabs(w[i]) <= bound, "in_proj_weight[%d] = %g outside +-%g", i, w[i], bound);
    mx = fmax(mx, fabs(w[i]));
  }
  ck_assert_msg(mx > 0.9 * bound, "in_proj_weight's largest |value| %g, bound %g", mx, bound); /* 768 draws */
  for (int i = 0; i < 48; i++) ck_assert_double_eq(b[i], 0.0);
  for (int i = 0; i < 16; i++) ck_assert_double_eq(ob[i], 0.0);
  free(w);
  free(b);
  free(ob);
  ct_module_release(m);

  ck_assert_ct_ok(ct_module_multihead_attention(&m, d, 16, 2, 0.0, false, true));
  ck_assert_ct_ok(ct_module_named_parameters(names, params, 8, &n, m));
  ck_assert_int_eq(n, 2); /* bias=False: in_proj_weight, out_proj.weight */
  ct_module_release(m);
  ck_assert_ct_status(ct_module_multihead_attention(&m, d, 10, 4, 0.0, true, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(m);
  ck_assert_error_contains("num_heads = 4");
  ck_assert_ct_status(ct_module_multihead_attention(&m, d, 16, 4, 0.1, true, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("dropout");
}
END_TEST

START_TEST(causal_self_attention_matches_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *ref = load_ref(d);
  ct_module *m = pytorch_mha(d, true);
  ct_tensor *x = leaf(ref, "x"), *y = NULL, *want = ct_test_fx(ref, "causal.y");
  ck_assert_ct_ok(ct_module_multihead_attention_forward(&y, m, x, x, x, NULL, true));
  ct_test_assert_close(y, want, TOL, "causal.y");
  check_param_grads(m, y, ref, "causal");
  check_input_grad(x, ref, "causal.grad.x");
  /* PyTorch's own call passes the causal mask too: the same values with it. */
  ct_tensor *ones = NULL, *mask = NULL, *y2 = NULL;
  ck_assert_ct_ok(ct_ones(&ones, d, CT_BOOL, 2, (int64_t[]){5, 5}));
  ck_assert_ct_ok(ct_triu(&mask, ones, 1)); /* true above the diagonal: not allowed */
  ck_assert_ct_ok(ct_module_multihead_attention_forward(&y2, m, x, x, x, mask, true));
  ct_test_assert_close(y2, want, TOL, "causal.y with the mask");
  ct_release(y2);
  ck_assert_ct_ok(ct_module_multihead_attention_forward(&y2, m, x, x, x, mask, false));
  ct_test_assert_close(y2, want, TOL, "causal.y from the mask alone");
  ct_release(y2);
  ct_release(mask);
  ct_release(ones);
  ct_release(want);
  ct_release(y);
  ct_release(x);
  ct_module_release(m);
  ct_safetensors_free(ref);
}
END_TEST

START_TEST(cross_attention_and_masks_match_pytorch) {
  ct_device *d = ct_test_device();
  ct_safetensors *ref = load_ref(d);
  ct_module *m = pytorch_mha(d, true);
  ct_tensor *q = leaf(ref, "q"), *kv = leaf(ref, "kv"), *y = NULL, *want = ct_test_fx(ref, "cross.y");
  ct_tensor *fmask = ct_test_fx(ref, "fmask"), *bmask = ct_test_fx(ref, "bmask");
  {
    const bool grad = ct_set_grad_enabled(false);
    ck_assert_ct_ok(ct_module_multihead_attention_forward(&y, m, q, kv, kv, NULL, false));
    ct_test_assert_close(y, want, TOL, "cross.y");
    ct_release(y);
    ct_release(want);
    want = ct_test_fx(ref, "fmask.y");
    ck_assert_ct_ok(ct_module_multihead_attention_forward(&y, m, q, kv, kv, fmask, false));
    ct_test_assert_close(y, want, TOL, "fmask.y");
    ct_release(y);
    ct_release(want);
    ct_set_grad_enabled(grad);
  }
  want = ct_test_fx(ref, "bmask.y");
  ck_assert_ct_ok(ct_module_multihead_attention_forward(&y, m, q, kv, kv, bmask, false));
  ct_test_assert_close(y, want, TOL, "bmask.y");
  check_param_grads(m, y, ref, "cross");
  check_input_grad(q, ref, "cross.grad.q");
  check_input_grad(kv, ref, "cross.grad.kv");
  ct_release(y);
  ct_release(want);
  ct_release(bmask);
  ct_release(fmask);
  ct_release(kv);
  ct_release(q);
  ct_module_release(m);
  ct_safetensors_free(ref);
}
END_TEST

START_TEST(sequence_first_and_unbatched) {
  ct_device *d = ct_test_device();
  ct_safetensors *ref = load_ref(d);
  ct_module *m = pytorch_mha(d, false);
  ct_tensor *q = ct_test_fx(ref, "q"), *kv = ct_test_fx(ref, "kv"), *want = ct_test_fx(ref, "cross.y");
  ct_tensor *qt = NULL, *kvt = NULL, *y = NULL, *yt = NULL;
  ck_assert_ct_ok(ct_transpose(&qt, q, 0, 1)); /* [L, N, E] */
  ck_assert_ct_ok(ct_transpose(&kvt, kv, 0, 1));
  ck_assert_ct_ok(ct_module_multihead_attention_forward(&y, m, qt, kvt, kvt, NULL, false));
  ck_assert_int_eq(ct_tensor_shape(y)[0], 5);
  ck_assert_ct_ok(ct_transpose(&yt, y, 0, 1));
  ct_test_assert_close(yt, want, TOL, "cross.y, batch_first false");
  ct_release(yt);
  ct_release(y);
  ct_release(want);
  /* Unbatched [L, E] through ct_module_forward (self-attention, no mask). */
  ct_tensor *x = ct_test_fx(ref, "x"), *x0 = NULL, *seq = NULL;
  want = ct_test_fx(ref, "seq.y");
  ck_assert_ct_ok(ct_slice(&x0, x, 0, 0, 1, 1));
  ck_assert_ct_ok(ct_reshape(&seq, x0, 2, (int64_t[]){5, 16}));
  ck_assert_ct_ok(ct_module_forward(&y, m, seq));
  ct_test_assert_close(y, want, TOL, "seq.y");
  ct_release(y);
  /* Errors: a last dim other than E, and a module of another type. */
  ct_tensor *bad = NULL;
  ck_assert_ct_ok(ct_slice(&bad, seq, 1, 0, 8, 1));
  ck_assert_ct_status(ct_module_multihead_attention_forward(&y, m, bad, bad, bad, NULL, false), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("embed_dim is 16");
  ct_module *lin = NULL;
  ck_assert_ct_ok(ct_module_linear(&lin, d, 16, 16, true));
  ck_assert_ct_status(ct_module_multihead_attention_forward(&y, lin, seq, seq, seq, NULL, false),
                      CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("not a MultiheadAttention");
  ct_module_release(lin);
  ct_release(bad);
  ct_release(want);
  ct_release(seq);
  ct_release(x0);
  ct_release(x);
  ct_release(kvt);
  ct_release(qt);
  ct_release(kv);
  ct_release(q);
  ct_module_release(m);
  ct_safetensors_free(ref);
}
END_TEST

int main(void) {
  Suite *s = suite_create("module-mha");
  TCase *tc = ct_test_case(s, "pytorch", 600);
  tcase_add_test(tc, defaults_and_names);
  tcase_add_test(tc, causal_self_attention_matches_pytorch);
  tcase_add_test(tc, cross_attention_and_masks_match_pytorch);
  tcase_add_test(tc, sequence_first_and_unbatched);
  return ct_test_run(s);
}
