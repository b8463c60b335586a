/* ct_scaled_dot_product_attention against PyTorch (data/attention_ref.h, made by
 * data/gen_attention.py): no mask, bool and additive masks with fully masked rows (zeros, not
 * NaN), causal with L < S and L > S, causal with a mask, an explicit scale, broadcast batch
 * dims, a transposed k, no keys, no queries, an empty batch, E = 0, f16, bf16 (with a bf16
 * additive mask) and f64; S a multiple of 8 without a mask (the softmax's vector path), causal
 * with L < S and L > S, in f32 and f64; a mask with more batch dims than q, k, v; the memory bound; and the
 * errors.
 *
 * Tolerances. The reference is the f64 computation on the same (f32-representable) inputs. Each
 * output is a convex combination of v's rows: f32 scores are within a few ulps of |s| (|s| < 10
 * here), exp turns that into a relative error of the weights of some 10 eps32, so the output is
 * within ~ 20 eps32 max|v|: 2e-5 (1 + max|v|) leaves a margin of ~ 8x. f64 likewise with 1e-12.
 * f16: the reference is PyTorch's f16 result, which rounds its scores and weights to f16
 * (2^-11 relative) while we compute in f32 and round once: 5e-3 (1 + max|v|), a few f16 ulps of
 * the scores' effect; bf16 likewise with its 2^-8: 4e-2 (1 + max|v|). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ct_fixture.h"
#include "ct_test.h"
#include "device/device.h"
#include "linalg/linalg.h"
#include "nn/nn.h"

#include "data/attention_ref.h"

#define NCASES ((int)(sizeof sdpa_cases / sizeof sdpa_cases[0]))

static ct_tensor *make(ct_device *d, const struct sdpa_t *t) {
  return ct_test_from_doubles(d, t->dt, t->ndim, t->shape, t->v);
}

/* t's values stored with the last two dims swapped, returned as the transposed view. */
static ct_tensor *make_transposed(ct_device *d, const struct sdpa_t *t) {
  int nd = t->ndim;
  int64_t r = t->shape[nd - 2], c = t->shape[nd - 1], batch = ct_test_numel(nd - 2, t->shape);
  int64_t sh[4];
  memcpy(sh, t->shape, sizeof sh);
  sh[nd - 2] = c;
  sh[nd - 1] = r;
  double *tv = malloc(sizeof(double) * (size_t)(batch * r * c + 1));
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++) tv[b * r * c + j * r + i] = t->v[b * r * c + i * c + j];
  ct_tensor *base = ct_test_from_doubles(d, t->dt, nd, sh, tv), *v = NULL;
  ck_assert_ct_ok(ct_transpose(&v, base, -2, -1));
  ct_release(base);
  free(tv);
  return v;
}

static void check_case(const struct sdpa_case *c) {
  ct_device *d = ct_test_device();
  if (c->q.dt == CT_F64 && !ct_device_properties(d)->fp64) return;
  ct_tensor *q = make(d, &c->q), *k = c->view == 'k' ? make_transposed(d, &c->k) : make(d, &c->k),
            *v = make(d, &c->v), *m = c->has_mask ? make(d, &c->mask) : NULL, *o = NULL;
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&o, q, k, v, m, c->causal, c->scale));
  ck_assert_int_eq(ct_tensor_dtype(o), c->out.dt);
  ck_assert_int_eq(ct_tensor_ndim(o), c->out.ndim);
  for (int i = 0; i < c->out.ndim; i++) ck_assert_int_eq(ct_tensor_shape(o)[i], c->out.shape[i]);
  int64_t n = ct_test_numel(c->out.ndim, c->out.shape);
  double vmax = 0;
  for (int64_t i = 0; i < ct_test_numel(c->v.ndim, c->v.shape); i++) vmax = fmax(vmax, fabs(c->v.v[i]));
  double rel = c->q.dt == CT_F16 ? 5e-3 : c->q.dt == CT_BF16 ? 4e-2 : c->q.dt == CT_F64 ? 1e-12 : 2e-5;
  double *res = ct_test_to_doubles(o);
  for (int64_t i = 0; i < n; i++) {
    double got = res[i], want = c->out.v[i];
    ck_assert_msg(fabs(got - want) <= rel * (1 + vmax), "%s [%lld]: %.9g, expected %.9g", c->name,
                  (long long)i, got, want);
  }
  free(res);
  ct_release(q);
  ct_release(k);
  ct_release(v);
  ct_release(m);
  ct_release(o);
}

