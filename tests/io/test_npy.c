/* .npy: the header parser on hostile input, NumPy-written fixtures loaded bit-exactly, round
 * trips for every dtype and layout, file errors, and atomic saves. */
#include <math.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "io/io.h"
#include "test_io.h"

/* An .npy image: magic, version major.0, the header length, the header text, then data. */
static size_t npy_build(uint8_t *buf, int major, const char *header, const void *data, size_t dn) {
  size_t hn = strlen(header), pre = major == 1 ? 10 : 12;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)major;
  buf[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (uint8_t)(hn >> (8 * i));
  memcpy(buf + pre, header, hn);
  if (dn) memcpy(buf + pre + hn, data, dn);
  return pre + hn + dn;
}

/* Parses buf as a whole file; asserts the status and that the message has every substring. */
static void expect_parse(const uint8_t *buf, size_t n, ct_status want, const char *sub1, const char *sub2) {
  struct ct__npy_header h;
  ct_clear_error();
  ck_assert_ct_status(ct__npy_parse_header(&h, buf, n, n, "hostile.npy"), want);
  if (want == CT_OK) return;
  ck_assert_error_contains("ct_npy_load: 'hostile.npy'");
  if (sub1) ck_assert_error_contains(sub1);
  if (sub2) ck_assert_error_contains(sub2);
}

static uint8_t zeros[4096];

START_TEST(test_parse_valid_headers) {
  uint8_t buf[512] = {0};
  struct ct__npy_header h;
  size_t n = npy_build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }   \n", zeros, 60);
  ck_assert_ct_ok(ct__npy_parse_header(&h, buf, n, n, "x.npy"));
  ck_assert_int_eq(h.version, 1);
  ck_assert_int_eq(h.dtype, CT_F32);
  ck_assert_int_eq(h.ndim, 2);
  ck_assert_int_eq(h.shape[0], 3);
  ck_assert_int_eq(h.shape[1], 5);
  ck_assert_int_eq(h.fortran_order, 0);
  ck_assert_int_eq(h.swap, 0);
  ck_assert_uint_eq(h.data_bytes, 60);
  ck_assert_uint_eq(h.data_offset, n - 60);
  /* Keys in any order, double quotes, Python 2 long suffixes, no trailing comma, v2 and v3. */
  n = npy_build(buf, 2, "{\"shape\": (2L, 3L), \"fortran_order\": True, \"descr\": \">i8\"}\n", zeros, 48);
  ck_assert_ct_ok(ct__npy_parse_header(&h, buf, n, n, "x.npy"));
  ck_assert_int_eq(h.dtype, CT_I64);
  ck_assert_int_eq(h.swap, 1);
  ck_assert_int_eq(h.fortran_order, 1);
  ck_assert_int_eq(h.version, 2);
  n = npy_build(buf, 3, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }\n", zeros, 1);
  ck_assert_ct_ok(ct__npy_parse_header(&h, buf, n, n, "x.npy"));
  ck_assert_int_eq(h.ndim, 0);
  ck_assert_int_eq(h.dtype, CT_BOOL);
  n = npy_build(buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (0, 7), }\n", NULL, 0);
  ck_assert_ct_ok(ct__npy_parse_header(&h, buf, n, n, "x.npy"));
  ck_assert_uint_eq(h.data_bytes, 0);
  n = npy_build(buf, 1, "{'descr': '=u1', 'fortran_order': False, 'shape': (4,), }\n", zeros, 4);
  ck_assert_ct_ok(ct__npy_parse_header(&h, buf, n, n, "x.npy"));
  ck_assert_int_eq(h.dtype, CT_U8);
}
END_TEST

