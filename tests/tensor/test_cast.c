/* ct_cast between all 13x13 dtype pairs, bit-exact against the host reference (ct__host_cast),
 * whose semantics are pinned down first by hand-written cases. Inputs: every bit pattern of the
 * 8- and 16-bit types, and edge values plus random bits for the wider ones. NaN results are
 * compared as "is NaN" (payload bits are not part of the contract). */
#include <float.h>
#include <math.h>

#include "ct_test.h"
#include "tensor/tensor.h"
#include "tensor_util.h"

static uint64_t seed = 12345;

/* Builds the input values of dtype t; returns the count. */
static size_t make_inputs(ct_dtype t, void **out) {
  size_t cap = 70000;
  unsigned char *p = malloc(cap * 8);
  size_t n = 0, es = ct_dtype_size(t);
#define PUT(type, v)                     \
  do {                                   \
    type v_ = (type)(v);                 \
    memcpy(p + n * es, &v_, sizeof v_);  \
    n++;                                 \
  } while (0)
  switch (t) {
    case CT_BOOL: PUT(uint8_t, 0); PUT(uint8_t, 1); break;
    case CT_U8:
    case CT_I8:
      for (int i = 0; i < 256; i++) PUT(uint8_t, i);
      break;
    case CT_F16:
    case CT_BF16:
    case CT_I16:
    case CT_U16:
      for (int i = 0; i < 65536; i++) PUT(uint16_t, i);
      break;
    case CT_U32: {
      const uint32_t v[] = {0, 1, 255, 256, 65504, 65520, 65535, 65536, 16777217, 0x7fffffffu, 0x80000000u,
                            0x80000081u, 0xffffff80u, 0xffffffffu};
      for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) PUT(uint32_t, v[i]);
      for (int i = 0; i < 4000; i++) PUT(uint32_t, (uint32_t)(rnd64(&seed) >> (rnd64(&seed) % 32)));
      break;
    }
    case CT_U64: {
      /* Above 2^63 (which int64 can't hold), with ties and near-ties for every float format. */
      const uint64_t v[] = {0, 1, 255, 65535, 0xffffffffu, (UINT64_C(1) << 53) + 1, UINT64_C(1) << 63,
                            (UINT64_C(1) << 63) + 1, (UINT64_C(1) << 63) + (UINT64_C(1) << 39),
                            (UINT64_C(1) << 63) + (UINT64_C(1) << 39) + 1, (UINT64_C(1) << 63) + (UINT64_C(1) << 10),
                            (UINT64_C(1) << 63) + (UINT64_C(1) << 10) + 1, UINT64_MAX, UINT64_MAX - 1024,
                            UINT64_MAX - 2048};
      for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) PUT(uint64_t, v[i]);
      for (int i = 0; i < 4000; i++) PUT(uint64_t, rnd64(&seed) >> (rnd64(&seed) % 64));
      break;
    }
    case CT_I32: {
      const int64_t v[] = {0, 1, -1, 127, 128, 255, 256, 257, 259, -128, -129, 2047, 2048, 2049, 2051, 4097,
                           65504, 65519, 65520, 65535, -65520, 16777217, 16777219, -16777217,
                           INT32_MAX, INT32_MIN, INT32_MAX - 64, INT32_MAX - 63, 0x01018000, 0x01008001};
      for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) PUT(int32_t, v[i]);
      for (int i = 0; i < 4000; i++) PUT(int32_t, (int32_t)(rnd64(&seed) >> (rnd64(&seed) % 32)));
      break;
    }
    case CT_I64: {
      const int64_t v[] = {0, 1, -1, 255, 256, -129, 65519, 65520, INT32_MAX, (int64_t)INT32_MAX + 1,
                           INT64_MAX, INT64_MIN, INT64_MIN + 1, (INT64_C(1) << 53) + 1,
                           (INT64_C(1) << 60) + (INT64_C(1) << 52) + 1, (INT64_C(1) << 60) + (INT64_C(1) << 52),
                           -((INT64_C(1) << 60) + (INT64_C(1) << 52) + 1), (INT64_C(1) << 24) + 1,
                           (INT64_C(1) << 40) + (INT64_C(1) << 16) + 1, (INT64_C(1) << 40) + (INT64_C(1) << 16),
                           INT64_MAX - 1024, (INT64_C(1) << 62) + 1};
      for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) PUT(int64_t, v[i]);
      for (int i = 0; i < 4000; i++) PUT(int64_t, (int64_t)(rnd64(&seed) >> (rnd64(&seed) % 64)));
      break;
    }
    case CT_F32: {
      const float v[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1.5f, 2.5f, -2.5f, -0.9f, 127.9f, 128.0f, -128.9f,
                         -129.0f, 255.5f, 256.0f, 2147483520.0f, 2147483648.0f, 3e9f, -3e9f, 9.2233715e18f,
                         9.223372e18f, -9.223373e18f, 1e30f, -1e30f, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-40f,
                         -1e-45f, 65504.0f, 65519.996f, 65520.0f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f,
                         INFINITY, -INFINITY, NAN, 3.3895314e38f, 3.3961776e38f, 1.0000001f, 1.00390625f};
      for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) PUT(float, v[i]);
      for (int i = 0; i < 20000; i++) PUT(uint32_t, rnd64(&seed));
      for (int i = 0; i < 4000; i++) PUT(float, ldexp((double)(int32_t)rnd64(&seed), (int)(rnd64(&seed) % 60) - 40));
      break;
    }
    case CT_F64: {
      const double v[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, -0.9, 255.5, 256.0, -129.0,
                          2147483647.0, 2147483647.9, 2147483648.0, -2147483648.9, -2147483649.0,
                          9223372036854775807.0, 9223372036854774784.0, -9223372036854775808.0,
                          -9223372036854777856.0, 1e300, -1e300, DBL_MAX, DBL_MIN, 4.9e-324,
                          65504.0, 65519.99999999999, 65520.0, 5.960464477539063e-8, 2.9802322387695312e-8,
                          2.9802322387695313e-8, FLT_MAX, 3.4028235677973366e38, 3.4028235677973362e38,
                          1.0000000596046448, 1.0000000596046449, 1.00390625, 1.0039062500000002,
                          1.401298464324817e-45, 7.006492321624085e-46, 7.006492321624086e-46,
                          3.3961775292304957e38, 9.183549615799121e-41, INFINITY, -INFINITY, NAN};
      for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) PUT(double, v[i]);
      for (int i = 0; i < 20000; i++) PUT(uint64_t, rnd64(&seed));
      for (int i = 0; i < 4000; i++) PUT(double, ldexp((double)(int64_t)rnd64(&seed), (int)(rnd64(&seed) % 200) - 150));
      break;
    }
  }
