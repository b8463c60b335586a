/* Gradients of the indexing ops and scans against central finite differences in f64:
 * index_select, gather, scatter_add, embedding (repeated indices, so accumulation is
 * exercised), masked_fill (broadcast mask and x), cumsum, cumprod (with zeros), and the values
 * of sort/topk; negative dims and strided inputs. Plus: the embedding gradient has the same bits
 * on every run, and index and sort-index outputs never require grad. */
#include "gradcheck.h"

/* ctx of the dim-taking ops: which op and its dim */
struct op_ctx {
  int op;
  int dim;
  ct_tensor *mask; /* masked_fill's */
};

enum { OP_INDEX_SELECT, OP_GATHER, OP_SCATTER_ADD, OP_EMBEDDING, OP_MASKED_FILL, OP_CUMSUM, OP_CUMPROD, OP_SORT,
       OP_TOPK };

static ct_status f_op(ct_tensor **out, ct_tensor *const *in, void *ctx) {
  const struct op_ctx *c = ctx;
  switch (c->op) {
  case OP_INDEX_SELECT: return ct_index_select(out, in[0], c->dim, in[1]);
  case OP_GATHER: return ct_gather(out, in[0], c->dim, in[1]);
  case OP_SCATTER_ADD: return ct_scatter_add(out, in[0], c->dim, in[1], in[2]);
  case OP_EMBEDDING: return ct_embedding(out, in[0], in[1]);
  case OP_MASKED_FILL: return ct_masked_fill(out, in[0], c->mask, -3.0);
  case OP_CUMSUM: return ct_cumsum(out, in[0], c->dim);
  case OP_CUMPROD: return ct_cumprod(out, in[0], c->dim);
  case OP_SORT: return ct_sort(out, NULL, in[0], c->dim, true);
  default: return ct_topk(out, NULL, in[0], 2, c->dim, false);
  }
}

START_TEST(index_select_gradcheck) {
  ct_device *d = ct_test_device();
  double x[12];
  gc_fill(x, 12, -1, 1, 1);
  /* dim 0 of a transposed x, index with repeats */
  double i0[4] = {2, 0, 2, 2};
  struct op_ctx c = {OP_INDEX_SELECT, 0, NULL};
  gc_input in[2] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true, .strided = true},
                    {.ndim = 1, .shape = {4}, .data = i0, .integer = true}};
  gc_check(d, "index_select dim 0", f_op, &c, 2, in);
  /* dim -1, an i32 index with repeats */
  double i1[3] = {1, 3, 1};
  c.dim = -1;
  gc_input in2[2] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true},
                     {.ndim = 1, .shape = {3}, .data = i1, .integer = true, .dtype = CT_I32}};
  gc_check(d, "index_select dim -1", f_op, &c, 2, in2);
  /* a 0-d index keeps the dim (size 1) */
  double i2[1] = {2};
  c.dim = 1;
  gc_input in3[2] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true},
                     {.ndim = 0, .data = i2, .integer = true}};
  gc_check(d, "index_select 0-d index", f_op, &c, 2, in3);
}
END_TEST

START_TEST(gather_gradcheck) {
  ct_device *d = ct_test_device();
  double x[12];
  gc_fill(x, 12, -1, 1, 2);
  /* dim 1 of x [3, 4], index [3, 5] with repeats along each row */
  double i0[15] = {0, 3, 3, 1, 0, 2, 2, 2, 0, 1, 3, 0, 1, 1, 3};
  struct op_ctx c = {OP_GATHER, 1, NULL};
  gc_input in[2] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true, .strided = true},
                    {.ndim = 2, .shape = {3, 5}, .data = i0, .integer = true}};
  gc_check(d, "gather dim 1", f_op, &c, 2, in);
  /* dim -2 of x [3, 2] (index [4, 2], more rows than x), a strided index */
  double i1[8] = {2, 0, 2, 2, 1, 0, 0, 0};
  c.dim = -2;
  gc_input in2[2] = {{.ndim = 2, .shape = {3, 2}, .data = x, .requires_grad = true},
                     {.ndim = 2, .shape = {4, 2}, .data = i1, .integer = true, .strided = true}};
  gc_check(d, "gather dim -2", f_op, &c, 2, in2);
}
END_TEST

