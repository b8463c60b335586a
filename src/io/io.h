/* Internal side of the file formats: pure parsers over memory buffers (no OpenCL, no file
 * access, so they can be fuzzed as they are), and the read helpers the loaders share (the
 * savers write through core/atomic_file.h).
 *
 * Every parser treats its input as hostile: it reads only [buf, buf + len), checks every
 * length, offset and product for overflow before using it, and answers CT_ERR_FORMAT with a
 * message naming the file (the `path` argument, used only for messages), what is wrong and the
 * values involved. Valid files using something cltensor does not have (a NumPy uint32 array,
 * a safetensors I16 tensor, more than CT_MAX_DIMS dims) give CT_ERR_UNSUPPORTED instead. */
#ifndef CT_IO_IO_H
#define CT_IO_IO_H

#include <stddef.h>
#include <stdint.h>

#include "cltensor/io.h"

/* Headers above this size are refused as hostile (the limit safetensors itself uses). */
#define CT__IO_MAX_HEADER 100000000u

/* ---- .npy (npy.c) ---- */

struct ct__npy_header {
  int version;                     /* 1, 2 or 3 (the minor version is always 0) */
  ct_dtype dtype;
  int swap;                        /* 1 when the data's byte order differs from the host's */
  int fortran_order;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  uint64_t data_offset;            /* where the data starts: preamble + header length */
  uint64_t data_bytes;             /* numel * element size */
};

/* OUT: *header_end, the byte count of the preamble and header (where the data starts), from
 * the first len bytes of a file of file_size bytes. len only needs to cover the preamble (12
 * bytes suffice for every version). Checks the magic, the version and that the header length
 * fits in the file and under CT__IO_MAX_HEADER. */
ct_status ct__npy_header_size(uint64_t *header_end, const void *buf, size_t len, uint64_t file_size,
                              const char *path);

/* Parses the preamble and the header dict ({'descr': ..., 'fortran_order': ..., 'shape': ...})
 * from the first len bytes of a file of file_size bytes; len must cover the whole header, and
 * the data (data_offset + data_bytes) must end exactly at file_size. */
ct_status ct__npy_parse_header(struct ct__npy_header *out, const void *buf, size_t len,
                               uint64_t file_size, const char *path);

/* Writes the preamble + header NumPy would write for a little-endian C-order array of this
 * dtype and shape (version 1.0, padded with spaces to a multiple of 64 bytes, ending in '\n')
 * into buf. Returns its length, or 0 when cap is too small. bf16 has no NumPy dtype: 0. */
size_t ct__npy_format_header(char *buf, size_t cap, ct_dtype dtype, int ndim, const int64_t *shape);

/* ---- safetensors (safetensors_header.c: the header parser; safetensors.c: the collection) ---- */

struct ct__st_entry {
  char *name;
  ct_dtype dtype;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  uint64_t begin, end;             /* [begin, end) in the byte buffer after the header */
};

struct ct__st_header {
  uint64_t data_offset;            /* 8 + header length: where the byte buffer starts */
  size_t count;
  struct ct__st_entry *entries;    /* in the header's order */
  size_t meta_count;
  char **meta;                     /* "__metadata__": key0, value0, key1, value1, ... */
};

/* OUT: *header_end, 8 + the header length read from the first 8 bytes of buf, checked against
 * file_size and CT__IO_MAX_HEADER. */
ct_status ct__safetensors_header_size(uint64_t *header_end, const void *buf, size_t len,
                                      uint64_t file_size, const char *path);

/* Parses the length prefix and the JSON header from the first len bytes of a file of
 * file_size bytes; len must cover the header. The text is walked without a tree (cJSON sees one
 * tensor's entry at a time), so time is O(n log n) and memory near the entries' own in the
 * header size; strings must be UTF-8 without NUL (escaped or raw). Checks every entry (dtype, shape, data_offsets
 * matching shape x dtype size) and that the tensors tile the byte buffer exactly: no overlap,
 * no gap, nothing past the end of the file or after the last tensor (as the reference
 * implementation requires). Tensor names must be unique, metadata must map strings to strings.
 * On success the caller frees *out with ct__safetensors_header_free(); on failure *out holds
 * nothing to free. */
ct_status ct__safetensors_parse(struct ct__st_header *out, const void *buf, size_t len,
                                uint64_t file_size, const char *path);