START_TEST(test_format_header_matches_parser) {
  char hdr[1024];
  int64_t shapes[3][3] = {{3, 5, 0}, {7, 0, 0}, {2, 3, 4}};
  int ndims[3] = {2, 1, 3};
  for (int d = 0; d < CT_IO_NDTYPES; d++) {
    ct_dtype t = ct_io_all_dtypes[d];
    for (int s = 0; s < 3; s++) {
      size_t n = ct__npy_format_header(hdr, sizeof hdr, t, ndims[s], shapes[s]);
      if (t == CT_BF16) {
        ck_assert_uint_eq(n, 0);
        continue;
      }
      ck_assert_uint_eq(n % 64, 0);
      ck_assert_int_eq(hdr[n - 1], '\n');
      int64_t numel = 1;
      for (int i = 0; i < ndims[s]; i++) numel *= shapes[s][i];
      uint8_t file[2048];
      memcpy(file, hdr, n);
      memset(file + n, 0, (size_t)numel * ct_dtype_size(t));
      struct ct__npy_header h;
      ck_assert_ct_ok(ct__npy_parse_header(&h, file, n + (size_t)numel * ct_dtype_size(t),
                                           n + (uint64_t)numel * ct_dtype_size(t), "x.npy"));
      ck_assert_int_eq(h.dtype, t);
      ck_assert_int_eq(h.ndim, ndims[s]);
      for (int i = 0; i < ndims[s]; i++) ck_assert_int_eq(h.shape[i], shapes[s][i]);
    }
  }
  /* The exact text numpy.save writes for a (3,) f32 array. */
  int64_t three = 3;
  size_t n = ct__npy_format_header(hdr, sizeof hdr, CT_F32, 1, &three);
  ck_assert_uint_eq(n, 128);
  ck_assert(memcmp(hdr + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 57) == 0);
}
END_TEST

START_TEST(test_hostile_preamble) {
  uint8_t buf[512] = {0};
  expect_parse(buf, 0, CT_ERR_FORMAT, "0 bytes, shorter than", NULL);
  memcpy(buf, "\x93NUMP", 5);
  expect_parse(buf, 5, CT_ERR_FORMAT, "5 bytes", NULL);
  size_t n = npy_build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", zeros, 4);
  buf[0] = 'P';
  buf[1] = 'K';
  expect_parse(buf, n, CT_ERR_FORMAT, "bad magic", "50 4b 55 4d 50 59");
  buf[0] = 0x93;
  buf[1] = 'N';
  buf[6] = 4;
  expect_parse(buf, n, CT_ERR_FORMAT, "version 4.0", NULL);
  buf[6] = 1;
  buf[7] = 1;
  expect_parse(buf, n, CT_ERR_FORMAT, "version 1.1", NULL);
  buf[7] = 0;
  expect_parse(buf, 9, CT_ERR_FORMAT, "truncated", "needs 10 bytes");
  /* A header length past the end of the file, and one over the 100 MB limit. */
  buf[8] = 0xff;
  buf[9] = 0x7f;
  expect_parse(buf, n, CT_ERR_FORMAT, "header is 32767 bytes", "truncated");
  n = npy_build(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", zeros, 4);
  buf[8] = buf[9] = buf[10] = buf[11] = 0xff;
  expect_parse(buf, n, CT_ERR_FORMAT, "header length 4294967295 exceeds the limit", NULL);
  buf[8] = 0x01, buf[9] = 0xe1, buf[10] = 0xf5, buf[11] = 0x05; /* 100000001 */
  expect_parse(buf, n, CT_ERR_FORMAT, "header length 100000001 exceeds", NULL);
  /* Only the preamble present although the header is announced. */
  struct ct__npy_header h;
  n = npy_build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", zeros, 4);
  ck_assert_ct_status(ct__npy_parse_header(&h, buf, 20, n, "p.npy"), CT_ERR_FORMAT);
  ck_assert_error_contains("only 20 bytes are present");
}
END_TEST

static void expect_header(const char *header, size_t dn, ct_status want, const char *sub1, const char *sub2) {
  uint8_t buf[4096];
  size_t n = npy_build(buf, 1, header, zeros, dn);
  expect_parse(buf, n, want, sub1, sub2);
}

START_TEST(test_hostile_header_dict) {
  expect_header("", 0, CT_ERR_FORMAT, "expected '{'", NULL);
  expect_header("[1, 2]\n", 0, CT_ERR_FORMAT, "expected '{'", "header: \"[1, 2]\\x0a\"");
  expect_header("{}\n", 0, CT_ERR_FORMAT, "lacks 'descr'", NULL);
  expect_header("{'descr': '<f4', 'shape': (1,)}\n", 4, CT_ERR_FORMAT, "lacks 'fortran_order'", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False}\n", 4, CT_ERR_FORMAT, "lacks 'shape'", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}\n", 4, CT_ERR_FORMAT,
                "unexpected key 'extra'", NULL);
  expect_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n", 4,
                CT_ERR_FORMAT, "key 'descr' appears twice", NULL);
  /* Wrong-typed values. */
  expect_header("{'descr': 5, 'fortran_order': False, 'shape': (1,)}\n", 4, CT_ERR_FORMAT,
                "a quoted dtype string", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}\n", 4, CT_ERR_FORMAT,
                "True or False", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}\n", 4, CT_ERR_FORMAT,
                "True or False", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}\n", 4, CT_ERR_FORMAT,
                "'(' starting the shape", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1)}\n", 4, CT_ERR_FORMAT,
                "one-element tuple", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}\n", 4, CT_ERR_FORMAT,
                "a dimension (integer)", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}\n", 4, CT_ERR_FORMAT,
                "',' or ')'", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } trailing\n", 4, CT_ERR_FORMAT,
                "only spaces after", NULL);
  expect_header("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}\n", 4, CT_ERR_FORMAT,
                "invalid dtype '<f4, '", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)\n", 4, CT_ERR_FORMAT, "',' or '}'", NULL);
  expect_header("{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}\n", 4, CT_ERR_FORMAT, "',' or '}'", NULL);
  /* Non-ASCII bytes are quoted escaped. */
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), \xff}\n", 4, CT_ERR_FORMAT,
                "\\xff", NULL);
}
END_TEST

