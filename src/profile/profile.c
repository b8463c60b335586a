/* Event-based device timing per op and device: recording, lazy resolution, the table. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cltensor/profile.h"
#include "core/atomic_file.h"
#include "core/env.h"
#include "core/error.h"
#include "kernel/engine.h"
#include "profile/profile.h"

atomic_int ct__profile_on = -1;

/* Pending events are resolved once this many have accumulated (without waiting for the ones
 * still running), and the oldest are waited for beyond the hard cap, which bounds memory and
 * the driver's live event objects when the host runs far ahead of the device. */
#define CT__PROF_BATCH 512
#define CT__PROF_CAP 65536

struct ct__prof_op {
  char *name;
  uint64_t hash;
  uint64_t calls, timed, ns;
};

struct ct__prof_pending {
  cl_event ev;
  cl_event begin; /* NULL, or a marker whose end starts the span (ct__profile_record_span) */
  uint32_t op;
};

struct ct__prof_dev {
  pthread_mutex_t lock;
  int device_index;
  int queue_profiling;
  const ct_device *device;   /* NULL once the device is shut down */
  char spec[32];
  char name[128];
  struct ct__prof_op *ops;
  uint32_t nops, opcap;
  uint32_t *index;           /* open addressing: op number + 1, 0 when free */
  uint32_t icap;             /* a power of two, at least twice nops */
  struct ct__prof_pending *pending;
  size_t npending, pcap;
  size_t resolve_at;         /* npending at which the next non-blocking resolve runs */
  uint64_t dropped;          /* commands not recorded for lack of host memory */
  uint64_t bogus;            /* commands whose driver times were made up (1 ns or less) */
  struct ct__prof_dev *next;
};

