/* The on-disk program binary cache (format and rules in cache.h) and SHA-256. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/env.h"
#include "core/error.h"
#include "kernel/cache.h"

/* ---- SHA-256 (FIPS 180-4) ---- */

static const uint32_t ct__k256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ct__ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void ct__sha256_block(struct ct__sha256 *s, const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ct__ror(w[i - 15], 7) ^ ct__ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ct__ror(w[i - 2], 17) ^ ct__ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
  uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (ct__ror(e, 6) ^ ct__ror(e, 11) ^ ct__ror(e, 25)) + ((e & f) ^ (~e & g)) +
                  ct__k256[i] + w[i];
    uint32_t t2 = (ct__ror(a, 2) ^ ct__ror(a, 13) ^ ct__ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  s->h[0] += a;
  s->h[1] += b;
  s->h[2] += c;
  s->h[3] += d;
  s->h[4] += e;
  s->h[5] += f;
  s->h[6] += g;
  s->h[7] += h;
}

void ct__sha256_init(struct ct__sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->len = 0;
  s->nbuf = 0;
}

void ct__sha256_update(struct ct__sha256 *s, const void *data, size_t n) {
  const unsigned char *p = data;
  s->len += n;
  if (s->nbuf) {
    size_t take = 64 - s->nbuf < n ? 64 - s->nbuf : n;
    memcpy(s->buf + s->nbuf, p, take);
    s->nbuf += take;
    p += take;
    n -= take;
    if (s->nbuf < 64) return;
    ct__sha256_block(s, s->buf);
    s->nbuf = 0;
  }
  for (; n >= 64; p += 64, n -= 64) ct__sha256_block(s, p);
  memcpy(s->buf, p, n);
  s->nbuf = n;
}

void ct__sha256_final(struct ct__sha256 *s, unsigned char out[32]) {
  uint64_t bits = s->len * 8;
  unsigned char pad[72] = {0x80};
  size_t padlen = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
  for (int i = 0; i < 8; i++) pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
  ct__sha256_update(s, pad, padlen + 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (unsigned char)(s->h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
    out[4 * i + 3] = (unsigned char)s->h[i];
  }
}

void ct__hex(char *out, const unsigned char *digest, size_t n) {
  static const char hx[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hx[digest[i] >> 4];
    out[2 * i + 1] = hx[digest[i] & 15];
  }
  out[2 * n] = '\0';
}

/* ---- Location ---- */

ct_status ct__cache_enabled(bool *on) {
  return ct__env_bool("kernel cache", "CLTENSOR_CACHE", true, on);
}

ct_status ct__cache_pocl_binaries(bool *on) {
  return ct__env_bool("kernel cache", "CLTENSOR_CACHE_POCL", false, on);
}

/* As ct__cache_enabled(), quietly: an invalid value means off here (the cache is best-effort and
 * must not clobber the caller's message); ct__cache_enabled() is where it gets reported. */
static bool ct__cache_on(void) {
  const char *v = getenv("CLTENSOR_CACHE");
  if (!v || !*v) return true;
  char saved[512];
  snprintf(saved, sizeof saved, "%s", ct_last_error());
  bool on;
  if (ct__cache_enabled(&on) == CT_OK) return on;
  if (saved[0]) ct__error(CT_OK, "%s", saved);
  else ct_clear_error();
  return false;
}

int ct__cache_dir(char *out, size_t cap) {
  if (!ct__cache_on()) return 0;
  const char *dir = getenv("CLTENSOR_CACHE_DIR");
  int n;
  if (dir && *dir) {
    n = snprintf(out, cap, "%s", dir);
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME");
    /* The XDG spec says relative values are invalid and must be ignored. */
    if (xdg && xdg[0] == '/') {
      n = snprintf(out, cap, "%s/cltensor", xdg);
    } else {
      const char *home = getenv("HOME");
      if (!home || !*home) return 0;
      n = snprintf(out, cap, "%s/.cache/cltensor", home);
    }
  }
  return n > 0 && (size_t)n < cap;
}

/* ---- Trust (rules in cache.h) ---- */

static enum ct__trust ct__refuse(enum ct__trust t, char *why, size_t n, const char *fmt, ...)
    CT__PRINTF(4, 5);
static enum ct__trust ct__refuse(enum ct__trust t, char *why, size_t n, const char *fmt, ...) {
  if (why && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
  }
  return t;
}

/* What an owner and mode must be for anything the library reads from the cache: this user's,
 * and not writable by group or others (whatever the sticky bit: in a 1777 folder others can
 * still add files). NULL when acceptable, else what is wrong. */
static const char *ct__owner_problem(const struct stat *st) {
  if (st->st_uid != geteuid()) return "owned by another user";
  if (st->st_mode & (S_IWGRP | S_IWOTH)) return "writable by group or others";
  return NULL;
}

enum ct__trust ct__cache_dir_check(const char *dir, char *real, size_t cap, char *why, size_t n) {
  /* The folder comes from the environment: escaped in every message (core/env.h). */
  char eb[128], prefix[PATH_MAX], ed[512], ex[512];
  ct__escape(ed, sizeof ed, dir);
  size_t len = strlen(dir);
  if (len == 0 || len >= sizeof prefix)
    return ct__refuse(CT__TRUST_DIR_REFUSED, why, n, "cache folder path too long or empty");
  /* Every symbolic link named in the path must be this user's or root's: a link planted by
   * someone else could send the cache (as root: its writes) anywhere. */
  memcpy(prefix, dir, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (prefix[i] != '/' && prefix[i] != '\0') continue;
    char c = prefix[i];
    prefix[i] = '\0';
    struct stat ls;
    if (lstat(prefix, &ls) != 0) {
      int e = errno;
      prefix[i] = c;
      if (e == ENOENT) return CT__TRUST_MISSING; /* created by the first store */
      return ct__refuse(CT__TRUST_DIR_REFUSED, why, n, "cache folder %s: %s", ed,
                        ct__strerror(e, eb, sizeof eb));
    }
    if (S_ISLNK(ls.st_mode) && ls.st_uid != geteuid() && ls.st_uid != 0)
      return ct__refuse(CT__TRUST_DIR_REFUSED, why, n,
                        "cache folder %s refused: the symbolic link %s is owned by another user", ed,
                        ct__escape(ex, sizeof ex, prefix));
    prefix[i] = c;
  }
  char resolved[PATH_MAX];
  if (!realpath(dir, resolved)) {
    int e = errno;
    if (e == ENOENT) return CT__TRUST_MISSING;
    return ct__refuse(CT__TRUST_DIR_REFUSED, why, n, "cache folder %s: %s", ed,
                      ct__strerror(e, eb, sizeof eb));
  }
  struct stat st;
  if (stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode))
    return ct__refuse(CT__TRUST_DIR_REFUSED, why, n, "cache folder %s (%s) is not a folder", ed,
                      ct__escape(ex, sizeof ex, resolved));
  const char *bad = ct__owner_problem(&st);
  if (bad)
    return ct__refuse(CT__TRUST_DIR_REFUSED, why, n, "cache folder %s%s%s%s refused: %s", ed,
                      strcmp(dir, resolved) ? " (" : "",
                      strcmp(dir, resolved) ? ct__escape(ex, sizeof ex, resolved) : "",
                      strcmp(dir, resolved) ? ")" : "", bad);
  /* Every folder above the real one too (as OpenSSH's secure_path): whoever can write to one of
   * them can rename the checked folder away and put a link (to /etc, say) in its place between
   * this check and a write. Root's or this user's, and writable by group or others only when
   * sticky (/tmp), where nobody can rename what is not theirs. */
  char up[PATH_MAX];
  strcpy(up, resolved);
  for (char *sl = strrchr(up, '/'); sl; sl = strrchr(up, '/')) {
    bool top = sl == up;
    sl[top] = '\0'; /* "/a/b" -> "/a" -> "/" */
    struct stat as;
    if (stat(up, &as) != 0)
      return ct__refuse(CT__TRUST_DIR_REFUSED, why, n, "cache folder %s: its folder %s: %s", dir, up,
                        ct__strerror(errno, eb, sizeof eb));
    if (as.st_uid != geteuid() && as.st_uid != 0)
      return ct__refuse(CT__TRUST_DIR_REFUSED, why, n,
                        "cache folder %s refused: its folder %s is owned by another user", dir, up);
    if ((as.st_mode & (S_IWGRP | S_IWOTH)) && !(as.st_mode & S_ISVTX))
      return ct__refuse(CT__TRUST_DIR_REFUSED, why, n,
                        "cache folder %s refused: its folder %s is writable by group or others and "
                        "not sticky", dir, up);
    if (top) break;
  }
  if (strlen(resolved) >= cap)
    return ct__refuse(CT__TRUST_DIR_REFUSED, why, n, "cache folder path too long: %s",
                      ct__escape(ex, sizeof ex, resolved));
  strcpy(real, resolved);
  return CT__TRUST_OK;
}

enum ct__trust ct__cache_open(const char *path, uint64_t max_size, int *fd, uint64_t *size, char *why,
                              size_t n) {
  *fd = -1;
  *size = 0;
  char dir[PATH_MAX], real[PATH_MAX], file[PATH_MAX], eb[128], ep[512];
  ct__escape(ep, sizeof ep, path); /* under a folder from the environment */
  const char *slash = strrchr(path, '/');
  size_t dl = slash ? (size_t)(slash - path) : 0;
  if (!slash || dl >= sizeof dir)
    return ct__refuse(CT__TRUST_DIR_REFUSED, why, n, "%s: not a path in a cache folder", ep);
  memcpy(dir, path, dl);
  dir[dl ? dl : 1] = '\0';
  if (dl == 0) dir[0] = '/';
  enum ct__trust t = ct__cache_dir_check(dir, real, sizeof real, why, n);
  if (t != CT__TRUST_OK) return t;
  int fl = snprintf(file, sizeof file, "%s%s", real, slash);
  if (fl < 0 || (size_t)fl >= sizeof file)
    return ct__refuse(CT__TRUST_FILE_REFUSED, why, n, "%s: path too long", ep);
  /* ct__open_regular never blocks on a FIFO and never opens a device; O_NOFOLLOW: the file
   * itself is never a link (the folder's links were checked above). */
  struct stat st;
  int f = ct__open_regular(file, O_NOFOLLOW, &st);
  if (f == -2) return ct__refuse(CT__TRUST_FILE_REFUSED, why, n, "%s refused: not a regular file", ep);
  if (f < 0) {
    int e = errno;
    if (e == ENOENT) return CT__TRUST_MISSING;
    if (e == ELOOP)
      return ct__refuse(CT__TRUST_FILE_REFUSED, why, n, "%s is a symbolic link", ep);
    return ct__refuse(CT__TRUST_FILE_REFUSED, why, n, "cannot open %s: %s", ep,
                      ct__strerror(e, eb, sizeof eb));
  }
  const char *bad = ct__owner_problem(&st);
  if (!bad && (st.st_size < 0 || (uint64_t)st.st_size > max_size)) {
    close(f);
    return ct__refuse(CT__TRUST_FILE_REFUSED, why, n, "%s is larger than %llu bytes", ep,
                      (unsigned long long)max_size);
  }
  if (bad) {
    close(f);
    return ct__refuse(CT__TRUST_FILE_REFUSED, why, n, "%s refused: %s", ep, bad);
  }
  *fd = f;
  *size = (uint64_t)st.st_size;
  return CT__TRUST_OK;
}

int ct__read_exact(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0; /* an error, or the file shrank under us */
    got += (size_t)r;
  }
  return 1;
}

