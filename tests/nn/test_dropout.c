/* ct_dropout: the mask is ct_rand()'s bits (kept exactly where the f32 uniform from the same
 * (seed, offset) is >= p), kept values are x / (1 - p), the global state advances by one per
 * drawing call, statistics of the keep rate, strided input, f16, PyTorch's x * 0 for dropped
 * NaN/inf, the no-draw paths (eval, p = 0: the input itself; p = 1), errors; and with argv[1]
 * "two" (POCL_DEVICES="pthread pthread") identical results on two devices. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ct_test.h"
#include "tensor/tensor.h"

static int two_devices;

static float *to_f32(const ct_tensor *t) {
  ct_tensor *c = NULL;
  ck_assert_ct_ok(ct_cast(&c, t, CT_F32));
  float *h = malloc(sizeof(float) * (size_t)(ct_numel(t) + 1));
  ck_assert_ct_ok(ct_to_host(c, h, sizeof(float) * (size_t)ct_numel(t)));
  ct_release(c);
  return h;
}

/* x of n values 1 + i % 7 (never 0, so a kept element is nonzero). */
static ct_tensor *ramp(ct_device *d, ct_dtype dt, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *h = malloc(sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) h[i] = (float)(1 + i % 7);
  ct_tensor *t = NULL, *c = NULL;
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, ndim, shape, h));
  ck_assert_ct_ok(ct_cast(&c, t, dt));
  ct_release(t);
  free(h);
  return c;
}

/* The mask is ct_rand's f32 uniforms >= p; kept values x * (1 / (1 - p)) rounded once. */
START_TEST(test_mask_is_rand_bits) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {37, 29};
  const double p = 0.3;
  ct_tensor *x = ramp(d, CT_F32, 2, shape), *y = NULL, *u = NULL;
  ct_manual_seed(1234);
  ck_assert_ct_ok(ct_dropout(&y, x, p, true));
  uint64_t seed, off;
  ck_assert_ct_ok(ct_rng_get_state(&seed, &off));
  ck_assert_uint_eq(seed, 1234);
  ck_assert_uint_eq(off, 1);
  ck_assert_ct_ok(ct_rand_seeded(&u, d, CT_F32, 2, shape, 1234, 0));
  float *hy = to_f32(y), *hu = to_f32(u), *hx = to_f32(x);
  float scale = (float)(1.0 / (1.0 - p));
  int64_t kept = 0;
  for (int i = 0; i < 37 * 29; i++) {
    bool keep = hu[i] >= (float)p;
    kept += keep;
    ck_assert_msg(hy[i] == (keep ? hx[i] * scale : 0.0f), "[%d]: %g (u %g, x %g)", i, hy[i], hu[i], hx[i]);
  }
  ck_assert_int_gt(kept, 0);
  /* f64: the same mask, values x * (1 / (1 - p)) in double. */
  if (ct_device_properties(d)->fp64) {
    ct_tensor *x64 = NULL, *y64 = NULL;
    ck_assert_ct_ok(ct_cast(&x64, x, CT_F64));
    ct_manual_seed(1234);
    ck_assert_ct_ok(ct_dropout(&y64, x64, p, true));
    double h64[37 * 29];
    ck_assert_ct_ok(ct_to_host(y64, h64, sizeof h64));
    for (int i = 0; i < 37 * 29; i++)
      ck_assert_msg(h64[i] == (hu[i] >= (float)p ? (double)hx[i] * (1.0 / (1.0 - p)) : 0.0),
                    "f64 [%d]: %g", i, h64[i]);
    ct_release(x64);
    ct_release(y64);
  }
  free(hy);
  free(hu);
  free(hx);
  ct_release(x);
  ct_release(y);
  ct_release(u);
}
END_TEST

/* The kernel's paths (kernels/random.cl, dropout_fill: 32 elements and 8 Philox blocks a
 * work-item): whole f32 tiles of a view that starts inside its buffer, the ragged last tile, an
 * evenly strided view, f64, and a (seed, offset) with high words set (the counter's and key's
 * upper lanes), each against ct_rand_seeded()'s scalar Philox from the same state. */
