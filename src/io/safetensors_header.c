/* safetensors files, the format and its JSON header (parsed with cJSON): the validation of a
 * file's header, a pure parser over memory (fuzzed as it is). The collection the files load
 * into and save from is safetensors.c.
 *
 * Layout: an unsigned little-endian 64-bit header length N; N bytes of UTF-8 JSON, an object
 * mapping each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]} plus an
 * optional "__metadata__" object of strings, padded with spaces; then the byte buffer, where
 * each tensor's little-endian C-order data sits at [begin, end) and the tensors tile the buffer
 * exactly. */
#include <cJSON.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/host.h"
#include "io/io.h"
#include "tensor/tensor.h"

#define CT__ST_LOAD "ct_safetensors_load"

const char *const ct__st_names[CT_DTYPE_COUNT] = {
    [CT_BOOL] = "BOOL", [CT_U8] = "U8",     [CT_I8] = "I8",   [CT_I32] = "I32", [CT_I64] = "I64",
    [CT_F16] = "F16",   [CT_BF16] = "BF16", [CT_F32] = "F32", [CT_F64] = "F64",
    [CT_I16] = "I16",   [CT_U16] = "U16",   [CT_U32] = "U32", [CT_U64] = "U64",
};

/* dtypes the format defines and cltensor lacks: a valid file cltensor cannot hold. */
static const char *const ct__st_unsupported[] = {"F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3",
                                                 "F6_E3M2", "F4",      "C64"};

ct_status ct__safetensors_header_size(uint64_t *header_end, const void *buf, size_t len,
                                      uint64_t file_size, const char *path) {
  const uint8_t *p = buf;
  CT__TRY(ct__header_have(NULL, len, file_size, "a safetensors file", "header length", path, CT__ST_LOAD));
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | p[i];
  if (n > CT__IO_MAX_HEADER)
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': header length %" PRIu64 " exceeds the limit of %u bytes",
                     path, n, CT__IO_MAX_HEADER);
  if (n > file_size - 8)
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s' is truncated: the header is %" PRIu64
                                 " bytes from byte 8, the file has %" PRIu64 " bytes",
                     path, n, file_size);
  *header_end = 8 + n;
  return CT_OK;
}

void ct__safetensors_header_free(struct ct__st_header *h) {
  if (!h) return;
  for (size_t i = 0; i < h->count; i++) free(h->entries[i].name);
  free(h->entries);
  for (size_t i = 0; i < 2 * h->meta_count; i++) free(h->meta[i]);
  free(h->meta);
  memset(h, 0, sizeof *h);
}

/* What a JSON value is, for messages ("expected a string, got a number"). */
static const char *ct__json_kind(const cJSON *v) {
  static const struct {
    cJSON_bool (*is)(const cJSON *);
    const char *name;
  } kinds[] = {{cJSON_IsObject, "an object"}, {cJSON_IsArray, "an array"}, {cJSON_IsString, "a string"},
               {cJSON_IsNumber, "a number"},  {cJSON_IsBool, "a boolean"},  {cJSON_IsNull, "null"}};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].is(v)) return kinds[i].name;
  return "an invalid value";
}

/* JSON numbers are doubles in cJSON: integers are exact up to 2^53, which bounds every shape
 * and offset a file can state (a 9-petabyte file). */
static int ct__json_uint(const cJSON *v, uint64_t *out) {
  if (!cJSON_IsNumber(v)) return 0;
  double x = v->valuedouble;
  if (!(x >= 0.0 && x <= 9007199254740992.0)) return 0;
  uint64_t u = (uint64_t)x;
  if ((double)u != x) return 0;
  *out = u;
  return 1;
}

static ct_status ct__st_oom(const char *path) {
  return ct__error(CT_ERR_OUT_OF_MEMORY, CT__ST_LOAD ": '%s': out of host memory parsing the header", path);
}