#undef PUT
  *out = p;
  return n;
}

static int is_nan_bits(ct_dtype t, const void *p) {
  return ct_dtype_is_floating_point(t) && isnan(ct__host_load_double(t, p));
}

START_TEST(test_host_reference_spots) {
  /* The documented semantics, by hand: the reference the device is held to. */
  unsigned char b[8];
  ct__host_store_double(CT_I32, b, 2147483648.0);
  ck_assert_int_eq(*(int32_t *)b, INT32_MAX);
  ct__host_store_double(CT_I32, b, -1e20);
  ck_assert_int_eq(*(int32_t *)b, INT32_MIN);
  ct__host_store_double(CT_I64, b, 1e19);
  ck_assert(*(int64_t *)b == INT64_MAX);
  ct__host_store_double(CT_I64, b, NAN);
  ck_assert(*(int64_t *)b == 0);
  ct__host_store_double(CT_U8, b, -3.7);
  ck_assert_int_eq(b[0], 0);
  ct__host_store_double(CT_I8, b, -3.7);
  ck_assert_int_eq((int8_t)b[0], -3);
  ct__host_store_double(CT_BOOL, b, NAN);
  ck_assert_int_eq(b[0], 1);
  ct__host_store_double(CT_BOOL, b, -0.0);
  ck_assert_int_eq(b[0], 0);
  ct__host_store_int(CT_U8, b, 300);
  ck_assert_int_eq(b[0], 44);
  ct__host_store_int(CT_I8, b, 200);
  ck_assert_int_eq((int8_t)b[0], -56);
  ct__host_store_int(CT_I32, b, INT64_C(0x100000005));
  ck_assert_int_eq(*(int32_t *)b, 5);
  /* 2^60 + 2^52 + 1 rounds up to 2^60 + 2^53 in bf16 (a naive i64->f64->bf16 path rounds down) */
  ct__host_store_int(CT_BF16, b, (INT64_C(1) << 60) + (INT64_C(1) << 52) + 1);
  ck_assert_float_eq(ct_bf16_to_f32(*(uint16_t *)b), ldexpf(1.0f, 60) + ldexpf(1.0f, 53));
  ct__host_store_int(CT_BF16, b, (INT64_C(1) << 60) + (INT64_C(1) << 52));
  ck_assert_float_eq(ct_bf16_to_f32(*(uint16_t *)b), ldexpf(1.0f, 60));
  ct__host_store_int(CT_F64, b, INT64_MAX);
  ck_assert(*(double *)b == 9223372036854775808.0);
  ct__host_store_int(CT_F16, b, 65520);
  ck_assert(isinf(ct_f16_to_f32(*(uint16_t *)b)));
  ct__host_store_int(CT_F16, b, 65519);
  ck_assert_float_eq(ct_f16_to_f32(*(uint16_t *)b), 65504.0f);
  ct__host_store_int(CT_F16, b, 2049);
  ck_assert_float_eq(ct_f16_to_f32(*(uint16_t *)b), 2048.0f);
  ct__host_store_int(CT_F16, b, 2051);
  ck_assert_float_eq(ct_f16_to_f32(*(uint16_t *)b), 2052.0f);
  /* f64 -> f16 rounds once: 1 + 2^-11 + 2^-40 is above the midpoint, so it rounds up */
  ct__host_store_double(CT_F16, b, 1.0 + ldexp(1, -11) + ldexp(1, -40));
  ck_assert_float_eq(ct_f16_to_f32(*(uint16_t *)b), 1.0f + ldexpf(1, -10));
  ct__host_store_double(CT_F16, b, 1.0 + ldexp(1, -11));
  ck_assert_float_eq(ct_f16_to_f32(*(uint16_t *)b), 1.0f);
  /* f16 subnormals: 2^-25 is half the smallest, ties to even (0); a bit more rounds up */
  ct__host_store_double(CT_F16, b, ldexp(1, -25));
  ck_assert_int_eq(*(uint16_t *)b, 0);
  ct__host_store_double(CT_F16, b, ldexp(1, -25) * 1.0000001);
  ck_assert_int_eq(*(uint16_t *)b, 1);
  ct__host_store_double(CT_BF16, b, 1e39);
  ck_assert(isinf(ct_bf16_to_f32(*(uint16_t *)b)));
  ct__host_store_double(CT_F32, b, 1e39);
  ck_assert(isinf(*(float *)b));
  /* The dtypes added later: i16 wraps and saturates like the others; u64 above 2^63 keeps its
   * unsigned value into floats (2^64 - 1 rounds to 2^64), floats saturate at 0 and 2^64 - 1. */
  ct__host_store_int(CT_I16, b, 40000);
  ck_assert_int_eq(*(int16_t *)b, 40000 - 65536);
  ct__host_store_double(CT_I16, b, -1e9);
  ck_assert_int_eq(*(int16_t *)b, INT16_MIN);
  ct__host_store_double(CT_U16, b, -5.0);
  ck_assert_int_eq(*(uint16_t *)b, 0);
  ct__host_store_double(CT_U32, b, 5e9);
  ck_assert(*(uint32_t *)b == UINT32_MAX);
  ct__host_store_double(CT_U64, b, 1e30);
  ck_assert(*(uint64_t *)b == UINT64_MAX);
  ct__host_store_double(CT_U64, b, 9223372036854775808.0 * 1.5);
  ck_assert(*(uint64_t *)b == (UINT64_C(3) << 62));
  uint64_t big = UINT64_MAX;
  ct__host_cast(CT_F64, b, CT_U64, &big);
  ck_assert(*(double *)b == 18446744073709551616.0);
  ct__host_cast(CT_I32, b, CT_U64, &big);
  ck_assert_int_eq(*(int32_t *)b, -1);
  /* bool sources are 0/1 whatever byte they hold */
  uint8_t two = 2;
  ct__host_cast(CT_I32, b, CT_BOOL, &two);
  ck_assert_int_eq(*(int32_t *)b, 1);
}
END_TEST

