/* The per-device caching allocator (PyTorch's CUDA caching allocator is the model).
 *
 * OpenCL buffers ("segments") are carved into blocks, byte ranges addressed as (cl_mem, offset).
 * Requests are rounded up (to 512 B, or the device's base-address alignment if larger, below
 * 1 MiB; to 2 MiB above) and served best-fit from a free list of their pool: small requests
 * share 2 MiB segments, large ones get segments of their own size. A cached block bigger than
 * the request is split and the rest stays cached; freed neighbours merge again.
 *
 * Reuse is safe without events: every command touching a device's memory goes through that
 * device's single in-order queue, so a command enqueued after a block was freed runs after every
 * command that used the block before. (Copies between devices that share a context run on the
 * other device's queue; ct__copy_between waits for them before the source block can be freed.)
 *
 * Per-device state lives in slot CT__SLOT_ALLOC; one mutex guards it. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cltensor/tensor.h"
#include "core/error.h"
#include "device/device.h"
#include "memory/alloc.h"

#define CT__KIB ((size_t)1024)
#define CT__MIB (CT__KIB * 1024)
#define CT__SMALL_LIMIT CT__MIB         /* requests up to this go to the small pool */
#define CT__SMALL_SEGMENT (2 * CT__MIB) /* small pool segment size */
#define CT__LARGE_ROUND (2 * CT__MIB)

struct ct__segment;

typedef struct ct__ablock {
  ct__block pub;                     /* pub.priv points back here */
  struct ct__segment *seg;
  struct ct__ablock *prev, *next;    /* neighbours in the segment, by address */
  struct ct__ablock *fprev, *fnext;  /* free list of the pool, by size */
  int allocated;
} ct__ablock;

typedef struct ct__segment {
  cl_mem mem;
  size_t size;
  int small;
  struct ct__allocator *owner;
  struct ct__segment *prev, *next;
} ct__segment;

typedef struct ct__allocator {
  pthread_mutex_t lock;
  ct_device *device;
  size_t quantum;        /* small rounding: 512 or the base-address alignment */
  uint64_t limit;        /* 0: none */
  int no_caching;
  ct__ablock *free_list[2]; /* [0] large, [1] small; ascending size */
  ct__segment *segments;
  ct_memory_stats stats;
} ct__allocator;

/* ---- size strings ---- */

ct_status ct__parse_size(uint64_t *out, const char *text) {
  if (!out || !text) return ct__error(CT_ERR_INVALID_ARGUMENT, "size string: argument is NULL");
  const char *p = text;
  while (*p == ' ' || *p == '\t') p++;
  if (*p < '0' || *p > '9')
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "size string '%s': expected a number with an optional unit (B, kB, KiB, MB, MiB, GB, GiB, TB, TiB), "
                     "e.g. '512MiB'", text);
  uint64_t ip = 0;
  int overflow = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned dgt = (unsigned)(*p - '0');
    if (ip > (UINT64_MAX - dgt) / 10) overflow = 1;
    else ip = ip * 10 + dgt;
  }
  uint64_t frac = 0, frac_scale = 1;
  int has_frac = 0;
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9')
      return ct__error(CT_ERR_INVALID_ARGUMENT, "size string '%s': expected digits after the decimal point", text);
    for (; *p >= '0' && *p <= '9'; p++) {
      if (frac_scale < UINT64_C(1000000000000000000)) {
        frac = frac * 10 + (uint64_t)(*p - '0');
        frac_scale *= 10;
      }
      has_frac = 1;
    }
  }
  while (*p == ' ' || *p == '\t') p++;
  const char *unit = p;
  size_t ulen = 0;
  while (unit[ulen] && unit[ulen] != ' ' && unit[ulen] != '\t') ulen++;
  const char *rest = unit + ulen;
  while (*rest == ' ' || *rest == '\t') rest++;
  static const struct { const char *name; uint64_t mult; } units[] = {
      {"", 1}, {"b", 1},
      {"k", UINT64_C(1000)}, {"kb", UINT64_C(1000)}, {"kib", UINT64_C(1) << 10},
      {"m", UINT64_C(1000000)}, {"mb", UINT64_C(1000000)}, {"mib", UINT64_C(1) << 20},
      {"g", UINT64_C(1000000000)}, {"gb", UINT64_C(1000000000)}, {"gib", UINT64_C(1) << 30},
      {"t", UINT64_C(1000000000000)}, {"tb", UINT64_C(1000000000000)}, {"tib", UINT64_C(1) << 40},
  };
  uint64_t mult = 0;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strlen(units[i].name) == ulen && strncasecmp(unit, units[i].name, ulen) == 0) mult = units[i].mult;
  if (!mult || *rest)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "size string '%s': unknown unit '%.*s' (expected B, k/kB, KiB, M/MB, MiB, G/GB, GiB, T/TB or TiB)",
                     text, (int)(ulen + strlen(rest)), unit);
  if (has_frac && mult == 1)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "size string '%s': a fractional number of bytes", text);
  if (overflow || ip > UINT64_MAX / mult)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "size string '%s': does not fit in 64 bits", text);
  uint64_t v = ip * mult;
  /* The fraction times a unit of at most 2^40 stays far below 2^64 / 10^18 only after
   * dividing first, so split the multiplier to keep it exact enough (truncation below a byte). */
  uint64_t fv = (uint64_t)((long double)frac * (long double)mult / (long double)frac_scale);
  if (v > UINT64_MAX - fv) return ct__error(CT_ERR_INVALID_ARGUMENT, "size string '%s': does not fit in 64 bits", text);
  *out = v + fv;
  return CT_OK;
}

