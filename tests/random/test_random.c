/* Random numbers: Philox4x32-10 known-answer vectors (Random123's kat_vectors), rand bit-exact
 * against a host Philox plus the documented conversions on every float dtype, randn against a
 * host Box-Muller within a stated bound, statistics within 5 sigma, the global seed and offset
 * (sequence, reproducibility, threads), identical bits on two devices, errors.
 * argv[1] names the runner's environment: "one" (one PoCL device) or "two"
 * (POCL_DEVICES="pthread pthread"; adds the two-device test). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "ct_test.h"
#include "random/random.h"
#include "tensor/tensor.h"

static int two_devices;

/* ---- Host reference: Philox4x32-10 as in Random123 (philox4x32round and the key bump). ---- */
static void philox(uint32_t out[4], const uint32_t ctr_in[4], const uint32_t key_in[2]) {
  uint32_t c[4] = {ctr_in[0], ctr_in[1], ctr_in[2], ctr_in[3]}, k[2] = {key_in[0], key_in[1]};
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k[0], n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k[1], n3 = (uint32_t)p0;
    c[0] = n0;
    c[1] = n1;
    c[2] = n2;
    c[3] = n3;
  }
  memcpy(out, c, sizeof c);
}

/* Block b of stream (seed, offset), as documented in random.h. */
static void block(uint32_t w[4], uint64_t b, uint64_t seed, uint64_t offset) {
  uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), (uint32_t)offset, (uint32_t)(offset >> 32)};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  philox(w, ctr, key);
}

/* The documented uniform of element i (exact, as double). */
static double ref_uniform(ct_dtype t, int64_t i, uint64_t seed, uint64_t offset) {
  uint32_t w[4];
  if (t == CT_F64) {
    block(w, (uint64_t)i / 2, seed, offset);
    int k = (int)(i % 2) * 2;
    uint64_t bits = (((uint64_t)w[k + 1] << 32) | w[k]) >> 11;
    return ldexp((double)bits, -53);
  }
  block(w, (uint64_t)i / 4, seed, offset);
  uint32_t x = w[i % 4];
  if (t == CT_F16) return ldexp((double)(x >> 21), -11);
  if (t == CT_BF16) return ldexp((double)(x >> 24), -8);
  return ldexp((double)(x >> 8), -24);
}

/* The documented normal of element i, in long double; *radius gets sqrt(-2 log u1). */
static long double ref_normal(ct_dtype t, int64_t i, uint64_t seed, uint64_t offset,
                              long double *radius) {
  const long double two_pi = 6.283185307179586476925286766559005768L;
  uint32_t w[4];
  long double u1, u2;
  int second;
  if (t == CT_F64) {
    block(w, (uint64_t)i / 2, seed, offset);
    uint64_t k1 = (((uint64_t)w[1] << 32) | w[0]) >> 11, k2 = (((uint64_t)w[3] << 32) | w[2]) >> 11;
    u1 = ldexpl((long double)(k1 + 1), -53);
    u2 = ldexpl((long double)k2, -53);
    second = (int)(i % 2);
  } else {
    block(w, (uint64_t)i / 4, seed, offset);
    int pair = (int)(i % 4) / 2;
    u1 = ldexpl((long double)((w[2 * pair] >> 8) + 1), -24);
    u2 = ldexpl((long double)(w[2 * pair + 1] >> 8), -24);
    second = (int)(i % 2);
  }
  long double r = sqrtl(-2 * logl(u1));
  *radius = r;
  return second ? r * sinl(two_pi * u2) : r * cosl(two_pi * u2);
}

static void *read_all(const ct_tensor *t) {
  size_t n = ct_tensor_nbytes(t);
  void *p = malloc(n ? n : 1);
  ck_assert_ct_ok(ct_to_host(t, p, n));
  return p;
}

static const ct_dtype fdt[4] = {CT_F16, CT_BF16, CT_F32, CT_F64};

static bool dtype_ok(ct_device *d, ct_dtype t) { return t != CT_F64 || ct_device_properties(d)->fp64; }

