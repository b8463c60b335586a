/* safetensors: the header parser on hostile input, the reference writer's file loaded
 * bit-exactly, the collection API, round trips, file errors and atomic saves. */
#include <math.h>
#include <signal.h>
#include <sys/resource.h>

#include "io/io.h"
#include "test_io.h"


/* A safetensors image: the 8-byte length of json, json, then dn zero bytes. */
static size_t st_build(uint8_t *buf, const char *json, size_t dn) {
  uint64_t n = strlen(json);
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
  memcpy(buf + 8, json, n);
  memset(buf + 8 + n, 0, dn);
  return 8 + n + dn;
}

static void expect_raw(const uint8_t *buf, size_t n, ct_status want, const char *sub1, const char *sub2) {
  struct ct__st_header h;
  ct_clear_error();
  ck_assert_ct_status(ct__safetensors_parse(&h, buf, n, n, "hostile.safetensors"), want);
  if (want == CT_OK) {
    ct__safetensors_header_free(&h);
    return;
  }
  ck_assert_error_contains("ct_safetensors_load: 'hostile.safetensors'");
  if (sub1) ck_assert_error_contains(sub1);
  if (sub2) ck_assert_error_contains(sub2);
}

static void expect_json(const char *json, size_t dn, ct_status want, const char *sub1, const char *sub2) {
  static uint8_t buf[1 << 17];
  size_t n = st_build(buf, json, dn);
  expect_raw(buf, n, want, sub1, sub2);
}

START_TEST(test_parse_valid) {
  uint8_t buf[1024];
  struct ct__st_header h;
  size_t n = st_build(buf, "{}", 0);
  ck_assert_ct_ok(ct__safetensors_parse(&h, buf, n, n, "x"));
  ck_assert_uint_eq(h.count, 0);
  ck_assert_uint_eq(h.data_offset, 10);
  ct__safetensors_header_free(&h);
  n = st_build(buf,
               "  {\"__metadata__\": {\"k\": \"v\", \"\": \"\"}, \"b\": {\"data_offsets\": [8, 14], "
               "\"shape\": [3], \"dtype\": \"BF16\"},\n \"a\": {\"dtype\": \"I64\", \"shape\": [], "
               "\"data_offsets\": [0, 8]}, \"z\": {\"dtype\": \"BOOL\", \"shape\": [0, 5], "
               "\"data_offsets\": [14, 14]}}   ",
               14);
  ck_assert_ct_ok(ct__safetensors_parse(&h, buf, n, n, "x"));
  ck_assert_uint_eq(h.count, 3);
  ck_assert_str_eq(h.entries[0].name, "b");
  ck_assert_int_eq(h.entries[0].dtype, CT_BF16);
  ck_assert_int_eq(h.entries[0].ndim, 1);
  ck_assert_int_eq(h.entries[0].shape[0], 3);
  ck_assert_uint_eq(h.entries[0].begin, 8);
  ck_assert_uint_eq(h.entries[0].end, 14);
  ck_assert_str_eq(h.entries[1].name, "a");
  ck_assert_int_eq(h.entries[1].ndim, 0);
  ck_assert_int_eq(h.entries[2].dtype, CT_BOOL);
  ck_assert_uint_eq(h.meta_count, 2);
  ck_assert_str_eq(h.meta[0], "k");
  ck_assert_str_eq(h.meta[1], "v");
  ck_assert_str_eq(h.meta[2], "");
  ct__safetensors_header_free(&h);
  /* The reference writer's file. */
  size_t fn;
  uint8_t *file = ct_io_read_file(ct_io_fixture("all.safetensors"), &fn);
  ck_assert_ct_ok(ct__safetensors_parse(&h, file, fn, fn, "all"));
  ck_assert_uint_eq(h.count, CT_IO_NDTYPES + 2);
  ct__safetensors_header_free(&h);
  free(file);
}
END_TEST

