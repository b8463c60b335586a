/* Soak: a long run of small ops, each allocating its output, with a rolling window of live
 * tensors so blocks of different sizes and lifetimes churn through the caching allocator.
 * After a warm-up, the device memory the allocator reserves, the OpenCL buffers alive, the host
 * heap and the host RSS must stay flat. Every 61st result is read back and checked in full.
 * argv[1]: the number of ops (meson: 10^5 in suite 'stress', 10^6 in suite 'soak'). */
#include "clcount.h"
#include "ct_test.h"
#include "stress.h"

static long total_ops = 100000;

enum { WINDOW = 8, KINDS = 7 };

/* One op of the given kind on input a (f32 [rows, cols]) or its transposed view at: a new
 * tensor, whose dtype goes to *dt. */
static ct_tensor *one_op(int kind, const ct_tensor *a, const ct_tensor *at, ct_device *d, ct_dtype *dt) {
  ct_tensor *out = NULL;
  switch (kind) {
    case 0:
      ck_assert_ct_ok(ct_cast(&out, a, CT_I32));
      *dt = CT_I32;
      break;
    case 1:
      ck_assert_ct_ok(ct_contiguous(&out, at));
      *dt = CT_F32;
      break;
    case 2:
      ck_assert_ct_ok(ct_cast(&out, at, CT_F16));
      *dt = CT_F16;
      break;
    case 3:
      ck_assert_ct_ok(ct_empty(&out, d, CT_F32, 2, ct_tensor_shape(a)));
      ck_assert_ct_ok(ct_copy(out, a));
      *dt = CT_F32;
      break;
    case 4:
      ck_assert_ct_ok(ct_full(&out, d, CT_F32, 2, ct_tensor_shape(a), 4.0));
      *dt = CT_F32;
      break;
    case 5:
      ck_assert_ct_ok(ct_add(&out, a, a));
      *dt = CT_F32;
      break;
    default:
      ck_assert_ct_ok(ct_mul(&out, at, at));
      *dt = CT_F32;
      break;
  }
  return out;
}

/* Reads out back and compares every element with the host reference of kind on input h. */
static void check_op(const ct_tensor *out, ct_dtype dt, int kind, const float *h, int64_t rows, int64_t cols,
                     long op) {
  int64_t n = rows * cols;
  size_t bytes = (size_t)n * ct_dtype_size(dt);
  unsigned char *buf = malloc(bytes);
  ck_assert_ct_ok(ct_to_host(out, buf, bytes));
  for (int64_t i = 0; i < n; i++) {
    /* Element i of the output; transposed kinds are [cols, rows]. */
    int transposed = kind == 1 || kind == 2 || kind == 6;
    float x = transposed ? h[(i % rows) * cols + i / rows] : h[i];
    float want = kind == 4 ? 4.0f : kind == 5 ? x + x : kind == 6 ? x * x : x;
    float got = dt == CT_I32   ? (float)((const int32_t *)buf)[i]
                : dt == CT_F16 ? ct_f16_to_f32(((const uint16_t *)buf)[i])
                               : ((const float *)buf)[i];
    ck_assert_msg(got == want, "op %ld (kind %d): element %lld is %g, expected %g", op, kind, (long long)i, got, want);
  }
  free(buf);
}

