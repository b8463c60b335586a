/* Program building (from source or from the disk cache), the per-device program and kernel
 * caches, and kernel launches.
 *
 * Two levels of caching per device:
 *  - a lookup table from what a caller asks for (file or generated source, kernel name,
 *    options as passed) to the ct__kernel. Ops ask on every call, so hits are lock-free: a
 *    fixed array of buckets whose chains only ever grow at the head, published with release
 *    stores and freed only at ct_shutdown();
 *  - the programs themselves, keyed by source text and full build options, consulted under the
 *    engine lock on a lookup miss. One cl_kernel exists per (program, kernel name), so two
 *    spellings of the same request (NULL or "" options, equal generated texts in different
 *    buffers) share the kernel and its lock. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/version.h"
#include "core/env.h"
#include "core/error.h"
#include "device/device.h"
#include "fusion/hooks.h"
#include "kernel/cache.h"
#include "kernel/engine.h"
#include "kernel/kernel_config.h"
#include "kernel/launch_geom.h"

struct ct__kernel {
  cl_kernel k;
  pthread_mutex_t lock;
  size_t group;            /* work-group size ct__launch_dims() uses: a power of two */
  size_t max_items[3];     /* CL_DEVICE_MAX_WORK_ITEM_SIZES of dims 0-2, floored to powers of two */
  size_t tile0;            /* at most this many work-items along dim 0 in a 2-D or 3-D launch */
  bool whole1;             /* 1-D launches shorter than the group still get the whole group */
  cl_uint nargs;           /* CL_KERNEL_NUM_ARGS, or CT__KERNEL_NARGS_UNKNOWN */
  bool drop_mems;          /* its device's kernels retain buffer arguments: drop them at unlock */
  uint64_t mems;           /* buffer arguments set since the lock (bit i: argument i < 64) */
  struct ct__kernel *next; /* in its program */
  char name[];
};

struct ct__program {
  uint64_t hash;        /* ct__hash of source */
  const char *source;   /* the text after common.cl: embedded, loaded or owned */
  char *owned_source;   /* the copy of a generated source */
  char *options;        /* full build options */
  cl_program prog;
  bool from_binary;     /* prog came from the disk cache */
  ct__kernel *kernels;
  struct ct__program *next;
};

size_t ct__device_group_target(const ct_device *d) {
  /* 1024 work-items on CPUs, where a work-group is a loop on one thread and fewer, larger groups
   * cost less (PoCL, 2^25-element add against the raw kernel with the driver's choice: 0.77x
   * with 64, 0.85-1.0x with 256, 0.97-1.0x with 1024 or 4096); 256 elsewhere, a multiple of
   * every warp and wavefront size. */
  size_t want = ct__device_chunked(d) ? 1024 : 256;
  size_t most = d->props.max_work_group_size ? ct__pow2_floor(d->props.max_work_group_size) : 1;
  return want < most ? want : most;
}

/* Queried once per kernel, so that ct__launch_dims() costs no OpenCL call. The device's group
 * target, within the kernel's limit and dim 0's work-item limit. */
static void ct__kernel_limits(ct__kernel *k, ct_device *d) {
  cl_uint ndims = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof ndims, &ndims, NULL);
  size_t items[8] = {0};
  if (ndims >= 3 && ndims <= 8)
    clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_ITEM_SIZES, ndims * sizeof *items, items, NULL);
  for (int i = 0; i < 3; i++) k->max_items[i] = ct__pow2_floor(items[i] ? items[i] : 1);
  size_t want = ct__device_group_target(d), wg = 0;
  clGetKernelWorkGroupInfo(k->k, d->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  if (wg == 0 || wg > want) wg = want;
  /* 1-D launches of whole groups (copy_contig, ew_contig) use the group along dim 0. */
  if (wg > k->max_items[0]) wg = k->max_items[0];
  k->group = ct__pow2_floor(wg);
  /* Chunked (PoCL): tiles of 64 along dim 0, so strided reads such as a transpose's reuse their
   * cache lines across dim 1 (2-5x a 1024-wide row there). Lanes: the whole group along dim 0;
   * llvmpipe ran a 2-D copy into a strided slice at 0.5 GB/s with [64, 4] groups and 1.0 with
   * [256, 1] (its one-line copy: 1.0), and on GPUs a row of 256 is as coalesced as 64. */
  k->tile0 = ct__device_chunked(d) && k->group > 64 ? 64 : k->group;
  /* PoCL's CPU driver compiles a kernel anew for each local size (0.05-0.3 s each, issue #30):
   * one size per kernel there, as a group is a loop whose idle work-items exit at their bounds
   * check; elsewhere a short launch keeps the smallest power of two that covers it. */
  k->whole1 = ct__device_pocl_cpu(d);
  if (clGetKernelInfo(k->k, CL_KERNEL_NUM_ARGS, sizeof k->nargs, &k->nargs, NULL) != CL_SUCCESS)
    k->nargs = CT__KERNEL_NARGS_UNKNOWN;
}

