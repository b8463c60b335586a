/* NumPy .npy files: the format (versions 1.0, 2.0, 3.0), its header dict, load and save.
 *
 * Layout: "\x93NUMPY", major, minor, a little-endian header length (2 bytes in 1.0, 4 in 2.0
 * and 3.0), then the header: a Python dict literal with exactly the keys 'descr',
 * 'fortran_order' and 'shape', padded with spaces and ended by '\n' (ASCII/latin-1 in 1.0 and
 * 2.0, UTF-8 in 3.0; the values cltensor accepts are all ASCII). The data follows, C or Fortran
 * order, in the byte order 'descr' names. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/host.h"
#include "io/io.h"
#include "tensor/tensor.h"

#define CT__NPY_LOAD "ct_npy_load"

static const uint8_t ct__npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* NumPy's type codes for cltensor's dtypes, without the byte-order character. bf16 has none. */
static const char *const ct__npy_codes[CT_DTYPE_COUNT] = {
    [CT_BOOL] = "b1", [CT_U8] = "u1",  [CT_I8] = "i1",  [CT_I32] = "i4", [CT_I64] = "i8",
    [CT_F16] = "f2",  [CT_BF16] = NULL, [CT_F32] = "f4", [CT_F64] = "f8",
    [CT_I16] = "i2",  [CT_U16] = "u2",  [CT_U32] = "u4", [CT_U64] = "u8",
};

static uint64_t ct__le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

ct_status ct__npy_header_size(uint64_t *header_end, const void *buf, size_t len, uint64_t file_size,
                              const char *path) {
  const uint8_t *p = buf;
  uint64_t have;
  CT__TRY(ct__header_have(&have, len, file_size, "an .npy file", "magic and version", path, CT__NPY_LOAD));
  if (memcmp(p, ct__npy_magic, sizeof ct__npy_magic) != 0)
    return ct__error(CT_ERR_FORMAT,
                     CT__NPY_LOAD ": '%s' is not an .npy file (bad magic): it starts with bytes "
                                  "%02x %02x %02x %02x %02x %02x, not the magic 93 4e 55 4d 50 59 "
                                  "(\"\\x93NUMPY\")",
                     path, p[0], p[1], p[2], p[3], p[4], p[5]);
  unsigned major = p[6], minor = p[7];
  if (major < 1 || major > 3 || minor != 0)
    return ct__error(CT_ERR_FORMAT,
                     CT__NPY_LOAD ": '%s': .npy format version %u.%u is not one of 1.0, 2.0, 3.0",
                     path, major, minor);
  int nlen = major == 1 ? 2 : 4;
  if (have < 8u + (unsigned)nlen)
    return ct__error(CT_ERR_FORMAT,
                     CT__NPY_LOAD ": '%s' is truncated: the version %u.0 preamble needs %d bytes, "
                                  "the file has %" PRIu64,
                     path, major, 8 + nlen, have);
  uint64_t hlen = ct__le(p + 8, nlen), pre = 8u + (unsigned)nlen;
  if (hlen > CT__IO_MAX_HEADER)
    return ct__error(CT_ERR_FORMAT,
                     CT__NPY_LOAD ": '%s': header length %" PRIu64 " exceeds the limit of %u bytes",
                     path, hlen, CT__IO_MAX_HEADER);
  if (hlen > file_size - pre)
    return ct__error(CT_ERR_FORMAT,
                     CT__NPY_LOAD ": '%s' is truncated: the header is %" PRIu64
                                  " bytes from byte %" PRIu64 ", the file has %" PRIu64 " bytes",
                     path, hlen, pre, file_size);
  *header_end = pre + hlen;
  return CT_OK;
}

/* ---- the header dict ---- */

struct ct__npy_lex {
  const char *p, *begin, *end;
  const char *path;
};

static void ct__npy_ws(struct ct__npy_lex *x) {
  while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r'))
    x->p++;
}

/* An error at the lexer's position, quoting the header so that the message shows what the file
 * really says. */
static ct_status ct__npy_syntax(struct ct__npy_lex *x, const char *expected) {
  char quoted[200];
  return ct__error(CT_ERR_FORMAT,
                   CT__NPY_LOAD ": '%s': malformed .npy header at byte %td of the header: "
                                "expected %s; header: \"%s\"",
                   x->path, x->p - x->begin, expected,
                   ct__quote(quoted, sizeof quoted, x->begin, (size_t)(x->end - x->begin)));
}