START_TEST(scatter_add_gradcheck) {
  ct_device *d = ct_test_device();
  double x[12], src[15];
  gc_fill(x, 12, -1, 1, 3);
  gc_fill(src, 15, -1, 1, 4);
  /* dim 0: rows of src [2, 4] added into x [3, 4], two into the same row */
  double i0[8] = {2, 0, 2, 1, 2, 0, 0, 1};
  struct op_ctx c = {OP_SCATTER_ADD, 0, NULL};
  gc_input in[3] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true, .strided = true},
                    {.ndim = 2, .shape = {2, 4}, .data = i0, .integer = true},
                    {.ndim = 2, .shape = {2, 4}, .data = src, .requires_grad = true}};
  gc_check(d, "scatter_add dim 0", f_op, &c, 3, in);
  /* dim -1, src [3, 5] larger than the index [2, 3]: the unread part of src gets zeros */
  double i1[6] = {3, 3, 0, 1, 2, 1};
  c.dim = -1;
  gc_input in2[3] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true},
                     {.ndim = 2, .shape = {2, 3}, .data = i1, .integer = true},
                     {.ndim = 2, .shape = {3, 5}, .data = src, .requires_grad = true, .strided = true}};
  gc_check(d, "scatter_add larger src", f_op, &c, 3, in2);
}
END_TEST

START_TEST(embedding_gradcheck) {
  ct_device *d = ct_test_device();
  double w[15];
  gc_fill(w, 15, -1, 1, 5);
  double i0[6] = {4, 0, 4, 2, 4, 0}; /* rows used 3, 2, 1 and 0 times */
  struct op_ctx c = {OP_EMBEDDING, 0, NULL};
  gc_input in[2] = {{.ndim = 2, .shape = {5, 3}, .data = w, .requires_grad = true, .strided = true},
                    {.ndim = 2, .shape = {2, 3}, .data = i0, .integer = true, .dtype = CT_I32}};
  gc_check(d, "embedding", f_op, &c, 2, in);
  gc_input in2[2] = {{.ndim = 2, .shape = {5, 3}, .data = w, .requires_grad = true},
                     {.ndim = 0, .data = i0, .integer = true}};
  gc_check(d, "embedding 0-d indices", f_op, &c, 2, in2);
  /* no indices: a zero gradient */
  gc_input in3[2] = {{.ndim = 2, .shape = {5, 3}, .data = w, .requires_grad = true},
                     {.ndim = 2, .shape = {2, 0}, .data = i0, .integer = true}};
  gc_check(d, "embedding empty indices", f_op, &c, 2, in3);
}
END_TEST

/* The weight's gradient is accumulated in the indices' order: the same bits on every run
 * (f32, many repeats of few rows, so an order-dependent sum would show). */
START_TEST(embedding_grad_deterministic) {
  ct_device *d = ct_test_device();
  enum { V = 4, D = 8, N = 300 };
  float wv[V * D], gv[N * D];
  int64_t iv[N];
  double tmp[N * D];
  gc_fill(tmp, V * D, -1, 1, 6);
  for (int i = 0; i < V * D; i++) wv[i] = (float)tmp[i];
  gc_fill(tmp, N * D, -1, 1, 7);
  for (int i = 0; i < N * D; i++) gv[i] = (float)tmp[i] * 1000.0f; /* spread of magnitudes: rounding matters */
  gc_fill(tmp, N, 0, V, 8);
  for (int i = 0; i < N; i++) iv[i] = (int64_t)tmp[i];
  int64_t ws[2] = {V, D}, is[1] = {N}, gs[2] = {N, D};
  ct_tensor *w = NULL, *ix = NULL, *g = NULL;
  ck_assert_ct_ok(ct_from_host(&w, d, CT_F32, 2, ws, wv));
  ck_assert_ct_ok(ct_from_host(&ix, d, CT_I64, 1, is, iv));
  ck_assert_ct_ok(ct_from_host(&g, d, CT_F32, 2, gs, gv));
  ck_assert_ct_ok(ct_set_requires_grad(w, true));
  float out[2][V * D];
  for (int run = 0; run < 2; run++) {
    ct_tensor *e = NULL, *gw = NULL;
    ck_assert_ct_ok(ct_embedding(&e, w, ix));
    ck_assert_ct_ok(ct_backward(e, g));
    ck_assert_ct_ok(ct_grad(&gw, w));
    ck_assert_ct_ok(ct_to_host(gw, out[run], sizeof out[run]));
    ct_release(gw);
    ck_assert_ct_ok(ct_grad_clear(w));
    ct_release(e);
  }
  ck_assert_msg(memcmp(out[0], out[1], sizeof out[0]) == 0, "two runs gave different bits");
  /* and the values: each row's sum in index order, as a sequential f32 loop adds them */
  for (int r = 0; r < V; r++)
    for (int k = 0; k < D; k++) {
      float s = 0;
      for (int i = 0; i < N; i++)
        if (iv[i] == r) s += gv[i * D + k];
      ck_assert_msg(out[0][r * D + k] == s, "row %d col %d: %.9g, sequential sum %.9g", r, k, out[0][r * D + k], s);
    }
  ct_release(w);
  ct_release(ix);
  ct_release(g);
}
END_TEST

