/* ct_matmul, ct_matmul_out, ct_linear, ct_addmm: every shape class, strided operands, every
 * dtype, against a double-precision host reference (bound in linalg_util.h). meson runs this
 * binary once per GEMM route (CLTENSOR_GEMM=clblast, =host, unset). */
#include "ct_test.h"
#include "device/device.h"
#include "linalg_util.h"

static ct_tensor *rnd(ct_device *d, ct_dtype t, int nd, const int64_t *shape, uint64_t seed) {
  return lt_random(d, t, nd, shape, seed);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

struct shape_case {
  const char *name;
  int an;
  int64_t as[4];
  int bn;
  int64_t bs[4];
};

static const struct shape_case shape_cases[] = {
    {"dot 1-D x 1-D", 1, {7}, 1, {7}},
    {"1-D x 2-D", 1, {5}, 2, {5, 3}},
    {"2-D x 1-D", 2, {4, 5}, 1, {5}},
    {"2-D x 2-D", 2, {3, 4}, 2, {4, 5}},
    {"odd 127x131x137", 2, {127, 131}, 2, {131, 137}},
    {"size 1", 2, {1, 1}, 2, {1, 1}},
    {"outer product", 2, {5, 1}, 2, {1, 6}},
    {"inner product as matrices", 2, {1, 9}, 2, {9, 1}},
    {"batched 4-D", 4, {2, 3, 4, 5}, 4, {2, 3, 5, 6}},
    {"batch broadcast", 4, {2, 1, 4, 5}, 3, {3, 5, 6}},
    {"2-D x 3-D", 2, {4, 5}, 3, {3, 5, 6}},
    {"3-D x 2-D (folded)", 3, {3, 4, 5}, 2, {5, 6}},
    {"3-D x 1-D", 3, {3, 4, 5}, 1, {5}},
    {"1-D x 3-D", 1, {5}, 3, {3, 5, 6}},
    {"batch of 1", 3, {1, 7, 3}, 3, {1, 3, 2}},
    {"batch 64 of 16x16", 3, {64, 16, 16}, 3, {64, 16, 16}},
    {"batched odd sizes", 3, {3, 33, 17}, 3, {3, 17, 40}},
};

START_TEST(test_shapes) {
  ct_device *d = ct_test_device();
  for (size_t i = 0; i < sizeof shape_cases / sizeof shape_cases[0]; i++) {
    const struct shape_case *sc = &shape_cases[i];
    ct_tensor *a = rnd(d, CT_F32, sc->an, sc->as, 2 * i + 1), *b = rnd(d, CT_F32, sc->bn, sc->bs, 2 * i + 2);
    lt_matmul_check(a, b, sc->name);
    ct_release(a);
    ct_release(b);
  }
}
END_TEST

START_TEST(test_empty_and_k0) {
  ct_device *d = ct_test_device();
  /* k = 0: zeros of [m, n] */
  ct_tensor *a = rnd(d, CT_F32, 2, SHAPE(3, 0), 1), *b = rnd(d, CT_F32, 2, SHAPE(0, 4), 2), *c = NULL;
  ck_assert_ct_ok(ct_matmul(&c, a, b));
  ck_assert_int_eq(ct_tensor_ndim(c), 2);
  float h[12];
  for (int i = 0; i < 12; i++) h[i] = 99;
  ck_assert_ct_ok(ct_to_host(c, h, sizeof h));
  for (int i = 0; i < 12; i++) ck_assert_float_eq(h[i], 0.0f);
  ct_release(c);
  ct_release(a);
  ct_release(b);
  /* k = 0 dot: a 0-d zero */
  a = rnd(d, CT_F32, 1, SHAPE(0), 1);
  ck_assert_ct_ok(ct_matmul(&c, a, a));
  ck_assert_int_eq(ct_tensor_ndim(c), 0);
  ck_assert_ct_ok(ct_to_host(c, h, sizeof(float)));
  ck_assert_float_eq(h[0], 0.0f);
  ct_release(c);
  ct_release(a);
  /* m, n or a batch dim of 0: empty results of the right shape */
  const struct shape_case empties[] = {
      {"m = 0", 2, {0, 4}, 2, {4, 5}},
      {"n = 0", 2, {3, 4}, 2, {4, 0}},
      {"batch 0", 3, {0, 2, 3}, 3, {1, 3, 4}},
      {"m = k = 0", 2, {0, 0}, 2, {0, 3}},
  };
  for (size_t i = 0; i < 4; i++) {
    a = rnd(d, CT_F32, empties[i].an, empties[i].as, 1);
    b = rnd(d, CT_F32, empties[i].bn, empties[i].bs, 2);
    lt_matmul_check(a, b, empties[i].name);
    ct_release(a);
    ct_release(b);
  }
  /* addmm with k = 0 is beta * c */
  a = rnd(d, CT_F32, 2, SHAPE(2, 0), 1);
  b = rnd(d, CT_F32, 2, SHAPE(0, 3), 2);
  ct_tensor *cc = rnd(d, CT_F32, 1, SHAPE(3), 3);
  ck_assert_ct_ok(ct_addmm(&c, cc, a, b, 0.5, 2.0));
  struct lt_ref r;
  lt_reference(&r, a, b, cc, 2.0, 0.5);
  lt_check(c, &r, "addmm k = 0");
  lt_ref_free(&r);
  ct_release(c);
  ct_release(cc);
  ct_release(a);
  ct_release(b);
  /* beta = 1 initialises the result by a broadcasting copy: a row, a column and a full c, every
   * float dtype, and in place (out is c) */
  const ct_dtype fts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
  for (size_t ti = 0; ti < 4; ti++) {
    if (fts[ti] == CT_F64 && !ct_device_properties(d)->fp64) continue;
    a = rnd(d, fts[ti], 2, SHAPE(7, 5), 1);
    b = rnd(d, fts[ti], 2, SHAPE(5, 6), 2);
    const struct { int n; int64_t s[2]; const char *name; } cs[] = {
        {1, {6}, "addmm beta 1, row c"}, {2, {7, 1}, "addmm beta 1, column c"}, {2, {7, 6}, "addmm beta 1, full c"}};
    for (int k = 0; k < 3; k++) {
      cc = rnd(d, fts[ti], cs[k].n, cs[k].s, 3 + k);
      ck_assert_ct_ok(ct_addmm(&c, cc, a, b, 1.0, 1.5));
      lt_reference(&r, a, b, cc, 1.5, 1.0);
      lt_check(c, &r, cs[k].name);
      lt_ref_free(&r);
      ct_release(c);
      if (k == 2) {
        lt_reference(&r, a, b, cc, 1.5, 1.0);
        ck_assert_ct_ok(ct_addmm_out(cc, cc, a, b, 1.0, 1.5));
        lt_check(cc, &r, "addmm_out in place, beta 1");
        lt_ref_free(&r);
      }
      ct_release(cc);
    }
    ct_release(a);
    ct_release(b);
  }
}
END_TEST

/* Transposed and other strided operands: transposes become BLAS flags, the rest is copied. */
START_TEST(test_strided_operands) {
  ct_device *d = ct_test_device();
  ct_tensor *base_a = rnd(d, CT_F32, 2, SHAPE(37, 29), 1);   /* a^T of [29, 37] */
  ct_tensor *base_b = rnd(d, CT_F32, 2, SHAPE(23, 37), 2);   /* b^T of [37, 23] */
  ct_tensor *at, *bt, *x;
  ck_assert_ct_ok(ct_transpose(&at, base_a, 0, 1));
  ck_assert_ct_ok(ct_transpose(&bt, base_b, 0, 1));
  ct_tensor *a = rnd(d, CT_F32, 2, SHAPE(29, 37), 3), *b = rnd(d, CT_F32, 2, SHAPE(37, 23), 4);
  lt_matmul_check(at, b, "a transposed");
  lt_matmul_check(a, bt, "b transposed");
  lt_matmul_check(at, bt, "both transposed");
  /* A leading dimension larger than the row: a column slice of a wider matrix. */
  ct_tensor *wide = rnd(d, CT_F32, 2, SHAPE(29, 50), 5);
  ck_assert_ct_ok(ct_slice(&x, wide, 1, 3, 40, 1));
  lt_matmul_check(x, b, "column slice (ld 50)");
  ct_release(x);
  /* A row slice of the transposed matrix: offset and ld at once. */
  ck_assert_ct_ok(ct_slice(&x, at, 0, 4, 20, 1));
  lt_matmul_check(x, b, "row slice of a transpose");
  ct_release(x);
  /* Every other column: no BLAS layout, made contiguous first. */
  ck_assert_ct_ok(ct_slice(&x, wide, 1, 0, 50, 2));
  ct_tensor *b25 = rnd(d, CT_F32, 2, SHAPE(25, 6), 6);
  lt_matmul_check(x, b25, "stride-2 columns");
  ct_release(x);
  ct_release(b25);
  /* Broadcast rows (stride 0) via expand. */
  ct_tensor *row = rnd(d, CT_F32, 2, SHAPE(1, 37), 7);
  ck_assert_ct_ok(ct_expand(&x, row, 2, SHAPE(5, 37)));
  lt_matmul_check(x, b, "expanded rows");
  ct_release(x);
  ct_release(row);
  /* Batched transposes and an expanded (stride-0) batch dim. */
  ct_tensor *ba = rnd(d, CT_F32, 3, SHAPE(4, 9, 6), 8), *bb = rnd(d, CT_F32, 3, SHAPE(4, 9, 5), 9), *bat;
  ck_assert_ct_ok(ct_transpose(&bat, ba, 1, 2));   /* [4, 6, 9] */
  lt_matmul_check(bat, bb, "batched a transposed");
  ct_tensor *one = rnd(d, CT_F32, 3, SHAPE(1, 9, 5), 10), *ex;
  ck_assert_ct_ok(ct_expand(&ex, one, 3, SHAPE(4, 9, 5)));
  lt_matmul_check(bat, ex, "expanded batch of b");
  ct_release(ex);
  ct_release(one);
  /* A permuted batch: batch stride smaller than the matrix. */
  ct_tensor *pb = rnd(d, CT_F32, 3, SHAPE(6, 4, 9), 11), *pv;
  ck_assert_ct_ok(ct_permute(&pv, pb, (int[]){1, 0, 2}));   /* [4, 6, 9], rows stride 36 */
  lt_matmul_check(pv, bb, "permuted batch");
  ct_release(pv);
  ct_release(pb);
  ct_release(bat);
  ct_release(ba);
  ct_release(bb);
  ct_release(wide);
  ct_release(a);
  ct_release(b);
  ct_release(at);
  ct_release(bt);
  ct_release(base_a);
  ct_release(base_b);
}
END_TEST

/* Every dtype on a few shape classes. */
START_TEST(test_dtypes) {
  ct_device *d = ct_test_device();
  const ct_dtype types[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_U8, CT_I8, CT_I32, CT_I64};
  const struct shape_case cases[] = {
      {"2-D odd", 2, {19, 23}, 2, {23, 17}},
      {"dot", 1, {31}, 1, {31}},
      {"batch broadcast", 3, {2, 5, 7}, 2, {7, 3}},
      {"batch broadcast b", 2, {5, 7}, 3, {2, 7, 3}},
  };
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    ct_dtype t = types[ti];
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      ct_tensor *a = rnd(d, t, cases[i].an, cases[i].as, 10 * ti + i), *b = rnd(d, t, cases[i].bn, cases[i].bs, 99 + i);
      char what[96];
      snprintf(what, sizeof what, "%s %s", ct_dtype_name(t), cases[i].name);
      lt_matmul_check(a, b, what);
      ct_release(a);
      ct_release(b);
    }
    /* a transposed operand in every dtype */
    ct_tensor *base = rnd(d, t, 2, SHAPE(11, 13), 7 + ti), *at, *b = rnd(d, t, 2, SHAPE(11, 4), 8 + ti);
    ck_assert_ct_ok(ct_transpose(&at, base, 0, 1));
    char what[64];
    snprintf(what, sizeof what, "%s transposed", ct_dtype_name(t));
    lt_matmul_check(at, b, what);
    ct_release(at);
    ct_release(base);
    ct_release(b);
  }
  /* The k-scaled bound at a longer k for the 16-bit floats (f32 accumulation). */
  for (int i = 0; i < 2; i++) {
    ct_dtype t = i ? CT_BF16 : CT_F16;
    ct_tensor *a = rnd(d, t, 2, SHAPE(8, 1000), 1), *b = rnd(d, t, 2, SHAPE(1000, 8), 2);
    lt_matmul_check(a, b, "long k");
    ct_release(a);
    ct_release(b);
  }
  /* bool has no product */
  ct_tensor *a = rnd(d, CT_BOOL, 2, SHAPE(2, 2), 1), *c = (ct_tensor *)1;
  ck_assert_ct_status(ct_matmul(&c, a, a), CT_ERR_UNSUPPORTED);
  ck_assert_ptr_null(c);
  ck_assert_error_contains("bool");
  ct_release(a);
}
END_TEST