START_TEST(test_reference) { check_case(&sdpa_cases[_i]); }
END_TEST

/* Every reference case with the host softmax at 4, 8 and 16 lanes (each the widest the CPU
 * has up to that: the default run takes the widest only). */
START_TEST(test_lane_widths) {
  static const int widths[] = {4, 8, 16};
  ct__sdpa_host_lanes = widths[_i];
  for (int i = 0; i < NCASES; i++) check_case(&sdpa_cases[i]);
  ct__sdpa_host_lanes = 0;
}
END_TEST

/* The only large temporary is the scores' block, L x S: the peak growth over the call stays
 * below scores + output + 2 MiB (one large-block rounding of the allocator), while a second
 * score-sized temporary would add another 4 MiB (on the host route; see below for CLBlast's). */
START_TEST(test_memory_bound) {
  ct_device *d = ct_test_device();
  const int64_t L = 1024, S = 1024, E = 8;
  int64_t qs[2] = {L, E}, ks[2] = {S, E};
  ct_tensor *q = NULL, *k = NULL, *v = NULL, *o = NULL;
  ck_assert_ct_ok(ct_randn_seeded(&q, d, CT_F32, 2, qs, 1, 0));
  ck_assert_ct_ok(ct_randn_seeded(&k, d, CT_F32, 2, ks, 1, 1));
  ck_assert_ct_ok(ct_randn_seeded(&v, d, CT_F32, 2, ks, 1, 2));
  ct_memory_stats before = {.size = sizeof before}, after = {.size = sizeof after};
  ck_assert_ct_ok(ct_memory_reset_peak(d));
  ck_assert_ct_ok(ct_device_get_memory_stats(&before, d));
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&o, q, k, v, NULL, true, NAN));
  ck_assert_ct_ok(ct_device_get_memory_stats(&after, d));
  uint64_t grew = after.peak_allocated_bytes - before.allocated_bytes;
  uint64_t bound = (uint64_t)(L * S + L * E) * 4 + (2u << 20);
  /* On the CLBlast route (a GPU's, and attention-kernels'), the scores' product is CLBlast's
   * indirect GEMM, which pads the result into a scratch buffer of the scores' size besides its
   * operands' copies: still O(L S), two more score blocks at most. */
  ct_gemm_route route;
  ck_assert_ct_ok(ct_gemm_route_get(&route, d));
  if (route == CT_GEMM_ROUTE_CLBLAST) bound += (uint64_t)(2 * L * S) * 4;
  ck_assert_msg(grew <= bound, "peak grew by %llu bytes (bound %llu)", (unsigned long long)grew,
                (unsigned long long)bound);
  /* Row 0 attends key 0 only (causal): the output's row 0 is v's row 0. */
  float o0[8], v0[8];
  ct_tensor *orow = NULL, *vrow = NULL;
  ck_assert_ct_ok(ct_slice(&orow, o, 0, 0, 1, 1));
  ck_assert_ct_ok(ct_slice(&vrow, v, 0, 0, 1, 1));
  ck_assert_ct_ok(ct_to_host(orow, o0, sizeof o0));
  ck_assert_ct_ok(ct_to_host(vrow, v0, sizeof v0));
  for (int i = 0; i < 8; i++) ck_assert_float_eq_tol(o0[i], v0[i], 1e-6);
  ct_release(orow);
  ct_release(vrow);
  ct_release(q);
  ct_release(k);
  ct_release(v);
  ct_release(o);
}
END_TEST

/* A mask whose batch dims exceed q's, k's and v's (PyTorch refuses; here they broadcast): each
 * batch entry equals the call with that entry's mask alone (within the f32 bound of
 * test_reference, |v| < 6: the batched and the single GEMM may sum in different orders). */
