/* GEMM tuning: parameter constraints, the file format (parse, save, reject malformed and
 * foreign files), and the runtime applying a stored file, the shipped defaults or nothing. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ct_test.h"
#include "linalg/linalg.h"
#include "linalg_util.h"

/* A valid set distinct from CLBlast's and the shipped defaults: small tiles, so that test-sized
 * products are exact multiples of them (CLBlast then skips its padding copies). */
static ct__gemm_params test_params(void) {
  ct__gemm_params p = {
      /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
      .xgemm = {0, 1, 16, 2, 8, 8, 16, 8, 8, 16, 1, 1, 0, 0, 2, 2},
      /* KWID MDIMAD MDIMCD NDIMBD NDIMCD PADA PADB VWMD VWND WGD */
      .direct = {2, 8, 8, 8, 8, 1, 1, 2, 2, 16},
      .min_indirect = 20,
  };
  return p;
}

static ct_device_props fake_props(void) {
  ct_device_props p;
  memset(&p, 0, sizeof p);
  p.name = "Test Device X";
  p.vendor = "Vendor";
  p.driver_version = "1.2.3";
  p.max_work_group_size = 1024;
  p.local_mem_bytes = 65536;
  return p;
}

/* Text of a tuning file for props with the given set lines (NULL: the test set). */
static void file_text(char *buf, size_t n, const ct_device_props *p, const char *library, const char *sets) {
  ct__gemm_params tp = test_params();
  char def[1024];
  size_t u = 0;
  u += (size_t)snprintf(def + u, sizeof def - u, "f32 Xgemm");
  for (int i = 0; i < CT__XGEMM_NPARAMS; i++)
    u += (size_t)snprintf(def + u, sizeof def - u, " %s=%zu", ct__xgemm_names[i], tp.xgemm[i]);
  u += (size_t)snprintf(def + u, sizeof def - u, "\nf32 XgemmDirect");
  for (int i = 0; i < CT__XDIRECT_NPARAMS; i++)
    u += (size_t)snprintf(def + u, sizeof def - u, " %s=%zu", ct__xdirect_names[i], tp.direct[i]);
  snprintf(def + u, sizeof def - u, "\nf32 GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu\n", tp.min_indirect);
  snprintf(buf, n, "# comment\ncltensor-gemm-tuning 1\ndevice %s\nvendor %s\ndriver %s\nlibrary %s\n%s",
           p->name, p->vendor, p->driver_version, library ? library : CT_VERSION_STRING, sets ? sets : def);
}

static void expect_parse(const char *text, ct_status want, const char *why_contains) {
  ct_device_props p = fake_props();
  ct__gemm_tuning t;
  char why[512] = "";
  ct_status st = ct__gemm_tuning_parse(&t, text, &p, why, sizeof why);
  ck_assert_msg(st == want, "parse returned %s (want %s), why \"%s\", text:\n%s", ct_status_name(st),
                ct_status_name(want), why, text);
  if (why_contains)
    ck_assert_msg(strstr(why, why_contains), "why \"%s\" lacks \"%s\"; text:\n%s", why, why_contains, text);
}

START_TEST(test_params_constraints) {
  ct_device_props p = fake_props();
  char why[256];
  ct__gemm_params ok = test_params();
  ck_assert(ct__gemm_params_valid(&ok, &p, 4, why, sizeof why));
  ct__gemm_params q = ok;
  q.xgemm[CT__X_MWG] = 24;   /* not a multiple of MDIMC*VWM = 16 */
  ck_assert(!ct__gemm_params_valid(&q, &p, 4, why, sizeof why));
  ck_assert_msg(strstr(why, "MWG=24"), "%s", why);
  q = ok;
  q.xgemm[CT__X_KWI] = 3;
  ck_assert(!ct__gemm_params_valid(&q, &p, 4, why, sizeof why));
  q = ok;
  q.xgemm[CT__X_VWN] = 3;
  ck_assert(!ct__gemm_params_valid(&q, &p, 4, why, sizeof why));
  q = ok;
  q.xgemm[CT__X_SA] = 2;
  ck_assert(!ct__gemm_params_valid(&q, &p, 4, why, sizeof why));
  /* device limits: work-group size and local memory */
  q = ok;
  q.xgemm[CT__X_MDIMC] = q.xgemm[CT__X_NDIMC] = 64;
  q.xgemm[CT__X_MWG] = q.xgemm[CT__X_NWG] = 128;
  q.xgemm[CT__X_VWM] = q.xgemm[CT__X_VWN] = 1;
  q.xgemm[CT__X_MDIMA] = q.xgemm[CT__X_NDIMB] = 64;
  q.xgemm[CT__X_KWG] = 64;
  ck_assert(!ct__gemm_params_valid(&q, &p, 4, why, sizeof why));
  ck_assert_msg(strstr(why, "work-group"), "%s", why);
  q = ok;
  q.direct[CT__D_WGD] = 128;
  q.direct[CT__D_MDIMCD] = q.direct[CT__D_NDIMCD] = q.direct[CT__D_MDIMAD] = q.direct[CT__D_NDIMBD] = 16;
  ck_assert(!ct__gemm_params_valid(&q, &p, 4, why, sizeof why));
  ck_assert_msg(strstr(why, "local memory"), "%s", why);
  /* GEMMK=1 ties the thread shapes and forbids local memory */
  q = ok;
  q.xgemm[CT__X_GEMMK] = 1;
  ck_assert(!ct__gemm_params_valid(&q, &p, 4, why, sizeof why));
  q.xgemm[CT__X_SA] = q.xgemm[CT__X_SB] = 0;
  q.xgemm[CT__X_KWG] = q.xgemm[CT__X_KWI] = 1;
  q.xgemm[CT__X_KREG] = 4;
  ck_assert_msg(ct__gemm_params_valid(&q, &p, 4, why, sizeof why), "%s", why);
  q.min_indirect = (1u << 20) + 1;
  ck_assert(!ct__gemm_params_valid(&q, &p, 4, why, sizeof why));
}
END_TEST

