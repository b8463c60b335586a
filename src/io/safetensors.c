/* safetensors files: the format, its JSON header (parsed with cJSON), and ct_safetensors, the
 * named collection of tensors plus "__metadata__" that files load into and save from.
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
#include "io/io.h"
#include "tensor/tensor.h"

#define CT__ST_LOAD "ct_safetensors_load"

static const char *const ct__st_names[CT_DTYPE_COUNT] = {
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
  uint64_t have = len < file_size ? len : file_size;
  if (have < 8)
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s' is not a safetensors file: %" PRIu64
                                 " bytes, shorter than the 8-byte header length",
                     path, have);
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

static const char *ct__json_kind(const cJSON *v) {
  if (cJSON_IsObject(v)) return "an object";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsNull(v)) return "null";
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

static ct_status ct__st_entry(struct ct__st_entry *e, const cJSON *item, uint64_t data_size,
                              const char *path) {
  char q[160], sb[256];
  const char *name = ct__quote(q, sizeof q, item->string, strlen(item->string));
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
                                 "I32, I64, F16, BF16, F32, F64)",
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
  e->name = strdup(item->string);
  if (!e->name) return ct__st_oom(path);
  return CT_OK;
}

static ct_status ct__st_metadata(struct ct__st_header *h, const cJSON *m, const char *path) {
  if (!cJSON_IsObject(m))
    return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': __metadata__ is %s, expected an object of strings",
                     path, ct__json_kind(m));
  size_t n = (size_t)cJSON_GetArraySize(m);
  h->meta = calloc(2 * n + 1, sizeof *h->meta);
  if (!h->meta) return ct__st_oom(path);
  for (const cJSON *v = m->child; v; v = v->next) {
    char q[160];
    if (!cJSON_IsString(v))
      return ct__error(CT_ERR_FORMAT,
                       CT__ST_LOAD ": '%s': __metadata__ entry '%s' is %s, expected a string", path,
                       ct__quote(q, sizeof q, v->string, strlen(v->string)), ct__json_kind(v));
    for (size_t i = 0; i < h->meta_count; i++)
      if (strcmp(h->meta[2 * i], v->string) == 0)
        return ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': __metadata__ has key '%s' twice", path,
                         ct__quote(q, sizeof q, v->string, strlen(v->string)));
    h->meta[2 * h->meta_count] = strdup(v->string);
    h->meta[2 * h->meta_count + 1] = strdup(v->valuestring);
    h->meta_count++;
    if (!h->meta[2 * h->meta_count - 2] || !h->meta[2 * h->meta_count - 1]) return ct__st_oom(path);
  }
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

static pthread_mutex_t ct__cjson_lock = PTHREAD_MUTEX_INITIALIZER;

ct_status ct__safetensors_parse(struct ct__st_header *out, const void *buf, size_t len,
                                uint64_t file_size, const char *path) {
  memset(out, 0, sizeof *out);
  uint64_t header_end;
  CT__TRY(ct__safetensors_header_size(&header_end, buf, len, file_size, path));
  if (header_end > len)
    return ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s' is truncated: the header ends at byte %" PRIu64
                                 ", only %zu bytes are present",
                     path, header_end, len);
  size_t jn = (size_t)header_end - 8;
  /* A NUL-terminated copy: cJSON honours the length, and the terminator backs that up. */
  char *json = malloc(jn + 1);
  if (!json) return ct__st_oom(path);
  memcpy(json, (const uint8_t *)buf + 8, jn);
  json[jn] = '\0';
  const char *end = NULL;
  /* cJSON records a failed parse's position in a global as well; the lock keeps concurrent
   * loads from racing on it. */
  pthread_mutex_lock(&ct__cjson_lock);
  cJSON *root = cJSON_ParseWithLengthOpts(json, jn, &end, 0);
  pthread_mutex_unlock(&ct__cjson_lock);
  ct_status st = CT_OK;
  char q[160];
  if (!root) {
    size_t at = end ? (size_t)(end - json) : 0;
    if (at > jn) at = jn;
    st = ct__error(CT_ERR_FORMAT,
                   CT__ST_LOAD ": '%s': the header is not valid JSON: error at byte %zu of %zu, near \"%s\"",
                   path, at, jn, ct__quote(q, 48, json + at, jn - at));
    goto done;
  }
  for (const char *c = end; c < json + jn; c++)
    if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r') {
      st = ct__error(CT_ERR_FORMAT,
                     CT__ST_LOAD ": '%s': unexpected bytes after the JSON header at byte %td: \"%s\"",
                     path, c - json, ct__quote(q, 48, c, (size_t)(json + jn - c)));
      goto done;
    }
  if (!cJSON_IsObject(root)) {
    st = ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': the header is %s, expected a JSON object", path,
                   ct__json_kind(root));
    goto done;
  }
  out->data_offset = header_end;
  uint64_t data_size = file_size - header_end;
  size_t n = 0;
  const cJSON *meta = NULL;
  for (const cJSON *c = root->child; c; c = c->next) {
    if (strcmp(c->string, "__metadata__") != 0) {
      n++;
    } else if (meta) {
      st = ct__error(CT_ERR_FORMAT, CT__ST_LOAD ": '%s': __metadata__ appears twice", path);
      goto done;
    } else {
      meta = c;
    }
  }
  if (meta && (st = ct__st_metadata(out, meta, path)) != CT_OK) goto done;
  out->entries = calloc(n ? n : 1, sizeof *out->entries);
  if (!out->entries) {
    st = ct__st_oom(path);
    goto done;
  }
  for (const cJSON *c = root->child; c && st == CT_OK; c = c->next) {
    if (c == meta) continue;
    st = ct__st_entry(&out->entries[out->count], c, data_size, path);
    if (st == CT_OK) out->count++;
  }
  if (st == CT_OK) st = ct__st_check_layout(out, data_size, path);