static int ct__npy_eat(struct ct__npy_lex *x, char c) {
  ct__npy_ws(x);
  if (x->p < x->end && *x->p == c) {
    x->p++;
    return 1;
  }
  return 0;
}

/* A quoted string without escapes (the only kind NumPy writes for these keys and values). */
static int ct__npy_string(struct ct__npy_lex *x, const char **s, size_t *n) {
  ct__npy_ws(x);
  if (x->p >= x->end || (*x->p != '\'' && *x->p != '"')) return 0;
  char q = *x->p;
  const char *start = x->p + 1;
  for (const char *c = start; c < x->end; c++) {
    if (*c == '\\' || *c == '\n') return 0;
    if (*c == q) {
      *s = start;
      *n = (size_t)(c - start);
      x->p = c + 1;
      return 1;
    }
  }
  return 0;
}

static int ct__npy_word(struct ct__npy_lex *x, const char *w) {
  ct__npy_ws(x);
  size_t n = strlen(w);
  if ((size_t)(x->end - x->p) < n || memcmp(x->p, w, n) != 0) return 0;
  const char *after = x->p + n;
  if (after < x->end && (*after == '_' || (*after >= 'a' && *after <= 'z') ||
                         (*after >= 'A' && *after <= 'Z') || (*after >= '0' && *after <= '9')))
    return 0;
  x->p = after;
  return 1;
}

/* A non-negative decimal integer; Python 2 wrote a long suffix (3L), which NumPy still reads. */
static ct_status ct__npy_int(struct ct__npy_lex *x, int64_t *v) {
  ct__npy_ws(x);
  if (x->p >= x->end || *x->p < '0' || *x->p > '9') return ct__npy_syntax(x, "a dimension (integer)");
  const char *start = x->p;
  uint64_t acc = 0;
  while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
    unsigned digit = (unsigned)(*x->p - '0');
    if (acc > ((uint64_t)INT64_MAX - digit) / 10) {
      x->p = start;
      return ct__npy_syntax(x, "a dimension below 2^63");
    }
    acc = acc * 10 + digit;
    x->p++;
  }
  if (x->p < x->end && (*x->p == 'L' || *x->p == 'l')) x->p++;
  *v = (int64_t)acc;
  return CT_OK;
}

static ct_status ct__npy_shape(struct ct__npy_lex *x, struct ct__npy_header *h) {
  if (!ct__npy_eat(x, '(')) return ct__npy_syntax(x, "'(' starting the shape tuple");
  h->ndim = 0;
  int trailing_comma = 0;
  while (!ct__npy_eat(x, ')')) {
    if (h->ndim > 0 && !trailing_comma) return ct__npy_syntax(x, "',' or ')' in the shape tuple");
    if (h->ndim == CT_MAX_DIMS)
      return ct__error(CT_ERR_UNSUPPORTED,
                       CT__NPY_LOAD ": '%s': the array has more than %d dims, cltensor's limit",
                       x->path, CT_MAX_DIMS);
    CT__TRY(ct__npy_int(x, &h->shape[h->ndim]));
    h->ndim++;
    trailing_comma = ct__npy_eat(x, ',');
  }
  /* (3) is the integer 3 in Python, not a tuple: NumPy writes (3,). */
  if (h->ndim == 1 && !trailing_comma) return ct__npy_syntax(x, "',' in a one-element tuple");
  return CT_OK;
}