START_TEST(test_parse) {
  ct_device_props p = fake_props();
  char text[4096];
  file_text(text, sizeof text, &p, NULL, NULL);
  ct__gemm_tuning t;
  char why[512];
  ck_assert_int_eq(ct__gemm_tuning_parse(&t, text, &p, why, sizeof why), CT_OK);
  ck_assert(t.has[CT__PREC_F32] && !t.has[CT__PREC_F16] && !t.has[CT__PREC_F64]);
  ct__gemm_params tp = test_params();
  ck_assert_int_eq(memcmp(&t.p[CT__PREC_F32], &tp, sizeof tp), 0);
  /* CRLF line ends and trailing blanks are tolerated */
  char crlf[8192];
  size_t o = 0;
  for (const char *c = text; *c && o < sizeof crlf - 3; c++) {
    if (*c == '\n') crlf[o++] = ' ', crlf[o++] = '\r';
    crlf[o++] = *c;
  }
  crlf[o] = '\0';
  expect_parse(crlf, CT_OK, NULL);

  /* malformed */
  expect_parse("", CT_ERR_FORMAT, "empty");
  expect_parse("hello\n", CT_ERR_FORMAT, "expected");
  expect_parse("cltensor-gemm-tuning 2\n", CT_ERR_FORMAT, "expected");
  char bad[4096];
  const char *x16 = "f32 Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=8 MDIMC=8 MWG=16 NDIMB=8 NDIMC=8 NWG=16 SA=1 SB=1 "
                    "STRM=0 STRN=0 VWM=2 VWN=2\n";
  const char *d10 = "f32 XgemmDirect KWID=2 MDIMAD=8 MDIMCD=8 NDIMBD=8 NDIMCD=8 PADA=1 PADB=1 VWMD=2 VWND=2 WGD=16\n";
  const char *r1 = "f32 GemmRoutine XGEMM_MIN_INDIRECT_SIZE=20\n";
  char sets[2048];
  struct { const char *sets; const char *why; } cases[] = {
      {"f32 Xgemm GEMMK=0\n", "lacks parameter"},
      {"f32 Xgemm GEMMK=0 GEMMK=0\n", "twice"},
      {"f32 Xgemm FOO=1\n", "no parameter 'FOO'"},
      {"f32 Xgemm GEMMK=x\n", "non-negative integer"},
      {"f32 Xgemm GEMMK=1x\n", "malformed value"},
      {"f32 Xgemm GEMMK\n", "NAME=VALUE"},
      {"f32 Xgemm GEMMK=99999999999999999999999\n", "malformed value"},
      {"f32 Sgemm A=1\n", "unknown kernel"},
      {"i32 Xgemm A=1\n", "unknown keyword"},
      {NULL, "needs all of"},    /* Xgemm line only */
      {NULL, "MWG=24"},          /* fails a constraint */
      {NULL, "given twice"},     /* a kernel line twice */
      {"", "no parameter sets"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *s = cases[i].sets;
    if (i == 9) {
      s = x16;
    } else if (i == 10) {
      snprintf(sets, sizeof sets, "%s%s%s", x16, d10, r1);
      char *mwg = strstr(sets, "MWG=16");
      memcpy(mwg, "MWG=24", 6);
      s = sets;
    } else if (i == 11) {
      snprintf(sets, sizeof sets, "%s%s%s%s", x16, d10, r1, r1);
      s = sets;
    }
    file_text(bad, sizeof bad, &p, NULL, s);
    expect_parse(bad, CT_ERR_FORMAT, cases[i].why);
  }
  /* header lines missing or repeated */
  expect_parse("cltensor-gemm-tuning 1\ndevice Test Device X\n", CT_ERR_FORMAT, "no 'vendor' line");
  file_text(bad, sizeof bad, &p, NULL, NULL);
  strcat(bad, "driver 1.2.3\n");
  expect_parse(bad, CT_ERR_FORMAT, "'driver' given twice");
  /* another device, driver or library: not ours (even when otherwise well formed) */
  ct_device_props other = p;
  other.name = "Some Other GPU";
  file_text(bad, sizeof bad, &other, NULL, NULL);
  expect_parse(bad, CT_ERR_DEVICE_MISMATCH, "Some Other GPU");
  other = p;
  other.driver_version = "9.9";
  file_text(bad, sizeof bad, &other, NULL, NULL);
  expect_parse(bad, CT_ERR_DEVICE_MISMATCH, "driver");
  file_text(bad, sizeof bad, &p, "0.0.1-old", NULL);
  expect_parse(bad, CT_ERR_DEVICE_MISMATCH, "libcltensor");
}
END_TEST

/* ---- With a device: each test runs in its own process (Check forks), so each sees the
 * device's GEMM state created fresh from the file it prepared. ---- */

static char cache_dir[512];

static void remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *dir = opendir(path);
    if (dir) {
      struct dirent *e;
      while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        remove_tree(sub);
      }
      closedir(dir);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}

