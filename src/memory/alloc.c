/* The per-device caching allocator (PyTorch's CUDA caching allocator is the model).
 *
 * OpenCL buffers ("segments") are carved into blocks, byte ranges addressed as (cl_mem, offset).
 * Requests are rounded up (to 512 B, or the device's base-address alignment if larger, below
 * 1 MiB; to 2 MiB above) and served best-fit from a free list of their pool: small requests
 * share 2 MiB segments, large ones get segments of their own size. A cached block bigger than
 * the request is split and the rest stays cached; freed neighbours merge again.
 *
 * The allocator never reserves more than its cap: the device's global memory
 * (CL_DEVICE_GLOBAL_MEM_SIZE), or $CLTENSOR_MEMORY_LIMIT when that is lower. Drivers that
 * allocate lazily (PoCL, and host-memory devices in general) accept buffers far beyond what
 * exists and fail later, in a kernel or through the OOM killer, so the cap is ours to keep. On
 * a device whose memory is the host's (CL_DEVICE_HOST_UNIFIED_MEMORY), the reserved total must
 * also fit in what the host has available. With R reserved, N the new segment, A MemAvailable
 * from /proc/meminfo, M the margin left to the system (max(256 MiB, 5% of MemTotal)) and T the
 * part of R already resident, a segment is refused when R + N > A + T - M: resident memory has
 * left MemAvailable already, so counting it in R and not adding it back would count it twice,
 * while reserved pages never written (ct_empty) are not in use yet and would otherwise escape
 * the check until written, when the OOM killer comes instead of an error. T is estimated as
 * min(R, the process's resident anonymous memory): PoCL's buffers are anonymous memory of this
 * process, resident once written. The estimate errs towards today's rule (T too large) when the
 * process holds much anonymous memory of its own. Fully written reservations reduce the rule to
 * N <= A - M; untouched ones count in full. /proc is read only when a segment is about to be
 * created (never per cached block). Small segments shrink to the room left under the cap, so
 * even a cap below 2 MiB holds small tensors.
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
#include <unistd.h>

#include "cltensor/tensor.h"
#include "core/env.h"
#include "core/error.h"
#include "device/device.h"
#include "memory/alloc.h"

#define CT__KIB ((size_t)1024)
#define CT__MIB (CT__KIB * 1024)
#define CT__SMALL_LIMIT CT__MIB         /* requests up to this go to the small pool */
#define CT__SMALL_SEGMENT (2 * CT__MIB) /* small pool segment size */
#define CT__LARGE_ROUND (2 * CT__MIB)
#define CT__HOST_MARGIN_MIN ((uint64_t)256 * CT__MIB) /* left to the system on host-memory devices */
#define CT__HOST_MARGIN_PERCENT 5                     /* ... or this share of MemTotal if larger */

struct ct__segment;

typedef struct ct__ablock {
  ct__block pub;                     /* pub.priv points back here */
  struct ct__segment *seg;
  struct ct__ablock *prev, *next;    /* neighbours in the segment, by address */
  struct ct__ablock *fprev, *fnext;  /* free list of the pool, by size */
  int allocated;
  unsigned generation;               /* ct__device_generation() when handed out */
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
  uint64_t limit;        /* $CLTENSOR_MEMORY_LIMIT as given; 0: unset */
  uint64_t cap;          /* reserved bytes never exceed this: min(limit, global memory) */
  int no_caching;
  ct__ablock *free_list[2]; /* [0] large, [1] small; ascending size */
  ct__segment *segments;
  ct_memory_stats stats;
} ct__allocator;

/* ---- size strings ---- */

ct_status ct__parse_size(uint64_t *out, const char *text) {
  if (!out || !text) return ct__error(CT_ERR_INVALID_ARGUMENT, "size string: argument is NULL");
  /* The text comes from the environment: quoted escaped in every message below. */
  char esc[96];
  const char *raw = text;
  text = ct__escape(esc, sizeof esc, raw);
  const char *p = raw;
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
  if (!mult || *rest) {
    char u[48], uesc[96];
    snprintf(u, sizeof u, "%s", unit);
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "size string '%s': unknown unit '%s' (expected B, k/kB, KiB, M/MB, MiB, G/GB, GiB, T/TB or TiB)",
                     text, ct__escape(uesc, sizeof uesc, u));
  }
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