START_TEST(test_hostile_length_prefix) {
  uint8_t buf[256] = {0};
  expect_raw(buf, 0, CT_ERR_FORMAT, "0 bytes, shorter than the 8-byte header length", NULL);
  expect_raw(buf, 7, CT_ERR_FORMAT, "7 bytes", NULL);
  size_t n = st_build(buf, "{}", 0);
  for (int i = 0; i < 8; i++) buf[i] = 0xff;
  expect_raw(buf, n, CT_ERR_FORMAT, "header length 18446744073709551615 exceeds the limit of 100000000", NULL);
  buf[0] = 0x01, buf[1] = 0xe1, buf[2] = 0xf5, buf[3] = 0x05;
  for (int i = 4; i < 8; i++) buf[i] = 0;
  expect_raw(buf, n, CT_ERR_FORMAT, "header length 100000001 exceeds", NULL);
  buf[0] = 200, buf[1] = buf[2] = buf[3] = 0;
  expect_raw(buf, n, CT_ERR_FORMAT, "is truncated: the header is 200 bytes", "the file has 10 bytes");
  buf[0] = 3; /* exactly one byte past the end */
  expect_raw(buf, n, CT_ERR_FORMAT, "the header is 3 bytes", NULL);
  buf[0] = 0;
  expect_raw(buf, 8, CT_ERR_FORMAT, "not valid JSON", NULL);
  /* The length is valid but the caller's buffer stops inside the header. */
  struct ct__st_header h;
  n = st_build(buf, "{\"a\": {}}", 0);
  ck_assert_ct_status(ct__safetensors_parse(&h, buf, 12, n, "p"), CT_ERR_FORMAT);
  ck_assert_error_contains("only 12 bytes are present");
}
END_TEST

START_TEST(test_hostile_json) {
  expect_json("{", 0, CT_ERR_FORMAT, "the header is not valid JSON", NULL);
  expect_json("{\"a\": }", 0, CT_ERR_FORMAT, "not valid JSON: error at byte", NULL);
  expect_json("{} x", 0, CT_ERR_FORMAT, "unexpected bytes after the JSON header at byte 3", NULL);
  expect_json("[]", 0, CT_ERR_FORMAT, "the header is an array, expected a JSON object", NULL);
  expect_json("\"s\"", 0, CT_ERR_FORMAT, "the header is a string", NULL);
  expect_json("3", 0, CT_ERR_FORMAT, "the header is a number", NULL);
  expect_json("null", 0, CT_ERR_FORMAT, "the header is null", NULL);
  /* Nesting far deeper than cJSON's limit is refused, not a stack overflow. */
  static char deep[20010];
  for (int i = 0; i < 10000; i++) deep[i] = '[', deep[10000 + i] = ']';
  deep[20000] = '\0';
  expect_json(deep, 0, CT_ERR_FORMAT, "not valid JSON", NULL);
  /* An embedded NUL ends nothing early: the length rules. */
  uint8_t buf[64];
  size_t n = st_build(buf, "{}  ", 0);
  buf[11] = 0;
  expect_raw(buf, n, CT_ERR_FORMAT, "unexpected bytes after the JSON header at byte 3", "\\x00");
}
END_TEST

START_TEST(test_hostile_entries) {
  expect_json("{\"a\": 3}", 0, CT_ERR_FORMAT, "tensor 'a' is a number, expected an object", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, CT_ERR_FORMAT,
              "tensor 'a' lacks its 'data_offsets' field", NULL);
  expect_json("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT, "lacks its 'dtype'", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT, "lacks its 'shape'", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"x\": 1}}", 4,
              CT_ERR_FORMAT, "tensor 'a' has an unexpected field 'x'", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
              CT_ERR_FORMAT, "has field 'dtype' twice", NULL);
  /* dtypes. */
  expect_json("{\"a\": {\"dtype\": 5, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "dtype is a number, expected a string", NULL);
  expect_json("{\"a\": {\"dtype\": \"F7\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "an unknown dtype 'F7'", NULL);
  expect_json("{\"a\": {\"dtype\": \"f32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "an unknown dtype 'f32'", NULL);
  expect_json("{\"a\": {\"dtype\": \"F8_E4M3\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4, CT_ERR_UNSUPPORTED,
              "the unsupported dtype 'F8_E4M3'", NULL);
  /* shapes. */
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": \"1\", \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "shape is a string, expected an array", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "shape[0] is the number -1", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1, 1.5], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "shape[1] is the number 1.5", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1e300], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "shape[0] is the number 1.0000000000000001e+300", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [[1]], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "shape[0] is an array", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4,
              CT_ERR_UNSUPPORTED, "tensor 'a' has 9 dims, more than cltensor's 8", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 4]}}", 4,
              CT_ERR_FORMAT, "shape [4294967296, 4294967296] has more than 2^63 elements", NULL);
  expect_json("{\"a\": {\"dtype\": \"F64\", \"shape\": [2147483648, 2147483648], \"data_offsets\": [0, 4]}}", 4,
              CT_ERR_FORMAT, "shape [2147483648, 2147483648] of F64 is more than 2^63 bytes", NULL);
  /* data_offsets. */
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4, CT_ERR_FORMAT,
              "data_offsets must be an array of two integers", "found an array of 1 elements");
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 4, CT_ERR_FORMAT,
              "an array of 3 elements", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": {\"b\": 0}}}", 4, CT_ERR_FORMAT,
              "found an object", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}}", 4, CT_ERR_FORMAT,
              "data_offsets must be", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 1e300]}}", 4, CT_ERR_FORMAT,
              "data_offsets must be", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8, CT_ERR_FORMAT,
              "data_offsets [8, 4] has begin after end", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [100], \"data_offsets\": [0, 400]}}", 4, CT_ERR_FORMAT,
              "data_offsets [0, 400] run past the end of the 4-byte data", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, CT_ERR_FORMAT,
              "data_offsets [0, 4] hold 4 bytes, shape [2] of F32 needs 8", NULL);
}
END_TEST

