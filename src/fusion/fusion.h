/* The fusion graph's internals (issue #16, docs/FUSION.md): its nodes, the kernels being
 * generated, the switches and counters tests read. Shared by the files of src/fusion/; the
 * layers below reach the graph only through fusion/hooks.h. */
#ifndef CT_FUSION_FUSION_H
#define CT_FUSION_FUSION_H

#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/text.h"
#include "elementwise/elementwise.h"
#include "kernel/engine.h"
#include "reduce/reduce.h"
#include "tensor/tensor.h"

/* ---- Switches and counters (tests, cltensor-bench through tools/common/fusion_support.h) ---- */

/* Tests: -1 (the default) follows $CLTENSOR_FUSION, 0 forces fusion off, 1 on. Set it while
 * nothing is recorded (a realize first: ct_device_synchronize()). */
extern int ct__fusion_override;
/* Tests: each build of a fused kernel fails with CT_ERR_KERNEL_BUILD while this is > 0 (and
 * counts it down). */
extern atomic_int ct__fusion_fail_builds;
/* Process-wide counters of the fusion graph, for tests and diagnostics: the one list (X(name))
 * that the snapshot's fields, the atomic counters (ct__fstats) and ct__fusion_stats() are made of. */
#define CT__FUSION_COUNTERS(X)                                                                          \
  X(realizes) /* realizes that ran a non-empty graph to completion */                                  \
  X(kernels)  /* fused kernels enqueued (one per kernel, whatever its launches) */                     \
  X(launches) /* their clEnqueueNDRangeKernel calls (a tail group is a second one) */                  \
  X(nodes)    /* recorded calls computed */                                                            \
  X(dropped)  /* recorded calls never computed (results released, nothing needed them) */              \
  X(temps)    /* temporaries allocated for released values that crossed kernels */                    \
  X(builds)   /* fused programs built (or loaded from the disk cache) */
#define CT__FUSION_STAT_FIELD(name) unsigned long name;
struct ct__fusion_stats {
  CT__FUSION_COUNTERS(CT__FUSION_STAT_FIELD)
  unsigned long pending; /* recorded calls not yet realized, now */
};
void ct__fusion_stats(struct ct__fusion_stats *out);

/* Nodes recorded before a realize is forced: bounds the host memory and the leaves the graph
 * keeps alive, and the size of a generated kernel. */
#define CT__FUSE_MAX_NODES 128
/* Generated kernels kept built (process-wide, all devices): the least recently used beyond
 * this is released. */
#define CT__FUSE_LRU 256

/* Trailing ops of a kernel: a reduction over every element, a row of the reductions' table
 * (kernels/reduce_ops.h: CT__RED_SUM, _PROD, _MAX, _MIN), or softmax / log_softmax over the
 * last dim. */
enum { CT__FR_SOFTMAX = CT__RED_COUNT, CT__FR_LOG_SOFTMAX };
#define CT__FR_IS_SOFTMAX(r) ((r) >= CT__FR_SOFTMAX)

/* One recorded call (graph.c): what it computes, from what, into what; the realize's marks. */
struct ct__fnode {
  struct ct__ew_launch l;      /* l.in[j]: leaf[j], or NULL for an edge */
  struct ct__fnode *src[3];    /* the recorded producer of input j, or NULL */
  ct_tensor *leaf[3];          /* retained */
  ct_device *dev;
  ct_dtype odt;
  int ndim;                    /* shape without leading 1s */
  int64_t shape[CT_MAX_DIMS];
  int64_t n;
  ct__storage *out;            /* the result's storage; NULL once released (weak) */
  int64_t out_off;             /* elements */
  const char *fn;              /* the public call that recorded it */
  unsigned long seq;           /* its number among recorded calls, for messages */
  /* A trailing op of its one input (red >= 0: CT__RED_* or CT__FR_*): a reduction over every element (shape
   * is the input's, the result one element of dtype odt; mean: the sum divided by n), or
   * softmax / log_softmax over the last dim (the result has the input's shape). */
  int red;
  bool mean;
  bool cast;                   /* ct_cast: the value of its input converted to odt (= l.k) */
  /* realize */
  bool needed, store;
  int kern;
  int var;                     /* its variable in the generated kernel: v<var> (position there) */
  ct_tensor *tmp;              /* a temporary result, when store is set and out is NULL */
};

/* A growing text buffer for generated source. */
struct ct__buf {
  struct ct__text t;
  bool skip; /* collect the operands only, no text */
};