void ct__safetensors_header_free(struct ct__st_header *h);
/* The format's dtype names, indexed by ct_dtype ("F32", "BF16", ...). */
extern const char *const ct__st_names[CT_DTYPE_COUNT];
/* Length of the valid UTF-8 sequence starting s (n bytes available), or 0: no overlong forms,
 * no surrogates, nothing past U+10FFFF. Names and metadata are held to it on load and on set. */
size_t ct__utf8_seq(const char *s, size_t n);

/* ---- files (file.c) ---- */

/* A file opened for reading; the size is taken once at open. */
struct ct__rfile {
  int fd;
  uint64_t size;
  const char *path;                /* borrowed, for messages */
  const char *fn;                  /* the public function, for messages */
};

/* CT_ERR_IO "<fn>: cannot open '<path>': <strerror>" for a missing or unreadable file, and for
 * one that is not a regular file. */
ct_status ct__rfile_open(struct ct__rfile *f, const char *path, const char *fn);
/* Reads exactly n bytes at offset. CT_ERR_FORMAT when the file ends first (a truncated file),
 * CT_ERR_IO for a failing read. */
ct_status ct__rfile_read(struct ct__rfile *f, void *buf, size_t n, uint64_t offset);
void ct__rfile_close(struct ct__rfile *f);
/* How a format finds its header's end in the first len bytes of a file (ct__npy_header_size(),
 * ct__safetensors_header_size()). */
typedef ct_status (*ct__header_size_fn)(uint64_t *header_end, const void *buf, size_t len, uint64_t file_size,
                                        const char *path);
/* The start the loaders share: opens path into f and reads the first pre bytes (at most 16,
 * fewer from a shorter file), from which size() gives the header's end, then the bytes
 * [0, *header_end) into a new host buffer *header (the caller frees it). The caller closes f
 * whatever the result. */
ct_status ct__rfile_header(struct ct__rfile *f, void **header, uint64_t *header_end, size_t pre,
                           ct__header_size_fn size, const char *path, const char *fn);
/* *have (when not NULL): the bytes of a header present, len but at most file_size; CT_ERR_FORMAT "<fn>: '<path>' is
 * not <format>: N bytes, shorter than the 8-byte <preamble>" when fewer than the 8 both formats
 * begin with. */
ct_status ct__header_have(uint64_t *have, size_t len, uint64_t file_size, const char *format, const char *preamble,
                          const char *path, const char *fn);
/* The parsers' first step over a header in memory (len bytes of buf, from a file of file_size
 * bytes): *header_end from size(), CT_ERR_FORMAT "<fn>: '<path>' is truncated: the header ends at
 * byte E, only L bytes are present" when it ends past them. */
ct_status ct__header_end(uint64_t *header_end, ct__header_size_fn size, const void *buf, size_t len,
                         uint64_t file_size, const char *path, const char *fn);

/* ---- shared helpers (file.c; host memory and bools are in core/host.h) ---- */

/* 1 on a little-endian host. */
int ct__host_is_little_endian(void);
/* Reverses the bytes of each of the count elements of elem_size bytes in place. */
void ct__byteswap(void *buf, size_t count, size_t elem_size);
/* Converts the count elements of *data from dtype `from` to the floating-point dtype `to` on the
 * host (through double, as ct__host_store_double rounds: to nearest even), replacing *data by a
 * new buffer (the old one is freed on success; on failure *data is unchanged). */
ct_status ct__io_convert(void **data, size_t count, ct_dtype from, ct_dtype to, const char *fn);
/* CT_ERR_INVALID_ARGUMENT unless `to` is a floating-point dtype (the loaders convert to floats
 * only: converting to an integer would have to choose a rounding and a saturation). */
ct_status ct__io_check_target(ct_dtype to, const char *fn);

/* Copies n bytes of s into buf for a message: printable ASCII as is, anything else (and '\')
 * as \xNN, cut with "..." when buf is too small. Returns buf. */
const char *ct__quote(char *buf, size_t size, const void *s, size_t n);

/* Metadata values of a safetensors collection read as numbers, for the checkpoint readers
 * (optimizers, schedulers, training checkpoints): a missing key or a value that is not the whole
 * of a number in lo..hi is CT_ERR_INVALID_ARGUMENT naming fn, the key and the value. */
ct_status ct__meta_i64(int64_t *out, const ct_safetensors *st, const char *key, int64_t lo, int64_t hi,
                       const char *fn);
ct_status ct__meta_u64(uint64_t *out, const ct_safetensors *st, const char *key, const char *fn);
ct_status ct__meta_double(double *out, const ct_safetensors *st, const char *key, const char *fn);

#endif