done:
  cJSON_Delete(root);
  free(json);
  if (st != CT_OK) ct__safetensors_header_free(out);
  return st;
}

/* ---- the collection ---- */

struct ct__st_item {
  char *name;
  ct_tensor *t;
};

struct ct_safetensors {
  size_t count, cap;
  struct ct__st_item *items;
  size_t meta_count, meta_cap;
  char **meta;   /* key0, value0, key1, value1, ... */
};

ct_status ct_safetensors_new(ct_safetensors **out) {
  CT__CHECK_NOT_NULL("ct_safetensors_new", out);
  *out = calloc(1, sizeof **out);
  if (!*out) return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_safetensors_new: out of host memory");
  return CT_OK;
}

void ct_safetensors_free(ct_safetensors *st) {
  if (!st) return;
  for (size_t i = 0; i < st->count; i++) {
    free(st->items[i].name);
    ct_release(st->items[i].t);
  }
  free(st->items);
  for (size_t i = 0; i < 2 * st->meta_count; i++) free(st->meta[i]);
  free(st->meta);
  free(st);
}

size_t ct_safetensors_count(const ct_safetensors *st) { return st ? st->count : 0; }

const char *ct_safetensors_name(const ct_safetensors *st, size_t index) {
  return st && index < st->count ? st->items[index].name : NULL;
}

static ssize_t ct__st_find(const ct_safetensors *st, const char *name) {
  for (size_t i = 0; i < st->count; i++)
    if (strcmp(st->items[i].name, name) == 0) return (ssize_t)i;
  return -1;
}

ct_status ct_safetensors_get(ct_tensor **out, const ct_safetensors *st, const char *name) {
  static const char fn[] = "ct_safetensors_get";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, st);
  CT__CHECK_NOT_NULL(fn, name);
  ssize_t i = ct__st_find(st, name);
  if (i < 0) {
    char q[160];
    ct_status s = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: no tensor named '%s' among the %zu:", fn,
                            ct__quote(q, sizeof q, name, strlen(name)), st->count);
    for (size_t k = 0; k < st->count && k < 20; k++)
      ct__error_append("%s '%s'", k ? "," : "",
                       ct__quote(q, sizeof q, st->items[k].name, strlen(st->items[k].name)));
    if (st->count > 20) ct__error_append(", ...");
    return s;
  }
  *out = ct_retain(st->items[i].t);
  return CT_OK;
}

ct_status ct_safetensors_at(ct_tensor **out, const ct_safetensors *st, size_t index) {
  static const char fn[] = "ct_safetensors_at";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, st);
  if (index >= st->count)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: index %zu out of range for %zu tensors", fn, index,
                     st->count);
  *out = ct_retain(st->items[index].t);
  return CT_OK;
}