START_TEST(test_mask_batch) {
  ct_device *d = ct_test_device();
  int64_t qs[2] = {4, 8}, ks[2] = {6, 8}, vs[2] = {6, 5}, ms[3] = {3, 4, 6};
  ct_tensor *q = NULL, *k = NULL, *v = NULL, *m = NULL, *o = NULL;
  ck_assert_ct_ok(ct_randn_seeded(&q, d, CT_F32, 2, qs, 3, 0));
  ck_assert_ct_ok(ct_randn_seeded(&k, d, CT_F32, 2, ks, 3, 1));
  ck_assert_ct_ok(ct_randn_seeded(&v, d, CT_F32, 2, vs, 3, 2));
  ck_assert_ct_ok(ct_randn_seeded(&m, d, CT_F32, 3, ms, 3, 3));
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&o, q, k, v, m, false, NAN));
  ck_assert_int_eq(ct_tensor_ndim(o), 3);
  ck_assert_int_eq(ct_tensor_shape(o)[0], 3);
  double *all = ct_test_to_doubles(o);
  for (int b = 0; b < 3; b++) {
    ct_tensor *mb = NULL, *mb2 = NULL, *ob = NULL;
    ck_assert_ct_ok(ct_slice(&mb, m, 0, b, b + 1, 1));
    ck_assert_ct_ok(ct_squeeze(&mb2, mb, 0));
    ck_assert_ct_ok(ct_scaled_dot_product_attention(&ob, q, k, v, mb2, false, NAN));
    double *one = ct_test_to_doubles(ob);
    for (int i = 0; i < 20; i++) ck_assert_double_eq_tol(all[b * 20 + i], one[i], 2e-5 * 7);
    free(one);
    ct_release(mb);
    ct_release(mb2);
    ct_release(ob);
  }
  free(all);
  ct_release(q);
  ct_release(k);
  ct_release(v);
  ct_release(m);
  ct_release(o);
}
END_TEST

/* Heads as a permuted view, as a GPT block makes them ([B, T, H, E] -> [B, H, T, E]) for q, k
 * and v: the same result as from contiguous copies (within the f32 bound of test_reference). */
START_TEST(test_permuted_heads) {
  ct_device *d = ct_test_device();
  int64_t s[4] = {2, 5, 3, 4};
  const int perm[4] = {0, 2, 1, 3};
  ct_tensor *x[3] = {NULL, NULL, NULL}, *p[3] = {NULL, NULL, NULL}, *c[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    ck_assert_ct_ok(ct_randn_seeded(&x[i], d, CT_F32, 4, s, 5, (uint64_t)i));
    ck_assert_ct_ok(ct_permute(&p[i], x[i], perm));
    ck_assert_ct_ok(ct_contiguous(&c[i], p[i]));
  }
  ct_tensor *a = NULL, *b = NULL;
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&a, p[0], p[1], p[2], NULL, true, NAN));
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&b, c[0], c[1], c[2], NULL, true, NAN));
  double *ha = ct_test_to_doubles(a), *hb = ct_test_to_doubles(b);
  for (int i = 0; i < 2 * 3 * 5 * 4; i++) ck_assert_double_eq_tol(ha[i], hb[i], 2e-5 * 7);
  free(ha);
  free(hb);
  for (int i = 0; i < 3; i++) {
    ct_release(x[i]);
    ct_release(p[i]);
    ct_release(c[i]);
  }
  ct_release(a);
  ct_release(b);
}
END_TEST

/* The call fails with status want, *out NULL, and a message holding msg. */
static void expect_error(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                         const ct_tensor *m, double scale, ct_status want, const char *msg) {
  ct_tensor *r = (ct_tensor *)1;
  ck_assert_ct_status(ct_scaled_dot_product_attention(&r, q, k, v, m, false, scale), want);
  ck_assert_ptr_null(r);
  ck_assert_error_contains(msg);
  ck_assert_error_contains("ct_scaled_dot_product_attention: ");
}

