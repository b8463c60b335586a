/* Two OpenCL implementations in one process (issue #27, item 6): a PoCL device and a rusticl
 * (llvmpipe) device, on different platforms and contexts. Tensors move between them with
 * ct_to_device, mixing them in one op is the device-mismatch error, and a small model (linear,
 * ReLU, linear, softmax) moved from one to the other gives the same results on both, and the
 * host's. Without either implementation the whole test is a TAP skip (plan 1..0). */
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ct_test.h"

static ct_device *pocl, *mesa;

static ct_tensor *host_tensor(ct_device *d, int64_t r, int64_t c, float *v, uint64_t *seed) {
  for (int64_t i = 0; i < r * c; i++) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (float)((double)(*seed >> 40) / (double)(1ull << 24) - 0.5);
  }
  ct_tensor *t = NULL;
  int64_t shape[2] = {r, c};
  ck_assert_ct_ok(ct_from_host(&t, d, CT_F32, 2, shape, v));
  return t;
}

/* softmax(relu(x w1^T + b1) w2^T + b2) on the device of the tensors, read back into out. */
static void forward(float *out, size_t cap, ct_tensor *x, ct_tensor *w1, ct_tensor *b1, ct_tensor *w2,
                    ct_tensor *b2) {
  ct_tensor *h = NULL, *r = NULL, *z = NULL, *p = NULL;
  ck_assert_ct_ok(ct_linear(&h, x, w1, b1));
  ck_assert_ct_ok(ct_relu(&r, h));
  ck_assert_ct_ok(ct_linear(&z, r, w2, b2));
  ck_assert_ct_ok(ct_softmax(&p, z, 1));
  ck_assert_ct_ok(ct_to_host(p, out, cap));
  ct_release(p), ct_release(z), ct_release(r), ct_release(h);
}

/* The same on the host, in double. */
static void forward_host(float *out, const float *x, const float *w1, const float *b1, const float *w2,
                         const float *b2, int n, int in, int hid, int cls) {
  for (int i = 0; i < n; i++) {
    double h[64], z[16], m = -INFINITY, s = 0;
    for (int j = 0; j < hid; j++) {
      double a = b1[j];
      for (int k = 0; k < in; k++) a += (double)x[i * in + k] * w1[j * in + k];
      h[j] = a > 0 ? a : 0;
    }
    for (int c = 0; c < cls; c++) {
      double a = b2[c];
      for (int j = 0; j < hid; j++) a += h[j] * w2[c * hid + j];
      z[c] = a;
      if (a > m) m = a;
    }
    for (int c = 0; c < cls; c++) s += exp(z[c] - m);
    for (int c = 0; c < cls; c++) out[i * cls + c] = (float)(exp(z[c] - m) / s);
  }
}

START_TEST(test_move_and_mismatch) {
  float v[12 * 40], back[12 * 40];
  uint64_t seed = 7;
  ct_tensor *a = host_tensor(pocl, 12, 40, v, &seed), *b = NULL, *c = NULL, *s = NULL;
  ck_assert_ct_ok(ct_to_device(&b, a, mesa));
  ck_assert_ptr_eq(ct_tensor_device(b), mesa);
  ck_assert_ct_ok(ct_to_host(b, back, sizeof back));
  ck_assert_int_eq(memcmp(v, back, sizeof v), 0);
  /* And back to PoCL, through a view (a transpose) on the rusticl side. */
  ct_tensor *t = NULL, *u = NULL;
  ck_assert_ct_ok(ct_transpose(&t, b, 0, 1));
  ck_assert_ct_ok(ct_to_device(&u, t, pocl));
  ck_assert_ct_ok(ct_to_host(u, back, sizeof back));
  for (int i = 0; i < 12; i++)
    for (int j = 0; j < 40; j++) ck_assert_float_eq(back[j * 12 + i], v[i * 40 + j]);
  /* Mixing the two in one op is refused, naming both devices. */
  c = (ct_tensor *)1;
  ck_assert_ct_status(ct_add(&c, a, b), CT_ERR_DEVICE_MISMATCH);
  ck_assert_ptr_null(c);
  ck_assert_error_contains(ct_device_spec(pocl));
  ck_assert_error_contains(ct_device_spec(mesa));
  ct_release(s), ct_release(u), ct_release(t), ct_release(b), ct_release(a);
}
END_TEST

