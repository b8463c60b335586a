/* What the OpenCL implementation behind a device does, as opposed to what its device type says:
 * the kernel style the op families pick, and the driver limits that kernels must respect.
 *
 * Kernel style. Two families of kernel variants exist (docs/PORTABILITY.md, "Kernel style"):
 *  - chunked: one work-item streams a run of elements (32 per item in elementwise, a whole
 *    extent per item in reductions, the register-blocked convolutions, 1024-item groups). PoCL's
 *    CPU driver runs a work-group as a loop on one thread and vectorizes each work-item's loop,
 *    so this is what it is fast at.
 *  - lanes: neighbouring work-items on neighbouring elements, work-groups sharing an extent
 *    through local memory, short loops. GPUs execute work-items as SIMD lanes, and so do CPU
 *    implementations that compile a kernel the way a GPU driver does (Mesa's rusticl on
 *    llvmpipe, Intel's CPU runtime).
 * "CPU" is therefore not the test: the style follows the implementation. Only PoCL's CPU
 * drivers get chunked; everything else gets lanes; $CLTENSOR_KERNEL_STYLE overrides it.
 *
 * Loop limit. llvmpipe (Mesa's gallivm, rusticl and clover) ends every loop of a work-item after
 * 65535 back edges in all, counting every loop of the kernel together, and says nothing: a
 * reduction over 40,000 elements strided by a non-constant stride summed the first 32,768
 * (tests/portability/test_driver_quirks.c reproduces it). Kernels whose per-item trip count
 * grows with the input are sized by their host code to stay below ct__device_loop_budget().
 *
 * fma. OpenCL's fma() must round once; a device without fused multiply-add hardware in its
 * compiler's target (llvmpipe reports no CL_FP_FMA on an AVX-512 CPU that has it) computes it in
 * software: 4 ns a call there, so the library's exp with its nine fma's ran at 0.1x the builtin.
 * Kernels evaluate polynomials with CT_FMA (common.cl): fma() where CL_FP_FMA is reported, mad()
 * elsewhere; fma()'s exactness is kept where an algorithm needs it (error terms, optimizers).
 *
 * Kernel arguments. Where kernels retain their buffer arguments (rusticl), ct__kernel_unlock()
 * sets them back to NULL, so that a released buffer is not kept alive by a cached kernel. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"
#include "device/device.h"

int ct__device_force_soft_fma = 0;
int ct__device_force_drop_kargs = 0;

static bool ct__contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

void ct__device_init_quirks(ct_device *d) {
  const ct_device_props *p = &d->props;
  d->pocl_cpu = ct__contains(p->platform_name, "Portable Computing Language") && p->type == CT_DEVICE_CPU;
  d->loop_limit = ct__contains(p->name, "llvmpipe") ? 65535u : 0u;
  /* rusticl's kernels hold a reference to each buffer last set as their argument until another
   * is set: a cached kernel kept a released tensor's buffer (the caller's, or the allocator's
   * after ct_empty_cache) alive. PoCL's do not; other implementations are not known, and
   * dropping the arguments costs a clSetKernelArg per buffer, so only PoCL is spared. */
  d->kargs_retain = !ct__contains(p->platform_name, "Portable Computing Language") || ct__device_force_drop_kargs;
  d->chunked = d->pocl_cpu;
  cl_device_fp_config fp = 0;
  d->fast_fma = clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS &&
                (fp & CL_FP_FMA) && !ct__device_force_soft_fma;
  d->style_reason = d->chunked ? "PoCL CPU driver: a work-group is a loop on one thread"
                    : p->type == CT_DEVICE_CPU
                        ? "CPU implementation that runs work-items as SIMD lanes"
                        : "work-items run as SIMD lanes";
  d->style_error[0] = '\0';
  const char *env = getenv("CLTENSOR_KERNEL_STYLE");
  if (!env || !*env || strcasecmp(env, "auto") == 0) return;
  if (strcasecmp(env, "chunked") == 0 || strcasecmp(env, "lanes") == 0) {
    d->chunked = strcasecmp(env, "chunked") == 0;
    d->style_reason = "$CLTENSOR_KERNEL_STYLE";
    return;
  }
  char esc[64];
  snprintf(d->style_error, sizeof d->style_error,
           "$CLTENSOR_KERNEL_STYLE='%s' is not valid: use auto, chunked or lanes",
           ct__escape(esc, sizeof esc, env));
}

uint64_t ct__device_loop_budget(const ct_device *d) {
  /* A quarter of the limit for the loop being sized: the kernel's other loops (cascades,
   * leftovers, the work-group tree) share the count. */
  return d->loop_limit ? d->loop_limit / 4 : UINT64_MAX;
}

const char *ct_device_kernel_style(const ct_device *d) {
  if (!d) return NULL;
  return d->chunked ? "chunked" : "lanes";
}

const char *ct_device_kernel_style_reason(const ct_device *d) { return d ? d->style_reason : NULL; }
