/* Shape ops against host loops over the inputs' logical values (read back with ct_to_host, which
 * the tensor tests check) and against PyTorch fixtures (fixtures.h, made by data/gen_fixtures.py).
 *
 * Few kernel programs, for the cold-cache CI time: the ops move elements as bits, with one
 * program per element size (1, 2, 4, 8 bytes), so cat, flip, roll, repeat and tril/triu run on
 * all 13 dtypes for the price of four programs each; the converting paths (cat's promotion,
 * randint's dtypes) on a few. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/tensor_util.h"
#include "ct_test.h"
#include "random/random.h"
#include "tensor/tensor.h"
#include "fixtures.h"


static ct_tensor *mk(ct_device *d, ct_dtype t, int nd, const int64_t *shape, uint64_t seed) {
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_empty(&x, d, t, nd, shape));
  size_t n = ct_tensor_nbytes(x);
  void *h = malloc(n ? n : 1);
  if (t == CT_F16 || t == CT_BF16 || t == CT_F32 || t == CT_F64) {
    /* Finite values, so a comparison failure prints something readable. */
    uint64_t s = seed * 7919 + 3;
    for (int64_t i = 0; i < ct_numel(x); i++)
      ct__host_store_double(t, (char *)h + i * (int64_t)ct_dtype_size(t), (double)(int)(rnd64(&s) % 2001) / 8 - 125);
  } else {
    fill_bytes(h, n, t, seed);
  }
  ck_assert_ct_ok(ct_copy_from_host(x, h, n));
  free(h);
  return x;
}

/* A transposed view of a fresh [shape[1], shape[0]] tensor: non-contiguous, shape [s0, s1]. */
static ct_tensor *mk_t(ct_device *d, ct_dtype t, int64_t s0, int64_t s1, uint64_t seed) {
  int64_t sh[2] = {s1, s0};
  ct_tensor *b = mk(d, t, 2, sh, seed), *v = NULL;
  ck_assert_ct_ok(ct_transpose(&v, b, 0, 1));
  ct_release(b);
  return v;
}

static void coords(int64_t i, int nd, const int64_t *shape, int64_t *c) {
  for (int k = nd - 1; k >= 0; k--) {
    c[k] = shape[k] ? i % shape[k] : 0;
    i = shape[k] ? i / shape[k] : 0;
  }
}

static int64_t ravel(int nd, const int64_t *shape, const int64_t *c) {
  int64_t r = 0;
  for (int k = 0; k < nd; k++) r = r * shape[k] + c[k];
  return r;
}

static void check_shape(const ct_tensor *t, ct_dtype dt, int nd, const int64_t *shape) {
  ck_assert_int_eq(ct_tensor_dtype(t), dt);
  ck_assert_int_eq(ct_tensor_ndim(t), nd);
  for (int i = 0; i < nd; i++)
    ck_assert_msg(ct_tensor_shape(t)[i] == shape[i], "dim %d: %" PRId64 " != %" PRId64, i, ct_tensor_shape(t)[i],
                  shape[i]);
  ck_assert(ct_tensor_is_contiguous(t));
}

static void check_bytes(const ct_tensor *t, const void *want, const char *what) {
  size_t n = ct_tensor_nbytes(t), es = ct_dtype_size(ct_tensor_dtype(t));
  unsigned char *got = read_all(t);
  ck_assert_ptr_nonnull(got);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(got[i] == ((const unsigned char *)want)[i], "%s: element %zu (%s) differs", what, i / es,
                  ct_dtype_name(ct_tensor_dtype(t)));
  free(got);
}

/* ---- cat, stack ---- */

/* cat along dim 1 of a transposed view, a contiguous tensor and an expanded one, and along dim 0,
 * for every dtype (bits move through one program per element size). */
START_TEST(test_cat_every_dtype) {
  ct_device *d = ct_test_device();
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    size_t es = ct_dtype_size(t);
    ct_tensor *a = mk_t(d, t, 4, 3, 1 + k);
    int64_t bs[2] = {4, 2}, cs[2] = {1, 5}, ce[2] = {4, 5};
    ct_tensor *b = mk(d, t, 2, bs, 50 + k), *c1 = mk(d, t, 2, cs, 90 + k), *c = NULL, *o = NULL;
    ck_assert_ct_ok(ct_expand(&c, c1, 2, ce));
    ct_tensor *ts[3] = {a, b, c};
    ck_assert_ct_ok(ct_cat(&o, ts, 3, -1));
    int64_t os[2] = {4, 10};
    check_shape(o, t, 2, os);
    unsigned char *ha = read_all(a), *hb = read_all(b), *hc = read_all(c), *want = malloc(40 * es);
    for (int r = 0; r < 4; r++) {
      memcpy(want + (r * 10) * es, ha + r * 3 * es, 3 * es);
      memcpy(want + (r * 10 + 3) * es, hb + r * 2 * es, 2 * es);
      memcpy(want + (r * 10 + 5) * es, hc + r * 5 * es, 5 * es);
    }
    check_bytes(o, want, "cat dim -1");
    ct_release(o);
    /* dim 0: contiguous slices of the result (a plain buffer copy for b). */
    ct_tensor *a2 = mk_t(d, t, 2, 2, 7 + k);
    ct_tensor *ts2[2] = {b, a2};
    ck_assert_ct_ok(ct_cat(&o, ts2, 2, 0));
    int64_t os2[2] = {6, 2};
    check_shape(o, t, 2, os2);
    unsigned char *ha2 = read_all(a2);
    memcpy(want, hb, 8 * es);
    memcpy(want + 8 * es, ha2, 4 * es);
    check_bytes(o, want, "cat dim 0");
    free(ha);
    free(hb);
    free(hc);
    free(ha2);
    free(want);
    ct_release(o);
    ct_release(a);
    ct_release(a2);
    ct_release(b);
    ct_release(c);
    ct_release(c1);
  }
}
END_TEST