static ct_tensor *bool_mask(ct_device *d, int nd, const int64_t *shape, const uint8_t *v) {
  ct_tensor *m = NULL;
  ck_assert_ct_ok(ct_from_host(&m, d, CT_BOOL, nd, shape, v));
  return m;
}

START_TEST(masked_fill_gradcheck) {
  ct_device *d = ct_test_device();
  double x[12];
  gc_fill(x, 12, -1, 1, 9);
  /* mask [4] broadcast over x [3, 4] (strided) */
  static const uint8_t m1[4] = {1, 0, 0, 1};
  int64_t s1[1] = {4};
  struct op_ctx c = {OP_MASKED_FILL, 0, bool_mask(d, 1, s1, m1)};
  gc_input in[1] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true, .strided = true}};
  gc_check(d, "masked_fill broadcast mask", f_op, &c, 1, in);
  ct_release(c.mask);
  /* x [1, 4] broadcast against mask [3, 4]: x's gradient sums the unmasked rows */
  static const uint8_t m2[12] = {1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0};
  int64_t s2[2] = {3, 4};
  c.mask = bool_mask(d, 2, s2, m2);
  gc_input in2[1] = {{.ndim = 2, .shape = {1, 4}, .data = x, .requires_grad = true}};
  gc_check(d, "masked_fill broadcast x", f_op, &c, 1, in2);
  ct_release(c.mask);
}
END_TEST

START_TEST(cumsum_gradcheck) {
  ct_device *d = ct_test_device();
  double x[12];
  gc_fill(x, 12, -1, 1, 10);
  struct op_ctx c = {OP_CUMSUM, 1, NULL};
  gc_input in[1] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true}};
  gc_check(d, "cumsum dim 1", f_op, &c, 1, in);
  c.dim = -2;
  gc_input in2[1] = {{.ndim = 3, .shape = {3, 1, 4}, .data = x, .requires_grad = true, .strided = true}};
  gc_check(d, "cumsum dim -2", f_op, &c, 1, in2);
}
END_TEST

START_TEST(cumprod_gradcheck) {
  ct_device *d = ct_test_device();
  /* no zeros: signs mixed, magnitudes away from 0 */
  double x[12];
  gc_fill(x, 12, 0.5, 1.5, 11);
  for (int i = 0; i < 12; i += 3) x[i] = -x[i];
  struct op_ctx c = {OP_CUMPROD, -1, NULL};
  gc_input in[1] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true, .strided = true}};
  gc_check(d, "cumprod no zeros", f_op, &c, 1, in);
  /* zeros: one in the middle, at the start, two in a line, at the end; cumprod is multilinear,
   * so central differences are exact at a zero too. Lines along dim 1 of [4, 5]. */
  double z[20] = {1.5, -0.7, 0, 1.2, 0.9,  /* one zero inside */
                  0, 1.1, -1.3, 0.8, 1.4,  /* zero first */
                  0.6, 0, 1.7, 0, -0.9,    /* two zeros */
                  1.3, 0.8, -1.1, 0.7, 0}; /* zero last */
  c.dim = 1;
  gc_input in2[1] = {{.ndim = 2, .shape = {4, 5}, .data = z, .requires_grad = true}};
  gc_check(d, "cumprod with zeros", f_op, &c, 1, in2);
  /* the same along dim 0 of the transposed layout */
  c.dim = 0;
  gc_input in3[1] = {{.ndim = 2, .shape = {5, 4}, .data = z, .requires_grad = true, .strided = true}};
  gc_check(d, "cumprod with zeros dim 0", f_op, &c, 1, in3);
}
END_TEST

START_TEST(sort_topk_values_gradcheck) {
  ct_device *d = ct_test_device();
  double x[12];
  gc_fill(x, 12, -1, 1, 12); /* distinct values, far apart next to h */
  struct op_ctx c = {OP_SORT, 1, NULL};
  gc_input in[1] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true, .strided = true}};
  gc_check(d, "sort values", f_op, &c, 1, in);
  c.op = OP_TOPK;
  c.dim = -2;
  gc_input in2[1] = {{.ndim = 2, .shape = {3, 4}, .data = x, .requires_grad = true}};
  gc_check(d, "topk values", f_op, &c, 1, in2);
}
END_TEST

