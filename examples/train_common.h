/* The character GPT training example's (train_charlm.c) fixture and reporting helpers: the
 * comparison of a loss with PyTorch's, the fixture's metadata and host copies, and a clock.
 * (Checkpoints are the library's: ct_checkpoint_save/_load, module.h.) */
#ifndef CLTENSOR_EXAMPLES_TRAIN_COMMON_H
#define CLTENSOR_EXAMPLES_TRAIN_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "cltensor/cltensor.h"

double train_now_ms(void);

/* Prints "what: <ct_last_error()>" on stderr and returns 1 (the exit status). */
int train_fail(const char *prog, const char *what);

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
/* The peak of device memory held by tensors since the last ct_memory_reset_peak, in MiB. */
double train_peak_mib(ct_device *d);

#endif
