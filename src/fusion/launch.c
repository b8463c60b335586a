/* Launching the fusion graph's kernels (issue #16; its own file since issue #29): the arguments
 * of a generated kernel in the order codegen.c declared them, and its launches, each through the
 * engine's argument builder and ct__kernel_launch() (the launch observer, failure tracking). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "device/device.h"
#include "fusion/fusion.h"
#include "kernel/engine.h"
#include "kernel/kargs.h"
#include "tensor/tensor.h"

/* A fused reduction's first pass. Lanes: groups of `local` work-items in a grid-stride loop, a
 * partial per group; eight groups per compute unit (enough to fill a GPU's, and a CPU driver's
 * threads), fewer when n has fewer elements than that many items, more when each item's loop
 * would pass the device's loop budget (llvmpipe ends every loop after 65535 back edges).
 * Chunked: a work-item (alone in its group) per chunk, four per compute unit, chunks of at
 * least 8192 elements. */
void ct__red_split(struct ct__fkern *K, size_t local, bool cpu) {
  if (cpu) {
    int64_t cu = K->dev->props.compute_units ? K->dev->props.compute_units : 1;
    int64_t parts = (K->n + 8191) / 8192;
    if (parts > 4 * cu) parts = 4 * cu;
    if (parts < 1) parts = 1;
    int64_t chunk = (K->n + parts - 1) / parts;
    K->chunk = (chunk + 7) / 8 * 8;
    K->parts = (K->n + K->chunk - 1) / K->chunk;
    return;
  }
  int64_t cu = K->dev->props.compute_units ? K->dev->props.compute_units : 1, l = (int64_t)local;
  int64_t groups = (K->n + l - 1) / l;
  if (groups > 8 * cu) groups = 8 * cu;
  uint64_t budget = ct__device_loop_budget(K->dev);
  if (budget < (uint64_t)K->n) {
    /* Each item's loop runs ceil(n / (groups * local)) times: at most the budget. */
    int64_t items = (int64_t)(((uint64_t)K->n + budget - 1) / budget), need = (items + l - 1) / l;
    if (groups < need) groups = need;
  }
  if (groups < 1) groups = 1;
  K->parts = groups;
  K->chunk = (K->n + groups * l - 1) / (groups * l); /* elements per work-item */
}

static void ct__karg_common(struct ct__kargs *a, struct ct__fgen *g) {
  for (int o = 0; o < g->nouts; o++) {
    struct ct__fnode *nd = g->outs[o];
    int64_t off = nd->out_off;
    cl_mem mem;
    if (nd->tmp) {
      mem = ct__tensor_mem(nd->tmp);
      ct__tensor_elem_offset(nd->tmp, &off);
    } else {
      mem = nd->out->mem;
    }
    ct__karg_mem(a, "out", mem);
    ct__karg_long(a, "out_off", off);
  }
  for (int i = 0; i < g->nops; i++) {
    ct__karg_mem(a, "in", g->ops[i].mem);
    ct__karg_long(a, "in_off", g->ops[i].off);
    if (g->ops[i].kind == 2) ct__karg_long8(a, "in_st", g->ndim, g->ops[i].st, 0);
  }
  size_t ss = ct__ew_scalar_size(g->k);
  for (int i = 0; i < g->nsc; i++) ct__karg(a, "s", ss, &g->sc[i]);
  if (g->strided) ct__karg_long8(a, "shape", g->ndim, g->shape, 1);
  if (ct__fgen_magic(g)) {
    int64_t m[CT_MAX_DIMS], sh[CT_MAX_DIMS];
    for (int d = 0; d < g->ndim; d++) ct__fuse_magic(g->shape[d], &m[d], &sh[d]);
    ct__karg_long8(a, "shape_m", g->ndim, m, 1);
    ct__karg_long8(a, "shape_s", g->ndim, sh, 32);
  }
}