START_TEST(test_hostile_layout_names_metadata) {
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
              " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
              12, CT_ERR_FORMAT, "tensors 'a' [0, 8) and 'b' [4, 12) overlap", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
              " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
              4, CT_ERR_FORMAT, "overlap", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
              " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
              12, CT_ERR_FORMAT, "data bytes [4, 8) belong to no tensor (before tensor 'b')", NULL);
  expect_json("{\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, CT_ERR_FORMAT,
              "data bytes [0, 4) belong to no tensor", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 8, CT_ERR_FORMAT,
              "data bytes [4, 8) after the last tensor", NULL);
  expect_json("{}", 3, CT_ERR_FORMAT, "data bytes [0, 3) after the last tensor", NULL);
  expect_json("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
              " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
              8, CT_ERR_FORMAT, "tensor name 'a' appears twice", NULL);
  /* Names with odd bytes are quoted escaped in messages. */
  expect_json("{\"\\u0001x\": 1}", 0, CT_ERR_FORMAT, "tensor '\\x01x' is a number", NULL);
  expect_json("{\"__metadata__\": []}", 0, CT_ERR_FORMAT, "__metadata__ is an array, expected an object", NULL);
  expect_json("{\"__metadata__\": {\"k\": 1}}", 0, CT_ERR_FORMAT, "__metadata__ entry 'k' is a number", NULL);
  expect_json("{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}", 0, CT_ERR_FORMAT, "has key 'k' twice", NULL);
  expect_json("{\"__metadata__\": {}, \"__metadata__\": {}}", 0, CT_ERR_FORMAT, "__metadata__ appears twice", NULL);
  /* Zero-size tensors fit anywhere between the others. */
  expect_json("{\"e\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]},"
              " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
              " \"b\": {\"dtype\": \"I8\", \"shape\": [2], \"data_offsets\": [4, 6]}}",
              6, CT_OK, NULL, NULL);
}
END_TEST

/* Strings are held to UTF-8 and may not hold NUL: a name, dtype or key cut short at an escaped
 * NUL would silently be another one. */
