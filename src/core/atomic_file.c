/* Atomic file writes (contract in atomic_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/env.h"
#include "core/error.h"

/* The XSI strerror_r (_POSIX_C_SOURCE without _GNU_SOURCE) returns an int. */
const char *ct__strerror(int err, char *buf, size_t size) {
  if (strerror_r(err, buf, size) != 0) snprintf(buf, size, "error %d", err);
  return buf;
}

const char *ct__file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a special file";
}

int ct__open_regular(const char *path, int extra_flags, struct stat *sb) {
  if (stat(path, sb) != 0) return -1;
  if (!S_ISREG(sb->st_mode)) return -2;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags);
  if (fd < 0) return -1;
  if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
    int e = errno, kind = S_ISREG(sb->st_mode) ? -1 : -2;
    close(fd);
    errno = e;
    return kind;
  }
  /* Regular files ignore O_NONBLOCK; cleared anyway so that nothing downstream sees it. */
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

/* CT_ERR_IO for a failed step (verb) on the temporary file; quiet writers only get the status. */
static ct_status ct__afile_fail(const struct ct__afile *f, const char *verb, int err) {
  /* Paths are escaped (core/env.h): they can come from the environment (the tuning file). */
  char eb[128], et[512], ep[512];
  if (!f->fn) return CT_ERR_IO;
  return ct__error(CT_ERR_IO, "%s: cannot %s '%s' (temporary file for '%s'): %s", f->fn, verb,
                   ct__escape(et, sizeof et, f->tmp), ct__escape(ep, sizeof ep, f->path),
                   ct__strerror(err, eb, sizeof eb));
}

static atomic_uint ct__tmp_counter;

/* CT_ERR_IO when path exists and is not a regular file (after following symbolic links: a link
 * to /dev/null is refused, a link to a regular file or to nothing is replaced by the rename). */
static ct_status ct__afile_check_target(const struct ct__afile *f) {
  struct stat sb;
  if (stat(f->path, &sb) != 0 || S_ISREG(sb.st_mode)) return CT_OK;
  if (!f->fn) return CT_ERR_IO;
  char ep[512];
  return ct__error(CT_ERR_IO, "%s: refusing to replace '%s': it is %s, not a regular file", f->fn,
                   ct__escape(ep, sizeof ep, f->path), ct__file_kind(sb.st_mode));
}

ct_status ct__afile_open(struct ct__afile *f, const char *path, mode_t mode, const char *fn) {
  f->fd = -1;
  f->path = path;
  f->fn = fn;
  f->tmp = NULL;
  CT__TRY(ct__afile_check_target(f));
  /* Next to the target so that rename() stays within one file system (and is atomic there),
   * under a short name of its own: "<target>.<pid>.<n>.tmp" would pass the 255-byte limit on a
   * file name for a target name that is itself valid. The leading dot keeps a half-written
   * file out of `ls` and of globs like *.npy. pid + a process-wide counter keep concurrent
   * writers (threads or processes) apart, and O_EXCL never reuses a file someone else is
   * writing, even a stale one of a recycled pid. */
  const char *slash = strrchr(path, '/');
  size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0, cap = dirlen + 64;
  f->tmp = malloc(cap);
  if (!f->tmp)
    return fn ? ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a file name", fn)
              : CT_ERR_OUT_OF_MEMORY;
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned n = atomic_fetch_add(&ct__tmp_counter, 1u);
    snprintf(f->tmp, cap, "%.*s.ct-%ld-%u.tmp", (int)dirlen, path, (long)getpid(), n);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (f->fd >= 0) return CT_OK;
    if (errno != EEXIST) break;
  }
  ct_status st = ct__afile_fail(f, "create", errno);
  free(f->tmp);
  f->tmp = NULL;
  return st;
}

ct_status ct__afile_write(struct ct__afile *f, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n > 0) {
    /* Linux writes at most 0x7ffff000 bytes per call; stay well below SSIZE_MAX anyway. */
    size_t chunk = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
    ssize_t w = write(f->fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ct__afile_fail(f, "write", errno);
    }
    p += w;
    n -= (size_t)w;
  }
  return CT_OK;
}

void ct__afile_abort(struct ct__afile *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  if (f->tmp) unlink(f->tmp);
  free(f->tmp);
  f->tmp = NULL;
}

ct_status ct__afile_finish(struct ct__afile *f, ct_status st) {
  if (st == CT_OK) return ct__afile_commit(f);
  ct__afile_abort(f);
  return st;
}

static void ct__sync_parent(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  free(dir);
}

ct_status ct__afile_commit(struct ct__afile *f) {
  ct_status st = CT_OK;
  if (fsync(f->fd) != 0) st = ct__afile_fail(f, "sync", errno);
  int fd = f->fd;
  f->fd = -1;
  if (close(fd) != 0 && st == CT_OK) st = ct__afile_fail(f, "write", errno);
  /* Again: something else may have been put there while this file was written. */
  if (st == CT_OK) st = ct__afile_check_target(f);
  if (st == CT_OK && rename(f->tmp, f->path) != 0) {
    char eb[128], et[512], ep[512];
    int e = errno;
    st = !f->fn ? CT_ERR_IO
                : ct__error(CT_ERR_IO, "%s: cannot rename '%s' to '%s': %s", f->fn,
                            ct__escape(et, sizeof et, f->tmp), ct__escape(ep, sizeof ep, f->path),
                            ct__strerror(e, eb, sizeof eb));
  }
  if (st != CT_OK) {
    ct__afile_abort(f);
    return st;
  }
  free(f->tmp);
  f->tmp = NULL;
  ct__sync_parent(f->path);
  return CT_OK;
}

int ct__mkdirs(const char *path) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0) return ENOENT;
  if (n >= sizeof buf) return ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return errno;
    *p = '/';
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST) return errno;
  struct stat st;
  if (stat(buf, &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}