static ct_status ct__launch_kernel(ct__kernel *k, struct ct__fgen *g, int64_t base, int64_t items, const char *fn) {
  atomic_fetch_add(&ct__fstats.launches, 1);
  struct ct__kargs a = ct__kargs_lock(k);
  ct__karg_common(&a, g);
  ct__karg_long(&a, "base", base);
  ct__karg_long(&a, "n", g->n);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    size_t global = (size_t)items, local;
    ct__launch_dims(k, 1, &global, &local);
    st = ct__kernel_launch(k, g->dev, 1, &global, &local);
  }
  ct__kernel_unlock(k);
  return st;
}

/* Both passes of a kernel with a trailing reduction. */
static ct_status ct__launch_reduce(struct ct__fkern *K, struct ct__fgen *g, const char *fn) {
  atomic_fetch_add(&ct__fstats.launches, 2);
  size_t local = g->cpu_red ? 1 : ct__kernel_group_size(K->kc), accsz = ct__acc_size(ct__red_acc_dtype(K->red));
  struct ct__kargs a = ct__kargs_lock(K->kc);
  ct__karg_common(&a, g);
  if (g->cpu_red) ct__karg_long(&a, "chunk", K->chunk);
  ct__karg_long(&a, "n", g->n);
  ct__karg_tensor(&a, "part", K->part, 0);
  if (!g->cpu_red) ct__karg_local(&a, "lacc", local * accsz);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    size_t global = (size_t)K->parts * local;
    st = ct__kernel_launch(K->kc, g->dev, 1, &global, &local);
  }
  ct__kernel_unlock(K->kc);
  if (st != CT_OK) return st;
  struct ct__fnode *r = K->red;
  size_t l2 = ct__kernel_group_size(K->kfin);
  if (l2 > 64) l2 = 64; /* one fixed group size: PoCL compiles a kernel per size */
  a = ct__kargs_lock(K->kfin);
  ct__karg_tensor(&a, "part", K->part, 0);
  ct__karg_long(&a, "nparts", K->parts);
  ct__karg_mem(&a, "o", r->out->mem);
  ct__karg_long(&a, "o_off", r->out_off);
  ct__karg_long(&a, "count", r->n);
  ct__karg_local(&a, "lacc", l2 * accsz);
  st = ct__kargs_end(&a, fn);
  if (st == CT_OK) st = ct__kernel_launch(K->kfin, g->dev, 1, &l2, &l2);
  ct__kernel_unlock(K->kfin);
  return st;
}

/* A kernel ending in softmax: a work-item per row. */
static ct_status ct__launch_softmax(struct ct__fkern *K, struct ct__fgen *g, const char *fn) {
  atomic_fetch_add(&ct__fstats.launches, 1);
  struct ct__fnode *r = K->red;
  int64_t ncols = K->ndim ? K->shape[K->ndim - 1] : 1, nrows = K->n / ncols;
  struct ct__kargs a = ct__kargs_lock(K->kc);
  ct__karg_common(&a, g);
  ct__karg_long(&a, "ncols", ncols);
  ct__karg_long(&a, "nrows", nrows);
  ct__karg_mem(&a, "so", r->out->mem);
  ct__karg_long(&a, "so_off", r->out_off);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    size_t global = (size_t)nrows, local;
    ct__launch_dims(K->kc, 1, &global, &local);
    st = ct__kernel_launch(K->kc, g->dev, 1, &global, &local);
  }
  ct__kernel_unlock(K->kc);
  return st;
}

ct_status ct__fusion_launch(struct ct__fkern *K, struct ct__fgen *g, const char *fn) {
  atomic_fetch_add(&ct__fstats.kernels, 1);
  if (K->red && CT__FR_IS_SOFTMAX(K->red->red)) return ct__launch_softmax(K, g, fn);
  if (K->red) return ct__launch_reduce(K, g, fn);
  if (!K->kf) return ct__launch_kernel(K->kc, g, 0, K->n, fn);
  int64_t local = (int64_t)ct__kernel_group_size(K->kf);
  int64_t nfull = K->n / local * local;
  ct_status st = ct__launch_kernel(K->kf, g, 0, nfull, fn);
  /* The rest as one more whole group ending at n: it recomputes up to a group of elements with
   * the same values (results never alias a kernel's inputs). */
  if (st == CT_OK && nfull < K->n) st = ct__launch_kernel(K->kf, g, K->n - local, local, fn);
  return st;
}