START_TEST(test_hostile_strings) {
  expect_json("{\"a\": {\"dtype\": \"F32\\u0000junk\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
              CT_ERR_FORMAT, "the header holds an escaped NUL (\\u0000) in a string at byte 20", NULL);
  expect_json("{\"__metadata__\\u0000x\": {\"k\": \"v\"}}", 0, CT_ERR_FORMAT, "an escaped NUL", NULL);
  expect_json("{\"__metadata__\": {\"k\": \"v\\u0000\"}}", 0, CT_ERR_FORMAT, "an escaped NUL", NULL);
  expect_json("{\"a\\u0000\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
              CT_ERR_FORMAT, "an escaped NUL", NULL);
  /* Not UTF-8: a stray continuation byte, an overlong NUL, a surrogate, past U+10FFFF, cut short. */
  expect_json("{\"a\xff\": 1}", 0, CT_ERR_FORMAT, "bytes that are not UTF-8 at byte 3", "\\xff");
  expect_json("{\"__metadata__\": {\"k\": \"\xc0\x80\"}}", 0, CT_ERR_FORMAT, "not UTF-8", NULL);
  expect_json("{\"__metadata__\": {\"\xed\xa0\x80\": \"v\"}}", 0, CT_ERR_FORMAT, "not UTF-8", NULL);
  expect_json("{\"__metadata__\": {\"k\": \"\xf4\x90\x80\x80\"}}", 0, CT_ERR_FORMAT, "not UTF-8", NULL);
  expect_json("{\"__metadata__\": {\"k\": \"\xe2\x82\"}}", 0, CT_ERR_FORMAT, "not UTF-8", NULL);
  expect_json("{\"__metadata__\": {\"k\": \"\\ud800\"}}", 0, CT_ERR_FORMAT, "an unpaired UTF-16 surrogate", NULL);
  expect_json("{\"__metadata__\": {\"k\": \"\\udc00\\ud800\"}}", 0, CT_ERR_FORMAT, "unpaired", NULL);
  expect_json("{\"__metadata__\": {\"k\": \"a\tb\"}}", 0, CT_ERR_FORMAT, "a raw control byte in a string", NULL);
  uint8_t buf[64];
  size_t n = st_build(buf, "{\"__metadata__\": {\"k\": \"ab\"}}", 0);
  buf[8 + 25] = 0; /* the 'a' */
  expect_raw(buf, n, CT_ERR_FORMAT, "a NUL byte in a string at byte 25", NULL);
  /* Valid: raw UTF-8, escapes of every kind, a surrogate pair, all decoded. */
  n = st_build(buf, "{\"__metadata__\": {\"\xc3\xa9\\u00e9\": \"\\ud83d\\ude00\\t\\\"\\/\"}}", 0);
  struct ct__st_header h;
  ck_assert_ct_ok(ct__safetensors_parse(&h, buf, n, n, "utf8.safetensors"));
  ck_assert_uint_eq(h.meta_count, 1);
  ck_assert_str_eq(h.meta[0], "\xc3\xa9\xc3\xa9");
  ck_assert_str_eq(h.meta[1], "\xf0\x9f\x98\x80\t\"/");
  ct__safetensors_header_free(&h);
}
END_TEST

/* A header of n metadata keys, or of n empty tensors (tensors = 1); the last key repeats the
 * first when dup is set. malloc'ed safetensors image, *len its size. */
static uint8_t *st_many(int n, int tensors, int dup, size_t *len) {
  size_t cap = (size_t)n * 64 + 64, o = 8;
  uint8_t *b = malloc(cap);
  ck_assert_ptr_nonnull(b);
  o += (size_t)sprintf((char *)b + o, tensors ? "{" : "{\"__metadata__\": {");
  for (int i = 0; i < n; i++) {
    int k = dup && i == n - 1 ? 0 : i;
    if (tensors)
      o += (size_t)sprintf((char *)b + o, "%s\"t%06d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}",
                           i ? "," : "", k);
    else
      o += (size_t)sprintf((char *)b + o, "%s\"k%06d\":\"v\"", i ? "," : "", k);
  }
  o += (size_t)sprintf((char *)b + o, tensors ? "}" : "}}");
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)(o - 8) >> (8 * i));
  *len = o;
  return b;
}

/* Duplicate keys among 100,000 are found by sorting (the quadratic search took minutes here);
 * the test asserts only results. */
START_TEST(test_many_keys) {
  for (int tensors = 0; tensors <= 1; tensors++) {
    int n = tensors ? 20000 : 100000;
    size_t len;
    uint8_t *b = st_many(n, tensors, 1, &len);
    expect_raw(b, len, CT_ERR_FORMAT, tensors ? "tensor name 't000000' appears twice" : "has key 'k000000' twice", NULL);
    free(b);
    b = st_many(n, tensors, 0, &len);
    struct ct__st_header h;
    ck_assert_ct_ok(ct__safetensors_parse(&h, b, len, len, "many.safetensors"));
    ck_assert_uint_eq(tensors ? h.count : h.meta_count, (size_t)n);
    ck_assert_str_eq(tensors ? h.entries[n - 1].name : h.meta[2 * (n - 1)], tensors ? "t019999" : "k099999");
    ct__safetensors_header_free(&h);
    free(b);
  }
}
END_TEST

/* A 25 MB header of 416,667 empty tensors is parsed in memory near its own size: the text is
 * walked in place and cJSON sees one entry at a time (a cJSON tree of the whole header took
 * ~490 MB). ru_maxrss is the process's high-water mark, so the growth is taken over the parse
 * alone, with the image built before (one malloc, no transient peak); the fixed parser grows
 * it by ~56 MB, and the bound is 8x the header (200 MB). */