START_TEST(test_mask_tiles_views) {
  ct_device *d = ct_test_device();
  const int64_t n = 1000; /* 31 whole tiles and 8 elements */
  const double p = 0.375;
  const uint64_t seed = 0x9abcdef012345678ull, off = (1ull << 32) + 77;
  int64_t full[1] = {2 * n + 6}, shape[1] = {n};
  ct_tensor *base = ramp(d, CT_F32, 1, full), *u = NULL;
  ck_assert_ct_ok(ct_rand_seeded(&u, d, CT_F32, 1, shape, seed, off));
  float *hu = to_f32(u), *hb = to_f32(base), scale = (float)(1.0 / (1.0 - p));
  /* start 3, step 1 (contiguous at an offset) and start 5, step 2 (strided). */
  for (int step = 1; step <= 2; step++) {
    int64_t start = step == 1 ? 3 : 5;
    ct_tensor *x = NULL, *y = NULL;
    ck_assert_ct_ok(ct_slice(&x, base, 0, start, start + step * n, step));
    ck_assert_int_eq(ct_numel(x), n);
    ct_rng_set_state(seed, off);
    ck_assert_ct_ok(ct_dropout(&y, x, p, true));
    float *hy = to_f32(y);
    for (int64_t i = 0; i < n; i++) {
      float xv = hb[start + step * i];
      ck_assert_msg(hy[i] == (hu[i] >= (float)p ? xv * scale : 0.0f), "step %d [%lld]: %g (u %g, x %g)", step,
                    (long long)i, hy[i], hu[i], xv);
    }
    free(hy);
    if (ct_device_properties(d)->fp64 && step == 1) {
      ct_tensor *x64 = NULL, *y64 = NULL;
      ck_assert_ct_ok(ct_cast(&x64, x, CT_F64));
      ct_rng_set_state(seed, off);
      ck_assert_ct_ok(ct_dropout(&y64, x64, p, true));
      double *h64 = malloc(sizeof(double) * (size_t)n);
      ck_assert_ct_ok(ct_to_host(y64, h64, sizeof(double) * (size_t)n));
      for (int64_t i = 0; i < n; i++)
        ck_assert_msg(h64[i] == (hu[i] >= (float)p ? (double)hb[start + i] * (1.0 / (1.0 - p)) : 0.0),
                      "f64 [%lld]: %g", (long long)i, h64[i]);
      free(h64);
      ct_release(x64);
      ct_release(y64);
    }
    ct_release(x);
    ct_release(y);
  }
  free(hu);
  free(hb);
  ct_release(u);
  ct_release(base);
}
END_TEST

/* Keep rate 1 - p within 6 standard deviations over 2^17 elements (a fixed seed, so the test
 * is deterministic; the bound shows the rate is right, not luck: 6 sigma is 0.0076 here). */
START_TEST(test_statistics) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {1 << 17};
  const double p = 0.25;
  ct_tensor *x = NULL, *y = NULL;
  ck_assert_ct_ok(ct_ones(&x, d, CT_F32, 1, shape));
  ct_manual_seed(99);
  ck_assert_ct_ok(ct_dropout(&y, x, p, true));
  float *h = to_f32(y);
  int64_t kept = 0;
  double sum = 0;
  for (int i = 0; i < (1 << 17); i++) {
    ck_assert(h[i] == 0.0f || h[i] == (float)(1.0 / 0.75));
    kept += h[i] != 0.0f;
    sum += h[i];
  }
  double rate = (double)kept / (1 << 17), sigma = sqrt(p * (1 - p) / (1 << 17));
  ck_assert_msg(fabs(rate - (1 - p)) < 6 * sigma, "keep rate %g, expected %g", rate, 1 - p);
  /* The expectation of dropout(x) is x. */
  ck_assert_msg(fabs(sum / (1 << 17) - 1.0) < 6 * sigma / (1 - p), "mean %g", sum / (1 << 17));
  free(h);
  ct_release(x);
  ct_release(y);
}
END_TEST

/* The same seed gives the same bits; a strided view draws as its contiguous copy does; f16. */
START_TEST(test_determinism_strided_f16) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {16, 9};
  ct_tensor *x = ramp(d, CT_F32, 2, shape), *xt = NULL, *xc = NULL, *a = NULL, *b = NULL;
  ck_assert_ct_ok(ct_transpose(&xt, x, 0, 1));
  ck_assert_ct_ok(ct_contiguous(&xc, xt));
  ct_manual_seed(7);
  ck_assert_ct_ok(ct_dropout(&a, xt, 0.5, true));
  ct_manual_seed(7);
  ck_assert_ct_ok(ct_dropout(&b, xc, 0.5, true));
  float *ha = to_f32(a), *hb = to_f32(b);
  ck_assert_mem_eq(ha, hb, sizeof(float) * 144);
  free(ha);
  free(hb);
  ct_release(a);
  ct_release(b);
  /* f16: the same mask, values x * 2 rounded to f16 (exact here). */
  ct_tensor *x16 = ramp(d, CT_F16, 2, shape), *c = NULL, *ref = NULL;
  ct_manual_seed(7);
  ck_assert_ct_ok(ct_dropout(&c, x16, 0.5, true));
  ct_manual_seed(7);
  ck_assert_ct_ok(ct_dropout(&ref, x, 0.5, true));
  ck_assert_int_eq(ct_tensor_dtype(c), CT_F16);
  float *hc = to_f32(c), *hr = to_f32(ref);
  ck_assert_mem_eq(hc, hr, sizeof(float) * 144);
  free(hc);
  free(hr);
  ct_release(c);
  ct_release(ref);
  ct_release(x16);
  ct_release(xt);
  ct_release(xc);
  ct_release(x);
}
END_TEST