START_TEST(test_cast_all_pairs) {
  ct_device *d = ct_test_device();
  int failures = 0;
  for (int si = 0; si < CT_DTYPE_COUNT; si++) {
    ct_dtype st = all_dtypes[si];
    if (!dtype_ok(d, st)) continue;
    void *in;
    size_t n = make_inputs(st, &in);
    size_t ses = ct_dtype_size(st);
    ct_tensor *x;
    ck_assert_ct_ok(ct_from_host(&x, d, st, 1, (int64_t[]){(int64_t)n}, in));
    for (int di = 0; di < CT_DTYPE_COUNT; di++) {
      ct_dtype dt = all_dtypes[di];
      if (!dtype_ok(d, dt)) continue;
      size_t des = ct_dtype_size(dt);
      ct_tensor *y;
      ck_assert_ct_ok(ct_cast(&y, x, dt));
      ck_assert_int_eq(ct_tensor_dtype(y), dt);
      ck_assert_ptr_ne(ct__tensor_mem(y) == ct__tensor_mem(x) && ct__tensor_byte_offset(y) == ct__tensor_byte_offset(x)
                           ? NULL : y, NULL);
      unsigned char *got = read_all(y);
      ck_assert_ptr_nonnull(got);
      int bad = 0;
      for (size_t i = 0; i < n && bad < 5; i++) {
        unsigned char want[8];
        ct__host_cast(dt, want, st, (unsigned char *)in + i * ses);
        const void *g = got + i * des;
        int ok = memcmp(want, g, des) == 0 || (is_nan_bits(dt, want) && is_nan_bits(dt, g));
        if (!ok) {
          uint64_t sv = 0, wv = 0, gv = 0;
          memcpy(&sv, (unsigned char *)in + i * ses, ses);
          memcpy(&wv, want, des);
          memcpy(&gv, g, des);
          fprintf(stderr, "cast %s->%s input %zu bits 0x%llx (%.17g): want 0x%llx got 0x%llx\n", ct_dtype_name(st),
                  ct_dtype_name(dt), i, (unsigned long long)sv,
                  ct__host_load_double(st, (unsigned char *)in + i * ses), (unsigned long long)wv,
                  (unsigned long long)gv);
          bad++;
        }
      }
      failures += bad;
      free(got);
      ct_release(y);
    }
    ct_release(x);
    free(in);
  }
  ck_assert_msg(failures == 0, "%d cast mismatches (listed on stderr)", failures);
}
END_TEST