static void cleanup_cache(void) {
  if (cache_dir[0]) remove_tree(cache_dir);
}

/* A fresh, empty cache folder for this test, removed when the test's process exits. */
static void fresh_cache(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(cache_dir, sizeof cache_dir, "%s/cltensor-tuning-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(cache_dir));
  setenv("CLTENSOR_CACHE_DIR", cache_dir, 1);
  atexit(cleanup_cache);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* Number of temporary files ("*.tmp") left in dir. */
static int count_tmp(const char *dir) {
  DIR *dh = opendir(dir);
  ck_assert_msg(dh != NULL, "opendir(%s): %s", dir, strerror(errno));
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dh))) {
    size_t l = strlen(e->d_name);
    if (l > 4 && strcmp(e->d_name + l - 4, ".tmp") == 0) n++;
  }
  closedir(dh);
  return n;
}

/* A failed save returns CT_ERR_IO naming the target, and leaves no temporary file behind. */
static void expect_save_fails(const char *path, const char *dir, const ct_device *d) {
  ct__gemm_tuning t;
  memset(&t, 0, sizeof t);
  t.has[CT__PREC_F32] = true;
  t.p[CT__PREC_F32] = test_params();
  ct_clear_error();
  ck_assert_ct_status(ct__gemm_tuning_save(path, d, &t, NULL), CT_ERR_IO);
  ck_assert_msg(strstr(ct_last_error(), path), "message \"%s\" lacks the path %s", ct_last_error(), path);
  ck_assert_int_eq(count_tmp(dir), 0);
}

static bool is_pocl_cpu(ct_device *d) {
  const ct_device_props *p = ct_device_properties(d);
  return p->type == CT_DEVICE_CPU && strstr(p->platform_name, "Portable Computing Language");
}

/* GEMMs on the CLBlast route, sized around the test set's tiles and crossover: direct and
 * indirect kernels, exact tile multiples, odd sizes, and strided batches with a broadcast
 * operand at a non-zero offset (the case CLBlast 1.5's batched kernel gets wrong in place). */
static void gemms_are_right(ct_device *d) {
  const int64_t shapes[][6] = {
      /* an, a..., bn, b... as batch, m, k | batch, k, n */
      {1, 8, 8, 1, 8, 8},        /* direct */
      {1, 32, 32, 1, 32, 32},    /* indirect, tile multiples */
      {1, 33, 47, 1, 47, 29},    /* indirect, padded */
      {3, 32, 32, 1, 32, 32},    /* batched, b broadcast (folds into one product) */
      {1, 32, 32, 3, 32, 32},    /* batched, a broadcast */
      {3, 32, 32, 3, 32, 32},    /* batched, packed */
      {4, 16, 16, 4, 16, 16},    /* batched below the crossover: direct */
  };
  ct_tensor *pad = lt_random(d, CT_F32, 1, (int64_t[]){5}, 1);   /* shifts later allocations */
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t *s = shapes[i];
    ct_tensor *a = lt_random(d, CT_F32, 3, (int64_t[]){s[0], s[1], s[2]}, 2 * i + 1);
    ct_tensor *b = lt_random(d, CT_F32, 3, (int64_t[]){s[3], s[4], s[5]}, 2 * i + 2);
    char what[64];
    snprintf(what, sizeof what, "tuned GEMM case %zu", i);
    lt_matmul_check(a, b, what);
    /* the same with a sliced (offset) a */
    ct_tensor *big = lt_random(d, CT_F32, 3, (int64_t[]){s[0], s[1] + 3, s[2]}, 7), *sl;
    ck_assert_ct_ok(ct_slice(&sl, big, 1, 3, s[1] + 3, 1));
    lt_matmul_check(sl, b, what);
    ct_release(sl);
    ct_release(big);
    ct_release(a);
    ct_release(b);
  }
  ct_release(pad);
}

