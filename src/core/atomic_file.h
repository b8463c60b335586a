/* Writing a file atomically, for every writer in the library (tensor saves, the kernel binary
 * cache, GEMM tuning files): the bytes go to a new temporary file in the target's folder,
 * "<path>.<pid>.<counter>.tmp", which is fsync'ed, closed and renamed over the target only after
 * everything is written; the folder is then fsync'ed so the rename itself survives a crash.
 * Until the rename an existing file of that name is untouched, readers see either the old file
 * or the complete new one, and a failure removes the temporary file.
 *
 *   struct ct__afile f;
 *   CT__TRY(ct__afile_open(&f, path, 0666, "ct_save_npy"));
 *   ct_status st = ct__afile_write(&f, buf, n);
 *   return ct__afile_finish(&f, st);   (commits if st is CT_OK, else removes the temporary file)
 */
#ifndef CT_CORE_ATOMIC_FILE_H
#define CT_CORE_ATOMIC_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "cltensor/status.h"

struct ct__afile {
  int fd;
  char *tmp;        /* the temporary file's path (owned) */
  const char *path; /* borrowed: the target */
  const char *fn;   /* borrowed: the public function for messages; NULL for a quiet writer */
};

/* Creates the temporary file with permissions mode (before the umask; it becomes the target's
 * mode). Failures return CT_ERR_IO (CT_ERR_OUT_OF_MEMORY for the name) with a message
 * "<fn>: cannot create '<tmp>' (temporary file for '<path>'): <strerror>".
 *
 * fn == NULL makes a quiet writer: every call of this writer still returns its status but
 * leaves the thread's ct_last_error() untouched. Best-effort writers (the kernel cache) use it
 * rather than saving and restoring the message around each call: no 16 KiB copy per store, and
 * a failure that nobody reports has no message to format at all. */
ct_status ct__afile_open(struct ct__afile *f, const char *path, mode_t mode, const char *fn);
/* Appends n bytes. On failure the caller still calls ct__afile_abort(). */
ct_status ct__afile_write(struct ct__afile *f, const void *buf, size_t n);
/* fsync, close (checked: NFS reports deferred write errors there), rename over the target, then
 * fsync the folder (best effort: some file systems refuse it, and the data is already safe
 * under one of the two names). On failure the temporary file is removed; either way f is done. */
ct_status ct__afile_commit(struct ct__afile *f);
/* Closes and removes the temporary file (after a failure elsewhere). */
void ct__afile_abort(struct ct__afile *f);
/* The usual ending: ct__afile_commit() when st is CT_OK (its status is returned), else
 * ct__afile_abort() and st. */
ct_status ct__afile_finish(struct ct__afile *f, ct_status st);

/* strerror() is not thread-safe; this is, for messages about files. Returns buf. */
const char *ct__strerror(int err, char *buf, size_t size);

#endif