/* Dropped elements are x * 0, as PyTorch's mask product: NaN and inf give NaN. */
START_TEST(test_nonfinite) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {64};
  float h[64];
  for (int i = 0; i < 64; i++) h[i] = i % 2 ? NAN : INFINITY;
  ct_tensor *x = NULL, *y = NULL, *z = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 1, shape, h));
  ct_manual_seed(5);
  ck_assert_ct_ok(ct_dropout(&y, x, 0.5, true));
  float *hy = to_f32(y);
  for (int i = 0; i < 64; i++)
    if (i % 2) ck_assert(isnan(hy[i]));
    else ck_assert(isnan(hy[i]) || hy[i] == INFINITY);
  free(hy);
  /* p = 1: x * 0 everywhere, drawing nothing. */
  uint64_t s0, o0, s1, o1;
  ck_assert_ct_ok(ct_rng_get_state(&s0, &o0));
  ck_assert_ct_ok(ct_dropout(&z, x, 1.0, true));
  ck_assert_ct_ok(ct_rng_get_state(&s1, &o1));
  ck_assert_uint_eq(o0, o1);
  hy = to_f32(z);
  for (int i = 0; i < 64; i++) ck_assert(isnan(hy[i]));
  free(hy);
  ct_release(x);
  ct_release(y);
  ct_release(z);
}
END_TEST

START_TEST(test_no_draw_and_errors) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {3, 4}, empty[2] = {0, 4};
  ct_tensor *x = ramp(d, CT_F32, 2, shape), *y = NULL, *r = (ct_tensor *)1;
  uint64_t s0, o0, s1, o1;
  ck_assert_ct_ok(ct_rng_get_state(&s0, &o0));
  ck_assert_ct_ok(ct_dropout(&y, x, 0.5, false));
  ck_assert_ptr_eq(y, x);
  ct_release(y);
  ck_assert_ct_ok(ct_dropout(&y, x, 0.0, true));
  ck_assert_ptr_eq(y, x);
  ct_release(y);
  ck_assert_ct_ok(ct_rng_get_state(&s1, &o1));
  ck_assert_uint_eq(o0, o1);
  /* A 0-d tensor: one element, kept (doubled) or dropped. */
  ct_tensor *z = NULL, *zy = NULL;
  float two = 2.0f, got = -1;
  ck_assert_ct_ok(ct_from_host(&z, d, CT_F32, 0, NULL, &two));
  ck_assert_ct_ok(ct_dropout(&zy, z, 0.5, true));
  ck_assert_int_eq(ct_tensor_ndim(zy), 0);
  ck_assert_ct_ok(ct_to_host(zy, &got, sizeof got));
  ck_assert(got == 0.0f || got == 4.0f);
  ct_release(z);
  ct_release(zy);
  ct_tensor *e = NULL;
  ck_assert_ct_ok(ct_zeros(&e, d, CT_F32, 2, empty));
  ck_assert_ct_ok(ct_dropout(&y, e, 0.5, true));
  ck_assert_int_eq(ct_numel(y), 0);
  ct_release(y);
  ct_release(e);
  ck_assert_ct_status(ct_dropout(&r, x, 1.5, true), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("ct_dropout: p is 1.5");
  ck_assert_ct_status(ct_dropout(&r, x, NAN, false), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_dropout(&r, x, -0.1, true), CT_ERR_INVALID_ARGUMENT);
  ct_tensor *xi = NULL;
  ck_assert_ct_ok(ct_zeros(&xi, d, CT_I64, 2, shape));
  ck_assert_ct_status(ct_dropout(&r, xi, 0.5, true), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("x has dtype i64");
  ck_assert_ct_status(ct_dropout(&r, NULL, 0.5, true), CT_ERR_INVALID_ARGUMENT);
  ct_release(xi);
  ct_release(x);
}
END_TEST

/* The same seed gives the same result on two devices. */
START_TEST(test_two_devices) {
  ct_device *d0 = NULL, *d1 = NULL;
  if (!ct_test_two_devices(&d0, &d1, "dropout's masks on two devices")) return;
  int64_t shape[2] = {33, 17};
  ct_tensor *x0 = ramp(d0, CT_F32, 2, shape), *x1 = ramp(d1, CT_F32, 2, shape), *y0 = NULL,
            *y1 = NULL;
  ct_manual_seed(2024);
  ck_assert_ct_ok(ct_dropout(&y0, x0, 0.4, true));
  ct_manual_seed(2024);
  ck_assert_ct_ok(ct_dropout(&y1, x1, 0.4, true));
  float *h0 = to_f32(y0), *h1 = to_f32(y1);
  ck_assert_mem_eq(h0, h1, sizeof(float) * 33 * 17);
  free(h0);
  free(h1);
  ct_release(x0);
  ct_release(x1);
  ct_release(y0);
  ct_release(y1);
}
END_TEST

int main(int argc, char **argv) {
  two_devices = argc > 1 && strcmp(argv[1], "two") == 0;
  Suite *s = suite_create("dropout");
  TCase *tc = tcase_create("dropout");
  if (two_devices) {
    tcase_add_test(tc, test_two_devices);
  } else {
    tcase_add_test(tc, test_mask_is_rand_bits);
    tcase_add_test(tc, test_mask_tiles_views);
    tcase_add_test(tc, test_statistics);
    tcase_add_test(tc, test_determinism_strided_f16);
    tcase_add_test(tc, test_nonfinite);
    tcase_add_test(tc, test_no_draw_and_errors);
  }
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