/* Appends printf-formatted text (nothing when b->skip or after a failure, which sets oom). */
void ct__put(struct ct__buf *b, const char *fmt, ...) CT__PRINTF(2, 3);

/* An operand in memory: a leaf, or a node computed by an earlier kernel. */
struct ct__fop {
  cl_mem mem;
  int64_t off;
  ct_dtype dt;
  int kind;                    /* 0 element i, 1 one element, 2 through strides */
  int64_t st[CT_MAX_DIMS];     /* strides over the kernel's dims (0 where broadcast) */
  bool cond;                   /* read as a where() condition (EW_NZ) rather than a value */
};

/* One kernel being generated. */
struct ct__fgen {
  int kk;
  ct_device *dev;
  ct_dtype k;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t n;
  struct ct__fop ops[3 * CT__FUSE_MAX_NODES];
  int nops;
  ct__ew_scalar sc[2 * CT__FUSE_MAX_NODES];
  int nsc;
  struct ct__fnode *outs[CT__FUSE_MAX_NODES];
  int nouts;
  bool strided;
  bool cpu_red;   /* reductions take the CPU layout (chunks per work-item) */
  /* What the source depends on, as numbers (filled by ct__gen_kernel, text or not): the key
   * the graph looks built kernels up by, so that a realize prints source only to build it. */
  int64_t sig[16 + 5 * 3 * CT__FUSE_MAX_NODES + 2 * CT__FUSE_MAX_NODES + 12 * CT__FUSE_MAX_NODES];
  int nsig;
};

/* Whether g's strided index arithmetic divides by multiplying (ct__fuse_magic): every index
 * below 2^31, with room for a guarded kernel's work-items past n. */
static inline bool ct__fgen_magic(const struct ct__fgen *g) { return g->strided && g->n < ((int64_t)1 << 30); }
/* For a divisor d in [1, 2^31): *m and *s with q = (r * m) >> s == r / d for every r < 2^31
 * (codegen.c). */
void ct__fuse_magic(int64_t d, int64_t *m, int64_t *s);

/* The source of the kernel `name` computing nodes[0..nn) (one kernel's, in call order; their
 * kern is g->kk): the unchecked whole-group variant when full; red, the kernel's trailing
 * reduction or softmax, or NULL. Fills g's operand table, outputs and scalars, which the
 * launch passes in that order. With b->skip only the table is filled. */
void ct__gen_kernel(struct ct__buf *b, struct ct__fgen *g, struct ct__fnode **nodes, int nn, const char *name,
                    bool full, struct ct__fnode *red);
/* The second pass of the reduction red: combines the parts, writes the result. */
void ct__gen_final(struct ct__buf *b, const struct ct__fnode *red, const char *name);
/* Bytes of a reduction's accumulator over values of dtype k. */
size_t ct__acc_size(ct_dtype k);
/* The dtype whose accumulator the reduction red uses: its input's (as reduce.cl chooses). */
ct_dtype ct__red_acc_dtype(const struct ct__fnode *red);
/* The op a node computes, for kernel names ("mul", "cast", "sum", ...). */
const char *ct__node_name(const struct ct__fnode *nd);
/* "fz_<op>_<op>..." for the kernel of nodes[0..nn). */
void ct__kernel_name_of(char *name, size_t size, struct ct__fnode **nodes, int nn);

/* ---- The graph (graph.c) ---- */

/* A thread's graph (issue #28). Each thread records into its own, so the kernels a thread's
 * realize builds depend only on what that thread called: with one process-wide list, unrelated
 * threads' nodes met in one kernel whose text followed the threads' timing, and new texts kept
 * being compiled. Other threads take the lock only to realize this graph when they use its
 * memory (ct__use), to drop a write whose result they released (ct__storage_dead), and at
 * ct_shutdown. Graphs are never freed: a storage's fwriter/freaders may name one at any time.
 * A thread's graph is realized when the thread exits, then kept for a later thread. */
struct ct__fgraph {
  pthread_mutex_t lock;
  struct ct__fnode **v;        /* in call order */
  size_t n, cap;
  atomic_size_t count;         /* n, for looks without the lock */
  bool owned;                  /* a live thread records into it (under the registry lock) */
  struct ct__fgraph *next;     /* the registry */
};

/* Takes / leaves g's lock, noting that this thread holds it (a storage_dead from inside then
 * does not take it again). A thread holds at most one graph's lock. */
