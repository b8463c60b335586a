/* Scopes: temporaries freed together, errors checked once.
 *
 * A scope owns the tensors made inside it and releases them when it ends, as an Objective-C
 * autorelease pool or a ggml context; while it is open, a failed call makes it fail, and every
 * later call in it returns that first error at once without doing anything, as a cairo_t in
 * an error state. So a function is its ops and one check:
 *
 *   // OUT: *out, relu(x @ w1 + b1) @ w2 + b2. The temporaries go with the scope.
 *   ct_status mlp_forward(ct_tensor **out, const mlp *m, const ct_tensor *x) {
 *     ct_tensor *h, *a;
 *     ct_scope_begin();
 *     ct_linear(&h, x, m->w1, m->b1);
 *     ct_relu(&a, h);
 *     ct_linear(out, a, m->w2, m->b2);
 *     return ct_scope_end_keep(out);   // *out survives (the caller's), h and a are released
 *   }
 *
 * If ct_linear() fails, ct_relu() and the second ct_linear() return its status without work
 * (their outs are NULL), and ct_scope_end_keep() returns it with *out NULL; ct_last_error()
 * then holds the first failure's message, which starts with the failed call's name
 * ("ct_linear: ..."). Every call still returns its own status as before: checking each one
 * remains possible, and needed where a later step depends on a value on the host.
 *
 * What a scope owns. Every tensor reference a public call hands out through a `ct_tensor **`
 * out-parameter (results of ops, views, ct_grad, ct_contiguous's no-op retain, ct_chunk's
 * pieces, a loaded tensor, ...) while the calling thread has a scope open belongs to the
 * innermost one. References the library keeps for itself (tensors autograd saved, gradients,
 * optimizer state, the fusion graph's) are not the scope's: they live as before. ct_retain()'s
 * extra reference is the caller's, not the scope's. Tensors made before the scope began are
 * untouched. Only tensors are owned: devices, optimizers, safetensors files, events and pinned
 * buffers keep their own destructors.
 *
 * Keeping a result. ct_keep(t) moves t's reference from the innermost scope to the enclosing
 * one, or, from the outermost scope, to the caller, who releases it as usual; ct_scope_end_keep
 * does that for a function's out-parameter and ends the scope. ct_release() of a tensor a scope
 * owns is allowed: the scope forgets it (one entry per reference handed out), so nothing is
 * ever released twice; code written before scopes (a release per temporary) works inside one.
 *
 * Autograd. A node holds its own references to what its backward needs, and a result holds
 * its node: releasing a scope's temporaries never frees a saved tensor. A loss computed in a
 * scope and kept can be backpropagated after the scope ended; the gradients accumulated into
 * leaves are the leaves', never a scope's (ct_grad()'s reference inside a scope is the
 * scope's). A result that was not kept is released with the scope, and its graph with it.
 *
 * Threads. Scopes are per thread: a scope owns only what its own thread's calls made, and
 * ending it releases only those. To hand a tensor made in a scope to another thread, ct_keep()
 * it (or ct_retain() it for the other thread) before the scope ends: a tensor still owned by
 * thread A's scope is released when A's scope ends, whatever thread B does with it, and B's
 * ct_release() of it does not take it out of A's scope. A thread must end its scopes before it
 * exits (what an open scope owns is otherwise never released).
 *
 * The sticky error, exactly. While the innermost scope of the calling thread has failed, every
 * public function that returns ct_status and is not listed below returns the first error at
 * once, sets its pointer out-parameters to NULL (a piece count such as ct_chunk's to 0) and
 * ct_last_error() to the first error's message, and does nothing else: ops, creation,
 * transfers (ct_to_host too: the data is not there), I/O, optimizer steps, device queries.
 * These always run, failed scope or not:
 *   - ct_release(), ct_retain(), and every function that does not return ct_status (property
 *     queries, destructors such as ct_optimizer_free, ct_set_grad_enabled, ct_last_error);
 *   - ct_event_wait() and ct_device_synchronize(), which end work started before the failure
 *     (a transfer into a host buffer must be waited for before the buffer is freed);
 *   - ct_autocast_set_dtype(), which restores thread state;
 *   - the functions of this header.
 * A failure of any public call (those that always run too) while a scope is open becomes the
 * scope's first error unless it has one. Failures inside the library that it handles itself
 * never reach the scope. A nested scope begun inside a failed one starts failed with the same
 * error; a nested scope's failure, returned by its ct_scope_end(), becomes the enclosing
 * scope's error like any failed call's (its message still names the call that failed first).
 * There is no way to clear a scope's error: a call whose failure is expected (probing for f64
 * support) belongs outside scopes. A scope begun after the failed one ended is clean.
 *
 * Cost: a call outside any scope pays one thread-local load; inside one, a few more steps and
 * one slot (8 bytes) per tensor handed out, in an array that grows by doubling (a long loop in
 * one scope holds every temporary of every iteration until the end: begin a scope per
 * iteration). Scopes nest as deep as memory allows. */
#ifndef CLTENSOR_SCOPE_H
#define CLTENSOR_SCOPE_H

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* Opens a scope in the calling thread, nested in the current one if any. Always opens one, so
 * that it is always paired with exactly one ct_scope_end (or ct_scope_end_keep):
 *   - inside a failed scope, the new scope starts failed with that error, which it returns;
 *   - when the scope's record cannot be allocated, a failed scope (every call in it returns
 *     CT_ERR_OUT_OF_MEMORY) is opened, and CT_ERR_OUT_OF_MEMORY returned.
 * CT_OK otherwise. */
CT_API ct_status ct_scope_begin(void);

/* Ends the calling thread's innermost scope: releases every tensor reference it owns (its
 * contents go when no one else holds them) and returns its first error, or CT_OK; a failed
 * scope sets ct_last_error() to that error's message, and its error becomes the enclosing
 * scope's (if any, and clean). CT_ERR_INVALID_ARGUMENT when the thread has no scope open
 * (nothing is done). */
CT_API ct_status ct_scope_end(void);

/* Ends the innermost scope keeping *t for the caller: when the scope has not failed, *t (a
 * reference the scope owns) moves to the enclosing scope, or to the caller (to release) at
 * the outermost one, and the scope ends as ct_scope_end(). When it has failed, or *t is NULL or
 * not owned by this scope (CT_ERR_INVALID_ARGUMENT), *t is set to NULL (its reference, if the
 * scope owned it, goes with the scope) and the scope still ends; the status is the first error.
 * t NULL, or no scope open: CT_ERR_INVALID_ARGUMENT and, with t NULL, the scope still ends. */
CT_API ct_status ct_scope_end_keep(ct_tensor **t);

/* Moves t's reference from the innermost scope to the enclosing one, or out of every scope
 * (the caller's, to release) from the outermost one. Works in a failed scope too (ownership is
 * bookkeeping, not work). Statuses: CT_ERR_INVALID_ARGUMENT when no scope is open or the
 * innermost scope does not own t (made outside it, kept or released already); t NULL: the
 * scope's first error when it has failed (the call that should have made t was skipped), else
 * CT_ERR_INVALID_ARGUMENT. A failure becomes the scope's error like any call's. */
CT_API ct_status ct_keep(ct_tensor *t);

/* The innermost scope's first error, or CT_OK (also when no scope is open); when it has one,
 * ct_last_error() is set to its message. Reads only. */
CT_API ct_status ct_scope_status(void);

/* How many scopes the calling thread has open (0 outside any). */
CT_API int ct_scope_depth(void);

CT_END_DECLS

#endif