START_TEST(test_no_file) {
  fresh_cache();
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ct_device *d = ct_test_device();
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_int_eq(src, is_pocl_cpu(d) ? CT_GEMM_TUNING_SHIPPED : CT_GEMM_TUNING_BUILTIN);
  ck_assert_msg(strstr(msg, "no tuning file") && strstr(msg, cache_dir), "%s", msg);
  ck_assert_str_eq(ct_last_error(), "");
  gemms_are_right(d);
}
END_TEST

START_TEST(test_file_applied) {
  fresh_cache();
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ct_device *d = ct_test_device();
  /* the cache folder is created as needed */
  char sub[700], path[1024];
  snprintf(sub, sizeof sub, "%s/a/b", cache_dir);
  setenv("CLTENSOR_CACHE_DIR", sub, 1);
  ck_assert_ct_ok(ct__gemm_tuning_path(path, sizeof path, d));
  ck_assert_msg(strncmp(path, sub, strlen(sub)) == 0, "%s", path);
  ct__gemm_tuning t;
  memset(&t, 0, sizeof t);
  t.has[CT__PREC_F32] = true;
  t.p[CT__PREC_F32] = test_params();
  ck_assert_ct_ok(ct__gemm_tuning_save(path, d, &t, "a test\nof two lines"));
  /* written atomically: only the final file is left */
  ck_assert_int_eq(count_tmp(sub), 0);
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(src == CT_GEMM_TUNING_FILE, "%s", msg);
  ck_assert_msg(strstr(msg, "applied") && strstr(msg, path), "%s", msg);
  gemms_are_right(d);
  /* the file is what the parser reads back */
  FILE *f = fopen(path, "r");
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  /* byte for byte the documented format: the two fixed comment lines, the caller's comment
   * line by line, the keys and one line per set */
  char want[8192], body[4096];
  file_text(body, sizeof body, ct_device_properties(d), NULL, NULL);
  snprintf(want, sizeof want,
           "# CLBlast GEMM parameters for one OpenCL device, written by cltensor-tune.\n"
           "# Format: docs/GEMM.md. A file whose device, vendor, driver or library differs is ignored.\n"
           "# a test\n# of two lines\n%s",
           body + strlen("# comment\n"));
  ck_assert_str_eq(text, want);
  ct__gemm_tuning back;
  char why[256];
  ck_assert_int_eq(ct__gemm_tuning_parse(&back, text, ct_device_properties(d), why, sizeof why), CT_OK);
  ck_assert_int_eq(memcmp(&back.p[CT__PREC_F32], &t.p[CT__PREC_F32], sizeof t.p[0]), 0);
  /* saving again replaces the file */
  t.p[CT__PREC_F32].min_indirect = 64;
  ck_assert_ct_ok(ct__gemm_tuning_save(path, d, &t, NULL));
  f = fopen(path, "r");
  n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  ck_assert_msg(strstr(text, "XGEMM_MIN_INDIRECT_SIZE=64"), "%s", text);
}
END_TEST

/* Saves that cannot complete: the target is a folder (the rename fails after the data is
 * written), its folder is a regular file, or its folder is read-only. */
START_TEST(test_save_fails_cleanly) {
  fresh_cache();
  ct_device *d = ct_test_device();
  char path[1024];
  snprintf(path, sizeof path, "%s/is-a-folder.txt", cache_dir);
  ck_assert_int_eq(mkdir(path, 0700), 0);
  expect_save_fails(path, cache_dir, d);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert(S_ISDIR(st.st_mode));

  char file[700];
  snprintf(file, sizeof file, "%s/plain-file", cache_dir);
  write_file(file, "x");
  snprintf(path, sizeof path, "%s/gemm.txt", file);
  expect_save_fails(path, cache_dir, d);

  if (geteuid() != 0) { /* permissions bind only non-root users */
    char ro[700];
    snprintf(ro, sizeof ro, "%s/ro", cache_dir);
    ck_assert_int_eq(mkdir(ro, 0500), 0);
    snprintf(path, sizeof path, "%s/gemm.txt", ro);
    expect_save_fails(path, ro, d);
    ck_assert_int_eq(access(path, F_OK), -1);
    chmod(ro, 0700);
  }
}
END_TEST

