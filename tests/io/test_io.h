/* Helpers shared by the io tests: the test arrays' values (the same formula as fixtures.py),
 * scratch folders, and small file utilities. */
#ifndef CT_TEST_IO_H
#define CT_TEST_IO_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ct_test.h"

static const ct_dtype ct_io_all_dtypes[] = {CT_BOOL, CT_U8,   CT_I8,  CT_I32, CT_I64, CT_F16, CT_BF16,
                                            CT_F32,  CT_F64,  CT_I16, CT_U16, CT_U32, CT_U64};
#define CT_IO_NDTYPES 13

/* Element k of the test arrays as fixtures.py's values(), written at dst in dtype t. */
static inline void ct_io_value(ct_dtype t, int64_t k, void *dst) {
  switch (t) {
    case CT_BOOL: {
      uint8_t v = k % 3 == 0;
      memcpy(dst, &v, 1);
      break;
    }
    case CT_U8: {
      uint8_t v = (uint8_t)((k * 37 + 11) % 256);
      memcpy(dst, &v, 1);
      break;
    }
    case CT_I8: {
      int8_t v = (int8_t)((k * 37 + 11) % 256 - 128);
      memcpy(dst, &v, 1);
      break;
    }
    case CT_I32: {
      int32_t v = (int32_t)(k * 100003 - 700000);
      memcpy(dst, &v, 4);
      break;
    }
    case CT_I64: {
      int64_t v = k * INT64_C(3000000000017) - INT64_C(100000000000000);
      memcpy(dst, &v, 8);
      break;
    }
    case CT_F16: {
      uint16_t v = ct_f32_to_f16((float)((double)(k - 7) * 0.375));
      memcpy(dst, &v, 2);
      break;
    }
    case CT_BF16: {
      uint16_t v = ct_f32_to_bf16((float)((double)(k - 7) * 0.25));
      memcpy(dst, &v, 2);
      break;
    }
    case CT_F32: {
      float v = (float)((double)(k - 7) * 0.1);
      memcpy(dst, &v, 4);
      break;
    }
    case CT_F64: {
      double v = (double)(k - 7) * 0.1;
      memcpy(dst, &v, 8);
      break;
    }
    case CT_I16: {
      int16_t v = (int16_t)(k * 1009 - 7000);
      memcpy(dst, &v, 2);
      break;
    }
    case CT_U16: {
      uint16_t v = (uint16_t)((k * 4099 + 5) % 65536);
      memcpy(dst, &v, 2);
      break;
    }
    case CT_U32: {
      uint32_t v = (uint32_t)(k * 300000007 + 11);
      memcpy(dst, &v, 4);
      break;
    }
    case CT_U64: {
      uint64_t v = (UINT64_C(1) << 63) + (uint64_t)k * UINT64_C(3000000000017);
      memcpy(dst, &v, 8);
      break;
    }
  }
}

/* fixtures.py's SPECIAL_F32: NaN, inf, -inf, -0, the smallest subnormal, FLT_MAX. */
static const uint32_t ct_io_special_f32[6] = {0x7fc00000u, 0x7f800000u, 0xff800000u,
                                               0x80000000u, 0x00000001u, 0x7f7fffffu};

/* n test values of dtype t, malloc'ed. */
static inline void *ct_io_values(ct_dtype t, int64_t n) {
  size_t es = ct_dtype_size(t);
  uint8_t *p = calloc((size_t)n * es + 1, 1);
  ck_assert_ptr_nonnull(p);
  for (int64_t k = 0; k < n; k++) ct_io_value(t, k, p + (size_t)k * es);
  return p;
}

/* A new tensor on d holding the test values in the given shape. */
static inline ct_tensor *ct_io_tensor(ct_device *d, ct_dtype t, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  void *v = ct_io_values(t, n);
  ct_tensor *x = NULL;
  ck_assert_ct_ok(ct_from_host(&x, d, t, ndim, shape, v));
  free(v);
  return x;
}

