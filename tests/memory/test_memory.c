/* The caching allocator: size strings, exact statistics, reuse and splitting, the memory limit
 * and OOM recovery, the default cap (the device's memory, the host's available memory), no-caching
 * mode, stability over 100k cycles, threads, release after ct_shutdown(). The host's memory is
 * played through fake /proc files (ct__alloc_meminfo_path, ct__alloc_status_path).
 * argv[1] names the environment meson set up: "default", "limit" (CLTENSOR_MEMORY_LIMIT=8MiB),
 * "badlimit" (a malformed limit), "nocache" (CLTENSOR_NO_CACHING=1). Tests of other values of
 * the variables set them themselves, in their own forked child, before the allocator first
 * reads them. */
#include <CL/cl.h>
#include <dlpack/dlpack.h>
#include <pthread.h>
#include <unistd.h>

#include "ct_test.h"
#include "memory/alloc.h"

#define MIB (UINT64_C(1) << 20)

static ct_memory_stats stats(ct_device *d) {
  ct_memory_stats s = {.size = sizeof s};
  ck_assert_ct_ok(ct_device_get_memory_stats(&s, d));
  return s;
}

static ct_tensor *bytes_tensor(ct_device *d, int64_t n) {
  ct_tensor *t;
  ck_assert_ct_ok(ct_empty(&t, d, CT_U8, 1, &n));
  return t;
}

/* The out-of-memory text says each size once: no "12 bytes (12 bytes)", no "(N bytes) (...)". */
static void assert_sizes_once(const char *m) {
  ck_assert_msg(strstr(m, "bytes) (") == NULL, "a size said twice in: %s", m);
  for (const char *p = m; (p = strstr(p, " bytes (")) != NULL; p++) {
    const char *q = p;
    while (q > m && q[-1] >= '0' && q[-1] <= '9') q--;
    ck_assert_msg(q == p || strncmp(p + 8, q, (size_t)(p - q)) != 0, "a size said twice in: %s", m);
  }
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

/* Small requests give their size once ("tried to allocate 12 bytes,"), large ones in both units
 * once each. */
START_TEST(test_oom_text_sizes) {
  ct_device *d = ct_test_device();
  const ct_device_props *p = ct_device_properties(d);
  ct_tensor *t;
  int64_t n = (int64_t)p->max_alloc_bytes + 1;
  ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &n), CT_ERR_OUT_OF_MEMORY);
  assert_sizes_once(ct_last_error());
  ck_assert_error_contains("bytes), above the device's maximum single allocation of ");
}
END_TEST

/* Messages must hold printable ASCII only. */
static void assert_printable(const char *m) {
  for (const char *p = m; *p; p++)
    ck_assert_msg((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f, "raw byte 0x%02x in: %s", (unsigned char)*p, m);
}

/* A meminfo file for ct__alloc_meminfo_path(), in kB as the kernel writes it. */
static const char *fake_meminfo(char *path, unsigned long long total_kib, unsigned long long avail_kib) {
  strcpy(path, "/tmp/ct-meminfo-XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "MemTotal:       %llu kB\nMemFree:        1 kB\nMemAvailable:   %llu kB\nBuffers:        0 kB\n",
          total_kib, avail_kib);
  fclose(f);
  ct__alloc_meminfo_path(path);
  return path;
}

/* A small computation on d, checked: [256] 1.5 + 1.5. */
static void compute_ok(ct_device *d) {
  int64_t n = 256;
  ct_tensor *a, *b;
  ck_assert_ct_ok(ct_full(&a, d, CT_F32, 1, &n, 1.5));
  ck_assert_ct_ok(ct_add(&b, a, a));
  float h[256];
  ck_assert_ct_ok(ct_to_host(b, h, sizeof h));
  for (int i = 0; i < 256; i++) ck_assert_float_eq(h[i], 3.0f);
  ct_release(a);
  ct_release(b);
}

/* Holds untouched tensors of chunk bytes (ct_empty) until the allocator refuses; returns how
 * many it held, releasing them, and leaves the refusal's message in msg. Never writes them:
 * on PoCL they stay virtual memory. Where they do not (they became resident), -1 after a TAP
 * skip comment saying so. */
/* Resident memory of this process in bytes (0 where /proc is missing). */
static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %llu kB", &kib) == 1) break;
  fclose(f);
  return (uint64_t)kib * 1024;
}

