/* The recording side of autograd (issue #15): the backward graph's nodes, grad mode, saved
 * tensors with version checks, and what an op calls to record its backward.
 *
 * It lives in the tensor layer because every op family records through it; the formulas that
 * turn an output's gradient into the inputs' and the engine that runs them (ct_backward) are in
 * src/autograd/, above every op family (a node is data: its op id from grad_ops.def, edges,
 * and the typed record its row names, grad_records.h; the formula table keyed by op id reads
 * it).
 *
 * Ownership, and why there are no cycles:
 *   - a non-leaf tensor owns one reference to its grad_fn node;
 *   - a node owns one reference to each input edge's producer node, or to the input tensor
 *     itself when that input is a leaf that requires grad (gradients accumulate into it);
 *   - saved tensors are *detached* headers over the same storage (no grad_fn), so a node
 *     saving its own output (exp saves exp(x)) does not reference itself.
 * Release is iterative (ct__node_release), so a graph thousands of ops deep frees without deep
 * recursion.
 *
 * How an op records (after computing its result r, before handing it out), here softmax,
 * whose row SOFTMAX names the record ct__rec_softmax (grad_records.h):
 *
 *   ct__node *n;
 *   st = ct__grad_record(&n, r, CT__GOP_SOFTMAX, 0, 1, (const ct_tensor *[]){x}, fn);
 *   if (st == CT_OK && n) {
 *     ct__rec_softmax *rec = ct__rec_SOFTMAX(n);
 *     rec->dim = dim;                                      // the op's arguments
 *     st = ct__grad_save_as(n, &rec->out, r, fn);          // tensors the formula needs
 *   }
 *   return ct__tensor_result(out, r, st);                  // releases r (and n) on error
 *
 * ct__grad_record leaves *n NULL (and records nothing) when grad mode is off or no input
 * requires grad, so the forward pays one branch when nobody trains. */
#ifndef CT_TENSOR_GRAPH_H
#define CT_TENSOR_GRAPH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tensor/grad_records.h"
#include "tensor/tensor.h"

typedef enum ct__gop {
#define CT__GOP(NAME, formula, rec, check) CT__GOP_##NAME,
#include "tensor/grad_ops.def"
#undef CT__GOP
  CT__GOP_COUNT
} ct__gop;

/* The op name of a row ("EW", "MATMUL", ...) for messages. */
const char *ct__gop_name(ct__gop op);

enum { CT__NODE_SAVED = 6 };

/* One input of a node: where its gradient goes, and its shape and dtype, to which the engine
 * reduces (broadcast dims summed) and casts whatever the formula returns. */
typedef struct ct__edge {
  struct ct__node *fn; /* the input's producer (one reference), or NULL */
  ct_tensor *leaf;     /* the input itself when it is a leaf that requires grad (one reference) */
  bool needed;         /* fn || leaf: the formula must produce this input's gradient */
  ct_dtype dtype;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  ct_device *device;
} ct__edge;

typedef struct ct__node {
  atomic_int refs;
  ct__gop op;
  int sub;        /* per-op variant (EW: the elementwise op) */
  const char *fn; /* the public call that recorded it, for messages (a string literal) */
  uint64_t seq;   /* creation order: the engine runs later nodes first */
  int nin;
  ct__edge *in; /* nin edges */
  /* The output: the formula gets a gradient of this shape and dtype. */
  ct_dtype out_dtype;
  int out_ndim;
  int64_t out_shape[CT_MAX_DIMS];
  /* Tensors the formula needs: detached headers (NULL when unused) and the storage version at
   * save time; a later in-place write to one makes ct_backward fail instead of computing a
   * wrong gradient. Freed as soon as the node's backward ran. */
  ct_tensor *saved[CT__NODE_SAVED];
  unsigned saved_version[CT__NODE_SAVED];
  /* What the formula reads: the record the op's row names (grad_records.h), through
   * ct__rec_<NAME>(n). Its saved-tensor fields alias saved[] (saved_as: which field each slot
   * fills, set back to NULL when the slot is freed). */
  ct__grad_rec rec;
  const ct_tensor **saved_as[CT__NODE_SAVED];
  /* Backward-pass state (the engine's; a graph is backpropagated by one thread at a time). */
  bool done; /* its backward ran (or the graph was freed by a failed pass): saved tensors gone */
  int deps;
  ct_tensor *gacc;
  struct ct__node *next_ready;
} ct__node;

/* A gradient hook on a leaf (issue #31: DDP starts a bucket's all-reduce as soon as its
 * parameters' gradients are final, overlapping the rest of the backward). The engine counts the
 * edges of the pass that reach a hooked leaf; after the last one ran, it commits that leaf's
 * gradient at once (instead of with the others at the end of the pass, so a failure later in
 * the pass leaves it committed) and calls ready(ctx, leaf): leaf->grad is then what the pass
 * leaves in it (NULL when nothing reached it). At the end of the pass it calls pass_end(ctx, st)
 * once per distinct hook whose leaves the pass reached, st being the pass's status so far; a
 * failure of either becomes ct_backward's status (pass_end is still called after a failed
 * ready). Both run on the thread of ct_backward, with grad mode off. */