/* A file for the device with every key right but broken content. */
START_TEST(test_file_malformed) {
  fresh_cache();
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ct_device *d = ct_test_device();
  char path[1024], text[4096];
  ck_assert_ct_ok(ct__gemm_tuning_path(path, sizeof path, d));
  file_text(text, sizeof text, ct_device_properties(d), NULL, "f32 Xgemm GEMMK=0 KWG=16\n");
  write_file(path, text);
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_int_eq(src, is_pocl_cpu(d) ? CT_GEMM_TUNING_SHIPPED : CT_GEMM_TUNING_BUILTIN);
  ck_assert_msg(strstr(msg, "ignored") && strstr(msg, "malformed") && strstr(msg, "lacks parameter"), "%s", msg);
  gemms_are_right(d);
}
END_TEST

START_TEST(test_file_constraint_violation) {
  fresh_cache();
  ct_device *d = ct_test_device();
  char path[1024];
  ck_assert_ct_ok(ct__gemm_tuning_path(path, sizeof path, d));
  ct__gemm_tuning t;
  memset(&t, 0, sizeof t);
  t.has[CT__PREC_F32] = true;
  t.p[CT__PREC_F32] = test_params();
  t.p[CT__PREC_F32].xgemm[CT__X_MWG] = 24;
  ck_assert_ct_ok(ct__gemm_tuning_save(path, d, &t, NULL));
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_int_ne(src, CT_GEMM_TUNING_FILE);
  ck_assert_msg(strstr(msg, "malformed") && strstr(msg, "MWG=24"), "%s", msg);
}
END_TEST

START_TEST(test_file_other_device) {
  fresh_cache();
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ct_device *d = ct_test_device();
  char path[1024], text[4096];
  ck_assert_ct_ok(ct__gemm_tuning_path(path, sizeof path, d));
  ct_device_props other = *ct_device_properties(d);
  other.name = "Another Device 9000";
  file_text(text, sizeof text, &other, NULL, NULL);
  write_file(path, text);
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_int_ne(src, CT_GEMM_TUNING_FILE);
  ck_assert_msg(strstr(msg, "another device") && strstr(msg, "Another Device 9000"), "%s", msg);
  gemms_are_right(d);
}
END_TEST