static int fill_untouched(ct_device *d, int64_t chunk, int max, char *msg, size_t msglen) {
  ct_tensor **held = calloc((size_t)max, sizeof *held);
  int n = 0;
  ct_status st = CT_OK;
  uint64_t rss0 = rss_bytes();
  while (n < max && (st = ct_empty(&held[n], d, CT_U8, 1, &chunk)) == CT_OK) {
    n++;
    /* A safety net for the machine: should something write the buffers after all, stop long
     * before the OOM killer would. */
    if (rss_bytes() > rss0 + (512ull << 20)) {
      for (int i = 0; i < n; i++) ct_release(held[i]);
      free(held);
      /* rusticl's llvmpipe buffers are resident from their creation: the cap cannot be reached
       * here without using the memory for real. */
      char what[96];
      snprintf(what, sizeof what, "the default cap (%d untouched buffers of %lld bytes became resident)", n,
               (long long)chunk);
      ct_test_needs(false, what, "buffers that stay virtual memory until written", d);
      return -1;
    }
  }
  ck_assert_msg(st == CT_ERR_OUT_OF_MEMORY, "after %d tensors of %lld bytes: %s: %s", n, (long long)chunk,
                ct_status_name(st), ct_last_error());
  snprintf(msg, msglen, "%s", ct_last_error());
  ct_memory_stats s = stats(d);
  ck_assert_uint_le(s.reserved_bytes, ct_device_properties(d)->global_mem_bytes);
  for (int i = 0; i < n; i++) ct_release(held[i]);
  free(held);
  return n;
}

/* Whether untouched device buffers stay virtual memory, so that allocating up to the device's
 * memory touches nothing: not on a device of its own (a GPU), not when glibc writes over every
 * malloc'd block (MALLOC_PERTURB_ nonzero: PoCL's buffers are malloc'd), not under valgrind
 * (its allocator tracks every block). Elsewhere the tests below would really use tens of GiB,
 * so they skip. */
static int untouched_stays_virtual(ct_device *d) {
  const char *perturb = getenv("MALLOC_PERTURB_");
  const char *preload = getenv("LD_PRELOAD");
  if (!ct_device_properties(d)->host_unified_memory) return 0;
  if (perturb && *perturb && strcmp(perturb, "0") != 0) return 0;
  if (preload && strstr(preload, "vgpreload")) return 0;
  return 1;
}

/* The default cap: untouched tensors until the allocator refuses, at or below the device's
 * global memory; then release, empty the cache, compute. The host is played as one with plenty
 * available, so that the device cap (not the free memory of the moment) is what refuses. */
START_TEST(test_default_cap_untouched) {
  char path[64];
  ct_device *d = ct_test_device();
  if (!untouched_stays_virtual(d)) return;
  fake_meminfo(path, 1ull << 40, 1ull << 40); /* 1 PiB in kB: more than any device */
  const ct_device_props *p = ct_device_properties(d);
  int64_t chunk = 1ll << 30;
  if ((uint64_t)chunk > p->max_alloc_bytes) chunk = (int64_t)(p->max_alloc_bytes / (2u << 20) * (2u << 20));
  int max = (int)(p->global_mem_bytes / (uint64_t)chunk) + 3;
  char msg[2048];
  int n = fill_untouched(d, chunk, max, msg, sizeof msg);
  unlink(path);
  if (n < 0) return;
  ck_assert_msg(strstr(msg, "out of memory on") != NULL, "%s", msg);
  assert_sizes_once(msg);
  /* Refused by the cap, exactly when the next chunk would not fit; or, where the driver refuses
   * the buffer first, by OpenCL (still at or below the device's memory). */
  if (strstr(msg, "OpenCL refused") == NULL) {
    ck_assert_msg(strstr(msg, "remain under the device's") != NULL && strstr(msg, "of global memory") != NULL, "%s", msg);
    ck_assert_uint_gt((uint64_t)(n + 1) * (uint64_t)chunk, p->global_mem_bytes);
  }
  ck_assert_uint_le((uint64_t)n * (uint64_t)chunk, p->global_mem_bytes);
  ck_assert_uint_eq(stats(d).allocated_bytes, 0);
  ck_assert_ct_ok(ct_empty_cache(d));
  ck_assert_uint_eq(stats(d).reserved_bytes, 0);
  ct__alloc_meminfo_path(NULL);
  compute_ok(d);
}
END_TEST

