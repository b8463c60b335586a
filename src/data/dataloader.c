/* The data loader (include/cltensor/data.h): batches along dim 0 of a few device tensors, the
 * shuffled ones gathered with ct_index_select through the epoch's ct_randperm_seeded, the next
 * batch's gathers enqueued as soon as a batch is handed out (data.h says why no thread). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/data.h"
#include "cltensor/index.h"
#include "cltensor/random.h"
#include "core/error.h"
#include "tensor/tensor.h"

struct ct_dataloader {
  int n;
  ct_tensor **ts; /* one reference each */
  int64_t N, bs, nb;
  bool shuffle, drop_last;
  uint64_t seed;
  int64_t epoch, batch; /* the next batch to hand out: batch of epoch */
  ct_tensor *perm;      /* the permutation of perm_epoch (shuffle), or NULL */
  int64_t perm_epoch;
  ct_tensor **pre; /* the prepared batch (pre_epoch, pre_batch) when have_pre */
  bool have_pre;
  int64_t pre_epoch, pre_batch;
};

static void release_all(ct_tensor **ts, int n) {
  for (int i = 0; i < n; i++) {
    ct_release(ts[i]);
    ts[i] = NULL;
  }
}

/* out[0 .. n-1]: batch b of epoch e (every entry NULL on failure). */
static ct_status make_batch(ct_dataloader *dl, int64_t e, int64_t b, ct_tensor **out, const char *fn) {
  int64_t start = b * dl->bs, end = start + dl->bs < dl->N ? start + dl->bs : dl->N;
  ct_status st = CT_OK;
  ct_tensor *idx = NULL;
  if (dl->shuffle) {
    if (!dl->perm || dl->perm_epoch != e) {
      ct_release(dl->perm);
      dl->perm = NULL;
      /* The epoch's own stream: epoch e's order does not depend on the epochs before. */
      st = ct_randperm_seeded(&dl->perm, ct_tensor_device(dl->ts[0]), dl->N, dl->seed, (uint64_t)e);
      dl->perm_epoch = e;
    }
    if (st == CT_OK) st = ct_slice(&idx, dl->perm, 0, start, end, 1);
  }
  for (int i = 0; i < dl->n && st == CT_OK; i++)
    st = dl->shuffle ? ct_index_select(&out[i], dl->ts[i], 0, idx) : ct_slice(&out[i], dl->ts[i], 0, start, end, 1);
  ct_release(idx);
  if (st != CT_OK) {
    release_all(out, dl->n);
    ct__error_append(" (in %s, batch %" PRId64 " of epoch %" PRId64 ")", fn, b, e);
  }
  return st;
}

ct_status ct_dataloader_new(ct_dataloader **out, ct_tensor *const *tensors, int n, int64_t batch_size, bool shuffle,
                            bool drop_last, uint64_t seed) {
  const char *fn = "ct_dataloader_new";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, tensors);
  if (n < 1) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %d (expected at least one tensor)", fn, n);
  if (batch_size < 1)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: batch_size is %" PRId64 " (expected batch_size >= 1)", fn,
                     batch_size);
  for (int i = 0; i < n; i++) {
    if (!tensors[i]) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: tensors[%d] is NULL", fn, i);
    if (ct_tensor_ndim(tensors[i]) < 1)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: tensors[%d] is 0-d (expected a dim 0 of samples)", fn, i);
    if (i == 0) continue;
    char name[32];
    snprintf(name, sizeof name, "tensors[%d]", i);
    CT__TRY(ct__check_same_device(fn, "tensors[0]", tensors[0], name, tensors[i]));
    if (tensors[i]->shape[0] != tensors[0]->shape[0])
      return ct__error(CT_ERR_SHAPE_MISMATCH,
                       "%s: tensors[%d] has %" PRId64 " samples (dim 0) but tensors[0] has %" PRId64, fn, i,
                       tensors[i]->shape[0], tensors[0]->shape[0]);
  }
  ct_dataloader *dl = calloc(1, sizeof *dl);
  if (dl) {
    dl->ts = calloc((size_t)n, sizeof *dl->ts);
    dl->pre = calloc((size_t)n, sizeof *dl->pre);
  }
  if (!dl || !dl->ts || !dl->pre) {
    if (dl) {
      free(dl->ts);
      free(dl->pre);
    }
    free(dl);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  dl->n = n;
  for (int i = 0; i < n; i++) dl->ts[i] = ct_retain(tensors[i]);
  dl->N = tensors[0]->shape[0];
  dl->bs = batch_size;
  dl->nb = drop_last ? dl->N / batch_size : dl->N / batch_size + (dl->N % batch_size != 0);
  dl->shuffle = shuffle;
  dl->drop_last = drop_last;
  dl->seed = seed;
  *out = dl;
  return CT_OK;
}

ct_status ct_dataloader_next(ct_dataloader *dl, ct_tensor **batch, bool *more) {
  const char *fn = "ct_dataloader_next";
  CT__CHECK_NOT_NULL(fn, more);
  *more = false;
  CT__CHECK_NOT_NULL(fn, dl);
  CT__CHECK_NOT_NULL(fn, batch);
  for (int i = 0; i < dl->n; i++) batch[i] = NULL;
  if (dl->batch >= dl->nb) { /* the end of the epoch */
    dl->epoch++;
    dl->batch = 0;
    return CT_OK;
  }
  if (dl->have_pre && dl->pre_epoch == dl->epoch && dl->pre_batch == dl->batch) {
    memcpy(batch, dl->pre, sizeof *batch * (size_t)dl->n);
    memset(dl->pre, 0, sizeof *dl->pre * (size_t)dl->n);
    dl->have_pre = false;
  } else {
    release_all(dl->pre, dl->n);
    dl->have_pre = false;
    CT__TRY(make_batch(dl, dl->epoch, dl->batch, batch, fn));
  }
  dl->batch++;
  *more = true;
  /* Prepare the next batch now (the next epoch's first at the end of this one). A failure here
   * is not this call's: the next call makes the batch again and reports it. */
  int64_t ne = dl->batch < dl->nb ? dl->epoch : dl->epoch + 1, nbi = dl->batch < dl->nb ? dl->batch : 0;
  if (dl->nb > 0 && make_batch(dl, ne, nbi, dl->pre, fn) == CT_OK) {
    dl->have_pre = true;
    dl->pre_epoch = ne;
    dl->pre_batch = nbi;
  }
  return CT_OK;
}

int64_t ct_dataloader_num_batches(const ct_dataloader *dl) { return dl ? dl->nb : -1; }

int ct_dataloader_num_tensors(const ct_dataloader *dl) { return dl ? dl->n : -1; }

int64_t ct_dataloader_get_epoch(const ct_dataloader *dl) { return dl ? dl->epoch : -1; }

ct_status ct_dataloader_set_epoch(ct_dataloader *dl, int64_t epoch) {
  const char *fn = "ct_dataloader_set_epoch";
  CT__CHECK_NOT_NULL(fn, dl);
  if (epoch < 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: epoch is %" PRId64 " (expected >= 0)", fn, epoch);
  release_all(dl->pre, dl->n);
  dl->have_pre = false;
  dl->epoch = epoch;
  dl->batch = 0;
  return CT_OK;
}

void ct_dataloader_free(ct_dataloader *dl) {
  if (!dl) return;
  release_all(dl->ts, dl->n);
  release_all(dl->pre, dl->n);
  ct_release(dl->perm);
  free(dl->ts);
  free(dl->pre);
  free(dl);
}
