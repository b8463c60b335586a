/* The caching allocator: size strings, exact statistics, reuse and splitting, the memory limit
 * and OOM recovery, no-caching mode, stability over 100k cycles, threads.
 * argv[1] names the environment meson set up: "default", "limit" (CLTENSOR_MEMORY_LIMIT=8MiB),
 * "badlimit" (a malformed limit), "nocache" (CLTENSOR_NO_CACHING=1). */
#include <pthread.h>

#include "ct_test.h"
#include "memory/alloc.h"

#define MIB (UINT64_C(1) << 20)

static ct_memory_stats stats(ct_device *d) {
  ct_memory_stats s;
  ck_assert_ct_ok(ct_memory_stats_get(&s, d));
  return s;
}

static ct_tensor *bytes_tensor(ct_device *d, int64_t n) {
  ct_tensor *t;
  ck_assert_ct_ok(ct_empty(&t, d, CT_U8, 1, &n));
  return t;
}

START_TEST(test_parse_size) {
  struct { const char *text; uint64_t want; } ok[] = {
      {"0", 0}, {"1048576", 1048576}, {"512MiB", 512 * MIB}, {"2GB", 2000000000ull}, {"1.5 GiB", 1536 * MIB},
      {"64k", 64000}, {"64K", 64000}, {"64kb", 64000}, {"64KiB", 65536}, {"3m", 3000000}, {"3MB", 3000000},
      {"1tib", UINT64_C(1) << 40}, {"2T", 2000000000000ull}, {"  7 B ", 7}, {"0.5KiB", 512}, {"1.25MiB", 1310720},
      {"18446744073709551615", UINT64_MAX}, {"16777215TiB", UINT64_C(16777215) << 40},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    uint64_t v = 1234;
    ck_assert_msg(ct__parse_size(&v, ok[i].text) == CT_OK, "'%s': %s", ok[i].text, ct_last_error());
    ck_assert_msg(v == ok[i].want, "'%s' gave %llu", ok[i].text, (unsigned long long)v);
  }
  const char *bad[] = {"", "   ", "abc", "-1", "+5", "12XB", "1.5", "5 M B", "1e9", "0x10", ".5MiB", "1.MiB",
                       "18446744073709551616", "16777216TiB", "99999999999999999999999", "5MiBx", "GiB"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v;
    ck_assert_msg(ct__parse_size(&v, bad[i]) == CT_ERR_INVALID_ARGUMENT, "'%s' was accepted", bad[i]);
    ck_assert_error_contains(bad[i]);
  }
  uint64_t v;
  ck_assert_ct_status(ct__parse_size(&v, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct__parse_size(NULL, "1"), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_stats_scripted) {
  ct_device *d = ct_test_device();
  ct_memory_stats s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 0);
  ck_assert_uint_eq(s.reserved_bytes, 0);
  ck_assert_uint_eq(s.limit_bytes, 0);
  size_t q = ct_device_properties(d)->mem_base_addr_align_bits / 8 > 512
                 ? ct_device_properties(d)->mem_base_addr_align_bits / 8 : 512;

  ct_tensor *a = bytes_tensor(d, 400);   /* one quantum, from a new 2 MiB small segment */
  s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, q);
  ck_assert_uint_eq(s.reserved_bytes, 2 * MIB);
  ck_assert_uint_eq(s.alloc_count, 1);
  ck_assert_uint_eq(s.cl_alloc_count, 1);
  ck_assert_uint_eq(s.cache_hits, 0);

  ct_tensor *b = bytes_tensor(d, (int64_t)q + 1);  /* two quanta, split off the same segment */
  s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 3 * q);
  ck_assert_uint_eq(s.reserved_bytes, 2 * MIB);
  ck_assert_uint_eq(s.cache_hits, 1);
  ck_assert_uint_eq(s.cl_alloc_count, 1);

  ct_tensor *c = bytes_tensor(d, 3 * MIB + 5);  /* large: rounded to 4 MiB, its own segment */
  s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 3 * q + 4 * MIB);
  ck_assert_uint_eq(s.reserved_bytes, 6 * MIB);
  ck_assert_uint_eq(s.cl_alloc_count, 2);
  ct_release(c);
  s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 3 * q);
  ck_assert_uint_eq(s.reserved_bytes, 6 * MIB);
  ck_assert_uint_eq(s.peak_allocated_bytes, 3 * q + 4 * MIB);

  ct_tensor *e = bytes_tensor(d, 2 * MIB - 7);  /* 2 MiB: split off the cached 4 MiB block */
  ct_tensor *f = bytes_tensor(d, 2 * MIB);      /* the other half */
  s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 3 * q + 4 * MIB);
  ck_assert_uint_eq(s.reserved_bytes, 6 * MIB);
  ck_assert_uint_eq(s.cl_alloc_count, 2);
  ck_assert_uint_eq(s.cache_hits, 3);
  ck_assert_uint_eq(s.alloc_count, 5);
  ct_release(e);
  ct_release(f);
  ct_tensor *g = bytes_tensor(d, 4 * MIB);  /* the halves merged again: a hit, no new buffer */
  s = stats(d);
  ck_assert_uint_eq(s.cl_alloc_count, 2);
  ck_assert_uint_eq(s.cache_hits, 4);
  ct_release(g);

  ck_assert_ct_ok(ct_memory_reset_peak(d));
  s = stats(d);
  ck_assert_uint_eq(s.peak_allocated_bytes, 3 * q);
  ck_assert_uint_eq(s.peak_reserved_bytes, 6 * MIB);
  ck_assert_ct_ok(ct_empty_cache(d));  /* the large segment goes; the small one is in use */
  s = stats(d);
  ck_assert_uint_eq(s.reserved_bytes, 2 * MIB);
  ck_assert_uint_eq(s.peak_reserved_bytes, 6 * MIB);
  ct_release(a);
  ct_release(b);
  s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 0);
  ck_assert_uint_eq(s.reserved_bytes, 2 * MIB);
  ck_assert_ct_ok(ct_empty_cache(d));
  ck_assert_ct_ok(ct_memory_reset_peak(d));
  s = stats(d);
  ck_assert_uint_eq(s.reserved_bytes, 0);
  ck_assert_uint_eq(s.peak_reserved_bytes, 0);
  ck_assert_uint_eq(s.peak_allocated_bytes, 0);
  ck_assert_uint_eq(s.alloc_count, 6);
}
END_TEST

