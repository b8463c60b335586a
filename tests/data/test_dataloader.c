/* The data loader (include/cltensor/data.h): batch shapes and order, the last batch and
 * drop_last, every sample exactly once per shuffled epoch with the pairs of tensors kept
 * together, reproducibility with a seed and across set_epoch, views without shuffle, errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ct_test.h"

/* x [N, 2] f32 with x[i] = {i, -i}, y [N] i64 with y[i] = 1000 + i. */
static void dataset(ct_device *d, int64_t N, ct_tensor **x, ct_tensor **y) {
  float *xv = malloc(sizeof(float) * 2 * (size_t)N + 1);
  int64_t *yv = malloc(sizeof(int64_t) * (size_t)N + 1);
  for (int64_t i = 0; i < N; i++) {
    xv[2 * i] = (float)i;
    xv[2 * i + 1] = -(float)i;
    yv[i] = 1000 + i;
  }
  ck_assert_ct_ok(ct_from_host(x, d, CT_F32, 2, (const int64_t[]){N, 2}, xv));
  ck_assert_ct_ok(ct_from_host(y, d, CT_I64, 1, (const int64_t[]){N}, yv));
  free(xv);
  free(yv);
}

/* Reads one batch: checks its shapes and that x and y describe the same samples; appends the
 * sample numbers to order[*k]. */
static void take(ct_tensor **b, int64_t want_rows, int64_t *order, int64_t *k) {
  ck_assert_int_eq(ct_tensor_ndim(b[0]), 2);
  ck_assert_int_eq(ct_tensor_shape(b[0])[0], want_rows);
  ck_assert_int_eq(ct_tensor_shape(b[0])[1], 2);
  ck_assert_int_eq(ct_tensor_ndim(b[1]), 1);
  ck_assert_int_eq(ct_tensor_shape(b[1])[0], want_rows);
  float xv[64];
  int64_t yv[32];
  ck_assert_ct_ok(ct_to_host(b[0], xv, sizeof xv));
  ck_assert_ct_ok(ct_to_host(b[1], yv, sizeof yv));
  for (int64_t r = 0; r < want_rows; r++) {
    ck_assert_float_eq(xv[2 * r + 1], -xv[2 * r]);
    ck_assert_int_eq(yv[r], 1000 + (int64_t)xv[2 * r]);
    order[(*k)++] = (int64_t)xv[2 * r];
  }
}

/* One epoch: the batches' sizes must be sizes[0 .. nb-1]; the samples go to order. */
static void epoch(ct_dataloader *dl, int nb, const int64_t *sizes, int64_t *order) {
  int64_t k = 0;
  ct_tensor *b[2];
  bool more = false;
  for (int i = 0; i < nb; i++) {
    ck_assert_ct_ok(ct_dataloader_next(dl, b, &more));
    ck_assert_msg(more, "the epoch ended after %d batches, expected %d", i, nb);
    take(b, sizes[i], order, &k);
    ct_release(b[0]);
    ct_release(b[1]);
  }
  int64_t e = ct_dataloader_get_epoch(dl);
  ck_assert_ct_ok(ct_dataloader_next(dl, b, &more));
  ck_assert(!more);
  ck_assert_ptr_null(b[0]);
  ck_assert_ptr_null(b[1]);
  ck_assert_int_eq(ct_dataloader_get_epoch(dl), e + 1);
}

START_TEST(in_order_batches_are_views) {
  ct_device *d = ct_test_device();
  ct_tensor *x, *y;
  dataset(d, 10, &x, &y);
  ct_dataloader *dl = NULL;
  ck_assert_ct_ok(ct_dataloader_new(&dl, (ct_tensor *[]){x, y}, 2, 3, false, false, 0));
  ck_assert_int_eq(ct_dataloader_num_batches(dl), 4);
  int64_t order[10];
  for (int e = 0; e < 2; e++) {
    epoch(dl, 4, (const int64_t[]){3, 3, 3, 1}, order);
    for (int i = 0; i < 10; i++) ck_assert_int_eq(order[i], i);
  }
  /* A batch is a view of the dataset: the second one starts 3 rows (6 elements) into x. */
  ct_tensor *b[2];
  bool more;
  ck_assert_ct_ok(ct_dataloader_next(dl, b, &more));
  ct_release(b[0]);
  ct_release(b[1]);
  ck_assert_ct_ok(ct_dataloader_next(dl, b, &more));
  ck_assert_int_eq(ct_tensor_offset(b[0]), 6);
  ck_assert_int_eq(ct_tensor_offset(b[1]), 3);
  ct_release(b[0]);
  ct_release(b[1]);
  ct_dataloader_free(dl);
  /* drop_last: 10 samples in batches of 4 give two. */
  ck_assert_ct_ok(ct_dataloader_new(&dl, (ct_tensor *[]){x, y}, 2, 4, false, true, 0));
  ck_assert_int_eq(ct_dataloader_num_batches(dl), 2);
  epoch(dl, 2, (const int64_t[]){4, 4}, order);
  ct_dataloader_free(dl);
  ct_release(x);
  ct_release(y);
}
END_TEST

