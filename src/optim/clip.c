/* Gradient clipping by the global 2-norm (torch.nn.utils.clip_grad_norm_, foreach off).
 *
 * The sums of squares run on the device: one optim_sumsq launch per gradient writes at most
 * CT__CLIP_GROUPS partial sums into one small buffer per device, read back once; the host adds
 * them up as PyTorch composes its norms (each gradient's norm in its dtype, then the norm of
 * those norms) and, when the coefficient max_norm / (norm + 1e-6) is below 1, one optim_scale
 * launch per gradient applies it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "optim/optim.h"

enum { CT__CLIP_GROUPS = 16, CT__CLIP_GROUP = 64, CT__CLIP_SLOT = CT__CLIP_GROUPS * 8 /* bytes per gradient */ };

/* The work-groups optim_sumsq gets for n elements: one per 4096, at least 1, at most 16. */
static int64_t clip_groups(int64_t n) {
  int64_t g = (n + 4095) / 4096;
  return g < 1 ? 1 : g > CT__CLIP_GROUPS ? CT__CLIP_GROUPS : g;
}

/* sums[i] = the sum of squares of grads[i], for the gradients on device d. */
static ct_status sumsq_on(ct_device *d, ct_tensor *const *grads, int n, double *sums, const char *fn) {
  int count = 0;
  for (int i = 0; i < n; i++)
    if (grads[i] && grads[i]->storage->device == d) count++;
  int64_t nbytes = (int64_t)count * CT__CLIP_SLOT;
  ct_tensor *part = NULL;
  CT__TRY(ct_zeros(&part, d, CT_U8, 1, &nbytes));
  size_t base = ct__tensor_byte_offset(part);
  ct_status st = CT_OK;
  int slot = 0;
  for (int i = 0; i < n && st == CT_OK; i++) {
    ct_tensor *g = grads[i];
    if (!g || g->storage->device != d) continue;
    size_t es = g->dtype == CT_F64 ? 8 : 4, off = base + (size_t)slot++ * CT__CLIP_SLOT;
    int64_t ne = ct_numel(g);
    if (ne == 0) continue;
    ct__kernel *k;
    st = ct__optim_kernel(&k, d, "optim_sumsq", g->dtype, fn);
    /* Exactly clip_groups(ne) groups, whatever group size the kernel gets: the host reads that
     * many partial sums. */
    size_t local = 0;
    if (st == CT_OK) st = ct__kernel_group_limit(&local, k, d, CT__CLIP_GROUP, 0);
    if (st != CT_OK) break;
    struct ct__kargs a = ct__kargs_lock(k);
    ct__karg_tensor(&a, "g", g, 0);
    ct__optim_karg_geom(&a, 1, (const ct_tensor *[]){g});
    ct__karg_long(&a, "n", ne);
    ct__karg_mem(&a, "part", ct__tensor_mem(part));
    ct__karg_long(&a, "part_off", (cl_long)(off / es)); /* the allocator aligns blocks to 128 bytes */
    st = ct__launch1(k, &a, d, clip_groups(ne) * (int64_t)local, local, fn);
  }
  unsigned char *h = NULL;
  if (st == CT_OK && !(h = malloc((size_t)nbytes + 1)))
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (st == CT_OK) st = ct_to_host(part, h, (size_t)nbytes);
  slot = 0;
  for (int i = 0; i < n && st == CT_OK; i++) {
    ct_tensor *g = grads[i];
    if (!g || g->storage->device != d) continue;
    const unsigned char *s = h + (size_t)slot++ * CT__CLIP_SLOT;
    double sum = 0;
    for (int64_t j = 0; j < clip_groups(ct_numel(g)); j++) {
      if (g->dtype == CT_F64) {
        double x;
        memcpy(&x, s + 8 * j, 8);
        sum += x;
      } else {
        float x;
        memcpy(&x, s + 4 * j, 4);
        sum += x;
      }
    }
    sums[i] = sum;
  }
  free(h);
  ct_release(part);
  return st;
}

ct_status ct_clip_grad_norm(double *total_norm, ct_tensor *const *params, int n, double max_norm) {
  const char *fn = "ct_clip_grad_norm";
  if (total_norm) *total_norm = NAN;
  CT__TRY(ct__optim_check_params(params, n, true, false, fn));
  if (!(max_norm >= 0))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: max_norm is %g (expected max_norm >= 0)", fn, max_norm);
  ct_tensor **grads = calloc((size_t)n + 1, sizeof *grads);
  double *sums = calloc((size_t)n + 1, sizeof *sums);
  ct_status st = grads && sums ? CT_OK : ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  bool single = false; /* a gradient that is not f64: PyTorch's norms are then f32 */
  for (int i = 0; i < n && st == CT_OK; i++) {
    st = ct__optim_grad(&grads[i], params[i], i, fn);
    if (grads[i] && grads[i]->dtype != CT_F64) single = true;
  }
  /* One partial buffer and one read per device, in the order the devices first appear. */
  for (int i = 0; i < n && st == CT_OK; i++) {
    if (!grads[i]) continue;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = grads[j] && grads[j]->storage->device == grads[i]->storage->device;
    if (!seen) st = sumsq_on(grads[i]->storage->device, grads, n, sums, fn);
  }
  double total = 0;
  for (int i = 0; i < n && st == CT_OK; i++) {
    if (!grads[i]) continue;
    double norm = sqrt(sums[i]);
    if (grads[i]->dtype != CT_F64) norm = (float)norm;
    total += norm * norm;
  }
  total = sqrt(total);
  double coef = 1;
  if (single) {
    /* PyTorch: clip_coef = max_norm / (total + 1e-6), a Tensor's reciprocal times max_norm, in
     * the norm's dtype, then clamped to 1. */
    float t = (float)total, r = 1.0f / (t + 1e-6f);
    total = t;
    coef = (float)(r * (float)max_norm);
  } else {
    coef = (1.0 / (total + 1e-6)) * max_norm;
  }
  /* Multiplying by 1 changes nothing, so only a coefficient below 1 (or NaN, from a NaN norm)
   * launches anything; PyTorch multiplies unconditionally to avoid a device sync it has not
   * made, while the norm here is already on the host. */
  if (st == CT_OK && (coef < 1 || isnan(coef)))
    for (int i = 0; i < n && st == CT_OK; i++)
      if (grads[i]) st = ct__optim_grad_launch(grads[i], "optim_scale", coef, NULL, fn);
  if (st == CT_OK && total_norm) *total_norm = total;
  free(grads);
  free(sums);
  return st;
}