START_TEST(test_hostile_dtypes_and_shapes) {
  expect_header("{'descr': '<q7', 'fortran_order': False, 'shape': (1,)}\n", 4, CT_ERR_FORMAT,
                "invalid dtype '<q7'", NULL);
  expect_header("{'descr': 'f4', 'fortran_order': False, 'shape': (1,)}\n", 4, CT_ERR_FORMAT,
                "invalid dtype 'f4'", NULL);
  expect_header("{'descr': '|i4', 'fortran_order': False, 'shape': (1,)}\n", 4, CT_ERR_FORMAT,
                "byte order '|' is only for one-byte types", NULL);
  expect_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}\n", 8, CT_ERR_UNSUPPORTED,
                "unsupported dtype '<c8'", NULL);
  expect_header("{'descr': '<c16', 'fortran_order': False, 'shape': (1,)}\n", 16, CT_ERR_UNSUPPORTED,
                "unsupported dtype '<c16'", NULL);
  expect_header("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}\n", 8, CT_ERR_UNSUPPORTED, "'|O'", NULL);
  expect_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}\n", 4, CT_ERR_UNSUPPORTED,
                "structured", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}\n", 4,
                CT_ERR_UNSUPPORTED, "more than 8 dims", NULL);
  /* Element counts and byte counts past 2^63, dims past 2^63. */
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}\n", 4,
                CT_ERR_FORMAT, "shape [4294967296, 4294967296] has more than 2^63 elements", NULL);
  expect_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}\n", 8,
                CT_ERR_FORMAT, "more than 2^63 bytes", NULL);
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}\n", 4,
                CT_ERR_FORMAT, "a dimension below 2^63", NULL);
  /* A zero dim makes the array empty even next to a huge one. */
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 9223372036854775807)}\n", 0, CT_OK,
                NULL, NULL);
  /* Data shorter or longer than shape x dtype. */
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5)}\n", 59, CT_ERR_FORMAT,
                "is truncated: shape [3, 5] of f32 needs 60 data bytes", "the file has 59");
  expect_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5)}\n", 61, CT_ERR_FORMAT,
                "has trailing bytes", "the file has 61");
}
END_TEST