/* CLTENSOR_MEMORY_LIMIT above the device's memory cannot raise the cap. */
START_TEST(test_limit_above_device) {
  setenv("CLTENSOR_MEMORY_LIMIT", "1000TiB", 1);
  char path[64];
  ct_device *d = ct_test_device();
  const ct_device_props *p = ct_device_properties(d);
  ck_assert_uint_eq(stats(d).limit_bytes, p->global_mem_bytes);
  if (!untouched_stays_virtual(d)) return;
  fake_meminfo(path, 1ull << 40, 1ull << 40);
  int64_t chunk = 1ll << 30;
  if ((uint64_t)chunk > p->max_alloc_bytes) chunk = (int64_t)(p->max_alloc_bytes / (2u << 20) * (2u << 20));
  char msg[2048];
  int n = fill_untouched(d, chunk, (int)(p->global_mem_bytes / (uint64_t)chunk) + 3, msg, sizeof msg);
  unlink(path);
  if (n < 0) return;
  if (strstr(msg, "OpenCL refused") == NULL) ck_assert_msg(strstr(msg, "can lower that cap but not raise it") != NULL, "%s", msg);
}
END_TEST

/* A /proc/self/status for ct__alloc_status_path() with RssAnon in kB (as the kernel writes it),
 * written over path (made on first use: *path == 0). statm points nowhere: RssAnon is read. */
static void fake_status(char *path, unsigned long long anon_kib) {
  if (!*path) {
    strcpy(path, "/tmp/ct-status-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
  }
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "Name:\ttest_memory\nVmRSS:\t%llu kB\nRssAnon:\t%llu kB\nRssFile:\t0 kB\nRssShmem:\t0 kB\n", anon_kib,
          anon_kib);
  fclose(f);
  ct__alloc_status_path(path, "/nonexistent/statm");
}

/* Back to the real /proc files, the temporary ones removed. */
static void real_proc(char *meminfo, char *status) {
  ct__alloc_meminfo_path(NULL);
  ct__alloc_status_path(NULL, NULL);
  if (meminfo && *meminfo) unlink(meminfo);
  if (status && *status) unlink(status);
}

#define KIB_OF(bytes) ((unsigned long long)((bytes) >> 10))

/* On a host-memory device with everything reserved resident, a new segment must fit in
 * MemAvailable less max(256 MiB, 5% of MemTotal); blocks served from the cache need no reading
 * at all. */