void ct__fgraph_lock(struct ct__fgraph *g);
void ct__fgraph_unlock(struct ct__fgraph *g);
/* Releases a node's leaves and temporary, and frees it. */
void ct__fnode_free(struct ct__fnode *nd);
/* Whether $CLTENSOR_DEBUG_FUSION is on (read once). */
bool ct__fusion_debug(void);
/* The counters behind ct__fusion_stats(). */
#define CT__FUSION_COUNTER(name) atomic_ulong name;
struct ct__fusion_counters {
  CT__FUSION_COUNTERS(CT__FUSION_COUNTER)
};
extern struct ct__fusion_counters ct__fstats;

/* ---- Realizing (realize.c) ---- */

/* Realizes gr (locked by this thread, which is marked as realizing): each round that finds
 * programs missing unlocks gr, builds them (or waits for the thread building them) and starts
 * again, since gr may have changed meanwhile (a result released, another thread realizing it).
 * Errors name fn. */
ct_status ct__realize_graph(struct ct__fgraph *gr, const char *fn);

/* ---- Scheduling (schedule.c) ---- */

/* One kernel of a realize: what the schedule decides, and what its launch needs besides the
 * generated operand table. */
struct ct__fkern {
  ct_device *dev;
  ct_dtype k;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t n;
  int first, count;       /* nodes in order[] */
  ct__kernel *kf, *kc;    /* the unchecked (whole groups) and checked programs */
  struct ct__fnode *red;  /* its trailing reduction, or NULL */
  ct__kernel *kfin;       /* the reduction's second pass */
  struct ct__fk *pin[2];  /* the cache entries of its programs, pinned until enqueued */
  ct_tensor *part;        /* the reduction's partials */
  int64_t parts, chunk;
};

/* Schedules the nodes v[0..n) of a graph, in call order: marks each node needed or not, whether
 * its value must be stored (store) and its kernel (kern); fills ks[0..nk) (zeroed by the caller,
 * room for n) with each kernel's key and trailing op, and order[] with the needed nodes, kernel
 * by kernel (ks[q].first, ks[q].count). Returns nk. Allocates nothing. */
int ct__schedule(struct ct__fnode **v, size_t n, struct ct__fkern *ks, struct ct__fnode **order);
/* Clears what a schedule (and a realize round) marked on v[0..n), releasing temporaries. */
void ct__unschedule(struct ct__fnode **v, size_t n);

/* ---- The table of built kernels (cache.c) ---- */

/* An entry of the table: one program of one device, keyed by its signature. */
struct ct__fk {
  ct_device *dev;
  uint64_t hash;
  int64_t *sig;
  int nsig;
  ct__kernel *k;     /* NULL while being built */
  bool building;
  int users;         /* realizes holding it, and the builder */
  unsigned long used;
};
/* The built kernel of signature sig on d, pinned (ct__lru_unpin), or NULL when it is not built
 * (or being built): never waits. */
struct ct__fk *ct__lru_pin(ct_device *d, const int64_t *sig, int nsig);
void ct__lru_unpin(struct ct__fk *e);
/* The kernel `name` of src (signature sig) on d, pinned: found, or built here (outside every
 * lock), or waited for while another thread builds it. Called with no graph lock held. A failed
 * build takes its entry away again: a thread waiting for it builds (and reports) for itself. */
ct_status ct__lru_acquire(struct ct__fk **out, ct_device *d, const int64_t *sig, int nsig, const char *src,
                          const char *name, const char *opts);
/* ct_shutdown: every entry no realize holds is released; the rest go with their holders. */
void ct__lru_drop(void);

/* ---- Launching (launch.c) ---- */

/* A fused reduction's split into K->parts partials. Lanes: K->parts groups of `local` items in
 * a grid-stride loop of K->chunk elements an item (a few groups per compute unit, each loop
 * within ct__device_loop_budget). Chunked (cpu): a work-item alone in its group per chunk of
 * K->chunk, four per compute unit, chunks of at least 8192 elements. */
void ct__red_split(struct ct__fkern *K, size_t local, bool cpu);
/* Enqueues kernel K, whose operand table g holds (ct__gen_kernel with b->skip): its launches,
 * and a reduction's second pass. Errors name fn. */
ct_status ct__fusion_launch(struct ct__fkern *K, struct ct__fgen *g, const char *fn);

#endif