/* A ct__kernel around ck (taken over: released on failure), its limits queried, unlinked. */
static ct_status ct__kernel_wrap(ct__kernel **out, cl_kernel ck, ct_device *d, const char *name) {
  ct__kernel *k = malloc(sizeof *k + strlen(name) + 1);
  if (!k) {
    clReleaseKernel(ck);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
  }
  k->k = ck;
  k->drop_mems = d->kargs_retain;
  k->mems = 0;
  ct__kernel_limits(k, d);
  pthread_mutex_init(&k->lock, NULL);
  strcpy(k->name, name);
  k->next = NULL;
  *out = k;
  return CT_OK;
}

/* What a caller asks for, with the lengths and hash computed once per call. */
struct ct__request {
  const char *key;      /* the file name, or the generated source text */
  const char *name;
  const char *options;  /* as passed, "" for NULL */
  size_t key_len, name_len, options_len;
  int generated;
  uint64_t hash;
};

/* One lookup-table entry: immutable once published. */
struct ct__entry {
  uint64_t hash;
  struct ct__entry *next;
  ct__kernel *kernel;
  const char *key;      /* a copy of the file name, or the program's copy of the source */
  const char *name;
  const char *options;
  size_t key_len, name_len, options_len;
  int generated;
  char strings[];
};

/* A kernels/ file read from the developer kernel folder. */
struct ct__loaded {
  char *text;
  struct ct__loaded *next;
  char name[];
};

#define CT__BUCKETS 4096 /* a power of two; a few thousand dtype specialisations fit */

struct ct__engine {
  pthread_mutex_t lock; /* programs, loaded sources, inserting entries, building */
  _Atomic(struct ct__entry *) buckets[CT__BUCKETS];
  struct ct__program *programs;
  struct ct__loaded *loaded;
  char *kernel_dir;     /* NULL: the embedded sources */
  char base_options[128];
  bool light;           /* PoCL: the library's programs start with pocl_builtins.h (ct__build_any) */
  bool light_strict;    /* ... and a failure is the error, not a fallback (the test suites) */
};

#define CT__COUNTER(name) atomic_ulong name;
static struct {
  CT__ENGINE_COUNTERS(CT__COUNTER)
} ct__stats;
#undef CT__COUNTER

void ct__engine_stats(struct ct__engine_stats *out) {
#define CT__LOAD(name) out->name = atomic_load(&ct__stats.name);
  CT__ENGINE_COUNTERS(CT__LOAD)
#undef CT__LOAD
}

/* A fast multiplicative hash taking 8 bytes per step, so a long generated source costs little
 * to look up. Only a hint: every hit is confirmed by comparing the strings themselves. */
#define CT__HASH_K 0x9e3779b97f4a7c15ull
static inline uint64_t ct__hash(uint64_t h, const char *s, size_t n) {
  h = (h ^ n) * CT__HASH_K;
  for (; n >= 8; s += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * CT__HASH_K;
    h ^= h >> 29;
  }
  uint64_t w = 0;
  memcpy(&w, s, n);
  h = (h ^ w) * CT__HASH_K;
  return h ^ (h >> 32);
}

const struct ct__embedded_source *ct__embedded_find(const char *name) {
  for (int i = 0; i < ct__embedded_source_count; i++)
    if (strcmp(ct__embedded_sources[i].name, name) == 0) return &ct__embedded_sources[i];
  return NULL;
}

const char *ct__kernel_dir(void) {
  const char *env = getenv("CLTENSOR_KERNEL_DIR");
  if (env && *env) return env;
  return CT_KERNEL_DIR[0] ? CT_KERNEL_DIR : NULL;
}

