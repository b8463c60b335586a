/* Indexing ops against host loops: index_select, gather, embedding, masked_fill and scatter_add
 * on random cases with fixed seeds, i64 and i32 indices, strided (transposed) inputs, size-0 and
 * 0-dim shapes, negative dims, out-of-range indices (the message names the value and its
 * position) and scatter_add's determinism (the same bits on two runs, equal to a sequential host
 * sum in index order).
 *
 * Programs built (cold cache cost): kernels/index.cl for element sizes 4 (f32), 2 (f16) and 8
 * (i64); kernels/order.cl (scatter_add) for f32, f16 and i32. Moves are exact, so results are
 * compared bit for bit; so is scatter_add, whose additions happen in a defined order, each
 * rounded to the dtype on both sides. */
#include <math.h>
#include <stdatomic.h>

#include <CL/cl.h>
#include <dlpack/dlpack.h>

#include "index/index.h"
#include "index_util.h"

static const int64_t XSHAPE[3] = {4, 6, 5};

static float *random_floats(int64_t n) {
  float *v = malloc((size_t)n * sizeof *v + 4);
  for (int64_t i = 0; i < n; i++) v[i] = ix_float();
  return v;
}

/* index_select over dims 0, 1, 2, -1 x (i64, i32) x (contiguous, transposed x and index). */
START_TEST(test_index_select_random) {
  ct_device *d = ct_test_device();
  ix_seed(100 + (uint64_t)_i);
  int dim = (int[]){0, 1, 2, -1}[_i % 4];
  ct_dtype it = _i < 4 ? CT_I64 : CT_I32;
  int tr = _i % 2;
  int dd = dim < 0 ? dim + 3 : dim;
  int64_t n = ix_numel(3, XSHAPE);
  float *xv = random_floats(n);
  ct_tensor *x = ix_tensor(d, CT_F32, 3, XSHAPE, xv, tr);
  int64_t ni = 9, iv[9];
  for (int i = 0; i < ni; i++) iv[i] = ix_below(XSHAPE[dd]);
  ct_tensor *idx = ix_index(d, it, 1, &ni, iv, 0);
  ct_tensor *out = NULL;
  ck_assert_ct_ok(ct_index_select(&out, x, dim, idx));
  int64_t oshape[3] = {XSHAPE[0], XSHAPE[1], XSHAPE[2]};
  oshape[dd] = ni;
  ix_check_shape(out, 3, oshape);
  ck_assert_int_eq(ct_tensor_dtype(out), CT_F32);
  float *ov = ix_read(out);
  for (int64_t i = 0; i < ix_numel(3, oshape); i++) {
    int64_t c[3];
    ix_coords(c, i, 3, oshape);
    c[dd] = iv[c[dd]];
    ck_assert_msg(ov[i] == xv[ix_linear(c, 3, XSHAPE)], "element %lld", (long long)i);
  }
  free(ov);
  free(xv);
  ct_release(out);
  ct_release(idx);
  ct_release(x);
}
END_TEST

/* Other element sizes (f16, i64), a strided (sliced) index, 0-dim and empty indices, size-0 dims,
 * a 0-dim x. */
START_TEST(test_index_select_edges) {
  ct_device *d = ct_test_device();
  ix_seed(7);
  int64_t shape[2] = {3, 40};
  uint16_t hv[120];
  int64_t lv[120];
  for (int i = 0; i < 120; i++) {
    hv[i] = ct_f32_to_f16(ix_float());
    lv[i] = (int64_t)ix_next();
  }
  ct_tensor *xh = ix_tensor(d, CT_F16, 2, shape, hv, 0), *xl = ix_tensor(d, CT_I64, 2, shape, lv, 1);
  /* index [7 values] read every second entry of a [14] tensor */
  int64_t n14 = 14, iv[14];
  for (int i = 0; i < 14; i++) iv[i] = ix_below(40);
  ct_tensor *ib = ix_index(d, CT_I32, 1, &n14, iv, 0), *idx = NULL;
  ck_assert_ct_ok(ct_slice(&idx, ib, 0, 0, 14, 2));
  ct_tensor *oh = NULL, *ol = NULL;
  ck_assert_ct_ok(ct_index_select(&oh, xh, -1, idx));
  ck_assert_ct_ok(ct_index_select(&ol, xl, 1, idx));
  uint16_t *ohv = ix_read(oh);
  int64_t *olv = ix_read(ol);
  for (int r = 0; r < 3; r++)
    for (int j = 0; j < 7; j++) {
      ck_assert_uint_eq(ohv[r * 7 + j], hv[r * 40 + iv[2 * j]]);
      ck_assert_int_eq(olv[r * 7 + j], lv[r * 40 + iv[2 * j]]);
    }
  free(ohv);
  free(olv);
  ct_release(oh);
  ct_release(ol);

  /* A 0-dim index keeps the dim with size 1, as PyTorch. */
  int64_t one = 2;
  ct_tensor *i0 = NULL, *o0 = NULL;
  ck_assert_ct_ok(ct_from_host(&i0, d, CT_I64, 0, NULL, &one));
  ck_assert_ct_ok(ct_index_select(&o0, xh, 0, i0));
  int64_t s0[2] = {1, 40};
  ix_check_shape(o0, 2, s0);
  uint16_t *o0v = ix_read(o0);
  ck_assert_int_eq(memcmp(o0v, hv + 80, 80), 0);
  free(o0v);
  ct_release(o0);

  /* An empty index; an empty x dim with an empty index; a 0-dim x. */
  int64_t zero = 0, es[2] = {3, 0};
  ct_tensor *ie = NULL, *oe = NULL, *xe = NULL;
  ck_assert_ct_ok(ct_empty(&ie, d, CT_I64, 1, &zero));
  ck_assert_ct_ok(ct_index_select(&oe, xh, 1, ie));
  ix_check_shape(oe, 2, es);
  ct_release(oe);
  ck_assert_ct_ok(ct_empty(&xe, d, CT_F32, 2, es));
  ck_assert_ct_ok(ct_index_select(&oe, xe, 1, ie));
  ix_check_shape(oe, 2, es);
  ct_release(oe);
  int64_t s30[2] = {0, 0};
  ck_assert_ct_ok(ct_index_select(&oe, xe, 0, ie));
  s30[1] = 0;
  ix_check_shape(oe, 2, s30);
  ct_release(oe);
  float f = 4.5f, *fv;
  int64_t z = 0;
  ct_tensor *xs = NULL, *iz = NULL;
  ck_assert_ct_ok(ct_from_host(&xs, d, CT_F32, 0, NULL, &f));
  ck_assert_ct_ok(ct_from_host(&iz, d, CT_I64, 1, (int64_t[]){1}, &z));
  ck_assert_ct_ok(ct_index_select(&oe, xs, -1, iz));
  ck_assert_int_eq(ct_tensor_ndim(oe), 0);
  fv = ix_read(oe);
  ck_assert(*fv == 4.5f);
  free(fv);
  ct_release(oe);
  ct_release(xs);
  ct_release(iz);
  ct_release(xe);
  ct_release(ie);
  ct_release(i0);
  ct_release(idx);
  ct_release(ib);
  ct_release(xh);
  ct_release(xl);
}
END_TEST

