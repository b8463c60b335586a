/* Platform and device enumeration, ordering, lookup by spec, lazy context/queue, shutdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <CL/cl_ext.h>

#include "core/env.h"
#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"

atomic_int ct__want_queue_profiling;

static atomic_uint ct__generation;

unsigned ct__device_generation(void) { return atomic_load_explicit(&ct__generation, memory_order_acquire); }

#define CT__NO_PLATFORM_HINT                                                                 \
  "no OpenCL platform found: install an OpenCL driver (ICD), e.g. Debian's pocl-opencl-icd " \
  "for the CPU or your GPU vendor's driver, and check that /etc/OpenCL/vendors lists it "    \
  "(or that $OCL_ICD_VENDORS points at a folder of .icd files)"

static struct {
  pthread_mutex_t lock;
  int ready;                 /* enumeration done and successful */
  int nplat;
  struct ct__platform *plats;
  int count;
  ct_device **devs;          /* sorted */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

const char *ct_device_type_name(ct_device_type type) {
  switch (type) {
    case CT_DEVICE_GPU: return "gpu";
    case CT_DEVICE_ACCELERATOR: return "accelerator";
    case CT_DEVICE_CPU: return "cpu";
    default: return "other";
  }
}

/* Queries a string property into the growing arena; returns its offset or -1. */
static long ct__str_prop(char **arena, size_t *used, int is_platform, void *obj, cl_uint param) {
  size_t size = 0;
  cl_int err = is_platform ? clGetPlatformInfo((cl_platform_id)obj, param, 0, NULL, &size)
                           : clGetDeviceInfo((cl_device_id)obj, param, 0, NULL, &size);
  if (err != CL_SUCCESS) size = 0;
  char *grown = realloc(*arena, *used + size + 1);
  if (!grown) return -1;
  *arena = grown;
  long off = (long)*used;
  if (size > 0) {
    err = is_platform ? clGetPlatformInfo((cl_platform_id)obj, param, size, grown + off, NULL)
                      : clGetDeviceInfo((cl_device_id)obj, param, size, grown + off, NULL);
    if (err != CL_SUCCESS) size = 0;
  }
  grown[off + size] = '\0';
  /* Some drivers pad names with trailing spaces. */
  for (long e = off + (long)strlen(grown + off); e > off && grown[e - 1] == ' '; e--) grown[e - 1] = '\0';
  *used += size + 1;
  return off;
}