/* One tensor's entry; on success e->name takes over tensor_name (malloc'ed by the caller). */
static ct_status ct__st_entry(struct ct__st_entry *e, char *tensor_name, const cJSON *item,
                              uint64_t data_size, const char *path) {
  char q[160], sb[256];
  const char *name = ct__quote(q, sizeof q, tensor_name, strlen(tensor_name));
  if (!cJSON_IsObject(item))
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': tensor '%s' is %s, expected an object with dtype, shape "
                                 "and data_offsets",
                     path, name, ct__json_kind(item));
  const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
  for (const cJSON *f = item->child; f; f = f->next) {
    const cJSON **slot = NULL;
    if (strcmp(f->string, "dtype") == 0)
      slot = &dtype;
    else if (strcmp(f->string, "shape") == 0)
      slot = &shape;
    else if (strcmp(f->string, "data_offsets") == 0)
      slot = &offsets;
    char fq[80];
    if (!slot)
      return ct__error(CT_ERR_FORMAT,
                       CT__ST_LOAD ": '%s': tensor '%s' has an unexpected field '%s' (expected dtype, "
                                   "shape, data_offsets)",
                       path, name, ct__quote(fq, sizeof fq, f->string, strlen(f->string)));
    if (*slot)
      return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': tensor '%s' has field '%s' twice", path,
                       name, f->string);
    *slot = f;
  }
  if (!dtype || !shape || !offsets)
    return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': tensor '%s' lacks its '%s' field", path,
                     name, !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

  if (!cJSON_IsString(dtype))
    return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': tensor '%s': dtype is %s, expected a string",
                     path, name, ct__json_kind(dtype));
  int found = 0;
  for (int t = 0; t < CT_DTYPE_COUNT && !found; t++)
    if (strcmp(dtype->valuestring, ct__st_names[t]) == 0) {
      e->dtype = (ct_dtype)t;
      found = 1;
    }
  if (!found) {
    int known = 0;
    for (size_t i = 0; i < sizeof ct__st_unsupported / sizeof *ct__st_unsupported; i++)
      known |= strcmp(dtype->valuestring, ct__st_unsupported[i]) == 0;
    char dq[80];
    return ct__error(known ? CT_ERR_UNSUPPORTED : CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': tensor '%s' has %s dtype '%s' (cltensor reads BOOL, U8, I8, "
                                 "I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64)",
                     path, name, known ? "the unsupported" : "an unknown",
                     ct__quote(dq, sizeof dq, dtype->valuestring, strlen(dtype->valuestring)));
  }

  if (!cJSON_IsArray(shape))
    return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': tensor '%s': shape is %s, expected an array",
                     path, name, ct__json_kind(shape));
  int ndim = cJSON_GetArraySize(shape);
  if (ndim > CT_MAX_DIMS)
    return ct__error(CT_ERR_UNSUPPORTED,
                     CT__ST_LOAD ": '%s': tensor '%s' has %d dims, more than cltensor's %d", path,
                     name, ndim, CT_MAX_DIMS);
  e->ndim = 0;
  for (const cJSON *v = shape->child; v; v = v->next) {
    uint64_t dim;
    if (!ct__json_uint(v, &dim))
      return ct__error(CT_ERR_FORMAT,
                       CT__ST_LOAD ": '%s': tensor '%s': shape[%d] is %s%s, expected an integer "
                                   "in [0, 2^53]",
                       path, name, e->ndim, cJSON_IsNumber(v) ? "the number " : ct__json_kind(v),
                       cJSON_IsNumber(v) ? (snprintf(sb, sizeof sb, "%.17g", v->valuedouble), sb) : "");
    e->shape[e->ndim++] = (int64_t)dim;
  }

  uint64_t off[2];
  if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
      !ct__json_uint(offsets->child, &off[0]) || !ct__json_uint(offsets->child->next, &off[1]))
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': tensor '%s': data_offsets must be an array of two integers "
                                 "[begin, end] in [0, 2^53], found %s%s",
                     path, name, ct__json_kind(offsets),
                     cJSON_IsArray(offsets) ? (snprintf(sb, sizeof sb, " of %d elements",
                                                        cJSON_GetArraySize(offsets)),
                                               sb)
                                            : "");
  e->begin = off[0];
  e->end = off[1];
  if (e->begin > e->end)
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                                 "] has begin after end",
                     path, name, e->begin, e->end);
  if (e->end > data_size)
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                                 "] run past the end of the %" PRIu64 "-byte data",
                     path, name, e->begin, e->end, data_size);

  /* Shape entries are at most 2^53, so the check below is exact in 64 bits. */
  uint64_t numel = 1;
  int empty = 0;
  for (int i = 0; i < e->ndim; i++) {
    uint64_t dim = (uint64_t)e->shape[i];
    if (dim == 0) {
      empty = 1;
      continue;
    }
    if (numel > (uint64_t)INT64_MAX / dim)
      return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': tensor '%s': shape %s has more than 2^63 elements",
                       path, name, ct__shape_str(sb, sizeof sb, e->ndim, e->shape));
    numel *= dim;
  }
  if (empty) numel = 0;
  size_t size = ct_dtype_size(e->dtype);
  if (numel > (uint64_t)INT64_MAX / size)
    return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': tensor '%s': shape %s of %s is more than 2^63 bytes",
                     path, name, ct__shape_str(sb, sizeof sb, e->ndim, e->shape), ct__st_names[e->dtype]);
  if (numel * size != e->end - e->begin)
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                                 "] hold %" PRIu64 " bytes, shape %s of %s needs %" PRIu64,
                     path, name, e->begin, e->end, e->end - e->begin,
                     ct__shape_str(sb, sizeof sb, e->ndim, e->shape), ct__st_names[e->dtype], numel * size);
  e->name = tensor_name;
  return CT_OK;
}