static void ct__engine_destroy(ct_device *d, void *state) {
  (void)d;
  struct ct__engine *e = state;
  for (int b = 0; b < CT__BUCKETS; b++) {
    for (struct ct__entry *x = atomic_load(&e->buckets[b]), *xn; x; x = xn) {
      xn = x->next;
      free(x);
    }
  }
  for (struct ct__program *p = e->programs, *pn; p; p = pn) {
    pn = p->next;
    for (ct__kernel *k = p->kernels, *kn; k; k = kn) {
      kn = k->next;
      clReleaseKernel(k->k);
      pthread_mutex_destroy(&k->lock);
      free(k);
    }
    clReleaseProgram(p->prog);
    free(p->owned_source);
    free(p->options);
    free(p);
  }
  for (struct ct__loaded *l = e->loaded, *ln; l; l = ln) {
    ln = l->next;
    free(l->text);
    free(l);
  }
  free(e->kernel_dir);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

/* The OpenCL C version the device's compiler accepts, as major * 10 + minor; 0 if unknown. */
static int ct__opencl_c_version(const ct_device *d) {
  int major = 0, minor = 0;
  if (sscanf(d->props.opencl_c_version, "OpenCL C %d.%d", &major, &minor) != 2) return 0;
  return major * 10 + minor;
}

static ct_status ct__engine_create(void **state, ct_device *d) {
  struct ct__engine *e = calloc(1, sizeof *e);
  if (!e) return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
  const char *dir = ct__kernel_dir();
  if (dir && !(e->kernel_dir = strdup(dir))) {
    free(e);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
  }
  pthread_mutex_init(&e->lock, NULL);
  /* Only options that keep IEEE float semantics: no -cl-fast-relaxed-math, -cl-mad-enable or
   * -cl-denorms-are-zero, so results agree across devices. -cl-std=CL1.2 is asked only where
   * the compiler accepts it (an OpenCL C 1.1 compiler would reject the option itself; the
   * kernels' 1.2 features then show up as a readable build log instead). */
  snprintf(e->base_options, sizeof e->base_options, "%s-DCT_HAS_FP64=%d -DCT_FAST_FMA=%d",
           ct__opencl_c_version(d) >= 12 ? "-cl-std=CL1.2 " : "", d->props.fp64 ? 1 : 0,
           ct__device_fast_fma(d) ? 1 : 0);
  /* PoCL parses Clang's whole opencl-c.h in front of every program (ct__build_any). */
  const char *lh = getenv("CLTENSOR_POCL_LIGHT_HEADER");
  const bool pocl = ct__device_pocl_cpu(d);
  e->light = e->light_strict = pocl && lh && strcmp(lh, "strict") == 0;
  ct_status st = pocl && !e->light_strict
                     ? ct__env_bool("kernel engine", "CLTENSOR_POCL_LIGHT_HEADER", true, &e->light)
                     : CT_OK;
  if (st != CT_OK) {
    ct__engine_destroy(d, e);
    return st;
  }
  *state = e;
  return CT_OK;
}

/* The text of a kernels/ file: embedded, or read once from the developer kernel folder.
 * Called under the engine lock. */
static ct_status ct__source_text(const char **out, struct ct__engine *e, const char *file) {
  if (!e->kernel_dir) {
    const struct ct__embedded_source *src = ct__embedded_find(file);
    if (!src) return ct__error(CT_ERR_INTERNAL, "kernel engine: no embedded source '%s'", file);
    *out = src->text;
    return CT_OK;
  }
  for (struct ct__loaded *l = e->loaded; l; l = l->next) {
    if (strcmp(l->name, file) == 0) {
      *out = l->text;
      return CT_OK;
    }
  }
  if (strchr(file, '/') || strcmp(file, "..") == 0)
    return ct__error(CT_ERR_INTERNAL, "kernel engine: '%s' is not a plain kernels/ file name", file);
  /* The folder may come from $CLTENSOR_KERNEL_DIR: escaped in every message (core/env.h). */
  char path[PATH_MAX], esc[512];
  int n = snprintf(path, sizeof path, "%s/%s", e->kernel_dir, file);
  if (n < 0 || (size_t)n >= sizeof path)
    return ct__error(CT_ERR_IO, "kernel engine: kernel folder path too long: %s",
                     ct__escape(esc, sizeof esc, e->kernel_dir));
  ct__escape(esc, sizeof esc, path);
  FILE *f = fopen(path, "rb");
  if (!f) {
    int err = errno;
    return ct__error(CT_ERR_IO, "kernel engine: cannot read %s (kernel folder from %s): %s", esc,
                     getenv("CLTENSOR_KERNEL_DIR") ? "$CLTENSOR_KERNEL_DIR" : "-Dkernel_dir",
                     strerror(err));
  }
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  struct ct__loaded *l = malloc(sizeof *l + strlen(file) + 1);
  ct_status st = CT_OK;
  while (text && l) {
    if (len + 1 >= cap) {
      char *grown = realloc(text, cap *= 2);
      if (!grown) {
        free(text);
        text = NULL;
        break;
      }
      text = grown;
    }
    size_t r = fread(text + len, 1, cap - len - 1, f);
    len += r;
    if (r == 0) break;
  }
  if (!text || !l) {
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory reading %s", esc);
  } else if (ferror(f)) {
    st = ct__error(CT_ERR_IO, "kernel engine: error reading %s", esc);
  } else if (memchr(text, '\0', len)) {
    st = ct__error(CT_ERR_IO, "kernel engine: %s contains a NUL byte", esc);
  }
  fclose(f);
  if (st != CT_OK) {
    free(text);
    free(l);
    return st;
  }
  text[len] = '\0';
  l->text = text;
  strcpy(l->name, file);
  l->next = e->loaded;
  e->loaded = l;
  *out = text;
  return CT_OK;
}

static ct_status ct__build_failed(cl_program prog, ct_device *d, const char *label,
                                  const char *options, cl_int err) {
  size_t log_size = 0;
  clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
  char *log = malloc(log_size + 1);
  if (log) {
    log[0] = '\0';
    if (clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, log_size, log, NULL) != CL_SUCCESS)
      log[0] = '\0';
    log[log_size] = '\0';
  }
  atomic_fetch_add(&ct__stats.build_failures, 1);
  ct__error(CT_ERR_KERNEL_BUILD,
            "kernel engine: building %s for %s (%s) with options \"%s\" failed: %s (%d); build log:\n%s",
            label, d->spec, d->props.name, options, ct__cl_error_name(err), (int)err,
            log && log[0] ? log : "(empty)");
  free(log);
  return CT_ERR_KERNEL_BUILD;
}

