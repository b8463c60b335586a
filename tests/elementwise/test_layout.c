/* Elementwise ops on every kind of layout, against the host reference: broadcasting edge cases
 * (size-1 dims, 0-d scalars, 0-element tensors), strided inputs (transposed, permuted, sliced
 * with steps and offsets, expanded with stride 0), _out into strided views, in-place aliasing,
 * and the errors with their messages. argv[1]: "one" (one device) or "two" (two devices, for
 * the device-mismatch case); argv[2] "gpu-paths" runs the strided and group-remainder cases
 * with the kernels a GPU gets (ct__ew_gpu_paths: one element per work-item on strided rows,
 * EW_SPER=1, and f16 through the half builtins, EW_SOFT16=0). */
#include <pthread.h>

#include "elementwise/elementwise.h"
#include "ew_fns.h"
#include "ew_util.h"

static int n_devices_wanted = 1;

/* A tensor (often a view) with a host copy of its storage: the storage holds a base tensor
 * created from `host` (row-major), and the view's offset and strides address it. */
typedef struct {
  ct_tensor *t;
  char *host;
  size_t host_n;
  ct_dtype dt;
} lv;

static lv lv_base(const ew_dev *e, ct_dtype dt, int ndim, const int64_t *shape) {
  lv v;
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
  v.dt = dt;
  v.host_n = n;
  v.host = calloc(n ? n : 1, ref_size(dt));
  ck_assert_ptr_nonnull(v.host);
  double f[64];
  int64_t iv[64];
  int ns = ew_specials(dt, e->denorm, f, iv);
  for (size_t i = 0; i < n; i++) {
    char *p = v.host + i * ref_size(dt);
    if (i % 3 == 0 && ns) {
      size_t k = (i / 3) % (size_t)ns;
      if (ref_is_float(dt)) ew_store_double(dt, p, f[k]); else ew_store_int(dt, p, iv[k]);
    } else {
      ew_random(dt, p);
    }
  }
  v.t = ew_tensor(e->d, dt, ndim, shape, v.host);
  return v;
}

/* A view of base made by the caller (same storage): shares the host copy. */
static lv lv_view(const lv *base, ct_tensor *view) {
  lv v = *base;
  v.t = view;
  return v;
}

static void lv_free_base(lv *v) {
  ct_release(v->t);
  free(v->host);
}

/* Host address of the element of v at out-index idx (out has ondim dims), broadcasting v. */
static const char *lv_at(const lv *v, int ondim, const int64_t *idx) {
  int nd = ct_tensor_ndim(v->t);
  const int64_t *sh = ct_tensor_shape(v->t), *st = ct_tensor_strides(v->t);
  int64_t off = ct_tensor_offset(v->t);
  for (int d = 0; d < nd; d++) {
    int64_t i = idx[d + (ondim - nd)];
    if (sh[d] != 1) off += i * st[d];
  }
  ck_assert_int_ge(off, 0);
  ck_assert_int_lt(off, (int64_t)v->host_n);
  return v->host + (size_t)off * ref_size(v->dt);
}

/* NumPy broadcast of the shapes of up to three tensors (the test's own implementation). */
static int bshape(int64_t *out, int n, const lv *const *vs) {
  int nd = 0;
  for (int i = 0; i < n; i++) nd = ct_tensor_ndim(vs[i]->t) > nd ? ct_tensor_ndim(vs[i]->t) : nd;
  for (int d = 0; d < nd; d++) {
    int64_t s = 1;
    for (int i = 0; i < n; i++) {
      int vd = d - (nd - ct_tensor_ndim(vs[i]->t));
      int64_t x = vd < 0 ? 1 : ct_tensor_shape(vs[i]->t)[vd];
      if (x != 1) s = x;
    }
    out[d] = s;
  }
  return nd;
}