static void ct__put_u32(struct ct__sha256 *s, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  ct__sha256_update(s, b, 4);
}

static void ct__key_fields(const struct ct__cache_key *key, const char *f[CT__CACHE_NFIELDS]) {
  f[0] = key->device_name;
  f[1] = key->device_vendor;
  f[2] = key->device_version;
  f[3] = key->driver_version;
  f[4] = key->platform_name;
  f[5] = key->platform_version;
  f[6] = key->library_version;
  f[7] = key->options;
  f[8] = key->source_sha256;
  for (unsigned i = 0; i < CT__CACHE_NFIELDS; i++)
    if (!f[i]) f[i] = "";
}

int ct__cache_path(char *out, size_t cap, const struct ct__cache_key *key) {
  char dir[PATH_MAX];
  if (!ct__cache_dir(dir, sizeof dir)) return 0;
  const char *f[CT__CACHE_NFIELDS];
  ct__key_fields(key, f);
  struct ct__sha256 s;
  ct__sha256_init(&s);
  ct__put_u32(&s, CT__CACHE_FORMAT);
  for (unsigned i = 0; i < CT__CACHE_NFIELDS; i++) {
    size_t len = strlen(f[i]);
    ct__put_u32(&s, (uint32_t)len);
    ct__sha256_update(&s, f[i], len);
  }
  unsigned char digest[32];
  ct__sha256_final(&s, digest);
  char name[33];
  ct__hex(name, digest, 16);
  int n = snprintf(out, cap, "%s/%s.clbin", dir, name);
  return n > 0 && (size_t)n < cap;
}