/* gather over each dim with an index smaller than x, i64/i32, transposed x and index. */
START_TEST(test_gather_random) {
  ct_device *d = ct_test_device();
  ix_seed(200 + (uint64_t)_i);
  int dim = (int[]){0, 1, -1, 2}[_i % 4];
  int dd = dim < 0 ? dim + 3 : dim;
  ct_dtype it = _i < 4 ? CT_I32 : CT_I64;
  int64_t n = ix_numel(3, XSHAPE);
  float *xv = random_floats(n);
  ct_tensor *x = ix_tensor(d, CT_F32, 3, XSHAPE, xv, _i % 2);
  int64_t ishape[3] = {3, 5, 4};
  ishape[dd] = 7; /* longer than x along dim: allowed */
  int64_t ni = ix_numel(3, ishape), *iv = malloc((size_t)ni * 8);
  for (int64_t i = 0; i < ni; i++) iv[i] = ix_below(XSHAPE[dd]);
  ct_tensor *idx = ix_index(d, it, 3, ishape, iv, (_i / 2) % 2);
  ct_tensor *out = NULL;
  ck_assert_ct_ok(ct_gather(&out, x, dim, idx));
  ix_check_shape(out, 3, ishape);
  float *ov = ix_read(out);
  for (int64_t i = 0; i < ni; i++) {
    int64_t c[3];
    ix_coords(c, i, 3, ishape);
    c[dd] = iv[i];
    ck_assert_msg(ov[i] == xv[ix_linear(c, 3, XSHAPE)], "element %lld", (long long)i);
  }
  free(ov);
  free(iv);
  free(xv);
  ct_release(out);
  ct_release(idx);
  ct_release(x);
}
END_TEST

/* embedding: f16 weight (plain and transposed storage), indices of 0, 1 and 2 dims. */
START_TEST(test_embedding) {
  ct_device *d = ct_test_device();
  ix_seed(300);
  int64_t wshape[2] = {10, 6};
  uint16_t wv[60];
  for (int i = 0; i < 60; i++) wv[i] = ct_f32_to_f16(ix_float());
  for (int tr = 0; tr < 2; tr++) {
    ct_tensor *w = ix_tensor(d, CT_F16, 2, wshape, wv, tr);
    int64_t ishape[2] = {2, 3}, iv[6];
    for (int i = 0; i < 6; i++) iv[i] = ix_below(10);
    for (int nd = 0; nd <= 2; nd++) {
      const int64_t *sh = nd == 0 ? NULL : nd == 1 ? ishape + 1 : ishape;
      ct_tensor *idx = ix_index(d, tr ? CT_I32 : CT_I64, nd, sh, iv, 0), *out = NULL;
      ck_assert_ct_ok(ct_embedding(&out, w, idx));
      int64_t os[3] = {0, 0, 0};
      for (int i = 0; i < nd; i++) os[i] = sh[i];
      os[nd] = 6;
      ix_check_shape(out, nd + 1, os);
      int64_t rows = ix_numel(nd, sh);
      uint16_t *ov = ix_read(out);
      for (int64_t r = 0; r < rows; r++) ck_assert_int_eq(memcmp(ov + r * 6, wv + iv[r] * 6, 12), 0);
      free(ov);
      ct_release(out);
      ct_release(idx);
    }
    ct_release(w);
  }
}
END_TEST