/* ---- with a device ---- */

START_TEST(test_numpy_fixtures) {
  ct_device *d = ct_test_device();
  ct_io_check_npy_fixtures(d);
}
END_TEST

START_TEST(test_round_trip_every_dtype) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  int64_t shape[2] = {3, 5};
  for (int i = 0; i < CT_IO_NDTYPES; i++) {
    ct_dtype t = ct_io_all_dtypes[i];
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    ct_tensor *x = ct_io_tensor(d, t, 2, shape), *y = NULL;
    const char *path = ct_io_path(dir, t == CT_BF16 ? "bf16.npy" : "x.npy");
    if (t == CT_BF16) {
      ck_assert_ct_status(ct_npy_save(path, x), CT_ERR_UNSUPPORTED);
      ck_assert_error_contains("bf16 has no NumPy dtype");
      ck_assert_error_contains("ct_cast");
      ck_assert_int_eq(access(path, F_OK), -1);
    } else {
      ck_assert_ct_ok(ct_npy_save(path, x));
      ck_assert_ct_ok(ct_npy_load(&y, path, d));
      ct_io_assert_values(y, t, 2, shape);
    }
    ct_release(y);
    ct_release(x);
  }
  ct_io_rmdir(dir);
}
END_TEST

START_TEST(test_round_trip_views_scalars_empty) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  int64_t shape[2] = {3, 5}, tshape[2] = {5, 3};
  ct_tensor *x = ct_io_tensor(d, CT_I32, 2, shape), *xt = NULL, *y = NULL, *want = NULL;
  /* A transposed view saves in C order of its own shape. */
  ck_assert_ct_ok(ct_transpose(&xt, x, 0, 1));
  ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, "t.npy"), xt));
  ck_assert_ct_ok(ct_npy_load(&y, ct_io_path(dir, "t.npy"), d));
  ck_assert_ct_ok(ct_contiguous(&want, xt));
  int32_t expect[15];
  ck_assert_ct_ok(ct_to_host(want, expect, sizeof expect));
  ct_io_assert_bytes(y, CT_I32, 2, tshape, expect);
  ct_release(y);
  ct_release(want);
  /* A slice with a step. */
  ct_tensor *s = NULL;
  ck_assert_ct_ok(ct_slice(&s, x, 1, 0, 5, 2));
  ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, "s.npy"), s));
  ck_assert_ct_ok(ct_npy_load(&y, ct_io_path(dir, "s.npy"), d));
  int32_t sw[9];
  ck_assert_ct_ok(ct_to_host(s, sw, sizeof sw));
  int64_t sshape[2] = {3, 3};
  ct_io_assert_bytes(y, CT_I32, 2, sshape, sw);
  ct_release(y);
  ct_release(s);
  /* Scalar and empty. */
  ct_tensor *sc = ct_io_tensor(d, CT_F16, 0, NULL);
  ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, "sc.npy"), sc));
  ck_assert_ct_ok(ct_npy_load(&y, ct_io_path(dir, "sc.npy"), d));
  ct_io_assert_values(y, CT_F16, 0, NULL);
  ct_release(y);
  ct_release(sc);
  int64_t eshape[3] = {2, 0, 3};
  ct_tensor *e = NULL;
  ck_assert_ct_ok(ct_empty(&e, d, CT_U8, 3, eshape));
  ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, "e.npy"), e));
  ck_assert_ct_ok(ct_npy_load(&y, ct_io_path(dir, "e.npy"), d));
  ck_assert_int_eq(ct_tensor_ndim(y), 3);
  ck_assert_int_eq(ct_numel(y), 0);
  ck_assert_int_eq(ct_tensor_shape(y)[2], 3);
  ct_release(y);
  ct_release(e);
  ct_release(xt);
  ct_release(x);
  ct_io_rmdir(dir);
}
END_TEST