START_TEST(test_known_answers) {
  static const struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[3] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  ct_device *d = ct_test_device();
  for (int i = 0; i < 3; i++) {
    uint32_t host[4];
    philox(host, kat[i].ctr, kat[i].key);
    ck_assert_mem_eq(host, kat[i].out, sizeof host);
    uint64_t b = ((uint64_t)kat[i].ctr[1] << 32) | kat[i].ctr[0];
    uint64_t off = ((uint64_t)kat[i].ctr[3] << 32) | kat[i].ctr[2];
    uint64_t seed = ((uint64_t)kat[i].key[1] << 32) | kat[i].key[0];
    ct_tensor *t;
    ck_assert_ct_ok(ct__random_bits(&t, d, 1, b, seed, off));
    uint32_t dev[4];
    ck_assert_ct_ok(ct_to_host(t, dev, sizeof dev));
    ck_assert_msg(memcmp(dev, kat[i].out, sizeof dev) == 0,
                  "KAT %d: device gave %08x %08x %08x %08x", i, dev[0], dev[1], dev[2], dev[3]);
    ct_release(t);
  }
  /* Many consecutive blocks, including the wrap of the block counter past 2^64 - 1. */
  ct_tensor *t;
  uint64_t first = UINT64_MAX - 500;
  ck_assert_ct_ok(ct__random_bits(&t, d, 1000, first, 0x0123456789abcdefull, 42));
  uint32_t *dev = read_all(t);
  for (int64_t i = 0; i < 1000; i++) {
    uint32_t w[4];
    block(w, first + (uint64_t)i, 0x0123456789abcdefull, 42);
    ck_assert_mem_eq(dev + 4 * i, w, sizeof w);
  }
  free(dev);
  ct_release(t);
}
END_TEST

/* rand: every element equals the documented conversion of the host Philox bits, exactly. */
START_TEST(test_rand_bit_exact) {
  ct_device *d = ct_test_device();
  const int64_t sizes[3] = {1, 7, 100003};
  for (int k = 0; k < 4; k++) {
    ct_dtype t = fdt[k];
    if (!dtype_ok(d, t)) continue;
    for (int s = 0; s < 3; s++) {
      uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1), off = (uint64_t)s * 1000003;
      int64_t shape[2] = {sizes[s], 1};
      ct_tensor *x;
      ck_assert_ct_ok(ct_rand_seeded(&x, d, t, 2, shape, seed, off));
      ck_assert_int_eq(ct_tensor_dtype(x), t);
      ck_assert_int_eq(ct_numel(x), sizes[s]);
      unsigned char *p = read_all(x);
      size_t es = ct_dtype_size(t);
      for (int64_t i = 0; i < sizes[s]; i++) {
        double want = ref_uniform(t, i, seed, off);
        unsigned char wb[8];
        ct__host_store_double(t, wb, want); /* exact: the conversion fits the significand */
        ck_assert_msg(ct__host_load_double(t, wb) == want, "conversion of %g not exact in %s", want,
                      ct_dtype_name(t));
        ck_assert_msg(memcmp(p + i * es, wb, es) == 0, "rand %s element %lld: got %g, expected %g",
                      ct_dtype_name(t), (long long)i, ct__host_load_double(t, p + i * es), want);
        ck_assert(want >= 0 && want < 1);
      }
      free(p);
      ct_release(x);
    }
  }
}
END_TEST

/* randn against the host Box-Muller in long double. Bound: |err| <= 16 eps r + eps_o |z|
 * + 1e-30, with r = sqrt(-2 log u1) the magnitude before the cosine (|z| <= r) and eps = 2^-23
 * (f16/bf16/f32 compute in f32) or 2^-52 (f64): log is within 3 ulp, sqrt 3 ulp (f32; exact in
 * f64), cospi/sinpi 4 ulp, and the products round once each (OpenCL 1.2 accuracy tables); the
 * uniforms themselves are exact. The bound scales with r rather than |z| because
 * implementations are looser than the tables near the cosine's zeros (Oclgrind's f64 cos is
 * ~60 ulp off a small result there). eps_o covers the final rounding to f16 (2^-10) or bf16
 * (2^-7). */