static int ct__st_cmp_name(const void *a, const void *b) {
  const struct ct__st_entry *x = *(const struct ct__st_entry *const *)a, *y = *(const struct ct__st_entry *const *)b;
  return strcmp(x->name, y->name);
}

static int ct__st_cmp_offsets(const void *a, const void *b) {
  const struct ct__st_entry *x = *(const struct ct__st_entry *const *)a, *y = *(const struct ct__st_entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

/* Names unique; the tensors' ranges tile [0, data_size) with neither overlap nor gap. */
static ct_status ct__st_check_layout(const struct ct__st_header *h, uint64_t data_size, const char *path) {
  const struct ct__st_entry **order = malloc((h->count ? h->count : 1) * sizeof *order);
  if (!order) return ct__st_oom(path);
  for (size_t i = 0; i < h->count; i++) order[i] = &h->entries[i];
  char q1[160], q2[160];
  ct_status st = CT_OK;
  qsort(order, h->count, sizeof *order, ct__st_cmp_name);
  for (size_t i = 1; i < h->count && st == CT_OK; i++)
    if (strcmp(order[i - 1]->name, order[i]->name) == 0)
      st = ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': tensor name '%s' appears twice", path,
                     ct__quote(q1, sizeof q1, order[i]->name, strlen(order[i]->name)));
  qsort(order, h->count, sizeof *order, ct__st_cmp_offsets);
  uint64_t pos = 0;
  for (size_t i = 0; i < h->count && st == CT_OK; i++) {
    const struct ct__st_entry *e = order[i];
    if (e->begin < pos)
      st = ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': tensors '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64
                                 ", %" PRIu64 ") overlap",
                     path, ct__quote(q1, sizeof q1, order[i - 1]->name, strlen(order[i - 1]->name)),
                     order[i - 1]->begin, order[i - 1]->end,
                     ct__quote(q2, sizeof q2, e->name, strlen(e->name)), e->begin, e->end);
    else if (e->begin > pos)
      st = ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': data bytes [%" PRIu64 ", %" PRIu64
                                 ") belong to no tensor (before tensor '%s')",
                     path, pos, e->begin, ct__quote(q1, sizeof q1, e->name, strlen(e->name)));
    pos = e->end;
  }
  if (st == CT_OK && pos != data_size)
    st = ct__error(CT_ERR_FORMAT,
                   CT__ST_LOAD ": '%s': data bytes [%" PRIu64 ", %" PRIu64
                               ") after the last tensor belong to no tensor",
                   path, pos, data_size);
  free(order);
  return st;
}