/* The binary of prog for d (malloc()ed), or NULL. */
static unsigned char *ct__program_binary(cl_program prog, cl_device_id dev, size_t *len) {
  cl_uint ndev = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof ndev, &ndev, NULL) != CL_SUCCESS || ndev == 0)
    return NULL;
  cl_device_id *devs = calloc(ndev, sizeof *devs);
  size_t *sizes = calloc(ndev, sizeof *sizes);
  unsigned char **bins = calloc(ndev, sizeof *bins);
  unsigned char *out = NULL;
  if (!devs || !sizes || !bins ||
      clGetProgramInfo(prog, CL_PROGRAM_DEVICES, ndev * sizeof *devs, devs, NULL) != CL_SUCCESS ||
      clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, ndev * sizeof *sizes, sizes, NULL) != CL_SUCCESS)
    goto done;
  cl_uint i = 0;
  while (i < ndev && devs[i] != dev) i++;
  if (i == ndev || sizes[i] == 0 || !(bins[i] = malloc(sizes[i]))) goto done;
  /* Entries left NULL are skipped by the implementation (OpenCL 1.2, 5.6.7). */
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, ndev * sizeof *bins, bins, NULL) != CL_SUCCESS) {
    free(bins[i]);
    goto done;
  }
  out = bins[i];
  *len = sizes[i];
done:
  free(devs);
  free(sizes);
  free(bins);
  return out;
}

/* A program's text in pieces: common.cl, then its source with each line
 * `//#include "x.cl"` replaced by kernels/x.cl. Such a file is a prelude that only some
 * programs share (the cascade sums, the indexing helpers): in common.cl it would go into every
 * program, and a change to it would rebuild them all. The directive is a comment, so a prelude
 * is not itself expanded. Pieces, not a copy: clCreateProgramWithSource takes them as they are,
 * and the disk cache's key hashes the same pieces in order, i.e. the full assembled text. */
#define CT__MAX_INCLUDES 4
struct ct__pieces {
  int n;
  const char *text[3 + 2 * CT__MAX_INCLUDES]; /* (the light header,) common.cl, the source's parts */
  size_t len[3 + 2 * CT__MAX_INCLUDES];
};

/* Under the engine lock (a prelude is read like any kernels/ file). */
static ct_status ct__assemble(struct ct__pieces *out, struct ct__engine *e, const char *label,
                              const char *common, const char *source) {
  static const char directive[] = "//#include \"";
  const size_t dl = sizeof directive - 1;
  out->n = 0;
  out->text[out->n] = common;
  out->len[out->n++] = strlen(common);
  int includes = 0;
  const char *s = source;
  for (const char *at = strstr(s, directive); at; at = strstr(at + dl, directive)) {
    if (at != source && at[-1] != '\n') continue;
    const char *name = at + dl, *q = strchr(name, '"');
    char file[64];
    if (!q || memchr(name, '\n', (size_t)(q - name)) || (size_t)(q - name) >= sizeof file)
      return ct__error(CT_ERR_INTERNAL, "kernel engine: malformed //#include in %s", label);
    if (++includes > CT__MAX_INCLUDES)
      return ct__error(CT_ERR_INTERNAL, "kernel engine: %s has more than %d //#include lines",
                       label, CT__MAX_INCLUDES);
    memcpy(file, name, (size_t)(q - name));
    file[q - name] = '\0';
    const char *prelude;
    CT__TRY(ct__source_text(&prelude, e, file));
    out->text[out->n] = s;
    out->len[out->n++] = (size_t)(at - s);
    out->text[out->n] = prelude;
    out->len[out->n++] = strlen(prelude);
    s = q + strcspn(q, "\n"); /* the directive's line is replaced; its newline stays */
  }
  out->text[out->n] = s;
  out->len[out->n++] = strlen(s);
  return CT_OK;
}

/* Builds (or loads from the disk cache) the program `text` for d; *from_binary says which.
 * from_source skips the cache's binary (and overwrites its entry). A failed build with the light
 * header (light) returns CT_ERR_KERNEL_BUILD quietly: ct__build_any() tries the full one. */