START_TEST(test_linear) {
  ct_device *d = ct_test_device();
  const ct_dtype types[] = {CT_F32, CT_F16, CT_I32};
  for (size_t ti = 0; ti < 3; ti++) {
    ct_dtype t = types[ti];
    ct_tensor *x = rnd(d, t, 3, SHAPE(2, 3, 5), 1), *w = rnd(d, t, 2, SHAPE(4, 5), 2), *bias = rnd(d, t, 1, SHAPE(4), 3);
    ct_tensor *wt, *y;
    ck_assert_ct_ok(ct_transpose(&wt, w, 0, 1));
    struct lt_ref r;
    /* with bias */
    ck_assert_ct_ok(ct_linear(&y, x, w, bias));
    lt_reference(&r, x, wt, bias, 1, 1);
    lt_check(y, &r, "linear with bias");
    lt_ref_free(&r);
    ct_release(y);
    /* without bias */
    ck_assert_ct_ok(ct_linear(&y, x, w, NULL));
    lt_reference(&r, x, wt, NULL, 1, 0);
    lt_check(y, &r, "linear without bias");
    lt_ref_free(&r);
    ct_release(y);
    /* 1-D input */
    ct_tensor *x1 = rnd(d, t, 1, SHAPE(5), 4);
    ck_assert_ct_ok(ct_linear(&y, x1, w, bias));
    lt_reference(&r, x1, wt, bias, 1, 1);
    lt_check(y, &r, "linear 1-D input");
    lt_ref_free(&r);
    ct_release(y);
    ct_release(x1);
    ct_release(wt);
    ct_release(x);
    ct_release(w);
    ct_release(bias);
  }
  /* errors name both shapes */
  ct_tensor *x = rnd(d, CT_F32, 2, SHAPE(3, 5), 1), *w = rnd(d, CT_F32, 2, SHAPE(4, 6), 2), *y = NULL;
  ck_assert_ct_status(ct_linear(&y, x, w, NULL), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("[3, 5]");
  ck_assert_error_contains("[4, 6]");
  ct_tensor *w3 = rnd(d, CT_F32, 3, SHAPE(1, 4, 5), 3), *bad_bias = rnd(d, CT_F32, 1, SHAPE(3), 4);
  ck_assert_ct_status(ct_linear(&y, x, w3, NULL), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("2-D");
  ct_release(w);
  w = rnd(d, CT_F32, 2, SHAPE(4, 5), 5);
  ck_assert_ct_status(ct_linear(&y, x, w, bad_bias), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("bias");
  ct_tensor *b16 = rnd(d, CT_F16, 1, SHAPE(4), 6);
  ck_assert_ct_status(ct_linear(&y, x, w, b16), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("x is f32 but bias is f16");
  /* Messages name the caller's arguments (x, weight, bias), never the internal w^T. */
  ct_tensor *w16 = rnd(d, CT_F16, 2, SHAPE(4, 5), 7);
  ck_assert_ct_status(ct_linear(&y, x, w16, NULL), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("x is f32 but weight is f16");
  ck_assert_msg(strstr(ct_last_error(), "w^T") == NULL, "message names w^T: %s", ct_last_error());
  ck_assert_ct_status(ct_linear(&y, x, w3, NULL), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("weight must be 2-D");
  ck_assert_ct_status(ct_linear(&y, x, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'weight'");
  ct_release(w16);
  ct_release(b16);
  ct_release(bad_bias);
  ct_release(w3);
  ct_release(x);
  ct_release(w);
}
END_TEST

START_TEST(test_addmm) {
  ct_device *d = ct_test_device();
  ct_tensor *a = rnd(d, CT_F32, 2, SHAPE(6, 7), 1), *b = rnd(d, CT_F32, 2, SHAPE(7, 5), 2);
  ct_tensor *c_full = rnd(d, CT_F32, 2, SHAPE(6, 5), 3), *c_row = rnd(d, CT_F32, 1, SHAPE(5), 4);
  ct_tensor *c_col = rnd(d, CT_F32, 2, SHAPE(6, 1), 5), *y;
  struct lt_ref r;
  const struct { const ct_tensor *c; double beta, alpha; const char *what; } cases[] = {
      {c_full, 1, 1, "c full, beta 1"}, {c_full, 0.5, -2, "c full, beta 0.5 alpha -2"},
      {c_row, 3, 1, "c row broadcast"}, {c_col, 1, 0.25, "c column broadcast"},
  };
  for (size_t i = 0; i < 4; i++) {
    ck_assert_ct_ok(ct_addmm(&y, cases[i].c, a, b, cases[i].beta, cases[i].alpha));
    lt_reference(&r, a, b, cases[i].c, cases[i].alpha, cases[i].beta);
    lt_check(y, &r, cases[i].what);
    lt_ref_free(&r);
    ct_release(y);
  }
  /* beta = 0 ignores c, NaN included */
  float nan_host[30];
  for (int i = 0; i < 30; i++) nan_host[i] = NAN;
  ct_tensor *cn;
  ck_assert_ct_ok(ct_from_host(&cn, d, CT_F32, 2, SHAPE(6, 5), nan_host));
  ck_assert_ct_ok(ct_addmm(&y, cn, a, b, 0, 1));
  lt_reference(&r, a, b, NULL, 1, 0);
  lt_check(y, &r, "beta 0 with NaN in c");
  lt_ref_free(&r);
  ct_release(y);
  /* In place: c = 2 c + a @ b through ct_addmm_out(c, c, ...) */
  ct_tensor *acc = rnd(d, CT_F32, 2, SHAPE(6, 5), 3);
  lt_reference(&r, a, b, acc, 1, 2);
  ck_assert_ct_ok(ct_addmm_out(acc, acc, a, b, 2, 1));
  lt_check(acc, &r, "addmm_out in place");
  lt_ref_free(&r);
  ct_release(acc);
  /* Integers: exact, with integral alpha and beta only */
  ct_tensor *ia = rnd(d, CT_I32, 2, SHAPE(4, 3), 1), *ib = rnd(d, CT_I32, 2, SHAPE(3, 5), 2);
  ct_tensor *ic = rnd(d, CT_I32, 1, SHAPE(5), 3);
  ck_assert_ct_ok(ct_addmm(&y, ic, ia, ib, 3, -2));
  lt_reference(&r, ia, ib, ic, -2, 3);
  lt_check(y, &r, "i32 addmm");
  lt_ref_free(&r);
  ct_release(y);
  y = (ct_tensor *)1;
  ck_assert_ct_status(ct_addmm(&y, ic, ia, ib, 0.5, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("integral");
  ct_tensor *bad = rnd(d, CT_F32, 1, SHAPE(4), 9);
  ck_assert_ct_status(ct_addmm(&y, bad, a, b, 1, 1), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("[4]");
  ck_assert_error_contains("[6, 5]");
  ct_release(bad);
  ct_release(ia);
  ct_release(ib);
  ct_release(ic);
  ct_release(cn);
  ct_release(a);
  ct_release(b);
  ct_release(c_full);
  ct_release(c_row);
  ct_release(c_col);
}
END_TEST

START_TEST(test_matmul_out) {
  ct_device *d = ct_test_device();
  ct_tensor *a = rnd(d, CT_F32, 2, SHAPE(8, 8), 1), *b = rnd(d, CT_F32, 2, SHAPE(8, 8), 2), *out, *t;
  struct lt_ref r;
  lt_reference(&r, a, b, NULL, 1, 0);
  /* contiguous out */
  ck_assert_ct_ok(ct_empty(&out, d, CT_F32, 2, SHAPE(8, 8)));
  ck_assert_ct_ok(ct_matmul_out(out, a, b));
  lt_check(out, &r, "matmul_out");
  /* a transposed (non-contiguous) out */
  ck_assert_ct_ok(ct_transpose(&t, out, 0, 1));
  ck_assert_ct_ok(ct_matmul_out(t, a, b));
  lt_check(t, &r, "matmul_out into a transposed view");
  ct_release(t);
  ct_release(out);
  /* out aliasing an operand: a = a @ b */
  ck_assert_ct_ok(ct_matmul_out(a, a, b));
  lt_check(a, &r, "matmul_out into its own operand");
  lt_ref_free(&r);
  /* f16 out (converted path) */
  ct_tensor *ha = rnd(d, CT_F16, 2, SHAPE(5, 6), 3), *hb = rnd(d, CT_F16, 2, SHAPE(6, 7), 4);
  ck_assert_ct_ok(ct_empty(&out, d, CT_F16, 2, SHAPE(5, 7)));
  ck_assert_ct_ok(ct_matmul_out(out, ha, hb));
  lt_reference(&r, ha, hb, NULL, 1, 0);
  lt_check(out, &r, "f16 matmul_out");
  lt_ref_free(&r);
  /* wrong out shape and dtype */
  ck_assert_ct_status(ct_matmul_out(out, a, b), CT_ERR_DTYPE_MISMATCH);
  ct_release(out);
  ck_assert_ct_ok(ct_empty(&out, d, CT_F32, 2, SHAPE(8, 7)));
  ck_assert_ct_status(ct_matmul_out(out, a, b), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("[8, 7]");
  ct_release(out);
  /* An expanded out (each row one cell) is refused before any product is computed (issue #28:
   * it was formed aside, then refused by the copy into out, as ct_copy's 'dst'). */
  ct_tensor *row;
  ck_assert_ct_ok(ct_zeros(&row, d, CT_F32, 2, SHAPE(1, 8)));
  ck_assert_ct_ok(ct_expand(&out, row, 2, SHAPE(8, 8)));
  ck_assert_ct_status(ct_matmul_out(out, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_matmul_out: out of shape [8, 8] (strides [0, 1]) has stride 0 at dim 0");
  ct_release(out);
  ct_release(row);
  ct_release(ha);
  ct_release(hb);
  ct_release(a);
  ct_release(b);
}
END_TEST

START_TEST(test_errors) {
  ct_device *d = ct_test_device();
  ct_tensor *a = rnd(d, CT_F32, 2, SHAPE(3, 4), 1), *b = rnd(d, CT_F32, 2, SHAPE(5, 6), 2), *c = (ct_tensor *)1;
  ck_assert_ct_status(ct_matmul(&c, a, b), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(c);
  ck_assert_error_contains("[3, 4]");
  ck_assert_error_contains("[5, 6]");
  ck_assert_ct_status(ct_matmul(NULL, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_matmul(&c, NULL, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_matmul(&c, a, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_matmul_out(NULL, a, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_addmm(&c, NULL, a, b, 1, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_linear(&c, a, NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  /* 0-d operands */
  ct_tensor *s = rnd(d, CT_F32, 0, NULL, 3);
  ck_assert_ct_status(ct_matmul(&c, s, b), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("at least 1 dim");
  /* dtype mismatch */
  ct_tensor *h = rnd(d, CT_F16, 2, SHAPE(4, 2), 4);
  ck_assert_ct_status(ct_matmul(&c, a, h), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("f16");
  /* batch dims that don't broadcast */
  ct_tensor *x = rnd(d, CT_F32, 3, SHAPE(2, 3, 4), 5), *y = rnd(d, CT_F32, 3, SHAPE(3, 4, 5), 6);
  ck_assert_ct_status(ct_matmul(&c, x, y), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("[2, 3, 4]");
  ck_assert_error_contains("[3, 4, 5]");
  /* 1-D length mismatch */
  ct_tensor *v = rnd(d, CT_F32, 1, SHAPE(5), 7);
  ck_assert_ct_status(ct_matmul(&c, a, v), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("[5]");
  ck_assert_ptr_null(c);
  ct_release(v);
  ct_release(x);
  ct_release(y);
  ct_release(h);
  ct_release(s);
  ct_release(a);
  ct_release(b);
}
END_TEST

/* Needs two devices (POCL_DEVICES="pthread pthread"). */
START_TEST(test_device_mismatch) {
  ct_device *d0, *d1;
  if (!ct_test_two_devices(&d0, &d1, "matmul's device mismatch")) return;
  ct_tensor *a = rnd(d0, CT_F32, 2, SHAPE(2, 3), 1), *b = rnd(d1, CT_F32, 2, SHAPE(3, 2), 2), *c = NULL;
  ck_assert_ct_status(ct_matmul(&c, a, b), CT_ERR_DEVICE_MISMATCH);
  ck_assert_error_contains(ct_device_spec(d0));
  ck_assert_error_contains(ct_device_spec(d1));
  /* ct_linear names weight and bias, not its internal w^T. */
  ct_tensor *x = rnd(d0, CT_F32, 2, SHAPE(2, 3), 3), *w = rnd(d1, CT_F32, 2, SHAPE(4, 3), 4);
  ct_tensor *w0 = rnd(d0, CT_F32, 2, SHAPE(4, 3), 5), *bias = rnd(d1, CT_F32, 1, SHAPE(4), 6);
  ck_assert_ct_status(ct_linear(&c, x, w, NULL), CT_ERR_DEVICE_MISMATCH);
  ck_assert_error_contains("x is on");
  ck_assert_error_contains("weight is on");
  ck_assert_msg(strstr(ct_last_error(), "w^T") == NULL, "message names w^T: %s", ct_last_error());
  ck_assert_ct_status(ct_linear(&c, x, w0, bias), CT_ERR_DEVICE_MISMATCH);
  ck_assert_error_contains("bias is on");
  ct_release(x);
  ct_release(w);
  ct_release(w0);
  ct_release(bias);
  ct_release(a);
  ct_release(b);
}
END_TEST

/* Both routes in one process: each device reads $CLTENSOR_GEMM at its first GEMM, so device 0
 * takes the host BLAS and device 1 CLBlast; results agree within the bound of each. */
START_TEST(test_routes_agree) {
  ct_device *d0, *d1;
  if (!ct_test_two_devices(&d0, &d1, "both GEMM routes in one process")) return;
  ct_gemm_route r0, r1;
  setenv("CLTENSOR_GEMM", "host", 1);
  ct_status st = ct_gemm_route_get(&r0, d0);
  if (st == CT_ERR_UNSUPPORTED) {
    /* Built without a host BLAS: the route must say so, and auto must pick CLBlast. */
    ck_assert_error_contains("host BLAS");
    return;
  }
  ck_assert_ct_ok(st);
  ck_assert_int_eq(r0, CT_GEMM_ROUTE_HOST);
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ck_assert_ct_ok(ct_gemm_route_get(&r1, d1));
  ck_assert_int_eq(r1, CT_GEMM_ROUTE_CLBLAST);
  const struct shape_case cases[] = {
      {"odd", 2, {67, 45}, 2, {45, 71}},
      {"batch broadcast", 4, {2, 1, 9, 8}, 3, {3, 8, 10}},
      {"dot", 1, {100}, 1, {100}},
  };
  for (int i = 0; i < 3; i++) {
    ct_tensor *a0 = rnd(d0, CT_F32, cases[i].an, cases[i].as, 1), *b0 = rnd(d0, CT_F32, cases[i].bn, cases[i].bs, 2);
    ct_tensor *a1 = rnd(d1, CT_F32, cases[i].an, cases[i].as, 1), *b1 = rnd(d1, CT_F32, cases[i].bn, cases[i].bs, 2);
    ct_tensor *c0, *c1;
    ck_assert_ct_ok(ct_matmul(&c0, a0, b0));
    ck_assert_ct_ok(ct_matmul(&c1, a1, b1));
    struct lt_ref r;
    lt_reference(&r, a0, b0, NULL, 1, 0);
    lt_check(c0, &r, "host route");
    lt_check(c1, &r, "clblast route");
    /* Each is within the bound of the exact product, so they agree within twice it. */
    float *h0 = lt_read(c0), *h1 = lt_read(c1);
    for (int64_t o = 0; o < r.n_el; o++) {
      double tol = 4.0 * (double)(r.k + 2) * ldexp(1, -24) * r.absum[o] + 1e-300;
      ck_assert_msg(fabs((double)h0[o] - (double)h1[o]) <= tol, "%s: routes differ at %lld: %g vs %g", cases[i].name,
                    (long long)o, h0[o], h1[o]);
    }
    free(h0);
    free(h1);
    lt_ref_free(&r);
    ct_release(c0);
    ct_release(c1);
    ct_release(a0);
    ct_release(b0);
    ct_release(a1);
    ct_release(b1);
  }
}
END_TEST

START_TEST(test_route_env) {
  ct_device *d = ct_test_device();
  const char *env = getenv("CLTENSOR_GEMM");
  ct_gemm_route r;
  ck_assert_ct_ok(ct_gemm_route_get(&r, d));
  const ct_device_props *p = ct_device_properties(d);
  if (env && strcmp(env, "clblast") == 0) ck_assert_int_eq(r, CT_GEMM_ROUTE_CLBLAST);
  else if (env && strcmp(env, "host") == 0) ck_assert_int_eq(r, CT_GEMM_ROUTE_HOST);
  else if (p->type != CT_DEVICE_CPU || !p->host_unified_memory) ck_assert_int_eq(r, CT_GEMM_ROUTE_CLBLAST);
  ck_assert_str_eq(ct_gemm_route_name(r), r == CT_GEMM_ROUTE_HOST ? "host" : "clblast");
  ck_assert_str_eq(ct_gemm_route_name((ct_gemm_route)7), "invalid");
}
END_TEST

START_TEST(test_route_invalid) {
  setenv("CLTENSOR_GEMM", "fastest", 1);
  ct_device *d = ct_test_device();
  ct_tensor *a = rnd(d, CT_F32, 2, SHAPE(2, 2), 1), *c = (ct_tensor *)1;
  ck_assert_ct_status(ct_matmul(&c, a, a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(c);
  ck_assert_error_contains("CLTENSOR_GEMM='fastest'");
  ct_gemm_route r;
  ck_assert_ct_status(ct_gemm_route_get(&r, d), CT_ERR_INVALID_ARGUMENT);
  ct_release(a);
}
END_TEST

/* A GEMM is enqueued like a kernel on both routes (the host route as a native kernel where the
 * device runs them): it must read its operands as they were when it was called, and what is
 * enqueued after it must see its result, even when the operands are overwritten and released at
 * once and the product feeds the next one straight away. */
START_TEST(test_queue_order) {
  ct_device *d = ct_test_device();
  for (int round = 0; round < 3; round++) {
    ct_tensor *a = rnd(d, CT_F32, 2, SHAPE(67, 45), 40 + round), *b = rnd(d, CT_F32, 2, SHAPE(45, 33), 50 + round);
    ct_tensor *e = rnd(d, CT_F32, 2, SHAPE(33, 21), 60 + round);
    struct lt_ref r1;
    lt_reference(&r1, a, b, NULL, 1, 0);
    ct_tensor *c = NULL, *f = NULL, *zero = NULL;
    ck_assert_ct_ok(ct_matmul(&c, a, b));
    ck_assert_ct_ok(ct_matmul(&f, c, e));           /* consumes c before anything waits */
    ck_assert_ct_ok(ct_zeros(&zero, d, CT_F32, 2, SHAPE(67, 45)));
    ck_assert_ct_ok(ct_copy(a, zero));              /* overwrites an operand of both GEMMs' chain */
    ct_release(b);                                  /* its block may be reused by the next alloc */
    ct_tensor *junk = rnd(d, CT_F32, 2, SHAPE(45, 33), 99);
    lt_check(c, &r1, "first product, operands overwritten after the call");
    struct lt_ref r2;
    lt_reference(&r2, c, e, NULL, 1, 0);
    lt_check(f, &r2, "second product, fed by the first");
    lt_ref_free(&r1);
    lt_ref_free(&r2);
    ct_release(junk);
    ct_release(zero);
    ct_release(f);
    ct_release(c);
    ct_release(e);
    ct_release(a);
  }
}
END_TEST

/* A copy of src in a buffer of its own, created now. */
static ct_tensor *own_buffer_copy(ct_device *d, const ct_tensor *src) {
  ct_tensor *t = lt_own_buffer(d, ct_tensor_dtype(src), ct_tensor_ndim(src), ct_tensor_shape(src));
  ck_assert_ct_ok(ct_copy(t, src));
  return t;
}

/* Operands in three buffers created in the opposite order to a, b, c. PoCL 3.1's native kernels
 * hand a command's buffer pointers out in creation order, not in the order listed, so the host
 * route's native GEMM once read c as a and wrote into a (every element wrong); through the
 * caching allocator that happened whenever the result's segment was older than an operand's
 * (f64 batches of a few MiB, threads). */
START_TEST(test_buffers_in_any_order) {
  ct_device *d = ct_test_device();
  const ct_dtype types[] = {CT_F32, CT_F64};
  for (int ti = 0; ti < 2; ti++) {
    ct_dtype t = types[ti];
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    ct_tensor *ha = rnd(d, t, 3, SHAPE(2, 19, 23), 1), *hb = rnd(d, t, 2, SHAPE(23, 17), 2), *zc;
    ck_assert_ct_ok(ct_zeros(&zc, d, t, 3, SHAPE(2, 19, 17)));
    ct_tensor *c = own_buffer_copy(d, zc), *b = own_buffer_copy(d, hb), *a = own_buffer_copy(d, ha);
    struct lt_ref r;
    lt_reference(&r, a, b, NULL, 1, 0);
    ck_assert_ct_ok(ct_matmul_out(c, a, b));
    lt_check(c, &r, "a, b, c in buffers created c first");
    lt_ref_free(&r);
    ct_release(c);
    ct_release(b);
    ct_release(a);
    ct_release(zc);
    ct_release(ha);
    ct_release(hb);
  }
}
END_TEST

/* An operand or result in a sub-buffer (a wrapped user buffer): PoCL 3.1 hands a native kernel
 * the parent's pointer for it, so the host route adds the origin itself. */
START_TEST(test_sub_buffer_operands) {
  ct_device *d = ct_test_device();
  struct _cl_context *ctx;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  const size_t origin = 4096, part = 4096;   /* 4096 B: a multiple of any base-address alignment */
  cl_int err;
  cl_mem parent = clCreateBuffer(ctx, CL_MEM_READ_WRITE, origin + 3 * part, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  cl_mem subs[3];
  for (int i = 0; i < 3; i++) {
    cl_buffer_region reg = {origin + (size_t)i * part, part};
    subs[i] = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
  }
  ct_tensor *ha = rnd(d, CT_F32, 2, SHAPE(20, 30), 1), *hb = rnd(d, CT_F32, 2, SHAPE(30, 25), 2);
  ct_tensor *a, *b, *c, *filler;
  ck_assert_ct_ok(ct_from_cl_mem(&a, d, subs[0], 0, CT_F32, 2, SHAPE(20, 30), NULL));
  ck_assert_ct_ok(ct_from_cl_mem(&b, d, subs[1], 0, CT_F32, 2, SHAPE(30, 25), NULL));
  ck_assert_ct_ok(ct_from_cl_mem(&c, d, subs[2], 0, CT_F32, 2, SHAPE(20, 25), NULL));
  /* The parent's first bytes hold other values, which a product read from there would show. */
  ck_assert_ct_ok(ct_from_cl_mem(&filler, d, parent, 0, CT_F32, 1, SHAPE((int64_t)(origin / 4)), NULL));
  ct_tensor *sevens;
  ck_assert_ct_ok(ct_full(&sevens, d, CT_F32, 1, SHAPE((int64_t)(origin / 4)), 7.0));
  ck_assert_ct_ok(ct_copy(filler, sevens));
  ct_release(sevens);
  ck_assert_ct_ok(ct_copy(a, ha));
  ck_assert_ct_ok(ct_copy(b, hb));
  struct lt_ref r;
  lt_reference(&r, ha, hb, NULL, 1, 0);
  ck_assert_ct_ok(ct_matmul_out(c, a, b));
  lt_check(c, &r, "operands and result in sub-buffers");
  lt_ref_free(&r);
  for (int i = 0; i < 3; i++) clReleaseMemObject(subs[i]);
  clReleaseMemObject(parent);
  ct_release(filler);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  ct_release(ha);
  ct_release(hb);
}
END_TEST

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  Suite *s = suite_create("linalg");
  TCase *tc = tcase_create("matmul");
  tcase_set_timeout(tc, 600);
  if (strcmp(mode, "two") == 0) {
    tcase_add_test(tc, test_device_mismatch);
    tcase_add_test(tc, test_routes_agree);
  } else if (strcmp(mode, "invalid") == 0) {
    tcase_add_test(tc, test_route_invalid);
  } else {
    if (strcmp(mode, "all-mapped") == 0) tcase_add_checked_fixture(tc, lt_without_native_kernels, NULL);
    tcase_add_test(tc, test_route_env);
    tcase_add_test(tc, test_shapes);
    tcase_add_test(tc, test_empty_and_k0);
    tcase_add_test(tc, test_strided_operands);
    tcase_add_test(tc, test_dtypes);
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_addmm);
    tcase_add_test(tc, test_matmul_out);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_queue_order);
    tcase_add_test(tc, test_buffers_in_any_order);
    tcase_add_test(tc, test_sub_buffer_operands);
  }
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