static int ct__has_ext(const char *exts, const char *name) {
  size_t n = strlen(name);
  for (const char *p = exts; (p = strstr(p, name)) != NULL; p += n) {
    if ((p == exts || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
  }
  return 0;
}

static ct_status ct__device_init_props(ct_device *d, cl_platform_id plat) {
  char *arena = NULL;
  size_t used = 0;
  long o_name = ct__str_prop(&arena, &used, 0, d->id, CL_DEVICE_NAME);
  long o_vendor = ct__str_prop(&arena, &used, 0, d->id, CL_DEVICE_VENDOR);
  long o_pname = ct__str_prop(&arena, &used, 1, plat, CL_PLATFORM_NAME);
  long o_pver = ct__str_prop(&arena, &used, 1, plat, CL_PLATFORM_VERSION);
  long o_drv = ct__str_prop(&arena, &used, 0, d->id, CL_DRIVER_VERSION);
  long o_dver = ct__str_prop(&arena, &used, 0, d->id, CL_DEVICE_VERSION);
  long o_cver = ct__str_prop(&arena, &used, 0, d->id, CL_DEVICE_OPENCL_C_VERSION);
  long o_ext = ct__str_prop(&arena, &used, 0, d->id, CL_DEVICE_EXTENSIONS);
  if (o_name < 0 || o_vendor < 0 || o_pname < 0 || o_pver < 0 || o_drv < 0 || o_dver < 0 ||
      o_cver < 0 || o_ext < 0) {
    free(arena);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_device_count: out of host memory reading device properties");
  }
  d->strings = arena;
  ct_device_props *p = &d->props;
  p->name = arena + o_name;
  p->vendor = arena + o_vendor;
  p->platform_name = arena + o_pname;
  p->platform_version = arena + o_pver;
  p->driver_version = arena + o_drv;
  p->device_version = arena + o_dver;
  p->opencl_c_version = arena + o_cver;
  p->extensions = arena + o_ext;

  cl_device_type type = 0;
  cl_uint cu = 0, clock = 0, align = 0;
  cl_ulong gmem = 0, maxalloc = 0, lmem = 0;
  size_t wg = 0;
  cl_bool unified = CL_FALSE;
  clGetDeviceInfo(d->id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof clock, &clock, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align, &align, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
  cl_device_exec_capabilities exec = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof exec, &exec, NULL);
  d->native_kernels = (exec & CL_EXEC_NATIVE_KERNEL) != 0;
  cl_uint lanes = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof lanes, &lanes, NULL);
  d->float_lanes = lanes ? lanes : 1;
  p->type = (type & CL_DEVICE_TYPE_GPU)           ? CT_DEVICE_GPU
            : (type & CL_DEVICE_TYPE_ACCELERATOR) ? CT_DEVICE_ACCELERATOR
            : (type & CL_DEVICE_TYPE_CPU)         ? CT_DEVICE_CPU
                                                  : CT_DEVICE_OTHER;
  p->compute_units = cu;
  p->max_clock_mhz = clock;
  p->global_mem_bytes = gmem;
  p->max_alloc_bytes = maxalloc;
  p->local_mem_bytes = lmem;
  p->max_work_group_size = wg ? wg : 1;
  p->mem_base_addr_align_bits = align;
  p->host_unified_memory = unified == CL_TRUE;
  p->fp64 = ct__has_ext(p->extensions, "cl_khr_fp64");
  p->fp16 = ct__has_ext(p->extensions, "cl_khr_fp16");
  ct__device_init_quirks(d);
  return CT_OK;
}

/* The documented order: type, then compute (CUs x clock) descending, then memory descending,
 * then OpenCL platform and device index. */
static int ct__device_cmp(const void *pa, const void *pb) {
  const ct_device *a = *(ct_device *const *)pa, *b = *(ct_device *const *)pb;
  if (a->props.type != b->props.type) return a->props.type < b->props.type ? -1 : 1;
  uint64_t ca = (uint64_t)a->props.compute_units * a->props.max_clock_mhz;
  uint64_t cb = (uint64_t)b->props.compute_units * b->props.max_clock_mhz;
  if (ca != cb) return ca > cb ? -1 : 1;
  if (a->props.global_mem_bytes != b->props.global_mem_bytes)
    return a->props.global_mem_bytes > b->props.global_mem_bytes ? -1 : 1;
  if (a->props.platform_index != b->props.platform_index)
    return a->props.platform_index < b->props.platform_index ? -1 : 1;
  return a->props.device_index < b->props.device_index ? -1 : (a->props.device_index > b->props.device_index);
}

static void ct__free_all(void) {
  for (int i = 0; i < g.count; i++) {
    ct_device *d = g.devs[i];
    if (!d) continue;
    for (int s = CT__SLOT_COUNT - 1; s >= 0; s--) {
      void *state = atomic_load(&d->slot[s]);
      if (state && d->slot_destroy[s]) d->slot_destroy[s](d, state);
      atomic_store(&d->slot[s], NULL);
    }
    cl_event last = atomic_exchange(&d->last_event, NULL);
    if (last) clReleaseEvent(last);
    if (d->queue) clReleaseCommandQueue(d->queue);
    pthread_mutex_destroy(&d->lock);
    free(d->strings);
    free(d);
  }
  free(g.devs);
  for (int p = 0; p < g.nplat; p++) {
    if (g.plats[p].ctx) clReleaseContext(g.plats[p].ctx);
    free(g.plats[p].devs);
  }
  free(g.plats);
  g.devs = NULL;
  g.plats = NULL;
  g.count = g.nplat = 0;
  g.ready = 0;
}

/* Enumerates once; called with g.lock held. */
static ct_status ct__enumerate_locked(void) {
  if (g.ready) return CT_OK;
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &np);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && np == 0))
    return ct__error(CT_ERR_NO_PLATFORM, CT__NO_PLATFORM_HINT);
  if (err != CL_SUCCESS) return ct__cl_error(err, "ct_device_count: clGetPlatformIDs failed");
  cl_platform_id *ids = calloc(np, sizeof *ids);
  g.plats = calloc(np, sizeof *g.plats);
  if (!ids || !g.plats) {
    free(ids);
    ct__free_all();
    return ct__error(CT_ERR_OUT_OF_MEMORY, "ct_device_count: out of host memory");
  }
  err = clGetPlatformIDs(np, ids, NULL);
  if (err != CL_SUCCESS) {
    free(ids);
    ct__free_all();
    return ct__cl_error(err, "ct_device_count: clGetPlatformIDs failed");
  }
  g.nplat = (int)np;
  ct_status st = CT_OK;
  for (cl_uint p = 0; p < np && st == CT_OK; p++) {
    struct ct__platform *pl = &g.plats[p];
    pl->id = ids[p];
    cl_uint nd = 0;
    err = clGetDeviceIDs(ids[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
    if (err == CL_DEVICE_NOT_FOUND || nd == 0) continue; /* a platform without devices */
    if (err != CL_SUCCESS) {
      st = ct__cl_error(err, "ct_device_count: clGetDeviceIDs on platform %u failed", p);
      break;
    }
    pl->devs = calloc(nd, sizeof *pl->devs);
    ct_device **grown = realloc(g.devs, (size_t)(g.count + (int)nd) * sizeof *grown);
    if (!pl->devs || !grown) {
      if (grown) g.devs = grown;
      st = ct__error(CT_ERR_OUT_OF_MEMORY, "ct_device_count: out of host memory");
      break;
    }
    g.devs = grown;
    err = clGetDeviceIDs(ids[p], CL_DEVICE_TYPE_ALL, nd, pl->devs, NULL);
    if (err != CL_SUCCESS) {
      st = ct__cl_error(err, "ct_device_count: clGetDeviceIDs on platform %u failed", p);
      break;
    }
    pl->ndev = nd;
    for (cl_uint i = 0; i < nd; i++) {
      ct_device *d = calloc(1, sizeof *d);
      if (!d) {
        st = ct__error(CT_ERR_OUT_OF_MEMORY, "ct_device_count: out of host memory");
        break;
      }
      g.devs[g.count++] = d;
      /* Recursive: a slot's create() may itself need another slot of the same device (GEMM
       * state building kernels, say), which takes this lock again on the same thread. */
      pthread_mutexattr_t attr;
      pthread_mutexattr_init(&attr);
      pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
      pthread_mutex_init(&d->lock, &attr);
      pthread_mutexattr_destroy(&attr);
      d->id = pl->devs[i];
      d->plat = pl;
      d->props.platform_index = (int)p;
      d->props.device_index = (int)i;
      st = ct__device_init_props(d, ids[p]);
      if (st != CT_OK) break;
    }
  }
  free(ids);
  if (st != CT_OK) {
    ct__free_all();
    return st;
  }
  qsort(g.devs, (size_t)g.count, sizeof *g.devs, ct__device_cmp);
  int per_type[4] = {0, 0, 0, 0};
  for (int i = 0; i < g.count; i++) {
    ct_device *d = g.devs[i];
    d->index = i;
    snprintf(d->spec, sizeof d->spec, "%s:%d", ct_device_type_name(d->props.type),
             per_type[d->props.type]++);
  }
  g.ready = 1;
  return CT_OK;
}

static ct_status ct__enumerate(void) {
  pthread_mutex_lock(&g.lock);
  ct_status st = ct__enumerate_locked();
  pthread_mutex_unlock(&g.lock);
  return st;
}

ct_status ct_device_count(int *count) {
  CT__CHECK_NOT_NULL("ct_device_count", count);
  *count = 0;
  CT__TRY(ct__enumerate());
  *count = g.count;
  return CT_OK;
}

ct_status ct_device_get(ct_device **out, int index) {
  CT__CHECK_NOT_NULL("ct_device_get", out);
  *out = NULL;
  CT__TRY(ct__enumerate());
  if (index < 0 || index >= g.count)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_device_get: index %d out of range (%d device%s)",
                     index, g.count, g.count == 1 ? "" : "s");
  *out = g.devs[index];
  return CT_OK;
}