START_TEST(test_randn_reference) {
  ct_device *d = ct_test_device();
  for (int k = 0; k < 4; k++) {
    ct_dtype t = fdt[k];
    if (!dtype_ok(d, t)) continue;
    int64_t n = 20001, shape[1] = {n};
    uint64_t seed = 1234567 + (uint64_t)k, off = 99;
    ct_tensor *x;
    ck_assert_ct_ok(ct_randn_seeded(&x, d, t, 1, shape, seed, off));
    unsigned char *p = read_all(x);
    size_t es = ct_dtype_size(t);
    double eps = t == CT_F64 ? ldexp(1, -52) : ldexp(1, -23);
    double eo = t == CT_F16 ? ldexp(1, -10) : t == CT_BF16 ? ldexp(1, -7) : 0;
    for (int64_t i = 0; i < n; i++) {
      long double r, want = ref_normal(t, i, seed, off, &r), got = ct__host_load_double(t, p + i * es);
      long double tol = 16 * eps * r + eo * fabsl(want) + 1e-30L;
      ck_assert_msg(fabsl(got - want) <= tol, "randn %s element %lld: got %.17Lg, expected %.17Lg",
                    ct_dtype_name(t), (long long)i, got, want);
    }
    free(p);
    ct_release(x);
  }
}
END_TEST

/* Moments and a 16-bin histogram of 10^6 draws, each within 5 standard errors of its expected
 * value: uniform k-bit values k/2^b have mean (1 - 2^-b)/2 and variance (1 - 2^-2b)/12, the
 * variance estimate's standard error is sqrt((mu4 - sigma^4) / n) with mu4 = 1/80 (uniform) or 3
 * (normal); each bin count is binomial(n, 1/16). */
START_TEST(test_statistics) {
  ct_device *d = ct_test_device();
  const int bits[4] = {11, 8, 24, 53};
  for (int k = 0; k < 4; k++) {
    ct_dtype t = fdt[k];
    if (!dtype_ok(d, t)) continue;
    int64_t n = 1000000, shape[1] = {n};
    for (int normal = 0; normal < 2; normal++) {
      ct_tensor *x;
      ck_assert_ct_ok(normal ? ct_randn_seeded(&x, d, t, 1, shape, 777, (uint64_t)k)
                             : ct_rand_seeded(&x, d, t, 1, shape, 777, (uint64_t)k));
      unsigned char *p = read_all(x);
      size_t es = ct_dtype_size(t);
      double sum = 0, sq = 0;
      int64_t hist[16] = {0};
      for (int64_t i = 0; i < n; i++) {
        double v = ct__host_load_double(t, p + i * es);
        sum += v;
        if (!normal) hist[(int)(v * 16)]++;
      }
      double mean = sum / n;
      for (int64_t i = 0; i < n; i++) {
        double v = ct__host_load_double(t, p + i * es) - mean;
        sq += v * v;
      }
      double var = sq / (n - 1);
      double q = ldexp(1, -bits[k]);
      double m0 = normal ? 0 : (1 - q) / 2, v0 = normal ? 1 : (1 - q * q) / 12;
      double mu4 = normal ? 3 : 1.0 / 80;
      double se_m = sqrt(v0 / n), se_v = sqrt((mu4 - v0 * v0) / n);
      ck_assert_msg(fabs(mean - m0) <= 5 * se_m, "%s %s: mean %g, expected %g +- %g",
                    normal ? "randn" : "rand", ct_dtype_name(t), mean, m0, 5 * se_m);
      /* Rounding normals to bf16 changes the variance by about 2^-16: add that. */
      double vb = normal && t == CT_BF16 ? ldexp(1, -14) : 0;
      ck_assert_msg(fabs(var - v0) <= 5 * se_v + vb, "%s %s: variance %g, expected %g +- %g",
                    normal ? "randn" : "rand", ct_dtype_name(t), var, v0, 5 * se_v);
      if (!normal) {
        double e = n / 16.0, sd = sqrt(n * (1.0 / 16) * (15.0 / 16));
        for (int b = 0; b < 16; b++)
          ck_assert_msg(fabs(hist[b] - e) <= 5 * sd, "rand %s: bin %d has %lld, expected %g +- %g",
                        ct_dtype_name(t), b, (long long)hist[b], e, 5 * sd);
      }
      free(p);
      ct_release(x);
    }
  }
}
END_TEST