static struct {
  pthread_mutex_t lock;         /* the lists; taken before any device's lock */
  struct ct__prof_dev *live;    /* devices in use */
  struct ct__prof_dev *retired; /* shut down, kept for the CLTENSOR_PROFILE table */
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* $CLTENSOR_PROFILE by the one rule for boolean variables (core/env.h). ct_device_open reports
 * an invalid value (every command needs an open device, so nothing runs unreported); here,
 * where nothing can fail, it counts as off and this thread's message is left as it was. */
static int ct__profile_env(void) {
  const char *v = getenv("CLTENSOR_PROFILE");
  if (!v || !*v) return 0;
  size_t len = strlen(ct_last_error());
  char *saved = malloc(len + 1);
  if (saved) memcpy(saved, ct_last_error(), len + 1);
  bool on = false;
  if (ct__env_bool("CLTENSOR_PROFILE", "CLTENSOR_PROFILE", false, &on) != CT_OK && saved) {
    if (*saved) ct__error(CT_ERR_INVALID_ARGUMENT, "%s", saved);
    else ct_clear_error();
  }
  free(saved);
  return on;
}

int ct__profile_env_init(void) {
  int expected = -1;
  atomic_compare_exchange_strong(&ct__profile_on, &expected, ct__profile_env());
  return atomic_load(&ct__profile_on);
}

ct_status ct_profile_start(void) {
  atomic_store(&ct__want_queue_profiling, 1);
  atomic_store(&ct__profile_on, 1);
  return CT_OK;
}

void ct_profile_stop(void) { atomic_store(&ct__profile_on, 0); }

/* Kernel launches reach the profiler through the engine's launch observer: the engine sits
 * below the profiler and does not call it. */
static void ct__profile_on_launch(ct_device *d, const char *kernel_name, cl_event ev) {
  if (!ct__profile_active()) return;
  if (d->queue_profiling) clRetainEvent(ev);
  ct__profile_record(d, kernel_name, d->queue_profiling ? ev : NULL);
}

/* Installed when the library is loaded, so that $CLTENSOR_PROFILE=1 times kernels without any
 * profiler call. This file is linked wherever commands are enqueued (transfers, copies and
 * GEMMs record through it), in the static library as in the shared one. */
__attribute__((constructor)) static void ct__profile_install(void) {
  ct__kernel_set_launch_observer(ct__profile_on_launch);
}

bool ct_profile_is_enabled(void) { return ct__profile_active() != 0; }

static uint64_t ct__prof_hash(const char *s) {
  uint64_t h = 14695981039346656037ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Resolves pending events: completed ones give their time, failed ones count untimed, running
 * ones are kept, or waited for when wait is set. Called with p->lock held. */
static void ct__prof_resolve(struct ct__prof_dev *p, size_t wait_count) {
  size_t keep = 0;
  for (size_t i = 0; i < p->npending; i++) {
    struct ct__prof_pending *x = &p->pending[i];
    cl_int status = -1;
    if (clGetEventInfo(x->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS)
      status = -1;
    if (status > CL_COMPLETE) {
      if (i >= wait_count) {
        p->pending[keep++] = *x;
        continue;
      }
      status = clWaitForEvents(1, &x->ev) == CL_SUCCESS ? CL_COMPLETE : -1;
    }
    cl_ulong t0 = 0, t1 = 0;
    /* A span's marker was enqueued before ev on the same in-order queue, so it has completed
     * too once ev has. */
    if (status == CL_COMPLETE &&
        (x->begin ? clGetEventProfilingInfo(x->begin, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL)
                  : clGetEventProfilingInfo(x->ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL)) ==
            CL_SUCCESS &&
        clGetEventProfilingInfo(x->ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS &&
        t1 >= t0) {
      /* No command takes a nanosecond or less: such times are made up. Mesa's rusticl 22.3
       * answers 0, 1, 2 and 3 for queued, submit, start and end of every command; counted as
       * untimed, and said so under the table, rather than printed as 0.001 us. */
      if (t1 - t0 <= 1) {
        p->bogus++;
      } else {
        p->ops[x->op].timed++;
        p->ops[x->op].ns += t1 - t0;
      }
    }
    clReleaseEvent(x->ev);
    if (x->begin) clReleaseEvent(x->begin);
  }
  p->npending = keep;
}

/* The number of op, inserting it; UINT32_MAX when out of memory. Called with p->lock held. */
static uint32_t ct__prof_op(struct ct__prof_dev *p, const char *name) {
  uint64_t h = ct__prof_hash(name);
  if (p->icap) {
    for (uint32_t i = (uint32_t)h & (p->icap - 1);; i = (i + 1) & (p->icap - 1)) {
      uint32_t o = p->index[i];
      if (o == 0) break;
      if (p->ops[o - 1].hash == h && strcmp(p->ops[o - 1].name, name) == 0) return o - 1;
    }
  }
  if (p->nops == p->opcap) {
    uint32_t cap = p->opcap ? p->opcap * 2 : 32;
    struct ct__prof_op *grown = realloc(p->ops, cap * sizeof *grown);
    if (!grown) return UINT32_MAX;
    p->ops = grown;
    p->opcap = cap;
  }
  if (2 * (p->nops + 1) > p->icap) {
    uint32_t cap = p->icap ? p->icap * 2 : 64;
    uint32_t *idx = calloc(cap, sizeof *idx);
    if (!idx) return UINT32_MAX;
    for (uint32_t o = 0; o < p->nops; o++) {
      uint32_t i = (uint32_t)p->ops[o].hash & (cap - 1);
      while (idx[i]) i = (i + 1) & (cap - 1);
      idx[i] = o + 1;
    }
    free(p->index);
    p->index = idx;
    p->icap = cap;
  }
  char *copy = strdup(name);
  if (!copy) return UINT32_MAX;
  uint32_t o = p->nops++;
  p->ops[o] = (struct ct__prof_op){.name = copy, .hash = h};
  uint32_t i = (uint32_t)h & (p->icap - 1);
  while (p->index[i]) i = (i + 1) & (p->icap - 1);
  p->index[i] = o + 1;
  return o;
}

static void ct__prof_clear(struct ct__prof_dev *p) {
  for (size_t i = 0; i < p->npending; i++) {
    clReleaseEvent(p->pending[i].ev);
    if (p->pending[i].begin) clReleaseEvent(p->pending[i].begin);
  }
  p->npending = 0;
  p->resolve_at = CT__PROF_BATCH;
  for (uint32_t o = 0; o < p->nops; o++) free(p->ops[o].name);
  p->nops = 0;
  if (p->index) memset(p->index, 0, p->icap * sizeof *p->index);
  p->dropped = 0;
  p->bogus = 0;
}

static void ct__prof_free(struct ct__prof_dev *p) {
  ct__prof_clear(p);
  free(p->ops);
  free(p->index);
  free(p->pending);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

static void ct__prof_print_all(struct ct__prof_dev *list);

static void ct__prof_destroy(ct_device *d, void *state) {
  (void)d;
  struct ct__prof_dev *p = state;
  pthread_mutex_lock(&G.lock);
  struct ct__prof_dev **pp = &G.live;
  while (*pp && *pp != p) pp = &(*pp)->next;
  if (*pp) *pp = p->next;
  pthread_mutex_lock(&p->lock);
  ct__prof_resolve(p, SIZE_MAX); /* the queue has drained: nothing actually waits */
  p->device = NULL;
  pthread_mutex_unlock(&p->lock);
  if (ct__profile_env()) {
    /* Keep it for the table printed once the last device is gone. */
    struct ct__prof_dev **tail = &G.retired;
    while (*tail) tail = &(*tail)->next;
    p->next = NULL;
    *tail = p;
  } else {
    ct__prof_free(p);
  }
  if (!G.live && G.retired) {
    ct__prof_print_all(G.retired);
    for (struct ct__prof_dev *r = G.retired, *rn; r; r = rn) {
      rn = r->next;
      ct__prof_free(r);
    }
    G.retired = NULL;
  }
  pthread_mutex_unlock(&G.lock);
}

static ct_status ct__prof_create(void **state, ct_device *d) {
  struct ct__prof_dev *p = calloc(1, sizeof *p);
  if (!p) return ct__error(CT_ERR_OUT_OF_MEMORY, "profiler: out of host memory");
  pthread_mutex_init(&p->lock, NULL);
  p->device = d;
  p->device_index = d->index;
  p->queue_profiling = d->queue_profiling;
  p->resolve_at = CT__PROF_BATCH;
  snprintf(p->spec, sizeof p->spec, "%s", d->spec);
  snprintf(p->name, sizeof p->name, "%s", d->props.name);
  pthread_mutex_lock(&G.lock);
  p->next = G.live;
  G.live = p;
  pthread_mutex_unlock(&G.lock);
  *state = p;
  return CT_OK;
}

/* The one recording path: an event (with an optional span marker), or host time when both
 * events are NULL and host_ns is set. */
static void ct__prof_add(ct_device *d, const char *op, cl_event begin, cl_event ev, uint64_t host_ns,
                         bool host_timed) {
  if (!ct__profile_active()) {
    if (begin) clReleaseEvent(begin);
    if (ev) clReleaseEvent(ev);
    return;
  }
  struct ct__prof_dev *p;
  if (ct__device_slot((void **)&p, d, CT__SLOT_PROFILE, ct__prof_create, ct__prof_destroy) != CT_OK) {
    if (begin) clReleaseEvent(begin);
    if (ev) clReleaseEvent(ev);
    return;
  }
  pthread_mutex_lock(&p->lock);
  uint32_t o = ct__prof_op(p, op ? op : "(unnamed)");
  if (o == UINT32_MAX) {
    p->dropped++;
    if (begin) clReleaseEvent(begin);
    if (ev) clReleaseEvent(ev);
    pthread_mutex_unlock(&p->lock);
    return;
  }
  p->ops[o].calls++;
  if (host_timed) {
    p->ops[o].timed++;
    p->ops[o].ns += host_ns;
  }
  if (ev) {
    /* Resolving scans every pending event, so it runs once per CT__PROF_BATCH new ones, not on
     * each record while the device lags behind. */
    if (p->npending >= p->resolve_at) {
      size_t wait = 0;
      if (p->npending >= CT__PROF_CAP) {
        clFlush(ct__device_queue(d)); /* waiting on commands never submitted would hang */
        wait = CT__PROF_CAP / 2;
      }
      ct__prof_resolve(p, wait);
      p->resolve_at = p->npending + CT__PROF_BATCH;
    }
    if (p->npending == p->pcap) {
      size_t cap = p->pcap ? p->pcap * 2 : CT__PROF_BATCH * 2;
      struct ct__prof_pending *grown = realloc(p->pending, cap * sizeof *grown);
      if (grown) {
        p->pending = grown;
        p->pcap = cap;
      }
    }
    if (p->npending < p->pcap) {
      p->pending[p->npending++] = (struct ct__prof_pending){ev, begin, o};
    } else {
      clReleaseEvent(ev); /* counted, untimed */
      if (begin) clReleaseEvent(begin);
    }
  } else if (begin) {
    clReleaseEvent(begin);
  }
  pthread_mutex_unlock(&p->lock);
}

void ct__profile_record(ct_device *d, const char *op, cl_event ev) { ct__prof_add(d, op, NULL, ev, 0, false); }

void ct__profile_record_span(ct_device *d, const char *op, cl_event begin, cl_event end) {
  ct__prof_add(d, op, end ? begin : NULL, end, 0, false);
  if (!end && begin) clReleaseEvent(begin);
}

void ct__profile_record_host(ct_device *d, const char *op, uint64_t ns) { ct__prof_add(d, op, NULL, NULL, ns, true); }

void ct_profile_reset(void) {
  pthread_mutex_lock(&G.lock);
  for (struct ct__prof_dev *p = G.live; p; p = p->next) {
    pthread_mutex_lock(&p->lock);
    ct__prof_clear(p);
    pthread_mutex_unlock(&p->lock);
  }
  pthread_mutex_unlock(&G.lock);
}

/* ---- Reporting ---- */

static int ct__prof_cmp_ops(const void *a, const void *b) {
  const struct ct__prof_op *x = a, *y = b;
  if (x->ns != y->ns) return x->ns > y->ns ? -1 : 1;
  if (x->calls != y->calls) return x->calls > y->calls ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int ct__prof_cmp_devs(const void *a, const void *b) {
  const struct ct__prof_dev *x = *(struct ct__prof_dev *const *)a, *y = *(struct ct__prof_dev *const *)b;
  return (x->device_index > y->device_index) - (x->device_index < y->device_index);
}

/* The devices of list in device order, each resolved (waiting) and with its ops sorted by time.
 * Called with G.lock held; returns NULL with *n = 0 when empty or out of memory. */
static struct ct__prof_dev **ct__prof_collect(struct ct__prof_dev *list, size_t *n) {
  *n = 0;
  for (struct ct__prof_dev *p = list; p; p = p->next) (*n)++;
  struct ct__prof_dev **v = *n ? malloc(*n * sizeof *v) : NULL;
  if (!v) {
    *n = 0;
    return NULL;
  }
  size_t i = 0;
  for (struct ct__prof_dev *p = list; p; p = p->next) {
    pthread_mutex_lock(&p->lock);
    if (p->npending && p->device) clFlush(ct__device_queue(p->device));
    ct__prof_resolve(p, SIZE_MAX);
    p->resolve_at = CT__PROF_BATCH;
    /* Sorting reorders ops, so the hash index is rebuilt from the new positions. */
    qsort(p->ops, p->nops, sizeof *p->ops, ct__prof_cmp_ops);
    if (p->index) {
      memset(p->index, 0, p->icap * sizeof *p->index);
      for (uint32_t o = 0; o < p->nops; o++) {
        uint32_t k = (uint32_t)p->ops[o].hash & (p->icap - 1);
        while (p->index[k]) k = (k + 1) & (p->icap - 1);
        p->index[k] = o + 1;
      }
    }
    pthread_mutex_unlock(&p->lock);
    v[i++] = p;
  }
  qsort(v, *n, sizeof *v, ct__prof_cmp_devs);
  return v;
}

static void ct__prof_write(FILE *f, struct ct__prof_dev **v, size_t n) {
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    struct ct__prof_dev *p = v[i];
    pthread_mutex_lock(&p->lock);
    if (p->nops == 0 && p->dropped == 0) {
      pthread_mutex_unlock(&p->lock);
      continue;
    }
    if (any) fputc('\n', f);
    any = 1;
    uint64_t calls = 0, ns = 0, untimed = 0;
    for (uint32_t o = 0; o < p->nops; o++) {
      calls += p->ops[o].calls;
      ns += p->ops[o].ns;
      untimed += p->ops[o].calls - p->ops[o].timed;
    }
    fprintf(f, "cltensor profile: %s (%s)\n", p->spec, p->name);
    if (!p->queue_profiling)
      fprintf(f, "  (this device's queue was created before profiling was asked for: calls are "
                 "counted but not timed; set CLTENSOR_PROFILE=1 or call ct_profile_start() "
                 "before the device's first use)\n");
    fprintf(f, "%-40s %10s %12s %12s %8s\n", "op", "calls", "total ms", "mean us", "share %");
    for (uint32_t o = 0; o < p->nops; o++) {
      const struct ct__prof_op *x = &p->ops[o];
      fprintf(f, "%-40s %10" PRIu64 " %12.3f ", x->name, x->calls, (double)x->ns / 1e6);
      if (x->timed)
        fprintf(f, "%12.3f %8.1f\n", (double)x->ns / (double)x->timed / 1e3,
                ns ? 100.0 * (double)x->ns / (double)ns : 0.0);
      else
        fprintf(f, "%12s %8s\n", "-", "-");
    }
    fprintf(f, "%-40s %10" PRIu64 " %12.3f %12s %8.1f\n", "total", calls, (double)ns / 1e6, "",
            ns ? 100.0 : 0.0);
    untimed = untimed > p->bogus ? untimed - p->bogus : 0;
    if (p->queue_profiling && untimed)
      fprintf(f, "  (%" PRIu64 " call%s without a device time: recorded while the profiler was "
                 "being switched, or the driver gave no times)\n", untimed, untimed == 1 ? "" : "s");
    if (p->bogus)
      fprintf(f, "  (%" PRIu64 " command%s without a usable device time: %s (%s) reported a "
                 "duration of 1 ns or less, which no command takes; its driver gives no real "
                 "command times, see docs/PORTABILITY.md)\n", p->bogus, p->bogus == 1 ? "" : "s",
              p->spec, p->name);
    if (p->dropped)
      fprintf(f, "  (%" PRIu64 " command%s not recorded: out of host memory)\n", p->dropped,
              p->dropped == 1 ? "" : "s");
    pthread_mutex_unlock(&p->lock);
  }
  if (!any) fprintf(f, "cltensor profile: no commands recorded\n");
}

/* Writes the table to $CLTENSOR_PROFILE_FILE; 0, or the errno of the open or of the write.
 * The file is the user's own choice, written as a shell redirection would (a terminal or
 * /dev/stdout is fine), except that a FIFO nobody reads is an error (ENXIO), not a hang at
 * exit: the open does not block. The table is formatted in memory and written with write(),
 * so that the errno reported is the one of the call that failed (a buffered stdio stream fails
 * inside whichever fprintf happens to flush, and errno is not kept until the end). */
static int ct__prof_write_file(const char *path, struct ct__prof_dev **v, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
  if (fd < 0) return errno;
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  int err = 0;
  if (m) {
    ct__prof_write(m, v, n);
    /* A memory stream fails only for lack of memory. */
    if (ferror(m)) err = ENOMEM;
    if (fclose(m) != 0) err = ENOMEM;
  } else {
    err = ENOMEM;
  }
  for (size_t off = 0; !err && off < len;) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) err = errno;
    else if (w == 0) err = EIO;
    else off += (size_t)w;
  }
  free(text);
  if (close(fd) != 0 && !err) err = errno;
  return err;
}

/* The CLTENSOR_PROFILE table at shutdown, to $CLTENSOR_PROFILE_FILE or stderr: the one place
 * the library writes on its own, because the user asked for it. A file that cannot be opened
 * or written (a missing folder, /dev/full) is said once on stderr, followed by the table, so
 * that neither is lost silently. Called with G.lock held. */
static void ct__prof_print_all(struct ct__prof_dev *list) {
  size_t n;
  struct ct__prof_dev **v = ct__prof_collect(list, &n);
  const char *path = getenv("CLTENSOR_PROFILE_FILE");
  int err = path && *path ? ct__prof_write_file(path, v, n) : -1;
  if (err != 0) {
    if (err > 0) {
      char esc[512], eb[128];
      fprintf(stderr, "cltensor profile: cannot write $CLTENSOR_PROFILE_FILE='%s' (%s); the table follows here\n",
              ct__escape(esc, sizeof esc, path), ct__strerror(err, eb, sizeof eb));
    }
    ct__prof_write(stderr, v, n);
    fflush(stderr);
  }
  free(v);
}

ct_status ct_profile_dump(FILE *f) {
  CT__CHECK_NOT_NULL("ct_profile_dump", f);
  pthread_mutex_lock(&G.lock);
  size_t n;
  struct ct__prof_dev **v = ct__prof_collect(G.live, &n);
  clearerr(f);
  ct__prof_write(f, v, n);
  free(v);
  pthread_mutex_unlock(&G.lock);
  char eb[128];
  if (fflush(f) != 0 || ferror(f))
    return ct__error(CT_ERR_IO, "ct_profile_dump: writing the table failed: %s",
                     ct__strerror(errno, eb, sizeof eb));
  return CT_OK;
}

ct_status ct_profile_dump_to_file(const char *path) {
  CT__CHECK_NOT_NULL("ct_profile_dump_to_file", path);
  FILE *f = fopen(path, "w");
  char eb[128];
  if (!f)
    return ct__error(CT_ERR_IO, "ct_profile_dump_to_file: cannot open '%s': %s", path,
                     ct__strerror(errno, eb, sizeof eb));
  ct_status st = ct_profile_dump(f);
  if (fclose(f) != 0 && st == CT_OK)
    st = ct__error(CT_ERR_IO, "ct_profile_dump_to_file: writing '%s' failed: %s", path,
                   ct__strerror(errno, eb, sizeof eb));
  else if (st == CT_ERR_IO)
    st = ct__error(CT_ERR_IO, "ct_profile_dump_to_file: writing '%s' failed", path);
  return st;
}

ct_status ct_profile_get_entries(ct_profile_entry *out, size_t capacity, size_t *count) {
  CT__CHECK_NOT_NULL("ct_profile_get_entries", count);
  *count = 0;
  if (!out && capacity > 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_profile_get_entries: out is NULL with capacity %zu", capacity);
  /* out[0].size is the caller's layout and the array's stride: at least this layout (a later
   * version's rows are larger; their extra fields are left alone), aligned for its fields. */
  size_t stride = capacity > 0 ? out[0].size : sizeof *out;
  if (stride < sizeof *out || stride % _Alignof(ct_profile_entry) != 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "ct_profile_get_entries: out[0].size is %zu; expected sizeof(ct_profile_entry) = %zu or "
                     "a later layout's, a multiple of %zu (set it before the call)",
                     stride, sizeof *out, (size_t)_Alignof(ct_profile_entry));
  pthread_mutex_lock(&G.lock);
  size_t n, rows = 0;
  struct ct__prof_dev **v = ct__prof_collect(G.live, &n);
  for (size_t i = 0; i < n; i++) {
    struct ct__prof_dev *p = v[i];
    pthread_mutex_lock(&p->lock);
    for (uint32_t o = 0; o < p->nops; o++, rows++) {
      if (rows >= capacity) continue;
      ct_profile_entry *e = (ct_profile_entry *)((char *)out + rows * stride);
      e->size = sizeof *e;
      e->device = p->device;
      snprintf(e->op, sizeof e->op, "%s", p->ops[o].name);
      e->calls = p->ops[o].calls;
      e->timed_calls = p->ops[o].timed;
      e->total_ms = (double)p->ops[o].ns / 1e6;
    }
    pthread_mutex_unlock(&p->lock);
  }
  free(v);
  pthread_mutex_unlock(&G.lock);
  *count = rows;
  return CT_OK;
}
