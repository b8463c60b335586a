/* The on-disk cache of compiled program binaries, and the SHA-256 used for its keys.
 *
 * Location: $CLTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/cltensor, else $HOME/.cache/cltensor;
 * $CLTENSOR_CACHE=0 turns the cache off. Missing folders are created with mode 0700, files with
 * 0600. A folder that is not owned by the user, or that group or others may write to, is not
 * used at all (someone else could plant binaries there).
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
 *   ...     32    SHA-256 of the binary
 *   ...     n     the binary (what clGetProgramInfo(CL_PROGRAM_BINARIES) returned)
 *
 * A file is used only when every field matches the expected key byte for byte, the binary
 * length equals what is left of the file, and the checksum matches; anything else (a corrupt,
 * truncated, foreign or stale file) is ignored and overwritten by the next build. Writes go to
 * a temporary file in the same folder, are fsync()ed and renamed over the final name, so a
 * reader sees either the old file or the complete new one.
 *
 * Cache I/O never fails an operation: an unwritable folder only means nothing is persisted. */
#ifndef CT_KERNEL_CACHE_H
#define CT_KERNEL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define CT__CACHE_MAGIC "CTKBIN\r\n"
#define CT__CACHE_FORMAT 1u
#define CT__CACHE_NFIELDS 9u

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

/* ---- The cache ---- */
enum ct__cache_result {
  CT__CACHE_OFF,       /* $CLTENSOR_CACHE=0, no location, or an untrusted folder */
  CT__CACHE_MISS,      /* no file */
  CT__CACHE_REJECTED,  /* a file was there but failed a check; it will be overwritten */
  CT__CACHE_HIT
};

/* Writes the cache folder's path into out (cap bytes); returns 0 when the cache is off, no
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