static ct_status ct__build(cl_program *out, bool *from_binary, ct_device *d, const char *label,
                           const struct ct__pieces *text, const char *options, bool from_source,
                           bool light) {
  *from_binary = false;
  /* A $CLTENSOR_CACHE that is not a boolean is refused here, where it can be reported. */
  bool cache_on, store = true;
  CT__TRY(ct__cache_enabled(&cache_on));
  /* On PoCL's CPU driver storing a binary costs more than it saves (ct__cache_pocl_binaries()). */
  if (ct__device_pocl_cpu(d)) CT__TRY(ct__cache_pocl_binaries(&store));
  struct ct__cache_key key = {
      .device_name = d->props.name,
      .device_vendor = d->props.vendor,
      .device_version = d->props.device_version,
      .driver_version = d->props.driver_version,
      .platform_name = d->props.platform_name,
      .platform_version = d->props.platform_version,
      .library_version = CT_VERSION_STRING,
      .options = options,
  };
  struct ct__sha256 sha;
  unsigned char digest[32];
  ct__sha256_init(&sha);
  for (int i = 0; i < text->n; i++) ct__sha256_update(&sha, text->text[i], text->len[i]);
  ct__sha256_final(&sha, digest);
  ct__hex(key.source_sha256, digest, 32);

  cl_int err;
  unsigned char *bin = NULL;
  size_t len = 0;
  enum ct__cache_result cached = from_source ? CT__CACHE_REJECTED : ct__cache_load(&key, &bin, &len);
  if (cached == CT__CACHE_HIT) {
    cl_int bin_status = CL_SUCCESS;
    const unsigned char *bins[1] = {bin};
    cl_program prog = clCreateProgramWithBinary(ct__device_context(d), 1, &d->id, &len, bins,
                                                &bin_status, &err);
    free(bin);
    if (prog && err == CL_SUCCESS && bin_status == CL_SUCCESS &&
        clBuildProgram(prog, 1, &d->id, options, NULL, NULL) == CL_SUCCESS) {
      atomic_fetch_add(&ct__stats.loads_from_binary, 1);
      *out = prog;
      *from_binary = true;
      return CT_OK;
    }
    /* A binary the driver refuses (another driver build behind an unchanged version string,
     * say): compile from source and overwrite it. */
    if (prog) clReleaseProgram(prog);
    atomic_fetch_add(&ct__stats.binary_refused, 1);
  } else if (cached == CT__CACHE_REJECTED && !from_source) {
    atomic_fetch_add(&ct__stats.cache_rejected, 1);
  }

  cl_program prog = clCreateProgramWithSource(ct__device_context(d), (cl_uint)text->n,
                                              (const char **)text->text, text->len, &err);
  if (!prog)
    return ct__cl_error(err, "kernel engine: clCreateProgramWithSource(%s) on %s failed", label, d->spec);
  err = clBuildProgram(prog, 1, &d->id, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    ct_status st = light && err == CL_BUILD_PROGRAM_FAILURE ? CT_ERR_KERNEL_BUILD
                                                            : ct__build_failed(prog, d, label, options, err);
    clReleaseProgram(prog);
    return st;
  }
  atomic_fetch_add(&ct__stats.builds_from_source, 1);
  if (cached != CT__CACHE_OFF && store) {
    bin = ct__program_binary(prog, d->id, &len);
    if (bin && ct__cache_store(&key, bin, len)) atomic_fetch_add(&ct__stats.cache_writes, 1);
    free(bin);
  }
  *out = prog;
  return CT_OK;
}

/* ct__build() of a library program. On PoCL's CPU driver, Clang's opencl-c.h (895 KB, 14,500
 * declarations) is parsed in front of every program: about 78 ms of each build on the 2-core
 * build machine, where a one-kernel program builds in 12 ms without it, and a first training
 * step builds 20-odd programs. There the program starts with kernels/pocl_builtins.h (the
 * header's declarations of the builtins the kernels call, every overload of each; generated by
 * scripts/pocl_builtins.py) and is built with -D_OPENCL_H_, the full header's include guard.
 * A build that fails that way (a builtin the scan did not see) is built again as it is, with
 * the full header, and counted in light_fallbacks. $CLTENSOR_POCL_LIGHT_HEADER=0 turns it off;
 * =strict makes such a failure the error (the test suites run so, tests/meson.build). Sources
 * that are not the library's (ct__kernel_get_source) always get the full header. */
static ct_status ct__build_any(cl_program *out, bool *from_binary, struct ct__engine *e, ct_device *d,
                               const char *label, const struct ct__pieces *text, const char *options,
                               bool from_source, bool library) {
  const char *header = NULL;
  /* A developer kernel folder without the file: the full header ($CLTENSOR_KERNEL_DIR). */
  if (e->light && library) {
    ct_status hs = ct__source_text(&header, e, "pocl_builtins.h");
    if (hs != CT_OK && hs != CT_ERR_IO) return hs;
    if (hs != CT_OK) header = NULL, ct_clear_error();
  }
  if (header) {
    static const char guard[] = " -D_OPENCL_H_";
    struct ct__pieces lt = {.n = text->n + 1, .text = {header}, .len = {strlen(header)}};
    memcpy(&lt.text[1], text->text, (size_t)text->n * sizeof text->text[0]);
    memcpy(&lt.len[1], text->len, (size_t)text->n * sizeof text->len[0]);
    size_t ol = strlen(options);
    char *lopts = malloc(ol + sizeof guard);
    if (!lopts) return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
    memcpy(lopts, options, ol);
    memcpy(lopts + ol, guard, sizeof guard);
    ct_status st = ct__build(out, from_binary, d, label, &lt, lopts, from_source, !e->light_strict);
    free(lopts);
    if (st != CT_ERR_KERNEL_BUILD || e->light_strict) return st;
    atomic_fetch_add(&ct__stats.light_fallbacks, 1);
  }
  return ct__build(out, from_binary, d, label, text, options, from_source, false);
}