/* "1.50 GiB"; below 1 KiB "12 bytes". */
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

/* A request's size for messages: "12 bytes", or "4.00 MiB (4194304 bytes)" when the rounded
 * form hides the exact count. */
static const char *ct__request_text(char *buf, size_t n, uint64_t bytes) {
  char h[32];
  if (bytes < 1024) return ct__human(buf, n, bytes);
  snprintf(buf, n, "%s (%" PRIu64 " bytes)", ct__human(h, sizeof h, bytes), bytes);
  return buf;
}

/* ---- the host's memory ---- */

/* Tests point these at files of their own to play a host with little memory and a process
 * with more or less of its memory resident. */
static _Atomic(const char *) ct__meminfo_override;
static _Atomic(const char *) ct__status_override;
static _Atomic(const char *) ct__statm_override;

void ct__alloc_meminfo_path(const char *path) { atomic_store(&ct__meminfo_override, path); }

void ct__alloc_status_path(const char *status, const char *statm) {
  atomic_store(&ct__status_override, status);
  atomic_store(&ct__statm_override, statm);
}

/* MemAvailable and MemTotal in bytes from /proc/meminfo (or the test's file). Returns 0 when
 * they cannot be read (no /proc, a kernel older than 3.14): the host check is then skipped and
 * the device cap alone applies. */
static int ct__meminfo(uint64_t *avail, uint64_t *total) {
  const char *path = atomic_load(&ct__meminfo_override);
  FILE *f = fopen(path ? path : "/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  int have = 0;
  while (have != 3 && fgets(line, sizeof line, f)) {
    unsigned long long kib;
    if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
      *avail = (uint64_t)kib * 1024;
      have |= 1;
    } else if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
      *total = (uint64_t)kib * 1024;
      have |= 2;
    }
  }
  fclose(f);
  return have == 3;
}

int ct__alloc_process_anon(uint64_t *out) {
  const char *path = atomic_load(&ct__status_override);
  FILE *f = fopen(path ? path : "/proc/self/status", "r");
  char line[256];
  if (f) {
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
      unsigned long long kib;
      if (sscanf(line, "RssAnon: %llu kB", &kib) == 1) {
        *out = (uint64_t)kib * 1024;
        found = 1;
      }
    }
    fclose(f);
    if (found) return 1;
  }
  /* Kernels before 4.5 have no RssAnon; statm's resident pages less the shared (file-backed
   * and shmem) ones are the same count. */
  path = atomic_load(&ct__statm_override);
  f = fopen(path ? path : "/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size, resident, shared;
  int ok = fscanf(f, "%llu %llu %llu", &size, &resident, &shared) == 3;
  fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  if (!ok || page <= 0) return 0;
  *out = (resident > shared ? (uint64_t)(resident - shared) : 0) * (uint64_t)page;
  return 1;
}

static uint64_t ct__host_margin(uint64_t total) {
  uint64_t pct = total / 100 * CT__HOST_MARGIN_PERCENT;
  return pct > CT__HOST_MARGIN_MIN ? pct : CT__HOST_MARGIN_MIN;
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
   * the free lists. Blocks still allocated are left to their tensors: a tensor released after
   * ct_shutdown() frees its block's bookkeeping itself (ct__free sees the old generation). */
  for (int p = 0; p < 2; p++)
    for (ct__ablock *b = a->free_list[p], *bn; b; b = bn) {
      bn = b->fnext;
      free(b);
    }
  pthread_mutex_destroy(&a->lock);
  free(a);
}