START_TEST(test_large_header_memory) {
  const int n = 416667;
  size_t len;
  uint8_t *b = st_many(n, 1, 0, &len);
  ck_assert_uint_gt(len, (size_t)24000000);
  long before = ct_test_maxrss_kib();
  struct ct__st_header h;
  ck_assert_ct_ok(ct__safetensors_parse(&h, b, len, len, "large.safetensors"));
  long grown = ct_test_maxrss_kib() - before;
  ck_assert_uint_eq(h.count, (size_t)n);
  ct__safetensors_header_free(&h);
  free(b);
  const char *skip = ct_test_host_memory_unmeasurable();
  if (skip) {
    printf("# peak memory not checked: %s (the parse itself ran)\n", skip);
    return;
  }
  ck_assert_msg(grown < (long)(8 * len / 1024), "parsing a %zu-byte header grew the resident size by %ld KiB",
                len, grown);
}
END_TEST

/* ---- with a device ---- */

START_TEST(test_reference_fixture) { ct_io_check_st_fixture(ct_test_device()); }
END_TEST

START_TEST(test_collection_api) {
  ct_device *d = ct_test_device();
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&st));
  ck_assert_uint_eq(ct_safetensors_count(st), 0);
  ck_assert_ptr_null(ct_safetensors_name(st, 0));
  int64_t shape[1] = {4};
  ct_tensor *a = ct_io_tensor(d, CT_I32, 1, shape), *b = ct_io_tensor(d, CT_F16, 1, shape), *g = NULL;
  ck_assert_ct_ok(ct_safetensors_set(st, "a", a));
  ck_assert_ct_ok(ct_safetensors_set(st, "b", b));
  ck_assert_uint_eq(ct_safetensors_count(st), 2);
  ck_assert_str_eq(ct_safetensors_name(st, 1), "b");
  /* get returns a new reference to the same tensor. */
  ck_assert_ct_ok(ct_safetensors_get(&g, st, "a"));
  ck_assert_ptr_eq(g, a);
  ct_release(g);
  ck_assert_ct_ok(ct_safetensors_at(&g, st, 1));
  ck_assert_ptr_eq(g, b);
  ct_release(g);
  ck_assert_ct_status(ct_safetensors_at(&g, st, 2), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("index 2 out of range for 2 tensors");
  ck_assert_ct_status(ct_safetensors_get(&g, st, "c"), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(g);
  ck_assert_error_contains("no tensor named 'c' among the 2: 'a', 'b'");
  /* Replacing keeps the place; the collection's references go with it. */
  ck_assert_ct_ok(ct_safetensors_set(st, "a", b));
  ck_assert_str_eq(ct_safetensors_name(st, 0), "a");
  ck_assert_ct_ok(ct_safetensors_get(&g, st, "a"));
  ck_assert_ptr_eq(g, b);
  ct_release(g);
  ck_assert_ct_status(ct_safetensors_set(st, "__metadata__", a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_safetensors_set(st, "", a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_safetensors_set(st, "bad\xff", a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("bad\\xff");
  ck_assert_ct_status(ct_safetensors_set(st, "x", NULL), CT_ERR_INVALID_ARGUMENT);
  /* Metadata. */
  ck_assert_ptr_null(ct_safetensors_metadata_get(st, "k"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "k", "v"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "k2", "v2"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "k", "w"));
  ck_assert_uint_eq(ct_safetensors_metadata_count(st), 2);
  ck_assert_str_eq(ct_safetensors_metadata_key(st, 0), "k");
  ck_assert_str_eq(ct_safetensors_metadata_get(st, "k"), "w");
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "k", NULL));
  ck_assert_uint_eq(ct_safetensors_metadata_count(st), 1);
  ck_assert_str_eq(ct_safetensors_metadata_key(st, 0), "k2");
  ck_assert_ptr_null(ct_safetensors_metadata_key(st, 1));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "absent", NULL));
  ck_assert_ct_status(ct_safetensors_metadata_set(st, "k\xc0\x80", "v"), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_safetensors_metadata_set(st, NULL, "v"), CT_ERR_INVALID_ARGUMENT);
  /* Freeing the collection leaves the caller's references valid. */
  ct_safetensors_free(st);
  ct_io_assert_values(a, CT_I32, 1, shape);
  ct_release(a);
  ct_release(b);
  ct_safetensors_free(NULL);
  ck_assert_uint_eq(ct_safetensors_count(NULL), 0);
}
END_TEST

START_TEST(test_round_trip) {
  ct_device *d = ct_test_device();
  int fp64 = ct_device_properties(d)->fp64;
  char *dir = ct_io_tmpdir();
  ct_safetensors *st = NULL, *back = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&st));
  int64_t shape[2] = {3, 5};
  /* Interleave element sizes so that the writer has to reorder for alignment. */
  const ct_dtype order[CT_IO_NDTYPES] = {CT_BOOL, CT_F64, CT_I8,  CT_U32, CT_I32, CT_F16, CT_U64,
                                         CT_I64,  CT_U8,  CT_I16, CT_BF16, CT_U16, CT_F32};
  for (int i = 0; i < CT_IO_NDTYPES; i++) {
    if (order[i] == CT_F64 && !fp64) continue;
    ct_tensor *t = ct_io_tensor(d, order[i], 2, shape);
    ck_assert_ct_ok(ct_safetensors_set(st, ct_dtype_name(order[i]), t));
    ct_release(t);
  }
  ct_tensor *x = ct_io_tensor(d, CT_F32, 2, shape), *xt = NULL, *sc = ct_io_tensor(d, CT_I64, 0, NULL), *e = NULL;
  ck_assert_ct_ok(ct_transpose(&xt, x, 0, 1));
  ck_assert_ct_ok(ct_safetensors_set(st, "view.transposed", xt));
  ck_assert_ct_ok(ct_safetensors_set(st, "scalar", sc));
  int64_t eshape[2] = {0, 3};
  ck_assert_ct_ok(ct_empty(&e, d, CT_BF16, 2, eshape));
  ck_assert_ct_ok(ct_safetensors_set(st, "empty", e));
  ck_assert_ct_ok(ct_safetensors_set(st, "unicode \xc3\xa9\xe2\x82\xac \"quoted\"\n", sc));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "format", "pt"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "json \"escapes\" \\ \t", "line\nbreak"));
  const char *p = ct_io_path(dir, "m.safetensors");
  ck_assert_ct_ok(ct_safetensors_save(st, p));

  /* The layout: data 8-byte aligned, every tensor aligned to its element size. */
  size_t fn;
  uint8_t *file = ct_io_read_file(p, &fn);
  struct ct__st_header h;
  ck_assert_ct_ok(ct__safetensors_parse(&h, file, fn, fn, p));
  ck_assert_uint_eq(h.data_offset % 8, 0);
  ck_assert_uint_eq(h.count, ct_safetensors_count(st));
  for (size_t i = 0; i < h.count; i++) {
    ck_assert_str_eq(h.entries[i].name, ct_safetensors_name(st, i));
    ck_assert_uint_eq(h.entries[i].begin % ct_dtype_size(h.entries[i].dtype), 0);
  }
  ct__safetensors_header_free(&h);
  free(file);

  ck_assert_ct_ok(ct_safetensors_load(&back, p, d));
  ck_assert_uint_eq(ct_safetensors_count(back), ct_safetensors_count(st));
  for (size_t i = 0; i < ct_safetensors_count(st); i++) {
    ck_assert_str_eq(ct_safetensors_name(back, i), ct_safetensors_name(st, i));
    ct_tensor *want = NULL, *got = NULL, *wc = NULL;
    ck_assert_ct_ok(ct_safetensors_at(&want, st, i));
    ck_assert_ct_ok(ct_safetensors_at(&got, back, i));
    ck_assert(ct_tensor_is_contiguous(got));
    ck_assert_ct_ok(ct_contiguous(&wc, want));
    void *wb = malloc(ct_tensor_nbytes(wc) + 1);
    ck_assert_ct_ok(ct_to_host(wc, wb, ct_tensor_nbytes(wc)));
    ct_io_assert_bytes(got, ct_tensor_dtype(want), ct_tensor_ndim(want), ct_tensor_shape(want), wb);
    free(wb);
    ct_release(wc);
    ct_release(want);
    ct_release(got);
  }
  ck_assert_uint_eq(ct_safetensors_metadata_count(back), 2);
  ck_assert_str_eq(ct_safetensors_metadata_get(back, "json \"escapes\" \\ \t"), "line\nbreak");
  ck_assert_str_eq(ct_safetensors_metadata_key(back, 0), "format");

  /* An empty collection is a valid file too. */
  ct_safetensors *none = NULL, *none_back = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&none));
  ck_assert_ct_ok(ct_safetensors_save(none, ct_io_path(dir, "none.safetensors")));
  ck_assert_ct_ok(ct_safetensors_load(&none_back, ct_io_path(dir, "none.safetensors"), d));
  ck_assert_uint_eq(ct_safetensors_count(none_back), 0);
  ct_safetensors_free(none_back);
  ct_safetensors_free(none);

  ct_safetensors_free(back);
  ct_safetensors_free(st);
  ct_release(e);
  ct_release(sc);
  ct_release(xt);
  ct_release(x);
  ct_io_rmdir(dir);
}
END_TEST