/* ---- the header's JSON text ----
 *
 * The header is checked and walked here, token by token, without building a tree of it:
 * cJSON only ever sees one tensor's entry at a time (a few nodes), so memory stays near the
 * entries themselves (a cJSON tree of a 25 MB header took 390 MB), and a header cannot make
 * any step worse than O(n log n) (the sorts that find duplicate names and keys). The text is
 * held to RFC 8259, as the reference implementation holds it: UTF-8, no raw control bytes in
 * strings, paired surrogates, and in addition no NUL in any string (escaped or raw), since
 * names, dtypes and metadata are C strings and a NUL would silently cut them. */

/* Nesting deeper than this is refused (cJSON's own limit; the recursion below is bounded by
 * it). */
#define CT__JS_DEPTH 1000
/* A tensor's entry needs about 16 JSON values (dtype, shape of at most 8 dims, two offsets);
 * one with more is refused before cJSON builds nodes for it. */
#define CT__JS_ENTRY_VALUES 4096

/* Length of the valid UTF-8 sequence starting s (n bytes available), or 0: no overlong forms,
 * no surrogates, nothing past U+10FFFF. */
size_t ct__utf8_seq(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  unsigned c = p[0], k;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) k = 1, cp = c & 0x1f;
  else if ((c & 0xf0) == 0xe0) k = 2, cp = c & 0x0f;
  else if ((c & 0xf8) == 0xf0) k = 3, cp = c & 0x07;
  else return 0;
  if (n <= k) return 0;
  for (unsigned i = 1; i <= k; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
  if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return k + 1;
}

struct ct__js {
  const char *begin, *end;
  const char *err; /* where the text went wrong */
  const char *why; /* what is wrong there, or NULL for a plain syntax error */
};

static const char *ct__js_fail(struct ct__js *x, const char *at, const char *why) {
  x->err = at;
  x->why = why;
  return NULL;
}

