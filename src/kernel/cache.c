/* The on-disk program binary cache (format and rules in cache.h) and SHA-256. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/atomic_file.h"
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

int ct__cache_dir(char *out, size_t cap) {
  const char *off = getenv("CLTENSOR_CACHE");
  if (off && strcmp(off, "0") == 0) return 0;
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

/* mkdir -p, each created component with mode 0700 (existing ones are left as they are). */
static int ct__mkdirs(const char *path) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return 0;
  memcpy(buf, path, n + 1);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return 0;
    *p = '/';
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST) return 0;
  struct stat st;
  return stat(buf, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A folder others can write to could be fed binaries the driver would run: the cache is only
 * used in a folder owned by this user and not writable by group or others. */
static int ct__dir_trusted(const char *dir) {
  struct stat st;
  return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
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

/* ---- Reading ---- */

static uint32_t ct__get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t ct__get_u64(const unsigned char *p) {
  return (uint64_t)ct__get_u32(p) | (uint64_t)ct__get_u32(p + 4) << 32;
}

/* Whole-file read; NULL on any failure. A cache file is never expected beyond 1 GiB, and the
 * cap keeps a garbage file from exhausting memory. */
static unsigned char *ct__read_file(const char *path, size_t *size, int *missing) {
  *missing = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *missing = errno == ENOENT;
    return NULL;
  }
  struct stat st;
  unsigned char *buf = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
      (uint64_t)st.st_size > (1ull << 30))
    goto fail;
  size_t n = (size_t)st.st_size;
  buf = malloc(n ? n : 1);
  if (!buf) goto fail;
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) goto fail; /* shrank under us: treat as unreadable */
    got += (size_t)r;
  }
  close(fd);
  *size = n;
  return buf;
fail:
  free(buf);
  close(fd);
  return NULL;
}

enum ct__cache_result ct__cache_load(const struct ct__cache_key *key, unsigned char **bin,
                                     size_t *len) {
  *bin = NULL;
  *len = 0;
  char dir[PATH_MAX], path[PATH_MAX];
  if (!ct__cache_dir(dir, sizeof dir) || !ct__cache_path(path, sizeof path, key)) return CT__CACHE_OFF;
  struct stat st;
  if (stat(dir, &st) != 0) return CT__CACHE_MISS; /* created by the first store */
  if (!ct__dir_trusted(dir)) return CT__CACHE_OFF;
  size_t size;
  int missing;
  unsigned char *buf = ct__read_file(path, &size, &missing);
  if (!buf) return missing ? CT__CACHE_MISS : CT__CACHE_REJECTED;

  const char *f[CT__CACHE_NFIELDS];
  ct__key_fields(key, f);
  size_t pos = 0;
  if (size < 16 || memcmp(buf, CT__CACHE_MAGIC, 8) != 0 || ct__get_u32(buf + 8) != CT__CACHE_FORMAT ||
      ct__get_u32(buf + 12) != CT__CACHE_NFIELDS)
    goto reject;
  pos = 16;
  for (unsigned i = 0; i < CT__CACHE_NFIELDS; i++) {
    if (size - pos < 4) goto reject;
    size_t flen = ct__get_u32(buf + pos);
    pos += 4;
    if (size - pos < flen || flen != strlen(f[i]) || memcmp(buf + pos, f[i], flen) != 0) goto reject;
    pos += flen;
  }
  if (size - pos < 8 + 32) goto reject;
  uint64_t blen = ct__get_u64(buf + pos);
  pos += 8;
  const unsigned char *sum = buf + pos;
  pos += 32;
  if (blen == 0 || blen != size - pos) goto reject;
  unsigned char digest[32];
  struct ct__sha256 s;
  ct__sha256_init(&s);
  ct__sha256_update(&s, buf + pos, (size_t)blen);
  ct__sha256_final(&s, digest);
  if (memcmp(digest, sum, 32) != 0) goto reject;
  /* Move the binary to the front so the caller owns a plain buffer. */
  memmove(buf, buf + pos, (size_t)blen);
  *bin = buf;
  *len = (size_t)blen;
  return CT__CACHE_HIT;
reject:
  free(buf);
  return CT__CACHE_REJECTED;
}

/* ---- Writing ---- */

static void ct__le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

int ct__cache_store(const struct ct__cache_key *key, const unsigned char *bin, size_t len) {
  char dir[PATH_MAX], path[PATH_MAX];
  if (!bin || len == 0 || !ct__cache_dir(dir, sizeof dir) ||
      !ct__cache_path(path, sizeof path, key))
    return 0;
  if (!ct__mkdirs(dir) || !ct__dir_trusted(dir)) return 0;

  const char *f[CT__CACHE_NFIELDS];
  ct__key_fields(key, f);
  size_t hlen = 16 + 8 + 32;
  for (unsigned i = 0; i < CT__CACHE_NFIELDS; i++) hlen += 4 + strlen(f[i]);
  unsigned char *hdr = malloc(hlen);
  if (!hdr) return 0;
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
  ct__le32(hdr + pos + 4, (uint32_t)((uint64_t)len >> 32));
  pos += 8;
  struct ct__sha256 s;
  ct__sha256_init(&s);
  ct__sha256_update(&s, bin, len);
  ct__sha256_final(&s, hdr + pos);

  /* A quiet writer: a failed store must leave the caller's ct_last_error() as it was. */
  struct ct__afile w;
  int ok = ct__afile_open(&w, path, 0600, NULL) == CT_OK;
  if (ok) {
    ct_status st = ct__afile_write(&w, hdr, hlen);
    if (st == CT_OK) st = ct__afile_write(&w, bin, len);
    ok = ct__afile_finish(&w, st) == CT_OK;
  }
  free(hdr);
  return ok;
}