/* Names and metadata end up in JSON, which must be UTF-8. */
static int ct__utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p, n;
    uint32_t cp;
    if (c < 0x80) {
      p++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return 0;
    }
    for (unsigned k = 1; k <= n; k++) {
      if ((p[k] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (p[k] & 0x3f);
    }
    static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    p += n + 1;
  }
  return 1;
}

static ct_status ct__st_grow(void **items, size_t *cap, size_t need, size_t elem, const char *fn) {
  if (need <= *cap) return CT_OK;
  size_t ncap = *cap ? *cap * 2 : 8;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*items, ncap * elem);
  if (!p) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  *items = p;
  *cap = ncap;
  return CT_OK;
}

/* Appends without checks: the name is taken over, the reference too. */
static ct_status ct__st_push(ct_safetensors *st, char *name, ct_tensor *t, const char *fn) {
  ct_status s = ct__st_grow((void **)&st->items, &st->cap, st->count + 1, sizeof *st->items, fn);
  if (s != CT_OK) return s;
  st->items[st->count].name = name;
  st->items[st->count].t = t;
  st->count++;
  return CT_OK;
}

ct_status ct_safetensors_set(ct_safetensors *st, const char *name, ct_tensor *t) {
  static const char fn[] = "ct_safetensors_set";
  CT__CHECK_NOT_NULL(fn, st);
  CT__CHECK_NOT_NULL(fn, name);
  CT__CHECK_NOT_NULL(fn, t);
  char q[160];
  if (name[0] == '\0' || strcmp(name, "__metadata__") == 0 || !ct__utf8_valid(name))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: '%s' cannot name a tensor (names are non-empty UTF-8, and __metadata__ is "
                     "reserved)",
                     fn, ct__quote(q, sizeof q, name, strlen(name)));
  ssize_t i = ct__st_find(st, name);
  if (i >= 0) {
    ct_tensor *old = st->items[i].t;
    st->items[i].t = ct_retain(t);
    ct_release(old);
    return CT_OK;
  }
  char *copy = strdup(name);
  if (!copy) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ct_status s = ct__st_push(st, copy, ct_retain(t), fn);
  if (s != CT_OK) {
    free(copy);
    ct_release(t);
  }
  return s;
}

size_t ct_safetensors_metadata_count(const ct_safetensors *st) { return st ? st->meta_count : 0; }

const char *ct_safetensors_metadata_key(const ct_safetensors *st, size_t index) {
  return st && index < st->meta_count ? st->meta[2 * index] : NULL;
}

const char *ct_safetensors_metadata_get(const ct_safetensors *st, const char *key) {
  if (!st || !key) return NULL;
  for (size_t i = 0; i < st->meta_count; i++)
    if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
  return NULL;
}

ct_status ct_safetensors_metadata_set(ct_safetensors *st, const char *key, const char *value) {
  static const char fn[] = "ct_safetensors_metadata_set";
  CT__CHECK_NOT_NULL(fn, st);
  CT__CHECK_NOT_NULL(fn, key);
  char q[160];
  if (!ct__utf8_valid(key) || (value && !ct__utf8_valid(value)))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: key '%s' or its value is not valid UTF-8", fn,
                     ct__quote(q, sizeof q, key, strlen(key)));
  size_t i = 0;
  while (i < st->meta_count && strcmp(st->meta[2 * i], key) != 0) i++;
  if (!value) {
    if (i == st->meta_count) return CT_OK;
    free(st->meta[2 * i]);
    free(st->meta[2 * i + 1]);
    memmove(&st->meta[2 * i], &st->meta[2 * i + 2], 2 * (st->meta_count - i - 1) * sizeof *st->meta);
    st->meta_count--;
    return CT_OK;
  }
  char *v = strdup(value);
  if (!v) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (i < st->meta_count) {
    free(st->meta[2 * i + 1]);
    st->meta[2 * i + 1] = v;
    return CT_OK;
  }
  char *k = strdup(key);
  ct_status s = k ? ct__st_grow((void **)&st->meta, &st->meta_cap, 2 * st->meta_count + 2,
                                sizeof *st->meta, fn)
                  : ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (s != CT_OK) {
    free(k);
    free(v);
    return s;
  }
  st->meta[2 * st->meta_count] = k;
  st->meta[2 * st->meta_count + 1] = v;
  st->meta_count++;
  return CT_OK;
}