START_TEST(test_cast_strided_and_errors) {
  ct_device *d = ct_test_device();
  float host[6] = {1.5f, -2.5f, 300.0f, 4.0f, -5.9f, 6.0f};
  ct_tensor *x, *v, *y;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 2, (int64_t[]){2, 3}, host));
  ck_assert_ct_ok(ct_transpose(&v, x, 0, 1));
  ck_assert_ct_ok(ct_cast(&y, v, CT_U8));
  uint8_t got[6];
  ck_assert_ct_ok(ct_to_host(y, got, 6));
  const uint8_t want[6] = {1, 4, 0, 0, 255, 6};
  ck_assert_mem_eq(got, want, 6);
  ct_release(y);
  /* Same dtype: still a copy, contiguous. */
  ck_assert_ct_ok(ct_cast(&y, x, CT_F32));
  ck_assert_ptr_ne(y, x);
  ct_release(y);
  ck_assert_ct_status(ct_cast(&y, v, (ct_dtype)77), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(y);
  ck_assert_ct_status(ct_cast(NULL, v, CT_U8), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_cast(&y, NULL, CT_U8), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_contiguous(NULL, v), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_contiguous(&y, NULL), CT_ERR_INVALID_ARGUMENT);
  /* contiguous of a contiguous tensor is the same tensor */
  ck_assert_ct_ok(ct_contiguous(&y, x));
  ck_assert_ptr_eq(y, x);
  ct_release(y);
  ct_release(v);
  ct_release(x);
}
END_TEST