/* Every sample exactly once per epoch; epochs differ; the same seed gives the same batches;
 * set_epoch reaches any epoch's order directly. */
START_TEST(shuffled_epochs) {
  ct_device *d = ct_test_device();
  enum { N = 103, BS = 16, NB = 7 };
  ct_tensor *x, *y;
  dataset(d, N, &x, &y);
  ct_dataloader *a = NULL, *b = NULL, *c = NULL;
  ck_assert_ct_ok(ct_dataloader_new(&a, (ct_tensor *[]){x, y}, 2, BS, true, false, 1234));
  ck_assert_ct_ok(ct_dataloader_new(&b, (ct_tensor *[]){x, y}, 2, BS, true, false, 1234));
  ck_assert_int_eq(ct_dataloader_num_batches(a), NB);
  int64_t sizes[NB] = {16, 16, 16, 16, 16, 16, 7};
  int64_t oa[3][N], ob[N];
  for (int e = 0; e < 3; e++) {
    epoch(a, NB, sizes, oa[e]);
    char seen[N] = {0};
    for (int i = 0; i < N; i++) {
      ck_assert_msg(!seen[oa[e][i]], "epoch %d: sample %lld twice", e, (long long)oa[e][i]);
      seen[oa[e][i]] = 1;
    }
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += oa[e][i] == i;
    ck_assert_int_lt(fixed, N / 4); /* shuffled */
  }
  ck_assert(memcmp(oa[0], oa[1], sizeof oa[0]) != 0);
  ck_assert(memcmp(oa[1], oa[2], sizeof oa[1]) != 0);
  /* The same seed: the same order, epoch by epoch. */
  epoch(b, NB, sizes, ob);
  ck_assert(memcmp(oa[0], ob, sizeof ob) == 0);
  /* Epoch 2 directly, on a fresh loader. */
  ck_assert_ct_ok(ct_dataloader_new(&c, (ct_tensor *[]){x, y}, 2, BS, true, false, 1234));
  ck_assert_ct_ok(ct_dataloader_set_epoch(c, 2));
  epoch(c, NB, sizes, ob);
  ck_assert(memcmp(oa[2], ob, sizeof ob) == 0);
  ck_assert_int_eq(ct_dataloader_get_epoch(c), 3);
  /* The order is ct_randperm_seeded(N, seed, epoch)'s. */
  ct_tensor *p = NULL;
  ck_assert_ct_ok(ct_randperm_seeded(&p, d, N, 1234, 1));
  int64_t pv[N];
  ck_assert_ct_ok(ct_to_host(p, pv, sizeof pv));
  ck_assert(memcmp(pv, oa[1], sizeof pv) == 0);
  /* drop_last with shuffle: 6 batches of 16, 96 distinct samples. */
  ct_dataloader *dd = NULL;
  ck_assert_ct_ok(ct_dataloader_new(&dd, (ct_tensor *[]){x, y}, 2, BS, true, true, 99));
  ck_assert_int_eq(ct_dataloader_num_batches(dd), 6);
  epoch(dd, 6, sizes, ob);
  char seen[N] = {0};
  for (int i = 0; i < 96; i++) {
    ck_assert(!seen[ob[i]]);
    seen[ob[i]] = 1;
  }
  ct_dataloader_free(dd);
  ct_release(p);
  ct_dataloader_free(a);
  ct_dataloader_free(b);
  ct_dataloader_free(c);
  ct_release(x);
  ct_release(y);
}
END_TEST