START_TEST(test_soak) {
  ct_device *d = ct_test_device();
  /* Inputs of a few small shapes. */
  enum { SHAPES = 4 };
  const int64_t dims[SHAPES][2] = {{4, 4}, {16, 3}, {1, 64}, {9, 31}};
  ct_tensor *in[SHAPES], *in_t[SHAPES];
  float *h[SHAPES];
  for (int s = 0; s < SHAPES; s++) {
    int64_t n = dims[s][0] * dims[s][1];
    h[s] = malloc((size_t)n * sizeof *h[s]);
    for (int64_t i = 0; i < n; i++) h[s][i] = stress_value((uint32_t)s, i);
    ck_assert_ct_ok(ct_from_host(&in[s], d, CT_F32, 2, dims[s], h[s]));
    ck_assert_ct_ok(ct_transpose(&in_t[s], in[s], 0, 1));
  }
  ct_tensor *window[WINDOW] = {NULL};
  long warmup = total_ops / 20 < 2000 ? (total_ops < 2000 ? total_ops / 2 : 2000) : total_ops / 20;
  uint64_t rss0 = 0, heap0 = 0;
  long mem0 = 0;
  ct_memory_stats s0 = {.size = sizeof s0};
  long checked = 0;
  for (long op = 0; op < total_ops; op++) {
    int s = (int)(op % SHAPES);
    int kind = (int)((op / SHAPES) % KINDS);
    ct_dtype dt = CT_F32;
    ct_tensor *out = one_op(kind, in[s], in_t[s], d, &dt);
    /* 61 is prime to SHAPES * KINDS (28), so every (shape, kind) pair gets checked. */
    if (op % 61 == 0) {
      check_op(out, dt, kind, h[s], dims[s][0], dims[s][1], op);
      checked++;
    }
    ct_release(window[op % WINDOW]);
    window[op % WINDOW] = out;
    if (op + 1 == warmup) {
      ck_assert_ct_ok(ct_device_synchronize(d));
      rss0 = stress_rss_bytes();
      heap0 = stress_heap_bytes();
      mem0 = clcount_live(CLCOUNT_MEM);
      ck_assert_ct_ok(ct_device_get_memory_stats(&s0, d));
    }
  }
  ck_assert_ct_ok(ct_device_synchronize(d));
  uint64_t rss1 = stress_rss_bytes(), heap1 = stress_heap_bytes();
  long mem1 = clcount_live(CLCOUNT_MEM);
  ct_memory_stats s1 = {.size = sizeof s1};
  ck_assert_ct_ok(ct_device_get_memory_stats(&s1, d));
  printf("# %ld ops (%ld checked) after %ld warm-up ops: reserved device memory %llu -> %llu bytes, "
         "OpenCL buffers %ld -> %ld, host heap %llu -> %llu bytes, RSS %llu -> %llu bytes; "
         "%llu allocations, %llu from the cache\n",
         total_ops - warmup, checked, warmup, (unsigned long long)s0.reserved_bytes,
         (unsigned long long)s1.reserved_bytes, mem0, mem1, (unsigned long long)heap0, (unsigned long long)heap1,
         (unsigned long long)rss0, (unsigned long long)rss1, (unsigned long long)s1.alloc_count,
         (unsigned long long)s1.cache_hits);
  /* Bounds: device memory and buffers exactly flat (the same sizes come back from the cache);
   * host heap within 256 KiB (PoCL's per-command bookkeeping is recycled, not grown) and RSS
   * within 8 MiB (thread stacks and fragmentation move it a little). */
  ck_assert_msg(s1.reserved_bytes <= s0.reserved_bytes, "reserved device memory grew: %llu -> %llu",
                (unsigned long long)s0.reserved_bytes, (unsigned long long)s1.reserved_bytes);
  ck_assert_msg(mem1 <= mem0, "OpenCL buffers grew: %ld -> %ld", mem0, mem1);
  const char *skip = ct_test_host_memory_unmeasurable();
  if (skip) printf("# heap and RSS bounds not checked under %s\n", skip);
  ck_assert_msg(skip || (int64_t)heap1 - (int64_t)heap0 <= (256 << 10), "host heap grew: %llu -> %llu",
                (unsigned long long)heap0, (unsigned long long)heap1);
  ck_assert_msg(skip || (int64_t)rss1 - (int64_t)rss0 <= (8 << 20), "host RSS grew: %llu -> %llu", (unsigned long long)rss0,
                (unsigned long long)rss1);
  for (int i = 0; i < WINDOW; i++) ct_release(window[i]);
  for (int s = 0; s < SHAPES; s++) {
    ct_release(in_t[s]);
    ct_release(in[s]);
    free(h[s]);
  }
  ck_assert_ct_ok(ct_device_get_memory_stats(&s1, d));
  ck_assert_uint_eq(s1.allocated_bytes, 0);
  ct_shutdown();
  char counts[256];
  ck_assert_msg(clcount_all_released(), "OpenCL objects still held: %s", clcount_format(counts, sizeof counts));
}
END_TEST

int main(int argc, char **argv) {
  if (argc > 1) total_ops = atol(argv[1]);
  Suite *s = suite_create("soak");
  TCase *tc = tcase_create("soak");
  tcase_set_timeout(tc, 3600);
  tcase_add_test(tc, test_soak);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
