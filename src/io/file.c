/* Reading files whole-or-error, and atomic writes (temporary file, fsync, rename). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/io.h"

/* strerror() is not thread-safe; the XSI strerror_r is (_POSIX_C_SOURCE, no _GNU_SOURCE). */
static const char *ct__strerror(int err, char *buf, size_t size) {
  if (strerror_r(err, buf, size) != 0) snprintf(buf, size, "error %d", err);
  return buf;
}

ct_status ct__io_malloc(void **out, size_t bytes, const char *fn) {
  /* malloc(0) may return NULL; one byte keeps "NULL means failure" simple for callers. */
  *out = malloc(bytes ? bytes : 1);
  if (!*out)
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of host memory", fn,
                     bytes);
  return CT_OK;
}

int ct__host_is_little_endian(void) {
  const uint16_t one = 1;
  uint8_t first;
  memcpy(&first, &one, 1);
  return first == 1;
}

void ct__byteswap(void *buf, size_t count, size_t elem_size) {
  uint8_t *p = buf;
  for (size_t i = 0; i < count; i++, p += elem_size)
    for (size_t a = 0, b = elem_size - 1; a < b; a++, b--) {
      uint8_t t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

const char *ct__quote(char *buf, size_t size, const void *s, size_t n) {
  const unsigned char *c = s;
  size_t o = 0, i = 0;
  if (size < 8) {
    if (size) buf[0] = '\0';
    return buf;
  }
  for (; i < n && o + 4 + 4 <= size; i++) {
    if (c[i] >= 0x20 && c[i] < 0x7f && c[i] != '\\')
      buf[o++] = (char)c[i];
    else
      o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c[i]);
  }
  if (i < n) memcpy(buf + o, "...", 3), o += 3;
  buf[o] = '\0';
  return buf;
}

void ct__normalize_bool(void *buf, size_t count) {
  uint8_t *p = buf;
  for (size_t i = 0; i < count; i++) p[i] = p[i] != 0;
}

/* ---- reading ---- */

ct_status ct__rfile_open(struct ct__rfile *f, const char *path, const char *fn) {
  char eb[128];
  f->fd = -1;
  f->path = path;
  f->fn = fn;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ct__error(CT_ERR_IO, "%s: cannot open '%s': %s", fn, path,
                     ct__strerror(errno, eb, sizeof eb));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return ct__error(CT_ERR_IO, "%s: cannot stat '%s': %s", fn, path, ct__strerror(e, eb, sizeof eb));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return ct__error(CT_ERR_IO, "%s: cannot read '%s': %s", fn, path,
                     S_ISDIR(sb.st_mode) ? ct__strerror(EISDIR, eb, sizeof eb) : "not a regular file");
  }
  f->fd = fd;
  f->size = (uint64_t)sb.st_size;
  return CT_OK;
}

ct_status ct__rfile_read(struct ct__rfile *f, void *buf, size_t n, uint64_t offset) {
  char eb[128];
  uint8_t *p = buf;
  size_t done = 0;
  while (done < n) {
    if (offset + done > (uint64_t)INT64_MAX)
      return ct__error(CT_ERR_FORMAT, "%s: '%s': read offset %llu is out of range", f->fn, f->path,
                       (unsigned long long)(offset + done));
    size_t chunk = n - done;
    /* Linux reads at most 0x7ffff000 bytes per call; stay well below SSIZE_MAX anyway. */
    if (chunk > ((size_t)1 << 30)) chunk = (size_t)1 << 30;
    ssize_t r = pread(f->fd, p + done, chunk, (off_t)(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ct__error(CT_ERR_IO, "%s: cannot read '%s' at byte %llu: %s", f->fn, f->path,
                       (unsigned long long)(offset + done), ct__strerror(errno, eb, sizeof eb));
    }
    if (r == 0)
      return ct__error(CT_ERR_FORMAT,
                       "%s: '%s' is truncated: wanted bytes [%llu, %llu), the file ends at byte %llu",
                       f->fn, f->path, (unsigned long long)offset, (unsigned long long)(offset + n),
                       (unsigned long long)(offset + done));
    done += (size_t)r;
  }
  return CT_OK;
}

void ct__rfile_close(struct ct__rfile *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
}

/* ---- atomic writing ---- */

static atomic_uint ct__tmp_counter;

ct_status ct__wfile_open(struct ct__wfile *f, const char *path, const char *fn) {
  char eb[128];
  f->fd = -1;
  f->tmp = NULL;
  f->path = path;
  f->fn = fn;
  size_t cap = strlen(path) + 64;
  f->tmp = malloc(cap);
  if (!f->tmp) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  /* The temporary file sits next to the target so that rename() stays within one file system
   * (and is atomic there). O_EXCL never reuses another writer's file; 0666 lets the umask
   * decide the final permissions as for any newly created file. */
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned n = atomic_fetch_add(&ct__tmp_counter, 1u);
    snprintf(f->tmp, cap, "%s.%ld.%u.tmp", path, (long)getpid(), n);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f->fd >= 0) return CT_OK;
    if (errno != EEXIST) break;
  }
  int e = errno;
  ct_status st = ct__error(CT_ERR_IO, "%s: cannot create '%s' (temporary file for '%s'): %s", fn,
                           f->tmp, path, ct__strerror(e, eb, sizeof eb));
  free(f->tmp);
  f->tmp = NULL;
  return st;
}

ct_status ct__wfile_write(struct ct__wfile *f, const void *buf, size_t n) {
  char eb[128];
  const uint8_t *p = buf;
  while (n > 0) {
    size_t chunk = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
    ssize_t w = write(f->fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ct__error(CT_ERR_IO, "%s: cannot write '%s' (temporary file for '%s'): %s", f->fn,
                       f->tmp, f->path, ct__strerror(errno, eb, sizeof eb));
    }
    p += w;
    n -= (size_t)w;
  }
  return CT_OK;
}

void ct__wfile_abort(struct ct__wfile *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  if (f->tmp) unlink(f->tmp);
  free(f->tmp);
  f->tmp = NULL;
}

/* Makes the rename itself durable; best effort, since some file systems refuse fsync on a
 * folder and the data is already safe under one of the two names. */
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

ct_status ct__wfile_commit(struct ct__wfile *f) {
  char eb[128];
  ct_status st = CT_OK;
  if (fsync(f->fd) != 0)
    st = ct__error(CT_ERR_IO, "%s: cannot sync '%s' (temporary file for '%s'): %s", f->fn,
                   f->tmp, f->path, ct__strerror(errno, eb, sizeof eb));
  /* close() can report a deferred write error (NFS), so it is checked too. */
  int fd = f->fd;
  f->fd = -1;
  if (close(fd) != 0 && st == CT_OK)
    st = ct__error(CT_ERR_IO, "%s: cannot write '%s' (temporary file for '%s'): %s", f->fn,
                   f->tmp, f->path, ct__strerror(errno, eb, sizeof eb));
  if (st == CT_OK && rename(f->tmp, f->path) != 0)
    st = ct__error(CT_ERR_IO, "%s: cannot rename '%s' to '%s': %s", f->fn, f->tmp, f->path,
                   ct__strerror(errno, eb, sizeof eb));
  if (st != CT_OK) {
    ct__wfile_abort(f);
    return st;
  }
  free(f->tmp);
  f->tmp = NULL;
  ct__sync_parent(f->path);
  return CT_OK;
}