static const char *ct__js_ws(const struct ct__js *x, const char *p) {
  while (p < x->end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

static int ct__js_hex4(const struct ct__js *x, const char *p, unsigned *v) {
  if (x->end - p < 4) return 0;
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
    if (d > 15) return 0;
    *v = *v << 4 | d;
  }
  return 1;
}

/* A string token at p (p[0] == '"'); returns the position after it. */
static const char *ct__js_string(struct ct__js *x, const char *p) {
  const char *q = p + 1;
  while (q < x->end) {
    unsigned char c = (unsigned char)*q;
    if (c == '"') return q + 1;
    if (c == 0) return ct__js_fail(x, q, "a NUL byte in a string");
    if (c < 0x20) return ct__js_fail(x, q, "a raw control byte in a string");
    if (c >= 0x80) {
      size_t k = ct__utf8_seq(q, (size_t)(x->end - q));
      if (!k) return ct__js_fail(x, q, "bytes that are not UTF-8");
      q += k;
      continue;
    }
    if (c != '\\') {
      q++;
      continue;
    }
    if (x->end - q < 2) break;
    char e = q[1];
    if (e != 'u') {
      if (e == '\0' || !strchr("\"\\/bfnrt", e)) return ct__js_fail(x, q, NULL);
      q += 2;
      continue;
    }
    unsigned u = 0, lo = 0;
    if (!ct__js_hex4(x, q + 2, &u)) return ct__js_fail(x, q, NULL);
    if (u == 0) return ct__js_fail(x, q, "an escaped NUL (\\u0000) in a string");
    if (u >= 0xdc00 && u <= 0xdfff) return ct__js_fail(x, q, "an unpaired UTF-16 surrogate");
    if (u >= 0xd800 && u <= 0xdbff) {
      if (x->end - q < 12 || q[6] != '\\' || q[7] != 'u' || !ct__js_hex4(x, q + 8, &lo) ||
          lo < 0xdc00 || lo > 0xdfff)
        return ct__js_fail(x, q, "an unpaired UTF-16 surrogate");
      q += 6;
    }
    q += 6;
  }
  return ct__js_fail(x, x->end, NULL); /* unterminated */
}

static const char *ct__js_digits(const struct ct__js *x, const char *p) {
  while (p < x->end && *p >= '0' && *p <= '9') p++;
  return p;
}

static const char *ct__js_number(struct ct__js *x, const char *p) {
  const char *q = p;
  if (q < x->end && *q == '-') q++;
  if (q >= x->end || *q < '0' || *q > '9') return ct__js_fail(x, p, NULL);
  q = *q == '0' ? q + 1 : ct__js_digits(x, q);
  if (q < x->end && *q == '.') {
    const char *f = ct__js_digits(x, q + 1);
    if (f == q + 1) return ct__js_fail(x, q, NULL);
    q = f;
  }
  if (q < x->end && (*q == 'e' || *q == 'E')) {
    q++;
    if (q < x->end && (*q == '+' || *q == '-')) q++;
    const char *f = ct__js_digits(x, q);
    if (f == q) return ct__js_fail(x, q, NULL);
    q = f;
  }
  return q;
}

/* One value at p (after whitespace); returns the position after it, or NULL with x->err set.
 * *count grows by the number of values inside (this one included). */
static const char *ct__js_value(struct ct__js *x, const char *p, int depth, size_t *count) {
  p = ct__js_ws(x, p);
  if (p >= x->end) return ct__js_fail(x, p, NULL);
  (*count)++;
  if (*p == '"') return ct__js_string(x, p);
  if (*p == '{' || *p == '[') {
    if (depth >= CT__JS_DEPTH) return ct__js_fail(x, p, NULL); /* as cJSON: "not valid JSON" */
    int object = *p == '{';
    char close = object ? '}' : ']';
    p = ct__js_ws(x, p + 1);
    if (p < x->end && *p == close) return p + 1;
    for (;;) {
      if (object) {
        p = ct__js_ws(x, p);
        if (p >= x->end || *p != '"') return ct__js_fail(x, p, NULL);
        if (!(p = ct__js_string(x, p))) return NULL;
        p = ct__js_ws(x, p);
        if (p >= x->end || *p != ':') return ct__js_fail(x, p, NULL);
        p++;
      }
      if (!(p = ct__js_value(x, p, depth + 1, count))) return NULL;
      p = ct__js_ws(x, p);
      if (p < x->end && *p == ',') {
        p++;
        continue;
      }
      if (p < x->end && *p == close) return p + 1;
      return ct__js_fail(x, p, NULL);
    }
  }
  static const char *const words[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if ((size_t)(x->end - p) >= n && memcmp(p, words[i], n) == 0) return p + n;
  }
  return ct__js_number(x, p);
}

/* What a (checked) value starting with c is, for messages. */
static const char *ct__js_kind(char c) {
  switch (c) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
  }
}

/* A member of a checked object: the key token [key, val) up to the colon, the value token
 * [val, next), and how many values the value holds. */
struct ct__js_member {
  const char *key, *key_end, *val, *val_end;
  size_t values;
};

/* The member after position p (just after the '{' or after the previous member's value);
 * 0 at the closing brace. */
static int ct__js_next(struct ct__js *x, const char *p, struct ct__js_member *m) {
  p = ct__js_ws(x, p);
  if (p < x->end && *p == ',') p = ct__js_ws(x, p + 1);
  if (p >= x->end || *p != '"') return 0;
  m->key = p;
  m->key_end = ct__js_string(x, p);
  p = ct__js_ws(x, m->key_end) + 1; /* the colon */
  m->val = ct__js_ws(x, p);
  m->values = 0;
  m->val_end = ct__js_value(x, m->val, 1, &m->values);
  return m->val_end != NULL;
}