START_TEST(test_path_keyed_by_device) {
  fresh_cache();
  ct_device *d = ct_test_device();
  char p1[1024], p2[1024], p3[1024];
  ck_assert_ct_ok(ct__gemm_tuning_path(p1, sizeof p1, d));
  struct ct_device copy = *d;
  copy.props.name = "Another Device";
  ck_assert_ct_ok(ct__gemm_tuning_path(p2, sizeof p2, &copy));
  copy = *d;
  copy.props.driver_version = "0.0";
  ck_assert_ct_ok(ct__gemm_tuning_path(p3, sizeof p3, &copy));
  ck_assert_str_ne(p1, p2);
  ck_assert_str_ne(p1, p3);
  ck_assert_msg(strstr(p1, "/gemm-") && strstr(p1, ".txt"), "%s", p1);
  /* the kernel cache's switch turns tuning files off too, with the one boolean rule */
  const char *off[] = {"0", "no", "false", "Off"};
  for (int i = 0; i < 4; i++) {
    setenv("CLTENSOR_CACHE", off[i], 1);
    ck_assert_int_eq(ct__gemm_tuning_path(p1, sizeof p1, d), CT_ERR_IO);
  }
  setenv("CLTENSOR_CACHE", "sometimes", 1);
  ck_assert_int_eq(ct__gemm_tuning_path(p1, sizeof p1, d), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("CLTENSOR_CACHE='sometimes'");
}
END_TEST

START_TEST(test_tuning_env) {
  fresh_cache();
  setenv("CLTENSOR_GEMM_TUNING", "builtin", 1);
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ct_device *d = ct_test_device();
  char path[1024];
  ck_assert_ct_ok(ct__gemm_tuning_path(path, sizeof path, d));
  ct__gemm_tuning t;
  memset(&t, 0, sizeof t);
  t.has[CT__PREC_F32] = true;
  t.p[CT__PREC_F32] = test_params();
  ck_assert_ct_ok(ct__gemm_tuning_save(path, d, &t, NULL));
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_int_eq(src, CT_GEMM_TUNING_BUILTIN);
  ck_assert_msg(strstr(msg, "builtin"), "%s", msg);
  ct_tensor *a = lt_random(d, CT_F32, 2, (int64_t[]){20, 30}, 1), *b = lt_random(d, CT_F32, 2, (int64_t[]){30, 10}, 2);
  lt_matmul_check(a, b, "built-in parameters");
  ct_release(a);
  ct_release(b);
  /* parameters unknown to the library: batched calls plan conservatively */
  gemms_are_right(d);
}
END_TEST

START_TEST(test_tuning_env_invalid) {
  setenv("CLTENSOR_GEMM_TUNING", "fast", 1);
  ct_device *d = ct_test_device();
  ct_tensor *a = lt_random(d, CT_F32, 2, (int64_t[]){2, 2}, 1), *c = NULL;
  ck_assert_ct_status(ct_matmul(&c, a, a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("CLTENSOR_GEMM_TUNING='fast'");
  ct_release(a);
}
END_TEST

/* Hostile values of $CLTENSOR_GEMM, $CLTENSOR_GEMM_TUNING and $CLTENSOR_CACHE_DIR reach the
 * messages escaped: an ESC cannot colour the terminal, a newline cannot forge a second line. */
START_TEST(test_env_values_are_escaped) {
  setenv("CLTENSOR_GEMM", "x\x1b[31m\nct_matmul: fine", 1);
  ct_device *d = ct_test_device();
  ct_tensor *a = lt_random(d, CT_F32, 2, (int64_t[]){2, 2}, 1), *c = NULL;
  ck_assert_ct_status(ct_matmul(&c, a, a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("CLTENSOR_GEMM='x\\x1b[31m\\x0act_matmul: fine'");
  ck_assert_plain_text(ct_last_error());
  ct_release(a);
  ct_shutdown();

  unsetenv("CLTENSOR_GEMM");
  setenv("CLTENSOR_GEMM_TUNING", "y\x1b[2J\nz", 1);
  d = ct_test_device();
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(strstr(msg, "CLTENSOR_GEMM_TUNING='y\\x1b[2J\\x0az'"), "%s", msg);
  ck_assert_plain_text(msg);
  a = lt_random(d, CT_F32, 2, (int64_t[]){2, 2}, 1);
  ck_assert_ct_status(ct_matmul(&c, a, a), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("CLTENSOR_GEMM_TUNING='y\\x1b[2J\\x0az'");
  ck_assert_plain_text(ct_last_error());
  ct_release(a);
  ct_shutdown();

  /* the cache folder: named in the tuning status ("no tuning file <path>") */
  unsetenv("CLTENSOR_GEMM_TUNING");
  setenv("CLTENSOR_GEMM", "clblast", 1);
  fresh_cache();
  char sub[700];
  snprintf(sub, sizeof sub, "%s/c\x1b[31m\nd", cache_dir);
  setenv("CLTENSOR_CACHE_DIR", sub, 1);
  d = ct_test_device();
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(strstr(msg, "no tuning file") && strstr(msg, "/c\\x1b[31m\\x0ad/gemm-"), "%s", msg);
  ck_assert_plain_text(msg);
  ct_shutdown();
  /* ... and in the reason a refused file is ignored for */
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  ck_assert_int_eq(chmod(sub, 0777), 0);
  d = ct_test_device();
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(strstr(msg, "ignored") && strstr(msg, "/c\\x1b[31m\\x0ad refused"), "%s", msg);
  ck_assert_plain_text(msg);
}
END_TEST

/* ---- Trust: the tuning file obeys the kernel cache's rules (src/kernel/cache.h) ---- */

#define OTHER_UID 65534 /* "another user" (the tests run as root in CI) */

/* Stores a tuning file for d with p as its f32 set; its path into path. */
static void save_f32_file(ct_device *d, const ct__gemm_params *p, char *path, size_t cap) {
  ck_assert_ct_ok(ct__gemm_tuning_path(path, cap, d));
  ct__gemm_tuning t;
  memset(&t, 0, sizeof t);
  t.has[CT__PREC_F32] = true;
  t.p[CT__PREC_F32] = *p;
  ck_assert_ct_ok(ct__gemm_tuning_save(path, d, &t, NULL));
}

/* A fresh GEMM state (after ct_shutdown) must ignore the file, saying why. */
static void expect_file_refused(const char *why) {
  ct_shutdown();
  ct_device *d = ct_test_device();
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(src != CT_GEMM_TUNING_FILE && strstr(msg, "ignored") && strstr(msg, why),
                "source %d, message \"%s\" (want it ignored: %s)", (int)src, msg, why);
}

START_TEST(test_untrusted_tuning_file_is_not_read) {
  fresh_cache();
  ct_device *d = ct_test_device();
  char path[1024];
  ct__gemm_params p = test_params();
  save_f32_file(d, &p, path, sizeof path);
  ck_assert_int_eq(chmod(cache_dir, 01777), 0); /* shared, sticky, as /tmp */
  expect_file_refused("writable by group or others");
  ck_assert_int_eq(chmod(cache_dir, 0700), 0);
  ck_assert_int_eq(chmod(path, 0664), 0);
  expect_file_refused("writable by group or others");
  ck_assert_int_eq(chmod(path, 0644), 0);
  if (geteuid() == 0) {
    ck_assert_int_eq(chown(cache_dir, OTHER_UID, OTHER_UID), 0);
    expect_file_refused("owned by another user");
    ck_assert_int_eq(chown(cache_dir, 0, 0), 0);
    ck_assert_int_eq(chown(path, OTHER_UID, OTHER_UID), 0);
    expect_file_refused("owned by another user");
    ck_assert_int_eq(chown(path, 0, 0), 0);
    /* the cache folder as a link someone else planted */
    char link[700];
    snprintf(link, sizeof link, "%s.link", cache_dir);
    ck_assert_int_eq(symlink(cache_dir, link), 0);
    ck_assert_int_eq(lchown(link, OTHER_UID, OTHER_UID), 0);
    setenv("CLTENSOR_CACHE_DIR", link, 1);
    expect_file_refused("symbolic link");
    unlink(link);
  }
}
END_TEST

/* A FIFO in place of the file: ignored at once (the tcase's timeout is the guard). */
START_TEST(test_fifo_tuning_file_does_not_hang) {
  fresh_cache();
  ct_device *d = ct_test_device();
  char path[1024];
  ck_assert_ct_ok(ct__gemm_tuning_path(path, sizeof path, d));
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  expect_file_refused("not a regular file");
}
END_TEST

/* ---- Verification: a stored set is used only when it computes right products ---- */

/* A set that passes every constraint but computes wrong products on PoCL 3.1: the issue's
 * family (GEMMK=1 KREG=16 KWG=1 ... VWN=2, which cltensor-tune rejects with "wrong result"),
 * drawn from cltensor-tune's GEMMK=1 space; applied directly it got 16256 of the 16384
 * elements of a 128x128 product wrong. Its crossover is a legitimate 2048: verification must
 * still use a small product, not one at the crossover (2051x2049x2053). */
static ct__gemm_params bad_params(void) {
  ct__gemm_params p = test_params();
  /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
  const size_t x[CT__XGEMM_NPARAMS] = {1, 16, 1, 1, 8, 8, 128, 4, 4, 64, 0, 0, 0, 0, 1, 2};
  memcpy(p.xgemm, x, sizeof x);
  p.min_indirect = 2048;
  return p;
}

START_TEST(test_wrong_products_are_not_used) {
  fresh_cache();
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ct_device *d = ct_test_device();
  char path[1024], why[512];
  ct__gemm_params bad = bad_params();
  ck_assert_msg(ct__gemm_params_valid(&bad, ct_device_properties(d), 4, why, sizeof why), "%s", why);
  save_f32_file(d, &bad, path, sizeof path);
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(src != CT_GEMM_TUNING_FILE && strstr(msg, "ignored") && strstr(msg, "wrong products") &&
                    strstr(msg, "Xgemm") && strstr(msg, "67x65x69"),
                "source %d: %s", (int)src, msg);
  ck_assert_str_eq(ct_last_error(), "");
  /* what the file would have broken: the replacement (shipped or conservative) is right */
  ct_tensor *a = lt_random(d, CT_F32, 2, (int64_t[]){128, 128}, 1), *b = lt_random(d, CT_F32, 2, (int64_t[]){128, 128}, 2);
  lt_matmul_check(a, b, "128x128 after a bad tuning file");
  ct_release(a);
  ct_release(b);
  /* the verdict is remembered: asked again, same answer */
  char again[512];
  ck_assert(!ct__gemm_params_verify(d, 32, &bad, again, sizeof again));
  ck_assert_msg(strstr(again, "wrong products"), "%s", again);
}
END_TEST

/* A file whose f32 set verifies but whose f64 set does not is ignored as a whole: each
 * precision it touched gets the shipped set or, where there is none, the conservative one
 * (CLBlast cannot drop an override), and the status says so. */
START_TEST(test_ignored_file_leaves_nothing_installed) {
  fresh_cache();
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ct_device *d = ct_test_device();
  if (!ct_device_properties(d)->fp64) return;
  char path[1024];
  ck_assert_ct_ok(ct__gemm_tuning_path(path, sizeof path, d));
  ct__gemm_tuning t;
  memset(&t, 0, sizeof t);
  t.has[CT__PREC_F32] = t.has[CT__PREC_F64] = true;
  t.p[CT__PREC_F32] = test_params();
  t.p[CT__PREC_F64] = bad_params();
  t.p[CT__PREC_F64].min_indirect = 20;
  ck_assert_ct_ok(ct__gemm_tuning_save(path, d, &t, NULL));
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(src == CT_GEMM_TUNING_SHIPPED && strstr(msg, "ignored") && strstr(msg, "f64 Xgemm") &&
                    strstr(msg, "f64: libcltensor's conservative"),
                "source %d: %s", (int)src, msg);
  struct ct__gemm_state *s;
  ck_assert_ct_ok(ct__gemm_state(&s, d));
  const ct__gemm_tuning *shipped = ct__gemm_shipped_tuning(d);
  ct__gemm_params tp = test_params();
  ck_assert(s->tuned[CT__PREC_F32] && s->tuned[CT__PREC_F64]);
  ck_assert_int_ne(memcmp(&s->params[CT__PREC_F32], &tp, sizeof tp), 0);
  ck_assert_int_eq(s->set[CT__PREC_F32], shipped && shipped->has[CT__PREC_F32] ? CT__SET_SHIPPED
                                                                              : CT__SET_CONSERVATIVE);
  ck_assert_int_eq(s->set[CT__PREC_F64], CT__SET_CONSERVATIVE);
  ck_assert_msg(strstr(msg, s->set[CT__PREC_F32] == CT__SET_SHIPPED ? "f32: libcltensor's shipped"
                                                                    : "f32: libcltensor's conservative"), "%s", msg);
  ct_tensor *a = lt_random(d, CT_F64, 2, (int64_t[]){70, 66}, 3), *b = lt_random(d, CT_F64, 2, (int64_t[]){66, 68}, 4);
  lt_matmul_check(a, b, "f64 after a bad set");
  ct_release(a);
  ct_release(b);
}
END_TEST

/* The tuning is read only for the CLBlast route: a GEMM on the host route reads no file (and
 * compiles no verification product); the status query reads it then, from where the cache
 * folder is at that time. */
START_TEST(test_host_route_loads_no_tuning) {
  if (!ct__gemm_host_available()) return;
  fresh_cache();
  setenv("CLTENSOR_GEMM", "host", 1);
  ct_device *d = ct_test_device();
  char path[1024];
  ct__gemm_params p = test_params();
  save_f32_file(d, &p, path, sizeof path);
  ct_tensor *a = lt_random(d, CT_F32, 2, (int64_t[]){8, 8}, 1);
  lt_matmul_check(a, a, "host route");
  ct_release(a);
  char other[700];
  snprintf(other, sizeof other, "%s/elsewhere", cache_dir);
  ck_assert_int_eq(mkdir(other, 0700), 0);
  setenv("CLTENSOR_CACHE_DIR", other, 1);
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(src != CT_GEMM_TUNING_FILE && strstr(msg, "no tuning file") && strstr(msg, other),
                "source %d: %s", (int)src, msg);
}
END_TEST

/* For test_tune_tool.sh: the file cltensor-tune just wrote is applied and gives right products. */
START_TEST(test_stored_file_applies) {
  setenv("CLTENSOR_GEMM", "clblast", 1);
  ct_device *d = ct_test_device();
  ct_gemm_tuning_source src;
  const char *msg;
  ck_assert_ct_ok(ct_gemm_tuning_get(&src, &msg, d));
  ck_assert_msg(src == CT_GEMM_TUNING_FILE, "%s", msg);
  gemms_are_right(d);
}
END_TEST

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "stored") == 0) {
    Suite *s = suite_create("linalg-tuning-stored");
    TCase *tc = tcase_create("stored");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_stored_file_applies);
    suite_add_tcase(s, tc);
    return ct_test_run(s);
  }
  Suite *s = suite_create("linalg-tuning");
  TCase *pure = tcase_create("format");
  tcase_add_test(pure, test_params_constraints);
  tcase_add_test(pure, test_parse);
  suite_add_tcase(s, pure);
  TCase *tc = tcase_create("runtime");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_no_file);
  tcase_add_test(tc, test_file_applied);
  tcase_add_test(tc, test_save_fails_cleanly);
  tcase_add_test(tc, test_file_malformed);
  tcase_add_test(tc, test_file_constraint_violation);
  tcase_add_test(tc, test_file_other_device);
  tcase_add_test(tc, test_path_keyed_by_device);
  tcase_add_test(tc, test_tuning_env);
  tcase_add_test(tc, test_tuning_env_invalid);
  tcase_add_test(tc, test_untrusted_tuning_file_is_not_read);
  tcase_add_test(tc, test_host_route_loads_no_tuning);
  suite_add_tcase(s, tc);
  TCase *verify = tcase_create("verify");
  tcase_set_timeout(verify, 600);
  tcase_add_test(verify, test_wrong_products_are_not_used);
  tcase_add_test(verify, test_ignored_file_leaves_nothing_installed);
  suite_add_tcase(s, verify);
  TCase *esc = tcase_create("escape");
  tcase_set_timeout(esc, 300);
  tcase_add_test(esc, test_env_values_are_escaped);
  suite_add_tcase(s, esc);
  TCase *hang = tcase_create("no-hang");
  tcase_set_timeout(hang, 60);
  tcase_add_test(hang, test_fifo_tuning_file_does_not_hang);
  suite_add_tcase(s, hang);
  return ct_test_run(s);
}
