/* Program building and the in-memory program/kernel cache of each device. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "kernel/engine.h"

struct ct__kernel {
  cl_kernel k;
  pthread_mutex_t lock;
  char name[64];
  struct ct__kernel *next;
};

struct ct__program {
  uint64_t hash;         /* of the source text */
  char *options;         /* full build options */
  cl_program prog;
  ct__kernel *kernels;
  struct ct__program *next;
};

struct ct__engine {
  pthread_mutex_t lock;
  struct ct__program *programs;
  char base_options[256];
};

/* FNV-1a, 64 bits: a cheap, stable hash of source text for cache keys. */
static uint64_t ct__hash(const char *s, uint64_t h) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}
#define CT__HASH_SEED 14695981039346656037ull

const struct ct__embedded_source *ct__embedded_find(const char *name) {
  for (int i = 0; i < ct__embedded_source_count; i++)
    if (strcmp(ct__embedded_sources[i].name, name) == 0) return &ct__embedded_sources[i];
  return NULL;
}

static void ct__engine_destroy(ct_device *d, void *state) {
  (void)d;
  struct ct__engine *e = state;
  for (struct ct__program *p = e->programs, *pn; p; p = pn) {
    pn = p->next;
    for (ct__kernel *k = p->kernels, *kn; k; k = kn) {
      kn = k->next;
      clReleaseKernel(k->k);
      pthread_mutex_destroy(&k->lock);
      free(k);
    }
    clReleaseProgram(p->prog);
    free(p->options);
    free(p);
  }
  pthread_mutex_destroy(&e->lock);
  free(e);
}

static ct_status ct__engine_create(void **state, ct_device *d) {
  struct ct__engine *e = calloc(1, sizeof *e);
  if (!e) return ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
  pthread_mutex_init(&e->lock, NULL);
  snprintf(e->base_options, sizeof e->base_options, "-cl-std=CL1.2 -DCT_HAS_FP64=%d",
           d->props.fp64 ? 1 : 0);
  *state = e;
  return CT_OK;
}

static ct_status ct__build(cl_program *out, ct_device *d, const char *label, const char *source,
                           const char *options) {
  const struct ct__embedded_source *common = ct__embedded_find("common.cl");
  const char *texts[2] = {common ? common->text : "", source};
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ct__device_context(d), 2, texts, NULL, &err);
  if (!prog) return ct__cl_error(err, "kernel engine: clCreateProgramWithSource(%s) on %s failed", label, d->spec);
  err = clBuildProgram(prog, 1, &d->id, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    size_t log_size = 0;
    clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
    char *log = malloc(log_size + 1);
    if (log) {
      log[0] = '\0';
      clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
      log[log_size] = '\0';
    }
    clReleaseProgram(prog);
    ct__error(CT_ERR_KERNEL_BUILD, "kernel engine: building %s for %s (%s) with options \"%s\" failed: %s (%d); build log:\n%s",
              label, d->spec, d->props.name, options, ct__cl_error_name(err), (int)err, log ? log : "(unavailable)");
    free(log);
    return CT_ERR_KERNEL_BUILD;
  }
  *out = prog;
  return CT_OK;
}

static ct_status ct__get(ct__kernel **out, ct_device *d, const char *label, const char *source,
                         const char *name, const char *options) {
  *out = NULL;
  struct ct__engine *e;
  CT__TRY(ct__device_slot((void **)&e, d, CT__SLOT_KERNELS, ct__engine_create, ct__engine_destroy));
  char opts[1024];
  int n = snprintf(opts, sizeof opts, "%s %s", e->base_options, options ? options : "");
  if (n < 0 || (size_t)n >= sizeof opts)
    return ct__error(CT_ERR_INTERNAL, "kernel engine: build options too long for %s", label);
  uint64_t hash = ct__hash(source, CT__HASH_SEED);
  ct_status st = CT_OK;
  pthread_mutex_lock(&e->lock);
  struct ct__program *p = e->programs;
  for (; p; p = p->next)
    if (p->hash == hash && strcmp(p->options, opts) == 0) break;
  if (!p) {
    p = calloc(1, sizeof *p);
    char *o = strdup(opts);
    if (!p || !o) {
      free(p);
      free(o);
      st = ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
      goto done;
    }
    st = ct__build(&p->prog, d, label, source, opts);
    if (st != CT_OK) {
      free(p);
      free(o);
      goto done;
    }
    p->hash = hash;
    p->options = o;
    p->next = e->programs;
    e->programs = p;
  }
  ct__kernel *k = p->kernels;
  for (; k; k = k->next)
    if (strcmp(k->name, name) == 0) break;
  if (!k) {
    cl_int err;
    cl_kernel ck = clCreateKernel(p->prog, name, &err);
    if (!ck) {
      st = ct__cl_error(err, "kernel engine: no kernel '%s' in %s on %s", name, label, d->spec);
      if (st == CT_ERR_OPENCL) st = CT_ERR_INTERNAL;
      goto done;
    }
    k = calloc(1, sizeof *k);
    if (!k) {
      clReleaseKernel(ck);
      st = ct__error(CT_ERR_OUT_OF_MEMORY, "kernel engine: out of host memory");
      goto done;
    }
    k->k = ck;
    pthread_mutex_init(&k->lock, NULL);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->next = p->kernels;
    p->kernels = k;
  }
  *out = k;
done:
  pthread_mutex_unlock(&e->lock);
  return st;
}

ct_status ct__kernel_get(ct__kernel **out, ct_device *d, const char *file, const char *name,
                         const char *options) {
  const struct ct__embedded_source *src = ct__embedded_find(file);
  if (!src) return ct__error(CT_ERR_INTERNAL, "kernel engine: no embedded source '%s'", file);
  return ct__get(out, d, file, src->text, name, options);
}

ct_status ct__kernel_get_source(ct__kernel **out, ct_device *d, const char *source,
                                const char *name, const char *options) {
  return ct__get(out, d, "<generated>", source, name, options);
}

cl_kernel ct__kernel_lock(ct__kernel *k) {
  pthread_mutex_lock(&k->lock);
  return k->k;
}

void ct__kernel_unlock(ct__kernel *k) { pthread_mutex_unlock(&k->lock); }

const char *ct__kernel_name(const ct__kernel *k) { return k->name; }

ct_status ct__kernel_launch(ct__kernel *k, ct_device *d, cl_uint dims, const size_t *global,
                            const size_t *local) {
  for (cl_uint i = 0; i < dims; i++)
    if (global[i] == 0) return CT_OK;
  cl_int err = clEnqueueNDRangeKernel(ct__device_queue(d), k->k, dims, NULL, global, local, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    return ct__cl_error(err, "kernel %s on %s: clEnqueueNDRangeKernel failed", k->name, d->spec);
  return CT_OK;
}