void ct__device_append_list(void) {
  if (g.count == 0) {
    ct__error_append(" (no devices are available)");
    return;
  }
  ct__error_append(" (available:");
  for (int i = 0; i < g.count; i++)
    ct__error_append("%s %s \"%s\" [cl:%d:%d]", i ? "," : "", g.devs[i]->spec,
                     g.devs[i]->props.name, g.devs[i]->props.platform_index,
                     g.devs[i]->props.device_index);
  ct__error_append(")");
}

static int ct__contains_nocase(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0) return 1;
  return n == 0;
}

static ct_status ct__find(ct_device **out, const char *spec, const char *fn) {
  struct ct__spec s;
  CT__TRY(ct__spec_parse_fn(&s, spec, fn));
  CT__TRY(ct__enumerate());
  switch (s.kind) {
    case CT__SPEC_AUTO:
      if (g.count > 0) {
        *out = g.devs[0];
        return CT_OK;
      }
      break;
    case CT__SPEC_TYPE: {
      long seen = 0;
      for (int i = 0; i < g.count; i++) {
        if (g.devs[i]->props.type != s.type) continue;
        if (seen++ == s.n) {
          *out = g.devs[i];
          return CT_OK;
        }
      }
      break;
    }
    case CT__SPEC_CL:
      for (int i = 0; i < g.count; i++) {
        if (g.devs[i]->props.platform_index == s.platform && g.devs[i]->props.device_index == s.device) {
          *out = g.devs[i];
          return CT_OK;
        }
      }
      break;
    case CT__SPEC_NAME:
      for (int i = 0; i < g.count; i++) {
        if (ct__contains_nocase(g.devs[i]->props.name, s.name)) {
          *out = g.devs[i];
          return CT_OK;
        }
      }
      break;
  }
  char esc[160];
  ct__error(CT_ERR_DEVICE_NOT_FOUND, "%s: no device matches '%s'", fn, ct__escape(esc, sizeof esc, spec));
  ct__device_append_list();
  return CT_ERR_DEVICE_NOT_FOUND;
}