/* ---- The header ---- */

static void ct__le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t ct__get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t ct__get_u64(const unsigned char *p) {
  return (uint64_t)ct__get_u32(p) | (uint64_t)ct__get_u32(p + 4) << 32;
}

/* The header of key's entry for a binary of len bytes, up to and including the binary length
 * (the checksum's 32 bytes follow, room for them included): malloc()ed, *hlen bytes without
 * the checksum; NULL when out of memory. */
static unsigned char *ct__header(const struct ct__cache_key *key, uint64_t len, size_t *hlen) {
  const char *f[CT__CACHE_NFIELDS];
  ct__key_fields(key, f);
  size_t n = 16 + 8;
  for (unsigned i = 0; i < CT__CACHE_NFIELDS; i++) n += 4 + strlen(f[i]);
  unsigned char *hdr = malloc(n + 32);
  if (!hdr) return NULL;
  memcpy(hdr, CT__CACHE_MAGIC, 8);
  ct__le32(hdr + 8, CT__CACHE_FORMAT);
  ct__le32(hdr + 12, CT__CACHE_NFIELDS);
  size_t pos = 16;
  for (unsigned i = 0; i < CT__CACHE_NFIELDS; i++) {
    size_t flen = strlen(f[i]);
    ct__le32(hdr + pos, (uint32_t)flen);
    memcpy(hdr + pos + 4, f[i], flen);
    pos += 4 + flen;
  }
  ct__le32(hdr + pos, (uint32_t)len);
  ct__le32(hdr + pos + 4, (uint32_t)(len >> 32));
  *hlen = n;
  return hdr;
}