START_TEST(test_model_moved) {
  enum { N = 16, IN = 24, HID = 32, CLS = 10 };
  static float x[N * IN], w1[HID * IN], b1[HID], w2[CLS * HID], b2[CLS];
  static float on_pocl[N * CLS], on_mesa[N * CLS], ref[N * CLS];
  uint64_t seed = 11;
  /* The biases as [1, features] rows: ct_linear broadcasts them. */
  ct_tensor *t[5] = {host_tensor(pocl, N, IN, x, &seed), host_tensor(pocl, HID, IN, w1, &seed),
                     host_tensor(pocl, 1, HID, b1, &seed), host_tensor(pocl, CLS, HID, w2, &seed),
                     host_tensor(pocl, 1, CLS, b2, &seed)};
  forward(on_pocl, sizeof on_pocl, t[0], t[1], t[2], t[3], t[4]);
  ct_tensor *m[5];
  for (int i = 0; i < 5; i++) ck_assert_ct_ok(ct_to_device(&m[i], t[i], mesa));
  forward(on_mesa, sizeof on_mesa, m[0], m[1], m[2], m[3], m[4]);
  forward_host(ref, x, w1, b1, w2, b2, N, IN, HID, CLS);
  /* f32 products of 32 terms and a softmax: a few ulps of 1 on either device. */
  for (int i = 0; i < N * CLS; i++) {
    ck_assert_msg(fabsf(on_pocl[i] - ref[i]) <= 1e-5f, "pocl %d: %g vs %g", i, on_pocl[i], ref[i]);
    ck_assert_msg(fabsf(on_mesa[i] - ref[i]) <= 1e-5f, "rusticl %d: %g vs %g", i, on_mesa[i], ref[i]);
  }
  for (int i = 0; i < 5; i++) ct_release(m[i]), ct_release(t[i]);
}
END_TEST

/* Both devices, found in the test's child (Check forks each test). */
static void find_devices(void) {
  ck_assert_ct_ok(ct_device_find(&pocl, "name:pthread"));
  ck_assert_ct_ok(ct_device_find(&mesa, "name:llvmpipe"));
}

int main(void) {
  /* Whether both are there, asked in a child of ours: OpenCL state made in this process would
   * be inherited half-alive by Check's forked tests (rusticl's queue threads do not survive a
   * fork, and the tests hung). Exit code: bit 0 PoCL found, bit 1 rusticl found. */
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0, have = 0;
    if (ct_device_count(&n) == CT_OK) {
      have |= ct_device_find(&pocl, "name:pthread") == CT_OK ? 1 : 0;
      have |= ct_device_find(&mesa, "name:llvmpipe") == CT_OK ? 2 : 0;
    }
    ct_shutdown();
    _exit(have);
  }
  int status = 0;
  bool have_pocl = false, have_mesa = false;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    have_pocl = (WEXITSTATUS(status) & 1) != 0;
    have_mesa = (WEXITSTATUS(status) & 2) != 0;
  }
  if (!have_pocl || !have_mesa) {
    printf("1..0 # SKIP needs a PoCL and a rusticl (llvmpipe) device: have pocl %s, rusticl %s\n",
           have_pocl ? "yes" : "no", have_mesa ? "yes" : "no");
    return 0; /* the plan above is a TAP skip */
  }
  Suite *s = suite_create("two-implementations");
  TCase *tc = tcase_create("two");
  tcase_add_checked_fixture(tc, find_devices, ct_test_finish);
  tcase_add_test(tc, test_move_and_mismatch);
  tcase_add_test(tc, test_model_moved);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