/* "1.50 GiB" */
static const char *ct__human(char *buf, size_t n, uint64_t bytes) {
  static const char *u[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int i = 0;
  while (v >= 1024.0 && i < 4) {
    v /= 1024.0;
    i++;
  }
  if (i == 0) snprintf(buf, n, "%" PRIu64 " bytes", bytes);
  else snprintf(buf, n, "%.2f %s", v, u[i]);
  return buf;
}

/* ---- state ---- */

static void ct__alloc_destroy(ct_device *d, void *state) {
  (void)d;
  ct__allocator *a = state;
  for (ct__segment *s = a->segments, *sn; s; s = sn) {
    sn = s->next;
    clReleaseMemObject(s->mem);
    free(s);
  }
  /* Blocks are found through the free lists and through their segments; free them by walking
   * the free lists (allocated blocks outlive shutdown only when the caller broke its contract). */
  for (int p = 0; p < 2; p++)
    for (ct__ablock *b = a->free_list[p], *bn; b; b = bn) {
      bn = b->fnext;
      free(b);
    }
  pthread_mutex_destroy(&a->lock);
  free(a);
}

static ct_status ct__alloc_create(void **state, ct_device *d) {
  uint64_t limit = 0;
  const char *lim = getenv("CLTENSOR_MEMORY_LIMIT");
  if (lim && *lim) {
    ct_status st = ct__parse_size(&limit, lim);
    if (st != CT_OK) {
      ct__error_append(" (from $CLTENSOR_MEMORY_LIMIT, which caps each device's reserved memory)");
      return st;
    }
  }
  int no_caching = 0;
  const char *nc = getenv("CLTENSOR_NO_CACHING");
  if (nc && *nc) {
    if (strcmp(nc, "1") == 0) no_caching = 1;
    else if (strcmp(nc, "0") != 0)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "$CLTENSOR_NO_CACHING='%s': expected 1 (no caching) or 0", nc);
  }
  ct__allocator *a = calloc(1, sizeof *a);
  if (!a) return ct__error(CT_ERR_OUT_OF_MEMORY, "allocator: out of host memory");
  pthread_mutex_init(&a->lock, NULL);
  a->device = d;
  size_t align = d->props.mem_base_addr_align_bits / 8;
  if (align < 128) align = 128;
  a->quantum = align > 512 ? align : 512;
  a->limit = limit;
  a->no_caching = no_caching;
  a->stats.limit_bytes = limit;
  *state = a;
  return CT_OK;
}

