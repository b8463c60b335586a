/* The launch layer's geometry on plain arrays (src/kernel/launch_geom.h): the one dimension
 * collapser every op uses, element spans, power-of-two rounding. Pure: no device. */
#include "ct_test.h"
#include "kernel/launch_geom.h"

/* Collapses (shape, nst stride arrays) and checks the result against want (ndim, shape, and
 * the strides of each array). */
static void check(int ndim, int64_t *shape, int nst, int64_t (*st)[8], unsigned flags, int want_ndim,
                  const int64_t *want_shape, const int64_t (*want_st)[8]) {
  int64_t *p[4];
  for (int s = 0; s < nst; s++) p[s] = st[s];
  int n = ct__collapse_dims(ndim, shape, nst, p, flags);
  ck_assert_int_eq(n, want_ndim);
  for (int i = 0; i < n; i++) {
    ck_assert_int_eq(shape[i], want_shape[i]);
    for (int s = 0; s < nst; s++) ck_assert_int_eq(st[s][i], want_st[s][i]);
  }
}

/* A contiguous [2, 3, 4] is one dim; size-1 dims go whatever their stride. */
START_TEST(test_contiguous_merges) {
  int64_t shape[8] = {2, 1, 3, 4};
  int64_t st[1][8] = {{12, 99, 4, 1}};
  check(4, shape, 1, st, 0, 1, (const int64_t[]){24}, (const int64_t[][8]){{1}});
}
END_TEST

/* Dims merge only where every operand allows it: a broadcast input (stride 0 on dim 0) keeps
 * dim 0 apart, while dims 1 and 2 merge for both. */
START_TEST(test_merge_needs_every_operand) {
  int64_t shape[8] = {2, 3, 4};
  int64_t st[2][8] = {{12, 4, 1}, {0, 4, 1}};
  check(3, shape, 2, st, 0, 2, (const int64_t[]){2, 12}, (const int64_t[][8]){{12, 1}, {0, 1}});
}
END_TEST

/* A transposed output ([3, 2] with strides [1, 3]) is walked in its memory order with
 * CT__COLLAPSE_ORDER, which then merges it with a matching input into one dim; without the
 * flag the dims stay as given. */
START_TEST(test_order_by_first_operand) {
  int64_t shape[8] = {3, 2};
  int64_t st[2][8] = {{1, 3}, {1, 3}};
  check(2, shape, 2, st, CT__COLLAPSE_ORDER, 1, (const int64_t[]){6}, (const int64_t[][8]){{1}, {1}});
  int64_t shape2[8] = {3, 2};
  int64_t st2[2][8] = {{1, 3}, {1, 3}};
  check(2, shape2, 2, st2, 0, 2, (const int64_t[]){3, 2}, (const int64_t[][8]){{1, 3}, {1, 3}});
  /* Equal strides keep their order (a stable sort): the broadcast dims of a [2, 2] expand. */
  int64_t shape3[8] = {2, 2};
  int64_t st3[1][8] = {{0, 0}};
  check(2, shape3, 1, st3, CT__COLLAPSE_ORDER, 1, (const int64_t[]){4}, (const int64_t[][8]){{0}});
}
END_TEST

/* Three operands, as GEMM batch dims: [2, 3] batches contiguous in a and c, b shared. */
START_TEST(test_three_operands) {
  int64_t shape[8] = {2, 1, 3};
  int64_t st[3][8] = {{30, 7, 10}, {0, 0, 0}, {60, 5, 20}};
  check(3, shape, 3, st, 0, 1, (const int64_t[]){6}, (const int64_t[][8]){{10}, {0}, {20}});
}
END_TEST

/* A size-0 dim: size-1 dims still go, nothing merges; all size 1: 0 dims. */
START_TEST(test_empty_and_scalar) {
  int64_t shape[8] = {2, 0, 1, 4};
  int64_t st[1][8] = {{0, 4, 4, 1}};
  check(4, shape, 1, st, 0, 3, (const int64_t[]){2, 0, 4}, (const int64_t[][8]){{0, 4, 1}});
  int64_t ones[8] = {1, 1};
  int64_t st1[1][8] = {{5, 7}};
  check(2, ones, 1, st1, CT__COLLAPSE_ORDER, 0, NULL, NULL);
  check(0, ones, 1, st1, 0, 0, NULL, NULL);
}
END_TEST

START_TEST(test_span_and_pow2) {
  int64_t first, last;
  ct__elem_span(2, (const int64_t[]){3, 4}, (const int64_t[]){-4, 1}, &first, &last);
  ck_assert_int_eq(first, -8);
  ck_assert_int_eq(last, 3);
  ct__elem_span(0, NULL, NULL, &first, &last);
  ck_assert_int_eq(first, 0);
  ck_assert_int_eq(last, 0);
  const size_t v[] = {0, 1, 2, 3, 1000, 1024, 1025};
  const size_t fl[] = {1, 1, 2, 2, 512, 1024, 1024}, ce[] = {1, 1, 2, 4, 1024, 1024, 2048};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    ck_assert_uint_eq(ct__pow2_floor(v[i]), fl[i]);
    ck_assert_uint_eq(ct__pow2_ceil(v[i]), ce[i]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("kernel-launch-geom");
  TCase *tc = tcase_create("collapse");
  tcase_add_test(tc, test_contiguous_merges);
  tcase_add_test(tc, test_merge_needs_every_operand);
  tcase_add_test(tc, test_order_by_first_operand);
  tcase_add_test(tc, test_three_operands);
  tcase_add_test(tc, test_empty_and_scalar);
  tcase_add_test(tc, test_span_and_pow2);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
