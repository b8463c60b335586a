/* What the layers below the fusion graph call of it (issue #16; its own header since issue #29).
 *
 * The fusion graph (src/fusion/, docs/FUSION.md) records elementwise ops, casts and trailing
 * reductions instead of enqueueing them. Whatever touches device memory through a queue
 * afterwards (a kernel launch, a transfer, a map, CLBlast, a wait) must first have the recorded
 * work enqueued, or it would run ahead of it; and the families whose calls the graph records
 * hand those calls to it. The graph sits above every layer that does either, so those layers
 * cannot include its headers: they call the functions below, which go through the table of
 * hooks that src/fusion/graph.c defines. This header ranks just above core in the layer order
 * (scripts/check_layers.py, "fusion/hooks.h"): it includes nothing but the public headers, and
 * every other file of src/fusion/ ranks above the op families.
 *
 * Each thread records into a graph of its own (issue #28), so that one thread's kernels never
 * depend on what other threads record meanwhile. ct__deferred_nodes counts the recorded nodes of
 * all threads not yet enqueued, so the check costs one atomic load while nothing is pending. */
#ifndef CT_FUSION_HOOKS_H
#define CT_FUSION_HOOKS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cltensor/tensor.h"

/* The launch of an elementwise op (src/elementwise/elementwise.h): opaque at this rank. */
struct ct__ew_launch;

/* The hooks the fusion graph offers. Each returns CT_OK or an error whose message names fn,
 * the public call that needed it. */
struct ct__fusion_hooks {
  /* Enqueues everything the calling thread recorded, on every device (a transfer between
   * devices reads one device's memory through another's queue). A thread already inside a
   * realize returns CT_OK at once. */
  ct_status (*realize)(const char *fn);
  /* Enqueues what *other* threads recorded that writes storage s (a ct__storage) or reads it:
   * a tensor handed from one thread to another, or memory one thread writes while another's
   * recorded node still reads it. */
  ct_status (*use)(void *storage, const char *fn);
  /* storage (a ct__storage a recorded node still writes) is about to be freed: its write is
   * dropped. */
  void (*storage_dead)(void *storage);
  /* ct_shutdown(), after one last realize: every thread's graph is emptied. */
  void (*drop)(void);
  /* Records the elementwise launch l into out (a new contiguous result) or, when it can't (or
   * fusion is off), runs it at once (ct__ew_run). */
  ct_status (*elementwise)(const char *fn, const struct ct__ew_launch *l, ct_tensor *out);
  /* A reduction of every element of x into a new result of dtype odt and shape (ondim,
   * oshape), recorded to run in the kernel of x's recorded producer. op is a row of the
   * reductions' table (kernels/reduce_ops.h, reduce/'s CT__RED_SUM, _PROD, _MAX, _MIN: an int
   * here, the table's enum being reduce's); mean: the sum divided by the count. *out NULL when
   * not recorded (the caller reduces as usual). */
  ct_status (*reduce)(ct_tensor **out, const ct_tensor *x, int op, bool mean, ct_dtype odt, int ondim,
                      const int64_t *oshape, const char *fn);
  /* ct_cast of x to dt recorded as a node, for the conversions whose fused form gives
   * ct_cast()'s bits (into floating dtypes from floats and small integers); *out NULL when not
   * recorded (the caller copies as usual). */
  ct_status (*cast)(ct_tensor **out, const ct_tensor *x, ct_dtype dt, const char *fn);
  /* softmax (log: log_softmax) of x over its last dim, x a float tensor that a recorded node
   * will write whole; *out NULL when not recorded. */
  ct_status (*softmax)(ct_tensor **out, const ct_tensor *x, bool log, const char *fn);
};

/* The graph's table, defined by src/fusion/graph.c: one object, so that the boundary between the
 * graph and the layers below is one table, and the only symbol of src/fusion/ they reference. */
extern const struct ct__fusion_hooks ct__fusion_graph_hooks;

/* Recorded nodes of every thread's graph not yet enqueued (src/fusion/graph.c). */
extern atomic_long ct__deferred_nodes;

/* The realize hook: every kernel launch (ct__kernel_launch), transfer, copy, fill, GEMM, wait
 * and interop export calls it before it enqueues work or hands memory out; errors name fn. One
 * atomic load while nothing is recorded. */
static inline ct_status ct__deferred_realize(const char *fn) {
  if (atomic_load_explicit(&ct__deferred_nodes, memory_order_acquire) == 0) return CT_OK;
  return ct__fusion_graph_hooks.realize(fn);
}
/* The use hook; callers go through ct__tensor_deferred_use() (tensor/tensor.h: every path
 * that hands a tensor's memory to a queue; kernel arguments in ct__karg_tensor()). */
static inline ct_status ct__deferred_use(void *storage, const char *fn) {
  return ct__fusion_graph_hooks.use(storage, fn);
}
/* The storage_dead hook, called by ct__storage_release() for a storage that is pending. */
static inline void ct__deferred_storage_dead(void *storage) { ct__fusion_graph_hooks.storage_dead(storage); }
/* ct_shutdown(): what is recorded is enqueued (its tensors may be read after a re-init would
 * not know them), then whatever could not be is dropped (the graphs hold references). */
static inline void ct__deferred_shutdown(void) {
  (void)ct__deferred_realize("ct_shutdown");
  ct__fusion_graph_hooks.drop();
}
/* The elementwise hook (elementwise/ops.c: an op's new-result form). */
static inline ct_status ct__deferred_elementwise(const char *fn, const struct ct__ew_launch *l, ct_tensor *out) {
  return ct__fusion_graph_hooks.elementwise(fn, l, out);
}
/* The reduce hook (reduce/: full reductions). */
static inline ct_status ct__deferred_reduce(ct_tensor **out, const ct_tensor *x, int op, bool mean, ct_dtype odt,
                                            int ondim, const int64_t *oshape, const char *fn) {
  return ct__fusion_graph_hooks.reduce(out, x, op, mean, odt, ondim, oshape, fn);
}
/* The cast hook (tensor/copy.c: ct_cast). */
static inline ct_status ct__deferred_cast(ct_tensor **out, const ct_tensor *x, ct_dtype dt, const char *fn) {
  return ct__fusion_graph_hooks.cast(out, x, dt, fn);
}
/* The softmax hook (reduce/softmax.c). */
static inline ct_status ct__deferred_softmax(ct_tensor **out, const ct_tensor *x, bool log, const char *fn) {
  return ct__fusion_graph_hooks.softmax(out, x, log, fn);
}

#endif