static ct_status ct__allocator_get(ct__allocator **out, ct_device *d) {
  return ct__device_slot((void **)out, d, CT__SLOT_ALLOC, ct__alloc_create, ct__alloc_destroy);
}

/* ---- free lists ---- */

static void ct__fl_insert(ct__allocator *a, ct__ablock *b) {
  ct__ablock **head = &a->free_list[b->seg->small];
  ct__ablock *prev = NULL, *cur = *head;
  while (cur && cur->pub.size < b->pub.size) {
    prev = cur;
    cur = cur->fnext;
  }
  b->fprev = prev;
  b->fnext = cur;
  if (cur) cur->fprev = b;
  if (prev) prev->fnext = b;
  else *head = b;
}

static void ct__fl_remove(ct__allocator *a, ct__ablock *b) {
  if (b->fprev) b->fprev->fnext = b->fnext;
  else a->free_list[b->seg->small] = b->fnext;
  if (b->fnext) b->fnext->fprev = b->fprev;
  b->fprev = b->fnext = NULL;
}

/* Returns b's segment to OpenCL when b, a free block, covers all of it (neighbours always
 * merge, so a wholly free segment is exactly one such block). Lock held. Returns 1 if released. */
static int ct__release_if_whole(ct__allocator *a, ct__ablock *b) {
  ct__segment *s = b->seg;
  if (b->pub.offset != 0 || b->pub.size != s->size) return 0;
  ct__fl_remove(a, b);
  free(b);
  if (s->prev) s->prev->next = s->next;
  else a->segments = s->next;
  if (s->next) s->next->prev = s->prev;
  a->stats.reserved_bytes -= s->size;
  clReleaseMemObject(s->mem);
  free(s);
  return 1;
}

/* Releases every segment that holds nothing but one free block. Lock held. */
static void ct__release_cached(ct__allocator *a) {
  for (int p = 0; p < 2; p++)
    for (ct__ablock *b = a->free_list[p], *bn; b; b = bn) {
      bn = b->fnext;
      ct__release_if_whole(a, b);
    }
}

/* Cuts b down to size, returning the rest to the free list. */
static ct_status ct__split(ct__allocator *a, ct__ablock *b, size_t size) {
  size_t rest = b->pub.size - size;
  /* Small remainders are kept down to one quantum; large ones only when big enough to serve
   * another large request, since a large pool block is never handed to a small request. */
  if (rest < (b->seg->small ? a->quantum : CT__SMALL_LIMIT)) return CT_OK;
  ct__ablock *r = calloc(1, sizeof *r);
  if (!r) return ct__error(CT_ERR_OUT_OF_MEMORY, "allocator: out of host memory");
  r->pub.mem = b->pub.mem;
  r->pub.offset = b->pub.offset + size;
  r->pub.size = rest;
  r->pub.priv = r;
  r->seg = b->seg;
  r->prev = b;
  r->next = b->next;
  if (b->next) b->next->prev = r;
  b->next = r;
  b->pub.size = size;
  ct__fl_insert(a, r);
  return CT_OK;
}

static ct_status ct__oom(ct__allocator *a, size_t bytes, const char *why) {
  ct_device *d = a->device;
  char h1[32], h2[32], h3[32], h4[32], h5[48] = "";
  if (a->limit) {
    char hl[32];
    snprintf(h5, sizeof h5, ", limit %s", ct__human(hl, sizeof hl, a->limit));
  }
  return ct__error(CT_ERR_OUT_OF_MEMORY,
                   "out of memory on %s (%s): tried to allocate %s (%zu bytes)%s; the device has %s total memory, "
                   "of which libcltensor has %s allocated by tensors and %s reserved in total by its caching "
                   "allocator%s%s. Release tensors, or call ct_empty_cache() to return cached blocks",
                   d->spec, d->props.name, ct__human(h1, sizeof h1, bytes), bytes, why,
                   ct__human(h2, sizeof h2, d->props.global_mem_bytes), ct__human(h3, sizeof h3, a->stats.allocated_bytes),
                   ct__human(h4, sizeof h4, a->stats.reserved_bytes), h5,
                   a->limit ? " set by $CLTENSOR_MEMORY_LIMIT" : "");
}