static void ct__utf8_put(char **o, uint32_t cp) {
  unsigned char *p = (unsigned char *)*o;
  if (cp < 0x80) {
    *p++ = (unsigned char)cp;
  } else if (cp < 0x800) {
    *p++ = (unsigned char)(0xc0 | cp >> 6);
    *p++ = (unsigned char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *p++ = (unsigned char)(0xe0 | cp >> 12);
    *p++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    *p++ = (unsigned char)(0x80 | (cp & 0x3f));
  } else {
    *p++ = (unsigned char)(0xf0 | cp >> 18);
    *p++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    *p++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    *p++ = (unsigned char)(0x80 | (cp & 0x3f));
  }
  *o = (char *)p;
}

/* The decoded text of a checked string token [t, t_end), malloc'ed; NULL when out of memory.
 * Decoded text is never longer than its token (\uXXXX is 6 bytes for at most 3, a surrogate
 * pair 12 for 4). */
static char *ct__js_strdup(const struct ct__js *x, const char *t, const char *t_end) {
  char *out = malloc((size_t)(t_end - t)), *o = out;
  if (!out) return NULL;
  for (const char *q = t + 1; q < t_end - 1;) {
    if (*q != '\\') {
      *o++ = *q++;
      continue;
    }
    char e = q[1];
    if (e != 'u') {
      static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
      *o++ = to[strchr(from, e) - from];
      q += 2;
      continue;
    }
    unsigned u = 0, lo = 0;
    ct__js_hex4(x, q + 2, &u);
    q += 6;
    if (u >= 0xd800 && u <= 0xdbff) {
      ct__js_hex4(x, q + 2, &lo);
      u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
      q += 6;
    }
    ct__utf8_put(&o, u);
  }
  *o = '\0';
  return out;
}

static pthread_mutex_t ct__cjson_lock = PTHREAD_MUTEX_INITIALIZER;

/* Parses one tensor entry's checked value text with cJSON (a NUL-terminated copy, so that
 * cJSON never depends on the length alone); NULL when out of memory. */
static cJSON *ct__js_tree(const char *v, const char *v_end) {
  size_t n = (size_t)(v_end - v);
  char *copy = malloc(n + 1);
  if (!copy) return NULL;
  memcpy(copy, v, n);
  copy[n] = '\0';
  /* cJSON records a failed parse's position in a global; the lock keeps concurrent loads from
   * racing on it. */
  pthread_mutex_lock(&ct__cjson_lock);
  cJSON *t = cJSON_ParseWithLength(copy, n);
  pthread_mutex_unlock(&ct__cjson_lock);
  free(copy);
  return t;
}

static int ct__st_cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static ct_status ct__st_metadata(struct ct__st_header *h, struct ct__js *x, const char *obj,
                                 const char *path) {
  char q[160];
  if (*obj != '{')
    return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': __metadata__ is %s, expected an object of strings",
                     path, ct__js_kind(*obj));
  size_t cap = 0;
  struct ct__js_member m;
  for (const char *p = obj + 1; ct__js_next(x, p, &m); p = m.val_end) {
    char *key = ct__js_strdup(x, m.key, m.key_end);
    if (!key) return ct__st_oom(path);
    if (*m.val != '"') {
      ct_status st = ct__error(CT_ERR_FORMAT,
                               CT__ST_LOAD ": '%s': __metadata__ entry '%s' is %s, expected a string",
                               path, ct__quote(q, sizeof q, key, strlen(key)), ct__js_kind(*m.val));
      free(key);
      return st;
    }
    if (h->meta_count == cap) {
      size_t ncap = cap ? 2 * cap : 16;
      char **grown = realloc(h->meta, 2 * ncap * sizeof *grown);
      if (!grown) {
        free(key);
        return ct__st_oom(path);
      }
      h->meta = grown;
      cap = ncap;
    }
    h->meta[2 * h->meta_count] = key;
    h->meta[2 * h->meta_count + 1] = ct__js_strdup(x, m.val, m.val_end);
    h->meta_count++;
    if (!h->meta[2 * h->meta_count - 1]) return ct__st_oom(path);
  }
  /* Duplicate keys: sort pointers to the keys, compare neighbours. */
  const char **keys = malloc((h->meta_count ? h->meta_count : 1) * sizeof *keys);
  if (!keys) return ct__st_oom(path);
  for (size_t i = 0; i < h->meta_count; i++) keys[i] = h->meta[2 * i];
  qsort(keys, h->meta_count, sizeof *keys, ct__st_cmp_str);
  ct_status st = CT_OK;
  for (size_t i = 1; i < h->meta_count && st == CT_OK; i++)
    if (strcmp(keys[i - 1], keys[i]) == 0)
      st = ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': __metadata__ has key '%s' twice", path,
                     ct__quote(q, sizeof q, keys[i], strlen(keys[i])));
  free(keys);
  return st;
}

