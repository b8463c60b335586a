/* The per-device caching allocator (PyTorch's CUDA caching allocator is the model).
 * A block is a byte range [offset, offset + size) of an OpenCL buffer; kernels and transfers
 * address it through (mem, offset), so blocks can be split without sub-buffers. */
#ifndef CT_MEMORY_ALLOC_H
#define CT_MEMORY_ALLOC_H

#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

#include "cltensor/device.h"

typedef struct ct__block {
  cl_mem mem;        /* not owned by the caller */
  size_t offset;     /* bytes into mem; a multiple of the device's base-address alignment */
  size_t size;       /* usable bytes (rounded up from the request) */
  void *priv;        /* allocator bookkeeping */
} ct__block;

/* OUT: *out, a block of at least bytes on d (bytes may be 0: the block is then a real minimal
 * one, so every tensor has a valid cl_mem). b->offset is a multiple of the device's base-address
 * alignment (at least 128 bytes); b->size is the rounded size counted in the statistics.
 * $CLTENSOR_MEMORY_LIMIT / $CLTENSOR_NO_CACHING are read when the device's allocator is created;
 * a malformed value (or a limit below the smallest block) makes every allocation on the device
 * fail with CT_ERR_INVALID_ARGUMENT. Thread-safe.
 * The reserved total never exceeds the cap (the device's global memory, or the lower
 * $CLTENSOR_MEMORY_LIMIT); on a host-unified device a new segment of N bytes is also refused
 * when R + N > A + T - M: R reserved, A MemAvailable, M = max(256 MiB, 5% of MemTotal), T the
 * part of R already resident, min(R, the process's resident anonymous memory); where that
 * cannot be read, T = R. When a new segment does not fit, or OpenCL refuses it:
 * frees the cache, retries once, then CT_ERR_OUT_OF_MEMORY with the request, the reason, and
 * the bytes allocated and reserved. Above the device's max single allocation: the same. */
ct_status ct__alloc(ct__block **out, ct_device *d, size_t bytes);

/* Returns b to its device's cache (or to OpenCL with $CLTENSOR_NO_CACHING=1). NULL: no-op.
 * After ct_shutdown() (the block is from an earlier generation) it frees only b's own
 * bookkeeping: the buffer went with the allocator. */
void ct__free(ct__block *b);

/* For tests: read path instead of /proc/meminfo for the host's available memory (NULL: back to
 * /proc/meminfo). Not thread-safe against allocations in flight; call it first. */
void ct__alloc_meminfo_path(const char *path);

/* For tests: read status (RssAnon) and statm (resident less shared pages, for kernels without
 * RssAnon) instead of /proc/self/status and /proc/self/statm; NULL: back to the real file. Not
 * thread-safe against allocations in flight; call it first. */
void ct__alloc_status_path(const char *status, const char *statm);

/* OUT: *bytes, the process's resident anonymous memory (RssAnon, else statm's resident less
 * shared pages), read from the files above. Returns 0 when neither can be read. */
int ct__alloc_process_anon(uint64_t *bytes);

/* Parses a size string: "1048576", "512MiB", "2GB", "1.5 GiB", "64k"; units B, k/K/KB (1000),
 * KiB (1024), M/MB/MiB, G/GB/GiB, T/TB/TiB, case-insensitive. CT_ERR_INVALID_ARGUMENT quoting
 * the text otherwise (including overflow of 64 bits). Pure: fuzzable without OpenCL. */
ct_status ct__parse_size(uint64_t *out, const char *text);

#endif