static ct_status ct__alloc_create(void **state, ct_device *d) {
  static const char who[] = "caching allocator";
  size_t align = d->props.mem_base_addr_align_bits / 8;
  if (align < 128) align = 128;
  size_t quantum = align > 512 ? align : 512;
  uint64_t limit = 0;
  const char *lim = getenv("CLTENSOR_MEMORY_LIMIT");
  if (lim && *lim) {
    ct_status st = ct__parse_size(&limit, lim);
    if (st != CT_OK) {
      ct__error_append(" (from $CLTENSOR_MEMORY_LIMIT, which caps each device's reserved memory)");
      return st;
    }
    /* Every block, even an empty tensor's, takes at least one quantum: a lower limit could
     * hold nothing at all, so say so now rather than refuse each allocation. */
    if (limit > 0 && limit < quantum) {
      char esc[96], h[32];
      return ct__error(CT_ERR_INVALID_ARGUMENT,
                       "%s: $CLTENSOR_MEMORY_LIMIT='%s' is below the smallest block the allocator makes on %s (%s), "
                       "so nothing could be allocated; use 0 or unset it for no limit below the device's memory",
                       who, ct__escape(esc, sizeof esc, lim), d->spec, ct__human(h, sizeof h, quantum));
    }
  }
  bool no_caching = false;
  CT__TRY(ct__env_bool(who, "CLTENSOR_NO_CACHING", false, &no_caching));
  ct__allocator *a = calloc(1, sizeof *a);
  if (!a) return ct__error(CT_ERR_OUT_OF_MEMORY, "allocator: out of host memory");
  pthread_mutex_init(&a->lock, NULL);
  a->device = d;
  a->quantum = quantum;
  a->limit = limit;
  /* The variable can lower the cap, never raise it above the device's memory. (A driver that
   * reports no global memory at all gets no device cap rather than a cap of nothing.) */
  a->cap = d->props.global_mem_bytes ? d->props.global_mem_bytes : UINT64_MAX;
  if (limit && limit < a->cap) a->cap = limit;
  a->no_caching = no_caching;
  a->stats.limit_bytes = limit ? a->cap : 0;
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

/* Unlinks segment s from a's list and returns its memory to OpenCL. Lock held. */
static void ct__segment_drop(ct__allocator *a, ct__segment *s) {
  if (s->prev) s->prev->next = s->next;
  else a->segments = s->next;
  if (s->next) s->next->prev = s->prev;
  a->stats.reserved_bytes -= s->size;
  clReleaseMemObject(s->mem);
  free(s);
}

/* Merges b's right neighbour (free, and already off the free lists) into b. */
static void ct__absorb_next(ct__ablock *b) {
  ct__ablock *n = b->next;
  b->pub.size += n->pub.size;
  b->next = n->next;
  if (n->next) n->next->prev = b;
  free(n);
}

/* Returns b's segment to OpenCL when b, a free block, covers all of it (neighbours always
 * merge, so a wholly free segment is exactly one such block). Lock held. Returns 1 if released. */
static int ct__release_if_whole(ct__allocator *a, ct__ablock *b) {
  ct__segment *s = b->seg;
  if (b->pub.offset != 0 || b->pub.size != s->size) return 0;
  ct__fl_remove(a, b);
  free(b);
  ct__segment_drop(a, s);
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

/* Why a request is refused. */
enum ct__why { CT__FITS, CT__OVER_CAP, CT__OVER_HOST };

/* Sets the out-of-memory message: the request (each size said once), why, and the allocator's
 * state. why_text completes "tried to allocate <request>". Lock held. */
static ct_status ct__oom(ct__allocator *a, size_t request, const char *why_text, int said_global) {
  ct_device *d = a->device;
  char rq[64], h1[32], h2[32], h3[32], tail[80] = "";
  if (!said_global)
    snprintf(tail, sizeof tail, ", of the device's %s of global memory", ct__human(h3, sizeof h3, d->props.global_mem_bytes));
  return ct__error(CT_ERR_OUT_OF_MEMORY,
                   "out of memory on %s (%s): tried to allocate %s%s. libcltensor's caching allocator holds %s "
                   "allocated by tensors and %s reserved in total%s. Release tensors, or call ct_empty_cache() to "
                   "return cached blocks",
                   d->spec, d->props.name, ct__request_text(rq, sizeof rq, request), why_text,
                   ct__human(h1, sizeof h1, a->stats.allocated_bytes), ct__human(h2, sizeof h2, a->stats.reserved_bytes),
                   tail);
}

/* What the host check read, for the message. */
typedef struct ct__host_room {
  uint64_t avail;    /* MemAvailable */
  uint64_t margin;   /* left to the system */
  uint64_t unwritten; /* reserved bytes estimated not resident: R - T */
} ct__host_room;

/* Whether a new segment of size bytes fits under the cap and, on a host-memory device, in the
 * host's available memory (R + N <= A + T - M, see the top of the file). Lock held. *host
 * receives what was read. */
static enum ct__why ct__room(ct__allocator *a, size_t size, ct__host_room *host) {
  uint64_t r = a->stats.reserved_bytes;
  if (r > a->cap || size > a->cap - r) return CT__OVER_CAP;
  uint64_t avail, total;
  if (a->device->props.host_unified_memory && ct__meminfo(&avail, &total)) {
    /* Without a reading of the process's resident memory, take all of R as resident: the
     * new segment alone is then compared with what is available. */
    uint64_t resident = r;
    if (ct__alloc_process_anon(&resident) && resident > r) resident = r;
    host->avail = avail;
    host->margin = ct__host_margin(total);
    host->unwritten = r - resident;
    /* r + size <= cap, and avail + resident cannot overflow for any real host. */
    uint64_t room = avail + resident;
    if (room < host->margin || r + size > room - host->margin) return CT__OVER_HOST;
  }
  return CT__FITS;
}

/* The message for a refusal by ct__room(). Lock held. */
static ct_status ct__oom_room(ct__allocator *a, size_t request, size_t size, enum ct__why why,
                              const ct__host_room *host) {
  char text[512], seg[64] = "", unw[160] = "", h1[32], h2[32], h3[32];
  /* The block or segment the request needs, when rounding made it differ from the request. */
  if (size != request) snprintf(seg, sizeof seg, ", which needs a new segment of %s", ct__human(h3, sizeof h3, size));
  if (why == CT__OVER_HOST) {
    if (host->unwritten)
      snprintf(unw, sizeof unw, "; %s the allocator has reserved but not yet written counts against that too",
               ct__human(h3, sizeof h3, host->unwritten));
    snprintf(text, sizeof text,
             "%s, but the device's memory is the host's, which has %s available (MemAvailable), and libcltensor "
             "leaves %s of it to the system%s",
             seg, ct__human(h1, sizeof h1, host->avail), ct__human(h2, sizeof h2, host->margin), unw);
    return ct__oom(a, request, text, 0);
  }
  uint64_t left = a->cap > a->stats.reserved_bytes ? a->cap - a->stats.reserved_bytes : 0;
  ct__human(h1, sizeof h1, left);
  ct__human(h2, sizeof h2, a->cap);
  if (a->limit && a->limit == a->cap) {
    snprintf(text, sizeof text, "%s, but only %s remain under the limit of %s set by $CLTENSOR_MEMORY_LIMIT", seg, h1, h2);
    return ct__oom(a, request, text, 0);
  }
  if (a->limit)
    snprintf(text, sizeof text,
             "%s, but only %s remain under the device's %s of global memory ($CLTENSOR_MEMORY_LIMIT, %s, can lower "
             "that cap but not raise it)",
             seg, h1, h2, ct__human(h3, sizeof h3, a->limit));
  else
    snprintf(text, sizeof text, "%s, but only %s remain under the device's %s of global memory", seg, h1, h2);
  return ct__oom(a, request, text, 1);
}

/* Creates a segment of size bytes. The buffer is migrated to the device at once so that a
 * driver that allocates its storage only then reports failure here rather than at some later
 * kernel; a lazy host-memory driver (PoCL) touches no page in the migration, so its pages stay
 * unwritten until used: the cap and the host check are what bound them. Lock held. On failure
 * the error is set. */
static ct_status ct__segment_new(ct__segment **out, ct__allocator *a, size_t size, int small, size_t request) {
  ct_device *d = a->device;
  ct__host_room host = {0, 0, 0};
  enum ct__why why = ct__room(a, size, &host);
  if (why != CT__FITS) {
    ct__release_cached(a);
    why = ct__room(a, size, &host);
    if (why != CT__FITS) return ct__oom_room(a, request, size, why, &host);
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
      /* The buffer's size only where rounding made it differ from the request: each size once. */
      char why_text[128], h[32], of[48] = "";
      if (size != request) snprintf(of, sizeof of, " of %s", ct__human(h, sizeof h, size));
      snprintf(why_text, sizeof why_text, ": OpenCL refused a buffer%s (%s)", of, ct__cl_error_name(err));
      return ct__oom(a, request, why_text, 0);
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

/* The size of a new small-pool segment for a block of size bytes: CT__SMALL_SEGMENT, or less
 * when the cap leaves less room (cached segments are returned first to make room), down to
 * the block itself. Lock held. */
static size_t ct__small_segment_size(ct__allocator *a, size_t size) {
  uint64_t room = a->cap > a->stats.reserved_bytes ? a->cap - a->stats.reserved_bytes : 0;
  if (room < CT__SMALL_SEGMENT) {
    ct__release_cached(a);
    room = a->cap > a->stats.reserved_bytes ? a->cap - a->stats.reserved_bytes : 0;
  }
  if (room >= CT__SMALL_SEGMENT) return CT__SMALL_SEGMENT;
  size_t seg = (size_t)room / a->quantum * a->quantum;
  return seg > size ? seg : size;
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
    if (want > SIZE_MAX - CT__LARGE_ROUND) {
      pthread_mutex_lock(&a->lock);
      ct_status st = ct__oom(a, bytes, ", above the maximum single allocation", 0);
      pthread_mutex_unlock(&a->lock);
      return st;
    }
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
    ct_status st = ct__oom(a, bytes, why, 0);
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
    if (small && !a->no_caching && CT__SMALL_SEGMENT <= d->props.max_alloc_bytes)
      seg_size = ct__small_segment_size(a, size);
    ct__segment *s = NULL;
    st = ct__segment_new(&s, a, seg_size, small, bytes);
    if (st != CT_OK) goto done;
    b = calloc(1, sizeof *b);
    if (!b) {
      st = ct__error(CT_ERR_OUT_OF_MEMORY, "allocator: out of host memory");
      ct__segment_drop(a, s);
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
  b->generation = ct__device_generation();
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
  /* Released after ct_shutdown(): the segment, the allocator and the device are gone (their
   * OpenCL buffer with them); only this block's own bookkeeping is left to free. */
  if (b->generation != ct__device_generation()) {
    free(b);
    return;
  }
  ct__segment *s = b->seg;
  ct__allocator *a = s->owner;
  pthread_mutex_lock(&a->lock);
  b->allocated = 0;
  a->stats.allocated_bytes -= b->pub.size;
  /* Merge with free neighbours so large requests can use the space again. */
  if (b->prev && !b->prev->allocated) {
    b = b->prev;
    ct__fl_remove(a, b);
    ct__absorb_next(b);
  }
  if (b->next && !b->next->allocated) {
    ct__fl_remove(a, b->next);
    ct__absorb_next(b);
  }
  ct__fl_insert(a, b);
  if (a->no_caching) ct__release_if_whole(a, b);
  pthread_mutex_unlock(&a->lock);
}

/* ---- public API ---- */

/* The public allocator calls: d's allocator (created on first use), locked; the caller
 * unlocks it. */
static ct_status ct__allocator_locked(ct__allocator **a, ct_device *d, const char *fn) {
  CT__CHECK_NOT_NULL(fn, d);
  CT__TRY(ct__allocator_get(a, d));
  pthread_mutex_lock(&(*a)->lock);
  return CT_OK;
}

ct_status ct_device_get_memory_stats(ct_memory_stats *out, ct_device *d) {
  CT__CHECK_NOT_NULL("ct_device_get_memory_stats", out);
  /* The caller's struct is at least this layout (a larger one is a later version's, whose
   * extra fields this library does not know and leaves alone). */
  if (out->size < sizeof *out)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "ct_device_get_memory_stats: out->size is %zu, below sizeof(ct_memory_stats) = %zu "
                     "(set it to sizeof(ct_memory_stats) before the call)",
                     out->size, sizeof *out);
  ct__allocator *a;
  CT__TRY(ct__allocator_locked(&a, d, "ct_device_get_memory_stats"));
  *out = a->stats;
  pthread_mutex_unlock(&a->lock);
  out->size = sizeof *out;
  return CT_OK;
}

ct_status ct_memory_reset_peak(ct_device *d) {
  ct__allocator *a;
  CT__TRY(ct__allocator_locked(&a, d, "ct_memory_reset_peak"));
  a->stats.peak_allocated_bytes = a->stats.allocated_bytes;
  a->stats.peak_reserved_bytes = a->stats.reserved_bytes;
  pthread_mutex_unlock(&a->lock);
  return CT_OK;
}

ct_status ct_empty_cache(ct_device *d) {
  ct__allocator *a;
  CT__TRY(ct__allocator_locked(&a, d, "ct_empty_cache"));
  ct__release_cached(a);
  pthread_mutex_unlock(&a->lock);
  return CT_OK;
}
