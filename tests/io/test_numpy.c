/* Round trips with NumPy itself (/usr/bin/python3 with python3-numpy, found by meson and passed
 * in $CT_NUMPY_PYTHON): files NumPy writes now load bit-exactly, and files cltensor writes
 * load in NumPy with the same bits (and .npy bytes equal numpy.save's). Skipped without NumPy;
 * the committed fixtures cover the first direction anyway. */
#include "test_io.h"

static const char *python(void) { return getenv("CT_NUMPY_PYTHON"); }

static void run_fixtures_py(const char *verb, const char *dir) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s' '%s/tests/io/fixtures.py' %s '%s'", python(),
           getenv("CLTENSOR_SOURCE_ROOT"), verb, dir);
  int rc = system(cmd);
  ck_assert_msg(rc == 0, "%s failed (%d)", cmd, rc);
}

START_TEST(test_numpy_writes) {
  ct_device *d = ct_test_device();
  char *dir = ct_io_tmpdir();
  run_fixtures_py("write", dir);
  setenv("CT_IO_FIXTURES", dir, 1);
  ct_io_check_npy_fixtures(d);
  ct_io_check_st_fixture(d);
  ct_io_rmdir(dir);
}
END_TEST

START_TEST(test_cltensor_writes) {
  ct_device *d = ct_test_device();
  if (!ct_device_properties(d)->fp64) return;
  char *dir = ct_io_tmpdir();
  int64_t shape[2] = {3, 5};
  ct_safetensors *st = NULL;
  ck_assert_ct_ok(ct_safetensors_new(&st));
  char name[64];
  for (int i = 0; i < CT_IO_NDTYPES; i++) {
    ct_dtype t = ct_io_all_dtypes[i];
    ct_tensor *x = ct_io_tensor(d, t, 2, shape);
    if (t != CT_BF16) {
      snprintf(name, sizeof name, "%s.npy", ct_dtype_name(t));
      ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, name), x));
    }
    ck_assert_ct_ok(ct_safetensors_set(st, ct_dtype_name(t), x));
    ct_release(x);
  }
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "format", "np"));
  ck_assert_ct_ok(ct_safetensors_metadata_set(st, "writer", "cltensor"));
  ck_assert_ct_ok(ct_safetensors_save(st, ct_io_path(dir, "all.safetensors")));
  ct_safetensors_free(st);

  ct_tensor *x = ct_io_tensor(d, CT_F32, 2, shape), *xt = NULL;
  ck_assert_ct_ok(ct_transpose(&xt, x, 0, 1));
  ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, "f32_t.npy"), xt));
  ct_release(xt);
  ct_release(x);
  x = ct_io_tensor(d, CT_F32, 0, NULL);
  ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, "f32_scalar.npy"), x));
  ct_release(x);
  int64_t eshape[2] = {0, 4}, six = 6;
  ck_assert_ct_ok(ct_empty(&x, d, CT_F32, 2, eshape));
  ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, "f32_empty.npy"), x));
  ct_release(x);
  ck_assert_ct_ok(ct_from_host(&x, d, CT_F32, 1, &six, ct_io_special_f32));
  ck_assert_ct_ok(ct_npy_save(ct_io_path(dir, "f32_special.npy"), x));
  ct_release(x);
  run_fixtures_py("check", dir);
  ct_io_rmdir(dir);
}
END_TEST

int main(void) {
  if (!python() || !*python()) {
    printf("1..0 # SKIP /usr/bin/python3 with NumPy (Debian's python3-numpy) is not installed\n");
    return EXIT_SUCCESS;
  }
  Suite *s = suite_create("io-numpy");
  TCase *tc = tcase_create("numpy");
  tcase_add_test(tc, test_numpy_writes);
  tcase_add_test(tc, test_cltensor_writes);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