/* Reads a small f32 tensor's values. */
static void values(const ct_tensor *x, float *out, size_t n) {
  ck_assert_ct_ok(ct_to_host(x, out, n * sizeof(float)));
}

START_TEST(test_global_seed) {
  ct_device *d = ct_test_device();
  int64_t shape[1] = {8};
  ct_manual_seed(2024);
  uint64_t s, o;
  ck_assert_ct_ok(ct_rng_get_state(&s, &o));
  ck_assert_uint_eq(s, 2024);
  ck_assert_uint_eq(o, 0);
  ct_tensor *a, *b, *c, *ref;
  ck_assert_ct_ok(ct_rand(&a, d, CT_F32, 1, shape));
  ck_assert_ct_ok(ct_randn(&b, d, CT_F32, 1, shape));
  ck_assert_ct_ok(ct_rng_get_state(&s, &o));
  ck_assert_uint_eq(o, 2);
  float va[8], vb[8], vr[8];
  values(a, va, 8);
  values(b, vb, 8);
  /* The k-th call equals the seeded call at offset k. */
  ck_assert_ct_ok(ct_rand_seeded(&ref, d, CT_F32, 1, shape, 2024, 0));
  values(ref, vr, 8);
  ck_assert_mem_eq(va, vr, sizeof va);
  ct_release(ref);
  ck_assert_ct_ok(ct_randn_seeded(&ref, d, CT_F32, 1, shape, 2024, 1));
  values(ref, vr, 8);
  ck_assert_mem_eq(vb, vr, sizeof vb);
  ct_release(ref);
  /* Successive calls differ; reseeding repeats; set_state resumes. */
  ck_assert_ct_ok(ct_rand(&c, d, CT_F32, 1, shape));
  values(c, vr, 8);
  ck_assert(memcmp(va, vr, sizeof va) != 0);
  ct_release(c);
  ct_manual_seed(2024);
  ck_assert_ct_ok(ct_rand(&c, d, CT_F32, 1, shape));
  values(c, vr, 8);
  ck_assert_mem_eq(va, vr, sizeof va);
  ct_release(c);
  ct_rng_set_state(2024, 1);
  ck_assert_ct_ok(ct_randn(&c, d, CT_F32, 1, shape));
  values(c, vr, 8);
  ck_assert_mem_eq(vb, vr, sizeof vb);
  ct_release(c);
  /* Seeded calls leave the state alone; a different seed gives different values. */
  ck_assert_ct_ok(ct_rng_get_state(&s, &o));
  ck_assert_ct_ok(ct_rand_seeded(&c, d, CT_F32, 1, shape, 2025, 0));
  values(c, vr, 8);
  ck_assert(memcmp(va, vr, sizeof va) != 0);
  ct_release(c);
  uint64_t s2, o2;
  ck_assert_ct_ok(ct_rng_get_state(&s2, &o2));
  ck_assert_uint_eq(s2, s);
  ck_assert_uint_eq(o2, o);
  ct_release(a);
  ct_release(b);
}
END_TEST

/* Concurrent unseeded calls each take a distinct offset: 4 threads x 25 calls give exactly the
 * draws at offsets 0..99. */