/* ---- load ---- */

static ct_status ct__st_load_tensors(ct_safetensors *st, struct ct__rfile *f, struct ct__st_header *h,
                                     ct_device *d) {
  static const char fn[] = CT__ST_LOAD;
  uint64_t most = 0;
  for (size_t i = 0; i < h->count; i++)
    if (h->entries[i].end - h->entries[i].begin > most) most = h->entries[i].end - h->entries[i].begin;
  if (most > SIZE_MAX)
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: '%s' holds a tensor of %" PRIu64 " bytes, more than this host can address",
                     fn, f->path, most);
  void *buf;
  CT__TRY(ct__io_malloc(&buf, (size_t)most, fn));
  ct_status s = CT_OK;
  for (size_t i = 0; i < h->count && s == CT_OK; i++) {
    struct ct__st_entry *e = &h->entries[i];
    size_t nbytes = (size_t)(e->end - e->begin), size = ct_dtype_size(e->dtype);
    s = ct__rfile_read(f, buf, nbytes, h->data_offset + e->begin);
    if (s != CT_OK) break;
    if (e->dtype == CT_BOOL) ct__normalize_bool(buf, nbytes);
    if (size > 1 && !ct__host_is_little_endian()) ct__byteswap(buf, nbytes / size, size);
    ct_tensor *t = NULL;
    s = ct_from_host(&t, d, e->dtype, e->ndim, e->shape, buf);
    if (s != CT_OK) {
      char q[160];
      ct__error_append(" (%s '%s', tensor '%s')", fn, f->path, ct__quote(q, sizeof q, e->name, strlen(e->name)));
      break;
    }
    s = ct__st_push(st, e->name, t, fn);
    if (s == CT_OK)
      e->name = NULL;
    else
      ct_release(t);
  }
  free(buf);
  return s;
}

ct_status ct_safetensors_load(ct_safetensors **out, const char *path, ct_device *d) {
  static const char fn[] = CT__ST_LOAD;
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, path);
  CT__CHECK_NOT_NULL(fn, d);
  struct ct__rfile f;
  CT__TRY(ct__rfile_open(&f, path, fn));
  uint8_t pre[8];
  size_t npre = f.size < sizeof pre ? (size_t)f.size : sizeof pre;
  uint64_t header_end = 0;
  void *header = NULL;
  struct ct__st_header h;
  memset(&h, 0, sizeof h);
  ct_safetensors *st = NULL;
  ct_status s = ct__rfile_read(&f, pre, npre, 0);
  if (s == CT_OK) s = ct__safetensors_header_size(&header_end, pre, npre, f.size, path);
  if (s == CT_OK) s = ct__io_malloc(&header, (size_t)header_end, fn);
  if (s == CT_OK) s = ct__rfile_read(&f, header, (size_t)header_end, 0);
  if (s == CT_OK) s = ct__safetensors_parse(&h, header, (size_t)header_end, f.size, path);
  free(header);
  if (s == CT_OK) s = ct_safetensors_new(&st);
  if (s == CT_OK) {
    /* The metadata strings move over as they are. */
    st->meta = h.meta;
    st->meta_count = h.meta_count;
    st->meta_cap = 2 * h.meta_count;
    h.meta = NULL;
    h.meta_count = 0;
    s = ct__st_load_tensors(st, &f, &h, d);
  }
  ct__rfile_close(&f);
  ct__safetensors_header_free(&h);
  if (s != CT_OK) {
    ct_safetensors_free(st);
    return s;
  }
  *out = st;
  return CT_OK;
}

/* ---- save ---- */