static bool next_index(int64_t *idx, int nd, const int64_t *shape) {
  for (int d = nd - 1; d >= 0; d--) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

/* Expected result element of op at out-index idx. */
static ref_expect expect_at(const ew_dev *e, enum ref_op op, int nin, const lv *const *in, int nd, const int64_t *idx,
                            double s, int spos, ct_dtype *o_out) {
  /* The operands' ranking counts: a zero-dim input beside a dimensioned one. */
  int a = nin == 3 ? 1 : 0;
  ct_dtype t = nin == 1 ? in[0]->dt
                        : ref_rank2(in[a]->dt, ct_tensor_ndim(in[a]->t), in[a + 1]->dt, ct_tensor_ndim(in[a + 1]->t));
  ct_dtype k, o;
  bool overflow = false;
  if (spos)
    ref_scalar_types(op, t, s, &k, &o, &overflow);
  else
    ref_types(op, t, &k, &o);
  ck_assert(!overflow);
  *o_out = o;
  ref_val z = {0, 0, 0};
  if (op == R_WHERE) {
    bool c = ref_nonzero(in[0]->dt, lv_at(in[0], nd, idx));
    return ref_value(k, c ? ref_convert(k, in[1]->dt, lv_at(in[1], nd, idx))
                          : ref_convert(k, in[2]->dt, lv_at(in[2], nd, idx)));
  }
  ref_val x = ref_convert(k, in[0]->dt, lv_at(in[0], nd, idx));
  ref_val y = nin >= 2 ? ref_convert(k, in[1]->dt, lv_at(in[1], nd, idx)) : ref_scalar(k, s);
  if (spos == 1) return ref_compute(op, k, o, y, x, z, z, false, false, e->cr);
  return ref_compute(op, k, o, x, y, z, z, false, false, e->cr);
}

/* Compares a new result tensor r against the reference over the broadcast shape. */
static void check_result(const ew_dev *e, const char *what, enum ref_op op, int nin, const lv *const *in, ct_tensor *r,
                         double s, int spos) {
  int64_t shape[CT_MAX_DIMS], idx[CT_MAX_DIMS] = {0};
  int nd = bshape(shape, nin, in);
  ck_assert_msg(ct_tensor_ndim(r) == nd, "%s: result has %d dims, expected %d", what, ct_tensor_ndim(r), nd);
  for (int d = 0; d < nd; d++)
    ck_assert_msg(ct_tensor_shape(r)[d] == shape[d], "%s: result dim %d is %" PRId64 ", expected %" PRId64, what, d,
                  ct_tensor_shape(r)[d], shape[d]);
  int64_t n = ct_numel(r);
  char *got = ew_read(r);
  for (int64_t i = 0; i < n; i++) {
    ct_dtype o;
    ref_expect ex = expect_at(e, op, nin, in, nd, idx, s, spos, &o);
    ck_assert_int_eq(ct_tensor_dtype(r), o);
    EW_CHECK_ELEM(&ex, o, got + (size_t)i * ref_size(o), e->denorm, "%s: element %" PRId64, what, i);
    next_index(idx, nd, shape);
  }
  free(got);
}

/* Runs fn(a, b) (new and into a fresh _out) and checks. */
static void run_binary(const ew_dev *e, const char *what, enum ref_op op, bin_fn fn, bin_out_fn fo, const lv *a,
                       const lv *b) {
  const lv *in[2] = {a, b};
  ct_tensor *r = NULL;
  ck_assert_ct_ok(fn(&r, a->t, b->t));
  check_result(e, what, op, 2, in, r, 0, 0);
  ct_tensor *r2;
  ck_assert_ct_ok(ct_empty(&r2, e->d, ct_tensor_dtype(r), ct_tensor_ndim(r), ct_tensor_shape(r)));
  ck_assert_ct_ok(fo(r2, a->t, b->t));
  check_result(e, what, op, 2, in, r2, 0, 0);
  ct_release(r);
  ct_release(r2);
}

/* ---- broadcasting ---- */

START_TEST(test_broadcast_shapes) {
  ew_dev e = ew_open();
  static const struct {
    int na;
    int64_t a[4];
    int nb;
    int64_t b[4];
  } cases[] = {
      {3, {3, 1, 5}, 2, {4, 1}},     /* both sides broadcast */
      {1, {1}, 2, {2, 3}},           /* size-1 against a matrix */
      {0, {0}, 2, {2, 3}},           /* 0-d scalar on the left */
      {2, {2, 3}, 0, {0}},           /* ... and on the right */
      {0, {0}, 0, {0}},              /* 0-d with 0-d: 0-d */
      {2, {0, 3}, 2, {1, 3}},        /* empty result */
      {2, {2, 0}, 2, {2, 1}},        /* empty along the last dim */
      {2, {1, 0}, 3, {4, 3, 1}},     /* empty with new leading dims */
      {4, {2, 1, 3, 1}, 3, {4, 1, 6}}, /* alternating */
      {2, {67, 129}, 2, {67, 1}},    /* a column broadcast over many rows: strided kernel */
      {2, {67, 129}, 1, {129}},      /* a row broadcast */
      {1, {1000}, 1, {1}},           /* one element broadcast: the contiguous kernel */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const ct_dtype types[2][2] = {{CT_F32, CT_F32}, {CT_I32, CT_F16}};
    for (int t = 0; t < 2; t++) {
      lv a = lv_base(&e, types[t][0], cases[c].na, cases[c].a), b = lv_base(&e, types[t][1], cases[c].nb, cases[c].b);
      char what[64];
      snprintf(what, sizeof what, "broadcast case %zu (%s, %s)", c, ct_dtype_name(a.dt), ct_dtype_name(b.dt));
      run_binary(&e, what, R_ADD, ct_add, ct_add_out, &a, &b);
      run_binary(&e, what, R_LT, ct_lt, ct_lt_out, &a, &b);
      lv_free_base(&a);
      lv_free_base(&b);
    }
  }
}
END_TEST

START_TEST(test_broadcast_where_unary_scalar) {
  ew_dev e = ew_open();
  int64_t sc[3] = {4, 1, 6}, sa[2] = {5, 1}, sb[1] = {6};
  lv c = lv_base(&e, CT_BOOL, 3, sc), a = lv_base(&e, CT_F16, 2, sa), b = lv_base(&e, CT_I8, 1, sb);
  const lv *in[3] = {&c, &a, &b};
  ct_tensor *r;
  ck_assert_ct_ok(ct_where(&r, c.t, a.t, b.t));
  check_result(&e, "where [4,1,6] [5,1] [6]", R_WHERE, 3, in, r, 0, 0);
  ct_release(r);
  /* 0-d everywhere */
  lv z0 = lv_base(&e, CT_U8, 0, NULL), z1 = lv_base(&e, CT_F32, 0, NULL), z2 = lv_base(&e, CT_F32, 0, NULL);
  const lv *zin[3] = {&z0, &z1, &z2};
  ck_assert_ct_ok(ct_where(&r, z0.t, z1.t, z2.t));
  check_result(&e, "where 0-d", R_WHERE, 3, zin, r, 0, 0);
  ct_release(r);
  const lv *x1[1] = {&z1};
  ck_assert_ct_ok(ct_exp(&r, z1.t));
  check_result(&e, "exp 0-d", R_EXP, 1, x1, r, 0, 0);
  ct_release(r);
  ck_assert_ct_ok(ct_mul_scalar(&r, z1.t, 0.5));
  check_result(&e, "mul_scalar 0-d", R_MUL, 1, x1, r, 0.5, 2);
  ct_release(r);
  /* empty */
  int64_t se[2] = {3, 0};
  lv em = lv_base(&e, CT_F32, 2, se);
  const lv *ein[1] = {&em};
  ck_assert_ct_ok(ct_sigmoid(&r, em.t));
  check_result(&e, "sigmoid [3,0]", R_SIGMOID, 1, ein, r, 0, 0);
  ct_release(r);
  ck_assert_ct_ok(ct_rsub_scalar(&r, em.t, 1));
  check_result(&e, "rsub_scalar [3,0]", R_SUB, 1, ein, r, 1, 1);
  ct_release(r);
  ck_assert_ct_ok(ct_clamp(&r, em.t, 0, 1));
  ck_assert_int_eq(ct_numel(r), 0);
  ct_release(r);
  lv_free_base(&c);
  lv_free_base(&a);
  lv_free_base(&b);
  lv_free_base(&z0);
  lv_free_base(&z1);
  lv_free_base(&z2);
  lv_free_base(&em);
}
END_TEST

/* ---- strided inputs ---- */

START_TEST(test_strided_inputs) {
  ew_dev e = ew_open();
  int64_t s67[2] = {67, 45}, s45[2] = {45, 67}, s3[3] = {6, 7, 9}, s97[2] = {9, 97};
  lv base_a = lv_base(&e, CT_F32, 2, s67), base_b = lv_base(&e, CT_F32, 2, s45);
  lv base_i = lv_base(&e, CT_I32, 3, s3), base_h = lv_base(&e, CT_F16, 2, s97);
  ct_tensor *t;

  /* transposed + contiguous (same logical shape [45, 67]) */
  ck_assert_ct_ok(ct_transpose(&t, base_a.t, 0, 1));
  lv at = lv_view(&base_a, t);
  run_binary(&e, "transpose + contiguous", R_ADD, ct_add, ct_add_out, &at, &base_b);
  run_binary(&e, "contiguous - transpose", R_SUB, ct_sub, ct_sub_out, &base_b, &at);
  const lv *u1[1] = {&at};
  ct_tensor *r;
  ck_assert_ct_ok(ct_tanh(&r, at.t));
  check_result(&e, "tanh(transpose)", R_TANH, 1, u1, r, 0, 0);
  ct_release(r);

  /* both transposed the same way: collapses to one dim */
  ct_tensor *t2;
  ck_assert_ct_ok(ct_transpose(&t2, base_b.t, 0, 1));
  lv bt = lv_view(&base_b, t2);
  run_binary(&e, "transpose * the same transpose", R_MUL, ct_mul, ct_mul_out, &at, &at);

  /* sliced with a step and an offset: [67, 45][3:60:4, 1::2] */
  ct_tensor *s1, *s2;
  ck_assert_ct_ok(ct_slice(&s1, base_a.t, 0, 3, 60, 4));
  ck_assert_ct_ok(ct_slice(&s2, s1, 1, 1, 45, 2));
  lv as = lv_view(&base_a, s2);
  int64_t ss[2] = {ct_tensor_shape(s2)[0], ct_tensor_shape(s2)[1]};
  if (ct_test_fp64(e.d, "slice(step) + f64")) {
    lv c = lv_base(&e, CT_F64, 2, ss);
    run_binary(&e, "slice(step) + f64", R_ADD, ct_add, ct_add_out, &as, &c);
    lv_free_base(&c);
  }
  run_binary(&e, "maximum(slice, slice)", R_MAXIMUM, ct_maximum, ct_maximum_out, &as, &as);

  /* expanded (stride 0) rows and columns */
  int64_t s1x[2] = {1, 45}, ex[2] = {67, 45};
  lv row = lv_base(&e, CT_BF16, 2, s1x);
  ct_tensor *rexp;
  ck_assert_ct_ok(ct_expand(&rexp, row.t, 2, ex));
  lv rv = lv_view(&row, rexp);
  run_binary(&e, "contiguous / expanded row", R_DIV, ct_div, ct_div_out, &base_a, &rv);
  run_binary(&e, "expanded row ** transpose", R_POW, ct_pow, ct_pow_out, &rv, &bt);

  /* permuted 3-D integer tensor with a sliced one */
  int perm[3] = {2, 0, 1};
  ct_tensor *p;
  ck_assert_ct_ok(ct_permute(&p, base_i.t, perm));
  lv ip = lv_view(&base_i, p); /* [9, 6, 7] */
  int64_t s967[3] = {9, 6, 7};
  lv ic = lv_base(&e, CT_I8, 3, s967);
  run_binary(&e, "permute floor_divide contiguous", R_FLOOR_DIVIDE, ct_floor_divide, ct_floor_divide_out, &ip, &ic);
  run_binary(&e, "permute remainder permute", R_REMAINDER, ct_remainder, ct_remainder_out, &ip, &ip);
  const lv *u2[1] = {&ip};
  ck_assert_ct_ok(ct_abs(&r, ip.t));
  check_result(&e, "abs(permute)", R_ABS, 1, u2, r, 0, 0);
  ct_release(r);
  ck_assert_ct_ok(ct_ge_scalar(&r, ip.t, 3e9));
  check_result(&e, "permute >= 3e9", R_GE, 1, u2, r, 3e9, 2);
  ct_release(r);

  /* f16 transposed, where with an expanded condition */
  ct_tensor *ht;
  ck_assert_ct_ok(ct_transpose(&ht, base_h.t, 0, 1)); /* [97, 9] */
  lv hv = lv_view(&base_h, ht);
  int64_t sc1[2] = {97, 1};
  lv cond = lv_base(&e, CT_I32, 2, sc1);
  int64_t s9[1] = {9};
  lv other = lv_base(&e, CT_U8, 1, s9);
  const lv *w2[3] = {&cond, &hv, &other};
  ck_assert_ct_ok(ct_where(&r, cond.t, hv.t, other.t));
  check_result(&e, "where(expanded cond, transposed f16, row u8)", R_WHERE, 3, w2, r, 0, 0);
  ct_release(r);

  /* contiguous slices at odd offsets: the vector path with unaligned vector loads and a tail */
  int64_t s1k[1] = {1010};
  lv l1 = lv_base(&e, CT_F16, 1, s1k), l2 = lv_base(&e, CT_U8, 1, s1k);
  ct_tensor *v1, *v2;
  ck_assert_ct_ok(ct_slice(&v1, l1.t, 0, 3, 1000, 1));
  ck_assert_ct_ok(ct_slice(&v2, l2.t, 0, 13, 1010, 1));
  lv lv1 = lv_view(&l1, v1), lv2 = lv_view(&l2, v2);
  run_binary(&e, "f16 slice at 3 * u8 slice at 13", R_MUL, ct_mul, ct_mul_out, &lv1, &lv2);
  run_binary(&e, "u8 slice at 13 == itself", R_EQ, ct_eq, ct_eq_out, &lv2, &lv2);
  ct_release(v1);
  ct_release(v2);
  lv_free_base(&l1);
  lv_free_base(&l2);

  ct_release(ht);
  ct_release(t2);
  lv_free_base(&other);
  lv_free_base(&cond);
  lv_free_base(&ic);
  ct_release(p);
  ct_release(rexp);
  lv_free_base(&row);
  ct_release(s1);
  ct_release(s2);
  ct_release(t);
  lv_free_base(&base_a);
  lv_free_base(&base_b);
  lv_free_base(&base_i);
  lv_free_base(&base_h);
}
END_TEST

/* ---- _out into views, in place ---- */

/* After fo(out_view, a, b): elements in the view hold the result, the rest of out's storage is
 * unchanged. expected_from: the inputs as they were before the call (for in-place). */
static void check_out_view(const ew_dev *e, const char *what, enum ref_op op, const lv *outv, const lv *const *in, int nin,
                           double s, int spos) {
  int64_t shape[CT_MAX_DIMS], idx[CT_MAX_DIMS] = {0};
  int nd = ct_tensor_ndim(outv->t);
  memcpy(shape, ct_tensor_shape(outv->t), (size_t)nd * sizeof *shape);
  /* Read the whole storage back through a contiguous view over the base. */
  size_t es = ref_size(outv->dt);
  int64_t all[1] = {(int64_t)outv->host_n};
  ct_tensor *flat;
  ck_assert_ct_ok(ct__tensor_view(&flat, outv->t, 1, all, (int64_t[]){1}, 0));
  char *got = ew_read(flat);
  ct_release(flat);
  char *touched = calloc(outv->host_n, 1);
  int64_t n = ct_numel(outv->t);
  for (int64_t i = 0; i < n; i++) {
    ct_dtype o;
    ref_expect ex = expect_at(e, op, nin, in, nd, idx, s, spos, &o);
    int64_t off = ct_tensor_offset(outv->t);
    for (int d = 0; d < nd; d++) off += idx[d] * ct_tensor_strides(outv->t)[d];
    touched[off] = 1;
    EW_CHECK_ELEM(&ex, o, got + (size_t)off * es, e->denorm, "%s: element %" PRId64, what, i);
    next_index(idx, nd, shape);
  }
  for (size_t i = 0; i < outv->host_n; i++)
    if (!touched[i])
      ck_assert_msg(memcmp(got + i * es, outv->host + i * es, es) == 0, "%s: storage element %zu outside out changed",
                    what, i);
  free(touched);
  free(got);
}

START_TEST(test_out_views_and_in_place) {
  ew_dev e = ew_open();
  int64_t s[2] = {33, 20}, st[2] = {20, 33}, s3[2] = {11, 20};
  lv a = lv_base(&e, CT_F32, 2, st), b = lv_base(&e, CT_F32, 2, st);
  lv ob = lv_base(&e, CT_F32, 2, s);

  /* out is a transpose of a [33, 20] tensor */
  ct_tensor *ot;
  ck_assert_ct_ok(ct_transpose(&ot, ob.t, 0, 1));
  lv ov = lv_view(&ob, ot);
  const lv *in[2] = {&a, &b};
  ck_assert_ct_ok(ct_mul_out(ov.t, a.t, b.t));
  check_out_view(&e, "mul_out into transpose", R_MUL, &ov, in, 2, 0, 0);

  /* out is every third row of a [33, 20] tensor: [11, 20] */
  lv ob2 = lv_base(&e, CT_F32, 2, s);
  ct_tensor *os;
  ck_assert_ct_ok(ct_slice(&os, ob2.t, 0, 1, 33, 3));
  lv osv = lv_view(&ob2, os);
  lv c = lv_base(&e, CT_F32, 2, s3);
  int64_t s1[1] = {20};
  lv row = lv_base(&e, CT_F32, 1, s1);
  const lv *in2[2] = {&c, &row};
  ck_assert_ct_ok(ct_sub_out(osv.t, c.t, row.t));
  check_out_view(&e, "sub_out into a row slice", R_SUB, &osv, in2, 2, 0, 0);
  const lv *in3[1] = {&c};
  ck_assert_ct_ok(ct_gelu_out(osv.t, c.t));
  check_out_view(&e, "gelu_out into a row slice", R_GELU, &osv, in3, 1, 0, 0);
  ck_assert_ct_ok(ct_clamp_out(osv.t, c.t, -0.5, 0.5));
  ck_assert_ct_ok(ct_maximum_scalar_out(osv.t, c.t, 0.25));
  check_out_view(&e, "maximum_scalar_out into a row slice", R_MAXIMUM, &osv, in3, 1, 0.25, 2);

  /* in place: a = a + b, on a transposed view (out and input the very same elements) */
  lv ib = lv_base(&e, CT_I32, 2, s);
  ct_tensor *it;
  ck_assert_ct_ok(ct_transpose(&it, ib.t, 0, 1)); /* [20, 33] */
  lv iv = lv_view(&ib, it);
  lv jb = lv_base(&e, CT_I32, 2, st);
  char *before = malloc(ib.host_n * 4);
  memcpy(before, ib.host, ib.host_n * 4);
  ck_assert_ct_ok(ct_add_out(iv.t, iv.t, jb.t));
  const lv *in4[2] = {&iv, &jb};
  check_out_view(&e, "in-place add on a transpose", R_ADD, &iv, in4, 2, 0, 0); /* host copy = old values */
  /* the same tensor object as both inputs and out */
  lv fb = lv_base(&e, CT_F32, 2, s);
  ck_assert_ct_ok(ct_mul_out(fb.t, fb.t, fb.t));
  const lv *in5[2] = {&fb, &fb};
  check_out_view(&e, "in-place x*x", R_MUL, &fb, in5, 2, 0, 0);
  ck_assert_ct_ok(ct_relu_out(fb.t, fb.t));
  ck_assert_ct_ok(ct_rsub_scalar_out(fb.t, fb.t, 1));
  free(before);

  ct_release(it);
  ct_release(ot);
  ct_release(os);
  lv_free_base(&a);
  lv_free_base(&b);
  lv_free_base(&ob);
  lv_free_base(&ob2);
  lv_free_base(&c);
  lv_free_base(&row);
  lv_free_base(&ib);
  lv_free_base(&jb);
  lv_free_base(&fb);
}
END_TEST

/* ---- contiguous launches split at the work-group size ---- */

/* A contiguous launch covers the largest multiple of the work-group size with ew_contig_full
 * (no bounds check) and the rest with ew_contig, every offset moved on but a broadcast
 * input's. Sizes around the group size (1024 on CPUs, 256 on GPUs), broadcast inputs on either
 * side, a unary and a scalar op, f16 (the vector path on CPUs), and an out at an offset. */
START_TEST(test_group_remainder) {
  ew_dev e = ew_open();
  const int64_t sizes[] = {1023, 1024, 1025, 2 * 1024 + 77, 3 * 1024, 4096 + 1};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int64_t s[1] = {sizes[i]}, one[1] = {1}, sp[1] = {sizes[i] + 5};
    lv a = lv_base(&e, CT_F32, 1, s), b = lv_base(&e, CT_F32, 1, s), c1 = lv_base(&e, CT_F32, 1, one);
    lv h = lv_base(&e, CT_F16, 1, s), ob = lv_base(&e, CT_F32, 1, sp);
    char what[64];
    snprintf(what, sizeof what, "n = %lld", (long long)sizes[i]);
    run_binary(&e, what, R_ADD, ct_add, ct_add_out, &a, &b);
    run_binary(&e, what, R_MUL, ct_mul, ct_mul_out, &a, &c1);
    run_binary(&e, what, R_SUB, ct_sub, ct_sub_out, &c1, &a);
    run_binary(&e, what, R_ADD, ct_add, ct_add_out, &h, &h);
    const lv *in1[1] = {&a};
    ct_tensor *r;
    ck_assert_ct_ok(ct_exp(&r, a.t));
    check_result(&e, what, R_EXP, 1, in1, r, 0, 0);
    ct_release(r);
    ck_assert_ct_ok(ct_mul_scalar(&r, a.t, 0.5));
    check_result(&e, what, R_MUL, 1, in1, r, 0.5, 2);
    ct_release(r);
    ct_tensor *os;
    ck_assert_ct_ok(ct_slice(&os, ob.t, 0, 3, sizes[i] + 3, 1));
    lv osv = lv_view(&ob, os);
    ck_assert_ct_ok(ct_exp_out(osv.t, a.t));
    check_out_view(&e, what, R_EXP, &osv, in1, 1, 0, 0);
    ct_release(os);
    lv_free_base(&a);
    lv_free_base(&b);
    lv_free_base(&c1);
    lv_free_base(&h);
    lv_free_base(&ob);
  }
}
END_TEST