START_TEST(test_blocks_aligned_and_distinct) {
  ct_device *d = ct_test_device();
  size_t align = ct_device_properties(d)->mem_base_addr_align_bits / 8;
  if (align < 128) align = 128;
  ct__block *b[50];
  for (int i = 0; i < 50; i++) {
    ck_assert_ct_ok(ct__alloc(&b[i], d, (size_t)(i * 777 % 5000)));
    ck_assert_uint_eq(b[i]->offset % align, 0);
    ck_assert_uint_ge(b[i]->size, (size_t)(i * 777 % 5000));
    for (int j = 0; j < i; j++)
      if (b[j]->mem == b[i]->mem)
        ck_assert(b[j]->offset + b[j]->size <= b[i]->offset || b[i]->offset + b[i]->size <= b[j]->offset);
  }
  for (int i = 0; i < 50; i += 2) ct__free(b[i]);
  for (int i = 1; i < 50; i += 2) ct__free(b[i]);
  ct__free(NULL);
  ct_memory_stats s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 0);
  /* Empty tensors hold a real minimal block. */
  ct_tensor *e;
  int64_t zero = 0;
  ck_assert_ct_ok(ct_empty(&e, d, CT_F32, 1, &zero));
  s = stats(d);
  ck_assert_uint_gt(s.allocated_bytes, 0);
  ct_release(e);
}
END_TEST

START_TEST(test_cycles_keep_reserved_flat) {
  ct_device *d = ct_test_device();
  const int64_t sizes[5] = {100, 4000, 70000, 3 * (int64_t)MIB, 0};
  uint64_t reserved_after_warmup = 0, cl_after_warmup = 0;
  for (int i = 0; i < 100000; i++) {
    ct_tensor *x = bytes_tensor(d, sizes[i % 5]);
    ct_tensor *y = bytes_tensor(d, sizes[(i / 5) % 5]);
    ct_release(x);
    ct_release(y);
    if (i == 100) {
      ct_memory_stats s = stats(d);
      reserved_after_warmup = s.reserved_bytes;
      cl_after_warmup = s.cl_alloc_count;
    }
  }
  ct_memory_stats s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 0);
  ck_assert_uint_eq(s.reserved_bytes, reserved_after_warmup);
  ck_assert_uint_eq(s.cl_alloc_count, cl_after_warmup);
  ck_assert_uint_le(s.reserved_bytes, 16 * MIB);
}
END_TEST

static void *thread_body(void *arg) {
  ct_device *d = arg;
  for (int i = 0; i < 3000; i++) {
    ct__block *b;
    if (ct__alloc(&b, d, (size_t)(i % 13) * 1000 + 1) != CT_OK) return NULL;
    ct__free(b);
  }
  return d;
}

START_TEST(test_threads) {
  ct_device *d = ct_test_device();
  uint64_t before = stats(d).alloc_count;
  pthread_t th[4];
  for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, thread_body, d), 0);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(th[i], &r);
    ck_assert_ptr_eq(r, d);
  }
  ct_memory_stats s = stats(d);
  ck_assert_uint_eq(s.allocated_bytes, 0);
  ck_assert_uint_eq(s.alloc_count - before, 12000);
}
END_TEST