START_TEST(test_errors) {
  ct_device *d = ct_test_device();
  int64_t qs[3] = {2, 4, 8}, ks[3] = {2, 6, 8}, vs[3] = {2, 6, 5}, kbad[3] = {2, 6, 7},
          vbad[3] = {2, 5, 5}, mbad[2] = {4, 5}, one[1] = {8};
  ct_tensor *q = NULL, *k = NULL, *v = NULL, *kb = NULL, *vb = NULL, *mb = NULL, *mi = NULL,
            *q1 = NULL, *q64 = NULL;
  ck_assert_ct_ok(ct_zeros(&q, d, CT_F32, 3, qs));
  ck_assert_ct_ok(ct_zeros(&k, d, CT_F32, 3, ks));
  ck_assert_ct_ok(ct_zeros(&v, d, CT_F32, 3, vs));
  ck_assert_ct_ok(ct_zeros(&kb, d, CT_F32, 3, kbad));
  ck_assert_ct_ok(ct_zeros(&vb, d, CT_F32, 3, vbad));
  ck_assert_ct_ok(ct_zeros(&mb, d, CT_BOOL, 2, mbad));
  ck_assert_ct_ok(ct_zeros(&mi, d, CT_I32, 2, mbad));
  ck_assert_ct_ok(ct_zeros(&q1, d, CT_F32, 1, one));
  ck_assert_ct_ok(ct_zeros(&q64, d, CT_F16, 3, qs));
  expect_error(q, kb, v, NULL, NAN, CT_ERR_SHAPE_MISMATCH,
               "q has shape [2, 4, 8] and k [2, 6, 7]: their last dims (E) differ");
  expect_error(q, k, vb, NULL, NAN, CT_ERR_SHAPE_MISMATCH,
               "their dims -2 (S, the number of keys) differ");
  expect_error(q, k, v, mb, NAN, CT_ERR_SHAPE_MISMATCH,
               "mask has shape [4, 5], which doesn't broadcast to the scores' shape [2, 4, 6]");
  expect_error(q, k, v, mi, NAN, CT_ERR_DTYPE_MISMATCH, "mask has dtype i32");
  expect_error(q1, k, v, NULL, NAN, CT_ERR_INVALID_ARGUMENT,
               "q has shape [8] (expected at least 2 dims");
  expect_error(q64, k, v, NULL, NAN, CT_ERR_DTYPE_MISMATCH, "k has dtype f32 but q has f16");
  expect_error(q, k, v, NULL, INFINITY, CT_ERR_INVALID_ARGUMENT, "scale is inf");
  expect_error(q, NULL, v, NULL, NAN, CT_ERR_INVALID_ARGUMENT, "argument 'k' is NULL");
  expect_error(q, k, mi, NULL, NAN, CT_ERR_DTYPE_MISMATCH, "v has dtype i32");
  ct_release(q);
  ct_release(k);
  ct_release(v);
  ct_release(kb);
  ct_release(vb);
  ct_release(mb);
  ct_release(mi);
  ct_release(q1);
  ct_release(q64);
}
END_TEST

/* Where the GEMMs take the host route, an unmasked attention is one native command
 * (attention_host.c) whose 4-D result keeps PyTorch's CPU layout: [B, H, L, Ev] over memory laid
 * out [B, L, H, Ev], so that transpose(1, 2) is contiguous and the heads' merge a view. Its
 * values are test_reference's and test_permuted_heads'. */
START_TEST(test_host_layout) {
  ct_device *d = ct_test_device();
  ct_gemm_route route;
  ck_assert_ct_ok(ct_gemm_route_get(&route, d));
  if (route != CT_GEMM_ROUTE_HOST || !d->native_kernels) return;
  int64_t s[4] = {2, 3, 5, 4};
  ct_tensor *q = NULL, *o = NULL, *t = NULL, *m = NULL;
  ck_assert_ct_ok(ct_randn_seeded(&q, d, CT_F32, 4, s, 1, 0));
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&o, q, q, q, NULL, true, NAN));
  ck_assert(!ct_tensor_is_contiguous(o));
  ck_assert_ct_ok(ct_transpose(&t, o, 1, 2));
  ck_assert(ct_tensor_is_contiguous(t));
  /* With a mask, the kernels run: a contiguous result. */
  ck_assert_ct_ok(ct_ones(&m, d, CT_BOOL, 2, (int64_t[]){5, 5}));
  ct_release(o);
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&o, q, q, q, m, false, NAN));
  ck_assert(ct_tensor_is_contiguous(o));
  ct_release(q);
  ct_release(o);
  ct_release(t);
  ct_release(m);
}
END_TEST

/* "team": every host attention is cut into parts that the device's second worker shares
 * (host_native.c); each command waits for the helper to join first. Its products go through
 * CBLAS (the default run takes ct__sgemm_small where the CPU has AVX2 and FMA). */