ct_status ct_device_find(ct_device **out, const char *spec) {
  CT__CHECK_NOT_NULL("ct_device_find", out);
  *out = NULL;
  return ct__find(out, spec, "ct_device_find");
}

ct_status ct_device_default(ct_device **out) {
  CT__CHECK_NOT_NULL("ct_device_default", out);
  *out = NULL;
  const char *env = getenv("CLTENSOR_DEVICE");
  if (env) {
    static const char fn[] = "ct_device_default";
    ct_status st = ct__find(out, env, fn);
    if (st != CT_OK) {
      /* Say where the spec came from: the user may not know the variable is set. */
      char msg[1024];
      const char *rest = ct_last_error();
      if (strncmp(rest, fn, sizeof fn - 1) == 0 && strncmp(rest + sizeof fn - 1, ": ", 2) == 0)
        rest += sizeof fn + 1;
      snprintf(msg, sizeof msg, "%s", rest);
      ct__error(st, "%s: $CLTENSOR_DEVICE: %s", fn, msg);
    }
    return st;
  }
  return ct__find(out, "auto", "ct_device_default");
}

const char *ct_device_spec(const ct_device *d) { return d ? d->spec : "(null)"; }
int ct_device_index(const ct_device *d) { return d ? d->index : -1; }
const ct_device_props *ct_device_properties(const ct_device *d) { return d ? &d->props : NULL; }

static ct_status ct__open_locked(ct_device *d) {
  struct ct__platform *pl = d->plat;
  cl_int err;
  if (d->style_error[0]) return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_device_open: %s", d->style_error);
  pthread_mutex_lock(&g.lock); /* the context is shared by the platform's devices */
  if (!pl->ctx) {
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)pl->id, 0};
    pl->ctx = clCreateContext(props, pl->ndev, pl->devs, NULL, NULL, &err);
    if (!pl->ctx) {
      pthread_mutex_unlock(&g.lock);
      return ct__cl_error(err, "ct_device_open: clCreateContext for %s (%s) failed", d->spec, d->props.name);
    }
  }
  pthread_mutex_unlock(&g.lock);
  bool env_profiling; /* an invalid value is reported here, the first call that needs it */
  CT__TRY(ct__env_bool("ct_device_open", "CLTENSOR_PROFILE", false, &env_profiling));
  int profiling = atomic_load(&ct__want_queue_profiling) || env_profiling;
  d->queue = clCreateCommandQueue(pl->ctx, d->id, profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
  if (!d->queue)
    return ct__cl_error(err, "ct_device_open: clCreateCommandQueue for %s (%s) failed", d->spec, d->props.name);
  d->queue_profiling = profiling;
  return CT_OK;
}