ct_status ct__safetensors_parse(struct ct__st_header *out, const void *buf, size_t len,
                                uint64_t file_size, const char *path) {
  memset(out, 0, sizeof *out);
  uint64_t header_end;
  CT__TRY(ct__header_end(&header_end, ct__safetensors_header_size, buf, len, file_size, path, CT__ST_LOAD));
  size_t jn = (size_t)header_end - 8;
  const char *json = (const char *)buf + 8;
  struct ct__js x = {json, json + jn, NULL, NULL};
  char q[160];
  size_t values = 0;
  const char *top = ct__js_ws(&x, json);
  const char *end = ct__js_value(&x, top, 0, &values);
  if (!end) {
    size_t at = (size_t)(x.err - json);
    if (x.why)
      return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': the header holds %s at byte %zu of %zu, near \"%s\"",
                       path, x.why, at, jn, ct__quote(q, 48, x.err, jn - at));
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': the header is not valid JSON: error at byte %zu of %zu, near \"%s\"",
                     path, at, jn, ct__quote(q, 48, x.err, jn - at));
  }
  for (const char *c = end; c < json + jn; c++)
    if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r')
      return ct__error(CT_ERR_FORMAT,
                       CT__ST_LOAD ": '%s': unexpected bytes after the JSON header at byte %td: \"%s\"",
                       path, c - json, ct__quote(q, 48, c, (size_t)(json + jn - c)));
  if (*top != '{')
    return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': the header is %s, expected a JSON object", path,
                     ct__js_kind(*top));
  out->data_offset = header_end;
  uint64_t data_size = file_size - header_end;
  ct_status st = CT_OK;
  size_t cap = 0;
  int meta_seen = 0;
  struct ct__js_member m;
  for (const char *p = top + 1; st == CT_OK && ct__js_next(&x, p, &m); p = m.val_end) {
    char *name = ct__js_strdup(&x, m.key, m.key_end);
    if (!name) {
      st = ct__st_oom(path);
      break;
    }
    if (strcmp(name, "__metadata__") == 0) {
      free(name);
      if (meta_seen++)
        st = ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': __metadata__ appears twice", path);
      else
        st = ct__st_metadata(out, &x, m.val, path);
      continue;
    }
    if (*m.val != '{' || m.values > CT__JS_ENTRY_VALUES) {
      st = ct__error(CT_ERR_FORMAT,
                     *m.val != '{' ? CT__ST_LOAD ": '%s': tensor '%s' is %s, expected an object with "
                                                 "dtype, shape and data_offsets"
                                   : CT__ST_LOAD ": '%s': tensor '%s' is %s of more than 4096 values, "
                                                 "far more than dtype, shape and data_offsets need",
                     path, ct__quote(q, sizeof q, name, strlen(name)), ct__js_kind(*m.val));
      free(name);
      break;
    }
    if (out->count == cap) {
      size_t ncap = cap ? 2 * cap : 16;
      struct ct__st_entry *grown = realloc(out->entries, ncap * sizeof *grown);
      if (!grown) {
        free(name);
        st = ct__st_oom(path);
        break;
      }
      out->entries = grown;
      cap = ncap;
    }
    cJSON *tree = ct__js_tree(m.val, m.val_end);
    st = tree ? ct__st_entry(&out->entries[out->count], name, tree, data_size, path) : ct__st_oom(path);
    cJSON_Delete(tree);
    if (st != CT_OK) free(name);
    else out->count++;
  }
  if (st == CT_OK) st = ct__st_check_layout(out, data_size, path);
  if (st != CT_OK) ct__safetensors_header_free(out);
  return st;
}