START_TEST(test_host_available) {
  ct_device *d = ct_test_device();
  if (!ct_device_properties(d)->host_unified_memory) return;
  char path[64], st[64] = "";
  /* Everything reserved is resident here (RssAnon far above it): the new buffer alone is
   * compared with what is available. */
  fake_status(st, 64ull << 20);
  /* 4 GiB total: the margin is 256 MiB; 300 MiB available leave 44 MiB. */
  fake_meminfo(path, 4ull << 20, 300ull << 10);
  ct_tensor *a, *b = NULL;
  int64_t n = 40ll << 20;
  ck_assert_ct_ok(ct_empty(&a, d, CT_U8, 1, &n));
  n = 48ll << 20;
  ck_assert_ct_status(ct_empty(&b, d, CT_U8, 1, &n), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_null(b);
  ck_assert_error_contains("tried to allocate 48.00 MiB (50331648 bytes), but the device's memory is the host's, which "
                           "has 300.00 MiB available (MemAvailable), and libcltensor leaves 256.00 MiB of it to the system");
  assert_sizes_once(ct_last_error());
  ct_release(a);
  unlink(path);
  /* 100 GiB total: the margin is 5%, 5 GiB (not 256 MiB); 5 GiB + 64 MiB available leave 64 MiB. */
  fake_meminfo(path, 100ull << 20, (5ull << 20) + (64ull << 10));
  n = 128ll << 20;
  ck_assert_ct_status(ct_empty(&b, d, CT_U8, 1, &n), CT_ERR_OUT_OF_MEMORY);
  ck_assert_error_contains("leaves 5.00 GiB of it to the system");
  n = 48ll << 20;
  ck_assert_ct_ok(ct_empty(&b, d, CT_U8, 1, &n));
  ct_release(b);
  unlink(path);
  ck_assert_ct_ok(ct_empty_cache(d));
  /* Nothing available: a small block from an existing segment is still served (from the
   * cache, without reading), a new segment is not. */
  ct_tensor *s1, *s2;
  int64_t small = 100;
  ck_assert_ct_ok(ct_empty(&s1, d, CT_U8, 1, &small));
  fake_meminfo(path, 4ull << 20, 0);
  ck_assert_ct_ok(ct_empty(&s2, d, CT_U8, 1, &small));
  n = 8ll << 20;
  ck_assert_ct_status(ct_empty(&b, d, CT_U8, 1, &n), CT_ERR_OUT_OF_MEMORY);
  ck_assert_error_contains("0 bytes available");
  real_proc(path, st);
  ct_release(s1);
  ct_release(s2);
}
END_TEST

/* The test device with its cache empty, when untouched gigabytes stay virtual on it and it can
 * reserve global_min bytes in 2 GiB buffers; NULL (the test has nothing to check) otherwise. */
static ct_device *virtual_device(uint64_t global_min) {
  ct_device *d = ct_test_device();
  const ct_device_props *p = ct_device_properties(d);
  if (!untouched_stays_virtual(d) || p->global_mem_bytes < global_min || p->max_alloc_bytes < (2ull << 30)) return NULL;
  ck_assert_ct_ok(ct_empty_cache(d));
  ck_assert_uint_eq(stats(d).reserved_bytes, 0);
  return d;
}

/* Issue 11: reservations never written count against the host's available memory. A = 4 GiB
 * of 4 GiB (margin 256 MiB), next to nothing resident: three untouched 1 GiB tensors fit, the
 * fourth would take the reserved total to 4 GiB > 3.75 GiB and is refused (before, each was
 * compared alone with 3.75 GiB and they went on to the device's memory). */
START_TEST(test_host_untouched) {
  ct_device *d = virtual_device(5ull << 30);
  if (!d) return;
  char mi[64], st[64] = "";
  fake_meminfo(mi, 4ull << 20, 4ull << 20);
  fake_status(st, 4);
  char msg[2048];
  int n = fill_untouched(d, 1ll << 30, 8, msg, sizeof msg);
  ck_assert_int_eq(n, 3);
  ck_assert_msg(strstr(msg, "tried to allocate 1.00 GiB (1073741824 bytes), but the device's memory is the host's, "
                            "which has 4.00 GiB available (MemAvailable), and libcltensor leaves 256.00 MiB of it "
                            "to the system; 3.00 GiB the allocator has reserved but not yet written counts against "
                            "that too") != NULL,
                "%s", msg);
  assert_sizes_once(msg);
  /* The three are cached now (3 GiB reserved). A 1 GiB tensor comes from the cache; a 2 GiB one
   * needs a new buffer, 5 GiB in all: the cache goes back first, then it fits (3 GiB). */
  ck_assert_uint_eq(stats(d).reserved_bytes, 3ull << 30);
  ct_tensor *a, *b;
  int64_t n1 = 1ll << 30, n2 = 2ll << 30;
  ck_assert_ct_ok(ct_empty(&a, d, CT_U8, 1, &n1));
  ck_assert_ct_ok(ct_empty(&b, d, CT_U8, 1, &n2));
  ck_assert_uint_eq(stats(d).reserved_bytes, 3ull << 30);
  ct_release(a);
  ct_release(b);
  ck_assert_ct_ok(ct_empty_cache(d));
  ck_assert_uint_eq(stats(d).reserved_bytes, 0);
  real_proc(mi, st);
  compute_ok(d);
}
END_TEST

/* Written reservations are already out of MemAvailable and are not counted twice: with RssAnon
 * = R, only a new buffer above A - M is refused, whatever R. A = 1.25 GiB of 4 GiB: A - M = 1 GiB.
 * Partly written: the unwritten part counts. RssAnon above R (the process's own memory) counts
 * only up to R. */
START_TEST(test_host_resident) {
  ct_device *d = virtual_device(6ull << 30);
  if (!d) return;
  char mi[64], st[64] = "";
  fake_meminfo(mi, 4ull << 20, 5ull << 18);
  ct_tensor *held[8];
  int h = 0;
  int64_t gib = 1ll << 30, over = (1ll << 30) + (2ll << 20), half = 512ll << 20, half_over = (514ll << 20);
  for (; h < 3; h++) {
    fake_status(st, KIB_OF(stats(d).reserved_bytes));
    ck_assert_ct_ok(ct_empty(&held[h], d, CT_U8, 1, &gib));
  }
  ct_tensor *t = NULL;
  fake_status(st, KIB_OF(stats(d).reserved_bytes)); /* R = 3 GiB, all resident */
  ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &over), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_null(t);
  ck_assert_error_contains("but the device's memory is the host's, which has 1.25 GiB available (MemAvailable), and "
                           "libcltensor leaves 256.00 MiB of it to the system. ");
  assert_sizes_once(ct_last_error());
  /* 2.5 of the 3 GiB resident: room for R + N is 1.25 + 2.5 - 0.25 = 3.5 GiB. */
  fake_status(st, 5ull << 19);
  ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &half_over), CT_ERR_OUT_OF_MEMORY);
  ck_assert_error_contains("to the system; 512.00 MiB the allocator has reserved but not yet written counts against "
                           "that too");
  assert_sizes_once(ct_last_error());
  ck_assert_ct_ok(ct_empty(&held[h++], d, CT_U8, 1, &half));
  /* RssAnon far above R (host arrays of the process's own): T is R, not more. */
  fake_status(st, 64ull << 20);
  ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &over), CT_ERR_OUT_OF_MEMORY);
  ck_assert_ct_ok(ct_empty(&held[h++], d, CT_U8, 1, &gib));
  ck_assert_uint_eq(stats(d).reserved_bytes, (9ull << 29));
  for (int i = 0; i < h; i++) ct_release(held[i]);
  ck_assert_ct_ok(ct_empty_cache(d));
  real_proc(mi, st);
  compute_ok(d);
}
END_TEST