START_TEST(test_max_alloc_and_nulls) {
  ct_device *d = ct_test_device();
  const ct_device_props *p = ct_device_properties(d);
  ct_tensor *t = (ct_tensor *)1;
  int64_t n = (int64_t)p->max_alloc_bytes + 1;
  ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &n), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_null(t);
  ck_assert_error_contains("maximum single allocation");
  ck_assert_error_contains(ct_device_spec(d));
  ck_assert_ct_status(ct_memory_stats_get(NULL, d), CT_ERR_INVALID_ARGUMENT);
  ct_memory_stats s;
  ck_assert_ct_status(ct_memory_stats_get(&s, NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_memory_reset_peak(NULL), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_empty_cache(NULL), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* CLTENSOR_MEMORY_LIMIT=8MiB */
START_TEST(test_limit_oom_and_recovery) {
  ct_device *d = ct_test_device();
  ck_assert_uint_eq(stats(d).limit_bytes, 8 * MIB);
  ct_tensor *a = bytes_tensor(d, 6 * (int64_t)MIB);
  ct_tensor *b = NULL;
  int64_t n = 4 * (int64_t)MIB;
  ck_assert_ct_status(ct_empty(&b, d, CT_U8, 1, &n), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_null(b);
  ck_assert_error_contains("out of memory on");
  ck_assert_error_contains(ct_device_spec(d));
  ck_assert_error_contains("tried to allocate 4.00 MiB (4194304 bytes)");
  ck_assert_error_contains("total memory");
  ck_assert_error_contains("6.00 MiB allocated");
  ck_assert_error_contains("6.00 MiB reserved");
  ck_assert_error_contains("limit 8.00 MiB");
  ck_assert_error_contains("CLTENSOR_MEMORY_LIMIT");
  ct_release(a);
  /* After releasing, the cached 6 MiB block serves the 4 MiB request (split, no new buffer). */
  ck_assert_ct_ok(ct_empty(&b, d, CT_U8, 1, &n));
  ck_assert_uint_eq(stats(d).reserved_bytes, 6 * MIB);
  ct_release(b);
  /* A request the cache cannot serve fits only once the cache goes back to OpenCL: the
   * allocator does that itself when the limit is in the way. */
  n = 7 * (int64_t)MIB;
  ck_assert_ct_ok(ct_empty(&b, d, CT_U8, 1, &n));
  ck_assert_uint_eq(stats(d).reserved_bytes, 8 * MIB);
  ct_release(b);
}
END_TEST

/* CLTENSOR_MEMORY_LIMIT=12XB */
START_TEST(test_bad_limit) {
  ct_device *d = ct_test_device();
  ct_tensor *t;
  int64_t n = 10;
  for (int i = 0; i < 2; i++) {
    ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &n), CT_ERR_INVALID_ARGUMENT);
    ck_assert_error_contains("12XB");
    ck_assert_error_contains("CLTENSOR_MEMORY_LIMIT");
  }
  ct_memory_stats s;
  ck_assert_ct_status(ct_memory_stats_get(&s, d), CT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* CLTENSOR_NO_CACHING=1 */
START_TEST(test_no_caching) {
  ct_device *d = ct_test_device();
  for (int i = 0; i < 3; i++) {
    ct_tensor *x = bytes_tensor(d, 1000);
    ct_memory_stats s = stats(d);
    ck_assert_uint_eq(s.reserved_bytes, 1024);
    ck_assert_uint_eq(s.allocated_bytes, 1024);
    ct_release(x);
    s = stats(d);
    ck_assert_uint_eq(s.reserved_bytes, 0);
    ck_assert_uint_eq(s.cl_alloc_count, (uint64_t)i + 1);
    ck_assert_uint_eq(s.cache_hits, 0);
  }
  /* Data still moves correctly. */
  int32_t v[5] = {1, 2, 3, 4, 5}, w[5];
  ct_tensor *x;
  int64_t n = 5;
  ck_assert_ct_ok(ct_from_host(&x, d, CT_I32, 1, &n, v));
  ck_assert_ct_ok(ct_to_host(x, w, sizeof w));
  ck_assert_mem_eq(v, w, sizeof v);
  ct_release(x);
}
END_TEST

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "default";
  Suite *s = suite_create("memory");
  TCase *tc = tcase_create(mode);
  tcase_set_timeout(tc, 600);
  if (strcmp(mode, "limit") == 0) {
    tcase_add_test(tc, test_limit_oom_and_recovery);
  } else if (strcmp(mode, "badlimit") == 0) {
    tcase_add_test(tc, test_bad_limit);
  } else if (strcmp(mode, "nocache") == 0) {
    tcase_add_test(tc, test_no_caching);
    tcase_add_test(tc, test_blocks_aligned_and_distinct);
  } else {
    tcase_add_test(tc, test_parse_size);
    tcase_add_test(tc, test_stats_scripted);
    tcase_add_test(tc, test_blocks_aligned_and_distinct);
    tcase_add_test(tc, test_cycles_keep_reserved_flat);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_max_alloc_and_nulls);
  }
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