static inline ct__kernel *ct__lookup(struct ct__engine *e, const struct ct__request *r) {
  struct ct__entry *x = atomic_load_explicit(&e->buckets[r->hash & (CT__BUCKETS - 1)], memory_order_acquire);
  for (; x; x = x->next) {
    if (x->hash == r->hash && x->generated == r->generated && x->key_len == r->key_len &&
        x->name_len == r->name_len && x->options_len == r->options_len &&
        memcmp(x->name, r->name, r->name_len) == 0 && memcmp(x->options, r->options, r->options_len) == 0 &&
        memcmp(x->key, r->key, r->key_len) == 0)
      return x->kernel;
  }
  return NULL;
}

/* The miss path, under the engine lock. */
static ct_status ct__get_locked(ct__kernel **out, struct ct__engine *e, ct_device *d,
                                const struct ct__request *r) {
  if ((*out = ct__lookup(e, r))) return CT_OK;
  const char *file = r->generated ? NULL : r->key, *name = r->name, *options = r->options;
  const char *source = r->generated ? r->key : NULL;
  const char *label = file ? file : "<generated>";
  const char *common;
  CT__TRY(ct__source_text(&common, e, "common.cl"));
  if (file) CT__TRY(ct__source_text(&source, e, file));
  if (source == common) common = ""; /* common.cl itself, e.g. to check that it compiles */
  struct ct__pieces text;
  CT__TRY(ct__assemble(&text, e, label, common, source));
  size_t olen = strlen(e->base_options) + 1 + strlen(options) + 1;
  char *full = malloc(olen);
  if (!full) return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
  snprintf(full, olen, "%s%s%s", e->base_options, options[0] ? " " : "", options);

  uint64_t sh = ct__hash(0, source, strlen(source));
  struct ct__program *p = e->programs;
  for (; p; p = p->next)
    if (p->hash == sh && strcmp(p->options, full) == 0 && strcmp(p->source, source) == 0) break;
  if (p) {
    free(full);
  } else {
    p = calloc(1, sizeof *p);
    if (!p || (!file && !(p->owned_source = strdup(source)))) {
      free(p);
      free(full);
      return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
    }
    ct_status st = ct__build_any(&p->prog, &p->from_binary, e, d, label, &text, full, false, file != NULL);
    if (st != CT_OK) {
      free(p->owned_source);
      free(p);
      free(full);
      return st;
    }
    p->hash = sh;
    p->source = file ? source : p->owned_source;
    p->options = full;
    p->next = e->programs;
    e->programs = p;
  }

  ct__kernel *k = p->kernels;
  while (k && strcmp(k->name, name) != 0) k = k->next;
  if (!k) {
    cl_int err;
    cl_kernel ck = clCreateKernel(p->prog, name, &err);
    if (!ck && p->from_binary) {
      /* A cached binary without the kernel its source has (or one the driver cannot make it
       * from): discard it for a build from source, which also overwrites the entry, rather
       * than fail on every run. Kernels already made from the old program keep it alive. */
      cl_program rebuilt;
      bool unused;
      ct_status st = ct__build_any(&rebuilt, &unused, e, d, label, &text, p->options, true, file != NULL);
      if (st != CT_OK) return st;
      atomic_fetch_add(&ct__stats.binary_refused, 1);
      clReleaseProgram(p->prog);
      p->prog = rebuilt;
      p->from_binary = false;
      ck = clCreateKernel(p->prog, name, &err);
    }
    if (!ck) {
      ct_status st = ct__cl_error(err, "kernel engine: no kernel '%s' in %s on %s", name, label, d->spec);
      return st == CT_ERR_OPENCL ? CT_ERR_INTERNAL : st;
    }
    CT__TRY(ct__kernel_wrap(&k, ck, d, name));
    k->next = p->kernels;
    p->kernels = k;
  }

  /* The entry's own copies (the source of a generated program is the program's copy). */
  size_t fl = file ? r->key_len + 1 : 0, nl = r->name_len + 1, ol = r->options_len + 1;
  struct ct__entry *x = malloc(sizeof *x + fl + nl + ol);
  if (!x) return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
  char *s = x->strings;
  x->key = file ? memcpy(s, file, fl) : p->source;
  x->name = memcpy(s + fl, name, nl);
  x->options = memcpy(s + fl + nl, options, ol);
  x->key_len = r->key_len;
  x->name_len = r->name_len;
  x->options_len = r->options_len;
  x->generated = r->generated;
  x->hash = r->hash;
  x->kernel = k;
  _Atomic(struct ct__entry *) *bucket = &e->buckets[r->hash & (CT__BUCKETS - 1)];
  x->next = atomic_load_explicit(bucket, memory_order_relaxed);
  atomic_store_explicit(bucket, x, memory_order_release);
  *out = k;
  return CT_OK;
}

