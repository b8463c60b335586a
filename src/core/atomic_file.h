/* Writing a file atomically, for every writer in the library (tensor saves, the kernel binary
 * cache, GEMM tuning files): the bytes go to a new temporary file in the target's folder,
 * "<folder>/.ct-<pid>-<counter>.tmp", which is fsync'ed, closed and renamed over the target only
 * after everything is written; the folder is then fsync'ed so the rename itself survives a crash.
 * Until the rename an existing file of that name is untouched, readers see either the old file
 * or the complete new one, and a failure removes the temporary file.
 *
 * Only a regular file (or nothing) is ever replaced: a target that is a FIFO, a device, a
 * socket or a folder, or a symbolic link to one of those, is refused with CT_ERR_IO before
 * anything is written and checked again just before the rename (renaming over /dev/null as
 * root would replace the device node with a plain file). A symbolic link to a regular file, or
 * a dangling one, is replaced by the new file, not written through.
 *
 * This file also holds the one way the library opens a file for reading, ct__open_regular().
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
 * "<fn>: cannot create '<tmp>' (temporary file for '<path>'): <strerror>", or
 * "<fn>: refusing to replace '<path>': it is a FIFO, not a regular file" (and the like).
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

struct stat;

/* Opens path for reading without ever blocking on it and only if it is a regular file: the
 * path is stat'ed first (so a device is never even opened), then opened with O_NONBLOCK (a FIFO
 * put where a file was expected would otherwise block the open, and then the read, forever),
 * checked again with fstat (the path may have changed in between), and O_NONBLOCK is cleared.
 * Returns the descriptor (O_RDONLY | O_CLOEXEC | extra_flags) with *sb filled in; -1 with errno
 * set when stat or open fail; -2 when the path names something other than a regular file,
 * with sb->st_mode telling what (ct__file_kind()). */
int ct__open_regular(const char *path, int extra_flags, struct stat *sb);

/* "a folder", "a FIFO", "a character device", "a block device", "a socket", "a symbolic link",
 * "a regular file" or "a special file", for messages. */
const char *ct__file_kind(mode_t mode);

/* mkdir -p: creates each missing component of the folder path with mode 0700 (existing ones are
 * left as they are). Returns 0 when path is then a folder, else an errno value (ENAMETOOLONG for
 * a path of PATH_MAX bytes or more, ENOTDIR when it exists as something else). For the kernel
 * cache and the GEMM tuning files. */
int ct__mkdirs(const char *path);

#endif