/* The checksum stored after the header: over the header (which holds the whole key: device,
 * driver, library, options, source digest) and then the binary, so that a binary is only
 * accepted under the key it was stored with: another program's binary spliced into an entry,
 * with a checksum of the binary alone, fails. */
static void ct__checksum(const unsigned char *hdr, size_t hlen, const unsigned char *bin, size_t len,
                         unsigned char out[32]) {
  struct ct__sha256 s;
  ct__sha256_init(&s);
  ct__sha256_update(&s, hdr, hlen);
  ct__sha256_update(&s, bin, len);
  ct__sha256_final(&s, out);
}

/* ---- Reading ---- */

enum ct__cache_result ct__cache_load(const struct ct__cache_key *key, unsigned char **bin,
                                     size_t *len) {
  *bin = NULL;
  *len = 0;
  char path[PATH_MAX];
  if (!ct__cache_path(path, sizeof path, key)) return CT__CACHE_OFF;
  int fd;
  uint64_t size;
  switch (ct__cache_open(path, CT__CACHE_MAX_BYTES, &fd, &size, NULL, 0)) {
    case CT__TRUST_OK: break;
    case CT__TRUST_MISSING: return CT__CACHE_MISS;
    case CT__TRUST_DIR_REFUSED: return CT__CACHE_OFF;
    case CT__TRUST_FILE_REFUSED: return CT__CACHE_REJECTED;
  }
  /* The header is read and compared before the binary: a large file that is not ours costs
   * one small read, not its size in memory. */
  enum ct__cache_result res = CT__CACHE_REJECTED;
  size_t hlen = 0;
  unsigned char *want = NULL, *got = NULL, *data = NULL;
  want = ct__header(key, 0, &hlen);
  if (!want || size <= hlen + 32) goto done;
  uint64_t blen = size - hlen - 32;
  ct__le32(want + hlen - 8, (uint32_t)blen);
  ct__le32(want + hlen - 4, (uint32_t)(blen >> 32));
  got = malloc(hlen + 32);
  if (!got || !ct__read_exact(fd, got, hlen + 32) || memcmp(got, want, hlen) != 0 ||
      ct__get_u64(got + hlen - 8) != blen)
    goto done;
  data = malloc((size_t)blen);
  if (!data || !ct__read_exact(fd, data, (size_t)blen)) goto done;
  unsigned char digest[32];
  ct__checksum(got, hlen, data, (size_t)blen, digest);
  if (memcmp(digest, got + hlen, 32) != 0) goto done;
  *bin = data;
  *len = (size_t)blen;
  data = NULL;
  res = CT__CACHE_HIT;
done:
  close(fd);
  free(want);
  free(got);
  free(data);
  return res;
}

/* ---- Writing ---- */

int ct__cache_store(const struct ct__cache_key *key, const unsigned char *bin, size_t len) {
  char dir[PATH_MAX], path[PATH_MAX], real[PATH_MAX];
  if (!bin || len == 0 || !ct__cache_dir(dir, sizeof dir) ||
      !ct__cache_path(path, sizeof path, key))
    return 0;
  if (ct__mkdirs(dir) != 0 || ct__cache_dir_check(dir, real, sizeof real, NULL, 0) != CT__TRUST_OK) return 0;
  /* Written into the folder checked, by its real path. */
  char target[PATH_MAX];
  int tl = snprintf(target, sizeof target, "%s%s", real, strrchr(path, '/'));
  if (tl < 0 || (size_t)tl >= sizeof target) return 0;

  size_t hlen;
  unsigned char *hdr = ct__header(key, len, &hlen);
  if (!hdr) return 0;
  ct__checksum(hdr, hlen, bin, len, hdr + hlen);

  /* A quiet writer: a failed store must leave the caller's ct_last_error() as it was. */
  struct ct__afile w;
  int ok = ct__afile_open(&w, target, 0600, NULL) == CT_OK;
  if (ok) {
    ct_status st = ct__afile_write(&w, hdr, hlen + 32);
    if (st == CT_OK) st = ct__afile_write(&w, bin, len);
    ok = ct__afile_finish(&w, st) == CT_OK;
  }
  free(hdr);
  return ok;
}