/* Kernels before 4.5 have no RssAnon: statm's resident less shared pages. Neither readable: the
 * allocator takes all of R as resident (the new buffer alone is compared, as before). */
START_TEST(test_host_statm_fallback) {
  char status[] = "/tmp/ct-status-XXXXXX", statm[] = "/tmp/ct-statm-XXXXXX";
  int fd = mkstemp(status);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_gt(write(fd, "Name:\tt\nVmRSS:\t1200 kB\n", 23), 0);
  close(fd);
  fd = mkstemp(statm);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_gt(write(fd, "1000 300 100 1 0 50 0\n", 22), 0);
  close(fd);
  ct__alloc_status_path(status, statm);
  uint64_t anon = 0;
  ck_assert_int_eq(ct__alloc_process_anon(&anon), 1);
  ck_assert_uint_eq(anon, 200 * (uint64_t)sysconf(_SC_PAGESIZE));
  unlink(statm);
  ck_assert_int_eq(ct__alloc_process_anon(&anon), 0);
  ct_device *d = virtual_device(4ull << 30);
  if (d) {
    char mi[64];
    fake_meminfo(mi, 4ull << 20, 5ull << 18); /* A - M = 1 GiB */
    ct_tensor *a, *b, *c = NULL;
    int64_t gib = 1ll << 30, over = (1ll << 30) + (2ll << 20);
    ck_assert_ct_ok(ct_empty(&a, d, CT_U8, 1, &gib));
    ck_assert_ct_ok(ct_empty(&b, d, CT_U8, 1, &gib));
    ck_assert_ct_status(ct_empty(&c, d, CT_U8, 1, &over), CT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(strstr(ct_last_error(), "not yet written"));
    ct_release(a);
    ct_release(b);
    unlink(mi);
  }
  real_proc(NULL, status);
}
END_TEST

/* The real files: RssAnon reads, grows when a device buffer is written (PoCL's buffers are this
 * process's anonymous memory), and small allocations succeed under the real rule. Writes 64 MiB. */
START_TEST(test_host_real_files) {
  real_proc(NULL, NULL);
  uint64_t before = 0, after = 0;
  if (!ct__alloc_process_anon(&before)) return; /* no /proc */
  ck_assert_uint_gt(before, 0);
  ct_device *d = ct_test_device();
  ct_tensor *s, *z;
  int64_t small = 100, elems = 16ll << 20; /* 64 MiB of f32 */
  ck_assert_ct_ok(ct_empty(&s, d, CT_U8, 1, &small));
  ck_assert_ct_ok(ct_zeros(&z, d, CT_F32, 1, &elems));
  float h[4];
  ct_tensor *v;
  ck_assert_ct_ok(ct_slice(&v, z, 0, elems - 4, elems, 1));
  ck_assert_ct_ok(ct_to_host(v, h, sizeof h));
  ck_assert_float_eq(h[3], 0.0f);
  ck_assert_int_eq(ct__alloc_process_anon(&after), 1);
  if (ct_device_properties(d)->host_unified_memory)
    ck_assert_msg(after >= before + (32ull << 20), "RssAnon %llu -> %llu after writing 64 MiB",
                  (unsigned long long)before, (unsigned long long)after);
  ct_release(v);
  ct_release(s);
  ct_release(z);
  compute_ok(d);
}
END_TEST

/* CLTENSOR_MEMORY_LIMIT=64MiB: touched tensors (ct_zeros) until CT_ERR_OUT_OF_MEMORY; then
 * release, empty the cache, compute again. Touches at most 64 MiB. */
START_TEST(test_limit_touched) {
  setenv("CLTENSOR_MEMORY_LIMIT", "64MiB", 1);
  ct_device *d = ct_test_device();
  ck_assert_uint_eq(stats(d).limit_bytes, 64 * MIB);
  ct_tensor *held[40];
  int n = 0;
  int64_t elems = 1 << 20; /* 4 MiB of f32 */
  ct_status st = CT_OK;
  while (n < 40 && (st = ct_zeros(&held[n], d, CT_F32, 1, &elems)) == CT_OK) n++;
  ck_assert_ct_status(st, CT_ERR_OUT_OF_MEMORY);
  ck_assert_int_eq(n, 16);
  ck_assert_uint_le(stats(d).reserved_bytes, 64 * MIB);
  ck_assert_error_contains("tried to allocate 4.00 MiB (4194304 bytes), but only 0 bytes remain under the limit of "
                           "64.00 MiB set by $CLTENSOR_MEMORY_LIMIT");
  assert_sizes_once(ct_last_error());
  float h[4];
  int64_t one = 4;
  ct_tensor *v;
  ck_assert_ct_ok(ct_slice(&v, held[n - 1], 0, 0, one, 1));
  ck_assert_ct_ok(ct_to_host(v, h, sizeof h));
  ck_assert_float_eq(h[3], 0.0f);
  ct_release(v);
  for (int i = 0; i < n; i++) ct_release(held[i]);
  ck_assert_ct_ok(ct_empty_cache(d));
  ck_assert_uint_eq(stats(d).reserved_bytes, 0);
  compute_ok(d);
}
END_TEST

/* CLTENSOR_MEMORY_LIMIT=1MiB: small blocks' segments shrink to the room left, so small tensors
 * fit (they used to be refused: a 2 MiB segment never fit under a 1 MiB limit). */
START_TEST(test_limit_below_segment) {
  setenv("CLTENSOR_MEMORY_LIMIT", "1MiB", 1);
  ct_device *d = ct_test_device();
  ct_tensor *x;
  int64_t four = 4;
  ck_assert_ct_ok(ct_zeros(&x, d, CT_F32, 1, &four));
  float h[4] = {1, 1, 1, 1};
  ck_assert_ct_ok(ct_to_host(x, h, sizeof h));
  ck_assert_float_eq(h[0], 0.0f);
  ck_assert_uint_le(stats(d).reserved_bytes, MIB);
  ct_tensor *held[64];
  int n = 0;
  int64_t k64 = 64 * 1024;
  ct_status st = CT_OK;
  while (n < 64 && (st = ct_empty(&held[n], d, CT_U8, 1, &k64)) == CT_OK) n++;
  ck_assert_ct_status(st, CT_ERR_OUT_OF_MEMORY);
  ck_assert_int_eq(n, 15); /* 16 fit in 1 MiB; x's block takes part of one */
  ck_assert_uint_le(stats(d).reserved_bytes, MIB);
  ck_assert_error_contains("tried to allocate 64.00 KiB (65536 bytes)");
  ck_assert_error_contains("remain under the limit of 1.00 MiB set by $CLTENSOR_MEMORY_LIMIT");
  assert_sizes_once(ct_last_error());
  for (int i = 0; i < n; i++) ct_release(held[i]);
  ct_release(x);
  int64_t big = 2 * (int64_t)MIB;
  ck_assert_ct_status(ct_empty(&x, d, CT_U8, 1, &big), CT_ERR_OUT_OF_MEMORY);
  ck_assert_error_contains("remain under the limit of 1.00 MiB");
  ck_assert_ct_ok(ct_empty_cache(d));
  compute_ok(d);
  ck_assert_uint_le(stats(d).peak_reserved_bytes, MIB);
}
END_TEST

/* A limit below the smallest block is refused when read, with a message that says so. */
START_TEST(test_limit_below_block) {
  setenv("CLTENSOR_MEMORY_LIMIT", "100", 1);
  ct_device *d = ct_test_device();
  ct_tensor *t = (ct_tensor *)1;
  int64_t n = 1;
  ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &n), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(t);
  ck_assert_error_contains("$CLTENSOR_MEMORY_LIMIT='100' is below the smallest block");
}
END_TEST