typedef struct ct__grad_hook {
  ct_status (*ready)(void *ctx, ct_tensor *leaf);
  ct_status (*pass_end)(void *ctx, ct_status st);
  void *ctx;
} ct__grad_hook;

/* Grad mode, per thread (PyTorch's torch.no_grad / set_grad_enabled). On by default. */
bool ct__grad_mode(void);
bool ct__grad_mode_set(bool on); /* returns the previous value */

/* Autocast (ct_autocast_set_dtype): the calling thread's low-precision dtype, CT_F32 when off. The
 * ops on torch.autocast's lists read it (linalg, nn) and cast through ct__autocast_input(). */
ct_dtype ct__autocast_dtype(void);
/* Composite ops and the backward pass run their inner ops with autocast off (the outer op
 * decided the dtypes; PyTorch's backward runs in the forward's dtypes): suspend returns the
 * setting to give back to resume. */
ct_dtype ct__autocast_suspend(void);
void ct__autocast_resume(ct_dtype prev);
/* *out = x as dtype dt when x is floating and of another dtype (ct_cast, so autograd records
 * the cast and gradients flow back to x's dtype), else x itself retained. fn names the op. */
ct_status ct__autocast_to(ct_tensor **out, const ct_tensor *x, ct_dtype dt, const char *fn);

/* Whether an op with these inputs records a node: grad mode is on and one input requires grad.
 * NULL inputs are skipped. */
bool ct__grad_needed(int nin, const ct_tensor *const *ins);

/* Records a node for result r, made by public call fn from inputs ins[0..nin) (NULL entries are
 * inputs that do not exist, e.g. an absent bias). *node = NULL and nothing happens when
 * ct__grad_needed() is false. Otherwise r requires grad and owns the node (so releasing r on a
 * later failure frees it); the caller fills the node's saved tensors and arguments. Integer and
 * bool results record nothing (never differentiable). CT_ERR_OUT_OF_MEMORY when the node can't be allocated. */
ct_status ct__grad_record(ct__node **node, ct_tensor *r, ct__gop op, int sub, int nin, const ct_tensor *const *ins,
                          const char *fn);
/* Saves t (may be NULL: nothing saved) for the formula as the record field *field (a field of
 * n->rec): a detached header over t's storage, kept in a free slot of n->saved with t's version
 * now; *field points to it until the node's saved tensors are freed, then is NULL again.
 * CT_ERR_INTERNAL when every slot is taken. */
ct_status ct__grad_save_as(ct__node *n, const ct_tensor **field, const ct_tensor *t, const char *fn);

/* The typed record of a node of row NAME: ct__rec_<NAME>(n), of the type the row's rec column
 * names (the op that records fills it, the formula reads it). */
#define CT__GOP(NAME, formula, R, check) \
  static inline ct__rec_##R *ct__rec_##NAME(ct__node *n) { return &n->rec.R; }
#include "tensor/grad_ops.def"
#undef CT__GOP

/* Reference counting of nodes (release is iterative; NULL is a no-op). */
void ct__node_retain(ct__node *n);
void ct__node_release(ct__node *n);
/* Frees the saved tensors of n (after its backward ran) and marks it done. */
void ct__node_free_saved(ct__node *n);

/* Version counters: every write into existing memory (_out forms, in-place ops, copies into a
 * tensor, transfers from the host, optimizer steps) bumps the storage's version. */
static inline void ct__tensor_bump_version(ct_tensor *t) {
  if (t) atomic_fetch_add_explicit(&t->storage->version, 1u, memory_order_relaxed);
}
static inline unsigned ct__tensor_version(const ct_tensor *t) {
  return atomic_load_explicit(&t->storage->version, memory_order_relaxed);
}

/* The checks writes make under autograd, as PyTorch's:
 * ct__grad_check_out: an _out form whose input requires grad in grad mode is refused
 *   (CT_ERR_INVALID_ARGUMENT: "<fn>: functions with an out argument don't support automatic
 *   differentiation, but argument '<name>' requires grad ..."); names[] name ins[].
 * ct__grad_check_inplace: writing into t in place when t requires grad in grad mode is
 *   refused ("<fn>: a tensor that requires grad (leaf or not) can't be written in place while
 *   grad mode is on ..."). Optimizers write parameters with grad mode off, as PyTorch's do. */
ct_status ct__grad_check_out(const char *fn, int nin, const ct_tensor *const *ins, const char *const *names);
ct_status ct__grad_check_inplace(const char *fn, const ct_tensor *t, const char *name);

#endif