/* Creates a segment of size bytes, made real now (lazy drivers would otherwise report an
 * out-of-memory condition at some later kernel). Lock held. On failure the error is set. */
static ct_status ct__segment_new(ct__segment **out, ct__allocator *a, size_t size, int small, size_t request) {
  ct_device *d = a->device;
  if (a->limit && a->stats.reserved_bytes + size > a->limit) {
    ct__release_cached(a);
    if (a->stats.reserved_bytes + size > a->limit) return ct__oom(a, request, " (over the memory limit)");
  }
  cl_int err = CL_SUCCESS;
  cl_mem mem = NULL;
  for (int attempt = 0; attempt < 2 && !mem; attempt++) {
    if (attempt) ct__release_cached(a);
    mem = clCreateBuffer(ct__device_context(d), CL_MEM_READ_WRITE, size, NULL, &err);
    if (!mem) continue;
    cl_event ev = NULL;
    err = clEnqueueMigrateMemObjects(ct__device_queue(d), 1, &mem, CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0, NULL,
                                     &ev);
    if (err == CL_SUCCESS) {
      err = clWaitForEvents(1, &ev);
      cl_int exec = CL_COMPLETE;
      clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
      if (exec < 0) err = exec;
      clReleaseEvent(ev);
    }
    if (err != CL_SUCCESS) {
      clReleaseMemObject(mem);
      mem = NULL;
    }
  }
  if (!mem) {
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES || err == CL_OUT_OF_HOST_MEMORY ||
        err == CL_INVALID_BUFFER_SIZE) {
      char why[96];
      snprintf(why, sizeof why, " (OpenCL: %s)", ct__cl_error_name(err));
      return ct__oom(a, request, why);
    }
    return ct__cl_error(err, "allocator: creating a buffer of %zu bytes on %s failed", size, d->spec);
  }
  ct__segment *s = calloc(1, sizeof *s);
  if (!s) {
    clReleaseMemObject(mem);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "allocator: out of host memory");
  }
  s->mem = mem;
  s->size = size;
  s->small = small;
  s->owner = a;
  s->next = a->segments;
  if (a->segments) a->segments->prev = s;
  a->segments = s;
  a->stats.reserved_bytes += size;
  a->stats.cl_alloc_count++;
  if (a->stats.reserved_bytes > a->stats.peak_reserved_bytes) a->stats.peak_reserved_bytes = a->stats.reserved_bytes;
  *out = s;
  return CT_OK;
}