/* Ties: the stable sort's indices decide which element a value's gradient goes to (PyTorch's
 * sort backward scatters through its indices too): x = [2, 5, 2, 5] ascending gives indices
 * [0, 2, 1, 3], so g = [1, 2, 3, 4] comes back as [1, 3, 2, 4]. */
START_TEST(sort_ties_follow_indices) {
  ct_device *d = ct_test_device();
  double xv[4] = {2, 5, 2, 5}, gv[4] = {1, 2, 3, 4};
  int64_t n = 4;
  ct_tensor *x = gc_from(d, 1, &n, xv), *g = gc_from(d, 1, &n, gv), *v = NULL, *gx = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_sort(&v, NULL, x, 0, false));
  ck_assert_ct_ok(ct_backward(v, g));
  ck_assert_ct_ok(ct_grad(&gx, x));
  double *out = gc_host(gx);
  static const double want[4] = {1, 3, 2, 4};
  for (int i = 0; i < 4; i++) ck_assert_double_eq(out[i], want[i]);
  free(out);
  ct_release(gx);
  ct_release(v);
  ct_release(g);
  ct_release(x);
}
END_TEST

/* Index outputs (sort/topk indices) and integer results never require grad; integer tensors
 * can't require grad. */
START_TEST(indices_never_require_grad) {
  ct_device *d = ct_test_device();
  double xv[6] = {0.3, -1, 2, 0.5, 4, -2};
  int64_t shape[2] = {2, 3};
  ct_tensor *x = gc_from(d, 2, shape, xv), *v = NULL, *ix = NULL, *cs = NULL, *i = NULL;
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_topk(&v, &ix, x, 2, -1, true));
  ck_assert(ct_requires_grad(v));
  ck_assert(!ct_requires_grad(ix));
  ct_release(v);
  ct_release(ix);
  ck_assert_ct_ok(ct_argsort(&ix, x, 0, false));
  ck_assert(!ct_requires_grad(ix));
  ck_assert_ct_ok(ct_cast(&i, x, CT_I64));
  ck_assert_ct_status(ct_set_requires_grad(i, true), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ct_ok(ct_cumsum(&cs, i, 0)); /* i64 */
  ck_assert(!ct_requires_grad(cs));
  /* Nothing here reads a result back: wait for the queue, or the process may exit while PoCL
   * 3.1 still compiles the last kernel, and it crashes then (docs/PORTABILITY.md). */
  ck_assert_ct_ok(ct_device_synchronize(d));
  ct_release(cs);
  ct_release(i);
  ct_release(ix);
  ct_release(x);
}
END_TEST

/* One f32 run per op: the formulas run in f32 (no check of values beyond the gradient of the
 * identity-like cases). */
START_TEST(f32_smoke) {
  ct_device *d = ct_test_device();
  float xv[6] = {1, 2, 3, 4, 5, 6};
  int64_t iv[2] = {1, 1}, shape[2] = {2, 3}, is[1] = {2};
  ct_tensor *x = NULL, *idx = NULL, *y = NULL, *s = NULL, *g = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, shape, xv));
  ck_assert_ct_ok(ct_from_host(&idx, d, CT_I64, 1, is, iv));
  ck_assert_ct_ok(ct_set_requires_grad(x, true));
  ck_assert_ct_ok(ct_index_select(&y, x, 1, idx)); /* column 1 twice */
  ck_assert_ct_ok(ct_sum(&s, y, 0, NULL, false));
  ck_assert_ct_ok(ct_backward(s, NULL));
  ck_assert_ct_ok(ct_grad(&g, x));
  float gv[6];
  ck_assert_ct_ok(ct_to_host(g, gv, sizeof gv));
  static const float want[6] = {0, 2, 0, 0, 2, 0};
  for (int i = 0; i < 6; i++) ck_assert_float_eq(gv[i], want[i]);
  ct_release(g);
  ct_release(s);
  ct_release(y);
  ct_release(idx);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-index");
  TCase *tc = tcase_create("index");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, index_select_gradcheck);
  tcase_add_test(tc, gather_gradcheck);
  tcase_add_test(tc, scatter_add_gradcheck);
  tcase_add_test(tc, embedding_gradcheck);
  tcase_add_test(tc, embedding_grad_deterministic);
  tcase_add_test(tc, masked_fill_gradcheck);
  tcase_add_test(tc, cumsum_gradcheck);
  tcase_add_test(tc, cumprod_gradcheck);
  tcase_add_test(tc, sort_topk_values_gradcheck);
  tcase_add_test(tc, sort_ties_follow_indices);
  tcase_add_test(tc, indices_never_require_grad);
  tcase_add_test(tc, f32_smoke);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