/* ct_npy_load_as: an f64 array and an i32 array arrive as f32 (the route onto a device without
 * cl_khr_fp64); bad targets are refused. The files are written byte by byte (no f64 on the device
 * needed). */
static void npy_write(const char *path, ct_dtype dt, int64_t n, const void *v) {
  char hdr[256];
  size_t hl = ct__npy_format_header(hdr, sizeof hdr, dt, 1, &n);
  ck_assert_uint_gt(hl, 0);
  size_t bytes = (size_t)n * ct_dtype_size(dt);
  unsigned char *buf = malloc(hl + bytes);
  memcpy(buf, hdr, hl);
  memcpy(buf + hl, v, bytes);
  ct_io_write_file(path, buf, hl + bytes);
  free(buf);
}

START_TEST(test_load_as) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  const double dv[3] = {0.1, -3.0, -1e39};
  const int32_t iv[3] = {INT32_MIN, 16777217, 5};
  npy_write(ct_io_path(dir, "d.npy"), CT_F64, 3, dv);
  npy_write(ct_io_path(dir, "i.npy"), CT_I32, 3, iv);
  ct_tensor *t = NULL;
  float f[3];
  ck_assert_ct_ok(ct_npy_load_as(&t, ct_io_path(dir, "d.npy"), d, CT_F32));
  ck_assert_int_eq(ct_tensor_dtype(t), CT_F32);
  ck_assert_ct_ok(ct_to_host(t, f, sizeof f));
  ck_assert(f[0] == 0.1f && f[1] == -3.0f && isinf(f[2]) && f[2] < 0);
  ct_release(t);
  ck_assert_ct_ok(ct_npy_load_as(&t, ct_io_path(dir, "i.npy"), d, CT_F32));
  ck_assert_ct_ok(ct_to_host(t, f, sizeof f));
  ck_assert(f[0] == -2147483648.0f && f[1] == 16777216.0f && f[2] == 5.0f); /* 2^24 + 1 rounds to even */
  ct_release(t);
  uint16_t h[3];
  ck_assert_ct_ok(ct_npy_load_as(&t, ct_io_path(dir, "d.npy"), d, CT_BF16));
  ck_assert_int_eq(ct_tensor_dtype(t), CT_BF16);
  ck_assert_ct_ok(ct_to_host(t, h, sizeof h));
  ck_assert(ct_bf16_to_f32(h[1]) == -3.0f);
  ct_release(t);
  ck_assert_ct_status(ct_npy_load_as(&t, ct_io_path(dir, "d.npy"), d, CT_I64), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(t);
  ck_assert_error_contains("ct_npy_load_as: can convert to a floating-point dtype only");
  ck_assert_ct_status(ct_npy_load_as(&t, ct_io_path(dir, "absent.npy"), d, CT_F32), CT_ERR_IO);
  ct_io_rmdir(dir);
}
END_TEST

START_TEST(test_bool_bytes_normalized) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  uint8_t buf[512], data[4] = {0, 1, 2, 255};
  size_t n = npy_build(buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }\n", data, 4);
  ct_io_write_file(ct_io_path(dir, "b.npy"), buf, n);
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_npy_load(&t, ct_io_path(dir, "b.npy"), d));
  const uint8_t want[4] = {0, 1, 1, 1};
  int64_t four = 4;
  ct_io_assert_bytes(t, CT_BOOL, 1, &four, want);
  ct_release(t);
  ct_io_rmdir(dir);
}
END_TEST