static ct_status ct__npy_descr(struct ct__npy_header *h, const char *s, size_t n, const char *path) {
  char q[80];
  h->swap = 0;
  if (n >= 3 && n <= 4 && strchr("<>|=", s[0]) != NULL) {
    for (int t = 0; t < CT_DTYPE_COUNT; t++) {
      const char *code = ct__npy_codes[t];
      if (!code || strlen(code) != n - 1 || memcmp(code, s + 1, n - 1) != 0) continue;
      size_t size = ct_dtype_size((ct_dtype)t);
      if (size > 1 && s[0] == '|')
        return ct__error(CT_ERR_FORMAT,
                         CT__NPY_LOAD ": '%s': dtype '%s' is not valid: byte order '|' is only "
                                      "for one-byte types",
                         path, ct__quote(q, sizeof q, s, n));
      int big = s[0] == '>' || (s[0] == '=' && !ct__host_is_little_endian());
      h->swap = size > 1 && big == ct__host_is_little_endian();
      h->dtype = (ct_dtype)t;
      return CT_OK;
    }
  }
  /* A type NumPy has and cltensor hasn't ('<c8', '|O', '<U8', '<M8[ns]') is a valid file
   * cltensor can't hold; anything else is not a dtype at all. */
  int numpy_like = n >= 2 && strchr("<>|=", s[0]) != NULL && strchr("biufcmMOSUVa", s[1]) != NULL;
  for (size_t i = 2; numpy_like && i < n; i++)
    numpy_like = (s[i] >= '0' && s[i] <= '9') || s[i] == '[' || s[i] == ']' ||
                 (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z');
  return ct__error(numpy_like ? CT_ERR_UNSUPPORTED : CT_ERR_FORMAT,
                   CT__NPY_LOAD ": '%s': %s dtype '%s' (cltensor reads |b1, |u1, |i1, i4, i8, f2, "
                                "f4, f8 in either byte order)",
                   path, numpy_like ? "unsupported" : "invalid", ct__quote(q, sizeof q, s, n));
}

ct_status ct__npy_parse_header(struct ct__npy_header *out, const void *buf, size_t len,
                               uint64_t file_size, const char *path) {
  memset(out, 0, sizeof *out);
  uint64_t header_end;
  CT__TRY(ct__header_end(&header_end, ct__npy_header_size, buf, len, file_size, path, CT__NPY_LOAD));
  const uint8_t *p = buf;
  out->version = p[6];
  size_t pre = out->version == 1 ? 10 : 12;
  struct ct__npy_lex x = {(const char *)p + pre, (const char *)p + pre, (const char *)p + header_end,
                          path};
  int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
  char q[80];
  if (!ct__npy_eat(&x, '{')) return ct__npy_syntax(&x, "'{' starting the header dict");
  int need_comma = 0;
  while (!ct__npy_eat(&x, '}')) {
    if (need_comma && !ct__npy_eat(&x, ',')) return ct__npy_syntax(&x, "',' or '}'");
    if (ct__npy_eat(&x, '}')) break;
    const char *key;
    size_t kn;
    if (!ct__npy_string(&x, &key, &kn)) return ct__npy_syntax(&x, "a quoted key");
    if (!ct__npy_eat(&x, ':')) return ct__npy_syntax(&x, "':' after the key");
    int *seen;
    if (kn == 5 && memcmp(key, "descr", 5) == 0) {
      seen = &seen_descr;
      const char *v;
      size_t vn;
      ct__npy_ws(&x);
      if (x.p < x.end && *x.p == '[')
        return ct__error(CT_ERR_UNSUPPORTED,
                         CT__NPY_LOAD ": '%s': structured (record) dtypes are not supported", path);
      if (!ct__npy_string(&x, &v, &vn)) return ct__npy_syntax(&x, "a quoted dtype string for 'descr'");
      if (!seen_descr) CT__TRY(ct__npy_descr(out, v, vn, path));
    } else if (kn == 13 && memcmp(key, "fortran_order", 13) == 0) {
      seen = &seen_fortran;
      if (ct__npy_word(&x, "True"))
        out->fortran_order = 1;
      else if (ct__npy_word(&x, "False"))
        out->fortran_order = 0;
      else
        return ct__npy_syntax(&x, "True or False for 'fortran_order'");
    } else if (kn == 5 && memcmp(key, "shape", 5) == 0) {
      seen = &seen_shape;
      CT__TRY(ct__npy_shape(&x, out));
    } else {
      return ct__error(CT_ERR_FORMAT,
                       CT__NPY_LOAD ": '%s': unexpected key '%s' in the .npy header (expected "
                                    "'descr', 'fortran_order', 'shape')",
                       path, ct__quote(q, sizeof q, key, kn));
    }
    if (*seen)
      return ct__error(CT_ERR_FORMAT, CT__NPY_LOAD ": '%s': key '%s' appears twice in the .npy header",
                       path, ct__quote(q, sizeof q, key, kn));
    *seen = 1;
    need_comma = 1;
  }
  ct__npy_ws(&x);
  if (x.p != x.end) return ct__npy_syntax(&x, "only spaces after the header dict");
  if (!seen_descr || !seen_fortran || !seen_shape)
    return ct__error(CT_ERR_FORMAT, CT__NPY_LOAD ": '%s': the .npy header lacks %s", path,
                     !seen_descr ? "'descr'" : !seen_fortran ? "'fortran_order'" : "'shape'");

  char sb[256];
  uint64_t numel = 1;
  for (int i = 0; i < out->ndim; i++) {
    uint64_t dim = (uint64_t)out->shape[i];
    if (dim == 0) continue;
    if (numel > (uint64_t)INT64_MAX / dim)
      return ct__error(CT_ERR_FORMAT,
                       CT__NPY_LOAD ": '%s': shape %s has more than 2^63 elements", path,
                       ct__shape_str(sb, sizeof sb, out->ndim, out->shape));
    numel *= dim;
  }
  for (int i = 0; i < out->ndim; i++)
    if (out->shape[i] == 0) numel = 0;
  size_t size = ct_dtype_size(out->dtype);
  if (numel > (uint64_t)INT64_MAX / size)
    return ct__error(CT_ERR_FORMAT,
                     CT__NPY_LOAD ": '%s': shape %s of %s is more than 2^63 bytes", path,
                     ct__shape_str(sb, sizeof sb, out->ndim, out->shape), ct_dtype_name(out->dtype));
  out->data_offset = header_end;
  out->data_bytes = numel * size;
  uint64_t avail = file_size - header_end;
  if (out->data_bytes != avail)
    return ct__error(CT_ERR_FORMAT,
                     CT__NPY_LOAD ": '%s' %s: shape %s of %s needs %" PRIu64
                                  " data bytes from byte %" PRIu64 ", the file has %" PRIu64,
                     path, out->data_bytes > avail ? "is truncated" : "has trailing bytes",
                     ct__shape_str(sb, sizeof sb, out->ndim, out->shape), ct_dtype_name(out->dtype),
                     out->data_bytes, header_end, avail);
  return CT_OK;
}

size_t ct__npy_format_header(char *buf, size_t cap, ct_dtype dtype, int ndim, const int64_t *shape) {
  if ((unsigned)dtype >= CT_DTYPE_COUNT || !ct__npy_codes[dtype] || ndim < 0 || ndim > CT_MAX_DIMS)
    return 0;
  char dict[512];
  size_t n = 0;
  n += (size_t)snprintf(dict + n, sizeof dict - n, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                        ct_dtype_size(dtype) == 1 ? '|' : '<', ct__npy_codes[dtype]);
  for (int i = 0; i < ndim; i++)
    n += (size_t)snprintf(dict + n, sizeof dict - n, i ? ", %" PRId64 : "%" PRId64, shape[i]);
  n += (size_t)snprintf(dict + n, sizeof dict - n, "%s), }", ndim == 1 ? "," : "");
  /* NumPy aligns the data to 64 bytes (its writer pads the same way). */
  size_t total = (10 + n + 1 + 63) / 64 * 64;
  if (total > cap || total - 10 > 65535) return 0;
  memcpy(buf, ct__npy_magic, sizeof ct__npy_magic);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (char)((total - 10) & 0xff);
  buf[9] = (char)((total - 10) >> 8);
  memcpy(buf + 10, dict, n);
  memset(buf + 10 + n, ' ', total - 10 - n - 1);
  buf[total - 1] = '\n';
  return total;
}

/* ---- load and save ---- */

/* Fortran order is C order of the reversed shape: load that, then a permuted view made
 * contiguous gives the array in cltensor's (C) layout. */
static ct_status ct__npy_to_device(ct_tensor **out, ct_device *d, const struct ct__npy_header *h,
                                   const void *data) {
  if (!h->fortran_order || h->ndim < 2) return ct_from_host(out, d, h->dtype, h->ndim, h->shape, data);
  int64_t rev[CT_MAX_DIMS];
  int perm[CT_MAX_DIMS];
  for (int i = 0; i < h->ndim; i++) {
    rev[i] = h->shape[h->ndim - 1 - i];
    perm[i] = h->ndim - 1 - i;
  }
  ct_tensor *raw = NULL, *view = NULL;
  ct_status st = ct_from_host(&raw, d, h->dtype, h->ndim, rev, data);
  if (st == CT_OK) st = ct_permute(&view, raw, perm);
  if (st == CT_OK) st = ct_contiguous(out, view);
  ct_release(view);
  ct_release(raw);
  return st;
}

/* ct_npy_load, or ct_npy_load_as when as is a dtype (-1: the file's own). */
static ct_status ct__npy_load(ct_tensor **out, const char *path, ct_device *d, int as, const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, path);
  CT__CHECK_NOT_NULL(fn, d);
  if (as != -1) CT__TRY(ct__io_check_target((ct_dtype)as, fn));
  struct ct__rfile f;
  uint64_t header_end = 0;
  void *header = NULL, *data = NULL;
  struct ct__npy_header h;
  ct_status st = ct__rfile_header(&f, &header, &header_end, 12, ct__npy_header_size, path, fn);
  if (st == CT_OK) st = ct__npy_parse_header(&h, header, (size_t)header_end, f.size, path);
  if (st == CT_OK && h.data_bytes > SIZE_MAX)
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: '%s' holds %" PRIu64 " bytes, more than this host can address",
                   fn, path, h.data_bytes);
  if (st == CT_OK) st = ct__host_malloc(&data, (size_t)h.data_bytes, fn);
  if (st == CT_OK) st = ct__rfile_read(&f, data, (size_t)h.data_bytes, h.data_offset);
  ct__rfile_close(&f);
  free(header);
  if (st == CT_OK) {
    size_t count = (size_t)h.data_bytes / ct_dtype_size(h.dtype);
    if (h.swap) ct__byteswap(data, count, ct_dtype_size(h.dtype));
    if (h.dtype == CT_BOOL) ct__normalize_bool(data, count);
    if (as >= 0 && (ct_dtype)as != h.dtype) {
      st = ct__io_convert(&data, count, h.dtype, (ct_dtype)as, fn);
      h.dtype = (ct_dtype)as;
    }
    if (st == CT_OK) st = ct__npy_to_device(out, d, &h, data);
    if (st != CT_OK) ct__error_append(" (%s '%s')", fn, path);
  }
  free(data);
  return st;
}