static void team_everything(void) {
  ct__sgemm_small_off = 1;
  ct__sdpa_split_min = 1;
  ct__team_share_wait_ns = 2000000000;
}

/* A NaN in one query's row makes that row's output NaN (its scores are all NaN), as in
 * PyTorch, also when every score of the row is NaN; the other rows stay finite. Causal and
 * not, at each width of the host softmax, on every path (the test runs in each of the attention
 * modes). */
START_TEST(test_nan_row) {
  ct_device *d = ct_test_device();
  enum { L = 20, E = 16 };
  float qh[L * E];
  for (int i = 0; i < L * E; i++) qh[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
  qh[3 * E + 5] = NAN; /* row 3 */
  ct_tensor *q = NULL, *k = NULL, *o = NULL;
  ck_assert_ct_ok(ct_from_host(&q, d, CT_F32, 3, (int64_t[]){1, L, E}, qh));
  ck_assert_ct_ok(ct_randn_seeded(&k, d, CT_F32, 3, (int64_t[]){1, L, E}, 1, 9));
  for (int c = 0; c < 8; c++) {
    /* c: causal or not (c % 2) at each width of the host softmax (c / 2: the CPU's own, 4, 8, 16) */
    ct__sdpa_host_lanes = (int[]){0, 4, 8, 16}[c / 2];
    ck_assert_ct_ok(ct_scaled_dot_product_attention(&o, q, k, k, NULL, c % 2, NAN));
    float oh[L * E];
    ck_assert_ct_ok(ct_to_host(o, oh, sizeof oh));
    for (int i = 0; i < L; i++)
      for (int j = 0; j < E; j++) {
        if (i == 3)
          ck_assert_msg(isnan(oh[i * E + j]), "case %d: row 3 col %d is %g, not NaN", c, j, oh[i * E + j]);
        else ck_assert_msg(isfinite(oh[i * E + j]), "case %d: row %d col %d is %g", c, i, j, oh[i * E + j]);
      }
    ct_release(o);
  }
  ct__sdpa_host_lanes = 0;
  ct_release(q);
  ct_release(k);
}
END_TEST

/* Team mode: the helper ran parts of a host attention. */
START_TEST(test_team_helped) {
  ct_device *d = ct_test_device();
  ct_gemm_route route;
  ck_assert_ct_ok(ct_gemm_route_get(&route, d));
  if (route != CT_GEMM_ROUTE_HOST || !d->native_kernels || ct_device_properties(d)->compute_units < 2) return;
  ct_tensor *q = NULL, *o = NULL;
  ck_assert_ct_ok(ct_randn_seeded(&q, d, CT_F32, 4, (int64_t[]){2, 4, 16, 8}, 1, 3));
  ck_assert_ct_ok(ct_scaled_dot_product_attention(&o, q, q, q, NULL, true, NAN));
  float host[2 * 4 * 16 * 8];
  ck_assert_ct_ok(ct_to_host(o, host, sizeof host)); /* waits for the command */
  ck_assert_msg(atomic_load(&ct__team_parts_helped) > 0, "no part of the attention ran on the helper");
  ct_release(q);
  ct_release(o);
}
END_TEST

int main(int argc, char **argv) {
  Suite *s = suite_create("attention");
  TCase *tc = tcase_create("reference");
  if (argc > 1 && strcmp(argv[1], "team") == 0) tcase_add_checked_fixture(tc, team_everything, NULL);
  tcase_add_loop_test(tc, test_reference, 0, NCASES);
  tcase_add_test(tc, test_host_layout);
  tcase_add_test(tc, test_nan_row);
  tcase_add_loop_test(tc, test_lane_widths, 0, 3);
  if (argc > 1 && strcmp(argv[1], "team") == 0) tcase_add_test(tc, test_team_helped);
  suite_add_tcase(s, tc);
  tc = tcase_create("mask batch");
  tcase_add_test(tc, test_mask_batch);
  tcase_add_test(tc, test_permuted_heads);
  suite_add_tcase(s, tc);
  tc = tcase_create("memory");
  tcase_add_test(tc, test_memory_bound);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_test(tc, test_errors);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