START_TEST(test_file_errors) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  ct_tensor *t = (ct_tensor *)1;
  ck_assert_ct_status(ct_npy_load(&t, ct_io_path(dir, "missing.npy"), d), CT_ERR_IO);
  ck_assert_ptr_null(t);
  ck_assert_error_contains("ct_npy_load: cannot open '");
  ck_assert_error_contains("missing.npy': No such file or directory");
  ck_assert_ct_status(ct_npy_load(&t, dir, d), CT_ERR_IO);
  ck_assert_error_contains("Is a directory");
  if (geteuid() != 0) {
    /* Root reads anything, so this case only means something for other users. */
    const char *p = ct_io_path(dir, "secret.npy");
    ct_io_write_file(p, "x", 1);
    chmod(p, 0);
    ck_assert_ct_status(ct_npy_load(&t, p, d), CT_ERR_IO);
    ck_assert_error_contains("Permission denied");
  }
  /* Hostile files through the loader name the path. */
  uint8_t buf[512] = {0};
  size_t n = npy_build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }\n", zeros, 60);
  const char *p = ct_io_path(dir, "short.npy");
  ct_io_write_file(p, buf, n - 1);
  ck_assert_ct_status(ct_npy_load(&t, p, d), CT_ERR_FORMAT);
  ck_assert_error_contains(p);
  ck_assert_error_contains("is truncated");
  ct_io_write_file(p, buf, 3);
  ck_assert_ct_status(ct_npy_load(&t, p, d), CT_ERR_FORMAT);
  ck_assert_error_contains("3 bytes, shorter than");
  ct_io_write_file(p, "", 0);
  ck_assert_ct_status(ct_npy_load(&t, p, d), CT_ERR_FORMAT);
  ck_assert_error_contains("0 bytes");
  /* Argument checks. */
  ck_assert_ct_status(ct_npy_load(NULL, p, d), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_npy_load(&t, NULL, d), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_npy_load(&t, p, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_npy_save(NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  ct_io_rmdir(dir);
}
END_TEST

START_TEST(test_atomic_save) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  int64_t small_shape[1] = {4}, big_shape[1] = {4096};
  ct_tensor *small = ct_io_tensor(d, CT_I32, 1, small_shape), *big = ct_io_tensor(d, CT_F32, 1, big_shape);
  const char *p = ct_io_path(dir, "a.npy");
  ck_assert_ct_ok(ct_npy_save(p, small));
  size_t n0;
  uint8_t *before = ct_io_read_file(p, &n0);

  /* Into a folder that does not exist: CT_ERR_IO naming the temporary and the target. */
  ck_assert_ct_status(ct_npy_save(ct_io_path(dir, "nope/a.npy"), small), CT_ERR_IO);
  ck_assert_error_contains("nope/a.npy");
  ck_assert_error_contains("No such file or directory");

  /* A write that fails half-way (the file size limit: EFBIG) leaves the old file as it was
   * and no temporary file behind. */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 4096;
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ck_assert_ct_status(ct_npy_save(p, big), CT_ERR_IO);
  ck_assert_error_contains("cannot write");
  ck_assert_error_contains("temporary file for '");
  ck_assert_int_eq(ct_io_count_entries(dir), 1);
  size_t n1;
  uint8_t *after = ct_io_read_file(p, &n1);
  ck_assert_uint_eq(n0, n1);
  ck_assert(memcmp(before, after, n0) == 0);
  free(after);
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);

  /* A successful save replaces the file as a whole. */
  ck_assert_ct_ok(ct_npy_save(p, big));
  ct_tensor *y = NULL;
  ck_assert_ct_ok(ct_npy_load(&y, p, d));
  ct_io_assert_values(y, CT_F32, 1, big_shape);
  ck_assert_int_eq(ct_io_count_entries(dir), 1);
  ct_release(y);
  free(before);
  ct_release(small);
  ct_release(big);
  ct_io_rmdir(dir);
}
END_TEST