/* Asserts that t has the given dtype and shape and holds exactly want's bytes (row-major). */
static inline void ct_io_assert_bytes(const ct_tensor *t, ct_dtype dt, int ndim, const int64_t *shape,
                                      const void *want) {
  ck_assert_ptr_nonnull(t);
  ck_assert_str_eq(ct_dtype_name(ct_tensor_dtype(t)), ct_dtype_name(dt));
  ck_assert_int_eq(ct_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++) ck_assert_int_eq(ct_tensor_shape(t)[i], shape[i]);
  size_t nb = ct_tensor_nbytes(t);
  uint8_t *got = malloc(nb + 1);
  ck_assert_ct_ok(ct_to_host(t, got, nb));
  for (size_t i = 0; i < nb; i++)
    ck_assert_msg(got[i] == ((const uint8_t *)want)[i], "%s: byte %zu is 0x%02x, expected 0x%02x",
                  ct_dtype_name(dt), i, got[i], ((const uint8_t *)want)[i]);
  free(got);
}

/* Asserts that t holds the test values in dtype dt and the given shape. */
static inline void ct_io_assert_values(const ct_tensor *t, ct_dtype dt, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  void *want = ct_io_values(dt, n);
  ct_io_assert_bytes(t, dt, ndim, shape, want);
  free(want);
}

/* A fresh scratch folder (removed by ct_io_rmdir). */
static inline char *ct_io_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char *p = malloc(4096);
  snprintf(p, 4096, "%s/ct-io-XXXXXX", base && *base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(p));
  return p;
}

/* dir/name in a static buffer per call site slot (4 slots rotate). */
static inline const char *ct_io_path(const char *dir, const char *name) {
  static char buf[4][4096];
  static int slot;
  char *p = buf[slot++ & 3];
  snprintf(p, 4096, "%s/%s", dir, name);
  return p;
}

static inline int ct_io_count_entries(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

static inline void ct_io_rmdir(char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlink(ct_io_path(dir, e->d_name));
    closedir(d);
  }
  rmdir(dir);
  free(dir);
}

static inline void ct_io_write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

/* A FIFO at dir/name (no reader or writer ever opens it here), its path in a rotating buffer. */
static inline const char *ct_io_mkfifo(const char *dir, const char *name) {
  const char *p = ct_io_path(dir, name);
  ck_assert_msg(mkfifo(p, 0600) == 0, "mkfifo(%s) failed", p);
  return p;
}

/* Asserts that path (not followed) is still a FIFO, a character device or a symbolic link. */
static inline void ct_io_assert_kind(const char *path, mode_t kind) {
  struct stat sb;
  ck_assert_int_eq(lstat(path, &sb), 0);
  ck_assert_msg((sb.st_mode & S_IFMT) == kind, "%s: mode 0%o, expected type 0%o", path,
                (unsigned)sb.st_mode, (unsigned)kind);
}