#define NTH 4
#define PER 25
static ct_device *thr_dev;
static float thr_first[NTH][PER];
static ct_status thr_st[NTH];
static void *thr_main(void *arg) {
  int i = (int)(intptr_t)arg;
  int64_t shape[1] = {4};
  for (int k = 0; k < PER && thr_st[i] == CT_OK; k++) {
    ct_tensor *x = NULL;
    float v[4];
    thr_st[i] = ct_rand(&x, thr_dev, CT_F32, 1, shape);
    if (thr_st[i] == CT_OK) thr_st[i] = ct_to_host(x, v, sizeof v);
    thr_first[i][k] = v[0];
    ct_release(x);
  }
  return NULL;
}

START_TEST(test_threads_take_distinct_offsets) {
  thr_dev = ct_test_device();
  ct_manual_seed(99);
  pthread_t th[NTH];
  for (int i = 0; i < NTH; i++) {
    thr_st[i] = CT_OK;
    ck_assert_int_eq(pthread_create(&th[i], NULL, thr_main, (void *)(intptr_t)i), 0);
  }
  for (int i = 0; i < NTH; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < NTH; i++) ck_assert_int_eq(thr_st[i], CT_OK);
  uint64_t s, o;
  ck_assert_ct_ok(ct_rng_get_state(&s, &o));
  ck_assert_uint_eq(o, NTH * PER);
  bool used[NTH * PER] = {false};
  for (int i = 0; i < NTH; i++)
    for (int k = 0; k < PER; k++) {
      int found = -1;
      for (int off = 0; off < NTH * PER; off++)
        if (!used[off] && (float)ref_uniform(CT_F32, 0, 99, (uint64_t)off) == thr_first[i][k]) {
          found = off;
          break;
        }
      ck_assert_msg(found >= 0, "thread %d call %d drew %g, from no unused offset", i, k,
                    thr_first[i][k]);
      used[found] = true;
    }
}
END_TEST

/* The same seed gives the same bits on two devices (POCL_DEVICES="pthread pthread"). */
START_TEST(test_two_devices_identical) {
  int count = 0;
  ck_assert_ct_ok(ct_device_count(&count));
  ck_assert_int_ge(count, 2);
  ct_device *d0, *d1;
  ck_assert_ct_ok(ct_device_get(&d0, 0));
  ck_assert_ct_ok(ct_device_get(&d1, 1));
  ck_assert_ptr_ne(d0, d1);
  for (int k = 0; k < 4; k++) {
    ct_dtype t = fdt[k];
    if (!dtype_ok(d0, t) || !dtype_ok(d1, t)) continue;
    for (int normal = 0; normal < 2; normal++) {
      int64_t shape[2] = {333, 3};
      ct_tensor *a, *b;
      ck_assert_ct_ok(normal ? ct_randn_seeded(&a, d0, t, 2, shape, 5, 6) : ct_rand_seeded(&a, d0, t, 2, shape, 5, 6));
      ck_assert_ct_ok(normal ? ct_randn_seeded(&b, d1, t, 2, shape, 5, 6) : ct_rand_seeded(&b, d1, t, 2, shape, 5, 6));
      ck_assert_ptr_eq(ct_tensor_device(a), d0);
      ck_assert_ptr_eq(ct_tensor_device(b), d1);
      void *pa = read_all(a), *pb = read_all(b);
      ck_assert_msg(memcmp(pa, pb, ct_tensor_nbytes(a)) == 0, "%s %s differs between %s and %s",
                    normal ? "randn" : "rand", ct_dtype_name(t), ct_device_spec(d0), ct_device_spec(d1));
      free(pa);
      free(pb);
      ct_release(a);
      ct_release(b);
    }
  }
  /* The global stream too: the same state on either device gives the same values. */
  int64_t shape[1] = {64};
  ct_tensor *a, *b;
  ct_rng_set_state(11, 3);
  ck_assert_ct_ok(ct_rand(&a, d0, CT_F32, 1, shape));
  ct_rng_set_state(11, 3);
  ck_assert_ct_ok(ct_rand(&b, d1, CT_F32, 1, shape));
  void *pa = read_all(a), *pb = read_all(b);
  ck_assert_mem_eq(pa, pb, 64 * sizeof(float));
  free(pa);
  free(pb);
  ct_release(a);
  ct_release(b);
}
END_TEST