/* Control bytes in the variables are escaped in messages; CLTENSOR_NO_CACHING follows the
 * boolean rule. */
START_TEST(test_env_hostile) {
  ct_device *d = ct_test_device();
  ct_tensor *t;
  int64_t n = 1;
  setenv("CLTENSOR_MEMORY_LIMIT", "12\x1b[31mXB\n", 1);
  ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &n), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("12\\x1b[31mXB\\x0a");
  ck_assert_error_contains("CLTENSOR_MEMORY_LIMIT");
  assert_printable(ct_last_error());
}
END_TEST

START_TEST(test_no_caching_boolean) {
  setenv("CLTENSOR_NO_CACHING", "maybe\x1b", 1);
  ct_device *d = ct_test_device();
  ct_tensor *t;
  int64_t n = 1000;
  ck_assert_ct_status(ct_empty(&t, d, CT_U8, 1, &n), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("$CLTENSOR_NO_CACHING='maybe\\x1b' is not a boolean");
  assert_printable(ct_last_error());
}
END_TEST

START_TEST(test_no_caching_yes) {
  setenv("CLTENSOR_NO_CACHING", "Yes", 1);
  ct_device *d = ct_test_device();
  ct_tensor *x = bytes_tensor(d, 1000);
  ct_release(x);
  ck_assert_uint_eq(stats(d).reserved_bytes, 0);
  setenv("CLTENSOR_NO_CACHING", "off", 1); /* read once per device: no effect now */
  x = bytes_tensor(d, 1000);
  ct_release(x);
  ck_assert_uint_eq(stats(d).reserved_bytes, 0);
}
END_TEST

/* Everything releasable, released after ct_shutdown() (as a garbage-collected binding may):
 * no use-after-free, no leak (checked by ASan and LeakSanitizer in the asan setup); and the
 * library works again afterwards. */
START_TEST(test_release_after_shutdown) {
  ct_device *d = ct_test_device();
  int64_t n = 1000, big = 3 * (int64_t)MIB;
  ct_tensor *small, *large, *view, *twice, *kept, *wrapped, *imported;
  ck_assert_ct_ok(ct_zeros(&small, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_empty(&large, d, CT_U8, 1, &big));
  ck_assert_ct_ok(ct_slice(&view, large, 0, 10, 20, 1));
  ck_assert_ct_ok(ct_zeros(&twice, d, CT_I32, 1, &n));
  ct_retain(twice);
  /* A safetensors container holding its own reference. */
  ct_safetensors *st;
  ck_assert_ct_ok(ct_safetensors_new(&st));
  ck_assert_ct_ok(ct_zeros(&kept, d, CT_F32, 1, &n));
  ck_assert_ct_ok(ct_safetensors_set(st, "w", kept));
  /* A pending (or finished) transfer and pinned memory. */
  static float host[1000];
  ct_event *ev;
  ck_assert_ct_ok(ct_to_host_async(&ev, small, host, sizeof host));
  ct_pinned *pin;
  ck_assert_ct_ok(ct_pinned_alloc(&pin, d, 4096));
  /* A wrapped OpenCL buffer, and a DLPack export and import. */
  cl_context ctx;
  ck_assert_ct_ok(ct_device_cl_context(&ctx, d));
  cl_int err;
  cl_mem mem = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
  ck_assert_ptr_nonnull(mem);
  ck_assert_ct_ok(ct_from_cl_mem(&wrapped, d, mem, 0, CT_F32, 1, (int64_t[]){1024}, NULL));
  DLManagedTensor *exported;
  ck_assert_ct_ok(ct_to_dlpack(&exported, small));
  DLManagedTensor *foreign;
  ck_assert_ct_ok(ct_to_dlpack(&foreign, kept));
  ck_assert_ct_ok(ct_from_dlpack(&imported, foreign, d));

  ct_shutdown();

  ct_release(view);
  ct_release(large); /* its storage goes with the view released first */
  ct_release(twice);
  ct_release(twice);
  ct_release(small);
  ct_safetensors_free(st);
  ct_release(kept);
  ct_event_free(ev);
  ct_pinned_free(pin);
  ct_release(wrapped);
  clReleaseMemObject(mem);
  exported->deleter(exported);
  ct_release(imported); /* calls the producer's deleter: our own export of kept */
  ct_release(NULL);

  /* The library starts again from nothing. */
  ct_device *again = ct_test_device();
  compute_ok(again);
  ck_assert_uint_eq(stats(again).allocated_bytes, 0);
  ct_shutdown();
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
  ck_assert_ct_status(ct_device_get_memory_stats(NULL, d), CT_ERR_INVALID_ARGUMENT);
  ct_memory_stats s = {.size = sizeof s};
  ck_assert_ct_status(ct_device_get_memory_stats(&s, NULL), CT_ERR_INVALID_ARGUMENT);
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
  ck_assert_error_contains("tried to allocate 4.00 MiB (4194304 bytes), but only 2.00 MiB remain under the limit of "
                           "8.00 MiB set by $CLTENSOR_MEMORY_LIMIT");
  ck_assert_error_contains("global memory");
  ck_assert_error_contains("6.00 MiB allocated");
  ck_assert_error_contains("6.00 MiB reserved");
  assert_sizes_once(ct_last_error());
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
  ct_memory_stats s = {.size = sizeof s};
  ck_assert_ct_status(ct_device_get_memory_stats(&s, d), CT_ERR_INVALID_ARGUMENT);
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

/* ct_memory_stats is caller-filled with a leading size: 0 or too small is refused, naming both
 * sizes; a later, larger layout gets this one's bytes, its tail left alone. */
START_TEST(test_stats_size_field) {
  ct_device *d = ct_test_device();
  ct_memory_stats s;
  memset(&s, 0, sizeof s);
  ck_assert_ct_status(ct_device_get_memory_stats(&s, d), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("out->size is 0");
  ck_assert_error_contains("sizeof(ct_memory_stats)");
  s.size = sizeof s - 1;
  ck_assert_ct_status(ct_device_get_memory_stats(&s, d), CT_ERR_INVALID_ARGUMENT);
  struct {
    ct_memory_stats s;
    uint64_t later_field;
  } big;
  memset(&big, 0xab, sizeof big);
  big.s.size = sizeof big;
  ck_assert_ct_ok(ct_device_get_memory_stats(&big.s, d));
  ck_assert_uint_eq(big.s.size, sizeof big.s); /* the bytes filled */
  ck_assert_uint_eq(big.later_field, 0xababababababababull);
  ck_assert_uint_eq(big.s.limit_bytes, stats(d).limit_bytes);
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
    tcase_add_test(tc, test_stats_size_field);
    tcase_add_test(tc, test_oom_text_sizes);
    tcase_add_test(tc, test_default_cap_untouched);
    tcase_add_test(tc, test_limit_above_device);
    tcase_add_test(tc, test_host_available);
    tcase_add_test(tc, test_host_untouched);
    tcase_add_test(tc, test_host_resident);
    tcase_add_test(tc, test_host_statm_fallback);
    tcase_add_test(tc, test_host_real_files);
    tcase_add_test(tc, test_limit_touched);
    tcase_add_test(tc, test_limit_below_segment);
    tcase_add_test(tc, test_limit_below_block);
    tcase_add_test(tc, test_env_hostile);
    tcase_add_test(tc, test_no_caching_boolean);
    tcase_add_test(tc, test_no_caching_yes);
    tcase_add_test(tc, test_release_after_shutdown);
  }
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