START_TEST(errors) {
  ct_device *d = ct_test_device();
  ct_tensor *x, *y, *z, *s = NULL;
  dataset(d, 10, &x, &y);
  dataset(d, 9, &z, &s);
  ct_release(s);
  ct_dataloader *dl = (ct_dataloader *)1;
  ck_assert_ct_status(ct_dataloader_new(&dl, (ct_tensor *[]){x, z}, 2, 4, true, false, 0), CT_ERR_SHAPE_MISMATCH);
  ck_assert_error_contains("tensors[1] has 9 samples (dim 0) but tensors[0] has 10");
  ck_assert_ptr_null(dl);
  ck_assert_ct_status(ct_dataloader_new(&dl, (ct_tensor *[]){x, y}, 2, 0, true, false, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("batch_size is 0");
  ck_assert_ct_status(ct_dataloader_new(&dl, (ct_tensor *[]){x, NULL}, 2, 4, true, false, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_ct_status(ct_dataloader_new(&dl, (ct_tensor *[]){x}, 0, 4, true, false, 0), CT_ERR_INVALID_ARGUMENT);
  ct_tensor *sc = NULL;
  float v = 1;
  ck_assert_ct_ok(ct_from_host(&sc, d, CT_F32, 0, NULL, &v));
  ck_assert_ct_status(ct_dataloader_new(&dl, (ct_tensor *[]){sc}, 1, 4, true, false, 0), CT_ERR_INVALID_ARGUMENT);
  ck_assert_error_contains("tensors[0] is 0-d");
  ck_assert_ct_ok(ct_dataloader_new(&dl, (ct_tensor *[]){x}, 1, 4, false, false, 0));
  bool more = true;
  ck_assert_ct_status(ct_dataloader_next(dl, NULL, &more), CT_ERR_INVALID_ARGUMENT);
  ck_assert(!more);
  ck_assert_ct_status(ct_dataloader_set_epoch(dl, -1), CT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ct_dataloader_num_batches(NULL), -1);
  ck_assert_int_eq(ct_dataloader_get_epoch(NULL), -1);
  ct_dataloader_free(dl);
  ct_dataloader_free(NULL);
  /* An empty dataset: no batch, epochs still advance. */
  ct_tensor *e0 = NULL;
  ck_assert_ct_ok(ct_empty(&e0, d, CT_F32, 2, (const int64_t[]){0, 3}));
  ck_assert_ct_ok(ct_dataloader_new(&dl, (ct_tensor *[]){e0}, 1, 4, true, false, 0));
  ct_tensor *b = (ct_tensor *)1;
  ck_assert_ct_ok(ct_dataloader_next(dl, &b, &more));
  ck_assert(!more);
  ck_assert_ptr_null(b);
  ck_assert_int_eq(ct_dataloader_get_epoch(dl), 1);
  ct_dataloader_free(dl);
  ct_release(e0);
  ct_release(sc);
  ct_release(x);
  ct_release(y);
  ct_release(z);
}
END_TEST

/* Inside a scope every tensor of a batch is the scope's (the wrapper registers the whole array,
 * ct_dataloader_num_tensors long), so the scope's end releases them all: the device's bytes in
 * use come back to what they were (a leak of batch[1] kept its memory). A call a failed scope
 * skips sets every batch[i] NULL and *more false, so a `while (more)` loop ends. */
START_TEST(batches_belong_to_scopes) {
  ct_device *d = ct_test_device();
  ct_tensor *x, *y;
  dataset(d, 10, &x, &y);
  ct_dataloader *dl = NULL;
  ck_assert_ct_ok(ct_dataloader_new(&dl, (ct_tensor *[]){x, y}, 2, 4, true, false, 7));
  ck_assert_int_eq(ct_dataloader_num_tensors(dl), 2);
  ck_assert_int_eq(ct_dataloader_num_tensors(NULL), -1);
  ct_memory_stats m0 = {.size = sizeof m0}, m1 = {.size = sizeof m1};
  ct_tensor *b[2] = {NULL, NULL};
  bool more = false;
  ck_assert_ct_ok(ct_dataloader_next(dl, b, &more)); /* the loader's prefetch now holds its memory */
  ct_release(b[0]), ct_release(b[1]);
  ck_assert_ct_ok(ct_device_get_memory_stats(&m0, d));
  for (int i = 0; i < 5; i++) {
    ct_scope_begin();
    ck_assert_ct_ok(ct_dataloader_next(dl, b, &more));
    if (more) ck_assert(b[0] && b[1]);
    ck_assert_ct_ok(ct_scope_end());
  }
  ck_assert_ct_ok(ct_device_get_memory_stats(&m1, d));
  ck_assert_int_le(m1.allocated_bytes, m0.allocated_bytes);
  ct_scope_begin();
  ct_tensor *bad = NULL;
  ck_assert_int_ne(ct_reshape(&bad, x, 1, (const int64_t[]){7}), CT_OK); /* the scope fails */
  b[0] = b[1] = (ct_tensor *)1;
  more = true;
  ck_assert_int_ne(ct_dataloader_next(dl, b, &more), CT_OK);
  ck_assert_ptr_null(b[0]);
  ck_assert_ptr_null(b[1]);
  ck_assert(!more);
  ck_assert_int_ne(ct_scope_end(), CT_OK);
  ct_dataloader_free(dl);
  ct_release(x);
  ct_release(y);
}
END_TEST

int main(void) {
  Suite *s = suite_create("data");
  TCase *tc = tcase_create("dataloader");
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, in_order_batches_are_views);
  tcase_add_test(tc, shuffled_epochs);
  tcase_add_test(tc, errors);
  tcase_add_test(tc, batches_belong_to_scopes);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
