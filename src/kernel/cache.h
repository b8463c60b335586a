/* The on-disk cache of compiled program binaries, and the SHA-256 used for its keys.
 *
 * Location: $CLTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/cltensor, else $HOME/.cache/cltensor;
 * $CLTENSOR_CACHE=0 (or false, no, off: ct__env_bool()'s rule) turns the cache off. Missing
 * folders are created with mode 0700, files with 0600. The trust rules below decide whether a
 * folder, and each file in it, is used at all; they apply to the GEMM tuning files as well.
 *
 * One file per program, named by a digest of its key, "<32 hex digits>.clbin":
 *
 *   offset  size  field
 *   0       8     magic "CTKBIN\r\n" (the CR LF catches text-mode mangling)
 *   8       4     format version (CT__CACHE_FORMAT), little-endian
 *   12      4     number of key fields (CT__CACHE_NFIELDS), little-endian
 *   16      ...   each key field: u32 length (little-endian), then that many bytes, in the order
 *                 of struct ct__cache_key below
 *   ...     8     binary length, little-endian
 *   ...     32    SHA-256 of everything above (magic to binary length), then the binary
 *   ...     n     the binary (what clGetProgramInfo(CL_PROGRAM_BINARIES) returned)
 *
 * A file is used only when every field matches the expected key byte for byte, the binary
 * length equals what is left of the file (at most CT__CACHE_MAX_BYTES in all), and the checksum
 * matches (keyed to the header, it ties the binary to the source, options and device it was
 * built for; it is no signature: the trust rules below keep others from writing entries at
 * all); anything else (a corrupt, truncated, foreign or stale file, or one the trust rules
 * refuse) is ignored and overwritten by the next build. The header is read and compared before
 * the binary, so a large foreign file costs one small read. Writes go to
 * a temporary file in the same folder, are fsync()ed and renamed over the final name, so a
 * reader sees either the old file or the complete new one.
 *
 * Cache I/O never fails an operation: an unwritable folder only means nothing is persisted. */
#ifndef CT_KERNEL_CACHE_H
#define CT_KERNEL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cltensor/status.h"

#define CT__CACHE_MAGIC "CTKBIN\r\n"
#define CT__CACHE_FORMAT 2u /* 2: the checksum covers the header too */
#define CT__CACHE_NFIELDS 9u
/* No program binary comes near this; a file above it is refused without being read. */
#define CT__CACHE_MAX_BYTES (128ull << 20)

/* Everything a compiled binary depends on. */
struct ct__cache_key {
  const char *device_name;
  const char *device_vendor;
  const char *device_version;
  const char *driver_version;
  const char *platform_name;
  const char *platform_version;
  const char *library_version;  /* CT_VERSION_STRING */
  const char *options;          /* the full build options */
  char source_sha256[65];       /* hex digest of the full program text (common.cl + source) */
};

/* ---- SHA-256 ---- */
struct ct__sha256 {
  uint32_t h[8];
  uint64_t len;
  unsigned char buf[64];
  size_t nbuf;
};
void ct__sha256_init(struct ct__sha256 *s);
void ct__sha256_update(struct ct__sha256 *s, const void *data, size_t n);
void ct__sha256_final(struct ct__sha256 *s, unsigned char out[32]);
/* Lowercase hex of a digest; out holds 2 * n + 1 bytes. */
void ct__hex(char *out, const unsigned char *digest, size_t n);

/* ---- Trust: the rules for everything read from the cache folder ----
 * Binaries are handed to the driver and tuning parameters to CLBlast, so both come only from a
 * folder nobody else can write to:
 *  - every symbolic link named in the folder's path must be owned by this user or root (a link
 *    planted by someone else could redirect the cache anywhere, as root into /etc);
 *  - the folder itself, its links resolved (realpath), must be a folder owned by this user (the
 *    effective uid) that group and others cannot write; a sticky 1777 folder is refused too;
 *  - every folder above that real folder must be owned by this user or root and not writable
 *    by group or others unless sticky (/tmp passes), as OpenSSH's secure_path: else whoever can
 *    write there could swap the checked folder for a link between the check and a write;
 *  - each file is opened without following a link and without blocking (a FIFO in its place
 *    must not hang the caller), and must be a regular file, owned by this user, not writable by
 *    group or others, and no larger than the reader's limit.
 * Writers create and write through the folder's real path once it passed the same checks. */
enum ct__trust {
  CT__TRUST_OK,
  CT__TRUST_MISSING,      /* the folder or the file does not exist */
  CT__TRUST_DIR_REFUSED,  /* the folder fails the rules: not used at all */
  CT__TRUST_FILE_REFUSED  /* the file fails them (or cannot be opened) */
};

/* Checks folder dir; on CT__TRUST_OK writes its real path into real (cap bytes). On a refusal
 * writes the reason into why (may be NULL). */
enum ct__trust ct__cache_dir_check(const char *dir, char *real, size_t cap, char *why, size_t why_size);

/* Opens path (a file in a cache folder) for reading under the rules above: on CT__TRUST_OK *fd
 * is open (the caller closes it) and *size is its size, at most max_size. */
enum ct__trust ct__cache_open(const char *path, uint64_t max_size, int *fd, uint64_t *size, char *why,
                              size_t why_size);

/* Reads exactly n bytes; 0 on an error or a short file. */
int ct__read_exact(int fd, void *buf, size_t n);

/* *on = whether $CLTENSOR_CACHE leaves the cache on (ct__env_bool(): unset or empty is on);
 * CT_ERR_INVALID_ARGUMENT naming the variable for a value that is not a boolean. The functions
 * below treat such a value as off, silently; callers that can report it call this. */
ct_status ct__cache_enabled(bool *on);

/* *on = whether $CLTENSOR_CACHE_POCL asks for binaries to be stored on PoCL's CPU driver too
 * (default off, issue #30): there, handing out a program's binary makes PoCL compile a
 * work-group function of unknown local size for every kernel of the program (0.1-0.8 s each,
 * unused kernels included), which no launch runs, since PoCL compiles each kernel again for
 * the local size it is launched with; and PoCL's own kernel cache ($POCL_CACHE_DIR) already
 * keeps the program and those launch-time compilations for the next process. Entries stored
 * earlier are still read. CT_ERR_INVALID_ARGUMENT naming the variable for a non-boolean. */
ct_status ct__cache_pocl_binaries(bool *on);

/* ---- The cache ---- */
enum ct__cache_result {
  CT__CACHE_OFF,       /* $CLTENSOR_CACHE off, no location, or a folder the trust rules refuse */
  CT__CACHE_MISS,      /* no file */
  CT__CACHE_REJECTED,  /* a file was there but failed a check; it will be overwritten */
  CT__CACHE_HIT
};

/* Writes the cache folder's path (as configured, links not resolved) into out (cap bytes);
 * returns 0 when the cache is off, no
 * location can be derived (no $HOME) or the path does not fit. Reads the environment on each
 * call, so a program may change it between builds. */
int ct__cache_dir(char *out, size_t cap);

/* The file path of key's entry in out; returns 0 when the cache is off. */
int ct__cache_path(char *out, size_t cap, const struct ct__cache_key *key);

/* On CT__CACHE_HIT, *bin is a malloc()ed binary of *len bytes (the caller frees it). */
enum ct__cache_result ct__cache_load(const struct ct__cache_key *key, unsigned char **bin,
                                     size_t *len);

/* Persists bin for key; returns 1 when the file was written, 0 otherwise (silently: the cache
 * is an optimisation). */
int ct__cache_store(const struct ct__cache_key *key, const unsigned char *bin, size_t len);

#endif