START_TEST(test_file_errors_and_atomic_save) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  ct_safetensors *st = (ct_safetensors *)1;
  ck_assert_ct_status(ct_safetensors_load(&st, ct_io_path(dir, "missing.safetensors"), d), CT_ERR_IO);
  ck_assert_ptr_null(st);
  ck_assert_error_contains("ct_safetensors_load: cannot open '");
  ck_assert_error_contains("missing.safetensors': No such file or directory");
  ck_assert_ct_status(ct_safetensors_load(&st, dir, d), CT_ERR_IO);
  ck_assert_error_contains("Is a directory");

  /* The reference file cut inside its data. */
  size_t fn;
  uint8_t *file = ct_io_read_file(ct_io_fixture("all.safetensors"), &fn);
  const char *p = ct_io_path(dir, "cut.safetensors");
  ct_io_write_file(p, file, fn - 10);
  ck_assert_ct_status(ct_safetensors_load(&st, p, d), CT_ERR_FORMAT);
  ck_assert_error_contains(p);
  ck_assert_error_contains("run past the end of the");
  ct_io_write_file(p, file, 100);
  ck_assert_ct_status(ct_safetensors_load(&st, p, d), CT_ERR_FORMAT);
  ck_assert_error_contains("is truncated: the header is");
  free(file);

  /* A failing save (file size limit) leaves the old file and no temporary behind. */
  ck_assert_ct_ok(ct_safetensors_new(&st));
  int64_t shape[1] = {8};
  ct_tensor *t = ct_io_tensor(d, CT_F32, 1, shape);
  ck_assert_ct_ok(ct_safetensors_set(st, "small", t));
  ct_release(t);
  const char *target = ct_io_path(dir, "m.safetensors");
  ck_assert_ct_ok(ct_safetensors_save(st, target));
  size_t n0;
  uint8_t *before = ct_io_read_file(target, &n0);
  int64_t big_shape[1] = {8192};
  t = ct_io_tensor(d, CT_F32, 1, big_shape);
  ck_assert_ct_ok(ct_safetensors_set(st, "big", t));
  ct_release(t);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 8192;
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ck_assert_ct_status(ct_safetensors_save(st, target), CT_ERR_IO);
  ck_assert_error_contains("temporary file for '");
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
  ck_assert_int_eq(ct_io_count_entries(dir), 2); /* cut.safetensors and m.safetensors */
  size_t n1;
  uint8_t *after = ct_io_read_file(target, &n1);
  ck_assert_uint_eq(n0, n1);
  ck_assert(memcmp(before, after, n0) == 0);
  free(before);
  free(after);
  ck_assert_ct_status(ct_safetensors_save(st, ct_io_path(dir, "no/such/dir.safetensors")), CT_ERR_IO);
  ck_assert_error_contains("No such file or directory");
  ck_assert_ct_status(ct_safetensors_save(NULL, target), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_safetensors_load(NULL, target, d), CT_ERR_INVALID_ARGUMENT);
  ct_safetensors_free(st);
  ct_io_rmdir(dir);
}
END_TEST