/* ---- errors ---- */

START_TEST(test_errors) {
  ew_dev e = ew_open();
  int64_t s23[2] = {2, 3}, s4[1] = {4}, s3[1] = {3};
  float h[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ct_tensor *a = ew_tensor(e.d, CT_F32, 2, s23, h), *b = ew_tensor(e.d, CT_F32, 1, s4, h);
  ct_tensor *c = ew_tensor(e.d, CT_F32, 1, s3, h), *r = (ct_tensor *)&r;

  /* NULLs */
  ck_assert_ct_status(ct_add(NULL, a, c), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'out' is NULL");
  ck_assert_ct_status(ct_add(&r, NULL, c), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("'a' is NULL");
  ck_assert_ct_status(ct_mul(&r, a, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_mul: argument 'b' is NULL");
  ck_assert_ct_status(ct_add_out(NULL, a, c), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_add_out: argument 'out' is NULL");
  ck_assert_ct_status(ct_exp(&r, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_exp: argument 'x' is NULL");
  ck_assert_ct_status(ct_exp(NULL, a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_where(&r, NULL, a, c), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("'cond' is NULL");
  ck_assert_ct_status(ct_where(&r, a, a, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_add_scalar(&r, NULL, 1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_clamp_out(NULL, a, 0, 1), CT_ERR_INVALID_ARGUMENT);

  /* shapes: both printed */
  ck_assert_ct_status(ct_add(&r, a, b), CT_ERR_SHAPE_MISMATCH);
  ck_assert_ptr_null(r);
  ck_assert_error_contains("ct_add");
  ck_assert_error_contains("[2, 3]");
  ck_assert_error_contains("[4]");
  ck_assert_ct_status(ct_where(&r, b, a, c), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("[4]");
  ct_tensor *o32, *oi;
  ck_assert_ct_ok(ct_empty(&o32, e.d, CT_F32, 2, (int64_t[]){3, 2}));
  ck_assert_ct_status(ct_add_out(o32, a, c), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("out has shape [3, 2] but the result has shape [2, 3]");
  ck_assert_ct_status(ct_neg_out(o32, a), CT_ERR_SHAPE_MISMATCH);

  /* dtypes */
  ck_assert_ct_ok(ct_empty(&oi, e.d, CT_I32, 2, s23));
  ck_assert_ct_status(ct_add_out(oi, a, c), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("out has dtype i32 but the result is f32");
  ck_assert_ct_status(ct_lt_out(oi, a, c), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("result is bool");
  ct_tensor *bo;
  ck_assert_ct_ok(ct_zeros(&bo, e.d, CT_BOOL, 1, s3));
  ck_assert_ct_status(ct_sub(&r, bo, bo), CT_ERR_DTYPE_MISMATCH);
  ck_assert_error_contains("ct_sub: not defined for bool");
  ck_assert_ct_status(ct_neg(&r, bo), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ct_status(ct_remainder(&r, bo, bo), CT_ERR_DTYPE_MISMATCH);
  ck_assert_ct_ok(ct_sub_scalar(&r, bo, 1)); /* computes in i64 */
  ck_assert_int_eq(ct_tensor_dtype(r), CT_I64);
  ct_release(r);

  /* scalars */
  ct_tensor *u;
  ck_assert_ct_ok(ct_zeros(&u, e.d, CT_U8, 1, s3));
  ck_assert_ct_status(ct_add_scalar(&r, u, 300), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_add_scalar: scalar 300 cannot be converted to u8");
  ck_assert_ct_status(ct_mul_scalar(&r, u, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_lt_scalar(&r, u, 300));
  ct_release(r);
  ck_assert_ct_ok(ct_add_scalar(&r, u, 300.5)); /* a float scalar: f32 */
  ck_assert_int_eq(ct_tensor_dtype(r), CT_F32);
  ct_release(r);
  ck_assert_ct_status(ct_clamp(&r, a, NAN, NAN), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("ct_clamp: both bounds are NaN");

  /* out overlaps */
  ct_tensor *row, *wide;
  ck_assert_ct_ok(ct_zeros(&row, e.d, CT_F32, 2, (int64_t[]){1, 3}));
  ck_assert_ct_ok(ct_expand(&wide, row, 2, s23));
  ck_assert_ct_status(ct_add_out(wide, a, c), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("stride 0");
  ct_tensor *base, *lo, *hi;
  int64_t s10[1] = {10};
  ck_assert_ct_ok(ct_zeros(&base, e.d, CT_F32, 1, s10));
  ck_assert_ct_ok(ct_slice(&lo, base, 0, 0, 8, 1));
  ck_assert_ct_ok(ct_slice(&hi, base, 0, 1, 9, 1));
  ck_assert_ct_status(ct_add_out(hi, lo, lo), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("partly overlaps a");
  ck_assert_ct_status(ct_exp_out(hi, lo), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("partly overlaps x");
  ck_assert_ct_ok(ct_add_out(lo, lo, lo)); /* exact aliasing is in place */
  /* interleaved views share no element: allowed */
  ct_tensor *ev, *od;
  ck_assert_ct_ok(ct_slice(&ev, base, 0, 0, 10, 2));
  ck_assert_ct_ok(ct_slice(&od, base, 0, 1, 10, 2));
  ck_assert_ct_ok(ct_add_out(ev, od, od));

  /* f64 on a device without cl_khr_fp64 (simulated: the check reads the device's properties) */
  if (e.fp64) {
    ct_tensor *f, *g;
    double hd[3] = {1, 2, 3};
    f = ew_tensor(e.d, CT_F64, 1, s3, hd);
    e.d->props.fp64 = false;
    ck_assert_ct_status(ct_add(&g, f, c), CT_ERR_UNSUPPORTED);
    ck_assert_error_contains("cl_khr_fp64");
    ck_assert_error_contains(ct_device_spec(e.d));
    ck_assert_ct_status(ct_add_scalar(&g, c, 1), CT_OK); /* f32 is fine */
    ct_release(g);
    ck_assert_ct_status(ct_exp(&g, f), CT_ERR_UNSUPPORTED);
    e.d->props.fp64 = true;
    ct_release(f);
  } else {
    /* a device really without it: an f64 tensor is refused where it would be made */
    ct_tensor *f = (ct_tensor *)1, *z = (ct_tensor *)1;
    double hd[3] = {1, 2, 3};
    ck_assert_ct_status(ct_from_host(&f, e.d, CT_F64, 1, s3, hd), CT_ERR_UNSUPPORTED);
    ck_assert_error_contains("cl_khr_fp64");
    ck_assert_error_contains(ct_device_spec(e.d));
    ck_assert_ptr_null(f);
    ck_assert_ct_status(ct_zeros(&z, e.d, CT_F64, 1, s3), CT_ERR_UNSUPPORTED);
    ck_assert_ptr_null(z);
    ck_assert_ct_status(ct_cast(&f, c, CT_F64), CT_ERR_UNSUPPORTED);
    ck_assert_ptr_null(f);
  }

  ct_release(ev);
  ct_release(od);
  ct_release(lo);
  ct_release(hi);
  ct_release(base);
  ct_release(wide);
  ct_release(row);
  ct_release(u);
  ct_release(bo);
  ct_release(oi);
  ct_release(o32);
  ct_release(a);
  ct_release(b);
  ct_release(c);
}
END_TEST

/* Several threads running ops at once (the kernel table and kernels are shared). */
struct thread_arg {
  ct_device *d;
  int id;
  int bad;
};

static void *thread_body(void *p) {
  struct thread_arg *t = p;
  int64_t s[1] = {1000};
  float h[1000], got[1000];
  for (int i = 0; i < 1000; i++) h[i] = (float)(i % 97) * 0.25f + (float)t->id;
  ct_tensor *a = NULL, *b = NULL;
  if (ct_from_host(&a, t->d, CT_F32, 1, s, h) != CT_OK || ct_empty(&b, t->d, CT_F32, 1, s) != CT_OK) {
    t->bad = -1;
    goto done;
  }
  for (int it = 0; it < 40; it++) {
    /* alternate ops so threads race on new table entries too */
    if (ct_mul_scalar_out(b, a, (double)(it % 3)) != CT_OK || ct_add_out(b, b, a) != CT_OK ||
        ct_floor_divide_scalar_out(b, b, 1.5) != CT_OK || ct_to_host(b, got, sizeof got) != CT_OK) {
      t->bad = -1;
      goto done;
    }
    for (int i = 0; i < 1000; i++) {
      float want = floorf((h[i] * (float)(it % 3) + h[i]) / 1.5f);
      if (got[i] != want) t->bad++;
    }
  }
done:
  ct_release(a);
  ct_release(b);
  return NULL;
}

START_TEST(test_threads) {
  ew_dev e = ew_open();
  pthread_t th[4];
  struct thread_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (struct thread_arg){e.d, i, 0};
    ck_assert_int_eq(pthread_create(&th[i], NULL, thread_body, &args[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    ck_assert_msg(args[i].bad == 0, "thread %d: %d wrong elements (or -1: a call failed)", i, args[i].bad);
  }
}
END_TEST

START_TEST(test_device_mismatch) {
  int count = 0;
  ck_assert_ct_ok(ct_device_count(&count));
  if (count < 2) return; /* the "two" run has two PoCL devices */
  ct_device *d0, *d1;
  ck_assert_ct_ok(ct_device_get(&d0, 0));
  ck_assert_ct_ok(ct_device_get(&d1, 1));
  int64_t s[1] = {4};
  float h[4] = {1, 2, 3, 4};
  ct_tensor *a = ew_tensor(d0, CT_F32, 1, s, h), *b = ew_tensor(d1, CT_F32, 1, s, h), *r = NULL, *o;
  ck_assert_ct_status(ct_add(&r, a, b), CT_ERR_DEVICE_MISMATCH);
  ck_assert_ptr_null(r);
  ck_assert_error_contains(ct_device_spec(d0));
  ck_assert_error_contains(ct_device_spec(d1));
  ck_assert_ct_status(ct_where(&r, a, a, b), CT_ERR_DEVICE_MISMATCH);
  ck_assert_ct_ok(ct_empty(&o, d1, CT_F32, 1, s));
  ck_assert_ct_status(ct_exp_out(o, a), CT_ERR_DEVICE_MISMATCH);
  ck_assert_error_contains("out");
  /* shape errors come after device errors */
  int64_t s5[1] = {5};
  ct_tensor *c = ew_tensor(d1, CT_F32, 1, s5, (float[]){1, 2, 3, 4, 5});
  ck_assert_ct_status(ct_add(&r, a, c), CT_ERR_DEVICE_MISMATCH);
  /* each device runs its own kernels */
  ck_assert_ct_ok(ct_exp_out(o, b));
  float got[4];
  ck_assert_ct_ok(ct_to_host(o, got, sizeof got));
  ck_assert_float_eq_tol(got[3], expf(4), 1e-4);
  ct_release(a);
  ct_release(b);
  ct_release(c);
  ct_release(o);
  ck_assert_int_eq(n_devices_wanted, 2);
}
END_TEST

int main(int argc, char **argv) {
  n_devices_wanted = argc > 1 && strcmp(argv[1], "two") == 0 ? 2 : 1;
  ct__ew_gpu_paths = argc > 2 && strcmp(argv[2], "gpu-paths") == 0;
  Suite *s = suite_create("elementwise-layout");
  TCase *tc = tcase_create("layout");
  tcase_set_timeout(tc, 600);
  if (ct__ew_gpu_paths) {
    /* The layouts the GPU kernels treat differently: strided rows (EW_SPER=1, GPU group
     * shapes) and the contiguous kernel's remainder launches. */
    tcase_add_test(tc, test_strided_inputs);
    tcase_add_test(tc, test_group_remainder);
  } else if (n_devices_wanted == 1) {
    tcase_add_test(tc, test_broadcast_shapes);
    tcase_add_test(tc, test_broadcast_where_unary_scalar);
    tcase_add_test(tc, test_strided_inputs);
    tcase_add_test(tc, test_out_views_and_in_place);
    tcase_add_test(tc, test_group_remainder);
    tcase_add_test(tc, test_errors);
    TCase *tt = tcase_create("threads");
    tcase_set_timeout(tt, 600);
    tcase_set_tags(tt, "threads"); /* skipped under Oclgrind, which runs one kernel at a time */
    tcase_add_test(tt, test_threads);
    suite_add_tcase(s, tt);
  } else {
    tcase_add_test(tc, test_device_mismatch);
  }
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