ct_status ct__alloc(ct__block **out, ct_device *d, size_t bytes) {
  *out = NULL;
  ct__allocator *a;
  CT__TRY(ct__allocator_get(&a, d));
  /* 0-byte requests get a real minimal block: OpenCL has no 0-byte buffers, and every tensor
   * then has a valid cl_mem to pass as a kernel argument. */
  size_t want = bytes ? bytes : 1;
  size_t size;
  if (want <= CT__SMALL_LIMIT) {
    size = (want + a->quantum - 1) / a->quantum * a->quantum;
  } else {
    if (want > SIZE_MAX - CT__LARGE_ROUND) return ct__oom(a, bytes, " (above the maximum single allocation)");
    size = (want + CT__LARGE_ROUND - 1) / CT__LARGE_ROUND * CT__LARGE_ROUND;
  }
  /* Rounding must not push a request that fits over the device's single-allocation limit. */
  if (size > d->props.max_alloc_bytes && want <= d->props.max_alloc_bytes) size = want;
  int small = size <= CT__SMALL_LIMIT;
  if (size > d->props.max_alloc_bytes) {
    pthread_mutex_lock(&a->lock);
    char why[96], h[32];
    snprintf(why, sizeof why, ", above the device's maximum single allocation of %s",
             ct__human(h, sizeof h, d->props.max_alloc_bytes));
    ct_status st = ct__oom(a, bytes, why);
    pthread_mutex_unlock(&a->lock);
    return st;
  }
  pthread_mutex_lock(&a->lock);
  ct_status st = CT_OK;
  ct__ablock *b = NULL;
  if (!a->no_caching) {
    for (b = a->free_list[small]; b && b->pub.size < size; b = b->fnext) {
    }
  }
  if (b) {
    ct__fl_remove(a, b);
    a->stats.cache_hits++;
  } else {
    size_t seg_size = size;
    if (small && !a->no_caching && CT__SMALL_SEGMENT <= d->props.max_alloc_bytes) seg_size = CT__SMALL_SEGMENT;
    ct__segment *s = NULL;
    st = ct__segment_new(&s, a, seg_size, small, bytes);
    if (st != CT_OK) goto done;
    b = calloc(1, sizeof *b);
    if (!b) {
      st = ct__error(CT_ERR_OUT_OF_MEMORY, "allocator: out of host memory");
      if (s->prev) s->prev->next = s->next;
      else a->segments = s->next;
      if (s->next) s->next->prev = s->prev;
      a->stats.reserved_bytes -= s->size;
      clReleaseMemObject(s->mem);
      free(s);
      goto done;
    }
    b->pub.mem = s->mem;
    b->pub.offset = 0;
    b->pub.size = seg_size;
    b->pub.priv = b;
    b->seg = s;
  }
  if (!a->no_caching && (st = ct__split(a, b, size)) != CT_OK) {
    ct__fl_insert(a, b);
    goto done;
  }
  b->allocated = 1;
  a->stats.allocated_bytes += b->pub.size;
  if (a->stats.allocated_bytes > a->stats.peak_allocated_bytes) a->stats.peak_allocated_bytes = a->stats.allocated_bytes;
  a->stats.alloc_count++;
  *out = &b->pub;
done:
  pthread_mutex_unlock(&a->lock);
  return st;
}

void ct__free(ct__block *pb) {
  if (!pb) return;
  ct__ablock *b = pb->priv;
  ct__segment *s = b->seg;
  ct__allocator *a = s->owner;
  pthread_mutex_lock(&a->lock);
  b->allocated = 0;
  a->stats.allocated_bytes -= b->pub.size;
  /* Merge with free neighbours so large requests can use the space again. */
  if (b->prev && !b->prev->allocated) {
    ct__ablock *p = b->prev;
    ct__fl_remove(a, p);
    p->pub.size += b->pub.size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    free(b);
    b = p;
  }
  if (b->next && !b->next->allocated) {
    ct__ablock *n = b->next;
    ct__fl_remove(a, n);
    b->pub.size += n->pub.size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
  }
  ct__fl_insert(a, b);
  if (a->no_caching) ct__release_if_whole(a, b);
  pthread_mutex_unlock(&a->lock);
}

/* ---- public API ---- */

ct_status ct_memory_stats_get(ct_memory_stats *out, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_memory_stats_get", out);
  CT__CHECK_NOT_NULL("ct_memory_stats_get", d);
  ct__allocator *a;
  CT__TRY(ct__allocator_get(&a, d));
  pthread_mutex_lock(&a->lock);
  *out = a->stats;
  pthread_mutex_unlock(&a->lock);
  return CT_OK;
}

ct_status ct_memory_reset_peak(ct_device *d) {
  CT__CHECK_NOT_NULL("ct_memory_reset_peak", d);
  ct__allocator *a;
  CT__TRY(ct__allocator_get(&a, d));
  pthread_mutex_lock(&a->lock);
  a->stats.peak_allocated_bytes = a->stats.allocated_bytes;
  a->stats.peak_reserved_bytes = a->stats.reserved_bytes;
  pthread_mutex_unlock(&a->lock);
  return CT_OK;
}

ct_status ct_empty_cache(ct_device *d) {
  CT__CHECK_NOT_NULL("ct_empty_cache", d);
  ct__allocator *a;
  CT__TRY(ct__allocator_get(&a, d));
  pthread_mutex_lock(&a->lock);
  ct__release_cached(a);
  pthread_mutex_unlock(&a->lock);
  return CT_OK;
}