static int ct__st_cmp_layout(const void *a, const void *b) {
  const struct ct__st_item *x = *(const struct ct__st_item *const *)a, *y = *(const struct ct__st_item *const *)b;
  size_t sx = ct_dtype_size(ct_tensor_dtype(x->t)), sy = ct_dtype_size(ct_tensor_dtype(y->t));
  if (sx != sy) return sx > sy ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* The header text: metadata first, then the tensors in the collection's order, with offsets
 * from the layout order. Integers go in as raw JSON so no value is ever printed as a float. */
static ct_status ct__st_header_json(char **out, const ct_safetensors *st, const uint64_t *begin, const char *fn) {
  cJSON *root = cJSON_CreateObject();
  int ok = root != NULL;
  if (ok && st->meta_count) {
    cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
    ok = m != NULL;
    for (size_t i = 0; ok && i < st->meta_count; i++)
      ok = cJSON_AddStringToObject(m, st->meta[2 * i], st->meta[2 * i + 1]) != NULL;
  }
  for (size_t i = 0; ok && i < st->count; i++) {
    const ct_tensor *t = st->items[i].t;
    cJSON *e = cJSON_AddObjectToObject(root, st->items[i].name);
    char text[CT_MAX_DIMS * 22 + 64];
    int ndim = ct_tensor_ndim(t);
    const int64_t *shape = ct_tensor_shape(t);
    size_t n = 0;
    text[n++] = '[';
    for (int k = 0; k < ndim; k++)
      n += (size_t)snprintf(text + n, sizeof text - n, k ? ",%" PRId64 : "%" PRId64, shape[k]);
    text[n++] = ']';
    text[n] = '\0';
    ok = e && cJSON_AddStringToObject(e, "dtype", ct__st_names[ct_tensor_dtype(t)]) &&
         cJSON_AddRawToObject(e, "shape", text);
    snprintf(text, sizeof text, "[%" PRIu64 ",%" PRIu64 "]", begin[i], begin[i] + (uint64_t)ct_tensor_nbytes(t));
    ok = ok && cJSON_AddRawToObject(e, "data_offsets", text);
  }
  *out = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!*out) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory formatting the header", fn);
  return CT_OK;
}

ct_status ct_safetensors_save(const ct_safetensors *st, const char *path) {
  static const char fn[] = "ct_safetensors_save";
  CT__CHECK_NOT_NULL(fn, st);
  CT__CHECK_NOT_NULL(fn, path);
  size_t n = st->count;
  const struct ct__st_item **layout = malloc((n ? n : 1) * sizeof *layout);
  uint64_t *begin = malloc((n ? n : 1) * sizeof *begin);
  char *json = NULL;
  void *buf = NULL;
  ct_status s = layout && begin ? CT_OK : ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  size_t most = 0;
  if (s == CT_OK) {
    /* Larger elements first keeps every tensor aligned to its element size in the file, as
     * the reference writer does. */
    for (size_t i = 0; i < n; i++) layout[i] = &st->items[i];
    qsort(layout, n, sizeof *layout, ct__st_cmp_layout);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
      size_t nb = ct_tensor_nbytes(layout[i]->t);
      begin[layout[i] - st->items] = pos;
      pos += nb;
      if (nb > most) most = nb;
    }
    s = ct__st_header_json(&json, st, begin, fn);
  }
  if (s == CT_OK) s = ct__io_malloc(&buf, most, fn);
  struct ct__afile w;
  if (s == CT_OK) s = ct__afile_open(&w, path, 0666, fn);
  if (s == CT_OK) {
    /* Spaces pad the header so that the data starts 8-byte aligned. */
    size_t jn = strlen(json), padded = (8 + jn + 7) / 8 * 8 - 8;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    s = ct__afile_write(&w, len8, 8);
    if (s == CT_OK) s = ct__afile_write(&w, json, jn);
    if (s == CT_OK) s = ct__afile_write(&w, "        ", padded - jn);
    for (size_t i = 0; i < n && s == CT_OK; i++) {
      const ct_tensor *t = layout[i]->t;
      size_t nb = ct_tensor_nbytes(t), size = ct_dtype_size(ct_tensor_dtype(t));
      s = ct_to_host(t, buf, nb);
      if (s != CT_OK) {
        char q[160];
        ct__error_append(" (%s '%s', tensor '%s')", fn, path,
                         ct__quote(q, sizeof q, layout[i]->name, strlen(layout[i]->name)));
        break;
      }
      if (size > 1 && !ct__host_is_little_endian()) ct__byteswap(buf, nb / size, size);
      s = ct__afile_write(&w, buf, nb);
    }
    s = ct__afile_finish(&w, s);
  }
  free(buf);
  cJSON_free(json);
  free(begin);
  free(layout);
  return s;
}