ct_status ct_npy_load(ct_tensor **out, const char *path, ct_device *d) {
  return ct__npy_load(out, path, d, -1, CT__NPY_LOAD);
}

ct_status ct_npy_load_as(ct_tensor **out, const char *path, ct_device *d, ct_dtype dtype) {
  return ct__npy_load(out, path, d, (int)dtype, "ct_npy_load_as");
}

ct_status ct_npy_save(const char *path, const ct_tensor *t) {
  static const char fn[] = "ct_npy_save";
  CT__CHECK_NOT_NULL(fn, path);
  CT__CHECK_NOT_NULL(fn, t);
  ct_dtype dt = ct_tensor_dtype(t);
  if (dt == CT_BF16)
    return ct__error(CT_ERR_UNSUPPORTED,
                     "%s: '%s': bf16 has no NumPy dtype; convert with ct_cast(&y, t, CT_F32) first, "
                     "or save it in a safetensors file (BF16)",
                     fn, path);
  char header[1024];
  size_t hlen = ct__npy_format_header(header, sizeof header, dt, ct_tensor_ndim(t), ct_tensor_shape(t));
  if (hlen == 0)
    return ct__error(CT_ERR_INTERNAL, "%s: cannot format the .npy header for dtype %s", fn, ct_dtype_name(dt));
  size_t nbytes = ct_tensor_nbytes(t);
  void *data;
  CT__TRY(ct__host_malloc(&data, nbytes, fn));
  ct_status st = ct_to_host(t, data, nbytes);
  if (st == CT_OK && !ct__host_is_little_endian())
    ct__byteswap(data, nbytes / ct_dtype_size(dt), ct_dtype_size(dt));
  struct ct__afile w;
  if (st == CT_OK) st = ct__afile_open(&w, path, 0666, fn);
  if (st == CT_OK) {
    st = ct__afile_write(&w, header, hlen);
    if (st == CT_OK) st = ct__afile_write(&w, data, nbytes);
    st = ct__afile_finish(&w, st);
  }
  free(data);
  return st;
}