/* Mixed dtypes promote as torch.cat: each input converted as ct_cast converts. */
START_TEST(test_cat_promote) {
  ct_device *d = ct_test_device();
  static const ct_dtype pairs[][3] = {{CT_I32, CT_F32, CT_F32}, {CT_U8, CT_I8, CT_I16}, {CT_BOOL, CT_I64, CT_I64}};
  for (int p = 0; p < 3; p++) {
    int64_t sa[2] = {2, 3}, sb[2] = {2, 1};
    ct_tensor *a = mk(d, pairs[p][0], 2, sa, 11), *b = mk(d, pairs[p][1], 2, sb, 12), *o = NULL;
    ct_tensor *ts[2] = {a, b};
    ck_assert_ct_ok(ct_cat(&o, ts, 2, 1));
    int64_t os[2] = {2, 4};
    ct_dtype rt = pairs[p][2];
    check_shape(o, rt, 2, os);
    ct_tensor *ca = NULL, *cb = NULL;
    ck_assert_ct_ok(ct_cast(&ca, a, rt));
    ck_assert_ct_ok(ct_cast(&cb, b, rt));
    size_t es = ct_dtype_size(rt);
    unsigned char *ha = read_all(ca), *hb = read_all(cb), want[8 * 8];
    for (int r = 0; r < 2; r++) {
      memcpy(want + r * 4 * es, ha + r * 3 * es, 3 * es);
      memcpy(want + (r * 4 + 3) * es, hb + r * es, es);
    }
    check_bytes(o, want, "cat promote");
    free(ha);
    free(hb);
    ct_release(ca);
    ct_release(cb);
    ct_release(o);
    ct_release(a);
    ct_release(b);
  }
  int64_t s[1] = {2};
  ct_tensor *u = mk(d, CT_U16, 1, s, 1), *i = mk(d, CT_I32, 1, s, 2), *o = NULL;
  ct_tensor *ts[2] = {u, i};
  ck_assert_ct_status(ct_cat(&o, ts, 2, 0), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("ts[1]");
  ck_assert_ptr_null(o);
  ct_release(u);
  ct_release(i);
}
END_TEST

START_TEST(test_cat_edges) {
  ct_device *d = ct_test_device();
  int64_t s23[2] = {2, 3}, s0[1] = {0}, s03[2] = {0, 3}, s35[2] = {3, 5}, s34[2] = {3, 4};
  ct_tensor *a = mk(d, CT_F32, 2, s23, 1), *e = mk(d, CT_F32, 1, s0, 2), *z = mk(d, CT_F32, 2, s03, 3), *o = NULL;
  /* A 1-D empty tensor is skipped whatever the others' dims (torch.cat's legacy rule); a
   * size-0 piece adds nothing. */
  ct_tensor *ts[4] = {e, a, z, a};
  ck_assert_ct_ok(ct_cat(&o, ts, 4, 0));
  int64_t os[2] = {4, 3};
  check_shape(o, CT_F32, 2, os);
  float *ha = read_all(a), want[12];
  memcpy(want, ha, 24);
  memcpy(want + 6, ha, 24);
  check_bytes(o, want, "cat edges");
  free(ha);
  ct_release(o);
  ck_assert_ct_ok(ct_cat(&o, &e, 1, 0));
  ck_assert_int_eq(ct_numel(o), 0);
  ct_release(o);
  /* Errors, each naming the argument. */
  ck_assert_ct_status(ct_cat(&o, ts, 0, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("n is 0");
  ck_assert_ptr_null(o);
  ct_tensor *tn[2] = {a, NULL};
  ck_assert_ct_status(ct_cat(&o, tn, 2, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ts[1]");
  ct_tensor *b = mk(d, CT_F32, 2, s35, 4), *c = mk(d, CT_F32, 2, s34, 5);
  ct_tensor *tm[3] = {b, b, c};
  ck_assert_ct_status(ct_cat(&o, tm, 3, 0), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("ts[2] has shape [3, 4] but ts[0] has [3, 5] (dim 1 differs)");
  ck_assert_ct_status(ct_cat(&o, tm, 2, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_cat: dim 2 is out of range for a tensor with 2 dims (expected -2..1)");
  ct_tensor *sc = NULL;
  ck_assert_ct_ok(ct_full(&sc, d, CT_F32, 0, NULL, 1.0));
  ck_assert_ct_status(ct_cat(&o, &sc, 1, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("zero-dimensional");
  ct_release(sc);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  ct_release(e);
  ct_release(z);
}
END_TEST

START_TEST(test_stack) {
  ct_device *d = ct_test_device();
  ct_tensor *xs[3];
  float *hx[3];
  for (int i = 0; i < 3; i++) {
    xs[i] = mk_t(d, CT_F32, 2, 3, 20 + i);
    hx[i] = read_all(xs[i]);
  }
  static const int dims[] = {0, 1, 2, -1, -3};
  for (int k = 0; k < 5; k++) {
    ct_tensor *o = NULL;
    ck_assert_ct_ok(ct_stack(&o, xs, 3, dims[k]));
    int dd = dims[k] < 0 ? dims[k] + 3 : dims[k];
    int64_t os[3];
    for (int j = 0, m = 0; j < 3; j++) os[j] = j == dd ? 3 : (m++ == 0 ? 2 : 3);
    check_shape(o, CT_F32, 3, os);
    float want[18];
    for (int64_t e = 0; e < 18; e++) {
      int64_t c[3];
      coords(e, 3, os, c);
      int64_t src = c[dd], r[2];
      for (int j = 0, m = 0; j < 3; j++)
        if (j != dd) r[m++] = c[j];
      want[e] = hx[src][r[0] * 3 + r[1]];
    }
    check_bytes(o, want, "stack");
    ct_release(o);
  }
  ct_tensor *o = NULL;
  ck_assert_ct_status(ct_stack(&o, xs, 3, 3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("dim 3");
  int64_t s32[2] = {3, 2};
  ct_tensor *w = mk(d, CT_F32, 2, s32, 1);
  ct_tensor *tw[2] = {xs[0], w};
  ck_assert_ct_status(ct_stack(&o, tw, 2, 0), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("ts[1] has shape [3, 2]");
  ct_release(w);
  for (int i = 0; i < 3; i++) {
    ct_release(xs[i]);
    free(hx[i]);
  }
}
END_TEST

/* ---- chunk, split ---- */

START_TEST(test_chunk_split) {
  ct_device *d = ct_test_device();
  int64_t s[2] = {5, 4};
  ct_tensor *x = mk(d, CT_F32, 2, s, 3), *outs[8] = {0};
  float *hx = read_all(x);
  int n = -1;
  /* torch.chunk(5 rows, 4): pieces of ceil(5/4) = 2 rows, so only 3 of them. */
  ck_assert_ct_ok(ct_chunk(outs, &n, x, 4, 0));
  ck_assert_int_eq(n, 3);
  int64_t rows[3] = {2, 2, 1};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(ct_tensor_shape(outs[i])[0], rows[i]);
    ck_assert_int_eq(ct_tensor_offset(outs[i]), ct_tensor_offset(x) + i * 8); /* a view */
    check_bytes(outs[i], hx + i * 8, "chunk");
    ct_release(outs[i]);
  }
  /* split along the last dim, negative: [5, 3] and [5, 1] strided views. */
  ck_assert_ct_ok(ct_split(outs, &n, x, 3, -1));
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(ct_tensor_shape(outs[1])[1], 1);
  float want[5];
  for (int r = 0; r < 5; r++) want[r] = hx[r * 4 + 3];
  check_bytes(outs[1], want, "split");
  ct_release(outs[0]);
  ct_release(outs[1]);
  /* Size-0 dims: chunk gives `chunks` empty pieces, split one (as PyTorch). */
  int64_t s0[2] = {0, 3};
  ct_tensor *z = mk(d, CT_F32, 2, s0, 1);
  ck_assert_ct_ok(ct_chunk(outs, &n, z, 3, 0));
  ck_assert_int_eq(n, 3);
  for (int i = 0; i < n; i++) ct_release(outs[i]);
  ck_assert_ct_ok(ct_split(outs, &n, z, 2, 0));
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(ct_numel(outs[0]), 0);
  ct_release(outs[0]);
  /* A size near INT64_MAX is one piece, the whole dim (issue #28: the piece count computed
   * dsize + size - 1, which overflowed). */
  for (int64_t big = INT64_MAX - 2; big > 0; big = big == INT64_MAX ? 0 : big + 1) {
    n = -1;
    ck_assert_ct_ok(ct_split(outs, &n, x, big, 0));
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(ct_tensor_shape(outs[0])[0], 5);
    ct_release(outs[0]);
  }
  /* Errors. */
  ck_assert_ct_status(ct_chunk(outs, &n, x, 0, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("chunks is 0");
  ck_assert_int_eq(n, 0);
  ck_assert_ct_status(ct_split(outs, &n, x, 0, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("size is 0");
  ck_assert_ct_status(ct_split(outs, &n, x, 1, -3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("dim -3");
  ct_release(z);
  ct_release(x);
  free(hx);
}
END_TEST

/* ---- flip, roll, repeat, tril/triu ---- */

/* A [2, 3, 4] view with strides that are neither contiguous nor positive-only after flipping:
 * the permuted view of a [4, 2, 3] tensor. */
static ct_tensor *mk_234(ct_device *d, ct_dtype t, uint64_t seed) {
  int64_t s[3] = {4, 2, 3};
  ct_tensor *b = mk(d, t, 3, s, seed), *v = NULL;
  int perm[3] = {1, 2, 0};
  ck_assert_ct_ok(ct_permute(&v, b, perm));
  ct_release(b);
  return v;
}

START_TEST(test_flip_roll) {
  ct_device *d = ct_test_device();
  int64_t sh[3] = {2, 3, 4};
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    size_t es = ct_dtype_size(t);
    ct_tensor *x = mk_234(d, t, 30 + k), *o = NULL;
    unsigned char *hx = read_all(x), want[24 * 8];
    static const int fd[][3] = {{0, 2, 0}, {-1, 0, 0}, {0, 1, 2}};
    static const int fn[] = {2, 1, 3};
    for (int f = 0; f < 3; f++) {
      ck_assert_ct_ok(ct_flip(&o, x, fn[f], fd[f]));
      check_shape(o, t, 3, sh);
      for (int64_t e = 0; e < 24; e++) {
        int64_t c[3];
        coords(e, 3, sh, c);
        for (int j = 0; j < fn[f]; j++) {
          int dd = fd[f][j] < 0 ? fd[f][j] + 3 : fd[f][j];
          c[dd] = sh[dd] - 1 - c[dd];
        }
        memcpy(want + e * es, hx + ravel(3, sh, c) * es, es);
      }
      check_bytes(o, want, "flip");
      ct_release(o);
    }
    static const int64_t shifts[] = {1, -7, 0, 9};
    static const int rdims[] = {2, -1, 0, 1};
    for (int r = 0; r < 4; r++) {
      ck_assert_ct_ok(ct_roll(&o, x, shifts[r], rdims[r]));
      check_shape(o, t, 3, sh);
      int dd = rdims[r] < 0 ? rdims[r] + 3 : rdims[r];
      for (int64_t e = 0; e < 24; e++) {
        int64_t c[3];
        coords(e, 3, sh, c);
        /* out[i] = x[(i - shift) mod n] */
        c[dd] = (((c[dd] - shifts[r]) % sh[dd]) + sh[dd]) % sh[dd];
        memcpy(want + e * es, hx + ravel(3, sh, c) * es, es);
      }
      check_bytes(o, want, "roll");
      ct_release(o);
    }
    free(hx);
    ct_release(x);
  }
  /* Size 0, errors. */
  int64_t s0[2] = {0, 3};
  ct_tensor *z = mk(d, CT_F32, 2, s0, 1), *o = NULL;
  int fd[2] = {0, -1};
  ck_assert_ct_ok(ct_flip(&o, z, 2, fd));
  ck_assert_int_eq(ct_numel(o), 0);
  ct_release(o);
  ck_assert_ct_ok(ct_roll(&o, z, 5, 0));
  ck_assert_int_eq(ct_numel(o), 0);
  ct_release(o);
  int dup[2] = {1, -1};
  ck_assert_ct_status(ct_flip(&o, z, 2, dup), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("dims[1]");
  ck_assert_ct_status(ct_roll(&o, z, 1, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_roll: dim 2 is out of range for a tensor with 2 dims (expected -2..1)");
  /* The message names which of dims is bad. */
  int bad[2] = {0, 5};
  ck_assert_ct_status(ct_flip(&o, z, 2, bad), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_flip: dim 5 is out of range for a tensor with 2 dims (expected -2..1) (dims[1])");
  ck_assert_ptr_null(o);
  ct_release(z);
}
END_TEST

/* A 0-d tensor accepts dim 0 and -1 (PyTorch: torch.flip(t, [0]) and torch.roll(t, 3, -1) return
 * t's value); any other dim is out of range. */
START_TEST(test_flip_roll_0d) {
  ct_device *d = ct_test_device();
  float v = 3.5f, got = 0;
  ct_tensor *x = NULL, *o = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 0, NULL, &v));
  int d0 = 0, dm1 = -1, d1 = 1;
  const int *flips[2] = {&d0, &dm1};
  for (int i = 0; i < 2; i++) {
    ck_assert_ct_ok(ct_flip(&o, x, 1, flips[i]));
    ck_assert_int_eq(ct_tensor_ndim(o), 0);
    ck_assert_ct_ok(ct_to_host(o, &got, sizeof got));
    ck_assert(got == v);
    ct_release(o);
    ck_assert_ct_ok(ct_roll(&o, x, 3, *flips[i]));
    ck_assert_int_eq(ct_tensor_ndim(o), 0);
    ck_assert_ct_ok(ct_to_host(o, &got, sizeof got));
    ck_assert(got == v);
    ct_release(o);
  }
  ck_assert_ct_status(ct_flip(&o, x, 1, &d1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_flip: dim 1 is out of range for a tensor with 0 dims (expected -1..0) (dims[0])");
  ck_assert_ct_status(ct_roll(&o, x, 1, -2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_roll: dim -2 is out of range for a tensor with 0 dims (expected -1..0)");
  ck_assert_ptr_null(o);
  ct_release(x);
}
END_TEST

START_TEST(test_repeat) {
  ct_device *d = ct_test_device();
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    size_t es = ct_dtype_size(t);
    /* A transposed [2, 3] input, 3 repeats: x gets a leading size-1 dim. */
    ct_tensor *x = mk_t(d, t, 2, 3, 40 + k), *o = NULL;
    unsigned char *hx = read_all(x), want[36 * 8];
    int64_t rep[3] = {2, 1, 3}, os[3] = {2, 2, 9};
    ck_assert_ct_ok(ct_repeat(&o, x, 3, rep));
    check_shape(o, t, 3, os);
    for (int64_t e = 0; e < 36; e++) {
      int64_t c[3];
      coords(e, 3, os, c);
      memcpy(want + e * es, hx + ((c[1] % 2) * 3 + c[2] % 3) * es, es);
    }
    check_bytes(o, want, "repeat");
    ct_release(o);
    free(hx);
    ct_release(x);
  }
  /* An expanded (stride 0) input, a zero repeat. */
  int64_t s1[2] = {1, 3}, se[2] = {2, 3}, rep[2] = {2, 2}, rep0[2] = {0, 2};
  ct_tensor *b = mk(d, CT_I32, 2, s1, 5), *x = NULL, *o = NULL;
  ck_assert_ct_ok(ct_expand(&x, b, 2, se));
  int32_t *hb = read_all(b), want[24];
  ck_assert_ct_ok(ct_repeat(&o, x, 2, rep));
  for (int e = 0; e < 24; e++) want[e] = hb[(e % 6) % 3];
  check_bytes(o, want, "repeat expanded");
  ct_release(o);
  ck_assert_ct_ok(ct_repeat(&o, x, 2, rep0));
  ck_assert_int_eq(ct_numel(o), 0);
  ct_release(o);
  /* A 0-dim x: no repeats gives the scalar, two give a filled [2, 2]. */
  ct_tensor *sc = NULL;
  ck_assert_ct_ok(ct_full(&sc, d, CT_I32, 0, NULL, 7));
  ck_assert_ct_ok(ct_repeat(&o, sc, 0, NULL));
  ck_assert_int_eq(ct_tensor_ndim(o), 0);
  int32_t seven[4] = {7, 7, 7, 7};
  check_bytes(o, seven, "repeat of a scalar");
  ct_release(o);
  ck_assert_ct_ok(ct_repeat(&o, sc, 2, rep));
  check_shape(o, CT_I32, 2, rep);
  check_bytes(o, seven, "repeat of a scalar into [2, 2]");
  ct_release(o);
  ct_release(sc);
  ck_assert_ct_status(ct_repeat(&o, x, 1, rep), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ndim is 1");
  int64_t neg[2] = {1, -2};
  ck_assert_ct_status(ct_repeat(&o, x, 2, neg), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("repeats[1]");
  free(hb);
  ct_release(x);
  ct_release(b);
}
END_TEST

START_TEST(test_tril_triu) {
  ct_device *d = ct_test_device();
  int64_t sh[3] = {2, 3, 4};
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    size_t es = ct_dtype_size(t);
    ct_tensor *x = mk_234(d, t, 60 + k), *o = NULL;
    unsigned char *hx = read_all(x), want[24 * 8];
    for (int64_t diag = -2; diag <= 3; diag++)
      for (int upper = 0; upper < 2; upper++) {
        ck_assert_ct_ok(upper ? ct_triu(&o, x, diag) : ct_tril(&o, x, diag));
        check_shape(o, t, 3, sh);
        for (int64_t e = 0; e < 24; e++) {
          int64_t c[3];
          coords(e, 3, sh, c);
          int keep = upper ? c[2] - c[1] >= diag : c[2] - c[1] <= diag;
          if (keep)
            memcpy(want + e * es, hx + e * es, es);
          else
            memset(want + e * es, 0, es);
        }
        check_bytes(o, want, upper ? "triu" : "tril");
        ct_release(o);
      }
    free(hx);
    ct_release(x);
  }
  int64_t s1[1] = {3};
  ct_tensor *v = mk(d, CT_F32, 1, s1, 1), *o = NULL;
  ck_assert_ct_status(ct_tril(&o, v, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("x has 1 dims");
  ct_release(v);
}
END_TEST

/* Diagonals near the int64 limits (issue #28): the kernel compared col with row + diagonal,
 * which overflowed, so tril(x, INT64_MAX) dropped everything. As PyTorch: a diagonal at or past
 * the last column keeps all (tril) or nothing (triu), one at or before minus the row count the
 * reverse. */
START_TEST(test_tril_triu_extreme_diagonals) {
  ct_device *d = ct_test_device();
  int64_t sh[2] = {3, 3};
  ct_tensor *a = NULL, *x = NULL, *o = NULL;
  ck_assert_ct_ok(ct_arange(&a, d, CT_F32, 1, 10, 1));
  ck_assert_ct_ok(ct_reshape(&x, a, 2, sh));
  struct {
    int upper;
    int64_t diag;
    int all; /* 1: x as it is, 0: zeros */
  } cases[] = {{0, INT64_MAX, 1}, {0, INT64_MAX - 1, 1}, {1, INT64_MAX, 0},     {1, INT64_MAX - 1, 0},
               {0, INT64_MIN, 0}, {0, INT64_MIN + 1, 0}, {1, INT64_MIN, 1},     {1, INT64_MIN + 1, 1},
               {0, 3, 1},         {1, -3, 1},            {0, -3, 0},            {1, 3, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    ck_assert_ct_ok(cases[c].upper ? ct_triu(&o, x, cases[c].diag) : ct_tril(&o, x, cases[c].diag));
    float got[9];
    ck_assert_ct_ok(ct_to_host(o, got, sizeof got));
    for (int e = 0; e < 9; e++)
      ck_assert_msg(got[e] == (cases[c].all ? (float)(e + 1) : 0.0f), "%s(x, %" PRId64 "): element %d is %g",
                    cases[c].upper ? "triu" : "tril", cases[c].diag, e, (double)got[e]);
    ct_release(o);
  }
  ct_release(x);
  ct_release(a);
}
END_TEST

/* ---- pad ---- */

START_TEST(test_pad_fixtures) {
  ct_device *d = ct_test_device();
  for (size_t i = 0; i < sizeof pad_cases / sizeof *pad_cases; i++) {
    const struct pad_case *pc = &pad_cases[i];
    /* f32 and i16 (a 2-byte program) inputs of arange values. */
    for (int v = 0; v < 2; v++) {
      ct_dtype t = v ? CT_I16 : CT_F32;
      ct_tensor *a = NULL, *x = NULL, *o = NULL;
      int64_t n = 1;
      for (int k = 0; k < pc->ndim; k++) n *= pc->shape[k];
      ck_assert_ct_ok(ct_arange(&a, d, t, 0, (double)n, 1));
      ck_assert_ct_ok(ct_reshape(&x, a, pc->ndim, pc->shape));
      ck_assert_ct_ok(ct_pad(&o, x, pc->npad, pc->pad, pc->mode, pc->value));
      check_shape(o, t, pc->ondim, pc->oshape);
      unsigned char want[512 * 4];
      for (int64_t e = 0; e < pc->n; e++) ct__host_store_double(t, want + e * (int64_t)ct_dtype_size(t), pc->out[e]);
      char what[64];
      snprintf(what, sizeof what, "pad case %zu", i);
      check_bytes(o, want, what);
      ct_release(o);
      ct_release(x);
      ct_release(a);
    }
  }
}
END_TEST

START_TEST(test_pad_strided) {
  ct_device *d = ct_test_device();
  /* A transposed [1, 3, 4] input padded every way equals the pad of its contiguous copy. */
  int64_t s[2] = {4, 3};
  ct_tensor *b = mk(d, CT_F32, 2, s, 9), *t = NULL, *xc = NULL;
  ck_assert_ct_ok(ct_transpose(&t, b, 0, 1));
  ct_tensor *xv = NULL;
  ck_assert_ct_ok(ct_unsqueeze(&xv, t, 0));
  ck_assert(!ct_tensor_is_contiguous(xv));
  ck_assert_ct_ok(ct_contiguous(&xc, xv));
  int64_t pad[4] = {2, 1, -1, 2};
  for (int m = 0; m < 3; m++) {
    ct_tensor *o1 = NULL, *o2 = NULL;
    ck_assert_ct_ok(ct_pad(&o1, xv, 4, pad, (ct_pad_mode)m, 1.5));
    ck_assert_ct_ok(ct_pad(&o2, xc, 4, pad, (ct_pad_mode)m, 1.5));
    void *h2 = read_all(o2);
    check_bytes(o1, h2, "pad strided");
    free(h2);
    ct_release(o1);
    ct_release(o2);
  }
  ct_release(xv);
  ct_release(xc);
  ct_release(t);
  ct_release(b);
}
END_TEST

START_TEST(test_pad_errors) {
  ct_device *d = ct_test_device();
  int64_t s[3] = {1, 2, 3};
  ct_tensor *x = NULL, *o = NULL, *u = NULL;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 3, s));
  ck_assert_ct_ok(ct_zeros(&u, d, CT_U8, 3, s));
  int64_t p1[3] = {1, 1, 1}, p3[2] = {3, 0}, pn[2] = {-2, -2}, p8[8] = {0};
  ck_assert_ct_status(ct_pad(&o, x, 3, p1, CT_PAD_CONSTANT, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("npad is 3");
  ck_assert_ct_status(ct_pad(&o, x, 8, p8, CT_PAD_CONSTANT, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("npad is 8");
  ck_assert_ct_status(ct_pad(&o, x, 2, p3, CT_PAD_REFLECT, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("(pad[0], pad[1]) = (3, 0)");
  ck_assert_ct_status(ct_pad(&o, x, 2, pn, CT_PAD_CONSTANT, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("(pad[0], pad[1]) = (-2, -2)");
  ck_assert_ct_status(ct_pad(&o, x, 6, p8, CT_PAD_REPLICATE, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("npad 6");
  ck_assert_ct_status(ct_pad(&o, u, 2, p1, CT_PAD_CONSTANT, 300), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("value");
  ck_assert_ct_status(ct_pad(&o, x, 2, p1, (ct_pad_mode)7, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("mode 7");
  ck_assert_ptr_null(o);
  int64_t se[3] = {1, 0, 3};
  ct_tensor *e = NULL;
  ck_assert_ct_ok(ct_zeros(&e, d, CT_F32, 3, se));
  ck_assert_ct_status(ct_pad(&o, e, 2, p1, CT_PAD_REPLICATE, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("non-empty");
  ct_release(e);
  ct_release(x);
  ct_release(u);
}
END_TEST

/* Pads near the int64 limits (issue #28): the size check computed s + l + r, which overflowed
 * (a size of INT64_MAX accepted), and the kernel computed c - l, which overflowed for a left
 * pad near INT64_MIN (replicate took the first element instead of the last); a pad of
 * INT64_MIN has no negation for the gradient. */
START_TEST(test_pad_extreme) {
  ct_device *d = ct_test_device();
  int64_t sh[2] = {1, 3};
  ct_tensor *a = NULL, *x = NULL, *o = NULL;
  ck_assert_ct_ok(ct_arange(&a, d, CT_F32, 1, 4, 1));
  ck_assert_ct_ok(ct_reshape(&x, a, 2, sh));
  float got[3];
  /* Everything cropped on the left, as much padded on the right: the edge element (replicate),
   * the value (constant). */
  int64_t crop[2] = {-INT64_MAX, INT64_MAX}, far[2] = {INT64_MAX, -INT64_MAX};
  ck_assert_ct_ok(ct_pad(&o, x, 2, crop, CT_PAD_REPLICATE, 0));
  ck_assert_int_eq(ct_tensor_shape(o)[1], 3);
  ck_assert_ct_ok(ct_to_host(o, got, sizeof got));
  for (int i = 0; i < 3; i++) ck_assert_float_eq(got[i], 3.0f);
  ct_release(o);
  ck_assert_ct_ok(ct_pad(&o, x, 2, far, CT_PAD_REPLICATE, 0));
  ck_assert_ct_ok(ct_to_host(o, got, sizeof got));
  for (int i = 0; i < 3; i++) ck_assert_float_eq(got[i], 1.0f);
  ct_release(o);
  for (int k = 0; k < 2; k++) {
    ck_assert_ct_ok(ct_pad(&o, x, 2, k ? far : crop, CT_PAD_CONSTANT, 7.5));
    ck_assert_int_eq(ct_tensor_shape(o)[1], 3);
    ck_assert_ct_ok(ct_to_host(o, got, sizeof got));
    for (int i = 0; i < 3; i++) ck_assert_float_eq(got[i], 7.5f);
    ct_release(o);
  }
  /* 3 - INT64_MAX - 5 is below INT64_MIN: it wrapped to a huge size. */
  int64_t under[2] = {-INT64_MAX, -5}, over[2] = {INT64_MAX, 1}, minp[2] = {INT64_MIN, INT64_MAX};
  ck_assert_ct_status(ct_pad(&o, x, 2, under, CT_PAD_CONSTANT, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("negative or too large");
  ck_assert_ct_status(ct_pad(&o, x, 2, over, CT_PAD_CONSTANT, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("negative or too large");
  ck_assert_ct_status(ct_pad(&o, x, 2, minp, CT_PAD_CONSTANT, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("INT64_MIN");
  ck_assert_ptr_null(o);
  ct_release(x);
  ct_release(a);
}
END_TEST

/* ---- clone, *_like, fills ---- */

START_TEST(test_clone_like_fill) {
  ct_device *d = ct_test_device();
  ct_tensor *x = mk_t(d, CT_F32, 3, 4, 70), *o = NULL;
  float *hx = read_all(x);
  ck_assert_ct_ok(ct_clone(&o, x));
  int64_t sh[2] = {3, 4};
  check_shape(o, CT_F32, 2, sh);
  check_bytes(o, hx, "clone");
  ct_release(o);
  ct_tensor *c = NULL, *c2 = NULL;
  ck_assert_ct_ok(ct_contiguous(&c, x));
  ck_assert_ct_ok(ct_clone(&c2, c));
  ck_assert_ptr_ne(c2, c); /* always a copy, even of a contiguous tensor */
  ck_assert_ct_ok(ct_zero_(c2));
  check_bytes(c, hx, "clone is independent");
  ct_release(c2);
  ct_release(c);
  static const ct_dtype dts[] = {CT_F16, CT_I64, CT_BOOL, CT_BF16};
  for (int k = 0; k < 4; k++) {
    ct_tensor *y = mk_t(d, dts[k], 3, 4, 80 + k);
    size_t es = ct_dtype_size(dts[k]);
    unsigned char want[12 * 8], one[8] = {0}, zero[8] = {0};
    ct__host_store_double(dts[k], one, 1);
    for (int v = 0; v < 3; v++) {
      ck_assert_ct_ok(v == 0 ? ct_empty_like(&o, y) : v == 1 ? ct_zeros_like(&o, y) : ct_ones_like(&o, y));
      check_shape(o, dts[k], 2, sh);
      if (v > 0) {
        for (int e = 0; e < 12; e++) memcpy(want + e * es, v == 1 ? zero : one, es);
        check_bytes(o, want, "like");
      }
      ct_release(o);
    }
    ct_release(y);
  }
  /* fill_ on a strided view (every other column of a transposed view) leaves the rest alone. */
  ct_tensor *v = NULL;
  ck_assert_ct_ok(ct_slice(&v, x, 1, 1, 4, 2));
  ck_assert_ct_ok(ct_fill_(v, 2.5));
  float want[12];
  for (int e = 0; e < 12; e++) want[e] = (e % 4) % 2 == 1 ? 2.5f : hx[e];
  check_bytes(x, want, "fill_ strided");
  ck_assert_ct_ok(ct_zero_(v));
  for (int e = 0; e < 12; e++) want[e] = (e % 4) % 2 == 1 ? 0.0f : hx[e];
  check_bytes(x, want, "zero_ strided");
  ct_release(v);
  /* Errors: an expanded view; a value the dtype can't hold. */
  int64_t s1[2] = {1, 4}, se[2] = {3, 4};
  ct_tensor *b = NULL, *e = NULL, *u = NULL;
  ck_assert_ct_ok(ct_zeros(&b, d, CT_F32, 2, s1));
  ck_assert_ct_ok(ct_expand(&e, b, 2, se));
  ck_assert_ct_status(ct_fill_(e, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("stride 0 at dim 0");
  ck_assert_ct_ok(ct_zeros(&u, d, CT_U8, 2, s1));
  ck_assert_ct_status(ct_fill_(u, 300), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("value");
  ck_assert_ct_status(ct_fill_(NULL, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_clone(&o, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'x'");
  ct_release(u);
  ct_release(e);
  ct_release(b);
  free(hx);
  ct_release(x);
}
END_TEST

/* ---- linspace, randint ---- */

START_TEST(test_linspace) {
  ct_device *d = ct_test_device();
  for (size_t i = 0; i < sizeof linspace_cases / sizeof *linspace_cases; i++) {
    const struct linspace_case *lc = &linspace_cases[i];
    if (!dtype_ok(d, lc->dtype)) continue;
    ct_tensor *o = NULL;
    ck_assert_ct_ok(ct_linspace(&o, d, lc->dtype, lc->start, lc->end, lc->steps));
    check_shape(o, lc->dtype, 1, &lc->steps);
    unsigned char *h = read_all(o);
    size_t es = ct_dtype_size(lc->dtype);
    /* PyTorch's CPU kernel computes vector lanes as base + j * step rather than start + i * step,
     * so floats may differ in the last bits: a few ulps of the largest magnitude. Integers and
     * the ends are exact. */
    double mag = fmax(fabs(lc->start), fabs(lc->end));
    double ulp = lc->dtype == CT_F32 ? FLT_EPSILON : lc->dtype == CT_F64 ? DBL_EPSILON
                 : lc->dtype == CT_F16 ? 0x1p-10 : lc->dtype == CT_BF16 ? 0x1p-7 : 0;
    for (int64_t e = 0; e < lc->steps; e++) {
      double got = ct__host_load_double(lc->dtype, h + e * (int64_t)es), want = lc->out[e];
      double tol = (e == 0 || e == lc->steps - 1) ? 0 : 4 * ulp * mag;
      ck_assert_msg(fabs(got - want) <= tol, "linspace case %zu (%s) element %" PRId64 ": %.17g, PyTorch %.17g", i,
                    ct_dtype_name(lc->dtype), e, got, want);
    }
    free(h);
    ct_release(o);
  }
  ct_tensor *o = NULL;
  ck_assert_ct_ok(ct_linspace(&o, d, CT_F32, 0, 1, 0));
  ck_assert_int_eq(ct_numel(o), 0);
  ct_release(o);
  ck_assert_ct_status(ct_linspace(&o, d, CT_F32, 0, 1, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("steps is -1");
  ck_assert_ct_status(ct_linspace(&o, d, CT_U8, -1, 1, 3), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("start");
  ck_assert_ptr_null(o);
}
END_TEST

START_TEST(test_randint) {
  ct_device *d = ct_test_device();
  /* Known answer: the k-th call after ct_manual_seed(s) uses stream (s, k); a range <= 2^32
   * takes one word per element, a wider one 64 bits of two words. */
  ct_manual_seed(1234);
  int64_t sh[2] = {3, 7};
  ct_tensor *o = NULL, *bits = NULL;
  ck_assert_ct_ok(ct_randint(&o, d, CT_I64, -5, 17, 2, sh));
  check_shape(o, CT_I64, 2, sh);
  ck_assert_ct_ok(ct__random_bits(&bits, d, 6, 0, 1234, 0));
  uint32_t *w = read_all(bits);
  int64_t *h = read_all(o);
  for (int e = 0; e < 21; e++) ck_assert_int_eq(h[e], -5 + (int64_t)(w[e] % 22));
  free(h);
  ct_release(o);
  const int64_t lo = -(INT64_C(1) << 40), hi = INT64_C(1) << 40;
  ck_assert_ct_ok(ct_randint(&o, d, CT_I64, lo, hi, 2, sh));
  ct_release(bits);
  free(w);
  ck_assert_ct_ok(ct__random_bits(&bits, d, 11, 0, 1234, 1));
  w = read_all(bits);
  h = read_all(o);
  for (int e = 0; e < 21; e++) {
    uint64_t v = ((uint64_t)w[2 * e + 1] << 32) | w[2 * e];
    ck_assert_int_eq(h[e], lo + (int64_t)(v % (uint64_t)(hi - lo)));
  }
  free(h);
  free(w);
  ct_release(bits);
  ct_release(o);
  uint64_t seed, off;
  ck_assert_ct_ok(ct_rng_get_state(&seed, &off));
  ck_assert_uint_eq(off, 2);
  /* Other dtypes (one program, the dtype is a run-time argument): the same values as i64 from
   * the same stream, converted on the host (no cast program to build). */
  static const ct_dtype dts[] = {CT_U8, CT_I16, CT_F32, CT_BF16, CT_BOOL};
  for (int k = 0; k < 5; k++) {
    int64_t high = dts[k] == CT_BOOL ? 2 : 100;
    ct_tensor *r = NULL, *ref = NULL;
    ct_rng_set_state(99, 7);
    ck_assert_ct_ok(ct_randint(&r, d, dts[k], 0, high, 2, sh));
    ct_rng_set_state(99, 7);
    ck_assert_ct_ok(ct_randint(&ref, d, CT_I64, 0, high, 2, sh));
    int64_t *hr = read_all(ref);
    unsigned char want[21 * 4];
    size_t es = ct_dtype_size(dts[k]);
    for (int e = 0; e < 21; e++) ct__host_cast(dts[k], want + e * es, CT_I64, &hr[e]);
    check_bytes(r, want, "randint dtype");
    free(hr);
    ct_release(r);
    ct_release(ref);
  }
  int64_t e0[1] = {0};
  ck_assert_ct_ok(ct_randint(&o, d, CT_I32, 0, 5, 1, e0));
  ck_assert_int_eq(ct_numel(o), 0);
  ct_release(o);
  ck_assert_ct_status(ct_randint(&o, d, CT_I32, 5, 5, 2, sh), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("low 5 must be less than high 5");
  ck_assert_ct_status(ct_randint(&o, d, CT_U8, 0, 257, 2, sh), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("dtype u8");
  ck_assert_ct_status(ct_randint(&o, d, CT_BOOL, 0, 3, 2, sh), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("dtype bool");
  ck_assert_ptr_null(o);
}
END_TEST

/* Rows longer than the kernel's 4096-element runs: each row spreads over several work-items. */
START_TEST(test_long_rows) {
  ct_device *d = ct_test_device();
  const int64_t n = 9000;
  int64_t s1[2] = {2, n};
  ct_tensor *x = mk(d, CT_I16, 2, s1, 77), *o = NULL;
  int16_t *hx = read_all(x), *want = malloc((size_t)(2 * (2 * n + 8)) * sizeof *want);
  for (int m = 0; m < 3; m++) {
    int64_t pad[2] = {3, 5};
    ck_assert_ct_ok(ct_pad(&o, x, 2, pad, (ct_pad_mode)m, 9));
    for (int r = 0; r < 2; r++)
      for (int64_t c = 0; c < n + 8; c++) {
        int64_t v = c - 3;
        int outside = 0;
        if (m == CT_PAD_CONSTANT) outside = v < 0 || v >= n;
        else if (m == CT_PAD_REPLICATE) v = v < 0 ? 0 : v >= n ? n - 1 : v;
        else v = v < 0 ? -v : v >= n ? 2 * (n - 1) - v : v;
        want[r * (n + 8) + c] = outside ? 9 : hx[r * n + v];
      }
    check_bytes(o, want, "pad long rows");
    ct_release(o);
  }
  int64_t rep[2] = {1, 2};
  ck_assert_ct_ok(ct_repeat(&o, x, 2, rep));
  for (int r = 0; r < 2; r++)
    for (int64_t c = 0; c < 2 * n; c++) want[r * 2 * n + c] = hx[r * n + c % n];
  check_bytes(o, want, "repeat long rows");
  ct_release(o);
  ck_assert_ct_ok(ct_triu(&o, x, 4100));
  for (int r = 0; r < 2; r++)
    for (int64_t c = 0; c < n; c++) want[r * n + c] = c - r >= 4100 ? hx[r * n + c] : 0;
  check_bytes(o, want, "triu long rows");
  ct_release(o);
  free(want);
  free(hx);
  ct_release(x);
}
END_TEST

/* Regression: shape_gather's NDRange is rounded up to whole work-groups in both dims, and the
 * kernel once checked only dim 0, so the work-items past the outer count wrote whole slabs past
 * the result's end (Oclgrind reported them; PoCL wrote silently). Here the result [5, 64, 4096]
 * f32 (5 MiB, a 6 MiB block) is carved from the front of a zeroed, cached 16 MiB block; the
 * PoCL launch is 8 slabs of 1 MiB along dim 1, so a missing check writes 3 MiB of ones past it.
 * The next 2 MiB block comes from the rest of that zeroed block and must still be zero. When
 * the allocator lays blocks out otherwise, the check is not made (it cannot fail falsely). */
START_TEST(test_gather_stays_in_bounds) {
  ct_device *d = ct_test_device();
  int64_t xs[3] = {5, 64, 4096}, bs[1] = {INT64_C(4) << 20}, ss[1] = {INT64_C(512) << 10};
  ct_tensor *x = NULL, *big = NULL, *o = NULL, *s2 = NULL;
  ck_assert_ct_ok(ct_ones(&x, d, CT_F32, 3, xs));
  ck_assert_ct_ok(ct_zeros(&big, d, CT_F32, 1, bs));
  ck_assert_ct_ok(ct_device_synchronize(d));
  cl_mem mem = ct__tensor_mem(big);
  size_t lo = ct__tensor_byte_offset(big), hi = lo + ct_tensor_nbytes(big);
  ct_release(big);
  ck_assert_ct_ok(ct_pad(&o, x, 0, NULL, CT_PAD_CONSTANT, 0));
  ck_assert_ct_ok(ct_empty(&s2, d, CT_F32, 1, ss));
  size_t so = ct__tensor_byte_offset(s2);
  if (ct__tensor_mem(o) == mem && ct__tensor_mem(s2) == mem && so >= lo && so + ct_tensor_nbytes(s2) <= hi &&
      so >= ct__tensor_byte_offset(o) + ct_tensor_nbytes(o)) {
    uint32_t *h = read_all(s2);
    for (int64_t i = 0; i < ss[0]; i++) ck_assert_msg(h[i] == 0, "word %" PRId64 " past the result was written", i);
    free(h);
  }
  ct_release(s2);
  ct_release(o);
  ct_release(x);
}
END_TEST

/* ---- random cases ---- */

/* A strided view of the given shape: a permuted fresh tensor, permuted back. */
static ct_tensor *rand_view(ct_device *d, ct_dtype t, int nd, const int64_t *shape, uint64_t *rs) {
  int p[CT_MAX_DIMS], q[CT_MAX_DIMS];
  int64_t bs[CT_MAX_DIMS];
  for (int i = 0; i < nd; i++) p[i] = i;
  for (int i = nd - 1; i > 0; i--) {
    int j = (int)(rnd64(rs) % (uint64_t)(i + 1)), tmp = p[i];
    p[i] = p[j];
    p[j] = tmp;
  }
  for (int i = 0; i < nd; i++) {
    bs[i] = shape[p[i]];
    q[p[i]] = i;
  }
  ct_tensor *b = mk(d, t, nd, bs, rnd64(rs)), *v = NULL;
  ck_assert_ct_ok(ct_permute(&v, b, q));
  ct_release(b);
  return v;
}

static int64_t rnd_in(uint64_t *rs, int64_t lo, int64_t hi) { return lo + (int64_t)(rnd64(rs) % (uint64_t)(hi - lo + 1)); }

/* Random shapes (size-0 dims included), strided inputs and arguments for cat, stack, flip, roll,
 * repeat, tril/triu and pad, against host loops over the logical values; i32, whose program (a
 * 4-byte copy) the other tests build too. */
START_TEST(test_random_cases) {
  ct_device *d = ct_test_device();
  uint64_t rs = 20261201;
  const ct_dtype t = CT_I32;
  for (int iter = 0; iter < 120; iter++) {
    int nd = (int)rnd_in(&rs, 1, 4), op = iter % 7;
    int64_t sh[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) sh[i] = rnd64(&rs) % 8 == 0 ? 0 : rnd_in(&rs, 1, 4);
    ct_tensor *x = rand_view(d, t, nd, sh, &rs), *o = NULL;
    int32_t *hx = read_all(x), *want = NULL;
    int64_t os[CT_MAX_DIMS], on = 1;
    int ond = nd;
    memcpy(os, sh, sizeof os);
    char what[96];
    if (op == 0 || op == 1) { /* cat, stack of x and a second input */
      int dim = (int)rnd_in(&rs, op == 0 ? -nd : -nd - 1, op == 0 ? nd - 1 : nd), dd = dim < 0 ? dim + nd + op : dim;
      int64_t s2[CT_MAX_DIMS];
      memcpy(s2, sh, sizeof s2);
      if (op == 0) s2[dd] = rnd_in(&rs, 0, 3);
      ct_tensor *y = rand_view(d, t, nd, s2, &rs), *ts[2] = {x, y};
      int32_t *hy = read_all(y);
      ck_assert_ct_ok(op == 0 ? ct_cat(&o, ts, 2, dim) : ct_stack(&o, ts, 2, dim));
      if (op == 0) {
        os[dd] = sh[dd] + s2[dd];
      } else {
        ond = nd + 1;
        for (int k = 0, j = 0; k < ond; k++) os[k] = k == dd ? 2 : sh[j++];
      }
      for (int k = 0; k < ond; k++) on *= os[k];
      want = malloc((size_t)(on ? on : 1) * 4);
      for (int64_t e = 0; e < on; e++) {
        int64_t c[CT_MAX_DIMS + 1];
        coords(e, ond, os, c);
        if (op == 0) {
          int second = c[dd] >= sh[dd];
          if (second) c[dd] -= sh[dd];
          want[e] = second ? hy[ravel(nd, s2, c)] : hx[ravel(nd, sh, c)];
        } else {
          int64_t which = c[dd];
          memmove(c + dd, c + dd + 1, (size_t)(ond - dd - 1) * sizeof *c);
          want[e] = which ? hy[ravel(nd, sh, c)] : hx[ravel(nd, sh, c)];
        }
      }
      snprintf(what, sizeof what, "case %d: %s dim %d", iter, op == 0 ? "cat" : "stack", dim);
      free(hy);
      ct_release(y);
    } else if (op == 2 || op == 3) { /* flip of a random set of dims; roll */
      int dims[CT_MAX_DIMS], n = 0, flipped[CT_MAX_DIMS] = {0};
      int64_t shift = rnd_in(&rs, -9, 9);
      int rdim = (int)rnd_in(&rs, -nd, nd - 1), rd = rdim < 0 ? rdim + nd : rdim;
      for (int i = 0; i < nd; i++)
        if (rnd64(&rs) % 2) {
          dims[n++] = rnd64(&rs) % 2 ? i - nd : i;
          flipped[i] = 1;
        }
      ck_assert_ct_ok(op == 2 ? ct_flip(&o, x, n, dims) : ct_roll(&o, x, shift, rdim));
      for (int k = 0; k < nd; k++) on *= os[k];
      want = malloc((size_t)(on ? on : 1) * 4);
      for (int64_t e = 0; e < on; e++) {
        int64_t c[CT_MAX_DIMS];
        coords(e, nd, os, c);
        if (op == 2) {
          for (int k = 0; k < nd; k++)
            if (flipped[k]) c[k] = sh[k] - 1 - c[k];
        } else {
          c[rd] = ((c[rd] - shift) % sh[rd] + sh[rd]) % sh[rd];
        }
        want[e] = hx[ravel(nd, sh, c)];
      }
      snprintf(what, sizeof what, "case %d: %s", iter, op == 2 ? "flip" : "roll");
    } else if (op == 4) { /* repeat, sometimes with an extra leading dim */
      ond = nd + (int)rnd_in(&rs, 0, 1);
      int64_t rep[CT_MAX_DIMS];
      for (int k = 0; k < ond; k++) {
        rep[k] = rnd_in(&rs, 0, 3);
        if (rep[k] == 0 && rnd64(&rs) % 2) rep[k] = 1; /* mostly non-empty */
        os[k] = (k < ond - nd ? 1 : sh[k - (ond - nd)]) * rep[k];
        on *= os[k];
      }
      ck_assert_ct_ok(ct_repeat(&o, x, ond, rep));
      want = malloc((size_t)(on ? on : 1) * 4);
      for (int64_t e = 0; e < on; e++) {
        int64_t c[CT_MAX_DIMS];
        coords(e, ond, os, c);
        for (int k = ond - nd; k < ond; k++) c[k - (ond - nd)] = c[k] % sh[k - (ond - nd)];
        want[e] = hx[ravel(nd, sh, c)];
      }
      snprintf(what, sizeof what, "case %d: repeat", iter);
    } else if (op == 5) { /* tril/triu (a 1-D x gets a second dim) */
      if (nd == 1) {
        ct_tensor *u = NULL;
        ck_assert_ct_ok(ct_unsqueeze(&u, x, 0));
        ct_release(x);
        x = u;
        memmove(sh + 1, sh, sizeof *sh);
        os[0] = sh[0] = 1;
        os[1] = sh[1];
        nd = ond = 2;
      }
      int64_t diag = rnd_in(&rs, -3, 3);
      int upper = (int)(rnd64(&rs) % 2);
      ck_assert_ct_ok(upper ? ct_triu(&o, x, diag) : ct_tril(&o, x, diag));
      for (int k = 0; k < nd; k++) on *= os[k];
      want = malloc((size_t)(on ? on : 1) * 4);
      for (int64_t e = 0; e < on; e++) {
        int64_t c[CT_MAX_DIMS];
        coords(e, nd, os, c);
        int64_t dc = c[nd - 1] - c[nd - 2];
        want[e] = (upper ? dc >= diag : dc <= diag) ? hx[e] : 0;
      }
      snprintf(what, sizeof what, "case %d: %s %" PRId64, iter, upper ? "triu" : "tril", diag);
    } else { /* pad: constant with crops on any dims, or reflect/replicate in PyTorch's forms */
      ct_pad_mode mode = CT_PAD_CONSTANT;
      int npd = (int)rnd_in(&rs, 0, nd);
      int empty = 0;
      for (int k = 0; k < nd; k++) empty |= sh[k] == 0;
      if (nd >= 2 && !empty && rnd64(&rs) % 2) {
        mode = rnd64(&rs) % 2 ? CT_PAD_REFLECT : CT_PAD_REPLICATE;
        npd = nd - (int)rnd_in(&rs, 1, nd >= 3 ? 2 : 1);
        if (npd > 3) npd = 3;
      }
      int64_t pad[2 * CT_MAX_DIMS], lo[CT_MAX_DIMS] = {0};
      for (int p = 0; p < npd; p++) {
        int k = nd - 1 - p;
        for (int side = 0; side < 2; side++) {
          int64_t v = mode == CT_PAD_REFLECT ? rnd_in(&rs, -1, sh[k] - 1) : rnd_in(&rs, -1, 3);
          if (mode == CT_PAD_CONSTANT && v < 0 && sh[k] + v + pad[2 * p] < 0) v = 0;
          pad[2 * p + side] = v;
        }
        if (sh[k] + pad[2 * p] + pad[2 * p + 1] < 0) pad[2 * p + 1] = 0;
        lo[k] = pad[2 * p];
        os[k] = sh[k] + pad[2 * p] + pad[2 * p + 1];
      }
      double value = (double)rnd_in(&rs, -50, 50);
      ck_assert_ct_ok(ct_pad(&o, x, 2 * npd, pad, mode, value));
      for (int k = 0; k < nd; k++) on *= os[k];
      want = malloc((size_t)(on ? on : 1) * 4);
      for (int64_t e = 0; e < on; e++) {
        int64_t c[CT_MAX_DIMS];
        int outside = 0;
        coords(e, nd, os, c);
        for (int k = 0; k < nd; k++) {
          int64_t v = c[k] - lo[k];
          if (mode == CT_PAD_CONSTANT) outside |= v < 0 || v >= sh[k];
          else if (mode == CT_PAD_REPLICATE) v = v < 0 ? 0 : v >= sh[k] ? sh[k] - 1 : v;
          else v = v < 0 ? -v : v >= sh[k] ? 2 * (sh[k] - 1) - v : v;
          c[k] = v;
        }
        want[e] = outside ? (int32_t)value : hx[ravel(nd, sh, c)];
      }
      snprintf(what, sizeof what, "case %d: pad mode %d npad %d", iter, (int)mode, 2 * npd);
    }
    check_shape(o, t, ond, os);
    check_bytes(o, want, what);
    free(want);
    free(hx);
    ct_release(o);
    ct_release(x);
  }
}
END_TEST

/* ---- two devices (POCL_DEVICES="pthread pthread") ---- */

/* Mixed devices are refused naming the tensor; every op gives the same bits on either device,
 * randint included (the generator's state is global). */
START_TEST(test_two_devices) {
  ct_device *d0 = NULL, *d1 = NULL;
  ck_assert_ct_ok(ct_device_get(&d0, 0));
  ck_assert_ct_ok(ct_device_get(&d1, 1));
  int64_t sh[2] = {3, 4};
  ct_tensor *a = mk(d0, CT_F32, 2, sh, 5), *b = NULL, *o = NULL;
  ck_assert_ct_ok(ct_to_device(&b, a, d1));
  ct_tensor *mixed[2] = {a, b};
  ck_assert_ct_status(ct_cat(&o, mixed, 2, 0), CT_ERR_DEVICE_MISMATCH);
  ck_assert_error_contains("ts[1]");
  ck_assert_ct_status(ct_stack(&o, mixed, 2, 0), CT_ERR_DEVICE_MISMATCH);
  ck_assert_ptr_null(o);
  ct_tensor *r[2][4] = {{0}};
  for (int k = 0; k < 2; k++) {
    ct_tensor *x = k ? b : a, *pair[2] = {x, x};
    int64_t pad[2] = {2, 1};
    ck_assert_ct_ok(ct_cat(&r[k][0], pair, 2, 1));
    ck_assert_ct_ok(ct_pad(&r[k][1], x, 2, pad, CT_PAD_REFLECT, 0));
    ck_assert_ct_ok(ct_tril(&r[k][2], x, 1));
    ct_rng_set_state(5, 3);
    ck_assert_ct_ok(ct_randint(&r[k][3], k ? d1 : d0, CT_I32, -100, 100, 2, sh));
    for (int i = 0; i < 4; i++) ck_assert_ptr_eq(ct_tensor_device(r[k][i]), k ? d1 : d0);
  }
  for (int i = 0; i < 4; i++) {
    void *h = read_all(r[0][i]);
    check_bytes(r[1][i], h, "device 1 against device 0");
    free(h);
    ct_release(r[0][i]);
    ct_release(r[1][i]);
  }
  ct_release(a);
  ct_release(b);
}
END_TEST

static Suite *shape_suite(int two) {
  Suite *s = suite_create("shape");
  TCase *tc;
  if (two) { /* the two-device runner adds only what needs two devices */
    tc = tcase_create("two_devices");
    tcase_set_tags(tc, "two-devices");
    tcase_add_test(tc, test_two_devices);
    suite_add_tcase(s, tc);
    return s;
  }
  tc = tcase_create("assemble");
  tcase_add_test(tc, test_cat_every_dtype);
  tcase_add_test(tc, test_cat_promote);
  tcase_add_test(tc, test_cat_edges);
  tcase_add_test(tc, test_stack);
  tcase_add_test(tc, test_chunk_split);
  suite_add_tcase(s, tc);
  tc = tcase_create("reorder");
  tcase_add_test(tc, test_flip_roll);
  tcase_add_test(tc, test_flip_roll_0d);
  tcase_add_test(tc, test_repeat);
  tcase_add_test(tc, test_tril_triu);
  tcase_add_test(tc, test_tril_triu_extreme_diagonals);
  tcase_add_test(tc, test_pad_fixtures);
  tcase_add_test(tc, test_pad_strided);
  tcase_add_test(tc, test_pad_errors);
  tcase_add_test(tc, test_pad_extreme);
  suite_add_tcase(s, tc);
  tc = tcase_create("fill");
  tcase_add_test(tc, test_clone_like_fill);
  tcase_add_test(tc, test_linspace);
  tcase_add_test(tc, test_randint);
  suite_add_tcase(s, tc);
  tc = tcase_create("random_cases");
  tcase_add_test(tc, test_random_cases);
  tcase_add_test(tc, test_long_rows);
  tcase_add_test(tc, test_gather_stays_in_bounds);
  suite_add_tcase(s, tc);
  return s;
}

/* argv[1]: "one" (one PoCL device: every test) or "two" (POCL_DEVICES="pthread pthread": the
 * two-device test only, the rest being device-independent). */
int main(int argc, char **argv) { return ct_test_run(shape_suite(argc > 1 && strcmp(argv[1], "two") == 0)); }
