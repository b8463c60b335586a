/* A data loader over tensors (torch.utils.data.DataLoader over a TensorDataset): batches along
 * dim 0 of one or more tensors that share its size, in order or shuffled with a seed, epoch
 * after epoch, each batch prepared while the previous one is used.
 *
 *   ct_tensor *data[] = {images, labels};            // [N, ...] each, on one device
 *   ct_dataloader *dl;
 *   ct_dataloader_new(&dl, data, 2, 64, true, false, 1234);   // shuffle, keep the last batch
 *   for (int epoch = 0; epoch < 10; epoch++) {
 *     ct_tensor *batch[2];
 *     bool more;
 *     while (ct_dataloader_next(dl, batch, &more) == CT_OK && more) {
 *       ...train on batch[0], batch[1]...
 *       ct_release(batch[0]);
 *       ct_release(batch[1]);
 *     }
 *   }
 *   ct_dataloader_free(dl);
 *
 * Order. Without shuffle, epoch after epoch, samples 0, 1, ..., N-1 (PyTorch's
 * SequentialSampler). With shuffle, each epoch is a fresh permutation of all samples
 * (RandomSampler without replacement: every sample exactly once per epoch):
 * ct_randperm_seeded(N, seed, epoch) for epoch 0, 1, ... (random.h), so a seed gives the same
 * batches on every run and device, and epoch e does not depend on how epochs before it were
 * consumed. The order differs from PyTorch's for the same seed (another generator). Batches are
 * consecutive runs of batch_size samples of that order; the last one holds the rest (N mod
 * batch_size samples) unless drop_last drops it (PyTorch's rules).
 *
 * Batches. batch[i] is a NEW tensor (the caller releases it) of tensors[i]'s dtype and device,
 * shape [b, tensors[i]'s other dims]. Shuffled: a contiguous copy made by ct_index_select with
 * the epoch's indices (the permutation is uploaded once per epoch; the index op then needs no
 * device range check). In order: a view of tensors[i] (ct_slice along dim 0; no copy): do not
 * write into it unless changing the dataset is intended.
 *
 * Prefetch. When ct_dataloader_next hands out a batch it enqueues, at once, the gathers of the
 * following one (across the end of an epoch too, making the next epoch's permutation), and
 * keeps them for the next call. The device queue is in order, so these gathers run right after
 * the work already enqueued and before the step the caller enqueues next: the device never waits
 * for the host to assemble a batch, and the next call returns without enqueueing anything. (No
 * host thread: the data already lives on the device, the gather is the whole of the work.)
 * The dataset tensors must not be written while the loader lives.
 *
 * Threads: one thread at a time per loader. */
#ifndef CLTENSOR_DATA_H
#define CLTENSOR_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_dataloader ct_dataloader;

/* Constructor. tensors: n >= 1 tensors of at least one dim, on one device, with one size of
 * dim 0 (N >= 0; the array is copied, each tensor retained). batch_size >= 1. seed: the
 * shuffle's seed (unused without shuffle). Makes nothing on the device yet.
 * OUT: *out (NULL on failure). Returns CT_OK; CT_ERR_INVALID_ARGUMENT (NULL, n < 1, a 0-d
 * tensor, batch_size < 1); CT_ERR_DEVICE_MISMATCH; CT_ERR_SHAPE_MISMATCH naming the sizes of
 * dim 0 that differ; CT_ERR_OUT_OF_MEMORY. */
CT_API ct_status ct_dataloader_new(ct_dataloader **out, ct_tensor *const *tensors, int n, int64_t batch_size,
                                   bool shuffle, bool drop_last, uint64_t seed);
/* Method. The next batch of the current epoch: *more true and batch[0 .. n-1] filled with new
 * tensors; at the end of the epoch *more false, every batch[i] NULL, and the loader moves to the
 * next epoch (the following call starts it). On failure batch[i] are NULL, *more false, and the
 * loader stays at the same batch (a later call tries it again). Returns CT_OK;
 * CT_ERR_INVALID_ARGUMENT for NULL arguments; the statuses of ct_index_select, ct_slice and
 * ct_randperm_seeded. Inside a scope (scope.h) every batch[i] is the scope's, as any result; a
 * call skipped by a failed scope sets every batch[i] NULL and *more false. */
CT_API ct_status ct_dataloader_next(ct_dataloader *dl, ct_tensor **batch, bool *more);
/* The batches of one epoch (len(DataLoader)): ceil(N / batch_size), or floor with drop_last;
 * -1 for NULL. */
CT_API int64_t ct_dataloader_num_batches(const ct_dataloader *dl);
/* The tensors of each batch (ct_dataloader_new's n): the length of ct_dataloader_next's batch
 * array; -1 for NULL. */
CT_API int ct_dataloader_num_tensors(const ct_dataloader *dl);
/* The current epoch (0 first); -1 for NULL. */
CT_API int64_t ct_dataloader_get_epoch(const ct_dataloader *dl);
/* Method. Restarts at the beginning of epoch (>= 0; e.g. when resuming from a checkpoint that
 * saved ct_dataloader_get_epoch): what was prepared ahead is dropped. CT_ERR_INVALID_ARGUMENT for
 * NULL or a negative epoch. */
CT_API ct_status ct_dataloader_set_epoch(ct_dataloader *dl, int64_t epoch);
/* Destructor: releases the loader's references (the tensors live on while the caller holds
 * them). NULL is a no-op. */
CT_API void ct_dataloader_free(ct_dataloader *dl);

#ifdef __cplusplus
}
#endif
#endif
