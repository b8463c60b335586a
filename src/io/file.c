/* Reading files whole-or-error, and the helpers the formats share. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/host.h"
#include "io/io.h"
#include "tensor/tensor.h"

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

ct_status ct__io_check_target(ct_dtype to, const char *fn) {
  if ((int)to < 0 || (int)to >= CT_DTYPE_COUNT)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dtype %d is not a cltensor dtype", fn, (int)to);
  if (!ct_dtype_is_floating_point(to))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: can convert to a floating-point dtype only (f16, bf16, f32, f64), not %s", fn,
                     ct_dtype_name(to));
  return CT_OK;
}

ct_status ct__io_convert(void **data, size_t count, ct_dtype from, ct_dtype to, const char *fn) {
  if (from == to) return CT_OK;
  size_t fs = ct_dtype_size(from), ts = ct_dtype_size(to);
  void *out;
  /* A wider target (f16 data as f64) can outgrow what the file's own size let through. */
  if (count > SIZE_MAX / ts)
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: %zu elements of %s do not fit in this host's memory", fn, count,
                     ct_dtype_name(to));
  CT__TRY(ct__host_malloc(&out, count * ts, fn));
  const unsigned char *src = *data;
  unsigned char *dst = out;
  for (size_t i = 0; i < count; i++) ct__host_store_double(to, dst + i * ts, ct__host_load_double(from, src + i * fs));
  free(*data);
  *data = out;
  return CT_OK;
}

/* ---- reading ---- */

ct_status ct__rfile_open(struct ct__rfile *f, const char *path, const char *fn) {
  char eb[128];
  f->fd = -1;
  f->path = path;
  f->fn = fn;
  struct stat sb;
  int fd = ct__open_regular(path, 0, &sb);
  if (fd == -2 && S_ISDIR(sb.st_mode))
    return ct__error(CT_ERR_IO, "%s: cannot read '%s': %s", fn, path, ct__strerror(EISDIR, eb, sizeof eb));
  if (fd == -2)
    return ct__error(CT_ERR_IO, "%s: cannot read '%s': it is %s, not a regular file", fn, path,
                     ct__file_kind(sb.st_mode));
  if (fd < 0)
    return ct__error(CT_ERR_IO, "%s: cannot open '%s': %s", fn, path,
                     ct__strerror(errno, eb, sizeof eb));
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

ct_status ct__rfile_header(struct ct__rfile *f, void **header, uint64_t *header_end, size_t pre,
                           ct__header_size_fn size, const char *path, const char *fn) {
  *header = NULL;
  *header_end = 0;
  CT__TRY(ct__rfile_open(f, path, fn));
  uint8_t buf[16];
  if (pre > sizeof buf) pre = sizeof buf;
  size_t npre = f->size < pre ? (size_t)f->size : pre;
  ct_status st = ct__rfile_read(f, buf, npre, 0);
  if (st == CT_OK) st = size(header_end, buf, npre, f->size, path);
  if (st == CT_OK) st = ct__host_malloc(header, (size_t)*header_end, fn);
  if (st == CT_OK) st = ct__rfile_read(f, *header, (size_t)*header_end, 0);
  return st;
}

ct_status ct__header_have(uint64_t *have, size_t len, uint64_t file_size, const char *format, const char *preamble,
                          const char *path, const char *fn) {
  uint64_t h = len < file_size ? len : file_size;
  if (have) *have = h;
  if (h < 8)
    return ct__error(CT_ERR_FORMAT, "%s: '%s' is not %s: %" PRIu64 " bytes, shorter than the 8-byte %s", fn, path,
                     format, h, preamble);
  return CT_OK;
}

ct_status ct__header_end(uint64_t *header_end, ct__header_size_fn size, const void *buf, size_t len,
                         uint64_t file_size, const char *path, const char *fn) {
  CT__TRY(size(header_end, buf, len, file_size, path));
  if (*header_end > len)
    return ct__error(CT_ERR_FORMAT,
                     "%s: '%s' is truncated: the header ends at byte %" PRIu64 ", only %zu bytes are present", fn,
                     path, *header_end, len);
  return CT_OK;
}
