/* What the two training examples (train_digits.c, train_charlm.c) share: checkpoints (the model's
 * tensors, the optimizer's state, the step count and the random generator's state in one
 * safetensors file), the comparison of a loss with PyTorch's, and a clock. */
#ifndef CLTENSOR_EXAMPLES_TRAIN_COMMON_H
#define CLTENSOR_EXAMPLES_TRAIN_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/cltensor.h"

double train_now_ms(void);

/* Prints "what: <ct_last_error()>" on stderr and returns 1 (the exit status). */
int train_fail(const char *prog, const char *what);

/* Saves tensors ts[0..n) under names[i], opt's state (ct_optimizer_save), the number of steps
 * done and the generator's (seed, offset) (ct_rng_get_state) to path. */
ct_status train_checkpoint_save(const char *path, ct_tensor *const *ts, const char *const *names, int n,
                                const ct_optimizer *opt, int64_t step);
/* Reads a checkpoint of train_checkpoint_save back: copies each tensor into ts[i] (in place,
 * with grad mode off, so parameters stay the optimizer's leaves), loads opt's state, sets the
 * generator's state and *step. */
ct_status train_checkpoint_load(const char *path, ct_device *d, ct_tensor *const *ts, const char *const *names,
                                int n, ct_optimizer *opt, int64_t *step);

/* Whether |got - want| <= rtol * |want|; prints the step's line (and MISMATCH) when verbose or
 * on a mismatch. */
bool train_check_loss(const char *prog, int64_t step, double got, double want, double rtol, bool verbose);

/* The fixture's metadata value for key, or NULL after saying on stderr that it is missing. */
const char *train_meta(const char *prog, const ct_safetensors *f, const char *key);
/* *out = a new host buffer (malloc) with the bytes of f's tensor name; *numel its element
 * count (numel may be NULL). */
ct_status train_host_copy(void **out, const ct_safetensors *f, const char *name, int64_t *numel);
/* The fixture at path loaded onto d; its f64 entries (PyTorch's f64 losses) arrive as f32 on a
 * device without cl_khr_fp64 (rusticl, Intel Arc, Apple): ct_safetensors_load_as. */
ct_status train_fixture_load(ct_safetensors **out, const char *path, ct_device *d);
/* *out = a new host array (malloc) of f's float tensor name as doubles, whatever its dtype. */
ct_status train_host_doubles(double **out, const ct_safetensors *f, const char *name, int64_t *numel);

/* Reads a 0-d or one-element f32 tensor. */
ct_status train_item(double *v, const ct_tensor *t);

/* The peak of device memory held by tensors since the last ct_memory_reset_peak, in MiB. */
double train_peak_mib(ct_device *d);

#endif