/* A FIFO in place of the file neither hangs the load nor becomes a regular file on a save. */
/* ct_safetensors_load_as: f64 entries converted to f32 on the host (the route onto a device
 * without cl_khr_fp64), the others untouched; the file is written byte by byte here so that the
 * test needs no f64 on the device. */
START_TEST(test_load_as_converts_f64) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  const double dv[4] = {0.1, -2.5, 1e300, -1e-320}; /* rounds, exact, overflows to inf, underflows */
  const int64_t iv[2] = {INT64_MAX, -7};
  const char hdr[] = "{\"a\":{\"dtype\":\"F64\",\"shape\":[2,2],\"data_offsets\":[0,32]},"
                     "\"i\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[32,48]}}";
  size_t hl = sizeof hdr - 1, pad = (8 - hl % 8) % 8, n = 8 + hl + pad + 48;
  unsigned char *buf = calloc(1, n);
  uint64_t hlen = hl + pad;
  memcpy(buf, &hlen, 8); /* little-endian host (the suite's other fixtures assume it too) */
  memcpy(buf + 8, hdr, hl);
  memset(buf + 8 + hl, ' ', pad);
  memcpy(buf + 8 + hlen, dv, 32);
  memcpy(buf + 8 + hlen + 32, iv, 16);
  const char *path = ct_io_path(dir, "mixed.safetensors");
  ct_io_write_file(path, buf, n);
  free(buf);
  ct_safetensors *st = NULL;
  ct_tensor *a = NULL, *i = NULL;
  ck_assert_ct_ok(ct_safetensors_load_as(&st, path, d, CT_F64, CT_F32));
  ck_assert_ct_ok(ct_safetensors_get(&a, st, "a"));
  ck_assert_ct_ok(ct_safetensors_get(&i, st, "i"));
  ck_assert_int_eq(ct_tensor_dtype(a), CT_F32);
  ck_assert_int_eq(ct_tensor_ndim(a), 2);
  ck_assert_int_eq(ct_tensor_dtype(i), CT_I64);
  float av[4];
  int64_t got[2];
  ck_assert_ct_ok(ct_to_host(a, av, sizeof av));
  ck_assert_ct_ok(ct_to_host(i, got, sizeof got));
  ck_assert(av[0] == 0.1f && av[1] == -2.5f && isinf(av[2]) && av[2] > 0 && av[3] == 0.0f && signbit(av[3]));
  ck_assert(got[0] == INT64_MAX && got[1] == -7);
  /* Saved again, the converted entry is F32. */
  ck_assert_ct_ok(ct_safetensors_save(st, ct_io_path(dir, "again.safetensors")));
  ct_safetensors *back = NULL;
  ct_tensor *b = NULL;
  ck_assert_ct_ok(ct_safetensors_load(&back, ct_io_path(dir, "again.safetensors"), d));
  ck_assert_ct_ok(ct_safetensors_get(&b, back, "a"));
  ck_assert_int_eq(ct_tensor_dtype(b), CT_F32);
  ct_release(b);
  ct_safetensors_free(back);
  ct_release(a);
  ct_release(i);
  ct_safetensors_free(st);
  /* Bad conversions: a target that is not a float, a source that is not a dtype. */
  ck_assert_ct_status(ct_safetensors_load_as(&st, path, d, CT_F64, CT_I32), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(st);
  ck_assert_error_contains("ct_safetensors_load_as: can convert to a floating-point dtype only");
  ck_assert_error_contains("not i32");
  ck_assert_ct_status(ct_safetensors_load_as(&st, path, d, (ct_dtype)99, CT_F32), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("dtype 99 is not a cltensor dtype");
  /* A hostile file is still refused as by ct_safetensors_load. */
  ct_io_write_file(ct_io_path(dir, "short.safetensors"), "\x10\0\0\0", 4);
  ck_assert_ct_status(ct_safetensors_load_as(&st, ct_io_path(dir, "short.safetensors"), d, CT_F64, CT_F32),
                      CT_ERR_FORMAT);
  ct_io_rmdir(dir);
}
END_TEST

START_TEST(test_fifo_neither_hangs_nor_is_replaced) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  const char *fifo = ct_io_mkfifo(dir, "fifo.safetensors");
  ct_safetensors *st = (ct_safetensors *)1;
  ck_assert_ct_status(ct_safetensors_load(&st, fifo, d), CT_ERR_IO);
  ck_assert_ptr_null(st);
  ck_assert_error_contains("it is a FIFO, not a regular file");
  ck_assert_ct_ok(ct_safetensors_new(&st));
  ck_assert_ct_status(ct_safetensors_save(st, fifo), CT_ERR_IO);
  ck_assert_error_contains("ct_safetensors_save: refusing to replace '");
  ct_io_assert_kind(fifo, S_IFIFO);
  ck_assert_int_eq(ct_io_count_entries(dir), 1);
  ct_safetensors_free(st);
  ct_io_rmdir(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("io-safetensors");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, test_parse_valid);
  tcase_add_test(tc, test_hostile_length_prefix);
  tcase_add_test(tc, test_hostile_json);
  tcase_add_test(tc, test_hostile_entries);
  tcase_add_test(tc, test_hostile_layout_names_metadata);
  tcase_add_test(tc, test_hostile_strings);
  suite_add_tcase(s, tc);
  /* The large headers: seconds each, more on a loaded machine than Check's default 4 s. */
  tc = tcase_create("large");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_many_keys);
  tcase_add_test(tc, test_large_header_memory);
  suite_add_tcase(s, tc);
  tc = tcase_create("load-save");
  tcase_add_test(tc, test_reference_fixture);
  tcase_add_test(tc, test_collection_api);
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_file_errors_and_atomic_save);
  tcase_add_test(tc, test_fifo_neither_hangs_nor_is_replaced);
  tcase_add_test(tc, test_load_as_converts_f64);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