START_TEST(test_masked_fill) {
  ct_device *d = ct_test_device();
  ix_seed(400);
  /* x [3, 4], mask [4] broadcast along dim 0. */
  int64_t xs[2] = {3, 4}, ms = 4;
  float xv[12];
  for (int i = 0; i < 12; i++) xv[i] = ix_float();
  uint8_t mv[4] = {1, 0, 0, 1};
  ct_tensor *x = ix_tensor(d, CT_F32, 2, xs, xv, 1), *m = NULL, *out = NULL;
  ck_assert_ct_ok(ct_from_host(&m, d, CT_BOOL, 1, &ms, mv));
  ck_assert_ct_ok(ct_masked_fill(&out, x, m, 2.5));
  ix_check_shape(out, 2, xs);
  float *ov = ix_read(out);
  for (int i = 0; i < 12; i++) ck_assert(ov[i] == (mv[i % 4] ? 2.5f : xv[i]));
  free(ov);
  ct_release(out);
  /* i64 x [2, 1] and mask [3]: the result broadcasts to [2, 3]; 7.9 converts as ct_cast (7). */
  int64_t ls[2] = {2, 1}, lv[2] = {-5, 11}, ms3 = 3, rs[2] = {2, 3};
  uint8_t m3[3] = {0, 1, 0};
  ct_tensor *xl = NULL, *m3t = NULL;
  ck_assert_ct_ok(ct_from_host(&xl, d, CT_I64, 2, ls, lv));
  ck_assert_ct_ok(ct_from_host(&m3t, d, CT_BOOL, 1, &ms3, m3));
  ck_assert_ct_ok(ct_masked_fill(&out, xl, m3t, 7.9));
  ix_check_shape(out, 2, rs);
  int64_t *olv = ix_read(out);
  for (int i = 0; i < 6; i++) ck_assert_int_eq(olv[i], m3[i % 3] ? 7 : lv[i / 3]);
  free(olv);
  ct_release(out);
  /* a non-bool mask */
  ck_assert_ct_status(ct_masked_fill(&out, x, xl, 1.0), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ptr_null(out);
  ck_assert_error_contains("mask has dtype i64");
  /* The library's scalar rule (as ct_fill_/ct_full): 300 does not fit u8, NaN no integer. */
  ct_tensor *xu = NULL;
  ck_assert_ct_ok(ct_zeros(&xu, d, CT_U8, 1, &ms3));
  out = (ct_tensor *)1;
  ck_assert_ct_status(ct_masked_fill(&out, xu, m3t, 300.0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_error_contains("ct_masked_fill: value 300 cannot be converted to u8 without overflow");
  ck_assert_ct_status(ct_masked_fill(&out, xl, m3t, NAN), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_masked_fill: value nan cannot be converted to i64");
  ct_release(xu);
  /* size 0 */
  int64_t zs[2] = {0, 4};
  ct_tensor *xe = NULL;
  ck_assert_ct_ok(ct_empty(&xe, d, CT_F32, 2, zs));
  ck_assert_ct_ok(ct_masked_fill(&out, xe, m, 1.0));
  ix_check_shape(out, 2, zs);
  ct_release(out);
  ct_release(xe);
  ct_release(xl);
  ct_release(m3t);
  ct_release(m);
  ct_release(x);
}
END_TEST

/* Host scatter_add in index order, each addition rounded to f32 (as the device). */
static void host_scatter_f32(float *out, const int64_t *xshape, int dd, const int64_t *ishape, const int64_t *iv,
                             const float *sv, const int64_t *sshape) {
  for (int64_t i = 0; i < ix_numel(2, ishape); i++) {
    int64_t c[2];
    ix_coords(c, i, 2, ishape);
    float s = sv[ix_linear(c, 2, sshape)];
    c[dd] = iv[i];
    int64_t o = ix_linear(c, 2, xshape);
    out[o] = out[o] + s;
  }
}

START_TEST(test_scatter_add_random) {
  ct_device *d = ct_test_device();
  ix_seed(500 + (uint64_t)_i);
  int dim = (int[]){0, 1, -1, -2}[_i];
  int dd = dim < 0 ? dim + 2 : dim;
  int64_t xshape[2] = {5, 6}, ishape[2] = {4, 3}, sshape[2] = {10, 9};
  ishape[dd] = 9; /* more entries than x's dim: many collisions */
  float xv[30], sv[90];
  for (int i = 0; i < 30; i++) xv[i] = ix_float();
  for (int i = 0; i < 90; i++) sv[i] = ix_float() * 1000.0f;
  int64_t ni = ix_numel(2, ishape), iv[64];
  for (int64_t i = 0; i < ni; i++) iv[i] = ix_below(xshape[dd]);
  const float *src_v = sv;
  ct_tensor *x = ix_tensor(d, CT_F32, 2, xshape, xv, _i % 2);
  ct_tensor *s = ix_tensor(d, CT_F32, 2, sshape, src_v, 1 - _i % 2);
  ct_tensor *idx = ix_index(d, _i < 2 ? CT_I64 : CT_I32, 2, ishape, iv, _i / 2);
  ct_tensor *o1 = NULL, *o2 = NULL;
  ck_assert_ct_ok(ct_scatter_add(&o1, x, dim, idx, s));
  ck_assert_ct_ok(ct_scatter_add(&o2, x, dim, idx, s));
  ix_check_shape(o1, 2, xshape);
  float ref[30];
  memcpy(ref, xv, sizeof ref);
  host_scatter_f32(ref, xshape, dd, ishape, iv, src_v, sshape);
  float *v1 = ix_read(o1), *v2 = ix_read(o2);
  ck_assert_int_eq(memcmp(v1, v2, sizeof ref), 0);
  for (int i = 0; i < 30; i++) ck_assert_msg(v1[i] == ref[i], "element %d: %.9g vs %.9g", i, v1[i], ref[i]);
  /* x itself is unchanged (functional) */
  float *xr = ix_read(x);
  ck_assert_int_eq(memcmp(xr, xv, sizeof xv), 0);
  free(xr);
  free(v1);
  free(v2);
  ct_release(o1);
  ct_release(o2);
  ct_release(idx);
  ct_release(s);
  ct_release(x);
}
END_TEST

/* Many sources of very different magnitudes into few destinations, so that the result depends on
 * the order of the additions: two runs give the same bits, equal to the sequential host sum. */
START_TEST(test_scatter_add_deterministic) {
  ct_device *d = ct_test_device();
  ix_seed(600);
  enum { N = 20000 };
  int64_t xshape[2] = {2, 3}, ishape[2] = {2, N};
  float xv[6] = {0};
  float *sv = malloc(2 * N * sizeof *sv);
  int64_t *iv = malloc(2 * N * sizeof *iv);
  for (int i = 0; i < 2 * N; i++) {
    sv[i] = ldexpf(ix_float(), (int)ix_below(40) - 20);
    iv[i] = ix_below(3);
  }
  ct_tensor *x = ix_tensor(d, CT_F32, 2, xshape, xv, 0), *s = ix_tensor(d, CT_F32, 2, ishape, sv, 0);
  ct_tensor *idx = ix_index(d, CT_I64, 2, ishape, iv, 0), *o1 = NULL, *o2 = NULL;
  ck_assert_ct_ok(ct_scatter_add(&o1, x, 1, idx, s));
  ck_assert_ct_ok(ct_scatter_add(&o2, x, 1, idx, s));
  float ref[6] = {0};
  host_scatter_f32(ref, xshape, 1, ishape, iv, sv, ishape);
  float *v1 = ix_read(o1), *v2 = ix_read(o2);
  ck_assert_int_eq(memcmp(v1, v2, sizeof ref), 0);
  ck_assert_int_eq(memcmp(v1, ref, sizeof ref), 0);
  free(v1);
  free(v2);
  free(sv);
  free(iv);
  ct_release(o1);
  ct_release(o2);
  ct_release(idx);
  ct_release(s);
  ct_release(x);
}
END_TEST

/* index_select's and embedding's backward shape: one index per row, expanded across 32
 * contiguous columns (stride 0), which the kernel adds 16 columns at a time: the same bits as
 * the sequential host sum; and a bad index found on that path. */
START_TEST(test_scatter_add_shared_index) {
  ct_device *d = ct_test_device();
  ix_seed(800);
  enum { R = 40, C = 32 };
  int64_t xshape[2] = {5, C}, ishape[2] = {R, C}, rows = R, col[2] = {R, 1};
  float xv[5 * C], *sv = malloc(R * C * sizeof *sv);
  int64_t ids[R], *iv = malloc(R * C * sizeof *iv);
  for (int i = 0; i < 5 * C; i++) xv[i] = ix_float();
  for (int i = 0; i < R * C; i++) sv[i] = ldexpf(ix_float(), (int)ix_below(30) - 15);
  for (int r = 0; r < R; r++) ids[r] = ix_below(5);
  for (int i = 0; i < R * C; i++) iv[i] = ids[i / C];
  ct_tensor *x = ix_tensor(d, CT_F32, 2, xshape, xv, 0), *s = ix_tensor(d, CT_F32, 2, ishape, sv, 0);
  ct_tensor *i1 = ix_index(d, CT_I64, 1, &rows, ids, 0), *i2 = NULL, *idx = NULL, *o = NULL;
  ck_assert_ct_ok(ct_reshape(&i2, i1, 2, col));
  ck_assert_ct_ok(ct_expand(&idx, i2, 2, ishape));
  ck_assert_int_eq(ct_tensor_strides(idx)[1], 0);
  ck_assert_ct_ok(ct_scatter_add(&o, x, 0, idx, s));
  float ref[5 * C];
  memcpy(ref, xv, sizeof ref);
  host_scatter_f32(ref, xshape, 0, ishape, iv, sv, ishape);
  float *v = ix_read(o);
  ck_assert_int_eq(memcmp(v, ref, sizeof ref), 0);
  free(v);
  ct_release(o);
  ct_release(idx);
  ct_release(i2);
  ct_release(i1);
  ids[17] = 7;
  i1 = ix_index(d, CT_I64, 1, &rows, ids, 0);
  ck_assert_ct_ok(ct_reshape(&i2, i1, 2, col));
  ck_assert_ct_ok(ct_expand(&idx, i2, 2, ishape));
  ck_assert_ct_status(ct_scatter_add(&o, x, 0, idx, s), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(o);
  ck_assert_error_contains("ct_scatter_add: index 7 at position [17, ");
  ck_assert_error_contains("is out of range for dim 0 of size 5");
  ct_release(idx);
  ct_release(i2);
  ct_release(i1);
  ct_release(s);
  ct_release(x);
  free(sv);
  free(iv);
}
END_TEST

/* f16 (each addition rounded to f16, as PyTorch's CPU loop) and i32 (wrapping). */
START_TEST(test_scatter_add_dtypes) {
  ct_device *d = ct_test_device();
  ix_seed(700);
  int64_t n = 5, k = 12;
  uint16_t xh[5], sh[12];
  int32_t xi[5], si[12];
  int64_t iv[12];
  for (int i = 0; i < 5; i++) {
    xh[i] = ct_f32_to_f16(ix_float());
    xi[i] = INT32_MAX - i;
  }
  for (int i = 0; i < 12; i++) {
    sh[i] = ct_f32_to_f16(ix_float() * 100.0f);
    si[i] = (int32_t)ix_below(1000);
    iv[i] = ix_below(5);
  }
  ct_tensor *idx = ix_index(d, CT_I32, 1, &k, iv, 0);
  ct_tensor *x = ix_tensor(d, CT_F16, 1, &n, xh, 0), *s = ix_tensor(d, CT_F16, 1, &k, sh, 0), *o = NULL;
  ck_assert_ct_ok(ct_scatter_add(&o, x, 0, idx, s));
  uint16_t *oh = ix_read(o);
  for (int i = 0; i < 12; i++) xh[iv[i]] = ct_f32_to_f16(ct_f16_to_f32(xh[iv[i]]) + ct_f16_to_f32(sh[i]));
  ck_assert_int_eq(memcmp(oh, xh, sizeof xh), 0);
  free(oh);
  ct_release(o);
  ct_release(x);
  ct_release(s);
  x = ix_tensor(d, CT_I32, 1, &n, xi, 0);
  s = ix_tensor(d, CT_I32, 1, &k, si, 0);
  ck_assert_ct_ok(ct_scatter_add(&o, x, -1, idx, s));
  int32_t *oi = ix_read(o);
  for (int i = 0; i < 12; i++) xi[iv[i]] = (int32_t)((uint32_t)xi[iv[i]] + (uint32_t)si[i]);
  ck_assert_int_eq(memcmp(oi, xi, sizeof xi), 0);
  free(oi);
  ct_release(o);
  /* an empty index leaves a copy of x */
  int64_t zero = 0;
  ct_tensor *ie = NULL;
  ck_assert_ct_ok(ct_empty(&ie, d, CT_I64, 1, &zero));
  ck_assert_ct_ok(ct_scatter_add(&o, x, 0, ie, s));
  ix_check_shape(o, 1, &n);
  ct_release(o);
  ct_release(ie);
  ct_release(x);
  ct_release(s);
  ct_release(idx);
}
END_TEST

/* Out-of-range and negative indices: found on the device, named with their position. */
START_TEST(test_out_of_range) {
  ct_device *d = ct_test_device();
  int64_t xs[2] = {3, 5}, four = 4;
  float xv[15] = {0};
  ct_tensor *x = ix_tensor(d, CT_F32, 2, xs, xv, 0), *out = (ct_tensor *)1;
  int64_t bad1[4] = {0, 2, 9, 1};
  ct_tensor *i1 = ix_index(d, CT_I64, 1, &four, bad1, 0);
  ck_assert_ct_status(ct_index_select(&out, x, 1, i1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_error_contains("ct_index_select: index 9 at position [2] is out of range for dim 1 of size 5");
  int64_t bad2[4] = {0, -1, 1, 2};
  ct_tensor *i2 = ix_index(d, CT_I32, 1, &four, bad2, 0);
  ck_assert_ct_status(ct_index_select(&out, x, 0, i2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_index_select: index -1 at position [1] is out of range for dim 0 of size 3");

  int64_t gs[2] = {2, 3}, gv[6] = {0, 1, 2, 7, 0, 0};
  ct_tensor *gi = ix_index(d, CT_I64, 2, gs, gv, 0);
  ck_assert_ct_status(ct_gather(&out, x, 1, gi), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_error_contains("ct_gather: index 7 at position [1, 0] is out of range for dim 1 of size 5");

  int64_t ev[6] = {0, 1, 2, 2, 1, 3};
  ct_tensor *ei = ix_index(d, CT_I32, 2, gs, ev, 1); /* transposed: logical [[0,2],[1,1],[2,3]]^T */
  ck_assert_ct_status(ct_embedding(&out, x, ei), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_error_contains("ct_embedding: index 3 at position [1, 2] is out of range for weight with 3 rows");

  int64_t sv[6] = {0, 1, 2, 0, 4, 5};
  ct_tensor *si = ix_index(d, CT_I64, 2, gs, sv, 0), *src = NULL;
  ck_assert_ct_ok(ct_ones(&src, d, CT_F32, 2, gs));
  ck_assert_ct_status(ct_scatter_add(&out, x, -1, si, src), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_error_contains("ct_scatter_add: index 5 at position [1, 2] is out of range for dim 1 of size 5");
  /* An empty result still checks its indices, as PyTorch does: x [0, 5] (no rows), embedding
   * rows of width 0. */
  int64_t e05[2] = {0, 5}, e30[2] = {3, 0};
  ct_tensor *x05 = NULL, *w30 = NULL;
  ck_assert_ct_ok(ct_empty(&x05, d, CT_F32, 2, e05));
  ck_assert_ct_ok(ct_empty(&w30, d, CT_F32, 2, e30));
  ck_assert_ct_status(ct_index_select(&out, x05, 1, i1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_index_select: index 9 at position [2] is out of range for dim 1 of size 5");
  ck_assert_ct_status(ct_embedding(&out, w30, ei), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_embedding: index 3 at position [1, 2] is out of range for weight with 3 rows");
  ck_assert_ptr_null(out);
  ct_release(x05);
  ct_release(w30);
  ct_release(src);
  ct_release(si);
  ct_release(ei);
  ct_release(gi);
  ct_release(i1);
  ct_release(i2);
  ct_release(x);
}
END_TEST


/* Index tensors from ct_from_host carry the range of their values (tensor.h), which spares the
 * device round trip of their check (ct__index_checks_read stays put); any write after the upload,
 * and handing the memory out, makes the ops check on the device again, so an index made bad
 * later is still reported. Indices a kernel computed are always checked. */
static long checks_read(void) { return atomic_load(&ct__index_checks_read); }

static void expect_bad_embedding(const ct_tensor *w, const ct_tensor *idx, const char *msg) {
  ct_tensor *out = (ct_tensor *)1;
  long before = checks_read();
  ck_assert_ct_status(ct_embedding(&out, w, idx), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_error_contains(msg);
  ck_assert_int_eq(checks_read(), before + 1);
}

START_TEST(test_known_range) {
  ct_device *d = ct_test_device();
  int64_t ws[2] = {3, 2}, four = 4;
  float wv[6] = {0, 1, 10, 11, 20, 21};
  ct_tensor *w = ix_tensor(d, CT_F32, 2, ws, wv, 0), *out = NULL;
  const int64_t good[4] = {2, 0, 1, 2};

  /* From the host, in range: no read back, right rows. */
  ct_tensor *idx = NULL;
  ck_assert_ct_ok(ct_from_host(&idx, d, CT_I64, 1, &four, good));
  long before = checks_read();
  ck_assert_ct_ok(ct_embedding(&out, w, idx));
  ct_tensor *sel = NULL;
  ck_assert_ct_ok(ct_index_select(&sel, w, 0, idx));
  ck_assert_int_eq(checks_read(), before);
  float got[8], want[8] = {20, 21, 0, 1, 10, 11, 20, 21};
  ck_assert_ct_ok(ct_to_host(out, got, sizeof got));
  ck_assert_mem_eq(got, want, sizeof got);
  ck_assert_ct_ok(ct_to_host(sel, got, sizeof got));
  ck_assert_mem_eq(got, want, sizeof got);
  ct_release(sel);
  ct_release(out);
  out = NULL;
  /* A view of it (the storage's range bounds every view) needs no read either. */
  ct_tensor *part = NULL;
  ck_assert_ct_ok(ct_slice(&part, idx, 0, 1, 3, 1));
  ck_assert_ct_ok(ct_embedding(&out, w, part));
  ck_assert_int_eq(checks_read(), before);
  ct_release(out);
  out = NULL;
  ct_release(part);

  /* Written after the upload: checked on the device again, and the bad index found. */
  ck_assert_ct_ok(ct_fill_(idx, 7));
  expect_bad_embedding(w, idx, "ct_embedding: index 7 at position [0] is out of range for weight with 3 rows");
  ct_release(idx);

  ck_assert_ct_ok(ct_from_host(&idx, d, CT_I64, 1, &four, good));
  ck_assert_ct_ok(ct_add_scalar_out(idx, idx, 1));
  expect_bad_embedding(w, idx, "ct_embedding: index 3 at position [0] is out of range for weight with 3 rows");
  ct_release(idx);

  const int32_t bad32[4] = {0, 1, -5, 2}, good32[4] = {0, 1, 2, 2};
  ct_tensor *src = NULL, *idx32 = NULL;
  ck_assert_ct_ok(ct_from_host(&src, d, CT_I32, 1, &four, bad32));
  ck_assert_ct_ok(ct_from_host(&idx32, d, CT_I32, 1, &four, good32));
  ck_assert_ct_ok(ct_copy(idx32, src));
  expect_bad_embedding(w, idx32, "ct_embedding: index -5 at position [2] is out of range for weight with 3 rows");
  ct_release(idx32);
  ct_release(src);

  /* Handed out as a cl_mem and written on the device's queue behind the library's back. */
  ck_assert_ct_ok(ct_from_host(&idx, d, CT_I64, 1, &four, good));
  struct _cl_mem *mem = NULL;
  struct _cl_command_queue *q = NULL;
  size_t off = 0;
  ck_assert_ct_ok(ct_tensor_cl_mem(&mem, &off, idx));
  ck_assert_ct_ok(ct_device_cl_queue(&q, d));
  const cl_long nine = 9;
  ck_assert_int_eq(clEnqueueWriteBuffer(q, mem, CL_TRUE, off + sizeof nine, sizeof nine, &nine, 0, NULL, NULL),
                   CL_SUCCESS);
  expect_bad_embedding(w, idx, "ct_embedding: index 9 at position [1] is out of range for weight with 3 rows");
  ct_release(idx);

  /* Exported through DLPack: the consumer may write it, so it is checked from then on. */
  ck_assert_ct_ok(ct_from_host(&idx, d, CT_I64, 1, &four, good));
  struct DLManagedTensor *dl = NULL;
  ck_assert_ct_ok(ct_to_dlpack(&dl, idx));
  before = checks_read();
  ck_assert_ct_ok(ct_embedding(&out, w, idx));
  ck_assert_int_eq(checks_read(), before + 1);
  dl->deleter(dl);
  ct_release(out);
  out = NULL;
  ct_release(idx);

  /* Computed by a kernel: checked. */
  float sv[8] = {0, 5, 1, 0, 3, 0, 0, 2};
  int64_t ss[2] = {4, 2};
  ct_tensor *scores = ix_tensor(d, CT_F32, 2, ss, sv, 0), *am = NULL;
  ck_assert_ct_ok(ct_argmax(&am, scores, 1, false));
  before = checks_read();
  ck_assert_ct_ok(ct_embedding(&out, w, am));
  ck_assert_int_eq(checks_read(), before + 1);
  ct_release(out);
  out = NULL;
  ct_release(am);
  ct_release(scores);

  /* scatter_add and the class losses use the range too. */
  ck_assert_ct_ok(ct_from_host(&idx, d, CT_I64, 1, &four, good));
  ct_tensor *z = NULL, *ones = NULL, *logits = NULL, *loss = NULL;
  int64_t three = 3;
  ck_assert_ct_ok(ct_zeros(&z, d, CT_F32, 1, &three));
  ck_assert_ct_ok(ct_ones(&ones, d, CT_F32, 1, &four));
  int64_t ls[2] = {4, 3};
  float lv[12] = {0};
  logits = ix_tensor(d, CT_F32, 2, ls, lv, 0);
  before = checks_read();
  ck_assert_ct_ok(ct_scatter_add(&out, z, 0, idx, ones));
  ck_assert_ct_ok(ct_cross_entropy(&loss, logits, idx, -100, 0.0, CT_REDUCTION_MEAN));
  ck_assert_int_eq(checks_read(), before);
  float sums[3];
  ck_assert_ct_ok(ct_to_host(out, sums, sizeof sums));
  ck_assert(sums[0] == 1 && sums[1] == 1 && sums[2] == 2);
  float lval;
  ck_assert_ct_ok(ct_to_host(loss, &lval, sizeof lval));
  ck_assert_float_eq_tol(lval, logf(3.0f), 1e-6f);
  ct_release(loss);
  loss = (ct_tensor *)1;
  ck_assert_ct_ok(ct_fill_(idx, 3));
  ck_assert_ct_status(ct_cross_entropy(&loss, logits, idx, -100, 0.0, CT_REDUCTION_MEAN), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(loss);
  ck_assert_error_contains("out of range for 3 classes");
  ct_release(out);
  ct_release(logits);
  ct_release(ones);
  ct_release(z);
  ct_release(idx);
  ct_release(w);
}
END_TEST

START_TEST(test_argument_errors) {
  ct_device *d = ct_test_device();
  int64_t xs[2] = {3, 5}, two = 2;
  ct_tensor *x = NULL, *fi = NULL, *i = NULL, *i2 = NULL, *out = NULL, *xi = NULL;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 2, xs));
  ck_assert_ct_ok(ct_zeros(&xi, d, CT_I32, 2, xs));
  ck_assert_ct_ok(ct_zeros(&fi, d, CT_F32, 1, &two));
  ck_assert_ct_ok(ct_zeros(&i, d, CT_I64, 1, &two));
  ck_assert_ct_ok(ct_zeros(&i2, d, CT_I64, 2, xs));
  ck_assert_ct_status(ct_index_select(&out, x, 2, i), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_index_select: dim 2 is out of range for a tensor with 2 dims (expected -2..1)");
  ck_assert_ct_status(ct_index_select(&out, x, -3, i), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_index_select(&out, x, 0, fi), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("index has dtype f32");
  ck_assert_ct_status(ct_index_select(&out, x, 0, i2), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_index_select(NULL, x, 0, i), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_index_select(&out, NULL, 0, i), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_gather(&out, x, 0, i), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("index has 1 dims");
  int64_t big[2] = {3, 6};
  ct_tensor *ib = NULL;
  ck_assert_ct_ok(ct_zeros(&ib, d, CT_I64, 2, big));
  ck_assert_ct_status(ct_gather(&out, x, 0, ib), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("at dim 1 (6 > 5)");
  ck_assert_ct_status(ct_scatter_add(&out, x, 0, i2, xi), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("src has dtype i32 but x has f32");
  ck_assert_ct_status(ct_scatter_add(&out, x, 0, ib, x), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ct_status(ct_embedding(&out, i, i), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("weight must be 2-D");
  ck_assert_ptr_null(out);
  ct_release(ib);
  ct_release(x);
  ct_release(xi);
  ct_release(fi);
  ct_release(i);
  ct_release(i2);
}
END_TEST

/* gather along the last dim with rows of several kernel chunks (256 elements): _i 0 an i64
 * index over a contiguous x (the fast loop; the row's span of x read in order first), _i 1 an
 * i32 index over a column slice of a wider x (strided rows), _i 2 an i64 index over rows of x
 * too long for that read (80 KB). Then one index made bad in a later chunk of a row. */
START_TEST(test_gather_rows) {
  ct_device *d = ct_test_device();
  ix_seed(300 + (uint64_t)_i);
  const int64_t rows = _i == 2 ? 2 : 3, xcols = _i == 2 ? 20000 : 600, icols = _i == 2 ? 300 : 700;
  const int64_t pad = _i == 1 ? 25 : 0, wcols = xcols + 2 * pad; /* x = columns [pad, pad + xcols) */
  ct_dtype it = _i == 1 ? CT_I32 : CT_I64;
  int64_t wshape[2] = {rows, wcols}, ishape[2] = {rows, icols}, ni = rows * icols;
  float *wv = random_floats(rows * wcols);
  ct_tensor *w = ix_tensor(d, CT_F32, 2, wshape, wv, 0), *x = NULL;
  ck_assert_ct_ok(ct_slice(&x, w, 1, pad, pad + xcols, 1));
  int64_t *iv = malloc((size_t)ni * 8);
  for (int64_t i = 0; i < ni; i++) iv[i] = ix_below(xcols);
  ct_tensor *idx = ix_index(d, it, 2, ishape, iv, 0), *out = NULL;
  ck_assert_ct_ok(ct_gather(&out, x, -1, idx));
  ix_check_shape(out, 2, ishape);
  float *ov = ix_read(out);
  for (int64_t i = 0; i < ni; i++)
    ck_assert_msg(ov[i] == wv[(i / icols) * wcols + pad + iv[i]], "element %lld", (long long)i);
  free(ov);
  ct_release(out);
  ct_release(idx);

  /* Row 1, column 600 (the third chunk): past the end, or negative for the i32 case. */
  int64_t bad = _i == 1 ? -3 : xcols, pos = _i == 2 ? 250 : 600;
  iv[icols + pos] = bad;
  idx = ix_index(d, it, 2, ishape, iv, 0);
  out = (ct_tensor *)1;
  ck_assert_ct_status(ct_gather(&out, x, 1, idx), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  char msg[160];
  snprintf(msg, sizeof msg, "ct_gather: index %lld at position [1, %lld] is out of range for dim 1 of size %lld",
           (long long)bad, (long long)pos, (long long)xcols);
  ck_assert_error_contains(msg);
  ct_release(idx);
  free(iv);
  free(wv);
  ct_release(x);
  ct_release(w);
}
END_TEST

/* 8-byte elements move as pairs of uints through the 4-byte program when the gather is small
 * (gather.c): index_select along an outer dim (the pairs merge into the row), along the last dim
 * and gather (a dim of 2 halves added), embedding, a strided x with an offset, then the same
 * past 65536 elements (the 8-byte program); every result bit for bit against a host loop, and
 * an out-of-range index named at its position in 8-byte elements. _i: 0 i64, 1 f64 (where the
 * device has fp64; its bits move the same). */
START_TEST(test_eight_byte_pairs) {
  ct_device *d = ct_test_device();
  const ct_dtype dt = _i ? CT_F64 : CT_I64;
  if (dt == CT_F64 && !ct_device_properties(d)->fp64) return;
  ix_seed(31);
  static const int64_t rows_of[2] = {7, 9000}; /* 7 x 11 and 9000 x 11 elements */
  for (int big = 0; big < 2; big++) {
    const int64_t R = rows_of[big], C = 11, n = R * C;
    int64_t *xv = malloc((size_t)n * sizeof *xv);
    for (int64_t i = 0; i < n; i++) xv[i] = (int64_t)(ix_next() ^ (ix_next() << 32));
    ct_tensor *x = NULL, *xt = NULL, *xs = NULL;
    ck_assert_ct_ok(ct_from_host(&x, d, dt, 2, (int64_t[]){R, C}, xv)); /* f64: the same 8 bytes */
    const int64_t ni = big ? 8000 : 5, nj = 6;
    int64_t *rv = malloc((size_t)ni * sizeof *rv), cv[6];
    for (int64_t i = 0; i < ni; i++) rv[i] = ix_below(R);
    for (int64_t j = 0; j < nj; j++) cv[j] = ix_below(C);
    ct_tensor *ri = ix_index(d, CT_I64, 1, &ni, rv, 0), *ci = ix_index(d, CT_I32, 1, &nj, cv, 0);
    ct_tensor *o = NULL;
    /* rows: along dim 0 (merged pairs); and embedding, the same rows */
    for (int e = 0; e < 2; e++) {
      if (e == 0) ck_assert_ct_ok(ct_index_select(&o, x, 0, ri));
      else ck_assert_ct_ok(ct_embedding(&o, x, ri));
      int64_t *ov = ix_read(o);
      for (int64_t i = 0; i < ni; i++)
        for (int64_t c = 0; c < C; c++) ck_assert(ov[i * C + c] == xv[rv[i] * C + c]);
      free(ov);
      ct_release(o);
    }
    /* columns: along the last dim (a dim of 2 halves), of x and of its transpose's transpose
     * sliced from row 1 (a strided x with an offset) */
    ck_assert_ct_ok(ct_slice(&xs, x, 0, 1, R, 1));
    ck_assert_ct_ok(ct_transpose(&xt, xs, 0, 1));
    for (int v = 0; v < 2; v++) {
      const ct_tensor *src = v ? xt : x;
      const int dim = v ? 0 : 1;
      ck_assert_ct_ok(ct_index_select(&o, src, dim, ci));
      int64_t *ov = ix_read(o);
      for (int64_t r = 0; r < (v ? nj : R); r++)
        for (int64_t j = 0; j < (v ? R - 1 : nj); j++) {
          int64_t want = v ? xv[(j + 1) * C + cv[r]] : xv[r * C + cv[j]];
          ck_assert(ov[r * (v ? R - 1 : nj) + j] == want);
        }
      free(ov);
      ct_release(o);
    }
    /* gather along dim 1: out[r, j] = x[r, idx[r, j]] (the big one, 72000 elements, on the
     * 8-byte program) */
    const int64_t G = big ? 8 : 3;
    int64_t *gv = malloc((size_t)(R * G) * sizeof *gv);
    for (int64_t i = 0; i < R * G; i++) gv[i] = ix_below(C);
    ct_tensor *gi = ix_index(d, CT_I64, 2, (int64_t[]){R, G}, gv, 0);
    ck_assert_ct_ok(ct_gather(&o, x, 1, gi));
    int64_t *ov = ix_read(o);
    for (int64_t r = 0; r < R; r++)
      for (int64_t j = 0; j < G; j++) ck_assert(ov[r * G + j] == xv[r * C + gv[r * G + j]]);
    free(ov);
    ct_release(o);
    /* an out-of-range index: its position in 8-byte elements */
    gv[G + 1] = C + 2;
    ct_tensor *bad = ix_index(d, CT_I64, 2, (int64_t[]){R, G}, gv, 0);
    o = (ct_tensor *)1;
    ck_assert_ct_status(ct_gather(&o, x, 1, bad), CT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(o);
    ck_assert_error_contains("index 13 at position [1, 1] is out of range for dim 1 of size 11");
    ct_release(bad);
    ct_release(gi);
    free(gv);
    ct_release(ri);
    ct_release(ci);
    ct_release(xt);
    ct_release(xs);
    ct_release(x);
    free(rv);
    free(xv);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("index");
  TCase *tc = tcase_create("indexing");
  tcase_add_loop_test(tc, test_index_select_random, 0, 8);
  tcase_add_test(tc, test_index_select_edges);
  tcase_add_loop_test(tc, test_gather_random, 0, 8);
  tcase_add_loop_test(tc, test_gather_rows, 0, 3);
  tcase_add_test(tc, test_embedding);
  tcase_add_loop_test(tc, test_eight_byte_pairs, 0, 2);
  tcase_add_test(tc, test_masked_fill);
  tcase_add_loop_test(tc, test_scatter_add_random, 0, 4);
  tcase_add_test(tc, test_scatter_add_deterministic);
  tcase_add_test(tc, test_scatter_add_dtypes);
  tcase_add_test(tc, test_scatter_add_shared_index);
  tcase_add_test(tc, test_out_of_range);
  tcase_add_test(tc, test_known_range);
  tcase_add_test(tc, test_argument_errors);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