ct_status ct__device_open(ct_device *d) {
  if (atomic_load_explicit(&d->opened, memory_order_acquire)) return CT_OK;
  pthread_mutex_lock(&d->lock);
  ct_status st = CT_OK;
  if (!atomic_load(&d->opened)) {
    st = ct__open_locked(d);
    if (st == CT_OK) atomic_store_explicit(&d->opened, 1, memory_order_release);
  }
  pthread_mutex_unlock(&d->lock);
  return st;
}

ct_status ct_device_open(ct_device *d) {
  CT__CHECK_NOT_NULL("ct_device_open", d);
  return ct__device_open(d);
}

ct_status ct_device_synchronize(ct_device *d) {
  CT__CHECK_NOT_NULL("ct_device_synchronize", d);
  CT__TRY(ct__deferred_realize("ct_device_synchronize"));
  if (!atomic_load(&d->opened)) return CT_OK;
  cl_int err = clFinish(d->queue);
  ct_status st = ct__device_async_check(d, "ct_device_synchronize");
  if (err != CL_SUCCESS) return ct__cl_error(err, "ct_device_synchronize: clFinish on %s failed", d->spec);
  return st;
}

/* Records a failure status (the first one wins until it is reported). */
static void ct__device_note_status(ct_device *d, cl_event ev) {
  cl_int exec = CL_COMPLETE;
  if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL) != CL_SUCCESS) return;
  int zero = 0;
  if (exec < 0) atomic_compare_exchange_strong(&d->async_error, &zero, (int)exec);
}

void ct__device_track(ct_device *d, cl_event ev) {
  if (!ev) return;
  cl_event prev = atomic_exchange(&d->last_event, ev);
  if (!prev) return;
  ct__device_note_status(d, prev);
  clReleaseEvent(prev);
}

ct_status ct__device_async_check(ct_device *d, const char *fn) {
  cl_event last = atomic_exchange(&d->last_event, NULL);
  if (last) {
    ct__device_note_status(d, last);
    /* Still running: another thread enqueued it after this call's wait began. Put it back
     * unless a newer one has taken its place (which covers it, as ct__device_track says). */
    cl_int exec = CL_COMPLETE;
    clGetEventInfo(last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
    cl_event none = NULL;
    if (exec <= CL_COMPLETE || !atomic_compare_exchange_strong(&d->last_event, &none, last)) clReleaseEvent(last);
  }
  int err = atomic_exchange(&d->async_error, 0);
  if (err == 0) return CT_OK;
  return ct__cl_error((cl_int)err,
                      "%s: a command enqueued earlier on %s failed after it was enqueued (its results, and those "
                      "of commands queued behind it, may be missing)",
                      fn, d->spec);
}

ct_status ct__device_slot(void **out, ct_device *d, enum ct__slot slot,
                          ct_status (*create)(void **state, ct_device *d),
                          void (*destroy)(ct_device *d, void *state)) {
  void *state = atomic_load_explicit(&d->slot[slot], memory_order_acquire);
  if (state) {
    *out = state;
    return CT_OK;
  }
  CT__TRY(ct__device_open(d));
  pthread_mutex_lock(&d->lock);
  ct_status st = CT_OK;
  state = atomic_load(&d->slot[slot]);
  if (!state) {
    st = create(&state, d);
    if (st == CT_OK) {
      d->slot_destroy[slot] = destroy;
      atomic_store_explicit(&d->slot[slot], state, memory_order_release);
    }
  }
  pthread_mutex_unlock(&d->lock);
  *out = st == CT_OK ? state : NULL;
  return st;
}

void ct_shutdown(void) {
  /* Work still recorded is enqueued first (its tensors may be read after a re-init would not
   * know them), then whatever could not be is dropped: the graph holds references. */
  ct__deferred_shutdown();
  pthread_mutex_lock(&g.lock);
  for (int i = 0; i < g.count; i++)
    if (g.devs[i] && g.devs[i]->queue) clFinish(g.devs[i]->queue);
  ct__free_all();
  /* After the slots are destroyed: the allocator's own teardown still frees blocks as usual. */
  atomic_fetch_add_explicit(&ct__generation, 1, memory_order_acq_rel);
  pthread_mutex_unlock(&g.lock);
}