/* Hostile paths: a FIFO where a file is expected neither hangs a load nor turns into a regular
 * file on a save, a device is never replaced (not even /dev/null, which root could rename
 * over), and a target name near the 255-byte limit still saves (the temporary name is short). */
START_TEST(test_hostile_paths) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  int64_t shape[1] = {4};
  ct_tensor *x = ct_io_tensor(d, CT_I32, 1, shape), *y = (ct_tensor *)1;
  const char *fifo = ct_io_mkfifo(dir, "fifo.npy");
  ck_assert_ct_status(ct_npy_load(&y, fifo, d), CT_ERR_IO);
  ck_assert_ptr_null(y);
  ck_assert_error_contains("it is a FIFO, not a regular file");
  ck_assert_ct_status(ct_npy_save(fifo, x), CT_ERR_IO);
  ck_assert_error_contains("ct_npy_save: refusing to replace '");
  ck_assert_error_contains("fifo.npy': it is a FIFO, not a regular file");
  ct_io_assert_kind(fifo, S_IFIFO);
  ck_assert_ct_status(ct_npy_load(&y, "/dev/null", d), CT_ERR_IO);
  ck_assert_error_contains("it is a character device");

  /* A link to a device is refused too; a link to a regular file is replaced, not followed. */
  const char *link = ct_io_path(dir, "null.npy");
  ck_assert_int_eq(symlink("/dev/null", link), 0);
  ck_assert_ct_status(ct_npy_save(link, x), CT_ERR_IO);
  ck_assert_error_contains("it is a character device, not a regular file");
  ct_io_assert_kind(link, S_IFLNK);
  ck_assert_int_eq(unlink(link), 0);
  const char *file = ct_io_path(dir, "file.npy");
  ct_io_write_file(file, "old", 3);
  ck_assert_int_eq(symlink("file.npy", link), 0);
  ck_assert_ct_ok(ct_npy_save(link, x));
  ct_io_assert_kind(link, S_IFREG);
  size_t n;
  free(ct_io_read_file(file, &n));
  ck_assert_uint_eq(n, 3);
  /* Only after the cases above refused: /dev/null itself stays a device. */
  ck_assert_ct_status(ct_npy_save("/dev/null", x), CT_ERR_IO);
  ck_assert_error_contains("'/dev/null': it is a character device, not a regular file");
  ct_io_assert_kind("/dev/null", S_IFCHR);

  /* 250 bytes: a valid name that "<name>.<pid>.<n>.tmp" would have pushed past 255. */
  char name[251];
  memset(name, 'n', 250);
  memcpy(name + 246, ".npy", 5);
  const char *longp = ct_io_path(dir, name);
  ck_assert_ct_ok(ct_npy_save(longp, x));
  ck_assert_ct_ok(ct_npy_load(&y, longp, d));
  ct_io_assert_values(y, CT_I32, 1, shape);
  ct_release(y);
  ck_assert_int_eq(ct_io_count_entries(dir), 4); /* fifo, link, file, the long one: no temporary */
  ct_release(x);
  ct_io_rmdir(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("io-npy");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, test_parse_valid_headers);
  tcase_add_test(tc, test_format_header_matches_parser);
  tcase_add_test(tc, test_hostile_preamble);
  tcase_add_test(tc, test_hostile_header_dict);
  tcase_add_test(tc, test_hostile_dtypes_and_shapes);
  suite_add_tcase(s, tc);
  tc = tcase_create("load-save");
  tcase_add_test(tc, test_numpy_fixtures);
  tcase_add_test(tc, test_round_trip_every_dtype);
  tcase_add_test(tc, test_round_trip_views_scalars_empty);
  tcase_add_test(tc, test_bool_bytes_normalized);
  tcase_add_test(tc, test_load_as);
  tcase_add_test(tc, test_file_errors);
  tcase_add_test(tc, test_atomic_save);
  tcase_add_test(tc, test_hostile_paths);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
