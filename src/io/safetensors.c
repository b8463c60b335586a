/* ct_safetensors: the named collection of tensors plus "__metadata__" that safetensors files
 * load into (through the header parser of safetensors_header.c) and save from. */
#include <cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
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

/* Names and metadata end up in JSON, which must be UTF-8 (the loader holds files to the same
 * rule through ct__utf8_seq()). */
static int ct__utf8_valid(const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0, k; i < n; i += k)
    if (!(k = ct__utf8_seq(s + i, n - i))) return 0;
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

/* ---- metadata as numbers (io.h) ---- */

static ct_status meta_value(const char **v, const ct_safetensors *st, const char *key, const char *fn) {
  *v = ct_safetensors_metadata_get(st, key);
  if (!*v) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the container has no metadata '%s'", fn, key);
  errno = 0;
  return CT_OK;
}

ct_status ct__meta_i64(int64_t *out, const ct_safetensors *st, const char *key, int64_t lo, int64_t hi,
                       const char *fn) {
  const char *v;
  char *end;
  CT__TRY(meta_value(&v, st, key, fn));
  long long x = strtoll(v, &end, 10);
  if (end == v || *end || errno == ERANGE || x < lo || x > hi)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: metadata '%s' is \"%.40s\" (expected an integer in %" PRId64
                     "..%" PRId64 ")", fn, key, v, lo, hi);
  *out = x;
  return CT_OK;
}

ct_status ct__meta_u64(uint64_t *out, const ct_safetensors *st, const char *key, const char *fn) {
  const char *v;
  char *end;
  CT__TRY(meta_value(&v, st, key, fn));
  unsigned long long x = strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || *end || errno == ERANGE) /* strtoull takes "-1" and leading spaces */
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: metadata '%s' is \"%.40s\" (expected an integer in 0..%" PRIu64
                     ")", fn, key, v, UINT64_MAX);
  *out = x;
  return CT_OK;
}

ct_status ct__meta_double(double *out, const ct_safetensors *st, const char *key, const char *fn) {
  const char *v;
  char *end;
  CT__TRY(meta_value(&v, st, key, fn));
  double x = strtod(v, &end);
  /* ERANGE also flags a subnormal result, which %.17g writes and reads back exactly (a learning
   * rate decayed far enough): only overflow is out of range. */
  if (end == v || *end || (errno == ERANGE && fabs(x) == HUGE_VAL))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: metadata '%s' is \"%.40s\" (expected a number)", fn, key, v);
  *out = x;
  return CT_OK;
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

/* Entries of dtype from (-1: none) arrive as dtype to. */
static ct_status ct__st_load_tensors(ct_safetensors *st, struct ct__rfile *f, struct ct__st_header *h,
                                     ct_device *d, int from, ct_dtype to, const char *fn) {
  uint64_t most = 0;
  for (size_t i = 0; i < h->count; i++)
    if (h->entries[i].end - h->entries[i].begin > most) most = h->entries[i].end - h->entries[i].begin;
  if (most > SIZE_MAX)
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: '%s' holds a tensor of %" PRIu64 " bytes, more than this host can address",
                     fn, f->path, most);
  void *buf;
  CT__TRY(ct__host_malloc(&buf, (size_t)most, fn));
  ct_status s = CT_OK;
  for (size_t i = 0; i < h->count && s == CT_OK; i++) {
    struct ct__st_entry *e = &h->entries[i];
    size_t nbytes = (size_t)(e->end - e->begin), size = ct_dtype_size(e->dtype);
    s = ct__rfile_read(f, buf, nbytes, h->data_offset + e->begin);
    if (s != CT_OK) break;
    if (e->dtype == CT_BOOL) ct__normalize_bool(buf, nbytes);
    if (size > 1 && !ct__host_is_little_endian()) ct__byteswap(buf, nbytes / size, size);
    ct_tensor *t = NULL;
    if ((int)e->dtype == from && e->dtype != to) {
      void *conv = NULL;
      s = ct__host_malloc(&conv, nbytes ? nbytes : 1, fn);
      if (s == CT_OK) {
        memcpy(conv, buf, nbytes);
        s = ct__io_convert(&conv, nbytes / size, e->dtype, to, fn);
      }
      if (s == CT_OK) s = ct_from_host(&t, d, to, e->ndim, e->shape, conv);
      free(conv);
    } else {
      s = ct_from_host(&t, d, e->dtype, e->ndim, e->shape, buf);
    }
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

/* ct_safetensors_load, or ct_safetensors_load_as when from is a dtype (-1: none). */
static ct_status ct__st_load(ct_safetensors **out, const char *path, ct_device *d, int from, ct_dtype to,
                             const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, path);
  CT__CHECK_NOT_NULL(fn, d);
  if (from != -1) {
    if (from < 0 || from >= CT_DTYPE_COUNT)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dtype %d is not a cltensor dtype", fn, from);
    CT__TRY(ct__io_check_target(to, fn));
  }
  struct ct__rfile f;
  uint64_t header_end = 0;
  void *header = NULL;
  struct ct__st_header h;
  memset(&h, 0, sizeof h);
  ct_safetensors *st = NULL;
  ct_status s = ct__rfile_header(&f, &header, &header_end, 8, ct__safetensors_header_size, path, fn);
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
    s = ct__st_load_tensors(st, &f, &h, d, from, to, fn);
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

ct_status ct_safetensors_load(ct_safetensors **out, const char *path, ct_device *d) {
  return ct__st_load(out, path, d, -1, CT_F32, CT__ST_LOAD);
}

ct_status ct_safetensors_load_as(ct_safetensors **out, const char *path, ct_device *d, ct_dtype from,
                                 ct_dtype to) {
  return ct__st_load(out, path, d, (int)from, to, "ct_safetensors_load_as");
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
  if (s == CT_OK) s = ct__host_malloc(&buf, most, fn);
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