START_TEST(test_copy_broadcast_cast) {
  ct_device *d = ct_test_device();
  for (int k = 0; k < CT_DTYPE_COUNT; k++) {
    ct_dtype t = all_dtypes[k];
    if (!dtype_ok(d, t)) continue;
    /* dst: the transpose of a [4, 3] tensor (shape [3, 4]); src: i32 [4] broadcast over rows. */
    ct_tensor *base, *dst, *src;
    ck_assert_ct_ok(ct_zeros(&base, d, t, 2, (int64_t[]){4, 3}));
    ck_assert_ct_ok(ct_transpose(&dst, base, 0, 1));
    int32_t s[4] = {0, 1, 2, 3};
    ck_assert_ct_ok(ct_from_host(&src, d, CT_I32, 1, (int64_t[]){4}, s));
    ck_assert_ct_ok(ct_copy(dst, src));
    size_t es = ct_dtype_size(t);
    unsigned char got[12 * 8], want[8];
    ck_assert_ct_ok(ct_to_host(base, got, sizeof got));
    /* base (i, j) = dst (j, i) = src[i] */
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 3; j++) {
        ct__host_store_int(t, want, s[i]);
        ck_assert_msg(memcmp(got + (size_t)(i * 3 + j) * es, want, es) == 0, "%s (%d, %d)", ct_dtype_name(t), i, j);
      }
    ct_release(src);
    /* A 0-d source fills. */
    ck_assert_ct_ok(ct_full(&src, d, CT_F64 == t ? CT_F64 : CT_F32, 0, NULL, 2.0));
    ck_assert_ct_ok(ct_copy(dst, src));
    ck_assert_ct_ok(ct_to_host(base, got, sizeof got));
    ct__host_store_int(t, want, 2);
    for (int i = 0; i < 12; i++) ck_assert(memcmp(got + (size_t)i * es, want, es) == 0);
    ct_release(src);
    /* Shape errors print both shapes. */
    ck_assert_ct_ok(ct_zeros(&src, d, t, 1, (int64_t[]){3}));
    ck_assert_ct_status(ct_copy(dst, src), CT_ERR_SHAPE_MISMATCH);
    ck_assert_error_contains("[3]");
    ck_assert_error_contains("[3, 4]");
    ct_release(src);
    ck_assert_ct_ok(ct_zeros(&src, d, t, 3, (int64_t[]){2, 3, 4}));
    ck_assert_ct_status(ct_copy(dst, src), CT_ERR_SHAPE_MISMATCH);
    ct_release(src);
    ct_tensor *row, *wide;
    ck_assert_ct_ok(ct_zeros(&row, d, t, 2, (int64_t[]){1, 4}));
    ck_assert_ct_ok(ct_expand(&wide, row, 2, (int64_t[]){3, 4}));
    ck_assert_ct_status(ct_copy(wide, dst), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("stride 0 at dim 0");
    ct_release(wide);
    ct_release(row);
    ck_assert_ct_status(ct_copy(NULL, dst), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("'dst'");
    ck_assert_ct_status(ct_copy(dst, NULL), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("'src'");
    ct_release(dst);
    ct_release(base);
  }
}
END_TEST

START_TEST(test_copy_overlapping) {
  ct_device *d = ct_test_device();
  int32_t host[16], got[16];
  for (int i = 0; i < 16; i++) host[i] = i;
  ct_tensor *x, *t;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 2, (int64_t[]){4, 4}, host));
  ck_assert_ct_ok(ct_transpose(&t, x, 0, 1));
  ck_assert_ct_ok(ct_copy(x, t));  /* in-place transpose: needs a temporary */
  ck_assert_ct_ok(ct_to_host(x, got, sizeof got));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) ck_assert_int_eq(got[i * 4 + j], host[j * 4 + i]);
  ct_release(t);
  /* Shifted overlap: x[1:] = x[:-1] (flattened) */
  ct_tensor *f, *a, *b;
  ck_assert_ct_ok(ct_from_host(&f, d, CT_I32, 1, (int64_t[]){16}, host));
  ck_assert_ct_ok(ct_slice(&a, f, 0, 1, 16, 1));
  ck_assert_ct_ok(ct_slice(&b, f, 0, 0, 15, 1));
  ck_assert_ct_ok(ct_copy(a, b));
  ck_assert_ct_ok(ct_to_host(f, got, sizeof got));
  ck_assert_int_eq(got[0], 0);
  for (int i = 1; i < 16; i++) ck_assert_int_eq(got[i], i - 1);
  ct_release(a);
  ct_release(b);
  ct_release(f);
  ct_release(x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor-cast");
  TCase *tc = tcase_create("cast");
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, test_host_reference_spots);
  tcase_add_test(tc, test_cast_all_pairs);
  tcase_add_test(tc, test_cast_strided_and_errors);
  tcase_add_test(tc, test_copy_broadcast_cast);
  tcase_add_test(tc, test_copy_overlapping);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