START_TEST(test_errors_and_shapes) {
  ct_device *d = ct_test_device();
  int64_t shape[2] = {3, 4};
  ct_tensor *x = (ct_tensor *)1;
  const ct_dtype bad[5] = {CT_BOOL, CT_U8, CT_I8, CT_I32, CT_I64};
  for (int i = 0; i < 5; i++) {
    ck_assert_ct_status(ct_rand(&x, d, bad[i], 2, shape), CT_ERR_DTYPE_MISMATCH);
    ck_assert_ptr_null(x);
    ck_assert_error_contains(ct_dtype_name(bad[i]));
    ck_assert_ct_status(ct_randn_seeded(&x, d, bad[i], 2, shape, 1, 2), CT_ERR_DTYPE_MISMATCH);
  }
  /* Failed calls leave the global offset alone. */
  uint64_t s0, o0, s1, o1;
  ck_assert_ct_ok(ct_rng_get_state(&s0, &o0));
  ck_assert_ct_status(ct_rand(&x, d, CT_I32, 2, shape), CT_ERR_DTYPE_MISMATCH);
  int64_t badshape[2] = {-2, 2};
  ck_assert_ct_status(ct_randn(&x, d, CT_F32, 2, badshape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_ok(ct_rng_get_state(&s1, &o1));
  ck_assert_uint_eq(o1, o0);
  ck_assert_ct_status(ct_rand(NULL, d, CT_F32, 2, shape), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_rand(&x, NULL, CT_F32, 2, shape), CT_ERR_INVALID_ARGUMENT);
  int64_t neg[2] = {3, -1};
  ck_assert_ct_status(ct_randn(&x, d, CT_F32, 2, neg), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_rng_get_state(NULL, NULL), CT_ERR_INVALID_ARGUMENT);
  /* 0-dim and empty results. */
  ck_assert_ct_ok(ct_rand_seeded(&x, d, CT_F32, 0, NULL, 3, 4));
  ck_assert_int_eq(ct_tensor_ndim(x), 0);
  float v;
  ck_assert_ct_ok(ct_to_host(x, &v, sizeof v));
  ck_assert_float_eq(v, (float)ref_uniform(CT_F32, 0, 3, 4));
  ct_release(x);
  int64_t empty[2] = {0, 5};
  uint64_t s, o, o2;
  ck_assert_ct_ok(ct_rng_get_state(&s, &o));
  ck_assert_ct_ok(ct_randn(&x, d, CT_BF16, 2, empty));
  ck_assert_int_eq(ct_numel(x), 0);
  ck_assert_ct_ok(ct_rng_get_state(&s, &o2));
  ck_assert_uint_eq(o2, o + 1);
  ct_release(x);
}
END_TEST

int main(int argc, char **argv) {
  two_devices = argc > 1 && strcmp(argv[1], "two") == 0;
  Suite *s = suite_create("random");
  TCase *tc = tcase_create("generator");
  tcase_add_test(tc, test_known_answers);
  tcase_add_test(tc, test_rand_bit_exact);
  tcase_add_test(tc, test_randn_reference);
  tcase_add_test(tc, test_statistics);
  suite_add_tcase(s, tc);
  tc = tcase_create("state");
  tcase_add_test(tc, test_global_seed);
  tcase_add_test(tc, test_errors_and_shapes);
  suite_add_tcase(s, tc);
  tc = tcase_create("threads");
  tcase_set_tags(tc, "threads"); /* skipped under Oclgrind, which runs one kernel at a time */
  tcase_add_test(tc, test_threads_take_distinct_offsets);
  suite_add_tcase(s, tc);
  if (two_devices) {
    tc = tcase_create("devices");
    tcase_set_tags(tc, "two-devices");
    tcase_add_test(tc, test_two_devices_identical);
    suite_add_tcase(s, tc);
  }
  return ct_test_run(s);
}