static ct_status ct__get(ct__kernel **out, ct_device *d, const char *file, const char *source,
                         const char *name, const char *options) {
  *out = NULL;
  if (!options) options = "";
  struct ct__engine *e;
  CT__TRY(ct__device_slot((void **)&e, d, CT__SLOT_KERNELS, ct__engine_create, ct__engine_destroy));
  struct ct__request r = {.key = file ? file : source, .name = name, .options = options,
                          .generated = file == NULL};
  r.key_len = strlen(r.key);
  r.name_len = strlen(name);
  r.options_len = strlen(options);
  r.hash = ct__hash(ct__hash(ct__hash((uint64_t)r.generated, r.key, r.key_len), name, r.name_len),
                    options, r.options_len);
  if ((*out = ct__lookup(e, &r))) return CT_OK;
  pthread_mutex_lock(&e->lock);
  ct_status st = ct__get_locked(out, e, d, &r);
  pthread_mutex_unlock(&e->lock);
  return st;
}

ct_status ct__kernel_get(ct__kernel **out, ct_device *d, const char *file, const char *name,
                         const char *options) {
  CT__CHECK_NOT_NULL("ct__kernel_get", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct__kernel_get", d);
  CT__CHECK_NOT_NULL("ct__kernel_get", file);
  CT__CHECK_NOT_NULL("ct__kernel_get", name);
  return ct__get(out, d, file, NULL, name, options);
}

ct_status ct__kernel_get_source(ct__kernel **out, ct_device *d, const char *source,
                                const char *name, const char *options) {
  CT__CHECK_NOT_NULL("ct__kernel_get_source", out);
  *out = NULL;
  CT__CHECK_NOT_NULL("ct__kernel_get_source", d);
  CT__CHECK_NOT_NULL("ct__kernel_get_source", source);
  CT__CHECK_NOT_NULL("ct__kernel_get_source", name);
  return ct__get(out, d, NULL, source, name, options);
}

ct_status ct__kernel_build_owned(ct__kernel **out, ct_device *d, const char *source, const char *name,
                                 const char *options) {
  *out = NULL;
  if (!options) options = "";
  struct ct__engine *e;
  CT__TRY(ct__device_slot((void **)&e, d, CT__SLOT_KERNELS, ct__engine_create, ct__engine_destroy));
  pthread_mutex_lock(&e->lock);
  const char *common;
  struct ct__pieces text;
  ct_status st = ct__source_text(&common, e, "common.cl");
  if (st == CT_OK) st = ct__assemble(&text, e, "<generated>", common, source);
  if (st != CT_OK) {
    pthread_mutex_unlock(&e->lock);
    return st;
  }
  size_t olen = strlen(e->base_options) + 1 + strlen(options) + 1;
  char *full = malloc(olen);
  if (!full) {
    pthread_mutex_unlock(&e->lock);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
  }
  snprintf(full, olen, "%s%s%s", e->base_options, options[0] ? " " : "", options);
  cl_program prog;
  bool from_binary;
  st = ct__build_any(&prog, &from_binary, e, d, "<generated>", &text, full, false, true);
  cl_int err = CL_SUCCESS;
  cl_kernel ck = NULL;
  if (st == CT_OK) {
    ck = clCreateKernel(prog, name, &err);
    if (!ck && from_binary) {
      cl_program rebuilt;
      st = ct__build_any(&rebuilt, &from_binary, e, d, "<generated>", &text, full, true, true);
      if (st == CT_OK) {
        atomic_fetch_add(&ct__stats.binary_refused, 1);
        clReleaseProgram(prog);
        prog = rebuilt;
        ck = clCreateKernel(prog, name, &err);
      }
    }
    clReleaseProgram(prog); /* the kernel keeps it */
    if (st == CT_OK && !ck) {
      st = ct__cl_error(err, "kernel engine: no kernel '%s' in a generated program on %s", name, d->spec);
      if (st == CT_ERR_OPENCL) st = CT_ERR_INTERNAL;
    }
  }
  free(full);
  pthread_mutex_unlock(&e->lock);
  if (st != CT_OK) return st;
  return ct__kernel_wrap(out, ck, d, name);
}

void ct__kernel_free_owned(ct__kernel *k) {
  if (!k) return;
  clReleaseKernel(k->k);
  pthread_mutex_destroy(&k->lock);
  free(k);
}

cl_kernel ct__kernel_lock(ct__kernel *k) {
  pthread_mutex_lock(&k->lock);
  return k->k;
}

void ct__kernel_note_mem(ct__kernel *k, cl_uint index) {
  if (k->drop_mems && index < 64) k->mems |= (uint64_t)1 << index;
}

void ct__kernel_unlock(ct__kernel *k) {
  /* A NULL buffer is a valid argument value (OpenCL 1.2, clSetKernelArg); a failure here only
   * leaves the reference held, as before. */
  for (cl_uint i = 0; k->mems; i++, k->mems >>= 1)
    if (k->mems & 1) clSetKernelArg(k->k, i, sizeof(cl_mem), NULL);
  pthread_mutex_unlock(&k->lock);
}

const char *ct__kernel_name(const ct__kernel *k) { return k->name; }

size_t ct__kernel_group_size(const ct__kernel *k) { return k->group; }

cl_uint ct__kernel_num_args(const ct__kernel *k) { return k->nargs; }

ct_status ct__kernel_group_limit(size_t *out, ct__kernel *k, ct_device *d, size_t cap, size_t per_item) {
  size_t kwg = 0;
  cl_ulong klocal = 0;
  cl_int err = clGetKernelWorkGroupInfo(k->k, d->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
  if (err != CL_SUCCESS)
    return ct__cl_error(err, "kernel %s on %s: clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE) failed",
                        k->name, d->spec);
  err = clGetKernelWorkGroupInfo(k->k, d->id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof klocal, &klocal, NULL);
  if (err != CL_SUCCESS) klocal = 0;
  size_t lim = cap;
  if (kwg && kwg < lim) lim = kwg;
  if (d->props.max_work_group_size < lim) lim = d->props.max_work_group_size;
  if (per_item) {
    uint64_t avail = d->props.local_mem_bytes > klocal ? d->props.local_mem_bytes - klocal : 0;
    if (avail / per_item < lim) lim = (size_t)(avail / per_item);
  }
  if (lim < 1)
    return ct__error(CT_ERR_UNSUPPORTED,
                     "kernel %s on %s: no work-group size fits (kernel limit %zu, local memory %llu "
                     "bytes, %zu bytes per work-item)",
                     k->name, d->spec, kwg, (unsigned long long)d->props.local_mem_bytes, per_item);
  *out = ct__pow2_floor(lim);
  return CT_OK;
}

void ct__launch_dims(const ct__kernel *k, cl_uint dims, size_t *global, size_t *local) {
  /* Two dims or more: a tile of at most k->tile0 along dim 0 (see ct__kernel_limits). */
  ct__launch_shape(k, dims, dims >= 2 ? k->tile0 : k->group, global, local);
}

void ct__launch_shape(const ct__kernel *k, cl_uint dims, size_t cap0, size_t *global, size_t *local) {
  /* At most cap0 along dim 0, unless dim 1 is too short to fill the rest of the group. The
   * group is always full, so local[0] alone picks the shape. */
  size_t l0 = 1;
  while (l0 < global[0] && l0 < cap0) l0 <<= 1;
  if (dims == 1 && k->whole1) l0 = cap0;
  if (dims >= 2) {
    size_t p1 = 1;
    while (p1 < global[1] && p1 < k->group) p1 <<= 1;
    if (k->group / p1 > l0) l0 = k->group / p1;
  }
  if (l0 > k->group) l0 = k->group;
  local[0] = l0 < k->max_items[0] ? l0 : k->max_items[0];
  if (dims >= 2) {
    size_t rest = k->group / local[0];
    local[1] = rest < k->max_items[1] ? rest : k->max_items[1];
  }
  if (dims >= 3) local[2] = 1;
  for (cl_uint i = 0; i < dims; i++) global[i] = (global[i] + local[i] - 1) / local[i] * local[i];
}

void ct__launch_planes(const ct__kernel *k, size_t *global, size_t *local) {
  size_t left = k->group;
  for (int i = 0; i < 2; i++) {
    size_t l = 1;
    while (l < global[i] && l < left && l < k->max_items[i]) l <<= 1;
    local[i] = l;
    left /= l;
  }
  local[2] = left < k->max_items[2] ? left : k->max_items[2];
  for (int i = 0; i < 3; i++) global[i] = (global[i] + local[i] - 1) / local[i] * local[i];
}

static _Atomic(ct__launch_observer) ct__observer;

void ct__kernel_set_launch_observer(ct__launch_observer obs) { atomic_store(&ct__observer, obs); }

ct_status ct__kernel_launch(ct__kernel *k, ct_device *d, cl_uint dims, const size_t *global,
                            const size_t *local) {
  for (cl_uint i = 0; i < dims; i++)
    if (global[i] == 0) return CT_OK;
  /* Recorded elementwise work goes first: this kernel may read what it writes. */
  CT__TRY(ct__deferred_realize(k->name));
  /* The event is always taken: it tells the next blocking call whether the kernel failed
   * after its enqueue (ct__device_track). */
  cl_event ev = NULL;
  cl_int err = clEnqueueNDRangeKernel(ct__device_queue(d), k->k, dims, NULL, global, local, 0, NULL, &ev);
  if (err != CL_SUCCESS)
    return ct__cl_error(err, "kernel %s on %s: clEnqueueNDRangeKernel failed", k->name, d->spec);
  ct__launch_observer obs = atomic_load_explicit(&ct__observer, memory_order_relaxed);
  if (obs) obs(d, k->name, ev);
  ct__device_track(d, ev);
  return CT_OK;
}