/* The whole file, malloc'ed; *n gets its size. */
static inline uint8_t *ct_io_read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *p = malloc((size_t)size + 1);
  ck_assert_uint_eq(fread(p, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *n = (size_t)size;
  return p;
}

/* The committed fixtures, or $CT_IO_FIXTURES (a folder fixtures.py wrote just now). */
static inline const char *ct_io_fixture(const char *name) {
  static char buf[4][4096];
  static int slot;
  char *p = buf[slot++ & 3];
  const char *dir = getenv("CT_IO_FIXTURES");
  if (dir && *dir)
    snprintf(p, 4096, "%s/%s", dir, name);
  else
    snprintf(p, 4096, "%s/tests/io/fixtures/%s", getenv("CLTENSOR_SOURCE_ROOT"), name);
  return p;
}

/* The .npy files fixtures.py writes: name, dtype, shape; values from ct_io_value(). */
static const struct {
  const char *file;
  ct_dtype t;
  int ndim;
  int64_t shape[3];
} ct_io_npy_fixtures[] = {
    {"bool.npy", CT_BOOL, 2, {3, 5}},       {"u8.npy", CT_U8, 2, {3, 5}},
    {"i8.npy", CT_I8, 2, {3, 5}},           {"i32.npy", CT_I32, 2, {3, 5}},
    {"i64.npy", CT_I64, 2, {3, 5}},         {"f16.npy", CT_F16, 2, {3, 5}},
    {"f32.npy", CT_F32, 2, {3, 5}},         {"f64.npy", CT_F64, 2, {3, 5}},
    {"f32_v2.npy", CT_F32, 2, {3, 5}},      {"f32_v3.npy", CT_F32, 2, {3, 5}},
    {"i32_be.npy", CT_I32, 2, {3, 5}},      {"f16_be.npy", CT_F16, 2, {3, 5}},
    {"f64_be.npy", CT_F64, 2, {3, 5}},      {"i32_fortran.npy", CT_I32, 2, {3, 5}},
    {"f32_fortran3d.npy", CT_F32, 3, {2, 3, 4}}, {"f32_scalar.npy", CT_F32, 0, {0}},
    {"f32_empty.npy", CT_F32, 2, {0, 4}},   {"i64_1d.npy", CT_I64, 1, {7}},
    {"i16.npy", CT_I16, 2, {3, 5}},         {"u16.npy", CT_U16, 2, {3, 5}},
    {"u32.npy", CT_U32, 2, {3, 5}},         {"u64.npy", CT_U64, 2, {3, 5}},
};

/* Loads every .npy fixture onto d and checks it bit-exactly. */
static inline void ct_io_check_npy_fixtures(ct_device *d) {
  for (size_t i = 0; i < sizeof ct_io_npy_fixtures / sizeof ct_io_npy_fixtures[0]; i++) {
    if (ct_io_npy_fixtures[i].t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    ct_tensor *t = NULL;
    ck_assert_ct_ok(ct_npy_load(&t, ct_io_fixture(ct_io_npy_fixtures[i].file), d));
    ck_assert(ct_tensor_is_contiguous(t));
    ck_assert_ptr_eq(ct_tensor_device(t), d);
    ct_io_assert_values(t, ct_io_npy_fixtures[i].t, ct_io_npy_fixtures[i].ndim, ct_io_npy_fixtures[i].shape);
    ct_release(t);
  }
  /* NaN, infinities, -0 and a subnormal keep their exact bits. */
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_npy_load(&t, ct_io_fixture("f32_special.npy"), d));
  ct_io_assert_bytes(t, CT_F32, 1, (const int64_t[]){6}, ct_io_special_f32);
  ct_release(t);
}

/* Loads all.safetensors (fixtures.py) onto d and checks every tensor and the metadata. */
static inline void ct_io_check_st_fixture(ct_device *d) {
  if (!ct_device_properties(d)->fp64) return; /* the file has an F64 tensor */
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(ct_safetensors_load(&st, ct_io_fixture("all.safetensors"), d));
  ck_assert_uint_eq(ct_safetensors_count(st), CT_IO_NDTYPES + 2);
  int64_t shape[2] = {3, 5}, eshape[2] = {0, 4};
  for (int i = 0; i < CT_IO_NDTYPES; i++) {
    ct_tensor *t = NULL;
    ck_assert_ct_ok(ct_safetensors_get(&t, st, ct_dtype_name(ct_io_all_dtypes[i])));
    ct_io_assert_values(t, ct_io_all_dtypes[i], 2, shape);
    ct_release(t);
  }
  ct_tensor *t = NULL;
  ck_assert_ct_ok(ct_safetensors_get(&t, st, "scalar"));
  ct_io_assert_values(t, CT_F32, 0, NULL);
  ct_release(t);
  ck_assert_ct_ok(ct_safetensors_get(&t, st, "empty"));
  ct_io_assert_values(t, CT_F32, 2, eshape);
  ct_release(t);
  ck_assert_uint_eq(ct_safetensors_metadata_count(st), 2);
  ck_assert_str_eq(ct_safetensors_metadata_get(st, "format"), "np");
  ck_assert_str_eq(ct_safetensors_metadata_get(st, "source"), "tests/io/fixtures.py");
  ct_safetensors_free(st);
}

#endif
